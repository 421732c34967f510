//! `rewind-fuzz run`: one run, its output, its outcome.

use std::path::{Path, PathBuf};

use clap::Args;

use super::UserError;
use super::common::{
    TargetArgs, check_output, consent_to_oracle, estimate_steps, exit_code, report_json, save_run,
    vm_error,
};
use crate::engine::{RunConfig, RunReport, Vm};
use crate::explore::target::replay_as_made;
use crate::kernel::vfs::{FileSource, SharedSource};
use crate::report::signature::{Naming, Signature};
use crate::rwd::Rwd;
use crate::sched::{Schedule, StrategySpec};

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Scheduling strategy: default, random, pct:D, pos, or schedule:FILE.
    #[arg(long, default_value = "default")]
    pub strategy: StrategySpec,
    /// Replay the decisions saved in FILE (the same as --strategy
    /// schedule:FILE), a schedule file or a reproducer (.rwd). A
    /// reproducer's run is run again on --target (another build re-tests a
    /// fix) with its arguments, environment, seed, level, oracle and exit
    /// codes; the options given here replace those.
    #[arg(long, value_name = "FILE", conflicts_with = "strategy")]
    pub schedule: Option<PathBuf>,
    /// Stop the run after this long (e.g. 30s, 5m) of wall-clock time:
    /// nothing is written then.
    #[arg(long = "time", short = 'V', value_parser = super::common::parse_time_budget)]
    pub time: Option<std::time::Duration>,
    /// Save the decisions this run took, so --schedule FILE replays it.
    #[arg(long, value_name = "FILE")]
    pub save_schedule: Option<PathBuf>,
    /// Save a reproducer of this run (.rwd): its files, schedule and outcome,
    /// for `rewind-fuzz replay` and `show` on any machine.
    #[arg(long, value_name = "FILE")]
    pub save_rwd: Option<PathBuf>,
    /// Run the host command a reproducer given as --schedule judges its
    /// output with (`--oracle`); without it, such a reproducer is refused.
    #[arg(long)]
    pub run_oracle: bool,
    /// The options given on the command line (set after parsing): with a
    /// reproducer as --schedule, they replace its settings.
    #[arg(skip)]
    pub given: std::collections::BTreeSet<String>,
    /// Print every step: thread, operation, object, call site, result.
    #[arg(long)]
    pub trace: bool,
    /// Print one JSON object describing the run on stdout (guest output is captured in it).
    #[arg(long)]
    pub json: bool,
    /// Serve the run to gdb: replay it to --gdb-at and wait for gdb to
    /// attach (forward and reverse execution; see `rewind-fuzz gdb`).
    #[arg(long, conflicts_with = "json")]
    pub gdb: bool,
    /// Where the run stops for gdb: a step number (0: the first
    /// instruction) or `end`.
    #[arg(long, value_name = "STEP|end", default_value = "0")]
    pub gdb_at: crate::gdb::StartAt,
    /// The address gdb connects to (port 0: any free port); a loopback
    /// address unless --gdb-listen-any-address.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub gdb_listen: String,
    /// Allow a --gdb-listen address other hosts can reach. The gdb
    /// protocol has no authentication: whoever reaches the port reads the
    /// run's memory and recorded files.
    #[arg(long)]
    pub gdb_listen_any_address: bool,
}

/// What `--schedule FILE` holds.
enum Replaying {
    /// A saved schedule, and the failure it was saved for, if it says.
    Schedule(Schedule, Option<(Signature, Naming)>),
    /// A reproducer: its schedule runs with its settings.
    Reproducer(Box<Rwd>),
}

/// Reads `--schedule FILE`: a saved schedule or a reproducer.
fn read_schedule(file: &Path) -> Result<Replaying, UserError> {
    let name = file.display().to_string();
    let data = crate::fsutil::read_foreign(file, crate::rwd::MAX_FILE)
        .map_err(|e| UserError::bad_input(format!("cannot read --schedule {name}: {e}")))?;
    if Rwd::looks_like(&data) {
        let rwd = Rwd::decode(&name, &data).map_err(|e| UserError::bad_input(e.to_string()))?;
        if let Some(why) = rwd.incompatibility() {
            return Err(UserError::bad_input(format!(
                "{name} cannot be replayed here: {why}"
            )));
        }
        return Ok(Replaying::Reproducer(Box::new(rwd)));
    }
    let schedule =
        Schedule::from_json(&name, &data).map_err(|e| UserError::bad_input(e.to_string()))?;
    let failure = Schedule::saved_failure(&data).and_then(|f| Signature::from_note(&f));
    Ok(Replaying::Schedule(schedule, failure))
}

