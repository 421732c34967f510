//! The architectural state of one guest thread, independent of KVM.
//!
//! The kernel layer works on these types only; the machine layer converts them
//! to and from KVM's structures. Keeping them apart lets the Linux personality
//! be unit-tested without `/dev/kvm`.

use serde::{Deserialize, Serialize};

/// The user-mode registers of a thread, in the order of Linux's
/// `struct user_regs_struct` minus the segment registers (which are fixed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct UserRegs {
    pub r15: u64,
    pub r14: u64,
    pub r13: u64,
    pub r12: u64,
    pub rbp: u64,
    pub rbx: u64,
    pub r11: u64,
    pub r10: u64,
    pub r9: u64,
    pub r8: u64,
    pub rax: u64,
    pub rcx: u64,
    pub rdx: u64,
    pub rsi: u64,
    pub rdi: u64,
    pub rip: u64,
    pub rflags: u64,
    pub rsp: u64,
}

impl UserRegs {
    /// The general registers in x86's numbering (rax, rcx, rdx, rbx, rsp,
    /// rbp, rsi, rdi, r8-r15), then rflags: how the guest's site
    /// dispatcher saves them.
    pub fn x86_order(&self) -> [u64; 17] {
        [
            self.rax,
            self.rcx,
            self.rdx,
            self.rbx,
            self.rsp,
            self.rbp,
            self.rsi,
            self.rdi,
            self.r8,
            self.r9,
            self.r10,
            self.r11,
            self.r12,
            self.r13,
            self.r14,
            self.r15,
            self.rflags,
        ]
    }

    /// The registers from [`UserRegs::x86_order`]'s words, and `rip`.
    pub fn from_x86_order(w: &[u64; 17], rip: u64) -> UserRegs {
        let [
            rax,
            rcx,
            rdx,
            rbx,
            rsp,
            rbp,
            rsi,
            rdi,
            r8,
            r9,
            r10,
            r11,
            r12,
            r13,
            r14,
            r15,
            rflags,
        ] = *w;
        UserRegs {
            r15,
            r14,
            r13,
            r12,
            rbp,
            rbx,
            r11,
            r10,
            r9,
            r8,
            rax,
            rcx,
            rdx,
            rsi,
            rdi,
            rip,
            rflags,
            rsp,
        }
    }

    /// The system-call number and its six arguments, as the x86-64 ABI passes them.
    pub fn syscall_args(&self) -> (u64, [u64; 6]) {
        (
            self.rax,
            [self.rdi, self.rsi, self.rdx, self.r10, self.r8, self.r9],
        )
    }
}

/// RFLAGS bits user code may change (CF PF AF ZF SF TF DF OF, AC, ID and the
/// reserved-one bit); everything else (IF, IOPL, NT, VM...) is fixed by the monitor.
pub const RFLAGS_USER_MASK: u64 = 0x0025_4dd5;
/// The reserved bit 1 of RFLAGS, always set.
pub const RFLAGS_FIXED: u64 = 0x2;
/// The interrupt flag: set in user mode so the machine behaves like Linux's.
pub const RFLAGS_IF: u64 = 0x200;
/// The trap flag: a debug exception after every instruction (the debugger's
/// single step).
pub const RFLAGS_TF: u64 = 0x100;

/// Size in bytes of the saved extended (x87/SSE/AVX) state, the XSAVE area
/// layout KVM uses.
pub const XSAVE_SIZE: usize = 4096;

/// A thread's extended register state (x87, SSE, AVX) in XSAVE layout: the
/// 512-byte legacy FXSAVE region, the XSAVE header and the AVX upper halves.
#[derive(Clone, PartialEq, Eq)]
pub struct ExtendedState(pub Box<[u8; XSAVE_SIZE]>);

impl ExtendedState {
    /// The state of a freshly started process: default x87 control word and
    /// MXCSR, everything else zero.
    pub fn initial() -> Self {
        let mut bytes = Box::new([0u8; XSAVE_SIZE]);
        bytes[0..2].copy_from_slice(&0x037fu16.to_le_bytes()); // FCW
        bytes[24..28].copy_from_slice(&0x1f80u32.to_le_bytes()); // MXCSR
        bytes[28..32].copy_from_slice(&0xffffu32.to_le_bytes()); // MXCSR_MASK
        ExtendedState(bytes)
    }

    /// The legacy 512-byte FXSAVE region, which signal frames carry.
    pub fn fxsave(&self) -> &[u8] {
        &self.0[..512]
    }

    /// Replaces the legacy region, keeping the control words sane so a
    /// corrupted signal frame cannot make the next XRSTOR fault.
    pub fn set_fxsave(&mut self, fx: &[u8]) {
        self.0[..512].copy_from_slice(&fx[..512]);
        // MXCSR reserved bits must be zero or XRSTOR faults.
        let mxcsr = u32::from_le_bytes(self.0[24..28].try_into().unwrap()) & 0xffff;
        self.0[24..28].copy_from_slice(&mxcsr.to_le_bytes());
    }
}

impl std::fmt::Debug for ExtendedState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ExtendedState(..)")
    }
}

impl Serialize for ExtendedState {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0[..])
    }
}

impl<'de> Deserialize<'de> for ExtendedState {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v: Vec<u8> = serde_bytes_vec(d)?;
        let arr: Box<[u8; XSAVE_SIZE]> = v
            .into_boxed_slice()
            .try_into()
            .map_err(|_| serde::de::Error::custom("extended state has the wrong size"))?;
        Ok(ExtendedState(arr))
    }
}

fn serde_bytes_vec<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Vec<u8>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("bytes")
        }
        fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
            Ok(v.to_vec())
        }
        fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
            Ok(v)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Vec<u8>, A::Error> {
            let mut out = Vec::with_capacity(a.size_hint().unwrap_or(0).min(XSAVE_SIZE));
            while let Some(b) = a.next_element()? {
                if out.len() >= XSAVE_SIZE {
                    return Err(serde::de::Error::custom("extended state too long"));
                }
                out.push(b);
            }
            Ok(out)
        }
    }
    d.deserialize_bytes(V)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initial_extended_state_has_linux_default_control_words() {
        let s = ExtendedState::initial();
        assert_eq!(u16::from_le_bytes([s.0[0], s.0[1]]), 0x37f);
        assert_eq!(u32::from_le_bytes(s.0[24..28].try_into().unwrap()), 0x1f80);
    }

    #[test]
    fn registers_round_trip_through_x86_order() {
        let r = UserRegs {
            rcx: 1,
            rsp: 4,
            r15: 15,
            rflags: 0x202,
            rip: 9,
            ..Default::default()
        };
        let w = r.x86_order();
        assert_eq!((w[1], w[4], w[15], w[16]), (1, 4, 15, 0x202));
        assert_eq!(UserRegs::from_x86_order(&w, 9), r);
    }

    #[test]
    fn syscall_args_follow_the_x86_64_abi() {
        let r = UserRegs {
            rax: 1,
            rdi: 2,
            rsi: 3,
            rdx: 4,
            r10: 5,
            r8: 6,
            r9: 7,
            ..Default::default()
        };
        assert_eq!(r.syscall_args(), (1, [2, 3, 4, 5, 6, 7]));
    }
}
