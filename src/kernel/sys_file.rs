//! Files: the host filesystem read-only, the guest's writes in a private
//! overlay, standard streams captured, and `/proc`, `/sys` and `/dev`
//! synthesized from the monitor's own state.

use std::sync::Arc;

use super::files::{FileKind, OpenFile};
use super::table::{SyscallDef, def};
use super::thread::Wait;
use super::vfs::{NodeKind, Resolved, inode_of, parent_of};
use super::{FpuAccess, Kernel, SysResult, err};

pub const CALLS: &[SyscallDef] = &[
    def(libc::SYS_read, sys_read, ""),
    def(libc::SYS_write, sys_write, ""),
    def(libc::SYS_pread64, sys_pread64, ""),
    def(libc::SYS_pwrite64, sys_pwrite64, ""),
    def(libc::SYS_readv, sys_readv, ""),
    def(libc::SYS_writev, sys_writev, ""),
    def(libc::SYS_preadv, sys_preadv, ""),
    def(libc::SYS_pwritev, sys_pwritev, ""),
    def(libc::SYS_open, sys_open, ""),
    def(libc::SYS_openat, sys_openat, ""),
    def(libc::SYS_creat, sys_creat, ""),
    def(libc::SYS_close, sys_close, ""),
    def(libc::SYS_close_range, sys_close_range, ""),
    def(
        libc::SYS_lseek,
        sys_lseek,
        "SEEK_DATA/SEEK_HOLE treat files as having no holes",
    ),
    def(
        libc::SYS_fstat,
        sys_fstat,
        "metadata is synthesized: owner root, times at the epoch",
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
    def(libc::SYS_link, sys_link, "a hard link is a copy"),
    def(libc::SYS_linkat, sys_linkat, "a hard link is a copy"),
    def(libc::SYS_symlink, sys_symlink, ""),
    def(libc::SYS_symlinkat, sys_symlinkat, ""),
    def(libc::SYS_dup, sys_dup, ""),
    def(libc::SYS_dup2, sys_dup2, ""),
    def(libc::SYS_dup3, sys_dup3, ""),
    def(
        libc::SYS_fcntl,
        sys_fcntl,
        "record locks always succeed (one process)",
    ),
    def(libc::SYS_ioctl, sys_ioctl, "no file is a terminal"),
    def(libc::SYS_ftruncate, sys_ftruncate, ""),
    def(libc::SYS_truncate, sys_truncate, ""),
    def(libc::SYS_fsync, sys_zero, ""),
    def(libc::SYS_fdatasync, sys_zero, ""),
    def(libc::SYS_sync, sys_zero, ""),
    def(libc::SYS_syncfs, sys_zero, ""),
    def(libc::SYS_fadvise64, sys_zero, ""),
    def(
        libc::SYS_flock,
        sys_zero,
        "one process: locks always succeed",
    ),
    def(libc::SYS_fallocate, sys_fallocate, "mode 0 only"),
    def(libc::SYS_chmod, sys_chmod, ""),
    def(libc::SYS_fchmod, sys_fchmod, ""),
    def(libc::SYS_fchmodat, sys_fchmodat, ""),
    def(libc::SYS_chown, sys_zero, "ownership is not modelled"),
    def(libc::SYS_fchown, sys_zero, "ownership is not modelled"),
    def(libc::SYS_lchown, sys_zero, "ownership is not modelled"),
    def(libc::SYS_fchownat, sys_zero, "ownership is not modelled"),
    def(libc::SYS_utimensat, sys_zero, "file times are synthetic"),
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
    def(
        libc::SYS_poll,
        sys_poll,
        "only timers end a wait: there are no pipes or sockets",
    ),
    def(
        libc::SYS_ppoll,
        sys_ppoll,
        "as poll; the signal mask argument is ignored",
    ),
];

const AT_FDCWD: i32 = -100;
const AT_SYMLINK_NOFOLLOW: u64 = 0x100;
const AT_REMOVEDIR: u64 = 0x200;
const AT_EMPTY_PATH: u64 = 0x1000;
/// Largest single read or write (Linux's MAX_RW_COUNT is about 2 GiB; a
/// smaller cap keeps a hostile length from allocating the monitor's memory).
const MAX_IO: usize = 64 << 20;

fn sys_zero(_: &mut Kernel, _: &mut dyn FpuAccess, _: [u64; 6]) -> SysResult {
    SysResult::Ret(0)
}

fn sys_no_xattr(_: &mut Kernel, _: &mut dyn FpuAccess, _: [u64; 6]) -> SysResult {
    err(libc::ENODATA)
}

fn ret(r: Result<i64, i32>) -> SysResult {
    match r {
        Ok(v) => SysResult::Ret(v),
        Err(e) => err(e),
    }
}

// ----- paths

/// Reads a path argument and makes it absolute against `dirfd`.
fn path_at(k: &mut Kernel, dirfd: i32, ptr: u64) -> Result<String, i32> {
    let p = k.read_cstr(ptr).map_err(|_| libc::EFAULT)?;
    if p.is_empty() {
        return Err(libc::ENOENT);
    }
    if p.starts_with('/') || dirfd == AT_FDCWD {
        return Ok(k.vfs.normalize(None, &p));
    }
    let f = k.files.get(dirfd).ok_or(libc::EBADF)?;
    if !matches!(f.kind, FileKind::Dir(_) | FileKind::PathOnly) {
        return Err(libc::ENOTDIR);
    }
    let base = f.path.clone();
    Ok(k.vfs.normalize(Some(&base), &p))
}

/// `/proc/self` under any of its names.
fn proc_self(path: &str) -> Option<&str> {
    for prefix in ["/proc/self", "/proc/thread-self", "/proc/1"] {
        if let Some(rest) = path.strip_prefix(prefix) {
            if rest.is_empty() || rest.starts_with('/') {
                return Some(rest);
            }
        }
    }
    None
}

/// The contents of a file the monitor makes up, if `path` is one.
fn synthetic(k: &mut Kernel, path: &str) -> Option<Vec<u8>> {
    let cpus = k.config.cpus;
    let range = if cpus == 1 {
        "0\n".to_string()
    } else {
        format!("0-{}\n", cpus - 1)
    };
    if let Some(rest) = proc_self(path) {
        return match rest {
            "/maps" => Some(k.mm.maps_text().into_bytes()),
            "/cgroup" => Some(b"0::/\n".to_vec()),
            "/cmdline" => Some(
                k.config
                    .argv
                    .iter()
                    .flat_map(|a| format!("{a}\0").into_bytes())
                    .collect(),
            ),
            "/comm" => Some(format!("{}\n", k.cur().name).into_bytes()),
            "/environ" => Some(
                k.config
                    .env
                    .iter()
                    .flat_map(|a| format!("{a}\0").into_bytes())
                    .collect(),
            ),
            "/status" => Some(status_text(k).into_bytes()),
            "/stat" => {
                let (name, n) = (k.cur().name.clone(), k.live_threads());
                Some(
                    format!("1 ({name}) R 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 {n} 0 0 0 0\n")
                        .into_bytes(),
                )
            }
            _ => None,
        };
    }
    match path {
        "/sys/devices/system/cpu/online"
        | "/sys/devices/system/cpu/possible"
        | "/sys/devices/system/cpu/present" => Some(range.into_bytes()),
        "/proc/cpuinfo" => Some(cpuinfo(cpus).into_bytes()),
        "/proc/meminfo" => {
            let total = k.mem.size() >> 10;
            Some(format!("MemTotal:       {total} kB\nMemFree:        {total} kB\nMemAvailable:   {total} kB\n").into_bytes())
        }
        "/proc/sys/kernel/osrelease" => {
            Some(format!("{}\n", super::sys_info::RELEASE).into_bytes())
        }
        "/proc/stat" => {
            let mut s = String::from("cpu  0 0 0 0 0 0 0 0 0 0\n");
            for c in 0..cpus {
                s.push_str(&format!("cpu{c} 0 0 0 0 0 0 0 0 0 0\n"));
            }
            Some(s.into_bytes())
        }
        _ => None,
    }
}

fn status_text(k: &mut Kernel) -> String {
    let name = k.cur().name.clone();
    let n = k.live_threads();
    let cpus = k.config.cpus;
    format!(
        "Name:\t{name}\nState:\tR (running)\nTgid:\t1\nPid:\t1\nPPid:\t0\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nThreads:\t{n}\nCpus_allowed_list:\t0-{}\n",
        cpus.saturating_sub(1)
    )
}

fn cpuinfo(cpus: u32) -> String {
    let mut s = String::new();
    for c in 0..cpus {
        s.push_str(&format!(
            "processor\t: {c}\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\nmodel name\t: rewind-fuzz virtual CPU (x86-64-v3)\nstepping\t: 4\ncpu MHz\t\t: 1000.000\ncache size\t: 32768 KB\nphysical id\t: 0\nsiblings\t: {cpus}\ncore id\t\t: {c}\ncpu cores\t: {cpus}\napicid\t\t: {c}\nfpu\t\t: yes\nflags\t\t: fpu vme de pse tsc msr pae mce cx8 sep pge mca cmov pat clflush mmx fxsr sse sse2 syscall nx lm pni pclmulqdq ssse3 fma cx16 sse4_1 sse4_2 movbe popcnt aes xsave avx f16c lahf_lm abm bmi1 avx2 bmi2 erms adx\nbogomips\t: 2000.00\nclflush size\t: 64\naddress sizes\t: 48 bits physical, 48 bits virtual\n\n"
        ));
    }
    s
}

/// The special files of `/dev`.
fn device(path: &str) -> Option<FileKind> {
    Some(match path {
        "/dev/null" => FileKind::Null,
        "/dev/zero" => FileKind::Zero,
        "/dev/urandom" | "/dev/random" => FileKind::Random,
        _ => return None,
    })
}

/// Whether a path lies in the monitor's own trees (never the host's).
fn is_virtual_tree(path: &str) -> bool {
    path == "/proc" || path.starts_with("/proc/") || path == "/sys" || path.starts_with("/sys/")
}

/// File metadata as the guest sees it.
struct Meta {
    mode: u32,
    size: u64,
    ino: u64,
    rdev: u64,
    nlink: u64,
}

const S_IFREG: u32 = 0o100000;
const S_IFDIR: u32 = 0o040000;
const S_IFLNK: u32 = 0o120000;
const S_IFCHR: u32 = 0o020000;

fn meta_of_path(k: &mut Kernel, path: &str, follow: bool) -> Result<Meta, i32> {
    let ino = inode_of(path);
    if let Some(kind) = device(path) {
        let rdev = match kind {
            FileKind::Null => 0x103,
            FileKind::Zero => 0x105,
            _ => 0x109,
        };
        return Ok(Meta {
            mode: S_IFCHR | 0o666,
            size: 0,
            ino,
            rdev,
            nlink: 1,
        });
    }
    if is_virtual_tree(path) {
        if synthetic(k, path).is_some() {
            return Ok(Meta {
                mode: S_IFREG | 0o444,
                size: 0,
                ino,
                rdev: 0,
                nlink: 1,
            });
        }
        let dirs = [
            "/proc",
            "/proc/self",
            "/sys",
            "/sys/devices",
            "/sys/devices/system",
            "/sys/devices/system/cpu",
        ];
        if dirs.contains(&path) || proc_self(path) == Some("") {
            return Ok(Meta {
                mode: S_IFDIR | 0o555,
                size: 0,
                ino,
                rdev: 0,
                nlink: 2,
            });
        }
        if proc_self(path).is_some_and(|r| r == "/exe" || r.starts_with("/fd/")) && !follow {
            return Ok(Meta {
                mode: S_IFLNK | 0o777,
                size: 0,
                ino,
                rdev: 0,
                nlink: 1,
            });
        }
        if proc_self(path) == Some("/exe") {
            let exe = k.config.exe.clone();
            return meta_of_path(k, &exe, true);
        }
        return Err(libc::ENOENT);
    }
    match k.vfs.resolve(path, follow) {
        Resolved::HostFile { data, mode } => Ok(Meta {
            mode: S_IFREG | mode,
            size: data.len() as u64,
            ino,
            rdev: 0,
            nlink: 1,
        }),
        Resolved::OverlayFile { mode, size } => Ok(Meta {
            mode: S_IFREG | mode,
            size,
            ino,
            rdev: 0,
            nlink: 1,
        }),
        Resolved::HostDir { mode } | Resolved::OverlayDir { mode } => Ok(Meta {
            mode: S_IFDIR | mode,
            size: 4096,
            ino,
            rdev: 0,
            nlink: 2,
        }),
        Resolved::Symlink { target } => Ok(Meta {
            mode: S_IFLNK | 0o777,
            size: target.len() as u64,
            ino,
            rdev: 0,
            nlink: 1,
        }),
        Resolved::Missing => Err(libc::ENOENT),
    }
}

fn meta_of_fd(k: &mut Kernel, fd: i32) -> Result<Meta, i32> {
    let f = k.files.get(fd).ok_or(libc::EBADF)?.clone();
    let ino = inode_of(&f.path);
    match &f.kind {
        FileKind::Host(d) => Ok(Meta {
            mode: S_IFREG | 0o644,
            size: d.len() as u64,
            ino,
            rdev: 0,
            nlink: 1,
        })
        .map(|m| match k.vfs.resolve(&f.path, true) {
            Resolved::HostFile { mode, .. } => Meta {
                mode: S_IFREG | mode,
                ..m
            },
            _ => m,
        }),
        FileKind::Overlay => meta_of_path(k, &f.path, true),
        FileKind::Synthetic(_) => Ok(Meta {
            mode: S_IFREG | 0o444,
            size: 0,
            ino,
            rdev: 0,
            nlink: 1,
        }),
        FileKind::Dir(_) | FileKind::PathOnly => meta_of_path(k, &f.path, true),
        FileKind::Stdin | FileKind::Output(_) => {
            // A pipe, as when a test runs under a harness that captures output.
            Ok(Meta {
                mode: 0o010000 | 0o600,
                size: 0,
                ino: 1000 + fd as u64,
                rdev: 0,
                nlink: 1,
            })
        }
        FileKind::Null | FileKind::Zero | FileKind::Random => meta_of_path(k, &f.path, true),
    }
}

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
    put(&mut b, 64, m.size.div_ceil(512));
    let epoch = k.config.epoch;
    for off in [72, 88, 104] {
        put(&mut b, off, epoch);
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
    b[48..56].copy_from_slice(&m.size.div_ceil(512).to_le_bytes());
    let epoch = k.config.epoch;
    for off in [64, 80, 96, 112] {
        b[off..off + 8].copy_from_slice(&epoch.to_le_bytes());
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

fn stat_path(k: &mut Kernel, dirfd: i32, ptr: u64, buf: u64, flags: u64) -> SysResult {
    let m = if flags & AT_EMPTY_PATH != 0 && k.read_cstr(ptr).is_ok_and(|p| p.is_empty()) {
        if dirfd == AT_FDCWD {
            let cwd = k.vfs.cwd.clone();
            meta_of_path(k, &cwd, true)
        } else {
            meta_of_fd(k, dirfd)
        }
    } else {
        match path_at(k, dirfd, ptr) {
            Ok(p) => meta_of_path(k, &p, flags & AT_SYMLINK_NOFOLLOW == 0),
            Err(e) => Err(e),
        }
    };
    match m {
        Ok(m) => write_stat(k, buf, &m),
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
    let m = if flags & AT_EMPTY_PATH != 0 && k.read_cstr(ptr).is_ok_and(|p| p.is_empty()) {
        meta_of_fd(k, dirfd)
    } else {
        match path_at(k, dirfd, ptr) {
            Ok(p) => meta_of_path(k, &p, flags & AT_SYMLINK_NOFOLLOW == 0),
            Err(e) => Err(e),
        }
    };
    match m {
        Ok(m) => write_statx(k, buf, &m),
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
    if k.files.get(a[0] as i32).is_none() {
        return err(libc::EBADF);
    }
    write_statfs(k, a[1])
}

fn access(k: &mut Kernel, dirfd: i32, ptr: u64, mode: u64, flags: u64) -> SysResult {
    let p = match path_at(k, dirfd, ptr) {
        Ok(p) => p,
        Err(e) => return err(e),
    };
    match meta_of_path(k, &p, flags & AT_SYMLINK_NOFOLLOW == 0) {
        // Root may read and write anything; execute needs an x bit.
        Ok(m) if mode & 1 != 0 && m.mode & 0o111 == 0 && m.mode & S_IFDIR == 0 => err(libc::EACCES),
        Ok(m) if mode & 2 != 0 && is_virtual_tree(&p) && m.mode & S_IFDIR == 0 => err(libc::EACCES),
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

// ----- open and close

fn open(k: &mut Kernel, path: &str, flags: i32, mode: u32) -> Result<i64, i32> {
    let cloexec = flags & libc::O_CLOEXEC != 0;
    let acc = flags & libc::O_ACCMODE;
    let writes = acc != libc::O_RDONLY || flags & libc::O_TRUNC != 0;
    let file = |kind: FileKind| OpenFile {
        kind,
        path: path.to_string(),
        offset: 0,
        flags: flags
            & !(libc::O_CLOEXEC | libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC | libc::O_NOCTTY),
    };
    if flags & libc::O_TMPFILE == libc::O_TMPFILE {
        return Err(libc::EOPNOTSUPP);
    }
    if flags & libc::O_PATH != 0 {
        meta_of_path(k, path, flags & libc::O_NOFOLLOW == 0)?;
        let f = file(FileKind::PathOnly);
        return k.files.install(f, cloexec, 0).map(i64::from);
    }
    if let Some(kind) = device(path) {
        return k.files.install(file(kind), cloexec, 0).map(i64::from);
    }
    if let Some(rest) = proc_self(path).and_then(|r| r.strip_prefix("/fd/")) {
        let n: i32 = rest.parse().map_err(|_| libc::ENOENT)?;
        return k
            .files
            .dup(n, 0, cloexec)
            .map(i64::from)
            .map_err(|_| libc::ENOENT);
    }
    if is_virtual_tree(path) {
        let m = meta_of_path(k, path, true)?;
        if m.mode & S_IFDIR != 0 {
            let entries = Arc::new(Vec::new());
            return k
                .files
                .install(file(FileKind::Dir(entries)), cloexec, 0)
                .map(i64::from);
        }
        if writes {
            return Err(libc::EACCES);
        }
        if proc_self(path) == Some("/exe") {
            let exe = k.config.exe.clone();
            return open(k, &exe, flags, mode);
        }
        let data = synthetic(k, path).ok_or(libc::ENOENT)?;
        return k
            .files
            .install(file(FileKind::Synthetic(Arc::new(data))), cloexec, 0)
            .map(i64::from);
    }
    let r = k.vfs.resolve(path, flags & libc::O_NOFOLLOW == 0);
    if r.exists() && flags & libc::O_CREAT != 0 && flags & libc::O_EXCL != 0 {
        return Err(libc::EEXIST);
    }
    if flags & libc::O_DIRECTORY != 0 && r.exists() && !r.is_dir() {
        return Err(libc::ENOTDIR);
    }
    let kind = match r {
        Resolved::Missing => {
            if flags & libc::O_CREAT == 0 {
                return Err(libc::ENOENT);
            }
            let parent = parent_of(path);
            if !k.vfs.resolve(&parent, true).is_dir() {
                return Err(libc::ENOENT);
            }
            let mode = mode & 0o7777 & !k.vfs.umask;
            k.vfs.put_file(path, Vec::new(), mode);
            FileKind::Overlay
        }
        Resolved::HostDir { .. } | Resolved::OverlayDir { .. } => {
            if acc != libc::O_RDONLY {
                return Err(libc::EISDIR);
            }
            FileKind::Dir(Arc::new(k.vfs.list(path)))
        }
        Resolved::Symlink { .. } => return Err(libc::ELOOP),
        Resolved::HostFile { data, mode } => {
            if writes {
                // Copy up: the host's file stays untouched.
                let bytes = if flags & libc::O_TRUNC != 0 {
                    Vec::new()
                } else {
                    data.to_vec()
                };
                k.vfs.put_file(path, bytes, mode);
                FileKind::Overlay
            } else {
                FileKind::Host(data)
            }
        }
        Resolved::OverlayFile { .. } => {
            if flags & libc::O_TRUNC != 0 && acc != libc::O_RDONLY {
                if let Some(d) = k.vfs.overlay_data_mut(path) {
                    d.clear();
                }
            }
            FileKind::Overlay
        }
    };
    k.files.install(file(kind), cloexec, 0).map(i64::from)
}

fn openat(k: &mut Kernel, dirfd: i32, ptr: u64, flags: u64, mode: u64) -> SysResult {
    match path_at(k, dirfd, ptr) {
        Ok(p) => ret(open(k, &p, flags as i32, mode as u32)),
        Err(e) => err(e),
    }
}

fn sys_open(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    openat(k, AT_FDCWD, a[0], a[1], a[2])
}

fn sys_openat(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    openat(k, a[0] as i32, a[1], a[2], a[3])
}

fn sys_creat(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let flags = (libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC) as u64;
    openat(k, AT_FDCWD, a[0], flags, a[1])
}

fn sys_close(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    if k.files.close(a[0] as i32) {
        SysResult::Ret(0)
    } else {
        err(libc::EBADF)
    }
}

fn sys_close_range(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let (first, last, flags) = (a[0] as u32, a[1] as u32, a[2]);
    if first > last {
        return err(libc::EINVAL);
    }
    const CLOSE_RANGE_CLOEXEC: u64 = 4;
    let fds: Vec<i32> = k
        .files
        .list()
        .map(|(fd, _)| fd)
        .filter(|fd| (first..=last).contains(&(*fd as u32)))
        .collect();
    for fd in fds {
        if flags & CLOSE_RANGE_CLOEXEC != 0 {
            k.files.set_cloexec(fd, true);
        } else {
            k.files.close(fd);
        }
    }
    SysResult::Ret(0)
}

// ----- reading and writing

/// Reads up to `len` bytes from `fd` at `at` (or the file offset).
fn read_bytes(k: &mut Kernel, fd: i32, len: usize, at: Option<u64>) -> Result<Vec<u8>, i32> {
    let f = k.files.get(fd).ok_or(libc::EBADF)?;
    if !f.readable() {
        return Err(libc::EBADF);
    }
    let len = len.min(MAX_IO);
    let off = at.unwrap_or(f.offset);
    let from_slice = |d: &[u8]| -> Vec<u8> {
        let start = (off as usize).min(d.len());
        d[start..(start + len).min(d.len())].to_vec()
    };
    let out = match &f.kind {
        FileKind::Host(d) | FileKind::Synthetic(d) => from_slice(d),
        FileKind::Overlay => {
            let path = f.path.clone();
            from_slice(
                k.vfs
                    .overlay_data(&path)
                    .map(|v| v.as_slice())
                    .unwrap_or(&[]),
            )
        }
        FileKind::Dir(_) => return Err(libc::EISDIR),
        FileKind::Stdin | FileKind::Null => Vec::new(),
        FileKind::Zero => vec![0; len],
        FileKind::Random => {
            let mut v = vec![0; len];
            k.random_bytes(&mut v);
            v
        }
        FileKind::Output(_) | FileKind::PathOnly => return Err(libc::EBADF),
    };
    if at.is_none() {
        if let Some(f) = k.files.get_mut(fd) {
            f.offset = off + out.len() as u64;
        }
    }
    Ok(out)
}

/// Writes `data` to `fd` at `at` (or the file offset).
fn write_bytes(k: &mut Kernel, fd: i32, data: &[u8], at: Option<u64>) -> Result<usize, i32> {
    let f = k.files.get(fd).ok_or(libc::EBADF)?.clone();
    if !f.writable() {
        return Err(libc::EBADF);
    }
    match &f.kind {
        FileKind::Output(n) => {
            k.obs.output(*n, data);
            Ok(data.len())
        }
        FileKind::Null | FileKind::Zero | FileKind::Random => Ok(data.len()),
        FileKind::Overlay => {
            let buf = k.vfs.overlay_data_mut(&f.path).ok_or(libc::EIO)?;
            let off = match at {
                Some(o) => o,
                None if f.flags & libc::O_APPEND != 0 => buf.len() as u64,
                None => f.offset,
            } as usize;
            if off.saturating_add(data.len()) > (1 << 30) {
                return Err(libc::EFBIG);
            }
            if buf.len() < off + data.len() {
                buf.resize(off + data.len(), 0);
            }
            buf[off..off + data.len()].copy_from_slice(data);
            if at.is_none() {
                k.files.get_mut(fd).unwrap().offset = (off + data.len()) as u64;
            }
            Ok(data.len())
        }
        FileKind::Dir(_) => Err(libc::EISDIR),
        _ => Err(libc::EBADF),
    }
}

fn do_read(k: &mut Kernel, fd: u64, buf: u64, len: u64, at: Option<u64>) -> SysResult {
    match read_bytes(k, fd as i32, len as usize, at) {
        Ok(d) => match k.write(buf, &d) {
            Ok(()) => SysResult::Ret(d.len() as i64),
            Err(_) => err(libc::EFAULT),
        },
        Err(e) => err(e),
    }
}

fn do_write(k: &mut Kernel, fd: u64, buf: u64, len: u64, at: Option<u64>) -> SysResult {
    if k.files.get(fd as i32).is_none() {
        return err(libc::EBADF);
    }
    let mut data = vec![0u8; (len as usize).min(MAX_IO)];
    if k.read(buf, &mut data).is_err() {
        return err(libc::EFAULT);
    }
    ret(write_bytes(k, fd as i32, &data, at).map(|n| n as i64))
}

fn sys_read(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    do_read(k, a[0], a[1], a[2], None)
}

fn sys_write(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    do_write(k, a[0], a[1], a[2], None)
}

fn sys_pread64(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    if (a[3] as i64) < 0 {
        return err(libc::EINVAL);
    }
    do_read(k, a[0], a[1], a[2], Some(a[3]))
}

fn sys_pwrite64(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    if (a[3] as i64) < 0 {
        return err(libc::EINVAL);
    }
    do_write(k, a[0], a[1], a[2], Some(a[3]))
}

fn iovecs(k: &mut Kernel, ptr: u64, n: u64) -> Result<Vec<(u64, u64)>, i32> {
    if n > 1024 {
        return Err(libc::EINVAL);
    }
    (0..n)
        .map(|i| {
            let base = k.read_u64(ptr + i * 16).map_err(|_| libc::EFAULT)?;
            let len = k.read_u64(ptr + i * 16 + 8).map_err(|_| libc::EFAULT)?;
            Ok((base, len))
        })
        .collect()
}

fn readv(k: &mut Kernel, fd: u64, iov: u64, n: u64, mut at: Option<u64>) -> SysResult {
    let v = match iovecs(k, iov, n) {
        Ok(v) => v,
        Err(e) => return err(e),
    };
    let mut total = 0i64;
    for (base, len) in v {
        match do_read(k, fd, base, len, at) {
            SysResult::Ret(r) if r >= 0 => {
                total += r;
                at = at.map(|a| a + r as u64);
                if (r as u64) < len {
                    break;
                }
            }
            other if total == 0 => return other,
            _ => break,
        }
    }
    SysResult::Ret(total)
}

fn writev(k: &mut Kernel, fd: u64, iov: u64, n: u64, at: Option<u64>) -> SysResult {
    let v = match iovecs(k, iov, n) {
        Ok(v) => v,
        Err(e) => return err(e),
    };
    // Gather first so the write is one piece, as Linux makes it for files.
    let mut data = Vec::new();
    for (base, len) in v {
        let mut chunk = vec![0u8; (len as usize).min(MAX_IO)];
        if k.read(base, &mut chunk).is_err() {
            return err(libc::EFAULT);
        }
        data.extend_from_slice(&chunk);
        if data.len() > MAX_IO {
            return err(libc::EINVAL);
        }
    }
    ret(write_bytes(k, fd as i32, &data, at).map(|n| n as i64))
}

fn sys_readv(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    readv(k, a[0], a[1], a[2], None)
}

fn sys_writev(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    writev(k, a[0], a[1], a[2], None)
}

fn sys_preadv(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    readv(k, a[0], a[1], a[2], Some(a[3]))
}

fn sys_pwritev(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    writev(k, a[0], a[1], a[2], Some(a[3]))
}

fn file_len(k: &Kernel, f: &OpenFile) -> Option<u64> {
    match &f.kind {
        FileKind::Host(d) | FileKind::Synthetic(d) => Some(d.len() as u64),
        FileKind::Overlay => Some(k.vfs.overlay_data(&f.path).map_or(0, |d| d.len() as u64)),
        FileKind::Dir(e) => Some(e.len() as u64 + 2),
        FileKind::Null | FileKind::Zero | FileKind::Random => Some(0),
        _ => None,
    }
}

fn sys_lseek(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let (fd, off, whence) = (a[0] as i32, a[1] as i64, a[2]);
    let Some(f) = k.files.get(fd).cloned() else {
        return err(libc::EBADF);
    };
    let Some(len) = file_len(k, &f) else {
        return err(libc::ESPIPE);
    };
    let base = match whence {
        0 => 0,
        1 => f.offset as i64,
        2 => len as i64,
        3 => {
            // SEEK_DATA: everything is data.
            if off as u64 >= len {
                return err(libc::ENXIO);
            }
            0
        }
        4 => {
            // SEEK_HOLE: the only hole is at the end.
            if off as u64 >= len {
                return err(libc::ENXIO);
            }
            return set_offset(k, fd, len as i64);
        }
        _ => return err(libc::EINVAL),
    };
    match base.checked_add(off) {
        Some(n) if n >= 0 => set_offset(k, fd, n),
        _ => err(libc::EINVAL),
    }
}

fn set_offset(k: &mut Kernel, fd: i32, n: i64) -> SysResult {
    k.files.get_mut(fd).unwrap().offset = n as u64;
    SysResult::Ret(n)
}

fn sys_getdents64(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let (fd, buf, count) = (a[0] as i32, a[1], a[2] as usize);
    let Some(f) = k.files.get(fd).cloned() else {
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
    let mut idx = f.offset as usize;
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
    k.files.get_mut(fd).unwrap().offset = idx as u64;
    SysResult::Ret(out.len() as i64)
}

fn readlink(k: &mut Kernel, dirfd: i32, ptr: u64, buf: u64, size: u64) -> SysResult {
    let p = match path_at(k, dirfd, ptr) {
        Ok(p) => p,
        Err(e) => return err(e),
    };
    if (size as i64) <= 0 {
        return err(libc::EINVAL);
    }
    let target = if proc_self(&p) == Some("/exe") {
        k.config.exe.clone()
    } else if let Some(n) = proc_self(&p).and_then(|r| r.strip_prefix("/fd/")) {
        let Some(f) = n.parse::<i32>().ok().and_then(|n| k.files.get(n)) else {
            return err(libc::ENOENT);
        };
        match f.kind {
            FileKind::Stdin | FileKind::Output(_) => {
                format!("pipe:[{}]", 1000 + n.parse::<u32>().unwrap_or(0))
            }
            _ => f.path.clone(),
        }
    } else {
        match k.vfs.resolve(&p, false) {
            Resolved::Symlink { target } => target,
            Resolved::Missing => return err(libc::ENOENT),
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
    let mut cwd = k.vfs.cwd.clone().into_bytes();
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
            k.vfs.cwd = p;
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
    match k.files.get(a[0] as i32) {
        Some(f) => {
            let p = f.path.clone();
            chdir_to(k, p)
        }
        None => err(libc::EBADF),
    }
}

// ----- changing the tree (in the overlay only)

/// Refuses changes under /proc, /sys and /dev.
fn check_mutable(path: &str) -> Result<(), i32> {
    if is_virtual_tree(path) || path.starts_with("/dev/") {
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
        Resolved::HostFile { data, mode } => {
            k.vfs.put_file(p, data.to_vec(), mode);
            Ok(())
        }
        Resolved::Symlink { target } => {
            k.vfs.put_symlink(p, &target);
            Ok(())
        }
        Resolved::HostDir { .. } => Err(libc::EXDEV),
        Resolved::Missing => Err(libc::ENOENT),
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

fn link(k: &mut Kernel, from: &str, to: &str) -> Result<i64, i32> {
    check_mutable(to)?;
    if k.vfs.resolve(to, false).exists() {
        return Err(libc::EEXIST);
    }
    let (data, mode) = match k.vfs.resolve(from, true) {
        Resolved::HostFile { data, mode } => (data.to_vec(), mode),
        Resolved::OverlayFile { mode, .. } => {
            (k.vfs.overlay_data(from).cloned().unwrap_or_default(), mode)
        }
        Resolved::Missing => return Err(libc::ENOENT),
        _ => return Err(libc::EPERM),
    };
    k.vfs.put_file(to, data, mode);
    Ok(0)
}

fn sys_link(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let r = path_at(k, AT_FDCWD, a[0]).and_then(|f| Ok((f, path_at(k, AT_FDCWD, a[1])?)));
    ret(r.and_then(|(f, t)| link(k, &f, &t)))
}

fn sys_linkat(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let r = path_at(k, a[0] as i32, a[1]).and_then(|f| Ok((f, path_at(k, a[2] as i32, a[3])?)));
    ret(r.and_then(|(f, t)| link(k, &f, &t)))
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
    if len > (1 << 30) {
        return Err(libc::EFBIG);
    }
    let d = k.vfs.overlay_data_mut(p).ok_or(libc::EINVAL)?;
    d.resize(len as usize, 0);
    Ok(0)
}

fn sys_ftruncate(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let Some(f) = k.files.get(a[0] as i32).cloned() else {
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
    let Some(f) = k.files.get(a[0] as i32).cloned() else {
        return err(libc::EBADF);
    };
    if a[1] != 0 {
        return SysResult::Unsupported(format!("fallocate mode {:#x}", a[1]));
    }
    if !f.writable() || !matches!(f.kind, FileKind::Overlay) {
        return err(libc::EBADF);
    }
    let want = a[2].saturating_add(a[3]);
    let cur = k.vfs.overlay_data(&f.path).map_or(0, |d| d.len() as u64);
    if want > cur {
        return ret(set_len(k, &f.path, want));
    }
    SysResult::Ret(0)
}

fn chmod(k: &mut Kernel, p: &str, mode: u64) -> Result<i64, i32> {
    check_mutable(p)?;
    let r = k.vfs.resolve(p, true);
    match r {
        Resolved::Missing => return Err(libc::ENOENT),
        Resolved::HostDir { .. } | Resolved::OverlayDir { .. } => {
            k.vfs.put_dir(p, mode as u32 & 0o7777);
            return Ok(0);
        }
        _ => copy_up(k, p)?,
    }
    if let Some(d) = k.vfs.overlay_data(p).cloned() {
        k.vfs.put_file(p, d, mode as u32 & 0o7777);
    }
    Ok(0)
}

fn sys_chmod(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    ret(path_at(k, AT_FDCWD, a[0]).and_then(|p| chmod(k, &p, a[1])))
}

fn sys_fchmod(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    match k.files.get(a[0] as i32).map(|f| f.path.clone()) {
        Some(p) => ret(chmod(k, &p, a[1])),
        None => err(libc::EBADF),
    }
}

fn sys_fchmodat(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    ret(path_at(k, a[0] as i32, a[1]).and_then(|p| chmod(k, &p, a[2])))
}

// ----- descriptors

fn sys_dup(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    ret(k.files.dup(a[0] as i32, 0, false).map(i64::from))
}

fn sys_dup2(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    ret(k
        .files
        .dup_to(a[0] as i32, a[1] as i32, false)
        .map(i64::from))
}

fn sys_dup3(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    if a[0] == a[1] || a[2] as i32 & !libc::O_CLOEXEC != 0 {
        return err(libc::EINVAL);
    }
    let cloexec = a[2] as i32 & libc::O_CLOEXEC != 0;
    ret(k
        .files
        .dup_to(a[0] as i32, a[1] as i32, cloexec)
        .map(i64::from))
}

fn sys_fcntl(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let (fd, cmd, arg) = (a[0] as i32, a[1] as i32, a[2]);
    let Some(d) = k.files.fd(fd) else {
        return err(libc::EBADF);
    };
    match cmd {
        libc::F_DUPFD => ret(k.files.dup(fd, arg as i32, false).map(i64::from)),
        libc::F_DUPFD_CLOEXEC => ret(k.files.dup(fd, arg as i32, true).map(i64::from)),
        libc::F_GETFD => SysResult::Ret(d.cloexec as i64),
        libc::F_SETFD => {
            k.files.set_cloexec(fd, arg & 1 != 0);
            SysResult::Ret(0)
        }
        libc::F_GETFL => SysResult::Ret(k.files.get(fd).unwrap().flags as i64),
        libc::F_SETFL => {
            let settable = libc::O_APPEND
                | libc::O_NONBLOCK
                | libc::O_ASYNC
                | libc::O_DIRECT
                | libc::O_NOATIME;
            let f = k.files.get_mut(fd).unwrap();
            f.flags = (f.flags & !settable) | (arg as i32 & settable);
            SysResult::Ret(0)
        }
        libc::F_GETLK | libc::F_OFD_GETLK => {
            // Nobody else holds a lock: report F_UNLCK.
            match k.write(arg, &(libc::F_UNLCK as i16).to_le_bytes()) {
                Ok(()) => SysResult::Ret(0),
                Err(_) => err(libc::EFAULT),
            }
        }
        libc::F_SETLK | libc::F_SETLKW | libc::F_OFD_SETLK | libc::F_OFD_SETLKW => {
            SysResult::Ret(0)
        }
        libc::F_GET_SEALS => err(libc::EINVAL),
        _ => SysResult::Unsupported(format!("fcntl command {cmd}")),
    }
}

const FIONREAD: u64 = 0x541b;
const FIONBIO: u64 = 0x5421;
const FIONCLEX: u64 = 0x5450;
const FIOCLEX: u64 = 0x5451;

fn sys_ioctl(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let (fd, req) = (a[0] as i32, a[1] & 0xffff_ffff);
    let Some(f) = k.files.get(fd).cloned() else {
        return err(libc::EBADF);
    };
    match req {
        FIOCLEX | FIONCLEX => {
            k.files.set_cloexec(fd, req == FIOCLEX);
            SysResult::Ret(0)
        }
        FIONBIO => SysResult::Ret(0),
        FIONREAD => {
            let avail = file_len(k, &f).map_or(0, |l| l.saturating_sub(f.offset));
            match k.write_u32(a[2], avail.min(i32::MAX as u64) as u32) {
                Ok(()) => SysResult::Ret(0),
                Err(_) => err(libc::EFAULT),
            }
        }
        // Terminal requests (TCGETS, TIOCGWINSZ, ...) and the rest: no file
        // here is a terminal or a device with ioctls, which is ENOTTY.
        _ => err(libc::ENOTTY),
    }
}

// ----- poll

const POLLIN: i16 = 0x1;
const POLLOUT: i16 = 0x4;
const POLLNVAL: i16 = 0x20;

fn poll(k: &mut Kernel, fds: u64, n: u64, deadline: Option<Option<u64>>) -> SysResult {
    if n > k.files.limit as u64 {
        return err(libc::EINVAL);
    }
    let mut ready = 0;
    for i in 0..n {
        let at = fds + i * 8;
        let mut b = [0u8; 8];
        if k.read(at, &mut b).is_err() {
            return err(libc::EFAULT);
        }
        let fd = i32::from_le_bytes(b[0..4].try_into().unwrap());
        let events = i16::from_le_bytes(b[4..6].try_into().unwrap());
        let revents = if fd < 0 {
            0
        } else {
            match k.files.get(fd) {
                None => POLLNVAL,
                Some(f) => {
                    let mut r = 0;
                    if f.readable() && !matches!(f.kind, FileKind::Stdin) {
                        r |= POLLIN;
                    }
                    if f.writable() {
                        r |= POLLOUT;
                    }
                    r & events
                }
            }
        };
        if revents != 0 {
            ready += 1;
        }
        if k.write(at + 6, &revents.to_le_bytes()).is_err() {
            return err(libc::EFAULT);
        }
    }
    match deadline {
        _ if ready > 0 => SysResult::Ret(ready),
        Some(Some(d)) if d <= k.now => SysResult::Ret(0),
        Some(d) => SysResult::Block(Wait::Poll { deadline: d }),
        None => SysResult::Ret(0),
    }
}

fn sys_poll(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let ms = a[2] as i32;
    let deadline = match ms {
        0 => None,
        ms if ms < 0 => Some(None),
        ms => Some(Some(k.now + ms as u64 * 1_000_000)),
    };
    poll(k, a[0], a[1], deadline)
}

fn sys_ppoll(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let deadline = if a[2] == 0 {
        Some(None)
    } else {
        match super::sys_thread::deadline(k, a[2], false, false) {
            Ok(Some(d)) if d == k.now => None,
            Ok(d) => Some(d),
            Err(e) => return err(e),
        }
    };
    poll(k, a[0], a[1], deadline)
}
