//! What a run reports: its coverage features, hashed into a map for the
//! corpus feedback, and the run itself (report, features, failure and its
//! signature) for the session's feedbacks and objective.

use std::borrow::Cow;

use libafl::observers::StdMapObserver;
use serde::{Deserialize, Serialize};

use crate::engine::{Coverage, RunReport};
use crate::observe::failure::FailureKind;
use crate::report::signature::Signature;

/// Size of the coverage map (entries).
pub const MAP_SIZE: usize = 1 << 16;

/// The kinds of coverage feature.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum FeatureKind {
    LockOrder,
    Interleaving,
    Handoff,
    /// (site of the write a read observed, site of the read), for the
    /// accesses of sync sites.
    ReadsFrom,
}

impl FeatureKind {
    pub const ALL: [FeatureKind; 4] = [
        FeatureKind::LockOrder,
        FeatureKind::Interleaving,
        FeatureKind::Handoff,
        FeatureKind::ReadsFrom,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FeatureKind::LockOrder => "lock_order",
            FeatureKind::Interleaving => "interleavings",
            FeatureKind::Handoff => "handoffs",
            FeatureKind::ReadsFrom => "reads_from",
        }
    }
}

/// A feature's stable 64-bit identity.
pub fn feature_id(kind: FeatureKind, a: u64, b: u64) -> u64 {
    let mut bytes = [0u8; 17];
    bytes[0] = kind as u8;
    bytes[1..9].copy_from_slice(&a.to_le_bytes());
    bytes[9..].copy_from_slice(&b.to_le_bytes());
    xxhash_rust::xxh3::xxh3_64(&bytes)
}

/// Every feature of a run, by kind.
pub fn features(c: &Coverage) -> Vec<(FeatureKind, u64)> {
    let pairs = c
        .lock_order
        .iter()
        .map(|p| (FeatureKind::LockOrder, p))
        .chain(
            c.interleavings
                .keys()
                .map(|p| (FeatureKind::Interleaving, p)),
        )
        .chain(c.handoffs.iter().map(|p| (FeatureKind::Handoff, p)))
        .chain(c.reads_from.iter().map(|p| (FeatureKind::ReadsFrom, p)));
    pairs
        .map(|(kind, (a, b))| (kind, feature_id(kind, *a, *b)))
        .collect()
}

/// One run as the executor reports it.
#[derive(Clone, Debug)]
pub struct Run {
    pub report: RunReport,
    /// Its features, as [`features`] gives them.
    pub features: Vec<(FeatureKind, u64)>,
    /// The program's failure, if it failed, with its signature (naming it
    /// needs the machine the run left, which only the executor has).
    pub failure: Option<(FailureKind, Signature)>,
}

/// The run just made: empty before a run, and after an execution the
/// budget did not allow.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct RunObserver {
    #[serde(skip)]
    pub run: Option<Run>,
}

impl libafl_bolts::Named for RunObserver {
    fn name(&self) -> &Cow<'static, str> {
        static NAME: Cow<'static, str> = Cow::Borrowed("run");
        &NAME
    }
}

impl<I, S> libafl::observers::Observer<I, S> for RunObserver {
    fn pre_exec(&mut self, _state: &mut S, _input: &I) -> Result<(), libafl::Error> {
        self.run = None;
        Ok(())
    }
}

/// The observers of a run: the coverage map and the run itself.
pub type Observers = (StdMapObserver<'static, u8, false>, (RunObserver, ()));

/// A new, empty set of observers.
pub fn observers() -> Observers {
    let map = StdMapObserver::owned("features", vec![0u8; MAP_SIZE]);
    (map, (RunObserver::default(), ()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_of_each_kind_are_distinct() {
        let a = feature_id(FeatureKind::LockOrder, 1, 2);
        assert_ne!(a, feature_id(FeatureKind::Handoff, 1, 2));
        assert_ne!(a, feature_id(FeatureKind::LockOrder, 2, 1));
        assert_eq!(a, feature_id(FeatureKind::LockOrder, 1, 2));
    }
}
