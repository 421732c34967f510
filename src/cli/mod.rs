//! The command line.

mod bench;
mod cargo;
mod check;
mod common;
mod fork;
mod fuzz;
mod gdb;
mod install;
mod minimize;
mod replay;
mod run;
mod shell;
mod show;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// A schedule-space fuzzer for multithreaded Linux programs.
///
/// `rewind-fuzz --target ./test [OPTIONS] [-- ARGS]` fuzzes the thread
/// schedules of a test (the same as `rewind-fuzz fuzz ...`).
#[derive(Parser, Debug)]
#[command(name = "rewind-fuzz", version, about, long_about = None, disable_version_flag = true)]
pub struct Cli {
    /// Print the version (`-V` is `--time` here, as in AFL++).
    #[arg(long, action = clap::ArgAction::Version)]
    version: Option<bool>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Fuzz the schedules of a program (the default: `rewind-fuzz --target T`).
    Fuzz(fuzz::FuzzArgs),
    /// Run a program once in the deterministic machine.
    Run(run::RunArgs),
    /// Run many schedules of a program; fail on the first that does not exit 0.
    Check(check::CheckArgs),
    /// Shrink a failing schedule to the fewest preemptions that give the same failure; write a reproducer.
    Minimize(minimize::MinimizeArgs),
    /// Run a reproducer (.rwd) again from the files inside it; exit 0 when it does the same.
    Replay(replay::ReplayArgs),
    /// Fork a reproducer's run at a step: many schedules from there, and how they end.
    Fork(fork::ForkArgs),
    /// A shell inside a reproducer's run at a step: its files, /proc and environment; the run stays as it was.
    Shell(shell::ShellArgs),
    /// Debug a reproducer (.rwd) with gdb at any step, forward and backward.
    Gdb(gdb::GdbArgs),
    /// Tell the story of a reproducer: the failure, the preemptions, the last steps per thread.
    Show(show::ShowArgs),
    /// Compare strategies on the bug suite: schedules to each bug, against a native stress loop.
    Bench(bench::BenchArgs),
    /// Build a Cargo project's tests (cargo test --no-run) and fuzz each test alone.
    Cargo(cargo::CargoArgs),
    /// Print a shell completion script (bash, zsh, fish, ...) on stdout.
    Completions(install::CompletionsArgs),
    /// Write the man pages into a directory.
    Man(install::ManArgs),
}

/// The options a command's line gave (not their defaults), by their ids:
/// `seed`, `cpus`, `args` for the arguments after `--`.
fn given_on_the_command_line(m: Option<&clap::ArgMatches>) -> std::collections::BTreeSet<String> {
    let Some(m) = m else {
        return Default::default();
    };
    m.ids()
        .filter(|id| m.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine))
        .map(|id| id.as_str().to_string())
        .collect()
}

/// An error for the user: one line, and the exit code to leave with.
#[derive(Debug)]
pub struct UserError {
    pub message: String,
    pub code: u8,
}

impl UserError {
    /// Bad input: exit code 2.
    pub fn bad_input(message: impl Into<String>) -> Self {
        UserError {
            message: message.into(),
            code: 2,
        }
    }
}

/// A target that cannot be opened is the user's to fix.
impl From<crate::explore::target::TargetError> for UserError {
    fn from(e: crate::explore::target::TargetError) -> Self {
        UserError::bad_input(e.to_string())
    }
}

impl From<crate::engine::VmError> for UserError {
    fn from(e: crate::engine::VmError) -> Self {
        common::vm_error(e)
    }
}

/// An option's value refused (`--time 0s`) as one line, like other bad
/// input: what was given and why it is refused, which says what to do.
fn one_line(e: &clap::Error) -> Option<String> {
    use clap::error::ErrorKind;
    if !matches!(
        e.kind(),
        ErrorKind::ValueValidation | ErrorKind::InvalidValue
    ) {
        return None;
    }
    let text = e.render().to_string();
    let first = text.lines().next()?;
    Some(first.strip_prefix("error: ").unwrap_or(first).to_string())
}

/// Parses the command line and runs the command.
pub fn main() -> ExitCode {
    // `rewind-fuzz --target T ...` is the main job: fuzzing.
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let alone = args.len() == 2;
    if args.get(1).is_some_and(|a| {
        let a = a.to_string_lossy();
        a.starts_with('-') && !(alone && matches!(a.as_ref(), "-h" | "--help" | "--version"))
    }) {
        args.insert(1, "fuzz".into());
    }
    let parsed = Cli::command()
        .try_get_matches_from(args)
        .and_then(|m| Cli::from_arg_matches(&m).map(|cli| (cli, m)));
    let (cli, matches) = match parsed {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            match one_line(&e) {
                Some(line) => eprintln!("rewind-fuzz: {line}"),
                None => {
                    let _ = e.print();
                }
            }
            return ExitCode::from(code);
        }
    };
    let r = match cli.command {
        Command::Fuzz(a) => fuzz::fuzz(a),
        Command::Run(mut a) => {
            a.given = given_on_the_command_line(matches.subcommand_matches("run"));
            run::run(a)
        }
        Command::Check(a) => check::check(a),
        Command::Minimize(a) => minimize::minimize(a),
        Command::Replay(a) => replay::replay(a),
        Command::Fork(a) => fork::fork(a),
        Command::Show(a) => show::show(a),
        Command::Shell(a) => shell::shell(a),
        Command::Gdb(a) => gdb::gdb(a),
        Command::Bench(a) => bench::bench(a),
        Command::Cargo(a) => cargo::cargo(a),
        Command::Completions(a) => install::completions(a),
        Command::Man(a) => install::man(a),
    };
    match r {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("rewind-fuzz: {}", crate::escape::line(&e.message));
            ExitCode::from(e.code)
        }
    }
}
