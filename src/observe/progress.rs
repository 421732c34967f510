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
    /// Some step of this round's second half was a wait another thread
    /// ended (under the format-10 step rules): threads handed work on.
    handed_off: bool,
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
        work: Work,
    ) -> bool {
        if self.window == 0 {
            return false;
        }
        let words = [
            u64::from(e.thread.0),
            e.op.word(),
            e.object.unwrap_or(u64::MAX),
            e.site.0,
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
        if self.taken > self.window / 2 {
            self.waited |= work == Work::Waited;
            self.handed_off |= work == Work::HandedOff;
        }
        if new && self.taken > self.window / 2 {
            self.new_late += 1;
        }
        if self.taken < self.window {
            return false;
        }
        let stuck = self.new_late == 0
            && !self.timer
            && !self.handed_off
            && (self.waited || self.busy_can_be_stuck);
        self.seen.fill(0);
        self.taken = 0;
        self.new_late = 0;
        self.timer = false;
        self.waited = false;
        self.handed_off = false;
        stuck
    }
}

/// What a step did, for the watch of progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// It waited: a spin, a retried atomic, a yield, a tick, a poll that
    /// found nothing, a failed call.
    Waited,
    /// It did work that completed.
    Completed,
    /// A wait another thread ended (the format-10 step rules): a futex
    /// wait a wake ended, a child collected, a poll that found something
    /// ready. A round with one hands work on between threads, whatever
    /// states it goes round.
    HandedOff,
}

/// What step `e` did; `yielded` when it gave way, `woken_waits` under the
/// format-10 step rules.
pub fn work_of(e: &Event, yielded: bool, woken_waits: bool) -> Work {
    if yielded {
        return Work::Waited;
    }
    if woken_waits && ended_by_another(e) {
        return Work::HandedOff;
    }
    if completed(e) {
        Work::Completed
    } else {
        Work::Waited
    }
}

/// Calls that wait until another thread ends them (or a time runs out):
/// a result above 0 says something was found ready, a child collected, a
/// signal taken.
const WAITS_FOR_ANOTHER: [i64; 9] = [
    libc::SYS_poll,
    libc::SYS_ppoll,
    libc::SYS_select,
    libc::SYS_pselect6,
    libc::SYS_epoll_wait,
    libc::SYS_epoll_pwait,
    libc::SYS_epoll_pwait2,
    libc::SYS_wait4,
    libc::SYS_rt_sigtimedwait,
];

/// Calls that wait whatever they return.
const WAITS: [i64; 7] = [
    libc::SYS_sched_yield,
    libc::SYS_nanosleep,
    libc::SYS_clock_nanosleep,
    libc::SYS_futex,
    libc::SYS_waitid,
    libc::SYS_rt_sigsuspend,
    libc::SYS_pause,
];

/// A wait another thread ended: a futex call that succeeded (a wait woken
/// by a wake, or the wake), a child `wait4` collected, a poll or a signal
/// wait that found something.
fn ended_by_another(e: &Event) -> bool {
    let (Operation::Syscall { nr }, Some(r)) = (e.op, e.result) else {
        return false;
    };
    let nr = nr as i64;
    (nr == libc::SYS_futex && r >= 0) || (WAITS_FOR_ANOTHER.contains(&nr) && r > 0)
}

