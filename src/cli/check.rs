//! `rewind-fuzz check`: many schedules, each deterministic, the first
//! failure reported with a command that replays it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, mpsc};
use std::time::Instant;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use super::UserError;
use super::run::{TargetArgs, estimate_steps, outcome_json, vm_error};
use crate::kernel::vfs::FileSource;
use crate::outcome::Outcome;
use crate::report::Symbols;
use crate::sched::{Schedule, StrategySpec};
use crate::vm::{RunReport, Vm};

#[derive(Args, Debug)]
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
    /// Where to save the first failing schedule (default:
    /// rewind-check-<target>.schedule.json in the current directory).
    #[arg(long, value_name = "FILE")]
    pub save_schedule: Option<PathBuf>,
    /// Where to write a reproducer (.rwd) of the first failure (default:
    /// beside the schedule file, ending in .rwd).
    #[arg(long, value_name = "FILE")]
    pub save_rwd: Option<PathBuf>,
    /// Print one JSON object with the results on stdout.
    #[arg(long)]
    pub json: bool,
}

/// The result of one schedule.
struct Trial {
    index: u64,
    report: RunReport,
}

impl Trial {
    /// The kind counted in the table: the outcome, or `potential-deadlock`
    /// for a clean exit with a lock-order cycle.
    fn kind(&self) -> &'static str {
        match &self.report.outcome {
            Outcome::Exited { code: 0 } if !self.report.potential_deadlocks.is_empty() => {
                "potential-deadlock"
            }
            Outcome::Exited { code: 0 } => "exited(0)",
            Outcome::Exited { .. } => "exited(non-zero)",
            o => o.kind(),
        }
    }

    fn failed(&self) -> bool {
        self.kind() != "exited(0)"
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

/// The seed of schedule `i`: a different stream for every schedule, the same
/// whatever the number of jobs.
pub fn schedule_seed(seed: u64, i: u64) -> u64 {
    let mut z = seed ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

pub fn check(a: CheckArgs) -> Result<u8, UserError> {
    if a.schedules == 0 {
        return Err(UserError::bad_input("--schedules must be at least 1"));
    }
    if matches!(a.strategy, StrategySpec::Schedule(_)) {
        return Err(UserError::bad_input(
            "check explores many schedules; to replay one use rewind-fuzz run --schedule FILE",
        ));
    }
    let cfg = a.target.config()?;
    let source = FileSource::host();
    let steps = estimate_steps(&cfg, &a.strategy, &source)?;
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
    let start = Instant::now();
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::channel::<Result<Trial, UserError>>();
    let failures_seen = Mutex::new(0u64);
    let mut trials: Vec<Trial> = Vec::with_capacity(a.schedules as usize);
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            let tx = tx.clone();
            let (cfg, source, next, spec) = (&cfg, &source, &next, &a.strategy);
            scope.spawn(move || {
                // One machine per job, restored from its snapshot for every
                // schedule after the first.
                let mut vm: Option<Vm> = None;
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed) as u64;
                    if i >= a.schedules {
                        break;
                    }
                    let seed = schedule_seed(a.target.seed, i);
                    let mut once = || {
                        let strategy = spec
                            .build(seed, steps)
                            .map_err(|e| UserError::bad_input(e.to_string()))?;
                        if !vm.as_ref().is_some_and(|v| v.can_run()) {
                            vm = Some(Vm::new(cfg, source.clone()).map_err(vm_error)?);
                        }
                        let vm = vm.as_mut().expect("just made");
                        vm.set_strategy(strategy);
                        let mut report = vm.run().map_err(vm_error)?;
                        report.schedule.origin = format!("{spec} seed {seed}");
                        Ok(Trial { index: i, report })
                    };
                    let r = once();
                    let stop = r.is_err();
                    if tx.send(r).is_err() || stop {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for r in rx {
            match r {
                Ok(t) => {
                    if t.failed() {
                        let mut f = failures_seen.lock().unwrap();
                        *f += 1;
                        bar.set_message(format!("{} failing", *f));
                    }
                    trials.push(t);
                    bar.inc(1);
                }
                Err(e) => {
                    next.store(usize::MAX / 2, Ordering::Relaxed);
                    bar.abandon();
                    return Err(e);
                }
            }
        }
        Ok(())
    })?;
    bar.finish_and_clear();
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
    let saved = match first {
        Some(t) => Some(save_first(&a, &t.report.schedule)?),
        None => None,
    };
    let replay = saved.as_ref().map(|p| replay_command(&a.target, p));
    let rwd_file = match (first, &saved) {
        (Some(t), Some(schedule_file)) => Some(save_rwd(&a, &cfg, &source, t, schedule_file)?),
        _ => None,
    };

    if a.json {
        let first_json = first.map(|t| {
            let mut sym = Symbols::from_mappings(Vec::new());
            json!({
                "index": t.index,
                "schedule": t.report.schedule,
                "schedule_file": saved.as_ref().map(|p| p.display().to_string()),
                "rwd_file": rwd_file.as_ref().map(|p| p.display().to_string()),
                "outcome": outcome_json(&t.report.outcome),
                "kind": t.kind(),
                "trace_hash": t.report.trace_hash,
                "steps": t.report.steps,
                "potential_deadlocks": sym.inversions_json(&t.report.potential_deadlocks),
                "replay": replay,
            })
        });
        let v = json!({
            "target": a.target.target,
            "strategy": a.strategy.to_string(),
            "seed": a.target.seed,
            "schedules": trials.len(),
            "failures": failures.len(),
            "outcomes": counts,
            "first_failure": first_json,
            "execs_per_sec": execs_per_sec,
            "steps_per_schedule": cost.steps_per_schedule,
            "exits_per_step": cost.exits_per_step,
            "us_per_exit": cost.us_per_exit,
            "jobs": jobs,
            "elapsed_s": elapsed,
        });
        println!("{v}");
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
                t.report.outcome.summary()
            );
            let mut sym = Symbols::from_mappings(Vec::new());
            for inv in &t.report.potential_deadlocks {
                for line in sym.inversion_lines(inv) {
                    eprintln!("  {line}");
                }
            }
            if let Some(cmd) = &replay {
                eprintln!("reproduce with: {cmd}");
            }
            if let Some(p) = &rwd_file {
                eprintln!(
                    "reproducer: {} (rewind-fuzz show {0}; rewind-fuzz minimize {0} -o min.rwd)",
                    p.display()
                );
            }
        } else {
            eprintln!("every schedule exited 0");
        }
    }
    Ok(if failures.is_empty() { 0 } else { 1 })
}

