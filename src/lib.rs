//! rewind-fuzz: a schedule-space fuzzer for multithreaded Linux programs.
//!
//! The target runs in a single-vCPU KVM machine whose monitor implements the
//! Linux system-call interface itself, so that the thread schedule is an input
//! and the same input gives the same run, step for step.

pub mod abi;
pub mod bench;
pub mod cli;
pub mod cpu;
pub mod fsutil;
pub mod fuzz;
pub mod gdb;
pub mod harness;
pub mod kernel;
pub mod layout;
pub mod locks;
pub mod machine;
pub mod memory;
pub mod minimize;
pub mod outcome;
pub mod report;
pub mod rwd;
pub mod sched;
pub mod shim;
pub mod signature;
pub mod symbols;
pub mod trace;
pub mod unwind;
pub mod vm;
