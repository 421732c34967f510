//! Changing the file tree: directories, links, renames, truncation and
//! modes, all in the run's private overlay (the host's files are never
//! changed).

use super::call::{AT_EMPTY_PATH, AT_FDCWD, AT_REMOVEDIR, path_at, ret, sys_zero};
use super::call::{SyscallDef, def};
use super::files::FileKind;
use super::synth::is_virtual_tree;
use super::vfs::{Resolved, parent_of};
use super::{FpuAccess, Kernel, SysResult, err};

pub const CALLS: &[SyscallDef] = &[
    def(libc::SYS_mkdir, sys_mkdir, ""),
    def(libc::SYS_mkdirat, sys_mkdirat, ""),
    def(libc::SYS_rmdir, sys_rmdir, ""),
    def(libc::SYS_unlink, sys_unlink, ""),
    def(libc::SYS_unlinkat, sys_unlinkat, ""),
    def(
        libc::SYS_rename,
        sys_rename,
        "renaming a host directory is not supported",
    ),
    def(libc::SYS_renameat, sys_renameat, ""),
    def(
        libc::SYS_renameat2,
        sys_renameat2,
        "RENAME_EXCHANGE and RENAME_WHITEOUT are not supported",
    ),
    def(
        libc::SYS_link,
        sys_link,
        "a host file is copied into the overlay first",
    ),
    def(
        libc::SYS_linkat,
        sys_linkat,
        "a host file is copied into the overlay first; not AT_EMPTY_PATH",
    ),
    def(libc::SYS_symlink, sys_symlink, ""),
    def(libc::SYS_symlinkat, sys_symlinkat, ""),
    def(libc::SYS_ftruncate, sys_ftruncate, ""),
    def(libc::SYS_truncate, sys_truncate, ""),
    def(libc::SYS_fallocate, sys_fallocate, "mode 0 only"),
    def(libc::SYS_chmod, sys_chmod, ""),
    def(libc::SYS_fchmod, sys_fchmod, ""),
    def(libc::SYS_fchmodat, sys_fchmodat, ""),
    def(libc::SYS_chown, sys_zero, "ownership is not modelled"),
    def(libc::SYS_fchown, sys_zero, "ownership is not modelled"),
    def(libc::SYS_lchown, sys_zero, "ownership is not modelled"),
    def(libc::SYS_fchownat, sys_zero, "ownership is not modelled"),
    def(libc::SYS_utimensat, sys_zero, "file times are synthetic"),
];

// ----- changing the tree (in the overlay only)

/// Refuses changes under /proc, /sys and /dev, but for `/dev/shm`, where
/// POSIX shared memory and semaphores live.
fn check_mutable(path: &str) -> Result<(), i32> {
    if is_virtual_tree(path) || (path.starts_with("/dev/") && !path.starts_with("/dev/shm/")) {
        return Err(libc::EACCES);
    }
    Ok(())
}

fn mkdir(k: &mut Kernel, p: &str, mode: u64) -> Result<i64, i32> {
    check_mutable(p)?;
    if k.vfs.resolve(p, false).exists() {
        return Err(libc::EEXIST);
    }
    if !k.vfs.resolve(&parent_of(p), true).is_dir() {
        return Err(libc::ENOENT);
    }
    let mode = mode as u32 & 0o7777 & !k.vfs.umask;
    k.vfs.put_dir(p, mode);
    Ok(0)
}

fn sys_mkdir(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    ret(path_at(k, AT_FDCWD, a[0]).and_then(|p| mkdir(k, &p, a[1])))
}

fn sys_mkdirat(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    ret(path_at(k, a[0] as i32, a[1]).and_then(|p| mkdir(k, &p, a[2])))
}

fn remove(k: &mut Kernel, p: &str, dir: bool) -> Result<i64, i32> {
    check_mutable(p)?;
    let r = k.vfs.resolve(p, false);
    match (r.exists(), r.is_dir(), dir) {
        (false, _, _) => Err(libc::ENOENT),
        (true, true, false) => Err(libc::EISDIR),
        (true, false, true) => Err(libc::ENOTDIR),
        (true, true, true) if !k.vfs.list(p).is_empty() => Err(libc::ENOTEMPTY),
        _ => {
            // A file still open somewhere lives on, nameless, for the
            // descriptors that have it (tac writes to a temporary file it
            // has unlinked): its data moves to a path no guest path can be.
            let hidden = format!("\0unlinked/{}", k.vfs.overlay_paths());
            if !dir && k.retarget_descriptions(p, &hidden) {
                k.vfs.rename(p, &hidden);
            }
            k.vfs.remove(p);
            Ok(0)
        }
    }
}

