//! The fuzzer: coverage-guided search of the schedule space, one machine
//! per core, findings deduplicated by failure signature.
//!
//! Workers (one machine each; see `worker`) run LibAFL's loop over
//! schedule inputs. On the command line they are processes joined by an
//! LLMP broker (`pool`): a worker that dies is started again and the
//! session goes on. Sessions that only measure (bench trials) run one
//! worker as a thread, with no process to start. Either way the session's
//! main thread sees the same state (the hub of corpus entries, the
//! features, the failures with new signatures, the counters) and does
//! everything else: it writes the corpus and the findings to the output
//! directory, exchanges entries with other machines through a sync
//! directory, keeps the statistics files and shows progress.

pub mod executor;
mod feedbacks;
mod findings;
pub mod fork;
pub mod input;
pub mod mutators;
pub mod nodes;
pub mod observers;
mod output;
mod pool;
mod progress;
mod sync;

pub use findings::{PENDING_FILE, SEARCH_RUNS_PER_MINIMIZE_RUN};
pub use output::Prior;
pub use progress::{MAX_JOBS, Progress};
mod worker;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use feedbacks::NewFailure;
pub use input::{ScheduleInput, Tail};
pub use observers::FeatureKind;

use crate::engine::{RunConfig, RunReport, VmError};
use crate::kernel::vfs::{FileSource, SharedSource};
use crate::observe::failure::FailureKind;
use crate::observe::outcome::Outcome;
use crate::sched::StrategyKind;

/// How often workers take entries from the hub, and the main thread
/// exchanges them with the sync directory.
pub const SYNC_INTERVAL: Duration = Duration::from_secs(2);

/// How often a run starts from a strategy alone instead of a corpus entry.
#[derive(Clone, Debug, PartialEq)]
pub struct StrategyMix {
    /// Share of runs that start fresh (0 to 1).
    pub fresh: f64,
    /// The strategies a fresh start draws from (PCT at depth 2 or 3).
    pub kinds: Vec<StrategyKind>,
}

impl Default for StrategyMix {
    fn default() -> Self {
        StrategyMix {
            fresh: 0.2,
            kinds: vec![
                StrategyKind::pct(2),
                StrategyKind::Pos,
                StrategyKind::Random,
            ],
        }
    }
}

impl std::str::FromStr for StrategyMix {
    type Err = String;

    /// `F` (a share, with PCT, POS and random walks) or `F:KIND,KIND` (for
    /// example `1.0:random` for pure random search without a corpus).
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "--strategy-mix {s:?}: write a share from 0 to 1, optionally with strategies, like 0.2 or 1.0:random or 0.5:pct,pos"
            )
        };
        let (share, kinds) = match s.split_once(':') {
            Some((a, b)) => (a, Some(b)),
            None => (s, None),
        };
        let fresh: f64 = share.parse().map_err(|_| bad())?;
        if !(0.0..=1.0).contains(&fresh) {
            return Err(bad());
        }
        let kinds = match kinds {
            None => StrategyMix::default().kinds,
            Some(list) => list
                .split(',')
                .map(|k| {
                    StrategyKind::from_family(k)
                        .filter(|k| k.is_seeded())
                        .ok_or_else(bad)
                })
                .collect::<Result<_, _>>()?,
        };
        Ok(StrategyMix { fresh, kinds })
    }
}

/// Limits of a session.
#[derive(Clone, Debug, Default)]
pub struct Budget {
    pub time: Option<Duration>,
    pub execs: Option<u64>,
}

