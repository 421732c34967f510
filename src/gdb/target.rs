//! The GDB remote protocol side: a `gdbstub` target over a [`Timeline`].
//!
//! Every guest thread is a gdb thread. Registers come from the kernel's
//! thread records (the running thread's extended state from the CPU),
//! memory through the monitor's page tables without filling anything. The
//! run is read-only: register and memory writes are refused, so nothing
//! gdb does can change it. Files gdb asks for (`target:` sysroot, the
//! default) are the bytes the guest itself loaded, from the run's file
//! source, so shared libraries and the pthread shim resolve exactly; no
//! other host file is served, but for separate debug info.

use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroUsize;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use gdbstub::common::{Pid, Signal, Tid as GdbTid};
use gdbstub::target::ext::auxv::{Auxv, AuxvOps};
use gdbstub::target::ext::base::BaseOps;
use gdbstub::target::ext::base::multithread::{
    MultiThreadBase, MultiThreadResume, MultiThreadResumeOps, MultiThreadSchedulerLocking,
    MultiThreadSchedulerLockingOps, MultiThreadSingleStep, MultiThreadSingleStepOps,
};
use gdbstub::target::ext::base::reverse_exec::{
    ReplayLogPosition, ReverseCont, ReverseContOps, ReverseStep, ReverseStepOps,
};
use gdbstub::target::ext::breakpoints::{
    Breakpoints, BreakpointsOps, HwBreakpoint, HwBreakpointOps, SwBreakpoint, SwBreakpointOps,
};
use gdbstub::target::ext::exec_file::{ExecFile, ExecFileOps};
use gdbstub::target::ext::extended_mode::{
    Args, AttachKind, ExtendedMode, ExtendedModeOps, ShouldTerminate,
};
use gdbstub::target::ext::host_io::{
    FsKind, HostIo, HostIoClose, HostIoCloseOps, HostIoErrno, HostIoError, HostIoFstat,
    HostIoFstatOps, HostIoOpen, HostIoOpenFlags, HostIoOpenMode, HostIoOpenOps, HostIoOps,
    HostIoPread, HostIoPreadOps, HostIoReadlink, HostIoReadlinkOps, HostIoResult, HostIoSetfs,
    HostIoSetfsOps, HostIoStat,
};
use gdbstub::target::ext::monitor_cmd::{ConsoleOutput, MonitorCmd, MonitorCmdOps};
use gdbstub::target::ext::thread_extra_info::{ThreadExtraInfo, ThreadExtraInfoOps};
use gdbstub::target::{Target, TargetError, TargetResult};

use super::arch::{LinuxRegs, X86_64Linux};
use super::locks::HeapNames;
use super::timeline::{Halt, Position, Timeline};
use crate::engine::VmError;
use crate::ids::Tid;
use crate::kernel::vfs::{HostNode, SharedSource};
use crate::observe::outcome::Outcome;

/// What gdb asked the run to do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Continue,
    Step(Tid),
    ReverseStep,
    ReverseContinue,
}

/// A stop, as gdbstub reports it.
pub type StopReason = gdbstub::stub::MultiThreadStopReason<u64>;

/// The most memory one `m` packet may read: its reply, two hex digits a
/// byte, fills the packet size the stub advertises. gdb never asks for
/// more; a longer request is refused at once instead of being read chunk
/// after chunk (gdbstub hands the target chunks as long as its whole
/// packet buffer, so any longer request shows in the first chunk).
const MAX_MEMORY_READ: usize = super::PACKET_SIZE / 2;

/// Where gdb looks for separate debug info (its `debug-file-directory`,
/// under the `target:` sysroot): the only host files served that the run
/// did not read.
const DEBUG_INFO_DIR: &str = "/usr/lib/debug/";

/// Files one connection may hold open (gdb holds a few).
const MAX_OPEN_FILES: usize = 64;

/// A file gdb opened.
enum OpenFile {
    /// Bytes of the run: its file source, or its own state (`maps`).
    Run(Arc<Vec<u8>>),
    /// A separate debug info file of the host, read where gdb asks.
    DebugInfo(std::fs::File),
}

