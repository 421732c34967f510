//! The session's counters and stop flag, in memory every worker shares,
//! threads and worker processes alike.
//!
//! The counters live in a shared anonymous mapping made before any worker
//! process is forked, so a worker process counts into the same words as
//! the session reads: the execution budget is exact across processes (no
//! worker overshoots while a message is on its way), and a worker that is
//! killed leaves its counts behind.

use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Most workers a session runs.
pub const MAX_JOBS: usize = 256;

/// What the session and its workers count, laid out once in shared memory.
#[repr(C)]
pub struct Counters {
    pub stop: AtomicBool,
    pub execs: AtomicU64,
    per_worker: [AtomicU64; MAX_JOBS],
    /// Steps and machine exits of every run, so a rate measured on one
    /// machine projects to another (exits are the unit of cost).
    pub steps: AtomicU64,
    pub exits: AtomicU64,
    /// Runs and time minimization spent beside the search.
    pub minimize_execs: AtomicU64,
    pub minimize_us: AtomicU64,
    /// Worker processes that died and were started again.
    pub restarts: AtomicU64,
}

/// Shared progress counters and the stop flag.
pub struct Progress {
    counters: NonNull<Counters>,
    jobs: usize,
    limit: Option<u64>,
}

// SAFETY: `Counters` holds only atomics, which any thread (or process) may
// use at once; the mapping lives until `Progress` is dropped.
unsafe impl Send for Progress {}
// SAFETY: as above.
unsafe impl Sync for Progress {}

impl Progress {
    /// Counters for `jobs` workers (at most [`MAX_JOBS`]) and an execution
    /// budget of `limit`.
    pub fn new(jobs: usize, limit: Option<u64>) -> Self {
        assert!(jobs <= MAX_JOBS, "at most {MAX_JOBS} workers");
        let size = std::mem::size_of::<Counters>();
        // SAFETY: a fresh anonymous mapping, asked of the kernel with no
        // address; nothing else refers to it yet.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert!(
            ptr != libc::MAP_FAILED,
            "map the session's counters: {}",
            std::io::Error::last_os_error()
        );
        // Zeroed pages are atomics holding 0 and `false`.
        Progress {
            counters: NonNull::new(ptr.cast()).expect("mmap gives no null mapping"),
            jobs,
            limit,
        }
    }

    /// Each worker's executions.
    pub fn per_worker(&self) -> &[AtomicU64] {
        &self.per_worker[..self.jobs]
    }

    /// Counts one execution if the budget allows it.
    pub fn take_exec(&self) -> bool {
        if self.stop.load(Ordering::Relaxed) {
            return false;
        }
        let n = self.execs.fetch_add(1, Ordering::Relaxed);
        if self.limit.is_some_and(|l| n >= l) {
            self.execs.fetch_sub(1, Ordering::Relaxed);
            self.stop.store(true, Ordering::Relaxed);
            return false;
        }
        true
    }
}

impl Deref for Progress {
    type Target = Counters;

    fn deref(&self) -> &Counters {
        // SAFETY: the mapping is as large as `Counters`, zeroed (a valid
        // value of atomics) and lives as long as `self`.
        unsafe { self.counters.as_ref() }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by `new` with this size and nothing
        // borrows it past `self`. A forked worker never drops its copy: it
        // leaves by `_exit`.
        unsafe {
            libc::munmap(
                self.counters.as_ptr().cast(),
                std::mem::size_of::<Counters>(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_taken_exactly_and_then_stops_the_session() {
        let p = Progress::new(2, Some(3));
        assert!((0..5).filter(|_| p.take_exec()).count() == 3);
        assert!(p.stop.load(Ordering::Relaxed));
        assert_eq!(p.execs.load(Ordering::Relaxed), 3);
        assert_eq!(p.per_worker().len(), 2);
    }

    #[test]
    fn a_forked_process_counts_into_the_same_words() {
        let p = Progress::new(1, None);
        // SAFETY: the child only adds to an atomic and leaves by `_exit`.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            p.execs.fetch_add(7, Ordering::Relaxed);
            // SAFETY: ends the child without running the parent's code.
            unsafe { libc::_exit(0) };
        }
        let mut status = 0;
        // SAFETY: waits for the child just forked.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(p.execs.load(Ordering::Relaxed), 7);
    }
}
