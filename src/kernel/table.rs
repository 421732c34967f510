//! The system-call table: data, not code. Each entry names its handler, its
//! family and a note on how far it goes; a number with no entry ends the run
//! as `unsupported`, so the table is also the compatibility list.

use std::sync::OnceLock;

use super::call::SyscallDef;
use crate::arch::syscalls as names;

fn build() -> Vec<Option<SyscallDef>> {
    let families: [(&str, &[SyscallDef]); 14] = [
        ("file", super::sys_file::CALLS),
        ("stat", super::sys_stat::CALLS),
        ("tree", super::sys_tree::CALLS),
        ("poll", super::sys_poll::CALLS),
        ("net", super::sys_net::CALLS),
        ("pipe", super::sys_pipe::CALLS),
        ("epoll", super::sys_epoll::CALLS),
        ("info", super::sys_info::CALLS),
        ("mm", super::sys_mm::CALLS),
        ("signal", super::sys_signal::CALLS),
        ("thread", super::sys_thread::CALLS),
        ("process", super::sys_process::CALLS),
        ("timer", super::sys_timer::CALLS),
        ("time", super::sys_time::CALLS),
    ];
    let mut table = vec![None; names::SYSCALL_NAMES.len()];
    for (family, calls) in families {
        for d in calls {
            let slot = &mut table[d.nr as usize];
            assert!(slot.is_none(), "system call {} defined twice", d.name());
            *slot = Some(SyscallDef { family, ..*d });
        }
    }
    table
}

fn table() -> &'static [Option<SyscallDef>] {
    static TABLE: OnceLock<Vec<Option<SyscallDef>>> = OnceLock::new();
    TABLE.get_or_init(build)
}

/// The entry for call `nr`, if implemented.
pub fn lookup(nr: u64) -> Option<&'static SyscallDef> {
    table().get(nr as usize).and_then(|d| d.as_ref())
}

/// Every implemented call, by number.
pub fn implemented() -> impl Iterator<Item = &'static SyscallDef> {
    table().iter().flatten()
}

/// Calls that stay unsupported (a run that makes one ends as
/// `unsupported`, naming it), and why: on purpose, or not yet. Any other
/// missing call is missing because nothing has needed it yet.
pub const UNSUPPORTED: &[(&str, &str)] = &[
    (
        "sendmsg and recvmsg with ancillary data, sendmmsg, recvmmsg",
        "not yet: passing descriptors or credentials between processes is not modelled",
    ),
    (
        "io_uring_setup, io_uring_enter, io_uring_register",
        "an asynchronous kernel queue would run work outside any step; programs fall back to plain calls",
    ),
    (
        "ptrace, process_vm_readv, process_vm_writev",
        "debugging other processes: use rewind-fuzz gdb on the run instead",
    ),
    (
        "mount, umount2, pivot_root, setns, chroot",
        "namespaces and mounts: the guest sees one fixed file system",
    ),
    (
        "bpf, perf_event_open, seccomp",
        "kernel programs and counters have no meaning without a guest kernel",
    ),
    (
        "userfaultfd, memfd_secret, pkey_mprotect",
        "memory features of a real kernel's MMU",
    ),
    (
        "inotify_init1, fanotify_init",
        "nobody else changes the guest's files: there is nothing to watch",
    ),
    (
        "futex with FUTEX_LOCK_PI and friends",
        "priority inheritance has no meaning when the strategy chooses who runs",
    ),
];

/// The table as a Markdown document (`docs/syscalls.md`).
pub fn markdown() -> String {
    let mut s = String::from(
        "# System calls\n\n\
         The calls the monitor implements, by family (`src/kernel/sys_FAMILY.rs`),\n\
         with what each leaves out. A call not listed ends a run as `unsupported`,\n\
         naming it. Generated from `src/kernel/table.rs` by\n\
         `REWIND_WRITE_DOCS=1 cargo nextest run --lib syscall_table_document`;\n\
         a test keeps it current.\n\n\
         | call | number | family | notes |\n| --- | --- | --- | --- |\n",
    );
    for d in implemented() {
        s.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            d.name(),
            d.nr,
            d.family,
            d.note
        ));
    }
    s.push_str("\n## Not supported, and why\n\n| calls | why |\n| --- | --- |\n");
    for (calls, why) in UNSUPPORTED {
        s.push_str(&format!("| {calls} | {why} |\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syscall_table_document_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/syscalls.md");
        let want = markdown();
        if std::env::var_os("REWIND_WRITE_DOCS").is_some() {
            std::fs::write(&path, &want).unwrap();
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "docs/syscalls.md is out of date: run REWIND_WRITE_DOCS=1 cargo nextest run --lib syscall_table_document"
        );
    }

    #[test]
    fn no_call_is_both_implemented_and_unsupported_on_purpose() {
        for (calls, _) in UNSUPPORTED {
            for name in calls.split(", ") {
                let nr = names::SYSCALL_NAMES.iter().position(|n| *n == name);
                if let Some(nr) = nr {
                    assert!(lookup(nr as u64).is_none(), "{name} is implemented");
                }
            }
        }
    }

    #[test]
    fn every_entry_has_a_linux_name_and_a_family() {
        let mut n = 0;
        for d in implemented() {
            assert!(
                names::syscall_name(d.nr).is_some(),
                "number {} has no name",
                d.nr
            );
            assert!(!d.family.is_empty());
            n += 1;
        }
        assert!(n > 100, "only {n} calls implemented");
    }

    #[test]
    fn the_calls_real_test_binaries_make_are_implemented() {
        // What static C, dynamic C/C++ with threads and Rust libtest
        // binaries call to start, make threads and end.
        for name in [
            "arch_prctl",
            "brk",
            "exit_group",
            "getrandom",
            "ioctl",
            "mprotect",
            "newfstatat",
            "prlimit64",
            "readlink",
            "rseq",
            "set_robust_list",
            "set_tid_address",
            "write",
            "access",
            "clone3",
            "close",
            "exit",
            "futex",
            "madvise",
            "mmap",
            "munmap",
            "openat",
            "pread64",
            "read",
            "rt_sigaction",
            "rt_sigprocmask",
            "clock_nanosleep",
            "gettid",
            "lseek",
            "poll",
            "prctl",
            "sched_getaffinity",
            "sigaltstack",
            "statx",
            "clone",
        ] {
            let nr = names::SYSCALL_NAMES
                .iter()
                .position(|n| *n == name)
                .unwrap() as u64;
            assert!(lookup(nr).is_some(), "{name} is not implemented");
        }
    }
}
