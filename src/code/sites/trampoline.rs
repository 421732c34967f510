//! Trampolines: how a sync site reaches the guest's site dispatcher with a
//! jump instead of a breakpoint.
//!
//! A breakpoint enters ring 0, which nested KVM emulates (tens of
//! microseconds a hit here; a fraction of one on bare metal, still far
//! more than a jump). So each site the dispatcher can take gets a
//! trampoline and its first five bytes become `jmp rel32` to it, as static
//! binary rewriters patch arbitrary instructions (E9Patch). The trampoline
//! saves rax, points rax at the site's descriptor and jumps to the
//! dispatcher (see `arch::abi`); the site's *copy* follows it: the
//! instruction re-encoded for its new place, then the instructions the jump
//! displaced, then a jump back.
//!
//! An instruction shorter than the jump displaces the ones after it (its
//! *moved* instructions). Nothing may jump into the middle of the patch, so
//! an instruction that something is known to jump to is never moved
//! (direct branches and calls anywhere in the object, function entries);
//! for the jumps no decoder can see (a `switch`'s table, an exception's
//! landing pad), the displacement is chosen so that each moved
//! instruction's first byte, now a byte of the jump's displacement, is one
//! that traps when executed (`int3`, or an opcode invalid in 64-bit mode).
//! A jump that lands there is an exception the monitor takes to the moved
//! instruction's copy: correct whatever the decoder missed, and an exit
//! only when it missed something.
//!
//! The displacement's top byte is the same for every site of an object
//! ([`REGION_BYTE`]: every trampoline 820 to 836 MiB below its site, free
//! address space below an executable and below the libraries, where the
//! program's own mappings rarely reach; when one does, the monitor puts
//! breakpoints back, see `memory`). All of it is a function of the object alone: addresses are
//! the object's link-time ones, the image is mapped at the object's load
//! bias, and every reference in it is relative but two absolute ones (the
//! dispatcher's data and door), the same in every process. So one image
//! serves every mapping of the object, and is cached with its sites.

use std::collections::{BTreeMap, BTreeSet};

use iced_x86::{
    BlockEncoder, BlockEncoderOptions, Code, Decoder, DecoderOptions, FlowControl, Instruction,
    InstructionBlock, Mnemonic, OpKind,
};

use super::out_of_line;
use super::site::{Site, SiteKind};
use crate::arch::abi;

/// Bytes that trap when executed as an instruction's first byte in 64-bit
/// mode: `int3` and opcodes invalid there (`#UD`), none a prefix.
pub const TRAP_BYTES: [u8; 21] = [
    0x06, 0x07, 0x0e, 0x16, 0x17, 0x1e, 0x1f, 0x27, 0x2f, 0x37, 0x3f, 0x60, 0x61, 0x82, 0x9a, 0xcc,
    0xce, 0xd4, 0xd5, 0xd6, 0xea,
];

/// The top byte of every jump's displacement in an object loaded anywhere
/// (a shared library, a position-independent executable): a trapping byte,
/// so that the fourth byte after a four-byte site, when it starts a moved
/// instruction, traps; and a negative one, so that trampolines lie 820 to
/// 836 MiB below their code.
pub const REGION_BYTE: u8 = 0xcc;

/// The same for an executable loaded where it was linked (low, near
/// address 0): trampolines 1.5 GiB above it, past where its heap grows.
pub const LOW_REGION_BYTE: u8 = 0x60;

/// Bytes of a trampoline's page.
pub const PAGE: u64 = 4096;

/// `mov %rax, abs64` + `lea desc(%rip), %rax` + `jmp *word(%rip)`.
const PROLOGUE: u64 = 23;
/// A tick's counting code (see [`tick_prologue`]).
const TICK_PROLOGUE: u64 = 65;
/// Where in a tick's trampoline its `int3` stands.
pub const TICK_TRAP: u64 = 64;
/// A descriptor's bytes (see `arch::abi`).
const DESCRIPTOR: u64 = 32;
/// The last bytes of each page hold the dispatcher's door.
const DOOR_WORD: u64 = 8;

/// One site's jump and trampoline, in the object's link-time addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Jump {
    /// The site's address.
    pub site: u64,
    /// The jump over the site's first five bytes.
    pub patch: [u8; 5],
    /// The trampoline's first byte.
    pub entry: u64,
    /// Where a thread resumes after the site's instruction: the copies of
    /// the moved instructions, or the site's successor when none moved.
    pub after: u64,
    /// One past the trampoline's last byte.
    pub end: u64,
    /// Each copied instruction, the site's first: (copy, original).
    pub copies: Vec<(u64, u64)>,
    /// Where the code goes on after the copies: the first instruction not
    /// moved.
    pub back: u64,
    /// The trampoline's jump back there.
    pub jump_back: u64,
    /// Whether it is a tick's: it counts, and every
    /// [`abi::TICK_PERIOD`]th pass traps at `entry + TICK_TRAP`, else goes
    /// straight to the copy.
    pub tick: bool,
}

