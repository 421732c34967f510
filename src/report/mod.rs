//! Reports for people: events, outcomes and lock-order cycles, with code
//! addresses turned into functions and source lines.

pub mod data;
mod facts;
pub mod signature;
pub mod symbols;
mod varnames;

pub use facts::{RunFacts, base_name, stack_text};

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::engine::Vm;
use crate::memory::{AddressSpace, Backing};
use crate::observe::locks::Inversion;
use crate::observe::outcome::{BlockedThread, Outcome};
use crate::observe::trace::{Event, Operation};
use crate::report::data::DataSymbols;
use crate::report::symbols::{Location, Mapping, Symbolizer};

/// The guest's file mappings, as the symbolizer takes them.
pub fn mappings(mm: &AddressSpace) -> Vec<Mapping> {
    mm.vmas()
        .filter_map(|v| match &v.backing {
            Backing::File { data, offset, .. } => Some(Mapping {
                start: v.start,
                end: v.end,
                file_offset: *offset,
                path: v.name.clone(),
                data: data.clone(),
            }),
            Backing::Anon | Backing::Shared { .. } | Backing::Jumps { .. } => None,
        })
        .collect()
}

/// Symbolizes addresses of one run.
pub struct Symbols {
    maps: Vec<Mapping>,
    sym: Symbolizer,
    /// Blocked threads' stacks, to name the program's frame that called a
    /// library's blocking function (empty without a machine).
    stacks: BTreeMap<u32, Vec<u64>>,
    exe_object: String,
    /// Data symbols, parsed the first time an object is named.
    data: Option<DataSymbols>,
}

impl Symbols {
    /// For the run `vm` made (its mappings as they are now).
    pub fn new(vm: &Vm) -> Self {
        let mut s = Self::from_mappings(mappings(vm.kernel().mm()));
        // Blocked threads', and a crashed one's: where each stopped.
        let crashed = match vm.kernel().outcome() {
            Some(Outcome::Crashed { thread, .. }) => Some(*thread),
            _ => None,
        };
        let blocked = vm
            .kernel()
            .threads()
            .values()
            .filter(|t| matches!(t.state(), crate::kernel::thread::ThreadState::Blocked(_)))
            .map(|t| t.tid.0)
            .chain(crashed);
        s.stacks = facts::stacks(vm, &s.maps, blocked);
        s.exe_object = facts::base_name(vm.kernel().program()).to_string();
        s
    }

    pub fn from_mappings(maps: Vec<Mapping>) -> Self {
        Symbols {
            maps,
            sym: Symbolizer::new(),
            stacks: BTreeMap::new(),
            exe_object: String::new(),
            data: None,
        }
    }

    /// A lock or other object by its symbol (`forks+0x28`,
    /// `accounts[1].lock`), else its address.
    pub fn object(&mut self, a: u64) -> String {
        self.data_name(a).unwrap_or_else(|| format!("{a:#x}"))
    }

    /// An object's symbol, if it has one (not one on the heap).
    pub fn data_name(&mut self, a: u64) -> Option<String> {
        let maps = &self.maps;
        self.data
            .get_or_insert_with(|| DataSymbols::new(maps))
            .name(a)
    }

    /// Where a blocked thread stopped, and when that is inside a library,
    /// the program's frame that called it: `read, called from main (a.c:9)`.
    fn stopped_at(&mut self, thread: u32, rip: u64) -> String {
        let here = self.at(rip);
        let Some(stack) = self.stacks.get(&thread) else {
            return here.short();
        };
        if signature::is_users(&here, &self.exe_object) {
            return here.short();
        }
        let (sym, maps) = (&mut self.sym, &self.maps);
        let caller = signature::first_users_frame(stack, &self.exe_object, &mut |a, call| {
            sym.locate_frame(maps, a, call)
        });
        match caller {
            Some(c) => format!("{}, called from {}", here.short(), c.short()),
            None => here.short(),
        }
    }

    /// Where a return address (a call site) is.
    pub fn call_site(&mut self, addr: u64) -> Location {
        self.sym.locate_call_site(&self.maps, addr)
    }

    /// Where a lock was taken or asked for (see
    /// [`Symbolizer::locate_lock_site`]).
    pub fn lock_site(&mut self, addr: u64) -> Location {
        self.sym.locate_lock_site(&self.maps, addr)
    }

    /// Where an instruction is.
    pub fn at(&mut self, addr: u64) -> Location {
        self.sym.locate(&self.maps, addr)
    }

    /// One line for an event.
    pub fn event_line(&mut self, e: &Event) -> String {
        let object = e.object.map(|o| format!("{o:#x}")).unwrap_or_default();
        let result = match (e.op, e.result) {
            // A sync site's step comes before its instruction: what the
            // memory holds then.
            (Operation::Sync { .. }, _) if e.object.is_some() => format!("holds {:#x}", e.value),
            (Operation::Sync { .. }, _) => String::new(),
            (_, Some(r)) => format!("= {r}"),
            (_, None) => "= (blocked)".into(),
        };
        format!(
            "[{:>6}] thread {:<3} {:<18} {:<16} {:<12} at {}",
            e.step,
            e.thread,
            e.name(),
            object,
            result,
            self.call_site(e.site.0).short()
        )
    }

