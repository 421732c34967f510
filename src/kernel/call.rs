//! What every system-call handler shares: its entry in the table, and the
//! decoding of arguments that many families take (paths relative to a
//! directory descriptor, times, results).

use super::files::FileKind;
use super::synth::proc_path;
use super::thread::Nanos;
use super::{FpuAccess, Kernel, SysResult, err};
use crate::arch::syscalls as names;

/// A system-call handler: the kernel, the CPU's extended state, the six
/// argument registers.
pub type Handler = fn(&mut Kernel, &mut dyn FpuAccess, [u64; 6]) -> SysResult;

/// One implemented system call.
#[derive(Clone, Copy)]
pub struct SyscallDef {
    pub nr: u64,
    pub handler: Handler,
    /// The family file it lives in.
    pub family: &'static str,
    /// What is not implemented, if anything ("" when complete).
    pub note: &'static str,
}

impl SyscallDef {
    /// Linux's name for it.
    pub fn name(&self) -> &'static str {
        names::syscall_name(self.nr).unwrap_or("?")
    }
}

/// Builds a table entry: `def(nr, handler, note)`.
pub const fn def(nr: i64, handler: Handler, note: &'static str) -> SyscallDef {
    SyscallDef {
        nr: nr as u64,
        handler,
        family: "",
        note,
    }
}

// ----- handlers and results

/// A call that does nothing here and succeeds.
pub(super) fn sys_zero(_: &mut Kernel, _: &mut dyn FpuAccess, _: [u64; 6]) -> SysResult {
    SysResult::Ret(0)
}

/// An extended-attribute query: no file has any.
pub(super) fn sys_no_xattr(_: &mut Kernel, _: &mut dyn FpuAccess, _: [u64; 6]) -> SysResult {
    err(libc::ENODATA)
}

/// A value or an errno as a handler result.
pub(super) fn ret(r: Result<i64, i32>) -> SysResult {
    match r {
        Ok(v) => SysResult::Ret(v),
        Err(e) => err(e),
    }
}

// ----- paths

/// The working directory, as a directory descriptor argument.
pub(super) const AT_FDCWD: i32 = -100;
pub(super) const AT_SYMLINK_NOFOLLOW: u64 = 0x100;
pub(super) const AT_REMOVEDIR: u64 = 0x200;
pub(super) const AT_EMPTY_PATH: u64 = 0x1000;

/// Reads a path argument and makes it absolute against `dirfd`.
pub(super) fn path_at(k: &mut Kernel, dirfd: i32, ptr: u64) -> Result<String, i32> {
    let p = k.read_cstr(ptr).map_err(|_| libc::EFAULT)?;
    if p.is_empty() {
        return Err(libc::ENOENT);
    }
    if p.starts_with('/') || dirfd == AT_FDCWD {
        let p = k.absolute(&p);
        let p = super::synth::fd_alias(&p).unwrap_or(p);
        return Ok(descriptor_link(k, &p).unwrap_or(p));
    }
    let f = k.files().get(dirfd).ok_or(libc::EBADF)?;
    if !matches!(f.kind, FileKind::Dir(_) | FileKind::PathOnly) {
        return Err(libc::ENOTDIR);
    }
    let base = f.path.clone();
    Ok(super::vfs::normalize(&base, &p))
}

/// What `/proc/self/fd/N` links to when descriptor N names a file or a
/// directory: its path, as Linux's magic link leads to the file itself
/// (`chmod("/proc/self/fd/3")` changes the file). Pipes, sockets and the
/// standard streams keep the alias, which the synthetic tree serves.
fn descriptor_link(k: &Kernel, path: &str) -> Option<String> {
    let p = proc_path(k, path).filter(|p| p.is_own(k))?;
    let n: i32 = p.rest.strip_prefix("/fd/")?.parse().ok()?;
    let f = k.files().get(n)?;
    let names_a_file = matches!(
        f.kind,
        FileKind::Host(_) | FileKind::Overlay | FileKind::Dir(_) | FileKind::PathOnly
    );
    (names_a_file && f.path.starts_with('/')).then(|| f.path.clone())
}

// ----- times

/// Reads a `struct timespec` as nanoseconds (EFAULT, or EINVAL for a
/// negative or out-of-range value).
pub(super) fn read_timespec(k: &mut Kernel, ptr: u64) -> Result<u64, i32> {
    let sec = k.read_u64(ptr).map_err(|_| libc::EFAULT)? as i64;
    let nsec = k.read_u64(ptr + 8).map_err(|_| libc::EFAULT)? as i64;
    if sec < 0 || !(0..1_000_000_000).contains(&nsec) {
        return Err(libc::EINVAL);
    }
    Ok((sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(nsec as u64))
}

/// Reads a timeout: relative, or absolute on the monotonic or real-time clock.
pub(super) fn deadline(
    k: &mut Kernel,
    ptr: u64,
    absolute: bool,
    realtime: bool,
) -> Result<Option<u64>, i32> {
    if ptr == 0 {
        return Ok(None);
    }
    let t = read_timespec(k, ptr)?;
    Ok(Some(if !absolute {
        k.now.saturating_add(t)
    } else if realtime {
        t.saturating_sub(k.config.epoch * 1_000_000_000)
    } else {
        t
    }))
}

/// Reads a `struct timeval` as nanoseconds (EFAULT, or EINVAL for a
/// negative or out-of-range value).
pub(super) fn read_timeval(k: &mut Kernel, at: u64) -> Result<Nanos, i32> {
    let s = k.read_u64(at).map_err(|_| libc::EFAULT)? as i64;
    let us = k.read_u64(at + 8).map_err(|_| libc::EFAULT)? as i64;
    if s < 0 || !(0..1_000_000).contains(&us) {
        return Err(libc::EINVAL);
    }
    Ok(s as u64 * 1_000_000_000 + us as u64 * 1000)
}
