//! `shell`: a shell inside a recorded run at a step. It sees the run's
//! files, `/proc` and environment; the run is paused and stays as
//! recorded, and the reproducer with it.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use common::{build_c_with, cli, harness, require_kvm};
use serde_json::Value;

/// A reproducer of the `abba` harness deadlocking: each of two threads
/// holds one lock and waits for the other's.
fn deadlock(dir: &Path) -> PathBuf {
    require_kvm();
    let rwd = dir.join("abba.rwd");
    let out = cli()
        .current_dir(dir)
        .args(["check", "--json", "-j", "1", "--seed", "1", "--target"])
        .arg(harness("abba"))
        .arg("--save-rwd")
        .arg(&rwd)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["first_failure"]["kind"], "deadlocked", "{v}");
    rwd
}

/// `shell FILE --at AT --command CMD`, its standard input empty.
fn shell(file: &Path, at: &str, cmd: &str) -> Output {
    cli()
        .args(["shell", "--at", at, "--command", cmd])
        .arg(file)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `replay --json` of `file`: its trace hash, after checking it matched.
fn replayed_hash(file: &Path) -> String {
    let out = cli().args(["replay", "--json"]).arg(file).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["matches"], true, "{v}");
    v["got"]["trace_hash"].as_str().unwrap().to_string()
}

#[test]
fn a_shell_at_the_end_of_a_deadlock_sees_both_threads_waiting_on_their_locks() {
    let dir = tempfile::tempdir().unwrap();
    let rwd = deadlock(dir.path());
    let before = std::fs::read(&rwd).unwrap();
    let hash = replayed_hash(&rwd);
    let out = shell(
        &rwd,
        "end",
        "for t in /proc/1/task/*; do echo \"== ${t##*/}\"; cat $t/status $t/wchan; echo; cat $t/stack; done",
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // The main thread joins; the two others each wait on a lock the other
    // holds, asleep in the futex wait, their stacks naming where they
    // asked for it.
    let threads: Vec<&str> = stdout.split("== ").skip(1).collect();
    assert_eq!(threads.len(), 3, "{stdout}");
    let mut waiting = 0;
    for (t, other) in [(1, 2), (2, 1)] {
        let s = threads[t];
        assert!(s.contains("State:\tS (sleeping)"), "{s}");
        assert!(s.contains("futex_wait_queue"), "{s}");
        let holder = threads[other].split_whitespace().next().unwrap();
        let held_by = format!(" held by thread {holder}\n");
        if s.contains("Waits:\tlock 0x") && s.contains(&held_by) {
            waiting += 1;
        }
        assert!(s.contains("pthread_mutex_lock"), "{s}");
        assert!(
            s.contains("(abba.c:"),
            "the stack names the user's code: {s}"
        );
    }
    assert_eq!(waiting, 2, "{stdout}");
    // The main thread joins the first of them.
    let joined = threads[1].split_whitespace().next().unwrap();
    assert!(
        threads[0].contains(&format!("Waits:\tthread {joined} to end (a join)\n")),
        "{stdout}"
    );
    // Nothing of the shell stays: the reproducer and its replay are as before.
    assert_eq!(std::fs::read(&rwd).unwrap(), before);
    assert_eq!(replayed_hash(&rwd), hash);
}

#[test]
fn a_shell_sees_the_runs_files_and_leaves_no_trace_of_its_own() {
    require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let exe = build_c_with(
        dir.path(),
        "writer",
        r#"
#include <stdio.h>
#include <stdlib.h>
int main(void) {
    FILE *f = fopen("made-by-the-run.txt", "w");
    if (!f) return 1;
    fputs("written inside the run\n", f);
    fclose(f);
    return 0;
}
"#,
        &[],
    );
    let rwd = dir.path().join("writer.rwd");
    common::save_rwd(&exe, dir.path(), &rwd);
    let before = std::fs::read(&rwd).unwrap();
    let hash = replayed_hash(&rwd);
    let probe = dir.path().join("made-by-the-shell.txt");
    let cmd = format!(
        "pwd; cat made-by-the-run.txt; echo no > {}; cat {}; echo \"HOME=$HOME\"",
        probe.display(),
        probe.display()
    );
    let out = shell(&rwd, "end", &cmd);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    // Its working directory and environment are the run's, and the file
    // the run wrote (in the machine, never on the host) is there.
    assert_eq!(
        lines[0],
        dir.path().canonicalize().unwrap().to_str().unwrap()
    );
    assert_eq!(lines[1], "written inside the run");
    assert_eq!(lines[2], "no");
    assert!(lines[3].starts_with("HOME=/"), "{stdout}");
    // What either of them wrote stayed in the machine.
    assert!(!dir.path().join("made-by-the-run.txt").exists());
    assert!(!probe.exists());
    assert_eq!(std::fs::read(&rwd).unwrap(), before);
    assert_eq!(replayed_hash(&rwd), hash);
}

#[test]
fn mid_run_the_runs_threads_stand_stopped_and_the_shells_status_is_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let rwd = deadlock(dir.path());
    // Early in the run: one thread, stopped where the pause found it (it
    // could run); the shell's own process runs.
    let out = shell(
        &rwd,
        "5",
        "grep State /proc/1/status; grep State /proc/self/status; ls /proc/1/task; exit 7",
    );
    assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "State:\tt (tracing stop)\nState:\tR (running)\n1\n"
    );
    // A visit is a run too: the same one every time.
    let look = "cat /proc/1/task/*/stat /proc/1/maps /proc/self/stat; ls -l /proc/1/fd";
    let first = shell(&rwd, "decision:1", look);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    for _ in 0..3 {
        assert_eq!(shell(&rwd, "decision:1", look).stdout, first.stdout);
    }
}

#[test]
fn bad_input_is_one_line_and_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let rwd = deadlock(dir.path());
    for (args, says) in [
        (vec!["--at", "100000"], "--at 100000: the run has"),
        (
            vec!["--shell", "/no/such/shell"],
            "--shell /no/such/shell: no such program",
        ),
    ] {
        let out = cli()
            .arg("shell")
            .arg(&rwd)
            .args(&args)
            .args(["--command", "true"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(says), "{err}");
    }
}
