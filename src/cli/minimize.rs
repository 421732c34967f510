//! `rewind-fuzz minimize INPUT -o OUT.rwd`: the fewest preemptions that
//! still give the same failure, written as a reproducer.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde_json::json;

use super::UserError;
use super::common::{
    TargetArgs, check_output, consent_to_host_files, consent_to_oracle, ctrl_c, interrupted,
    parse_time_budget, print_json, save_rwd, vm_error,
};
use crate::engine::{RunConfig, RunReport, VmError};
use crate::explore::minimize::{self, Budget, MinimizeError, Minimized};
use crate::explore::target::replay_as_made;
use crate::kernel::vfs::{FileSource, SharedSource};
use crate::report::signature::{Naming, Signature};
use crate::rwd::{self, Rwd};
use crate::sched::Schedule;

#[derive(Args, Debug)]
pub struct MinimizeArgs {
    /// A reproducer (.rwd), or a saved schedule (JSON) together with
    /// --target and the options it was run with.
    #[arg(value_name = "INPUT")]
    pub input: PathBuf,
    /// Where to write the minimized reproducer.
    #[arg(long, short = 'o', value_name = "OUT.rwd")]
    pub output: PathBuf,
    /// Run at most this many schedules (deterministic: the same input and
    /// budget give the same result).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub execs: Option<u64>,
    /// Spend at most this much time (e.g. 30s, 5m).
    #[arg(long, short = 'V', value_parser = parse_time_budget)]
    pub time: Option<Duration>,
    /// Print one JSON object with the result on stdout.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub target: ScheduleTarget,
}

/// The program a schedule INPUT belongs to, with the options it was run
/// with (a .rwd INPUT names its own). Unset options take `run`'s defaults.
#[derive(Args, Debug, Default)]
pub struct ScheduleTarget {
    /// The program the schedule INPUT was run on (or harness:NAME).
    #[arg(long, short = 't', value_name = "PATH")]
    pub target: Option<String>,
    /// CPUs the program was told it has.
    #[arg(long)]
    pub cpus: Option<u32>,
    /// The seed it ran with.
    #[arg(long, short = 's')]
    pub seed: Option<u64>,
    /// Its step limit.
    #[arg(long)]
    pub max_steps: Option<u64>,
    /// Its limit of steps without progress.
    #[arg(long)]
    pub hang_steps: Option<u64>,
    /// Its timeout (e.g. 10s).
    #[arg(long)]
    pub timeout: Option<String>,
    /// Its environment variables (repeatable).
    #[arg(long = "env", short = 'e', value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// Its working directory.
    #[arg(long)]
    pub cwd: Option<String>,
    /// Its guest memory in MiB.
    #[arg(long)]
    pub memory: Option<u64>,
    /// It ran without the pthread shim.
    #[arg(long)]
    pub no_shim: bool,
    /// Its scheduling points in user code [default: the schedule's].
    #[arg(long, value_name = "LEVEL")]
    pub sync_points: Option<crate::code::SyncPoints>,
    /// The stdout its correct runs print (its `--expect-stdout`).
    #[arg(long, value_name = "FILE")]
    pub expect_stdout: Option<PathBuf>,
    /// The host command that judged its output (its `--oracle`).
    #[arg(long, value_name = "CMD", conflicts_with = "expect_stdout")]
    pub oracle: Option<String>,
    /// Run the host command a .rwd INPUT judges its output with; without
    /// it, such a reproducer is refused.
    #[arg(long)]
    pub run_oracle: bool,
    /// Read the files a .rwd INPUT left out (`--exclude-files`) from this
    /// host; without it, such a reproducer is refused.
    #[arg(long)]
    pub read_host_files: bool,
    /// Its arguments.
    #[arg(last = true)]
    pub args: Vec<String>,
}

impl ScheduleTarget {
    fn given(&self) -> bool {
        self.target.is_some()
            || self.cpus.is_some()
            || self.seed.is_some()
            || self.max_steps.is_some()
            || self.hang_steps.is_some()
            || self.timeout.is_some()
            || !self.env.is_empty()
            || self.cwd.is_some()
            || self.memory.is_some()
            || self.no_shim
            || self.sync_points.is_some()
            || self.expect_stdout.is_some()
            || self.oracle.is_some()
            || !self.args.is_empty()
    }

