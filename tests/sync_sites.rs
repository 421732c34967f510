//! Scheduling points inside user code: atomics, spin loops and global
//! variables of unmodified binaries (C, C++ and Rust) become steps, so bugs
//! that live between two atomics or two stores are found, correct
//! spin-waits end, and every run stays deterministic.

mod common;

use std::ops::ControlFlow;
use std::process::Command;
use std::sync::Arc;

use common::{config, harness, harness_variant, require_kvm};
use rewind_fuzz::code::SyncPoints;
use rewind_fuzz::engine::{RunConfig, RunReport, Vm};
use rewind_fuzz::explore;
use rewind_fuzz::harness::Variant;
use rewind_fuzz::kernel::vfs::FileSource;
use rewind_fuzz::observe::outcome::Outcome;
use rewind_fuzz::report::Symbols;
use rewind_fuzz::sched::{Replay, Schedule, StrategyKind};

/// A harness's run configuration at `level`.
fn at(exe: &std::path::Path, level: SyncPoints) -> RunConfig {
    let mut c = config(exe, &[]);
    c.kernel.sync_points = level;
    c
}

/// Runs up to `n` schedules of `kind` and returns the first report `want`
/// accepts, with its machine's symbols.
fn first(
    cfg: &RunConfig,
    kind: StrategyKind,
    n: u64,
    want: impl Fn(&RunReport) -> bool,
) -> Option<(u64, RunReport, Symbols)> {
    require_kvm();
    let probe = explore::probe(cfg, FileSource::host()).expect("probe");
    let mut runner = probe.runner;
    for i in 0..n {
        let s = kind.build(explore::schedule_seed(0, i), probe.decision_points);
        let r = runner.run(s).expect("run");
        if want(&r) {
            let sym = Symbols::new(runner.vm().expect("a machine"));
            return Some((i, r, sym));
        }
    }
    None
}

/// Counts the outcomes of `n` schedules of `kind` on two jobs.
fn outcomes(cfg: &RunConfig, kind: StrategyKind, n: u64) -> Vec<RunReport> {
    require_kvm();
    let steps = explore::probe(cfg, FileSource::host())
        .expect("probe")
        .decision_points;
    let mut out = Vec::new();
    explore::run_schedules::<rewind_fuzz::engine::VmError>(
        cfg,
        &FileSource::host(),
        2,
        n,
        0,
        |seed| Ok(kind.build(seed, steps)),
        |_, r| {
            out.push(r);
            ControlFlow::Continue(())
        },
    )
    .expect("schedules run");
    out
}

fn deadlocked(r: &RunReport) -> bool {
    matches!(r.outcome, Outcome::Deadlocked { .. })
}

/// Checks a deadlock of the mutex-inversion harnesses names both threads,
/// both locks and both `lock()` lines in the program's own code.
fn assert_names_the_inversion(r: &RunReport, sym: &mut Symbols, source: &str) {
    let Outcome::Deadlocked { threads, cycle } = &r.outcome else {
        panic!("not a deadlock: {}", r.outcome.summary());
    };
    assert_eq!(cycle.len(), 2, "{}", r.outcome.summary());
    let lines = sym.outcome_lines(&r.outcome);
    let text = lines.join("\n");
    for t in cycle {
        let b = threads.iter().find(|b| b.thread == *t).unwrap();
        let (lock, holder) = (b.lock.expect("the lock"), b.holder.expect("its holder"));
        assert!(cycle.contains(&holder) && holder != *t, "{text}");
        assert!(
            text.contains(&format!("{lock:#x}")),
            "names lock {lock:#x}: {text}"
        );
        for site in [b.site.unwrap(), b.holder_site.unwrap()] {
            let l = sym.call_site(site.0);
            assert!(
                l.file.as_deref().is_some_and(|f| f.ends_with(source)),
                "the site is the program's own lock() call, not the runtime's: {l:?}"
            );
        }
    }
    let lock_lines: std::collections::BTreeSet<u32> = threads
        .iter()
        .filter(|b| cycle.contains(&b.thread))
        .flat_map(|b| [b.site.unwrap(), b.holder_site.unwrap()])
        .filter_map(|s| sym.call_site(s.0).line)
        .collect();
    assert_eq!(lock_lines.len(), 2, "both lock() lines: {text}");
}

