//! `--per-test`: a test binary (Rust's libtest, GoogleTest) explored one
//! test at a time, the way `cargo test NAME` picks one. All of a binary's
//! tests in one process share one schedule, so a bug in one test is
//! diluted by every other test's steps; alone, each gets the whole
//! schedule space and its findings name it.

use std::path::Path;
use std::time::{Duration, Instant};

use super::UserError;
use super::check::CheckArgs;
use super::common::{TargetArgs, vm_error};
use super::fuzz::FuzzArgs;
use crate::kernel::vfs::FileSource;
use crate::vm::Vm;

/// The test harness a binary was built with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framework {
    Libtest,
    GoogleTest,
}

impl Framework {
    /// Recognizes the harness by the options its binary understands.
    fn of(binary: &[u8]) -> Option<Framework> {
        let has = |needle: &[u8]| binary.windows(needle.len()).any(|w| w == needle);
        if has(b"gtest_list_tests") {
            Some(Framework::GoogleTest)
        } else if has(b"test-threads") {
            Some(Framework::Libtest)
        } else {
            None
        }
    }

    fn list_args(self) -> Vec<String> {
        match self {
            Framework::Libtest => vec!["--list".into(), "--format".into(), "terse".into()],
            Framework::GoogleTest => vec!["--gtest_list_tests".into()],
        }
    }

    /// The arguments that run `test` alone, before the user's own.
    fn run_args(self, test: &str) -> Vec<String> {
        match self {
            Framework::Libtest => vec!["--exact".into(), test.into(), "--test-threads=1".into()],
            Framework::GoogleTest => vec![format!("--gtest_filter={test}")],
        }
    }

    /// The test names in the output of [`Framework::list_args`].
    fn parse_list(self, out: &str) -> Vec<String> {
        match self {
            // `name: test` (benchmarks end in `: benchmark`).
            Framework::Libtest => out
                .lines()
                .filter_map(|l| l.strip_suffix(": test"))
                .map(str::to_string)
                .collect(),
            // `Suite.` then indented `Name`, either maybe followed by a
            // `# TypeParam = ...` comment.
            Framework::GoogleTest => {
                let mut suite = String::new();
                let mut tests = Vec::new();
                for line in out.lines() {
                    let name = line.split('#').next().unwrap_or("").trim_end();
                    if name.trim().is_empty() {
                        continue;
                    }
                    if !line.starts_with(' ') {
                        // gtest_main's "Running main() from ..." is no suite.
                        suite = if name.ends_with('.') {
                            name.to_string()
                        } else {
                            String::new()
                        };
                    } else if !suite.is_empty() {
                        tests.push(format!("{suite}{}", name.trim()));
                    }
                }
                tests
            }
        }
    }
}

