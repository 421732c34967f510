//! What each level of sync points costs, and how many sites it patches.
//!
//! `cargo bench --bench sync_points` prints two tables:
//!
//! - for a few bundled programs and each level (`calls`, `atomics`,
//!   `globals`), schedules per second of `pct:3` on one job (each restored
//!   from the snapshot), steps per schedule, exits per step and
//!   microseconds per exit, so the figures project to another host; each
//!   level above `calls` three ways: sync sites reaching the guest's
//!   dispatcher by a jump to a trampoline (the default), by a breakpoint,
//!   and each one leaving the guest;
//! - an atomics-heavy program (two threads sending messages over std's
//!   channel) at `calls` and at `atomics`, under the default strategy,
//!   PCT and the replay of PCT's schedule: time, exits per step, the share
//!   of sync-site steps taken without an exit, and the monitor's time per
//!   step (its own CPU time over the steps);
//! - what one site hit costs, by a jump, by a breakpoint and as an exit
//!   (a C and a Rust program bumping an atomic 1,000 and 5,000 times);
//! - how many sites each level finds in a Rust test binary (libtest and
//!   std, statically linked) and in the C library, how many got a
//!   trampoline, and how long discovery takes (once per object and level;
//!   it is cached).

use std::sync::Arc;
use std::time::Instant;

use rewind_fuzz::code::SyncPoints;
use rewind_fuzz::code::sites;
use rewind_fuzz::engine::RunConfig;
use rewind_fuzz::explore::{self, schedule_seed};
use rewind_fuzz::harness::{self, Variant};
use rewind_fuzz::kernel::KernelConfig;
use rewind_fuzz::kernel::vfs::FileSource;
use rewind_fuzz::sched::StrategyKind;

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

/// How sync sites reach the monitor.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Path {
    /// By a jump to a trampoline and the guest's dispatcher.
    Jumps,
    /// By a breakpoint and the guest's dispatcher.
    Breakpoints,
    /// Each by an exit.
    Exits,
}

impl Path {
    fn apply(self, c: &mut RunConfig) {
        c.site_path = self != Path::Exits;
        c.site_jumps = self == Path::Jumps;
    }

    fn name(self) -> &'static str {
        match self {
            Path::Jumps => "jumps",
            Path::Breakpoints => "breakpoints",
            Path::Exits => "exit each",
        }
    }
}

const PATHS: [Path; 3] = [Path::Jumps, Path::Breakpoints, Path::Exits];

/// `schedules` pct:3 schedules of `name` at `level` on one machine, sync
/// sites taken by `path`.
fn row(name: &str, level: SyncPoints, path: Path, schedules: u64) {
    let mut cfg = config(name, level);
    path.apply(&mut cfg);
    let probe = explore::probe(&cfg, FileSource::host()).expect("probe");
    let mut runner = probe.runner;
    let (mut steps, mut exits, mut busy_us, mut buffered) = (0u64, 0u64, 0u64, 0u64);
    let start = Instant::now();
    for i in 0..schedules {
        let s = StrategyKind::pct(3).build(schedule_seed(0, i), probe.decision_points);
        let r = runner.run(s).expect("run");
        steps += r.steps.0;
        exits += r.exits;
        busy_us += r.wall_us;
        buffered += r.buffered_sites;
    }
    let secs = start.elapsed().as_secs_f64();
    let path = match level {
        SyncPoints::Calls => "",
        _ => path.name(),
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
/// 1,000 hits, over 4,000), by each path.
fn per_site(what: &str, exe: &std::path::Path) {
    let cost = |path: Path| {
        let wall = |n: u64| {
            let mut best = u64::MAX;
            for _ in 0..3 {
                let mut k = KernelConfig::new(&exe.to_string_lossy(), &[n.to_string()]);
                k.sync_points = SyncPoints::Atomics;
                let mut c = RunConfig::new(k);
                c.memory_mib = 256;
                path.apply(&mut c);
                let mut vm = rewind_fuzz::engine::Vm::new(&c, FileSource::host()).expect("machine");
                best = best.min(vm.run().expect("run").wall_us);
            }
            best
        };
        (wall(5000) as f64 - wall(1000) as f64) / 4000.0
    };
    println!(
        "| {what} | {:.2} µs | {:.1} µs | {:.1} µs |",
        cost(Path::Jumps),
        cost(Path::Breakpoints),
        cost(Path::Exits)
    );
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
        println!("| {what} | (no {path} here) | | | | | | | |");
        return;
    };
    let data = Arc::new(data);
    for level in [SyncPoints::Atomics, SyncPoints::Globals] {
        let start = Instant::now();
        let t = sites::discover(&data, level);
        let ms = start.elapsed().as_secs_f64() * 1e3;
        let c = t.counts;
        println!(
            "| {what} | {level} | {} | {} | {} | {} | {} | {} | {} | {ms:.0} ms |",
            c.atomics,
            c.spins,
            c.loads,
            c.stores,
            c.unsupported,
            t.trampolines.len(),
            t.trampolines.without,
        );
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("sync_points: bench");
        return;
    }
    // `cargo bench --bench sync_points -- per-site` (or `channels`): that
    // table alone.
    let only = |t: &str| std::env::args().any(|a| a == t);
    let all = !only("per-site") && !only("channels");
    if all {
        levels_table();
        println!();
    }
    if all || only("channels") {
        channels_table();
        println!();
    }
    if all || only("per-site") {
        per_site_table();
    }
    if all {
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
            if level == SyncPoints::Calls {
                row(name, level, Path::Jumps, n);
                continue;
            }
            for path in PATHS {
                row(name, level, path, n);
            }
        }
    }
}

