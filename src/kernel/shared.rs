//! Shared memory: `MAP_SHARED` mappings of files (and of `/dev/shm`
//! objects, which are files there) and anonymous shared memory, and
//! keeping a file's bytes and its mapped pages one.
//!
//! A shared object is a set of guest-physical pages in the page pool
//! (`PageAllocator::object_page`), and every mapping of it, in any
//! process, maps those very pages. Copying between address spaces could
//! never work on the nested KVM these machines run on: a change the
//! monitor makes to a present page-table entry stays invisible to the
//! guest until translations are invalidated. Data pages written by
//! anyone are seen at once.
//!
//! A file's object has all the pages its mappings cover from the moment
//! one is made (filled from the file, as private file mappings are
//! copied); an anonymous object gets zero pages on first touch.
//!
//! The file's bytes stay in the overlay's inode, and its pages are the
//! newer copy of what they cover: before the kernel reads the file
//! (`read`, `execve`, a private mapping, `sendfile`) the pages are written
//! back into the inode, and after it changes the file (`write`,
//! `ftruncate`) the pages are filled again. The guest sees a file only
//! through system calls and its mappings, so both views agree at every
//! step, as Linux's page cache makes them agree. The pages are written back
//! too when the last mapping goes (`munmap`, exit, `execve`) and at
//! `msync`. Everything here is a function of the steps taken, so each
//! process's view of a shared page is a function of the schedule.

use std::collections::{BTreeMap, BTreeSet};

use super::Kernel;
use super::vfs::{FileData, Space};
use crate::arch::layout::PAGE_SIZE;
use crate::memory::MemError;

/// The shared objects of a run: which files have one.
#[derive(Clone, Debug, Default)]
pub struct SharedObjects {
    /// The object of each overlay inode that has one.
    by_inode: BTreeMap<u64, u64>,
    /// The inode of each file's object (anonymous ones have none).
    inodes: BTreeMap<u64, u64>,
    /// The id the next object gets.
    next: u64,
}

impl SharedObjects {
    fn new_id(&mut self) -> u64 {
        self.next += 1;
        self.next
    }
}

impl Kernel {
    /// A new anonymous shared object (`MAP_SHARED | MAP_ANONYMOUS`, or of
    /// `/dev/zero`).
    pub(super) fn anonymous_object(&mut self) -> u64 {
        self.shared.new_id()
    }

    /// The shared object of overlay inode `ino`, with a page for each
    /// page of `[offset, offset + len)` holding the file's bytes there.
    pub(super) fn file_object(&mut self, ino: u64, offset: u64, len: u64) -> Result<u64, MemError> {
        let object = match self.shared.by_inode.get(&ino) {
            Some(o) => *o,
            None => {
                let o = self.shared.new_id();
                self.shared.by_inode.insert(ino, o);
                self.shared.inodes.insert(o, ino);
                o
            }
        };
        let first = offset / PAGE_SIZE;
        let end = offset.checked_add(len).ok_or(MemError::Invalid)?;
        for index in first..end.div_ceil(PAGE_SIZE) {
            let alloc = self.mm.allocator_mut();
            let (pa, new) = alloc.object_page_or_new(&self.mem, object, index)?;
            if new {
                let page = self.vfs.inode(ino).map(|f| page_of_file(&f.data, index));
                self.mem.write(pa, &page.unwrap_or([0; PAGE_SIZE as usize]));
            }
        }
        Ok(object)
    }

    /// The inode whose object `object` is, for a file's.
    pub(super) fn inode_of_object(&self, object: u64) -> Option<u64> {
        self.shared.inodes.get(&object).copied()
    }

    /// Writes the pages of inode `ino`'s object, if it has one, back into
    /// the inode: the file then holds what its mappings wrote.
    pub(super) fn write_back(&mut self, ino: u64) {
        let Some(&object) = self.shared.by_inode.get(&ino) else {
            return;
        };
        let pages = self.mm.allocator().object_pages(object);
        let Some((file, space)) = self.vfs.file_mut(ino) else {
            return;
        };
        let mut page = [0u8; PAGE_SIZE as usize];
        for (index, pa) in pages {
            let at = index * PAGE_SIZE;
            if at >= file.len() {
                break;
            }
            self.mem.read(pa, &mut page);
            file.write_back(at, &page, space);
        }
    }

    /// Fills the pages of inode `ino`'s object, if it has one, from the
    /// inode again (after the file changed): zeros past its end.
    fn refill(&mut self, ino: u64) {
        let Some(&object) = self.shared.by_inode.get(&ino) else {
            return;
        };
        let Some(file) = self.vfs.inode(ino) else {
            return;
        };
        for (index, pa) in self.mm.allocator().object_pages(object) {
            self.mem.write(pa, &page_of_file(&file.data, index));
        }
    }

    /// The bytes of the overlay file at `path`, with what its shared
    /// mappings wrote.
    pub(super) fn file_bytes(&mut self, path: &str) -> Option<&FileData> {
        let ino = self.vfs.overlay_inode(path)?;
        self.write_back(ino);
        self.vfs.inode(ino).map(|f| &f.data)
    }

    /// Changes the bytes of the overlay file at `path` with `f`; its shared
    /// mappings see the change.
    pub(super) fn change_file<R>(
        &mut self,
        path: &str,
        f: impl FnOnce(&mut FileData, &mut Space) -> R,
    ) -> Option<R> {
        let ino = self.vfs.overlay_inode(path)?;
        self.write_back(ino);
        let (file, space) = self.vfs.file_mut(ino)?;
        let r = f(file, space);
        self.refill(ino);
        Some(r)
    }

    /// Lets go of the shared objects no mapping of any process holds any
    /// more (after munmap, exec and exit), writing files' pages back first.
    pub(super) fn collect_shared(&mut self) {
        let had = self.mm.allocator().objects();
        if had.is_empty() && self.shared.inodes.is_empty() {
            return;
        }
        let in_use: BTreeSet<u64> = std::iter::once(&self.mm)
            .chain(self.spaces.values())
            .flat_map(|s| s.vmas())
            .filter_map(|v| v.shared_at(v.start).map(|(object, _)| object))
            .collect();
        for object in had.into_iter().filter(|o| !in_use.contains(o)) {
            if let Some(&ino) = self.shared.inodes.get(&object) {
                self.write_back(ino);
            }
            self.mm.allocator_mut().release_object(object);
        }
        let SharedObjects {
            by_inode, inodes, ..
        } = &mut self.shared;
        inodes.retain(|object, _| in_use.contains(object));
        by_inode.retain(|_, object| inodes.contains_key(object));
    }

    /// Writes back the files whose shared mappings lie in `[addr, end)`
    /// (`msync`).
    pub(super) fn write_back_range(&mut self, addr: u64, end: u64) {
        let objects: BTreeSet<u64> = self
            .mm
            .vmas()
            .filter(|v| v.start < end && v.end > addr)
            .filter_map(|v| v.shared_at(v.start).map(|(object, _)| object))
            .collect();
        for object in objects {
            if let Some(&ino) = self.shared.inodes.get(&object) {
                self.write_back(ino);
            }
        }
    }
}

/// Page `index` of a file with bytes `data`: what it holds there, zeros
/// past its end.
fn page_of_file(data: &FileData, index: u64) -> [u8; PAGE_SIZE as usize] {
    let mut page = [0u8; PAGE_SIZE as usize];
    let bytes = data.read(index.saturating_mul(PAGE_SIZE), page.len());
    page[..bytes.len()].copy_from_slice(&bytes);
    page
}
