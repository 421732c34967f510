//! Fuzzing a fork's continuations: the fuzzer's workers, every input's
//! run pinned to a recorded run up to the fork's step (mutations change
//! only what comes after), each run counted by how it ended.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{Budget, FuzzConfig, FuzzError, Hub, Pin, Progress, StrategyMix, Watch, WorkerKind};
use crate::engine::{RunConfig, RunReport, VmError};
use crate::kernel::vfs::SharedSource;
use crate::observe::failure::table_row;
use crate::sched::Schedule;

/// The continuations that ended one way.
#[derive(Clone, Debug)]
pub struct Tally {
    pub count: u64,
    /// Which continuation was the first (from 0, in the order they ended).
    pub first: u64,
    /// The first's whole schedule (the pinned prefix and what followed).
    pub schedule: Schedule,
}

/// What fuzzing the continuations found.
#[derive(Clone, Debug)]
pub struct Fuzzed {
    pub runs: u64,
    /// By outcome, as the check's table names them.
    pub outcomes: BTreeMap<&'static str, Tally>,
    pub elapsed: Duration,
    pub jobs: usize,
    /// Continuations that started from a snapshot, the latest step one
    /// was taken after, and the time their restores took.
    pub restored: u64,
    pub restored_at: Option<u64>,
    pub restore_us: u64,
}

/// A fork to fuzz from.
pub struct ForkFuzz {
    pub run: RunConfig,
    /// Start the continuations from a snapshot at the fork (off only to
    /// measure what it saves).
    pub snapshot: bool,
    pub pin: Pin,
    pub seed: u64,
    pub jobs: usize,
    pub budget: Budget,
    /// The strategies fresh starts draw from.
    pub mix: StrategyMix,
}

/// Why the fuzzing of continuations gave no results.
#[derive(Debug, thiserror::Error)]
pub enum ForkFuzzError {
    #[error(
        "--time {} ended before the first run did (the program's runs are long): give more --time; nothing was written",
        humantime::format_duration(*.0)
    )]
    Outlasted(Duration),
    #[error(transparent)]
    Fuzz(#[from] FuzzError),
}

/// Fuzzes the continuations of `f.pin` until its budget ends, telling
/// `tick` every 100 ms how many ran and how many outcomes they had.
pub fn fuzz_fork(
    f: &ForkFuzz,
    source: SharedSource,
    mut tick: impl FnMut(u64, usize),
) -> Result<Fuzzed, ForkFuzzError> {
    let start = Instant::now();
    let cancel = match f.budget.time {
        Some(t) => f.run.cancel.clone().with_deadline(start + t),
        None => f.run.cancel.clone(),
    };
    let outlasted = || ForkFuzzError::Outlasted(f.budget.time.unwrap_or_default());
    let mut run = f.run.clone();
    run.cancel = cancel.clone();
    // PCT tails spread their change points over a default run's decisions.
    let steps = match crate::explore::probe(&run, source.clone()) {
        Ok(p) => p.decision_points,
        Err(VmError::Cancelled) => return Err(outlasted()),
        Err(e) => return Err(FuzzError::Vm(e).into()),
    };
    // Every continuation runs the same prefix: they start from a snapshot
    // at its end.
    run.fork_snapshot = f.snapshot.then_some(f.pin.until);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let counted = seen.clone();
    let cfg = FuzzConfig {
        target_fingerprint: 0,
        target_name: run.kernel.exe.clone(),
        run_words: Vec::new(),
        args: Vec::new(),
        run,
        out: std::path::PathBuf::new(),
        jobs: f.jobs,
        budget: f.budget.clone(),
        seed: f.seed,
        initial: Vec::new(),
        mix: f.mix.clone(),
        sync_dir: None,
        sync_id: "fork".into(),
        minimize_execs: 0,
        screen: false,
        quiet: true,
        // Every run is counted; none ends the session.
        watch: Some(Watch {
            accept: Arc::new(move |r: &RunReport| {
                counted.lock().unwrap().count(r);
                false
            }),
            hit: Arc::new(AtomicU64::new(0)),
        }),
        resume: false,
        workers: WorkerKind::Threads,
        nodes: Default::default(),
        pin: Some(f.pin.clone()),
    };
    let progress = Arc::new(Progress::new(f.jobs, f.budget.execs));
    let shared = super::feedbacks::Shared::default();
    let hub = Hub::default();
    let failed = std::thread::scope(|scope| {
        let workers = super::spawn_threads(scope, &cfg, (source, steps), &shared, &hub, &progress);
        while !workers.iter().all(|w| w.is_finished()) {
            if cancel.is_cancelled() {
                progress.stop.store(true, Ordering::Relaxed);
            }
            let (runs, outcomes) = seen.lock().unwrap().so_far();
            tick(runs, outcomes);
            let next = Instant::now() + Duration::from_millis(100);
            while Instant::now() < next && !workers.iter().all(|w| w.is_finished()) {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        workers
            .into_iter()
            .filter_map(|w| w.join().ok().and_then(Result::err))
            .next()
    });
    if let Some(e) = failed {
        return Err(e.into());
    }
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    if seen.runs == 0 {
        return Err(outlasted());
    }
    Ok(Fuzzed {
        runs: seen.runs,
        outcomes: seen.outcomes,
        elapsed: start.elapsed(),
        jobs: f.jobs,
        restored: seen.restored,
        restored_at: seen.restored_at,
        restore_us: seen.restore_us,
    })
}

/// What the runs so far did.
#[derive(Default)]
struct Seen {
    runs: u64,
    outcomes: BTreeMap<&'static str, Tally>,
    restored: u64,
    restored_at: Option<u64>,
    restore_us: u64,
}

impl Seen {
    fn count(&mut self, r: &RunReport) {
        let n = self.runs;
        self.runs += 1;
        self.outcomes
            .entry(table_row(r.failure.as_ref()))
            .and_modify(|t| t.count += 1)
            .or_insert_with(|| Tally {
                count: 1,
                first: n,
                schedule: r.schedule.clone(),
            });
        // The latest snapshot is the fork's (or the usual one, when the
        // fork is before it).
        if r.restored_at > self.restored_at {
            (self.restored, self.restore_us) = (0, 0);
            self.restored_at = r.restored_at;
        }
        if r.restored_at.is_some() && r.restored_at == self.restored_at {
            self.restored += 1;
            self.restore_us += r.restore_us;
        }
    }

    fn so_far(&self) -> (u64, usize) {
        (self.runs, self.outcomes.len())
    }
}
