//! Executing a sync site's instruction for its thread.
//!
//! A patched site traps before its instruction runs; the thread's step is
//! taken there, and when the thread runs again the monitor executes the
//! instruction itself, on the thread's registers and guest memory, and
//! resumes after it. Emulating (rather than running a relocated copy) keeps
//! the guest's address space exactly as without sites, needs no executable
//! pages of the monitor's within reach of the code, and tells the monitor
//! what the instruction read and wrote, which lock inference and reads-from
//! coverage need. The instructions are the ones sites are made of: atomic
//! read-modify-writes (with or without LOCK), plain moves, compares and
//! tests of memory, PAUSE and near jumps; [`supported`] says which, and
//! discovery patches nothing else. Flags follow the Intel manual; flags it
//! leaves undefined are left unchanged (or cleared, for the auxiliary carry
//! of the logical operations).

use iced_x86::{ConditionCode, Decoder, DecoderOptions, Instruction, Mnemonic, OpKind, Register};

use crate::arch::cpu::UserRegs;

const CF: u64 = 1 << 0;
const PF: u64 = 1 << 2;
const AF: u64 = 1 << 4;
const ZF: u64 = 1 << 6;
const SF: u64 = 1 << 7;
const OF: u64 = 1 << 11;
const ARITH: u64 = CF | PF | AF | ZF | SF | OF;

/// Guest memory as the thread sees it (its rights apply).
pub trait Memory {
    fn read(&mut self, va: u64, buf: &mut [u8]) -> Result<(), Fault>;
    fn write(&mut self, va: u64, buf: &[u8]) -> Result<(), Fault>;
}

/// A memory access the thread may not make: the instruction faults (and
/// has done nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// A page fault at this address.
    Page { addr: u64 },
    /// A general-protection fault (a misaligned CMPXCHG16B).
    General,
}

/// What a site's instruction does to memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessKind {
    Load,
    Store,
    /// Exchange (XCHG).
    Swap,
    /// Compare-and-swap; whether it stored, and the value it expected
    /// (the low 64 bits for 16-byte operands).
    CompareSwap {
        stored: bool,
        expected: u64,
    },
    /// Another read-modify-write (ADD, XADD, BTS, ...).
    Update,
}

/// What an executed instruction did to memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    pub addr: u64,
    /// Width in bytes.
    pub size: u8,
    pub kind: AccessKind,
    /// The value read (the low 64 bits for 16-byte operands).
    pub read: u64,
    /// The value written, when it wrote.
    pub written: Option<u64>,
}

/// Decodes the instruction `bytes` at address `ip`.
pub fn decode(bytes: &[u8], ip: u64) -> Instruction {
    Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE).decode()
}

/// Whether [`execute`] executes `i`.
pub fn supported(i: &Instruction) -> bool {
    use Mnemonic::*;
    if i.is_invalid() {
        return false;
    }
    match i.mnemonic() {
        Pause => return true,
        m if m == Jmp || is_jcc(m) => return i.op_kind(0) == OpKind::NearBranch64,
        _ => {}
    }
    if i.has_rep_prefix() || i.has_repne_prefix() {
        return false;
    }
    let memory_operands = (0..i.op_count())
        .filter(|n| i.op_kind(*n) == OpKind::Memory)
        .count();
    let plain_operands = (0..i.op_count()).all(|n| match i.op_kind(n) {
        OpKind::Register => i.op_register(n).is_gpr(),
        OpKind::Memory => true,
        k => is_immediate(k),
    });
    let segment_ok = matches!(
        i.memory_segment(),
        Register::DS | Register::SS | Register::ES | Register::CS | Register::FS
    );
    if memory_operands != 1 || !segment_ok {
        return false;
    }
    match i.mnemonic() {
        Cmpxchg8b | Cmpxchg16b => true,
        Add | Sub | And | Or | Xor | Adc | Sbb | Inc | Dec | Neg | Not | Xadd | Xchg | Cmpxchg
        | Bts | Btr | Btc | Mov | Movzx | Movsx | Movsxd | Cmp | Test => {
            plain_operands && (1..=8).contains(&i.memory_size().size())
        }
        _ => false,
    }
}

