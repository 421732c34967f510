//! The random walk: at every step, any runnable thread, uniformly.

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

use super::{SchedView, Strategy};
use crate::kernel::Tid;

/// Picks uniformly among the runnable threads at every step.
pub struct RandomWalk {
    rng: ChaCha8Rng,
}

impl RandomWalk {
    pub fn new(seed: u64) -> Self {
        RandomWalk {
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }
}

impl Strategy for RandomWalk {
    fn name(&self) -> String {
        "random".into()
    }

    fn pick(&mut self, v: &SchedView) -> Tid {
        v.runnable[(self.rng.next_u64() % v.runnable.len() as u64) as usize]
    }
}
