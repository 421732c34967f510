//! `rewind-fuzz fork FILE.rwd --at STEP`: the recorded run up to a step,
//! then many schedules from there; a table of how they ended, and the
//! first continuation of each outcome kept as a reproducer.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use super::UserError;
use super::common::{
    check_out_dir, consent_to_host_files, consent_to_oracle, load_rwd, print_json, vm_error,
};
use crate::engine::RunConfig;
use crate::explore::check::{CheckError, Checked, ForkPoint, Plan};
use crate::explore::fork::{At, Verdict};
use crate::fuzz::fork::{ForkFuzz, ForkFuzzError, fuzz_fork};
use crate::fuzz::{Budget, FuzzError, Pin};
use crate::kernel::vfs::SharedSource;
use crate::observe::failure::{FailureKind, table_row};
use crate::rwd::Rwd;
use crate::sched::{Schedule, StrategyKind, StrategySpec};

#[derive(Args, Debug)]
pub struct ForkArgs {
    /// The reproducer to fork.
    #[arg(value_name = "FILE.rwd")]
    pub file: PathBuf,
    /// Where to fork: after a step number, at the `end`, or decision:N
    /// (just before the run's N-th decision, which the continuations make
    /// their own way).
    #[arg(long, value_name = "STEP")]
    pub at: At,
    /// How many continuations to run (default 200). With --time, the most
    /// the fuzzer runs: it stops at whichever of the two ends first.
    #[arg(long)]
    pub schedules: Option<u64>,
    /// How the continuations schedule after the fork (random, pct:N, pos;
    /// default random). With --time, the strategy the fuzzer's fresh
    /// starts use (default: random, PCT and POS).
    #[arg(long)]
    pub strategy: Option<StrategySpec>,
    /// Machines running continuations at once (default: one per core).
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// Fuzz the continuations for this long (`90s`, `10m`) instead of
    /// running a fixed count: coverage-guided, every schedule the recorded
    /// one up to the fork, mutations only after it. With --schedules too,
    /// until either ends.
    #[arg(long = "time", short = 'V', value_parser = super::common::parse_time_budget)]
    pub time: Option<std::time::Duration>,
    /// Seeds the continuations' schedules (and the fuzzer).
    #[arg(long, short = 's', default_value_t = 1)]
    pub seed: u64,
    /// Where the reproducers of the first continuation of each outcome go.
    #[arg(long, short = 'o', default_value = "rewind-fork")]
    pub out: PathBuf,
    /// Print one JSON object with the table on stdout.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub consent: super::common::Consent,
    /// Replay the prefix in every continuation instead of restoring a
    /// snapshot at the fork (to measure what the snapshot saves).
    #[arg(long)]
    pub no_fork_snapshot: bool,
}

/// The continuations that ended one way: how many, the first of them
/// (its number and whole schedule).
struct Outcome {
    count: u64,
    first: u64,
    schedule: Schedule,
}

/// The continuations, run as a fixed count or fuzzed.
struct Ran {
    runs: u64,
    outcomes: BTreeMap<&'static str, Outcome>,
    elapsed: Duration,
    jobs: usize,
    /// How they were made, for the table's head: "with random", "fuzzed".
    how: String,
    restored: Restored,
}

