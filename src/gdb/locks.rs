//! `monitor locks` and `monitor threads`: at the timeline's position, every
//! lock the run knows (its kind, holder, where the holder took it, its
//! waiters) and every thread (its state, what it waits on), locks named as
//! the program names them: a global by its symbol, a lock on the heap by
//! where the program made it (one more replay of the run, the first time
//! one is asked for).

use std::collections::{BTreeMap, BTreeSet};

use crate::engine::{RunConfig, Vm};
use crate::ids::Tid;
use crate::kernel::vfs::SharedSource;
use crate::kernel::{Kernel, Thread, ThreadState, Wait};
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

/// The most free locks `monitor locks` names: a program may make
/// thousands, and the ones held or waited for are the point.
const MAX_FREE_LISTED: usize = 20;

/// A lock a thread does not hold and wants.
#[derive(Clone, Copy)]
struct Want {
    lock: u64,
    /// Where it asked.
    site: u64,
    /// Asleep in the kernel for it (else spinning, or on its way to take it).
    blocked: bool,
}

/// The lock each live thread wants, where it stands.
fn wants(k: &Kernel) -> BTreeMap<Tid, Want> {
    let locks = k.observer().locks();
    // Where a blocked thread's futex wait is for a lock it asked for (and
    // not, say, a condition variable's word).
    let blocked_on: BTreeMap<Tid, (u64, u64)> = k
        .blocked_threads()
        .into_iter()
        .filter_map(|b| Some((b.thread, (b.lock?.0, b.site?.0))))
        .collect();
    k.threads()
        .values()
        .filter(|t| t.is_alive())
        .filter_map(|t| {
            let blocked = matches!(t.state(), ThreadState::Blocked(_));
            let (lock, site) = if blocked {
                blocked_on.get(&t.tid).copied()?
            } else {
                locks.acquiring(t.tid)?
            };
            Some((
                t.tid,
                Want {
                    lock,
                    site,
                    blocked,
                },
            ))
        })
        .collect()
}

/// Names of the locks at `addrs`: a global's symbol, a heap lock's maker,
/// else the address.
fn lock_names(
    sym: &mut Symbols,
    heap: &mut HeapNames,
    addrs: impl IntoIterator<Item = u64>,
) -> BTreeMap<u64, String> {
    let mut names = BTreeMap::new();
    let mut on_heap = Vec::new();
    for a in addrs {
        match sym.data_name(a) {
            Some(n) => {
                names.insert(a, n);
            }
            None => on_heap.push(a),
        }
    }
    let found = heap.names(&on_heap);
    for a in on_heap {
        let name = found.get(&a).cloned().unwrap_or_else(|| format!("{a:#x}"));
        names.insert(a, name);
    }
    names
}

/// `thread 2 (philosophers)`.
fn thread_name(k: &Kernel, tid: Tid) -> String {
    match k.threads().get(&tid) {
        Some(t) => format!("thread {tid} ({})", t.name),
        None => format!("thread {tid}"),
    }
}

/// `rows` as columns two spaces apart, each as wide as its widest cell.
fn table(rows: &[Vec<String>]) -> Vec<String> {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    rows.iter()
        .map(|r| {
            let mut line = String::new();
            for (c, cell) in r.iter().enumerate() {
                line.push_str(cell);
                let pad = widths[c] - cell.chars().count();
                line.extend(std::iter::repeat_n(' ', pad + 2));
            }
            line.trim_end().to_string()
        })
        .collect()
}

