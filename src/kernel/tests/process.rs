//! Processes: fork, vfork, exec, wait, process groups, pidfds and kill,
//! with Linux's errors.

use super::{Want, cases};
use crate::ids::Pid;
use libc::*;

/// Forks the bench's process; the child's pid.
fn fork(b: &mut super::Bench) -> u64 {
    let pid = b.ret(SYS_fork, [0; 6]);
    assert!(pid > 1, "fork gave {pid}");
    pid as u64
}

/// A NULL-terminated array of string pointers in scratch memory.
fn strings(b: &mut super::Bench, items: &[&str]) -> u64 {
    let mut words: Vec<u8> = Vec::new();
    for s in items {
        words.extend_from_slice(&b.str(s).to_le_bytes());
    }
    words.extend_from_slice(&0u64.to_le_bytes());
    b.bytes(&words)
}

/// A file in the overlay with `contents`.
fn script(b: &mut super::Bench, path: &str, contents: &str) -> u64 {
    let fd = b.open(path, O_CREAT | O_WRONLY);
    let data = b.bytes(contents.as_bytes());
    assert_eq!(
        b.ret(SYS_write, [fd, data, contents.len() as u64, 0, 0, 0]),
        contents.len() as i64
    );
    b.str(path)
}

cases! {
    unshare_of_a_mount_namespace_is_granted: SYS_unshare, |_b| [CLONE_NEWNS as u64, 0, 0, 0, 0, 0], Want::Ret(0);
    unshare_of_a_lone_threads_context_is_granted: SYS_unshare, |_b| [(CLONE_FS | CLONE_FILES) as u64, 0, 0, 0, 0, 0], Want::Ret(0);
    unshare_of_other_namespaces_is_unsupported: SYS_unshare, |_b| [CLONE_NEWUSER as u64, 0, 0, 0, 0, 0], Want::Unsupported;
    unshare_of_a_descriptor_table_other_threads_share_is_unsupported: SYS_unshare, |b| {
        let flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM;
        let stack = b.buf(4096) + 4096;
        assert!(b.ret(SYS_clone, [flags as u64, stack, 0, 0, 0, 0]) > 1);
        [CLONE_FILES as u64, 0, 0, 0, 0, 0]
    }, Want::Unsupported;
    a_thread_that_unshares_its_working_directory_changes_only_its_own: SYS_unshare, |b| {
        let flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM;
        let stack = b.buf(4096) + 4096;
        assert!(b.ret(SYS_clone, [flags as u64, stack, 0, 0, 0, 0]) > 1);
        [CLONE_FS as u64, 0, 0, 0, 0, 0]
    }, Want::Ret(0), then |b| {
        let tmp = b.str("/tmp");
        assert_eq!(b.ret(SYS_chdir, [tmp, 0, 0, 0, 0, 0]), 0);
        let buf = b.buf(64);
        assert_eq!(b.ret(SYS_getcwd, [buf, 64, 0, 0, 0, 0]), 5);
        assert_eq!(b.read(buf, 5), b"/tmp\0");
        // The process's other thread keeps the directory it had.
        let other = *b.k.threads().keys().find(|t| **t != b.k.current()).unwrap();
        assert!(b.k.threads()[&b.k.current()].own_cwd.is_some());
        assert!(b.k.threads()[&other].own_cwd.is_none());
        assert_ne!(b.k.process_entry().cwd, "/tmp");
    };
    wait_without_children_is_echild: SYS_wait4, |b| [u64::MAX, 0, 0, 0, 0, 0], Want::Err(ECHILD);
    wait_for_a_running_child_blocks: SYS_wait4, |b| {
        fork(b);
        [u64::MAX, b.buf(4), 0, 0, 0, 0]
    }, Want::Blocks;
    wait_with_wnohang_for_a_running_child_is_zero: SYS_wait4, |b| {
        fork(b);
        [u64::MAX, b.buf(4), WNOHANG as u64, 0, 0, 0]
    }, Want::Ret(0);
    wait_for_a_pid_that_is_no_child_is_echild: SYS_wait4, |b| {
        fork(b);
        [77, 0, 0, 0, 0, 0]
    }, Want::Err(ECHILD);
    wait_into_a_bad_pointer_is_efault: SYS_wait4, |b| {
        let pid = fork(b);
        b.k.with_process(Pid(pid as u32), |k| super::super::sys_thread::exit_process(k, 3));
        [pid, super::UNMAPPED, 0, 0, 0, 0]
    }, Want::Err(EFAULT);
    a_reaped_child_reports_its_exit_code: SYS_wait4, |b| {
        let pid = fork(b);
        b.k.with_process(Pid(pid as u32), |k| super::super::sys_thread::exit_process(k, 3));
        [pid, super::SCRATCH + 8192, 0, 0, 0, 0]
    }, Want::Ret(2), then |b| {
        assert_eq!(b.read(super::SCRATCH + 8192, 4), 0x300u32.to_le_bytes());
        assert_eq!(b.k.processes().len(), 1);
    };
    waitid_with_an_unknown_idtype_is_einval: SYS_waitid, |b| [9, 0, b.buf(128), WEXITED as u64, 0, 0], Want::Err(EINVAL);
    waitid_without_wexited_is_einval: SYS_waitid, |b| {
        fork(b);
        [P_ALL as u64, 0, b.buf(128), 0, 0, 0]
    }, Want::Err(EINVAL);
    waitid_on_a_bad_pidfd_is_ebadf: SYS_waitid, |b| [3, 99, b.buf(128), WEXITED as u64, 0, 0], Want::Err(EBADF);
    fork_returns_the_child_pid: SYS_fork, |b| [0; 6], Want::Ret(2), then |b| {
        assert_eq!(b.k.processes()[&Pid(2)].parent, Pid(1));
        assert_eq!(b.ret(SYS_getpid, [0; 6]), 1);
    };
    vfork_blocks_the_parent: SYS_vfork, |b| [0; 6], Want::Blocks;
    a_process_with_namespace_flags_is_unsupported: SYS_clone, |b| [0x20000 | SIGCHLD as u64, 0, 0, 0, 0, 0], Want::Unsupported;
    execve_of_a_bad_path_pointer_is_efault: SYS_execve, |b| [super::UNMAPPED, 0, 0, 0, 0, 0], Want::Err(EFAULT);
    execve_with_a_bad_argv_is_efault: SYS_execve, |b| [b.str("/data/hello.txt"), super::UNMAPPED, 0, 0, 0, 0], Want::Err(EFAULT);
    execve_of_a_missing_file_is_enoent: SYS_execve, |b| [b.str("/data/nope"), 0, 0, 0, 0, 0], Want::Err(ENOENT);
    execve_of_a_directory_is_eacces: SYS_execve, |b| [b.str("/data/sub"), 0, 0, 0, 0, 0], Want::Err(EACCES);
    execve_of_a_text_file_is_enoexec: SYS_execve, |b| {
        let argv = strings(b, &["hello.txt"]);
        [b.str("/data/hello.txt"), argv, 0, 0, 0, 0]
    }, Want::Err(ENOEXEC);
    a_script_whose_interpreter_is_missing_is_enoent: SYS_execve, |b| {
        let s = script(b, "/tmp/s.sh", "#!/no/such/shell -e\necho hi\n");
        [s, 0, 0, 0, 0, 0]
    }, Want::Err(ENOENT);
    a_script_that_runs_itself_is_eloop: SYS_execve, |b| {
        let s = script(b, "/tmp/loop", "#!/tmp/loop\n");
        [s, 0, 0, 0, 0, 0]
    }, Want::Err(ELOOP);
    pidfd_open_with_unknown_flags_is_einval: SYS_pidfd_open, |b| [1, 1, 0, 0, 0, 0], Want::Err(EINVAL);
    pidfd_open_of_no_process_is_esrch: SYS_pidfd_open, |b| [99, 0, 0, 0, 0, 0], Want::Err(ESRCH);
    pidfd_open_of_pid_zero_is_einval: SYS_pidfd_open, |b| [0, 0, 0, 0, 0, 0], Want::Err(EINVAL);
    a_pidfd_reads_as_einval: SYS_read, |b| {
        let fd = fork(b);
        let fd = b.ret(SYS_pidfd_open, [fd, 0, 0, 0, 0, 0]) as u64;
        [fd, b.buf(8), 8, 0, 0, 0]
    }, Want::Err(EINVAL);
    setpgid_to_a_negative_group_is_einval: SYS_setpgid, |b| [0, u64::MAX, 0, 0, 0, 0], Want::Err(EINVAL);
    setpgid_of_no_process_is_esrch: SYS_setpgid, |b| [99, 0, 0, 0, 0, 0], Want::Err(ESRCH);
    a_child_can_be_moved_to_its_own_group: SYS_setpgid, |b| {
        let pid = fork(b);
        [pid, 0, 0, 0, 0, 0]
    }, Want::Ret(0), then |b| assert_eq!(b.ret(SYS_getpgid, [2, 0, 0, 0, 0, 0]), 2);
    setsid_of_a_group_leader_is_eperm: SYS_setsid, |b| [0; 6], Want::Err(EPERM);
    getpgid_of_no_process_is_esrch: SYS_getpgid, |b| [99, 0, 0, 0, 0, 0], Want::Err(ESRCH);
    getsid_of_the_caller_is_its_session: SYS_getsid, |b| [0; 6], Want::Ret(1);
    getppid_of_the_first_process_is_zero: SYS_getppid, |b| [0; 6], Want::Ret(0);
    kill_of_no_process_is_esrch: SYS_kill, |b| [99, 0, 0, 0, 0, 0], Want::Err(ESRCH);
    kill_with_signal_zero_finds_a_child: SYS_kill, |b| {
        let pid = fork(b);
        [pid, 0, 0, 0, 0, 0]
    }, Want::Ret(0);
    kill_of_a_zombie_child_finds_it_and_does_nothing: SYS_kill, |b| {
        let pid = fork(b);
        b.k.with_process(Pid(pid as u32), |k| super::super::sys_thread::exit_process(k, 3));
        [pid, SIGKILL as u64, 0, 0, 0, 0]
    }, Want::Ret(0), then |b| {
        // Still there to be waited for, with its own exit code.
        let status = b.buf(4);
        assert!(b.ret(SYS_wait4, [u64::MAX, status, 0, 0, 0, 0]) > 1);
        assert_eq!(b.read(status, 4), 0x300u32.to_le_bytes());
    };
    kill_with_a_bad_signal_is_einval: SYS_kill, |b| [1, 99, 0, 0, 0, 0], Want::Err(EINVAL);
    a_childs_status_flags_are_its_parents: SYS_fcntl, |b| {
        let ends = b.buf(8);
        assert_eq!(b.ret(SYS_pipe2, [ends, 0, 0, 0, 0, 0]), 0);
        let pid = fork(b);
        let def = super::super::table::lookup(SYS_fcntl as u64).unwrap();
        let set = [3, F_SETFL as u64, O_NONBLOCK as u64, 0, 0, 0];
        let fpu = &mut b.fpu;
        let r = b.k.with_process(Pid(pid as u32), |k| (def.handler)(k, fpu, set));
        assert!(matches!(r, super::super::SysResult::Ret(0)), "{r:?}");
        [3, F_GETFL as u64, 0, 0, 0, 0]
    }, Want::Ret((O_RDONLY | O_NONBLOCK) as i64);
}
