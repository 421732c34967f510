//! A small strategy comparison: schedules to the bug of a few harnesses
//! whose bugs need different things (a preemption among few steps, a
//! choice at blocking points, three preemptions, one precise preemption).
//!
//! `cargo bench --bench strategies` prints the tables `rewind-fuzz bench`
//! prints, for these harnesses and without the native loop; `cargo test
//! --benches` runs it with a tiny budget. The full comparison is
//! `rewind-fuzz bench` (see the README).

use std::time::Duration;

use indicatif::ProgressBar;
use rewind_fuzz::bench::{self, BenchConfig};
use rewind_fuzz::harness;

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` passes nothing.
    let full = std::env::args().any(|a| a == "--bench");
    let (budget, seeds) = if full { (300, 5) } else { (10, 1) };
    let names = ["atomicity", "philosophers", "depth3", "pool-shutdown-uaf"];
    let cfg = BenchConfig {
        columns: bench::parse_columns(
            &["random,pct:1,pct:2,pct:3,pos".into()],
            &[rewind_fuzz::code::SyncPoints::Atomics],
        )
        .unwrap(),
        harnesses: names
            .iter()
            .map(|n| harness::find(n).expect("bundled harness"))
            .collect(),
        budget,
        trial_time: None,
        seeds,
        fixed_budget: budget,
        jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
        native_cap: None,
        native_floor: Duration::ZERO,
        command: format!("cargo bench --bench strategies (budget {budget}, {seeds} seeds)"),
    };
    let report = bench::runner::run(&cfg, &ProgressBar::hidden()).expect("bench runs");
    println!("{}", report.command);
    println!();
    print!("{}", report.to_table());
    assert_eq!(
        report.summary().false_positives,
        0,
        "a fixed twin failed: {:?}",
        report.fixed
    );
}
