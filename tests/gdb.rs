//! gdb at any step of a run: Debian's real gdb, in batch mode, against the
//! server `rewind-fuzz` runs (a child process, as a user would start it).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use rewind_fuzz::engine::{RunConfig, Vm};
use rewind_fuzz::kernel::vfs::FileSource;
use rewind_fuzz::observe::outcome::Outcome;
use rewind_fuzz::sched::{RandomWalk, Schedule};

/// A schedule of `name` whose run ends as `want` says, found by random
/// walks (the same seeds every time, so the same schedule).
fn failing_schedule(name: &str, want: fn(&Outcome) -> bool) -> (RunConfig, Schedule) {
    common::require_kvm();
    let c = common::config(&common::harness(name), &[]);
    let mut vm = Vm::new(&c, FileSource::host()).unwrap();
    for seed in 0..3000 {
        vm.set_strategy(Box::new(RandomWalk::new(seed)));
        let r = vm.run().unwrap();
        if want(&r.outcome) {
            return (c, r.schedule);
        }
    }
    panic!("no random walk of {name} fails as wanted");
}

fn save_schedule(s: &Schedule, dir: &Path) -> PathBuf {
    let f = dir.join("schedule.json");
    s.save(&f).unwrap();
    f
}

/// The debugging server, a child process; its stderr lines arrive on a
/// channel.
struct Server {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

/// The lines `from` gives, on a channel fed by a thread of their own.
fn line_channel(from: impl std::io::Read + Send + 'static) -> Receiver<String> {
    let (tx, lines) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    lines
}

impl Server {
    fn start(args: &[&str]) -> Server {
        let mut child = common::cli()
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = line_channel(child.stderr.take().unwrap());
        Server {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// `rewind-fuzz run --gdb` on a bundled harness, replaying `schedule`
    /// (saved in `dir`), with `extra` arguments.
    fn replaying(harness: &str, schedule: &Schedule, dir: &Path, extra: &[&str]) -> Server {
        let sched = save_schedule(schedule, dir);
        let target = common::harness(harness);
        let (target, sched) = (target.to_string_lossy(), sched.to_string_lossy());
        let mut args = vec!["run", "--target", &target, "--schedule", &sched, "--gdb"];
        args.extend_from_slice(extra);
        Server::start(&args)
    }

    /// `rewind-fuzz run --gdb` on `hello`, with `extra` arguments.
    fn hello(dir: &Path, extra: &[&str]) -> Server {
        common::require_kvm();
        Server::replaying("hello", &Schedule::new("default", Vec::new()), dir, extra)
    }

    fn next_line(&mut self) -> String {
        let l = self
            .lines
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("the server said no more; it said: {:#?}", self.seen));
        self.seen.push(l.clone());
        l
    }

    /// Waits for the server to listen; returns the gdb command it printed.
    fn attach_command(&mut self) -> String {
        loop {
            if self.next_line().ends_with("attach with:") {
                return self.next_line().trim().to_string();
            }
        }
    }

    /// The last line, once the server has ended.
    fn final_line(&mut self) -> String {
        let status = self.child.wait().unwrap();
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.seen.push(l);
        }
        assert!(status.code().is_some(), "the server died: {:#?}", self.seen);
        self.seen.last().cloned().unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The address in the command the server printed, `gdb -q -ex 'target
/// remote ADDR' [PROGRAM]`.
fn server_address(attach: &str) -> &str {
    attach
        .split("target remote ")
        .nth(1)
        .and_then(|s| s.split('\'').next())
        .unwrap_or_else(|| panic!("no address in {attach:?}"))
}

/// The program in the command the server printed.
fn server_program(attach: &str) -> &str {
    attach.rsplit('\'').next().unwrap().trim()
}

/// gdb in batch mode with the command the server printed, then `commands`.
fn gdb_command(attach: &str, commands: &[&str]) -> Command {
    let addr = server_address(attach);
    let program = server_program(attach);
    let mut cmd = Command::new(common::require_tool("gdb", "apt-get install -y gdb"));
    cmd.args([
        "-batch",
        "-nx",
        "-ex",
        "set pagination off",
        "-ex",
        "set width 0",
    ]);
    cmd.args(["-ex", &format!("target remote {addr}")]);
    for c in commands {
        cmd.args(["-ex", c]);
    }
    if !program.is_empty() {
        cmd.arg(program);
    }
    cmd
}

/// Runs gdb in batch mode with the command the server printed, then
/// `commands`; returns what it printed.
fn gdb(attach: &str, commands: &[&str]) -> String {
    let out = gdb_command(attach, commands)
        .output()
        .expect("gdb runs (apt-get install gdb)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("---- gdb ----\n{text}");
    text
}

/// The text between `echo @NAME\n` markers.
fn section<'a>(text: &'a str, name: &str) -> &'a str {
    let start = text
        .find(&format!("@{name}\n"))
        .unwrap_or_else(|| panic!("no section {name}"))
        + name.len()
        + 2;
    let rest = &text[start..];
    &rest[..rest.find("\n@").map_or(rest.len(), |e| e + 1)]
}

fn mark(name: &str) -> String {
    format!("echo @{name}\\n")
}

/// `info registers` lines: name and value, for the general registers. The
/// resume flag, which a fault sets in the flags it saves, is left out.
fn registers(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (name, value) = (w.next()?, w.next()?);
            let value = match name {
                "eflags" => {
                    let v = u64::from_str_radix(value.trim_start_matches("0x"), 16).ok()?;
                    format!("{:#x}", v & !0x1_0000)
                }
                _ => value.to_string(),
            };
            value.starts_with("0x").then(|| (name.to_string(), value))
        })
        .collect()
}

