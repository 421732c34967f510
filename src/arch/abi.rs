//! The contract between the guest-side shim (`guest/shim.c`) and the
//! monitor. Both sides must agree on every constant here; `guest/shim.c`
//! repeats them and a test compares the two.
//!
//! The shim is a preloaded shared library that wraps the pthread operations
//! that never enter the kernel on their fast path. Before (and for try/timed
//! operations also after) the real operation it makes the private system
//! call [`HINT_SYSCALL`] with
//!
//! | register | meaning |
//! | --- | --- |
//! | `rax` | [`HINT_SYSCALL`] |
//! | `rdi` | the operation, a [`HintOp`] number |
//! | `rsi` | the object's address (mutex, rwlock, condvar, semaphore, barrier, spinlock, thread) |
//! | `rdx` | the call site: the return address into the caller of the wrapped function |
//! | `r10` | a second value: the mutex of a condvar wait, the result of a try/timed operation, the new thread of a create |
//!
//! The call returns 0 and changes nothing; it is a scheduling point (a step)
//! that carries what the program is about to do. On a kernel that does not
//! know it (running natively), it returns `-ENOSYS`, which the shim ignores.

/// The private system-call number of a hint (not a Linux system call).
pub const HINT_SYSCALL: u64 = 0x7277;

/// Where the monitor serves the shim inside the guest.
pub const SHIM_PATH: &str = "/.rewind/librewind-shim.so";

// The hint ring.
//
// A hint that cannot change who runs next need not leave the guest: the
// monitor publishes, before it resumes a thread, the first step at which the
// strategy might switch threads (`limit_step`), and the shim appends the
// hints of earlier steps to a ring in guest memory instead of making the
// system call. At the next exit the monitor takes them as the steps they
// are, in order, before anything else, so runs, traces and coverage are
// exactly those of one exit per hint. The ring is a fixed mapping
// (`[rewind]` in /proc/self/maps); the shim finds it with
// `getauxval(AT_REWIND_RING)` (0 natively: no ring).
//
// Layout, all little-endian u64 words:
//
// | word | field | written by |
// | --- | --- | --- |
// | 0 | magic [`RING_MAGIC`] | monitor |
// | 1 | `limit_step`: a hint may be buffered only as a step below this | monitor |
// | 2 | `base_step`: the step number of the last step the monitor took | monitor |
// | 3 | `head`: entries consumed by the monitor | monitor |
// | 4 | `tail`: entries written by the shim (the shim stores it last) | shim |
// | 5 | `capacity` in entries | monitor |
// | 6 | `busy`: set by the shim while it writes (a signal handler's hints then use the system call) | shim |
// | 7 | `bp_rip`: where the last `int3` of a sync site came from (see below) | guest ring 0 |
// | 8.. | entries of 4 words: op, object, site, value (as the hint's rdi, rsi, rdx, r10) | shim, site dispatcher |
//
// The next buffered hint is step `base_step + (tail - head) + 1`; the shim
// buffers it when that is below `limit_step` and `tail - head < capacity`.

/// `getauxval` key of the ring's address (not a Linux AT_* number).
pub const AT_REWIND_RING: u64 = 0x7277;
/// Guest address of the ring.
pub const RING_VA: u64 = 0x7fff_f800_0000;
/// Size of the ring mapping.
pub const RING_SIZE: u64 = 64 * 1024;
/// The ring's first word.
pub const RING_MAGIC: u64 = 0x3147_4e49_5257_4552; // "REWRING1"
/// Word offsets in the ring header.
pub const RING_LIMIT_STEP: u64 = 1;
pub const RING_BASE_STEP: u64 = 2;
pub const RING_HEAD: u64 = 3;
pub const RING_TAIL: u64 = 4;
pub const RING_CAPACITY: u64 = 5;
pub const RING_BUSY: u64 = 6;
pub const RING_BP_RIP: u64 = 7;
/// Words before the first entry.
pub const RING_HEADER_WORDS: u64 = 8;
/// Words per entry.
pub const RING_ENTRY_WORDS: u64 = 4;
/// Entries the ring holds.
pub const RING_ENTRIES: u64 = (RING_SIZE / 8 - RING_HEADER_WORDS) / RING_ENTRY_WORDS;

