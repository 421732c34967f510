//! Reproducers (`.rwd` files): a failing run in one file that runs again on
//! another machine, from the files inside it, and tells its own story.
//!
//! A reproducer is made from a run the engine made from scratch with every
//! event recorded ([`record`] makes one such run; [`from_run`] takes one
//! already made). It holds the run's inputs (program, arguments,
//! environment, every file the run looked up, the schedule), what the run
//! did (outcome, failure signature, step count, trace hash, per-step
//! digests and the last events) and what a person needs to read it
//! (thread names, the final file mappings, a crash's backtrace).
//! [`replay`] runs it again and says whether it did the same, and if not,
//! at which step it parted from the recording.

pub mod format;
pub mod heap;
pub mod story;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use format::{
    Blob, Expected, FileEntry, Story, Target, TraceRecord, WireEdge, WireEvent, WireKind,
    WireMapping, WireNode, WireOutcome, WireSchedule,
};
pub use format::{MAX_FILE, Rwd, RwdError};

use crate::engine::{RunConfig, RunReport, Vm, VmError};
use crate::ids::{Step, Tid};
use crate::kernel::KernelConfig;
use crate::kernel::vfs::{FileSource, HostNode, SharedSource};
use crate::observe::trace::Event;
use crate::report::RunFacts;
use crate::report::signature::{Naming, Signature};
use crate::report::symbols::Symbolizer;
use crate::sched::{Replay, SchedView, Schedule, Strategy};

/// A `rewind-fuzz run` command line: the target's words (`--target T` and
/// its settings), then `extra` (`--schedule FILE`, ...), then the
/// program's arguments after `--`, each word quoted for a shell where it
/// must be: a printed command runs as printed.
pub fn run_command(target: &[String], extra: &[String], args: &[String]) -> String {
    let mut words: Vec<String> = vec!["rewind-fuzz".into(), "run".into()];
    words.extend(target.iter().cloned());
    words.extend(extra.iter().cloned());
    if !args.is_empty() {
        words.push("--".into());
        words.extend(args.iter().cloned());
    }
    crate::escape::shell_words(&words)
}

/// The consent flags a printed `replay` or `minimize` command needs for a
/// reproducer of `cfg`'s runs (`gdb` takes only `--read-host-files`, since
/// it drops the oracle), each with a space before it: the user who made
/// the reproducer has agreed to its oracle command and left-out files.
pub fn consent_flags(cfg: &RunConfig, with_oracle: bool) -> String {
    let mut flags = String::new();
    if with_oracle && matches!(cfg.oracle, Some(crate::observe::oracle::Oracle::Command(_))) {
        flags.push_str(" --run-oracle");
    }
    if !cfg.exclude_files.is_empty() {
        flags.push_str(" --read-host-files");
    }
    flags
}

/// Runs `schedule` from scratch in a new machine over `source`, recording
/// every event, and makes the reproducer of that run.
pub fn record(
    cfg: &RunConfig,
    source: SharedSource,
    schedule: &Schedule,
) -> Result<(Rwd, RunReport), VmError> {
    record_expecting(cfg, source, schedule, None).map(|(rwd, report, _)| (rwd, report))
}

/// [`record`], and whether the run failed with `want` (a signature named
/// as its [`Naming`] says), when given: a schedule found to fail, run
/// again from scratch, should fail the same way.
pub fn record_expecting(
    cfg: &RunConfig,
    source: SharedSource,
    schedule: &Schedule,
    want: Option<(&Signature, Naming)>,
) -> Result<(Rwd, RunReport, bool), VmError> {
    let mut quiet = cfg.clone();
    quiet.stream_output = false;
    let mut vm = Vm::new(&quiet, source)?;
    vm.set_strategy(Box::new(Replay::new(schedule.clone())));
    vm.record_events();
    let mut report = vm.run()?;
    report.schedule.origin = schedule.origin.clone();
    let rwd = from_run(cfg, &vm, &report).expect("a fresh recorded run makes a reproducer");
    let same = match want {
        None => true,
        Some((want, naming)) if naming == rwd.signature_naming => rwd.expected.signature == *want,
        Some((want, naming)) => {
            let facts = RunFacts::of(&vm, &report);
            facts.signature(&report, &mut Symbolizer::new(), naming) == *want
        }
    };
    Ok((rwd, report, same))
}

