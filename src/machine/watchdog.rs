//! The wall-clock watchdog: interrupts a vCPU whose guest computes for too
//! long without making progress (a loop with no system call).
//!
//! The run loop bumps a progress counter at every step. A helper thread looks
//! at it a few times per limit; when it has not moved for the whole limit, the
//! helper signals the vCPU thread until the run loop notices (the signal makes
//! `KVM_RUN` return `EINTR`). Signalling repeatedly closes the race where the
//! signal lands just before `KVM_RUN` starts.
//!
//! The same thread ends a run from outside when its [`Cancel`] says so (a
//! session's deadline passed, or the user pressed Ctrl-C): a run can be
//! millions of steps long, and nobody should wait for it.

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

/// Ends runs early from outside: a flag (Ctrl-C, a session ending) and an
/// optional deadline. Cloning shares the flag. Checked by the watchdog a few
/// times per limit and at least every 100 ms.
#[derive(Clone, Debug, Default)]
pub struct Cancel {
    flag: Arc<AtomicBool>,
    deadline: Option<Instant>,
}

impl Cancel {
    /// Never cancels until [`Cancel::cancel`] is called.
    pub fn new() -> Self {
        Self::default()
    }

    /// Shares a flag set elsewhere (a Ctrl-C handler's).
    pub fn from_flag(flag: Arc<AtomicBool>) -> Self {
        Cancel {
            flag,
            deadline: None,
        }
    }

    /// Also cancels once `deadline` has passed.
    pub fn with_deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(self.deadline.map_or(deadline, |d| d.min(deadline)));
        self
    }

    pub fn cancel(&self) {
        self.flag.store(true, Ordering::SeqCst);
    }

    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::Relaxed) || self.deadline.is_some_and(|d| Instant::now() >= d)
    }
}

#[derive(Default)]
struct State {
    limit: Option<Duration>,
    cancel: Cancel,
    target: Option<libc::pthread_t>,
    generation: u64,
    shutdown: bool,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    fired: AtomicBool,
    /// Whether the last firing was a cancellation, not a timeout.
    cancelled: AtomicBool,
    progress: AtomicU64,
    /// Only the guest's time counts: the monitor's own work between two
    /// entries into `KVM_RUN` (loading a 150 MB library's sync sites on a
    /// busy host) is no guest computing without a scheduling point. The
    /// vCPU is in the guest, when it left it last (ns since `epoch`), and
    /// the monitor's time so far, in ns.
    in_guest: AtomicBool,
    left_at: AtomicU64,
    monitor_ns: AtomicU64,
    epoch: Instant,
}

impl Shared {
    /// The monitor's time so far, the stretch it is in included.
    fn monitor_time(&self) -> Duration {
        let mut ns = self.monitor_ns.load(Ordering::SeqCst);
        if !self.in_guest.load(Ordering::SeqCst) {
            let now = self.epoch.elapsed().as_nanos() as u64;
            ns += now.saturating_sub(self.left_at.load(Ordering::SeqCst));
        }
        Duration::from_nanos(ns)
    }
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
            cancelled: AtomicBool::new(false),
            progress: AtomicU64::new(0),
            in_guest: AtomicBool::new(false),
            left_at: AtomicU64::new(0),
            monitor_ns: AtomicU64::new(0),
            epoch: Instant::now(),
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
    /// progress, or as soon as `cancel` says so.
    pub fn arm(&self, limit: Duration, cancel: &Cancel) {
        self.shared.fired.store(false, Ordering::SeqCst);
        self.shared.cancelled.store(false, Ordering::SeqCst);
        let mut st = self.shared.state.lock().unwrap();
        st.limit = Some(limit);
        st.cancel = cancel.clone();
        // SAFETY: pthread_self has no preconditions.
        st.target = Some(unsafe { libc::pthread_self() });
        st.generation += 1;
        self.shared.wake.notify_all();
    }

    /// The vCPU enters (`true`) or leaves (`false`) the guest.
    pub fn in_guest(&self, yes: bool) {
        let s = &self.shared;
        let now = s.epoch.elapsed().as_nanos() as u64;
        if yes {
            let away = now.saturating_sub(s.left_at.load(Ordering::SeqCst));
            s.monitor_ns.fetch_add(away, Ordering::SeqCst);
        } else {
            s.left_at.store(now, Ordering::SeqCst);
        }
        s.in_guest.store(yes, Ordering::SeqCst);
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

    /// Whether the limit passed without progress, or the run was cancelled.
    pub fn fired(&self) -> bool {
        self.shared.fired.load(Ordering::SeqCst)
    }

    /// Whether it fired because the run was cancelled.
    pub fn cancelled(&self) -> bool {
        self.shared.cancelled.load(Ordering::SeqCst)
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
        let tick = (limit / 4).clamp(Duration::from_millis(1), Duration::from_millis(50));
        let mut seen = s.progress.load(Ordering::Relaxed);
        let mut since = Instant::now();
        let mut monitor_since = s.monitor_time();
        while st.generation == generation && !st.shutdown {
            st = s.wake.wait_timeout(st, tick).unwrap().0;
            let now = s.progress.load(Ordering::Relaxed);
            let cancelled = st.cancel.is_cancelled();
            if cancelled {
                s.cancelled.store(true, Ordering::SeqCst);
            }
            // The guest's time since its last progress.
            let monitor = s.monitor_time();
            let guest = since
                .elapsed()
                .saturating_sub(monitor.saturating_sub(monitor_since));
            if now != seen && !cancelled {
                seen = now;
                since = Instant::now();
                monitor_since = monitor;
            } else if cancelled || guest >= limit {
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
