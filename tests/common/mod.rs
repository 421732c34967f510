//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use rewind_fuzz::engine::{RunConfig, RunReport, Vm};
use rewind_fuzz::harness::{self, Variant};
use rewind_fuzz::kernel::KernelConfig;
use rewind_fuzz::kernel::vfs::FileSource;

/// Fails loudly when KVM cannot be used: these tests need a real machine.
pub fn require_kvm() {
    let dev = rewind_fuzz::machine::kvm_device();
    if let Err(e) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&dev)
    {
        panic!(
            "KVM is not usable here ({dev}: {e}); these tests need /dev/kvm with read/write access"
        );
    }
}

/// The names of the entries of `dir` (none when it cannot be read).
pub fn names(dir: &std::path::Path) -> std::collections::BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Builds a bundled harness (once per process, safely across processes).
pub fn harness(name: &str) -> PathBuf {
    harness_variant(name, Variant::Buggy)
}

/// Builds a variant of a bundled harness.
pub fn harness_variant(name: &str, v: Variant) -> PathBuf {
    let h = harness::find(name).unwrap_or_else(|e| panic!("harness {name}: {e}"));
    harness::build(&h, v).unwrap_or_else(|e| panic!("building harness {name}: {e}"))
}

/// A run configuration for `exe` with `args`.
pub fn config(exe: &std::path::Path, args: &[&str]) -> RunConfig {
    let exe = exe
        .canonicalize()
        .expect("harness path")
        .to_string_lossy()
        .into_owned();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let mut k = KernelConfig::new(&exe, &args);
    k.cwd = std::env::temp_dir().to_string_lossy().into_owned();
    let mut c = RunConfig::new(k);
    c.memory_mib = 256;
    c.timeout = Duration::from_secs(20);
    c
}

/// Runs `exe` once in a fresh machine.
pub fn run(exe: &std::path::Path, args: &[&str]) -> RunReport {
    run_config(&config(exe, args))
}

/// Runs a configuration once in a fresh machine.
pub fn run_config(c: &RunConfig) -> RunReport {
    require_kvm();
    let mut vm = Vm::new(c, FileSource::host()).expect("create the machine");
    vm.run().expect("run")
}

/// Compiles the C program `source` with gcc (and `flags`) into `dir/name`.
pub fn build_c_with(dir: &std::path::Path, name: &str, source: &str, flags: &[&str]) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let exe = dir.join(name);
    let out = Command::new("gcc")
        .args(["-O1", "-o"])
        .arg(&exe)
        .arg(&src)
        .args(flags)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// The `rewind-fuzz` binary under test.
pub fn cli() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rewind-fuzz"))
}

/// An example program of this package, built in the tests' own profile
/// (a full test build has built it already; a filtered one may not have).
pub fn example(name: &str) -> PathBuf {
    let deps = std::env::current_exe().unwrap();
    let profile_dir = deps.parent().unwrap().parent().unwrap();
    let path = profile_dir.join("examples").join(name);
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = Command::new(cargo);
        build
            .args(["build", "--example", name])
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            build.arg("--release");
        }
        let out = build.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    path
}

/// A reproducer of a run of the `hello` harness, written by
/// `run --save-rwd` into `dir`.
pub fn hello_rwd(dir: &std::path::Path) -> PathBuf {
    require_kvm();
    let rwd = dir.join("hello.rwd");
    save_rwd(&harness("hello"), dir, &rwd);
    rwd
}

/// `run --target exe --save-rwd rwd` in directory `cwd`, which must exit 0.
pub fn save_rwd(exe: &std::path::Path, cwd: &std::path::Path, rwd: &std::path::Path) {
    let out = cli()
        .current_dir(cwd)
        .args(["run", "--target"])
        .arg(exe)
        .arg("--save-rwd")
        .arg(rwd)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The path of tool `name` on this host (found in PATH, or the given
/// absolute path); fails saying what to install when it is missing, so a
/// missing tool never passes a test silently (`.ci/run` installs them all).
pub fn require_tool(name: &str, install: &str) -> PathBuf {
    let found = if name.starts_with('/') {
        Some(PathBuf::from(name)).filter(|p| p.exists())
    } else {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(name))
                .find(|p| p.is_file())
        })
    };
    found.unwrap_or_else(|| panic!("{name} is missing on this host: install it ({install})"))
}

/// Makes a fresh strategy (one per run: strategies keep state).
pub type MakeStrategy = Box<dyn Fn() -> Box<dyn rewind_fuzz::sched::Strategy>>;

/// The default strategy, a random walk from `seed` and PCT of depth 3 over
/// `pct_steps` estimated steps from `seed`, by name.
pub fn strategies(seed: u64, pct_steps: u64) -> Vec<(&'static str, MakeStrategy)> {
    use rewind_fuzz::sched::{Pct, RandomWalk, StrategyKind};
    vec![
        ("default", Box::new(|| StrategyKind::Default.build(0, 0))),
        ("random", Box::new(move || Box::new(RandomWalk::new(seed)))),
        (
            "pct:3",
            Box::new(move || Box::new(Pct::new(3, pct_steps, seed))),
        ),
    ]
}
