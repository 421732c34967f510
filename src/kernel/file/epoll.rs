//! epoll: the readiness of many descriptors at once, as event loops
//! (tokio, Python's asyncio, node) wait for pipes and event counters.
//!
//! An epoll instance keeps an interest list by descriptor number. A wait
//! reports what [`super::readiness`] says of each, level- or
//! edge-triggered, and blocks like `poll` when nothing is ready: taken up
//! again (re-executed) when an object it watches changes, or ended by its
//! timeout.
//!
//! A wait looks only at the interests that may be ready: each instance
//! keeps those, and an interest joins them when an object it watches
//! changes ([`Instances::mark`]) or its number comes to name something
//! else ([`Instances::rebound`]), and leaves when a wait finds it not
//! ready. So a wait costs what is ready, not what is watched.

use std::collections::{BTreeMap, BTreeSet};

use super::{readiness, ready_keys};
use crate::kernel::Kernel;
use crate::kernel::ready::{ANY_PROCESS, Ready};

const EPOLLIN: u32 = 0x1;
const EPOLLOUT: u32 = 0x4;
const EPOLLERR: u32 = 0x8;
const EPOLLHUP: u32 = 0x10;
const EPOLLONESHOT: u32 = 1 << 30;
const EPOLLET: u32 = 1 << 31;

/// `struct epoll_event` is packed on x86-64: a u32 then a u64.
pub const EVENT_SIZE: u64 = 12;

/// One descriptor an instance watches.
#[derive(Clone, Debug)]
struct Interest {
    events: u32,
    data: u64,
    /// When an edge-triggered interest last reported: the activity count
    /// (reproducers of format 7 and earlier), else the change count.
    reported_at: Option<u64>,
    /// The objects its number named when it was added, rebound or looked
    /// at (in any process): what it watches.
    keys: BTreeSet<Ready>,
    /// The change count when one of them last changed.
    changed_at: u64,
}

/// An epoll instance.
#[derive(Clone, Debug, Default)]
struct Instance {
    interests: BTreeMap<i32, Interest>,
    /// The interests that may be ready: every ready one is among them.
    maybe_ready: BTreeSet<i32>,
}

/// Every epoll instance, by id, and who watches what.
#[derive(Clone, Debug, Default)]
pub struct Instances {
    lists: BTreeMap<u64, Instance>,
    next: u64,
    /// Interests by the objects they watch: (instance, number).
    watchers: BTreeMap<Ready, BTreeSet<(u64, i32)>>,
    /// Instances by the numbers they watch.
    numbers: BTreeMap<i32, BTreeSet<u64>>,
    /// Changes of watched objects so far.
    changes: u64,
}

impl Instances {
    /// The id the next instance made gets.
    pub fn next_id(&self) -> u64 {
        self.next
    }

    /// Makes instance `id` (the next id), watching nothing.
    pub fn create(&mut self, id: u64) {
        self.next = id + 1;
        self.lists.insert(id, Instance::default());
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.lists.is_empty()
    }

    /// Object `key` changed: the interests watching it may be ready. The
    /// instances concerned.
    pub(in crate::kernel) fn mark(&mut self, key: Ready) -> Vec<u64> {
        let Some(watchers) = self.watchers.get(&key) else {
            return Vec::new();
        };
        self.changes += 1;
        let mut marked = Vec::new();
        for &(ep, fd) in watchers {
            if let Some(list) = self.lists.get_mut(&ep) {
                list.maybe_ready.insert(fd);
                if let Some(i) = list.interests.get_mut(&fd) {
                    i.changed_at = self.changes;
                }
                marked.push(ep);
            }
        }
        // Watchers are in instance order.
        marked.dedup();
        marked
    }

    /// Number `fd` names another description (or one of another kind)
    /// now: the interests watching it may be ready. The instances
    /// concerned.
    pub(in crate::kernel) fn rebound(&mut self, fd: i32) -> Vec<u64> {
        let Some(eps) = self.numbers.get(&fd) else {
            return Vec::new();
        };
        self.changes += 1;
        let eps: Vec<u64> = eps.iter().copied().collect();
        for ep in &eps {
            if let Some(list) = self.lists.get_mut(ep) {
                list.maybe_ready.insert(fd);
                if let Some(i) = list.interests.get_mut(&fd) {
                    i.changed_at = self.changes;
                }
            }
        }
        eps
    }

    /// Adds `keys` to what interest `fd` of instance `ep` watches.
    fn watch(&mut self, ep: u64, fd: i32, keys: Vec<Ready>) {
        let Some(i) = self
            .lists
            .get_mut(&ep)
            .and_then(|l| l.interests.get_mut(&fd))
        else {
            return;
        };
        for key in keys {
            if i.keys.insert(key) {
                self.watchers.entry(key).or_default().insert((ep, fd));
            }
        }
    }

    /// Takes interest `fd` of instance `ep` out of the indexes.
    fn unwatch(&mut self, ep: u64, fd: i32, i: &Interest) {
        for key in &i.keys {
            if let Some(w) = self.watchers.get_mut(key) {
                w.remove(&(ep, fd));
                if w.is_empty() {
                    self.watchers.remove(key);
                }
            }
        }
        if let Some(eps) = self.numbers.get_mut(&fd) {
            eps.remove(&ep);
            if eps.is_empty() {
                self.numbers.remove(&fd);
            }
        }
    }
}

