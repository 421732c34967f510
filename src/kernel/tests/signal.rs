//! Signals: actions, masks, alternate stacks, kill.

use super::{Want, cases};
use libc::*;

/// `struct kernel_sigaction`: handler, flags, restorer, mask.
fn action(b: &mut super::Bench, handler: u64) -> u64 {
    b.bytes(
        &[
            handler.to_le_bytes(),
            0u64.to_le_bytes(),
            0u64.to_le_bytes(),
            0u64.to_le_bytes(),
        ]
        .concat(),
    )
}

cases! {
    sigaction_for_sigkill_is_einval: SYS_rt_sigaction, |b| [SIGKILL as u64, action(b, 0x1000), 0, 8, 0, 0], Want::Err(EINVAL);
    sigaction_for_signal_0_is_einval: SYS_rt_sigaction, |b| [0, action(b, 0x1000), 0, 8, 0, 0], Want::Err(EINVAL);
    sigaction_for_signal_65_is_einval: SYS_rt_sigaction, |b| [65, 0, b.buf(32), 8, 0, 0], Want::Err(EINVAL);
    sigaction_with_a_wrong_set_size_is_einval: SYS_rt_sigaction, |b| [SIGUSR1 as u64, action(b, 0x1000), 0, 4, 0, 0], Want::Err(EINVAL);
    sigaction_gives_back_the_handler_it_installed: SYS_rt_sigaction, |b| {
        let new = action(b, 0x1000);
        assert_eq!(b.ret(SYS_rt_sigaction, [SIGUSR1 as u64, new, 0, 8, 0, 0]), 0);
        [SIGUSR1 as u64, 0, super::SCRATCH + 4096, 8, 0, 0]
    }, Want::Ret(0), then |b| assert_eq!(b.u64_at(super::SCRATCH + 4096), 0x1000);
    sigprocmask_with_an_unknown_how_is_einval: SYS_rt_sigprocmask, |b| [7, b.buf(8), 0, 8, 0, 0], Want::Err(EINVAL);
    sigprocmask_with_a_wrong_set_size_is_einval: SYS_rt_sigprocmask, |b| [SIG_BLOCK as u64, b.buf(8), 0, 4, 0, 0], Want::Err(EINVAL);
    sigprocmask_never_blocks_sigkill_or_sigstop: SYS_rt_sigprocmask,
        |b| [SIG_SETMASK as u64, b.bytes(&u64::MAX.to_le_bytes()), 0, 8, 0, 0], Want::Ret(0),
        then |b| {
            let m = b.k.cur().sigmask;
            assert_eq!(m & (1 << (SIGKILL - 1)), 0);
            assert_eq!(m & (1 << (SIGSTOP - 1)), 0);
        };
    sigaltstack_smaller_than_minsigstksz_is_enomem: SYS_sigaltstack,
        |b| [b.bytes(&[0x5000_0000u64.to_le_bytes(), 0u64.to_le_bytes(), 64u64.to_le_bytes()].concat()), 0, 0, 0, 0, 0],
        Want::Err(ENOMEM);
    sigaltstack_with_unknown_flags_is_einval: SYS_sigaltstack,
        |b| [b.bytes(&[0x5000_0000u64.to_le_bytes(), 0x77u64.to_le_bytes(), 65536u64.to_le_bytes()].concat()), 0, 0, 0, 0, 0],
        Want::Err(EINVAL);
    kill_of_another_process_is_esrch: SYS_kill, |_b| [99, 0, 0, 0, 0, 0], Want::Err(ESRCH);
    kill_with_signal_0_only_checks: SYS_kill, |_b| [1, 0, 0, 0, 0, 0], Want::Ret(0);
    kill_with_an_invalid_signal_is_einval: SYS_kill, |_b| [1, 99, 0, 0, 0, 0], Want::Err(EINVAL);
    tgkill_of_a_missing_thread_is_esrch: SYS_tgkill, |_b| [1, 42, SIGUSR1 as u64, 0, 0, 0], Want::Err(ESRCH);
    rt_sigpending_reports_an_empty_set: SYS_rt_sigpending, |_b| [super::SCRATCH + 4096, 8, 0, 0, 0, 0], Want::Ret(0),
        then |b| assert_eq!(b.u64_at(super::SCRATCH + 4096), 0);
    sigtimedwait_with_nothing_pending_and_no_time_is_eagain: SYS_rt_sigtimedwait, |b| {
        let set = b.bytes(&(1u64 << (SIGUSR1 - 1)).to_le_bytes());
        let zero = b.bytes(&[0u8; 16]);
        [set, 0, zero, 8, 0, 0]
    }, Want::Err(EAGAIN);
}
