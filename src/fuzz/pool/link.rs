//! A worker process: the same worker as a thread's, with its own hub and
//! notes, and a link that carries them to and from the session's LLMP
//! broker.
//!
//! The broker keeps every message it passed on, and a client that joins
//! reads them from the first: a worker started again after a crash reads
//! the whole session so far (every corpus entry, feature and signature),
//! its own earlier life's included, before it goes on.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use libafl_bolts::llmp::LlmpClient;
use libafl_bolts::shmem::{MmapShMemProvider, ShMemProvider};

use super::wire::{self, Message};
use super::zygote::EXIT_ERROR;
use crate::fuzz::feedbacks::{FailuresSeen, FeaturesSeen, Shared};
use crate::fuzz::{FuzzConfig, FuzzError, Hub, Progress};
use crate::kernel::vfs::SharedSource;

/// How often the link carries messages.
const LINK_INTERVAL: Duration = Duration::from_millis(20);
/// Features per message.
const FEATURES_PER_MESSAGE: usize = 4096;

/// Who published an entry in a worker process's hub: the worker itself
/// (its number) or the link (what others found).
const FROM_LINK: usize = usize::MAX - 2;

/// What a worker process starts from.
pub struct Start {
    pub id: u32,
    /// 0 for its first life, then one more each time it is started again.
    pub life: u32,
    /// The broker's port on the loopback interface.
    pub port: u16,
    /// Decision points of a default run (for PCT tails).
    pub steps: u64,
    /// Signatures the session knew when it started.
    pub known: BTreeSet<String>,
}

/// Runs a worker in this process, linked to the session's broker, until
/// the session stops it. Returns the process's exit code.
pub fn worker_main(
    Start {
        id,
        life,
        port,
        steps,
        known,
    }: Start,
    cfg: &FuzzConfig,
    source: SharedSource,
    progress: Arc<Progress>,
) -> i32 {
    let mut cfg = cfg.clone();
    // A life after a crash explores afresh, not its last life's path; the
    // first is the thread's it replaces, schedule for schedule.
    if life > 0 {
        cfg.seed = crate::sched::splitmix64(cfg.seed ^ u64::from(life) << 48);
    }
    let shared = Shared {
        features: Arc::new(Mutex::new(FeaturesSeen::telling())),
        failures: Arc::new(Mutex::new(FailuresSeen {
            signatures: known,
            ..FailuresSeen::default()
        })),
    };
    let hub = Hub::default();
    let done = AtomicBool::new(false);
    // Why the worker could not go on, for the link to tell the session.
    let failed = Mutex::new(None);
    let (result, linked) = std::thread::scope(|scope| {
        let link = scope.spawn(|| {
            let linked = Link::connect(id, port, &hub, &shared, &progress, &cfg)
                .map_err(|e| format!("worker {id} could not reach the session: {e}"))
                .and_then(|mut l| l.run(&done, &failed));
            // Without the session, nothing the worker finds would count.
            if linked.is_err() {
                cfg.run.cancel.cancel();
            }
            linked
        });
        // Even a panicking worker lets its link end.
        let done = SetOnDrop(&done);
        let r = super::super::worker::run(
            id as usize,
            &cfg,
            source,
            steps,
            shared.clone(),
            &hub,
            progress.clone(),
        );
        if let Err(e) = &r {
            if !matches!(e, FuzzError::Vm(crate::engine::VmError::Cancelled)) {
                *failed.lock().unwrap() = Some(e.to_string());
            }
        }
        drop(done);
        (r, link.join())
    });
    match (linked, result) {
        (Err(_), _) => super::zygote::EXIT_PANIC,
        (Ok(Err(e)), _) => {
            eprintln!("rewind-fuzz: {e}");
            EXIT_ERROR
        }
        (Ok(Ok(())), Ok(()) | Err(FuzzError::Vm(crate::engine::VmError::Cancelled))) => 0,
        (Ok(Ok(())), Err(_)) => EXIT_ERROR,
    }
}

