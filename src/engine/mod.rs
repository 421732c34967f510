//! The engine: a machine, a kernel and a strategy, run together.
//!
//! The loop is one `match` over the machine's exits that hands each to the
//! kernel, asks the strategy who runs next, and loads that thread into the
//! vCPU. Everything a run depends on is an input (program, arguments, files,
//! seed, schedule), so the same inputs give the same run.
//!
//! A `Vm` takes a snapshot where concurrency begins (by default just before
//! the first thread is created) and every later run restores it instead of
//! starting the program again: the pages written since are copied back,
//! the kernel state is cloned, translations are invalidated. Until that
//! point only one thread exists, so every strategy runs the same prefix.

pub mod debug;
pub mod exits;
mod ring;
mod visit;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::arch::abi::{HintOp, SHIM_PATH};
use crate::arch::cpu::{ExtendedState, UserRegs};
use crate::arch::layout::PAGE_SIZE;
use crate::ids::{Step, Tid};
use crate::kernel::loader::LoadError;
use crate::kernel::vfs::SharedSource;
use crate::kernel::{FpuAccess, Kernel, KernelConfig};
use crate::machine::{Exit, Machine, MachineError, TscTrap};
use crate::memory::{PhysError, PhysMemory};
use crate::observe::failure::FailureKind;
use crate::observe::locks::Inversion;
use crate::observe::oracle::Oracle;
use crate::observe::outcome::Outcome;
use crate::observe::trace::Event;
use crate::sched::{Decision, SchedView, Schedule, Strategy};
use exits::{Choices, Handled, Scheduler};

/// How to run a program.
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub kernel: KernelConfig,
    /// Guest memory in MiB.
    pub memory_mib: u64,
    /// How long the guest may compute without a system call.
    pub timeout: Duration,
    /// Copy guest output to the terminal as it is written.
    pub stream_output: bool,
    /// Preload the pthread shim into dynamically linked programs, so pthread
    /// operations are scheduling points.
    pub shim: bool,
    /// Where to take the snapshot later runs start from.
    pub snapshot_at: SnapshotAt,
    /// A fork's step: take the snapshot again, as late as a system call
    /// exit at or before it, when that is later than the usual point. A
    /// fork's continuations all run the same prefix to this step, so each
    /// restores it and runs only what comes after (see [`Vm`]).
    pub fork_snapshot: Option<u64>,
    /// Let the shim buffer hints that cannot change who runs next in the
    /// hint ring instead of leaving the guest for each (the run is the same
    /// either way; this only changes how many exits it takes).
    pub hint_ring: bool,
    /// Let the guest take a sync site's breakpoint itself when the step
    /// cannot change who runs next (its site dispatcher buffers the step in
    /// the hint ring; see `arch::abi`). Needs `hint_ring`; the run is the
    /// same either way.
    pub site_path: bool,
    /// Let sync sites reach the site dispatcher by a jump to a trampoline
    /// instead of a breakpoint (see `code::sites::trampoline`). Needs `site_path`;
    /// the run is the same either way.
    pub site_jumps: bool,
    /// Ends runs from outside: a session's deadline, Ctrl-C.
    pub cancel: crate::machine::Cancel,
    /// Files kept out of reproducers (`--exclude-files`): their replays
    /// read them from the host.
    pub exclude_files: globset::GlobSet,
    /// Judges what a run that exits printed (`--expect-stdout`,
    /// `--oracle`): a wrong result ends it as `wrong-output`.
    pub oracle: Option<Oracle>,
    /// The exit codes that are success (`--ok-exit-codes`): a run is
    /// judged against them once, by the engine ([`RunReport::failure`]).
    pub ok_codes: Vec<i32>,
}

/// Where a `Vm` takes its snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SnapshotAt {
    /// Just before the first thread is created.
    FirstThread,
    /// At the program's first instruction.
    Start,
    /// At the first marker the program sends through the shim.
    Marker,
    /// Never: every run starts the program from scratch.
    Never,
}

