//! The zygote: a process forked from the session before it starts any
//! thread of its own, which forks the workers and starts again any that
//! dies while the session goes on.
//!
//! Forking from the session itself once its writer, minimizer and broker
//! threads run could leave a worker with a lock some other thread held at
//! the fork. The zygote stays single-threaded, so each fork it makes is
//! clean. It tells the session what happens through a pipe, one line per
//! event: `spawned ID PID`, `died ID STATUS` (a `waitpid` status) and
//! `given-up ID`.

use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::Ordering;

use crate::fuzz::Progress;

/// Restarts a session allows in all; past them a dead worker stays dead
/// (a worker that dies at once every time would otherwise loop forever).
pub const MAX_RESTARTS: u64 = 100;

/// A worker's exit code when it could not go on and said why (starting
/// it again would fail the same way).
pub const EXIT_ERROR: i32 = 2;
/// A worker's exit code when it panicked.
pub const EXIT_PANIC: i32 = 101;

/// What the zygote reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Spawned { worker: u32, pid: i32 },
    Died { worker: u32, status: i32 },
    GivenUp { worker: u32 },
}

impl Event {
    fn line(&self) -> String {
        match self {
            Event::Spawned { worker, pid } => format!("spawned {worker} {pid}\n"),
            Event::Died { worker, status } => format!("died {worker} {status}\n"),
            Event::GivenUp { worker } => format!("given-up {worker}\n"),
        }
    }

    fn parse(line: &str) -> Option<Event> {
        let mut w = line.split(' ');
        let (kind, worker) = (w.next()?, w.next()?.parse().ok()?);
        let value = w.next().and_then(|v| v.parse().ok());
        Some(match kind {
            "spawned" => Event::Spawned {
                worker,
                pid: value?,
            },
            "died" => Event::Died {
                worker,
                status: value?,
            },
            "given-up" => Event::GivenUp { worker },
            _ => return None,
        })
    }
}

/// How a `waitpid` status reads to people.
pub fn describe(status: i32) -> String {
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        format!(
            "killed by signal {sig} ({})",
            crate::observe::outcome::signal_name(sig as u32)
        )
    } else if libc::WEXITSTATUS(status) == EXIT_PANIC {
        "panicked".into()
    } else {
        format!("exited with code {}", libc::WEXITSTATUS(status))
    }
}

/// The session's end of the zygote.
pub struct Zygote {
    pid: libc::pid_t,
    events: std::fs::File,
    partial: String,
    exited: bool,
}

impl Zygote {
    /// Forks the zygote, which forks `jobs` workers, each running
    /// `worker(id, life)` (life counts its restarts) and leaving with the
    /// code it returns. `close` are descriptors of the session's that the
    /// zygote and the workers must not hold.
    pub fn start(
        jobs: usize,
        progress: &Progress,
        close: &[i32],
        worker: &dyn Fn(u32, u32) -> i32,
    ) -> std::io::Result<Zygote> {
        let mut fds = [0; 2];
        // SAFETY: `pipe2` fills the two descriptors on success.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both are fresh descriptors owned by nothing else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let session = std::process::id() as libc::pid_t;
        // SAFETY: the child runs only `zygote`, which never returns: it
        // forks, waits and writes to a pipe, and leaves by `_exit`.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if pid == 0 {
            drop(read);
            for fd in close {
                // SAFETY: closes this process's copy of a descriptor the
                // session keeps; nothing here uses it.
                unsafe { libc::close(*fd) };
            }
            zygote(session, jobs, progress, write, worker);
        }
        drop(write);
        // SAFETY: `read` is a valid descriptor; O_NONBLOCK lets the
        // session look for events without waiting.
        unsafe {
            let flags = libc::fcntl(read.as_raw_fd(), libc::F_GETFL);
            libc::fcntl(read.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
        Ok(Zygote {
            pid,
            events: std::fs::File::from(read),
            partial: String::new(),
            exited: false,
        })
    }

    /// The events since the last call.
    pub fn events(&mut self) -> Vec<Event> {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = self.events.read(&mut buf) {
            self.partial.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        let mut out = Vec::new();
        while let Some(i) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=i).collect();
            out.extend(Event::parse(line.trim_end()));
        }
        out
    }

