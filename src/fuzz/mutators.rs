//! Mutators made for schedules: each changes where a run preempts, whom it
//! hands the CPU to, or what strategy continues after the prefix.

use std::borrow::Cow;
use std::num::NonZeroUsize;

use libafl::HasMetadata;
use libafl::corpus::Corpus;
use libafl::mutators::{MutationResult, Mutator};
use libafl::state::{HasCorpus, HasRand};
use libafl_bolts::Named;
use libafl_bolts::rands::Rand;
use serde::{Deserialize, Serialize};

use super::input::{MAX_DECISIONS, ScheduleInput, Tail, fingerprint};
use crate::sched::{Decision, StrategyKind};

/// What the fuzzer has learned about the target's runs, which mutators use
/// to pick plausible steps and threads.
#[derive(Clone, Debug, Default, Serialize, Deserialize, libafl_bolts::SerdeAny)]
pub struct RunProfile {
    /// The first step at which two threads could run (where schedules start
    /// to matter).
    pub first_step: u64,
    /// The longest run seen, in steps.
    pub max_step: u64,
    /// Thread ids seen.
    pub threads: Vec<u32>,
    /// The last step every input takes as pinned (a fork's): decisions
    /// at or before it change nothing.
    #[serde(default)]
    pub pinned: u64,
}

impl RunProfile {
    /// Merges what one run showed.
    pub fn learn(&mut self, first_step: u64, steps: u64, threads: u32) {
        if self.first_step == 0 || (first_step != 0 && first_step < self.first_step) {
            self.first_step = first_step;
        }
        self.max_step = self.max_step.max(steps);
        for t in 1..=threads {
            if !self.threads.contains(&t) {
                self.threads.push(t);
            }
        }
    }
}

/// Where the runs of inputs that found new interleavings went: for each
/// such input (by fingerprint), the decisions its run took and the switches
/// that made its new interleavings. A new interleaving is a state nobody
/// explored beyond yet, so [`BranchAtNewInterleaving`] replays the run up
/// to one of those switches and lets a fresh strategy take it from there.
#[derive(Clone, Debug, Default, Serialize, Deserialize, libafl_bolts::SerdeAny)]
pub struct Lineages {
    by_input: std::collections::BTreeMap<u64, Lineage>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Lineage {
    /// The run's decisions (those that differed from the default policy).
    decisions: Vec<Decision>,
    /// The switches that first made an interleaving.
    new_switches: Vec<Decision>,
}

impl Lineages {
    /// Remembers where the run of `input` found something new.
    pub fn remember(&mut self, input: &ScheduleInput, decisions: &[Decision], new: Vec<Decision>) {
        let lineage = Lineage {
            decisions: decisions.iter().copied().take(MAX_DECISIONS).collect(),
            new_switches: new,
        };
        self.by_input.insert(fingerprint(input), lineage);
    }
}

fn below<R: Rand>(r: &mut R, n: usize) -> usize {
    NonZeroUsize::new(n).map_or(0, |n| r.below(n))
}

/// A step at which a schedule decision could matter.
fn pick_step<S: HasRand + HasMetadata>(state: &mut S) -> u64 {
    let (lo, hi) = state
        .metadata::<RunProfile>()
        .map(|p| {
            let lo = p.first_step.max(p.pinned + 1).max(1);
            (lo, p.max_step.max(lo))
        })
        .unwrap_or((1, 64));
    lo + state.rand_mut().below_or_zero((hi - lo + 1) as usize) as u64
}

/// A thread that has existed in some run.
fn pick_thread<S: HasRand + HasMetadata>(state: &mut S) -> u32 {
    let threads = state
        .metadata::<RunProfile>()
        .map(|p| p.threads.clone())
        .unwrap_or_default();
    if threads.is_empty() {
        return 1 + state.rand_mut().below_or_zero(4) as u32;
    }
    threads[below(state.rand_mut(), threads.len())]
}

macro_rules! named {
    ($t:ty, $n:literal) => {
        impl Named for $t {
            fn name(&self) -> &Cow<'static, str> {
                static NAME: Cow<'static, str> = Cow::Borrowed($n);
                &NAME
            }
        }
    };
}

/// Adds a preemption: at a random step, a random thread runs.
#[derive(Default)]
pub struct InsertPreemption;
named!(InsertPreemption, "insert-preemption");

