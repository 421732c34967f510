//! Schedules: the decisions of a run, replayable exactly.
//!
//! A schedule lists only the steps where the choice differed from the
//! default policy (run the current thread until it blocks or yields), so a
//! schedule with no decisions is the default run and each decision is a
//! preemption or an unusual pick. It is small to store and easy to mutate.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{RunUntilBlocked, SchedView, Strategy};
use crate::code::{StepRules, SyncPoints};
use crate::ids::Tid;

/// Format version of schedule files (version 1, before sync sites, is
/// read as made with `--sync-points calls`; versions 1 and 2 replay under
/// the step rules they were made under, `StepRules::Format6`, versions 3
/// and 4 under `StepRules::Format7`, without ticks, version 5 under
/// `StepRules::Format9`; versions 1 to 3 with waiting polls taken up again
/// after any activity, as they were made).
pub const SCHEDULE_VERSION: u32 = 6;

/// The schedule version that records decisions made under `rules`, with
/// waiting polls taken up again after any activity or not: each step the
/// decisions name is numbered under both.
pub fn schedule_version_for(rules: StepRules, polls_retry_on_any_activity: bool) -> u32 {
    match (rules, polls_retry_on_any_activity) {
        (StepRules::Format6, _) => 2,
        (StepRules::Format7, true) => 3,
        (StepRules::Format7, false) => 4,
        // Ticks came after polls were taken up by their own objects.
        (StepRules::Format9, _) => 5,
        (StepRules::Format10, _) => SCHEDULE_VERSION,
    }
}

/// After step `step`, thread `thread` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Decision {
    pub step: u64,
    pub thread: u32,
}

/// The largest schedule file (or corpus entry) a reader accepts: a million
/// decisions take about 30 MiB of JSON, far more than any run makes.
pub const MAX_SCHEDULE_FILE: u64 = 16 << 20;

/// The decisions of a run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Schedule {
    pub version: u32,
    /// Where it came from, for people: "pct:2 seed 17".
    #[serde(default)]
    pub origin: String,
    /// Sorted by step, at most one per step.
    pub decisions: Vec<Decision>,
    /// How far scheduling points reached into user code: steps are
    /// numbered at this level, so a replay must use it.
    #[serde(default)]
    pub sync_points: SyncPoints,
}

/// Why a schedule could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    #[error("cannot read schedule {0}: {1}")]
    Read(String, std::io::Error),
    #[error("{0} is not a schedule file: {1}")]
    Parse(String, String),
    #[error(
        "schedule {0} has format version {1}; this rewind-fuzz reads versions 1 to {SCHEDULE_VERSION}"
    )]
    Version(String, u32),
    #[error("cannot write schedule {0}: {1}")]
    Write(String, std::io::Error),
}

impl Schedule {
    /// A schedule from decisions, sorted and with one decision per step.
    pub fn new(origin: impl Into<String>, mut decisions: Vec<Decision>) -> Self {
        decisions.sort();
        decisions.dedup_by_key(|d| d.step);
        Schedule {
            version: SCHEDULE_VERSION,
            origin: origin.into(),
            decisions,
            sync_points: SyncPoints::Calls,
        }
    }

    /// Reads a schedule file (JSON): a regular file of at most
    /// [`MAX_SCHEDULE_FILE`] bytes.
    pub fn load(path: &Path) -> Result<Schedule, ScheduleError> {
        let name = path.display().to_string();
        let text = crate::fsutil::read_foreign(path, MAX_SCHEDULE_FILE)
            .map_err(|e| ScheduleError::Read(name.clone(), e))?;
        Self::from_json(&name, &text)
    }

    /// Parses a schedule, checking its version and order.
    pub fn from_json(name: &str, text: &[u8]) -> Result<Schedule, ScheduleError> {
        let s: Schedule = serde_json::from_slice(text)
            .map_err(|e| ScheduleError::Parse(name.into(), e.to_string()))?;
        if !(1..=SCHEDULE_VERSION).contains(&s.version) {
            return Err(ScheduleError::Version(name.into(), s.version));
        }
        if s.decisions.windows(2).any(|w| w[0].step >= w[1].step) {
            return Err(ScheduleError::Parse(
                name.into(),
                "decisions are not in step order".into(),
            ));
        }
        Ok(s)
    }

    /// The step rules the schedule was made under (its decisions name steps
    /// numbered under them).
    pub fn step_rules(&self) -> StepRules {
        StepRules::of_schedule(self.version)
    }

