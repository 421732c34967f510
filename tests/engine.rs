//! The engine runs real programs (C, C++, Rust; static and dynamic) as they
//! run natively, the same way every time, and ends each run with the right
//! outcome.

mod common;

use std::collections::BTreeSet;
use std::process::Command;

use common::{cli, config, harness, run, run_config};
use rewind_fuzz::observe::outcome::{HungReason, Outcome};

/// Runs a program natively and in the machine and compares output and status.
fn same_as_native(name: &str) {
    let exe = harness(name);
    let native = Command::new(&exe)
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    let r = run(&exe, &[]);
    assert_eq!(
        r.outcome,
        Outcome::Exited {
            code: native.status.code().unwrap()
        },
        "{name}: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&r.stdout),
        String::from_utf8_lossy(&native.stdout),
        "{name} prints something else in the machine"
    );
}

#[test]
fn every_thread_keeps_its_vector_and_mask_registers_across_switches() {
    // AVX-512 registers where the host has them (the guest runs with the
    // host's XCR0 on nested PVM), AVX otherwise; the default policy
    // switches threads at every sched_yield, random walks anywhere.
    same_as_native("xsave-state");
    let cfg = config(&harness("xsave-state"), &[]);
    let mut vm = rewind_fuzz::engine::Vm::new(&cfg, rewind_fuzz::kernel::vfs::FileSource::host())
        .expect("create the machine");
    for seed in 0..10 {
        vm.set_strategy(Box::new(rewind_fuzz::sched::RandomWalk::new(seed)));
        let r = vm.run().expect("run");
        assert_eq!(
            String::from_utf8_lossy(&r.stdout),
            "extended state kept: yes\n",
            "seed {seed}"
        );
    }
}

#[test]
fn a_dynamic_c_hello_runs_as_natively() {
    same_as_native("hello");
}

#[test]
fn a_static_c_program_runs_as_natively() {
    same_as_native("hello-static");
}

#[test]
fn eight_pthreads_incrementing_a_mutex_counter_run_as_natively() {
    same_as_native("counter");
}

#[test]
fn a_condvar_producer_consumer_runs_as_natively() {
    same_as_native("prodcons");
}

#[test]
fn cpp_std_thread_mutex_and_condition_variable_run_as_natively() {
    same_as_native("cpp-threads");
}

#[test]
fn rust_threads_mutex_and_mpsc_run_as_natively() {
    same_as_native("rust-threads");
}

/// The libtest summary line without its timing.
fn summary(out: &[u8]) -> String {
    let s = String::from_utf8_lossy(out);
    let line = s
        .lines()
        .find(|l| l.starts_with("test result:"))
        .unwrap_or("")
        .to_string();
    line.split("; finished").next().unwrap().to_string()
}

#[test]
fn a_rust_libtest_binary_passes_with_its_default_test_threads() {
    let exe = harness("rust-libtest");
    let native = Command::new(&exe).output().unwrap();
    let r = run(&exe, &[]);
    assert_eq!(
        r.outcome,
        Outcome::Exited { code: 0 },
        "{}",
        String::from_utf8_lossy(&r.stdout)
    );
    assert_eq!(summary(&r.stdout), summary(&native.stdout));
    assert!(
        r.threads > 2,
        "libtest ran its tests on threads ({} threads)",
        r.threads
    );
}

#[test]
fn a_failing_rust_test_makes_the_binary_exit_101() {
    let exe = harness("rust-libtest-fail");
    let native = Command::new(&exe).output().unwrap();
    assert_eq!(native.status.code(), Some(101));
    let r = run(&exe, &[]);
    assert_eq!(r.outcome, Outcome::Exited { code: 101 });
    assert_eq!(summary(&r.stdout), summary(&native.stdout));
}

#[test]
fn two_hundred_runs_in_one_process_give_one_trace_hash() {
    let exe = harness("counter");
    let c = config(&exe, &[]);
    let hashes: BTreeSet<String> = (0..200).map(|_| run_config(&c).trace_hash).collect();
    assert_eq!(hashes.len(), 1, "{hashes:?}");
}