fn save_first(a: &CheckArgs, s: &Schedule) -> Result<PathBuf, UserError> {
    let path = match &a.save_schedule {
        Some(p) => p.clone(),
        None => {
            let name = a
                .target
                .target
                .rsplit(['/', ':'])
                .next()
                .unwrap_or("target");
            PathBuf::from(format!("rewind-check-{name}.schedule.json"))
        }
    };
    s.save(&path)
        .map_err(|e| UserError::bad_input(e.to_string()))?;
    Ok(path)
}

/// Records the first failure again from scratch and writes its reproducer.
fn save_rwd(
    a: &CheckArgs,
    cfg: &crate::vm::RunConfig,
    source: &crate::kernel::vfs::SharedSource,
    t: &Trial,
    schedule_file: &std::path::Path,
) -> Result<PathBuf, UserError> {
    let path = a.save_rwd.clone().unwrap_or_else(|| {
        let s = schedule_file.to_string_lossy();
        let stem = s.strip_suffix(".schedule.json").unwrap_or(&s);
        PathBuf::from(format!("{stem}.rwd"))
    });
    let (rwd, _) = crate::rwd::record(cfg, source.clone(), &t.report.schedule).map_err(vm_error)?;
    rwd.save(&path)
        .map_err(|e| UserError::bad_input(e.to_string()))?;
    Ok(path)
}

/// The command line that replays a saved schedule of this target.
fn replay_command(t: &TargetArgs, schedule: &std::path::Path) -> String {
    let mut cmd = format!(
        "rewind-fuzz run --target {} --schedule {}",
        t.target,
        schedule.display()
    );
    if t.seed != 0 {
        cmd.push_str(&format!(" --seed {}", t.seed));
    }
    if t.cpus != 4 {
        cmd.push_str(&format!(" --cpus {}", t.cpus));
    }
    for e in &t.env {
        cmd.push_str(&format!(" --env {e}"));
    }
    if !t.args.is_empty() {
        cmd.push_str(" --");
        for arg in &t.args {
            cmd.push(' ');
            cmd.push_str(arg);
        }
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_seeds_differ_and_do_not_depend_on_anything_else() {
        let a: std::collections::BTreeSet<u64> = (0..1000).map(|i| schedule_seed(7, i)).collect();
        assert_eq!(a.len(), 1000);
        assert_eq!(schedule_seed(7, 3), schedule_seed(7, 3));
        assert_ne!(schedule_seed(7, 3), schedule_seed(8, 3));
    }
}
