//! Signal dispositions and delivery: real `rt_sigframe`s on the user stack,
//! laid out as Linux lays them out on x86-64, so handlers, `ucontext`
//! inspection and `rt_sigreturn` work unmodified.

use super::ready::{ANY_PROCESS, Ready};
use super::thread::PendingSignal;
use super::{FpuAccess, Kernel, SysResult, ThreadState, Tid, Wait};
use crate::arch::cpu::{ExtendedState, RFLAGS_USER_MASK, UserRegs};
use crate::arch::layout::{SEL_USER_CS, SEL_USER_DS};
use crate::code::sites::trampoline::Origin;
use crate::memory::MemError;

pub const SIG_DFL: u64 = 0;
pub const SIG_IGN: u64 = 1;
pub const SA_SIGINFO: u64 = 0x4;
pub const SA_ONSTACK: u64 = 0x0800_0000;
pub const SA_RESTORER: u64 = 0x0400_0000;
pub const SA_NODEFER: u64 = 0x4000_0000;
pub const SA_RESETHAND: u64 = 0x8000_0000;
pub const SS_ONSTACK: i32 = 1;
pub const SS_DISABLE: i32 = 2;

/// Number of signals (1..=64).
pub const NSIG: u32 = 64;

/// The mask bit of a signal.
pub const fn bit(signo: u32) -> u64 {
    1u64 << (signo - 1)
}

/// Signals that can never be blocked.
pub const UNBLOCKABLE: u64 = bit(9) | bit(19);

/// A signal's disposition (Linux's `struct k_sigaction` on x86-64).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SigAction {
    pub handler: u64,
    pub flags: u64,
    pub restorer: u64,
    pub mask: u64,
}

/// Dispositions of the process's signals.
#[derive(Clone, Debug)]
pub struct SignalTable {
    actions: [SigAction; NSIG as usize],
}

impl Default for SignalTable {
    fn default() -> Self {
        SignalTable {
            actions: [SigAction::default(); NSIG as usize],
        }
    }
}

impl SignalTable {
    pub fn get(&self, signo: u32) -> SigAction {
        self.actions[(signo - 1) as usize]
    }
    pub fn set(&mut self, signo: u32, a: SigAction) {
        self.actions[(signo - 1) as usize] = a;
    }

    /// What `execve` leaves: handlers go back to the default action (the
    /// code they were in is gone); ignored signals stay ignored.
    pub fn reset_for_exec(&mut self) {
        for a in self.actions.iter_mut() {
            if a.handler != SIG_IGN {
                *a = SigAction::default();
            }
        }
    }
}

/// What the default action of a signal does.
fn default_ignores(signo: u32) -> bool {
    // SIGCHLD, SIGCONT, SIGURG, SIGWINCH are ignored; the stop signals too
    // (there is no job control to stop for).
    matches!(signo, 17 | 18 | 23 | 28 | 19 | 20 | 21 | 22)
}

