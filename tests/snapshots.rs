//! Snapshots: a run restored from the snapshot is the run from scratch, and
//! a run leaves nothing behind for the next.

mod common;

use common::{config, harness};
use rewind_fuzz::engine::{RunReport, SnapshotAt, Vm};
use rewind_fuzz::kernel::vfs::FileSource;
use rewind_fuzz::observe::outcome::Outcome;
use rewind_fuzz::sched::{Prefixed, RandomWalk, Replay, Strategy};

fn from_scratch(
    c: &rewind_fuzz::engine::RunConfig,
    schedule: rewind_fuzz::sched::Schedule,
) -> RunReport {
    let mut c = c.clone();
    c.snapshot_at = SnapshotAt::Never;
    let mut vm = Vm::new(&c, FileSource::host()).unwrap();
    vm.set_strategy(Box::new(Replay::new(schedule)));
    vm.run().unwrap()
}

fn equivalent_for_200_schedules(name: &str) {
    common::require_kvm();
    let c = config(&harness(name), &[]);
    let mut vm = Vm::new(&c, FileSource::host()).unwrap();
    let mut restored = 0;
    for seed in 0..200 {
        vm.set_strategy(Box::new(RandomWalk::new(seed)));
        let r = vm.run().unwrap();
        restored += r.from_snapshot as u32;
        let fresh = from_scratch(&c, r.schedule.clone());
        assert_eq!(
            r.trace_hash, fresh.trace_hash,
            "{name} seed {seed}: {:?} vs {:?}",
            r.outcome, fresh.outcome
        );
        assert_eq!(r.outcome, fresh.outcome);
        assert_eq!(r.stdout, fresh.stdout);
    }
    assert_eq!(
        restored, 199,
        "every run after the first starts from the snapshot"
    );
}

#[test]
fn restored_runs_of_the_philosophers_equal_runs_from_scratch() {
    equivalent_for_200_schedules("philosophers");
}

#[test]
fn restored_runs_of_a_cpp_program_equal_runs_from_scratch() {
    equivalent_for_200_schedules("cpp-threads");
}

/// A fork's continuations, restored from a snapshot at the fork's step,
/// are the runs from the start: the same continuation schedule gives the
/// same trace either way, and so does its recorded schedule replayed.
fn continuations_equal_runs_from_scratch(name: &str) {
    common::require_kvm();
    let c = config(&harness(name), &[]);
    let mut vm = Vm::new(&c, FileSource::host()).unwrap();
    vm.set_strategy(Box::new(RandomWalk::new(5)));
    let recorded = vm.run().unwrap();
    vm.set_strategy(Box::new(Replay::new(Default::default())));
    let usual = vm.run().unwrap().restored_at.expect("the usual snapshot");
    let decisions = recorded.schedule.decisions.clone();
    let last = decisions.last().expect("a random walk preempts").step;
    // Late in the run; just before a decision (the boundary where the
    // continuation's own strategy takes the first pick); and at the end,
    // where no exit follows the fork's step: the snapshot goes at the last
    // exit before it.
    let end = recorded.steps.0;
    for at in [end * 3 / 4, last - 1, end] {
        assert!(at > usual, "{at} after the usual snapshot at {usual}");
        let cont = |seed| -> Box<dyn Strategy> {
            let tail = Box::new(RandomWalk::new(seed));
            Box::new(Prefixed::until(&decisions, at, tail))
        };
        let mut forked = c.clone();
        forked.fork_snapshot = Some(at);
        let mut vm = Vm::new(&forked, FileSource::host()).unwrap();
        let mut scratch = c.clone();
        scratch.snapshot_at = SnapshotAt::Never;
        let (mut late, mut before) = (0, 0);
        for seed in 0..50 {
            vm.set_strategy(cont(seed));
            let r = vm.run().unwrap();
            if let Some(s) = r.restored_at {
                assert!(s <= at, "restored after the fork: {s} > {at}");
                late += u32::from(s > usual);
                before += u32::from(s < at);
            }
            let mut fresh = Vm::new(&scratch, FileSource::host()).unwrap();
            fresh.set_strategy(cont(seed));
            let fresh = fresh.run().unwrap();
            let what = format!(
                "at {at} seed {seed}: {:?} vs {:?}",
                r.outcome, fresh.outcome
            );
            assert_eq!(r.trace_hash, fresh.trace_hash, "{what}");
            assert_eq!(r.outcome, fresh.outcome, "{what}");
            assert_eq!(r.stdout, fresh.stdout, "{what}");
            assert_eq!(r.schedule.decisions, fresh.schedule.decisions, "{what}");
            let replayed = from_scratch(&c, r.schedule.clone());
            assert_eq!(r.trace_hash, replayed.trace_hash, "{what}");
        }
        // The first run finds where the snapshot goes, the second takes
        // it when no exit follows the fork's step itself.
        assert!(late >= 48, "at {at}: {late} of 50 from the fork's snapshot");
        if at == end {
            assert!(
                before >= 48,
                "at the end: {before} of 50 restored before it"
            );
        }
    }
}

