//! Sockets, as far as a machine with no network and no other process sees
//! them: they can be made, set up and closed, and a connection finds
//! nobody listening.
//!
//! That is what programs meet most: the C library's user and group lookups
//! try the name service cache daemon's socket first (`ls -l`, `whoami`,
//! `tar`), syslog tries `/dev/log`, and a host without those answers
//! ENOENT or ECONNREFUSED, after which the program goes on without them.
//! The answers depend only on the guest's own file tree, so they are the
//! same in every run.

use super::files::{FileKind, OpenFile};
use super::table::{SyscallDef, def};
use super::{FpuAccess, Kernel, SysResult, err};

pub const CALLS: &[SyscallDef] = &[
    def(
        libc::SYS_socket,
        sys_socket,
        "unix, inet and inet6 sockets that never connect: nothing listens",
    ),
    def(
        libc::SYS_connect,
        sys_connect,
        "unix: ENOENT for a missing path, ECONNREFUSED otherwise; inet: ECONNREFUSED on loopback, ENETUNREACH elsewhere",
    ),
    def(
        libc::SYS_sendto,
        sys_sendto,
        "to an address: as connect; unconnected: ENOTCONN",
    ),
    def(
        libc::SYS_recvfrom,
        sys_recvfrom,
        "ENOTCONN: nothing connects",
    ),
    def(
        libc::SYS_shutdown,
        sys_shutdown,
        "ENOTCONN: nothing connects",
    ),
    def(libc::SYS_setsockopt, sys_setsockopt, "accepted and ignored"),
    def(
        libc::SYS_getsockname,
        sys_getsockname,
        "unnamed: unix sockets are never bound, inet ones have the any address",
    ),
    def(
        libc::SYS_getpeername,
        sys_getpeername,
        "a socket pair's peer is unnamed; other sockets have none",
    ),
    def(
        libc::SYS_getsockopt,
        sys_getsockopt,
        "SO_ERROR, SO_TYPE and SO_DOMAIN",
    ),
];

/// The socket behind `fd`, or the errno Linux gives.
fn socket_of(k: &Kernel, fd: u64) -> Result<(i32, i32), i32> {
    match k.files.get(fd as i32).map(|f| &f.kind) {
        Some(FileKind::Socket { domain, kind }) => Ok((*domain, *kind)),
        Some(FileKind::SocketPair { .. }) => Ok((libc::AF_UNIX, libc::SOCK_STREAM)),
        Some(_) => Err(libc::ENOTSOCK),
        None => Err(libc::EBADF),
    }
}

fn sys_socket(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let domain = a[0] as i32;
    let kind = a[1] as i32 & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
    if !matches!(domain, libc::AF_UNIX | libc::AF_INET | libc::AF_INET6) {
        return err(libc::EAFNOSUPPORT);
    }
    if !matches!(
        kind,
        libc::SOCK_STREAM | libc::SOCK_DGRAM | libc::SOCK_SEQPACKET
    ) {
        return err(libc::EINVAL);
    }
    let file = OpenFile {
        kind: FileKind::Socket { domain, kind },
        path: String::new(),
        offset: 0,
        flags: libc::O_RDWR | (a[1] as i32 & libc::SOCK_NONBLOCK),
    };
    let cloexec = a[1] as i32 & libc::SOCK_CLOEXEC != 0;
    match k.files.install(file, cloexec, 0) {
        Ok(fd) => SysResult::Ret(fd.into()),
        Err(e) => err(e),
    }
}

/// What connecting to the address at `addr` (`len` bytes) finds.
fn reach(k: &mut Kernel, domain: i32, addr: u64, len: u64) -> i32 {
    if !(2..=128).contains(&len) {
        return libc::EINVAL;
    }
    let mut raw = vec![0u8; len as usize];
    if k.read(addr, &mut raw).is_err() {
        return libc::EFAULT;
    }
    let family = i32::from(u16::from_le_bytes([raw[0], raw[1]]));
    if family != domain {
        return libc::EAFNOSUPPORT;
    }
    match family {
        libc::AF_UNIX => {
            let path = &raw[2..];
            // An abstract name (a leading NUL) lives in no file tree.
            if path.first() == Some(&0) || path.is_empty() {
                return libc::ECONNREFUSED;
            }
            let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
            let path = String::from_utf8_lossy(&path[..end]).into_owned();
            let path = k.vfs.normalize(None, &path);
            if k.vfs.resolve(&path, true).exists() {
                libc::ECONNREFUSED
            } else {
                libc::ENOENT
            }
        }
        libc::AF_INET if raw.len() >= 8 => {
            // Nothing listens on loopback; there is no other network.
            if raw[4] == 127 {
                libc::ECONNREFUSED
            } else {
                libc::ENETUNREACH
            }
        }
        libc::AF_INET6 if raw.len() >= 24 => {
            let loopback = raw[8..23].iter().all(|&b| b == 0) && raw[23] == 1;
            if loopback {
                libc::ECONNREFUSED
            } else {
                libc::ENETUNREACH
            }
        }
        _ => libc::EINVAL,
    }
}