    /// The options as `run` takes them (so they are checked the same way).
    fn target_args(&self) -> Result<Option<TargetArgs>, UserError> {
        let Some(target) = &self.target else {
            return Ok(None);
        };
        let mut argv: Vec<String> = vec!["minimize".into(), "--target".into(), target.clone()];
        let mut opt = |name: &str, v: Option<String>| {
            if let Some(v) = v {
                argv.push(format!("--{name}"));
                argv.push(v);
            }
        };
        opt("cpus", self.cpus.map(|v| v.to_string()));
        opt("seed", self.seed.map(|v| v.to_string()));
        opt("max-steps", self.max_steps.map(|v| v.to_string()));
        opt("hang-steps", self.hang_steps.map(|v| v.to_string()));
        opt("timeout", self.timeout.clone());
        opt("cwd", self.cwd.clone());
        opt("memory", self.memory.map(|v| v.to_string()));
        opt("sync-points", self.sync_points.map(|v| v.to_string()));
        opt(
            "expect-stdout",
            self.expect_stdout
                .as_ref()
                .map(|p| p.to_string_lossy().into_owned()),
        );
        opt("oracle", self.oracle.clone());
        for e in &self.env {
            argv.push("--env".into());
            argv.push(e.clone());
        }
        if self.no_shim {
            argv.push("--no-shim".into());
        }
        if !self.args.is_empty() {
            argv.push("--".into());
            argv.extend(self.args.iter().cloned());
        }
        #[derive(clap::Parser)]
        struct Wrap {
            #[command(flatten)]
            t: TargetArgs,
        }
        <Wrap as clap::Parser>::try_parse_from(argv)
            .map(|w| Some(w.t))
            .map_err(|e| {
                let msg = e.to_string();
                let first = msg.lines().next().unwrap_or("bad run options");
                UserError::bad_input(first.trim_start_matches("error: ").to_string())
            })
    }
}

/// A failing schedule of a program, and the failure to keep.
struct Input {
    cfg: RunConfig,
    source: SharedSource,
    schedule: Schedule,
    want: Signature,
    naming: Naming,
}

pub fn minimize(a: MinimizeArgs) -> Result<u8, UserError> {
    let name = a.input.display().to_string();
    check_output("-o", Some(&a.output))?;
    let input = read_input(&a, &name)?;
    let m = search(&a, &name, &input)?;
    let (out, report) = record(&input, &m)?;
    save_rwd(&out, &a.output, !input.cfg.exclude_files.is_empty())?;
    let size = std::fs::metadata(&a.output).map_or(0, |m| m.len());
    if a.json {
        print_json(json!({
            "input": name,
            "output": a.output.display().to_string(),
            "signature": input.want,
            "signature_id": input.want.id(),
            "decisions_before": m.before,
            "decisions_after": m.after,
            "window_before": m.window_before,
            "window_after": m.window_after,
            "execs": m.execs,
            "elapsed_s": m.elapsed.as_secs_f64(),
            "budget_ran_out": m.budget_ran_out,
            "steps": report.steps,
            "trace_hash": report.trace_hash,
            "bytes": size,
        }));
    } else {
        tell(&a, &name, &input, &m, size);
    }
    Ok(0)
}

/// INPUT, a reproducer or a schedule run on the target given, and the
/// failure it records or gives.
fn read_input(a: &MinimizeArgs, name: &str) -> Result<Input, UserError> {
    let data = crate::fsutil::read_foreign(&a.input, crate::rwd::MAX_FILE)
        .map_err(|e| UserError::bad_input(format!("cannot read {name}: {e}")))?;
    let input = if Rwd::looks_like(&data) {
        reproducer(a, name, &data)?
    } else {
        schedule(a, name, &data)?
    };
    if !input.want.is_failure() {
        return Err(UserError::bad_input(format!(
            "{name} records a run that did not fail: there is nothing to minimize"
        )));
    }
    Ok(input)
}

/// A reproducer INPUT: its run, with its settings and its failure.
fn reproducer(a: &MinimizeArgs, name: &str, data: &[u8]) -> Result<Input, UserError> {
    if a.target.given() {
        return Err(UserError::bad_input(format!(
            "{name} is a reproducer, which names its own target: leave out --target and the run options"
        )));
    }
    let rwd = Rwd::decode(name, data).map_err(|e| UserError::bad_input(e.to_string()))?;
    if let Some(why) = rwd.incompatibility() {
        return Err(UserError::bad_input(format!(
            "{name} cannot be run here: {why}"
        )));
    }
    consent_to_oracle(&rwd, name, a.target.run_oracle)?;
    consent_to_host_files(&rwd, name, a.target.read_host_files)?;
    Ok(Input {
        cfg: rwd.run_config(),
        source: rwd.source(),
        schedule: rwd.schedule(),
        want: rwd.expected.signature.clone(),
        naming: rwd.signature_naming,
    })
}

