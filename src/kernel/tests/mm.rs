//! Memory: mmap, munmap, mprotect, brk, madvise.

use super::{SCRATCH, Want, cases};
use libc::*;

const ANON: u64 = (MAP_PRIVATE | MAP_ANONYMOUS) as u64;
const RW: u64 = (PROT_READ | PROT_WRITE) as u64;

cases! {
    mmap_of_zero_bytes_is_einval: SYS_mmap, |_b| [0, 0, RW, ANON, -1i64 as u64, 0], Want::Err(EINVAL);
    mmap_fixed_at_an_unaligned_address_is_einval: SYS_mmap,
        |_b| [0x2000_0001, 4096, RW, ANON | MAP_FIXED as u64, -1i64 as u64, 0], Want::Err(EINVAL);
    mmap_of_a_descriptor_never_opened_is_ebadf: SYS_mmap, |_b| [0, 4096, RW, MAP_PRIVATE as u64, 99, 0], Want::Err(EBADF);
    mmap_without_private_or_shared_is_einval: SYS_mmap,
        |_b| [0, 4096, RW, MAP_ANONYMOUS as u64, -1i64 as u64, 0], Want::Err(EINVAL);
    mmap_anonymous_at_a_hint_takes_the_hint_when_free: SYS_mmap,
        |_b| [0x4000_0000, 8192, RW, ANON, -1i64 as u64, 0], Want::Ret(0x4000_0000),
        then |b| assert_eq!(b.read(0x4000_0000, 8192), vec![0; 8192]);
    mmap_fixed_replaces_what_was_there: SYS_mmap,
        |b| {
            b.k.write(SCRATCH, b"old").unwrap();
            [SCRATCH, 4096, RW, ANON | MAP_FIXED as u64, -1i64 as u64, 0]
        }, Want::Ret(SCRATCH as i64),
        then |b| assert_eq!(b.read(SCRATCH, 3), [0, 0, 0]);
    mmap_fixed_noreplace_over_a_mapping_is_eexist: SYS_mmap,
        |_b| [SCRATCH, 4096, RW, ANON | MAP_FIXED_NOREPLACE as u64, -1i64 as u64, 0], Want::Err(EEXIST);
    mmap_of_a_file_copies_its_bytes: SYS_mmap,
        |b| [0x3000_0000, 4096, PROT_READ as u64, MAP_PRIVATE as u64 | MAP_FIXED as u64, b.open("/data/hello.txt", O_RDONLY), 0],
        Want::Ret(0x3000_0000),
        then |b| assert_eq!(b.read(0x3000_0000, 5), b"hello");
    munmap_of_an_unaligned_address_is_einval: SYS_munmap, |_b| [SCRATCH + 1, 4096, 0, 0, 0, 0], Want::Err(EINVAL);
    munmap_of_nothing_mapped_succeeds: SYS_munmap, |_b| [0x5000_0000, 4096, 0, 0, 0, 0], Want::Ret(0);
    mprotect_of_an_unmapped_range_is_enomem: SYS_mprotect, |_b| [0x5000_0000, 4096, RW, 0, 0, 0], Want::Err(ENOMEM);
    mprotect_of_an_unaligned_address_is_einval: SYS_mprotect, |_b| [SCRATCH + 8, 4096, RW, 0, 0, 0], Want::Err(EINVAL);
    brk_of_zero_returns_the_current_break: SYS_brk, |_b| [0, 0, 0, 0, 0, 0], Want::Ok;
    madvise_dontneed_zeroes_anonymous_memory: SYS_madvise,
        |b| {
            b.k.write(SCRATCH, b"data").unwrap();
            [SCRATCH, 4096, MADV_DONTNEED as u64, 0, 0, 0]
        }, Want::Ret(0),
        then |b| assert_eq!(b.read(SCRATCH, 4), [0, 0, 0, 0]);
    madvise_of_an_unaligned_start_is_einval: SYS_madvise, |_b| [SCRATCH + 3, 4096, MADV_DONTNEED as u64, 0, 0, 0], Want::Err(EINVAL);
}

/// MPOL_* from linux/mempolicy.h.
const MPOL_DEFAULT: u64 = 0;
const MPOL_BIND: u64 = 2;
const MPOL_INTERLEAVE: u64 = 3;
const MPOL_F_NODE: u64 = 1;
const MPOL_F_ADDR: u64 = 2;
const MPOL_F_MEMS_ALLOWED: u64 = 4;