/// The trampolines of one object.
#[derive(Debug, Default)]
pub struct Trampolines {
    /// By the site's file offset.
    jumps: BTreeMap<u64, Jump>,
    /// The site's file offset by trampoline entry, to find an address's.
    by_entry: BTreeMap<u64, u64>,
    /// A moved instruction's address, with its copy's.
    moved: BTreeMap<u64, u64>,
    /// The image's pages, by link-time address.
    pages: BTreeMap<u64, Vec<u8>>,
    /// Sites with no trampoline: their instruction or the ones after them
    /// cannot be moved (they keep a trap).
    pub without: usize,
    /// Where the next trampoline may start.
    cursor: u64,
}

/// Where a copied instruction came from: an address in a trampoline, as
/// the program's code would have it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// At the site, before its instruction ran (the prologue, or the
    /// site's copy).
    Site(u64),
    /// At a moved instruction (or the first after them), its own copy not
    /// yet finished.
    Moved(u64),
}

impl Trampolines {
    /// Adds the jump of the site at file offset `offset`.
    fn insert(&mut self, offset: u64, j: Jump) {
        self.by_entry.insert(j.entry, offset);
        for (copy, original) in &j.copies[1..] {
            self.moved.insert(*original, *copy);
        }
        self.jumps.insert(offset, j);
    }

    /// The jump of the site at file offset `offset`.
    pub fn jump(&self, offset: u64) -> Option<&Jump> {
        self.jumps.get(&offset)
    }

    /// Every jump, by the site's file offset.
    pub fn jumps(&self) -> impl Iterator<Item = (u64, &Jump)> {
        self.jumps.iter().map(|(o, j)| (*o, j))
    }

    pub fn len(&self) -> usize {
        self.jumps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.jumps.is_empty()
    }

    /// The image's pages (link-time address, bytes).
    pub fn pages(&self) -> impl Iterator<Item = (u64, &[u8])> {
        self.pages.iter().map(|(a, p)| (*a, p.as_slice()))
    }

    /// The page of the image at link-time address `page`.
    pub fn page(&self, page: u64) -> Option<&[u8]> {
        self.pages.get(&page).map(Vec::as_slice)
    }

    /// The copy of the moved instruction at `addr`, if one was moved from
    /// there.
    pub fn moved_copy(&self, addr: u64) -> Option<u64> {
        self.moved.get(&addr).copied()
    }

    /// The site of the tick whose `int3` is at `addr`.
    pub fn tick_at(&self, addr: u64) -> Option<u64> {
        let (entry, offset) = self.by_entry.range(..=addr).next_back()?;
        let j = &self.jumps[offset];
        (j.tick && addr == entry + TICK_TRAP).then_some(j.site)
    }

    /// Where the code at `addr`, inside a trampoline, stands in the
    /// program's code.
    pub fn origin(&self, addr: u64) -> Option<Origin> {
        let (_, offset) = self.by_entry.range(..=addr).next_back()?;
        let j = &self.jumps[offset];
        if addr >= j.end {
            return None;
        }
        if addr >= j.jump_back {
            return Some(Origin::Moved(j.back));
        }
        match j.copies.iter().rposition(|(c, _)| *c <= addr) {
            None | Some(0) => Some(Origin::Site(j.site)),
            Some(n) => Some(Origin::Moved(j.copies[n].1)),
        }
    }
}

/// What the planner needs of an object.
pub struct Object<'a> {
    /// The object's bytes at a link-time address, with their file offset.
    pub bytes_at: &'a dyn Fn(u64) -> Option<(&'a [u8], u64)>,
    /// Addresses something is known to jump to or call.
    pub targets: &'a BTreeSet<u64>,
    /// Whether a site's step is reported at a caller (its descriptor's
    /// runtime flag: the dispatcher copies the stack for unwinding).
    pub reports_caller: &'a dyn Fn(u64) -> bool,
    /// The link-time address of file offset.
    pub vaddr_of: &'a dyn Fn(u64) -> Option<u64>,
    /// The end of the function holding an address, when known: a jump
    /// never displaces code past it (padding, the next function).
    pub function_end: &'a dyn Fn(u64) -> Option<u64>,
    /// The displacements' top byte: [`REGION_BYTE`], or [`LOW_REGION_BYTE`]
    /// for an executable that is not position-independent.
    pub region: u8,
}

