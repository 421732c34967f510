//! Time and preemption inside computation: a loop with no sync site ticks
//! every `TICK_PERIOD` passes (a step), so virtual time moves on, timers
//! fire and a computing thread can be preempted, the same way run after
//! run. Only a slice's worth of ticks in a row is a decision point.

mod common;

use std::time::Duration;

use common::{build_c_with, config, require_kvm, require_tool, run_config};
use rewind_fuzz::code::{StepRules, SyncPoints};
use rewind_fuzz::engine::{RunConfig, RunReport};
use rewind_fuzz::observe::outcome::Outcome;

/// A run of `exe` at `atomics`, with ticks (the default) or without (the
/// step rules before them), given all the time it needs (no verdict waits
/// on the host's speed).
fn ticked_config(exe: &std::path::Path, args: &[&str], ticks: bool) -> RunConfig {
    let mut c = config(exe, args);
    c.kernel.sync_points = SyncPoints::Atomics;
    c.kernel.step_rules = if ticks {
        StepRules::default()
    } else {
        StepRules::Format7
    };
    c.timeout = Duration::from_secs(3600);
    c
}

/// Runs `c`, which must exit 0.
fn run_to_exit(c: &RunConfig) -> RunReport {
    let r = run_config(c);
    assert_eq!(
        r.outcome,
        Outcome::Exited { code: 0 },
        "{}",
        r.outcome.summary()
    );
    r
}

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
    let c = ticked_config(&exe, &[], true);
    let first = run_to_exit(&c);
    assert_eq!(String::from_utf8_lossy(&first.stdout), "rounds: many, 1\n");
    // A virtual second is about a thousand ticks, not a million steps.
    assert!(first.steps.0 < 5_000, "{} steps", first.steps);
    for _ in 0..3 {
        let again = run_config(&c);
        assert_eq!(
            (again.trace_hash.as_str(), again.steps),
            (first.trace_hash.as_str(), first.steps)
        );
    }
}

/// `rewind-fuzz run` with its defaults, as users run it: the alarm ends
/// the loop, and the JSON report says so.
#[test]
fn run_with_defaults_ends_a_loop_stopped_by_alarm() {
    require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let exe = build_c_with(dir.path(), "alarm_loop", COMPUTES_UNTIL_ALARM, &["-O2"]);
    let out = common::cli()
        .args(["run", "--json", "--target"])
        .arg(&exe)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{report}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(report.contains("\"exited\""), "{report}");
}

/// Two threads compute in chunks (a loop with no sync site each, then an
/// atomic that logs the chunk): the default strategy hands the processor
/// on when a thread's slice of ticks is used up, so their chunks
/// interleave; without ticks a thread keeps it to its end.
const TWO_COMPUTE: &str = r#"
#include <pthread.h>
#include <stdio.h>
static volatile unsigned long sink[2];
static char order[64];
static int next;
static void *compute(void *arg) {
    long me = (long)arg;
    unsigned long x = (unsigned long)me + 1;
    for (int chunk = 0; chunk < 10; chunk++) {
        for (long i = 0; i < 3000000; i++) { x = x * 6364136223846793005UL + 1; sink[me] = x; }
        order[__atomic_fetch_add(&next, 1, __ATOMIC_SEQ_CST)] = (char)('0' + me);
    }
    return 0;
}
int main(void) {
    pthread_t t;
    pthread_create(&t, 0, compute, (void *)1);
    compute((void *)0);
    pthread_join(t, 0);
    printf("%s\n", order);
    return 0;
}
"#;

#[test]
fn computing_threads_are_preempted_at_ticks() {
    require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let exe = build_c_with(dir.path(), "two_compute", TWO_COMPUTE, &["-O2", "-pthread"]);
    // The chunks' order, the trace hash, decision points and steps.
    let order = |ticks: bool| {
        let r = run_to_exit(&ticked_config(&exe, &[], ticks));
        (
            String::from_utf8_lossy(&r.stdout).trim().to_string(),
            r.trace_hash,
            r.decision_points,
            r.steps.0,
        )
    };
    let switches = |o: &str| o.as_bytes().windows(2).filter(|w| w[0] != w[1]).count();
    let ticked = order(true);
    let (chunks, _, decision_points, steps) = &ticked;
    assert!(switches(chunks) >= 4, "chunks in the order {chunks}");
    // Ticks in the middle of a slice are no decision points: a strategy is
    // asked once a slice of computation, not at each of its ticks.
    assert!(
        decision_points * 10 < *steps,
        "{decision_points} decision points in {steps} steps"
    );
    assert_eq!(order(true), ticked, "the same run twice");
    let (unticked, ..) = order(false);
    assert_eq!(switches(&unticked), 1, "chunks in the order {unticked}");
}

/// `openssl speed` computes until its alarm: it ends as natively, the same
/// way twice (one size; every size is the same loop six times).
#[test]
fn openssl_speed_ends_as_natively() {
    require_kvm();
    let openssl = require_tool("openssl", "apt-get install openssl");
    let args = ["speed", "-seconds", "1", "-bytes", "16", "sha256"];
    let c = ticked_config(&openssl, &args, true);
    let first = run_to_exit(&c);
    let out = String::from_utf8_lossy(&first.stdout);
    assert!(out.contains("sha256 "), "{out}");
    let again = run_config(&c);
    assert_eq!(again.trace_hash, first.trace_hash);
}
