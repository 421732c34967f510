//! `rewind-fuzz gdb FILE.rwd` and `rewind-fuzz run ... --gdb`: a run
//! replayed to a step and served to gdb there.

use std::io::Write;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::path::PathBuf;

use clap::Args;

use super::UserError;
use super::common::{consent_to_host_files, estimate_steps, exit_code, load_rwd, vm_error};
use crate::engine::RunConfig;
use crate::gdb::{Ending, StartAt};
use crate::kernel::vfs::{HostNode, SharedSource};
use crate::sched::Schedule;

#[derive(Args, Debug)]
pub struct GdbArgs {
    /// The reproducer to debug.
    #[arg(value_name = "FILE.rwd")]
    pub file: PathBuf,
    /// Where the run stops for gdb: a step number (0: the first
    /// instruction) or `end` (the failure).
    #[arg(long, value_name = "STEP|end", default_value = "end")]
    pub at: StartAt,
    /// The address gdb connects to (port 0: any free port); a loopback
    /// address unless --listen-any-address.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: String,
    /// Allow a --listen address other hosts can reach. The gdb protocol
    /// has no authentication: whoever reaches the port reads the run's
    /// memory and recorded files.
    #[arg(long)]
    pub listen_any_address: bool,
    /// Read the files the reproducer left out (`--exclude-files`) from
    /// this host; without it, such a reproducer is refused.
    #[arg(long)]
    pub read_host_files: bool,
}

pub fn gdb(a: GdbArgs) -> Result<u8, UserError> {
    let rwd = load_rwd(&a.file)?;
    // Refused before a port is opened.
    consent_to_host_files(&rwd, &a.file.display().to_string(), a.read_host_files)?;
    let listener = listen(&a.listen, a.listen_any_address, "--listen-any-address")?;
    if let Some(note) = rwd.for_display().host_files_note() {
        eprintln!("rewind-fuzz: note: {note}");
    }
    let mut cfg = rwd.run_config();
    // The debugger shows the run; judging its output adds nothing there,
    // and a command from the reproducer is not run unasked.
    cfg.oracle = None;
    let source = rwd.source();
    // The guard keeps the copy for as long as gdb may read it.
    let (symbols, _copy) = symbol_file(&cfg.kernel.exe, &source)?;
    let schedule = rwd.schedule();
    serve(&cfg, source, schedule, a.at, listener, &symbols, Some(rwd))
}

/// What a server says when asked to listen where other hosts can reach it.
pub struct Exposure {
    /// The protocol, as in "the gdb protocol has no authentication".
    pub protocol: &'static str,
    /// What passing the flag lets anyone do.
    pub lets_anyone: &'static str,
    /// The server, as in "the gdb server listens on ...".
    pub server: &'static str,
    /// What anyone who reaches the port can do.
    pub anyone_can: &'static str,
}

/// The gdb server's.
pub const GDB: Exposure = Exposure {
    protocol: "the gdb protocol",
    lets_anyone: "let anyone who can reach it debug the run",
    server: "the gdb server",
    anyone_can: "read the run's memory and recorded files",
};

/// The gdb server's socket on `addr`: see [`listen_exposed`].
pub fn listen(addr: &str, any_address: bool, flag: &str) -> Result<TcpListener, UserError> {
    listen_exposed(addr, any_address, flag, &GDB)
}

/// A server's socket on `addr`. An address other hosts can reach (one
/// that is not loopback, as `0.0.0.0` or a host's name may be) is refused
/// unless `any_address` (the option `flag`) allows it, and then comes
/// with a warning: the protocol (`what`) has no authentication.
pub fn listen_exposed(
    addr: &str,
    any_address: bool,
    flag: &str,
    what: &Exposure,
) -> Result<TcpListener, UserError> {
    let cannot =
        |e: &dyn std::fmt::Display| UserError::bad_input(format!("cannot listen on {addr}: {e}"));
    let addrs: Vec<SocketAddr> = addr.to_socket_addrs().map_err(|e| cannot(&e))?.collect();
    if addrs.is_empty() {
        return Err(cannot(&"the name has no address"));
    }
    // Every address the name has: the socket is bound to one of them.
    let open = addrs.iter().any(|a| !a.ip().to_canonical().is_loopback());
    if open && !any_address {
        return Err(UserError::bad_input(format!(
            "{addr} is not a loopback address and {} has no authentication; \
             pass {flag} to {}",
            what.protocol, what.lets_anyone
        )));
    }
    // The addresses resolved above, not the name again: what was checked
    // is what is bound.
    let listener = TcpListener::bind(&addrs[..]).map_err(|e| cannot(&e))?;
    if open {
        let bound = listener
            .local_addr()
            .map_or_else(|_| addr.to_string(), |a| a.to_string());
        eprintln!(
            "rewind-fuzz: warning: {} listens on {bound}, which is not loopback; \
             {} has no authentication: anyone who can reach the port can {}",
            what.server, what.protocol, what.anyone_can
        );
    }
    Ok(listener)
}

