//! What the session and its worker processes tell each other through the
//! LLMP broker: one tag, one [`Message`] per LLMP message, in JSON (an
//! entry reads as its file in `queue/` does, and is checked the same way).

use libafl_bolts::llmp::Tag;
use serde::{Deserialize, Serialize};

use crate::fuzz::feedbacks::NewFailure;
use crate::fuzz::input::{MAX_DECISIONS, ScheduleInput};
use crate::fuzz::observers::FeatureKind;

/// The LLMP tag of every message of a session ("RWDF").
pub const TAG: Tag = Tag(0x5257_4446);

/// The largest message decoded: a failure with a schedule of the most
/// decisions an input may carry is far below it.
const MAX_MESSAGE: usize = 4 << 20;

/// Who sent a message: a worker's number, or the session.
pub type Origin = u32;

/// The session itself (entries taken from the sync directory or other
/// nodes).
pub const SESSION: Origin = u32::MAX;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Message {
    /// A new corpus entry.
    Entry { from: Origin, input: ScheduleInput },
    /// Features a worker's runs reached before any other run it knew of.
    Features {
        from: Origin,
        features: Vec<(FeatureKind, u64)>,
    },
    /// A failure whose signature the worker had not seen; the session
    /// passes it on when nobody had.
    Failure { from: Origin, failure: NewFailure },
    /// A run stopped for want of a system call the monitor lacks.
    Unsupported { from: Origin, summary: String },
    /// A worker could not go on (not a crash: starting it again would
    /// fail the same way); the session ends with this error.
    Error { from: Origin, message: String },
}

impl Message {
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("messages always encode")
    }

    /// Decodes a message, or `None` for anything else (another tag, a
    /// message too large or malformed, an input with more decisions than
    /// an input may carry).
    pub fn decode(tag: Tag, bytes: &[u8]) -> Option<Message> {
        if tag != TAG || bytes.len() > MAX_MESSAGE {
            return None;
        }
        let m: Message = serde_json::from_slice(bytes).ok()?;
        let input = match &m {
            Message::Entry { input, .. } => Some(input),
            Message::Failure { failure, .. } => Some(&failure.input),
            _ => None,
        };
        if input.is_some_and(|i| i.decisions.len() > MAX_DECISIONS) {
            return None;
        }
        Some(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::{Seeded, StrategyKind};

    #[test]
    fn a_message_survives_the_wire_and_garbage_is_refused() {
        let m = Message::Entry {
            from: 3,
            input: ScheduleInput::fresh(7, Seeded::new(StrategyKind::Random, 9)),
        };
        let back = Message::decode(TAG, &m.encode()).unwrap();
        assert!(matches!(back, Message::Entry { from: 3, input } if input.target == 7));
        assert!(Message::decode(Tag(1), &m.encode()).is_none());
        assert!(Message::decode(TAG, &[0xff; 64]).is_none());
        assert!(Message::decode(TAG, &[]).is_none());
    }
}
