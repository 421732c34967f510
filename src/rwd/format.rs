//! The `.rwd` file format, version 10: its types, and encoding and decoding
//! with limits (the reader must survive hostile files). Version 1 files
//! (before sync sites) still decode: they ran with `--sync-points calls`.
//!
//! ```text
//! offset 0   4 bytes   magic "RWD\0"
//!        4   u32 LE    format version (10; 1 to 9 are read too)
//!        8   u64 LE    length of the payload once decompressed
//!       16   ...       one zstd frame (with its content checksum) holding the
//!                      payload: bincode 2 (standard configuration: variable-
//!                      length integers, little-endian) of [`Rwd`]
//! ```
//!
//! `docs/rwd-format.md` describes every field. The types here are the format
//! itself, kept apart from the engine's own types so that changing those
//! cannot silently change the files; a change here is a new version.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::arch::abi::HintOp;
use crate::code::{SiteKind, StepRules, SyncPoints};
use crate::ids::{GuestAddr, Step, Tid};
use crate::kernel::vfs::{HostNode, HostStat, NodeKind};
use crate::observe::locks::{Inversion, OrderEdge};
use crate::observe::oracle::Oracle;
use crate::observe::outcome::{BlockedThread, HungReason, Outcome};
use crate::observe::trace::{Event, Operation};
use crate::report::signature::{Naming, Signature};
use crate::sched::{Decision, Schedule};

/// The first four bytes of every reproducer.
pub const MAGIC: [u8; 4] = *b"RWD\0";
/// The format version this code writes; it reads 1 to 9 too. Version 2
/// added the sync-point level, 3 files left out (`WireNode::Host`), 4 the
/// host's metadata of the recorded files (`Rwd::stats`), 5 the output
/// oracle (`Rwd::oracle`, `WireOutcome::WrongOutput`), 6 files whose
/// metadata alone the run looked at (`WireNode::Unread`) and where sync
/// sites are reported (`Rwd::sites_at`), 7 how signatures name sites
/// (`Rwd::signature_naming`), the step rules (`Rwd::step_rules`) and how
/// long a run may go without progress (`Rwd::hang_steps`), 8 when waiting
/// polls are taken up again (`Rwd::poll_wakes`), 9 the step rules with
/// ticks (`StepRules::Format9`; the layout is version 8's), 10 the exit
/// codes that are success (`Rwd::ok_codes`) and the format-10 step rules
/// (a wait another thread ended is progress).
pub const VERSION: u32 = 10;
/// The most exit codes a reproducer may call success.
pub const MAX_OK_CODES: usize = 256;
/// Bytes before the compressed payload.
pub const HEADER_LEN: usize = 16;
/// The largest payload a reader accepts (decompressed). With the decoding
/// budget below, reading any file stays under half a GiB of memory.
pub const MAX_PAYLOAD: u64 = 128 << 20;
/// The largest reproducer file a reader opens (a payload that does not
/// compress grows a little).
pub const MAX_FILE: u64 = MAX_PAYLOAD + (MAX_PAYLOAD >> 6) + 4096;
/// What decoding a payload may allocate at most, counted as bincode claims
/// it (a declared length times the size of what it holds in memory): eight
/// times the payload, at least 64 MiB (a long run's events take several
/// times their encoded size), at most 256 MiB.
pub const MAX_DECODED: usize = 256 << 20;
/// The longest path a reproducer may name.
pub const MAX_PATH: usize = 4096;
/// The longest directory entry name.
pub const MAX_NAME: usize = 255;
/// How many events of the end of a run a reproducer keeps in full.
pub const MAX_EVENTS: usize = 65_536;
/// How many step digests a reproducer keeps at most (longer runs digest
/// blocks of steps).
pub const MAX_DIGESTS: usize = 1 << 20;
/// How much of the program's stdout and stderr a reproducer keeps (the end).
pub const MAX_OUTPUT: usize = 64 << 10;

/// A reproducer: everything needed to run a failure again on another
/// machine, and to tell its story.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rwd {
    /// The rewind-fuzz that wrote it, e.g. `rewind-fuzz 0.1.0`.
    pub monitor: String,
    /// The CPU model the guest saw (`machine::CPU_MODEL_NAME`).
    pub cpu_model: String,
    pub target: Target,
    /// File contents, each once, by hash.
    pub blobs: Vec<Blob>,
    /// What every path the run looked up was found to be.
    pub files: Vec<FileEntry>,
    pub schedule: WireSchedule,
    pub expected: Expected,
    pub trace: TraceRecord,
    pub story: Story,
    /// How far scheduling points reached into user code (version 2).
    pub sync_points: SyncPoints,
    /// The host's metadata (times, owners, links) of the recorded files
    /// that exist (version 4): a lookup without one replays with made-up
    /// metadata, as before version 4.
    pub stats: Vec<FileStat>,
    /// The output oracle the runs were judged by (version 5): a replay
    /// judges the same way.
    pub oracle: Option<WireOracle>,
    /// Where the runs' sync sites were reported (version 6): a reproducer
    /// of an earlier version replays as it was recorded.
    pub sites_at: SitesAt,
    /// How the signature names sites (version 7: the program's code
    /// whatever its file is called, and Rust panics by place): replays and
    /// re-tests compare in this naming.
    pub signature_naming: Naming,
    /// How the run's steps were made (version 7; earlier versions, under
    /// `StepRules::Format6`).
    pub step_rules: StepRules,
    /// How many steps without progress end the run as hung (version 7;
    /// earlier versions watched nothing: 0).
    pub hang_steps: u64,
    /// When the runs took waiting polls up again (version 8): a
    /// reproducer of an earlier version replays as it was recorded.
    pub poll_wakes: PollWakes,
    /// The exit codes the runs were judged by as success (version 10;
    /// earlier versions, 0 alone): a replay judges the same way.
    pub ok_codes: Vec<i32>,
}

/// When a poll, select, epoll wait or read of a timer, signal or socket
/// descriptor that found nothing ready is taken up again (the thread
/// re-executes its call: a step, part of the trace hash).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PollWakes {
    /// Versions 1 to 7: after any change to any pipe, counter, socket,
    /// timer, signal or process; an edge-triggered epoll interest reports
    /// again after any such change.
    AnyActivity,
    /// When an object it waits on changes; an edge-triggered interest
    /// reports again after a change to what it watches.
    #[default]
    OwnObjects,
}

/// Where a run reports a sync site that lies in a language runtime's or a
/// lock's code; the place is part of each step, and so of the trace hash.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum SitesAt {
    /// Versions 1 to 5: at the first caller outside a runtime function, by
    /// its symbol; a thread's spinning deadlock ends as a hang.
    RuntimeCaller,
    /// At the program's frame: past the program's own lock functions, and
    /// past runtime functions only where debug information says the call is
    /// not the program's code inlined there.
    #[default]
    ProgramFrame,
}

/// An output oracle (`observe::oracle::Oracle`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum WireOracle {
    /// The stdout expected, byte for byte.
    Stdout(#[serde(with = "bytes")] Vec<u8>),
    /// A host command judging the stdout.
    Command(String),
}

impl WireOracle {
    pub fn from_oracle(o: &Oracle) -> Self {
        match o {
            Oracle::Stdout(b) => WireOracle::Stdout(b.clone()),
            Oracle::Command(c) => WireOracle::Command(c.clone()),
        }
    }

    pub fn to_oracle(&self) -> Oracle {
        match self {
            WireOracle::Stdout(b) => Oracle::Stdout(b.clone()),
            WireOracle::Command(c) => Oracle::Command(c.clone()),
        }
    }
}