/// Queues a signal for thread `tid`, interrupting a wait it is in when the
/// signal is not blocked.
pub fn send_to_thread(k: &mut Kernel, tid: Tid, s: PendingSignal) {
    let act = k.signals().get(s.signo);
    let Some(t) = k.threads.get_mut(&tid) else {
        return;
    };
    if !t.is_alive() {
        return;
    }
    let ignored = act.handler == SIG_IGN || (act.handler == SIG_DFL && default_ignores(s.signo));
    if ignored && !s.forced {
        return;
    }
    let pid = t.pid;
    k.threads.push_pending(tid, s);
    // Signal descriptors and the polls on them look again.
    k.pipes.note_activity();
    k.touch(Ready::Signals(pid));
    k.touch(Ready::Signals(ANY_PROCESS));
    let Some(t) = k.threads.get_mut(&tid) else {
        return;
    };
    // A thread waiting for this very signal takes it, blocked or not: its
    // call returns the signal, as Linux dequeues it for the waiter.
    if let ThreadState::Blocked(Wait::SigWait { set, info, .. }) = *t.state() {
        if set & bit(s.signo) != 0 {
            let pid = t.pid;
            k.threads.change_pending(tid, |p| p.pop());
            let written = info == 0 || k.with_process(pid, |k| k.write(info, &siginfo(&s)).is_ok());
            let r = if written {
                s.signo as i64
            } else {
                -(libc::EFAULT as i64)
            };
            k.wake(tid, r);
            return;
        }
    }
    let blocked = t.sigmask() & bit(s.signo) != 0;
    if !blocked {
        if let ThreadState::Blocked(w) = t.state() {
            if matches!(w, Wait::Vfork { .. }) {
                // Linux lets only a fatal signal end a vfork parent's wait.
                return;
            }
            let r = match w {
                Wait::Signal => -(libc::EINTR as i64),
                _ => -(libc::EINTR as i64),
            };
            k.wake(tid, r);
        }
    }
}

/// Queues a process-directed signal to a thread that does not block it
/// (the main thread first), as Linux picks one.
pub fn send_to_process(k: &mut Kernel, s: PendingSignal) {
    let (target, looked_at) = k.threads.signal_target(k.pid(), s.signo);
    k.changes.count(looked_at);
    if let Some(tid) = target {
        send_to_thread(k, tid, s);
    }
}

/// The `siginfo_t` `rt_sigtimedwait` gives for `s`: number, code and the
/// sender's pid.
pub fn siginfo(s: &PendingSignal) -> [u8; 128] {
    let mut info = [0u8; 128];
    info[0..4].copy_from_slice(&(s.signo as i32).to_le_bytes());
    info[8..12].copy_from_slice(&s.code.to_le_bytes());
    info[16..20].copy_from_slice(&s.sender.to_le_bytes());
    info
}

/// Reads the signal mask a call takes for its duration (`ppoll`,
/// `epoll_pwait`, ...) from `ptr` (none when 0); the set must be Linux's
/// 8 bytes.
pub fn read_call_mask(k: &mut Kernel, ptr: u64, size: u64) -> Result<Option<u64>, i32> {
    if ptr == 0 {
        return Ok(None);
    }
    if size != 8 {
        return Err(libc::EINVAL);
    }
    k.read_u64(ptr).map(Some).map_err(|_| libc::EFAULT)
}

/// Runs a waiting call with its own signal mask in force, as Linux does
/// atomically (`pselect6`, `ppoll`, `epoll_pwait`): the mask replaces the
/// thread's for the call, so a signal it lets through ends the wait with
/// EINTR and its handler runs with the old mask saved in its frame (make
/// waits for SIGCHLD that way). A wait that ends otherwise gives the old
/// mask back at once.
pub fn with_call_mask(
    k: &mut Kernel,
    mask: Option<u64>,
    call: impl FnOnce(&mut Kernel) -> SysResult,
) -> SysResult {
    let Some(mask) = mask else {
        return call(k);
    };
    let t = k.cur();
    t.saved_mask = Some(t.sigmask());
    k.set_mask(mask & !UNBLOCKABLE);
    let r = match call(k) {
        // Linux looks for signals only once nothing is ready.
        SysResult::Block(_) if deliverable_now(k.cur()) => SysResult::Ret(-(libc::EINTR as i64)),
        r => r,
    };
    match r {
        // The interrupting signal's frame restores the old mask.
        SysResult::Ret(v) if v == -(libc::EINTR as i64) => {}
        // The call waits with its mask.
        SysResult::Block(_) => {}
        _ => k.threads.restore_saved_mask(k.current),
    }
    r
}

/// Whether a signal pending for thread `t` can be delivered under its mask.
pub fn deliverable_now(t: &super::Thread) -> bool {
    t.pending()
        .iter()
        .any(|s| s.forced || t.sigmask() & bit(s.signo) == 0)
}