    /// An event as JSON.
    pub fn event_json(&mut self, e: &Event) -> Value {
        json!({
            "step": e.step,
            "thread": e.thread,
            "op": e.name(),
            "object": e.object.map(|o| format!("{o:#x}")),
            "site": format!("{:#x}", e.site),
            "location": self.call_site(e.site.0).short(),
            "result": e.result,
            "value": e.value,
        })
    }

    fn blocked_line(&mut self, b: &BlockedThread) -> String {
        match (b.lock, b.site, b.holder) {
            (Some(l), Some(site), Some(h)) => {
                let taken = b
                    .holder_site
                    .map(|s| self.lock_site(s.0).short())
                    .unwrap_or_default();
                let how = if b.waits_on.ends_with("spinning") {
                    "spins"
                } else {
                    "waits"
                };
                format!(
                    "thread {} ({}) {how} for lock {} at {}, held by thread {h} (taken at {taken})",
                    b.thread,
                    b.name,
                    self.object(l.0),
                    self.lock_site(site.0).short()
                )
            }
            _ => format!(
                "thread {} ({}) waits on {} at {}",
                b.thread,
                b.name,
                b.waits_on,
                self.stopped_at(b.thread.0, b.rip.0)
            ),
        }
    }

    /// Lines explaining an outcome beyond its summary.
    pub fn outcome_lines(&mut self, o: &Outcome) -> Vec<String> {
        match o {
            Outcome::Deadlocked { threads, cycle } => {
                let mut out = Vec::new();
                if !cycle.is_empty() {
                    out.push(format!("wait-for cycle of {} threads:", cycle.len()));
                }
                let ordered: Vec<&BlockedThread> = cycle
                    .iter()
                    .filter_map(|t| threads.iter().find(|b| b.thread == *t))
                    .chain(threads.iter().filter(|b| !cycle.contains(&b.thread)))
                    .collect();
                for b in ordered {
                    out.push(self.blocked_line(b));
                }
                out
            }
            Outcome::Crashed { rip, thread, .. } => {
                vec![format!(
                    "thread {thread} at {}",
                    self.stopped_at(*thread, *rip)
                )]
            }
            Outcome::Hung { rip, thread, .. }
            | Outcome::TimedOut { rip, thread }
            | Outcome::OutOfMemory { rip, thread, .. } => {
                vec![format!("thread {thread} at {}", self.at(*rip).short())]
            }
            Outcome::Unsupported { rip, .. } => {
                vec![format!("called from {}", self.at(*rip).short())]
            }
            Outcome::Exited { .. } | Outcome::WrongOutput { .. } => Vec::new(),
        }
    }

    /// The outcome's addresses, symbolized, as JSON.
    pub fn outcome_details_json(&mut self, o: &Outcome) -> Value {
        match o {
            Outcome::Deadlocked { threads, cycle } => json!({
                "cycle": cycle,
                "threads": threads.iter().map(|b| json!({
                    "thread": b.thread,
                    "name": b.name,
                    "waits_on": b.waits_on,
                    "lock": b.lock.map(|l| format!("{l:#x}")),
                    "lock_name": b.lock.map(|l| self.object(l.0)),
                    "site": b.site.map(|s| self.lock_site(s.0).short()),
                    "holder": b.holder,
                    "holder_site": b.holder_site.map(|s| self.lock_site(s.0).short()),
                    "at": self.at(b.rip.0).short(),
                })).collect::<Vec<_>>(),
            }),
            Outcome::Crashed { rip, .. }
            | Outcome::Hung { rip, .. }
            | Outcome::TimedOut { rip, .. }
            | Outcome::OutOfMemory { rip, .. }
            | Outcome::Unsupported { rip, .. } => {
                json!({ "at": self.at(*rip).short() })
            }
            Outcome::Exited { .. } | Outcome::WrongOutput { .. } => Value::Null,
        }
    }

    /// Lines describing a lock-order cycle.
    pub fn inversion_lines(&mut self, inv: &Inversion) -> Vec<String> {
        let mut out = vec![format!(
            "potential deadlock: a lock-order cycle over {} locks",
            inv.edges.len()
        )];
        for e in &inv.edges {
            let (to, from) = (self.object(e.to), self.object(e.from));
            out.push(format!(
                "  thread {} took lock {to} at {} while holding lock {from} (taken at {})",
                e.thread,
                self.lock_site(e.to_site).short(),
                self.lock_site(e.from_site).short()
            ));
        }
        out
    }

    /// Lock-order cycles as JSON.
    pub fn inversions_json(&mut self, invs: &[Inversion]) -> Value {
        Value::Array(
            invs.iter()
                .map(|inv| {
                    json!({
                        "edges": inv.edges.iter().map(|e| json!({
                            "thread": e.thread,
                            "holding": format!("{:#x}", e.from),
                            "holding_name": self.object(e.from),
                            "holding_site": self.lock_site(e.from_site).short(),
                            "acquiring": format!("{:#x}", e.to),
                            "acquiring_name": self.object(e.to),
                            "acquiring_site": self.lock_site(e.to_site).short(),
                        })).collect::<Vec<_>>()
                    })
                })
                .collect(),
        )
    }
}
