//! `rewind-fuzz completions SHELL` and `rewind-fuzz man DIR`: what a
//! package or an install script puts beside the binary.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, CommandFactory};

use super::{Cli, UserError};

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    pub shell: clap_complete::Shell,
}

#[derive(Args, Debug)]
pub struct ManArgs {
    /// The directory to write the pages in (rewind-fuzz.1 and one
    /// rewind-fuzz-COMMAND.1 per command).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// Prints the completion script for a shell on stdout.
pub fn completions(a: CompletionsArgs) -> Result<u8, UserError> {
    let mut cmd = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, BIN, &mut script);
    if a.shell == clap_complete::Shell::Bash {
        script = bash_names_agree(&String::from_utf8_lossy(&script)).into_bytes();
    }
    // A reader that stops early (`| head`) is no error.
    match std::io::stdout().write_all(&script) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(UserError::bad_input(format!(
            "cannot write the script: {e}"
        ))),
        _ => Ok(0),
    }
}

/// The command's name, as completion scripts register it.
const BIN: &str = "rewind-fuzz";

/// clap's bash script names a subcommand's state `rewind__fuzz__subcmd__X`
/// where it sets it and `rewind__subcmd__fuzz__subcmd__X` where it looks
/// it up (it spells the dash in the command's name two ways), so no option
/// of any subcommand completes; this spells the lookups as the settings.
fn bash_names_agree(script: &str) -> String {
    let set = format!("{}__subcmd__", BIN.replace('-', "__"));
    let looked_up = format!("{}__subcmd__", BIN.replace('-', "__subcmd__"));
    script.replace(&looked_up, &set)
}

/// Writes the man pages into a directory.
pub fn man(a: ManArgs) -> Result<u8, UserError> {
    let cannot = |e: std::io::Error| {
        UserError::bad_input(format!(
            "cannot write man pages into {}: {e}; give a writable directory",
            a.dir.display()
        ))
    };
    super::common::check_out_dir("the man page directory", &a.dir)?;
    std::fs::create_dir_all(&a.dir).map_err(cannot)?;
    clap_mangen::generate_to(Cli::command(), &a.dir).map_err(cannot)?;
    eprintln!(
        "rewind-fuzz: man pages written to {} (man -l {}/rewind-fuzz.1)",
        a.dir.display(),
        a.dir.display()
    );
    Ok(0)
}
