//! What the engine observes of a run: its steps and their trace, who holds
//! which lock and in which order locks are taken, where each thread stands,
//! what the program printed, and how the run ended. Nothing here knows KVM
//! or the Linux personality: the kernel reports to an [`Observer`] through
//! a handful of calls, and the engine and the front ends read it.

pub mod failure;
pub mod locks;
pub mod oracle;
pub mod outcome;
pub mod progress;
pub mod trace;

use std::collections::{BTreeMap, BTreeSet};

use crate::arch::abi::HintOp;
use crate::code::SiteKind;
use crate::code::sites::acquire::LockRole;
use crate::code::sites::emulate::{Access, AccessKind};
use crate::ids::{Step, Tid};
use locks::{LockTracker, WordAccess};
use outcome::Outcome;
use trace::{Event, Trace};

/// Where a sync site's step is reported, and what it does to a lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reported {
    /// The step's site: one past the instruction, or the return address
    /// into the first caller outside a language runtime.
    pub site: u64,
    /// Where a lock it takes or releases is said to be taken: `site`, or,
    /// past the program's own functions named as locks (`spin_lock`), the
    /// return address into their caller.
    pub lock_site: u64,
    /// What the site's code or its callers' names say it does to a lock.
    pub role: Option<LockRole>,
    /// The site's own instruction, one past its first byte.
    pub instruction: u64,
}

/// The record of one run, fed by the kernel step by step.
#[derive(Clone, Default)]
pub struct Observer {
    /// Steps taken (the number of the last step).
    step: Step,
    trace: Trace,
    /// Who holds which lock, from the shim's hints.
    locks: LockTracker,
    /// The object (lock, futex word) of each thread's last step.
    objects: BTreeMap<Tid, u64>,
    /// Where each thread's last step was (the site it resumes from).
    sites: BTreeMap<Tid, u64>,
    output: Output,
    outcome: Option<Outcome>,
    /// The site of the last write to each address a sync site wrote.
    last_write: BTreeMap<u64, u64>,
    /// Reads-from pairs: (site of the write a read observed, site of the
    /// read), for the accesses of sync sites.
    reads_from: BTreeSet<(u64, u64)>,
}

