//! The system-call handlers, tested without KVM: a process made with
//! [`Kernel::process`] over plain host memory, a fake FPU, a small file
//! tree served from memory, and tables of (call, arguments, expected
//! result or errno) per family, each row its own test.

mod epoll;
mod file;
mod info;
mod mm;
mod net;
mod pipe;
mod poll;
mod process;
mod pty;
mod signal;
mod stat;
mod thread;
mod time;
mod timer;
mod tree;

use std::collections::BTreeMap;
use std::sync::Arc;

use super::vfs::{FileSource, HostNode, NodeKind};
use super::{FpuAccess, Kernel, KernelConfig, SysResult, table};
use crate::arch::cpu::ExtendedState;
use crate::memory::{Backing, PhysMemory, Placement, Prot};

/// The extended state of the thread "on the CPU", kept in memory.
struct FakeFpu(ExtendedState);

impl FpuAccess for FakeFpu {
    fn save(&mut self) -> ExtendedState {
        self.0.clone()
    }
    fn load(&mut self, s: &ExtendedState) {
        self.0 = s.clone();
    }
}

/// Where the scratch memory for arguments lies in the guest.
const SCRATCH: u64 = 0x1000_0000;
const SCRATCH_SIZE: u64 = 1 << 20;
/// An address nothing is mapped at.
const UNMAPPED: u64 = 0x7000_0000;

/// A process to make system calls on.
struct Bench {
    k: Kernel,
    fpu: FakeFpu,
    /// The next free byte of scratch memory.
    next: u64,
}

/// The host tree the bench serves: a few files, a directory, a symlink.
fn tree() -> BTreeMap<String, HostNode> {
    let file = |s: &str| HostNode::File {
        data: Some(Arc::new(s.as_bytes().to_vec())),
        size: s.len() as u64,
        mode: 0o644,
    };
    let dir = |entries: &[(&str, NodeKind)]| HostNode::Dir {
        mode: 0o755,
        entries: Some(entries.iter().map(|(n, k)| (n.to_string(), *k)).collect()),
    };
    BTreeMap::from([
        (
            "/".to_string(),
            dir(&[("data", NodeKind::Dir), ("tmp", NodeKind::Dir)]),
        ),
        (
            "/data".to_string(),
            dir(&[
                ("hello.txt", NodeKind::File),
                ("sub", NodeKind::Dir),
                ("link", NodeKind::Symlink),
            ]),
        ),
        ("/data/hello.txt".to_string(), file("hello, world\n")),
        ("/data/sub".to_string(), dir(&[])),
        (
            "/data/link".to_string(),
            HostNode::Symlink {
                target: "hello.txt".into(),
            },
        ),
        ("/tmp".to_string(), dir(&[])),
    ])
}

/// The tree as a recording holds it: every path looked up both following
/// symlinks and not (`lstat`), as a host recording would.
fn recording() -> BTreeMap<String, HostNode> {
    let mut nodes = tree();
    for (path, node) in tree() {
        nodes.insert(format!("{path}\0nofollow"), node);
    }
    // Followed, the link is its target.
    nodes.insert("/data/link".into(), nodes["/data/hello.txt"].clone());
    nodes
}

impl Bench {
    fn new() -> Self {
        Self::with(|_| {})
    }

    /// A bench whose kernel's configuration `f` changed.
    fn with(f: impl FnOnce(&mut KernelConfig)) -> Self {
        let mem = Arc::new(PhysMemory::new(64 << 20).expect("64 MiB of host memory"));
        let mut cfg = KernelConfig::new("/data/prog", &[]);
        cfg.cwd = "/data".into();
        f(&mut cfg);
        let mut k =
            Kernel::process(mem, cfg, FileSource::recorded(recording())).expect("a process");
        let mem = k.mem.clone();
        k.mm.map(
            &mem,
            Placement::Fixed(SCRATCH),
            SCRATCH_SIZE,
            Prot::RW,
            Backing::Anon,
            "scratch",
        )
        .expect("scratch memory");
        Bench {
            k,
            fpu: FakeFpu(ExtendedState::initial()),
            next: SCRATCH,
        }
    }

