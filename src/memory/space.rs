//! The user address space: mappings (VMAs) and the pages behind them.
//!
//! Files are copied into their mappings when mapped; anonymous memory is
//! filled on first touch (a page fault), a block of `FAULT_AROUND` pages at a
//! time, so an 8 MiB thread stack costs a few pages, not two thousand.
//!
//! Taking a right away from a present page (unmap, a narrower `mprotect`,
//! moving pages) leaves stale translations in the guest's TLB;
//! `needs_invalidate` then tells the machine to invalidate before the guest
//! runs again.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::code::SiteTable;

mod jumps;
use jumps::JumpSet;

use super::paging::{
    PTE_A, PTE_ADDR, PTE_COW, PTE_KEEP, PTE_P, PTE_W, PageTables, Prot, flags_keeping_cow,
    maybe_cached, owned_page,
};
use super::phys::{PageAllocator, PhysError, PhysMemory};
use crate::arch::layout::{
    MMAP_BASE, MMAP_MIN_ADDR, PAGE_SIZE, STACK_SIZE, STACK_TOP, USER_END, page_ceil, page_floor,
};

/// The most private writable pages `fork` copies at once (32 MiB); a
/// larger parent shares them copy-on-write.
pub const EAGER_COPY_PAGES: u64 = 8192;

/// Pages mapped at once around an anonymous page fault.
pub const FAULT_AROUND: u64 = 16;

/// Why an access or a memory call failed, in the words the kernel turns into
/// an errno or a signal.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum MemError {
    /// Bad address (EFAULT / SIGSEGV).
    Fault,
    /// The access is outside every mapping (SEGV_MAPERR).
    Unmapped,
    /// The mapping forbids the access (SEGV_ACCERR).
    Denied,
    /// Out of address space or memory (ENOMEM).
    NoMemory,
    /// Bad arguments (EINVAL).
    Invalid,
    /// MAP_FIXED_NOREPLACE hit an existing mapping (EEXIST).
    Exists,
}

impl From<PhysError> for MemError {
    fn from(_: PhysError) -> Self {
        MemError::NoMemory
    }
}

/// What fills a mapping's pages.
#[derive(Clone, Debug)]
pub enum Backing {
    /// Zero-filled anonymous memory.
    Anon,
    /// A private copy of a file's bytes starting at `offset`, with each of
    /// `sites` (sync sites) in it patched: a jump to its trampoline when
    /// `jumps` (and it has one), else a trap over its first byte.
    File {
        data: Arc<Vec<u8>>,
        offset: u64,
        sites: Option<Arc<SiteTable>>,
        jumps: bool,
    },
    /// The trampolines of the object whose sites `table` holds, loaded with
    /// `bias` (runtime minus link-time address; see `code::sites::trampoline`).
    /// The monitor's own: a program mapping over them takes their place,
    /// and the object's sites go back to traps.
    Jumps { table: Arc<SiteTable>, bias: u64 },
    /// The pages of shared memory object `object` (the pool's, see
    /// [`PageAllocator::object_page`]) from byte `offset`: every mapping of
    /// the object, in any address space, maps the same guest-physical
    /// pages. A page the object lacks is a new zero-filled one.
    Shared { object: u64, offset: u64 },
}

impl Backing {
    /// A file's bytes from `offset`, unpatched.
    pub fn file(data: Arc<Vec<u8>>, offset: u64) -> Backing {
        Backing::File {
            data,
            offset,
            sites: None,
            jumps: false,
        }
    }
}

/// One mapping.
#[derive(Clone, Debug)]
pub struct Vma {
    pub start: u64,
    pub end: u64,
    pub prot: Prot,
    pub backing: Backing,
    /// What `/proc/self/maps` shows: a path, `[heap]`, `[stack]` or nothing.
    pub name: String,
    pub shared: bool,
    /// The memory policy `mbind` gave the range (mode and nodes), which
    /// `get_mempolicy` reports; on a machine of one node it places nothing.
    pub policy: Option<(u16, u64)>,
}

impl Vma {
    /// The backing of the part of this mapping that starts at `at`.
    fn backing_from(&self, at: u64) -> Backing {
        match &self.backing {
            Backing::Anon => Backing::Anon,
            Backing::File {
                data,
                offset,
                sites,
                jumps,
            } => Backing::File {
                data: data.clone(),
                offset: offset + (at - self.start),
                sites: sites.clone(),
                jumps: *jumps,
            },
            Backing::Jumps { table, bias } => Backing::Jumps {
                table: table.clone(),
                bias: *bias,
            },
            Backing::Shared { object, offset } => Backing::Shared {
                object: *object,
                offset: offset + (at - self.start),
            },
        }
    }

    /// The shared object behind `va` (within this mapping) and the byte
    /// offset of `va` in it, if the mapping is of one.
    pub fn shared_at(&self, va: u64) -> Option<(u64, u64)> {
        match self.backing {
            Backing::Shared { object, offset } => Some((object, offset + (va - self.start))),
            _ => None,
        }
    }
}

/// An address space's size and what of it is in memory, in pages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Every mapping (VmSize).
    pub size: u64,
    /// Pages present (VmRSS).
    pub resident: u64,
    /// Present pages of file and shared mappings.
    pub shared: u64,
    /// Executable file mappings (code).
    pub text: u64,
    /// Private writable mappings (data, heap and stacks: VmData).
    pub data: u64,
}

/// How `map` may place a mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Anywhere; the address is a hint.
    Hint(u64),
    /// Exactly here, replacing what is there (MAP_FIXED).
    Fixed(u64),
    /// Exactly here, failing if anything is there (MAP_FIXED_NOREPLACE).
    FixedNoReplace(u64),
}

/// The kind of access that faulted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    Exec,
}

impl Access {
    /// The access a page fault's error code describes.
    pub fn from_error_code(error_code: u64) -> Access {
        if error_code & 0x10 != 0 {
            Access::Exec
        } else if error_code & 0x2 != 0 {
            Access::Write
        } else {
            Access::Read
        }
    }
}

/// A process's address space.
#[derive(Clone, Debug)]
pub struct AddressSpace {
    vmas: BTreeMap<u64, Vma>,
    alloc: PageAllocator,
    pt: PageTables,
    brk_start: u64,
    brk_end: u64,
    needs_invalidate: bool,
    /// Page faults served by filling memory on demand.
    pub demand_faults: u64,
}

