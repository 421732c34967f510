//! Futex wait queues: who waits on which word, in arrival order, so wake-ups
//! are deterministic (first come, first woken).

use std::collections::BTreeMap;

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

/// Waiters by futex, each queue in arrival order (by a number that only
/// grows), with where each thread waits, so a thread leaves its queue
/// without a walk along it.
#[derive(Clone, Debug, Default)]
pub struct FutexTable {
    queues: BTreeMap<FutexKey, BTreeMap<u64, (Tid, u32)>>,
    /// Where each waiter is: its futex and its number there.
    places: BTreeMap<Tid, (FutexKey, u64)>,
    next: u64,
    /// Waiters looked at by wakes and requeues, in all.
    looked_at: u64,
}

impl FutexTable {
    /// Adds `tid` to the end of `addr`'s queue.
    pub fn enqueue(&mut self, addr: FutexKey, tid: Tid, bitset: u32) {
        self.remove_waiter(tid);
        let n = self.next;
        self.next += 1;
        self.queues
            .entry(addr)
            .or_default()
            .insert(n, (tid, bitset));
        self.places.insert(tid, (addr, n));
    }

    /// Takes `tid` out of whichever queue holds it.
    fn remove_waiter(&mut self, tid: Tid) -> Option<(FutexKey, u32)> {
        let (addr, n) = self.places.remove(&tid)?;
        let q = self.queues.get_mut(&addr)?;
        let (_, bitset) = q.remove(&n)?;
        if q.is_empty() {
            self.queues.remove(&addr);
        }
        Some((addr, bitset))
    }

    /// Removes `tid` from `addr`'s queue (timeout, signal).
    pub fn remove(&mut self, addr: FutexKey, tid: Tid) {
        if self.places.get(&tid).is_some_and(|(a, _)| *a == addr) {
            self.remove_waiter(tid);
        }
    }

    /// Takes up to `n` waiters of `addr` whose bitset meets `bitset`, oldest
    /// first.
    pub fn take(&mut self, addr: FutexKey, n: usize, bitset: u32) -> Vec<Tid> {
        let mut looked_at = 0;
        let chosen: Vec<Tid> = self
            .queues
            .get(&addr)
            .into_iter()
            .flatten()
            .inspect(|_| looked_at += 1)
            .filter(|(_, (_, b))| b & bitset != 0)
            .map(|(_, (t, _))| *t)
            .take(n)
            .collect();
        self.looked_at += looked_at;
        for t in &chosen {
            self.remove_waiter(*t);
        }
        chosen
    }

    /// Moves up to `n` waiters from `from` to the end of `to`'s queue;
    /// returns how many moved.
    pub fn requeue(&mut self, from: FutexKey, to: FutexKey, n: usize) -> Vec<Tid> {
        if from == to {
            return Vec::new();
        }
        let moved: Vec<(Tid, u32)> = self
            .queues
            .get(&from)
            .into_iter()
            .flatten()
            .take(n)
            .map(|(_, w)| *w)
            .collect();
        self.looked_at += moved.len() as u64;
        for (t, bitset) in &moved {
            self.enqueue(to, *t, *bitset);
        }
        moved.into_iter().map(|(t, _)| t).collect()
    }

    /// Waiters looked at by wakes and requeues so far.
    pub fn looked_at(&self) -> u64 {
        self.looked_at
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
    fn a_waiter_leaves_its_queue_wherever_it_stands() {
        let mut f = FutexTable::default();
        for t in 2..7 {
            f.enqueue(key(8), Tid(t), u32::MAX);
        }
        f.remove(key(8), Tid(4));
        f.remove(key(16), Tid(5));
        assert_eq!(f.waiters(key(8)), 4, "a remove on another futex is none");
        f.enqueue(key(8), Tid(4), u32::MAX);
        assert_eq!(
            f.take(key(8), 9, u32::MAX),
            vec![Tid(2), Tid(3), Tid(5), Tid(6), Tid(4)]
        );
        assert_eq!(f.waiters(key(8)), 0);
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
