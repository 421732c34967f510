//! The story of a reproducer, for people: how the run ended (a deadlock's
//! wait-for cycle, a crash's backtrace), the preemptions its schedule
//! makes, and the last steps before the end in thread lanes, one column per
//! thread, with locks named by their symbols and code by its source lines.
//!
//! Everything comes from the file: the program's own bytes symbolize it, so
//! `show` needs neither KVM nor the host's copies.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::sync::Arc;

use super::Rwd;
use crate::ids::Tid;
use crate::observe::outcome::{BlockedThread, Outcome};
use crate::observe::trace::{Event, Operation};
use crate::report::data::DataSymbols;
use crate::report::symbols::{Location, Mapping, Symbolizer};

/// Steps shown in the lanes unless asked otherwise.
pub const DEFAULT_LANE_STEPS: u64 = 40;
/// The longest a finding's one-line summary gets.
pub const HEADLINE_WIDTH: usize = 160;
/// The widest the text lanes get when the threads fit.
const LANES_WIDTH: usize = 120;
/// The narrowest a lane gets (with many threads the lanes grow wider).
const MIN_LANE: usize = 12;
/// The widest a lane's cell gets in text.
const CELL_WIDTH: usize = 40;

/// A reproducer with what it takes to describe it.
pub struct StoryTeller<'a> {
    rwd: &'a Rwd,
    maps: Vec<Mapping>,
    sym: Symbolizer,
    data: DataSymbols,
    names: BTreeMap<u32, String>,
    events: Vec<Event>,
    /// Names already worked out, by address.
    object_names: HashMap<u64, String>,
    /// Heap objects' names, by address, once a lock without a symbol is
    /// named (a replay of the run: see [`super::heap`]).
    heap_names: Option<BTreeMap<u64, String>>,
}

/// One row of the lanes: a step, who took it, what it did.
#[derive(Clone, Debug)]
pub struct LaneCell {
    pub step: u64,
    pub thread: u32,
    /// `mutex-lock forks+0x28`.
    pub what: String,
    /// `philosophers.c:43`, or a function, or `object+0xoffset`.
    pub place: String,
    /// The thread was blocked in this step when the run ended.
    pub blocked: bool,
    /// A decision of the schedule took effect after this step.
    pub preempted_after: bool,
    /// How often the step came in a row (a spin folded into one row).
    pub times: u32,
}

impl<'a> StoryTeller<'a> {
    pub fn new(rwd: &'a Rwd) -> Self {
        let blobs: HashMap<u128, Arc<Vec<u8>>> = rwd
            .blobs
            .iter()
            .map(|b| (b.hash, Arc::new(b.data.clone())))
            .collect();
        let maps: Vec<Mapping> = rwd
            .story
            .mappings
            .iter()
            .filter_map(|m| {
                Some(Mapping {
                    start: m.start,
                    end: m.end,
                    file_offset: m.file_offset,
                    path: m.path.clone(),
                    data: blobs.get(&m.content)?.clone(),
                })
            })
            .collect();
        let data = DataSymbols::new(&maps);
        // Threads inherit the program's name: only other names are worth
        // repeating.
        let program: String = rwd
            .target
            .exe
            .rsplit('/')
            .next()
            .unwrap_or("")
            .chars()
            .take(15)
            .collect();
        StoryTeller {
            rwd,
            maps,
            sym: Symbolizer::new(),
            data,
            names: rwd
                .story
                .threads
                .iter()
                .filter(|(_, n)| *n != program)
                .cloned()
                .collect(),
            events: rwd.events(),
            object_names: HashMap::new(),
            heap_names: None,
        }
    }

    /// `thread 2 (philosophers)`.
    fn thread(&self, t: u32) -> String {
        match self.names.get(&t) {
            Some(n) => format!("thread {t} ({n})"),
            None => format!("thread {t}"),
        }
    }

    fn call_site(&mut self, a: u64) -> Location {
        self.sym.locate_call_site(&self.maps, a)
    }

    fn lock_site(&mut self, a: u64) -> Location {
        self.sym.locate_lock_site(&self.maps, a)
    }

    fn at(&mut self, a: u64) -> Location {
        self.sym.locate(&self.maps, a)
    }

    /// A lock or other object by its symbol: `forks+0x28`, else its address.
    pub fn object_name(&mut self, a: u64) -> String {
        if let Some(n) = self.object_names.get(&a) {
            return n.clone();
        }
        let n = self
            .data
            .name(a)
            .or_else(|| self.heap_name(a))
            .unwrap_or_else(|| format!("{a:#x}"));
        self.object_names.insert(a, n.clone());
        n
    }

    /// The heap object holding `a`, by where the program made it. The
    /// first miss names every lock of the outcome and the lock-order
    /// cycles in one replay.
    fn heap_name(&mut self, a: u64) -> Option<String> {
        let rwd = self.rwd;
        let names = self.heap_names.get_or_insert_with(|| {
            let mut addrs = vec![a];
            if let Outcome::Deadlocked { threads, .. } = rwd.outcome() {
                addrs.extend(
                    threads
                        .iter()
                        .flat_map(|b| b.lock.map(|l| l.0).or(b.object)),
                );
            }
            for inv in rwd.potential_deadlocks() {
                addrs.extend(inv.edges.iter().flat_map(|e| [e.from, e.to]));
            }
            addrs.sort_unstable();
            addrs.dedup();
            super::heap::names(rwd, &addrs)
        });
        names.get(&a).cloned()
    }

    /// The program's own object's name (its file's).
    fn exe_object(&self) -> &str {
        crate::report::base_name(&self.rwd.target.exe)
    }

    /// Whether a location is the program's own code (not a library's or a
    /// language runtime's).
    fn is_programs(&self, l: &Location) -> bool {
        crate::report::signature::is_users(l, self.exe_object())
    }

    /// A library's code, briefly: `strlen in libc.so.6`, or the library.
    fn library(l: &Location) -> String {
        match &l.function {
            Some(f) if !l.object.is_empty() => format!("{f} in {}", l.object),
            _ if !l.object.is_empty() => l.object.clone(),
            _ => l.raw(),
        }
    }

    /// For a crash: the innermost frame of its backtrace in the program's
    /// own code.
    fn programs_frame_in_backtrace(&mut self) -> Option<Location> {
        let bt = self.rwd.story.backtrace.clone();
        bt.iter().enumerate().find_map(|(i, a)| {
            let l = self.sym.locate_frame(&self.maps, *a, i > 0);
            self.is_programs(&l).then_some(l)
        })
    }

