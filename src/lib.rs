//! rewind-fuzz: a schedule-space fuzzer for multithreaded Linux programs.
//!
//! The target runs in a single-vCPU KVM machine whose monitor implements the
//! Linux system-call interface itself, so that the thread schedule is an input
//! and the same input gives the same run, step for step.

pub mod arch;
pub mod bench;
pub mod cli;
pub mod code;
pub mod engine;
pub mod escape;
pub mod explore;
pub mod fsutil;
pub mod fuzz;
pub mod gdb;
pub mod harness;
pub mod ids;
pub mod kernel;
pub mod machine;
pub mod memory;
pub mod observe;
pub mod report;
pub mod rwd;
pub mod sched;
