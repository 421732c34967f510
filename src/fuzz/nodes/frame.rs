//! What nodes say to each other over TCP, and how: a frame is a 4-byte
//! little-endian length and that many bytes of JSON. Frames are bounded
//! and every message is checked like a sync directory's file: a peer is
//! anyone who can reach the port.

use std::io::{Read, Write};

use serde::{Deserialize, Serialize};

use crate::fuzz::input::{MAX_DECISIONS, ScheduleInput};

/// The protocol's version: nodes of another version are refused.
pub const PROTOCOL: u32 = 1;

/// The largest frame read: an entry of the most decisions an input may
/// carry is far below it.
pub const MAX_FRAME: usize = 1 << 20;

/// Who a node is and what it fuzzes; the first frame each way.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub protocol: u32,
    /// The node's name (its `--sync-id`), for people.
    pub node: String,
    /// The target's fingerprint, as its inputs carry it.
    pub target: u64,
    /// The `--sync-points` level: runs of the same schedule differ
    /// between levels.
    pub sync_points: String,
}

impl Hello {
    /// Why a node saying `theirs` cannot join one saying `self`, if it
    /// cannot.
    pub fn refuses(&self, theirs: &Hello) -> Option<String> {
        if theirs.protocol != self.protocol {
            Some(format!(
                "it speaks version {} of the node protocol, this node {}",
                theirs.protocol, self.protocol
            ))
        } else if theirs.sync_points != self.sync_points {
            Some(format!(
                "it fuzzes at --sync-points {}, this node at {}",
                theirs.sync_points, self.sync_points
            ))
        } else if theirs.target != self.target {
            Some(
                "it fuzzes another target (the same program at another path needs the same \
                 --identity on both)"
                    .into(),
            )
        } else {
            None
        }
    }
}

/// A finding another node made: its reproducer stays there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteFinding {
    pub signature: String,
    /// Its one-line summary, in the program's words.
    pub summary: String,
    /// The node that found it, and where it wrote the reproducer.
    pub node: String,
    pub path: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum NodeMessage {
    Hello(Hello),
    /// The peer will not join: why.
    Refused {
        reason: String,
    },
    /// A corpus entry.
    Entry {
        input: ScheduleInput,
    },
    Finding(RemoteFinding),
    /// Everything the node had when the connection began was sent.
    CaughtUp,
}

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("a message of {0} bytes is past the limit of {MAX_FRAME}")]
    TooLarge(usize),
    #[error("a message that is not the node protocol: {0}")]
    Malformed(String),
}

impl NodeMessage {
    /// The frame that carries this message.
    pub fn frame(&self) -> Vec<u8> {
        let json = serde_json::to_vec(self).expect("messages always encode");
        let mut out = (json.len() as u32).to_le_bytes().to_vec();
        out.extend(json);
        out
    }

    /// Writes this message's frame.
    pub fn write(&self, to: &mut impl Write) -> std::io::Result<()> {
        to.write_all(&self.frame())
    }

    /// Reads one frame and checks its message: sizes, and an entry's
    /// decisions and target (`target`, as [`ScheduleInput::parse`] does).
    pub fn read(from: &mut impl Read, target: u64) -> Result<NodeMessage, FrameError> {
        let mut len = [0u8; 4];
        from.read_exact(&mut len)?;
        let len = u32::from_le_bytes(len) as usize;
        if len > MAX_FRAME {
            return Err(FrameError::TooLarge(len));
        }
        let mut bytes = vec![0u8; len];
        from.read_exact(&mut bytes)?;
        let m: NodeMessage =
            serde_json::from_slice(&bytes).map_err(|e| FrameError::Malformed(e.to_string()))?;
        if let NodeMessage::Entry { input } = &m {
            if input.decisions.len() > MAX_DECISIONS {
                return Err(FrameError::Malformed(format!(
                    "an entry of {} decisions",
                    input.decisions.len()
                )));
            }
            if input.target != 0 && input.target != target {
                return Err(FrameError::Malformed("an entry for another target".into()));
            }
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::{Seeded, StrategyKind};

    fn hello(target: u64, level: &str) -> Hello {
        Hello {
            protocol: PROTOCOL,
            node: "a".into(),
            target,
            sync_points: level.into(),
        }
    }

    #[test]
    fn frames_read_back_and_hostile_ones_are_refused() {
        let entry = NodeMessage::Entry {
            input: ScheduleInput::fresh(7, Seeded::new(StrategyKind::Random, 3)),
        };
        let read = |bytes: &[u8]| NodeMessage::read(&mut &bytes[..], 7);
        assert_eq!(read(&entry.frame()).unwrap(), entry);
        // Past the limit: refused before anything is allocated.
        let huge = (u32::MAX).to_le_bytes();
        assert!(matches!(read(&huge), Err(FrameError::TooLarge(_))));
        let mut junk = 5u32.to_le_bytes().to_vec();
        junk.extend(b"{{{{{");
        assert!(matches!(read(&junk), Err(FrameError::Malformed(_))));
        // Cut short.
        assert!(matches!(read(&entry.frame()[..9]), Err(FrameError::Io(_))));
        // Another target's entry.
        let other = NodeMessage::Entry {
            input: ScheduleInput::fresh(8, Seeded::new(StrategyKind::Random, 3)),
        };
        assert!(matches!(
            read(&other.frame()),
            Err(FrameError::Malformed(_))
        ));
    }

    #[test]
    fn another_target_or_level_is_refused_in_words() {
        let me = hello(1, "calls");
        assert_eq!(me.refuses(&hello(1, "calls")), None);
        assert!(
            me.refuses(&hello(2, "calls"))
                .unwrap()
                .contains("another target")
        );
        assert!(
            me.refuses(&hello(1, "atomics"))
                .unwrap()
                .contains("--sync-points atomics")
        );
    }
}