impl AddressSpace {
    /// An empty address space over `mem`'s page pool.
    pub fn new(mem: &PhysMemory) -> Self {
        AddressSpace {
            vmas: BTreeMap::new(),
            alloc: PageAllocator::new(mem.size()),
            pt: PageTables::INITIAL,
            brk_start: 0,
            brk_end: 0,
            needs_invalidate: false,
            demand_faults: 0,
        }
    }

    /// The page allocator (for the machine's own structures and statistics).
    pub fn allocator(&self) -> &PageAllocator {
        &self.alloc
    }

    /// Guest-physical address of the top-level page table (CR3).
    pub fn root(&self) -> u64 {
        self.pt.root()
    }

    /// Hands the page pool to `other`, which runs next. Every address space
    /// takes its pages from the one pool; it travels with the space the
    /// kernel works on, so the others hold a placeholder.
    pub fn hand_pool_to(&mut self, other: &mut AddressSpace) {
        other.alloc = std::mem::replace(&mut self.alloc, PageAllocator::new(0));
    }

    /// A copy of this space for a forked child: the same mappings, shared
    /// ones over the same pages. Private pages the parent can write are
    /// copied at once when they are few (up to [`EAGER_COPY_PAGES`]): the
    /// parent's translations then stay valid, where marking its pages
    /// copy-on-write would take write rights away (an invalidation, costly
    /// on nested KVM) and break again at its next writes. Above that, both
    /// spaces share them copy-on-write. Read-only private pages are shared,
    /// marked copy-on-write in case a later `mprotect` makes them writable.
    /// The child holds a placeholder pool (see [`AddressSpace::hand_pool_to`]).
    pub fn fork(&mut self, mem: &PhysMemory) -> Result<AddressSpace, MemError> {
        let pt = PageTables::new_root(mem, &mut self.alloc)?;
        let child = AddressSpace {
            vmas: self.vmas.clone(),
            alloc: PageAllocator::new(0),
            pt,
            brk_start: self.brk_start,
            brk_end: self.brk_end,
            needs_invalidate: false,
            demand_faults: 0,
        };
        // Mappings of shared objects map the same pages in both; the
        // rest are the parent's private memory.
        let spans: Vec<(u64, u64, bool)> = self
            .vmas
            .values()
            .map(|v| (v.start, v.end, matches!(v.backing, Backing::Shared { .. })))
            .collect();
        let writable = |pte: u64| pte & PTE_W != 0 || (pte & PTE_P == 0 && pte & PTE_COW == 0);
        let mut to_copy = 0;
        for &(start, end, shared) in &spans {
            if !shared {
                to_copy += self
                    .pt
                    .entries(mem, start, end)
                    .filter(|(_, pte)| owned_page(*pte).is_some() && writable(*pte))
                    .count() as u64;
            }
        }
        let eager = to_copy <= EAGER_COPY_PAGES;
        for (start, end, shared) in spans {
            for (va, pte) in self.pt.entries(mem, start, end) {
                let Some(pa) = owned_page(pte) else { continue };
                if !shared && eager && writable(pte) {
                    let copy = self.alloc.alloc(mem)?;
                    let mut page = vec![0u8; PAGE_SIZE as usize];
                    mem.read(pa, &mut page);
                    mem.write(copy, &page);
                    pt.set(mem, &mut self.alloc, va, (pte & !PTE_ADDR & !PTE_A) | copy)?;
                    continue;
                }
                self.alloc.share(pa);
                let mut e = pte;
                if !shared {
                    e = (pte & !PTE_W) | PTE_COW;
                    if e != pte {
                        if maybe_cached(pte) && pte & PTE_W != 0 {
                            self.needs_invalidate = true;
                        }
                        self.pt.set(mem, &mut self.alloc, va, e)?;
                    }
                }
                pt.set(mem, &mut self.alloc, va, e & !PTE_A)?;
            }
        }
        Ok(child)
    }

    /// An empty address space over a new root (for `execve`), holding a
    /// placeholder pool.
    pub fn fresh(&mut self, mem: &PhysMemory) -> Result<AddressSpace, MemError> {
        Ok(AddressSpace {
            vmas: BTreeMap::new(),
            alloc: PageAllocator::new(0),
            pt: PageTables::new_root(mem, &mut self.alloc)?,
            brk_start: 0,
            brk_end: 0,
            needs_invalidate: false,
            demand_faults: 0,
        })
    }

    /// Lets go of every mapping and page table (at exec or exit). Nothing
    /// needs invalidating: no live root leads to the pages any more, and
    /// the tables stay out of use until the next invalidation
    /// ([`PageAllocator::retire_table`]).
    pub fn tear_down(&mut self, mem: &PhysMemory) {
        let spans: Vec<(u64, u64)> = self.vmas.values().map(|v| (v.start, v.end)).collect();
        for (start, end) in spans {
            for (va, old) in self.pt.entries(mem, start, end) {
                self.pt.clear(mem, va);
                if let Some(pa) = owned_page(old) {
                    self.alloc.free(pa);
                }
            }
        }
        self.vmas.clear();
        self.pt.free_tables(mem, &mut self.alloc);
    }

    /// The page pool, to tell it of an invalidation.
    pub fn allocator_mut(&mut self) -> &mut PageAllocator {
        &mut self.alloc
    }

    /// Gives this space its own copy of the copy-on-write page at `va`
    /// (whose entry is `pte`), with the mapping's rights; the only holder
    /// left keeps the page itself. When the guest's own write faulted on
    /// the page (`by_guest`), its retry re-walks the tables and finds the
    /// new entry; otherwise a read translation it cached must go.
    fn break_cow(
        &mut self,
        mem: &PhysMemory,
        va: u64,
        pte: u64,
        by_guest: bool,
    ) -> Result<u64, MemError> {
        let prot = self.vma_at(va).ok_or(MemError::Fault)?.prot;
        let old = pte & PTE_ADDR;
        let pa = if self.alloc.is_shared(old) {
            let fresh = self.alloc.alloc(mem)?;
            let mut page = vec![0u8; PAGE_SIZE as usize];
            mem.read(old, &mut page);
            mem.write(fresh, &page);
            self.alloc.free(old);
            fresh
        } else {
            old
        };
        if maybe_cached(pte) && !by_guest {
            self.needs_invalidate = true;
        }
        self.pt
            .set(mem, &mut self.alloc, page_floor(va), pa | prot.pte_flags())?;
        Ok(pa)
    }

    /// Whether translations the guest may have cached are now wrong. Reading
    /// it clears it: the caller must invalidate before resuming the guest.
    pub fn take_needs_invalidate(&mut self) -> bool {
        std::mem::take(&mut self.needs_invalidate)
    }

