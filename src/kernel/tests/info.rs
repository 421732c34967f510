//! Identity and limits: uname, ids, getrandom, rlimits, umask.

use super::{UNMAPPED, Want, cases};
use libc::*;

cases! {
    uname_names_a_linux_machine: SYS_uname, |_b| [super::SCRATCH + 4096, 0, 0, 0, 0, 0], Want::Ret(0),
        then |b| {
            assert_eq!(b.read(super::SCRATCH + 4096, 6), b"Linux\0");
            assert_eq!(b.read(super::SCRATCH + 4096 + 65 * 4, 7), b"x86_64\0");
        };
    uname_into_an_unmapped_buffer_is_efault: SYS_uname, |_b| [UNMAPPED, 0, 0, 0, 0, 0], Want::Err(EFAULT);
    the_user_is_root: SYS_getuid, |_b| [0; 6], Want::Ret(0);
    getrandom_fills_the_buffer: SYS_getrandom, |b| [b.buf(32), 32, 0, 0, 0, 0], Want::Ret(32);
    getrandom_with_unknown_flags_is_einval: SYS_getrandom, |b| [b.buf(32), 32, 0x100, 0, 0, 0], Want::Err(EINVAL);
    getrandom_is_the_same_for_the_same_seed: SYS_getrandom, |_b| [super::SCRATCH + 4096, 16, 0, 0, 0, 0], Want::Ret(16),
        then |b| {
            let mut other = super::Bench::new();
            assert_eq!(other.ret(SYS_getrandom, [super::SCRATCH + 4096, 16, 0, 0, 0, 0]), 16);
            assert_eq!(b.read(super::SCRATCH + 4096, 16), other.read(super::SCRATCH + 4096, 16));
        };
    prlimit64_of_another_process_is_esrch: SYS_prlimit64, |b| [42, RLIMIT_NOFILE as u64, 0, b.buf(16), 0, 0], Want::Err(ESRCH);
    prlimit64_of_an_unknown_resource_is_einval: SYS_prlimit64, |b| [0, 99, 0, b.buf(16), 0, 0], Want::Err(EINVAL);
    prlimit64_sets_and_reports_a_limit: SYS_prlimit64, |b| {
        let new = b.bytes(&[64u64.to_le_bytes(), 128u64.to_le_bytes()].concat());
        assert_eq!(b.ret(SYS_prlimit64, [0, RLIMIT_NOFILE as u64, new, 0, 0, 0]), 0);
        [0, RLIMIT_NOFILE as u64, 0, super::SCRATCH + 4096, 0, 0]
    }, Want::Ret(0), then |b| assert_eq!(b.u64_at(super::SCRATCH + 4096), 64);
    umask_returns_the_previous_mask: SYS_umask, |_b| [0o077, 0, 0, 0, 0, 0], Want::Ret(0o022);
    sysinfo_into_an_unmapped_buffer_is_efault: SYS_sysinfo, |_b| [UNMAPPED, 0, 0, 0, 0, 0], Want::Err(EFAULT);
    capget_gives_roots_capabilities: SYS_capget, |b| {
        let mut h = 0x2008_0522u32.to_le_bytes().to_vec();
        h.extend_from_slice(&0i32.to_le_bytes());
        [b.bytes(&h), b.buf(24), 0, 0, 0, 0]
    }, Want::Ret(0);
    capget_with_an_old_version_says_which_it_takes: SYS_capget, |b| {
        let mut h = 0x1998_0330u32.to_le_bytes().to_vec();
        h.extend_from_slice(&0i32.to_le_bytes());
        [b.bytes(&h), 0, 0, 0, 0, 0]
    }, Want::Err(EINVAL);
}

cases! {
    setuid_to_root_is_accepted: SYS_setuid, |b| [0, 0, 0, 0, 0, 0], Want::Ret(0);
    setuid_to_another_user_is_unsupported: SYS_setuid, |b| [1000, 0, 0, 0, 0, 0], Want::Unsupported;
    setresuid_keeping_or_choosing_root_is_accepted: SYS_setresuid, |b| [u32::MAX as u64, 0, u32::MAX as u64, 0, 0, 0], Want::Ret(0);
    setresgid_to_another_group_is_unsupported: SYS_setresgid, |b| [0, 5, 0, 0, 0, 0], Want::Unsupported;
    setgroups_with_a_negative_count_is_einval: SYS_setgroups, |b| [u64::MAX, 0, 0, 0, 0, 0], Want::Err(EINVAL);
    setgroups_from_a_bad_pointer_is_efault: SYS_setgroups, |b| [1, super::UNMAPPED, 0, 0, 0, 0], Want::Err(EFAULT);
    setgroups_to_none_is_accepted: SYS_setgroups, |b| [0, 0, 0, 0, 0, 0], Want::Ret(0);
}

cases! {
    personality_asked_tells_linux: SYS_personality, |_b| [0xffff_ffff, 0, 0, 0, 0, 0], Want::Ret(0);
    personality_without_address_randomization_is_kept_and_told: SYS_personality, |b| {
        assert_eq!(b.ret(SYS_personality, [0x0004_0000, 0, 0, 0, 0, 0]), 0);
        [0xffff_ffff, 0, 0, 0, 0, 0]
    }, Want::Ret(0x0004_0000);
    personality_read_implies_exec_is_unsupported: SYS_personality,
        |_b| [0x0040_0000, 0, 0, 0, 0, 0], Want::Unsupported;
}