#[test]
fn rust_mutexes_taken_in_opposite_orders_with_nothing_between_deadlock_under_pct() {
    let cfg = at(&harness("rust-mutex-inversion"), SyncPoints::Atomics);
    let (i, r, mut sym) = first(&cfg, StrategyKind::pct(3), 1000, deadlocked)
        .expect("pct:3 deadlocks it within 1000 schedules");
    eprintln!("deadlock at schedule {i}");
    assert_names_the_inversion(&r, &mut sym, "rust-mutex-inversion.rs");
    // A run that did not deadlock still shows the lock-order cycle.
    let (_, clean, _) = first(&cfg, StrategyKind::pct(3), 100, |r| {
        r.outcome.is_success() && !r.potential_deadlocks.is_empty()
    })
    .expect("a clean run reports the potential deadlock");
    assert_eq!(clean.potential_deadlocks[0].edges.len(), 2);
}

#[test]
fn the_same_inversion_as_a_libtest_test_deadlocks_too() {
    let cfg = at(&harness("rust-mutex-inversion-test"), SyncPoints::Atomics);
    let (_, r, mut sym) = first(&cfg, StrategyKind::pct(3), 1000, deadlocked)
        .expect("pct:3 deadlocks the #[test] within 1000 schedules");
    assert_names_the_inversion(&r, &mut sym, "mutex-inversion-test.rs");
}

#[test]
fn the_fuzzer_finds_the_rust_inversion() {
    require_kvm();
    let cfg = at(&harness("rust-mutex-inversion"), SyncPoints::Atomics);
    let hit = rewind_fuzz::fuzz::schedules_to_bug(
        cfg,
        1,
        Default::default(),
        (2000, None),
        Arc::new(deadlocked),
    )
    .expect("fuzz");
    assert!(
        hit.is_some(),
        "the fuzzer deadlocks it within 2000 executions"
    );
}

#[test]
fn the_inversion_fixed_passes_two_thousand_schedules() {
    let cfg = at(
        &harness_variant("rust-mutex-inversion", Variant::Fixed),
        SyncPoints::Atomics,
    );
    let runs = outcomes(&cfg, StrategyKind::pct(3), 2000);
    let failed: Vec<String> = runs
        .iter()
        .filter(|r| !r.outcome.is_success() || !r.potential_deadlocks.is_empty())
        .map(|r| r.outcome.summary())
        .collect();
    assert!(
        failed.is_empty(),
        "{} failures: {:?}",
        failed.len(),
        &failed[..failed.len().min(3)]
    );
}

#[test]
fn correct_spin_waits_end_under_every_strategy() {
    let strategies = [
        StrategyKind::Default,
        StrategyKind::Random,
        StrategyKind::pct(2),
        StrategyKind::pct(3),
        StrategyKind::Pos,
    ];
    for name in [
        "spin-rust-hint",
        "spin-rust-bare",
        "spin-c-volatile",
        "spin-cpp-atomic",
    ] {
        let cfg = at(&harness(name), SyncPoints::Atomics);
        for kind in strategies {
            let n = if kind == StrategyKind::Default {
                1
            } else {
                200
            };
            for r in outcomes(&cfg, kind, n) {
                assert!(
                    r.outcome.is_success(),
                    "{name} under {kind}: {}",
                    r.outcome.summary()
                );
            }
        }
    }
}

