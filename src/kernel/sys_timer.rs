//! Timers on virtual time: `alarm`, interval timers, POSIX timers and
//! timer descriptors (`timerfd`), and signal descriptors (`signalfd`).
//!
//! A timer is a deadline in virtual time. It fires at the end of the step
//! that reaches it, or, when every thread waits, the clock jumps to it (as
//! to a sleeper's deadline): a signal to its process or thread, or an
//! expiration counted on its descriptor, which wakes readers and polls.

use std::collections::{BTreeMap, BTreeSet};

use super::call::{SyscallDef, def};
use super::call::{read_timespec, read_timeval};
use super::files::{FileKind, OpenFile};
use super::process::Pid;
use super::ready::Ready;
use super::signal;
use super::thread::{Nanos, PendingSignal, Tid, Wait};
use super::{FpuAccess, Kernel, SysResult, err};

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

/// What a timer does when it fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    /// Sends `signo` to its process (or to one thread of it).
    Signal { signo: u32, thread: Option<Tid> },
    /// Counts an expiration on its `timerfd`.
    Count,
    /// Nothing (SIGEV_NONE): only `timer_gettime` sees it.
    Nothing,
}

/// Which timer of a process this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Slot {
    /// `setitimer`'s ITIMER_REAL (which `alarm` shares), VIRTUAL or PROF.
    Interval(u32),
    /// A POSIX timer, by the id `timer_create` returned.
    Posix(u32),
    /// A timer descriptor's, by its id.
    Fd(u64),
}

#[derive(Clone, Debug)]
struct Timer {
    action: Action,
    /// When it fires next; `None` while disarmed.
    deadline: Option<Nanos>,
    /// The period after the first expiration (0: once).
    interval: Nanos,
    /// Expirations not read yet (timerfd), or missed (overruns).
    expirations: u64,
}

/// Every process's timers, with the armed ones also by deadline and the
/// descriptors' by id, so a step finds what is due without looking at the
/// others.
#[derive(Clone, Debug, Default)]
pub struct Timers {
    timers: BTreeMap<(Pid, Slot), Timer>,
    next_fd: u64,
    /// Armed timers: (deadline, key).
    due: BTreeSet<(Nanos, (Pid, Slot))>,
    /// The process that made each timer descriptor.
    fd_owner: BTreeMap<u64, Pid>,
}

impl Timers {
    /// The earliest deadline of an armed timer.
    pub fn next_deadline(&self) -> Option<Nanos> {
        self.due.first().map(|(d, _)| *d)
    }

    /// Timer `key`, if it exists.
    fn get(&self, key: &(Pid, Slot)) -> Option<&Timer> {
        self.timers.get(key)
    }

    /// Adds (or replaces) timer `key`.
    fn insert(&mut self, key: (Pid, Slot), t: Timer) {
        self.remove(&key);
        if let Some(d) = t.deadline {
            self.due.insert((d, key));
        }
        if let Slot::Fd(id) = key.1 {
            self.fd_owner.insert(id, key.0);
        }
        self.timers.insert(key, t);
    }

    /// Removes timer `key`.
    fn remove(&mut self, key: &(Pid, Slot)) -> Option<Timer> {
        let t = self.timers.remove(key)?;
        if let Some(d) = t.deadline {
            self.due.remove(&(d, *key));
        }
        if let Slot::Fd(id) = key.1 {
            self.fd_owner.remove(&id);
        }
        Some(t)
    }

    /// Timer `key` to change, its deadline kept in the index.
    fn update<R>(&mut self, key: &(Pid, Slot), f: impl FnOnce(&mut Timer) -> R) -> Option<R> {
        let t = self.timers.get_mut(key)?;
        let before = t.deadline;
        let r = f(t);
        if t.deadline != before {
            if let Some(d) = before {
                self.due.remove(&(d, *key));
            }
            if let Some(d) = t.deadline {
                self.due.insert((d, *key));
            }
        }
        Some(r)
    }

    /// The timers of process `pid`, in key order.
    fn of(&self, pid: Pid) -> Vec<(Pid, Slot)> {
        self.timers
            .range((pid, Slot::Interval(0))..)
            .take_while(|((p, _), _)| *p == pid)
            .map(|(k, _)| *k)
            .collect()
    }

    /// Forgets the timers of an ended process.
    pub fn forget(&mut self, pid: Pid) {
        for key in self.of(pid) {
            self.remove(&key);
        }
    }

