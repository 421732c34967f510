//! Harness programs: the bug suite (known-buggy programs with fixed twins) and
//! the small programs the engine's own tests run, with the code that builds
//! them.
//!
//! Each harness is a directory `harnesses/<name>/` holding its sources and a
//! `harness.toml` manifest ([`Manifest`]):
//!
//! ```toml
//! description = "Five philosophers, each takes the left fork then the right."
//! language = "c"                 # c | cpp | rust | rust-test
//! sources = ["philosophers.c"]
//! flags = ["-Wall"]              # appended to the language's default flags
//! static = false                 # link statically (C and C++ only)
//! args = []                      # arguments to run it with
//! stdout = "5 philosophers ate 15 meals\n"   # what a native (passing) run prints
//! [expect]                       # what the buggy build does under some schedule
//! kind = "deadlocked"
//! depth = 1
//! needs_shim = true
//! [fixed]                        # the fixed twin: built with -DFIXED / --cfg fixed
//! ```
//!
//! A harness with a `[fixed]` table belongs to the bug suite: its buggy build
//! reaches `[expect]` under some schedule and exits 0 under most others, and
//! its fixed twin exits 0 under every schedule. A harness without one is an
//! engine test: `[expect]` holds under every schedule.
//!
//! [`build`] compiles a harness with `gcc`, `g++` or `rustc` from `PATH` into
//! `<target-dir>/harnesses/<name>` (and `<name>-fixed`), where `<target-dir>`
//! is `$CARGO_TARGET_DIR` or `target/` beside the `harnesses/` directory.

use std::ffi::OsString;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Component, Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::SystemTime;

use serde::Deserialize;

/// File name of a harness's manifest inside its directory.
pub const MANIFEST_FILE: &str = "harness.toml";

/// The language of a harness, which picks the compiler and its default flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Language {
    /// C, built with `gcc -g -O1 -pthread`.
    #[default]
    C,
    /// C++17, built with `g++ -g -O1 -pthread -std=c++17`.
    Cpp,
    /// A Rust program, built with `rustc -g -C opt-level=1`.
    Rust,
    /// A Rust test crate, built with `rustc --test` (the libtest harness).
    RustTest,
}

impl Language {
    /// The compiler this language is built with, looked up on `PATH`.
    pub fn compiler(self) -> &'static str {
        match self {
            Language::C => "gcc",
            Language::Cpp => "g++",
            Language::Rust | Language::RustTest => "rustc",
        }
    }

    /// The flags every harness of this language gets before its own `flags`.
    pub fn default_flags(self) -> &'static [&'static str] {
        match self {
            Language::C => &["-g", "-O1", "-pthread"],
            Language::Cpp => &["-g", "-O1", "-pthread", "-std=c++17"],
            Language::Rust | Language::RustTest => {
                &["--edition", "2021", "-g", "-C", "opt-level=1"]
            }
        }
    }

    fn is_rust(self) -> bool {
        matches!(self, Language::Rust | Language::RustTest)
    }
}

/// How a run ends: the outcome kinds a manifest can expect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExpectKind {
    /// The process exited by itself with a status code (`code`, default 0).
    Exited,
    /// A fatal signal ended the process (`signal`).
    Crashed,
    /// Every thread blocked for good: a wait-for cycle or nobody left to wake anyone.
    Deadlocked,
    /// The run never ends: it is stopped by a budget (`budget`).
    Hung,
    /// The run ends normally but takes locks in an order that could deadlock
    /// under another schedule (a cycle in the lock-order graph).
    PotentialDeadlock,
    /// The program makes a system call the monitor does not implement (`syscall`).
    Unsupported,
    /// The program exits, but its output oracle (`expect_stdout`, `oracle`)
    /// rejects what it printed.
    WrongOutput,
}

/// Which budget stops a run that never ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HangBudget {
    /// The step budget: the program keeps making scheduling points.
    Steps,
    /// The wall-clock watchdog: the program spins without any scheduling point.
    Watchdog,
}

/// What a harness does: for a bug-suite program, what its buggy build does
/// under some schedule; for an engine test, what it does under every schedule.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// How the run ends.
    pub kind: ExpectKind,
    /// Exit status, for `kind = "exited"` (0 when absent).
    pub code: Option<i32>,
    /// Signal name such as `"SIGSEGV"`, for `kind = "crashed"`.
    pub signal: Option<String>,
    /// Name of the unimplemented system call, for `kind = "unsupported"`.
    pub syscall: Option<String>,
    /// Which budget ends the run, for `kind = "hung"`.
    pub budget: Option<HangBudget>,
    /// Bug depth: the fewest preemptions (switches away from a thread that
    /// could have gone on) that reach the bug, when the scheduler may pick
    /// any runnable thread whenever the running one blocks or exits (the
    /// preemption bound of CHESS). PCT needs `d >= depth + 1`, and more when
    /// the bug also needs particular picks at those blocking points (its
    /// priorities must produce them too), as the dining philosophers do.
    pub depth: Option<u32>,
    /// True when the bug window holds only pthread operations, no system
    /// call, so only the preload shim's scheduling points can reach it.
    #[serde(default)]
    pub needs_shim: bool,
    /// The scheduling points in user code the bug needs (`atomics`,
    /// `globals`); `calls` when system and pthread calls suffice.
    #[serde(default)]
    pub sync_points: crate::code::SyncPoints,
}

