//! `rewind-fuzz --target ./test` (or `rewind-fuzz fuzz ...`): the main job.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;

use super::UserError;
use super::common::{TargetArgs, ctrl_c, interrupted, refuse_a_session_there, vm_error};
use crate::explore::per_test;
use crate::fuzz::input::InputError;
use crate::fuzz::{Budget, FuzzConfig, FuzzError, FuzzSummary, ScheduleInput, StrategyMix};

/// Executions minimization spends on each finding unless told.
pub const MINIMIZE_EXECS: u64 = 2000;

#[derive(Args, Debug, Clone)]
pub struct FuzzArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Output directory: queue/, findings/, fuzzer_stats, plot_data, coverage.svg.
    #[arg(long, short = 'o', default_value = "rewind-out")]
    pub out: PathBuf,
    /// Machines fuzzing in parallel, one per core (default: every core).
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// Stop after this long (e.g. 60s, 8h).
    #[arg(long = "time", short = 'V', value_parser = super::common::parse_time_budget)]
    pub time: Option<Duration>,
    /// Stop after this many executions (all jobs together).
    #[arg(long, short = 'E')]
    pub execs: Option<u64>,
    /// Extra seed schedules: a directory of schedule inputs (JSON), e.g. another session's queue/.
    #[arg(long = "corpus", short = 'i', value_name = "DIR")]
    pub corpus: Vec<PathBuf>,
    /// Share of runs that start from a strategy alone instead of a corpus
    /// entry: a number from 0 to 1, optionally with the strategies
    /// (`0.2`, `0.5:pct,pos`, `1.0:random` for pure random search).
    #[arg(long, default_value = "0.2")]
    pub strategy_mix: StrategyMix,
    /// A directory shared with other fuzzers of the same target (on other
    /// machines too, e.g. rsync'd): each publishes its corpus there and
    /// takes the others'.
    #[arg(long, value_name = "DIR")]
    pub sync_dir: Option<PathBuf>,
    /// This fuzzer's name in the sync directory and to other nodes
    /// (default: host name and process id).
    #[arg(long)]
    pub sync_id: Option<String>,
    /// Make this session a node others can join (`--node-connect`) at
    /// ADDR:PORT: nodes pass each other new corpus entries and findings'
    /// signatures. A loopback address unless --node-listen-any-address.
    #[arg(long, value_name = "ADDR:PORT")]
    pub node_listen: Option<String>,
    /// Let --node-listen take an address other hosts can reach. The node
    /// protocol has no authentication: anyone who reaches the port can
    /// send this session schedules and see its corpus.
    #[arg(long)]
    pub node_listen_any_address: bool,
    /// Join the node at HOST:PORT (again whenever the connection breaks);
    /// may be given more than once.
    #[arg(long, value_name = "HOST:PORT")]
    pub node_connect: Vec<String>,
    /// Run the workers as threads of this process instead of processes
    /// (for measuring what processes cost; a thread that fails ends the
    /// session).
    #[arg(long, hide = true)]
    pub worker_threads: bool,
    /// Continue the session in --out: its queue is the starting corpus.
    #[arg(long)]
    pub resume: bool,
    /// Executions minimization may spend on each finding.
    #[arg(long, default_value_t = MINIMIZE_EXECS)]
    pub minimize_execs: u64,
    /// Only print findings and the final summary.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Fuzz each test of a Rust libtest or GoogleTest binary on its own
    /// (`--exact NAME` / `--gtest_filter=NAME`), sharing --time or --execs
    /// between them, each with its own session in --out/<test>/.
    #[arg(long)]
    pub per_test: bool,
    /// With --per-test, the tests to fuzz when already listed (by
    /// `rewind-fuzz cargo`, which counts them first).
    #[arg(skip)]
    pub listed: Option<(per_test::Framework, Vec<String>)>,
    /// What the target is, when not its file (`rewind-fuzz cargo`: the
    /// crate's test target and the test, which stay the same across
    /// rebuilds, so a session resumes on a new build).
    #[arg(skip)]
    pub identity: Option<String>,
}

/// The node protocol's exposure, for `--node-listen`.
const NODES: super::gdb::Exposure = super::gdb::Exposure {
    protocol: "the node protocol",
    lets_anyone: "let anyone who can reach it join the session",
    server: "this node",
    anyone_can: "send the session schedules and read its corpus and findings",
};

