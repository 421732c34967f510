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

const SHARED: u64 = MAP_SHARED as u64;

/// A new overlay file `path` holding `data`, open read-write: its descriptor.
fn file_with(b: &mut super::Bench, path: &str, data: &[u8]) -> u64 {
    let fd = b.open(path, O_RDWR | O_CREAT | O_TRUNC);
    let d = b.bytes(data);
    assert_eq!(
        b.ret(SYS_write, [fd, d, data.len() as u64, 0, 0, 0]),
        data.len() as i64
    );
    fd
}

/// Maps `len` bytes of `fd` shared and writable; the address.
fn map_shared(b: &mut super::Bench, fd: u64, len: u64) -> u64 {
    let a = b.ret(SYS_mmap, [0, len, RW, SHARED, fd, 0]);
    assert!(a > 0, "mmap: {a}");
    a as u64
}

/// The futex key of `addr` in the current process, as a shared (`private`
/// false) or private operation keys it.
fn key(b: &mut super::Bench, addr: u64, private: bool) -> crate::kernel::futex::FutexKey {
    b.k.futex_key(addr, private)
}

cases! {
    a_shared_file_mapping_holds_the_file: SYS_mmap, |b| {
        let fd = file_with(b, "/data/f", b"shared bytes");
        [0, 4096, RW, SHARED, fd, 0]
    }, Want::Ok, then |b| {
        let a = b.k.mm().vmas().find(|v| v.name == "/data/f").unwrap().start;
        assert_eq!(b.read(a, 12), b"shared bytes");
        assert_eq!(b.read(a + 12, 4), [0; 4], "zeros past the end");
    };
    what_a_shared_mapping_writes_read_reads: SYS_pread64, |b| {
        let fd = file_with(b, "/data/f", b"hello world");
        let a = map_shared(b, fd, 4096);
        b.k.write(a, b"HELLO").unwrap();
        [fd, super::SCRATCH + 8192, 11, 0, 0, 0]
    }, Want::Ret(11), then |b| assert_eq!(b.read(super::SCRATCH + 8192, 11), b"HELLO world");
    what_write_writes_a_shared_mapping_sees: SYS_pwrite64, |b| {
        let fd = file_with(b, "/data/f", b"hello world");
        map_shared(b, fd, 4096);
        [fd, b.bytes(b"WORLD"), 5, 6, 0, 0]
    }, Want::Ret(5), then |b| {
        let a = b.k.mm().vmas().find(|v| v.name == "/data/f").unwrap().start;
        assert_eq!(b.read(a, 11), b"hello WORLD");
    };
    two_mappings_of_one_file_are_the_same_pages: SYS_mmap, |b| {
        let fd = file_with(b, "/data/f", b"x");
        let first = map_shared(b, fd, 4096);
        b.k.write(first, b"one").unwrap();
        let again = b.open("/data/f", O_RDWR);
        [0, 4096, RW, SHARED, again, 0]
    }, Want::Ok, then |b| {
        let maps: Vec<u64> = b.k.mm().vmas().filter(|v| v.name == "/data/f").map(|v| v.start).collect();
        assert_eq!(maps.len(), 2);
        assert_eq!(b.read(maps[1], 3), b"one");
        let pages: Vec<_> = maps.iter().map(|a| b.k.mm().page_of(b.k.mem(), *a)).collect();
        assert_eq!(pages[0], pages[1], "one guest-physical page");
    };
    a_shared_writable_mapping_of_a_read_only_descriptor_is_eacces: SYS_mmap, |b| {
        file_with(b, "/data/f", b"x");
        [0, 4096, RW, SHARED, b.open("/data/f", O_RDONLY), 0]
    }, Want::Err(EACCES);
    a_read_only_shared_mapping_of_a_host_file_is_a_copy: SYS_mmap,
        |b| [0, 4096, PROT_READ as u64, SHARED, b.open("/data/hello.txt", O_RDONLY), 0], Want::Ok,
        then |b| {
            let v = b.k.mm().vmas().find(|v| v.name == "/data/hello.txt").unwrap();
            assert!(v.shared && v.shared_at(v.start).is_none());
        };
    a_forked_child_maps_the_parents_shared_pages: SYS_getpid, |b| {
        let fd = file_with(b, "/data/f", b"before");
        let a = map_shared(b, fd, 4096);
        let anon = b.ret(SYS_mmap, [0, 4096, RW, SHARED | MAP_ANONYMOUS as u64, u64::MAX, 0]) as u64;
        b.k.write(anon, b"anon").unwrap();
        let child = b.ret(SYS_fork, [0; 6]) as u32;
        b.k.switch_to(crate::kernel::Tid(child));
        b.k.write(a, b"AFTER").unwrap();
        b.k.write(anon, b"ANON").unwrap();
        b.k.switch_to(crate::kernel::Tid(1));
        assert_eq!(b.read(a, 6), b"AFTERe");
        assert_eq!(b.read(anon, 4), b"ANON");
        [0; 6]
    }, Want::Ret(1);
    a_shared_futex_word_is_one_futex_wherever_it_is_mapped: SYS_getpid, |b| {
        let fd = file_with(b, "/data/sem", &[0; 64]);
        let here = map_shared(b, fd, 4096);
        let shared_here = key(b, here + 32, false);
        let child = b.ret(SYS_fork, [0; 6]) as u32;
        b.k.switch_to(crate::kernel::Tid(child));
        let again = b.open("/data/sem", O_RDWR);
        let there = map_shared(b, again, 4096);
        assert_ne!(here, there);
        assert_eq!(key(b, there + 32, false), shared_here, "by file and offset");
        assert_ne!(key(b, there + 32, true), key(b, here + 32, true), "private: by address space");
        b.k.switch_to(crate::kernel::Tid(1));
        assert_ne!(key(b, here + 32, true), shared_here);
        [0; 6]
    }, Want::Ret(1);
    a_waiter_in_one_process_is_woken_from_another: SYS_futex, |b| {
        let fd = file_with(b, "/data/sem", &[0; 64]);
        let here = map_shared(b, fd, 4096);
        let child = b.ret(SYS_fork, [0; 6]) as u32;
        b.k.switch_to(crate::kernel::Tid(child));
        let again = b.open("/data/sem", O_RDWR);
        let there = map_shared(b, again, 4096);
        let r = b.call(SYS_futex, [there, FUTEX_WAIT as u64, 0, 0, 0, 0]);
        let crate::kernel::SysResult::Block(w) = r else { panic!("{r:?}") };
        let crate::kernel::Wait::Futex { key, bitset, .. } = w.clone() else { panic!() };
        b.k.futex.enqueue(key, crate::kernel::Tid(child), bitset);
        b.k.threads.set_state(b.k.current, crate::kernel::ThreadState::Blocked(w));
        b.k.switch_to(crate::kernel::Tid(1));
        [here, FUTEX_WAKE as u64, 1, 0, 0, 0]
    }, Want::Ret(1), then |b| assert!(b.k.threads()[&crate::kernel::Tid(2)].is_runnable());
    madvise_dontneed_keeps_a_shared_mappings_contents: SYS_madvise, |b| {
        let fd = file_with(b, "/data/f", b"kept");
        let a = map_shared(b, fd, 4096);
        b.k.cur().name = a.to_string();
        [a, 4096, MADV_DONTNEED as u64, 0, 0, 0]
    }, Want::Ret(0), then |b| {
        let a: u64 = b.k.cur().name.parse().unwrap();
        assert_eq!(b.read(a, 4), b"kept");
    };
    the_last_munmap_writes_the_file_and_frees_the_pages: SYS_munmap, |b| {
        let fd = file_with(b, "/data/f", b"file");
        let a = map_shared(b, fd, 8192);
        b.k.write(a, b"FI").unwrap();
        [a, 8192, 0, 0, 0, 0]
    }, Want::Ret(0), then |b| {
        assert!(b.k.mm().allocator().objects().is_empty(), "no object is left");
        assert_eq!(b.k.vfs().overlay_data("/data/f").unwrap(), b"FIle");
    };
    ftruncate_shortening_a_mapped_file_zeroes_the_rest_of_its_page: SYS_ftruncate, |b| {
        let fd = file_with(b, "/data/f", b"0123456789");
        let a = map_shared(b, fd, 4096);
        b.k.cur().name = a.to_string();
        [fd, 4, 0, 0, 0, 0]
    }, Want::Ret(0), then |b| {
        let a: u64 = b.k.cur().name.parse().unwrap();
        assert_eq!(b.read(a, 10), b"0123\0\0\0\0\0\0");
    };
    msync_with_both_async_and_sync_is_einval: SYS_msync, |_b| [SCRATCH, 4096, 5, 0, 0, 0], Want::Err(EINVAL);
    msync_of_an_unmapped_range_is_enomem: SYS_msync, |_b| [super::UNMAPPED, 4096, MS_SYNC as u64, 0, 0, 0], Want::Err(ENOMEM);
    msync_writes_a_shared_mapping_into_its_file: SYS_msync, |b| {
        let fd = file_with(b, "/data/f", b"abc");
        let a = map_shared(b, fd, 4096);
        b.k.write(a, b"X").unwrap();
        [a, 4096, MS_SYNC as u64, 0, 0, 0]
    }, Want::Ret(0), then |b| assert_eq!(b.k.vfs().overlay_data("/data/f").unwrap(), b"Xbc");
    a_private_mapping_copies_the_file_as_a_shared_one_left_it: SYS_pread64, |b| {
        let fd = file_with(b, "/data/f", b"abc");
        let a = map_shared(b, fd, 4096);
        b.k.write(a, b"Z").unwrap();
        let copy = b.ret(SYS_mmap, [0, 4096, PROT_READ as u64, MAP_PRIVATE as u64, fd, 0]) as u64;
        assert_eq!(b.read(copy, 3), b"Zbc", "a private mapping copies the file as the mapping left it");
        [fd, b.buf(3), 3, 0, 0, 0]
    }, Want::Ret(3);
}
