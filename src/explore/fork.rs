//! A fork of a recorded run: its state at one step (the recorded prefix
//! replayed), then many schedules from there. It answers "from here, does
//! the failure always happen, sometimes, or never?".

use crate::sched::Schedule;

/// Where a fork starts, as the command line names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum At {
    /// After this step.
    Step(u64),
    /// After the run's last step.
    End,
    /// Just before the recorded run's N-th decision (1-based): the
    /// continuations make that decision their own way.
    Decision(usize),
}

impl std::str::FromStr for At {
    type Err = String;

    fn from_str(s: &str) -> Result<At, String> {
        let bad = || format!("--at {s:?}: write a step number, `end` or decision:N (N from 1)");
        if s == "end" {
            return Ok(At::End);
        }
        if let Some(n) = s.strip_prefix("decision:") {
            return match n.parse::<usize>() {
                Ok(n) if n >= 1 => Ok(At::Decision(n)),
                _ => Err(bad()),
            };
        }
        s.parse().map(At::Step).map_err(|_| bad())
    }
}

/// Why a fork point is not in the run.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AtError {
    #[error(
        "--at {at}: the run has {steps} steps; give a step up to {steps}, `end`, or decision:N"
    )]
    PastTheEnd { at: u64, steps: u64 },
    #[error(
        "--at decision:{at}: the run has {decisions} decision(s){}",
        if *.decisions == 0 { "; give a step number or `end`" } else { "" }
    )]
    NoSuchDecision { at: usize, decisions: usize },
}

impl At {
    /// The last step the fork takes as recorded, in a run of `steps`
    /// steps that made `recorded`'s decisions.
    pub fn step(self, recorded: &Schedule, steps: u64) -> Result<u64, AtError> {
        match self {
            At::End => Ok(steps),
            At::Step(at) if at > steps => Err(AtError::PastTheEnd { at, steps }),
            At::Step(at) => Ok(at),
            At::Decision(n) => recorded
                .decisions
                .get(n - 1)
                .map(|d| d.step.saturating_sub(1))
                .ok_or(AtError::NoSuchDecision {
                    at: n,
                    decisions: recorded.decisions.len(),
                }),
        }
    }
}

/// How often the recorded failure came back among the continuations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Always,
    Sometimes,
    Never,
}

impl Verdict {
    /// `hits` of `of` continuations ended as the recorded run did.
    pub fn of(hits: u64, of: u64) -> Verdict {
        match hits {
            0 => Verdict::Never,
            n if n == of => Verdict::Always,
            _ => Verdict::Sometimes,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Always => "always",
            Verdict::Sometimes => "sometimes",
            Verdict::Never => "never",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::Decision;

    fn recorded() -> Schedule {
        let d = |step, thread| Decision { step, thread };
        Schedule::new("test", vec![d(10, 2), d(25, 3)])
    }

    #[test]
    fn fork_points_read_as_written_and_fall_in_the_run() {
        assert_eq!("end".parse(), Ok(At::End));
        assert_eq!("120".parse(), Ok(At::Step(120)));
        assert_eq!("decision:2".parse(), Ok(At::Decision(2)));
        for bad in ["decision:0", "decision:x", "-3", "later"] {
            assert!(bad.parse::<At>().unwrap_err().contains("--at"), "{bad}");
        }
        let r = recorded();
        assert_eq!(At::End.step(&r, 40), Ok(40));
        assert_eq!(At::Step(7).step(&r, 40), Ok(7));
        // Just before the decision: the continuations make it.
        assert_eq!(At::Decision(2).step(&r, 40), Ok(24));
        assert_eq!(
            At::Step(41).step(&r, 40),
            Err(AtError::PastTheEnd { at: 41, steps: 40 })
        );
        assert!(matches!(
            At::Decision(3).step(&r, 40),
            Err(AtError::NoSuchDecision { .. })
        ));
    }

    #[test]
    fn the_verdict_counts_the_recorded_failure() {
        assert_eq!(Verdict::of(0, 10), Verdict::Never);
        assert_eq!(Verdict::of(3, 10), Verdict::Sometimes);
        assert_eq!(Verdict::of(10, 10), Verdict::Always);
    }
}
