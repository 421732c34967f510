//! The command line.

mod check;
mod run;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// A schedule-space fuzzer for multithreaded Linux programs.
#[derive(Parser, Debug)]
#[command(name = "rewind-fuzz", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a program once in the deterministic machine.
    Run(run::RunArgs),
    /// Run many schedules of a program; fail on the first that does not exit 0.
    Check(check::CheckArgs),
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

/// Parses the command line and runs the command.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let r = match cli.command {
        Command::Run(a) => run::run(a),
        Command::Check(a) => check::check(a),
    };
    match r {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("rewind-fuzz: {}", e.message);
            ExitCode::from(e.code)
        }
    }
}
