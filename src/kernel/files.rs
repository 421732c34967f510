//! File descriptors and open file descriptions.
//!
//! Descriptions live in a table indexed by number so that `dup`ed
//! descriptors share an offset and a plain `clone` of the table (a snapshot)
//! keeps that sharing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::vfs::NodeKind;
use crate::ids::Pid;

/// What an open file is.
#[derive(Clone, Debug)]
pub enum FileKind {
    /// A host file, read-only, with the bytes it had when first looked up.
    Host(Arc<Vec<u8>>),
    /// A file in the guest's private overlay, by path.
    Overlay,
    /// Generated contents (`/proc`, `/sys`).
    Synthetic(Arc<Vec<u8>>),
    /// A directory being listed, with its entries.
    Dir(Arc<Vec<(String, NodeKind)>>),
    /// Standard input: always at end of file.
    Stdin,
    /// Standard output or error (1 or 2).
    Output(u32),
    /// A standard stream of the host's own (0, 1 or 2), a visitor's
    /// (`kernel::visit`): what is read and written passes through.
    HostStream(u32),
    /// `/dev/null`.
    Null,
    /// `/dev/zero`.
    Zero,
    /// `/dev/urandom` / `/dev/random`: bytes from the run's seed.
    Random,
    /// An `O_PATH` descriptor: names a file, cannot be read.
    PathOnly,
    /// A socket that never connects (`sys_net`): its domain and type.
    Socket { domain: i32, kind: i32 },
    /// A socket bound to a name (`bind`), listening once `listen` says so:
    /// its state is `file::socket::Sockets`' entry `id`.
    BoundSocket { domain: i32, kind: i32, id: u64 },
    /// An end of a pipe (`sys_pipe`).
    Pipe { id: u64, write: bool },
    /// An event counter (`eventfd`, in `sys_pipe`).
    EventFd { id: u64, semaphore: bool },
    /// An epoll instance (`sys_epoll`).
    Epoll { id: u64 },
    /// A process descriptor (`pidfd_open`): readable once the process ends.
    PidFd { pid: Pid },
    /// A timer descriptor (`timerfd_create`, in `sys_timer`).
    TimerFd { id: u64, realtime: bool },
    /// A signal descriptor (`signalfd`): reads the pending signals of `mask`.
    SignalFd { mask: u64 },
    /// One end of a connected unix socket pair (`socketpair`): it reads
    /// pipe `rx` and writes pipe `tx` (`sys_pipe`).
    SocketPair { rx: u64, tx: u64 },
    /// The master of pseudoterminal pair `id` (`/dev/ptmx`, `file::pty`).
    PtyMaster { id: u32 },
    /// The slave of pseudoterminal pair `id` (`/dev/pts/N`).
    PtySlave { id: u32 },
}

/// An open file description.
#[derive(Clone, Debug)]
pub struct OpenFile {
    pub kind: FileKind,
    /// Normalized path ("" for standard streams).
    pub path: String,
    pub offset: u64,
    /// `O_ACCMODE`, `O_APPEND`, `O_NONBLOCK` ... as given to `open`.
    pub flags: i32,
    /// Once processes share the description (after a fork), its offset
    /// lives in the kernel's table under this id instead of in `offset`:
    /// a child writing to the parent's file moves the parent's offset too.
    pub shared: Option<u64>,
}

impl OpenFile {
    pub fn readable(&self) -> bool {
        self.flags & libc::O_ACCMODE != libc::O_WRONLY && !matches!(self.kind, FileKind::PathOnly)
    }
    pub fn writable(&self) -> bool {
        self.flags & libc::O_ACCMODE != libc::O_RDONLY && !matches!(self.kind, FileKind::PathOnly)
    }
}

/// A kernel object a description keeps alive: what must go once no
/// description anywhere holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Held {
    /// A pipe's read or write end (a socket pair's holds two).
    PipeEnd {
        id: u64,
        write: bool,
    },
    /// An event counter.
    Counter(u64),
    /// An epoll instance.
    Epoll(u64),
    /// A bound socket.
    Bound(u64),
    /// A pseudoterminal pair's master, or its slave.
    PtyMaster(u32),
    PtySlave(u32),
}

impl FileKind {
    /// The objects a description of this kind holds.
    pub fn held(&self) -> impl Iterator<Item = Held> {
        let (one, two) = match *self {
            FileKind::Pipe { id, write } => (Some(Held::PipeEnd { id, write }), None),
            FileKind::SocketPair { rx, tx } => (
                Some(Held::PipeEnd {
                    id: rx,
                    write: false,
                }),
                Some(Held::PipeEnd {
                    id: tx,
                    write: true,
                }),
            ),
            FileKind::EventFd { id, .. } => (Some(Held::Counter(id)), None),
            FileKind::Epoll { id } => (Some(Held::Epoll(id)), None),
            FileKind::BoundSocket { id, .. } => (Some(Held::Bound(id)), None),
            FileKind::PtyMaster { id } => (Some(Held::PtyMaster(id)), None),
            FileKind::PtySlave { id } => (Some(Held::PtySlave(id)), None),
            _ => (None, None),
        };
        one.into_iter().chain(two)
    }
}