/// Everything a session needs.
#[derive(Clone, Debug)]
pub struct FuzzConfig {
    pub run: RunConfig,
    /// Fingerprint of the target (path and contents), stamped into inputs.
    pub target_fingerprint: u64,
    /// The target as the user named it (for people).
    pub target_name: String,
    /// `rewind-fuzz run`'s words for the target and its settings, and the
    /// program's arguments: a printed command runs the program as the
    /// session does.
    pub run_words: Vec<String>,
    pub args: Vec<String>,
    pub out: PathBuf,
    pub jobs: usize,
    pub budget: Budget,
    pub seed: u64,
    /// Extra seed inputs (from `--corpus` and, with `--resume`, the queue).
    pub initial: Vec<ScheduleInput>,
    pub mix: StrategyMix,
    pub sync_dir: Option<PathBuf>,
    /// This fuzzer's name in the sync directory.
    pub sync_id: String,
    /// Executions minimization may spend on one finding.
    pub minimize_execs: u64,
    /// Show a live screen (terminal) or periodic lines.
    pub screen: bool,
    /// Print nothing but findings and the end summary.
    pub quiet: bool,
    /// Stop at the first run this accepts (for benchmarks).
    pub watch: Option<Watch>,
    /// Continue the session in `out`: counts go on, its findings are known.
    pub resume: bool,
    /// Where the workers run.
    pub workers: WorkerKind,
    /// Other machines' sessions this one joins.
    pub nodes: nodes::NodesConfig,
    /// Every run starts as this recorded run (a fork's continuations).
    pub pin: Option<Pin>,
}

/// A recorded run up to a step, which every run of a session starts as:
/// its decisions up to `until` replayed, the default policy's picks
/// between them.
#[derive(Clone, Debug)]
pub struct Pin {
    pub decisions: Vec<crate::sched::Decision>,
    pub until: u64,
}

/// A condition on runs that ends a session when met, remembering when.
#[derive(Clone)]
pub struct Watch {
    pub accept: Arc<dyn Fn(&RunReport) -> bool + Send + Sync>,
    /// The execution (1-based, all workers) that met it; 0 while none has.
    pub hit: Arc<AtomicU64>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Watch(hit at {})", self.hit.load(Ordering::Relaxed))
    }
}

/// Why a session could not run.
#[derive(Debug, thiserror::Error)]
pub enum FuzzError {
    #[error("{0}")]
    Setup(String),
    #[error(transparent)]
    Vm(#[from] crate::engine::VmError),
    #[error("fuzzing engine: {0}")]
    Engine(String),
    /// A worker process could not go on.
    #[error("{0}")]
    Worker(String),
}

/// The in-process exchange of corpus entries between workers (and with the
/// sync directory, as pseudo-worker `usize::MAX`).
#[derive(Default)]
pub struct Hub {
    entries: Mutex<Vec<(usize, ScheduleInput)>>,
}

impl Hub {
    pub fn publish(&self, from: usize, input: ScheduleInput) {
        self.entries.lock().unwrap().push((from, input));
    }

    /// Entries others published since `cursor`.
    pub fn since(&self, me: usize, cursor: &mut usize) -> Vec<ScheduleInput> {
        let e = self.entries.lock().unwrap();
        let out = e[*cursor..]
            .iter()
            .filter(|(from, _)| *from != me)
            .map(|(_, i)| i.clone())
            .collect();
        *cursor = e.len();
        out
    }

    fn slice(&self, from: usize) -> Vec<(usize, ScheduleInput)> {
        self.entries.lock().unwrap()[from..].to_vec()
    }
}

/// A finding as written to the output directory.
#[derive(Clone, Debug)]
pub struct Finding {
    pub kind: FailureKind,
    pub signature: String,
    pub path: PathBuf,
    pub summary: String,
    /// Executions (all workers) when it was found.
    pub execs: u64,
    pub elapsed: Duration,
}

/// What a session did.
#[derive(Clone, Debug)]
pub struct FuzzSummary {
    pub execs: u64,
    pub elapsed: Duration,
    pub corpus: usize,
    pub features: BTreeMap<&'static str, usize>,
    pub findings: Vec<Finding>,
    /// Failures found whose reproducer could not be written (a full or
    /// read-only `--out`), with why.
    pub unsaved: Vec<String>,
    /// A system call some runs needed and the monitor lacks.
    pub unsupported: Option<String>,
    /// Executions of the sessions before a `--resume`.
    pub prior_execs: u64,
}

/// Joins the other nodes, if the session has any, and takes what those it
/// joins have before its own search starts: their corpus to start from,
/// their findings' signatures not to report again.
fn start_nodes(
    cfg: &FuzzConfig,
    hub: &Hub,
    shared: &feedbacks::Shared,
    out: &mut output::Output,
) -> Option<nodes::Nodes> {
    if cfg.nodes.is_empty() {
        return None;
    }
    let me = nodes::Hello {
        protocol: nodes::PROTOCOL,
        node: cfg.sync_id.clone(),
        target: cfg.target_fingerprint,
        sync_points: cfg.run.kernel.sync_points.as_str().into(),
    };
    if let Some(addr) = cfg.nodes.listen.as_ref().and_then(|l| l.local_addr().ok()) {
        out.note(format!(
            "this node listens on {addr}: other sessions join it with --node-connect {addr}"
        ));
    }
    let mut n = nodes::Nodes::start(&cfg.nodes, me);
    let joining = cfg.nodes.connect.len();
    for note in n.catch_up(joining, hub, &shared.failures, nodes::CATCH_UP_LIMIT) {
        out.note(note);
    }
    out.set_node_counts(n.counts);
    Some(n)
}

/// Passes entries and findings between this session and the other
/// nodes, and says what happened.
fn tick_nodes(
    n: &mut nodes::Nodes,
    hub: &Hub,
    shared: &feedbacks::Shared,
    out: &mut output::Output,
) {
    for note in n.tick(hub, &shared.failures, out.findings()) {
        out.note(note);
    }
    out.set_node_counts(n.counts);
}

/// Where a session's workers run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerKind {
    /// Threads of the session's process, sharing its state directly: no
    /// process to start, for sessions that measure (a bench trial is a
    /// session of one worker, started thousands of times).
    Threads,
    /// Processes joined by LLMP: a worker that dies is started again and
    /// the session goes on.
    Processes,
}

