//! The session's output directory, statistics and status display.
//!
//! ```text
//! OUT/queue/          the corpus, one JSON schedule input per entry
//! OUT/findings/       one reproducer per distinct failure, with its story
//! OUT/fuzzer_stats    AFL-style `key : value` lines
//! OUT/plot_data       one line per interval
//! OUT/coverage.svg    features over time
//! ```

use std::collections::BTreeSet;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::feedbacks::{NewFailure, Shared};
use super::findings::{self, Desk, MinimizeTask, SharedDesk};
use super::input::ScheduleInput;
use super::observers::FeatureKind;
use super::sync::SyncDir;
use super::{Finding, FuzzConfig, FuzzError, FuzzSummary, Hub, Progress, SYNC_INTERVAL};
use crate::fsutil::write_atomically;

/// Interval between lines of `plot_data`.
/// How long one tick may spend reading the sync directory.
const SYNC_SLICE: Duration = Duration::from_millis(40);
/// How many unusable sync entries are named, one warning each.
const SYNC_WARNINGS: usize = 5;
const PLOT_INTERVAL: Duration = Duration::from_secs(5);
/// Interval between status lines when not on a terminal.
const LINE_INTERVAL: Duration = Duration::from_secs(10);

/// One line of `plot_data`.
#[derive(Clone, Copy, Debug)]
struct Sample {
    secs: f64,
    execs: u64,
    corpus: usize,
    /// Features of each kind, in `FeatureKind::ALL`'s order.
    features: [usize; FeatureKind::ALL.len()],
    findings: usize,
    /// Of those, the hangs (step budget, watchdog).
    hangs: usize,
}

/// What the sessions before a `--resume` did: the counts go on from there,
/// and their findings are not announced again.
#[derive(Clone, Debug, Default)]
pub struct Prior {
    pub execs: u64,
    pub run_time: f64,
    /// `fuzzer_stats` lines `findings_*`, by key.
    pub findings: std::collections::BTreeMap<String, u64>,
    /// Signature ids of the findings already in `findings/`.
    pub signatures: BTreeSet<String>,
}

impl Prior {
    /// Reads `fuzzer_stats` and the names in `findings/` of a session
    /// directory (an absent one reads as nothing).
    pub fn read(out: &Path) -> Prior {
        let mut p = Prior::default();
        let stats = crate::fsutil::read_foreign(&out.join("fuzzer_stats"), 1 << 20)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        for l in stats.lines() {
            let Some((k, v)) = l.split_once(':') else {
                continue;
            };
            let (k, v) = (k.trim(), v.trim());
            match k {
                "execs_done" => p.execs = v.parse().unwrap_or(0),
                "run_time" => p.run_time = v.parse().unwrap_or(0.0),
                k if k == "findings"
                    || k.starts_with("findings_")
                    || k == "saved_crashes"
                    || k == "saved_hangs" =>
                {
                    p.findings.insert(k.into(), v.parse().unwrap_or(0));
                }
                _ => {}
            }
        }
        // `KIND-ID.rwd` (or `.schedule.json`): the id is 16 hex digits.
        for name in list_names(&out.join("findings")) {
            let stem = name.split('.').next().unwrap_or("");
            if let Some((_, id)) = stem.rsplit_once('-') {
                if id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
                    p.signatures.insert(id.to_string());
                }
            }
        }
        p
    }
}

pub struct Output {
    out: PathBuf,
    /// The sessions before this one, when resumed.
    prior: Prior,
    pub findings: Vec<Finding>,
    /// Failures found whose reproducer could not be written, with why.
    pub unsaved: Vec<String>,
    written: BTreeSet<String>,
    imported: BTreeSet<String>,
    warned: BTreeSet<String>,
    samples: Vec<Sample>,
    last_plot: Option<Instant>,
    last_line: Option<Instant>,
    last_screen: Option<Instant>,
    last_sync: Option<Instant>,
    /// The sync directory, opened once; whether a scan of it is under way.
    sync: Option<SyncDir>,
    scanning: bool,
    /// Unusable entries of the sync directory seen (only the first few are
    /// named).
    sync_skipped: usize,
    last_stats: Option<Instant>,
    last_new_feature: Instant,
    last_features: usize,
    start_wall: u64,
    screen: bool,
    /// Findings whose schedule was run again from scratch, and how many of
    /// those gave the same trace.
    stability_checks: u64,
    stability_same: u64,
    /// Lines of the status block now on the terminal (0: none drawn).
    drawn: usize,
    /// Findings handed between this thread, the writer and the minimizer.
    desk: SharedDesk,
    /// Findings whose minimization the session's end cut short.
    cut_short: BTreeSet<String>,
    /// The last status line printed (not on a terminal).
    last_line_said: Option<String>,
}

