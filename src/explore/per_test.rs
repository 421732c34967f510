//! A test binary's tests, each explored alone (`--per-test`), the way
//! `cargo test NAME` picks one: Rust's libtest and GoogleTest binaries list
//! their tests, run one by name, and the sessions of one binary's tests
//! are summed up in one table. All of a binary's tests in one process
//! share one schedule, so a bug in one test is diluted by every other
//! test's steps; alone, each gets the whole schedule space and its
//! findings name it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::engine::{RunConfig, Vm, VmError};
use crate::kernel::vfs::FileSource;

/// Why a binary's tests could not be listed.
#[derive(Debug, thiserror::Error)]
pub enum ListError {
    #[error("cannot read {0}: {1}")]
    Unreadable(String, std::io::Error),
    #[error("{0} is neither a Rust test binary (cargo test --no-run) nor a GoogleTest one")]
    NotATestBinary(String),
    #[error("listing the tests of {0} ended {1}")]
    ListingFailed(String, String),
    #[error("{0} lists no tests")]
    NoTests(String),
    #[error(transparent)]
    Vm(#[from] VmError),
}

/// The test harness a binary was built with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framework {
    Libtest,
    GoogleTest,
}

impl Framework {
    /// Recognizes the harness by the options its binary understands.
    pub fn of(binary: &[u8]) -> Option<Framework> {
        let has = |needle: &[u8]| binary.windows(needle.len()).any(|w| w == needle);
        if has(b"gtest_list_tests") {
            Some(Framework::GoogleTest)
        } else if has(b"test-threads") {
            Some(Framework::Libtest)
        } else {
            None
        }
    }

    pub fn list_args(self) -> Vec<String> {
        match self {
            Framework::Libtest => vec!["--list".into(), "--format".into(), "terse".into()],
            Framework::GoogleTest => vec!["--gtest_list_tests".into()],
        }
    }

    /// The arguments that run `test` alone, before the user's own.
    pub fn run_args(self, test: &str) -> Vec<String> {
        match self {
            Framework::Libtest => vec!["--exact".into(), test.into(), "--test-threads=1".into()],
            Framework::GoogleTest => vec![format!("--gtest_filter={test}")],
        }
    }

    /// The test names in the output of [`Framework::list_args`].
    pub fn parse_list(self, out: &str) -> Vec<String> {
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

/// The tests of the program `cfg` runs (`shown` names it in errors),
/// listed by the binary itself run in the machine, as every run is.
pub fn list(cfg: &RunConfig, shown: &str) -> Result<(Framework, Vec<String>), ListError> {
    let binary =
        std::fs::read(&cfg.kernel.exe).map_err(|e| ListError::Unreadable(shown.to_string(), e))?;
    let framework =
        Framework::of(&binary).ok_or_else(|| ListError::NotATestBinary(shown.to_string()))?;
    let mut listing = cfg.clone();
    listing.kernel.argv.truncate(1);
    listing.kernel.argv.extend(framework.list_args());
    listing.stream_output = false;
    let mut vm = Vm::new(&listing, FileSource::host())?;
    let report = vm.run()?;
    if !report.outcome.is_success() {
        return Err(ListError::ListingFailed(
            shown.to_string(),
            report.outcome.summary(),
        ));
    }
    let tests = framework.parse_list(&String::from_utf8_lossy(&report.stdout));
    if tests.is_empty() {
        return Err(ListError::NoTests(shown.to_string()));
    }
    Ok((framework, tests))
}

/// `FILE.ext` for one test: `FILE-<test>.ext`.
pub fn per_test_path(p: &Path, test: &str) -> PathBuf {
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

/// One row of the closing table.
pub struct Explored {
    pub test: String,
    /// Schedules (check) or executions (fuzz).
    pub runs: u64,
    pub time: Duration,
    /// Failing schedules (check) or findings (fuzz).
    pub failures: u64,
    /// The exit code its command gave: 0, 1 (it failed) or 2.
    pub code: u8,
}

/// The closing table, one line a test: `runs` names the runs (schedules,
/// executions) and `failed` what failed (failing schedules, findings), as
/// the commands count them.
pub fn table((runs, failed): (&str, &str), rows: &[Explored]) -> String {
    use std::fmt::Write;
    let width = rows.iter().map(|r| r.test.len()).max().unwrap_or(4).max(4);
    let mut out = format!(
        "{:<width$}  {runs:>10}  {:>8}  {failed:>8}\n",
        "test", "time"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<width$}  {:>10}  {:>7.0}s  {:>8}{}",
            r.test,
            r.runs,
            r.time.as_secs_f64(),
            r.failures,
            if r.code == 1 { "  FAILED" } else { "" }
        );
    }
    out
}

/// The worst exit code: 2 (bad input) over 1 (a failure) over 0.
pub fn worst(rows: &[Explored]) -> u8 {
    rows.iter().map(|r| r.code).max().unwrap_or(0)
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
        let row = |test: &str, code| Explored {
            test: test.into(),
            runs: 30,
            time: Duration::from_secs(2),
            failures: code as u64,
            code,
        };
        let t = table(("schedules", "failing"), &[row("tests::a", 0), row("b", 1)]);
        assert_eq!(
            t,
            "test       schedules      time   failing\n\
             tests::a          30        2s         0\n\
             b                 30        2s         1  FAILED\n"
        );
        assert_eq!(worst(&[row("a", 0), row("b", 1)]), 1);
        assert_eq!(
            per_test_path(Path::new("/x/f.schedule.json"), "t::a"),
            Path::new("/x/f-t__a.schedule.json")
        );
    }
}