impl Kernel {
    /// Number `fd` names another description now: the epoll instances
    /// watching it also watch what it names in the current process.
    pub(in crate::kernel) fn epoll_rebound(&mut self, fd: i32) -> Vec<u64> {
        let eps = self.epolls.rebound(fd);
        if !eps.is_empty() {
            let keys = ready_keys(self, fd, ANY_PROCESS);
            for ep in &eps {
                self.epolls.watch(*ep, fd, keys.clone());
            }
        }
        eps
    }
}

/// Epoll `id` goes (its last description closed).
pub fn forget(k: &mut Kernel, id: u64) {
    if let Some(list) = k.epolls.lists.remove(&id) {
        for (fd, i) in &list.interests {
            k.epolls.unwatch(id, *fd, i);
        }
    }
}

/// `epoll_ctl` on instance `id`: adds (EPOLL_CTL_ADD), changes
/// (EPOLL_CTL_MOD) or takes out (EPOLL_CTL_DEL, no `event`) the interest
/// in descriptor `fd`, with its `event` (events, data).
pub fn control(
    k: &mut Kernel,
    id: u64,
    op: i32,
    fd: i32,
    event: Option<(u32, u64)>,
) -> Result<(), i32> {
    let event = event.map(|(events, data)| Interest {
        events,
        data,
        reported_at: None,
        keys: BTreeSet::new(),
        changed_at: 0,
    });
    let list = &mut k.epolls.lists.entry(id).or_default().interests;
    match (op, event) {
        (libc::EPOLL_CTL_ADD, Some(e)) => {
            if list.contains_key(&fd) {
                return Err(libc::EEXIST);
            }
            list.insert(fd, e);
            k.epolls.numbers.entry(fd).or_default().insert(id);
        }
        (libc::EPOLL_CTL_MOD, Some(e)) => match list.get_mut(&fd) {
            Some(i) => {
                i.events = e.events;
                i.data = e.data;
                i.reported_at = None;
            }
            None => return Err(libc::ENOENT),
        },
        (libc::EPOLL_CTL_DEL, None) => {
            let Some(i) = list.remove(&fd) else {
                return Err(libc::ENOENT);
            };
            k.epolls.unwatch(id, fd, &i);
            if let Some(l) = k.epolls.lists.get_mut(&id) {
                l.maybe_ready.remove(&fd);
            }
            return Ok(());
        }
        _ => return Err(libc::EINVAL),
    }
    // Added or changed: it may be ready now, and waiters look again.
    let keys = ready_keys(k, fd, ANY_PROCESS);
    k.epolls.watch(id, fd, keys);
    if let Some(l) = k.epolls.lists.get_mut(&id) {
        l.maybe_ready.insert(fd);
    }
    k.touch(Ready::Epoll(id));
    Ok(())
}

/// The events (ready bits, data) of at most `max` interests of instance
/// `id` that are ready now, as a wait reports them: level-triggered ones
/// while ready, edge-triggered ones once a change, one-shot ones once.
pub fn ready_events(k: &mut Kernel, id: u64, max: usize) -> Vec<(u32, u64)> {
    // Numbers closed or reused since the last look join the interests
    // that may be ready.
    k.sync_files();
    // Edge-triggered interests report again after a change: any activity
    // at all in reproducers of format 7 and earlier, else a change of what
    // they watch.
    let any_activity = k.config.polls_retry_on_any_activity;
    let now_at = if any_activity {
        k.pipes.activity_count()
    } else {
        k.epolls.changes
    };
    let maybe: Vec<i32> = k
        .epolls
        .lists
        .get(&id)
        .map(|l| l.maybe_ready.iter().copied().collect())
        .unwrap_or_default();
    let mut out = Vec::new();
    let mut not_ready = Vec::new();
    for fd in maybe {
        if out.len() >= max {
            break;
        }
        let Some(interest) = k
            .epolls
            .lists
            .get(&id)
            .and_then(|l| l.interests.get(&fd))
            .cloned()
        else {
            not_ready.push(fd);
            continue;
        };
        k.changes.count(1);
        // A descriptor closed since it was added is no longer watched.
        let Some(now) = readiness(k, fd) else {
            not_ready.push(fd);
            continue;
        };
        let keys = ready_keys(k, fd, ANY_PROCESS);
        k.epolls.watch(id, fd, keys);
        // Disarmed (EPOLLONESHOT after its event) or watching nothing.
        if interest.events & (EPOLLIN | EPOLLOUT) == 0 {
            not_ready.push(fd);
            continue;
        }
        let ready = now as u32 & (interest.events & (EPOLLIN | EPOLLOUT) | EPOLLERR | EPOLLHUP);
        if ready == 0 {
            not_ready.push(fd);
            continue;
        }
        let edge = interest.events & EPOLLET != 0;
        let reported = match interest.reported_at {
            Some(at) if any_activity => at == now_at,
            Some(at) => at >= interest.changed_at,
            None => false,
        };
        if edge && reported {
            continue;
        }
        out.push((ready, interest.data));
        if let Some(i) = k
            .epolls
            .lists
            .get_mut(&id)
            .and_then(|l| l.interests.get_mut(&fd))
        {
            i.reported_at = Some(now_at);
            if i.events & EPOLLONESHOT != 0 {
                // Disarmed until EPOLL_CTL_MOD.
                i.events = 0;
            }
        }
    }
    if let Some(l) = k.epolls.lists.get_mut(&id) {
        for fd in not_ready {
            l.maybe_ready.remove(&fd);
        }
    }
    out
}