/// A test's name made safe for a file or directory name.
pub fn file_name(test: &str) -> String {
    test.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The tests of the target, listed by the binary itself run in the
/// machine (as every run is).
pub fn list(target: &TargetArgs) -> Result<(Framework, Vec<String>), UserError> {
    let cfg = target.config()?;
    let binary = std::fs::read(&cfg.kernel.exe).map_err(|e| {
        UserError::bad_input(format!("cannot read --target {}: {e}", target.target))
    })?;
    let framework = Framework::of(&binary).ok_or_else(|| {
        UserError::bad_input(format!(
            "--per-test: {} is neither a Rust test binary (cargo test --no-run) nor a GoogleTest one",
            target.target
        ))
    })?;
    let mut listing = cfg.clone();
    listing.kernel.argv.truncate(1);
    listing.kernel.argv.extend(framework.list_args());
    listing.stream_output = false;
    let mut vm = Vm::new(&listing, FileSource::host()).map_err(vm_error)?;
    let report = vm.run().map_err(vm_error)?;
    if !report.outcome.is_success() {
        return Err(UserError::bad_input(format!(
            "--per-test: listing the tests of {} ended {}",
            target.target,
            report.outcome.summary()
        )));
    }
    let tests = framework.parse_list(&String::from_utf8_lossy(&report.stdout));
    if tests.is_empty() {
        return Err(UserError::bad_input(format!(
            "--per-test: {} lists no tests",
            target.target
        )));
    }
    Ok((framework, tests))
}

/// `target` running `test` alone, the user's arguments after.
fn for_test(target: &TargetArgs, framework: Framework, test: &str) -> TargetArgs {
    let mut t = target.clone();
    t.args = framework.run_args(test);
    t.args.extend(target.args.iter().cloned());
    t
}

/// One row of the closing table.
struct Explored {
    test: String,
    /// Schedules (check) or executions (fuzz).
    runs: u64,
    time: Duration,
    /// Failing schedules (check) or findings (fuzz).
    failures: u64,
    code: u8,
}

/// The closing table: `runs` names the runs (schedules, executions) and
/// `failed` what failed (failing schedules, findings), as the commands
/// count them.
fn print_table((runs, failed): (&str, &str), rows: &[Explored]) {
    let width = rows.iter().map(|r| r.test.len()).max().unwrap_or(4).max(4);
    eprintln!();
    eprintln!("{:<width$}  {runs:>10}  {:>8}  {failed:>8}", "test", "time");
    for r in rows {
        eprintln!(
            "{:<width$}  {:>10}  {:>7.0}s  {:>8}{}",
            r.test,
            r.runs,
            r.time.as_secs_f64(),
            r.failures,
            if r.code == 1 { "  FAILED" } else { "" }
        );
    }
}

/// The worst exit code: 2 (bad input) over 1 (a failure) over 0.
fn worst(rows: &[Explored]) -> u8 {
    rows.iter().map(|r| r.code).max().unwrap_or(0)
}

/// `check --per-test`: every test alone, each with `--schedules`.
pub fn check_each(a: CheckArgs) -> Result<u8, UserError> {
    let (framework, tests) = list(&a.target)?;
    eprintln!(
        "rewind-fuzz: {} tests in {}, {} schedules each",
        tests.len(),
        a.target.target,
        a.schedules
    );
    let mut rows = Vec::new();
    for test in &tests {
        eprintln!("\n== {test}");
        let mut one = a.clone();
        one.per_test = false;
        one.test = Some(test.clone());
        one.target = for_test(&a.target, framework, test);
        let derived = |p: &Option<std::path::PathBuf>| p.as_ref().map(|p| per_test_path(p, test));
        one.save_schedule = derived(&a.save_schedule);
        one.save_rwd = derived(&a.save_rwd);
        let start = Instant::now();
        // A test whose runs outlast --time is a row of its own, not the
        // end of the others.
        let (code, schedules, failures) = match super::check::check_counting(one) {
            Ok((code, checked)) => (code, checked.schedules, checked.failures),
            Err(e) if super::check::outlasted_time(&e) => {
                eprintln!("rewind-fuzz: {}", e.message);
                (e.code, 0, 0)
            }
            Err(e) => return Err(e),
        };
        rows.push(Explored {
            test: test.clone(),
            runs: schedules,
            time: start.elapsed(),
            failures,
            code,
        });
    }
    print_table(("schedules", "failing"), &rows);
    Ok(worst(&rows))
}

/// `FILE.ext` for one test: `FILE-<test>.ext`.
fn per_test_path(p: &Path, test: &str) -> std::path::PathBuf {
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (stem, ext) = match name.split_once('.') {
        Some((s, e)) => (s.to_string(), format!(".{e}")),
        None => (name.clone(), String::new()),
    };
    p.with_file_name(format!("{stem}-{}{ext}", file_name(test)))
}

/// `fuzz --per-test`: the budget shared evenly, one session per test in
/// `--out/<test>/`.
pub fn fuzz_each(a: FuzzArgs) -> Result<u8, UserError> {
    if a.time.is_none() && a.execs.is_none() {
        return Err(UserError::bad_input(
            "--per-test shares a budget between the tests: give --time (e.g. --time 1h) or --execs",
        ));
    }
    let (framework, tests) = match a.listed.clone() {
        Some(listed) => listed,
        None => list(&a.target)?,
    };
    let n = tests.len() as u32;
    let share = |t: Duration, left: u32| (t / left).max(Duration::from_secs(1));
    let execs = a.execs.map(|e| (e / u64::from(n)).max(1));
    eprintln!(
        "rewind-fuzz: {n} tests in {}, each fuzzed alone for {}",
        a.target.target,
        match (a.time, execs) {
            (Some(t), _) => format!("{:.0?}", share(t, n)),
            (None, Some(e)) => format!("{e} executions"),
            _ => unreachable!("a budget was checked"),
        }
    );
    // Sessions of one binary's tests: a session already there is refused
    // before any test has run, not after some have.
    if !a.resume {
        for test in &tests {
            refuse_a_session_there(&a.out.join(file_name(test)))?;
        }
    }
    let started = Instant::now();
    let mut rows = Vec::new();
    for (i, test) in tests.iter().enumerate() {
        if super::common::interrupted() {
            break;
        }
        eprintln!("\n== {test}");
        let mut one = a.clone();
        one.per_test = false;
        one.target = for_test(&a.target, framework, test);
        one.out = a.out.join(file_name(test));
        // Each test its share of the time left: recording a finding at
        // the end of one test's share takes from the others', not from
        // the total.
        let left = n - i as u32;
        one.time = a
            .time
            .map(|t| share(t.saturating_sub(started.elapsed()), left));
        one.execs = execs;
        one.identity = a.identity.as_ref().map(|id| format!("{id}\0{test}"));
        let start = Instant::now();
        let (code, summary) = super::fuzz::session(one)?;
        rows.push(Explored {
            test: test.clone(),
            runs: summary.as_ref().map_or(0, |s| s.execs),
            time: start.elapsed(),
            failures: summary
                .as_ref()
                .map_or(0, |s| (s.findings.len() + s.unsaved.len()) as u64),
            code,
        });
    }
    print_table(("executions", "findings"), &rows);
    Ok(worst(&rows))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_lists_are_read_as_each_harness_writes_them() {
        let libtest = "tests::a: test\ntests::b: test\nbench_x: benchmark\n";
        assert_eq!(
            Framework::Libtest.parse_list(libtest),
            vec!["tests::a", "tests::b"]
        );
        let gtest = "Running main() from gtest_main.cc\nRegistry.\n  Swaps\n  Moves\nTyped/0.  # TypeParam = int\n  Works\n";
        assert_eq!(
            Framework::GoogleTest.parse_list(gtest),
            vec!["Registry.Swaps", "Registry.Moves", "Typed/0.Works"]
        );
        assert_eq!(file_name("tests::a b/c"), "tests__a_b_c");
        assert_eq!(
            per_test_path(Path::new("/x/f.schedule.json"), "t::a"),
            Path::new("/x/f-t__a.schedule.json")
        );
    }
}
