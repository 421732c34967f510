//! What the guest learns about files without opening them: metadata
//! (synthesized, the same on every machine), access checks, directory
//! listings, symbolic links, the working directory, extended attributes.

use super::call::{AT_EMPTY_PATH, AT_FDCWD, AT_SYMLINK_NOFOLLOW, path_at, sys_no_xattr, sys_zero};
use super::call::{SyscallDef, def};
use super::file::meta::{Meta, S_IFDIR, meta_of_fd, meta_of_path, times_and_owner};
use super::files::{FileKind, OpenFile};
use super::synth::{exe_link, is_virtual_tree, proc_path};
use super::vfs::{NodeKind, Resolved, inode_of};
use super::{FpuAccess, Kernel, SysResult, err};

pub const CALLS: &[SyscallDef] = &[
    def(
        libc::SYS_fstat,
        sys_fstat,
        "the host's metadata for host files (recorded); root's and the boot time for the overlay's",
    ),
    def(libc::SYS_stat, sys_stat, ""),
    def(libc::SYS_lstat, sys_lstat, ""),
    def(libc::SYS_newfstatat, sys_newfstatat, ""),
    def(libc::SYS_statx, sys_statx, ""),
    def(libc::SYS_statfs, sys_statfs, ""),
    def(libc::SYS_fstatfs, sys_fstatfs, ""),
    def(libc::SYS_access, sys_access, ""),
    def(libc::SYS_faccessat, sys_faccessat, ""),
    def(libc::SYS_faccessat2, sys_faccessat2, ""),
    def(libc::SYS_getdents64, sys_getdents64, ""),
    def(libc::SYS_readlink, sys_readlink, ""),
    def(libc::SYS_readlinkat, sys_readlinkat, ""),
    def(libc::SYS_getcwd, sys_getcwd, ""),
    def(libc::SYS_chdir, sys_chdir, ""),
    def(libc::SYS_fchdir, sys_fchdir, ""),
    def(
        libc::SYS_getxattr,
        sys_no_xattr,
        "no file has extended attributes",
    ),
    def(
        libc::SYS_lgetxattr,
        sys_no_xattr,
        "no file has extended attributes",
    ),
    def(
        libc::SYS_fgetxattr,
        sys_no_xattr,
        "no file has extended attributes",
    ),
    def(
        libc::SYS_listxattr,
        sys_zero,
        "no file has extended attributes",
    ),
    def(
        libc::SYS_llistxattr,
        sys_zero,
        "no file has extended attributes",
    ),
    def(
        libc::SYS_flistxattr,
        sys_zero,
        "no file has extended attributes",
    ),
];

fn write_stat(k: &mut Kernel, buf: u64, m: &Meta) -> SysResult {
    let mut b = [0u8; 144];
    let put =
        |b: &mut [u8; 144], off: usize, v: u64| b[off..off + 8].copy_from_slice(&v.to_le_bytes());
    put(&mut b, 0, 0x801); // st_dev
    put(&mut b, 8, m.ino);
    put(&mut b, 16, m.nlink);
    b[24..28].copy_from_slice(&m.mode.to_le_bytes());
    put(&mut b, 40, m.rdev);
    put(&mut b, 48, m.size);
    put(&mut b, 56, 4096);
    let (uid, gid, blocks, secs, nsec) = times_and_owner(k, m);
    b[28..32].copy_from_slice(&uid.to_le_bytes());
    b[32..36].copy_from_slice(&gid.to_le_bytes());
    put(&mut b, 64, blocks);
    for off in [72, 88, 104] {
        put(&mut b, off, secs as u64);
        put(&mut b, off + 8, u64::from(nsec));
    }
    match k.write(buf, &b) {
        Ok(()) => SysResult::Ret(0),
        Err(_) => err(libc::EFAULT),
    }
}

