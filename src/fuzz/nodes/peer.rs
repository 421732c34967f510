//! One connection to another node: the handshake, a reader that hands
//! what the peer says to the session, and a writer that sends what the
//! session queues, so a slow or silent peer never holds the session up.

use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, SyncSender, TrySendError, sync_channel};
use std::time::Duration;

use super::frame::{FrameError, Hello, NodeMessage};

/// How long a peer has to say hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a write may wait for a peer that does not read.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Frames queued for one peer at most; a peer that falls this far behind
/// is let go.
const MAX_QUEUED: usize = 1 << 16;

/// The session's handle on a peer that joined.
pub struct Peer {
    pub id: usize,
    /// Its address and name, for people.
    pub name: String,
    queue: SyncSender<Vec<u8>>,
    stream: TcpStream,
}

impl Peer {
    /// Queues a frame for the peer; false when it falls too far behind or
    /// is gone.
    pub fn send(&self, frame: Vec<u8>) -> bool {
        match self.queue.try_send(frame) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
        }
    }

    /// Ends the connection (the reader and the writer end with it).
    pub fn close(&self) {
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}

/// What the connections tell the session.
pub enum Incoming {
    Joined(Peer),
    Said {
        peer: usize,
        message: NodeMessage,
    },
    Left {
        peer: usize,
        why: String,
    },
    /// A node to join cannot be reached (said once until it can be).
    Unreachable {
        addr: String,
    },
    /// The handshake failed: `by_them` when the peer refused this node.
    Refused {
        name: String,
        why: String,
        by_them: bool,
    },
}

/// How a connection ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// It broke or was closed: worth connecting again.
    Broke,
    /// One side refused the other: connecting again would be refused again.
    Refused,
}

/// Runs one connection until it ends: says hello, checks the peer's, then
/// reads. `me` is this node's hello and the target whose entries it takes.
pub fn serve(stream: TcpStream, me: &Hello, events: &Sender<Incoming>) -> Ended {
    static NEXT_ID: AtomicUsize = AtomicUsize::new(0);
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let addr = stream
        .peer_addr()
        .map_or_else(|_| "?".into(), |a| a.to_string());
    let theirs = match handshake(&stream, me) {
        Ok(h) => h,
        Err(refusal) => {
            let _ = events.send(Incoming::Refused {
                name: addr,
                why: refusal.why,
                by_them: refusal.by_them,
            });
            let _ = stream.shutdown(Shutdown::Both);
            return Ended::Refused;
        }
    };
    let name = format!("{} ({addr})", crate::escape::line(&theirs.node));
    let (Ok(writer), Ok(handle)) = (stream.try_clone(), stream.try_clone()) else {
        return Ended::Broke;
    };
    let (queue, frames) = sync_channel(MAX_QUEUED);
    std::thread::Builder::new()
        .name("fuzz-node-writer".into())
        .spawn(move || write_frames(writer, frames))
        .expect("spawn a node writer");
    let _ = events.send(Incoming::Joined(Peer {
        id,
        name,
        queue,
        stream: handle,
    }));
    let mut reader = stream;
    let why = loop {
        match NodeMessage::read(&mut reader, me.target) {
            Ok(NodeMessage::Hello(_) | NodeMessage::Refused { .. }) => {
                break "it said hello twice".to_string();
            }
            Ok(message) => {
                if events.send(Incoming::Said { peer: id, message }).is_err() {
                    break "the session ended".into();
                }
            }
            Err(FrameError::Io(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                break "it closed the connection".into();
            }
            Err(e) => break e.to_string(),
        }
    };
    let _ = reader.shutdown(Shutdown::Both);
    let _ = events.send(Incoming::Left { peer: id, why });
    Ended::Broke
}

struct Refusal {
    why: String,
    by_them: bool,
}

/// Says hello and reads the peer's, within [`HELLO_TIMEOUT`].
fn handshake(stream: &TcpStream, me: &Hello) -> Result<Hello, Refusal> {
    let broke = |e: &dyn std::fmt::Display| Refusal {
        why: format!("no hello: {e}"),
        by_them: false,
    };
    let mut s = stream;
    s.set_read_timeout(Some(HELLO_TIMEOUT))
        .map_err(|e| broke(&e))?;
    s.set_write_timeout(Some(WRITE_TIMEOUT))
        .map_err(|e| broke(&e))?;
    NodeMessage::Hello(me.clone())
        .write(&mut s)
        .map_err(|e| broke(&e))?;
    let theirs = match NodeMessage::read(&mut s, me.target) {
        Ok(NodeMessage::Hello(h)) => h,
        Ok(NodeMessage::Refused { reason }) => {
            return Err(Refusal {
                why: crate::escape::line(&reason).into_owned(),
                by_them: true,
            });
        }
        Ok(_) => return Err(broke(&"it spoke before saying hello")),
        Err(e) => return Err(broke(&e)),
    };
    if let Some(reason) = me.refuses(&theirs) {
        let _ = NodeMessage::Refused {
            reason: format!("{}: {reason}", me.node),
        }
        .write(&mut s);
        return Err(Refusal {
            why: reason,
            by_them: false,
        });
    }
    s.set_read_timeout(None).map_err(|e| broke(&e))?;
    Ok(theirs)
}

/// Writes queued frames until the session lets the peer go or it stops
/// reading.
fn write_frames(mut stream: TcpStream, frames: Receiver<Vec<u8>>) {
    use std::io::Write;
    for frame in frames {
        if stream.write_all(&frame).is_err() {
            let _ = stream.shutdown(Shutdown::Both);
            return;
        }
    }
}
