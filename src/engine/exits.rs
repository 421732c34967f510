//! One exit from the guest, handled: a function of the exit, the thread's
//! registers, the kernel and the scheduler. The vCPU is seen only through
//! [`Cpu`], so tests hand it made-up exits without KVM.
//!
//! An exit first serves a page the site path needs (a fill, no step), then
//! takes the steps the guest buffered in the hint ring since the last exit,
//! then the exit's own: a system call (left to the engine, whose snapshot
//! may belong before it), an exception (a sync site's breakpoint is a
//! step; anything else is the kernel's signal), or the watchdog.

use std::collections::BTreeMap;

use super::ring::{self, Buffered};
use crate::arch::cpu::UserRegs;
use crate::kernel::{FpuAccess, Kernel};
use crate::machine::Exit;
use crate::observe::outcome::Outcome;
use crate::sched::{Decision, RunUntilBlocked, SchedView, Strategy, TICKS_PER_SLICE};

/// What handling an exit needs of the vCPU besides the thread's extended
/// state.
pub trait Cpu: FpuAccess {
    /// The guest got somewhere: the watchdog starts over.
    fn progress(&mut self);
    /// Whether the run was cancelled from outside (a deadline, Ctrl-C).
    fn cancelled(&self) -> bool;
    /// Where the vCPU stands.
    fn rip(&self) -> u64;
}

/// What the engine records of the strategy's choices (part of a snapshot
/// too).
#[derive(Clone, Debug, Default)]
pub struct Choices {
    /// Decisions that differed from the default policy's.
    pub decisions: Vec<Decision>,
    /// Steps at which the strategy had a choice.
    pub decision_points: u64,
    /// Interleavings seen: (site a thread was switched away from, site the
    /// next thread resumed from), each with the switch that first made it.
    pub interleavings: BTreeMap<(u64, u64), Decision>,
    /// Sync sites' steps the dispatcher took without an exit.
    pub buffered_sites: u64,
}

/// Who runs next: the strategy, and what the engine records of it.
pub struct Scheduler {
    pub strategy: Box<dyn Strategy>,
    pub choices: Choices,
}

impl Scheduler {
    /// Lets the strategy choose the next thread after a step, jumping
    /// virtual time forward when every thread sleeps. With one runnable
    /// thread there is no choice and the strategy is not asked, so every
    /// strategy agrees on a run's single-threaded parts.
    pub fn schedule(&mut self, k: &mut Kernel) {
        let mut runnable = k.runnable();
        while runnable.is_empty() {
            if !k.idle() {
                return;
            }
            runnable = k.runnable();
        }
        let cur = k.current();
        let t = &k.threads()[&cur];
        // A tick in the middle of a computation is no decision: the thread
        // computes on until its slice's worth of ticks is used up.
        let computing = t.ticked && t.is_runnable();
        let slice_computed = computing && t.ticks_in_a_row % TICKS_PER_SLICE == 0;
        let next = if runnable.len() == 1 {
            runnable[0]
        } else if computing && !slice_computed {
            cur
        } else {
            let view = SchedView {
                step: k.step(),
                current: cur,
                current_runnable: t.is_runnable(),
                yielded: t.yielded,
                slice_computed,
                runnable: &runnable,
                objects: k.observer().objects(),
            };
            self.choices.decision_points += 1;
            let next = self.strategy.pick(&view);
            assert!(
                runnable.contains(&next),
                "strategy chose a thread that cannot run"
            );
            if next != RunUntilBlocked::choose(&view) {
                self.choices.decisions.push(Decision {
                    step: k.step(),
                    thread: next.0,
                });
            }
            next
        };
        if next != cur {
            let from = k.observer().site(cur);
            let to = k.observer().site(next);
            let switch = Decision {
                step: k.step(),
                thread: next.0,
            };
            self.choices
                .interleavings
                .entry((from, to))
                .or_insert(switch);
        }
        k.switch_to(next);
    }
}

/// What is left to do once an exit is handled.
#[derive(Debug, PartialEq, Eq)]
pub enum Handled {
    /// Nothing: the run goes on (or has ended).
    Done,
    /// A system call, its step still to take ([`syscall`]): the engine's
    /// snapshot may belong before it.
    Syscall(UserRegs),
    /// The run was cancelled from outside.
    Cancelled,
}

