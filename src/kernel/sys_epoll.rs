//! epoll: the readiness of many descriptors at once, as event loops
//! (tokio, Python's asyncio, node) wait for pipes and event counters.
//!
//! An epoll instance keeps an interest list by descriptor number. A wait
//! reports what [`super::sys_poll::readiness`] says of each, level- or
//! edge-triggered, and blocks like `poll` when nothing is ready: taken up
//! again (re-executed) when data moves through a pipe or a counter or an
//! end closes, or ended by its timeout.

use std::collections::BTreeMap;

use super::files::{FileKind, OpenFile};
use super::signal::{read_call_mask, with_call_mask};
use super::sys_poll::readiness;
use super::table::{SyscallDef, def};
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

const EPOLLIN: u32 = 0x1;
const EPOLLOUT: u32 = 0x4;
const EPOLLERR: u32 = 0x8;
const EPOLLHUP: u32 = 0x10;
const EPOLLONESHOT: u32 = 1 << 30;
const EPOLLET: u32 = 1 << 31;
/// `struct epoll_event` is packed on x86-64: a u32 then a u64.
const EVENT_SIZE: u64 = 12;

/// One descriptor an instance watches.
#[derive(Clone, Debug)]
struct Interest {
    events: u32,
    data: u64,
    /// The activity count when an edge-triggered interest last reported.
    reported_at: Option<u64>,
}

/// The epoll instances of the process, by id.
#[derive(Clone, Debug, Default)]
pub struct Instances {
    lists: BTreeMap<u64, BTreeMap<i32, Interest>>,
    next: u64,
}

impl Instances {
    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.lists.is_empty()
    }
}

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
    let id = k.epolls.next;
    let file = OpenFile {
        kind: FileKind::Epoll { id },
        path: String::new(),
        offset: 0,
        flags: libc::O_RDWR,
        shared: None,
    };
    match k.files.install(file, flags & libc::EPOLL_CLOEXEC != 0, 0) {
        Ok(fd) => {
            k.epolls.next += 1;
            k.epolls.lists.insert(id, BTreeMap::new());
            SysResult::Ret(fd.into())
        }
        Err(e) => err(e),
    }
}

/// The instance behind `epfd`.
fn instance(k: &Kernel, epfd: i32) -> Result<u64, i32> {
    match k.files.get(epfd).map(|f| &f.kind) {
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
    let Some(target) = k.files.get(fd) else {
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
        Some(Interest {
            events: u32::from_le_bytes(raw[0..4].try_into().unwrap()),
            data: u64::from_le_bytes(raw[4..12].try_into().unwrap()),
            reported_at: None,
        })
    };
    let list = k.epolls.lists.entry(id).or_default();
    match (op, event) {
        (libc::EPOLL_CTL_ADD, Some(e)) => {
            if list.contains_key(&fd) {
                return err(libc::EEXIST);
            }
            list.insert(fd, e);
        }
        (libc::EPOLL_CTL_MOD, Some(e)) => match list.get_mut(&fd) {
            Some(i) => *i = e,
            None => return err(libc::ENOENT),
        },
        (libc::EPOLL_CTL_DEL, None) => {
            if list.remove(&fd).is_none() {
                return err(libc::ENOENT);
            }
        }
        _ => return err(libc::EINVAL),
    }
    SysResult::Ret(0)
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
    let activity = k.pipes.activity_count();
    let interests: Vec<(i32, Interest)> = k
        .epolls
        .lists
        .get(&id)
        .map(|l| l.iter().map(|(fd, i)| (*fd, i.clone())).collect())
        .unwrap_or_default();
    let mut out = Vec::new();
    for (fd, interest) in interests {
        if out.len() >= max as usize {
            break;
        }
        // A descriptor closed since it was added is no longer watched.
        let Some(now) = readiness(k, fd) else {
            continue;
        };
        // Disarmed (EPOLLONESHOT after its event) or watching nothing.
        if interest.events & (EPOLLIN | EPOLLOUT) == 0 {
            continue;
        }
        let ready = now as u32 & (interest.events & (EPOLLIN | EPOLLOUT) | EPOLLERR | EPOLLHUP);
        if ready == 0 {
            continue;
        }
        let edge = interest.events & EPOLLET != 0;
        if edge && interest.reported_at == Some(activity) {
            continue;
        }
        out.push((fd, ready, interest.data));
        if let Some(i) = k.epolls.lists.get_mut(&id).and_then(|l| l.get_mut(&fd)) {
            i.reported_at = Some(activity);
            if i.events & EPOLLONESHOT != 0 {
                // Disarmed until EPOLL_CTL_MOD.
                i.events = 0;
            }
        }
    }
    if !out.is_empty() {
        let mut bytes = Vec::with_capacity(out.len() * EVENT_SIZE as usize);
        for (_, ready, data) in &out {
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
        }),
        Timeout::Now | Timeout::Until(_) => SysResult::Ret(0),
        Timeout::Never => SysResult::Block(Wait::Poll { deadline: None, nr }),
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
    let timeout = match super::sys_thread::deadline(k, a[3], false, false) {
        Ok(None) => Timeout::Never,
        Ok(Some(d)) if d == k.now => Timeout::Now,
        Ok(Some(d)) => Timeout::Until(d),
        Err(e) => return err(e),
    };
    with_call_mask(k, mask, |k| {
        wait(k, a, timeout, libc::SYS_epoll_pwait2 as u64)
    })
}

/// Forgets instances with no descriptor left.
/// Epoll `id` goes (its last description closed).
pub fn forget(k: &mut Kernel, id: u64) {
    k.epolls.lists.remove(&id);
}

pub fn collect(k: &mut Kernel) {
    let open: std::collections::BTreeSet<u64> = k
        .all_open_files()
        .filter_map(|f| match f.kind {
            FileKind::Epoll { id } => Some(id),
            _ => None,
        })
        .collect();
    k.epolls.lists.retain(|id, _| open.contains(id));
}