fn hash_from_cli(exe: &std::path::Path, seed: u64) -> String {
    let out = cli()
        .args(["run", "--json", "--seed", &seed.to_string(), "--target"])
        .arg(exe)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    v["trace_hash"].as_str().unwrap().to_string()
}

#[test]
fn runs_in_five_processes_give_the_same_trace_hash_as_in_process() {
    let exe = harness("counter");
    // As the command line runs it: at `atomics`, where its loops tick.
    let mut c = config(&exe, &[]);
    c.kernel.sync_points = rewind_fuzz::code::SyncPoints::Atomics;
    let in_process = run_config(&c).trace_hash;
    let hashes: BTreeSet<String> = (0..5).map(|_| hash_from_cli(&exe, 0)).collect();
    assert_eq!(hashes, BTreeSet::from([in_process]));
}

#[test]
fn programs_started_after_a_run_read_the_tsc_freely() {
    // The engine asks the kernel to make rdtsc fault during a run; the
    // request survives exec, so it must be gone before anything is started.
    let r = run(&harness("hello"), &[]);
    assert!(r.outcome.is_success());
    let status = std::process::Command::new(harness("rdtsc"))
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "the program faulted: {status:?}");
}

#[test]
fn the_same_seed_never_changes_the_trace() {
    let exe = harness("rust-libtest");
    for seed in [1, 77] {
        let mut c = config(&exe, &[]);
        c.kernel.seed = seed;
        let a = run_config(&c).trace_hash;
        let b = run_config(&c).trace_hash;
        assert_eq!(a, b, "seed {seed}");
    }
}

#[test]
fn a_null_dereference_crashes_with_sigsegv_at_address_zero() {
    let r = run(&harness("null-deref"), &[]);
    match r.outcome {
        Outcome::Crashed {
            signal,
            fault_addr,
            thread,
            ..
        } => {
            assert_eq!(signal, "SIGSEGV");
            assert_eq!(fault_addr, Some(0));
            assert_eq!(thread, 2, "the second thread dereferences NULL");
        }
        o => panic!("{o:?}"),
    }
}

#[test]
fn abort_crashes_with_sigabrt() {
    let r = run(&harness("abort"), &[]);
    assert!(
        matches!(&r.outcome, Outcome::Crashed { signal, .. } if signal == "SIGABRT"),
        "{:?}",
        r.outcome
    );
}

#[test]
fn integer_division_by_zero_crashes_with_sigfpe() {
    let r = run(&harness("div-zero"), &[]);
    assert!(
        matches!(&r.outcome, Outcome::Crashed { signal, .. } if signal == "SIGFPE"),
        "{:?}",
        r.outcome
    );
}

#[test]
fn threads_that_all_block_are_reported_as_deadlocked_each_with_its_wait() {
    let r = run(&harness("all-blocked"), &[]);
    let Outcome::Deadlocked { threads, .. } = &r.outcome else {
        panic!("{:?}", r.outcome)
    };
    assert!(threads.len() >= 2, "{threads:?}");
    assert!(
        threads
            .iter()
            .all(|t| t.waits_on.starts_with("futex") && t.object.is_some())
    );
}

#[test]
fn an_endless_loop_of_getpid_hits_the_step_limit() {
    let mut c = config(&harness("getpid-loop"), &[]);
    c.kernel.max_steps = 5000;
    let r = run_config(&c);
    assert!(
        matches!(
            r.outcome,
            Outcome::Hung {
                reason: HungReason::MaxSteps,
                ..
            }
        ),
        "{:?}",
        r.outcome
    );
    assert_eq!(r.steps.0, 5000);
}

