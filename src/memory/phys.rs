//! Guest-physical memory: one anonymous mapping shared with KVM, with a
//! record of every page the monitor itself wrote (KVM's dirty log only sees
//! the guest's writes), and the allocator that hands out its pages.

use std::ops::Deref;

use serde::{Deserialize, Serialize};
use vm_memory::bitmap::AtomicBitmap;
use vm_memory::{
    Bytes, GuestAddress, GuestMemoryBackend, GuestMemoryRegion, GuestRegionMmap, MmapRegion,
};

use crate::arch::layout::{PAGE_SIZE, PHYS_POOL_START};

type Mem = vm_memory::GuestMemoryMmap<AtomicBitmap>;

/// Errors of guest-physical memory.
#[derive(Debug, thiserror::Error)]
pub enum PhysError {
    /// The host refused the mapping.
    #[error("cannot reserve {0} MiB of host memory for the guest: {1}; give a smaller --memory")]
    Reserve(u64, String),
    /// Every guest page is in use.
    #[error("the guest ran out of physical memory ({0} MiB); raise --memory")]
    OutOfMemory(u64),
}

/// The guest's physical memory.
pub struct PhysMemory {
    mem: Mem,
    size: u64,
    host: *mut u8,
}

// SAFETY: the raw pointer is the base of a mapping owned by `mem` for the
// whole life of the value; access to it is governed by `&`/`&mut self` like
// the mapping itself.
unsafe impl Send for PhysMemory {}
// SAFETY: every access copies bytes in or out (as the vCPU itself reads and
// writes the same memory concurrently); the only borrowed view, `page`, is
// taken while no vCPU runs on this memory.
unsafe impl Sync for PhysMemory {}

impl PhysMemory {
    /// Reserves `size` bytes (a multiple of 2 MiB) of zero-filled guest memory.
    /// Host pages are committed only when touched.
    pub fn new(size: u64) -> Result<Self, PhysError> {
        let mib = size >> 20;
        let mem = Mem::from_ranges(&[(GuestAddress(0), size as usize)])
            .map_err(|e| PhysError::Reserve(mib, e.to_string()))?;
        let host = region(&mem).as_ptr();
        Ok(PhysMemory { mem, size, host })
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Host address of guest-physical 0, for registering the KVM memory slot.
    pub fn host_base(&self) -> *mut u8 {
        self.host
    }

    fn check(&self, pa: u64, len: usize) {
        assert!(
            pa.checked_add(len as u64).is_some_and(|e| e <= self.size),
            "guest-physical access {pa:#x}+{len:#x} outside memory"
        );
    }

    /// Reads bytes at a guest-physical address.
    pub fn read(&self, pa: u64, buf: &mut [u8]) {
        // Draining the hint ring reads small records by the thousand: a
        // direct copy is several times cheaper than the region lookup.
        self.check(pa, buf.len());
        // SAFETY: the range was checked to lie inside the mapping, which lives
        // as long as `self`; the vCPU does not run while the monitor reads,
        // and `buf` is the caller's own memory, apart from the guest's.
        unsafe {
            std::ptr::copy_nonoverlapping(self.host.add(pa as usize), buf.as_mut_ptr(), buf.len())
        };
    }

    /// Writes bytes at a guest-physical address, recording the pages as dirty.
    pub fn write(&self, pa: u64, buf: &[u8]) {
        self.check(pa, buf.len());
        self.mem
            .write_slice(buf, GuestAddress(pa))
            .expect("checked range");
    }

    /// Reads a little-endian u64.
    pub fn read_u64(&self, pa: u64) -> u64 {
        // Page-table walks read entries by the thousand; a direct load is
        // several times cheaper than going through the region lookup.
        self.check(pa, 8);
        // SAFETY: the range was checked to lie inside the mapping, which lives
        // as long as `self`; the vCPU does not run while the monitor reads.
        let v = unsafe { std::ptr::read_unaligned(self.host.add(pa as usize) as *const u64) };
        u64::from_le(v)
    }

    /// Writes a little-endian u64.
    pub fn write_u64(&self, pa: u64, v: u64) {
        self.write(pa, &v.to_le_bytes());
    }

    /// Fills a page with zeros.
    pub fn zero_page(&self, pa: u64) {
        self.write(pa, &[0u8; PAGE_SIZE as usize]);
    }

    /// A read-only view of one page, for bulk copies (snapshots).
    pub fn page(&self, pa: u64) -> &[u8] {
        self.check(pa, PAGE_SIZE as usize);
        // SAFETY: the range was checked to lie inside the mapping, which lives
        // as long as `self`. The guest may write it concurrently only while
        // the vCPU runs, and the vCPU runs only through `&mut` of the owner.
        unsafe { std::slice::from_raw_parts(self.host.add(pa as usize), PAGE_SIZE as usize) }
    }

    /// Overwrites one page without recording it as dirty (used by snapshot
    /// restore, which resets the dirty record itself).
    pub fn restore_page(&self, pa: u64, data: &[u8]) {
        self.check(pa, PAGE_SIZE as usize);
        assert_eq!(data.len(), PAGE_SIZE as usize);
        // SAFETY: as in `page`; the source is a separate host buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.host.add(pa as usize), data.len())
        }
    }