#[test]
fn at_the_philosophers_deadlock_every_philosopher_waits_in_the_fork_taking_function() {
    let (cfg, schedule) =
        failing_schedule("philosophers", |o| matches!(o, Outcome::Deadlocked { .. }));
    let dir = tempfile::tempdir().unwrap();
    let (rwd, _) = rewind_fuzz::rwd::record(&cfg, FileSource::host(), &schedule).unwrap();
    let file = dir.path().join("philosophers.rwd");
    rwd.save(&file).unwrap();

    let mut server = Server::start(&["gdb", &file.to_string_lossy(), "--at", "end"]);
    let attach = server.attach_command();
    let out = gdb(
        &attach,
        &[
            &mark("threads"),
            "info threads",
            &mark("bt"),
            "thread apply all bt",
        ],
    );
    let threads = section(&out, "threads");
    // The main thread joins; each philosopher waits for a fork, named.
    assert_eq!(threads.matches("blocked on futex").count(), 1, "{threads}");
    assert_eq!(
        threads.matches("blocked on forks[").count(),
        5,
        "five philosophers, each blocked on a fork: {threads}"
    );
    assert_eq!(
        threads
            .matches(" (pthread mutex) at philosopher (philosophers.c:")
            .count(),
        5,
        "{threads}"
    );
    let bt = section(&out, "bt");
    let in_philosopher = bt
        .lines()
        .filter(|l| l.starts_with('#'))
        .filter(|l| l.contains(" philosopher (") && l.contains("philosophers.c:"))
        .count();
    assert_eq!(in_philosopher, 5, "{bt}");
    for block in bt
        .split("\nThread ")
        .filter(|b| b.contains(" philosopher ("))
    {
        assert!(
            block.contains("pthread_mutex_lock"),
            "each philosopher waits taking a fork: {block}"
        );
    }
}

