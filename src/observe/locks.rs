//! Who holds which lock, and in which order locks are taken.
//!
//! Fed by the shim's hints, this knows each thread's held locks and the lock
//! it is acquiring, so a deadlock can be reported as a cycle (thread 2 waits
//! for the lock thread 3 holds, ...), and it builds the lock-order graph that
//! lockdep builds: an edge A → B whenever a thread acquires B while holding A.
//! A cycle in that graph, taken by at least two threads with no common gate
//! lock, is a potential deadlock even if the run did not hang.
//!
//! An acquisition completes when the thread next shows up with anything but
//! a `futex` call (the lock's own slow path), or, for try and timed
//! operations, when the shim reports the result.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::arch::abi::HintOp;
use crate::code::sites::acquire::LockRole;
use crate::code::sites::emulate::AccessKind;
use crate::ids::Tid;

/// A lock a thread holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    pub lock: u64,
    /// Where it was taken.
    pub site: u64,
    /// A shared (read) hold of a reader-writer lock.
    pub shared: bool,
}

/// What a lock is, as the run knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    /// A pthread mutex the shim reported (a condition variable's too).
    Mutex,
    /// A pthread reader-writer lock the shim reported.
    Rwlock,
    /// A pthread spinlock the shim reported.
    Spinlock,
    /// A word the program's atomics take as a lock (futex-word lock
    /// inference: a Rust `Mutex`, a hand-rolled spinlock).
    Inferred,
}

impl LockKind {
    /// The kind of the lock `op` acquires.
    fn of(op: HintOp) -> LockKind {
        use HintOp::*;
        match op {
            RwlockRdlock | RwlockWrlock | RwlockTryrdlock | RwlockTrywrlock | RwlockTimedrdlock
            | RwlockTimedwrlock => LockKind::Rwlock,
            SpinLock | SpinTrylock => LockKind::Spinlock,
            _ => LockKind::Mutex,
        }
    }

    /// For people.
    pub fn describe(self) -> &'static str {
        match self {
            LockKind::Mutex => "pthread mutex",
            LockKind::Rwlock => "pthread rwlock",
            LockKind::Spinlock => "pthread spinlock",
            LockKind::Inferred => "inferred lock word",
        }
    }
}

/// An acquisition in progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pending {
    lock: u64,
    site: u64,
    op: HintOp,
}

#[derive(Clone, Debug, Default)]
struct ThreadLocks {
    held: Vec<Held>,
    pending: Option<Pending>,
}

/// One edge of the lock-order graph: a thread took `to` while holding `from`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderEdge {
    pub from: u64,
    pub to: u64,
    pub thread: u32,
    /// Where `from` was taken.
    pub from_site: u64,
    /// Where `to` was taken.
    pub to_site: u64,
    /// Other locks held at the time (a lock common to every edge of a cycle
    /// serializes it: no deadlock).
    pub gates: Vec<u64>,
}

/// A cycle in the lock-order graph.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inversion {
    pub edges: Vec<OrderEdge>,
}

/// Largest cycle looked for.
const MAX_CYCLE: usize = 8;
/// Edges the cycle search follows at most, per graph.
const SEARCH_BUDGET: usize = 1_000_000;

/// The strongly connected component of every node of `adj` (Tarjan's
/// algorithm, without recursion), as an index.
fn components(adj: &BTreeMap<u64, BTreeSet<u64>>) -> BTreeMap<u64, usize> {
    let mut nodes: BTreeSet<u64> = adj.keys().copied().collect();
    nodes.extend(adj.values().flatten().copied());
    let mut index: BTreeMap<u64, usize> = BTreeMap::new();
    let mut low: BTreeMap<u64, usize> = BTreeMap::new();
    let mut on_stack: BTreeSet<u64> = BTreeSet::new();
    let mut stack: Vec<u64> = Vec::new();
    let mut component: BTreeMap<u64, usize> = BTreeMap::new();
    let empty = BTreeSet::new();
    let mut next_index = 0;
    for &root in &nodes {
        if index.contains_key(&root) {
            continue;
        }
        // (node, its successors not yet looked at)
        let mut work: Vec<(u64, Vec<u64>)> = Vec::new();
        let visit = |n: u64,
                     next_index: &mut usize,
                     index: &mut BTreeMap<u64, usize>,
                     low: &mut BTreeMap<u64, usize>| {
            index.insert(n, *next_index);
            low.insert(n, *next_index);
            *next_index += 1;
        };
        visit(root, &mut next_index, &mut index, &mut low);
        stack.push(root);
        on_stack.insert(root);
        work.push((
            root,
            adj.get(&root)
                .unwrap_or(&empty)
                .iter()
                .rev()
                .copied()
                .collect(),
        ));
        while let Some((node, succ)) = work.last_mut() {
            let node = *node;
            if let Some(s) = succ.pop() {
                if !index.contains_key(&s) {
                    visit(s, &mut next_index, &mut index, &mut low);
                    stack.push(s);
                    on_stack.insert(s);
                    work.push((
                        s,
                        adj.get(&s)
                            .unwrap_or(&empty)
                            .iter()
                            .rev()
                            .copied()
                            .collect(),
                    ));
                } else if on_stack.contains(&s) {
                    let l = low[&node].min(index[&s]);
                    low.insert(node, l);
                }
                continue;
            }
            work.pop();
            if let Some((parent, _)) = work.last() {
                let l = low[parent].min(low[&node]);
                low.insert(*parent, l);
            }
            if low[&node] == index[&node] {
                let id = component.len();
                while let Some(m) = stack.pop() {
                    on_stack.remove(&m);
                    component.insert(m, id);
                    if m == node {
                        break;
                    }
                }
            }
        }
    }
    component
}

/// The lock-order graph: an edge A → B for each way a thread took B while
/// holding A (a few witnesses per pair).
#[derive(Clone, Debug, Default)]
pub struct OrderGraph {
    order: BTreeMap<(u64, u64), Vec<OrderEdge>>,
}

/// Witnesses kept per (from, to) pair.
const WITNESSES: usize = 8;

impl OrderGraph {
    /// Adds an edge unless an equal witness (same thread and sites) is known.
    pub fn add(&mut self, e: OrderEdge) {
        let edges = self.order.entry((e.from, e.to)).or_default();
        if edges.len() < WITNESSES
            && !edges.iter().any(|x| {
                x.from_site == e.from_site && x.to_site == e.to_site && x.thread == e.thread
            })
        {
            edges.push(e);
        }
    }