/// The metadata of one recorded lookup.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FileStat {
    pub path: String,
    pub follow: bool,
    pub stat: HostStat,
}

/// An older reproducer, read field by field as it was written: bincode
/// lays a nested struct's fields out in line, so each version is the one
/// before it and the fields it added.
#[derive(Deserialize)]
struct RwdV1 {
    monitor: String,
    cpu_model: String,
    target: Target,
    blobs: Vec<Blob>,
    files: Vec<FileEntry>,
    schedule: WireSchedule,
    expected: Expected,
    trace: TraceRecord,
    story: Story,
}

/// Versions 2 and 3: version 1 and the sync-point level.
#[derive(Deserialize)]
struct RwdV3 {
    v1: RwdV1,
    sync_points: SyncPoints,
}

/// Version 4: version 3 and the files' metadata.
#[derive(Deserialize)]
struct RwdV4 {
    v3: RwdV3,
    stats: Vec<FileStat>,
}

/// Version 5: version 4 and the output oracle.
#[derive(Deserialize)]
struct RwdV5 {
    v4: RwdV4,
    oracle: Option<WireOracle>,
}

impl From<RwdV4> for RwdV5 {
    fn from(v4: RwdV4) -> RwdV5 {
        RwdV5 { v4, oracle: None }
    }
}

impl From<RwdV1> for RwdV3 {
    fn from(v1: RwdV1) -> RwdV3 {
        // Before sync sites, runs had only system and pthread calls.
        RwdV3 {
            v1,
            sync_points: SyncPoints::Calls,
        }
    }
}

impl From<RwdV3> for RwdV4 {
    fn from(v3: RwdV3) -> RwdV4 {
        RwdV4 {
            v3,
            stats: Vec::new(),
        }
    }
}

/// Version 6: version 5 and where sync sites were reported.
#[derive(Deserialize)]
struct RwdV6 {
    v5: RwdV5,
    sites_at: SitesAt,
}

impl From<RwdV5> for RwdV6 {
    fn from(v5: RwdV5) -> RwdV6 {
        RwdV6 {
            v5,
            sites_at: SitesAt::RuntimeCaller,
        }
    }
}

/// Version 7: version 6, how signatures name sites, the step rules and
/// the hang watch.
#[derive(Deserialize)]
struct RwdV7 {
    v6: RwdV6,
    signature_naming: Naming,
    step_rules: StepRules,
    hang_steps: u64,
}

impl From<RwdV6> for RwdV7 {
    fn from(v6: RwdV6) -> RwdV7 {
        RwdV7 {
            v6,
            // Signatures before version 7 name the program by its file.
            signature_naming: Naming::FileName,
            step_rules: StepRules::Format6,
            hang_steps: 0,
        }
    }
}

/// Versions 8 and 9: version 7 and when polls are taken up again.
#[derive(Deserialize)]
struct RwdV8 {
    v7: RwdV7,
    poll_wakes: PollWakes,
}

impl From<RwdV7> for RwdV8 {
    fn from(v7: RwdV7) -> RwdV8 {
        RwdV8 {
            v7,
            // Before version 8 polls were taken up again after any activity.
            poll_wakes: PollWakes::AnyActivity,
        }
    }
}

impl From<RwdV8> for Rwd {
    fn from(v8: RwdV8) -> Rwd {
        let RwdV8 { v7, poll_wakes } = v8;
        let RwdV7 {
            v6,
            signature_naming,
            step_rules,
            hang_steps,
        } = v7;
        let RwdV6 { v5, sites_at } = v6;
        let RwdV5 { v4, oracle } = v5;
        let RwdV4 { v3, stats } = v4;
        let RwdV3 { v1, sync_points } = v3;
        Rwd {
            monitor: v1.monitor,
            cpu_model: v1.cpu_model,
            target: v1.target,
            blobs: v1.blobs,
            files: v1.files,
            schedule: v1.schedule,
            expected: v1.expected,
            trace: v1.trace,
            story: v1.story,
            sync_points,
            stats,
            oracle,
            sites_at,
            signature_naming,
            step_rules,
            hang_steps,
            poll_wakes,
            // Before version 10 a run succeeded by exiting with 0 alone.
            ok_codes: vec![0],
        }
    }
}

/// What was run, and how.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// The program's path as the guest saw it.
    pub exe: String,
    pub argv: Vec<String>,
    pub env: Vec<String>,
    pub cwd: String,
    pub cpus: u32,
    pub seed: u64,
    pub epoch: u64,
    pub max_steps: u64,
    pub memory_mib: u64,
    pub timeout_ms: u64,
    /// Whether the pthread shim was preloaded.
    pub shim: bool,
}

/// One file's contents, named by the xxh3-128 hash of its bytes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Blob {
    pub hash: u128,
    #[serde(with = "bytes")]
    pub data: Vec<u8>,
}

/// A path the run looked up, and what it was.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Absolute and normalized: no `.`, `..` or empty components.
    pub path: String,
    /// Whether the lookup followed a final symlink (`stat`) or not (`lstat`).
    pub follow: bool,
    pub node: WireNode,
}

/// What a path was.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum WireNode {
    File {
        /// The hash of a [`Blob`].
        content: u128,
        mode: u32,
    },
    Dir {
        mode: u32,
        /// The listing, when the guest listed it.
        entries: Option<Vec<(String, WireKind)>>,
    },
    Symlink {
        target: String,
    },
    Missing,
    /// Left out by `--exclude-files` (version 3): a replay reads it from
    /// its own host.
    Host,
    /// A regular file the run only looked at (`stat`, `access`), never
    /// read (version 6): its size and mode, no contents.
    Unread {
        size: u64,
        mode: u32,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireKind {
    File,
    Dir,
    Symlink,
}

/// The schedule: the decisions that differ from the default policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WireSchedule {
    pub origin: String,
    /// `(step, thread)`, strictly increasing in step.
    pub decisions: Vec<(u64, u32)>,
}

/// How the run ended, and what identifies it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Expected {
    pub outcome: WireOutcome,
    pub signature: Signature,
    pub steps: u64,
    /// The hash over every step (`RunReport::trace_hash`).
    pub trace_hash: u64,
    pub potential_deadlocks: Vec<Vec<WireEdge>>,
    /// Steps at which two or more threads could run.
    pub decision_points: u64,
}

