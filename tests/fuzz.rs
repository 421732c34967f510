//! The fuzzer: findings, corpus sharing between machines, resuming.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::cli;

fn names(dir: &Path) -> BTreeSet<String> {
    file_names(dir)
        .into_iter()
        .filter(|n| n.ends_with(".json"))
        .collect()
}

/// The names of the files in `dir` (none when it is not there).
fn file_names(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
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

/// A quiet one-job session on `target` for `execs` executions into `out`,
/// with `extra` options.
fn fuzz_quietly(target: &str, execs: u32, out: &Path, extra: &[&str]) -> std::process::Output {
    let execs = execs.to_string();
    let base = [
        "--target",
        target,
        "--execs",
        &execs,
        "--jobs",
        "1",
        "-q",
        "-o",
        out.to_str().unwrap(),
    ];
    fuzz(&[&base[..], extra].concat())
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
            "--execs".into(),
            "60".into(),
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
        "--execs",
        "20",
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
    fuzz(&[&base[..], &["--execs", "60"]].concat());
    let first = names(&out.join("queue"));
    let first_count = stat(&out, "corpus_count");
    assert!(!first.is_empty());
    // Without --resume the session is not overwritten.
    let refused = cli().args(base).args(["--execs", "5"]).output().unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--resume"));
    fuzz(&[&base[..], &["--execs", "60", "--resume"]].concat());
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
    let accept: Arc<dyn Fn(&rewind_fuzz::engine::RunReport) -> bool + Send + Sync> =
        Arc::new(|r| r.outcome.kind() == "crashed");
    let a = schedules_to_bug(
        c.clone(),
        3,
        StrategyMix::default(),
        (3000, None),
        accept.clone(),
    )
    .unwrap();
    let b = schedules_to_bug(c, 3, StrategyMix::default(), (3000, None), accept).unwrap();
    assert!(a.is_some(), "the atomicity violation is found");
    assert_eq!(a, b);
}

fn finds_minimizes_and_replays_the_deadlock(harness: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let r = fuzz_quietly(harness, 600, &out, &[]);
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
fn fuzzing_the_philosophers_writes_a_minimized_deadlock_that_replays() {
    finds_minimizes_and_replays_the_deadlock("harness:philosophers");
}

#[test]
fn fuzzing_the_bank_transfer_writes_a_minimized_deadlock_that_replays() {
    finds_minimizes_and_replays_the_deadlock("harness:bank-transfer");
}

/// Writes `source` to `dir/file` and builds it with `compiler` and
/// `flags` into `dir/<file without its extension>`.
fn compile(dir: &Path, file: &str, source: &str, compiler: &str, flags: &[&str]) -> PathBuf {
    let src = dir.join(file);
    std::fs::write(&src, source).unwrap();
    let exe = dir.join(file.split('.').next().unwrap());
    let built = std::process::Command::new(compiler)
        .args(flags)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap();
    assert!(built.success(), "{compiler} {file}");
    exe
}

const TWO_DEADLOCKS: &str = r#"
#include <mutex>
#include <thread>
#include <utility>
struct Registry { std::mutex m; int v = 0; };
Registry a, b, c, d;
void swap_with(Registry &x, Registry &y) {
    std::lock_guard<std::mutex> g1(x.m);
    std::lock_guard<std::mutex> g2(y.m);
    std::swap(x.v, y.v);
}
void move_between(Registry &x, Registry &y) {
    std::lock_guard<std::mutex> g1(x.m);
    x.v++;
    std::lock_guard<std::mutex> g2(y.m);
    y.v--;
}
int main() {
    std::thread t1([] { swap_with(a, b); move_between(c, d); });
    std::thread t2([] { swap_with(b, a); move_between(d, c); });
    t1.join();
    t2.join();
}
"#;

#[test]
fn two_unrelated_cpp_deadlocks_are_two_findings_named_after_the_users_code() {
    // Every std::mutex goes through libstdc++'s inline wrapper: the
    // findings must name the program's functions, or one hides the other.
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(
        dir.path(),
        "two.cpp",
        TWO_DEADLOCKS,
        "g++",
        &["-g", "-O1", "-pthread"],
    );
    let out = dir.path().join("out");
    let r = fuzz_quietly(exe.to_str().unwrap(), 1500, &out, &[]);
    let stories: Vec<String> = std::fs::read_dir(out.join("findings"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with("deadlocked-") && n.ends_with(".txt")
        })
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    let signature = |needle: &str| {
        stories.iter().any(|s| {
            s.lines()
                .any(|l| l.contains("signature: deadlocked at program!") && l.contains(needle))
        })
    };
    assert!(
        stories.len() == 2 && signature("swap_with") && signature("move_between"),
        "{stories:#?}"
    );
    // The findings' one-line summaries name the locks and lines.
    let err = stderr(&r);
    let summaries: Vec<&str> = err
        .lines()
        .filter(|l| {
            l.trim_start()
                .starts_with("deadlocked, a cycle of 2 threads")
        })
        .collect();
    assert!(!summaries.is_empty(), "{err}");
    for s in summaries {
        assert!(s.trim().chars().count() <= 160, "{s}");
        assert!(s.contains("two.cpp:") && s.contains(".m"), "{s}");
    }
}

/// Stderr of a finished command, as text.
fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Starts a session on the prodcons harness in the background.
fn spawn_session(jobs: &str, time: &str, out: &Path, extra: &[&str]) -> std::process::Child {
    common::require_kvm();
    cli()
        .args([
            "--target",
            "harness:prodcons",
            "-j",
            jobs,
            "-q",
            "--time",
            time,
        ])
        .arg("-o")
        .arg(out)
        .args(extra)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until `ready` holds, failing with `what` if it never does (after
/// ten minutes: a bound for a hang, far past any load).
fn wait_until(what: &str, ready: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(600);
    while !ready() {
        assert!(std::time::Instant::now() < deadline, "{what}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn bad_targets_and_unwritable_output_are_one_line_and_exit_code_2() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let not_elf = dir.path().join("test.txt");
    std::fs::write(&not_elf, "echo hi\n").unwrap();
    let out = dir.path().join("out");
    let cases: [(&[&str], &str); 3] = [
        (&["--target", not_elf.to_str().unwrap()], "not an ELF"),
        (&["--target", "/no/such/test"], "/no/such/test"),
        // /proc takes no new directories, even from root.
        (
            &["--target", "harness:hello", "-o", "/proc/rewind-out"],
            "--out",
        ),
    ];
    for (args, says) in cases {
        let r = cli()
            .args(args)
            .args(["--time", "2s", "-q"])
            .args(if args.contains(&"-o") {
                vec![]
            } else {
                vec!["-o", out.to_str().unwrap()]
            })
            .output()
            .unwrap();
        let err = stderr(&r);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    assert!(!out.join("queue").exists(), "nothing was started");
}

#[test]
fn a_corrupted_corpus_file_is_skipped_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();
    let base = ["--target", "harness:prodcons", "-j", "1", "-q", "-o", o];
    fuzz(&[&base[..], &["--execs", "20"]].concat());
    let corrupt = out.join("queue").join("zz-corrupt.json");
    std::fs::write(&corrupt, b"{\"decisions\": [tru").unwrap();
    let before = names(&out.join("queue"));
    let r = fuzz(&[&base[..], &["--execs", "20", "--resume"]].concat());
    let err = stderr(&r);
    assert!(
        err.contains("skipping") && err.contains("zz-corrupt.json"),
        "{err}"
    );
    assert!(
        before.is_subset(&names(&out.join("queue"))),
        "nothing was lost, not even the corrupted file"
    );
}

#[test]
fn a_sync_dir_that_disappears_is_a_warning_and_nothing_written_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let sync = dir.path().join("sync");
    std::fs::create_dir(&sync).unwrap();
    let out = dir.path().join("out");
    let child = spawn_session(
        "1",
        "8s",
        &out,
        &["--sync-dir", sync.to_str().unwrap(), "--sync-id", "me"],
    );
    // Move it away once the session has published to it.
    wait_until("nothing was published", || {
        !names(&sync.join("me").join("queue")).is_empty()
    });
    // Gone at once, as when a share is unmounted (a recursive delete would
    // race with the session's writes).
    let gone = dir.path().join("gone");
    std::fs::rename(&sync, &gone).unwrap();
    let r = child.wait_with_output().unwrap();
    let err = stderr(&r);
    assert_eq!(r.status.code(), Some(0), "{err}");
    assert!(err.contains("sync directory"), "{err}");
    assert!(
        !sync.exists(),
        "a vanished sync directory is not made again"
    );
    assert!(
        !names(&out.join("queue")).is_empty(),
        "the corpus is intact"
    );
    assert!(stat(&out, "execs_done") > 0);
}

#[test]
fn ctrl_c_stops_cleanly_and_flushes_everything() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let child = spawn_session("2", "10m", &out, &[]);
    // Interrupt once the session is under way (the harness may be built first).
    wait_until("the session never started", || {
        out.join("fuzzer_stats").exists() && stat(&out, "execs_done") > 0
    });
    // SAFETY: kill(2) on the child we spawned; it has not been waited for.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    // A ten-minute session that Ctrl-C did not end would outlast the
    // test's time limit.
    let r = child.wait_with_output().unwrap();
    assert!(matches!(r.status.code(), Some(0 | 1)), "{}", stderr(&r));
    assert!(stderr(&r).contains("(interrupted)"), "{}", stderr(&r));
    let execs = stat(&out, "execs_done");
    assert!(execs > 0);
    assert_eq!(
        stat(&out, "corpus_count") as usize,
        names(&out.join("queue")).len(),
        "the stats were flushed with the corpus"
    );
    assert!(
        std::fs::read_to_string(out.join("plot_data"))
            .unwrap()
            .lines()
            .count()
            >= 2
    );
    let svg = std::fs::read_to_string(out.join("coverage.svg")).unwrap();
    // One panel per feature kind, each with its own scale, under a title
    // naming the target.
    assert!(
        svg.contains("<svg") && svg.contains(": coverage features over time"),
        "{svg}"
    );
    for kind in ["lock_order", "interleavings", "handoffs", "reads_from"] {
        assert!(svg.contains(kind), "no {kind} panel: {svg}");
    }
}

#[test]
fn a_full_out_dir_keeps_the_session_going_and_no_partial_reproducer_is_left() {
    use std::os::unix::process::CommandExt;
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // Writes past 256 KiB fail as on a full disk (EFBIG instead of ENOSPC):
    // a reproducer (about 1 MB) cannot be written, corpus entries can.
    let mut cmd = cli();
    cmd.args(["--target", "harness:philosophers", "-j", "1", "-q"])
        .args(["--execs", "300", "-o", out.to_str().unwrap()]);
    // SAFETY: between fork and exec only async-signal-safe calls are made.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 256 << 10,
                rlim_max: 256 << 10,
            };
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let r = cmd.output().unwrap();
    let err = stderr(&r);
    assert_eq!(
        r.status.code(),
        Some(1),
        "a bug found fails the gate: {err}"
    );
    assert!(err.contains("cannot write finding"), "{err}");
    assert!(err.contains("not saved"), "{err}");
    // No partial file is left.
    let findings = out.join("findings");
    assert!(findings.is_dir(), "{err}");
    let left = file_names(&findings);
    assert!(left.is_empty(), "no partial files: {left:?}");
    assert!(!names(&out.join("queue")).is_empty(), "the corpus is kept");
    assert!(stat(&out, "execs_done") > 0);
}

/// A session on a program whose every run goes on for a million steps (the
/// default step limit) before it ends `hung`: far longer than the session.
fn spawn_endless(out: &Path, extra: &[&str]) -> std::process::Child {
    common::require_kvm();
    let exe = common::harness("getpid-loop");
    cli()
        .arg("--target")
        .arg(&exe)
        .args(["-q", "-o"])
        .arg(out)
        .args(extra)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn the_time_budget_ends_a_session_in_the_middle_of_a_long_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let r = spawn_endless(&out, &["--time", "3s"])
        .wait_with_output()
        .unwrap();
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    // Said only when the run was cut short: the session did not wait for
    // its end.
    assert!(
        stderr(&r).contains("the session ended before the target's first run did"),
        "{}",
        stderr(&r)
    );
    assert!(out.join("fuzzer_stats").exists());
}

#[test]
fn ctrl_c_ends_a_session_in_the_middle_of_a_long_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let child = spawn_endless(&out, &["--max-steps", "1000000000000"]);
    // The output directory is made once Ctrl-C is handled, before the
    // first run.
    wait_until("the session never started", || out.join("queue").is_dir());
    // SAFETY: kill(2) on the child we spawned; it has not been waited for.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    // The run never ends by itself: only Ctrl-C ends the session.
    let r = child.wait_with_output().unwrap();
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    assert!(
        stderr(&r).contains("the session ended before the target's first run did"),
        "{}",
        stderr(&r)
    );
    assert!(out.join("fuzzer_stats").exists());
}

#[test]
fn a_live_session_directory_is_refused_to_a_second_session() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut first = spawn_session("1", "10m", &out, &[]);
    wait_until("the session never started", || {
        out.join("fuzzer_stats").exists()
    });
    for extra in [&[][..], &["--resume"][..]] {
        let second = cli()
            .args(["--target", "harness:prodcons", "-q", "--time", "2s", "-o"])
            .arg(&out)
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(second.status.code(), Some(2), "{}", stderr(&second));
        assert!(
            stderr(&second).contains("in use by another session"),
            "{}",
            stderr(&second)
        );
    }
    // The same sync name twice, too.
    let sync = dir.path().join("sync");
    let mut a = spawn_session(
        "1",
        "10m",
        &dir.path().join("a"),
        &["--sync-dir", sync.to_str().unwrap(), "--sync-id", "x"],
    );
    wait_until("the synced session never started", || {
        sync.join("x").join(".lock").exists()
    });
    let b = cli()
        .args(["--target", "harness:prodcons", "-q", "--time", "2s", "-o"])
        .arg(dir.path().join("b"))
        .args(["--sync-dir", sync.to_str().unwrap(), "--sync-id", "x"])
        .output()
        .unwrap();
    assert_eq!(b.status.code(), Some(2), "{}", stderr(&b));
    first.kill().unwrap();
    a.kill().unwrap();
    let _ = (first.wait(), a.wait());
}

#[test]
fn resume_refuses_another_targets_directory_and_keeps_counting() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();
    let base = ["--target", "harness:abba", "--jobs", "1", "-q", "-o", o];
    let first = fuzz(&[&base[..], &["--execs", "40"]].concat());
    let execs = stat(&out, "execs_done");
    let found = stat(&out, "findings");
    assert!(found >= 1, "{}", stderr(&first));
    assert!(stderr(&first).contains("new finding"), "{}", stderr(&first));

    let other = cli()
        .args([
            "--target",
            "harness:prodcons",
            "-q",
            "--time",
            "2s",
            "--resume",
            "-o",
            o,
        ])
        .output()
        .unwrap();
    assert_eq!(other.status.code(), Some(2), "{}", stderr(&other));
    assert!(
        stderr(&other).contains("another target"),
        "{}",
        stderr(&other)
    );
    assert_eq!(
        stderr(&other).trim_end().lines().count(),
        1,
        "{}",
        stderr(&other)
    );

    let before: Vec<PathBuf> = std::fs::read_dir(out.join("findings"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "rwd"))
        .collect();
    assert!(!before.is_empty());
    let second = fuzz(&[&base[..], &["--execs", "40", "--resume"]].concat());
    assert!(
        stat(&out, "execs_done") >= execs + 40,
        "{} then {}",
        execs,
        stat(&out, "execs_done")
    );
    assert!(stat(&out, "findings") >= found, "the count goes on");
    for f in before {
        assert!(
            !stderr(&second).contains(&format!("Saved to: {}", f.display())),
            "{} announced again: {}",
            f.display(),
            stderr(&second)
        );
    }
}

