//! Waiting for descriptors: poll, ppoll, select and pselect6.

use super::call::{SyscallDef, def};
use super::files::FileKind;
use super::ready::Ready;
use super::signal::{read_call_mask, with_call_mask};
use super::thread::Wait;
use super::{FpuAccess, Kernel, SysResult, err};

pub const CALLS: &[SyscallDef] = &[
    def(
        libc::SYS_poll,
        sys_poll,
        "pipes end a wait too (the call is taken again); an unconnected stream socket never becomes ready",
    ),
    def(
        libc::SYS_ppoll,
        sys_ppoll,
        "as poll, with the signal mask in force for the call",
    ),
    def(
        libc::SYS_select,
        sys_select,
        "as poll; the timeout is not updated with the time left",
    ),
    def(
        libc::SYS_pselect6,
        sys_pselect6,
        "as select, with the signal mask in force for the call",
    ),
];

// ----- poll

const POLLIN: i16 = 0x1;
const POLLOUT: i16 = 0x4;
const POLLERR: i16 = 0x8;
const POLLHUP: i16 = 0x10;
const POLLNVAL: i16 = 0x20;

/// What descriptor `fd` is ready for now, as poll bits (POLLERR and
/// POLLHUP included); `None` for a descriptor not open. A connected
/// socket is as its pipes are, a listening one readable with a connection
/// waiting, a datagram one writable (and readable with a datagram); an
/// unconnected stream socket never becomes ready; other files always are.
pub(super) fn readiness(k: &Kernel, fd: i32) -> Option<i16> {
    let f = k.files.get(fd)?;
    Some(match f.kind {
        FileKind::EventFd { id, .. } => {
            let (can_read, can_write) = super::file::pipe::counter_state(k, id);
            (if can_read { POLLIN } else { 0 }) | (if can_write { POLLOUT } else { 0 })
        }
        FileKind::Pipe { id, write } => {
            let (can_read, can_write, other_end_closed) =
                super::file::pipe::poll_state(k, id, write);
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
            let (can_read, can_write, peer_closed) = super::file::pipe::pair_state(k, rx, tx);
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
            if super::sys_timer::signal_waiting(k, mask) {
                POLLIN
            } else {
                0
            }
        }
        FileKind::PidFd { pid } => {
            let ended = k.processes().get(&pid).is_none_or(|p| p.ended.is_some());
            if ended { POLLIN } else { 0 }
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
pub(super) fn ready_keys(k: &Kernel, fd: i32, signals_of: u32) -> Vec<Ready> {
    let Some(f) = k.files.get(fd) else {
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
        _ => Vec::new(),
    }
}

fn poll(k: &mut Kernel, fds: u64, n: u64, deadline: Option<Option<u64>>, nr: u64) -> SysResult {
    if n > k.files.limit as u64 {
        return err(libc::EINVAL);
    }
    let mut ready = 0;
    let mut on = Vec::new();
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
            readiness(k, fd).map_or(POLLNVAL, |r| r & (events | POLLERR | POLLHUP))
        };
        if revents != 0 {
            ready += 1;
        } else if ready == 0 && fd >= 0 {
            on.extend(ready_keys(k, fd, k.pid));
        }
        if k.write(at + 6, &revents.to_le_bytes()).is_err() {
            return err(libc::EFAULT);
        }
    }
    match deadline {
        _ if ready > 0 => SysResult::Ret(ready),
        Some(Some(d)) if d <= k.now => SysResult::Ret(0),
        Some(d) => SysResult::Block(Wait::Poll {
            deadline: d,
            nr,
            on,
        }),
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
    poll(k, a[0], a[1], deadline, libc::SYS_poll as u64)
}

fn sys_ppoll(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let mask = match read_call_mask(k, a[3], a[4]) {
        Ok(m) => m,
        Err(e) => return err(e),
    };
    let deadline = if a[2] == 0 {
        Some(None)
    } else {
        match super::call::deadline(k, a[2], false, false) {
            Ok(Some(d)) if d == k.now => None,
            Ok(d) => Some(d),
            Err(e) => return err(e),
        }
    };
    with_call_mask(k, mask, |k| {
        poll(k, a[0], a[1], deadline, libc::SYS_ppoll as u64)
    })
}

// ----- select

/// `select` and `pselect6`: the descriptors of three sets (`nfds` bits
/// each) that are ready to read, to write, or with an exceptional
/// condition (never: no descriptor here has out-of-band data).
fn select(
    k: &mut Kernel,
    nfds: u64,
    sets: [u64; 3],
    deadline: Option<Option<u64>>,
    nr: u64,
) -> SysResult {
    if nfds > k.files.limit as u64 || (nfds as i64) < 0 {
        return err(libc::EINVAL);
    }
    let bytes = (nfds as usize).div_ceil(64) * 8;
    let mut wanted = [vec![0u8; bytes], vec![0u8; bytes], vec![0u8; bytes]];
    for (set, want) in sets.iter().zip(wanted.iter_mut()) {
        if *set != 0 && k.read(*set, want).is_err() {
            return err(libc::EFAULT);
        }
    }
    let mut got = [vec![0u8; bytes], vec![0u8; bytes], vec![0u8; bytes]];
    let mut ready = 0;
    let mut on = Vec::new();
    for fd in 0..nfds as usize {
        let (byte, bit) = (fd / 8, 1u8 << (fd % 8));
        let asked: Vec<bool> = wanted.iter().map(|w| w[byte] & bit != 0).collect();
        if !asked.iter().any(|a| *a) {
            continue;
        }
        let Some(r) = readiness(k, fd as i32) else {
            return err(libc::EBADF);
        };
        let now = [
            r & (POLLIN | POLLHUP | POLLERR) != 0,
            r & (POLLOUT | POLLERR) != 0,
            false,
        ];
        for i in 0..3 {
            if asked[i] && now[i] {
                got[i][byte] |= bit;
                ready += 1;
            }
        }
        if ready == 0 {
            on.extend(ready_keys(k, fd as i32, k.pid));
        }
    }
    let give_back = |k: &mut Kernel, got: &[Vec<u8>; 3]| -> Result<(), i32> {
        for (set, g) in sets.iter().zip(got.iter()) {
            if *set != 0 {
                k.write(*set, g).map_err(|_| libc::EFAULT)?;
            }
        }
        Ok(())
    };
    let result = match deadline {
        _ if ready > 0 => ready,
        Some(Some(d)) if d <= k.now => 0,
        // The sets are left as they are: the call is taken up again.
        Some(d) => {
            return SysResult::Block(Wait::Poll {
                deadline: d,
                nr,
                on,
            });
        }
        None => 0,
    };
    match give_back(k, &got) {
        Ok(()) => SysResult::Ret(result),
        Err(e) => err(e),
    }
}

fn sys_select(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let deadline = if a[4] == 0 {
        Some(None)
    } else {
        match super::call::read_timeval(k, a[4]) {
            Ok(0) => None,
            Ok(t) => Some(Some(k.now + t)),
            Err(e) => return err(e),
        }
    };
    select(
        k,
        a[0],
        [a[1], a[2], a[3]],
        deadline,
        libc::SYS_select as u64,
    )
}

fn sys_pselect6(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    // The sixth argument points at { const sigset_t *set; size_t size; }.
    let mask = if a[5] == 0 {
        Ok(None)
    } else {
        match (k.read_u64(a[5]), k.read_u64(a[5] + 8)) {
            (Ok(set), Ok(size)) => read_call_mask(k, set, size),
            _ => Err(libc::EFAULT),
        }
    };
    let mask = match mask {
        Ok(m) => m,
        Err(e) => return err(e),
    };
    let deadline = if a[4] == 0 {
        Some(None)
    } else {
        match super::call::deadline(k, a[4], false, false) {
            Ok(Some(d)) if d == k.now => None,
            Ok(d) => Some(d),
            Err(e) => return err(e),
        }
    };
    with_call_mask(k, mask, |k| {
        select(
            k,
            a[0],
            [a[1], a[2], a[3]],
            deadline,
            libc::SYS_pselect6 as u64,
        )
    })
}