impl Ran {
    fn execs_per_sec(&self) -> f64 {
        self.runs as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// One row of the table: an outcome, how many continuations ended so,
/// the first of them and its reproducer.
struct Row {
    count: u64,
    first: u64,
    reproducer: PathBuf,
}

pub fn fork(a: ForkArgs) -> Result<u8, UserError> {
    check_out_dir("--out", &a.out)?;
    if a.schedules == Some(0) {
        return Err(UserError::bad_input("--schedules must be at least 1"));
    }
    let name = a.file.display().to_string();
    let rwd = load_rwd(&a.file)?;
    consent_to_oracle(&rwd, &name, a.consent.run_oracle)?;
    consent_to_host_files(&rwd, &name, a.consent.read_host_files)?;
    let recorded = rwd.schedule();
    let steps = rwd.expected.steps;
    let at =
        a.at.step(&recorded, steps)
            .map_err(|e| UserError::bad_input(e.to_string()))?;
    let cfg = rwd.run_config();
    let source = rwd.source();
    let jobs = a
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, crate::fuzz::MAX_JOBS);
    let from = file_name(&a.file);
    let ran = match a.time {
        None => run_count(&a, (&cfg, &source), (&recorded, at), jobs)?,
        Some(time) => fuzz_for(&a, (&cfg, &source), (&recorded, at), (jobs, time))?,
    };
    std::fs::create_dir_all(&a.out).map_err(|e| {
        UserError::bad_input(format!("cannot create --out {}: {e}", a.out.display()))
    })?;
    let rows = save_firsts(&a, (&rwd, &cfg), at, &ran)?;
    let want = recorded_kind(&rwd);
    let hits = rows.get(want).map_or(0, |r| r.count);
    let verdict = Verdict::of(hits, ran.runs);
    let kept = recorded.decisions.iter().filter(|d| d.step <= at).count();
    let restored = &ran.restored;
    if a.json {
        let outcomes: serde_json::Map<String, serde_json::Value> = rows
            .iter()
            .map(|(k, r)| {
                let v = json!({
                    "count": r.count,
                    "first": r.first,
                    "reproducer": r.reproducer.display().to_string(),
                });
                (k.to_string(), v)
            })
            .collect();
        print_json(json!({
            "file": name,
            "from": from,
            "at": at,
            "steps": steps,
            "decisions_kept": kept,
            "decisions": recorded.decisions.len(),
            "mode": if a.time.is_some() { "fuzz" } else { "schedules" },
            "strategy": strategy_name(&a),
            "schedules": ran.runs,
            "recorded": want,
            "verdict": verdict.as_str(),
            "outcomes": outcomes,
            "snapshot_step": restored.step,
            "restored": restored.runs,
            "restore_us": restored.mean_us,
            "execs_per_sec": ran.execs_per_sec(),
            "elapsed_s": ran.elapsed.as_secs_f64(),
        }));
    } else {
        let told = Told {
            name: &name,
            at,
            steps,
            kept,
            want,
            verdict,
        };
        print_table(&ran, &rows, &told, recorded.decisions.len());
    }
    Ok(0)
}

/// The strategy as the JSON names it: the fixed count's, or the one the
/// fuzzer's fresh starts use (`mix` for its own mix).
fn strategy_name(a: &ForkArgs) -> String {
    match (&a.strategy, a.time) {
        (Some(s), _) => s.to_string(),
        (None, None) => "random".into(),
        (None, Some(_)) => "mix".into(),
    }
}

/// A fixed count of continuations, each a schedule of the strategy.
fn run_count(
    a: &ForkArgs,
    (cfg, source): (&RunConfig, &SharedSource),
    (recorded, at): (&Schedule, u64),
    jobs: usize,
) -> Result<Ran, UserError> {
    let strategy = a
        .strategy
        .clone()
        .unwrap_or(StrategySpec::Kind(StrategyKind::Random));
    let plan = Plan {
        strategy: strategy.clone(),
        schedules: a.schedules.unwrap_or(DEFAULT_SCHEDULES),
        jobs,
        seed: a.seed,
        time: None,
        fork: Some(ForkPoint {
            decisions: recorded.decisions.clone(),
            at,
            from: file_name(&a.file),
            snapshot: !a.no_fork_snapshot,
        }),
    };
    let checked =
        super::check::with_progress_bar(a.json, cfg, source, &plan).map_err(|e| match e {
            CheckError::Vm(e) => vm_error(e),
            e => UserError::bad_input(e.to_string()),
        })?;
    let mut outcomes: BTreeMap<&'static str, Outcome> = BTreeMap::new();
    for t in &checked.trials {
        outcomes
            .entry(t.kind())
            .and_modify(|o| o.count += 1)
            .or_insert_with(|| Outcome {
                count: 1,
                first: t.index,
                schedule: t.report.schedule.clone(),
            });
    }
    Ok(Ran {
        runs: checked.trials.len() as u64,
        outcomes,
        elapsed: checked.elapsed,
        jobs: checked.jobs,
        how: format!("with {strategy}"),
        restored: Restored::of(&checked),
    })
}

/// The continuations fuzzed for `time` (and at most `--schedules` of
/// them), the recorded run pinned up to the fork.
fn fuzz_for(
    a: &ForkArgs,
    (cfg, source): (&RunConfig, &SharedSource),
    (recorded, at): (&Schedule, u64),
    (jobs, time): (usize, Duration),
) -> Result<Ran, UserError> {
    let mut mix = crate::fuzz::StrategyMix::default();
    match &a.strategy {
        None => {}
        Some(StrategySpec::Kind(k)) if k.is_seeded() => mix.kinds = vec![*k],
        Some(s) => {
            return Err(UserError::bad_input(format!(
                "--strategy {s} with --time: the fuzzer's fresh starts take random, pct:N or pos"
            )));
        }
    }
    let f = ForkFuzz {
        run: cfg.clone(),
        snapshot: !a.no_fork_snapshot,
        pin: Pin {
            decisions: recorded.decisions.clone(),
            until: at,
        },
        seed: a.seed,
        jobs,
        budget: Budget {
            time: Some(time),
            execs: a.schedules,
        },
        mix,
    };
    let bar = match (a.json, a.schedules) {
        (true, _) => ProgressBar::hidden(),
        (false, Some(n)) => ProgressBar::new(n),
        (false, None) => ProgressBar::new_spinner(),
    };
    let template = if a.schedules.is_some() {
        "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} continuations fuzzed, {per_sec} {msg}"
    } else {
        "{spinner} [{elapsed_precise}] {pos} continuations fuzzed, {per_sec} {msg}"
    };
    bar.set_style(ProgressStyle::with_template(template).expect("valid template"));
    let source = (*source).clone();
    let fuzzed = fuzz_fork(&f, source, |runs, kinds| {
        bar.set_position(runs);
        bar.set_message(format!(
            "{kinds} outcome{}",
            if kinds == 1 { "" } else { "s" }
        ));
    });
    bar.finish_and_clear();
    let fuzzed = fuzzed.map_err(|e| match e {
        ForkFuzzError::Fuzz(FuzzError::Vm(e)) => vm_error(e),
        e => UserError::bad_input(e.to_string()),
    })?;
    let origin = format!(
        "a fork of {} at step {at}, then fuzzed (seed {})",
        file_name(&a.file),
        a.seed
    );
    let outcomes = fuzzed
        .outcomes
        .into_iter()
        .map(|(k, t)| {
            let mut schedule = t.schedule;
            schedule.origin = origin.clone();
            let o = Outcome {
                count: t.count,
                first: t.first,
                schedule,
            };
            (k, o)
        })
        .collect();
    Ok(Ran {
        runs: fuzzed.runs,
        outcomes,
        elapsed: fuzzed.elapsed,
        jobs: fuzzed.jobs,
        how: "fuzzed".into(),
        restored: Restored {
            step: fuzzed.restored_at,
            runs: fuzzed.restored,
            mean_us: fuzzed.restore_us as f64 / fuzzed.restored.max(1) as f64,
        },
    })
}

/// Continuations a fork runs when not told.
const DEFAULT_SCHEDULES: u64 = 200;

/// What the table's head and foot say.
struct Told<'a> {
    name: &'a str,
    at: u64,
    steps: u64,
    kept: usize,
    want: &'static str,
    verdict: Verdict,
}