/// The reproducer of the run `vm` just made from scratch (its first run),
/// with its events recorded ([`Vm::record_events`]); `None` when the run
/// was not recorded from its start.
pub fn from_run(cfg: &RunConfig, vm: &Vm, report: &RunReport) -> Option<Rwd> {
    let events = report.events.as_deref()?;
    if report.from_snapshot || events.first().is_some_and(|e| e.step != Step(1)) {
        return None;
    }
    let facts = RunFacts::of(vm, report);
    let mut sym = Symbolizer::new();
    let signature = facts.signature(report, &mut sym, Naming::default());
    let k = vm.kernel();

    let mut blobs: BTreeMap<u128, Blob> = BTreeMap::new();
    let mut hashes: BTreeMap<usize, u128> = BTreeMap::new();
    let mut add_blob = |data: &Arc<Vec<u8>>| -> u128 {
        *hashes.entry(Arc::as_ptr(data) as usize).or_insert_with(|| {
            let h = xxhash_rust::xxh3::xxh3_128(data);
            blobs.entry(h).or_insert_with(|| Blob {
                hash: h,
                data: data.to_vec(),
            });
            h
        })
    };
    let (recording, recorded_stats) = {
        let source = k.vfs().source().lock().unwrap();
        (source.recording().clone(), source.recorded_stats().clone())
    };
    let recording: BTreeMap<String, HostNode> = recording;
    // Paths kept out (`--exclude-files`); never the program itself, which a
    // reproducer must hold.
    let excluded = |path: &str| path != cfg.kernel.exe && cfg.exclude_files.is_match(path);
    let mut files = Vec::new();
    let mut stats = Vec::new();
    for (key, node) in &recording {
        let (path, follow) = match key.strip_suffix("\0nofollow") {
            Some(p) => (p.to_string(), false),
            None => (key.clone(), true),
        };
        // A path the format cannot hold (the guest may ask for anything)
        // replays as missing, which is what it was unless the host had it.
        if format::check_path_ok(&path).is_err() {
            continue;
        }
        let node = match node {
            HostNode::File { .. } if excluded(&path) => WireNode::Host,
            HostNode::File {
                data: Some(data),
                mode,
                ..
            } => WireNode::File {
                content: add_blob(data),
                mode: *mode & 0o7777,
            },
            HostNode::File {
                data: None,
                size,
                mode,
            } => WireNode::Unread {
                size: *size,
                mode: *mode & 0o7777,
            },
            HostNode::Dir { mode, entries } => WireNode::Dir {
                mode: *mode & 0o7777,
                entries: entries.as_ref().map(|e| {
                    e.iter()
                        .filter(|(n, _)| format::entry_name_ok(n))
                        .map(|(n, k)| (n.clone(), WireKind::from_node_kind(*k)))
                        .collect()
                }),
            },
            HostNode::Symlink { target } => WireNode::Symlink {
                target: target.clone(),
            },
            HostNode::Missing => WireNode::Missing,
        };
        if let Some(stat) = recorded_stats.get(key) {
            stats.push(format::FileStat {
                path: path.clone(),
                follow,
                stat: *stat,
            });
        }
        files.push(FileEntry { path, follow, node });
    }
    let mappings = facts
        .mappings
        .iter()
        .filter(|m| !excluded(&m.path))
        .map(|m| WireMapping {
            start: m.start,
            end: m.end,
            file_offset: m.file_offset,
            path: m.path.clone(),
            content: add_blob(&m.data),
        })
        .collect();

    let (digest_block, digests) = format::digests(events);
    let tail = &events[events.len().saturating_sub(format::MAX_EVENTS)..];
    let kc = &cfg.kernel;
    let tail_of = |b: &[u8]| b[b.len().saturating_sub(format::MAX_OUTPUT)..].to_vec();
    Some(Rwd {
        monitor: format!("rewind-fuzz {}", env!("CARGO_PKG_VERSION")),
        cpu_model: crate::machine::CPU_MODEL_NAME.to_string(),
        target: Target {
            exe: kc.exe.clone(),
            argv: kc.argv.clone(),
            env: kc.env.clone(),
            cwd: kc.cwd.clone(),
            cpus: kc.cpus,
            seed: kc.seed,
            epoch: kc.epoch,
            max_steps: kc.max_steps,
            memory_mib: cfg.memory_mib,
            timeout_ms: cfg.timeout.as_millis().max(1) as u64,
            shim: cfg.shim,
        },
        blobs: blobs.into_values().collect(),
        files,
        schedule: WireSchedule {
            origin: report.schedule.origin.clone(),
            decisions: report
                .schedule
                .decisions
                .iter()
                .map(|d| (d.step, d.thread))
                .collect(),
        },
        expected: Expected {
            outcome: WireOutcome::from_outcome(&report.outcome),
            signature,
            steps: report.steps.0,
            trace_hash: u64::from_str_radix(&report.trace_hash, 16).unwrap_or(0),
            potential_deadlocks: report
                .potential_deadlocks
                .iter()
                .map(|i| i.edges.iter().map(WireEdge::from_edge).collect())
                .collect(),
            decision_points: report.decision_points,
        },
        trace: TraceRecord {
            digest_block,
            digests,
            events: tail.iter().map(WireEvent::from_event).collect(),
        },
        story: Story {
            threads: k
                .threads()
                .values()
                .map(|t| (t.tid.0, t.name.clone()))
                .collect(),
            mappings,
            backtrace: facts.backtrace,
            stdout: tail_of(&report.stdout),
            stderr: tail_of(&report.stderr),
        },
        sync_points: kc.sync_points,
        stats,
        oracle: cfg.oracle.as_ref().map(format::WireOracle::from_oracle),
        ok_codes: cfg.ok_codes.clone(),
        sites_at: if kc.runtime_caller_sites {
            format::SitesAt::RuntimeCaller
        } else {
            format::SitesAt::ProgramFrame
        },
        signature_naming: Naming::default(),
        step_rules: kc.step_rules,
        hang_steps: kc.hang_steps,
        poll_wakes: if kc.polls_retry_on_any_activity {
            format::PollWakes::AnyActivity
        } else {
            format::PollWakes::OwnObjects
        },
    })
}