#[test]
fn an_endless_loop_without_system_calls_is_stopped_by_the_watchdog() {
    let mut c = config(&harness("spin-loop"), &[]);
    c.timeout = std::time::Duration::from_millis(500);
    let r = run_config(&c);
    let Outcome::TimedOut { rip, .. } = r.outcome else {
        panic!("{:?}", r.outcome)
    };
    assert!(
        rip < 0x7fff_ffff_ffff,
        "the loop is in user code, not in the entry stub"
    );
}

#[test]
fn an_unimplemented_system_call_ends_the_run_naming_it() {
    let r = run(&harness("unimplemented"), &[]);
    let Outcome::Unsupported {
        syscall,
        nr,
        thread,
        rip,
        ..
    } = &r.outcome
    else {
        panic!("{:?}", r.outcome)
    };
    assert_eq!(syscall, "io_uring_setup");
    assert_eq!(*nr, 425);
    assert_eq!(*thread, 1);
    assert_ne!(*rip, 0);
}

#[test]
fn a_guest_that_writes_files_leaves_the_host_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let inside = dir.path().join("made-by-guest");
    let in_tmp = std::env::temp_dir().join(format!("rewind-guest-{}", std::process::id()));
    let r = run(
        &harness("file-writer"),
        &[in_tmp.to_str().unwrap(), inside.to_str().unwrap()],
    );
    assert_eq!(
        r.outcome,
        Outcome::Exited { code: 0 },
        "{}",
        String::from_utf8_lossy(&r.stdout)
    );
    assert!(String::from_utf8_lossy(&r.stdout).contains("second line"));
    // Real coreutils creating files and directories, which they leave behind.
    let touched = dir.path().join("touched");
    let r = run(
        std::path::Path::new("/usr/bin/touch"),
        &[touched.to_str().unwrap()],
    );
    assert_eq!(r.outcome, Outcome::Exited { code: 0 });
    let made = dir.path().join("a/b/c");
    let r = run(
        std::path::Path::new("/usr/bin/mkdir"),
        &["-p", made.to_str().unwrap()],
    );
    assert_eq!(r.outcome, Outcome::Exited { code: 0 });
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "the host directory changed: {left:?}");
    assert!(
        !in_tmp.exists()
            && !std::path::Path::new(&format!("{}.renamed", in_tmp.display())).exists()
    );
}

#[test]
fn a_signal_handler_runs_and_returns_through_its_frame() {
    let r = run(&harness("signal-handler"), &[]);
    assert_eq!(
        r.outcome,
        Outcome::Exited { code: 0 },
        "{}",
        String::from_utf8_lossy(&r.stdout)
    );
}

#[test]
fn the_time_stamp_counter_is_virtual_and_the_same_in_every_run() {
    let exe = harness("rdtsc");
    let a = run(&exe, &[]);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let b = run(&exe, &[]);
    assert_eq!(a.outcome, Outcome::Exited { code: 0 });
    assert_eq!(a.stdout, b.stdout);
    assert_eq!(a.trace_hash, b.trace_hash);
    let text = String::from_utf8_lossy(&a.stdout);
    let first: u64 = text.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(
        first < 1_000_000_000_000,
        "virtual, not the host's counter: {text}"
    );
}

/// Builds a C program written here into `dir`.
fn build_c(dir: &std::path::Path, name: &str, source: &str) -> std::path::PathBuf {
    common::build_c_with(dir, name, source, &[])
}

/// Runs `exe` under `seeds` random walks in one machine (from its
/// snapshot after the first), each of which must exit 0; their reports.
fn every_random_walk_exits_0(
    exe: &std::path::Path,
    seeds: u64,
) -> Vec<rewind_fuzz::engine::RunReport> {
    let c = config(exe, &[]);
    let mut vm =
        rewind_fuzz::engine::Vm::new(&c, rewind_fuzz::kernel::vfs::FileSource::host()).unwrap();
    (0..seeds)
        .map(|seed| {
            vm.set_strategy(Box::new(rewind_fuzz::sched::RandomWalk::new(seed)));
            let r = vm.run().unwrap();
            assert_eq!(r.outcome, Outcome::Exited { code: 0 }, "seed {seed}");
            r
        })
        .collect()
}

