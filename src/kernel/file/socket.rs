//! Sockets on a machine with no network: unix sockets and loopback TCP
//! between the guest's own threads and processes, implemented in the
//! monitor. A stream socket bound to a name (a unix path or abstract name,
//! or a loopback port) and listening takes connections; a connection is a
//! pair of pipes, one each way, like `socketpair`'s. Every other address
//! finds nobody listening.
//!
//! That is what programs meet most: the C library's user and group lookups
//! try the name service cache daemon's socket first (`ls -l`, `whoami`,
//! `tar`), syslog tries `/dev/log`, and a host without those answers
//! ENOENT or ECONNREFUSED, after which the program goes on without them.
//! The answers depend only on the guest's own file tree, so they are the
//! same in every run.

use std::collections::{BTreeMap, VecDeque};

use crate::kernel::files::FileKind;
use crate::kernel::ready::Ready;
use crate::kernel::thread::Wait;
use crate::kernel::vfs::{Resolved, parent_of};
use crate::kernel::{Kernel, SysResult, err};

/// A name a socket can be bound to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Name {
    /// A unix socket's path (normalized) or, with a leading NUL, its
    /// abstract name.
    Unix(String),
    /// A loopback port, by address family.
    Inet { family: i32, port: u16 },
}

/// A bound socket.
#[derive(Clone, Debug)]
pub(in crate::kernel) struct Bound {
    pub(in crate::kernel) name: Name,
    pub(in crate::kernel) listening: bool,
    /// Connections made and not accepted yet: each the `(rx, tx)` pipes
    /// of the accepting end.
    pub(in crate::kernel) queue: VecDeque<(u64, u64)>,
    /// A datagram socket: its received datagrams (with their senders'
    /// names) and the peer `connect` gave it.
    pub(in crate::kernel) datagram: bool,
    pub(in crate::kernel) datagrams: VecDeque<(Vec<u8>, Option<Name>)>,
    /// The bytes `datagrams` hold.
    pub(in crate::kernel) datagram_bytes: usize,
    pub(in crate::kernel) peer: Option<Name>,
}

/// What a datagram socket's receive queue holds at most, as Linux's
/// defaults (`rmem_default`, `net.unix.max_dgram_qlen`): past either, a
/// unix datagram waits for room (EAGAIN when it may not) and a UDP one is
/// lost, so nothing a guest sends grows without bound.
const DATAGRAM_QUEUE_BYTES: usize = 212_992;
const DATAGRAM_QUEUE_LEN: usize = 512;

/// Every bound socket, and the names they hold.
#[derive(Clone, Debug, Default)]
pub struct Sockets {
    bound: BTreeMap<u64, Bound>,
    names: BTreeMap<Name, u64>,
    next: u64,
    next_port: u16,
    /// The pipe ends of connections waiting to be accepted, (pipe, the
    /// write end), each counted once per queue entry: they are open.
    queued: BTreeMap<(u64, bool), u32>,
}

impl Sockets {
    /// Bound socket `id`.
    pub(in crate::kernel) fn bound(&self, id: u64) -> Option<&Bound> {
        self.bound.get(&id)
    }

    /// Bound socket `id`, to change.
    pub(in crate::kernel) fn bound_mut(&mut self, id: u64) -> Option<&mut Bound> {
        self.bound.get_mut(&id)
    }

    /// Whether no socket is bound.
    pub fn is_empty(&self) -> bool {
        self.bound.is_empty()
    }

    /// Whether a connection waiting to be accepted holds pipe `id`'s
    /// read (or, with `write`, write) end.
    pub fn queues_end(&self, id: u64, write: bool) -> bool {
        self.queued.contains_key(&(id, write))
    }

    /// Counts (or, with `add` false, uncounts) the ends a queued
    /// connection holds: it reads `rx` and writes `tx`.
    fn count_queued(&mut self, (rx, tx): (u64, u64), add: bool) {
        for end in [(rx, false), (tx, true)] {
            let n = self.queued.entry(end).or_default();
            if add {
                *n += 1;
            } else {
                *n -= 1;
                if *n == 0 {
                    self.queued.remove(&end);
                }
            }
        }
    }

    /// Queues connection `ends` on listener `id` (at the front when it
    /// goes back), if the listener is still there.
    pub(in crate::kernel) fn enqueue(&mut self, id: u64, ends: (u64, u64), front: bool) {
        if let Some(b) = self.bound.get_mut(&id) {
            if front {
                b.queue.push_front(ends);
            } else {
                b.queue.push_back(ends);
            }
            self.count_queued(ends, true);
        }
    }

