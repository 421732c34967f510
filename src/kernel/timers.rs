//! Timers on virtual time, of every kind: `alarm`, interval timers,
//! POSIX timers and timer descriptors' (`timerfd`).
//!
//! A timer is a deadline in virtual time. It fires at the end of the step
//! that reaches it, or, when every thread waits, the clock jumps to it (as
//! to a sleeper's deadline): a signal to its process or thread, or an
//! expiration counted on its descriptor, which wakes readers and polls.

use std::collections::{BTreeMap, BTreeSet};

use super::Kernel;
use super::ready::Ready;
use super::signal;
use super::thread::{Nanos, PendingSignal, Tid};
use crate::ids::Pid;

/// What a timer does when it fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Action {
    /// Sends `signo` to its process (or to one thread of it).
    Signal { signo: u32, thread: Option<Tid> },
    /// Counts an expiration on its `timerfd`.
    Count,
    /// Nothing (SIGEV_NONE): only `timer_gettime` sees it.
    Nothing,
}

/// Which timer of a process this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Slot {
    /// `setitimer`'s ITIMER_REAL (which `alarm` shares), VIRTUAL or PROF.
    Interval(u32),
    /// A POSIX timer, by the id `timer_create` returned.
    Posix(u32),
    /// A timer descriptor's, by its id.
    Fd(u64),
}

#[derive(Clone, Debug)]
pub(super) struct Timer {
    pub(super) action: Action,
    /// When it fires next; `None` while disarmed.
    pub(super) deadline: Option<Nanos>,
    /// The period after the first expiration (0: once).
    pub(super) interval: Nanos,
    /// Expirations not read yet (timerfd), or missed (overruns).
    pub(super) expirations: u64,
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
    /// The id the next timer descriptor made gets.
    pub(super) fn next_fd_id(&self) -> u64 {
        self.next_fd
    }

    /// Timer descriptor `id` (the next id) was made.
    pub(super) fn took_fd_id(&mut self, id: u64) {
        self.next_fd = id + 1;
    }

    /// The earliest deadline of an armed timer.
    pub fn next_deadline(&self) -> Option<Nanos> {
        self.due.first().map(|(d, _)| *d)
    }

    /// The earliest deadline of an armed timer of a process `which` picks.
    pub fn next_deadline_of(&self, which: impl Fn(Pid) -> bool) -> Option<Nanos> {
        let mut all = self.due.iter();
        all.find(|(_, (pid, _))| which(*pid)).map(|(d, _)| *d)
    }

    /// Timer `key`, if it exists.
    pub(super) fn get(&self, key: &(Pid, Slot)) -> Option<&Timer> {
        self.timers.get(key)
    }

    /// Adds (or replaces) timer `key`.
    pub(super) fn insert(&mut self, key: (Pid, Slot), t: Timer) {
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
    pub(super) fn remove(&mut self, key: &(Pid, Slot)) -> Option<Timer> {
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
    pub(super) fn update<R>(
        &mut self,
        key: &(Pid, Slot),
        f: impl FnOnce(&mut Timer) -> R,
    ) -> Option<R> {
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
    pub(super) fn of(&self, pid: Pid) -> Vec<(Pid, Slot)> {
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
    pub(super) fn fd_key(&self, id: u64) -> Option<(Pid, Slot)> {
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
    /// counted. Whether any fired (the readers and polls they wake are to
    /// be taken up again).
    pub(super) fn fire_timers(&mut self) -> bool {
        let now = self.now;
        // In key order, as they have always fired.
        let mut due: Vec<(Pid, Slot)> = self
            .timers
            .due
            .iter()
            .take_while(|(d, _)| *d <= now)
            .map(|(_, k)| *k)
            .filter(|(pid, _)| self.may_run(pid.first_thread()))
            .collect();
        if due.is_empty() {
            return false;
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
        true
    }
}

/// A timer's `(interval, time left)`.
pub(super) fn current(k: &Kernel, key: (Pid, Slot)) -> (Nanos, Nanos) {
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
pub(super) fn arm(k: &mut Kernel, key: (Pid, Slot), action: Action, value: Nanos, interval: Nanos) {
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