    /// A thread's last recorded step in code with source lines: where it
    /// was in the program when it stopped.
    fn last_step_in_the_program(&mut self, thread: Tid) -> Option<Event> {
        let mine: Vec<Event> = self
            .events
            .iter()
            .rev()
            .filter(|e| e.thread == thread)
            .copied()
            .collect();
        mine.into_iter()
            .find(|e| self.call_site(e.site.0).line.is_some_and(|l| l > 0))
    }

    /// Where a location is, briefly: `philosophers.c:44`, else its
    /// function, else `object+0xoffset`.
    fn place(l: &Location) -> String {
        file_line(l)
            .or_else(|| l.function.clone())
            .unwrap_or_else(|| l.raw())
    }

    /// The test the run ran alone (`--exact NAME` of a Rust test binary,
    /// `--gtest_filter=NAME` of a GoogleTest one), if it ran one.
    fn test_name(&self) -> Option<String> {
        let argv = &self.rwd.target.argv;
        let exact = argv
            .iter()
            .position(|a| a == "--exact")
            .and_then(|i| argv.get(i + 1))
            .filter(|n| !n.starts_with('-'));
        let filter = argv.iter().find_map(|a| a.strip_prefix("--gtest_filter="));
        exact.map(String::as_str).or(filter).map(str::to_string)
    }

    /// A panic's place and message from the end of stderr: Rust prints
    /// `thread 'NAME' panicked at FILE:LINE:COL:` and the message below.
    /// libtest captures a test's output and prints it on stdout in its
    /// failures section, so both streams are looked at.
    fn panic_message(&self) -> Option<String> {
        [&self.rwd.story.stderr, &self.rwd.story.stdout]
            .into_iter()
            .find_map(|stream| {
                let text = String::from_utf8_lossy(stream);
                let lines: Vec<&str> = text.lines().collect();
                let at = lines.iter().rposition(|l| l.contains(" panicked at "))?;
                let place = lines[at]
                    .split(" panicked at ")
                    .nth(1)?
                    .trim_end_matches(':');
                // The file's name is enough on one line.
                let place = place.rsplit('/').next().unwrap_or(place);
                let message = lines.get(at + 1).map_or("", |m| m.trim());
                Some(format!("panicked at {place}: {message}"))
            })
    }

    /// The failure in one line of at most [`HEADLINE_WIDTH`] characters,
    /// locks by name and code by source line: what a list of findings
    /// shows (the story itself has the rest).
    pub fn headline(&mut self) -> String {
        let outcome = self.rwd.outcome();
        let text = match &outcome {
            Outcome::Deadlocked { threads, cycle } => {
                let shown: Vec<&BlockedThread> = if cycle.is_empty() {
                    threads.iter().collect()
                } else {
                    cycle
                        .iter()
                        .filter_map(|t| threads.iter().find(|b| b.thread == *t))
                        .collect()
                };
                let waits: Vec<(Tid, String, String)> = shown
                    .iter()
                    .map(|b| match (b.lock, b.site) {
                        (Some(l), Some(s)) => (
                            b.thread,
                            format!("waits for {}", self.object_name(l.0)),
                            Self::place(&self.lock_site(s.0)),
                        ),
                        // A wait no lock explains (a condition variable, a
                        // futex, a pipe) is told by the program's last
                        // step, as the story tells it.
                        _ => match self.last_step_in_the_program(b.thread) {
                            Some(e) => (
                                b.thread,
                                format!("waits in {}", self.event_what(&e)),
                                self.call_site(e.site.0).short(),
                            ),
                            None => (
                                b.thread,
                                format!("waits on {}", b.waits_on),
                                Self::place(&self.at(b.rip.0)),
                            ),
                        },
                    })
                    .collect();
                let head = if cycle.len() > 1 {
                    format!("deadlocked, a cycle of {} threads", cycle.len())
                } else {
                    "deadlocked".to_string()
                };
                // One place for all (philosophers at one line) is said once.
                let one_place = waits.windows(2).all(|w| w[0].2 == w[1].2);
                match waits.first() {
                    Some((_, _, at)) if one_place => {
                        let each: Vec<String> = waits
                            .iter()
                            .map(|(t, what, _)| format!("thread {t} {what}"))
                            .collect();
                        format!("{head} at {at}: {}", each.join(", "))
                    }
                    _ => {
                        let each: Vec<String> = waits
                            .iter()
                            .map(|(t, what, at)| format!("thread {t} {what} at {at}"))
                            .collect();
                        format!("{head}: {}", each.join("; "))
                    }
                }
            }
            Outcome::Crashed {
                signal,
                thread,
                rip,
                ..
            } => {
                let here = self.at(*rip);
                // A fault inside a library is told by the program's frame
                // that called into it.
                match self.programs_frame_in_backtrace() {
                    Some(own) if !self.is_programs(&here) => format!(
                        "crashed: {signal} in thread {thread} at {}, inside {}",
                        own.short(),
                        Self::library(&here)
                    ),
                    _ => format!("crashed: {signal} in thread {thread} at {}", here.short()),
                }
            }
            o if o.is_success() => match self.rwd.potential_deadlocks().first() {
                Some(inv) => {
                    let mut locks = Vec::new();
                    let mut places = Vec::new();
                    for e in &inv.edges {
                        locks.push(self.object_name(e.to));
                        places.push(Self::place(&self.lock_site(e.to_site)));
                    }
                    places.dedup();
                    let (locks, orders) = match locks.as_slice() {
                        [a, b] => (format!("{a} and {b}"), "opposite orders"),
                        _ => (locks.join(", "), "a cycle of orders"),
                    };
                    format!(
                        "potential deadlock: locks {locks} taken in {orders} at {}",
                        places.join(" and ")
                    )
                }
                None => o.summary(),
            },
            o @ Outcome::Exited { .. } => match self.panic_message() {
                Some(panic) => format!("{}: {panic}", o.summary()),
                None => o.summary(),
            },
            o => o.summary(),
        };
        let text = match self.test_name() {
            Some(test) => format!("test {test}: {text}"),
            None => text,
        };
        truncate(&text, HEADLINE_WIDTH)
    }