/// The debugged run as gdb's target.
pub struct Session {
    tl: Timeline,
    breakpoints: BTreeSet<u64>,
    action: Option<Action>,
    source: SharedSource,
    exe: String,
    /// Files gdb opened, by descriptor.
    open_files: BTreeMap<u32, OpenFile>,
    next_fd: u32,
    /// Whether the ending signal of a crashed run was reported already.
    crash_reported: bool,
    /// Names of heap locks for `monitor locks` and `info threads`, found
    /// once per session (`info threads` reads the session unchanged).
    heap: std::cell::RefCell<HeapNames>,
    /// `info threads`' text for each thread, and where the run stood then.
    thread_infos: std::cell::RefCell<Option<(super::Position, BTreeMap<Tid, String>)>>,
}

impl Session {
    pub fn new(tl: Timeline, source: SharedSource, exe: String, heap: HeapNames) -> Session {
        Session {
            tl,
            breakpoints: BTreeSet::new(),
            action: None,
            source,
            exe,
            open_files: BTreeMap::new(),
            next_fd: 3,
            crash_reported: false,
            heap: std::cell::RefCell::new(heap),
            thread_infos: Default::default(),
        }
    }

    /// The timeline (for the server around the session).
    pub fn timeline(&mut self) -> &mut Timeline {
        &mut self.tl
    }

    /// The timeline, to read.
    pub fn timeline_ref(&self) -> &Timeline {
        &self.tl
    }

    /// Hands the timeline back.
    pub fn into_timeline(self) -> Timeline {
        self.tl
    }

    /// Forgets what one gdb connection set up (its breakpoints), so the
    /// next one starts clean.
    pub fn reset_connection(&mut self) {
        self.breakpoints.clear();
        self.action = None;
        self.open_files.clear();
    }

    /// Carries out the action gdb asked for and says where the run stopped.
    /// A continue also stops when `interrupted` says so (gdb's Ctrl-C).
    pub fn carry_out(
        &mut self,
        interrupted: &mut dyn FnMut() -> bool,
    ) -> Result<StopReason, VmError> {
        let action = self.action.take().unwrap_or(Action::Continue);
        let bps = self.breakpoints.clone();
        let halt = match action {
            Action::Continue => self.tl.cont(&bps, interrupted)?,
            Action::Step(tid) => self.tl.step(tid, &bps)?,
            Action::ReverseStep => self.tl.reverse_step()?,
            Action::ReverseContinue => self.tl.reverse_cont(&bps)?,
        };
        Ok(self.stop_reason(halt))
    }

    /// The stop reason for a halt, in the thread that stands there.
    pub fn stop_reason(&mut self, halt: Halt) -> StopReason {
        let tid = gdb_tid(self.tl.current());
        match halt {
            Halt::Stepped | Halt::Reached => StopReason::SignalWithThread {
                tid,
                signal: Signal::SIGTRAP,
            },
            Halt::Breakpoint(_) => StopReason::SwBreak(tid),
            Halt::Interrupted => StopReason::SignalWithThread {
                tid,
                signal: Signal::SIGINT,
            },
            Halt::Begin => StopReason::ReplayLog {
                tid: Some(tid),
                pos: ReplayLogPosition::Begin,
            },
            Halt::End => {
                let outcome = self.tl.vm().debug_kernel().outcome().cloned();
                match outcome {
                    Some(Outcome::Crashed { signo, thread, .. }) if !self.crash_reported => {
                        self.crash_reported = true;
                        StopReason::SignalWithThread {
                            tid: gdb_tid(Tid(thread)),
                            signal: Signal(signo as u8),
                        }
                    }
                    _ => StopReason::ReplayLog {
                        tid: Some(tid),
                        pos: ReplayLogPosition::End,
                    },
                }
            }
        }
    }

    /// Threads gdb lists: the live ones, the running one first (gdb selects
    /// the first), or the last one when none is left.
    fn threads(&self) -> Vec<Tid> {
        let k = self.tl.vm().debug_kernel();
        let mut v: Vec<Tid> = k
            .threads()
            .values()
            .filter(|t| t.is_alive())
            .map(|t| t.tid)
            .collect();
        let cur = k.current();
        v.sort_by_key(|t| (*t != cur, *t));
        if v.is_empty() {
            v.push(cur);
        }
        v
    }

