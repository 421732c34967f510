//! Threads: creation and exit, futexes, scheduling calls, thread identity.

use super::call::{SyscallDef, deadline, def, sys_zero};
use super::clone_args::{
    CLONE_CHILD_CLEARTID, CLONE_CHILD_SETTID, CLONE_DETACHED, CLONE_FILES, CLONE_FS,
    CLONE_PARENT_SETTID, CLONE_SETTLS, CLONE_SIGHAND, CLONE_SYSVSEM, CLONE_THREAD, CLONE_VM,
    CloneArgs,
};
use super::thread::{Thread, ThreadState, Wait};
use super::{FpuAccess, Kernel, SysResult, Tid, err};
use crate::observe::outcome::Outcome;

pub const CALLS: &[SyscallDef] = &[
    def(
        libc::SYS_exit,
        sys_exit,
        "robust futex lists are not walked at exit",
    ),
    def(libc::SYS_exit_group, sys_exit_group, ""),
    def(libc::SYS_set_tid_address, sys_set_tid_address, ""),
    def(libc::SYS_set_robust_list, sys_set_robust_list, ""),
    def(libc::SYS_get_robust_list, sys_get_robust_list, ""),
    def(libc::SYS_gettid, sys_gettid, ""),
    def(libc::SYS_getpid, sys_getpid, ""),
    def(
        libc::SYS_futex,
        sys_futex,
        "priority-inheritance operations are not supported",
    ),
    def(libc::SYS_sched_yield, sys_sched_yield, ""),
    def(libc::SYS_sched_getaffinity, sys_sched_getaffinity, ""),
    def(
        libc::SYS_sched_setaffinity,
        sys_sched_setaffinity,
        "accepted; one vCPU runs every thread",
    ),
    def(libc::SYS_sched_getscheduler, sys_zero, ""),
    def(
        libc::SYS_sched_setscheduler,
        sys_zero,
        "accepted; the strategy decides who runs",
    ),
    def(libc::SYS_sched_getparam, sys_sched_getparam, ""),
    def(
        libc::SYS_sched_setparam,
        sys_zero,
        "accepted; the strategy decides who runs",
    ),
    def(libc::SYS_sched_get_priority_max, sys_priority_max, ""),
    def(libc::SYS_sched_get_priority_min, sys_priority_min, ""),
    def(libc::SYS_getcpu, sys_getcpu, ""),
    def(
        libc::SYS_prctl,
        sys_prctl,
        "names, dumpable, keep-caps, parent-death signal, timer slack, THP disable, child subreaper, TID address and the capability, seccomp and speculation queries",
    ),
    def(libc::SYS_arch_prctl, sys_arch_prctl, "FS base only"),
    def(
        libc::SYS_rseq,
        sys_rseq,
        "answers ENOSYS, as kernels without rseq do",
    ),
];

