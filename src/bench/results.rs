//! What a bench measured, and the summary, tables, CSV and JSON made from
//! it. Nothing here runs anything, so all of it is tested without KVM.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::json;

/// One strategy on one buggy harness from one seed: schedules until the
/// expected bug, or the whole budget without it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    pub strategy: String,
    pub harness: String,
    pub seed: u64,
    /// The 1-based number of the first schedule that reached the bug;
    /// `None` when none did within the budget.
    pub schedules_to_bug: Option<u64>,
    /// Wall time of the trial on one job (its machine's set-up included
    /// when the trial had to make one).
    pub wall_s: f64,
    /// Schedules run.
    pub schedules: u64,
    /// Failing schedules that were neither the expected bug nor a
    /// lock-order warning: a sign of trouble beyond the harness's bug.
    pub unexpected: u64,
}

/// One strategy on one fixed twin: every schedule must pass.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FixedTrial {
    pub strategy: String,
    /// The twin's name, `<harness>-fixed`.
    pub harness: String,
    pub seed: u64,
    pub schedules: u64,
    /// Schedules that failed in any way (lock-order warnings included):
    /// false positives.
    pub failures: u64,
    /// The 1-based number of the first failing schedule.
    pub first_failure: Option<u64>,
    /// How it failed.
    pub first_failure_kind: Option<String>,
    pub wall_s: f64,
}

/// The buggy build run natively in a loop.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NativeLoop {
    pub harness: String,
    /// The wall time it was given (the machine trials' time on this harness).
    pub budget_s: f64,
    /// The wall time it took (the last run may overrun the budget).
    pub seconds: f64,
    pub runs: u64,
    /// Runs that exited non-zero, died of a signal or were killed after
    /// the per-run timeout.
    pub failures: u64,
    /// Of those, runs killed after the timeout.
    pub timeouts: u64,
    /// The 1-based number of the first failing run.
    pub first_failure_run: Option<u64>,
    /// Seconds from the loop's start to the end of that run.
    pub first_failure_s: Option<f64>,
}

/// Everything one bench measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    /// The command line that made it.
    pub command: String,
    /// Schedules per trial before giving up.
    pub budget: u64,
    /// Seconds per trial before giving up (`--trial-time`), if bounded.
    #[serde(default)]
    pub trial_time_s: Option<f64>,
    /// Schedules per fixed twin and strategy.
    pub fixed_budget: u64,
    /// Trials per strategy and harness.
    pub seeds: u64,
    pub jobs: usize,
    /// Every column asked for, in order.
    pub strategies: Vec<String>,
    /// The buggy harnesses, in order.
    pub harnesses: Vec<String>,
    pub trials: Vec<Trial>,
    pub fixed: Vec<FixedTrial>,
    /// `None` when the native loop was not run.
    pub native: Option<Vec<NativeLoop>>,
    /// Programs that could not be run (a build that failed, a system call
    /// the machine lacks), each with why; the bench went on without them.
    #[serde(default)]
    pub unrunnable: Vec<Unrunnable>,
    pub elapsed_s: f64,
}

/// A program of the suite the bench could not run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Unrunnable {
    pub harness: String,
    /// `buggy` or `fixed`.
    pub variant: String,
    pub reason: String,
}

/// One strategy over every harness and seed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StrategySummary {
    pub strategy: String,
    pub trials: usize,
    pub found: usize,
    pub found_rate: f64,
    /// Schedules to bug, a trial that found nothing ranking above every
    /// number: `None` when the quantile falls among those.
    pub median_schedules: Option<u64>,
    pub p90_schedules: Option<u64>,
    /// Schedules per second on one job.
    pub execs_per_s: Option<f64>,
    /// Fixed-twin schedules run, and how many failed.
    pub fixed_schedules: u64,
    pub false_positives: u64,
    /// Bugs found per seed (one pass over the suite from that seed), seed
    /// by seed: how the papers count "bugs found per trial".
    pub bugs_per_seed: Vec<usize>,
    pub bugs_per_seed_mean: f64,
    /// Standard deviation of `bugs_per_seed` (population).
    pub bugs_per_seed_sd: f64,
    /// Median wall time to the bug, over the trials that found it.
    pub median_time_to_bug_s: Option<f64>,
    /// Median schedules to the bug, over the trials that found it.
    pub median_found_schedules: Option<u64>,
}

