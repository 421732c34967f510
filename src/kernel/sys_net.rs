//! The socket calls: making, binding, listening, connecting, accepting,
//! sending and receiving, names and options (the sockets are
//! `file::socket`'s).

use super::call::{SyscallDef, def};
use super::file::socket::{
    Name, autobind, bind_to, datagram_of, holder, listener, receive_datagram, send_datagram,
    write_name, write_unnamed,
};
use super::files::{FileKind, OpenFile};
use super::ready::Ready;
use super::thread::Wait;
use super::{FpuAccess, Kernel, SysResult, err};

pub const CALLS: &[SyscallDef] = &[
    def(
        libc::SYS_socket,
        sys_socket,
        "unix, inet and inet6 sockets; streams connect to the guest's own listeners",
    ),
    def(
        libc::SYS_connect,
        sys_connect,
        "stream sockets to a listening unix name or loopback port; elsewhere unix: ENOENT for a missing path, ECONNREFUSED otherwise; inet: ECONNREFUSED on loopback, ENETUNREACH elsewhere",
    ),
    def(
        libc::SYS_bind,
        sys_bind,
        "unix paths (a socket node appears there, and stays until unlinked) and abstract names, loopback and any-address ports",
    ),
    def(libc::SYS_listen, sys_listen, "stream sockets"),
    def(libc::SYS_accept, sys_accept, ""),
    def(
        libc::SYS_accept4,
        sys_accept4,
        "SOCK_NONBLOCK and SOCK_CLOEXEC",
    ),
    def(
        libc::SYS_sendmsg,
        sys_sendmsg,
        "without ancillary data (passing descriptors is not modelled)",
    ),
    def(
        libc::SYS_recvmsg,
        sys_recvmsg,
        "a stream fills its first buffer; no ancillary data comes back",
    ),
    def(
        libc::SYS_sendto,
        sys_sendto,
        "streams: connected ones; datagrams: to a bound unix name or loopback port (to nobody: unix ECONNREFUSED, UDP lost)",
    ),
    def(
        libc::SYS_recvfrom,
        sys_recvfrom,
        "connected streams and bound datagram sockets",
    ),
    def(
        libc::SYS_shutdown,
        sys_shutdown,
        "connected stream sockets: the peer sees the end",
    ),
    def(libc::SYS_setsockopt, sys_setsockopt, "accepted and ignored"),
    def(
        libc::SYS_getsockname,
        sys_getsockname,
        "a bound socket's name; others are unnamed (inet: the any address)",
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
    match k.files().get(fd as i32).map(|f| &f.kind) {
        Some(FileKind::Socket { domain, kind }) => Ok((*domain, *kind)),
        Some(FileKind::BoundSocket { domain, kind, .. }) => Ok((*domain, *kind)),
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
        shared: None,
    };
    let cloexec = a[1] as i32 & libc::SOCK_CLOEXEC != 0;
    match k.files_mut().install(file, cloexec, 0) {
        Ok(fd) => SysResult::Ret(fd.into()),
        Err(e) => err(e),
    }
}

/// Reads a socket address of `domain`: its name, when it is one a
/// socket here can hold (a unix name, or a loopback or any-address port),
/// or the errno.
fn read_name(k: &mut Kernel, domain: i32, addr: u64, len: u64) -> Result<Option<Name>, i32> {
    if !(2..=128).contains(&len) {
        return Err(libc::EINVAL);
    }
    let mut raw = vec![0u8; len as usize];
    k.read(addr, &mut raw).map_err(|_| libc::EFAULT)?;
    let family = i32::from(u16::from_le_bytes([raw[0], raw[1]]));
    if family != domain {
        return Err(libc::EAFNOSUPPORT);
    }
    Ok(match family {
        libc::AF_UNIX => {
            let path = &raw[2..];
            if path.is_empty() {
                return Ok(None);
            }
            if path[0] == 0 {
                let name = String::from_utf8_lossy(path).into_owned();
                Some(Name::Unix(name))
            } else {
                let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
                let p = String::from_utf8_lossy(&path[..end]).into_owned();
                Some(Name::Unix(k.absolute(&p)))
            }
        }
        libc::AF_INET if raw.len() >= 8 => {
            let port = u16::from_be_bytes([raw[2], raw[3]]);
            let local = raw[4] == 127 || raw[4..8] == [0, 0, 0, 0];
            local.then_some(Name::Inet { family, port })
        }
        libc::AF_INET6 if raw.len() >= 24 => {
            let port = u16::from_be_bytes([raw[2], raw[3]]);
            let any = raw[8..24].iter().all(|&b| b == 0);
            let loopback = raw[8..23].iter().all(|&b| b == 0) && raw[23] == 1;
            (any || loopback).then_some(Name::Inet { family, port })
        }
        _ => return Err(libc::EINVAL),
    })
}

fn sys_bind(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let (domain, kind) = match k.files().get(a[0] as i32).map(|f| &f.kind) {
        Some(FileKind::Socket { domain, kind }) => (*domain, *kind),
        Some(FileKind::BoundSocket { .. } | FileKind::SocketPair { .. }) => {
            return err(libc::EINVAL);
        }
        Some(_) => return err(libc::ENOTSOCK),
        None => return err(libc::EBADF),
    };
    let name = match read_name(k, domain, a[1], a[2]) {
        Ok(Some(n)) => n,
        // An empty unix path; an address of another host.
        Ok(None) if domain == libc::AF_UNIX => return err(libc::EINVAL),
        Ok(None) => return err(libc::EADDRNOTAVAIL),
        Err(e) => return err(e),
    };
    bind_to(k, a[0], domain, kind, name)
}

fn sys_listen(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let kind = match k.files().get(a[0] as i32).map(|f| &f.kind) {
        Some(FileKind::Socket { kind, .. } | FileKind::BoundSocket { kind, .. }) => *kind,
        Some(FileKind::SocketPair { .. }) => return err(libc::EINVAL),
        Some(_) => return err(libc::ENOTSOCK),
        None => return err(libc::EBADF),
    };
    if kind == libc::SOCK_DGRAM {
        return err(libc::EOPNOTSUPP);
    }
    let id = match autobind(k, a[0]) {
        Ok(id) => id,
        Err(e) => return err(e),
    };
    if let Some(b) = k.sockets.bound_mut(id) {
        b.listening = true;
    }
    SysResult::Ret(0)
}

fn sys_accept(k: &mut Kernel, cpu: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    accept(k, cpu, [a[0], a[1], a[2], 0, 0, 0], libc::SYS_accept as u64)
}

fn sys_accept4(k: &mut Kernel, cpu: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    accept(k, cpu, a, libc::SYS_accept4 as u64)
}

fn accept(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6], nr: u64) -> SysResult {
    let [fd, addr, len_at, flags, ..] = a;
    if flags as i32 & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) != 0 {
        return err(libc::EINVAL);
    }
    let (domain, id, nonblock) = match k.files().get(fd as i32) {
        Some(f) => match f.kind {
            FileKind::BoundSocket { domain, id, .. } => (domain, id, k.nonblocking(f)),
            FileKind::Socket { .. } | FileKind::SocketPair { .. } => return err(libc::EINVAL),
            _ => return err(libc::ENOTSOCK),
        },
        None => return err(libc::EBADF),
    };
    let Some(b) = k.sockets.bound(id) else {
        return err(libc::EINVAL);
    };
    if !b.listening {
        return err(libc::EINVAL);
    }
    let Some((rx, tx)) = k.sockets.dequeue(id) else {
        if nonblock {
            return err(libc::EAGAIN);
        }
        return SysResult::Block(Wait::Readable {
            fd: fd as i32,
            nr,
            on: Ready::Socket(id),
        });
    };
    let file = OpenFile {
        kind: FileKind::SocketPair { rx, tx },
        path: String::new(),
        offset: 0,
        flags: libc::O_RDWR | (flags as i32 & libc::SOCK_NONBLOCK),
        shared: None,
    };
    let new = match k
        .files_mut()
        .install(file, flags as i32 & libc::SOCK_CLOEXEC != 0, 0)
    {
        Ok(n) => n,
        Err(e) => {
            k.sockets.enqueue(id, (rx, tx), true);
            return err(e);
        }
    };
    if addr != 0 {
        if let SysResult::Ret(e) = write_unnamed(k, domain, addr, len_at) {
            if e < 0 {
                return SysResult::Ret(e);
            }
        }
    }
    SysResult::Ret(new as i64)
}

