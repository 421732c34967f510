//! Rust std threads: four workers sum squares over disjoint ranges, send
//! their partial sums over an mpsc channel and record their index in a
//! shared `Arc<Mutex<Vec<_>>>`.  Correct under every schedule (the printed
//! list is sorted first).

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;

fn main() {
    let finished = Arc::new(Mutex::new(Vec::new()));
    let (sender, receiver) = mpsc::channel();
    let workers: Vec<_> = (0..4u64)
        .map(|w| {
            let sender = sender.clone();
            let finished = Arc::clone(&finished);
            thread::spawn(move || {
                let partial: u64 = (w * 250 + 1..=(w + 1) * 250).map(|i| i * i).sum();
                sender.send(partial).unwrap();
                finished.lock().unwrap().push(w);
            })
        })
        .collect();
    drop(sender);
    let total: u64 = receiver.iter().sum();
    for worker in workers {
        worker.join().unwrap();
    }
    let mut finished = finished.lock().unwrap().clone();
    finished.sort();
    println!("workers {finished:?} sent sum of squares 1..1000 = {total}");
    assert_eq!(total, 333_833_500);
}
