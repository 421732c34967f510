//! What the engine observes of a run: its steps and their trace, who holds
//! which lock and in which order locks are taken, and how the run ended.
//! Nothing here knows KVM or the Linux personality; the kernel reports to
//! it and the front ends read it.

pub mod failure;
pub mod locks;
pub mod outcome;
pub mod trace;
