//! The wall-clock watchdog: interrupts a vCPU whose guest computes for too
//! long without leaving to the monitor (a loop with no system call).
//!
//! A helper thread waits for the deadline, then signals the vCPU thread until
//! the run loop notices; the signal makes `KVM_RUN` return `EINTR`. Signalling
//! repeatedly closes the race where the signal lands just before `KVM_RUN`.

use std::sync::atomic::{AtomicBool, Ordering};
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
    deadline: Option<Instant>,
    target: Option<libc::pthread_t>,
    generation: u64,
    shutdown: bool,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    fired: AtomicBool,
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

    /// Starts watching the calling thread with a deadline `limit` from now.
    pub fn arm(&self, limit: Duration) {
        self.shared.fired.store(false, Ordering::SeqCst);
        let mut st = self.shared.state.lock().unwrap();
        st.deadline = Some(Instant::now() + limit);
        // SAFETY: pthread_self has no preconditions.
        st.target = Some(unsafe { libc::pthread_self() });
        st.generation += 1;
        self.shared.wake.notify_all();
    }

    /// Stops watching.
    pub fn disarm(&self) {
        let mut st = self.shared.state.lock().unwrap();
        st.deadline = None;
        st.target = None;
        st.generation += 1;
        self.shared.wake.notify_all();
        drop(st);
        self.shared.fired.store(false, Ordering::SeqCst);
    }

    /// Whether the deadline passed.
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
        match (st.deadline, st.target) {
            (Some(deadline), Some(target)) => {
                let now = Instant::now();
                if now < deadline {
                    st = s.wake.wait_timeout(st, deadline - now).unwrap().0;
                    continue;
                }
                s.fired.store(true, Ordering::SeqCst);
                let generation = st.generation;
                // Kick until the owner disarms or re-arms.
                while st.generation == generation && !st.shutdown {
                    // SAFETY: `target` is a live thread: the owner disarms
                    // (under this lock) before that thread can go away.
                    unsafe { libc::pthread_kill(target, kick_signal()) };
                    st = s.wake.wait_timeout(st, Duration::from_millis(5)).unwrap().0;
                }
            }
            _ => st = s.wake.wait(st).unwrap(),
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
