//! Memory: `brk`, `mmap` and friends.

use super::call::{SyscallDef, def};
use super::files::FileKind;
use super::{FpuAccess, Kernel, SysResult, err};
use std::sync::Arc;

use crate::arch::layout::{PAGE_SIZE, page_ceil};
use crate::memory::{Backing, MemError, Placement, Prot};

pub const CALLS: &[SyscallDef] = &[
    def(libc::SYS_brk, sys_brk, ""),
    def(
        libc::SYS_mmap,
        sys_mmap,
        "MAP_SHARED of a file the guest may change is shared between processes (its pages are the file's); of a host file opened read-only, a copy",
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
    def(libc::SYS_msync, sys_msync, ""),
    def(
        libc::SYS_get_mempolicy,
        sys_get_mempolicy,
        "one node (0): policies are kept and reported, and place nothing",
    ),
    def(
        libc::SYS_set_mempolicy,
        sys_set_mempolicy,
        "one node (0): the policy is kept and places nothing",
    ),
    def(
        libc::SYS_mbind,
        sys_mbind,
        "one node (0): the range's policy is kept and no page moves",
    ),
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
    let r = match backing(k, len, prot, shared, flags & MAP_ANONYMOUS != 0, fd, off) {
        Ok((backing, name)) => map(k, addr, len, prot, flags, backing, &name),
        Err(e) => Err(e),
    };
    // A fixed mapping may have replaced a shared one; a failed one may
    // leave an object nothing maps.
    k.collect_shared();
    match r {
        Ok(a) => SysResult::Ret(a as i64),
        Err(e) => err(e),
    }
}

/// What fills a new mapping, and its name: anonymous memory (an object of
/// its own when shared), a private copy of a file, or a file's shared
/// object (an overlay file's: the guest's writes to host files copy them up
/// into the overlay first).
fn backing(
    k: &mut Kernel,
    len: u64,
    prot: Prot,
    shared: bool,
    anonymous: bool,
    fd: u64,
    off: u64,
) -> Result<(Backing, String), i32> {
    let anon = |k: &mut Kernel| match shared {
        true => Backing::Shared {
            object: k.anonymous_object(),
            offset: 0,
        },
        false => Backing::Anon,
    };
    if anonymous {
        return Ok((anon(k), String::new()));
    }
    let f = k.files().get(fd as i32).ok_or(libc::EBADF)?;
    if !f.readable() || (shared && prot.write && !f.writable()) {
        return Err(libc::EACCES);
    }
    let path = f.path.clone();
    let data = match &f.kind {
        FileKind::Host(d) | FileKind::Synthetic(d) => d.clone(),
        FileKind::Overlay if shared => {
            let ino = k.vfs.overlay_inode(&path).ok_or(libc::EIO)?;
            let object = k.file_object(ino, off, page_ceil(len)).map_err(errno)?;
            return Ok((
                Backing::Shared {
                    object,
                    offset: off,
                },
                path,
            ));
        }
        FileKind::Overlay => Arc::new(k.file_bytes(&path).map(|d| d.to_vec()).unwrap_or_default()),
        FileKind::Zero | FileKind::Null => return Ok((anon(k), String::new())),
        _ => return Err(libc::ENODEV),
    };
    // A host file nobody in the guest can change in place: a copy is as
    // good as sharing it (a write to it copies it up into the overlay,
    // where a descriptor opened before does not look).
    let sites = prot.exec.then(|| k.sites_for(&path, &data)).flatten();
    Ok((
        Backing::File {
            data,
            offset: off,
            sites,
            jumps: false,
        },
        path,
    ))
}

/// Makes the mapping, with its sync sites for the site path.
fn map(
    k: &mut Kernel,
    addr: u64,
    len: u64,
    prot: Prot,
    flags: u64,
    backing: Backing,
    name: &str,
) -> Result<u64, i32> {
    let sites = match &backing {
        Backing::File {
            offset,
            sites: Some(t),
            ..
        } => Some((*offset, t.clone())),
        _ => None,
    };
    let a =
        k.mm.map(&k.mem, placement(addr, flags), len, prot, backing, name)
            .map_err(errno)?;
    if flags & MAP_SHARED != 0 {
        k.mm.mark_shared(a);
    }
    if let Some((offset, table)) = sites {
        k.add_site_path(a, len, offset, &table);
    }
    Ok(a)
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

fn sys_munmap(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let r = k.mm.unmap(&k.mem, a[0], a[1]).map(|_| 0);
    k.collect_shared();
    ret(r)
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
    let may_move = flags & MREMAP_MAYMOVE != 0;
    let r = k.mm.remap(&k.mem, old, old_len, new_len, may_move, fixed);
    // A file's shared mapping that grew covers more of the file.
    if let Ok(at) = r {
        let grown = k.mm.vma_at(at).and_then(|v| v.shared_at(v.start));
        if let Some((object, offset)) = grown {
            if let Some(ino) = k.inode_of_object(object) {
                let len = k.mm.vma_at(at).map_or(0, |v| v.end - v.start);
                if let Err(e) = k.file_object(ino, offset, len) {
                    return err(errno(e));
                }
            }
        }
    }
    k.collect_shared();
    ret(r)
}

const MS_ASYNC: u64 = 1;
const MS_INVALIDATE: u64 = 2;
const MS_SYNC: u64 = 4;

/// `msync`: the file of a shared mapping gets what the mapping holds (it
/// always reads so anyway; see `shared`).
fn sys_msync(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let [addr, len, flags, ..] = a;
    if addr % PAGE_SIZE != 0
        || flags & !(MS_ASYNC | MS_INVALIDATE | MS_SYNC) != 0
        || flags & (MS_ASYNC | MS_SYNC) == MS_ASYNC | MS_SYNC
    {
        return err(libc::EINVAL);
    }
    let Some(end) = addr.checked_add(page_ceil(len)) else {
        return err(libc::ENOMEM);
    };
    let mut at = addr;
    while at < end {
        match k.mm.vma_at(at) {
            Some(v) => at = v.end,
            None => return err(libc::ENOMEM),
        }
    }
    k.write_back_range(addr, end);
    SysResult::Ret(0)
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

// ----- NUMA memory policies, on a machine of one node

const MPOL_DEFAULT: u16 = 0;
const MPOL_PREFERRED: u16 = 1;
const MPOL_INTERLEAVE: u16 = 3;
const MPOL_LOCAL: u16 = 4;
/// The last mode Linux 6.1 knows (MPOL_PREFERRED_MANY).
const MPOL_MAX: u16 = 5;
const MPOL_MODE_FLAGS: u64 = (1 << 15) | (1 << 14) | (1 << 13);
const MPOL_F_NODE: u64 = 1;
const MPOL_F_ADDR: u64 = 2;
const MPOL_F_MEMS_ALLOWED: u64 = 4;
const MPOL_MF_VALID: u64 = 1 | 2 | 4;
/// The one node there is.
const NODES_ONLINE: u64 = 1;

/// Reads a node mask of `maxnode` bits (Linux reads one less than it is
/// told): whether it names any node at all, and which online ones it
/// names (only node 0 is).
fn read_nodes(k: &mut Kernel, ptr: u64, maxnode: u64) -> Result<(bool, u64), i32> {
    let bits = maxnode.saturating_sub(1);
    if ptr == 0 || bits == 0 {
        return Ok((false, 0));
    }
    if bits > PAGE_SIZE * 8 {
        return Err(libc::EINVAL);
    }
    let (mut any, mut online) = (false, 0);
    for w in 0..bits.div_ceil(64) {
        let mut word = k.read_u64(ptr + w * 8).map_err(|_| libc::EFAULT)?;
        let used = (bits - w * 64).min(64);
        if used < 64 {
            word &= (1 << used) - 1;
        }
        any |= word != 0;
        if w == 0 {
            online = word & NODES_ONLINE;
        }
    }
    Ok((any, online))
}

/// A policy (`set_mempolicy`, `mbind`): its mode with flags, and nodes.
fn read_policy(k: &mut Kernel, mode: u64, ptr: u64, maxnode: u64) -> Result<(u16, u64), i32> {
    let flags = mode & MPOL_MODE_FLAGS;
    let base = mode & !MPOL_MODE_FLAGS;
    if base > MPOL_MAX as u64 {
        return Err(libc::EINVAL);
    }
    let base = base as u16;
    let (named, nodes) = read_nodes(k, ptr, maxnode)?;
    match base {
        MPOL_DEFAULT | MPOL_LOCAL if named || flags != 0 => Err(libc::EINVAL),
        MPOL_DEFAULT | MPOL_LOCAL => Ok((base, 0)),
        // Preferred with no node is the local node.
        MPOL_PREFERRED if !named => Ok((MPOL_LOCAL, 0)),
        // The nodes must include an online one.
        _ if nodes == 0 => Err(libc::EINVAL),
        _ => Ok((base | flags as u16, nodes)),
    }
}

fn sys_set_mempolicy(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    match read_policy(k, a[0], a[1], a[2]) {
        Ok(p) => {
            k.cur().mempolicy = p;
            SysResult::Ret(0)
        }
        Err(e) => err(e),
    }
}

fn sys_mbind(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let [addr, len, mode, nodes, maxnode, flags] = a;
    if flags & !MPOL_MF_VALID != 0 || addr % PAGE_SIZE != 0 {
        return err(libc::EINVAL);
    }
    let policy = match read_policy(k, mode, nodes, maxnode) {
        Ok(p) => p,
        Err(e) => return err(e),
    };
    if len == 0 {
        return SysResult::Ret(0);
    }
    match k.mm.set_policy(addr, len, policy) {
        Ok(()) => SysResult::Ret(0),
        Err(MemError::Fault) => err(libc::EFAULT),
        Err(e) => err(errno(e)),
    }
}

/// Writes a node mask of `maxnode` bits (Linux's `copy_nodes_to_user`).
fn write_nodes(k: &mut Kernel, ptr: u64, maxnode: u64, nodes: u64) -> Result<(), i32> {
    let bytes = (maxnode.saturating_sub(1).div_ceil(64) * 8) as usize;
    if bytes > PAGE_SIZE as usize {
        return Err(libc::EINVAL);
    }
    let mut out = vec![0u8; bytes];
    if bytes >= 8 {
        out[..8].copy_from_slice(&nodes.to_le_bytes());
    }
    k.write(ptr, &out).map_err(|_| libc::EFAULT)
}

fn sys_get_mempolicy(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let [mode_ptr, nodes_ptr, maxnode, addr, flags, _] = a;
    if flags & !(MPOL_F_NODE | MPOL_F_ADDR | MPOL_F_MEMS_ALLOWED) != 0 {
        return err(libc::EINVAL);
    }
    // Masks shorter than the one node are refused.
    if nodes_ptr != 0 && maxnode < 1 {
        return err(libc::EINVAL);
    }
    let (mode, nodes) = if flags & MPOL_F_MEMS_ALLOWED != 0 {
        if flags & (MPOL_F_NODE | MPOL_F_ADDR) != 0 {
            return err(libc::EINVAL);
        }
        (0, NODES_ONLINE)
    } else if flags & MPOL_F_ADDR != 0 {
        let Some(v) = k.mm.vma_at(addr) else {
            return err(libc::EFAULT);
        };
        let policy = v.policy.unwrap_or(k.cur().mempolicy);
        if flags & MPOL_F_NODE != 0 {
            // The node of the page at `addr`: the only one.
            (0, policy.1)
        } else {
            policy
        }
    } else if addr != 0 {
        return err(libc::EINVAL);
    } else if flags & MPOL_F_NODE != 0 {
        // Only an interleaving thread has a next node to tell.
        let p = k.cur().mempolicy;
        if p.0 & !(MPOL_MODE_FLAGS as u16) != MPOL_INTERLEAVE {
            return err(libc::EINVAL);
        }
        (0, p.1)
    } else {
        k.cur().mempolicy
    };
    if mode_ptr != 0 && k.write_u32(mode_ptr, mode as u32).is_err() {
        return err(libc::EFAULT);
    }
    if nodes_ptr != 0 {
        if let Err(e) = write_nodes(k, nodes_ptr, maxnode, nodes) {
            return err(e);
        }
    }
    SysResult::Ret(0)
}
