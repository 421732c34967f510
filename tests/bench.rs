//! `rewind-fuzz bench`: every bug of the suite is found, no fixed twin ever
//! fails, the numbers depend only on the seeds, and the README shows a
//! table and a plot the current code makes.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::cli;
use serde_json::Value;

/// Runs `bench --json` with `args` and returns its exit code and object.
fn bench(args: &[&str]) -> (i32, Value) {
    let (code, v, _) = bench_said(args);
    (code, v)
}

/// `bench` as [`bench`], with what it said on stderr.
fn bench_said(args: &[&str]) -> (i32, Value, String) {
    common::require_kvm();
    let out = cli()
        .args(["bench", "--json", "--no-native"])
        .args(args)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: stdout {} stderr {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (
        out.status.code().unwrap(),
        v,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// (strategy, harness, seed) -> schedules to the bug.
fn schedules_to_bug(v: &Value) -> BTreeMap<(String, String, u64), Option<u64>> {
    v["trials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                (
                    t["strategy"].as_str().unwrap().to_string(),
                    t["harness"].as_str().unwrap().to_string(),
                    t["seed"].as_u64().unwrap(),
                ),
                t["schedules_to_bug"].as_u64(),
            )
        })
        .collect()
}

/// The bug-suite harnesses, in the order bench lists them.
fn suite() -> Vec<String> {
    rewind_fuzz::harness::list()
        .unwrap()
        .into_iter()
        .filter(|h| h.is_bug())
        .map(|h| h.name)
        .collect()
}

#[test]
fn every_buggy_harness_is_found_within_the_default_budget() {
    // Random search finds most within a few dozen schedules; the bugs that
    // need one thread to run far ahead are the fuzzer's. The twins are the
    // next test's.
    let (code, v, said) = bench_said(&[
        "--strategies",
        "random,fuzz",
        "--seeds",
        "1",
        "--fixed-budget",
        "0",
    ]);
    assert_eq!(v["budget"], 1000, "the default budget");
    // Minutes with stderr piped: it says how far it got now and then.
    assert!(said.contains("rewind-fuzz bench: ["), "{said}");
    assert_eq!(
        v["harnesses"],
        serde_json::json!(suite()),
        "the whole suite"
    );
    let trials = schedules_to_bug(&v);
    let missed: Vec<String> = suite()
        .into_iter()
        .filter(|h| {
            ["random", "fuzz"]
                .iter()
                .all(|s| trials[&(s.to_string(), h.to_string(), 0)].is_none())
        })
        .collect();
    assert!(missed.is_empty(), "not found: {missed:?}");
    assert_eq!(v["summary"]["not_found"], serde_json::json!([]));
    assert_eq!(
        v["summary"]["unexpected"], 0,
        "only the expected bugs: {}",
        v["trials"]
    );
    assert_eq!(code, 0);
}

#[test]
fn no_fixed_twin_fails_under_any_strategy() {
    let strategies = ["default", "random", "pct:1", "pct:2", "pct:3", "pos"];
    let (code, v) = bench(&[
        "--strategies",
        &strategies.join(","),
        "--budget",
        "1",
        "--fixed-budget",
        "20",
        "--seeds",
        "1",
    ]);
    let fixed = v["fixed"].as_array().unwrap();
    assert_eq!(
        fixed.len(),
        strategies.len() * suite().len(),
        "every twin under every strategy"
    );
    for f in fixed {
        assert_eq!(f["failures"], 0, "false positive: {f}");
        let want = if f["strategy"] == "default" { 1 } else { 20 };
        assert_eq!(f["schedules"], want, "{f}");
    }
    assert_eq!(v["summary"]["false_positives"], 0);
    assert_eq!(code, 0);
}

#[test]
fn the_same_seeds_give_the_same_schedules_to_bug_whatever_the_jobs() {
    let args = [
        "--harness",
        "atomicity,abba,order-violation",
        "--strategies",
        "random,pct:2,pos,fuzz",
        "--budget",
        "40",
        "--seeds",
        "3",
    ];
    let (_, one) = bench(&[&args[..], &["--jobs", "1"]].concat());
    let (_, two) = bench(&[&args[..], &["--jobs", "2"]].concat());
    let a = schedules_to_bug(&one);
    assert_eq!(
        a.len(),
        4 * 3 * 3,
        "one trial per strategy, harness and seed"
    );
    assert!(a.values().any(|n| n.is_some_and(|n| n > 1)), "{a:?}");
    assert_eq!(a, schedules_to_bug(&two));
}

#[test]
fn bad_input_is_one_line_and_exit_code_2() {
    for args in [
        &["--strategies", "fast"][..],
        &["--strategies", "schedule:/tmp/x"],
        &["--harness", "no-such-harness"],
        &["--harness", "hello"],
        &["--budget", "0"],
        &["--seeds", "0"],
    ] {
        let out = cli().arg("bench").args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn the_readme_shows_the_current_table_the_plot_and_the_command_that_made_them() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let section = readme
        .split("\n## Benchmarks\n")
        .nth(1)
        .expect("a Benchmarks section")
        .split("\n## ")
        .next()
        .unwrap();
    assert!(
        section.contains(rewind_fuzz::bench::results::STRATEGY_HEADER),
        "the strategy table as bench prints it now"
    );
    assert!(section.contains("| harness |"), "the per-harness table");
    let command = section
        .lines()
        .find(|l| l.starts_with("rewind-fuzz bench"))
        .expect("the command that made them");
    assert!(command.contains("--plot docs/bench.svg"), "{command}");
    assert!(section.contains("](docs/bench.svg)"), "the plot is shown");
    let svg = std::fs::read_to_string(root.join("docs/bench.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("bugs found"));
}

/// The fuzzer's claim: coverage guidance finds the bug in fewer schedules
/// than the same fuzzer drawing nothing but fresh random walks
/// (`--strategy-mix 1.0:random`), on at least half of the bug suite,
/// comparing medians over five seeds (a seed that never found it counts as
/// worse than any number).
#[test]
fn coverage_guided_fuzzing_beats_pure_random_search_on_half_the_suite() {
    let (code, v) = bench(&[
        "--strategies",
        "fuzz,fuzz:1.0:random",
        "--seeds",
        "5",
        "--budget",
        "500",
        "--fixed-budget",
        "0",
    ]);
    assert_eq!(code, 0, "{v}");
    let trials = schedules_to_bug(&v);
    let median = |strategy: &str, harness: &str| {
        let mut n: Vec<u64> = (0..5)
            .map(|seed| {
                trials[&(strategy.to_string(), harness.to_string(), seed)].unwrap_or(u64::MAX)
            })
            .collect();
        n.sort();
        n[2]
    };
    let mut table = String::new();
    let mut wins = 0;
    let harnesses = suite();
    for h in &harnesses {
        let (guided, random) = (median("fuzz", h), median("fuzz:1.0:random", h));
        wins += usize::from(guided < random);
        table += &format!("{h:<24} guided {guided:>20} random {random:>20}\n");
    }
    assert!(
        2 * wins >= harnesses.len(),
        "guided search won on {wins} of {} harnesses:\n{table}",
        harnesses.len()
    );
}
