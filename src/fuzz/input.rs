//! The fuzzer's input: a schedule prefix and the strategy that continues it.

use std::hash::Hash;
use std::path::Path;

use libafl::inputs::Input;
use serde::{Deserialize, Serialize};

use crate::sched::{Decision, Prefixed, Seeded, Strategy};

/// Most decisions an input may carry (a foreign file with more is refused).
pub const MAX_DECISIONS: usize = 4096;

/// What decides after the prefix: a strategy with its seed.
pub type Tail = Seeded;

/// A run's schedule as the fuzzer mutates it: decisions replayed as given,
/// then a tail strategy. The same input always gives the same run.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ScheduleInput {
    /// Fingerprint of the target this schedule was found for (its path and
    /// contents); 0 when unknown.
    #[serde(default)]
    pub target: u64,
    pub decisions: Vec<Decision>,
    pub tail: Tail,
}

impl ScheduleInput {
    /// An input that is only a strategy.
    pub fn fresh(target: u64, tail: Tail) -> Self {
        ScheduleInput {
            target,
            decisions: Vec::new(),
            tail,
        }
    }

    /// Sorts the decisions and keeps one per step, as replay expects.
    pub fn normalize(&mut self) {
        self.decisions.sort();
        self.decisions.dedup_by_key(|d| d.step);
        self.decisions.truncate(MAX_DECISIONS);
    }

    /// The strategy that plays this input. `steps` estimates a run's
    /// decision points (for PCT tails).
    pub fn strategy(&self, steps: u64) -> Box<dyn Strategy> {
        Box::new(Prefixed::new(&self.decisions, self.tail.build(steps)))
    }

    /// Parses and checks an input file (JSON), which may come from another
    /// machine: it must be well formed and, when both say, for this target.
    pub fn parse(bytes: &[u8], target: u64) -> Result<ScheduleInput, InputError> {
        let mut i: ScheduleInput = serde_json::from_slice(bytes)?;
        if i.decisions.len() > MAX_DECISIONS {
            return Err(InputError::TooManyDecisions(i.decisions.len()));
        }
        if i.target != 0 && target != 0 && i.target != target {
            return Err(InputError::OtherTarget {
                theirs: i.target,
                ours: target,
            });
        }
        if let Some(depth) = i.tail.kind.parameter() {
            if depth == 0 || depth > 64 {
                return Err(InputError::Depth(depth));
            }
        }
        i.normalize();
        Ok(i)
    }
}

/// Why an input file was refused.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("not a schedule: {0}")]
    NotASchedule(#[from] serde_json::Error),
    #[error("{0} decisions (at most {MAX_DECISIONS})")]
    TooManyDecisions(usize),
    #[error("made for another target (fingerprint {theirs:016x}, this one is {ours:016x})")]
    OtherTarget { theirs: u64, ours: u64 },
    #[error("PCT depth {0} (1 to 64)")]
    Depth(u32),
}

impl Input for ScheduleInput {
    fn to_file<P: AsRef<Path>>(&self, path: P) -> Result<(), libafl::Error> {
        let json =
            serde_json::to_vec_pretty(self).map_err(|e| libafl::Error::serialize(e.to_string()))?;
        crate::fsutil::write_atomically(path.as_ref(), &json)?;
        Ok(())
    }

    fn from_file<P: AsRef<Path>>(path: P) -> Result<Self, libafl::Error> {
        let bytes = crate::fsutil::read_foreign(path.as_ref(), crate::sched::MAX_SCHEDULE_FILE)?;
        ScheduleInput::parse(&bytes, 0).map_err(|e| libafl::Error::illegal_argument(e.to_string()))
    }

    fn generate_name(&self, _id: Option<libafl::corpus::CorpusId>) -> String {
        format!("{:016x}.json", fingerprint(self))
    }
}

/// A stable 64-bit name for an input (the same on every machine).
pub fn fingerprint(i: &ScheduleInput) -> u64 {
    xxhash_rust::xxh3::xxh3_64(&serde_json::to_vec(i).expect("inputs serialize"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::StrategyKind;

    #[test]
    fn inputs_round_trip_and_refuse_other_targets() {
        let i = ScheduleInput {
            target: 7,
            decisions: vec![Decision { step: 5, thread: 2 }],
            tail: Tail::new(StrategyKind::pct(2), 9),
        };
        let json = serde_json::to_vec(&i).unwrap();
        assert_eq!(ScheduleInput::parse(&json, 7).unwrap(), i);
        assert!(matches!(
            ScheduleInput::parse(&json, 8),
            Err(InputError::OtherTarget { theirs: 7, ours: 8 })
        ));
        assert!(ScheduleInput::parse(b"{}", 7).is_err());
        assert!(ScheduleInput::parse(b"\xff\x00", 7).is_err());
    }

    #[test]
    fn names_depend_only_on_the_input() {
        let a = ScheduleInput::fresh(1, Tail::new(StrategyKind::Random, 3));
        assert_eq!(a.generate_name(None), a.clone().generate_name(None));
        assert_ne!(
            a.generate_name(None),
            ScheduleInput::fresh(1, Tail::new(StrategyKind::Random, 4)).generate_name(None)
        );
    }
}
