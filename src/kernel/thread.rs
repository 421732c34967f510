//! Guest threads and what they wait on.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::arch::cpu::{ExtendedState, UserRegs};
use crate::code::Site;
pub use crate::ids::{Nanos, Tid};

/// Why a thread cannot run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Wait {
    /// `futex` wait on a word (at `addr` in the waiter's space; which
    /// futex it is, `key`), with the bitset it waits for.
    Futex {
        addr: u64,
        key: super::futex::FutexKey,
        bitset: u32,
        deadline: Option<Nanos>,
    },
    /// `nanosleep` / `clock_nanosleep`.
    Sleep { deadline: Nanos },
    /// `poll` / `ppoll` with nothing ready; taken up again (system call
    /// `nr` re-executed) when a pipe changes.
    Poll { deadline: Option<Nanos>, nr: u64 },
    /// A read of an empty pipe or a write that does not fit (`len` bytes);
    /// taken up again (system call `nr` re-executed) when it can go on.
    Pipe {
        id: u64,
        write: bool,
        len: usize,
        nr: u64,
    },
    /// `rt_sigsuspend` / `pause`: waits for a signal.
    Signal,
    /// `rt_sigtimedwait`: waits for a signal of `set`, blocked or not; the
    /// sender completes the call (the signal taken, its `siginfo_t` at
    /// `info`) when one arrives.
    SigWait {
        set: u64,
        /// Where the caller wants the signal's `siginfo_t` (0: nowhere).
        info: u64,
        deadline: Option<Nanos>,
    },
    /// `wait4` / `waitid` with no child to report yet; taken up again
    /// (system call `nr` re-executed) when a child of its process ends.
    Child { nr: u64 },
    /// The parent of a `vfork` child, until the child execs or exits.
    Vfork { child: u32 },
    /// A read of descriptor `fd` (a timer or signal descriptor) with
    /// nothing to read; taken up again (system call `nr` re-executed) once
    /// the descriptor is readable.
    Readable { fd: i32, nr: u64 },
}

impl Wait {
    /// When a timer ends the wait, if ever.
    pub fn deadline(&self) -> Option<Nanos> {
        match self {
            Wait::Futex { deadline, .. }
            | Wait::Poll { deadline, .. }
            | Wait::SigWait { deadline, .. } => *deadline,
            Wait::Sleep { deadline } => Some(*deadline),
            Wait::Signal
            | Wait::Pipe { .. }
            | Wait::Child { .. }
            | Wait::Vfork { .. }
            | Wait::Readable { .. } => None,
        }
    }

    /// Whether a pipe, a counter or a descriptor becoming ready ends the
    /// wait (the call is taken up again).
    fn ends_by_io(&self) -> bool {
        matches!(
            self,
            Wait::Pipe { .. } | Wait::Poll { .. } | Wait::Readable { .. }
        )
    }

    /// The result the blocked call returns when its timer ends it.
    pub fn timeout_result(&self) -> i64 {
        match self {
            Wait::Futex { .. } => -(libc::ETIMEDOUT as i64),
            Wait::SigWait { .. } => -(libc::EAGAIN as i64),
            Wait::Sleep { .. } | Wait::Poll { .. } => 0,
            Wait::Signal
            | Wait::Pipe { .. }
            | Wait::Child { .. }
            | Wait::Vfork { .. }
            | Wait::Readable { .. } => -(libc::EINTR as i64),
        }
    }
}

/// A thread's scheduling state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ThreadState {
    Runnable,
    Blocked(Wait),
    Exited,
}

/// An alternate signal stack (`sigaltstack`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AltStack {
    pub sp: u64,
    pub size: u64,
    pub flags: i32,
}

/// A signal waiting to be delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingSignal {
    pub signo: u32,
    pub code: i32,
    /// `si_addr` for faults; sender pid for kill-style signals.
    pub addr: u64,
    pub sender: u32,
    /// A fault raised by the thread's own instruction: cannot be blocked or
    /// ignored (Linux's force_sig).
    pub forced: bool,
}

