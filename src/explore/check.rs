//! A check: many schedules of one program, each judged, counted by how it
//! ended, and the first failure picked out. `rewind-fuzz check` is this
//! session with a progress bar, its files and its report around it.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use super::{probe, run_schedules, schedule_seed};
use crate::engine::{RunConfig, RunReport, VmError};
use crate::kernel::vfs::SharedSource;
use crate::observe::failure::table_row;
use crate::sched::{Decision, Prefixed, StrategySpec};

/// What a check runs.
#[derive(Clone, Debug)]
pub struct Plan {
    pub strategy: StrategySpec,
    pub schedules: u64,
    /// Machines running schedules at once (at most one per schedule).
    pub jobs: usize,
    pub seed: u64,
    /// Stop after this long: a schedule still running then is stopped and
    /// the results are those finished by then.
    pub time: Option<Duration>,
    /// Run each schedule from this point of a recorded run (a fork), not
    /// from the start.
    pub fork: Option<ForkPoint>,
}

/// A point of a recorded run that schedules start from.
#[derive(Clone, Debug)]
pub struct ForkPoint {
    /// The recorded run's decisions.
    pub decisions: Vec<Decision>,
    /// The last step taken as recorded.
    pub at: u64,
    /// The recorded run, for people (its file).
    pub from: String,
    /// Start the continuations from a snapshot at `at` (off only to
    /// measure what it saves).
    pub snapshot: bool,
}

/// Why a check gave no results.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("--schedules must be at least 1")]
    NoSchedules,
    #[error("check explores many schedules; to replay one use rewind-fuzz run --schedule FILE")]
    OneSchedule,
    /// The time ran out before the first schedule ended.
    #[error(
        "--time {} ended before the first schedule did (the program's runs are long): give more --time; nothing was written",
        humantime::format_duration(*.0)
    )]
    Outlasted(Duration),
    #[error("{0}")]
    Strategy(String),
    #[error(transparent)]
    Vm(#[from] VmError),
}

/// One schedule's run.
pub struct Trial {
    /// Which schedule of the check (its seed is `schedule_seed(seed, index)`).
    pub index: u64,
    pub report: RunReport,
}

impl Trial {
    /// The row it is counted under: its failure's class, or `exited(0)`.
    pub fn kind(&self) -> &'static str {
        table_row(self.report.failure.as_ref())
    }

    pub fn failed(&self) -> bool {
        self.report.failure.is_some()
    }
}

/// What the schedules cost, in the units that project to other hosts.
#[derive(Clone, Copy, Debug)]
pub struct RunCost {
    pub steps_per_schedule: f64,
    pub exits_per_step: f64,
    /// Wall time of the runs (restores included) over their exits.
    pub us_per_exit: f64,
}

/// A check's results.
pub struct Checked {
    /// The schedules that finished, in schedule order.
    pub trials: Vec<Trial>,
    pub jobs: usize,
    pub elapsed: Duration,
}

impl Checked {
    /// How many schedules ended each way, by [`Trial::kind`].
    pub fn counts(&self) -> BTreeMap<&'static str, u64> {
        let mut counts = BTreeMap::new();
        for t in &self.trials {
            *counts.entry(t.kind()).or_default() += 1;
        }
        counts
    }

    pub fn failures(&self) -> usize {
        self.trials.iter().filter(|t| t.failed()).count()
    }

    /// The failure to report: the first that failed outright, else the
    /// first lock-order warning.
    pub fn first_failure(&self) -> Option<&Trial> {
        let mut failed = self.trials.iter().filter(|t| t.failed());
        let first = failed.clone().next();
        failed.find(|t| t.kind() != "potential-deadlock").or(first)
    }

    pub fn execs_per_sec(&self) -> f64 {
        self.trials.len() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub fn cost(&self) -> RunCost {
        let sum =
            |f: fn(&RunReport) -> u64| self.trials.iter().map(|t| f(&t.report)).sum::<u64>() as f64;
        let (steps, exits, us) = (sum(|r| r.steps.0), sum(|r| r.exits), sum(|r| r.wall_us));
        RunCost {
            steps_per_schedule: steps / self.trials.len().max(1) as f64,
            exits_per_step: exits / steps.max(1.0),
            us_per_exit: us / exits.max(1.0),
        }
    }
}

/// Why the schedules stopped before they were all run.
enum Stopped {
    Strategy(String),
    Vm(VmError),
}

impl From<VmError> for Stopped {
    fn from(e: VmError) -> Self {
        Stopped::Vm(e)
    }
}

/// Runs the plan's schedules of the program `cfg` runs, telling `each`
/// of every trial as it ends (a progress bar).
pub fn check(
    cfg: &RunConfig,
    source: &SharedSource,
    plan: &Plan,
    mut each: impl FnMut(&Trial),
) -> Result<Checked, CheckError> {
    if plan.schedules == 0 {
        return Err(CheckError::NoSchedules);
    }
    if matches!(plan.strategy, StrategySpec::Schedule(_)) {
        return Err(CheckError::OneSchedule);
    }
    let start = Instant::now();
    let deadline = plan.time.map(|t| start + t);
    // The runs stop at the deadline, the first one (PCT's estimate of the
    // steps) too: a schedule that outlasts it is not counted.
    let mut timed = cfg.clone();
    if let Some(d) = deadline {
        timed.cancel = timed.cancel.clone().with_deadline(d);
    }
    let time_up = |e: &VmError| {
        matches!(e, VmError::Cancelled) && deadline.is_some_and(|d| Instant::now() >= d)
    };
    let outlasted = || CheckError::Outlasted(plan.time.unwrap_or_default());
    let steps = if plan.strategy.needs_step_estimate() {
        match probe(&timed, source.clone()) {
            Ok(p) => p.decision_points,
            Err(e) if time_up(&e) => return Err(outlasted()),
            Err(e) => return Err(e.into()),
        }
    } else {
        0
    };
    // Every continuation of a fork runs the same prefix: they start from
    // a snapshot at its end (the probe's default run has another prefix).
    timed.fork_snapshot = plan.fork.as_ref().filter(|f| f.snapshot).map(|f| f.at);
    let jobs = plan.jobs.clamp(1, plan.schedules as usize);
    let mut trials: Vec<Trial> = Vec::with_capacity(plan.schedules as usize);
    let spec = &plan.strategy;
    let ran = run_schedules(
        &timed,
        source,
        jobs,
        plan.schedules,
        plan.seed,
        |seed| {
            let tail = spec
                .build(seed, steps)
                .map_err(|e| Stopped::Strategy(e.to_string()))?;
            Ok(match &plan.fork {
                Some(f) => Box::new(Prefixed::until(&f.decisions, f.at, tail)),
                None => tail,
            })
        },
        |index, mut report| {
            let seed = schedule_seed(plan.seed, index);
            report.schedule.origin = match &plan.fork {
                Some(f) => format!(
                    "a fork of {} at step {}, then {spec} seed {seed}",
                    f.from, f.at
                ),
                None => format!("{spec} seed {seed}"),
            };
            let t = Trial { index, report };
            each(&t);
            trials.push(t);
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        },
    );
    match ran {
        Ok(()) => {}
        // The schedules finished by then are the results.
        Err(Stopped::Vm(e)) if time_up(&e) => {}
        Err(Stopped::Vm(e)) => return Err(e.into()),
        Err(Stopped::Strategy(e)) => return Err(CheckError::Strategy(e)),
    }
    if trials.is_empty() {
        return Err(outlasted());
    }
    trials.sort_by_key(|t| t.index);
    Ok(Checked {
        trials,
        jobs,
        elapsed: start.elapsed(),
    })
}
