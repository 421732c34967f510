//! Opening a target: a program named by its path or as `harness:NAME` (a
//! bundled harness, built on first use), checked and resolved into the
//! run configuration every session starts from. A refusal is a
//! [`TargetError`], whose words name the options the settings come from,
//! as every command takes them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::code::{StepRules, SyncPoints};
use crate::engine::{RunConfig, SnapshotAt};
use crate::harness::{self, HarnessError, Variant};
use crate::kernel::KernelConfig;
use crate::kernel::loader::{LoadError, check_elf};
use crate::observe::oracle::Oracle;
use crate::sched::Schedule;

/// A program to run and the settings it runs with; those left `None`
/// take the engine's defaults or a bundled harness's own.
#[derive(Clone, Debug)]
pub struct Target {
    /// The program as given: a path, or `harness:NAME[-fixed]`.
    pub program: String,
    /// Its arguments (after `argv[0]`).
    pub args: Vec<String>,
    pub cpus: u32,
    pub seed: u64,
    pub max_steps: Option<u64>,
    pub hang_steps: Option<u64>,
    pub timeout: Duration,
    /// `KEY=VALUE`, later ones replacing earlier ones of the same key.
    pub env: Vec<String>,
    /// Its working directory (default: this process's).
    pub cwd: Option<String>,
    pub memory_mib: u64,
    pub snapshot_at: SnapshotAt,
    /// Whether the pthread shim is preloaded.
    pub shim: bool,
    pub sync_points: Option<SyncPoints>,
    /// Path patterns of files kept out of reproducers.
    pub exclude_files: Vec<String>,
    /// The file holding the stdout of a correct run.
    pub expect_stdout: Option<PathBuf>,
    /// The host command that judges a run's stdout.
    pub oracle: Option<String>,
    /// The exit codes that are success.
    pub ok_exit_codes: Option<Vec<i32>>,
}

/// Why a target cannot be opened (or a schedule replayed on it).
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error(transparent)]
    Harness(Box<HarnessError>),
    #[error("building harness {name}: {source}")]
    HarnessBuild {
        name: String,
        source: Box<HarnessError>,
    },
    #[error(
        "cannot read --target {target}: {source}; give the path of an executable{}",
        afl_timeout_hint(.target)
    )]
    Missing {
        target: String,
        source: std::io::Error,
    },
    #[error("--target {0} is a directory; give the path of an executable file")]
    Directory(String),
    #[error("cannot read --target {target}: {source}")]
    Unreadable {
        target: String,
        source: std::io::Error,
    },
    #[error(
        "--target {target} is a script for {interpreter}; give its interpreter as the target and the script as its argument: --target {interpreter} -- {target}"
    )]
    Script { target: String, interpreter: String },
    #[error(transparent)]
    NotAProgram(LoadError),
    #[error("cannot resolve --target {target}: {source}")]
    Unresolvable {
        target: String,
        source: std::io::Error,
    },
    #[error("--env {0:?} has no '='; write --env KEY=VALUE")]
    Env(String),
    #[error(
        "--exclude-files {0:?} is not an absolute path pattern; write it from '/' (e.g. '/etc/shadow', '/data/**') or start it with '**/'"
    )]
    RelativeExclusion(String),
    #[error("--exclude-files {glob:?}: {source}")]
    Exclusion {
        glob: String,
        source: globset::Error,
    },
    #[error("--exclude-files: {0}")]
    Exclusions(globset::Error),
    #[error(
        "cannot read --expect-stdout {}: {source}; give the file holding the output a correct run prints",
        .path.display()
    )]
    ExpectStdout {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A schedule replays only at the level it was made at.
    #[error(
        "{name} was made with --sync-points {made}; replay it at that level (leave out --sync-points {given})"
    )]
    OtherLevel {
        name: String,
        made: SyncPoints,
        given: SyncPoints,
    },
}

/// `fuzz -t 1000` is AFL++'s timeout in milliseconds: said so when the
/// target that cannot be read is a number.
fn afl_timeout_hint(target: &str) -> String {
    let number = target.trim_end_matches('+');
    if !target.is_empty() && number.bytes().all(|b| b.is_ascii_digit()) {
        format!(" (-t is --target here; for AFL++'s timeout write --timeout {number}ms)")
    } else {
        String::new()
    }
}