/// One guest thread.
#[derive(Clone, Debug)]
pub struct Thread {
    pub tid: Tid,
    /// The process the thread belongs to (its thread-group id).
    pub pid: u32,
    pub regs: UserRegs,
    pub fs_base: u64,
    /// The extended register state while the thread is not loaded in the
    /// CPU; `None` while it is (the CPU holds the only copy).
    pub fpu: Option<ExtendedState>,
    /// Changed only through [`Threads::set_state`], which keeps the
    /// indexes the scheduler and the timers read.
    state: ThreadState,
    /// `CLONE_CHILD_CLEARTID` / `set_tid_address`: zeroed and woken at exit.
    pub clear_child_tid: u64,
    pub robust_list: u64,
    pub sigmask: u64,
    pub pending: Vec<PendingSignal>,
    pub altstack: AltStack,
    /// `prctl(PR_SET_NAME)`, at most 15 bytes.
    pub name: String,
    /// Whether the thread asked to give up the CPU at its last step.
    pub yielded: bool,
    /// Whether its last step was a tick (a time slice of computation).
    pub ticked: bool,
    /// The sync site (its instruction's address) of the thread's last step,
    /// if that step was one: an atomic in a retry loop taken again right
    /// after is a retry.
    pub last_site: Option<u64>,
    /// A sync site whose step the thread took and whose instruction it has
    /// not executed yet (it runs when the thread is next entered).
    pub pending_site: Option<PendingSite>,
    /// The mask a call's own signal mask replaced for the call
    /// (`rt_sigsuspend`, `pselect6`, `ppoll`, `epoll_pwait`,
    /// `rt_sigtimedwait`), Linux's saved sigmask: the frame of the signal
    /// that interrupts the call restores it when its handler returns;
    /// otherwise it comes back as the call returns.
    pub saved_mask: Option<u64>,
    /// `set_mempolicy`'s mode (with its flags) and nodes.
    pub mempolicy: (u16, u64),
    /// `PR_SET_TIMERSLACK`, in nanoseconds.
    pub timer_slack: u64,
    /// `PR_SET_PDEATHSIG`: the signal the thread gets when its parent
    /// process ends (0: none).
    pub parent_death_signal: u32,
}

/// Linux's default timer slack (50 µs), which `PR_GET_TIMERSLACK` reports.
pub const DEFAULT_TIMER_SLACK: u64 = 50_000;

/// A sync site a thread stopped at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingSite {
    /// The instruction's address.
    pub va: u64,
    pub site: Site,
    /// Where the step and its lock are reported, and what it does to a
    /// lock.
    pub reported: crate::observe::Reported,
}

impl Thread {
    /// A new runnable thread.
    pub fn new(tid: Tid, regs: UserRegs, name: String) -> Self {
        Thread {
            tid,
            pid: tid.0,
            regs,
            fs_base: 0,
            fpu: Some(ExtendedState::initial()),
            state: ThreadState::Runnable,
            clear_child_tid: 0,
            robust_list: 0,
            sigmask: 0,
            pending: Vec::new(),
            altstack: AltStack::default(),
            name,
            yielded: false,
            ticked: false,
            last_site: None,
            pending_site: None,
            saved_mask: None,
            mempolicy: (0, 0),
            timer_slack: DEFAULT_TIMER_SLACK,
            parent_death_signal: 0,
        }
    }

    pub fn state(&self) -> &ThreadState {
        &self.state
    }

    /// The futex word and key a futex wait is on, which a requeue moves
    /// (nothing the indexes hold).
    pub fn futex_wait_mut(&mut self) -> Option<(&mut u64, &mut super::futex::FutexKey)> {
        match &mut self.state {
            ThreadState::Blocked(Wait::Futex { addr, key, .. }) => Some((addr, key)),
            _ => None,
        }
    }

    pub fn is_runnable(&self) -> bool {
        self.state == ThreadState::Runnable
    }

    pub fn is_alive(&self) -> bool {
        self.state != ThreadState::Exited
    }

    /// Puts back the mask a call's own mask replaced, if any.
    pub fn restore_saved_mask(&mut self) {
        if let Some(m) = self.saved_mask.take() {
            self.sigmask = m;
        }
    }
}