/// The native loop over every harness.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NativeSummary {
    pub harnesses: usize,
    /// Harnesses with at least one failing run.
    pub found: usize,
    pub median_runs: Option<u64>,
    pub p90_runs: Option<u64>,
    pub runs_per_s: f64,
}

/// How much sooner the machine finds a bug than the stress loop.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", content = "ratio", rename_all = "kebab-case")]
pub enum Speedup {
    /// Native mean time between failures over the best strategy's median
    /// time to the bug.
    Ratio(f64),
    /// The native loop found nothing: its whole time over the best median,
    /// a lower bound.
    AtLeast(f64),
    /// Only the native loop failed.
    NativeOnly,
    /// Neither found it.
    Neither,
}

impl std::fmt::Display for Speedup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Speedup::Ratio(r) => write!(f, "{}x", ratio(*r)),
            Speedup::AtLeast(r) => write!(f, ">{}x", ratio(*r)),
            Speedup::NativeOnly => f.write_str("native only"),
            Speedup::Neither => f.write_str("neither"),
        }
    }
}

fn ratio(r: f64) -> String {
    if r >= 10.0 {
        format!("{r:.0}")
    } else if r >= 1.0 {
        format!("{r:.1}")
    } else {
        format!("{r:.2}")
    }
}

/// One strategy on one harness, over its seeds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cell {
    pub strategy: String,
    pub trials: usize,
    pub found: usize,
    pub median_schedules: Option<u64>,
    pub median_wall_s: Option<f64>,
}

/// One harness over every strategy, and natively.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HarnessSummary {
    pub harness: String,
    pub cells: Vec<Cell>,
    /// The strategy with the shortest median time to the bug, and that time.
    pub best: Option<(String, f64)>,
    pub native: Option<NativeLoop>,
    pub speedup: Option<Speedup>,
}

/// The bench in figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub strategies: Vec<StrategySummary>,
    pub native: Option<NativeSummary>,
    pub harnesses: Vec<HarnessSummary>,
    /// Failing fixed-twin schedules, over every strategy.
    pub false_positives: u64,
    /// Buggy harnesses no strategy found.
    pub not_found: Vec<String>,
    /// Unexpected failures of buggy harnesses, over every trial.
    pub unexpected: u64,
}

/// The nearest-rank `q`-quantile of `values`, where `None` ranks above every
/// number; `None` when the quantile is one of those (or there are none).
pub fn quantile<T: Copy + PartialOrd>(values: &[Option<T>], q: f64) -> Option<T> {
    let mut found: Vec<T> = values.iter().flatten().copied().collect();
    found.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    let rank = ((q * values.len() as f64).ceil() as usize).max(1);
    found.get(rank - 1).copied()
}

