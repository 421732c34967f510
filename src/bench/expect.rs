//! Whether a run is the bug a harness manifest describes.
//!
//! A buggy harness counts as found only when a run ends the way its
//! `[expect]` says (a deadlock harness by deadlocking, not by the lock-order
//! warning every run of it gives), so a strategy cannot score with a
//! different failure. Any failure of a fixed twin is a false positive.

use crate::harness::{Expect, ExpectKind, HangBudget};
use crate::observe::failure::FailureKind;
use crate::observe::outcome::{HungReason, Outcome};

/// How one schedule of a harness ended, as the bench counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Exited 0 without a lock-order cycle.
    Pass,
    /// The bug the manifest expects.
    Bug,
    /// Exited 0, but took locks in an order that could deadlock: expected
    /// of most deadlock harnesses, which report it under every schedule.
    LockWarning,
    /// Any other failure: for a buggy harness a sign that something else is
    /// wrong (the engine, the harness); for a fixed twin a false positive.
    Other,
}

/// Judges one run: `expect` is the buggy build's `[expect]`, or `None` for a
/// fixed twin (which must not fail: exit with one of the program's normal
/// codes with no lock-order cycle); `failure` is how the engine judged the
/// run ([`crate::engine::RunReport::failure`]).
pub fn verdict(
    expect: Option<&Expect>,
    outcome: &Outcome,
    inversions: bool,
    failure: Option<&FailureKind>,
) -> Verdict {
    if let Some(e) = expect {
        if is_expected(e, outcome, inversions) {
            return Verdict::Bug;
        }
    }
    match failure {
        None => Verdict::Pass,
        Some(FailureKind::PotentialDeadlock) => Verdict::LockWarning,
        Some(_) => Verdict::Other,
    }
}

/// Whether a run ended as `e` says.
pub fn is_expected(e: &Expect, outcome: &Outcome, inversions: bool) -> bool {
    match (e.kind, outcome) {
        (ExpectKind::PotentialDeadlock, _) => inversions,
        (ExpectKind::Exited, Outcome::Exited { code }) => *code == e.code.unwrap_or(0),
        (ExpectKind::Crashed, Outcome::Crashed { signo, .. }) => {
            e.signal_number().is_none_or(|s| s as u32 == *signo)
        }
        (ExpectKind::Deadlocked, Outcome::Deadlocked { .. }) => true,
        (ExpectKind::Hung, Outcome::Hung { reason, .. }) => match e.budget {
            None => true,
            Some(HangBudget::Steps) => *reason == HungReason::MaxSteps,
            Some(HangBudget::Watchdog) => false,
        },
        (ExpectKind::Hung, Outcome::TimedOut { .. }) => {
            matches!(e.budget, None | Some(HangBudget::Watchdog))
        }
        (ExpectKind::Unsupported, Outcome::Unsupported { syscall, .. }) => {
            e.syscall.as_ref().is_none_or(|s| s == syscall)
        }
        (ExpectKind::WrongOutput, Outcome::WrongOutput { .. }) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The verdict on a run the engine judged with `ok_codes` success.
    fn judged(expect: Option<&Expect>, o: &Outcome, inversions: bool, ok_codes: &[i32]) -> Verdict {
        verdict(
            expect,
            o,
            inversions,
            FailureKind::of(o, inversions, ok_codes).as_ref(),
        )
    }
    use crate::harness::Manifest;

    fn expect(body: &str) -> Expect {
        let text = format!(
            "description = \"d\"\nlanguage = \"c\"\nsources = [\"a.c\"]\n[expect]\n{body}\n[fixed]\n"
        );
        Manifest::parse(&text).unwrap().expect
    }

    fn crashed(signo: u32) -> Outcome {
        Outcome::Crashed {
            signal: crate::observe::outcome::signal_name(signo),
            signo,
            fault_addr: None,
            thread: 2,
            rip: 0,
        }
    }

    fn deadlocked() -> Outcome {
        Outcome::Deadlocked {
            threads: Vec::new(),
            cycle: Vec::new(),
        }
    }

    const OK: Outcome = Outcome::Exited { code: 0 };

    #[test]
    fn a_deadlock_harness_is_found_by_a_deadlock_not_by_its_lock_warning() {
        let e = expect("kind = \"deadlocked\"");
        assert_eq!(judged(Some(&e), &deadlocked(), true, &[0]), Verdict::Bug);
        assert_eq!(judged(Some(&e), &OK, true, &[0]), Verdict::LockWarning);
        assert_eq!(judged(Some(&e), &OK, false, &[0]), Verdict::Pass);
        assert_eq!(judged(Some(&e), &crashed(11), false, &[0]), Verdict::Other);
    }

    #[test]
    fn a_crash_must_be_the_expected_signal() {
        let e = expect("kind = \"crashed\"\nsignal = \"SIGABRT\"");
        assert_eq!(judged(Some(&e), &crashed(6), false, &[0]), Verdict::Bug);
        assert_eq!(judged(Some(&e), &crashed(11), false, &[0]), Verdict::Other);
    }

    #[test]
    fn a_potential_deadlock_is_found_by_the_inversion_alone() {
        let e = expect("kind = \"potential-deadlock\"");
        assert_eq!(judged(Some(&e), &OK, true, &[0]), Verdict::Bug);
        assert_eq!(judged(Some(&e), &OK, false, &[0]), Verdict::Pass);
    }

    #[test]
    fn an_exit_code_harness_needs_that_code() {
        let e = expect("kind = \"exited\"\ncode = 101");
        assert_eq!(
            judged(Some(&e), &Outcome::Exited { code: 101 }, false, &[0]),
            Verdict::Bug
        );
        assert_eq!(
            judged(Some(&e), &Outcome::Exited { code: 1 }, false, &[0]),
            Verdict::Other
        );
    }

    #[test]
    fn a_hang_must_be_stopped_by_the_expected_budget() {
        let e = expect("kind = \"hung\"\nbudget = \"steps\"");
        let hung = |reason| Outcome::Hung {
            reason,
            thread: 1,
            rip: 0,
        };
        assert!(is_expected(&e, &hung(HungReason::MaxSteps), false));
        let stopped = Outcome::TimedOut { thread: 1, rip: 0 };
        assert!(!is_expected(&e, &stopped, false));
        let watchdog = expect("kind = \"hung\"\nbudget = \"watchdog\"");
        assert!(is_expected(&watchdog, &stopped, false));
        assert!(!is_expected(&watchdog, &hung(HungReason::MaxSteps), false));
    }

    #[test]
    fn any_failure_of_a_fixed_twin_is_one_and_a_clean_exit_is_not() {
        assert_eq!(judged(None, &OK, false, &[0]), Verdict::Pass);
        assert_eq!(judged(None, &OK, true, &[0]), Verdict::LockWarning);
        assert_eq!(judged(None, &deadlocked(), false, &[0]), Verdict::Other);
        let three = Outcome::Exited { code: 3 };
        assert_eq!(judged(None, &three, false, &[0]), Verdict::Other);
        assert_eq!(judged(None, &three, false, &[3]), Verdict::Pass);
    }
}
