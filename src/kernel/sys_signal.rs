//! Signals: dispositions, masks, sending, and returning from handlers.

use super::call::{SyscallDef, def};
use super::process::Process;
use super::signal::{self, NSIG, SigAction, UNBLOCKABLE, bit};
use super::thread::{AltStack, PendingSignal, Wait};
use super::{FpuAccess, Kernel, SysResult, Tid, err};
use crate::ids::Pid;

pub const CALLS: &[SyscallDef] = &[
    def(libc::SYS_rt_sigaction, sys_rt_sigaction, ""),
    def(libc::SYS_rt_sigprocmask, sys_rt_sigprocmask, ""),
    def(
        libc::SYS_rt_sigreturn,
        sys_rt_sigreturn,
        "restores the legacy x87/SSE state only",
    ),
    def(libc::SYS_sigaltstack, sys_sigaltstack, ""),
    def(libc::SYS_rt_sigpending, sys_rt_sigpending, ""),
    def(libc::SYS_pause, sys_pause, ""),
    def(libc::SYS_rt_sigsuspend, sys_rt_sigsuspend, ""),
    def(libc::SYS_rt_sigtimedwait, sys_rt_sigtimedwait, ""),
    def(libc::SYS_kill, sys_kill, "this process only"),
    def(libc::SYS_tgkill, sys_tgkill, ""),
    def(libc::SYS_tkill, sys_tkill, ""),
];

fn valid(sig: u64) -> Option<u32> {
    (1..=NSIG as u64).contains(&sig).then_some(sig as u32)
}

fn sys_rt_sigaction(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let [sig, act, oact, size, ..] = a;
    if size != 8 {
        return err(libc::EINVAL);
    }
    let Some(sig) = valid(sig) else {
        return err(libc::EINVAL);
    };
    let old = k.signals().get(sig);
    if act != 0 {
        if sig == 9 || sig == 19 {
            return err(libc::EINVAL);
        }
        let mut w = [0u64; 4];
        for (i, v) in w.iter_mut().enumerate() {
            match k.read_u64(act + i as u64 * 8) {
                Ok(x) => *v = x,
                Err(_) => return err(libc::EFAULT),
            }
        }
        let new = SigAction {
            handler: w[0],
            flags: w[1],
            restorer: w[2],
            mask: w[3] & !UNBLOCKABLE,
        };
        k.signals_mut().set(sig, new);
        // Ignoring a signal discards pending instances of it.
        if new.handler == signal::SIG_IGN {
            for tid in k.threads.all_with_pending() {
                k.threads
                    .change_pending(tid, |p| p.retain(|p| p.signo != sig || p.forced));
            }
        }
    }
    if oact != 0 {
        let w = [old.handler, old.flags, old.restorer, old.mask];
        for (i, v) in w.iter().enumerate() {
            if k.write_u64(oact + i as u64 * 8, *v).is_err() {
                return err(libc::EFAULT);
            }
        }
    }
    SysResult::Ret(0)
}

fn sys_rt_sigprocmask(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let [how, set, oset, size, ..] = a;
    if size != 8 {
        return err(libc::EINVAL);
    }
    let old = k.cur().sigmask();
    if set != 0 {
        let Ok(s) = k.read_u64(set) else {
            return err(libc::EFAULT);
        };
        let new = match how {
            0 => old | s,
            1 => old & !s,
            2 => s,
            _ => return err(libc::EINVAL),
        };
        k.set_mask(new & !UNBLOCKABLE);
    }
    if oset != 0 && k.write_u64(oset, old).is_err() {
        return err(libc::EFAULT);
    }
    SysResult::Ret(0)
}

fn sys_rt_sigreturn(k: &mut Kernel, cpu: &mut dyn FpuAccess, _: [u64; 6]) -> SysResult {
    if signal::sigreturn(k, cpu).is_err() {
        k.crash(libc::SIGSEGV as u32, None);
    }
    SysResult::NoReturn
}

