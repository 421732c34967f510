//! Threads, futexes, scheduling calls and thread identity.

use super::{UNMAPPED, Want, cases};
use crate::ids::Pid;
use libc::*;

const WAIT: u64 = (FUTEX_WAIT | FUTEX_PRIVATE_FLAG) as u64;
const WAKE: u64 = (FUTEX_WAKE | FUTEX_PRIVATE_FLAG) as u64;

cases! {
    the_main_thread_is_thread_1: SYS_gettid, |_b| [0; 6], Want::Ret(1);
    the_process_is_process_1: SYS_getpid, |_b| [0; 6], Want::Ret(1);
    futex_wait_on_a_changed_word_is_eagain: SYS_futex, |b| [b.bytes(&5u32.to_le_bytes()), WAIT, 4, 0, 0, 0], Want::Err(EAGAIN);
    futex_wait_on_the_expected_word_blocks: SYS_futex, |b| [b.bytes(&5u32.to_le_bytes()), WAIT, 5, 0, 0, 0], Want::Blocks;
    futex_wake_without_waiters_wakes_nobody: SYS_futex, |b| [b.buf(4), WAKE, 1, 0, 0, 0], Want::Ret(0);
    futex_on_an_unaligned_word_is_einval: SYS_futex, |b| [b.buf(8) + 1, WAIT, 0, 0, 0, 0], Want::Err(EINVAL);
    futex_on_an_unmapped_word_is_efault: SYS_futex, |_b| [UNMAPPED, WAIT, 0, 0, 0, 0], Want::Err(EFAULT);
    futex_with_an_unknown_operation_is_enosys: SYS_futex, |b| [b.buf(4), 99, 0, 0, 0, 0], Want::Err(ENOSYS);
    futex_wait_with_a_negative_timeout_is_einval: SYS_futex, |b| {
        let ts = b.bytes(&[(-1i64).to_le_bytes(), 0i64.to_le_bytes()].concat());
        [b.buf(4), WAIT, 0, ts, 0, 0]
    }, Want::Err(EINVAL);
    sched_yield_gives_up_the_processor: SYS_sched_yield, |_b| [0; 6], Want::Yields(0);
    sched_getaffinity_reports_every_cpu: SYS_sched_getaffinity, |_b| [0, 8, super::SCRATCH + 4096, 0, 0, 0], Want::Ret(8),
        then |b| assert_eq!(b.u64_at(super::SCRATCH + 4096), 0b1111);
    sched_getaffinity_with_a_size_not_a_multiple_of_8_is_einval: SYS_sched_getaffinity,
        |b| [0, 3, b.buf(8), 0, 0, 0], Want::Err(EINVAL);
    prctl_names_the_thread: SYS_prctl, |b| [PR_SET_NAME as u64, b.str("worker"), 0, 0, 0, 0], Want::Ret(0),
        then |b| assert_eq!(b.k.cur().name, "worker");
    prctl_with_an_option_the_monitor_lacks_is_unsupported: SYS_prctl, |_b| [0xdead, 0, 0, 0, 0, 0], Want::Unsupported;
    arch_prctl_set_fs_sets_the_thread_pointer: SYS_arch_prctl, |_b| [ARCH_SET_FS as u64, 0x1234_5000, 0, 0, 0, 0], Want::Ret(0),
        then |b| assert_eq!(b.k.cur().fs_base, 0x1234_5000);
    arch_prctl_with_an_unknown_code_is_einval: SYS_arch_prctl, |_b| [0x9999, 0, 0, 0, 0, 0], Want::Err(EINVAL);
    rseq_is_enosys_as_on_kernels_without_it: SYS_rseq, |b| [b.buf(32), 32, 0, 0, 0, 0], Want::Err(ENOSYS);
    set_tid_address_returns_the_thread_id: SYS_set_tid_address, |b| [b.buf(4), 0, 0, 0, 0, 0], Want::Ret(1);
}

/// `ARCH_SET_FS` from asm/prctl.h.
const ARCH_SET_FS: i32 = 0x1002;