#[test]
fn statistics_that_cannot_be_written_are_warned_about_once() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let child = spawn_session("1", "10m", &out, &[]);
    wait_until("the session never started", || {
        out.join("fuzzer_stats").exists()
    });
    // What a full disk does to the next write of fuzzer_stats, here by
    // putting a directory in its way; the session writes it again, at the
    // latest when Ctrl-C ends it.
    std::fs::remove_file(out.join("fuzzer_stats")).unwrap();
    std::fs::create_dir(out.join("fuzzer_stats")).unwrap();
    // SAFETY: kill(2) on the child we spawned; it has not been waited for.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let r = child.wait_with_output().unwrap();
    let err = stderr(&r);
    assert!(matches!(r.status.code(), Some(0 | 1)), "{err}");
    assert_eq!(
        err.matches("cannot update")
            .filter(|_| err.contains("fuzzer_stats"))
            .count(),
        1,
        "{err}"
    );
}

/// AFL++'s `fuzzer_stats` fields that its tools (afl-whatsup, dashboards)
/// read.
const AFL_STATS: [&str; 16] = [
    "start_time",
    "last_update",
    "run_time",
    "fuzzer_pid",
    "execs_done",
    "execs_per_sec",
    "corpus_count",
    "saved_crashes",
    "saved_hangs",
    "last_find",
    "stability",
    "bitmap_cvg",
    "edges_found",
    "peak_rss_mb",
    "command_line",
    "afl_banner",
];

