//! Bare spin-wait: a waiter thread spins on `while !READY.load(Acquire) {}`
//! with no hint, a two-instruction loop (load, branch back) that makes no
//! system call, no store and no call.  Its only scheduling point is the
//! loop's backward branch, found as a spin loop (a sync site), or, at the
//! level `globals`, the RIP-relative load of the static.  Main starts the
//! waiter first and then a setter that computes a value (arithmetic only)
//! and publishes it with Release.
//!
//! On one vCPU, a waiter that spins first would spin forever unless the
//! machine switches threads at the loop: every schedule must let the setter
//! run and the program exit 0.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;

static READY: AtomicBool = AtomicBool::new(false);
static VALUE: AtomicU64 = AtomicU64::new(0);

fn main() {
    let waiter = thread::spawn(|| {
        while !READY.load(Ordering::Acquire) {}
        VALUE.load(Ordering::Relaxed)
    });
    let setter = thread::spawn(|| {
        let mut product = 1u64;
        for i in 1..=20u64 {
            product = std::hint::black_box(product * i % 1_000_003);
        }
        VALUE.store(product, Ordering::Relaxed);
        READY.store(true, Ordering::Release);
    });
    setter.join().unwrap();
    let seen = waiter.join().unwrap();
    println!("waiter saw {seen}");
}