    /// All mappings in address order.
    pub fn vmas(&self) -> impl Iterator<Item = &Vma> {
        self.vmas.values()
    }

    /// The mapping containing `va`.
    pub fn vma_at(&self, va: u64) -> Option<&Vma> {
        self.vmas
            .range(..=va)
            .next_back()
            .map(|(_, v)| v)
            .filter(|v| va < v.end)
    }

    fn range_is_free(&self, start: u64, end: u64) -> bool {
        if start < MMAP_MIN_ADDR || end > USER_END || start >= end {
            return false;
        }
        // Trampolines give way (see `Backing::Jumps`).
        !self
            .vmas
            .range(..end)
            .rev()
            .take_while(|(_, v)| v.end > start)
            .any(|(_, v)| !v.is_jumps())
    }

    /// The highest free range of `len` bytes below `MMAP_BASE` (Linux's
    /// top-down layout), trampolines not counting.
    fn find_free(&self, len: u64) -> Option<u64> {
        let mut top = MMAP_BASE;
        for v in self.vmas.values().rev().filter(|v| !v.is_jumps()) {
            if v.start >= top {
                continue;
            }
            if top - v.end.min(top) >= len {
                return Some(top - len);
            }
            top = v.start;
        }
        (top >= MMAP_MIN_ADDR + len).then(|| top - len)
    }

    /// Creates a mapping and returns its address.
    pub fn map(
        &mut self,
        mem: &PhysMemory,
        placement: Placement,
        len: u64,
        prot: Prot,
        backing: Backing,
        name: &str,
    ) -> Result<u64, MemError> {
        if len == 0 {
            return Err(MemError::Invalid);
        }
        let len = page_ceil(len);
        if len > USER_END {
            return Err(MemError::NoMemory);
        }
        let start = match placement {
            Placement::Fixed(a) | Placement::FixedNoReplace(a) => {
                if a % PAGE_SIZE != 0 {
                    return Err(MemError::Invalid);
                }
                let end = a.checked_add(len).ok_or(MemError::NoMemory)?;
                if end > USER_END || a < MMAP_MIN_ADDR {
                    return Err(MemError::NoMemory);
                }
                if !self.range_is_free(a, end) {
                    if matches!(placement, Placement::FixedNoReplace(_)) {
                        return Err(MemError::Exists);
                    }
                    self.unmap(mem, a, len)?;
                }
                a
            }
            Placement::Hint(h) => {
                let h = page_floor(h);
                if h != 0 && h.checked_add(len).is_some_and(|e| self.range_is_free(h, e)) {
                    h
                } else {
                    self.find_free(len).ok_or(MemError::NoMemory)?
                }
            }
        };
        self.evict_jumps(mem, start, start + len);
        let vma = Vma {
            start,
            end: start + len,
            prot,
            backing,
            name: name.to_string(),
            shared: false,
            policy: None,
        };
        let eager = matches!(vma.backing, Backing::File { .. }) && prot.accessible();
        let object = matches!(vma.backing, Backing::Shared { .. }) && prot.accessible();
        self.vmas.insert(start, vma);
        if eager {
            self.populate(mem, start, start + len)?;
        }
        if object {
            // The pages the object has (a file's) are mapped at once, as a
            // file's are copied; the others come on first touch.
            self.map_object_pages(mem, start, start + len)?;
        }
        Ok(start)
    }

    /// Marks the mapping at `start` as shared (`MAP_SHARED`), for `/proc/self/maps`.
    pub fn mark_shared(&mut self, start: u64) {
        if let Some(v) = self.vmas.get_mut(&start) {
            v.shared = true;
        }
    }

    /// Splits the mapping that contains `at` so that a mapping starts at `at`.
    fn split_at(&mut self, at: u64) {
        let Some(v) = self.vmas.range(..at).next_back().map(|(_, v)| v.clone()) else {
            return;
        };
        if v.end <= at {
            return;
        }
        let mut head = v.clone();
        head.end = at;
        let tail = Vma {
            start: at,
            backing: v.backing_from(at),
            ..v
        };
        self.vmas.insert(head.start, head);
        self.vmas.insert(at, tail);
    }

    /// Starts of the mappings that overlap `[start, end)`, after splitting so
    /// that none sticks out.
    fn isolate(&mut self, start: u64, end: u64) -> Vec<u64> {
        self.split_at(start);
        self.split_at(end);
        self.vmas.range(start..end).map(|(k, _)| *k).collect()
    }

    /// Removes mappings in `[addr, addr+len)`. Trampolines there take the
    /// jumps to them away first; code whose jumps go to trampolines takes
    /// them along once no mapping of it is left.
    pub fn unmap(&mut self, mem: &PhysMemory, addr: u64, len: u64) -> Result<(), MemError> {
        if addr % PAGE_SIZE != 0 || len == 0 {
            return Err(MemError::Invalid);
        }
        let end = addr.checked_add(page_ceil(len)).ok_or(MemError::Invalid)?;
        self.evict_jumps(mem, addr, end);
        let leaving = self.jump_sets_in(addr, end);
        self.remove_range(mem, addr, end);
        for set in leaving {
            self.drop_unused_jump_set(mem, &set);
        }
        Ok(())
    }

    /// Removes the mappings in `[addr, end)` and their pages.
    fn remove_range(&mut self, mem: &PhysMemory, addr: u64, end: u64) {
        for k in self.isolate(addr, end) {
            let v = self.vmas.remove(&k).expect("isolated");
            self.drop_pages(mem, v.start, v.end);
        }
    }

    fn drop_pages(&mut self, mem: &PhysMemory, start: u64, end: u64) {
        for (va, old) in self.pt.entries(mem, start, end) {
            self.pt.clear(mem, va);
            if let Some(pa) = owned_page(old) {
                self.alloc.free(pa);
                if maybe_cached(old) {
                    self.needs_invalidate = true;
                }
            }
        }
    }

    /// Changes the rights of `[addr, addr+len)`, which must be fully mapped.
    pub fn protect(
        &mut self,
        mem: &PhysMemory,
        addr: u64,
        len: u64,
        prot: Prot,
    ) -> Result<(), MemError> {
        if addr % PAGE_SIZE != 0 {
            return Err(MemError::Invalid);
        }
        let end = addr.checked_add(page_ceil(len)).ok_or(MemError::NoMemory)?;
        if !self.is_fully_mapped(addr, end) {
            return Err(MemError::NoMemory);
        }
        for k in self.isolate(addr, end) {
            let v = self.vmas.get_mut(&k).expect("isolated");
            let old = v.prot;
            v.prot = prot;
            let (s, e) = (v.start, v.end);
            let loses = old.loses_rights_to(prot);
            for (va, pte) in self.pt.entries(mem, s, e) {
                if let Some(pa) = owned_page(pte) {
                    // Only a translation the guest may have cached can be stale.
                    if loses && maybe_cached(pte) {
                        self.needs_invalidate = true;
                    }
                    self.pt
                        .set(mem, &mut self.alloc, va, pa | flags_keeping_cow(pte, prot))?;
                }
            }
        }
        Ok(())
    }

