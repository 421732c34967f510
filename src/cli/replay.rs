//! `rewind-fuzz replay FILE.rwd`: runs a reproducer again from the files
//! inside it and says whether it did the same.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use super::UserError;
use super::common::{consent_to_host_files, consent_to_oracle, load_rwd, outcome_json, vm_error};
use crate::report::Symbols;
use crate::rwd;

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The reproducer to run.
    #[arg(value_name = "FILE.rwd")]
    pub file: PathBuf,
    /// Print one JSON object with the result on stdout.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub consent: super::common::Consent,
    /// Re-test a fix: run the recorded schedule (with the recorded
    /// arguments, environment and oracle) against this build instead of
    /// the recorded program, with this host's files. Exit code 0 when the
    /// failure is gone, 1 when the run still fails.
    #[arg(long, short = 't', value_name = "PROGRAM")]
    pub target: Option<String>,
}

/// `eprintln!` for lines that hold strings from the reproducer or the run.
macro_rules! say {
    ($($arg:tt)*) => {
        eprintln!("{}", crate::escape::text(&format!($($arg)*)))
    };
}

pub fn replay(a: ReplayArgs) -> Result<u8, UserError> {
    let rwd = load_rwd(&a.file)?;
    consent_to_oracle(&rwd, &a.file.display().to_string(), a.consent.run_oracle)?;
    if let Some(target) = &a.target {
        return retest(&a, &rwd, target);
    }
    consent_to_host_files(
        &rwd,
        &a.file.display().to_string(),
        a.consent.read_host_files,
    )?;
    if let Some(note) = rwd.for_display().host_files_note() {
        eprintln!("rewind-fuzz: note: {note}");
    }
    let r = rwd::replay(&rwd).map_err(vm_error)?;
    let mut sym = Symbols::from_mappings(r.facts.mappings.clone());
    let parted = r.divergence.as_ref().map(|d| {
        let expected = d.expected.map(|e| sym.event_line(&e));
        let got = d.got.map(|e| sym.event_line(&e));
        (d.step, expected, got)
    });
    if a.json {
        let v = json!({
            "file": a.file.display().to_string(),
            "matches": r.matches,
            "expected": {
                "outcome": outcome_json(&rwd.outcome()),
                "trace_hash": rwd.trace_hash_hex(),
                "steps": rwd.expected.steps,
                "signature": rwd.expected.signature,
                "signature_id": rwd.expected.signature.id(),
            },
            "got": {
                "outcome": outcome_json(&r.report.outcome),
                "trace_hash": r.report.trace_hash,
                "steps": r.report.steps,
                "signature": r.signature,
                "signature_id": r.signature.id(),
            },
            "parted_at": parted.as_ref().map(|(step, expected, got)| json!({
                "step": step,
                "expected": expected,
                "got": got,
            })),
            "schedule_diverged_at": r.schedule_diverged_at,
        });
        super::common::print_json(v);
    } else if r.matches {
        say!(
            "rewind-fuzz: replayed {}: {} after {} steps (trace {}), as recorded",
            a.file.display(),
            r.report.outcome.summary(),
            r.report.steps,
            r.report.trace_hash
        );
        say!("  signature: {}", r.signature);
    } else {
        say!(
            "rewind-fuzz: replay of {} differs from the recording: {} after {} steps (trace {}); recorded: {} after {} steps (trace {})",
            a.file.display(),
            r.report.outcome.summary(),
            r.report.steps,
            r.report.trace_hash,
            rwd.for_display().outcome().summary(),
            rwd.expected.steps,
            rwd.trace_hash_hex()
        );
        if let Some((step, expected, got)) = parted {
            say!("  the run parted from the recording at step {step}:");
            say!(
                "    expected {}",
                expected.unwrap_or_else(|| {
                    "a different step (the recording keeps only the last steps in full)".into()
                })
            );
            say!(
                "    got      {}",
                got.unwrap_or_else(|| "nothing: the run had ended".into())
            );
        }
        if let Some(s) = r.schedule_diverged_at {
            say!("  the schedule's decision at step {s} named a thread that could not run there");
        }
    }
    Ok(if r.matches { 0 } else { 1 })
}

/// `replay FILE.rwd --target PROGRAM`: the recorded schedule against
/// another build. 0 when the failure is gone, 1 when it still fails.
fn retest(a: &ReplayArgs, rwd: &crate::rwd::Rwd, target: &str) -> Result<u8, UserError> {
    let exe = crate::explore::target::resolve(target)?;
    let r = rwd::retest(rwd, &exe, target).map_err(vm_error)?;
    let gone = r.signature.kind == crate::report::signature::NO_FAILURE;
    let same = r.signature == rwd.expected.signature;
    let verdict = match (gone, same) {
        (true, _) => "the failure is gone",
        (false, true) => "it still fails, the same way",
        (false, false) => "it still fails, another way",
    };
    if a.json {
        let mut sym = Symbols::from_mappings(r.facts.mappings.clone());
        let mut got = json!({
            "outcome": outcome_json(&r.report.outcome),
            "trace_hash": r.report.trace_hash,
            "steps": r.report.steps,
            "signature": r.signature,
            "signature_id": r.signature.id(),
        });
        got["outcome"]["details"] = sym.outcome_details_json(&r.report.outcome);
        let v = json!({
            "file": a.file.display().to_string(),
            "target": exe,
            "failure_gone": gone,
            "same_failure": same,
            "recorded": {
                "outcome": outcome_json(&rwd.outcome()),
                "signature": rwd.expected.signature,
                "signature_id": rwd.expected.signature.id(),
            },
            "got": got,
            "schedule_diverged_at": r.schedule_diverged_at,
        });
        super::common::print_json(v);
    } else {
        say!(
            "rewind-fuzz: {}'s schedule against {target}: {} after {} steps (trace {}): {verdict}",
            a.file.display(),
            r.report.outcome.summary(),
            r.report.steps,
            r.report.trace_hash
        );
        say!("  recorded: {}", rwd.for_display().outcome().summary());
        if !gone {
            say!("  signature: {}", r.signature);
        }
        if let Some(s) = r.schedule_diverged_at {
            say!(
                "  the program went another way: from step {s} the schedule named threads that could not run, and the default ran instead"
            );
        }
    }
    Ok(if gone { 0 } else { 1 })
}