fn setup_error(what: &str, path: &Path, e: std::io::Error) -> FuzzError {
    FuzzError::Setup(format!(
        "cannot {what} {}: {e}; choose a writable --out directory",
        path.display()
    ))
}

impl Output {
    /// Creates the output directory (or finds it, for `--resume`).
    pub fn create(cfg: &FuzzConfig) -> Result<Output, FuzzError> {
        for dir in [
            cfg.out.clone(),
            cfg.out.join("queue"),
            cfg.out.join("findings"),
        ] {
            std::fs::create_dir_all(&dir).map_err(|e| setup_error("create", &dir, e))?;
        }
        // A probe write: a read-only or full directory is reported now, not
        // after hours of fuzzing.
        let probe = cfg.out.join(".write-test");
        write_atomically(&probe, b"ok").map_err(|e| setup_error("write to", &cfg.out, e))?;
        let _ = std::fs::remove_file(&probe);
        let written = list_names(&cfg.out.join("queue"));
        let sync = match &cfg.sync_dir {
            Some(d) => Some(
                SyncDir::open(d, &cfg.sync_id)
                    .map_err(|e| setup_error("open the sync directory", d, e))?,
            ),
            None => None,
        };
        Ok(Output {
            out: cfg.out.clone(),
            prior: if cfg.resume {
                Prior::read(&cfg.out)
            } else {
                Prior::default()
            },
            findings: Vec::new(),
            unsaved: Vec::new(),
            written,
            imported: BTreeSet::new(),
            warned: BTreeSet::new(),
            samples: Vec::new(),
            last_plot: None,
            // The first line comes after an interval: at the start every
            // count is zero.
            last_line: Some(Instant::now()),
            last_screen: None,
            last_sync: None,
            sync,
            scanning: false,
            sync_skipped: 0,
            last_stats: None,
            stability_checks: 0,
            stability_same: 0,
            drawn: 0,
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
            last_line_said: None,
            last_new_feature: Instant::now(),
            last_features: 0,
            start_wall: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            screen: cfg.screen && std::io::stderr().is_terminal(),
        })
    }

    /// Executions of the sessions before a `--resume`.
    pub fn prior_execs(&self) -> u64 {
        self.prior.execs
    }

    /// The desk the writer and the minimizer work from.
    pub fn desk(&self) -> SharedDesk {
        self.desk.clone()
    }

    /// Signature ids of the findings the sessions before this one saved.
    pub fn prior_signatures(&self) -> BTreeSet<String> {
        self.prior.signatures.clone()
    }

    /// Takes the status block off the terminal, so what is printed next
    /// scrolls up like any output and stays in the scrollback; the block
    /// is drawn again below it.
    fn erase_status(&mut self) {
        if self.drawn > 0 {
            eprint!("\x1b[{}F\x1b[J", self.drawn);
            self.drawn = 0;
        }
    }

    fn warn_once(&mut self, key: String, msg: String) {
        if self.warned.insert(key) {
            self.erase_status();
            eprintln!("rewind-fuzz: warning: {msg}");
        }
    }