/// A schedule INPUT on the target given: the failure to keep is the one
/// its run gives.
fn schedule(a: &MinimizeArgs, name: &str, data: &[u8]) -> Result<Input, UserError> {
    let schedule = Schedule::from_json(name, data).map_err(|e| {
        UserError::bad_input(format!(
            "{e}; give a .rwd reproducer or a schedule file saved by run or check"
        ))
    })?;
    let Some(t) = a.target.target_args()? else {
        return Err(UserError::bad_input(format!(
            "{name} is a schedule: also give the --target it was run with (and its options)"
        )));
    };
    let mut cfg = t.config()?;
    replay_as_made(&mut cfg, &schedule, t.sync_points, name)?;
    t.target()
        .limits_of_older_schedule(&mut cfg.kernel, &schedule);
    let source = FileSource::host();
    let (want, outcome) =
        minimize::failure_of(&cfg, source.clone(), &schedule).map_err(vm_error)?;
    if !want.is_failure() {
        return Err(UserError::bad_input(format!(
            "the schedule in {name} does not fail ({}): there is nothing to minimize",
            outcome.summary()
        )));
    }
    Ok(Input {
        cfg,
        source,
        schedule,
        want,
        naming: Naming::default(),
    })
}

/// The search, within `--execs` and `--time`, saying how far it got every
/// few seconds unless the output is JSON. Ctrl-C ends the search, not the
/// command: the best schedule so far is kept (a second Ctrl-C quits at
/// once).
fn search(a: &MinimizeArgs, name: &str, input: &Input) -> Result<Minimized, UserError> {
    let budget = Budget {
        execs: a.execs,
        time: a.time,
    };
    let quiet = a.json;
    let mut last_report = std::time::Instant::now();
    let mut progress = |p: minimize::Progress| {
        if !quiet && last_report.elapsed() >= Duration::from_secs(2) {
            last_report = std::time::Instant::now();
            eprintln!(
                "rewind-fuzz: minimizing ({}): {} schedules run, trying {} decisions",
                p.phase, p.execs, p.decisions
            );
        }
        std::ops::ControlFlow::Continue(())
    };
    let mut searching = input.cfg.clone();
    searching.cancel = ctrl_c();
    minimize::minimize(
        &searching,
        input.source.clone(),
        &input.schedule,
        (&input.want, input.naming),
        budget,
        &mut progress,
    )
    .map_err(|e| match e {
        MinimizeError::Vm(VmError::Cancelled) if !interrupted() => UserError::bad_input(
            "--time ended before the input's own run did (its runs are long): give more --time; nothing was written".to_string(),
        ),
        MinimizeError::Vm(v) => vm_error(v),
        other => UserError {
            message: format!("{name}: {other}"),
            code: 1,
        },
    })
}

/// The reproducer of the minimized schedule, which must fail as the input
/// did.
fn record(input: &Input, m: &Minimized) -> Result<(Rwd, RunReport), UserError> {
    let want = (&input.want, input.naming);
    let (out, report, same) =
        rwd::record_expecting(&input.cfg, input.source.clone(), &m.schedule, Some(want))
            .map_err(vm_error)?;
    if !same {
        return Err(UserError {
            message: format!(
                "the minimized schedule recorded as {}, not {}; this is a bug in rewind-fuzz",
                out.expected.signature, input.want
            ),
            code: 1,
        });
    }
    Ok((out, report))
}

/// What minimizing did and where the reproducer is, on stderr.
fn tell(a: &MinimizeArgs, name: &str, input: &Input, m: &Minimized, size: u64) {
    eprintln!(
        "rewind-fuzz: minimized {name}: {} -> {} preemptions (decisions); window {} -> {} steps before the failure; {} schedules in {:.1}s{}",
        m.before,
        m.after,
        m.window_before,
        m.window_after,
        m.execs,
        m.elapsed.as_secs_f64(),
        if interrupted() {
            " (interrupted: it may shrink further)"
        } else if m.budget_ran_out {
            " (the budget ran out: it may shrink further)"
        } else {
            ""
        }
    );
    eprintln!(
        "  failure: {}",
        crate::escape::line(&input.want.to_string())
    );
    eprintln!(
        "  wrote {} ({size} bytes); replay with: rewind-fuzz replay{} {}",
        a.output.display(),
        rwd::consent_flags(&input.cfg, true),
        crate::escape::shell_word(&a.output.to_string_lossy())
    );
}
