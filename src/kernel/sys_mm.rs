//! Memory: `brk`, `mmap` and friends.

use super::files::FileKind;
use super::table::{SyscallDef, def};
use super::{FpuAccess, Kernel, SysResult, err};
use crate::arch::layout::PAGE_SIZE;
use crate::memory::{Backing, MemError, Placement, Prot};

pub const CALLS: &[SyscallDef] = &[
    def(libc::SYS_brk, sys_brk, ""),
    def(
        libc::SYS_mmap,
        sys_mmap,
        "MAP_SHARED writable file mappings are not supported",
    ),
    def(libc::SYS_munmap, sys_munmap, ""),
    def(libc::SYS_mprotect, sys_mprotect, ""),
    def(
        libc::SYS_pkey_alloc,
        sys_pkey_alloc,
        "ENOSPC: the CPU model has no protection keys",
    ),
    def(
        libc::SYS_pkey_free,
        sys_pkey_free,
        "EINVAL: no key was ever given",
    ),
    def(
        libc::SYS_mremap,
        sys_mremap,
        "MREMAP_DONTUNMAP is not supported",
    ),
    def(
        libc::SYS_madvise,
        sys_madvise,
        "advice other than DONTNEED is accepted and ignored",
    ),
    def(libc::SYS_mlock, sys_ok, "memory is never swapped"),
    def(libc::SYS_munlock, sys_ok, ""),
    def(libc::SYS_mlockall, sys_ok, ""),
    def(libc::SYS_munlockall, sys_ok, ""),
    def(libc::SYS_msync, sys_ok, "file mappings are private copies"),
    def(
        libc::SYS_membarrier,
        sys_membarrier,
        "one CPU runs at a time: every barrier is a no-op",
    ),
];

/// The errno for a memory error.
pub fn errno(e: MemError) -> i32 {
    match e {
        MemError::Fault | MemError::Unmapped | MemError::Denied => libc::EFAULT,
        MemError::NoMemory => libc::ENOMEM,
        MemError::Invalid => libc::EINVAL,
        MemError::Exists => libc::EEXIST,
    }
}

fn ret(r: Result<u64, MemError>) -> SysResult {
    match r {
        Ok(v) => SysResult::Ret(v as i64),
        Err(e) => err(errno(e)),
    }
}

fn sys_ok(_: &mut Kernel, _: &mut dyn FpuAccess, _: [u64; 6]) -> SysResult {
    SysResult::Ret(0)
}

fn sys_brk(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let now = k.mm.brk(&k.mem, 0);
    if a[0] > now && a[0] - now > k.mem.size() {
        return SysResult::Ret(now as i64);
    }
    SysResult::Ret(k.mm.brk(&k.mem, a[0]) as i64)
}

/// Whether a private writable mapping of `len` bytes asks for more memory
/// than the machine has: Linux's overcommit heuristic refuses such a
/// request with ENOMEM (so `malloc` returns NULL) instead of letting the
/// program fail when it touches the pages.
fn more_than_the_machine(k: &Kernel, len: u64, prot: Prot, flags: u64) -> bool {
    prot.write && flags & MAP_SHARED == 0 && flags & MAP_NORESERVE == 0 && len > k.mem.size()
}

const MAP_SHARED: u64 = 0x01;
const MAP_FIXED: u64 = 0x10;
const MAP_ANONYMOUS: u64 = 0x20;
const MAP_NORESERVE: u64 = 0x4000;
const MAP_HUGETLB: u64 = 0x40000;
const MAP_FIXED_NOREPLACE: u64 = 0x100000;

