//! Workers as processes, joined by LibAFL's LLMP: the session runs the
//! broker (a thread of its own), a zygote process forks one worker process
//! per job and starts again any that dies, and every worker is an LLMP
//! client carrying its corpus entries, features and failures to the
//! session and the other workers.
//!
//! - [`wire`]: the messages.
//! - [`zygote`]: forking and restarting the workers.
//! - [`link`]: a worker process and its LLMP client.
//! - [`broker`]: the session's broker and what it keeps of the messages.
//!
//! The counters and the stop flag are not messages: they live in memory
//! the forked processes share ([`crate::fuzz::Progress`]), so the budget
//! stays exact and a killed worker's counts stay counted.

mod broker;
mod link;
mod wire;
mod zygote;

use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{Scope, ScopedJoinHandle};

use super::feedbacks::Shared;
use super::{FuzzConfig, FuzzError, Hub, Progress};
use crate::kernel::vfs::SharedSource;
use zygote::{Event, Zygote};

/// Where a worker process's panics and last words go, in the output
/// directory.
pub const WORKERS_LOG: &str = "workers.log";

/// The session's worker processes and their broker.
pub struct Pool<'scope> {
    zygote: Zygote,
    broker: ScopedJoinHandle<'scope, Result<(), String>>,
    broker_stop: Arc<AtomicBool>,
    errors: Arc<Mutex<Vec<String>>>,
    /// Every worker process started (their shared-memory files are
    /// removed at the end).
    pids: Vec<libc::pid_t>,
}