    /// Makes system call `nr` with `args`.
    fn call(&mut self, nr: i64, args: [u64; 6]) -> SysResult {
        let def = table::lookup(nr as u64).expect("an implemented system call");
        (def.handler)(&mut self.k, &mut self.fpu, args)
    }

    /// Makes a call that must return; its value.
    fn ret(&mut self, nr: i64, args: [u64; 6]) -> i64 {
        match self.call(nr, args) {
            SysResult::Ret(v) | SysResult::Yield(v) => v,
            other => panic!("call {nr} did not return: {other:?}"),
        }
    }

    /// `n` bytes of zeroed scratch memory.
    fn buf(&mut self, n: u64) -> u64 {
        let at = self.next;
        self.next = (self.next + n + 15) & !15;
        assert!(self.next <= SCRATCH + SCRATCH_SIZE);
        at
    }

    /// `bytes` in scratch memory.
    fn bytes(&mut self, bytes: &[u8]) -> u64 {
        let at = self.buf(bytes.len() as u64);
        self.k.write(at, bytes).expect("scratch is mapped");
        at
    }

    /// A NUL-terminated string in scratch memory.
    fn str(&mut self, s: &str) -> u64 {
        let mut b = s.as_bytes().to_vec();
        b.push(0);
        self.bytes(&b)
    }

    /// `n` bytes of guest memory at `va`.
    fn read(&mut self, va: u64, n: usize) -> Vec<u8> {
        let mut b = vec![0; n];
        self.k.read(va, &mut b).expect("readable");
        b
    }

    fn u64_at(&mut self, va: u64) -> u64 {
        self.k.read_u64(va).expect("readable")
    }

    /// Opens `path` (which must work) and returns the descriptor.
    fn open(&mut self, path: &str, flags: i32) -> u64 {
        let p = self.str(path);
        let fd = self.ret(
            libc::SYS_openat,
            [(-100i64) as u64, p, flags as u64, 0o644, 0, 0],
        );
        assert!(fd >= 0, "open {path}: {fd}");
        fd as u64
    }
}

/// What a call must do.
#[derive(Debug)]
enum Want {
    /// Return exactly this.
    Ret(i64),
    /// Fail with this errno.
    Err(i32),
    /// Succeed (return zero or more).
    Ok,
    /// Block the thread.
    Blocks,
    /// Return this and give up the processor.
    Yields(i64),
    /// End the run as unsupported: a call (or an option of one) the
    /// monitor does not implement is never answered wrongly.
    Unsupported,
}

fn check(name: &str, got: SysResult, want: Want) {
    let ok = match (&got, &want) {
        (SysResult::Ret(v), Want::Ret(w)) => v == w,
        (SysResult::Ret(v), Want::Err(e)) => *v == -(*e as i64),
        (SysResult::Ret(v), Want::Ok) => *v >= 0,
        (SysResult::Block(_), Want::Blocks) => true,
        (SysResult::Yield(v), Want::Yields(w)) => v == w,
        (SysResult::Unsupported(_), Want::Unsupported) => true,
        _ => false,
    };
    assert!(ok, "{name}: got {got:?}, want {want:?}");
}

/// One test per row: `name: CALL, |bench| [args], WANT` and, optionally,
/// `then |bench| { checks }` after the call.
macro_rules! cases {
    ($($name:ident: $nr:expr, |$b:ident| $args:expr, $want:expr $(, then |$t:ident| $then:expr)?;)*) => {
        $(
            #[test]
            fn $name() {
                let mut bench = super::Bench::new();
                #[allow(unused_variables)]
                let args = {
                    let $b = &mut bench;
                    $args
                };
                let got = bench.call($nr, args);
                super::check(stringify!($name), got, $want);
                $(
                    let $t = &mut bench;
                    $then;
                )?
            }
        )*
    };
}
use cases;
