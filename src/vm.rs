//! The engine: a machine, a kernel and a strategy, run together.
//!
//! The loop is one `match` over the machine's exits that hands each to the
//! kernel, asks the strategy who runs next, and loads that thread into the
//! vCPU. Everything a run depends on is an input (program, arguments, files,
//! seed, schedule), so the same inputs give the same run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::abi::SHIM_PATH;
use crate::cpu::ExtendedState;
use crate::kernel::loader::LoadError;
use crate::kernel::vfs::SharedSource;
use crate::kernel::{FpuAccess, Kernel, KernelConfig, Tid};
use crate::locks::Inversion;
use crate::machine::{Exit, Machine, MachineError};
use crate::memory::{PhysError, PhysMemory};
use crate::outcome::{HungReason, Outcome};
use crate::sched::{Decision, RunUntilBlocked, SchedView, Schedule, Strategy};
use crate::trace::Event;

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
}

impl RunConfig {
    pub fn new(kernel: KernelConfig) -> Self {
        RunConfig {
            kernel,
            memory_mib: 1024,
            timeout: Duration::from_secs(10),
            stream_output: false,
            shim: true,
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
}

/// What a run did.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RunReport {
    pub outcome: Outcome,
    /// Steps taken (system calls).
    pub steps: u64,
    /// Hash over every step's thread, call, arguments and result.
    pub trace_hash: String,
    /// Threads the program had, the main one included.
    pub threads: usize,
    #[serde(serialize_with = "lossy")]
    pub stdout: Vec<u8>,
    #[serde(serialize_with = "lossy")]
    pub stderr: Vec<u8>,
    /// Exits from the guest to the monitor.
    pub exits: u64,
    /// Page faults served by filling memory on demand.
    pub demand_faults: u64,
    /// Times the guest's translations were invalidated.
    pub invalidations: u64,
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
}

fn lossy<S: serde::Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&String::from_utf8_lossy(v))
}

/// The extended state of the thread on the CPU, through the machine.
struct MachineFpu<'a>(&'a mut Machine);

impl FpuAccess for MachineFpu<'_> {
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

/// A program loaded into a machine, ready to run once.
pub struct Vm {
    machine: Machine,
    kernel: Kernel,
    mem: Arc<PhysMemory>,
    strategy: Box<dyn Strategy>,
    timeout: Duration,
    /// The thread whose extended state is in the CPU.
    fpu_owner: Option<Tid>,
    /// Decisions that differed from the default policy's.
    decisions: Vec<Decision>,
}

impl Vm {
    /// Creates the machine and loads the program.
    pub fn new(cfg: &RunConfig, source: SharedSource) -> Result<Vm, VmError> {
        let mem = Arc::new(PhysMemory::new(cfg.memory_mib << 20)?);
        let machine = Machine::new(&mem)?;
        let mut kcfg = cfg.kernel.clone();
        if cfg.shim {
            let shim = Arc::new(crate::shim::SHIM_SO.to_vec());
            source.lock().unwrap().provide(SHIM_PATH, shim, 0o755);
            kcfg.preload = vec![SHIM_PATH.to_string()];
        }
        let mut kernel = Kernel::new(mem.clone(), kcfg, source)?;
        kernel.out.stream = cfg.stream_output;
        Ok(Vm {
            machine,
            kernel,
            mem,
            strategy: Box::new(RunUntilBlocked),
            timeout: cfg.timeout,
            fpu_owner: None,
            decisions: Vec::new(),
        })
    }

    /// Replaces the scheduling strategy.
    pub fn set_strategy(&mut self, s: Box<dyn Strategy>) {
        self.strategy = s;
    }

    /// The kernel (for inspection).
    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    /// Keeps every event of the run (for traces), not only the last ones.
    pub fn record_events(&mut self) {
        self.kernel.trace.record_all();
    }