/// AFL++'s `plot_data` columns, in afl-plot's order.
const AFL_PLOT: &str = "# relative_time, cycles_done, cur_item, corpus_count, pending_total, pending_favs, map_size, saved_crashes, saved_hangs, max_depth, execs_per_sec, total_execs, edges_found";

#[test]
fn the_live_screen_keeps_every_findings_commands_and_the_stats_speak_afl() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // A pseudo-terminal, as a person at a terminal (or in tmux) has.
    let cmd = format!(
        "{} fuzz --target harness:philosophers --execs 300 --jobs 1 -o {}",
        env!("CARGO_BIN_EXE_rewind-fuzz"),
        out.display()
    );
    let session = std::process::Command::new(common::require_tool(
        "script",
        "apt-get install -y util-linux",
    ))
    .args(["-qfec", &cmd, "/dev/null"])
    .env("TERM", "xterm")
    .output()
    .unwrap();
    // A terminal tall enough that nothing scrolls off: what a clear of the
    // screen would wipe is gone from it.
    let mut term = vt100::Parser::new(3000, 250, 0);
    term.process(&session.stdout);
    let shown = term.screen().contents();
    let findings: Vec<PathBuf> = std::fs::read_dir(out.join("findings"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "rwd"))
        .collect();
    assert!(!findings.is_empty(), "{shown}");
    for f in &findings {
        for line in [
            "Reproduce with: rewind-fuzz replay",
            "Explain with:",
            "Debug with:",
        ] {
            let want = format!("{line} ");
            assert!(
                shown
                    .lines()
                    .any(|l| l.contains(&want) && l.contains(&*f.to_string_lossy())),
                "{line} {} is no longer on the terminal:\n{shown}",
                f.display()
            );
        }
    }
    assert!(
        shown.contains(" rewind-fuzz  harness:philosophers"),
        "{shown}"
    );
    // The latest finding, in the program's words, and minimization's share.
    assert!(
        shown
            .lines()
            .any(|l| l.contains("   latest    ") && l.contains("philosophers.c:")),
        "{shown}"
    );
    assert!(shown.contains("   minimize  "), "{shown}");
    // fuzzer_stats and plot_data as AFL++'s tools read them.
    let stats = std::fs::read_to_string(out.join("fuzzer_stats")).unwrap();
    for key in AFL_STATS {
        assert!(
            stats.lines().any(|l| l
                .split_once(" : ")
                .is_some_and(|(k, v)| k.trim() == key && !v.is_empty())),
            "no {key} in fuzzer_stats:\n{stats}"
        );
    }
    assert_eq!(
        stat(&out, "saved_crashes"),
        findings.len() as u64,
        "{stats}"
    );
    assert!(
        stats.contains("stability                   : 100.00%"),
        "{stats}"
    );
    assert!(stat(&out, "stability_checks") >= 1, "{stats}");
    let plot = std::fs::read_to_string(out.join("plot_data")).unwrap();
    let mut lines = plot.lines();
    assert!(lines.next().unwrap().starts_with(AFL_PLOT), "{plot}");
    for row in lines {
        let cols: Vec<&str> = row.split(", ").collect();
        assert!(cols.len() >= 13 && cols[6].ends_with('%'), "{row}");
        assert!(cols[11].parse::<u64>().is_ok(), "total_execs in {row}");
    }
}