    /// Takes the oldest connection queued on listener `id`.
    pub(in crate::kernel) fn dequeue(&mut self, id: u64) -> Option<(u64, u64)> {
        let ends = self.bound.get_mut(&id)?.queue.pop_front()?;
        self.count_queued(ends, false);
        Some(ends)
    }

    /// Removes bound socket `id`: its name is free again; the connections
    /// it never accepted come back.
    fn remove(&mut self, id: u64) -> Vec<(u64, u64)> {
        let Some(b) = self.bound.remove(&id) else {
            return Vec::new();
        };
        self.names.remove(&b.name);
        for ends in &b.queue {
            self.count_queued(*ends, false);
        }
        b.queue.into_iter().collect()
    }

    /// Whether bound socket `id` has a connection to accept or a datagram
    /// to read.
    pub fn has_queued(&self, id: u64) -> bool {
        self.bound
            .get(&id)
            .is_some_and(|b| !b.queue.is_empty() || !b.datagrams.is_empty())
    }
}

/// Bound socket `id` goes (its last description closed): its name is
/// free again. The connections it never accepted, whose pipes go too.
pub(in crate::kernel) fn forget(k: &mut Kernel, id: u64) -> Vec<(u64, u64)> {
    k.sockets.remove(id)
}

/// The bound socket `name` leads to, if any: a unix path leads through
/// the socket node `bind` made there (moved by rename, gone at unlink),
/// other names through the table of names.
pub(in crate::kernel) fn holder(k: &mut Kernel, name: &Name) -> Option<u64> {
    let id = match name {
        Name::Unix(path) if !path.starts_with('\0') => match k.vfs.resolve(path, true) {
            Resolved::Socket { id, .. } => id,
            _ => return None,
        },
        _ => *k.sockets.names.get(name)?,
    };
    k.sockets.bound.contains_key(&id).then_some(id)
}

/// The listening socket `name` leads to, if any.
pub(in crate::kernel) fn listener(k: &mut Kernel, name: &Name) -> Option<u64> {
    let id = holder(k, name)?;
    k.sockets.bound.get(&id)?.listening.then_some(id)
}

/// A free loopback port (an ephemeral one, the same in every run).
pub(in crate::kernel) fn free_port(k: &mut Kernel, family: i32) -> u16 {
    loop {
        let port = 32768 + (k.sockets.next_port % 28232);
        k.sockets.next_port = k.sockets.next_port.wrapping_add(1);
        if !k.sockets.names.contains_key(&Name::Inet { family, port }) {
            return port;
        }
    }
}

/// Binds the socket at `fd` (of `domain`, `kind`) to `name`.
pub(in crate::kernel) fn bind_to(
    k: &mut Kernel,
    fd: u64,
    domain: i32,
    kind: i32,
    name: Name,
) -> SysResult {
    let name = match name {
        Name::Inet { family, port: 0 } => Name::Inet {
            family,
            port: free_port(k, family),
        },
        n => n,
    };
    let id = k.sockets.next;
    match &name {
        // A unix path names a socket node in the file tree, as on Linux:
        // it stays after the socket closes until someone unlinks it.
        Name::Unix(path) if !path.starts_with('\0') => {
            if k.vfs.resolve(path, false).exists() {
                return err(libc::EADDRINUSE);
            }
            if !k.vfs.resolve(&parent_of(path), true).is_dir() {
                return err(k.vfs.absent_errno(path));
            }
            let mode = 0o777 & !k.vfs.umask;
            k.vfs.put_socket(path, id, mode);
        }
        _ => {
            if k.sockets.names.contains_key(&name) {
                return err(libc::EADDRINUSE);
            }
            k.sockets.names.insert(name.clone(), id);
        }
    }
    k.sockets.next += 1;
    k.sockets.bound.insert(
        id,
        Bound {
            name,
            listening: false,
            queue: VecDeque::new(),
            datagram: kind == libc::SOCK_DGRAM,
            datagrams: VecDeque::new(),
            datagram_bytes: 0,
            peer: None,
        },
    );
    k.files_mut()
        .set_kind(fd as i32, FileKind::BoundSocket { domain, kind, id });
    SysResult::Ret(0)
}