/// Connects the stream socket at `fd` to listener `id`: a pair of pipes,
/// one end the socket, the other queued for `accept`.
fn connect_to(k: &mut Kernel, fd: u64, id: u64) -> SysResult {
    let (to_server, to_client) = match super::file::pipe::new_connection(k) {
        Ok(ends) => ends,
        Err(e) => return err(e),
    };
    k.sockets.enqueue(id, (to_server, to_client), false);
    k.touch(Ready::Socket(id));
    k.files_mut().set_kind(
        fd as i32,
        FileKind::SocketPair {
            rx: to_client,
            tx: to_server,
        },
    );
    SysResult::Ret(0)
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
            let path = k.absolute(&path);
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
    let (domain, kind) = match k.files().get(a[0] as i32).map(|f| &f.kind) {
        Some(FileKind::SocketPair { .. }) => return err(libc::EISCONN),
        Some(FileKind::BoundSocket { id, .. })
            if k.sockets.bound(*id).is_some_and(|b| b.listening) =>
        {
            return err(libc::EINVAL);
        }
        _ => match socket_of(k, a[0]) {
            Ok(s) => s,
            Err(e) => return err(e),
        },
    };
    let name = match read_name(k, domain, a[1], a[2]) {
        Ok(n) => n,
        Err(e) => return err(e),
    };
    if kind == libc::SOCK_DGRAM {
        // A datagram socket's connect names its peer.
        let Some(name) = name else {
            return err(reach(k, domain, a[1], a[2]));
        };
        let unix_nobody = domain == libc::AF_UNIX && holder(k, &name).is_none();
        if unix_nobody {
            return err(reach(k, domain, a[1], a[2]));
        }
        let id = match autobind(k, a[0]) {
            Ok(id) => id,
            Err(e) => return err(e),
        };
        if let Some(b) = k.sockets.bound_mut(id) {
            b.peer = Some(name);
        }
        return SysResult::Ret(0);
    }
    if let Some(id) = name.and_then(|n| listener(k, &n)) {
        return connect_to(k, a[0], id);
    }
    err(reach(k, domain, a[1], a[2]))
}

