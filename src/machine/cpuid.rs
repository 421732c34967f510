//! The fixed CPU model every guest sees.
//!
//! Programs choose code paths from CPUID (glibc's string functions, the
//! dynamic linker's save area), so the model is a constant table rather than
//! whatever the host has: a run recorded on one machine makes the same choices
//! on another. It is an x86-64-v3 class CPU (AVX2, BMI, FMA) without RDRAND,
//! RDSEED, TSX or AVX-512; a host lacking one of its features is refused with
//! a message naming it.
//!
//! The host is checked with the CPUID instruction itself, not with KVM's list
//! of supported features: guest user code runs natively on the host's cores,
//! and nested KVMs report far fewer features than the cores have.

use kvm_bindings::{CpuId, KVM_MAX_CPUID_ENTRIES, kvm_cpuid_entry2};

/// KVM's flag for leaves whose sub-leaf (ECX) matters.
const SIGNIFCANT_INDEX: u32 = 1;

/// Name of the model, recorded in reproducers.
pub const MODEL_NAME: &str = "rewind-x86-64-v3";

/// One leaf of the model: (leaf, subleaf, eax, ebx, ecx, edx).
type Leaf = (u32, u32, u32, u32, u32, u32);

const fn bits(list: &[u32]) -> u32 {
    let mut v = 0;
    let mut i = 0;
    while i < list.len() {
        v |= 1 << list[i];
        i += 1;
    }
    v
}

// Leaf 1 feature bits.
const L1_ECX: u32 = bits(&[0, 1, 9, 12, 13, 19, 20, 22, 23, 25, 26, 27, 28, 29]);
const L1_EDX: u32 = bits(&[
    0, 1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13, 14, 15, 16, 17, 19, 23, 24, 25, 26,
]);
// Leaf 7 feature bits: BMI1, AVX2, BMI2, ERMS, ADX.
const L7_EBX: u32 = bits(&[3, 5, 8, 9, 19]);
// Extended leaf 0x80000001: LAHF, ABM (LZCNT), PREFETCHW; SYSCALL, NX, LM.
const E1_ECX: u32 = bits(&[0, 5, 8]);
const E1_EDX: u32 = bits(&[11, 20, 29]);

/// Feature names for refusal messages: (leaf, register index 1..=4 for
/// ebx..edx, bit, name).
const FEATURE_NAMES: &[(u32, usize, u32, &str)] = &[
    (1, 2, 0, "SSE3"),
    (1, 2, 1, "PCLMULQDQ"),
    (1, 2, 9, "SSSE3"),
    (1, 2, 12, "FMA"),
    (1, 2, 13, "CMPXCHG16B"),
    (1, 2, 19, "SSE4.1"),
    (1, 2, 20, "SSE4.2"),
    (1, 2, 22, "MOVBE"),
    (1, 2, 23, "POPCNT"),
    (1, 2, 25, "AES"),
    (1, 2, 26, "XSAVE"),
    (1, 2, 28, "AVX"),
    (1, 2, 29, "F16C"),
    (7, 1, 3, "BMI1"),
    (7, 1, 5, "AVX2"),
    (7, 1, 8, "BMI2"),
    (7, 1, 9, "ERMS"),
    (7, 1, 19, "ADX"),
];

fn brand() -> [u32; 12] {
    let mut b = [b' '; 48];
    let name = b"rewind-fuzz virtual CPU (x86-64-v3)";
    b[..name.len()].copy_from_slice(name);
    b[47] = 0;
    let mut out = [0u32; 12];
    for (i, w) in out.iter_mut().enumerate() {
        *w = u32::from_le_bytes(b[i * 4..i * 4 + 4].try_into().unwrap());
    }
    out
}

fn model() -> Vec<Leaf> {
    let vendor = b"GenuineIntel";
    let v = |i: usize| u32::from_le_bytes(vendor[i..i + 4].try_into().unwrap());
    let br = brand();
    // Deterministic cache descriptors (leaf 4): type|level, ways/partitions/line, sets.
    let cache = |sub: u32, kind: u32, level: u32, ways: u32, sets: u32| -> Leaf {
        let eax = kind | (level << 5) | (1 << 8);
        let ebx = 63 | ((ways - 1) << 22);
        (4, sub, eax, ebx, sets - 1, 0)
    };
    vec![
        (0, 0, 0xd, v(0), v(8), v(4)),
        // Family 6, model 0x55 (a Skylake-class server), stepping 4;
        // CLFLUSH line 8 quadwords, one logical processor.
        (1, 0, 0x0005_0654, 0x0001_0800, L1_ECX, L1_EDX),
        cache(0, 1, 1, 8, 64),     // L1 data 32 KiB
        cache(1, 2, 1, 8, 64),     // L1 instruction 32 KiB
        cache(2, 3, 2, 16, 1024),  // L2 1 MiB
        cache(3, 3, 3, 16, 32768), // L3 32 MiB
        (4, 4, 0, 0, 0, 0),
        (7, 0, 0, L7_EBX, 0, 0),
        (0x8000_0000, 0, 0x8000_0008, 0, 0, 0),
        (0x8000_0001, 0, 0, 0, E1_ECX, E1_EDX),
        (0x8000_0002, 0, br[0], br[1], br[2], br[3]),
        (0x8000_0003, 0, br[4], br[5], br[6], br[7]),
        (0x8000_0004, 0, br[8], br[9], br[10], br[11]),
        (0x8000_0006, 0, 0, 0, (1024 << 16) | (6 << 12) | 64, 0),
        (0x8000_0007, 0, 0, 0, 0, 1 << 8),
        (0x8000_0008, 0, 0x3030, 0, 0, 0),
    ]
}

