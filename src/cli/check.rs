//! `rewind-fuzz check`: many schedules, each deterministic, the first
//! failure reported with a command that replays it.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use super::UserError;
use super::common::{TargetArgs, check_output, outcome_json, vm_error};
use crate::explore;
use crate::kernel::vfs::FileSource;
use crate::observe::failure::{FailureKind, table_row};
use crate::report::Symbols;
use crate::sched::StrategySpec;
use crate::vm::{RunReport, VmError};

#[derive(Args, Debug, Clone)]
pub struct CheckArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// How many schedules to run.
    #[arg(long, default_value_t = 1000)]
    pub schedules: u64,
    /// Scheduling strategy: random, pct:D, pos, default.
    #[arg(long, default_value = "pct:3")]
    pub strategy: StrategySpec,
    /// Machines running schedules in parallel (default: every core).
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// Stop after this long (e.g. 60s, 10m): a schedule still running
    /// then is stopped, and the results are those finished by then.
    #[arg(long = "time", short = 'V', value_parser = super::common::parse_time_budget)]
    pub time: Option<std::time::Duration>,
    /// Where to save the first failing schedule (default:
    /// <target>.schedule.json in rewind-fuzz's cache directory,
    /// $XDG_CACHE_HOME/rewind-fuzz/check or ~/.cache/rewind-fuzz/check).
    #[arg(long, value_name = "FILE")]
    pub save_schedule: Option<PathBuf>,
    /// Where to write a reproducer (.rwd) of the first failure (default:
    /// beside the schedule file, ending in .rwd).
    #[arg(long, value_name = "FILE")]
    pub save_rwd: Option<PathBuf>,
    /// Print one JSON object with the results on stdout.
    #[arg(long)]
    pub json: bool,
    /// Check each test of a Rust libtest or GoogleTest binary on its own
    /// (`--exact NAME` / `--gtest_filter=NAME`), each with --schedules.
    #[arg(long)]
    pub per_test: bool,
    /// The test being checked (set by --per-test): part of the default
    /// file names.
    #[arg(skip)]
    pub test: Option<String>,
}

/// How the error for a `--time` that ended before any schedule did starts.
const OUTLASTED: &str = "--time ";

/// Whether `e` says that `--time` ended before any schedule did.
pub fn outlasted_time(e: &UserError) -> bool {
    e.code == 2 && e.message.starts_with(OUTLASTED)
}

/// Why the schedules stopped before they were all run.
enum Stopped {
    User(UserError),
    Vm(VmError),
}

impl From<VmError> for Stopped {
    fn from(e: VmError) -> Self {
        Stopped::Vm(e)
    }
}

/// The result of one schedule.
struct Trial {
    index: u64,
    report: RunReport,
    failure: Option<FailureKind>,
}

impl Trial {
    fn new(index: u64, report: RunReport) -> Self {
        let failure = report.failure.clone();
        Trial {
            index,
            report,
            failure,
        }
    }

    /// The row it is counted under in the table.
    fn kind(&self) -> &'static str {
        table_row(self.failure.as_ref())
    }

    fn failed(&self) -> bool {
        self.failure.is_some()
    }
}

/// What the schedules cost, in the units that project to other hosts.
struct RunCost {
    steps_per_schedule: f64,
    exits_per_step: f64,
    /// Wall time of the runs (restores included) over their exits.
    us_per_exit: f64,
}

impl RunCost {
    fn of(trials: &[Trial]) -> RunCost {
        let sum =
            |f: fn(&RunReport) -> u64| trials.iter().map(|t| f(&t.report)).sum::<u64>() as f64;
        let (steps, exits, us) = (sum(|r| r.steps), sum(|r| r.exits), sum(|r| r.wall_us));
        RunCost {
            steps_per_schedule: steps / trials.len().max(1) as f64,
            exits_per_step: exits / steps.max(1.0),
            us_per_exit: us / exits.max(1.0),
        }
    }
}

/// What a check ran and how many of its schedules failed.
pub struct Checked {
    pub schedules: u64,
    pub failures: u64,
}

pub fn check(a: CheckArgs) -> Result<u8, UserError> {
    if a.per_test {
        return super::pertest::check_each(a);
    }
    check_counting(a).map(|(code, _)| code)
}

