//! One fuzzing worker: a machine, a LibAFL state and fuzzer, and the loop
//! that runs them, exchanging corpus entries with the other workers.
//!
//! Assembly, one piece at a time: the executor (a machine restored from its
//! snapshot) and its observers (the coverage map and the run) → the
//! feedback (new features join the corpus) and the objective (a failure
//! with a new signature is a finding, after the notes every run leaves) →
//! the state → the scheduler → the fuzzer → the mutational stage.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use libafl::HasMetadata;
use libafl::corpus::{Corpus, InMemoryCorpus};
use libafl::events::SimpleEventManager;
use libafl::executors::HasObservers;
use libafl::feedback_or;
use libafl::feedbacks::MaxMapFeedback;
use libafl::fuzzer::{Evaluator, Fuzzer, StdFuzzer};
use libafl::monitors::NopMonitor;
use libafl::mutators::HavocScheduledMutator;
use libafl::schedulers::QueueScheduler;
use libafl::stages::StdMutationalStage;
use libafl::state::{HasCorpus, HasExecutions, StdState};
use libafl_bolts::rands::StdRand;
use libafl_bolts::tuples::tuple_list;

use super::executor::VmExecutor;
use super::feedbacks::{LearnRunProfile, NewSignature, SessionFeatures, Shared, Watched};
use super::input::{ScheduleInput, Tail};
use super::mutators::{
    InsertPreemption, MixMutator, MovePreemption, RemovePreemption, RetargetPreemption, RetuneTail,
    SpliceSchedules,
};
use super::{FuzzConfig, FuzzError, Hub, Progress};
use crate::kernel::vfs::SharedSource;
use crate::sched::StrategyKind;

/// How many stacked mutations havoc applies at most: 2^3.
const HAVOC_STACK_POW: usize = 3;
/// Most mutations of one corpus entry per round.
const MUTATIONS_PER_ROUND: std::num::NonZeroUsize = std::num::NonZeroUsize::new(8).unwrap();

