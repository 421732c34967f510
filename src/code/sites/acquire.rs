//! Which atomics take locks, as the code around them says.
//!
//! A compare-and-swap or an exchange that moves a word from 0 does not make
//! the word a lock: published values, indices, state bits, reference counts
//! and slot flags move from 0 too. What tells a lock's acquisition from
//! those is what the code does when it finds the word taken:
//!
//! - it tries again until it finds the word free: the failing path leads
//!   back to the same instruction, with the same constant expected and new
//!   values and the same address (a test-and-set or compare-and-swap
//!   spinlock, possibly through a read-only spin on the word);
//! - it waits: the failing path calls a function named as a lock's
//!   contended path (`Mutex::lock_contended`, `RawMutex::lock_slow`,
//!   `__lll_lock_wait`) or makes a futex wait;
//! - or the instruction lies in a function named as a lock's acquisition
//!   (`Mutex::lock`, `RwLock::write`, `pthread_mutex_lock`), which is how
//!   unoptimized code looks, where the atomic is a call away from the lock
//!   method (the call chain's names are looked at when the step is taken).
//!
//! The failing path is found from the flag or register the instruction's
//! result is tested with; a site whose result is not tested, or whose
//! failing path neither retries nor waits, gives no evidence.

use std::collections::HashSet;

use iced_x86::{
    ConditionCode, FlowControl, Instruction, InstructionInfoFactory, Mnemonic, OpAccess, OpKind,
    Register, RflagsBits,
};
use serde::{Deserialize, Serialize};

use super::emulate::is_immediate;

/// What an acquisition does to a lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LockRole {
    /// Takes it for the thread alone: a mutex, a spinlock, a write lock.
    Exclusive,
    /// Shares it with other holders: a read lock.
    Shared,
    /// Tries once and goes on if it is taken: a trylock, which never waits.
    Try,
}

/// What a function's name says it does to a lock, for its (mangled or
/// plain) symbol.
pub fn role_of_symbol(symbol: &str) -> Option<LockRole> {
    if let Ok(rust) = rustc_demangle::try_demangle(symbol) {
        // `{:#}` leaves out hashes and crate disambiguators.
        return role_of_path(&format!("{rust:#}"));
    }
    if symbol.starts_with("_Z") {
        let name = cpp_demangle::Symbol::new(symbol)
            .ok()?
            .demangle(&cpp_demangle::DemangleOptions::new().no_params())
            .ok()?;
        // `SpinLock::lock()`: the name without its parameters.
        let name = name.split('(').next().unwrap_or(&name);
        return role_of_path(name);
    }
    role_of_c_name(symbol)
}

/// What a function's demangled name (as debug information and symbolizers
/// give it: `lock_compare`, `SpinLock::lock`, `app::Bank::lock`) says it
/// does to a lock.
pub fn role_of_name(name: &str) -> Option<LockRole> {
    if name.contains("::") {
        role_of_path(name.split('(').next().unwrap_or(name))
    } else {
        role_of_c_name(name)
    }
}

/// Rust and C++ paths: `std::sys::sync::mutex::futex::Mutex::lock`,
/// `<parking_lot::raw_mutex::RawMutex as lock_api::mutex::RawMutex>::lock`.
fn role_of_path(name: &str) -> Option<LockRole> {
    let mut segments = top_level_segments(name);
    // A method's own generic arguments (`lock::<T>`) are a segment of their
    // own.
    while segments.last().is_some_and(|s| s.starts_with('<')) && segments.len() > 2 {
        segments.pop();
    }
    let method = strip_generics(segments.pop()?);
    let owner = segments.pop()?;
    // `<X as Trait>`: the trait says what the method is; `<X>`: X.
    let ty = match owner.strip_prefix('<').and_then(|o| o.strip_suffix('>')) {
        Some(inner) => match split_top_level(inner, " as ") {
            Some((_, tr)) => last_segment(tr),
            None => last_segment(inner),
        },
        None => strip_generics(owner),
    };
    if !is_lock_type(&ty) {
        return None;
    }
    role_of_method(&method)
}

/// Whether a type's name says it is a lock.
fn is_lock_type(ty: &str) -> bool {
    let t = ty.to_ascii_lowercase();
    t.contains("mutex")
        || t.contains("rwlock")
        || t.contains("spinlock")
        || t == "lock"
        || (t.ends_with("lock") && !t.ends_with("block") && !t.ends_with("clock"))
}

/// What a lock's method does: `lock`, `write`, `read`, `try_lock`, their
/// slow paths.
fn role_of_method(method: &str) -> Option<LockRole> {
    const EXCLUSIVE: [&str; 16] = [
        "lock",
        "lock_contended",
        "lock_slow",
        "lock_exclusive",
        "lock_exclusive_slow",
        "lock_upgradable",
        "lock_upgradable_slow",
        "upgradable_read",
        "upgrade",
        "upgrade_slow",
        "write",
        "write_contended",
        "write_slow",
        "lock_fair",
        "spin_lock",
        "acquire",
    ];
    const SHARED: [&str; 7] = [
        "read",
        "read_contended",
        "read_slow",
        "lock_shared",
        "lock_shared_slow",
        "lock_shared_recursive",
        "read_recursive",
    ];
    if let Some(rest) = method.strip_prefix("try_") {
        let locks = EXCLUSIVE.contains(&rest)
            || SHARED.contains(&rest)
            || ["lock", "write", "read", "upgrade"]
                .iter()
                .any(|p| rest.starts_with(p));
        return locks.then_some(LockRole::Try);
    }
    if EXCLUSIVE.contains(&method) {
        Some(LockRole::Exclusive)
    } else if SHARED.contains(&method) {
        Some(LockRole::Shared)
    } else {
        None
    }
}

