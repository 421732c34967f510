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
//! - what one site hit costs, taken in the guest and as an exit (a C and a
//!   Rust program bumping an atomic 1,000 and 5,000 times);
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

/// A C program bumping a global atomic N times through a function (one
/// site, no spin loop), one thread.
const BUMP_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
static long counter;
__attribute__((noinline)) void bump(long i) { __atomic_fetch_add(&counter, i & 1, __ATOMIC_SEQ_CST); }
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    for (long i = 0; i < n; i++) bump(i);
    printf("%ld\n", counter);
    return 0;
}
"#;

/// The same in Rust at `opt-level=0`: the site is inside
/// `core::sync::atomic`, reported at its caller (a stack window per hit).
const BUMP_RS: &str = r#"
use std::sync::atomic::{AtomicU64, Ordering};
static C: AtomicU64 = AtomicU64::new(0);
fn main() {
    let n: u64 = std::env::args().nth(1).unwrap().parse().unwrap();
    for i in 0..n { C.fetch_add(i & 1, Ordering::SeqCst); }
    println!("{}", C.load(Ordering::SeqCst));
}
"#;

/// Microseconds one site hit costs (the difference of runs with 5,000 and
/// 1,000 hits, over 4,000), taken in the guest or as an exit.
fn per_site(what: &str, exe: &std::path::Path) {
    let cost = |site_path: bool| {
        let wall = |n: u64| {
            let mut best = u64::MAX;
            for _ in 0..3 {
                let mut k = KernelConfig::new(&exe.to_string_lossy(), &[n.to_string()]);
                k.sync_points = SyncPoints::Atomics;
                let mut c = RunConfig::new(k);
                c.memory_mib = 256;
                c.site_path = site_path;
                let mut vm = rewind_fuzz::vm::Vm::new(&c, FileSource::host()).expect("machine");
                best = best.min(vm.run().expect("run").wall_us);
            }
            best
        };
        (wall(5000) as f64 - wall(1000) as f64) / 4000.0
    };
    println!("| {what} | {:.1} µs | {:.1} µs |", cost(true), cost(false));
}

fn compiled(dir: &std::path::Path, name: &str, source: &str, cmd: &[&str]) -> std::path::PathBuf {
    let src = dir.join(name);
    std::fs::write(&src, source).unwrap();
    let exe = dir.join(name.split('.').next().unwrap());
    let status = std::process::Command::new(cmd[0])
        .args(&cmd[1..])
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("compiler");
    assert!(status.success(), "{name} does not compile");
    exe
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
    // `cargo bench --bench sync_points -- per-site`: that table alone.
    let only_per_site = std::env::args().any(|a| a == "per-site");
    if !only_per_site {
        levels_table();
        println!();
    }
    per_site_table();
    if !only_per_site {
        println!();
        sites_table();
    }
}

fn levels_table() {
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
}

fn per_site_table() {
    println!("| one site, hit 4,000 more times | in the guest | exit each |");
    println!("| --- | --- | --- |");
    let dir = tempfile::tempdir().unwrap();
    let c = compiled(dir.path(), "bump.c", BUMP_C, &["gcc", "-O1"]);
    per_site("C global atomic (gcc -O1)", &c);
    let rs = compiled(
        dir.path(),
        "bump_rs.rs",
        BUMP_RS,
        &["rustc", "-g", "-C", "opt-level=0"],
    );
    per_site("Rust AtomicU64::fetch_add (opt-level=0, inside core)", &rs);
}

fn sites_table() {
    println!(
        "| object | level | atomic sites | spin sites | load sites | store sites | left (unsupported) | discovery |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    sites_in("Rust test binary (rust-libtest)", &exe("rust-libtest"));
    sites_in("libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6");
}