    /// Drops every edge from or to `lock` (a word found to be no lock).
    fn forget(&mut self, lock: u64) {
        self.order
            .retain(|(from, to), _| *from != lock && *to != lock);
    }

    /// Every edge.
    pub fn edges(&self) -> impl Iterator<Item = &OrderEdge> {
        self.order.values().flatten()
    }

    /// Cycles that two or more threads took, with no lock held across all of
    /// their edges. Each cycle is reported once.
    pub fn inversions(&self) -> Vec<Inversion> {
        let mut adj: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
        for (from, to) in self.order.keys() {
            adj.entry(*from).or_default().insert(*to);
        }
        // Only locks on some cycle can start one: keep the edges inside a
        // strongly connected component.
        let component = components(&adj);
        for (from, tos) in adj.iter_mut() {
            tos.retain(|to| component[to] == component[from]);
        }
        let mut seen: BTreeSet<Vec<u64>> = BTreeSet::new();
        let mut out = Vec::new();
        // Enumerating cycles is exponential in a dense graph (a language
        // runtime takes hundreds of locks in every order): the search
        // stops after a fixed number of steps, the same in every run.
        let mut budget = SEARCH_BUDGET;
        for &start in adj.keys() {
            let mut path = vec![start];
            self.walk(&adj, start, &mut path, &mut seen, &mut out, &mut budget);
        }
        out
    }

    fn walk(
        &self,
        adj: &BTreeMap<u64, BTreeSet<u64>>,
        start: u64,
        path: &mut Vec<u64>,
        seen: &mut BTreeSet<Vec<u64>>,
        out: &mut Vec<Inversion>,
        budget: &mut usize,
    ) {
        let last = *path.last().unwrap();
        for &next in adj.get(&last).into_iter().flatten() {
            if *budget == 0 {
                return;
            }
            *budget -= 1;
            if next == start && path.len() >= 2 {
                let mut key = path.clone();
                key.sort_unstable();
                if seen.contains(&key) {
                    continue;
                }
                if let Some(inv) = self.witness(path) {
                    seen.insert(key);
                    out.push(inv);
                }
            } else if next > start && !path.contains(&next) && path.len() < MAX_CYCLE {
                // Only cycles whose smallest lock is `start`: each once.
                path.push(next);
                self.walk(adj, start, path, seen, out, budget);
                path.pop();
            }
        }
    }

    /// Picks one edge per hop of the cycle `locks` so that at least two
    /// threads take part and no gate is common to all, if possible.
    fn witness(&self, locks: &[u64]) -> Option<Inversion> {
        let hops: Vec<&Vec<OrderEdge>> = (0..locks.len())
            .map(|i| &self.order[&(locks[i], locks[(i + 1) % locks.len()])])
            .collect();
        let mut choice = vec![0usize; hops.len()];
        loop {
            let edges: Vec<&OrderEdge> = choice.iter().zip(&hops).map(|(c, h)| &h[*c]).collect();
            let threads: BTreeSet<u32> = edges.iter().map(|e| e.thread).collect();
            let common_gate = edges[0]
                .gates
                .iter()
                .any(|g| edges.iter().all(|e| e.gates.contains(g)));
            if threads.len() >= 2 && !common_gate {
                return Some(Inversion {
                    edges: edges.into_iter().cloned().collect(),
                });
            }
            // Next combination.
            let mut i = 0;
            loop {
                if i == choice.len() {
                    return None;
                }
                choice[i] += 1;
                if choice[i] < hops[i].len() {
                    break;
                }
                choice[i] = 0;
                i += 1;
            }
        }
    }
}

/// A word that atomics took from 0 to non-zero: perhaps a lock.
#[derive(Clone, Copy, Debug, Default)]
struct Word {
    /// The thread that set it non-zero, and where.
    holder: Option<(Tid, u64)>,
    /// The hold is a read lock's: any reader may set it free.
    shared: bool,
    /// The code says it is taken as a lock: an acquisition's site retries
    /// or waits, or is a lock's method, or a thread that failed to take it
    /// retried or slept on it (see `code::sites::acquire`).
    evidence: bool,
    /// Its holder set it free at least once.
    released: bool,
    /// A hold of it ended with no write a site saw: it was found free while
    /// held (a C11 release store, the `spin` crate's unlock, are plain
    /// moves). When its holder let it go is then unknown, so what the
    /// holder took after taking it is no evidence of an order.
    released_unseen: bool,
    /// A thread that neither held it nor waited for it set it free: it is
    /// no lock (a flag, a parker's state, a slot).
    refuted: bool,
    /// The instruction that last took it.
    taken_at: u64,
    /// A thread that failed to take it went on in a lock's slow path: a
    /// futex wait of that thread waits for it wherever the word is
    /// (parking_lot parks a thread on a word of its own).
    parks: bool,
}

impl Word {
    /// Whether lock-order edges count it: taken as a lock, released by its
    /// holder, never set free by another.
    fn is_lock(&self) -> bool {
        self.evidence && self.released && !self.refuted
    }

    /// Whether lock-order edges from and to it count: a lock whose holds
    /// are seen to end. A lock that was ever found free while held may
    /// have been let go long before: flume's `Selector` takes a `spin`
    /// mutex, lets it go by a plain store, then takes a channel's lock,
    /// which looked like taking the channel's lock inside the spin mutex.
    fn orders(&self) -> bool {
        self.is_lock() && !self.released_unseen
    }

    /// Whether a thread that failed to take it waits for its holder.
    fn is_waited_for(&self) -> bool {
        self.evidence && !self.refuted
    }
}

/// How many words a thread may hold that nothing has shown to be locks:
/// real code nests a handful of locks at most.
const MAX_UNCONFIRMED_HELD: usize = 8;

/// What a sync site's instruction did to a word, for lock inference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WordAccess {
    pub kind: AccessKind,
    pub read: u64,
    pub written: Option<u64>,
    /// What the site's code or its callers' names say it does to a lock.
    pub role: Option<LockRole>,
    /// The instruction's own address (one past its first byte): a retry
    /// is the same instruction again, however its step is reported.
    pub instruction: u64,
}