/// Plans a trampoline for every site (sorted by file offset) the dispatcher
/// can take.
pub fn plan(sites: &[Site], object: &Object<'_>) -> Trampolines {
    let mut out = Trampolines::default();
    let starts: BTreeSet<u64> = sites.iter().map(|s| s.offset).collect();
    let mut cursor = 0u64;
    for site in sites.iter().filter(|s| s.kind != SiteKind::Tick) {
        match place(site, object, &starts, &mut cursor, &mut out) {
            Some(j) => out.insert(site.offset, j),
            None => out.without += 1,
        }
    }
    out.cursor = cursor;
    out
}

/// The instructions after `site` (at `va`) that its jump displaces, when
/// none of them may not be moved.
fn displaced(
    va: u64,
    len: u64,
    object: &Object<'_>,
    starts: &BTreeSet<u64>,
) -> Option<Vec<Instruction>> {
    let mut out = Vec::new();
    let mut at = va + len;
    let end = (object.function_end)(va).unwrap_or(u64::MAX);
    // Nothing may be reached inside the patch, even where the decoder, out
    // of step with the code, sees no instruction start.
    if object.targets.range(va + 1..va + 5).next().is_some() {
        return None;
    }
    while at < va + 5 {
        if at >= end {
            return None;
        }
        let (bytes, offset) = (object.bytes_at)(at)?;
        if object.targets.contains(&at) || starts.contains(&offset) {
            return None;
        }
        let i =
            Decoder::with_ip(64, &bytes[..bytes.len().min(15)], at, DecoderOptions::NONE).decode();
        if i.is_invalid() || !movable(&i) {
            return None;
        }
        out.push(i);
        at = i.next_ip();
    }
    Some(out)
}

/// Whether an instruction may run in a trampoline instead of its place:
/// one that goes on to the next or branches directly, and whose meaning
/// does not depend on where it runs but through what re-encoding fixes (a
/// RIP-relative operand, a branch's target). Calls would leave a return
/// address into the trampoline for unwinders to find; system calls and
/// traps are steps the monitor locates by address.
fn movable(i: &Instruction) -> bool {
    let direct = |i: &Instruction| i.op0_kind() == OpKind::NearBranch64;
    let flow = match i.flow_control() {
        FlowControl::Next => true,
        FlowControl::ConditionalBranch | FlowControl::UnconditionalBranch => direct(i),
        _ => false,
    };
    flow && !matches!(
        i.mnemonic(),
        Mnemonic::Syscall
            | Mnemonic::Sysenter
            | Mnemonic::Rdtsc
            | Mnemonic::Rdtscp
            | Mnemonic::Cpuid
            | Mnemonic::Pause
            | Mnemonic::Xbegin
            | Mnemonic::Xend
            | Mnemonic::Xabort
            | Mnemonic::Endbr64
    ) && !i.has_lock_prefix()
}

/// Places `site`'s trampoline at the first address from `cursor` its jump
/// can reach, and advances `cursor` past it.
fn place(
    site: &Site,
    object: &Object<'_>,
    starts: &BTreeSet<u64>,
    cursor: &mut u64,
    out: &mut Trampolines,
) -> Option<Jump> {
    let va = (object.vaddr_of)(site.offset)?;
    let (instr, operand) = out_of_line::operand(site, va)?;
    let moved = displaced(va, u64::from(site.len), object, starts)?;
    let gives_way = match site.kind {
        _ if !site.spins => 0,
        SiteKind::Spin => abi::SITES_YIELD_FLAG,
        _ => abi::SITES_RETRY_FLAG,
    };
    let runtime = (object.reports_caller)(site.offset);
    // The prologue, the copy, then the descriptor, 8-aligned.
    let layout = |entry: u64, code: &[u8]| {
        let desc = (entry + PROLOGUE + code.len() as u64).next_multiple_of(8);
        let mut t = prologue(entry, desc, (entry & !(PAGE - 1)) + PAGE - DOOR_WORD);
        t.extend_from_slice(code);
        t.resize((desc - entry) as usize, 0xcc);
        let copy = entry + PROLOGUE;
        t.extend_from_slice(&descriptor(va, desc, copy, &operand, runtime, gives_way));
        t
    };
    let shape = Shape {
        before: PROLOGUE,
        after: DESCRIPTOR + 8,
        layout: &layout,
        tick: false,
    };
    fit(instr, &moved, &shape, object, cursor, out)
}

/// How a trampoline is laid out around its copy.
struct Shape<'a> {
    /// Bytes of its own code before the copy.
    before: u64,
    /// Bytes it may need after the copy.
    after: u64,
    /// The whole trampoline at an entry, around the copy's bytes.
    layout: &'a dyn Fn(u64, &[u8]) -> Vec<u8>,
    /// Whether it is a tick's.
    tick: bool,
}

