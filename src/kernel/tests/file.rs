//! Descriptors: open, close, read, write, seek, dup, fcntl, ioctl.

use super::{UNMAPPED, Want, cases};
use libc::*;

const FDCWD: u64 = AT_FDCWD as u64;

cases! {
    read_from_a_descriptor_never_opened_is_ebadf: SYS_read, |b| [99, b.buf(8), 8, 0, 0, 0], Want::Err(EBADF);
    read_into_an_unmapped_buffer_is_efault: SYS_read,
        |b| [b.open("/data/hello.txt", O_RDONLY), UNMAPPED, 5, 0, 0, 0], Want::Err(EFAULT);
    read_returns_the_files_bytes: SYS_read,
        |b| [b.open("/data/hello.txt", O_RDONLY), super::SCRATCH + 4096, 64, 0, 0, 0], Want::Ret(13),
        then |b| assert_eq!(b.read(super::SCRATCH + 4096, 13), b"hello, world\n");
    read_at_the_end_of_a_file_into_a_kernel_address_is_efault: SYS_read, |b| {
        let fd = b.open("/data/hello.txt", O_RDONLY);
        b.ret(SYS_lseek, [fd, 0, SEEK_END as u64, 0, 0, 0]);
        [fd, 0xffff_8000_0000_0000, 8, 0, 0, 0]
    }, Want::Err(EFAULT);
    read_at_the_end_of_a_file_returns_zero: SYS_read, |b| {
        let fd = b.open("/data/hello.txt", O_RDONLY);
        b.ret(SYS_lseek, [fd, 0, SEEK_END as u64, 0, 0, 0]);
        [fd, b.buf(8), 8, 0, 0, 0]
    }, Want::Ret(0);
    write_to_a_read_only_descriptor_is_ebadf: SYS_write,
        |b| [b.open("/data/hello.txt", O_RDONLY), b.bytes(b"x"), 1, 0, 0, 0], Want::Err(EBADF);
    write_to_stdout_is_captured: SYS_write, |b| [1, b.bytes(b"hi"), 2, 0, 0, 0], Want::Ret(2),
        then |b| assert_eq!(b.k.observer().stdout(), b"hi");
    dev_stdout_names_the_guests_own_stdout: SYS_openat,
        |b| [FDCWD, b.str("/dev/stdout"), O_WRONLY as u64, 0, 0, 0], Want::Ret(3),
        then |b| {
            let via = b.bytes(b"via /dev/stdout");
            b.ret(SYS_write, [3, via, 15, 0, 0, 0]);
            assert_eq!(b.k.observer().stdout(), b"via /dev/stdout");
        };
    writing_through_a_symlink_writes_its_target_and_keeps_the_link: SYS_openat,
        |b| [FDCWD, b.str("/data/link"), (O_WRONLY | O_TRUNC) as u64, 0, 0, 0], Want::Ret(3),
        then |b| {
            let new = b.bytes(b"new");
            b.ret(SYS_write, [3, new, 3, 0, 0, 0]);
            let buf = b.buf(16);
            let link = b.str("/data/link");
            let n = b.ret(SYS_readlink, [link, buf, 16, 0, 0, 0]);
            assert_eq!(b.read(buf, n as usize), b"hello.txt", "still a link");
            let fd = b.open("/data/hello.txt", O_RDONLY);
            let n = b.ret(SYS_read, [fd, buf, 16, 0, 0, 0]);
            assert_eq!(b.read(buf, n as usize), b"new", "the target was written");
        };
    write_from_an_unmapped_buffer_is_efault: SYS_write, |_b| [1, UNMAPPED, 2, 0, 0, 0], Want::Err(EFAULT);
    opening_a_missing_file_is_enoent: SYS_openat,
        |b| [FDCWD, b.str("/data/nope"), O_RDONLY as u64, 0, 0, 0], Want::Err(ENOENT);
    opening_a_directory_for_writing_is_eisdir: SYS_openat,
        |b| [FDCWD, b.str("/data/sub"), O_WRONLY as u64, 0, 0, 0], Want::Err(EISDIR);
    o_directory_on_a_file_is_enotdir: SYS_openat,
        |b| [FDCWD, b.str("/data/hello.txt"), (O_RDONLY | O_DIRECTORY) as u64, 0, 0, 0], Want::Err(ENOTDIR);
    o_creat_o_excl_on_an_existing_file_is_eexist: SYS_openat,
        |b| [FDCWD, b.str("/data/hello.txt"), (O_WRONLY | O_CREAT | O_EXCL) as u64, 0o644, 0, 0], Want::Err(EEXIST);
    a_path_under_a_file_is_enotdir: SYS_openat,
        |b| [FDCWD, b.str("/data/hello.txt/x"), O_RDONLY as u64, 0, 0, 0], Want::Err(ENOTDIR);
    relative_paths_resolve_against_the_working_directory: SYS_openat,
        |b| [FDCWD, b.str("hello.txt"), O_RDONLY as u64, 0, 0, 0], Want::Ok;
    an_empty_path_is_enoent: SYS_openat, |b| [FDCWD, b.str(""), O_RDONLY as u64, 0, 0, 0], Want::Err(ENOENT);
    a_path_pointer_that_is_unmapped_is_efault: SYS_openat,
        |_b| [FDCWD, UNMAPPED, O_RDONLY as u64, 0, 0, 0], Want::Err(EFAULT);
    opening_relative_to_a_file_descriptor_is_enotdir: SYS_openat, |b| {
        let fd = b.open("/data/hello.txt", O_RDONLY);
        [fd, b.str("x"), O_RDONLY as u64, 0, 0, 0]
    }, Want::Err(ENOTDIR);
    closing_twice_is_ebadf: SYS_close, |b| {
        let fd = b.open("/data/hello.txt", O_RDONLY);
        assert_eq!(b.ret(SYS_close, [fd, 0, 0, 0, 0, 0]), 0);
        [fd, 0, 0, 0, 0, 0]
    }, Want::Err(EBADF);
    lseek_with_an_unknown_whence_is_einval: SYS_lseek,
        |b| [b.open("/data/hello.txt", O_RDONLY), 0, 7, 0, 0, 0], Want::Err(EINVAL);
    lseek_to_a_negative_offset_is_einval: SYS_lseek,
        |b| [b.open("/data/hello.txt", O_RDONLY), -1i64 as u64, SEEK_SET as u64, 0, 0, 0], Want::Err(EINVAL);
    lseek_to_the_end_returns_the_size: SYS_lseek,
        |b| [b.open("/data/hello.txt", O_RDONLY), 0, SEEK_END as u64, 0, 0, 0], Want::Ret(13);
    pread_at_a_negative_offset_is_einval: SYS_pread64,
        |b| [b.open("/data/hello.txt", O_RDONLY), b.buf(4), 4, -1i64 as u64, 0, 0], Want::Err(EINVAL);
    pread_reads_at_its_offset: SYS_pread64,
        |b| [b.open("/data/hello.txt", O_RDONLY), super::SCRATCH + 8192, 5, 7, 0, 0], Want::Ret(5),
        then |b| assert_eq!(b.read(super::SCRATCH + 8192, 5), b"world");
    dup2_onto_itself_returns_the_descriptor: SYS_dup2, |b| {
        let fd = b.open("/data/hello.txt", O_RDONLY);
        [fd, fd, 0, 0, 0, 0]
    }, Want::Ret(3);
    dup3_onto_itself_is_einval: SYS_dup3, |b| {
        let fd = b.open("/data/hello.txt", O_RDONLY);
        [fd, fd, 0, 0, 0, 0]
    }, Want::Err(EINVAL);
    dup_of_a_descriptor_never_opened_is_ebadf: SYS_dup, |_b| [42, 0, 0, 0, 0, 0], Want::Err(EBADF);
    dup_takes_the_lowest_free_number: SYS_dup, |_b| [1, 0, 0, 0, 0, 0], Want::Ret(3);
    fcntl_getfd_sees_close_on_exec: SYS_fcntl,
        |b| [b.open("/data/hello.txt", O_RDONLY | O_CLOEXEC), F_GETFD as u64, 0, 0, 0, 0], Want::Ret(FD_CLOEXEC as i64);
    fcntl_with_a_command_the_monitor_lacks_is_unsupported: SYS_fcntl,
        |b| [b.open("/data/hello.txt", O_RDONLY), 9999, 0, 0, 0, 0], Want::Unsupported;
    fcntl_setfl_keeps_the_access_mode: SYS_fcntl, |b| {
        let fd = b.open("/data/hello.txt", O_RDONLY);
        assert_eq!(b.ret(SYS_fcntl, [fd, F_SETFL as u64, (O_WRONLY | O_NONBLOCK) as u64, 0, 0, 0]), 0);
        [fd, F_GETFL as u64, 0, 0, 0, 0]
    }, Want::Ret((O_RDONLY | O_NONBLOCK) as i64);
    ioctl_tcgets_on_a_file_is_enotty: SYS_ioctl,
        |b| [b.open("/data/hello.txt", O_RDONLY), TCGETS, b.buf(64), 0, 0, 0], Want::Err(ENOTTY);
    writev_gathers_every_buffer: SYS_writev, |b| {
        let (x, y) = (b.bytes(b"ab"), b.bytes(b"cde"));
        let iov = b.buf(32);
        for (i, w) in [x, 2, y, 3].into_iter().enumerate() {
            b.k.write_u64(iov + 8 * i as u64, w).unwrap();
        }
        [1, iov, 2, 0, 0, 0]
    }, Want::Ret(5), then |b| assert_eq!(b.k.observer().stdout(), b"abcde");
    readv_with_more_than_iov_max_buffers_is_einval: SYS_readv,
        |b| [b.open("/data/hello.txt", O_RDONLY), b.buf(16), 1025, 0, 0, 0], Want::Err(EINVAL);
    writes_go_to_the_overlay_and_never_the_host: SYS_write, |b| {
        let fd = b.open("/tmp/new.txt", O_WRONLY | O_CREAT);
        [fd, b.bytes(b"fresh"), 5, 0, 0, 0]
    }, Want::Ret(5), then |b| assert_eq!(b.k.vfs.overlay_data("/tmp/new.txt").unwrap(), b"fresh");
    o_append_writes_at_the_end: SYS_write, |b| {
        let fd = b.open("/data/hello.txt", O_WRONLY | O_APPEND);
        [fd, b.bytes(b"!"), 1, 0, 0, 0]
    }, Want::Ret(1), then |b| assert_eq!(b.k.vfs.overlay_data("/data/hello.txt").unwrap(), b"hello, world\n!");
    o_trunc_empties_the_file: SYS_lseek, |b| {
        let fd = b.open("/data/hello.txt", O_WRONLY | O_TRUNC);
        [fd, 0, SEEK_END as u64, 0, 0, 0]
    }, Want::Ret(0);
}