#[test]
fn a_breakpoint_then_the_crash_then_reverse_stepi_gives_the_instruction_before_it() {
    let (_, schedule) = failing_schedule("pool-shutdown-uaf", |o| {
        matches!(o, Outcome::Crashed { .. })
    });
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::replaying("pool-shutdown-uaf", &schedule, dir.path(), &[]);
    let attach = server.attach_command();
    let out = gdb(
        &attach,
        &[
            "break shutdown_pool",
            &mark("break"),
            "continue",
            &mark("crash"),
            "continue",
            &mark("crash-regs"),
            "info registers",
            &mark("back"),
            "reverse-stepi",
            "x/2i $pc",
            &mark("back-regs"),
            "info registers",
            &mark("forward"),
            "stepi",
            &mark("forward-regs"),
            "info registers",
            &mark("again"),
            "reverse-stepi",
            "reverse-stepi",
            "stepi",
            &mark("again-regs"),
            "info registers",
            &mark("end"),
        ],
    );
    assert!(
        section(&out, "break").contains("Breakpoint 1, shutdown_pool"),
        "{out}"
    );
    assert!(
        section(&out, "crash").contains("received signal SIGSEGV"),
        "{out}"
    );
    let crash = registers(section(&out, "crash-regs"));
    let pc = |regs: &[(String, String)]| {
        regs.iter()
            .find(|(n, _)| n == "rip")
            .map(|(_, v)| u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap())
            .unwrap()
    };
    let crash_pc = pc(&crash);
    // The instruction before the crash, and the next one is the crash's.
    let back = section(&out, "back");
    let listing: Vec<&str> = back.lines().filter(|l| l.contains(":\t")).collect();
    assert_eq!(listing.len(), 2, "{back}");
    assert!(
        listing[1].contains(&format!("{crash_pc:#x}")),
        "the instruction after is the crash's: {back}"
    );
    let before = registers(section(&out, "back-regs"));
    assert!(pc(&before) < crash_pc && pc(&before) + 16 > crash_pc);
    // Stepping forward from there is the crash again, register for register.
    assert_eq!(registers(section(&out, "forward-regs")), crash);
    // And the instruction before, reached forward, has the same registers.
    assert_eq!(registers(section(&out, "again-regs")), before);
    assert_ne!(before, crash);
}

#[test]
fn attaching_detaching_and_attaching_again_leaves_the_trace_hash_alone() {
    let (cfg, schedule) = failing_schedule("pool-shutdown-uaf", |o| {
        matches!(o, Outcome::Crashed { .. })
    });
    let mut vm = Vm::new(&cfg, FileSource::host()).unwrap();
    vm.set_strategy(Box::new(rewind_fuzz::sched::Replay::new(schedule.clone())));
    let plain = vm.run().unwrap();

    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::replaying(
        "pool-shutdown-uaf",
        &schedule,
        dir.path(),
        &["--gdb-at", "20"],
    );
    let attach = server.attach_command();
    let first = gdb(
        &attach,
        &[
            "break worker",
            "continue",
            "stepi",
            "stepi",
            "reverse-stepi",
            "continue",
            "reverse-continue",
            "monitor step",
            "disconnect",
        ],
    );
    assert!(first.contains("hit Breakpoint 1, worker"), "{first}");
    let attach = server.attach_command();
    // gdb's `disconnect` is no error: the server says where the run waits.
    let said = server.seen.join("\n");
    assert!(
        said.contains("gdb disconnected; the run waits at step"),
        "{said}"
    );
    assert!(!said.to_lowercase().contains("error"), "{said}");
    let second = gdb(&attach, &["info threads", "stepi", "monitor step"]);
    assert!(second.contains("step "), "{second}");
    let last = server.final_line();
    assert!(
        last.contains(&format!("(trace {})", plain.trace_hash)),
        "the run after detaching is the plain run ({}): {last}",
        plain.trace_hash
    );
}

#[test]
fn ctrl_c_stops_a_continue_at_the_next_step_and_kill_ends_the_run_there() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::replaying(
        "getpid-loop",
        &Schedule::new("default", Vec::new()),
        dir.path(),
        &["--max-steps", "100000000"],
    );
    let attach = server.attach_command();
    // One pipe for both streams, so the lines come in the order printed
    // (gdb prints the monitor's replies on stderr).
    let (out, into) = std::io::pipe().unwrap();
    let mut cmd = gdb_command(
        &attach,
        &[
            "break main",
            "continue",
            "continue",
            "monitor step",
            "bt 2",
            "continue",
            "monitor step",
            "kill",
        ],
    );
    cmd.stdout(into.try_clone().unwrap()).stderr(into);
    let mut gdb = cmd.spawn().expect("gdb runs (apt-get install gdb)");
    drop(cmd);
    let lines = line_channel(out);
    let mut seen = Vec::new();
    let mut wait_for = |what: &str| loop {
        let l = lines
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("gdb never printed {what:?}: {seen:#?}"));
        seen.push(l.clone());
        if l.contains(what) {
            return l;
        }
    };
    let interrupt = || {
        // gdb turns the SIGINT a terminal's Ctrl-C sends into its interrupt
        // request to the server.
        std::thread::sleep(Duration::from_secs(1));
        // SAFETY: kill with a pid and a signal number.
        unsafe { libc::kill(gdb.id() as i32, libc::SIGINT) };
    };
    let step_of = |l: &str| -> u64 {
        l.trim_start_matches("step ")
            .split(',')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    // At main every library is loaded: no stop for gdb's own purposes
    // can swallow the interrupt.
    wait_for("Breakpoint 1, main");
    interrupt();
    wait_for("Program received signal SIGINT");
    let first = step_of(&wait_for("step "));
    let frame = wait_for("#1");
    interrupt();
    wait_for("Program received signal SIGINT");
    let second = step_of(&wait_for("step "));
    assert!(frame.contains("main"), "{frame}");
    assert!(first > 0 && second > first, "{first} then {second}");
    wait_for("killed");
    let status = gdb.wait().unwrap();
    assert!(status.success(), "gdb's kill got its reply: {status:?}");
    let last = server.final_line();
    assert!(
        last.contains(&format!("killed the run at step {second}")),
        "{last}"
    );
}

