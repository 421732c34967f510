//! The kernel's open-file objects, apart from the system calls that reach
//! them: what each kind of open file does when it is read, written, polled,
//! stat'ed, sought, asked how much it holds, or let go of.
//!
//! One interface, dispatched here by the description's kind:
//! - [`read`], [`write`] (and [`may_wait`]: whether they can block);
//! - [`readiness`] and [`ready_keys`]: what poll, select and epoll see,
//!   and which objects' changes can alter it;
//! - [`meta::meta_of_fd`]: `fstat`; [`data::seek_len`]: `lseek`;
//!   [`available`]: `FIONREAD`;
//! - [`settle`]: after each call, waiters whose object changed go on, and
//!   objects whose last description went are let go of.
//!
//! Each kind's state and rules live in its own module: [`data`] (host,
//! overlay, generated files, directories, devices), [`pipe`] (pipes,
//! socket pairs, event counters), [`socket`], [`epoll`], [`timerfd`],
//! [`signalfd`], [`pty`] (pseudoterminals). The system-call families (`sys_*.rs`) decode arguments
//! and call these; no object module imports a family.

pub mod data;
pub mod epoll;
pub mod meta;
pub mod pipe;
pub mod pty;
pub mod signalfd;
pub mod socket;
pub mod timerfd;

use crate::ids::Pid;
use crate::kernel::call::ret;
use crate::kernel::files::{FileKind, Held, OpenFile};
use crate::kernel::ready::Ready;
use crate::kernel::thread::{ThreadState, Tid, Wait};
use crate::kernel::{Kernel, SysResult, err};

// ----- waiters and lifetimes

/// Takes up again the calls that waited on a pipe (and the polls) once
/// they can go on: each re-executes its `syscall` instruction. Called
/// after every system call. Only the waiters of what changed are looked
/// at, so a step costs the same however many threads wait beside it.
pub(in crate::kernel) fn settle(k: &mut Kernel) {
    k.sync_files();
    if k.pipes.is_idle() && k.sockets.is_empty() && k.epolls.is_empty() && k.ptys.is_empty() {
        // Nothing anyone could wait on exists: what was let go of or
        // touched is gone already.
        k.changes.take_dropped();
        k.changes.take_touched();
        return;
    }
    let ends = k.pipe_ends();
    k.pipes.ends_now(ends);
    let activity = k.pipes.take_activity();
    let any_activity = k.config.polls_retry_on_any_activity;
    let touched = k.changes.take_touched();
    let mut waiters: std::collections::BTreeSet<Tid> = touched
        .iter()
        .flat_map(|key| k.threads.waiting_on(key))
        .collect();
    if any_activity && activity {
        waiters.extend(k.threads.polls());
    }
    k.changes.count(waiters.len() as u64);
    let ready: Vec<(Tid, u64)> = waiters
        .into_iter()
        .filter_map(|tid| match k.threads[&tid].state() {
            ThreadState::Blocked(Wait::Pipe { id, write, len, nr }) => {
                pipe::can_go(k, *id, *write, *len).then_some((tid, *nr))
            }
            ThreadState::Blocked(Wait::Poll { nr, .. } | Wait::Readable { nr, .. }) => {
                (!any_activity || activity).then_some((tid, *nr))
            }
            _ => None,
        })
        .collect();
    for (tid, nr) in ready {
        k.restart(tid, nr);
    }
    if k.changes.any_dropped() {
        collect(k);
    }
}

/// Forgets the pipes, counters, epolls and bound sockets whose last
/// description went: only those some table let go of since the last
/// look, so a close costs the same however many descriptors are open.
fn collect(k: &mut Kernel) {
    let mut candidates = k.changes.take_dropped();
    while let Some(h) = candidates.pop() {
        if k.held_anywhere(h) {
            continue;
        }
        match h {
            Held::PipeEnd { id, write } => pipe::let_go_of_end(k, id, write),
            Held::Counter(id) => k.pipes.forget_counter(id),
            Held::PtyMaster(id) | Held::PtySlave(id) => pty::let_go_of_end(k, id),
            Held::Epoll(id) => epoll::forget(k, id),
            Held::Bound(id) => {
                // Connections it never accepted go with it: their other
                // ends see the end at the next look.
                for (rx, tx) in socket::forget(k, id) {
                    k.touch(Ready::Pipe(rx));
                    k.touch(Ready::Pipe(tx));
                    candidates.push(Held::PipeEnd {
                        id: rx,
                        write: false,
                    });
                    candidates.push(Held::PipeEnd {
                        id: tx,
                        write: true,
                    });
                }
            }
        }
    }
}

// ----- reading and writing

/// Linux's `access_ok`: the range lies below the end of user space. It is
/// checked before anything is read, so a read at the end of a file into a
/// kernel address is EFAULT, not 0.
fn access_ok(buf: u64, len: u64) -> bool {
    buf.checked_add(len)
        .is_some_and(|end| end <= crate::arch::layout::USER_END)
}

