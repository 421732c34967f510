//! Processes: fork, vfork and clone without CLONE_THREAD, execve, wait,
//! process groups and sessions.
//!
//! A forked child gets a copy-on-write copy of its parent's address space
//! and copies of its descriptors and signal dispositions; a `vfork` child
//! (or a clone with CLONE_VM) runs in its parent's address space while the
//! parent waits for it to exec or exit. Every thread of every process is
//! scheduled by the same strategy, so one schedule covers the whole tree.

use super::call::{SyscallDef, def};
use super::clone_args::{
    CLONE_CHILD_CLEARTID, CLONE_CHILD_SETTID, CLONE_CLEAR_SIGHAND, CLONE_DETACHED,
    CLONE_PARENT_SETTID, CLONE_SETTLS, CLONE_THREAD, CLONE_VFORK, CLONE_VM, CloneArgs,
};
use super::loader::{self, Exec, LoadError};
use super::process::{Ended, Process};
use super::sys_thread::clone_thread;
use super::thread::{Thread, Wait};
use super::{FpuAccess, Kernel, SysResult, err};
use crate::arch::cpu::ExtendedState;
use crate::ids::Pid;

pub const CALLS: &[SyscallDef] = &[
    def(
        libc::SYS_unshare,
        sys_unshare,
        "a mount namespace (the machine mounts nothing); a working directory of the thread's own; the descriptor table of a process with one thread; other namespaces are unsupported",
    ),
    def(
        libc::SYS_clone,
        sys_clone,
        "threads, and processes as fork and vfork do; not CLONE_FILES, CLONE_SIGHAND or namespaces for processes",
    ),
    def(libc::SYS_clone3, sys_clone3, "as clone"),
    def(
        libc::SYS_fork,
        sys_fork,
        "the parent's private writable pages copied (copy-on-write above 32 MiB); descriptors share offsets and status flags",
    ),
    def(
        libc::SYS_vfork,
        sys_vfork,
        "the child runs in the parent's memory; the parent waits until it execs or exits",
    ),
    def(
        libc::SYS_execve,
        sys_execve,
        "static and dynamic ELF programs and #! scripts; execute permission is not checked",
    ),
    def(
        libc::SYS_execveat,
        sys_execveat,
        "AT_FDCWD and absolute paths",
    ),
    def(
        libc::SYS_wait4,
        sys_wait4,
        "exited and killed children; stopped ones never are; rusage is zero",
    ),
    def(
        libc::SYS_waitid,
        sys_waitid,
        "P_ALL, P_PID, P_PGID; WEXITED",
    ),
    def(
        libc::SYS_pidfd_open,
        sys_pidfd_open,
        "readable once the process ends; for poll, epoll and waitid(P_PIDFD)",
    ),
    def(libc::SYS_getppid, sys_getppid, ""),
    def(libc::SYS_getpgrp, sys_getpgrp, ""),
    def(libc::SYS_getpgid, sys_getpgid, ""),
    def(libc::SYS_setpgid, sys_setpgid, ""),
    def(libc::SYS_getsid, sys_getsid, ""),
    def(libc::SYS_setsid, sys_setsid, ""),
];

fn sys_fork(k: &mut Kernel, cpu: &mut dyn FpuAccess, _: [u64; 6]) -> SysResult {
    let c = CloneArgs {
        exit_signal: libc::SIGCHLD as u32,
        ..Default::default()
    };
    spawn(k, cpu, c)
}

fn sys_vfork(k: &mut Kernel, cpu: &mut dyn FpuAccess, _: [u64; 6]) -> SysResult {
    let c = CloneArgs {
        flags: CLONE_VM | CLONE_VFORK,
        exit_signal: libc::SIGCHLD as u32,
        ..Default::default()
    };
    spawn(k, cpu, c)
}

