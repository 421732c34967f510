//! Spin-wait with a hint: main waits for a worker's result with
//! `while !ready.load(Acquire) { std::hint::spin_loop() }`, a loop that
//! makes no system call and whose only scheduling point is the PAUSE that
//! `spin_loop()` compiles to (a sync site).  The worker first computes the
//! result (arithmetic only), stores it and then sets the flag with Release.
//!
//! On one vCPU, main spinning first would spin forever unless the machine
//! switches threads at the spin: every schedule must let the worker run and
//! the program exit 0.

use std::hint::spin_loop;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;

fn main() {
    let ready = AtomicBool::new(false);
    let result = AtomicU64::new(0);
    let seen = thread::scope(|s| {
        s.spawn(|| {
            let mut sum = 0u64;
            for i in 1..=1000u64 {
                sum = std::hint::black_box(sum + i * i);
            }
            result.store(sum, Ordering::Relaxed);
            ready.store(true, Ordering::Release);
        });
        while !ready.load(Ordering::Acquire) {
            spin_loop();
        }
        result.load(Ordering::Relaxed)
    });
    println!("worker result {seen}");
}