/// The engine's `Outcome`, externally tagged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum WireOutcome {
    Exited {
        code: i32,
    },
    Crashed {
        signal: String,
        signo: u32,
        fault_addr: Option<u64>,
        thread: u32,
        rip: u64,
    },
    Deadlocked {
        threads: Vec<WireBlocked>,
        cycle: Vec<u32>,
    },
    Hung {
        /// 0: the step limit; 1: the wall-clock timeout; 2: no progress
        /// (version 7).
        reason: u8,
        thread: u32,
        rip: u64,
    },
    Unsupported {
        syscall: String,
        nr: u64,
        thread: u32,
        rip: u64,
        detail: String,
    },
    /// Version 4.
    OutOfMemory {
        memory_mib: u64,
        thread: u32,
        rip: u64,
    },
    /// Version 5.
    WrongOutput {
        code: i32,
        oracle: String,
        difference: String,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WireBlocked {
    pub thread: u32,
    pub name: String,
    pub waits_on: String,
    pub object: Option<u64>,
    pub rip: u64,
    pub lock: Option<u64>,
    pub site: Option<u64>,
    pub holder: Option<u32>,
    pub holder_site: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WireEdge {
    pub from: u64,
    pub to: u64,
    pub thread: u32,
    pub from_site: u64,
    pub to_site: u64,
    pub gates: Vec<u64>,
}

/// Enough of the run's steps to say where a replay parted from it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceRecord {
    /// Steps per digest: 1 unless the run was longer than
    /// [`MAX_DIGESTS`] steps.
    pub digest_block: u64,
    /// For each block of steps, 32 bits of the xxh3 of its events.
    pub digests: Vec<u32>,
    /// The last events of the run (all of them, up to [`MAX_EVENTS`]).
    pub events: Vec<WireEvent>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireEvent {
    pub step: u64,
    pub thread: u32,
    pub op: WireOp,
    pub object: Option<u64>,
    pub site: u64,
    pub result: Option<i64>,
    pub value: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireOp {
    /// A system call by number.
    Syscall(u64),
    /// A pthread operation reported by the shim (`abi::HintOp` number).
    Hint(u64),
    /// A sync site (`code::SiteKind` number, version 2).
    Sync(u8),
}

/// What `show` needs beyond the outcome: names and places.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Story {
    /// Thread ids and names.
    pub threads: Vec<(u32, String)>,
    /// The guest's file mappings at the end of the run.
    pub mappings: Vec<WireMapping>,
    /// For a crash: the faulting instruction and the return addresses above.
    pub backtrace: Vec<u64>,
    /// The end of the program's output.
    #[serde(with = "bytes")]
    pub stdout: Vec<u8>,
    #[serde(with = "bytes")]
    pub stderr: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WireMapping {
    pub start: u64,
    pub end: u64,
    pub file_offset: u64,
    pub path: String,
    /// The hash of the [`Blob`] mapped.
    pub content: u128,
}

/// Byte strings as bincode's length-prefixed bytes, decoded by borrowing
/// from the payload (so a declared length is checked against the bytes
/// really there before anything is allocated).
mod bytes {
    use serde::de::{Deserializer, Error, Visitor};
    use serde::{Serialize, Serializer};

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        serde::Serialize::serialize(&Bytes(v), s)
    }

    struct Bytes<'a>(&'a [u8]);

    impl Serialize for Bytes<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(self.0)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Vec<u8>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("bytes")
            }
            fn visit_borrowed_bytes<E: Error>(self, v: &'de [u8]) -> Result<Vec<u8>, E> {
                Ok(v.to_vec())
            }
            fn visit_bytes<E: Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
                Ok(v.to_vec())
            }
            fn visit_byte_buf<E: Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
                Ok(v)
            }
        }
        d.deserialize_bytes(V)
    }
}

/// Why a file is not a reproducer this code can use. Every message is one
/// line saying what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum RwdError {
    #[error("cannot read {0}: {1}")]
    Read(String, std::io::Error),
    #[error("cannot write {0}: {1}")]
    Write(String, std::io::Error),
    #[error("{0} is truncated: {1} bytes, less than the {HEADER_LEN}-byte header of a reproducer")]
    Short(String, usize),
    #[error("{0} is not a rewind-fuzz reproducer (it does not start with \"RWD\\0\")")]
    Magic(String),
    #[error(
        "{0} has format version {1}; this rewind-fuzz reads versions 1 to {VERSION}: use the rewind-fuzz that wrote it, or a newer one"
    )]
    Version(String, u32),
    #[error("{0} declares a payload of {1} bytes, more than the limit of {MAX_PAYLOAD} bytes")]
    TooLarge(String, u64),
    #[error(
        "cannot write {0}: its payload would be {1} bytes, more than the {MAX_PAYLOAD} a reader accepts; keep large files out with --exclude-files"
    )]
    TooLargeToWrite(String, u64),
    #[error("{0} is corrupt or truncated: {1}")]
    Corrupt(String, Corrupt),
    #[error("{0} is not a valid reproducer: {1}")]
    Invalid(String, Invalid),
}

/// How a reproducer's payload fails to decode.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Corrupt {
    #[error("{0}")]
    Compression(String),
    #[error("the compressed payload does not decode ({0})")]
    Decompression(String),
    #[error("the payload is {got} bytes, not the {declared} its header declares")]
    Length { got: u64, declared: u64 },
    #[error("decoding it would need more than {0} MiB of memory, the limit")]
    Memory(usize),
    #[error("the payload does not decode ({0})")]
    Payload(String),
    #[error("{0} bytes follow the payload")]
    Trailing(usize),
}

/// What makes a reproducer impossible beyond what its types say: each is
/// refused at reading, so nothing downstream meets it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    #[error("{0} is longer than {MAX_PATH} bytes")]
    PathTooLong(&'static str),
    #[error("{what} {path:?} {why}")]
    Path {
        what: &'static str,
        path: String,
        why: PathFault,
    },
    #[error("the program has no argv[0]")]
    NoArgv0,
    #[error("an argument or environment string contains NUL")]
    NulString,
    #[error("--cpus {0} is outside 1..=1024")]
    Cpus(u32),
    #[error("guest memory of {0} MiB is outside 16..=65536")]
    Memory(u64),
    #[error("the step limit and the timeout must be positive")]
    ZeroLimit,
    #[error("a file's contents do not match their hash {0:032x}")]
    ContentsHash(u128),
    #[error("the file {0:?} is recorded twice")]
    RecordedTwice(String),
    #[error("the file {0:?} names contents it lacks")]
    ContentsMissing(String),
    #[error("file mode {0:#o} has bits beyond 0o7777")]
    Mode(u32),
    #[error("the directory {dir:?} lists a bad entry name {name:?}")]
    EntryName { dir: String, name: String },
    #[error("the symlink {0:?} has a bad target")]
    SymlinkTarget(String),
    #[error("it does not hold the program itself")]
    NoProgram,
    #[error("the schedule's decisions are not in step order")]
    DecisionOrder,
    #[error("the step digests do not cover the run's steps")]
    Digests,
    #[error("it holds more events than a reproducer keeps")]
    TooManyEvents,
    #[error("an event names an unknown pthread operation {0}")]
    HintOp(u64),
    #[error("an event names an unknown kind of sync site {0}")]
    SiteKind(u8),
    #[error("an event lies outside the run's steps")]
    EventStep,
    #[error("unknown reason {0} for a hung run")]
    HungReason(u8),
    #[error("the mapping of {0:?} is inconsistent")]
    Mapping(String),
    #[error("it calls {0} exit codes success (1 to {MAX_OK_CODES} make sense)")]
    OkCodes(usize),
}

/// What is wrong with a recorded path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PathFault {
    #[error("is not absolute")]
    NotAbsolute,
    #[error("contains NUL")]
    Nul,
    #[error("has an empty, '.' or '..' component")]
    Component,
}

/// The bincode configuration of the payload, with a limit on what one
/// declared length may claim.
fn config<const N: usize>() -> bincode::config::Configuration<
    bincode::config::LittleEndian,
    bincode::config::Varint,
    bincode::config::Limit<N>,
> {
    bincode::config::standard().with_limit::<N>()
}

impl Rwd {
    /// The whole file: header and compressed payload.
    pub fn encode(&self) -> Vec<u8> {
        let payload = bincode::serde::encode_to_vec(self, bincode::config::standard())
            .expect("a reproducer always encodes");
        frame(VERSION, &payload)
    }
}

/// A file of format `version` holding `payload`: the header, then the
/// payload compressed.
fn frame(version: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len() / 3);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    let mut enc = zstd::stream::Encoder::new(out, 9).expect("zstd encoder");
    enc.include_checksum(true).expect("zstd parameter");
    enc.include_contentsize(true).expect("zstd parameter");
    enc.set_pledged_src_size(Some(payload.len() as u64))
        .expect("zstd parameter");
    std::io::Write::write_all(&mut enc, payload).expect("compressing in memory");
    enc.finish().expect("compressing in memory")
}