/// Creates a process (`clone` without CLONE_THREAD): a copy of the current
/// one whose first thread returns 0 where the caller returns the new pid.
fn spawn(k: &mut Kernel, cpu: &mut dyn FpuAccess, c: CloneArgs) -> SysResult {
    let CloneArgs {
        flags,
        exit_signal,
        stack,
        parent_tid,
        child_tid,
        tls,
    } = c;
    let known = CLONE_VM
        | CLONE_VFORK
        | CLONE_SETTLS
        | CLONE_PARENT_SETTID
        | CLONE_CHILD_CLEARTID
        | CLONE_DETACHED
        | CLONE_CHILD_SETTID
        | CLONE_CLEAR_SIGHAND;
    if flags & !known != 0 {
        return SysResult::Unsupported(format!(
            "creating a process with clone flags {:#x}",
            flags & !known
        ));
    }
    let tid = k.alloc_tid();
    let pid = Pid::from(tid);
    let space = if flags & CLONE_VM != 0 {
        k.space
    } else {
        match k.mm.fork(&k.mem) {
            Ok(child) => {
                k.park_space(pid, child);
                pid
            }
            Err(_) => return err(libc::ENOMEM),
        }
    };
    let parent = k.cur().clone();
    let mut regs = parent.regs;
    regs.rax = 0;
    if stack != 0 {
        regs.rsp = stack;
    }
    let mut child = Thread::new(tid, regs, parent.name.clone()).with_sigmask(parent.sigmask());
    child.fs_base = if flags & CLONE_SETTLS != 0 {
        tls
    } else {
        parent.fs_base
    };
    child.altstack = parent.altstack;
    child.mempolicy = parent.mempolicy;
    child.timer_slack = parent.timer_slack;
    child.fpu = Some(cpu.save());
    if flags & CLONE_CHILD_CLEARTID != 0 {
        child.clear_child_tid = child_tid;
    }
    k.share_descriptions();
    k.sync_files();
    let cwd = k.cwd().to_string();
    let me = k.process_entry().clone();
    k.copied_files(&me.files);
    let mut signals = me.signals;
    if flags & CLONE_CLEAR_SIGHAND != 0 {
        signals.reset_for_exec();
    }
    k.add_process(Process {
        pid,
        parent: k.pid,
        pgid: me.pgid,
        sid: me.sid,
        space,
        exe: me.exe,
        cmdline: me.cmdline,
        environ: me.environ,
        started: k.now,
        options: me.options.for_child(),
        ended: None,
        exit_signal,
        vfork_parent: (flags & CLONE_VFORK != 0).then_some(k.current),
        files: me.files,
        signals,
        limits: me.limits,
        cwd,
    });
    k.threads.insert(tid, child);
    if flags & CLONE_PARENT_SETTID != 0 {
        let _ = k.write_u32(parent_tid, pid.0);
    }
    if flags & CLONE_CHILD_SETTID != 0 {
        let _ = k.with_process(pid, |k| k.write_u32(child_tid, pid.0));
    }
    if flags & CLONE_VFORK != 0 {
        SysResult::Block(Wait::Vfork { child: pid.0 })
    } else {
        SysResult::Ret(pid.0 as i64)
    }
}

/// Reads a NULL-terminated array of string pointers (argv, envp).
/// Strings longer than Linux takes (`MAX_ARG_STRLEN`), or more of them
/// than a stack holds, are E2BIG; `used` counts the bytes taken so far.
fn read_strings(k: &mut Kernel, mut at: u64, used: &mut usize) -> Result<Vec<String>, i32> {
    let mut out = Vec::new();
    if at == 0 {
        return Ok(out);
    }
    loop {
        let p = k.read_u64(at).map_err(|_| libc::EFAULT)?;
        if p == 0 {
            return Ok(out);
        }
        let s = match k.mm.read_cstr(&k.mem, p, loader::MAX_ARG_BYTES - 1) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(crate::memory::MemError::Invalid) => return Err(libc::E2BIG),
            Err(_) => return Err(libc::EFAULT),
        };
        *used += s.len() + 1 + 8;
        if *used > loader::MAX_ARGS_BYTES {
            return Err(libc::E2BIG);
        }
        out.push(s);
        at += 8;
    }
}

