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

/// Makes a pipe; its (read, write) descriptors.
fn pipe(b: &mut super::Bench) -> (u64, u64) {
    let fds = b.buf(8);
    assert_eq!(b.ret(SYS_pipe2, [fds, 0, 0, 0, 0, 0]), 0);
    let raw = b.read(fds, 8);
    let end = |i: usize| i32::from_le_bytes(raw[i..i + 4].try_into().unwrap()) as u64;
    (end(0), end(4))
}

/// Thread 2, blocked in a poll of `fd` for input, as the bench's thread
/// would be.
fn poller(b: &mut super::Bench, fd: u64) -> crate::kernel::Tid {
    use crate::kernel::{Thread, ThreadState, Tid};
    let fds = pollfd(b, fd as i32, POLLIN);
    let wait = match b.call(SYS_poll, [fds, 1, u64::MAX, 0, 0, 0]) {
        crate::kernel::SysResult::Block(w) => w,
        other => panic!("the poll did not block: {other:?}"),
    };
    let tid = Tid(2);
    let regs = b.k.cur().regs;
    b.k.threads
        .insert(tid, Thread::new(tid, regs, "poller".into()));
    b.k.threads.set_state(tid, ThreadState::Blocked(wait));
    tid
}

/// Writes a byte into `fd` and ends the system call as the kernel does.
fn write_byte(b: &mut super::Bench, fd: u64) {
    let x = b.bytes(b"x");
    assert_eq!(b.ret(SYS_write, [fd, x, 1, 0, 0, 0]), 1);
    crate::kernel::file::settle(&mut b.k);
}

#[test]
fn a_poll_is_taken_up_by_its_own_pipe_and_by_no_other() {
    let mut b = super::Bench::new();
    let (mine, to_mine) = pipe(&mut b);
    let (_, to_other) = pipe(&mut b);
    let t = poller(&mut b, mine);
    write_byte(&mut b, to_other);
    assert!(!b.k.threads()[&t].is_runnable(), "another pipe took it up");
    write_byte(&mut b, to_mine);
    assert!(b.k.threads()[&t].is_runnable(), "its own pipe did not");
}

#[test]
fn reproducers_of_format_six_take_a_poll_up_after_any_pipes_change() {
    let mut b = super::Bench::with(|c| c.polls_retry_on_any_activity = true);
    let (mine, _) = pipe(&mut b);
    let (_, to_other) = pipe(&mut b);
    let t = poller(&mut b, mine);
    write_byte(&mut b, to_other);
    assert!(b.k.threads()[&t].is_runnable());
}

#[test]
fn a_poll_is_taken_up_once_the_last_writer_anywhere_closes() {
    let mut b = super::Bench::new();
    let (r, w) = pipe(&mut b);
    let copy = b.ret(SYS_dup, [w, 0, 0, 0, 0, 0]) as u64;
    let t = poller(&mut b, r);
    assert_eq!(b.ret(SYS_close, [w, 0, 0, 0, 0, 0]), 0);
    crate::kernel::file::settle(&mut b.k);
    assert!(!b.k.threads()[&t].is_runnable(), "a writer is still open");
    assert_eq!(b.ret(SYS_close, [copy, 0, 0, 0, 0, 0]), 0);
    crate::kernel::file::settle(&mut b.k);
    assert!(b.k.threads()[&t].is_runnable(), "the end of the pipe");
}