    fn describe_position(&self) -> String {
        let k = self.tl.vm().debug_kernel();
        let pos: &Position = self.tl.position();
        let mut s = format!("{pos}, thread {}", k.current());
        if let Some(o) = k.outcome() {
            s.push_str(&format!(" (the run ended: {})", o.summary()));
        }
        s
    }
}

fn gdb_tid(t: Tid) -> GdbTid {
    NonZeroUsize::new(t.0 as usize).unwrap_or(NonZeroUsize::MIN)
}

fn guest_tid(t: GdbTid) -> Tid {
    Tid(t.get() as u32)
}

impl Target for Session {
    type Arch = X86_64Linux;
    type Error = VmError;

    fn base_ops(&mut self) -> BaseOps<'_, Self::Arch, Self::Error> {
        BaseOps::MultiThread(self)
    }

    fn support_breakpoints(&mut self) -> Option<BreakpointsOps<'_, Self>> {
        Some(self)
    }

    fn support_monitor_cmd(&mut self) -> Option<MonitorCmdOps<'_, Self>> {
        Some(self)
    }

    fn support_host_io(&mut self) -> Option<HostIoOps<'_, Self>> {
        Some(self)
    }

    fn support_exec_file(&mut self) -> Option<ExecFileOps<'_, Self>> {
        Some(self)
    }

    fn support_auxv(&mut self) -> Option<AuxvOps<'_, Self>> {
        Some(self)
    }

    fn support_extended_mode(&mut self) -> Option<ExtendedModeOps<'_, Self>> {
        Some(self)
    }

    // Breakpoints go into guest memory only while the guest runs, and the
    // debugger removes them itself; gdb need not take them out at stops.
    fn guard_rail_implicit_sw_breakpoints(&self) -> bool {
        true
    }
}

/// Only for `kill`: gdb (which speaks the multiprocess protocol) waits for
/// a reply to it, and `gdbstub` gives one in extended mode alone. There is
/// no process to start or attach to: the run is the one being replayed.
impl ExtendedMode for Session {
    fn run(&mut self, _filename: Option<&[u8]>, _args: Args<'_, '_>) -> TargetResult<Pid, Self> {
        Err(TargetError::NonFatal)
    }

    fn attach(&mut self, _pid: Pid) -> TargetResult<(), Self> {
        Err(TargetError::NonFatal)
    }

    // "Attached": quitting gdb detaches, and the run goes on to its end;
    // only an explicit `kill` ends it where it stands.
    fn query_if_attached(&mut self, _pid: Pid) -> TargetResult<AttachKind, Self> {
        Ok(AttachKind::Attach)
    }

    fn kill(&mut self, _pid: Option<Pid>) -> TargetResult<ShouldTerminate, Self> {
        Ok(ShouldTerminate::Yes)
    }

    // gdb sends it only after a `run`, which is refused.
    fn restart(&mut self) -> Result<(), VmError> {
        Ok(())
    }
}

impl MultiThreadBase for Session {
    fn read_registers(&mut self, regs: &mut LinuxRegs, tid: GdbTid) -> TargetResult<(), Self> {
        let tid = guest_tid(tid);
        let vm = self.tl.vm();
        let t = vm
            .debug_kernel()
            .threads()
            .get(&tid)
            .ok_or(TargetError::NonFatal)?;
        let fpu = vm.debug_extended_state(tid).map_err(TargetError::Fatal)?;
        *regs = LinuxRegs::from_thread(&t.regs, t.fs_base, &fpu);
        Ok(())
    }

    fn write_registers(&mut self, _regs: &LinuxRegs, _tid: GdbTid) -> TargetResult<(), Self> {
        // The run is fixed: a changed register would be another run.
        Err(TargetError::NonFatal)
    }

    fn read_addrs(
        &mut self,
        start: u64,
        data: &mut [u8],
        _tid: GdbTid,
    ) -> TargetResult<usize, Self> {
        if data.len() > MAX_MEMORY_READ {
            return Err(TargetError::NonFatal);
        }
        let vm = self.tl.vm();
        if vm.debug_read(start, data) {
            return Ok(data.len());
        }
        // Part of the range is unmapped: as much as can be read from the start.
        let mut n = 0;
        while n < data.len() {
            let at = start + n as u64;
            let len = ((crate::arch::layout::PAGE_SIZE - at % crate::arch::layout::PAGE_SIZE)
                as usize)
                .min(data.len() - n);
            if !vm.debug_read(at, &mut data[n..n + len]) {
                break;
            }
            n += len;
        }
        if n == 0 {
            return Err(TargetError::NonFatal);
        }
        Ok(n)
    }