    /// What `execve` does to a process's timers: its POSIX timers go; its
    /// interval timers (and `alarm`) and timer descriptors stay.
    pub fn exec(&mut self, pid: Pid) {
        for key in self.of(pid) {
            if matches!(key.1, Slot::Posix(_)) {
                self.remove(&key);
            }
        }
    }

    /// The key of timer descriptor `id`, if its timer exists.
    fn fd_key(&self, id: u64) -> Option<(Pid, Slot)> {
        self.fd_owner.get(&id).map(|p| (*p, Slot::Fd(id)))
    }

    /// Unread expirations of timer descriptor `id`.
    pub fn fd_expirations(&self, id: u64) -> u64 {
        self.fd_key(id)
            .and_then(|key| self.timers.get(&key))
            .map_or(0, |t| t.expirations)
    }
}

impl Kernel {
    /// Fires the timers whose deadline has come: signals sent, expirations
    /// counted (the readers and polls they wake are taken up again).
    pub(super) fn fire_timers(&mut self) {
        let now = self.now;
        // In key order, as they have always fired.
        let mut due: Vec<(Pid, Slot)> = self
            .timers
            .due
            .iter()
            .take_while(|(d, _)| *d <= now)
            .map(|(_, k)| *k)
            .collect();
        if due.is_empty() {
            return;
        }
        self.changes.count(due.len() as u64);
        due.sort_unstable();
        for key in due {
            let fired = self.timers.update(&key, |t| {
                let deadline = t.deadline.expect("due");
                // Expirations since the deadline, the first included.
                let missed = (now - deadline).checked_div(t.interval).unwrap_or(0);
                // A descriptor counts every expiration until read; a signal
                // timer keeps those of its last firing (its overrun + 1).
                if t.action == Action::Count {
                    t.expirations += 1 + missed;
                } else {
                    t.expirations = 1 + missed;
                }
                t.deadline = (t.interval > 0).then(|| deadline + (missed + 1) * t.interval);
                t.action
            });
            let Some(action) = fired else {
                continue;
            };
            if let Slot::Fd(id) = key.1 {
                self.touch(Ready::Timer(id));
            }
            if let Action::Signal { signo, thread } = action {
                let (pid, slot) = key;
                let s = PendingSignal {
                    signo,
                    code: match slot {
                        Slot::Posix(_) => -2, // SI_TIMER
                        _ => 0x80,            // SI_KERNEL
                    },
                    addr: 0,
                    sender: 0,
                    forced: false,
                };
                if self.procs.get(&pid).is_some_and(|p| p.ended.is_none()) {
                    self.with_process(pid, |k| match thread {
                        Some(tid) => signal::send_to_thread(k, tid, s),
                        None => signal::send_to_process(k, s),
                    });
                }
            }
        }
        self.pipes.note_activity();
        super::file::settle(self);
    }
}

fn split(ns: Nanos, unit: u64) -> [u64; 2] {
    [ns / 1_000_000_000, (ns % 1_000_000_000) / unit]
}

/// A timer's `(interval, time left)`.
fn current(k: &Kernel, key: (Pid, Slot)) -> (Nanos, Nanos) {
    match k.timers.get(&key) {
        Some(t) => (
            t.interval,
            t.deadline.map_or(0, |d| d.saturating_sub(k.now).max(1)),
        ),
        None => (0, 0),
    }
}

/// Arms (or, with a zero `value`, disarms) a timer; its previous
/// `(interval, time left)`.
fn arm(k: &mut Kernel, key: (Pid, Slot), action: Action, value: Nanos, interval: Nanos) {
    let deadline = (value > 0).then(|| k.now + value);
    k.timers.insert(
        key,
        Timer {
            action,
            deadline,
            interval,
            expirations: 0,
        },
    );
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
        Some(key) => SysResult::Ret(0.max(k.timers.timers[&key].expirations as i64 - 1)),
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
    let id = k.timers.next_fd;
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
    match k.files.install(f, flags & TFD_CLOEXEC != 0, 0) {
        Ok(fd) => {
            k.timers.next_fd += 1;
            let key = (k.pid, Slot::Fd(id));
            arm(k, key, Action::Count, 0, 0);
            SysResult::Ret(fd as i64)
        }
        Err(e) => err(e),
    }
}

