//! Pipes between the threads of the process, and event counters
//! (`eventfd`), which block and wake the same way.
//!
//! A pipe is a buffer of at most [`CAPACITY`] bytes (or what
//! `F_SETPIPE_SZ` made it) in the kernel; its ends
//! are open file descriptions. A read of an empty pipe whose write end is
//! still open blocks, as does a write that does not fit while the read end
//! is open: each is a scheduling point, and the other threads run. A
//! blocked call is taken again from the start once the pipe can serve it
//! (its thread re-executes the `syscall` instruction: another step, as
//! deterministic as any). Reads at the end of the data with no writer left
//! return 0; writes with no reader left raise SIGPIPE and fail with EPIPE.

use std::collections::VecDeque;

use crate::kernel::files::Held;
use crate::kernel::ready::Ready;
use crate::kernel::signal;
use crate::kernel::thread::{COUNTER, PendingSignal, Wait};
use crate::kernel::{Kernel, SysResult, err};

/// The largest value an event counter holds.
const COUNTER_MAX: u64 = u64::MAX - 1;

/// Bytes a pipe holds unless `fcntl(F_SETPIPE_SZ)` changes it, as
/// Linux's default.
pub const CAPACITY: usize = 65536;

/// The largest capacity `F_SETPIPE_SZ` gives (Linux's `pipe-max-size` is
/// 1 MiB for users without CAP_SYS_RESOURCE; the guest runs as root, who
/// may go further, up to this bound on the monitor's memory).
const MAX_CAPACITY: u64 = 64 << 20;

/// Writes up to this size are atomic (all or nothing).
const PIPE_BUF: usize = 4096;

/// The capacity a new pipe gets once pipes hold more than their soft
/// limit (Linux's `PIPE_MIN_DEF_BUFFERS` pages).
const SMALL_CAPACITY: usize = 2 * 4096;

/// What the pipes may hold together. Their capacities are counted (what
/// they may hold, not what they hold now, as Linux counts a user's pipe
/// pages), against limits made from the guest's memory rather than the
/// host's: past the soft limit a new pipe gets [`SMALL_CAPACITY`] and
/// `F_SETPIPE_SZ` may not grow one (EPERM), as past Linux's
/// `pipe-user-pages-soft`; past the hard limit no pipe, socket pair or
/// connection is made (ENFILE, ENOBUFS). So buffers never hold more than
/// half the guest's memory, the same on every machine.
#[derive(Clone, Copy, Debug)]
pub struct Room {
    held: u64,
    soft: u64,
    hard: u64,
}

impl Room {
    /// Limits for a guest of `memory` bytes: a quarter of it soft, half
    /// of it hard.
    pub fn for_memory(memory: u64) -> Room {
        Room {
            held: 0,
            soft: memory / 4,
            hard: memory / 2,
        }
    }

    /// The capacity `count` new pipes each get, or ENFILE.
    fn for_new(&self, count: u64) -> Result<usize, i32> {
        let capacity = if self.held + count * CAPACITY as u64 > self.soft {
            SMALL_CAPACITY
        } else {
            CAPACITY
        };
        if self.held + count * capacity as u64 > self.hard {
            return Err(libc::ENFILE);
        }
        Ok(capacity)
    }
}

/// The pipes of the process, by id.
#[derive(Clone, Debug, Default)]
pub struct Pipes {
    buffers: std::collections::BTreeMap<u64, VecDeque<u8>>,
    next: u64,
    /// Whether data moved or an end closed since polls were last taken
    /// up again (a poll is retried only then: retrying it at every step
    /// would restart its timeout forever).
    activity: bool,
    /// Pipe ends open at the last look, to see closes however they came.
    ends_open: usize,
    /// Event counters, by id.
    counters: std::collections::BTreeMap<u64, u64>,
    /// How often data moved or ends closed: what edge-triggered epoll
    /// interests compare against.
    activity_count: u64,
    /// Pipes whose capacity is not [`CAPACITY`] (`F_SETPIPE_SZ` changed
    /// it, or they were made past the soft limit).
    capacities: std::collections::BTreeMap<u64, usize>,
    /// What their capacities add up to, and its limits.
    room: Room,
}

