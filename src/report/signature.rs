//! Failure signatures: what makes two failing runs the same bug.
//!
//! A signature is the kind of failure (`deadlocked`, `crashed(SIGSEGV)`,
//! ...) and the code sites involved, sorted and without repeats, so two
//! reproducers of one bug found by different schedules compare equal and
//! the fuzzer can file them under one id (`findings/deadlocked-<id>.rwd`).
//!
//! Sites are named by what does not depend on where the run placed things or
//! on which machine it ran: with debug information, the object file's name,
//! the function and the source line (`philosophers!philosopher
//! (philosophers.c:43)`), which survives rebuilds of other libraries and of
//! the program itself as long as those lines do not move; without it, the
//! object's name and the offset in its own addresses (`libc.so.6+0x8f2a0
//! (pthread_kill)`), stable for that build of the object. Raw addresses are
//! never used: the layout is fixed, but they would change with any rebuild of
//! anything mapped below.
//!
//! This module needs no KVM: it works on an outcome, lock-order cycles, the
//! last events and a function that locates addresses.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::observe::failure::FailureKind;
use crate::observe::locks::Inversion;
use crate::observe::outcome::Outcome;
use crate::observe::trace::Event;
use crate::report::symbols::Location;

/// The identity of a failure: its kind and the code sites involved.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Signature {
    /// `deadlocked`, `crashed(SIGSEGV)`, `hung(max-steps)`, `exited(1)`,
    /// `unsupported(fork)`, `potential-deadlock`, or `exited(0)` for a run
    /// that did not fail.
    pub kind: String,
    /// The sites involved, sorted, each once.
    pub sites: Vec<String>,
}

impl Signature {
    /// Builds a signature, sorting and deduplicating the sites.
    pub fn new(kind: impl Into<String>, mut sites: Vec<String>) -> Self {
        sites.sort();
        sites.dedup();
        Signature {
            kind: kind.into(),
            sites,
        }
    }

    /// A short stable id: 16 hex digits of a hash over kind and sites.
    pub fn id(&self) -> String {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        h.update(self.kind.as_bytes());
        for s in &self.sites {
            h.update(&[0]);
            h.update(s.as_bytes());
        }
        format!("{:016x}", h.digest())
    }

    /// Whether the run this describes failed.
    pub fn is_failure(&self) -> bool {
        self.kind != NO_FAILURE
    }

    /// A file name stem for a finding: `deadlocked-3f2a9c01d4e5b6a7`,
    /// `crashed-SIGSEGV-...` (letters, digits and dashes only).
    pub fn file_stem(&self) -> String {
        let mut kind: String = self
            .kind
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        while kind.ends_with('-') {
            kind.pop();
        }
        while kind.contains("--") {
            kind = kind.replace("--", "-");
        }
        format!("{kind}-{}", self.id())
    }
}

impl std::fmt::Display for Signature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.kind)?;
        if !self.sites.is_empty() {
            write!(f, " at {}", self.sites.join("; "))?;
        }
        write!(f, " [{}]", self.id())
    }
}

/// How a signature names what it holds. A reproducer keeps the naming its
/// signature was made with, so that it compares with its replays and its
/// re-tests as it always did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Naming {
    /// Reproducers of format versions 1 to 6: the program's code under its
    /// file's name (`philosophers!philosopher (philosophers.c:43)`), and a
    /// non-zero exit by its code alone.
    FileName,
    /// The program's code as `program!...` whatever its file is called
    /// (cargo's hashed test binaries, a copy, another build directory),
    /// and a Rust panic by where it panicked.
    #[default]
    Program,
}

impl Naming {
    /// The name of the program's own object in sites.
    pub const PROGRAM: &'static str = "program";

    pub fn as_str(self) -> &'static str {
        match self {
            Naming::FileName => "file-name",
            Naming::Program => "program",
        }
    }

    pub fn from_name(s: &str) -> Option<Naming> {
        [Naming::FileName, Naming::Program]
            .into_iter()
            .find(|n| n.as_str() == s)
    }
}

impl Signature {
    /// The signature as a schedule file notes the failure it was saved for.
    pub fn to_note(&self, naming: Naming) -> serde_json::Value {
        serde_json::json!({
            "kind": self.kind,
            "sites": self.sites,
            "naming": naming.as_str(),
            "id": self.id(),
        })
    }

