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
            let m = b.k.cur().sigmask();
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

/// The mask bit of `sig`.
fn bit(sig: i32) -> u64 {
    1 << (sig - 1)
}

/// Blocks `sig` in the bench's thread.
fn block(b: &mut super::Bench, sig: i32) {
    let set = b.bytes(&bit(sig).to_le_bytes());
    assert_eq!(
        b.ret(SYS_rt_sigprocmask, [SIG_BLOCK as u64, set, 0, 8, 0, 0]),
        0
    );
}

/// Sends `sig` to the bench's thread, as another process's `kill` would.
fn send(b: &mut super::Bench, sig: i32) {
    let s = crate::kernel::thread::PendingSignal {
        signo: sig as u32,
        code: 0,
        addr: 0,
        sender: 7,
        forced: false,
    };
    let me = b.k.current();
    crate::kernel::signal::send_to_thread(&mut b.k, me, s);
}

/// The bench thread's (mask, saved mask, state).
fn masks(b: &mut super::Bench) -> (u64, Option<u64>, bool) {
    let t = b.k.cur();
    (t.sigmask(), t.saved_mask, t.is_runnable())
}

cases! {
    ppoll_with_a_mask_of_another_size_is_einval: SYS_ppoll,
        |b| [0, 0, 0, b.bytes(&0u64.to_le_bytes()), 4, 0], Want::Err(EINVAL);
    ppoll_waits_with_its_own_mask_and_a_signal_it_lets_through_ends_it: SYS_ppoll, |b| {
        block(b, SIGUSR1);
        [0, 0, 0, b.bytes(&0u64.to_le_bytes()), 8, 0]
    }, Want::Blocks, then |b| {
        assert_eq!(masks(b), (0, Some(bit(SIGUSR1)), true), "the call's mask is in force");
        b.k.threads.set_state(b.k.current, crate::kernel::ThreadState::Blocked(crate::kernel::Wait::Poll { deadline: None, nr: SYS_ppoll as u64, on: Vec::new() }));
        send(b, SIGUSR1);
        assert!(b.k.cur().is_runnable());
        assert_eq!(b.k.cur().regs.rax as i64, -(EINTR as i64));
        assert_eq!(masks(b), (0, Some(bit(SIGUSR1)), true), "the handler's frame restores the old mask");
    };
    ppoll_that_finds_a_descriptor_ready_gives_the_old_mask_back: SYS_ppoll, |b| {
        block(b, SIGUSR1);
        let fd = b.open("/data/hello.txt", O_RDONLY) as i32;
        let mut p = fd.to_le_bytes().to_vec();
        p.extend_from_slice(&[1, 0, 0, 0]);
        [b.bytes(&p), 1, 0, b.bytes(&0u64.to_le_bytes()), 8, 0]
    }, Want::Ret(1), then |b| assert_eq!(masks(b), (bit(SIGUSR1), None, true));
    ppoll_with_a_signal_pending_that_its_mask_lets_through_is_eintr: SYS_ppoll, |b| {
        block(b, SIGUSR1);
        send(b, SIGUSR1);
        [0, 0, 0, b.bytes(&0u64.to_le_bytes()), 8, 0]
    }, Want::Err(EINTR), then |b| assert_eq!(masks(b), (0, Some(bit(SIGUSR1)), true));
    ppoll_without_a_mask_keeps_the_threads: SYS_ppoll, |b| {
        block(b, SIGUSR1);
        send(b, SIGUSR1);
        [0, 0, 0, 0, 8, 0]
    }, Want::Blocks, then |b| assert_eq!(masks(b), (bit(SIGUSR1), None, true));
    pselect6_waits_with_the_mask_its_sixth_argument_points_at: SYS_pselect6, |b| {
        block(b, SIGUSR1);
        let set = b.bytes(&0u64.to_le_bytes());
        let sig6 = b.bytes(&[set.to_le_bytes(), 8u64.to_le_bytes()].concat());
        [0, 0, 0, 0, 0, sig6]
    }, Want::Blocks, then |b| assert_eq!(masks(b), (0, Some(bit(SIGUSR1)), true));
    pselect6_with_a_pending_signal_its_mask_lets_through_is_eintr: SYS_pselect6, |b| {
        block(b, SIGUSR1);
        send(b, SIGUSR1);
        let set = b.bytes(&0u64.to_le_bytes());
        let sig6 = b.bytes(&[set.to_le_bytes(), 8u64.to_le_bytes()].concat());
        [0, 0, 0, 0, 0, sig6]
    }, Want::Err(EINTR);
    pselect6_with_a_bad_mask_size_is_einval: SYS_pselect6, |b| {
        let set = b.bytes(&0u64.to_le_bytes());
        let sig6 = b.bytes(&[set.to_le_bytes(), 16u64.to_le_bytes()].concat());
        [0, 0, 0, 0, 0, sig6]
    }, Want::Err(EINVAL);
    a_timed_out_wait_gives_the_old_mask_back: SYS_ppoll, |b| {
        block(b, SIGUSR1);
        let ts = b.bytes(&[0u64.to_le_bytes(), 5000u64.to_le_bytes()].concat());
        [0, 0, ts, b.bytes(&0u64.to_le_bytes()), 8, 0]
    }, Want::Blocks, then |b| {
        let me = b.k.current();
        b.k.threads.set_state(b.k.current, crate::kernel::ThreadState::Blocked(crate::kernel::Wait::Poll { deadline: Some(1), nr: SYS_ppoll as u64, on: Vec::new() }));
        b.k.wake(me, 0);
        assert_eq!(masks(b), (bit(SIGUSR1), None, true));
    };
    an_interrupting_signal_that_no_handler_takes_still_gives_the_mask_back: SYS_ppoll, |b| {
        block(b, SIGUSR1);
        send(b, SIGUSR1);
        [0, 0, 0, b.bytes(&0u64.to_le_bytes()), 8, 0]
    }, Want::Err(EINTR), then |b| {
        // The signal is ignored before it is delivered.
        { let me = b.k.current(); b.k.threads.change_pending(me, Vec::clear); }
        b.k.deliver_signals(&mut b.fpu);
        assert_eq!(masks(b), (bit(SIGUSR1), None, true));
    };
    sigtimedwait_unblocks_its_set_while_it_waits: SYS_rt_sigtimedwait, |b| {
        block(b, SIGUSR1);
        block(b, SIGUSR2);
        [b.bytes(&bit(SIGUSR1).to_le_bytes()), super::SCRATCH + 8192, 0, 8, 0, 0]
    }, Want::Blocks, then |b| {
        assert_eq!(masks(b), (bit(SIGUSR2), Some(bit(SIGUSR1) | bit(SIGUSR2)), true));
    };
    a_signal_of_the_set_completes_a_sigtimedwait_with_its_siginfo: SYS_rt_sigtimedwait, |b| {
        block(b, SIGUSR1);
        [b.bytes(&bit(SIGUSR1).to_le_bytes()), super::SCRATCH + 8192, 0, 8, 0, 0]
    }, Want::Blocks, then |b| {
        b.k.threads.set_state(b.k.current, crate::kernel::ThreadState::Blocked(crate::kernel::Wait::SigWait {
            set: bit(SIGUSR1), info: super::SCRATCH + 8192, deadline: None,
        }));
        send(b, SIGUSR1);
        assert_eq!(b.k.cur().regs.rax, SIGUSR1 as u64);
        assert!(b.k.cur().pending().is_empty(), "the call took the signal");
        assert_eq!(masks(b), (bit(SIGUSR1), None, true), "the old mask is back");
        let info = b.read(super::SCRATCH + 8192, 20);
        assert_eq!(i32::from_le_bytes(info[0..4].try_into().unwrap()), SIGUSR1);
        assert_eq!(u32::from_le_bytes(info[16..20].try_into().unwrap()), 7, "the sender");
    };
    sigtimedwait_takes_a_pending_signal_of_its_set_at_once: SYS_rt_sigtimedwait, |b| {
        block(b, SIGUSR1);
        send(b, SIGUSR1);
        [b.bytes(&bit(SIGUSR1).to_le_bytes()), 0, 0, 8, 0, 0]
    }, Want::Ret(SIGUSR1 as i64), then |b| assert_eq!(masks(b), (bit(SIGUSR1), None, true));
    sigtimedwait_interrupted_by_a_signal_outside_its_set_is_eintr: SYS_rt_sigtimedwait, |b| {
        send(b, SIGUSR2);
        [b.bytes(&bit(SIGUSR1).to_le_bytes()), 0, 0, 8, 0, 0]
    }, Want::Err(EINTR);
}