fn sys_connect(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    match socket_of(k, a[0]) {
        Ok((domain, _)) => err(reach(k, domain, a[1], a[2])),
        Err(e) => err(e),
    }
}

/// A socket pair's end behind `fd` and whether a call on it must not wait
/// (O_NONBLOCK, or MSG_DONTWAIT in `flags`).
fn pair_of(k: &Kernel, fd: u64, flags: u64) -> Option<(u64, u64, bool)> {
    let f = k.files.get(fd as i32)?;
    let FileKind::SocketPair { rx, tx } = f.kind else {
        return None;
    };
    let nonblock = f.flags & libc::O_NONBLOCK != 0 || flags as i32 & libc::MSG_DONTWAIT != 0;
    Some((rx, tx, nonblock))
}

fn sys_sendto(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    if let Some((_, tx, nonblock)) = pair_of(k, a[0], a[3]) {
        let mut data = vec![0u8; (a[2] as usize).min(1 << 20)];
        if k.read(a[1], &mut data).is_err() {
            return err(libc::EFAULT);
        }
        return super::sys_pipe::write(k, tx, nonblock, &data, libc::SYS_sendto as u64);
    }
    match socket_of(k, a[0]) {
        Ok((domain, libc::SOCK_DGRAM)) if a[4] != 0 => err(reach(k, domain, a[4], a[5])),
        Ok(_) => err(libc::ENOTCONN),
        Err(e) => err(e),
    }
}

fn sys_recvfrom(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    if let Some((rx, _, nonblock)) = pair_of(k, a[0], a[3]) {
        // The peer's address, if asked for, is unnamed: length 0.
        if a[5] != 0 && k.write(a[5], &0u32.to_le_bytes()).is_err() {
            return err(libc::EFAULT);
        }
        return super::sys_pipe::read(k, rx, nonblock, a[1], a[2], libc::SYS_recvfrom as u64);
    }
    match socket_of(k, a[0]) {
        Ok(_) => err(libc::ENOTCONN),
        Err(e) => err(e),
    }
}

fn sys_shutdown(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    match socket_of(k, a[0]) {
        Ok(_) => err(libc::ENOTCONN),
        Err(e) => err(e),
    }
}

/// Writes the unnamed address of `domain` to `addr`, as much as `*len`
/// allows, and its full length to `*len`.
fn write_unnamed(k: &mut Kernel, domain: i32, addr: u64, len_at: u64) -> SysResult {
    let mut len = [0u8; 4];
    if k.read(len_at, &mut len).is_err() {
        return err(libc::EFAULT);
    }
    let room = i32::from_le_bytes(len);
    if room < 0 {
        return err(libc::EINVAL);
    }
    let mut name = (domain as u16).to_le_bytes().to_vec();
    match domain {
        libc::AF_INET => name.resize(16, 0),
        libc::AF_INET6 => name.resize(28, 0),
        _ => {}
    }
    let n = name.len().min(room as usize);
    if k.write(addr, &name[..n]).is_err()
        || k.write(len_at, &(name.len() as u32).to_le_bytes()).is_err()
    {
        return err(libc::EFAULT);
    }
    SysResult::Ret(0)
}

fn sys_getsockname(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    match socket_of(k, a[0]) {
        Ok((domain, _)) => write_unnamed(k, domain, a[1], a[2]),
        Err(e) => err(e),
    }
}

fn sys_getpeername(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    if pair_of(k, a[0], 0).is_some() {
        return write_unnamed(k, libc::AF_UNIX, a[1], a[2]);
    }
    match socket_of(k, a[0]) {
        Ok(_) => err(libc::ENOTCONN),
        Err(e) => err(e),
    }
}

fn sys_setsockopt(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    match socket_of(k, a[0]) {
        Ok(_) => SysResult::Ret(0),
        Err(e) => err(e),
    }
}

fn sys_getsockopt(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let (domain, kind) = match socket_of(k, a[0]) {
        Ok(s) => s,
        Err(e) => return err(e),
    };
    let value = match (a[1] as i32, a[2] as i32) {
        (libc::SOL_SOCKET, libc::SO_ERROR) => 0,
        (libc::SOL_SOCKET, libc::SO_TYPE) => kind,
        (libc::SOL_SOCKET, libc::SO_DOMAIN) => domain,
        _ => return err(libc::ENOPROTOOPT),
    };
    let mut len = [0u8; 4];
    if k.read(a[4], &mut len).is_err() {
        return err(libc::EFAULT);
    }
    if (i32::from_le_bytes(len)) < 4 {
        return err(libc::EINVAL);
    }
    if k.write(a[3], &value.to_le_bytes()).is_err() || k.write(a[4], &4i32.to_le_bytes()).is_err() {
        return err(libc::EFAULT);
    }
    SysResult::Ret(0)
}
