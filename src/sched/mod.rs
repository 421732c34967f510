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
pub use random::{RandomWalk, splitmix64};
pub use schedule::{Decision, Replay, Schedule, ScheduleError};

use crate::kernel::Tid;

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

/// The next runnable thread after `after` in thread-id order, wrapping.
pub fn round_robin_after(after: Tid, runnable: &[Tid]) -> Tid {
    *runnable
        .iter()
        .find(|t| **t > after)
        .unwrap_or(&runnable[0])
}

/// The default policy: run the current thread until it blocks or yields,
/// then the next one in thread-id order. No preemption, like a uniprocessor
/// with cooperative threads.
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
        "default".into()
    }

    fn pick(&mut self, v: &SchedView) -> Tid {
        Self::choose(v)
    }

    fn horizon(&mut self, _: &SchedView) -> u64 {
        u64::MAX
    }
}

/// A strategy as the command line names it: `default`, `random`, `pct:D`
/// (optionally `pct:D:K` with K the expected number of steps), `pos`, or
/// `schedule:FILE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StrategySpec {
    Default,
    Random,
    Pct { depth: u32, steps: Option<u64> },
    Pos,
    Schedule(std::path::PathBuf),
}

impl std::str::FromStr for StrategySpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "unknown strategy {s:?}: use default, random, pct:D (D >= 1, optionally pct:D:STEPS), pos or schedule:FILE"
            )
        };
        Ok(match s {
            "default" => StrategySpec::Default,
            "random" => StrategySpec::Random,
            "pos" => StrategySpec::Pos,
            _ if s.starts_with("schedule:") => {
                StrategySpec::Schedule(s["schedule:".len()..].into())
            }
            _ if s.starts_with("pct:") => {
                let mut parts = s["pct:".len()..].split(':');
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
                StrategySpec::Pct { depth, steps }
            }
            _ => return Err(bad()),
        })
    }
}

impl std::fmt::Display for StrategySpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StrategySpec::Default => write!(f, "default"),
            StrategySpec::Random => write!(f, "random"),
            StrategySpec::Pct { depth, steps: None } => write!(f, "pct:{depth}"),
            StrategySpec::Pct {
                depth,
                steps: Some(k),
            } => write!(f, "pct:{depth}:{k}"),
            StrategySpec::Pos => write!(f, "pos"),
            StrategySpec::Schedule(p) => write!(f, "schedule:{}", p.display()),
        }
    }
}

impl StrategySpec {
    /// Whether the strategy needs to know how many steps a run takes (PCT
    /// spreads its change points over them).
    pub fn needs_step_estimate(&self) -> bool {
        matches!(self, StrategySpec::Pct { steps: None, .. })
    }

    /// Makes the strategy for one run. `seed` picks the run's random
    /// choices; `steps` estimates a run's length for PCT.
    pub fn build(&self, seed: u64, steps: u64) -> Result<Box<dyn Strategy>, ScheduleError> {
        Ok(match self {
            StrategySpec::Default => Box::new(RunUntilBlocked),
            StrategySpec::Random => Box::new(RandomWalk::new(seed)),
            StrategySpec::Pct { depth, steps: k } => {
                Box::new(Pct::new(*depth, k.unwrap_or(steps), seed))
            }
            StrategySpec::Pos => Box::new(Pos::new(seed)),
            StrategySpec::Schedule(p) => Box::new(Replay::new(Schedule::load(p)?)),
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
    fn strategies_parse_as_the_command_line_writes_them() {
        assert_eq!(
            "pct:3".parse(),
            Ok(StrategySpec::Pct {
                depth: 3,
                steps: None
            })
        );
        assert_eq!(
            "pct:2:500".parse(),
            Ok(StrategySpec::Pct {
                depth: 2,
                steps: Some(500)
            })
        );
        assert_eq!("pos".parse(), Ok(StrategySpec::Pos));
        assert!("pct:0".parse::<StrategySpec>().is_err());
        assert!("fast".parse::<StrategySpec>().is_err());
        for s in ["default", "random", "pct:2", "pos", "schedule:/tmp/x"] {
            assert_eq!(s.parse::<StrategySpec>().unwrap().to_string(), s);
        }
    }
}
