//! The executor: runs a schedule in a machine restored from its snapshot and
//! turns the run into coverage features and, for a new failure, a finding.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use libafl::HasMetadata;
use libafl::executors::{Executor, ExitKind, HasObservers};
use libafl::observers::{MapObserver, ObserversTuple, StdMapObserver};
use libafl::state::HasExecutions;
use libafl_bolts::tuples::RefIndexable;
use serde::{Deserialize, Serialize};

use super::input::ScheduleInput;
use super::mutators::{Lineages, RunProfile};
use crate::engine::{Coverage, RunConfig, RunReport};
use crate::explore::Runner;
use crate::kernel::vfs::SharedSource;
use crate::observe::failure::FailureKind;
use crate::observe::locks::Inversion;
use crate::observe::outcome::Outcome;
use crate::report::signature::Signature;
use crate::sched::Decision;

/// Size of the coverage map (entries).
pub const MAP_SIZE: usize = 1 << 16;

/// The kinds of coverage feature.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum FeatureKind {
    LockOrder,
    Interleaving,
    Handoff,
    /// (site of the write a read observed, site of the read), for the
    /// accesses of sync sites.
    ReadsFrom,
}

impl FeatureKind {
    pub const ALL: [FeatureKind; 4] = [
        FeatureKind::LockOrder,
        FeatureKind::Interleaving,
        FeatureKind::Handoff,
        FeatureKind::ReadsFrom,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FeatureKind::LockOrder => "lock_order",
            FeatureKind::Interleaving => "interleavings",
            FeatureKind::Handoff => "handoffs",
            FeatureKind::ReadsFrom => "reads_from",
        }
    }
}

/// A feature's stable 64-bit identity.
pub fn feature_id(kind: FeatureKind, a: u64, b: u64) -> u64 {
    let mut bytes = [0u8; 17];
    bytes[0] = kind as u8;
    bytes[1..9].copy_from_slice(&a.to_le_bytes());
    bytes[9..].copy_from_slice(&b.to_le_bytes());
    xxhash_rust::xxh3::xxh3_64(&bytes)
}

/// Every feature of a run, by kind.
pub fn features(c: &Coverage) -> Vec<(FeatureKind, u64)> {
    let pairs = c
        .lock_order
        .iter()
        .map(|p| (FeatureKind::LockOrder, p))
        .chain(
            c.interleavings
                .keys()
                .map(|p| (FeatureKind::Interleaving, p)),
        )
        .chain(c.handoffs.iter().map(|p| (FeatureKind::Handoff, p)))
        .chain(c.reads_from.iter().map(|p| (FeatureKind::ReadsFrom, p)));
    pairs
        .map(|(kind, (a, b))| (kind, feature_id(kind, *a, *b)))
        .collect()
}

/// A failing run whose signature no earlier run had.
#[derive(Clone, Debug)]
pub struct NewFailure {
    pub input: ScheduleInput,
    pub report: RunReport,
    pub kind: FailureKind,
    pub signature: Signature,
    /// Executions (all workers) when it was found.
    pub execs: u64,
}

/// What all workers share: the failure signatures seen, the features seen,
/// and the failures waiting to be written.
#[derive(Default)]
pub struct Shared {
    pub signatures: BTreeSet<String>,
    pub features: BTreeSet<(FeatureKind, u64)>,
    pub pending: Vec<NewFailure>,
    /// Runs that stopped for want of a system call the monitor lacks.
    pub unsupported: Option<String>,
}

/// Keeps the last run for the fuzzer's own bookkeeping.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct RunObserver {
    #[serde(skip)]
    pub last: Option<RunReport>,
}

impl libafl_bolts::Named for RunObserver {
    fn name(&self) -> &Cow<'static, str> {
        static NAME: Cow<'static, str> = Cow::Borrowed("run");
        &NAME
    }
}

impl<I, S> libafl::observers::Observer<I, S> for RunObserver {}

/// The observers of a run: the coverage map and the run itself.
pub type Observers = (StdMapObserver<'static, u8, false>, (RunObserver, ()));

/// Runs schedules in one machine, restored from its snapshot each time.
pub struct VmExecutor {
    runner: Runner,
    /// Decision points of a default run (for PCT tails).
    steps: u64,
    shared: Arc<Mutex<Shared>>,
    progress: Arc<super::Progress>,
    worker: usize,
    observers: Observers,
    /// Symbolizes failures' sites for their signatures (caches each
    /// object's debug information).
    sym: crate::report::symbols::Symbolizer,
    watch: Option<super::Watch>,
}

impl VmExecutor {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        cfg: RunConfig,
        source: SharedSource,
        steps: u64,
        shared: Arc<Mutex<Shared>>,
        progress: Arc<super::Progress>,
        worker: usize,
        watch: Option<super::Watch>,
    ) -> Self {
        let map = StdMapObserver::owned("features", vec![0u8; MAP_SIZE]);
        VmExecutor {
            runner: Runner::new(cfg, source),
            steps,
            shared,
            progress,
            worker,
            observers: (map, (RunObserver::default(), ())),
            sym: crate::report::symbols::Symbolizer::new(),
            watch,
        }
    }

    /// The last run's report.
    pub fn last(&self) -> Option<&RunReport> {
        self.observers.1.0.last.as_ref()
    }

    /// The signature of the failing run just made.
    fn signature(&mut self, report: &RunReport) -> Signature {
        let vm = self.runner.vm().expect("a run was just made");
        crate::report::RunFacts::of(vm, report).signature(
            report,
            &mut self.sym,
            crate::report::signature::Naming::default(),
        )
    }

    /// Runs one input and returns its report.
    pub fn run_input(&mut self, input: &ScheduleInput) -> Result<RunReport, libafl::Error> {
        self.runner
            .run(input.strategy(self.steps))
            .map_err(|e| match e {
                // The session ended in the middle of the run: LibAFL's way
                // to say "stop", which the worker's loop takes as its end.
                crate::engine::VmError::Cancelled => libafl::Error::shutting_down(),
                e => libafl::Error::illegal_state(e.to_string()),
            })
    }
}