impl BenchReport {
    /// The trials of one strategy on one harness.
    fn cell_trials<'a>(&'a self, s: &'a str, h: &'a str) -> impl Iterator<Item = &'a Trial> {
        self.trials
            .iter()
            .filter(move |t| t.strategy == s && t.harness == h)
    }

    /// Computes the summary.
    pub fn summary(&self) -> Summary {
        let strategies = self
            .strategies
            .iter()
            .map(|s| self.strategy_summary(s))
            .collect();
        let harnesses: Vec<HarnessSummary> = self
            .harnesses
            .iter()
            .map(|h| self.harness_summary(h))
            .collect();
        let native = self.native.as_ref().map(|n| {
            let runs: Vec<Option<u64>> = n.iter().map(|l| l.first_failure_run).collect();
            let (total_runs, total_s) = n
                .iter()
                .fold((0, 0.0), |(r, s), l| (r + l.runs, s + l.seconds));
            NativeSummary {
                harnesses: n.len(),
                found: n.iter().filter(|l| l.failures > 0).count(),
                median_runs: quantile(&runs, 0.5),
                p90_runs: quantile(&runs, 0.9),
                runs_per_s: total_runs as f64 / f64::max(total_s, 1e-9),
            }
        });
        Summary {
            strategies,
            native,
            not_found: harnesses
                .iter()
                .filter(|h| h.cells.iter().all(|c| c.found == 0))
                .map(|h| h.harness.clone())
                .collect(),
            harnesses,
            false_positives: self.fixed.iter().map(|f| f.failures).sum(),
            unexpected: self.trials.iter().map(|t| t.unexpected).sum(),
        }
    }

    fn strategy_summary(&self, s: &str) -> StrategySummary {
        let trials: Vec<&Trial> = self.trials.iter().filter(|t| t.strategy == s).collect();
        let to_bug: Vec<Option<u64>> = trials.iter().map(|t| t.schedules_to_bug).collect();
        let found = to_bug.iter().flatten().count();
        let fixed: Vec<&FixedTrial> = self.fixed.iter().filter(|f| f.strategy == s).collect();
        let schedules: u64 = trials.iter().map(|t| t.schedules).sum::<u64>()
            + fixed.iter().map(|f| f.schedules).sum::<u64>();
        let wall: f64 = trials.iter().map(|t| t.wall_s).sum::<f64>()
            + fixed.iter().map(|f| f.wall_s).sum::<f64>();
        let mut seeds: Vec<u64> = trials.iter().map(|t| t.seed).collect();
        seeds.sort_unstable();
        seeds.dedup();
        let bugs_per_seed: Vec<usize> = seeds
            .iter()
            .map(|seed| {
                trials
                    .iter()
                    .filter(|t| t.seed == *seed && t.schedules_to_bug.is_some())
                    .count()
            })
            .collect();
        let n = bugs_per_seed.len().max(1) as f64;
        let mean = bugs_per_seed.iter().sum::<usize>() as f64 / n;
        let var = bugs_per_seed
            .iter()
            .map(|b| (*b as f64 - mean).powi(2))
            .sum::<f64>()
            / n;
        let times: Vec<Option<f64>> = trials
            .iter()
            .filter(|t| t.schedules_to_bug.is_some())
            .map(|t| Some(t.wall_s))
            .collect();
        StrategySummary {
            bugs_per_seed,
            bugs_per_seed_mean: mean,
            bugs_per_seed_sd: var.sqrt(),
            median_time_to_bug_s: quantile(&times, 0.5),
            median_found_schedules: quantile(
                &to_bug
                    .iter()
                    .flatten()
                    .map(|n| Some(*n))
                    .collect::<Vec<_>>(),
                0.5,
            ),
            strategy: s.to_string(),
            trials: trials.len(),
            found,
            found_rate: if trials.is_empty() {
                0.0
            } else {
                found as f64 / trials.len() as f64
            },
            median_schedules: quantile(&to_bug, 0.5),
            p90_schedules: quantile(&to_bug, 0.9),
            execs_per_s: (wall > 0.0).then(|| schedules as f64 / wall),
            fixed_schedules: fixed.iter().map(|f| f.schedules).sum(),
            false_positives: fixed.iter().map(|f| f.failures).sum(),
        }
    }

    fn harness_summary(&self, h: &str) -> HarnessSummary {
        let cells: Vec<Cell> = self
            .strategies
            .iter()
            .map(|s| {
                let ts: Vec<&Trial> = self.cell_trials(s, h).collect();
                let to_bug: Vec<Option<u64>> = ts.iter().map(|t| t.schedules_to_bug).collect();
                let wall: Vec<Option<f64>> = ts
                    .iter()
                    .map(|t| t.schedules_to_bug.map(|_| t.wall_s))
                    .collect();
                Cell {
                    strategy: s.clone(),
                    trials: ts.len(),
                    found: to_bug.iter().flatten().count(),
                    median_schedules: quantile(&to_bug, 0.5),
                    median_wall_s: quantile(&wall, 0.5),
                }
            })
            .collect();
        let best = cells
            .iter()
            .filter_map(|c| c.median_wall_s.map(|w| (c.strategy.clone(), w)))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        let native = self
            .native
            .as_ref()
            .and_then(|n| n.iter().find(|l| l.harness == h).cloned());
        let speedup = native.as_ref().map(|n| {
            let vm = best.as_ref().map(|b| b.1.max(1e-6));
            match (vm, n.failures) {
                (Some(vm), 0) => Speedup::AtLeast(n.seconds / vm),
                (Some(vm), f) => Speedup::Ratio(n.seconds / f as f64 / vm),
                (None, 0) => Speedup::Neither,
                (None, _) => Speedup::NativeOnly,
            }
        });
        HarnessSummary {
            harness: h.to_string(),
            cells,
            best,
            native,
            speedup,
        }
    }

    /// The report and its summary as one JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "command": self.command,
            "budget": self.budget,
            "trial_time_s": self.trial_time_s,
            "fixed_budget": self.fixed_budget,
            "seeds": self.seeds,
            "jobs": self.jobs,
            "strategies": self.strategies,
            "harnesses": self.harnesses,
            "trials": self.trials,
            "fixed": self.fixed,
            "native": self.native,
            "unrunnable": self.unrunnable,
            "summary": self.summary(),
            "elapsed_s": self.elapsed_s,
        })
    }

    /// Every trial as CSV: buggy trials, fixed-twin trials and native
    /// loops, one row each. `schedules_to_bug` is the first failing
    /// schedule (for a native loop, run), empty when none failed.
    pub fn to_csv(&self) -> String {
        let mut out = String::from(
            "variant,strategy,harness,seed,schedules_to_bug,schedules,failures,wall_s\n",
        );
        let opt = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
        for t in &self.trials {
            let _ = writeln!(
                out,
                "buggy,{},{},{},{},{},{},{:.6}",
                t.strategy,
                t.harness,
                t.seed,
                opt(t.schedules_to_bug),
                t.schedules,
                u64::from(t.schedules_to_bug.is_some()),
                t.wall_s
            );
        }
        for f in &self.fixed {
            let _ = writeln!(
                out,
                "fixed,{},{},{},{},{},{},{:.6}",
                f.strategy,
                f.harness,
                f.seed,
                opt(f.first_failure),
                f.schedules,
                f.failures,
                f.wall_s
            );
        }
        for n in self.native.iter().flatten() {
            let _ = writeln!(
                out,
                "native,native,{},,{},{},{},{:.6}",
                n.harness,
                opt(n.first_failure_run),
                n.runs,
                n.failures,
                n.seconds
            );
        }
        out
    }

    /// Per strategy, bugs found per trial over the seeds (the papers'
    /// table for time-boxed trials), with the median schedules and time to
    /// a bug.
    pub fn to_trial_table(&self) -> String {
        let s = self.summary();
        let programs = self.harnesses.len();
        let mut out = String::new();
        let _ = writeln!(
            out,
            "| strategy | bugs found per trial (of {programs}), mean ± sd | per seed | median schedules to bug | median time to bug | schedules/s per job |"
        );
        let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- |");
        for st in &s.strategies {
            let per_seed: Vec<String> = st.bugs_per_seed.iter().map(|b| b.to_string()).collect();
            let _ = writeln!(
                out,
                "| {} | {:.1} ± {:.1} | {} | {} | {} | {} |",
                st.strategy,
                st.bugs_per_seed_mean,
                st.bugs_per_seed_sd,
                per_seed.join(" "),
                st.median_found_schedules
                    .map_or("-".into(), |m| m.to_string()),
                st.median_time_to_bug_s.map_or("-".into(), seconds),
                st.execs_per_s.map_or("-".into(), |e| format!("{e:.0}")),
            );
        }
        out
    }

    /// The summary as Markdown tables, for a terminal or the README.
    pub fn to_table(&self) -> String {
        let s = self.summary();
        let mut out = String::new();
        if self.trial_time_s.is_some() {
            out.push_str(&self.to_trial_table());
            out.push('\n');
        }
        let _ = writeln!(out, "{STRATEGY_HEADER}");
        let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- |");
        for st in &s.strategies {
            let rate = format!("{}/{} ({:.0}%)", st.found, st.trials, st.found_rate * 100.0);
            let budget = self.budget_of(&st.strategy);
            let _ = writeln!(
                out,
                "| {} | {rate} | {} | {} | {} | {}/{} |",
                st.strategy,
                schedules(st.median_schedules, budget),
                schedules(st.p90_schedules, budget),
                st.execs_per_s.map_or("-".into(), |e| format!("{e:.0}")),
                st.false_positives,
                st.fixed_schedules
            );
        }
        if let (Some(n), Some(loops)) = (&s.native, &self.native) {
            let most = loops.iter().map(|l| l.runs).max().unwrap_or(0);
            let _ = writeln!(
                out,
                "| native (runs) | {}/{} harnesses | {} | {} | {:.0} | - |",
                n.found,
                n.harnesses,
                schedules(n.median_runs, most),
                schedules(n.p90_runs, most),
                n.runs_per_s
            );
        }
        out.push('\n');
        let shown: Vec<&String> = self.strategies.iter().collect();
        let mut header = String::from("| harness |");
        for st in &shown {
            let _ = write!(header, " {st} |");
        }
        header.push_str(" best median time |");
        if self.native.is_some() {
            header.push_str(" native failures/runs (time) | speed-up vs native |");
        }
        let columns = header.matches('|').count() - 1;
        let _ = writeln!(out, "{header}");
        let _ = writeln!(out, "|{}", " --- |".repeat(columns));
        for h in &s.harnesses {
            let _ = write!(out, "| {} |", h.harness);
            for c in &h.cells {
                let mut text = cell(c, self.budget_of(&c.strategy));
                // Time-boxed trials: the time to the bug matters as much.
                if let (Some(_), Some(w)) = (self.trial_time_s, c.median_wall_s) {
                    text = format!("{text}, {}", seconds(w));
                }
                let _ = write!(out, " {text} |");
            }
            match &h.best {
                Some((st, w)) => {
                    let _ = write!(out, " {} ({st}) |", seconds(*w));
                }
                None => out.push_str(" - |"),
            }
            if let Some(n) = &h.native {
                let _ = write!(out, " {}/{} ({}) |", n.failures, n.runs, seconds(n.seconds));
                let _ = write!(
                    out,
                    " {} |",
                    h.speedup.map_or("-".into(), |x| x.to_string())
                );
            } else if self.native.is_some() {
                out.push_str(" - | - |");
            }
            out.push('\n');
        }
        if !self.unrunnable.is_empty() {
            out.push('\n');
            let _ = writeln!(out, "| could not run | build | why |");
            let _ = writeln!(out, "| --- | --- | --- |");
            for u in &self.unrunnable {
                let why = crate::escape::line(&u.reason).replace('|', "\\|");
                let _ = writeln!(out, "| {} | {} | {why} |", u.harness, u.variant);
            }
        }
        out
    }

    /// The schedules a trial could run: the budget, or, for time-boxed
    /// trials without one, the most any trial ran.
    pub fn schedule_span(&self) -> u64 {
        if self.budget != u64::MAX {
            return self.budget;
        }
        self.trials.iter().map(|t| t.schedules).max().unwrap_or(1)
    }

    /// The schedules a trial of this strategy runs at most.
    fn budget_of(&self, strategy: &str) -> u64 {
        self.trials
            .iter()
            .filter(|t| t.strategy == strategy)
            .map(|t| t.schedules)
            .max()
            .unwrap_or(self.budget)
            .max(1)
    }
}

