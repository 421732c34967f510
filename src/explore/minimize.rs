//! Minimization: the fewest preemptions that still give the same failure.
//!
//! A failing schedule found by a random strategy makes many decisions, most
//! of them irrelevant. Minimization keeps any candidate whose run fails with
//! the same [`Signature`], in three phases:
//!
//! 1. For a deadlock on a wait-for cycle, the schedule the cycle suggests:
//!    each thread of the cycle preempted as it asks for the lock it ends up
//!    waiting for (`cycle_seed`). Removing decisions from a random
//!    schedule cannot replace them with the few that matter; this often can.
//! 2. Delta debugging (ddmin) over the decisions: subsets and complements of
//!    ever smaller chunks, until no single decision can go. Decisions are
//!    anchored to points of the program (`Anchor`), not to step numbers,
//!    so that removing one does not move the others.
//! 3. Narrowing the window the schedule perturbs: each remaining decision,
//!    from the last to the first, is moved as late as it goes (a binary
//!    search over its step), so the run follows the default policy as long
//!    as it can and the story starts close to the failure.
//!
//! The phases repeat until a round removes nothing and moves nothing: a
//! decision moved later can make another one unnecessary, so one round is
//! not always the fewest (a second `minimize` of the result finds nothing
//! to remove).
//!
//! Every candidate is a complete run in one `Vm` (restored from its snapshot
//! between candidates). A decision that names a thread that cannot run
//! where it falls is skipped, so any subset is a valid candidate. After each
//! success the decisions the run really took replace the candidate: only
//! those that made a difference. The search depends only on its inputs, so
//! it is deterministic; the budget (`execs`, `time`) can only stop it early.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::engine::{RunConfig, Vm, VmError};
use crate::explore::Runner;
use crate::ids::Tid;
use crate::kernel::vfs::SharedSource;
use crate::observe::outcome::Outcome;
use crate::report::RunFacts;
use crate::report::signature::{Naming, Signature};
use crate::report::symbols::Symbolizer;
use crate::sched::{Decision, Replay, RunUntilBlocked, SchedView, Schedule, Strategy};

/// The most rounds of the three phases one minimization makes.
const MAX_ROUNDS: usize = 16;

/// How much minimization may spend.
#[derive(Clone, Copy, Debug, Default)]
pub struct Budget {
    /// Schedules to run at most (the input's own check included).
    pub execs: Option<u64>,
    /// Wall-clock time at most.
    pub time: Option<Duration>,
}

/// What minimization found.
#[derive(Clone, Debug)]
pub struct Minimized {
    pub schedule: Schedule,
    /// Decisions before and after.
    pub before: usize,
    pub after: usize,
    /// Steps from the first decision to the end of the run, before and after.
    pub window_before: u64,
    pub window_after: u64,
    /// Schedules run.
    pub execs: u64,
    pub elapsed: Duration,
    /// Whether the budget ran out before the search was done.
    pub budget_ran_out: bool,
}

/// Why minimization could not start.
#[derive(Debug, thiserror::Error)]
pub enum MinimizeError {
    #[error(transparent)]
    Vm(#[from] VmError),
    #[error("the input schedule does not fail as expected: it gives {got}, not {want}")]
    NotReproduced { got: String, want: String },
    /// The caller stopped the search before its first run.
    #[error("stopped before the first run")]
    Stopped,
}

/// Progress of a minimization, told before each run: for people watching,
/// and for a caller that shares the machine's time with other work (the
/// fuzzer), which may hold the run back or stop the search there.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    pub execs: u64,
    pub decisions: usize,
    pub phase: &'static str,
}

/// A decision anchored to a point of the program rather than to a step
/// number: "the `nth` time thread `thread` is stopped at a scheduling point
/// right after a step on `object`, run `pick`". Removing an earlier decision
/// shifts every later step number, but rarely these points, so delta
/// debugging works on anchors: a subset of anchors means what it meant in
/// the run it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Anchor {
    thread: u32,
    object: Option<u64>,
    nth: u32,
    pick: u32,
}

/// A scheduling point as the strategy saw it.
#[derive(Clone, Copy, Debug)]
struct Point {
    step: u64,
    thread: u32,
    object: Option<u64>,
    nth: u32,
}

/// Replays a schedule, by step numbers or by anchors, and logs every
/// scheduling point with its anchor coordinates.
struct Anchoring {
    by_step: Option<Replay>,
    by_anchor: HashMap<(u32, Option<u64>, u32), u32>,
    counts: HashMap<(u32, Option<u64>), u32>,
    log: Arc<Mutex<Vec<Point>>>,
}

impl Strategy for Anchoring {
    fn name(&self) -> String {
        "minimize".into()
    }

