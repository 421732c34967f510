//! Files with contents: host files, the overlay's, generated ones
//! (`/proc`, `/sys`), directories being listed, the standard streams and
//! the devices (`/dev/null`, `/dev/zero`, `/dev/urandom`).

use crate::kernel::files::{FileKind, OpenFile};
use crate::kernel::{Kernel, SysResult, err};

/// Largest single read or write (Linux's MAX_RW_COUNT is about 2 GiB; a
/// smaller cap keeps a hostile length from allocating the monitor's memory).
pub(in crate::kernel) const MAX_IO: usize = 64 << 20;

/// Reads up to `len` bytes from `fd` at `at` (or the file offset).
pub(in crate::kernel) fn read_bytes(
    k: &mut Kernel,
    fd: i32,
    len: usize,
    at: Option<u64>,
) -> Result<Vec<u8>, i32> {
    let f = k.files().get(fd).ok_or(libc::EBADF)?;
    if !f.readable() {
        return Err(libc::EBADF);
    }
    let len = len.min(MAX_IO);
    let off = at.unwrap_or(k.offset_of(f));
    let from_slice = |d: &[u8]| -> Vec<u8> {
        let start = (off as usize).min(d.len());
        d[start..(start + len).min(d.len())].to_vec()
    };
    let out = match &f.kind {
        FileKind::Host(d) | FileKind::Synthetic(d) => from_slice(d),
        FileKind::Overlay => {
            let path = f.path.clone();
            let data = k.file_bytes(&path);
            data.map_or_else(Vec::new, |d| d.read(off, len))
        }
        FileKind::Dir(_) => return Err(libc::EISDIR),
        FileKind::Stdin | FileKind::Null => Vec::new(),
        FileKind::HostStream(_) => host_read(len)?,
        FileKind::Zero => vec![0; len],
        FileKind::Random => {
            let mut v = vec![0; len];
            k.random_bytes(&mut v);
            v
        }
        FileKind::Output(_) | FileKind::PathOnly => return Err(libc::EBADF),
        // Only a connected socket (a pair of pipes) carries data.
        FileKind::Socket { .. } | FileKind::BoundSocket { .. } => return Err(libc::ENOTCONN),
        // Pipes and the other waiting kinds are read by their own modules.
        FileKind::Pipe { .. }
        | FileKind::EventFd { .. }
        | FileKind::Epoll { .. }
        | FileKind::PidFd { .. }
        | FileKind::TimerFd { .. }
        | FileKind::SignalFd { .. }
        | FileKind::SocketPair { .. }
        | FileKind::PtyMaster { .. }
        | FileKind::PtySlave { .. } => {
            return Err(libc::EINVAL);
        }
    };
    if at.is_none() {
        k.set_offset(fd, off + out.len() as u64);
    }
    Ok(out)
}

/// Reads up to `len` bytes of `fd` at `at` (or the file offset) into
/// `buf`.
pub(in crate::kernel) fn read(
    k: &mut Kernel,
    fd: i32,
    buf: u64,
    len: u64,
    at: Option<u64>,
) -> SysResult {
    match read_bytes(k, fd, len as usize, at) {
        Ok(d) => match k.write(buf, &d) {
            Ok(()) => SysResult::Ret(d.len() as i64),
            Err(_) => err(libc::EFAULT),
        },
        Err(e) => err(e),
    }
}

/// Writes `data` to `fd` at `at` (or the file offset).
pub(in crate::kernel) fn write(
    k: &mut Kernel,
    fd: i32,
    data: &[u8],
    at: Option<u64>,
) -> Result<usize, i32> {
    let f = k.files().get(fd).ok_or(libc::EBADF)?.clone();
    if !f.writable() {
        return Err(libc::EBADF);
    }
    match &f.kind {
        FileKind::Output(n) => {
            k.obs.output(*n, data);
            Ok(data.len())
        }
        FileKind::Null | FileKind::Zero | FileKind::Random => Ok(data.len()),
        FileKind::HostStream(n) => host_write(*n, data),
        FileKind::Overlay => {
            let current = k.offset_of(&f);
            let append = k.flags_of(&f) & libc::O_APPEND != 0;
            let written = k.change_file(&f.path, |buf, space| {
                let off = match at {
                    Some(o) => o,
                    None if append => buf.len(),
                    None => current,
                };
                buf.write_at(off, data, space).map(|()| off)
            });
            let off = written.ok_or(libc::EIO)??;
            if at.is_none() {
                k.set_offset(fd, off + data.len() as u64);
            }
            Ok(data.len())
        }
        FileKind::Dir(_) => Err(libc::EISDIR),
        FileKind::Socket { .. } => Err(libc::ENOTCONN),
        _ => Err(libc::EBADF),
    }
}

/// Reads the host's standard input, waiting for it as the host would: a
/// visitor's (`kernel::visit`) is the only process running meanwhile.
fn host_read(len: usize) -> Result<Vec<u8>, i32> {
    use std::io::Read;
    let mut buf = vec![0; len.min(64 << 10)];
    let n = std::io::stdin()
        .lock()
        .read(&mut buf)
        .map_err(|_| libc::EIO)?;
    buf.truncate(n);
    Ok(buf)
}

/// Writes to the host's standard output (`n` 1) or error.
fn host_write(n: u32, data: &[u8]) -> Result<usize, i32> {
    use std::io::Write;
    let written = if n == 2 {
        let mut e = std::io::stderr().lock();
        e.write_all(data).and_then(|()| e.flush())
    } else {
        let mut o = std::io::stdout().lock();
        o.write_all(data).and_then(|()| o.flush())
    };
    written.map(|()| data.len()).map_err(|e| match e.kind() {
        std::io::ErrorKind::BrokenPipe => libc::EPIPE,
        _ => libc::EIO,
    })
}

/// Whether description `f` is a file with contents to copy from
/// (`sendfile` and `copy_file_range` read only those).
pub(in crate::kernel) fn is_regular(f: &OpenFile) -> bool {
    matches!(f.kind, FileKind::Host(_) | FileKind::Overlay)
}

/// The length `lseek` measures from (`SEEK_END`), or `None` for a
/// file that cannot seek.
pub(in crate::kernel) fn seek_len(k: &Kernel, f: &OpenFile) -> Option<u64> {
    match &f.kind {
        FileKind::Host(d) | FileKind::Synthetic(d) => Some(d.len() as u64),
        FileKind::Overlay => Some(k.vfs.overlay_len(&f.path).unwrap_or(0)),
        FileKind::Dir(e) => Some(e.len() as u64 + 2),
        FileKind::Null | FileKind::Zero | FileKind::Random => Some(0),
        _ => None,
    }
}
