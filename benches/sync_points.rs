//! What each level of sync points costs, and how many sites it patches.
//!
//! `cargo bench --bench sync_points` prints two tables:
//!
//! - for a few bundled programs and each level (`calls`, `atomics`,
//!   `globals`), schedules per second of `pct:3` on one job (each restored
//!   from the snapshot), steps per schedule, exits per step and
//!   microseconds per exit, so the figures project to another host; each
//!   level above `calls` twice: sync sites taken in the guest when no
//!   decision is due, and each one leaving it;
//! - how many sites each level finds in a Rust test binary (libtest and
//!   std, statically linked) and in the C library, and how long discovery
//!   takes (once per object and level; it is cached).

use std::sync::Arc;
use std::time::Instant;

use rewind_fuzz::code::SyncPoints;
use rewind_fuzz::code::sites;
use rewind_fuzz::explore::{self, schedule_seed};
use rewind_fuzz::harness::{self, Variant};
use rewind_fuzz::kernel::KernelConfig;
use rewind_fuzz::kernel::vfs::FileSource;
use rewind_fuzz::sched::StrategyKind;
use rewind_fuzz::vm::RunConfig;

const LEVELS: [SyncPoints; 3] = [SyncPoints::Calls, SyncPoints::Atomics, SyncPoints::Globals];

fn exe(name: &str) -> String {
    let h = harness::find(name).expect("bundled harness");
    let exe = harness::build(&h, Variant::Buggy).expect("harness builds");
    exe.canonicalize().unwrap().to_string_lossy().into_owned()
}

fn config(name: &str, level: SyncPoints) -> RunConfig {
    let mut k = KernelConfig::new(&exe(name), &[]);
    k.sync_points = level;
    let mut c = RunConfig::new(k);
    c.memory_mib = 256;
    c
}

/// `schedules` pct:3 schedules of `name` at `level` on one machine, with
/// sync sites taken in the guest when no decision is due (`site_path`) or
/// each leaving it.
fn row(name: &str, level: SyncPoints, site_path: bool, schedules: u64) {
    let mut cfg = config(name, level);
    cfg.site_path = site_path;
    let probe = explore::probe(&cfg, FileSource::host()).expect("probe");
    let mut runner = probe.runner;
    let (mut steps, mut exits, mut busy_us, mut buffered) = (0u64, 0u64, 0u64, 0u64);
    let start = Instant::now();
    for i in 0..schedules {
        let s = StrategyKind::pct(3).build(schedule_seed(0, i), probe.decision_points);
        let r = runner.run(s).expect("run");
        steps += r.steps;
        exits += r.exits;
        busy_us += r.wall_us;
        buffered += r.buffered_sites;
    }
    let secs = start.elapsed().as_secs_f64();
    let path = match (level, site_path) {
        (SyncPoints::Calls, _) => "",
        (_, true) => "in the guest",
        (_, false) => "exit each",
    };
    println!(
        "| {name} | {level} | {path} | {:.1}/s | {:.0} | {:.2} | {:.0} | {:.1} |",
        schedules as f64 / secs,
        steps as f64 / schedules as f64,
        exits as f64 / steps.max(1) as f64,
        buffered as f64 / schedules as f64,
        busy_us as f64 / exits.max(1) as f64,
    );
}

fn sites_in(what: &str, path: &str) {
    let Ok(data) = std::fs::read(path) else {
        println!("| {what} | (no {path} here) | | | | | |");
        return;
    };
    let data = Arc::new(data);
    for level in [SyncPoints::Atomics, SyncPoints::Globals] {
        let start = Instant::now();
        let t = sites::discover(&data, level);
        let ms = start.elapsed().as_secs_f64() * 1e3;
        let c = t.counts;
        println!(
            "| {what} | {level} | {} | {} | {} | {} | {} | {ms:.0} ms |",
            c.atomics, c.spins, c.loads, c.stores, c.unsupported
        );
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("sync_points: bench");
        return;
    }
    println!(
        "| program | level | sites | schedules/s | steps/schedule | exits/step | sites without an exit/schedule | µs/exit |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for (name, n) in [
        ("philosophers", 200),
        ("rust-two-mutex", 100),
        ("rust-mutex-inversion", 100),
        ("rust-libtest", 30),
    ] {
        for level in LEVELS {
            row(name, level, true, n);
            if level != SyncPoints::Calls {
                row(name, level, false, n);
            }
        }
    }
    println!();
    println!(
        "| object | level | atomic sites | spin sites | load sites | store sites | left (unsupported) | discovery |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    sites_in("Rust test binary (rust-libtest)", &exe("rust-libtest"));
    sites_in("libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6");
}
