//! Correct code over std's channels: producers summing numbers through
//! `mpsc::channel` (the list flavour), a ping-pong over two
//! `mpsc::sync_channel`s (the zero-capacity and array flavours), and a
//! bounded pipeline. The channels synchronize with compare-and-swap and
//! exchange on words that go from 0 and back (slot states, select words,
//! parkers) and with real mutexes in their wakers: no finding of any kind
//! is right.

use std::sync::mpsc;
use std::thread;

fn sum_over_a_channel() -> u64 {
    let (tx, rx) = mpsc::channel();
    let producers: Vec<_> = (0..3u64)
        .map(|t| {
            let tx = tx.clone();
            thread::spawn(move || {
                for i in 0..30u64 {
                    tx.send(t * 1000 + i).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    let sum = rx.iter().sum();
    for p in producers {
        p.join().unwrap();
    }
    sum
}

fn ping_pong() -> u32 {
    let (ping, pings) = mpsc::sync_channel::<u32>(0);
    let (pong, pongs) = mpsc::sync_channel::<u32>(1);
    let echo = thread::spawn(move || {
        for v in pings.iter() {
            pong.send(v + 1).unwrap();
        }
    });
    let mut v = 0;
    for _ in 0..15 {
        ping.send(v).unwrap();
        v = pongs.recv().unwrap();
    }
    drop(ping);
    echo.join().unwrap();
    v
}

fn pipeline() -> u64 {
    let (tx, rx) = mpsc::sync_channel::<u64>(2);
    let (tx2, rx2) = mpsc::sync_channel::<u64>(2);
    let stage = thread::spawn(move || {
        for v in rx.iter() {
            tx2.send(v * 2).unwrap();
        }
    });
    let source = thread::spawn(move || {
        for i in 0..20 {
            tx.send(i).unwrap();
        }
    });
    let total = rx2.iter().sum();
    source.join().unwrap();
    stage.join().unwrap();
    total
}

fn main() {
    let sum = sum_over_a_channel();
    let pong = ping_pong();
    let total = pipeline();
    println!("{sum} {pong} {total}");
    assert_eq!(sum, 3 * (0..30).sum::<u64>() + 30 * (1000 + 2000));
    assert_eq!(pong, 15);
    assert_eq!(total, 2 * (0..20).sum::<u64>());
}
