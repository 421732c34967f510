//! Nodes: sessions on other machines joined over TCP. A node listens
//! (`--node-listen`) and joins others (`--node-connect`); nodes pass on
//! new corpus entries and findings' signatures, each through the tree of
//! connections, so every node gets what any node finds.
//!
//! - A node that joins gets the whole corpus at once.
//! - A finding is recorded where it was made; the others learn its
//!   signature (they do not report it again) and show its summary.
//! - A peer of another target or `--sync-points` level is refused with
//!   one line; one that leaves or breaks is let go, and a node it joined
//!   goes on (and joins it again when it comes back).
//!
//! What travels is checked as a sync directory's file is (see `frame`).
//! LLMP's broker-to-broker link was the first choice, but it takes its
//! peer on trust: no bound on a message's size, a panic on a malformed
//! one, and no handshake to refuse another target's node.

mod frame;
mod peer;

use std::collections::HashSet;
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use frame::NodeMessage;
pub use frame::{Hello, PROTOCOL, RemoteFinding};
use peer::{Ended, Incoming, Peer};

use super::feedbacks::FailuresSeen;
use super::{Finding, Hub};

/// Who published an entry in the hub: a node.
pub const FROM_NODE: usize = usize::MAX - 1;

/// Most peers a node takes at once.
const MAX_PEERS: usize = 64;
/// How long a node that joins others waits for what they have before it
/// starts searching on its own.
pub const CATCH_UP_LIMIT: Duration = Duration::from_secs(10);
/// How long a node waits before joining a node again.
const RETRY: Duration = Duration::from_secs(2);

/// How a session joins others.
#[derive(Clone, Debug, Default)]
pub struct NodesConfig {
    /// Where this node listens (bound and checked already).
    pub listen: Option<Arc<TcpListener>>,
    /// The nodes it joins.
    pub connect: Vec<String>,
}

impl NodesConfig {
    pub fn is_empty(&self) -> bool {
        self.listen.is_none() && self.connect.is_empty()
    }
}

/// What the nodes did, for the statistics.
#[derive(Clone, Copy, Debug, Default)]
pub struct NodeCounts {
    pub peers: usize,
    pub imported: u64,
    pub findings: usize,
}

/// The session's end of the node network.
pub struct Nodes {
    me: Hello,
    incoming: Receiver<Incoming>,
    peers: Vec<Peer>,
    stop: Arc<AtomicBool>,
    /// Names of the entries sent or taken, so none goes round twice.
    entries: HashSet<String>,
    /// Signatures sent or taken.
    signatures: HashSet<String>,
    hub_cursor: usize,
    findings_cursor: usize,
    pub counts: NodeCounts,
    /// Every finding told or heard of, for nodes that join later.
    findings: Vec<RemoteFinding>,
    /// Nodes to join that sent all they had, refused, or cannot be
    /// reached: when all have, this node starts its own search.
    settled: usize,
}

impl Nodes {
    /// Starts listening and joining as `cfg` says, as the node `me`.
    pub fn start(cfg: &NodesConfig, me: Hello) -> Nodes {
        let (events, incoming) = channel();
        let stop = Arc::new(AtomicBool::new(false));
        if let Some(listener) = &cfg.listen {
            let (listener, me, events, stop) =
                (listener.clone(), me.clone(), events.clone(), stop.clone());
            std::thread::Builder::new()
                .name("fuzz-node-listen".into())
                .spawn(move || accept(&listener, &me, &events, &stop))
                .expect("spawn the node listener");
        }
        for addr in &cfg.connect {
            let (addr, me, events, stop) = (addr.clone(), me.clone(), events.clone(), stop.clone());
            std::thread::Builder::new()
                .name("fuzz-node-join".into())
                .spawn(move || join(&addr, &me, &events, &stop))
                .expect("spawn a node connection");
        }
        Nodes {
            me,
            incoming,
            peers: Vec::new(),
            stop,
            entries: HashSet::new(),
            signatures: HashSet::new(),
            hub_cursor: 0,
            findings_cursor: 0,
            counts: NodeCounts::default(),
            findings: Vec::new(),
            settled: 0,
        }
    }

    /// Waits (at most `limit`) until every node to join sent what it had
    /// (its corpus joins the hub, its findings' signatures `failures`), or
    /// refused, or cannot be reached. Returns notes for people.
    pub fn catch_up(
        &mut self,
        joining: usize,
        hub: &Hub,
        failures: &Mutex<FailuresSeen>,
        limit: Duration,
    ) -> Vec<String> {
        let deadline = std::time::Instant::now() + limit;
        let mut notes = Vec::new();
        while self.settled < joining && std::time::Instant::now() < deadline {
            notes.extend(self.tick(hub, failures, &[]));
            std::thread::sleep(Duration::from_millis(10));
        }
        notes
    }