#[test]
fn host_io_serves_the_files_the_run_read_and_nothing_else_of_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::hello(dir.path(), &[]);
    let attach = server.attach_command();
    let exe = server_program(&attach).to_string();
    let into = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let out = gdb(
        &attach,
        &[
            &format!("remote get {exe} {}", into("exe")),
            &format!("remote get /etc/passwd {}", into("passwd")),
            // Out of the debug info directory by `..`.
            &format!(
                "remote get /usr/lib/debug/../../../etc/passwd {}",
                into("passwd-from-debug")
            ),
            // The server's own environment.
            &format!("remote get /proc/self/environ {}", into("environ")),
            &mark("maps"),
            "info proc mappings",
            &mark("end"),
            "disconnect",
        ],
    );
    assert_eq!(
        std::fs::read(into("exe")).ok(),
        Some(std::fs::read(&exe).unwrap()),
        "the program's own file is served: {out}"
    );
    for name in ["passwd", "passwd-from-debug", "environ"] {
        assert!(
            !dir.path().join(name).exists(),
            "{name}: a file the run never read was served: {out}"
        );
    }
    assert_eq!(
        out.matches("No such file or directory").count(),
        3,
        "each is ENOENT: {out}"
    );
    // The guest's own mappings, not a host process's.
    let maps = section(&out, "maps");
    assert!(maps.contains(&exe), "{maps}");
}

/// What a command that should end soon printed on stderr, and its exit
/// code; None when it was still running after a minute.
fn finishes(mut cmd: Command) -> Option<(Option<i32>, String)> {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = line_channel(child.stderr.take().unwrap());
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            let text: Vec<String> = lines.iter().collect();
            return Some((status.code(), text.join("\n")));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

#[test]
fn an_address_other_hosts_can_reach_needs_the_flag_and_then_comes_with_a_warning() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let hello = common::harness("hello");
    let cfg = common::config(&hello, &[]);
    let schedule = Schedule::new("default", Vec::new());
    let (rwd, _) = rewind_fuzz::rwd::record(&cfg, FileSource::host(), &schedule).unwrap();
    let file = dir.path().join("hello.rwd");
    rwd.save(&file).unwrap();
    let file = file.to_string_lossy().into_owned();
    let target = hello.to_string_lossy().into_owned();

    let gdb_args = ["gdb", &file, "--listen", "0.0.0.0:0"];
    let run_args = [
        "run",
        "--target",
        &target,
        "--gdb",
        "--gdb-listen",
        "[::]:0",
    ];
    for (args, flag) in [
        (&gdb_args[..], "--listen-any-address"),
        (&run_args[..], "--gdb-listen-any-address"),
    ] {
        let mut cmd = common::cli();
        cmd.args(args);
        let (code, err) = finishes(cmd)
            .unwrap_or_else(|| panic!("{args:?} listens instead of refusing the address"));
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
        assert!(err.contains(flag), "{args:?} names {flag}: {err}");
    }

    // A loopback name is fine as it is, without a warning.
    let mut server = Server::start(&["gdb", &file, "--listen", "localhost:0"]);
    let first = server.next_line();
    assert!(first.ends_with("attach with:"), "{first}");
    drop(server);

    let mut server = Server::start(&[
        "gdb",
        &file,
        "--listen",
        "0.0.0.0:0",
        "--listen-any-address",
    ]);
    let warning = server.next_line();
    assert!(
        warning.contains("warning") && warning.contains("no authentication"),
        "{warning}"
    );
    let attach = server.attach_command();
    assert!(server_address(&attach).starts_with("0.0.0.0:"), "{attach}");
}