impl Expect {
    /// The outcome every fixed twin must have: exit status 0.
    pub fn exit_zero() -> Expect {
        Expect {
            kind: ExpectKind::Exited,
            code: Some(0),
            signal: None,
            syscall: None,
            budget: None,
            depth: None,
            needs_shim: false,
            sync_points: crate::code::SyncPoints::Calls,
        }
    }

    /// The expected exit status when `kind = "exited"`.
    pub fn exit_code(&self) -> Option<i32> {
        (self.kind == ExpectKind::Exited).then_some(self.code.unwrap_or(0))
    }

    /// The expected signal's number when `kind = "crashed"` names one.
    pub fn signal_number(&self) -> Option<i32> {
        self.signal.as_deref().and_then(signal_number)
    }
}

/// The fixed twin of a bug-suite harness: the same sources built with
/// `-DFIXED` (C, C++) or `--cfg fixed` (Rust). It must exit 0 under every
/// schedule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fixed {
    /// How the fix works, when the program's own comment is not enough.
    pub description: Option<String>,
    /// The fixed twin of a prebuilt `program`: its path.
    pub program: Option<PathBuf>,
}

/// The contents of a `harness.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// One sentence on what the program does (and its bug).
    pub description: String,
    /// Language, which picks the compiler (C when absent).
    #[serde(default)]
    pub language: Language,
    /// Source files relative to the harness directory. C and C++ compile all
    /// of them; Rust compiles the first (the crate root) and rebuilds when
    /// any of them changes. With `build`, the files whose change means a
    /// rebuild.
    #[serde(default)]
    pub sources: Vec<PathBuf>,
    /// A program already built (absolute, or relative to the harness
    /// directory), run as it is: no sources, no compiler.
    pub program: Option<PathBuf>,
    /// A shell command (`sh -c`, in the harness directory) that builds the
    /// program into `$OUT`, with `FIXED=1` for the fixed twin; run once,
    /// and again when a source or the manifest changes.
    pub build: Option<String>,
    /// Compiler flags appended after the language's default flags.
    #[serde(default)]
    pub flags: Vec<String>,
    /// Link statically (C and C++ only).
    #[serde(default, rename = "static")]
    pub static_link: bool,
    /// Arguments to run the program with.
    #[serde(default)]
    pub args: Vec<String>,
    /// The step budget of a run (the engine's default when absent): a bug
    /// that hangs in a loop of system calls ends there.
    pub max_steps: Option<u64>,
    /// Exactly what a native run prints on stdout: for a bug-suite program,
    /// a passing run (its fixed twin prints the same); for an engine test
    /// that crashes, hangs or deadlocks, what it prints first. (Natively the
    /// unsupported call just fails, so `unimplemented` prints one more line
    /// there than in the VM.)
    pub stdout: Option<String>,
    /// Lines or fragments a passing run's stdout contains, for programs
    /// whose output order varies (libtest).
    #[serde(default)]
    pub stdout_contains: Vec<String>,
    /// The exit codes of a run that went right (default: 0 only): a
    /// program whose normal exit code is 3 says `ok_codes = [3]`.
    #[serde(default = "zero")]
    pub ok_codes: Vec<i32>,
    /// A file (relative to the harness directory) holding the exact stdout
    /// of a correct run: runs printing anything else are `wrong-output`.
    pub expect_stdout: Option<PathBuf>,
    /// A host command (`sh -c`, in the harness directory) that reads a
    /// run's stdout and exits non-zero for a wrong result.
    pub oracle: Option<String>,
    /// What the (buggy) build does.
    pub expect: Expect,
    /// The fixed twin, for bug-suite harnesses.
    pub fixed: Option<Fixed>,
}

fn zero() -> Vec<i32> {
    vec![0]
}

impl Manifest {
    /// Parses and checks a manifest's text.
    pub fn parse(text: &str) -> Result<Manifest, ManifestError> {
        let manifest: Manifest = toml::from_str(text).map_err(Box::new)?;
        manifest.check().map_err(ManifestError::Invalid)?;
        Ok(manifest)
    }

