//! The hint ring changes how many exits a run takes, never the run.

mod common;

use common::{config, harness};
use rewind_fuzz::kernel::vfs::FileSource;
use rewind_fuzz::sched::{Pct, Pos, RandomWalk, Replay, Strategy, StrategyKind};
use rewind_fuzz::vm::{RunReport, SnapshotAt, Vm};

fn run(name: &str, ring: bool, strategy: Box<dyn Strategy>) -> RunReport {
    common::require_kvm();
    let mut c = config(&harness(name), &[]);
    c.hint_ring = ring;
    c.snapshot_at = SnapshotAt::Never;
    let mut vm = Vm::new(&c, FileSource::host()).unwrap();
    vm.set_strategy(strategy);
    vm.run().unwrap()
}

/// Makes a fresh strategy (one per run: strategies keep state).
type MakeStrategy = Box<dyn Fn() -> Box<dyn Strategy>>;

fn strategies(seed: u64) -> Vec<(&'static str, MakeStrategy)> {
    vec![
        ("default", Box::new(|| StrategyKind::Default.build(0, 0))),
        ("random", Box::new(move || Box::new(RandomWalk::new(seed)))),
        ("pct:3", Box::new(move || Box::new(Pct::new(3, 200, seed)))),
        ("pos", Box::new(move || Box::new(Pos::new(seed)))),
    ]
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
    assert!(r.steps > 16_000, "{}", r.steps);
    assert!(
        r.exits * 20 < r.steps,
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