impl RunConfig {
    pub fn new(kernel: KernelConfig) -> Self {
        RunConfig {
            kernel,
            memory_mib: 1024,
            timeout: Duration::from_secs(60),
            stream_output: false,
            shim: true,
            snapshot_at: SnapshotAt::FirstThread,
            fork_snapshot: None,
            hint_ring: true,
            site_path: true,
            site_jumps: true,
            cancel: crate::machine::Cancel::new(),
            exclude_files: globset::GlobSet::empty(),
            oracle: None,
            ok_codes: vec![0],
        }
    }
}

/// Why a run could not be carried out (as opposed to how the program ended).
#[derive(Debug, thiserror::Error)]
pub enum VmError {
    #[error(transparent)]
    Machine(#[from] MachineError),
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(transparent)]
    Memory(#[from] PhysError),
    /// The run was ended from outside (a deadline, Ctrl-C) before its end.
    #[error("the run was cancelled before it ended")]
    Cancelled,
}

/// What a run did.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RunReport {
    pub outcome: Outcome,
    /// How the run failed, judged once against the exit codes that are
    /// success and the lock-order cycles: `None` for a run that did not.
    #[serde(skip)]
    pub failure: Option<FailureKind>,
    /// Steps taken: the number of the last step (system calls, pthread
    /// calls and sync sites).
    pub steps: Step,
    /// Hash over every step's thread, call, arguments and result.
    pub trace_hash: String,
    /// Threads the program had, the main one included.
    pub threads: usize,
    /// Threads still alive when the run ended (1 when every thread but the
    /// last finished).
    pub live_at_end: usize,
    #[serde(serialize_with = "lossy")]
    pub stdout: Vec<u8>,
    #[serde(serialize_with = "lossy")]
    pub stderr: Vec<u8>,
    /// Bytes the program wrote to stdout and stderr: more than `stdout` and
    /// `stderr` hold when it wrote past the capture's cap (16 MiB each).
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    /// Exits from the guest to the monitor.
    pub exits: u64,
    /// Sync sites' steps taken without an exit (by the site dispatcher).
    pub buffered_sites: u64,
    /// Page faults served by filling memory on demand.
    pub demand_faults: u64,
    /// Times the guest's translations were invalidated.
    pub invalidations: u64,
    /// Times the vCPU switched to another process's page tables.
    pub address_space_switches: u64,
    /// What the kernel looked at to take the run's steps (waiters, epoll
    /// interests, threads, free descriptor ranges, timers, futex waiters),
    /// from the program's start: its work, the same on every host.
    pub looked_at: u64,
    /// Wall-clock time of the run.
    pub wall_us: u64,
    /// The decisions the strategy took: replaying them gives this run.
    pub schedule: Schedule,
    /// Lock-order cycles seen in the run (lockdep's potential deadlocks).
    pub potential_deadlocks: Vec<Inversion>,
    /// Every event, when recording was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<Event>>,
    /// The last events before the end.
    pub recent_events: Vec<Event>,
    /// Steps at which the strategy had a choice (two or more runnable threads).
    pub decision_points: u64,
    /// Whether this run started from the snapshot.
    pub from_snapshot: bool,
    /// Pages copied back to restore the snapshot (0 when it started fresh).
    pub restored_pages: u64,
    /// Time the restore took, in microseconds (0 when it started fresh).
    pub restore_us: u64,
    /// The step the restored snapshot was taken after (`None` when the
    /// run started fresh): what the run did not take again.
    pub restored_at: Option<u64>,
    /// The run's coverage features.
    #[serde(skip)]
    pub coverage: Coverage,
    /// The run's lock-order edges (for potential deadlocks across runs).
    #[serde(skip)]
    pub lock_edges: Vec<crate::observe::locks::OrderEdge>,
    /// Things the user should know about how the run was made.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

fn lossy<S: serde::Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&String::from_utf8_lossy(v))
}

/// The vCPU as exit handling sees it: the extended state of the thread on
/// it, the watchdog, where it stands.
struct MachineCpu<'a>(&'a mut Machine);