    /// The whole story as text.
    pub fn text(&mut self, lane_steps: usize) -> String {
        let mut out = String::new();
        let r = self.rwd;
        let _ = writeln!(
            out,
            "reproducer of {} ({} steps, trace {}, recorded by {} on CPU model {})",
            r.target.exe,
            r.expected.steps,
            r.trace_hash_hex(),
            r.monitor,
            r.cpu_model
        );
        let _ = writeln!(
            out,
            "  command: {}  [seed {}, {} CPUs]",
            r.target.argv.join(" "),
            r.target.seed,
            r.target.cpus
        );
        if let Some(test) = self.test_name() {
            let _ = writeln!(out, "  test: {test}");
        }
        let _ = writeln!(out, "  signature: {}", r.expected.signature);
        if let Some(panic) = self.panic_message() {
            let _ = writeln!(out, "  {panic}");
        }
        out.push('\n');
        out.push_str(&self.outcome_section());
        out.push('\n');
        out.push_str(&self.schedule_section());
        out.push('\n');
        // Every line within the width the lanes keep to.
        let mut out = fit(&out, LANES_WIDTH);
        out.push_str(&self.lanes_text(lane_steps));
        let tail = |b: &[u8]| String::from_utf8_lossy(b).trim_end().to_string();
        let (so, se) = (tail(&r.story.stdout), tail(&r.story.stderr));
        if !so.is_empty() || !se.is_empty() {
            let mut output = String::from("\nOUTPUT (the end)\n");
            for (name, text) in [("stdout", so), ("stderr", se)] {
                let lines: Vec<&str> = text.lines().collect();
                for l in &lines[lines.len().saturating_sub(10)..] {
                    let _ = writeln!(output, "  {name}| {l}");
                }
            }
            out.push_str(&fit(&output, LANES_WIDTH));
        }
        out
    }

    fn outcome_section(&mut self) -> String {
        let mut out = String::from("WHAT HAPPENED\n");
        let outcome = self.rwd.outcome();
        match &outcome {
            Outcome::Deadlocked { threads, .. } => {
                let _ = writeln!(
                    out,
                    "  deadlocked after {} steps: all {} live threads are blocked and no timer is pending",
                    self.rwd.expected.steps,
                    threads.len()
                );
            }
            o => {
                let _ = writeln!(
                    out,
                    "  {} after {} steps",
                    o.summary(),
                    self.rwd.expected.steps
                );
            }
        }
        match &outcome {
            Outcome::Deadlocked { threads, cycle } => {
                if cycle.is_empty() {
                    out.push_str(
                        "  no lock explains it: every thread waits, none can wake another\n",
                    );
                } else {
                    let _ = writeln!(
                        out,
                        "  wait-for cycle of {} threads, each waiting for a lock the next one holds:",
                        cycle.len()
                    );
                    for t in cycle {
                        if let Some(b) = threads.iter().find(|b| b.thread == *t) {
                            for l in self.blocked_lines(b) {
                                let _ = writeln!(out, "    {l}");
                            }
                        }
                    }
                    let first = self.thread(cycle[0].0);
                    let _ = writeln!(
                        out,
                        "    ... and so back to {first}: none of them can go on"
                    );
                }
                let others: Vec<&BlockedThread> = threads
                    .iter()
                    .filter(|b| !cycle.contains(&b.thread))
                    .collect();
                if !others.is_empty() {
                    let _ = writeln!(
                        out,
                        "  {}blocked:",
                        if cycle.is_empty() { "" } else { "also " }
                    );
                    for b in others {
                        for l in self.blocked_lines(b) {
                            let _ = writeln!(out, "    {l}");
                        }
                    }
                }
            }
            Outcome::Crashed {
                signal,
                fault_addr,
                thread,
                rip,
                ..
            } => {
                let addr = fault_addr
                    .map(|a| format!(" touching address {a:#x}"))
                    .unwrap_or_default();
                let loc = self.at(*rip).short();
                let _ = writeln!(
                    out,
                    "  {} got {signal}{addr} at {rip:#x}, in {loc}",
                    self.thread(*thread)
                );
                let bt = self.rwd.story.backtrace.clone();
                if !bt.is_empty() {
                    out.push_str("  backtrace:\n");
                    for (i, a) in bt.iter().enumerate() {
                        let frames = self.sym.frames(&self.maps, *a, i > 0);
                        for (j, f) in frames.iter().enumerate() {
                            let inl = if j + 1 < frames.len() {
                                " (inlined)"
                            } else {
                                ""
                            };
                            let _ = writeln!(out, "    #{i:<2} {a:#014x} {}{inl}", f.short());
                        }
                    }
                }
            }
            Outcome::Hung { thread, rip, .. }
            | Outcome::TimedOut { thread, rip }
            | Outcome::OutOfMemory { thread, rip, .. } => {
                let loc = self.at(*rip).short();
                let _ = writeln!(out, "  {} was at {loc}", self.thread(*thread));
            }
            Outcome::Unsupported { thread, rip, .. } => {
                let loc = self.at(*rip).short();
                let _ = writeln!(out, "  {} called it from {loc}", self.thread(*thread));
            }
            Outcome::WrongOutput { .. } => {
                for l in self.output_comparison() {
                    let _ = writeln!(out, "  {l}");
                }
            }
            Outcome::Exited { .. } => {}
        }
        for line in self.inversion_lines() {
            let _ = writeln!(out, "  {line}");
        }
        out
    }

    /// The run's lock-order cycles, a few lines each, the locks and sites
    /// named as the program names them.
    pub fn inversion_lines(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        for inv in self.rwd.potential_deadlocks() {
            out.push(format!(
                "potential deadlock: a lock-order cycle over {} locks",
                inv.edges.len()
            ));
            for e in &inv.edges {
                let (to, from) = (self.object_name(e.to), self.object_name(e.from));
                let to_site = self.lock_site(e.to_site).short();
                let from_site = self.lock_site(e.from_site).short();
                out.push(format!(
                    "  {} took {to} at {to_site} while holding {from} (taken at {from_site})",
                    self.thread(e.thread)
                ));
            }
        }
        out
    }

    /// The run's lock-order cycles as JSON, named as in
    /// [`StoryTeller::inversion_lines`].
    pub fn inversions_json(&mut self) -> serde_json::Value {
        let mut cycles = Vec::new();
        for inv in self.rwd.potential_deadlocks() {
            let mut edges = Vec::new();
            for e in &inv.edges {
                edges.push(serde_json::json!({
                    "thread": e.thread,
                    "holding": format!("{:#x}", e.from),
                    "holding_name": self.object_name(e.from),
                    "holding_site": self.lock_site(e.from_site).short(),
                    "acquiring": format!("{:#x}", e.to),
                    "acquiring_name": self.object_name(e.to),
                    "acquiring_site": self.lock_site(e.to_site).short(),
                }));
            }
            cycles.push(serde_json::json!({ "edges": edges }));
        }
        serde_json::Value::Array(cycles)
    }

