//! gdb at any step of a run, forward and backward.
//!
//! A run's inputs (configuration, files, schedule) make it happen again
//! exactly, so debugging is replaying: the server replays the run to the
//! step asked for and serves the GDB remote protocol there ([`gdbstub`]).
//! Continue and single-step run the replay forward (the other threads as
//! the schedule says); reverse-stepi and reverse-continue restore the
//! snapshot taken at the program's first instruction and replay to the
//! point before (see [`timeline`]). Breakpoints are `int3` written into
//! guest memory only while the guest runs, and come back through the
//! guest's own `#BP` door, never reaching the program.
//!
//! A connection that goes away (gdb's `disconnect`, or gdb killed) leaves
//! the run where it is for the next; `detach` lets the run go on to its end
//! exactly as it would have without the debugger.

pub mod arch;
pub mod locks;
pub mod target;
pub mod timeline;

use std::net::{SocketAddr, TcpListener};

use gdbstub::conn::ConnectionExt;
use gdbstub::stub::run_blocking::{BlockingEventLoop, Event, WaitForStopReasonError};
use gdbstub::stub::{DisconnectReason, GdbStub};

use locks::HeapNames;
pub use target::Session;
pub use timeline::{Halt, Leg, Position, Timeline};

use crate::engine::{RunConfig, RunReport, SnapshotAt, Vm, VmError};
use crate::kernel::vfs::SharedSource;
use crate::rwd::Rwd;
use crate::sched::{Replay, Schedule};

/// The packet size the stub advertises (its packet buffer): the longest
/// packet gdb sends, framing included, and the longest reply it asks for.
pub const PACKET_SIZE: usize = 4096;

/// Where the debugger first stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartAt {
    /// At the start of the stretch after this step (0: the first instruction).
    Step(u64),
    /// At the end of the run.
    End,
}

impl std::str::FromStr for StartAt {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "end" {
            return Ok(StartAt::End);
        }
        s.parse()
            .map(StartAt::Step)
            .map_err(|_| format!("{s:?} is neither a step number nor `end`"))
    }
}

/// The configuration a debugged run uses: the same run, with a snapshot at
/// the first instruction (every point is reachable by restoring it) and
/// one exit per step (a hint the shim buffered would be a step the
/// debugger could not stop at; the run is the same either way).
pub fn debug_config(cfg: &RunConfig) -> RunConfig {
    let mut c = cfg.clone();
    c.snapshot_at = SnapshotAt::Start;
    c.hint_ring = false;
    c
}

/// Loads the program, replays `schedule` to `at` and makes the session;
/// `rwd` is the reproducer it comes from, if any (heap locks are named by
/// replaying it, else by recording one from the run's inputs).
pub fn prepare(
    cfg: &RunConfig,
    source: SharedSource,
    schedule: Schedule,
    at: StartAt,
    rwd: Option<Rwd>,
) -> Result<Session, VmError> {
    let heap = match rwd {
        Some(rwd) => HeapNames::of_reproducer(rwd),
        None => HeapNames::of_run(cfg, source.clone(), schedule.clone()),
    };
    let tl = paused(cfg, source.clone(), schedule, at)?;
    Ok(Session::new(tl, source, cfg.kernel.exe.clone(), heap))
}

/// Loads the program and replays `schedule` to `at`, where the run then
/// stands as the debugger sees it.
pub fn paused(
    cfg: &RunConfig,
    source: SharedSource,
    schedule: Schedule,
    at: StartAt,
) -> Result<Timeline, VmError> {
    let mut vm = Vm::new(&debug_config(cfg), source)?;
    vm.set_strategy(Box::new(Replay::new(schedule)));
    let mut tl = Timeline::new(vm)?;
    match at {
        StartAt::Step(n) => {
            tl.goto_step(n)?;
        }
        StartAt::End => tl.goto_end()?,
    }
    Ok(tl)
}