/// Whether an operand is an immediate of any width.
pub(super) fn is_immediate(k: OpKind) -> bool {
    matches!(
        k,
        OpKind::Immediate8
            | OpKind::Immediate16
            | OpKind::Immediate32
            | OpKind::Immediate64
            | OpKind::Immediate8to16
            | OpKind::Immediate8to32
            | OpKind::Immediate8to64
            | OpKind::Immediate32to64
    )
}

fn is_jcc(m: Mnemonic) -> bool {
    use Mnemonic::*;
    matches!(
        m,
        Jo | Jno | Jb | Jae | Je | Jne | Jbe | Ja | Js | Jns | Jp | Jnp | Jl | Jge | Jle | Jg
    )
}

/// The value of a general register (any width).
fn get(regs: &UserRegs, r: Register) -> u64 {
    let full = match r.full_register() {
        Register::RAX => regs.rax,
        Register::RBX => regs.rbx,
        Register::RCX => regs.rcx,
        Register::RDX => regs.rdx,
        Register::RSI => regs.rsi,
        Register::RDI => regs.rdi,
        Register::RBP => regs.rbp,
        Register::RSP => regs.rsp,
        Register::R8 => regs.r8,
        Register::R9 => regs.r9,
        Register::R10 => regs.r10,
        Register::R11 => regs.r11,
        Register::R12 => regs.r12,
        Register::R13 => regs.r13,
        Register::R14 => regs.r14,
        Register::R15 => regs.r15,
        Register::RIP => regs.rip,
        _ => 0,
    };
    if matches!(r, Register::AH | Register::BH | Register::CH | Register::DH) {
        return (full >> 8) & 0xff;
    }
    full & mask(r.size() as u32 * 8)
}

/// Sets a general register as x86 does: 32-bit writes clear the upper
/// half, 8- and 16-bit writes keep the rest.
fn set(regs: &mut UserRegs, r: Register, v: u64) {
    let slot = match r.full_register() {
        Register::RAX => &mut regs.rax,
        Register::RBX => &mut regs.rbx,
        Register::RCX => &mut regs.rcx,
        Register::RDX => &mut regs.rdx,
        Register::RSI => &mut regs.rsi,
        Register::RDI => &mut regs.rdi,
        Register::RBP => &mut regs.rbp,
        Register::RSP => &mut regs.rsp,
        Register::R8 => &mut regs.r8,
        Register::R9 => &mut regs.r9,
        Register::R10 => &mut regs.r10,
        Register::R11 => &mut regs.r11,
        Register::R12 => &mut regs.r12,
        Register::R13 => &mut regs.r13,
        Register::R14 => &mut regs.r14,
        Register::R15 => &mut regs.r15,
        _ => return,
    };
    *slot = match (r, r.size()) {
        (Register::AH | Register::BH | Register::CH | Register::DH, _) => {
            (*slot & !0xff00) | ((v & 0xff) << 8)
        }
        (_, 8) => v,
        (_, 4) => v & 0xffff_ffff,
        (_, s) => (*slot & !mask(s as u32 * 8)) | (v & mask(s as u32 * 8)),
    };
}

fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

fn sign(bits: u32) -> u64 {
    1u64 << (bits - 1)
}

/// The effective address of `i`'s memory operand.
pub fn address(i: &Instruction, regs: &UserRegs, fs_base: u64) -> u64 {
    let seg = match i.memory_segment() {
        Register::FS => fs_base,
        _ => 0,
    };
    if i.is_ip_rel_memory_operand() {
        return seg.wrapping_add(i.ip_rel_memory_address());
    }
    let base = match i.memory_base() {
        Register::None => 0,
        r => get(regs, r),
    };
    let index = match i.memory_index() {
        Register::None => 0,
        r => get(regs, r).wrapping_mul(i.memory_index_scale() as u64),
    };
    seg.wrapping_add(base)
        .wrapping_add(index)
        .wrapping_add(i.memory_displacement64())
}

fn load(mem: &mut dyn Memory, addr: u64, size: usize) -> Result<u128, Fault> {
    let mut b = [0u8; 16];
    mem.read(addr, &mut b[..size])?;
    Ok(u128::from_le_bytes(b))
}

fn store(mem: &mut dyn Memory, addr: u64, size: usize, v: u128) -> Result<(), Fault> {
    mem.write(addr, &v.to_le_bytes()[..size])
}

