//! Timers, timer and signal descriptors, select: Linux's errors.

use super::{Want, cases};
use libc::*;

/// An itimerspec (interval, value) in scratch memory.
fn itimerspec(b: &mut super::Bench, interval_ns: u64, value_ns: u64) -> u64 {
    let mut v = Vec::new();
    for ns in [interval_ns, value_ns] {
        v.extend_from_slice(&(ns / 1_000_000_000).to_le_bytes());
        v.extend_from_slice(&(ns % 1_000_000_000).to_le_bytes());
    }
    b.bytes(&v)
}

cases! {
    alarm_returns_the_seconds_left_of_the_last: SYS_alarm, |b| {
        assert_eq!(b.ret(SYS_alarm, [5, 0, 0, 0, 0, 0]), 0);
        [0, 0, 0, 0, 0, 0]
    }, Want::Ret(5);
    setitimer_of_an_unknown_timer_is_einval: SYS_setitimer, |b| [5, b.buf(32), 0, 0, 0, 0], Want::Err(EINVAL);
    setitimer_with_a_bad_microsecond_count_is_einval: SYS_setitimer, |b| {
        let v = b.bytes(&[0, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x42, 0x0f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
        [0, v, 0, 0, 0, 0]
    }, Want::Err(EINVAL);
    setitimer_from_a_bad_pointer_is_efault: SYS_setitimer, |b| [0, super::UNMAPPED, 0, 0, 0, 0], Want::Err(EFAULT);
    timer_create_on_an_unknown_clock_is_einval: SYS_timer_create, |b| [99, 0, b.buf(4), 0, 0, 0], Want::Err(EINVAL);
    timer_create_with_an_unknown_notification_is_einval: SYS_timer_create, |b| {
        let ev = b.bytes(&[0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 9, 0, 0, 0]);
        [CLOCK_MONOTONIC as u64, ev, b.buf(4), 0, 0, 0]
    }, Want::Err(EINVAL);
    timer_create_into_a_bad_pointer_is_efault: SYS_timer_create, |b| [CLOCK_MONOTONIC as u64, 0, super::UNMAPPED, 0, 0, 0], Want::Err(EFAULT);
    timer_settime_of_no_timer_is_einval: SYS_timer_settime, |b| {
        let spec = itimerspec(b, 0, 1000);
        [7, 0, spec, 0, 0, 0]
    }, Want::Err(EINVAL);
    a_created_timer_can_be_deleted_once: SYS_timer_delete, |b| {
        let id = b.buf(4);
        assert_eq!(b.ret(SYS_timer_create, [CLOCK_MONOTONIC as u64, 0, id, 0, 0, 0]), 0);
        assert_eq!(b.ret(SYS_timer_delete, [0, 0, 0, 0, 0, 0]), 0);
        [0, 0, 0, 0, 0, 0]
    }, Want::Err(EINVAL);
    timerfd_create_on_an_unknown_clock_is_einval: SYS_timerfd_create, |b| [99, 0, 0, 0, 0, 0], Want::Err(EINVAL);
    timerfd_create_with_unknown_flags_is_einval: SYS_timerfd_create, |b| [CLOCK_MONOTONIC as u64, 1, 0, 0, 0, 0], Want::Err(EINVAL);
    timerfd_settime_of_a_bad_descriptor_is_ebadf: SYS_timerfd_settime, |b| {
        let spec = itimerspec(b, 0, 1000);
        [99, 0, spec, 0, 0, 0]
    }, Want::Err(EBADF);
    timerfd_settime_of_another_file_is_einval: SYS_timerfd_settime, |b| {
        let spec = itimerspec(b, 0, 1000);
        [1, 0, spec, 0, 0, 0]
    }, Want::Err(EINVAL);
    timerfd_settime_with_a_bad_nanosecond_count_is_einval: SYS_timerfd_settime, |b| {
        let fd = b.ret(SYS_timerfd_create, [CLOCK_MONOTONIC as u64, 0, 0, 0, 0, 0]) as u64;
        let spec = itimerspec(b, 0, 1000);
        b.k.write_u64(spec + 24, 2_000_000_000).unwrap();
        [fd, 0, spec, 0, 0, 0]
    }, Want::Err(EINVAL);
    reading_a_timerfd_into_less_than_8_bytes_is_einval: SYS_read, |b| {
        let fd = b.ret(SYS_timerfd_create, [CLOCK_MONOTONIC as u64, 0, 0, 0, 0, 0]) as u64;
        [fd, b.buf(8), 4, 0, 0, 0]
    }, Want::Err(EINVAL);
    reading_an_unexpired_nonblocking_timerfd_is_eagain: SYS_read, |b| {
        let fd = b.ret(SYS_timerfd_create, [CLOCK_MONOTONIC as u64, TFD_NONBLOCK as u64, 0, 0, 0, 0]) as u64;
        [fd, b.buf(8), 8, 0, 0, 0]
    }, Want::Err(EAGAIN);
    reading_an_unexpired_timerfd_blocks: SYS_read, |b| {
        let fd = b.ret(SYS_timerfd_create, [CLOCK_MONOTONIC as u64, 0, 0, 0, 0, 0]) as u64;
        let spec = itimerspec(b, 0, 1_000_000);
        assert_eq!(b.ret(SYS_timerfd_settime, [fd, 0, spec, 0, 0, 0]), 0);
        [fd, b.buf(8), 8, 0, 0, 0]
    }, Want::Blocks;
    signalfd_with_a_wrong_mask_size_is_einval: SYS_signalfd4, |b| [u64::MAX, b.buf(8), 4, 0, 0, 0], Want::Err(EINVAL);
    signalfd_with_unknown_flags_is_einval: SYS_signalfd4, |b| [u64::MAX, b.buf(8), 8, 1, 0, 0], Want::Err(EINVAL);
    signalfd_from_a_bad_mask_pointer_is_efault: SYS_signalfd4, |b| [u64::MAX, super::UNMAPPED, 8, 0, 0, 0], Want::Err(EFAULT);
    signalfd_on_another_file_is_einval: SYS_signalfd4, |b| [1, b.buf(8), 8, 0, 0, 0], Want::Err(EINVAL);
    reading_a_signalfd_into_less_than_128_bytes_is_einval: SYS_read, |b| {
        let mask = b.bytes(&(1u64 << 9).to_le_bytes());
        let fd = b.ret(SYS_signalfd4, [u64::MAX, mask, 8, 0, 0, 0]) as u64;
        [fd, b.buf(128), 64, 0, 0, 0]
    }, Want::Err(EINVAL);
    reading_an_empty_nonblocking_signalfd_is_eagain: SYS_read, |b| {
        let mask = b.bytes(&(1u64 << 9).to_le_bytes());
        let fd = b.ret(SYS_signalfd4, [u64::MAX, mask, 8, SFD_NONBLOCK as u64, 0, 0]) as u64;
        [fd, b.buf(128), 128, 0, 0, 0]
    }, Want::Err(EAGAIN);
    a_pending_signal_is_read_from_a_signalfd: SYS_read, |b| {
        let mask = b.bytes(&(1u64 << (SIGUSR1 - 1)).to_le_bytes());
        assert_eq!(b.ret(SYS_rt_sigprocmask, [SIG_BLOCK as u64, mask, 0, 8, 0, 0]), 0);
        let fd = b.ret(SYS_signalfd4, [u64::MAX, mask, 8, 0, 0, 0]) as u64;
        assert_eq!(b.ret(SYS_kill, [1, SIGUSR1 as u64, 0, 0, 0, 0]), 0);
        [fd, super::SCRATCH + 8192, 128, 0, 0, 0]
    }, Want::Ret(128), then |b| assert_eq!(b.read(super::SCRATCH + 8192, 4), (SIGUSR1 as u32).to_le_bytes());
    select_with_a_negative_count_is_einval: SYS_select, |b| [u64::MAX, 0, 0, 0, 0, 0], Want::Err(EINVAL);
    select_on_a_closed_descriptor_is_ebadf: SYS_select, |b| {
        let set = b.bytes(&(1u64 << 9).to_le_bytes());
        [10, set, 0, 0, b.buf(16), 0]
    }, Want::Err(EBADF);
    select_from_a_bad_set_pointer_is_efault: SYS_select, |b| [3, super::UNMAPPED, 0, 0, 0, 0], Want::Err(EFAULT);
    select_with_a_bad_timeout_is_einval: SYS_select, |b| {
        let tv = b.bytes(&[0, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x42, 0x0f, 0, 0, 0, 0, 0]);
        [1, 0, 0, 0, tv, 0]
    }, Want::Err(EINVAL);
    select_finds_stdout_writable: SYS_select, |b| {
        let set = b.bytes(&2u64.to_le_bytes());
        [2, 0, set, 0, b.buf(16), 0]
    }, Want::Ret(1);
}
