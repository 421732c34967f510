//! The hint ring changes how many exits a run takes, never the run.

mod common;

use common::{config, harness};
use rewind_fuzz::code::SyncPoints;
use rewind_fuzz::engine::{RunReport, SnapshotAt, Vm};
use rewind_fuzz::kernel::vfs::FileSource;
use rewind_fuzz::sched::{Pos, Replay, Strategy, StrategyKind};

fn run(name: &str, ring: bool, strategy: Box<dyn Strategy>) -> RunReport {
    common::require_kvm();
    let mut c = config(&harness(name), &[]);
    c.hint_ring = ring;
    c.snapshot_at = SnapshotAt::Never;
    let mut vm = Vm::new(&c, FileSource::host()).unwrap();
    vm.set_strategy(strategy);
    vm.run().unwrap()
}

/// [`common::strategies`] and POS.
fn strategies(seed: u64) -> Vec<(&'static str, common::MakeStrategy)> {
    let mut all = common::strategies(seed, 200);
    all.push(("pos", Box::new(move || Box::new(Pos::new(seed)))));
    all
}

#[test]
fn runs_with_the_ring_equal_runs_with_one_exit_per_hint() {
    for name in ["philosophers", "cpp-threads", "atomicity", "prodcons"] {
        for seed in 0..3 {
            for (sname, make) in strategies(seed) {
                let with = run(name, true, make());
                let without = run(name, false, make());
                assert_eq!(
                    with.trace_hash, without.trace_hash,
                    "{name} {sname} seed {seed}"
                );
                assert_eq!(with.outcome, without.outcome, "{name} {sname} seed {seed}");
                assert_eq!(
                    with.schedule, without.schedule,
                    "{name} {sname} seed {seed}"
                );
                assert!(
                    with.exits <= without.exits,
                    "{name} {sname}: {} > {}",
                    with.exits,
                    without.exits
                );
                // And the recorded schedule replays to the same run, ring or not.
                let replay = run(name, true, Box::new(Replay::new(with.schedule.clone())));
                assert_eq!(
                    replay.trace_hash, with.trace_hash,
                    "{name} {sname} seed {seed} replay"
                );
            }
        }
    }
}

#[test]
fn the_ring_takes_most_hints_without_an_exit() {
    let r = run("counter", true, StrategyKind::Default.build(0, 0));
    let without = run("counter", false, StrategyKind::Default.build(0, 0));
    assert_eq!(r.trace_hash, without.trace_hash);
    assert!(r.steps.0 > 16_000, "{}", r.steps);
    assert!(
        r.exits * 20 < r.steps.0,
        "{} exits for {} steps",
        r.exits,
        r.steps
    );
}

#[test]
fn prefixed_schedules_with_any_tail_keep_to_their_horizon() {
    use rewind_fuzz::fuzz::{ScheduleInput, Tail};
    use rewind_fuzz::sched::Decision;
    let mut x = 12345u64;
    let mut next = || {
        x = rewind_fuzz::sched::splitmix64(x);
        x
    };
    for name in ["philosophers", "prodcons"] {
        for round in 0..40 {
            let mut decisions = Vec::new();
            for _ in 0..(next() % 6) {
                decisions.push(Decision {
                    step: 30 + next() % 150,
                    thread: 1 + (next() % 6) as u32,
                });
            }
            let seed = next();
            let kind = match round % 4 {
                0 => StrategyKind::Default,
                1 => StrategyKind::Random,
                2 => StrategyKind::pct(2 + (seed % 3) as u32),
                _ => StrategyKind::Pos,
            };
            let tail = Tail::new(kind, seed);
            let mut input = ScheduleInput {
                target: 0,
                decisions,
                tail,
            };
            input.normalize();
            let with = run(name, true, input.strategy(100));
            let without = run(name, false, input.strategy(100));
            assert_eq!(with.trace_hash, without.trace_hash, "{name} {input:?}");
        }
    }
}

/// How sync sites reach the monitor: by a jump to a trampoline and the site
/// dispatcher (the default), by a breakpoint and the dispatcher, or each by
/// an exit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    Jumps,
    Breakpoints,
    Exits,
}

fn run_at(
    name: &str,
    level: SyncPoints,
    path: Path,
    snapshot: SnapshotAt,
    strategy: Box<dyn Strategy>,
) -> RunReport {
    run_exe(&harness(name), level, path, snapshot, strategy)
}

fn run_exe(
    exe: &std::path::Path,
    level: SyncPoints,
    path: Path,
    snapshot: SnapshotAt,
    strategy: Box<dyn Strategy>,
) -> RunReport {
    common::require_kvm();
    let mut c = config(exe, &[]);
    c.kernel.sync_points = level;
    c.hint_ring = path != Path::Exits;
    c.site_jumps = path == Path::Jumps;
    c.snapshot_at = snapshot;
    let mut vm = Vm::new(&c, FileSource::host()).unwrap();
    vm.set_strategy(strategy);
    vm.run().unwrap()
}

