//! The record of a run: a hash over every step, so two runs can be compared
//! whole by one number.

use xxhash_rust::xxh3::Xxh3;

use crate::kernel::Tid;

/// The running hash of a run's steps.
#[derive(Clone, Default)]
pub struct Trace {
    hasher: Xxh3,
}

impl Trace {
    /// Records a system call: who made it, with what, and what it returned
    /// (`i64::MIN` when the thread blocked; its wake-up is recorded apart).
    pub fn syscall(&mut self, step: u64, tid: Tid, nr: u64, args: &[u64; 6], result: i64) {
        let mut rec = [0u64; 10];
        rec[0] = step;
        rec[1] = tid.0 as u64;
        rec[2] = nr;
        rec[3..9].copy_from_slice(args);
        rec[9] = result as u64;
        for w in rec {
            self.hasher.update(&w.to_le_bytes());
        }
    }

    /// Records a blocked thread waking with `result`.
    pub fn wake(&mut self, tid: Tid, result: i64) {
        self.hasher.update(&[0xffu8]);
        self.hasher.update(&(tid.0 as u64).to_le_bytes());
        self.hasher.update(&result.to_le_bytes());
    }

    /// The hash so far, as 16 hex digits.
    pub fn hash_hex(&self) -> String {
        format!("{:016x}", self.hasher.digest())
    }
}
