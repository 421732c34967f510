// Two threads send N numbers each (the first argument, 20,000 without
// one) over std's mpsc channel, and the main thread sums them: an
// atomics-heavy correct program, for the sync points' tests and bench.
use std::sync::mpsc;
fn main() {
    let n: u64 = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(20000);
    let (tx, rx) = mpsc::channel::<u64>();
    let senders: Vec<_> = (0..2)
        .map(|t| {
            let tx = tx.clone();
            std::thread::spawn(move || (0..n).for_each(|i| tx.send(i + t).unwrap()))
        })
        .collect();
    drop(tx);
    let sum: u64 = rx.iter().sum();
    senders.into_iter().for_each(|s| s.join().unwrap());
    println!("{sum}");
}