impl<S: HasRand + HasMetadata> Mutator<ScheduleInput, S> for InsertPreemption {
    fn mutate(
        &mut self,
        state: &mut S,
        input: &mut ScheduleInput,
    ) -> Result<MutationResult, libafl::Error> {
        let step = pick_step(state);
        let thread = pick_thread(state);
        input.decisions.push(Decision { step, thread });
        input.normalize();
        Ok(MutationResult::Mutated)
    }

    fn post_exec(
        &mut self,
        _: &mut S,
        _: Option<libafl::corpus::CorpusId>,
    ) -> Result<(), libafl::Error> {
        Ok(())
    }
}

/// Removes a preemption.
#[derive(Default)]
pub struct RemovePreemption;
named!(RemovePreemption, "remove-preemption");

impl<S: HasRand> Mutator<ScheduleInput, S> for RemovePreemption {
    fn mutate(
        &mut self,
        state: &mut S,
        input: &mut ScheduleInput,
    ) -> Result<MutationResult, libafl::Error> {
        if input.decisions.is_empty() {
            return Ok(MutationResult::Skipped);
        }
        let i = below(state.rand_mut(), input.decisions.len());
        input.decisions.remove(i);
        Ok(MutationResult::Mutated)
    }

    fn post_exec(
        &mut self,
        _: &mut S,
        _: Option<libafl::corpus::CorpusId>,
    ) -> Result<(), libafl::Error> {
        Ok(())
    }
}

/// Moves a preemption a few steps earlier or later.
#[derive(Default)]
pub struct MovePreemption;
named!(MovePreemption, "move-preemption");

impl<S: HasRand> Mutator<ScheduleInput, S> for MovePreemption {
    fn mutate(
        &mut self,
        state: &mut S,
        input: &mut ScheduleInput,
    ) -> Result<MutationResult, libafl::Error> {
        if input.decisions.is_empty() {
            return Ok(MutationResult::Skipped);
        }
        let r = state.rand_mut();
        let i = below(r, input.decisions.len());
        // Mostly small moves: a preemption a step or two away is a new
        // interleaving of the same code.
        let delta = 1 + (r.below_or_zero(4) as u64).pow(2) + r.below_or_zero(3) as u64;
        let d = &mut input.decisions[i];
        d.step = if r.coinflip(0.5) {
            d.step.saturating_sub(delta).max(1)
        } else {
            d.step + delta
        };
        input.normalize();
        Ok(MutationResult::Mutated)
    }

    fn post_exec(
        &mut self,
        _: &mut S,
        _: Option<libafl::corpus::CorpusId>,
    ) -> Result<(), libafl::Error> {
        Ok(())
    }
}

/// Hands a preemption to another thread.
#[derive(Default)]
pub struct RetargetPreemption;
named!(RetargetPreemption, "retarget-preemption");

impl<S: HasRand + HasMetadata> Mutator<ScheduleInput, S> for RetargetPreemption {
    fn mutate(
        &mut self,
        state: &mut S,
        input: &mut ScheduleInput,
    ) -> Result<MutationResult, libafl::Error> {
        if input.decisions.is_empty() {
            return Ok(MutationResult::Skipped);
        }
        let i = below(state.rand_mut(), input.decisions.len());
        let t = pick_thread(state);
        if input.decisions[i].thread == t {
            return Ok(MutationResult::Skipped);
        }
        input.decisions[i].thread = t;
        Ok(MutationResult::Mutated)
    }

    fn post_exec(
        &mut self,
        _: &mut S,
        _: Option<libafl::corpus::CorpusId>,
    ) -> Result<(), libafl::Error> {
        Ok(())
    }
}

/// Changes the strategy after the prefix: new seed (for PCT, new change
/// points and priorities), another PCT depth, or another kind.
#[derive(Default)]
pub struct RetuneTail;
named!(RetuneTail, "retune-tail");

impl<S: HasRand> Mutator<ScheduleInput, S> for RetuneTail {
    fn mutate(
        &mut self,
        state: &mut S,
        input: &mut ScheduleInput,
    ) -> Result<MutationResult, libafl::Error> {
        let r = state.rand_mut();
        let seed = r.next();
        let kind = input.tail.kind;
        input.tail = match (kind.parameter(), r.below_or_zero(4)) {
            (Some(p), 0) => {
                let p = (p as i64 + if r.coinflip(0.5) { 1 } else { -1 }).clamp(1, 8);
                Tail::new(kind.with_parameter(p as u32), seed)
            }
            (_, 1 | 2) if kind.is_seeded() => Tail::new(kind, seed),
            _ => random_tail(r, seed),
        };
        Ok(MutationResult::Mutated)
    }

