//! The files the monitor makes up from its own state: `/proc/self`,
//! `/proc/cpuinfo`, the CPU lists of `/sys` and the devices of `/dev`.

use super::files::FileKind;
use super::process::Process;
use super::vfs::NodeKind;
use super::{Kernel, ThreadState, Tid, Wait};
use crate::arch::layout::PAGE_SIZE;
use crate::ids::Pid;
use crate::memory::Usage;

/// The release string programs see.
pub const RELEASE: &str = "6.1.0-rewind";

/// A path in the directory of a process in `/proc`: `/proc/self`,
/// `/proc/thread-self`, `/proc/PID` of a process that has not been reaped,
/// and `/proc/PID/task/TID` of one of its threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ProcPath<'a> {
    pub pid: Pid,
    /// The thread, for a thread's own directory (`thread-self`, `task/TID`).
    pub tid: Option<Tid>,
    /// What follows the directory: "" for the directory itself, else
    /// `/maps`, `/fd/3` ...
    pub rest: &'a str,
}

impl ProcPath<'_> {
    /// Whether it names the calling process's own directory (its
    /// descriptors are only the caller's to see).
    pub fn is_own(&self, k: &Kernel) -> bool {
        self.pid == k.pid
    }
}

/// The process (and thread) directory `path` lies in, if any.
pub(super) fn proc_path<'a>(k: &Kernel, path: &'a str) -> Option<ProcPath<'a>> {
    let after = path.strip_prefix("/proc/")?;
    let (head, rest) = after.split_at(after.find('/').unwrap_or(after.len()));
    let (pid, mut tid) = match head {
        "self" => (k.pid, None),
        "thread-self" => (k.pid, Some(k.current)),
        n if n.bytes().all(|b| b.is_ascii_digit()) => {
            let pid = Pid(n.parse().ok()?);
            if k.procs.contains_key(&pid) {
                (pid, None)
            } else {
                // Linux's hidden thread directories: `/proc/TID` of a
                // thread that leads no process is that thread's own.
                let tid = Tid(pid.0);
                (k.threads.get(&tid)?.pid, Some(tid))
            }
        }
        _ => return None,
    };
    let mut rest = rest;
    if tid.is_none() {
        if let Some(t) = rest.strip_prefix("/task/") {
            let (n, r) = t.split_at(t.find('/').unwrap_or(t.len()));
            let t = Tid(n.parse().ok()?);
            k.threads.get(&t).filter(|th| th.pid == pid)?;
            tid = Some(t);
            rest = r;
        }
    }
    Some(ProcPath { pid, tid, rest })
}

/// What `/proc/PID/exe` links to: the program's file by its canonical
/// path, as Linux names it (none once the process has ended).
pub(super) fn exe_link(k: &mut Kernel, pid: Pid) -> Option<String> {
    let p = k.procs.get(&pid).filter(|p| p.ended.is_none())?;
    let exe = p.exe.clone();
    Some(k.vfs.canonical(&exe))
}

/// The directories of `/proc/PID` (besides the process's own).
pub(super) fn is_proc_dir(rest: &str) -> bool {
    matches!(rest, "" | "/task" | "/fd")
}

/// The files of a process's (or a thread's) directory in `/proc`.
/// (A visitor sees `stack` too.)
const PROCESS_FILES: [&str; 9] = [
    "cgroup", "cmdline", "comm", "environ", "maps", "stat", "statm", "status", "wchan",
];

/// What a directory of `/proc` lists: the processes, a process's files,
/// its threads, its descriptors. Other virtual directories list nothing.
pub(super) fn listing(k: &Kernel, path: &str) -> Vec<(String, NodeKind)> {
    let file = |n: &str| (n.to_string(), NodeKind::File);
    if path == "/proc" {
        let mut out = vec![
            ("self".to_string(), NodeKind::Symlink),
            ("thread-self".to_string(), NodeKind::Symlink),
        ];
        out.extend(["cpuinfo", "meminfo", "stat"].map(file));
        out.push(("sys".to_string(), NodeKind::Dir));
        out.extend(k.procs.keys().map(|p| (p.to_string(), NodeKind::Dir)));
        return out;
    }
    let Some(p) = proc_path(k, path) else {
        return Vec::new();
    };
    match p.rest {
        "" => {
            let mut out: Vec<_> = PROCESS_FILES.map(file).into();
            if k.visiting() {
                out.push(file("stack"));
                out.sort();
            }
            out.push(("exe".to_string(), NodeKind::Symlink));
            out.push(("fd".to_string(), NodeKind::Dir));
            if p.tid.is_none() {
                out.push(("task".to_string(), NodeKind::Dir));
            }
            out
        }
        "/task" => k
            .threads
            .members(p.pid)
            .map(|t| (t.to_string(), NodeKind::Dir))
            .collect(),
        "/fd" => k.procs[&p.pid]
            .files
            .numbers()
            .map(|n| (n.to_string(), NodeKind::Symlink))
            .collect(),
        _ => Vec::new(),
    }
}

