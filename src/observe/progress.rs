//! Whether a run still makes progress: a program whose threads only go
//! round states they have been in (spinning on values nobody changes,
//! retrying calls that keep failing the same way) is hung however few
//! steps it has taken, and one that keeps reaching new states is not,
//! however many.
//!
//! A step's *state* is what the trace records of it, its number aside:
//! the thread, the operation, the object, the site, the value seen and the
//! result (and the clock, for a call that reads it: a thread polling the
//! time until a deadline moves on). Steps are watched in rounds of
//! `window` steps: when the second half of a round brings no state its
//! first half had not shown, the run goes round in circles of at most half
//! a round. A thread asleep until a timer (or an armed timer) will change
//! something the steps cannot show, so such a round proves nothing.
//!
//! A round is *busy* when every step of its second half did work that
//! completed: an atomic that did not give way, a lock taken or released, a
//! system call that succeeded and does not wait (a write, a `getpid`).
//! Going round the same busy states is what a counted loop does too: its
//! counter lives where the steps cannot show (crossbeam-epoch's tests pin
//! and collect 500,000 times in each of eight threads; a program prints
//! the same line a million times). A thread waiting for something that
//! never comes waits somewhere (a spin, a retried atomic, a yield, a poll
//! or read that found nothing, a futex, a tick of a loop with no site), so
//! under the format-9 step rules a busy round is never called stuck: a
//! livelock of completed work ends at the step budget instead.
//!
//! States are kept as bits of a hash set of 2^22 bits (every step pays a
//! hash and a bit, not an insertion into a growing table): a new state may
//! fall on a bit another set, at most one in twenty at 200,000 states a
//! round, so a run is called stuck only when every one of its new states
//! fell so, which for a run making progress does not happen.

use super::trace::{Event, Operation};
use crate::code::SiteKind;

/// Bits of the set of states seen in a round.
const STATE_BITS: usize = 1 << 22;

/// The default `window`: long enough for any backoff a correct program
/// spins through while another thread gets its work done.
pub const HANG_STEPS: u64 = 200_000;

/// Watches the states of a run's steps.
#[derive(Clone, Debug, Default)]
pub struct ProgressWatch {
    /// Steps per round; 0 watches nothing.
    window: u64,
    /// The states seen this round.
    seen: Vec<u64>,
    /// Steps taken this round, and states new in its second half.
    taken: u64,
    new_late: u64,
    /// A timer could change something this round.
    timer: bool,
    /// Some step of this round's second half waited.
    waited: bool,
    /// Whether a busy round can be stuck (before the format-9 step rules).
    busy_can_be_stuck: bool,
}

impl ProgressWatch {
    /// A watch of rounds of `window` steps; `busy_can_be_stuck` as runs
    /// made before the format-9 step rules watched.
    pub fn new(window: u64, busy_can_be_stuck: bool) -> Self {
        ProgressWatch {
            window,
            busy_can_be_stuck,
            ..Self::default()
        }
    }

    /// Notes a step (`clock`: the virtual time, when the step read it;
    /// `busy`: the step did work that completed, see the module's text);
    /// `timer_pending` when a sleeping thread or an armed timer may still
    /// change something. True when this step ends a round with no progress.
    pub fn stuck_after(
        &mut self,
        e: &Event,
        clock: Option<u64>,
        timer_pending: bool,
        busy: bool,
    ) -> bool {
        if self.window == 0 {
            return false;
        }
        let words = [
            u64::from(e.thread),
            e.op.word(),
            e.object.unwrap_or(u64::MAX),
            e.site,
            e.value,
            e.result.unwrap_or(i64::MIN) as u64,
            clock.unwrap_or(u64::MAX),
        ];
        let mut bytes = [0u8; 56];
        for (b, w) in bytes.chunks_exact_mut(8).zip(words) {
            b.copy_from_slice(&w.to_le_bytes());
        }
        let state = xxhash_rust::xxh3::xxh3_64(&bytes);
        if self.seen.is_empty() {
            self.seen = vec![0; STATE_BITS / 64];
        }
        let bit = state as usize % STATE_BITS;
        let (word, mask) = (bit / 64, 1u64 << (bit % 64));
        let new = self.seen[word] & mask == 0;
        self.seen[word] |= mask;
        self.taken += 1;
        self.timer |= timer_pending;
        // The second half is what shows no progress: what it did counts.
        self.waited |= !busy && self.taken > self.window / 2;
        if new && self.taken > self.window / 2 {
            self.new_late += 1;
        }
        if self.taken < self.window {
            return false;
        }
        let stuck = self.new_late == 0 && !self.timer && (self.waited || self.busy_can_be_stuck);
        self.seen.fill(0);
        self.taken = 0;
        self.new_late = 0;
        self.timer = false;
        self.waited = false;
        stuck
    }
}

