//! The Linux personality: the monitor's implementation of the system calls a
//! multithreaded test binary makes.
//!
//! The kernel knows threads, memory, files, signals and time, and nothing of
//! KVM: it works on [`UserRegs`] and guest memory, and the engine moves
//! registers in and out of the vCPU. It never decides who runs next either;
//! it says who *can* run, and a scheduling strategy chooses.

mod call;
mod clone_args;
mod file;
pub mod files;
pub mod futex;
pub mod loader;
pub mod process;
pub mod ready;
mod shared;
pub mod signal;
pub mod site_path;
mod sync;
pub mod table;
pub mod thread;
pub mod vfs;

mod synth;
mod sys_epoll;
mod sys_file;
mod sys_info;
mod sys_mm;
mod sys_net;
mod sys_pipe;
mod sys_poll;
mod sys_process;
mod sys_signal;
mod sys_stat;
mod sys_thread;
mod sys_time;
mod sys_timer;
mod sys_tree;
mod timers;
pub mod visit;

use std::collections::BTreeMap;
use std::sync::Arc;

use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};

use crate::arch::abi::{self, HINT_SYSCALL, HintOp};
use crate::arch::cpu::{ExtendedState, UserRegs};
use crate::code::{SiteTable, SyncPoints};
use crate::ids::{GuestAddr, Pid};
use crate::memory::{Access, AddressSpace, MemError, PhysMemory};
use crate::observe::Observer;
use crate::observe::outcome::{BlockedThread, HungReason, Outcome, signal_name};
use crate::observe::trace::{Event, Operation};

use files::FdTable;
use futex::FutexTable;
use signal::SignalTable;
pub use thread::{Nanos, Thread, ThreadState, Tid, Wait};
use vfs::{SharedSource, Vfs};

/// Virtual time that passes at every step.
pub const STEP_QUANTUM_NS: Nanos = 1_000;
/// Virtual time a tick stands for: 16 ns a pass through a loop's tick
/// site, about a short loop's iteration with a call or two in it (a tight
/// loop's computation is seen to take longer than it does, a long
/// iteration's shorter).
pub const TICK_NS: Nanos = abi::TICK_PERIOD * 16;

/// The default step budget: far past what a test makes (a run that goes
/// round in circles ends long before, as hung without progress), yet a
/// bound on a run that keeps reaching new states forever.
pub const MAX_STEPS: u64 = 100_000_000;
/// Virtual time-stamp-counter ticks per nanosecond (a 1 GHz TSC).
pub const TSC_PER_NS: u64 = 1;
/// Thread id of the main thread (and the process id).
pub const MAIN_TID: Tid = Tid(1);
/// The first process's id (its first thread's).
const MAIN_PID: Pid = Pid(MAIN_TID.0);
/// Bytes of each output stream a run keeps.
pub const OUTPUT_CAP: usize = 16 << 20;

/// Everything about a run that is not the schedule: the inputs that make it
/// what it is, all recorded in a reproducer.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct KernelConfig {
    /// Path of the program as the guest sees it (absolute).
    pub exe: String,
    /// `argv`, including `argv[0]`.
    pub argv: Vec<String>,
    /// `envp`.
    pub env: Vec<String>,
    /// The initial working directory.
    pub cwd: String,
    /// CPUs the program is told it has.
    pub cpus: u32,
    /// Seeds `getrandom`, `AT_RANDOM` and `/dev/urandom`.
    pub seed: u64,
    /// `CLOCK_REALTIME` at boot, in seconds since 1970.
    pub epoch: u64,
    /// Preload the shim into dynamically linked programs.
    pub preload: Vec<String>,
    /// Stop the run after this many steps.
    pub max_steps: u64,
    /// End the run as hung when its threads only go round states they
    /// have been in for this many steps (`observe::progress`); 0 never.
    #[serde(default)]
    pub hang_steps: u64,
    /// How far scheduling points reach into user code.
    #[serde(default)]
    pub sync_points: SyncPoints,
    /// Report sync sites as reproducers of format 5 and earlier recorded
    /// them (at the first caller outside a runtime function, by symbol; no
    /// spinning deadlocks), so that they replay step for step.
    #[serde(default)]
    pub runtime_caller_sites: bool,
    /// Take polls, epoll waits and waiting reads of timer, signal and
    /// socket descriptors up again after any change to any pipe, counter,
    /// socket, timer, signal or process, as reproducers of format 7 and
    /// earlier and schedules of version 3 and earlier recorded them, so
    /// that they replay step for step (new runs take them up when what
    /// they wait on changes).
    #[serde(default)]
    pub polls_retry_on_any_activity: bool,
    /// How steps are made where that changed between versions (recorded by
    /// schedules and reproducers, which replay under their own).
    #[serde(default)]
    pub step_rules: crate::code::StepRules,
    /// Patch the sync sites the dispatcher can take with jumps to
    /// trampolines (see `code::sites::trampoline`) instead of breakpoints: how a
    /// site reaches the dispatcher, never what a run does.
    #[serde(skip)]
    pub site_jumps: bool,
}

impl KernelConfig {
    /// Defaults for a program at `exe` with `args`.
    pub fn new(exe: &str, args: &[String]) -> Self {
        let mut argv = vec![exe.to_string()];
        argv.extend(args.iter().cloned());
        KernelConfig {
            exe: exe.to_string(),
            argv,
            env: default_env(),
            cwd: "/".into(),
            cpus: 4,
            seed: 0,
            epoch: 1_767_225_600, // 2026-01-01T00:00:00Z
            preload: Vec::new(),
            max_steps: MAX_STEPS,
            hang_steps: crate::observe::progress::HANG_STEPS,
            sync_points: SyncPoints::Calls,
            runtime_caller_sites: false,
            polls_retry_on_any_activity: false,
            step_rules: crate::code::StepRules::default(),
            site_jumps: false,
        }
    }
}