fn per_site_table() {
    println!("| one site, hit 4,000 more times | by a jump | by a breakpoint | exit each |");
    println!("| --- | --- | --- | --- |");
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

/// Two threads sending numbers over std's channel (shared with the tests).
const CHANNELS: &str = include_str!("../tests/programs/mpsc_sum.rs");

/// The monitor's own CPU time so far, in microseconds.
fn cpu_us() -> u64 {
    let mut u = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a rusage into the buffer it is given.
    let u = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, u.as_mut_ptr());
        u.assume_init()
    };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    us(u.ru_utime) + us(u.ru_stime)
}

/// Two threads sending 100,000 messages each over std's channel: one run
/// from scratch per row.
fn channels_table() {
    println!(
        "| channel, 2 x 100,000 messages | strategy | steps | time | × calls | exits/step | sync-site steps without an exit | monitor µs/step |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    let dir = tempfile::tempdir().unwrap();
    let exe = compiled(dir.path(), "channels.rs", CHANNELS, &["rustc", "-O"]);
    let run = |level: SyncPoints, strategy: Box<dyn rewind_fuzz::sched::Strategy>| {
        let mut k = KernelConfig::new(&exe.to_string_lossy(), &["100000".to_string()]);
        k.sync_points = level;
        let mut c = RunConfig::new(k);
        c.memory_mib = 512;
        let mut vm = rewind_fuzz::engine::Vm::new(&c, FileSource::host()).expect("machine");
        vm.set_strategy(strategy);
        vm.record_events();
        let cpu = cpu_us();
        let r = vm.run().expect("run");
        (r, cpu_us() - cpu)
    };
    let (calls, _) = run(SyncPoints::Calls, StrategyKind::Default.build(0, 0));
    let base = calls.wall_us as f64;
    let line = |level: SyncPoints, name: &str, (r, cpu): (rewind_fuzz::engine::RunReport, u64)| {
        let sites = r.events.as_ref().map_or(0, |e| {
            e.iter()
                .filter(|e| matches!(e.op, rewind_fuzz::observe::trace::Operation::Sync { .. }))
                .count()
        });
        let share = match sites {
            0 => "-".to_string(),
            n => format!("{:.1}%", 100.0 * r.buffered_sites as f64 / n as f64),
        };
        println!(
            "| {level} | {name} | {} | {:.2} s | {:.1} | {:.4} | {share} | {:.2} |",
            r.steps,
            r.wall_us as f64 / 1e6,
            r.wall_us as f64 / base,
            r.exits as f64 / r.steps.0.max(1) as f64,
            cpu as f64 / r.steps.0.max(1) as f64,
        );
    };
    line(SyncPoints::Calls, "default", (calls, 0));
    line(
        SyncPoints::Atomics,
        "default",
        run(SyncPoints::Atomics, StrategyKind::Default.build(0, 0)),
    );
    let pct = run(
        SyncPoints::Atomics,
        Box::new(rewind_fuzz::sched::Pct::new(3, 800_000, 7)),
    );
    let schedule = pct.0.schedule.clone();
    line(SyncPoints::Atomics, "pct:3", pct);
    line(
        SyncPoints::Atomics,
        "replay of pct:3's schedule",
        run(
            SyncPoints::Atomics,
            Box::new(rewind_fuzz::sched::Replay::new(schedule)),
        ),
    );
}

fn sites_table() {
    println!(
        "| object | level | atomic sites | spin sites | load sites | store sites | left (unsupported) | with a trampoline | with a trap | discovery |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    sites_in("Rust test binary (rust-libtest)", &exe("rust-libtest"));
    sites_in("libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6");
}