    /// Everything the main thread does between checks of the workers.
    #[allow(clippy::too_many_arguments)]
    pub fn tick(
        &mut self,
        cfg: &FuzzConfig,
        shared: &Shared,
        hub: &Hub,
        hub_cursor: &mut usize,
        progress: &Progress,
        start: Instant,
    ) {
        self.export(cfg, hub, hub_cursor);
        if self.scanning || self.last_sync.is_none_or(|t| t.elapsed() >= SYNC_INTERVAL) {
            self.import(cfg, hub);
        }
        let pending: Vec<NewFailure> = std::mem::take(&mut shared.failures.lock().unwrap().pending);
        // A session that measures (bench) only counts executions to its goal.
        if cfg.watch.is_none() {
            let seen_at = start.elapsed();
            let mut desk = self.desk.lock().unwrap();
            desk.to_record
                .extend(pending.into_iter().map(|f| (f, seen_at)));
            let recorded = std::mem::take(&mut desk.recorded);
            let told = std::mem::take(&mut desk.told);
            drop(desk);
            for r in recorded {
                self.announce(cfg, r);
            }
            self.tell_minimized(told);
        }
        let sample = Sample {
            secs: start.elapsed().as_secs_f64(),
            execs: progress.execs.load(Ordering::Relaxed),
            corpus: self.written.len(),
            features: shared.features.lock().unwrap().counts(),
            findings: self.findings.len(),
            hangs: self.hangs(),
        };
        let total: usize = sample.features.iter().sum();
        if total > self.last_features {
            self.last_features = total;
            self.last_new_feature = Instant::now();
        }
        if self.last_plot.is_none_or(|t| t.elapsed() >= PLOT_INTERVAL) {
            self.last_plot = Some(Instant::now());
            self.samples.push(sample);
            self.write_plot_data();
        }
        if self
            .last_stats
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
        {
            self.last_stats = Some(Instant::now());
            self.write_stats(cfg, &sample, progress);
        }
        if !cfg.quiet {
            self.show(cfg, &sample, progress, false);
        }
    }

    /// Writes corpus entries new in the hub to `queue/` and the sync directory.
    fn export(&mut self, cfg: &FuzzConfig, hub: &Hub, cursor: &mut usize) {
        let fresh = hub.slice(*cursor);
        *cursor += fresh.len();
        for (from, input) in fresh {
            let name = libafl::inputs::Input::generate_name(&input, None);
            if !self.written.insert(name.clone()) {
                continue;
            }
            if let Err(e) =
                libafl::inputs::Input::to_file(&input, self.out.join("queue").join(&name))
            {
                self.warn_once(
                    "queue".into(),
                    format!(
                        "cannot write to {}/queue: {e} (fuzzing goes on)",
                        self.out.display()
                    ),
                );
            }
            // Entries that came from the sync directory are not sent back.
            if from != usize::MAX {
                if let (Some(sync), Some(dir)) = (&self.sync, &cfg.sync_dir) {
                    let data = serde_json::to_vec_pretty(&input).unwrap();
                    let r = sync.publish("queue", &name, &data, 0o644);
                    if let Err(e) = r {
                        self.warn_once(
                            "sync-out".into(),
                            format!(
                                "cannot publish to the sync directory {}: {e} (fuzzing goes on)",
                                dir.display()
                            ),
                        );
                    }
                }
            }
        }
    }

    /// Takes other fuzzers' new entries from the sync directory: one
    /// slice of a scan per tick, so a huge directory cannot hold up the
    /// session's end.
    fn import(&mut self, cfg: &FuzzConfig, hub: &Hub) {
        let (Some(sync), Some(dir)) = (&mut self.sync, &cfg.sync_dir) else {
            return;
        };
        let until = Instant::now() + SYNC_SLICE;
        let mut found = Vec::new();
        let imported = &mut self.imported;
        let scanned = sync.scan_slice(
            until,
            crate::sched::MAX_SCHEDULE_FILE,
            |label| imported.insert(label.into()),
            &mut found,
        );
        match scanned {
            Ok(false) => self.scanning = true,
            Ok(true) => {
                self.scanning = false;
                self.last_sync = Some(Instant::now());
            }
            Err(e) => {
                self.scanning = false;
                self.last_sync = Some(Instant::now());
                let msg = format!(
                    "cannot read the sync directory {}: {e} (fuzzing goes on alone)",
                    dir.display()
                );
                self.warn_once("sync-in".into(), msg);
            }
        }
        let dir = dir.clone();
        for f in found {
            if self.written.contains(&f.name) {
                continue;
            }
            // Anyone may write here: a FIFO must not stall the session,
            // nor a huge file fill its memory.
            match f.bytes.and_then(|b| {
                ScheduleInput::parse(&b, cfg.target_fingerprint).map_err(|e| e.to_string())
            }) {
                Ok(input) => hub.publish(usize::MAX, input),
                Err(e) => {
                    self.sync_skipped += 1;
                    let path = dir.join(&f.label);
                    let msg = match self.sync_skipped {
                        ..=SYNC_WARNINGS => {
                            format!("skipping {} from the sync directory: {e}", path.display())
                        }
                        n if n == SYNC_WARNINGS + 1 => {
                            "more unusable entries of the sync directory are skipped without a word"
                                .into()
                        }
                        _ => continue,
                    };
                    self.warn_once(
                        path.display().to_string(),
                        crate::escape::line(&msg).into_owned(),
                    );
                }
            }
        }
    }