    /// Consistency checks serde cannot express.
    fn check(&self) -> Result<(), String> {
        if self.description.trim().is_empty() {
            return Err("`description` is empty".into());
        }
        if self.program.is_some() && (self.build.is_some() || !self.sources.is_empty()) {
            return Err("a prebuilt `program` takes no `sources` or `build`".into());
        }
        if self.program.is_none() && self.build.is_none() && self.sources.is_empty() {
            return Err(
                "`sources` is empty; give sources, a `build` command or a `program`".into(),
            );
        }
        if let Some(f) = &self.fixed {
            if self.program.is_some() && f.program.is_none() {
                return Err(
                    "the fixed twin of a prebuilt `program` needs `[fixed] program`".into(),
                );
            }
            if self.program.is_none() && f.program.is_some() {
                return Err("`[fixed] program` is only for a prebuilt `program`".into());
            }
        }
        for source in &self.sources {
            let relative = source
                .components()
                .all(|c| matches!(c, Component::Normal(_) | Component::ParentDir));
            if !relative {
                return Err(format!(
                    "source `{}` must be a path relative to the harness directory",
                    source.display()
                ));
            }
        }
        if self.static_link && self.language.is_rust() {
            return Err("`static` is only supported for c and cpp".into());
        }
        let e = &self.expect;
        if e.code.is_some() && e.kind != ExpectKind::Exited {
            return Err("`expect.code` is only meaningful with kind = \"exited\"".into());
        }
        if let Some(name) = &e.signal {
            if e.kind != ExpectKind::Crashed {
                return Err("`expect.signal` is only meaningful with kind = \"crashed\"".into());
            }
            if signal_number(name).is_none() {
                return Err(format!("unknown signal `{name}` in `expect.signal`"));
            }
        }
        if e.syscall.is_some() && e.kind != ExpectKind::Unsupported {
            return Err("`expect.syscall` is only meaningful with kind = \"unsupported\"".into());
        }
        if e.budget.is_some() && e.kind != ExpectKind::Hung {
            return Err("`expect.budget` is only meaningful with kind = \"hung\"".into());
        }
        if self.expect_stdout.is_some() && self.oracle.is_some() {
            return Err("give `expect_stdout` or `oracle`, not both".into());
        }
        if e.kind == ExpectKind::WrongOutput
            && self.expect_stdout.is_none()
            && self.oracle.is_none()
        {
            return Err(
                "kind = \"wrong-output\" needs an oracle: `expect_stdout` or `oracle`".into(),
            );
        }
        if self.ok_codes.is_empty() {
            return Err("`ok_codes` is empty; leave it out for 0".into());
        }
        Ok(())
    }
}

/// Why a manifest's text was rejected.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// Not valid TOML, or fields unknown, missing or of the wrong type.
    #[error(transparent)]
    Toml(#[from] Box<toml::de::Error>),
    /// Fields that do not fit together.
    #[error("{0}")]
    Invalid(String),
}

/// Number of a signal given by name (`"SIGSEGV"`), for the signals a test
/// program can die of.
pub fn signal_number(name: &str) -> Option<i32> {
    let number = match name {
        "SIGHUP" => libc::SIGHUP,
        "SIGINT" => libc::SIGINT,
        "SIGQUIT" => libc::SIGQUIT,
        "SIGILL" => libc::SIGILL,
        "SIGTRAP" => libc::SIGTRAP,
        "SIGABRT" => libc::SIGABRT,
        "SIGBUS" => libc::SIGBUS,
        "SIGFPE" => libc::SIGFPE,
        "SIGKILL" => libc::SIGKILL,
        "SIGUSR1" => libc::SIGUSR1,
        "SIGSEGV" => libc::SIGSEGV,
        "SIGUSR2" => libc::SIGUSR2,
        "SIGPIPE" => libc::SIGPIPE,
        "SIGALRM" => libc::SIGALRM,
        "SIGTERM" => libc::SIGTERM,
        "SIGSYS" => libc::SIGSYS,
        _ => return None,
    };
    Some(number)
}

/// Which build of a harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    /// The program as written, with its bug.
    Buggy,
    /// The fixed twin (`-DFIXED` / `--cfg fixed`).
    Fixed,
}

impl Variant {
    /// Both variants, buggy first.
    pub const ALL: [Variant; 2] = [Variant::Buggy, Variant::Fixed];

