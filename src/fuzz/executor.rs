//! The executor: runs a schedule in a machine restored from its snapshot
//! and reports the run to its observers. What the run means (new features,
//! a new failure) is for the feedbacks to judge.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use libafl::executors::{Executor, ExitKind, HasObservers};
use libafl::observers::{MapObserver, ObserversTuple};
use libafl::state::HasExecutions;
use libafl_bolts::tuples::RefIndexable;

use super::input::ScheduleInput;
use super::observers::{MAP_SIZE, Observers, Run, features};
use crate::engine::{RunConfig, RunReport};
use crate::explore::Runner;
use crate::kernel::vfs::SharedSource;
use crate::observe::failure::FailureKind;
use crate::report::signature::Signature;

/// Runs schedules in one machine, restored from its snapshot each time.
pub struct VmExecutor {
    runner: Runner,
    /// Decision points of a default run (for PCT tails).
    steps: u64,
    progress: Arc<super::Progress>,
    worker: usize,
    observers: Observers,
    /// Symbolizes failures' sites for their signatures (caches each
    /// object's debug information).
    sym: crate::report::symbols::Symbolizer,
    /// The run every input's schedule starts as (a fork's prefix).
    pin: Option<super::Pin>,
}

impl VmExecutor {
    pub fn new(
        cfg: RunConfig,
        source: SharedSource,
        steps: u64,
        progress: Arc<super::Progress>,
        worker: usize,
    ) -> Self {
        VmExecutor {
            runner: Runner::new(cfg, source),
            steps,
            progress,
            worker,
            observers: super::observers::observers(),
            sym: crate::report::symbols::Symbolizer::new(),
            pin: None,
        }
    }

    /// Every input's run starts as `pin` says, whatever its decisions up
    /// to the pinned step.
    pub fn pinned(mut self, pin: Option<super::Pin>) -> Self {
        self.pin = pin;
        self
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
        let own = input.strategy(self.steps);
        let strategy: Box<dyn crate::sched::Strategy> = match &self.pin {
            Some(p) => Box::new(crate::sched::Prefixed::until(&p.decisions, p.until, own)),
            None => own,
        };
        self.runner.run(strategy).map_err(|e| match e {
            // The session ended in the middle of the run: LibAFL's way
            // to say "stop", which the worker's loop takes as its end.
            crate::engine::VmError::Cancelled => libafl::Error::shutting_down(),
            e => libafl::Error::illegal_state(e.to_string()),
        })
    }

    /// Counts a run's steps and machine exits.
    fn count(&self, report: &RunReport) {
        let p = &self.progress;
        p.steps.fetch_add(report.steps.0, Ordering::Relaxed);
        p.exits.fetch_add(report.exits, Ordering::Relaxed);
    }

    /// Puts a run into the observers: its features into the map, the
    /// run with its failure's signature into the run observer.
    fn report(&mut self, report: RunReport) {
        let features = features(&report.coverage);
        for (_, id) in &features {
            self.observers.0.set((*id as usize) & (MAP_SIZE - 1), 1);
        }
        // A call the monitor lacks is no bug of the target's.
        let failure = (report.failure.clone())
            .filter(FailureKind::is_program_failure)
            .map(|k| (k, self.signature(&report)));
        self.observers.1.0.run = Some(Run {
            report,
            features,
            failure,
        });
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
    S: HasExecutions,
    Observers: ObserversTuple<ScheduleInput, S>,
{
    /// A failing run is no crash of the executor: its failure is in the run
    /// observer, for the objective, and the exit kind is always `Ok`.
    fn run_target(
        &mut self,
        _fuzzer: &mut Z,
        state: &mut S,
        _mgr: &mut EM,
        input: &ScheduleInput,
    ) -> Result<ExitKind, libafl::Error> {
        // Once the budget is spent or the user stopped, the remaining
        // mutations of this round end without running (and the observers
        // stay empty).
        if !self.progress.take_exec() {
            return Ok(ExitKind::Ok);
        }
        *state.executions_mut() += 1;
        self.progress.per_worker()[self.worker].fetch_add(1, Ordering::Relaxed);
        let report = self.run_input(input)?;
        self.count(&report);
        self.report(report);
        Ok(ExitKind::Ok)
    }
}