    /// Page frame numbers the monitor wrote since the last call, as a bitmap
    /// of 64-page words; the record is cleared.
    pub fn take_host_dirty(&self) -> Vec<u64> {
        region(&self.mem).bitmap().get_and_reset()
    }
}

fn region(mem: &Mem) -> &MmapRegion<AtomicBitmap> {
    let r: &GuestRegionMmap<AtomicBitmap> = mem.find_region(GuestAddress(0)).expect("one region");
    debug_assert_eq!(r.start_addr(), GuestAddress(0));
    r.deref()
}

/// Hands out guest-physical pages. Deterministic: the same sequence of calls
/// gives the same pages. Pages above the high-water mark are always zero (the
/// host memory starts zeroed and a snapshot restore puts every page written
/// since back), so only recycled pages need clearing.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PageAllocator {
    next_fresh: u64,
    end: u64,
    free: Vec<u64>,
    /// Pages more than one address space holds (copy-on-write after a
    /// fork, or shared mappings), with the number of extra holders.
    #[serde(default)]
    shares: std::collections::BTreeMap<u64, u32>,
    /// Page-table pages of torn-down address spaces, kept out of use until
    /// the guest's cached translations are next dropped: the shadow MMU may
    /// still hold tables built from them, and would take a reused page for
    /// the table it was.
    #[serde(default)]
    quarantine: Vec<u64>,
    /// The pages of shared memory objects (a file's pages that its
    /// `MAP_SHARED` mappings share, anonymous shared memory), by object
    /// and page index. The table holds a reference of its own to each
    /// page, and every page-table entry over it one more, so the page
    /// stays while the object does, mapped or not.
    #[serde(default)]
    objects: std::collections::BTreeMap<u64, std::collections::BTreeMap<u64, u64>>,
}

impl PageAllocator {
    /// An allocator over the pool `[PHYS_POOL_START, end)`.
    pub fn new(end: u64) -> Self {
        PageAllocator {
            next_fresh: PHYS_POOL_START,
            end,
            free: Vec::new(),
            shares: Default::default(),
            quarantine: Vec::new(),
            objects: Default::default(),
        }
    }

    /// Lets go of a page that served as a page table: it returns to the
    /// pool after the next invalidation ([`PageAllocator::after_invalidation`]).
    pub fn retire_table(&mut self, pa: u64) {
        self.quarantine.push(pa);
    }

    /// The guest's cached translations were dropped: retired tables are
    /// plain pages again.
    pub fn after_invalidation(&mut self) {
        self.free.append(&mut self.quarantine);
    }

    /// One more address space holds `pa`.
    pub fn share(&mut self, pa: u64) {
        *self.shares.entry(pa).or_default() += 1;
    }

    /// Whether another address space holds `pa` too.
    pub fn is_shared(&self, pa: u64) -> bool {
        self.shares.contains_key(&pa)
    }