impl Rwd {
    /// Who may read it and every file told from it (story, schedule,
    /// minimized reproducer): only its owner when it holds files only their
    /// owner could read ([`Rwd::private_files`]), or when files were kept
    /// out of it (`--exclude-files`, `excluding`: what the program printed
    /// may still hold their bytes); everyone otherwise.
    pub fn readers(&self, excluding: bool) -> crate::fsutil::Readers {
        let left_out = self.files.iter().any(|f| matches!(f.node, WireNode::Host));
        if excluding || left_out || !self.private_files().is_empty() {
            crate::fsutil::Readers::Owner
        } else {
            crate::fsutil::Readers::Everyone
        }
    }

    /// Writes the file atomically, for [`Rwd::readers`] (without
    /// exclusions asked for).
    pub fn save(&self, path: &std::path::Path) -> Result<(), RwdError> {
        self.save_as(path, self.readers(false))
    }

    /// Writes the file atomically for `readers`. A payload no reader would
    /// accept is refused.
    pub fn save_as(
        &self,
        path: &std::path::Path,
        readers: crate::fsutil::Readers,
    ) -> Result<(), RwdError> {
        let name = path.display().to_string();
        let data = self.encode();
        let declared = u64::from_le_bytes(data[8..16].try_into().expect("the header is written"));
        if declared > MAX_PAYLOAD {
            return Err(RwdError::TooLargeToWrite(name, declared));
        }
        crate::fsutil::write_atomically_as(path, &data, readers)
            .map_err(|e| RwdError::Write(name, e))
    }

    /// The embedded files that were not readable by everyone on the host
    /// they came from (a reproducer holding them is written 0600).
    pub fn private_files(&self) -> Vec<&str> {
        self.files
            .iter()
            .filter(|f| matches!(f.node, WireNode::File { mode, .. } if mode & 0o004 == 0))
            .map(|f| f.path.as_str())
            .collect()
    }

    /// A copy to tell the story from, never to run: every string escaped
    /// for a terminal ([`crate::escape::line`]), so that names, paths and
    /// messages in a hostile file can neither send escape sequences nor
    /// forge lines. The same path escapes the same way everywhere, so
    /// lookups by path within the copy still agree.
    pub fn for_display(&self) -> Rwd {
        fn esc(s: &mut String) {
            if let std::borrow::Cow::Owned(e) = crate::escape::line(s) {
                *s = e;
            }
        }
        let mut r = self.clone();
        for s in [&mut r.monitor, &mut r.cpu_model, &mut r.schedule.origin] {
            esc(s);
        }
        let t = &mut r.target;
        esc(&mut t.exe);
        esc(&mut t.cwd);
        t.argv.iter_mut().chain(t.env.iter_mut()).for_each(esc);
        for f in &mut r.files {
            esc(&mut f.path);
            match &mut f.node {
                WireNode::Symlink { target } => esc(target),
                WireNode::Dir {
                    entries: Some(entries),
                    ..
                } => entries.iter_mut().for_each(|(name, _)| esc(name)),
                _ => {}
            }
        }
        let sig = &mut r.expected.signature;
        esc(&mut sig.kind);
        sig.sites.iter_mut().for_each(esc);
        match &mut r.expected.outcome {
            WireOutcome::Crashed { signal, .. } => esc(signal),
            WireOutcome::Deadlocked { threads, .. } => {
                for b in threads {
                    esc(&mut b.name);
                    esc(&mut b.waits_on);
                }
            }
            WireOutcome::Unsupported {
                syscall, detail, ..
            } => {
                esc(syscall);
                esc(detail);
            }
            WireOutcome::WrongOutput {
                oracle, difference, ..
            } => {
                esc(oracle);
                esc(difference);
            }
            WireOutcome::Exited { .. }
            | WireOutcome::Hung { .. }
            | WireOutcome::OutOfMemory { .. } => {}
        }
        if let Some(WireOracle::Command(c)) = &mut r.oracle {
            esc(c);
        }
        r.story.threads.iter_mut().for_each(|(_, name)| esc(name));
        r.story.mappings.iter_mut().for_each(|m| esc(&mut m.path));
        r
    }

    /// What to tell the user when [`Rwd::readers`] made `path` 0600.
    pub fn privacy_note(&self, path: &std::path::Path, excluding: bool) -> Option<String> {
        let private = self.private_files();
        let Some(first) = private.first() else {
            return (self.readers(excluding) == crate::fsutil::Readers::Owner).then(|| {
                format!(
                    "{} and the files beside it are readable only by you (mode 0600): files were kept out with --exclude-files, and what the program printed may still hold their bytes",
                    path.display()
                )
            });
        };
        Some(format!(
            "{} holds {} file(s) only their owner could read ({first}{}), so only you can read it (mode 0600)",
            path.display(),
            private.len(),
            if private.len() > 1 { ", ..." } else { "" }
        ))
    }

    /// Reads and checks a file (a regular file, not larger than a payload
    /// could compress to).
    pub fn load(path: &std::path::Path) -> Result<Rwd, RwdError> {
        let name = path.display().to_string();
        let data = crate::fsutil::read_foreign(path, MAX_FILE)
            .map_err(|e| RwdError::Read(name.clone(), e))?;
        Self::decode(&name, &data)
    }

    /// Whether `data` starts like a reproducer (to tell one from a schedule).
    pub fn looks_like(data: &[u8]) -> bool {
        data.starts_with(&MAGIC)
    }

    /// Decodes and checks a file's bytes; `name` is for messages.
    pub fn decode(name: &str, data: &[u8]) -> Result<Rwd, RwdError> {
        let corrupt = |c: Corrupt| RwdError::Corrupt(name.into(), c);
        if data.len() < MAGIC.len() || !data.starts_with(&MAGIC) {
            if MAGIC.starts_with(data) && !data.is_empty() {
                return Err(RwdError::Short(name.into(), data.len()));
            }
            return Err(RwdError::Magic(name.into()));
        }
        if data.len() < HEADER_LEN {
            return Err(RwdError::Short(name.into(), data.len()));
        }
        let version = u32::from_le_bytes(data[4..8].try_into().unwrap());
        if !(1..=VERSION).contains(&version) {
            return Err(RwdError::Version(name.into(), version));
        }
        let declared = u64::from_le_bytes(data[8..16].try_into().unwrap());
        if declared > MAX_PAYLOAD {
            return Err(RwdError::TooLarge(name.into(), declared));
        }
        let payload = decompress(&data[HEADER_LEN..], declared).map_err(corrupt)?;
        let from_v7 = |v7: RwdV7| Rwd::from(RwdV8::from(v7));
        let rwd = match version {
            1 => decode_payload::<RwdV1>(&payload).map(|v| {
                from_v7(RwdV7::from(RwdV6::from(RwdV5::from(RwdV4::from(
                    RwdV3::from(v),
                )))))
            }),
            2 | 3 => decode_payload::<RwdV3>(&payload)
                .map(|v| from_v7(RwdV7::from(RwdV6::from(RwdV5::from(RwdV4::from(v)))))),
            4 => decode_payload::<RwdV4>(&payload)
                .map(|v| from_v7(RwdV7::from(RwdV6::from(RwdV5::from(v))))),
            5 => decode_payload::<RwdV5>(&payload).map(|v| from_v7(RwdV7::from(RwdV6::from(v)))),
            6 => decode_payload::<RwdV6>(&payload).map(|v| from_v7(RwdV7::from(v))),
            7 => decode_payload::<RwdV7>(&payload).map(from_v7),
            8 | 9 => decode_payload::<RwdV8>(&payload).map(Rwd::from),
            _ => decode_payload::<Rwd>(&payload),
        }
        .map_err(corrupt)?;
        rwd.validate()
            .map_err(|m| RwdError::Invalid(name.into(), m))?;
        Ok(rwd)
    }

