//! `rewind-fuzz bench`: strategies against the bug suite, with a native
//! stress loop as the baseline; tables, CSV or JSON, and a plot.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use super::UserError;
use super::common::{check_output, parse_duration, vm_error};
use crate::bench::{self, BenchConfig, BenchError, DEFAULT_COLUMNS};
use crate::harness::{self, Harness};

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Strategies to compare, comma-separated: default, random, pct:D, pos, fuzz.
    #[arg(long, value_name = "LIST", default_value = DEFAULT_COLUMNS)]
    pub strategies: Vec<String>,
    /// Bug-suite harnesses to run (repeatable or comma-separated; default: all).
    #[arg(long = "harness", value_name = "NAME", num_args = 1..)]
    pub harnesses: Vec<String>,
    /// A directory of programs to bench instead of the bundled suite: one
    /// subdirectory per program with a `harness.toml` manifest (see
    /// docs/suites.md); a fixed twin is optional there.
    #[arg(long, value_name = "DIR")]
    pub suite: Option<PathBuf>,
    /// Schedules per trial before giving up [default: 1000, 100 with
    /// --quick; no limit with --trial-time].
    #[arg(long, value_name = "SCHEDULES")]
    pub budget: Option<u64>,
    /// Time-boxed trials: each strategy runs on each program from each seed
    /// for this long (e.g. 5m, 60s) or until the bug; the summary gives bugs
    /// found per trial over the seeds, and the median schedules and time to
    /// each bug. Fixed twins still run --fixed-budget schedules.
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub trial_time: Option<Duration>,
    /// Trials per strategy and harness, each from its own seed [default: 5, 3 with --quick].
    #[arg(long, value_name = "K")]
    pub seeds: Option<u64>,
    /// Schedules each fixed twin runs per strategy (0 skips the twins) [default: the budget].
    #[arg(long, value_name = "SCHEDULES")]
    pub fixed_budget: Option<u64>,
    /// Machines running trials in parallel (default: every core).
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// The smaller bench CI may run: budget 100, 3 seeds, native loops of at most 5 s.
    #[arg(long)]
    pub quick: bool,
    /// Print one JSON object (trials, fixed twins, native loops, summary) instead of the tables.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Write every trial as CSV to FILE.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Draw bugs found against schedules, one line per strategy, as SVG to FILE.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Skip the native stress loop.
    #[arg(long)]
    pub no_native: bool,
    /// The longest native loop per harness [default: 60s, 5s with --quick].
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub native_cap: Option<Duration>,
    /// Levels of sync points every strategy runs at, comma-separated
    /// (calls, atomics, globals): one column per strategy and level. A
    /// strategy written STRATEGY@LEVEL runs at that level only [default:
    /// atomics, or the level a harness's bug needs when higher].
    #[arg(long, value_name = "LEVELS", value_delimiter = ',')]
    pub sync_points: Vec<crate::code::SyncPoints>,
}

/// The programs of suite directory `dir`, or those of them named.
fn select_in_suite(dir: &std::path::Path, names: &[String]) -> Result<Vec<Harness>, UserError> {
    if !dir.is_dir() {
        return Err(UserError::bad_input(format!(
            "--suite {} is not a directory; give a directory with one subdirectory per program, each holding a harness.toml",
            dir.display()
        )));
    }
    let all = harness::list_in(dir).map_err(|e| UserError::bad_input(e.to_string()))?;
    if all.is_empty() {
        return Err(UserError::bad_input(format!(
            "--suite {} holds no program: each needs a subdirectory with a harness.toml (docs/suites.md)",
            dir.display()
        )));
    }
    let names: Vec<&str> = names
        .iter()
        .flat_map(|n| n.split(','))
        .map(str::trim)
        .collect();
    if let Some(missing) = names.iter().find(|n| !all.iter().any(|h| h.name == **n)) {
        return Err(UserError::bad_input(format!(
            "--suite {} has no program named {missing}",
            dir.display()
        )));
    }
    Ok(all
        .into_iter()
        .filter(|h| names.is_empty() || names.contains(&h.name.as_str()))
        .collect())
}

/// The bug-suite harnesses named, or all of them.
fn select(names: &[String]) -> Result<Vec<Harness>, UserError> {
    let bad = |e: harness::HarnessError| UserError::bad_input(e.to_string());
    let names: Vec<&str> = names
        .iter()
        .flat_map(|n| n.split(','))
        .map(str::trim)
        .collect();
    if names.is_empty() {
        return Ok(harness::list()
            .map_err(bad)?
            .into_iter()
            .filter(|h| h.is_bug())
            .collect());
    }
    let mut out: Vec<Harness> = Vec::new();
    for name in names {
        let h = harness::find(name).map_err(bad)?;
        if !h.is_bug() {
            return Err(UserError::bad_input(format!(
                "harness {name} is an engine program without a bug or a fixed twin; bench the bug suite (harnesses/README.md lists it)"
            )));
        }
        if out.iter().any(|o| o.name == h.name) {
            return Err(UserError::bad_input(format!(
                "harness {name} is listed twice"
            )));
        }
        out.push(h);
    }
    Ok(out)
}

fn bench_error(e: BenchError) -> UserError {
    match e {
        BenchError::Vm(v) => vm_error(v),
        BenchError::Harness(h) => UserError::bad_input(h.to_string()),
        other => UserError {
            message: other.to_string(),
            code: 1,
        },
    }
}

/// How often a bench whose stderr is no terminal says how far it got.
const PROGRESS_LINE_INTERVAL: Duration = Duration::from_secs(15);