#[test]
fn a_32_bit_system_call_is_sigsegv_as_without_ia32_emulation() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_c(
        dir.path(),
        "int80",
        "int main(void) { long r; __asm__ volatile(\"int $0x80\" : \"=a\"(r) : \"a\"(20L) : \"memory\"); return (int)r; }",
    );
    assert_sigsegv_without_address(&run(&exe, &[]));
}

/// A SIGSEGV that came from no memory access: reported without an address.
fn assert_sigsegv_without_address(r: &rewind_fuzz::engine::RunReport) {
    let Outcome::Crashed {
        signal, fault_addr, ..
    } = &r.outcome
    else {
        panic!("{:?}", r.outcome)
    };
    assert_eq!(signal, "SIGSEGV");
    assert_eq!(*fault_addr, None, "{}", r.outcome.summary());
    let summary = r.outcome.summary();
    assert!(!summary.contains("0x0 "), "{summary}");
}

#[test]
fn a_signal_the_program_sends_itself_has_no_fault_address() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_c(
        dir.path(),
        "raise",
        "#include <signal.h>\nint main(void) { raise(SIGSEGV); return 0; }",
    );
    assert_sigsegv_without_address(&run(&exe, &[]));
    // A real NULL dereference keeps its address.
    let r = run(&harness("null-deref"), &[]);
    assert!(
        matches!(
            r.outcome,
            Outcome::Crashed {
                fault_addr: Some(0),
                ..
            }
        ),
        "{:?}",
        r.outcome
    );
}

#[test]
fn json_output_says_when_the_programs_output_was_cut() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_c(
        dir.path(),
        "big",
        "#include <stdio.h>\n#include <string.h>\nint main(void) { static char b[1 << 20]; memset(b, 'x', sizeof b); for (int i = 0; i < 17; i++) fwrite(b, 1, sizeof b, stdout); return 0; }",
    );
    let out = cli()
        .args(["run", "--json", "--target"])
        .arg(&exe)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["stdout_bytes"], 17 << 20);
    assert_eq!(v["stdout_truncated"], true);
    assert_eq!(v["stderr_truncated"], false);
    assert_eq!(v["stdout"].as_str().unwrap().len(), 16 << 20);
    assert!(String::from_utf8_lossy(&out.stderr).contains("warning"));
}

#[test]
fn guest_memory_the_host_refuses_is_a_usage_error() {
    use std::os::unix::process::CommandExt;
    common::require_kvm();
    let mut c = cli();
    c.args(["run", "--memory", "65536", "--target"])
        .arg(harness("hello"));
    // SAFETY: setrlimit is async-signal-safe and touches nothing of the
    // parent.
    unsafe {
        c.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 4 << 30,
                rlim_max: 4 << 30,
            };
            libc::setrlimit(libc::RLIMIT_AS, &lim);
            Ok(())
        });
    }
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--memory"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

#[test]
fn dev_stdout_is_the_guests_stdout_wherever_the_monitors_goes() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("small.txt");
    std::fs::write(&input, "a line through /dev/stdout\n").unwrap();
    let args = |out: std::process::Stdio| {
        cli()
            .args(["run", "--json", "--target", "/usr/bin/dd", "--"])
            .arg(format!("if={}", input.display()))
            .args(["of=/dev/stdout", "status=none"])
            .stdout(out)
            .output()
            .unwrap()
    };
    // stdout a pipe (captured here), then a file.
    let piped = args(std::process::Stdio::piped());
    let file = dir.path().join("out.json");
    let _ = args(std::fs::File::create(&file).unwrap().into());
    let a: serde_json::Value = serde_json::from_slice(&piped.stdout).unwrap();
    let b: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(a["stdout"], "a line through /dev/stdout\n", "{a}");
    assert_eq!(a["outcome"]["kind"], "exited");
    assert_eq!(
        a["trace_hash"], b["trace_hash"],
        "the monitor's stdout leaked in"
    );
}

