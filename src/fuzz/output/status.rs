//! What the live status says: the session's counts, rates and latest
//! finding, as a block on a terminal or a line elsewhere.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::found::Found;
use super::screen::Screen;
use super::stats::Sample;
use crate::fuzz::findings::SEARCH_RUNS_PER_MINIMIZE_RUN;
use crate::fuzz::{Finding, FuzzConfig, Progress};

/// Interval between status lines when not on a terminal.
const LINE_INTERVAL: Duration = Duration::from_secs(10);
/// Interval between redraws of the status block.
const BLOCK_INTERVAL: Duration = Duration::from_secs(1);

/// What the status shows.
pub struct Status<'a> {
    pub cfg: &'a FuzzConfig,
    pub sample: &'a Sample,
    pub progress: &'a Progress,
    /// Executions of the sessions before a `--resume`.
    pub prior_execs: u64,
    pub found: &'a Found,
    /// Corpus entries taken from the sync directory.
    pub imported: usize,
    /// What the other nodes gave, when there are any.
    pub nodes: Option<crate::fuzz::nodes::NodeCounts>,
    pub out: &'a Path,
}

impl Screen {
    /// The status: a block redrawn in place on a terminal, else a line
    /// every [`LINE_INTERVAL`]; `last` shows it once more at the end, with
    /// the counts the summary gives.
    pub fn show(&mut self, s: &Status, last: bool) {
        let pending = s.found.minimize_pending().len();
        if self.block {
            if !last
                && self
                    .last_block
                    .is_some_and(|t| t.elapsed() < BLOCK_INTERVAL)
            {
                return;
            }
            self.last_block = Some(Instant::now());
            let lines = self.block_lines(s, pending);
            self.draw(&lines);
        } else if last || self.last_line.is_none_or(|t| t.elapsed() >= LINE_INTERVAL) {
            self.last_line = Some(Instant::now());
            let line = status_line(s, pending);
            // The closing line is not said twice.
            if self.last_line_said.as_deref() != Some(line.as_str()) {
                eprintln!("{line}");
                self.last_line_said = Some(line);
            }
        }
    }

    /// The status block's lines.
    fn block_lines(&self, s: &Status, pending: usize) -> Vec<String> {
        let (cfg, x, progress) = (s.cfg, s.sample, s.progress);
        let findings = &s.found.findings;
        let per_job: Vec<String> = progress
            .per_worker()
            .iter()
            .map(|e| per_sec(x, e.load(Ordering::Relaxed)))
            .collect();
        let mut lines = vec![
            format!(" rewind-fuzz  {}", cfg.target_name),
            format!(
                "   elapsed   {:>10.0?}      budget  {}",
                Duration::from_secs_f64(x.secs),
                budget_text(cfg)
            ),
            format!(
                "   execs     {:>10}      per sec {} (jobs: {}){}{}",
                x.execs,
                per_sec(x, x.execs),
                per_job.join(" "),
                restarts(progress),
                all_sessions(s)
            ),
            format!(
                "   corpus    {:>10}      imported {}, last new feature {:.0?} ago",
                x.corpus,
                s.imported,
                self.last_new_feature.elapsed()
            ),
            format!(
                "   features  lock order {}, interleavings {}, handoffs {}, reads-from {}",
                x.features[0], x.features[1], x.features[2], x.features[3]
            ),
            format!("   findings  {} ({})", x.findings, by_kind(findings)),
            format!(
                "   last      find {}, crash {}, hang {}",
                ago(x, findings.last()),
                ago(x, s.found.last(false)),
                ago(x, s.found.last(true))
            ),
            format!(
                "   minimize  {} runs in {:.1}s (at most 1 in {} of all runs), {} finding(s) to go",
                progress.minimize_execs.load(Ordering::Relaxed),
                progress.minimize_us.load(Ordering::Relaxed) as f64 / 1e6,
                SEARCH_RUNS_PER_MINIMIZE_RUN + 1,
                pending
            ),
        ];
        if let Some(n) = s.nodes {
            lines.push(format!(
                "   nodes     {:>10}      entries in {}, findings made elsewhere {}",
                n.peers, n.imported, n.findings
            ));
        }
        // The latest finding in the program's words.
        if let Some(f) = findings.last() {
            let summary: String = f.summary.chars().take(100).collect();
            lines.push(format!("   latest    {summary}"));
        }
        lines.push(format!("   output    {}", s.out.display()));
        lines
    }
}

/// How often workers were started again, when they were.
fn restarts(p: &Progress) -> String {
    match p.restarts.load(Ordering::Relaxed) {
        0 => String::new(),
        1 => ", 1 restart".into(),
        n => format!(", {n} restarts"),
    }
}

/// The status line (not on a terminal).
fn status_line(s: &Status, pending: usize) -> String {
    let x = s.sample;
    format!(
        "[{:>6.0}s] execs {}{} ({}/s), corpus {}, features {}/{}/{}/{} (lock order/interleavings/handoffs/reads-from), findings {}, minimizing {}",
        x.secs,
        x.execs,
        all_sessions(s),
        per_sec(x, x.execs),
        x.corpus,
        x.features[0],
        x.features[1],
        x.features[2],
        x.features[3],
        x.findings,
        pending
    )
}

/// `n` per second of the session so far; a rate over less than a second
/// says nothing.
fn per_sec(x: &Sample, n: u64) -> String {
    if x.secs >= 1.0 {
        format!("{:.1}", n as f64 / x.secs)
    } else {
        "-".to_string()
    }
}

/// The executions of every session, after a `--resume`.
fn all_sessions(s: &Status) -> String {
    if s.prior_execs > 0 {
        format!(" ({} in all sessions)", s.sample.execs + s.prior_execs)
    } else {
        String::new()
    }
}

/// The findings of each kind.
fn by_kind(findings: &[Finding]) -> String {
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
            let n = findings.iter().filter(|f| f.kind.class() == *class);
            format!("{label} {}", n.count())
        })
        .collect();
    found.join(", ")
}

/// How long ago, in the session's time, `f` was found.
fn ago(x: &Sample, f: Option<&Finding>) -> String {
    match f {
        Some(f) => format!(
            "{:.0?} ago",
            Duration::from_secs_f64((x.secs - f.elapsed.as_secs_f64()).max(0.0))
        ),
        None => "none yet".to_string(),
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
