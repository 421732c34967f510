//! The registers gdb sees: x86-64 with SSE, as `gdbstub_arch` has them, plus
//! what a Linux process has beyond them (`orig_rax`, `fs_base`, `gs_base`),
//! so gdb treats the target as GNU/Linux and can find thread-local storage
//! through `fs_base`.

use gdbstub::arch::{Arch, Registers};
use gdbstub_arch::x86::reg::X86_64CoreRegs;
use gdbstub_arch::x86::reg::id::X86_64CoreRegId;

use crate::arch::cpu::{ExtendedState, UserRegs};
use crate::arch::layout::{SEL_USER_CS, SEL_USER_DS};

/// x86-64 Linux user mode, as gdb's `amd64-linux` target description says.
pub enum X86_64Linux {}

impl Arch for X86_64Linux {
    type Usize = u64;
    type Registers = LinuxRegs;
    type RegId = X86_64CoreRegId;
    type BreakpointKind = usize;

    fn target_description_xml() -> Option<&'static str> {
        Some(TARGET_XML)
    }
}

/// Core and SSE registers, then `orig_rax`, `fs_base`, `gs_base` (gdb's
/// register numbers 57, 58, 59).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LinuxRegs {
    pub core: X86_64CoreRegs,
    pub orig_rax: u64,
    pub fs_base: u64,
    pub gs_base: u64,
}

/// Size of the core and SSE part in gdb's `g` packet.
const CORE_BYTES: usize = 0x218;

impl Registers for LinuxRegs {
    type ProgramCounter = u64;

    fn pc(&self) -> u64 {
        self.core.rip
    }

    fn gdb_serialize(&self, mut write_byte: impl FnMut(Option<u8>)) {
        self.core.gdb_serialize(&mut write_byte);
        for v in [self.orig_rax, self.fs_base, self.gs_base] {
            for b in v.to_le_bytes() {
                write_byte(Some(b));
            }
        }
    }

    fn gdb_deserialize(&mut self, bytes: &[u8]) -> Result<(), ()> {
        if bytes.len() < CORE_BYTES + 24 {
            return Err(());
        }
        self.core.gdb_deserialize(&bytes[..CORE_BYTES])?;
        let word = |i: usize| {
            let at = CORE_BYTES + i * 8;
            u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
        };
        self.orig_rax = word(0);
        self.fs_base = word(1);
        self.gs_base = word(2);
        Ok(())
    }
}

impl LinuxRegs {
    /// A thread's registers as gdb wants them.
    pub fn from_thread(r: &UserRegs, fs_base: u64, fpu: &ExtendedState) -> LinuxRegs {
        let mut core = X86_64CoreRegs {
            regs: [
                r.rax, r.rbx, r.rcx, r.rdx, r.rsi, r.rdi, r.rbp, r.rsp, r.r8, r.r9, r.r10, r.r11,
                r.r12, r.r13, r.r14, r.r15,
            ],
            eflags: r.rflags as u32,
            rip: r.rip,
            ..Default::default()
        };
        core.segments.cs = SEL_USER_CS as u32;
        core.segments.ss = SEL_USER_DS as u32;
        core.segments.ds = 0;
        core.segments.es = 0;
        // The FXSAVE layout: control words, then eight 16-byte x87 slots
        // from byte 32, then sixteen XMM registers from byte 160.
        let fx = fpu.fxsave();
        let u16_at = |o: usize| u16::from_le_bytes([fx[o], fx[o + 1]]) as u32;
        let u32_at = |o: usize| u32::from_le_bytes(fx[o..o + 4].try_into().unwrap());
        core.fpu.fctrl = u16_at(0);
        core.fpu.fstat = u16_at(2);
        core.fpu.ftag = abridged_tag_to_full(fx[4]);
        core.fpu.fop = u16_at(6);
        core.fpu.fioff = u32_at(8);
        core.fpu.fiseg = u16_at(12);
        core.fpu.fooff = u32_at(16);
        core.fpu.foseg = u16_at(20);
        core.mxcsr = u32_at(24);
        for (i, st) in core.st.iter_mut().enumerate() {
            st.copy_from_slice(&fx[32 + i * 16..32 + i * 16 + 10]);
        }
        for (i, x) in core.xmm.iter_mut().enumerate() {
            *x = u128::from_le_bytes(fx[160 + i * 16..176 + i * 16].try_into().unwrap());
        }
        LinuxRegs {
            core,
            // A stopped thread is never inside a system call gdb could restart.
            orig_rax: u64::MAX,
            fs_base,
            gs_base: 0,
        }
    }
}

