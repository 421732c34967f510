//! Trampolines in an address space (see `code::sites::trampoline`): the pages
//! that hold an object's trampolines, the code whose sites jump to them,
//! and how both are undone when the program needs the addresses.
//!
//! Trampolines live where the program has nothing, and must change nothing
//! it sees: they are left out of `/proc/self/maps`, and the program's
//! mappings are placed as if they were not there. When one lands on them
//! (at the address the layout gives it, or `MAP_FIXED`), the jumps to them
//! go back to traps first, and the trampolines go: the same steps, more
//! exits. A thread never stands in a trampoline across a step (the monitor
//! moves it to the address in the program's code that it stands for), so
//! nothing runs in one when it goes.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::{AddressSpace, Backing, HIDDEN_MAPPING, Vma};
use crate::arch::layout::{MMAP_MIN_ADDR, PAGE_SIZE, USER_END};
use crate::code::SiteTable;
use crate::code::sites::trampoline::{Jump, Origin, PAGE};
use crate::memory::paging::{PTE_P, Prot, owned_page};
use crate::memory::phys::PhysMemory;

/// One object's trampolines as loaded at one bias.
#[derive(Clone, Debug)]
pub(super) struct JumpSet {
    table: Arc<SiteTable>,
    bias: u64,
}

impl JumpSet {
    /// The set a mapping belongs to: trampoline pages, or code whose jumps
    /// are on.
    pub(super) fn of(v: &Vma) -> Option<JumpSet> {
        match &v.backing {
            Backing::Jumps { table, bias } => Some(JumpSet {
                table: table.clone(),
                bias: *bias,
            }),
            Backing::File {
                offset,
                sites: Some(table),
                jumps: true,
                ..
            } => Some(JumpSet {
                table: table.clone(),
                bias: bias_of(v, table, *offset)?,
            }),
            _ => None,
        }
    }

    fn same(&self, other: &JumpSet) -> bool {
        Arc::ptr_eq(&self.table, &other.table) && self.bias == other.bias
    }
}

/// Runtime minus link-time addresses of the code file mapping `v` (from
/// file offset `offset`) of the object `table` describes.
fn bias_of(v: &Vma, table: &SiteTable, offset: u64) -> Option<u64> {
    let delta = table.link_delta(offset, offset + (v.end - v.start))?;
    Some(v.start.wrapping_sub(offset.wrapping_add(delta)))
}

impl Vma {
    /// Whether the mapping holds trampolines.
    pub fn is_jumps(&self) -> bool {
        matches!(self.backing, Backing::Jumps { .. })
    }
}

/// Where an address in a trampoline stands in the program's code, and the
/// jump it belongs to.
#[derive(Clone, Debug)]
pub struct JumpOrigin {
    pub origin: Origin,
    /// The set's bias: runtime minus link-time addresses.
    pub bias: u64,
}

impl AddressSpace {
    /// Turns on the jumps of the code mapping at `start` (a file mapping
    /// with sites that have trampolines): maps the trampolines its sites
    /// need, unless the program has something there, and patches the jumps
    /// in. Returns whether they are on.
    pub fn enable_jumps(&mut self, mem: &PhysMemory, start: u64) -> bool {
        let Some(v) = self.vmas.get(&start).cloned() else {
            return false;
        };
        let Backing::File {
            offset,
            sites: Some(table),
            jumps: false,
            ..
        } = &v.backing
        else {
            return false;
        };
        let Some(bias) = bias_of(&v, table, *offset) else {
            return false;
        };
        let set = JumpSet {
            table: table.clone(),
            bias,
        };
        let (lo, hi) = (*offset, offset + (v.end - v.start));
        let pages: BTreeSet<u64> = table
            .trampolines
            .jumps()
            .filter(|(o, _)| (lo..hi).contains(o))
            .map(|(_, j)| (j.entry & !(PAGE - 1)).wrapping_add(set.bias))
            .collect();
        if pages.is_empty() {
            return false;
        }
        let mut new = Vec::new();
        for &p in &pages {
            if !(MMAP_MIN_ADDR..USER_END - PAGE_SIZE).contains(&p) {
                return false;
            }
            match self.vma_at(p) {
                None => new.push(p),
                Some(w) if JumpSet::of(w).is_some_and(|s| s.same(&set) && w.is_jumps()) => {}
                Some(_) => return false,
            }
        }
        for p in new {
            let vma = Vma {
                start: p,
                end: p + PAGE_SIZE,
                prot: Prot::RX,
                backing: Backing::Jumps {
                    table: set.table.clone(),
                    bias: set.bias,
                },
                name: HIDDEN_MAPPING.into(),
                shared: false,
                policy: None,
            };
            self.vmas.insert(p, vma);
            if self.populate(mem, p, p + PAGE_SIZE).is_err() {
                self.drop_jump_set(mem, &set);
                return false;
            }
        }
        if let Some(Vma {
            backing: Backing::File { jumps, .. },
            ..
        }) = self.vmas.get_mut(&start)
        {
            *jumps = true;
        }
        self.repatch(mem, v.start, v.end);
        true
    }

