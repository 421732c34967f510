//! PCT, probabilistic concurrency testing (Burckhardt, Kothari, Musuvathi,
//! Nagarakatte, ASPLOS 2010).
//!
//! Threads get distinct random priorities (at least `depth`) when they first
//! appear; `depth - 1` change points are drawn uniformly from the expected
//! number of decision points (steps where two or more threads can run); the
//! highest-priority runnable thread always runs, and when the running thread
//! reaches the i-th change point its priority drops to i, below every
//! initial one. A bug of depth d is found with
//! probability at least 1/(n k^(d-1)) per run.
//!
//! A thread that yields (`sched_yield`) drops below every other initial
//! priority, so the others take their turn, but stays above the threads a
//! change point demoted: that is how a demoted thread stays off the CPU
//! while the others come round (the dining philosophers' deadlock). A
//! thread that yields again and again with no other thread running in
//! between is spinning, waiting for one of those: after `SPIN_YIELDS` such
//! yields it drops below every thread, or a correct spin-with-yield wait
//! would spin forever and be reported hung.
//!
//! A thread that never blocks or yields (polling in a loop of work and
//! atomics) is treated the same way through its time slice: using one up
//! is a yield, using up two in a row (no other thread ran between) a spin.
//! A runnable thread that waited `STARVATION_BOUND` steps runs anyway, for
//! a slice: priorities order threads, they never starve one for good.

use std::collections::BTreeMap;

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

use super::{SchedView, SliceWatch, SpinWatch, StarveWatch, Strategy, splitmix64};
use crate::ids::Tid;

/// Initial priorities lie above this; yielding threads just below it.
const INITIAL_BASE: u64 = 1 << 62;
/// Change points set priorities just above this, below every yielding
/// thread's; spinning threads go below it.
const CHANGE_BASE: u64 = 1 << 40;

pub struct Pct {
    depth: u32,
    seed: u64,
    /// Priorities that changed (change points, yields); the others are the
    /// initial ones.
    priorities: BTreeMap<Tid, u64>,
    /// The priority the next yielding thread drops to (below every initial
    /// one, each yielder below the previous).
    next_yielder: u64,
    /// The priority the next spinning thread drops to (below every other).
    next_spinner: u64,
    spin: SpinWatch,
    slice: SliceWatch,
    starve: StarveWatch,
    /// Change points, by decision index, with the priority each one sets.
    change_points: BTreeMap<u64, u64>,
    /// Decisions taken so far.
    index: u64,
}

impl Pct {
    /// `steps` is the expected number of decision points of a run.
    pub fn new(depth: u32, steps: u64, seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut change_points = BTreeMap::new();
        let k = steps.max(1);
        let wanted = (depth.saturating_sub(1) as u64).min(k);
        let mut i = 1;
        while (change_points.len() as u64) < wanted {
            let at = rng.next_u64() % k;
            if let std::collections::btree_map::Entry::Vacant(e) = change_points.entry(at) {
                e.insert(i);
                i += 1;
            }
        }
        Pct {
            depth,
            seed,
            priorities: BTreeMap::new(),
            next_yielder: INITIAL_BASE - 1,
            next_spinner: CHANGE_BASE - 1,
            spin: SpinWatch::default(),
            slice: SliceWatch::default(),
            starve: StarveWatch::default(),
            change_points,
            index: 0,
        }
    }

    /// A thread's priority: its initial one is a function of the seed and
    /// the thread alone, so asking (for a horizon, say) changes nothing.
    fn priority(&self, t: Tid) -> u64 {
        match self.priorities.get(&t) {
            Some(p) => *p,
            None => INITIAL_BASE + (splitmix64(self.seed ^ splitmix64(t.0 as u64)) >> 2),
        }
    }

    /// The runnable thread with the highest priority.
    fn highest(&self, runnable: &[Tid]) -> Tid {
        *runnable
            .iter()
            .max_by_key(|t| (self.priority(**t), std::cmp::Reverse(**t)))
            .expect("runnable is never empty")
    }
}