/// The environment a guest gets unless told otherwise: enough for shells and
/// libraries, the same on every machine.
pub fn default_env() -> Vec<String> {
    vec![
        "PATH=/usr/local/bin:/usr/bin:/bin".into(),
        "HOME=/root".into(),
        "LANG=C.UTF-8".into(),
        "TERM=dumb".into(),
    ]
}

/// What a system-call handler decided.
#[derive(Debug)]
pub enum SysResult {
    /// Return this value (a negative errno for errors).
    Ret(i64),
    /// The thread blocks; the call's result is set when it wakes.
    Block(Wait),
    /// Return this value and offer the CPU to other threads.
    Yield(i64),
    /// The handler set the registers itself (or the thread is gone).
    NoReturn,
    /// The program needs something the monitor does not implement.
    Unsupported(String),
}

/// An errno as a handler result.
pub fn err(e: i32) -> SysResult {
    SysResult::Ret(-(e as i64))
}

/// Access to the extended register state of the thread on the CPU (which
/// only the machine has).
pub trait FpuAccess {
    fn save(&mut self) -> ExtendedState;
    fn load(&mut self, s: &ExtendedState);
}

/// The guest's kernel state: one process, its threads, memory, files,
/// signals and time, and the observer its steps are reported to. Cloning it
/// (with guest memory) is a snapshot.
#[derive(Clone)]
pub struct Kernel {
    mem: Arc<PhysMemory>,
    config: Arc<KernelConfig>,
    mm: AddressSpace,
    threads: thread::Threads,
    current: Tid,
    futex: FutexTable,
    vfs: Vfs,
    /// Virtual nanoseconds since boot.
    now: Nanos,
    rng: ChaCha20Rng,
    next_tid: u32,
    /// Working directories threads hold apart from their process's
    /// (`unshare(CLONE_FS)`), by id: threads made with `CLONE_FS` by such
    /// a thread share its id.
    own_cwds: BTreeMap<u32, String>,
    /// What the engine sees of the run.
    obs: Observer,
    /// Things the user should know about how the run was made.
    notes: Vec<String>,
    pipes: file::pipe::Pipes,
    epolls: file::epoll::Instances,
    /// Every process, by pid, with what its threads share.
    procs: BTreeMap<Pid, process::Process>,
    /// The current process.
    pid: Pid,
    /// The id of the address space in `mm`.
    space: Pid,
    /// The other address spaces, by id.
    spaces: BTreeMap<Pid, AddressSpace>,
    /// Translations the guest cached may be wrong (set when a parked or
    /// dropped address space changed).
    invalidate: bool,
    /// The process the run started with: its end is the run's end.
    first_pid: Pid,
    /// Timers of every process (`sys_timer`).
    timers: timers::Timers,
    /// Bound and listening sockets (`sys_net`).
    sockets: file::socket::Sockets,
    /// Pseudoterminal pairs (`file::pty`).
    ptys: file::pty::Ptys,
    /// Offsets and status flags of open file descriptions processes
    /// share, by id (see `OpenFile::shared`).
    shared_files: BTreeMap<u64, SharedFile>,
    /// Shared memory objects (`shared`).
    shared: shared::SharedObjects,
    /// Each process's children (ended ones too, until reaped).
    children: BTreeMap<Pid, std::collections::BTreeSet<Pid>>,
    /// The processes (ended ones too, until reaped) of each address space.
    space_users: BTreeMap<Pid, std::collections::BTreeSet<Pid>>,
    /// What changed since the waiters last looked (`ready`).
    changes: ready::Changes,
    /// Whether the run still makes progress.
    progress: crate::observe::progress::ProgressWatch,
    /// What the code says of the frames sync sites unwind through.
    frames: Arc<std::sync::Mutex<sync::FrameCache>>,
    /// A process visiting the paused run (`visit`), if one is.
    visit: Option<visit::Visit>,
}

/// What processes sharing an open file description share besides the
/// file itself.
#[derive(Clone, Copy, Debug)]
struct SharedFile {
    offset: u64,
    flags: i32,
}

impl Kernel {
    /// Loads the program named by `config` and prepares its main thread.
    pub fn new(
        mem: Arc<PhysMemory>,
        config: KernelConfig,
        source: SharedSource,
    ) -> Result<Kernel, loader::LoadError> {
        let mut k = Self::process(mem, config, source)
            .map_err(|e| loader::LoadError::Memory("the hint ring".into(), e))?;
        let exec = loader::Exec {
            exe: k.config.exe.clone(),
            execfn: k.config.exe.clone(),
            argv: k.config.argv.clone(),
            env: k.config.env.clone(),
        };
        let regs = loader::load(&mut k, &exec)?;
        k.cur().regs = regs;
        Ok(k)
    }

