//! Futex wait queues: who waits on which word, in arrival order, so wake-ups
//! are deterministic (first come, first woken).

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::Tid;

/// Which futex a word is, as Linux keys them: a word of a shared mapping
/// (used without FUTEX_PRIVATE_FLAG) by its place in the shared object,
/// so that processes mapping it at different addresses wait on one
/// futex (a POSIX semaphore in `/dev/shm`); any other word by its address
/// in its address space (a forked child's words sit at its parent's
/// addresses, and are others).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum FutexKey {
    Private { space: u32, addr: u64 },
    Shared { object: u64, offset: u64 },
}

/// Waiters by futex.
#[derive(Clone, Debug, Default)]
pub struct FutexTable {
    queues: BTreeMap<FutexKey, VecDeque<(Tid, u32)>>,
}

impl FutexTable {
    /// Adds `tid` to the end of `addr`'s queue.
    pub fn enqueue(&mut self, addr: FutexKey, tid: Tid, bitset: u32) {
        self.queues
            .entry(addr)
            .or_default()
            .push_back((tid, bitset));
    }

    /// Removes `tid` from `addr`'s queue (timeout, signal).
    pub fn remove(&mut self, addr: FutexKey, tid: Tid) {
        if let Some(q) = self.queues.get_mut(&addr) {
            q.retain(|(t, _)| *t != tid);
            if q.is_empty() {
                self.queues.remove(&addr);
            }
        }
    }

    /// Takes up to `n` waiters of `addr` whose bitset meets `bitset`, oldest
    /// first.
    pub fn take(&mut self, addr: FutexKey, n: usize, bitset: u32) -> Vec<Tid> {
        let mut out = Vec::new();
        if let Some(q) = self.queues.get_mut(&addr) {
            let mut i = 0;
            while i < q.len() && out.len() < n {
                if q[i].1 & bitset != 0 {
                    out.push(q.remove(i).unwrap().0);
                } else {
                    i += 1;
                }
            }
            if q.is_empty() {
                self.queues.remove(&addr);
            }
        }
        out
    }

    /// Moves up to `n` waiters from `from` to the end of `to`'s queue;
    /// returns how many moved.
    pub fn requeue(&mut self, from: FutexKey, to: FutexKey, n: usize) -> Vec<Tid> {
        let mut moved: Vec<(Tid, u32)> = Vec::new();
        if from == to {
            return Vec::new();
        }
        if let Some(q) = self.queues.get_mut(&from) {
            while moved.len() < n {
                match q.pop_front() {
                    Some(w) => moved.push(w),
                    None => break,
                }
            }
            if q.is_empty() {
                self.queues.remove(&from);
            }
        }
        let tids = moved.iter().map(|w| w.0).collect();
        self.queues.entry(to).or_default().extend(moved);
        if self.queues.get(&to).is_some_and(|q| q.is_empty()) {
            self.queues.remove(&to);
        }
        tids
    }

    /// Number of waiters on `addr`.
    pub fn waiters(&self, addr: FutexKey) -> usize {
        self.queues.get(&addr).map_or(0, |q| q.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(addr: u64) -> FutexKey {
        FutexKey::Private { space: 1, addr }
    }

    #[test]
    fn wakes_are_first_come_first_served_and_respect_bitsets() {
        let mut f = FutexTable::default();
        f.enqueue(key(8), Tid(2), 1);
        f.enqueue(key(8), Tid(3), 2);
        f.enqueue(key(8), Tid(4), 1);
        assert_eq!(f.take(key(8), 5, 1), vec![Tid(2), Tid(4)]);
        assert_eq!(f.waiters(key(8)), 1);
    }

    #[test]
    fn requeue_moves_waiters_in_order() {
        let mut f = FutexTable::default();
        for t in 2..6 {
            f.enqueue(key(8), Tid(t), u32::MAX);
        }
        assert_eq!(f.take(key(8), 1, u32::MAX), vec![Tid(2)]);
        assert_eq!(f.requeue(key(8), key(16), 2), vec![Tid(3), Tid(4)]);
        assert_eq!(f.waiters(key(8)), 1);
        assert_eq!(f.take(key(16), 9, u32::MAX), vec![Tid(3), Tid(4)]);
    }
}
