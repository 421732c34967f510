//! Scheduling: at every step a strategy chooses which runnable thread runs
//! next. The kernel says who can run; only the strategy says who does.
//!
//! Every run records the decisions its strategy took wherever they differ
//! from the default policy's ([`RunUntilBlocked`]); replaying those decisions
//! ([`Replay`]) gives the same run. That record is a [`Schedule`], the
//! fuzzer's input and what a reproducer carries.

mod pct;
mod pos;
mod prefixed;
mod random;
mod schedule;

use std::collections::BTreeMap;

pub use pct::Pct;
pub use pos::Pos;
pub use prefixed::{Prefixed, default_tail};
pub use random::{GOLDEN_GAMMA, RandomWalk, mix64, splitmix64};
pub use schedule::{
    Decision, MAX_SCHEDULE_FILE, Replay, SCHEDULE_VERSION, Schedule, ScheduleError,
    schedule_version_for,
};

use crate::ids::Tid;

/// What a strategy sees at a scheduling point.
#[derive(Debug)]
pub struct SchedView<'a> {
    /// The step just taken.
    pub step: u64,
    /// The thread that took it.
    pub current: Tid,
    /// Whether that thread can go on running.
    pub current_runnable: bool,
    /// Whether it asked to give up the CPU (`sched_yield`).
    pub yielded: bool,
    /// Whether the thread used up its time slice computing: the step was
    /// its [`TICKS_PER_SLICE`]-th tick in a row (see `code::sites::trampoline`).
    /// The ticks before are no decision points: a strategy is never asked
    /// in the middle of a computation, only at its slice's end.
    pub slice_computed: bool,
    /// Every runnable thread, in thread-id order (never empty).
    pub runnable: &'a [Tid],
    /// The object (lock, futex word) of each thread's last step, if any.
    pub objects: &'a BTreeMap<Tid, u64>,
}

/// A scheduling policy.
pub trait Strategy: Send {
    /// Its name as the command line spells it.
    fn name(&self) -> String;
    /// Chooses the next thread; must be one of `view.runnable`.
    fn pick(&mut self, view: &SchedView) -> Tid;
    /// A step before which `pick` will keep choosing `view.current`,
    /// provided the runnable threads stay the same: the shim may then take
    /// the steps in between without leaving the guest. Earlier is always
    /// safe; the default, `view.step + 1`, means "ask me at every step".
    /// `pick` is still called for every step, in order.
    fn horizon(&mut self, view: &SchedView) -> u64 {
        view.step + 1
    }
}

/// Yields in a row, no other thread running in between, that make a
/// thread a spinner.
pub const SPIN_YIELDS: u32 = 8;

/// Spots a thread spinning in a `sched_yield` loop. Priority strategies
/// (PCT, POS) can keep the thread it waits for off the CPU for good, and a
/// correct spin-with-yield wait would then spin until the step budget and be
/// reported hung; they drop a spinner below every other thread instead.
#[derive(Clone, Debug, Default)]
pub struct SpinWatch {
    thread: Option<Tid>,
    yields: u32,
}

impl SpinWatch {
    /// Notes the decision `v`; true when its thread just yielded for the
    /// `SPIN_YIELDS`-th time (or more) in a row.
    pub fn spinning(&mut self, v: &SchedView) -> bool {
        if self.thread != Some(v.current) {
            *self = SpinWatch {
                thread: Some(v.current),
                yields: 0,
            };
        }
        if v.yielded {
            self.yields += 1;
        }
        v.yielded && self.yields >= SPIN_YIELDS
    }
}

/// Steps in a row a thread may take while another thread waits to run,
/// before the default strategy (and PCT) hands the CPU on: a time slice
/// counted in steps. A thread polling in a loop of work and atomics never
/// blocks or yields; an operating system would preempt it when its slice
/// ran out, and without one the thread it waits for never runs.
pub const TIME_SLICE: u32 = 1000;

/// Ticks in a row (computation, about 1 ms of virtual time each) that use
/// up a thread's time slice. Only the last is a decision point: a long
/// computation is preempted at its slice's end as an operating system
/// would, a short one (a worker's job of a few ticks) runs to its end, and
/// strategies that may switch at any decision (random walks, PCT's change
/// points) are not offered a point in every stretch of arithmetic, where
/// they would stagger threads a bug needs started together.
pub const TICKS_PER_SLICE: u32 = 50;