fn sys_execve(k: &mut Kernel, cpu: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let args = (|| {
        let path = k.read_cstr(a[0]).map_err(|_| libc::EFAULT)?;
        let mut used = 0;
        let argv = read_strings(k, a[1], &mut used)?;
        Ok((path, argv, read_strings(k, a[2], &mut used)?))
    })();
    match args {
        Ok((path, argv, env)) => exec(k, cpu, path, argv, env),
        Err(e) => err(e),
    }
}

fn sys_execveat(k: &mut Kernel, cpu: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let path = match k.read_cstr(a[1]) {
        Ok(p) => p,
        Err(_) => return err(libc::EFAULT),
    };
    if a[0] as i32 != libc::AT_FDCWD && !path.starts_with('/') {
        return SysResult::Unsupported("execveat relative to a directory descriptor".into());
    }
    if a[4] != 0 {
        return SysResult::Unsupported(format!("execveat flags {:#x}", a[4]));
    }
    sys_execve(k, cpu, [a[1], a[2], a[3], 0, 0, 0])
}

/// The program `execve(path)` runs: the file itself, or the interpreter
/// its `#!` line names (with its argument and the script's path in front
/// of the arguments).
fn resolve_program(
    k: &mut Kernel,
    mut path: String,
    mut argv: Vec<String>,
) -> Result<(String, Vec<String>), i32> {
    for _ in 0..5 {
        let data = loader::read_program(k, &path).map_err(|e| match e {
            LoadError::IsDirectory(_) => libc::EACCES,
            _ => libc::ENOENT,
        })?;
        if !data.starts_with(b"#!") {
            loader::check_elf(&path, &data).map_err(|_| libc::ENOEXEC)?;
            return Ok((path, argv));
        }
        let line = data[2..].split(|b| *b == b'\n').next().unwrap_or_default();
        let line = String::from_utf8_lossy(&line[..line.len().min(255)]).into_owned();
        let line = line.trim();
        let (interp, arg) = match line.split_once([' ', '\t']) {
            Some((i, rest)) => (i.to_string(), Some(rest.trim().to_string())),
            None => (line.to_string(), None),
        };
        if interp.is_empty() {
            return Err(libc::ENOEXEC);
        }
        let mut next = vec![interp.clone()];
        next.extend(arg.filter(|a| !a.is_empty()));
        next.push(path);
        next.extend(argv.into_iter().skip(1));
        argv = next;
        path = interp;
    }
    Err(libc::ELOOP)
}

