//! Changes to the file tree, all in the overlay.

use super::{Want, cases};
use libc::*;

cases! {
    mkdir_of_an_existing_directory_is_eexist: SYS_mkdir, |b| [b.str("/data/sub"), 0o755, 0, 0, 0, 0], Want::Err(EEXIST);
    mkdir_in_a_missing_parent_is_enoent: SYS_mkdir, |b| [b.str("/data/no/such"), 0o755, 0, 0, 0, 0], Want::Err(ENOENT);
    mkdir_makes_a_directory_the_guest_can_enter: SYS_mkdir, |b| [b.str("/tmp/d"), 0o755, 0, 0, 0, 0], Want::Ret(0),
        then |b| {
            let p = b.str("/tmp/d");
            assert_eq!(b.ret(SYS_chdir, [p, 0, 0, 0, 0, 0]), 0);
        };
    rmdir_of_a_directory_with_entries_is_enotempty: SYS_rmdir, |b| [b.str("/data"), 0, 0, 0, 0, 0], Want::Err(ENOTEMPTY);
    rmdir_of_a_file_is_enotdir: SYS_rmdir, |b| [b.str("/data/hello.txt"), 0, 0, 0, 0, 0], Want::Err(ENOTDIR);
    unlink_of_a_directory_is_eisdir: SYS_unlink, |b| [b.str("/data/sub"), 0, 0, 0, 0, 0], Want::Err(EISDIR);
    unlink_of_a_missing_file_is_enoent: SYS_unlink, |b| [b.str("/data/nope"), 0, 0, 0, 0, 0], Want::Err(ENOENT);
    unlink_removes_the_file: SYS_unlink, |b| [b.str("/data/hello.txt"), 0, 0, 0, 0, 0], Want::Ret(0),
        then |b| {
            let p = b.str("/data/hello.txt");
            assert_eq!(b.ret(SYS_open, [p, O_RDONLY as u64, 0, 0, 0, 0]), -(ENOENT as i64));
        };
    unlinkat_with_at_removedir_removes_an_empty_directory: SYS_unlinkat,
        |b| [AT_FDCWD as u64, b.str("/data/sub"), AT_REMOVEDIR as u64, 0, 0, 0], Want::Ret(0);
    rename_moves_a_file: SYS_rename, |b| [b.str("/data/hello.txt"), b.str("/tmp/moved"), 0, 0, 0, 0], Want::Ret(0),
        then |b| {
            let p = b.str("/tmp/moved");
            assert!(b.ret(SYS_open, [p, O_RDONLY as u64, 0, 0, 0, 0]) >= 0);
        };
    rename_of_a_missing_file_is_enoent: SYS_rename, |b| [b.str("/data/nope"), b.str("/tmp/x"), 0, 0, 0, 0], Want::Err(ENOENT);
    symlink_onto_an_existing_path_is_eexist: SYS_symlink, |b| [b.str("x"), b.str("/data/hello.txt"), 0, 0, 0, 0], Want::Err(EEXIST);
    truncate_shortens_a_file: SYS_truncate, |b| [b.str("/data/hello.txt"), 5, 0, 0, 0, 0], Want::Ret(0),
        then |b| assert_eq!(b.k.vfs.overlay_data("/data/hello.txt").unwrap(), b"hello");
    truncate_to_a_negative_length_is_einval: SYS_truncate, |b| [b.str("/data/hello.txt"), -1i64 as u64, 0, 0, 0, 0], Want::Err(EINVAL);
    ftruncate_of_a_descriptor_not_open_for_writing_is_einval: SYS_ftruncate,
        |b| [b.open("/data/hello.txt", O_RDONLY), 0, 0, 0, 0, 0], Want::Err(EINVAL);
    changes_under_proc_are_refused: SYS_mkdir, |b| [b.str("/proc/x"), 0o755, 0, 0, 0, 0], Want::Err(EACCES);
    chmod_of_a_missing_file_is_enoent: SYS_chmod, |b| [b.str("/data/nope"), 0o600, 0, 0, 0, 0], Want::Err(ENOENT);
}

cases! {
    an_unlinked_file_open_elsewhere_is_still_written_and_read: SYS_pread64, |b| {
        let fd = b.open("/tmp/gone", O_CREAT | O_RDWR);
        let p = b.str("/tmp/gone");
        assert_eq!(b.ret(SYS_unlink, [p, 0, 0, 0, 0, 0]), 0);
        let data = b.bytes(b"still here");
        assert_eq!(b.ret(SYS_write, [fd, data, 10, 0, 0, 0]), 10);
        let missing = b.str("/tmp/gone");
        assert_eq!(b.ret(SYS_access, [missing, 0, 0, 0, 0, 0]), -(ENOENT as i64));
        [fd, super::SCRATCH + 8192, 10, 0, 0, 0]
    }, Want::Ret(10), then |b| assert_eq!(b.read(super::SCRATCH + 8192, 10), b"still here");
    a_renamed_file_is_still_written_through_its_descriptor: SYS_read, |b| {
        let fd = b.open("/tmp/old", O_CREAT | O_WRONLY);
        let (from, to) = (b.str("/tmp/old"), b.str("/tmp/new"));
        assert_eq!(b.ret(SYS_rename, [from, to, 0, 0, 0, 0]), 0);
        let data = b.bytes(b"moved");
        assert_eq!(b.ret(SYS_write, [fd, data, 5, 0, 0, 0]), 5);
        let back = b.open("/tmp/new", O_RDONLY);
        [back, super::SCRATCH + 8192, 16, 0, 0, 0]
    }, Want::Ret(5), then |b| assert_eq!(b.read(super::SCRATCH + 8192, 5), b"moved");
}