    /// A process whose main thread has not loaded a program: nothing is
    /// mapped but the hint ring, and the registers are zero. Guest memory
    /// is plain host memory, so system calls can be made on it without
    /// KVM: the kernel's own tests do.
    pub fn process(
        mem: Arc<PhysMemory>,
        config: KernelConfig,
        source: SharedSource,
    ) -> Result<Kernel, MemError> {
        let mm = AddressSpace::new(&mem);
        let mut vfs = Vfs::new(source);
        // The guest's files may hold as much as its memory, as a tmpfs may.
        vfs.set_overlay_limit(mem.size());
        let mut pipes = file::pipe::Pipes::default();
        pipes.set_memory(mem.size());
        let rng = ChaCha20Rng::seed_from_u64(config.seed);
        let config_hang_steps = config.hang_steps;
        let busy_can_be_stuck = !config.step_rules.ticks();
        let name = config
            .exe
            .rsplit('/')
            .next()
            .unwrap_or("main")
            .chars()
            .take(15)
            .collect();
        let mut k = Kernel {
            mem,
            config: Arc::new(config),
            mm,
            threads: thread::Threads::default(),
            current: MAIN_TID,
            futex: FutexTable::default(),
            vfs,
            now: 0,
            rng,
            next_tid: MAIN_TID.0 + 1,
            own_cwds: BTreeMap::new(),
            obs: Observer::new(OUTPUT_CAP),
            notes: Vec::new(),
            pipes,
            epolls: Default::default(),
            procs: BTreeMap::new(),
            pid: MAIN_PID,
            space: MAIN_PID,
            spaces: BTreeMap::new(),
            invalidate: false,
            first_pid: MAIN_PID,
            timers: Default::default(),
            sockets: Default::default(),
            ptys: Default::default(),
            shared_files: BTreeMap::new(),
            shared: Default::default(),
            children: BTreeMap::new(),
            space_users: BTreeMap::new(),
            changes: Default::default(),
            progress: crate::observe::progress::ProgressWatch::new(
                config_hang_steps,
                busy_can_be_stuck,
            ),
            frames: Default::default(),
            visit: None,
        };
        let first = process::Process {
            pid: MAIN_PID,
            parent: Pid(0),
            pgid: MAIN_PID,
            sid: MAIN_PID,
            space: MAIN_PID,
            exe: k.config.exe.clone(),
            cmdline: k.config.argv.clone(),
            environ: k.config.env.clone(),
            started: 0,
            options: Default::default(),
            ended: None,
            exit_signal: 0,
            vfork_parent: None,
            files: FdTable::with_stdio(),
            signals: SignalTable::default(),
            limits: BTreeMap::new(),
            cwd: k.config.cwd.clone(),
        };
        k.add_process(first);
        k.map_ring()?;
        k.threads
            .insert(MAIN_TID, Thread::new(MAIN_TID, UserRegs::default(), name));
        Ok(k)
    }

    /// The sites to patch into an executable mapping of the object at
    /// `path` (with contents `data`), if any: the sync sites of the
    /// program's own code and libraries outside the system's directories
    /// (and of the system's libraries and dynamic linker too when no
    /// pthread shim reports their locks), and, under step rules with
    /// ticks, the ticks of every object's loops.
    pub fn sites_for(&mut self, path: &str, data: &Arc<Vec<u8>>) -> Option<Arc<SiteTable>> {
        use crate::code::sites::{Plan, Scope};
        let level = self.config.sync_points;
        if level == SyncPoints::Calls || path == abi::SHIM_PATH {
            return None;
        }
        let system = [
            "/lib/",
            "/lib64/",
            "/lib32/",
            "/usr/lib/",
            "/usr/lib64/",
            "/usr/lib32/",
        ]
        .iter()
        .any(|d| path.starts_with(d));
        let ticks = self.config.step_rules.ticks();
        let scope =
            match path != self.process_entry().exe && system && !self.config.preload.is_empty() {
                true if !ticks => return None,
                true => Scope::Ticks,
                false => Scope::All,
            };
        let plan = Plan {
            scope,
            ticks,
            jumps: self.config.site_jumps,
        };
        let table = crate::code::sites::sites_of(data, level, plan);
        if table.reads_own_code && !table.is_empty() {
            let note = format!(
                "{path} takes the address of its own code as data (etext, a label): it may read its machine code, so its {} sync sites are left unpatched",
                table.len()
            );
            if !self.notes.contains(&note) {
                self.notes.push(note);
            }
            return None;
        }
        (!table.is_empty()).then_some(table)
    }

    // ----- what the engine and the front ends read

    /// Guest-physical memory.
    pub fn mem(&self) -> &Arc<PhysMemory> {
        &self.mem
    }

    /// The inputs the run was made with.
    pub fn config(&self) -> &KernelConfig {
        &self.config
    }

    /// The address space.
    pub fn mm(&self) -> &AddressSpace {
        &self.mm
    }

    /// Every thread, by id.
    pub fn threads(&self) -> &BTreeMap<Tid, Thread> {
        &self.threads
    }

    /// A thread, to park or load its extended state.
    pub fn thread_mut(&mut self, tid: Tid) -> Option<&mut Thread> {
        self.threads.get_mut(&tid)
    }

    /// The thread that runs (or ran last).
    pub fn current(&self) -> Tid {
        self.current
    }

    /// Virtual nanoseconds since boot.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// The file system view (and the recording of what the run read).
    pub fn vfs(&self) -> &Vfs {
        &self.vfs
    }

    /// Things the user should know about how the run was made.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// What the engine sees of the run so far.
    pub fn observer(&self) -> &Observer {
        &self.obs
    }

    pub fn observer_mut(&mut self) -> &mut Observer {
        &mut self.obs
    }

    /// How the run ended, once it has.
    pub fn outcome(&self) -> Option<&Outcome> {
        self.obs.outcome()
    }

    /// Steps taken so far (a plain count: the scheduler and the debugger
    /// do arithmetic on it).
    pub fn step(&self) -> u64 {
        self.obs.step().0
    }

    /// Whether the guest's cached translations must be dropped before it
    /// runs again (an entry it used was changed or removed).
    pub fn take_needs_invalidate(&mut self) -> bool {
        let needed = self.mm.take_needs_invalidate() | std::mem::take(&mut self.invalidate);
        if needed {
            self.mm.allocator_mut().after_invalidation();
        }
        needed
    }

