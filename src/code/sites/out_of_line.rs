//! Out-of-line copies of sync sites' instructions, for the guest's site
//! dispatcher (see `arch::abi`, "Sync sites taken without an exit"): where
//! a site's operand is, in the terms the dispatcher computes it, and the
//! machine code that runs the instruction away from its place and jumps
//! back after it.
//!
//! Whether a site can be taken that way is a function of its instruction
//! alone, so discovery decides it once ([`Site::fast`]) and the site is
//! patched accordingly: `int3` for the dispatcher, an invalid opcode
//! (always an exit) for the rest.

use iced_x86::{
    Code, Encoder, Instruction, InstructionInfoFactory, MemoryOperand, Mnemonic, OpKind, Register,
};

use super::emulate;
use super::site::{Site, SiteKind};
use crate::arch::abi;

/// Where a site's operand is, in the terms the dispatcher computes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Operand {
    /// The displacement; the operand's absolute address when RIP-relative.
    pub displacement: u64,
    /// Base and index registers (x86 numbers, [`abi::SITES_NO_REG`] for
    /// none) and the index's scale as a shift.
    pub base: u8,
    pub index: u8,
    pub scale_shift: u8,
    /// The operand's size in bytes.
    pub size: u8,
    pub rip_relative: bool,
}

/// How the dispatcher finds a breakpoint's operand, and the site's copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutOfLine {
    pub operand: Operand,
    /// The copy's bytes, a whole stub slot.
    pub stub: Vec<u8>,
}

const GPRS: [Register; 16] = [
    Register::RAX,
    Register::RCX,
    Register::RDX,
    Register::RBX,
    Register::RSP,
    Register::RBP,
    Register::RSI,
    Register::RDI,
    Register::R8,
    Register::R9,
    Register::R10,
    Register::R11,
    Register::R12,
    Register::R13,
    Register::R14,
    Register::R15,
];

/// x86's number of a 64-bit general register.
fn number(r: Register) -> Option<u8> {
    GPRS.iter().position(|x| *x == r).map(|n| n as u8)
}

/// The operand of `site` at `va`, when the dispatcher can take the site:
/// an atomic, load or store whose operand is plain memory (no segment
/// override, 64-bit address) of 1 to 16 bytes, or a spin's `pause` or
/// branch, which has none (size 0). With the instruction, decoded at `va`.
pub fn operand(site: &Site, va: u64) -> Option<(Instruction, Operand)> {
    let i = emulate::decode(site.code(), va);
    if site.kind == SiteKind::Spin {
        let none = Operand {
            displacement: 0,
            base: abi::SITES_NO_REG,
            index: abi::SITES_NO_REG,
            scale_shift: 0,
            size: 0,
            rip_relative: false,
        };
        let memory = (0..i.op_count()).any(|n| i.op_kind(n) == OpKind::Memory);
        return (!memory).then_some((i, none));
    }
    let memory = (0..i.op_count()).filter(|n| i.op_kind(*n) == OpKind::Memory);
    if memory.count() != 1 || i.segment_prefix() != Register::None {
        return None;
    }
    if !matches!(i.memory_segment(), Register::DS | Register::SS) {
        return None;
    }
    // A bit test with a register offset reaches past its operand.
    if matches!(
        i.mnemonic(),
        Mnemonic::Bt | Mnemonic::Bts | Mnemonic::Btr | Mnemonic::Btc
    ) && i.op1_kind() == OpKind::Register
    {
        return None;
    }
    let size = i.memory_size().size();
    if ![1, 2, 4, 8, 16].contains(&size) {
        return None;
    }
    let rip_relative = i.is_ip_rel_memory_operand();
    let (displacement, base, index) = if rip_relative {
        (
            i.ip_rel_memory_address(),
            abi::SITES_NO_REG,
            abi::SITES_NO_REG,
        )
    } else {
        let reg = |r: Register| match r {
            Register::None => Some(abi::SITES_NO_REG),
            r => number(r),
        };
        (
            i.memory_displacement64(),
            reg(i.memory_base())?,
            reg(i.memory_index())?,
        )
    };
    let operand = Operand {
        displacement,
        base,
        index,
        scale_shift: i.memory_index_scale().trailing_zeros() as u8,
        size: size as u8,
        rip_relative,
    };
    Some((i, operand))
}

/// The plan for `site` at `va` with its copy in the stub slot at `stub_va`,
/// when the dispatcher can take it from a breakpoint: an atomic, load or
/// store (see [`operand`]; a step that gives way must leave the guest then,
/// and a stub's bytes are copied as they are, so no branch).
pub fn plan(site: &Site, va: u64, stub_va: u64) -> Option<OutOfLine> {
    if site.spins || site.kind == SiteKind::Spin {
        return None;
    }
    let (i, operand) = operand(site, va)?;
    Some(OutOfLine {
        operand,
        stub: stub(&i, site, va, stub_va)?,
    })
}