    fn write_addrs(&mut self, _start: u64, _data: &[u8], _tid: GdbTid) -> TargetResult<(), Self> {
        Err(TargetError::NonFatal)
    }

    fn list_active_threads(
        &mut self,
        thread_is_active: &mut dyn FnMut(GdbTid),
    ) -> Result<(), Self::Error> {
        for t in self.threads() {
            thread_is_active(gdb_tid(t));
        }
        Ok(())
    }

    fn support_resume(&mut self) -> Option<MultiThreadResumeOps<'_, Self>> {
        Some(self)
    }

    fn support_thread_extra_info(&mut self) -> Option<ThreadExtraInfoOps<'_, Self>> {
        Some(self)
    }
}

impl MultiThreadResume for Session {
    fn resume(&mut self) -> Result<(), Self::Error> {
        if self.action.is_none() {
            self.action = Some(Action::Continue);
        }
        Ok(())
    }

    fn clear_resume_actions(&mut self) -> Result<(), Self::Error> {
        self.action = None;
        Ok(())
    }

    fn set_resume_action_continue(
        &mut self,
        _tid: GdbTid,
        _signal: Option<Signal>,
    ) -> Result<(), Self::Error> {
        // Signals gdb would pass are ignored: the run already decided them.
        if self.action.is_none() {
            self.action = Some(Action::Continue);
        }
        Ok(())
    }

    fn support_single_step(&mut self) -> Option<MultiThreadSingleStepOps<'_, Self>> {
        Some(self)
    }

    fn support_scheduler_locking(&mut self) -> Option<MultiThreadSchedulerLockingOps<'_, Self>> {
        Some(self)
    }

    fn support_reverse_step(&mut self) -> Option<ReverseStepOps<'_, GdbTid, Self>> {
        Some(self)
    }

    fn support_reverse_cont(&mut self) -> Option<ReverseContOps<'_, GdbTid, Self>> {
        Some(self)
    }
}

impl MultiThreadSingleStep for Session {
    fn set_resume_action_step(
        &mut self,
        tid: GdbTid,
        _signal: Option<Signal>,
    ) -> Result<(), Self::Error> {
        self.action = Some(Action::Step(guest_tid(tid)));
        Ok(())
    }
}

// Only one thread ever runs between two steps, and which one is the
// schedule's to say: "only this thread" asks for nothing more.
impl MultiThreadSchedulerLocking for Session {
    fn set_resume_action_scheduler_lock(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

impl ReverseStep<GdbTid> for Session {
    fn reverse_step(&mut self, _tid: GdbTid) -> Result<(), Self::Error> {
        self.action = Some(Action::ReverseStep);
        Ok(())
    }
}

impl ReverseCont<GdbTid> for Session {
    fn reverse_cont(&mut self) -> Result<(), Self::Error> {
        self.action = Some(Action::ReverseContinue);
        Ok(())
    }
}

impl Breakpoints for Session {
    fn support_sw_breakpoint(&mut self) -> Option<SwBreakpointOps<'_, Self>> {
        Some(self)
    }

    fn support_hw_breakpoint(&mut self) -> Option<HwBreakpointOps<'_, Self>> {
        Some(self)
    }
}

impl SwBreakpoint for Session {
    fn add_sw_breakpoint(&mut self, addr: u64, _kind: usize) -> TargetResult<bool, Self> {
        self.breakpoints.insert(addr);
        Ok(true)
    }

    fn remove_sw_breakpoint(&mut self, addr: u64, _kind: usize) -> TargetResult<bool, Self> {
        Ok(self.breakpoints.remove(&addr))
    }
}

// A "hardware" breakpoint is the same `int3`, placed by the monitor.
impl HwBreakpoint for Session {
    fn add_hw_breakpoint(&mut self, addr: u64, kind: usize) -> TargetResult<bool, Self> {
        self.add_sw_breakpoint(addr, kind)
    }

    fn remove_hw_breakpoint(&mut self, addr: u64, kind: usize) -> TargetResult<bool, Self> {
        self.remove_sw_breakpoint(addr, kind)
    }
}

