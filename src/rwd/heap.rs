//! Names for objects on the heap: the allocation that holds an address, and
//! where the program made it (`the Mutex<Vec<u32>> in an Arc made at
//! bank.rs:12`).
//!
//! A global variable is named by its symbol and debug information; a lock
//! on the heap has neither. What the program knows it by is where it was
//! made, so the run is replayed once more (a run is a function of its
//! inputs) with breakpoints at the allocator's entry points (`malloc`,
//! `calloc`, `realloc`, `posix_memalign`, `aligned_alloc`, `memalign`,
//! `free`) and at the return of each call: the returned block, its size
//! and the caller's stack, unwound to the program's own frame, are
//! remembered, and each address asked about is named by the last block
//! that held it. The functions inlined at the call say what the block is
//! (an `Arc`, a `Box`, a `Vec`'s buffer) and of which type. Breakpoints
//! never change the run (the debugger's hooks put them in guest memory
//! only while the guest runs); a run too long to replay so (one exit per
//! step) keeps its addresses.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::Rwd;
use crate::code::unwind;
use crate::engine::debug::{Event, Pace};
use crate::engine::{SnapshotAt, Vm};
use crate::ids::Tid;
use crate::report::signature::is_users;
use crate::report::symbols::{Location, Mapping, Symbolizer};
use crate::sched::Replay;

/// Steps a run may have for its heap to be named (a replay with one exit
/// per step and four per allocation).
pub const MAX_STEPS: u64 = 200_000;

/// The allocator's entry points, and what their arguments are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Entry {
    /// `malloc(size)`.
    Malloc,
    /// `calloc(n, size)`.
    Calloc,
    /// `realloc(ptr, size)`.
    Realloc,
    /// `posix_memalign(&ptr, align, size)`: the block is stored at `*ptr`.
    PosixMemalign,
    /// `aligned_alloc(align, size)`, `memalign(align, size)`.
    Aligned,
    /// `free(ptr)`.
    Free,
}

const ENTRIES: [(&str, Entry); 8] = [
    ("malloc", Entry::Malloc),
    ("calloc", Entry::Calloc),
    ("realloc", Entry::Realloc),
    ("posix_memalign", Entry::PosixMemalign),
    ("aligned_alloc", Entry::Aligned),
    ("memalign", Entry::Aligned),
    ("valloc", Entry::Malloc),
    ("free", Entry::Free),
];

/// A call in progress: made by `tid`, returning with `rsp` at `ret_rsp`.
struct Call {
    entry: Entry,
    size: u64,
    /// `posix_memalign`'s out-pointer.
    out: u64,
    frames: Vec<u64>,
}

/// A block the program was given.
struct Block {
    start: u64,
    size: u64,
    /// The caller's stack at the call: return addresses, innermost first.
    frames: Vec<u64>,
    /// Given back with `free` (or moved by `realloc`).
    freed: bool,
}

impl Block {
    fn holds(&self, a: u64) -> bool {
        self.start <= a && a < self.start + self.size.max(1)
    }
}

/// What the replay found: every block made, in order.
#[derive(Default)]
struct Heap {
    blocks: Vec<Block>,
}

/// Names for those of `addrs` that lie in a heap block the run made, by
/// replaying the reproducer; empty when the run is longer than
/// [`MAX_STEPS`] or the replay fails.
pub fn names(rwd: &Rwd, addrs: &[u64]) -> BTreeMap<u64, String> {
    if addrs.is_empty() || rwd.expected.steps > MAX_STEPS {
        return BTreeMap::new();
    }
    let Some((heap, maps)) = replay(rwd) else {
        return BTreeMap::new();
    };
    let exe_object = crate::report::base_name(&rwd.target.exe).to_string();
    let mut sym = Symbolizer::new();
    addrs
        .iter()
        .filter_map(|&a| {
            // The block that still holds it, else the last one that did.
            let mut holding = heap.blocks.iter().rev().filter(|b| b.holds(a));
            let block = heap
                .blocks
                .iter()
                .rev()
                .find(|b| b.holds(a) && !b.freed)
                .or_else(|| holding.next())?;
            Some((a, describe(block, a, &maps, &exe_object, &mut sym)))
        })
        .collect()
}