/// Reads schedule inputs from a directory; a file that is not one is
/// skipped with a warning.
fn load_dir(dir: &Path, target: u64, what: &str) -> Result<Vec<ScheduleInput>, UserError> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| UserError::bad_input(format!("cannot read {what} {}: {e}", dir.display())))?;
    let mut names: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    names.sort();
    let mut out = Vec::new();
    for p in names {
        if p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        {
            continue;
        }
        match crate::fsutil::read_foreign(&p, crate::sched::MAX_SCHEDULE_FILE)
            .map_err(|e| e.to_string())
            .and_then(|b| ScheduleInput::parse(&b, target).map_err(|e| e.to_string()))
        {
            Ok(i) => out.push(i),
            // The name and what the file held are anyone's: shown escaped.
            Err(e) => eprintln!(
                "rewind-fuzz: warning: skipping {}: {}",
                crate::escape::line(&p.display().to_string()),
                crate::escape::line(&e)
            ),
        }
    }
    Ok(out)
}

/// Holds `dir` for this process: a second session on it is refused, as two
/// sessions writing one queue and one `fuzzer_stats` would mix them. The
/// lock is the kernel's (`flock`), so it goes with the process however it
/// ends; the file keeps the holder's pid for the message.
fn lock_dir(dir: &Path, what: &str) -> Result<std::fs::File, UserError> {
    use std::io::{Read, Seek, Write};
    use std::os::unix::fs::OpenOptionsExt;
    super::common::check_out_dir(what, dir)?;
    std::fs::create_dir_all(dir).map_err(|e| {
        UserError::bad_input(format!("cannot create {what} {}: {e}", dir.display()))
    })?;
    let path = dir.join(".lock");
    // In a shared sync directory someone else may have made it a link.
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| UserError::bad_input(format!("cannot lock {what} {}: {e}", dir.display())))?;
    let exclusive = rustix::fs::FlockOperation::NonBlockingLockExclusive;
    if rustix::fs::flock(&file, exclusive).is_err() {
        let mut pid = String::new();
        let _ = file.read_to_string(&mut pid);
        return Err(UserError::bad_input(format!(
            "{what} {} is in use by another session (pid {}): wait for it to end, or choose another",
            dir.display(),
            crate::escape::line(pid.trim())
        )));
    }
    let _ = file.set_len(0);
    let _ = file.rewind();
    let _ = write!(file, "{}", std::process::id());
    Ok(file)
}

/// Refuses to resume into a directory another target's session made (its
/// corpus would not replay here, and findings would mix).
fn check_same_target(queue: &Path, fp: u64, out: &Path) -> Result<(), UserError> {
    let Ok(entries) = std::fs::read_dir(queue) else {
        return Ok(());
    };
    for e in entries.flatten() {
        let Ok(bytes) = crate::fsutil::read_foreign(&e.path(), crate::sched::MAX_SCHEDULE_FILE)
        else {
            continue;
        };
        if let Err(InputError::OtherTarget { .. }) = ScheduleInput::parse(&bytes, fp) {
            return Err(UserError::bad_input(format!(
                "{} holds a session of another target ({}): choose another --out",
                out.display(),
                crate::escape::line(&e.path().display().to_string())
            )));
        }
    }
    Ok(())
}

/// The fingerprint of a target: its path and contents, and how far
/// scheduling points reach into its code (which numbers its steps).
fn fingerprint(exe: &str, level: crate::code::SyncPoints) -> u64 {
    let mut bytes = exe.as_bytes().to_vec();
    bytes.extend(std::fs::read(exe).unwrap_or_default());
    fingerprint_of(&bytes, level)
}

/// The fingerprint of a target known by `identity`, at `level`.
fn fingerprint_of(identity: &[u8], level: crate::code::SyncPoints) -> u64 {
    let mut bytes = identity.to_vec();
    if level != crate::code::SyncPoints::Calls {
        bytes.extend_from_slice(level.as_str().as_bytes());
    }
    xxhash_rust::xxh3::xxh3_64(&bytes)
}