/// The run a reproducer records, on `given`'s program (another build, or
/// the same one) with this host's files: its arguments, environment, seed,
/// CPUs, step budget, memory, level, oracle and the exit codes that are
/// success, except those given on the command line (`given`), which replace
/// them and are named in a note.
fn reproducers_settings(
    rwd: &Rwd,
    name: &str,
    given: &crate::engine::RunConfig,
    a: &RunArgs,
) -> Result<crate::engine::RunConfig, UserError> {
    let mut cfg = rwd.run_config();
    cfg.kernel.exe = given.kernel.exe.clone();
    if let (Some(mine), Some(theirs)) = (cfg.kernel.argv.first_mut(), given.kernel.argv.first()) {
        *mine = theirs.clone();
    }
    cfg.exclude_files = given.exclude_files.clone();
    cfg.snapshot_at = given.snapshot_at;
    let t = &a.target;
    let mut replaced = Vec::new();
    let mut given_here = |id: &str, flag: &str| {
        let is = a.given.contains(id);
        if is {
            replaced.push(flag.to_string());
        }
        is
    };
    if given_here("args", "the arguments after --") {
        cfg.kernel.argv.truncate(1);
        cfg.kernel.argv.extend(t.args.iter().cloned());
    }
    if given_here("env", "--env") {
        for e in &t.env {
            let key = e.split_once('=').map_or(e.as_str(), |(k, _)| k);
            cfg.kernel
                .env
                .retain(|x| x.split_once('=').map(|(k, _)| k) != Some(key));
            cfg.kernel.env.push(e.clone());
        }
    }
    if given_here("cpus", "--cpus") {
        cfg.kernel.cpus = given.kernel.cpus;
    }
    if given_here("seed", "--seed") {
        cfg.kernel.seed = given.kernel.seed;
    }
    if given_here("max_steps", "--max-steps") {
        cfg.kernel.max_steps = given.kernel.max_steps;
    }
    if given_here("hang_steps", "--hang-steps") {
        cfg.kernel.hang_steps = given.kernel.hang_steps;
    }
    if given_here("timeout", "--timeout") {
        cfg.timeout = given.timeout;
    }
    if given_here("cwd", "--cwd") {
        cfg.kernel.cwd = given.kernel.cwd.clone();
    }
    if given_here("memory", "--memory") {
        cfg.memory_mib = given.memory_mib;
    }
    if given_here("no_shim", "--no-shim") {
        cfg.shim = given.shim;
    }
    if given_here("ok_exit_codes", "--ok-exit-codes") {
        cfg.ok_codes = given.ok_codes.clone();
    }
    let expect = given_here("expect_stdout", "--expect-stdout");
    if expect || given_here("oracle", "--oracle") {
        cfg.oracle = given.oracle.clone();
    } else {
        consent_to_oracle(rwd, name, a.run_oracle)?;
    }
    let recorded_on = crate::escape::line(&rwd.target.exe).into_owned();
    eprintln!(
        "rewind-fuzz: note: running {name}'s schedule with its arguments, environment, seed, level, oracle and exit codes (recorded on {recorded_on}); the files are this host's"
    );
    if !replaced.is_empty() {
        let theirs = crate::escape::shell_words(&rwd.target.argv[1..]);
        eprintln!(
            "rewind-fuzz: note: given here, these replace the reproducer's: {} (its arguments: {theirs})",
            replaced.join(", ")
        );
    }
    Ok(cfg)
}