/// `si_code` of a signal the kernel raised without a fault address.
pub const SI_KERNEL: i32 = 0x80;

/// Delivers one signal to the current thread.
pub fn deliver(k: &mut Kernel, s: PendingSignal, cpu: &mut dyn FpuAccess) {
    let act = k.signals().get(s.signo);
    let blocked = k.cur().sigmask() & bit(s.signo) != 0;
    let use_default = act.handler == SIG_DFL || (s.forced && (blocked || act.handler == SIG_IGN));
    if use_default {
        if default_ignores(s.signo) && !s.forced {
            return;
        }
        // Only a fault has an address: a signal sent by a process (raise,
        // kill: code <= 0) or by the kernel itself (SI_KERNEL) has none,
        // and saying "at address 0x0" would read as a NULL dereference.
        let from_a_fault = s.sender == 0 && s.code > 0 && s.code != SI_KERNEL;
        let addr = (matches!(s.signo, 4 | 7 | 8 | 11) && from_a_fault).then_some(s.addr);
        k.crash(s.signo, addr);
        return;
    }
    if act.handler == SIG_IGN {
        return;
    }
    // A thread stopped at a sync site had not executed it: the handler's
    // return runs into the site again.
    k.cur().pending_site = None;
    if build_frame(k, &s, act, cpu).is_err() {
        // No room for the frame: Linux kills the process with SIGSEGV.
        k.crash(libc::SIGSEGV as u32, Some(k.threads[&k.current].regs.rsp));
        return;
    }
    if act.flags & SA_RESETHAND != 0 {
        k.signals_mut().set(s.signo, SigAction::default());
    }
}

/// Size of the frame from `pretcode` through `siginfo`.
const FRAME_SIZE: u64 = 8 + 304 + 128;
const FPSTATE_SIZE: u64 = 512;