    /// Checks what the types cannot: paths, references, orders and ranges.
    pub fn validate(&self) -> Result<(), Invalid> {
        let t = &self.target;
        check_path("the program's path", &t.exe)?;
        check_path("the working directory", &t.cwd)?;
        if t.argv.is_empty() {
            return Err(Invalid::NoArgv0);
        }
        for s in t.argv.iter().chain(&t.env) {
            if s.contains('\0') {
                return Err(Invalid::NulString);
            }
        }
        if !(1..=1024).contains(&t.cpus) {
            return Err(Invalid::Cpus(t.cpus));
        }
        if !(16..=65536).contains(&t.memory_mib) {
            return Err(Invalid::Memory(t.memory_mib));
        }
        if t.max_steps == 0 || t.timeout_ms == 0 {
            return Err(Invalid::ZeroLimit);
        }
        let mut hashes = std::collections::BTreeSet::new();
        for b in &self.blobs {
            if xxhash_rust::xxh3::xxh3_128(&b.data) != b.hash {
                return Err(Invalid::ContentsHash(b.hash));
            }
            hashes.insert(b.hash);
        }
        let mut seen = std::collections::BTreeSet::new();
        for f in &self.files {
            check_path("a recorded file", &f.path)?;
            if !seen.insert((&f.path, f.follow)) {
                return Err(Invalid::RecordedTwice(f.path.clone()));
            }
            match &f.node {
                WireNode::File { content, mode } => {
                    if !hashes.contains(content) {
                        return Err(Invalid::ContentsMissing(f.path.clone()));
                    }
                    check_mode(*mode)?;
                }
                WireNode::Dir { mode, entries } => {
                    check_mode(*mode)?;
                    for (n, _) in entries.iter().flatten() {
                        if !entry_name_ok(n) {
                            return Err(Invalid::EntryName {
                                dir: f.path.clone(),
                                name: n.clone(),
                            });
                        }
                    }
                }
                WireNode::Symlink { target } => {
                    if target.is_empty() || target.len() > MAX_PATH || target.contains('\0') {
                        return Err(Invalid::SymlinkTarget(f.path.clone()));
                    }
                }
                WireNode::Unread { mode, .. } => check_mode(*mode)?,
                WireNode::Missing | WireNode::Host => {}
            }
        }
        if !self
            .files
            .iter()
            .any(|f| f.path == t.exe && matches!(f.node, WireNode::File { .. }))
        {
            return Err(Invalid::NoProgram);
        }
        let d = &self.schedule.decisions;
        if d.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(Invalid::DecisionOrder);
        }
        let tr = &self.trace;
        if tr.digest_block == 0
            || tr.digests.len() > MAX_DIGESTS
            || tr.digests.len() as u64 > self.expected.steps.div_ceil(tr.digest_block)
        {
            return Err(Invalid::Digests);
        }
        if tr.events.len() > MAX_EVENTS {
            return Err(Invalid::TooManyEvents);
        }
        for e in &tr.events {
            match e.op {
                WireOp::Hint(op) if HintOp::from_u64(op).is_none() => {
                    return Err(Invalid::HintOp(op));
                }
                WireOp::Sync(k) if SiteKind::from_u8(k).is_none() => {
                    return Err(Invalid::SiteKind(k));
                }
                _ => {}
            }
            if e.step == 0 || e.step > self.expected.steps {
                return Err(Invalid::EventStep);
            }
        }
        if let WireOutcome::Hung { reason, .. } = self.expected.outcome {
            if reason > 2 {
                return Err(Invalid::HungReason(reason));
            }
        }
        for m in &self.story.mappings {
            if m.start >= m.end || !hashes.contains(&m.content) {
                return Err(Invalid::Mapping(m.path.clone()));
            }
        }
        if self.ok_codes.is_empty() || self.ok_codes.len() > MAX_OK_CODES {
            return Err(Invalid::OkCodes(self.ok_codes.len()));
        }
        Ok(())
    }

    /// The recorded files, as the file source of a run takes them.
    pub fn file_nodes(&self) -> BTreeMap<String, HostNode> {
        let blobs: BTreeMap<u128, Arc<Vec<u8>>> = self
            .blobs
            .iter()
            .map(|b| (b.hash, Arc::new(b.data.clone())))
            .collect();
        self.files
            .iter()
            .map(|f| {
                let key = if f.follow {
                    f.path.clone()
                } else {
                    format!("{}\0nofollow", f.path)
                };
                let node = match &f.node {
                    // Validation makes sure the contents are there.
                    WireNode::File { content, mode } => match blobs.get(content) {
                        Some(data) => HostNode::File {
                            data: Some(data.clone()),
                            size: data.len() as u64,
                            mode: *mode,
                        },
                        None => HostNode::Missing,
                    },
                    WireNode::Unread { size, mode } => HostNode::File {
                        data: None,
                        size: *size,
                        mode: *mode,
                    },
                    WireNode::Dir { mode, entries } => HostNode::Dir {
                        mode: *mode,
                        entries: entries.as_ref().map(|e| {
                            e.iter()
                                .map(|(n, k)| (n.clone(), k.to_node_kind()))
                                .collect()
                        }),
                    },
                    WireNode::Symlink { target } => HostNode::Symlink {
                        target: target.clone(),
                    },
                    WireNode::Missing | WireNode::Host => HostNode::Missing,
                };
                (key, node)
            })
            .filter(|(key, _)| !self.host_keys().contains(key))
            .collect()
    }

    /// The recorded metadata, by the keys of [`Rwd::file_nodes`].
    pub fn file_stats(&self) -> BTreeMap<String, HostStat> {
        self.stats
            .iter()
            .map(|f| {
                let key = if f.follow {
                    f.path.clone()
                } else {
                    format!("{}\0nofollow", f.path)
                };
                (key, f.stat)
            })
            .collect()
    }

    /// The lookups left out of the reproducer (`--exclude-files`), which a
    /// replay makes on its own host: keys as in [`Rwd::file_nodes`].
    pub fn host_keys(&self) -> std::collections::BTreeSet<String> {
        self.files
            .iter()
            .filter(|f| matches!(f.node, WireNode::Host))
            .map(|f| {
                if f.follow {
                    f.path.clone()
                } else {
                    format!("{}\0nofollow", f.path)
                }
            })
            .collect()
    }

    /// The blob with this hash.
    pub fn blob(&self, hash: u128) -> Option<&[u8]> {
        self.blobs
            .iter()
            .find(|b| b.hash == hash)
            .map(|b| &b.data[..])
    }

    /// The schedule, as the engine replays it.
    pub fn schedule(&self) -> Schedule {
        let s = Schedule::new(
            self.schedule.origin.clone(),
            self.schedule
                .decisions
                .iter()
                .map(|(step, thread)| Decision {
                    step: *step,
                    thread: *thread,
                })
                .collect(),
        );
        Schedule {
            sync_points: self.sync_points,
            version: crate::sched::schedule_version_for(
                self.step_rules,
                self.poll_wakes == PollWakes::AnyActivity,
            ),
            ..s
        }
    }

    /// The expected outcome, as the engine reports it.
    pub fn outcome(&self) -> Outcome {
        self.expected.outcome.to_outcome()
    }

    /// The expected lock-order cycles.
    pub fn potential_deadlocks(&self) -> Vec<Inversion> {
        self.expected
            .potential_deadlocks
            .iter()
            .map(|edges| Inversion {
                edges: edges.iter().map(WireEdge::to_edge).collect(),
            })
            .collect()
    }

    /// The recorded events, as the engine records them.
    pub fn events(&self) -> Vec<Event> {
        self.trace.events.iter().map(WireEvent::to_event).collect()
    }

    /// The recorded trace hash as the engine prints it.
    pub fn trace_hash_hex(&self) -> String {
        format!("{:016x}", self.expected.trace_hash)
    }
}

