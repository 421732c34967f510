//! `fuzzer_stats` (AFL++'s keys, then ours), `plot_data` (AFL++'s columns,
//! then ours) and `coverage.svg`, the features over time.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::found::Found;
use super::layout::Prior;
use crate::fuzz::observers::{FeatureKind, MAP_SIZE};
use crate::fuzz::{Finding, FuzzConfig, Progress};

/// Interval between lines of `plot_data`.
const PLOT_INTERVAL: Duration = Duration::from_secs(5);
/// Interval between writes of `fuzzer_stats`.
const STATS_INTERVAL: Duration = Duration::from_secs(1);

/// One line of `plot_data`.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub secs: f64,
    pub execs: u64,
    pub corpus: usize,
    /// Features of each kind, in `FeatureKind::ALL`'s order.
    pub features: [usize; FeatureKind::ALL.len()],
    pub findings: usize,
    /// Of those, the hangs (step budget, watchdog).
    pub hangs: usize,
}

impl Sample {
    /// Features of every kind: AFL++'s edges.
    fn edges(&self) -> usize {
        self.features.iter().sum()
    }
}

/// The map coverage AFL++ reports for `edges` entries.
fn map_share(edges: usize) -> String {
    format!(
        "{:.2}%",
        100.0 * edges.min(MAP_SIZE) as f64 / MAP_SIZE as f64
    )
}

/// The samples so far and when the files were last written.
pub struct Stats {
    samples: Vec<Sample>,
    last_plot: Option<Instant>,
    last_stats: Option<Instant>,
    /// When the session started, in seconds since the epoch.
    start_wall: u64,
}

impl Stats {
    pub fn new() -> Stats {
        Stats {
            samples: Vec::new(),
            last_plot: None,
            last_stats: None,
            start_wall: unix_now(),
        }
    }

    /// Takes `s` as a line of `plot_data` if one is due.
    pub fn plot_due(&mut self, s: Sample) -> bool {
        if self.last_plot.is_some_and(|t| t.elapsed() < PLOT_INTERVAL) {
            return false;
        }
        self.last_plot = Some(Instant::now());
        self.samples.push(s);
        true
    }

    /// Takes the last line of `plot_data`.
    pub fn add_last(&mut self, s: Sample) {
        self.samples.push(s);
    }

    /// Whether `fuzzer_stats` is due to be written again.
    pub fn stats_due(&mut self) -> bool {
        if self
            .last_stats
            .is_some_and(|t| t.elapsed() < STATS_INTERVAL)
        {
            return false;
        }
        self.last_stats = Some(Instant::now());
        true
    }

    /// `plot_data` in AFL++'s columns (afl-plot draws it), then ours:
    /// each feature kind and the findings.
    pub fn plot_data(&self) -> String {
        let names: Vec<&str> = FeatureKind::ALL.iter().map(|k| k.name()).collect();
        let mut s = format!(
            "# relative_time, cycles_done, cur_item, corpus_count, pending_total, pending_favs, map_size, saved_crashes, saved_hangs, max_depth, execs_per_sec, total_execs, edges_found, {}, findings\n",
            names.join(", ")
        );
        for x in &self.samples {
            let f: Vec<String> = x.features.iter().map(|n| n.to_string()).collect();
            s.push_str(&format!(
                "{:.0}, 0, 0, {}, 0, 0, {}, {}, {}, 0, {:.2}, {}, {}, {}, {}\n",
                x.secs,
                x.corpus,
                map_share(x.edges()),
                x.findings - x.hangs,
                x.hangs,
                x.execs as f64 / x.secs.max(1e-3),
                x.execs,
                x.edges(),
                f.join(", "),
                x.findings
            ));
        }
        s
    }

    /// `fuzzer_stats`: AFL++'s `key : value` lines, with ours among them.
    pub fn fuzzer_stats(&self, v: &StatsView) -> String {
        let mut text = String::new();
        let groups = [
            v.session(self.start_wall),
            v.executions(),
            v.corpus(),
            v.findings(self.start_wall),
            v.minimization(),
            v.coverage(),
            v.about(),
        ];
        for (k, val) in groups.into_iter().flatten() {
            text.push_str(&format!("{k:<28}: {val}\n"));
        }
        text
    }

    /// Coverage over time, with the findings marked.
    pub fn coverage_svg(&self, target: &str, findings: &[Finding]) -> String {
        let finds: Vec<f64> = findings.iter().map(|f| f.elapsed.as_secs_f64()).collect();
        coverage_svg(&self.samples, target, &finds)
    }
}

/// What `fuzzer_stats` says.
pub struct StatsView<'a> {
    pub cfg: &'a FuzzConfig,
    pub sample: &'a Sample,
    pub progress: &'a Progress,
    pub found: &'a Found,
    pub prior: &'a Prior,
    /// Corpus entries taken from the sync directory.
    pub imported: usize,
    /// What the other nodes gave, when there are any.
    pub nodes: Option<crate::fuzz::nodes::NodeCounts>,
}