const FIVE_TESTS: &str = r#"
use std::sync::{Arc, Mutex};
use std::thread;

pub fn transfer(from: &Mutex<i64>, to: &Mutex<i64>, amount: i64) {
    let mut source = from.lock().unwrap();
    let mut target = to.lock().unwrap();
    *source -= amount;
    *target += amount;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds() { assert_eq!(2 + 2, 4); }

    #[test]
    fn a_thread_returns_its_result() {
        assert_eq!(thread::spawn(|| 7).join().unwrap(), 7);
    }

    #[test]
    fn a_mutex_counts() {
        let n = Arc::new(Mutex::new(0));
        let hs: Vec<_> = (0..2).map(|_| { let n = n.clone(); thread::spawn(move || *n.lock().unwrap() += 1) }).collect();
        for h in hs { h.join().unwrap(); }
        assert_eq!(*n.lock().unwrap(), 2);
    }

    #[test]
    fn transfers_both_ways() {
        let (a, b) = (Arc::new(Mutex::new(100)), Arc::new(Mutex::new(100)));
        let (a2, b2) = (a.clone(), b.clone());
        let t = thread::spawn(move || transfer(&a2, &b2, 10));
        transfer(&b, &a, 20);
        t.join().unwrap();
        assert_eq!(*a.lock().unwrap() + *b.lock().unwrap(), 200);
    }

    #[test]
    fn a_vector_sorts() { let mut v = vec![3, 1, 2]; v.sort(); assert_eq!(v, [1, 2, 3]); }
}
"#;