    /// Sets the running thread's signal mask.
    pub(crate) fn set_mask(&mut self, mask: u64) {
        self.threads.set_sigmask(self.current, mask);
    }

    /// The running thread.
    pub fn cur(&mut self) -> &mut Thread {
        self.threads
            .get_mut(&self.current)
            .expect("current thread exists")
    }

    /// The offset of open file description `f`.
    pub(super) fn offset_of(&self, f: &files::OpenFile) -> u64 {
        f.shared
            .and_then(|id| self.shared_files.get(&id))
            .map_or(f.offset, |s| s.offset)
    }

    /// The status flags (`O_APPEND`, `O_NONBLOCK` ...) of description `f`.
    pub(super) fn flags_of(&self, f: &files::OpenFile) -> i32 {
        f.shared
            .and_then(|id| self.shared_files.get(&id))
            .map_or(f.flags, |s| s.flags)
    }

    /// Whether calls on description `f` must not wait.
    pub(super) fn nonblocking(&self, f: &files::OpenFile) -> bool {
        self.flags_of(f) & libc::O_NONBLOCK != 0
    }

    /// The current process's descriptor table, and the offsets and flags
    /// of descriptions shared between processes, to change together.
    fn files_and_shared(&mut self) -> (&mut FdTable, &mut BTreeMap<u64, SharedFile>) {
        let p = self.procs.get_mut(&self.pid).expect("current process");
        (&mut p.files, &mut self.shared_files)
    }

    /// Moves descriptor `fd`'s offset (its description's, shared or not).
    pub(super) fn set_offset(&mut self, fd: i32, to: u64) {
        let (files, shared_files) = self.files_and_shared();
        let Some(f) = files.position_mut(fd) else {
            return;
        };
        match f.shared.and_then(|id| shared_files.get_mut(&id)) {
            Some(s) => s.offset = to,
            None => f.offset = to,
        }
    }

    /// Sets descriptor `fd`'s status flags (its description's, so every
    /// process sharing it sees them, as `fcntl(F_SETFL)` does on Linux).
    pub(super) fn set_flags(&mut self, fd: i32, flags: i32) {
        let (files, shared_files) = self.files_and_shared();
        let Some(f) = files.position_mut(fd) else {
            return;
        };
        f.flags = flags;
        if let Some(s) = f.shared.and_then(|id| shared_files.get_mut(&id)) {
            s.flags = flags;
        }
    }

    /// Makes every description of the current process shareable by a
    /// process about to be made (fork): their offsets and status flags
    /// move to the shared table.
    pub(super) fn share_descriptions(&mut self) {
        let mut next = self.shared_files.keys().next_back().map_or(0, |k| k + 1);
        let (files, shared_files) = self.files_and_shared();
        for f in files.descriptions_mut() {
            if f.shared.is_none() {
                f.shared = Some(next);
                let state = SharedFile {
                    offset: f.offset,
                    flags: f.flags,
                };
                shared_files.insert(next, state);
                next += 1;
            }
        }
    }

    /// A fresh thread id.
    fn alloc_tid(&mut self) -> Tid {
        let t = Tid(self.next_tid);
        self.next_tid += 1;
        t
    }

    /// Virtual `CLOCK_REALTIME` in nanoseconds.
    pub fn realtime(&self) -> u64 {
        self.config.epoch * 1_000_000_000 + self.now
    }

    /// Random bytes from the run's seed.
    pub fn random_bytes(&mut self, buf: &mut [u8]) {
        self.rng.fill_bytes(buf);
    }

    // ----- guest memory helpers (the address space over this kernel's memory)

    pub fn read(&mut self, va: u64, buf: &mut [u8]) -> Result<(), MemError> {
        self.mm.read(&self.mem, va, buf)
    }
    pub fn write(&mut self, va: u64, buf: &[u8]) -> Result<(), MemError> {
        self.mm.write(&self.mem, va, buf)
    }
    pub fn read_u64(&mut self, va: u64) -> Result<u64, MemError> {
        self.mm.read_u64(&self.mem, va)
    }
    pub fn read_u32(&mut self, va: u64) -> Result<u32, MemError> {
        self.mm.read_u32(&self.mem, va)
    }
    pub fn write_u64(&mut self, va: u64, v: u64) -> Result<(), MemError> {
        self.mm.write_u64(&self.mem, va, v)
    }
    pub fn write_u32(&mut self, va: u64, v: u32) -> Result<(), MemError> {
        self.mm.write_u32(&self.mem, va, v)
    }
    pub fn read_cstr(&mut self, va: u64) -> Result<String, MemError> {
        let b = self.mm.read_cstr(&self.mem, va, 4096)?;
        Ok(String::from_utf8_lossy(&b).into_owned())
    }

    // ----- steps