fn sys_sigaltstack(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let old = k.cur().altstack;
    let rsp = k.cur().regs.rsp;
    let on = old.size != 0 && rsp > old.sp && rsp <= old.sp + old.size;
    if a[0] != 0 {
        if on {
            return err(libc::EPERM);
        }
        let (Ok(sp), Ok(flags), Ok(size)) = (
            k.read_u64(a[0]),
            k.read_u32(a[0] + 8),
            k.read_u64(a[0] + 16),
        ) else {
            return err(libc::EFAULT);
        };
        let flags = flags as i32;
        // A mode (on, off or 0) and SS_AUTODISARM; anything else is invalid.
        let mode = flags & !(1 << 31);
        if ![0, signal::SS_ONSTACK, signal::SS_DISABLE].contains(&mode) {
            return err(libc::EINVAL);
        }
        if flags & signal::SS_DISABLE != 0 {
            k.cur().altstack = AltStack {
                sp: 0,
                size: 0,
                flags: signal::SS_DISABLE,
            };
        } else {
            if flags & !(1 << 31) != 0 {
                return err(libc::EINVAL);
            }
            if size < 2048 {
                return err(libc::ENOMEM);
            }
            k.cur().altstack = AltStack { sp, size, flags: 0 };
        }
    }
    if a[1] != 0 {
        let flags = if on {
            signal::SS_ONSTACK
        } else if old.size == 0 {
            signal::SS_DISABLE
        } else {
            old.flags
        };
        let mut b = [0u8; 24];
        b[..8].copy_from_slice(&old.sp.to_le_bytes());
        b[8..12].copy_from_slice(&flags.to_le_bytes());
        b[16..].copy_from_slice(&old.size.to_le_bytes());
        if k.write(a[1], &b).is_err() {
            return err(libc::EFAULT);
        }
    }
    SysResult::Ret(0)
}

fn sys_rt_sigpending(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let set = k.cur().pending().iter().fold(0, |m, p| m | bit(p.signo));
    match k.write_u64(a[0], set) {
        Ok(()) => SysResult::Ret(0),
        Err(_) => err(libc::EFAULT),
    }
}

fn sys_pause(_: &mut Kernel, _: &mut dyn FpuAccess, _: [u64; 6]) -> SysResult {
    SysResult::Block(Wait::Signal)
}

/// Waits for a signal with a temporary mask, which the handler's return
/// takes back.
fn sys_rt_sigsuspend(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    if a[1] != 8 {
        return err(libc::EINVAL);
    }
    let Ok(mask) = k.read_u64(a[0]) else {
        return err(libc::EFAULT);
    };
    let t = k.cur();
    t.saved_mask = Some(t.sigmask());
    k.set_mask(mask & !UNBLOCKABLE);
    // A signal already pending that the new mask lets through ends it now.
    if signal::deliverable_now(k.cur()) {
        return err(libc::EINTR);
    }
    SysResult::Block(Wait::Signal)
}

/// Takes a pending signal of `set` for the current thread: its own, or one
/// pending on another thread of its process that blocks it (which Linux
/// would have left in the process's shared queue), lowest thread first.
fn take_waited(k: &mut Kernel, set: u64) -> Option<PendingSignal> {
    let (me, pid) = (k.current, k.pid());
    // Only threads with signals pending can have one to take.
    let mut order = vec![me];
    order.extend(
        k.threads
            .with_pending(pid)
            .filter(|t| *t != me && k.threads[t].is_alive()),
    );
    k.changes.count(order.len() as u64);
    for tid in order {
        let t = k.threads.get(&tid)?;
        let mask = t.sigmask();
        let found = t.pending().iter().position(|s| {
            set & bit(s.signo) != 0 && (tid == me || (!s.forced && mask & bit(s.signo) != 0))
        });
        if let Some(i) = found {
            return k.threads.take_pending(tid, i);
        }
    }
    None
}