// Sync sites taken without an exit.
//
// A sync site's step that cannot change who runs need not leave the guest
// either. A site reaches the site dispatcher (`guest/sites.S`), mapped at
// [`SITES_VA`] in every process with sync sites, in one of two ways:
//
// - its first bytes are a jump to its *trampoline* (`code::sites::trampoline`),
//   which saves rax in the dispatcher's data, puts the address of the
//   site's descriptor in rax and jumps to the dispatcher's second door
//   (`rewind_sites_jump`): no exception, no ring 0;
// - where no trampoline could be placed, its first byte is an `int3`: the
//   guest's breakpoint handler (ring 0, `guest/entry.S`), when the monitor
//   has switched it on for the process about to run, stores the address
//   after the `int3` in the ring's `bp_rip` and returns to user mode at the
//   dispatcher's first door, which finds the site's descriptor in the
//   process's site table.
//
// The dispatcher saves the registers and, when the step it would be is
// below `limit_step` (the shim's test), appends an entry (op
// [`RING_OP_SITE`], object = the operand's address, site = the
// instruction's address, value = the operand's first 8 bytes) with a side
// record (the registers and the operand's 16 bytes), then runs the
// instruction's out-of-line copy, which jumps back after it. The monitor
// takes the entry at the next exit as the step the breakpoint would have
// been: it emulates the instruction on the recorded registers and operand
// to learn what it read and wrote. Everything else (a decision due, a full
// ring, a breakpoint with no entry in the table) ends at the dispatcher's
// `ud2` (`SITES_MISS`), with the registers put back, which the monitor
// takes as the breakpoint itself.
//
// A descriptor, 32 bytes (the table's entries and the trampolines' are
// alike):
//
// | bytes | field |
// | --- | --- |
// | 0..8 | the site's address minus the descriptor's (0 = a free table slot) |
// | 8..16 | the operand's displacement; for a RIP-relative operand ([`SITES_RIPREL_FLAG`]), its address minus the descriptor's |
// | 16 | base register (x86 number, [`SITES_NO_REG`] for none) |
// | 17 | index register |
// | 18 | scale as a shift, with [`SITES_RUNTIME_FLAG`], [`SITES_RIPREL_FLAG`], [`SITES_YIELD_FLAG`] and [`SITES_RETRY_FLAG`] |
// | 19 | operand size in bytes (1, 2, 4, 8, 16; 0 for none: a spin's `pause` or branch) |
// | 20..24 | the copy's address minus the descriptor's (i32) |
// | 24..32 | a table entry's: the 8 bytes after the site's first byte, as the entry was made |
//
// The sites area: code (r-x), then the table (r--), then data (rw-); none
// is listed in /proc/self/maps, and neither are trampolines.