impl exits::Cpu for MachineCpu<'_> {
    fn progress(&mut self) {
        self.0.progress();
    }
    fn cancelled(&self) -> bool {
        self.0.cancelled()
    }
    fn rip(&self) -> u64 {
        self.0.guest_rip()
    }
}

impl FpuAccess for MachineCpu<'_> {
    fn save(&mut self) -> ExtendedState {
        self.0
            .extended_state()
            .expect("KVM_GET_XSAVE on a live vCPU")
    }
    fn load(&mut self, s: &ExtendedState) {
        self.0
            .set_extended_state(s)
            .expect("KVM_SET_XSAVE on a live vCPU")
    }
}

/// What a run covered, as the fuzzer's features: pairs of code sites.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Lock-order edges: (site holding lock A, site acquiring lock B).
    pub lock_order: BTreeSet<(u64, u64)>,
    /// Interleavings: (site switched away from, site resumed), each with
    /// the switch that first made it (where a search can branch off to
    /// explore what follows it).
    pub interleavings: BTreeMap<(u64, u64), Decision>,
    /// Handoffs: (release site in one thread, acquire site of the same
    /// lock in another).
    pub handoffs: BTreeSet<(u64, u64)>,
    /// Reads-from pairs: (site of the write a sync site's read observed,
    /// site of the read).
    pub reads_from: BTreeSet<(u64, u64)>,
}

/// Everything that decides what happens next, at one point of a run.
struct Snapshot {
    /// The kernel, with every thread's extended state saved in it.
    kernel: Kernel,
    choices: Choices,
    /// The system call exit the snapshot was taken at, handled first on
    /// restore.
    pending: Option<UserRegs>,
    /// Guest-physical memory below `high_water`; above it, every page was
    /// zero at the snapshot.
    memory: Vec<u8>,
    high_water: u64,
    /// The steps taken before it.
    step: u64,
    /// Whether it is a fork's (taken at [`RunConfig::fork_snapshot`]).
    fork: bool,
}

/// A program loaded into a machine: runs once from scratch, then again and
/// again from its snapshot.
pub struct Vm {
    machine: Machine,
    kernel: Kernel,
    mem: Arc<PhysMemory>,
    sched: Scheduler,
    timeout: Duration,
    cancel: crate::machine::Cancel,
    oracle: Option<Oracle>,
    ok_codes: Vec<i32>,
    /// The thread whose extended state is in the CPU.
    fpu_owner: Option<Tid>,
    snapshot_at: SnapshotAt,
    hint_ring: bool,
    site_path: bool,
    snapshot: Option<Snapshot>,
    /// [`RunConfig::fork_snapshot`].
    fork_at: Option<u64>,
    /// The last step at or before `fork_at` that a system call exit
    /// followed in this run, and in the runs before: where the fork's
    /// snapshot goes when no exit follows `fork_at` itself.
    fork_exit: Option<u64>,
    fork_exit_before: Option<u64>,
    /// Whether the kernel is as loaded, not yet run.
    fresh: bool,
    restored_pages: u64,
    restore_us: u64,
    restored_at: u64,
}

impl Vm {
    /// Creates the machine and loads the program.
    pub fn new(cfg: &RunConfig, source: SharedSource) -> Result<Vm, VmError> {
        let mem = Arc::new(PhysMemory::new(cfg.memory_mib << 20)?);
        let machine = Machine::new(&mem)?;
        let mut kcfg = cfg.kernel.clone();
        kcfg.site_jumps = cfg.hint_ring && cfg.site_path && cfg.site_jumps;
        if cfg.shim {
            let shim = Arc::new(crate::arch::shim::SHIM_SO.to_vec());
            source.lock().unwrap().provide(SHIM_PATH, shim, 0o755);
            kcfg.preload = vec![SHIM_PATH.to_string()];
        }
        let mut kernel = Kernel::new(mem.clone(), kcfg, source)?;
        kernel.observer_mut().stream_output(cfg.stream_output);
        Ok(Vm {
            machine,
            kernel,
            mem,
            sched: Scheduler {
                strategy: crate::sched::default_tail(),
                choices: Choices::default(),
            },
            timeout: cfg.timeout,
            cancel: cfg.cancel.clone(),
            oracle: cfg.oracle.clone(),
            ok_codes: cfg.ok_codes.clone(),
            fpu_owner: None,
            snapshot_at: cfg.snapshot_at,
            hint_ring: cfg.hint_ring,
            site_path: cfg.site_path,
            snapshot: None,
            fork_at: cfg.fork_snapshot,
            fork_exit: None,
            fork_exit_before: None,
            fresh: true,
            restored_pages: 0,
            restore_us: 0,
            restored_at: 0,
        })
    }