/// Every thread by id, with what the scheduler, the timers and the pipes
/// ask about every step kept apart, so a step costs the same however many
/// threads sleep. Threads are never removed (an exited one stays, as its id
/// is not reused).
#[derive(Clone, Debug, Default)]
pub struct Threads {
    map: BTreeMap<Tid, Thread>,
    index: Index,
}

/// What [`Threads`] keeps apart, all of it a function of the threads'
/// states and pids.
#[derive(Clone, Debug, Default)]
struct Index {
    runnable: BTreeSet<Tid>,
    /// Blocked threads whose wait ends at a time: (deadline, thread).
    deadlines: BTreeSet<(Nanos, Tid)>,
    /// Threads waiting on a pipe, an event counter, a poll or a readable
    /// descriptor: what [`super::sys_pipe::settle`] looks at.
    io_waits: BTreeSet<Tid>,
    /// Live threads by process.
    alive: BTreeMap<u32, usize>,
}

impl Index {
    fn add(&mut self, tid: Tid, pid: u32, state: &ThreadState) {
        match state {
            ThreadState::Runnable => {
                self.runnable.insert(tid);
            }
            ThreadState::Blocked(w) => {
                if let Some(d) = w.deadline() {
                    self.deadlines.insert((d, tid));
                }
                if w.ends_by_io() {
                    self.io_waits.insert(tid);
                }
            }
            ThreadState::Exited => return,
        }
        *self.alive.entry(pid).or_default() += 1;
    }

    fn remove(&mut self, tid: Tid, pid: u32, state: &ThreadState) {
        match state {
            ThreadState::Runnable => {
                self.runnable.remove(&tid);
            }
            ThreadState::Blocked(w) => {
                if let Some(d) = w.deadline() {
                    self.deadlines.remove(&(d, tid));
                }
                self.io_waits.remove(&tid);
            }
            ThreadState::Exited => return,
        }
        if let Some(n) = self.alive.get_mut(&pid) {
            *n -= 1;
            if *n == 0 {
                self.alive.remove(&pid);
            }
        }
    }
}

impl std::ops::Deref for Threads {
    type Target = BTreeMap<Tid, Thread>;

    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

impl Threads {
    /// Adds a thread, its `pid` set (it never changes).
    pub fn insert(&mut self, tid: Tid, t: Thread) {
        self.index.add(tid, t.pid, &t.state);
        if let Some(old) = self.map.insert(tid, t) {
            self.index.remove(tid, old.pid, &old.state);
        }
    }

    /// A thread to change; its state changes only by [`Threads::set_state`].
    pub fn get_mut(&mut self, tid: &Tid) -> Option<&mut Thread> {
        self.map.get_mut(tid)
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut Thread> {
        self.map.values_mut()
    }

    /// Gives `tid` a new state.
    pub fn set_state(&mut self, tid: Tid, state: ThreadState) {
        let Some(t) = self.map.get_mut(&tid) else {
            return;
        };
        self.index.remove(tid, t.pid, &t.state);
        self.index.add(tid, t.pid, &state);
        t.state = state;
    }

    /// Threads that can run, in id order.
    pub fn runnable(&self) -> &BTreeSet<Tid> {
        &self.index.runnable
    }

    /// The earliest time a blocked thread's wait ends.
    pub fn next_deadline(&self) -> Option<Nanos> {
        self.index.deadlines.first().map(|(d, _)| *d)
    }

    /// Threads whose waits end by `now`, in id order.
    pub fn due(&self, now: Nanos) -> Vec<Tid> {
        let mut due: Vec<Tid> = self
            .index
            .deadlines
            .iter()
            .take_while(|(d, _)| *d <= now)
            .map(|(_, t)| *t)
            .collect();
        due.sort_unstable();
        due
    }

    /// Threads waiting on pipes, counters, polls or readable descriptors,
    /// in id order.
    pub fn io_waiters(&self) -> impl Iterator<Item = &Thread> {
        self.index.io_waits.iter().map(|t| &self.map[t])
    }

    /// Live threads of process `pid`.
    pub fn alive_in(&self, pid: u32) -> usize {
        self.index.alive.get(&pid).copied().unwrap_or(0)
    }

    /// Live threads.
    pub fn alive(&self) -> usize {
        self.index.alive.values().sum()
    }
}
