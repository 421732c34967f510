//! Identifiers every layer shares: who (a thread, a process), when (a step,
//! virtual time) and where (a guest address).
//!
//! Each is a number in a wrapper that serializes as the bare number
//! (`#[serde(transparent)]`), so reproducers and JSON output read and
//! write the same bytes as the numbers did.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A guest thread id (also the process id for the main thread).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Tid(pub u32);

impl fmt::Display for Tid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// A process id: the thread id of its first thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Pid(pub u32);

impl Pid {
    /// The thread whose id the process bears (its first thread, which may
    /// have ended while the process lives on).
    pub fn first_thread(self) -> Tid {
        Tid(self.0)
    }
}

impl From<Tid> for Pid {
    /// The process a thread starts, by that thread's id.
    fn from(tid: Tid) -> Pid {
        Pid(tid.0)
    }
}

impl fmt::Display for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// A step number: a point in a run's count of scheduling steps (system
/// calls, pthread calls and sync sites), from 1. The steps a run took is
/// the number of its last step.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Step(pub u64);

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// An address in the guest's virtual address space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct GuestAddr(pub u64);

/// Addresses are read in hex: `0x7fff...`.
impl fmt::Display for GuestAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&format!("{:#x}", self.0))
    }
}

/// `{:x}` and `{:#x}` as of the number, so format strings written for a
/// `u64` address print the same.
impl fmt::LowerHex for GuestAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::LowerHex::fmt(&self.0, f)
    }
}

/// Virtual nanoseconds since boot.
pub type Nanos = u64;

#[cfg(test)]
mod tests {
    use super::*;

    /// The wrappers are invisible in every format the project writes.
    #[test]
    fn serialize_as_their_numbers() {
        let cfg = bincode::config::standard();
        assert_eq!(
            bincode::serde::encode_to_vec(Step(300), cfg).unwrap(),
            bincode::serde::encode_to_vec(300u64, cfg).unwrap()
        );
        assert_eq!(
            bincode::serde::encode_to_vec((Pid(7), Tid(8)), cfg).unwrap(),
            bincode::serde::encode_to_vec((7u32, 8u32), cfg).unwrap()
        );
        assert_eq!(
            bincode::serde::encode_to_vec(Some(GuestAddr(u64::MAX)), cfg).unwrap(),
            bincode::serde::encode_to_vec(Some(u64::MAX), cfg).unwrap()
        );
        assert_eq!(serde_json::to_string(&Step(42)).unwrap(), "42");
        assert_eq!(serde_json::to_string(&GuestAddr(0x1000)).unwrap(), "4096");
        let back: GuestAddr = serde_json::from_str("4096").unwrap();
        assert_eq!(back, GuestAddr(0x1000));
    }

    #[test]
    fn addresses_print_in_hex() {
        let a = GuestAddr(0x5555_5555_51fa);
        assert_eq!(a.to_string(), "0x5555555551fa");
        assert_eq!(format!("[{a:>16}]"), "[  0x5555555551fa]");
        assert_eq!(
            format!("{a:#x} {a:x} {a:#014x}"),
            "0x5555555551fa 5555555551fa 0x5555555551fa"
        );
        // Widths and alignment apply as to the numbers (`--trace` lines
        // are columns).
        assert_eq!(format!("[{:>6}] {:<3}|", Step(9), Tid(12)), "[     9] 12 |");
        assert_eq!(Pid::from(Tid(3)).to_string(), "3");
        assert_eq!(Pid(3).first_thread(), Tid(3));
    }
}