/// The flags of a result `r` of width `bits`: sign, zero and parity.
fn szp(r: u64, bits: u32) -> u64 {
    let r = r & mask(bits);
    let mut f = 0;
    if r & sign(bits) != 0 {
        f |= SF;
    }
    if r == 0 {
        f |= ZF;
    }
    if (r as u8).count_ones() % 2 == 0 {
        f |= PF;
    }
    f
}

/// `a + b + carry` and its flags.
fn add(a: u64, b: u64, carry: u64, bits: u32) -> (u64, u64) {
    let wide = a as u128 + b as u128 + carry as u128;
    let r = (wide as u64) & mask(bits);
    let mut f = szp(r, bits);
    if wide > mask(bits) as u128 {
        f |= CF;
    }
    if (a ^ r) & (b ^ r) & sign(bits) != 0 {
        f |= OF;
    }
    if (a ^ b ^ r) & 0x10 != 0 {
        f |= AF;
    }
    (r, f)
}

/// `a - b - borrow` and its flags.
fn sub(a: u64, b: u64, borrow: u64, bits: u32) -> (u64, u64) {
    let r = a.wrapping_sub(b).wrapping_sub(borrow) & mask(bits);
    let mut f = szp(r, bits);
    if (a as u128) < b as u128 + borrow as u128 {
        f |= CF;
    }
    if (a ^ b) & (a ^ r) & sign(bits) != 0 {
        f |= OF;
    }
    if (a ^ b ^ r) & 0x10 != 0 {
        f |= AF;
    }
    (r, f)
}

/// Whether a condition holds for `flags`.
fn holds(c: ConditionCode, flags: u64) -> bool {
    let (cf, zf, sf, of, pf) = (
        flags & CF != 0,
        flags & ZF != 0,
        flags & SF != 0,
        flags & OF != 0,
        flags & PF != 0,
    );
    match c {
        ConditionCode::o => of,
        ConditionCode::no => !of,
        ConditionCode::b => cf,
        ConditionCode::ae => !cf,
        ConditionCode::e => zf,
        ConditionCode::ne => !zf,
        ConditionCode::be => cf || zf,
        ConditionCode::a => !cf && !zf,
        ConditionCode::s => sf,
        ConditionCode::ns => !sf,
        ConditionCode::p => pf,
        ConditionCode::np => !pf,
        ConditionCode::l => sf != of,
        ConditionCode::ge => sf == of,
        ConditionCode::le => zf || sf != of,
        ConditionCode::g => !zf && sf == of,
        ConditionCode::None => true,
    }
}

/// The value of operand `n` that is not memory (a register or immediate),
/// at width `bits`.
fn operand(i: &Instruction, n: u32, regs: &UserRegs, bits: u32) -> u64 {
    match i.op_kind(n) {
        OpKind::Register => get(regs, i.op_register(n)),
        _ => i.immediate(n) & mask(bits),
    }
}

/// Where the memory operand of `i` is and what it holds now, without
/// changing anything: the value a step reports before the instruction runs.
pub fn preview(
    i: &Instruction,
    regs: &UserRegs,
    fs_base: u64,
    mem: &mut dyn Memory,
) -> Option<(u64, u64)> {
    (0..i.op_count()).find(|n| i.op_kind(*n) == OpKind::Memory)?;
    let addr = address(i, regs, fs_base);
    let size = (i.memory_size().size()).clamp(1, 8);
    let v = load(mem, addr, size).ok()?;
    Some((addr, v as u64))
}

/// Executes `i` (a supported instruction) for the thread whose registers
/// are `regs`, and advances `rip` past it (or to a branch's target).
/// Returns what it did to memory. On a fault nothing has changed.
pub fn execute(
    i: &Instruction,
    regs: &mut UserRegs,
    fs_base: u64,
    mem: &mut dyn Memory,
) -> Result<Option<Access>, Fault> {
    use Mnemonic::*;
    let next = i.next_ip();
    match i.mnemonic() {
        Pause => {
            regs.rip = next;
            return Ok(None);
        }
        Jmp => {
            regs.rip = i.near_branch_target();
            return Ok(None);
        }
        m if is_jcc(m) => {
            regs.rip = if holds(i.condition_code(), regs.rflags) {
                i.near_branch_target()
            } else {
                next
            };
            return Ok(None);
        }
        _ => {}
    }
    let addr = address(i, regs, fs_base);
    let size = i.memory_size().size();
    let access = match i.mnemonic() {
        Cmpxchg8b | Cmpxchg16b => wide_compare_swap(regs, mem, addr, size)?,
        _ => {
            let bits = (size * 8) as u32;
            scalar(i, regs, mem, addr, bits)?
        }
    };
    regs.rip = next;
    Ok(Some(access))
}