/// The test binary of [`FIVE_TESTS`], built by rustc in `dir`.
fn five_tests(dir: &Path) -> PathBuf {
    compile(
        dir,
        "five.rs",
        FIVE_TESTS,
        "rustc",
        &["--test", "--edition", "2021", "-g", "-O"],
    )
}

#[test]
fn per_test_fuzzing_finds_the_one_buggy_test_and_explores_every_test() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let exe = five_tests(dir.path());
    let out = dir.path().join("out");
    let r = fuzz_quietly(exe.to_str().unwrap(), 150, &out, &["--per-test"]);
    let err = stderr(&r);
    assert_eq!(r.status.code(), Some(1), "{err}");
    let tests = [
        "tests::adds",
        "tests::a_thread_returns_its_result",
        "tests::a_mutex_counts",
        "tests::transfers_both_ways",
        "tests::a_vector_sorts",
    ];
    for t in tests {
        let session = out.join(t.replace("::", "__"));
        // Each test its share, as the table and the stats both say.
        assert_eq!(stat(&session, "execs_done"), 30, "{t}:\n{err}");
        let row = err
            .lines()
            .find(|l| l.starts_with(&format!("{t} ")))
            .unwrap_or_else(|| panic!("no row for {t}:\n{err}"));
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[1], "30", "{row}");
        assert_eq!(
            cells[3].parse::<u64>().unwrap(),
            stat(&session, "findings"),
            "{row}"
        );
        assert_eq!(
            row.ends_with("FAILED"),
            t == "tests::transfers_both_ways",
            "{row}"
        );
    }
    // The inversion, as a deadlock and as a potential deadlock.
    let found = file_names(&out.join("tests__transfers_both_ways/findings"));
    for kind in ["deadlocked-", "potential-deadlock-"] {
        assert!(
            found
                .iter()
                .any(|n| n.starts_with(kind) && n.ends_with(".rwd")),
            "{kind}: {found:?}\n{err}"
        );
    }
    assert!(
        err.contains("test tests::transfers_both_ways: deadlocked")
            && err.contains("test tests::transfers_both_ways: potential deadlock"),
        "the findings name their test:\n{err}"
    );
}