impl ThreadExtraInfo for Session {
    fn thread_extra_info(&self, tid: GdbTid, buf: &mut [u8]) -> Result<usize, Self::Error> {
        let k = self.tl.vm().debug_kernel();
        let tid = guest_tid(tid);
        let Some(t) = k.threads().get(&tid) else {
            return Ok(0);
        };
        // gdb asks thread by thread: the threads' states are made once for
        // where the run stands.
        let mut infos = self.thread_infos.borrow_mut();
        if infos
            .as_ref()
            .is_none_or(|(at, _)| at != self.tl.position())
        {
            let all = super::locks::thread_infos(self.tl.vm(), &mut self.heap.borrow_mut());
            *infos = Some((self.tl.position().clone(), all));
        }
        let state = infos
            .as_ref()
            .and_then(|(_, all)| all.get(&tid).cloned())
            .unwrap_or_else(|| super::locks::state_text(k, t));
        let text = format!("{}, {state}", t.name);
        let n = text.len().min(buf.len());
        buf[..n].copy_from_slice(&text.as_bytes()[..n]);
        Ok(n)
    }
}

impl MonitorCmd for Session {
    fn handle_monitor_cmd(
        &mut self,
        cmd: &[u8],
        mut out: ConsoleOutput<'_>,
    ) -> Result<(), Self::Error> {
        let cmd = String::from_utf8_lossy(cmd);
        let words: Vec<&str> = cmd.split_whitespace().collect();
        match words.as_slice() {
            ["step"] | ["when"] => {
                gdbstub::outputln!(out, "{}", self.describe_position());
            }
            ["goto", "end"] => {
                self.tl.goto_end()?;
                gdbstub::outputln!(out, "now at {}", self.describe_position());
                gdbstub::outputln!(
                    out,
                    "(run `maintenance flush register-cache` so gdb reads the threads again)"
                );
            }
            ["goto", n] => match n.parse::<u64>() {
                Ok(step) => {
                    self.tl.goto_step(step)?;
                    gdbstub::outputln!(out, "now at {}", self.describe_position());
                    gdbstub::outputln!(
                        out,
                        "(run `maintenance flush register-cache` so gdb reads the threads again)"
                    );
                }
                Err(_) => gdbstub::outputln!(out, "goto wants a step number or `end`"),
            },
            ["locks"] => {
                for line in super::locks::lines(self.tl.vm(), self.heap.get_mut()) {
                    gdbstub::outputln!(out, "{line}");
                }
            }
            ["threads"] => {
                for line in super::locks::thread_lines(self.tl.vm(), self.heap.get_mut()) {
                    gdbstub::outputln!(out, "{line}");
                }
            }
            _ => {
                gdbstub::outputln!(out, "rewind-fuzz monitor commands:");
                gdbstub::outputln!(
                    out,
                    "  monitor step       where the run stands (step, instructions since it)"
                );
                gdbstub::outputln!(
                    out,
                    "  monitor goto STEP  jump to the start of the stretch after STEP"
                );
                gdbstub::outputln!(out, "  monitor goto end   jump to the end of the run");
                gdbstub::outputln!(
                    out,
                    "  monitor locks      every lock the run knows: kind, holder, where taken, waiters"
                );
                gdbstub::outputln!(
                    out,
                    "  monitor threads    every thread: state, and the lock or other thing it waits on"
                );
            }
        }
        Ok(())
    }
}

impl Auxv for Session {
    fn get_auxv(&self, offset: u64, length: usize, buf: &mut [u8]) -> TargetResult<usize, Self> {
        let auxv = self.tl.auxv();
        let start = (offset as usize).min(auxv.len());
        let n = length.min(buf.len()).min(auxv.len() - start);
        buf[..n].copy_from_slice(&auxv[start..start + n]);
        Ok(n)
    }
}

impl ExecFile for Session {
    fn get_exec_file(
        &self,
        _pid: Option<gdbstub::common::Pid>,
        offset: u64,
        length: usize,
        buf: &mut [u8],
    ) -> TargetResult<usize, Self> {
        let bytes = self.exe.as_bytes();
        let start = (offset as usize).min(bytes.len());
        let n = length.min(buf.len()).min(bytes.len() - start);
        buf[..n].copy_from_slice(&bytes[start..start + n]);
        Ok(n)
    }
}