/// Gives socket `fd` a name if it has none (an ephemeral port, or an
/// abstract unix name), as Linux's autobind does at `listen` or at a
/// datagram socket's first send or `connect`; its id.
pub(in crate::kernel) fn autobind(k: &mut Kernel, fd: u64) -> Result<u64, i32> {
    match k.files().get(fd as i32).map(|f| f.kind.clone()) {
        Some(FileKind::BoundSocket { id, .. }) => Ok(id),
        Some(FileKind::Socket { domain, kind }) => {
            let name = if domain == libc::AF_UNIX {
                Name::Unix(format!("\0{:05x}", k.sockets.next))
            } else {
                Name::Inet {
                    family: domain,
                    port: 0,
                }
            };
            match bind_to(k, fd, domain, kind, name) {
                SysResult::Ret(e) if e < 0 => Err(-e as i32),
                _ => Ok(k.sockets.next - 1),
            }
        }
        Some(_) => Err(libc::ENOTSOCK),
        None => Err(libc::EBADF),
    }
}

/// The bound datagram socket behind `fd`: its id, and whether a call on
/// it must not wait.
pub(in crate::kernel) fn datagram_of(k: &Kernel, fd: u64, flags: u64) -> Option<(u64, bool)> {
    let f = k.files().get(fd as i32)?;
    let FileKind::BoundSocket {
        kind: libc::SOCK_DGRAM,
        id,
        ..
    } = f.kind
    else {
        return None;
    };
    let nonblock = k.nonblocking(f) || flags as i32 & libc::MSG_DONTWAIT != 0;
    Some((id, nonblock))
}

/// Sends `data` as one datagram from socket `fd` to `to` (or its peer);
/// a send that waits for room is system call `nr` re-executed.
pub(in crate::kernel) fn send_datagram(
    k: &mut Kernel,
    (fd, flags, nr): (u64, u64, u64),
    domain: i32,
    data: Vec<u8>,
    to: Option<Name>,
) -> SysResult {
    let from = match autobind(k, fd) {
        Ok(id) => id,
        Err(e) => return err(e),
    };
    let Some(to) = to.or_else(|| k.sockets.bound.get(&from).and_then(|b| b.peer.clone())) else {
        return err(libc::EDESTADDRREQ);
    };
    let sender = k.sockets.bound.get(&from).map(|b| b.name.clone());
    let receiver = holder(k, &to).filter(|id| k.sockets.bound.get(id).is_some_and(|b| b.datagram));
    let n = data.len() as i64;
    match receiver {
        Some(id) => {
            let nonblock = k.files().get(fd as i32).is_some_and(|f| k.nonblocking(f))
                || flags as i32 & libc::MSG_DONTWAIT != 0;
            let Some(b) = k.sockets.bound.get_mut(&id) else {
                return SysResult::Ret(n);
            };
            if data.len() > DATAGRAM_QUEUE_BYTES {
                return err(libc::EMSGSIZE);
            }
            let full = b.datagrams.len() >= DATAGRAM_QUEUE_LEN
                || b.datagram_bytes + data.len() > DATAGRAM_QUEUE_BYTES;
            match (full, domain == libc::AF_UNIX) {
                (true, false) => return SysResult::Ret(n),
                (true, true) if nonblock => return err(libc::EAGAIN),
                (true, true) => {
                    return SysResult::Block(Wait::Readable {
                        fd: fd as i32,
                        nr,
                        on: Ready::Socket(id),
                    });
                }
                (false, _) => {}
            }
            b.datagram_bytes += data.len();
            b.datagrams.push_back((data, sender));
            k.pipes.note_activity();
            k.touch(Ready::Socket(id));
            SysResult::Ret(n)
        }
        // Nobody bound there: a unix datagram is refused; a UDP one is
        // sent and lost, as on Linux.
        None if domain == libc::AF_UNIX => err(libc::ECONNREFUSED),
        None => SysResult::Ret(n),
    }
}