impl WordAccess {
    /// Takes the word from free: a compare-and-swap or an exchange from 0.
    fn takes(&self) -> bool {
        let exchange = matches!(self.kind, AccessKind::Swap | AccessKind::CompareSwap { .. });
        exchange && self.read == 0 && self.written.is_some_and(|w| w != 0)
    }

    /// Tried to take it and found it taken: a compare-and-swap expecting 0,
    /// or an exchange (a test-and-set) that found it non-zero.
    fn fails_to_take(&self) -> bool {
        match self.kind {
            AccessKind::CompareSwap {
                stored: false,
                expected: 0,
            } => self.read != 0,
            AccessKind::Swap => self.read != 0 && self.written.is_some_and(|w| w != 0),
            _ => false,
        }
    }

    /// A compare-and-swap that expected 0: an acquisition's attempt.
    fn expects_free(&self) -> bool {
        matches!(self.kind, AccessKind::CompareSwap { expected: 0, .. })
    }
}

/// A thread's last failure to take a word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Attempt {
    lock: u64,
    /// Where the step is reported.
    site: u64,
    /// The instruction that failed.
    instruction: u64,
    /// The thread has touched no other word since: taking the word at the
    /// same instruction then retries the acquisition (a spinlock's loop),
    /// where a later call doing the same operation again (a channel's
    /// `try_select` in its next `recv`) does other work in between.
    only_this_word: bool,
}

/// The lock state of a process.
#[derive(Clone, Debug, Default)]
pub struct LockTracker {
    threads: BTreeMap<Tid, ThreadLocks>,
    order: OrderGraph,
    /// Locks the shim reported (locks by their API), with their kind.
    reported: BTreeMap<u64, LockKind>,
    /// Words atomics treat as locks (futex-word lock inference).
    words: BTreeMap<u64, Word>,
    /// The word each thread last failed to take, and where: what it waits
    /// for when it then sleeps in a futex wait on that word.
    attempts: BTreeMap<Tid, Attempt>,
    /// Instructions that take locks: their code says so, or they retried a
    /// lock or took one later waited or woken on. A word with evidence
    /// taken by any other instruction holds another object now.
    acquiring: BTreeSet<u64>,
    /// The last release of each lock: by whom, where.
    last_release: BTreeMap<u64, (Tid, u64)>,
    /// Handoffs seen: (release site in one thread, acquire site of the same
    /// lock in another), an approximation of reads-from pairs.
    handoffs: BTreeSet<(u64, u64)>,
}

impl LockTracker {
    /// Notes that `tid` took a step: any acquisition it had under way that
    /// cannot fail has completed unless the step is the lock's own futex call.
    pub fn on_step(&mut self, tid: Tid, is_futex: bool) {
        if is_futex {
            return;
        }
        let Some(p) = self.threads.get(&tid).and_then(|t| t.pending) else {
            return;
        };
        if !p.op.may_fail() {
            self.acquired(tid, p);
        }
    }

    /// Applies a hint from `tid`.
    pub fn on_hint(&mut self, tid: Tid, op: HintOp, object: u64, site: u64, extra: u64) {
        match op {
            HintOp::TryResult => {
                let t = self.threads.entry(tid).or_default();
                if let Some(p) = t.pending.take() {
                    if extra as i64 == 0 && p.lock == object {
                        self.acquired(tid, p);
                    }
                }
            }
            HintOp::CondWait | HintOp::CondTimedwait => {
                // The mutex is released while waiting and taken again after.
                self.release(tid, extra);
                let t = self.threads.entry(tid).or_default();
                t.pending = Some(Pending {
                    lock: extra,
                    site,
                    op: HintOp::MutexLock,
                });
            }
            op if op.acquires() => {
                self.threads.entry(tid).or_default().pending = Some(Pending {
                    lock: object,
                    site,
                    op,
                });
            }
            op if op.releases() => {
                self.release(tid, object);
                self.last_release.insert(object, (tid, site));
            }
            HintOp::ThreadExit => {
                self.threads.remove(&tid);
            }
            _ => {}
        }
    }

    fn acquired(&mut self, tid: Tid, p: Pending) {
        self.reported.insert(p.lock, LockKind::of(p.op));
        let shared = matches!(
            p.op,
            HintOp::RwlockRdlock | HintOp::RwlockTryrdlock | HintOp::RwlockTimedrdlock
        );
        if let Some((from, site)) = self.last_release.get(&p.lock) {
            if *from != tid {
                self.handoffs.insert((*site, p.site));
            }
        }
        let t = self.threads.entry(tid).or_default();
        t.pending = None;
        // Lock order: shared holds are left out (readers do not exclude one
        // another, and counting them would report reader-reader "cycles"),
        // and so are trylocks, which never wait (std::lock takes one lock and
        // tries the others; lockdep leaves trylocks out for the same reason).
        let tried = matches!(
            p.op,
            HintOp::MutexTrylock | HintOp::RwlockTrywrlock | HintOp::SpinTrylock
        );
        if !shared && !tried {
            let held: Vec<Held> = t.held.iter().filter(|h| !h.shared).copied().collect();
            for h in &held {
                if h.lock == p.lock {
                    continue;
                }
                let gates = held
                    .iter()
                    .map(|g| g.lock)
                    .filter(|l| *l != h.lock)
                    .collect();
                self.order.add(OrderEdge {
                    from: h.lock,
                    to: p.lock,
                    thread: tid.0,
                    from_site: h.site,
                    to_site: p.site,
                    gates,
                });
            }
        }
        self.threads.entry(tid).or_default().held.push(Held {
            lock: p.lock,
            site: p.site,
            shared,
        });
    }

