//! `rewind-fuzz run`: one run, its output, its outcome.

use std::path::PathBuf;

use clap::Args;

use super::UserError;
use super::common::{
    TargetArgs, check_output, estimate_steps, exit_code, replay_level, report_json, save_run,
    vm_error,
};
use crate::kernel::vfs::FileSource;
use crate::sched::{Schedule, StrategySpec};
use crate::vm::Vm;

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Scheduling strategy: default, random, pct:D, pos, or schedule:FILE.
    #[arg(long, default_value = "default")]
    pub strategy: StrategySpec,
    /// Replay the decisions saved in FILE (the same as --strategy
    /// schedule:FILE), a schedule file or a reproducer (.rwd): with
    /// another --target, re-tests a fix against the schedule that broke it.
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

/// What `--schedule FILE` names: a saved schedule, or a reproducer whose
/// schedule is replayed on `--target` (which may be another build of the
/// program: re-testing a fix against the schedule that broke it).
fn schedule_spec(file: &std::path::Path, exe: &str) -> Result<StrategySpec, UserError> {
    let data = crate::fsutil::read_foreign(file, crate::rwd::MAX_FILE).map_err(|e| {
        UserError::bad_input(format!("cannot read --schedule {}: {e}", file.display()))
    })?;
    if !crate::rwd::Rwd::looks_like(&data) {
        return Ok(StrategySpec::Schedule(file.to_path_buf()));
    }
    let name = file.display().to_string();
    let rwd =
        crate::rwd::Rwd::decode(&name, &data).map_err(|e| UserError::bad_input(e.to_string()))?;
    if rwd.target.exe != exe {
        eprintln!(
            "rewind-fuzz: note: replaying the schedule of {name} (recorded on {}) on {exe}; the files and arguments are this command's",
            crate::escape::line(&rwd.target.exe)
        );
    }
    Ok(StrategySpec::Loaded(
        Box::new(rwd.schedule()),
        file.to_path_buf(),
    ))
}

pub fn run(a: RunArgs) -> Result<u8, UserError> {
    check_output("--save-rwd", a.save_rwd.as_deref())?;
    check_output("--save-schedule", a.save_schedule.as_deref())?;
    let mut cfg = a.target.config()?;
    cfg.stream_output = !a.json;
    if let Some(t) = a.time {
        cfg.cancel = cfg
            .cancel
            .clone()
            .with_deadline(std::time::Instant::now() + t);
    }
    let spec = match (&a.schedule, &a.strategy) {
        (Some(f), _) | (None, StrategySpec::Schedule(f)) => schedule_spec(f, &cfg.kernel.exe)?,
        (None, other) => other.clone(),
    };
    // A replayed schedule runs at the level it was made at.
    let read;
    let replayed = match &spec {
        StrategySpec::Schedule(f) => {
            read = Schedule::load(f).map_err(|e| UserError::bad_input(e.to_string()))?;
            Some((&read, f))
        }
        StrategySpec::Loaded(s, f) => Some((&**s, f)),
        StrategySpec::Kind(_) => None,
    };
    if let Some((s, f)) = replayed {
        let name = f.display().to_string();
        cfg.kernel.sync_points = replay_level(a.target.sync_points, s, &name)?;
    }
    let source = FileSource::host();
    if a.gdb {
        let listener = super::gdb::listen(
            &a.gdb_listen,
            a.gdb_listen_any_address,
            "--gdb-listen-any-address",
        )?;
        return super::gdb::run_under_gdb(&cfg, source, &spec, a.target.seed, a.gdb_at, listener);
    }
    let steps = estimate_steps(&cfg, &spec, &source)?;
    let strategy = spec
        .build(a.target.seed, steps)
        .map_err(|e| UserError::bad_input(e.to_string()))?;
    let mut vm = Vm::new(&cfg, source).map_err(vm_error)?;
    vm.set_strategy(strategy);
    if a.trace || a.save_rwd.is_some() {
        vm.record_events();
    }
    let mut report = vm.run().map_err(|e| match (e, a.time) {
        (crate::vm::VmError::Cancelled, Some(t)) if !super::common::interrupted() => UserError {
            message: format!(
                "the run went on past --time {}; it was stopped and nothing was written",
                humantime::format_duration(t)
            ),
            code: 1,
        },
        (e, _) => vm_error(e),
    })?;
    report.schedule.origin = format!("{spec} seed {}", a.target.seed);
    // Files told from a private reproducer are private too.
    let mut readers = if cfg.exclude_files.is_empty() {
        crate::fsutil::Readers::Everyone
    } else {
        crate::fsutil::Readers::Owner
    };
    if let Some(f) = &a.save_rwd {
        readers = save_run(&cfg, &vm, &report, f)?;
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
    let mut sym = crate::report::Symbols::new(&vm);
    if a.json {
        let mut v = report_json(&report, &mut sym);
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
    } else {
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
    }
    Ok(exit_code(&report.outcome))
}