/// C names: glibc's lock functions and their slow paths, and a program's
/// own `lock`, `spin_lock`, `mutex_lock`, `trylock`.
fn role_of_c_name(name: &str) -> Option<LockRole> {
    let name = name.split('@').next().unwrap_or(name);
    let bare = name.trim_start_matches('_');
    const EXCLUSIVE: [&str; 12] = [
        "pthread_mutex_lock",
        "pthread_mutex_lock_full",
        "pthread_mutex_cond_lock",
        "pthread_mutex_timedlock",
        "pthread_mutex_clocklock",
        "pthread_spin_lock",
        "pthread_rwlock_wrlock",
        "pthread_rwlock_wrlock_full",
        "pthread_rwlock_timedwrlock",
        "lll_lock_wait",
        "lll_lock_wait_private",
        "lll_lock_wait_shared",
    ];
    const SHARED: [&str; 3] = [
        "pthread_rwlock_rdlock",
        "pthread_rwlock_rdlock_full",
        "pthread_rwlock_timedrdlock",
    ];
    if EXCLUSIVE.contains(&bare) {
        return Some(LockRole::Exclusive);
    }
    if SHARED.contains(&bare) {
        return Some(LockRole::Shared);
    }
    if bare.ends_with("trylock") || bare.ends_with("try_lock") {
        return Some(LockRole::Try);
    }
    // A word of its own, last or first: `lock`, `spin_lock`, `ticket_lock`,
    // `lock_exchange`, not `unlock`, `block`, `flock` or `lock_free_push`.
    let mut words = bare.split('_');
    let first = words.next().unwrap_or(bare);
    let second = words.next();
    let last = bare.rsplit('_').next().unwrap_or(bare);
    let leading = first == "lock" && !matches!(second, Some("free" | "less"));
    (last == "lock" || leading).then_some(LockRole::Exclusive)
}

/// `a::b<c::d>::e` split at its top-level `::`.
pub fn top_level_segments(name: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    let bytes = name.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'<' | b'(' | b'[' => depth += 1,
            b'>' | b')' | b']' => depth -= 1,
            b':' if depth == 0 && bytes.get(i + 1) == Some(&b':') => {
                out.push(&name[start..i]);
                start = i + 2;
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    out.push(&name[start..]);
    out
}

/// `a` and `b` of `a<sep>b` where `sep` is at the top level.
fn split_top_level<'a>(s: &'a str, sep: &str) -> Option<(&'a str, &'a str)> {
    let mut depth = 0i32;
    for (i, c) in s.char_indices() {
        match c {
            '<' | '(' | '[' => depth += 1,
            '>' | ')' | ']' => depth -= 1,
            _ if depth == 0 && s[i..].starts_with(sep) => {
                return Some((&s[..i], &s[i + sep.len()..]));
            }
            _ => {}
        }
    }
    None
}

/// The last segment of a path, without generic arguments.
fn last_segment(path: &str) -> String {
    strip_generics(top_level_segments(path).last().copied().unwrap_or(path))
}

/// `Mutex<T>` to `Mutex`.
fn strip_generics(s: &str) -> String {
    s.split('<').next().unwrap_or(s).trim().to_string()
}

/// What a call on a failing path calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Callee {
    /// A function named as a lock's acquisition or contended path.
    Lock(LockRole),
    /// libc's `syscall(2)`: a futex wait when its arguments say so.
    Syscall,
    /// A function that only lets time pass: a yield, a spin hint, a backoff.
    Yield,
    Other,
}

/// Whether a function's name says it only lets time pass (`sched_yield`,
/// `std::thread::yield_now`, `crossbeam_utils::Backoff::snooze`).
pub fn yields(symbol: &str) -> bool {
    let name = match rustc_demangle::try_demangle(symbol) {
        Ok(d) => format!("{d:#}"),
        Err(_) => symbol.to_string(),
    };
    let last = name.rsplit("::").next().unwrap_or(&name);
    [
        "yield",
        "snooze",
        "spin_loop",
        "relax",
        "pause",
        "nanosleep",
        "usleep",
    ]
    .iter()
    .any(|w| last.contains(w))
}

/// The code an analysis reads.
pub trait Code {
    /// The instruction at `va`.
    fn instruction(&self, va: u64) -> Option<Instruction>;
    /// The bounds of the function holding `va`, and what its name says it
    /// does to a lock.
    fn function(&self, va: u64) -> Option<(u64, u64, Option<LockRole>)>;
    /// What a direct call to `target` calls (a function or a PLT entry).
    fn callee(&self, target: u64) -> Callee;
    /// What a call through the pointer at `slot` (a GOT entry) calls.
    fn callee_via(&self, slot: u64) -> Callee;
}