    /// Gives `[addr, addr+len)`, which must be fully mapped, a memory
    /// policy (`mbind`).
    pub fn set_policy(&mut self, addr: u64, len: u64, policy: (u16, u64)) -> Result<(), MemError> {
        if addr % PAGE_SIZE != 0 {
            return Err(MemError::Invalid);
        }
        let end = addr.checked_add(page_ceil(len)).ok_or(MemError::Invalid)?;
        if !self.is_fully_mapped(addr, end) {
            return Err(MemError::Fault);
        }
        for k in self.isolate(addr, end) {
            self.vmas.get_mut(&k).expect("isolated").policy = Some(policy);
        }
        Ok(())
    }

    fn is_fully_mapped(&self, start: u64, end: u64) -> bool {
        let mut at = start;
        while at < end {
            match self.vma_at(at) {
                Some(v) => at = v.end,
                None => return false,
            }
        }
        true
    }

    /// Linux's `mremap` for private anonymous and file mappings: shrink,
    /// grow in place, or move (pages move with their contents).
    pub fn remap(
        &mut self,
        mem: &PhysMemory,
        old: u64,
        old_len: u64,
        new_len: u64,
        may_move: bool,
        fixed: Option<u64>,
    ) -> Result<u64, MemError> {
        if old % PAGE_SIZE != 0 || new_len == 0 {
            return Err(MemError::Invalid);
        }
        let old_len = page_ceil(old_len);
        let new_len = page_ceil(new_len);
        let vma = self.vma_at(old).cloned().ok_or(MemError::Fault)?;
        if old + old_len > vma.end {
            return Err(MemError::Fault);
        }
        if fixed.is_none() {
            if new_len <= old_len {
                if new_len < old_len {
                    self.unmap(mem, old + new_len, old_len - new_len)?;
                }
                return Ok(old);
            }
            if old + old_len == vma.end && self.range_is_free(vma.end, old + new_len) {
                self.evict_jumps(mem, vma.end, old + new_len);
                self.split_at(old);
                let v = self.vmas.get_mut(&old).expect("split");
                v.end = old + new_len;
                return Ok(old);
            }
            if !may_move {
                return Err(MemError::NoMemory);
            }
        }
        let dest = match fixed {
            Some(d) => {
                if d % PAGE_SIZE != 0 {
                    return Err(MemError::Invalid);
                }
                self.unmap(mem, d, new_len)?;
                d
            }
            None => self.find_free(new_len).ok_or(MemError::NoMemory)?,
        };
        self.evict_jumps(mem, dest, dest + new_len);
        // Jumps reach trampolines at a fixed distance: moved code has none.
        if let Some(set) = JumpSet::of(&vma) {
            self.drop_jump_set(mem, &set);
        }
        let vma = self.vma_at(old).cloned().ok_or(MemError::Fault)?;
        let moved = old_len.min(new_len);
        let mut v = vma.clone();
        v.backing = vma.backing_from(old);
        v.start = dest;
        v.end = dest + new_len;
        for off in (0..moved).step_by(PAGE_SIZE as usize) {
            let pte = self.pt.clear(mem, old + off);
            if let Some(pa) = owned_page(pte) {
                if maybe_cached(pte) {
                    self.needs_invalidate = true;
                }
                self.pt.set(
                    mem,
                    &mut self.alloc,
                    dest + off,
                    pa | flags_keeping_cow(pte, v.prot),
                )?;
            }
        }
        self.unmap(mem, old, old_len)?;
        self.vmas.insert(dest, v);
        Ok(dest)
    }

    /// Makes anonymous private pages read as zero again (MADV_DONTNEED) by
    /// clearing them in place: the same contents Linux gives, without
    /// touching translations.
    pub fn discard(&mut self, mem: &PhysMemory, addr: u64, len: u64) -> Result<(), MemError> {
        if addr % PAGE_SIZE != 0 {
            return Err(MemError::Invalid);
        }
        let end = addr.checked_add(page_ceil(len)).ok_or(MemError::Invalid)?;
        let mut va = addr;
        while va < end {
            let Some(v) = self.vma_at(va) else {
                return Err(MemError::NoMemory);
            };
            let stop = v.end.min(end);
            let refill = match &v.backing {
                Backing::Anon => None,
                Backing::File { .. } | Backing::Jumps { .. } => Some(v.clone()),
                // The object's pages are what it holds: Linux's next touch
                // finds them again.
                Backing::Shared { .. } => {
                    va = stop;
                    continue;
                }
            };
            for (at, pte) in self.pt.entries(mem, va, stop) {
                if let Some(mut pa) = owned_page(pte) {
                    if pte & PTE_COW != 0 {
                        pa = self.break_cow(mem, at, pte, false)?;
                    }
                    mem.zero_page(pa);
                    if let Some(v) = &refill {
                        fill_from_file(mem, v, at, pa);
                    }
                }
            }
            va = stop;
        }
        Ok(())
    }

    /// Sets up the program break after the executable's last segment.
    pub fn init_brk(&mut self, at: u64) {
        self.brk_start = page_ceil(at);
        self.brk_end = self.brk_start;
    }

    /// Linux's `brk`: returns the new break, or the old one on failure.
    pub fn brk(&mut self, mem: &PhysMemory, want: u64) -> u64 {
        if want < self.brk_start {
            return self.brk_end;
        }
        let (old_top, new_top) = (page_ceil(self.brk_end), page_ceil(want));
        if new_top > old_top {
            if !self.range_is_free(old_top, new_top) {
                return self.brk_end;
            }
            self.evict_jumps(mem, old_top, new_top);
            if old_top == self.brk_start {
                let vma = Vma {
                    start: old_top,
                    end: new_top,
                    prot: Prot::RW,
                    backing: Backing::Anon,
                    name: "[heap]".into(),
                    shared: false,
                    policy: None,
                };
                self.vmas.insert(old_top, vma);
            } else {
                let heap = self
                    .vmas
                    .range_mut(..old_top)
                    .next_back()
                    .map(|(_, v)| v)
                    .filter(|v| v.end == old_top && v.name == "[heap]");
                match heap {
                    Some(v) => v.end = new_top,
                    None => return self.brk_end,
                }
            }
        } else if new_top < old_top && self.unmap(mem, new_top, old_top - new_top).is_err() {
            return self.brk_end;
        }
        self.brk_end = want;
        want
    }