/// The running workers, of either kind.
enum Workers<'scope> {
    Threads(Vec<std::thread::ScopedJoinHandle<'scope, Result<(), FuzzError>>>),
    Processes(pool::Pool<'scope>),
}

impl Workers<'_> {
    fn finished(&mut self, progress: &Progress) -> bool {
        match self {
            Workers::Threads(handles) => handles.iter().all(|h| h.is_finished()),
            Workers::Processes(pool) => pool.finished(progress),
        }
    }

    /// What happened to the workers, for people.
    fn notes(&mut self, out: &std::path::Path) -> Vec<String> {
        match self {
            Workers::Threads(_) => Vec::new(),
            Workers::Processes(pool) => pool.notes(out),
        }
    }

    /// Waits for every worker; the first failure, if any.
    fn join(self, out: &std::path::Path) -> Option<FuzzError> {
        match self {
            Workers::Threads(handles) => handles
                .into_iter()
                .filter_map(|h| h.join().ok().and_then(Result::err))
                .next(),
            Workers::Processes(pool) => pool.join(out),
        }
    }
}

/// Starts one worker thread per job.
fn spawn_threads<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    cfg: &'env FuzzConfig,
    (source, steps): (SharedSource, u64),
    shared: &feedbacks::Shared,
    hub: &'env Hub,
    progress: &Arc<Progress>,
) -> Vec<std::thread::ScopedJoinHandle<'scope, Result<(), FuzzError>>> {
    (0..cfg.jobs)
        .map(|id| {
            let (source, shared, progress) = (source.clone(), shared.clone(), progress.clone());
            std::thread::Builder::new()
                .name(format!("fuzz-{id}"))
                .spawn_scoped(scope, move || {
                    let r = match worker::run(id, cfg, source, steps, shared, hub, progress.clone())
                    {
                        // The session ended in the middle of a run.
                        Err(FuzzError::Vm(VmError::Cancelled)) => Ok(()),
                        r => r,
                    };
                    if r.is_err() {
                        progress.stop.store(true, Ordering::Relaxed);
                    }
                    r
                })
                .expect("spawn a worker")
        })
        .collect()
}

