//! Metadata, access checks, listings, links and the working directory.

use super::{UNMAPPED, Want, cases};
use crate::ids::Pid;
use libc::*;

const FDCWD: u64 = AT_FDCWD as u64;
/// Offsets in `struct stat`.
const ST_MODE: u64 = 24;
const ST_SIZE: u64 = 48;
/// Offsets in `struct statx`.
const STX_MODE: u64 = 28;
const STX_SIZE: u64 = 40;

fn mode_at(b: &mut super::Bench, buf: u64) -> u32 {
    b.u64_at(buf + ST_MODE) as u32 & S_IFMT
}

cases! {
    stat_of_a_missing_path_is_enoent: SYS_stat, |b| [b.str("/data/nope"), b.buf(144), 0, 0, 0, 0], Want::Err(ENOENT);
    stat_reports_a_regular_files_size_and_type: SYS_stat,
        |b| [b.str("/data/hello.txt"), super::SCRATCH + 4096, 0, 0, 0, 0], Want::Ret(0),
        then |b| {
            assert_eq!(b.u64_at(super::SCRATCH + 4096 + ST_SIZE), 13);
            assert_eq!(mode_at(b, super::SCRATCH + 4096), S_IFREG);
        };
    stat_follows_a_symlink: SYS_stat, |b| [b.str("/data/link"), super::SCRATCH + 4096, 0, 0, 0, 0], Want::Ret(0),
        then |b| assert_eq!(mode_at(b, super::SCRATCH + 4096), S_IFREG);
    lstat_of_a_symlink_says_symlink: SYS_lstat, |b| [b.str("/data/link"), super::SCRATCH + 4096, 0, 0, 0, 0], Want::Ret(0),
        then |b| assert_eq!(mode_at(b, super::SCRATCH + 4096), S_IFLNK);
    stat_of_a_directory_says_directory: SYS_stat, |b| [b.str("/data/sub"), super::SCRATCH + 4096, 0, 0, 0, 0], Want::Ret(0),
        then |b| assert_eq!(mode_at(b, super::SCRATCH + 4096), S_IFDIR);
    stat_into_an_unmapped_buffer_is_efault: SYS_stat, |b| [b.str("/data/hello.txt"), UNMAPPED, 0, 0, 0, 0], Want::Err(EFAULT);
    fstat_of_a_descriptor_never_opened_is_ebadf: SYS_fstat, |b| [77, b.buf(144), 0, 0, 0, 0], Want::Err(EBADF);
    newfstatat_of_an_empty_path_without_at_empty_path_is_enoent: SYS_newfstatat,
        |b| [b.open("/data/hello.txt", O_RDONLY), b.str(""), b.buf(144), 0, 0, 0], Want::Err(ENOENT);
    newfstatat_of_an_empty_path_with_at_empty_path_is_the_descriptor: SYS_newfstatat,
        |b| [b.open("/data/hello.txt", O_RDONLY), b.str(""), super::SCRATCH + 4096, AT_EMPTY_PATH as u64, 0, 0],
        Want::Ret(0), then |b| assert_eq!(b.u64_at(super::SCRATCH + 4096 + ST_SIZE), 13);
    statx_of_an_empty_path_at_the_working_directory_is_the_working_directory: SYS_statx,
        |b| [FDCWD, b.str(""), AT_EMPTY_PATH as u64, STATX_BASIC_STATS as u64, super::SCRATCH + 4096, 0],
        Want::Ret(0), then |b| assert_eq!(b.u64_at(super::SCRATCH + 4096 + STX_MODE) as u16 as u32 & S_IFMT, S_IFDIR);
    statx_of_an_empty_path_with_at_empty_path_is_the_descriptor: SYS_statx,
        |b| [b.open("/data/hello.txt", O_RDONLY), b.str(""), AT_EMPTY_PATH as u64, STATX_BASIC_STATS as u64, super::SCRATCH + 4096, 0],
        Want::Ret(0), then |b| assert_eq!(b.u64_at(super::SCRATCH + 4096 + STX_SIZE), 13);
    statx_of_an_empty_path_without_at_empty_path_is_enoent: SYS_statx,
        |b| [FDCWD, b.str(""), 0, STATX_BASIC_STATS as u64, b.buf(256), 0], Want::Err(ENOENT);
    newfstatat_of_an_empty_path_at_the_working_directory_is_the_working_directory: SYS_newfstatat,
        |b| [FDCWD, b.str(""), super::SCRATCH + 4096, AT_EMPTY_PATH as u64, 0, 0],
        Want::Ret(0), then |b| assert_eq!(mode_at(b, super::SCRATCH + 4096), S_IFDIR);
    faccessat2_of_an_empty_path_with_at_empty_path_checks_the_descriptors_file: SYS_faccessat2,
        |b| [b.open("/data/hello.txt", O_RDONLY), b.str(""), X_OK as u64, AT_EMPTY_PATH as u64, 0, 0],
        Want::Err(EACCES);
    access_of_a_missing_file_is_enoent: SYS_access, |b| [b.str("/data/nope"), F_OK as u64, 0, 0, 0, 0], Want::Err(ENOENT);
    access_of_an_existing_file_is_allowed: SYS_access, |b| [b.str("/data/hello.txt"), R_OK as u64, 0, 0, 0, 0], Want::Ret(0);
    faccessat_with_unknown_mode_bits_is_einval: SYS_faccessat,
        |b| [FDCWD, b.str("/data/hello.txt"), 0x40, 0, 0, 0], Want::Err(EINVAL);
    readlink_returns_the_target_without_a_nul: SYS_readlink,
        |b| [b.str("/data/link"), super::SCRATCH + 4096, 64, 0, 0, 0], Want::Ret(9),
        then |b| assert_eq!(b.read(super::SCRATCH + 4096, 9), b"hello.txt");
    readlink_truncates_to_the_buffer: SYS_readlink, |b| [b.str("/data/link"), b.buf(4), 4, 0, 0, 0], Want::Ret(4);
    readlink_of_a_regular_file_is_einval: SYS_readlink, |b| [b.str("/data/hello.txt"), b.buf(64), 64, 0, 0, 0], Want::Err(EINVAL);
    readlink_of_proc_self_exe_names_the_program: SYS_readlink,
        |b| [b.str("/proc/self/exe"), super::SCRATCH + 4096, 64, 0, 0, 0], Want::Ret(10),
        then |b| assert_eq!(b.read(super::SCRATCH + 4096, 10), b"/data/prog");
    getcwd_with_a_small_buffer_is_erange: SYS_getcwd, |b| [b.buf(2), 2, 0, 0, 0, 0], Want::Err(ERANGE);
    getcwd_returns_the_length_with_its_nul: SYS_getcwd, |b| [super::SCRATCH + 4096, 64, 0, 0, 0, 0], Want::Ret(6),
        then |b| assert_eq!(b.read(super::SCRATCH + 4096, 6), b"/data\0");
    chdir_into_a_file_is_enotdir: SYS_chdir, |b| [b.str("/data/hello.txt"), 0, 0, 0, 0, 0], Want::Err(ENOTDIR);
    chdir_into_a_missing_directory_is_enoent: SYS_chdir, |b| [b.str("/data/gone"), 0, 0, 0, 0, 0], Want::Err(ENOENT);
    getdents64_on_a_file_is_enotdir: SYS_getdents64,
        |b| [b.open("/data/hello.txt", O_RDONLY), b.buf(512), 512, 0, 0, 0], Want::Err(ENOTDIR);
    getdents64_lists_a_directory_then_ends: SYS_getdents64, |b| {
        let fd = b.open("/data", O_RDONLY | O_DIRECTORY);
        let buf = b.buf(4096);
        let first = b.ret(SYS_getdents64, [fd, buf, 4096, 0, 0, 0]);
        assert!(first > 0, "entries: {first}");
        [fd, b.buf(4096), 4096, 0, 0, 0]
    }, Want::Ret(0);
    getdents64_into_a_buffer_too_small_for_an_entry_is_einval: SYS_getdents64,
        |b| [b.open("/data", O_RDONLY | O_DIRECTORY), b.buf(8), 8, 0, 0, 0], Want::Err(EINVAL);
    getxattr_finds_no_attribute: SYS_getxattr,
        |b| [b.str("/data/hello.txt"), b.str("user.x"), b.buf(16), 16, 0, 0], Want::Err(ENODATA);
}

