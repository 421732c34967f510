//! `monitor locks`: at the timeline's position, the locks each live thread
//! holds and the one it waits for or spins on, named as the program names
//! them: a global by its symbol, a lock on the heap by where the program
//! made it (one more replay of the run, the first time one is asked for).

use std::collections::{BTreeMap, BTreeSet};

use crate::engine::{RunConfig, Vm};
use crate::ids::Tid;
use crate::kernel::ThreadState;
use crate::kernel::vfs::SharedSource;
use crate::observe::outcome::Outcome;
use crate::report::{Symbols, mappings};
use crate::rwd::Rwd;
use crate::sched::Schedule;

/// The run a session debugs, as heap naming replays it.
enum Run {
    /// The reproducer the session was opened from.
    Reproducer(Box<Rwd>),
    /// A run given by its inputs (`run --gdb`): recorded into a reproducer
    /// only when a heap lock is first named.
    Inputs {
        cfg: Box<RunConfig>,
        source: SharedSource,
        schedule: Schedule,
    },
    /// Recording it failed: heap locks keep their addresses.
    Unavailable,
}

/// Names of heap objects, by address, found by replaying the run; each
/// address is looked up at most once per session.
pub struct HeapNames {
    run: Run,
    names: BTreeMap<u64, Option<String>>,
}

impl HeapNames {
    /// For a session opened from `rwd`.
    pub fn of_reproducer(rwd: Rwd) -> HeapNames {
        HeapNames {
            run: Run::Reproducer(Box::new(rwd)),
            names: BTreeMap::new(),
        }
    }

    /// For a session of the run `cfg`, `source` and `schedule` make.
    pub fn of_run(cfg: &RunConfig, source: SharedSource, schedule: Schedule) -> HeapNames {
        // Naming replays the run; judging its output again adds nothing.
        let mut cfg = cfg.clone();
        cfg.oracle = None;
        HeapNames {
            run: Run::Inputs {
                cfg: Box::new(cfg),
                source,
                schedule,
            },
            names: BTreeMap::new(),
        }
    }

    fn reproducer(&mut self) -> Option<&Rwd> {
        if let Run::Inputs {
            cfg,
            source,
            schedule,
        } = &self.run
        {
            self.run = match crate::rwd::record(cfg, source.clone(), schedule) {
                Ok((rwd, _)) => Run::Reproducer(Box::new(rwd)),
                Err(_) => Run::Unavailable,
            };
        }
        match &self.run {
            Run::Reproducer(rwd) => Some(rwd),
            _ => None,
        }
    }

    /// The names of `addrs` (those the replay finds on the heap). The
    /// first look-up also names the locks of the run's ending and of its
    /// lock-order cycles, so one replay usually serves the whole session.
    fn names(&mut self, addrs: &[u64]) -> BTreeMap<u64, String> {
        let missing: BTreeSet<u64> = addrs
            .iter()
            .copied()
            .filter(|a| !self.names.contains_key(a))
            .collect();
        if !missing.is_empty() {
            let first = self.names.is_empty();
            let found: Vec<(u64, Option<String>)> = match self.reproducer() {
                Some(rwd) => {
                    let mut ask = missing.clone();
                    if first {
                        if let Outcome::Deadlocked { threads, .. } = rwd.outcome() {
                            ask.extend(
                                threads
                                    .iter()
                                    .flat_map(|b| b.lock.map(|l| l.0).or(b.object)),
                            );
                        }
                        for inv in rwd.potential_deadlocks() {
                            ask.extend(inv.edges.iter().flat_map(|e| [e.from, e.to]));
                        }
                    }
                    let ask: Vec<u64> = ask.into_iter().collect();
                    let found = crate::rwd::heap::names(rwd, &ask);
                    ask.into_iter()
                        .map(|a| (a, found.get(&a).cloned()))
                        .collect()
                }
                None => missing.iter().map(|a| (*a, None)).collect(),
            };
            self.names.extend(found);
        }
        addrs
            .iter()
            .filter_map(|a| Some((*a, self.names.get(a)?.clone()?)))
            .collect()
    }
}