    /// A sync site's atomic or store changed (or failed to change) the
    /// word at `addr`: futex-word lock inference. A word going from free
    /// (0) to non-zero by a compare-and-swap or an exchange is taken by the
    /// thread that set it; set free again by that thread, released. It
    /// counts as a lock once the code took it as one (`WordAccess::role`,
    /// or a thread that failed to take it retried the same site or slept
    /// on it, or its release woke a sleeper) and its holder released it,
    /// and never again once a thread that neither held it nor waited for
    /// it set it free. A word seen free while held was released by a store
    /// no site saw (a C11 release store is a plain move).
    pub fn on_word(&mut self, tid: Tid, site: u64, addr: u64, a: &WordAccess) {
        if self.reported.contains_key(&addr) {
            return;
        }
        let word = self.words.get(&addr).copied();
        // A plain store (a site at `globals`) reads nothing: what it
        // "read" is what it wrote.
        let store = a.kind == AccessKind::Store;
        if a.read == 0 && !store {
            if let Some((h, _)) = word.and_then(|w| w.holder) {
                self.word_released(h, addr);
                self.words.entry(addr).or_default().released_unseen = true;
            }
        }
        if let Some(at) = self.attempts.get_mut(&tid) {
            at.only_this_word &= at.lock == addr;
        }
        let attempted = self.attempts.get(&tid).copied();
        if a.takes() {
            // A compare-and-swap retried at the same site until it found
            // the word free.
            let retried = attempted.is_some_and(|at| {
                at.lock == addr && at.instruction == a.instruction && at.only_this_word
            }) && a.expects_free();
            let known = a.role.is_some() || self.acquiring.contains(&a.instruction);
            let acquires = known || retried;
            if !acquires && word.is_some_and(|w| w.evidence) {
                // A lock's word taken by code that has never taken a lock:
                // the lock's memory was freed and now holds something else
                // (a channel's index where a waker's mutex was).
                self.forget_word(addr);
            }
            if a.role.is_some() || retried {
                self.acquiring.insert(a.instruction);
            }
            // Taking other words on the way (a parking lot's bucket lock)
            // is part of waiting for this one.
            if attempted.is_some_and(|at| at.lock == addr) {
                self.attempts.remove(&tid);
            }
            let w = self.words.entry(addr).or_default();
            if known && !w.evidence {
                // A lock's code taking a word that was none: a new object,
                // whatever became of the last one's holds.
                w.released_unseen = false;
            }
            w.evidence |= a.role.is_some() || retried;
            w.taken_at = a.instruction;
            self.take_word(tid, site, addr, a.role);
        } else if a.written == Some(0) && (a.read != 0 || store) {
            match word.and_then(|w| w.holder) {
                Some((h, _)) if h == tid => {
                    self.word_released(tid, addr);
                    self.last_release.insert(addr, (tid, site));
                }
                Some((h, _)) => {
                    let w = self.words.entry(addr).or_default();
                    // A read lock's last reader, or a lock handed over to
                    // a thread that was waiting for it (parking_lot's fair
                    // unlock), sets it free; anyone else shows it is none.
                    let waited = attempted.is_some_and(|at| at.lock == addr);
                    if !w.shared && !waited {
                        w.refuted = true;
                    }
                    if waited {
                        self.attempts.remove(&tid);
                    }
                    self.word_released(h, addr);
                }
                None => {}
            }
        } else if a.fails_to_take() {
            // A trylock that fails goes on: it waits for nothing.
            if a.role != Some(LockRole::Try) {
                let attempt = Attempt {
                    lock: addr,
                    site,
                    instruction: a.instruction,
                    only_this_word: true,
                };
                self.attempts.insert(tid, attempt);
            }
            let w = self.words.entry(addr).or_default();
            if a.role.is_some() {
                w.evidence = true;
            }
            // Its code waits for the word elsewhere than on it.
            w.parks |= a.role.is_some_and(|r| r != LockRole::Try);
        } else if matches!(a.kind, AccessKind::CompareSwap { .. })
            && !a.expects_free()
            && a.role.is_none()
            && attempted.is_some_and(|at| at.lock == addr)
        {
            // A compare-and-swap from the value it found, in code that is
            // no lock's: a lock-free update's retry, not an acquisition's
            // (a lock's slow path marks the word contended so).
            self.attempts.remove(&tid);
        }
    }

    fn take_word(&mut self, tid: Tid, site: u64, addr: u64, role: Option<LockRole>) {
        // Words set once and never cleared (a lock-free list's next
        // pointers, a once-cell's state) look taken for good: a thread
        // holding many without evidence forgets the oldest, so they cannot
        // grow the lock-order graph with every node.
        let words = &self.words;
        let unconfirmed = |l: &u64| words.get(l).is_some_and(|w| !w.evidence);
        let held = self.threads.get(&tid).map_or(&[][..], |t| &t.held[..]);
        if held.iter().filter(|h| unconfirmed(&h.lock)).count() >= MAX_UNCONFIRMED_HELD {
            let oldest = held
                .iter()
                .map(|h| h.lock)
                .find(|l| unconfirmed(l))
                .expect("counted above");
            self.words.remove(&oldest);
            self.order.forget(oldest);
            if let Some(t) = self.threads.get_mut(&tid) {
                t.held.retain(|h| h.lock != oldest);
            }
        }
        let w = self.words.entry(addr).or_default();
        w.holder = Some((tid, site));
        w.shared = role == Some(LockRole::Shared);
        let op = match role {
            Some(LockRole::Shared) => HintOp::RwlockRdlock,
            Some(LockRole::Try) => HintOp::MutexTrylock,
            _ => HintOp::MutexLock,
        };
        self.acquired(
            tid,
            Pending {
                lock: addr,
                site,
                op,
            },
        );
        // `acquired` files it with the reported locks; it is not one.
        self.reported.remove(&addr);
    }

    /// Forgets all that is known of the word at `addr`: it holds another
    /// object now.
    fn forget_word(&mut self, addr: u64) {
        self.words.remove(&addr);
        self.order.forget(addr);
        self.last_release.remove(&addr);
        self.attempts.retain(|_, at| at.lock != addr);
        for t in self.threads.values_mut() {
            t.held.retain(|h| h.lock != addr);
        }
    }

    fn word_released(&mut self, tid: Tid, addr: u64) {
        let w = self.words.entry(addr).or_default();
        w.holder = None;
        w.shared = false;
        w.released = true;
        self.release(tid, addr);
    }

    /// `tid` sleeps in a futex wait on `addr`: a word it failed to take is
    /// waited for as a lock is.
    pub fn on_futex_wait(&mut self, tid: Tid, addr: u64) {
        if let Some(at) = self.attempts.get(&tid).filter(|at| at.lock == addr) {
            if let Some(w) = self.words.get_mut(&addr) {
                w.evidence = true;
                self.acquiring.insert(w.taken_at);
                self.acquiring.insert(at.instruction);
            }
        }
    }

