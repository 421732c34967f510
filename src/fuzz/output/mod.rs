//! The session's output, by role: the directory's layout and atomic writes
//! ([`layout`]), the corpus in `queue/` and the sync directory
//! ([`corpus`]), the findings passed on and announced ([`found`]),
//! `fuzzer_stats`, `plot_data` and the coverage plot ([`stats`]), and the
//! live screen ([`screen`]). [`Output`] composes them for the main thread.

mod corpus;
mod found;
mod layout;
mod screen;
mod stats;
mod status;

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::Instant;

pub use layout::Prior;

use super::feedbacks::Shared;
use super::findings::{self, SharedDesk};
use super::observers::FeatureKind;
use super::{Finding, FuzzConfig, FuzzError, FuzzSummary, Hub, Progress};
use corpus::CorpusDir;
use found::Found;
use layout::OutDir;
use screen::Screen;
use stats::{Sample, Stats, StatsView};
use status::Status;

pub struct Output {
    dir: OutDir,
    /// The sessions before this one, when resumed.
    prior: Prior,
    corpus: CorpusDir,
    found: Found,
    stats: Stats,
    screen: Screen,
    /// What the other nodes gave, when there are any.
    node_counts: Option<crate::fuzz::nodes::NodeCounts>,
}

impl Output {
    /// Creates the output directory (or finds it, for `--resume`).
    pub fn create(cfg: &FuzzConfig) -> Result<Output, FuzzError> {
        let dir = OutDir::create(&cfg.out)?;
        let corpus = CorpusDir::open(cfg, &dir)?;
        Ok(Output {
            prior: if cfg.resume {
                Prior::read(&cfg.out)
            } else {
                Prior::default()
            },
            corpus,
            found: Found::new(cfg),
            stats: Stats::new(),
            screen: Screen::new(cfg),
            node_counts: None,
            dir,
        })
    }

    /// Executions of the sessions before a `--resume`.
    pub fn prior_execs(&self) -> u64 {
        self.prior.execs
    }

    /// Signature ids of the findings the sessions before this one saved.
    pub fn prior_signatures(&self) -> BTreeSet<String> {
        self.prior.signatures.clone()
    }

    /// The desk the writer and the minimizer work from.
    pub fn desk(&self) -> SharedDesk {
        self.found.desk()
    }

    /// Entries in the corpus directory.
    pub fn corpus_len(&self) -> usize {
        self.corpus.len()
    }

    /// The findings announced.
    pub fn findings(&self) -> &[Finding] {
        &self.found.findings
    }

    /// Failures found whose reproducer could not be written, with why.
    pub fn unsaved(&self) -> &[String] {
        &self.found.unsaved
    }

    /// Tells people what happened to the session (a worker restarted),
    /// above the status.
    pub fn note(&mut self, msg: String) {
        self.screen.say(&msg);
    }

    /// What the other nodes gave so far, for the statistics.
    pub fn set_node_counts(&mut self, counts: crate::fuzz::nodes::NodeCounts) {
        self.node_counts = Some(counts);
    }

    /// Everything the main thread does between checks of the workers.
    pub fn tick(
        &mut self,
        cfg: &FuzzConfig,
        shared: &Shared,
        (hub, hub_cursor): (&Hub, &mut usize),
        progress: &Progress,
        start: Instant,
    ) {
        self.corpus
            .exchange(cfg, &self.dir, hub, hub_cursor, &mut self.screen);
        let new = std::mem::take(&mut shared.failures.lock().unwrap().pending);
        // A session that measures (bench) only counts executions to its goal.
        if cfg.watch.is_none() {
            let (sync, seen_at) = (self.corpus.sync(), start.elapsed());
            self.found
                .pass_on(cfg, new, seen_at, sync, &mut self.screen);
        }
        let sample = Sample {
            secs: start.elapsed().as_secs_f64(),
            execs: progress.execs.load(Ordering::Relaxed),
            corpus: self.corpus.len(),
            features: shared.features.lock().unwrap().counts(),
            findings: self.found.findings.len(),
            hangs: self.found.hangs(),
        };
        self.screen.saw_features(sample.features.iter().sum());
        if self.stats.plot_due(sample) {
            self.write_plot_data();
        }
        if self.stats.stats_due() {
            self.write_stats(cfg, &sample, progress);
        }
        if !cfg.quiet {
            self.show(cfg, &sample, progress, false);
        }
    }

    /// The last files: statistics, plot data and the coverage picture.
    pub fn finish(&mut self, cfg: &FuzzConfig, summary: &FuzzSummary, progress: &Progress) {
        let s = Sample {
            secs: summary.elapsed.as_secs_f64(),
            execs: summary.execs,
            corpus: summary.corpus,
            features: FeatureKind::ALL.map(|k| summary.features[k.name()]),
            findings: summary.findings.len(),
            hangs: self.found.hangs(),
        };
        self.stats.add_last(s);
        self.write_plot_data();
        self.write_stats(cfg, &s, progress);
        self.write_minimize_pending();
        if !cfg.quiet {
            self.show(cfg, &s, progress, true);
        }
        let svg = self
            .stats
            .coverage_svg(&cfg.target_name, &self.found.findings);
        self.dir
            .update("coverage.svg", svg.as_bytes(), &mut self.screen);
    }

    fn write_plot_data(&mut self) {
        let text = self.stats.plot_data();
        self.dir
            .update("plot_data", text.as_bytes(), &mut self.screen);
    }

    fn write_stats(&mut self, cfg: &FuzzConfig, sample: &Sample, progress: &Progress) {
        let text = self.stats.fuzzer_stats(&StatsView {
            cfg,
            sample,
            progress,
            found: &self.found,
            prior: &self.prior,
            imported: self.corpus.imported(),
            nodes: self.node_counts,
        });
        self.dir
            .update("fuzzer_stats", text.as_bytes(), &mut self.screen);
    }

    /// What the next `--resume` minimizes first.
    fn write_minimize_pending(&mut self) {
        let pending = self.found.minimize_pending();
        if pending.is_empty() {
            self.dir.remove(findings::PENDING_FILE);
        } else {
            let text = format!("{}\n", pending.join("\n"));
            self.dir
                .update(findings::PENDING_FILE, text.as_bytes(), &mut self.screen);
        }
    }

    fn show(&mut self, cfg: &FuzzConfig, sample: &Sample, progress: &Progress, last: bool) {
        let status = Status {
            cfg,
            sample,
            progress,
            prior_execs: self.prior.execs,
            found: &self.found,
            imported: self.corpus.imported(),
            nodes: self.node_counts,
            out: self.dir.path(),
        };
        self.screen.show(&status, last);
    }
}