/// Whether the format can hold `p` as a recorded path.
pub fn check_path_ok(p: &str) -> Result<(), Invalid> {
    check_path("the path", p)
}

/// Whether the format can hold `n` as a directory entry's name.
pub fn entry_name_ok(n: &str) -> bool {
    !(n.is_empty() || n.len() > MAX_NAME || n == "." || n == ".." || n.contains(['/', '\0']))
}

fn check_path(what: &'static str, p: &str) -> Result<(), Invalid> {
    let bad = |why: PathFault| {
        Err(Invalid::Path {
            what,
            path: p.to_string(),
            why,
        })
    };
    if p.len() > MAX_PATH {
        return Err(Invalid::PathTooLong(what));
    }
    if !p.starts_with('/') {
        return bad(PathFault::NotAbsolute);
    }
    if p.contains('\0') {
        return bad(PathFault::Nul);
    }
    if p != "/"
        && p[1..]
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return bad(PathFault::Component);
    }
    Ok(())
}

fn check_mode(mode: u32) -> Result<(), Invalid> {
    if mode > 0o7777 {
        return Err(Invalid::Mode(mode));
    }
    Ok(())
}

/// Decompresses at most `declared` bytes, refusing anything else: the
/// declared length is checked before, and never trusted for allocation.
fn decompress(data: &[u8], declared: u64) -> Result<Vec<u8>, Corrupt> {
    use std::io::Read;
    let dec = zstd::stream::Decoder::with_buffer(data)
        .map_err(|e| Corrupt::Compression(e.to_string()))?;
    let mut out = Vec::with_capacity(declared.min(64 << 20) as usize);
    dec.take(declared + 1)
        .read_to_end(&mut out)
        .map_err(|e| Corrupt::Decompression(e.to_string()))?;
    if out.len() as u64 != declared {
        return Err(Corrupt::Length {
            got: out.len() as u64,
            declared,
        });
    }
    Ok(out)
}

/// Decodes the payload within a budget for what it may allocate: a power
/// of two of at least eight times its size (and 64 MiB), at most
/// [`MAX_DECODED`]. No declared length can claim more, so a hostile length
/// is an error before anything is allocated for it.
fn decode_payload<T: for<'de> Deserialize<'de>>(p: &[u8]) -> Result<T, Corrupt> {
    fn with<T: for<'de> Deserialize<'de>, const N: usize>(p: &[u8]) -> Result<T, Corrupt> {
        let (rwd, used): (T, usize) = bincode::serde::borrow_decode_from_slice(p, config::<N>())
            .map_err(|e| match e {
                bincode::error::DecodeError::LimitExceeded => Corrupt::Memory(N >> 20),
                e => Corrupt::Payload(e.to_string()),
            })?;
        if used != p.len() {
            return Err(Corrupt::Trailing(p.len() - used));
        }
        Ok(rwd)
    }
    let need = p.len().saturating_mul(8);
    macro_rules! tiers {
        ($($bits:literal),*) => {
            $(if need <= 1usize << $bits {
                return with::<T, { 1usize << $bits }>(p);
            })*
        };
    }
    tiers!(26, 27);
    with::<T, MAX_DECODED>(p)
}

impl WireKind {
    fn to_node_kind(self) -> NodeKind {
        match self {
            WireKind::File => NodeKind::File,
            WireKind::Dir => NodeKind::Dir,
            WireKind::Symlink => NodeKind::Symlink,
        }
    }

    pub fn from_node_kind(k: NodeKind) -> Self {
        match k {
            // Host listings name sockets as files; only the overlay has
            // socket nodes, and it is never recorded.
            NodeKind::File | NodeKind::Socket => WireKind::File,
            NodeKind::Dir => WireKind::Dir,
            NodeKind::Symlink => WireKind::Symlink,
        }
    }
}

impl WireOutcome {
    pub fn from_outcome(o: &Outcome) -> Self {
        match o.clone() {
            Outcome::Exited { code } => WireOutcome::Exited { code },
            Outcome::Crashed {
                signal,
                signo,
                fault_addr,
                thread,
                rip,
            } => WireOutcome::Crashed {
                signal,
                signo,
                fault_addr,
                thread,
                rip,
            },
            Outcome::Deadlocked { threads, cycle } => WireOutcome::Deadlocked {
                threads: threads
                    .into_iter()
                    .map(|b| WireBlocked {
                        thread: b.thread.0,
                        name: b.name,
                        waits_on: b.waits_on,
                        object: b.object,
                        rip: b.rip.0,
                        lock: b.lock.map(|a| a.0),
                        site: b.site.map(|a| a.0),
                        holder: b.holder.map(|t| t.0),
                        holder_site: b.holder_site.map(|a| a.0),
                    })
                    .collect(),
                cycle: cycle.into_iter().map(|t| t.0).collect(),
            },
            Outcome::Hung {
                reason,
                thread,
                rip,
            } => WireOutcome::Hung {
                reason: match reason {
                    HungReason::MaxSteps => 0,
                    HungReason::NoProgress => 2,
                },
                thread,
                rip,
            },
            Outcome::TimedOut { thread, rip } => WireOutcome::Hung {
                reason: 1,
                thread,
                rip,
            },
            Outcome::OutOfMemory {
                memory_mib,
                thread,
                rip,
            } => WireOutcome::OutOfMemory {
                memory_mib,
                thread,
                rip,
            },
            Outcome::WrongOutput {
                code,
                oracle,
                difference,
            } => WireOutcome::WrongOutput {
                code,
                oracle,
                difference,
            },
            Outcome::Unsupported {
                syscall,
                nr,
                thread,
                rip,
                detail,
            } => WireOutcome::Unsupported {
                syscall,
                nr,
                thread,
                rip,
                detail,
            },
        }
    }

    pub fn to_outcome(&self) -> Outcome {
        match self.clone() {
            WireOutcome::Exited { code } => Outcome::Exited { code },
            WireOutcome::Crashed {
                signal,
                signo,
                fault_addr,
                thread,
                rip,
            } => Outcome::Crashed {
                signal,
                signo,
                fault_addr,
                thread,
                rip,
            },
            WireOutcome::Deadlocked { threads, cycle } => Outcome::Deadlocked {
                threads: threads
                    .into_iter()
                    .map(|b| BlockedThread {
                        thread: Tid(b.thread),
                        name: b.name,
                        waits_on: b.waits_on,
                        object: b.object,
                        rip: GuestAddr(b.rip),
                        lock: b.lock.map(GuestAddr),
                        site: b.site.map(GuestAddr),
                        holder: b.holder.map(Tid),
                        holder_site: b.holder_site.map(GuestAddr),
                    })
                    .collect(),
                cycle: cycle.into_iter().map(Tid).collect(),
            },
            WireOutcome::Hung {
                reason: reason @ (0 | 2),
                thread,
                rip,
            } => Outcome::Hung {
                reason: match reason {
                    0 => HungReason::MaxSteps,
                    _ => HungReason::NoProgress,
                },
                thread,
                rip,
            },
            WireOutcome::Hung { thread, rip, .. } => Outcome::TimedOut { thread, rip },
            WireOutcome::OutOfMemory {
                memory_mib,
                thread,
                rip,
            } => Outcome::OutOfMemory {
                memory_mib,
                thread,
                rip,
            },
            WireOutcome::WrongOutput {
                code,
                oracle,
                difference,
            } => Outcome::WrongOutput {
                code,
                oracle,
                difference,
            },
            WireOutcome::Unsupported {
                syscall,
                nr,
                thread,
                rip,
                detail,
            } => Outcome::Unsupported {
                syscall,
                nr,
                thread,
                rip,
                detail,
            },
        }
    }
}