/// One packet of the remote protocol: `$body#checksum`.
fn packet(body: &str) -> Vec<u8> {
    let sum = body.bytes().fold(0u8, |a, b| a.wrapping_add(b));
    format!("${body}#{sum:02x}").into_bytes()
}

/// Sends `body` and returns the reply's body, run-length encoding undone.
fn request(conn: &mut TcpStream, body: &str) -> String {
    conn.write_all(&packet(body)).unwrap();
    let mut byte = || {
        let mut b = [0u8];
        conn.read_exact(&mut b)
            .unwrap_or_else(|e| panic!("no reply to {body:.40}: {e}"));
        b[0]
    };
    // The acknowledgement, then the reply.
    while byte() != b'$' {}
    let mut reply = Vec::new();
    loop {
        match byte() {
            b'#' => break,
            b'*' => {
                let n = byte() - 29;
                let last = *reply.last().unwrap();
                reply.extend(std::iter::repeat_n(last, n as usize));
            }
            b => reply.push(b),
        }
    }
    let _checksum = [byte(), byte()];
    conn.write_all(b"+").unwrap();
    String::from_utf8(reply).unwrap()
}

#[test]
fn a_memory_read_longer_than_the_packet_size_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::hello(dir.path(), &[]);
    // At main, where libc is loaded: its code is megabytes of memory that
    // reads, which a request without a bound would go through.
    let attach = server.attach_command();
    let out = gdb(
        &attach,
        &[
            "break main",
            "continue",
            &mark("libs"),
            "info sharedlibrary",
            &mark("end"),
            "disconnect",
        ],
    );
    let libc = section(&out, "libs")
        .lines()
        .find(|l| l.contains("libc.so"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).ok())
        .unwrap_or_else(|| panic!("no libc: {out}"));

    let attach = server.attach_command();
    let mut conn = TcpStream::connect(server_address(&attach)).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    conn.write_all(b"+").unwrap();
    // Refused at once: an error, not four GiB of memory.
    let reply = request(&mut conn, &format!("m{libc:x},ffffffff"));
    assert!(
        reply.starts_with('E') && reply.len() == 3,
        "an error, not {} characters ending {:?}",
        reply.len(),
        &reply[reply.len().saturating_sub(8)..]
    );
    // As much as gdb asks at once (half its packet size) still reads, and
    // the connection goes on.
    let reply = request(&mut conn, &format!("m{libc:x},800"));
    assert!(
        reply.len() == 4096 && reply.bytes().all(|b| b.is_ascii_hexdigit()),
        "{reply}"
    );
    // A packet longer than the packet size (a valid one, padded with
    // zeros) ends the connection instead of growing the server's buffer.
    let long = format!("m{libc:x},{}8", "0".repeat(8192));
    conn.write_all(&packet(&long)).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut rest = Vec::new();
    let _ = conn.read_to_end(&mut rest);
    assert!(
        !String::from_utf8_lossy(&rest).contains('$'),
        "no reply, the connection closed: {rest:?}"
    );
    // And the server waits for the next one.
    let attach = server.attach_command();
    let mut conn = TcpStream::connect(server_address(&attach)).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    conn.write_all(b"+").unwrap();
    let reply = request(&mut conn, &format!("m{libc:x},8"));
    assert_eq!(reply.len(), 16, "{reply}");
}

/// What gdb printed from `from` on to `to` (or the end). gdb prints what
/// `monitor` commands say on its stderr, apart from its `echo`es.
fn between<'a>(text: &'a str, from: &str, to: &str) -> &'a str {
    let start = text
        .find(from)
        .unwrap_or_else(|| panic!("no {from:?} in {text}"));
    let rest = &text[start..];
    &rest[..rest.find(to).unwrap_or(rest.len())]
}

/// The rows of a `monitor locks` or `monitor threads` table whose first
/// cell starts with `first`, split into cells (two spaces or more apart).
fn rows<'a>(text: &'a str, first: &str) -> Vec<Vec<&'a str>> {
    text.lines()
        .filter(|l| l.starts_with(first))
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect()
        })
        .collect()
}