/// Instructions a failing path is followed for, at most.
const PATH_BUDGET: usize = 160;
/// Instructions after the atomic in which its result must be tested.
const TEST_WINDOW: usize = 12;
/// A futex wait: `FUTEX_WAIT` and `FUTEX_WAIT_BITSET`, any flags.
fn is_futex_wait_op(op: u64) -> bool {
    matches!(op & 0x7f, 0 | 9)
}
const SYS_FUTEX: u64 = 202;

/// Where a value lives: a register (by its 64-bit family) or a stack slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Place {
    Reg(Register),
    Slot(Register, i64),
}

/// What a place holds on the failing path, relative to the attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    /// A constant.
    Imm(u64),
    /// What a place the path has not written held at the attempt.
    Same(Place),
    /// The address of a stack slot (`lea disp(%rbp),%r`).
    SlotAddress(Register, i64),
    /// Anything else: loaded, computed.
    Unknown,
}

/// How the atomic's outcome is encoded at a point after it.
#[derive(Clone, Copy, Debug)]
enum Outcome {
    /// The zero flag is set exactly when the acquisition succeeded
    /// (`true`), or exactly when it failed (`false`).
    Zf(bool),
    /// The carry flag, likewise (a bit test-and-set).
    Cf(bool),
    /// Places that are zero exactly when it succeeded (`true`) or failed.
    Zero(Places, bool),
}

/// The places a value is known to be in (a few copies).
#[derive(Clone, Copy, Debug, Default)]
struct Places([Option<Place>; 3]);

impl Places {
    fn one(p: Place) -> Places {
        Places([Some(p), None, None])
    }
    fn contains(&self, p: Place) -> bool {
        self.0.contains(&Some(p))
    }
    fn reg(&self, r: Register) -> bool {
        self.contains(Place::Reg(r))
    }
    fn slot(&self, i: &Instruction) -> bool {
        slot_of(i).is_some_and(|(b, d)| self.contains(Place::Slot(b, d)))
    }
    fn with(mut self, p: Place) -> Places {
        if !self.contains(p) {
            if let Some(free) = self.0.iter_mut().find(|q| q.is_none()) {
                *free = Some(p);
            } else {
                self.0[2] = Some(p);
            }
        }
        self
    }
    fn without(mut self, p: Place) -> Places {
        for q in &mut self.0 {
            if *q == Some(p) {
                *q = None;
            }
        }
        self
    }
    fn is_empty(&self) -> bool {
        self.0.iter().all(Option::is_none)
    }
}

/// The evidence that the atomic `site` takes a lock: the name of the
/// function it is in, or whether its failing path retries it with the
/// same values or waits.
pub fn site_evidence(code: &dyn Code, site: &Instruction) -> Option<LockRole> {
    let function = code.function(site.ip());
    if let Some((_, _, Some(role))) = function {
        return Some(role);
    }
    let mut info = InstructionInfoFactory::new();
    let (fail, tests) = failing_path(code, &mut info, site)?;
    let mut search = Search {
        code,
        info,
        site,
        visited: HashSet::new(),
        budget: PATH_BUDGET,
        bounds: function.map_or((site.ip().saturating_sub(4096), site.ip() + 4096), |f| {
            (f.0, f.1)
        }),
    };
    // What the failed attempt left: the word's value in %rax (a
    // compare-and-swap) or in the exchanged register.
    let mut state = State::default();
    search.effects(site, &mut state);
    if site.mnemonic() == Mnemonic::Cmpxchg {
        state.set(Place::Reg(Register::RAX), Origin::Unknown);
    }
    for i in &tests {
        search.effects(i, &mut state);
    }
    search.walk(fail, state)
}

/// Where the code goes on after `site` when the acquisition failed, found
/// from the test of its result, and the instructions on the way there.
fn failing_path(
    code: &dyn Code,
    info: &mut InstructionInfoFactory,
    site: &Instruction,
) -> Option<(u64, Vec<Instruction>)> {
    let mut outcome = match site.mnemonic() {
        Mnemonic::Cmpxchg => Outcome::Zf(true),
        Mnemonic::Xchg => {
            let reg = (0..site.op_count())
                .find(|n| site.op_kind(*n) == OpKind::Register)
                .map(|n| site.op_register(n).full_register())?;
            Outcome::Zero(Places::one(Place::Reg(reg)), true)
        }
        Mnemonic::Bts => Outcome::Cf(false),
        _ => return None,
    };
    let mut va = site.next_ip();
    let mut passed = Vec::new();
    for _ in 0..TEST_WINDOW {
        let i = code.instruction(va)?;
        match i.flow_control() {
            FlowControl::ConditionalBranch => {
                // Whether the branch is taken when its flag is set.
                let (taken_on_set, carry) = match i.condition_code() {
                    ConditionCode::e => (true, false),
                    ConditionCode::ne => (false, false),
                    ConditionCode::b => (true, true),
                    ConditionCode::ae => (false, true),
                    _ => return None,
                };
                let success_when_set = match (outcome, carry) {
                    (Outcome::Zf(s), false) | (Outcome::Cf(s), true) => s,
                    _ => return None,
                };
                let taken_on_success = taken_on_set == success_when_set;
                let fail = if taken_on_success {
                    i.next_ip()
                } else {
                    i.near_branch_target()
                };
                return Some((fail, passed));
            }
            FlowControl::UnconditionalBranch if i.op0_kind() != OpKind::Register => {
                va = i.near_branch_target();
                continue;
            }
            FlowControl::Next => {}
            _ => return None,
        }
        outcome = track_outcome(info, &i, outcome, site)?;
        passed.push(i);
        va = i.next_ip();
    }
    None
}