    /// Where `rip`, in a trampoline, stands in the program's code.
    pub fn jump_origin(&self, rip: u64) -> Option<JumpOrigin> {
        let v = self.vma_at(rip)?;
        let Backing::Jumps { table, bias } = &v.backing else {
            return None;
        };
        let origin = table.trampolines.origin(rip.wrapping_sub(*bias))?;
        let at = |a: u64| a.wrapping_add(*bias);
        Some(JumpOrigin {
            origin: match origin {
                Origin::Site(a) => Origin::Site(at(a)),
                Origin::Moved(a) => Origin::Moved(at(a)),
            },
            bias: *bias,
        })
    }

    /// The site of the tick whose trap is at `va`, in a trampoline.
    pub fn tick_at(&self, va: u64) -> Option<u64> {
        let v = self.vma_at(va)?;
        let Backing::Jumps { table, bias } = &v.backing else {
            return None;
        };
        let site = table.trampolines.tick_at(va.wrapping_sub(*bias))?;
        Some(site.wrapping_add(*bias))
    }

    /// The jump of the site at `va`, when the code there jumps to its
    /// trampoline, with the set's bias.
    pub fn jump_at(&self, va: u64) -> Option<(Jump, u64)> {
        let v = self.vma_at(va)?;
        let Backing::File {
            offset,
            sites: Some(table),
            jumps: true,
            ..
        } = &v.backing
        else {
            return None;
        };
        let set = JumpSet::of(v)?;
        let j = table.trampolines.jump(offset + (va - v.start))?;
        Some((j.clone(), set.bias))
    }

    /// Where the instruction moved from `va` (now the first byte of a jump's
    /// displacement, which traps) runs: its copy in the trampoline.
    pub fn moved_copy(&self, va: u64) -> Option<u64> {
        let v = self.vma_at(va)?;
        let set = JumpSet::of(v).filter(|_| !v.is_jumps())?;
        let copy = set
            .table
            .trampolines
            .moved_copy(va.wrapping_sub(set.bias))?;
        Some(copy.wrapping_add(set.bias))
    }

    /// Makes room for the program in `[start, end)`: the trampolines there,
    /// with every jump to their sets, go.
    pub(super) fn evict_jumps(&mut self, mem: &PhysMemory, start: u64, end: u64) {
        let sets: Vec<JumpSet> = self
            .vmas
            .range(..end)
            .rev()
            .take_while(|(_, v)| v.end > start)
            .filter(|(_, v)| v.is_jumps())
            .filter_map(|(_, v)| JumpSet::of(v))
            .collect();
        for set in sets {
            self.drop_jump_set(mem, &set);
        }
    }

    /// The sets of the code with jumps in `[start, end)`.
    pub(super) fn jump_sets_in(&self, start: u64, end: u64) -> Vec<JumpSet> {
        self.vmas
            .range(..end)
            .rev()
            .take_while(|(_, v)| v.end > start)
            .filter(|(_, v)| !v.is_jumps())
            .filter_map(|(_, v)| JumpSet::of(v))
            .collect()
    }

    /// Removes `set`'s trampolines once no code jumps to them.
    pub(super) fn drop_unused_jump_set(&mut self, mem: &PhysMemory, set: &JumpSet) {
        let used = self
            .vmas
            .values()
            .any(|v| !v.is_jumps() && JumpSet::of(v).is_some_and(|s| s.same(set)));
        if !used {
            self.drop_jump_set(mem, set);
        }
    }

    /// Puts traps back in place of every jump to `set`'s trampolines, then
    /// removes them.
    pub(super) fn drop_jump_set(&mut self, mem: &PhysMemory, set: &JumpSet) {
        let members: Vec<(u64, u64, bool)> = self
            .vmas
            .values()
            .filter(|v| JumpSet::of(v).is_some_and(|s| s.same(set)))
            .map(|v| (v.start, v.end, v.is_jumps()))
            .collect();
        for &(start, end, trampolines) in &members {
            if trampolines {
                continue;
            }
            if let Some(Vma {
                backing: Backing::File { jumps, .. },
                ..
            }) = self.vmas.get_mut(&start)
            {
                *jumps = false;
            }
            self.repatch(mem, start, end);
        }
        for (start, end, trampolines) in members {
            if trampolines {
                self.remove_range(mem, start, end);
            }
        }
    }

    /// Writes the sites' patches of `[start, end)` again into the pages
    /// that are there, as the mappings now say (jumps on or off).
    fn repatch(&mut self, mem: &PhysMemory, start: u64, end: u64) {
        let mut va = start & !(PAGE_SIZE - 1);
        while va < end {
            let pte = self.pt.get(mem, va);
            if let (Some(pa), Some(v)) = (
                owned_page(pte).filter(|_| pte & PTE_P != 0),
                self.vma_at(va).cloned(),
            ) {
                let mut page = vec![0u8; PAGE_SIZE as usize];
                mem.read(pa, &mut page);
                let before = page.clone();
                super::site_bytes(&v, va, &mut page, true);
                super::site_bytes(&v, va, &mut page, false);
                if page != before {
                    // Breaks a copy-on-write share: another process's jumps
                    // are its own.
                    let _ = self.poke(mem, va, &page);
                }
            }
            va += PAGE_SIZE;
        }
    }
}
