//! Output oracles: a lost update that only shows in what the program
//! prints, caught by `--expect-stdout` and `--oracle`, reported as
//! `wrong-output`, replayed and explained.

mod common;

use std::path::{Path, PathBuf};

use common::{build_c_with, cli, require_kvm};

const RIGHT: &str = "sum = 10\n";

/// The wrong-sum program and a file holding its right output.
fn wrong_sum(dir: &Path) -> (PathBuf, PathBuf) {
    let exe = build_c_with(
        dir,
        "wrong_sum",
        include_str!("suite/wrong-sum/wrong_sum.c"),
        &["-pthread"],
    );
    let want = dir.join("want.txt");
    std::fs::write(&want, RIGHT).unwrap();
    (exe, want)
}

fn check_json(args: &[&str], dir: &Path) -> serde_json::Value {
    let out = cli()
        .current_dir(dir)
        .args(["check", "--json", "--schedules", "200", "--jobs", "1"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// How many of `check`'s runs ended as `row`.
fn count(v: &serde_json::Value, row: &str) -> u64 {
    v["outcomes"][row].as_u64().unwrap_or(0)
}

#[test]
fn without_an_oracle_the_wrong_sum_passes_and_with_one_it_is_wrong_output() {
    require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let (exe, want) = wrong_sum(dir.path());
    let exe = exe.to_str().unwrap();
    let blind = check_json(&["--target", exe], dir.path());
    assert_eq!(count(&blind, "exited(0)"), 200, "{blind}");
    let judged = check_json(
        &["--target", exe, "--expect-stdout", want.to_str().unwrap()],
        dir.path(),
    );
    assert!(count(&judged, "wrong-output") > 0, "{judged}");
    assert_eq!(
        count(&judged, "wrong-output") + count(&judged, "exited(0)"),
        200,
        "{judged}"
    );
}

#[test]
fn an_oracle_command_judges_and_its_reproducer_runs_it_only_when_asked() {
    require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let (exe, _) = wrong_sum(dir.path());
    let rwd = dir.path().join("wrong.rwd");
    let out = cli()
        .current_dir(dir.path())
        .args(["check", "--schedules", "200", "--jobs", "1", "--target"])
        .arg(&exe)
        .args(["--oracle", "grep -qx 'sum = 10'", "--save-rwd"])
        .arg(&rwd)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("wrong output"), "{err}");
    assert!(
        err.contains("--oracle 'grep -qx '\\''sum = 10'\\'''"),
        "{err}"
    );

    let refused = cli().arg("replay").arg(&rwd).output().unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(why.contains("--run-oracle"), "{why}");
    assert_eq!(why.trim().lines().count(), 1, "{why}");

    let replay = cli()
        .args(["replay", "--run-oracle"])
        .arg(&rwd)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&replay.stderr);
    assert_eq!(replay.status.code(), Some(0), "{said}");
    assert!(
        said.contains("as recorded") && said.contains("wrong output"),
        "{said}"
    );

    let show = cli().arg("show").arg(&rwd).output().unwrap();
    let story = String::from_utf8_lossy(&show.stdout);
    assert!(story.contains("oracle command: grep -qx"), "{story}");
    assert!(story.contains("the end of the actual stdout"), "{story}");
}

#[test]
fn the_fuzzer_finds_the_wrong_sum_and_its_reproducer_shows_both_outputs() {
    require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let (exe, want) = wrong_sum(dir.path());
    let out = dir.path().join("out");
    let r = cli()
        .arg("fuzz")
        .arg("--target")
        .arg(&exe)
        .arg("--expect-stdout")
        .arg(&want)
        .args(["--execs", "300", "--jobs", "1", "-q", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "a finding: {err}");
    let finding = std::fs::read_dir(out.join("findings"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with("wrong-output-") && n.ends_with(".rwd")
        })
        .unwrap_or_else(|| panic!("no wrong-output finding: {err}"));
    let show = cli().arg("show").arg(&finding).output().unwrap();
    let story = String::from_utf8_lossy(&show.stdout);
    assert!(story.contains("expected stdout, from line 1:"), "{story}");
    assert!(story.contains("  | sum = 10"), "{story}");
    assert!(story.contains("actual stdout, from line 1:"), "{story}");
    let got = story
        .lines()
        .skip_while(|l| !l.contains("actual stdout"))
        .nth(1)
        .unwrap_or_default();
    assert!(
        got.contains("| sum = ") && !got.contains("sum = 10"),
        "{story}"
    );
    let replay = cli().arg("replay").arg(&finding).output().unwrap();
    assert_eq!(
        replay.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
}

#[test]
fn an_unreadable_expected_output_is_a_one_line_error() {
    let out = cli()
        .args([
            "run",
            "--target",
            "/bin/true",
            "--expect-stdout",
            "/nonexistent/want.txt",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot read --expect-stdout"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// Runs the CLI with `args`; its exit code and stderr.
fn status(args: &[&str], dir: &Path) -> (Option<i32>, String) {
    let out = cli().current_dir(dir).args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains("killed by a signal"), "{args:?}: {err}");
    (out.status.code(), err)
}

#[test]
fn dynamically_linked_oracles_judge_right_and_wrong_in_every_command() {
    require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let hello = common::harness("hello");
    let hello = hello.to_str().unwrap();
    let right = ["grep -q hello", r#"sh -c 'test "$(cat)" = "hello, world"'"#];
    let wrong = ["grep -q goodbye", r#"sh -c 'test "$(cat)" = "goodbye"'"#];
    for (i, (good, bad)) in right.iter().zip(wrong).enumerate() {
        let ok_rwd = format!("ok{i}.rwd");
        let bad_rwd = format!("bad{i}.rwd");
        let t = ["--target", hello];
        let run = |o: &str, rwd: &str| {
            let mut a = vec!["run", "--oracle", o, "--save-rwd", rwd];
            a.extend(t);
            status(&a, d)
        };
        let (code, err) = run(good, &ok_rwd);
        assert_eq!(code, Some(0), "run {good}: {err}");
        let (code, err) = run(bad, &bad_rwd);
        assert_eq!(code, Some(1), "run {bad}: {err}");
        assert!(err.contains("the oracle command exited with 1"), "{err}");

        for (o, want) in [(*good, 0), (bad, 1)] {
            let mut a = vec!["check", "--schedules", "3", "--jobs", "1", "--oracle", o];
            a.extend(t);
            let (code, err) = status(&a, d);
            assert_eq!(code, Some(want), "check {o}: {err}");
            let out = format!("fuzz{i}-{want}");
            let mut a = vec!["fuzz", "--execs", "5", "--jobs", "1", "-q", "--oracle", o];
            a.extend(["-o", &out]);
            a.extend(t);
            let (code, err) = status(&a, d);
            assert_eq!(code, Some(want), "fuzz {o}: {err}");
        }

        let (code, err) = status(&["replay", "--run-oracle", &ok_rwd], d);
        assert_eq!(code, Some(0), "{err}");
        assert!(
            err.contains("exited with code 0 after") && err.contains("as recorded"),
            "{err}"
        );
        let (code, err) = status(&["replay", "--run-oracle", &bad_rwd], d);
        assert_eq!(code, Some(0), "{err}");
        assert!(
            err.contains("wrong output") && err.contains("as recorded"),
            "{err}"
        );
        let min = format!("min{i}.rwd");
        let (code, err) = status(&["minimize", "--run-oracle", &bad_rwd, "-o", &min], d);
        assert_eq!(code, Some(0), "minimize: {err}");
    }
}