    /// Reserves the main thread's stack and returns its top.
    pub fn map_stack(&mut self, mem: &PhysMemory) -> Result<u64, MemError> {
        let start = STACK_TOP - STACK_SIZE;
        self.map(
            mem,
            Placement::FixedNoReplace(start),
            STACK_SIZE,
            Prot::RW,
            Backing::Anon,
            "[stack]",
        )?;
        Ok(STACK_TOP)
    }

    /// Handles a page fault: fills the page (and its neighbours) when the
    /// mapping allows the access, or says why not.
    pub fn fault(&mut self, mem: &PhysMemory, va: u64, access: Access) -> Result<(), MemError> {
        let v = self.vma_at(va).ok_or(MemError::Unmapped)?.clone();
        let allowed = match access {
            Access::Read => v.prot.accessible(),
            Access::Write => v.prot.write,
            Access::Exec => v.prot.exec,
        };
        if !allowed {
            return Err(MemError::Denied);
        }
        let pte = self.pt.get(mem, va);
        if pte & PTE_P != 0 && pte & PTE_COW != 0 && access == Access::Write {
            self.break_cow(mem, va, pte, true)?;
            return Ok(());
        }
        if pte & PTE_P != 0 {
            // Present and allowed: the guest saw a stale translation. Make the
            // next attempt re-walk the tables.
            self.needs_invalidate = true;
            return Ok(());
        }
        self.demand_faults += 1;
        let block = FAULT_AROUND * PAGE_SIZE;
        let start = (va & !(block - 1)).max(v.start);
        let end = (va & !(block - 1)).saturating_add(block).min(v.end);
        self.populate(mem, start, end)
    }

    /// Fills every page of `[start, end)` that has none yet. The range must
    /// lie in one mapping.
    fn populate(&mut self, mem: &PhysMemory, start: u64, end: u64) -> Result<(), MemError> {
        let v = self.vma_at(start).cloned().ok_or(MemError::Unmapped)?;
        debug_assert!(end <= v.end);
        let flags = v.prot.pte_flags();
        let mut va = start;
        while va < end {
            let pte = self.pt.get(mem, va);
            if owned_page(pte).is_none() {
                let pa = match v.shared_at(va) {
                    Some((object, off)) => {
                        let (pa, _) =
                            self.alloc
                                .object_page_or_new(mem, object, off / PAGE_SIZE)?;
                        self.alloc.share(pa);
                        pa
                    }
                    None => {
                        let pa = self.alloc.alloc(mem)?;
                        fill_from_file(mem, &v, va, pa);
                        pa
                    }
                };
                self.pt.set(mem, &mut self.alloc, va, pa | flags)?;
            }
            va += PAGE_SIZE;
        }
        Ok(())
    }

    /// Maps the pages shared object mapping `[start, end)` has in its
    /// object already (none is made).
    fn map_object_pages(&mut self, mem: &PhysMemory, start: u64, end: u64) -> Result<(), MemError> {
        let v = self.vma_at(start).cloned().ok_or(MemError::Unmapped)?;
        let flags = v.prot.pte_flags();
        let mut va = start;
        while va < end {
            if let Some((object, off)) = v.shared_at(va) {
                let pa = self.alloc.object_page(object, off / PAGE_SIZE);
                if let Some(pa) = pa.filter(|_| owned_page(self.pt.get(mem, va)).is_none()) {
                    self.alloc.share(pa);
                    self.pt.set(mem, &mut self.alloc, va, pa | flags)?;
                }
            }
            va += PAGE_SIZE;
        }
        Ok(())
    }

    /// The guest-physical page behind `va` for an access by the monitor on
    /// the guest's behalf, filling it on demand. Obeys the mapping's rights
    /// (a `read()` into a read-only buffer is EFAULT, as on Linux).
    fn page_for(&mut self, mem: &PhysMemory, va: u64, write: bool) -> Result<u64, MemError> {
        let v = self.vma_at(va).ok_or(MemError::Fault)?;
        if !v.prot.accessible() || (write && !v.prot.write) {
            return Err(MemError::Fault);
        }
        let pte = self.pt.get(mem, va);
        if write && pte & PTE_COW != 0 {
            return self.break_cow(mem, va, pte, false);
        }
        if pte & PTE_P != 0 {
            return Ok(pte & PTE_ADDR);
        }
        if pte & PTE_KEEP == 0 {
            let p = page_floor(va);
            self.populate(mem, p, p + PAGE_SIZE)?;
        }
        Ok(self.pt.get(mem, va) & PTE_ADDR)
    }

    /// Copies guest memory at `va` into `buf` as the program wrote it: the
    /// monitor's `int3` patches read as the original bytes.
    pub fn read(&mut self, mem: &PhysMemory, va: u64, buf: &mut [u8]) -> Result<(), MemError> {
        let mut done = 0;
        while done < buf.len() {
            let at = va.checked_add(done as u64).ok_or(MemError::Fault)?;
            let pa = self.page_for(mem, page_floor(at), false)?;
            let off = at % PAGE_SIZE;
            let n = ((PAGE_SIZE - off) as usize).min(buf.len() - done);
            mem.read(pa + off, &mut buf[done..done + n]);
            if let Some(v) = self.vma_at(at) {
                site_bytes(v, at, &mut buf[done..done + n], true);
            }
            done += n;
        }
        Ok(())
    }

    /// Reads the guest word at `va` if its page is present, faulting nothing
    /// in: for looking at a finished run (a backtrace) without changing it.
    pub fn peek_u64(&self, mem: &PhysMemory, va: u64) -> Option<u64> {
        if va % 8 != 0 || !self.vma_at(va)?.prot.accessible() {
            return None;
        }
        let pte = self.pt.get(mem, va);
        if pte & PTE_P == 0 {
            return None;
        }
        let mut b = [0u8; 8];
        mem.read((pte & PTE_ADDR) + va % PAGE_SIZE, &mut b);
        Some(u64::from_le_bytes(b))
    }