/// A descriptor slot.
#[derive(Clone, Copy, Debug)]
pub struct Fd {
    pub file: u32,
    pub cloexec: bool,
}

/// The process's descriptor table.
#[derive(Clone, Debug, Default)]
pub struct FdTable {
    fds: BTreeMap<i32, Fd>,
    files: BTreeMap<u32, OpenFile>,
    next_file: u32,
    /// `RLIMIT_NOFILE`'s soft limit.
    pub limit: i32,
    /// The descriptors of each description, so closing one needs no look
    /// at the others.
    numbers: BTreeMap<u32, BTreeSet<i32>>,
    /// Free numbers below `high`, as ranges (start to end, exclusive), so
    /// the lowest free one is found without walking the table.
    gaps: BTreeMap<i32, i32>,
    /// One past the highest open descriptor.
    high: i32,
    /// Descriptors of pipe or socket-pair ends.
    pipe_ends: usize,
    /// How many descriptions hold each object: whether one is still open
    /// is a lookup, not a walk over every descriptor.
    held: BTreeMap<Held, u32>,
    /// What changed since the kernel last took it ([`FdTable::take_log`]).
    log: Log,
}

/// What a table's changes mean outside it: objects it began or ceased to
/// hold (the kernel counts the tables holding each), and numbers that
/// now name another description or a description of another kind (an
/// epoll instance watching that number looks again).
#[derive(Clone, Debug, Default)]
pub struct Log {
    /// (object, whether the table holds it now), in the order it happened.
    pub held: Vec<(Held, bool)>,
    pub rebound: Vec<i32>,
    /// Free ranges looked at to find a number.
    pub probes: u64,
}

fn is_pipe_end(f: &OpenFile) -> bool {
    matches!(f.kind, FileKind::Pipe { .. } | FileKind::SocketPair { .. })
}

impl FdTable {
    /// A table with standard input, output and error open.
    pub fn with_stdio() -> Self {
        Self::with_streams([
            (FileKind::Stdin, libc::O_RDONLY),
            (FileKind::Output(1), libc::O_WRONLY),
            (FileKind::Output(2), libc::O_WRONLY),
        ])
    }

    /// A table whose standard streams are the host's (a visitor's, see
    /// `kernel::visit`).
    pub fn with_host_streams() -> Self {
        Self::with_streams([
            (FileKind::HostStream(0), libc::O_RDONLY),
            (FileKind::HostStream(1), libc::O_WRONLY),
            (FileKind::HostStream(2), libc::O_WRONLY),
        ])
    }

    fn with_streams(streams: [(FileKind, i32); 3]) -> Self {
        let mut t = FdTable {
            limit: 1024,
            ..Default::default()
        };
        for (kind, flags) in streams {
            let f = OpenFile {
                kind,
                path: String::new(),
                offset: 0,
                flags,
                shared: None,
            };
            t.install(f, false, 0).expect("room for stdio");
        }
        t
    }

