//! The random walk: at every decision point, any runnable thread, uniformly.
//!
//! Each choice is a pure function of the seed and the decision's index (a
//! counter-based generator), so the walk can look ahead: it knows at which
//! future step it will first leave the current thread, and the shim can take
//! the steps before that without leaving the guest.

use super::{SchedView, Strategy};
use crate::ids::Tid;

/// How far ahead the walk looks for its next switch.
const LOOKAHEAD: u64 = 4096;

/// Picks uniformly among the runnable threads at every decision point.
pub struct RandomWalk {
    seed: u64,
    /// Decisions taken so far.
    index: u64,
}

impl RandomWalk {
    pub fn new(seed: u64) -> Self {
        RandomWalk { seed, index: 0 }
    }

    /// The `i`-th choice among `n` threads.
    fn choice(&self, i: u64, n: usize) -> usize {
        (splitmix64(self.seed ^ splitmix64(i)) % n as u64) as usize
    }
}

/// SplitMix64's increment (the golden ratio in 64 bits).
pub const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64: a well-mixed 64-bit function of `x`.
pub fn splitmix64(x: u64) -> u64 {
    mix64(x.wrapping_add(GOLDEN_GAMMA))
}

/// SplitMix64's finalizer: every input bit affects every output bit.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Strategy for RandomWalk {
    fn name(&self) -> String {
        "random".into()
    }

    fn pick(&mut self, v: &SchedView) -> Tid {
        let t = v.runnable[self.choice(self.index, v.runnable.len())];
        self.index += 1;
        t
    }

    fn horizon(&mut self, v: &SchedView) -> u64 {
        let n = v.runnable.len();
        for k in 0..LOOKAHEAD {
            if v.runnable[self.choice(self.index + k, n)] != v.current {
                return v.step + 1 + k;
            }
        }
        v.step + 1 + LOOKAHEAD
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::sched::tests::view;

    #[test]
    fn the_horizon_is_the_first_step_the_walk_leaves_the_thread() {
        let all = [Tid(1), Tid(2), Tid(3)];
        let o = BTreeMap::new();
        let mut w = RandomWalk::new(9);
        for _ in 0..50 {
            let mut v = view(1, true, false, &all, &o);
            v.step = 100;
            let h = w.horizon(&v);
            let mut step = 100;
            loop {
                step += 1;
                v.step = step;
                let t = w.pick(&v);
                if step < h {
                    assert_eq!(t, Tid(1), "before the horizon the walk stays");
                } else {
                    assert_ne!(t, Tid(1), "at the horizon it leaves");
                    break;
                }
            }
        }
    }
}