fn build_frame(
    k: &mut Kernel,
    s: &PendingSignal,
    act: SigAction,
    cpu: &mut dyn FpuAccess,
) -> Result<(), MemError> {
    let mut regs = k.cur().regs;
    // A thread about to run a trampoline's copies stands, for its handler
    // and its return, at the program's instruction they stand for.
    if let Some(o) = k.mm.jump_origin(regs.rip) {
        regs.rip = match o.origin {
            Origin::Site(a) | Origin::Moved(a) => a,
        };
    }
    let t = k.cur();
    // After a call with its own mask (rt_sigsuspend, ppoll ...), the
    // handler's return restores the mask it replaced, not the call's.
    let old_mask = t.saved_mask.take().unwrap_or(t.sigmask());
    let alt = t.altstack;
    let on_alt = alt.size != 0 && regs.rsp > alt.sp && regs.rsp <= alt.sp + alt.size;
    let mut sp =
        if act.flags & SA_ONSTACK != 0 && alt.size != 0 && alt.flags & SS_DISABLE == 0 && !on_alt {
            alt.sp + alt.size
        } else {
            regs.rsp.wrapping_sub(128) // the red zone
        };
    sp = sp.wrapping_sub(FPSTATE_SIZE) & !63;
    let fp_addr = sp;
    sp = (sp.wrapping_sub(FRAME_SIZE) & !15).wrapping_sub(8);
    let frame = sp;

    let fpu = cpu.save();
    let mut buf = vec![0u8; FRAME_SIZE as usize];
    let put =
        |buf: &mut Vec<u8>, off: usize, v: u64| buf[off..off + 8].copy_from_slice(&v.to_le_bytes());
    put(&mut buf, 0, act.restorer);
    // ucontext at +8: flags, link, stack, mcontext (+48), sigmask (+304).
    put(&mut buf, 24, alt.sp);
    buf[32..36].copy_from_slice(&(if on_alt { SS_ONSTACK } else { alt.flags }).to_le_bytes());
    put(&mut buf, 40, alt.size);
    let g = [
        regs.r8,
        regs.r9,
        regs.r10,
        regs.r11,
        regs.r12,
        regs.r13,
        regs.r14,
        regs.r15,
        regs.rdi,
        regs.rsi,
        regs.rbp,
        regs.rbx,
        regs.rdx,
        regs.rax,
        regs.rcx,
        regs.rsp,
        regs.rip,
        regs.rflags,
    ];
    for (i, v) in g.iter().enumerate() {
        put(&mut buf, 48 + i * 8, *v);
    }
    let csgsfs = SEL_USER_CS as u64 | ((SEL_USER_DS as u64) << 48);
    put(&mut buf, 48 + 144, csgsfs);
    put(&mut buf, 48 + 160, trapno(s.signo));
    put(&mut buf, 48 + 168, old_mask);
    put(&mut buf, 48 + 176, if s.signo == 11 { s.addr } else { 0 });
    put(&mut buf, 48 + 184, fp_addr);
    put(&mut buf, 304, old_mask);
    // siginfo at +312.
    let si = 312;
    buf[si..si + 4].copy_from_slice(&(s.signo as i32).to_le_bytes());
    buf[si + 8..si + 12].copy_from_slice(&s.code.to_le_bytes());
    if matches!(s.signo, 4 | 5 | 7 | 8 | 11) && s.forced {
        put(&mut buf, si + 16, s.addr);
    } else {
        buf[si + 16..si + 20].copy_from_slice(&s.sender.to_le_bytes());
    }
    k.write(fp_addr, fpu.fxsave())?;
    k.write(frame, &buf)?;

    let t = k.cur();
    t.regs = UserRegs {
        rip: act.handler,
        rsp: frame,
        rdi: s.signo as u64,
        rsi: frame + si as u64,
        rdx: frame + 8,
        rax: 0,
        rflags: regs.rflags & !(0x100 | 0x400), // TF, DF
        ..regs
    };
    let mut mask = old_mask | act.mask;
    if act.flags & SA_NODEFER == 0 {
        mask |= bit(s.signo);
    }
    k.set_mask(mask & !UNBLOCKABLE);
    Ok(())
}

fn trapno(signo: u32) -> u64 {
    match signo {
        11 => 14,
        8 => 0,
        4 => 6,
        5 => 3,
        _ => 0,
    }
}

/// `rt_sigreturn`: restores what the frame at `rsp` saved.
pub fn sigreturn(k: &mut Kernel, cpu: &mut dyn FpuAccess) -> Result<(), MemError> {
    let uc = k.cur().regs.rsp;
    let mut buf = [0u8; 304];
    k.read(uc, &mut buf)?;
    let get = |off: usize| u64::from_le_bytes(buf[off..off + 8].try_into().unwrap());
    let g: Vec<u64> = (0..18).map(|i| get(40 + i * 8)).collect();
    let fp = get(40 + 184);
    let mask = get(296);
    if fp != 0 {
        let mut fx = vec![0u8; FPSTATE_SIZE as usize];
        k.read(fp, &mut fx)?;
        let mut state: ExtendedState = cpu.save();
        state.set_fxsave(&fx);
        cpu.load(&state);
    }
    let t = k.cur();
    let old = t.regs;
    t.regs = UserRegs {
        r8: g[0],
        r9: g[1],
        r10: g[2],
        r11: g[3],
        r12: g[4],
        r13: g[5],
        r14: g[6],
        r15: g[7],
        rdi: g[8],
        rsi: g[9],
        rbp: g[10],
        rbx: g[11],
        rdx: g[12],
        rax: g[13],
        rcx: g[14],
        rsp: g[15],
        rip: g[16],
        rflags: (old.rflags & !RFLAGS_USER_MASK) | (g[17] & RFLAGS_USER_MASK),
    };
    k.set_mask(mask & !UNBLOCKABLE);
    Ok(())
}
