//! What the commands share: the options that name a target and how it
//! runs (opening it is [`crate::explore::target`]'s), turning engine errors
//! into messages, and the JSON of outcomes.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use clap::Args;

use super::UserError;
use crate::code::SyncPoints;
use crate::engine::{RunConfig, SnapshotAt, VmError};
use crate::explore::per_test;
use crate::explore::target::Target;
use crate::kernel::vfs::SharedSource;
use crate::machine::Cancel;
use crate::observe::outcome::Outcome;
use crate::rwd::{self, Rwd};
use crate::sched::StrategySpec;

/// Options shared by every command that runs a target.
#[derive(Args, Debug, Clone)]
pub struct TargetArgs {
    /// The program to run: an x86-64 Linux ELF executable, or `harness:NAME` for a bundled harness. (`-t` is the target here, not AFL++'s timeout: that is `--timeout`.)
    #[arg(long, short = 't', value_name = "PATH")]
    pub target: String,
    /// CPUs the program is told it has (one vCPU runs them all).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub cpus: u32,
    /// Seed for getrandom, AT_RANDOM and /dev/urandom (and random strategies).
    #[arg(long, short = 's', default_value_t = 0)]
    pub seed: u64,
    /// Stop a run after this many steps (scheduling points: system calls,
    /// pthread calls and sync sites) [default: 100000000, or a bundled
    /// harness's own budget].
    #[arg(long)]
    pub max_steps: Option<u64>,
    /// End a run as hung when its threads only go round states they have
    /// been in (spinning on values nobody changes, retrying calls that keep
    /// failing) for this many steps; 0 never [default: 200000].
    #[arg(long)]
    pub hang_steps: Option<u64>,
    /// The wall-clock watchdog: how long a thread may compute without a scheduling point before the run is stopped as `timed-out` (e.g. 60s, 500ms). Unlike every other outcome, this one depends on the host's speed and load.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Set an environment variable for the program (repeatable).
    #[arg(long = "env", short = 'e', value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// Working directory of the program (default: the current one).
    #[arg(long)]
    pub cwd: Option<String>,
    /// Guest memory in MiB.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(16..=65536))]
    pub memory: u64,
    /// Where to take the snapshot every later run restores: first-thread
    /// (just before the first thread is created), start, or marker (a hint
    /// the program sends).
    #[arg(long, value_enum, default_value = "first-thread")]
    pub snapshot_at: SnapshotAt,
    /// Start every run from scratch instead of from a snapshot.
    #[arg(long)]
    pub no_snapshot: bool,
    /// Do not preload the pthread shim (pthread operations are then not
    /// scheduling points; system calls still are).
    #[arg(long)]
    pub no_shim: bool,
    /// Scheduling points inside user code: calls (system calls and pthread
    /// calls only), atomics (also atomic read-modify-writes, spin hints and
    /// spin loops) or globals (also loads and stores of global variables)
    /// [default: atomics, or the level a replayed schedule was made at].
    #[arg(long, value_name = "LEVEL")]
    pub sync_points: Option<SyncPoints>,
    /// Keep files whose path matches GLOB out of reproducers (repeatable;
    /// `*` stays within a directory, `**` crosses them: '/etc/shadow',
    /// '/data/**'). Their replays read them from their own host.
    #[arg(long = "exclude-files", value_name = "GLOB")]
    pub exclude_files: Vec<String>,
    /// The stdout of a correct run: a run that exits having printed
    /// anything else ends as `wrong-output` (a failure of its own kind).
    #[arg(long, value_name = "FILE")]
    pub expect_stdout: Option<std::path::PathBuf>,
    /// A host command (run with `sh -c`) that reads a run's stdout on its
    /// stdin and exits non-zero when it is wrong: such a run ends as
    /// `wrong-output`.
    #[arg(long, value_name = "CMD", conflicts_with = "expect_stdout")]
    pub oracle: Option<String>,
    /// Exit codes of the target that are success, comma-separated: a run
    /// that exits with any other is a failure [default: 0, or a bundled
    /// harness's own].
    #[arg(long, value_delimiter = ',', value_name = "CODES")]
    pub ok_exit_codes: Option<Vec<i32>>,
    /// Arguments for the program.
    #[arg(last = true)]
    pub args: Vec<String>,
}

