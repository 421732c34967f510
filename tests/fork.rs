//! `fork`: a recorded run up to a step, then many schedules from there.
//! A deadlock forked before its decisive preemption ends some other way
//! too; forked after it, it always deadlocks.

mod common;

use std::path::{Path, PathBuf};

use common::{cli, harness, require_kvm};
use serde_json::Value;

/// A minimized deadlock of the philosophers: each of its decisions is
/// needed, the last one too.
fn minimized_deadlock(dir: &Path) -> PathBuf {
    require_kvm();
    let out = cli()
        .current_dir(dir)
        .args(["check", "--json", "-j", "2", "--strategy", "pct:3"])
        .args(["--schedules", "300", "--target"])
        .arg(harness("philosophers"))
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["first_failure"]["kind"], "deadlocked", "{v}");
    let found = dir.join(v["first_failure"]["rwd_file"].as_str().unwrap());
    let min = dir.join("min.rwd");
    let out = cli()
        .args(["minimize", "--json", "--execs", "400"])
        .arg(&found)
        .arg("-o")
        .arg(&min)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    min
}

/// `fork FILE --at AT --json` with 60 continuations into `out`.
fn fork(file: &Path, at: &str, out: &Path, jobs: &str) -> Value {
    fork_with(file, at, out, &["-j", jobs])
}

/// `fork FILE --at AT --json --seed 3 --schedules 60`, and `more`.
fn fork_with(file: &Path, at: &str, out: &Path, more: &[&str]) -> Value {
    let r = cli()
        .args(["fork", "--json", "--schedules", "60", "--seed", "3"])
        .args(more)
        .arg(file)
        .args(["--at", at, "-o"])
        .arg(out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(0), "{err}");
    serde_json::from_slice(&r.stdout).unwrap_or_else(|e| panic!("{e}: {err}"))
}

#[test]
fn a_deadlock_forked_before_and_after_its_decisive_preemption_ends_differently() {
    let dir = tempfile::tempdir().unwrap();
    let min = minimized_deadlock(dir.path());
    let out = dir.path().join("forks");
    let decisions = fork(&min, "end", &out, "2")["decisions"].as_u64().unwrap();
    assert!(decisions >= 1);
    let after = fork(&min, "end", &out, "2");
    assert_eq!(after["recorded"], "deadlocked");
    assert_eq!(after["verdict"], "always", "{after}");
    assert_eq!(after["outcomes"]["deadlocked"]["count"], 60);
    // Just before its last (needed) decision, the continuations make it
    // their own way: some do not deadlock.
    let last = format!("decision:{decisions}");
    let before = fork(&min, &last, &out, "2");
    assert_eq!(before["decisions_kept"], decisions - 1, "{before}");
    assert_ne!(before["verdict"], "always", "{before}");
    assert!(
        before["outcomes"].as_object().unwrap().len() >= 2,
        "{before}"
    );
    // After the first run or two of each machine, the continuations start
    // from a snapshot at the fork's step and take only what follows.
    let at = before["at"].as_u64().unwrap();
    let snapshot = before["snapshot_step"].as_u64().unwrap();
    assert!(snapshot <= at && snapshot > at / 2, "{before}");
    assert!(before["restored"].as_u64().unwrap() >= 56, "{before}");
    // The same fork gives the same table, whatever the jobs.
    assert_eq!(fork(&min, &last, &out, "1")["outcomes"], before["outcomes"]);
    // The first continuation of each outcome is a reproducer of it, whose
    // story says where it was forked from.
    for (kind, row) in before["outcomes"].as_object().unwrap() {
        let file = row["reproducer"].as_str().unwrap();
        let replay = cli().args(["replay", "--json", file]).output().unwrap();
        assert_eq!(
            replay.status.code(),
            Some(0),
            "{kind}: {}",
            String::from_utf8_lossy(&replay.stderr)
        );
        let show = cli().args(["show", file]).output().unwrap();
        let story = String::from_utf8_lossy(&show.stdout);
        let at = before["at"].as_u64().unwrap();
        assert!(
            story.contains(&format!(
                "found by a fork of min.rwd at step {at}, then random seed"
            )),
            "{story}"
        );
    }
}