    /// Handles the current thread's system call: one step.
    pub fn on_syscall(&mut self, regs: UserRegs, cpu: &mut dyn FpuAccess) {
        self.cur().regs = regs;
        let (nr, args) = regs.syscall_args();
        if nr == HINT_SYSCALL {
            self.hint_step(args[0], args[1], args[2], args[3]);
            return;
        }
        self.begin_step();
        let tid = self.current;
        self.obs.syscall_step(tid, nr == libc::SYS_futex as u64);
        if nr == libc::SYS_futex as u64 {
            self.obs.futex(tid, args[0], args[1]);
        }
        let result = match table::lookup(nr) {
            Some(def) => (def.handler)(self, cpu, args),
            None => SysResult::Unsupported(String::new()),
        };
        let recorded = match result {
            SysResult::Ret(v) => {
                self.cur().regs.rax = v as u64;
                v
            }
            SysResult::Yield(v) => {
                let t = self.cur();
                t.regs.rax = v as u64;
                t.yielded = true;
                v
            }
            SysResult::Block(wait) => {
                if let Wait::Futex { key, bitset, .. } = wait {
                    self.futex.enqueue(key, tid, bitset);
                }
                self.threads.set_state(tid, ThreadState::Blocked(wait));
                i64::MIN
            }
            SysResult::NoReturn => 0,
            SysResult::Unsupported(detail) => {
                self.end(Outcome::Unsupported {
                    syscall: crate::arch::syscalls::syscall_name(nr)
                        .unwrap_or("unknown")
                        .to_string(),
                    nr,
                    thread: tid.0,
                    rip: regs.rip.wrapping_sub(2),
                    detail,
                });
                0
            }
        };
        // Calls waiting on a pipe that can go on now are taken up again.
        file::settle(self);
        let event = Event {
            step: self.obs.step(),
            thread: tid,
            op: Operation::Syscall { nr },
            object: (nr == libc::SYS_futex as u64).then_some(args[0]),
            site: GuestAddr(regs.rip),
            result: (recorded != i64::MIN).then_some(recorded),
            value: 0,
        };
        self.finish_step(event);
    }

    /// One step of the shim's: a pthread operation the current thread is
    /// about to perform (from its system call, or from the hint ring).
    pub fn hint_step(&mut self, op: u64, object: u64, site: u64, value: u64) {
        self.begin_step();
        let tid = self.current;
        let Some(hint) = HintOp::from_u64(op) else {
            let rip = self.cur().regs.rip;
            self.end(Outcome::Unsupported {
                syscall: "rewind hint".into(),
                nr: HINT_SYSCALL,
                thread: tid.0,
                rip,
                detail: format!("unknown shim operation {op}"),
            });
            return;
        };
        self.obs.hint_step(tid, hint, object, site, value);
        let event = Event {
            step: self.obs.step(),
            thread: tid,
            op: Operation::Hint { op: hint },
            object: Some(object),
            site: GuestAddr(site),
            result: Some(0),
            value,
        };
        self.finish_step(event);
    }

    fn begin_step(&mut self) {
        self.obs.begin_step();
        self.now += STEP_QUANTUM_NS;
        let t = self.cur();
        t.yielded = false;
        t.ticked = false;
        t.last_site = None;
    }

    fn finish_step(&mut self, event: Event) {
        let tid = event.thread;
        // A call that reads the clock sees it move on.
        let clock = matches!(
            event.op,
            Operation::Syscall { nr } if [libc::SYS_clock_gettime, libc::SYS_gettimeofday, libc::SYS_time]
                .contains(&(nr as i64))
        )
        .then_some(self.now);
        let timer = self.next_timer_step().is_some();
        let yielded = self.threads.get(&tid).is_some_and(|t| t.yielded);
        let woken_waits = self.config.step_rules.woken_waits_are_work();
        let work = crate::observe::progress::work_of(&event, yielded, woken_waits);
        // A visitor's steps are no part of the run: they neither make it
        // progress nor count against its budget.
        let stuck = self.progress.stuck_after(&event, clock, timer, work) && !self.visiting();
        self.obs.record(event);
        self.expire_timers();
        if stuck && !self.obs.ended() {
            let rip = self.threads.get(&tid).map_or(0, |t| t.regs.rip);
            let spin_cycle = self.spin_cycle();
            match spin_cycle {
                Some((threads, cycle)) => self.end(Outcome::Deadlocked { threads, cycle }),
                None => self.end(Outcome::Hung {
                    reason: HungReason::NoProgress,
                    thread: tid.0,
                    rip,
                }),
            }
            return;
        }
        if !self.obs.ended() && !self.visiting() && self.step() >= self.config.max_steps {
            let spin_cycle = (!self.config.runtime_caller_sites)
                .then(|| self.spin_cycle())
                .flatten();
            if let Some((threads, cycle)) = spin_cycle {
                self.end(Outcome::Deadlocked { threads, cycle });
                return;
            }
            let rip = self.threads.get(&tid).map_or(0, |t| t.regs.rip);
            self.end(Outcome::Hung {
                reason: HungReason::MaxSteps,
                thread: tid.0,
                rip,
            });
        }
    }

    // ----- the hint ring (see `abi`)

    /// Maps the ring and fills in its header; nothing may be buffered until
    /// [`Kernel::publish_ring`] says so.
    fn map_ring(&mut self) -> Result<(), MemError> {
        use crate::memory::{Backing, Placement, Prot};
        self.mm.map(
            &self.mem,
            Placement::FixedNoReplace(abi::RING_VA),
            abi::RING_SIZE,
            Prot::RW,
            Backing::Anon,
            "[rewind]",
        )?;
        // Present from the start: the shim must never fault half-way
        // through an entry.
        self.mm
            .poke(&self.mem, abi::RING_VA, &vec![0u8; abi::RING_SIZE as usize])?;
        self.write_u64(abi::RING_VA, abi::RING_MAGIC)?;
        self.write_u64(abi::RING_VA + abi::RING_CAPACITY * 8, abi::RING_ENTRIES)?;
        self.map_site_path()
    }

    /// The first step at whose end a sleeping thread's timer fires, if any.
    pub fn next_timer_step(&self) -> Option<u64> {
        self.threads
            .next_deadline()
            .into_iter()
            .chain(self.timers.next_deadline())
            .min()
            .map(|d| self.step() + d.saturating_sub(self.now).div_ceil(STEP_QUANTUM_NS).max(1))
    }