    /// Copies `buf` into guest memory at `va`.
    pub fn write(&mut self, mem: &PhysMemory, va: u64, buf: &[u8]) -> Result<(), MemError> {
        let mut done = 0;
        while done < buf.len() {
            let at = va.checked_add(done as u64).ok_or(MemError::Fault)?;
            let pa = self.page_for(mem, page_floor(at), true)?;
            let off = at % PAGE_SIZE;
            let n = ((PAGE_SIZE - off) as usize).min(buf.len() - done);
            mem.write(pa + off, &buf[done..done + n]);
            done += n;
        }
        Ok(())
    }

    /// Writes even into read-only mappings (the loader, and gdb's breakpoints).
    pub fn poke(&mut self, mem: &PhysMemory, va: u64, buf: &[u8]) -> Result<(), MemError> {
        let mut done = 0;
        while done < buf.len() {
            let at = va + done as u64;
            let page = page_floor(at);
            let v = self.vma_at(page).ok_or(MemError::Fault)?;
            let pte = self.pt.get(mem, page);
            if owned_page(pte).is_none() {
                let end = (page + PAGE_SIZE).min(v.end);
                self.populate(mem, page, end)?;
            } else if pte & PTE_COW != 0 {
                self.break_cow(mem, page, pte, false)?;
            }
            let pa = self.pt.get(mem, page) & PTE_ADDR;
            let off = at % PAGE_SIZE;
            let n = ((PAGE_SIZE - off) as usize).min(buf.len() - done);
            mem.write(pa + off, &buf[done..done + n]);
            done += n;
        }
        Ok(())
    }

    /// The guest-physical page behind `va`, if it has one yet. Fills
    /// nothing: for the debugger, which must not change the run.
    pub fn page_of(&self, mem: &PhysMemory, va: u64) -> Option<u64> {
        owned_page(self.pt.get(mem, page_floor(va)))
    }

    /// Copies guest memory at `va` into `buf` as the program would read it,
    /// rights aside, without filling anything: a page not touched yet reads
    /// as touching it would make it (zeros, or its file's bytes). For the
    /// debugger, which must not change the run (not even which physical
    /// page backs what).
    pub fn peek(&self, mem: &PhysMemory, va: u64, buf: &mut [u8]) -> Result<(), MemError> {
        self.peek_as(mem, va, buf, true)
    }

    /// As [`AddressSpace::peek`], but with the sync sites' patches as the
    /// guest's own loads see them.
    pub fn peek_patched(&self, mem: &PhysMemory, va: u64, buf: &mut [u8]) -> Result<(), MemError> {
        self.peek_as(mem, va, buf, false)
    }

    fn peek_as(
        &self,
        mem: &PhysMemory,
        va: u64,
        buf: &mut [u8],
        original: bool,
    ) -> Result<(), MemError> {
        let mut done = 0;
        while done < buf.len() {
            let at = va.checked_add(done as u64).ok_or(MemError::Fault)?;
            let off = at % PAGE_SIZE;
            let n = ((PAGE_SIZE - off) as usize).min(buf.len() - done);
            let out = &mut buf[done..done + n];
            let v = self.vma_at(at);
            let object_page = v
                .and_then(|v| v.shared_at(at))
                .and_then(|(object, o)| self.alloc.object_page(object, o / PAGE_SIZE));
            if let Some(pa) = self.page_of(mem, at).or(object_page) {
                mem.read(pa + off, out);
            } else {
                let v = v.ok_or(MemError::Unmapped)?;
                out.fill(0);
                if let Backing::File { data, offset, .. } = &v.backing {
                    let start = usize::try_from(offset + (at - v.start)).unwrap_or(usize::MAX);
                    let avail = data.get(start..).unwrap_or(&[]);
                    let k = avail.len().min(n);
                    out[..k].copy_from_slice(&avail[..k]);
                    if !original {
                        site_bytes(v, at, out, false);
                    }
                }
            }
            if let Some(v) = self.vma_at(at).filter(|_| original) {
                site_bytes(v, at, out, true);
            }
            done += n;
        }
        Ok(())
    }

    /// Reads a NUL-terminated string of at most `max` bytes (without the NUL).
    pub fn read_cstr(
        &mut self,
        mem: &PhysMemory,
        va: u64,
        max: usize,
    ) -> Result<Vec<u8>, MemError> {
        let mut out = Vec::new();
        let mut at = va;
        loop {
            let pa = self.page_for(mem, page_floor(at), false)?;
            let off = at % PAGE_SIZE;
            let mut chunk = vec![0u8; (PAGE_SIZE - off) as usize];
            mem.read(pa + off, &mut chunk);
            if let Some(nul) = chunk.iter().position(|b| *b == 0) {
                out.extend_from_slice(&chunk[..nul]);
                return Ok(out);
            }
            out.extend_from_slice(&chunk);
            if out.len() > max {
                return Err(MemError::Invalid);
            }
            at = at.checked_add(chunk.len() as u64).ok_or(MemError::Fault)?;
        }
    }