impl Strategy for Pct {
    fn name(&self) -> String {
        format!("pct:{}", self.depth)
    }

    fn horizon(&mut self, v: &SchedView) -> u64 {
        // A thread run because it was starved keeps the CPU to the end of
        // its slice, whatever its priority or its steps.
        if let Some(until) = self.starve.boost_of(v.current) {
            return until.max(v.step + 1);
        }
        // The current thread keeps running while it has the highest
        // priority, and priorities change only at change points (and
        // yields, which are system calls). After a schedule prefix it may
        // not be the highest: then the next step switches.
        if self.highest(v.runnable) != v.current {
            return v.step + 1;
        }
        let change = match self.change_points.range(self.index..).next() {
            Some((at, _)) => v.step + 1 + (at - self.index),
            None => u64::MAX,
        };
        change
            .min(self.slice.ends_at(v))
            .min(self.starve.next_due(v))
    }

    fn pick(&mut self, v: &SchedView) -> Tid {
        let index = self.index;
        self.index += 1;
        let expired = self.slice.expired(v);
        let spinning = self.spin.spinning(v) || (expired && self.slice.in_a_row() >= 2);
        let gave_way = v.yielded || expired;
        if let Some(p) = self.change_points.get(&index).copied() {
            self.priorities.insert(v.current, CHANGE_BASE + p);
        } else if spinning {
            self.priorities.insert(v.current, self.next_spinner);
            self.next_spinner -= 1;
        } else if gave_way && self.priority(v.current) > CHANGE_BASE + self.depth as u64 {
            self.priorities.insert(v.current, self.next_yielder);
            self.next_yielder -= 1;
        }
        match self.starve.due(v) {
            Some(starved) => starved,
            None => self.highest(v.runnable),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::tests::{assert_spinner_hands_over, view};

    #[test]
    fn the_highest_priority_thread_runs_until_a_change_point() {
        let all = [Tid(1), Tid(2)];
        let o = BTreeMap::new();
        let mut p = Pct::new(2, 10, 7);
        let cp = *p.change_points.keys().next().unwrap();
        let first = p.pick(&view(1, true, false, &all, &o));
        for step in 1..cp {
            let mut v = view(first.0, true, false, &all, &o);
            v.step = step;
            assert_eq!(p.pick(&v), first, "no change before step {cp}");
        }
        let mut v = view(first.0, true, false, &all, &o);
        v.step = cp;
        assert_ne!(
            p.pick(&v),
            first,
            "the change point demotes the running thread"
        );
    }

    #[test]
    fn a_yielding_thread_lets_the_others_run() {
        let all = [Tid(1), Tid(2), Tid(3)];
        let o = BTreeMap::new();
        let mut p = Pct::new(1, 100, 3);
        let top = p.pick(&view(1, true, false, &all, &o));
        let mut seen = vec![top];
        let mut cur = top;
        for _ in 0..2 {
            cur = p.pick(&view(cur.0, true, true, &all, &o));
            seen.push(cur);
        }
        seen.sort();
        assert_eq!(
            seen,
            all.to_vec(),
            "each yield hands over to the next thread"
        );
    }

    #[test]
    fn depth_one_never_changes_priorities() {
        assert!(Pct::new(1, 100, 1).change_points.is_empty());
        assert_eq!(Pct::new(3, 100, 1).change_points.len(), 2);
    }

    #[test]
    fn a_spinning_thread_goes_below_one_a_change_point_demoted() {
        // Thread 2 was demoted at a change point; thread 1 spins with yields
        // waiting for it: a yield keeps thread 2 off the CPU, a spin must not.
        let mut p = Pct::new(2, 10, 5);
        p.priorities.insert(Tid(2), CHANGE_BASE + 1);
        p.change_points.clear();
        let (all, o) = ([Tid(1), Tid(2)], BTreeMap::new());
        assert_eq!(p.pick(&view(1, true, false, &all, &o)), Tid(1));
        assert_spinner_hands_over(&mut p);
    }
}