    /// Replaces the scheduling strategy (for the next run).
    pub fn set_strategy(&mut self, s: Box<dyn Strategy>) {
        self.sched.strategy = s;
    }

    /// The kernel (for inspection).
    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    /// Keeps every event of the next run (for traces), not only the last
    /// ones. A run from the snapshot records from the snapshot on.
    pub fn record_events(&mut self) {
        self.kernel.observer_mut().record_all();
    }

    /// Whether another run is possible: the first one always is; later ones
    /// need the snapshot (a program that never reached its snapshot point
    /// must be loaded again, in a new `Vm`).
    pub fn can_run(&self) -> bool {
        self.fresh || self.snapshot.is_some()
    }

    /// Runs the program to its end: from scratch the first time, from the
    /// snapshot after that.
    pub fn run(&mut self) -> Result<RunReport, VmError> {
        assert!(self.can_run(), "a Vm without a snapshot runs once");
        if self.cancel.is_cancelled() {
            return Err(VmError::Cancelled);
        }
        // One TSC request for the whole run instead of one per exit.
        let _tsc = TscTrap::hold();
        let start = Instant::now();
        let exits0 = self.machine.exits;
        let inval0 = (self.machine.invalidations, self.machine.root_switches);
        let from_snapshot = !self.fresh;
        let pending = self.start()?;
        self.machine.arm_watchdog(self.timeout, &self.cancel);
        let r = self.run_loop(pending);
        self.machine.disarm_watchdog();
        r?;
        Ok(self.report(start, exits0, inval0, from_snapshot))
    }

    /// Starts a run: the program as loaded the first time (with the
    /// snapshot when it belongs at the start), the snapshot restored after
    /// that; the system call exit to handle first, if any.
    fn start(&mut self) -> Result<Option<UserRegs>, VmError> {
        if let Some(s) = self.fork_exit.take() {
            self.fork_exit_before = Some(s);
        }
        if !self.fresh {
            return self.restore();
        }
        self.fresh = false;
        if self.snapshot_at == SnapshotAt::Start {
            self.take_snapshot(None, false)?;
        }
        Ok(None)
    }

    /// `outcome`, or `wrong-output` when the run exited and the oracle
    /// rejects what it printed.
    fn judge(&self, outcome: Outcome, stdout: &[u8]) -> Outcome {
        let (Some(oracle), Outcome::Exited { code }) = (&self.oracle, &outcome) else {
            return outcome;
        };
        match oracle.judge(stdout) {
            None => outcome,
            Some(difference) => Outcome::WrongOutput {
                code: *code,
                oracle: oracle.describe(),
                difference,
            },
        }
    }