impl Session {
    /// The file gdb may read at `filename`: one the run read (from its file
    /// source, never looking anything new up in it, which would change a
    /// recording), the guest's `/proc/1/maps`, or separate debug info.
    /// Nothing else of the host: gdb's peer may be anyone who can reach
    /// the port.
    fn open_file(&self, filename: &[u8]) -> Option<OpenFile> {
        // Recorded paths are UTF-8 without NULs (a NUL would reach the
        // recording's `\0nofollow` keys).
        let path = std::str::from_utf8(filename)
            .ok()
            .filter(|p| !p.contains('\0'))?;
        if let Some(data) = self.recorded_file(path) {
            return Some(OpenFile::Run(data));
        }
        // `info proc mappings` reads it (the guest is pid 1, as gdbstub says).
        if path == "/proc/1/maps" || path == "/proc/self/maps" {
            let text = self.tl.vm().debug_kernel().mm().maps_text();
            return Some(OpenFile::Run(Arc::new(text.into_bytes())));
        }
        debug_info_file(path).map(OpenFile::DebugInfo)
    }

    /// A file of the run's recording, following a recorded symlink.
    fn recorded_file(&self, path: &str) -> Option<Arc<Vec<u8>>> {
        let src = self.source.lock().unwrap();
        match src.recording().get(path)? {
            HostNode::File {
                data: Some(data), ..
            } => Some(data.clone()),
            HostNode::Symlink { target } => {
                let t = crate::kernel::vfs::parent_of(path);
                let full = if target.starts_with('/') {
                    target.clone()
                } else {
                    format!("{}/{target}", t.trim_end_matches('/'))
                };
                match src.recording().get(&full) {
                    Some(HostNode::File {
                        data: Some(data), ..
                    }) => Some(data.clone()),
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

/// A separate debug info file of the host (see [`DEBUG_INFO_DIR`]).
fn debug_info_file(path: &str) -> Option<std::fs::File> {
    regular_file_under(Path::new(DEBUG_INFO_DIR), path)
}

/// The regular file at `path` if it is under `dir` once every link and
/// `..` is resolved, opened without blocking.
fn regular_file_under(dir: &Path, path: &str) -> Option<std::fs::File> {
    if !Path::new(path).starts_with(dir) {
        return None;
    }
    let real = std::fs::canonicalize(path).ok()?;
    if !real.starts_with(dir) {
        return None;
    }
    crate::fsutil::open_foreign(&real).ok()
}

impl HostIo for Session {
    fn support_open(&mut self) -> Option<HostIoOpenOps<'_, Self>> {
        Some(self)
    }
    fn support_close(&mut self) -> Option<HostIoCloseOps<'_, Self>> {
        Some(self)
    }
    fn support_pread(&mut self) -> Option<HostIoPreadOps<'_, Self>> {
        Some(self)
    }
    fn support_fstat(&mut self) -> Option<HostIoFstatOps<'_, Self>> {
        Some(self)
    }
    fn support_readlink(&mut self) -> Option<HostIoReadlinkOps<'_, Self>> {
        Some(self)
    }
    fn support_setfs(&mut self) -> Option<HostIoSetfsOps<'_, Self>> {
        Some(self)
    }
}

impl HostIoOpen for Session {
    fn open(
        &mut self,
        filename: &[u8],
        flags: HostIoOpenFlags,
        _mode: HostIoOpenMode,
    ) -> HostIoResult<u32, Self> {
        let writes = HostIoOpenFlags::O_WRONLY
            | HostIoOpenFlags::O_RDWR
            | HostIoOpenFlags::O_APPEND
            | HostIoOpenFlags::O_CREAT
            | HostIoOpenFlags::O_TRUNC
            | HostIoOpenFlags::O_EXCL;
        if flags.intersects(writes) {
            return Err(HostIoError::Errno(HostIoErrno::EROFS));
        }
        if self.open_files.len() >= MAX_OPEN_FILES {
            return Err(HostIoError::Errno(HostIoErrno::EMFILE));
        }
        let file = self
            .open_file(filename)
            .ok_or(HostIoError::Errno(HostIoErrno::ENOENT))?;
        let fd = self.next_fd;
        self.next_fd += 1;
        self.open_files.insert(fd, file);
        Ok(fd)
    }
}