/// The dispatcher's page; its stubs follow.
pub const SITES_VA: u64 = 0x7fff_f810_0000;
/// The dispatcher's door for trampolines, as an offset from [`SITES_VA`].
pub const SITES_JUMP_DOOR: u64 = 0x20;
/// Out-of-line copies of breakpoints' sites, one slot each.
pub const SITES_STUBS_VA: u64 = SITES_VA + 0x1000;
/// Bytes per stub slot; the slot's last 8 bytes hold the site's address.
pub const SITES_STUB_BYTES: u64 = 64;
/// Stub slots (at most half the table's slots, so probes stay short).
pub const SITES_MAX: u64 = SITES_SLOTS / 2;
/// The code mapping: the dispatcher and the stubs.
pub const SITES_CODE_SIZE: u64 = 0x1000 + SITES_MAX * SITES_STUB_BYTES;
/// The site table of the breakpoints the dispatcher takes: open
/// addressing over [`SITES_SLOTS`] descriptors of [`SITES_ENTRY_BYTES`],
/// keyed by the site's address.
pub const SITES_TABLE_VA: u64 = 0x7fff_f820_0000;
pub const SITES_SLOTS: u64 = 16384;
pub const SITES_ENTRY_BYTES: u64 = 32;
pub const SITES_NO_REG: u8 = 16;
/// Multiplier of the table's hash (Fibonacci hashing of the address).
pub const SITES_HASH_MUL: u64 = 0x9e37_79b9_7f4a_7c15;
/// The data: word `n < 16` the saved register numbered `n`, then rflags,
/// the site, the jump target, the stubs' scratch word, the stubs used, the
/// stack's bounds and the descriptor a trampoline passed (0 after a
/// breakpoint); the dispatcher's private stack ends the first page; side
/// records follow.
pub const SITES_DATA_VA: u64 = 0x7fff_f830_0000;
pub const SITES_SAVE_FLAGS: u64 = 16;
pub const SITES_SAVE_SITE: u64 = 17;
pub const SITES_SAVE_TARGET: u64 = 18;
pub const SITES_SAVE_SCRATCH: u64 = 19;
pub const SITES_SAVE_USED: u64 = 20;
/// The bounds of the mapping holding the running thread's stack pointer
/// when the monitor last entered it: the stack window ends at the upper one.
pub const SITES_STACK_LO: u64 = 21;
pub const SITES_STACK_HI: u64 = 22;
/// The descriptor a trampoline passed, or 0 when the dispatcher was entered
/// from a breakpoint.
pub const SITES_SAVE_DESC: u64 = 23;
/// The `limit_step` of steps that give way (a spin, an atomic in a retry
/// loop), written by the monitor with the ring's: the ring's own when no
/// other thread can run (nothing to give way to), else 0.
pub const SITES_YIELD_LIMIT: u64 = 24;
/// The site (instruction address) of the running thread's last step when
/// the monitor entered it, or 0: a retry-loop atomic taken again first
/// thing is a retry.
pub const SITES_LAST_SITE: u64 = 25;
/// 1 when a retry-loop atomic gives way at every hit (the format-6 step
/// rules), 0 when only at a retry.
pub const SITES_RETRY_ALWAYS: u64 = 26;
/// The process's tick counter: a tick's trampoline takes one off at each
/// pass and traps when it would reach zero; the monitor then sets it to
/// [`TICK_PERIOD`] again.
pub const SITES_TICK_COUNT: u64 = 27;
/// Where a tick's trampoline keeps rax while it counts.
pub const SITES_TICK_SAVE: u64 = 28;
/// Passes through tick sites (loops' iterations) between two ticks.
pub const TICK_PERIOD: u64 = 1 << 16;
/// Top of the dispatcher's stack (an offset in the data).
pub const SITES_STACK_TOP: u64 = 0x1000;
/// Side records, one per place in a batch of ring entries (the entries
/// since the last exit: the monitor takes them all at each): the 16 registers, rflags, the
/// operand's 16 bytes and, for a site inside a language runtime (reported
/// at its caller, found by unwinding), the stack window's length in bytes
/// and the window.
pub const SITES_SIDE_OFFSET: u64 = 0x1000;
pub const SITES_SIDE_WORDS: u64 = 20 + SITES_STACK_WINDOW / 8;
/// How much of the stack above `rsp` unwinding from a site may read, up to
/// the end of the stack's mapping (the dispatcher copies it; a breakpoint's
/// unwinding keeps to it too, so both name the same caller). Measured: at
/// most 2.3 KiB in crates' test suites.
pub const SITES_STACK_WINDOW: u64 = 4096;
/// The flag in the table entry's scale byte of a site inside a runtime.
pub const SITES_RUNTIME_FLAG: u8 = 0x80;
/// The flag in a descriptor's scale byte of a RIP-relative operand, whose
/// displacement is then relative to the descriptor.
pub const SITES_RIPREL_FLAG: u8 = 0x40;
/// The flag in a descriptor's scale byte of a site whose step gives way (a
/// spin): buffered only below [`SITES_YIELD_LIMIT`].
pub const SITES_YIELD_FLAG: u8 = 0x20;
/// The flag of an atomic in a retry loop, whose step gives way when the
/// thread retries it: its previous step (the ring's last entry, or
/// [`SITES_LAST_SITE`] when the ring holds none since the exit) was the
/// same site.
pub const SITES_RETRY_FLAG: u8 = 0x10;
pub const SITES_DATA_SIZE: u64 = SITES_SIDE_OFFSET + RING_ENTRIES * SITES_SIDE_WORDS * 8;
/// The ring entry's op of a sync site (not a [`HintOp`]).
pub const RING_OP_SITE: u64 = 0x5349_5445; // "SITE"

/// What a hint says the thread is about to do (or, for `*Result`, did).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[repr(u64)]
#[serde(rename_all = "kebab-case")]
pub enum HintOp {
    MutexLock = 1,
    MutexTrylock = 2,
    MutexTimedlock = 3,
    MutexUnlock = 4,
    RwlockRdlock = 5,
    RwlockWrlock = 6,
    RwlockTryrdlock = 7,
    RwlockTrywrlock = 8,
    RwlockTimedrdlock = 9,
    RwlockTimedwrlock = 10,
    RwlockUnlock = 11,
    /// `r10` = the mutex released while waiting.
    CondWait = 12,
    /// `r10` = the mutex released while waiting.
    CondTimedwait = 13,
    CondSignal = 14,
    CondBroadcast = 15,
    SemWait = 16,
    SemTrywait = 17,
    SemTimedwait = 18,
    SemPost = 19,
    BarrierWait = 20,
    SpinLock = 21,
    SpinTrylock = 22,
    SpinUnlock = 23,
    /// `rsi` = the start routine, made before the thread exists.
    ThreadCreate = 24,
    /// `rsi` = the `pthread_t` joined.
    ThreadJoin = 25,
    ThreadExit = 26,
    /// After a try or timed operation: `rsi` = the object, `r10` = the
    /// operation's return value (0 = acquired), `rdx` = the call site.
    TryResult = 27,
    /// A program-chosen point (for example where a test's setup ends), named
    /// by `rsi`.
    Marker = 28,
}