/// The continuations that started from the latest snapshot: the fork's,
/// unless the fork is before the usual one.
struct Restored {
    step: Option<u64>,
    runs: u64,
    mean_us: f64,
}

impl Restored {
    fn of(checked: &Checked) -> Restored {
        let step = checked
            .trials
            .iter()
            .filter_map(|t| t.report.restored_at)
            .max();
        let from = || {
            checked
                .trials
                .iter()
                .filter(move |t| step.is_some() && t.report.restored_at == step)
        };
        let runs = from().count() as u64;
        let us: u64 = from().map(|t| t.report.restore_us).sum();
        Restored {
            step,
            runs,
            mean_us: us as f64 / runs.max(1) as f64,
        }
    }
}

/// The outcome kind the recorded run had, as the table names kinds.
fn recorded_kind(rwd: &Rwd) -> &'static str {
    let inversions = !rwd.potential_deadlocks().is_empty();
    table_row(FailureKind::of(&rwd.outcome(), inversions, &rwd.ok_codes).as_ref())
}

/// The file's name, without its directory.
fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// Records the first continuation of each outcome from scratch and keeps
/// it as `OUT/NAME-at-STEP-KIND.rwd`.
fn save_firsts(
    a: &ForkArgs,
    (rwd, cfg): (&Rwd, &RunConfig),
    at: u64,
    ran: &Ran,
) -> Result<BTreeMap<&'static str, Row>, UserError> {
    let stem = file_name(&a.file);
    let stem = stem.strip_suffix(".rwd").unwrap_or(&stem);
    let mut rows = BTreeMap::new();
    for (kind, o) in &ran.outcomes {
        let slug: String = kind
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let path = a
            .out
            .join(format!("{stem}-at-{at}-{}.rwd", slug.trim_end_matches('-')));
        let (made, _) = crate::rwd::record(cfg, rwd.source(), &o.schedule).map_err(vm_error)?;
        super::common::save_rwd(&made, &path, !cfg.exclude_files.is_empty())?;
        let row = Row {
            count: o.count,
            first: o.first,
            reproducer: path,
        };
        rows.insert(*kind, row);
    }
    Ok(rows)
}

fn print_table(ran: &Ran, rows: &BTreeMap<&'static str, Row>, t: &Told<'_>, decisions: usize) {
    let n = ran.runs;
    let jobs = ran.jobs;
    eprintln!(
        "{} forked after step {} of {} ({} of its {decisions} decisions as recorded): \
         {n} continuations {} in {:.1}s ({:.1}/s on {jobs} job{})",
        crate::escape::line(t.name),
        t.at,
        t.steps,
        t.kept,
        ran.how,
        ran.elapsed.as_secs_f64(),
        ran.execs_per_sec(),
        if jobs == 1 { "" } else { "s" }
    );
    eprintln!(
        "  {:<20} {:>13} {:>7} {:>6}  reproducer",
        "outcome", "continuations", "share", "first"
    );
    for (kind, r) in rows {
        eprintln!(
            "  {kind:<20} {:>13} {:>6.1}% {:>6}  {}",
            r.count,
            100.0 * r.count as f64 / n.max(1) as f64,
            format!("#{}", r.first),
            crate::escape::line(&r.reproducer.display().to_string())
        );
    }
    let hits = rows.get(t.want).map_or(0, |r| r.count);
    eprintln!(
        "from here the recorded outcome ({}) happens {}: in {hits} of {n} continuations",
        t.want,
        t.verdict.as_str()
    );
    let r = &ran.restored;
    if let Some(step) = r.step {
        eprintln!(
            "  {} of them from a snapshot after step {step} ({:.0} µs a restore)",
            r.runs, r.mean_us
        );
    }
}