/// Counts the steps a thread has taken in a row while another thread was
/// runnable (the steps at which a strategy is asked at all).
#[derive(Clone, Debug, Default)]
pub struct SliceWatch {
    thread: Option<Tid>,
    used: u32,
    /// Slices the thread used up with no other thread running between.
    in_a_row: u32,
}

impl SliceWatch {
    /// Notes the decision `v`; true when its thread has just used up its
    /// slice (the count starts again).
    pub fn expired(&mut self, v: &SchedView) -> bool {
        if self.thread != Some(v.current) {
            *self = SliceWatch {
                thread: Some(v.current),
                ..SliceWatch::default()
            };
        }
        self.used += 1;
        if self.used < TIME_SLICE && !v.slice_computed {
            return false;
        }
        self.used = 0;
        self.in_a_row += 1;
        true
    }

    /// How many slices in a row the thread has used up, no other thread
    /// running between: from the second on, it is waiting for a thread
    /// the strategy keeps off the CPU.
    pub fn in_a_row(&self) -> u32 {
        self.in_a_row
    }

    /// The first step at which [`SliceWatch::expired`] may say true for
    /// the thread `v.current`, if asked at every step from `v.step + 1`.
    pub fn ends_at(&self, v: &SchedView) -> u64 {
        let used = if self.thread == Some(v.current) {
            self.used
        } else {
            0
        };
        v.step + u64::from(TIME_SLICE - used)
    }
}

/// Steps a runnable thread may wait, others running, before a priority
/// strategy (PCT, POS) runs it anyway for a time slice. Priorities can keep
/// a thread off the CPU for good while the others never block (a stealer
/// preempted inside an epoch-pinned section while the owner and the other
/// stealers poll): no operating system starves a runnable thread forever,
/// and a correct program that needs it to run would fail. The bound is
/// long enough that a low priority still means "runs late".
pub const STARVATION_BOUND: u64 = 2 * TIME_SLICE as u64;

/// Tracks how long each runnable thread has waited, for
/// [`STARVATION_BOUND`].
#[derive(Clone, Debug, Default)]
pub struct StarveWatch {
    /// The step since which each runnable thread other than the current
    /// one has waited.
    waiting_since: BTreeMap<Tid, u64>,
    /// The starved thread given the CPU, and the step its slice ends.
    boosted: Option<(Tid, u64)>,
}

impl StarveWatch {
    /// Notes the decision `v`; the thread that must run now because it
    /// waited too long, if any.
    pub fn due(&mut self, v: &SchedView) -> Option<Tid> {
        self.waiting_since.remove(&v.current);
        self.waiting_since
            .retain(|t, _| v.runnable.binary_search(t).is_ok());
        for &t in v.runnable {
            if t != v.current {
                self.waiting_since.entry(t).or_insert(v.step);
            }
        }
        if let Some((t, until)) = self.boosted {
            if v.step < until && v.runnable.binary_search(&t).is_ok() {
                return Some(t);
            }
            self.boosted = None;
        }
        let (&t, _) = self
            .waiting_since
            .iter()
            .filter(|(_, since)| v.step - **since >= STARVATION_BOUND)
            .min_by_key(|(t, since)| (**since, **t))?;
        self.boosted = Some((t, v.step + u64::from(TIME_SLICE)));
        Some(t)
    }

    /// The step the slice of `t` ends, when it runs because it was starved:
    /// until then [`StarveWatch::due`] names it, whatever it does.
    pub fn boost_of(&self, t: Tid) -> Option<u64> {
        self.boosted
            .filter(|(b, _)| *b == t)
            .map(|(_, until)| until)
    }

    /// The first step at which [`StarveWatch::due`] may name a thread
    /// other than `v.current`, if asked at every step from `v.step + 1`.
    pub fn next_due(&self, v: &SchedView) -> u64 {
        // A boosted thread keeps the CPU to the end of its slice: nothing
        // else is named before.
        match self.boosted {
            Some((t, until)) if t == v.current => return until.max(v.step + 1),
            Some(_) => return v.step + 1,
            None => {}
        }
        v.runnable
            .iter()
            .filter(|t| **t != v.current)
            .map(|t| self.waiting_since.get(t).copied().unwrap_or(v.step) + STARVATION_BOUND)
            .min()
            .unwrap_or(u64::MAX)
    }
}