#[test]
fn argv0_is_the_target_as_given_so_multi_call_programs_pick_their_mode() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("z.txt");
    std::fs::write(&plain, "through zstdcat\n").unwrap();
    let packed = dir.path().join("z.txt.zst");
    let st = Command::new(common::require_tool("zstd", "apt-get install -y zstd"))
        .args(["-q", "-f"])
        .arg(&plain)
        .arg("-o")
        .arg(&packed)
        .status()
        .unwrap();
    assert!(st.success());
    // zstdcat is a link to zstd, which decompresses when called zstdcat.
    let out = cli()
        .args(["run", "--target", "/usr/bin/zstdcat", "--"])
        .arg(&packed)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "through zstdcat\n");
}

#[test]
fn asking_for_more_than_the_memory_is_enomem_and_touching_it_is_its_own_outcome() {
    let dir = tempfile::tempdir().unwrap();
    // One request larger than the machine: malloc returns NULL, as Linux's
    // overcommit heuristic makes it.
    let big = build_c(
        dir.path(),
        "big",
        "#include <errno.h>\n#include <stdio.h>\n#include <stdlib.h>\nint main(void) { void *p = malloc((size_t)200 << 20); printf(\"%s %d\\n\", p ? \"got it\" : \"NULL\", errno); return 0; }",
    );
    let mut c = config(&big, &[]);
    c.memory_mib = 64;
    let r = run_config(&c);
    assert_eq!(r.outcome, Outcome::Exited { code: 0 });
    assert_eq!(String::from_utf8_lossy(&r.stdout), "NULL 12\n");
    // Many requests that each fit, touched: the machine runs out.
    let touch = build_c(
        dir.path(),
        "touch",
        "#include <stdlib.h>\nint main(void) { for (int i = 0; i < 40; i++) { volatile char *p = malloc(8 << 20); if (!p) return 1; for (size_t j = 0; j < (8 << 20); j += 4096) p[j] = 1; } return 0; }",
    );
    let mut c = config(&touch, &[]);
    c.memory_mib = 64;
    let r = run_config(&c);
    let Outcome::OutOfMemory { memory_mib, .. } = r.outcome else {
        panic!("{:?}", r.outcome)
    };
    assert_eq!(memory_mib, 64);
    let summary = r.outcome.summary();
    assert!(summary.contains("raise --memory"), "{summary}");
    assert_eq!(r.outcome.kind(), "out-of-memory");
}

