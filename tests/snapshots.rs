//! Snapshots: a run restored from the snapshot is the run from scratch, and
//! a run leaves nothing behind for the next.

mod common;

use common::{config, harness};
use rewind_fuzz::engine::{RunReport, SnapshotAt, Vm};
use rewind_fuzz::kernel::vfs::FileSource;
use rewind_fuzz::observe::outcome::Outcome;
use rewind_fuzz::sched::{RandomWalk, Replay};

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
