//! `rewind-fuzz check`: many schedules, each deterministic, the first
//! failure reported with a command that replays it.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use super::UserError;
use super::common::{TargetArgs, check_output, outcome_json, vm_error};
use crate::explore::check::{self, CheckError, Plan, Trial};
use crate::explore::per_test;
use crate::kernel::vfs::FileSource;
use crate::sched::StrategySpec;

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

/// What a check ran and how many of its schedules failed.
struct Counted {
    code: u8,
    schedules: u64,
    failures: u64,
}

/// Why a check ended without results.
enum Stop {
    /// `--time` ended before the first schedule did.
    Outlasted(UserError),
    Other(UserError),
}

impl From<UserError> for Stop {
    fn from(e: UserError) -> Self {
        Stop::Other(e)
    }
}

impl From<CheckError> for Stop {
    fn from(e: CheckError) -> Self {
        match e {
            CheckError::Outlasted(_) => Stop::Outlasted(UserError::bad_input(e.to_string())),
            CheckError::Vm(e) => Stop::Other(vm_error(e)),
            e => Stop::Other(UserError::bad_input(e.to_string())),
        }
    }
}

impl From<Stop> for UserError {
    fn from(s: Stop) -> Self {
        match s {
            Stop::Outlasted(e) | Stop::Other(e) => e,
        }
    }
}

pub fn check(a: CheckArgs) -> Result<u8, UserError> {
    if a.per_test {
        return check_each(a);
    }
    Ok(check_counting(a)?.code)
}

/// `check --per-test`: every test alone, each with `--schedules`.
fn check_each(a: CheckArgs) -> Result<u8, UserError> {
    let (framework, tests) = super::common::list_tests(&a.target)?;
    eprintln!(
        "rewind-fuzz: {} tests in {}, {} schedules each",
        tests.len(),
        a.target.target,
        a.schedules
    );
    let mut rows = Vec::new();
    for test in &tests {
        eprintln!("\n== {test}");
        let mut one = a.clone();
        one.per_test = false;
        one.test = Some(test.clone());
        one.target = a.target.for_test(framework, test);
        let derived =
            |p: &Option<std::path::PathBuf>| p.as_ref().map(|p| per_test::per_test_path(p, test));
        one.save_schedule = derived(&a.save_schedule);
        one.save_rwd = derived(&a.save_rwd);
        let start = Instant::now();
        // A test whose runs outlast --time is a row of its own, not the
        // end of the others.
        let (code, schedules, failures) = match check_counting(one) {
            Ok(c) => (c.code, c.schedules, c.failures),
            Err(Stop::Outlasted(e)) => {
                eprintln!("rewind-fuzz: {}", e.message);
                (e.code, 0, 0)
            }
            Err(Stop::Other(e)) => return Err(e),
        };
        rows.push(per_test::Explored {
            test: test.clone(),
            runs: schedules,
            time: start.elapsed(),
            failures,
            code,
        });
    }
    eprint!("\n{}", per_test::table(("schedules", "failing"), &rows));
    Ok(per_test::worst(&rows))
}

/// One check: its exit code and its counts.
fn check_counting(a: CheckArgs) -> Result<Counted, Stop> {
    check_output("--save-rwd", a.save_rwd.as_deref())?;
    check_output("--save-schedule", a.save_schedule.as_deref())?;
    let cfg = a.target.config()?;
    let source = FileSource::host();
    let plan = Plan {
        strategy: a.strategy.clone(),
        schedules: a.schedules,
        jobs: a
            .jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        seed: a.target.seed,
        time: a.time,
        fork: None,
    };
    let checked = check_showing_progress(&a, &cfg, &source, &plan)?;
    let first = checked.first_failure();
    let recorded = match first {
        Some(t) => Some(record_first(&a, &cfg, &source, t)?),
        None => None,
    };
    if a.json {
        print_json(&a, &checked, recorded.as_ref());
    } else {
        print_table(&a, &cfg, &checked, recorded.as_ref());
    }
    let failures = checked.failures();
    Ok(Counted {
        code: if failures == 0 { 0 } else { 1 },
        schedules: checked.trials.len() as u64,
        failures: failures as u64,
    })
}

/// The check, with a progress bar (none under `--json`) counting
/// schedules and failures.
fn check_showing_progress(
    a: &CheckArgs,
    cfg: &crate::engine::RunConfig,
    source: &crate::kernel::vfs::SharedSource,
    plan: &Plan,
) -> Result<check::Checked, Stop> {
    Ok(with_progress_bar(a.json, cfg, source, plan)?)
}