/// Sync sites the guest takes without an exit, reached by jumps to
/// trampolines or by breakpoints, give the runs that an exit per site
/// gives: the same steps, trace, outcome and schedule, for every strategy
/// and level, and the schedules replay to them.
#[test]
fn sync_sites_taken_without_an_exit_equal_their_breakpoints() {
    let programs = [
        ("rust-two-mutex", SyncPoints::Atomics),
        ("rust-libtest", SyncPoints::Atomics),
        ("treiber-aba", SyncPoints::Atomics),
        ("spin-rust-hint", SyncPoints::Atomics),
        ("atomic-semantics", SyncPoints::Globals),
        ("flag-before-data", SyncPoints::Globals),
        ("rust-mutex-inversion", SyncPoints::Globals),
    ];
    for (name, level) in programs {
        let mut buffered = [0, 0];
        for seed in 0..2 {
            for (sname, make) in strategies(seed) {
                let what = format!("{name} at {level}, {sname} seed {seed}");
                let without = run_at(name, level, Path::Exits, SnapshotAt::Never, make());
                assert_eq!(without.buffered_sites, 0, "{what}");
                for (n, path) in [Path::Jumps, Path::Breakpoints].into_iter().enumerate() {
                    let what = format!("{what}, {path:?}");
                    let with = run_at(name, level, path, SnapshotAt::Never, make());
                    assert_eq!(with.trace_hash, without.trace_hash, "{what}");
                    assert_eq!(with.steps, without.steps, "{what}");
                    assert_eq!(with.outcome, without.outcome, "{what}");
                    assert_eq!(with.stdout, without.stdout, "{what}");
                    assert_eq!(with.schedule, without.schedule, "{what}");
                    assert_eq!(with.coverage, without.coverage, "{what}");
                    buffered[n] += with.buffered_sites;
                    let replay = run_at(
                        name,
                        level,
                        path,
                        SnapshotAt::FirstThread,
                        Box::new(Replay::new(with.schedule.clone())),
                    );
                    assert_eq!(replay.trace_hash, with.trace_hash, "{what} replay");
                }
            }
        }
        assert!(buffered[0] > 0, "{name}: no site was taken by a jump");
        assert!(
            buffered[1] > 0,
            "{name}: no site was taken from a breakpoint"
        );
    }
}

const FAULTS_AND_FIRST_TOUCHES: &str = r#"
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static sigjmp_buf env;
static long counter;
static __int128 wide __attribute__((aligned(16)));

static void on_segv(int sig, siginfo_t *si, void *ctx) {
    (void)sig; (void)ctx;
    printf("SIGSEGV at %p\n", si->si_addr);
    siglongjmp(env, 1);
}

static void *worker(void *arg) {
    long *pages = arg;
    for (int i = 0; i < 200; i++)
        __atomic_fetch_add(&pages[(i % 64) * 512], i, __ATOMIC_SEQ_CST);
    for (int i = 0; i < 100; i++)
        __atomic_fetch_add(&counter, 1, __ATOMIC_SEQ_CST);
    return 0;
}

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigaction(SIGSEGV, &sa, 0);
    /* Pages an atomic touches first (filled on demand mid-dispatch). */
    long *pages = mmap(0, 64 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    long *ro = mmap(0, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], 0, worker, pages);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], 0);
    /* An atomic that may read but not write: its copy faults. */
    if (!sigsetjmp(env, 1))
        __atomic_fetch_add(ro, 1, __ATOMIC_SEQ_CST);
    /* One that cannot read: the dispatcher's read faults. */
    if (!sigsetjmp(env, 1))
        __atomic_fetch_add((long *)8, 1, __ATOMIC_SEQ_CST);
    /* A forked child has the sites area too, copied. */
    pid_t child = fork();
    if (child == 0) {
        for (int i = 0; i < 50; i++)
            __atomic_fetch_add(&counter, 2, __ATOMIC_SEQ_CST);
        _exit((int)(counter % 256));
    }
    int status = 0;
    waitpid(child, &status, 0);
    printf("child %d\n", WEXITSTATUS(status));
    __int128 expected = 0, desired = ((__int128)7 << 64) | 9;
    int swapped = __sync_bool_compare_and_swap(&wide, expected, desired);
    long sum = 0;
    for (int i = 0; i < 64; i++)
        sum += pages[i * 512];
    printf("sum %ld counter %ld swapped %d wide %lx:%lx\n", sum, counter, swapped,
           (long)(wide >> 64), (long)wide);
    return 0;
}
"#;

/// Faults on the way through the dispatcher and its copies are the
/// program's own faults at the site, pages first touched there are filled
/// as anywhere, and a forked child takes its sites with its own copy of the
/// area: ring or not, the run is the one natively printed.
#[test]
fn faults_and_first_touches_at_sites_taken_without_an_exit_are_the_programs() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let exe = common::build_c_with(
        dir.path(),
        "faults",
        FAULTS_AND_FIRST_TOUCHES,
        &["-pthread", "-mcx16"],
    );
    let native = std::process::Command::new(&exe).output().unwrap();
    let native = String::from_utf8_lossy(&native.stdout).into_owned();
    assert!(native.contains("swapped 1"), "{native}");
    let make = |path: Path, strategy: Box<dyn Strategy>| {
        run_exe(&exe, SyncPoints::Atomics, path, SnapshotAt::Never, strategy)
    };
    for seed in 0..3 {
        for (sname, strategy) in strategies(seed) {
            let without = make(Path::Exits, strategy());
            for path in [Path::Jumps, Path::Breakpoints] {
                let with = make(path, strategy());
                let out = String::from_utf8_lossy(&with.stdout).into_owned();
                let what = format!("{sname} {seed} {path:?}");
                // Addresses of the faults aside, what native prints.
                assert_eq!(out.lines().last(), native.lines().last(), "{what}");
                assert!(out.contains("child 44"), "{what}: {out}");
                assert_eq!(out.matches("SIGSEGV").count(), 2, "{what}: {out}");
                assert_eq!(with.trace_hash, without.trace_hash, "{what}");
                assert_eq!(with.stdout, without.stdout, "{what}");
                assert_eq!(with.outcome, without.outcome, "{what}");
                // POS may switch at every step: it buffers nothing.
                if sname == "default" {
                    assert!(with.buffered_sites > 100, "{what}: {}", with.buffered_sites);
                }
            }
        }
    }
}