    /// For a wrong result: the expected and the actual stdout side by side
    /// from their first differing line (the actual one's end, for a
    /// command oracle), a few lines each.
    fn output_comparison(&self) -> Vec<String> {
        const SHOWN: usize = 8;
        let got = &self.rwd.story.stdout;
        let complete = got.len() < super::format::MAX_OUTPUT;
        let lines = |b: &[u8]| -> Vec<String> {
            b.split_inclusive(|&c| c == b'\n')
                .map(|l| l.strip_suffix(b"\n").unwrap_or(l))
                .map(|l| crate::escape::line(&String::from_utf8_lossy(l)).into_owned())
                .collect()
        };
        let show = |out: &mut Vec<String>, title: String, all: &[String], from: usize| {
            out.push(title);
            if from >= all.len() {
                out.push("  (nothing)".into());
            }
            for l in all.iter().skip(from).take(SHOWN) {
                out.push(format!("  | {l}"));
            }
            if all.len() > from + SHOWN {
                out.push(format!("  ... {} more lines", all.len() - from - SHOWN));
            }
        };
        let mut out = Vec::new();
        let (got_lines, mut want_lines) = (lines(got), None);
        if let Some(want) = self.rwd.expected_stdout() {
            want_lines = Some(lines(want));
        }
        match want_lines {
            Some(want) if complete => {
                let first = want
                    .iter()
                    .zip(&got_lines)
                    .position(|(a, b)| a != b)
                    .unwrap_or(want.len().min(got_lines.len()));
                let at = first.saturating_sub(1);
                show(
                    &mut out,
                    format!("expected stdout, from line {}:", at + 1),
                    &want,
                    at,
                );
                show(
                    &mut out,
                    format!("actual stdout, from line {}:", at + 1),
                    &got_lines,
                    at,
                );
            }
            _ => {
                if let Some(c) = self.rwd.oracle_command() {
                    out.push(format!("oracle command: {}", crate::escape::line(c)));
                }
                let from = got_lines.len().saturating_sub(SHOWN);
                show(
                    &mut out,
                    "the end of the actual stdout:".into(),
                    &got_lines,
                    from,
                );
            }
        }
        out
    }

    /// A blocked thread: what it waits for, where, and who holds it.
    fn blocked_lines(&mut self, b: &BlockedThread) -> Vec<String> {
        let who = self.thread(b.thread.0);
        match (b.lock, b.site) {
            (Some(lock), Some(site)) => {
                let name = self.object_name(lock.0);
                let at = self.lock_site(site.0).short();
                let mut v = vec![format!("{who} waits for {name} at {at}")];
                if let Some(h) = b.holder {
                    let taken = b
                        .holder_site
                        .map(|s| format!(", which took it at {}", self.lock_site(s.0).short()))
                        .unwrap_or_default();
                    v.push(format!("    held by {}{taken}", self.thread(h.0)));
                }
                v
            }
            _ => {
                // The thread's last step in code with source lines says
                // more than the library call it is blocked in.
                let last = self.last_step_in_the_program(b.thread).or_else(|| {
                    self.events
                        .iter()
                        .rev()
                        .find(|e| e.thread == b.thread)
                        .copied()
                });
                let mut line = format!("{who} waits on {}", b.waits_on);
                match last {
                    Some(e) => {
                        let what = self.event_what(&e);
                        let at = self.call_site(e.site.0).short();
                        let _ = write!(line, ", in {what} at {at}");
                    }
                    None => {
                        let _ = write!(line, " at {}", self.at(b.rip.0).short());
                    }
                }
                vec![line]
            }
        }
    }

    fn schedule_section(&mut self) -> String {
        let s = self.rwd.schedule();
        let mut out = String::new();
        let _ = writeln!(
            out,
            "THE SCHEDULE: {} preemption{} (decisions that differ from running each thread until it blocks) among {} decision points{}",
            s.decisions.len(),
            if s.decisions.len() == 1 { "" } else { "s" },
            self.rwd.expected.decision_points,
            if s.origin.is_empty() {
                String::new()
            } else {
                format!("; found by {}", s.origin)
            }
        );
        const SHOWN: usize = 24;
        if s.decisions.len() > SHOWN {
            let _ = writeln!(
                out,
                "  ({} earlier decisions not shown; `rewind-fuzz minimize` drops those that do not matter)",
                s.decisions.len() - SHOWN
            );
        }
        for d in &s.decisions[s.decisions.len().saturating_sub(SHOWN)..] {
            let ev = self.events.iter().find(|e| e.step.0 == d.step).copied();
            let line = match ev {
                Some(e) if e.thread.0 != d.thread => {
                    let what = self.event_what(&e);
                    let at = self.call_site(e.site.0).short();
                    // A pthread hint and a sync site are steps taken before
                    // the operation: the thread has not taken the lock yet.
                    let when = match e.op {
                        Operation::Hint { .. } | Operation::Sync { .. } => "just before",
                        Operation::Syscall { .. } => "right after",
                    };
                    format!(
                        "after step {}: {} runs, preempting {} {when} its {what} at {at}",
                        d.step,
                        self.thread(d.thread),
                        self.thread(e.thread.0)
                    )
                }
                _ => format!(
                    "after step {}: {} runs (not the default policy's pick)",
                    d.step,
                    self.thread(d.thread)
                ),
            };
            let _ = writeln!(out, "  {line}");
        }
        out
    }

    /// What an event did: `mutex-lock forks+0x28`, `futex counter`, `write 1`.
    fn event_what(&mut self, e: &Event) -> String {
        let object = match (e.op, e.object) {
            (_, None) => String::new(),
            // A new thread by the function it runs.
            (
                Operation::Hint {
                    op: crate::arch::abi::HintOp::ThreadCreate,
                },
                Some(o),
            ) => match self.at(o).function {
                Some(f) => format!(" {f}"),
                None => format!(" {o:#x}"),
            },
            (Operation::Hint { .. }, Some(o)) => format!(" {}", self.object_name(o)),
            (Operation::Syscall { .. }, Some(o)) if o < 1 << 16 => format!(" {o}"),
            (Operation::Syscall { .. }, Some(o)) => format!(" {}", self.object_name(o)),
            (Operation::Sync { .. }, Some(o)) => format!(" {}", self.object_name(o)),
        };
        format!("{}{object}", e.name())
    }

    /// Where an event happened, briefly: `philosophers.c:43`, else the
    /// function when it says more than the operation's name, else nothing
    /// (a system call inside a library without symbols).
    fn event_place(&mut self, e: &Event) -> String {
        let l = self.call_site(e.site.0);
        file_line(&l)
            .or_else(|| l.function.clone().filter(|f| f != e.name()))
            .unwrap_or_default()
    }

