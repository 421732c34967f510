//! `rewind-fuzz cargo [-p CRATE] [TESTNAME]`: builds a Cargo project's test
//! binaries (`cargo test --no-run`) and fuzzes each of their tests alone,
//! the budget shared between all of them.
//!
//! Each test's session lives in `OUT/<test target>/<test>/`, named after
//! the crate's test target (`accounts-lib`, `transfers-test`), not after
//! cargo's hashed file name, which changes with the profile and the
//! features. A session is the same target across rebuilds, so `--resume`
//! goes on with it on a new build (its corpus replays there as schedules
//! always replay on another build: a decision that no longer fits is
//! skipped).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use clap::Args;

use super::UserError;
use super::common::TargetArgs;
use super::fuzz::{FuzzArgs, MINIMIZE_EXECS};
use crate::code::SyncPoints;
use crate::explore::per_test;
use crate::fuzz::StrategyMix;

#[derive(Args, Debug)]
pub struct CargoArgs {
    /// Only the tests whose names contain this, as `cargo test NAME`.
    pub testname: Option<String>,
    /// The package whose tests to fuzz (cargo's -p).
    #[arg(long, short = 'p', value_name = "CRATE")]
    pub package: Option<String>,
    /// The project's Cargo.toml (default: the one cargo finds from here).
    #[arg(long, value_name = "PATH")]
    pub manifest_path: Option<PathBuf>,
    /// Build the tests with optimizations (cargo's --release).
    #[arg(long)]
    pub release: bool,
    /// The whole budget, shared between the tests (each gets its share of
    /// what is left) [default: 10m, unless --execs is given].
    #[arg(long = "time", short = 'V', value_parser = super::common::parse_time_budget)]
    pub time: Option<Duration>,
    /// Executions for all the tests together, shared evenly.
    #[arg(long, short = 'E')]
    pub execs: Option<u64>,
    /// Output directory: one session per test target and test.
    #[arg(long, short = 'o', default_value = "rewind-out")]
    pub out: PathBuf,
    /// Continue the sessions in --out, on this build of the tests.
    #[arg(long)]
    pub resume: bool,
    /// Machines fuzzing in parallel (default: every core).
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// Seed for the guest's randomness and, with one job, the search.
    #[arg(long, short = 's')]
    pub seed: Option<u64>,
    /// Scheduling points inside user code: calls, atomics or globals
    /// [default: atomics].
    #[arg(long, value_name = "LEVEL")]
    pub sync_points: Option<SyncPoints>,
    /// Exit codes of a test that are not failures (comma-separated).
    #[arg(long, value_name = "CODES", value_delimiter = ',')]
    pub ok_exit_codes: Option<Vec<i32>>,
    /// Share of runs that start from a strategy alone (see `fuzz --help`).
    #[arg(long, value_name = "MIX")]
    pub strategy_mix: Option<StrategyMix>,
    /// Stop a test's run after this many steps [default: 100000000].
    #[arg(long)]
    pub max_steps: Option<u64>,
    /// End a test's run as hung after this many steps without progress;
    /// 0 never [default: 200000].
    #[arg(long)]
    pub hang_steps: Option<u64>,
    /// Executions minimization may spend on each finding.
    #[arg(long)]
    pub minimize_execs: Option<u64>,
    /// Set an environment variable for the tests (repeatable).
    #[arg(long = "env", short = 'e', value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// Only print findings and the summaries.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// A test binary cargo built, with the test target it was built for.
struct TestBinary {
    path: PathBuf,
    /// `<package>`, `<target name>`, `<target kind>`.
    package: String,
    name: String,
    kind: String,
}

impl TestBinary {
    /// The directory of its sessions under --out: the test target's name
    /// and kind (`accounts-lib`), with the package when two share them.
    fn dir_name(&self, ambiguous: bool) -> String {
        let plain = format!("{}-{}", self.name, self.kind);
        let name = if ambiguous {
            format!("{}-{plain}", self.package)
        } else {
            plain
        };
        per_test::file_name(&name)
    }