fn sys_mmap(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let [addr, len, prot, flags, fd, off] = a;
    // One of MAP_SHARED, MAP_PRIVATE or MAP_SHARED_VALIDATE.
    let map_type = flags & 0xf;
    if len == 0 || off % PAGE_SIZE != 0 || !(1..=3).contains(&map_type) {
        return err(libc::EINVAL);
    }
    if flags & MAP_HUGETLB != 0 {
        return SysResult::Unsupported("mmap with MAP_HUGETLB".into());
    }
    let prot = Prot::from_linux(prot);
    if more_than_the_machine(k, len, prot, flags) {
        return err(libc::ENOMEM);
    }
    let shared = flags & MAP_SHARED != 0;
    let (backing, name) = if flags & MAP_ANONYMOUS != 0 {
        (Backing::Anon, String::new())
    } else {
        let Some(f) = k.files.get(fd as i32) else {
            return err(libc::EBADF);
        };
        if !f.readable() {
            return err(libc::EACCES);
        }
        let data = match &f.kind {
            FileKind::Host(d) | FileKind::Synthetic(d) => d.clone(),
            FileKind::Overlay => {
                if shared && prot.write {
                    return SysResult::Unsupported(
                        "a writable MAP_SHARED mapping of a file the program wrote".into(),
                    );
                }
                std::sync::Arc::new(k.vfs.overlay_data(&f.path).cloned().unwrap_or_default())
            }
            FileKind::Zero | FileKind::Null => return map_anon(k, addr, len, prot, flags),
            _ => return err(libc::ENODEV),
        };
        if shared && prot.write && f.writable() {
            return SysResult::Unsupported("a writable MAP_SHARED mapping of a host file".into());
        }
        let path = f.path.clone();
        let sites = prot.exec.then(|| k.sites_for(&path, &data)).flatten();
        (
            Backing::File {
                data,
                offset: off,
                sites,
            },
            path,
        )
    };
    let sites = match &backing {
        Backing::File {
            offset,
            sites: Some(t),
            ..
        } => Some((*offset, t.clone())),
        _ => None,
    };
    let placement = placement(addr, flags);
    let r = k.mm.map(&k.mem, placement, len, prot, backing, &name);
    if let (true, Ok(a)) = (shared, r) {
        k.mm.mark_shared(a);
    }
    if let (Some((offset, table)), Ok(a)) = (sites, r) {
        k.add_site_path(a, len, offset, &table);
    }
    ret(r)
}

fn placement(addr: u64, flags: u64) -> Placement {
    if flags & MAP_FIXED_NOREPLACE != 0 {
        Placement::FixedNoReplace(addr)
    } else if flags & MAP_FIXED != 0 {
        Placement::Fixed(addr)
    } else {
        Placement::Hint(addr)
    }
}

fn map_anon(k: &mut Kernel, addr: u64, len: u64, prot: Prot, flags: u64) -> SysResult {
    ret(k
        .mm
        .map(&k.mem, placement(addr, flags), len, prot, Backing::Anon, ""))
}

fn sys_munmap(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    ret(k.mm.unmap(&k.mem, a[0], a[1]).map(|_| 0))
}

fn sys_mprotect(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    // PROT_GROWSDOWN/GROWSUP ask to extend to the whole stack mapping; the
    // range given is what matters here.
    let prot = Prot::from_linux(a[2] & 7);
    ret(k.mm.protect(&k.mem, a[0], a[1], prot).map(|_| 0))
}

const MREMAP_MAYMOVE: u64 = 1;
const MREMAP_FIXED: u64 = 2;
const MREMAP_DONTUNMAP: u64 = 4;

fn sys_mremap(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let [old, old_len, new_len, flags, new_addr, _] = a;
    if flags & MREMAP_DONTUNMAP != 0 {
        return SysResult::Unsupported("mremap with MREMAP_DONTUNMAP".into());
    }
    if flags & !(MREMAP_MAYMOVE | MREMAP_FIXED) != 0
        || (flags & MREMAP_FIXED != 0 && flags & MREMAP_MAYMOVE == 0)
    {
        return err(libc::EINVAL);
    }
    let fixed = (flags & MREMAP_FIXED != 0).then_some(new_addr);
    ret(k.mm.remap(
        &k.mem,
        old,
        old_len,
        new_len,
        flags & MREMAP_MAYMOVE != 0,
        fixed,
    ))
}

const MADV_DONTNEED: u64 = 4;

fn sys_madvise(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    if a[0] % PAGE_SIZE != 0 {
        return err(libc::EINVAL);
    }
    if a[2] == MADV_DONTNEED {
        return ret(k.mm.discard(&k.mem, a[0], a[1]).map(|_| 0));
    }
    SysResult::Ret(0)
}

fn sys_membarrier(_: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    // MEMBARRIER_CMD_QUERY: report the commands we accept (all no-ops).
    if a[0] == 0 {
        return SysResult::Ret(0x1 | 0x8 | 0x10 | 0x20 | 0x40);
    }
    SysResult::Ret(0)
}

/// Protection keys: the CPU model has none, so none can be had (Linux
/// answers ENOSPC without them), and none can be freed.
fn sys_pkey_alloc(_: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    if a[0] != 0 || a[1] > 3 {
        return err(libc::EINVAL);
    }
    err(libc::ENOSPC)
}

fn sys_pkey_free(_: &mut Kernel, _: &mut dyn FpuAccess, _: [u64; 6]) -> SysResult {
    err(libc::EINVAL)
}