    /// Ends the run (the first ending wins).
    pub fn end(&mut self, outcome: Outcome) {
        self.obs.end(outcome);
    }

    /// Handles a CPU exception in the current thread. A breakpoint at a
    /// sync site is a step (returns true: the engine schedules); anything
    /// else is not: nothing another thread could observe happens here,
    /// except through a signal.
    pub fn on_exception(
        &mut self,
        regs: UserRegs,
        vector: u8,
        error_code: u64,
        fault_addr: u64,
        cpu: &mut dyn FpuAccess,
    ) -> bool {
        // In the sites area (pages it touched first are filled before):
        // the breakpoint or instruction it stands for. A tick's trap, in its
        // trampoline, reaches the monitor directly or handed over by the
        // dispatcher.
        let tick = |k: &Kernel, regs: &UserRegs, vector: u8| {
            (vector == 3)
                .then(|| k.mm.tick_at(regs.rip.wrapping_sub(1)))
                .flatten()
        };
        if let Some(site) = tick(self, &regs, vector) {
            self.tick_step(regs, site);
            return true;
        }
        let (regs, vector) = self
            .site_path_origin(&regs, vector)
            .unwrap_or((regs, vector));
        if let Some(site) = tick(self, &regs, vector) {
            self.tick_step(regs, site);
            return true;
        }
        self.cur().regs = regs;
        let rip = regs.rip;
        if vector == 3 && self.sync_step(rip.wrapping_sub(1)) {
            return true;
        }
        // A site the dispatcher cannot take: its invalid opcode.
        if vector == 6 && self.sync_step(rip) {
            return true;
        }
        // A jump into an instruction a site's jump moved to its trampoline
        // (a `switch`'s table, a landing pad): its first byte traps; it runs
        // in its copy.
        let trapped = match vector {
            3 => Some(rip.wrapping_sub(1)),
            6 => Some(rip),
            _ => None,
        };
        if let Some(copy) = trapped.and_then(|a| self.mm.moved_copy(a)) {
            self.cur().regs.rip = copy;
            return false;
        }
        let sig = |signo: u32, code: i32, addr: u64| thread::PendingSignal {
            signo,
            code,
            addr,
            sender: 0,
            forced: true,
        };
        let signal = match vector {
            14 => {
                let access = Access::from_error_code(error_code);
                match self.mm.fault(&self.mem, fault_addr, access) {
                    Ok(()) => return false,
                    Err(MemError::Denied) => sig(libc::SIGSEGV as u32, 2, fault_addr), // SEGV_ACCERR
                    // The guest's memory, not the program, ran out: no bug
                    // of the program's to report (Linux would use swap).
                    Err(MemError::NoMemory) => {
                        let memory_mib = self.mem.size() >> 20;
                        let thread = self.current.0;
                        self.end(Outcome::OutOfMemory {
                            memory_mib,
                            thread,
                            rip,
                        });
                        return false;
                    }
                    Err(_) => sig(libc::SIGSEGV as u32, 1, fault_addr), // SEGV_MAPERR
                }
            }
            13 => {
                if self.emulate_privileged(rip) {
                    return false;
                }
                sig(libc::SIGSEGV as u32, 0x80, 0) // SI_KERNEL
            }
            0 => sig(libc::SIGFPE as u32, 1, rip), // FPE_INTDIV
            16 | 19 => sig(libc::SIGFPE as u32, 0, rip),
            1 | 3 => sig(libc::SIGTRAP as u32, 1, rip), // TRAP_BRKPT
            4 => sig(libc::SIGSEGV as u32, 0x80, 0),
            5 => sig(libc::SIGSEGV as u32, 0x80, 0),
            // `int $0x80`, a 32-bit system call: Linux without IA-32
            // emulation answers with SIGSEGV, and so does this kernel.
            6 if self.int80_at(rip) => sig(libc::SIGSEGV as u32, signal::SI_KERNEL, 0),
            6 => sig(libc::SIGILL as u32, 2, rip), // ILL_ILLOPN
            17 => sig(libc::SIGBUS as u32, 1, fault_addr), // BUS_ADRALN
            _ => sig(libc::SIGSEGV as u32, 0x80, 0),
        };
        self.threads.push_pending(self.current, signal);
        self.deliver_signals(cpu);
        false
    }

    /// Whether the instruction at `rip` is `int $0x80`.
    fn int80_at(&mut self, rip: u64) -> bool {
        let mut insn = [0u8; 2];
        self.read(rip, &mut insn).is_ok() && insn == [0xcd, 0x80]
    }

    /// Emulates the instructions user code may not run here (`rdtsc`, which
    /// CR4.TSD makes fault, so time stays virtual).
    fn emulate_privileged(&mut self, rip: u64) -> bool {
        let mut insn = [0u8; 3];
        if self.read(rip, &mut insn).is_err() {
            return false;
        }
        let tsc = self.now * TSC_PER_NS;
        let t = self.cur();
        match insn {
            [0x0f, 0x31, _] => {
                t.regs.rax = tsc & 0xffff_ffff;
                t.regs.rdx = tsc >> 32;
                t.regs.rip += 2;
                true
            }
            [0x0f, 0x01, 0xf9] => {
                t.regs.rax = tsc & 0xffff_ffff;
                t.regs.rdx = tsc >> 32;
                t.regs.rcx = 0; // IA32_TSC_AUX: CPU 0
                t.regs.rip += 3;
                true
            }
            _ => false,
        }
    }