impl Observer {
    /// A run not begun; output beyond `cap` bytes per stream is dropped.
    pub fn new(cap: usize) -> Self {
        Observer {
            output: Output {
                cap,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    // ----- what the kernel reports

    /// A step begins; returns its number.
    pub fn begin_step(&mut self) -> Step {
        self.step.0 += 1;
        self.step
    }

    /// The thread `tid` takes a step that is a system call (`futex` or not:
    /// a lock's own slow path does not end its acquisition).
    pub fn syscall_step(&mut self, tid: Tid, is_futex: bool) {
        self.locks.on_step(tid, is_futex);
    }

    /// The thread `tid` takes a step that is a pthread operation.
    pub fn hint_step(&mut self, tid: Tid, op: HintOp, object: u64, site: u64, value: u64) {
        self.locks.on_step(tid, false);
        self.locks.on_hint(tid, op, object, site, value);
    }

    /// The step is done: what it was.
    pub fn record(&mut self, event: Event) {
        let tid = event.thread;
        match event.object {
            Some(o) => self.objects.insert(tid, o),
            None => self.objects.remove(&tid),
        };
        self.sites.insert(tid, event.site.0);
        self.trace.step(event);
    }

    /// The instruction of a sync site ran for `tid` (reported as
    /// `reported` says) and did `a`: lock inference and reads-from pairs.
    pub fn sync_access(&mut self, tid: Tid, reported: &Reported, kind: SiteKind, a: &Access) {
        self.trace.access(tid, a.addr, a.read, a.written);
        let site = reported.site;
        if kind != SiteKind::Load {
            let word = WordAccess {
                kind: a.kind,
                read: a.read,
                written: a.written,
                role: reported.role,
                instruction: reported.instruction,
            };
            self.locks.on_word(tid, reported.lock_site, a.addr, &word);
        }
        if a.kind != AccessKind::Store {
            if let Some(w) = self.last_write.get(&a.addr) {
                self.reads_from.insert((*w, site));
            }
        }
        if a.written.is_some() {
            self.last_write.insert(a.addr, site);
        }
    }

    /// `tid` makes a futex call `op` on `addr` (a word that may be a
    /// lock): a wait or a wake is evidence about it.
    pub fn futex(&mut self, tid: Tid, addr: u64, op: u64) {
        const CMD: u64 = 0x7f;
        match op & CMD {
            0 | 9 => self.locks.on_futex_wait(tid, addr),
            1 | 10 => self.locks.on_futex_wake(tid, addr),
            _ => {}
        }
    }

    /// A blocked thread woke with `result`.
    pub fn woke(&mut self, tid: Tid, result: i64) {
        self.trace.wake(tid, result);
    }

    /// The program wrote `data` to its standard output (fd 1) or error.
    pub fn output(&mut self, fd: u32, data: &[u8]) {
        self.output.push(fd, data);
    }

    /// Ends the run (the first ending wins).
    pub fn end(&mut self, outcome: Outcome) {
        if self.outcome.is_none() {
            self.outcome = Some(outcome);
        }
    }

    /// Takes the run's ending back out (a visit keeps it aside while it
    /// runs, see `kernel::visit`).
    pub fn take_outcome(&mut self) -> Option<Outcome> {
        self.outcome.take()
    }

    // ----- what the engine and the front ends read

    /// Steps taken so far.
    pub fn step(&self) -> Step {
        self.step
    }

    /// How the run ended, once it has.
    pub fn outcome(&self) -> Option<&Outcome> {
        self.outcome.as_ref()
    }

    pub fn ended(&self) -> bool {
        self.outcome.is_some()
    }

    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// Keeps every event from now on, not only the last ones.
    pub fn record_all(&mut self) {
        self.trace.record_all();
    }

    pub fn locks(&self) -> &LockTracker {
        &self.locks
    }

    /// The object of each thread's last step, if it had one.
    pub fn objects(&self) -> &BTreeMap<Tid, u64> {
        &self.objects
    }

    /// Reads-from pairs seen so far.
    pub fn reads_from(&self) -> &BTreeSet<(u64, u64)> {
        &self.reads_from
    }

    /// Where `tid`'s last step was (0 before its first).
    pub fn site(&self, tid: Tid) -> u64 {
        self.sites.get(&tid).copied().unwrap_or(0)
    }

    pub fn stdout(&self) -> &[u8] {
        &self.output.stdout
    }

    pub fn stderr(&self) -> &[u8] {
        &self.output.stderr
    }

    /// Bytes the program wrote to stdout and stderr, including those
    /// beyond the capture's cap.
    pub fn output_written(&self) -> (u64, u64) {
        (self.output.written[0], self.output.written[1])
    }

    /// Whether output is copied to the monitor's own stdout and stderr as
    /// it comes.
    pub fn streams_output(&self) -> bool {
        self.output.stream
    }

    pub fn stream_output(&mut self, on: bool) {
        self.output.stream = on;
    }
}

/// Captured output of the guest.
#[derive(Clone, Debug, Default)]
struct Output {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    /// Copy guest output to the monitor's own stdout/stderr as it comes.
    stream: bool,
    /// Keep at most this many bytes of each stream.
    cap: usize,
    /// Bytes written to each stream, kept or not.
    written: [u64; 2],
}

impl Output {
    fn push(&mut self, fd: u32, data: &[u8]) {
        use std::io::Write;
        if self.stream {
            if fd == 1 {
                let _ = std::io::stdout().write_all(data);
                let _ = std::io::stdout().flush();
            } else {
                let _ = std::io::stderr().write_all(data);
            }
        }
        self.written[usize::from(fd != 1)] += data.len() as u64;
        let buf = if fd == 1 {
            &mut self.stdout
        } else {
            &mut self.stderr
        };
        let room = self.cap.saturating_sub(buf.len());
        buf.extend_from_slice(&data[..data.len().min(room)]);
    }
}