/// The copy of the instruction `i` at `va` for the slot at `stub_va`: the
/// instruction, then `jmp *(%rip)` to the one after it. A RIP-relative
/// operand (the slot is too far from the code to reach it) is reached
/// through a scratch register the instruction does not use, kept in the
/// sites data meanwhile. The slot's last 8 bytes name the site, and the
/// byte before them the scratch register, for the way back after a fault.
fn stub(i: &Instruction, site: &Site, va: u64, stub_va: u64) -> Option<Vec<u8>> {
    let mut code = Vec::new();
    let mut scratch = abi::SITES_NO_REG;
    if i.is_ip_rel_memory_operand() {
        let used: Vec<Register> = InstructionInfoFactory::new()
            .info(i)
            .used_registers()
            .iter()
            .map(|u| u.register().full_register())
            .collect();
        let n = (8..16).rev().find(|n| !used.contains(&GPRS[*n]))?;
        let s = GPRS[n];
        scratch = n as u8;
        let save = MemoryOperand::with_base_displ(
            Register::RIP,
            (abi::SITES_DATA_VA + abi::SITES_SAVE_SCRATCH * 8) as i64,
        );
        let mut copy = *i;
        copy.set_memory_base(s);
        copy.set_memory_index(Register::None);
        copy.set_memory_displacement64(0);
        copy.set_memory_displ_size(0);
        let seq = [
            Instruction::with2(Code::Mov_rm64_r64, save, s).ok()?,
            Instruction::with2(Code::Mov_r64_imm64, s, i.ip_rel_memory_address()).ok()?,
            copy,
            Instruction::with2(Code::Mov_r64_rm64, s, save).ok()?,
        ];
        let mut enc = Encoder::new(64);
        for ins in seq {
            let at = stub_va + code.len() as u64;
            let n = enc.encode(&ins, at).ok()?;
            code.extend_from_slice(&enc.take_buffer()[..n]);
        }
    } else {
        code.extend_from_slice(site.code());
    }
    code.extend_from_slice(&[0xff, 0x25, 0, 0, 0, 0]);
    code.extend_from_slice(&(va + site.len as u64).to_le_bytes());
    let slot = abi::SITES_STUB_BYTES as usize;
    if code.len() > slot - 9 {
        return None;
    }
    code.resize(slot - 9, 0xcc);
    code.push(scratch);
    code.extend_from_slice(&va.to_le_bytes());
    Some(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::Decoder;

    fn site(bytes: &[u8], kind: SiteKind) -> Site {
        let mut b = [0u8; 15];
        b[..bytes.len()].copy_from_slice(bytes);
        Site {
            offset: 0,
            kind,
            spins: false,
            fast: false,
            bytes: b,
            len: bytes.len() as u8,
            acquires: None,
        }
    }

    fn disassemble(code: &[u8], ip: u64) -> Vec<String> {
        let mut d = Decoder::with_ip(64, code, ip, iced_x86::DecoderOptions::NONE);
        let mut out = Vec::new();
        while d.can_decode() && out.len() < 6 {
            out.push(format!("{}", d.decode()));
        }
        out
    }

    #[test]
    fn a_register_operand_is_copied_and_jumps_back_after_the_site() {
        // lock xadd [rdi+rcx*4+0x10], eax
        let s = site(&[0xf0, 0x0f, 0xc1, 0x44, 0x8f, 0x10], SiteKind::AtomicRmw);
        let p = plan(&s, 0x5555_0000_1000, abi::SITES_STUBS_VA).unwrap();
        assert_eq!(
            (
                p.operand.base,
                p.operand.index,
                p.operand.scale_shift,
                p.operand.size
            ),
            (7, 1, 2, 4)
        );
        assert_eq!(p.operand.displacement, 0x10);
        assert_eq!(p.stub.len(), abi::SITES_STUB_BYTES as usize);
        assert_eq!(&p.stub[..6], s.code());
        let back = u64::from_le_bytes(p.stub[12..20].try_into().unwrap());
        assert_eq!(back, 0x5555_0000_1006);
        let tail = &p.stub[p.stub.len() - 9..];
        assert_eq!(tail[0], abi::SITES_NO_REG);
        assert_eq!(
            u64::from_le_bytes(tail[1..].try_into().unwrap()),
            0x5555_0000_1000
        );
    }

    #[test]
    fn a_rip_relative_operand_goes_through_a_scratch_register_it_does_not_use() {
        // lock cmpxchg [rip+0x2000], r11 (uses rax implicitly, and r11)
        let s = site(
            &[0xf0, 0x4c, 0x0f, 0xb1, 0x1d, 0x00, 0x20, 0x00, 0x00],
            SiteKind::AtomicRmw,
        );
        let va = 0x5555_0000_1000;
        let p = plan(&s, va, abi::SITES_STUBS_VA).unwrap();
        assert_eq!(p.operand.displacement, va + 9 + 0x2000);
        assert_eq!(
            (p.operand.base, p.operand.index),
            (abi::SITES_NO_REG, abi::SITES_NO_REG)
        );
        let text = disassemble(&p.stub, abi::SITES_STUBS_VA);
        // r15 is the first register the instruction leaves alone.
        assert_eq!(p.stub[p.stub.len() - 9], 15);
        assert_eq!(
            &text[..4],
            [
                "mov %r15,0x7FFFF8300098",
                "movabs $0x555500003009,%r15",
                "lock cmpxchg %r11,(%r15)",
                "mov 0x7FFFF8300098,%r15",
            ]
        );
        assert!(text[4].starts_with("jmpq *"), "{text:?}");
    }

    #[test]
    fn spins_and_segment_operands_stay_with_the_monitor() {
        let mut pause = site(&[0xf3, 0x90], SiteKind::Spin);
        pause.spins = true;
        assert!(plan(&pause, 0x1000, abi::SITES_STUBS_VA).is_none());
        // lock inc dword ptr fs:[rax]
        let fs = site(&[0x64, 0xf0, 0xff, 0x00], SiteKind::AtomicRmw);
        assert!(plan(&fs, 0x1000, abi::SITES_STUBS_VA).is_none());
        // lock bts [rdi], rax: reaches past its operand
        let bts = site(&[0xf0, 0x48, 0x0f, 0xab, 0x07], SiteKind::AtomicRmw);
        assert!(plan(&bts, 0x1000, abi::SITES_STUBS_VA).is_none());
    }
}