/// What a reproducer may need of this host, agreed to on the command
/// line (`replay`, `fork`).
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct Consent {
    /// Run the host command the reproducer judges its output with
    /// (`--oracle`); without it, such a reproducer is refused.
    #[arg(long)]
    pub run_oracle: bool,
    /// Read the files the reproducer left out (`--exclude-files`) from
    /// this host; without it, such a reproducer is refused.
    #[arg(long)]
    pub read_host_files: bool,
}

/// Refuses to replay `rwd` when it judges its runs with a host command
/// the user has not agreed to run (`--run-oracle`): a reproducer from
/// elsewhere must not run commands on this host unasked.
pub fn consent_to_oracle(rwd: &Rwd, name: &str, agreed: bool) -> Result<(), UserError> {
    match rwd.oracle_command() {
        Some(c) if !agreed => Err(UserError::bad_input(format!(
            "{name} judges its runs with the host command {:?}; add --run-oracle to run it on this host (check it first: rewind-fuzz show {name})",
            crate::escape::line(c)
        ))),
        _ => Ok(()),
    }
}

/// Refuses to run `rwd` when it left files out (`--exclude-files`), which
/// a run reads from this host, unless the user agreed
/// (`--read-host-files`): a reproducer from elsewhere must not choose which
/// of this host's files are read, and what the program prints of them.
pub fn consent_to_host_files(rwd: &Rwd, name: &str, agreed: bool) -> Result<(), UserError> {
    let paths = rwd.host_paths();
    match paths.first() {
        Some(first) if !agreed => Err(UserError::bad_input(format!(
            "{name} left {} file(s) out (--exclude-files), which a run reads from this host: {}{}; add --read-host-files to read them here (check them first: rewind-fuzz show --files {name})",
            paths.len(),
            crate::escape::line(first),
            if paths.len() > 1 { ", ..." } else { "" }
        ))),
        _ => Ok(()),
    }
}

/// Parses durations like `10s`, `1m30s`, `500ms`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{e} (write durations like 10s, 2m or 500ms)"))
}

/// Parses a `--time` budget: a duration, or bare seconds as AFL++'s `-V`
/// takes them (`-V 60`). A budget of nothing is refused: it could do no
/// work.
pub fn parse_time_budget(s: &str) -> Result<Duration, String> {
    let t = match s.parse::<u64>() {
        Ok(secs) => Duration::from_secs(secs),
        Err(_) => parse_duration(s)?,
    };
    if t.is_zero() {
        return Err(
            "a budget of no time can run nothing; give a positive duration like 60s".into(),
        );
    }
    Ok(t)
}

/// Checks before any work that `dir` can be an output directory: a
/// directory, or a path where one can be made.
pub fn check_out_dir(flag: &str, dir: &Path) -> Result<(), UserError> {
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(m) => {
            let what = if m.file_type().is_symlink() {
                "a symbolic link (not followed)"
            } else if m.is_file() {
                "a file"
            } else {
                "a device, FIFO or socket"
            };
            Err(UserError::bad_input(format!(
                "{flag} {} is {what}, not a directory: give a directory (it is made if missing)",
                dir.display()
            )))
        }
        Err(_) => Ok(()),
    }
}

impl TargetArgs {
    /// `target` with every setting at its default, as `--target TARGET`
    /// alone gives it.
    pub fn new(target: String) -> TargetArgs {
        TargetArgs {
            target,
            cpus: 4,
            seed: 0,
            max_steps: None,
            hang_steps: None,
            timeout: Duration::from_secs(60),
            env: Vec::new(),
            cwd: None,
            memory: 1024,
            snapshot_at: SnapshotAt::FirstThread,
            no_snapshot: false,
            no_shim: false,
            sync_points: None,
            exclude_files: Vec::new(),
            expect_stdout: None,
            oracle: None,
            ok_exit_codes: None,
            args: Vec::new(),
        }
    }