pub fn fuzz(a: FuzzArgs) -> Result<u8, UserError> {
    super::common::check_out_dir("--out", &a.out)?;
    if let Some(d) = &a.sync_dir {
        super::common::check_out_dir("--sync-dir", d)?;
    }
    if a.per_test {
        if a.node_listen.is_some() || !a.node_connect.is_empty() {
            return Err(UserError::bad_input(
                "--node-listen and --node-connect join one session; --per-test runs one per \
                 test: fuzz one test as a node instead",
            ));
        }
        return fuzz_each(a);
    }
    session(a).map(|(code, _)| code)
}

/// `fuzz --per-test`: the budget shared evenly, one session per test in
/// `--out/<test>/`.
fn fuzz_each(a: FuzzArgs) -> Result<u8, UserError> {
    if a.time.is_none() && a.execs.is_none() {
        return Err(UserError::bad_input(
            "--per-test shares a budget between the tests: give --time (e.g. --time 1h) or --execs",
        ));
    }
    let (framework, tests) = match a.listed.clone() {
        Some(listed) => listed,
        None => super::common::list_tests(&a.target)?,
    };
    let n = tests.len() as u32;
    let share = |t: Duration, left: u32| (t / left).max(Duration::from_secs(1));
    let execs = a.execs.map(|e| (e / u64::from(n)).max(1));
    eprintln!(
        "rewind-fuzz: {n} tests in {}, each fuzzed alone for {}",
        a.target.target,
        match (a.time, execs) {
            (Some(t), _) => format!("{:.0?}", share(t, n)),
            (None, Some(e)) => format!("{e} executions"),
            _ => unreachable!("a budget was checked"),
        }
    );
    // Sessions of one binary's tests: a session already there is refused
    // before any test has run, not after some have.
    if !a.resume {
        for test in &tests {
            refuse_a_session_there(&a.out.join(per_test::file_name(test)))?;
        }
    }
    let started = Instant::now();
    let mut rows = Vec::new();
    for (i, test) in tests.iter().enumerate() {
        if super::common::interrupted() {
            break;
        }
        eprintln!("\n== {test}");
        let mut one = a.clone();
        one.per_test = false;
        one.target = a.target.for_test(framework, test);
        one.out = a.out.join(per_test::file_name(test));
        // Each test its share of the time left: recording a finding at
        // the end of one test's share takes from the others', not from
        // the total.
        let left = n - i as u32;
        one.time = a
            .time
            .map(|t| share(t.saturating_sub(started.elapsed()), left));
        one.execs = execs;
        one.identity = a.identity.as_ref().map(|id| format!("{id}\0{test}"));
        let start = Instant::now();
        let (code, summary) = session(one)?;
        rows.push(per_test::Explored {
            test: test.clone(),
            runs: summary.as_ref().map_or(0, |s| s.execs),
            time: start.elapsed(),
            failures: summary
                .as_ref()
                .map_or(0, |s| (s.findings.len() + s.unsaved.len()) as u64),
            code,
        });
    }
    eprint!("\n{}", per_test::table(("executions", "findings"), &rows));
    Ok(per_test::worst(&rows))
}

