//! The session's findings as the main thread keeps them: new failures are
//! handed to the writer, the recorded ones announced and handed to the
//! minimizer, and what minimization did is told.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::screen::Screen;
use crate::fuzz::findings::{self, Desk, MinimizeTask, SharedDesk};
use crate::fuzz::sync::SyncDir;
use crate::fuzz::{Finding, FuzzConfig, NewFailure};

pub struct Found {
    pub findings: Vec<Finding>,
    /// Failures found whose reproducer could not be written, with why.
    pub unsaved: Vec<String>,
    /// Findings whose schedule was run again from scratch, and how many of
    /// those gave the same trace.
    pub stability_checks: u64,
    stability_same: u64,
    /// Findings handed between this thread, the writer and the minimizer.
    desk: SharedDesk,
    /// Findings whose minimization the session's end cut short.
    cut_short: BTreeSet<String>,
}

impl Found {
    pub fn new(cfg: &FuzzConfig) -> Found {
        Found {
            findings: Vec::new(),
            unsaved: Vec::new(),
            stability_checks: 0,
            stability_same: 0,
            desk: Arc::new(Mutex::new(Desk {
                // What an earlier session did not finish goes on first.
                waiting: if cfg.resume && cfg.minimize_execs > 0 {
                    findings::pending_tasks(&cfg.out).into()
                } else {
                    Default::default()
                },
                ..Default::default()
            })),
            cut_short: BTreeSet::new(),
        }
    }

    /// The desk the writer and the minimizer work from.
    pub fn desk(&self) -> SharedDesk {
        self.desk.clone()
    }

    /// Hands new failures to the writer, then announces what it recorded
    /// and tells what minimization did.
    pub fn pass_on(
        &mut self,
        cfg: &FuzzConfig,
        new: Vec<NewFailure>,
        seen_at: Duration,
        sync: Option<&SyncDir>,
        screen: &mut Screen,
    ) {
        let mut desk = self.desk.lock().unwrap();
        desk.to_record.extend(new.into_iter().map(|f| (f, seen_at)));
        let recorded = std::mem::take(&mut desk.recorded);
        let told = std::mem::take(&mut desk.told);
        drop(desk);
        for r in recorded {
            self.announce(cfg, r, sync, screen);
        }
        self.tell_minimized(told, screen);
    }

    /// Announces a finding the writer recorded (or could not), and hands
    /// it to the minimizer.
    fn announce(
        &mut self,
        cfg: &FuzzConfig,
        r: findings::Recorded,
        sync: Option<&SyncDir>,
        screen: &mut Screen,
    ) {
        screen.erase();
        let f = r.failure;
        let base = f.signature.file_stem();
        let w = match r.written {
            Ok(w) => w,
            Err(e) => {
                eprintln!("rewind-fuzz: warning: cannot write finding {base}: {e}");
                self.unsaved.push(format!("{base}: {e}"));
                return;
            }
        };
        if let Some(same) = w.stable {
            self.stability_checks += 1;
            self.stability_same += u64::from(same);
        }
        if w.recorded && cfg.minimize_execs > 0 && !f.schedule.decisions.is_empty() {
            self.to_minimize(&f, base);
        }
        let (path, summary) = (w.path, w.headline);
        if let (Some(sync), Some(name)) = (sync, path.file_name()) {
            // The copy is as private as the finding.
            let _ = std::fs::read(&path).and_then(|data| {
                let mode = std::os::unix::fs::PermissionsExt::mode(
                    &std::fs::metadata(&path)?.permissions(),
                );
                sync.publish("findings", &name.to_string_lossy(), &data, mode)
            });
        }
        let finding = Finding {
            kind: f.kind.clone(),
            signature: f.signature.id(),
            path: path.clone(),
            summary: summary.clone(),
            execs: f.execs,
            elapsed: r.seen_at,
        };
        let mut msg = format!(
            "\nrewind-fuzz: new finding after {} executions ({:.0?}): {}\n  {summary}\n",
            f.execs,
            r.seen_at,
            f.kind.class()
        );
        if f.kind.depends_on_the_host() {
            msg.push_str(
                "  (the wall-clock watchdog stopped it: on a faster or idler host the same schedule may run on)\n",
            );
        }
        msg.push_str(&format!("  Saved to: {}\n", path.display()));
        msg.push_str(&findings::finding_commands(cfg, &path));
        eprint!("{msg}");
        self.findings.push(finding);
    }

    /// Puts a recorded finding in the minimizer's queue.
    fn to_minimize(&self, f: &NewFailure, base: String) {
        let schedule = f.schedule.clone();
        self.desk.lock().unwrap().waiting.push_back(MinimizeTask {
            base,
            found_with: schedule.decisions.len(),
            schedule,
            want: f.signature.clone(),
            naming: crate::report::signature::Naming::default(),
        });
    }

    /// Says what became of the minimizations the writer wrote.
    fn tell_minimized(
        &mut self,
        told: Vec<(String, bool, Result<String, String>)>,
        screen: &mut Screen,
    ) {
        for (base, cut, line) in told {
            if cut {
                self.cut_short.insert(base.clone());
            }
            screen.erase();
            match line {
                Ok(line) => eprintln!("rewind-fuzz: {line}"),
                Err(e) => eprintln!("rewind-fuzz: warning: minimizing {base}: {e}"),
            }
        }
    }

    /// Findings whose minimization is not done: waiting, under way or cut
    /// short.
    pub fn minimize_pending(&self) -> Vec<String> {
        let mut pending = self.desk.lock().unwrap().pending();
        pending.extend(self.cut_short.iter().cloned());
        pending.sort();
        pending.dedup();
        pending
    }

    /// The share of findings run again from scratch that gave the same
    /// trace, in percent (100 when none was).
    pub fn stability(&self) -> f64 {
        if self.stability_checks == 0 {
            100.0
        } else {
            100.0 * self.stability_same as f64 / self.stability_checks as f64
        }
    }

    /// Findings of the outcome class `class`.
    pub fn of_class(&self, class: &str) -> usize {
        self.findings
            .iter()
            .filter(|f| f.kind.class() == class)
            .count()
    }

    /// Findings that are hangs in AFL++'s sense: the run stopped for lack
    /// of progress (the step budget, the watchdog).
    pub fn hangs(&self) -> usize {
        self.findings.iter().filter(|f| is_hang(f)).count()
    }

    /// The latest hang (`hang`) or crash in AFL++'s sense.
    pub fn last(&self, hang: bool) -> Option<&Finding> {
        self.findings.iter().rfind(|f| is_hang(f) == hang)
    }
}

/// Whether a finding is a hang in AFL++'s sense (`saved_hangs`): the run
/// stopped for lack of progress; every other finding, deadlocks included,
/// counts as a crash.
fn is_hang(f: &Finding) -> bool {
    matches!(f.kind.class(), "hung" | "timed-out")
}
