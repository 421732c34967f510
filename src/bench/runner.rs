//! Runs a bench: every strategy on every buggy harness from every seed,
//! every strategy on every fixed twin, then the native loop.
//!
//! A trial runs its schedules one after another on one job, schedule `i`
//! from `schedule_seed(seed, i)`, so its result depends on nothing but the
//! seed: not on the number of jobs nor on which machine ran it. Trials are
//! shared out among the jobs, the costliest first; machines are kept in a
//! pool so that a trial usually restores a snapshot instead of loading its
//! program again.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::ProgressBar;

use super::column::{Column, Search};
use super::expect::{self, Verdict};
use super::native;
use super::results::{BenchReport, FixedTrial, NativeLoop, Trial, Unrunnable};
use crate::code::SyncPoints;
use crate::engine::{RunConfig, RunReport, VmError};
use crate::explore::{self, Runner, map_parallel};
use crate::harness::{self, Expect, Harness, HarnessError, Variant};
use crate::kernel::KernelConfig;
use crate::kernel::vfs::FileSource;
use crate::observe::failure::table_row;
use crate::observe::outcome::Outcome;
use crate::sched::{ScheduleError, StrategyKind};

/// What to bench.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    pub columns: Vec<Column>,
    /// Bug-suite harnesses (each with a fixed twin).
    pub harnesses: Vec<Harness>,
    /// Schedules per trial before giving up.
    pub budget: u64,
    /// Wall time per trial before giving up (`--trial-time`), besides the
    /// schedule budget.
    pub trial_time: Option<Duration>,
    /// Trials per strategy and buggy harness: seeds `0..seeds`.
    pub seeds: u64,
    /// Schedules each fixed twin runs per strategy (they never stop early,
    /// so they cost the most); 0 skips the twins.
    pub fixed_budget: u64,
    pub jobs: usize,
    /// The longest native loop per harness; `None` runs none.
    pub native_cap: Option<Duration>,
    /// The shortest native loop per harness, so that a bug the machine
    /// finds in milliseconds still meets a loop of some hundreds of runs.
    pub native_floor: Duration,
    /// The command line, for the report.
    pub command: String,
}

/// Why a bench could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Harness(#[from] HarnessError),
    #[error(transparent)]
    Vm(#[from] VmError),
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    #[error("fuzzing: {0}")]
    Fuzz(String),
    /// The program's default run ends in a way that says it cannot run
    /// here (a system call the machine lacks).
    #[error("{0}")]
    Unrunnable(String),
    #[error("running {harness} natively: {source}")]
    Native {
        harness: String,
        source: std::io::Error,
    },
}

/// One build of a harness at one level of sync points, ready to run.
struct Target {
    /// The harness's name (buggy and twin alike).
    harness: String,
    variant: Variant,
    level: SyncPoints,
    /// The level the harness's bug needs.
    needs: SyncPoints,
    exe: PathBuf,
    cfg: RunConfig,
    /// The buggy build's `[expect]`; `None` for the twin.
    expect: Option<Expect>,
    /// Decision points of a default run (PCT spreads its change points over
    /// them) and its steps (a measure of cost).
    decision_points: u64,
    steps: u64,
}

/// One unit of work: a column on a target from a seed.
#[derive(Clone, Copy, Debug)]
struct Work {
    column: usize,
    target: usize,
    seed: u64,
    limit: u64,
}

/// What a run of schedules saw.
struct Tally {
    schedules: u64,
    first_bug: Option<u64>,
    unexpected: u64,
    failures: u64,
    first_failure: Option<(u64, &'static str)>,
    wall_s: f64,
}

/// Idle machines by target, so that trials restore instead of reloading.
struct Pool {
    idle: Mutex<Vec<(usize, Runner)>>,
    cap: usize,
}

impl Pool {
    fn take(&self, target: usize) -> Option<Runner> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let i = idle.iter().rposition(|(t, _)| *t == target)?;
        Some(idle.remove(i).1)
    }

    fn put(&self, target: usize, runner: Runner) {
        if !runner.is_warm() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        idle.push((target, runner));
        if idle.len() > self.cap {
            idle.remove(0);
        }
    }
}

/// The machine configuration for a harness build at `level`.
fn run_config(
    exe: &std::path::Path,
    h: &Harness,
    level: SyncPoints,
) -> Result<RunConfig, HarnessError> {
    let exe = exe.canonicalize().unwrap_or_else(|_| exe.to_path_buf());
    let mut k = KernelConfig::new(&exe.to_string_lossy(), &h.manifest.args);
    k.sync_points = level;
    if let Some(max) = h.manifest.max_steps {
        k.max_steps = max;
    }
    let mut cfg = RunConfig::new(k);
    cfg.memory_mib = 256;
    cfg.oracle = h.oracle()?;
    cfg.ok_codes = h.manifest.ok_codes.clone();
    Ok(cfg)
}

