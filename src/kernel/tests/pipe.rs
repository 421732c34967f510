//! Pipes between the threads of the process.

use super::{Want, cases};
use libc::*;

/// Makes a pipe (fds 3 and 4) with `flags`.
fn pipe_at(b: &mut super::Bench, flags: i32) -> (u64, u64) {
    let fds = b.buf(8);
    assert_eq!(b.ret(SYS_pipe2, [fds, flags as u64, 0, 0, 0, 0]), 0);
    let raw = b.read(fds, 8);
    let r = i32::from_le_bytes(raw[0..4].try_into().unwrap());
    let w = i32::from_le_bytes(raw[4..8].try_into().unwrap());
    (r as u64, w as u64)
}

cases! {
    pipe2_makes_two_descriptors: SYS_pipe2, |b| [b.buf(8), O_CLOEXEC as u64, 0, 0, 0, 0], Want::Ret(0);
    pipe2_with_an_unknown_flag_is_einval: SYS_pipe2, |b| [b.buf(8), O_APPEND as u64, 0, 0, 0, 0], Want::Err(EINVAL);
    reading_an_empty_nonblocking_pipe_is_eagain: SYS_read, |b| {
        let (r, _) = pipe_at(b, O_NONBLOCK);
        [r, b.buf(8), 8, 0, 0, 0]
    }, Want::Err(EAGAIN);
    what_is_written_is_read: SYS_read, |b| {
        let (r, w) = pipe_at(b, 0);
        let hi = b.bytes(b"hi there");
        assert_eq!(b.ret(SYS_write, [w, hi, 8, 0, 0, 0]), 8);
        [r, super::SCRATCH + 4096, 64, 0, 0, 0]
    }, Want::Ret(8), then |b| assert_eq!(b.read(super::SCRATCH + 4096, 8), b"hi there");
    reading_with_no_writer_left_is_the_end: SYS_read, |b| {
        let (r, w) = pipe_at(b, 0);
        assert_eq!(b.ret(SYS_close, [w, 0, 0, 0, 0, 0]), 0);
        [r, b.buf(8), 8, 0, 0, 0]
    }, Want::Ret(0);
    writing_with_no_reader_left_is_epipe: SYS_write, |b| {
        let (r, w) = pipe_at(b, 0);
        assert_eq!(b.ret(SYS_close, [r, 0, 0, 0, 0, 0]), 0);
        [w, b.bytes(b"x"), 1, 0, 0, 0]
    }, Want::Err(EPIPE);
    a_pipe_cannot_seek_or_pread: SYS_pread64, |b| {
        let (r, _) = pipe_at(b, 0);
        [r, b.buf(8), 8, 0, 0, 0]
    }, Want::Err(ESPIPE);
    writing_the_read_end_is_ebadf: SYS_write, |b| {
        let (r, _) = pipe_at(b, 0);
        [r, b.bytes(b"x"), 1, 0, 0, 0]
    }, Want::Err(EBADF);
    an_event_counter_reads_its_sum_and_resets: SYS_read, |b| {
        let fd = b.ret(SYS_eventfd2, [2, 0, 0, 0, 0, 0]) as u64;
        let three = b.bytes(&3u64.to_le_bytes());
        assert_eq!(b.ret(SYS_write, [fd, three, 8, 0, 0, 0]), 8);
        [fd, super::SCRATCH + 4096, 8, 0, 0, 0]
    }, Want::Ret(8), then |b| assert_eq!(b.u64_at(super::SCRATCH + 4096), 5);
    a_semaphore_counter_reads_one_at_a_time: SYS_read, |b| {
        let fd = b.ret(SYS_eventfd2, [2, EFD_SEMAPHORE as u64, 0, 0, 0, 0]) as u64;
        [fd, super::SCRATCH + 4096, 8, 0, 0, 0]
    }, Want::Ret(8), then |b| assert_eq!(b.u64_at(super::SCRATCH + 4096), 1);
    an_empty_nonblocking_counter_is_eagain: SYS_read, |b| {
        let fd = b.ret(SYS_eventfd2, [0, EFD_NONBLOCK as u64, 0, 0, 0, 0]) as u64;
        [fd, b.buf(8), 8, 0, 0, 0]
    }, Want::Err(EAGAIN);
    a_short_counter_read_is_einval: SYS_read, |b| {
        let fd = b.ret(SYS_eventfd2, [1, 0, 0, 0, 0, 0]) as u64;
        [fd, b.buf(8), 4, 0, 0, 0]
    }, Want::Err(EINVAL);
}

/// An iovec array of `(address, length)` in scratch memory.
fn iov(b: &mut super::Bench, parts: &[(u64, u64)]) -> u64 {
    let mut v = Vec::new();
    for (base, len) in parts {
        v.extend_from_slice(&base.to_le_bytes());
        v.extend_from_slice(&len.to_le_bytes());
    }
    b.bytes(&v)
}

