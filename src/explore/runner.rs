//! One machine running schedule after schedule of one program.

use crate::kernel::vfs::SharedSource;
use crate::sched::Strategy;
use crate::vm::{RunConfig, RunReport, Vm, VmError};

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

/// The default run every search starts with: it checks the program runs
/// at all, and PCT spreads its change points over its decision points.
/// Returns the report and the runner, whose machine the next run restores.
pub fn probe(cfg: &RunConfig, source: SharedSource) -> Result<(RunReport, Runner), VmError> {
    let mut quiet = cfg.clone();
    quiet.stream_output = false;
    let mut runner = Runner::new(quiet, source);
    let report = runner.run(Box::new(crate::sched::RunUntilBlocked))?;
    Ok((report, runner))
}