/// Creates a thread of the current process (`clone` with CLONE_THREAD).
pub(super) fn clone_thread(k: &mut Kernel, cpu: &mut dyn FpuAccess, c: CloneArgs) -> SysResult {
    let needed = CLONE_VM | CLONE_THREAD | CLONE_SIGHAND;
    if c.flags & needed != needed {
        return SysResult::Unsupported(format!(
            "creating a process (clone flags {:#x}); only threads are supported",
            c.flags
        ));
    }
    let known = needed
        | CLONE_FS
        | CLONE_FILES
        | CLONE_SYSVSEM
        | CLONE_SETTLS
        | CLONE_PARENT_SETTID
        | CLONE_CHILD_CLEARTID
        | CLONE_DETACHED
        | CLONE_CHILD_SETTID;
    if c.flags & !known != 0 {
        return SysResult::Unsupported(format!("clone flags {:#x}", c.flags & !known));
    }
    let tid = k.alloc_tid();
    let parent = k.cur().clone();
    let mut regs = parent.regs;
    regs.rax = 0;
    if c.stack != 0 {
        regs.rsp = c.stack;
    }
    let mut child = Thread::new(tid, regs, parent.name.clone()).with_sigmask(parent.sigmask());
    child.fs_base = if c.flags & CLONE_SETTLS != 0 {
        c.tls
    } else {
        parent.fs_base
    };
    child.mempolicy = parent.mempolicy;
    child.timer_slack = parent.timer_slack;
    // Without CLONE_FS the thread starts from a copy of its creator's
    // working directory; with it, the two share one.
    child.own_cwd = if c.flags & CLONE_FS == 0 {
        Some(k.new_own_cwd())
    } else {
        parent.own_cwd
    };
    child.fpu = Some(cpu.save());
    if c.flags & CLONE_CHILD_CLEARTID != 0 {
        child.clear_child_tid = c.child_tid;
    }
    if c.flags & CLONE_PARENT_SETTID != 0 && k.write_u32(c.parent_tid, tid.0).is_err() {
        return err(libc::EFAULT);
    }
    if c.flags & CLONE_CHILD_SETTID != 0 && k.write_u32(c.child_tid, tid.0).is_err() {
        return err(libc::EFAULT);
    }
    child.pid = parent.pid;
    k.threads.insert(tid, child);
    SysResult::Ret(tid.0 as i64)
}

/// Ends the current thread: clears and wakes its `clear_child_tid` word
/// (how `pthread_join` learns of it), and ends the run with the last one.
pub fn exit_thread(k: &mut Kernel, code: i32) {
    let tid = k.current;
    let ctid = k.cur().clear_child_tid;
    if ctid != 0 && k.write_u32(ctid, 0).is_ok() {
        futex_wake(k, ctid, false, 1, u32::MAX);
    }
    let pid = k.pid;
    let others = k.threads.alive_in(pid) - usize::from(k.cur().is_alive());
    if others == 0 {
        exit_process(k, code);
        return;
    }
    k.threads.set_state(tid, ThreadState::Exited);
    k.threads.change_pending(tid, Vec::clear);
}

fn sys_exit(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    exit_thread(k, a[0] as i32 & 0xff);
    SysResult::NoReturn
}

fn sys_exit_group(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    exit_process(k, a[0] as i32 & 0xff);
    SysResult::NoReturn
}

/// Ends the current process with exit code `code`: the run, when it is
/// the first process.
pub fn exit_process(k: &mut Kernel, code: i32) {
    if k.pid == k.first_pid {
        k.end(Outcome::Exited { code });
    } else {
        k.end_process(super::process::Ended::Exited(code));
    }
}

fn sys_set_tid_address(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    k.cur().clear_child_tid = a[0];
    SysResult::Ret(k.current.0 as i64)
}

fn sys_set_robust_list(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    if a[1] != 24 {
        return err(libc::EINVAL);
    }
    k.cur().robust_list = a[0];
    SysResult::Ret(0)
}

fn sys_get_robust_list(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let tid = if a[0] == 0 {
        k.current
    } else {
        Tid(a[0] as u32)
    };
    let Some(head) = k.threads.get(&tid).map(|t| t.robust_list) else {
        return err(libc::ESRCH);
    };
    if k.write_u64(a[1], head).is_err() || k.write_u64(a[2], 24).is_err() {
        return err(libc::EFAULT);
    }
    SysResult::Ret(0)
}

fn sys_gettid(k: &mut Kernel, _: &mut dyn FpuAccess, _: [u64; 6]) -> SysResult {
    SysResult::Ret(k.current.0 as i64)
}

fn sys_getpid(k: &mut Kernel, _: &mut dyn FpuAccess, _: [u64; 6]) -> SysResult {
    SysResult::Ret(k.pid.0 as i64)
}

fn sys_sched_yield(_: &mut Kernel, _: &mut dyn FpuAccess, _: [u64; 6]) -> SysResult {
    SysResult::Yield(0)
}