/// The lines `monitor locks` prints for the run where `vm` stands: a row
/// a lock, those held or wanted first, then the free ones.
pub fn lines(vm: &Vm, heap: &mut HeapNames) -> Vec<String> {
    let k = vm.debug_kernel();
    let locks = k.observer().locks();
    let mut known = locks.known();
    let wants = wants(k);
    // A lock a thread waits for is one, whatever the tracker filed it as.
    for w in wants.values() {
        known
            .entry(w.lock)
            .or_insert(crate::observe::locks::LockKind::Inferred);
    }
    if known.is_empty() {
        return vec!["the run knows no lock here".into()];
    }
    let holders: BTreeMap<u64, Vec<(Tid, u64, bool)>> = known
        .keys()
        .map(|l| {
            let hs = k
                .threads()
                .values()
                .filter(|t| t.is_alive())
                .flat_map(|t| {
                    locks
                        .held(t.tid)
                        .iter()
                        .filter(|h| h.lock == *l)
                        .map(|h| (t.tid, h.site, h.shared))
                        .collect::<Vec<_>>()
                })
                .collect();
            (*l, hs)
        })
        .collect();
    let busy = |l: &u64| !holders[l].is_empty() || wants.values().any(|w| w.lock == *l);
    let (busy_locks, free): (Vec<u64>, Vec<u64>) = known.keys().copied().partition(busy);
    let listed_free = &free[..free.len().min(MAX_FREE_LISTED)];

    let mut sym = Symbols::from_mappings(mappings(k.mm()));
    let names = lock_names(
        &mut sym,
        heap,
        busy_locks.iter().chain(listed_free).copied(),
    );
    let mut rows = vec![
        ["lock", "kind", "holder", "taken at", "waiters"]
            .map(String::from)
            .to_vec(),
    ];
    let mut ordered = busy_locks.clone();
    ordered.sort_by_key(|l| (names[l].clone(), *l));
    for l in ordered.iter().chain(listed_free) {
        let waiters: Vec<String> = wants
            .iter()
            .filter(|(_, w)| w.lock == *l)
            .map(|(t, w)| {
                let how = match (w.blocked, holders[l].iter().any(|(h, ..)| h != t)) {
                    (true, _) => "",
                    (false, true) => " (spinning)",
                    (false, false) => " (taking it)",
                };
                format!("thread {t}{how}")
            })
            .collect();
        let hs = &holders[l];
        let first = |c: &str| vec![names[l].clone(), known[l].describe().to_string(), c.into()];
        if hs.is_empty() {
            let mut row = first("free");
            row.extend(["".into(), waiters.join(", ")]);
            rows.push(row);
        }
        // A lock held for reading by several: a row a holder.
        for (i, (h, site, shared)) in hs.iter().enumerate() {
            let read = if *shared { " for reading" } else { "" };
            let mut row = if i == 0 {
                first(&format!("{}{read}", thread_name(k, *h)))
            } else {
                vec![
                    String::new(),
                    String::new(),
                    format!("{}{read}", thread_name(k, *h)),
                ]
            };
            row.push(sym.lock_site(*site).short());
            row.push(if i == 0 {
                waiters.join(", ")
            } else {
                String::new()
            });
            rows.push(row);
        }
    }
    let mut out = table(&rows);
    if free.len() > listed_free.len() {
        out.push(format!(
            "and {} more free locks",
            free.len() - listed_free.len()
        ));
    }
    out
}

/// What a blocked thread waits for, when it is no lock.
fn wait_text(w: &Wait) -> String {
    match w {
        Wait::Futex { addr, .. } => format!("futex {addr:#x}"),
        Wait::Sleep { .. } => "a sleep to end".into(),
        Wait::Poll { .. } => "poll".into(),
        Wait::Signal | Wait::SigWait { .. } => "a signal".into(),
        Wait::Pipe { write: false, .. } => "data in an empty pipe".into(),
        Wait::Pipe { write: true, .. } => "room in a full pipe".into(),
        Wait::Child { .. } => "a child process".into(),
        Wait::Readable { fd, .. } => format!("descriptor {fd} to be readable"),
        Wait::Vfork { child } => format!("vfork child {child}"),
    }
}

/// A thread's state: running, runnable, blocked or exited.
fn state_word(k: &Kernel, t: &Thread) -> &'static str {
    match t.state() {
        ThreadState::Runnable if t.tid == k.current() && k.outcome().is_none() => "running",
        ThreadState::Runnable => "runnable",
        ThreadState::Blocked(_) => "blocked",
        ThreadState::Exited => "exited",
    }
}