/// The strategy table's header row (the README's table starts with it).
pub const STRATEGY_HEADER: &str = "| strategy | bugs found (trials) | median schedules to bug | p90 | schedules/s per job | fixed-twin failures/schedules |";

fn schedules(v: Option<u64>, budget: u64) -> String {
    v.map_or(format!(">{budget}"), |v| v.to_string())
}

fn seconds(s: f64) -> String {
    if s >= 10.0 {
        format!("{s:.0} s")
    } else if s >= 0.1 {
        format!("{s:.2} s")
    } else {
        format!("{:.1} ms", s * 1e3)
    }
}

/// A harness's cell: the median schedules to the bug, and how many seeds
/// found it when not all did.
fn cell(c: &Cell, budget: u64) -> String {
    if c.found == 0 {
        return format!("- (0/{})", c.trials);
    }
    let m = schedules(c.median_schedules, budget);
    if c.found == c.trials {
        m
    } else {
        format!("{m} ({}/{})", c.found, c.trials)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn trial(strategy: &str, harness: &str, seed: u64, to_bug: Option<u64>) -> Trial {
        Trial {
            strategy: strategy.into(),
            harness: harness.into(),
            seed,
            schedules_to_bug: to_bug,
            wall_s: to_bug.map_or(1.0, |n| n as f64 / 100.0),
            schedules: to_bug.unwrap_or(100),
            unexpected: 0,
        }
    }

    /// Two strategies, two harnesses, two seeds.
    pub(crate) fn report() -> BenchReport {
        let mut trials = Vec::new();
        for seed in 0..2 {
            trials.push(trial("random", "abba", seed, Some(2 + seed)));
            trials.push(trial("random", "depth3", seed, None));
            trials.push(trial("pct:3", "abba", seed, Some(10)));
            trials.push(trial("pct:3", "depth3", seed, Some(40 + seed)));
        }
        BenchReport {
            command: "rewind-fuzz bench".into(),
            budget: 100,
            trial_time_s: None,
            fixed_budget: 100,
            seeds: 2,
            jobs: 2,
            strategies: vec!["random".into(), "pct:3".into()],
            unrunnable: Vec::new(),
            harnesses: vec!["abba".into(), "depth3".into()],
            trials,
            fixed: vec![FixedTrial {
                strategy: "random".into(),
                harness: "abba-fixed".into(),
                seed: 0,
                schedules: 100,
                failures: 0,
                first_failure: None,
                first_failure_kind: None,
                wall_s: 0.5,
            }],
            native: Some(vec![
                NativeLoop {
                    harness: "abba".into(),
                    budget_s: 2.0,
                    seconds: 2.0,
                    runs: 1000,
                    failures: 0,
                    timeouts: 0,
                    first_failure_run: None,
                    first_failure_s: None,
                },
                NativeLoop {
                    harness: "depth3".into(),
                    budget_s: 2.0,
                    seconds: 2.0,
                    runs: 1000,
                    failures: 4,
                    timeouts: 0,
                    first_failure_run: Some(300),
                    first_failure_s: Some(0.6),
                },
            ]),
            elapsed_s: 3.0,
        }
    }

    #[test]
    fn quantiles_rank_unfound_trials_above_every_number() {
        assert_eq!(quantile(&[Some(3), Some(1), Some(2)], 0.5), Some(2));
        assert_eq!(quantile(&[Some(3), None, None], 0.5), None);
        assert_eq!(quantile(&[Some(3), Some(5), None], 0.5), Some(5));
        assert_eq!(quantile(&[Some(1), Some(2), None], 0.9), None);
        let ten: Vec<Option<u64>> = (1..=10).map(Some).collect();
        assert_eq!(quantile(&ten, 0.9), Some(9));
        assert_eq!(quantile::<u64>(&[], 0.5), None);
    }

    #[test]
    fn the_summary_counts_found_trials() {
        let s = report().summary();
        let random = &s.strategies[0];
        assert_eq!((random.found, random.trials), (2, 4));
        assert_eq!(random.median_schedules, Some(3));
        assert_eq!(random.p90_schedules, None);
        assert_eq!(random.fixed_schedules, 100);
        assert_eq!(s.harnesses[0].cells.len(), 2);
        assert!(s.not_found.is_empty());
        assert_eq!(s.false_positives, 0);
    }

    #[test]
    fn bugs_found_per_trial_count_each_seeds_pass_over_the_suite() {
        let s = report().summary();
        // random: abba found from both seeds, depth3 from neither.
        let random = &s.strategies[0];
        assert_eq!(random.bugs_per_seed, [1, 1]);
        assert_eq!(
            (random.bugs_per_seed_mean, random.bugs_per_seed_sd),
            (1.0, 0.0)
        );
        assert_eq!(random.median_found_schedules, Some(2));
        let pct = &s.strategies[1];
        assert_eq!(pct.bugs_per_seed, [2, 2]);
        let mut timed = report();
        timed.trial_time_s = Some(10.0);
        timed.trials[1].schedules_to_bug = Some(5);
        let random = &timed.summary().strategies[0];
        assert_eq!(random.bugs_per_seed, [2, 1]);
        assert_eq!(random.bugs_per_seed_mean, 1.5);
        assert_eq!(random.bugs_per_seed_sd, 0.5);
        let table = timed.to_table();
        assert!(table.contains("| random | 1.5 ± 0.5 | 2 1 |"), "{table}");
        assert!(table.contains(" ms |") || table.contains(" s |"), "{table}");
    }

    #[test]
    fn the_speedup_compares_native_failures_with_the_best_strategy() {
        let s = report().summary();
        let abba = &s.harnesses[0];
        assert_eq!(abba.best, Some(("random".into(), 0.02)));
        // Native found nothing in 2 s: at least 2 / 0.02.
        assert_eq!(abba.speedup, Some(Speedup::AtLeast(100.0)));
        let depth3 = &s.harnesses[1];
        assert_eq!(depth3.best.as_ref().unwrap().0, "pct:3");
        // 4 failures in 2 s: one per 0.5 s, against 0.40 s in the machine.
        match depth3.speedup {
            Some(Speedup::Ratio(r)) => assert!((r - 0.5 / 0.4).abs() < 1e-9, "{r}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(s.native.unwrap().found, 1);
    }

    #[test]
    fn the_table_shows_every_strategy_and_harness() {
        let t = report().to_table();
        assert!(t.starts_with(STRATEGY_HEADER), "{t}");
        assert!(t.contains("| random | 2/4 (50%) | 3 | >100 |"), "{t}");
        assert!(t.contains("| abba | 2 | 10 |"), "{t}");
        assert!(t.contains("| depth3 | - (0/2) | 40 |"), "{t}");
        assert!(t.contains("native (runs) | 1/2 harnesses"), "{t}");
        assert!(t.contains(">100x"), "{t}");
    }

    #[test]
    fn the_csv_has_a_row_per_trial_twin_and_native_loop() {
        let csv = report().to_csv();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 1 + 8 + 1 + 2);
        assert_eq!(
            lines[0],
            "variant,strategy,harness,seed,schedules_to_bug,schedules,failures,wall_s"
        );
        assert!(lines.contains(&"buggy,random,depth3,0,,100,0,1.000000"));
        assert!(lines.contains(&"fixed,random,abba-fixed,0,,100,0,0.500000"));
        assert!(lines.contains(&"native,native,depth3,,300,1000,4,2.000000"));
    }

    #[test]
    fn the_json_has_one_trial_per_strategy_harness_and_seed_with_null_when_not_found() {
        let v = report().to_json();
        let trials = v["trials"].as_array().unwrap();
        assert_eq!(trials.len(), 8);
        let t = trials
            .iter()
            .find(|t| t["strategy"] == "random" && t["harness"] == "depth3")
            .unwrap();
        assert!(t["schedules_to_bug"].is_null());
        assert!(t["wall_s"].is_f64() && t["seed"].is_u64());
        assert_eq!(v["summary"]["false_positives"], 0);
        let back: BenchReport = serde_json::from_value(v).unwrap();
        assert_eq!(back, report(), "the JSON reads back into the report");
    }
}