/// Sets a flag when dropped, on a panic's way out too.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The worker's end of the broker.
struct Link<'a> {
    id: u32,
    client: LlmpClient<<MmapShMemProvider as ShMemProvider>::ShMem, MmapShMemProvider>,
    hub: &'a Hub,
    shared: &'a Shared,
    progress: &'a Progress,
    cfg: &'a FuzzConfig,
    /// The hub's entries looked at so far.
    hub_cursor: usize,
    told_unsupported: bool,
}

impl<'a> Link<'a> {
    fn connect(
        id: u32,
        port: u16,
        hub: &'a Hub,
        shared: &'a Shared,
        progress: &'a Progress,
        cfg: &'a FuzzConfig,
    ) -> Result<Link<'a>, libafl_bolts::Error> {
        let client = LlmpClient::create_attach_to_tcp(MmapShMemProvider::new()?, port)?;
        Ok(Link {
            id,
            client,
            hub,
            shared,
            progress,
            cfg,
            hub_cursor: 0,
            told_unsupported: false,
        })
    }

    /// Carries messages until the worker is `done`, then what it left and
    /// why it `failed`, if it did. Fails when the link broke.
    fn run(&mut self, done: &AtomicBool, failed: &Mutex<Option<String>>) -> Result<(), String> {
        loop {
            let last = done.load(Ordering::Relaxed);
            self.tell();
            if let Err(e) = self.listen() {
                return Err(format!(
                    "worker {}'s link to the session broke: {e}",
                    self.id
                ));
            }
            // The session stopped: the run in progress ends now.
            if self.progress.stop.load(Ordering::Relaxed) {
                self.cfg.run.cancel.cancel();
            }
            if last {
                if let Some(message) = failed.lock().unwrap().take() {
                    self.send(&Message::Error {
                        from: self.id,
                        message,
                    });
                }
                self.leave();
                return Ok(());
            }
            std::thread::sleep(LINK_INTERVAL);
        }
    }

    /// Sends what the worker found since the last call.
    fn tell(&mut self) {
        let id = self.id;
        for (from, input) in self.hub.slice(self.hub_cursor) {
            self.hub_cursor += 1;
            if from == id as usize {
                self.send(&Message::Entry { from: id, input });
            }
        }
        let features = self.shared.features.lock().unwrap().take_untold();
        for chunk in features.chunks(FEATURES_PER_MESSAGE) {
            self.send(&Message::Features {
                from: id,
                features: chunk.to_vec(),
            });
        }
        let (pending, unsupported) = {
            let mut f = self.shared.failures.lock().unwrap();
            (std::mem::take(&mut f.pending), f.unsupported.clone())
        };
        for failure in pending {
            self.send(&Message::Failure { from: id, failure });
        }
        if let Some(summary) = unsupported.filter(|_| !self.told_unsupported) {
            self.told_unsupported = true;
            self.send(&Message::Unsupported { from: id, summary });
        }
    }

    /// Takes in what the others found.
    fn listen(&mut self) -> Result<(), libafl_bolts::Error> {
        let me = self.client.sender().id();
        while let Some((sender, tag, bytes)) = self.client.recv_buf()? {
            if sender == me {
                continue;
            }
            match Message::decode(tag, bytes) {
                Some(Message::Entry { input, .. }) => self.hub.publish(FROM_LINK, input),
                Some(Message::Features { features, .. }) => {
                    self.shared.features.lock().unwrap().merge(&features)
                }
                Some(Message::Failure { failure, .. }) => {
                    let mut f = self.shared.failures.lock().unwrap();
                    f.signatures.insert(failure.signature.id());
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn send(&mut self, m: &Message) {
        // A message the broker cannot take is lost like a run the worker
        // never made; the session goes on.
        let _ = self.client.send_buf(wire::TAG, &m.encode());
    }

    /// Tells the broker this client is gone, after its last message.
    fn leave(&mut self) {
        let _ = self.client.sender_mut().send_exiting();
    }
}