    /// This target running `test` alone, the user's arguments after.
    pub fn for_test(&self, framework: per_test::Framework, test: &str) -> TargetArgs {
        let mut t = self.clone();
        t.args = framework.run_args(test);
        t.args.extend(self.args.iter().cloned());
        t
    }

    /// `rewind-fuzz run`'s words for this target and every setting that
    /// changes what a run does (the target first, the program's arguments
    /// apart: see [`TargetArgs::args`]), so that a printed command runs
    /// the program as this one did.
    pub fn run_words(&self) -> Vec<String> {
        let mut w = vec!["--target".to_string(), self.target.clone()];
        let mut opt = |name: &str, value: String| {
            w.push(format!("--{name}"));
            w.push(value);
        };
        if self.cpus != 4 {
            opt("cpus", self.cpus.to_string());
        }
        if self.seed != 0 {
            opt("seed", self.seed.to_string());
        }
        if let Some(m) = self.max_steps {
            opt("max-steps", m.to_string());
        }
        if let Some(h) = self.hang_steps {
            opt("hang-steps", h.to_string());
        }
        if self.timeout != Duration::from_secs(60) {
            opt("timeout", format!("{}ms", self.timeout.as_millis()));
        }
        for e in &self.env {
            opt("env", e.clone());
        }
        if let Some(c) = &self.cwd {
            opt("cwd", c.clone());
        }
        if self.memory != 1024 {
            opt("memory", self.memory.to_string());
        }
        if let Some(l) = self.sync_points {
            opt("sync-points", l.to_string());
        }
        for g in &self.exclude_files {
            opt("exclude-files", g.clone());
        }
        if let Some(f) = &self.expect_stdout {
            let f = std::path::absolute(f).unwrap_or_else(|_| f.clone());
            opt("expect-stdout", f.to_string_lossy().into_owned());
        }
        if let Some(c) = &self.oracle {
            opt("oracle", c.clone());
        }
        if let Some(codes) = &self.ok_exit_codes {
            opt(
                "ok-exit-codes",
                codes
                    .iter()
                    .map(i32::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
            );
        }
        if self.no_shim {
            w.push("--no-shim".into());
        }
        w
    }

    /// The target and its settings, as the sessions take them.
    pub fn target(&self) -> Target {
        Target {
            program: self.target.clone(),
            args: self.args.clone(),
            cpus: self.cpus,
            seed: self.seed,
            max_steps: self.max_steps,
            hang_steps: self.hang_steps,
            timeout: self.timeout,
            env: self.env.clone(),
            cwd: self.cwd.clone(),
            memory_mib: self.memory,
            snapshot_at: if self.no_snapshot {
                SnapshotAt::Never
            } else {
                self.snapshot_at
            },
            shim: !self.no_shim,
            sync_points: self.sync_points,
            exclude_files: self.exclude_files.clone(),
            expect_stdout: self.expect_stdout.clone(),
            oracle: self.oracle.clone(),
            ok_exit_codes: self.ok_exit_codes.clone(),
        }
    }

    /// The run configuration, after checking the target is something we can run.
    pub fn config(&self) -> Result<RunConfig, UserError> {
        Ok(self.target().open()?)
    }
}

/// Checks before any work that an output file can be written: a new path
/// or a regular file, never a link, device or FIFO.
pub fn check_output(flag: &str, path: Option<&Path>) -> Result<(), UserError> {
    let Some(p) = path else { return Ok(()) };
    let cannot = |e: &dyn std::fmt::Display| {
        UserError::bad_input(format!("cannot write {flag} {}: {e}", p.display()))
    };
    crate::fsutil::check_destination(p).map_err(|e| cannot(&e))?;
    // A missing directory found now, not after minutes of work.
    let dir = p
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(cannot(&format_args!(
            "{} is not a directory: make it first",
            dir.display()
        )));
    }
    Ok(())
}

