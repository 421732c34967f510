//! What the session makes of each run, as LibAFL feedbacks reading the run
//! observer: the features all workers have seen, what mutators learn from
//! runs, and the objective, a failure whose signature is new.
//!
//! LibAFL asks the objective about every run, and first; the corpus
//! feedback (the coverage map's, per worker) only about runs that are no
//! finding. Notes that every run must leave (its features, its shape, the
//! benchmark's watch) are therefore or-ed into the objective: they never
//! say yes, so the objective's verdict stays the signature's.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use libafl::HasMetadata;
use libafl::executors::ExitKind;
use libafl::feedbacks::{Feedback, StateInitializer};
use libafl_bolts::Named;
use libafl_bolts::tuples::{Handle, Handled, MatchName, MatchNameRef};

use super::input::ScheduleInput;
use super::mutators::{Lineages, RunProfile};
use super::observers::{FeatureKind, Run, RunObserver, feature_id};
use super::{Progress, Watch};
use crate::observe::failure::FailureKind;
use crate::observe::outcome::Outcome;
use crate::report::signature::Signature;
use crate::sched::{Decision, Schedule};
use serde::{Deserialize, Serialize};

/// A failing run whose signature no earlier run had: what recording it
/// again needs (it travels between worker processes).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NewFailure {
    pub input: ScheduleInput,
    /// The run's decisions, and its trace hash (its recording must have
    /// the same).
    pub schedule: Schedule,
    pub trace_hash: String,
    pub kind: FailureKind,
    pub signature: Signature,
    /// Executions (all workers) when it was found.
    pub execs: u64,
}

/// The features every worker's runs reached.
#[derive(Default)]
pub struct FeaturesSeen {
    seen: BTreeSet<(FeatureKind, u64)>,
    /// In a worker process: the features its own runs reached first, not
    /// yet told to the session (`None` where every worker shares this).
    untold: Option<Vec<(FeatureKind, u64)>>,
}

impl FeaturesSeen {
    /// A worker process's view, which keeps what it must tell the others.
    pub fn telling() -> Self {
        FeaturesSeen {
            seen: BTreeSet::new(),
            untold: Some(Vec::new()),
        }
    }

    /// Adds the features of a run made here.
    pub fn add(&mut self, features: &[(FeatureKind, u64)]) {
        for f in features {
            if self.seen.insert(*f) {
                if let Some(untold) = &mut self.untold {
                    untold.push(*f);
                }
            }
        }
    }

    /// Adds features another worker reached.
    pub fn merge(&mut self, features: &[(FeatureKind, u64)]) {
        self.seen.extend(features.iter().copied());
    }

    /// The features reached here since the last call.
    pub fn take_untold(&mut self) -> Vec<(FeatureKind, u64)> {
        self.untold.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// How many features of `kind` were seen.
    pub fn count(&self, kind: FeatureKind) -> usize {
        self.seen.iter().filter(|(k, _)| *k == kind).count()
    }

    /// How many features of each kind, in [`FeatureKind::ALL`]'s order.
    pub fn counts(&self) -> [usize; FeatureKind::ALL.len()] {
        FeatureKind::ALL.map(|k| self.count(k))
    }
}

/// The failures of every worker's runs: the signatures seen, the new
/// failures waiting to be written, and runs no failure of the program's
/// stopped.
#[derive(Default)]
pub struct FailuresSeen {
    pub signatures: BTreeSet<String>,
    pub pending: Vec<NewFailure>,
    /// Runs that stopped for want of a system call the monitor lacks.
    pub unsupported: Option<String>,
}

/// What all workers' feedbacks share with each other and the main thread.
#[derive(Clone, Default)]
pub struct Shared {
    pub features: Arc<Mutex<FeaturesSeen>>,
    pub failures: Arc<Mutex<FailuresSeen>>,
}

/// The run the executor reported, if it made one.
fn run_of<'a, OT: MatchName>(observers: &'a OT, handle: &Handle<RunObserver>) -> Option<&'a Run> {
    observers.get(handle)?.run.as_ref()
}

/// A feedback's name, and its state (none: what it keeps is shared or in
/// the state's metadata, made on first use).
macro_rules! named_feedback {
    ($ty:ty, $name:literal) => {
        impl Named for $ty {
            fn name(&self) -> &Cow<'static, str> {
                static NAME: Cow<'static, str> = Cow::Borrowed($name);
                &NAME
            }
        }

        impl<S> StateInitializer<S> for $ty {}
    };
}

/// Learns the shape of every run (where schedules start to matter, how
/// long runs are, which threads there are) for the mutators' picks.
pub struct LearnRunProfile {
    run: Handle<RunObserver>,
}

impl LearnRunProfile {
    pub fn new(run: &RunObserver) -> Self {
        LearnRunProfile { run: run.handle() }
    }
}

named_feedback!(LearnRunProfile, "run_profile");

