//! Engine benchmarks: the cost of a system call round trip and of whole runs.
//!
//! `cargo bench --bench engine` prints one table. Every row gives exits per
//! step and microseconds per exit beside the headline figure, so a number
//! measured on a nested KVM (where an exit costs tens of microseconds) can be
//! projected to bare metal (about one microsecond per exit).

use std::time::{Duration, Instant};

use rewind_fuzz::harness::{self, Variant};
use rewind_fuzz::kernel::KernelConfig;
use rewind_fuzz::kernel::vfs::FileSource;
use rewind_fuzz::vm::{RunConfig, RunReport, Vm};

fn config(name: &str, max_steps: u64) -> RunConfig {
    let h = harness::find(name).expect("bundled harness");
    let exe = harness::build(&h, Variant::Buggy).expect("harness builds");
    let exe = exe.canonicalize().unwrap().to_string_lossy().into_owned();
    let mut k = KernelConfig::new(&exe, &[]);
    k.max_steps = max_steps;
    let mut c = RunConfig::new(k);
    c.memory_mib = 256;
    c
}

struct Row {
    what: String,
    figure: String,
    steps: f64,
    exits: f64,
    us_per_exit: f64,
}

fn run_once(c: &RunConfig) -> (RunReport, Duration) {
    let mut vm = Vm::new(c, FileSource::host()).expect("machine");
    let t = Instant::now();
    let r = vm.run().expect("run");
    (r, t.elapsed())
}

fn syscall_round_trip() -> Row {
    let steps = 50_000;
    let c = config("getpid-loop", steps);
    let (r, t) = run_once(&c);
    let us = t.as_secs_f64() * 1e6;
    Row {
        what: "system call round trip (getpid loop)".into(),
        figure: format!("{:.1} µs/step", us / r.steps as f64),
        steps: r.steps as f64,
        exits: r.exits as f64,
        us_per_exit: us / r.exits as f64,
    }
}

fn whole_runs(name: &str, runs: u32) -> Row {
    let c = config(name, 1_000_000);
    let t = Instant::now();
    let (mut steps, mut exits, mut busy) = (0u64, 0u64, Duration::ZERO);
    for _ in 0..runs {
        let (r, d) = run_once(&c);
        assert!(r.outcome.is_success(), "{name}: {:?}", r.outcome);
        steps += r.steps;
        exits += r.exits;
        busy += d;
    }
    let total = t.elapsed().as_secs_f64();
    Row {
        what: format!("{name}: whole runs from scratch (incl. machine setup)"),
        figure: format!("{:.1} runs/s", runs as f64 / total),
        steps: steps as f64 / runs as f64,
        exits: exits as f64 / runs as f64,
        us_per_exit: busy.as_secs_f64() * 1e6 / exits as f64,
    }
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` passes nothing.
    let quick = !std::env::args().any(|a| a == "--bench");
    let runs = if quick { 3 } else { 100 };
    let rows = vec![
        syscall_round_trip(),
        whole_runs("counter", runs),
        whole_runs("hello", runs),
    ];
    println!("| benchmark | figure | steps | exits | exits/step | µs/exit |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for r in rows {
        println!(
            "| {} | {} | {:.0} | {:.0} | {:.2} | {:.1} |",
            r.what,
            r.figure,
            r.steps,
            r.exits,
            r.exits / r.steps,
            r.us_per_exit
        );
    }
}
