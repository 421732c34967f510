//! Processes: what the threads of one process share, and moving between
//! processes.
//!
//! Each process owns its descriptors, signal dispositions, limits and
//! working directory, in its [`Process`] entry; system calls reach the
//! current process's through `Kernel::files`, `Kernel::signals` and
//! the like. Its address space is one of the kernel's (by id: a `vfork`
//! child runs in its parent's); the one the CPU runs in is the kernel's
//! `mm`, switched by `Kernel::enter` as a context switch loads CR3, and
//! the page pool travels with it.

use std::collections::BTreeMap;

use super::Kernel;
use super::files::FdTable;
use super::futex::FutexKey;
use super::signal::SignalTable;
use super::thread::{ThreadState, Wait};
use crate::ids::Pid;
use crate::memory::AddressSpace;

/// How a process ended, as `wait` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    Exited(i32),
    Killed(u32),
}

impl Ended {
    /// The status word `wait4` stores.
    pub fn wait_status(self) -> i32 {
        match self {
            Ended::Exited(code) => (code & 0xff) << 8,
            Ended::Killed(sig) => sig as i32 & 0x7f,
        }
    }
}

/// The process-wide settings `prctl` makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// `PR_SET_DUMPABLE` (Linux's default is dumpable).
    pub dumpable: bool,
    /// `PR_SET_THP_DISABLE`: no transparent huge pages (none are made
    /// here anyway); inherited by children and kept across `execve`.
    pub thp_disabled: bool,
    /// `PR_SET_CHILD_SUBREAPER`: orphaned descendants become its children
    /// instead of the first process's.
    pub child_subreaper: bool,
    /// `PR_SET_KEEPCAPS`.
    pub keep_caps: bool,
    /// `PR_SET_NO_NEW_PRIVS`: inherited and never cleared.
    pub no_new_privs: bool,
    /// The execution domain and its flags (`personality`): inherited
    /// and kept across `execve`.
    pub personality: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            dumpable: true,
            thp_disabled: false,
            child_subreaper: false,
            keep_caps: false,
            no_new_privs: false,
            personality: 0,
        }
    }
}

impl Options {
    /// What a forked child starts with: the settings Linux passes on.
    pub fn for_child(self) -> Options {
        Options {
            thp_disabled: self.thp_disabled,
            no_new_privs: self.no_new_privs,
            personality: self.personality,
            ..Options::default()
        }
    }
}

/// One process.
#[derive(Clone, Debug)]
pub struct Process {
    pub pid: Pid,
    /// The parent's pid (0 for the first process).
    pub parent: Pid,
    pub pgid: Pid,
    pub sid: Pid,
    /// The address space it runs in (an id in the kernel's `spaces`).
    pub space: Pid,
    /// The program it runs (the ELF file, an interpreter for a script),
    /// by the path it was loaded from: what its mappings are named.
    pub exe: String,
    /// Its arguments and environment as its program received them
    /// (`/proc/PID/cmdline`, `/proc/PID/environ`).
    pub cmdline: Vec<String>,
    pub environ: Vec<String>,
    /// Virtual time when it was made (`/proc/PID/stat`'s start time).
    pub started: super::Nanos,
    /// Its `prctl` settings.
    pub options: Options,
    /// Set once every thread has ended: a zombie until its parent waits.
    pub ended: Option<Ended>,
    /// The signal its parent gets when it ends (SIGCHLD, or none).
    pub exit_signal: u32,
    /// A `vfork` parent's thread, blocked until this process execs or ends.
    pub vfork_parent: Option<super::Tid>,
    /// Its descriptor table (emptied when it ends).
    pub files: FdTable,
    /// Its signal dispositions.
    pub signals: SignalTable,
    /// Resource limits it set (`prlimit64`), by resource number.
    pub limits: BTreeMap<u32, (u64, u64)>,
    /// Its working directory.
    pub cwd: String,
}

impl Kernel {
    /// Adds process `p`, as its parent's child and a user of its space.
    pub(super) fn add_process(&mut self, p: Process) {
        self.children.entry(p.parent).or_default().insert(p.pid);
        self.space_users.entry(p.space).or_default().insert(p.pid);
        self.procs.insert(p.pid, p);
    }