/// Builds a harness variant and runs it once with the default strategy at
/// `level`; the machine goes to the pool.
fn prepare(
    h: &Harness,
    variant: Variant,
    level: SyncPoints,
) -> Result<(Target, Runner), BenchError> {
    let exe = harness::build(h, variant)?;
    let cfg = run_config(&exe, h, level)?;
    let explore::Probe {
        report: probe,
        runner,
        decision_points,
    } = explore::probe(&cfg, FileSource::host())?;
    let expected_unsupported =
        variant == Variant::Buggy && h.manifest.expect.kind == harness::ExpectKind::Unsupported;
    if matches!(probe.outcome, Outcome::Unsupported { .. }) && !expected_unsupported {
        return Err(BenchError::Unrunnable(probe.outcome.summary()));
    }
    let target = Target {
        harness: h.name.clone(),
        variant,
        level,
        needs: h.manifest.expect.sync_points,
        exe,
        cfg,
        expect: (variant == Variant::Buggy).then(|| h.manifest.expect.clone()),
        decision_points,
        steps: probe.steps.0.max(1),
    };
    Ok((target, runner))
}

/// Runs up to `limit` schedules of `t` with `spec` from `seed`; a buggy
/// target stops at its bug.
fn run_schedules(
    pool: &Pool,
    ti: usize,
    t: &Target,
    kind: StrategyKind,
    seed: u64,
    (limit, time): (u64, Option<Duration>),
) -> Result<Tally, BenchError> {
    let start = Instant::now();
    let mut runner = pool
        .take(ti)
        .unwrap_or_else(|| Runner::new(t.cfg.clone(), FileSource::host()));
    let mut o = Tally {
        schedules: 0,
        first_bug: None,
        unexpected: 0,
        failures: 0,
        first_failure: None,
        wall_s: 0.0,
    };
    for i in 0..limit {
        if time.is_some_and(|t| start.elapsed() >= t) {
            break;
        }
        let strategy = kind.build(explore::schedule_seed(seed, i), t.decision_points);
        let r = runner.run(strategy)?;
        o.schedules += 1;
        let inversions = !r.potential_deadlocks.is_empty();
        let v = expect::verdict(
            t.expect.as_ref(),
            &r.outcome,
            inversions,
            r.failure.as_ref(),
        );
        let failed = match (&t.expect, v) {
            (_, Verdict::Pass) | (Some(_), Verdict::LockWarning) => false,
            (Some(_), Verdict::Other) => {
                o.unexpected += 1;
                false
            }
            _ => true,
        };
        if failed {
            o.failures += 1;
            o.first_failure
                .get_or_insert((i + 1, table_row(r.failure.as_ref())));
        }
        if v == Verdict::Bug {
            o.first_bug = Some(i + 1);
            break;
        }
    }
    pool.put(ti, runner);
    o.wall_s = start.elapsed().as_secs_f64();
    Ok(o)
}

/// Starts a phase of `len` steps on the progress bar.
fn phase(bar: &ProgressBar, len: usize, what: &'static str) {
    bar.set_position(0);
    bar.set_length(len as u64);
    bar.set_message(what);
}

/// Runs one trial of a column: each kind of column is one arm.
fn run_trial(
    pool: &Pool,
    ti: usize,
    t: &Target,
    column: &Column,
    seed: u64,
    bounds: (u64, Option<Duration>),
) -> Result<Tally, BenchError> {
    match &column.search {
        Search::Strategy(kind) => run_schedules(pool, ti, t, *kind, seed, bounds),
        Search::Fuzz { .. } => fuzz_until_bug(t, column, seed, bounds),
    }
}