/// The outcome after `i`, or `None` when `i` loses it.
fn track_outcome(
    info: &mut InstructionInfoFactory,
    i: &Instruction,
    outcome: Outcome,
    site: &Instruction,
) -> Option<Outcome> {
    let op0_reg = (i.op0_kind() == OpKind::Register).then(|| i.op0_register().full_register());
    let op1_reg = (i.op1_kind() == OpKind::Register).then(|| i.op1_register().full_register());
    let imm1 = is_immediate(i.op1_kind()).then(|| i.immediate(1));
    match (i.mnemonic(), outcome) {
        // sete/setne: a register that is non-zero when the flag was set.
        (Mnemonic::Sete | Mnemonic::Setne, Outcome::Zf(s)) if op0_reg.is_some() => {
            let set_means_nonzero = i.mnemonic() == Mnemonic::Sete;
            // Zero on success exactly when success clears it.
            return Some(Outcome::Zero(
                Places::one(Place::Reg(op0_reg?)),
                s != set_means_nonzero,
            ));
        }
        // test %r,%r, or a boolean's `test $1,%r`; cmp $0 likewise.
        (Mnemonic::Test, Outcome::Zero(at, z)) if op0_reg.is_some_and(|r| at.reg(r)) => {
            let same = op0_reg == op1_reg;
            let low_bit = imm1.is_some_and(|v| v & 1 == 1);
            return (same || low_bit).then_some(Outcome::Zf(z));
        }
        (Mnemonic::Cmp, Outcome::Zero(at, z))
            if imm1 == Some(0)
                && (op0_reg.is_some_and(|r| at.reg(r))
                    || (i.op0_kind() == OpKind::Memory && at.slot(i))) =>
        {
            return Some(Outcome::Zf(z));
        }
        // After a compare-and-swap, `test %eax,%eax` says whether the old
        // value was 0: whether taking a free word succeeded.
        (Mnemonic::Test, Outcome::Zf(true))
            if site.mnemonic() == Mnemonic::Cmpxchg
                && op0_reg == Some(Register::RAX)
                && op1_reg == Some(Register::RAX) =>
        {
            return Some(Outcome::Zf(true));
        }
        // A boolean flipped (`xor $0xff,%al`) or masked (`and $1,%al`).
        (Mnemonic::Xor, Outcome::Zero(at, z))
            if op0_reg.is_some_and(|r| at.reg(r)) && imm1.is_some_and(|v| v & 1 == 1) =>
        {
            return Some(Outcome::Zero(Places::one(Place::Reg(op0_reg?)), !z));
        }
        (Mnemonic::And, Outcome::Zero(at, z))
            if op0_reg.is_some_and(|r| at.reg(r)) && imm1 == Some(1) =>
        {
            return Some(Outcome::Zero(Places::one(Place::Reg(op0_reg?)), z));
        }
        // Copies: into another register, or a stack slot and back.
        (Mnemonic::Mov | Mnemonic::Movzx, Outcome::Zero(at, z)) => {
            if let (Some(to), Some(from)) = (dest_place(i), source_place(i)) {
                if at.contains(from) {
                    return Some(Outcome::Zero(at.with(to), z));
                }
            }
        }
        _ => {}
    }
    // Anything else keeps the outcome where it does not overwrite it.
    let flags = i.rflags_modified();
    match outcome {
        Outcome::Zf(_) if flags & RflagsBits::ZF != 0 => None,
        Outcome::Cf(_) if flags & RflagsBits::CF != 0 => None,
        Outcome::Zero(mut at, z) => {
            for p in at.0.into_iter().flatten() {
                let overwritten = match p {
                    Place::Reg(r) => writes_register(info, i, r),
                    Place::Slot(..) => dest_place(i) == Some(p),
                };
                if overwritten {
                    at = at.without(p);
                }
            }
            (!at.is_empty()).then_some(Outcome::Zero(at, z))
        }
        _ => Some(outcome),
    }
}

/// The stack slot a memory operand names: `disp(%rbp)` or `disp(%rsp)`.
fn slot_of(i: &Instruction) -> Option<(Register, i64)> {
    let base = i.memory_base();
    (matches!(base, Register::RBP | Register::RSP) && i.memory_index() == Register::None)
        .then(|| (base, i.memory_displacement64() as i64))
}

