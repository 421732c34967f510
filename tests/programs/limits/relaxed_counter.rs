// Two threads bump a shared counter with a relaxed load and a relaxed
// store: each access is atomic, the pair is not, and an update is lost
// when the other thread stores between them. Optimized, LLVM makes the
// pair one `add` to memory (not LOCK-prefixed: not atomic on a multi-core
// machine), which one vCPU never interrupts.
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::thread;

const ROUNDS: u64 = 50;
static COUNTER: AtomicU64 = AtomicU64::new(0);

fn add() {
    for _ in 0..ROUNDS {
        let v = COUNTER.load(Relaxed);
        COUNTER.store(v + 1, Relaxed);
    }
}

fn main() {
    let t = thread::spawn(add);
    add();
    t.join().unwrap();
    let n = COUNTER.load(Relaxed);
    println!("{n}");
    std::process::exit(if n == 2 * ROUNDS { 0 } else { 1 });
}
