//! Descriptors: opening and closing files, reading and writing them (the
//! host's files read-only, the guest's writes in a private overlay, the
//! standard streams captured), seeking, duplicating, fcntl and ioctl.

use std::sync::Arc;

use super::call::{AT_FDCWD, SyscallDef, def, path_at, ret, sys_zero};
use super::file::meta::{S_IFDIR, meta_of_path};
use super::file::{self, data};
use super::files::{FileKind, OpenFile};
use super::synth::{device, exe_link, is_virtual_tree, listing, proc_path, synthetic};
use super::thread::Wait;
use super::vfs::{NodeKind, Resolved, parent_of};
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
    def(libc::SYS_dup, sys_dup, ""),
    def(libc::SYS_dup2, sys_dup2, ""),
    def(libc::SYS_dup3, sys_dup3, ""),
    def(
        libc::SYS_fcntl,
        sys_fcntl,
        "record locks always succeed (one process)",
    ),
    def(
        libc::SYS_ioctl,
        sys_ioctl,
        "terminals are the machine's pseudoterminals; none is a controlling terminal",
    ),
    def(
        libc::SYS_sendfile,
        sys_sendfile,
        "from a regular file to any descriptor",
    ),
    def(libc::SYS_copy_file_range, sys_copy_file_range, ""),
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
];

// ----- open and close

/// A new description of `kind` at `path`, opened with `flags`: it keeps
/// the flags that last beyond `open` (the access mode, O_APPEND, ...).
fn description(kind: FileKind, path: &str, flags: i32) -> OpenFile {
    OpenFile {
        kind,
        path: path.to_string(),
        offset: 0,
        flags: flags
            & !(libc::O_CLOEXEC | libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC | libc::O_NOCTTY),
        shared: None,
    }
}

fn open(k: &mut Kernel, path: &str, flags: i32, mode: u32) -> Result<i64, i32> {
    let cloexec = flags & libc::O_CLOEXEC != 0;
    let acc = flags & libc::O_ACCMODE;
    let writes = acc != libc::O_RDONLY || flags & libc::O_TRUNC != 0;
    let file = |kind: FileKind| description(kind, path, flags);
    if flags & libc::O_TMPFILE == libc::O_TMPFILE {
        return Err(libc::EOPNOTSUPP);
    }
    if flags & libc::O_PATH != 0 {
        meta_of_path(k, path, flags & libc::O_NOFOLLOW == 0)?;
        let f = file(FileKind::PathOnly);
        return k.files_mut().install(f, cloexec, 0).map(i64::from);
    }
    if let Some(kind) = device(path) {
        return k.files_mut().install(file(kind), cloexec, 0).map(i64::from);
    }
    let proc = proc_path(k, path);
    if let Some(rest) = proc
        .filter(|p| p.is_own(k))
        .and_then(|p| p.rest.strip_prefix("/fd/"))
    {
        let n: i32 = rest.parse().map_err(|_| libc::ENOENT)?;
        return k
            .files_mut()
            .dup(n, 0, cloexec)
            .map(i64::from)
            .map_err(|_| libc::ENOENT);
    }
    if is_virtual_tree(path) {
        let m = meta_of_path(k, path, true)?;
        if m.mode & S_IFDIR != 0 {
            let fd = k
                .files_mut()
                .install(file(FileKind::Dir(Default::default())), cloexec, 0)?;
            // Listed once open: a process's own `fd` directory lists the
            // descriptor that reads it, as on Linux.
            let entries = Arc::new(listing(k, path));
            k.files_mut().set_kind(fd, FileKind::Dir(entries));
            return Ok(i64::from(fd));
        }
        if writes {
            return Err(libc::EACCES);
        }
        if let Some(p) = proc.filter(|p| p.rest == "/exe") {
            let exe = exe_link(k, p.pid).ok_or(libc::ENOENT)?;
            return open(k, &exe, flags, mode);
        }
        let data = synthetic(k, path).ok_or(libc::ENOENT)?;
        return k
            .files_mut()
            .install(file(FileKind::Synthetic(Arc::new(data))), cloexec, 0)
            .map(i64::from);
    }
    // Writing through a link writes its target (copied up under the
    // target's path), and creating through a dangling one creates it.
    let target;
    let path = if flags & libc::O_NOFOLLOW == 0 && (writes || flags & libc::O_CREAT != 0) {
        target = k.vfs.final_path(path);
        target.as_str()
    } else {
        path
    };
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
                return Err(k.vfs.absent_errno(path));
            }
            let parent = parent_of(path);
            if !k.vfs.resolve(&parent, true).is_dir() {
                return Err(k.vfs.absent_errno(path));
            }
            let mode = mode & 0o7777 & !k.vfs.umask;
            k.vfs.put_file(path, &[], mode)?;
            FileKind::Overlay
        }
        Resolved::HostDir { .. } | Resolved::OverlayDir { .. } => {
            if acc != libc::O_RDONLY {
                return Err(libc::EISDIR);
            }
            if path == "/dev/pts" {
                let names = file::pty::names(k);
                FileKind::Dir(Arc::new(
                    names.into_iter().map(|n| (n, NodeKind::File)).collect(),
                ))
            } else {
                FileKind::Dir(Arc::new(k.vfs.list(path)))
            }
        }
        Resolved::Symlink { .. } => return Err(libc::ELOOP),
        // A socket is reached with connect, not open.
        Resolved::Socket { .. } => return Err(libc::ENXIO),
        Resolved::HostFile { mode, .. } => {
            let follow = flags & libc::O_NOFOLLOW == 0;
            if writes && flags & libc::O_TRUNC != 0 {
                k.vfs.put_file(path, &[], mode)?;
                FileKind::Overlay
            } else {
                let data = k.vfs.host_contents(path, follow).ok_or(libc::EIO)?;
                if writes {
                    // Copy up: the host's file stays untouched.
                    k.vfs.put_file(path, &data, mode)?;
                    FileKind::Overlay
                } else {
                    FileKind::Host(data)
                }
            }
        }
        Resolved::OverlayFile { .. } => {
            if flags & libc::O_TRUNC != 0 && acc != libc::O_RDONLY {
                k.change_file(path, |d, space| d.set_len(0, space));
            }
            FileKind::Overlay
        }
    };
    // Named by the path written, which for a link is its target's.
    let mut f = file(kind);
    f.path = path.to_string();
    k.files_mut().install(f, cloexec, 0).map(i64::from)
}

