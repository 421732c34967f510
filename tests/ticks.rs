//! Time and preemption inside computation: a loop with no sync site ticks
//! every `TICK_PERIOD` passes (a step), so virtual time moves on, timers
//! fire and a computing thread can be preempted, the same way run after
//! run.

mod common;

use std::time::Duration;

use common::{build_c_with, cli, config, require_kvm, require_tool, run_config};
use rewind_fuzz::code::SyncPoints;
use rewind_fuzz::observe::outcome::Outcome;

/// Computes (storing as it goes: no spin) until `alarm(1)` stops it.
const COMPUTES_UNTIL_ALARM: &str = r#"
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
static volatile sig_atomic_t stop;
static void on_alarm(int s) { (void)s; stop = 1; }
__attribute__((noinline)) static unsigned long work(unsigned long x) {
    for (int i = 0; i < 1000; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
    return x;
}
int main(void) {
    static volatile unsigned long seen[64];
    signal(SIGALRM, on_alarm);
    alarm(1);
    unsigned long rounds = 0, x = 1;
    while (!stop) { x = work(x); seen[rounds % 64] = x; rounds++; }
    printf("rounds: %s, %lu\n", rounds > 100 ? "many" : "few", x & 1);
    return 0;
}
"#;

/// A loop stopped by `alarm(1)` ends as natively (the alarm fires after a
/// virtual second of ticks, not at the wall-clock watchdog), with one trace
/// hash run after run.
#[test]
fn a_loop_stopped_by_alarm_ends_with_one_trace_hash() {
    require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let exe = build_c_with(dir.path(), "alarm_loop", COMPUTES_UNTIL_ALARM, &["-O2"]);
    let mut c = config(&exe, &[]);
    c.kernel.sync_points = SyncPoints::Atomics;
    c.timeout = Duration::from_secs(3600);
    let first = run_config(&c);
    assert_eq!(
        first.outcome,
        Outcome::Exited { code: 0 },
        "{}",
        first.outcome.summary()
    );
    assert_eq!(String::from_utf8_lossy(&first.stdout), "rounds: many, 1\n");
    // A virtual second is about a thousand ticks, not a million steps.
    assert!(first.steps < 5_000, "{} steps", first.steps);
    for _ in 0..3 {
        let again = run_config(&c);
        assert_eq!(
            (again.trace_hash.as_str(), again.steps),
            (first.trace_hash.as_str(), first.steps)
        );
    }
}

/// Two threads compute in loops with no sync site: the default strategy
/// hands the processor on when a thread's slice of ticks is used up, so
/// their ticks interleave; at `calls`, where nothing ticks, they cannot.
const TWO_COMPUTE: &str = r#"
#include <pthread.h>
#include <stdio.h>
static volatile unsigned long sink[2];
static void *compute(void *arg) {
    long me = (long)arg;
    unsigned long x = (unsigned long)me + 1;
    for (long i = 0; i < 30000000; i++) { x = x * 6364136223846793005UL + 1; sink[me] = x; }
    return 0;
}
int main(void) {
    pthread_t t;
    pthread_create(&t, 0, compute, (void *)1);
    compute((void *)0);
    pthread_join(t, 0);
    printf("%lu\n", (sink[0] ^ sink[1]) & 1);
    return 0;
}
"#;

fn thread_switches_in_ticks(trace: &str) -> usize {
    let ticks: Vec<&str> = trace
        .lines()
        .filter(|l| l.contains(" tick "))
        .filter_map(|l| l.split("thread ").nth(1)?.split_whitespace().next())
        .collect();
    ticks.windows(2).filter(|w| w[0] != w[1]).count()
}

#[test]
fn computing_threads_are_preempted_at_ticks() {
    require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let exe = build_c_with(dir.path(), "two_compute", TWO_COMPUTE, &["-O2", "-pthread"]);
    let trace = |level: &str| {
        let out = cli()
            .args(["run", "--trace", "--sync-points", level, "--target"])
            .arg(&exe)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let atomics = trace("atomics");
    let switches = thread_switches_in_ticks(&atomics);
    assert!(
        switches >= 2,
        "{switches} switches between computing threads:\n{}",
        atomics
            .lines()
            .filter(|l| l.contains(" tick "))
            .take(40)
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(trace("atomics"), atomics, "the same run twice");
    assert_eq!(thread_switches_in_ticks(&trace("calls")), 0);
}

/// `openssl speed` computes until its alarm: it ends as natively, the same
/// way twice (one size; every size is the same loop six times).
#[test]
fn openssl_speed_ends_as_natively() {
    require_kvm();
    let openssl = require_tool("openssl", "apt-get install openssl");
    let mut c = config(
        &openssl,
        &["speed", "-seconds", "1", "-bytes", "16", "sha256"],
    );
    c.timeout = Duration::from_secs(3600);
    c.kernel.sync_points = SyncPoints::Atomics;
    let first = run_config(&c);
    assert_eq!(
        first.outcome,
        Outcome::Exited { code: 0 },
        "{}",
        first.outcome.summary()
    );
    let out = String::from_utf8_lossy(&first.stdout);
    assert!(out.contains("sha256 "), "{out}");
    let again = run_config(&c);
    assert_eq!(again.trace_hash, first.trace_hash);
}