/// A socket pair's end behind `fd` and whether a call on it must not wait
/// (O_NONBLOCK, or MSG_DONTWAIT in `flags`).
fn pair_of(k: &Kernel, fd: u64, flags: u64) -> Option<(u64, u64, bool)> {
    let f = k.files().get(fd as i32)?;
    let FileKind::SocketPair { rx, tx } = f.kind else {
        return None;
    };
    let nonblock = k.nonblocking(f) || flags as i32 & libc::MSG_DONTWAIT != 0;
    Some((rx, tx, nonblock))
}

/// Reads the data of a send: `len` bytes at `buf`.
fn send_data(k: &mut Kernel, buf: u64, len: u64) -> Result<Vec<u8>, i32> {
    let mut data = vec![0u8; (len as usize).min(1 << 20)];
    k.read(buf, &mut data).map_err(|_| libc::EFAULT)?;
    Ok(data)
}

fn sys_sendto(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let data = match send_data(k, a[1], a[2]) {
        Ok(d) => d,
        Err(e) => return err(e),
    };
    send(k, a[0], data, a[3], a[4], a[5], libc::SYS_sendto as u64)
}

/// A send of `data` on socket `fd` to the address at `addr` (`alen`
/// bytes), or to its peer.
fn send(
    k: &mut Kernel,
    fd: u64,
    data: Vec<u8>,
    flags: u64,
    addr: u64,
    alen: u64,
    nr: u64,
) -> SysResult {
    if let Some((_, tx, nonblock)) = pair_of(k, fd, flags) {
        return super::file::pipe::write(k, tx, nonblock, &data, nr);
    }
    match socket_of(k, fd) {
        Ok((domain, libc::SOCK_DGRAM)) => {
            let to = if addr != 0 {
                match read_name(k, domain, addr, alen) {
                    // A unix name nobody holds: as connecting to it (ENOENT
                    // for a missing path).
                    Ok(Some(n)) if domain == libc::AF_UNIX && holder(k, &n).is_none() => {
                        return err(reach(k, domain, addr, alen));
                    }
                    Ok(Some(n)) => Some(n),
                    Ok(None) => return err(reach(k, domain, addr, alen)),
                    Err(e) => return err(e),
                }
            } else {
                None
            };
            send_datagram(k, (fd, flags, nr), domain, data, to)
        }
        Ok(_) => err(libc::ENOTCONN),
        Err(e) => err(e),
    }
}

fn sys_recvfrom(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    receive(
        k,
        a[0],
        a[1],
        a[2],
        a[3],
        a[4],
        a[5],
        libc::SYS_recvfrom as u64,
    )
}

/// A receive on socket `fd` into `len` bytes at `buf`, with the sender's
/// address to `addr`/`len_at` when asked.
#[allow(clippy::too_many_arguments)]
fn receive(
    k: &mut Kernel,
    fd: u64,
    buf: u64,
    len: u64,
    flags: u64,
    addr: u64,
    len_at: u64,
    nr: u64,
) -> SysResult {
    if let Some((rx, _, nonblock)) = pair_of(k, fd, flags) {
        // The peer's address, if asked for, is unnamed: length 0.
        if addr != 0 && k.write(len_at, &0u32.to_le_bytes()).is_err() {
            return err(libc::EFAULT);
        }
        return super::file::pipe::read(k, rx, nonblock, buf, len, nr);
    }
    if let Some((id, nonblock)) = datagram_of(k, fd, flags) {
        return match receive_datagram(k, (fd, id, nonblock), &[(buf, len)], (addr, len_at), nr) {
            Ok((n, _)) => SysResult::Ret(n as i64),
            Err(r) => r,
        };
    }
    match socket_of(k, fd) {
        Ok(_) => err(libc::ENOTCONN),
        Err(e) => err(e),
    }
}