fn openat(k: &mut Kernel, dirfd: i32, ptr: u64, flags: u64, mode: u64) -> SysResult {
    // An O_PATH descriptor names a device without opening it.
    let opens = flags as i32 & libc::O_PATH == 0;
    match path_at(k, dirfd, ptr) {
        Ok(p) if opens && is_pseudoterminal(&p) => open_pty(k, &p, flags as i32),
        // The caller's controlling terminal, which no process in the
        // machine has: Linux's answer then.
        Ok(p) if opens && p == "/dev/tty" => err(libc::ENXIO),
        Ok(p) => ret(open(k, &p, flags as i32, mode as u32)),
        Err(e) => err(e),
    }
}

/// Whether `path` is a pseudoterminal device: the multiplexer or a pair's
/// end (the machine's own, never the host's).
fn is_pseudoterminal(path: &str) -> bool {
    path == "/dev/ptmx" || path.starts_with("/dev/pts/")
}

/// Opens `/dev/ptmx` (a new pair's master) or `/dev/pts/N` (a slave).
fn open_pty(k: &mut Kernel, path: &str, flags: i32) -> SysResult {
    let master = path == "/dev/ptmx" || path == "/dev/pts/ptmx";
    let id = if master {
        None
    } else {
        match file::pty::slave_named(k, path) {
            Some(id) => Some(id),
            None => return err(libc::ENOENT),
        }
    };
    // A session leader opening a terminal without O_NOCTTY would make it
    // its controlling terminal, which the machine's terminals never are.
    let leader = k.processes().get(&k.pid).is_some_and(|p| p.sid == k.pid);
    if !master && flags & libc::O_NOCTTY == 0 && leader {
        return SysResult::Unsupported(format!(
            "controlling terminals (open of {path} by a session leader without O_NOCTTY)"
        ));
    }
    let kind = match id {
        None => FileKind::PtyMaster {
            id: file::pty::create(k),
        },
        Some(id) => {
            if let Err(e) = file::pty::open_slave(k, id) {
                return err(e);
            }
            FileKind::PtySlave { id }
        }
    };
    install_pty(k, kind, path, flags)
}