impl<EM, I, OT: MatchName, S: HasMetadata> Feedback<EM, I, OT, S> for LearnRunProfile {
    fn is_interesting(
        &mut self,
        state: &mut S,
        _mgr: &mut EM,
        _input: &I,
        observers: &OT,
        _exit_kind: &ExitKind,
    ) -> Result<bool, libafl::Error> {
        if let Some(Run { report, .. }) = run_of(observers, &self.run) {
            let first_step = report.schedule.decisions.first().map_or(0, |d| d.step);
            state.metadata_or_insert_with(RunProfile::default).learn(
                first_step,
                report.steps.0,
                report.threads as u32,
            );
        }
        Ok(false)
    }
}

/// The session's coverage: every run's features join those all workers
/// have seen, and the switches that made interleavings new to the session
/// are remembered with the run ([`Lineages`]). Which runs join a worker's
/// corpus is the coverage map's feedback to say.
pub struct SessionFeatures {
    run: Handle<RunObserver>,
    seen: Arc<Mutex<FeaturesSeen>>,
}

impl SessionFeatures {
    pub fn new(run: &RunObserver, seen: Arc<Mutex<FeaturesSeen>>) -> Self {
        SessionFeatures {
            run: run.handle(),
            seen,
        }
    }
}

named_feedback!(SessionFeatures, "session_features");

impl<EM, OT: MatchName, S: HasMetadata> Feedback<EM, ScheduleInput, OT, S> for SessionFeatures {
    fn is_interesting(
        &mut self,
        state: &mut S,
        _mgr: &mut EM,
        input: &ScheduleInput,
        observers: &OT,
        _exit_kind: &ExitKind,
    ) -> Result<bool, libafl::Error> {
        let Some(run) = run_of(observers, &self.run) else {
            return Ok(false);
        };
        let mut seen = self.seen.lock().unwrap();
        let kind = FeatureKind::Interleaving;
        let new_switches: Vec<Decision> = run
            .report
            .coverage
            .interleavings
            .iter()
            .filter(|((a, b), _)| !seen.seen.contains(&(kind, feature_id(kind, *a, *b))))
            .map(|(_, switch)| *switch)
            .collect();
        if !new_switches.is_empty() {
            state.metadata_or_insert_with(Lineages::default).remember(
                input,
                &run.report.schedule.decisions,
                new_switches,
            );
        }
        seen.add(&run.features);
        Ok(false)
    }
}

/// The objective: a failure of the program's whose signature no run of the
/// session (nor of the sessions before a `--resume`) had. It waits in
/// [`FailuresSeen::pending`] for the main thread to record it.
pub struct NewSignature {
    run: Handle<RunObserver>,
    failures: Arc<Mutex<FailuresSeen>>,
    progress: Arc<Progress>,
}

impl NewSignature {
    pub fn new(
        run: &RunObserver,
        failures: Arc<Mutex<FailuresSeen>>,
        progress: Arc<Progress>,
    ) -> Self {
        NewSignature {
            run: run.handle(),
            failures,
            progress,
        }
    }
}

named_feedback!(NewSignature, "new_signature");

impl<EM, OT: MatchName, S> Feedback<EM, ScheduleInput, OT, S> for NewSignature {
    fn is_interesting(
        &mut self,
        _state: &mut S,
        _mgr: &mut EM,
        input: &ScheduleInput,
        observers: &OT,
        _exit_kind: &ExitKind,
    ) -> Result<bool, libafl::Error> {
        let Some(run) = run_of(observers, &self.run) else {
            return Ok(false);
        };
        let mut failures = self.failures.lock().unwrap();
        if let Outcome::Unsupported { .. } = run.report.outcome {
            failures
                .unsupported
                .get_or_insert_with(|| run.report.outcome.summary());
        }
        let Some((kind, signature)) = &run.failure else {
            return Ok(false);
        };
        if !failures.signatures.insert(signature.id()) {
            return Ok(false);
        }
        failures.pending.push(NewFailure {
            input: input.clone(),
            schedule: run.report.schedule.clone(),
            trace_hash: run.report.trace_hash.clone(),
            kind: kind.clone(),
            signature: signature.clone(),
            execs: self.progress.execs.load(Ordering::Relaxed),
        });
        Ok(true)
    }
}

/// Ends the session at the first run a benchmark's watch accepts, and
/// remembers that run's execution.
pub struct Watched {
    run: Handle<RunObserver>,
    watch: Option<Watch>,
    progress: Arc<Progress>,
}

impl Watched {
    pub fn new(run: &RunObserver, watch: Option<Watch>, progress: Arc<Progress>) -> Self {
        Watched {
            run: run.handle(),
            watch,
            progress,
        }
    }
}

named_feedback!(Watched, "watch");

impl<EM, I, OT: MatchName, S> Feedback<EM, I, OT, S> for Watched {
    fn is_interesting(
        &mut self,
        _state: &mut S,
        _mgr: &mut EM,
        _input: &I,
        observers: &OT,
        _exit_kind: &ExitKind,
    ) -> Result<bool, libafl::Error> {
        let (Some(w), Some(run)) = (&self.watch, run_of(observers, &self.run)) else {
            return Ok(false);
        };
        if (w.accept)(&run.report) && w.hit.load(Ordering::Relaxed) == 0 {
            let n = self.progress.execs.load(Ordering::Relaxed);
            w.hit.store(n.max(1), Ordering::Relaxed);
            self.progress.stop.store(true, Ordering::Relaxed);
        }
        Ok(false)
    }
}
