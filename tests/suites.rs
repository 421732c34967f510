//! `bench --suite DIR`: a directory of programs with manifests, each with
//! the outcome that is its bug, its normal exit codes and an optional
//! output oracle; programs that cannot run are reported and skipped.

mod common;

use common::{cli, require_kvm};
use serde_json::Value;

fn bench(args: &[&str]) -> Value {
    require_kvm();
    let out = cli()
        .args(["bench", "--no-native", "--json", "-j", "2"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

const SUITE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/suite");

#[test]
fn a_suite_directory_gives_each_program_its_row() {
    let v = bench(&[
        "--suite",
        SUITE,
        "--strategies",
        "random,pct:3",
        "--trial-time",
        "10s",
        "--seeds",
        "2",
        "--fixed-budget",
        "100",
    ]);
    assert_eq!(v["trial_time_s"], 10.0, "{v}");
    for st in v["summary"]["strategies"].as_array().unwrap() {
        assert_eq!(st["bugs_per_seed"].as_array().unwrap().len(), 2, "{st}");
        assert!(st["bugs_per_seed_mean"].as_f64().unwrap() >= 1.0, "{st}");
    }
    let ran: Vec<&str> = v["harnesses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h.as_str().unwrap())
        .collect();
    assert_eq!(
        ran,
        [
            "built-by-command",
            "crash-exit-three",
            "deadlock",
            "wrong-sum"
        ],
        "{v}"
    );
    // Every program that ran has its bug found by some trial, and none
    // counted a run of its normal exit code as anything but a pass.
    for h in &ran {
        let trials: Vec<&Value> = v["trials"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["harness"] == *h)
            .collect();
        assert!(
            trials.iter().any(|t| !t["schedules_to_bug"].is_null()),
            "{h}: {trials:?}"
        );
        assert!(
            trials.iter().all(|t| t["unexpected"] == 0),
            "{h}: {trials:?}"
        );
    }
    for f in v["fixed"].as_array().unwrap() {
        assert_eq!(f["failures"], 0, "a fixed twin failed: {f}");
    }
    let unrunnable = v["unrunnable"].as_array().unwrap();
    let why = |name: &str| {
        unrunnable
            .iter()
            .find(|u| u["harness"] == name)
            .and_then(|u| u["reason"].as_str())
            .unwrap_or_else(|| panic!("{name} is not reported: {unrunnable:?}"))
            .to_string()
    };
    assert!(why("cannot-run").contains("io_uring_setup"));
    assert!(why("does-not-build").contains("failed"));
}

#[test]
fn the_bundled_suite_as_a_directory_gives_the_same_cells() {
    let harnesses = concat!(env!("CARGO_MANIFEST_DIR"), "/harnesses");
    let common = [
        "--harness",
        "abba,depth3",
        "--strategies",
        "random,pct:3",
        "--budget",
        "100",
        "--seeds",
        "2",
        "--fixed-budget",
        "20",
    ];
    let bundled = bench(&common);
    let as_suite = bench(&[&["--suite", harnesses][..], &common[..]].concat());
    let cells = |v: &Value| -> Vec<(Value, Value, Value, Value)> {
        v["trials"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["strategy"].clone(),
                    t["harness"].clone(),
                    t["seed"].clone(),
                    t["schedules_to_bug"].clone(),
                )
            })
            .collect()
    };
    assert_eq!(cells(&bundled), cells(&as_suite));
    assert!(!cells(&bundled).is_empty());
}

#[test]
fn a_prebuilt_program_and_its_twin_are_run_as_they_are() {
    require_kvm();
    let suite = tempfile::tempdir().unwrap();
    let dir = suite.path().join("prebuilt");
    std::fs::create_dir(&dir).unwrap();
    let source = include_str!("suite/built-by-command/publish.c");
    let buggy = common::build_c_with(&dir, "lost", source, &["-pthread"]);
    let fixed = common::build_c_with(&dir, "lost-fixed", source, &["-pthread", "-DFIXED"]);
    std::fs::write(
        dir.join("harness.toml"),
        format!(
            "description = \"prebuilt\"\nprogram = {:?}\n[expect]\nkind = \"crashed\"\n[fixed]\nprogram = \"lost-fixed\"\n",
            buggy.to_str().unwrap()
        ),
    )
    .unwrap();
    assert!(fixed.is_file());
    let v = bench(&[
        "--suite",
        suite.path().to_str().unwrap(),
        "--strategies",
        "random",
        "--budget",
        "1000",
        "--seeds",
        "1",
        "--fixed-budget",
        "50",
    ]);
    assert_eq!(v["unrunnable"].as_array().unwrap().len(), 0, "{v}");
    assert!(!v["trials"][0]["schedules_to_bug"].is_null(), "{v}");
    assert_eq!(v["fixed"][0]["failures"], 0, "{v}");
    assert_eq!(v["fixed"][0]["schedules"], 50, "{v}");
}

#[test]
fn a_suite_that_is_not_a_directory_is_a_one_line_error() {
    let out = cli()
        .args(["bench", "--suite", "/nonexistent/suite"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not a directory"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