/// Finds room for a trampoline of `shape` whose copy is of `instr` (the
/// site's) and of `moved`, writes it into the image and advances `cursor`
/// past it.
fn fit(
    instr: Instruction,
    moved: &[Instruction],
    shape: &Shape<'_>,
    object: &Object<'_>,
    cursor: &mut u64,
    out: &mut Trampolines,
) -> Option<Jump> {
    let va = instr.ip();
    let (before, after) = (shape.before, shape.after);
    // The jump's displacement bytes that stand where a moved instruction
    // starts must trap.
    let mut must_trap = [false; 4];
    for m in moved {
        must_trap[(m.ip() - va - 1) as usize] = true;
    }
    let back = moved.last().map_or(instr.next_ip(), |m| m.next_ip());
    let region = (va + 5).wrapping_add((u32::from(object.region) << 24) as i32 as i64 as u64);
    let region_end = region.wrapping_add(1 << 24);
    let mut block: Vec<Instruction> = std::iter::once(instr)
        .chain(moved.iter().copied())
        .collect();
    block.push(Instruction::with_branch(Code::Jmp_rel32_64, back).ok()?);
    let mut entry = (*cursor).max(region);
    // The copy's size may depend on where it lands (a branch's form): place,
    // encode, and again where the size changed.
    let mut size = before + encode(&block, region + before, object)?.0.len() as u64 + after;
    for _ in 0..4 {
        entry = find_entry(entry, va, size, &must_trap, region_end, object.region)?;
        let (code, offsets) = encode(&block, entry + before, object)?;
        let t = (shape.layout)(entry, &code);
        if t.len() as u64 > size {
            size = t.len() as u64;
            continue;
        }
        let mut copies: Vec<(u64, u64)> = offsets
            .iter()
            .zip(block.iter())
            .map(|(o, i)| (entry + before + u64::from(*o), i.ip()))
            .collect();
        let jump_back = copies.pop()?.0;
        let after = copies.get(1).map_or(back, |c| c.0);
        let page = entry & !(PAGE - 1);
        let image = out.pages.entry(page).or_insert_with(new_page);
        let at = (entry - page) as usize;
        image[at..at + t.len()].copy_from_slice(&t);
        let rel = entry.wrapping_sub(va + 5) as u32;
        let mut patch = [0xe9, 0, 0, 0, 0];
        patch[1..].copy_from_slice(&rel.to_le_bytes());
        *cursor = entry + t.len() as u64;
        return Some(Jump {
            site: va,
            patch,
            entry,
            after,
            end: entry + t.len() as u64,
            copies,
            back,
            jump_back,
            tick: shape.tick,
        });
    }
    None
}

/// Plans a tick for each loop (the last instructions of its body, up to
/// its backward branch) and returns the tick sites: in each, the last
/// instruction whose jump displaces nothing that may not move, so that its
/// trampoline counts the loop's iterations.
pub fn plan_ticks(
    loops: &[Vec<Instruction>],
    sites: &[Site],
    object: &Object<'_>,
    out: &mut Trampolines,
) -> Vec<Site> {
    let starts: BTreeSet<u64> = sites.iter().map(|s| s.offset).collect();
    // Code the jumps already cover: [site, back).
    let mut covered: BTreeMap<u64, u64> = out.jumps.values().map(|j| (j.site, j.back)).collect();
    let mut cursor = out.cursor;
    let mut ticks = Vec::new();
    for instrs in loops {
        for instr in instrs.iter().rev() {
            let va = instr.ip();
            if !movable(instr) || overlaps(&covered, va, va + 5) {
                continue;
            }
            let Some(moved) = displaced(va, instr.len() as u64, object, &starts) else {
                continue;
            };
            let Some((bytes, offset)) = (object.bytes_at)(va) else {
                continue;
            };
            let layout = |_: u64, code: &[u8]| {
                let mut t = tick_prologue();
                t.extend_from_slice(code);
                t
            };
            let shape = Shape {
                before: TICK_PROLOGUE,
                after: 0,
                layout: &layout,
                tick: true,
            };
            let Some(j) = fit(*instr, &moved, &shape, object, &mut cursor, out) else {
                continue;
            };
            covered.insert(va, j.back);
            out.insert(offset, j);
            let mut b = [0u8; 15];
            b[..instr.len()].copy_from_slice(&bytes[..instr.len()]);
            ticks.push(Site {
                offset,
                kind: SiteKind::Tick,
                spins: false,
                fast: false,
                bytes: b,
                len: instr.len() as u8,
                acquires: None,
            });
            break;
        }
    }
    out.cursor = cursor;
    ticks
}

