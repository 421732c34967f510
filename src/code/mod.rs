//! What the monitor knows of the code it runs: the objects mapped into
//! the guest, how to unwind a stack through them (`.eh_frame`), and the
//! sync sites in them, instructions of user code that become scheduling
//! points (atomic read-modify-writes, spin loops, global loads and stores),
//! with an emulator that executes such an instruction for its thread.

pub mod inline;
pub mod sites;
pub mod unwind;

use std::sync::Arc;

pub use sites::{Site, SiteKind, SiteTable, StepRules, SyncPoints};

/// One file-backed mapping of the guest, as /proc/self/maps would list it.
#[derive(Clone, Debug)]
pub struct Mapping {
    /// First guest-virtual address of the mapping.
    pub start: u64,
    /// One past its last address.
    pub end: u64,
    /// Offset in the file of the byte mapped at `start`.
    pub file_offset: u64,
    /// Path of the file, as the guest named it.
    pub path: String,
    /// Contents of the whole file (not only of the mapped range).
    pub data: Arc<Vec<u8>>,
}