impl WireEdge {
    pub fn from_edge(e: &OrderEdge) -> Self {
        WireEdge {
            from: e.from,
            to: e.to,
            thread: e.thread,
            from_site: e.from_site,
            to_site: e.to_site,
            gates: e.gates.clone(),
        }
    }

    fn to_edge(&self) -> OrderEdge {
        OrderEdge {
            from: self.from,
            to: self.to,
            thread: self.thread,
            from_site: self.from_site,
            to_site: self.to_site,
            gates: self.gates.clone(),
        }
    }
}

impl WireEvent {
    pub fn from_event(e: &Event) -> Self {
        WireEvent {
            step: e.step.0,
            thread: e.thread.0,
            op: match e.op {
                Operation::Syscall { nr } => WireOp::Syscall(nr),
                Operation::Hint { op } => WireOp::Hint(op as u64),
                Operation::Sync { site } => WireOp::Sync(site as u8),
            },
            object: e.object,
            site: e.site.0,
            result: e.result,
            value: e.value,
        }
    }

    /// The engine's event (validation made sure hint numbers are known).
    pub fn to_event(&self) -> Event {
        Event {
            step: Step(self.step),
            thread: Tid(self.thread),
            op: match self.op {
                WireOp::Syscall(nr) => Operation::Syscall { nr },
                WireOp::Hint(op) => Operation::Hint {
                    op: HintOp::from_u64(op).unwrap_or(HintOp::Marker),
                },
                WireOp::Sync(k) => Operation::Sync {
                    site: SiteKind::from_u8(k).unwrap_or(SiteKind::AtomicRmw),
                },
            },
            object: self.object,
            site: GuestAddr(self.site),
            result: self.result,
            value: self.value,
        }
    }
}

/// 32 bits of the hash of one block of events: what a replay compares step
/// by step to find where it parted from the recording.
pub fn digest(events: &[Event]) -> u32 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for e in events {
        let w = WireEvent::from_event(e);
        let (kind, nr) = match w.op {
            WireOp::Syscall(n) => (0u64, n),
            WireOp::Hint(n) => (1, n),
            WireOp::Sync(n) => (2, n as u64),
        };
        for v in [
            w.step,
            w.thread as u64,
            kind,
            nr,
            w.object.unwrap_or(u64::MAX),
            w.site,
            w.result.unwrap_or(i64::MIN) as u64,
            w.value,
        ] {
            h.update(&v.to_le_bytes());
        }
    }
    h.digest() as u32
}

