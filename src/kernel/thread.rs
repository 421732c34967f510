//! Guest threads and what they wait on.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::ready::Ready;
use crate::arch::cpu::{ExtendedState, UserRegs};
use crate::code::Site;
use crate::ids::Pid;
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
    /// `poll`, `select`, `epoll_wait` and their kin with nothing ready;
    /// taken up again (system call `nr` re-executed) when one of the
    /// objects `on` changes.
    Poll {
        deadline: Option<Nanos>,
        nr: u64,
        on: Vec<Ready>,
    },
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
    /// A read of descriptor `fd` (a timer or signal descriptor, a socket)
    /// with nothing to read, or a datagram with no room for it; taken up
    /// again (system call `nr` re-executed) when object `on` changes.
    Readable { fd: i32, nr: u64, on: Ready },
}

/// Waits on event counters carry their id with this bit set, to share
/// [`Wait::Pipe`] with pipes.
pub const COUNTER: u64 = 1 << 63;

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

    /// The objects whose change may end the wait (the call is taken up
    /// again), if any.
    pub fn waits_on(&self) -> Vec<Ready> {
        match self {
            Wait::Pipe { id, .. } if id & COUNTER != 0 => {
                vec![Ready::Counter(id & !COUNTER)]
            }
            Wait::Pipe { id, .. } => vec![Ready::Pipe(*id)],
            Wait::Poll { on, .. } => on.clone(),
            Wait::Readable { on, .. } => vec![*on],
            _ => Vec::new(),
        }
    }

    /// Whether it is a poll or a read of a descriptor, which (in
    /// reproducers of format 7 and earlier, schedules of version 3 and
    /// earlier) any change takes up again.
    fn is_poll(&self) -> bool {
        matches!(self, Wait::Poll { .. } | Wait::Readable { .. })
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
    pub pid: Pid,
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
    /// Changed only through [`Threads`], which keeps the threads by mask
    /// and those with signals pending.
    sigmask: u64,
    pending: Vec<PendingSignal>,
    pub altstack: AltStack,
    /// `prctl(PR_SET_NAME)`, at most 15 bytes.
    pub name: String,
    /// Whether the thread asked to give up the CPU at its last step.
    pub yielded: bool,
    /// Whether its last step was a tick (a stretch of computation).
    pub ticked: bool,
    /// Ticks it took since it last got the CPU: every
    /// `sched::TICKS_PER_SLICE`-th ends its slice.
    pub ticks_in_a_row: u32,
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
    /// A working directory apart from its process's (an id in the
    /// kernel's `own_cwds`): after `unshare(CLONE_FS)`, made by `clone`
    /// without `CLONE_FS`, or shared with the thread that made it.
    pub own_cwd: Option<u32>,
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
            pid: Pid::from(tid),
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
            ticks_in_a_row: 0,
            last_site: None,
            pending_site: None,
            saved_mask: None,
            mempolicy: (0, 0),
            timer_slack: DEFAULT_TIMER_SLACK,
            parent_death_signal: 0,
            own_cwd: None,
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

    /// The signals it blocks.
    pub fn sigmask(&self) -> u64 {
        self.sigmask
    }

    /// Signals waiting to be delivered to it, oldest first.
    pub fn pending(&self) -> &[PendingSignal] {
        &self.pending
    }

    /// The thread blocking `mask` (before it joins [`Threads`]).
    pub fn with_sigmask(mut self, mask: u64) -> Self {
        self.sigmask = mask;
        self
    }
}

/// Every thread by id, with what the scheduler, the timers, the pipes and
/// the signals ask about every step kept apart, so a step costs the same
/// however many threads there are. Threads are never removed (an exited
/// one stays, as its id is not reused).
#[derive(Clone, Debug, Default)]
pub struct Threads {
    map: BTreeMap<Tid, Thread>,
    index: Index,
}