/// Replays `rwd` watching the allocator; the blocks made and the mappings
/// of the end of the run.
fn replay(rwd: &Rwd) -> Option<(Heap, Vec<Mapping>)> {
    let mut cfg = rwd.run_config();
    cfg.snapshot_at = SnapshotAt::Start;
    cfg.hint_ring = false;
    cfg.stream_output = false;
    let mut vm = Vm::new(&cfg, rwd.source()).ok()?;
    vm.set_strategy(Box::new(Replay::new(rwd.schedule())));
    vm.debug_restart().ok()?;
    let mut heap = Heap::default();
    let mut watch = Watch::default();
    let mut maps = Vec::new();
    let mut resumes = 0u64;
    loop {
        resumes += 1;
        if resumes > MAX_STEPS * 8 {
            return None;
        }
        if watch.refresh(&vm) {
            maps = crate::report::mappings(vm.debug_kernel().mm());
        }
        let event = vm.debug_resume(Pace::Free, &watch.breakpoints).ok()?;
        match event {
            Event::End => break,
            Event::Breakpoint(at) => {
                watch.hit(&vm, at, &maps, &mut heap);
                // Past the instruction the breakpoint stood on.
                if vm.debug_resume(Pace::Instruction, &BTreeSet::new()).ok()? == Event::End {
                    break;
                }
            }
            Event::Step | Event::Instruction | Event::Nothing => {}
        }
    }
    Some((heap, crate::report::mappings(vm.debug_kernel().mm())))
}

/// The breakpoints of one process's allocator and the calls under way.
#[derive(Default)]
struct Watch {
    /// The executable mappings the breakpoints were computed for.
    seen: Vec<(u64, usize)>,
    /// Blocks not given back, by start.
    live: HashMap<u64, usize>,
    entries: HashMap<u64, Entry>,
    /// Return addresses of calls under way, with how many calls wait there.
    returns: HashMap<u64, usize>,
    calls: HashMap<(Tid, u64), Call>,
    breakpoints: BTreeSet<u64>,
}

impl Watch {
    /// Finds the allocator again when the current process's code changed
    /// (the dynamic linker mapped libc, another process runs, an exec);
    /// whether it did.
    fn refresh(&mut self, vm: &Vm) -> bool {
        let mm = vm.debug_kernel().mm();
        let exec: Vec<(u64, usize)> = mm
            .vmas()
            .filter(|v| v.prot.exec)
            .filter_map(|v| match &v.backing {
                crate::memory::Backing::File { data, .. } => {
                    Some((v.start, std::sync::Arc::as_ptr(data) as usize))
                }
                _ => None,
            })
            .collect();
        if exec == self.seen {
            return false;
        }
        self.seen = exec;
        self.entries.clear();
        // The first object defining a function is the one calls reach.
        let mut found: BTreeSet<&str> = BTreeSet::new();
        for m in crate::report::mappings(mm) {
            for (name, entry) in ENTRIES {
                if found.contains(name) {
                    continue;
                }
                if let Some(va) = symbol_address(&m, name) {
                    found.insert(name);
                    self.entries.entry(va).or_insert(entry);
                }
            }
        }
        self.rebuild();
        true
    }

    fn rebuild(&mut self) {
        self.breakpoints = self
            .entries
            .keys()
            .chain(self.returns.keys())
            .copied()
            .collect();
    }

