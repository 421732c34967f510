//! Findings: recorded as reproducers at once, minimized beside the search.
//!
//! A new failure is recorded from scratch as soon as it is found (one run,
//! on a thread of its own, which neither the session's time budget nor
//! Ctrl-C cuts short: a finding made at the end of a session or of a
//! test's share of it is kept as a reproducer, not just a schedule). Its minimization then runs
//! on a thread of its own with a machine of its own, one finding at a
//! time, and may take at most one run for every [`SEARCH_RUNS_PER_MINIMIZE_RUN`]
//! runs of the search, so the search never starves. Each minimized
//! schedule is recorded and replaces the finding's reproducer; one cut
//! short by the session's end is written as far as it got and listed in
//! `OUT/minimize_pending`, and a `--resume` goes on with it.

use std::collections::VecDeque;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::feedbacks::NewFailure;
use super::{FuzzConfig, Progress};
use crate::engine::{RunConfig, VmError};
use crate::explore::minimize::{self, MinimizeError, Minimized};
use crate::kernel::vfs::SharedSource;
use crate::report::signature::{Naming, Signature};
use crate::rwd::Rwd;
use crate::sched::Schedule;

/// Runs of the search for each run minimization may make.
pub const SEARCH_RUNS_PER_MINIMIZE_RUN: u64 = 3;

/// The file in the output directory that lists findings whose
/// minimization is not done, one file name a line.
pub const PENDING_FILE: &str = "minimize_pending";

/// What recording needs: the session's configuration without its time
/// budget or Ctrl-C, and its files.
pub struct Recorder {
    pub run: RunConfig,
    pub source: SharedSource,
}

/// A finding to minimize: its schedule so far and the failure to keep.
#[derive(Clone, Debug)]
pub struct MinimizeTask {
    /// The finding's file name without extension (`deadlocked-<id>`).
    pub base: String,
    pub schedule: Schedule,
    pub want: Signature,
    pub naming: Naming,
    /// Decisions when it was found (or when an earlier session left it).
    pub found_with: usize,
}

/// A minimization done or cut short.
pub struct MinimizeResult {
    pub task: MinimizeTask,
    pub outcome: Result<Minimized, String>,
}

/// A new finding as the writer left it.
pub struct Recorded {
    pub failure: NewFailure,
    /// When the main thread handed it over, since the session's start.
    pub seen_at: Duration,
    pub written: Result<Written, String>,
}

/// Where the main thread, the minimizer and the writer hand findings to
/// each other: the main thread stays free for the corpus, the status and
/// the sync directory while findings are recorded, told and minimized.
#[derive(Default)]
pub struct Desk {
    /// New failures for the writer to record.
    pub to_record: VecDeque<(NewFailure, Duration)>,
    /// Recorded findings for the main thread to announce.
    pub recorded: Vec<Recorded>,
    /// Findings waiting for the minimizer.
    pub waiting: VecDeque<MinimizeTask>,
    /// The finding being minimized now.
    pub working: Option<String>,
    /// Minimizations for the writer to record and write.
    pub minimized: VecDeque<MinimizeResult>,
    /// What the writer did with them, for the main thread to tell:
    /// (finding, cut short by the session's end, line or warning).
    pub told: Vec<(String, bool, Result<String, String>)>,
    /// Whether the writer is recording now.
    pub writing: bool,
    /// Set when every failure found is recorded and handed on: the
    /// minimizer ends once nothing waits.
    pub no_more_tasks: bool,
    /// Set when the search and the minimizer are done: the writer ends
    /// once its queues are empty.
    pub closing: bool,
}

impl Desk {
    /// Findings whose minimization waits or is under way.
    pub fn pending(&self) -> Vec<String> {
        let mut out: Vec<String> = self.waiting.iter().map(|t| t.base.clone()).collect();
        out.extend(self.working.clone());
        out.extend(self.minimized.iter().map(|r| r.task.base.clone()));
        out
    }
}