/// One session: its exit code and what it did (none when it could not
/// start).
pub fn session(a: FuzzArgs) -> Result<(u8, Option<FuzzSummary>), UserError> {
    let run = a.target.config()?;
    if a.jobs == Some(0) {
        return Err(UserError::bad_input("--jobs must be at least 1"));
    }
    if a.jobs.is_some_and(|j| j > crate::fuzz::MAX_JOBS) {
        return Err(UserError::bad_input(format!(
            "--jobs must be at most {}: give fewer jobs",
            crate::fuzz::MAX_JOBS
        )));
    }
    let fp = match &a.identity {
        Some(id) => fingerprint_of(id.as_bytes(), run.kernel.sync_points),
        None => fingerprint(&run.kernel.exe, run.kernel.sync_points),
    };
    // Held until the session ends.
    let _out_lock = lock_dir(&a.out, "--out")?;
    let queue = a.out.join("queue");
    if !a.resume {
        refuse_a_session_there(&a.out)?;
    }
    let mut initial = Vec::new();
    if a.resume && queue.is_dir() {
        check_same_target(&queue, fp, &a.out)?;
        initial.extend(load_dir(&queue, fp, "the queue")?);
    }
    for d in &a.corpus {
        initial.extend(load_dir(d, fp, "--corpus")?);
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "host".into());
    let sync_id = a
        .sync_id
        .clone()
        .unwrap_or_else(|| format!("{host}-{}", std::process::id()));
    // Fuzzers sharing a sync directory explore differently (the same seed
    // would make them find the same entries); alone, the seed decides.
    let seed = match &a.sync_dir {
        Some(_) => {
            crate::sched::splitmix64(a.target.seed ^ xxhash_rust::xxh3::xxh3_64(sync_id.as_bytes()))
        }
        None => a.target.seed,
    };
    let nodes = crate::fuzz::nodes::NodesConfig {
        listen: match &a.node_listen {
            Some(addr) => Some(std::sync::Arc::new(super::gdb::listen_exposed(
                addr,
                a.node_listen_any_address,
                "--node-listen-any-address",
                &NODES,
            )?)),
            None => None,
        },
        connect: a.node_connect.clone(),
    };
    let cfg = FuzzConfig {
        run,
        target_fingerprint: fp,
        target_name: a.target.target.clone(),
        run_words: a.target.run_words(),
        args: a.target.args.clone(),
        out: a.out.clone(),
        jobs: a.jobs.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, |n| n.get().min(crate::fuzz::MAX_JOBS))
        }),
        budget: Budget {
            time: a.time,
            execs: a.execs,
        },
        seed,
        initial,
        mix: a.strategy_mix.clone(),
        sync_dir: a.sync_dir.clone(),
        sync_id,
        minimize_execs: a.minimize_execs,
        screen: !a.quiet,
        quiet: a.quiet,
        watch: None,
        resume: a.resume,
        workers: if a.worker_threads {
            crate::fuzz::WorkerKind::Threads
        } else {
            crate::fuzz::WorkerKind::Processes
        },
        nodes,
        pin: None,
    };
    let _sync_lock = match &cfg.sync_dir {
        Some(dir) => Some(lock_dir(&dir.join(&cfg.sync_id), "the --sync-dir entry")?),
        None => None,
    };
    let result = crate::fuzz::fuzz(cfg, ctrl_c());
    let summary = match result {
        Ok(s) => s,
        Err(FuzzError::Vm(e)) => return Err(vm_error(e)),
        Err(FuzzError::Setup(m)) => return Err(UserError::bad_input(m)),
        Err(e) => {
            return Err(UserError {
                message: e.to_string(),
                code: 1,
            });
        }
    };
    let all_sessions = if summary.prior_execs > 0 {
        format!(" ({} in all sessions)", summary.execs + summary.prior_execs)
    } else {
        String::new()
    };
    let rate = if summary.elapsed.as_secs_f64() >= 1.0 {
        format!(
            "{:.1}",
            summary.execs as f64 / summary.elapsed.as_secs_f64()
        )
    } else {
        "-".into()
    };
    eprintln!(
        "\nrewind-fuzz: {} executions{all_sessions} in {:.0?} ({rate}/s), corpus {}, features {} lock order / {} interleavings / {} handoffs, {} finding(s){}",
        summary.execs,
        summary.elapsed,
        summary.corpus,
        summary.features["lock_order"],
        summary.features["interleavings"],
        summary.features["handoffs"],
        summary.findings.len(),
        if interrupted() { " (interrupted)" } else { "" }
    );
    for f in &summary.findings {
        eprintln!("  {}  {}", f.path.display(), f.summary);
    }
    // What handing the reproducers on hands on.
    let mut held = std::collections::BTreeMap::new();
    for f in &summary.findings {
        if let Ok(r) = crate::rwd::Rwd::load(&f.path) {
            for (path, size) in r.embedded_files() {
                held.insert(path.to_string(), size);
            }
        }
    }
    if !held.is_empty() {
        eprintln!(
            "  the reproducers hold {} file(s) of this host ({:.1} MB): `rewind-fuzz show --files FILE` lists them; --exclude-files GLOB keeps files out",
            held.len(),
            held.values().sum::<u64>() as f64 / 1e6
        );
    }
    if let Some(u) = &summary.unsupported {
        eprintln!("rewind-fuzz: note: some runs stopped early: {u}");
    }
    for u in &summary.unsaved {
        eprintln!("  not saved (free space in --out and rerun with --resume): {u}");
    }
    // A bug found but not saved still fails the gate: the bug is there.
    let code = if summary.findings.is_empty() && summary.unsaved.is_empty() {
        0
    } else {
        1
    };
    Ok((code, Some(summary)))
}