    /// The current thread stands at the breakpoint `at`.
    fn hit(&mut self, vm: &Vm, at: u64, maps: &[Mapping], heap: &mut Heap) {
        let k = vm.debug_kernel();
        let tid = k.current();
        let Some(regs) = k.threads().get(&tid).map(|t| t.regs) else {
            return;
        };
        let read = |a: u64| {
            let mut b = [0u8; 8];
            vm.debug_read(a, &mut b).then(|| u64::from_le_bytes(b))
        };
        if let Some(call) = self.calls.remove(&(tid, regs.rsp)) {
            // A call returns: the return address popped, `%rsp` above it.
            if let Some(n) = self.returns.get_mut(&at) {
                *n -= 1;
                if *n == 0 {
                    self.returns.remove(&at);
                }
            }
            let start = match call.entry {
                Entry::PosixMemalign => (regs.rax == 0).then(|| read(call.out)).flatten(),
                _ => Some(regs.rax),
            };
            if let Some(start) = start.filter(|s| *s != 0) {
                if let Some(old) = self.live.insert(start, heap.blocks.len()) {
                    heap.blocks[old].freed = true;
                }
                heap.blocks.push(Block {
                    start,
                    size: call.size,
                    frames: call.frames,
                    freed: false,
                });
            }
            self.rebuild();
            return;
        }
        let Some(&entry) = self.entries.get(&at) else {
            return;
        };
        let given_back = match entry {
            Entry::Free | Entry::Realloc => regs.rdi,
            _ => 0,
        };
        if let Some(i) = self.live.remove(&given_back) {
            heap.blocks[i].freed = true;
        }
        let (size, out) = match entry {
            Entry::Malloc => (regs.rdi, 0),
            Entry::Calloc => (regs.rdi.saturating_mul(regs.rsi), 0),
            Entry::Realloc => (regs.rsi, 0),
            Entry::PosixMemalign => (regs.rdx, regs.rdi),
            Entry::Aligned => (regs.rsi, 0),
            Entry::Free => return,
        };
        let Some(ret) = read(regs.rsp) else {
            return;
        };
        let frames = unwind::backtrace(
            maps,
            unwind::Regs {
                rip: regs.rip,
                rsp: regs.rsp,
                rbp: regs.rbp,
            },
            &mut |a| read(a),
        );
        self.calls.insert(
            (tid, regs.rsp + 8),
            Call {
                entry,
                size,
                out,
                frames,
            },
        );
        *self.returns.entry(ret).or_default() += 1;
        self.rebuild();
    }
}

/// The address a mapping of an object gives its function `name`, when the
/// mapping holds it.
fn symbol_address(m: &Mapping, name: &str) -> Option<u64> {
    use object::{Object, ObjectSegment, ObjectSymbol};
    let file = object::read::elf::ElfFile64::<object::Endianness>::parse(&m.data[..]).ok()?;
    let sym = file
        .dynamic_symbols()
        .chain(file.symbols())
        .find(|s| s.name() == Ok(name) && s.is_definition() && s.size() > 0)?;
    let seg = file.segments().find(|s| {
        let a = sym.address();
        a >= s.address() && a < s.address() + s.size()
    })?;
    let file_offset = seg.file_range().0 + (sym.address() - seg.address());
    let va = m.start + file_offset.checked_sub(m.file_offset)?;
    (va < m.end).then_some(va)
}

/// `the Mutex<i64> in an Arc made at bank.rs:12`: what holds `addr` in
/// `block`.
fn describe(
    block: &Block,
    addr: u64,
    maps: &[Mapping],
    exe_object: &str,
    sym: &mut Symbolizer,
) -> String {
    // Every function of every frame, inlined ones included, innermost first.
    let chain: Vec<Location> = block
        .frames
        .iter()
        .enumerate()
        .flat_map(|(i, a)| sym.frames(maps, *a, i > 0))
        .collect();
    let users = chain.iter().position(|l| is_users(l, exe_object));
    let (container, element) = users
        .map(|u| container_of(&chain[..u]))
        .unwrap_or((None, None));
    let offset = addr - block.start;
    let what = match (&container, &element, offset) {
        (Some(c), Some(e), _) => format!("the {e} in {c}"),
        (Some(c), None, 0) => c.clone(),
        (Some(c), None, off) => format!("byte {off} of {c}"),
        (None, _, 0) => format!("the {}-byte block", block.size),
        (None, _, off) => format!("byte {off} of the {}-byte block", block.size),
    };
    format!("{what} made at {}", place(&chain[users.unwrap_or(0)]))
}

/// `bank.rs:12`, else the function (`Account::new`), else
/// `libfoo.so+0x123`.
fn place(l: &Location) -> String {
    match (&l.function, &l.file, l.line) {
        (_, Some(file), Some(line)) if line > 0 => {
            format!("{}:{line}", crate::report::base_name(file))
        }
        (Some(f), _, _) => short_function(f),
        _ => l.raw(),
    }
}

/// A function's name without its path and generic arguments:
/// `bank::transfers<Mutex<i64>>` to `transfers`, keeping a method's type
/// (`Account::new`).
fn short_function(f: &str) -> String {
    let segments: Vec<String> = crate::code::sites::acquire::top_level_segments(f)
        .into_iter()
        .map(|s| s.split('<').next().unwrap_or(s).to_string())
        .filter(|s| !s.is_empty())
        .collect();
    match segments.as_slice() {
        [.., ty, method] if ty.starts_with(|c: char| c.is_ascii_uppercase()) => {
            format!("{ty}::{method}")
        }
        [.., last] => last.clone(),
        [] => f.to_string(),
    }
}

