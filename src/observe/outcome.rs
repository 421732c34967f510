//! How a run ended.

use serde::{Deserialize, Serialize};

use crate::ids::{GuestAddr, Tid};

/// A thread that was blocked when the run deadlocked, and on what.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockedThread {
    pub thread: Tid,
    pub name: String,
    /// What it waits on, for people: "futex 0x7f..1040", "signal".
    pub waits_on: String,
    /// The futex word or lock address, when there is one.
    pub object: Option<u64>,
    /// Where the thread stands (its user RIP).
    pub rip: GuestAddr,
    /// The lock it is acquiring, when the shim reported one.
    pub lock: Option<GuestAddr>,
    /// Where it asked for that lock.
    pub site: Option<GuestAddr>,
    /// The thread holding that lock.
    pub holder: Option<Tid>,
    /// Where the holder took it.
    pub holder_site: Option<GuestAddr>,
}

/// The threads of a wait-for cycle (each waits for a lock the next holds),
/// starting from the lowest thread id; empty when there is none.
pub fn wait_cycle(threads: &[BlockedThread]) -> Vec<Tid> {
    let next = |t: Tid| {
        threads
            .iter()
            .find(|b| b.thread == t)
            .and_then(|b| b.holder)
    };
    for start in threads.iter().map(|b| b.thread) {
        let mut path = vec![start];
        let mut at = start;
        while let Some(h) = next(at) {
            if let Some(i) = path.iter().position(|p| *p == h) {
                let mut cycle = path[i..].to_vec();
                let min = cycle
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, t)| **t)
                    .map(|(i, _)| i)
                    .unwrap();
                cycle.rotate_left(min);
                return cycle;
            }
            path.push(h);
            at = h;
        }
    }
    Vec::new()
}

/// Why a run was stopped without ending by itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HungReason {
    /// `--max-steps` scheduling points were taken.
    MaxSteps,
    /// The threads only went round states they had been in, for
    /// `--hang-steps` steps (see `observe::progress`).
    NoProgress,
}

impl HungReason {
    pub fn as_str(self) -> &'static str {
        match self {
            HungReason::MaxSteps => "max-steps",
            HungReason::NoProgress => "no-progress",
        }
    }
}

/// The end of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Outcome {
    /// The program exited (`exit_group`, or its last thread's `exit`).
    Exited { code: i32 },
    /// A fatal signal ended it.
    Crashed {
        signal: String,
        signo: u32,
        fault_addr: Option<u64>,
        thread: u32,
        rip: u64,
    },
    /// Every live thread is blocked and no timer is pending, or threads
    /// spin for each other's locks until the step budget ends.
    Deadlocked {
        threads: Vec<BlockedThread>,
        /// The wait-for cycle among them, when locks explain it.
        cycle: Vec<Tid>,
    },
    /// The run was stopped.
    Hung {
        reason: HungReason,
        thread: u32,
        rip: u64,
    },
    /// The wall-clock watchdog (`--timeout`) stopped a thread that ran
    /// that long without a scheduling point. How far it got depends on the
    /// host's speed and load, unlike every other outcome.
    TimedOut { thread: u32, rip: u64 },
    /// The program needed more memory than the machine has (`--memory`):
    /// a page it touched could not be given one.
    OutOfMemory {
        memory_mib: u64,
        thread: u32,
        rip: u64,
    },
    /// The program exited, but its output oracle (`--expect-stdout`,
    /// `--oracle`) says what it printed is wrong.
    WrongOutput {
        code: i32,
        /// The oracle, as the user gave it.
        oracle: String,
        /// What is wrong: the first differing line, or the oracle's word.
        difference: String,
    },
    /// The program made a system call (or used a feature) the monitor does
    /// not implement.
    Unsupported {
        syscall: String,
        nr: u64,
        thread: u32,
        rip: u64,
        detail: String,
    },
}

