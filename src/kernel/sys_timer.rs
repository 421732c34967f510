//! The timer calls: `alarm`, interval timers, POSIX timers and timer
//! descriptors (`timerfd`), and signal descriptors (`signalfd`); the
//! timers are `kernel::timers`', the descriptors `file::timerfd`'s and
//! `file::signalfd`'s.
//!
//! A timer is a deadline in virtual time. It fires at the end of the step
//! that reaches it, or, when every thread waits, the clock jumps to it (as
//! to a sleeper's deadline): a signal to its process or thread, or an
//! expiration counted on its descriptor, which wakes readers and polls.

use super::call::{SyscallDef, def};
use super::call::{read_timespec, read_timeval};
use super::file::timerfd::timer_of;
use super::files::{FileKind, OpenFile};
use super::signal;
use super::thread::{Nanos, Tid};
use super::timers::{Action, Slot, Timer, arm, current};
use super::{FpuAccess, Kernel, SysResult, err};
use crate::ids::Pid;

pub const CALLS: &[SyscallDef] = &[
    def(libc::SYS_alarm, sys_alarm, "on virtual time"),
    def(
        libc::SYS_setitimer,
        sys_setitimer,
        "ITIMER_REAL, ITIMER_VIRTUAL and ITIMER_PROF, all on virtual time",
    ),
    def(libc::SYS_getitimer, sys_getitimer, ""),
    def(
        libc::SYS_timer_create,
        sys_timer_create,
        "SIGEV_SIGNAL, SIGEV_NONE and SIGEV_THREAD_ID, on virtual time",
    ),
    def(libc::SYS_timer_settime, sys_timer_settime, ""),
    def(libc::SYS_timer_gettime, sys_timer_gettime, ""),
    def(libc::SYS_timer_getoverrun, sys_timer_getoverrun, ""),
    def(libc::SYS_timer_delete, sys_timer_delete, ""),
    def(
        libc::SYS_timerfd_create,
        sys_timerfd_create,
        "CLOCK_REALTIME, CLOCK_MONOTONIC and CLOCK_BOOTTIME, on virtual time",
    ),
    def(libc::SYS_timerfd_settime, sys_timerfd_settime, ""),
    def(libc::SYS_timerfd_gettime, sys_timerfd_gettime, ""),
    def(libc::SYS_signalfd, sys_signalfd, ""),
    def(
        libc::SYS_signalfd4,
        sys_signalfd4,
        "SFD_NONBLOCK and SFD_CLOEXEC",
    ),
];

fn split(ns: Nanos, unit: u64) -> [u64; 2] {
    [ns / 1_000_000_000, (ns % 1_000_000_000) / unit]
}

fn itimer_signal(which: u32) -> u32 {
    match which {
        0 => libc::SIGALRM as u32,
        1 => libc::SIGVTALRM as u32,
        _ => libc::SIGPROF as u32,
    }
}

fn sys_alarm(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let key = (k.pid, Slot::Interval(0));
    let (_, left) = current(k, key);
    let action = Action::Signal {
        signo: libc::SIGALRM as u32,
        thread: None,
    };
    arm(k, key, action, (a[0] as u32) as u64 * 1_000_000_000, 0);
    // Rounded to the nearest second, at least one while armed (Linux).
    let secs = if left == 0 {
        0
    } else {
        ((left + 500_000_000) / 1_000_000_000).max(1)
    };
    SysResult::Ret(secs as i64)
}

fn write_itimerval(k: &mut Kernel, at: u64, (interval, left): (Nanos, Nanos)) -> Result<(), i32> {
    let [is, ius] = split(interval, 1000);
    let [vs, vus] = split(left, 1000);
    for (i, w) in [is, ius, vs, vus].into_iter().enumerate() {
        k.write_u64(at + i as u64 * 8, w)
            .map_err(|_| libc::EFAULT)?;
    }
    Ok(())
}

fn sys_getitimer(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    if a[0] > 2 {
        return err(libc::EINVAL);
    }
    let cur = current(k, (k.pid, Slot::Interval(a[0] as u32)));
    match write_itimerval(k, a[1], cur) {
        Ok(()) => SysResult::Ret(0),
        Err(e) => err(e),
    }
}

fn sys_setitimer(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let which = a[0];
    if which > 2 {
        return err(libc::EINVAL);
    }
    let (interval, value) = if a[1] == 0 {
        (0, 0)
    } else {
        match (read_timeval(k, a[1]), read_timeval(k, a[1] + 16)) {
            (Ok(i), Ok(v)) => (i, v),
            (Err(e), _) | (_, Err(e)) => return err(e),
        }
    };
    let key = (k.pid, Slot::Interval(which as u32));
    let old = current(k, key);
    if a[2] != 0 {
        if let Err(e) = write_itimerval(k, a[2], old) {
            return err(e);
        }
    }
    let action = Action::Signal {
        signo: itimer_signal(which as u32),
        thread: None,
    };
    arm(k, key, action, value, interval);
    SysResult::Ret(0)
}

