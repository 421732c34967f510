//! What counts as a failure: one definition for every front end.
//!
//! A run fails when it ends any other way than exiting with an accepted
//! code, or when it exits with one but took locks in an order that could
//! deadlock under another schedule (a potential deadlock).

use super::outcome::{HungReason, Outcome};

/// How a run failed.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum FailureKind {
    /// It exited with an accepted code, but its lock-order graph has a
    /// cycle: another schedule could deadlock.
    PotentialDeadlock,
    /// It exited with a code that is not accepted.
    Exited(i32),
    /// A fatal signal ended it.
    Crashed { signal: String },
    /// Every thread blocked for good.
    Deadlocked,
    /// The step budget stopped it.
    Hung(HungReason),
    /// The wall-clock watchdog stopped it (depends on the host).
    TimedOut,
    /// It needed more memory than the machine has: a limit of the machine.
    OutOfMemory,
    /// It exited, but its output oracle rejected what it printed.
    WrongOutput,
    /// It needed a system call the monitor does not implement: a limit of
    /// the monitor, not a bug of the program.
    Unsupported { syscall: String },
}

impl FailureKind {
    /// How `outcome` failed, if it did; `inversions` says whether the run's
    /// lock-order graph had a cycle, `ok_codes` lists the exit codes that
    /// are success.
    pub fn of(outcome: &Outcome, inversions: bool, ok_codes: &[i32]) -> Option<FailureKind> {
        Some(match outcome {
            Outcome::Exited { code } if ok_codes.contains(code) => {
                return inversions.then_some(FailureKind::PotentialDeadlock);
            }
            Outcome::Exited { code } => FailureKind::Exited(*code),
            Outcome::Crashed { signal, .. } => FailureKind::Crashed {
                signal: signal.clone(),
            },
            Outcome::Deadlocked { .. } => FailureKind::Deadlocked,
            Outcome::Hung { reason, .. } => FailureKind::Hung(*reason),
            Outcome::TimedOut { .. } => FailureKind::TimedOut,
            Outcome::OutOfMemory { .. } => FailureKind::OutOfMemory,
            Outcome::WrongOutput { .. } => FailureKind::WrongOutput,
            Outcome::Unsupported { syscall, .. } => FailureKind::Unsupported {
                syscall: syscall.clone(),
            },
        })
    }

    /// The class, as tables count runs: `potential-deadlock`,
    /// `exited(non-zero)`, `crashed`, `deadlocked`, `hung`, `unsupported`.
    pub fn class(&self) -> &'static str {
        match self {
            FailureKind::PotentialDeadlock => "potential-deadlock",
            FailureKind::Exited(_) => "exited(non-zero)",
            FailureKind::Crashed { .. } => "crashed",
            FailureKind::Deadlocked => "deadlocked",
            FailureKind::Hung(_) => "hung",
            FailureKind::TimedOut => "timed-out",
            FailureKind::OutOfMemory => "out-of-memory",
            FailureKind::WrongOutput => "wrong-output",
            FailureKind::Unsupported { .. } => "unsupported",
        }
    }

    /// The class with its detail, as failure signatures spell it:
    /// `crashed(SIGSEGV)`, `exited(3)`, `hung(max-steps)`,
    /// `unsupported(fork)`, `deadlocked`, `potential-deadlock`.
    pub fn detail(&self) -> String {
        match self {
            FailureKind::Exited(code) => format!("exited({code})"),
            FailureKind::Crashed { signal } => format!("crashed({signal})"),
            FailureKind::Hung(r) => format!("hung({})", r.as_str()),
            FailureKind::Unsupported { syscall } => format!("unsupported({syscall})"),
            k => k.class().to_string(),
        }
    }

    /// Whether this says something about the program (everything but a
    /// system call the monitor lacks and memory the machine lacks).
    pub fn is_program_failure(&self) -> bool {
        !matches!(
            self,
            FailureKind::Unsupported { .. } | FailureKind::OutOfMemory
        )
    }

    /// Whether the same schedule may end otherwise on another host or
    /// under another load (the wall-clock watchdog).
    pub fn depends_on_the_host(&self) -> bool {
        matches!(self, FailureKind::TimedOut)
    }
}

/// The row a run is counted under in a table of outcomes: its failure's
/// class, or `exited(0)` when it did not fail.
pub fn table_row(f: Option<&FailureKind>) -> &'static str {
    f.map_or("exited(0)", FailureKind::class)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_accepted_exit_fails_only_with_a_lock_order_cycle() {
        let ok = Outcome::Exited { code: 0 };
        assert_eq!(FailureKind::of(&ok, false, &[0]), None);
        assert_eq!(
            FailureKind::of(&ok, true, &[0]),
            Some(FailureKind::PotentialDeadlock)
        );
        let three = Outcome::Exited { code: 3 };
        assert_eq!(FailureKind::of(&three, false, &[0, 3]), None);
        let f = FailureKind::of(&three, true, &[0]).unwrap();
        assert_eq!(
            (f.class(), f.detail().as_str()),
            ("exited(non-zero)", "exited(3)")
        );
    }

    #[test]
    fn each_outcome_has_its_class_and_detail() {
        let crashed = Outcome::Crashed {
            signal: "SIGSEGV".into(),
            signo: 11,
            fault_addr: None,
            thread: 1,
            rip: 0,
        };
        let f = FailureKind::of(&crashed, false, &[0]).unwrap();
        assert_eq!(
            (f.class(), f.detail().as_str()),
            ("crashed", "crashed(SIGSEGV)")
        );
        let hung = Outcome::Hung {
            reason: HungReason::MaxSteps,
            thread: 1,
            rip: 0,
        };
        assert_eq!(
            FailureKind::of(&hung, false, &[0]).unwrap().detail(),
            "hung(max-steps)"
        );
        let unsupported = Outcome::Unsupported {
            syscall: "fork".into(),
            nr: 57,
            thread: 1,
            rip: 0,
            detail: String::new(),
        };
        let f = FailureKind::of(&unsupported, false, &[0]).unwrap();
        assert_eq!(f.detail(), "unsupported(fork)");
        assert!(!f.is_program_failure());
        assert_eq!(table_row(None), "exited(0)");
    }
}