#[test]
fn user_and_group_lookups_fall_back_as_without_nscd() {
    // glibc asks the name service cache's socket first; with nobody
    // listening it reads /etc/passwd, as on a host without nscd.
    common::require_kvm();
    for (exe, args) in [
        ("/usr/bin/whoami", &[][..]),
        ("/usr/bin/id", &[][..]),
        ("/usr/bin/ls", &["-ln", "/usr/bin/env"][..]),
    ] {
        let native = Command::new(exe).args(args).output().unwrap();
        let out = cli()
            .args(["run", "--target", exe, "--"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{exe}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let ours = String::from_utf8_lossy(&out.stdout).into_owned();
        let theirs = String::from_utf8_lossy(&native.stdout).into_owned();
        // ls shows times, which the guest's clock sets: compare the rest.
        let fields =
            |s: &str| -> Vec<String> { s.split_whitespace().take(5).map(str::to_string).collect() };
        assert_eq!(fields(&ours), fields(&theirs), "{exe}");
    }
}

#[test]
fn sigsuspend_waits_with_a_temporary_mask_under_every_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_c(
        dir.path(),
        "susp",
        r#"#include <pthread.h>
#include <signal.h>
#include <stdio.h>
static volatile sig_atomic_t got;
static void on_usr1(int s) { (void)s; got++; }
static pthread_t main_thread;
static void *sender(void *arg) { (void)arg; pthread_kill(main_thread, SIGUSR1); return NULL; }
int main(void) {
    struct sigaction sa = {0}; sa.sa_handler = on_usr1; sigaction(SIGUSR1, &sa, NULL);
    sigset_t block, wait, now; sigemptyset(&block); sigaddset(&block, SIGUSR1);
    sigprocmask(SIG_BLOCK, &block, NULL);
    main_thread = pthread_self();
    pthread_t t; pthread_create(&t, NULL, sender, NULL);
    sigemptyset(&wait);
    while (!got) sigsuspend(&wait);
    sigprocmask(SIG_SETMASK, NULL, &now);
    printf("got %d, blocked again %d\n", (int)got, sigismember(&now, SIGUSR1));
    pthread_join(t, NULL);
    return 0;
}"#,
    );
    for r in every_random_walk_exits_0(&exe, 50) {
        assert_eq!(r.stdout, b"got 1, blocked again 1\n");
    }
}

const PIPES_C: &str = r#"#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
static int fds[2];
static void *producer(void *arg) {
    (void)arg;
    static char chunk[10000];
    for (int i = 0; i < 30; i++) {
        memset(chunk, 'a' + i % 26, sizeof chunk);
        size_t off = 0;
        while (off < sizeof chunk) {
            ssize_t n = write(fds[1], chunk + off, sizeof chunk - off);
            if (n <= 0) return NULL;
            off += n;
        }
    }
    close(fds[1]);
    return NULL;
}
int main(void) {
    if (pipe(fds)) return 1;
    pthread_t t;
    pthread_create(&t, NULL, producer, NULL);
    char buf[4096];
    unsigned long sum = 0, total = 0;
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n; i++) sum = sum * 31 + (unsigned char)buf[i];
        total += n;
    }
    pthread_join(t, NULL);
    printf("read %lu bytes, sum %lx\n", total, sum);
    return 0;
}"#;

#[test]
fn a_pipe_between_threads_carries_every_byte_under_every_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_c(dir.path(), "pipes", PIPES_C);
    let native = Command::new(&exe).output().unwrap();
    let c = config(&exe, &[]);
    for (seed, r) in every_random_walk_exits_0(&exe, 40).into_iter().enumerate() {
        assert_eq!(r.stdout, native.stdout, "seed {seed}");
        // The same schedule from scratch: the same run, step for step.
        let mut fresh_cfg = c.clone();
        fresh_cfg.snapshot_at = rewind_fuzz::engine::SnapshotAt::Never;
        let mut fresh =
            rewind_fuzz::engine::Vm::new(&fresh_cfg, rewind_fuzz::kernel::vfs::FileSource::host())
                .unwrap();
        fresh.set_strategy(Box::new(rewind_fuzz::sched::Replay::new(
            r.schedule.clone(),
        )));
        assert_eq!(fresh.run().unwrap().trace_hash, r.trace_hash, "seed {seed}");
    }
}

#[test]
fn a_pipe_nobody_writes_is_a_deadlock_and_one_nobody_reads_is_sigpipe() {
    let dir = tempfile::tempdir().unwrap();
    let stuck = build_c(
        dir.path(),
        "stuck",
        "#include <pthread.h>\n#include <unistd.h>\nstatic int p[2];\nstatic void *reader(void *a) { char c; (void)a; read(p[0], &c, 1); return 0; }\nint main(void) { pipe(p); pthread_t t; pthread_create(&t, 0, reader, 0); pthread_join(t, 0); return 0; }",
    );
    let r = run(&stuck, &[]);
    let Outcome::Deadlocked { threads, .. } = &r.outcome else {
        panic!("{:?}", r.outcome)
    };
    assert!(
        threads.iter().any(|t| t.waits_on.contains("empty pipe")),
        "{}",
        r.outcome.summary()
    );
    let broken = build_c(
        dir.path(),
        "broken",
        "#include <unistd.h>\nint main(void) { int p[2]; pipe(p); close(p[0]); write(p[1], \"x\", 1); return 0; }",
    );
    let r = run(&broken, &[]);
    assert!(
        matches!(&r.outcome, Outcome::Crashed { signal, .. } if signal == "SIGPIPE"),
        "{:?}",
        r.outcome
    );
}

