//! The record of a run: a hash over every step, so two runs can be compared
//! whole by one number, and (when asked for) the events themselves.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::Xxh3;

use crate::arch::abi::HintOp;
use crate::code::SiteKind;
use crate::ids::{GuestAddr, Step, Tid};

/// What happened at a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Operation {
    /// A Linux system call, by number.
    Syscall { nr: u64 },
    /// A pthread operation reported by the shim.
    Hint { op: HintOp },
    /// A sync site in user code: an atomic, a spin, a global load or store.
    Sync { site: SiteKind },
}

impl Operation {
    /// The operation as one word (a system call's number; hints and sites
    /// above every system call), as the trace hash takes it.
    pub fn word(self) -> u64 {
        match self {
            Operation::Syscall { nr } => nr,
            Operation::Hint { op } => crate::arch::abi::HINT_SYSCALL << 8 | op as u64,
            Operation::Sync { site } => (crate::arch::abi::HINT_SYSCALL + 1) << 8 | site as u64,
        }
    }
}

/// One step of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub step: Step,
    pub thread: Tid,
    pub op: Operation,
    /// The object operated on: a lock, condvar or futex word, or a file
    /// descriptor's number for file calls; none when there is no object.
    pub object: Option<u64>,
    /// Where the thread was: the call site of a pthread operation (a return
    /// address), or the address after the `syscall` instruction.
    pub site: GuestAddr,
    /// The system call's result (`None` while the thread is blocked in it).
    pub result: Option<i64>,
    /// A pthread operation's second value (the mutex of a condvar wait, a
    /// try's result); 0 for system calls.
    #[serde(default)]
    pub value: u64,
}

impl Event {
    /// The operation's name: `futex`, `mutex-lock`, ...
    pub fn name(&self) -> &'static str {
        match self.op {
            Operation::Syscall { nr } => {
                crate::arch::syscalls::syscall_name(nr).unwrap_or("unknown")
            }
            Operation::Hint { op } => op.name(),
            Operation::Sync { site } => site.name(),
        }
    }
}

/// How many of the last events every run keeps, for reports.
pub const RECENT_EVENTS: usize = 64;

/// The running record of a run's steps.
#[derive(Clone, Default)]
pub struct Trace {
    hasher: Xxh3,
    /// Every event, when recording was asked for.
    all: Option<Vec<Event>>,
    /// The last [`RECENT_EVENTS`] events.
    recent: VecDeque<Event>,
}

impl Trace {
    /// Starts keeping every event, not only the recent ones.
    pub fn record_all(&mut self) {
        self.all.get_or_insert_with(Vec::new);
    }

    /// Records a step: who took it, what it was, on what object and from
    /// where, and what it returned (`None` when the thread blocked; its
    /// wake-up is recorded apart).
    ///
    /// The arguments of system calls are left out: registers a call does not
    /// use hold whatever the program left there, which would make two runs
    /// that behave the same differ.
    pub fn step(&mut self, ev: Event) {
        let nr = ev.op.word();
        let rec = [
            ev.step.0,
            ev.thread.0 as u64,
            nr,
            ev.object.unwrap_or(u64::MAX),
            ev.site.0,
            ev.value,
            ev.result.unwrap_or(i64::MIN) as u64,
        ];
        for w in rec {
            self.hasher.update(&w.to_le_bytes());
        }

        if let Some(all) = &mut self.all {
            all.push(ev);
        }
        if self.recent.len() == RECENT_EVENTS {
            self.recent.pop_front();
        }
        self.recent.push_back(ev);
    }

    /// Records a blocked thread waking with `result`.
    pub fn wake(&mut self, tid: Tid, result: i64) {
        self.hasher.update(&[0xffu8]);
        self.hasher.update(&(tid.0 as u64).to_le_bytes());
        self.hasher.update(&result.to_le_bytes());
        let fill = |e: &mut Event| {
            if e.thread == tid && e.result.is_none() {
                e.result = Some(result);
            }
        };
        if let Some(e) = self.recent.iter_mut().rev().find(|e| e.thread == tid) {
            fill(e);
        }
        if let Some(all) = &mut self.all {
            if let Some(e) = all.iter_mut().rev().find(|e| e.thread == tid) {
                fill(e);
            }
        }
    }

    /// Records what the instruction of a sync site did when its thread ran
    /// it (after the step, perhaps after other threads ran).
    pub fn access(&mut self, tid: Tid, addr: u64, read: u64, written: Option<u64>) {
        self.hasher.update(&[0xfe]);
        for w in [tid.0 as u64, addr, read, written.unwrap_or(u64::MAX)] {
            self.hasher.update(&w.to_le_bytes());
        }
    }

    /// The hash so far, as 16 hex digits.
    pub fn hash_hex(&self) -> String {
        format!("{:016x}", self.hasher.digest())
    }

    /// Every event, if recording was asked for.
    pub fn events(&self) -> Option<&[Event]> {
        self.all.as_deref()
    }

    /// The last events of the run.
    pub fn recent(&self) -> impl Iterator<Item = &Event> {
        self.recent.iter()
    }
}