/// The program's file for gdb's symbols: the host's own when it holds the
/// bytes the run loaded, else those bytes written to a private temporary
/// copy, which lives as long as the returned guard.
fn symbol_file(
    exe: &str,
    source: &SharedSource,
) -> Result<(String, Option<SymbolCopy>), UserError> {
    let recorded = match source.lock().unwrap().recording().get(exe) {
        Some(HostNode::File {
            data: Some(data), ..
        }) => data.clone(),
        _ => return Ok((exe.to_string(), None)),
    };
    if std::fs::read(exe).is_ok_and(|d| d == *recorded) {
        return Ok((exe.to_string(), None));
    }
    let name = exe.rsplit('/').next().filter(|n| !n.is_empty());
    let copy = SymbolCopy::write(name.unwrap_or("program"), &recorded)?;
    Ok((copy.path.to_string_lossy().into_owned(), Some(copy)))
}

/// The recorded program, copied for gdb into a directory only this user
/// can enter, with a name nobody can guess beforehand: anyone may create
/// entries in the temporary directory, and a predictable path there is one
/// they could have made a link to a file of ours. Removed when dropped,
/// and when SIGINT, SIGTERM or SIGHUP end the server.
struct SymbolCopy {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

/// The copy's file and directory, as the signal handler removes them.
static TO_REMOVE: std::sync::OnceLock<[std::ffi::CString; 2]> = std::sync::OnceLock::new();

impl SymbolCopy {
    fn write(name: &str, data: &[u8]) -> Result<SymbolCopy, UserError> {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::fs::OpenOptionsExt;
        let cannot = |what: &dyn std::fmt::Display, e: std::io::Error| {
            UserError::bad_input(format!("cannot write {what}: {e}"))
        };
        use std::os::unix::fs::PermissionsExt;
        remove_stale_copies();
        // Created 0700, under a random name (mkdtemp) that starts with our
        // pid, so a later server can tell a copy whose server was killed.
        let dir = tempfile::Builder::new()
            .prefix(&format!("{COPY_PREFIX}{}-", std::process::id()))
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()
            .map_err(|e| cannot(&"a temporary directory", e))?;
        let path = dir.path().join(name);
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .and_then(|mut f| f.write_all(data));
        written.map_err(|e| cannot(&path.display(), e))?;
        let c = |p: &std::path::Path| std::ffi::CString::new(p.as_os_str().as_bytes()).ok();
        if let (Some(file), Some(d)) = (c(&path), c(dir.path()))
            && TO_REMOVE.set([file, d]).is_ok()
        {
            remove_on_signals();
        }
        Ok(SymbolCopy { _dir: dir, path })
    }
}

/// The start of a symbol copy's directory name, before the server's pid.
const COPY_PREFIX: &str = "rewind-fuzz-gdb-";

/// Removes the copies of servers that were killed without a chance to
/// remove theirs (SIGKILL): this user's directories whose pid is gone.
fn remove_stale_copies() {
    use std::os::unix::fs::MetadataExt;
    let tmp = std::env::temp_dir();
    let Ok(entries) = std::fs::read_dir(&tmp) else {
        return;
    };
    // SAFETY: getuid has no preconditions.
    let me = unsafe { libc::getuid() };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(COPY_PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        // Not followed: only a real directory of this user's is removed.
        let ours = std::fs::symlink_metadata(e.path()).is_ok_and(|m| m.is_dir() && m.uid() == me);
        // SAFETY: kill with signal 0 only asks whether the process exists.
        let gone = pid > 0
            && unsafe { libc::kill(pid, 0) } != 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if ours && gone {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

extern "C" fn remove_and_die(signal: libc::c_int) {
    if let Some([file, dir]) = TO_REMOVE.get() {
        // SAFETY: unlink, rmdir and raise are async-signal-safe and take
        // NUL-terminated paths that live as long as the process. The
        // handler was reset on entry (SA_RESETHAND), so the signal raised
        // again ends the process as it would have without us.
        unsafe {
            libc::unlink(file.as_ptr());
            libc::rmdir(dir.as_ptr());
        }
    }
    // SAFETY: see above.
    unsafe { libc::raise(signal) };
}

/// Installs [`remove_and_die`] for the signals that end a server.
fn remove_on_signals() {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction filled with a valid handler and
        // flags; the handler does only async-signal-safe work.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = remove_and_die as *const () as usize;
            act.sa_flags = libc::SA_RESETHAND;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(signal, &act, std::ptr::null_mut());
        }
    }
}

/// Replays `schedule` to `at`, serves gdb on `listener` until it detaches
/// (the run then goes on to its end) or kills the run; says how it ended.
/// `rwd` is the reproducer the run comes from, if any.
pub fn serve(
    cfg: &RunConfig,
    source: SharedSource,
    schedule: Schedule,
    at: StartAt,
    listener: TcpListener,
    symbols: &str,
    rwd: Option<crate::rwd::Rwd>,
) -> Result<u8, UserError> {
    let mut cfg = cfg.clone();
    // Replays after a jump back would print the same output again.
    cfg.stream_output = false;
    let session = crate::gdb::prepare(&cfg, source, schedule, at, rwd).map_err(vm_error)?;
    let ending = crate::gdb::serve(session, listener, |addr, s| {
        let k = s.timeline_ref().vm().debug_kernel();
        let at = match k.outcome() {
            Some(o) => format!("the end ({})", o.summary()),
            None => format!("{}", s.timeline_ref().position()),
        };
        eprintln!("rewind-fuzz: gdb server at {at}; attach with:");
        eprintln!("  {}", crate::gdb::gdb_command(addr, symbols));
        let _ = std::io::stderr().flush();
    })
    .map_err(vm_error)?;
    match ending {
        Ending::Finished(report) => {
            let _ = std::io::stdout().write_all(&report.stdout);
            let _ = std::io::stderr().write_all(&report.stderr);
            eprintln!(
                "rewind-fuzz: {} after {} steps (trace {})",
                report.outcome.summary(),
                report.steps,
                report.trace_hash
            );
            Ok(exit_code(&report.outcome))
        }
        Ending::Killed { step } => {
            eprintln!("rewind-fuzz: gdb killed the run at step {step}");
            Ok(1)
        }
    }
}

/// `run ... --gdb`: the run's schedule (the file given, or the one the
/// strategy takes in a first run), served to gdb.
pub fn run_under_gdb(
    cfg: &RunConfig,
    source: SharedSource,
    spec: &crate::sched::StrategySpec,
    seed: u64,
    at: StartAt,
    listener: TcpListener,
) -> Result<u8, UserError> {
    let schedule = match spec {
        crate::sched::StrategySpec::Schedule(f) => {
            Schedule::load(f).map_err(|e| UserError::bad_input(e.to_string()))?
        }
        crate::sched::StrategySpec::Loaded(s, _) => (**s).clone(),
        _ => {
            let mut probe = cfg.clone();
            probe.stream_output = false;
            let steps = estimate_steps(&probe, spec, &source)?;
            let strategy = spec
                .build(seed, steps)
                .map_err(|e| UserError::bad_input(e.to_string()))?;
            let mut vm = crate::engine::Vm::new(&probe, source.clone()).map_err(vm_error)?;
            vm.set_strategy(strategy);
            vm.run().map_err(vm_error)?.schedule
        }
    };
    let exe = cfg.kernel.exe.clone();
    serve(cfg, source, schedule, at, listener, &exe, None)
}