    /// The report of the run that just ended.
    fn report(
        &self,
        start: Instant,
        exits0: u64,
        (inval0, switches0): (u64, u64),
        from_snapshot: bool,
    ) -> RunReport {
        let k = &self.kernel;
        let obs = k.observer();
        let outcome = obs
            .outcome()
            .cloned()
            .expect("the loop ends with an outcome");
        let outcome = self.judge(outcome, obs.stdout());
        let potential_deadlocks = obs.locks().inversions();
        RunReport {
            failure: FailureKind::of(&outcome, !potential_deadlocks.is_empty(), &self.ok_codes),
            outcome,
            steps: obs.step(),
            trace_hash: obs.trace().hash_hex(),
            threads: k.threads().len(),
            live_at_end: k.live_threads(),
            stdout: obs.stdout().to_vec(),
            stderr: obs.stderr().to_vec(),
            stdout_bytes: obs.output_written().0,
            stderr_bytes: obs.output_written().1,
            exits: self.machine.exits - exits0,
            buffered_sites: self.sched.choices.buffered_sites,
            demand_faults: k.mm().demand_faults,
            invalidations: self.machine.invalidations - inval0,
            address_space_switches: self.machine.root_switches - switches0,
            looked_at: k.looked_at(),
            wall_us: start.elapsed().as_micros() as u64,
            schedule: Schedule {
                sync_points: k.config().sync_points,
                version: crate::sched::schedule_version_for(
                    k.config().step_rules,
                    k.config().polls_retry_on_any_activity,
                ),
                ..Schedule::new(
                    self.sched.strategy.name(),
                    self.sched.choices.decisions.clone(),
                )
            },
            potential_deadlocks,
            events: obs.trace().events().map(|e| e.to_vec()),
            recent_events: obs.trace().recent().copied().collect(),
            decision_points: self.sched.choices.decision_points,
            from_snapshot,
            restored_pages: if from_snapshot {
                self.restored_pages
            } else {
                0
            },
            restore_us: if from_snapshot { self.restore_us } else { 0 },
            restored_at: from_snapshot.then_some(self.restored_at),
            coverage: Coverage {
                lock_order: obs.locks().order_site_pairs(),
                interleavings: self.sched.choices.interleavings.clone(),
                handoffs: obs.locks().handoffs().clone(),
                reads_from: obs.reads_from().clone(),
            },
            lock_edges: obs.locks().order().edges().cloned().collect(),
            notes: k.notes().to_vec(),
        }
    }

    fn run_loop(&mut self, pending: Option<UserRegs>) -> Result<(), VmError> {
        if let Some(regs) = pending {
            self.syscall(regs);
        }
        while !self.ended() {
            self.enter()?;
            if self.ended() {
                break;
            }
            let exit = self.machine.run()?;
            self.handle_exit(exit)?;
        }
        Ok(())
    }

    /// Whether the run has ended.
    fn ended(&self) -> bool {
        self.kernel.observer().ended() || self.kernel.visitor_ended()
    }

    /// Hands one exit to the kernel (after the steps buffered before it).
    fn handle_exit(&mut self, exit: Exit) -> Result<(), VmError> {
        let regs = match exit {
            Exit::TimedOut => UserRegs::default(),
            _ => self.machine.user_regs()?,
        };
        let cpu = &mut MachineCpu(&mut self.machine);
        match exits::handle(exit, regs, cpu, &mut self.kernel, &mut self.sched) {
            Handled::Done => Ok(()),
            Handled::Syscall(regs) => self.on_syscall_exit(regs),
            Handled::Cancelled => Err(VmError::Cancelled),
        }
    }

    /// A system call exit: the snapshot when this is its point, then the step.
    fn on_syscall_exit(&mut self, regs: UserRegs) -> Result<(), VmError> {
        if self.is_snapshot_point(&regs) {
            self.take_snapshot(Some(regs), false)?;
        } else if self.is_fork_point() {
            self.take_snapshot(Some(regs), true)?;
        }
        self.syscall(regs);
        Ok(())
    }

    /// Whether the fork's snapshot belongs at this system call exit, the
    /// steps taken so far being all the fork's prefix. Only a system call
    /// exit can hold a snapshot, and steps buffered in the guest have none,
    /// so the first run looks for an exit right after the fork's step and
    /// notes the last one before it; a later run takes that one. A fork
    /// before the usual snapshot (or in a program that never reaches it)
    /// keeps the usual one: the runs share the same prefix up to it anyway.
    fn is_fork_point(&mut self) -> bool {
        let (Some(at), Some(snap)) = (self.fork_at, &self.snapshot) else {
            return false;
        };
        let step = self.kernel.step();
        if snap.fork || step <= snap.step || step > at {
            return false;
        }
        // Steps only go up in a run: the latest exit is the last so far.
        self.fork_exit = Some(step);
        // Until a run has ended, only the exit right after the fork's step
        // is known to be the last.
        step >= self.fork_exit_before.unwrap_or(at)
    }