cases! {
    writev_to_a_pipe_is_read_back_by_readv: SYS_readv, |b| {
        let (r, w) = pipe_at(b, 0);
        let (one, two) = (b.bytes(b"abc"), b.bytes(b"defg"));
        let out = iov(b, &[(one, 3), (two, 4)]);
        assert_eq!(b.ret(SYS_writev, [w, out, 2, 0, 0, 0]), 7);
        let back = iov(b, &[(super::SCRATCH + 8192, 2), (super::SCRATCH + 8200, 16)]);
        [r, back, 2, 0, 0, 0]
    }, Want::Ret(7), then |b| {
        assert_eq!(b.read(super::SCRATCH + 8192, 2), b"ab");
        assert_eq!(b.read(super::SCRATCH + 8200, 5), b"cdefg");
    };
    readv_of_an_empty_pipe_waits_and_is_retried_as_readv: SYS_readv, |b| {
        let (r, _) = pipe_at(b, 0);
        let into = b.buf(8);
        let v = iov(b, &[(into, 8)]);
        [r, v, 1, 0, 0, 0]
    }, Want::Blocks, then |b| {
        let (r, _) = pipe_at(b, 0);
        let into = b.buf(8);
        let v = iov(b, &[(into, 8)]);
        match b.call(SYS_readv, [r, v, 1, 0, 0, 0]) {
            crate::kernel::SysResult::Block(crate::kernel::Wait::Pipe { nr, .. }) => {
                assert_eq!(nr, SYS_readv as u64)
            }
            other => panic!("{other:?}"),
        }
    };
    writev_to_a_full_pipe_waits_and_is_retried_as_writev: SYS_writev, |b| {
        let (_, w) = pipe_at(b, 0);
        let fill = b.bytes(&[7u8; 65536]);
        assert_eq!(b.ret(SYS_write, [w, fill, 65536, 0, 0, 0]), 65536);
        let one = b.bytes(b"x");
        let v = iov(b, &[(one, 1)]);
        match b.call(SYS_writev, [w, v, 1, 0, 0, 0]) {
            crate::kernel::SysResult::Block(crate::kernel::Wait::Pipe { nr, write, .. }) => {
                assert_eq!((nr, write), (SYS_writev as u64, true))
            }
            other => panic!("{other:?}"),
        }
        [w, v, 1, 0, 0, 0]
    }, Want::Blocks;
    pwritev_to_a_pipe_is_espipe: SYS_pwritev, |b| {
        let (_, w) = pipe_at(b, 0);
        let one = b.bytes(b"x");
        let v = iov(b, &[(one, 1)]);
        [w, v, 1, 0, 0, 0]
    }, Want::Err(ESPIPE);
    writev_to_a_pipe_without_reader_is_epipe: SYS_writev, |b| {
        let (r, w) = pipe_at(b, 0);
        assert_eq!(b.ret(SYS_close, [r, 0, 0, 0, 0, 0]), 0);
        let one = b.bytes(b"x");
        let v = iov(b, &[(one, 1)]);
        [w, v, 1, 0, 0, 0]
    }, Want::Err(EPIPE);
}

cases! {
    f_getpipe_sz_is_64k: SYS_fcntl, |b| { let (r, _) = pipe_at(b, 0); [r, F_GETPIPE_SZ as u64, 0, 0, 0, 0] }, Want::Ret(65536);
    f_getpipe_sz_of_a_file_is_ebadf: SYS_fcntl,
        |b| [b.open("/data/hello.txt", O_RDONLY), F_GETPIPE_SZ as u64, 0, 0, 0, 0], Want::Err(EBADF);
    f_setpipe_sz_rounds_up_to_a_power_of_two_pages: SYS_fcntl,
        |b| { let (_, w) = pipe_at(b, 0); [w, F_SETPIPE_SZ as u64, 100_000, 0, 0, 0] }, Want::Ret(131072),
        then |b| assert_eq!(b.ret(SYS_fcntl, [3, F_GETPIPE_SZ as u64, 0, 0, 0, 0]), 131072, "both ends see it");
    f_setpipe_sz_below_a_page_is_a_page: SYS_fcntl,
        |b| { let (_, w) = pipe_at(b, 0); [w, F_SETPIPE_SZ as u64, 1, 0, 0, 0] }, Want::Ret(4096);
    f_setpipe_sz_smaller_than_the_data_is_ebusy: SYS_fcntl, |b| {
        let (_, w) = pipe_at(b, O_NONBLOCK);
        let data = b.bytes(&[7u8; 8192]);
        assert_eq!(b.ret(SYS_write, [w, data, 8192, 0, 0, 0]), 8192);
        [w, F_SETPIPE_SZ as u64, 4096, 0, 0, 0]
    }, Want::Err(EBUSY);
    a_smaller_pipe_takes_no_more_than_it_holds: SYS_write, |b| {
        let (_, w) = pipe_at(b, O_NONBLOCK);
        assert_eq!(b.ret(SYS_fcntl, [w, F_SETPIPE_SZ as u64, 4096, 0, 0, 0]), 4096);
        [w, b.bytes(&[1u8; 10000]), 10000, 0, 0, 0]
    }, Want::Ret(4096);
    f_setpipe_sz_past_2_gib_is_einval: SYS_fcntl,
        |b| { let (_, w) = pipe_at(b, 0); [w, F_SETPIPE_SZ as u64, 1 << 32, 0, 0, 0] }, Want::Err(EINVAL);
}