/// Whether a step (that did not give way) did work that completed (see
/// the module's text): an atomic or a lock operation that succeeded, a system
/// call that succeeded and does not wait. Waiting steps are the rest:
/// ticks, failed calls (`EAGAIN`, `ETIMEDOUT`), reads that found nothing,
/// sleeps, polls, futexes.
pub fn completed_work(e: &Event) -> bool {
    const WAITS: [i64; 16] = [
        libc::SYS_sched_yield,
        libc::SYS_nanosleep,
        libc::SYS_clock_nanosleep,
        libc::SYS_poll,
        libc::SYS_ppoll,
        libc::SYS_select,
        libc::SYS_pselect6,
        libc::SYS_epoll_wait,
        libc::SYS_epoll_pwait,
        libc::SYS_epoll_pwait2,
        libc::SYS_futex,
        libc::SYS_wait4,
        libc::SYS_waitid,
        libc::SYS_rt_sigtimedwait,
        libc::SYS_rt_sigsuspend,
        libc::SYS_pause,
    ];
    match e.op {
        Operation::Sync { site } => site != SiteKind::Tick,
        Operation::Hint { .. } => e.result == Some(0),
        // A read that found nothing (end of file, an empty datagram) is
        // what a thread polling for input that never comes sees.
        Operation::Syscall { nr } => {
            const READS: [i64; 6] = [
                libc::SYS_read,
                libc::SYS_readv,
                libc::SYS_pread64,
                libc::SYS_recvfrom,
                libc::SYS_recvmsg,
                libc::SYS_preadv,
            ];
            let nr = nr as i64;
            match e.result {
                Some(0) if READS.contains(&nr) => false,
                Some(r) => r >= 0 && !WAITS.contains(&nr),
                None => false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::trace::Operation;

    fn event(thread: u32, value: u64) -> Event {
        Event {
            step: 0,
            thread,
            op: Operation::Syscall { nr: 24 },
            object: None,
            site: 0x1000,
            result: Some(0),
            value,
        }
    }

    #[test]
    fn threads_going_round_the_same_states_are_stuck_after_a_round() {
        let mut w = ProgressWatch::new(100, true);
        let mut stuck_at = None;
        for step in 0..1000u64 {
            // Two threads yielding in turn, a backoff of 3 values.
            let e = event(1 + (step % 2) as u32, step % 3);
            if w.stuck_after(&e, None, false, false) {
                stuck_at = Some(step);
                break;
            }
        }
        assert_eq!(stuck_at, Some(99));
    }

    #[test]
    fn busy_rounds_are_never_stuck_under_the_format_9_rules() {
        // A counted loop of the same completed steps goes on.
        let mut w = ProgressWatch::new(100, false);
        assert!((0..10_000u64).all(|_| !w.stuck_after(&event(1, 7), None, false, true)));
        // One waiting step in a round's second half makes it an ordinary
        // round; in its first half it shows nothing.
        let mut w = ProgressWatch::new(100, false);
        let stuck_at =
            (0..10_000u64).find(|s| w.stuck_after(&event(1, 7), None, false, s % 100 != 70));
        assert_eq!(stuck_at, Some(99));
        let mut w = ProgressWatch::new(100, false);
        assert!((0..10_000u64).all(|s| !w.stuck_after(&event(1, 7), None, false, s % 100 != 20)));
        // Before, a busy round was stuck like any other.
        let mut w = ProgressWatch::new(100, true);
        let stuck_at = (0..10_000u64).find(|_| w.stuck_after(&event(1, 7), None, false, true));
        assert_eq!(stuck_at, Some(99));
    }

    #[test]
    fn a_run_reaching_new_states_or_waiting_for_a_timer_is_not() {
        let mut w = ProgressWatch::new(100, true);
        assert!((0..10_000u64).all(|s| !w.stuck_after(&event(1, s), None, false, false)));
        let mut w = ProgressWatch::new(100, true);
        assert!((0..10_000u64).all(|_| !w.stuck_after(&event(1, 7), None, true, false)));
        // Polling the clock moves on.
        let mut w = ProgressWatch::new(100, true);
        assert!((0..10_000u64).all(|s| !w.stuck_after(&event(1, 7), Some(s), false, false)));
        // And a window of 0 watches nothing.
        let mut w = ProgressWatch::new(0, true);
        assert!((0..10_000u64).all(|_| !w.stuck_after(&event(1, 7), None, false, false)));
    }
}