/// Runs a one-job fuzzing session of `t` until its bug (for a fixed twin:
/// any failure) or `limit` executions; the session's own machine restores
/// its own snapshot, so the pool stays out of it.
fn fuzz_until_bug(
    t: &Target,
    column: &Column,
    seed: u64,
    (limit, time): (u64, Option<Duration>),
) -> Result<Tally, BenchError> {
    let start = Instant::now();
    let mix = column.strategy_mix().expect("a fuzz column parsed its mix");
    let want = t.expect.clone();
    let accept: Arc<dyn Fn(&RunReport) -> bool + Send + Sync> = Arc::new(move |r| {
        let inversions = !r.potential_deadlocks.is_empty();
        let v = expect::verdict(want.as_ref(), &r.outcome, inversions, r.failure.as_ref());
        match want {
            Some(_) => v == Verdict::Bug,
            None => v != Verdict::Pass,
        }
    });
    let hit = crate::fuzz::schedules_to_bug(t.cfg.clone(), seed, mix, (limit, time), accept)
        .map_err(|e| BenchError::Fuzz(e.to_string()))?;
    let buggy = t.expect.is_some();
    Ok(Tally {
        schedules: hit.unwrap_or(limit),
        first_bug: hit.filter(|_| buggy),
        unexpected: 0,
        failures: u64::from(hit.is_some() && !buggy),
        first_failure: hit.filter(|_| !buggy).map(|n| (n, "failure")),
        wall_s: start.elapsed().as_secs_f64(),
    })
}

/// Runs the bench. `bar` shows progress (hide it when nobody watches).
pub fn run(cfg: &BenchConfig, bar: &ProgressBar) -> Result<BenchReport, BenchError> {
    let start = Instant::now();
    let jobs = cfg.jobs.max(1);
    // Every build at every level a column runs its harness at.
    let builds: Vec<(&Harness, Variant, SyncPoints)> = cfg
        .harnesses
        .iter()
        .flat_map(|h| h.variants().into_iter().map(move |v| (h, v)))
        .filter(|(_, v)| *v == Variant::Buggy || cfg.fixed_budget > 0)
        .flat_map(|(h, v)| {
            let mut levels: Vec<SyncPoints> = cfg
                .columns
                .iter()
                .map(|c| c.level_for(h.manifest.expect.sync_points))
                .collect();
            levels.sort();
            levels.dedup();
            levels.into_iter().map(move |l| (h, v, l))
        })
        .collect();
    let columns: Vec<usize> = (0..cfg.columns.len()).collect();

    // Build and probe every target; the probes' machines start the pool.
    phase(bar, builds.len(), "builds probed");
    let pool = Pool {
        idle: Mutex::new(Vec::new()),
        cap: 4 * jobs + builds.len(),
    };
    // A program that cannot be built or run is reported and left out.
    let prepared = map_parallel(
        builds.len(),
        jobs,
        |i| -> Result<Result<Target, String>, BenchError> {
            let (h, v, level) = builds[i];
            let r = match prepare(h, v, level) {
                Ok((t, runner)) => {
                    pool.put(i, runner);
                    Ok(t)
                }
                Err(BenchError::Harness(e)) => Err(e.to_string()),
                Err(BenchError::Vm(e)) => Err(e.to_string()),
                Err(BenchError::Unrunnable(why)) => Err(why),
                Err(e) => return Err(e),
            };
            bar.inc(1);
            Ok(r)
        },
    )?;
    let mut unrunnable: Vec<Unrunnable> = Vec::new();
    let targets: Vec<Option<Target>> = prepared
        .into_iter()
        .zip(&builds)
        .map(|(r, (h, v, _))| match r {
            Ok(t) => Some(t),
            Err(reason) => {
                let known = unrunnable
                    .iter()
                    .any(|u| u.harness == h.name && u.variant == v.name());
                if !known {
                    unrunnable.push(Unrunnable {
                        harness: h.name.clone(),
                        variant: v.name().to_string(),
                        reason: first_lines(&reason),
                    });
                }
                None
            }
        })
        .collect();

    // Every available column on every buggy target from every seed, and on
    // every twin once; the costliest first.
    let mut work: Vec<Work> = Vec::new();
    for &column in &columns {
        for (ti, t) in targets.iter().enumerate() {
            let Some(t) = t else { continue };
            if t.level != cfg.columns[column].level_for(t.needs) {
                continue;
            }
            let (seeds, budget) = match t.expect {
                Some(_) => (cfg.seeds, cfg.budget),
                None => (u64::from(cfg.fixed_budget > 0), cfg.fixed_budget),
            };
            let limit = cfg.columns[column].schedules_per_trial(budget);
            for seed in 0..seeds {
                work.push(Work {
                    column,
                    target: ti,
                    seed,
                    limit,
                });
            }
        }
    }
    let target = |i: usize| targets[i].as_ref().expect("work only for prepared targets");
    work.sort_by_key(|w| std::cmp::Reverse(target(w.target).steps.saturating_mul(w.limit)));
    phase(bar, work.len(), "trials");
    let outcomes = map_parallel(work.len(), jobs, |i| -> Result<Tally, BenchError> {
        let w = work[i];
        let column = &cfg.columns[w.column];
        // Fixed twins run their schedules whatever the time.
        let time = cfg.trial_time.filter(|_| target(w.target).expect.is_some());
        let bounds = (w.limit, time);
        let o = run_trial(&pool, w.target, target(w.target), column, w.seed, bounds)?;
        bar.inc(1);
        Ok(o)
    })?;
    drop(pool);

    // Back into a fixed order: columns, then harnesses, then seeds.
    let mut done: Vec<(Work, Tally)> = work.into_iter().zip(outcomes).collect();
    done.sort_by_key(|(w, _)| (w.column, w.target, w.seed));
    let mut trials = Vec::new();
    let mut fixed = Vec::new();
    for (w, o) in done {
        let t = target(w.target);
        let strategy = cfg.columns[w.column].to_string();
        if t.expect.is_some() {
            trials.push(Trial {
                strategy,
                harness: t.harness.clone(),
                seed: w.seed,
                schedules_to_bug: o.first_bug,
                wall_s: o.wall_s,
                schedules: o.schedules,
                unexpected: o.unexpected,
            });
        } else {
            fixed.push(FixedTrial {
                strategy,
                harness: format!("{}-fixed", t.harness),
                seed: w.seed,
                schedules: o.schedules,
                failures: o.failures,
                first_failure: o.first_failure.map(|f| f.0),
                first_failure_kind: o.first_failure.map(|f| f.1.to_string()),
                wall_s: o.wall_s,
            });
        }
    }

    let ready: Vec<&Target> = targets.iter().flatten().collect();
    let native = match cfg.native_cap {
        Some(cap) => Some(native_phase(cfg, &ready, &trials, cap, bar)?),
        None => None,
    };
    Ok(BenchReport {
        command: cfg.command.clone(),
        budget: cfg.budget,
        trial_time_s: cfg.trial_time.map(|t| t.as_secs_f64()),
        fixed_budget: cfg.fixed_budget,
        seeds: cfg.seeds,
        jobs,
        strategies: cfg.columns.iter().map(|c| c.to_string()).collect(),
        // The programs that ran: the others are listed as unrunnable.
        harnesses: cfg
            .harnesses
            .iter()
            .filter(|h| {
                !unrunnable
                    .iter()
                    .any(|u| u.harness == h.name && u.variant == "buggy")
            })
            .map(|h| h.name.clone())
            .collect(),
        trials,
        fixed,
        native,
        unrunnable,
        elapsed_s: start.elapsed().as_secs_f64(),
    })
}