/// Takes a pending signal of a set without running its handler, waiting
/// for one (blocked or not) until the timeout. While it waits the set is
/// unblocked, as on Linux: a process-directed signal of the set picks
/// this thread, and one outside the set that it does not block
/// interrupts it (EINTR).
fn sys_rt_sigtimedwait(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    if a[3] != 8 {
        return err(libc::EINVAL);
    }
    let Ok(set) = k.read_u64(a[0]) else {
        return err(libc::EFAULT);
    };
    let set = set & !UNBLOCKABLE;
    let deadline = match super::call::deadline(k, a[2], false, false) {
        Ok(d) => d,
        Err(e) => return err(e),
    };
    if let Some(s) = take_waited(k, set) {
        if a[1] != 0 && k.write(a[1], &signal::siginfo(&s)).is_err() {
            return err(libc::EFAULT);
        }
        return SysResult::Ret(s.signo.into());
    }
    if deadline.is_some_and(|d| d <= k.now) {
        return err(libc::EAGAIN);
    }
    let t = k.cur();
    let mask = t.sigmask();
    t.saved_mask = Some(mask);
    k.set_mask(mask & !set);
    if signal::deliverable_now(k.cur()) {
        return err(libc::EINTR);
    }
    SysResult::Block(Wait::SigWait {
        set,
        info: a[1],
        deadline,
    })
}

fn user_signal(k: &Kernel, signo: u32) -> PendingSignal {
    let from_first_thread = Pid::from(k.current) == k.pid();
    PendingSignal {
        signo,
        code: if from_first_thread { 0 } else { -6 }, // SI_USER / SI_TKILL
        addr: 0,
        sender: k.pid().0,
        forced: false,
    }
}

fn sys_kill(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let sel = a[0] as i32;
    let me = k.pid();
    let group = k.processes()[&me].pgid;
    let chosen = |p: &Process| match sel {
        0 => p.pgid == group,
        -1 => p.pid != k.first_pid || p.pid == me,
        n if n > 0 => p.pid == Pid(n as u32),
        n => p.pgid == Pid(n.unsigned_abs()),
    };
    // A zombie (ended, not yet waited for) is found, as Linux finds it,
    // and the signal does nothing to it.
    if !k.processes().values().any(chosen) {
        return err(libc::ESRCH);
    }
    let targets: Vec<Pid> = k
        .processes()
        .values()
        .filter(|p| p.ended.is_none() && chosen(p))
        .map(|p| p.pid)
        .collect();
    if a[1] == 0 {
        return SysResult::Ret(0);
    }
    let Some(sig) = valid(a[1]) else {
        return err(libc::EINVAL);
    };
    let mut s = user_signal(k, sig);
    s.code = 0;
    for pid in targets {
        k.with_process(pid, |k| signal::send_to_process(k, s));
    }
    SysResult::Ret(0)
}

fn send(k: &mut Kernel, tid: u64, sig: u64) -> SysResult {
    let tid = Tid(tid as u32);
    if !k.threads.get(&tid).is_some_and(|t| t.is_alive()) {
        return err(libc::ESRCH);
    }
    if sig == 0 {
        return SysResult::Ret(0);
    }
    let Some(sig) = valid(sig) else {
        return err(libc::EINVAL);
    };
    let mut s = user_signal(k, sig);
    s.code = -6; // SI_TKILL
    let pid = k.threads[&tid].pid;
    k.with_process(pid, |k| signal::send_to_thread(k, tid, s));
    SysResult::Ret(0)
}

fn sys_tgkill(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let in_group = k
        .threads
        .get(&Tid(a[1] as u32))
        .is_some_and(|t| t.pid == Pid(a[0] as u32));
    if !in_group {
        return err(libc::ESRCH);
    }
    send(k, a[1], a[2])
}

fn sys_tkill(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    send(k, a[0], a[1])
}
