//! A visit to a paused run (`kernel::visit`): the engine runs the
//! visitor's processes, and only them, until its first process ends.
//! Nothing here is on the fuzzer's path.

use super::{Vm, VmError};
use crate::kernel::visit::{VisitEnd, Visitor};
use crate::sched::RunUntilBlocked;

impl Vm {
    /// Starts `visitor` in the run where it stands (a debugged `Vm`
    /// stopped at a step, or at the end) and runs it to its end. The run's
    /// threads stay as they were; the machine is the visit's afterwards
    /// (drop it, the run cannot go on from a visit).
    pub fn visit(&mut self, visitor: Visitor) -> Result<VisitEnd, VmError> {
        let first = self.kernel.start_visit(visitor)?;
        // The recorded schedule is the run's: the visitor's threads run each
        // until it blocks.
        self.sched.strategy = Box::new(RunUntilBlocked);
        self.kernel.switch_to(first);
        let end = loop {
            if let Some(end) = self.kernel.visit_end() {
                break end;
            }
            self.enter()?;
            if let Some(end) = self.kernel.visit_end() {
                break end;
            }
            // No watchdog: a visitor waits for its user as long as it likes.
            let exit = self.machine.run()?;
            self.handle_exit(exit)?;
        };
        self.kernel.end_visit();
        Ok(end)
    }
}