/// A thread's state as gdb's thread list shows it: `blocked on futex
/// 0x7f..`, `blocked, waiting for a signal`.
pub fn state_text(k: &Kernel, t: &Thread) -> String {
    match t.state() {
        ThreadState::Blocked(w @ Wait::Futex { .. }) => format!("blocked on {}", wait_text(w)),
        ThreadState::Blocked(w) => format!("blocked, waiting for {}", wait_text(w)),
        _ => state_word(k, t).into(),
    }
}

/// What each thread waits on, a lock by its name, kind, where it was
/// asked for and its holder; empty for one that waits for nothing.
fn waits_by_thread(k: &Kernel, heap: &mut HeapNames) -> BTreeMap<Tid, String> {
    let locks = k.observer().locks();
    let wants = wants(k);
    let mut sym = Symbols::from_mappings(mappings(k.mm()));
    let names = lock_names(&mut sym, heap, wants.values().map(|w| w.lock));
    let kinds = locks.known();
    k.threads()
        .values()
        .map(|t| {
            let waits = match (wants.get(&t.tid), t.state()) {
                (Some(w), _) => {
                    let kind = kinds.get(&w.lock).map_or("lock", |k| k.describe());
                    let how = if w.blocked { "" } else { "spinning on " };
                    let holders: Vec<String> = locks
                        .holders(w.lock)
                        .into_iter()
                        .map(|(h, _)| h)
                        .filter(|h| *h != t.tid)
                        .map(|h| h.to_string())
                        .collect();
                    let by = match holders.len() {
                        0 => String::new(),
                        1 => format!(", held by thread {}", holders[0]),
                        _ => format!(", held by threads {}", holders.join(", ")),
                    };
                    format!(
                        "{how}{} ({kind}) at {}{by}",
                        names[&w.lock],
                        sym.lock_site(w.site).short()
                    )
                }
                (None, ThreadState::Blocked(w)) => wait_text(w),
                (None, _) => String::new(),
            };
            (t.tid, waits)
        })
        .collect()
}

/// Each thread's state as gdb's `info threads` shows it, a lock it waits
/// for by its name: `blocked on forks[1] (pthread mutex) at philosopher
/// (philosophers.c:44), held by thread 3`.
pub fn thread_infos(vm: &Vm, heap: &mut HeapNames) -> BTreeMap<Tid, String> {
    let k = vm.debug_kernel();
    let mut waits = waits_by_thread(k, heap);
    k.threads()
        .values()
        .map(|t| {
            let waits = waits.remove(&t.tid).unwrap_or_default();
            let info = match t.state() {
                _ if waits.is_empty() => state_text(k, t),
                ThreadState::Blocked(Wait::Futex { .. }) => format!("blocked on {waits}"),
                ThreadState::Runnable => format!("{}, {waits}", state_word(k, t)),
                _ => state_text(k, t),
            };
            (t.tid, info)
        })
        .collect()
}

/// The lines `monitor threads` prints for the run where `vm` stands: a
/// row a thread, with what it waits on, a lock by its name.
pub fn thread_lines(vm: &Vm, heap: &mut HeapNames) -> Vec<String> {
    let k = vm.debug_kernel();
    let mut waits = waits_by_thread(k, heap);
    let mut rows = vec![
        ["thread", "process", "name", "state", "waits on"]
            .map(String::from)
            .to_vec(),
    ];
    for t in k.threads().values() {
        rows.push(vec![
            t.tid.to_string(),
            t.pid.to_string(),
            t.name.clone(),
            state_word(k, t).into(),
            waits.remove(&t.tid).unwrap_or_default(),
        ]);
    }
    table(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_aligns_its_columns_and_trims_its_lines() {
        let rows: Vec<Vec<String>> = [
            vec!["lock", "holder", "waiters"],
            vec!["forks[0]", "thread 2", "thread 6"],
            vec!["a", "free", ""],
        ]
        .into_iter()
        .map(|r| r.into_iter().map(String::from).collect())
        .collect();
        assert_eq!(
            table(&rows),
            [
                "lock      holder    waiters",
                "forks[0]  thread 2  thread 6",
                "a         free",
            ]
        );
    }
}
