//! A libtest crate (built with `rustc --test`): a few passing tests that use
//! threads, a Mutex, a Condvar, an mpsc channel and a 1 ms sleep, run by the
//! libtest harness with its default number of test threads.  Built with
//! `--cfg failing` (the `rust-libtest-fail` harness) it has one more test,
//! which fails, so the binary exits with status 101.

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::sync::{Arc, Condvar, Mutex};
    use std::thread;
    use std::time::{Duration, Instant};

    #[test]
    fn threads_return_their_results_through_join() {
        let handles: Vec<_> = (1..=4u32).map(|i| thread::spawn(move || i * 10)).collect();
        let sum: u32 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(sum, 100);
    }

    #[test]
    fn a_mutex_counts_every_increment() {
        let counter = Arc::new(Mutex::new(0u32));
        let handles: Vec<_> = (0..3)
            .map(|_| {
                let counter = Arc::clone(&counter);
                thread::spawn(move || {
                    for _ in 0..50 {
                        *counter.lock().unwrap() += 1;
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(*counter.lock().unwrap(), 150);
    }

    #[test]
    fn a_channel_delivers_every_message_in_order() {
        let (sender, receiver) = mpsc::channel();
        let producer = thread::spawn(move || {
            for i in 0..20u32 {
                sender.send(i).unwrap();
            }
        });
        let received: Vec<u32> = receiver.iter().collect();
        producer.join().unwrap();
        assert_eq!(received, (0..20).collect::<Vec<_>>());
    }

    #[test]
    fn a_condvar_wakes_the_waiter() {
        let pair = Arc::new((Mutex::new(false), Condvar::new()));
        let setter = {
            let pair = Arc::clone(&pair);
            thread::spawn(move || {
                *pair.0.lock().unwrap() = true;
                pair.1.notify_one();
            })
        };
        let mut ready = pair.0.lock().unwrap();
        while !*ready {
            ready = pair.1.wait(ready).unwrap();
        }
        drop(ready);
        setter.join().unwrap();
    }

    #[test]
    fn a_short_sleep_takes_at_least_its_duration() {
        let start = Instant::now();
        thread::sleep(Duration::from_millis(1));
        assert!(start.elapsed() >= Duration::from_millis(1));
    }

    #[cfg(failing)]
    #[test]
    fn this_test_fails_on_purpose() {
        let answer = thread::spawn(|| 6 * 7).join().unwrap();
        assert_eq!(answer, 43, "the failing harness must fail");
    }
}