/// Whether `[lo, hi)` meets a range of `covered`.
fn overlaps(covered: &BTreeMap<u64, u64>, lo: u64, hi: u64) -> bool {
    covered
        .range(..hi)
        .next_back()
        .is_some_and(|(_, end)| *end > lo)
}

/// The first address from `from` where a trampoline of `size` bytes fits
/// in one page (before its door word), 8-aligned, below `end`, and whose
/// displacement from the jump at `va` has trapping bytes where `must_trap`
/// says and `region` on top.
fn find_entry(
    from: u64,
    va: u64,
    size: u64,
    must_trap: &[bool; 4],
    end: u64,
    region: u8,
) -> Option<u64> {
    let mut e = from.next_multiple_of(8);
    'search: while e < end {
        let page = e & !(PAGE - 1);
        if e + size > page + PAGE - DOOR_WORD {
            e = page + PAGE;
            continue;
        }
        let rel = e.wrapping_sub(va + 5) as u32;
        for (k, trap) in must_trap.iter().enumerate() {
            let byte = (rel >> (8 * k)) as u8;
            if *trap && !TRAP_BYTES.contains(&byte) {
                // On to where this byte of the displacement next changes.
                let step = 1u64 << (8 * k);
                e = (e + step - u64::from(rel) % step).next_multiple_of(8);
                continue 'search;
            }
        }
        if (rel >> 24) as u8 != region {
            return None;
        }
        return Some(e);
    }
    None
}

/// The copied instructions encoded from `ip`, with each one's offset.
fn encode(block: &[Instruction], ip: u64, object: &Object<'_>) -> Option<(Vec<u8>, Vec<u32>)> {
    if let Some(verbatim) = encode_verbatim(block, ip, object) {
        return Some(verbatim);
    }
    // The encoder takes a branch to an instruction of the block for a branch
    // to its copy; but a branch back to the site must reach the site (a new
    // step), not its copy. Addresses no branch reaches tell them apart;
    // targets and RIP-relative operands are absolute and stay.
    let block: Vec<Instruction> = block
        .iter()
        .enumerate()
        .map(|(n, i)| {
            let mut i = *i;
            i.set_ip(u64::MAX - 64 * (n as u64 + 1));
            // A short branch's target is far now.
            i.as_near_branch();
            i
        })
        .collect();
    let r = BlockEncoder::encode(
        64,
        InstructionBlock::new(&block, ip),
        BlockEncoderOptions::DONT_FIX_BRANCHES
            | BlockEncoderOptions::RETURN_NEW_INSTRUCTION_OFFSETS,
    )
    .ok()?;
    Some((r.code_buffer, r.new_instruction_offsets))
}

/// The block's instructions copied byte for byte, then its final jump, when
/// none of them depends on where it runs (no branch, no RIP-relative
/// operand): most copies. The block encoder costs microseconds a block,
/// and a compiler's executable has a quarter of a million loops to tick.
fn encode_verbatim(
    block: &[Instruction],
    ip: u64,
    object: &Object<'_>,
) -> Option<(Vec<u8>, Vec<u32>)> {
    let (jump, copied) = block.split_last()?;
    let mut code = Vec::with_capacity(32);
    let mut offsets = Vec::with_capacity(block.len());
    for i in copied {
        if i.flow_control() != FlowControl::Next || i.is_ip_rel_memory_operand() {
            return None;
        }
        let (bytes, _) = (object.bytes_at)(i.ip())?;
        offsets.push(code.len() as u32);
        code.extend_from_slice(bytes.get(..i.len())?);
    }
    offsets.push(code.len() as u32);
    let rel = jump
        .near_branch_target()
        .wrapping_sub(ip + code.len() as u64 + 5) as i64;
    let rel = i32::try_from(rel).ok()?;
    code.push(0xe9);
    code.extend_from_slice(&rel.to_le_bytes());
    Some((code, offsets))
}

/// A fresh image page: traps everywhere, and the dispatcher's door in its
/// last word.
fn new_page() -> Vec<u8> {
    let mut p = vec![0xcc; PAGE as usize];
    let door = abi::SITES_VA + abi::SITES_JUMP_DOOR;
    p[(PAGE - DOOR_WORD) as usize..].copy_from_slice(&door.to_le_bytes());
    p
}

/// `mov %rax, <dispatcher data>; lea desc(%rip), %rax; jmp *door(%rip)`
/// at `entry`.
fn prologue(entry: u64, desc: u64, door: u64) -> Vec<u8> {
    let mut t = vec![0x48, 0xa3];
    t.extend_from_slice(&abi::SITES_DATA_VA.to_le_bytes());
    t.extend_from_slice(&[0x48, 0x8d, 0x05]);
    t.extend_from_slice(&(desc.wrapping_sub(entry + 17) as u32).to_le_bytes());
    t.extend_from_slice(&[0xff, 0x25]);
    t.extend_from_slice(&(door.wrapping_sub(entry + PROLOGUE) as u32).to_le_bytes());
    debug_assert_eq!(t.len() as u64, PROLOGUE);
    t
}

