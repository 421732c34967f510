//! Worker processes: a session's jobs are processes joined by an LLMP
//! broker, sharing one budget and one set of findings; a worker that is
//! killed is started again and the session goes on; one job and a seed
//! still give the same session every time.

mod common;

use common::names;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn cli() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rewind-fuzz"));
    c.arg("fuzz");
    c
}

fn stats(out: &Path) -> String {
    std::fs::read_to_string(out.join("fuzzer_stats")).unwrap_or_default()
}

fn stat(out: &Path, key: &str) -> Option<String> {
    stats(out).lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| v.trim().to_string())
    })
}

fn number(out: &Path, key: &str) -> u64 {
    stat(out, key)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in fuzzer_stats:\n{}", stats(out)))
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The processes whose parent is `pid`.
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // The parent is the second field after the command's ")".
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        if after.split(' ').nth(1).and_then(|v| v.parse().ok()) == Some(pid) {
            out.push(p);
        }
    }
    out
}

/// Shared-memory files LLMP made for `pids` and left behind.
fn leftover_shared_memory(pids: &[u32]) -> Vec<String> {
    names(Path::new("/dev/shm"))
        .into_iter()
        .filter(|n| pids.iter().any(|p| n.starts_with(&format!("libafl_{p}_"))))
        .collect()
}

fn wait_until(what: &str, ready: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(600);
    while !ready() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn two_worker_processes_share_one_budget_and_one_set_of_findings() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let child = cli()
        .args(["--target", "harness:philosophers", "--jobs", "2"])
        .args(["--execs", "600", "--seed", "4", "-q", "-o"])
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let session = child.id();
    let r = child.wait_with_output().unwrap();
    assert!(matches!(r.status.code(), Some(0 | 1)), "{}", stderr(&r));
    // The budget is one counter in memory both processes share.
    assert_eq!(number(&out, "execs_done"), 600, "{}", stats(&out));
    let per_job = per_job(&out);
    assert_eq!(per_job.len(), 2);
    assert!(
        per_job.iter().all(|n| *n > 0),
        "both workers ran: {per_job:?}"
    );
    assert_eq!(per_job.iter().sum::<u64>(), 600);
    assert_eq!(number(&out, "worker_restarts"), 0);
    // Both workers find the philosophers' failures; the session keeps and
    // announces each signature once.
    let findings: Vec<String> = names(&out.join("findings"))
        .into_iter()
        .filter(|n| n.ends_with(".rwd"))
        .collect();
    assert!(!findings.is_empty());
    assert_eq!(
        stderr(&r).matches("new finding after").count(),
        findings.len(),
        "{}",
        stderr(&r)
    );
    assert_eq!(
        number(&out, "corpus_count") as usize,
        names(&out.join("queue")).len()
    );
    assert!(leftover_shared_memory(&[session]).is_empty());
}

#[test]
fn a_worker_killed_outright_is_started_again_and_the_session_goes_on() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // Ended by Ctrl-C once the restart is seen, whatever the host's load.
    let child = cli()
        .args([
            "--target",
            "harness:prodcons",
            "--jobs",
            "2",
            "--time",
            "10m",
        ])
        .args(["--seed", "1", "-q", "-o"])
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let session = child.id();
    wait_until("the session never started", || {
        stat(&out, "execs_done").is_some_and(|n| n != "0")
    });
    // The session's child is the zygote; its children are the workers.
    let zygote = children(session);
    assert_eq!(zygote.len(), 1, "one zygote: {zygote:?}");
    let workers = children(zygote[0]);
    assert_eq!(workers.len(), 2, "two workers: {workers:?}");
    // SAFETY: kill(2) on a process of the session's.
    unsafe { libc::kill(workers[1] as libc::pid_t, libc::SIGKILL) };
    wait_until("no worker was started again", || {
        children(zygote[0]).iter().any(|p| !workers.contains(p))
    });
    let mut pids = vec![session];
    pids.extend(&workers);
    pids.extend(children(zygote[0]));
    // The session goes on past the kill, the new worker too.
    let at_kill = per_job(&out);
    wait_until("the session stopped at the kill", || {
        let now = per_job(&out);
        now[0] > at_kill[0] && now[1] > at_kill[1]
    });
    // SAFETY: kill(2) on the child we spawned; it has not been waited for.
    unsafe { libc::kill(session as libc::pid_t, libc::SIGINT) };
    let r = child.wait_with_output().unwrap();
    let err = stderr(&r);
    assert!(matches!(r.status.code(), Some(0 | 1)), "{err}");
    assert_eq!(
        err.matches("worker 1 killed by signal 9 (SIGKILL) and was started again")
            .count(),
        1,
        "said once: {err}"
    );
    assert_eq!(number(&out, "worker_restarts"), 1);
    assert_eq!(
        number(&out, "corpus_count") as usize,
        names(&out.join("queue")).len()
    );
    assert!(
        leftover_shared_memory(&pids).is_empty(),
        "{:?}",
        leftover_shared_memory(&pids)
    );
}

/// Each worker's executions, from the statistics.
fn per_job(out: &Path) -> Vec<u64> {
    stat(out, "execs_per_job")
        .unwrap_or_default()
        .split(',')
        .filter_map(|n| n.parse().ok())
        .collect()
}

#[test]
fn one_job_and_a_seed_give_the_same_session_every_time() {
    common::require_kvm();
    let session = |out: &Path| {
        let r = cli()
            .args(["--target", "harness:philosophers", "--jobs", "1"])
            .args(["--execs", "300", "--seed", "7", "-q", "-o"])
            .arg(out)
            .output()
            .unwrap();
        assert!(matches!(r.status.code(), Some(0 | 1)), "{}", stderr(&r));
        (
            names(&out.join("queue")),
            names(&out.join("findings")),
            stat(out, "corpus_count"),
            stat(out, "saved_crashes"),
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let a = session(&dir.path().join("a"));
    let b = session(&dir.path().join("b"));
    assert!(!a.0.is_empty());
    assert_eq!(a, b);
}