    /// Announces a finding the writer recorded (or could not), and hands
    /// it to the minimizer.
    fn announce(&mut self, cfg: &FuzzConfig, r: findings::Recorded) {
        self.erase_status();
        let f = r.failure;
        let base = f.signature.file_stem();
        let (path, summary) = match r.written {
            Ok(w) => {
                if let Some(same) = w.stable {
                    self.stability_checks += 1;
                    self.stability_same += u64::from(same);
                }
                if w.recorded && cfg.minimize_execs > 0 && !f.report.schedule.decisions.is_empty() {
                    let schedule = f.report.schedule.clone();
                    self.desk.lock().unwrap().waiting.push_back(MinimizeTask {
                        base: base.clone(),
                        found_with: schedule.decisions.len(),
                        schedule,
                        want: f.signature.clone(),
                        naming: crate::report::signature::Naming::default(),
                    });
                }
                (w.path, w.headline)
            }
            Err(e) => {
                eprintln!("rewind-fuzz: warning: cannot write finding {base}: {e}");
                self.unsaved.push(format!("{base}: {e}"));
                return;
            }
        };
        if let (Some(sync), Some(name)) = (&self.sync, path.file_name()) {
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
        let p = path.display();
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
        msg.push_str(&format!("  Saved to: {p}\n"));
        msg.push_str(&findings::finding_commands(cfg, &path));
        eprint!("{msg}");
        self.findings.push(finding);
    }

    /// Says what became of the minimizations the writer wrote.
    fn tell_minimized(&mut self, told: Vec<(String, bool, Result<String, String>)>) {
        for (base, cut, line) in told {
            if cut {
                self.cut_short.insert(base.clone());
            }
            self.erase_status();
            match line {
                Ok(line) => eprintln!("rewind-fuzz: {line}"),
                Err(e) => eprintln!("rewind-fuzz: warning: minimizing {base}: {e}"),
            }
        }
    }

    /// Findings whose minimization is not done: waiting, under way or cut
    /// short.
    fn minimize_pending(&self) -> Vec<String> {
        let mut pending = self.desk.lock().unwrap().pending();
        pending.extend(self.cut_short.iter().cloned());
        pending.sort();
        pending.dedup();
        pending
    }

    /// `plot_data` in AFL++'s columns (afl-plot draws it), then ours:
    /// each feature kind and the findings.
    fn write_plot_data(&mut self) {
        let names: Vec<&str> = FeatureKind::ALL.iter().map(|k| k.name()).collect();
        let mut s = format!(
            "# relative_time, cycles_done, cur_item, corpus_count, pending_total, pending_favs, map_size, saved_crashes, saved_hangs, max_depth, execs_per_sec, total_execs, edges_found, {}, findings\n",
            names.join(", ")
        );
        for x in &self.samples {
            let f: Vec<String> = x.features.iter().map(|n| n.to_string()).collect();
            let edges: usize = x.features.iter().sum();
            let map = 100.0 * edges.min(super::observers::MAP_SIZE) as f64
                / super::observers::MAP_SIZE as f64;
            s.push_str(&format!(
                "{:.0}, 0, 0, {}, 0, 0, {map:.2}%, {}, {}, 0, {:.2}, {}, {edges}, {}, {}\n",
                x.secs,
                x.corpus,
                x.findings - x.hangs,
                x.hangs,
                x.execs as f64 / x.secs.max(1e-3),
                x.execs,
                f.join(", "),
                x.findings
            ));
        }
        let r = write_atomically(&self.out.join("plot_data"), s.as_bytes());
        self.warn_if_unwritten("plot_data", r);
    }

    /// Says once per file that it could not be written (a full disk):
    /// fuzzing goes on, but the file stops being current.
    fn warn_if_unwritten(&mut self, name: &str, r: std::io::Result<()>) {
        if let Err(e) = r {
            let path = self.out.join(name);
            self.warn_once(
                format!("write {name}"),
                format!(
                    "cannot update {}: {e}; fuzzing goes on, but it is no longer current (free space in --out)",
                    path.display()
                ),
            );
        }
    }

    fn write_stats(&mut self, cfg: &FuzzConfig, s: &Sample, progress: &Progress) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        // Counts go on from the sessions before a --resume.
        let prior = |key: &str| self.prior.findings.get(key).copied().unwrap_or(0);
        let count = |key: &str, class: &str| {
            (self
                .findings
                .iter()
                .filter(|f| f.kind.class() == class)
                .count() as u64
                + prior(key))
            .to_string()
        };
        let total_secs = s.secs + self.prior.run_time;
        let total_execs = s.execs + self.prior.execs;
        let last_find = self
            .findings
            .last()
            .map_or(0, |f| self.start_wall + f.elapsed.as_secs());
        // AFL++'s crashes and hangs: a run that stopped for lack of
        // progress (the step budget, the watchdog) is a hang; every other
        // finding, deadlocks included, a crash.
        let when = |f: Option<&Finding>| f.map_or(0, |f| self.start_wall + f.elapsed.as_secs());
        let hangs = self.hangs() as u64;
        let crashes = self.findings.len() as u64 - hangs;
        let since_crash = self
            .last_finding(false)
            .map_or(s.execs, |f| s.execs.saturating_sub(f.execs));
        let time_without_finds = self
            .findings
            .last()
            .map_or(s.secs, |f| s.secs - f.elapsed.as_secs_f64());
        let steps = progress.steps.load(Ordering::Relaxed);
        let exits = progress.exits.load(Ordering::Relaxed);
        let edges: usize = s.features.iter().sum();
        let stability = if self.stability_checks == 0 {
            100.0
        } else {
            100.0 * self.stability_same as f64 / self.stability_checks as f64
        };
        let lines = [
            ("start_time", self.start_wall.to_string()),
            ("last_update", now.to_string()),
            ("run_time", format!("{total_secs:.0}")),
            ("fuzzer_pid", std::process::id().to_string()),
            ("cycles_done", "0".into()),
            ("cycles_wo_finds", "0".into()),
            ("time_wo_finds", format!("{time_without_finds:.0}")),
            ("target", cfg.target_name.clone()),
            ("jobs", cfg.jobs.to_string()),
            ("execs_done", total_execs.to_string()),
            (
                "execs_per_sec",
                format!("{:.2}", s.execs as f64 / s.secs.max(1e-3)),
            ),
            (
                "execs_per_job",
                progress
                    .per_worker
                    .iter()
                    .map(|e| e.load(Ordering::Relaxed).to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            (
                "steps_per_exec",
                format!("{:.1}", steps as f64 / s.execs.max(1) as f64),
            ),
            (
                "exits_per_step",
                format!("{:.3}", exits as f64 / steps.max(1) as f64),
            ),
            // Each job's wall time per exit, everything included.
            (
                "us_per_exit",
                format!(
                    "{:.1}",
                    s.secs * cfg.jobs as f64 * 1e6 / exits.max(1) as f64
                ),
            ),
            ("corpus_count", s.corpus.to_string()),
            (
                "corpus_found",
                s.corpus.saturating_sub(self.imported.len()).to_string(),
            ),
            ("corpus_imported", self.imported.len().to_string()),
            ("features_lock_order", s.features[0].to_string()),
            ("features_interleavings", s.features[1].to_string()),
            ("features_handoffs", s.features[2].to_string()),
            ("features_reads_from", s.features[3].to_string()),
            (
                "findings",
                (self.findings.len() as u64 + prior("findings")).to_string(),
            ),
            ("findings_crashed", count("findings_crashed", "crashed")),
            (
                "findings_deadlocked",
                count("findings_deadlocked", "deadlocked"),
            ),
            ("findings_hung", count("findings_hung", "hung")),
            (
                "findings_timed_out",
                count("findings_timed_out", "timed-out"),
            ),
            ("findings_exit", count("findings_exit", "exited(non-zero)")),
            (
                "findings_potential_deadlock",
                count("findings_potential_deadlock", "potential-deadlock"),
            ),
            ("last_find", last_find.to_string()),
            (
                "saved_crashes",
                (crashes + prior("saved_crashes")).to_string(),
            ),
            ("saved_hangs", (hangs + prior("saved_hangs")).to_string()),
            ("last_crash", when(self.last_finding(false)).to_string()),
            ("last_hang", when(self.last_finding(true)).to_string()),
            ("execs_since_crash", since_crash.to_string()),
            ("exec_timeout", cfg.run.timeout.as_millis().to_string()),
            (
                "minimize_execs",
                progress.minimize_execs.load(Ordering::Relaxed).to_string(),
            ),
            (
                "minimize_time",
                format!(
                    "{:.1}",
                    progress.minimize_us.load(Ordering::Relaxed) as f64 / 1e6
                ),
            ),
            (
                "minimize_pending",
                self.minimize_pending().len().to_string(),
            ),
            ("stability", format!("{stability:.2}%")),
            ("stability_checks", self.stability_checks.to_string()),
            (
                "bitmap_cvg",
                format!(
                    "{:.2}%",
                    100.0 * edges.min(super::observers::MAP_SIZE) as f64
                        / super::observers::MAP_SIZE as f64
                ),
            ),
            ("edges_found", edges.to_string()),
            ("total_edges", super::observers::MAP_SIZE.to_string()),
            ("peak_rss_mb", peak_rss_mib().to_string()),
            ("afl_banner", cfg.target_name.clone()),
            (
                "afl_version",
                format!("rewind-fuzz {}", env!("CARGO_PKG_VERSION")),
            ),
            ("target_mode", "schedules (KVM)".into()),
            ("command_line", command_line()),
        ];
        let mut text = String::new();
        for (k, v) in lines {
            text.push_str(&format!("{k:<28}: {v}\n"));
        }
        let r = write_atomically(&self.out.join("fuzzer_stats"), text.as_bytes());
        self.warn_if_unwritten("fuzzer_stats", r);
    }

    /// The status: a block redrawn in place on a terminal, else a line
    /// every [`LINE_INTERVAL`]; `last` draws it once more at the end, with
    /// the counts the summary gives.
    fn show(&mut self, cfg: &FuzzConfig, s: &Sample, progress: &Progress, last: bool) {
        // A rate over less than a second says nothing.
        let per_sec = |n: u64| {
            if s.secs >= 1.0 {
                format!("{:.1}", n as f64 / s.secs)
            } else {
                "-".to_string()
            }
        };
        let rate = per_sec(s.execs);
        let all_sessions = if self.prior.execs > 0 {
            format!(" ({} in all sessions)", s.execs + self.prior.execs)
        } else {
            String::new()
        };
        let minimize_runs = progress.minimize_execs.load(Ordering::Relaxed);
        let minimize_secs = progress.minimize_us.load(Ordering::Relaxed) as f64 / 1e6;
        let pending = self.minimize_pending().len();
        if self.screen {
            if !last
                && self
                    .last_screen
                    .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
            {
                return;
            }
            self.last_screen = Some(Instant::now());
            let per_job: Vec<String> = progress
                .per_worker
                .iter()
                .map(|e| per_sec(e.load(Ordering::Relaxed)))
                .collect();
            let kinds = [
                ("crashed", "crashed"),
                ("deadlocked", "deadlocked"),
                ("hung", "hung"),
                ("timed-out", "timed-out"),
                ("exit", "exited(non-zero)"),
                ("potential-deadlock", "potential-deadlock"),
            ];
            let found: Vec<String> = kinds
                .iter()
                .map(|(label, class)| {
                    let n = self.findings.iter().filter(|f| f.kind.class() == *class);
                    format!("{label} {}", n.count())
                })
                .collect();
            let ago = |f: Option<&Finding>| match f {
                Some(f) => format!(
                    "{:.0?} ago",
                    Duration::from_secs_f64((s.secs - f.elapsed.as_secs_f64()).max(0.0))
                ),
                None => "none yet".to_string(),
            };
            let last_crash = self.last_finding(false);
            let last_hang = self.last_finding(true);
            let mut lines = vec![
                format!(" rewind-fuzz  {}", cfg.target_name),
                format!(
                    "   elapsed   {:>10.0?}      budget  {}",
                    Duration::from_secs_f64(s.secs),
                    budget_text(cfg)
                ),
                format!(
                    "   execs     {:>10}      per sec {rate} (jobs: {}){all_sessions}",
                    s.execs,
                    per_job.join(" ")
                ),
                format!(
                    "   corpus    {:>10}      imported {}, last new feature {:.0?} ago",
                    s.corpus,
                    self.imported.len(),
                    self.last_new_feature.elapsed()
                ),
                format!(
                    "   features  lock order {}, interleavings {}, handoffs {}, reads-from {}",
                    s.features[0], s.features[1], s.features[2], s.features[3]
                ),
                format!("   findings  {} ({})", s.findings, found.join(", ")),
                format!(
                    "   last      find {}, crash {}, hang {}",
                    ago(self.findings.last()),
                    ago(last_crash),
                    ago(last_hang)
                ),
                format!(
                    "   minimize  {minimize_runs} runs in {minimize_secs:.1}s (at most 1 in {} of all runs), {pending} finding(s) to go",
                    findings::SEARCH_RUNS_PER_MINIMIZE_RUN + 1
                ),
            ];
            // The latest finding in the program's words.
            if let Some(f) = self.findings.last() {
                let summary: String = f.summary.chars().take(100).collect();
                lines.push(format!("   latest    {summary}"));
            }
            lines.push(format!("   output    {}", self.out.display()));
            // Redrawn in place: the findings printed above it stay.
            let mut e = std::io::stderr().lock();
            let mut text = String::new();
            if self.drawn > 0 {
                text.push_str(&format!("\x1b[{}F", self.drawn));
            }
            for l in &lines {
                text.push_str("\x1b[2K");
                text.push_str(l);
                text.push('\n');
            }
            text.push_str("\x1b[J");
            let _ = e.write_all(text.as_bytes());
            self.drawn = lines.len();
        } else if last || self.last_line.is_none_or(|t| t.elapsed() >= LINE_INTERVAL) {
            self.last_line = Some(Instant::now());
            let line = format!(
                "[{:>6.0}s] execs {}{all_sessions} ({rate}/s), corpus {}, features {}/{}/{}/{} (lock order/interleavings/handoffs/reads-from), findings {}, minimizing {pending}",
                s.secs,
                s.execs,
                s.corpus,
                s.features[0],
                s.features[1],
                s.features[2],
                s.features[3],
                s.findings
            );
            // The closing line is not said twice.
            if self.last_line_said.as_deref() != Some(line.as_str()) {
                eprintln!("{line}");
                self.last_line_said = Some(line);
            }
        }
    }

    /// Findings that are hangs in AFL++'s sense: the run stopped for lack
    /// of progress (the step budget, the watchdog).
    fn hangs(&self) -> usize {
        self.findings.iter().filter(|f| is_hang(f)).count()
    }

    /// The latest hang (`hang`) or crash in AFL++'s sense.
    fn last_finding(&self, hang: bool) -> Option<&Finding> {
        self.findings.iter().rfind(|f| is_hang(f) == hang)
    }

    /// Entries in the corpus directory.
    pub fn corpus_len(&self) -> usize {
        self.written.len()
    }

    /// The last files: statistics, plot data and the coverage picture.
    pub fn finish(&mut self, cfg: &FuzzConfig, summary: &FuzzSummary, progress: &Progress) {
        let s = Sample {
            secs: summary.elapsed.as_secs_f64(),
            execs: summary.execs,
            corpus: summary.corpus,
            features: FeatureKind::ALL.map(|k| summary.features[k.name()]),
            findings: summary.findings.len(),
            hangs: self.hangs(),
        };
        self.samples.push(s);
        self.write_plot_data();
        self.write_stats(cfg, &s, progress);
        // What the next --resume minimizes first.
        let pending = self.minimize_pending();
        let list = self.out.join(findings::PENDING_FILE);
        if pending.is_empty() {
            let _ = std::fs::remove_file(&list);
        } else {
            let r = write_atomically(&list, format!("{}\n", pending.join("\n")).as_bytes());
            self.warn_if_unwritten(findings::PENDING_FILE, r);
        }
        if !cfg.quiet {
            self.show(cfg, &s, progress, true);
        }
        let r = write_atomically(
            &self.out.join("coverage.svg"),
            coverage_svg(
                &self.samples,
                &cfg.target_name,
                &self
                    .findings
                    .iter()
                    .map(|f| f.elapsed.as_secs_f64())
                    .collect::<Vec<_>>(),
            )
            .as_bytes(),
        );
        self.warn_if_unwritten("coverage.svg", r);
    }
}

fn budget_text(cfg: &FuzzConfig) -> String {
    match (cfg.budget.time, cfg.budget.execs) {
        (Some(t), Some(e)) => format!("{t:.0?} or {e} execs"),
        (Some(t), None) => format!("{t:.0?}"),
        (None, Some(e)) => format!("{e} execs"),
        (None, None) => "until Ctrl-C".into(),
    }
}

fn list_names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Coverage over time: one panel per feature kind, each on its own scale
/// (a kind in the tens drawn under one in the thousands would be a flat
/// line at zero), with the findings marked where they were found.
fn coverage_svg(samples: &[Sample], target: &str, finds: &[f64]) -> String {
    use plotters::prelude::*;
    let tmax = samples.iter().map(|s| s.secs).fold(1.0, f64::max);
    let mut out = String::new();
    let drawn: Result<(), String> = (|| {
        let e = |e: DrawingAreaErrorKind<_>| e.to_string();
        let root = SVGBackend::with_string(&mut out, (960, 640)).into_drawing_area();
        root.fill(&WHITE).map_err(e)?;
        let title = format!(
            "{target}: coverage features over time ({} finding{}, red lines)",
            finds.len(),
            if finds.len() == 1 { "" } else { "s" }
        );
        let root = root.titled(&title, ("sans-serif", 18)).map_err(e)?;
        let panels = root.split_evenly((2, 2));
        let colours = [BLUE, GREEN, MAGENTA, CYAN];
        for (k, (kind, panel)) in FeatureKind::ALL.iter().zip(panels.iter()).enumerate() {
            let ymax = samples
                .iter()
                .map(|s| s.features[k])
                .max()
                .unwrap_or(0)
                .max(1) as f64;
            let mut chart = ChartBuilder::on(panel)
                .caption(kind.name(), ("sans-serif", 15))
                .margin(10)
                .x_label_area_size(30)
                .y_label_area_size(48)
                .build_cartesian_2d(0.0..tmax, 0.0..ymax * 1.1)
                .map_err(e)?;
            chart
                .configure_mesh()
                .x_desc("seconds")
                .y_desc("features")
                .draw()
                .map_err(e)?;
            for &t in finds {
                chart
                    .draw_series(LineSeries::new(
                        [(t, 0.0), (t, ymax * 1.1)],
                        RED.mix(0.6).stroke_width(1),
                    ))
                    .map_err(e)?;
            }
            let points = samples.iter().map(|s| (s.secs, s.features[k] as f64));
            chart
                .draw_series(LineSeries::new(points, colours[k].stroke_width(2)))
                .map_err(e)?;
        }
        root.present().map_err(e)
    })();
    // A chart that cannot be drawn is no reason to stop fuzzing: say so in
    // the file instead.
    if let Err(why) = drawn {
        return format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\"><text y=\"20\">{why}</text></svg>\n"
        );
    }
    out
}

/// The most memory this process has held at once, in MiB.
fn peak_rss_mib() -> u64 {
    // SAFETY: getrusage writes one `rusage` we own; a zeroed one is valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF needs no other argument.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0;
    }
    // Kilobytes on Linux.
    usage.ru_maxrss.max(0) as u64 / 1024
}

/// This session's command line, as AFL++ records it.
fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

/// Whether a finding is a hang in AFL++'s sense (`saved_hangs`): the run
/// stopped for lack of progress; every other finding, deadlocks included,
/// counts as a crash.
fn is_hang(f: &Finding) -> bool {
    matches!(f.kind.class(), "hung" | "timed-out")
}