    /// Reads a little-endian u64.
    pub fn read_u64(&mut self, mem: &PhysMemory, va: u64) -> Result<u64, MemError> {
        let mut b = [0u8; 8];
        self.read(mem, va, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Reads a little-endian u32.
    pub fn read_u32(&mut self, mem: &PhysMemory, va: u64) -> Result<u32, MemError> {
        let mut b = [0u8; 4];
        self.read(mem, va, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Writes a little-endian u64.
    pub fn write_u64(&mut self, mem: &PhysMemory, va: u64, v: u64) -> Result<(), MemError> {
        self.write(mem, va, &v.to_le_bytes())
    }

    /// Writes a little-endian u32.
    pub fn write_u32(&mut self, mem: &PhysMemory, va: u64, v: u32) -> Result<(), MemError> {
        self.write(mem, va, &v.to_le_bytes())
    }

    /// Reads a plain-old-data value.
    pub fn read_pod<T: Pod>(&mut self, mem: &PhysMemory, va: u64) -> Result<T, MemError> {
        let mut v = T::zeroed();
        self.read(mem, va, v.as_bytes_mut())?;
        Ok(v)
    }

    /// Writes a plain-old-data value.
    pub fn write_pod<T: Pod>(&mut self, mem: &PhysMemory, va: u64, v: &T) -> Result<(), MemError> {
        self.write(mem, va, v.as_bytes())
    }

    /// Whether the page at `va` is present and writable now: a write from
    /// the guest's ring 0 would not fault.
    pub fn writable_now(&self, mem: &PhysMemory, va: u64) -> bool {
        let pte = self.pt.get(mem, page_floor(va));
        pte & PTE_P != 0 && pte & PTE_W != 0
    }

    /// How much memory the space maps and holds, in pages, as
    /// `/proc/PID/statm` counts it.
    pub fn usage(&self, mem: &PhysMemory) -> Usage {
        let mut u = Usage::default();
        for v in self.vmas.values().filter(|v| v.name != HIDDEN_MAPPING) {
            let pages = (v.end - v.start) / PAGE_SIZE;
            u.size += pages;
            let file = !matches!(v.backing, Backing::Anon);
            if v.prot.exec && file {
                u.text += pages;
            }
            if v.prot.write && !v.shared {
                u.data += pages;
            }
            let present = self
                .pt
                .entries(mem, v.start, v.end)
                .filter(|(_, pte)| pte & PTE_P != 0)
                .count() as u64;
            u.resident += present;
            if file || v.shared {
                u.shared += present;
            }
        }
        u
    }

    /// The text of `/proc/self/maps`.
    pub fn maps_text(&self) -> String {
        let mut s = String::new();
        for v in self.vmas.values().filter(|v| v.name != HIDDEN_MAPPING) {
            let (off, inode) = match &v.backing {
                Backing::File { offset, .. } => {
                    (*offset, 1 + (v.name.len() as u64 * 7919) % 100_000)
                }
                Backing::Shared { offset, .. } if !v.name.is_empty() => {
                    (*offset, 1 + (v.name.len() as u64 * 7919) % 100_000)
                }
                Backing::Shared { .. } | Backing::Anon | Backing::Jumps { .. } => (0, 0),
            };
            let line = format!(
                "{:08x}-{:08x} {}{}{}{} {:08x} {} {}",
                v.start,
                v.end,
                if v.prot.read { 'r' } else { '-' },
                if v.prot.write { 'w' } else { '-' },
                if v.prot.exec { 'x' } else { '-' },
                if v.shared { 's' } else { 'p' },
                off,
                if inode != 0 { "00:01" } else { "00:00" },
                inode
            );
            if v.name.is_empty() {
                s.push_str(&line);
            } else {
                s.push_str(&format!("{line:<73}{}", v.name));
            }
            s.push('\n');
        }
        s
    }
}

/// Copies the file bytes that belong at page `va` of mapping `v` into `pa`
/// (a zeroed page), with its sync sites patched. Anonymous mappings need
/// nothing.
fn fill_from_file(mem: &PhysMemory, v: &Vma, va: u64, pa: u64) {
    if let Backing::Jumps { table, bias } = &v.backing {
        if let Some(page) = table.trampolines.page(va.wrapping_sub(*bias)) {
            mem.write(pa, page);
        }
        return;
    }
    if let Backing::File { data, offset, .. } = &v.backing {
        let file_off = offset + (va - v.start);
        if let Ok(off) = usize::try_from(file_off) {
            if off < data.len() {
                let n = (data.len() - off).min(PAGE_SIZE as usize);
                let mut page = [0u8; PAGE_SIZE as usize];
                page[..n].copy_from_slice(&data[off..off + n]);
                site_bytes(v, va, &mut page[..n], false);
                mem.write(pa, &page[..n]);
            }
        }
    }
}

/// The name of the monitor's own mappings in a process that
/// `/proc/self/maps` leaves out (the sync sites' dispatcher and tables).
pub const HIDDEN_MAPPING: &str = "[rewind-sites]";

/// Puts, in `buf` (bytes at `va`, within mapping `v`), the bytes of the
/// sync sites' patches there: the originals (a read for the program), or
/// the patches a page filled from the file gets (a site's jump to its
/// trampoline, five bytes, when the mapping's jumps are on and it has one;
/// else a trap over its first byte).
fn site_bytes(v: &Vma, va: u64, buf: &mut [u8], original: bool) {
    let Backing::File {
        data,
        offset,
        sites: Some(sites),
        jumps,
    } = &v.backing
    else {
        return;
    };
    let lo = offset + (va - v.start);
    let hi = lo + buf.len() as u64;
    // A jump starting up to four bytes before `lo` reaches into it.
    for s in sites.in_range(lo.saturating_sub(4), hi) {
        let jump = sites.trampolines.jump(s.offset);
        // A tick is a jump or nothing: never a trap at every pass (its
        // original bytes still go back where its jump was).
        if s.kind == crate::code::SiteKind::Tick && !*jumps && !original {
            continue;
        }
        let patch: &[u8] = match (original, jump) {
            (false, Some(j)) if *jumps => &j.patch,
            (false, _) => &[s.patch_byte()],
            (true, Some(_)) => data.get(s.offset as usize..).unwrap_or(&[]),
            (true, None) => data
                .get(s.offset as usize..=s.offset as usize)
                .unwrap_or(&[]),
        };
        for (k, b) in patch.iter().take(5).enumerate() {
            let at = s.offset + k as u64;
            if (lo..hi).contains(&at) {
                buf[(at - lo) as usize] = *b;
            }
        }
    }
}

/// Plain-old-data types the monitor copies to and from guest memory.
///
/// # Safety
/// Implementors must be `repr(C)` with no padding-dependent invariants, valid
/// for any bit pattern.
pub unsafe trait Pod: Copy {
    /// An all-zero value.
    fn zeroed() -> Self {
        // SAFETY: the trait's contract says every bit pattern is valid.
        unsafe { std::mem::zeroed() }
    }
    /// The value's bytes.
    fn as_bytes(&self) -> &[u8] {
        // SAFETY: `Self` is plain old data of `size_of::<Self>()` bytes.
        unsafe { std::slice::from_raw_parts(self as *const Self as *const u8, size_of::<Self>()) }
    }
    /// The value's bytes, writable.
    fn as_bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above; any bytes written form a valid value.
        unsafe { std::slice::from_raw_parts_mut(self as *mut Self as *mut u8, size_of::<Self>()) }
    }
}

// SAFETY: integers are valid for every bit pattern.
unsafe impl Pod for u64 {}
// SAFETY: as above.
unsafe impl Pod for u32 {}
// SAFETY: as above.
unsafe impl Pod for i64 {}
// SAFETY: as above.
unsafe impl Pod for i32 {}

#[cfg(test)]
mod tests {
    use super::*;

    fn space() -> (PhysMemory, AddressSpace) {
        let mem = PhysMemory::new(16 << 20).unwrap();
        let s = AddressSpace::new(&mem);
        (mem, s)
    }

    /// Marks a page as used by the guest, as the CPU's page walker does.
    fn touch(mem: &PhysMemory, s: &AddressSpace, va: u64) {
        let pte = s.pt.get(mem, va);
        let mut alloc = s.alloc.clone();
        s.pt.set(mem, &mut alloc, va, pte | super::super::paging::PTE_A)
            .unwrap();
    }

    #[test]
    fn anonymous_memory_is_filled_on_first_touch_around_the_fault() {
        let (mem, mut s) = space();
        let a = s
            .map(
                &mem,
                Placement::Hint(0),
                1 << 20,
                Prot::RW,
                Backing::Anon,
                "",
            )
            .unwrap();
        assert_eq!(a + (1 << 20), MMAP_BASE);
        let va = a + 40 * PAGE_SIZE;
        s.fault(&mem, va, Access::Write).unwrap();
        let block = va & !(FAULT_AROUND * PAGE_SIZE - 1);
        for i in 0..FAULT_AROUND {
            assert!(s.pt.translate(&mem, block + i * PAGE_SIZE).is_some());
        }
        assert!(s.pt.translate(&mem, block - PAGE_SIZE).is_none());
        assert!(
            s.pt.translate(&mem, block + FAULT_AROUND * PAGE_SIZE)
                .is_none()
        );
    }

    #[test]
    fn writes_to_read_only_mappings_are_refused_and_faults_say_why() {
        let (mem, mut s) = space();
        let ro = Prot {
            read: true,
            ..Prot::NONE
        };
        let a = s
            .map(&mem, Placement::Hint(0), 4096, ro, Backing::Anon, "")
            .unwrap();
        assert_eq!(s.write(&mem, a, b"x"), Err(MemError::Fault));
        assert_eq!(s.fault(&mem, a, Access::Write), Err(MemError::Denied));
        assert_eq!(
            s.fault(&mem, a + 0x10_0000, Access::Read),
            Err(MemError::Unmapped)
        );
    }

    #[test]
    fn unmapping_a_page_the_guest_used_asks_for_invalidation() {
        let (mem, mut s) = space();
        let rw = Prot::RW;
        let a = s
            .map(&mem, Placement::Hint(0), 3 * 4096, rw, Backing::Anon, "")
            .unwrap();
        s.write(&mem, a + 4096, b"hello").unwrap();
        s.write(&mem, a + 2 * 4096, b"hello").unwrap();
        s.unmap(&mem, a + 2 * 4096, 4096).unwrap();
        assert!(!s.take_needs_invalidate(), "the guest never used that page");
        touch(&mem, &s, a + 4096);
        s.unmap(&mem, a + 4096, 4096).unwrap();
        assert!(s.take_needs_invalidate());
        assert_eq!(s.vmas().count(), 1);
        assert_eq!(s.read(&mem, a + 4096, &mut [0u8; 1]), Err(MemError::Fault));
    }

    #[test]
    fn protect_none_keeps_the_contents_for_later() {
        let (mem, mut s) = space();
        let a = s
            .map(&mem, Placement::Hint(0), 4096, Prot::RW, Backing::Anon, "")
            .unwrap();
        s.write(&mem, a, b"kept").unwrap();
        touch(&mem, &s, a);
        s.protect(&mem, a, 4096, Prot::NONE).unwrap();
        assert!(s.take_needs_invalidate());
        s.protect(&mem, a, 4096, Prot::RW).unwrap();
        let mut b = [0u8; 4];
        s.read(&mem, a, &mut b).unwrap();
        assert_eq!(&b, b"kept");
    }

    #[test]
    fn walks_over_sparse_ranges_skip_missing_tables_but_miss_no_page() {
        let (mem, mut s) = space();
        // 3 GiB spans page directories that do not exist yet.
        let len = 3 << 30;
        let a = s
            .map(&mem, Placement::Hint(0), len, Prot::RW, Backing::Anon, "")
            .unwrap();
        let (first, last) = (a + 5 * PAGE_SIZE, a + len - PAGE_SIZE);
        s.write(&mem, first, b"one").unwrap();
        s.write(&mem, last, b"two").unwrap();
        s.discard(&mem, a, len).unwrap();
        let mut b = [1u8; 3];
        s.read(&mem, last, &mut b).unwrap();
        assert_eq!(b, [0; 3], "the last page was found and cleared");
        s.protect(&mem, a, len, Prot::NONE).unwrap();
        assert_eq!(s.pt.get(&mem, first) & super::super::paging::PTE_W, 0);
        assert_eq!(s.pt.get(&mem, last) & super::super::paging::PTE_W, 0);
        let hole = a + len + (4 << 30);
        assert!(
            matches!(s.pt.lookup(&mem, hole), Err(next) if next > hole && next % (2 << 20) == 0),
            "no table there: the walk may skip at least to the next 2 MiB"
        );
    }

    #[test]
    fn file_mappings_copy_the_file_and_zero_the_tail() {
        let (mem, mut s) = space();
        let data = Arc::new(b"0123456789".repeat(500));
        let b = Backing::file(data, 4096);
        let ro = Prot {
            read: true,
            ..Prot::NONE
        };
        let a = s.map(&mem, Placement::Hint(0), 8192, ro, b, "/f").unwrap();
        let mut x = [0u8; 4];
        s.read(&mem, a, &mut x).unwrap();
        assert_eq!(&x, b"6789");
        s.read(&mem, a + 5000 - 4096, &mut x).unwrap();
        assert_eq!(x, [0; 4]);
    }

    #[test]
    fn mremap_grows_in_place_or_moves_with_the_contents() {
        let (mem, mut s) = space();
        let above = s
            .map(&mem, Placement::Hint(0), 4096, Prot::RW, Backing::Anon, "")
            .unwrap();
        let a = s
            .map(&mem, Placement::Hint(0), 4096, Prot::RW, Backing::Anon, "")
            .unwrap();
        assert_eq!(a + 4096, above);
        s.write(&mem, a, b"move").unwrap();
        let b = s.remap(&mem, a, 4096, 8192, true, None).unwrap();
        assert_ne!(a, b, "the mapping above leaves no room to grow in place");
        let mut x = [0u8; 4];
        s.read(&mem, b, &mut x).unwrap();
        assert_eq!(&x, b"move");
        assert!(s.vma_at(a).is_none());
    }

    #[test]
    fn brk_grows_and_shrinks_the_heap() {
        let (mem, mut s) = space();
        s.init_brk(0x60_1234);
        let base = 0x60_2000;
        assert_eq!(s.brk(&mem, 0), base);
        assert_eq!(s.brk(&mem, base + 0x21000), base + 0x21000);
        s.write(&mem, base + 0x20000, b"x").unwrap();
        assert_eq!(s.brk(&mem, base + 0x1000), base + 0x1000);
        assert_eq!(
            s.read(&mem, base + 0x20000, &mut [0u8]),
            Err(MemError::Fault)
        );
    }
}