/// The parts of a `struct msghdr`: the address, the iovecs, the control
/// data's length.
struct MsgHdr {
    name: u64,
    name_len_at: u64,
    iov: Vec<(u64, u64)>,
    control_len: u64,
}

fn read_msghdr(k: &mut Kernel, at: u64) -> Result<MsgHdr, i32> {
    let word = |k: &mut Kernel, off: u64| k.read_u64(at + off).map_err(|_| libc::EFAULT);
    let name = word(k, 0)?;
    let iov_at = word(k, 16)?;
    let iov_len = word(k, 24)?;
    let control_len = word(k, 40)?;
    if iov_len > 1024 {
        return Err(libc::EMSGSIZE);
    }
    let mut iov = Vec::new();
    for i in 0..iov_len {
        let base = k.read_u64(iov_at + i * 16).map_err(|_| libc::EFAULT)?;
        let len = k.read_u64(iov_at + i * 16 + 8).map_err(|_| libc::EFAULT)?;
        iov.push((base, len));
    }
    Ok(MsgHdr {
        name,
        name_len_at: at + 8,
        iov,
        control_len,
    })
}

fn sys_sendmsg(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let m = match read_msghdr(k, a[1]) {
        Ok(m) => m,
        Err(e) => return err(e),
    };
    if m.control_len > 0 {
        return SysResult::Unsupported(
            "sendmsg with ancillary data (passing descriptors or credentials)".into(),
        );
    }
    let mut data = Vec::new();
    for (base, len) in &m.iov {
        match send_data(k, *base, *len) {
            Ok(d) => data.extend_from_slice(&d),
            Err(e) => return err(e),
        }
    }
    let alen = if m.name != 0 {
        match k.read_u32(m.name_len_at) {
            Ok(n) => u64::from(n),
            Err(_) => return err(libc::EFAULT),
        }
    } else {
        0
    };
    send(k, a[0], data, a[2], m.name, alen, libc::SYS_sendmsg as u64)
}

fn sys_recvmsg(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let m = match read_msghdr(k, a[1]) {
        Ok(m) => m,
        Err(e) => return err(e),
    };
    // No control data comes back, and no flags.
    if k.write_u64(a[1] + 40, 0).is_err() || k.write_u32(a[1] + 48, 0).is_err() {
        return err(libc::EFAULT);
    }
    let nr = libc::SYS_recvmsg as u64;
    if let Some((id, nonblock)) = datagram_of(k, a[0], a[2]) {
        // One datagram, scattered over the buffers.
        let to = (a[0], id, nonblock);
        return match receive_datagram(k, to, &m.iov, (m.name, m.name_len_at), nr) {
            Ok((n, cut)) => {
                if cut && k.write_u32(a[1] + 48, libc::MSG_TRUNC as u32).is_err() {
                    return err(libc::EFAULT);
                }
                SysResult::Ret(n as i64)
            }
            Err(r) => r,
        };
    }
    // A stream: into the first buffer with room (a short read, as a
    // stream may give).
    let (buf, len) = m
        .iov
        .iter()
        .copied()
        .find(|(_, l)| *l > 0)
        .unwrap_or((0, 0));
    receive(k, a[0], buf, len, a[2], m.name, m.name_len_at, nr)
}

/// The pipe id a shut-down direction of a connection uses: none, so the
/// peer sees the end (EOF, or EPIPE when it writes).
const SHUT: u64 = u64::MAX;

fn sys_shutdown(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    if a[1] > 2 {
        return err(libc::EINVAL);
    }
    if let Some(&FileKind::SocketPair { rx, tx }) = k.files().get(a[0] as i32).map(|f| &f.kind) {
        let rx = if a[1] != 1 { SHUT } else { rx };
        let tx = if a[1] != 0 { SHUT } else { tx };
        k.files_mut()
            .set_kind(a[0] as i32, FileKind::SocketPair { rx, tx });
        k.pipes.note_activity();
        return SysResult::Ret(0);
    }
    match socket_of(k, a[0]) {
        Ok(_) => err(libc::ENOTCONN),
        Err(e) => err(e),
    }
}

fn sys_getsockname(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    if let Some(FileKind::BoundSocket { id, .. }) = k.files().get(a[0] as i32).map(|f| &f.kind) {
        if let Some(b) = k.sockets.bound(*id) {
            let name = b.name.clone();
            return write_name(k, &name, a[1], a[2]);
        }
    }
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
