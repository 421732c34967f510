//! Sync sites: the instructions of user code that become scheduling points,
//! from finding them in an object to the step a thread takes at one.
//!
//! A thread can only be switched at a scheduling point, and system calls
//! and the pthread shim's hints are not enough: Rust's `Mutex`, C11 and C++
//! atomics and every lock-free structure synchronize with LOCK-prefixed
//! instructions, and a spin-wait makes no system call at all. Discovery
//! ([`find`]) decodes an object's code (iced-x86), bounded by its function symbols and
//! `.eh_frame` ranges so that no data is decoded as code, and finds:
//!
//! - atomic read-modify-writes: every LOCK-prefixed instruction and every
//!   XCHG with a memory operand;
//! - spin hints: PAUSE;
//! - spin loops: a short backward branch whose body re-reads memory at
//!   addresses the loop does not change, and neither stores (but for an
//!   atomic on the word it polls, as a test-and-set loop does) nor calls
//!   (but for tiny functions that only load, as an unoptimized
//!   `AtomicBool::load` is); the site is the backward branch;
//! - at [`SyncPoints::Globals`], plain loads and stores whose address is
//!   RIP-relative into a writable segment: global variables.
//!
//! Only instructions the emulator ([`emulate`]) executes are chosen;
//! the rest are counted and left alone. A site is keyed by the file offset
//! of its first byte, so one table serves every mapping of the file.

//!
//! The subsystem, in the order a site lives through it:
//!
//! | what | where |
//! |---|---|
//! | a site, the levels and step rules | [`site`] |
//! | finding sites in an object | [`find`], its table in [`table`] |
//! | which atomics take locks (lock roles, evidence) | [`acquire`] |
//! | executing a site's instruction for its thread | [`emulate`] |
//! | out-of-line copies the guest's dispatcher runs | [`out_of_line`] |
//! | jumps to trampolines instead of breakpoints | [`trampoline`] |
//! | the guest's dispatcher and its contract | `guest/sites.S`, `arch::abi` |
//! | patching a mapping | `memory::space` (`jumps.rs`) |
//! | the step a thread takes at a site | `kernel::sync` |
//! | sites taken without an exit, buffered steps | `kernel::site_path`, `engine::ring` |
//! | what lock inference makes of a site's access | `observe::locks` |
//!
//! `code` lies below `kernel`, so the halves that act on a running
//! program (steps, the no-exit path, the ring) live in the kernel and
//! the engine; everything about the code itself is here.

pub mod acquire;
pub mod emulate;
pub mod find;
pub mod out_of_line;
pub mod site;
pub mod table;
pub mod trampoline;

pub use find::{discover, discover_in, is_runtime_symbol, sites_of};
pub use site::{SITE_EXIT_OPCODE, Site, SiteKind, StepRules, SyncPoints};
pub use table::{Function, Plan, Scope, SiteCounts, SiteTable};
