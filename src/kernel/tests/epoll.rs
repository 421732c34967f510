//! epoll over pipes and event counters, and socket pairs.

use super::{Want, cases};
use libc::*;

/// A packed `struct epoll_event`.
fn event(events: u32, data: u64) -> Vec<u8> {
    let mut e = events.to_le_bytes().to_vec();
    e.extend_from_slice(&data.to_le_bytes());
    e
}

/// Makes an epoll instance watching a new event counter for `events`;
/// returns (epoll fd, counter fd).
fn watched_counter(b: &mut super::Bench, initial: u64, events: u32) -> (u64, u64) {
    let ep = b.ret(SYS_epoll_create1, [EPOLL_CLOEXEC as u64, 0, 0, 0, 0, 0]) as u64;
    let efd = b.ret(SYS_eventfd2, [initial, EFD_NONBLOCK as u64, 0, 0, 0, 0]) as u64;
    let e = event(events, 42);
    let ev = b.bytes(&e);
    assert_eq!(
        b.ret(SYS_epoll_ctl, [ep, EPOLL_CTL_ADD as u64, efd, ev, 0, 0]),
        0
    );
    (ep, efd)
}

cases! {
    a_ready_counter_is_reported_with_its_data: SYS_epoll_wait, |b| {
        let (ep, _) = watched_counter(b, 1, EPOLLIN as u32);
        [ep, super::SCRATCH + 4096, 8, 0, 0, 0]
    }, Want::Ret(1), then |b| {
        let raw = b.read(super::SCRATCH + 4096, 12);
        assert_eq!(u32::from_le_bytes(raw[0..4].try_into().unwrap()), EPOLLIN as u32);
        assert_eq!(u64::from_le_bytes(raw[4..12].try_into().unwrap()), 42);
    };
    nothing_ready_and_no_timeout_is_zero: SYS_epoll_wait, |b| {
        let (ep, _) = watched_counter(b, 0, EPOLLIN as u32);
        [ep, b.buf(12), 8, 0, 0, 0]
    }, Want::Ret(0);
    an_edge_is_reported_once: SYS_epoll_wait, |b| {
        let (ep, _) = watched_counter(b, 1, (EPOLLIN | EPOLLET) as u32);
        let out = b.buf(12);
        assert_eq!(b.ret(SYS_epoll_wait, [ep, out, 8, 0, 0, 0]), 1);
        [ep, out, 8, 0, 0, 0]
    }, Want::Ret(0);
    adding_twice_is_eexist: SYS_epoll_ctl, |b| {
        let (ep, efd) = watched_counter(b, 0, EPOLLIN as u32);
        let e = event(EPOLLIN as u32, 1);
        [ep, EPOLL_CTL_ADD as u64, efd, b.bytes(&e), 0, 0]
    }, Want::Err(EEXIST);
    a_regular_file_cannot_be_watched: SYS_epoll_ctl, |b| {
        let ep = b.ret(SYS_epoll_create1, [0, 0, 0, 0, 0, 0]) as u64;
        let fd = b.open("/data/hello.txt", O_RDONLY);
        let e = event(EPOLLIN as u32, 1);
        [ep, EPOLL_CTL_ADD as u64, fd, b.bytes(&e), 0, 0]
    }, Want::Err(EPERM);
    a_socket_pair_carries_bytes_both_ways: SYS_read, |b| {
        let fds = b.buf(8);
        assert_eq!(b.ret(SYS_socketpair, [AF_UNIX as u64, SOCK_STREAM as u64, 0, fds, 0, 0]), 0);
        let raw = b.read(fds, 8);
        let one = i32::from_le_bytes(raw[0..4].try_into().unwrap()) as u64;
        let two = i32::from_le_bytes(raw[4..8].try_into().unwrap()) as u64;
        let ping = b.bytes(b"ping");
        assert_eq!(b.ret(SYS_write, [one, ping, 4, 0, 0, 0]), 4);
        [two, super::SCRATCH + 4096, 16, 0, 0, 0]
    }, Want::Ret(4), then |b| assert_eq!(b.read(super::SCRATCH + 4096, 4), b"ping");
    pkey_alloc_finds_no_key: SYS_pkey_alloc, |_b| [0, 0, 0, 0, 0, 0], Want::Err(ENOSPC);
}