pub fn bench(a: BenchArgs) -> Result<u8, UserError> {
    check_output("--csv", a.csv.as_deref())?;
    check_output("--plot", a.plot.as_deref())?;
    let columns =
        bench::parse_columns(&a.strategies, &a.sync_points).map_err(UserError::bad_input)?;
    let harnesses = match &a.suite {
        Some(dir) => select_in_suite(dir, &a.harnesses)?,
        None => select(&a.harnesses)?,
    };
    let default_budget = if a.quick { 100 } else { 1000 };
    let budget = match (a.budget, a.trial_time) {
        (Some(b), _) => b,
        (None, Some(_)) => u64::MAX,
        (None, None) => default_budget,
    };
    if a.trial_time.is_some_and(|t| t.is_zero()) {
        return Err(UserError::bad_input(
            "--trial-time must be positive (e.g. 60s, 5m)",
        ));
    }
    let seeds = a.seeds.unwrap_or(if a.quick { 3 } else { 5 });
    if budget == 0 {
        return Err(UserError::bad_input("--budget must be at least 1 schedule"));
    }
    if seeds == 0 {
        return Err(UserError::bad_input("--seeds must be at least 1"));
    }
    if a.jobs == Some(0) {
        return Err(UserError::bad_input("--jobs must be at least 1"));
    }
    let cap = a
        .native_cap
        .unwrap_or(Duration::from_secs(if a.quick { 5 } else { 60 }));
    let cfg = BenchConfig {
        columns,
        harnesses,
        budget,
        trial_time: a.trial_time,
        seeds,
        fixed_budget: a
            .fixed_budget
            .unwrap_or(if a.trial_time.is_some() && a.budget.is_none() {
                default_budget
            } else {
                budget
            }),
        jobs: a
            .jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        native_cap: (!a.no_native).then_some(cap),
        native_floor: Duration::from_secs(1).min(cap),
        command: command_line(),
    };

    let bar = if std::io::stderr().is_terminal() {
        ProgressBar::new(0)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} {msg}")
            .expect("valid template"),
    );
    bar.enable_steady_tick(Duration::from_millis(250));
    // Piped or in CI, where no bar is drawn: a line every so often.
    let (done, ended) = std::sync::mpsc::channel::<()>();
    let lines = (!std::io::stderr().is_terminal()).then(|| {
        let bar = bar.clone();
        let start = std::time::Instant::now();
        std::thread::spawn(move || {
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                ended.recv_timeout(PROGRESS_LINE_INTERVAL)
            {
                eprintln!(
                    "rewind-fuzz bench: [{:>5.0}s] {} {}/{}",
                    start.elapsed().as_secs_f64(),
                    bar.message(),
                    bar.position(),
                    bar.length().unwrap_or(0)
                );
            }
        })
    });
    let report = bench::runner::run(&cfg, &bar);
    drop(done);
    if let Some(t) = lines {
        let _ = t.join();
    }
    let report = report.map_err(bench_error)?;
    bar.finish_and_clear();

    if let Some(f) = &a.csv {
        crate::fsutil::write_atomically(f, report.to_csv().as_bytes()).map_err(|e| {
            UserError::bad_input(format!("cannot write --csv {}: {e}", f.display()))
        })?;
    }
    if let Some(f) = &a.plot {
        let svg = bench::plot::svg(&report).map_err(|e| UserError {
            message: format!("drawing the plot: {e}"),
            code: 1,
        })?;
        crate::fsutil::write_atomically(f, svg.as_bytes()).map_err(|e| {
            UserError::bad_input(format!("cannot write --plot {}: {e}", f.display()))
        })?;
    }
    let summary = report.summary();
    if a.json {
        super::common::print_json(report.to_json());
    } else {
        let bound = match (report.trial_time_s, report.budget) {
            (Some(t), u64::MAX) => format!("trials of {t:.0} s"),
            (Some(t), b) => format!("trials of {t:.0} s or {b} schedules"),
            (None, b) => format!("budget {b} schedules"),
        };
        println!(
            "{} harnesses x {} strategies x {} seeds, {bound} ({} per fixed twin), {} jobs, {:.0} s",
            report.harnesses.len(),
            report.strategies.len(),
            report.seeds,
            report.fixed_budget,
            report.jobs,
            report.elapsed_s
        );
        println!();
        print!("{}", report.to_table());
    }
    for f in report.fixed.iter().filter(|f| f.failures > 0) {
        eprintln!(
            "rewind-fuzz: false positive: {} failed {} of {} schedules under {} (first: schedule {}, {})",
            f.harness,
            f.failures,
            f.schedules,
            f.strategy,
            f.first_failure.unwrap_or(0),
            f.first_failure_kind.as_deref().unwrap_or("?")
        );
    }
    for u in &report.unrunnable {
        eprintln!(
            "rewind-fuzz: could not run {} ({}): {}",
            u.harness,
            u.variant,
            crate::escape::line(&u.reason)
        );
    }
    for t in report.trials.iter().filter(|t| t.unexpected > 0) {
        eprintln!(
            "rewind-fuzz: warning: {} under {} seed {}: {} schedules failed otherwise than the expected bug",
            t.harness, t.strategy, t.seed, t.unexpected
        );
    }
    if !summary.not_found.is_empty() {
        let within = match report.trial_time_s {
            Some(t) => format!("{t:.0} s"),
            None => format!("{} schedules", report.budget),
        };
        eprintln!(
            "rewind-fuzz: no strategy found the bug of {} within {within}",
            summary.not_found.join(", "),
        );
    }
    Ok(if summary.false_positives > 0 { 1 } else { 0 })
}

/// The command as typed, with the program's name shortened.
fn command_line() -> String {
    let mut args = std::env::args();
    let _ = args.next();
    let rest: Vec<String> = args.collect();
    format!("rewind-fuzz {}", rest.join(" "))
}
