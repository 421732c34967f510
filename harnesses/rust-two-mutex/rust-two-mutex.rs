//! Two `std::sync::Mutex`es taken in opposite orders in Rust.
//!
//! Two threads move an item between an inbox and an archive, each holding
//! both locks: one locks inbox then archive, the other archive then inbox,
//! logging a line (`eprintln!`, a write system call) between the two
//! acquisitions.  The restorer first checks its configuration, logging each
//! of eight keys.
//!
//! Bug: if the archiver is preempted at its log write holding the inbox
//! and the restorer checks its configuration and locks the archive, each
//! waits for the other's mutex forever: deadlocked (both threads in futex
//! waits, main in join).  One preemption, at a system call, but then the
//! restorer must run about a dozen system calls in a row before the
//! archiver resumes: PCT and a search that lets the thread it switched to
//! run on find that quickly, a coin flip at every step rarely does.  No
//! shim is needed (std's Mutex uses
//! futex directly, so the pthread shim never sees it anyway).  (A
//! `yield_now()` would do in the VM too, but natively it hands the CPU to
//! the other thread and deadlocks one run in ten.)
//!
//! Fix (`--cfg fixed`): both threads lock the inbox first.

use std::sync::{Arc, Mutex};
use std::thread;

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

fn main() {
    let inbox = Arc::new(Mutex::new(vec![1u32, 2, 3]));
    let archive = Arc::new(Mutex::new(vec![10u32]));

    let archiver = {
        let (inbox, archive) = (Arc::clone(&inbox), Arc::clone(&archive));
        thread::spawn(move || {
            let mut inbox = inbox.lock().unwrap();
            eprintln!("archiver: inbox locked");
            let mut archive = archive.lock().unwrap();
            if let Some(item) = inbox.pop() {
                archive.push(item);
            }
        })
    };
    stagger();
    let restorer = {
        let (inbox, archive) = (Arc::clone(&inbox), Arc::clone(&archive));
        thread::spawn(move || {
            for key in ["source", "target", "policy", "retention", "owner", "quota", "mode", "batch"] {
                eprintln!("restorer: config {key} ok");
            }
            #[cfg(not(fixed))]
            let (mut archive, mut inbox) = {
                let archive = archive.lock().unwrap();
                eprintln!("restorer: archive locked");
                (archive, inbox.lock().unwrap())
            };
            #[cfg(fixed)]
            let (mut inbox, mut archive) = {
                let inbox = inbox.lock().unwrap();
                eprintln!("restorer: inbox locked");
                (inbox, archive.lock().unwrap())
            };
            if let Some(item) = archive.first().copied() {
                archive.remove(0);
                inbox.push(item);
            }
        })
    };
    archiver.join().unwrap();
    restorer.join().unwrap();

    let inbox = inbox.lock().unwrap();
    let archive = archive.lock().unwrap();
    let total: u32 = inbox.iter().chain(archive.iter()).sum();
    println!("{} items, total {total}", inbox.len() + archive.len());
}