#[test]
fn xz_compresses_with_two_threads_as_natively() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("data.txt");
    let text: String = (0..20000)
        .map(|i| format!("line {i} of some text\n"))
        .collect();
    std::fs::write(&input, &text).unwrap();
    let out = cli()
        .args(["run", "--target", "/usr/bin/xz", "--", "-T2", "-c"])
        .arg(&input)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut unxz = Command::new(common::require_tool("xz", "apt-get install -y xz-utils"))
        .args(["-d", "-c"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    unxz.stdin.take().unwrap().write_all(&out.stdout).unwrap();
    let back = unxz.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&back.stdout), text);
}

#[test]
fn a_thread_waiting_on_an_event_counter_wakes_under_every_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_c(
        dir.path(),
        "efd",
        r#"#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <unistd.h>
static int efd;
static void *waiter(void *a) { (void)a; uint64_t v = 0; read(efd, &v, 8); printf("woke with %lu\n", (unsigned long)v); return 0; }
int main(void) {
    efd = eventfd(0, EFD_CLOEXEC);
    pthread_t t; pthread_create(&t, 0, waiter, 0);
    uint64_t one = 1; write(efd, &one, 8); write(efd, &one, 8);
    pthread_join(t, 0);
    return 0;
}"#,
    );
    let seen: BTreeSet<String> = every_random_walk_exits_0(&exe, 40)
        .iter()
        .map(|r| String::from_utf8_lossy(&r.stdout).into_owned())
        .collect();
    // Woken after one write or after both, depending on the schedule.
    assert!(
        seen.iter()
            .all(|s| s == "woke with 1\n" || s == "woke with 2\n"),
        "{seen:?}"
    );
    assert_eq!(seen.len(), 2, "{seen:?}");
}

#[test]
fn event_loops_of_python_and_node_run_to_their_end() {
    // asyncio waits on epoll with a socket pair to wake itself; node's
    // libuv on epoll with event counters.
    common::require_kvm();
    let cases: [(&str, &[&str], &str); 2] = [
        (
            "/usr/bin/python3",
            &[
                "-c",
                "import asyncio\nasync def main():\n    await asyncio.sleep(0.01)\n    print('asyncio ok')\nasyncio.run(main())",
            ],
            "asyncio ok\n",
        ),
        (
            "/usr/bin/node",
            &[
                "-e",
                "setTimeout(() => console.log('timer'), 10); Promise.resolve(2).then(v => console.log(v * 21))",
            ],
            "42\ntimer\n",
        ),
    ];
    for (exe, args, want) in cases {
        common::require_tool(exe, "apt-get install -y python3 nodejs");
        let out = cli()
            .args(["run", "--target", exe, "--"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{exe}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), want, "{exe}");
    }
}

#[test]
fn sigtimedwait_takes_a_blocked_signal_or_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_c(
        dir.path(),
        "sigwait",
        r#"#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
static pthread_t main_thread;
static void *sender(void *a) { (void)a; pthread_kill(main_thread, SIGUSR1); return NULL; }
int main(void) {
    sigset_t set; sigemptyset(&set); sigaddset(&set, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    main_thread = pthread_self();
    pthread_t t; pthread_create(&t, NULL, sender, NULL);
    struct timespec second = {1, 0}, moment = {0, 10000000};
    siginfo_t info;
    int got = sigtimedwait(&set, &info, &second);
    int again = sigtimedwait(&set, &info, &moment);
    printf("got %d (%s), then %d (%s)\n", got, got == SIGUSR1 ? "SIGUSR1" : "?", again, again < 0 && errno == EAGAIN ? "EAGAIN" : "?");
    pthread_join(t, NULL);
    return 0;
}"#,
    );
    let native = Command::new(&exe).output().unwrap();
    for r in every_random_walk_exits_0(&exe, 40) {
        assert_eq!(r.stdout, native.stdout);
    }
}
