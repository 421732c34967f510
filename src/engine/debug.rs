//! The engine's debugging hooks: the run advanced one guest instruction or
//! one breakpoint at a time, with the same kernel, the same strategy and the
//! same order of work as [`Vm::run`], so a debugged run is the run.
//!
//! Nothing here is on the fuzzer's path: `Vm::run` never calls it. The
//! debugger (`crate::gdb`) builds positions, reverse execution and the GDB
//! protocol on these few operations:
//!
//! - [`Vm::debug_restart`]: back to the start of the run (the snapshot a
//!   debugged `Vm` takes at the program's first instruction);
//! - [`Vm::debug_resume`]: run the current thread for one instruction (the
//!   trap flag in the frame the monitor resumes with: a debug exception comes
//!   back through the guest's own IDT door) or until an exit, with `int3`
//!   patched at the breakpoints for that resume only;
//! - reads of threads, registers and memory that change nothing.
//!
//! Between resumes the machine stands *prepared*: the current thread's
//! signals are delivered and its extended state is in the CPU, exactly what
//! the normal loop does before it loads a thread (doing it twice does
//! nothing more), so stopping never changes what happens next.

use std::collections::BTreeSet;

use super::exits::{self, Handled};
use super::{MachineCpu, RunReport, Vm, VmError};
use crate::arch::cpu::{ExtendedState, RFLAGS_TF, UserRegs};
use crate::ids::Tid;
use crate::kernel::Kernel;
use crate::machine::Exit;

/// The debug-exception vector (the trap flag's single step).
const VECTOR_DEBUG: u8 = 1;
/// The breakpoint vector (`int3`).
const VECTOR_BREAKPOINT: u8 = 3;
/// The `int3` instruction.
const INT3: u8 = 0xcc;

/// How far the guest runs in one [`Vm::debug_resume`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pace {
    /// One instruction of the current thread.
    Instruction,
    /// Until the next exit (a system call, a fault, a breakpoint).
    Free,
}

/// What one resume came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The current thread completed one instruction (or the monitor
    /// completed it for the thread: an emulated `rdtsc`, a signal handler
    /// entered instead of a faulting instruction).
    Instruction,
    /// The current thread reached a breakpoint: it stands at the address,
    /// the instruction there not executed.
    Breakpoint(u64),
    /// The thread made a system call: one step was taken and the thread the
    /// strategy chose stands at the start of its next stretch.
    Step,
    /// An exit the monitor served without the thread getting anywhere (a
    /// page filled on demand): resume again.
    Nothing,
    /// The run ended.
    End,
}

impl Vm {
    /// Starts the run again from its beginning and stops before the first
    /// instruction. A `Vm` made for debugging snapshots at the program's
    /// first instruction (`SnapshotAt::Start`), so every restart after the
    /// first is a restore.
    pub fn debug_restart(&mut self) -> Result<(), VmError> {
        assert!(self.can_run(), "a Vm without a snapshot runs once");
        if let Some(regs) = self.start()? {
            self.syscall(regs);
        }
        self.prepare_if_running()
    }

    /// Whether the run can be started again ([`Vm::debug_restart`]).
    pub fn debug_can_restart(&self) -> bool {
        self.can_run()
    }

    fn prepare_if_running(&mut self) -> Result<(), VmError> {
        if self.kernel.outcome().is_none() {
            self.prepare_entry()?;
        }
        Ok(())
    }

    /// Runs the current thread at `pace`, with `int3` at each of
    /// `breakpoints` (for a free run; the caller steps off a breakpoint the
    /// thread stands on first). The breakpoints are in guest memory only
    /// while the guest runs: the kernel, a snapshot and the debugger's reads
    /// never see them.
    ///
    /// A thread never stops in a trampoline (see `code::sites::trampoline`): an
    /// instruction that jumps into one is completed with the trampoline's
    /// own, up to where the program's code goes on or a step.
    pub fn debug_resume(
        &mut self,
        pace: Pace,
        breakpoints: &BTreeSet<u64>,
    ) -> Result<Event, VmError> {
        let mut event = self.resume_once(pace, breakpoints)?;
        while pace == Pace::Instruction && matches!(event, Event::Instruction | Event::Nothing) {
            let rip = self.kernel.threads()[&self.kernel.current()].regs.rip;
            if !self.kernel.mm().vma_at(rip).is_some_and(|v| v.is_jumps()) {
                break;
            }
            event = match self.resume_once(pace, breakpoints)? {
                Event::Nothing => Event::Instruction,
                e => e,
            };
        }
        Ok(event)
    }