/// Handles `exit`, the current thread's registers being `regs` (any for
/// the watchdog's exit).
pub fn handle(
    exit: Exit,
    regs: UserRegs,
    cpu: &mut dyn Cpu,
    k: &mut Kernel,
    s: &mut Scheduler,
) -> Handled {
    if let Exit::Exception {
        vector: 14,
        error_code,
        fault_addr,
    } = exit
    {
        if k.site_path_page_fill(&regs, error_code, fault_addr) {
            return Handled::Done;
        }
    }
    drain_ring(k, s);
    if k.observer().ended() {
        return Handled::Done;
    }
    match exit {
        Exit::Syscall => {
            cpu.progress();
            return Handled::Syscall(regs);
        }
        Exit::Exception {
            vector,
            error_code,
            fault_addr,
        } => exception(regs, vector, error_code, fault_addr, cpu, k, s),
        Exit::TimedOut if cpu.cancelled() => return Handled::Cancelled,
        Exit::TimedOut => {
            let thread = k.current().0;
            // Interrupted before it re-entered user mode, the vCPU stands
            // at the entry stub: report the thread's own RIP.
            let rip = match cpu.rip() {
                r if r >= crate::arch::layout::KERNEL_VIRT_BASE => k.cur().regs.rip,
                r => r,
            };
            k.end(Outcome::TimedOut { thread, rip });
        }
    }
    Handled::Done
}

/// One step of a system call: the kernel handles the call, the strategy
/// picks who runs.
pub fn syscall(regs: UserRegs, cpu: &mut dyn Cpu, k: &mut Kernel, s: &mut Scheduler) {
    k.on_syscall(regs, cpu);
    if !k.observer().ended() {
        s.schedule(k);
    }
}

/// An exception: the kernel's, and a step (then a decision) when it was a
/// sync site's breakpoint.
fn exception(
    regs: UserRegs,
    vector: u8,
    error_code: u64,
    fault_addr: u64,
    cpu: &mut dyn Cpu,
    k: &mut Kernel,
    s: &mut Scheduler,
) {
    let stepped = k.on_exception(regs, vector, error_code, fault_addr, cpu);
    if stepped {
        cpu.progress();
        if !k.observer().ended() {
            s.schedule(k);
        }
    }
}