fn write_statx(k: &mut Kernel, buf: u64, m: &Meta) -> SysResult {
    let mut b = [0u8; 256];
    b[0..4].copy_from_slice(&0x7ffu32.to_le_bytes()); // STATX_BASIC_STATS
    b[4..8].copy_from_slice(&4096u32.to_le_bytes());
    b[16..20].copy_from_slice(&(m.nlink as u32).to_le_bytes());
    b[28..30].copy_from_slice(&(m.mode as u16).to_le_bytes());
    b[32..40].copy_from_slice(&m.ino.to_le_bytes());
    b[40..48].copy_from_slice(&m.size.to_le_bytes());
    let (uid, gid, blocks, secs, nsec) = times_and_owner(k, m);
    b[20..24].copy_from_slice(&uid.to_le_bytes());
    b[24..28].copy_from_slice(&gid.to_le_bytes());
    b[48..56].copy_from_slice(&blocks.to_le_bytes());
    for off in [64, 80, 96, 112] {
        b[off..off + 8].copy_from_slice(&secs.to_le_bytes());
        b[off + 8..off + 12].copy_from_slice(&nsec.to_le_bytes());
    }
    b[128..132].copy_from_slice(&((m.rdev >> 8) as u32).to_le_bytes());
    b[132..136].copy_from_slice(&((m.rdev & 0xff) as u32).to_le_bytes());
    b[136..140].copy_from_slice(&8u32.to_le_bytes());
    b[140..144].copy_from_slice(&1u32.to_le_bytes());
    match k.write(buf, &b) {
        Ok(()) => SysResult::Ret(0),
        Err(_) => err(libc::EFAULT),
    }
}

fn sys_fstat(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    match meta_of_fd(k, a[0] as i32) {
        Ok(m) => write_stat(k, a[1], &m),
        Err(e) => err(e),
    }
}

/// The file a `*at` call names, and what it is: the path at `ptr` from
/// `dirfd`, or, with `AT_EMPTY_PATH` and an empty path, the file `dirfd`
/// is open on (the working directory for `AT_FDCWD`). `newfstatat`,
/// `statx` and `faccessat2` resolve it alike, as Linux does.
fn meta_at(k: &mut Kernel, dirfd: i32, ptr: u64, flags: u64) -> Result<(String, Meta), i32> {
    if flags & AT_EMPTY_PATH != 0 && k.read_cstr(ptr).is_ok_and(|p| p.is_empty()) {
        if dirfd == AT_FDCWD {
            let cwd = k.cwd().to_string();
            return meta_of_path(k, &cwd, true).map(|m| (cwd, m));
        }
        let path = k
            .files()
            .get(dirfd)
            .map(|f| f.path.clone())
            .unwrap_or_default();
        return meta_of_fd(k, dirfd).map(|m| (path, m));
    }
    let p = path_at(k, dirfd, ptr)?;
    let m = meta_of_path(k, &p, flags & AT_SYMLINK_NOFOLLOW == 0)?;
    Ok((p, m))
}

fn stat_path(k: &mut Kernel, dirfd: i32, ptr: u64, buf: u64, flags: u64) -> SysResult {
    match meta_at(k, dirfd, ptr, flags) {
        Ok((_, m)) => write_stat(k, buf, &m),
        Err(e) => err(e),
    }
}

fn sys_stat(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    stat_path(k, AT_FDCWD, a[0], a[1], 0)
}

fn sys_lstat(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    stat_path(k, AT_FDCWD, a[0], a[1], AT_SYMLINK_NOFOLLOW)
}

fn sys_newfstatat(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    stat_path(k, a[0] as i32, a[1], a[2], a[3])
}

fn sys_statx(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let (dirfd, ptr, flags, buf) = (a[0] as i32, a[1], a[2], a[4]);
    match meta_at(k, dirfd, ptr, flags) {
        Ok((_, m)) => write_statx(k, buf, &m),
        Err(e) => err(e),
    }
}

