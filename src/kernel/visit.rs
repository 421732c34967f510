//! A visitor: a process started inside a paused run, as `rewind-fuzz
//! shell` starts one. It sees what the run's processes see (the overlay's
//! files, `/proc`, the other processes), but none of its steps are the
//! run's: while it lives only its own processes run and only their waits
//! time out, so the run's threads stay where the pause found them. Its
//! standard streams are the host's own.
//!
//! A visit never ends a run: the run's ending (if it had one) is kept
//! aside while the visitor runs, and what ends the visit instead (its
//! first process's end, or a call the machine cannot make) is a
//! [`VisitEnd`].

use std::sync::Arc;

use super::files::FdTable;
use super::loader::{self, Exec, LoadError};
use super::process::{Ended, Process};
use super::{Kernel, Thread, Tid};
use crate::arch::cpu::UserRegs;
use crate::ids::Pid;
use crate::observe::outcome::Outcome;

/// What the kernel cannot tell of a thread by itself: its stack named by
/// the program's symbols (`/proc/PID/task/TID/stack` in a visit).
pub trait ThreadLook: Send + Sync {
    /// The thread's user stack, a frame a line, innermost first.
    fn stack(&self, k: &Kernel, tid: Tid) -> String;
}

/// The program a visit starts and where.
pub struct Visitor {
    /// Its file, as the run's processes would name it.
    pub program: String,
    pub argv: Vec<String>,
    pub env: Vec<String>,
    /// Its working directory.
    pub cwd: String,
    pub look: Arc<dyn ThreadLook>,
}

/// How a visit ended.
#[derive(Clone, Debug, PartialEq)]
pub enum VisitEnd {
    /// The visitor's first process exited with this code.
    Exited(i32),
    /// A signal killed it.
    Killed(u32),
    /// The kernel stopped it (a call the machine cannot make, all of its
    /// processes waiting for something that never comes).
    Stopped(Outcome),
}

impl VisitEnd {
    /// The exit status a shell would give: the code, or 128 + the signal.
    pub fn status(&self) -> i32 {
        match self {
            VisitEnd::Exited(c) => *c,
            VisitEnd::Killed(s) => 128 + *s as i32,
            VisitEnd::Stopped(_) => 1,
        }
    }
}

/// A visit under way.
#[derive(Clone)]
pub(super) struct Visit {
    /// The visitor's first process. It and every process and thread made
    /// after it are the visitor's: the run's threads never run meanwhile,
    /// so they make none.
    root: Pid,
    /// How the run had ended when the visit began, if it had.
    run_outcome: Option<Outcome>,
    pub look: Arc<dyn ThreadLook>,
}

impl Kernel {
    /// Starts `v` as a new process, the only one that runs from here on,
    /// with the host's standard streams; returns its first thread. The
    /// caller switches to it.
    pub fn start_visit(&mut self, v: Visitor) -> Result<Tid, LoadError> {
        assert!(self.visit.is_none(), "one visit at a time");
        let tid = self.alloc_tid();
        let pid = Pid::from(tid);
        let fresh = self
            .mm
            .fresh(&self.mem)
            .map_err(|e| LoadError::Memory("the visitor's address space".into(), e))?;
        self.park_space(pid, fresh);
        let limits = self
            .procs
            .get(&self.first_pid)
            .map(|p| p.limits.clone())
            .unwrap_or_default();
        self.add_process(Process {
            pid,
            parent: Pid(0),
            pgid: pid,
            sid: pid,
            space: pid,
            exe: v.program.clone(),
            cmdline: v.argv.clone(),
            environ: v.env.clone(),
            started: self.now,
            options: Default::default(),
            ended: None,
            exit_signal: 0,
            vfork_parent: None,
            files: FdTable::with_host_streams(),
            signals: Default::default(),
            limits,
            cwd: v.cwd,
        });
        let name = v.program.rsplit('/').next().unwrap_or_default();
        let name = name.chars().take(15).collect();
        self.threads
            .insert(tid, Thread::new(tid, UserRegs::default(), name));
        self.visit = Some(Visit {
            root: pid,
            run_outcome: self.obs.take_outcome(),
            look: v.look,
        });
        let exec = Exec {
            exe: v.program.clone(),
            execfn: v.program,
            argv: v.argv,
            env: v.env,
        };
        let loaded = self.with_process(pid, |k| {
            k.map_ring()
                .map_err(|e| LoadError::Memory("the hint ring".into(), e))?;
            loader::load(k, &exec)
        });
        match loaded {
            Ok(regs) => {
                self.threads.get_mut(&tid).expect("made above").regs = regs;
                Ok(tid)
            }
            Err(e) => {
                self.end_visit();
                Err(e)
            }
        }
    }

    /// How the visit ended, once it has.
    pub fn visit_end(&self) -> Option<VisitEnd> {
        let v = self.visit.as_ref()?;
        match self.procs.get(&v.root).and_then(|p| p.ended) {
            Some(Ended::Exited(c)) => Some(VisitEnd::Exited(c)),
            Some(Ended::Killed(s)) => Some(VisitEnd::Killed(s)),
            None => self.obs.outcome().cloned().map(VisitEnd::Stopped),
        }
    }

    /// Whether the visitor's first process has ended.
    pub(crate) fn visitor_ended(&self) -> bool {
        let root = self.visit.as_ref().map(|v| v.root);
        root.and_then(|r| self.procs.get(&r))
            .is_some_and(|p| p.ended.is_some())
    }

    /// Ends the visit: the run's ending is the run's again. The visitor's
    /// processes stay as they are; the caller drops the machine.
    pub fn end_visit(&mut self) {
        if let Some(v) = self.visit.take() {
            self.obs.take_outcome();
            if let Some(o) = v.run_outcome {
                self.obs.end(o);
            }
        }
    }

    /// Whether thread `tid` may run now: any thread outside a visit, only
    /// the visitor's during one. A process's timers fire when its first
    /// thread may run.
    pub(super) fn may_run(&self, tid: Tid) -> bool {
        self.visit.as_ref().is_none_or(|v| tid.0 >= v.root.0)
    }

    /// Whether a visit is under way.
    pub(super) fn visiting(&self) -> bool {
        self.visit.is_some()
    }

    /// A thread's stack as the visit's look names it, if a visit is under way.
    pub(super) fn visit_stack(&self, tid: Tid) -> Option<String> {
        let look = self.visit.as_ref()?.look.clone();
        Some(look.stack(self, tid))
    }
}

impl Kernel {
    /// [`Kernel::idle`] during a visit: time jumps to the next deadline
    /// of the visitor's own; with none, the visit stops, its threads all
    /// waiting.
    pub(super) fn idle_in_visit(&mut self) -> bool {
        if self.visitor_ended() {
            return false;
        }
        let next = self
            .threads
            .next_deadline_of(|t| self.may_run(t))
            .into_iter()
            .chain(
                self.timers
                    .next_deadline_of(|p| self.may_run(p.first_thread())),
            )
            .min();
        if let Some(d) = next {
            self.now = self.now.max(d);
            self.expire_timers();
            return true;
        }
        let threads: Vec<_> = self
            .blocked_threads()
            .into_iter()
            .filter(|b| self.may_run(b.thread))
            .collect();
        let cycle = crate::observe::outcome::wait_cycle(&threads);
        self.end(Outcome::Deadlocked { threads, cycle });
        false
    }
}