/// Where a `mov` writes.
fn dest_place(i: &Instruction) -> Option<Place> {
    match i.op0_kind() {
        OpKind::Register => Some(Place::Reg(i.op0_register().full_register())),
        OpKind::Memory => slot_of(i).map(|(b, d)| Place::Slot(b, d)),
        _ => None,
    }
}

/// What a `mov` reads.
fn source_place(i: &Instruction) -> Option<Place> {
    match i.op1_kind() {
        OpKind::Register => Some(Place::Reg(i.op1_register().full_register())),
        OpKind::Memory => slot_of(i).map(|(b, d)| Place::Slot(b, d)),
        _ => None,
    }
}

fn writes_register(info: &mut InstructionInfoFactory, i: &Instruction, reg: Register) -> bool {
    info.info(i).used_registers().iter().any(|u| {
        u.register().full_register() == reg
            && matches!(
                u.access(),
                OpAccess::Write
                    | OpAccess::CondWrite
                    | OpAccess::ReadWrite
                    | OpAccess::ReadCondWrite
            )
    })
}

/// What the failing path has written so far, and how far it went.
#[derive(Clone, Default)]
struct State {
    written: Vec<(Place, Origin)>,
    /// Instructions and conditional branches passed since the failure.
    steps: usize,
    branches: usize,
    /// The path has done nothing but wait since: no other atomic, no call
    /// but to yield. Only such a path can retry the acquisition.
    busy: bool,
}

/// How far from the failure a call still counts as its wait: a lock's slow
/// path is called right there (a later call may be another lock's).
const NEAR_STEPS: usize = 24;
const NEAR_BRANCHES: usize = 2;
/// How long a path back to the atomic may be to retry it: a spin on the
/// word and a backoff, not another round of the program's work.
const RETRY_STEPS: usize = 64;
const RETRY_BRANCHES: usize = 6;

impl State {
    fn near(&self) -> bool {
        self.steps <= NEAR_STEPS && self.branches <= NEAR_BRANCHES
    }

    fn only_waited(&self) -> bool {
        !self.busy && self.steps <= RETRY_STEPS && self.branches <= RETRY_BRANCHES
    }

    fn get(&self, p: Place) -> Option<Origin> {
        self.written
            .iter()
            .rev()
            .find(|(q, _)| *q == p)
            .map(|(_, o)| *o)
    }

    fn set(&mut self, p: Place, o: Origin) {
        self.written.retain(|(q, _)| *q != p);
        self.written.push((p, o));
    }

    /// What a place holds: what it held at the attempt, if the path never
    /// wrote it.
    fn origin(&self, p: Place) -> Origin {
        self.get(p).unwrap_or(Origin::Same(p))
    }

    /// Whether a register holds what the attempt saw: its own value, or a
    /// copy of a place the path left alone.
    fn unchanged(&self, r: Register) -> bool {
        matches!(self.origin(Place::Reg(r)), Origin::Same(_))
    }

    /// Whether a register holds a value the attempt could have had again:
    /// a constant, or one the path left alone.
    fn constant_or_unchanged(&self, r: Register) -> bool {
        matches!(self.origin(Place::Reg(r)), Origin::Same(_) | Origin::Imm(_))
    }

    /// The stack slot a memory operand names: `disp(%rbp)`, `disp(%rsp)`,
    /// or through a register holding a slot's address.
    fn slot(&self, i: &Instruction) -> Option<Place> {
        if let Some((b, d)) = slot_of(i) {
            return Some(Place::Slot(b, d));
        }
        if i.memory_index() != Register::None {
            return None;
        }
        match self.origin(Place::Reg(i.memory_base().full_register())) {
            Origin::SlotAddress(b, d) => Some(Place::Slot(b, d + i.memory_displacement64() as i64)),
            _ => None,
        }
    }

    /// Callee-saved registers survive a call; the rest do not.
    fn clobber_call(&mut self) {
        for r in [
            Register::RAX,
            Register::RCX,
            Register::RDX,
            Register::RSI,
            Register::RDI,
            Register::R8,
            Register::R9,
            Register::R10,
            Register::R11,
        ] {
            self.set(Place::Reg(r), Origin::Unknown);
        }
    }
}

struct Search<'a> {
    code: &'a dyn Code,
    info: InstructionInfoFactory,
    site: &'a Instruction,
    visited: HashSet<u64>,
    budget: usize,
    bounds: (u64, u64),
}