impl Rwd {
    /// The run configuration it was made with.
    pub fn run_config(&self) -> RunConfig {
        let t = &self.target;
        let mut k = KernelConfig::new(&t.exe, &[]);
        k.argv = t.argv.clone();
        k.env = t.env.clone();
        k.cwd = t.cwd.clone();
        k.cpus = t.cpus;
        k.seed = t.seed;
        k.epoch = t.epoch;
        k.max_steps = t.max_steps;
        k.hang_steps = self.hang_steps;
        k.sync_points = self.sync_points;
        k.runtime_caller_sites = self.sites_at == format::SitesAt::RuntimeCaller;
        k.polls_retry_on_any_activity = self.poll_wakes == format::PollWakes::AnyActivity;
        k.step_rules = self.step_rules;
        let mut cfg = RunConfig::new(k);
        cfg.memory_mib = t.memory_mib;
        cfg.timeout = Duration::from_millis(t.timeout_ms);
        cfg.shim = t.shim;
        cfg.oracle = self.oracle.as_ref().map(format::WireOracle::to_oracle);
        cfg.ok_codes = self.ok_codes.clone();
        // What was left out stays out of reproducers made from this one.
        let mut left_out = globset::GlobSetBuilder::new();
        for path in self.host_paths() {
            if let Ok(g) = globset::Glob::new(&globset::escape(path)) {
                left_out.add(g);
            }
        }
        cfg.exclude_files = left_out
            .build()
            .unwrap_or_else(|_| globset::GlobSet::empty());
        cfg
    }

