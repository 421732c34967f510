//! A libtest crate (built with `rustc --test`) for a small account module:
//! two tests that pass under every schedule and one with a lock-order
//! inversion, the way such bugs sit in real test suites.
//!
//! Bug: `transfer(from, to)` locks `from`'s `std::sync::Mutex`, then
//! `to`'s, with nothing between the two `lock()` calls.  The test
//! `transfers_in_both_directions_keep_the_total` runs transfers from
//! checking to savings on one thread and from savings to checking on
//! another.  If the first thread is preempted holding checking, just before
//! the atomic compare-and-swap (`lock cmpxchg`) that takes savings, and the
//! second takes savings and tries checking, each waits for the other's
//! mutex: deadlocked (both in futex waits, the test's thread in join, main
//! waiting for the test).  One preemption, at the locked instruction: the
//! window holds no system call, only that sync site.  Natively the window is
//! a few instructions wide and the second thread starts long after the
//! first is done.
//!
//! Fix (`--cfg fixed`): every transfer locks the lower-numbered account
//! first.  With one global order, a thread that holds one mutex only ever
//! waits for a mutex later in the order, so no cycle forms.

use std::sync::Mutex;

pub struct Account {
    /// The lock order of the fixed build.
    #[cfg_attr(not(fixed), allow(dead_code))]
    number: u32,
    balance: Mutex<i64>,
}

impl Account {
    pub fn new(number: u32, balance: i64) -> Account {
        Account { number, balance: Mutex::new(balance) }
    }

    pub fn balance(&self) -> i64 {
        *self.balance.lock().unwrap()
    }
}

/// Moves `amount` from `from` to `to` unless `from` would be overdrawn.
pub fn transfer(from: &Account, to: &Account, amount: i64) -> bool {
    #[cfg(not(fixed))]
    let (mut source, mut target) = {
        let source = from.balance.lock().unwrap();
        (source, to.balance.lock().unwrap())
    };
    #[cfg(fixed)]
    let (mut source, mut target) = if from.number < to.number {
        let source = from.balance.lock().unwrap();
        (source, to.balance.lock().unwrap())
    } else {
        let target = to.balance.lock().unwrap();
        (from.balance.lock().unwrap(), target)
    };
    if *source < amount {
        return false;
    }
    *source -= amount;
    *target += amount;
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;

    /// Busy work between thread starts: natively it spaces the threads out
    /// so the race stays rare; it makes no system call and no atomic
    /// operation, so in the VM it changes nothing.
    fn stagger() {
        let mut sink = 0u32;
        for i in 0..100_000u32 {
            sink = std::hint::black_box(sink.wrapping_add(i));
        }
    }

    #[test]
    fn a_transfer_moves_the_amount() {
        let (a, b) = (Account::new(1, 50), Account::new(2, 0));
        assert!(transfer(&a, &b, 20));
        assert_eq!((a.balance(), b.balance()), (30, 20));
    }

    #[test]
    fn an_overdraft_is_refused() {
        let (a, b) = (Account::new(1, 10), Account::new(2, 0));
        assert!(!transfer(&a, &b, 11));
        assert_eq!((a.balance(), b.balance()), (10, 0));
    }

    #[test]
    fn transfers_in_both_directions_keep_the_total() {
        let checking = Account::new(1, 100);
        let savings = Account::new(2, 100);
        thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..3 {
                    assert!(transfer(&checking, &savings, 10));
                }
            });
            stagger();
            s.spawn(|| {
                for _ in 0..3 {
                    assert!(transfer(&savings, &checking, 5));
                }
            });
        });
        assert_eq!((checking.balance(), savings.balance()), (85, 115));
    }
}