/// What the runtime functions between the allocator and the program say
/// the block is: `an Arc`, `a Box`, `a Vec's buffer`, and the type it
/// holds when their names carry it (`Mutex<i64>`). Inlined functions are
/// named without their paths (`new<Mutex<i64>>`): their source files say
/// whose they are.
fn container_of(runtime: &[Location]) -> (Option<String>, Option<String>) {
    const KINDS: [(&str, &str); 9] = [
        ("/alloc/src/sync.rs", "an Arc"),
        ("/alloc/src/rc.rs", "an Rc"),
        ("/alloc/src/boxed.rs", "a Box"),
        ("/alloc/src/raw_vec", "a Vec's buffer"),
        ("/alloc/src/vec/", "a Vec's buffer"),
        ("/alloc/src/collections/", "a collection's node"),
        ("/hashbrown", "a hash table"),
        ("/bits/new_allocator.h", "a container's storage"),
        ("/bits/stl_", "a container's storage"),
    ];
    // The runtime frame nearest the program's says what it asked for.
    for l in runtime.iter().rev() {
        let (Some(f), Some(file)) = (&l.function, &l.file) else {
            continue;
        };
        if let Some((_, kind)) = KINDS.iter().find(|(p, _)| file.contains(p)) {
            return (Some(kind.to_string()), generic_argument(f));
        }
    }
    if runtime.iter().any(|l| {
        l.function
            .as_deref()
            .is_some_and(|f| f.starts_with("operator new"))
    }) {
        return (Some("an object made with new".to_string()), None);
    }
    (None, None)
}

/// The type argument of `Arc<T>::new<Mutex<i64>>` or
/// `Arc<Mutex<i64>>::new`, shortened (`std::sync::poison::mutex::Mutex<i64>`
/// to `Mutex<i64>`), when it is a concrete type.
fn generic_argument(f: &str) -> Option<String> {
    let open = f.find('<')?;
    let mut depth = 0;
    let mut end = None;
    for (i, c) in f[open..].char_indices() {
        match c {
            '<' => depth += 1,
            '>' => {
                depth -= 1;
                if depth == 0 {
                    end = Some(open + i);
                    break;
                }
            }
            _ => {}
        }
    }
    let inner = &f[open + 1..end?];
    let short = shorten_type(inner);
    // lock_api's `Mutex<RawMutex, T>` is the program's `Mutex<T>`.
    let short = short
        .replace("<RawMutex, ", "<")
        .replace("<RawRwLock, ", "<");
    // `T`, `T, A`: generic parameters themselves say nothing.
    let parameters = short
        .split(", ")
        .all(|p| p.len() <= 2 && p.chars().all(|c| c.is_ascii_uppercase()));
    (!parameters).then_some(short)
}

/// `std::sync::poison::mutex::Mutex<alloc::vec::Vec<u32>>` to
/// `Mutex<Vec<u32>>`.
fn shorten_type(t: &str) -> String {
    let mut out = String::new();
    let mut word = String::new();
    for c in t.chars() {
        if c.is_alphanumeric() || c == '_' || c == ':' {
            word.push(c);
        } else {
            out.push_str(word.rsplit("::").next().unwrap_or(&word));
            word.clear();
            out.push(c);
        }
    }
    out.push_str(word.rsplit("::").next().unwrap_or(&word));
    out.replace(", Global", "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_are_shortened_to_what_the_program_wrote() {
        assert_eq!(
            shorten_type(
                "std::sync::poison::mutex::Mutex<alloc::vec::Vec<u32, alloc::alloc::Global>>"
            ),
            "Mutex<Vec<u32>>"
        );
        assert_eq!(
            generic_argument("new<std::sync::poison::mutex::Mutex<i64>>"),
            Some("Mutex<i64>".into())
        );
        assert_eq!(
            generic_argument("new<lock_api::mutex::Mutex<parking_lot::raw_mutex::RawMutex, i64>>"),
            Some("Mutex<i64>".into())
        );
        assert_eq!(generic_argument("alloc::sync::Arc<T, A>::new"), None);
        assert_eq!(short_function("bank::Account::new"), "Account::new");
        assert_eq!(short_function("bank::main"), "main");
        assert_eq!(
            short_function("transfers<lock_api::mutex::Mutex<i64>>"),
            "transfers"
        );
    }
}