const SIGEV_SIGNAL: i32 = 0;
const SIGEV_NONE: i32 = 1;
const SIGEV_THREAD_ID: i32 = 4;

fn valid_clock(clock: u64) -> bool {
    // REALTIME, MONOTONIC, PROCESS_CPUTIME, THREAD_CPUTIME, MONOTONIC_RAW,
    // REALTIME_COARSE, MONOTONIC_COARSE, BOOTTIME: all run on virtual time.
    clock <= 7
}

fn sys_timer_create(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let [clock, sevp, out, ..] = a;
    if !valid_clock(clock) {
        return err(libc::EINVAL);
    }
    let action = if sevp == 0 {
        Action::Signal {
            signo: libc::SIGALRM as u32,
            thread: None,
        }
    } else {
        // struct sigevent: sigev_value (8), sigev_signo (4), sigev_notify
        // (4), then the thread id for SIGEV_THREAD_ID.
        let (signo, notify, tid) = match (
            k.read_u32(sevp + 8),
            k.read_u32(sevp + 12),
            k.read_u32(sevp + 16),
        ) {
            (Ok(s), Ok(n), Ok(t)) => (s, n as i32, t),
            _ => return err(libc::EFAULT),
        };
        let valid_signal = (1..=64).contains(&signo);
        match notify {
            SIGEV_NONE => Action::Nothing,
            SIGEV_SIGNAL if valid_signal => Action::Signal {
                signo,
                thread: None,
            },
            SIGEV_THREAD_ID if valid_signal => {
                let ok = k
                    .threads
                    .get(&Tid(tid))
                    .is_some_and(|t| t.pid == k.pid && t.is_alive());
                if !ok {
                    return err(libc::EINVAL);
                }
                Action::Signal {
                    signo,
                    thread: Some(Tid(tid)),
                }
            }
            _ => return err(libc::EINVAL),
        }
    };
    let pid = k.pid;
    let id = (0u32..)
        .find(|i| k.timers.get(&(pid, Slot::Posix(*i))).is_none())
        .expect("a free timer id");
    if k.write_u32(out, id).is_err() {
        return err(libc::EFAULT);
    }
    k.timers.insert(
        (pid, Slot::Posix(id)),
        Timer {
            action,
            deadline: None,
            interval: 0,
            expirations: 0,
        },
    );
    SysResult::Ret(0)
}

/// The POSIX timer `id` of the current process, if it exists.
fn posix_key(k: &Kernel, id: u64) -> Option<(Pid, Slot)> {
    let key = (k.pid, Slot::Posix(u32::try_from(id).ok()?));
    k.timers.get(&key).is_some().then_some(key)
}

fn write_itimerspec(k: &mut Kernel, at: u64, (interval, left): (Nanos, Nanos)) -> Result<(), i32> {
    let [is, ins] = split(interval, 1);
    let [vs, vns] = split(left, 1);
    for (i, w) in [is, ins, vs, vns].into_iter().enumerate() {
        k.write_u64(at + i as u64 * 8, w)
            .map_err(|_| libc::EFAULT)?;
    }
    Ok(())
}

/// `timer_settime` and `timerfd_settime`: arms `key` from the itimerspec
/// at `new` (absolute on `clock` with `absolute`), writing the old setting
/// to `old`.
fn settime(
    k: &mut Kernel,
    key: (Pid, Slot),
    absolute: bool,
    realtime: bool,
    new: u64,
    old: u64,
) -> SysResult {
    let (interval, value) = match (read_timespec(k, new), read_timespec(k, new + 16)) {
        (Ok(i), Ok(v)) => (i, v),
        (Err(e), _) | (_, Err(e)) => return err(e),
    };
    let previous = current(k, key);
    if old != 0 {
        if let Err(e) = write_itimerspec(k, old, previous) {
            return err(e);
        }
    }
    let value = if absolute && value > 0 {
        let at = if realtime {
            value.saturating_sub(k.config.epoch * 1_000_000_000)
        } else {
            value
        };
        // A time already past fires at once.
        at.saturating_sub(k.now).max(1)
    } else {
        value
    };
    let action = k.timers.get(&key).map(|t| t.action);
    arm(k, key, action.unwrap_or(Action::Count), value, interval);
    SysResult::Ret(0)
}

const TIMER_ABSTIME: u64 = 1;

