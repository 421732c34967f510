//! Engine benchmarks: the cost of a system call round trip and of whole runs.
//!
//! `cargo bench --bench engine` prints one table. Every row gives exits per
//! step and microseconds per exit beside the headline figure, so a number
//! measured on a nested KVM (where an exit costs tens of microseconds) can be
//! projected to bare metal (about one microsecond per exit).

use std::time::{Duration, Instant};

use rewind_fuzz::engine::{RunConfig, RunReport, Vm};
use rewind_fuzz::harness::{self, Variant};
use rewind_fuzz::kernel::KernelConfig;
use rewind_fuzz::kernel::vfs::FileSource;

fn config(name: &str, max_steps: u64) -> RunConfig {
    config_with(name, &[], max_steps)
}

fn config_with(name: &str, args: &[&str], max_steps: u64) -> RunConfig {
    let h = harness::find(name).expect("bundled harness");
    let exe = harness::build(&h, Variant::Buggy).expect("harness builds");
    let exe = exe.canonicalize().unwrap().to_string_lossy().into_owned();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let mut k = KernelConfig::new(&exe, &args);
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
        figure: format!("{:.1} µs/step", us / r.steps.0 as f64),
        steps: r.steps.0 as f64,
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
        steps += r.steps.0;
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

/// Runs `c` `runs` times from scratch; the mean report figures and the
/// mean time of a run.
fn mean_runs(c: &RunConfig, runs: u32) -> (f64, f64, f64, f64) {
    let (mut steps, mut exits, mut switches, mut busy) = (0u64, 0u64, 0u64, Duration::ZERO);
    for _ in 0..runs {
        let (r, d) = run_once(c);
        assert!(r.outcome.is_success(), "{:?}", r.outcome);
        steps += r.steps.0;
        exits += r.exits;
        switches += r.address_space_switches;
        busy += d;
    }
    let n = runs as f64;
    (
        steps as f64 / n,
        exits as f64 / n,
        switches as f64 / n,
        busy.as_secs_f64() * 1e6 / n,
    )
}

/// One child process started and waited for: fork, execve of /bin/true,
/// its whole run, exit, waitpid (the harness starts fifty).
fn fork_exec_wait(runs: u32) -> Row {
    let (steps, exits, _, us) = mean_runs(&config("fork-exec-wait", 1_000_000), runs);
    Row {
        what: "fork + exec /bin/true + wait (per child)".into(),
        figure: format!("{:.0} µs/child", us / 50.0),
        steps: steps / 50.0,
        exits: exits / 50.0,
        us_per_exit: us / exits,
    }
}

/// A pipe round trip between two processes and between two threads; the
/// difference, per address-space switch, is what a switch costs.
fn pipe_round_trips(runs: u32) -> Vec<Row> {
    let rounds = 200.0;
    let procs = mean_runs(&config("pipe-ping-pong", 1_000_000), runs);
    let threads = mean_runs(
        &config_with("pipe-ping-pong", &["threads"], 1_000_000),
        runs,
    );
    let row = |what: &str, (steps, exits, _, us): (f64, f64, f64, f64)| Row {
        what: what.into(),
        figure: format!("{:.0} µs/round trip", us / rounds),
        steps: steps / rounds,
        exits: exits / rounds,
        us_per_exit: us / exits,
    };
    let switches = procs.2.max(1.0);
    let extra_us = (procs.3 - threads.3).max(0.0);
    let extra_exits = (procs.1 - threads.1).max(0.0);
    vec![
        row("pipe round trip between two processes", procs),
        row("pipe round trip between two threads", threads),
        Row {
            what: format!("address-space switch ({switches:.0} per run; processes minus threads)"),
            figure: format!("{:.1} µs/switch", extra_us / switches),
            steps: 0.0,
            exits: extra_exits / switches,
            us_per_exit: if extra_exits > 0.0 {
                extra_us / extra_exits
            } else {
                0.0
            },
        },
    ]
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` passes nothing.
    let quick = !std::env::args().any(|a| a == "--bench");
    let runs = if quick { 3 } else { 100 };
    let mut rows = vec![
        syscall_round_trip(),
        whole_runs("counter", runs),
        whole_runs("hello", runs),
        fork_exec_wait(runs.min(20)),
    ];
    rows.extend(pipe_round_trips(runs.min(20)));
    println!("| benchmark | figure | steps | exits | exits/step | µs/exit |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for r in rows {
        let per_step = if r.steps > 0.0 {
            format!("{:.2}", r.exits / r.steps)
        } else {
            "-".into()
        };
        println!(
            "| {} | {} | {:.0} | {:.1} | {per_step} | {:.1} |",
            r.what, r.figure, r.steps, r.exits, r.us_per_exit
        );
    }
}