/// The timer behind descriptor `fd`: its key and whether it counts on the
/// real-time clock.
fn timerfd(k: &Kernel, fd: u64) -> Result<((Pid, Slot), bool), i32> {
    match k.files.get(fd as i32).map(|f| f.kind.clone()) {
        Some(FileKind::TimerFd { id, realtime }) => {
            let key = k.timers.fd_key(id).unwrap_or((k.pid, Slot::Fd(id)));
            Ok((key, realtime))
        }
        Some(_) => Err(libc::EINVAL),
        None => Err(libc::EBADF),
    }
}

fn sys_timerfd_settime(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let (key, realtime) = match timerfd(k, a[0]) {
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
    let (key, _) = match timerfd(k, a[0]) {
        Ok(t) => t,
        Err(e) => return err(e),
    };
    let cur = current(k, key);
    match write_itimerspec(k, a[1], cur) {
        Ok(()) => SysResult::Ret(0),
        Err(e) => err(e),
    }
}

/// `read` of a timer descriptor: the expirations since the last read.
pub fn read_timerfd(k: &mut Kernel, fd: i32, buf: u64, len: u64, nonblock: bool) -> SysResult {
    if len < 8 {
        return err(libc::EINVAL);
    }
    let (key, _) = match timerfd(k, fd as u64) {
        Ok(t) => t,
        Err(e) => return err(e),
    };
    let n = k.timers.get(&key).map_or(0, |t| t.expirations);
    if n == 0 {
        let Slot::Fd(id) = key.1 else {
            unreachable!("a timer descriptor's timer")
        };
        return block_unless(nonblock, fd, Ready::Timer(id));
    }
    if k.write_u64(buf, n).is_err() {
        return err(libc::EFAULT);
    }
    k.timers.update(&key, |t| t.expirations = 0);
    SysResult::Ret(8)
}

fn block_unless(nonblock: bool, fd: i32, on: Ready) -> SysResult {
    if nonblock {
        err(libc::EAGAIN)
    } else {
        SysResult::Block(Wait::Readable {
            fd,
            nr: libc::SYS_read as u64,
            on,
        })
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
        return match k.files.get(fd as i32).map(|f| &f.kind) {
            Some(FileKind::SignalFd { .. }) => {
                k.files.set_kind(fd as i32, FileKind::SignalFd { mask });
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
    match k.files.install(f, flags & SFD_CLOEXEC != 0, 0) {
        Ok(fd) => SysResult::Ret(fd as i64),
        Err(e) => err(e),
    }
}

/// Whether a signal of `mask` waits for the current process (its thread
/// first, as Linux reads the thread's queue before the process's).
pub fn signal_waiting(k: &Kernel, mask: u64) -> bool {
    k.threads.with_pending(k.pid).any(|t| {
        k.threads[&t]
            .pending()
            .iter()
            .any(|s| mask & signal::bit(s.signo) != 0)
    })
}

/// `read` of a signal descriptor: takes pending signals of its mask, one
/// `signalfd_siginfo` (128 bytes) each.
pub fn read_signalfd(
    k: &mut Kernel,
    fd: i32,
    mask: u64,
    buf: u64,
    len: u64,
    nonblock: bool,
) -> SysResult {
    if len < 128 {
        return err(libc::EINVAL);
    }
    let pid = k.pid;
    let me = k.current;
    // Only threads with signals pending have any to give.
    let mut order: Vec<Tid> = vec![me];
    order.extend(k.threads.with_pending(pid).filter(|t| *t != me));
    k.changes.count(order.len() as u64);
    let mut out = Vec::new();
    for tid in order {
        while out.len() as u64 + 128 <= len {
            let Some(t) = k.threads.get(&tid) else {
                break;
            };
            let Some(i) = t
                .pending()
                .iter()
                .position(|s| mask & signal::bit(s.signo) != 0)
            else {
                break;
            };
            let Some(s) = k.threads.take_pending(tid, i) else {
                break;
            };
            let mut info = [0u8; 128];
            info[0..4].copy_from_slice(&s.signo.to_le_bytes());
            info[8..12].copy_from_slice(&s.code.to_le_bytes());
            info[12..16].copy_from_slice(&s.sender.to_le_bytes());
            info[56..64].copy_from_slice(&s.addr.to_le_bytes());
            out.extend_from_slice(&info);
        }
    }
    if out.is_empty() {
        return block_unless(nonblock, fd, Ready::Signals(pid));
    }
    if k.write(buf, &out).is_err() {
        return err(libc::EFAULT);
    }
    SysResult::Ret(out.len() as i64)
}