    fn resume_once(&mut self, pace: Pace, breakpoints: &BTreeSet<u64>) -> Result<Event, VmError> {
        if self.kernel.outcome().is_some() {
            return Ok(Event::End);
        }
        self.load_current();
        let mut patched: Vec<(u64, u64, u64, u8)> = Vec::new();
        match pace {
            Pace::Instruction => self.machine.trap_after_one_instruction(&self.mem),
            Pace::Free => {
                for &va in breakpoints {
                    // An instruction a jump moved runs in its copy: the
                    // breakpoint goes there (its own bytes are the jump's).
                    let at = self.kernel.mm().moved_copy(va).unwrap_or(va);
                    if let Some(pa) = self.kernel.mm().page_of(&self.mem, at) {
                        let pa = pa + at % crate::arch::layout::PAGE_SIZE;
                        let mut old = [0u8];
                        self.mem.read(pa, &mut old);
                        self.mem.write(pa, &[INT3]);
                        patched.push((va, at, pa, old[0]));
                    }
                }
            }
        }
        self.machine.arm_watchdog(self.timeout, &self.cancel);
        let exit = self.machine.run();
        self.machine.disarm_watchdog();
        for (_, _, pa, old) in patched.iter().rev() {
            self.mem.write(*pa, &[*old]);
        }
        let exit = exit?;
        let stepping = pace == Pace::Instruction;
        match exit {
            Exit::Exception { vector, .. } if vector == VECTOR_DEBUG && stepping => {
                self.kernel.cur().regs = self.regs_without_trap(exit, stepping)?;
                Ok(Event::Instruction)
            }
            Exit::Exception { vector, .. } if vector == VECTOR_BREAKPOINT => {
                let mut regs = self.regs_without_trap(exit, stepping)?;
                let at = regs.rip.wrapping_sub(1);
                let Some(&(va, ..)) = patched.iter().find(|(_, to, ..)| *to == at) else {
                    // The program's own int3 or a tick's: the kernel's.
                    return self.hand_to_kernel(exit, regs, stepping);
                };
                // At a moved instruction, the thread stands at its copy;
                // started at the instruction's own place it is taken there
                // again (see `Kernel::on_exception`).
                regs.rip = va;
                self.kernel.cur().regs = regs;
                Ok(Event::Breakpoint(va))
            }
            Exit::Syscall | Exit::Exception { .. } => {
                let regs = self.regs_without_trap(exit, stepping)?;
                self.hand_to_kernel(exit, regs, stepping)
            }
            Exit::TimedOut => {
                self.handle_exit(exit)?;
                Ok(Event::End)
            }
        }
    }

    /// The user registers of the last exit, without the trap flag the
    /// debugger set (the program must never see it).
    fn regs_without_trap(&self, exit: Exit, stepping: bool) -> Result<UserRegs, VmError> {
        let mut regs = self.machine.user_regs()?;
        if !stepping {
            return Ok(regs);
        }
        regs.rflags &= !RFLAGS_TF;
        if exit == Exit::Syscall {
            // `syscall` saved the flags in R11 too.
            regs.r11 &= !RFLAGS_TF;
        }
        Ok(regs)
    }

    /// What the normal loop does with an exit, on registers the debugger
    /// cleaned.
    fn hand_to_kernel(
        &mut self,
        exit: Exit,
        regs: UserRegs,
        stepping: bool,
    ) -> Result<Event, VmError> {
        self.machine.progress();
        let step = self.kernel.step();
        let cpu = &mut MachineCpu(&mut self.machine);
        match exits::handle(exit, regs, cpu, &mut self.kernel, &mut self.sched) {
            Handled::Syscall(regs) => self.on_syscall_exit(regs)?,
            Handled::Done => {}
            Handled::Cancelled => unreachable!("the watchdog's exits are the caller's"),
        }
        if self.kernel.outcome().is_some() {
            return Ok(Event::End);
        }
        self.prepare_if_running()?;
        if self.kernel.outcome().is_some() {
            return Ok(Event::End);
        }
        if self.kernel.step() != step {
            return Ok(Event::Step);
        }
        let moved = self.kernel.threads()[&self.kernel.current()].regs.rip != regs.rip;
        Ok(if stepping && moved {
            Event::Instruction
        } else {
            Event::Nothing
        })
    }

    /// Runs on to the end without the debugger, as [`Vm::run`] would have.
    pub fn debug_finish(&mut self) -> Result<RunReport, VmError> {
        let start = std::time::Instant::now();
        let (exits0, inval0) = (
            self.machine.exits,
            (self.machine.invalidations, self.machine.root_switches),
        );
        self.machine.arm_watchdog(self.timeout, &self.cancel);
        let r = self.run_loop(None);
        self.machine.disarm_watchdog();
        r?;
        Ok(self.report(start, exits0, inval0, false))
    }

    /// The report of a run the debugger took to its end.
    pub fn debug_report(&self) -> Option<RunReport> {
        self.kernel.outcome()?;
        Some(self.report(std::time::Instant::now(), 0, (0, 0), false))
    }

    /// The kernel, for reading threads and memory.
    pub fn debug_kernel(&self) -> &Kernel {
        &self.kernel
    }

    /// A thread's extended (x87/SSE/AVX) state: the CPU's for the thread
    /// whose state is loaded, the saved one for the others.
    pub fn debug_extended_state(&self, tid: Tid) -> Result<ExtendedState, VmError> {
        if self.fpu_owner == Some(tid) {
            return Ok(self.machine.extended_state()?);
        }
        Ok(self
            .kernel
            .threads()
            .get(&tid)
            .and_then(|t| t.fpu.clone())
            .unwrap_or_else(ExtendedState::initial))
    }

    /// Reads guest memory as the program would, changing nothing.
    pub fn debug_read(&self, va: u64, buf: &mut [u8]) -> bool {
        self.kernel.mm().peek(&self.mem, va, buf).is_ok()
    }
}