    /// Forgets process `pid` (reaped).
    pub(super) fn remove_process(&mut self, pid: Pid) -> Option<Process> {
        let p = self.procs.remove(&pid)?;
        for (map, key) in [
            (&mut self.children, p.parent),
            (&mut self.space_users, p.space),
        ] {
            if let Some(set) = map.get_mut(&key) {
                set.remove(&pid);
                if set.is_empty() {
                    map.remove(&key);
                }
            }
        }
        Some(p)
    }

    /// Moves process `pid` to address space `space`.
    pub(super) fn set_space_of(&mut self, pid: Pid, space: Pid) {
        let p = self.procs.get_mut(&pid).expect("a known process");
        let old = std::mem::replace(&mut p.space, space);
        if let Some(set) = self.space_users.get_mut(&old) {
            set.remove(&pid);
            if set.is_empty() {
                self.space_users.remove(&old);
            }
        }
        self.space_users.entry(space).or_default().insert(pid);
    }

    /// The children of process `pid` (ended ones too), lowest first.
    pub(super) fn children_of(&self, pid: Pid) -> impl Iterator<Item = Pid> + '_ {
        self.children.get(&pid).into_iter().flatten().copied()
    }

    /// Whether a live process other than `except` runs in address space
    /// `id`.
    pub(super) fn space_used_by_another(&self, id: Pid, except: Pid) -> bool {
        self.space_users
            .get(&id)
            .into_iter()
            .flatten()
            .any(|p| *p != except && self.procs[p].ended.is_none())
    }

    /// The current process's entry.
    pub(super) fn process_entry(&self) -> &Process {
        &self.procs[&self.pid]
    }

    /// The current process's entry, to change.
    pub(super) fn process_entry_mut(&mut self) -> &mut Process {
        let pid = self.pid;
        self.procs.get_mut(&pid).expect("current process")
    }

    /// The current process's `prctl` settings, to change.
    pub(super) fn options_mut(&mut self) -> &mut Options {
        &mut self.process_entry_mut().options
    }

    /// The current process's descriptor table.
    pub(super) fn files(&self) -> &FdTable {
        &self.process_entry().files
    }

    /// The current process's descriptor table, to change.
    pub(super) fn files_mut(&mut self) -> &mut FdTable {
        &mut self.process_entry_mut().files
    }

    /// The current process's signal dispositions.
    pub(super) fn signals(&self) -> &SignalTable {
        &self.process_entry().signals
    }

    /// The current process's signal dispositions, to change.
    pub(super) fn signals_mut(&mut self) -> &mut SignalTable {
        &mut self.process_entry_mut().signals
    }

    /// The current thread's working directory: its process's, or its own
    /// once it has one (`unshare(CLONE_FS)`).
    pub(super) fn cwd(&self) -> &str {
        let own = self.threads().get(&self.current).and_then(|t| t.own_cwd);
        match own.and_then(|id| self.own_cwds.get(&id)) {
            Some(own) => own,
            None => &self.process_entry().cwd,
        }
    }

    /// Changes the current thread's working directory (its process's,
    /// unless it has its own).
    pub(super) fn set_cwd(&mut self, path: String) {
        match self.cur().own_cwd {
            Some(id) => {
                self.own_cwds.insert(id, path);
            }
            None => self.process_entry_mut().cwd = path,
        }
    }

    /// A working directory apart from the process's, starting as the
    /// current thread's: its id.
    pub(super) fn new_own_cwd(&mut self) -> u32 {
        let id = self.own_cwds.keys().next_back().map_or(0, |k| k + 1);
        let cwd = self.cwd().to_string();
        self.own_cwds.insert(id, cwd);
        id
    }

    /// `path` made absolute against the current process's working
    /// directory, without `.`, `..` and repeated slashes.
    pub(super) fn absolute(&self, path: &str) -> String {
        super::vfs::normalize(self.cwd(), path)
    }

    /// The pid of the current process.
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Every process, live or waiting to be reaped, by pid.
    pub fn processes(&self) -> &BTreeMap<Pid, Process> {
        &self.procs
    }

    /// The address space process `pid` runs in (the kernel's own when it
    /// is the current one's).
    pub fn space_of(&self, pid: Pid) -> Option<&AddressSpace> {
        let id = self.procs.get(&pid)?.space;
        if id == self.space {
            Some(&self.mm)
        } else {
            self.spaces.get(&id)
        }
    }

    /// The program the current process runs, by the path it was loaded
    /// from (after an `execve`, the new one): what reports name the
    /// program's own code by.
    pub fn program(&self) -> &str {
        &self.process_entry().exe
    }

    /// Makes `pid` the process system calls work on, switching address
    /// spaces when they differ.
    pub(super) fn enter(&mut self, pid: Pid) {
        if pid == self.pid {
            return;
        }
        self.leaving_files();
        self.pid = pid;
        self.entering_files();
        let space = self
            .procs
            .get(&pid)
            .expect("entering a known process")
            .space;
        self.switch_space(space);
    }

    /// Makes address space `id` the kernel's; the one it replaces is
    /// parked (an ended process's, empty, until its parent reaps it).
    pub(super) fn switch_space(&mut self, id: Pid) {
        if id == self.space {
            return;
        }
        let mut next = self.spaces.remove(&id).expect("a parked address space");
        self.mm.hand_pool_to(&mut next);
        self.invalidate |= self.mm.take_needs_invalidate();
        let old = std::mem::replace(&mut self.mm, next);
        self.spaces.insert(self.space, old);
        self.space = id;
    }

    /// Whether a live process runs in address space `id`.
    fn space_in_use(&self, id: Pid) -> bool {
        self.space_used_by_another(id, Pid(0))
    }

    /// Runs `f` with `pid` as the current process (for acting on another
    /// process: a signal, a wake-up), then comes back.
    pub(super) fn with_process<R>(&mut self, pid: Pid, f: impl FnOnce(&mut Kernel) -> R) -> R {
        let back = self.pid;
        self.enter(pid);
        let r = f(self);
        self.enter(back);
        r
    }

    /// Installs `space` as a new address space with id `id` (parked).
    pub(super) fn park_space(&mut self, id: Pid, space: AddressSpace) {
        self.spaces.insert(id, space);
    }

    /// Which futex the word at `addr` of the current process is: by its
    /// place in a shared object when it lies in a shared mapping and the
    /// operation is not FUTEX_PRIVATE_FLAG's, else by its address in
    /// this address space.
    pub(super) fn futex_key(&self, addr: u64, private: bool) -> FutexKey {
        let shared = self.mm.vma_at(addr).and_then(|v| v.shared_at(addr));
        match shared {
            Some((object, offset)) if !private => FutexKey::Shared { object, offset },
            _ => FutexKey::Private {
                space: self.space.0,
                addr,
            },
        }
    }

    /// Makes the open descriptions of overlay files at `from` (or under it)
    /// follow them to `to`, in every process, as descriptors follow an
    /// inode on Linux; whether there were any.
    pub(super) fn retarget_descriptions(&mut self, from: &str, to: &str) -> bool {
        let under = format!("{from}/");
        let mut any = false;
        let mut follow = |t: &mut FdTable| {
            for f in t.descriptions_mut() {
                if matches!(f.kind, super::files::FileKind::Overlay)
                    && (f.path == from || f.path.starts_with(&under))
                {
                    f.path = format!("{to}{}", &f.path[from.len()..]);
                    any = true;
                }
            }
        };
        for p in self.procs.values_mut().filter(|p| p.ended.is_none()) {
            follow(&mut p.files);
        }
        any
    }

    /// The live processes holding an end of pipe `id` open (the write end
    /// when `write`), lowest pid first.
    pub(super) fn pipe_end_holders(&self, id: u64, write: bool) -> Vec<Pid> {
        use super::files::FileKind;
        let holds = |t: &FdTable| {
            t.list().any(|(_, f)| match f.kind {
                FileKind::Pipe { id: i, write: w } => i == id && w == write,
                FileKind::SocketPair { rx, tx } => (if write { tx } else { rx }) == id,
                _ => false,
            })
        };
        self.procs
            .values()
            .filter(|p| p.ended.is_none() && holds(&p.files))
            .map(|p| p.pid)
            .collect()
    }

    /// Ends the current process with `how`: its threads stop, its
    /// descriptors close, its memory goes back to the pool, its parent is
    /// told. The first process ending ends the run (the caller says how).
    pub(super) fn end_process(&mut self, how: Ended) {
        let pid = self.pid;
        // Its exited threads have no signals left; the live ones lose theirs.
        let ending: Vec<super::Tid> = self.threads.members(pid).collect();
        self.changes.count(ending.len() as u64);
        for tid in ending {
            self.threads.set_state(tid, ThreadState::Exited);
            self.threads.change_pending(tid, Vec::clear);
        }
        self.drop_files();
        self.timers.forget(pid);
        let (parent, exit_signal, vfork_parent, space) = {
            let p = self.procs.get_mut(&pid).expect("current process");
            p.ended = Some(how);
            (p.parent, p.exit_signal, p.vfork_parent.take(), p.space)
        };
        if !self.space_in_use(space) {
            self.mm.tear_down(&self.mem);
            self.collect_shared();
        }
        if let Some(t) = vfork_parent {
            self.wake(t, pid.0 as i64);
        }
        // Orphans go to the nearest living ancestor that is a subreaper,
        // else to the first process, which reaps them if it waits.
        let heir = self.orphan_heir(parent);
        let orphans: Vec<Pid> = self.children.remove(&pid).into_iter().flatten().collect();
        self.changes.count(orphans.len() as u64);
        for child in orphans {
            self.procs.get_mut(&child).expect("listed").parent = heir;
            self.children.entry(heir).or_default().insert(child);
            // PR_SET_PDEATHSIG: its threads that asked learn of the end.
            let asked: Vec<(super::Tid, u32)> = self
                .threads
                .members(child)
                .map(|t| (t, self.threads[&t].parent_death_signal))
                .filter(|(_, signo)| *signo != 0)
                .collect();
            for (tid, signo) in asked {
                let s = super::thread::PendingSignal {
                    signo,
                    code: 0x80, // SI_KERNEL
                    addr: 0,
                    sender: 0,
                    forced: false,
                };
                self.with_process(child, |k| super::signal::send_to_thread(k, tid, s));
            }
        }
        self.child_changed(parent, exit_signal);
        // Polls on its pidfd look again.
        self.pipes.note_activity();
        self.touch(super::ready::Ready::Ended(pid));
    }

    /// Who takes the orphans of a child of `parent`: the nearest living
    /// process from `parent` up that is a child subreaper, else the first
    /// process.
    fn orphan_heir(&self, parent: Pid) -> Pid {
        let mut at = parent;
        for _ in 0..self.procs.len() {
            let Some(p) = self.procs.get(&at) else { break };
            if p.ended.is_none() && p.options.child_subreaper {
                return at;
            }
            at = p.parent;
        }
        self.first_pid
    }

    /// Tells process `parent` that a child changed state: its waiting
    /// threads look again, and it gets `signal` (SIGCHLD) if non-zero.
    fn child_changed(&mut self, parent: Pid, signal: u32) {
        let waiting: Vec<(super::Tid, u64)> = self
            .threads
            .child_waiters(parent)
            .filter_map(|t| match *self.threads[&t].state() {
                ThreadState::Blocked(Wait::Child { nr }) => Some((t, nr)),
                _ => None,
            })
            .collect();
        self.changes.count(waiting.len() as u64);
        for (tid, nr) in waiting {
            self.restart(tid, nr);
        }
        if signal != 0 && self.procs.get(&parent).is_some_and(|p| p.ended.is_none()) {
            let s = super::thread::PendingSignal {
                signo: signal,
                code: 1, // CLD_EXITED
                addr: 0,
                sender: self.pid.0,
                forced: false,
            };
            self.with_process(parent, |k| super::signal::send_to_process(k, s));
        }
    }
}