    /// `tid` wakes futex waiters on `addr`: a word it has just released is
    /// released as a lock is, with a wake.
    pub fn on_futex_wake(&mut self, tid: Tid, addr: u64) {
        let released_by_it = self.last_release.get(&addr).is_some_and(|(t, _)| *t == tid);
        if let Some(w) = self.words.get_mut(&addr) {
            if released_by_it && w.holder.is_none() {
                w.evidence = true;
                self.acquiring.insert(w.taken_at);
            }
        }
    }

    /// Whether `lock` is known to be a lock (reported by the shim, or an
    /// inferred word seen to behave as one).
    pub fn is_lock(&self, lock: u64) -> bool {
        self.reported.contains_key(&lock) || self.words.get(&lock).is_some_and(Word::is_lock)
    }

    /// Whether lock-order edges from and to `lock` count (see
    /// [`Word::orders`]); any lock counts as a gate.
    fn orders(&self, lock: u64) -> bool {
        self.reported.contains_key(&lock) || self.words.get(&lock).is_some_and(Word::orders)
    }

    /// Whether a hold or wait on `lock` is one on a lock: reported by the
    /// shim, or a word the code takes as a lock and nothing refuted, even
    /// before its holder first released it (a deadlock's locks may never
    /// be released).
    pub fn taken_as_lock(&self, lock: u64) -> bool {
        self.reported.contains_key(&lock) || self.words.get(&lock).is_some_and(Word::is_waited_for)
    }

    fn release(&mut self, tid: Tid, lock: u64) {
        if let Some(t) = self.threads.get_mut(&tid) {
            if let Some(i) = t.held.iter().rposition(|h| h.lock == lock) {
                t.held.remove(i);
            }
        }
    }

    /// Every (holding site, acquiring site) pair of the lock-order graph.
    pub fn order_site_pairs(&self) -> BTreeSet<(u64, u64)> {
        self.order()
            .edges()
            .map(|e| (e.from_site, e.to_site))
            .collect()
    }

    /// Every handoff seen: (release site, acquire site in another thread).
    pub fn handoffs(&self) -> &BTreeSet<(u64, u64)> {
        &self.handoffs
    }

    /// The lock `tid` is acquiring, and where (a pthread lock it asked
    /// for, or a lock word its atomics last failed to take).
    pub fn acquiring(&self, tid: Tid) -> Option<(u64, u64)> {
        match self.threads.get(&tid).and_then(|t| t.pending) {
            Some(p) => Some((p.lock, p.site)),
            None => self
                .attempts
                .get(&tid)
                .map(|at| (at.lock, at.site))
                .filter(|(l, _)| self.words.get(l).is_some_and(Word::is_waited_for)),
        }
    }

    /// Whether a thread that failed to take `lock` sleeps for it wherever
    /// its futex wait is.
    pub fn parks_for(&self, lock: u64) -> bool {
        self.words
            .get(&lock)
            .is_some_and(|w| w.parks && w.is_waited_for())
    }

    /// Threads holding `lock`, with where they took it.
    pub fn holders(&self, lock: u64) -> Vec<(Tid, u64)> {
        self.threads
            .iter()
            .flat_map(|(t, l)| {
                l.held
                    .iter()
                    .filter(|h| h.lock == lock)
                    .map(move |h| (*t, h.site))
            })
            .collect()
    }

    /// Locks `tid` holds.
    pub fn held(&self, tid: Tid) -> &[Held] {
        self.threads.get(&tid).map_or(&[], |t| &t.held)
    }

    /// Every lock the run knows, with its kind: those the shim reported,
    /// words taken as locks (as [`LockTracker::taken_as_lock`] counts
    /// them), and those a thread is asking for that no one took yet.
    pub fn known(&self) -> BTreeMap<u64, LockKind> {
        let mut known = self.reported.clone();
        for (a, w) in &self.words {
            if w.is_waited_for() {
                known.insert(*a, LockKind::Inferred);
            }
        }
        for p in self.threads.values().filter_map(|t| t.pending) {
            known.entry(p.lock).or_insert(LockKind::of(p.op));
        }
        known
    }

    /// Cycles in the lock-order graph (see [`OrderGraph::inversions`]).
    pub fn inversions(&self) -> Vec<Inversion> {
        self.order().inversions()
    }