    /// Publishes how far the shim may buffer hints for the thread about to
    /// run: to the strategy's horizon, the next timer and the step limit.
    fn publish_horizon(&mut self) {
        if !self.hint_ring {
            self.set_sites_switch(false);
            return;
        }
        let k = &self.kernel;
        let runnable = k.runnable();
        let cur = k.current();
        let mut limit = if runnable.len() < 2 {
            u64::MAX
        } else {
            let view = SchedView {
                step: k.step(),
                current: cur,
                current_runnable: true,
                yielded: false,
                slice_computed: false,
                runnable: &runnable,
                objects: k.observer().objects(),
            };
            self.sched.strategy.horizon(&view)
        };
        if let Some(t) = k.next_timer_step() {
            limit = limit.min(t);
        }
        // The step that reaches the limit leaves the guest, so its report
        // names where the thread stands.
        limit = limit.min(k.config().max_steps);
        let sites = self.site_path && k.site_path_ready();
        // A step that gives way changes nothing while no other thread can
        // run (the strategy sees it as it is drained all the same).
        let yield_limit = if runnable.len() < 2 { limit } else { 0 };
        ring::publish(&mut self.kernel, limit);
        if sites {
            self.kernel.publish_stack_bounds();
            self.kernel.publish_yield_limit(yield_limit);
        }
        self.set_sites_switch(sites);
    }

    /// Lets the guest's breakpoint handler send sync sites to the site
    /// dispatcher, or not.
    fn set_sites_switch(&mut self, on: bool) {
        let at = crate::machine::SITES_SWITCH_PHYS;
        let mut now = [0u8];
        self.mem.read(at, &mut now);
        if now[0] != on as u8 {
            self.mem.write(at, &[on as u8]);
        }
    }

    /// One step: the kernel handles the call, the strategy picks who runs.
    fn syscall(&mut self, regs: UserRegs) {
        let cpu = &mut MachineCpu(&mut self.machine);
        exits::syscall(regs, cpu, &mut self.kernel, &mut self.sched);
    }

    /// Whether the system call about to be handled is where the snapshot
    /// belongs.
    fn is_snapshot_point(&self, regs: &UserRegs) -> bool {
        if self.snapshot.is_some() {
            return false;
        }
        let (nr, args) = regs.syscall_args();
        let hint = |op: HintOp| nr == crate::arch::abi::HINT_SYSCALL && args[0] == op as u64;
        match self.snapshot_at {
            SnapshotAt::FirstThread => {
                self.kernel.threads().len() == 1
                    && (nr == libc::SYS_clone as u64
                        || nr == libc::SYS_clone3 as u64
                        || hint(HintOp::ThreadCreate))
            }
            SnapshotAt::Marker => hint(HintOp::Marker),
            SnapshotAt::Start | SnapshotAt::Never => false,
        }
    }

    /// Takes the snapshot (the fork's, replacing the usual one, when
    /// `fork`); `pending` is the system call exit being handled.
    fn take_snapshot(&mut self, pending: Option<UserRegs>, fork: bool) -> Result<(), VmError> {
        // Park the live extended state in its thread so the kernel holds all.
        if let Some(owner) = self.fpu_owner.take() {
            let s = self.machine.extended_state()?;
            if let Some(t) = self.kernel.thread_mut(owner) {
                t.fpu = Some(s);
            }
        }
        let high_water = self.kernel.mm().allocator().high_water();
        let mut memory = vec![0u8; high_water as usize];
        for (i, chunk) in memory.chunks_mut(PAGE_SIZE as usize).enumerate() {
            chunk.copy_from_slice(self.mem.page(i as u64 * PAGE_SIZE));
        }
        // From here on the dirty records say what to copy back.
        self.machine.take_dirty_log()?;
        self.mem.take_host_dirty();
        self.snapshot = Some(Snapshot {
            kernel: self.kernel.clone(),
            choices: self.sched.choices.clone(),
            pending,
            memory,
            high_water,
            step: self.kernel.step(),
            fork,
        });
        Ok(())
    }