/// The contents of a file the monitor makes up, if `path` is one.
pub(super) fn synthetic(k: &mut Kernel, path: &str) -> Option<Vec<u8>> {
    let cpus = k.config.cpus;
    let range = if cpus == 1 {
        "0\n".to_string()
    } else {
        format!("0-{}\n", cpus - 1)
    };
    if let Some(p) = proc_path(k, path) {
        return process_file(k, p);
    }
    match path {
        "/sys/devices/system/cpu/online"
        | "/sys/devices/system/cpu/possible"
        | "/sys/devices/system/cpu/present" => Some(range.into_bytes()),
        "/sys/devices/system/node/online" | "/sys/devices/system/node/possible" => {
            Some(b"0\n".to_vec())
        }
        "/proc/cpuinfo" => Some(cpuinfo(cpus).into_bytes()),
        "/proc/meminfo" => {
            let total = k.mem.size() >> 10;
            Some(format!("MemTotal:       {total} kB\nMemFree:        {total} kB\nMemAvailable:   {total} kB\n").into_bytes())
        }
        "/proc/sys/kernel/osrelease" => Some(format!("{}\n", RELEASE).into_bytes()),
        "/proc/stat" => {
            let mut s = String::from("cpu  0 0 0 0 0 0 0 0 0 0\n");
            for c in 0..cpus {
                s.push_str(&format!("cpu{c} 0 0 0 0 0 0 0 0 0 0\n"));
            }
            Some(s.into_bytes())
        }
        _ => None,
    }
}

/// The NUL-separated form of `/proc/PID/cmdline` and `environ`.
fn nul_separated(items: &[String]) -> Vec<u8> {
    items
        .iter()
        .flat_map(|a| format!("{a}\0").into_bytes())
        .collect()
}

/// A file of a process's directory.
fn process_file(k: &mut Kernel, p: ProcPath) -> Option<Vec<u8>> {
    let proc = k.procs.get(&p.pid)?.clone();
    let thread = thread_of(k, p);
    let name = thread.map_or_else(String::new, |t| k.threads[&t].name.clone());
    Some(match p.rest {
        "/maps" => k.space_of(p.pid)?.maps_text().into_bytes(),
        "/cgroup" => b"0::/\n".to_vec(),
        "/cmdline" => nul_separated(&proc.cmdline),
        "/environ" => nul_separated(&proc.environ),
        "/comm" => format!("{name}\n").into_bytes(),
        "/status" => status_text(k, &proc, thread, &name).into_bytes(),
        "/wchan" => wchan(k, thread).as_bytes().to_vec(),
        // The user's stack, named: what a visitor looks at (Linux's is
        // the kernel's, and root's only).
        "/stack" => k.visit_stack(thread?)?.into_bytes(),
        "/stat" => stat_text(k, &proc, thread, &name).into_bytes(),
        "/statm" => {
            let u = usage(k, p.pid);
            format!(
                "{} {} {} {} 0 {} 0\n",
                u.size, u.resident, u.shared, u.text, u.data
            )
            .into_bytes()
        }
        _ => return None,
    })
}

/// The thread a process file speaks for: the one named, else the
/// process's first thread while it lives (Linux's group leader), else any
/// live one of the process.
fn thread_of(k: &Kernel, p: ProcPath) -> Option<Tid> {
    if p.tid.is_some() {
        return p.tid;
    }
    let live = |t: &Tid| k.threads.get(t).is_some_and(|t| t.is_alive());
    let leader = p.pid.first_thread();
    if live(&leader) {
        return Some(leader);
    }
    k.threads
        .members(p.pid)
        .next()
        .or_else(|| k.threads.contains_key(&leader).then_some(leader))
}

