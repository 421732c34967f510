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