fn sys_sched_getaffinity(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let (size, ptr) = (a[1], a[2]);
    // The kernel's mask is as long as its CPU count needs, in whole longs.
    let len = (k.config.cpus as u64).div_ceil(64) * 8;
    if size < len || size % 8 != 0 {
        return err(libc::EINVAL);
    }
    let mut mask = vec![0u8; len as usize];
    for cpu in 0..k.config.cpus as usize {
        mask[cpu / 8] |= 1 << (cpu % 8);
    }
    if k.write(ptr, &mask).is_err() {
        return err(libc::EFAULT);
    }
    SysResult::Ret(len as i64)
}

fn sys_sched_setaffinity(_: &mut Kernel, _: &mut dyn FpuAccess, _: [u64; 6]) -> SysResult {
    SysResult::Ret(0)
}

fn sys_sched_getparam(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    match k.write_u32(a[1], 0) {
        Ok(()) => SysResult::Ret(0),
        Err(_) => err(libc::EFAULT),
    }
}

fn sys_priority_max(_: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    match a[0] {
        1 | 2 => SysResult::Ret(99),
        0 | 3 | 5 | 6 => SysResult::Ret(0),
        _ => err(libc::EINVAL),
    }
}

fn sys_priority_min(_: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    match a[0] {
        1 | 2 => SysResult::Ret(1),
        0 | 3 | 5 | 6 => SysResult::Ret(0),
        _ => err(libc::EINVAL),
    }
}

fn sys_getcpu(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    for p in [a[0], a[1]] {
        if p != 0 && k.write_u32(p, 0).is_err() {
            return err(libc::EFAULT);
        }
    }
    SysResult::Ret(0)
}

const PR_SET_PDEATHSIG: u64 = 1;
const PR_GET_PDEATHSIG: u64 = 2;
const PR_GET_DUMPABLE: u64 = 3;
const PR_SET_DUMPABLE: u64 = 4;
const PR_GET_KEEPCAPS: u64 = 7;
const PR_SET_KEEPCAPS: u64 = 8;
const PR_SET_NAME: u64 = 15;
const PR_GET_NAME: u64 = 16;
const PR_GET_SECCOMP: u64 = 21;
const PR_CAPBSET_READ: u64 = 23;
const PR_GET_TIMERSLACK: u64 = 30;
const PR_SET_TIMERSLACK: u64 = 29;
const PR_SET_CHILD_SUBREAPER: u64 = 36;
const PR_GET_CHILD_SUBREAPER: u64 = 37;
const PR_SET_NO_NEW_PRIVS: u64 = 38;
const PR_GET_NO_NEW_PRIVS: u64 = 39;
const PR_GET_TID_ADDRESS: u64 = 40;
const PR_SET_THP_DISABLE: u64 = 41;
const PR_GET_THP_DISABLE: u64 = 42;
const PR_CAP_AMBIENT: u64 = 47;
const PR_GET_SPECULATION_CTRL: u64 = 52;
const PR_SET_VMA: u64 = 0x5356_4d41;
/// Yama's `PR_SET_PTRACER`: who may trace the caller (nobody traces here).
const PR_SET_PTRACER: u64 = 0x5961_6d61;
const CAP_LAST_CAP: u64 = 40;