/// Reads the whole of `path` (which must open).
fn slurp(b: &mut super::Bench, path: &str) -> String {
    let fd = b.open(path, O_RDONLY);
    let buf = b.buf(4096);
    let n = b.ret(SYS_read, [fd, buf, 4096, 0, 0, 0]);
    String::from_utf8(b.read(buf, n as usize)).unwrap()
}

/// Forks the bench's process; the child's pid.
fn fork(b: &mut super::Bench) -> u32 {
    let pid = b.ret(SYS_fork, [0; 6]);
    assert!(pid > 1, "fork gave {pid}");
    pid as u32
}

cases! {
    readlink_of_proc_self_names_the_callers_pid: SYS_readlink,
        |b| [b.str("/proc/self"), super::SCRATCH + 4096, 64, 0, 0, 0], Want::Ret(1),
        then |b| assert_eq!(b.read(super::SCRATCH + 4096, 1), b"1");
    proc_of_a_pid_that_never_was_is_enoent: SYS_openat,
        |b| [FDCWD, b.str("/proc/99/stat"), O_RDONLY as u64, 0, 0, 0], Want::Err(ENOENT);
    proc_self_in_a_child_is_the_childs: SYS_readlink, |b| {
        let pid = fork(b);
        b.k.switch_to(crate::kernel::Tid(pid));
        [b.str("/proc/self"), super::SCRATCH + 4096, 64, 0, 0, 0]
    }, Want::Ret(1), then |b| assert_eq!(b.read(super::SCRATCH + 4096, 1), b"2");
    proc_pid_stat_gives_pid_name_state_and_parent_first: SYS_getpid, |b| {
        let pid = fork(b);
        let stat = slurp(b, &format!("/proc/{pid}/stat"));
        let fields: Vec<&str> = stat.split_whitespace().collect();
        assert_eq!(fields.len(), 52, "{stat}");
        assert_eq!(&fields[..5], &["2", "(prog)", "R", "1", "1"], "{stat}");
        assert_eq!(fields[19], "1", "one thread: {stat}");
        [0; 6]
    }, Want::Ret(1);
    proc_self_statm_gives_seven_page_counts: SYS_getpid, |b| {
        let statm = slurp(b, "/proc/self/statm");
        let n: Vec<u64> = statm.split_whitespace().map(|f| f.parse().unwrap()).collect();
        assert_eq!(n.len(), 7, "{statm}");
        assert!(n[0] >= 256, "the scratch mapping is 256 pages: {statm}");
        assert!(n[1] > 0 && n[1] <= n[0], "{statm}");
        [0; 6]
    }, Want::Ret(1);
    proc_self_status_names_the_process_and_its_parent: SYS_getpid, |b| {
        let pid = fork(b);
        let status = slurp(b, &format!("/proc/{pid}/status"));
        assert!(status.contains("Name:\tprog\n") && status.contains(&format!("Pid:\t{pid}\n")) && status.contains("PPid:\t1\n"), "{status}");
        [0; 6]
    }, Want::Ret(1);
    proc_self_comm_is_the_main_threads_and_thread_self_the_callers: SYS_getpid, |b| {
        b.k.cur().name = "renamed".into();
        assert_eq!(slurp(b, "/proc/self/comm"), "renamed\n");
        assert_eq!(slurp(b, "/proc/thread-self/comm"), "renamed\n");
        assert_eq!(slurp(b, "/proc/1/task/1/comm"), "renamed\n");
        [0; 6]
    }, Want::Ret(1);
    proc_pid_cmdline_is_the_argument_vector: SYS_getpid, |b| {
        assert_eq!(slurp(b, "/proc/1/cmdline"), "/data/prog\0");
        [0; 6]
    }, Want::Ret(1);
    readlink_of_an_exited_processs_exe_is_enoent: SYS_readlink, |b| {
        let pid = fork(b);
        b.k.with_process(Pid(pid), |k| crate::kernel::sys_thread::exit_process(k, 0));
        [b.str(&format!("/proc/{pid}/exe")), b.buf(64), 64, 0, 0, 0]
    }, Want::Err(ENOENT);
    the_fd_directory_of_another_process_is_not_the_callers: SYS_readlink, |b| {
        let pid = fork(b);
        b.open("/data/hello.txt", O_RDONLY);
        [b.str(&format!("/proc/{pid}/fd/3")), b.buf(64), 64, 0, 0, 0]
    }, Want::Err(ENOENT);
}