    /// Whether its runs took waiting polls up again after any activity
    /// (versions 1 to 3), rather than when what they wait on changed.
    pub fn polls_retry_on_any_activity(&self) -> bool {
        self.version <= 3
    }

    /// Writes the schedule atomically for `readers`, with the failure it
    /// was saved for (a signature as JSON: its `kind`, `sites` and
    /// `naming`) beside its own fields: a run that records it can then
    /// say whether that failure happened again.
    pub fn save_for_failure(
        &self,
        path: &Path,
        readers: crate::fsutil::Readers,
        failure: serde_json::Value,
    ) -> Result<(), ScheduleError> {
        let name = path.display().to_string();
        let mut v = serde_json::to_value(self).expect("schedules serialize");
        v["failure"] = failure;
        let json = serde_json::to_vec_pretty(&v).expect("JSON serializes");
        crate::fsutil::write_atomically_as(path, &json, readers)
            .map_err(|e| ScheduleError::Write(name, e))
    }

    /// The failure a schedule file says it was saved for, if it says.
    pub fn saved_failure(text: &[u8]) -> Option<serde_json::Value> {
        let v: serde_json::Value = serde_json::from_slice(text).ok()?;
        v.get("failure").filter(|f| f.is_object()).cloned()
    }

    /// Writes the schedule atomically (a temporary file, then a rename).
    pub fn save(&self, path: &Path) -> Result<(), ScheduleError> {
        self.save_as(path, crate::fsutil::Readers::Everyone)
    }

    /// Writes the schedule atomically for `readers` (those of the
    /// reproducer it goes with).
    pub fn save_as(
        &self,
        path: &Path,
        readers: crate::fsutil::Readers,
    ) -> Result<(), ScheduleError> {
        let name = path.display().to_string();
        let json = serde_json::to_vec_pretty(self).expect("schedules serialize");
        crate::fsutil::write_atomically_as(path, &json, readers)
            .map_err(|e| ScheduleError::Write(name, e))
    }
}

/// Replays a schedule: its decisions where it has them, the default policy
/// everywhere else.
pub struct Replay {
    decisions: BTreeMap<u64, Tid>,
    /// The first step whose decision named a thread that could not run.
    pub diverged_at: Option<u64>,
}

impl Replay {
    pub fn new(s: Schedule) -> Self {
        Replay {
            decisions: s
                .decisions
                .iter()
                .map(|d| (d.step, Tid(d.thread)))
                .collect(),
            diverged_at: None,
        }
    }
}

impl Strategy for Replay {
    fn name(&self) -> String {
        "schedule".into()
    }

    fn pick(&mut self, v: &SchedView) -> Tid {
        match self.decisions.get(&v.step) {
            Some(t) if v.runnable.contains(t) => *t,
            Some(_) => {
                self.diverged_at.get_or_insert(v.step);
                RunUntilBlocked::choose(v)
            }
            None => RunUntilBlocked::choose(v),
        }
    }

    fn horizon(&mut self, v: &SchedView) -> u64 {
        self.decisions
            .range(v.step + 1..)
            .next()
            .map_or(u64::MAX, |(step, _)| *step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_round_trip_through_their_file_format() {
        let s = Schedule::new(
            "test",
            vec![
                Decision { step: 9, thread: 2 },
                Decision { step: 3, thread: 1 },
            ],
        );
        assert_eq!(s.decisions[0].step, 3);
        let json = serde_json::to_vec(&s).unwrap();
        assert_eq!(Schedule::from_json("x", &json).unwrap(), s);
    }

    #[test]
    fn a_future_version_or_disorder_is_refused() {
        let v9 = br#"{"version":9,"decisions":[]}"#;
        assert!(matches!(
            Schedule::from_json("x", v9),
            Err(ScheduleError::Version(_, 9))
        ));
        let v1 = br#"{"version":1,"decisions":[{"step":5,"thread":1}]}"#;
        assert_eq!(
            Schedule::from_json("x", v1).unwrap().sync_points,
            SyncPoints::Calls,
            "a schedule from before sync sites replays without them"
        );
        let disorder =
            br#"{"version":1,"decisions":[{"step":5,"thread":1},{"step":2,"thread":1}]}"#;
        assert!(Schedule::from_json("x", disorder).is_err());
        assert!(Schedule::from_json("x", b"garbage").is_err());
    }
}