fn sys_prctl(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    match a[0] {
        PR_SET_NAME => {
            let mut buf = [0u8; 16];
            // The name may sit at the end of a mapping: read what is there.
            for (i, b) in buf.iter_mut().enumerate().take(15) {
                let mut one = [0u8];
                if k.read(a[1] + i as u64, &mut one).is_err() {
                    if i == 0 {
                        return err(libc::EFAULT);
                    }
                    break;
                }
                if one[0] == 0 {
                    break;
                }
                *b = one[0];
            }
            let len = buf.iter().position(|b| *b == 0).unwrap_or(15);
            k.cur().name = String::from_utf8_lossy(&buf[..len]).into_owned();
            SysResult::Ret(0)
        }
        PR_GET_NAME => {
            let mut buf = [0u8; 16];
            let name = k.cur().name.clone();
            let n = name.len().min(15);
            buf[..n].copy_from_slice(&name.as_bytes()[..n]);
            match k.write(a[1], &buf) {
                Ok(()) => SysResult::Ret(0),
                Err(_) => err(libc::EFAULT),
            }
        }
        PR_SET_PDEATHSIG => match a[1] {
            0..=64 => {
                k.cur().parent_death_signal = a[1] as u32;
                SysResult::Ret(0)
            }
            _ => err(libc::EINVAL),
        },
        PR_GET_PDEATHSIG => {
            let s = k.cur().parent_death_signal;
            put_int(k, a[1], s)
        }
        PR_SET_DUMPABLE => match a[1] {
            0 | 1 => {
                k.options_mut().dumpable = a[1] == 1;
                SysResult::Ret(0)
            }
            _ => err(libc::EINVAL),
        },
        PR_GET_DUMPABLE => SysResult::Ret(k.process_entry().options.dumpable as i64),
        PR_SET_KEEPCAPS => match a[1] {
            0 | 1 => {
                k.options_mut().keep_caps = a[1] == 1;
                SysResult::Ret(0)
            }
            _ => err(libc::EINVAL),
        },
        PR_GET_KEEPCAPS => SysResult::Ret(k.process_entry().options.keep_caps as i64),
        PR_SET_THP_DISABLE if a[2] | a[3] | a[4] != 0 => err(libc::EINVAL),
        PR_SET_THP_DISABLE => {
            k.options_mut().thp_disabled = a[1] != 0;
            SysResult::Ret(0)
        }
        PR_GET_THP_DISABLE if a[1] | a[2] | a[3] | a[4] != 0 => err(libc::EINVAL),
        PR_GET_THP_DISABLE => SysResult::Ret(k.process_entry().options.thp_disabled as i64),
        PR_SET_CHILD_SUBREAPER => {
            k.options_mut().child_subreaper = a[1] != 0;
            SysResult::Ret(0)
        }
        PR_GET_CHILD_SUBREAPER => {
            let on = k.process_entry().options.child_subreaper as u32;
            put_int(k, a[1], on)
        }
        PR_SET_TIMERSLACK => {
            let slack = match a[1] {
                0 => crate::kernel::thread::DEFAULT_TIMER_SLACK,
                n => n,
            };
            k.cur().timer_slack = slack;
            SysResult::Ret(0)
        }
        PR_GET_TIMERSLACK => SysResult::Ret(k.cur().timer_slack as i64),
        PR_GET_TID_ADDRESS => {
            let at = k.cur().clear_child_tid;
            match k.write_u64(a[1], at) {
                Ok(()) => SysResult::Ret(0),
                Err(_) => err(libc::EFAULT),
            }
        }
        PR_SET_NO_NEW_PRIVS if a[1] != 1 || a[2] | a[3] | a[4] != 0 => err(libc::EINVAL),
        PR_SET_NO_NEW_PRIVS => {
            k.options_mut().no_new_privs = true;
            SysResult::Ret(0)
        }
        PR_GET_NO_NEW_PRIVS => SysResult::Ret(k.process_entry().options.no_new_privs as i64),
        // No seccomp filter is ever installed (seccomp is unsupported).
        PR_GET_SECCOMP => SysResult::Ret(0),
        PR_CAPBSET_READ if a[1] > CAP_LAST_CAP => err(libc::EINVAL),
        PR_CAPBSET_READ => SysResult::Ret(1),
        // Ambient capabilities: none are raised (root needs none), and
        // raising one needs it inheritable, which none is.
        PR_CAP_AMBIENT => match a[1] {
            1 if a[2] > CAP_LAST_CAP => err(libc::EINVAL),
            1 => SysResult::Ret(0),
            2 => err(libc::EPERM),
            3 | 4 => SysResult::Ret(0),
            _ => err(libc::EINVAL),
        },
        // The CPU model has none of the speculation flaws the controls
        // are for: PR_SPEC_NOT_AFFECTED.
        PR_GET_SPECULATION_CTRL => match a[1] {
            0..=2 => SysResult::Ret(0),
            _ => err(libc::ENODEV),
        },
        PR_SET_PTRACER => SysResult::Ret(0),
        PR_SET_VMA => err(libc::EINVAL), // as on kernels without CONFIG_ANON_VMA_NAME
        op => SysResult::Unsupported(format!("prctl option {op}")),
    }
}