/// The next runnable thread after `after` in thread-id order, wrapping.
pub fn round_robin_after(after: Tid, runnable: &[Tid]) -> Tid {
    *runnable
        .iter()
        .find(|t| **t > after)
        .unwrap_or(&runnable[0])
}

/// The default policy: run the current thread until it blocks or yields,
/// then the next one in thread-id order. No preemption, like a uniprocessor
/// with cooperative threads. Schedules record where a run differed from
/// it; the default *strategy* adds time slices ([`TimeSliced`]).
#[derive(Debug, Default, Clone)]
pub struct RunUntilBlocked;

impl RunUntilBlocked {
    /// The default choice, as a function of the view.
    pub fn choose(v: &SchedView) -> Tid {
        if v.current_runnable && !v.yielded {
            return v.current;
        }
        round_robin_after(v.current, v.runnable)
    }
}

impl Strategy for RunUntilBlocked {
    fn name(&self) -> String {
        "run-until-blocked".into()
    }

    fn pick(&mut self, v: &SchedView) -> Tid {
        Self::choose(v)
    }

    fn horizon(&mut self, _: &SchedView) -> u64 {
        u64::MAX
    }
}

/// The default strategy: the default policy with a time slice. A thread
/// that has taken [`TIME_SLICE`] steps in a row while another waited gives
/// way to the next in thread-id order. Schedules record decisions against
/// the policy without slices ([`RunUntilBlocked`]), so a slice's end is a
/// recorded decision like any preemption and replays need no clock.
#[derive(Debug, Default, Clone)]
pub struct TimeSliced {
    slice: SliceWatch,
}

impl Strategy for TimeSliced {
    fn name(&self) -> String {
        "default".into()
    }

    fn pick(&mut self, v: &SchedView) -> Tid {
        if self.slice.expired(v) {
            return round_robin_after(v.current, v.runnable);
        }
        RunUntilBlocked::choose(v)
    }

    fn horizon(&mut self, v: &SchedView) -> u64 {
        self.slice.ends_at(v)
    }
}

/// A strategy and its parameters, without the seed that makes one run of
/// it: what the command line names (`pct:3`), what a bench column runs and
/// what a fuzzer input continues with after its decisions. A new strategy
/// is a new variant here and nowhere else.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StrategyKind {
    /// Run each thread until it blocks, yields or uses up its time slice.
    Default,
    /// A random walk.
    Random,
    /// PCT of this depth, its change points spread over `steps` decision
    /// points (a default run's count when `None`).
    Pct { depth: u32, steps: Option<u64> },
    /// Partial order sampling.
    Pos,
}

impl StrategyKind {
    /// PCT of `depth`, over a default run's decision points.
    pub const fn pct(depth: u32) -> Self {
        StrategyKind::Pct { depth, steps: None }
    }

    /// The strategy's name without parameters, as `--strategy-mix` lists
    /// families: `default`, `random`, `pct`, `pos`.
    pub fn family(self) -> &'static str {
        match self {
            StrategyKind::Default => "default",
            StrategyKind::Random => "random",
            StrategyKind::Pct { .. } => "pct",
            StrategyKind::Pos => "pos",
        }
    }

    /// A family by name (`pct` with its smallest interesting depth, 2).
    pub fn from_family(name: &str) -> Option<Self> {
        [
            StrategyKind::Default,
            StrategyKind::Random,
            StrategyKind::pct(2),
            StrategyKind::Pos,
        ]
        .into_iter()
        .find(|k| k.family() == name)
    }

    /// Whether runs differ by seed (all but the default policy).
    pub fn is_seeded(self) -> bool {
        self != StrategyKind::Default
    }

    /// The strategy's tunable parameter, if it has one (PCT's depth).
    pub fn parameter(self) -> Option<u32> {
        match self {
            StrategyKind::Pct { depth, .. } => Some(depth),
            _ => None,
        }
    }

    /// The same strategy with its tunable parameter set to `p` (unchanged
    /// when it has none).
    pub fn with_parameter(self, p: u32) -> Self {
        match self {
            StrategyKind::Pct { steps, .. } => StrategyKind::Pct { depth: p, steps },
            k => k,
        }
    }

    /// Whether the strategy needs to know how many decision points a run
    /// has (PCT spreads its change points over them).
    pub fn needs_step_estimate(self) -> bool {
        matches!(self, StrategyKind::Pct { steps: None, .. })
    }

    /// Makes the strategy for one run. `seed` picks the run's random
    /// choices; `estimate` is a default run's decision points (for PCT).
    pub fn build(self, seed: u64, estimate: u64) -> Box<dyn Strategy> {
        match self {
            StrategyKind::Default => Box::new(TimeSliced::default()),
            StrategyKind::Random => Box::new(RandomWalk::new(seed)),
            StrategyKind::Pct { depth, steps } => {
                Box::new(Pct::new(depth, steps.unwrap_or(estimate).max(1), seed))
            }
            StrategyKind::Pos => Box::new(Pos::new(seed)),
        }
    }
}