fn sys_rmdir(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    ret(path_at(k, AT_FDCWD, a[0]).and_then(|p| remove(k, &p, true)))
}

fn sys_unlink(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    ret(path_at(k, AT_FDCWD, a[0]).and_then(|p| remove(k, &p, false)))
}

fn sys_unlinkat(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let dir = a[2] & AT_REMOVEDIR != 0;
    ret(path_at(k, a[0] as i32, a[1]).and_then(|p| remove(k, &p, dir)))
}

/// Copies a host file into the overlay so it can be changed.
fn copy_up(k: &mut Kernel, p: &str) -> Result<(), i32> {
    match k.vfs.resolve(p, false) {
        Resolved::HostFile { mode, .. } => {
            let data = k.vfs.host_contents(p, false).ok_or(libc::EIO)?;
            k.vfs.put_file(p, &data, mode)
        }
        Resolved::Symlink { target } => {
            k.vfs.put_symlink(p, &target);
            Ok(())
        }
        Resolved::HostDir { .. } => Err(libc::EXDEV),
        Resolved::Missing => Err(k.vfs.absent_errno(p)),
        _ => Ok(()),
    }
}

fn rename(k: &mut Kernel, from: &str, to: &str, flags: u64) -> Result<i64, i32> {
    check_mutable(from)?;
    check_mutable(to)?;
    const RENAME_NOREPLACE: u64 = 1;
    if flags & !RENAME_NOREPLACE != 0 {
        return Err(libc::EINVAL);
    }
    let src = k.vfs.resolve(from, false);
    if !src.exists() {
        return Err(libc::ENOENT);
    }
    let dst = k.vfs.resolve(to, false);
    if dst.exists() && flags & RENAME_NOREPLACE != 0 {
        return Err(libc::EEXIST);
    }
    if dst.is_dir() && !src.is_dir() {
        return Err(libc::EISDIR);
    }
    if !k.vfs.resolve(&parent_of(to), true).is_dir() {
        return Err(libc::ENOENT);
    }
    if from == to {
        return Ok(0);
    }
    copy_up(k, from)?;
    k.vfs.rename(from, to);
    k.retarget_descriptions(from, to);
    Ok(0)
}

fn sys_rename(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let r = path_at(k, AT_FDCWD, a[0]).and_then(|f| Ok((f, path_at(k, AT_FDCWD, a[1])?)));
    ret(r.and_then(|(f, t)| rename(k, &f, &t, 0)))
}

fn sys_renameat(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let r = path_at(k, a[0] as i32, a[1]).and_then(|f| Ok((f, path_at(k, a[2] as i32, a[3])?)));
    ret(r.and_then(|(f, t)| rename(k, &f, &t, 0)))
}

fn sys_renameat2(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    if a[4] & !1 != 0 {
        return SysResult::Unsupported(format!("renameat2 flags {:#x}", a[4]));
    }
    let r = path_at(k, a[0] as i32, a[1]).and_then(|f| Ok((f, path_at(k, a[2] as i32, a[3])?)));
    ret(r.and_then(|(f, t)| rename(k, &f, &t, a[4])))
}

/// A hard link: `to` names the file `from` names. A host file is copied
/// up first, so that both names lead to the one copy the guest changes.
fn link(k: &mut Kernel, from: &str, to: &str) -> Result<i64, i32> {
    check_mutable(to)?;
    if k.vfs.resolve(to, false).exists() {
        return Err(libc::EEXIST);
    }
    if !k.vfs.resolve(&parent_of(to), true).is_dir() {
        return Err(k.vfs.absent_errno(to));
    }
    // link(2) does not follow a final symlink: it links the link.
    let from = match k.vfs.resolve(from, false) {
        Resolved::Missing => return Err(k.vfs.absent_errno(from)),
        Resolved::HostDir { .. } | Resolved::OverlayDir { .. } => return Err(libc::EPERM),
        Resolved::Symlink { target } => {
            k.vfs.put_symlink(to, &target);
            return Ok(0);
        }
        Resolved::Socket { .. } => return Err(libc::EPERM),
        Resolved::HostFile { .. } => {
            check_mutable(from)?;
            copy_up(k, from)?;
            from
        }
        Resolved::OverlayFile { .. } => from,
    };
    k.vfs.link_file(from, to);
    Ok(0)
}