    /// Whether the zygote (and so every worker) has exited.
    pub fn exited(&mut self) -> bool {
        if !self.exited {
            let mut status = 0;
            // SAFETY: waits, without blocking, for the child this zygote is.
            self.exited =
                unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) } == self.pid;
        }
        self.exited
    }

    /// Ends the zygote and its workers at once (the session failed).
    pub fn kill(&mut self) {
        if !self.exited {
            // SAFETY: signals and reaps the child this zygote is; its
            // workers die with it (their parent-death signal).
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
                libc::waitpid(self.pid, std::ptr::null_mut(), 0);
            }
            self.exited = true;
        }
    }
}

/// Dies with `parent`: a session (or zygote) killed outright takes its
/// processes with it.
fn die_with(parent: libc::pid_t) {
    // SAFETY: prctl with these arguments only sets this process's
    // parent-death signal; `_exit` ends it without running the parent's
    // code.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::getppid() != parent {
            libc::_exit(0);
        }
    }
}

/// The zygote's life: start the workers, start again those that die
/// before the session stops, leave when none is left.
fn zygote(
    session: libc::pid_t,
    jobs: usize,
    progress: &Progress,
    events: OwnedFd,
    worker: &dyn Fn(u32, u32) -> i32,
) -> ! {
    die_with(session);
    let me = std::process::id() as libc::pid_t;
    let mut events = std::fs::File::from(events);
    let mut say = |e: Event| {
        use std::io::Write;
        let _ = events.write_all(e.line().as_bytes());
    };
    // Each worker's pid (0 once it is gone for good) and its lives.
    let mut live: Vec<(libc::pid_t, u32)> = Vec::with_capacity(jobs);
    for id in 0..jobs as u32 {
        let pid = fork_worker(me, id, 0, worker);
        say(Event::Spawned { worker: id, pid });
        live.push((pid, 0));
    }
    while live.iter().any(|(pid, _)| *pid > 0) {
        let mut status = 0;
        // SAFETY: waits for any child of the zygote (only workers).
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        if pid < 0 {
            break;
        }
        let Some(id) = live.iter().position(|(p, _)| *p == pid) else {
            continue;
        };
        live[id].0 = 0;
        let ended = libc::WIFEXITED(status) && matches!(libc::WEXITSTATUS(status), 0 | EXIT_ERROR);
        if ended || progress.stop.load(Ordering::Relaxed) {
            continue;
        }
        say(Event::Died {
            worker: id as u32,
            status,
        });
        if progress.restarts.fetch_add(1, Ordering::Relaxed) >= MAX_RESTARTS {
            say(Event::GivenUp { worker: id as u32 });
            continue;
        }
        let life = live[id].1 + 1;
        let pid = fork_worker(me, id as u32, life, worker);
        say(Event::Spawned {
            worker: id as u32,
            pid,
        });
        live[id] = (pid, life);
    }
    // SAFETY: leaves without running anything of the session's.
    unsafe { libc::_exit(0) }
}

/// Forks worker `id` in its `life`-th life; -1 when the fork failed.
fn fork_worker(zygote: libc::pid_t, id: u32, life: u32, worker: &dyn Fn(u32, u32) -> i32) -> i32 {
    // SAFETY: the zygote is single-threaded, so the child starts with no
    // lock held; it runs the worker and leaves by `_exit`.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        die_with(zygote);
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| worker(id, life)))
            .unwrap_or(EXIT_PANIC);
        // SAFETY: as above.
        unsafe { libc::_exit(code) }
    }
    pid
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_read_back_as_written() {
        for e in [
            Event::Spawned {
                worker: 1,
                pid: 4242,
            },
            Event::Died {
                worker: 0,
                status: 9,
            },
            Event::GivenUp { worker: 3 },
        ] {
            assert_eq!(Event::parse(e.line().trim_end()), Some(e));
        }
        assert_eq!(Event::parse("spawned x 1"), None);
        assert_eq!(Event::parse("died 1"), None);
    }

    #[test]
    fn a_status_reads_as_what_happened() {
        assert_eq!(describe(9), "killed by signal 9 (SIGKILL)");
        assert_eq!(describe(EXIT_PANIC << 8), "panicked");
        assert_eq!(describe(3 << 8), "exited with code 3");
    }
}