/// The first line of why a program cannot run and, for a failed build,
/// the compiler's first error.
fn first_lines(reason: &str) -> String {
    let mut lines = reason.lines();
    let first = lines.next().unwrap_or("").to_string();
    match lines.find(|l| l.contains("error")) {
        Some(e) => format!("{first}: {}", e.trim()),
        None => first,
    }
}

/// Runs each buggy build natively for as long as the machine's trials took
/// on it (within the floor and the cap), the longest first.
fn native_phase(
    cfg: &BenchConfig,
    targets: &[&Target],
    trials: &[Trial],
    cap: Duration,
    bar: &ProgressBar,
) -> Result<Vec<NativeLoop>, BenchError> {
    let mut spent: BTreeMap<&str, f64> = BTreeMap::new();
    for t in trials {
        *spent.entry(&t.harness).or_default() += t.wall_s;
    }
    let mut plan: Vec<(&Target, Duration)> = targets
        .iter()
        .copied()
        // One loop per harness, whatever the levels the machine ran at.
        .filter(|t| {
            t.variant == Variant::Buggy && Some(t.level) == targets.first().map(|f| f.level)
        })
        .map(|t| {
            let s = spent.get(t.harness.as_str()).copied().unwrap_or(0.0);
            let d = Duration::from_secs_f64(s).max(cfg.native_floor).min(cap);
            (t, d)
        })
        .collect();
    plan.sort_by_key(|(_, d)| std::cmp::Reverse(*d));
    phase(bar, plan.len(), "native loops");
    let mut loops = map_parallel(
        plan.len(),
        cfg.jobs,
        |i| -> Result<NativeLoop, BenchError> {
            let (t, d) = plan[i];
            let l = native::stress(
                &t.harness,
                &t.exe,
                &t.cfg.kernel.argv[1..],
                d,
                native::RUN_TIMEOUT,
            )
            .map_err(|source| BenchError::Native {
                harness: t.harness.clone(),
                source,
            })?;
            bar.inc(1);
            Ok(l)
        },
    )?;
    let order: Vec<&String> = cfg.harnesses.iter().map(|h| &h.name).collect();
    loops.sort_by_key(|l| order.iter().position(|n| **n == l.harness));
    Ok(loops)
}
