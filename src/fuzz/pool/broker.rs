//! The session's LLMP broker: it passes each worker's messages on to the
//! others and, through its hook, keeps the session's own view (the corpus
//! hub, the features, the failures with new signatures) as the threads'
//! shared state would be.

use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use libafl_bolts::ClientId;
use libafl_bolts::llmp::{
    Flags, Listener, LlmpBroker, LlmpBrokerInner, LlmpHook, LlmpMsgHookResult, Tag,
};
use libafl_bolts::shmem::{MmapShMem, MmapShMemProvider, ShMemProvider};
use libafl_bolts::tuples::tuple_list;

use super::wire::{self, Message};
use crate::fuzz::feedbacks::Shared;
use crate::fuzz::{Hub, Progress};

/// What the broker's hook changes in the session.
pub struct SessionHook<'a> {
    pub hub: &'a Hub,
    pub shared: Shared,
    pub progress: &'a Progress,
    /// Why workers could not go on.
    pub errors: Arc<Mutex<Vec<String>>>,
    /// Messages taken, so the broker knows when it has drained.
    pub taken: &'a AtomicU64,
}

impl LlmpHook<MmapShMem, MmapShMemProvider> for SessionHook<'_> {
    fn on_new_message(
        &mut self,
        _broker: &mut LlmpBrokerInner<MmapShMem, MmapShMemProvider>,
        _client: ClientId,
        tag: &mut Tag,
        _flags: &mut Flags,
        bytes: &mut [u8],
        _new: &mut Vec<(Tag, Flags, Vec<u8>)>,
    ) -> Result<LlmpMsgHookResult, libafl_bolts::Error> {
        self.taken.fetch_add(1, Ordering::Relaxed);
        let Some(message) = Message::decode(*tag, bytes) else {
            return Ok(LlmpMsgHookResult::Handled);
        };
        let pass_on = match message {
            Message::Entry { from, input } => {
                self.hub.publish(from as usize, input);
                true
            }
            Message::Features { features, .. } => {
                self.shared.features.lock().unwrap().merge(&features);
                true
            }
            // Passed on only when new to the session: the others learn
            // the signature from it.
            Message::Failure { failure, .. } => {
                let mut f = self.shared.failures.lock().unwrap();
                let new = f.signatures.insert(failure.signature.id());
                if new {
                    f.pending.push(failure);
                }
                new
            }
            Message::Unsupported { summary, .. } => {
                let mut f = self.shared.failures.lock().unwrap();
                f.unsupported.get_or_insert(summary);
                false
            }
            Message::Error { message, .. } => {
                self.errors.lock().unwrap().push(message);
                self.progress.stop.store(true, Ordering::Relaxed);
                false
            }
        };
        Ok(if pass_on {
            LlmpMsgHookResult::ForwardToClients
        } else {
            LlmpMsgHookResult::Handled
        })
    }
}

/// The session's broker, listening on `listener`, with the session's
/// hook.
pub type Broker<'a> = LlmpBroker<(SessionHook<'a>, ()), MmapShMem, MmapShMemProvider>;

/// Opens the broker: its first page, and the listener workers join on.
pub fn open<'a>(listener: TcpListener, hook: SessionHook<'a>) -> Result<Broker<'a>, String> {
    let err = |e: libafl_bolts::Error| format!("the workers' broker: {e}");
    // Every page kept: a worker started again reads the session from the
    // start.
    let provider = MmapShMemProvider::new().map_err(err)?;
    let mut broker = LlmpBroker::with_keep_pages(provider, tuple_list!(hook), true).map_err(err)?;
    broker
        .inner_mut()
        .launch_listener(Listener::Tcp(listener))
        .map_err(err)?;
    Ok(broker)
}

/// Runs the broker until `stop` is set and every message the workers left
/// is taken; entries the session takes from elsewhere (the sync directory,
/// other nodes: any but the `jobs` workers) go out to the workers.
pub fn serve(
    mut broker: Broker<'_>,
    (hub, taken): (&Hub, &AtomicU64),
    jobs: usize,
    stop: &AtomicBool,
) -> Result<(), String> {
    let err = |e: libafl_bolts::Error| format!("the workers' broker: {e}");
    let mut hub_cursor = 0;
    let mut quiet_passes = 0;
    loop {
        let before = taken.load(Ordering::Relaxed);
        broker.broker_once().map_err(err)?;
        for (from, input) in hub.slice(hub_cursor) {
            hub_cursor += 1;
            if from >= jobs {
                let m = Message::Entry {
                    from: wire::SESSION,
                    input,
                };
                broker
                    .inner_mut()
                    .send_buf(wire::TAG, &m.encode())
                    .map_err(err)?;
            }
        }
        let busy = taken.load(Ordering::Relaxed) != before;
        quiet_passes = if busy { 0 } else { quiet_passes + 1 };
        // The workers are gone: what they left is taken once the broker
        // has found nothing new a few times.
        if stop.load(Ordering::Relaxed) && quiet_passes > 3 {
            return Ok(());
        }
        if !busy {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}