/// Replaces the current process's program.
fn exec(
    k: &mut Kernel,
    cpu: &mut dyn FpuAccess,
    path: String,
    argv: Vec<String>,
    env: Vec<String>,
) -> SysResult {
    // Linux names the process (comm) and AT_EXECFN after the path it was
    // given, a script's own, not its interpreter's.
    let execfn = path.clone();
    let (exe, argv) = match resolve_program(k, path, argv) {
        Ok((exe, argv)) => (k.absolute(&exe), argv),
        Err(e) => return err(e),
    };
    let exec = Exec {
        exe: exe.clone(),
        execfn: execfn.clone(),
        argv: argv.clone(),
        env: env.clone(),
    };
    // What Linux refuses before it lets go of the old program.
    let ready = loader::read_program(k, &exe).map_err(|_| libc::ENOENT);
    if let Err(e) = ready.and_then(|data| loader::check_exec(k, &exe, &data, &exec)) {
        return err(e);
    }
    // No way back from here: the old program is gone.
    let pid = k.pid;
    let me = k.current;
    let others: Vec<super::Tid> = k.threads.members(pid).filter(|t| *t != me).collect();
    k.changes.count(others.len() as u64);
    for tid in others {
        k.threads.set_state(tid, super::ThreadState::Exited);
        k.threads.change_pending(tid, Vec::clear);
    }
    let fresh = match k.mm.fresh(&k.mem) {
        Ok(f) => f,
        Err(_) => {
            k.crash(libc::SIGKILL as u32, None);
            return SysResult::NoReturn;
        }
    };
    let shared = k.space_used_by_another(k.space, pid);
    if shared {
        // A vfork child leaves its parent's memory as it was.
        k.park_space(pid, fresh);
        k.set_space_of(pid, pid);
        k.switch_space(pid);
    } else {
        k.mm.tear_down(&k.mem);
        let mut fresh = fresh;
        k.mm.hand_pool_to(&mut fresh);
        k.invalidate |= k.mm.take_needs_invalidate();
        k.mm = fresh;
        k.collect_shared();
    }
    if let Some(parent) = k.procs.get_mut(&pid).and_then(|p| p.vfork_parent.take()) {
        k.wake(parent, pid.0 as i64);
    }
    k.files_mut().close_on_exec();
    k.signals_mut().reset_for_exec();
    k.timers.exec(pid);
    let loaded = k
        .map_ring()
        .map_err(|e| LoadError::Memory("the hint ring".into(), e))
        .and_then(|_| loader::load(k, &exec));
    let regs = match loaded {
        Ok(r) => r,
        Err(_) => {
            // Linux kills a process whose new image cannot be set up.
            k.crash(libc::SIGSEGV as u32, None);
            return SysResult::NoReturn;
        }
    };
    cpu.load(&ExtendedState::initial());
    let name: String = execfn
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .chars()
        .take(15)
        .collect();
    let t = k.cur();
    t.regs = regs;
    t.fs_base = 0;
    t.altstack = Default::default();
    t.clear_child_tid = 0;
    t.robust_list = 0;
    t.pending_site = None;
    t.name = name;
    let p = k.procs.get_mut(&pid).expect("current");
    p.exe = exe;
    p.cmdline = argv;
    p.environ = env;
    p.options.dumpable = true;
    SysResult::NoReturn
}

/// Which children a `wait` call asks about.
#[derive(Clone, Copy)]
enum Which {
    Any,
    Pid(Pid),
    Group(Pid),
}

/// The children of the current process `which` names, lowest pid first:
/// `(pid, how it ended)`.
fn children(k: &Kernel, which: Which) -> Vec<(Pid, Option<Ended>)> {
    let entry = |pid: Pid| (pid, k.procs[&pid].ended);
    match which {
        Which::Pid(n) => k
            .children
            .get(&k.pid)
            .filter(|c| c.contains(&n))
            .map(|_| entry(n))
            .into_iter()
            .collect(),
        Which::Any => k.children_of(k.pid).map(entry).collect(),
        Which::Group(g) => k
            .children_of(k.pid)
            .filter(|p| k.procs[p].pgid == g)
            .map(entry)
            .collect(),
    }
}

/// Forgets an ended child once its parent has waited for it.
fn reap(k: &mut Kernel, pid: Pid) {
    if let Some(p) = k.remove_process(pid) {
        let in_use = k.space_users.contains_key(&p.space);
        if !in_use && p.space != k.space {
            k.spaces.remove(&p.space);
        }
    }
}

const WNOHANG: u64 = 1;
const WEXITED: u64 = 4;
const WNOWAIT: u64 = 0x0100_0000;