/// The thread id in `thread 3 (name)` or `thread 3`.
fn thread_id(cell: &str) -> &str {
    cell.strip_prefix("thread ")
        .unwrap_or_else(|| panic!("no thread in {cell:?}"))
        .split(' ')
        .next()
        .unwrap()
}

#[test]
fn monitor_locks_and_threads_show_the_philosophers_cycle_fork_by_fork() {
    let (cfg, schedule) =
        failing_schedule("philosophers", |o| matches!(o, Outcome::Deadlocked { .. }));
    let dir = tempfile::tempdir().unwrap();
    let (rwd, _) = rewind_fuzz::rwd::record(&cfg, FileSource::host(), &schedule).unwrap();
    let file = dir.path().join("philosophers.rwd");
    rwd.save(&file).unwrap();

    let mut server = Server::start(&["gdb", &file.to_string_lossy(), "--at", "0"]);
    let attach = server.attach_command();
    let out = gdb(
        &attach,
        &[
            "monitor locks",
            "monitor goto end",
            "monitor locks",
            "monitor threads",
            "monitor help",
        ],
    );
    assert!(
        out.split("now at step")
            .next()
            .unwrap()
            .contains("the run knows no lock here"),
        "at the first instruction: {out}"
    );
    let end = between(&out, "now at step", "rewind-fuzz monitor commands:");
    let locks = between(end, "\nlock ", "\nthread ");
    assert!(
        locks
            .lines()
            .nth(1)
            .unwrap()
            .split_whitespace()
            .eq(["lock", "kind", "holder", "taken", "at", "waiters"]),
        "{locks}"
    );
    // Each fork is held by one philosopher, which took it in
    // philosopher(), and waited for by the next one.
    let forks = rows(locks, "forks[");
    assert_eq!(forks.len(), 5, "{locks}");
    let mut holders = std::collections::BTreeSet::new();
    let mut waiters = std::collections::BTreeSet::new();
    let mut held_by = std::collections::BTreeMap::new();
    for f in &forks {
        let [name, kind, holder, taken, waiter] = f[..] else {
            panic!("five cells: {f:?} in {locks}");
        };
        assert_eq!(kind, "pthread mutex", "{f:?}");
        assert!(taken.starts_with("philosopher (philosophers.c:"), "{f:?}");
        let (h, w) = (thread_id(holder), thread_id(waiter));
        assert!(!waiter.contains(','), "one waiter: {f:?}");
        assert_ne!(h, w, "{f:?}");
        holders.insert(h);
        waiters.insert(w);
        held_by.insert(name, (h, w));
    }
    assert_eq!(holders.len(), 5, "each philosopher holds a fork: {locks}");
    assert_eq!(holders, waiters, "and waits for the next: {locks}");
    assert!(!locks.contains(" 0x"), "every lock has its name: {locks}");

    // Each waiter is blocked on the fork, held by its holder.
    let threads = between(end, "\nthread ", "rewind-fuzz monitor commands:");
    assert!(
        threads
            .lines()
            .nth(1)
            .unwrap()
            .split_whitespace()
            .eq(["thread", "process", "name", "state", "waits", "on"]),
        "{threads}"
    );
    for (fork, (h, w)) in &held_by {
        let row = rows(threads, w)
            .into_iter()
            .find(|r| r[0] == *w)
            .unwrap_or_else(|| panic!("no thread {w} in {threads}"));
        assert_eq!(row[1], "1", "{row:?}");
        assert_eq!(row[3], "blocked", "{row:?}");
        let wants = format!("{fork} (pthread mutex) at philosopher (philosophers.c:");
        assert!(
            row[4].starts_with(&wants) && row[4].ends_with(&format!(", held by thread {h}")),
            "{row:?}"
        );
    }
    let help = between(&out, "rewind-fuzz monitor commands:", "\n\n");
    assert!(
        help.contains("monitor locks") && help.contains("monitor threads"),
        "{out}"
    );
}