pub fn run(a: RunArgs) -> Result<u8, UserError> {
    check_output("--save-rwd", a.save_rwd.as_deref())?;
    check_output("--save-schedule", a.save_schedule.as_deref())?;
    let Prepared {
        cfg,
        spec,
        expected,
        name,
    } = prepare(&a)?;
    let source = FileSource::host();
    if a.gdb {
        let listener = super::gdb::listen(
            &a.gdb_listen,
            a.gdb_listen_any_address,
            "--gdb-listen-any-address",
        )?;
        return super::gdb::run_under_gdb(&cfg, source, &spec, a.target.seed, a.gdb_at, listener);
    }
    let (vm, mut report) = run_once(&a, &cfg, &spec, source)?;
    let again = expected.map(|(want, naming)| again(&vm, &report, want, naming));
    let written = save(&a, &cfg, &vm, &mut report, again.as_ref(), &name)?;
    let mut sym = crate::report::Symbols::new(&vm);
    if a.json {
        print_json(&report, &mut sym);
    } else {
        print_text(&report, &mut sym, again.as_ref(), &name);
    }
    if written == Saved::NotReproduced {
        return Ok(1);
    }
    Ok(exit_code(&report.outcome))
}

/// What a run is made of once its schedule is read: the configuration
/// (a reproducer's settings where it has them), the strategy, and the
/// failure the run is expected to give again, as its signature names it.
struct Prepared {
    cfg: RunConfig,
    spec: StrategySpec,
    expected: Option<(Signature, Naming)>,
    /// The schedule's file, for messages ("" when none).
    name: String,
}

fn prepare(a: &RunArgs) -> Result<Prepared, UserError> {
    let mut cfg = a.target.config()?;
    let file = match (&a.schedule, &a.strategy) {
        (Some(f), _) | (None, StrategySpec::Schedule(f)) => Some(f.clone()),
        (None, _) => None,
    };
    let replaying = file.as_deref().map(read_schedule).transpose()?;
    let name = file
        .as_ref()
        .map(|f| f.display().to_string())
        .unwrap_or_default();
    let mut expected: Option<(Signature, Naming)> = None;
    let spec = match (replaying, &file) {
        (Some(Replaying::Reproducer(rwd)), Some(f)) => {
            cfg = reproducers_settings(&rwd, &name, &cfg, a)?;
            if rwd.expected.signature.is_failure() {
                expected = Some((rwd.expected.signature.clone(), rwd.signature_naming));
            }
            StrategySpec::Loaded(Box::new(rwd.schedule()), f.clone())
        }
        (Some(Replaying::Schedule(s, failure)), Some(f)) => {
            expected = failure;
            a.target
                .target()
                .limits_of_older_schedule(&mut cfg.kernel, &s);
            StrategySpec::Loaded(Box::new(s), f.clone())
        }
        _ => a.strategy.clone(),
    };
    cfg.stream_output = !a.json;
    if let Some(t) = a.time {
        cfg.cancel = cfg
            .cancel
            .clone()
            .with_deadline(std::time::Instant::now() + t);
    }
    // A replayed schedule runs at the level it was made at.
    if let StrategySpec::Loaded(s, _) = &spec {
        replay_as_made(&mut cfg, s, a.target.sync_points, &name)?;
    }
    Ok(Prepared {
        cfg,
        spec,
        expected,
        name,
    })
}

/// The run itself: the machine, and what it reports.
fn run_once(
    a: &RunArgs,
    cfg: &RunConfig,
    spec: &StrategySpec,
    source: SharedSource,
) -> Result<(Vm, RunReport), UserError> {
    let steps = estimate_steps(cfg, spec, &source)?;
    let strategy = spec
        .build(a.target.seed, steps)
        .map_err(|e| UserError::bad_input(e.to_string()))?;
    let mut vm = Vm::new(cfg, source).map_err(vm_error)?;
    vm.set_strategy(strategy);
    if a.trace || a.save_rwd.is_some() {
        vm.record_events();
    }
    let mut report = vm.run().map_err(|e| match (e, a.time) {
        (crate::engine::VmError::Cancelled, Some(t)) if !super::common::interrupted() => {
            UserError {
                message: format!(
                    "the run went on past --time {}; it was stopped and nothing was written",
                    humantime::format_duration(t)
                ),
                code: 1,
            }
        }
        (e, _) => vm_error(e),
    })?;
    report.schedule.origin = format!("{spec} seed {}", cfg.kernel.seed);
    Ok((vm, report))
}

/// Whether the failure `want` the schedule was saved for happened again.
fn again(vm: &Vm, report: &RunReport, want: Signature, naming: Naming) -> (Signature, Again) {
    let got = crate::report::RunFacts::of(vm, report).signature(
        report,
        &mut crate::report::symbols::Symbolizer::new(),
        naming,
    );
    let verdict = if got == want {
        Again::Same
    } else if got.is_failure() {
        Again::Other(got)
    } else {
        Again::Gone
    };
    (want, verdict)
}

