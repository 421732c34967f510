//! Check-then-act across two lock scopes in Rust.
//!
//! A job sits in an `Arc<Mutex<Option<Job>>>`; two workers each check
//! whether it is there and, if so, take it and process it.  The second
//! worker first warms its cache, logging each of eight entries.
//!
//! Bug: the check (`is_some()`) and the act (`take().unwrap()`) are in two
//! separate lock scopes with a log line (`eprintln!`, a write system call)
//! between them.  If the first worker is preempted at that write after
//! seeing the job, and the second worker warms up, checks and takes it, the
//! first one's `unwrap()` on `None` panics; main's `join().unwrap()` then
//! panics too and the process exits with status 101.  One preemption, at a
//! system call, but then the second worker must run its whole warm-up
//! (a dozen system calls) before the first resumes: PCT and a search that
//! lets the thread it switched to run on find that quickly, a coin flip at
//! every step rarely does.  No shim is needed; std's Mutex uses futex directly, not pthread, so the
//! shim would not help anyway.  (A `yield_now()` would do in the VM too,
//! but natively it hands the CPU to the other worker and fails half the
//! runs.)
//!
//! Fix (`--cfg fixed`): check and take in one lock scope
//! (`lock().take()`), so exactly one worker gets `Some`.

use std::sync::{Arc, Mutex};
use std::thread;

struct Job {
    items: Vec<u32>,
}

fn process(job: Job) -> u32 {
    job.items.iter().sum()
}

#[cfg(not(fixed))]
fn try_take(slot: &Mutex<Option<Job>>) -> Option<u32> {
    if slot.lock().unwrap().is_some() {
        eprintln!("worker: found a job, taking it");
        let job = slot.lock().unwrap().take().unwrap(); // None if the other worker took it
        Some(process(job))
    } else {
        None
    }
}

#[cfg(fixed)]
fn try_take(slot: &Mutex<Option<Job>>) -> Option<u32> {
    let job = slot.lock().unwrap().take();
    job.map(process)
}

/// Busy work between thread starts.  Natively, threads started back to back
/// begin within microseconds of each other on different CPUs; this spaces
/// them out so the race stays as rare natively as races are in real
/// programs.  It makes no system call, so in the VM it is no scheduling
/// point and changes nothing.
fn stagger() {
    let mut sink = 0u32;
    for i in 0..100_000u32 {
        sink = std::hint::black_box(sink.wrapping_add(i));
    }
}

/// The second worker's start-up: eight cache entries, each logged.
fn warm_up(worker: usize) {
    if worker > 0 {
        for entry in 0..8 {
            eprintln!("worker {worker}: cache entry {entry} loaded");
        }
    }
}

fn main() {
    let slot = Arc::new(Mutex::new(Some(Job {
        items: (1..=10).collect(),
    })));
    let workers: Vec<_> = (0..2)
        .map(|i| {
            if i > 0 {
                stagger();
            }
            let slot = Arc::clone(&slot);
            thread::spawn(move || {
                warm_up(i);
                try_take(&slot)
            })
        })
        .collect();
    let results: Vec<u32> = workers
        .into_iter()
        .filter_map(|w| w.join().unwrap())
        .collect();
    println!(
        "{} job processed, sum {}",
        results.len(),
        results.iter().sum::<u32>()
    );
}