/// What one thread does with one lock.
enum Fact {
    Holds {
        tid: Tid,
        lock: u64,
        site: u64,
        shared: bool,
    },
    Wants {
        tid: Tid,
        lock: u64,
        site: u64,
        blocked: bool,
        holders: Vec<Tid>,
    },
}

/// The lines `monitor locks` prints for the run where `vm` stands.
pub fn lines(vm: &Vm, heap: &mut HeapNames) -> Vec<String> {
    let k = vm.debug_kernel();
    let locks = k.observer().locks();
    // Where a blocked thread's futex wait is for a lock it asked for (and
    // not, say, a condition variable's word).
    let blocked_on: BTreeMap<Tid, (u64, u64)> = k
        .blocked_threads()
        .into_iter()
        .filter_map(|b| Some((b.thread, (b.lock?.0, b.site?.0))))
        .collect();
    let mut facts = Vec::new();
    for t in k.threads().values().filter(|t| t.is_alive()) {
        for h in locks.held(t.tid) {
            if locks.taken_as_lock(h.lock) {
                facts.push(Fact::Holds {
                    tid: t.tid,
                    lock: h.lock,
                    site: h.site,
                    shared: h.shared,
                });
            }
        }
        let blocked = matches!(t.state(), ThreadState::Blocked(_));
        let wanted = if blocked {
            blocked_on.get(&t.tid).copied()
        } else {
            locks.acquiring(t.tid)
        };
        if let Some((lock, site)) = wanted {
            let holders = locks
                .holders(lock)
                .into_iter()
                .map(|(h, _)| h)
                .filter(|h| *h != t.tid)
                .collect();
            facts.push(Fact::Wants {
                tid: t.tid,
                lock,
                site,
                blocked,
                holders,
            });
        }
    }
    if facts.is_empty() {
        return vec!["no thread holds or waits for a lock here".into()];
    }

    let mut sym = Symbols::from_mappings(mappings(k.mm()));
    let addrs: BTreeSet<u64> = facts
        .iter()
        .map(|f| match f {
            Fact::Holds { lock, .. } | Fact::Wants { lock, .. } => *lock,
        })
        .collect();
    let mut names: BTreeMap<u64, String> = BTreeMap::new();
    let mut on_heap = Vec::new();
    for a in addrs {
        match sym.data_name(a) {
            Some(n) => {
                names.insert(a, n);
            }
            None => on_heap.push(a),
        }
    }
    names.extend(heap.names(&on_heap));
    let name = |a: u64| names.get(&a).cloned().unwrap_or_else(|| format!("{a:#x}"));

    facts
        .iter()
        .map(|f| match f {
            Fact::Holds {
                tid,
                lock,
                site,
                shared,
            } => {
                let how = if *shared { " for reading" } else { "" };
                format!(
                    "thread {tid} holds {}{how} (taken at {})",
                    name(*lock),
                    sym.lock_site(*site).short()
                )
            }
            Fact::Wants {
                tid,
                lock,
                site,
                blocked,
                holders,
            } => {
                let how = match (blocked, holders.is_empty()) {
                    (true, _) => "waits for",
                    (false, false) => "spins on",
                    (false, true) => "is taking",
                };
                let by = match holders.as_slice() {
                    [] => "which no other thread holds".to_string(),
                    [h] => format!("held by thread {h}"),
                    hs => {
                        let hs: Vec<String> = hs.iter().map(|h| h.to_string()).collect();
                        format!("held by threads {}", hs.join(", "))
                    }
                };
                format!(
                    "thread {tid} {how} {} at {}, {by}",
                    name(*lock),
                    sym.lock_site(*site).short()
                )
            }
        })
        .collect()
}