/// The tasks an earlier session left in `out` (its [`PENDING_FILE`]), from
/// the reproducers they name.
pub fn pending_tasks(out: &Path) -> Vec<MinimizeTask> {
    let list = crate::fsutil::read_foreign(&out.join(PENDING_FILE), 1 << 20)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    list.lines()
        .filter(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
        .filter_map(|base| {
            let rwd = Rwd::load(&out.join("findings").join(format!("{base}.rwd"))).ok()?;
            let schedule = rwd.schedule();
            Some(MinimizeTask {
                base: base.to_string(),
                found_with: schedule.decisions.len(),
                schedule,
                want: rwd.expected.signature.clone(),
                naming: rwd.signature_naming,
            })
        })
        .collect()
}

/// The minimizer's loop: one finding at a time, each run waiting for its
/// share of the search's runs. When the search ends by its count of
/// executions (`--execs`), minimization uses the share it has left before
/// it stops, so that a session's minimizations depend on its budget and
/// seed, not on how fast the threads ran; a time budget or Ctrl-C stops it
/// at once.
pub fn minimizer(cfg: &FuzzConfig, source: SharedSource, desk: &Mutex<Desk>, progress: &Progress) {
    let catch_up = cfg.budget.time.is_none();
    let stopped = || progress.stop.load(Ordering::Relaxed);
    let has_share = || {
        let search = progress.execs.load(Ordering::Relaxed);
        let mine = progress.minimize_execs.load(Ordering::Relaxed);
        mine * SEARCH_RUNS_PER_MINIMIZE_RUN < search
    };
    let may_go_on = || !cfg.run.cancel.is_cancelled() && (!stopped() || (catch_up && has_share()));
    loop {
        let task = {
            let mut d = desk.lock().unwrap();
            let t = if may_go_on() {
                d.waiting.pop_front()
            } else {
                None
            };
            d.working = t.as_ref().map(|t| t.base.clone());
            if t.is_none() && stopped() && (d.no_more_tasks || !may_go_on()) {
                return;
            }
            t
        };
        let Some(task) = task else {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        let mut since: Option<Instant> = None;
        let mut gate = |_: minimize::Progress| {
            // The time of the run just made is minimization's.
            if let Some(t) = since.take() {
                progress
                    .minimize_us
                    .fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
            }
            loop {
                if !may_go_on() {
                    return ControlFlow::Break(());
                }
                if has_share() {
                    progress.minimize_execs.fetch_add(1, Ordering::Relaxed);
                    since = Some(Instant::now());
                    return ControlFlow::Continue(());
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        };
        let budget = minimize::Budget {
            execs: Some(cfg.minimize_execs),
            time: None,
        };
        let outcome = minimize::minimize(
            &cfg.run,
            source.clone(),
            &task.schedule,
            (&task.want, task.naming),
            budget,
            &mut gate,
        );
        let mut d = desk.lock().unwrap();
        d.working = None;
        match outcome {
            // Stopped before its first run: still to do.
            Err(MinimizeError::Stopped) | Err(MinimizeError::Vm(VmError::Cancelled)) => {
                d.waiting.push_front(task);
            }
            outcome => d.minimized.push_back(MinimizeResult {
                task,
                outcome: outcome.map_err(|e| e.to_string()),
            }),
        }
    }
}

/// The writer's loop: records new findings and minimized schedules, in
/// the order they come, until the desk closes and nothing is left.
pub fn writer(cfg: &FuzzConfig, recorder: &Recorder, desk: &Mutex<Desk>) {
    let dir = cfg.out.join("findings");
    loop {
        let (new, minimized, closing) = {
            let mut d = desk.lock().unwrap();
            let new = d.to_record.pop_front();
            let minimized = if new.is_none() {
                d.minimized.pop_front()
            } else {
                None
            };
            d.writing = new.is_some() || minimized.is_some();
            (new, minimized, d.closing)
        };
        if let Some((f, seen_at)) = new {
            let base = f.signature.file_stem();
            let written = record_finding(cfg, recorder, &f, &dir, &base);
            let mut d = desk.lock().unwrap();
            d.recorded.push(Recorded {
                failure: f,
                seen_at,
                written,
            });
            d.writing = false;
        } else if let Some(r) = minimized {
            let cut = r
                .outcome
                .as_ref()
                .is_ok_and(|m| m.budget_ran_out && m.execs < cfg.minimize_execs);
            let line = write_minimized(cfg, recorder, &r, &dir);
            let mut d = desk.lock().unwrap();
            d.told.push((r.task.base.clone(), cut, line));
            d.writing = false;
        } else if closing {
            return;
        } else {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// A finding as written.
pub struct Written {
    /// The reproducer (or, when Ctrl-C came first, the schedule).
    pub path: std::path::PathBuf,
    /// The one-line summary.
    pub headline: String,
    /// Whether its schedule, run again from scratch, gave the same trace
    /// (`None` when not checked: a wall-clock outcome, or not recorded).
    pub stable: Option<bool>,
    /// Whether it was recorded (else its schedule was kept).
    pub recorded: bool,
}

/// Records a new finding from scratch and writes its reproducer and
/// story. The recording run is also the finding's stability check (the
/// workers' runs start from a snapshot; this one starts the program).
pub fn record_finding(
    cfg: &FuzzConfig,
    recorder: &Recorder,
    f: &NewFailure,
    dir: &Path,
    base: &str,
) -> Result<Written, String> {
    let mut schedule = f.schedule.clone();
    schedule.origin = format!("rewind-fuzz finding {base}");
    match crate::rwd::record(&recorder.run, recorder.source.clone(), &schedule) {
        Ok((rwd, report)) => {
            let stable = (!f.kind.depends_on_the_host()).then(|| report.trace_hash == f.trace_hash);
            let (path, headline) = write_reproducer(cfg, &rwd, dir, base)?;
            Ok(Written {
                path,
                headline,
                stable,
                recorded: true,
            })
        }
        // The finding's run could not be recorded (the machine failed): its
        // schedule is kept, with the command that records it.
        Err(why) => {
            let readers = if cfg.run.exclude_files.is_empty() {
                crate::fsutil::Readers::Everyone
            } else {
                crate::fsutil::Readers::Owner
            };
            let path = dir.join(format!("{base}.schedule.json"));
            let note = f.signature.to_note(Naming::default());
            schedule
                .save_for_failure(&path, readers, note)
                .map_err(|e| format!("cannot save {}: {e}", path.display()))?;
            let headline = f.signature.to_string();
            let text = format!(
                "{headline}\nThis finding's run could not be recorded: {why}\n{}",
                finding_commands(cfg, &path)
            );
            let txt = dir.join(format!("{base}.txt"));
            crate::fsutil::write_atomically_as(&txt, text.as_bytes(), readers)
                .map_err(|e| e.to_string())?;
            Ok(Written {
                path,
                headline,
                stable: None,
                recorded: false,
            })
        }
    }
}

/// Writes a finding's reproducer and, beside it, its story; returns the
/// reproducer's path and its one-line summary.
pub fn write_reproducer(
    cfg: &FuzzConfig,
    rwd: &Rwd,
    dir: &Path,
    base: &str,
) -> Result<(std::path::PathBuf, String), String> {
    let path = dir.join(format!("{base}.rwd"));
    let excluding = !cfg.run.exclude_files.is_empty();
    let readers = rwd.readers(excluding);
    rwd.save_as(&path, readers).map_err(|e| e.to_string())?;
    if let Some(note) = rwd.privacy_note(&path, excluding) {
        eprintln!("rewind-fuzz: note: {note}");
    }
    // Told as `show` tells it: the guest's strings (thread names, output)
    // escaped, so `cat`ing the story cannot drive the terminal.
    let shown = rwd.for_display();
    let mut teller = crate::rwd::story::StoryTeller::new(&shown);
    let headline = teller.headline();
    let mut story =
        crate::escape::text(&teller.text(crate::rwd::story::DEFAULT_LANE_STEPS as usize))
            .into_owned();
    story.push('\n');
    story.push_str(&finding_commands(cfg, &path));
    // The story holds what the program printed: as private as the run.
    let txt = dir.join(format!("{base}.txt"));
    crate::fsutil::write_atomically_as(&txt, story.as_bytes(), readers)
        .map_err(|e| e.to_string())?;
    if let Some(old) = Some(dir.join(format!("{base}.schedule.json"))).filter(|p| p.exists()) {
        // A schedule kept for want of a recording is superseded.
        let _ = std::fs::remove_file(old);
    }
    Ok((path, headline))
}

/// Records a minimized schedule and, when it still fails as the finding
/// did, writes it over the finding's reproducer. Returns a line for people.
pub fn write_minimized(
    cfg: &FuzzConfig,
    recorder: &Recorder,
    result: &MinimizeResult,
    dir: &Path,
) -> Result<String, String> {
    let t = &result.task;
    let m = result.outcome.as_ref().map_err(|e| e.clone())?;
    let cut = if m.budget_ran_out {
        if m.execs >= cfg.minimize_execs {
            " (its --minimize-execs ran out)"
        } else {
            " (cut short by the session's end: a --resume goes on with it)"
        }
    } else {
        ""
    };
    if m.after >= t.schedule.decisions.len() && m.window_after >= m.window_before {
        let state = if m.budget_ran_out {
            "not minimized yet"
        } else {
            "minimal"
        };
        return Ok(format!(
            "{}: {state} at {} decisions{cut}",
            t.base, t.found_with
        ));
    }
    let mut schedule = m.schedule.clone();
    schedule.origin = format!(
        "rewind-fuzz finding {}, minimized from {} to {} decisions",
        t.base, t.found_with, m.after
    );
    let (rwd, _, same) = crate::rwd::record_expecting(
        &recorder.run,
        recorder.source.clone(),
        &schedule,
        Some((&t.want, t.naming)),
    )
    .map_err(|e| e.to_string())?;
    if !same {
        return Err(format!(
            "the minimized schedule of {} recorded as {}, not {}; the reproducer is kept as found",
            t.base, rwd.expected.signature, t.want
        ));
    }
    write_reproducer(cfg, &rwd, dir, &t.base)?;
    Ok(format!(
        "{}: minimized from {} to {} decisions in {} runs{cut}",
        t.base, t.found_with, m.after, m.execs
    ))
}

/// The commands that use a finding.
pub fn finding_commands(cfg: &FuzzConfig, path: &Path) -> String {
    let p = crate::escape::shell_word(&path.to_string_lossy()).into_owned();
    if path.extension().is_some_and(|e| e == "json") {
        let rwd = path.with_extension("").with_extension("rwd");
        let extra = [
            "--schedule".to_string(),
            path.display().to_string(),
            "--save-rwd".to_string(),
            rwd.display().to_string(),
        ];
        return format!(
            "  Record with: {}\n",
            crate::rwd::run_command(&cfg.run_words, &extra, &cfg.args)
        );
    }
    let replay = crate::rwd::consent_flags(&cfg.run, true);
    let gdb = crate::rwd::consent_flags(&cfg.run, false);
    format!(
        "  Reproduce with: rewind-fuzz replay{replay} {p}\n  Explain with:   rewind-fuzz show {p}\n  Debug with:     rewind-fuzz gdb{gdb} {p} --at end\n"
    )
}

/// The desk, shared by the main thread, the minimizer and the writer.
pub type SharedDesk = Arc<Mutex<Desk>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_schedules_command_records_it_with_the_sessions_arguments_and_settings() {
        let run = RunConfig::new(crate::kernel::KernelConfig::new("/t/bin", &[]));
        let cfg = FuzzConfig {
            target_fingerprint: 0,
            target_name: "target/debug/deps/bank-1a2b".into(),
            run_words: ["--target", "target/debug/deps/bank-1a2b", "--seed", "7"]
                .map(String::from)
                .to_vec(),
            args: ["--exact", "tests::two ways", "--test-threads=1"]
                .map(String::from)
                .to_vec(),
            run,
            out: "/o".into(),
            jobs: 1,
            budget: Default::default(),
            seed: 7,
            initial: Vec::new(),
            mix: Default::default(),
            sync_dir: None,
            sync_id: "x".into(),
            minimize_execs: 0,
            screen: false,
            quiet: true,
            watch: None,
            resume: false,
            workers: crate::fuzz::WorkerKind::Threads,
            nodes: Default::default(),
            pin: None,
        };
        let text = finding_commands(&cfg, Path::new("/o/my findings/deadlocked-1.schedule.json"));
        assert_eq!(
            text,
            "  Record with: rewind-fuzz run --target target/debug/deps/bank-1a2b --seed 7 \
             --schedule '/o/my findings/deadlocked-1.schedule.json' \
             --save-rwd '/o/my findings/deadlocked-1.rwd' \
             -- --exact 'tests::two ways' --test-threads=1\n"
        );
    }
}