/// CMPXCHG8B / CMPXCHG16B.
fn wide_compare_swap(
    regs: &mut UserRegs,
    mem: &mut dyn Memory,
    addr: u64,
    size: usize,
) -> Result<Access, Fault> {
    if size == 16 && addr % 16 != 0 {
        return Err(Fault::General);
    }
    let half = (size * 4) as u32;
    let old = load(mem, addr, size)?;
    let expected = ((regs.rdx & mask(half)) as u128) << half | (regs.rax & mask(half)) as u128;
    let stored = old == expected;
    let written = if stored {
        let new = ((regs.rcx & mask(half)) as u128) << half | (regs.rbx & mask(half)) as u128;
        store(mem, addr, size, new)?;
        regs.rflags |= ZF;
        Some(new as u64)
    } else {
        regs.rflags &= !ZF;
        let (lo, hi) = (
            (old as u64) & mask(half),
            ((old >> half) as u64) & mask(half),
        );
        let r = if size == 8 {
            Register::EAX
        } else {
            Register::RAX
        };
        let d = if size == 8 {
            Register::EDX
        } else {
            Register::RDX
        };
        set(regs, r, lo);
        set(regs, d, hi);
        None
    };
    Ok(Access {
        addr,
        size: size as u8,
        kind: AccessKind::CompareSwap {
            stored,
            expected: expected as u64,
        },
        read: old as u64,
        written,
    })
}

/// Every supported instruction with one scalar memory operand.
fn scalar(
    i: &Instruction,
    regs: &mut UserRegs,
    mem: &mut dyn Memory,
    addr: u64,
    bits: u32,
) -> Result<Access, Fault> {
    use Mnemonic::*;
    let size = (bits / 8) as usize;
    let mem_first = i.op_kind(0) == OpKind::Memory;
    let set_flags = |regs: &mut UserRegs, f: u64, which: u64| {
        regs.rflags = (regs.rflags & !which) | (f & which);
    };
    let access = |kind, read, written| Access {
        addr,
        size: size as u8,
        kind,
        read,
        written,
    };
    match i.mnemonic() {
        Mov if mem_first => {
            let v = operand(i, 1, regs, bits);
            store(mem, addr, size, v as u128)?;
            Ok(access(AccessKind::Store, v, Some(v)))
        }
        Mov | Movzx | Movsx | Movsxd => {
            let v = load(mem, addr, size)? as u64;
            let dst = i.op_register(0);
            let out = match i.mnemonic() {
                Movsx | Movsxd => {
                    let shift = 64 - bits;
                    (((v << shift) as i64) >> shift) as u64
                }
                _ => v,
            };
            set(regs, dst, out);
            Ok(access(AccessKind::Load, v, None))
        }
        Cmp | Test => {
            let v = load(mem, addr, size)? as u64;
            let (a, b) = if mem_first {
                (v, operand(i, 1, regs, bits))
            } else {
                (operand(i, 0, regs, bits), v)
            };
            let f = if i.mnemonic() == Cmp {
                sub(a, b, 0, bits).1
            } else {
                szp(a & b, bits)
            };
            set_flags(regs, f, ARITH);
            Ok(access(AccessKind::Load, v, None))
        }
        Xchg => {
            let reg = if mem_first {
                i.op_register(1)
            } else {
                i.op_register(0)
            };
            let old = load(mem, addr, size)? as u64;
            let new = get(regs, reg);
            store(mem, addr, size, new as u128)?;
            set(regs, reg, old);
            Ok(access(AccessKind::Swap, old, Some(new)))
        }
        Cmpxchg => {
            let acc = match bits {
                8 => Register::AL,
                16 => Register::AX,
                32 => Register::EAX,
                _ => Register::RAX,
            };
            let old = load(mem, addr, size)? as u64;
            let expected = get(regs, acc);
            let (_, f) = sub(expected, old, 0, bits);
            set_flags(regs, f, ARITH);
            if old == expected {
                let new = get(regs, i.op_register(1));
                store(mem, addr, size, new as u128)?;
                Ok(access(
                    AccessKind::CompareSwap {
                        stored: true,
                        expected,
                    },
                    old,
                    Some(new),
                ))
            } else {
                set(regs, acc, old);
                Ok(access(
                    AccessKind::CompareSwap {
                        stored: false,
                        expected,
                    },
                    old,
                    None,
                ))
            }
        }
        Xadd => {
            let reg = i.op_register(1);
            let old = load(mem, addr, size)? as u64;
            let (r, f) = add(old, get(regs, reg), 0, bits);
            store(mem, addr, size, r as u128)?;
            set(regs, reg, old);
            set_flags(regs, f, ARITH);
            Ok(access(AccessKind::Update, old, Some(r)))
        }
        Bts | Btr | Btc => bit_update(i, regs, mem, addr, bits),
        _ => {
            // Arithmetic and logic with a memory destination, or a register
            // destination and a memory source.
            let v = load(mem, addr, size)? as u64;
            let carry = regs.rflags & CF;
            let (a, b) = if mem_first {
                (
                    v,
                    if i.op_count() > 1 {
                        operand(i, 1, regs, bits)
                    } else {
                        0
                    },
                )
            } else {
                (operand(i, 0, regs, bits), v)
            };
            // The result, its flags, and which flags the instruction sets.
            let ((r, f), which) = match i.mnemonic() {
                Add => (add(a, b, 0, bits), ARITH),
                Adc => (add(a, b, carry, bits), ARITH),
                Sub => (sub(a, b, 0, bits), ARITH),
                Sbb => (sub(a, b, carry, bits), ARITH),
                And => ((a & b, szp(a & b, bits)), ARITH),
                Or => ((a | b, szp(a | b, bits)), ARITH),
                Xor => ((a ^ b, szp(a ^ b, bits)), ARITH),
                Inc => (add(a, 1, 0, bits), ARITH & !CF),
                Dec => (sub(a, 1, 0, bits), ARITH & !CF),
                Neg => (sub(0, a, 0, bits), ARITH),
                Not => ((!a & mask(bits), 0), 0),
                _ => return Err(Fault::General),
            };
            set_flags(regs, f, which);
            if mem_first {
                store(mem, addr, size, r as u128)?;
                Ok(access(AccessKind::Update, v, Some(r)))
            } else {
                set(regs, i.op_register(0), r);
                Ok(access(AccessKind::Load, v, None))
            }
        }
    }
}

