//! POS, partial order sampling (Yuan, Yang, Gu, CAV 2018), adapted to
//! scheduling points.
//!
//! Every thread's next event carries a random priority and the
//! highest-priority runnable thread runs. After a thread's step on an object
//! (a lock, a futex word), every thread whose pending event touches the same
//! object gets a fresh priority, as do the thread that stepped: events that
//! race are re-ordered at random, independent ones keep their relative
//! order. This samples partial orders far more uniformly than a random walk.
//!
//! A thread spinning in a `sched_yield` loop redraws its priority at every
//! step while the thread it waits for keeps one draw; a low one would starve
//! for thousands of steps. A spinner (`SpinWatch`) gets the lowest priority
//! instead, so the others run first; among spinners (two threads waiting
//! for each other with yields, a barrier built from them) the one that
//! started spinning last goes last, so they take turns rather than the
//! lower thread id winning every tie. A runnable thread that waited
//! `STARVATION_BOUND` steps runs anyway, for a slice.

use std::collections::BTreeMap;

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

use super::{SchedView, SpinWatch, StarveWatch, Strategy};
use crate::ids::Tid;

pub struct Pos {
    rng: ChaCha8Rng,
    priorities: BTreeMap<Tid, u64>,
    spin: SpinWatch,
    /// Breaks ties between spinners (priority 0): later spinners rank lower.
    spin_rank: BTreeMap<Tid, u64>,
    next_rank: u64,
    starve: StarveWatch,
}

impl Pos {
    pub fn new(seed: u64) -> Self {
        Pos {
            rng: ChaCha8Rng::seed_from_u64(seed),
            priorities: BTreeMap::new(),
            spin: SpinWatch::default(),
            spin_rank: BTreeMap::new(),
            next_rank: u64::MAX - 1,
            starve: StarveWatch::default(),
        }
    }
}

impl Strategy for Pos {
    fn name(&self) -> String {
        "pos".into()
    }

    fn pick(&mut self, v: &SchedView) -> Tid {
        // The stepping thread's event happened: its next one is new, and
        // events racing with it (same object) are re-drawn.
        let obj = v.objects.get(&v.current).copied();
        let racing: Vec<Tid> = match obj {
            Some(o) => v
                .objects
                .iter()
                .filter(|(_, x)| **x == o)
                .map(|(t, _)| *t)
                .collect(),
            None => Vec::new(),
        };
        self.priorities.remove(&v.current);
        for t in racing {
            self.priorities.remove(&t);
        }
        if self.spin.spinning(v) {
            self.priorities.insert(v.current, 0);
            self.spin_rank.insert(v.current, self.next_rank);
            self.next_rank -= 1;
        }
        let starved = self.starve.due(v);
        let rng = &mut self.rng;
        let mut best = None;
        for &t in v.runnable {
            let p = *self.priorities.entry(t).or_insert_with(|| rng.next_u64());
            let rank = self.spin_rank.get(&t).copied().unwrap_or(u64::MAX);
            if best.is_none_or(|(_, bp)| (p, rank) > bp) {
                best = Some((t, (p, rank)));
            }
        }
        starved.unwrap_or(best.expect("runnable is never empty").0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::tests::assert_spinner_hands_over;

    #[test]
    fn a_spinning_thread_lets_the_one_it_waits_for_run() {
        // Thread 2 drew the lowest priority there is; thread 1 spins with
        // yields, redrawing each time, and keeps winning until it counts
        // as a spinner.
        let mut p = Pos::new(9);
        p.priorities.insert(Tid(2), 1);
        assert_spinner_hands_over(&mut p);
    }

    #[test]
    fn two_spinners_take_turns() {
        // Thread 2 spun before (priority 0); now thread 1 spins too: the
        // later spinner must not win the tie for good.
        let mut p = Pos::new(3);
        let (all, o) = ([Tid(1), Tid(2)], BTreeMap::new());
        p.priorities.insert(Tid(2), 0);
        p.spin_rank.insert(Tid(2), u64::MAX - 1);
        p.next_rank = u64::MAX - 2;
        let mut picked = Vec::new();
        for _ in 0..super::super::SPIN_YIELDS {
            picked.push(p.pick(&crate::sched::tests::view(1, true, true, &all, &o)));
        }
        assert_eq!(picked.last(), Some(&Tid(2)), "{picked:?}");
    }
}