impl Pipes {
    /// Something a poll may wait for happened: polls look again.
    pub fn note_activity(&mut self) {
        self.activity = true;
        self.activity_count += 1;
    }

    /// How often data moved or an end closed so far.
    pub fn activity_count(&self) -> u64 {
        self.activity_count
    }

    /// Bounds what the pipes hold by a guest of `memory` bytes.
    pub fn set_memory(&mut self, memory: u64) {
        self.room = Room {
            held: self.room.held,
            ..Room::for_memory(memory)
        };
    }

    /// The capacity `n` new pipes get (ENFILE when there is no room for
    /// them): see [`Room::for_new`].
    pub fn room_for(&self, n: u64) -> Result<usize, i32> {
        self.room.for_new(n)
    }

    /// The id the next pipe or counter made gets.
    pub fn next_id(&self) -> u64 {
        self.next
    }

    /// Makes `n` pipes with ids from `first` (the next ones) and
    /// `capacity` (from [`Pipes::room_for`]), counted.
    pub fn create(&mut self, first: u64, n: u64, capacity: usize) {
        for id in first..first + n {
            self.create_one(id, capacity);
        }
        self.next = first + n;
    }

    fn create_one(&mut self, id: u64, capacity: usize) {
        self.buffers.insert(id, VecDeque::new());
        if capacity != CAPACITY {
            self.capacities.insert(id, capacity);
        }
        self.room.held += capacity as u64;
    }

    /// Whether no pipe or counter exists and nothing moved since the last
    /// look.
    pub fn is_idle(&self) -> bool {
        self.buffers.is_empty() && self.counters.is_empty() && !self.activity
    }

    /// `ends` pipe ends are open now: a change since the last look (a
    /// close, however it came) is activity.
    pub fn ends_now(&mut self, ends: usize) {
        if ends != self.ends_open {
            self.ends_open = ends;
            self.note_activity();
        }
    }

    /// Whether anything moved since the last look, which this look is.
    pub fn take_activity(&mut self) -> bool {
        std::mem::take(&mut self.activity)
    }

    /// Event counter `id` goes (its last description closed).
    pub fn forget_counter(&mut self, id: u64) {
        self.counters.remove(&id);
    }

    /// Makes event counter `id` (the next id) holding `value`.
    pub fn create_counter(&mut self, id: u64, value: u64) {
        self.next = id + 1;
        self.counters.insert(id, value);
    }
}

/// `read` of an event counter: its value (or 1, as a semaphore), which
/// waits while it is 0.
pub fn read_counter(
    k: &mut Kernel,
    id: u64,
    semaphore: bool,
    nonblock: bool,
    buf: u64,
    len: u64,
    nr: u64,
) -> SysResult {
    if len < 8 {
        return err(libc::EINVAL);
    }
    let value = k.pipes.counters.get(&id).copied().unwrap_or(0);
    if value == 0 {
        return wait_unless(nonblock, id | COUNTER, false, 0, nr);
    }
    let taken = if semaphore { 1 } else { value };
    if k.write(buf, &taken.to_le_bytes()).is_err() {
        return err(libc::EFAULT);
    }
    k.pipes.counters.insert(id, value - taken);
    k.pipes.note_activity();
    k.touch(Ready::Counter(id));
    SysResult::Ret(8)
}

/// `write` to an event counter: adds to it, waiting while that would pass
/// the largest value.
pub fn write_counter(k: &mut Kernel, id: u64, nonblock: bool, data: &[u8], nr: u64) -> SysResult {
    let Some(add) = data
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
    else {
        return err(libc::EINVAL);
    };
    if add == u64::MAX {
        return err(libc::EINVAL);
    }
    let value = k.pipes.counters.get(&id).copied().unwrap_or(0);
    if add > COUNTER_MAX - value {
        return wait_unless(nonblock, id | COUNTER, true, add as usize, nr);
    }
    k.pipes.counters.insert(id, value + add);
    k.pipes.note_activity();
    k.touch(Ready::Counter(id));
    SysResult::Ret(8)
}

