//! How long a run may go: a run whose threads only go round states they
//! have been in is hung, whatever the step budget; a run that keeps
//! reaching new states, or waits for a timer, is not.

mod common;

use common::{build_c_with, config, run_config};
use rewind_fuzz::code::SyncPoints;
use rewind_fuzz::observe::outcome::{HungReason, Outcome};

const SPINS_FOR_NOBODY: &str = r#"
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
static atomic_int flag;
static void *waiter(void *arg) {
    (void)arg;
    while (!atomic_load(&flag)) sched_yield();
    return 0;
}
int main(void) {
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], 0, waiter, 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], 0);
    return 0;
}
"#;

/// Two threads yield in a loop for a flag nobody sets: hung for want of
/// progress after one round of `--hang-steps`, with the budget far away.
#[test]
fn threads_spinning_for_a_flag_nobody_sets_are_hung_without_progress() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_c_with(dir.path(), "spins", SPINS_FOR_NOBODY, &["-pthread"]);
    let mut c = config(&exe, &[]);
    c.kernel.sync_points = SyncPoints::Atomics;
    c.kernel.hang_steps = 20_000;
    let r = run_config(&c);
    assert!(
        matches!(
            r.outcome,
            Outcome::Hung {
                reason: HungReason::NoProgress,
                ..
            }
        ),
        "{:?}",
        r.outcome
    );
    assert!(r.steps.0 <= 40_000, "{} steps", r.steps);
    assert!(
        r.outcome.summary().contains("--hang-steps"),
        "{}",
        r.outcome.summary()
    );
    // Without the watch the budget ends it, and says which flag raises it.
    c.kernel.hang_steps = 0;
    c.kernel.max_steps = 50_000;
    let r = run_config(&c);
    assert!(
        matches!(
            r.outcome,
            Outcome::Hung {
                reason: HungReason::MaxSteps,
                ..
            }
        ),
        "{:?}",
        r.outcome
    );
    assert!(
        r.outcome.summary().contains("--max-steps"),
        "{}",
        r.outcome.summary()
    );
}

const WAITS_FOR_TIME: &str = r#"
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
static atomic_int flag;
static void *sleeper(void *arg) {
    (void)arg;
    usleep(100000);
    atomic_store(&flag, 1);
    return 0;
}
static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}
int main(void) {
    pthread_t t;
    pthread_create(&t, 0, sleeper, 0);
    /* Yields until a sleeper wakes: a timer changes what the steps show. */
    long polls = 0;
    while (!atomic_load(&flag)) { sched_yield(); polls++; }
    pthread_join(t, 0);
    /* Polls the clock for a tenth of a second: the clock moves on. */
    double until = now() + 0.1;
    while (now() < until) polls++;
    printf("done %d\n", polls > 0);
    return 0;
}
"#;

/// A thread yielding until a sleeper wakes, and one polling the clock to a
/// deadline, each five rounds of the watch of the same call, are waiting
/// for time, not hung.
#[test]
fn threads_waiting_for_a_sleeper_or_polling_the_clock_are_never_hung() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_c_with(dir.path(), "waits", WAITS_FOR_TIME, &["-pthread"]);
    let mut c = config(&exe, &[]);
    c.kernel.sync_points = SyncPoints::Atomics;
    c.kernel.hang_steps = 20_000;
    let r = run_config(&c);
    assert_eq!(
        r.outcome,
        Outcome::Exited { code: 0 },
        "{}",
        r.outcome.summary()
    );
    assert_eq!(String::from_utf8_lossy(&r.stdout), "done 1\n");
    assert!(
        r.steps.0 > 150_000,
        "{} steps: the waits were short",
        r.steps
    );
}