    /// Lower-case name: `buggy` or `fixed`.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Buggy => "buggy",
            Variant::Fixed => "fixed",
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A harness: its name (the directory's), directory and manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Harness {
    /// Directory name, also the binary's name.
    pub name: String,
    /// The directory holding the sources and `harness.toml`.
    pub dir: PathBuf,
    /// The parsed manifest.
    pub manifest: Manifest,
}

impl Harness {
    /// Loads the harness in `dir`, checking that its sources exist.
    pub fn load(dir: &Path) -> Result<Harness, HarnessError> {
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| valid_name(n))
            .ok_or_else(|| HarnessError::Invalid {
                path: dir.to_path_buf(),
                message: "a harness directory name must be lower-case letters, digits and '-'"
                    .into(),
            })?
            .to_string();
        let path = dir.join(MANIFEST_FILE);
        let text = fs::read_to_string(&path).map_err(|source| HarnessError::Io {
            path: path.clone(),
            source,
        })?;
        let manifest = Manifest::parse(&text).map_err(|source| HarnessError::Manifest {
            path: path.clone(),
            source,
        })?;
        let harness = Harness {
            name,
            dir: dir.to_path_buf(),
            manifest,
        };
        for source in harness.source_paths() {
            if !source.is_file() {
                return Err(HarnessError::Invalid {
                    path,
                    message: format!("source `{}` does not exist", source.display()),
                });
            }
        }
        Ok(harness)
    }

    /// True for bug-suite harnesses, the ones with a fixed twin.
    pub fn is_bug(&self) -> bool {
        self.manifest.fixed.is_some()
    }

    /// The variants this harness has: buggy, and fixed when it has a twin.
    pub fn variants(&self) -> Vec<Variant> {
        if self.is_bug() {
            Variant::ALL.to_vec()
        } else {
            vec![Variant::Buggy]
        }
    }

    /// What a variant does: the manifest's `[expect]` for the buggy build,
    /// exit status 0 for the fixed twin.
    pub fn expected(&self, variant: Variant) -> Expect {
        match variant {
            Variant::Buggy => self.manifest.expect.clone(),
            Variant::Fixed => Expect::exit_zero(),
        }
    }

    /// Where [`build`] puts a variant's binary (it may not exist yet): the
    /// bundled suite's in [`output_dir`], another suite's in a directory of
    /// its own there, so that programs of two suites never share a name.
    pub fn binary(&self, variant: Variant) -> PathBuf {
        let suite = self.dir.parent().unwrap_or(Path::new("/"));
        let canonical = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
        let out = if canonical(suite) == canonical(&source_root()) {
            output_dir()
        } else {
            let id = xxhash_rust::xxh3::xxh3_64(canonical(suite).as_os_str().as_encoded_bytes());
            output_dir().join(format!("suite-{id:016x}"))
        };
        out.join(self.binary_name(variant))
    }

    /// The output oracle its runs are judged by, if its manifest names one.
    pub fn oracle(&self) -> Result<Option<crate::observe::oracle::Oracle>, HarnessError> {
        use crate::observe::oracle::Oracle;
        if let Some(f) = &self.manifest.expect_stdout {
            let path = self.dir.join(f);
            let data = fs::read(&path).map_err(io_error(&path))?;
            return Ok(Some(Oracle::Stdout(data)));
        }
        Ok(self.manifest.oracle.as_ref().map(|c| {
            // The command runs where the manifest is, so it can name files
            // beside it.
            let dir = self.dir.to_string_lossy().replace('\'', r"'\''");
            Oracle::Command(format!("cd '{dir}' && {c}"))
        }))
    }

    /// The sources as paths, for reading and for staleness checks.
    pub fn source_paths(&self) -> Vec<PathBuf> {
        self.manifest
            .sources
            .iter()
            .map(|s| self.dir.join(s))
            .collect()
    }

    fn binary_name(&self, variant: Variant) -> String {
        match variant {
            Variant::Buggy => self.name.clone(),
            Variant::Fixed => format!("{}-fixed", self.name),
        }
    }