/// The command that attaches gdb: the program's own file for symbols, the
/// shared libraries read through the connection (gdb's default `target:`
/// sysroot), so they are the very bytes the guest loaded.
pub fn gdb_command(addr: &SocketAddr, exe: &str) -> String {
    let mut cmd = format!("gdb -q -ex 'target remote {addr}'");
    if std::path::Path::new(exe).is_file() {
        cmd.push_str(&format!(" {}", shell_quote(exe)));
    }
    cmd
}

fn shell_quote(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+:@".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// How a debugging session ended.
#[derive(Debug)]
pub enum Ending {
    /// gdb detached: the run went on to its end.
    Finished(Box<RunReport>),
    /// gdb killed the run where it stood.
    Killed { step: u64 },
}

/// Serves gdb on `listener` until a connection detaches or kills the run.
/// `on_wait` is told the address and the position each time the server
/// waits for a connection.
pub fn serve(
    mut session: Session,
    listener: TcpListener,
    mut on_wait: impl FnMut(&SocketAddr, &Session),
) -> Result<Ending, VmError> {
    let addr = listener
        .local_addr()
        .map_err(|e| VmError::Machine(crate::machine::MachineError::Internal(e.to_string())))?;
    loop {
        on_wait(&addr, &session);
        let Ok((stream, _)) = listener.accept() else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        session.reset_connection();
        // A borrowed buffer: an owned one would grow with whatever packet
        // comes, however long; this one ends the connection past it.
        let mut packet_buffer = [0u8; PACKET_SIZE];
        let stub = GdbStub::builder(stream)
            .with_packet_buffer(&mut packet_buffer)
            .build()
            .expect("a packet buffer given");
        match stub.run_blocking::<Loop>(&mut session) {
            Ok(DisconnectReason::Kill) => {
                let step = session.timeline().vm().debug_kernel().step();
                return Ok(Ending::Killed { step });
            }
            Ok(_) => break,
            Err(e) if e.is_target_error() => {
                return Err(e.into_target_error().expect("a target error"));
            }
            // gdb's `disconnect` (or gdb ending) closes the connection:
            // the run waits where it is for the next one.
            Err(e) if e.is_connection_error() => {
                let step = session.timeline().vm().debug_kernel().step();
                eprintln!(
                    "rewind-fuzz: gdb disconnected; the run waits at step {step} for the next gdb"
                );
            }
            Err(e) => eprintln!("rewind-fuzz: the gdb connection ended: {e}"),
        }
    }
    let mut vm = session.into_timeline().into_vm();
    let report = match vm.debug_report() {
        Some(r) => r,
        None => vm.debug_finish()?,
    };
    Ok(Ending::Finished(Box::new(report)))
}

/// Runs gdb's requests to their stop, one at a time. While a continue
/// moves, a byte from gdb (its Ctrl-C) stops it at the next step.
enum Loop {}

impl BlockingEventLoop for Loop {
    type Target = Session;
    type Connection = std::net::TcpStream;
    type StopReason = target::StopReason;

    fn wait_for_stop_reason(
        target: &mut Session,
        conn: &mut std::net::TcpStream,
    ) -> Result<
        Event<target::StopReason>,
        WaitForStopReasonError<VmError, <std::net::TcpStream as gdbstub::conn::Connection>::Error>,
    > {
        // A closed or failing connection is not a reason to stop here: the
        // stub finds out when it next reads.
        let mut incoming = false;
        let stop = target
            .carry_out(&mut || {
                incoming = matches!(conn.peek(), Ok(Some(_)));
                incoming
            })
            .map_err(WaitForStopReasonError::Target)?;
        if incoming {
            let byte = conn.read().map_err(WaitForStopReasonError::Connection)?;
            return Ok(Event::IncomingData(byte));
        }
        Ok(Event::TargetStopped(stop))
    }

    fn on_interrupt(target: &mut Session) -> Result<Option<target::StopReason>, VmError> {
        Ok(Some(target.stop_reason(Halt::Interrupted)))
    }
}

// The blocking loop reads from the connection between requests.
const _: fn() = || {
    fn is_ext<C: ConnectionExt>() {}
    is_ext::<std::net::TcpStream>();
};