    /// The host command judging this reproducer's runs, if it has one:
    /// replaying it runs that command on this host.
    pub fn oracle_command(&self) -> Option<&str> {
        match &self.oracle {
            Some(format::WireOracle::Command(c)) => Some(c),
            _ => None,
        }
    }

    /// The stdout its runs must print, if it has that oracle.
    pub fn expected_stdout(&self) -> Option<&[u8]> {
        match &self.oracle {
            Some(format::WireOracle::Stdout(b)) => Some(b),
            _ => None,
        }
    }

    /// The files the reproducer holds: path and size, each path once.
    pub fn embedded_files(&self) -> Vec<(&str, u64)> {
        let mut out: Vec<(&str, u64)> = self
            .files
            .iter()
            .filter_map(|f| match &f.node {
                format::WireNode::File { content, .. } => Some((
                    f.path.as_str(),
                    self.blob(*content).map_or(0, |b| b.len() as u64),
                )),
                _ => None,
            })
            .collect();
        out.dedup_by_key(|(p, _)| *p);
        out
    }

    /// The paths left out of the reproducer (`--exclude-files`), each once.
    pub fn host_paths(&self) -> Vec<&str> {
        let mut paths: Vec<&str> = self
            .files
            .iter()
            .filter(|f| matches!(f.node, format::WireNode::Host))
            .map(|f| f.path.as_str())
            .collect();
        paths.dedup();
        paths
    }

    /// A note for people replaying it, when files were left out.
    pub fn host_files_note(&self) -> Option<String> {
        let paths = self.host_paths();
        let first = paths.first()?;
        Some(format!(
            "{} file(s) were left out of this reproducer and are read from this host: {first}{}",
            paths.len(),
            if paths.len() > 1 { ", ..." } else { "" }
        ))
    }

    /// A file source that serves the recorded files and nothing else.
    pub fn source(&self) -> SharedSource {
        FileSource::recorded_with_host(self.file_nodes(), self.file_stats(), self.host_keys())
    }

    /// Why this monitor cannot run it faithfully, if it cannot.
    pub fn incompatibility(&self) -> Option<String> {
        (self.cpu_model != crate::machine::CPU_MODEL_NAME).then(|| {
            format!(
                "it was recorded on CPU model {}, and this rewind-fuzz offers {}: replay it with the rewind-fuzz that made it ({})",
                self.cpu_model,
                crate::machine::CPU_MODEL_NAME,
                self.monitor
            )
        })
    }
}

/// Where a replay parted from the recording.
#[derive(Clone, Debug)]
pub struct Divergence {
    /// The first step that differs (or the first step one run lacks).
    pub step: u64,
    /// What the recording did there, when it kept that event.
    pub expected: Option<Event>,
    /// What the replay did there (`None` when it had ended).
    pub got: Option<Event>,
}

/// The result of running a reproducer again.
pub struct Replayed {
    pub report: RunReport,
    pub signature: Signature,
    /// The mappings of the replay, for symbolizing its events.
    pub facts: RunFacts,
    /// Whether the outcome and the trace hash are those recorded.
    pub matches: bool,
    /// Where it parted from the recording, when it did.
    pub divergence: Option<Divergence>,
    /// The first step at which the schedule named a thread that could not
    /// run (the default ran instead).
    pub schedule_diverged_at: Option<u64>,
}

/// Replays a schedule and remembers where it named a thread that could not
/// run.
struct Watched {
    inner: Replay,
    diverged: Arc<Mutex<Option<u64>>>,
}