/// The bytes of the overlay file `path`, read through a descriptor.
fn contents(b: &mut super::Bench, path: &str) -> Vec<u8> {
    let fd = b.open(path, O_RDONLY);
    let buf = b.buf(256);
    let n = b.ret(SYS_read, [fd, buf, 256, 0, 0, 0]);
    b.read(buf, n as usize)
}

cases! {
    copy_file_range_copies_at_the_offsets_and_moves_them: SYS_copy_file_range, |b| {
        let from = b.open("/data/hello.txt", O_RDONLY);
        let to = b.open("/data/copy.txt", O_WRONLY | O_CREAT);
        [from, 0, to, 0, 100, 0]
    }, Want::Ret(13), then |b| {
        assert_eq!(contents(b, "/data/copy.txt"), b"hello, world\n");
        assert_eq!(b.ret(SYS_lseek, [3, 0, SEEK_CUR as u64, 0, 0, 0]), 13, "the input offset moved");
        assert_eq!(b.ret(SYS_copy_file_range, [3, 0, 4, 0, 100, 0]), 0, "at the end");
    };
    copy_file_range_at_given_positions_leaves_the_offsets: SYS_copy_file_range, |b| {
        let from = b.open("/data/hello.txt", O_RDONLY);
        let to = b.open("/data/copy.txt", O_WRONLY | O_CREAT);
        let (off_in, off_out) = (super::SCRATCH + 8192, super::SCRATCH + 8200);
        b.k.write_u64(off_in, 7).unwrap();
        b.k.write_u64(off_out, 2).unwrap();
        [from, off_in, to, off_out, 5, 0]
    }, Want::Ret(5), then |b| {
        assert_eq!(contents(b, "/data/copy.txt"), b"\0\0world");
        assert_eq!(b.ret(SYS_lseek, [3, 0, SEEK_CUR as u64, 0, 0, 0]), 0);
        assert_eq!(b.u64_at(super::SCRATCH + 8192), 12, "the input position moved");
        assert_eq!(b.u64_at(super::SCRATCH + 8200), 7, "the output position moved");
    };
    copy_file_range_with_flags_is_einval: SYS_copy_file_range, |b| {
        let from = b.open("/data/hello.txt", O_RDONLY);
        let to = b.open("/data/copy.txt", O_WRONLY | O_CREAT);
        [from, 0, to, 0, 5, 1]
    }, Want::Err(EINVAL);
    copy_file_range_to_a_read_only_descriptor_is_ebadf: SYS_copy_file_range, |b| {
        let from = b.open("/data/hello.txt", O_RDONLY);
        let to = b.open("/data/hello.txt", O_RDONLY);
        [from, 0, to, 0, 5, 0]
    }, Want::Err(EBADF);
    copy_file_range_to_an_append_descriptor_is_ebadf: SYS_copy_file_range, |b| {
        let from = b.open("/data/hello.txt", O_RDONLY);
        let to = b.open("/data/copy.txt", O_WRONLY | O_CREAT | O_APPEND);
        [from, 0, to, 0, 5, 0]
    }, Want::Err(EBADF);
    copy_file_range_from_a_directory_is_eisdir: SYS_copy_file_range, |b| {
        let from = b.open("/data/sub", O_RDONLY | O_DIRECTORY);
        let to = b.open("/data/copy.txt", O_WRONLY | O_CREAT);
        [from, 0, to, 0, 5, 0]
    }, Want::Err(EISDIR);
    copy_file_range_to_a_pipe_is_einval: SYS_copy_file_range, |b| {
        let from = b.open("/data/hello.txt", O_RDONLY);
        let fds = b.buf(8);
        b.ret(SYS_pipe2, [fds, 0, 0, 0, 0, 0]);
        [from, 0, 5, 0, 5, 0]
    }, Want::Err(EINVAL);
    copy_file_range_over_itself_overlapping_is_einval: SYS_copy_file_range, |b| {
        let f = b.open("/data/copy.txt", O_RDWR | O_CREAT);
        let data = b.bytes(b"0123456789");
        b.ret(SYS_write, [f, data, 10, 0, 0, 0]);
        let off_in = b.bytes(&0u64.to_le_bytes());
        let off_out = b.bytes(&4u64.to_le_bytes());
        [f, off_in, f, off_out, 6, 0]
    }, Want::Err(EINVAL);
    sendfile_to_stdout_sends_the_files_bytes: SYS_sendfile,
        |b| [1, b.open("/data/hello.txt", O_RDONLY), 0, 5, 0, 0], Want::Ret(5),
        then |b| {
            assert_eq!(b.k.observer().stdout(), b"hello");
            assert_eq!(b.ret(SYS_lseek, [3, 0, SEEK_CUR as u64, 0, 0, 0]), 5);
        };
    sendfile_between_files_at_a_position_leaves_the_offset: SYS_sendfile, |b| {
        let from = b.open("/data/hello.txt", O_RDONLY);
        let to = b.open("/data/copy.txt", O_WRONLY | O_CREAT);
        let off = super::SCRATCH + 8192;
        b.k.write_u64(off, 7).unwrap();
        [to, from, off, 100, 0, 0]
    }, Want::Ret(6), then |b| {
        assert_eq!(contents(b, "/data/copy.txt"), b"world\n");
        assert_eq!(b.u64_at(super::SCRATCH + 8192), 13, "the position moved");
        assert_eq!(b.ret(SYS_lseek, [3, 0, SEEK_CUR as u64, 0, 0, 0]), 0, "the offset did not");
    };
    sendfile_from_a_pipe_is_einval: SYS_sendfile, |b| {
        let fds = b.buf(8);
        b.ret(SYS_pipe2, [fds, 0, 0, 0, 0, 0]);
        [1, 3, 0, 5, 0, 0]
    }, Want::Err(EINVAL);
    sendfile_to_a_full_pipe_waits_and_moves_nothing: SYS_sendfile, |b| {
        let from = b.open("/data/hello.txt", O_RDONLY);
        let fds = b.buf(8);
        b.ret(SYS_pipe2, [fds, 0, 0, 0, 0, 0]);
        b.ret(SYS_fcntl, [5, F_SETPIPE_SZ as u64, 4096, 0, 0, 0]);
        let fill = b.bytes(&[0u8; 4096]);
        assert_eq!(b.ret(SYS_write, [5, fill, 4096, 0, 0, 0]), 4096);
        [5, from, 0, 5, 0, 0]
    }, Want::Blocks, then |b| assert_eq!(b.ret(SYS_lseek, [3, 0, SEEK_CUR as u64, 0, 0, 0]), 0);
    sendfile_to_an_append_descriptor_is_einval: SYS_sendfile, |b| {
        let from = b.open("/data/hello.txt", O_RDONLY);
        let to = b.open("/data/copy.txt", O_WRONLY | O_CREAT | O_APPEND);
        [to, from, 0, 5, 0, 0]
    }, Want::Err(EINVAL);
}