fn sys_timer_settime(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let Some(key) = posix_key(k, a[0]) else {
        return err(libc::EINVAL);
    };
    if a[2] == 0 {
        return err(libc::EFAULT);
    }
    settime(k, key, a[1] & TIMER_ABSTIME != 0, true, a[2], a[3])
}

fn sys_timer_gettime(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let Some(key) = posix_key(k, a[0]) else {
        return err(libc::EINVAL);
    };
    let cur = current(k, key);
    match write_itimerspec(k, a[1], cur) {
        Ok(()) => SysResult::Ret(0),
        Err(e) => err(e),
    }
}

fn sys_timer_getoverrun(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    match posix_key(k, a[0]) {
        Some(key) => {
            SysResult::Ret(0.max(k.timers.get(&key).expect("a POSIX timer").expirations as i64 - 1))
        }
        None => err(libc::EINVAL),
    }
}

fn sys_timer_delete(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    match posix_key(k, a[0]) {
        Some(key) => {
            k.timers.remove(&key);
            SysResult::Ret(0)
        }
        None => err(libc::EINVAL),
    }
}

const TFD_NONBLOCK: u64 = libc::O_NONBLOCK as u64;
const TFD_CLOEXEC: u64 = libc::O_CLOEXEC as u64;

fn sys_timerfd_create(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let [clock, flags, ..] = a;
    if !matches!(clock, 0 | 1 | 7 | 8 | 9) {
        return err(libc::EINVAL);
    }
    if flags & !(TFD_NONBLOCK | TFD_CLOEXEC) != 0 {
        return err(libc::EINVAL);
    }
    let id = k.timers.next_fd_id();
    let f = OpenFile {
        kind: FileKind::TimerFd {
            id,
            realtime: clock == 0 || clock == 8,
        },
        path: "anon_inode:[timerfd]".into(),
        offset: 0,
        flags: libc::O_RDWR | (flags & TFD_NONBLOCK) as i32,
        shared: None,
    };
    match k.files_mut().install(f, flags & TFD_CLOEXEC != 0, 0) {
        Ok(fd) => {
            k.timers.took_fd_id(id);
            let key = (k.pid, Slot::Fd(id));
            arm(k, key, Action::Count, 0, 0);
            SysResult::Ret(fd as i64)
        }
        Err(e) => err(e),
    }
}

fn sys_timerfd_settime(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let (key, realtime) = match timer_of(k, a[0]) {
        Ok(t) => t,
        Err(e) => return err(e),
    };
    // TFD_TIMER_ABSTIME and TFD_TIMER_CANCEL_ON_SET (no clock is ever set).
    if a[1] & !3 != 0 {
        return err(libc::EINVAL);
    }
    settime(k, key, a[1] & 1 != 0, realtime, a[2], a[3])
}

fn sys_timerfd_gettime(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let (key, _) = match timer_of(k, a[0]) {
        Ok(t) => t,
        Err(e) => return err(e),
    };
    let cur = current(k, key);
    match write_itimerspec(k, a[1], cur) {
        Ok(()) => SysResult::Ret(0),
        Err(e) => err(e),
    }
}

fn sys_signalfd(k: &mut Kernel, cpu: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    sys_signalfd4(k, cpu, [a[0], a[1], a[2], 0, 0, 0])
}

const SFD_NONBLOCK: u64 = libc::O_NONBLOCK as u64;
const SFD_CLOEXEC: u64 = libc::O_CLOEXEC as u64;

fn sys_signalfd4(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let [fd, mask_at, size, flags, ..] = a;
    if size != 8 || flags & !(SFD_NONBLOCK | SFD_CLOEXEC) != 0 {
        return err(libc::EINVAL);
    }
    let Ok(mask) = k.read_u64(mask_at) else {
        return err(libc::EFAULT);
    };
    // SIGKILL and SIGSTOP cannot be read from a descriptor.
    let mask = mask & !signal::UNBLOCKABLE;
    if fd as i32 != -1 {
        return match k.files().get(fd as i32).map(|f| &f.kind) {
            Some(FileKind::SignalFd { .. }) => {
                k.files_mut()
                    .set_kind(fd as i32, FileKind::SignalFd { mask });
                SysResult::Ret(fd as i64)
            }
            Some(_) => err(libc::EINVAL),
            None => err(libc::EBADF),
        };
    }
    let f = OpenFile {
        kind: FileKind::SignalFd { mask },
        path: "anon_inode:[signalfd]".into(),
        offset: 0,
        flags: libc::O_RDWR | (flags & SFD_NONBLOCK) as i32,
        shared: None,
    };
    match k.files_mut().install(f, flags & SFD_CLOEXEC != 0, 0) {
        Ok(fd) => SysResult::Ret(fd as i64),
        Err(e) => err(e),
    }
}
