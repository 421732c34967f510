//! What a bench runs, from what was asked of it: the strategies as
//! columns, the programs chosen (from the bundled bug suite or a suite
//! directory) and the budgets with their defaults, `quick` giving the
//! smaller ones CI runs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::column::parse_columns;
use super::runner::BenchConfig;
use crate::code::SyncPoints;
use crate::harness::{self, Harness, HarnessError};

/// What a bench is asked to do; what is left `None` takes its default.
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// Strategies, comma-separated within an item, each maybe
    /// `STRATEGY@LEVEL`.
    pub strategies: Vec<String>,
    /// The levels of sync points every strategy runs at.
    pub levels: Vec<SyncPoints>,
    /// Programs by name, comma-separated within an item; none: all of the
    /// suite's.
    pub harnesses: Vec<String>,
    /// A directory of programs instead of the bundled bug suite.
    pub suite: Option<PathBuf>,
    /// Schedules per trial.
    pub budget: Option<u64>,
    /// Wall time per trial.
    pub trial_time: Option<Duration>,
    /// Trials per strategy and program.
    pub seeds: Option<u64>,
    /// Schedules each fixed twin runs per strategy.
    pub fixed_budget: Option<u64>,
    pub jobs: Option<usize>,
    /// The smaller bench: budget 100, 3 seeds, native loops of 5 s at most.
    pub quick: bool,
    /// Whether the native stress loop runs.
    pub native: bool,
    /// The longest native loop per program.
    pub native_cap: Option<Duration>,
    /// The command line, for the report.
    pub command: String,
}

/// Why a bench cannot be planned: all of it the asker's to change.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("{0}")]
    Columns(String),
    #[error(transparent)]
    Harness(Box<HarnessError>),
    #[error(
        "--suite {} is not a directory; give a directory with one subdirectory per program, each holding a harness.toml",
        .0.display()
    )]
    SuiteNotADirectory(PathBuf),
    #[error(
        "--suite {} holds no program: each needs a subdirectory with a harness.toml (docs/suites.md)",
        .0.display()
    )]
    EmptySuite(PathBuf),
    #[error("--suite {} has no program named {name}", .dir.display())]
    NotInSuite { dir: PathBuf, name: String },
    #[error(
        "harness {0} is an engine program without a bug or a fixed twin; bench the bug suite (harnesses/README.md lists it)"
    )]
    NoBug(String),
    #[error("harness {0} is listed twice")]
    ListedTwice(String),
    #[error("--trial-time must be positive (e.g. 60s, 5m)")]
    NoTrialTime,
    #[error("--budget must be at least 1 schedule")]
    NoBudget,
    #[error("--seeds must be at least 1")]
    NoSeeds,
    #[error("--jobs must be at least 1")]
    NoJobs,
}

impl From<HarnessError> for PlanError {
    fn from(e: HarnessError) -> Self {
        PlanError::Harness(Box::new(e))
    }
}

impl Request {
    /// The bench to run: what was asked, checked, with the defaults filled in.
    pub fn plan(&self) -> Result<BenchConfig, PlanError> {
        let columns = parse_columns(&self.strategies, &self.levels).map_err(PlanError::Columns)?;
        let harnesses = match &self.suite {
            Some(dir) => select_in_suite(dir, &self.harnesses)?,
            None => select(&self.harnesses)?,
        };
        let budgets = self.budgets()?;
        let cap = self
            .native_cap
            .unwrap_or(Duration::from_secs(if self.quick { 5 } else { 60 }));
        Ok(BenchConfig {
            columns,
            harnesses,
            budget: budgets.trial,
            trial_time: self.trial_time,
            seeds: budgets.seeds,
            fixed_budget: budgets.fixed,
            jobs: self
                .jobs
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
            native_cap: self.native.then_some(cap),
            native_floor: Duration::from_secs(1).min(cap),
            command: self.command.clone(),
        })
    }