fn sys_wait4(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let [sel, status, options, rusage, ..] = a;
    let which = match sel as i32 {
        -1 => Which::Any,
        0 => Which::Group(k.process_entry().pgid),
        n if n > 0 => Which::Pid(Pid(n as u32)),
        n => Which::Group(Pid(n.unsigned_abs())),
    };
    let found = children(k, which);
    if found.is_empty() {
        return err(libc::ECHILD);
    }
    let Some((pid, how)) = found.iter().find_map(|(p, e)| e.map(|e| (*p, e))) else {
        if options & WNOHANG != 0 {
            return SysResult::Ret(0);
        }
        return SysResult::Block(Wait::Child {
            nr: libc::SYS_wait4 as u64,
        });
    };
    if status != 0 && k.write_u32(status, how.wait_status() as u32).is_err() {
        return err(libc::EFAULT);
    }
    if rusage != 0 && k.write(rusage, &[0u8; 144]).is_err() {
        return err(libc::EFAULT);
    }
    reap(k, pid);
    SysResult::Ret(pid.0 as i64)
}

fn sys_waitid(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let [idtype, id, infop, options, ..] = a;
    let which = match idtype {
        0 => Which::Any,
        1 => Which::Pid(Pid(id as u32)),
        2 if id == 0 => Which::Group(k.process_entry().pgid),
        2 => Which::Group(Pid(id as u32)),
        3 => match k.files().get(id as i32).map(|f| f.kind.clone()) {
            Some(super::files::FileKind::PidFd { pid }) => Which::Pid(pid),
            Some(_) => return err(libc::EINVAL),
            None => return err(libc::EBADF),
        },
        _ => return err(libc::EINVAL),
    };
    if options & WEXITED == 0 {
        return err(libc::EINVAL);
    }
    let found = children(k, which);
    if found.is_empty() {
        return err(libc::ECHILD);
    }
    let mut info = [0u8; 128];
    let Some((pid, how)) = found.iter().find_map(|(p, e)| e.map(|e| (*p, e))) else {
        if options & WNOHANG != 0 {
            if infop != 0 && k.write(infop, &info).is_err() {
                return err(libc::EFAULT);
            }
            return SysResult::Ret(0);
        }
        return SysResult::Block(Wait::Child {
            nr: libc::SYS_waitid as u64,
        });
    };
    let (code, value): (i32, i32) = match how {
        Ended::Exited(c) => (1, c),        // CLD_EXITED
        Ended::Killed(s) => (2, s as i32), // CLD_KILLED
    };
    info[0..4].copy_from_slice(&libc::SIGCHLD.to_le_bytes());
    info[8..12].copy_from_slice(&code.to_le_bytes());
    info[16..20].copy_from_slice(&pid.0.to_le_bytes());
    info[24..28].copy_from_slice(&value.to_le_bytes());
    if infop != 0 && k.write(infop, &info).is_err() {
        return err(libc::EFAULT);
    }
    if options & WNOWAIT == 0 {
        reap(k, pid);
    }
    SysResult::Ret(0)
}

fn sys_pidfd_open(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let (pid, flags) = (a[0] as i32, a[1] as i32);
    if flags & !libc::O_NONBLOCK != 0 || pid <= 0 {
        return err(libc::EINVAL);
    }
    if !k.procs.contains_key(&Pid(pid as u32)) {
        return err(libc::ESRCH);
    }
    let f = super::files::OpenFile {
        kind: super::files::FileKind::PidFd {
            pid: Pid(pid as u32),
        },
        path: "anon_inode:[pidfd]".into(),
        offset: 0,
        flags: libc::O_RDWR | flags,
        shared: None,
    };
    match k.files_mut().install(f, true, 0) {
        Ok(fd) => SysResult::Ret(fd as i64),
        Err(e) => err(e),
    }
}

fn sys_getppid(k: &mut Kernel, _: &mut dyn FpuAccess, _: [u64; 6]) -> SysResult {
    SysResult::Ret(k.process_entry().parent.0 as i64)
}

/// The live process `pid` names (0: the caller).
fn target(k: &Kernel, pid: u64) -> Option<&Process> {
    let pid = if pid == 0 { k.pid } else { Pid(pid as u32) };
    k.procs.get(&pid).filter(|p| p.ended.is_none())
}

