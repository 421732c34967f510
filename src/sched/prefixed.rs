//! A schedule followed by a strategy: the fuzzer's input.
//!
//! The decisions are replayed as given up to the last of them; after that
//! the tail strategy decides. With the default strategy as the tail this is
//! [`Replay`] (and time slices after the last decision); with a random, PCT or POS tail it explores from the
//! point where the prefix ends.

use super::{Decision, Replay, SchedView, Schedule, Strategy, TimeSliced};
use crate::ids::Tid;

pub struct Prefixed {
    replay: Replay,
    /// The step of the last decision of the prefix (0 when it is empty).
    last: u64,
    tail: Box<dyn Strategy>,
}

impl Prefixed {
    /// The run `decisions` make up to step `until` (their decision points
    /// the recorded run's, the others the default's), then `tail`: a fork
    /// of a recorded run at that step.
    pub fn until(decisions: &[Decision], until: u64, tail: Box<dyn Strategy>) -> Self {
        let kept: Vec<Decision> = decisions
            .iter()
            .filter(|d| d.step <= until)
            .copied()
            .collect();
        Prefixed {
            replay: Replay::new(Schedule::new("prefix", kept)),
            last: until,
            tail,
        }
    }

    pub fn new(decisions: &[Decision], tail: Box<dyn Strategy>) -> Self {
        let last = decisions.iter().map(|d| d.step).max().unwrap_or(0);
        Prefixed {
            replay: Replay::new(Schedule::new("prefix", decisions.to_vec())),
            last,
            tail,
        }
    }
}

impl Strategy for Prefixed {
    fn name(&self) -> String {
        format!("prefix+{}", self.tail.name())
    }

    fn pick(&mut self, v: &SchedView) -> Tid {
        if v.step <= self.last {
            self.replay.pick(v)
        } else {
            self.tail.pick(v)
        }
    }

    fn horizon(&mut self, v: &SchedView) -> u64 {
        // At the prefix's last step too: the tail is asked of nothing
        // before its first pick, so a run restored from a snapshot taken
        // there (a fork's) has a tail in the state a run from the start
        // has; and the step after the prefix leaves the guest, where the
        // snapshot can be.
        if v.step <= self.last {
            self.replay.horizon(v).min(self.last + 1)
        } else {
            self.tail.horizon(v)
        }
    }
}

/// The default strategy, as a boxed tail.
pub fn default_tail() -> Box<dyn Strategy> {
    Box::new(TimeSliced::default())
}