#[test]
fn a_per_test_finding_on_the_last_execution_of_its_share_is_recorded() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let exe = five_tests(dir.path());
    let out = dir.path().join("out");
    // One execution per test: the inversion is found on the last (the
    // only) execution of its test's share, and the share ends there.
    let r = fuzz_quietly(exe.to_str().unwrap(), 5, &out, &["--per-test"]);
    let err = stderr(&r);
    assert_eq!(r.status.code(), Some(1), "{err}");
    let session = out.join("tests__transfers_both_ways");
    assert_eq!(stat(&session, "execs_done"), 1, "{err}");
    let found = file_names(&session.join("findings"));
    assert!(
        found
            .iter()
            .any(|n| n.starts_with("potential-deadlock-") && n.ends_with(".rwd")),
        "{found:?}\n{err}"
    );
    assert!(
        !found.iter().any(|n| n.ends_with(".schedule.json")),
        "{found:?}"
    );
    assert!(!err.contains("Record with"), "{err}");
    // Its reproducer replays, the test alone, as recorded.
    let rwd = found.iter().find(|n| n.ends_with(".rwd")).unwrap();
    let replay = cli()
        .arg("replay")
        .arg(session.join("findings").join(rwd))
        .output()
        .unwrap();
    assert_eq!(replay.status.code(), Some(0), "{}", stderr(&replay));
}

