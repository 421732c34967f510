//! The guest's x86-64 four-level page tables, owned and written by the monitor.
//!
//! The guest never writes them (it has no kernel). A leaf entry that is not
//! present may still hold a page: `PTE_KEEP` marks a page whose contents must
//! survive while its mapping is inaccessible (`mprotect(PROT_NONE)`).

use super::phys::{PageAllocator, PhysError, PhysMemory};
use crate::arch::layout::{PAGE_SIZE, PHYS_PML4};

/// Present.
pub const PTE_P: u64 = 1;
/// Writable.
pub const PTE_W: u64 = 1 << 1;
/// User-accessible.
pub const PTE_U: u64 = 1 << 2;
/// Accessed. The CPU (or a shadow MMU) sets it before it caches a
/// translation, so a leaf whose A bit is clear can change without
/// invalidating anything: new leaves start with it clear.
pub const PTE_A: u64 = 1 << 5;
/// Dirty (set in advance so that first writes need no table update).
pub const PTE_D: u64 = 1 << 6;
/// Large page (in a directory entry).
pub const PTE_PS: u64 = 1 << 7;
/// Global.
pub const PTE_G: u64 = 1 << 8;
/// Software bit: the entry owns the page in its address field even when not present.
pub const PTE_KEEP: u64 = 1 << 9;
/// Software bit: the page is shared copy-on-write with another address
/// space (after `fork`); the entry is read-only whatever the mapping allows,
/// and the first write gives the space its own copy.
pub const PTE_COW: u64 = 1 << 10;
/// No-execute.
pub const PTE_NX: u64 = 1 << 63;
/// The physical-address field.
pub const PTE_ADDR: u64 = 0x000f_ffff_ffff_f000;

/// Access rights of a user page.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Prot {
    pub read: bool,
    pub write: bool,
    pub exec: bool,
}

impl Prot {
    pub const NONE: Prot = Prot {
        read: false,
        write: false,
        exec: false,
    };
    pub const RW: Prot = Prot {
        read: true,
        write: true,
        exec: false,
    };
    pub const R: Prot = Prot {
        read: true,
        write: false,
        exec: false,
    };
    pub const RX: Prot = Prot {
        read: true,
        write: false,
        exec: true,
    };

    /// From Linux's `PROT_*` bits.
    pub fn from_linux(bits: u64) -> Prot {
        Prot {
            read: bits & 1 != 0,
            write: bits & 2 != 0,
            exec: bits & 4 != 0,
        }
    }

    /// Whether any access at all is allowed (x86 cannot express write- or
    /// exec-only pages: both imply read, as on Linux).
    pub fn accessible(self) -> bool {
        self.read || self.write || self.exec
    }

    /// The leaf-entry flags for a page with these rights.
    pub fn pte_flags(self) -> u64 {
        if !self.accessible() {
            return PTE_KEEP;
        }
        let mut f = PTE_P | PTE_U | PTE_D;
        if self.write {
            f |= PTE_W;
        }
        if !self.exec {
            f |= PTE_NX;
        }
        f
    }

    /// Whether going from `self` to `to` takes a right away (which needs the
    /// guest's cached translations invalidated).
    pub fn loses_rights_to(self, to: Prot) -> bool {
        (self.accessible() && !to.accessible())
            || (self.write && !to.write)
            || (self.exec && !to.exec)
    }
}

/// Index of `va` in the table at `level` (3 = PML4 ... 0 = page table).
fn index(va: u64, level: u32) -> u64 {
    (va >> (12 + 9 * level)) & 0x1ff
}

/// One address space's page tables, rooted at a PML4 page.
#[derive(Clone, Copy, Debug)]
pub struct PageTables {
    root: u64,
}

/// PML4 slots of the user half (the kernel half is slot 511).
const USER_SLOTS: u64 = 256;

impl PageTables {
    /// The first address space's tables, rooted where the machine points
    /// CR3 at boot.
    pub const INITIAL: PageTables = PageTables { root: PHYS_PML4 };

    /// Tables with an empty user half over a fresh root that shares the
    /// kernel half with every other address space.
    pub fn new_root(mem: &PhysMemory, alloc: &mut PageAllocator) -> Result<Self, PhysError> {
        let root = alloc.alloc(mem)?;
        mem.write_u64(root + 511 * 8, mem.read_u64(PHYS_PML4 + 511 * 8));
        Ok(PageTables { root })
    }

    /// Guest-physical address of the PML4 (what CR3 holds).
    pub fn root(&self) -> u64 {
        self.root
    }

    /// Retires every table page of the user half (the leaves must have been
    /// dropped already), and the root unless it is the machine's own: see
    /// [`PageAllocator::retire_table`].
    pub fn free_tables(&self, mem: &PhysMemory, alloc: &mut PageAllocator) {
        fn free_level(mem: &PhysMemory, alloc: &mut PageAllocator, table: u64, level: u32) {
            for i in 0..512 {
                let e = mem.read_u64(table + i * 8);
                if e & PTE_P != 0 {
                    let next = e & PTE_ADDR;
                    if level > 1 {
                        free_level(mem, alloc, next, level - 1);
                    }
                    alloc.retire_table(next);
                }
            }
        }
        for i in 0..USER_SLOTS {
            let slot = self.root + i * 8;
            let e = mem.read_u64(slot);
            if e & PTE_P != 0 {
                free_level(mem, alloc, e & PTE_ADDR, 2);
                alloc.retire_table(e & PTE_ADDR);
                mem.write_u64(slot, 0);
            }
        }
        if self.root != PHYS_PML4 {
            alloc.retire_table(self.root);
        }
    }