fn sys_getpgrp(k: &mut Kernel, _: &mut dyn FpuAccess, _: [u64; 6]) -> SysResult {
    SysResult::Ret(k.process_entry().pgid.0 as i64)
}

fn sys_getpgid(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    match target(k, a[0]) {
        Some(p) => SysResult::Ret(p.pgid.0 as i64),
        None => err(libc::ESRCH),
    }
}

fn sys_getsid(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    match target(k, a[0]) {
        Some(p) => SysResult::Ret(p.sid.0 as i64),
        None => err(libc::ESRCH),
    }
}

fn sys_setpgid(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    if (a[1] as i64) < 0 {
        return err(libc::EINVAL);
    }
    let me = k.pid;
    let Some(p) = target(k, a[0]) else {
        return err(libc::ESRCH);
    };
    if p.pid != me && p.parent != me {
        return err(libc::ESRCH);
    }
    let pid = p.pid;
    let pgid = if a[1] == 0 { pid } else { Pid(a[1] as u32) };
    k.procs.get_mut(&pid).expect("found").pgid = pgid;
    SysResult::Ret(0)
}

fn sys_setsid(k: &mut Kernel, _: &mut dyn FpuAccess, _: [u64; 6]) -> SysResult {
    let pid = k.pid;
    if k.procs.values().any(|p| p.pgid == pid && p.ended.is_none()) {
        return err(libc::EPERM);
    }
    let p = k.procs.get_mut(&pid).expect("current");
    p.pgid = pid;
    p.sid = pid;
    SysResult::Ret(pid.0 as i64)
}

/// What `unshare` can give: a mount namespace of its own changes nothing
/// the guest can see (the machine has one tree and no mount calls); a
/// working directory of its own is the thread's `own_cwd`; the
/// descriptor table and the semaphore undo list are already the caller's
/// own when it is its process's only thread.
const UNSHARE_NAMESPACE: u64 = libc::CLONE_NEWNS as u64;
const UNSHARE_FS: u64 = libc::CLONE_FS as u64;
const UNSHARE_ALONE: u64 = (libc::CLONE_FILES | libc::CLONE_SYSVSEM) as u64;

fn sys_unshare(k: &mut Kernel, _: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    let flags = a[0];
    let known = UNSHARE_NAMESPACE | UNSHARE_FS | UNSHARE_ALONE;
    if flags & !known != 0 {
        return SysResult::Unsupported(format!("unshare of namespaces {:#x}", flags & !known));
    }
    // A descriptor table shared with other threads would have to be split
    // from theirs: not modelled, so said rather than pretended.
    if flags & UNSHARE_ALONE != 0 && k.threads.alive_in(k.pid) > 1 {
        return SysResult::Unsupported(format!(
            "unshare {:#x} by a thread of a process with other threads",
            flags & UNSHARE_ALONE
        ));
    }
    // A directory of its own even when it had one shared with threads it
    // made: unsharing parts it from them too.
    if flags & UNSHARE_FS != 0 {
        let id = k.new_own_cwd();
        k.cur().own_cwd = Some(id);
    }
    SysResult::Ret(0)
}

fn sys_clone(k: &mut Kernel, cpu: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    clone(k, cpu, CloneArgs::of_clone(a))
}

fn sys_clone3(k: &mut Kernel, cpu: &mut dyn FpuAccess, a: [u64; 6]) -> SysResult {
    match CloneArgs::read_clone3(k, a[0], a[1]) {
        Ok(c) => clone(k, cpu, c),
        Err(e) => err(e),
    }
}

/// A thread (CLONE_THREAD) or a process.
fn clone(k: &mut Kernel, cpu: &mut dyn FpuAccess, c: CloneArgs) -> SysResult {
    if c.flags & CLONE_THREAD == 0 {
        spawn(k, cpu, c)
    } else {
        clone_thread(k, cpu, c)
    }
}