    fn post_exec(
        &mut self,
        _: &mut S,
        _: Option<libafl::corpus::CorpusId>,
    ) -> Result<(), libafl::Error> {
        Ok(())
    }
}

/// The tails a random retune draws from, equally likely.
const RANDOM_TAILS: [StrategyKind; 5] = [
    StrategyKind::pct(2),
    StrategyKind::pct(3),
    StrategyKind::Pos,
    StrategyKind::Random,
    StrategyKind::Default,
];

/// A tail strategy chosen at random (PCT of depth 2 or 3, POS, random walk,
/// or none).
pub fn random_tail<R: Rand>(r: &mut R, seed: u64) -> Tail {
    Tail::new(RANDOM_TAILS[r.below_or_zero(RANDOM_TAILS.len())], seed)
}

/// Joins the decisions of this schedule before a step with another corpus
/// entry's after it.
/// The tails a branch continues with, equally likely: the default policy
/// (twice as often), PCT of depth 1 and 2, a random walk or POS.
const BRANCH_TAILS: [StrategyKind; 6] = [
    StrategyKind::Default,
    StrategyKind::Default,
    StrategyKind::pct(1),
    StrategyKind::pct(2),
    StrategyKind::Random,
    StrategyKind::Pos,
];

/// Branches off a run that found a new interleaving: replays it up to the
/// switch that made one and continues with a fresh strategy: the default
/// policy (the thread switched to runs as far as it can), PCT, a random
/// walk or POS. Skips inputs whose runs found nothing new.
#[derive(Default)]
pub struct BranchAtNewInterleaving;
named!(BranchAtNewInterleaving, "branch-at-new-interleaving");

impl<S: HasRand + HasMetadata> Mutator<ScheduleInput, S> for BranchAtNewInterleaving {
    fn mutate(
        &mut self,
        state: &mut S,
        input: &mut ScheduleInput,
    ) -> Result<MutationResult, libafl::Error> {
        let key = fingerprint(input);
        let Some(lineage) = state
            .metadata::<Lineages>()
            .ok()
            .and_then(|l| l.by_input.get(&key))
            .cloned()
        else {
            return Ok(MutationResult::Skipped);
        };
        let r = state.rand_mut();
        let at = lineage.new_switches[below(r, lineage.new_switches.len())];
        input.decisions = lineage
            .decisions
            .iter()
            .copied()
            .filter(|d| d.step < at.step)
            .chain(std::iter::once(at))
            .collect();
        let seed = r.next();
        input.tail = Tail::new(BRANCH_TAILS[r.below_or_zero(BRANCH_TAILS.len())], seed);
        input.normalize();
        Ok(MutationResult::Mutated)
    }

    fn post_exec(
        &mut self,
        _: &mut S,
        _: Option<libafl::corpus::CorpusId>,
    ) -> Result<(), libafl::Error> {
        Ok(())
    }
}

#[derive(Default)]
pub struct SpliceSchedules;
named!(SpliceSchedules, "splice-schedules");

impl<S> Mutator<ScheduleInput, S> for SpliceSchedules
where
    S: HasRand + HasMetadata + HasCorpus<ScheduleInput>,
{
    fn mutate(
        &mut self,
        state: &mut S,
        input: &mut ScheduleInput,
    ) -> Result<MutationResult, libafl::Error> {
        let n = state.corpus().count();
        if n < 2 {
            return Ok(MutationResult::Skipped);
        }
        let nth = below(state.rand_mut(), n);
        let id = state.corpus().nth(nth);
        let other = {
            let mut tc = state.corpus().get(id)?.borrow_mut();
            let i = tc.load_input(state.corpus())?;
            i.clone()
        };
        let cut = pick_step(state);
        input.decisions.retain(|d| d.step < cut);
        input
            .decisions
            .extend(other.decisions.iter().filter(|d| d.step >= cut));
        if state.rand_mut().coinflip(0.5) {
            input.tail = other.tail;
        }
        input.normalize();
        Ok(MutationResult::Mutated)
    }

    fn post_exec(
        &mut self,
        _: &mut S,
        _: Option<libafl::corpus::CorpusId>,
    ) -> Result<(), libafl::Error> {
        Ok(())
    }
}