fn write_statfs(k: &mut Kernel, buf: u64) -> SysResult {
    let mut b = [0u8; 120];
    let put =
        |b: &mut [u8; 120], off: usize, v: u64| b[off..off + 8].copy_from_slice(&v.to_le_bytes());
    put(&mut b, 0, 0xef53); // ext4
    put(&mut b, 8, 4096);
    put(&mut b, 16, 1 << 20);
    put(&mut b, 24, 1 << 19);
    put(&mut b, 32, 1 << 19);
    put(&mut b, 40, 1 << 20);
    put(&mut b, 48, 1 << 19);
    put(&mut b, 64, 255);
    put(&mut b, 72, 4096);
    match k.write(buf, &b) {
        Ok(()) => SysResult::Ret(0),
        Err(_) => err(libc::EFAULT),
    }
}

fn sys_statfs(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    match path_at(k, AT_FDCWD, a[0]).and_then(|p| meta_of_path(k, &p, true)) {
        Ok(_) => write_statfs(k, a[1]),
        Err(e) => err(e),
    }
}

fn sys_fstatfs(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    if k.files().get(a[0] as i32).is_none() {
        return err(libc::EBADF);
    }
    write_statfs(k, a[1])
}

fn access(k: &mut Kernel, dirfd: i32, ptr: u64, mode: u64, flags: u64) -> SysResult {
    const AT_EACCESS: u64 = 0x200;
    if mode & !0o7 != 0 || flags & !(AT_EACCESS | AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) != 0 {
        return err(libc::EINVAL);
    }
    match meta_at(k, dirfd, ptr, flags) {
        // Root may read and write anything; execute needs an x bit.
        Ok((_, m)) if mode & 1 != 0 && m.mode & 0o111 == 0 && m.mode & S_IFDIR == 0 => {
            err(libc::EACCES)
        }
        Ok((p, m)) if mode & 2 != 0 && is_virtual_tree(&p) && m.mode & S_IFDIR == 0 => {
            err(libc::EACCES)
        }
        Ok(_) => SysResult::Ret(0),
        Err(e) => err(e),
    }
}

fn sys_access(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    access(k, AT_FDCWD, a[0], a[1], 0)
}

fn sys_faccessat(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    access(k, a[0] as i32, a[1], a[2], 0)
}

fn sys_faccessat2(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    access(k, a[0] as i32, a[1], a[2], a[3])
}

fn sys_getdents64(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let (fd, buf, count) = (a[0] as i32, a[1], a[2] as usize);
    let Some(f) = k.files().get(fd).cloned() else {
        return err(libc::EBADF);
    };
    let FileKind::Dir(entries) = &f.kind else {
        return err(libc::ENOTDIR);
    };
    let dot = [
        (".".to_string(), NodeKind::Dir),
        ("..".to_string(), NodeKind::Dir),
    ];
    let all: Vec<&(String, NodeKind)> = dot.iter().chain(entries.iter()).collect();
    let mut out = Vec::new();
    let mut idx = k.offset_of(&f) as usize;
    while idx < all.len() {
        let (name, kind) = all[idx];
        let reclen = (19 + name.len() + 1).div_ceil(8) * 8;
        if out.len() + reclen > count {
            break;
        }
        let mut rec = vec![0u8; reclen];
        let full = format!("{}/{}", f.path.trim_end_matches('/'), name);
        rec[0..8].copy_from_slice(&inode_of(&full).to_le_bytes());
        rec[8..16].copy_from_slice(&((idx + 1) as u64).to_le_bytes());
        rec[16..18].copy_from_slice(&(reclen as u16).to_le_bytes());
        rec[18] = match kind {
            NodeKind::Dir => 4,
            NodeKind::File => 8,
            NodeKind::Symlink => 10,
            NodeKind::Socket => 12,
        };
        rec[19..19 + name.len()].copy_from_slice(name.as_bytes());
        out.extend_from_slice(&rec);
        idx += 1;
    }
    if out.is_empty() && idx < all.len() {
        return err(libc::EINVAL);
    }
    if k.write(buf, &out).is_err() {
        return err(libc::EFAULT);
    }
    k.set_offset(fd, idx as u64);
    SysResult::Ret(out.len() as i64)
}