impl HintOp {
    /// The operation numbered `n`.
    pub fn from_u64(n: u64) -> Option<HintOp> {
        use HintOp::*;
        Some(match n {
            1 => MutexLock,
            2 => MutexTrylock,
            3 => MutexTimedlock,
            4 => MutexUnlock,
            5 => RwlockRdlock,
            6 => RwlockWrlock,
            7 => RwlockTryrdlock,
            8 => RwlockTrywrlock,
            9 => RwlockTimedrdlock,
            10 => RwlockTimedwrlock,
            11 => RwlockUnlock,
            12 => CondWait,
            13 => CondTimedwait,
            14 => CondSignal,
            15 => CondBroadcast,
            16 => SemWait,
            17 => SemTrywait,
            18 => SemTimedwait,
            19 => SemPost,
            20 => BarrierWait,
            21 => SpinLock,
            22 => SpinTrylock,
            23 => SpinUnlock,
            24 => ThreadCreate,
            25 => ThreadJoin,
            26 => ThreadExit,
            27 => TryResult,
            28 => Marker,
            _ => return None,
        })
    }

    /// The name in traces: `mutex-lock`, `cond-wait`, ...
    pub fn name(self) -> &'static str {
        use HintOp::*;
        match self {
            MutexLock => "mutex-lock",
            MutexTrylock => "mutex-trylock",
            MutexTimedlock => "mutex-timedlock",
            MutexUnlock => "mutex-unlock",
            RwlockRdlock => "rwlock-rdlock",
            RwlockWrlock => "rwlock-wrlock",
            RwlockTryrdlock => "rwlock-tryrdlock",
            RwlockTrywrlock => "rwlock-trywrlock",
            RwlockTimedrdlock => "rwlock-timedrdlock",
            RwlockTimedwrlock => "rwlock-timedwrlock",
            RwlockUnlock => "rwlock-unlock",
            CondWait => "cond-wait",
            CondTimedwait => "cond-timedwait",
            CondSignal => "cond-signal",
            CondBroadcast => "cond-broadcast",
            SemWait => "sem-wait",
            SemTrywait => "sem-trywait",
            SemTimedwait => "sem-timedwait",
            SemPost => "sem-post",
            BarrierWait => "barrier-wait",
            SpinLock => "spin-lock",
            SpinTrylock => "spin-trylock",
            SpinUnlock => "spin-unlock",
            ThreadCreate => "thread-create",
            ThreadJoin => "thread-join",
            ThreadExit => "thread-exit",
            TryResult => "try-result",
            Marker => "marker",
        }
    }

    /// Operations that take a lock (blocking or not).
    pub fn acquires(self) -> bool {
        use HintOp::*;
        matches!(
            self,
            MutexLock
                | MutexTrylock
                | MutexTimedlock
                | RwlockRdlock
                | RwlockWrlock
                | RwlockTryrdlock
                | RwlockTrywrlock
                | RwlockTimedrdlock
                | RwlockTimedwrlock
                | SpinLock
                | SpinTrylock
        )
    }

    /// Try and timed acquisitions, which report their result afterwards.
    pub fn may_fail(self) -> bool {
        use HintOp::*;
        matches!(
            self,
            MutexTrylock
                | MutexTimedlock
                | RwlockTryrdlock
                | RwlockTrywrlock
                | RwlockTimedrdlock
                | RwlockTimedwrlock
                | SpinTrylock
        )
    }

    /// Operations that release a lock.
    pub fn releases(self) -> bool {
        matches!(
            self,
            HintOp::MutexUnlock | HintOp::RwlockUnlock | HintOp::SpinUnlock
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_number_round_trips() {
        for n in 1..=28 {
            let op = HintOp::from_u64(n).unwrap();
            assert_eq!(op as u64, n);
        }
        assert_eq!(HintOp::from_u64(0), None);
        assert_eq!(HintOp::from_u64(29), None);
    }

    #[test]
    fn the_hint_number_is_not_a_linux_system_call() {
        assert!(crate::arch::syscalls::syscall_name(HINT_SYSCALL).is_none());
    }
}