impl HostIoClose for Session {
    fn close(&mut self, fd: u32) -> HostIoResult<(), Self> {
        self.open_files
            .remove(&fd)
            .map(|_| ())
            .ok_or(HostIoError::Errno(HostIoErrno::EBADF))
    }
}

impl HostIoPread for Session {
    fn pread(
        &mut self,
        fd: u32,
        count: usize,
        offset: u64,
        buf: &mut [u8],
    ) -> HostIoResult<usize, Self> {
        let buf_len = count.min(buf.len());
        match self.open_files.get(&fd) {
            Some(OpenFile::Run(data)) => {
                let start = offset.min(data.len() as u64) as usize;
                let n = buf_len.min(data.len() - start);
                buf[..n].copy_from_slice(&data[start..start + n]);
                Ok(n)
            }
            Some(OpenFile::DebugInfo(file)) => Ok(file.read_at(&mut buf[..buf_len], offset)?),
            None => Err(HostIoError::Errno(HostIoErrno::EBADF)),
        }
    }
}

impl HostIoFstat for Session {
    fn fstat(&mut self, fd: u32) -> HostIoResult<HostIoStat, Self> {
        let size = match self.open_files.get(&fd) {
            Some(OpenFile::Run(data)) => data.len() as u64,
            Some(OpenFile::DebugInfo(file)) => file.metadata()?.len(),
            None => return Err(HostIoError::Errno(HostIoErrno::EBADF)),
        };
        Ok(HostIoStat {
            st_dev: 0,
            st_ino: 0,
            st_mode: HostIoOpenMode::S_IFREG
                | HostIoOpenMode::S_IRUSR
                | HostIoOpenMode::S_IRGRP
                | HostIoOpenMode::S_IROTH,
            st_nlink: 1,
            st_uid: 0,
            st_gid: 0,
            st_rdev: 0,
            st_size: size,
            st_blksize: 4096,
            st_blocks: size.div_ceil(512),
            st_atime: 0,
            st_mtime: 0,
            st_ctime: 0,
        })
    }
}

impl HostIoReadlink for Session {
    fn readlink(&mut self, filename: &[u8], buf: &mut [u8]) -> HostIoResult<usize, Self> {
        let path = String::from_utf8_lossy(filename);
        let target = if path.ends_with("/exe") && path.starts_with("/proc/") {
            self.exe.clone()
        } else {
            let src = self.source.lock().unwrap();
            match src.recording().get(&format!("{path}\0nofollow")) {
                Some(HostNode::Symlink { target }) => target.clone(),
                _ => return Err(HostIoError::Errno(HostIoErrno::EINVAL)),
            }
        };
        // A cut link would read as another path: too long is an error.
        let n = target.len();
        if n > buf.len() {
            return Err(HostIoError::Errno(HostIoErrno::ENAMETOOLONG));
        }
        buf[..n].copy_from_slice(target.as_bytes());
        Ok(n)
    }
}

impl HostIoSetfs for Session {
    fn setfs(&mut self, _fs: FsKind) -> HostIoResult<(), Self> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_really_under_the_directory_are_opened() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        let dir = root.join("debug");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("lib.debug"), b"dwarf").unwrap();
        std::fs::write(root.join("secret"), b"key").unwrap();
        std::os::unix::fs::symlink(root.join("secret"), dir.join("out")).unwrap();
        std::os::unix::fs::symlink("lib.debug", dir.join("in")).unwrap();
        let fifo = std::ffi::CString::new(dir.join("fifo").to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        let at = |p: &str| regular_file_under(&dir, &format!("{}/{p}", dir.display()));

        assert!(at("lib.debug").is_some());
        assert!(at("in").is_some(), "a link that stays inside");
        assert!(at("out").is_none(), "a link that leads out");
        assert!(at("../secret").is_none());
        assert!(at("fifo").is_none(), "a FIFO, refused without blocking");
        assert!(at(".").is_none(), "a directory");
        assert!(at("missing").is_none());
        let outside = root.join("secret");
        assert!(regular_file_under(&dir, outside.to_str().unwrap()).is_none());
        let sibling = format!("{}-other/x", dir.display());
        assert!(regular_file_under(&dir, &sibling).is_none());
    }
}