/// Set by Ctrl-C (and SIGTERM) once [`ctrl_c`] was called.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Turns Ctrl-C and SIGTERM into a [`Cancel`] that ends the run in progress
/// within a watchdog tick, so a command can stop cleanly and keep what it
/// has instead of dying mid-write.
pub fn ctrl_c() -> Cancel {
    static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    let flag = FLAG.get_or_init(|| {
        // SAFETY: the handler only stores into an atomic, which is
        // async-signal-safe; sigaction with a zeroed struct and that handler
        // is a valid call.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_interrupt as *const () as usize;
            libc::sigaction(libc::SIGINT, &act, std::ptr::null_mut());
            libc::sigaction(libc::SIGTERM, &act, std::ptr::null_mut());
        }
        // A signal handler cannot touch an `Arc`; this thread carries the
        // static flag over.
        let flag = Arc::new(AtomicBool::new(false));
        let shared = flag.clone();
        std::thread::Builder::new()
            .name("rewind-ctrl-c".into())
            .spawn(move || {
                while !INTERRUPTED.load(Ordering::Relaxed) {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                shared.store(true, Ordering::SeqCst);
                // A second Ctrl-C quits at once, as people expect.
                // SAFETY: restoring the default disposition is always valid.
                unsafe {
                    libc::signal(libc::SIGINT, libc::SIG_DFL);
                    libc::signal(libc::SIGTERM, libc::SIG_DFL);
                }
            })
            .expect("spawn the Ctrl-C thread");
        flag
    });
    Cancel::from_flag(flag.clone())
}

/// Whether Ctrl-C or SIGTERM arrived.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// Turns an engine error into a message for the user.
pub fn vm_error(e: VmError) -> UserError {
    match e {
        VmError::Machine(m @ crate::machine::MachineError::NoKvm(..))
        | VmError::Machine(m @ crate::machine::MachineError::MissingCapability(_))
        | VmError::Machine(m @ crate::machine::MachineError::CpuModel(_)) => {
            UserError::bad_input(m.to_string())
        }
        VmError::Load(l) => UserError::bad_input(l.to_string()),
        // The size asked for with --memory is the user's to change.
        VmError::Memory(m @ crate::memory::phys::PhysError::Reserve(..)) => {
            UserError::bad_input(m.to_string())
        }
        VmError::Cancelled => UserError {
            message: "interrupted before the run ended; nothing was written".into(),
            code: 130,
        },
        other => UserError {
            message: other.to_string(),
            code: 1,
        },
    }
}

/// How many decision points (steps where two or more threads can run) a
/// default run of the target has, when the strategy needs to know (PCT);
/// 0 otherwise.
pub fn estimate_steps(
    cfg: &RunConfig,
    spec: &StrategySpec,
    source: &SharedSource,
) -> Result<u64, UserError> {
    if !spec.needs_step_estimate() {
        return Ok(0);
    }
    Ok(crate::explore::probe(cfg, source.clone())?.decision_points)
}

/// The process exit code for an outcome: the guest's own code when it exited.
pub fn exit_code(o: &Outcome) -> u8 {
    match o {
        Outcome::Exited { code } => *code as u8,
        _ => 1,
    }
}

/// The outcome as a flat JSON object with every documented key present.
pub fn outcome_json(o: &Outcome) -> serde_json::Value {
    let mut v = serde_json::to_value(o).expect("outcomes serialize");
    let obj = v.as_object_mut().unwrap();
    for key in ["code", "signal", "fault_addr", "thread", "reason"] {
        obj.entry(key).or_insert(serde_json::Value::Null);
    }
    if let Some(a) = obj.get("fault_addr").and_then(|a| a.as_u64()) {
        obj.insert("fault_addr".into(), format!("{a:#x}").into());
    }
    if let Some(a) = obj.get("rip").and_then(|a| a.as_u64()) {
        obj.insert("rip".into(), format!("{a:#x}").into());
    }
    if let Some(threads) = obj.get_mut("threads").and_then(|t| t.as_array_mut()) {
        for t in threads.iter_mut().filter_map(|t| t.as_object_mut()) {
            for key in ["object", "rip", "lock", "site", "holder_site"] {
                if let Some(a) = t.get(key).and_then(|a| a.as_u64()) {
                    t.insert(key.into(), format!("{a:#x}").into());
                }
            }
        }
    }
    obj.insert("summary".into(), o.summary().into());
    v
}