/// Reads up to `len` bytes of descriptor `fd` of any kind into `buf`, at
/// `at` or its offset; a call that waits (an empty pipe) is taken up again
/// as `read`.
pub(in crate::kernel) fn read(
    k: &mut Kernel,
    fd: u64,
    buf: u64,
    len: u64,
    at: Option<u64>,
) -> SysResult {
    if k.files().get(fd as i32).is_some() && !access_ok(buf, len) {
        return err(libc::EFAULT);
    }
    if let Some(r) = socket::read_datagram(k, fd, buf, len) {
        return r;
    }
    let Some(f) = k.files().get(fd as i32) else {
        return err(libc::EBADF);
    };
    let nonblock = k.nonblocking(f);
    let nr = libc::SYS_read as u64;
    match f.kind.clone() {
        FileKind::SocketPair { rx, .. } => pipe::read(k, rx, nonblock, buf, len, nr),
        FileKind::EventFd { id, semaphore } => {
            pipe::read_counter(k, id, semaphore, nonblock, buf, len, nr)
        }
        FileKind::TimerFd { .. } => timerfd::read(k, fd as i32, buf, len, nonblock),
        FileKind::SignalFd { mask } => signalfd::read(k, fd as i32, mask, buf, len, nonblock),
        FileKind::Pipe { write: true, .. } => err(libc::EBADF),
        FileKind::Pipe { .. } if at.is_some() => err(libc::ESPIPE),
        FileKind::Pipe { id, .. } => pipe::read(k, id, nonblock, buf, len, nr),
        FileKind::PtyMaster { .. } | FileKind::PtySlave { .. } if at.is_some() => err(libc::ESPIPE),
        FileKind::PtyMaster { .. } | FileKind::PtySlave { .. } if !f.readable() => err(libc::EBADF),
        FileKind::PtyMaster { id } => {
            pty::read(k, fd as i32, id, pty::End::Master, nonblock, buf, len)
        }
        FileKind::PtySlave { id } => {
            pty::read(k, fd as i32, id, pty::End::Slave, nonblock, buf, len)
        }
        _ => data::read(k, fd as i32, buf, len, at),
    }
}

/// Writes `data` to descriptor `fd` of any kind, at `at` or its offset; a
/// call that waits (a full pipe) is taken up again as `write`.
pub(in crate::kernel) fn write(k: &mut Kernel, fd: u64, data: &[u8], at: Option<u64>) -> SysResult {
    if let Some(r) = socket::write_datagram(k, fd, data) {
        return r;
    }
    let Some(f) = k.files().get(fd as i32) else {
        return err(libc::EBADF);
    };
    let nonblock = k.nonblocking(f);
    let nr = libc::SYS_write as u64;
    match f.kind.clone() {
        FileKind::SocketPair { tx, .. } => pipe::write(k, tx, nonblock, data, nr),
        FileKind::EventFd { id, .. } => pipe::write_counter(k, id, nonblock, data, nr),
        FileKind::Pipe { write: false, .. } => err(libc::EBADF),
        FileKind::Pipe { .. } if at.is_some() => err(libc::ESPIPE),
        FileKind::Pipe { id, .. } => pipe::write(k, id, nonblock, data, nr),
        FileKind::PtyMaster { .. } | FileKind::PtySlave { .. } if at.is_some() => err(libc::ESPIPE),
        FileKind::PtyMaster { .. } | FileKind::PtySlave { .. } if !f.writable() => err(libc::EBADF),
        FileKind::PtyMaster { id } => {
            pty::write(k, fd as i32, id, pty::End::Master, nonblock, data)
        }
        FileKind::PtySlave { id } => pty::write(k, fd as i32, id, pty::End::Slave, nonblock, data),
        _ => ret(data::write(k, fd as i32, data, at).map(|n| n as i64)),
    }
}

/// Whether descriptor `fd` is a pipe-like file (its reads and writes may
/// wait), which vectored calls pass to [`read`] and [`write`] whole.
pub(in crate::kernel) fn may_wait(k: &Kernel, fd: u64) -> bool {
    k.files().get(fd as i32).is_some_and(|f| {
        matches!(
            f.kind,
            FileKind::Pipe { .. }
                | FileKind::SocketPair { .. }
                | FileKind::EventFd { .. }
                | FileKind::TimerFd { .. }
                | FileKind::SignalFd { .. }
                | FileKind::PtyMaster { .. }
                | FileKind::PtySlave { .. }
        )
    })
}

/// Bytes a read of description `f` would find now (`FIONREAD`).
pub(in crate::kernel) fn available(k: &Kernel, f: &OpenFile) -> u64 {
    match f.kind {
        FileKind::Pipe { id, write: false } | FileKind::SocketPair { rx: id, .. } => {
            pipe::buffered(k, id) as u64
        }
        FileKind::PtyMaster { id } => pty::available(k, id, pty::End::Master),
        FileKind::PtySlave { id } => pty::available(k, id, pty::End::Slave),
        _ => data::seek_len(k, f).map_or(0, |l| l.saturating_sub(k.offset_of(f))),
    }
}

// ----- readiness