/// One check: its exit code and its counts.
pub fn check_counting(a: CheckArgs) -> Result<(u8, Checked), UserError> {
    if a.schedules == 0 {
        return Err(UserError::bad_input("--schedules must be at least 1"));
    }
    check_output("--save-rwd", a.save_rwd.as_deref())?;
    check_output("--save-schedule", a.save_schedule.as_deref())?;
    if matches!(a.strategy, StrategySpec::Schedule(_)) {
        return Err(UserError::bad_input(
            "check explores many schedules; to replay one use rewind-fuzz run --schedule FILE",
        ));
    }
    let cfg = a.target.config()?;
    let source = FileSource::host();
    let start = Instant::now();
    let deadline = a.time.map(|t| start + t);
    // The runs stop at the deadline, the first one (PCT's estimate of the
    // steps) too: a schedule that outlasts it is not counted.
    let mut timed = cfg.clone();
    if let Some(d) = deadline {
        timed.cancel = timed.cancel.clone().with_deadline(d);
    }
    let time_up = |e: &VmError| {
        matches!(e, VmError::Cancelled) && deadline.is_some_and(|d| Instant::now() >= d)
    };
    let too_long = || {
        UserError::bad_input(format!(
            "{OUTLASTED}{} ended before the first schedule did (the program's runs are long): give more --time; nothing was written",
            humantime::format_duration(a.time.unwrap_or_default())
        ))
    };
    let steps = if a.strategy.needs_step_estimate() {
        match crate::explore::probe(&timed, source.clone()) {
            Ok(p) => p.decision_points,
            Err(e) if time_up(&e) => return Err(too_long()),
            Err(e) => return Err(vm_error(e)),
        }
    } else {
        0
    };
    let jobs = a
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1)
        .min(a.schedules as usize);

    let bar = if a.json {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(a.schedules)
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} schedules, {per_sec} {msg}",
        )
        .expect("valid template"),
    );
    let mut failures_seen = 0u64;
    let mut trials: Vec<Trial> = Vec::with_capacity(a.schedules as usize);
    let spec = &a.strategy;
    let ran = explore::run_schedules(
        &timed,
        &source,
        jobs,
        a.schedules,
        a.target.seed,
        |seed| {
            spec.build(seed, steps)
                .map_err(|e| Stopped::User(UserError::bad_input(e.to_string())))
        },
        |i, mut report| {
            let seed = explore::schedule_seed(a.target.seed, i);
            report.schedule.origin = format!("{spec} seed {seed}");
            let t = Trial::new(i, report);
            if t.failed() {
                failures_seen += 1;
                bar.set_message(format!("{failures_seen} failing"));
            }
            trials.push(t);
            bar.inc(1);
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
        Err(e) => {
            bar.abandon();
            return Err(match e {
                Stopped::User(e) => e,
                Stopped::Vm(e) => vm_error(e),
            });
        }
    }
    bar.finish_and_clear();
    if trials.is_empty() {
        return Err(too_long());
    }
    let elapsed = start.elapsed().as_secs_f64();
    trials.sort_by_key(|t| t.index);

    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for t in &trials {
        *counts.entry(t.kind()).or_default() += 1;
    }
    let failures: Vec<&Trial> = trials.iter().filter(|t| t.failed()).collect();
    let execs_per_sec = trials.len() as f64 / elapsed.max(1e-9);
    let cost = RunCost::of(&trials);
    // A run that failed outright comes before a lock-order warning.
    let first = failures
        .iter()
        .find(|t| t.kind() != "potential-deadlock")
        .or(failures.first())
        .copied();
    let (saved, rwd_file, named) = match first {
        Some(t) => {
            let schedule_file = schedule_path(&a)?;
            let (path, named) = save_rwd(&a, &cfg, &source, t, &schedule_file)?;
            (Some(schedule_file), Some(path), Some(named))
        }
        None => (None, None, None),
    };
    let replay = saved.as_ref().map(|p| {
        let extra = ["--schedule".to_string(), p.display().to_string()];
        super::common::run_command(&a.target.run_words(), &extra, &a.target.args)
    });
    let headline = named.as_ref().map(|n| n.headline.clone());
    let files_written: Vec<String> = saved
        .iter()
        .chain(&rwd_file)
        .map(|p| p.display().to_string())
        .collect();

    if a.json {
        let first_json = first.map(|t| {
            let mut sym = Symbols::from_mappings(Vec::new());
            json!({
                "index": t.index,
                "schedule": t.report.schedule,
                "schedule_file": saved.as_ref().map(|p| p.display().to_string()),
                "rwd_file": rwd_file.as_ref().map(|p| p.display().to_string()),
                "summary": headline,
                "outcome": outcome_json(&t.report.outcome),
                "kind": t.kind(),
                "trace_hash": t.report.trace_hash,
                "steps": t.report.steps,
                "potential_deadlocks": named.as_ref().map_or_else(
                    || sym.inversions_json(&t.report.potential_deadlocks),
                    |n| n.inversions_json.clone(),
                ),
                "replay": replay,
            })
        });
        let v = json!({
            "target": a.target.target,
            "test": a.test,
            "strategy": a.strategy.to_string(),
            "seed": a.target.seed,
            "schedules": trials.len(),
            "failures": failures.len(),
            "outcomes": counts,
            "first_failure": first_json,
            "files_written": files_written,
            "execs_per_sec": execs_per_sec,
            "steps_per_schedule": cost.steps_per_schedule,
            "exits_per_step": cost.exits_per_step,
            "us_per_exit": cost.us_per_exit,
            "jobs": jobs,
            "elapsed_s": elapsed,
        });
        super::common::print_json(v);
    } else {
        eprintln!(
            "{} schedules of {} with {} in {:.1}s ({:.1}/s on {} job{})",
            trials.len(),
            a.target.target,
            a.strategy,
            elapsed,
            execs_per_sec,
            jobs,
            if jobs == 1 { "" } else { "s" }
        );
        eprintln!(
            "  {:.0} steps per schedule, {:.2} exits per step, {:.1} µs per exit",
            cost.steps_per_schedule, cost.exits_per_step, cost.us_per_exit
        );
        eprintln!("  {:<20} {:>9}", "outcome", "schedules");
        for (k, n) in &counts {
            eprintln!("  {k:<20} {n:>9}");
        }
        if let Some(t) = first {
            eprintln!();
            eprintln!(
                "first failure: schedule {} ({} decisions): {}",
                t.index,
                t.report.schedule.decisions.len(),
                headline
                    .clone()
                    .unwrap_or_else(|| t.report.outcome.summary())
            );
            let lines = named.as_ref().map_or_else(
                || {
                    let mut sym = Symbols::from_mappings(Vec::new());
                    let invs = &t.report.potential_deadlocks;
                    invs.iter().flat_map(|i| sym.inversion_lines(i)).collect()
                },
                |n| n.inversion_lines.clone(),
            );
            for line in lines {
                eprintln!("  {line}");
            }
            if let Some(cmd) = &replay {
                eprintln!("reproduce with: {cmd}");
            }
            if let Some(p) = &rwd_file {
                let p = crate::escape::shell_word(&p.to_string_lossy()).into_owned();
                let flags = crate::rwd::consent_flags(&cfg, true);
                eprintln!(
                    "reproducer: {p} (rewind-fuzz show {p}; rewind-fuzz minimize{flags} {p} -o min.rwd)"
                );
            }
        } else {
            eprintln!("every schedule exited 0");
        }
    }
    let code = if failures.is_empty() { 0 } else { 1 };
    Ok((
        code,
        Checked {
            schedules: trials.len() as u64,
            failures: failures.len() as u64,
        },
    ))
}