impl std::str::FromStr for StrategyKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "unknown strategy {s:?}: use default, random, pct:D (D >= 1, optionally pct:D:STEPS) or pos"
            )
        };
        if let Some(rest) = s.strip_prefix("pct:") {
            let mut parts = rest.split(':');
            let depth: u32 = parts
                .next()
                .and_then(|d| d.parse().ok())
                .filter(|d| *d >= 1)
                .ok_or_else(bad)?;
            let steps = match parts.next() {
                Some(k) => Some(k.parse::<u64>().ok().filter(|k| *k >= 1).ok_or_else(bad)?),
                None => None,
            };
            if parts.next().is_some() {
                return Err(bad());
            }
            return Ok(StrategyKind::Pct { depth, steps });
        }
        match Self::from_family(s) {
            Some(k) if k.parameter().is_none() => Ok(k),
            _ => Err(bad()),
        }
    }
}

impl std::fmt::Display for StrategyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StrategyKind::Pct { depth, steps: None } => write!(f, "pct:{depth}"),
            StrategyKind::Pct {
                depth,
                steps: Some(k),
            } => write!(f, "pct:{depth}:{k}"),
            k => f.write_str(k.family()),
        }
    }
}

/// A strategy with the seed of one run: the fuzzer's tail after its
/// decisions. Written as `{"kind": "pct", "depth": 2, "seed": 9}` (the
/// default policy has no seed and is written `{"kind": "default"}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Seeded {
    pub kind: StrategyKind,
    /// 0 for strategies without randomness.
    pub seed: u64,
}

impl Seeded {
    /// `kind` with `seed` (dropped for a strategy without randomness, so
    /// two equal runs are one input).
    pub fn new(kind: StrategyKind, seed: u64) -> Self {
        Seeded {
            kind,
            seed: if kind.is_seeded() { seed } else { 0 },
        }
    }

    /// The same strategy with another seed.
    pub fn reseeded(self, seed: u64) -> Self {
        Seeded::new(self.kind, seed)
    }

    /// The strategy for one run.
    pub fn build(self, estimate: u64) -> Box<dyn Strategy> {
        self.kind.build(self.seed, estimate)
    }
}

/// How [`Seeded`] is written.
#[derive(serde::Serialize, serde::Deserialize)]
struct SeededWire {
    kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    depth: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    steps: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
}

impl serde::Serialize for Seeded {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let steps = match self.kind {
            StrategyKind::Pct { steps, .. } => steps,
            _ => None,
        };
        SeededWire {
            kind: self.kind.family().into(),
            depth: self.kind.parameter(),
            steps,
            seed: self.kind.is_seeded().then_some(self.seed),
        }
        .serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for Seeded {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let w = SeededWire::deserialize(d)?;
        let family = StrategyKind::from_family(&w.kind)
            .ok_or_else(|| D::Error::custom(format!("unknown strategy kind {:?}", w.kind)))?;
        let kind = match (family.parameter(), w.depth) {
            (Some(_), Some(p)) => match family.with_parameter(p) {
                StrategyKind::Pct { depth, .. } => StrategyKind::Pct {
                    depth,
                    steps: w.steps,
                },
                k => k,
            },
            (Some(_), None) => return Err(D::Error::missing_field("depth")),
            (None, _) => family,
        };
        let seed = match (kind.is_seeded(), w.seed) {
            (true, Some(s)) => s,
            (true, None) => return Err(D::Error::missing_field("seed")),
            (false, _) => 0,
        };
        Ok(Seeded { kind, seed })
    }
}