    /// A signature noted by [`Signature::to_note`], if it is one.
    pub fn from_note(v: &serde_json::Value) -> Option<(Signature, Naming)> {
        let kind = v.get("kind")?.as_str()?;
        let sites = v
            .get("sites")?
            .as_array()?
            .iter()
            .map(|s| s.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()?;
        let naming = Naming::from_name(v.get("naming")?.as_str()?)?;
        Some((Signature::new(kind, sites), naming))
    }
}

/// Everything a signature is made from.
#[derive(Clone, Copy, Debug)]
pub struct Facts<'a> {
    pub outcome: &'a Outcome,
    /// How the run failed, as the engine judged it ([`RunReport::failure`]):
    /// the signature's kind, never judged again here.
    ///
    /// [`RunReport::failure`]: crate::engine::RunReport::failure
    pub failure: Option<&'a FailureKind>,
    pub potential_deadlocks: &'a [Inversion],
    /// The last events of the run (to find where a blocked thread waits
    /// when no lock explains it).
    pub recent_events: &'a [Event],
    /// For a crash: the faulting instruction, then the return addresses of
    /// the crashing thread's stack, innermost first (may be empty).
    pub backtrace: &'a [u64],
    /// The file name of the program's own object (to find its frame in a
    /// backtrace that starts in a library).
    pub exe_object: &'a str,
    /// For a deadlock, blocked threads' stacks (innermost first) where
    /// known.
    pub stacks: &'a BTreeMap<u32, Vec<u64>>,
    /// What the program printed on stdout and stderr (the end of it), for
    /// the places Rust panics name.
    pub output: [&'a [u8]; 2],
    pub naming: Naming,
}

/// Locates an address: `(address, is_return_address)` to a location.
pub type Locate<'l> = dyn FnMut(u64, bool) -> Location + 'l;

/// The signature of a run: the kind of failure as [`FailureKind::detail`]
/// spells it (`exited(0)` for a run that did not fail), and its sites.
pub fn compute(f: &Facts, locate: &mut Locate) -> Signature {
    let Some(failure) = f.failure else {
        return Signature::new(NO_FAILURE, Vec::new());
    };
    let site_name = |l: &Location| named(f, site_name(l));
    let function_name = |l: &Location| named(f, function_name(l));
    let sites = match (failure, f.outcome) {
        (FailureKind::PotentialDeadlock, _) => f
            .potential_deadlocks
            .iter()
            .flat_map(|inv| &inv.edges)
            .map(|e| {
                format!(
                    "{} -> {}",
                    site_name(&locate(e.from_site, true)),
                    site_name(&locate(e.to_site, true))
                )
            })
            .collect(),
        (_, Outcome::Crashed { rip, .. }) => crash_sites(f, *rip, locate),
        (_, Outcome::Deadlocked { threads, cycle }) => threads
            .iter()
            .filter(|b| cycle.is_empty() || cycle.contains(&b.thread))
            .map(|b| {
                let last_site = || {
                    f.recent_events
                        .iter()
                        .rev()
                        .find(|e| e.thread == b.thread)
                        .map(|e| e.site)
                };
                let loc = match b.site.or_else(last_site) {
                    Some(site) => locate(site.0, true),
                    None => locate(b.rip.0, false),
                };
                // A wait inside a library (a read, a futex the shim does
                // not see) is named by the program's frame that called
                // it: every program's waits end in the same few places.
                let own = (!is_users(&loc, f.exe_object))
                    .then(|| f.stacks.get(&b.thread.0))
                    .flatten()
                    .and_then(|stack| first_users_frame(stack, f.exe_object, locate));
                site_name(&own.unwrap_or(loc))
            })
            .collect(),
        // Where the step limit strikes depends on the schedule; the kind
        // alone is the finding.
        (_, Outcome::Hung { .. }) => Vec::new(),
        // A loop without system calls: the function, not the line (the
        // watchdog stops it anywhere in the loop).
        (_, Outcome::TimedOut { rip, .. }) => vec![function_name(&locate(*rip, false))],
        (_, Outcome::Unsupported { rip, .. }) | (_, Outcome::OutOfMemory { rip, .. }) => {
            vec![site_name(&locate(*rip, false))]
        }
        // A Rust panic is told apart by where it panicked (not by its
        // message, which may hold values that differ between runs).
        (_, Outcome::Exited { .. }) if f.naming == Naming::Program => panic_places(f.output),
        // A wrong result has no site: one finding per program and oracle.
        (_, Outcome::Exited { .. }) | (_, Outcome::WrongOutput { .. }) => Vec::new(),
    };
    Signature::new(failure.detail(), sites)
}

/// A site's name as `f.naming` names the program's own object.
fn named(f: &Facts, site: String) -> String {
    match f.naming {
        Naming::FileName => site,
        Naming::Program => {
            let Some(rest) = site.strip_prefix(f.exe_object) else {
                return site;
            };
            if f.exe_object.is_empty() || !(rest.starts_with('!') || rest.starts_with('+')) {
                return site;
            }
            format!("{}{rest}", Naming::PROGRAM)
        }
    }
}

/// Where the Rust panics in the output happened: `lib.rs:57:9 (panic)`
/// for Rust's `thread 'NAME' panicked at src/lib.rs:57:9:` (the file by
/// its name, as sites name theirs).
pub fn panic_places(output: [&[u8]; 2]) -> Vec<String> {
    let mut places = Vec::new();
    for stream in output {
        for line in String::from_utf8_lossy(stream).lines() {
            let Some((_, place)) = line.split_once(" panicked at ") else {
                continue;
            };
            let place = place.trim_end().trim_end_matches(':');
            // Before Rust 1.73 the message came first: `'msg', src/x.rs:1:2`.
            let place = place.rsplit(", ").next().unwrap_or(place);
            let place = base_name(place);
            if !place.is_empty() && place.contains(':') {
                places.push(format!("{place} (panic)"));
            }
        }
    }
    places
}

/// The kind of a run that did not fail.
pub const NO_FAILURE: &str = "exited(0)";

/// Whether a location is the program's own code, not a library's or a
/// language runtime's.
pub fn is_users(l: &Location, exe_object: &str) -> bool {
    l.object == exe_object && !crate::report::symbols::is_runtime_frame(l)
}

/// The innermost frame of `stack` (where the thread stopped, then return
/// addresses) in the program's own code.
pub fn first_users_frame(stack: &[u64], exe_object: &str, locate: &mut Locate) -> Option<Location> {
    stack
        .iter()
        .enumerate()
        .map(|(i, a)| locate(*a, i > 0))
        .find(|l| is_users(l, exe_object))
}

/// A crash's sites: where it faulted and, for a crash inside a library
/// (abort, a bad free), where the program called it from.
fn crash_sites(f: &Facts, rip: u64, locate: &mut Locate) -> Vec<String> {
    let frames: Vec<(u64, bool)> = if f.backtrace.is_empty() {
        vec![(rip, false)]
    } else {
        f.backtrace
            .iter()
            .enumerate()
            .map(|(i, a)| (*a, i > 0))
            .collect()
    };
    let located: Vec<Location> = frames.iter().map(|(a, c)| locate(*a, *c)).collect();
    let mut sites = vec![named(f, site_name(&located[0]))];
    if located[0].object != f.exe_object {
        if let Some(own) = located.iter().find(|l| l.object == f.exe_object) {
            sites.push(named(f, site_name(own)));
        }
    }
    sites
}

/// A site's name in a signature: `object!function (file.c:42)` with debug
/// lines, else `object+0xoffset (function)` or `object+0xoffset`, else the
/// bare address (outside every mapped object).
pub fn site_name(l: &Location) -> String {
    if l.object.is_empty() {
        return format!("{:#x}", l.address);
    }
    match (&l.function, &l.file, l.line) {
        (Some(func), Some(file), Some(line)) if line > 0 => {
            format!("{}!{func} ({}:{line})", l.object, base_name(file))
        }
        (Some(func), _, _) => format!("{}+{:#x} ({func})", l.object, l.offset),
        _ => format!("{}+{:#x}", l.object, l.offset),
    }
}

/// A function's name in a signature: `object!function`, or the site name
/// when the function is not known.
pub fn function_name(l: &Location) -> String {
    match &l.function {
        Some(func) if !l.object.is_empty() => format!("{}!{func}", l.object),
        _ => site_name(l),
    }
}

fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{GuestAddr, Tid};
    use crate::observe::outcome::BlockedThread;

