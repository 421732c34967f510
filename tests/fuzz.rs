//! The fuzzer: findings, corpus sharing between machines, resuming.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::cli;

fn names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".json"))
                .collect()
        })
        .unwrap_or_default()
}

fn fuzz(args: &[&str]) -> std::process::Output {
    common::require_kvm();
    let out = cli().args(args).output().unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stat(out: &Path, key: &str) -> u64 {
    let text = std::fs::read_to_string(out.join("fuzzer_stats")).unwrap();
    text.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == key).then(|| v.trim().parse().ok()).flatten()
        })
        .unwrap_or_else(|| panic!("no {key} in fuzzer_stats:\n{text}"))
}

#[test]
fn two_fuzzers_sharing_a_sync_dir_end_up_with_each_others_corpus() {
    let dir = tempfile::tempdir().unwrap();
    let sync = dir.path().join("sync");
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let target = "harness:prodcons";
    let common = |out: &Path, id: &str| {
        vec![
            "--target".to_string(),
            target.into(),
            "--jobs".into(),
            "1".into(),
            "--time".into(),
            "8s".into(),
            "-q".into(),
            "--sync-dir".into(),
            sync.to_string_lossy().into(),
            "--sync-id".into(),
            id.into(),
            "-o".into(),
            out.to_string_lossy().into(),
        ]
    };
    // A fuzzes and publishes; B starts after and takes all of A's; A
    // resumes and takes all of B's.
    let run = |args: Vec<String>| fuzz(&args.iter().map(String::as_str).collect::<Vec<_>>());
    run(common(&a, "a"));
    let a_pub = names(&sync.join("a").join("queue"));
    run(common(&b, "b"));
    let b_pub = names(&sync.join("b").join("queue"));
    let mut resume = common(&a, "a");
    resume.push("--resume".into());
    run(resume);
    assert!(!a_pub.is_empty() && !b_pub.is_empty());
    let a_queue = names(&a.join("queue"));
    let b_queue = names(&b.join("queue"));
    assert!(
        a_pub.is_subset(&b_queue),
        "B took A's entries: missing {:?}",
        a_pub.difference(&b_queue).collect::<Vec<_>>()
    );
    assert!(
        b_pub.is_subset(&a_queue),
        "A took B's entries: missing {:?}",
        b_pub.difference(&a_queue).collect::<Vec<_>>()
    );
}

#[test]
fn a_foreign_file_in_the_sync_dir_is_skipped_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let sync = dir.path().join("sync");
    let peer = sync.join("other").join("queue");
    std::fs::create_dir_all(&peer).unwrap();
    std::fs::write(peer.join("garbage.json"), b"\x00not a schedule").unwrap();
    std::fs::write(
        peer.join("elsewhere.json"),
        br#"{"target": 12345, "decisions": [], "tail": {"kind": "default"}}"#,
    )
    .unwrap();
    let out = dir.path().join("out");
    let r = fuzz(&[
        "--target",
        "harness:prodcons",
        "--jobs",
        "1",
        "--time",
        "4s",
        "-q",
        "--sync-dir",
        sync.to_str().unwrap(),
        "--sync-id",
        "me",
        "-o",
        out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("garbage.json") && err.contains("not a schedule"),
        "{err}"
    );
    assert!(
        err.contains("elsewhere.json") && err.contains("another target"),
        "{err}"
    );
    assert!(!names(&out.join("queue")).contains("garbage.json"));
}

#[test]
fn resume_continues_with_the_previous_corpus() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();
    let base = [
        "--target",
        "harness:cpp-threads",
        "--jobs",
        "1",
        "-q",
        "-o",
        o,
    ];
    fuzz(&[&base[..], &["--time", "6s"]].concat());
    let first = names(&out.join("queue"));
    let first_count = stat(&out, "corpus_count");
    assert!(!first.is_empty());
    // Without --resume the session is not overwritten.
    let refused = cli().args(base).args(["--time", "2s"]).output().unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--resume"));
    fuzz(&[&base[..], &["--time", "6s", "--resume"]].concat());
    let second = names(&out.join("queue"));
    assert!(first.is_subset(&second), "no corpus entry was lost");
    assert!(
        stat(&out, "corpus_count") >= first_count,
        "the corpus count never drops"
    );
}

#[test]
fn coverage_guided_search_is_deterministic_for_a_seed() {
    use std::sync::Arc;

    use rewind_fuzz::fuzz::{StrategyMix, schedules_to_bug};
    let c = common::config(&common::harness("atomicity"), &[]);
    let accept: Arc<dyn Fn(&rewind_fuzz::vm::RunReport) -> bool + Send + Sync> =
        Arc::new(|r| r.outcome.kind() == "crashed");
    let a = schedules_to_bug(c.clone(), 3, StrategyMix::default(), 3000, accept.clone()).unwrap();
    let b = schedules_to_bug(c, 3, StrategyMix::default(), 3000, accept).unwrap();
    assert!(a.is_some(), "the atomicity violation is found");
    assert_eq!(a, b);
}

fn finds_minimizes_and_replays_the_deadlock(harness: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let r = fuzz(&[
        "--target",
        harness,
        "--time",
        "60s",
        "--jobs",
        "2",
        "-q",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(r.status.code(), Some(1), "a finding makes the exit code 1");
    let findings = out.join("findings");
    let deadlock = std::fs::read_dir(&findings)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with("deadlocked-") && n.ends_with(".rwd")
        })
        .unwrap_or_else(|| panic!("no deadlock finding in {}", findings.display()));
    let story = std::fs::read_to_string(deadlock.with_extension("txt")).unwrap();
    assert!(story.contains("wait-for cycle"), "{story}");
    assert!(story.contains("minimized from"), "{story}");
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(err.contains("Reproduce with: rewind-fuzz replay"), "{err}");
    assert!(
        err.contains("Explain with:   rewind-fuzz show")
            && err.contains("Debug with:     rewind-fuzz gdb")
    );
    let replay = cli().arg("replay").arg(&deadlock).output().unwrap();
    assert_eq!(
        replay.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
    assert!(stat(&out, "findings_deadlocked") >= 1);
}

#[test]
fn fuzzing_the_philosophers_for_a_minute_writes_a_minimized_deadlock_that_replays() {
    finds_minimizes_and_replays_the_deadlock("harness:philosophers");
}

#[test]
fn fuzzing_the_bank_transfer_for_a_minute_writes_a_minimized_deadlock_that_replays() {
    finds_minimizes_and_replays_the_deadlock("harness:bank-transfer");
}