#[test]
fn the_cargo_command_builds_a_projects_tests_and_fuzzes_the_chosen_one() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("accounts");
    std::fs::create_dir_all(project.join("src")).unwrap();
    std::fs::write(
        project.join("Cargo.toml"),
        "[package]\nname = \"accounts\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::write(project.join("src/lib.rs"), FIVE_TESTS).unwrap();
    let out = dir.path().join("out");
    let r = cli()
        .current_dir(&project)
        .env("CARGO_TARGET_DIR", dir.path().join("target"))
        .args(["cargo", "transfers", "--execs", "40", "-j", "1", "-q", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    let err = stderr(&r);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(err.contains("1 tests in 1 binaries"), "{err}");
    assert!(
        err.lines()
            .any(|l| l.starts_with("tests::transfers_both_ways ") && l.ends_with("FAILED")),
        "{err}"
    );
    // The session is named after the crate's test target, not cargo's
    // hashed file name.
    let session = out.join("accounts-lib").join("tests__transfers_both_ways");
    assert_eq!(stat(&session, "execs_done"), 40, "{err}");

    // Again: the sessions are there, so it asks for --resume in one line,
    // and with it goes on, with fuzz's other options, on a build of
    // another profile (another file, other contents).
    let again = |extra: &[&str]| {
        cli()
            .current_dir(&project)
            .env("CARGO_TARGET_DIR", dir.path().join("target"))
            .args(["cargo", "transfers", "--execs", "40", "-j", "1", "-q", "-o"])
            .arg(&out)
            .args(extra)
            .output()
            .unwrap()
    };
    let refused = again(&[]);
    let said = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{said}");
    assert!(
        said.trim_end()
            .lines()
            .last()
            .unwrap()
            .contains("continue them with --resume"),
        "{said}"
    );
    let resumed = again(&[
        "--resume",
        "--release",
        "--seed",
        "3",
        "--sync-points",
        "atomics",
        "--ok-exit-codes",
        "0",
        "--strategy-mix",
        "0.5:pct,pos",
    ]);
    let said = stderr(&resumed);
    assert!(matches!(resumed.status.code(), Some(0 | 1)), "{said}");
    assert!(!said.contains("another target"), "{said}");
    assert_eq!(stat(&session, "execs_done"), 80, "{said}");
    let line = std::fs::read_to_string(session.join("fuzzer_stats")).unwrap();
    assert!(
        line.contains("--seed 3") && line.contains("--strategy-mix 0.5:pct,pos"),
        "{line}"
    );
}

#[test]
fn findings_are_summed_up_and_signed_in_the_programs_own_words() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/jobq.c");
    let exe = compile(
        dir.path(),
        "jobq.c",
        &std::fs::read_to_string(source).unwrap(),
        "gcc",
        &["-g", "-O1", "-pthread"],
    );
    let out = dir.path().join("out");
    let r = fuzz_quietly(exe.to_str().unwrap(), 300, &out, &[]);
    let err = stderr(&r);
    assert_eq!(r.status.code(), Some(1), "{err}");
    let summary = |kind: &str| {
        err.lines()
            .skip_while(|l| !l.contains("new finding after") || !l.ends_with(kind))
            .nth(1)
            .unwrap_or_else(|| panic!("no {kind} finding:\n{err}"))
            .trim()
            .to_string()
    };
    // A crash inside the C library, told by the program's frame.
    let crash = summary("crashed");
    assert!(
        crash.contains("at logger (jobq.c:") && crash.contains("inside libc.so.6"),
        "{crash}"
    );
    assert!(!crash.contains("+0x"), "{crash}");
    // A condition-variable wait, told by what the program last did.
    let deadlock = summary("deadlocked");
    assert!(
        deadlock.contains("main (jobq.c:") && deadlock.contains("waits in cond-wait job_done"),
        "{deadlock}"
    );
    assert!(!deadlock.contains("futex 0x"), "{deadlock}");
    // Signatures name the program, not its file: a copy under another
    // name fails the same way.
    let copy = dir.path().join("jobq-renamed");
    std::fs::copy(&exe, &copy).unwrap();
    for f in std::fs::read_dir(out.join("findings")).unwrap().flatten() {
        let path = f.path();
        if path.extension().is_none_or(|e| e != "rwd") {
            continue;
        }
        let shown = cli().arg("show").arg(&path).output().unwrap();
        let story = String::from_utf8_lossy(&shown.stdout).into_owned();
        let signature = story.lines().find(|l| l.contains("signature:")).unwrap();
        assert!(signature.contains("program!"), "{signature}");
        assert!(!signature.contains("jobq!"), "{signature}");
        let retest = cli()
            .arg("replay")
            .arg(&path)
            .arg("--target")
            .arg(&copy)
            .output()
            .unwrap();
        let said = stderr(&retest);
        assert!(said.contains("it still fails, the same way"), "{said}");
        // `run` tells a crash inside the C library by the program's frame.
        if signature.contains("crashed") {
            let again = cli()
                .args(["run", "--target"])
                .arg(&exe)
                .arg("--schedule")
                .arg(&path)
                .output()
                .unwrap();
            let said = stderr(&again);
            assert!(said.contains("called from logger (jobq.c:"), "{said}");
        }
    }
}

#[test]
fn the_status_line_the_summary_and_the_stats_give_the_same_counts() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let r = fuzz(&[
        "--target",
        "harness:philosophers",
        "--execs",
        "100",
        "--jobs",
        "1",
        "-o",
        out.to_str().unwrap(),
    ]);
    let err = stderr(&r);
    // The closing status line (not on a terminal: lines).
    let line = err
        .lines()
        .rfind(|l| l.starts_with('[') && l.contains("] execs "))
        .unwrap_or_else(|| panic!("no status line:\n{err}"));
    let after = |text: &str, key: &str| -> u64 {
        text.split(key)
            .nth(1)
            .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {key:?} in {text}"))
    };
    let summary = err
        .lines()
        .find(|l| l.starts_with("rewind-fuzz: ") && l.contains(" executions in "))
        .unwrap_or_else(|| panic!("no summary:\n{err}"));
    let summary_execs: u64 = summary
        .trim_start_matches("rewind-fuzz: ")
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(after(line, "execs "), 100, "{line}");
    assert_eq!(summary_execs, 100, "{summary}");
    assert_eq!(stat(&out, "execs_done"), 100);
    let corpus = stat(&out, "corpus_count");
    assert_eq!(after(line, "corpus "), corpus, "{line}");
    assert_eq!(after(summary, "corpus "), corpus, "{summary}");
    assert_eq!(names(&out.join("queue")).len() as u64, corpus);
    let findings = stat(&out, "findings");
    assert!(findings >= 1, "{err}");
    assert_eq!(after(line, "findings "), findings, "{line}");
    assert_eq!(after(summary, "handoffs, "), findings, "{summary}");
    // No rate before a second has passed.
    assert!(!err.contains("1000.0/s"), "{err}");
}