/// Whether a step did work that completed, waits another thread ended
/// counted as waits.
fn completed(e: &Event) -> bool {
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
                Some(r) => r >= 0 && !WAITS.contains(&nr) && !WAITS_FOR_ANOTHER.contains(&nr),
                None => false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{GuestAddr, Step, Tid};
    use crate::observe::trace::Operation;

    #[test]
    fn a_wait_another_thread_ended_hands_work_on_under_the_format_10_rules() {
        let call = |nr: i64, result: i64| Event {
            step: Step(1),
            thread: Tid(2),
            op: Operation::Syscall { nr: nr as u64 },
            object: None,
            site: GuestAddr(0x1000),
            result: Some(result),
            value: 0,
        };
        let woken = call(libc::SYS_futex, 0);
        let changed = call(libc::SYS_futex, -(libc::EAGAIN as i64));
        let timed_out = call(libc::SYS_futex, -(libc::ETIMEDOUT as i64));
        let ready = call(libc::SYS_ppoll, 1);
        let nothing = call(libc::SYS_ppoll, 0);
        let child = call(libc::SYS_wait4, 42);
        let yielded = call(libc::SYS_sched_yield, 0);
        let write = call(libc::SYS_write, 3);
        for e in [&woken, &ready, &child] {
            assert_eq!(work_of(e, false, true), Work::HandedOff, "{e:?}");
            assert_eq!(work_of(e, false, false), Work::Waited, "format 9: {e:?}");
        }
        for e in [&changed, &timed_out, &nothing, &yielded] {
            assert_eq!(work_of(e, false, true), Work::Waited, "{e:?}");
        }
        assert_eq!(work_of(&write, false, true), Work::Completed);
        assert_eq!(work_of(&write, true, true), Work::Waited, "it gave way");
        // A producer and a consumer going round the same states, spinning
        // a little and waking each other: never stuck.
        let mut w = ProgressWatch::new(100, false);
        for s in 0..10_000u64 {
            let work = match s % 10 {
                0 => Work::HandedOff,
                1 => Work::Waited,
                _ => Work::Completed,
            };
            assert!(!w.stuck_after(&event(1, 7), None, false, work), "step {s}");
        }
    }

    fn event(thread: u32, value: u64) -> Event {
        Event {
            step: Step(0),
            thread: Tid(thread),
            op: Operation::Syscall { nr: 24 },
            object: None,
            site: GuestAddr(0x1000),
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
            if w.stuck_after(&e, None, false, Work::Waited) {
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
        assert!((0..10_000u64).all(|_| !w.stuck_after(&event(1, 7), None, false, Work::Completed)));
        // One waiting step in a round's second half makes it an ordinary
        // round; in its first half it shows nothing.
        let mut w = ProgressWatch::new(100, false);
        let stuck_at = (0..10_000u64).find(|s| {
            w.stuck_after(
                &event(1, 7),
                None,
                false,
                if s % 100 == 70 {
                    Work::Waited
                } else {
                    Work::Completed
                },
            )
        });
        assert_eq!(stuck_at, Some(99));
        let mut w = ProgressWatch::new(100, false);
        assert!((0..10_000u64).all(|s| !w.stuck_after(
            &event(1, 7),
            None,
            false,
            if s % 100 == 20 {
                Work::Waited
            } else {
                Work::Completed
            }
        )));
        // Before, a busy round was stuck like any other.
        let mut w = ProgressWatch::new(100, true);
        let stuck_at =
            (0..10_000u64).find(|_| w.stuck_after(&event(1, 7), None, false, Work::Completed));
        assert_eq!(stuck_at, Some(99));
    }

    #[test]
    fn a_run_reaching_new_states_or_waiting_for_a_timer_is_not() {
        let mut w = ProgressWatch::new(100, true);
        assert!((0..10_000u64).all(|s| !w.stuck_after(&event(1, s), None, false, Work::Waited)));
        let mut w = ProgressWatch::new(100, true);
        assert!((0..10_000u64).all(|_| !w.stuck_after(&event(1, 7), None, true, Work::Waited)));
        // Polling the clock moves on.
        let mut w = ProgressWatch::new(100, true);
        assert!((0..10_000u64).all(|s| !w.stuck_after(&event(1, 7), Some(s), false, Work::Waited)));
        // And a window of 0 watches nothing.
        let mut w = ProgressWatch::new(0, true);
        assert!((0..10_000u64).all(|_| !w.stuck_after(&event(1, 7), None, false, Work::Waited)));
    }
}
