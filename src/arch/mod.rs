//! The guest as the monitor knows it: the x86-64 thread state, where things
//! live in guest memory, the Linux system-call numbers, and the contract
//! with the guest-side code (the entry stub and the pthread shim).

pub mod abi;
pub mod cpu;
pub mod layout;
pub mod shim;
pub mod syscalls;
