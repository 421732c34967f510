//! `rewind-fuzz cargo [-p CRATE] [TESTNAME]`: builds a Cargo project's test
//! binaries (`cargo test --no-run`) and fuzzes each of their tests alone,
//! the time shared between all of them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use clap::{Args, Parser};

use super::UserError;
use super::fuzz::FuzzArgs;

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
    /// The whole budget, shared evenly between the tests.
    #[arg(long = "time", short = 'V', value_parser = super::common::parse_time_budget, default_value = "10m")]
    pub time: Duration,
    /// Output directory: one session per test binary and test.
    #[arg(long, short = 'o', default_value = "rewind-out")]
    pub out: PathBuf,
    /// Machines fuzzing in parallel (default: every core).
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// Only print findings and the summaries.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// The test binaries `cargo test --no-run` builds, by the JSON messages it
/// prints.
fn build(a: &CargoArgs) -> Result<Vec<PathBuf>, UserError> {
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
            binaries.push(PathBuf::from(exe));
        }
    }
    if binaries.is_empty() {
        return Err(UserError::bad_input(
            "cargo test --no-run built no test binary; does the project have tests?",
        ));
    }
    Ok(binaries)
}

/// The fuzz options for one binary, as if typed.
fn fuzz_args(a: &CargoArgs, binary: &Path, time: Duration) -> FuzzArgs {
    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        fuzz: FuzzArgs,
    }
    let name = binary
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut argv: Vec<String> = vec![
        "fuzz".into(),
        "--target".into(),
        binary.to_string_lossy().into_owned(),
        "--per-test".into(),
        "--time".into(),
        format!("{}ms", time.as_millis().max(1000)),
        "-o".into(),
        a.out.join(name).to_string_lossy().into_owned(),
    ];
    if let Some(j) = a.jobs {
        argv.extend(["--jobs".into(), j.to_string()]);
    }
    if a.quiet {
        argv.push("--quiet".into());
    }
    Wrap::try_parse_from(argv)
        .expect("the options are well formed")
        .fuzz
}

pub fn cargo(a: CargoArgs) -> Result<u8, UserError> {
    let binaries = build(&a)?;
    // List the tests first, so each gets the same share of the time.
    let mut listed = Vec::new();
    for b in &binaries {
        let probe = fuzz_args(&a, b, a.time);
        let (framework, mut tests) = super::pertest::list(&probe.target)?;
        if let Some(f) = &a.testname {
            tests.retain(|t| t.contains(f.as_str()));
        }
        if !tests.is_empty() {
            listed.push((b.clone(), framework, tests));
        }
    }
    let total = listed.iter().map(|(_, _, t)| t.len() as u32).sum::<u32>();
    if total == 0 {
        return Err(UserError::bad_input(match &a.testname {
            Some(f) => format!("no test's name contains {f:?}"),
            None => "the test binaries list no tests".into(),
        }));
    }
    eprintln!(
        "rewind-fuzz: {total} tests in {} binaries, {:.0?} each",
        listed.len(),
        a.time / total
    );
    let mut worst = 0;
    for (binary, framework, tests) in listed {
        if super::common::interrupted() {
            break;
        }
        eprintln!("\n=== {}", binary.display());
        let mut f = fuzz_args(&a, &binary, a.time / total * tests.len() as u32);
        f.listed = Some((framework, tests));
        let code = super::fuzz::fuzz(f)?;
        worst = worst.max(code);
    }
    Ok(worst)
}