    /// Delivers the current thread's deliverable signals: runs handlers the
    /// program installed, or ends the run for a fatal default action.
    pub fn deliver_signals(&mut self, cpu: &mut dyn FpuAccess) {
        while !self.obs.ended() {
            let Some(s) = self.take_deliverable() else {
                break;
            };
            signal::deliver(self, s, cpu);
        }
        // A call interrupted by a signal that no handler took (ignored by
        // now) still gives its old mask back as it returns.
        if self
            .threads
            .get(&self.current)
            .is_some_and(|t| t.is_runnable())
        {
            self.threads.restore_saved_mask(self.current);
        }
    }

    fn take_deliverable(&mut self) -> Option<thread::PendingSignal> {
        let t = self.threads.get(&self.current)?;
        let mask = t.sigmask();
        let i = t
            .pending()
            .iter()
            .position(|s| s.forced || mask & signal::bit(s.signo) == 0)?;
        self.threads.take_pending(self.current, i)
    }

    /// Threads that can run now, in thread-id order.
    pub fn runnable(&self) -> Vec<Tid> {
        let all = self.threads.runnable().iter().copied();
        all.filter(|t| self.may_run(*t)).collect()
    }

    /// Makes `tid` the running thread.
    pub fn switch_to(&mut self, tid: Tid) {
        debug_assert!(self.threads[&tid].is_runnable());
        if tid != self.current {
            if let Some(t) = self.threads.get_mut(&tid) {
                t.ticks_in_a_row = 0;
            }
        }
        self.current = tid;
        self.enter(self.threads[&tid].pid);
    }

    /// Wakes a blocked thread with `result` as its call's return value.
    /// Takes up a blocked system call again from its start: the thread
    /// re-executes its `syscall` instruction (two bytes) with `nr` in rax,
    /// as Linux restarts a call.
    pub fn restart(&mut self, tid: Tid, nr: u64) {
        if let Some(t) = self.threads.get(&tid) {
            if matches!(t.state(), ThreadState::Blocked(_)) {
                self.threads.set_state(tid, ThreadState::Runnable);
                // The call sets its own mask again when it runs again.
                self.threads.restore_saved_mask(tid);
                let t = self.threads.get_mut(&tid).expect("looked up");
                t.regs.rax = nr;
                t.regs.rip = t.regs.rip.wrapping_sub(2);
                self.obs.woke(tid, 0);
            }
        }
    }

    pub fn wake(&mut self, tid: Tid, result: i64) {
        let Some(t) = self.threads.get(&tid) else {
            return;
        };
        let ThreadState::Blocked(w) = t.state() else {
            return;
        };
        if let Wait::Futex { key, .. } = w {
            self.futex.remove(*key, tid);
        }
        self.threads.set_state(tid, ThreadState::Runnable);
        let t = self.threads.get_mut(&tid).expect("looked up");
        t.regs.rax = result as u64;
        // A call with its own mask gets the old one back as it returns,
        // unless a signal interrupted it: that signal's frame takes it.
        if result != -(libc::EINTR as i64) {
            self.threads.restore_saved_mask(tid);
        }
        self.obs.woke(tid, result);
    }

    /// Ends the waits whose deadlines have passed and fires the timers
    /// whose time has come.
    fn expire_timers(&mut self) {
        if self.fire_timers() {
            file::settle(self);
        }
        let due: Vec<(Tid, i64)> = self
            .threads
            .due(self.now)
            .into_iter()
            .filter(|t| self.may_run(*t))
            .filter_map(|tid| match self.threads[&tid].state() {
                ThreadState::Blocked(w) => Some((tid, w.timeout_result())),
                _ => None,
            })
            .collect();
        for (tid, r) in due {
            self.wake(tid, r);
        }
    }

    /// Called when no thread can run: jumps virtual time to the next timer
    /// and fires it. Returns false (and ends the run as deadlocked) when no
    /// timer is pending.
    pub fn idle(&mut self) -> bool {
        if self.visiting() {
            return self.idle_in_visit();
        }
        let next = self
            .threads
            .next_deadline()
            .into_iter()
            .chain(self.timers.next_deadline())
            .min();
        match next {
            Some(d) => {
                self.now = self.now.max(d);
                self.expire_timers();
                true
            }
            None => {
                if self.threads.alive() > 0 {
                    let threads = self.blocked_threads();
                    let cycle = crate::observe::outcome::wait_cycle(&threads);
                    self.end(Outcome::Deadlocked { threads, cycle });
                } else {
                    self.end(Outcome::Exited { code: 0 });
                }
                false
            }
        }
    }

    /// Threads that spin for each other's locks when the step budget runs
    /// out: each failed to take a lock (a word its code retries or waits
    /// for) that the next holds. Such threads never block, yet none of them
    /// can go on: a deadlock, named as one, not a hang. Runnable threads
    /// outside the cycle do not matter; a thread spinning on a lock whose
    /// holder could still run (a scheduler that starves it) is no cycle.
    fn spin_cycle(&self) -> Option<(Vec<BlockedThread>, Vec<Tid>)> {
        let locks = self.obs.locks();
        let spinning: Vec<BlockedThread> = self
            .threads
            .values()
            .filter(|t| t.is_runnable())
            .filter_map(|t| {
                let (lock, site) = locks.acquiring(t.tid)?;
                let (holder, holder_site) =
                    locks.holders(lock).into_iter().find(|(h, _)| *h != t.tid)?;
                Some(BlockedThread {
                    thread: t.tid,
                    name: t.name.clone(),
                    waits_on: format!("lock {lock:#x} held by thread {holder}, spinning"),
                    object: Some(lock),
                    rip: GuestAddr(t.regs.rip),
                    lock: Some(GuestAddr(lock)),
                    site: Some(GuestAddr(site)),
                    holder: Some(holder),
                    holder_site: Some(GuestAddr(holder_site)),
                })
            })
            .collect();
        if spinning.is_empty() {
            return None;
        }
        let mut threads = self.blocked_threads();
        threads.extend(spinning);
        threads.sort_by_key(|b| b.thread);
        let cycle = crate::observe::outcome::wait_cycle(&threads);
        let spins = |t: &Tid| self.threads.get(t).is_some_and(|th| th.is_runnable());
        (!cycle.is_empty() && cycle.iter().any(spins)).then_some((threads, cycle))
    }