/// Runs one worker until the stop flag or the budget ends it. A session
/// that ends in the middle of a run ends it with `VmError::Cancelled`.
pub fn run(
    id: usize,
    cfg: &FuzzConfig,
    source: SharedSource,
    steps: u64,
    shared: Shared,
    hub: &Hub,
    progress: Arc<Progress>,
) -> Result<(), FuzzError> {
    let err = |e: libafl::Error| match e {
        libafl::Error::ShuttingDown => FuzzError::Vm(crate::engine::VmError::Cancelled),
        e => FuzzError::Engine(e.to_string()),
    };
    // Executor and observers.
    let mut executor = VmExecutor::new(cfg.run.clone(), source, steps, progress.clone(), id)
        .pinned(cfg.pin.clone());
    let observers = executor.observers();
    let (map, run) = (&observers.0, &observers.1.0);
    // Feedback: a run that reaches a feature new to this worker's map
    // joins the corpus.
    let mut feedback = MaxMapFeedback::new(map);
    // Objective: a failure whose signature nobody saw is a finding. LibAFL
    // asks it about every run, and first, so the notes every run leaves go
    // in front of it; they never say yes.
    let mut objective = feedback_or!(
        LearnRunProfile::new(run),
        SessionFeatures::new(run, shared.features.clone()),
        NewSignature::new(run, shared.failures.clone(), progress.clone()),
        Watched::new(run, cfg.watch.clone(), progress.clone())
    );
    let rand = StdRand::with_seed(crate::sched::splitmix64(
        cfg.seed ^ (id as u64).wrapping_mul(0x9e37),
    ));
    let mut state = StdState::new(
        rand,
        InMemoryCorpus::<ScheduleInput>::new(),
        InMemoryCorpus::<ScheduleInput>::new(),
        &mut feedback,
        &mut objective,
    )
    .map_err(err)?;
    let pinned = cfg.pin.as_ref().map_or(0, |p| p.until);
    // Mutations place and keep decisions only after the pinned steps,
    // where they count (the run profile says where that is).
    if pinned > 0 {
        state.add_metadata(super::mutators::RunProfile {
            pinned,
            ..Default::default()
        });
    }
    let mut fuzzer = StdFuzzer::new(QueueScheduler::new(), feedback, objective);
    let mut mgr = SimpleEventManager::new(NopMonitor::new());

    // Seeds: the default schedule and a few of each strategy (or, for pure
    // strategy search, one of each strategy it mixes), then whatever the
    // user, an earlier session or the other workers provide.
    let target = cfg.target_fingerprint;
    let seed = |k: u64| crate::sched::splitmix64(cfg.seed ^ ((id as u64) << 32 | k));
    let mut seeds = Vec::new();
    if cfg.mix.fresh >= 1.0 {
        for (k, kind) in cfg.mix.kinds.iter().enumerate() {
            seeds.push(ScheduleInput::fresh(
                target,
                Tail::new(kind.with_parameter(2), seed(k as u64)),
            ));
        }
    } else {
        // Cheapest-to-find first: random walks settle most shallow bugs in
        // a schedule or two; PCT and POS reach the deep ones; the default
        // schedule mostly anchors the coverage map.
        for k in 0..2u64 {
            seeds.push(ScheduleInput::fresh(
                target,
                Tail::new(StrategyKind::Random, seed(20 + k)),
            ));
        }
        for k in 0..2u64 {
            seeds.push(ScheduleInput::fresh(
                target,
                Tail::new(StrategyKind::pct(2 + k as u32), seed(k)),
            ));
            seeds.push(ScheduleInput::fresh(
                target,
                Tail::new(StrategyKind::Pos, seed(10 + k)),
            ));
        }
        seeds.push(ScheduleInput::fresh(
            target,
            Tail::new(StrategyKind::Default, 0),
        ));
    }
    if id == 0 {
        seeds.extend(cfg.initial.iter().cloned());
    }
    for input in seeds {
        if progress.stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        fuzzer
            .add_input(&mut state, &mut executor, &mut mgr, input)
            .map_err(err)?;
    }
    // A seed that fails goes to the findings, not the corpus; the loop
    // needs one entry to start from.
    if state.corpus().count() == 0 {
        let start = ScheduleInput::fresh(target, seeds_fallback(cfg, target));
        state
            .corpus_mut()
            .add(libafl::corpus::Testcase::new(start))
            .map_err(err)?;
    }
    publish_new(&state, hub, id, &mut 0);

    let mutator = MixMutator {
        fresh: cfg.mix.fresh,
        kinds: cfg.mix.kinds.clone(),
        target,
        havoc: HavocScheduledMutator::with_max_stack_pow(
            tuple_list!(
                InsertPreemption,
                RemovePreemption,
                MovePreemption,
                RetargetPreemption,
                RetuneTail,
                SpliceSchedules
            ),
            HAVOC_STACK_POW,
        ),
    };
    // A few mutations per corpus entry and round: schedules that lead
    // nowhere are left soon, and every entry gets its turn.
    let mut stages = tuple_list!(StdMutationalStage::with_max_iterations(
        mutator,
        MUTATIONS_PER_ROUND
    ));

    let mut published = 0usize;
    let mut cursor = 0usize;
    let mut last_sync = Instant::now();
    while !progress.stop.load(Ordering::Relaxed) {
        fuzzer
            .fuzz_one(&mut stages, &mut executor, &mut state, &mut mgr)
            .map_err(err)?;
        publish_new(&state, hub, id, &mut published);
        if last_sync.elapsed() >= super::SYNC_INTERVAL {
            last_sync = Instant::now();
            for input in hub.since(id, &mut cursor) {
                // Others may have published thousands: the session's end
                // does not wait for them.
                if progress.stop.load(Ordering::Relaxed) {
                    break;
                }
                fuzzer
                    .evaluate_input(&mut state, &mut executor, &mut mgr, &input)
                    .map_err(err)?;
            }
        }
    }
    let _ = state.executions();
    Ok(())
}

/// What to start from when every seed failed: a strategy of the mix.
fn seeds_fallback(cfg: &FuzzConfig, _target: u64) -> Tail {
    match cfg.mix.kinds.first() {
        Some(k) if cfg.mix.fresh >= 1.0 => Tail::new(k.with_parameter(2), cfg.seed),
        _ => Tail::new(StrategyKind::Default, 0),
    }
}

/// Hands the corpus entries this worker added since the last call to the hub.
fn publish_new<S: HasCorpus<ScheduleInput>>(
    state: &S,
    hub: &Hub,
    id: usize,
    published: &mut usize,
) {
    let corpus = state.corpus();
    let n = corpus.count();
    while *published < n {
        let cid = corpus.nth(*published);
        if let Ok(tc) = corpus.get(cid) {
            if let Some(i) = tc.borrow().input().clone() {
                hub.publish(id, i);
            }
        }
        *published += 1;
    }
}