/// Receives one datagram on bound socket `id`, scattered over `bufs`,
/// with the sender's address to `addr`/`len_at` when asked; waits (system
/// call `nr` re-executed) when none is there. The bytes delivered, and
/// whether the datagram was longer (the rest is lost, as on Linux).
pub(in crate::kernel) fn receive_datagram(
    k: &mut Kernel,
    (fd, id, nonblock): (u64, u64, bool),
    bufs: &[(u64, u64)],
    (addr, len_at): (u64, u64),
    nr: u64,
) -> Result<(usize, bool), SysResult> {
    let Some((data, from)) = k.sockets.bound.get_mut(&id).and_then(|b| {
        let d = b.datagrams.pop_front()?;
        b.datagram_bytes -= d.0.len();
        Some(d)
    }) else {
        if nonblock {
            return Err(err(libc::EAGAIN));
        }
        return Err(SysResult::Block(Wait::Readable {
            fd: fd as i32,
            nr,
            on: Ready::Socket(id),
        }));
    };
    // A sender waiting for room may go on.
    k.pipes.note_activity();
    k.touch(Ready::Socket(id));
    let mut done = 0usize;
    for (base, len) in bufs {
        let n = (*len as usize).min(data.len() - done);
        if k.write(*base, &data[done..done + n]).is_err() {
            return Err(err(libc::EFAULT));
        }
        done += n;
    }
    if addr != 0 {
        let r = match &from {
            Some(name) => write_name(k, name, addr, len_at),
            None => write_unnamed(k, libc::AF_UNIX, addr, len_at),
        };
        if let SysResult::Ret(e) = r {
            if e < 0 {
                return Err(SysResult::Ret(e));
            }
        }
    }
    Ok((done, done < data.len()))
}

/// `read` on a datagram socket: one datagram.
pub(in crate::kernel) fn read_datagram(
    k: &mut Kernel,
    fd: u64,
    buf: u64,
    len: u64,
) -> Option<SysResult> {
    let (id, nonblock) = datagram_of(k, fd, 0)?;
    let nr = libc::SYS_read as u64;
    Some(
        match receive_datagram(k, (fd, id, nonblock), &[(buf, len)], (0, 0), nr) {
            Ok((n, _)) => SysResult::Ret(n as i64),
            Err(r) => r,
        },
    )
}

/// `write` on a datagram socket: one datagram to its peer.
pub(in crate::kernel) fn write_datagram(k: &mut Kernel, fd: u64, data: &[u8]) -> Option<SysResult> {
    let write = libc::SYS_write as u64;
    match k.files().get(fd as i32)?.kind {
        FileKind::BoundSocket {
            domain,
            kind: libc::SOCK_DGRAM,
            ..
        }
        | FileKind::Socket {
            domain,
            kind: libc::SOCK_DGRAM,
        } => Some(send_datagram(
            k,
            (fd, 0, write),
            domain,
            data.to_vec(),
            None,
        )),
        _ => None,
    }
}

/// Writes the socket address `bytes` to `addr`, as much as `*len_at`
/// allows, and its full length to `*len_at`, as Linux's calls that return
/// an address do.
pub(in crate::kernel) fn write_address(
    k: &mut Kernel,
    bytes: &[u8],
    addr: u64,
    len_at: u64,
) -> SysResult {
    let mut len = [0u8; 4];
    if k.read(len_at, &mut len).is_err() {
        return err(libc::EFAULT);
    }
    let room = i32::from_le_bytes(len);
    if room < 0 {
        return err(libc::EINVAL);
    }
    let n = bytes.len().min(room as usize);
    if k.write(addr, &bytes[..n]).is_err()
        || k.write(len_at, &(bytes.len() as u32).to_le_bytes())
            .is_err()
    {
        return err(libc::EFAULT);
    }
    SysResult::Ret(0)
}

/// Writes the unnamed address of `domain` (see [`write_address`]).
pub(in crate::kernel) fn write_unnamed(
    k: &mut Kernel,
    domain: i32,
    addr: u64,
    len_at: u64,
) -> SysResult {
    let mut name = (domain as u16).to_le_bytes().to_vec();
    match domain {
        libc::AF_INET => name.resize(16, 0),
        libc::AF_INET6 => name.resize(28, 0),
        _ => {}
    }
    write_address(k, &name, addr, len_at)
}

/// Writes the address of `name` (see [`write_address`]).
pub(in crate::kernel) fn write_name(
    k: &mut Kernel,
    name: &Name,
    addr: u64,
    len_at: u64,
) -> SysResult {
    let bytes = match name {
        Name::Unix(path) => {
            let mut b = (libc::AF_UNIX as u16).to_le_bytes().to_vec();
            b.extend_from_slice(path.as_bytes());
            if !path.starts_with('\0') {
                b.push(0);
            }
            b
        }
        Name::Inet { family, port } => {
            let mut b = (*family as u16).to_le_bytes().to_vec();
            b.extend_from_slice(&port.to_be_bytes());
            if *family == libc::AF_INET {
                b.extend_from_slice(&[127, 0, 0, 1]);
                b.resize(16, 0);
            } else {
                b.resize(28, 0);
                b[23] = 1;
            }
            b
        }
    };
    write_address(k, &bytes, addr, len_at)
}