/// What [`Threads`] keeps apart, all of it a function of the threads'
/// states, pids, masks and pending signals.
#[derive(Clone, Debug, Default)]
struct Index {
    runnable: BTreeSet<Tid>,
    /// Blocked threads whose wait ends at a time: (deadline, thread).
    deadlines: BTreeSet<(Nanos, Tid)>,
    /// Threads waiting on a pipe, an event counter, a poll or a readable
    /// descriptor, by the objects whose change may end their waits: what
    /// [`super::file::settle`] looks at.
    waiting_on: BTreeMap<Ready, BTreeSet<Tid>>,
    /// Threads in a poll or a read of a descriptor.
    polls: BTreeSet<Tid>,
    /// Live threads by process.
    members: BTreeMap<Pid, BTreeSet<Tid>>,
    /// How many threads live.
    live: usize,
    /// Live threads by process and signal mask (a process's threads
    /// usually share a few masks): whom a process's signal goes to.
    masks: BTreeMap<Pid, BTreeMap<u64, BTreeSet<Tid>>>,
    /// Threads in `wait4`/`waitid`, by process.
    child_waits: BTreeMap<Pid, BTreeSet<Tid>>,
    /// Threads with signals pending, by process.
    pending: BTreeMap<Pid, BTreeSet<Tid>>,
}

/// Adds `tid` to the set under `key`.
fn file<K: Ord>(map: &mut BTreeMap<K, BTreeSet<Tid>>, key: K, tid: Tid) {
    map.entry(key).or_default().insert(tid);
}

/// Takes `tid` out of the set under `key`, dropping the set once empty.
fn unfile<K: Ord>(map: &mut BTreeMap<K, BTreeSet<Tid>>, key: &K, tid: Tid) {
    if let Some(set) = map.get_mut(key) {
        set.remove(&tid);
        if set.is_empty() {
            map.remove(key);
        }
    }
}

impl Index {
    fn add(&mut self, t: &Thread, state: &ThreadState) {
        let tid = t.tid;
        match state {
            ThreadState::Runnable => {
                self.runnable.insert(tid);
            }
            ThreadState::Blocked(w) => {
                if let Some(d) = w.deadline() {
                    self.deadlines.insert((d, tid));
                }
                for key in w.waits_on() {
                    file(&mut self.waiting_on, key, tid);
                }
                if w.is_poll() {
                    self.polls.insert(tid);
                }
                if matches!(w, Wait::Child { .. }) {
                    file(&mut self.child_waits, t.pid, tid);
                }
            }
            ThreadState::Exited => return,
        }
        file(&mut self.members, t.pid, tid);
        file(self.masks.entry(t.pid).or_default(), t.sigmask, tid);
        self.live += 1;
    }

    fn remove(&mut self, t: &Thread) {
        let tid = t.tid;
        match &t.state {
            ThreadState::Runnable => {
                self.runnable.remove(&tid);
            }
            ThreadState::Blocked(w) => {
                if let Some(d) = w.deadline() {
                    self.deadlines.remove(&(d, tid));
                }
                for key in w.waits_on() {
                    unfile(&mut self.waiting_on, &key, tid);
                }
                self.polls.remove(&tid);
                if matches!(w, Wait::Child { .. }) {
                    unfile(&mut self.child_waits, &t.pid, tid);
                }
            }
            ThreadState::Exited => return,
        }
        unfile(&mut self.members, &t.pid, tid);
        if let Some(by_mask) = self.masks.get_mut(&t.pid) {
            unfile(by_mask, &t.sigmask, tid);
            if by_mask.is_empty() {
                self.masks.remove(&t.pid);
            }
        }
        self.live -= 1;
    }

    /// Files `t` among the threads with signals pending, or not.
    fn pending(&mut self, t: &Thread) {
        if t.pending.is_empty() {
            unfile(&mut self.pending, &t.pid, t.tid);
        } else {
            file(&mut self.pending, t.pid, t.tid);
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
        if let Some(old) = self.map.remove(&tid) {
            self.index.remove(&old);
            unfile(&mut self.index.pending, &old.pid, tid);
        }
        self.index.add(&t, &t.state);
        self.index.pending(&t);
        self.map.insert(tid, t);
    }

    /// A thread to change; its state, mask and pending signals change only
    /// through the methods of [`Threads`].
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
        self.index.remove(t);
        self.index.add(t, &state);
        t.state = state;
    }

    /// Gives `tid` a new signal mask.
    pub fn set_sigmask(&mut self, tid: Tid, mask: u64) {
        let Some(t) = self.map.get_mut(&tid) else {
            return;
        };
        if t.sigmask == mask {
            return;
        }
        let state = t.state.clone();
        self.index.remove(t);
        t.sigmask = mask;
        self.index.add(t, &state);
    }