#[test]
fn minimization_takes_a_bounded_share_and_a_resumed_session_finishes_it() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();
    let base = [
        "--target",
        "harness:philosophers",
        "--jobs",
        "1",
        "-q",
        "-o",
        o,
    ];
    // The deadlock comes at the fifth execution; three more leave its
    // minimization almost no share.
    let first = fuzz(&[&base[..], &["--execs", "8"]].concat());
    let err = stderr(&first);
    assert_eq!(
        stat(&out, "execs_done"),
        8,
        "the search ran its budget: {err}"
    );
    // A minimization run only when those before it are fewer than a third
    // of the search's.
    let share = |search: u64| search.div_ceil(3);
    assert!(stat(&out, "minimize_execs") <= share(8), "{err}");
    assert_eq!(stat(&out, "minimize_pending"), 1, "{err}");
    let pending = std::fs::read_to_string(out.join("minimize_pending")).unwrap();
    assert!(pending.starts_with("deadlocked-"), "{pending}");
    let stats = std::fs::read_to_string(out.join("fuzzer_stats")).unwrap();
    assert!(stats.contains("minimize_time"), "{stats}");
    // A reproducer is there already, minimized or not.
    let rwd = out.join("findings").join(format!("{}.rwd", pending.trim()));
    assert!(rwd.exists(), "{err}");

    let second = fuzz(&[&base[..], &["--execs", "300", "--resume"]].concat());
    let err = stderr(&second);
    assert_eq!(stat(&out, "minimize_pending"), 0, "{err}");
    assert!(!out.join("minimize_pending").exists());
    assert!(stat(&out, "minimize_execs") <= share(300), "{err}");
    assert!(err.contains(pending.trim()), "{err}");
    // At a fixed point: minimizing again removes nothing.
    let again = cli()
        .arg("minimize")
        .arg(&rwd)
        .args([
            "-o",
            dir.path().join("again.rwd").to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    let v: serde_json::Value =
        serde_json::from_slice(&again.stdout).unwrap_or_else(|_| panic!("{}", stderr(&again)));
    assert_eq!(v["decisions_after"], v["decisions_before"], "{v}");
    assert_eq!(v["window_after"], v["window_before"], "{v}");
}

/// Two threads take two mutexes in opposite orders, one after the other
/// (never at once: no schedule deadlocks), and the program exits 3.
const INVERSION_EXITING_3: &str = r#"
#include <pthread.h>
static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER, b = PTHREAD_MUTEX_INITIALIZER;
static void *ab(void *x) { pthread_mutex_lock(&a); pthread_mutex_lock(&b);
    pthread_mutex_unlock(&b); pthread_mutex_unlock(&a); return x; }
static void *ba(void *x) { pthread_mutex_lock(&b); pthread_mutex_lock(&a);
    pthread_mutex_unlock(&a); pthread_mutex_unlock(&b); return x; }
int main(void) {
    pthread_t t;
    pthread_create(&t, 0, ab, 0); pthread_join(t, 0);
    pthread_create(&t, 0, ba, 0); pthread_join(t, 0);
    return 3;
}
"#;

#[test]
fn exit_codes_that_are_success_are_judged_once_for_findings_signatures_and_replays() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let exe = common::build_c_with(dir.path(), "inversion3", INVERSION_EXITING_3, &["-pthread"]);
    let exe = exe.to_str().unwrap();
    // With 3 a success, the run's failure is its lock-order cycle, and its
    // signature says so (it said `exited(3)` when signatures judged again).
    let out = dir.path().join("ok3");
    let r = fuzz_quietly(exe, 5, &out, &["--ok-exit-codes", "0,3"]);
    let err = stderr(&r);
    let found = file_names(&out.join("findings"));
    let rwds: Vec<&String> = found.iter().filter(|n| n.ends_with(".rwd")).collect();
    assert_eq!(rwds.len(), 1, "{found:?}\n{err}");
    assert!(
        rwds[0].starts_with("potential-deadlock-"),
        "{found:?}\n{err}"
    );
    let rwd = out.join("findings").join(rwds[0]);
    // What `run --schedule` of the reproducer says, with `extra` options.
    let replay = |extra: &[&str]| {
        let o = cli()
            .arg("run")
            .args(extra)
            .args(["--target", exe, "--schedule"])
            .arg(&rwd)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    // The reproducer judges its replay as the session did.
    let said = replay(&[]);
    assert!(
        said.contains("happened again: potential-deadlock"),
        "{said}"
    );
    let shown = cli().arg("show").arg(&rwd).output().unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("potential deadlock"), "{shown}");
    // Given on the replay's command line, other codes replace the
    // reproducer's, and the same run is another failure.
    let said = replay(&["--ok-exit-codes", "0"]);
    assert!(
        said.contains("--ok-exit-codes"),
        "named as replaced: {said}"
    );
    assert!(said.contains("exited(3)"), "{said}");
    // Without the option, exit code 3 is the failure.
    let out = dir.path().join("strict");
    let r = fuzz_quietly(exe, 5, &out, &[]);
    let found = file_names(&out.join("findings"));
    assert!(
        found
            .iter()
            .any(|n| n.starts_with("exited-3-") && n.ends_with(".rwd")),
        "{found:?}\n{}",
        stderr(&r)
    );
    // `check` judges the same way.
    let check = |extra: &[&str]| {
        let o = cli()
            .args(["check", "--schedules", "3", "--json", "--target", exe])
            .args(extra)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
        v["outcomes"].clone()
    };
    assert_eq!(check(&["--ok-exit-codes", "0,3"])["potential-deadlock"], 3);
    assert_eq!(check(&[])["exited(non-zero)"], 3);
}