impl Strategy for Watched {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn pick(&mut self, view: &SchedView) -> Tid {
        let t = self.inner.pick(view);
        if let Some(s) = self.inner.diverged_at {
            self.diverged.lock().unwrap().get_or_insert(s);
        }
        t
    }
    fn horizon(&mut self, view: &SchedView) -> u64 {
        self.inner.horizon(view)
    }
}

/// Runs a reproducer again from the files inside it and compares.
pub fn replay(rwd: &Rwd) -> Result<Replayed, VmError> {
    let cfg = rwd.run_config();
    let mut vm = Vm::new(&cfg, rwd.source())?;
    let diverged = Arc::new(Mutex::new(None));
    vm.set_strategy(Box::new(Watched {
        inner: Replay::new(rwd.schedule()),
        diverged: diverged.clone(),
    }));
    vm.record_events();
    let report = vm.run()?;
    let facts = RunFacts::of(&vm, &report);
    let signature = facts.signature(&report, &mut Symbolizer::new(), rwd.signature_naming);
    let matches = report.outcome == rwd.outcome() && report.trace_hash == rwd.trace_hash_hex();
    let events = report.events.clone().unwrap_or_default();
    let divergence = if matches {
        None
    } else {
        Some(first_divergence(rwd, &events))
    };
    let schedule_diverged_at = *diverged.lock().unwrap();
    Ok(Replayed {
        report,
        signature,
        facts,
        matches,
        divergence,
        schedule_diverged_at,
    })
}

/// What running a reproducer's schedule against another build gave.
pub struct Retested {
    pub report: RunReport,
    pub signature: Signature,
    pub facts: RunFacts,
    /// The first step at which the schedule named a thread that could not
    /// run (the other build went another way from there).
    pub schedule_diverged_at: Option<u64>,
}

/// Runs the reproducer's schedule, arguments, environment, level and
/// oracle against another build of the program, `exe` (absolute), named
/// `argv0` in its `argv`, with the host's files: re-testing a fix.
pub fn retest(rwd: &Rwd, exe: &str, argv0: &str) -> Result<Retested, VmError> {
    let mut cfg = rwd.run_config();
    cfg.kernel.exe = exe.to_string();
    if let Some(a) = cfg.kernel.argv.first_mut() {
        *a = argv0.to_string();
    }
    cfg.exclude_files = globset::GlobSet::empty();
    let mut vm = Vm::new(&cfg, FileSource::host())?;
    let diverged = Arc::new(Mutex::new(None));
    vm.set_strategy(Box::new(Watched {
        inner: Replay::new(rwd.schedule()),
        diverged: diverged.clone(),
    }));
    let report = vm.run()?;
    let facts = RunFacts::of(&vm, &report);
    let signature = facts.signature(&report, &mut Symbolizer::new(), rwd.signature_naming);
    let schedule_diverged_at = *diverged.lock().unwrap();
    Ok(Retested {
        report,
        signature,
        facts,
        schedule_diverged_at,
    })
}

/// The first step at which `events` (a replay's) differ from the recording.
pub fn first_divergence(rwd: &Rwd, events: &[Event]) -> Divergence {
    let block = rwd.trace.digest_block.max(1) as usize;
    let recorded = &rwd.trace.digests;
    let mine: Vec<u32> = events.chunks(block).map(format::digest).collect();
    let first_block = recorded
        .iter()
        .zip(&mine)
        .position(|(a, b)| a != b)
        .unwrap_or(recorded.len().min(mine.len()));
    let kept = rwd.events();
    let expected_at = |step: u64| kept.iter().find(|e| e.step == Step(step)).copied();
    let got_at = |step: u64| events.iter().find(|e| e.step == Step(step)).copied();
    // Within the block, the first step whose events differ (when the
    // recording kept them); else the block's first step.
    let start = (first_block * block) as u64 + 1;
    let end = start + block as u64;
    let step = (start..end)
        .find(|s| expected_at(*s) != got_at(*s) && (expected_at(*s).is_some() || block == 1))
        .unwrap_or(start);
    Divergence {
        step,
        expected: expected_at(step),
        got: got_at(step),
    }
}