    /// Guest-physical address of the leaf entry for `va`, creating the
    /// intermediate tables when `alloc` is given.
    fn leaf_slot(
        &self,
        mem: &PhysMemory,
        va: u64,
        mut alloc: Option<&mut PageAllocator>,
    ) -> Result<Option<u64>, PhysError> {
        let mut table = self.root;
        for level in (1..=3).rev() {
            let slot = table + index(va, level) * 8;
            let e = mem.read_u64(slot);
            if e & PTE_P == 0 {
                let Some(a) = alloc.as_deref_mut() else {
                    return Ok(None);
                };
                let fresh = a.alloc(mem)?;
                mem.write_u64(slot, fresh | PTE_P | PTE_W | PTE_U | PTE_A);
                table = fresh;
            } else {
                table = e & PTE_ADDR;
            }
        }
        Ok(Some(table + index(va, 0) * 8))
    }

    /// The leaf entry for `va`, or, when no page table covers `va`, the
    /// first address past the hole (so walks over sparse ranges skip it).
    pub fn lookup(&self, mem: &PhysMemory, va: u64) -> Result<u64, u64> {
        let mut table = self.root;
        for level in (1..=3).rev() {
            let e = mem.read_u64(table + index(va, level) * 8);
            if e & PTE_P == 0 {
                let span = PAGE_SIZE << (9 * level);
                return Err((va | (span - 1)).saturating_add(1));
            }
            table = e & PTE_ADDR;
        }
        Ok(mem.read_u64(table + index(va, 0) * 8))
    }

    /// Every non-zero leaf entry in `[start, end)` as `(va, entry)`, in
    /// address order, skipping the ranges no page table covers. Entries are
    /// read as the walk reaches them, so the caller may rewrite each one.
    pub fn entries(
        self,
        mem: &PhysMemory,
        start: u64,
        end: u64,
    ) -> impl Iterator<Item = (u64, u64)> + '_ {
        let mut va = start;
        std::iter::from_fn(move || {
            while va < end {
                let at = va;
                match self.lookup(mem, at) {
                    Err(next) => va = next.min(end),
                    Ok(pte) => {
                        va += PAGE_SIZE;
                        if pte != 0 {
                            return Some((at, pte));
                        }
                    }
                }
            }
            None
        })
    }

    /// The leaf entry for `va` (0 when there is none).
    pub fn get(&self, mem: &PhysMemory, va: u64) -> u64 {
        self.lookup(mem, va).unwrap_or(0)
    }

    /// Sets the leaf entry for `va`, creating intermediate tables.
    pub fn set(
        &self,
        mem: &PhysMemory,
        alloc: &mut PageAllocator,
        va: u64,
        pte: u64,
    ) -> Result<(), PhysError> {
        let slot = self.leaf_slot(mem, va, Some(alloc))?.expect("created");
        mem.write_u64(slot, pte);
        Ok(())
    }

    /// Clears the leaf entry for `va` and returns what it held.
    pub fn clear(&self, mem: &PhysMemory, va: u64) -> u64 {
        match self.leaf_slot(mem, va, None) {
            Ok(Some(slot)) => {
                let old = mem.read_u64(slot);
                if old != 0 {
                    mem.write_u64(slot, 0);
                }
                old
            }
            _ => 0,
        }
    }

    /// Translates a user virtual address to guest-physical, if present.
    pub fn translate(&self, mem: &PhysMemory, va: u64) -> Option<u64> {
        let e = self.get(mem, va);
        (e & PTE_P != 0).then(|| (e & PTE_ADDR) + (va & (PAGE_SIZE - 1)))
    }
}

/// Whether the guest may hold a cached translation of this leaf entry.
pub fn maybe_cached(pte: u64) -> bool {
    pte & (PTE_P | PTE_A) == PTE_P | PTE_A
}

/// The leaf flags for a page with rights `prot` that replaces `old`: a
/// copy-on-write page stays read-only and marked.
pub fn flags_keeping_cow(old: u64, prot: Prot) -> u64 {
    let f = prot.pte_flags();
    if old & PTE_COW != 0 {
        (f & !PTE_W) | PTE_COW
    } else {
        f
    }
}

/// The page a leaf entry owns, present or kept.
pub fn owned_page(pte: u64) -> Option<u64> {
    (pte & (PTE_P | PTE_KEEP) != 0).then_some(pte & PTE_ADDR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapped_page_translates_and_a_cleared_one_does_not() {
        let mem = PhysMemory::new(4 << 20).unwrap();
        let mut alloc = PageAllocator::new(mem.size());
        let pt = PageTables::INITIAL;
        let page = alloc.alloc(&mem).unwrap();
        let va = 0x5555_5555_4000;
        pt.set(&mem, &mut alloc, va, page | Prot::RW.pte_flags())
            .unwrap();
        assert_eq!(pt.translate(&mem, va + 0x10), Some(page + 0x10));
        assert_eq!(owned_page(pt.clear(&mem, va)), Some(page));
        assert_eq!(pt.translate(&mem, va), None);
    }

    #[test]
    fn inaccessible_pages_keep_their_frame_but_are_not_present() {
        let f = Prot::NONE.pte_flags();
        assert_eq!(f & PTE_P, 0);
        assert_eq!(owned_page(0x20_0000 | f), Some(0x20_0000));
    }

    #[test]
    fn losing_write_or_exec_needs_invalidation_but_gaining_does_not() {
        let rx = Prot {
            read: true,
            write: false,
            exec: true,
        };
        assert!(Prot::RW.loses_rights_to(Prot {
            read: true,
            ..Prot::NONE
        }));
        assert!(rx.loses_rights_to(Prot {
            read: true,
            ..Prot::NONE
        }));
        assert!(!Prot::NONE.loses_rights_to(Prot::RW));
        assert!(Prot::RW.loses_rights_to(Prot::NONE));
    }
}
