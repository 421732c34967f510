//! Readiness by event: which object a blocked call waits on, and which
//! objects changed since the waiters last looked, so that the end of a
//! step looks at the waiters of what changed and at nothing else.
//!
//! Every change that can let a waiting call go on *touches* the object
//! (`Kernel::touch`): data moving through a pipe or a counter, a
//! connection or datagram arriving, a timer firing, a signal arriving, a
//! process ending, an end of a pipe closing for good. The descriptor
//! tables log what they begin and cease to hold; the kernel counts, per
//! object, the tables of live processes holding it, so "is this end still
//! open anywhere" is a lookup, not a walk over every process.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::Kernel;
use super::files::Held;
use crate::ids::Pid;

/// An object a blocked call can wait on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Ready {
    /// Pipe `id` (a direction of a socket pair or connection too).
    Pipe(u64),
    /// Event counter `id`.
    Counter(u64),
    /// Bound socket `id`'s queues (connections, datagrams).
    Socket(u64),
    /// Timer descriptor `id`.
    Timer(u64),
    /// The signals pending for process `pid` ([`ANY_PROCESS`]: for any).
    Signals(Pid),
    /// Process `pid`'s end.
    Ended(Pid),
    /// Epoll instance `id`: one of the descriptors it watches.
    Epoll(u64),
    /// Pseudoterminal pair `id`: data moved, settings changed, an end
    /// closed.
    Pty(u32),
}

/// The `pid` of [`Ready::Signals`] that every signal touches: what an
/// epoll instance's signal descriptor watches, since the process that
/// waits on the instance is the one whose signals count.
pub const ANY_PROCESS: Pid = Pid(0);

/// What changed since the waiters last looked, and how many tables hold
/// each object.
#[derive(Clone, Debug, Default)]
pub struct Changes {
    /// Objects touched since the end of the last system call.
    touched: BTreeSet<Ready>,
    /// Objects some table let go of since they were last collected.
    dropped: Vec<Held>,
    /// Live descriptor tables holding each object, as of each table's
    /// last log (the current table's newer changes are in its log).
    holders: BTreeMap<Held, u32>,
    /// Pipe and socket-pair end descriptors in the tables of the processes
    /// other than the current one (a table changes only while its process
    /// is current, so the sum is kept rather than walked).
    other_ends: usize,
    /// Waiters, epoll interests, threads, free descriptor ranges, timers
    /// and futex waiters the kernel looked at to take steps: its work,
    /// counted the same on every host, which per step must not grow with
    /// what the guest holds.
    looked_at: u64,
}

impl Changes {
    /// Takes the objects touched since the last call.
    pub(super) fn take_touched(&mut self) -> BTreeSet<Ready> {
        std::mem::take(&mut self.touched)
    }

    /// Takes the objects let go of since the last call.
    pub(super) fn take_dropped(&mut self) -> Vec<Held> {
        std::mem::take(&mut self.dropped)
    }

    /// Whether something was let go of since the last collection.
    pub(super) fn any_dropped(&self) -> bool {
        !self.dropped.is_empty()
    }

    /// Counts `n` things looked at.
    pub(super) fn count(&mut self, n: u64) {
        self.looked_at += n;
    }
}

impl Kernel {
    /// Object `key` changed in a way that may let a call waiting on it go
    /// on: its waiters look again at the end of the system call, and the
    /// epoll instances watching it mark it.
    pub(super) fn touch(&mut self, key: Ready) {
        self.changes.touched.insert(key);
        for ep in self.epolls.mark(key) {
            self.changes.touched.insert(Ready::Epoll(ep));
        }
    }

    /// Whether a description in a live process holds `h`.
    pub(super) fn held_anywhere(&self, h: Held) -> bool {
        let tables = self.changes.holders.get(&h).copied().unwrap_or(0);
        i64::from(tables) + self.files().held_change(h) > 0
    }

    /// Takes in what the current descriptor table did since it was last
    /// looked at: objects it began or ceased to hold (an end of a pipe
    /// that no table holds any more touches the pipe) and numbers that name
    /// something else now (epoll instances watching them look again).
    pub(super) fn sync_files(&mut self) {
        let log = self.files_mut().take_log();
        self.changes.count(log.probes);
        let mut lost = Vec::new();
        for (h, now) in log.held {
            let n = self.changes.holders.entry(h).or_default();
            if now {
                *n += 1;
            } else {
                *n -= 1;
                if *n == 0 {
                    self.changes.holders.remove(&h);
                }
                lost.push(h);
            }
        }
        self.let_go(lost);
        for n in log.rebound {
            for ep in self.epoll_rebound(n) {
                self.changes.touched.insert(Ready::Epoll(ep));
            }
        }
    }

    /// Objects a table let go of: candidates to forget; the pipes whose
    /// end is now closed everywhere are touched.
    fn let_go(&mut self, lost: Vec<Held>) {
        for h in &lost {
            if let Held::PipeEnd { id, write } = *h {
                if !self.held_anywhere(*h) && !self.sockets.queues_end(id, write) {
                    self.touch(Ready::Pipe(id));
                }
            }
            if let Held::PtyMaster(id) | Held::PtySlave(id) = *h {
                if !self.held_anywhere(*h) {
                    self.touch(Ready::Pty(id));
                }
            }
        }
        self.changes.dropped.extend(lost);
    }

    /// Another process becomes current: the current table's changes are
    /// taken in and its ends counted among the others'.
    pub(super) fn leaving_files(&mut self) {
        self.sync_files();
        self.changes.other_ends += self.files().pipe_ends();
    }

    /// The current process's table is the current table now.
    pub(super) fn entering_files(&mut self) {
        self.changes.other_ends -= self.files().pipe_ends();
    }

    /// A new process's table, a copy of the current one, is made.
    pub(super) fn copied_files(&mut self, copy: &super::files::FdTable) {
        for h in copy.all_held() {
            *self.changes.holders.entry(h).or_default() += 1;
        }
        self.changes.other_ends += copy.pipe_ends();
    }

    /// The current process ended: its table goes, with all it held.
    pub(super) fn drop_files(&mut self) {
        self.sync_files();
        let table = std::mem::take(self.files_mut());
        let mut lost = Vec::new();
        for h in table.all_held() {
            if let Some(n) = self.changes.holders.get_mut(&h) {
                *n -= 1;
                if *n == 0 {
                    self.changes.holders.remove(&h);
                }
            }
            lost.push(h);
        }
        self.let_go(lost);
    }

    /// Pipe and socket-pair end descriptors in the live processes.
    pub(super) fn pipe_ends(&self) -> usize {
        self.files().pipe_ends() + self.changes.other_ends
    }

    /// What the kernel looked at so far to take the run's steps (waiters,
    /// epoll interests, threads, free descriptor ranges, timers, futex
    /// waiters): its work, counted the same on every host.
    pub fn looked_at(&self) -> u64 {
        self.changes.looked_at + self.futex.looked_at()
    }
}