    /// Compiler and arguments that build `variant` into `output`.
    fn compile_command(&self, variant: Variant, output: &Path) -> (&'static str, Vec<OsString>) {
        if let Some(cmd) = &self.manifest.build {
            // The paths go in as arguments, so nothing in them is parsed.
            let script =
                format!("cd \"$3\" && OUT=\"$1\" FIXED=\"$2\" && export OUT FIXED && {cmd}");
            let fixed = if variant == Variant::Fixed { "1" } else { "" };
            let args = vec![
                "-c".into(),
                script.into(),
                "sh".into(),
                output.into(),
                fixed.into(),
                self.dir.clone().into(),
            ];
            return ("sh", args);
        }
        let language = self.manifest.language;
        let mut args: Vec<OsString> = language
            .default_flags()
            .iter()
            .map(OsString::from)
            .collect();
        let sources = self.source_paths();
        if language.is_rust() {
            if language == Language::RustTest {
                args.push("--test".into());
            }
            let suffix = if variant == Variant::Fixed {
                "_fixed"
            } else {
                ""
            };
            args.push("--crate-name".into());
            args.push(format!("{}{suffix}", self.name.replace('-', "_")).into());
            if variant == Variant::Fixed {
                args.push("--cfg".into());
                args.push("fixed".into());
            }
            args.extend(self.manifest.flags.iter().map(OsString::from));
            args.push("-o".into());
            args.push(output.into());
            // The first source is the crate root; the others are its modules.
            args.push(sources[0].clone().into());
        } else {
            if self.manifest.static_link {
                args.push("-static".into());
            }
            if variant == Variant::Fixed {
                args.push("-DFIXED".into());
            }
            args.push("-o".into());
            args.push(output.into());
            args.extend(sources.into_iter().map(OsString::from));
            // After the sources, so that flags such as -lm take effect.
            args.extend(self.manifest.flags.iter().map(OsString::from));
        }
        (language.compiler(), args)
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Everything that can go wrong finding, reading or building harnesses.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A `harness.toml` was rejected.
    #[error("{path}: {source}")]
    Manifest {
        /// The manifest file.
        path: PathBuf,
        /// Why it was rejected.
        #[source]
        source: ManifestError,
    },
    /// A harness directory is malformed (bad name, missing source).
    #[error("{path}: {message}")]
    Invalid {
        /// The directory or manifest.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// No harness of that name.
    #[error("no harness named `{name}` in {root}")]
    NotFound {
        /// The name asked for.
        name: String,
        /// The directory searched.
        root: PathBuf,
    },
    /// The fixed variant was asked of an engine test.
    #[error("harness `{0}` has no fixed twin")]
    NoFixedTwin(String),
    /// The compiler is not on `PATH`.
    #[error("compiler `{0}` not found on PATH")]
    CompilerNotFound(String),
    /// The compiler ran and failed.
    #[error("building {name} ({variant}) failed ({status}): {command}\n{stderr}")]
    Compile {
        /// The harness.
        name: String,
        /// The variant.
        variant: Variant,
        /// The command line that failed.
        command: String,
        /// How the compiler exited.
        status: String,
        /// The compiler's output (stderr, then stdout).
        stderr: String,
    },
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> HarnessError + '_ {
    move |source| HarnessError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The `harnesses/` directory: `$REWIND_HARNESSES` if set, else
/// `./harnesses` if it exists, else the one in this crate's source tree.
pub fn source_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("REWIND_HARNESSES") {
        return PathBuf::from(dir);
    }
    let local = Path::new("harnesses");
    if local.is_dir() {
        return std::env::current_dir()
            .map(|cwd| cwd.join(local))
            .unwrap_or_else(|_| local.to_path_buf());
    }
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/harnesses"))
}

/// The target directory: `$CARGO_TARGET_DIR` if set, else `target/` beside
/// [`source_root`].
pub fn target_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(dir);
    }
    let root = source_root();
    let root = root.canonicalize().unwrap_or(root);
    root.parent()
        .unwrap_or_else(|| Path::new("."))
        .join("target")
}

/// Where built harness binaries go: `$REWIND_HARNESS_CACHE` if set, else
/// `<target-dir>/harnesses` when it can be written, else rewind-fuzz's
/// cache directory (a source tree in a read-only place, such as a Nix
/// store or a system-wide install).
pub fn output_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("REWIND_HARNESS_CACHE") {
        return PathBuf::from(dir);
    }
    let beside = target_dir().join("harnesses");
    if crate::fsutil::is_writable_dir(&beside) {
        return beside;
    }
    crate::fsutil::cache_dir().join("harnesses")
}

/// Every harness under [`source_root`], sorted by name. Directories without
/// a `harness.toml` are skipped.
pub fn list() -> Result<Vec<Harness>, HarnessError> {
    list_in(&source_root())
}

/// Every harness under `root`, sorted by name.
pub fn list_in(root: &Path) -> Result<Vec<Harness>, HarnessError> {
    let mut harnesses = Vec::new();
    for entry in fs::read_dir(root).map_err(io_error(root))? {
        let entry = entry.map_err(io_error(root))?;
        let dir = entry.path();
        if dir.join(MANIFEST_FILE).is_file() {
            harnesses.push(Harness::load(&dir)?);
        }
    }
    harnesses.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(harnesses)
}

/// The harness called `name` under [`source_root`].
pub fn find(name: &str) -> Result<Harness, HarnessError> {
    let root = source_root();
    let dir = root.join(name);
    if !valid_name(name) || !dir.join(MANIFEST_FILE).is_file() {
        return Err(HarnessError::NotFound {
            name: name.to_string(),
            root,
        });
    }
    Harness::load(&dir)
}

