//! `rewind-fuzz shell FILE.rwd --at STEP`: a shell inside the machine
//! where a recorded run stands, to look at it from the inside: its files
//! (the overlay), its `/proc` (threads, what each waits on, stacks,
//! descriptors), its environment and working directory. The run is paused
//! and never altered: the shell is a visitor (`kernel::visit`), and the
//! machine is dropped when it leaves.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use clap::Args;

use super::UserError;
use super::common::{consent_to_host_files, load_rwd, vm_error};
use crate::explore::fork::At;
use crate::gdb::StartAt;
use crate::ids::Tid;
use crate::kernel::Kernel;
use crate::kernel::loader::LoadError;
use crate::kernel::visit::{ThreadLook, VisitEnd, Visitor};
use crate::report::symbols::Symbolizer;

#[derive(Args, Debug)]
pub struct ShellArgs {
    /// The reproducer whose run to step into.
    #[arg(value_name = "FILE.rwd")]
    pub file: PathBuf,
    /// Where: after a step number, at the `end`, or decision:N (just
    /// before the run's N-th decision).
    #[arg(long, value_name = "STEP", default_value = "end")]
    pub at: At,
    /// The shell to start, as the machine names programs.
    #[arg(long, value_name = "PROG", default_value = "/bin/sh")]
    pub shell: String,
    /// Run this one command (`PROG -c CMD`) and exit with its status.
    #[arg(long, short = 'c', value_name = "CMD")]
    pub command: Option<String>,
    /// Read the files the reproducer left out (`--exclude-files`) from
    /// this host; without it, such a reproducer is refused.
    #[arg(long)]
    pub read_host_files: bool,
}

/// Names the frames of `/proc/PID/task/TID/stack` with the program's
/// symbols.
struct NamedStacks(Mutex<Symbolizer>);

impl ThreadLook for NamedStacks {
    fn stack(&self, k: &Kernel, tid: Tid) -> String {
        let mut sym = self.0.lock().unwrap_or_else(|e| e.into_inner());
        crate::report::stack_text(k, tid, &mut sym)
    }
}

pub fn shell(a: ShellArgs) -> Result<u8, UserError> {
    let name = a.file.display().to_string();
    let rwd = load_rwd(&a.file)?;
    consent_to_host_files(&rwd, &name, a.read_host_files)?;
    let recorded = rwd.schedule();
    let steps = rwd.expected.steps;
    let at = match a.at {
        At::End => StartAt::End,
        other => StartAt::Step(
            other
                .step(&recorded, steps)
                .map_err(|e| UserError::bad_input(e.to_string()))?,
        ),
    };
    let mut cfg = rwd.run_config();
    // The shell looks at the run; judging its output is not asked for.
    cfg.oracle = None;
    let source = rwd.source();
    let tl = crate::gdb::paused(&cfg, source.clone(), recorded, at).map_err(vm_error)?;
    // The run's files are as recorded; the shell and its tools are the
    // host's.
    source
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .reach_beyond_recording();
    let step = tl.position().step;
    let mut vm = tl.into_vm();
    let k = vm.debug_kernel();
    let pid = k.threads()[&k.current()].pid;
    let process = &k.processes()[&pid];
    let interactive = a.command.is_none() && std::io::stdin().is_terminal();
    let mut argv = vec![a.shell.clone()];
    match &a.command {
        Some(cmd) => argv.extend(["-c".to_string(), cmd.clone()]),
        // Interactive, without job control: the host's terminal is no
        // terminal in the machine.
        None if interactive => argv.extend(["-i".to_string(), "+m".to_string()]),
        None => {}
    }
    let mut env: Vec<String> = process
        .environ
        .iter()
        .filter(|v| !v.starts_with("PS1="))
        .cloned()
        .collect();
    env.push(format!("PS1=[rewind step {step}] $ "));
    let program = process.exe.rsplit('/').next().unwrap_or_default();
    if a.command.is_none() {
        let when = if k.outcome().is_some() {
            format!("at the end (step {step})")
        } else {
            format!("at step {step} of {steps}")
        };
        eprintln!(
            "rewind-fuzz: a shell in {name} {when}, beside process {pid} ({program}): \
             its files, /proc and environment as the run sees them"
        );
        eprintln!(
            "rewind-fuzz: the run is paused; nothing done here changes it or the reproducer. \
             `exit` leaves"
        );
    }
    let visitor = Visitor {
        program: a.shell.clone(),
        argv,
        env,
        cwd: process.cwd.clone(),
        look: Arc::new(NamedStacks(Mutex::new(Symbolizer::new()))),
    };
    let end = vm.visit(visitor).map_err(|e| match e {
        crate::engine::VmError::Load(LoadError::NotFound(_)) => UserError::bad_input(format!(
            "--shell {}: no such program in the machine (the run's files, then this host's); \
             give its full path",
            a.shell
        )),
        crate::engine::VmError::Load(l) => UserError::bad_input(format!("--shell: {l}")),
        e => vm_error(e),
    })?;
    if let VisitEnd::Stopped(outcome) = &end {
        eprintln!(
            "rewind-fuzz: the shell stopped: {}",
            crate::escape::line(&outcome.summary())
        );
    }
    Ok(end.status().clamp(0, 255) as u8)
}