impl Target {
    /// The run configuration, after checking the program is something the
    /// machine can run.
    pub fn open(&self) -> Result<RunConfig, TargetError> {
        let exe = resolve(&self.program)?;
        let mut k = KernelConfig::new(&exe, &self.args);
        // argv[0] is the path as given, as a shell passes it: programs
        // installed under several names (zstdcat, gcc) look at it.
        if bundled(&self.program).is_none() {
            k.argv[0] = self.program.clone();
        }
        k.cwd = match &self.cwd {
            Some(c) => c.clone(),
            None => std::env::current_dir()
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_else(|_| "/".into()),
        };
        k.cpus = self.cpus;
        k.seed = self.seed;
        k.sync_points = self.sync_points.unwrap_or(SyncPoints::Atomics);
        if let Some(max) = self
            .max_steps
            .or_else(|| harness_step_budget(&self.program))
        {
            k.max_steps = max;
        }
        if let Some(h) = self.hang_steps {
            k.hang_steps = h;
        }
        set_env(&mut k.env, &self.env)?;
        let mut cfg = RunConfig::new(k);
        cfg.timeout = self.timeout;
        cfg.memory_mib = self.memory_mib;
        cfg.shim = self.shim;
        cfg.exclude_files = exclusions(&self.exclude_files)?;
        cfg.oracle = oracle(self.expect_stdout.as_deref(), self.oracle.as_deref())?;
        if let Some(codes) = self
            .ok_exit_codes
            .clone()
            .or_else(|| harness_ok_codes(&self.program))
        {
            cfg.ok_codes = codes;
        }
        cfg.snapshot_at = self.snapshot_at;
        Ok(cfg)
    }

    /// Gives a run of a schedule made before the watch for progress
    /// existed (version 2 and earlier) the limits its runs had, where these
    /// settings give none: they ended at a million steps, and never for
    /// want of progress.
    pub fn limits_of_older_schedule(&self, k: &mut KernelConfig, schedule: &Schedule) {
        if schedule.step_rules() != StepRules::Format6 {
            return;
        }
        if self.max_steps.is_none() && harness_step_budget(&self.program).is_none() {
            k.max_steps = 1_000_000;
        }
        if self.hang_steps.is_none() {
            k.hang_steps = 0;
        }
    }
}

/// `KEY=VALUE` settings over `env`, each replacing the variable's value.
fn set_env(env: &mut Vec<String>, settings: &[String]) -> Result<(), TargetError> {
    for e in settings {
        let Some((key, _)) = e.split_once('=') else {
            return Err(TargetError::Env(e.clone()));
        };
        env.retain(|x| x.split_once('=').map(|(a, _)| a) != Some(key));
        env.push(e.clone());
    }
    Ok(())
}

/// Makes `cfg` replay `schedule` (`name` names it in errors) as it was
/// made: at its level of sync points, which must be `given` when one is,
/// and with the step rules of its format.
pub fn replay_as_made(
    cfg: &mut RunConfig,
    schedule: &Schedule,
    given: Option<SyncPoints>,
    name: &str,
) -> Result<(), TargetError> {
    match given {
        Some(l) if l != schedule.sync_points => {
            return Err(TargetError::OtherLevel {
                name: name.to_string(),
                made: schedule.sync_points,
                given: l,
            });
        }
        _ => cfg.kernel.sync_points = schedule.sync_points,
    }
    cfg.kernel.step_rules = schedule.step_rules();
    cfg.kernel.polls_retry_on_any_activity = schedule.polls_retry_on_any_activity();
    Ok(())
}

/// The output oracle an expected stdout (a file) or a host command makes.
pub fn oracle(
    expect_stdout: Option<&Path>,
    command: Option<&str>,
) -> Result<Option<Oracle>, TargetError> {
    if let Some(f) = expect_stdout {
        let data = std::fs::read(f).map_err(|source| TargetError::ExpectStdout {
            path: f.to_path_buf(),
            source,
        })?;
        return Ok(Some(Oracle::Stdout(data)));
    }
    Ok(command.map(|c| Oracle::Command(c.to_string())))
}

/// The patterns of files kept out of reproducers, as one matcher.
pub fn exclusions(globs: &[String]) -> Result<globset::GlobSet, TargetError> {
    let mut set = globset::GlobSetBuilder::new();
    for g in globs {
        if !g.starts_with('/') && !g.starts_with("**") {
            return Err(TargetError::RelativeExclusion(g.clone()));
        }
        let glob = globset::GlobBuilder::new(g)
            .literal_separator(true)
            .build()
            .map_err(|source| TargetError::Exclusion {
                glob: g.clone(),
                source,
            })?;
        set.add(glob);
    }
    set.build().map_err(TargetError::Exclusions)
}

