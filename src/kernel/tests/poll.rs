//! Waiting for descriptors.

use super::{Want, cases};
use libc::*;

/// One `struct pollfd`.
fn pollfd(b: &mut super::Bench, fd: i32, events: i16) -> u64 {
    let mut v = fd.to_le_bytes().to_vec();
    v.extend_from_slice(&events.to_le_bytes());
    v.extend_from_slice(&0i16.to_le_bytes());
    b.bytes(&v)
}

cases! {
    poll_of_nothing_without_a_timeout_returns_zero: SYS_poll, |_b| [0, 0, 0, 0, 0, 0], Want::Ret(0);
    poll_of_nothing_with_a_timeout_sleeps: SYS_poll, |_b| [0, 0, 100, 0, 0, 0], Want::Blocks;
    poll_of_a_regular_file_is_ready_to_read: SYS_poll,
        |b| { let fd = b.open("/data/hello.txt", O_RDONLY) as i32; [pollfd(b, fd, POLLIN), 1, 0, 0, 0, 0] },
        Want::Ret(1);
    poll_of_a_closed_descriptor_says_pollnval: SYS_poll,
        |b| [pollfd(b, 55, POLLIN), 1, 0, 0, 0, 0], Want::Ret(1),
        then |b| {
            let revents = b.read(super::SCRATCH + 6, 2);
            assert_eq!(i16::from_le_bytes([revents[0], revents[1]]), POLLNVAL);
        };
    poll_of_more_descriptors_than_the_limit_is_einval: SYS_poll, |b| [b.buf(8), 1 << 20, 0, 0, 0, 0], Want::Err(EINVAL);
}