/// Where the first failure's schedule goes.
fn schedule_path(a: &CheckArgs) -> Result<PathBuf, UserError> {
    Ok(match &a.save_schedule {
        Some(p) => p.clone(),
        None => {
            let program = a
                .target
                .target
                .rsplit(['/', ':'])
                .next()
                .unwrap_or("target");
            let name = match &a.test {
                Some(t) => format!("{program}-{}", super::pertest::file_name(t)),
                None => program.to_string(),
            };
            let dir = cache_dir();
            std::fs::create_dir_all(&dir).map_err(|e| {
                UserError::bad_input(format!(
                    "cannot create {}: {e}; give --save-schedule FILE",
                    dir.display()
                ))
            })?;
            dir.join(format!("{name}.schedule.json"))
        }
    })
}

/// Where `check` keeps a first failure's files unless told: out of the
/// current directory, which the user did not offer.
fn cache_dir() -> PathBuf {
    crate::fsutil::cache_dir().join("check")
}

/// What the reproducer of the first failure tells of it, in the
/// program's names.
struct Named {
    headline: String,
    inversion_lines: Vec<String>,
    inversions_json: serde_json::Value,
}

/// Records the first failure again from scratch and writes its reproducer,
/// and its schedule (noting the failure it gives) as `schedule_file`.
fn save_rwd(
    a: &CheckArgs,
    cfg: &crate::vm::RunConfig,
    source: &crate::kernel::vfs::SharedSource,
    t: &Trial,
    schedule_file: &std::path::Path,
) -> Result<(PathBuf, Named), UserError> {
    let path = a.save_rwd.clone().unwrap_or_else(|| {
        let s = schedule_file.to_string_lossy();
        let stem = s.strip_suffix(".schedule.json").unwrap_or(&s);
        PathBuf::from(format!("{stem}.rwd"))
    });
    let (rwd, _) = crate::rwd::record(cfg, source.clone(), &t.report.schedule).map_err(vm_error)?;
    let excluding = !cfg.exclude_files.is_empty();
    // The schedule beside it is as private as it is.
    let note = rwd.expected.signature.to_note(rwd.signature_naming);
    t.report
        .schedule
        .save_for_failure(schedule_file, rwd.readers(excluding), note)
        .map_err(|e| UserError::bad_input(e.to_string()))?;
    super::common::save_rwd(&rwd, &path, excluding)?;
    let shown = rwd.for_display();
    let mut story = crate::rwd::story::StoryTeller::new(&shown);
    let named = Named {
        headline: story.headline(),
        inversion_lines: story.inversion_lines(),
        inversions_json: story.inversions_json(),
    };
    Ok((path, named))
}