/// A tick's counting code at `entry`, before its copy: one less on the
/// process's tick counter, and at zero, with every register and flag as
/// the program had them, the `int3` the monitor takes for a tick (it sets
/// the counter again and moves the thread back to the site). Neither flags
/// nor the stack are touched: a loop may carry a flag around (`adc`), and
/// a leaf function's red zone lies below the stack pointer.
fn tick_prologue() -> Vec<u8> {
    let save = (abi::SITES_DATA_VA + abi::SITES_TICK_SAVE * 8).to_le_bytes();
    let count = (abi::SITES_DATA_VA + abi::SITES_TICK_COUNT * 8).to_le_bytes();
    let mut t = Vec::with_capacity(TICK_PROLOGUE as usize);
    t.extend_from_slice(&[0x48, 0xa3]); // mov %rax, save
    t.extend_from_slice(&save);
    t.extend_from_slice(&[0x48, 0xa1]); // mov count, %rax
    t.extend_from_slice(&count);
    t.extend_from_slice(&[0x48, 0x91]); // xchg %rax, %rcx
    t.extend_from_slice(&[0x48, 0x8d, 0x49, 0xff]); // lea -1(%rcx), %rcx
    t.extend_from_slice(&[0xe3, 24]); // jrcxz trap
    t.extend_from_slice(&[0x48, 0x91]); // xchg %rax, %rcx
    t.extend_from_slice(&[0x48, 0xa3]); // mov %rax, count
    t.extend_from_slice(&count);
    t.extend_from_slice(&[0x48, 0xa1]); // mov save, %rax
    t.extend_from_slice(&save);
    t.extend_from_slice(&[0xeb, 13]); // jmp copy
    t.extend_from_slice(&[0x48, 0x91]); // trap: xchg %rax, %rcx
    t.extend_from_slice(&[0x48, 0xa1]); // mov save, %rax
    t.extend_from_slice(&save);
    t.push(0xcc); // int3
    debug_assert_eq!(t.len() as u64, TICK_PROLOGUE);
    debug_assert_eq!(t[TICK_TRAP as usize], 0xcc);
    t
}