cases! {
    prctl_get_name_gives_the_name_set: SYS_prctl, |b| {
        let name = b.str("worker-thread-long-name");
        b.ret(SYS_prctl, [PR_SET_NAME as u64, name, 0, 0, 0, 0]);
        [PR_GET_NAME as u64, super::SCRATCH + 4096, 0, 0, 0, 0]
    }, Want::Ret(0), then |b| assert_eq!(b.read(super::SCRATCH + 4096, 16), b"worker-thread-l\0");
    prctl_set_thp_disable_is_kept_and_reported: SYS_prctl, |_b| [PR_SET_THP_DISABLE as u64, 1, 0, 0, 0, 0], Want::Ret(0),
        then |b| assert_eq!(b.ret(SYS_prctl, [PR_GET_THP_DISABLE as u64, 0, 0, 0, 0, 0]), 1);
    prctl_set_thp_disable_with_extra_arguments_is_einval: SYS_prctl,
        |_b| [PR_SET_THP_DISABLE as u64, 1, 1, 0, 0, 0], Want::Err(EINVAL);
    prctl_timer_slack_is_50us_until_set: SYS_prctl, |_b| [PR_GET_TIMERSLACK as u64, 0, 0, 0, 0, 0], Want::Ret(50_000),
        then |b| {
            b.ret(SYS_prctl, [PR_SET_TIMERSLACK as u64, 1000, 0, 0, 0, 0]);
            assert_eq!(b.ret(SYS_prctl, [PR_GET_TIMERSLACK as u64, 0, 0, 0, 0, 0]), 1000);
            b.ret(SYS_prctl, [PR_SET_TIMERSLACK as u64, 0, 0, 0, 0, 0]);
            assert_eq!(b.ret(SYS_prctl, [PR_GET_TIMERSLACK as u64, 0, 0, 0, 0, 0]), 50_000, "0 is the default again");
        };
    prctl_dumpable_is_kept: SYS_prctl, |_b| [PR_SET_DUMPABLE as u64, 0, 0, 0, 0, 0], Want::Ret(0),
        then |b| assert_eq!(b.ret(SYS_prctl, [PR_GET_DUMPABLE as u64, 0, 0, 0, 0, 0]), 0);
    prctl_dumpable_of_2_is_einval: SYS_prctl, |_b| [PR_SET_DUMPABLE as u64, 2, 0, 0, 0, 0], Want::Err(EINVAL);
    prctl_parent_death_signal_is_reported: SYS_prctl, |_b| [PR_SET_PDEATHSIG as u64, SIGTERM as u64, 0, 0, 0, 0], Want::Ret(0),
        then |b| {
            b.ret(SYS_prctl, [PR_GET_PDEATHSIG as u64, super::SCRATCH + 4096, 0, 0, 0, 0]);
            assert_eq!(b.read(super::SCRATCH + 4096, 4), (SIGTERM as u32).to_le_bytes());
        };
    prctl_parent_death_signal_of_65_is_einval: SYS_prctl, |_b| [PR_SET_PDEATHSIG as u64, 65, 0, 0, 0, 0], Want::Err(EINVAL);
    a_child_that_asked_gets_its_parent_death_signal: SYS_getpid, |b| {
        let child = b.ret(SYS_fork, [0; 6]) as u32;
        b.k.switch_to(crate::kernel::Tid(child));
        let grandchild = b.ret(SYS_fork, [0; 6]) as u32;
        b.k.switch_to(crate::kernel::Tid(grandchild));
        b.ret(SYS_prctl, [PR_SET_PDEATHSIG as u64, SIGUSR1 as u64, 0, 0, 0, 0]);
        b.k.switch_to(crate::kernel::Tid(child));
        crate::kernel::sys_thread::exit_process(&mut b.k, 0);
        let got = b.k.threads()[&crate::kernel::Tid(grandchild)].pending().iter().map(|s| s.signo).collect::<Vec<_>>();
        assert_eq!(got, vec![SIGUSR1 as u32]);
        b.k.switch_to(crate::kernel::Tid(1));
        [0; 6]
    }, Want::Ret(1);
    prctl_child_subreaper_is_reported: SYS_prctl, |_b| [PR_SET_CHILD_SUBREAPER as u64, 1, 0, 0, 0, 0], Want::Ret(0),
        then |b| {
            b.ret(SYS_prctl, [PR_GET_CHILD_SUBREAPER as u64, super::SCRATCH + 4096, 0, 0, 0, 0]);
            assert_eq!(b.read(super::SCRATCH + 4096, 4), 1u32.to_le_bytes());
        };
    orphans_go_to_the_nearest_subreaper: SYS_getpid, |b| {
        b.ret(SYS_prctl, [PR_SET_CHILD_SUBREAPER as u64, 0, 0, 0, 0, 0]);
        let child = b.ret(SYS_fork, [0; 6]) as u32;
        b.k.switch_to(crate::kernel::Tid(child));
        b.ret(SYS_prctl, [PR_SET_CHILD_SUBREAPER as u64, 1, 0, 0, 0, 0]);
        let grandchild = b.ret(SYS_fork, [0; 6]) as u32;
        b.k.switch_to(crate::kernel::Tid(grandchild));
        let great = b.ret(SYS_fork, [0; 6]) as u32;
        crate::kernel::sys_thread::exit_process(&mut b.k, 0);
        assert_eq!(b.k.processes()[&Pid(great)].parent, Pid(child), "the subreaper takes it");
        b.k.switch_to(crate::kernel::Tid(1));
        [0; 6]
    }, Want::Ret(1);
    prctl_no_new_privs_sticks: SYS_prctl, |_b| [PR_SET_NO_NEW_PRIVS as u64, 1, 0, 0, 0, 0], Want::Ret(0),
        then |b| assert_eq!(b.ret(SYS_prctl, [PR_GET_NO_NEW_PRIVS as u64, 0, 0, 0, 0, 0]), 1);
    prctl_capbset_read_of_an_unknown_capability_is_einval: SYS_prctl, |_b| [PR_CAPBSET_READ as u64, 41, 0, 0, 0, 0], Want::Err(EINVAL);
    prctl_get_tid_address_gives_set_tid_addresss: SYS_prctl, |b| {
        b.ret(SYS_set_tid_address, [0x1234_5678, 0, 0, 0, 0, 0]);
        [PR_GET_TID_ADDRESS as u64, super::SCRATCH + 4096, 0, 0, 0, 0]
    }, Want::Ret(0), then |b| assert_eq!(b.u64_at(super::SCRATCH + 4096), 0x1234_5678);
    prctl_ambient_raise_is_eperm: SYS_prctl, |_b| [PR_CAP_AMBIENT as u64, PR_CAP_AMBIENT_RAISE as u64, 1, 0, 0, 0], Want::Err(EPERM);
    prctl_ambient_is_set_is_no: SYS_prctl, |_b| [PR_CAP_AMBIENT as u64, PR_CAP_AMBIENT_IS_SET as u64, 1, 0, 0, 0], Want::Ret(0);
}