fn usage(k: &Kernel, pid: Pid) -> Usage {
    k.space_of(pid).map(|s| s.usage(&k.mem)).unwrap_or_default()
}

fn threads_of(k: &Kernel, pid: Pid) -> usize {
    k.threads.alive_in(pid)
}

/// A thread's state as Linux's `stat` (a letter) and `status` (with a
/// word) give it. During a visit the run's threads that could run are
/// stopped, as under a tracer.
fn state_of(k: &Kernel, proc: &Process, thread: Option<Tid>) -> (char, &'static str) {
    if proc.ended.is_some() {
        return ('Z', "zombie");
    }
    match thread.and_then(|t| k.threads.get(&t)) {
        Some(t) => match t.state() {
            ThreadState::Blocked(_) => ('S', "sleeping"),
            ThreadState::Exited => ('X', "dead"),
            ThreadState::Runnable if !k.may_run(t.tid) => ('t', "tracing stop"),
            ThreadState::Runnable => ('R', "running"),
        },
        None => ('R', "running"),
    }
}

/// `/proc/PID/wchan`: where in the kernel a blocked thread sleeps, by the
/// name of Linux's function for the wait; `0` for one that can run.
fn wchan(k: &Kernel, thread: Option<Tid>) -> &'static str {
    let state = thread.and_then(|t| k.threads.get(&t)).map(|t| t.state());
    let Some(ThreadState::Blocked(w)) = state else {
        return "0";
    };
    match w {
        Wait::Futex { .. } => "futex_wait_queue",
        Wait::Sleep { .. } => "hrtimer_nanosleep",
        Wait::Poll { .. } | Wait::Readable { .. } => "do_sys_poll",
        Wait::Pipe { write: false, .. } => "pipe_read",
        Wait::Pipe { write: true, .. } => "pipe_write",
        Wait::Signal => "sigsuspend",
        Wait::SigWait { .. } => "do_sigtimedwait",
        Wait::Child { .. } => "do_wait",
        Wait::Vfork { .. } => "wait_for_vfork_done",
    }
}

/// What blocked thread `t` waits on, as the kernel tells it, a join by
/// the thread it waits for (the futex word that thread's end clears).
fn waits_text(k: &Kernel, t: Tid) -> Option<String> {
    let b = k.blocked_threads().into_iter().find(|b| b.thread == t)?;
    let pid = k.threads.get(&t)?.pid;
    let joined = b.object.and_then(|word| {
        k.threads
            .members(pid)
            .find(|o| *o != t && k.threads[o].clear_child_tid == word)
    });
    Some(match joined {
        Some(o) => format!("thread {o} to end (a join)"),
        None => b.waits_on,
    })
}

fn status_text(k: &Kernel, proc: &Process, thread: Option<Tid>, name: &str) -> String {
    let n = threads_of(k, proc.pid);
    let cpus = k.config.cpus;
    let u = usage(k, proc.pid);
    let kb = |pages: u64| pages * PAGE_SIZE / 1024;
    let (letter, word) = state_of(k, proc, thread);
    let state = format!("{letter} ({word})");
    // What a blocked thread waits on, for a visitor (Linux has no such
    // line; the run's own processes never see it).
    let waits = match thread.filter(|_| k.visiting()) {
        Some(t) => waits_text(k, t).map_or_else(String::new, |w| format!("Waits:\t{w}\n")),
        None => String::new(),
    };
    format!(
        "Name:\t{name}\nState:\t{state}\nTgid:\t{pid}\nPid:\t{id}\nPPid:\t{ppid}\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nVmSize:\t{} kB\nVmRSS:\t{} kB\nVmData:\t{} kB\nVmExe:\t{} kB\nThreads:\t{n}\nCpus_allowed:\t{:x}\nCpus_allowed_list:\t0-{}\nMems_allowed:\t00000001\nMems_allowed_list:\t0\n{waits}",
        kb(u.size),
        kb(u.resident),
        kb(u.data),
        kb(u.text),
        (1u128 << cpus.min(127)) - 1,
        cpus.saturating_sub(1),
        pid = proc.pid,
        // A thread's own directory names it (Linux's task/TID/status).
        id = thread.map_or(proc.pid.0, |t| t.0),
        ppid = proc.parent,
    )
}