    fn loc(address: u64, object: &str, function: &str, line: u32) -> Location {
        Location {
            address,
            object: object.into(),
            offset: address - 0x1000,
            function: Some(function.into()),
            file: Some("/src/prog.c".into()),
            line: Some(line),
        }
    }

    /// Every address in these tests is in `prog`, at line = address % 100.
    fn locate(a: u64, _: bool) -> Location {
        loc(a, "prog", "f", (a % 100) as u32)
    }

    fn blocked(thread: u32, site: u64, holder: u32) -> BlockedThread {
        BlockedThread {
            thread: Tid(thread),
            name: "prog".into(),
            waits_on: "lock".into(),
            object: None,
            rip: GuestAddr(0x7000),
            lock: Some(GuestAddr(0x10)),
            site: Some(GuestAddr(site)),
            holder: Some(Tid(holder)),
            holder_site: Some(GuestAddr(0x2011)),
        }
    }

    static NO_STACKS: BTreeMap<u32, Vec<u64>> = BTreeMap::new();

    fn facts(o: &Outcome) -> Facts<'_> {
        Facts {
            outcome: o,
            // Judged as a run with exit code 0 the only success.
            failure: Box::leak(Box::new(FailureKind::of(o, false, &[0]))).as_ref(),
            potential_deadlocks: &[],
            recent_events: &[],
            backtrace: &[],
            exe_object: "prog",
            stacks: &NO_STACKS,
            output: [b"", b""],
            naming: Naming::FileName,
        }
    }

    #[test]
    fn the_programs_own_code_is_named_whatever_its_file_is_called() {
        let o = Outcome::Deadlocked {
            threads: vec![blocked(2, 0x2043, 3), blocked(3, 0x2043, 2)],
            cycle: vec![Tid(2), Tid(3)],
        };
        let named_as = |exe: &str, naming| {
            let mut at = |a: u64, c: bool| {
                let mut l = locate(a, c);
                l.object = exe.into();
                l
            };
            let f = Facts {
                exe_object: exe,
                naming,
                ..facts(&o)
            };
            compute(&f, &mut at)
        };
        let a = named_as("accounts-1a2b3c", Naming::Program);
        assert_eq!(a, named_as("accounts-9f8e7d", Naming::Program));
        assert_eq!(a.sites, vec!["program!f (prog.c:59)".to_string()]);
        // Reproducers of earlier versions keep the file's name.
        let old = named_as("accounts-1a2b3c", Naming::FileName);
        assert_eq!(old.sites, vec!["accounts-1a2b3c!f (prog.c:59)".to_string()]);
        assert_ne!(old, named_as("accounts-9f8e7d", Naming::FileName));
    }

    #[test]
    fn rust_panics_are_told_apart_by_where_they_panicked() {
        let o = Outcome::Exited { code: 101 };
        let with = |stderr: &'static [u8], naming| {
            let f = Facts {
                output: [b"", stderr],
                naming,
                ..facts(&o)
            };
            compute(&f, &mut locate)
        };
        let a = with(
            b"thread 'tests::w' panicked at src/lib.rs:57:9:\noverdrawn: -60\n",
            Naming::Program,
        );
        assert_eq!(a.kind, "exited(101)");
        assert_eq!(a.sites, vec!["lib.rs:57:9 (panic)".to_string()]);
        let same = with(
            b"thread 'main' panicked at src/lib.rs:57:9:\noverdrawn: -20\n",
            Naming::Program,
        );
        assert_eq!(a, same, "the message is not part of it");
        let other = with(
            b"thread 'main' panicked at src/lib.rs:60:5:\nx\n",
            Naming::Program,
        );
        assert_ne!(a, other);
        let old = with(
            b"thread 'main' panicked at 'x', src/lib.rs:3:5\n",
            Naming::Program,
        );
        assert_eq!(old.sites, vec!["lib.rs:3:5 (panic)".to_string()]);
        assert!(
            with(b"panicked at lib.rs:1:1", Naming::FileName)
                .sites
                .is_empty()
        );
    }

    #[test]
    fn waits_inside_a_library_are_named_by_the_programs_caller() {
        // Both threads wait in libc's `read` (0x7000); their stacks lead
        // back to different lines of the program.
        let libc_or_prog = |a: u64, call: bool| {
            let mut l = locate(a, call);
            if a >= 0x7000 {
                l.object = "libc.so.6".into();
                l.function = Some("read".into());
            }
            l
        };
        let waiting = |thread| BlockedThread {
            lock: None,
            site: None,
            holder: None,
            holder_site: None,
            ..blocked(thread, 0, 0)
        };
        let o = Outcome::Deadlocked {
            threads: vec![waiting(1), waiting(2)],
            cycle: vec![],
        };
        let signature_with = |second_caller: u64| {
            let stacks = BTreeMap::from([
                (1, vec![0x7000, 0x7100, 8209]),
                (2, vec![0x7000, second_caller]),
            ]);
            let f = Facts {
                stacks: &stacks,
                ..facts(&o)
            };
            compute(&f, &mut |a, c| libc_or_prog(a, c))
        };
        let one = signature_with(8205);
        assert_eq!(
            one.sites,
            vec!["prog!f (prog.c:5)".to_string(), "prog!f (prog.c:9)".into()]
        );
        assert_ne!(one, signature_with(8217), "other callers, another bug");
        // Without stacks the library's site is all there is.
        let alone = compute(&facts(&o), &mut |a, c| libc_or_prog(a, c)).sites;
        assert!(
            alone.len() == 1 && alone[0].starts_with("libc.so.6!read"),
            "{alone:?}"
        );
    }

    #[test]
    fn deadlocks_with_the_same_sites_in_any_order_or_size_compare_equal() {
        let a = Outcome::Deadlocked {
            threads: vec![blocked(2, 0x2043, 3), blocked(3, 0x2043, 2)],
            cycle: vec![Tid(2), Tid(3)],
        };
        let b = Outcome::Deadlocked {
            threads: vec![
                blocked(5, 0x2043, 6),
                blocked(6, 0x2043, 4),
                blocked(4, 0x2043, 5),
            ],
            cycle: vec![Tid(4), Tid(5), Tid(6)],
        };
        let sa = compute(&facts(&a), &mut locate);
        let sb = compute(&facts(&b), &mut locate);
        assert_eq!(sa, sb);
        assert_eq!(sa.id(), sb.id());
        assert_eq!(sa.sites, vec![format!("prog!f (prog.c:{})", 0x2043 % 100)]);
        assert!(sa.file_stem().starts_with("deadlocked-"));
    }

    #[test]
    fn a_crash_in_a_library_is_told_apart_by_the_programs_own_frame() {
        let o = Outcome::Crashed {
            signal: "SIGABRT".into(),
            signo: 6,
            fault_addr: None,
            thread: 2,
            rip: 0x9000,
        };
        let mut in_libc = |a: u64, call: bool| {
            if a >= 0x9000 {
                loc(a, "libc.so.6", "pthread_kill", 0)
            } else {
                locate(a, call)
            }
        };
        let f1 = Facts {
            backtrace: &[0x9000, 0x9100, 0x2031],
            ..facts(&o)
        };
        let f2 = Facts {
            backtrace: &[0x9000, 0x9100, 0x2032],
            ..facts(&o)
        };
        let s1 = compute(&f1, &mut in_libc);
        let s2 = compute(&f2, &mut in_libc);
        assert_eq!(s1.kind, "crashed(SIGABRT)");
        assert_eq!(s1.sites.len(), 2, "{s1}");
        assert_ne!(s1, s2);
    }

    #[test]
    fn sites_without_lines_fall_back_to_object_offsets_never_raw_addresses() {
        let l = Location {
            address: 0x7fff_0000_1234,
            object: "libc.so.6".into(),
            offset: 0x1234,
            function: Some("raise".into()),
            file: None,
            line: None,
        };
        assert_eq!(site_name(&l), "libc.so.6+0x1234 (raise)");
        let exited = compute(&facts(&Outcome::Exited { code: 3 }), &mut locate);
        assert_eq!(exited.kind, "exited(3)");
        assert!(exited.is_failure());
        assert!(!compute(&facts(&Outcome::Exited { code: 0 }), &mut locate).is_failure());
    }
}