/// The version of the JSON every command prints with `--json` (its
/// `schema` field): it goes up when a field changes meaning or goes away.
/// Addresses are always hex strings (`"0x5555555580c0"`).
pub const JSON_SCHEMA: u32 = 1;

/// Prints a command's JSON result on stdout, with its schema version.
pub fn print_json(mut v: serde_json::Value) {
    if let Some(obj) = v.as_object_mut() {
        obj.insert("schema".into(), JSON_SCHEMA.into());
    }
    println!("{v}");
}

/// The whole report as JSON.
pub fn report_json(
    r: &crate::engine::RunReport,
    sym: &mut crate::report::Symbols,
) -> serde_json::Value {
    let mut v = serde_json::to_value(r).expect("reports serialize");
    v["outcome"] = outcome_json(&r.outcome);
    v["recent_events"] = r.recent_events.iter().map(|e| sym.event_json(e)).collect();
    v
}

pub use crate::rwd::run_command;

/// Reads a reproducer, as a user error (exit code 2) when it is bad.
pub fn load_rwd(path: &Path) -> Result<Rwd, UserError> {
    let rwd = Rwd::load(path).map_err(|e| UserError::bad_input(e.to_string()))?;
    if let Some(why) = rwd.incompatibility() {
        return Err(UserError::bad_input(format!(
            "{} cannot be replayed here: {why}",
            path.display()
        )));
    }
    Ok(rwd)
}

/// Saves the reproducer of a run `vm` just made from scratch with its
/// events recorded.
pub fn save_run(
    cfg: &crate::engine::RunConfig,
    vm: &crate::engine::Vm,
    report: &crate::engine::RunReport,
    path: &Path,
) -> Result<crate::fsutil::Readers, UserError> {
    let r = rwd::from_run(cfg, vm, report).ok_or_else(|| UserError {
        message: "the run was not recorded from its start, so no reproducer can be made of it"
            .into(),
        code: 1,
    })?;
    let excluding = !cfg.exclude_files.is_empty();
    save_rwd(&r, path, excluding)?;
    Ok(r.readers(excluding))
}

/// Writes a reproducer (private when `excluding` files, see
/// [`Rwd::readers`]), saying so when it is private.
pub fn save_rwd(r: &Rwd, path: &Path, excluding: bool) -> Result<(), UserError> {
    r.save_as(path, r.readers(excluding))
        .map_err(|e| UserError::bad_input(e.to_string()))?;
    if let Some(note) = r.privacy_note(path, excluding) {
        eprintln!("rewind-fuzz: note: {note}");
    }
    Ok(())
}

/// The tests of the target (`--per-test`), listed by the binary itself.
pub fn list_tests(target: &TargetArgs) -> Result<(per_test::Framework, Vec<String>), UserError> {
    let cfg = target.config()?;
    per_test::list(&cfg, &target.target).map_err(|e| match e {
        per_test::ListError::Vm(e) => vm_error(e),
        e => UserError::bad_input(format!("--per-test: {e}")),
    })
}

/// Refuses a directory that holds a session already (continued only with
/// `--resume`).
pub fn refuse_a_session_there(out: &Path) -> Result<(), UserError> {
    let queued = std::fs::read_dir(out.join("queue"))
        .map(|d| d.count())
        .unwrap_or(0);
    if queued > 0 {
        return Err(UserError::bad_input(format!(
            "{} already holds a session ({queued} corpus entries): continue it with --resume, or choose another --out",
            out.display()
        )));
    }
    Ok(())
}
