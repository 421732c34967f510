//! Identifiers every layer shares: who (a thread) and when (virtual time).

use serde::{Deserialize, Serialize};

/// A guest thread id (also the process id for the main thread).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Tid(pub u32);

impl std::fmt::Display for Tid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Virtual nanoseconds since boot.
pub type Nanos = u64;
