//! epoll's calls: making an instance, changing its interests, waiting
//! (the instances are `file::epoll`'s).

use super::call::{SyscallDef, def};
use super::file::epoll::{self, EVENT_SIZE};
use super::files::{FileKind, OpenFile};
use super::ready::Ready;
use super::signal::{read_call_mask, with_call_mask};
use super::thread::Wait;
use super::{FpuAccess, Kernel, SysResult, err};

pub const CALLS: &[SyscallDef] = &[
    def(libc::SYS_epoll_create, sys_epoll_create, ""),
    def(libc::SYS_epoll_create1, sys_epoll_create1, ""),
    def(
        libc::SYS_epoll_ctl,
        sys_epoll_ctl,
        "by descriptor number; EPOLLEXCLUSIVE and EPOLLWAKEUP are accepted and ignored",
    ),
    def(libc::SYS_epoll_wait, sys_epoll_wait, ""),
    def(
        libc::SYS_epoll_pwait,
        sys_epoll_pwait,
        "with the signal mask in force for the call",
    ),
    def(
        libc::SYS_epoll_pwait2,
        sys_epoll_pwait2,
        "with the signal mask in force for the call",
    ),
];

fn sys_epoll_create(k: &mut Kernel, cpu: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    if a[0] as i32 <= 0 {
        return err(libc::EINVAL);
    }
    sys_epoll_create1(k, cpu, [0; 6])
}

fn sys_epoll_create1(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let flags = a[0] as i32;
    if flags & !libc::EPOLL_CLOEXEC != 0 {
        return err(libc::EINVAL);
    }
    let id = k.epolls.next_id();
    let file = OpenFile {
        kind: FileKind::Epoll { id },
        path: String::new(),
        offset: 0,
        flags: libc::O_RDWR,
        shared: None,
    };
    match k
        .files_mut()
        .install(file, flags & libc::EPOLL_CLOEXEC != 0, 0)
    {
        Ok(fd) => {
            k.epolls.create(id);
            SysResult::Ret(fd.into())
        }
        Err(e) => err(e),
    }
}

/// The instance behind `epfd`.
fn instance(k: &Kernel, epfd: i32) -> Result<u64, i32> {
    match k.files().get(epfd).map(|f| &f.kind) {
        Some(FileKind::Epoll { id }) => Ok(*id),
        Some(_) => Err(libc::EINVAL),
        None => Err(libc::EBADF),
    }
}

fn sys_epoll_ctl(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let (epfd, op, fd) = (a[0] as i32, a[1] as i32, a[2] as i32);
    let id = match instance(k, epfd) {
        Ok(id) => id,
        Err(e) => return err(e),
    };
    let Some(target) = k.files().get(fd) else {
        return err(libc::EBADF);
    };
    if fd == epfd {
        return err(libc::EINVAL);
    }
    // Regular files and directories are always ready: Linux refuses them.
    if matches!(
        target.kind,
        FileKind::Host(_) | FileKind::Overlay | FileKind::Dir(_) | FileKind::PathOnly
    ) {
        return err(libc::EPERM);
    }
    let event = if op == libc::EPOLL_CTL_DEL {
        None
    } else {
        let mut raw = [0u8; EVENT_SIZE as usize];
        if k.read(a[3], &mut raw).is_err() {
            return err(libc::EFAULT);
        }
        let events = u32::from_le_bytes(raw[0..4].try_into().unwrap());
        let data = u64::from_le_bytes(raw[4..12].try_into().unwrap());
        Some((events, data))
    };
    match epoll::control(k, id, op, fd, event) {
        Ok(()) => SysResult::Ret(0),
        Err(e) => err(e),
    }
}

/// How long a wait may wait: not at all, until a deadline, or for ever.
#[derive(Clone, Copy)]
enum Timeout {
    Now,
    Until(u64),
    Never,
}

fn wait(k: &mut Kernel, a: [u64; 6], timeout: Timeout, nr: u64) -> SysResult {
    let (epfd, events, max) = (a[0] as i32, a[1], a[2] as i32);
    let id = match instance(k, epfd) {
        Ok(id) => id,
        Err(e) => return err(e),
    };
    if max <= 0 {
        return err(libc::EINVAL);
    }
    let out = epoll::ready_events(k, id, max as usize);
    if !out.is_empty() {
        let mut bytes = Vec::with_capacity(out.len() * EVENT_SIZE as usize);
        for (ready, data) in &out {
            bytes.extend_from_slice(&ready.to_le_bytes());
            bytes.extend_from_slice(&data.to_le_bytes());
        }
        if k.write(events, &bytes).is_err() {
            return err(libc::EFAULT);
        }
        return SysResult::Ret(out.len() as i64);
    }
    match timeout {
        Timeout::Until(d) if d > k.now => SysResult::Block(Wait::Poll {
            deadline: Some(d),
            nr,
            on: vec![Ready::Epoll(id)],
        }),
        Timeout::Now | Timeout::Until(_) => SysResult::Ret(0),
        Timeout::Never => SysResult::Block(Wait::Poll {
            deadline: None,
            nr,
            on: vec![Ready::Epoll(id)],
        }),
    }
}

/// A timeout in milliseconds (negative: none).
fn millis(k: &Kernel, ms: i32) -> Timeout {
    match ms {
        0 => Timeout::Now,
        t if t < 0 => Timeout::Never,
        t => Timeout::Until(k.now + t as u64 * 1_000_000),
    }
}

fn sys_epoll_wait(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let timeout = millis(k, a[3] as i32);
    wait(k, a, timeout, libc::SYS_epoll_wait as u64)
}

fn sys_epoll_pwait(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let mask = match read_call_mask(k, a[4], a[5]) {
        Ok(m) => m,
        Err(e) => return err(e),
    };
    let timeout = millis(k, a[3] as i32);
    with_call_mask(k, mask, |k| {
        wait(k, a, timeout, libc::SYS_epoll_pwait as u64)
    })
}

/// `epoll_pwait` with a `struct timespec` timeout (none: for ever).
fn sys_epoll_pwait2(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let mask = match read_call_mask(k, a[4], a[5]) {
        Ok(m) => m,
        Err(e) => return err(e),
    };
    let timeout = match super::call::deadline(k, a[3], false, false) {
        Ok(None) => Timeout::Never,
        Ok(Some(d)) if d == k.now => Timeout::Now,
        Ok(Some(d)) => Timeout::Until(d),
        Err(e) => return err(e),
    };
    with_call_mask(k, mask, |k| {
        wait(k, a, timeout, libc::SYS_epoll_pwait2 as u64)
    })
}