/// Takes the steps the shim and the site dispatcher buffered in the hint
/// ring since the last exit, each followed by its scheduling decision
/// (which, by the strategy's horizon, keeps the current thread).
pub fn drain_ring(k: &mut Kernel, s: &mut Scheduler) {
    for entry in ring::take(k) {
        let tid = k.current();
        let taken = match &entry {
            Buffered::Hint([op, object, site, value]) => {
                k.hint_step(*op, *object, *site, *value);
                None
            }
            Buffered::Site(site) => {
                s.choices.buffered_sites += 1;
                k.buffered_site_step(site)
            }
        };
        if k.observer().ended() {
            return;
        }
        s.schedule(k);
        assert_eq!(
            k.current(),
            tid,
            "the strategy switched threads before the horizon it published"
        );
        // As when the thread is entered again after a breakpoint.
        if let (Buffered::Site(b), Some((site, reported))) = (&entry, taken) {
            k.buffered_site_done(b, &site, &reported);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::arch::abi::{self, HintOp};
    use crate::arch::cpu::ExtendedState;
    use crate::kernel::KernelConfig;
    use crate::kernel::vfs::FileSource;
    use crate::memory::PhysMemory;

    /// The vCPU, made up: what the watchdog was told and where it stands.
    struct FakeCpu {
        fpu: ExtendedState,
        progressed: u32,
        cancelled: bool,
        rip: u64,
    }

    impl FpuAccess for FakeCpu {
        fn save(&mut self) -> ExtendedState {
            self.fpu.clone()
        }
        fn load(&mut self, s: &ExtendedState) {
            self.fpu = s.clone();
        }
    }

    impl Cpu for FakeCpu {
        fn progress(&mut self) {
            self.progressed += 1;
        }
        fn cancelled(&self) -> bool {
            self.cancelled
        }
        fn rip(&self) -> u64 {
            self.rip
        }
    }

    /// A process with nothing loaded, its scheduler, and a vCPU.
    fn bench() -> (Kernel, Scheduler, FakeCpu) {
        let mem = Arc::new(PhysMemory::new(64 << 20).expect("64 MiB of host memory"));
        let k = Kernel::process(
            mem,
            KernelConfig::new("/prog", &[]),
            FileSource::recorded(Default::default()),
        )
        .expect("a process");
        let s = Scheduler {
            strategy: crate::sched::default_tail(),
            choices: Choices::default(),
        };
        let cpu = FakeCpu {
            fpu: ExtendedState::initial(),
            progressed: 0,
            cancelled: false,
            rip: 0x40_1000,
        };
        (k, s, cpu)
    }

    /// The registers of a thread standing at `rip`.
    fn at(rip: u64) -> UserRegs {
        UserRegs {
            rip,
            rsp: 0x7ff0_0000,
            ..UserRegs::default()
        }
    }

    /// Makes system call `nr` on the current thread; its result.
    fn call(k: &mut Kernel, cpu: &mut FakeCpu, nr: i64, args: [u64; 6]) -> i64 {
        k.on_syscall(syscall_regs(nr, args), cpu);
        k.cur().regs.rax as i64
    }

    /// The registers of a thread making system call `nr` with `args`.
    fn syscall_regs(nr: i64, args: [u64; 6]) -> UserRegs {
        let mut regs = at(0x40_1000);
        regs.rax = nr as u64;
        (regs.rdi, regs.rsi, regs.rdx, regs.r10, regs.r8, regs.r9) =
            (args[0], args[1], args[2], args[3], args[4], args[5]);
        regs
    }

    fn exception(vector: u8, error_code: u64, fault_addr: u64) -> Exit {
        Exit::Exception {
            vector,
            error_code,
            fault_addr,
        }
    }

    /// The signal a run crashed with.
    fn crashed_with(k: &Kernel) -> String {
        match k.outcome() {
            Some(Outcome::Crashed { signal, .. }) => signal.clone(),
            other => panic!("not a crash: {other:?}"),
        }
    }

    #[test]
    fn a_user_page_fault_nothing_is_mapped_at_is_the_programs_sigsegv() {
        let (mut k, mut s, mut cpu) = bench();
        let e = exception(14, 0b100, 0x7000_0000);
        assert_eq!(
            handle(e, at(0x40_1000), &mut cpu, &mut k, &mut s),
            Handled::Done
        );
        assert_eq!(crashed_with(&k), "SIGSEGV");
    }

    #[test]
    fn a_divide_error_is_sigfpe_and_an_invalid_opcode_sigill() {
        for (vector, signal) in [(0, "SIGFPE"), (6, "SIGILL")] {
            let (mut k, mut s, mut cpu) = bench();
            let e = exception(vector, 0, 0);
            assert_eq!(
                handle(e, at(0x40_1000), &mut cpu, &mut k, &mut s),
                Handled::Done
            );
            assert_eq!(crashed_with(&k), signal, "vector {vector}");
        }
    }

    #[test]
    fn a_breakpoint_at_no_sync_site_is_the_programs_sigtrap_and_no_step() {
        let (mut k, mut s, mut cpu) = bench();
        let step = k.step();
        // `int3` leaves RIP past itself.
        assert_eq!(
            handle(exception(3, 0, 0), at(0x40_1001), &mut cpu, &mut k, &mut s),
            Handled::Done
        );
        assert_eq!(crashed_with(&k), "SIGTRAP");
        assert_eq!(k.step(), step);
        assert_eq!(cpu.progressed, 0, "no step: the watchdog goes on");
    }

    #[test]
    fn the_watchdog_ends_the_run_where_the_thread_stands() {
        let (mut k, mut s, mut cpu) = bench();
        cpu.rip = 0x40_2000;
        assert_eq!(
            handle(
                Exit::TimedOut,
                UserRegs::default(),
                &mut cpu,
                &mut k,
                &mut s
            ),
            Handled::Done
        );
        assert!(
            matches!(k.outcome(), Some(Outcome::TimedOut { rip: 0x40_2000, .. })),
            "{:?}",
            k.outcome()
        );
        // Stopped in the entry stub, on its way back to the thread: the
        // thread's own RIP.
        let (mut k, mut s, mut cpu) = bench();
        k.cur().regs.rip = 0x40_3000;
        cpu.rip = crate::arch::layout::KERNEL_VIRT_BASE + 0x100;
        handle(
            Exit::TimedOut,
            UserRegs::default(),
            &mut cpu,
            &mut k,
            &mut s,
        );
        assert!(
            matches!(k.outcome(), Some(Outcome::TimedOut { rip: 0x40_3000, .. })),
            "{:?}",
            k.outcome()
        );
    }

    #[test]
    fn a_cancelled_run_stops_without_an_outcome() {
        let (mut k, mut s, mut cpu) = bench();
        cpu.cancelled = true;
        let r = handle(
            Exit::TimedOut,
            UserRegs::default(),
            &mut cpu,
            &mut k,
            &mut s,
        );
        assert_eq!(r, Handled::Cancelled);
        assert!(k.outcome().is_none());
    }

    #[test]
    fn a_system_call_is_left_to_the_engine_after_the_watchdog_hears_of_it() {
        let (mut k, mut s, mut cpu) = bench();
        let step = k.step();
        let regs = syscall_regs(libc::SYS_getpid, [0; 6]);
        assert_eq!(
            handle(Exit::Syscall, regs, &mut cpu, &mut k, &mut s),
            Handled::Syscall(regs)
        );
        assert_eq!((k.step(), cpu.progressed), (step, 1));
        syscall(regs, &mut cpu, &mut k, &mut s);
        assert_eq!(k.step(), step + 1);
        assert_eq!(k.cur().regs.rax, 1, "the first process's pid");
    }

    /// Anonymous memory of the current process, filled on demand.
    fn lazy_page(k: &mut Kernel, cpu: &mut FakeCpu) -> u64 {
        let flags = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64;
        let rw = (libc::PROT_READ | libc::PROT_WRITE) as u64;
        let page = call(k, cpu, libc::SYS_mmap, [0, 4096, rw, flags, u64::MAX, 0]);
        assert!(page > 0, "mmap: {page}");
        page as u64
    }

    /// Buffers marker hints named `names` in the hint ring.
    fn buffer_markers(k: &mut Kernel, names: &[u64]) {
        let ring = |w: u64| abi::RING_VA + w * 8;
        let tail = k.read_u64(ring(abi::RING_TAIL)).unwrap();
        for (i, name) in names.iter().enumerate() {
            let e = ring(abi::RING_HEADER_WORDS + (tail + i as u64) * abi::RING_ENTRY_WORDS);
            k.write_u64(e, HintOp::Marker as u64).unwrap();
            k.write_u64(e + 8, *name).unwrap();
            k.write_u64(e + 16, 0x40_1234).unwrap();
        }
        k.write_u64(ring(abi::RING_TAIL), tail + names.len() as u64)
            .unwrap();
    }

    #[test]
    fn a_page_the_site_path_touches_first_is_filled_before_the_ring_is_taken() {
        let (mut k, mut s, mut cpu) = bench();
        let page = lazy_page(&mut k, &mut cpu);
        buffer_markers(&mut k, &[7]);
        let step = k.step();
        // The dispatcher, writing its record of a site, faults: the page
        // is filled and it goes on, its buffered steps not yet taken.
        let dispatcher = at(abi::SITES_VA + 0x10);
        let fault = exception(14, 0b110, page);
        assert_eq!(
            handle(fault, dispatcher, &mut cpu, &mut k, &mut s),
            Handled::Done
        );
        assert!(k.outcome().is_none(), "{:?}", k.outcome());
        assert_eq!(k.step(), step, "the ring waits for the next exit");
        assert_eq!(k.cur().regs.rip, dispatcher.rip, "it resumes where it was");
        // The same fault in the program's own code: the ring's steps
        // first, then the kernel fills the page.
        let (mut k, mut s, mut cpu) = bench();
        let page = lazy_page(&mut k, &mut cpu);
        buffer_markers(&mut k, &[7]);
        let step = k.step();
        let fault = exception(14, 0b110, page);
        assert_eq!(
            handle(fault, at(0x40_1000), &mut cpu, &mut k, &mut s),
            Handled::Done
        );
        assert!(k.outcome().is_none(), "{:?}", k.outcome());
        assert_eq!(k.step(), step + 1);
    }

    #[test]
    fn hints_buffered_in_the_ring_are_steps_taken_before_the_exits_own() {
        let (mut k, mut s, mut cpu) = bench();
        buffer_markers(&mut k, &[7, 8]);
        let step = k.step();
        let regs = syscall_regs(libc::SYS_getpid, [0; 6]);
        assert_eq!(
            handle(Exit::Syscall, regs, &mut cpu, &mut k, &mut s),
            Handled::Syscall(regs)
        );
        assert_eq!(k.step(), step + 2, "both buffered hints are steps");
        // Taken once: the next exit finds the ring empty.
        handle(Exit::Syscall, regs, &mut cpu, &mut k, &mut s);
        assert_eq!(k.step(), step + 2);
    }
}
