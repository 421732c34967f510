//! `rewind-fuzz bench`: strategies against the bug suite, with a native
//! stress loop as the baseline; tables, CSV or JSON, and a plot.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use super::UserError;
use super::common::{check_output, parse_duration, vm_error};
use crate::bench::{self, BenchConfig, BenchError, BenchReport, DEFAULT_COLUMNS};

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
    let cfg = a
        .request()
        .plan()
        .map_err(|e| UserError::bad_input(e.to_string()))?;
    let report = run_showing_progress(&cfg)?;
    write_files(&a, &report)?;
    if a.json {
        super::common::print_json(report.to_json());
    } else {
        print_tables(&report);
    }
    let summary = report.summary();
    warn(&report, &summary);
    Ok(if summary.false_positives > 0 { 1 } else { 0 })
}

impl BenchArgs {
    /// What is asked of the bench.
    fn request(&self) -> bench::Request {
        bench::Request {
            strategies: self.strategies.clone(),
            levels: self.sync_points.clone(),
            harnesses: self.harnesses.clone(),
            suite: self.suite.clone(),
            budget: self.budget,
            trial_time: self.trial_time,
            seeds: self.seeds,
            fixed_budget: self.fixed_budget,
            jobs: self.jobs,
            quick: self.quick,
            native: !self.no_native,
            native_cap: self.native_cap,
            command: command_line(),
        }
    }
}

/// Runs the bench with its progress on stderr: a bar on a terminal,
/// elsewhere (piped, in CI) a line every so often.
fn run_showing_progress(cfg: &BenchConfig) -> Result<BenchReport, UserError> {
    let terminal = std::io::stderr().is_terminal();
    let bar = if terminal {
        ProgressBar::new(0)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} {msg}")
            .expect("valid template"),
    );
    bar.enable_steady_tick(Duration::from_millis(250));
    let (done, ended) = std::sync::mpsc::channel::<()>();
    let lines = (!terminal).then(|| progress_lines(bar.clone(), ended));
    let report = bench::runner::run(cfg, &bar);
    drop(done);
    if let Some(t) = lines {
        let _ = t.join();
    }
    let report = report.map_err(bench_error)?;
    bar.finish_and_clear();
    Ok(report)
}

/// A thread printing where `bar` is every [`PROGRESS_LINE_INTERVAL`]
/// until `ended` hangs up.
fn progress_lines(
    bar: ProgressBar,
    ended: std::sync::mpsc::Receiver<()>,
) -> std::thread::JoinHandle<()> {
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
}

/// Writes the `--csv` and `--plot` files asked for.
fn write_files(a: &BenchArgs, report: &BenchReport) -> Result<(), UserError> {
    if let Some(f) = &a.csv {
        crate::fsutil::write_atomically(f, report.to_csv().as_bytes()).map_err(|e| {
            UserError::bad_input(format!("cannot write --csv {}: {e}", f.display()))
        })?;
    }
    if let Some(f) = &a.plot {
        let svg = bench::plot::svg(report).map_err(|e| UserError {
            message: format!("drawing the plot: {e}"),
            code: 1,
        })?;
        crate::fsutil::write_atomically(f, svg.as_bytes()).map_err(|e| {
            UserError::bad_input(format!("cannot write --plot {}: {e}", f.display()))
        })?;
    }
    Ok(())
}

/// The headline and the table of results, on stdout.
fn print_tables(report: &BenchReport) {
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

/// What the results call for a second look at, on stderr: false positives,
/// programs that could not run, failures other than the bug, bugs no
/// strategy found.
fn warn(report: &BenchReport, summary: &bench::results::Summary) {
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
}

/// The command as typed, with the program's name shortened.
fn command_line() -> String {
    let mut args = std::env::args();
    let _ = args.next();
    let rest: Vec<String> = args.collect();
    format!("rewind-fuzz {}", rest.join(" "))
}