/// The digests of a run's events, and the block size used.
pub fn digests(events: &[Event]) -> (u64, Vec<u32>) {
    let block = (events.len().div_ceil(MAX_DIGESTS)).max(1);
    (block as u64, events.chunks(block).map(digest).collect())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A small reproducer with a bit of everything, valid.
    pub fn sample() -> Rwd {
        let exe = b"\x7fELF not really".to_vec();
        let hash = xxhash_rust::xxh3::xxh3_128(&exe);
        let events: Vec<Event> = (1..=3)
            .map(|s| Event {
                step: Step(s),
                thread: Tid(1),
                op: Operation::Syscall { nr: 39 },
                object: None,
                site: GuestAddr(0x1000 + s),
                result: Some(1),
                value: 0,
            })
            .collect();
        let (digest_block, digests) = digests(&events);
        Rwd {
            monitor: "rewind-fuzz test".into(),
            cpu_model: "model".into(),
            target: Target {
                exe: "/bin/prog".into(),
                argv: vec!["/bin/prog".into(), "x".into()],
                env: vec!["A=1".into()],
                cwd: "/".into(),
                cpus: 4,
                seed: 7,
                epoch: 1,
                max_steps: 1000,
                memory_mib: 256,
                timeout_ms: 10_000,
                shim: true,
            },
            blobs: vec![Blob { hash, data: exe }],
            files: vec![
                FileEntry {
                    path: "/bin/prog".into(),
                    follow: true,
                    node: WireNode::File {
                        content: hash,
                        mode: 0o755,
                    },
                },
                FileEntry {
                    path: "/bin".into(),
                    follow: true,
                    node: WireNode::Dir {
                        mode: 0o755,
                        entries: Some(vec![("prog".into(), WireKind::File)]),
                    },
                },
                FileEntry {
                    path: "/lib".into(),
                    follow: false,
                    node: WireNode::Symlink {
                        target: "usr/lib".into(),
                    },
                },
                FileEntry {
                    path: "/etc/none".into(),
                    follow: true,
                    node: WireNode::Missing,
                },
            ],
            schedule: WireSchedule {
                origin: "test".into(),
                decisions: vec![(2, 1)],
            },
            expected: Expected {
                outcome: WireOutcome::Exited { code: 1 },
                signature: Signature::new("exited(1)", Vec::new()),
                steps: 3,
                trace_hash: 0x1234,
                potential_deadlocks: Vec::new(),
                decision_points: 1,
            },
            trace: TraceRecord {
                digest_block,
                digests,
                events: events.iter().map(WireEvent::from_event).collect(),
            },
            story: Story {
                threads: vec![(1, "prog".into())],
                mappings: vec![WireMapping {
                    start: 0x1000,
                    end: 0x2000,
                    file_offset: 0,
                    path: "/bin/prog".into(),
                    content: hash,
                }],
                backtrace: Vec::new(),
                stdout: b"out".to_vec(),
                stderr: Vec::new(),
            },
            sync_points: SyncPoints::Atomics,
            stats: Vec::new(),
            oracle: Some(WireOracle::Stdout(b"sum = 10\n".to_vec())),
            sites_at: SitesAt::ProgramFrame,
            signature_naming: Naming::Program,
            step_rules: StepRules::Format7,
            hang_steps: 200_000,
            poll_wakes: PollWakes::OwnObjects,
            ok_codes: vec![0, 3],
        }
    }

    /// The payload of a file, decompressed.
    fn payload_of(file: &[u8]) -> Vec<u8> {
        zstd::stream::decode_all(&file[HEADER_LEN..]).unwrap()
    }

    /// A file around a payload, with a correct header.
    fn file_of(payload: &[u8]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&2u32.to_le_bytes());
        out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        out.extend(zstd::stream::encode_all(payload, 3).unwrap());
        out
    }

    #[test]
    fn a_reproducer_round_trips_through_its_bytes() {
        let r = sample();
        let bytes = r.encode();
        assert_eq!(&bytes[..4], b"RWD\0");
        let back = Rwd::decode("x.rwd", &bytes).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.file_nodes().len(), 4);
        assert!(back.file_nodes().contains_key("/lib\0nofollow"));
        assert_eq!(back.events().len(), 3);
    }

    #[test]
    fn every_truncation_is_refused_without_a_panic() {
        let bytes = sample().encode();
        for n in 0..bytes.len() {
            let e = Rwd::decode("t.rwd", &bytes[..n]).unwrap_err();
            let msg = e.to_string();
            assert!(!msg.contains('\n'), "{msg}");
            assert!(
                matches!(
                    e,
                    RwdError::Short(..) | RwdError::Magic(..) | RwdError::Corrupt(..)
                ),
                "length {n}: {msg}"
            );
        }
    }

    #[test]
    fn random_byte_flips_are_refused_or_decode_to_a_valid_reproducer() {
        let bytes = sample().encode();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..5000 {
            let mut b = bytes.clone();
            for _ in 0..1 + next() % 4 {
                let i = (next() % b.len() as u64) as usize;
                b[i] ^= 1 << (next() % 8);
            }
            if let Ok(r) = Rwd::decode("f.rwd", &b) {
                r.validate().unwrap();
            }
        }
    }

    #[test]
    fn mutated_payloads_are_refused_or_valid_never_a_panic() {
        // Past zstd's checksum, straight at the bincode decoder.
        let payload = payload_of(&sample().encode());
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..5000 {
            let mut p = payload.clone();
            match next() % 3 {
                0 => {
                    let i = (next() % p.len() as u64) as usize;
                    p[i] = next() as u8;
                }
                1 => {
                    // A huge varint length (0xfd: a u64 follows) somewhere.
                    let i = (next() % p.len() as u64) as usize;
                    p.splice(i..i, [0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]);
                }
                _ => {
                    let n = (next() % p.len() as u64) as usize;
                    p.truncate(n);
                }
            }
            if let Ok(r) = Rwd::decode("m.rwd", &file_of(&p)) {
                r.validate().unwrap();
            }
        }
    }

    #[test]
    fn every_older_version_still_reads() {
        // What an older file holds: everything but the fields added since,
        // which read as their defaults.
        let mut r = sample();
        r.oracle = None;
        r.stats = Vec::new();
        r.sync_points = SyncPoints::Calls;
        r.sites_at = SitesAt::RuntimeCaller;
        r.signature_naming = Naming::FileName;
        r.step_rules = StepRules::Format6;
        r.hang_steps = 0;
        r.poll_wakes = PollWakes::AnyActivity;
        r.ok_codes = vec![0];
        let payload = bincode::serde::encode_to_vec(&r, bincode::config::standard()).unwrap();
        // The trailing fields take a byte each here (the exit codes two:
        // one code, 0): polls on any activity, no hang watch, format-6 step
        // rules, signatures by file name, sites at runtime callers, no
        // oracle, no stats, level 0.
        for (version, cut) in [
            (9, 2),
            (8, 2),
            (7, 3),
            (6, 6),
            (5, 7),
            (4, 8),
            (3, 9),
            (2, 9),
            (1, 10),
        ] {
            let old = frame(version, &payload[..payload.len() - cut]);
            let back =
                Rwd::decode("old", &old).unwrap_or_else(|e| panic!("version {version}: {e}"));
            assert_eq!(back, r, "version {version}");
        }
        // Cut one field too many and the payload is refused, not misread.
        let short = frame(4, &payload[..payload.len() - 9]);
        assert!(Rwd::decode("old", &short).is_err());
    }

    #[test]
    fn wrong_magic_future_versions_and_huge_lengths_are_refused_in_one_line() {
        let good = sample().encode();
        let mut magic = good.clone();
        magic[0] = b'X';
        assert!(matches!(Rwd::decode("a", &magic), Err(RwdError::Magic(_))));
        assert!(matches!(
            Rwd::decode("a", b"{\"version\":1}"),
            Err(RwdError::Magic(_))
        ));
        let mut future = good.clone();
        future[4..8].copy_from_slice(&999u32.to_le_bytes());
        let e = Rwd::decode("a", &future).unwrap_err();
        assert!(matches!(e, RwdError::Version(_, 999)), "{e}");
        let mut huge = good.clone();
        huge[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            Rwd::decode("a", &huge),
            Err(RwdError::TooLarge(..))
        ));
        let mut longer = good.clone();
        let n = u64::from_le_bytes(good[8..16].try_into().unwrap());
        longer[8..16].copy_from_slice(&(n + 1000).to_le_bytes());
        assert!(matches!(
            Rwd::decode("a", &longer),
            Err(RwdError::Corrupt(..))
        ));
    }

    #[test]
    fn hostile_paths_and_dangling_references_are_refused() {
        type Mutation = Box<dyn Fn(&mut Rwd)>;
        type Kind = fn(&Invalid) -> bool;
        // Each hostile change, and the kind of refusal it must get.
        let cases: Vec<(&str, Mutation, Kind)> = vec![
            (
                "dotdot",
                Box::new(|r: &mut Rwd| r.files[1].path = "/bin/../../etc".into()),
                |e| {
                    matches!(
                        e,
                        Invalid::Path {
                            why: PathFault::Component,
                            ..
                        }
                    )
                },
            ),
            (
                "relative",
                Box::new(|r: &mut Rwd| r.files[1].path = "bin".into()),
                |e| {
                    matches!(
                        e,
                        Invalid::Path {
                            why: PathFault::NotAbsolute,
                            ..
                        }
                    )
                },
            ),
            (
                "nul",
                Box::new(|r: &mut Rwd| r.files[1].path = "/bin\0x".into()),
                |e| {
                    matches!(
                        e,
                        Invalid::Path {
                            why: PathFault::Nul,
                            ..
                        }
                    )
                },
            ),
            (
                "long",
                Box::new(|r: &mut Rwd| r.files[1].path = format!("/{}", "a".repeat(5000))),
                |e| matches!(e, Invalid::PathTooLong(_)),
            ),
            (
                "entry",
                Box::new(|r: &mut Rwd| {
                    r.files[1].node = WireNode::Dir {
                        mode: 0o755,
                        entries: Some(vec![("../x".into(), WireKind::File)]),
                    }
                }),
                |e| matches!(e, Invalid::EntryName { .. }),
            ),
            (
                "content",
                Box::new(|r: &mut Rwd| r.blobs[0].data.push(0)),
                |e| matches!(e, Invalid::ContentsHash(_)),
            ),
            (
                "missing-exe",
                Box::new(|r: &mut Rwd| r.target.exe = "/bin/other".into()),
                |e| matches!(e, Invalid::NoProgram),
            ),
            (
                "order",
                Box::new(|r: &mut Rwd| r.schedule.decisions = vec![(5, 1), (2, 1)]),
                |e| matches!(e, Invalid::DecisionOrder),
            ),
            (
                "digests",
                Box::new(|r: &mut Rwd| r.trace.digests.push(0)),
                |e| matches!(e, Invalid::Digests),
            ),
            (
                "hint",
                Box::new(|r: &mut Rwd| r.trace.events[0].op = WireOp::Hint(999)),
                |e| matches!(e, Invalid::HintOp(999)),
            ),
            (
                "mode",
                Box::new(|r: &mut Rwd| {
                    r.files[0].node = WireNode::File {
                        content: r.blobs[0].hash,
                        mode: u32::MAX,
                    }
                }),
                |e| matches!(e, Invalid::Mode(_)),
            ),
        ];
        for (what, mutate, kind) in cases {
            let mut r = sample();
            mutate(&mut r);
            let e = Rwd::decode("h.rwd", &r.encode()).unwrap_err();
            assert!(
                matches!(&e, RwdError::Invalid(_, i) if kind(i)),
                "{what}: {e}"
            );
            assert!(!e.to_string().contains('\n'));
        }
    }
}
