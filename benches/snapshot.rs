//! Snapshot benchmarks: restore cost against dirtied pages, schedules per
//! second with and without the snapshot, and resident memory over many
//! restores (which must stay flat: the run fails loudly if it grows).
//!
//! `cargo bench --bench snapshot` (add `-- --restores N` to change the
//! stability run's length; the default is 100000).

use std::time::Instant;

use rewind_fuzz::engine::{RunConfig, SnapshotAt, Vm};
use rewind_fuzz::harness::{self, Variant};
use rewind_fuzz::kernel::KernelConfig;
use rewind_fuzz::kernel::vfs::FileSource;
use rewind_fuzz::sched::RandomWalk;

fn config(name: &str, args: &[&str]) -> RunConfig {
    let h = harness::find(name).expect("bundled harness");
    let exe = harness::build(&h, Variant::Buggy).expect("harness builds");
    let exe = exe.canonicalize().unwrap().to_string_lossy().into_owned();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let mut c = RunConfig::new(KernelConfig::new(&exe, &args));
    c.memory_mib = 512;
    c
}

/// Restore time for a run that dirtied about `pages` pages.
fn restore_row(pages: u64) -> (u64, f64, f64) {
    let c = config("dirty-pages", &[&pages.to_string()]);
    let mut vm = Vm::new(&c, FileSource::host()).unwrap();
    vm.run().unwrap();
    let (mut us, mut restored, n) = (0u64, 0u64, 20);
    for _ in 0..n {
        let r = vm.run().unwrap();
        us += r.restore_us;
        restored += r.restored_pages;
    }
    (
        restored / n,
        us as f64 / n as f64,
        us as f64 / restored.max(1) as f64,
    )
}

struct Throughput {
    per_sec: f64,
    exits: f64,
    steps: f64,
}

/// Schedules per second on one job, like `check --jobs 1`.
fn throughput(name: &str, snapshot: bool, runs: u64) -> Throughput {
    let mut c = config(name, &[]);
    if !snapshot {
        c.snapshot_at = SnapshotAt::Never;
    }
    let source = FileSource::host();
    let mut vm: Option<Vm> = None;
    let (mut exits, mut steps) = (0, 0);
    let start = Instant::now();
    for seed in 0..runs {
        if !vm.as_ref().is_some_and(|v| v.can_run()) {
            vm = Some(Vm::new(&c, source.clone()).unwrap());
        }
        let vm = vm.as_mut().unwrap();
        vm.set_strategy(Box::new(RandomWalk::new(seed)));
        let r = vm.run().unwrap();
        exits += r.exits;
        steps += r.steps.0;
    }
    Throughput {
        per_sec: runs as f64 / start.elapsed().as_secs_f64(),
        exits: exits as f64 / runs as f64,
        steps: steps as f64 / runs as f64,
    }
}

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// Resident memory over `restores` restores: flat after warm-up, or panic.
fn stability(restores: u64) {
    let c = config("dirty-pages", &["16"]);
    let mut vm = Vm::new(&c, FileSource::host()).unwrap();
    let warm = restores / 10;
    let mut base = 0;
    let start = Instant::now();
    for i in 0..restores {
        let r = vm.run().unwrap();
        assert!(r.outcome.is_success());
        if i == warm {
            base = rss_kib();
        }
    }
    let end = rss_kib();
    let growth = (end as f64 - base as f64) / base as f64 * 100.0;
    println!(
        "\n{restores} restores in {:.0?}: resident memory {base} KiB after warm-up, {end} KiB at the end ({growth:+.2}%)",
        start.elapsed()
    );
    assert!(
        growth.abs() <= 5.0,
        "resident memory grew {growth:.2}% over {restores} restores"
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bench = args.iter().any(|a| a == "--bench");
    let restores = args
        .iter()
        .position(|a| a == "--restores")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(if bench { 100_000 } else { 200 });
    let runs = if bench { 200 } else { 5 };

    println!("| dirtied pages (requested) | pages restored | restore µs | µs per page |");
    println!("| --- | --- | --- | --- |");
    for pages in [0, 64, 256, 1024, 4096] {
        let (restored, us, per) = restore_row(pages);
        println!("| {pages} | {restored} | {us:.0} | {per:.2} |");
    }

    println!();
    // Exits are the cost on this host: the exits left after the snapshot,
    // at the round trip's price, bound what the snapshot can gain.
    println!(
        "| harness | from scratch | from snapshot | speed-up | exits/schedule from scratch | from snapshot | steps/schedule |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for name in ["philosophers", "cpp-threads", "rust-libtest"] {
        let fresh = throughput(name, false, runs);
        let snap = throughput(name, true, runs);
        println!(
            "| {name} | {:.1}/s | {:.1}/s | {:.1}x | {:.0} | {:.0} | {:.0} |",
            fresh.per_sec,
            snap.per_sec,
            snap.per_sec / fresh.per_sec,
            fresh.exits,
            snap.exits,
            snap.steps
        );
    }
    stability(restores);
}