/// What `--save-rwd` came to.
#[derive(PartialEq, Eq)]
enum Saved {
    /// Written, or not asked for.
    AsAsked,
    /// The failure the schedule was saved for did not happen again: no
    /// reproducer was written as though it had.
    NotReproduced,
}

/// Writes what `--save-rwd` and `--save-schedule` ask for.
fn save(
    a: &RunArgs,
    cfg: &RunConfig,
    vm: &Vm,
    report: &mut RunReport,
    again: Option<&(Signature, Again)>,
    name: &str,
) -> Result<Saved, UserError> {
    // Files told from a private reproducer are private too.
    let mut readers = if cfg.exclude_files.is_empty() {
        crate::fsutil::Readers::Everyone
    } else {
        crate::fsutil::Readers::Owner
    };
    let mut saved = Saved::AsAsked;
    if let Some(f) = &a.save_rwd {
        // A recording is made to keep a failure: one that did not happen
        // again is not written as though it had.
        if let Some((want, verdict)) = again
            && !matches!(verdict, Again::Same)
        {
            saved = Saved::NotReproduced;
            eprintln!(
                "rewind-fuzz: this run did not reproduce the failure {name} was saved for ({}); {} was not written",
                crate::escape::line(&want.to_string()),
                f.display()
            );
        } else {
            readers = save_run(cfg, vm, report, f)?;
        }
        if !a.trace {
            report.events = None;
        }
    }
    if let Some(f) = &a.save_schedule {
        report
            .schedule
            .save_as(f, readers)
            .map_err(|e| UserError::bad_input(e.to_string()))?;
    }
    Ok(saved)
}

/// `--json`: the run as one object on stdout.
fn print_json(report: &RunReport, sym: &mut crate::report::Symbols) {
    let mut v = report_json(report, sym);
    if let Some(ev) = &report.events {
        v["events"] = serde_json::Value::Array(ev.iter().map(|e| sym.event_json(e)).collect());
    }
    v["potential_deadlocks"] = sym.inversions_json(&report.potential_deadlocks);
    v["outcome"]["details"] = sym.outcome_details_json(&report.outcome);
    for (name, kept, wrote) in [
        ("stdout", report.stdout.len(), report.stdout_bytes),
        ("stderr", report.stderr.len(), report.stderr_bytes),
    ] {
        let cut = wrote > kept as u64;
        v[format!("{name}_truncated")] = serde_json::Value::Bool(cut);
        if cut {
            eprintln!(
                "rewind-fuzz: warning: the program wrote {wrote} bytes to {name}; the JSON holds the first {kept} (see {name}_bytes)"
            );
        }
    }
    super::common::print_json(v);
}

/// The run in words on stderr: its events (`--trace`), notes, outcome,
/// potential deadlocks, and whether a saved failure happened again.
fn print_text(
    report: &RunReport,
    sym: &mut crate::report::Symbols,
    again: Option<&(Signature, Again)>,
    name: &str,
) {
    if let Some(ev) = &report.events {
        for e in ev {
            eprintln!("{}", sym.event_line(e));
        }
    }
    for n in &report.notes {
        eprintln!("rewind-fuzz: note: {n}");
    }
    eprintln!(
        "rewind-fuzz: {} after {} steps (trace {})",
        report.outcome.summary(),
        report.steps,
        report.trace_hash
    );
    for line in sym.outcome_lines(&report.outcome) {
        eprintln!("  {line}");
    }
    for inv in &report.potential_deadlocks {
        for line in sym.inversion_lines(inv) {
            eprintln!("{line}");
        }
    }
    if let Some((want, verdict)) = again {
        let want = crate::escape::line(&want.to_string()).into_owned();
        match verdict {
            Again::Same => {
                eprintln!("rewind-fuzz: the failure {name} records happened again: {want}")
            }
            Again::Other(got) => eprintln!(
                "rewind-fuzz: the run failed another way than {name} records: {}; it records {want}",
                crate::escape::line(&got.to_string())
            ),
            Again::Gone => eprintln!(
                "rewind-fuzz: the failure {name} records did not happen: it records {want}"
            ),
        }
    }
}

/// How a run compares with the failure its schedule was saved for.
enum Again {
    Same,
    Other(Signature),
    Gone,
}