/// Runs `plan` with a progress bar on stderr (hidden when `hidden`)
/// counting schedules and failures.
pub(super) fn with_progress_bar(
    hidden: bool,
    cfg: &crate::engine::RunConfig,
    source: &crate::kernel::vfs::SharedSource,
    plan: &Plan,
) -> Result<check::Checked, CheckError> {
    let bar = if hidden {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(plan.schedules)
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} schedules, {per_sec} {msg}",
        )
        .expect("valid template"),
    );
    let mut failures_seen = 0u64;
    let checked = check::check(cfg, source, plan, |t| {
        if t.failed() {
            failures_seen += 1;
            bar.set_message(format!("{failures_seen} failing"));
        }
        bar.inc(1);
    });
    match checked {
        Ok(c) => {
            bar.finish_and_clear();
            Ok(c)
        }
        Err(e) => {
            bar.abandon();
            Err(e)
        }
    }
}

/// The first failure, kept: its schedule and reproducer files, its name,
/// and the command that replays it.
struct Recorded<'t> {
    trial: &'t Trial,
    schedule_file: PathBuf,
    rwd_file: PathBuf,
    named: Named,
    replay: String,
}

fn record_first<'t>(
    a: &CheckArgs,
    cfg: &crate::engine::RunConfig,
    source: &crate::kernel::vfs::SharedSource,
    trial: &'t Trial,
) -> Result<Recorded<'t>, UserError> {
    let schedule_file = schedule_path(a)?;
    let (rwd_file, named) = save_rwd(a, cfg, source, trial, &schedule_file)?;
    let extra = [
        "--schedule".to_string(),
        schedule_file.display().to_string(),
    ];
    let replay = super::common::run_command(&a.target.run_words(), &extra, &a.target.args);
    Ok(Recorded {
        trial,
        schedule_file,
        rwd_file,
        named,
        replay,
    })
}

/// `--json`: the check as one object on stdout.
fn print_json(a: &CheckArgs, checked: &check::Checked, first: Option<&Recorded>) {
    let cost = checked.cost();
    let files_written: Vec<String> = first
        .iter()
        .flat_map(|r| [&r.schedule_file, &r.rwd_file])
        .map(|p| p.display().to_string())
        .collect();
    let first_json = first.map(|r| {
        let t = r.trial;
        json!({
            "index": t.index,
            "schedule": t.report.schedule,
            "schedule_file": r.schedule_file.display().to_string(),
            "rwd_file": r.rwd_file.display().to_string(),
            "summary": r.named.headline,
            "outcome": outcome_json(&t.report.outcome),
            "kind": t.kind(),
            "trace_hash": t.report.trace_hash,
            "steps": t.report.steps,
            "potential_deadlocks": r.named.inversions_json.clone(),
            "replay": r.replay,
        })
    });
    let v = json!({
        "target": a.target.target,
        "test": a.test,
        "strategy": a.strategy.to_string(),
        "seed": a.target.seed,
        "schedules": checked.trials.len(),
        "failures": checked.failures(),
        "outcomes": checked.counts(),
        "first_failure": first_json,
        "files_written": files_written,
        "execs_per_sec": checked.execs_per_sec(),
        "steps_per_schedule": cost.steps_per_schedule,
        "exits_per_step": cost.exits_per_step,
        "us_per_exit": cost.us_per_exit,
        "jobs": checked.jobs,
        "elapsed_s": checked.elapsed.as_secs_f64(),
    });
    super::common::print_json(v);
}

/// The check's table on stderr, and the first failure with the commands
/// that replay, show and minimize it.
fn print_table(
    a: &CheckArgs,
    cfg: &crate::engine::RunConfig,
    checked: &check::Checked,
    first: Option<&Recorded>,
) {
    let (jobs, cost) = (checked.jobs, checked.cost());
    eprintln!(
        "{} schedules of {} with {} in {:.1}s ({:.1}/s on {} job{})",
        checked.trials.len(),
        a.target.target,
        a.strategy,
        checked.elapsed.as_secs_f64(),
        checked.execs_per_sec(),
        jobs,
        if jobs == 1 { "" } else { "s" }
    );
    eprintln!(
        "  {:.0} steps per schedule, {:.2} exits per step, {:.1} µs per exit",
        cost.steps_per_schedule, cost.exits_per_step, cost.us_per_exit
    );
    eprintln!("  {:<20} {:>9}", "outcome", "schedules");
    for (k, n) in &checked.counts() {
        eprintln!("  {k:<20} {n:>9}");
    }
    let Some(r) = first else {
        eprintln!("every schedule exited 0");
        return;
    };
    let t = r.trial;
    eprintln!();
    eprintln!(
        "first failure: schedule {} ({} decisions): {}",
        t.index,
        t.report.schedule.decisions.len(),
        r.named.headline
    );
    for line in &r.named.inversion_lines {
        eprintln!("  {line}");
    }
    eprintln!("reproduce with: {}", r.replay);
    let p = crate::escape::shell_word(&r.rwd_file.to_string_lossy()).into_owned();
    let flags = crate::rwd::consent_flags(cfg, true);
    eprintln!("reproducer: {p} (rewind-fuzz show {p}; rewind-fuzz minimize{flags} {p} -o min.rwd)");
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
                Some(t) => format!("{program}-{}", per_test::file_name(t)),
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
    cfg: &crate::engine::RunConfig,
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