    /// The schedules and seeds asked for, or their defaults; refused, as
    /// are no jobs, when they leave nothing to run.
    fn budgets(&self) -> Result<Budgets, PlanError> {
        let default_budget = if self.quick { 100 } else { 1000 };
        let trial = match (self.budget, self.trial_time) {
            (Some(b), _) => b,
            (None, Some(_)) => u64::MAX,
            (None, None) => default_budget,
        };
        if self.trial_time.is_some_and(|t| t.is_zero()) {
            return Err(PlanError::NoTrialTime);
        }
        let seeds = self.seeds.unwrap_or(if self.quick { 3 } else { 5 });
        if trial == 0 {
            return Err(PlanError::NoBudget);
        }
        if seeds == 0 {
            return Err(PlanError::NoSeeds);
        }
        if self.jobs == Some(0) {
            return Err(PlanError::NoJobs);
        }
        // Time-boxed trials without a budget leave the twins the default one.
        let fixed = match (self.fixed_budget, self.trial_time, self.budget) {
            (Some(f), _, _) => f,
            (None, Some(_), None) => default_budget,
            (None, _, _) => trial,
        };
        Ok(Budgets {
            trial,
            seeds,
            fixed,
        })
    }
}

/// Schedules per trial, trials per strategy and program, and schedules
/// per fixed twin and strategy.
struct Budgets {
    trial: u64,
    seeds: u64,
    fixed: u64,
}

/// Names given as items that may each hold several, comma-separated.
fn names(items: &[String]) -> Vec<&str> {
    items
        .iter()
        .flat_map(|n| n.split(','))
        .map(str::trim)
        .collect()
}

/// The programs of suite directory `dir`, or those of them named.
pub fn select_in_suite(dir: &Path, items: &[String]) -> Result<Vec<Harness>, PlanError> {
    if !dir.is_dir() {
        return Err(PlanError::SuiteNotADirectory(dir.to_path_buf()));
    }
    let all = harness::list_in(dir)?;
    if all.is_empty() {
        return Err(PlanError::EmptySuite(dir.to_path_buf()));
    }
    let names = names(items);
    if let Some(missing) = names.iter().find(|n| !all.iter().any(|h| h.name == **n)) {
        return Err(PlanError::NotInSuite {
            dir: dir.to_path_buf(),
            name: missing.to_string(),
        });
    }
    Ok(all
        .into_iter()
        .filter(|h| names.is_empty() || names.contains(&h.name.as_str()))
        .collect())
}

/// The bug-suite harnesses named, or all of them.
pub fn select(items: &[String]) -> Result<Vec<Harness>, PlanError> {
    let names = names(items);
    if names.is_empty() {
        return Ok(harness::list()?
            .into_iter()
            .filter(|h| h.is_bug())
            .collect());
    }
    let mut out: Vec<Harness> = Vec::new();
    for name in names {
        let h = harness::find(name)?;
        if !h.is_bug() {
            return Err(PlanError::NoBug(name.to_string()));
        }
        if out.iter().any(|o| o.name == h.name) {
            return Err(PlanError::ListedTwice(name.to_string()));
        }
        out.push(h);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> Request {
        Request {
            strategies: vec!["random".into()],
            harnesses: vec!["abba".into()],
            native: true,
            ..Request::default()
        }
    }

    #[test]
    fn defaults_follow_quick_and_trial_time() {
        let full = request().plan().unwrap();
        assert_eq!(
            (full.budget, full.seeds, full.fixed_budget),
            (1000, 5, 1000)
        );
        assert_eq!(full.native_cap, Some(Duration::from_secs(60)));
        let quick = Request {
            quick: true,
            ..request()
        }
        .plan()
        .unwrap();
        assert_eq!(
            (quick.budget, quick.seeds, quick.fixed_budget),
            (100, 3, 100)
        );
        assert_eq!(quick.native_cap, Some(Duration::from_secs(5)));
        let timed = Request {
            trial_time: Some(Duration::from_secs(60)),
            native: false,
            ..request()
        }
        .plan()
        .unwrap();
        assert_eq!((timed.budget, timed.fixed_budget), (u64::MAX, 1000));
        assert_eq!(timed.native_cap, None);
    }

    #[test]
    fn nothing_to_run_is_refused() {
        let refused = |r: Request| r.plan().unwrap_err().to_string();
        assert_eq!(
            refused(Request {
                budget: Some(0),
                ..request()
            }),
            "--budget must be at least 1 schedule"
        );
        assert_eq!(
            refused(Request {
                seeds: Some(0),
                ..request()
            }),
            "--seeds must be at least 1"
        );
        assert_eq!(
            refused(Request {
                jobs: Some(0),
                ..request()
            }),
            "--jobs must be at least 1"
        );
        assert_eq!(
            refused(Request {
                harnesses: vec!["abba,abba".into()],
                ..request()
            }),
            "harness abba is listed twice"
        );
    }
}