    fn pick(&mut self, v: &SchedView) -> Tid {
        let thread = v.current.0;
        let object = v.objects.get(&v.current).copied();
        let n = self.counts.entry((thread, object)).or_default();
        *n += 1;
        let nth = *n;
        self.log.lock().unwrap().push(Point {
            step: v.step,
            thread,
            object,
            nth,
        });
        if let Some(r) = &mut self.by_step {
            return r.pick(v);
        }
        match self.by_anchor.get(&(thread, object, nth)) {
            Some(t) if v.runnable.contains(&Tid(*t)) => Tid(*t),
            _ => RunUntilBlocked::choose(v),
        }
    }

    fn horizon(&mut self, v: &SchedView) -> u64 {
        match &mut self.by_step {
            Some(r) => r.horizon(v),
            // Anchors fall on points not known in advance.
            None => v.step + 1,
        }
    }
}

/// A candidate, by step numbers (a schedule) or by anchors.
enum Candidate<'c> {
    Steps(&'c [Decision]),
    Anchors(&'c [Anchor]),
}

struct Search<'a> {
    runner: Runner,
    want: &'a Signature,
    naming: Naming,
    sym: Symbolizer,
    execs: u64,
    start: Instant,
    budget: Budget,
    out_of_budget: bool,
    progress: &'a mut dyn FnMut(Progress) -> ControlFlow<()>,
    phase: &'static str,
}

/// A candidate that failed the same way: the decisions its run really took
/// (by step and by anchor), and the steps of its run.
struct Hit {
    decisions: Vec<Decision>,
    anchors: Vec<Anchor>,
    steps: u64,
    outcome: Outcome,
    /// How often each (thread, object) scheduling point came up.
    points: HashMap<(u32, Option<u64>), u32>,
}

