//! Two threads transfer between two accounts, each locking both, in
//! opposite orders, with nothing between the two `lock()` calls:
//! `mutex_inversions std` with `std::sync::Mutex`, `mutex_inversions
//! parking_lot` with `parking_lot::Mutex`. A potential deadlock in every
//! run, and a deadlock when a thread is preempted between its two locks.

use std::sync::Arc;
use std::thread;

/// A lock with the two implementations' one difference taken away.
trait Lock<T>: Send + Sync + 'static {
    fn new(v: T) -> Self;
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R;
}

impl<T: Send + 'static> Lock<T> for std::sync::Mutex<T> {
    fn new(v: T) -> Self {
        std::sync::Mutex::new(v)
    }
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.lock().unwrap())
    }
}

impl<T: Send + 'static> Lock<T> for parking_lot::Mutex<T> {
    fn new(v: T) -> Self {
        parking_lot::Mutex::new(v)
    }
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.lock())
    }
}

fn transfers<L: Lock<i64>>() -> i64 {
    let checking = Arc::new(L::new(100));
    let savings = Arc::new(L::new(100));
    let forward = {
        let (from, to) = (checking.clone(), savings.clone());
        thread::spawn(move || {
            from.with(|a| {
                to.with(|b| {
                    *a -= 10;
                    *b += 10
                })
            })
        })
    };
    let backward = {
        let (from, to) = (savings.clone(), checking.clone());
        thread::spawn(move || {
            from.with(|a| {
                to.with(|b| {
                    *a -= 5;
                    *b += 5
                })
            })
        })
    };
    forward.join().unwrap();
    backward.join().unwrap();
    checking.with(|c| *c) + savings.with(|s| *s)
}

fn main() {
    let total = match std::env::args().nth(1).as_deref() {
        Some("parking_lot") => transfers::<parking_lot::Mutex<i64>>(),
        _ => transfers::<std::sync::Mutex<i64>>(),
    };
    println!("total {total}");
}