    /// The open descriptors' numbers, lowest first.
    pub fn numbers(&self) -> impl Iterator<Item = i32> + '_ {
        self.fds.keys().copied()
    }

    /// Adds a description and a descriptor for it at the lowest free
    /// number at or above `min`.
    pub fn install(&mut self, f: OpenFile, cloexec: bool, min: i32) -> Result<i32, i32> {
        let fd = self.lowest_free(min)?;
        let id = self.next_file;
        self.next_file += 1;
        self.hold(&f.kind);
        self.files.insert(id, f);
        self.occupy(fd, id, cloexec);
        Ok(fd)
    }

    /// Counts the objects a new (or changed) description of `kind` holds.
    fn hold(&mut self, kind: &FileKind) {
        for h in kind.held() {
            let n = self.held.entry(h).or_default();
            *n += 1;
            if *n == 1 {
                self.log.held.push((h, true));
            }
        }
    }

    /// Uncounts them when a description of `kind` goes or changes.
    fn let_go(&mut self, kind: &FileKind) {
        for h in kind.held() {
            let n = self.held.get_mut(&h).expect("held objects are counted");
            *n -= 1;
            if *n == 0 {
                self.held.remove(&h);
                self.log.held.push((h, false));
            }
        }
    }

    /// Whether any description here holds `h`.
    pub fn holds(&self, h: Held) -> bool {
        self.held.contains_key(&h)
    }

    /// What changed since the last call.
    pub fn take_log(&mut self) -> Log {
        std::mem::take(&mut self.log)
    }

    /// How the objects held here changed since the last [`FdTable::take_log`]:
    /// +1 if `h` is held now and was not then, -1 the other way, else 0.
    pub fn held_change(&self, h: Held) -> i64 {
        self.log
            .held
            .iter()
            .rev()
            .find(|(x, _)| *x == h)
            .map_or(0, |(_, now)| {
                let first = self.log.held.iter().find(|(x, _)| *x == h).expect("found");
                // Held before the first change iff that change let it go.
                let before = !first.1;
                i64::from(*now) - i64::from(before)
            })
    }

    /// Every object held here.
    pub fn all_held(&self) -> impl Iterator<Item = Held> + '_ {
        self.held.keys().copied()
    }

    fn lowest_free(&mut self, min: i32) -> Result<i32, i32> {
        self.log.probes += 2;
        let fd = match self.gaps.range(..=min).next_back() {
            Some((_, &end)) if end > min => min,
            _ => match self.gaps.range(min..).next() {
                Some((&start, _)) => start,
                None => min.max(self.high),
            },
        };
        if fd >= self.limit {
            return Err(libc::EMFILE);
        }
        Ok(fd)
    }

    /// Points free number `fd` at description `file`.
    fn occupy(&mut self, fd: i32, file: u32, cloexec: bool) {
        debug_assert!(!self.fds.contains_key(&fd));
        if fd >= self.high {
            if fd > self.high {
                self.gaps.insert(self.high, fd);
            }
            self.high = fd + 1;
        } else {
            let (&start, &end) = self
                .gaps
                .range(..=fd)
                .next_back()
                .expect("a free number below the top lies in a gap");
            self.gaps.remove(&start);
            if start < fd {
                self.gaps.insert(start, fd);
            }
            if fd + 1 < end {
                self.gaps.insert(fd + 1, end);
            }
        }
        self.numbers.entry(file).or_default().insert(fd);
        self.fds.insert(fd, Fd { file, cloexec });
        self.log.rebound.push(fd);
        if self.files.get(&file).is_some_and(is_pipe_end) {
            self.pipe_ends += 1;
        }
    }

    /// Frees number `fd`; returns its description's id.
    fn release(&mut self, fd: i32) -> Option<u32> {
        let d = self.fds.remove(&fd)?;
        self.log.rebound.push(fd);
        if self.files.get(&d.file).is_some_and(is_pipe_end) {
            self.pipe_ends -= 1;
        }
        let (mut start, mut end) = (fd, fd + 1);
        if let Some((&s, &e)) = self.gaps.range(..fd).next_back() {
            if e == fd {
                self.gaps.remove(&s);
                start = s;
            }
        }
        if let Some(e) = self.gaps.remove(&end) {
            end = e;
        }
        if end >= self.high {
            self.high = start;
        } else {
            self.gaps.insert(start, end);
        }
        let numbers = self.numbers.get_mut(&d.file).expect("counted");
        numbers.remove(&fd);
        if numbers.is_empty() {
            self.numbers.remove(&d.file);
            if let Some(f) = self.files.remove(&d.file) {
                self.let_go(&f.kind);
            }
        }
        Some(d.file)
    }

    /// How many descriptors are pipe or socket-pair ends.
    pub fn pipe_ends(&self) -> usize {
        self.pipe_ends
    }

    pub fn get(&self, fd: i32) -> Option<&OpenFile> {
        self.fds.get(&fd).and_then(|d| self.files.get(&d.file))
    }

    /// Makes descriptor `fd`'s description one of `kind` (a socket bound
    /// or connected, a direction shut down); whether `fd` is open.
    pub fn set_kind(&mut self, fd: i32, kind: FileKind) -> bool {
        let Some(id) = self.fds.get(&fd).map(|d| d.file) else {
            return false;
        };
        let Some(f) = self.files.get_mut(&id) else {
            return false;
        };
        let old = std::mem::replace(&mut f.kind, kind);
        let new_end = is_pipe_end(f);
        let kind = f.kind.clone();
        self.hold(&kind);
        self.let_go(&old);
        let numbers = &self.numbers[&id];
        let was_end = matches!(old, FileKind::Pipe { .. } | FileKind::SocketPair { .. });
        self.pipe_ends = self.pipe_ends + usize::from(new_end) * numbers.len()
            - usize::from(was_end) * numbers.len();
        self.log.rebound.extend(numbers.iter().copied());
        true
    }

    /// A description, to change its offset, status flags or path: never
    /// its kind ([`FdTable::set_kind`] does that).
    pub fn position_mut(&mut self, fd: i32) -> Option<&mut OpenFile> {
        let id = self.fds.get(&fd)?.file;
        self.files.get_mut(&id)
    }

    pub fn fd(&self, fd: i32) -> Option<Fd> {
        self.fds.get(&fd).copied()
    }

    pub fn set_cloexec(&mut self, fd: i32, on: bool) -> bool {
        match self.fds.get_mut(&fd) {
            Some(d) => {
                d.cloexec = on;
                true
            }
            None => false,
        }
    }

    /// Closes a descriptor; its description goes when no descriptor is left.
    pub fn close(&mut self, fd: i32) -> bool {
        if self.release(fd).is_none() {
            return false;
        }
        true
    }

    /// `dup`-family: a new descriptor for the same description.
    pub fn dup(&mut self, fd: i32, min: i32, cloexec: bool) -> Result<i32, i32> {
        let file = self.fds.get(&fd).ok_or(libc::EBADF)?.file;
        let new = self.lowest_free(min)?;
        self.occupy(new, file, cloexec);
        Ok(new)
    }

    /// `dup2`/`dup3`: `new` refers to `old`'s description.
    pub fn dup_to(&mut self, old: i32, new: i32, cloexec: bool) -> Result<i32, i32> {
        let file = self.fds.get(&old).ok_or(libc::EBADF)?.file;
        if new < 0 || new >= self.limit {
            return Err(libc::EBADF);
        }
        if old == new {
            if let Some(d) = self.fds.get_mut(&new) {
                d.cloexec = cloexec;
            }
        } else {
            self.close(new);
            self.occupy(new, file, cloexec);
        }
        Ok(new)
    }

    /// Closes the descriptors marked close-on-exec (at `execve`).
    pub fn close_on_exec(&mut self) {
        let marked: Vec<i32> = self
            .fds
            .iter()
            .filter(|(_, d)| d.cloexec)
            .map(|(fd, _)| *fd)
            .collect();
        for fd in marked {
            self.close(fd);
        }
    }

    /// Every description, to mark it shared (at fork) or move its path:
    /// never to change its kind.
    pub fn descriptions_mut(&mut self) -> impl Iterator<Item = &mut OpenFile> {
        self.files.values_mut()
    }

    /// Open descriptors in order.
    pub fn list(&self) -> impl Iterator<Item = (i32, &OpenFile)> {
        self.fds
            .iter()
            .filter_map(|(fd, d)| self.files.get(&d.file).map(|f| (*fd, f)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> OpenFile {
        OpenFile {
            kind: FileKind::Null,
            path: "/dev/null".into(),
            offset: 0,
            flags: libc::O_RDWR,
            shared: None,
        }
    }

    #[test]
    fn descriptors_take_the_lowest_free_number() {
        let mut t = FdTable::with_stdio();
        assert_eq!(t.install(file(), false, 0), Ok(3));
        assert_eq!(t.install(file(), false, 0), Ok(4));
        t.close(3);
        assert_eq!(t.install(file(), false, 0), Ok(3));
    }

    #[test]
    fn the_lowest_free_number_is_found_among_gaps_above_and_below() {
        let mut t = FdTable::with_stdio();
        for want in 3..10 {
            assert_eq!(t.install(file(), false, 0), Ok(want));
        }
        for fd in [4, 5, 7] {
            assert!(t.close(fd));
        }
        assert_eq!(t.install(file(), false, 6), Ok(7));
        assert_eq!(t.install(file(), false, 0), Ok(4));
        assert_eq!(t.dup_to(0, 20, false), Ok(20));
        assert_eq!(t.install(file(), false, 10), Ok(10));
        assert!(t.close(20));
        assert!(t.close(9));
        assert_eq!(t.install(file(), false, 9), Ok(9));
        assert_eq!(t.dup(0, 11, false), Ok(11));
        assert_eq!(t.install(file(), false, 0), Ok(5));
        assert_eq!(t.install(file(), false, 0), Ok(12));
        let open: Vec<i32> = t.list().map(|(fd, _)| fd).collect();
        assert_eq!(open, (0..13).collect::<Vec<_>>());
        // A description lives as long as any descriptor does.
        assert_eq!(t.dup(3, 0, false), Ok(13));
        assert!(t.close(3));
        assert!(t.get(13).is_some());
        t.limit = 14;
        assert_eq!(t.install(file(), false, 0), Ok(3));
        assert_eq!(t.install(file(), false, 0), Err(libc::EMFILE));
    }

    #[test]
    fn duplicates_share_the_offset() {
        let mut t = FdTable::with_stdio();
        let a = t.install(file(), false, 0).unwrap();
        let b = t.dup(a, 0, false).unwrap();
        t.position_mut(a).unwrap().offset = 7;
        assert_eq!(t.get(b).unwrap().offset, 7);
        t.close(a);
        assert_eq!(t.get(b).unwrap().offset, 7);
    }
}