    /// The steps the lanes show, as indices into the recorded events: the
    /// end of the run, where each thread of a deadlock blocked, and around
    /// the last decisions of the schedule (the preemptions that make the
    /// failure, once minimized), as many as `budget` rows allow; all of
    /// them when they fit.
    fn picked(&mut self, budget: usize) -> Vec<usize> {
        let n = self.events.len();
        if n <= budget {
            return (0..n).collect();
        }
        let index_of = |events: &[Event], step: u64| {
            let i = events.partition_point(|e| e.step.0 < step);
            (i < events.len()).then_some(i)
        };
        let mut picked = BTreeSet::new();
        let add = |picked: &mut BTreeSet<usize>, from: usize, to: usize| {
            let to = to.min(n - 1);
            let fresh = (from..=to).filter(|i| !picked.contains(i)).count();
            if picked.len() + fresh > budget {
                return false;
            }
            picked.extend(from..=to);
            true
        };
        // The end, and the step each thread stopped at when the run ended
        // with threads blocked.
        let end = (budget / 4).clamp(4, 12);
        add(&mut picked, n - end.min(n), n - 1);
        if let Outcome::Deadlocked { threads, .. } = self.rwd.outcome() {
            for b in &threads {
                if let Some(i) = self.events.iter().rposition(|e| e.thread == b.thread) {
                    add(&mut picked, i.saturating_sub(1), i);
                }
            }
        }
        // The decisions, the last first: a few steps before each (what the
        // preempted thread was doing) and after (what the thread picked did).
        let decisions: Vec<u64> = self.rwd.schedule.decisions.iter().map(|d| d.0).collect();
        for step in decisions.iter().rev() {
            let Some(i) = index_of(&self.events, *step) else {
                continue;
            };
            if !add(&mut picked, i.saturating_sub(3), i + 4) {
                break;
            }
        }
        // What is left of the budget goes to the end.
        let mut from = n - end.min(n);
        while picked.len() < budget && from > 0 {
            from -= 1;
            picked.insert(from);
        }
        picked.into_iter().collect()
    }

    /// The rows of the lanes (at most about `budget` steps) and the threads
    /// that have a step in them.
    pub fn lanes(&mut self, budget: usize) -> (Vec<u32>, Vec<LaneRow>) {
        // Folded spins leave room: pick more steps while they do.
        let mut pick = budget;
        let mut made = self.lanes_of(pick);
        for _ in 0..4 {
            let shown = made.1.len();
            if shown >= budget || pick >= self.events.len() {
                break;
            }
            pick += budget - shown;
            made = self.lanes_of(pick);
        }
        made
    }

    /// The rows of the lanes for `budget` picked steps.
    fn lanes_of(&mut self, budget: usize) -> (Vec<u32>, Vec<LaneRow>) {
        let decided: BTreeSet<u64> = self.rwd.schedule.decisions.iter().map(|d| d.0).collect();
        let picked = self.picked(budget);
        let mut rows = Vec::new();
        let mut last: Option<usize> = None;
        let mut run: Vec<LaneCell> = Vec::new();
        let flush = |rows: &mut Vec<LaneRow>, run: &mut Vec<LaneCell>| {
            rows.extend(fold(std::mem::take(run)));
        };
        for &i in &picked {
            if let Some(l) = last
                && i > l + 1
            {
                flush(&mut rows, &mut run);
                let skipped = self.events[i].step.0 - self.events[l].step.0 - 1;
                rows.push(LaneRow::Gap(skipped));
            }
            last = Some(i);
            let e = self.events[i];
            run.push(LaneCell {
                step: e.step.0,
                thread: e.thread.0,
                what: self.event_what(&e),
                place: self.event_place(&e),
                blocked: e.result.is_none(),
                preempted_after: decided.contains(&e.step.0),
                times: 1,
            });
        }
        flush(&mut rows, &mut run);
        if let Some(l) = last {
            let unseen = self
                .rwd
                .expected
                .steps
                .saturating_sub(self.events[l].step.0);
            if unseen > 0 {
                rows.push(LaneRow::Gap(unseen));
            }
        }
        if let Outcome::Crashed {
            signal,
            thread,
            rip,
            ..
        } = self.rwd.outcome()
        {
            let here = self.at(rip);
            let place = match self.programs_frame_in_backtrace() {
                Some(own) if !self.is_programs(&here) => {
                    format!("{} in {}", Self::place(&own), Self::library(&here))
                }
                _ => Self::place(&here),
            };
            rows.push(LaneRow::Fault {
                thread,
                what: format!("{signal} {place}"),
            });
        }
        let mut threads: BTreeSet<u32> = BTreeSet::new();
        for r in &rows {
            match r {
                LaneRow::Step(c) => {
                    threads.insert(c.thread);
                }
                LaneRow::Fault { thread, .. } => {
                    threads.insert(*thread);
                }
                _ => {}
            }
        }
        (threads.into_iter().collect(), rows)
    }

    /// The text of a cell: what the step did, where, and how often in a row.
    fn cell_text(c: &LaneCell, times: u32) -> String {
        let mark = if c.blocked { "*" } else { "" };
        let again = if times > 1 {
            format!(" ×{times} (to step {})", c.step + u64::from(times) - 1)
        } else {
            String::new()
        };
        format!("{}{mark} {}{again}", c.what, c.place)
            .trim_end()
            .to_string()
    }

