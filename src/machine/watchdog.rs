//! The wall-clock watchdog: interrupts a vCPU whose guest computes for too
//! long without making progress (a loop with no system call).
//!
//! The run loop bumps a progress counter at every step. A helper thread looks
//! at it a few times per limit; when it has not moved for the whole limit, the
//! helper signals the vCPU thread until the run loop notices (the signal makes
//! `KVM_RUN` return `EINTR`). Signalling repeatedly closes the race where the
//! signal lands just before `KVM_RUN` starts.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Once};
use std::time::{Duration, Instant};

use vmm_sys_util::signal::{SIGRTMIN, register_signal_handler};

/// The signal that kicks a vCPU out of `KVM_RUN`.
fn kick_signal() -> libc::c_int {
    SIGRTMIN() + 2
}

extern "C" fn on_kick(_: libc::c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {}

fn install_handler() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        register_signal_handler(kick_signal(), on_kick)
            .expect("install the watchdog signal handler");
    });
}

#[derive(Default)]
struct State {
    limit: Option<Duration>,
    target: Option<libc::pthread_t>,
    generation: u64,
    shutdown: bool,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    fired: AtomicBool,
    progress: AtomicU64,
}

/// A per-machine watchdog.
pub struct Watchdog {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    pub fn new() -> Self {
        install_handler();
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            fired: AtomicBool::new(false),
            progress: AtomicU64::new(0),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("rewind-watchdog".into())
            .spawn(move || watch(&s))
            .expect("spawn the watchdog thread");
        Watchdog {
            shared,
            thread: Some(thread),
        }
    }

    /// Starts watching the calling thread: it fires after `limit` without
    /// progress.
    pub fn arm(&self, limit: Duration) {
        self.shared.fired.store(false, Ordering::SeqCst);
        let mut st = self.shared.state.lock().unwrap();
        st.limit = Some(limit);
        // SAFETY: pthread_self has no preconditions.
        st.target = Some(unsafe { libc::pthread_self() });
        st.generation += 1;
        self.shared.wake.notify_all();
    }

    /// Records that the guest made progress.
    pub fn progress(&self) {
        self.shared.progress.fetch_add(1, Ordering::Relaxed);
    }

    /// Stops watching.
    pub fn disarm(&self) {
        let mut st = self.shared.state.lock().unwrap();
        st.limit = None;
        st.target = None;
        st.generation += 1;
        self.shared.wake.notify_all();
        drop(st);
        self.shared.fired.store(false, Ordering::SeqCst);
    }

    /// Whether the limit passed without progress.
    pub fn fired(&self) -> bool {
        self.shared.fired.load(Ordering::SeqCst)
    }
}

fn watch(s: &Shared) {
    let mut st = s.state.lock().unwrap();
    loop {
        if st.shutdown {
            return;
        }
        let (Some(limit), Some(target)) = (st.limit, st.target) else {
            st = s.wake.wait(st).unwrap();
            continue;
        };
        let generation = st.generation;
        let tick = (limit / 4).clamp(Duration::from_millis(1), Duration::from_millis(100));
        let mut seen = s.progress.load(Ordering::Relaxed);
        let mut since = Instant::now();
        while st.generation == generation && !st.shutdown {
            st = s.wake.wait_timeout(st, tick).unwrap().0;
            let now = s.progress.load(Ordering::Relaxed);
            if now != seen {
                seen = now;
                since = Instant::now();
            } else if since.elapsed() >= limit {
                s.fired.store(true, Ordering::SeqCst);
                // Kick until the owner disarms or re-arms.
                while st.generation == generation && !st.shutdown {
                    // SAFETY: `target` is a live thread: the owner disarms
                    // (under this lock) before that thread can go away.
                    unsafe { libc::pthread_kill(target, kick_signal()) };
                    st = s.wake.wait_timeout(st, Duration::from_millis(5)).unwrap().0;
                }
            }
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        {
            let mut st = self.shared.state.lock().unwrap();
            st.shutdown = true;
            self.shared.wake.notify_all();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
