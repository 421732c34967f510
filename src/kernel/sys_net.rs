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
        libc::SYS_getsockopt,
        sys_getsockopt,
        "SO_ERROR, SO_TYPE and SO_DOMAIN",
    ),
];

/// The socket behind `fd`, or the errno Linux gives.
fn socket_of(k: &Kernel, fd: u64) -> Result<(i32, i32), i32> {
    match k.files.get(fd as i32).map(|f| &f.kind) {
        Some(FileKind::Socket { domain, kind }) => Ok((*domain, *kind)),
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

fn sys_sendto(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    match socket_of(k, a[0]) {
        Ok((domain, libc::SOCK_DGRAM)) if a[4] != 0 => err(reach(k, domain, a[4], a[5])),
        Ok(_) => err(libc::ENOTCONN),
        Err(e) => err(e),
    }
}

fn sys_recvfrom(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
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