/// FXSAVE keeps one "not empty" bit per x87 register; gdb wants the full
/// two-bit tags (valid or empty is all it needs to print the stack).
fn abridged_tag_to_full(abridged: u8) -> u32 {
    (0..8).fold(0, |tag, i| {
        let empty = abridged & (1 << i) == 0;
        tag | if empty { 3 << (2 * i) } else { 0 }
    })
}

/// gdb's amd64 GNU/Linux description: the `core`, `sse`, `linux` and
/// `segments` features, in the order `LinuxRegs` serializes them.
const TARGET_XML: &str = r#"<?xml version="1.0"?>
<!DOCTYPE target SYSTEM "gdb-target.dtd">
<target version="1.0">
<architecture>i386:x86-64</architecture>
<osabi>GNU/Linux</osabi>
<feature name="org.gnu.gdb.i386.core">
<flags id="i386_eflags" size="4">
<field name="CF" start="0" end="0"/><field name="" start="1" end="1"/><field name="PF" start="2" end="2"/>
<field name="AF" start="4" end="4"/><field name="ZF" start="6" end="6"/><field name="SF" start="7" end="7"/>
<field name="TF" start="8" end="8"/><field name="IF" start="9" end="9"/><field name="DF" start="10" end="10"/>
<field name="OF" start="11" end="11"/><field name="NT" start="14" end="14"/><field name="RF" start="16" end="16"/>
<field name="VM" start="17" end="17"/><field name="AC" start="18" end="18"/><field name="VIF" start="19" end="19"/>
<field name="VIP" start="20" end="20"/><field name="ID" start="21" end="21"/>
</flags>
<reg name="rax" bitsize="64" type="int64" regnum="0"/>
<reg name="rbx" bitsize="64" type="int64"/>
<reg name="rcx" bitsize="64" type="int64"/>
<reg name="rdx" bitsize="64" type="int64"/>
<reg name="rsi" bitsize="64" type="int64"/>
<reg name="rdi" bitsize="64" type="int64"/>
<reg name="rbp" bitsize="64" type="data_ptr"/>
<reg name="rsp" bitsize="64" type="data_ptr"/>
<reg name="r8" bitsize="64" type="int64"/>
<reg name="r9" bitsize="64" type="int64"/>
<reg name="r10" bitsize="64" type="int64"/>
<reg name="r11" bitsize="64" type="int64"/>
<reg name="r12" bitsize="64" type="int64"/>
<reg name="r13" bitsize="64" type="int64"/>
<reg name="r14" bitsize="64" type="int64"/>
<reg name="r15" bitsize="64" type="int64"/>
<reg name="rip" bitsize="64" type="code_ptr"/>
<reg name="eflags" bitsize="32" type="i386_eflags"/>
<reg name="cs" bitsize="32" type="int32"/>
<reg name="ss" bitsize="32" type="int32"/>
<reg name="ds" bitsize="32" type="int32"/>
<reg name="es" bitsize="32" type="int32"/>
<reg name="fs" bitsize="32" type="int32"/>
<reg name="gs" bitsize="32" type="int32"/>
<reg name="st0" bitsize="80" type="i387_ext"/>
<reg name="st1" bitsize="80" type="i387_ext"/>
<reg name="st2" bitsize="80" type="i387_ext"/>
<reg name="st3" bitsize="80" type="i387_ext"/>
<reg name="st4" bitsize="80" type="i387_ext"/>
<reg name="st5" bitsize="80" type="i387_ext"/>
<reg name="st6" bitsize="80" type="i387_ext"/>
<reg name="st7" bitsize="80" type="i387_ext"/>
<reg name="fctrl" bitsize="32" type="int" group="float"/>
<reg name="fstat" bitsize="32" type="int" group="float"/>
<reg name="ftag" bitsize="32" type="int" group="float"/>
<reg name="fiseg" bitsize="32" type="int" group="float"/>
<reg name="fioff" bitsize="32" type="int" group="float"/>
<reg name="foseg" bitsize="32" type="int" group="float"/>
<reg name="fooff" bitsize="32" type="int" group="float"/>
<reg name="fop" bitsize="32" type="int" group="float"/>
</feature>
<feature name="org.gnu.gdb.i386.sse">
<vector id="v4f" type="ieee_single" count="4"/>
<vector id="v2d" type="ieee_double" count="2"/>
<vector id="v16i8" type="int8" count="16"/>
<vector id="v8i16" type="int16" count="8"/>
<vector id="v4i32" type="int32" count="4"/>
<vector id="v2i64" type="int64" count="2"/>
<union id="vec128">
<field name="v4_float" type="v4f"/><field name="v2_double" type="v2d"/>
<field name="v16_int8" type="v16i8"/><field name="v8_int16" type="v8i16"/>
<field name="v4_int32" type="v4i32"/><field name="v2_int64" type="v2i64"/>
<field name="uint128" type="uint128"/>
</union>
<flags id="i386_mxcsr" size="4">
<field name="IE" start="0" end="0"/><field name="DE" start="1" end="1"/><field name="ZE" start="2" end="2"/>
<field name="OE" start="3" end="3"/><field name="UE" start="4" end="4"/><field name="PE" start="5" end="5"/>
<field name="DAZ" start="6" end="6"/><field name="IM" start="7" end="7"/><field name="DM" start="8" end="8"/>
<field name="ZM" start="9" end="9"/><field name="OM" start="10" end="10"/><field name="UM" start="11" end="11"/>
<field name="PM" start="12" end="12"/><field name="FZ" start="15" end="15"/>
</flags>
<reg name="xmm0" bitsize="128" type="vec128" regnum="40"/>
<reg name="xmm1" bitsize="128" type="vec128"/>
<reg name="xmm2" bitsize="128" type="vec128"/>
<reg name="xmm3" bitsize="128" type="vec128"/>
<reg name="xmm4" bitsize="128" type="vec128"/>
<reg name="xmm5" bitsize="128" type="vec128"/>
<reg name="xmm6" bitsize="128" type="vec128"/>
<reg name="xmm7" bitsize="128" type="vec128"/>
<reg name="xmm8" bitsize="128" type="vec128"/>
<reg name="xmm9" bitsize="128" type="vec128"/>
<reg name="xmm10" bitsize="128" type="vec128"/>
<reg name="xmm11" bitsize="128" type="vec128"/>
<reg name="xmm12" bitsize="128" type="vec128"/>
<reg name="xmm13" bitsize="128" type="vec128"/>
<reg name="xmm14" bitsize="128" type="vec128"/>
<reg name="xmm15" bitsize="128" type="vec128"/>
<reg name="mxcsr" bitsize="32" type="i386_mxcsr" group="vector"/>
</feature>
<feature name="org.gnu.gdb.i386.linux">
<reg name="orig_rax" bitsize="64" type="int" regnum="57"/>
</feature>
<feature name="org.gnu.gdb.i386.segments">
<reg name="fs_base" bitsize="64" type="int"/>
<reg name="gs_base" bitsize="64" type="int"/>
</feature>
</target>
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_round_trip_through_the_g_packet_layout() {
        let r = UserRegs {
            rax: 1,
            rip: 0x401000,
            rsp: 0x7fff_0000,
            ..Default::default()
        };
        let regs = LinuxRegs::from_thread(&r, 0x1234, &ExtendedState::initial());
        let mut bytes = Vec::new();
        regs.gdb_serialize(|b| bytes.push(b.unwrap()));
        assert_eq!(bytes.len(), CORE_BYTES + 24);
        let mut back = LinuxRegs::default();
        back.gdb_deserialize(&bytes).unwrap();
        assert_eq!(back, regs);
        assert_eq!(back.fs_base, 0x1234);
        assert_eq!(back.core.fpu.fctrl, 0x37f);
    }

    #[test]
    fn an_empty_x87_stack_has_every_tag_empty() {
        assert_eq!(abridged_tag_to_full(0), 0xffff);
        assert_eq!(abridged_tag_to_full(1), 0xfffc);
    }
}