/// How many schedules coverage-guided fuzzing runs until one is accepted by
/// `accept`, within `budget` executions (and `time`, when given): one
/// worker, so the answer depends on `seed` alone (within the time, on the
/// host's speed too). For benchmarks against plain strategies.
pub fn schedules_to_bug(
    run: RunConfig,
    seed: u64,
    mix: StrategyMix,
    (budget, time): (u64, Option<Duration>),
    accept: Arc<dyn Fn(&RunReport) -> bool + Send + Sync>,
) -> Result<Option<u64>, FuzzError> {
    let out =
        tempfile::tempdir().map_err(|e| FuzzError::Setup(format!("a temporary directory: {e}")))?;
    let hit = Arc::new(AtomicU64::new(0));
    let cfg = FuzzConfig {
        target_fingerprint: 0,
        target_name: run.kernel.exe.clone(),
        run_words: vec!["--target".into(), run.kernel.exe.clone()],
        args: run.kernel.argv[1..].to_vec(),
        run,
        out: out.path().to_path_buf(),
        jobs: 1,
        budget: Budget {
            time,
            execs: Some(budget),
        },
        seed,
        initial: Vec::new(),
        mix,
        sync_dir: None,
        sync_id: "bench".into(),
        minimize_execs: 0,
        screen: false,
        quiet: true,
        watch: Some(Watch {
            accept,
            hit: hit.clone(),
        }),
        resume: false,
        workers: WorkerKind::Threads,
        nodes: nodes::NodesConfig::default(),
        pin: None,
    };
    fuzz(cfg, crate::machine::Cancel::new())?;
    let n = hit.load(Ordering::Relaxed);
    Ok((n > 0).then_some(n))
}