/// The stage's mutator: usually havoc (a stack of the mutators above) on a
/// corpus entry, sometimes (`fresh` of the time) a fresh start from a
/// strategy alone, as `--strategy-mix` says.
pub struct MixMutator<H> {
    pub fresh: f64,
    /// Strategies a fresh start may use (PCT with a depth of 2 or 3).
    pub kinds: Vec<StrategyKind>,
    pub target: u64,
    pub havoc: H,
}

impl<H> Named for MixMutator<H> {
    fn name(&self) -> &Cow<'static, str> {
        static NAME: Cow<'static, str> = Cow::Borrowed("strategy-mix");
        &NAME
    }
}

impl<H, S> Mutator<ScheduleInput, S> for MixMutator<H>
where
    H: Mutator<ScheduleInput, S>,
    S: HasRand + HasMetadata,
{
    fn mutate(
        &mut self,
        state: &mut S,
        input: &mut ScheduleInput,
    ) -> Result<MutationResult, libafl::Error> {
        let result = self.mutate_any(state, input)?;
        // Decisions up to a pinned step (a fork's) are dropped: the run
        // makes them as pinned.
        let pinned = state.metadata::<RunProfile>().map_or(0, |p| p.pinned);
        if pinned > 0 {
            input.decisions.retain(|d| d.step > pinned);
        }
        Ok(result)
    }

    fn post_exec(
        &mut self,
        state: &mut S,
        id: Option<libafl::corpus::CorpusId>,
    ) -> Result<(), libafl::Error> {
        self.havoc.post_exec(state, id)
    }
}

impl<H> MixMutator<H> {
    fn mutate_any<S>(
        &mut self,
        state: &mut S,
        input: &mut ScheduleInput,
    ) -> Result<MutationResult, libafl::Error>
    where
        H: Mutator<ScheduleInput, S>,
        S: HasRand + HasMetadata,
    {
        let r = state.rand_mut();
        if !self.kinds.is_empty() && r.coinflip(self.fresh) {
            let seed = r.next();
            let kind = self.kinds[below(r, self.kinds.len())];
            let depth = 2 + r.below_or_zero(2) as u32;
            *input = ScheduleInput::fresh(self.target, Tail::new(kind.with_parameter(depth), seed));
            return Ok(MutationResult::Mutated);
        }
        // Half the time, explore beyond what this entry found first.
        if state.rand_mut().coinflip(0.5)
            && BranchAtNewInterleaving.mutate(state, input)? == MutationResult::Mutated
        {
            return Ok(MutationResult::Mutated);
        }
        let result = self.havoc.mutate(state, input)?;
        // The prefix is what the corpus taught; past it, explore anew: a
        // tail that replayed its old seed would mostly retread its parent.
        let r = state.rand_mut();
        if r.coinflip(0.5) {
            let seed = r.next();
            input.tail = input.tail.reseeded(seed);
        }
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use libafl::HasMetadata;
    use libafl::mutators::HavocScheduledMutator;
    use libafl::state::NopState;
    use libafl_bolts::tuples::tuple_list;

    use super::*;

    #[test]
    fn a_pinned_session_places_and_keeps_decisions_after_the_pinned_steps() {
        let mut state = NopState::<ScheduleInput>::new();
        state.add_metadata(RunProfile {
            first_step: 5,
            max_step: 300,
            threads: vec![1, 2, 3],
            pinned: 200,
        });
        let havoc = HavocScheduledMutator::new(tuple_list!(
            InsertPreemption,
            RemovePreemption,
            MovePreemption,
            RetargetPreemption
        ));
        let mut m = MixMutator {
            fresh: 0.1,
            kinds: vec![StrategyKind::Random],
            target: 0,
            havoc,
        };
        let mut input = ScheduleInput::fresh(0, Tail::new(StrategyKind::Random, 1));
        let mut placed = 0;
        for _ in 0..2000 {
            m.mutate(&mut state, &mut input).unwrap();
            assert!(
                input.decisions.iter().all(|d| d.step > 200),
                "{:?}",
                input.decisions
            );
            placed += input.decisions.len();
        }
        assert!(placed > 0, "mutations place decisions after the pin");
        // Placed there in the first place, not only kept there: a
        // preemption inserted alone (nothing drops it afterwards) comes
        // after the pin every time.
        let mut alone = ScheduleInput::fresh(0, Tail::new(StrategyKind::Random, 1));
        for _ in 0..500 {
            InsertPreemption.mutate(&mut state, &mut alone).unwrap();
        }
        assert!(
            alone.decisions.iter().all(|d| d.step > 200),
            "{:?}",
            alone.decisions
        );
    }
}