impl Search<'_> {
    fn exhausted(&self) -> bool {
        self.budget.execs.is_some_and(|n| self.execs >= n)
            || self.budget.time.is_some_and(|t| self.start.elapsed() >= t)
    }

    /// Runs a candidate; `Some` when the run fails with the wanted
    /// signature. `None` also when the budget is spent (nothing was run).
    fn test(&mut self, c: Candidate) -> Result<Option<Hit>, VmError> {
        if self.exhausted() {
            self.out_of_budget = true;
            return Ok(None);
        }
        let size = match c {
            Candidate::Steps(d) => d.len(),
            Candidate::Anchors(a) => a.len(),
        };
        if self.ask(size).is_break() {
            self.out_of_budget = true;
            return Ok(None);
        }
        match self.run(c) {
            Ok((hit, _)) => Ok(hit),
            // A deadline or Ctrl-C ended the candidate's run: keep the best
            // so far, as when the budget runs out between runs.
            Err(VmError::Cancelled) => {
                self.out_of_budget = true;
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Tells the caller a run of `decisions` is next; it may stop here.
    fn ask(&mut self, decisions: usize) -> ControlFlow<()> {
        (self.progress)(Progress {
            execs: self.execs,
            decisions,
            phase: self.phase,
        })
    }

    fn run(&mut self, c: Candidate) -> Result<(Option<Hit>, Signature), VmError> {
        let log = Arc::new(Mutex::new(Vec::new()));
        let (by_step, by_anchor) = match c {
            Candidate::Steps(d) => (
                Some(Replay::new(Schedule::new("minimize", d.to_vec()))),
                HashMap::new(),
            ),
            Candidate::Anchors(a) => (
                None,
                a.iter()
                    .map(|a| ((a.thread, a.object, a.nth), a.pick))
                    .collect(),
            ),
        };
        let report = self.runner.run(Box::new(Anchoring {
            by_step,
            by_anchor,
            counts: HashMap::new(),
            log: log.clone(),
        }))?;
        self.execs += 1;
        let vm = self.runner.vm().expect("a run was just made");
        let sig = RunFacts::of(vm, &report).signature(&report, &mut self.sym, self.naming);
        let hit = (sig == *self.want).then(|| {
            let log = log.lock().unwrap();
            let decisions = report.schedule.decisions.clone();
            // One scheduling point per step: a map keeps this linear in the
            // run's length (runs can be millions of steps long).
            let at_step: HashMap<u64, &Point> = log.iter().map(|p| (p.step, p)).collect();
            let anchors = decisions
                .iter()
                .filter_map(|d| {
                    let p = at_step.get(&d.step)?;
                    Some(Anchor {
                        thread: p.thread,
                        object: p.object,
                        nth: p.nth,
                        pick: d.thread,
                    })
                })
                .collect();
            let mut points = HashMap::new();
            for p in log.iter() {
                *points.entry((p.thread, p.object)).or_default() += 1;
            }
            Hit {
                decisions,
                anchors,
                steps: report.steps.0,
                outcome: report.outcome.clone(),
                points,
            }
        });
        Ok((hit, sig))
    }
}

/// Steps from the first decision to the end of the run.
fn window(decisions: &[Decision], steps: u64) -> u64 {
    decisions
        .first()
        .map_or(0, |d| steps.saturating_sub(d.step))
}

/// The failure `schedule` gives, found by running it (named the default
/// way), with the run's outcome: what minimizing a bare schedule keeps,
/// when it fails.
pub fn failure_of(
    cfg: &RunConfig,
    source: SharedSource,
    schedule: &Schedule,
) -> Result<(Signature, Outcome), VmError> {
    let mut vm = Vm::new(cfg, source)?;
    vm.set_strategy(Box::new(Replay::new(schedule.clone())));
    let report = vm.run()?;
    let facts = RunFacts::of(&vm, &report);
    let signature = facts.signature(&report, &mut Symbolizer::new(), Naming::default());
    Ok((signature, report.outcome))
}

/// Shrinks `schedule`, whose run fails with `want`, to the fewest decisions
/// that still fail with `want`, then narrows its window.
pub fn minimize(
    cfg: &RunConfig,
    source: SharedSource,
    schedule: &Schedule,
    (want, naming): (&Signature, Naming),
    budget: Budget,
    progress: &mut dyn FnMut(Progress) -> ControlFlow<()>,
) -> Result<Minimized, MinimizeError> {
    let mut quiet = cfg.clone();
    quiet.stream_output = false;
    // The time budget also ends the run in progress, however long it is.
    if let Some(t) = budget.time {
        quiet.cancel = quiet.cancel.with_deadline(Instant::now() + t);
    }
    let mut s = Search {
        runner: Runner::new(quiet, source),
        want,
        naming,
        sym: Symbolizer::new(),
        execs: 0,
        start: Instant::now(),
        budget,
        out_of_budget: false,
        progress,
        phase: "check",
    };
    // The input must fail as expected (this run is made unless the caller
    // stops the search before it).
    if s.ask(schedule.decisions.len()).is_break() {
        return Err(MinimizeError::Stopped);
    }
    let (hit, got) = s.run(Candidate::Steps(&schedule.decisions))?;
    let Some(first) = hit else {
        return Err(MinimizeError::NotReproduced {
            got: got.to_string(),
            want: want.to_string(),
        });
    };
    let before = schedule.decisions.len();
    let window_before = window(&schedule.decisions, first.steps);
    let mut best = first;

    // Rounds until one changes nothing (or the budget ends the search);
    // a bound on them, should moving decisions later never settle.
    for _ in 0..MAX_ROUNDS {
        let was = (best.decisions.clone(), best.steps);
        s.phase = "cycle";
        cycle_seed(&mut s, &mut best)?;
        s.phase = "ddmin";
        ddmin(&mut s, &mut best)?;
        s.phase = "narrow";
        narrow(&mut s, &mut best)?;
        if s.out_of_budget || (best.decisions.clone(), best.steps) == was {
            break;
        }
    }

    let mut out = Schedule::new(
        format!("minimized from {}", schedule.origin),
        best.decisions.clone(),
    );
    out.sync_points = cfg.kernel.sync_points;
    out.origin = out.origin.trim_end().to_string();
    Ok(Minimized {
        before,
        after: best.decisions.len(),
        window_before,
        window_after: window(&best.decisions, best.steps),
        schedule: out,
        execs: s.execs,
        elapsed: s.start.elapsed(),
        budget_ran_out: s.out_of_budget,
    })
}

/// For a deadlock on a wait-for cycle, tries the schedule the cycle itself
/// suggests before any delta debugging: each thread of the cycle but one is
/// preempted just as it asks for the lock it ends up waiting for (holding
/// the one the thread before it wants), in favour of the thread holding
/// that lock. Random schedules reach a deadlock through many irrelevant
/// decisions that only removal cannot replace; this candidate has at most
/// one decision per thread of the cycle. Tried at the first and at the last
/// time each thread asked for its lock in the failing run.
fn cycle_seed(s: &mut Search, best: &mut Hit) -> Result<(), VmError> {
    let Outcome::Deadlocked { threads, cycle } = best.outcome.clone() else {
        return Ok(());
    };
    let links: Vec<(u32, u64, u32)> = cycle
        .iter()
        .filter_map(|t| {
            let b = threads.iter().find(|b| b.thread == *t)?;
            Some((b.thread.0, b.lock?.0, b.holder?.0))
        })
        .collect();
    if links.len() != cycle.len() || links.len() < 2 {
        return Ok(());
    }
    for last in [false, true] {
        let anchors: Vec<Anchor> = links
            .iter()
            .map(|(thread, lock, holder)| Anchor {
                thread: *thread,
                object: Some(*lock),
                nth: if last {
                    best.points
                        .get(&(*thread, Some(*lock)))
                        .copied()
                        .unwrap_or(1)
                } else {
                    1
                },
                pick: *holder,
            })
            .collect();
        // Leaving one out first (it blocks by itself once the others hold
        // their locks), then all of them.
        let mut candidates: Vec<Vec<Anchor>> = (0..anchors.len())
            .map(|skip| {
                let mut c = anchors.clone();
                c.remove(skip);
                c
            })
            .collect();
        candidates.push(anchors);
        for c in candidates {
            if c.len() >= best.anchors.len() {
                continue;
            }
            if let Some(h) = s.test(Candidate::Anchors(&c))? {
                if h.decisions.len() < best.decisions.len() {
                    *best = h;
                    return Ok(());
                }
            }
        }
    }
    Ok(())
}

/// Zeller's ddmin over the anchored decisions of `best`, which it improves
/// in place.
fn ddmin(s: &mut Search, best: &mut Hit) -> Result<(), VmError> {
    if best.anchors.is_empty() {
        return Ok(());
    }
    // The default run may fail the same way already.
    if let Some(h) = s.test(Candidate::Anchors(&[]))? {
        *best = h;
        return Ok(());
    }
    let mut n = 2usize;
    while best.anchors.len() >= 2 && !s.out_of_budget {
        let c = best.anchors.clone();
        let chunks = split(&c, n);
        let mut reduced = false;
        for chunk in &chunks {
            if let Some(h) = s.test(Candidate::Anchors(chunk))? {
                *best = h;
                n = 2;
                reduced = true;
                break;
            }
        }
        if !reduced && n > 2 {
            for i in 0..chunks.len() {
                let complement: Vec<Anchor> = chunks
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .flat_map(|(_, c)| c.iter().copied())
                    .collect();
                if let Some(h) = s.test(Candidate::Anchors(&complement))? {
                    *best = h;
                    n = (n - 1).max(2);
                    reduced = true;
                    break;
                }
            }
        }
        if !reduced {
            if n >= c.len() {
                break;
            }
            n = (2 * n).min(c.len());
        }
    }
    Ok(())
}

/// `c` in `n` chunks of nearly equal size.
fn split<T: Clone>(c: &[T], n: usize) -> Vec<Vec<T>> {
    let n = n.min(c.len()).max(1);
    let mut out = Vec::with_capacity(n);
    let mut start = 0;
    for i in 0..n {
        let end = start + (c.len() - start) / (n - i);
        out.push(c[start..end].to_vec());
        start = end;
    }
    out
}

/// Moves each decision, last first, as late as it goes.
fn narrow(s: &mut Search, best: &mut Hit) -> Result<(), VmError> {
    let mut i = best.decisions.len();
    while i > 0 && !s.out_of_budget {
        i -= 1;
        if i >= best.decisions.len() {
            continue;
        }
        let d = best.decisions[i];
        let limit = best
            .decisions
            .get(i + 1)
            .map_or(best.steps.saturating_sub(1), |n| n.step - 1);
        // Binary search for the latest step that still fails the same way:
        // `lo` is known to, `hi + 1` is past the limit.
        let (mut lo, mut hi) = (d.step, limit);
        let mut found: Option<Hit> = None;
        while lo < hi && !s.out_of_budget {
            let mid = lo + (hi - lo).div_ceil(2);
            let mut cand = best.decisions.clone();
            cand[i].step = mid;
            match s.test(Candidate::Steps(&cand))? {
                Some(h) => {
                    lo = mid;
                    found = Some(h);
                }
                None => hi = mid - 1,
            }
        }
        if let Some(h) = found {
            if h.decisions.len() <= best.decisions.len() {
                *best = h;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_decisions_in_order() {
        let c: Vec<Decision> = (1..=7).map(|s| Decision { step: s, thread: 1 }).collect();
        let parts = split(&c, 3);
        assert_eq!(parts.len(), 3);
        assert_eq!(parts.concat(), c);
        assert!(parts.iter().all(|p| !p.is_empty()));
        assert_eq!(split(&c, 10).len(), 7);
    }

    #[test]
    fn the_window_runs_from_the_first_decision_to_the_end() {
        let d = [Decision {
            step: 40,
            thread: 2,
        }];
        assert_eq!(window(&d, 100), 60);
        assert_eq!(window(&[], 100), 0);
    }
}