    /// Page `index` of shared object `object`, if it has one yet.
    pub fn object_page(&self, object: u64, index: u64) -> Option<u64> {
        self.objects.get(&object)?.get(&index).copied()
    }

    /// Page `index` of shared object `object`, a new zero-filled one if it
    /// had none; whether it is new.
    pub fn object_page_or_new(
        &mut self,
        mem: &PhysMemory,
        object: u64,
        index: u64,
    ) -> Result<(u64, bool), PhysError> {
        if let Some(pa) = self.object_page(object, index) {
            return Ok((pa, false));
        }
        let pa = self.alloc(mem)?;
        self.objects.entry(object).or_default().insert(index, pa);
        Ok((pa, true))
    }

    /// The pages shared object `object` has, by index.
    pub fn object_pages(&self, object: u64) -> Vec<(u64, u64)> {
        self.objects
            .get(&object)
            .map(|m| m.iter().map(|(i, pa)| (*i, *pa)).collect())
            .unwrap_or_default()
    }

    /// The shared objects that have pages.
    pub fn objects(&self) -> Vec<u64> {
        self.objects.keys().copied().collect()
    }

    /// Lets go of a shared object's pages (each goes back to the pool once
    /// no page table holds it either).
    pub fn release_object(&mut self, object: u64) {
        for (_, pa) in self.objects.remove(&object).unwrap_or_default() {
            self.free(pa);
        }
    }

    /// A zero-filled page.
    pub fn alloc(&mut self, mem: &PhysMemory) -> Result<u64, PhysError> {
        if let Some(pa) = self.free.pop() {
            mem.zero_page(pa);
            return Ok(pa);
        }
        if self.next_fresh + PAGE_SIZE > self.end {
            return Err(PhysError::OutOfMemory(self.end >> 20));
        }
        let pa = self.next_fresh;
        self.next_fresh += PAGE_SIZE;
        Ok(pa)
    }

    /// Lets go of a page: it returns to the pool once no address space
    /// holds it.
    pub fn free(&mut self, pa: u64) {
        debug_assert!(pa >= PHYS_POOL_START && pa < self.next_fresh);
        if let Some(n) = self.shares.get_mut(&pa) {
            *n -= 1;
            if *n == 0 {
                self.shares.remove(&pa);
            }
            return;
        }
        self.free.push(pa);
    }

    /// Pages currently handed out (retired tables count until released).
    pub fn in_use(&self) -> u64 {
        (self.next_fresh - PHYS_POOL_START) / PAGE_SIZE - self.free.len() as u64
    }

    /// The high-water mark: no page at or above it was ever handed out.
    pub fn high_water(&self) -> u64 {
        self.next_fresh
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recycled_pages_come_back_zeroed() {
        let mem = PhysMemory::new(4 << 20).unwrap();
        let mut a = PageAllocator::new(mem.size());
        let p = a.alloc(&mem).unwrap();
        mem.write_u64(p + 8, 0xdead);
        a.free(p);
        let q = a.alloc(&mem).unwrap();
        assert_eq!(p, q);
        assert_eq!(mem.read_u64(q + 8), 0);
    }

    #[test]
    fn monitor_writes_are_recorded_as_dirty_pages() {
        let mem = PhysMemory::new(4 << 20).unwrap();
        mem.take_host_dirty();
        mem.write_u64(0x20_0008, 1);
        let bits = mem.take_host_dirty();
        let pfn = 0x200usize;
        assert_ne!(bits[pfn / 64] & (1 << (pfn % 64)), 0);
        assert!(mem.take_host_dirty().iter().all(|w| *w == 0));
    }

    #[test]
    fn allocation_fails_cleanly_when_memory_is_exhausted() {
        let mem = PhysMemory::new(2 << 20).unwrap();
        let mut a = PageAllocator::new(mem.size());
        let n = (mem.size() - PHYS_POOL_START) / PAGE_SIZE;
        for _ in 0..n {
            a.alloc(&mem).unwrap();
        }
        assert!(matches!(a.alloc(&mem), Err(PhysError::OutOfMemory(_))));
    }
}