#[test]
fn a_thread_polling_with_work_and_atomics_gives_way_under_every_strategy() {
    // It never blocks, yields or spins in a short loop: only a time slice
    // lets main, which it woke, answer.
    let cfg = at(&harness("poll-with-work"), SyncPoints::Atomics);
    for kind in [
        StrategyKind::Default,
        StrategyKind::Random,
        StrategyKind::pct(1),
        StrategyKind::pct(3),
        StrategyKind::Pos,
    ] {
        let n = if kind.is_seeded() { 50 } else { 1 };
        for r in outcomes(&cfg, kind, n) {
            assert!(r.outcome.is_success(), "{kind}: {}", r.outcome.summary());
        }
    }
}

#[test]
fn a_spin_wait_is_a_hang_without_sync_sites() {
    let mut cfg = at(&harness("spin-c-volatile"), SyncPoints::Calls);
    cfg.timeout = std::time::Duration::from_secs(2);
    let r = common::run_config(&cfg);
    assert!(
        matches!(r.outcome, Outcome::TimedOut { .. }),
        "{}",
        r.outcome.summary()
    );
}

#[test]
fn threads_waiting_for_each_other_with_yields_end_under_every_strategy() {
    let cfg = at(&harness("yield-barrier"), SyncPoints::Atomics);
    for kind in [
        StrategyKind::Random,
        StrategyKind::pct(1),
        StrategyKind::pct(2),
        StrategyKind::pct(3),
        StrategyKind::Pos,
    ] {
        for r in outcomes(&cfg, kind, 200) {
            assert!(r.outcome.is_success(), "{kind}: {}", r.outcome.summary());
        }
    }
}

#[test]
fn a_bug_between_two_atomics_is_found_by_the_fuzzer_and_its_fix_passes() {
    require_kvm();
    let crashed = |r: &RunReport| matches!(r.outcome, Outcome::Crashed { .. });
    let cfg = at(&harness("treiber-aba"), SyncPoints::Atomics);
    let hit = rewind_fuzz::fuzz::schedules_to_bug(
        cfg,
        0,
        Default::default(),
        (2000, None),
        Arc::new(crashed),
    )
    .expect("fuzz");
    assert!(
        hit.is_some(),
        "the fuzzer finds the ABA within 2000 executions"
    );
    let fixed = at(
        &harness_variant("treiber-aba", Variant::Fixed),
        SyncPoints::Atomics,
    );
    for kind in [
        StrategyKind::Random,
        StrategyKind::pct(3),
        StrategyKind::Pos,
    ] {
        for r in outcomes(&fixed, kind, 300) {
            assert!(r.outcome.is_success(), "{kind}: {}", r.outcome.summary());
        }
    }
}

#[test]
fn a_flag_set_before_its_data_is_found_only_when_globals_are_sync_points() {
    let crashed = |r: &RunReport| matches!(r.outcome, Outcome::Crashed { .. });
    let exe = harness("flag-before-data");
    assert!(
        first(
            &at(&exe, SyncPoints::Globals),
            StrategyKind::pct(3),
            1000,
            crashed
        )
        .is_some(),
        "found with --sync-points globals"
    );
    assert!(
        first(
            &at(&exe, SyncPoints::Calls),
            StrategyKind::pct(3),
            1000,
            crashed
        )
        .is_none(),
        "not with calls: no scheduling point lies between the two stores"
    );
    let fixed = at(
        &harness_variant("flag-before-data", Variant::Fixed),
        SyncPoints::Globals,
    );
    for r in outcomes(&fixed, StrategyKind::pct(3), 300) {
        assert!(r.outcome.is_success(), "{}", r.outcome.summary());
    }
}

#[test]
fn a_bug_in_a_thread_the_default_run_never_reaches_is_found_by_pct() {
    let crashed = |r: &RunReport| matches!(r.outcome, Outcome::Crashed { .. });
    let cfg = at(&harness("late-second-thread"), SyncPoints::Atomics);
    assert!(
        first(&cfg, StrategyKind::pct(3), 1000, crashed).is_some(),
        "pct:3 finds it within 1000 schedules"
    );
}

