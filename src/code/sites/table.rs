//! What discovery finds: the sites of an object's code, keyed by file
//! offset, with its functions and the plan of its trampolines.

use serde::Serialize;

use super::acquire::LockRole;
use super::site::Site;

/// How many sites of each kind a table holds, and how many candidates were
/// left alone because the emulator does not execute their instruction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SiteCounts {
    pub atomics: usize,
    pub spins: usize,
    pub loads: usize,
    pub stores: usize,
    pub ticks: usize,
    pub unsupported: usize,
}

/// A function of the object: where it is and whether it belongs to a
/// language runtime (Rust's `core`, `std` and `alloc`, C++'s `std`), whose
/// frames a site's report looks through to the user's code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    /// Link-time virtual address range.
    pub start: u64,
    pub end: u64,
    pub runtime: bool,
    /// What its name says it does to a lock (`Mutex::lock`).
    pub lock: Option<LockRole>,
    /// libc's `syscall(2)`.
    pub syscall: bool,
    /// Its name says it only lets time pass (a yield, a backoff).
    pub yields: bool,
}

/// The sync sites of one object (an ELF file), by file offset.
#[derive(Debug, Default)]
pub struct SiteTable {
    pub(super) sites: Vec<Site>,
    /// The object's functions, sorted by start.
    pub(super) functions: Vec<Function>,
    /// Link-time address minus file offset of each executable segment:
    /// (file offset start, file offset end, vaddr - offset).
    pub(super) segments: Vec<(u64, u64, u64)>,
    pub counts: SiteCounts,
    /// The object forms the address of its own code other than a function's
    /// entry (`etext`, a label): it may read its machine code as data, and
    /// an `int3` would show. Such an object is left unpatched.
    pub reads_own_code: bool,
    /// The jumps to trampolines of the sites the dispatcher can take.
    pub trampolines: super::trampoline::Trampolines,
}

impl SiteTable {
    /// The site whose first byte is at file offset `offset`.
    pub fn at(&self, offset: u64) -> Option<&Site> {
        self.sites
            .binary_search_by_key(&offset, |s| s.offset)
            .ok()
            .map(|i| &self.sites[i])
    }

    /// The sites whose first byte lies in `[lo, hi)` (file offsets).
    pub fn in_range(&self, lo: u64, hi: u64) -> &[Site] {
        let a = self.sites.partition_point(|s| s.offset < lo);
        let b = self.sites.partition_point(|s| s.offset < hi);
        &self.sites[a..b]
    }

    pub fn len(&self) -> usize {
        self.sites.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sites.is_empty()
    }

    /// Whether the code at file offset `offset` belongs to a runtime
    /// function; `None` when no function covers it.
    pub fn is_runtime(&self, offset: u64) -> Option<bool> {
        self.function_at(offset).map(|f| f.runtime)
    }

    /// Whether a site at file offset `offset` is reported at a caller: it
    /// lies in a language runtime's function, or in one named as a lock's.
    pub fn reports_caller(&self, offset: u64) -> bool {
        self.function_at(offset)
            .is_some_and(|f| f.runtime || f.lock.is_some())
    }

    /// What the name of the function holding file offset `offset` says it
    /// does to a lock.
    pub fn lock_role(&self, offset: u64) -> Option<LockRole> {
        self.function_at(offset)?.lock
    }

    /// The function holding the code at file offset `offset`.
    fn function_at(&self, offset: u64) -> Option<&Function> {
        function_at(&self.functions, self.vaddr_of(offset)?)
    }

    /// Link-time address minus file offset of the executable segment that
    /// file offsets `[lo, hi)` overlap (a mapping of it may start a little
    /// before the segment, at a page boundary).
    pub fn link_delta(&self, lo: u64, hi: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|(a, b, _)| *a < hi && lo <= *b)
            .map(|(_, _, d)| *d)
    }

    /// The link-time address of the code at file offset `offset`, when an
    /// executable segment holds it.
    pub fn vaddr_of(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|(lo, hi, _)| (*lo..=*hi).contains(&offset))
            .map(|(_, _, d)| offset.wrapping_add(*d))
    }
}

/// The function of `functions` (sorted by start) holding `va`.
pub(super) fn function_at(functions: &[Function], va: u64) -> Option<&Function> {
    let i = functions.partition_point(|f| f.start <= va);
    let f = functions.get(i.checked_sub(1)?)?;
    (va < f.end).then_some(f)
}

/// Which of an object's sites a run patches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Its sync sites and its loops' ticks: the program and its own
    /// libraries, or every object when no pthread shim covers the locks.
    All,
    /// Only its loops' ticks: a system library whose locks the pthread
    /// shim reports, which still computes.
    Ticks,
}

/// How an object is patched: which sites, and which of them jump to
/// trampolines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Plan {
    pub scope: Scope,
    /// Whether loops get ticks (`StepRules::ticks`).
    pub ticks: bool,
    /// Whether sync sites jump to trampolines (else they trap; a tick
    /// always jumps, never a trap per iteration).
    pub jumps: bool,
}

impl Default for Plan {
    fn default() -> Plan {
        Plan {
            scope: Scope::All,
            ticks: true,
            jumps: true,
        }
    }
}
