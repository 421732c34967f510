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