/// The XSAVE state components the guest may have enabled: x87, SSE, AVX,
/// and the AVX-512 opmask and ZMM registers (their standard-format area
/// fits the 4096-byte image KVM_GET_XSAVE returns).
const XSTATE_SUPPORTED: u64 = 0xe7;

/// The XSAVE leaf (0xD) for the state components in `xcr0`, with each
/// component's size, offset and alignment as the host's CPU has them, so
/// that programs that size XSAVE buffers from CPUID (the dynamic linker's
/// lazy-binding trampoline) size them for what XSAVE really writes.
fn xsave_leaves(xcr0: u64) -> Vec<Leaf> {
    let component = |i: u32| std::arch::x86_64::__cpuid_count(0xd, i);
    // Standard format: the legacy region and header (576 bytes), then each
    // component at its fixed offset. Compacted: in order, 64-byte aligned
    // where the component asks for it.
    let mut standard: u32 = 576;
    let mut compacted: u32 = 576;
    let mut leaves = Vec::new();
    for i in 2..63u32 {
        if xcr0 & (1 << i) == 0 {
            continue;
        }
        let c = component(i);
        standard = standard.max(c.ebx + c.eax);
        if c.ecx & 2 != 0 {
            compacted = compacted.next_multiple_of(64);
        }
        compacted += c.eax;
        leaves.push((0xd, i, c.eax, c.ebx, c.ecx & 2, 0));
    }
    let mut out = vec![
        (0xd, 0, xcr0 as u32, standard, standard, (xcr0 >> 32) as u32),
        // No XSAVEOPT, XSAVEC or XSAVES advertised.
        (0xd, 1, 0, compacted, 0, 0),
    ];
    out.extend(leaves);
    out
}

/// The state components the guest runs with: those the host has enabled,
/// among the ones the model supports.
///
/// On a nested, software-assisted KVM (PVM) guest user code runs with the
/// host's own XCR0 whatever KVM_SET_XCRS says, so the only truthful XSAVE
/// leaf is the host's; telling the same truth everywhere keeps one code
/// path. The sizes only shape the dynamic linker's save area, never a
/// system call's arguments, so traces do not depend on them.
pub fn guest_xcr0() -> u64 {
    let host: u64;
    // SAFETY: XGETBV with ECX=0 reads XCR0; it is valid whenever the OS
    // enabled XSAVE (CPUID.1:ECX.OSXSAVE), which the model requires.
    unsafe {
        let (lo, hi): (u32, u32);
        std::arch::asm!("xgetbv", in("ecx") 0, out("eax") lo, out("edx") hi, options(nomem, nostack));
        host = (hi as u64) << 32 | lo as u64;
    }
    host & XSTATE_SUPPORTED
}

/// Builds the model, refusing a host that lacks one of its features.
pub fn fixed_model() -> Result<CpuId, String> {
    let host_reg = |leaf: u32, reg: usize| -> u32 {
        let r = std::arch::x86_64::__cpuid_count(leaf, 0);
        [r.eax, r.ebx, r.ecx, r.edx][reg]
    };
    for &(leaf, reg, bit, name) in FEATURE_NAMES {
        if host_reg(leaf, reg) & (1 << bit) == 0 {
            return Err(format!(
                "this host's CPU (as KVM reports it) lacks {name}, which the fixed guest CPU model {MODEL_NAME} needs"
            ));
        }
    }
    let mut leaves = model();
    leaves.extend(xsave_leaves(guest_xcr0()));
    let entries: Vec<kvm_cpuid_entry2> = leaves
        .into_iter()
        .map(|(function, index, eax, ebx, ecx, edx)| kvm_cpuid_entry2 {
            function,
            index,
            flags: if matches!(function, 4 | 7 | 0xd) {
                SIGNIFCANT_INDEX
            } else {
                0
            },
            eax,
            ebx,
            ecx,
            edx,
            ..Default::default()
        })
        .collect();
    assert!(entries.len() <= KVM_MAX_CPUID_ENTRIES);
    CpuId::from_entries(&entries).map_err(|e| format!("cannot build the CPU model: {e:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_hides_rdrand_rdseed_and_avx512() {
        let m = model();
        let l1 = m.iter().find(|l| l.0 == 1).unwrap();
        assert_eq!(l1.4 & (1 << 30), 0, "RDRAND");
        let l7 = m.iter().find(|l| l.0 == 7).unwrap();
        assert_eq!(l7.3 & (1 << 18), 0, "RDSEED");
        assert_eq!(l7.3 & (1 << 16), 0, "AVX-512F");
    }

    #[test]
    fn the_loader_passes_the_models_features_as_hwcap() {
        assert_eq!(crate::kernel::loader::HWCAP, L1_EDX as u64);
    }

    #[test]
    fn the_xsave_leaf_describes_every_enabled_component() {
        let leaves = xsave_leaves(0xe7);
        let sub = |i: u32| leaves.iter().find(|l| l.1 == i).copied();
        let (_, _, mask, size, max, _) = sub(0).unwrap();
        assert_eq!(mask, 0xe7);
        assert_eq!(size, max);
        assert!(size >= 832, "at least the legacy area, header and AVX");
        for i in [2, 5, 6, 7] {
            let (_, _, bytes, offset, _, _) = sub(i).unwrap();
            assert!(offset + bytes <= size, "component {i} inside the area");
        }
        assert!(sub(3).is_none(), "no MPX");
        assert_eq!(xsave_leaves(7)[0].3, 832, "x87, SSE and AVX: 832 bytes");
    }

    #[test]
    fn the_brand_string_is_nul_terminated() {
        let b = brand();
        assert_eq!(b[11] >> 24, 0);
    }
}