/// Stores an `int` result of a `prctl` at `ptr`.
fn put_int(k: &mut Kernel, ptr: u64, v: u32) -> SysResult {
    match k.write_u32(ptr, v) {
        Ok(()) => SysResult::Ret(0),
        Err(_) => err(libc::EFAULT),
    }
}

const ARCH_SET_GS: u64 = 0x1001;
const ARCH_SET_FS: u64 = 0x1002;
const ARCH_GET_FS: u64 = 0x1003;
const ARCH_GET_GS: u64 = 0x1004;

fn sys_arch_prctl(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    match a[0] {
        ARCH_SET_FS => {
            if a[1] >= crate::arch::layout::USER_END {
                return err(libc::EPERM);
            }
            k.cur().fs_base = a[1];
            SysResult::Ret(0)
        }
        ARCH_GET_FS => {
            let v = k.cur().fs_base;
            match k.write_u64(a[1], v) {
                Ok(()) => SysResult::Ret(0),
                Err(_) => err(libc::EFAULT),
            }
        }
        ARCH_GET_GS => match k.write_u64(a[1], 0) {
            Ok(()) => SysResult::Ret(0),
            Err(_) => err(libc::EFAULT),
        },
        ARCH_SET_GS => SysResult::Unsupported("arch_prctl(ARCH_SET_GS)".into()),
        // CET, CPUID faulting, AMX and other codes: not available, as on a
        // kernel built without them.
        _ => err(libc::EINVAL),
    }
}

fn sys_rseq(_: &mut Kernel, _: &mut dyn FpuAccess, _: [u64; 6]) -> SysResult {
    err(libc::ENOSYS)
}

// ----- futex

const FUTEX_WAIT: u64 = 0;
const FUTEX_WAKE: u64 = 1;
const FUTEX_REQUEUE: u64 = 3;
const FUTEX_CMP_REQUEUE: u64 = 4;
const FUTEX_WAKE_OP: u64 = 5;
const FUTEX_WAIT_BITSET: u64 = 9;
const FUTEX_WAKE_BITSET: u64 = 10;
const FUTEX_PRIVATE_FLAG: u64 = 128;
const FUTEX_CLOCK_REALTIME: u64 = 256;
const FUTEX_BITSET_ALL: u32 = u32::MAX;

/// Wakes up to `n` waiters of the futex at `addr` (keyed as a private
/// operation's when `private`) matching `bitset`; returns how many.
pub fn futex_wake(k: &mut Kernel, addr: u64, private: bool, n: usize, bitset: u32) -> usize {
    let key = k.futex_key(addr, private);
    let woken = k.futex.take(key, n, bitset);
    for t in &woken {
        k.wake(*t, 0);
    }
    woken.len()
}