/// `struct stat`'s `st_ino` and `st_nlink` of `path`.
fn ino_and_links(b: &mut super::Bench, path: &str) -> (u64, u64) {
    let (p, buf) = (b.str(path), b.buf(144));
    assert_eq!(b.ret(SYS_stat, [p, buf, 0, 0, 0, 0]), 0);
    (b.u64_at(buf + 8), b.u64_at(buf + 16))
}

/// Writes `data` at the start of `path`.
fn put(b: &mut super::Bench, path: &str, data: &[u8]) {
    let fd = b.open(path, O_WRONLY | O_CREAT);
    let d = b.bytes(data);
    assert_eq!(
        b.ret(SYS_pwrite64, [fd, d, data.len() as u64, 0, 0, 0]),
        data.len() as i64
    );
}

/// The first bytes of `path`.
fn get(b: &mut super::Bench, path: &str, n: usize) -> Vec<u8> {
    let fd = b.open(path, O_RDONLY);
    let buf = b.buf(n as u64);
    let got = b.ret(SYS_pread64, [fd, buf, n as u64, 0, 0, 0]);
    b.read(buf, got as usize)
}

cases! {
    a_hard_link_is_one_file_under_two_names: SYS_link, |b| [b.str("/data/hello.txt"), b.str("/data/two"), 0, 0, 0, 0], Want::Ret(0),
        then |b| {
            put(b, "/data/two", b"HELLO");
            assert_eq!(get(b, "/data/hello.txt", 5), b"HELLO", "written through the other name");
            let (ino, links) = ino_and_links(b, "/data/hello.txt");
            assert_eq!(ino_and_links(b, "/data/two"), (ino, 2));
            assert_eq!(links, 2);
        };
    a_hard_link_outlives_the_name_it_was_made_from: SYS_unlink, |b| {
        put(b, "/data/new", b"kept");
        let (from, to) = (b.str("/data/new"), b.str("/data/other"));
        assert_eq!(b.ret(SYS_link, [from, to, 0, 0, 0, 0]), 0);
        [b.str("/data/new"), 0, 0, 0, 0, 0]
    }, Want::Ret(0), then |b| {
        assert_eq!(get(b, "/data/other", 4), b"kept");
        assert_eq!(ino_and_links(b, "/data/other").1, 1);
    };
    link_onto_an_existing_name_is_eexist: SYS_link, |b| [b.str("/data/hello.txt"), b.str("/data/link"), 0, 0, 0, 0], Want::Err(EEXIST);
    link_of_a_directory_is_eperm: SYS_link, |b| [b.str("/data/sub"), b.str("/data/sub2"), 0, 0, 0, 0], Want::Err(EPERM);
    link_into_a_missing_directory_is_enoent: SYS_link, |b| [b.str("/data/hello.txt"), b.str("/data/no/x"), 0, 0, 0, 0], Want::Err(ENOENT);
    link_of_a_symlink_links_the_symlink: SYS_link, |b| [b.str("/data/link"), b.str("/data/link2"), 0, 0, 0, 0], Want::Ret(0),
        then |b| {
            let (p, buf) = (b.str("/data/link2"), b.buf(64));
            assert_eq!(b.ret(SYS_readlink, [p, buf, 64, 0, 0, 0]), 9);
        };
    linkat_with_at_symlink_follow_links_the_target: SYS_linkat,
        |b| [AT_FDCWD as u64, b.str("/data/link"), AT_FDCWD as u64, b.str("/data/hard"), AT_SYMLINK_FOLLOW as u64, 0], Want::Ret(0),
        then |b| assert_eq!(get(b, "/data/hard", 5), b"hello");
    linkat_with_unknown_flags_is_einval: SYS_linkat,
        |b| [AT_FDCWD as u64, b.str("/data/hello.txt"), AT_FDCWD as u64, b.str("/data/hard"), 1, 0], Want::Err(EINVAL);
    chmod_through_one_name_changes_every_name: SYS_chmod, |b| {
        let (from, to) = (b.str("/data/hello.txt"), b.str("/data/two"));
        assert_eq!(b.ret(SYS_link, [from, to, 0, 0, 0, 0]), 0);
        [b.str("/data/two"), 0o600, 0, 0, 0, 0]
    }, Want::Ret(0), then |b| {
        let (p, buf) = (b.str("/data/hello.txt"), b.buf(144));
        b.ret(SYS_stat, [p, buf, 0, 0, 0, 0]);
        assert_eq!(b.u64_at(buf + 24) as u32 & 0o7777, 0o600);
    };
    a_file_keeps_its_inode_number_when_renamed: SYS_rename, |b| {
        put(b, "/data/new", b"x");
        let before = ino_and_links(b, "/data/new").0;
        b.k.cur().name = before.to_string();
        [b.str("/data/new"), b.str("/data/moved"), 0, 0, 0, 0]
    }, Want::Ret(0), then |b| {
        let before: u64 = b.k.cur().name.parse().unwrap();
        assert_eq!(ino_and_links(b, "/data/moved").0, before);
    };
    shm_unlink_removes_a_name_in_dev_shm: SYS_unlink, |b| {
        b.k.vfs.put_dir("/dev/shm", 0o1777);
        put(b, "/dev/shm/sem.x", b"s");
        [b.str("/dev/shm/sem.x"), 0, 0, 0, 0, 0]
    }, Want::Ret(0);
    unlink_elsewhere_in_dev_is_refused: SYS_unlink, |b| [b.str("/dev/null"), 0, 0, 0, 0, 0], Want::Err(EACCES);
}