    fn lanes_text(&mut self, budget: usize) -> String {
        let (threads, mut rows) = self.lanes(budget);
        // Narrow columns: the source file most steps are in goes without
        // saying, and the note says it once.
        let mut files: BTreeMap<String, usize> = BTreeMap::new();
        for r in &rows {
            if let LaneRow::Step(c) = r
                && let Some((file, _)) = c.place.rsplit_once(':')
            {
                *files.entry(file.to_string()).or_default() += 1;
            }
        }
        let common = files
            .into_iter()
            .max_by_key(|(_, n)| *n)
            .filter(|(_, n)| *n >= 3 && threads.len() >= 4)
            .map(|(f, _)| f);
        if let Some(file) = &common {
            for r in &mut rows {
                if let LaneRow::Step(c) = r
                    && let Some(line) = c.place.strip_prefix(&format!("{file}:"))
                {
                    c.place = format!(":{line}");
                }
            }
        }
        let mut out = String::new();
        let steps: usize = rows
            .iter()
            .map(|r| match r {
                LaneRow::Step(_) => 1,
                _ => 0,
            })
            .sum();
        let _ = writeln!(
            out,
            "THE STEPS THAT MATTER ({steps} rows: the last preemptions and the end), one column per thread"
        );
        let _ = writeln!(
            out,
            "  (>> a preemption after the step, * a step still blocked at the end, ×N a step repeated N times)"
        );
        if let Some(file) = &common {
            let _ = writeln!(out, "  (:LINE is a line of {file})");
        }
        if rows.is_empty() {
            return out;
        }
        // Each column as wide as its widest cell, all of them within
        // LANES_WIDTH; cells wrap at spaces. Too many threads for that: a
        // list instead.
        const STEP_COLUMN: usize = 10;
        let share = (LANES_WIDTH.saturating_sub(STEP_COLUMN) / threads.len().max(1))
            .saturating_sub(3)
            .min(CELL_WIDTH);
        if share < MIN_LANE {
            return out + &list_text(&rows);
        }
        let mut width: BTreeMap<u32, usize> = threads
            .iter()
            .map(|t| (*t, format!("thread {t}").len()))
            .collect();
        for r in &rows {
            let (thread, text) = match r {
                LaneRow::Step(c) => (c.thread, Self::cell_text(c, c.times)),
                LaneRow::Fault { thread, what } => (*thread, format!("!! {what}")),
                _ => continue,
            };
            let w = width.get_mut(&thread).unwrap();
            *w = (*w)
                .max(text.chars().count())
                .min(share.max(format!("thread {thread}").len()));
        }
        let mut header = format!("  {:>7} ", "step");
        let mut rule = format!("  {:->7}-", "");
        for t in &threads {
            let w = width[t];
            let _ = write!(header, "| {:<w$} ", format!("thread {t}"));
            let _ = write!(rule, "+-{:-<w$}-", "");
        }
        let _ = writeln!(out, "{}", header.trim_end());
        let _ = writeln!(out, "{}", rule.trim_end());
        let table: usize = width.values().map(|w| w + 3).sum::<usize>() + STEP_COLUMN;
        for r in &rows {
            let (step, mark, thread, text) = match r {
                LaneRow::Step(c) => (
                    c.step.to_string(),
                    if c.preempted_after { ">>" } else { "  " },
                    c.thread,
                    Self::cell_text(c, c.times),
                ),
                LaneRow::Fault { thread, what } => {
                    (String::new(), "  ", *thread, format!("!! {what}"))
                }
                LaneRow::Gap(n) => {
                    let note = format!("  {:>7}   ... {n} step{} not shown ...", "", plural(*n));
                    let _ = writeln!(out, "{}", truncate(&note, table.min(LANES_WIDTH)));
                    continue;
                }
                LaneRow::Repeat { len, times, to } => {
                    let note = format!(
                        "  {:>7}   ... the {len} steps above again, {times} more time{}, to step {to} ...",
                        "",
                        plural(u64::from(*times))
                    );
                    let _ = writeln!(out, "{}", truncate(&note, LANES_WIDTH));
                    continue;
                }
            };
            let lines = wrap(&text, width[&thread]);
            for (i, line) in lines.iter().enumerate() {
                let mut row = if i == 0 {
                    format!("  {mark}{step:>5} ")
                } else {
                    format!("  {:>7} ", "")
                };
                for t in &threads {
                    let w = width[t];
                    let cell = if *t == thread { line.as_str() } else { "" };
                    let _ = write!(row, "| {cell:<w$} ");
                }
                let _ = writeln!(out, "{}", row.trim_end());
            }
        }
        out
    }