fn sys_link(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let r = path_at(k, AT_FDCWD, a[0]).and_then(|f| Ok((f, path_at(k, AT_FDCWD, a[1])?)));
    ret(r.and_then(|(f, t)| link(k, &f, &t)))
}

fn sys_linkat(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    const AT_SYMLINK_FOLLOW: u64 = 0x400;
    if a[4] & AT_EMPTY_PATH != 0 {
        return SysResult::Unsupported("linkat with AT_EMPTY_PATH".into());
    }
    if a[4] & !AT_SYMLINK_FOLLOW != 0 {
        return err(libc::EINVAL);
    }
    let r = path_at(k, a[0] as i32, a[1]).and_then(|f| Ok((f, path_at(k, a[2] as i32, a[3])?)));
    ret(r.and_then(|(f, t)| {
        let f = match a[4] & AT_SYMLINK_FOLLOW {
            0 => f,
            _ => k.vfs.final_path(&f),
        };
        link(k, &f, &t)
    }))
}

fn symlink(k: &mut Kernel, target_ptr: u64, dirfd: i32, ptr: u64) -> Result<i64, i32> {
    let target = k.read_cstr(target_ptr).map_err(|_| libc::EFAULT)?;
    let p = path_at(k, dirfd, ptr)?;
    check_mutable(&p)?;
    if k.vfs.resolve(&p, false).exists() {
        return Err(libc::EEXIST);
    }
    k.vfs.put_symlink(&p, &target);
    Ok(0)
}

fn sys_symlink(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    ret(symlink(k, a[0], AT_FDCWD, a[1]))
}

fn sys_symlinkat(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    ret(symlink(k, a[0], a[1] as i32, a[2]))
}

fn set_len(k: &mut Kernel, p: &str, len: u64) -> Result<i64, i32> {
    if (len as i64) < 0 {
        return Err(libc::EINVAL);
    }
    k.change_file(p, |d, space| d.set_len(len, space))
        .ok_or(libc::EINVAL)??;
    Ok(0)
}

fn sys_ftruncate(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let Some(f) = k.files().get(a[0] as i32).cloned() else {
        return err(libc::EBADF);
    };
    if !f.writable() || !matches!(f.kind, FileKind::Overlay) {
        return err(libc::EINVAL);
    }
    ret(set_len(k, &f.path, a[1]))
}

fn sys_truncate(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let r = path_at(k, AT_FDCWD, a[0]).and_then(|p| {
        check_mutable(&p)?;
        copy_up(k, &p)?;
        set_len(k, &p, a[1])
    });
    ret(r)
}

fn sys_fallocate(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let Some(f) = k.files().get(a[0] as i32).cloned() else {
        return err(libc::EBADF);
    };
    if a[1] != 0 {
        return SysResult::Unsupported(format!("fallocate mode {:#x}", a[1]));
    }
    if !f.writable() || !matches!(f.kind, FileKind::Overlay) {
        return err(libc::EBADF);
    }
    let want = a[2].saturating_add(a[3]);
    let cur = k.vfs.overlay_len(&f.path).unwrap_or(0);
    if want > cur {
        return ret(set_len(k, &f.path, want));
    }
    SysResult::Ret(0)
}

fn chmod(k: &mut Kernel, p: &str, mode: u64) -> Result<i64, i32> {
    check_mutable(p)?;
    let r = k.vfs.resolve(p, true);
    match r {
        Resolved::Missing => return Err(k.vfs.absent_errno(p)),
        Resolved::HostDir { .. } | Resolved::OverlayDir { .. } => {
            k.vfs.put_dir(p, mode as u32 & 0o7777);
            return Ok(0);
        }
        Resolved::Socket { id, .. } => {
            k.vfs.put_socket(p, id, mode as u32 & 0o7777);
            return Ok(0);
        }
        _ => copy_up(k, p)?,
    }
    k.vfs.set_mode(p, mode as u32 & 0o7777);
    Ok(0)
}

fn sys_chmod(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    ret(path_at(k, AT_FDCWD, a[0]).and_then(|p| chmod(k, &p, a[1])))
}

fn sys_fchmod(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    match k.files().get(a[0] as i32).map(|f| f.path.clone()) {
        Some(p) => ret(chmod(k, &p, a[1])),
        None => err(libc::EBADF),
    }
}

fn sys_fchmodat(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    ret(path_at(k, a[0] as i32, a[1]).and_then(|p| chmod(k, &p, a[2])))
}