#[test]
fn every_level_replays_a_schedule_to_one_trace_hash_from_scratch_and_from_the_snapshot() {
    require_kvm();
    for level in [SyncPoints::Calls, SyncPoints::Atomics, SyncPoints::Globals] {
        let cfg = at(&harness("treiber-aba"), level);
        let (_, walk, _) = first(&cfg, StrategyKind::Random, 1, |_| true).unwrap();
        let schedule = walk.schedule.clone();
        let mut vm = Vm::new(&cfg, FileSource::host()).unwrap();
        let mut hashes = std::collections::BTreeSet::new();
        for _ in 0..100 {
            vm.set_strategy(Box::new(Replay::new(schedule.clone())));
            hashes.insert(vm.run().unwrap().trace_hash);
        }
        let mut scratch = cfg.clone();
        scratch.snapshot_at = rewind_fuzz::engine::SnapshotAt::Never;
        for _ in 0..5 {
            let mut vm = Vm::new(&scratch, FileSource::host()).unwrap();
            vm.set_strategy(Box::new(Replay::new(schedule.clone())));
            hashes.insert(vm.run().unwrap().trace_hash);
        }
        assert_eq!(hashes.len(), 1, "{level}: {hashes:?}");
        assert!(hashes.contains(&walk.trace_hash), "{level}");
    }
}

#[test]
fn a_saved_schedule_replays_at_its_own_level_and_refuses_another() {
    require_kvm();
    let exe = harness("treiber-aba");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.json");
    let out = common::cli()
        .args(["run", "--target"])
        .arg(&exe)
        .args([
            "--strategy",
            "random",
            "--seed",
            "3",
            "--sync-points",
            "globals",
        ])
        .arg("--save-schedule")
        .arg(&file)
        .arg("--json")
        .output()
        .unwrap();
    let first: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        Schedule::load(&file).unwrap().sync_points,
        SyncPoints::Globals
    );
    let replay = common::cli()
        .args(["run", "--target"])
        .arg(&exe)
        .arg("--schedule")
        .arg(&file)
        .arg("--json")
        .output()
        .unwrap();
    let again: serde_json::Value = serde_json::from_slice(&replay.stdout).unwrap();
    assert_eq!(first["trace_hash"], again["trace_hash"]);
    let refused = common::cli()
        .args(["run", "--target"])
        .arg(&exe)
        .arg("--schedule")
        .arg(&file)
        .args(["--sync-points", "calls"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let msg = String::from_utf8_lossy(&refused.stderr);
    assert!(msg.contains("--sync-points globals"), "{msg}");
}

/// The program's output natively.
fn native_stdout(exe: &std::path::Path) -> String {
    let out = Command::new(exe).output().expect("run natively");
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn every_instruction_a_site_can_be_executes_as_the_hardware_does() {
    let exe = harness("atomic-semantics");
    let native = native_stdout(&exe);
    for level in [SyncPoints::Atomics, SyncPoints::Globals] {
        let r = common::run_config(&at(&exe, level));
        assert!(
            r.steps.0 > 1000,
            "{level}: the sites are steps ({})",
            r.steps
        );
        assert_eq!(String::from_utf8_lossy(&r.stdout), native, "{level}");
    }
}

#[test]
fn a_program_that_hashes_its_own_code_sees_what_it_would_natively() {
    let exe = harness("text-checksum");
    let native = native_stdout(&exe);
    for level in [SyncPoints::Calls, SyncPoints::Atomics, SyncPoints::Globals] {
        let r = common::run_config(&at(&exe, level));
        assert_eq!(String::from_utf8_lossy(&r.stdout), native, "{level}");
        if level != SyncPoints::Calls {
            assert!(
                r.notes.iter().any(|n| n.contains("left unpatched")),
                "the run says why its sites are not patched: {:?}",
                r.notes
            );
        }
    }
}