type Lines = Vec<(&'static str, String)>;

impl StatsView<'_> {
    /// The session in time.
    fn session(&self, start_wall: u64) -> Lines {
        let s = self.sample;
        let time_without_finds = self
            .found
            .findings
            .last()
            .map_or(s.secs, |f| s.secs - f.elapsed.as_secs_f64());
        vec![
            ("start_time", start_wall.to_string()),
            ("last_update", unix_now().to_string()),
            ("run_time", format!("{:.0}", s.secs + self.prior.run_time)),
            ("fuzzer_pid", std::process::id().to_string()),
            ("cycles_done", "0".into()),
            ("cycles_wo_finds", "0".into()),
            ("time_wo_finds", format!("{time_without_finds:.0}")),
            ("target", self.cfg.target_name.clone()),
            ("jobs", self.cfg.jobs.to_string()),
            (
                "worker_restarts",
                self.progress.restarts.load(Ordering::Relaxed).to_string(),
            ),
        ]
    }

    /// Executions, and what they cost.
    fn executions(&self) -> Lines {
        let (s, p) = (self.sample, self.progress);
        let steps = p.steps.load(Ordering::Relaxed);
        let exits = p.exits.load(Ordering::Relaxed);
        let per_job: Vec<String> = p
            .per_worker()
            .iter()
            .map(|e| e.load(Ordering::Relaxed).to_string())
            .collect();
        // Each job's wall time per exit, everything included.
        let us_per_exit = s.secs * self.cfg.jobs as f64 * 1e6 / exits.max(1) as f64;
        vec![
            ("execs_done", (s.execs + self.prior.execs).to_string()),
            (
                "execs_per_sec",
                format!("{:.2}", s.execs as f64 / s.secs.max(1e-3)),
            ),
            ("execs_per_job", per_job.join(",")),
            (
                "steps_per_exec",
                format!("{:.1}", steps as f64 / s.execs.max(1) as f64),
            ),
            (
                "exits_per_step",
                format!("{:.3}", exits as f64 / steps.max(1) as f64),
            ),
            ("us_per_exit", format!("{us_per_exit:.1}")),
        ]
    }

    /// The corpus and its features.
    fn corpus(&self) -> Lines {
        let s = self.sample;
        let from_nodes = self.nodes.map_or(0, |n| n.imported as usize);
        let imported = self.imported + from_nodes;
        let mut lines = vec![
            ("corpus_count", s.corpus.to_string()),
            (
                "corpus_found",
                s.corpus.saturating_sub(imported).to_string(),
            ),
            ("corpus_imported", imported.to_string()),
            ("features_lock_order", s.features[0].to_string()),
            ("features_interleavings", s.features[1].to_string()),
            ("features_handoffs", s.features[2].to_string()),
            ("features_reads_from", s.features[3].to_string()),
        ];
        if let Some(n) = self.nodes {
            lines.extend([
                ("nodes_connected", n.peers.to_string()),
                ("node_entries_imported", n.imported.to_string()),
                ("node_findings", n.findings.to_string()),
            ]);
        }
        lines
    }

    /// The findings by kind, and AFL++'s crashes and hangs: a run that
    /// stopped for lack of progress (the step budget, the watchdog) is a
    /// hang; every other finding, deadlocks included, a crash. Counts go
    /// on from the sessions before a `--resume`.
    fn findings(&self, start_wall: u64) -> Lines {
        let (found, prior) = (self.found, self.prior);
        let count = |key: &'static str, class: &str| {
            (
                key,
                (found.of_class(class) as u64 + prior.count(key)).to_string(),
            )
        };
        let when = |f: Option<&Finding>| f.map_or(0, |f| start_wall + f.elapsed.as_secs());
        let hangs = found.hangs() as u64;
        let crashes = found.findings.len() as u64 - hangs;
        let execs = self.sample.execs;
        let since_crash = found
            .last(false)
            .map_or(execs, |f| execs.saturating_sub(f.execs));
        vec![
            (
                "findings",
                (found.findings.len() as u64 + prior.count("findings")).to_string(),
            ),
            count("findings_crashed", "crashed"),
            count("findings_deadlocked", "deadlocked"),
            count("findings_hung", "hung"),
            count("findings_timed_out", "timed-out"),
            count("findings_exit", "exited(non-zero)"),
            count("findings_potential_deadlock", "potential-deadlock"),
            ("last_find", when(found.findings.last()).to_string()),
            (
                "saved_crashes",
                (crashes + prior.count("saved_crashes")).to_string(),
            ),
            (
                "saved_hangs",
                (hangs + prior.count("saved_hangs")).to_string(),
            ),
            ("last_crash", when(found.last(false)).to_string()),
            ("last_hang", when(found.last(true)).to_string()),
            ("execs_since_crash", since_crash.to_string()),
            ("exec_timeout", self.cfg.run.timeout.as_millis().to_string()),
        ]
    }

    /// Minimization beside the search, and how stable findings replay.
    fn minimization(&self) -> Lines {
        let p = self.progress;
        let secs = p.minimize_us.load(Ordering::Relaxed) as f64 / 1e6;
        vec![
            (
                "minimize_execs",
                p.minimize_execs.load(Ordering::Relaxed).to_string(),
            ),
            ("minimize_time", format!("{secs:.1}")),
            (
                "minimize_pending",
                self.found.minimize_pending().len().to_string(),
            ),
            ("stability", format!("{:.2}%", self.found.stability())),
            ("stability_checks", self.found.stability_checks.to_string()),
        ]
    }

    /// The coverage map in AFL++'s terms: every feature an edge.
    fn coverage(&self) -> Lines {
        let edges = self.sample.edges();
        vec![
            ("bitmap_cvg", map_share(edges)),
            ("edges_found", edges.to_string()),
            ("total_edges", MAP_SIZE.to_string()),
            ("peak_rss_mb", peak_rss_mib().to_string()),
        ]
    }

    /// What ran, and how.
    fn about(&self) -> Lines {
        vec![
            ("afl_banner", self.cfg.target_name.clone()),
            (
                "afl_version",
                format!("rewind-fuzz {}", env!("CARGO_PKG_VERSION")),
            ),
            ("target_mode", "schedules (KVM)".into()),
            ("command_line", command_line()),
        ]
    }
}

/// Seconds since the epoch.
fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
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
