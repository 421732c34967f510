// A thread that polls for an answer without blocking or yielding, while the
// thread that answers is runnable (woken by the poller's own request). The
// poll loop does some work (it is not a short loop that only re-reads memory).
// Natively the OS preempts the poller and this exits at once.
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;

fn main() {
    let answered = Arc::new(AtomicBool::new(false));
    let polls = Arc::new(AtomicU64::new(0));
    let (request, requests) = mpsc::channel::<()>();
    let (a, p) = (answered.clone(), polls.clone());
    let poller = thread::spawn(move || {
        request.send(()).unwrap(); // wakes main, which is blocked in recv
        let mut work = [0u64; 64];
        while !a.load(Ordering::Acquire) {
            for (i, w) in work.iter_mut().enumerate() {
                *w = black_box(w.wrapping_mul(31).wrapping_add(i as u64));
            }
            p.fetch_add(1, Ordering::Relaxed); // an atomic RMW: a scheduling point, not a yield
        }
    });
    requests.recv().unwrap();
    answered.store(true, Ordering::Release);
    poller.join().unwrap();
    println!("answered");
}