    /// The lanes as an SVG picture: the faulting thread's column and step
    /// in red, the preemptions as dashed lines, the legend within the
    /// picture.
    pub fn svg(&mut self, budget: usize) -> String {
        let (threads, rows) = self.lanes(budget);
        let outcome = self.rwd.outcome();
        let summary = match &outcome {
            Outcome::Deadlocked { cycle, .. } if !cycle.is_empty() => {
                let ids: Vec<String> = cycle.iter().map(|t| t.to_string()).collect();
                format!(
                    "deadlocked after {} steps: wait-for cycle of threads {} -> {}",
                    self.rwd.expected.steps,
                    ids.join(" -> "),
                    ids[0]
                )
            }
            _ => format!(
                "{} after {} steps",
                self.headline(),
                self.rwd.expected.steps
            ),
        };
        let faulted = match &outcome {
            Outcome::Crashed { thread, .. } => Some(*thread),
            _ => None,
        };
        let col_w = 300.0;
        let row_h = 22.0;
        let left = 70.0;
        let top = 76.0;
        // A monospace character is about 0.6 of the font size wide.
        const CHAR_W: f64 = 6.0;
        let fits = |px: f64, size: f64| ((px / (0.6 * size)) as usize).max(8);
        let cell_chars = fits(col_w - 16.0, 12.0);
        let lanes_w = left + col_w * threads.len().max(1) as f64 + 20.0;
        // The legend in rows that fit the picture, which is at least wide
        // enough for its longest entry and its note.
        let note = "red border: blocked at the end; red cell: where the run faulted; dashed orange line: a preemption (the next step is another thread's)";
        let width = lanes_w.max(560.0);
        let per_line = ((width - 20.0) / CHAR_W) as usize;
        let notes = wrap(note, per_line);
        let mut legend_rows: Vec<Vec<(&str, &str)>> = vec![Vec::new()];
        let mut used = 10.0;
        for (fill, meaning) in LEGEND {
            let w = 16.0 + CHAR_W * meaning.len() as f64 + 14.0;
            if used + w > width - 10.0 && !legend_rows.last().unwrap().is_empty() {
                legend_rows.push(Vec::new());
                used = 10.0;
            }
            legend_rows.last_mut().unwrap().push((fill, meaning));
            used += w;
        }
        let foot = 16.0 * (legend_rows.len() + notes.len()) as f64 + 16.0;
        let height = top + row_h * rows.len() as f64 + foot;
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="monospace" font-size="12">"#
        );
        let _ = writeln!(s, r##"<rect width="100%" height="100%" fill="#ffffff"/>"##);
        let _ = writeln!(
            s,
            r#"<text x="10" y="20" font-size="14" font-weight="bold">{}</text>"#,
            xml(&truncate(&self.rwd.target.exe, fits(width - 20.0, 14.0)))
        );
        let _ = writeln!(
            s,
            r##"<text x="10" y="40" fill="#aa0000">{}</text>"##,
            xml(&truncate(&summary, fits(width - 20.0, 12.0)))
        );
        for (i, t) in threads.iter().enumerate() {
            let x = left + col_w * i as f64;
            let (band, label) = if faulted == Some(*t) {
                ("#fbe3e3", format!("{} (faulted)", self.thread(*t)))
            } else if i % 2 == 0 {
                ("#f4f6fa", self.thread(*t))
            } else {
                ("#fafafa", self.thread(*t))
            };
            let _ = writeln!(
                s,
                r##"<rect x="{x}" y="{}" width="{}" height="{}" fill="{band}"/>"##,
                top - 24.0,
                col_w - 4.0,
                row_h * rows.len() as f64 + 26.0,
            );
            let colour = if faulted == Some(*t) {
                "#aa0000"
            } else {
                "#000000"
            };
            let _ = writeln!(
                s,
                r##"<text x="{}" y="{}" font-weight="bold" fill="{colour}">{}</text>"##,
                x + 6.0,
                top - 8.0,
                xml(&truncate(&label, cell_chars))
            );
        }
        for (r, row) in rows.iter().enumerate() {
            let y = top + row_h * r as f64;
            let column = |thread: u32| threads.iter().position(|t| *t == thread).unwrap_or(0);
            match row {
                LaneRow::Step(c) => {
                    let _ = writeln!(
                        s,
                        r##"<text x="8" y="{}" fill="#666666">{}</text>"##,
                        y + 15.0,
                        c.step
                    );
                    let x = left + col_w * column(c.thread) as f64;
                    let stroke = if c.blocked {
                        r##"stroke="#cc0000" stroke-width="2""##
                    } else {
                        r##"stroke="#888888" stroke-width="0.5""##
                    };
                    let _ = writeln!(
                        s,
                        r#"<rect x="{}" y="{}" width="{}" height="{}" rx="3" fill="{}" {stroke}/>"#,
                        x + 2.0,
                        y + 2.0,
                        col_w - 10.0,
                        row_h - 4.0,
                        op_color(&c.what)
                    );
                    let _ = writeln!(
                        s,
                        r#"<text x="{}" y="{}">{}</text>"#,
                        x + 8.0,
                        y + 15.0,
                        xml(&truncate(&Self::cell_text(c, c.times), cell_chars))
                    );
                    if c.preempted_after {
                        let y2 = y + row_h;
                        let _ = writeln!(
                            s,
                            r##"<line x1="{left}" y1="{y2}" x2="{}" y2="{y2}" stroke="#cc6600" stroke-width="2" stroke-dasharray="6,3"/>"##,
                            lanes_w - 20.0
                        );
                        let _ = writeln!(
                            s,
                            r##"<path d="M {} {} l 8 4 l -8 4 z" fill="#cc6600"/>"##,
                            left - 12.0,
                            y2 - 4.0
                        );
                    }
                }
                LaneRow::Fault { thread, what } => {
                    let x = left + col_w * column(*thread) as f64;
                    let _ = writeln!(
                        s,
                        r##"<rect x="{}" y="{}" width="{}" height="{}" rx="3" fill="#e04040" stroke="#880000" stroke-width="2"/>"##,
                        x + 2.0,
                        y + 2.0,
                        col_w - 10.0,
                        row_h - 4.0
                    );
                    let _ = writeln!(
                        s,
                        r##"<text x="{}" y="{}" fill="#ffffff" font-weight="bold">{}</text>"##,
                        x + 8.0,
                        y + 15.0,
                        xml(&truncate(&format!("✖ {what}"), cell_chars))
                    );
                }
                LaneRow::Gap(n) => {
                    let _ = writeln!(
                        s,
                        r##"<text x="{left}" y="{}" fill="#888888" font-style="italic">… {n} step{} not shown …</text>"##,
                        y + 15.0,
                        plural(*n)
                    );
                }
                LaneRow::Repeat { len, times, to } => {
                    let _ = writeln!(
                        s,
                        r##"<text x="{left}" y="{}" fill="#888888" font-style="italic">… the {len} steps above again, {times} more time{}, to step {to} …</text>"##,
                        y + 15.0,
                        plural(u64::from(*times))
                    );
                }
            }
        }
        let mut y = top + row_h * rows.len() as f64 + 12.0;
        for entries in &legend_rows {
            let mut x = 10.0;
            for (fill, meaning) in entries {
                let _ = writeln!(
                    s,
                    r##"<rect x="{x}" y="{}" width="12" height="10" rx="2" fill="{fill}" stroke="#999999"/><text x="{}" y="{}" fill="#444444" font-size="10">{meaning}</text>"##,
                    y,
                    x + 16.0,
                    y + 9.0
                );
                x += 16.0 + CHAR_W * meaning.len() as f64 + 14.0;
            }
            y += 16.0;
        }
        for line in &notes {
            let _ = writeln!(
                s,
                r##"<text x="10" y="{}" fill="#666666" font-size="10">{}</text>"##,
                y + 9.0,
                xml(line)
            );
            y += 16.0;
        }
        s.push_str("</svg>\n");
        s
    }
}

/// One row of the lanes.
#[derive(Clone, Debug)]
pub enum LaneRow {
    /// A step (and the same step repeated right after it, folded in).
    Step(LaneCell),
    /// Steps left out.
    Gap(u64),
    /// The `len` rows above repeat `times` more times, to step `to`.
    Repeat { len: usize, times: u32, to: u64 },
    /// Where a thread faulted: the signal and the place.
    Fault { thread: u32, what: String },
}

/// Consecutive cells as rows, repeats folded: a step done again and again
/// (a spin) is one row with its count, a short cycle of steps (a poll
/// loop, a lock and unlock) is shown once with how often it came again.
fn fold(cells: Vec<LaneCell>) -> Vec<LaneRow> {
    let key = |c: &LaneCell| (c.thread, c.what.clone(), c.place.clone(), c.blocked);
    let mut rows = Vec::new();
    let mut i = 0;
    while i < cells.len() {
        // The same step again.
        let mut j = i + 1;
        while j < cells.len() && key(&cells[j]) == key(&cells[i]) && !cells[j - 1].preempted_after {
            j += 1;
        }
        if j - i >= 2 {
            let mut c = cells[i].clone();
            c.times = (j - i) as u32;
            c.preempted_after = cells[j - 1].preempted_after;
            rows.push(LaneRow::Step(c));
            i = j;
            continue;
        }
        // A cycle of two to four steps, repeated.
        let mut folded = false;
        for len in 2..=4 {
            let same = |a: usize, b: usize| {
                (0..len).all(|k| {
                    b + k < cells.len()
                        && key(&cells[a + k]) == key(&cells[b + k])
                        && !cells[a + k].preempted_after
                })
            };
            let mut times = 0;
            while same(i, i + len * (times + 1)) {
                times += 1;
            }
            if times >= 2 {
                rows.extend(cells[i..i + len].iter().cloned().map(LaneRow::Step));
                let end = i + len * (times + 1);
                rows.push(LaneRow::Repeat {
                    len,
                    times: times as u32,
                    to: cells[end - 1].step,
                });
                i = end;
                folded = true;
                break;
            }
        }
        if !folded {
            rows.push(LaneRow::Step(cells[i].clone()));
            i += 1;
        }
    }
    rows
}