#[test]
fn monitor_locks_names_rust_locks_on_the_heap_by_where_the_program_made_them() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("inversion.rwd");
    let exe = common::example("mutex_inversions");
    let checked = common::cli()
        .env("XDG_CACHE_HOME", dir.path())
        .args([
            "check",
            "--jobs",
            "2",
            "--strategy",
            "pct:3",
            "--schedules",
            "200",
        ])
        .arg("--save-rwd")
        .arg(&file)
        .arg("--target")
        .arg(&exe)
        .args(["--", "std"])
        .output()
        .unwrap();
    assert!(
        file.exists(),
        "check finds the deadlock: {}",
        String::from_utf8_lossy(&checked.stderr)
    );

    let mut server = Server::start(&["gdb", &file.to_string_lossy(), "--at", "0"]);
    let attach = server.attach_command();
    let out = gdb(
        &attach,
        &["monitor goto end", "monitor locks", "monitor threads"],
    );
    let end = between(&out, "now at step", "\n\n");
    let locks = between(end, "\nlock ", "\nthread ");
    // The two accounts' std mutexes, inferred from their atomics: each held
    // by one thread and waited for by the other.
    let accounts: Vec<_> = rows(locks, "")
        .into_iter()
        .filter(|r| {
            r.first()
                .is_some_and(|c| c.contains("Arc made at mutex_inversions.rs:3"))
        })
        .collect();
    assert_eq!(accounts.len(), 2, "{locks}");
    let mut cycle = Vec::new();
    for a in &accounts {
        let [_, kind, holder, _, waiter] = a[..] else {
            panic!("five cells: {a:?} in {locks}");
        };
        assert_eq!(kind, "inferred lock word", "{a:?}");
        cycle.push((thread_id(holder), thread_id(waiter)));
    }
    assert_eq!(cycle[0].0, cycle[1].1, "{locks}");
    assert_eq!(cycle[1].0, cycle[0].1, "{locks}");
    assert!(!locks.contains(" 0x"), "named, not addresses: {locks}");
    let threads = between(end, "\nthread ", "\n\n");
    for (h, w) in &cycle {
        let row = rows(threads, w)
            .into_iter()
            .find(|r| r[0] == *w)
            .unwrap_or_else(|| panic!("no thread {w} in {threads}"));
        assert_eq!(row[3], "blocked", "{row:?}");
        assert!(
            row[4].contains("Arc made at mutex_inversions.rs:3")
                && row[4].ends_with(&format!(", held by thread {h}")),
            "{row:?}"
        );
    }
}

/// This user's symbol copies in the temporary directory.
fn symbol_copies() -> std::collections::BTreeSet<String> {
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("rewind-fuzz-gdb-"))
        .collect()
}

#[test]
fn the_program_copy_of_a_killed_server_is_removed_by_the_next_server() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    // A reproducer whose program is gone from the host: the server copies
    // the recorded bytes out for gdb's symbols.
    let exe = dir.path().join("hello-gone");
    std::fs::copy(common::harness("hello"), &exe).unwrap();
    let rwd = dir.path().join("hello.rwd");
    common::save_rwd(&exe, dir.path(), &rwd);
    std::fs::remove_file(&exe).unwrap();
    let rwd = rwd.to_string_lossy().into_owned();
    let mut killed = Server::start(&["gdb", &rwd]);
    let attach = killed.attach_command();
    let copy = Path::new(server_program(&attach))
        .parent()
        .unwrap()
        .to_path_buf();
    assert!(copy.is_dir(), "{attach}");
    // SIGKILL: the server has no chance to remove its copy.
    killed.child.kill().unwrap();
    killed.child.wait().unwrap();
    assert!(copy.is_dir());
    let mut next = Server::start(&["gdb", &rwd]);
    let attach = next.attach_command();
    assert!(
        !copy.exists(),
        "the killed server's copy {} is left",
        copy.display()
    );
    let own = Path::new(server_program(&attach))
        .parent()
        .unwrap()
        .to_path_buf();
    assert!(own.is_dir());
    // SIGTERM: the server removes its own.
    // SAFETY: a signal to our own child process.
    unsafe { libc::kill(next.child.id() as i32, libc::SIGTERM) };
    next.child.wait().unwrap();
    assert!(!own.exists(), "{} is left", own.display());
    let name = |p: &Path| p.file_name().unwrap().to_string_lossy().into_owned();
    let left = symbol_copies();
    assert!(
        !left.contains(&name(&copy)) && !left.contains(&name(&own)),
        "{left:?}"
    );
}
