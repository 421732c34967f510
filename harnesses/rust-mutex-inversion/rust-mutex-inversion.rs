//! Lock-order inversion with nothing between the two `lock()` calls.
//!
//! Two accounts, each behind a `std::sync::Mutex`.  `transfer(from, to)`
//! locks `from`, then `to`, and moves an amount; one thread transfers from
//! checking to savings three times, the other from savings to checking.
//!
//! Bug: the threads take the two mutexes in opposite orders.  If the first
//! thread is preempted holding checking, just before the atomic
//! compare-and-swap (`lock cmpxchg`) that takes savings, and the second
//! thread then takes savings and tries checking, each waits for the other's
//! mutex: deadlocked (both threads in futex waits, main in join).  One
//! preemption, and there is no system call or pthread call between the two
//! acquisitions: the only scheduling point in the window is the locked
//! instruction itself (a sync site), so a scheduler that switches threads
//! only at system calls never finds this.  Natively the window is a few
//! instructions wide and the second thread starts long after the first is
//! done.
//!
//! Fix (`--cfg fixed`): every transfer locks the account with the lower
//! number first.  With one global order, a thread that holds one mutex
//! only ever waits for a mutex later in the order, so no cycle forms.

use std::sync::Mutex;
use std::thread;

struct Account {
    number: u32,
    balance: Mutex<i64>,
}

#[cfg(not(fixed))]
fn transfer(from: &Account, to: &Account, amount: i64) {
    let mut source = from.balance.lock().unwrap();
    let mut target = to.balance.lock().unwrap();
    *source -= amount;
    *target += amount;
}

#[cfg(fixed)]
fn transfer(from: &Account, to: &Account, amount: i64) {
    let (mut source, mut target) = if from.number < to.number {
        let source = from.balance.lock().unwrap();
        (source, to.balance.lock().unwrap())
    } else {
        let target = to.balance.lock().unwrap();
        (from.balance.lock().unwrap(), target)
    };
    *source -= amount;
    *target += amount;
}

/// Busy work between thread starts.  Natively, threads started back to back
/// begin within microseconds of each other on different CPUs; this spaces
/// them out so the race stays as rare natively as races are in real
/// programs.  It makes no system call and no atomic operation, so in the VM
/// it is no scheduling point and changes nothing.
fn stagger() {
    let mut sink = 0u32;
    for i in 0..100_000u32 {
        sink = std::hint::black_box(sink.wrapping_add(i));
    }
}

fn main() {
    let checking = Account { number: 1, balance: Mutex::new(100) };
    let savings = Account { number: 2, balance: Mutex::new(100) };
    thread::scope(|s| {
        s.spawn(|| {
            for _ in 0..3 {
                transfer(&checking, &savings, 10);
            }
        });
        stagger();
        s.spawn(|| {
            for _ in 0..3 {
                transfer(&savings, &checking, 5);
            }
        });
    });
    let mut total = 0;
    for account in [&checking, &savings] {
        let balance = *account.balance.lock().unwrap();
        println!("account {}: {balance}", account.number);
        total += balance;
    }
    println!("total {total}");
}