    /// The lock-order graph so far, between known locks (an inferred word
    /// counts once it behaved as a lock).
    pub fn order(&self) -> OrderGraph {
        if self.words.is_empty() {
            return self.order.clone();
        }
        let mut g = OrderGraph::default();
        for e in self.order.edges() {
            if self.orders(e.from) && self.orders(e.to) {
                let mut e = e.clone();
                e.gates.retain(|l| self.is_lock(*l));
                g.add(e);
            }
        }
        g
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(t: &mut LockTracker, tid: u32, l: u64, site: u64) {
        t.on_hint(Tid(tid), HintOp::MutexLock, l, site, 0);
        t.on_step(Tid(tid), false);
    }

    fn unlock(t: &mut LockTracker, tid: u32, l: u64) {
        t.on_step(Tid(tid), false);
        t.on_hint(Tid(tid), HintOp::MutexUnlock, l, 0, 0);
    }

    /// An access of a word by an atomic.
    fn word(
        kind: AccessKind,
        read: u64,
        written: Option<u64>,
        role: Option<LockRole>,
    ) -> WordAccess {
        WordAccess {
            kind,
            read,
            written,
            role,
            instruction: 0,
        }
    }

    fn cas(expected: u64, read: u64, new: u64, role: Option<LockRole>) -> WordAccess {
        let stored = read == expected;
        word(
            AccessKind::CompareSwap { stored, expected },
            read,
            stored.then_some(new),
            role,
        )
    }

    fn swap(read: u64, new: u64, role: Option<LockRole>) -> WordAccess {
        word(AccessKind::Swap, read, Some(new), role)
    }

    const LOCK: Option<LockRole> = Some(LockRole::Exclusive);

    #[test]
    fn known_locks_keep_their_kind_after_release() {
        let mut t = LockTracker::default();
        lock(&mut t, 1, 0x10, 1);
        unlock(&mut t, 1, 0x10);
        t.on_hint(Tid(1), HintOp::RwlockRdlock, 0x20, 2, 0);
        t.on_step(Tid(1), false);
        // Asked for, not taken yet.
        t.on_hint(Tid(3), HintOp::SpinLock, 0x30, 3, 0);
        // A word a compare-and-swap of a lock's code takes.
        t.on_word(Tid(2), 4, 0x40, &cas(0, 0, 1, LOCK));
        // A word nothing shows to be a lock.
        t.on_word(Tid(2), 5, 0x50, &cas(0, 0, 1, None));
        let known = t.known();
        assert_eq!(
            known.into_iter().collect::<Vec<_>>(),
            [
                (0x10, LockKind::Mutex),
                (0x20, LockKind::Rwlock),
                (0x30, LockKind::Spinlock),
                (0x40, LockKind::Inferred),
            ]
        );
    }

    /// Two threads take words `a` and `b` in opposite orders with the
    /// acquisitions `take` and release them with `release`.
    fn abba(t: &mut LockTracker, take: WordAccess, release: WordAccess) {
        for (tid, first, second) in [(1, 0xa0, 0xb0), (2, 0xb0, 0xa0)] {
            t.on_word(Tid(tid), 10 * tid as u64 + 1, first, &take);
            t.on_word(Tid(tid), 10 * tid as u64 + 2, second, &take);
            t.on_word(Tid(tid), 10 * tid as u64 + 3, second, &release);
            t.on_word(Tid(tid), 10 * tid as u64 + 4, first, &release);
        }
    }

    #[test]
    fn words_taken_as_locks_and_released_by_their_holders_are_locks() {
        let mut t = LockTracker::default();
        abba(&mut t, cas(0, 0, 1, LOCK), swap(1, 0, None));
        assert_eq!(
            t.inversions().len(),
            1,
            "std's Mutex: CAS to take, swap to release"
        );
        let mut t = LockTracker::default();
        abba(&mut t, cas(0, 0, 1, LOCK), cas(1, 1, 0, None));
        assert_eq!(
            t.inversions().len(),
            1,
            "parking_lot: CAS to take and to release"
        );
    }

    #[test]
    fn a_compare_and_swap_that_succeeds_after_other_work_retried_nothing() {
        // A channel's `try_select`: it fails on a context a sender already
        // selected, the thread does its other work, and the next `recv`
        // takes the reset context at the same instruction.
        let mut t = LockTracker::default();
        t.on_word(Tid(1), 1, 0xa0, &cas(0, 5, 1, None));
        t.on_word(Tid(1), 2, 0xb0, &swap(0, 1, None));
        t.on_word(Tid(1), 1, 0xa0, &cas(0, 0, 1, None));
        t.on_word(Tid(1), 3, 0xa0, &swap(1, 0, None));
        assert!(!t.is_lock(0xa0));
        // A spinlock's loop retries with nothing in between.
        let mut t = LockTracker::default();
        t.on_word(Tid(1), 1, 0xa0, &cas(0, 5, 1, None));
        t.on_word(Tid(1), 1, 0xa0, &cas(0, 0, 1, None));
        t.on_word(Tid(1), 3, 0xa0, &swap(1, 0, None));
        assert!(t.is_lock(0xa0));
    }

    #[test]
    fn words_the_code_does_not_take_as_locks_order_nothing() {
        // An index published by exchange and retired by its publisher: the
        // exchange's result is never tested, so the code gives no evidence.
        let mut t = LockTracker::default();
        abba(&mut t, swap(0, 7, None), swap(7, 0, None));
        assert!(t.inversions().is_empty());
        assert!(!t.is_lock(0xa0));
    }

    #[test]
    fn a_word_another_thread_sets_free_is_no_lock() {
        // A parker's state: set by the thread that unparks, cleared by the
        // parked one, even where the code around it looks like a lock's.
        let mut t = LockTracker::default();
        t.on_word(Tid(1), 1, 0xa0, &swap(0, 1, LOCK));
        t.on_word(Tid(2), 2, 0xa0, &cas(1, 1, 0, None));
        assert!(t.words[&0xa0].refuted);
        abba(&mut t, cas(0, 0, 1, LOCK), swap(1, 0, None));
        assert!(!t.is_lock(0xa0));
        assert!(t.inversions().is_empty());
    }

    #[test]
    fn a_lock_handed_to_a_waiter_stays_a_lock() {
        // Thread 2 fails to take it, thread 1 hands it over without
        // setting it free, and thread 2 sets it free after its work.
        let mut t = LockTracker::default();
        t.on_word(Tid(1), 1, 0xa0, &cas(0, 0, 1, LOCK));
        t.on_word(Tid(2), 2, 0xa0, &cas(0, 1, 1, LOCK));
        t.on_word(Tid(2), 3, 0xa0, &cas(1, 1, 0, None));
        assert!(!t.words[&0xa0].refuted);
        assert!(t.is_lock(0xa0));
    }

    #[test]
    fn a_read_lock_set_free_by_its_last_reader_stays_a_lock() {
        let shared = Some(LockRole::Shared);
        let mut t = LockTracker::default();
        t.on_word(Tid(1), 1, 0xa0, &cas(0, 0, 1, shared));
        t.on_word(Tid(2), 2, 0xa0, &cas(1, 1, 2, shared));
        t.on_word(Tid(1), 3, 0xa0, &word(AccessKind::Update, 2, Some(1), None));
        t.on_word(Tid(2), 4, 0xa0, &word(AccessKind::Update, 1, Some(0), None));
        assert!(t.is_lock(0xa0));
        assert!(t.held(Tid(1)).is_empty() && t.held(Tid(2)).is_empty());
    }

    #[test]
    fn evidence_comes_from_retries_and_futex_waits_too() {
        // A compare-and-swap from 0 retried at its site until it succeeds.
        let mut t = LockTracker::default();
        t.on_word(Tid(1), 1, 0xa0, &cas(0, 0, 1, None));
        t.on_word(Tid(2), 2, 0xa0, &cas(0, 1, 1, None));
        t.on_word(Tid(2), 2, 0xa0, &cas(0, 1, 1, None));
        assert!(!t.words[&0xa0].evidence);
        t.on_word(Tid(1), 3, 0xa0, &swap(1, 0, None));
        t.on_word(Tid(2), 2, 0xa0, &cas(0, 0, 1, None));
        assert!(t.words[&0xa0].evidence);
        // A thread that failed to take a word sleeps on it.
        let mut t = LockTracker::default();
        t.on_word(Tid(1), 1, 0xb0, &cas(0, 0, 1, None));
        t.on_word(Tid(2), 2, 0xb0, &swap(1, 2, None));
        t.on_futex_wait(Tid(2), 0xb0);
        assert!(t.words[&0xb0].evidence);
        assert_eq!(t.acquiring(Tid(2)), Some((0xb0, 2)));
        // A lock-free push retrying with the value it found is no retry.
        let mut t = LockTracker::default();
        t.on_word(Tid(1), 1, 0xc0, &cas(0, 0, 0x100, None));
        t.on_word(Tid(2), 2, 0xc0, &cas(0, 0x100, 0x200, None));
        t.on_word(Tid(2), 2, 0xc0, &cas(0x100, 0x100, 0x200, None));
        t.on_word(Tid(1), 3, 0xc0, &cas(0x200, 0x200, 0, None));
        t.on_word(Tid(2), 2, 0xc0, &cas(0, 0, 0x300, None));
        assert!(!t.words[&0xc0].evidence);
    }

    #[test]
    fn a_locks_memory_reused_by_other_code_is_a_lock_no_more() {
        // A waker's mutex in a freed block, taken and released by the
        // mutex's code (instruction 0x10); the block then holds a
        // channel's index, which its receive (instruction 0x20, no lock's
        // code) moves from 0 while the thread holds other such indices.
        let at = |a: WordAccess, instruction| WordAccess { instruction, ..a };
        let mut t = LockTracker::default();
        for l in [0xa0, 0xb0] {
            t.on_word(Tid(1), 1, l, &at(cas(0, 0, 1, LOCK), 0x10));
            t.on_word(Tid(1), 2, l, &at(swap(1, 0, None), 0x11));
            assert!(t.is_lock(l));
        }
        let take = at(cas(0, 0, 1, None), 0x20);
        for (tid, first, second) in [(2, 0xa0, 0xb0), (3, 0xb0, 0xa0)] {
            t.on_word(Tid(tid), 3, first, &take);
            t.on_word(Tid(tid), 3, second, &take);
            // The channel is freed and its block reused: 0 again.
            t.on_word(Tid(tid), 4, second, &at(cas(0, 0, 0, None), 0x30));
            t.on_word(Tid(tid), 4, first, &at(cas(0, 0, 0, None), 0x30));
        }
        assert!(!t.is_lock(0xa0) && !t.is_lock(0xb0));
        assert!(t.inversions().is_empty());
        // The mutex's own code taking it again: a lock, as before.
        abba(
            &mut t,
            at(cas(0, 0, 1, LOCK), 0x10),
            at(swap(1, 0, None), 0x11),
        );
        assert_eq!(t.inversions().len(), 1);
        // A spinlock known only by its retry stays a lock wherever it is
        // taken from: its instruction is known to acquire.
        let mut t = LockTracker::default();
        let spin = at(cas(0, 0, 1, None), 0x40);
        t.on_word(Tid(1), 1, 0xc0, &spin);
        t.on_word(Tid(2), 2, 0xc0, &at(cas(0, 1, 1, None), 0x40));
        t.on_word(Tid(1), 3, 0xc0, &at(swap(1, 0, None), 0x41));
        t.on_word(Tid(2), 2, 0xc0, &spin);
        t.on_word(Tid(2), 3, 0xc0, &at(swap(1, 0, None), 0x41));
        assert!(t.is_lock(0xc0));
        t.on_word(Tid(1), 1, 0xc0, &spin);
        assert!(t.is_lock(0xc0), "taken again by the same instruction");
    }

    #[test]
    fn counters_are_no_locks_and_words_set_for_good_stay_few() {
        let mut t = LockTracker::default();
        // fetch_add from 0 on ten thousand counters: no lock at all.
        for a in 0..10_000u64 {
            t.on_word(
                Tid(1),
                5,
                0x1000 + 8 * a,
                &word(AccessKind::Update, 0, Some(1), None),
            );
        }
        assert_eq!(t.order().edges().count(), 0);
        // A lock-free list's next pointers, CAS from null, never cleared:
        // held words stay capped, and so does the order graph.
        for a in 0..10_000u64 {
            t.on_word(Tid(1), 6, 0x100000 + 8 * a, &cas(0, 0, 0x42, None));
        }
        let held = t.threads[&Tid(1)].held.len();
        assert!(held <= MAX_UNCONFIRMED_HELD, "{held} held");
        let edges = t.order.edges().count();
        assert!(
            edges < MAX_UNCONFIRMED_HELD * MAX_UNCONFIRMED_HELD,
            "{edges} edges"
        );
    }

    #[test]
    fn a_lock_whose_release_no_site_sees_orders_nothing() {
        // Thread 1 takes a and lets it go by a plain store, then takes b;
        // thread 2, holding b, finds a free. That thread 1 held a when it
        // took b is no more than a guess.
        let mut t = LockTracker::default();
        let take = cas(0, 0, 1, LOCK);
        t.on_word(Tid(1), 11, 0xa0, &take);
        t.on_word(Tid(1), 12, 0xb0, &take);
        t.on_word(Tid(1), 13, 0xb0, &swap(1, 0, None));
        t.on_word(Tid(2), 21, 0xb0, &take);
        t.on_word(Tid(2), 22, 0xa0, &take);
        assert!(t.inversions().is_empty(), "{:?}", t.inversions());
        assert!(t.is_lock(0xa0), "still a lock: it may gate others' orders");
        // The same with a release every site sees is a real order.
        let mut t = LockTracker::default();
        abba(&mut t, take, swap(1, 0, None));
        assert_eq!(t.inversions().len(), 1);
    }

    #[test]
    fn a_release_store_a_site_sees_is_a_seen_release() {
        // At `--sync-points globals` a global spinlock's release store is
        // a site: its holds are seen to end, and its orders count.
        let mut t = LockTracker::default();
        abba(
            &mut t,
            swap(0, 1, LOCK),
            word(AccessKind::Store, 0, Some(0), None),
        );
        assert_eq!(t.inversions().len(), 1);
    }

    #[test]
    fn opposite_orders_in_two_threads_are_a_potential_deadlock() {
        let mut t = LockTracker::default();
        lock(&mut t, 1, 0xa, 10);
        lock(&mut t, 1, 0xb, 11);
        unlock(&mut t, 1, 0xb);
        unlock(&mut t, 1, 0xa);
        lock(&mut t, 2, 0xb, 20);
        lock(&mut t, 2, 0xa, 21);
        let inv = t.inversions();
        assert_eq!(inv.len(), 1);
        let sites: BTreeSet<(u64, u64)> = inv[0]
            .edges
            .iter()
            .map(|e| (e.from_site, e.to_site))
            .collect();
        assert_eq!(sites, BTreeSet::from([(10, 11), (20, 21)]));
    }

    #[test]
    fn one_thread_alone_or_a_common_gate_is_not_a_deadlock() {
        let mut t = LockTracker::default();
        lock(&mut t, 1, 0xa, 1);
        lock(&mut t, 1, 0xb, 2);
        unlock(&mut t, 1, 0xb);
        unlock(&mut t, 1, 0xa);
        lock(&mut t, 1, 0xb, 3);
        lock(&mut t, 1, 0xa, 4);
        assert!(t.inversions().is_empty(), "same thread");
        let mut g = LockTracker::default();
        for (tid, first, second) in [(1, 0xa, 0xb), (2, 0xb, 0xa)] {
            lock(&mut g, tid, 0x9, 0);
            lock(&mut g, tid, first, 1);
            lock(&mut g, tid, second, 2);
            unlock(&mut g, tid, second);
            unlock(&mut g, tid, first);
            unlock(&mut g, tid, 0x9);
        }
        assert!(g.inversions().is_empty(), "gated by 0x9");
    }

    #[test]
    fn a_ring_of_five_is_one_cycle() {
        let mut t = LockTracker::default();
        for i in 0..5u64 {
            let tid = i as u32 + 1;
            lock(&mut t, tid, 100 + i, 1);
            lock(&mut t, tid, 100 + (i + 1) % 5, 2);
            unlock(&mut t, tid, 100 + (i + 1) % 5);
            unlock(&mut t, tid, 100 + i);
        }
        let inv = t.inversions();
        assert_eq!(inv.len(), 1);
        assert_eq!(inv[0].edges.len(), 5);
    }

    #[test]
    fn a_thread_blocked_in_the_locks_futex_is_still_acquiring() {
        let mut t = LockTracker::default();
        lock(&mut t, 1, 0xa, 1);
        t.on_hint(Tid(2), HintOp::MutexLock, 0xa, 7, 0);
        t.on_step(Tid(2), true);
        assert_eq!(t.acquiring(Tid(2)), Some((0xa, 7)));
        assert_eq!(t.holders(0xa), vec![(Tid(1), 1)]);
    }

    #[test]
    fn a_lock_released_by_one_thread_and_taken_by_another_is_a_handoff() {
        let mut t = LockTracker::default();
        lock(&mut t, 1, 0xa, 10);
        t.on_step(Tid(1), false);
        t.on_hint(Tid(1), HintOp::MutexUnlock, 0xa, 11, 0);
        lock(&mut t, 1, 0xa, 12);
        assert!(
            t.handoffs().is_empty(),
            "the same thread again is no handoff"
        );
        t.on_step(Tid(1), false);
        t.on_hint(Tid(1), HintOp::MutexUnlock, 0xa, 13, 0);
        lock(&mut t, 2, 0xa, 20);
        assert_eq!(
            t.handoffs().iter().copied().collect::<Vec<_>>(),
            vec![(13, 20)]
        );
    }

    #[test]
    fn a_failed_trylock_takes_nothing() {
        let mut t = LockTracker::default();
        t.on_hint(Tid(1), HintOp::MutexTrylock, 0xa, 1, 0);
        t.on_step(Tid(1), false);
        t.on_hint(Tid(1), HintOp::TryResult, 0xa, 1, 16);
        assert!(t.held(Tid(1)).is_empty());
        t.on_hint(Tid(1), HintOp::MutexTrylock, 0xa, 1, 0);
        t.on_hint(Tid(1), HintOp::TryResult, 0xa, 1, 0);
        assert_eq!(t.held(Tid(1)).len(), 1);
    }

    #[test]
    fn a_trylock_while_holding_a_lock_orders_nothing() {
        let mut t = LockTracker::default();
        lock(&mut t, 1, 0xa, 1);
        t.on_hint(Tid(1), HintOp::MutexTrylock, 0xb, 2, 0);
        t.on_hint(Tid(1), HintOp::TryResult, 0xb, 2, 0);
        unlock(&mut t, 1, 0xb);
        unlock(&mut t, 1, 0xa);
        lock(&mut t, 2, 0xb, 3);
        t.on_hint(Tid(2), HintOp::MutexTrylock, 0xa, 4, 0);
        t.on_hint(Tid(2), HintOp::TryResult, 0xa, 4, 0);
        assert!(
            t.inversions().is_empty(),
            "std::lock's pattern is not an inversion"
        );
    }

    #[test]
    fn a_condvar_wait_gives_the_mutex_back_for_the_wait() {
        let mut t = LockTracker::default();
        lock(&mut t, 1, 0xa, 1);
        t.on_hint(Tid(1), HintOp::CondWait, 0xc, 2, 0xa);
        assert!(t.held(Tid(1)).is_empty());
        t.on_step(Tid(1), true);
        t.on_step(Tid(1), false);
        assert_eq!(t.held(Tid(1))[0].lock, 0xa);
    }

    #[test]
    fn a_dense_lock_graph_is_searched_in_bounded_time() {
        // Sixty locks, every pair taken in both orders by two threads: far
        // more cycles of up to eight locks than could ever be listed.
        let mut g = OrderGraph::default();
        for a in 0..60u64 {
            for b in 0..60u64 {
                if a != b {
                    g.add(OrderEdge {
                        from: a,
                        to: b,
                        thread: 1 + (a < b) as u32,
                        from_site: a,
                        to_site: b,
                        gates: Vec::new(),
                    });
                }
            }
        }
        let started = std::time::Instant::now();
        let found = g.inversions();
        assert!(!found.is_empty());
        assert_eq!(found, g.inversions(), "the same every time");
        assert!(started.elapsed() < std::time::Duration::from_secs(60));
    }

    #[test]
    fn locks_on_no_cycle_are_not_searched() {
        let adj: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::from([
            (1, BTreeSet::from([2])),
            (2, BTreeSet::from([1, 3])),
            (3, BTreeSet::from([4])),
        ]);
        let c = components(&adj);
        assert_eq!(c[&1], c[&2]);
        assert_ne!(c[&2], c[&3]);
        assert_ne!(c[&3], c[&4]);
    }
}