/// Builds one variant of a harness and returns the binary's path.
///
/// Nothing is compiled when the binary is newer than the sources and the
/// manifest and was built by the same command. Several processes may build
/// the same harness at once: each takes an exclusive `flock` on a lock file
/// beside the binary, compiles into a private temporary directory and
/// renames the result into place, so a reader never sees a partial binary.
pub fn build(harness: &Harness, variant: Variant) -> Result<PathBuf, HarnessError> {
    if variant == Variant::Fixed && !harness.is_bug() {
        return Err(HarnessError::NoFixedTwin(harness.name.clone()));
    }
    if let Some(program) = &harness.manifest.program {
        let path = match variant {
            Variant::Buggy => program,
            Variant::Fixed => harness
                .manifest
                .fixed
                .as_ref()
                .and_then(|f| f.program.as_ref())
                .ok_or_else(|| HarnessError::NoFixedTwin(harness.name.clone()))?,
        };
        let path = harness.dir.join(path);
        if !path.is_file() {
            return Err(HarnessError::Invalid {
                path,
                message: "the program does not exist".into(),
            });
        }
        return Ok(path);
    }
    let output = harness.binary(variant);
    let dir = output.parent().unwrap_or(Path::new(".")).to_path_buf();
    fs::create_dir_all(&dir).map_err(io_error(&dir))?;
    let file_name = harness.binary_name(variant);
    let stamp_path = dir.join(format!(".{file_name}.cmd"));
    let (compiler, args) = harness.compile_command(variant, &output);
    let stamp = command_line(compiler, &args);

    if up_to_date(harness, &output, &stamp_path, &stamp)? {
        return Ok(output);
    }
    let lock_path = dir.join(format!(".{file_name}.lock"));
    let _lock = lock_exclusive(&lock_path)?;
    // Another process may have built it while this one waited for the lock.
    if up_to_date(harness, &output, &stamp_path, &stamp)? {
        return Ok(output);
    }

    let compiler_path =
        find_on_path(compiler).ok_or_else(|| HarnessError::CompilerNotFound(compiler.into()))?;
    // Leftovers of a build that was killed; only a lock holder makes them.
    let temp_prefix = format!(".{file_name}.tmp-");
    for entry in fs::read_dir(&dir).map_err(io_error(&dir))?.flatten() {
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with(&temp_prefix)
        {
            fs::remove_dir_all(entry.path()).ok();
        }
    }
    static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);
    let temp_dir = dir.join(format!(
        "{temp_prefix}{}-{}",
        std::process::id(),
        NEXT_TEMP.fetch_add(1, Ordering::Relaxed)
    ));
    fs::create_dir(&temp_dir).map_err(io_error(&temp_dir))?;
    let result = compile_into(
        harness,
        variant,
        &compiler_path,
        &temp_dir.join(&file_name),
        &output,
    );
    let cleanup = fs::remove_dir_all(&temp_dir).map_err(io_error(&temp_dir));
    result?;
    cleanup?;
    // The stamp follows the binary, so a stale stamp only causes a recheck.
    write_atomically(&stamp_path, stamp.as_bytes())?;
    Ok(output)
}

/// Compiles into `temp` and renames it to `output`.
fn compile_into(
    harness: &Harness,
    variant: Variant,
    compiler: &Path,
    temp: &Path,
    output: &Path,
) -> Result<(), HarnessError> {
    let (name, args) = harness.compile_command(variant, temp);
    let result = Command::new(compiler)
        .args(&args)
        .output()
        .map_err(io_error(compiler))?;
    if !result.status.success() {
        let mut stderr = String::from_utf8_lossy(&result.stderr).into_owned();
        stderr.push_str(&String::from_utf8_lossy(&result.stdout));
        return Err(HarnessError::Compile {
            name: harness.name.clone(),
            variant,
            command: command_line(name, &args),
            status: result.status.to_string(),
            stderr,
        });
    }
    if !temp.is_file() {
        return Err(HarnessError::Compile {
            name: harness.name.clone(),
            variant,
            command: command_line(name, &args),
            status: "success".into(),
            stderr: "the build command wrote no program to $OUT".into(),
        });
    }
    fs::rename(temp, output).map_err(io_error(output))
}

/// Builds every variant of every harness (in parallel) and returns them in
/// [`list`] order, buggy before fixed. The first failure is returned.
pub fn build_all() -> Result<Vec<(Harness, Variant, PathBuf)>, HarnessError> {
    let jobs: Vec<(Harness, Variant)> = list()?
        .into_iter()
        .flat_map(|h| h.variants().into_iter().map(move |v| (h.clone(), v)))
        .collect();
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(jobs.len().max(1));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<PathBuf, HarnessError>>>> =
        Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((harness, variant)) = jobs.get(i) else {
                        break;
                    };
                    let result = build(harness, *variant);
                    results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(result);
                }
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    jobs.into_iter()
        .zip(results)
        .map(|((harness, variant), result)| {
            let path = result.expect("every job ran")?;
            Ok((harness, variant, path))
        })
        .collect()
}