/// BTS, BTR, BTC: the selected bit into CF, then set, cleared or flipped.
/// A register bit offset may address beyond the operand.
fn bit_update(
    i: &Instruction,
    regs: &mut UserRegs,
    mem: &mut dyn Memory,
    addr: u64,
    bits: u32,
) -> Result<Access, Fault> {
    let size = (bits / 8) as usize;
    let (addr, bit) = match i.op_kind(1) {
        OpKind::Register => {
            let raw = get(regs, i.op_register(1));
            let shift = 64 - bits;
            let off = ((raw << shift) as i64) >> shift;
            let word = off.div_euclid(bits as i64);
            (
                addr.wrapping_add((word * size as i64) as u64),
                off.rem_euclid(bits as i64) as u32,
            )
        }
        _ => (addr, (i.immediate(1) as u32) & (bits - 1)),
    };
    let old = load(mem, addr, size)? as u64;
    let m = 1u64 << bit;
    let new = match i.mnemonic() {
        Mnemonic::Bts => old | m,
        Mnemonic::Btr => old & !m,
        _ => old ^ m,
    };
    store(mem, addr, size, new as u128)?;
    regs.rflags = (regs.rflags & !CF) | if old & m != 0 { CF } else { 0 };
    Ok(Access {
        addr,
        size: size as u8,
        kind: AccessKind::Update,
        read: old,
        written: Some(new),
    })
}