impl<'scope> Pool<'scope> {
    /// Starts `cfg.jobs` worker processes and the broker joining them.
    /// Called before the session starts any thread of its own: the zygote
    /// is forked here.
    pub fn start<'env>(
        scope: &'scope Scope<'scope, 'env>,
        cfg: &'env FuzzConfig,
        (source, steps): (SharedSource, u64),
        shared: &Shared,
        hub: &'env Hub,
        progress: &'env Arc<Progress>,
    ) -> Result<Pool<'scope>, FuzzError> {
        let setup = |what: &str, e: std::io::Error| FuzzError::Setup(format!("{what}: {e}"));
        let listener =
            TcpListener::bind("127.0.0.1:0").map_err(|e| setup("the workers' broker", e))?;
        let port = listener
            .local_addr()
            .map_err(|e| setup("the workers' broker", e))?
            .port();
        let log = cfg.out.join(WORKERS_LOG);
        // Signatures of the sessions before a --resume are no news.
        let known = shared.failures.lock().unwrap().signatures.clone();
        let worker = |id: u32, life: u32| {
            send_stderr_to(&log);
            let start = link::Start {
                id,
                life,
                port,
                steps,
                known: known.clone(),
            };
            link::worker_main(start, cfg, source.clone(), progress.clone())
        };
        let listener_fd = listener.as_raw_fd();
        let broker_stop = Arc::new(AtomicBool::new(false));
        let errors = Arc::new(Mutex::new(Vec::new()));
        // The broker opens on its own thread (its pages stay there); the
        // workers are forked only once it is open.
        let (opened, open) = std::sync::mpsc::channel();
        let broker = {
            let (stop, errors, shared) = (broker_stop.clone(), errors.clone(), shared.clone());
            std::thread::Builder::new()
                .name("fuzz-broker".into())
                .spawn_scoped(scope, move || {
                    let taken = AtomicU64::new(0);
                    let hook = broker::SessionHook {
                        hub,
                        shared,
                        progress,
                        errors,
                        taken: &taken,
                    };
                    let broker = match broker::open(listener, hook) {
                        Ok(b) => b,
                        Err(e) => {
                            let _ = opened.send(Err(e));
                            return Ok(());
                        }
                    };
                    let _ = opened.send(Ok(()));
                    broker::serve(broker, (hub, &taken), cfg.jobs, &stop)
                })
                .expect("spawn the broker")
        };
        if let Err(e) = open.recv().unwrap_or_else(|_| Err("it panicked".into())) {
            let _ = broker.join();
            return Err(FuzzError::Setup(e));
        }
        let zygote = match Zygote::start(cfg.jobs, progress, &[listener_fd], &worker) {
            Ok(z) => z,
            Err(e) => {
                broker_stop.store(true, Ordering::Relaxed);
                let _ = broker.join();
                return Err(setup("starting the workers", e));
            }
        };
        Ok(Pool {
            zygote,
            broker,
            broker_stop,
            errors,
            pids: Vec::new(),
        })
    }

    /// Whether every worker process has ended. A broker that failed ends
    /// the session: the workers can tell it nothing.
    pub fn finished(&mut self, progress: &Progress) -> bool {
        if self.broker.is_finished() {
            progress.stop.store(true, Ordering::Relaxed);
        }
        self.zygote.exited()
    }

    /// What happened to the workers since the last call, for people.
    pub fn notes(&mut self, out: &std::path::Path) -> Vec<String> {
        let mut notes = Vec::new();
        for e in self.zygote.events() {
            match e {
                Event::Spawned { pid, .. } => self.pids.push(pid),
                Event::Died { worker, status } => {
                    // A worker killed from outside said nothing; one that
                    // panicked said why.
                    let said = if libc::WIFSIGNALED(status) {
                        String::new()
                    } else {
                        format!(" (what it said is in {})", out.join(WORKERS_LOG).display())
                    };
                    notes.push(format!(
                        "worker {worker} {} and was started again with the session's corpus{said}",
                        zygote::describe(status),
                    ))
                }
                Event::GivenUp { worker } => notes.push(format!(
                    "worker {worker} is not started again: the workers died {} times",
                    zygote::MAX_RESTARTS
                )),
            }
        }
        notes
    }

    /// Waits for the broker to take the workers' last messages, and
    /// cleans up. Returns why a worker could not go on, if one could not.
    pub fn join(mut self, out: &std::path::Path) -> Option<FuzzError> {
        if !self.zygote.exited() {
            self.zygote.kill();
        }
        self.broker_stop.store(true, Ordering::Relaxed);
        let served = self.broker.join();
        for e in self.zygote.events() {
            if let Event::Spawned { pid, .. } = e {
                self.pids.push(pid);
            }
        }
        self.pids.push(std::process::id() as libc::pid_t);
        remove_shared_memory(&self.pids);
        // The workers' log, when they said nothing.
        let log = out.join(WORKERS_LOG);
        if std::fs::metadata(&log).is_ok_and(|m| m.len() == 0) {
            let _ = std::fs::remove_file(log);
        }
        let error = self.errors.lock().unwrap().first().cloned();
        match (served, error) {
            (_, Some(e)) => Some(FuzzError::Worker(e)),
            (Ok(Err(e)), None) => Some(FuzzError::Worker(e)),
            (Err(_), None) => Some(FuzzError::Worker("the session's broker panicked".into())),
            (Ok(Ok(())), None) => None,
        }
    }
}

/// Sends this process's standard error to `path` (appended), so a worker's
/// panic lands in the output directory, not over the live screen.
fn send_stderr_to(path: &std::path::Path) {
    if let Ok(f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        // SAFETY: duplicates a valid descriptor onto standard error; `f`
        // is closed after, the duplicate stays.
        unsafe { libc::dup2(f.as_raw_fd(), 2) };
    }
}

/// Removes the shared-memory files LLMP made in `pids` (LLMP leaves them:
/// a page may still be mapped by another process until the session ends).
fn remove_shared_memory(pids: &[libc::pid_t]) {
    let Ok(dir) = std::fs::read_dir("/dev/shm") else {
        return;
    };
    let prefixes: Vec<String> = pids.iter().map(|p| format!("libafl_{p}_")).collect();
    for entry in dir.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if prefixes.iter().any(|p| name.starts_with(p.as_str())) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}
