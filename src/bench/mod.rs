//! The benchmark of exploration strategies: for every strategy, bug-suite
//! harness and seed, how many schedules it takes to reach the harness's
//! bug, beside a native stress loop given the same wall time.
//!
//! The pieces are apart so that all but the runner work without KVM:
//! [`plan`] turns what was asked into a [`BenchConfig`] (the programs
//! chosen, the budgets and their defaults), [`Column`] names a way of
//! choosing schedules, [`expect`] decides whether a
//! run is the bug a manifest describes, [`results`] holds what a bench
//! measured and turns it into a summary, a table, CSV and JSON, and [`plot`]
//! draws the cumulative plot. [`runner`] runs the trials in machines and
//! [`native`] runs the stress loop.

mod column;
pub mod expect;
pub mod native;
pub mod plan;
pub mod plot;
pub mod results;
pub mod runner;

pub use column::{Column, DEFAULT_COLUMNS, parse_columns};
pub use plan::{PlanError, Request};
pub use results::{BenchReport, FixedTrial, NativeLoop, Trial, Unrunnable};
pub use runner::{BenchConfig, BenchError};