/// The descriptor at `desc` of the site at `va` whose copy is at `copy`.
fn descriptor(
    va: u64,
    desc: u64,
    copy: u64,
    o: &out_of_line::Operand,
    runtime: bool,
    gives_way: u8,
) -> [u8; DESCRIPTOR as usize] {
    let mut d = [0u8; DESCRIPTOR as usize];
    d[0..8].copy_from_slice(&va.wrapping_sub(desc).to_le_bytes());
    let displacement = match o.rip_relative {
        true => o.displacement.wrapping_sub(desc),
        false => o.displacement,
    };
    d[8..16].copy_from_slice(&displacement.to_le_bytes());
    d[16] = o.base;
    d[17] = o.index;
    d[18] = o.scale_shift
        | if runtime { abi::SITES_RUNTIME_FLAG } else { 0 }
        | if o.rip_relative {
            abi::SITES_RIPREL_FLAG
        } else {
            0
        }
        | gives_way;
    d[19] = o.size;
    d[20..24].copy_from_slice(&(copy.wrapping_sub(desc) as u32).to_le_bytes());
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An object of one function at 0x401000 holding `code`.
    /// Where the tests' one-function objects are loaded.
    const BASE: u64 = 0x5555_5555_5000;

    /// `f` of an object of one function at [`BASE`] (file offset 0x1000)
    /// holding `code`, with `targets` known.
    fn with_object<R>(code: &[u8], targets: &[u64], f: impl FnOnce(&Object<'_>) -> R) -> R {
        let bytes_at = |va: u64| -> Option<(&[u8], u64)> {
            let off = va.checked_sub(BASE)? as usize;
            (off < code.len()).then(|| (&code[off..], off as u64 + 0x1000))
        };
        let targets: BTreeSet<u64> = targets.iter().copied().collect();
        let vaddr_of = |off: u64| Some(off - 0x1000 + BASE);
        let no = |_: u64| false;
        f(&Object {
            bytes_at: &bytes_at,
            targets: &targets,
            reports_caller: &no,
            vaddr_of: &vaddr_of,
            function_end: &|_| None,
            region: REGION_BYTE,
        })
    }

    /// The trampolines of atomics at `sites` (address, length) in `code`.
    fn object_plan(code: &[u8], sites: &[(u64, usize)], targets: &[u64]) -> Trampolines {
        with_object(code, targets, |object| {
            let all: Vec<Site> = sites
                .iter()
                .map(|(va, len)| {
                    let (b, off) = (object.bytes_at)(*va).unwrap();
                    let mut bytes = [0u8; 15];
                    bytes[..*len].copy_from_slice(&b[..*len]);
                    Site {
                        offset: off,
                        kind: SiteKind::AtomicRmw,
                        spins: false,
                        fast: true,
                        bytes,
                        len: *len as u8,
                        acquires: None,
                    }
                })
                .collect();
            plan(&all, object)
        })
    }

    fn disassemble(code: &[u8], ip: u64, n: usize) -> Vec<String> {
        let mut d = Decoder::with_ip(64, code, ip, DecoderOptions::NONE);
        let mut f = iced_x86::GasFormatter::new();
        let mut out = Vec::new();
        use iced_x86::Formatter;
        while d.can_decode() && out.len() < n {
            let mut s = String::new();
            f.format(&d.decode(), &mut s);
            out.push(s);
        }
        out
    }

    fn image_bytes(t: &Trampolines, at: u64, n: usize) -> Vec<u8> {
        let page = at & !(PAGE - 1);
        let off = (at - page) as usize;
        t.page(page).unwrap()[off..off + n].to_vec()
    }

    #[test]
    fn every_trap_byte_is_an_instruction_that_traps_whatever_follows() {
        for b in TRAP_BYTES {
            for next in [0x00, 0x48, 0x90, 0xc3, 0xff] {
                let code = [b, next, 0, 0, 0, 0, 0, 0];
                let i = Decoder::with_ip(64, &code, 0, DecoderOptions::NONE).decode();
                let traps = i.is_invalid() || matches!(i.mnemonic(), Mnemonic::Int3);
                assert!(traps, "{b:#x} {next:#x} decodes as {:?}", i.mnemonic());
            }
        }
        assert!(TRAP_BYTES.contains(&REGION_BYTE) && TRAP_BYTES.contains(&LOW_REGION_BYTE));
    }

    #[test]
    fn a_four_byte_site_moves_its_successor_and_the_byte_over_it_traps() {
        // lock cmpxchg %esi,(%rdi); jne -6 (back to the site); ret
        let code = [0xf0, 0x0f, 0xb1, 0x37, 0x75, 0xfa, 0xc3];
        let t = object_plan(&code, &[(0x5555_5555_5000, 4)], &[]);
        let j = t.jump(0x1000).expect("a trampoline");
        assert_eq!(j.patch[0], 0xe9);
        assert_eq!(j.patch[4], REGION_BYTE, "the moved jne's first byte traps");
        let rel = i32::from_le_bytes(j.patch[1..].try_into().unwrap());
        assert_eq!(0x5555_5555_5005u64.wrapping_add(rel as i64 as u64), j.entry);
        assert!(j.entry < 0x5555_5555_5000 - 0x3300_0000 + 5);
        assert!(j.entry >= 0x5555_5555_5000 - 0x3400_0000 + 5);
        assert_eq!(j.back, 0x5555_5555_5006, "on after the jne");
        assert_eq!(t.moved_copy(0x5555_5555_5004), Some(j.after));
        let text = disassemble(&image_bytes(&t, j.entry, 64), j.entry, 6);
        assert_eq!(text[0], "movabs %rax,0x7FFFF8300000");
        assert!(text[1].starts_with("lea "), "{text:?}");
        assert!(text[2].starts_with("jmpq *"), "{text:?}");
        assert_eq!(text[3], "lock cmpxchg %esi,(%rdi)");
        assert_eq!(text[4], "jne 0x0000555555555000");
        assert_eq!(text[5], "jmp 0x0000555555555006");
        assert_eq!(t.origin(j.entry), Some(Origin::Site(0x5555_5555_5000)));
        assert_eq!(t.origin(j.after), Some(Origin::Moved(0x5555_5555_5004)));
    }

    #[test]
    fn a_loop_ticks_from_its_branch_and_counts_without_touching_flags() {
        // loop: add %rax,%rdx; dec %ecx; jne loop; mov %rdx,%rax; ret
        let code = [
            0x48, 0x01, 0xc2, 0xff, 0xc9, 0x75, 0xf9, 0x48, 0x89, 0xd0, 0xc3,
        ];
        let base = BASE;
        let (t, ticks) = with_object(&code, &[base], |object| {
            let mut t = plan(&[], object);
            // The loop's body as the finder passes it: add, dec, jne.
            let body: Vec<Instruction> = Decoder::with_ip(64, &code, base, DecoderOptions::NONE)
                .into_iter()
                .take(3)
                .collect();
            let ticks = plan_ticks(&[body], &[], object, &mut t);
            (t, ticks)
        });
        assert_eq!(ticks.len(), 1);
        // The jne and what follows it can move: the tick is the branch.
        assert_eq!((ticks[0].offset, ticks[0].kind), (0x1005, SiteKind::Tick));
        let j = t.jump(0x1005).unwrap();
        assert!(j.tick);
        assert_eq!(t.tick_at(j.entry + TICK_TRAP), Some(base + 5));
        assert_eq!(t.tick_at(j.entry + TICK_TRAP - 1), None);
        let text = disassemble(&image_bytes(&t, j.entry, 96), j.entry, 15);
        let ops: Vec<&str> = text
            .iter()
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        assert_eq!(
            ops,
            [
                "movabs", "movabs", "xchg", "lea", "jrcxz", "xchg", "movabs", "movabs", "jmp",
                "xchg", "movabs", "int3", "jne", "mov", "jmp"
            ],
            "{text:?}"
        );
        assert_eq!(
            text[12], "jne 0x0000555555555000",
            "the copy branches to the loop"
        );
        assert_eq!(t.origin(j.entry + 30), Some(Origin::Site(base + 5)));
    }

    #[test]
    fn a_known_jump_target_is_never_moved() {
        let code = [0xf0, 0x0f, 0xb1, 0x37, 0x75, 0xfa, 0xc3];
        let t = object_plan(&code, &[(0x5555_5555_5000, 4)], &[0x5555_5555_5004]);
        assert!(t.jump(0x1000).is_none());
        assert_eq!(t.without, 1);
    }

    #[test]
    fn a_long_site_moves_nothing_and_jumps_back_after_itself() {
        // lock xadd %eax,0x10(%rdi,%rcx,4); ret
        let code = [0xf0, 0x0f, 0xc1, 0x44, 0x8f, 0x10, 0xc3];
        let t = object_plan(&code, &[(0x5555_5555_5000, 6)], &[0x5555_5555_5006]);
        let j = t.jump(0x1000).unwrap();
        assert_eq!(
            (j.copies.len(), j.back, j.after),
            (1, 0x5555_5555_5006, 0x5555_5555_5006)
        );
    }

    #[test]
    fn a_two_byte_site_traps_in_each_moved_first_byte() {
        // xchg %eax,(%rdi); mov %eax,%ecx (2 bytes); nop; ret
        let code = [0x87, 0x07, 0x89, 0xc1, 0x90, 0xc3];
        let t = object_plan(&code, &[(0x5555_5555_5000, 2)], &[]);
        let j = t.jump(0x1000).unwrap();
        // Moved: the mov at +2 and the nop at +4.
        assert_eq!(j.copies.len(), 3);
        assert!(TRAP_BYTES.contains(&j.patch[2]), "{:x?}", j.patch);
        assert_eq!(j.patch[4], REGION_BYTE);
        assert_eq!(j.back, 0x5555_5555_5005);
    }

    #[test]
    fn calls_and_system_calls_are_not_moved() {
        // lock incl (%rdi); call +0
        let call = [0xf0, 0xff, 0x07, 0xe8, 0, 0, 0, 0, 0xc3];
        assert!(object_plan(&call, &[(0x5555_5555_5000, 3)], &[]).is_empty());
        // xchg %eax,(%rdi); syscall
        let sys = [0x87, 0x07, 0x0f, 0x05, 0xc3];
        assert!(object_plan(&sys, &[(0x5555_5555_5000, 2)], &[]).is_empty());
    }

    #[test]
    fn trampolines_of_neighbouring_sites_share_pages_and_never_overlap() {
        let mut code = Vec::new();
        let mut sites = Vec::new();
        for _ in 0..200 {
            sites.push((0x5555_5555_5000 + code.len() as u64, 4));
            code.extend_from_slice(&[0xf0, 0x0f, 0xb1, 0x37, 0x75, 0xfa]);
        }
        code.push(0xc3);
        let t = object_plan(&code, &sites, &[]);
        assert_eq!(t.len(), 200);
        let mut spans: Vec<(u64, u64)> = t.jumps().map(|(_, j)| (j.entry, j.end)).collect();
        spans.sort();
        for w in spans.windows(2) {
            assert!(w[0].1 <= w[1].0);
        }
        assert!(t.pages().count() <= 6, "{} pages", t.pages().count());
        for (page, bytes) in t.pages() {
            let door = u64::from_le_bytes(bytes[4088..].try_into().unwrap());
            assert_eq!(door, abi::SITES_VA + abi::SITES_JUMP_DOOR, "{page:x}");
        }
    }
}
