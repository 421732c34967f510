//! One sync site, and the levels and rules that say which instructions are
//! sites and how their steps are made.

use serde::{Deserialize, Serialize};

use super::acquire::LockRole;

/// How far scheduling points reach into user code.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum SyncPoints {
    /// System calls and the pthread shim's hints only.
    #[default]
    Calls,
    /// Also atomic read-modify-writes, spin hints and spin loops.
    Atomics,
    /// Also plain loads and stores of global variables.
    Globals,
}

impl SyncPoints {
    pub fn as_str(self) -> &'static str {
        match self {
            SyncPoints::Calls => "calls",
            SyncPoints::Atomics => "atomics",
            SyncPoints::Globals => "globals",
        }
    }
}

impl std::fmt::Display for SyncPoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for SyncPoints {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "calls" => Ok(SyncPoints::Calls),
            "atomics" => Ok(SyncPoints::Atomics),
            "globals" => Ok(SyncPoints::Globals),
            _ => Err(format!(
                "unknown --sync-points {s:?}: use calls, atomics or globals"
            )),
        }
    }
}

/// How the steps of a run are made, where that changed between versions.
/// Schedules and reproducers name decisions by step number, so one made
/// under earlier rules replays under them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepRules {
    /// Reproducers of format 6 and earlier, schedules of version 2 and
    /// earlier: an atomic in a retry loop gives way at every hit.
    Format6,
    /// An atomic in a retry loop gives way when the thread retries it (its
    /// previous step was the same instruction): a compare-and-swap that
    /// succeeds at once waits for nobody. Reproducers of formats 7 and 8,
    /// schedules of versions 3 and 4.
    Format7,
    /// The format-7 rules, and loops with no sync site tick (see
    /// `code::sites::trampoline`): virtual time moves inside computation and a
    /// thread computing for a slice's worth of ticks can be preempted.
    /// Reproducers of format 9, schedules of version 5.
    Format9,
    /// The format-9 rules, and a wait another thread ended (a futex wait
    /// woken, a child collected, a poll that found something ready) is
    /// work that completed, for the watch of progress: a producer and a
    /// consumer passing items through one slot wake each other round the
    /// same states, and do work.
    #[default]
    Format10,
}

impl StepRules {
    /// The rules a schedule of `version` was made under.
    pub fn of_schedule(version: u32) -> StepRules {
        match version {
            ..=2 => StepRules::Format6,
            3 | 4 => StepRules::Format7,
            5 => StepRules::Format9,
            _ => StepRules::Format10,
        }
    }

    /// Whether loops with no sync site tick.
    pub fn ticks(self) -> bool {
        matches!(self, StepRules::Format9 | StepRules::Format10)
    }

    /// Whether a wait another thread ended is work that completed (see
    /// `observe::progress`).
    pub fn woken_waits_are_work(self) -> bool {
        self == StepRules::Format10
    }
}

/// What a site does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SiteKind {
    /// An atomic read-modify-write.
    AtomicRmw,
    /// A spin hint or the backward branch of a spin loop: the thread waits
    /// for another and gives way.
    Spin,
    /// A plain load of a global variable.
    Load,
    /// A plain store (or read-modify-write) of a global variable.
    Store,
    /// The backward branch of a loop with no other site: every so many
    /// times it is taken, a step (a tick), so that time moves on and a
    /// thread can be preempted in computation (see `code::sites::trampoline`).
    Tick,
}

impl SiteKind {
    /// The kind numbered `n` (its position in the enum).
    pub fn from_u8(n: u8) -> Option<SiteKind> {
        [
            SiteKind::AtomicRmw,
            SiteKind::Spin,
            SiteKind::Load,
            SiteKind::Store,
            SiteKind::Tick,
        ]
        .get(n as usize)
        .copied()
    }

    /// The name in traces.
    pub fn name(self) -> &'static str {
        match self {
            SiteKind::AtomicRmw => "atomic-rmw",
            SiteKind::Spin => "spin",
            SiteKind::Load => "load",
            SiteKind::Store => "store",
            SiteKind::Tick => "tick",
        }
    }
}

/// One instruction that becomes a scheduling point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Site {
    /// File offset of the instruction's first byte.
    pub offset: u64,
    pub kind: SiteKind,
    /// Whether a hit gives way to other threads (a spin, or an atomic in a
    /// retry loop).
    pub spins: bool,
    /// Whether the guest's site dispatcher can take a hit without an exit
    /// (see `out_of_line`): patched with `int3` then, otherwise with
    /// [`SITE_EXIT_OPCODE`].
    pub fast: bool,
    /// The instruction's bytes.
    pub bytes: [u8; 15],
    pub len: u8,
    /// What the code around it says it does to a lock when it takes a
    /// word from free (see `acquire`): nothing, for most atomics.
    pub acquires: Option<LockRole>,
}

impl Site {
    /// The original instruction.
    pub fn code(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

/// The byte over the first byte of a site the dispatcher cannot take: an
/// opcode invalid in 64-bit mode (`into`), so its `#UD` is an exit, where
/// an `int3` would first visit the dispatcher.
pub const SITE_EXIT_OPCODE: u8 = 0xce;

impl Site {
    /// The byte the site's first byte becomes in guest memory.
    pub fn patch_byte(&self) -> u8 {
        if self.fast { 0xcc } else { SITE_EXIT_OPCODE }
    }
}