    /// What stays the same across rebuilds.
    fn identity(&self) -> String {
        format!(
            "cargo test target {}/{}/{}",
            self.package, self.kind, self.name
        )
    }
}

/// The package's name in cargo's package id (`path+file:///x/accounts#0.1.0`
/// or `...#accounts@0.1.0`).
fn package_name(id: &str) -> String {
    let (url, tail) = id.rsplit_once('#').unwrap_or((id, ""));
    match tail.split_once('@') {
        Some((name, _)) => name.to_string(),
        None => url.rsplit('/').next().unwrap_or("").to_string(),
    }
}

/// The test binaries `cargo test --no-run` builds, by the JSON messages it
/// prints.
fn build(a: &CargoArgs) -> Result<Vec<TestBinary>, UserError> {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.args([
        "test",
        "--no-run",
        "--message-format=json-render-diagnostics",
    ]);
    if let Some(p) = &a.package {
        cmd.args(["--package", p]);
    }
    if let Some(m) = &a.manifest_path {
        cmd.arg("--manifest-path").arg(m);
    }
    if a.release {
        cmd.arg("--release");
    }
    eprintln!("rewind-fuzz: building the tests (cargo test --no-run)");
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| UserError::bad_input(format!("cannot run cargo: {e}; is it on PATH?")))?;
    if !out.status.success() {
        return Err(UserError::bad_input(
            "cargo test --no-run failed (its errors are above); fix the build first",
        ));
    }
    let mut binaries = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let is_test = msg["reason"] == "compiler-artifact" && msg["profile"]["test"] == true;
        if let (true, Some(exe)) = (is_test, msg["executable"].as_str()) {
            let kind = msg["target"]["kind"][0].as_str().unwrap_or("test");
            binaries.push(TestBinary {
                path: PathBuf::from(exe),
                package: package_name(msg["package_id"].as_str().unwrap_or("")),
                name: msg["target"]["name"]
                    .as_str()
                    .unwrap_or("tests")
                    .to_string(),
                // A library's unit tests: `lib` (cargo says `lib`, `rlib`...).
                kind: if kind.ends_with("lib") {
                    "lib".into()
                } else {
                    kind.to_string()
                },
            });
        }
    }
    if binaries.is_empty() {
        return Err(UserError::bad_input(
            "cargo test --no-run built no test binary; does the project have tests?",
        ));
    }
    Ok(binaries)
}

/// The fuzz options for one binary: each of its tests alone, with what
/// was given for all of them.
fn fuzz_args(a: &CargoArgs, binary: &Path, out: PathBuf) -> FuzzArgs {
    let mut target = TargetArgs::new(binary.to_string_lossy().into_owned());
    if let Some(seed) = a.seed {
        target.seed = seed;
    }
    target.sync_points = a.sync_points;
    target.ok_exit_codes = a.ok_exit_codes.clone();
    target.max_steps = a.max_steps;
    target.hang_steps = a.hang_steps;
    target.env = a.env.clone();
    FuzzArgs {
        target,
        out,
        jobs: a.jobs,
        time: None,
        execs: None,
        corpus: Vec::new(),
        strategy_mix: a.strategy_mix.clone().unwrap_or_default(),
        sync_dir: None,
        sync_id: None,
        node_listen: None,
        node_listen_any_address: false,
        node_connect: Vec::new(),
        worker_threads: false,
        resume: a.resume,
        minimize_execs: a.minimize_execs.unwrap_or(MINIMIZE_EXECS),
        quiet: a.quiet,
        per_test: true,
        listed: None,
        identity: None,
    }
}