    /// Passes on what is new here and takes in what the peers said.
    /// Returns notes for people.
    pub fn tick(
        &mut self,
        hub: &Hub,
        failures: &Mutex<FailuresSeen>,
        findings: &[Finding],
    ) -> Vec<String> {
        let mut notes = Vec::new();
        while let Ok(event) = self.incoming.try_recv() {
            match event {
                Incoming::Joined(peer) => {
                    notes.push(format!("node {} joined", peer.name));
                    self.send_everything(&peer, hub);
                    self.peers.push(peer);
                }
                Incoming::Said { peer, message } => {
                    self.take(peer, message, hub, failures, &mut notes);
                }
                Incoming::Left { peer, why } => {
                    if let Some(i) = self.peers.iter().position(|p| p.id == peer) {
                        let p = self.peers.remove(i);
                        notes.push(format!("node {} left: {why}", p.name));
                    }
                }
                Incoming::Unreachable { addr } => {
                    self.settled += 1;
                    notes.push(format!(
                        "node {} cannot be reached yet; this node joins it once it can be",
                        crate::escape::line(&addr)
                    ));
                }
                Incoming::Refused { name, why, by_them } => {
                    self.settled += 1;
                    notes.push(if by_them {
                        format!("node {name} refused this node: {why}")
                    } else {
                        format!("refused node {name}: {why}")
                    });
                }
            }
        }
        // Entries found here (or taken from the sync directory).
        for (from, input) in hub.slice(self.hub_cursor) {
            self.hub_cursor += 1;
            let name = libafl::inputs::Input::generate_name(&input, None);
            if from != FROM_NODE && self.entries.insert(name) {
                self.send_all(&NodeMessage::Entry { input }, None);
            }
        }
        // Findings recorded here.
        for f in &findings[self.findings_cursor.min(findings.len())..] {
            self.findings_cursor += 1;
            if self.signatures.insert(f.signature.clone()) {
                let told = RemoteFinding {
                    signature: f.signature.clone(),
                    summary: f.summary.clone(),
                    node: self.me.node.clone(),
                    path: f.path.display().to_string(),
                };
                self.findings.push(told.clone());
                self.send_all(&NodeMessage::Finding(told), None);
            }
        }
        self.counts.peers = self.peers.len();
        notes
    }

    /// Takes in one message of `from`'s, passing it on to the others.
    fn take(
        &mut self,
        from: usize,
        message: NodeMessage,
        hub: &Hub,
        failures: &Mutex<FailuresSeen>,
        notes: &mut Vec<String>,
    ) {
        match &message {
            NodeMessage::Entry { input } => {
                let name = libafl::inputs::Input::generate_name(input, None);
                if !self.entries.insert(name) {
                    return;
                }
                hub.publish(FROM_NODE, input.clone());
                self.counts.imported += 1;
            }
            NodeMessage::Finding(f) => {
                if !self.signatures.insert(f.signature.clone()) {
                    return;
                }
                // Known here now: the workers' runs that fail this way
                // are no finding of this node's.
                let new_here = failures
                    .lock()
                    .unwrap()
                    .signatures
                    .insert(f.signature.clone());
                if new_here {
                    notes.push(format!(
                        "node {} found: {} (its reproducer is there: {})",
                        crate::escape::line(&f.node),
                        crate::escape::line(&f.summary),
                        crate::escape::line(&f.path)
                    ));
                    self.counts.findings += 1;
                }
                self.findings.push(f.clone());
            }
            NodeMessage::CaughtUp => {
                self.settled += 1;
                return;
            }
            NodeMessage::Hello(_) | NodeMessage::Refused { .. } => return,
        }
        self.send_all(&message, Some(from));
    }

    /// Sends a node that just joined the whole corpus and every finding.
    fn send_everything(&self, peer: &Peer, hub: &Hub) {
        let entries = hub
            .slice(0)
            .into_iter()
            .map(|(_, input)| NodeMessage::Entry { input });
        let findings = self.findings.iter().cloned().map(NodeMessage::Finding);
        for m in entries.chain(findings).chain([NodeMessage::CaughtUp]) {
            if !peer.send(m.frame()) {
                return;
            }
        }
    }

    /// Sends `message` to every peer but `except`, letting go of peers
    /// that fell too far behind.
    fn send_all(&mut self, message: &NodeMessage, except: Option<usize>) {
        let frame = message.frame();
        self.peers.retain(|p| {
            let kept = Some(p.id) == except || p.send(frame.clone());
            if !kept {
                p.close();
            }
            kept
        });
    }

    /// Ends every connection.
    pub fn finish(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // The writers send what is queued before the connections close.
        std::thread::sleep(Duration::from_millis(200));
        for p in &self.peers {
            p.close();
        }
    }
}

/// Takes peers on `listener` until the session stops.
fn accept(listener: &TcpListener, me: &Hello, events: &Sender<Incoming>, stop: &AtomicBool) {
    let _ = listener.set_nonblocking(true);
    let live = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                let _ = stream.set_nonblocking(false);
                if live.load(Ordering::Relaxed) >= MAX_PEERS {
                    continue;
                }
                live.fetch_add(1, Ordering::Relaxed);
                let (me, events, live) = (me.clone(), events.clone(), live.clone());
                std::thread::Builder::new()
                    .name("fuzz-node-peer".into())
                    .spawn(move || {
                        peer::serve(stream, &me, &events);
                        live.fetch_sub(1, Ordering::Relaxed);
                    })
                    .expect("spawn a node peer");
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// Joins the node at `addr`, and joins it again whenever the connection
/// breaks, until the session stops or the node refuses this one.
fn join(addr: &str, me: &Hello, events: &Sender<Incoming>, stop: &AtomicBool) {
    let mut said_unreachable = false;
    while !stop.load(Ordering::Relaxed) {
        let stream = addr
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .and_then(|a| TcpStream::connect_timeout(&a, Duration::from_secs(5)).ok());
        match stream {
            Some(s) => {
                said_unreachable = false;
                if peer::serve(s, me, events) == Ended::Refused {
                    return;
                }
            }
            None if !said_unreachable => {
                said_unreachable = true;
                let _ = events.send(Incoming::Unreachable {
                    addr: addr.to_string(),
                });
            }
            None => {}
        }
        std::thread::sleep(RETRY);
    }
}