/// Runs a session to its budget (or until `cancel` says so, for Ctrl-C).
/// The session's time budget and `cancel` end the run in progress too, the
/// first one and minimization's included: a run can be millions of steps.
pub fn fuzz(mut cfg: FuzzConfig, cancel: crate::machine::Cancel) -> Result<FuzzSummary, FuzzError> {
    let session_start = Instant::now();
    // Recording a finding is cut short by neither the time budget nor
    // Ctrl-C: it is one run, and a finding is kept as a reproducer (a
    // second Ctrl-C quits at once).
    let mut recording = cfg.run.clone();
    recording.cancel = crate::machine::Cancel::new();
    let cancel = match cfg.budget.time {
        Some(t) => cancel.with_deadline(session_start + t),
        None => cancel,
    };
    cfg.run.cancel = cancel.clone();
    let mut out = output::Output::create(&cfg)?;
    let source = FileSource::host();
    let recorder = findings::Recorder {
        run: recording,
        source: source.clone(),
    };
    // One default run first: it checks the target runs at all, and PCT needs
    // to know how many decision points a run has.
    let crate::explore::Probe {
        report: probe,
        decision_points,
        ..
    } = match crate::explore::probe(&cfg.run, source.clone()) {
        // Ended before the first run did: an empty session.
        Err(VmError::Cancelled) => {
            eprintln!(
                "rewind-fuzz: note: the session ended before the target's first run did; \
                 its runs are long: lower --max-steps or give more --time"
            );
            let summary = FuzzSummary {
                execs: 0,
                elapsed: session_start.elapsed(),
                corpus: 0,
                features: FeatureKind::ALL.map(|k| (k.name(), 0)).into(),
                findings: Vec::new(),
                unsaved: Vec::new(),
                unsupported: None,
                prior_execs: out.prior_execs(),
            };
            out.finish(&cfg, &summary, &Progress::new(cfg.jobs, cfg.budget.execs));
            return Ok(summary);
        }
        r => r?,
    };
    if let Outcome::Unsupported { .. } = probe.outcome {
        return Err(FuzzError::Setup(format!(
            "the target's default run needs something the monitor lacks: {}",
            probe.outcome.summary()
        )));
    }
    let steps = decision_points;
    let progress = Arc::new(Progress::new(cfg.jobs, cfg.budget.execs));
    let shared = feedbacks::Shared::default();
    // Findings of the sessions before a --resume are not new.
    shared.failures.lock().unwrap().signatures = out.prior_signatures();
    let hub = Hub::default();
    let mut nodes = start_nodes(&cfg, &hub, &shared, &mut out);
    let start = Instant::now();
    let mut failure: Option<FuzzError> = None;

    std::thread::scope(|scope| {
        // Shared memory may be out of reach (a file size limit, a full
        // /dev/shm): the session runs, with its workers as threads.
        let pool = match cfg.workers {
            WorkerKind::Threads => Ok(None),
            WorkerKind::Processes => {
                match pool::Pool::start(
                    scope,
                    &cfg,
                    (source.clone(), steps),
                    &shared,
                    &hub,
                    &progress,
                ) {
                    Ok(pool) => Ok(Some(pool)),
                    Err(FuzzError::Setup(why)) => {
                        out.note(format!(
                            "warning: worker processes cannot start ({why}); the workers are \
                             threads of this process, and one that fails ends the session"
                        ));
                        Ok(None)
                    }
                    Err(e) => Err(e),
                }
            }
        };
        let started = pool.map(|pool| match pool {
            Some(pool) => Workers::Processes(pool),
            None => Workers::Threads(spawn_threads(
                scope,
                &cfg,
                (source.clone(), steps),
                &shared,
                &hub,
                &progress,
            )),
        });
        let mut workers = match started {
            Ok(w) => w,
            Err(e) => {
                failure = Some(e);
                return;
            }
        };
        // Minimization, beside the search (not for a session that only
        // measures).
        let minimizer = (cfg.minimize_execs > 0 && cfg.watch.is_none()).then(|| {
            let (cfg, source, desk, progress) =
                (&cfg, source.clone(), out.desk(), progress.clone());
            std::thread::Builder::new()
                .name("fuzz-minimize".into())
                .spawn_scoped(scope, move || {
                    findings::minimizer(cfg, source, &desk, &progress)
                })
                .expect("spawn the minimizer")
        });
        // Findings are recorded and written on a thread of their own.
        let writer = {
            let (cfg, recorder, desk) = (&cfg, &recorder, out.desk());
            std::thread::Builder::new()
                .name("fuzz-findings".into())
                .spawn_scoped(scope, move || findings::writer(cfg, recorder, &desk))
                .expect("spawn the findings writer")
        };
        // The main thread: findings, files, status, sync.
        let mut hub_cursor = 0;
        loop {
            let done = workers.finished(&progress);
            if cancel.is_cancelled() {
                progress.stop.store(true, Ordering::Relaxed);
            }
            for note in workers.notes(&cfg.out) {
                out.note(note);
            }
            if let Some(n) = &mut nodes {
                tick_nodes(n, &hub, &shared, &mut out);
            }
            out.tick(&cfg, &shared, (&hub, &mut hub_cursor), &progress, start);
            if done {
                break;
            }
            // A tick every 100 ms, or sooner when the workers are done (a
            // short session, such as a bench trial, should not wait).
            let next_tick = Instant::now() + Duration::from_millis(100);
            while Instant::now() < next_tick && !workers.finished(&progress) {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        if let Some(e) = workers.join(&cfg.out) {
            failure.get_or_insert(e);
        }
        progress.stop.store(true, Ordering::Relaxed);
        // The last failures the workers found are recorded and handed to
        // the minimizer, which uses what is left of its share, then the
        // writer writes what it did.
        let desk = out.desk();
        loop {
            out.tick(&cfg, &shared, (&hub, &mut hub_cursor), &progress, start);
            let d = desk.lock().unwrap();
            if d.to_record.is_empty() && d.recorded.is_empty() && !d.writing {
                break;
            }
            drop(d);
            std::thread::sleep(Duration::from_millis(10));
        }
        desk.lock().unwrap().no_more_tasks = true;
        if let Some(m) = minimizer {
            while !m.is_finished() {
                out.tick(&cfg, &shared, (&hub, &mut hub_cursor), &progress, start);
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = m.join();
        }
        desk.lock().unwrap().closing = true;
        let _ = writer.join();
        // Findings the workers reported last, and the final files.
        out.tick(&cfg, &shared, (&hub, &mut hub_cursor), &progress, start);
        if let Some(n) = &mut nodes {
            tick_nodes(n, &hub, &shared, &mut out);
            n.finish();
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    let seen = shared.features.lock().unwrap();
    let features = FeatureKind::ALL.map(|k| (k.name(), seen.count(k))).into();
    let summary = FuzzSummary {
        execs: progress.execs.load(Ordering::Relaxed),
        elapsed: start.elapsed(),
        corpus: out.corpus_len(),
        features,
        findings: out.findings().to_vec(),
        unsaved: out.unsaved().to_vec(),
        unsupported: shared.failures.lock().unwrap().unsupported.clone(),
        prior_execs: out.prior_execs(),
    };
    out.finish(&cfg, &summary, &progress);
    Ok(summary)
}