/// What `--strategy` names: a strategy, or `schedule:FILE` (replaying a
/// saved schedule).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StrategySpec {
    Kind(StrategyKind),
    Schedule(std::path::PathBuf),
    /// A schedule read already (from a reproducer), named by its file.
    Loaded(Box<Schedule>, std::path::PathBuf),
}

impl std::str::FromStr for StrategySpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if let Some(file) = s.strip_prefix("schedule:") {
            return Ok(StrategySpec::Schedule(file.into()));
        }
        s.parse().map(StrategySpec::Kind).map_err(|_| {
            format!(
                "unknown strategy {s:?}: use default, random, pct:D (D >= 1, optionally pct:D:STEPS), pos or schedule:FILE"
            )
        })
    }
}

impl std::fmt::Display for StrategySpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StrategySpec::Kind(k) => k.fmt(f),
            StrategySpec::Schedule(p) | StrategySpec::Loaded(_, p) => {
                write!(f, "schedule:{}", p.display())
            }
        }
    }
}

impl StrategySpec {
    /// Whether the strategy needs to know how many steps a run takes (PCT
    /// spreads its change points over them).
    pub fn needs_step_estimate(&self) -> bool {
        matches!(self, StrategySpec::Kind(k) if k.needs_step_estimate())
    }

    /// Makes the strategy for one run. `seed` picks the run's random
    /// choices; `steps` estimates a run's length for PCT.
    pub fn build(&self, seed: u64, steps: u64) -> Result<Box<dyn Strategy>, ScheduleError> {
        Ok(match self {
            StrategySpec::Kind(k) => k.build(seed, steps),
            StrategySpec::Schedule(p) => Box::new(Replay::new(Schedule::load(p)?)),
            StrategySpec::Loaded(s, _) => Box::new(Replay::new((**s).clone())),
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn view<'a>(
        current: u32,
        runnable: bool,
        yielded: bool,
        all: &'a [Tid],
        objects: &'a BTreeMap<Tid, u64>,
    ) -> SchedView<'a> {
        SchedView {
            step: 1,
            current: Tid(current),
            current_runnable: runnable,
            yielded,
            slice_computed: false,
            runnable: all,
            objects,
        }
    }

    /// Thread 1 yields again and again while thread 2, which `s` ranks
    /// below it, waits: `s` keeps thread 1 for `SPIN_YIELDS - 1` yields and
    /// hands over at the next.
    pub fn assert_spinner_hands_over(s: &mut dyn Strategy) {
        let all = [Tid(1), Tid(2)];
        let o = BTreeMap::new();
        for n in 1..SPIN_YIELDS {
            let picked = s.pick(&view(1, true, true, &all, &o));
            assert_eq!(picked, Tid(1), "yield {n} is not a spin yet");
        }
        let picked = s.pick(&view(1, true, true, &all, &o));
        assert_eq!(picked, Tid(2), "yield {SPIN_YIELDS} is a spin");
    }

    /// The longest any of three always-runnable threads, none of which
    /// ever blocks or yields, waits under `s` over `steps` steps.
    fn longest_wait(s: &mut dyn Strategy, steps: u64) -> u64 {
        let all = [Tid(1), Tid(2), Tid(3)];
        let o = BTreeMap::new();
        let mut current = Tid(1);
        let mut last_ran = BTreeMap::new();
        let mut longest = 0;
        for step in 1..=steps {
            let v = SchedView {
                step,
                current,
                current_runnable: true,
                yielded: false,
                slice_computed: false,
                runnable: &all,
                objects: &o,
            };
            current = s.pick(&v);
            let since = last_ran.insert(current, step).unwrap_or(0);
            longest = longest.max(step - since);
        }
        for t in all {
            longest = longest.max(steps - last_ran.get(&t).copied().unwrap_or(0));
        }
        longest
    }

    #[test]
    fn priority_strategies_never_starve_a_runnable_thread() {
        let steps = 4 * STARVATION_BOUND;
        for seed in 0..8 {
            // A change point early in the run demotes a thread below the
            // others' yields for good, but for the bound; two threads
            // starved at once take their slices in turn.
            let most = STARVATION_BOUND + u64::from(TIME_SLICE) + 2;
            let wait = longest_wait(&mut Pct::new(2, 10, seed), steps);
            assert!(wait <= most, "pct seed {seed}: {wait}");
            let wait = longest_wait(&mut Pos::new(seed), steps);
            assert!(wait <= most, "pos seed {seed}: {wait}");
        }
    }

    #[test]
    fn the_default_keeps_the_running_thread_until_it_blocks_or_yields() {
        let all = [Tid(1), Tid(2), Tid(3)];
        let o = BTreeMap::new();
        let mut s = RunUntilBlocked;
        assert_eq!(s.pick(&view(2, true, false, &all, &o)), Tid(2));
        assert_eq!(s.pick(&view(2, true, true, &all, &o)), Tid(3));
        assert_eq!(s.pick(&view(3, true, true, &all, &o)), Tid(1));
        let rest = [Tid(1)];
        assert_eq!(s.pick(&view(2, false, false, &rest, &o)), Tid(1));
    }

    #[test]
    fn the_default_strategy_hands_on_a_thread_that_used_up_its_slice() {
        let all = [Tid(1), Tid(2), Tid(3)];
        let o = BTreeMap::new();
        let mut s = TimeSliced::default();
        let mut v = view(2, true, false, &all, &o);
        for step in 1..u64::from(TIME_SLICE) {
            v.step = step;
            assert_eq!(s.pick(&v), Tid(2), "step {step}");
            assert_eq!(s.horizon(&v), u64::from(TIME_SLICE), "step {step}");
        }
        v.step = u64::from(TIME_SLICE);
        assert_eq!(s.pick(&v), Tid(3), "the slice is used up");
        // Thread 3 starts a slice of its own.
        let mut v = view(3, true, false, &all, &o);
        v.step = u64::from(TIME_SLICE) + 1;
        assert_eq!(s.pick(&v), Tid(3));
        assert_eq!(s.horizon(&v), v.step + u64::from(TIME_SLICE) - 1);
    }

    #[test]
    fn strategies_parse_as_the_command_line_writes_them() {
        assert_eq!(
            "pct:3".parse(),
            Ok(StrategySpec::Kind(StrategyKind::pct(3)))
        );
        assert_eq!(
            "pct:2:500".parse(),
            Ok(StrategySpec::Kind(StrategyKind::Pct {
                depth: 2,
                steps: Some(500)
            }))
        );
        assert_eq!("pos".parse(), Ok(StrategySpec::Kind(StrategyKind::Pos)));
        assert!("pct".parse::<StrategySpec>().is_err());
        assert!("pct:0".parse::<StrategySpec>().is_err());
        assert!("fast".parse::<StrategySpec>().is_err());
        for s in ["default", "random", "pct:2", "pos", "schedule:/tmp/x"] {
            assert_eq!(s.parse::<StrategySpec>().unwrap().to_string(), s);
        }
    }

    #[test]
    fn seeded_strategies_are_written_as_before_and_read_back() {
        let cases = [
            (
                Seeded::new(StrategyKind::pct(2), 9),
                r#"{"kind":"pct","depth":2,"seed":9}"#,
            ),
            (
                Seeded::new(StrategyKind::Default, 5),
                r#"{"kind":"default"}"#,
            ),
            (
                Seeded::new(StrategyKind::Random, 3),
                r#"{"kind":"random","seed":3}"#,
            ),
            (
                Seeded::new(StrategyKind::Pos, 4),
                r#"{"kind":"pos","seed":4}"#,
            ),
        ];
        for (s, json) in cases {
            assert_eq!(serde_json::to_string(&s).unwrap(), json);
            assert_eq!(serde_json::from_str::<Seeded>(json).unwrap(), s);
        }
        for bad in [
            r#"{"kind":"pct","seed":1}"#,
            r#"{"kind":"random"}"#,
            r#"{"kind":"fast","seed":1}"#,
        ] {
            assert!(serde_json::from_str::<Seeded>(bad).is_err(), "{bad}");
        }
    }
}