/// Poll readiness of a socket pair's end: `(readable, writable, the other
/// end closed)`.
pub fn pair_state(k: &Kernel, rx: u64, tx: u64) -> (bool, bool, bool) {
    let peer_open = end_open(k, rx, true);
    (
        readable(k, rx).is_some(),
        writable(k, tx, 1).is_some(),
        !peer_open,
    )
}

/// Poll readiness of an event counter: `(readable, writable)`.
pub fn counter_state(k: &Kernel, id: u64) -> (bool, bool) {
    let value = k.pipes.counters.get(&id).copied().unwrap_or(0);
    (value > 0, value < COUNTER_MAX)
}

/// A call that cannot go on now: EAGAIN when it must not wait, else a
/// wait on pipe (or counter) `id` for a read, or a write of `len` bytes.
fn wait_unless(nonblock: bool, id: u64, write: bool, len: usize, nr: u64) -> SysResult {
    if nonblock {
        err(libc::EAGAIN)
    } else {
        SysResult::Block(Wait::Pipe { id, write, len, nr })
    }
}

/// Whether any description of pipe `id`'s read (or write) end is open
/// (a connection waiting in a listener's queue holds its ends too).
fn end_open(k: &Kernel, id: u64, write: bool) -> bool {
    k.held_anywhere(Held::PipeEnd { id, write }) || k.sockets.queues_end(id, write)
}

/// Bytes pipe `id` holds at most (`F_GETPIPE_SZ`).
pub fn capacity(k: &Kernel, id: u64) -> usize {
    k.pipes.capacities.get(&id).copied().unwrap_or(CAPACITY)
}

/// `F_SETPIPE_SZ`: gives pipe `id` room for at least `want` bytes, as
/// Linux rounds it (a page at least, a power of two); the new capacity.
/// EBUSY when the data already in it would not fit.
pub fn resize(k: &mut Kernel, id: u64, want: u64) -> Result<usize, i32> {
    let size = want.max(PIPE_BUF as u64).checked_next_power_of_two();
    let size = match size {
        Some(s) if s <= MAX_CAPACITY => s as usize,
        _ if want > (1 << 31) => return Err(libc::EINVAL),
        _ => return Err(libc::EPERM),
    };
    let old = capacity(k, id);
    let room = k.pipes.room;
    if size > old && room.held - old as u64 + size as u64 > room.soft {
        return Err(libc::EPERM);
    }
    if buffered(k, id) > size {
        return Err(libc::EBUSY);
    }
    k.pipes.capacities.insert(id, size);
    k.pipes.room.held = room.held - old as u64 + size as u64;
    // A writer waiting for room may fit now.
    k.pipes.note_activity();
    k.touch(Ready::Pipe(id));
    Ok(size)
}

/// Two new pipes, one each way: the ends of a connection (ENOBUFS when
/// the pipes have no room for them).
pub fn new_connection(k: &mut Kernel) -> Result<(u64, u64), i32> {
    let capacity = k.pipes.room.for_new(2).map_err(|_| libc::ENOBUFS)?;
    let (one, two) = (k.pipes.next, k.pipes.next + 1);
    k.pipes.create(one, 2, capacity);
    k.pipes.note_activity();
    Ok((one, two))
}

/// Bytes waiting in pipe `id`.
pub fn buffered(k: &Kernel, id: u64) -> usize {
    k.pipes.buffers.get(&id).map_or(0, VecDeque::len)
}

/// What a read of pipe `id` would do now: `Some(n)` bytes (0 at the end),
/// `None` when it has to wait.
fn readable(k: &Kernel, id: u64) -> Option<usize> {
    let n = k.pipes.buffers.get(&id).map_or(0, VecDeque::len);
    (n > 0 || !end_open(k, id, true)).then_some(n)
}

/// Room for a write of `len` bytes now, or `None` when it has to wait (a
/// closed read end never waits: the write fails).
fn writable(k: &Kernel, id: u64, len: usize) -> Option<usize> {
    if !end_open(k, id, false) {
        return Some(0);
    }
    let room = capacity(k, id).saturating_sub(buffered(k, id));
    // Small writes go in whole; larger ones take what fits.
    let fits = if len <= PIPE_BUF {
        room >= len
    } else {
        room > 0
    };
    fits.then_some(room)
}

