//! Exploring schedules: running many of them and judging each, the layer
//! between the engine and the front ends (`check`, `bench`, `minimize`, the
//! fuzzer). What counts as a failure is [`crate::observe::failure`]; this
//! layer runs the schedules.
//!
//! - [`Runner`]: one machine running schedule after schedule of one
//!   program, restored from its snapshot between them.
//! - [`probe`]: the default run every search starts with (it checks the
//!   program runs, and PCT spreads its change points over its decision
//!   points).
//! - [`pool`]: work spread over threads, one machine each, results streamed
//!   back as they come; [`run_schedules`] is `check`'s "N schedules on J
//!   machines".
//! - [`check`]: a check, many schedules each judged and counted, the
//!   first failure picked out.
//! - [`minimize`]: the fewest preemptions that keep a failure.
//! - [`per_test`]: a test binary's tests, listed by the binary and each
//!   explored alone, and the table that sums them up.
//! - [`target`]: opening a target, a program's path or a bundled harness,
//!   into the run configuration the sessions start from.

pub mod check;
pub mod fork;
pub mod minimize;
pub mod per_test;
pub mod pool;
mod runner;
pub mod target;

pub use pool::{map_parallel, run_schedules};
pub use runner::{Probe, Runner, probe};

use crate::sched::{GOLDEN_GAMMA, mix64};

/// The seed of schedule `i` of a search seeded with `seed`: a different
/// stream for every schedule, the same whatever the number of jobs.
pub fn schedule_seed(seed: u64, i: u64) -> u64 {
    mix64(seed ^ i.wrapping_mul(GOLDEN_GAMMA))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_seeds_differ_and_do_not_depend_on_anything_else() {
        let a: std::collections::BTreeSet<u64> = (0..1000).map(|i| schedule_seed(7, i)).collect();
        assert_eq!(a.len(), 1000);
        assert_eq!(schedule_seed(7, 3), schedule_seed(7, 3));
        assert_ne!(schedule_seed(7, 3), schedule_seed(8, 3));
        // The values earlier versions gave: saved seeds stay meaningful.
        assert_eq!(schedule_seed(0, 0), 0);
        assert_eq!(schedule_seed(1, 2), 0xbeeb_8da1_658e_ec67);
    }
}