/// A descriptor for an end of a pair, named `path`.
fn install_pty(k: &mut Kernel, kind: FileKind, path: &str, flags: i32) -> SysResult {
    let f = description(kind.clone(), path, flags);
    let id = match kind {
        FileKind::PtyMaster { id } | FileKind::PtySlave { id } => id,
        _ => unreachable!("an end of a pair"),
    };
    let r = k.files_mut().install(f, flags & libc::O_CLOEXEC != 0, 0);
    if r.is_err() {
        // A pair no descriptor holds goes at once (EMFILE).
        file::pty::let_go_of_end(k, id);
    }
    ret(r.map(i64::from))
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
    if k.files_mut().close(a[0] as i32) {
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
        .files()
        .list()
        .map(|(fd, _)| fd)
        .filter(|fd| (first..=last).contains(&(*fd as u32)))
        .collect();
    for fd in fds {
        if flags & CLOSE_RANGE_CLOEXEC != 0 {
            k.files_mut().set_cloexec(fd, true);
        } else {
            k.files_mut().close(fd);
        }
    }
    SysResult::Ret(0)
}

// ----- reading and writing

fn do_write(k: &mut Kernel, fd: u64, buf: u64, len: u64, at: Option<u64>) -> SysResult {
    if k.files().get(fd as i32).is_none() {
        return err(libc::EBADF);
    }
    let mut data = vec![0u8; (len as usize).min(data::MAX_IO)];
    if k.read(buf, &mut data).is_err() {
        return err(libc::EFAULT);
    }
    file::write(k, fd, &data, at)
}

fn sys_read(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    file::read(k, a[0], a[1], a[2], None)
}

// ----- copying between descriptors in the kernel

/// Where a copy reads or writes: at `*ptr` when the caller gave a pointer
/// (the descriptor's offset stays), else at the descriptor's offset.
fn copy_position(k: &mut Kernel, fd: i32, ptr: u64) -> Result<u64, i32> {
    if ptr == 0 {
        let f = k.files().get(fd).ok_or(libc::EBADF)?;
        return Ok(k.offset_of(f));
    }
    let at = k.read_u64(ptr).map_err(|_| libc::EFAULT)?;
    if (at as i64) < 0 {
        return Err(libc::EINVAL);
    }
    Ok(at)
}

/// Moves a copy's position on by `n`: the caller's pointer, or the
/// descriptor's offset.
fn advance(k: &mut Kernel, fd: i32, ptr: u64, from: u64, n: u64) -> Result<(), i32> {
    if ptr == 0 {
        k.set_offset(fd, from + n);
        return Ok(());
    }
    k.write_u64(ptr, from + n).map_err(|_| libc::EFAULT)
}

/// `sendfile`: copies from a file to any descriptor (a file, a pipe, a
/// socket, standard output) without the bytes passing through user
/// memory. A write that waits takes the call up again from the start:
/// nothing was read yet.
fn sys_sendfile(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let (out, inp, offp, count) = (a[0] as i32, a[1] as i32, a[2], a[3]);
    let (Some(fin), Some(fout)) = (k.files().get(inp), k.files().get(out)) else {
        return err(libc::EBADF);
    };
    if !fin.readable() || !fout.writable() {
        return err(libc::EBADF);
    }
    if !data::is_regular(fin) || k.flags_of(fout) & libc::O_APPEND != 0 {
        return err(libc::EINVAL);
    }
    let from = match copy_position(k, inp, offp) {
        Ok(at) => at,
        Err(e) => return err(e),
    };
    let data = match data::read_bytes(k, inp, count as usize, Some(from)) {
        Ok(d) => d,
        Err(e) => return err(e),
    };
    if data.is_empty() {
        return SysResult::Ret(0);
    }
    let r = retried_as(file::write(k, out as u64, &data, None), libc::SYS_sendfile);
    if let SysResult::Ret(n) = r {
        if n > 0 {
            if let Err(e) = advance(k, inp, offp, from, n as u64) {
                return err(e);
            }
        }
    }
    r
}

/// `copy_file_range`: copies between two regular files, by positions of
/// their own or their offsets.
fn sys_copy_file_range(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let (inp, offp_in, out, offp_out, len, flags) =
        (a[0] as i32, a[1], a[2] as i32, a[3], a[4], a[5]);
    if flags != 0 {
        return err(libc::EINVAL);
    }
    let (Some(fin), Some(fout)) = (k.files().get(inp).cloned(), k.files().get(out).cloned()) else {
        return err(libc::EBADF);
    };
    if !fin.readable() || !fout.writable() || k.flags_of(&fout) & libc::O_APPEND != 0 {
        return err(libc::EBADF);
    }
    if matches!(fin.kind, FileKind::Dir(_)) || matches!(fout.kind, FileKind::Dir(_)) {
        return err(libc::EISDIR);
    }
    if !data::is_regular(&fin) || !matches!(fout.kind, FileKind::Overlay) {
        return err(libc::EINVAL);
    }
    let (from, to) = match (
        copy_position(k, inp, offp_in),
        copy_position(k, out, offp_out),
    ) {
        (Ok(f), Ok(t)) => (f, t),
        (Err(e), _) | (_, Err(e)) => return err(e),
    };
    let same_file = matches!(fin.kind, FileKind::Overlay) && fin.path == fout.path;
    if same_file && from < to.saturating_add(len) && to < from.saturating_add(len) {
        return err(libc::EINVAL);
    }
    let data = match data::read_bytes(k, inp, len as usize, Some(from)) {
        Ok(d) => d,
        Err(e) => return err(e),
    };
    if data.is_empty() {
        return SysResult::Ret(0);
    }
    let n = match data::write(k, out, &data, Some(to)) {
        Ok(n) => n as u64,
        Err(e) => return err(e),
    };
    let moved = advance(k, inp, offp_in, from, n).and_then(|()| advance(k, out, offp_out, to, n));
    match moved {
        Ok(()) => SysResult::Ret(n as i64),
        Err(e) => err(e),
    }
}

fn sys_write(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    do_write(k, a[0], a[1], a[2], None)
}

fn sys_pread64(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    if (a[3] as i64) < 0 {
        return err(libc::EINVAL);
    }
    file::read(k, a[0], a[1], a[2], Some(a[3]))
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

/// A blocked call taken up again re-executes the system call `nr`: a
/// `readv` that waits on a pipe through `read`'s code must come back as
/// `readv`.
fn retried_as(r: SysResult, nr: i64) -> SysResult {
    match r {
        SysResult::Block(Wait::Pipe { id, write, len, .. }) => SysResult::Block(Wait::Pipe {
            id,
            write,
            len,
            nr: nr as u64,
        }),
        SysResult::Block(Wait::Readable { fd, on, .. }) => SysResult::Block(Wait::Readable {
            fd,
            nr: nr as u64,
            on,
        }),
        other => other,
    }
}

fn readv(k: &mut Kernel, fd: u64, iov: u64, n: u64, mut at: Option<u64>) -> SysResult {
    let v = match iovecs(k, iov, n) {
        Ok(v) => v,
        Err(e) => return err(e),
    };
    let nr = if at.is_some() {
        libc::SYS_preadv
    } else {
        libc::SYS_readv
    };
    let mut total = 0i64;
    for (base, len) in v {
        match retried_as(file::read(k, fd, base, len, at), nr) {
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
        let mut chunk = vec![0u8; (len as usize).min(data::MAX_IO)];
        if k.read(base, &mut chunk).is_err() {
            return err(libc::EFAULT);
        }
        data.extend_from_slice(&chunk);
        if data.len() > data::MAX_IO {
            return err(libc::EINVAL);
        }
    }
    if file::may_wait(k, fd) {
        // One write of the gathered bytes: atomic up to PIPE_BUF, as Linux.
        if at.is_some() {
            return err(libc::ESPIPE);
        }
        return retried_as(file::write(k, fd, &data, None), libc::SYS_writev);
    }
    ret(data::write(k, fd as i32, &data, at).map(|n| n as i64))
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

fn sys_lseek(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let (fd, off, whence) = (a[0] as i32, a[1] as i64, a[2]);
    let Some(f) = k.files().get(fd).cloned() else {
        return err(libc::EBADF);
    };
    let Some(len) = data::seek_len(k, &f) else {
        return err(libc::ESPIPE);
    };
    let base = match whence {
        0 => 0,
        1 => k.offset_of(&f) as i64,
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
    k.set_offset(fd, n as u64);
    SysResult::Ret(n)
}

// ----- descriptors

fn sys_dup(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    ret(k.files_mut().dup(a[0] as i32, 0, false).map(i64::from))
}

fn sys_dup2(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    ret(k
        .files_mut()
        .dup_to(a[0] as i32, a[1] as i32, false)
        .map(i64::from))
}

fn sys_dup3(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    if a[0] == a[1] || a[2] as i32 & !libc::O_CLOEXEC != 0 {
        return err(libc::EINVAL);
    }
    let cloexec = a[2] as i32 & libc::O_CLOEXEC != 0;
    ret(k
        .files_mut()
        .dup_to(a[0] as i32, a[1] as i32, cloexec)
        .map(i64::from))
}

fn sys_fcntl(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let (fd, cmd, arg) = (a[0] as i32, a[1] as i32, a[2]);
    let Some(d) = k.files().fd(fd) else {
        return err(libc::EBADF);
    };
    match cmd {
        libc::F_DUPFD => ret(k.files_mut().dup(fd, arg as i32, false).map(i64::from)),
        libc::F_DUPFD_CLOEXEC => ret(k.files_mut().dup(fd, arg as i32, true).map(i64::from)),
        libc::F_GETFD => SysResult::Ret(d.cloexec as i64),
        libc::F_SETFD => {
            k.files_mut().set_cloexec(fd, arg & 1 != 0);
            SysResult::Ret(0)
        }
        libc::F_GETFL => SysResult::Ret(k.flags_of(k.files().get(fd).unwrap()) as i64),
        libc::F_SETFL => {
            let settable = libc::O_APPEND
                | libc::O_NONBLOCK
                | libc::O_ASYNC
                | libc::O_DIRECT
                | libc::O_NOATIME;
            let now = k.flags_of(k.files().get(fd).unwrap());
            k.set_flags(fd, (now & !settable) | (arg as i32 & settable));
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
        libc::F_GETPIPE_SZ | libc::F_SETPIPE_SZ => {
            let id = match k.files().get(fd).map(|f| &f.kind) {
                Some(FileKind::Pipe { id, .. }) => *id,
                _ => return err(libc::EBADF),
            };
            if cmd == libc::F_GETPIPE_SZ {
                return SysResult::Ret(file::pipe::capacity(k, id) as i64);
            }
            ret(file::pipe::resize(k, id, arg).map(|n| n as i64))
        }
        _ => SysResult::Unsupported(format!("fcntl command {cmd}")),
    }
}

const FIONREAD: u64 = 0x541b;
const FIONBIO: u64 = 0x5421;
const FIONCLEX: u64 = 0x5450;
const FIOCLEX: u64 = 0x5451;

fn sys_ioctl(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let (fd, req) = (a[0] as i32, a[1] & 0xffff_ffff);
    let Some(f) = k.files().get(fd).cloned() else {
        return err(libc::EBADF);
    };
    match req {
        FIOCLEX | FIONCLEX => {
            k.files_mut().set_cloexec(fd, req == FIOCLEX);
            SysResult::Ret(0)
        }
        FIONBIO => {
            let on = match k.read_u32(a[2]) {
                Ok(v) => v != 0,
                Err(_) => return err(libc::EFAULT),
            };
            let now = k.flags_of(&f) & !libc::O_NONBLOCK;
            k.set_flags(fd, now | if on { libc::O_NONBLOCK } else { 0 });
            SysResult::Ret(0)
        }
        FIONREAD => {
            let avail = file::available(k, &f);
            match k.write_u32(a[2], avail.min(i32::MAX as u64) as u32) {
                Ok(()) => SysResult::Ret(0),
                Err(_) => err(libc::EFAULT),
            }
        }
        _ => match f.kind {
            FileKind::PtyMaster { id } | FileKind::PtySlave { id } => {
                let end = if matches!(f.kind, FileKind::PtyMaster { .. }) {
                    file::pty::End::Master
                } else {
                    file::pty::End::Slave
                };
                match file::pty::ioctl(k, id, end, req, a[2]) {
                    file::pty::Ioctl::Done(r) => r,
                    file::pty::Ioctl::OpenPeer(flags) => {
                        if let Err(e) = file::pty::open_slave(k, id) {
                            return err(e);
                        }
                        let path = format!("/dev/pts/{id}");
                        install_pty(k, FileKind::PtySlave { id }, &path, flags)
                    }
                }
            }
            // Terminal requests (TCGETS, TIOCGWINSZ, ...) and the rest on
            // any other file: it is no terminal or device with ioctls,
            // which is ENOTTY.
            _ => err(libc::ENOTTY),
        },
    }
}