impl Search<'_> {
    /// Follows the path from `va`: the evidence it finds, if any.
    fn walk(&mut self, mut va: u64, mut state: State) -> Option<LockRole> {
        loop {
            if va == self.site.ip() {
                return (state.only_waited() && self.retries(&state))
                    .then_some(LockRole::Exclusive);
            }
            if self.budget == 0 || !(self.bounds.0..self.bounds.1).contains(&va) {
                return None;
            }
            if !self.visited.insert(va) {
                return None;
            }
            self.budget -= 1;
            state.steps += 1;
            let i = self.code.instruction(va)?;
            match i.flow_control() {
                FlowControl::Return
                | FlowControl::Interrupt
                | FlowControl::Exception
                | FlowControl::IndirectBranch => return None,
                FlowControl::UnconditionalBranch => {
                    va = i.near_branch_target();
                    continue;
                }
                FlowControl::ConditionalBranch => {
                    let target = i.near_branch_target();
                    state.branches += 1;
                    if let Some(found) = self.walk(target, state.clone()) {
                        return Some(found);
                    }
                    va = i.next_ip();
                    continue;
                }
                FlowControl::Call | FlowControl::IndirectCall => {
                    let callee = if i.flow_control() == FlowControl::Call {
                        self.code.callee(i.near_branch_target())
                    } else if i.is_ip_rel_memory_operand() {
                        self.code.callee_via(i.ip_rel_memory_address())
                    } else {
                        Callee::Other
                    };
                    match callee {
                        Callee::Lock(role) if state.near() => return Some(role),
                        Callee::Syscall
                            if state.near()
                                && state.get(Place::Reg(Register::RDI))
                                    == Some(Origin::Imm(SYS_FUTEX))
                                && matches!(state.get(Place::Reg(Register::RDX)), Some(Origin::Imm(op)) if is_futex_wait_op(op)) =>
                        {
                            return Some(LockRole::Exclusive);
                        }
                        Callee::Yield => {}
                        _ => state.busy = true,
                    }
                    state.clobber_call();
                    va = i.next_ip();
                    continue;
                }
                _ => {}
            }
            if super::emulate::is_atomic(&i) {
                state.busy = true;
            }
            if i.mnemonic() == Mnemonic::Syscall {
                let futex_wait = state.near()
                    && state.get(Place::Reg(Register::RAX)) == Some(Origin::Imm(SYS_FUTEX))
                    && matches!(state.get(Place::Reg(Register::RSI)), Some(Origin::Imm(op)) if is_futex_wait_op(op));
                if futex_wait {
                    return Some(LockRole::Exclusive);
                }
            }
            self.effects(&i, &mut state);
            va = i.next_ip();
        }
    }

    /// Records what `i` writes.
    fn effects(&mut self, i: &Instruction, state: &mut State) {
        let written: Vec<Register> = self
            .info
            .info(i)
            .used_registers()
            .iter()
            .filter(|u| {
                matches!(
                    u.access(),
                    OpAccess::Write
                        | OpAccess::CondWrite
                        | OpAccess::ReadWrite
                        | OpAccess::ReadCondWrite
                )
            })
            .map(|u| u.register().full_register())
            .filter(|r| r.is_gpr64())
            .collect();
        // A push, pop or stack adjustment moves what `disp(%rsp)` names.
        if written.contains(&Register::RSP) {
            state
                .written
                .retain(|(p, _)| !matches!(p, Place::Slot(Register::RSP, _)));
        }
        let op0_reg = (i.op0_kind() == OpKind::Register).then(|| i.op0_register().full_register());
        let op1_reg = (i.op1_kind() == OpKind::Register).then(|| i.op1_register().full_register());
        let value = match i.mnemonic() {
            Mnemonic::Xor | Mnemonic::Sub if op0_reg.is_some() && op0_reg == op1_reg => {
                Some(Origin::Imm(0))
            }
            Mnemonic::Lea => slot_of(i).map(|(b, d)| Origin::SlotAddress(b, d)),
            Mnemonic::Mov | Mnemonic::Movzx | Mnemonic::Movsxd => match i.op1_kind() {
                k if is_immediate(k) => Some(Origin::Imm(i.immediate(1))),
                OpKind::Register => op1_reg.map(|r| state.origin(Place::Reg(r))),
                OpKind::Memory => Some(state.slot(i).map_or(Origin::Unknown, |p| state.origin(p))),
                _ => None,
            },
            _ => None,
        };
        // A store: into a stack slot it is tracked, elsewhere forgotten.
        if i.op0_kind() == OpKind::Memory {
            if let Some(p) = state.slot(i) {
                let stored = match (i.mnemonic(), i.op1_kind()) {
                    (Mnemonic::Mov, k) if is_immediate(k) => Origin::Imm(i.immediate(1)),
                    (Mnemonic::Mov, OpKind::Register) => state.origin(Place::Reg(op1_reg.unwrap())),
                    _ => Origin::Unknown,
                };
                state.set(p, stored);
            }
        }
        for r in written {
            if r == Register::RSP {
                continue;
            }
            let origin = match value {
                Some(v) if op0_reg == Some(r) => v,
                _ => Origin::Unknown,
            };
            state.set(Place::Reg(r), origin);
        }
    }

    /// Whether arriving at the site in `state` tries the same acquisition
    /// again: the same address, and an expected and a new value the
    /// attempt could have had (constants, or registers left alone).
    fn retries(&self, state: &State) -> bool {
        let s = self.site;
        let address_kept = [s.memory_base(), s.memory_index()]
            .into_iter()
            .filter(|r| *r != Register::None && *r != Register::RIP)
            .all(|r| state.unchanged(r.full_register()));
        if !address_kept {
            return false;
        }
        let reg_operand = (0..s.op_count())
            .find(|n| s.op_kind(*n) == OpKind::Register)
            .map(|n| s.op_register(n).full_register());
        match s.mnemonic() {
            // The failure left the word's value in %rax: it must be set
            // again, to a constant or a kept register.
            Mnemonic::Cmpxchg => {
                matches!(
                    state.origin(Place::Reg(Register::RAX)),
                    Origin::Imm(0) | Origin::Same(_)
                ) && reg_operand.is_none_or(|r| state.constant_or_unchanged(r))
            }
            // The exchange left the word's value in its register.
            Mnemonic::Xchg => reg_operand.is_some_and(|r| state.constant_or_unchanged(r)),
            Mnemonic::Bts => reg_operand.is_none_or(|r| state.constant_or_unchanged(r)),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Decoder, DecoderOptions};

    /// Machine code at 0x1000, one function, with named call targets.
    struct Bytes {
        code: Vec<u8>,
        names: Vec<(u64, Callee)>,
    }

    impl Code for Bytes {
        fn instruction(&self, va: u64) -> Option<Instruction> {
            let off = usize::try_from(va.checked_sub(0x1000)?).ok()?;
            let bytes = self.code.get(off..)?;
            let i = Decoder::with_ip(64, bytes, va, DecoderOptions::NONE).decode();
            (!i.is_invalid()).then_some(i)
        }
        fn function(&self, _: u64) -> Option<(u64, u64, Option<LockRole>)> {
            Some((0x1000, 0x1000 + self.code.len() as u64, None))
        }
        fn callee(&self, target: u64) -> Callee {
            self.names
                .iter()
                .find(|(a, _)| *a == target)
                .map_or(Callee::Other, |(_, c)| *c)
        }
        fn callee_via(&self, _: u64) -> Callee {
            Callee::Other
        }
    }

    /// The evidence for the first atomic of `code` (assembled at 0x1000).
    fn evidence(code: &[u8], names: Vec<(u64, Callee)>) -> Option<LockRole> {
        let b = Bytes {
            code: code.to_vec(),
            names,
        };
        let mut d = Decoder::with_ip(64, code, 0x1000, DecoderOptions::NONE);
        let site = std::iter::from_fn(|| d.can_decode().then(|| d.decode()))
            .find(crate::code::sites::emulate::is_atomic)
            .expect("an atomic");
        site_evidence(&b, &site)
    }

    #[test]
    fn a_compare_and_swap_spinlock_retries_with_the_same_values() {
        // 0: mov %esi,%eax; lock cmpxchg %edx,(%rdi); jne 0; ret
        let code = [0x89, 0xf0, 0xf0, 0x0f, 0xb1, 0x17, 0x75, 0xf8, 0xc3];
        assert_eq!(evidence(&code, vec![]), Some(LockRole::Exclusive));
    }

    #[test]
    fn a_test_and_test_and_set_spinlock_retries_through_its_spin() {
        // 0: mov %edx,%eax; xchg %eax,(%rdi); test %eax,%eax; je done;
        // spin: mov (%rdi),%eax; test %eax,%eax; je 0; pause; jmp spin; done: ret
        let code = [
            0x89, 0xd0, 0x87, 0x07, 0x85, 0xc0, 0x74, 0x0a, 0x8b, 0x07, 0x85, 0xc0, 0x74, 0xf2,
            0xf3, 0x90, 0xeb, 0xf6, 0xc3,
        ];
        assert_eq!(evidence(&code, vec![]), Some(LockRole::Exclusive));
    }

    #[test]
    fn a_lock_free_loop_that_retries_with_the_value_it_found_is_no_lock() {
        // 0: mov (%rdi),%rax; loop: mov %rax,(%rsi); lock cmpxchg %rsi,(%rdi); jne loop; ret
        // (a Treiber push: the failed CAS left the head in %rax)
        let code = [
            0x48, 0x8b, 0x07, 0x48, 0x89, 0x06, 0xf0, 0x48, 0x0f, 0xb1, 0x37, 0x75, 0xf6, 0xc3,
        ];
        assert_eq!(evidence(&code, vec![]), None);
    }

    #[test]
    fn an_exchange_whose_result_is_not_tested_is_no_lock() {
        // mov %rcx,%rax; xchg %rax,(%rdi); add $1,%rcx; ret  (a published index)
        let code = [
            0x48, 0x89, 0xc8, 0x48, 0x87, 0x07, 0x48, 0x83, 0xc1, 0x01, 0xc3,
        ];
        assert_eq!(evidence(&code, vec![]), None);
    }

    #[test]
    fn a_failing_path_that_calls_a_contended_path_waits() {
        // xor %eax,%eax; lock cmpxchg %ecx,(%rdi); jne slow; ret; slow: call 0x2000; ret
        let code = [
            0x31, 0xc0, 0xf0, 0x0f, 0xb1, 0x0f, 0x75, 0x01, 0xc3, 0xe8, 0xf2, 0x0f, 0x00, 0x00,
            0xc3,
        ];
        assert_eq!(
            evidence(&code, vec![(0x2000, Callee::Lock(LockRole::Exclusive))]),
            Some(LockRole::Exclusive)
        );
        // The same call on the path taken when the acquisition succeeded
        // says nothing: `je` instead of `jne`.
        let mut success = code;
        success[6] = 0x74;
        assert_eq!(
            evidence(&success, vec![(0x2000, Callee::Lock(LockRole::Exclusive))]),
            None
        );
    }

    #[test]
    fn a_failing_path_that_makes_a_futex_wait_waits() {
        // mov $1,%ecx; xor %eax,%eax; lock cmpxchg %ecx,(%rsi); je done;
        // mov $202,%edi; mov $128,%edx; call syscall; done: ret
        let code = [
            0xb9, 0x01, 0x00, 0x00, 0x00, 0x31, 0xc0, 0xf0, 0x0f, 0xb1, 0x0e, 0x74, 0x0f, 0xbf,
            0xca, 0x00, 0x00, 0x00, 0xba, 0x80, 0x00, 0x00, 0x00, 0xe8, 0xe4, 0x0f, 0x00, 0x00,
            0xc3,
        ];
        assert_eq!(
            evidence(&code, vec![(0x2000, Callee::Syscall)]),
            Some(LockRole::Exclusive)
        );
        // A futex wake there is no wait.
        let mut wake = code;
        wake[19] = 0x81;
        assert_eq!(evidence(&wake, vec![(0x2000, Callee::Syscall)]), None);
    }

    #[test]
    fn unoptimized_code_keeps_the_expected_value_on_the_stack() {
        // loop: mov -0x14(%rbp),%eax; lock cmpxchg %edx,(%rcx); sete %al;
        // test %al,%al; jne done; movl $0,-0x14(%rbp); jmp loop; done: ret
        let code = [
            0x8b, 0x45, 0xec, 0xf0, 0x0f, 0xb1, 0x11, 0x0f, 0x94, 0xc0, 0x84, 0xc0, 0x75, 0x09,
            0xc7, 0x45, 0xec, 0x00, 0x00, 0x00, 0x00, 0xeb, 0xe9, 0xc3,
        ];
        assert_eq!(evidence(&code, vec![]), Some(LockRole::Exclusive));
    }

    #[test]
    fn names_say_which_functions_take_locks() {
        let cases = [
            (
                "_RNvMNtNtNtNtCsjrHSEGnQ3l9_3std3sys4sync5mutex5futexNtB2_5Mutex14lock_contended",
                Some(LockRole::Exclusive),
            ),
            (
                "_ZN3std4sync6poison5mutex14Mutex$LT$T$GT$4lock17h6b21292ce8c08178E",
                Some(LockRole::Exclusive),
            ),
            (
                "_ZN78_$LT$parking_lot..raw_mutex..RawMutex$u20$as$u20$lock_api..mutex..RawMutex$GT$4lock17h95d76fa65278c6e1E",
                Some(LockRole::Exclusive),
            ),
            (
                "_ZN11parking_lot9raw_mutex8RawMutex9lock_slow17hde81d12cff3dc271E",
                Some(LockRole::Exclusive),
            ),
            (
                "_ZN16parking_lot_core9word_lock8WordLock9lock_slow17h6f71687c32e184bbE",
                Some(LockRole::Exclusive),
            ),
            (
                "_ZN17crossbeam_channel5utils14Mutex$LT$T$GT$4lock17h8c85050ec4349bcaE",
                Some(LockRole::Exclusive),
            ),
            (
                "_RNvMNtNtNtNtCsjrHSEGnQ3l9_3std3sys4sync6rwlock5futexNtB2_6RwLock14read_contended",
                Some(LockRole::Shared),
            ),
            ("_ZN8SpinLock4lockEv", Some(LockRole::Exclusive)),
            ("_ZN8SpinLock8try_lockEv", Some(LockRole::Try)),
            ("__lll_lock_wait_private", Some(LockRole::Exclusive)),
            ("pthread_mutex_trylock", Some(LockRole::Try)),
            ("spin_lock", Some(LockRole::Exclusive)),
            ("lock", Some(LockRole::Exclusive)),
            ("lock_exchange", Some(LockRole::Exclusive)),
            // Not locks.
            (
                "_RNvMs0_NtNtNtNtCsjrHSEGnQ3l9_3std3sys4sync4once5futexNtB5_4Once4call",
                None,
            ),
            (
                "_ZN11parking_lot9raw_mutex8RawMutex11unlock_slow17h935095f2d209fc7aE",
                None,
            ),
            (
                "_ZN117_$LT$parking_lot_core..thread_parker..imp..UnparkHandle$u20$as$u20$parking_lot_core..thread_parker..UnparkHandleT$GT$6unpark17hae34d7cbbda16ed7E",
                None,
            ),
            (
                "_RNvXsi_NtNtCsjrHSEGnQ3l9_3std2io5stdioNtB5_10StdoutLockNtB7_5Write9write_all",
                None,
            ),
            (
                "_ZN3std4sync4mpmc4list14Block$LT$T$GT$9wait_next17h1510d0d3c97e9659E",
                None,
            ),
            ("unlock", None),
            ("spin_unlock", None),
            ("block", None),
            ("flock", None),
            ("lock_free_push", None),
            ("clock_gettime", None),
        ];
        for (sym, want) in cases {
            assert_eq!(role_of_symbol(sym), want, "{sym}");
        }
    }
}