/// The rows as a list, one line each, for more threads than columns fit.
fn list_text(rows: &[LaneRow]) -> String {
    let mut out = String::new();
    for r in rows {
        let line = match r {
            LaneRow::Step(c) => format!(
                "  {}{:>7} thread {:<4} {}",
                if c.preempted_after { ">>" } else { "  " },
                c.step,
                c.thread,
                StoryTeller::cell_text(c, c.times)
            ),
            LaneRow::Fault { thread, what } => {
                format!("  {:>9} thread {thread:<4} !! {what}", "")
            }
            LaneRow::Gap(n) => format!("  {:>9} ... {n} step{} not shown ...", "", plural(*n)),
            LaneRow::Repeat { len, times, to } => format!(
                "  {:>9} ... the {len} steps above again, {times} more time{}, to step {to} ...",
                "",
                plural(u64::from(*times))
            ),
        };
        let _ = writeln!(out, "{}", truncate(&line, LANES_WIDTH));
    }
    out
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The lanes' colours, with what each means (the picture's legend).
const LEGEND: [(&str, &str); 4] = [
    ("#f8dcc8", "takes or waits for a lock"),
    ("#d8f0d8", "releases one"),
    ("#dde4f8", "creates or joins a thread"),
    ("#eeeeee", "another system call or step"),
];

/// A step's colour by its operation (the first word of `what`). Only
/// synchronization counts as a lock: `clock_gettime` is no lock.
fn op_color(what: &str) -> &'static str {
    let op = what.split(' ').next().unwrap_or("");
    let release = op.ends_with("unlock")
        || op == "sem-post"
        || op.starts_with("cond-signal")
        || op.starts_with("cond-broadcast");
    let acquire = [
        "mutex-",
        "rwlock-",
        "spin-",
        "sem-",
        "cond-wait",
        "barrier",
        "atomic-rmw",
    ]
    .iter()
    .any(|p| op.starts_with(p));
    if release {
        LEGEND[1].0
    } else if acquire {
        LEGEND[0].0
    } else if op.starts_with("thread-") {
        LEGEND[2].0
    } else {
        LEGEND[3].0
    }
}

/// `philosophers.c:44`: a location's file name and line, when known.
fn file_line(l: &Location) -> Option<String> {
    let file = l.file.as_deref()?;
    let line = l.line.filter(|n| *n > 0)?;
    Some(format!(
        "{}:{line}",
        file.rsplit('/').next().unwrap_or(file)
    ))
}

/// `text` with every line of more than `width` characters broken at spaces
/// (a word longer than that at `width`), what follows indented four more
/// than the line it came from.
fn fit(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        if line.chars().count() <= width {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let more = " ".repeat((indent + 4).min(width / 2));
        let mut current = line[..indent].to_string();
        let mut empty = true;
        for word in line[indent..].split(' ').filter(|w| !w.is_empty()) {
            let mut word: Vec<char> = word.chars().collect();
            loop {
                let used = current.chars().count();
                let need = word.len() + usize::from(!empty);
                if used + need <= width {
                    if !empty {
                        current.push(' ');
                    }
                    current.extend(&word);
                    empty = false;
                    break;
                }
                if empty {
                    // A word longer than a line: cut where the line ends.
                    let room = width.saturating_sub(used).max(1).min(word.len());
                    current.extend(&word[..room]);
                    word.drain(..room);
                }
                out.push_str(current.trim_end());
                out.push('\n');
                current = more.clone();
                empty = true;
                if word.is_empty() {
                    break;
                }
            }
        }
        if !empty {
            out.push_str(current.trim_end());
            out.push('\n');
        }
    }
    out
}

/// `s` in lines of at most `width` characters, broken at spaces; a word
/// longer than a line is cut with `…`.
fn wrap(s: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in s.split(' ').filter(|w| !w.is_empty()) {
        let word = truncate(word, width);
        let needed = line.chars().count() + usize::from(!line.is_empty()) + word.chars().count();
        if !line.is_empty() && needed > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&word);
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
    t.push('…');
    t
}

/// Escapes text for XML.
fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c if (c as u32) < 0x20 && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_synchronization_is_coloured_as_a_lock() {
        assert_eq!(op_color("mutex-lock forks[1]"), LEGEND[0].0);
        assert_eq!(op_color("atomic-rmw 0x10"), LEGEND[0].0);
        assert_eq!(op_color("mutex-unlock forks[1]"), LEGEND[1].0);
        assert_eq!(op_color("thread-join 0x7fff"), LEGEND[2].0);
        assert_eq!(op_color("clock_gettime 1"), LEGEND[3].0);
        assert_eq!(op_color("futex forks[2]"), LEGEND[3].0);
    }

    #[test]
    fn long_lines_are_broken_within_the_width_and_indented() {
        let line = format!("  after step 7: {} the end", "word ".repeat(30));
        let fitted = fit(&format!("short\n{line}\n"), 40);
        let lines: Vec<&str> = fitted.lines().collect();
        assert_eq!(lines[0], "short");
        assert!(lines.iter().all(|l| l.chars().count() <= 40), "{fitted}");
        assert!(lines[2].starts_with("      word"), "{fitted}");
        assert!(fitted.trim_end().ends_with("the end"), "{fitted}");
        let long_word = fit(&format!("x {}", "y".repeat(100)), 40);
        assert!(
            long_word.lines().all(|l| l.chars().count() <= 40),
            "{long_word}"
        );
        assert_eq!(
            long_word.replace(['\n', ' '], ""),
            format!("x{}", "y".repeat(100))
        );
    }

    #[test]
    fn a_spin_folds_into_one_row_and_a_short_loop_into_a_repeat() {
        let cell = |step: u64, thread: u32, what: &str| LaneCell {
            step,
            thread,
            what: what.into(),
            place: "lib.rs:22".into(),
            blocked: false,
            preempted_after: false,
            times: 1,
        };
        let spins: Vec<LaneCell> = (1..=36).map(|s| cell(s, 2, "spin")).collect();
        let rows = fold(spins);
        assert_eq!(rows.len(), 1);
        assert!(matches!(&rows[0], LaneRow::Step(c) if c.times == 36 && c.step == 1));
        let alternating: Vec<LaneCell> = (1..=8)
            .map(|s| cell(s, 2 + (s % 2) as u32, "spin"))
            .collect();
        let rows = fold(alternating);
        assert_eq!(rows.len(), 3, "{rows:?}");
        assert!(matches!(
            rows[2],
            LaneRow::Repeat {
                len: 2,
                times: 3,
                to: 8
            }
        ));
    }

    #[test]
    fn cells_wrap_at_spaces_within_their_width() {
        assert_eq!(
            wrap("mutex-lock forks[3] philosophers.c:43", 20),
            vec!["mutex-lock forks[3]", "philosophers.c:43"]
        );
        assert_eq!(wrap("averyveryverylongword", 8), vec!["averyve…"]);
        assert_eq!(wrap("", 8), vec![""]);
    }
}