    /// Puts memory, kernel and engine back as they were at the snapshot;
    /// returns the system call exit to handle first.
    fn restore(&mut self) -> Result<Option<UserRegs>, VmError> {
        let start = Instant::now();
        let snap = self.snapshot.as_ref().expect("restore needs a snapshot");
        let mut dirty = self.machine.take_dirty_log()?;
        for (a, b) in dirty.iter_mut().zip(self.mem.take_host_dirty()) {
            *a |= b;
        }
        let zero = [0u8; PAGE_SIZE as usize];
        let mut pages = 0;
        for (w, bits) in dirty.iter().enumerate() {
            let mut bits = *bits;
            while bits != 0 {
                let pa = (w as u64 * 64 + bits.trailing_zeros() as u64) * PAGE_SIZE;
                bits &= bits - 1;
                let data = if pa < snap.high_water {
                    &snap.memory[pa as usize..(pa + PAGE_SIZE) as usize]
                } else {
                    &zero[..]
                };
                self.mem.restore_page(pa, data);
                pages += 1;
            }
        }
        // Page tables changed back: drop every translation the guest cached.
        self.machine.invalidate_translations()?;
        self.machine.forget_loaded_state();
        let stream = self.kernel.observer().streams_output();
        let record = self.kernel.observer().trace().events().is_some();
        self.kernel = snap.kernel.clone();
        let obs = self.kernel.observer_mut();
        obs.stream_output(stream);
        if record {
            obs.record_all();
        }
        self.sched.choices = snap.choices.clone();
        self.fpu_owner = None;
        self.restored_pages = pages;
        self.restore_us = start.elapsed().as_micros() as u64;
        self.restored_at = snap.step;
        Ok(snap.pending)
    }

    /// Lets the strategy choose the next thread.
    fn schedule(&mut self) {
        self.sched.schedule(&mut self.kernel);
    }

    /// Loads the current thread into the vCPU, delivering its pending
    /// signals first.
    fn enter(&mut self) -> Result<(), VmError> {
        self.prepare_entry()?;
        if !self.ended() {
            self.load_current();
        }
        Ok(())
    }

    /// Everything before the current thread is loaded: its extended state
    /// in the CPU, its pending signals delivered, translations made valid.
    /// Doing it twice does nothing more (the debugger stops in between).
    fn prepare_entry(&mut self) -> Result<(), VmError> {
        let tid = self.kernel.current();
        if self.fpu_owner != Some(tid) {
            if let Some(prev) = self.fpu_owner {
                if let Some(t) = self.kernel.thread_mut(prev).filter(|t| t.is_alive()) {
                    t.fpu = Some(self.machine.extended_state()?);
                }
            }
            let s = self
                .kernel
                .cur()
                .fpu
                .take()
                .unwrap_or_else(ExtendedState::initial);
            self.machine.set_extended_state(&s)?;
            self.fpu_owner = Some(tid);
        }
        let fpu = &mut MachineCpu(&mut self.machine);
        self.kernel.deliver_signals(fpu);
        if self.ended() {
            return Ok(());
        }
        if !self.kernel.threads()[&tid].is_runnable() {
            // A signal ended its process (a child killed by SIGPIPE): the
            // strategy picks who runs instead.
            self.schedule();
            return if self.ended() {
                Ok(())
            } else {
                self.prepare_entry()
            };
        }
        // The instruction of the sync site it stopped at, if any.
        let fpu = &mut MachineCpu(&mut self.machine);
        self.kernel.execute_pending_site(fpu);
        if self.ended() {
            return Ok(());
        }
        if self.kernel.take_needs_invalidate() {
            self.machine.invalidate_translations()?;
        }
        self.publish_horizon();
        Ok(())
    }

    /// Loads the current thread's registers into the vCPU.
    fn load_current(&mut self) {
        let t = &self.kernel.threads()[&self.kernel.current()];
        self.machine.set_fs_base(t.fs_base);
        self.machine.set_page_table_root(self.kernel.mm().root());
        self.machine.resume(&self.mem, &t.regs);
    }
}