/// `read` on a pipe's read end.
pub fn read(k: &mut Kernel, id: u64, nonblock: bool, buf: u64, len: u64, nr: u64) -> SysResult {
    if len == 0 {
        return SysResult::Ret(0);
    }
    let Some(available) = readable(k, id) else {
        return wait_unless(nonblock, id, false, 0, nr);
    };
    let n = available.min(len as usize);
    k.pipes.note_activity();
    k.touch(Ready::Pipe(id));
    let data: Vec<u8> = k
        .pipes
        .buffers
        .get_mut(&id)
        .map(|b| b.drain(..n).collect())
        .unwrap_or_default();
    if k.write(buf, &data).is_err() {
        // Put back what could not be delivered.
        if let Some(b) = k.pipes.buffers.get_mut(&id) {
            for byte in data.into_iter().rev() {
                b.push_front(byte);
            }
        }
        return err(libc::EFAULT);
    }
    SysResult::Ret(n as i64)
}

/// `write` on a pipe's write end.
pub fn write(k: &mut Kernel, id: u64, nonblock: bool, data: &[u8], nr: u64) -> SysResult {
    if data.is_empty() {
        return SysResult::Ret(0);
    }
    if !end_open(k, id, false) {
        let tid = k.current;
        let sigpipe = PendingSignal {
            signo: libc::SIGPIPE as u32,
            code: 0,
            addr: 0,
            sender: 0,
            forced: false,
        };
        signal::send_to_thread(k, tid, sigpipe);
        return err(libc::EPIPE);
    }
    let Some(room) = writable(k, id, data.len()) else {
        return wait_unless(nonblock, id, true, data.len(), nr);
    };
    let n = room.min(data.len());
    k.pipes.note_activity();
    k.touch(Ready::Pipe(id));
    if let Some(b) = k.pipes.buffers.get_mut(&id) {
        b.extend(&data[..n]);
    }
    SysResult::Ret(n as i64)
}

/// Poll readiness of a pipe end: `(readable or at its end, writable,
/// the other end closed)`.
pub fn poll_state(k: &Kernel, id: u64, write: bool) -> (bool, bool, bool) {
    if write {
        let readers = end_open(k, id, false);
        (false, !readers || writable(k, id, 1).is_some(), !readers)
    } else {
        let writers = end_open(k, id, true);
        (readable(k, id).is_some(), false, !writers)
    }
}

/// Whether a call waiting on pipe (or counter) `id` for a read, or for a
/// write of `len` bytes, can go on now.
pub fn can_go(k: &Kernel, id: u64, write: bool, len: usize) -> bool {
    if id & COUNTER != 0 {
        let value = k.pipes.counters.get(&(id & !COUNTER)).copied().unwrap_or(0);
        if write {
            len as u64 <= COUNTER_MAX - value
        } else {
            value > 0
        }
    } else if write {
        writable(k, id, len).is_some()
    } else {
        readable(k, id).is_some()
    }
}

/// A description of pipe `id`'s `write` (or read) end went, and no other
/// holds that end: the pipe goes once neither end is held anywhere.
pub fn let_go_of_end(k: &mut Kernel, id: u64, write: bool) {
    if end_open(k, id, !write) || queued(k, id) {
        return;
    }
    forget_pipe(k, id);
}

/// Pipe `id`'s buffer and capacity go.
fn forget_pipe(k: &mut Kernel, id: u64) {
    if k.pipes.buffers.remove(&id).is_some() {
        let capacity = k.pipes.capacities.remove(&id).unwrap_or(CAPACITY);
        k.pipes.room.held -= capacity as u64;
    }
}

/// Whether a connection waiting in a listener's queue holds pipe `id`.
fn queued(k: &Kernel, id: u64) -> bool {
    k.sockets.queues_end(id, false) || k.sockets.queues_end(id, true)
}

impl Default for Room {
    fn default() -> Room {
        Room::for_memory(crate::kernel::vfs::DEFAULT_OVERLAY_LIMIT)
    }
}