cases! {
    get_mempolicy_of_nothing_is_the_check_libnuma_makes: SYS_get_mempolicy, |_b| [0, 0, 0, 0, 0, 0], Want::Ret(0);
    get_mempolicy_says_default_with_no_nodes: SYS_get_mempolicy,
        |b| [b.bytes(&[0xff; 4]), b.bytes(&[0xff; 8]), 65, 0, 0, 0], Want::Ret(0),
        then |b| {
            assert_eq!(b.read(SCRATCH, 4), [0; 4]);
            assert_eq!(b.read(SCRATCH + 16, 8), [0; 8]);
        };
    get_mempolicy_of_the_allowed_nodes_is_node_0: SYS_get_mempolicy,
        |b| [0, b.buf(8), 64, 0, MPOL_F_MEMS_ALLOWED, 0], Want::Ret(0),
        then |b| assert_eq!(b.u64_at(SCRATCH), 1);
    get_mempolicy_with_unknown_flags_is_einval: SYS_get_mempolicy, |_b| [0, 0, 0, 0, 8, 0], Want::Err(EINVAL);
    get_mempolicy_of_an_unmapped_address_is_efault: SYS_get_mempolicy,
        |b| [b.buf(4), 0, 0, super::UNMAPPED, MPOL_F_ADDR, 0], Want::Err(EFAULT);
    get_mempolicy_of_an_address_with_mpol_f_node_is_node_0: SYS_get_mempolicy,
        |b| [b.bytes(&[0xff; 4]), 0, 0, SCRATCH, MPOL_F_ADDR | MPOL_F_NODE, 0], Want::Ret(0),
        then |b| assert_eq!(b.read(SCRATCH, 4), [0; 4]);
    get_mempolicy_of_the_next_node_without_interleaving_is_einval: SYS_get_mempolicy,
        |b| [b.buf(4), 0, 0, 0, MPOL_F_NODE, 0], Want::Err(EINVAL);
    set_mempolicy_bind_to_node_0_is_reported_back: SYS_set_mempolicy,
        |b| [MPOL_BIND, b.bytes(&1u64.to_le_bytes()), 65, 0, 0, 0], Want::Ret(0),
        then |b| {
            let (mode, nodes) = (b.buf(4), b.buf(8));
            assert_eq!(b.ret(SYS_get_mempolicy, [mode, nodes, 65, 0, 0, 0]), 0);
            assert_eq!(b.read(mode, 4), (MPOL_BIND as u32).to_le_bytes());
            assert_eq!(b.u64_at(nodes), 1);
        };
    set_mempolicy_to_a_node_that_is_not_there_is_einval: SYS_set_mempolicy,
        |b| [MPOL_BIND, b.bytes(&2u64.to_le_bytes()), 65, 0, 0, 0], Want::Err(EINVAL);
    set_mempolicy_default_with_nodes_is_einval: SYS_set_mempolicy,
        |b| [MPOL_DEFAULT, b.bytes(&1u64.to_le_bytes()), 65, 0, 0, 0], Want::Err(EINVAL);
    set_mempolicy_with_an_unknown_mode_is_einval: SYS_set_mempolicy, |_b| [9, 0, 0, 0, 0, 0], Want::Err(EINVAL);
    mbind_gives_the_range_its_policy: SYS_mbind,
        |b| [SCRATCH + 8192, 4096, MPOL_INTERLEAVE, b.bytes(&1u64.to_le_bytes()), 65, 0], Want::Ret(0),
        then |b| {
            let mode = b.buf(4);
            assert_eq!(b.ret(SYS_get_mempolicy, [mode, 0, 0, SCRATCH + 8192, MPOL_F_ADDR, 0]), 0);
            assert_eq!(b.read(mode, 4), (MPOL_INTERLEAVE as u32).to_le_bytes());
            assert_eq!(b.ret(SYS_get_mempolicy, [mode, 0, 0, SCRATCH + 16384, MPOL_F_ADDR, 0]), 0);
            assert_eq!(b.read(mode, 4), [0; 4], "the rest keeps the thread's");
        };
    mbind_of_an_unaligned_address_is_einval: SYS_mbind,
        |_b| [SCRATCH + 1, 4096, MPOL_DEFAULT, 0, 0, 0], Want::Err(EINVAL);
    mbind_over_a_hole_is_efault: SYS_mbind,
        |_b| [super::UNMAPPED, 4096, MPOL_DEFAULT, 0, 0, 0], Want::Err(EFAULT);
}