/// Clock ticks (`sysconf(_SC_CLK_TCK)`, 100 a second) in `ns` of virtual
/// time.
fn ticks(ns: u64) -> u64 {
    ns / 10_000_000
}

/// `/proc/PID/stat`: Linux's 52 fields. Time is virtual time: the
/// process's user time is all of it since it started, system time none.
fn stat_text(k: &Kernel, proc: &Process, thread: Option<Tid>, name: &str) -> String {
    let u = usage(k, proc.pid);
    let (state, _) = state_of(k, proc, thread);
    let utime = ticks(k.now.saturating_sub(proc.started));
    let start = ticks(proc.started);
    let n = threads_of(k, proc.pid);
    let (sigmask, id) = thread
        .and_then(|t| k.threads.get(&t))
        .map_or((0, proc.pid.0), |t| (t.sigmask(), t.tid.0));
    let rss_limit = u64::MAX;
    let exit = match proc.ended {
        Some(e) => e.wait_status(),
        None => 0,
    };
    format!(
        "{id} ({name}) {state} {ppid} {pgid} {sid} 0 -1 4194560 0 0 0 0 {utime} 0 0 0 20 0 {n} 0 {start} {vsize} {rss} {rss_limit} 0 0 0 0 0 0 {sigmask} 0 0 0 0 0 {exit_signal} 0 0 0 0 0 0 0 0 0 0 0 0 0 {exit}\n",
        ppid = proc.parent,
        pgid = proc.pgid,
        sid = proc.sid,
        vsize = u.size * PAGE_SIZE,
        rss = u.resident,
        exit_signal = proc.exit_signal,
    )
}

fn cpuinfo(cpus: u32) -> String {
    let mut s = String::new();
    for c in 0..cpus {
        s.push_str(&format!(
            "processor\t: {c}\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\nmodel name\t: rewind-fuzz virtual CPU (x86-64-v3)\nstepping\t: 4\ncpu MHz\t\t: 1000.000\ncache size\t: 32768 KB\nphysical id\t: 0\nsiblings\t: {cpus}\ncore id\t\t: {c}\ncpu cores\t: {cpus}\napicid\t\t: {c}\nfpu\t\t: yes\nflags\t\t: fpu vme de pse tsc msr pae mce cx8 sep pge mca cmov pat clflush mmx fxsr sse sse2 syscall nx lm pni pclmulqdq ssse3 fma cx16 sse4_1 sse4_2 movbe popcnt aes xsave avx f16c lahf_lm abm bmi1 avx2 bmi2 erms adx\nbogomips\t: 2000.00\nclflush size\t: 64\naddress sizes\t: 48 bits physical, 48 bits virtual\n\n"
        ));
    }
    s
}

/// The guest's own descriptors under their `/dev` names: `/dev/stdin`,
/// `/dev/stdout`, `/dev/stderr` and `/dev/fd/N` are Linux's links into
/// `/proc/self/fd`. Looked up on the host they would name the monitor's
/// own descriptors (a file or a pipe, depending on how it was started).
pub(super) fn fd_alias(path: &str) -> Option<String> {
    let n = match path {
        "/dev/stdin" => "0",
        "/dev/stdout" => "1",
        "/dev/stderr" => "2",
        "/dev/fd" => return Some("/proc/self/fd".into()),
        p => p.strip_prefix("/dev/fd/")?,
    };
    Some(format!("/proc/self/fd/{n}"))
}

/// The special files of `/dev`.
pub(super) fn device(path: &str) -> Option<FileKind> {
    Some(match path {
        "/dev/null" => FileKind::Null,
        "/dev/zero" => FileKind::Zero,
        "/dev/urandom" | "/dev/random" => FileKind::Random,
        _ => return None,
    })
}

/// Whether a path lies in the monitor's own trees (never the host's).
pub(super) fn is_virtual_tree(path: &str) -> bool {
    path == "/proc" || path.starts_with("/proc/") || path == "/sys" || path.starts_with("/sys/")
}