    /// Puts back the mask a call's own mask replaced, if any.
    pub fn restore_saved_mask(&mut self, tid: Tid) {
        let saved = self.map.get_mut(&tid).and_then(|t| t.saved_mask.take());
        if let Some(m) = saved {
            self.set_sigmask(tid, m);
        }
    }

    /// Changes `tid`'s pending signals with `f`.
    pub fn change_pending<R>(
        &mut self,
        tid: Tid,
        f: impl FnOnce(&mut Vec<PendingSignal>) -> R,
    ) -> Option<R> {
        let t = self.map.get_mut(&tid)?;
        let r = f(&mut t.pending);
        self.index.pending(t);
        Some(r)
    }

    /// Queues `s` for `tid`.
    pub fn push_pending(&mut self, tid: Tid, s: PendingSignal) {
        self.change_pending(tid, |p| p.push(s));
    }

    /// Takes `tid`'s pending signal number `i` (in arrival order).
    pub fn take_pending(&mut self, tid: Tid, i: usize) -> Option<PendingSignal> {
        self.change_pending(tid, |p| (i < p.len()).then(|| p.remove(i)))
            .flatten()
    }

    /// Threads that can run, in id order.
    pub fn runnable(&self) -> &BTreeSet<Tid> {
        &self.index.runnable
    }

    /// The earliest time a blocked thread's wait ends.
    pub fn next_deadline(&self) -> Option<Nanos> {
        self.index.deadlines.first().map(|(d, _)| *d)
    }

    /// The earliest time a wait of a thread `which` picks ends.
    pub fn next_deadline_of(&self, which: impl Fn(Tid) -> bool) -> Option<Nanos> {
        let mut all = self.index.deadlines.iter();
        all.find(|(_, t)| which(*t)).map(|(d, _)| *d)
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

    /// Threads whose waits a change of `key` may end.
    pub fn waiting_on(&self, key: &Ready) -> impl Iterator<Item = Tid> + '_ {
        self.index
            .waiting_on
            .get(key)
            .into_iter()
            .flatten()
            .copied()
    }

    /// Threads in a poll or a read of a descriptor, in id order.
    pub fn polls(&self) -> impl Iterator<Item = Tid> + '_ {
        self.index.polls.iter().copied()
    }

    /// Live threads of process `pid`, in id order.
    pub fn members(&self, pid: Pid) -> impl Iterator<Item = Tid> + '_ {
        self.index.members.get(&pid).into_iter().flatten().copied()
    }

    /// Live threads of process `pid`.
    pub fn alive_in(&self, pid: Pid) -> usize {
        self.index.members.get(&pid).map_or(0, BTreeSet::len)
    }

    /// Live threads.
    pub fn alive(&self) -> usize {
        self.index.live
    }

    /// The live thread of process `pid` that a signal `signo` sent to the
    /// process goes to: the lowest that does not block it, else the lowest;
    /// and how many masks it looked at to find it.
    pub fn signal_target(&self, pid: Pid, signo: u32) -> (Option<Tid>, u64) {
        let bit = 1u64 << (signo - 1); // its bit in a mask
        let masks = self.index.masks.get(&pid);
        let target = masks
            .into_iter()
            .flatten()
            .filter(|(mask, _)| *mask & bit == 0)
            .filter_map(|(_, set)| set.first().copied())
            .min()
            .or_else(|| self.members(pid).next());
        (target, masks.map_or(0, |m| m.len() as u64))
    }

    /// Threads of process `pid` waiting for a child to change.
    pub fn child_waiters(&self, pid: Pid) -> impl Iterator<Item = Tid> + '_ {
        self.index
            .child_waits
            .get(&pid)
            .into_iter()
            .flatten()
            .copied()
    }

    /// Threads of process `pid` with signals pending (live or not), in id
    /// order.
    pub fn with_pending(&self, pid: Pid) -> impl Iterator<Item = Tid> + '_ {
        self.index.pending.get(&pid).into_iter().flatten().copied()
    }

    /// Threads of any process with signals pending, in id order.
    pub fn all_with_pending(&self) -> Vec<Tid> {
        let mut all: Vec<Tid> = self.index.pending.values().flatten().copied().collect();
        all.sort_unstable();
        all
    }
}