impl Outcome {
    /// One of `exited`, `crashed`, `deadlocked`, `hung`, `timed-out`,
    /// `out-of-memory`, `wrong-output`, `unsupported`.
    pub fn kind(&self) -> &'static str {
        match self {
            Outcome::Exited { .. } => "exited",
            Outcome::Crashed { .. } => "crashed",
            Outcome::Deadlocked { .. } => "deadlocked",
            Outcome::Hung { .. } => "hung",
            Outcome::TimedOut { .. } => "timed-out",
            Outcome::OutOfMemory { .. } => "out-of-memory",
            Outcome::WrongOutput { .. } => "wrong-output",
            Outcome::Unsupported { .. } => "unsupported",
        }
    }

    /// Whether this is a clean exit with status 0.
    pub fn is_success(&self) -> bool {
        matches!(self, Outcome::Exited { code: 0 })
    }

    /// One line for people.
    pub fn summary(&self) -> String {
        match self {
            Outcome::Exited { code } => format!("exited with code {code}"),
            Outcome::Crashed {
                signal,
                fault_addr,
                thread,
                rip,
                ..
            } => {
                let addr = fault_addr
                    .map(|a| format!(" at address {a:#x}"))
                    .unwrap_or_default();
                format!("crashed: {signal}{addr} in thread {thread} (rip {rip:#x})")
            }
            Outcome::Deadlocked { threads, cycle } => {
                let parts: Vec<String> = threads
                    .iter()
                    .map(|t| {
                        // The program names its threads: shown, not obeyed.
                        let name = crate::escape::line(&t.name);
                        format!("thread {} ({name}) waits on {}", t.thread, t.waits_on)
                    })
                    .collect();
                let c = if cycle.is_empty() {
                    String::new()
                } else {
                    let ids: Vec<String> = cycle.iter().map(|t| t.to_string()).collect();
                    format!(
                        " [cycle of {} threads: {} -> {}]",
                        cycle.len(),
                        ids.join(" -> "),
                        ids[0]
                    )
                };
                format!("deadlocked: {}{c}", parts.join("; "))
            }
            Outcome::Hung {
                reason,
                thread,
                rip,
            } => match reason {
                HungReason::MaxSteps => format!(
                    "hung: the step limit was reached (thread {thread} at rip {rip:#x}; --max-steps raises it)"
                ),
                HungReason::NoProgress => format!(
                    "hung: no progress, the threads only went round states they had been in (thread {thread} at rip {rip:#x}; --hang-steps raises how long that may last)"
                ),
            },
            Outcome::TimedOut { thread, rip } => format!(
                "timed out: thread {thread} ran for the wall-clock --timeout without a scheduling point (rip {rip:#x}); how far a run gets in that time depends on this host's speed and load"
            ),
            Outcome::OutOfMemory {
                memory_mib,
                thread,
                rip,
            } => format!(
                "out of memory: the program needs more than the {memory_mib} MiB of guest memory (raise --memory); thread {thread} at rip {rip:#x}"
            ),
            Outcome::WrongOutput {
                code,
                oracle,
                difference,
            } => format!(
                "wrong output: exited with code {code}, but {oracle} says: {}",
                crate::escape::line(difference)
            ),
            Outcome::Unsupported {
                syscall,
                nr,
                thread,
                rip,
                detail,
            } => {
                let d = if detail.is_empty() {
                    String::new()
                } else {
                    format!(" ({detail})")
                };
                format!(
                    "unsupported: system call {syscall} ({nr}){d} by thread {thread} at rip {rip:#x}"
                )
            }
        }
    }
}

/// Linux's name of a signal number.
pub fn signal_name(signo: u32) -> String {
    let n = match signo {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        10 => "SIGUSR1",
        11 => "SIGSEGV",
        12 => "SIGUSR2",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        16 => "SIGSTKFLT",
        17 => "SIGCHLD",
        18 => "SIGCONT",
        19 => "SIGSTOP",
        20 => "SIGTSTP",
        21 => "SIGTTIN",
        22 => "SIGTTOU",
        23 => "SIGURG",
        24 => "SIGXCPU",
        25 => "SIGXFSZ",
        26 => "SIGVTALRM",
        27 => "SIGPROF",
        28 => "SIGWINCH",
        29 => "SIGIO",
        30 => "SIGPWR",
        31 => "SIGSYS",
        n if (32..=64).contains(&n) => return format!("SIGRT{}", n - 32),
        n => return format!("signal {n}"),
    };
    n.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_serialize_with_their_kind() {
        let o = Outcome::Exited { code: 3 };
        let v = serde_json::to_value(&o).unwrap();
        assert_eq!(v["kind"], "exited");
        assert_eq!(v["code"], 3);
        assert_eq!(o.kind(), "exited");
    }

    #[test]
    fn signal_names_match_linux() {
        assert_eq!(signal_name(11), "SIGSEGV");
        assert_eq!(signal_name(6), "SIGABRT");
        assert_eq!(signal_name(34), "SIGRT2");
    }
}