pub(in crate::kernel) const POLLIN: i16 = 0x1;
pub(in crate::kernel) const POLLOUT: i16 = 0x4;
pub(in crate::kernel) const POLLERR: i16 = 0x8;
pub(in crate::kernel) const POLLHUP: i16 = 0x10;
pub(in crate::kernel) const POLLNVAL: i16 = 0x20;

/// What descriptor `fd` is ready for now, as poll bits (POLLERR and
/// POLLHUP included); `None` for a descriptor not open. A connected
/// socket is as its pipes are, a listening one readable with a connection
/// waiting, a datagram one writable (and readable with a datagram); an
/// unconnected stream socket never becomes ready; other files always are.
pub(in crate::kernel) fn readiness(k: &Kernel, fd: i32) -> Option<i16> {
    let f = k.files().get(fd)?;
    Some(match f.kind {
        FileKind::EventFd { id, .. } => {
            let (can_read, can_write) = pipe::counter_state(k, id);
            (if can_read { POLLIN } else { 0 }) | (if can_write { POLLOUT } else { 0 })
        }
        FileKind::Pipe { id, write } => {
            let (can_read, can_write, other_end_closed) = pipe::poll_state(k, id, write);
            let mut r = 0;
            if can_read {
                r |= POLLIN;
            }
            if can_write {
                r |= POLLOUT;
            }
            if other_end_closed {
                r |= if write { POLLERR } else { POLLHUP };
            }
            r
        }
        FileKind::SocketPair { rx, tx } => {
            let (can_read, can_write, peer_closed) = pipe::pair_state(k, rx, tx);
            (if can_read { POLLIN } else { 0 })
                | (if can_write { POLLOUT } else { 0 })
                | (if peer_closed { POLLHUP } else { 0 })
        }
        FileKind::BoundSocket { id, kind, .. } => {
            // A datagram socket can always send.
            let out = if kind == libc::SOCK_DGRAM { POLLOUT } else { 0 };
            out | if k.sockets.has_queued(id) { POLLIN } else { 0 }
        }
        FileKind::Socket {
            kind: libc::SOCK_DGRAM,
            ..
        } => POLLOUT,
        FileKind::TimerFd { id, .. } => {
            if k.timers.fd_expirations(id) > 0 {
                POLLIN
            } else {
                0
            }
        }
        FileKind::SignalFd { mask } => {
            if signalfd::signal_waiting(k, mask) {
                POLLIN
            } else {
                0
            }
        }
        FileKind::PidFd { pid } => {
            let ended = k.processes().get(&pid).is_none_or(|p| p.ended.is_some());
            if ended { POLLIN } else { 0 }
        }
        FileKind::PtyMaster { id } | FileKind::PtySlave { id } => {
            let end = if matches!(f.kind, FileKind::PtyMaster { .. }) {
                pty::End::Master
            } else {
                pty::End::Slave
            };
            let (can_read, can_write, hup, error) = pty::poll_state(k, id, end);
            (if can_read { POLLIN } else { 0 })
                | (if can_write { POLLOUT } else { 0 })
                | (if hup { POLLHUP } else { 0 })
                | (if error { POLLERR } else { 0 })
        }
        FileKind::Socket { .. } | FileKind::Epoll { .. } => 0,
        _ => {
            let mut r = 0;
            if f.readable() && !matches!(f.kind, FileKind::Stdin) {
                r |= POLLIN;
            }
            if f.writable() {
                r |= POLLOUT;
            }
            r
        }
    })
}

/// The objects whose change may make descriptor `fd` ready, a signal
/// descriptor's being the signals of process `signals_of`. Descriptors
/// whose readiness never changes have none.
pub(in crate::kernel) fn ready_keys(k: &Kernel, fd: i32, signals_of: Pid) -> Vec<Ready> {
    let Some(f) = k.files().get(fd) else {
        return Vec::new();
    };
    match f.kind {
        FileKind::EventFd { id, .. } => vec![Ready::Counter(id)],
        FileKind::Pipe { id, .. } => vec![Ready::Pipe(id)],
        FileKind::SocketPair { rx, tx } => vec![Ready::Pipe(rx), Ready::Pipe(tx)],
        FileKind::BoundSocket { id, .. } => vec![Ready::Socket(id)],
        FileKind::TimerFd { id, .. } => vec![Ready::Timer(id)],
        FileKind::SignalFd { .. } => vec![Ready::Signals(signals_of)],
        FileKind::PidFd { pid } => vec![Ready::Ended(pid)],
        FileKind::PtyMaster { id } | FileKind::PtySlave { id } => vec![Ready::Pty(id)],
        _ => Vec::new(),
    }
}

/// A read that cannot go on now: EAGAIN when it must not wait, else a
/// wait for descriptor `fd` to become readable through a change of `on`.
fn wait_readable(nonblock: bool, fd: i32, on: Ready) -> SysResult {
    if nonblock {
        err(libc::EAGAIN)
    } else {
        SysResult::Block(Wait::Readable {
            fd,
            nr: libc::SYS_read as u64,
            on,
        })
    }
}