fn sys_futex(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let [uaddr, op, val, timeout, uaddr2, val3] = a;
    let cmd = op & 0x7f;
    let realtime = op & FUTEX_CLOCK_REALTIME != 0;
    let private = op & FUTEX_PRIVATE_FLAG != 0;
    if uaddr % 4 != 0 {
        return err(libc::EINVAL);
    }
    match cmd {
        FUTEX_WAIT | FUTEX_WAIT_BITSET => {
            let bitset = if cmd == FUTEX_WAIT {
                FUTEX_BITSET_ALL
            } else {
                val3 as u32
            };
            if bitset == 0 {
                return err(libc::EINVAL);
            }
            let deadline = match deadline(k, timeout, cmd == FUTEX_WAIT_BITSET, realtime) {
                Ok(d) => d,
                Err(e) => return err(e),
            };
            match k.read_u32(uaddr) {
                Err(_) => err(libc::EFAULT),
                Ok(v) if v != val as u32 => err(libc::EAGAIN),
                Ok(_) if deadline.is_some_and(|d| d <= k.now) => err(libc::ETIMEDOUT),
                Ok(_) => SysResult::Block(Wait::Futex {
                    addr: uaddr,
                    key: k.futex_key(uaddr, private),
                    bitset,
                    deadline,
                }),
            }
        }
        FUTEX_WAKE | FUTEX_WAKE_BITSET => {
            let bitset = if cmd == FUTEX_WAKE {
                FUTEX_BITSET_ALL
            } else {
                val3 as u32
            };
            if bitset == 0 {
                return err(libc::EINVAL);
            }
            SysResult::Ret(futex_wake(k, uaddr, private, val as u32 as usize, bitset) as i64)
        }
        FUTEX_REQUEUE | FUTEX_CMP_REQUEUE => {
            if cmd == FUTEX_CMP_REQUEUE {
                match k.read_u32(uaddr) {
                    Err(_) => return err(libc::EFAULT),
                    Ok(v) if v != val3 as u32 => return err(libc::EAGAIN),
                    Ok(_) => {}
                }
            }
            let woken = futex_wake(k, uaddr, private, val as u32 as usize, FUTEX_BITSET_ALL);
            let (from, to) = (k.futex_key(uaddr, private), k.futex_key(uaddr2, private));
            let moved = k.futex.requeue(from, to, timeout as u32 as usize);
            for t in &moved {
                if let Some((addr, key)) = k.threads.get_mut(t).and_then(|th| th.futex_wait_mut()) {
                    *addr = uaddr2;
                    *key = to;
                }
            }
            SysResult::Ret((woken + moved.len()) as i64)
        }
        FUTEX_WAKE_OP => {
            let old = match k.read_u32(uaddr2) {
                Ok(v) => v,
                Err(_) => return err(libc::EFAULT),
            };
            let encoded = val3 as u32;
            let op = (encoded >> 28) & 7;
            let shift_arg = (encoded >> 28) & 8 != 0;
            let cmp = (encoded >> 24) & 15;
            let mut oparg = (encoded >> 12) & 0xfff;
            let cmparg = encoded & 0xfff;
            if shift_arg {
                oparg = 1u32.wrapping_shl(oparg);
            }
            let new = match op {
                0 => oparg,
                1 => old.wrapping_add(oparg),
                2 => old | oparg,
                3 => old & !oparg,
                4 => old ^ oparg,
                _ => return err(libc::ENOSYS),
            };
            if k.write_u32(uaddr2, new).is_err() {
                return err(libc::EFAULT);
            }
            let (o, c) = (old as i32, cmparg as i32);
            let hit = match cmp {
                0 => o == c,
                1 => o != c,
                2 => o < c,
                3 => o <= c,
                4 => o > c,
                5 => o >= c,
                _ => return err(libc::ENOSYS),
            };
            let mut n = futex_wake(k, uaddr, private, val as u32 as usize, FUTEX_BITSET_ALL);
            if hit {
                n += futex_wake(
                    k,
                    uaddr2,
                    private,
                    timeout as u32 as usize,
                    FUTEX_BITSET_ALL,
                );
            }
            SysResult::Ret(n as i64)
        }
        6 | 7 | 8 | 11 | 12 | 13 => {
            SysResult::Unsupported(format!("futex priority-inheritance operation {cmd}"))
        }
        _ => err(libc::ENOSYS),
    }
}
