//! One machine running schedule after schedule of one program.

use crate::engine::{RunConfig, RunReport, Vm, VmError};
use crate::kernel::vfs::SharedSource;
use crate::observe::outcome::Outcome;
use crate::sched::Strategy;

/// Runs schedules of one program: the first from scratch, every later one
/// from the machine's snapshot (or in a new machine, when the program
/// never reached its snapshot point).
pub struct Runner {
    cfg: RunConfig,
    source: SharedSource,
    vm: Option<Vm>,
}

impl Runner {
    pub fn new(cfg: RunConfig, source: SharedSource) -> Self {
        Runner {
            cfg,
            source,
            vm: None,
        }
    }

    /// Runs one schedule, chosen by `strategy`.
    pub fn run(&mut self, strategy: Box<dyn Strategy>) -> Result<RunReport, VmError> {
        if !self.vm.as_ref().is_some_and(Vm::can_run) {
            self.vm = Some(Vm::new(&self.cfg, self.source.clone())?);
        }
        let vm = self.vm.as_mut().expect("just made");
        vm.set_strategy(strategy);
        vm.run()
    }

    /// The machine of the last run (for what it left: mappings, stacks).
    pub fn vm(&self) -> Option<&Vm> {
        self.vm.as_ref()
    }

    /// Whether the next run restores a snapshot instead of loading the
    /// program again.
    pub fn is_warm(&self) -> bool {
        self.vm.as_ref().is_some_and(Vm::can_run)
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &RunConfig {
        &self.cfg
    }
}

/// What a search learns from its first runs.
pub struct Probe {
    /// The default run: it checks the program runs at all.
    pub report: RunReport,
    /// The machine, which the next run restores.
    pub runner: Runner,
    /// The decision points PCT spreads its change points over: the default
    /// run's, or, when the default run ended with threads that had not
    /// finished (the process exited before another thread ran its body),
    /// the most of a few random walks', so that change points can fall in
    /// those threads' work too.
    pub decision_points: u64,
}

/// Random walks that estimate a run's decision points when the default run
/// does not see every thread's work.
const ESTIMATE_WALKS: u64 = 4;

/// The default run every search starts with, and the estimate of a run's
/// decision points it gives.
pub fn probe(cfg: &RunConfig, source: SharedSource) -> Result<Probe, VmError> {
    let mut quiet = cfg.clone();
    quiet.stream_output = false;
    let mut runner = Runner::new(quiet, source);
    let report = runner.run(crate::sched::default_tail())?;
    let mut decision_points = report.decision_points;
    let exited_early = matches!(report.outcome, Outcome::Exited { .. }) && report.live_at_end > 1;
    if exited_early {
        for i in 0..ESTIMATE_WALKS {
            let walk = crate::sched::RandomWalk::new(crate::sched::splitmix64(i));
            let r = runner.run(Box::new(walk))?;
            decision_points = decision_points.max(r.decision_points);
        }
    }
    Ok(Probe {
        report,
        runner,
        decision_points: decision_points.max(1),
    })
}