#[test]
fn a_fork_point_outside_the_run_is_one_line_and_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let min = minimized_deadlock(dir.path());
    for (at, says) in [
        ("100000", "the run has"),
        ("decision:99", "decision(s)"),
        ("soon", "write a step number"),
    ] {
        let r = cli()
            .arg("fork")
            .arg(&min)
            .args(["--at", at, "-o"])
            .arg(dir.path().join("forks"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{at}: {err}");
        assert!(err.contains(says), "{at}: {err}");
    }
    assert!(!dir.path().join("forks").exists(), "nothing written");
}

/// The decisions of a reproducer's schedule.
fn decisions_of(file: &Path) -> Vec<rewind_fuzz::sched::Decision> {
    rewind_fuzz::rwd::Rwd::load(file)
        .unwrap()
        .schedule()
        .decisions
}

#[test]
fn fuzzed_continuations_from_before_the_decisive_preemption_find_the_deadlock_with_the_prefix_held()
{
    let dir = tempfile::tempdir().unwrap();
    let min = minimized_deadlock(dir.path());
    let recorded = decisions_of(&min);
    let last = format!("decision:{}", recorded.len());
    let out = dir.path().join("fuzzed");
    // A budget of runs, one job: the same session whatever the host's
    // speed (the time is only a bound here).
    let run = || {
        let more = ["--time", "10m", "-j", "1"];
        fork_with(&min, &last, &out, &more)
    };
    let fuzzed = run();
    assert_eq!(fuzzed["mode"], "fuzz", "{fuzzed}");
    assert_eq!(fuzzed["schedules"], 60, "{fuzzed}");
    let outcomes = fuzzed["outcomes"].as_object().unwrap();
    assert!(outcomes.contains_key("deadlocked"), "{fuzzed}");
    assert!(outcomes.len() >= 2, "{fuzzed}");
    let counted: u64 = outcomes
        .values()
        .map(|o| o["count"].as_u64().unwrap())
        .sum();
    assert_eq!(counted, 60);
    assert!(fuzzed["restored"].as_u64().unwrap() >= 58, "{fuzzed}");
    assert_eq!(
        run()["outcomes"],
        fuzzed["outcomes"],
        "one job, one seed: one table"
    );
    let at = fuzzed["at"].as_u64().unwrap();
    let prefix: Vec<_> = recorded.iter().filter(|d| d.step <= at).copied().collect();
    assert_eq!(prefix.len(), recorded.len() - 1);
    for (kind, row) in outcomes {
        let file = Path::new(row["reproducer"].as_str().unwrap());
        // The prefix held: the recorded decisions up to the fork, then the
        // continuation's own.
        let got = decisions_of(file);
        assert_eq!(got[..prefix.len()], prefix[..], "{kind}: {got:?}");
        assert!(
            got[prefix.len()..].iter().all(|d| d.step > at),
            "{kind}: {got:?}"
        );
        let replay = cli().args(["replay", "--json"]).arg(file).output().unwrap();
        let v: Value = serde_json::from_slice(&replay.stdout).unwrap();
        assert_eq!(v["matches"], true, "{kind}: {v}");
        let show = cli().arg("show").arg(file).output().unwrap();
        let story = String::from_utf8_lossy(&show.stdout);
        assert!(
            story.contains(&format!(
                "found by a fork of min.rwd at step {at}, then fuzzed"
            )),
            "{story}"
        );
    }
}

#[test]
fn a_fork_fuzzed_for_no_time_is_one_line_and_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let min = minimized_deadlock(dir.path());
    for (args, says) in [
        (&["--time", "0s"][..], "a budget of no time"),
        (
            &["--time", "1m", "--strategy", "default"],
            "--strategy default with --time",
        ),
        (
            &["--time", "1m", "--schedules", "0"],
            "--schedules must be at least 1",
        ),
    ] {
        let r = cli()
            .arg("fork")
            .arg(&min)
            .args(["--at", "end", "-o"])
            .arg(dir.path().join("forks"))
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    assert!(!dir.path().join("forks").exists(), "nothing written");
}