    /// Runs the program to its end.
    pub fn run(&mut self) -> Result<RunReport, VmError> {
        let start = Instant::now();
        let exits0 = self.machine.exits;
        let inval0 = self.machine.invalidations;
        self.machine.arm_watchdog(self.timeout);
        let r = self.run_loop();
        self.machine.disarm_watchdog();
        r?;
        let k = &self.kernel;
        Ok(RunReport {
            outcome: k.outcome.clone().expect("the loop ends with an outcome"),
            steps: k.step,
            trace_hash: k.trace.hash_hex(),
            threads: k.threads.len(),
            stdout: k.out.stdout.clone(),
            stderr: k.out.stderr.clone(),
            exits: self.machine.exits - exits0,
            demand_faults: k.mm.demand_faults,
            invalidations: self.machine.invalidations - inval0,
            wall_us: start.elapsed().as_micros() as u64,
            schedule: Schedule::new(self.strategy.name(), self.decisions.clone()),
            potential_deadlocks: k.locks.inversions(),
            events: k.trace.events().map(|e| e.to_vec()),
            recent_events: k.trace.recent().copied().collect(),
        })
    }

    fn run_loop(&mut self) -> Result<(), VmError> {
        self.enter()?;
        while self.kernel.outcome.is_none() {
            let exit = self.machine.run()?;
            match exit {
                Exit::Syscall => {
                    self.machine.progress();
                    let regs = self.machine.user_regs()?;
                    self.kernel
                        .on_syscall(regs, &mut MachineFpu(&mut self.machine));
                    if self.kernel.outcome.is_none() {
                        self.schedule();
                    }
                }
                Exit::Exception {
                    vector,
                    error_code,
                    fault_addr,
                } => {
                    let regs = self.machine.user_regs()?;
                    self.kernel.on_exception(
                        regs,
                        vector,
                        error_code,
                        fault_addr,
                        &mut MachineFpu(&mut self.machine),
                    );
                }
                Exit::TimedOut => {
                    let thread = self.kernel.current.0;
                    // Interrupted before it re-entered user mode, the vCPU
                    // stands at the entry stub: report the thread's own RIP.
                    let rip = match self.machine.guest_rip() {
                        r if r >= crate::layout::KERNEL_VIRT_BASE => self.kernel.cur().regs.rip,
                        r => r,
                    };
                    self.kernel.end(Outcome::Hung {
                        reason: HungReason::Timeout,
                        thread,
                        rip,
                    });
                }
            }
            if self.kernel.outcome.is_none() {
                self.enter()?;
            }
        }
        Ok(())
    }

    /// Lets the strategy choose the next thread after a step, jumping
    /// virtual time forward when every thread sleeps.
    fn schedule(&mut self) {
        let k = &mut self.kernel;
        let mut runnable = k.runnable();
        while runnable.is_empty() {
            if !k.idle() {
                return;
            }
            runnable = k.runnable();
        }
        let cur = k.current;
        let current_runnable = k.threads[&cur].is_runnable();
        let view = SchedView {
            step: k.step,
            current: cur,
            current_runnable,
            yielded: k.threads[&cur].yielded,
            runnable: &runnable,
            objects: &k.objects,
        };
        let next = self.strategy.pick(&view);
        assert!(
            runnable.contains(&next),
            "strategy chose a thread that cannot run"
        );
        if next != RunUntilBlocked::choose(&view) {
            self.decisions.push(Decision {
                step: k.step,
                thread: next.0,
            });
        }
        k.switch_to(next);
    }

    /// Loads the current thread into the vCPU, delivering its pending
    /// signals first.
    fn enter(&mut self) -> Result<(), VmError> {
        let tid = self.kernel.current;
        if self.fpu_owner != Some(tid) {
            if let Some(prev) = self.fpu_owner {
                if self.kernel.threads.get(&prev).is_some_and(|t| t.is_alive()) {
                    let s = self.machine.extended_state()?;
                    self.kernel.threads.get_mut(&prev).unwrap().fpu = Some(s);
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
        self.kernel
            .deliver_signals(&mut MachineFpu(&mut self.machine));
        if self.kernel.outcome.is_some() {
            return Ok(());
        }
        if self.kernel.mm.take_needs_invalidate() {
            self.machine.invalidate_translations()?;
        }
        let t = &self.kernel.threads[&tid];
        self.machine.set_fs_base(t.fs_base);
        self.machine.resume(&self.mem, &t.regs);
        Ok(())
    }
}