cases! {
    epoll_pwait_waits_with_its_own_mask: SYS_epoll_pwait, |b| {
        let (ep, _) = watched_counter(b, 0, EPOLLIN as u32);
        let set = b.bytes(&(1u64 << (SIGCHLD - 1)).to_le_bytes());
        assert_eq!(b.ret(SYS_rt_sigprocmask, [SIG_BLOCK as u64, set, 0, 8, 0, 0]), 0);
        [ep, b.buf(12), 8, u64::MAX, b.bytes(&0u64.to_le_bytes()), 8]
    }, Want::Blocks, then |b| {
        assert_eq!(b.k.cur().sigmask(), 0);
        assert_eq!(b.k.cur().saved_mask, Some(1 << (SIGCHLD - 1)));
    };
    epoll_pwait_with_a_mask_of_another_size_is_einval: SYS_epoll_pwait, |b| {
        let (ep, _) = watched_counter(b, 0, EPOLLIN as u32);
        [ep, b.buf(12), 8, 0, b.bytes(&0u64.to_le_bytes()), 16]
    }, Want::Err(EINVAL);
    epoll_pwait2_with_a_zero_timespec_returns_at_once: SYS_epoll_pwait2, |b| {
        let (ep, _) = watched_counter(b, 0, EPOLLIN as u32);
        [ep, b.buf(12), 8, b.bytes(&[0u8; 16]), 0, 0]
    }, Want::Ret(0);
    epoll_pwait2_without_a_timeout_waits: SYS_epoll_pwait2, |b| {
        let (ep, _) = watched_counter(b, 0, EPOLLIN as u32);
        [ep, b.buf(12), 8, 0, 0, 0]
    }, Want::Blocks;
    epoll_pwait2_reports_what_is_ready: SYS_epoll_pwait2, |b| {
        let (ep, _) = watched_counter(b, 1, EPOLLIN as u32);
        [ep, b.buf(12), 8, 0, 0, 0]
    }, Want::Ret(1);
    epoll_pwait2_with_a_bad_timespec_is_einval: SYS_epoll_pwait2, |b| {
        let (ep, _) = watched_counter(b, 0, EPOLLIN as u32);
        [ep, b.buf(12), 8, b.bytes(&[0u64.to_le_bytes(), 2_000_000_000u64.to_le_bytes()].concat()), 0, 0]
    }, Want::Err(EINVAL);
}

#[test]
fn a_wait_looks_at_what_may_be_ready_not_at_all_it_watches() {
    let mut b = super::Bench::new();
    let ep = b.ret(SYS_epoll_create1, [0, 0, 0, 0, 0, 0]) as u64;
    let mut counters = Vec::new();
    for i in 0..300 {
        let efd = b.ret(SYS_eventfd2, [0, EFD_NONBLOCK as u64, 0, 0, 0, 0]) as u64;
        let ev = b.bytes(&event(EPOLLIN as u32, i));
        assert_eq!(
            b.ret(SYS_epoll_ctl, [ep, EPOLL_CTL_ADD as u64, efd, ev, 0, 0]),
            0
        );
        counters.push(efd);
    }
    let out = b.buf(12 * 4);
    // The first wait looks at every interest just added, none ready.
    assert_eq!(b.ret(SYS_epoll_wait, [ep, out, 4, 0, 0, 0]), 0);
    let one = b.bytes(&1u64.to_le_bytes());
    let eight = b.buf(8);
    for &efd in &counters[..3] {
        let before = b.k.looked_at();
        assert_eq!(b.ret(SYS_write, [efd, one, 8, 0, 0, 0]), 8);
        assert_eq!(b.ret(SYS_epoll_wait, [ep, out, 4, 0, 0, 0]), 1);
        assert_eq!(b.ret(SYS_read, [efd, eight, 8, 0, 0, 0]), 8);
        assert!(
            b.k.looked_at() - before <= 2,
            "a wait beside 300 idle counters looked at {}",
            b.k.looked_at() - before
        );
    }
}