/// True when `output` exists, is newer than every input and was built by
/// the command recorded in `stamp`.
fn up_to_date(
    harness: &Harness,
    output: &Path,
    stamp_path: &Path,
    stamp: &str,
) -> Result<bool, HarnessError> {
    let Some(built) = modified(output)? else {
        return Ok(false);
    };
    match fs::read_to_string(stamp_path) {
        Ok(recorded) if recorded == stamp => {}
        Ok(_) => return Ok(false),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(io_error(stamp_path)(e)),
    }
    let manifest = harness.dir.join(MANIFEST_FILE);
    for input in harness.source_paths().iter().chain([&manifest]) {
        match modified(input)? {
            Some(changed) if changed < built => {}
            _ => return Ok(false),
        }
    }
    Ok(true)
}

fn modified(path: &Path) -> Result<Option<SystemTime>, HarnessError> {
    match fs::metadata(path) {
        Ok(meta) => Ok(Some(meta.modified().map_err(io_error(path))?)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error(path)(e)),
    }
}

/// An exclusive `flock` on `path`, held until the returned file is dropped.
fn lock_exclusive(path: &Path) -> Result<File, HarnessError> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(io_error(path))?;
    loop {
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive) {
            Ok(()) => return Ok(file),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(io_error(path)(e.into())),
        }
    }
}