impl HasObservers for VmExecutor {
    type Observers = Observers;

    fn observers(&self) -> RefIndexable<&Self::Observers, Self::Observers> {
        RefIndexable::from(&self.observers)
    }

    fn observers_mut(&mut self) -> RefIndexable<&mut Self::Observers, Self::Observers> {
        RefIndexable::from(&mut self.observers)
    }
}

impl<EM, S, Z> Executor<EM, ScheduleInput, S, Z> for VmExecutor
where
    S: HasExecutions + HasMetadata,
    Observers: ObserversTuple<ScheduleInput, S>,
{
    fn run_target(
        &mut self,
        _fuzzer: &mut Z,
        state: &mut S,
        _mgr: &mut EM,
        input: &ScheduleInput,
    ) -> Result<ExitKind, libafl::Error> {
        // Once the budget is spent or the user stopped, the remaining
        // mutations of this round end without running.
        if !self.progress.take_exec() {
            return Ok(ExitKind::Ok);
        }
        *state.executions_mut() += 1;
        self.progress.per_worker[self.worker].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let report = self.run_input(input)?;
        self.progress
            .steps
            .fetch_add(report.steps, std::sync::atomic::Ordering::Relaxed);
        self.progress
            .exits
            .fetch_add(report.exits, std::sync::atomic::Ordering::Relaxed);
        let first_step = report.schedule.decisions.first().map_or(0, |d| d.step);
        state.metadata_or_insert_with(RunProfile::default).learn(
            first_step,
            report.steps,
            report.threads as u32,
        );
        let map = &mut self.observers.0;
        let feats = features(&report.coverage);
        for (_, id) in &feats {
            map.set((*id as usize) & (MAP_SIZE - 1), 1);
        }
        // A call the monitor lacks is no bug of the target's.
        let failure = (report.failure.clone())
            .filter(FailureKind::is_program_failure)
            .map(|k| (k, self.signature(&report)));
        let mut exit = ExitKind::Ok;
        {
            let mut shared = self.shared.lock().unwrap();
            let new_switches: Vec<Decision> = report
                .coverage
                .interleavings
                .iter()
                .filter(|((a, b), _)| {
                    let kind = FeatureKind::Interleaving;
                    !shared.features.contains(&(kind, feature_id(kind, *a, *b)))
                })
                .map(|(_, switch)| *switch)
                .collect();
            if !new_switches.is_empty() {
                state.metadata_or_insert_with(Lineages::default).remember(
                    input,
                    &report.schedule.decisions,
                    new_switches,
                );
            }
            shared.features.extend(feats.iter().copied());
            if let Outcome::Unsupported { .. } = report.outcome {
                shared
                    .unsupported
                    .get_or_insert_with(|| report.outcome.summary());
            }
            if let Some((kind, signature)) = failure {
                if shared.signatures.insert(signature.id()) {
                    shared.pending.push(NewFailure {
                        input: input.clone(),
                        report: report.clone(),
                        kind,
                        signature,
                        execs: self
                            .progress
                            .execs
                            .load(std::sync::atomic::Ordering::Relaxed),
                    });
                    exit = ExitKind::Crash;
                }
            }
        }
        if let Some(w) = &self.watch {
            if (w.accept)(&report) && w.hit.load(std::sync::atomic::Ordering::Relaxed) == 0 {
                let n = self
                    .progress
                    .execs
                    .load(std::sync::atomic::Ordering::Relaxed);
                w.hit.store(n.max(1), std::sync::atomic::Ordering::Relaxed);
                self.progress
                    .stop
                    .store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        self.observers.1.0.last = Some(report);
        Ok(exit)
    }
}

/// Potential deadlocks across runs: the lock-order edges of every run so
/// far, and the cycles they close.
#[derive(Default)]
pub struct AccumulatedOrder {
    tracker: crate::observe::locks::OrderGraph,
}

impl AccumulatedOrder {
    /// Adds a run's edges; returns the cycles that exist now.
    pub fn add(&mut self, r: &RunReport) -> Vec<Inversion> {
        for e in &r.lock_edges {
            self.tracker.add(e.clone());
        }
        self.tracker.inversions()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_of_each_kind_are_distinct() {
        let a = feature_id(FeatureKind::LockOrder, 1, 2);
        assert_ne!(a, feature_id(FeatureKind::Handoff, 1, 2));
        assert_ne!(a, feature_id(FeatureKind::LockOrder, 2, 1));
        assert_eq!(a, feature_id(FeatureKind::LockOrder, 1, 2));
    }
}