pub fn cargo(a: CargoArgs) -> Result<u8, UserError> {
    super::common::check_out_dir("--out", &a.out)?;
    let binaries = build(&a)?;
    let names: Vec<String> = binaries.iter().map(|b| b.dir_name(false)).collect();
    // List the tests first, so each gets its share of the budget.
    let mut listed = Vec::new();
    for b in &binaries {
        let ambiguous = names.iter().filter(|n| **n == b.dir_name(false)).count() > 1;
        let out = a.out.join(b.dir_name(ambiguous));
        let probe = fuzz_args(&a, &b.path, out.clone());
        let (framework, mut tests) = super::common::list_tests(&probe.target)?;
        if let Some(f) = &a.testname {
            tests.retain(|t| t.contains(f.as_str()));
        }
        if !tests.is_empty() {
            listed.push((b, out, framework, tests));
        }
    }
    let total = listed
        .iter()
        .map(|(_, _, _, t)| t.len() as u32)
        .sum::<u32>();
    if total == 0 {
        return Err(UserError::bad_input(match &a.testname {
            Some(f) => format!("no test's name contains {f:?}"),
            None => "the test binaries list no tests".into(),
        }));
    }
    // Sessions there already are refused before any test runs.
    if !a.resume {
        for (_, out, _, tests) in &listed {
            for t in tests {
                super::common::refuse_a_session_there(&out.join(per_test::file_name(t)))
                    .map_err(|_| {
                        UserError::bad_input(format!(
                            "{} already holds sessions of these tests: continue them with --resume, or choose another -o",
                            a.out.display()
                        ))
                    })?;
            }
        }
    }
    let time = match (a.time, a.execs) {
        (None, None) => Some(Duration::from_secs(600)),
        (t, _) => t,
    };
    let started = std::time::Instant::now();
    eprintln!(
        "rewind-fuzz: {total} tests in {} binaries, {} each",
        listed.len(),
        match (time, a.execs) {
            (Some(t), _) => format!("{:.0?}", t / total),
            (None, Some(e)) => format!("{} executions", (e / u64::from(total)).max(1)),
            _ => unreachable!("a budget is set"),
        }
    );
    let mut worst = 0;
    let mut tests_left = total;
    for (binary, out, framework, tests) in listed {
        if super::common::interrupted() {
            break;
        }
        eprintln!("\n=== {} ({})", binary.path.display(), out.display());
        let n = tests.len() as u32;
        let mut f = fuzz_args(&a, &binary.path, out);
        // This binary's share of what is left of the budget.
        f.time = time.map(|t| t.saturating_sub(started.elapsed()) / tests_left * n);
        f.execs = a
            .execs
            .map(|e| (e / u64::from(total)).max(1) * u64::from(n));
        f.listed = Some((framework, tests));
        f.identity = Some(binary.identity());
        tests_left -= n;
        let code = super::fuzz::fuzz(f)?;
        worst = worst.max(code);
    }
    Ok(worst)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        cargo: CargoArgs,
    }

    #[test]
    fn fuzz_gets_the_options_that_make_sense_per_test() {
        let a = Wrap::try_parse_from([
            "cargo",
            "--resume",
            "--seed",
            "3",
            "--sync-points",
            "calls",
            "--ok-exit-codes",
            "0,3",
            "--strategy-mix",
            "0.5:pct,pos",
            "--max-steps",
            "5000",
            "--minimize-execs",
            "10",
            "--env",
            "A=1",
        ])
        .unwrap()
        .cargo;
        let f = fuzz_args(&a, Path::new("/t/accounts-1a2b"), "/o/accounts-lib".into());
        assert!(f.resume && f.per_test);
        assert_eq!(f.target.seed, 3);
        assert_eq!(f.target.sync_points, Some(crate::code::SyncPoints::Calls));
        assert_eq!(f.target.ok_exit_codes, Some(vec![0, 3]));
        assert_eq!(f.strategy_mix, "0.5:pct,pos".parse().unwrap());
        assert_eq!(f.target.max_steps, Some(5000));
        assert_eq!(f.minimize_execs, 10);
        assert_eq!(f.target.env, vec!["A=1".to_string()]);
        assert_eq!(f.out, Path::new("/o/accounts-lib"));
    }

    #[test]
    fn options_not_given_are_fuzzs_own_defaults() {
        #[derive(Parser)]
        struct Fuzz {
            #[command(flatten)]
            fuzz: FuzzArgs,
        }
        let typed = Fuzz::try_parse_from(["fuzz", "--target", "/t/x", "--per-test", "-o", "/o"])
            .unwrap()
            .fuzz;
        let a = Wrap::try_parse_from(["cargo"]).unwrap().cargo;
        let made = fuzz_args(&a, Path::new("/t/x"), "/o".into());
        assert_eq!(format!("{made:?}"), format!("{typed:?}"));
    }

    #[test]
    fn the_package_is_read_from_either_form_of_cargos_package_id() {
        assert_eq!(package_name("path+file:///tmp/accounts#0.1.0"), "accounts");
        assert_eq!(
            package_name("path+file:///tmp/ws/crates/a#accounts@0.1.0"),
            "accounts"
        );
        assert_eq!(
            package_name("registry+https://github.com/rust-lang/crates.io-index#serde@1.0.0"),
            "serde"
        );
    }
}