fn write_atomically(path: &Path, contents: &[u8]) -> Result<(), HarnessError> {
    crate::fsutil::write_atomically(path, contents).map_err(io_error(path))
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

fn command_line(program: &str, args: &[OsString]) -> String {
    let mut line = program.to_string();
    for arg in args {
        line.push(' ');
        line.push_str(&arg.to_string_lossy());
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: &str = r#"
        description = "Five philosophers, each takes the left fork then the right."
        language = "c"
        sources = ["philosophers.c"]
        flags = ["-Wall"]
        static = false
        args = ["--meals", "2"]
        stdout = "5 philosophers ate 10 meals\n"
        [expect]
        kind = "deadlocked"
        depth = 4
        needs_shim = true
        [fixed]
        description = "Forks are taken in index order."
    "#;

    fn parse_err(text: &str) -> String {
        Manifest::parse(text).unwrap_err().to_string()
    }

    #[test]
    fn a_full_manifest_parses_into_every_field() {
        let m = Manifest::parse(FULL).unwrap();
        assert_eq!(m.language, Language::C);
        assert_eq!(m.sources, vec![PathBuf::from("philosophers.c")]);
        assert_eq!(m.flags, vec!["-Wall"]);
        assert!(!m.static_link);
        assert_eq!(m.args, vec!["--meals", "2"]);
        assert_eq!(m.stdout.as_deref(), Some("5 philosophers ate 10 meals\n"));
        assert_eq!(m.expect.kind, ExpectKind::Deadlocked);
        assert_eq!(m.expect.depth, Some(4));
        assert!(m.expect.needs_shim);
        assert_eq!(
            m.fixed.unwrap().description.as_deref(),
            Some("Forks are taken in index order.")
        );
    }

    #[test]
    fn a_minimal_manifest_gets_the_defaults() {
        let m = Manifest::parse(
            r#"
            description = "hello"
            language = "rust-test"
            sources = ["lib.rs"]
            [expect]
            kind = "exited"
            "#,
        )
        .unwrap();
        assert_eq!(m.language, Language::RustTest);
        assert!(m.flags.is_empty() && m.args.is_empty() && m.stdout_contains.is_empty());
        assert!(!m.static_link && !m.expect.needs_shim);
        assert_eq!(m.expect.exit_code(), Some(0));
        assert_eq!(m.fixed, None);
    }

    #[test]
    fn an_empty_fixed_table_means_there_is_a_fixed_twin() {
        let m = Manifest::parse(
            r#"
            description = "d"
            language = "cpp"
            sources = ["a.cpp"]
            [expect]
            kind = "crashed"
            signal = "SIGABRT"
            [fixed]
            "#,
        )
        .unwrap();
        assert_eq!(m.fixed, Some(Fixed::default()));
        assert_eq!(m.expect.signal_number(), Some(libc::SIGABRT));
        assert_eq!(m.expect.exit_code(), None);
    }

    #[test]
    fn unknown_fields_are_rejected_at_every_level() {
        let top = FULL.replace("static = false", "statik = false");
        assert!(parse_err(&top).contains("statik"), "{}", parse_err(&top));
        let expect = FULL.replace("depth = 4", "dept = 4");
        assert!(parse_err(&expect).contains("dept"));
        let fixed = FULL.replace("description = \"Forks", "how = \"Forks");
        assert!(parse_err(&fixed).contains("how"));
    }

    #[test]
    fn unknown_kinds_and_languages_are_rejected() {
        assert!(Manifest::parse(&FULL.replace("\"deadlocked\"", "\"livelocked\"")).is_err());
        assert!(Manifest::parse(&FULL.replace("\"c\"", "\"go\"")).is_err());
    }

    #[test]
    fn a_program_comes_from_sources_a_build_command_or_a_path() {
        let head = "description = \"d\"\n";
        let tail = "[expect]\nkind = \"crashed\"\n";
        let ok = |body: &str| Manifest::parse(&format!("{head}{body}\n{tail}"));
        assert!(ok("program = \"/bin/prog\"").is_ok());
        let built = ok("sources = [\"a.c\"]\nbuild = 'cc -o \"$OUT\" a.c'").unwrap();
        assert_eq!(built.language, Language::C);
        assert!(
            ok("")
                .unwrap_err()
                .to_string()
                .contains("`sources` is empty")
        );
        let both = ok("program = \"p\"\nsources = [\"a.c\"]").unwrap_err();
        assert!(both.to_string().contains("prebuilt"), "{both}");
        let twin = Manifest::parse(&format!("{head}program = \"p\"\n{tail}[fixed]\n"));
        assert!(twin.unwrap_err().to_string().contains("[fixed] program"));
        let oracles = ok("program = \"p\"\nexpect_stdout = \"w\"\noracle = \"true\"");
        assert!(oracles.unwrap_err().to_string().contains("not both"));
        let wrong = Manifest::parse(&format!(
            "{head}program = \"p\"\n[expect]\nkind = \"wrong-output\"\n"
        ));
        assert!(wrong.unwrap_err().to_string().contains("needs an oracle"));
    }

    #[test]
    fn expectation_fields_must_fit_the_kind() {
        let with = |extra: &str| FULL.replace("depth = 4", &format!("depth = 4\n{extra}"));
        assert!(parse_err(&with("code = 1")).contains("expect.code"));
        assert!(parse_err(&with("signal = \"SIGSEGV\"")).contains("expect.signal"));
        assert!(parse_err(&with("syscall = \"io_uring_setup\"")).contains("expect.syscall"));
        assert!(parse_err(&with("budget = \"steps\"")).contains("expect.budget"));
        let crashed = FULL
            .replace("\"deadlocked\"", "\"crashed\"")
            .replace("depth = 4", "signal = \"SIGNOPE\"");
        assert!(parse_err(&crashed).contains("SIGNOPE"));
    }

    #[test]
    fn static_rust_and_absolute_sources_are_rejected() {
        let rust = FULL
            .replace("\"c\"", "\"rust\"")
            .replace("static = false", "static = true");
        assert!(parse_err(&rust).contains("static"));
        let absolute = FULL.replace("[\"philosophers.c\"]", "[\"/etc/passwd\"]");
        assert!(parse_err(&absolute).contains("relative"));
    }

    #[test]
    fn the_fixed_variant_gets_the_fixed_define_or_cfg() {
        let mut h = Harness {
            name: "abba".into(),
            dir: PathBuf::from("/h/abba"),
            manifest: Manifest::parse(FULL).unwrap(),
        };
        let out = Path::new("/out/x");
        let (cc, args) = h.compile_command(Variant::Fixed, out);
        assert_eq!(cc, "gcc");
        assert!(args.contains(&OsString::from("-DFIXED")));
        let (_, args) = h.compile_command(Variant::Buggy, out);
        assert!(!args.contains(&OsString::from("-DFIXED")));
        assert_eq!(args.last(), Some(&OsString::from("-Wall")));

        h.manifest.language = Language::RustTest;
        let line = command_line("rustc", &h.compile_command(Variant::Fixed, out).1);
        assert!(line.contains("--test"), "{line}");
        assert!(line.contains("--cfg fixed"), "{line}");
        assert!(line.ends_with("-o /out/x /h/abba/philosophers.c"), "{line}");
    }

    #[test]
    fn binaries_are_named_after_the_harness_and_variant() {
        let h = Harness {
            name: "abba".into(),
            dir: PathBuf::from("/h/abba"),
            manifest: Manifest::parse(FULL).unwrap(),
        };
        assert_eq!(h.binary_name(Variant::Buggy), "abba");
        assert_eq!(h.binary_name(Variant::Fixed), "abba-fixed");
        assert_eq!(h.variants(), vec![Variant::Buggy, Variant::Fixed]);
        assert_eq!(h.expected(Variant::Fixed).exit_code(), Some(0));
    }

    #[test]
    fn harness_names_are_plain() {
        assert!(valid_name("rust-two-mutex") && valid_name("depth3"));
        assert!(!valid_name("../etc") && !valid_name("A") && !valid_name("") && !valid_name("-x"));
    }
}