/// Whether `i` is an atomic read-modify-write: LOCK-prefixed, or an XCHG
/// with memory (locked by the processor).
pub fn is_atomic(i: &Instruction) -> bool {
    i.has_lock_prefix()
        || (i.mnemonic() == Mnemonic::Xchg
            && (0..i.op_count()).any(|n| i.op_kind(n) == iced_x86::OpKind::Memory))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Guest memory for the tests: 64 bytes at 0x1000.
    struct Ram([u8; 64]);

    impl Memory for Ram {
        fn read(&mut self, va: u64, buf: &mut [u8]) -> Result<(), Fault> {
            let off = va
                .checked_sub(0x1000)
                .filter(|o| *o as usize + buf.len() <= 64);
            let off = off.ok_or(Fault::Page { addr: va })? as usize;
            buf.copy_from_slice(&self.0[off..off + buf.len()]);
            Ok(())
        }
        fn write(&mut self, va: u64, buf: &[u8]) -> Result<(), Fault> {
            let off = va
                .checked_sub(0x1000)
                .filter(|o| *o as usize + buf.len() <= 64);
            let off = off.ok_or(Fault::Page { addr: va })? as usize;
            self.0[off..off + buf.len()].copy_from_slice(buf);
            Ok(())
        }
    }

    fn run(code: &[u8], regs: &mut UserRegs, ram: &mut Ram) -> Result<Option<Access>, Fault> {
        let i = decode(code, 0x400000);
        assert!(supported(&i), "{i}");
        execute(&i, regs, 0, ram)
    }

    fn word(ram: &Ram, at: usize) -> u32 {
        u32::from_le_bytes(ram.0[at..at + 4].try_into().unwrap())
    }

    #[test]
    fn lock_cmpxchg_stores_when_the_word_matches_and_loads_it_when_not() {
        // lock cmpxchg %ecx,(%rdi)
        let code = [0xf0, 0x0f, 0xb1, 0x0f];
        let mut ram = Ram([0; 64]);
        let mut r = UserRegs {
            rdi: 0x1000,
            rax: 0,
            rcx: 1,
            ..Default::default()
        };
        let a = run(&code, &mut r, &mut ram).unwrap().unwrap();
        assert!(matches!(
            a.kind,
            AccessKind::CompareSwap { stored: true, .. }
        ));
        assert_eq!((word(&ram, 0), r.rflags & ZF), (1, ZF));
        assert_eq!(r.rip, 0x400004);
        r.rax = 0xffff_ffff_0000_0000;
        let a = run(&code, &mut r, &mut ram).unwrap().unwrap();
        assert!(matches!(
            a.kind,
            AccessKind::CompareSwap { stored: false, .. }
        ));
        assert_eq!(
            (r.rax, r.rflags & ZF),
            (1, 0),
            "eax gets the word, upper half cleared"
        );
    }

    #[test]
    fn xchg_and_xadd_swap_and_add() {
        let mut ram = Ram([0; 64]);
        ram.0[..4].copy_from_slice(&7u32.to_le_bytes());
        // xchg %eax,(%rdx)
        let mut r = UserRegs {
            rdx: 0x1000,
            rax: 0x1_0000_0009,
            ..Default::default()
        };
        run(&[0x87, 0x02], &mut r, &mut ram).unwrap();
        assert_eq!((word(&ram, 0), r.rax), (9, 7));
        // lock xadd %rax,(%rsi) on a 64-bit word
        ram.0[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        let mut r = UserRegs {
            rsi: 0x1008,
            rax: 1,
            ..Default::default()
        };
        run(&[0xf0, 0x48, 0x0f, 0xc1, 0x06], &mut r, &mut ram).unwrap();
        assert_eq!(r.rax, u64::MAX);
        assert_eq!(u64::from_le_bytes(ram.0[8..16].try_into().unwrap()), 0);
        assert_eq!(r.rflags & (CF | ZF), CF | ZF);
    }

    #[test]
    fn locked_arithmetic_sets_the_flags_the_hardware_does() {
        let mut ram = Ram([0; 64]);
        ram.0[0] = 0x7f;
        // lock addb $1,(%rdi): 0x7f + 1 overflows signed
        let mut r = UserRegs {
            rdi: 0x1000,
            ..Default::default()
        };
        run(&[0xf0, 0x80, 0x07, 0x01], &mut r, &mut ram).unwrap();
        assert_eq!(ram.0[0], 0x80);
        assert_eq!(r.rflags & (OF | SF | ZF | CF | AF), OF | SF | AF);
        // lock decl (%rdi) from 1 to 0 leaves CF alone
        ram.0[..4].copy_from_slice(&1u32.to_le_bytes());
        r.rflags = CF;
        run(&[0xf0, 0xff, 0x0f], &mut r, &mut ram).unwrap();
        assert_eq!(word(&ram, 0), 0);
        assert_eq!(r.rflags & (ZF | CF), ZF | CF);
        // lock subq $5,(%rdi) borrows
        ram.0[..8].copy_from_slice(&3u64.to_le_bytes());
        run(&[0xf0, 0x48, 0x83, 0x2f, 0x05], &mut r, &mut ram).unwrap();
        assert_eq!(
            u64::from_le_bytes(ram.0[..8].try_into().unwrap()),
            (-2i64) as u64
        );
        assert_eq!(r.rflags & (CF | SF | ZF), CF | SF);
    }

    #[test]
    fn bit_test_and_set_with_a_register_offset_reaches_the_next_word() {
        let mut ram = Ram([0; 64]);
        // lock bts %eax,(%rdi) with eax = 33: bit 1 of the second dword
        let mut r = UserRegs {
            rdi: 0x1000,
            rax: 33,
            ..Default::default()
        };
        run(&[0xf0, 0x0f, 0xab, 0x07], &mut r, &mut ram).unwrap();
        assert_eq!((word(&ram, 4), r.rflags & CF), (2, 0));
        run(&[0xf0, 0x0f, 0xab, 0x07], &mut r, &mut ram).unwrap();
        assert_eq!(r.rflags & CF, CF, "the bit was already set");
    }

    #[test]
    fn cmpxchg16b_needs_alignment_and_compares_both_halves() {
        let mut ram = Ram([0; 64]);
        // lock cmpxchg16b (%rdi)
        let code = [0xf0, 0x48, 0x0f, 0xc7, 0x0f];
        let mut r = UserRegs {
            rdi: 0x1008,
            ..Default::default()
        };
        assert_eq!(run(&code, &mut r, &mut ram), Err(Fault::General));
        r.rdi = 0x1010;
        r.rbx = 5;
        r.rcx = 6;
        run(&code, &mut r, &mut ram).unwrap();
        assert_eq!(u64::from_le_bytes(ram.0[16..24].try_into().unwrap()), 5);
        assert_eq!(u64::from_le_bytes(ram.0[24..32].try_into().unwrap()), 6);
        assert_eq!(r.rflags & ZF, ZF);
    }

    #[test]
    fn plain_moves_and_compares_of_globals() {
        let mut ram = Ram([0; 64]);
        // movl $42,0x0(%rip) with rip-relative target 0x1004
        let i = decode(
            &[0xc7, 0x05, 0xfa, 0x0f, 0x00, 0x00, 0x2a, 0x00, 0x00, 0x00],
            0x0000,
        );
        let mut r = UserRegs::default();
        execute(&i, &mut r, 0, &mut ram).unwrap();
        assert_eq!(word(&ram, 4), 42);
        // movsbl (%rdi),%eax of 0xff is -1
        ram.0[0] = 0xff;
        let mut r = UserRegs {
            rdi: 0x1000,
            rax: u64::MAX,
            ..Default::default()
        };
        run(&[0x0f, 0xbe, 0x07], &mut r, &mut ram).unwrap();
        assert_eq!(r.rax, 0xffff_ffff);
        // cmpb $0,(%rdi) on 0xff: not equal, no borrow
        run(&[0x80, 0x3f, 0x00], &mut r, &mut ram).unwrap();
        assert_eq!(r.rflags & (ZF | CF), 0);
    }

    #[test]
    fn a_conditional_branch_follows_the_flags() {
        // je -9 at 0x400000
        let i = decode(&[0x74, 0xf7], 0x400000);
        let mut r = UserRegs {
            rflags: ZF,
            ..Default::default()
        };
        let mut ram = Ram([0; 64]);
        execute(&i, &mut r, 0, &mut ram).unwrap();
        assert_eq!(r.rip, 0x3ffff9);
        r.rflags = 0;
        execute(&i, &mut r, 0, &mut ram).unwrap();
        assert_eq!(r.rip, 0x400002);
    }

    #[test]
    fn a_fault_changes_nothing() {
        let mut ram = Ram([0; 64]);
        let mut r = UserRegs {
            rdi: 0x9000,
            rax: 0,
            rcx: 1,
            ..Default::default()
        };
        let before = r;
        let e = run(&[0xf0, 0x0f, 0xb1, 0x0f], &mut r, &mut ram);
        assert_eq!(e, Err(Fault::Page { addr: 0x9000 }));
        assert_eq!(r, before);
    }
}