/// What `/proc/PID/fd/N` links to, as Linux names it: a file by its path,
/// the rest by kind and number.
fn descriptor_text(f: &OpenFile, n: i32) -> String {
    match f.kind {
        FileKind::Stdin | FileKind::Output(_) => format!("pipe:[{}]", 1000 + n),
        FileKind::Pipe { id, .. } => format!("pipe:[{}]", 3000 + id),
        FileKind::HostStream(_) => "/dev/pts/0".into(),
        FileKind::Socket { .. } | FileKind::BoundSocket { .. } | FileKind::SocketPair { .. } => {
            format!("socket:[{}]", 2000 + n)
        }
        FileKind::EventFd { .. } => "anon_inode:[eventfd]".into(),
        FileKind::Epoll { .. } => "anon_inode:[eventpoll]".into(),
        FileKind::TimerFd { .. } => "anon_inode:[timerfd]".into(),
        FileKind::SignalFd { .. } => "anon_inode:[signalfd]".into(),
        FileKind::PidFd { .. } => "anon_inode:[pidfd]".into(),
        _ => f.path.clone(),
    }
}

fn readlink(k: &mut Kernel, dirfd: i32, ptr: u64, buf: u64, size: u64) -> SysResult {
    let p = match path_at(k, dirfd, ptr) {
        Ok(p) => p,
        Err(e) => return err(e),
    };
    if (size as i64) <= 0 {
        return err(libc::EINVAL);
    }
    let proc = proc_path(k, &p);
    let target = if p == "/proc/self" {
        k.pid().to_string()
    } else if let Some(pp) = proc.filter(|pp| pp.rest == "/exe") {
        match exe_link(k, pp.pid) {
            Some(exe) => exe,
            None => return err(libc::ENOENT),
        }
    } else if let Some((pp, n)) =
        proc.and_then(|pp| Some((pp, pp.rest.strip_prefix("/fd/")?.parse::<i32>().ok()?)))
    {
        // Any process's descriptors: a visitor looks at the run's.
        let files = &k.processes()[&pp.pid].files;
        let Some(f) = files.get(n) else {
            return err(libc::ENOENT);
        };
        descriptor_text(f, n)
    } else {
        match k.vfs.resolve(&p, false) {
            Resolved::Symlink { target } => target,
            Resolved::Missing => return err(k.vfs.absent_errno(&p)),
            _ => return err(libc::EINVAL),
        }
    };
    let n = target.len().min(size as usize);
    match k.write(buf, &target.as_bytes()[..n]) {
        Ok(()) => SysResult::Ret(n as i64),
        Err(_) => err(libc::EFAULT),
    }
}

fn sys_readlink(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    readlink(k, AT_FDCWD, a[0], a[1], a[2])
}

fn sys_readlinkat(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    readlink(k, a[0] as i32, a[1], a[2], a[3])
}

fn sys_getcwd(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let mut cwd = k.cwd().to_string().into_bytes();
    cwd.push(0);
    if (a[1] as usize) < cwd.len() {
        return err(libc::ERANGE);
    }
    match k.write(a[0], &cwd) {
        Ok(()) => SysResult::Ret(cwd.len() as i64),
        Err(_) => err(libc::EFAULT),
    }
}

fn chdir_to(k: &mut Kernel, p: String) -> SysResult {
    match meta_of_path(k, &p, true) {
        Ok(m) if m.mode & S_IFDIR != 0 => {
            k.set_cwd(p);
            SysResult::Ret(0)
        }
        Ok(_) => err(libc::ENOTDIR),
        Err(e) => err(e),
    }
}

fn sys_chdir(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    match path_at(k, AT_FDCWD, a[0]) {
        Ok(p) => chdir_to(k, p),
        Err(e) => err(e),
    }
}

fn sys_fchdir(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    match k.files().get(a[0] as i32) {
        Some(f) => {
            let p = f.path.clone();
            chdir_to(k, p)
        }
        None => err(libc::EBADF),
    }
}