#[test]
fn continuations_of_the_philosophers_restored_at_the_fork_equal_runs_from_scratch() {
    continuations_equal_runs_from_scratch("philosophers");
}

/// Its locks are atomics: sync sites, not pthread calls.
#[test]
fn continuations_of_a_rust_program_restored_at_the_fork_equal_runs_from_scratch() {
    continuations_equal_runs_from_scratch("rust-mutex-inversion");
}

#[test]
fn a_run_that_writes_files_leaves_nothing_for_the_next() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    let mut c = config(
        &harness("file-writer"),
        &[a.to_str().unwrap(), b.to_str().unwrap()],
    );
    c.snapshot_at = SnapshotAt::Start;
    let mut vm = Vm::new(&c, FileSource::host()).unwrap();
    let first = vm.run().unwrap();
    for _ in 0..3 {
        let again = vm.run().unwrap();
        assert!(again.from_snapshot);
        assert_eq!(again.trace_hash, first.trace_hash);
        assert_eq!(
            again.stdout, first.stdout,
            "the files of the last run are gone"
        );
    }
}

#[test]
fn runs_that_crash_or_deadlock_leave_nothing_for_the_next() {
    common::require_kvm();
    let c = config(&harness("abba"), &[]);
    let clean = from_scratch(&c, Default::default());
    let mut vm = Vm::new(&c, FileSource::host()).unwrap();
    let (mut deadlocks, mut checked) = (0, 0);
    for seed in 0..300 {
        vm.set_strategy(Box::new(RandomWalk::new(seed)));
        let r = vm.run().unwrap();
        if r.outcome.kind() == "deadlocked" {
            deadlocks += 1;
            // The next run, with the default schedule, is as if from scratch.
            vm.set_strategy(Box::new(Replay::new(Default::default())));
            let next = vm.run().unwrap();
            assert_eq!(next.trace_hash, clean.trace_hash);
            checked += 1;
        }
    }
    assert!(
        deadlocks > 0 && checked == deadlocks,
        "{deadlocks} deadlocks"
    );
    let mut c = config(&harness("null-deref"), &[]);
    c.snapshot_at = SnapshotAt::Start;
    let mut vm = Vm::new(&c, FileSource::host()).unwrap();
    let a = vm.run().unwrap();
    let b = vm.run().unwrap();
    assert_eq!(a.outcome.kind(), "crashed");
    assert_eq!(a.trace_hash, b.trace_hash);
}

#[test]
fn a_run_stopped_by_the_watchdog_leaves_the_next_run_unharmed() {
    // The watchdog stops the vCPU wherever it is, usually in user code; the
    // next run must start at the door like any other. Without sync points
    // in user code, a `while (!flag);` spinner that runs before the flag is
    // set spins until the watchdog fires; other schedules exit.
    common::require_kvm();
    let mut c = config(&harness("spin-c-volatile"), &[]);
    c.kernel.sync_points = rewind_fuzz::code::SyncPoints::Calls;
    c.timeout = std::time::Duration::from_millis(300);
    let mut vm = Vm::new(&c, FileSource::host()).unwrap();
    let (mut stopped, mut after_a_stop) = (0, 0);
    let mut last_stopped = false;
    for seed in 0..40 {
        vm.set_strategy(Box::new(RandomWalk::new(seed)));
        let r = vm.run().unwrap();
        if let Outcome::TimedOut { .. } = r.outcome {
            stopped += 1;
            last_stopped = true;
            continue;
        }
        let fresh = from_scratch(&c, r.schedule.clone());
        assert_eq!(r.outcome, fresh.outcome, "seed {seed}");
        assert_eq!(r.trace_hash, fresh.trace_hash, "seed {seed}");
        after_a_stop += last_stopped as u32;
        last_stopped = false;
        if after_a_stop >= 2 {
            break;
        }
    }
    assert!(
        stopped > 0 && after_a_stop >= 2,
        "{stopped} stops, {after_a_stop} runs after one"
    );
}