/// The harness name and variant a `harness:NAME` (or `harness:NAME-fixed`)
/// program names, if it is one.
fn bundled(program: &str) -> Option<(&str, Variant)> {
    let name = program.strip_prefix("harness:")?;
    Some(match name.strip_suffix("-fixed") {
        Some(n) => (n, Variant::Fixed),
        None => (name, Variant::Buggy),
    })
}

/// The exit codes a bundled harness's manifest calls success, if any.
fn harness_ok_codes(program: &str) -> Option<Vec<i32>> {
    let (name, _) = bundled(program)?;
    Some(harness::find(name).ok()?.manifest.ok_codes)
}

/// The step budget a bundled harness's manifest sets, if any.
fn harness_step_budget(program: &str) -> Option<u64> {
    let (name, _) = bundled(program)?;
    harness::find(name).ok()?.manifest.max_steps
}

/// Checks the program and returns its absolute path. `harness:NAME` (or
/// `harness:NAME-fixed`) names a bundled harness, built on first use.
pub fn resolve(program: &str) -> Result<String, TargetError> {
    if let Some((name, variant)) = bundled(program) {
        let h = harness::find(name).map_err(|e| TargetError::Harness(Box::new(e)))?;
        let path = harness::build(&h, variant).map_err(|e| TargetError::HarnessBuild {
            name: name.to_string(),
            source: Box::new(e),
        })?;
        return resolve(&path.to_string_lossy());
    }
    let target = program.to_string();
    let p = Path::new(program);
    let meta = std::fs::metadata(p).map_err(|source| TargetError::Missing {
        target: target.clone(),
        source,
    })?;
    if meta.is_dir() {
        return Err(TargetError::Directory(target));
    }
    let data = std::fs::read(p).map_err(|source| TargetError::Unreadable {
        target: target.clone(),
        source,
    })?;
    if let Some(interpreter) = script_interpreter(&data) {
        return Err(TargetError::Script {
            target,
            interpreter,
        });
    }
    check_elf(program, &data).map_err(TargetError::NotAProgram)?;
    let abs =
        std::fs::canonicalize(p).map_err(|source| TargetError::Unresolvable { target, source })?;
    Ok(abs.to_string_lossy().into_owned())
}

/// The interpreter a `#!` script names (the machine runs scripts the
/// program starts, but a target is the program itself).
fn script_interpreter(data: &[u8]) -> Option<String> {
    let first = data.strip_prefix(b"#!")?.split(|b| *b == b'\n').next()?;
    let interpreter = first
        .split(|b| b.is_ascii_whitespace())
        .find(|w| !w.is_empty())?;
    Some(crate::escape::bytes_line(interpreter))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_as_target_is_told_it_may_be_afls_timeout() {
        let e = resolve("1000+").unwrap_err().to_string();
        assert!(
            e.starts_with("cannot read --target 1000+: ")
                && e.ends_with(
                    "; give the path of an executable (-t is --target here; for AFL++'s timeout write --timeout 1000ms)"
                ),
            "{e}"
        );
        let e = resolve("./nowhere").unwrap_err().to_string();
        assert!(e.ends_with("; give the path of an executable"), "{e}");
    }

    #[test]
    fn a_script_is_refused_with_its_interpreter_named() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("run.sh");
        std::fs::write(&script, "#!/bin/sh -e\necho hi\n").unwrap();
        let shown = script.to_string_lossy().into_owned();
        assert_eq!(
            resolve(&shown).unwrap_err().to_string(),
            format!(
                "--target {shown} is a script for /bin/sh; give its interpreter as the target and the script as its argument: --target /bin/sh -- {shown}"
            )
        );
    }

    #[test]
    fn environment_settings_replace_by_key_and_need_an_equals_sign() {
        let mut env = vec!["A=1".to_string(), "B=2".to_string()];
        set_env(&mut env, &["A=3".to_string()]).unwrap();
        assert_eq!(env, ["B=2", "A=3"]);
        let e = set_env(&mut env, &["C".to_string()]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--env \"C\" has no '='; write --env KEY=VALUE"
        );
    }

    #[test]
    fn exclusions_are_absolute_patterns() {
        assert!(exclusions(&["/etc/**".into(), "**/secret".into()]).is_ok());
        assert!(matches!(
            exclusions(&["etc/x".into()]),
            Err(TargetError::RelativeExclusion(_))
        ));
    }
}