    /// Every blocked thread and what it waits on: for a thread blocked in a
    /// lock the shim reported, the lock, where it asked for it, and which
    /// thread holds it.
    pub fn blocked_threads(&self) -> Vec<BlockedThread> {
        self.threads
            .values()
            .filter_map(|t| {
                let ThreadState::Blocked(w) = t.state() else {
                    return None;
                };
                let futex = match w {
                    Wait::Futex { addr, .. } => Some(*addr),
                    _ => None,
                };
                // A lock's futex word lies inside the lock object, or the
                // thread failed to take a word its code takes as a lock and
                // sleeps where its lock implementation parks it
                // (parking_lot's threads wait on their own futex words).
                let lock = self.obs.locks().acquiring(t.tid).filter(|(l, _)| {
                    futex.is_some_and(|a| (a >= *l && a < l + 64) || self.obs.locks().parks_for(*l))
                });
                let holder = lock.and_then(|(l, _)| {
                    self.obs
                        .locks()
                        .holders(l)
                        .into_iter()
                        .find(|(h, _)| *h != t.tid)
                });
                // A pipe waits for whoever holds its other end: another
                // process's thread when one does, else its own process's.
                let pipe_holder = match w {
                    Wait::Pipe { id, write, .. } if id & thread::COUNTER == 0 => {
                        let holders = self.pipe_end_holders(*id, !*write);
                        let pid = holders
                            .iter()
                            .copied()
                            .find(|p| *p != t.pid)
                            .or_else(|| holders.first().copied());
                        pid.and_then(|pid| self.threads.members(pid).next().map(|o| (pid, o)))
                    }
                    _ => None,
                };
                let waits_on = match (w, lock, holder) {
                    (_, Some((l, _)), Some((h, _))) => format!("lock {l:#x} held by thread {h}"),
                    (_, Some((l, _)), None) => format!("lock {l:#x}"),
                    (Wait::Futex { addr, .. }, ..) => format!("futex {addr:#x}"),
                    (Wait::Sleep { .. }, ..) => "sleep".into(),
                    (Wait::Poll { .. }, ..) => "poll".into(),
                    (Wait::Pipe { id, .. }, ..) if id & thread::COUNTER != 0 => {
                        "an event counter".into()
                    }
                    (Wait::Pipe { write, .. }, ..) => {
                        let what = if *write {
                            "a write to a full pipe"
                        } else {
                            "a read of an empty pipe"
                        };
                        match pipe_holder {
                            Some((pid, _)) if pid == t.pid => format!(
                                "{what} whose other end only its own process {pid} holds open"
                            ),
                            Some((pid, h)) => format!(
                                "{what} whose other end process {pid} (thread {}) holds open",
                                h.0
                            ),
                            None => what.into(),
                        }
                    }
                    (Wait::Signal, ..) => "a signal".into(),
                    (Wait::SigWait { .. }, ..) => "a signal (sigtimedwait)".into(),
                    (Wait::Child { .. }, ..) => "a child process to end".into(),
                    (Wait::Readable { fd, .. }, ..) => {
                        format!(
                            "descriptor {fd} to be ready (a timer, signal descriptor, socket or terminal)"
                        )
                    }
                    (Wait::Vfork { child }, ..) => {
                        format!("its vfork child {child} to exec or exit")
                    }
                };
                Some(BlockedThread {
                    thread: t.tid,
                    name: t.name.clone(),
                    waits_on,
                    object: futex,
                    rip: GuestAddr(t.regs.rip),
                    lock: lock.map(|(l, _)| GuestAddr(l)),
                    site: lock.map(|(_, s)| GuestAddr(s)),
                    holder: holder.map(|(h, _)| h).or(pipe_holder.map(|(_, h)| h)),
                    holder_site: holder.map(|(_, s)| GuestAddr(s)),
                })
            })
            .collect()
    }

    /// A signal's default action kills the current process. In the first
    /// process that ends the run as a crash. A child process ends, and its
    /// parent learns of it by `wait`, as on Linux: `yes | head` ends `yes`
    /// with SIGPIPE, and a death test (a child that aborts on purpose, its
    /// parent checking how it died) is no failure. A fault in a child gets
    /// a note, since a parent that ignores it hides a bug.
    pub fn crash(&mut self, signo: u32, addr: Option<u64>) {
        let tid = self.current;
        let rip = self.threads.get(&tid).map_or(0, |t| t.regs.rip);
        if self.pid != self.first_pid {
            let fault = matches!(signo, 4..=8 | 11 | 31);
            if fault {
                let note = format!(
                    "process {} was killed by {} in thread {} at {rip:#x}; its parent was told, as on Linux",
                    self.pid,
                    signal_name(signo),
                    tid.0
                );
                self.notes.push(note);
            }
            self.end_process(process::Ended::Killed(signo));
            return;
        }
        self.end(Outcome::Crashed {
            signal: signal_name(signo),
            signo,
            fault_addr: addr,
            thread: tid.0,
            rip,
        });
    }

    /// Live threads.
    pub fn live_threads(&self) -> usize {
        self.threads.alive()
    }
}

#[cfg(test)]
mod tests;
