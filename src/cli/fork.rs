//! `rewind-fuzz fork FILE.rwd --at STEP`: the recorded run up to a step,
//! then many schedules from there; a table of how they ended, and the
//! first continuation of each outcome kept as a reproducer.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::json;

use super::UserError;
use super::common::{
    check_out_dir, consent_to_host_files, consent_to_oracle, load_rwd, print_json, vm_error,
};
use crate::explore::check::{CheckError, Checked, ForkPoint, Plan, Trial};
use crate::explore::fork::{At, Verdict};
use crate::observe::failure::{FailureKind, table_row};
use crate::rwd::Rwd;
use crate::sched::StrategySpec;

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
    /// How many continuations to run.
    #[arg(long, default_value_t = 200)]
    pub schedules: u64,
    /// How the continuations schedule after the fork (random, pct:N, pos).
    #[arg(long, default_value = "random")]
    pub strategy: StrategySpec,
    /// Machines running continuations at once (default: one per core).
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// Stop after this long (`90s`, `10m`): the table is of the
    /// continuations that ended by then.
    #[arg(long = "time", short = 'V', value_parser = super::common::parse_time_budget)]
    pub time: Option<std::time::Duration>,
    /// Seeds the continuations' schedules.
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
}

/// One row of the table: an outcome, how many continuations ended so,
/// the first of them and its reproducer.
struct Row<'t> {
    count: u64,
    first: &'t Trial,
    reproducer: PathBuf,
}

pub fn fork(a: ForkArgs) -> Result<u8, UserError> {
    check_out_dir("--out", &a.out)?;
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
    let plan = Plan {
        strategy: a.strategy.clone(),
        schedules: a.schedules,
        jobs: a
            .jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        seed: a.seed,
        time: a.time,
        fork: Some(ForkPoint {
            decisions: recorded.decisions.clone(),
            at,
            from: file_name(&a.file),
        }),
    };
    let checked =
        super::check::with_progress_bar(a.json, &cfg, &source, &plan).map_err(|e| match e {
            CheckError::Vm(e) => vm_error(e),
            e => UserError::bad_input(e.to_string()),
        })?;
    std::fs::create_dir_all(&a.out).map_err(|e| {
        UserError::bad_input(format!("cannot create --out {}: {e}", a.out.display()))
    })?;
    let rows = save_firsts(&a, (&rwd, &cfg), at, &checked)?;
    let want = recorded_kind(&rwd);
    let hits = rows.get(want).map_or(0, |r| r.count);
    let verdict = Verdict::of(hits, checked.trials.len() as u64);
    let kept = recorded.decisions.iter().filter(|d| d.step <= at).count();
    let restored = Restored::of(&checked);
    if a.json {
        let outcomes: serde_json::Map<String, serde_json::Value> = rows
            .iter()
            .map(|(k, r)| {
                let v = json!({
                    "count": r.count,
                    "first": r.first.index,
                    "reproducer": r.reproducer.display().to_string(),
                });
                (k.to_string(), v)
            })
            .collect();
        print_json(json!({
            "file": name,
            "at": at,
            "steps": steps,
            "decisions_kept": kept,
            "decisions": recorded.decisions.len(),
            "strategy": a.strategy.to_string(),
            "schedules": checked.trials.len(),
            "recorded": want,
            "verdict": verdict.as_str(),
            "outcomes": outcomes,
            "snapshot_step": restored.step,
            "restored": restored.runs,
            "restore_us": restored.mean_us,
            "execs_per_sec": checked.execs_per_sec(),
            "elapsed_s": checked.elapsed.as_secs_f64(),
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
        print_table(&a, &checked, &rows, &told, recorded.decisions.len());
        if let Some(step) = restored.step {
            eprintln!(
                "  {} of them from a snapshot after step {step} ({:.0} µs a restore)",
                restored.runs, restored.mean_us
            );
        }
    }
    Ok(0)
}

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
fn save_firsts<'t>(
    a: &ForkArgs,
    (rwd, cfg): (&Rwd, &crate::engine::RunConfig),
    at: u64,
    checked: &'t Checked,
) -> Result<BTreeMap<&'static str, Row<'t>>, UserError> {
    let stem = file_name(&a.file);
    let stem = stem.strip_suffix(".rwd").unwrap_or(&stem);
    let mut rows: BTreeMap<&'static str, Row<'t>> = BTreeMap::new();
    for t in &checked.trials {
        if let Some(r) = rows.get_mut(t.kind()) {
            r.count += 1;
            continue;
        }
        let slug: String = t
            .kind()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let path = a
            .out
            .join(format!("{stem}-at-{at}-{}.rwd", slug.trim_end_matches('-')));
        let (made, _) =
            crate::rwd::record(cfg, rwd.source(), &t.report.schedule).map_err(vm_error)?;
        super::common::save_rwd(&made, &path, !cfg.exclude_files.is_empty())?;
        rows.insert(
            t.kind(),
            Row {
                count: 1,
                first: t,
                reproducer: path,
            },
        );
    }
    Ok(rows)
}

fn print_table(
    a: &ForkArgs,
    checked: &Checked,
    rows: &BTreeMap<&'static str, Row<'_>>,
    t: &Told<'_>,
    decisions: usize,
) {
    let n = checked.trials.len() as u64;
    let jobs = checked.jobs;
    eprintln!(
        "{} forked after step {} of {} ({} of its {decisions} decisions as recorded): \
         {n} continuations with {} in {:.1}s ({:.1}/s on {jobs} job{})",
        crate::escape::line(t.name),
        t.at,
        t.steps,
        t.kept,
        a.strategy,
        checked.elapsed.as_secs_f64(),
        checked.execs_per_sec(),
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
            format!("#{}", r.first.index),
            crate::escape::line(&r.reproducer.display().to_string())
        );
    }
    let hits = rows.get(t.want).map_or(0, |r| r.count);
    eprintln!(
        "from here the recorded outcome ({}) happens {}: in {hits} of {n} continuations",
        t.want,
        t.verdict.as_str()
    );
}
