//! Processes: fork, vfork, exec, wait and pipes between processes, with
//! real programs (sh, coreutils, tar, xz, python3, a tokio runtime) giving
//! what they give natively, deterministically.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{cli, example, require_tool};
use serde_json::Value;

fn build_c(dir: &Path, name: &str, source: &str, defines: &[&str]) -> PathBuf {
    common::build_c_with(dir, name, source, defines)
}

/// `run --json` of `exe args` in `dir`: exit code of rewind-fuzz and the report.
fn run_json(dir: &Path, exe: &Path, args: &[&str]) -> (i32, Value) {
    common::require_kvm();
    let out = cli()
        .current_dir(dir)
        .args(["run", "--json", "--target"])
        .arg(exe)
        .arg("--")
        .args(args)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap(), v)
}

/// The program's own exit code in a `run --json` report.
fn exit_code(v: &Value) -> Option<i64> {
    (v["outcome"]["kind"] == "exited").then(|| v["outcome"]["code"].as_i64().unwrap())
}

const FORK_MEMORY: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
int global = 5;
int main(void) {
    int *heap = malloc(sizeof *heap);
    *heap = 7;
    int *shared = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    *shared = 1;
    pid_t p = fork();
    if (p == 0) {
        global = 100; *heap = 200; *shared = 300;
        printf("child: pid %d parent %d global %d heap %d\n", getpid(), getppid(), global, *heap);
        fflush(stdout);
        _exit(3);
    }
    int st;
    if (waitpid(p, &st, 0) != p || !WIFEXITED(st)) return 10;
    printf("parent: child exited %d; global %d heap %d shared %d\n", WEXITSTATUS(st), global, *heap, *shared);
    /* A vfork child runs in its parent's memory until it execs. */
    volatile int seen = 0;
    pid_t v = vfork();
    if (v == 0) { seen = 42; _exit(0); }
    waitpid(v, 0, 0);
    printf("vfork child wrote %d\n", seen);
    return waitpid(-1, 0, WNOHANG) == -1 ? 0 : 11;
}
"#;

#[test]
fn a_forked_child_writes_its_own_copy_and_a_shared_mapping_is_shared() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_c(dir.path(), "fork_memory", FORK_MEMORY, &[]);
    let (_, v) = run_json(dir.path(), &exe, &[]);
    assert_eq!(exit_code(&v), Some(0), "{v}");
    assert_eq!(
        v["stdout"],
        "child: pid 2 parent 1 global 100 heap 200\n\
         parent: child exited 3; global 5 heap 7 shared 300\n\
         vfork child wrote 42\n"
    );
}

/// Runs `sh -c script` natively and in the machine, in `dir`; both must
/// give the same stdout and exit code. Returns the trace hash.
fn same_as_natively(dir: &Path, script: &str) -> String {
    // The machine first: its writes stay in its own overlay, the host's
    // would be seen by it.
    let (_, v) = run_json(dir, Path::new("/bin/sh"), &["-c", script]);
    let native = Command::new("/bin/sh")
        .args(["-c", script])
        .current_dir(dir)
        .output()
        .unwrap();
    assert_eq!(
        exit_code(&v),
        native.status.code().map(i64::from),
        "{script}: {v}"
    );
    assert_eq!(
        v["stdout"].as_str().unwrap(),
        String::from_utf8_lossy(&native.stdout),
        "{script}"
    );
    v["trace_hash"].as_str().unwrap().to_string()
}

/// Runs `exe args` in the machine and natively, in `dir`, with the extra
/// environment `env`; both must give the same stdout and exit code.
/// Returns the machine's report.
fn same_as_natively_with(dir: &Path, exe: &Path, args: &[&str], env: &[(&str, &str)]) -> Value {
    common::require_kvm();
    // The machine first: its writes stay in its own overlay, the host's
    // would be seen by it.
    let mut cmd = cli();
    cmd.current_dir(dir).args(["run", "--json"]);
    for (k, v) in env {
        cmd.arg("--env").arg(format!("{k}={v}"));
    }
    let out = cmd
        .arg("--target")
        .arg(exe)
        .arg("--")
        .args(args)
        .output()
        .unwrap();
    let mut v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    // Natively with the machine's environment: the guest's default one
    // (PATH, HOME, LANG, TERM) and the same additions.
    let native = Command::new(exe)
        .args(args)
        .env_clear()
        .envs(
            rewind_fuzz::kernel::default_env()
                .iter()
                .filter_map(|e| e.split_once('=')),
        )
        .envs(env.iter().copied())
        .current_dir(dir)
        .output()
        .unwrap();
    assert_eq!(
        exit_code(&v),
        native.status.code().map(i64::from),
        "{exe:?} {args:?}: {v}\nnatively: {}",
        String::from_utf8_lossy(&native.stderr)
    );
    v["native_stderr"] = String::from_utf8_lossy(&native.stderr).into();
    assert_eq!(
        v["stdout"].as_str().unwrap(),
        String::from_utf8_lossy(&native.stdout),
        "{exe:?} {args:?}"
    );
    v
}

#[test]
fn shells_pipelines_and_real_programs_print_what_they_print_natively() {
    // A program missing here would fail the same way in both runs.
    for (tool, install) in [
        ("xz", "apt-get install -y xz-utils"),
        ("tar", "apt-get install -y tar"),
        ("sqlite3", "apt-get install -y sqlite3"),
    ] {
        require_tool(tool, install);
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), "hello\n").unwrap();
    std::fs::create_dir(dir.path().join("tree")).unwrap();
    std::fs::write(dir.path().join("tree/a"), "x\n").unwrap();
    std::fs::write(dir.path().join("tree/b"), "y\n").unwrap();
    for script in [
        "ls / | wc -l",
        "cat f; echo $?",
        "cat missing 2>/dev/null; echo $?",
        "seq 1 200 | sort -rn | head -2",
        "(echo b; echo a) | sort | tr a-z A-Z",
        "x=$(echo sub); echo \"$x shell\"; exit 4",
        "tar -cf t.tar tree && mkdir out && tar -xf t.tar -C out && cat out/tree/a out/tree/b && tar -tf t.tar | sort",
        "seq 1 20000 | xz -T2 -c | xz -d | tail -1",
        "yes | head -3",
        "seq 1 3 | tac",
        "{ echo a; ls /nonexistent 2>&1 | wc -l; echo c; } > out.txt; cat out.txt",
        "ls -la --time-style=+%s /etc /usr/bin/ls",
        "sqlite3 :memory: 'create table t(x); insert into t values (1),(2); select sum(x) from t'",
    ] {
        same_as_natively(dir.path(), script);
    }
}

#[test]
fn a_reproducer_replays_the_file_metadata_it_recorded() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let rwd = dir.path().join("ls.rwd");
    let out = cli()
        .args(["run", "--save-rwd"])
        .arg(&rwd)
        .args([
            "--target",
            "/bin/ls",
            "--",
            "-la",
            "--time-style=+%s",
            "/etc",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let native = Command::new("/bin/ls")
        .args(["-la", "--time-style=+%s", "/etc"])
        .output()
        .unwrap();
    assert_eq!(out.stdout, native.stdout);
    let replay = cli().arg("replay").arg(&rwd).output().unwrap();
    let said = String::from_utf8_lossy(&replay.stderr);
    assert!(replay.status.success(), "{said}");
    assert!(said.contains("as recorded"), "{said}");
}

#[test]
fn python_subprocess_and_asyncio_subprocess_run_their_children() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
import asyncio, subprocess
r = subprocess.run(["echo", "hi from child"], capture_output=True, text=True)
print(r.returncode, r.stdout.strip())
p = subprocess.Popen(["sh", "-c", "read x; echo got $x; exit 4"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
out, _ = p.communicate(b"abc\n")
print(out.decode().strip(), p.returncode)
async def main():
    p = await asyncio.create_subprocess_exec("sh", "-c", "echo one; echo two", stdout=asyncio.subprocess.PIPE)
    out, _ = await p.communicate()
    print(out.decode().split(), p.returncode)
asyncio.run(main())
"#;
    let (_, v) = run_json(dir.path(), Path::new("/usr/bin/python3"), &["-c", script]);
    assert_eq!(exit_code(&v), Some(0), "{v}");
    assert_eq!(
        v["stdout"],
        "0 hi from child\ngot abc 4\n['one', 'two'] 0\n"
    );
}

#[test]
fn rust_commands_and_a_tokio_runtime_with_children_run_as_natively() {
    let dir = tempfile::tempdir().unwrap();
    let exe = example("tokio_processes");
    let native = Command::new(&exe).output().unwrap();
    assert!(native.status.success());
    let (_, v) = run_json(dir.path(), &exe, &[]);
    assert_eq!(exit_code(&v), Some(0), "{v}");
    assert_eq!(
        v["stdout"].as_str().unwrap(),
        String::from_utf8_lossy(&native.stdout)
    );
}

#[test]
fn a_process_tree_gives_one_trace_hash_in_20_separate_processes() {
    let dir = tempfile::tempdir().unwrap();
    let script = "seq 1 300 | sort -rn | head -3; ls / | wc -l";
    let first = same_as_natively(dir.path(), script);
    for _ in 1..20 {
        let (_, v) = run_json(dir.path(), Path::new("/bin/sh"), &["-c", script]);
        assert_eq!(v["trace_hash"].as_str().unwrap(), first);
    }
}

const PIPE_DEADLOCK: &str = r#"
#include <unistd.h>
#include <sys/wait.h>
int main(void) {
    int a[2], b[2];
    char c;
    pipe(a); pipe(b);
    pid_t p = fork();
    if (p == 0) {
        close(a[1]); close(b[0]);
        read(a[0], &c, 1);      /* waits for the parent */
        write(b[1], "x", 1);
        _exit(0);
    }
    close(a[0]); close(b[1]);
    read(b[0], &c, 1);          /* waits for the child: neither goes first */
    write(a[1], "y", 1);
    waitpid(p, 0, 0);
    return 0;
}
"#;

#[test]
fn two_processes_reading_each_others_pipes_deadlock_with_the_cycle_named() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_c(dir.path(), "pipe_deadlock", PIPE_DEADLOCK, &[]);
    let (_, v) = run_json(dir.path(), &exe, &[]);
    let o = &v["outcome"];
    assert_eq!(o["kind"], "deadlocked", "{v}");
    let summary = o["summary"].as_str().unwrap();
    assert!(
        summary.contains("cycle of 2 threads: 1 -> 2 -> 1"),
        "{summary}"
    );
    assert!(
        summary.contains("a read of an empty pipe whose other end process 2 (thread 2) holds open"),
        "{summary}"
    );
}

const FILE_RACE: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>
int main(void) {
    pid_t p = fork();
    if (p == 0) {
        FILE *f = fopen("result.txt", "w");
        fprintf(f, "42\n");
        fclose(f);
        _exit(0);
    }
#ifdef FIXED
    waitpid(p, 0, 0);
#endif
    FILE *f = fopen("result.txt", "r");
    int v = 0;
    if (!f || fscanf(f, "%d", &v) != 1 || v != 42) {
        fprintf(stderr, "the child's result is not there yet\n");
        abort();
    }
    fclose(f);
    waitpid(p, 0, 0);
    return 0;
}
"#;

fn check(dir: &Path, exe: &Path, schedules: u32) -> (i32, Value) {
    common::require_kvm();
    let out = cli()
        .current_dir(dir)
        .args(["check", "--json", "--strategy", "random", "--schedules"])
        .arg(schedules.to_string())
        .arg("--target")
        .arg(exe)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap(), v)
}

#[test]
fn check_finds_a_parent_reading_before_its_child_wrote_and_passes_the_fixed_twin() {
    let dir = tempfile::tempdir().unwrap();
    let buggy = build_c(dir.path(), "file_race", FILE_RACE, &[]);
    let fixed = build_c(dir.path(), "file_race_fixed", FILE_RACE, &["-DFIXED"]);
    let (code, v) = check(dir.path(), &buggy, 200);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["first_failure"]["outcome"]["signal"], "SIGABRT", "{v}");
    let (code, v) = check(dir.path(), &fixed, 1000);
    assert_eq!(code, 0, "{v}");
}

#[test]
fn a_child_killed_by_sigpipe_is_reported_to_its_parent_not_as_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let (_, v) = run_json(
        dir.path(),
        Path::new("/bin/sh"),
        &["-c", "yes | head -1; echo ${PIPESTATUS:-done}"],
    );
    assert_eq!(exit_code(&v), Some(0), "{v}");
    assert_eq!(v["stdout"], "y\ndone\n");
}

const DEATH_TEST: &str = r#"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
    pid_t pid = fork();
    if (pid == 0) abort();
    int status;
    if (waitpid(pid, &status, 0) != pid) return 10;
    if (!WIFSIGNALED(status)) return 11;
    printf("child killed by signal %d\n", WTERMSIG(status));
    pid = fork();
    if (pid == 0) { *(volatile int *)0 = 1; _exit(0); }
    waitpid(pid, &status, 0);
    printf("child killed by signal %d\n", WTERMSIG(status));
    return 0;
}
"#;

#[test]
fn a_childs_fault_reaches_its_parents_wait_as_on_linux() {
    // A death test: the children crash on purpose and the parent checks
    // how. Only a crash of the first process is the run's.
    let dir = tempfile::tempdir().unwrap();
    let exe = build_c(dir.path(), "death_test", DEATH_TEST, &[]);
    let native = Command::new(&exe).output().unwrap();
    assert!(native.status.success());
    let (_, v) = run_json(dir.path(), &exe, &[]);
    assert_eq!(exit_code(&v), Some(0), "{v}");
    assert_eq!(
        v["stdout"],
        String::from_utf8_lossy(&native.stdout).as_ref()
    );
    let notes = v["notes"].to_string();
    assert!(
        notes.contains("was killed by SIGABRT") && notes.contains("was killed by SIGSEGV"),
        "{v}"
    );
}

/// The programs of the compatibility list that start processes, each run
/// 20 times in separate processes: one stdout, one trace hash. A soak
/// (several minutes): `cargo nextest run --run-ignored only`.
#[test]
#[ignore = "soak: 20 runs of each program; run with --run-ignored only"]
fn real_programs_give_one_trace_hash_in_20_separate_processes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), "hello\n").unwrap();
    let tokio = example("tokio_processes");
    let sh = |s: &str| ("/bin/sh".to_string(), vec!["-c".to_string(), s.to_string()]);
    let cases: Vec<(String, Vec<String>)> = vec![
        sh("ls / | wc -l"),
        sh("cat f; echo $?"),
        sh("seq 1 20000 | xz -T2 -c | xz -d | tail -1"),
        sh("tar -cf t.tar f && mkdir -p o && tar -xf t.tar -C o && cat o/f"),
        sh("ls -la --time-style=+%s /etc | wc -c"),
        sh("sqlite3 :memory: 'select 1'"),
        (
            "/usr/bin/python3".into(),
            vec![
                "-c".into(),
                "import asyncio, subprocess\nprint(subprocess.run(['echo', 'x'], capture_output=True).stdout)\nasync def m():\n    p = await asyncio.create_subprocess_exec('true')\n    print(await p.wait())\nasyncio.run(m())".into(),
            ],
        ),
        (tokio.to_string_lossy().into_owned(), Vec::new()),
        (
            "/usr/bin/python3".into(),
            vec![
                "-c".into(),
                "import multiprocessing as m\nwith m.Pool(2) as p: print(sum(p.map(abs, range(-50, 50))))".into(),
            ],
        ),
        (
            "/bin/bash".into(),
            vec![
                "-c".into(),
                "x=$(cat <<END\nhere\nEND\n); echo $x; mkdir t && cp f t/ && cp -r t copy && cat copy/f".into(),
            ],
        ),
    ];
    for (exe, args) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (_, first) = run_json(dir.path(), Path::new(&exe), &args);
        assert_eq!(exit_code(&first), Some(0), "{exe} {args:?}: {first}");
        for _ in 1..20 {
            let (_, v) = run_json(dir.path(), Path::new(&exe), &args);
            assert_eq!(v["trace_hash"], first["trace_hash"], "{exe} {args:?}");
            assert_eq!(v["stdout"], first["stdout"], "{exe} {args:?}");
        }
    }
}

// ----- processes as faithful as threads

/// A small C project: several sources, a header-free link, a Makefile.
fn c_project(dir: &Path) {
    for i in 1..=4 {
        std::fs::write(
            dir.join(format!("f{i}.c")),
            format!("int f{i}(void) {{ return {i}; }}\n"),
        )
        .unwrap();
    }
    std::fs::write(
        dir.join("main.c"),
        "#include <stdio.h>\nint f1(void), f2(void), f3(void), f4(void);\nint main(void) { printf(\"%d\\n\", f1() + f2() + f3() + f4()); return 0; }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("Makefile"),
        "OBJS = main.o f1.o f2.o f3.o f4.o\nall: prog\n\t./prog\nprog: $(OBJS)\n\tgcc -o $@ $(OBJS)\n%.o: %.c\n\tgcc -c $< -o $@\n",
    )
    .unwrap();
}

#[test]
fn make_j2_and_j4_build_a_c_project_with_gcc_as_natively_and_the_same_every_time() {
    // make waits for its children's SIGCHLD in pselect6, with SIGCHLD
    // unblocked only by the call's own mask.
    let make = require_tool("make", "apt-get install -y make");
    require_tool("gcc", "apt-get install -y gcc");
    for jobs in ["-j2", "-j4"] {
        let dir = tempfile::tempdir().unwrap();
        c_project(dir.path());
        // Twice in the machine before the native run writes the objects.
        let (_, first) = run_json(dir.path(), &make, &[jobs]);
        let again = same_as_natively_with(dir.path(), &make, &[jobs], &[]);
        assert!(
            again["stdout"].as_str().unwrap().ends_with("./prog\n10\n"),
            "{again}"
        );
        assert_eq!(again["trace_hash"], first["trace_hash"], "{jobs}");
    }
}

const EXECFN: &str = r#"
#include <stdio.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <unistd.h>
int main(void) {
    char exe[4096] = {0}, name[16] = {0};
    readlink("/proc/self/exe", exe, sizeof exe - 1);
    prctl(PR_GET_NAME, name);
    FILE *f = fopen("/proc/self/cmdline", "r");
    char cmd[256] = {0};
    size_t n = fread(cmd, 1, sizeof cmd - 1, f);
    for (size_t i = 0; i < n; i++) if (!cmd[i]) cmd[i] = ' ';
    printf("execfn %s\nexe %s\ncomm %s\ncmdline %s\n", (char *)getauxval(AT_EXECFN), exe, name, cmd);
    return 0;
}
"#;

#[test]
fn execve_gives_the_new_program_its_exe_cmdline_comm_and_execfn() {
    let dir = tempfile::tempdir().unwrap();
    build_c(dir.path(), "execfn", EXECFN, &[]);
    for script in [
        "readlink /proc/self/exe",
        "exec readlink /proc/self/exe",
        "cat /proc/self/comm",
        "cat /proc/self/cmdline | tr '\\0' ' '; echo",
        "./execfn a b",
        "sh -c './execfn x' && exec ./execfn y",
        "cut -d' ' -f2,3 /proc/self/stat",
    ] {
        same_as_natively(dir.path(), script);
    }
}

/// The active Rust toolchain's own directory (not rustup's proxy).
fn rust_sysroot() -> PathBuf {
    let rustc = require_tool("rustc", "a Rust toolchain (rustup)");
    let out = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .unwrap();
    assert!(out.status.success());
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

#[test]
fn rustc_started_from_a_shell_finds_its_libraries_through_origin() {
    // rustc's RUNPATH is $ORIGIN/../lib: the dynamic linker reads
    // /proc/self/exe, which must be rustc's, not the shell's.
    let dir = tempfile::tempdir().unwrap();
    let rustc = rust_sysroot().join("bin/rustc");
    let script = format!("{} --version", rustc.display());
    same_as_natively(dir.path(), &script);
}

#[test]
fn bash_here_documents_and_cp_r_of_a_tree_run_as_natively() {
    // Every here-document asks for its pipe's size (F_GETPIPE_SZ); cp
    // copies with copy_file_range.
    let bash = require_tool("/bin/bash", "apt-get install -y bash");
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src/a/b")).unwrap();
    std::fs::write(dir.path().join("src/a/x"), "one\n").unwrap();
    std::fs::write(dir.path().join("src/a/b/y"), vec![b'y'; 200_000]).unwrap();
    let heredoc = "x=$(cat <<END\nhello\nthere\nEND\n); echo \"$x\"; wc -l <<EOF\na\nb\nEOF";
    same_as_natively_with(dir.path(), &bash, &["-c", heredoc], &[]);
    let copy = "cp -r src dst && ls -R dst && cat dst/a/x && cmp src/a/b/y dst/a/b/y && echo same";
    let v = same_as_natively_with(dir.path(), Path::new("/bin/sh"), &["-c", copy], &[]);
    assert!(
        v["stdout"].as_str().unwrap().ends_with("one\nsame\n"),
        "{v}"
    );
}

#[test]
fn runtimes_that_set_process_options_at_start_up_run_as_natively() {
    // ruby disables transparent huge pages (prctl PR_SET_THP_DISABLE);
    // ffmpeg's libraries ask for the NUMA policy (get_mempolicy).
    let dir = tempfile::tempdir().unwrap();
    let ruby = require_tool("ruby", "apt-get install -y ruby");
    same_as_natively_with(
        dir.path(),
        &ruby,
        &["-e", "puts [1, 2, 3].sum; puts Process.pid > 0"],
        &[],
    );
    let ffmpeg = require_tool("ffmpeg", "apt-get install -y ffmpeg");
    let v = same_as_natively_with(dir.path(), &ffmpeg, &["-hide_banner", "-version"], &[]);
    assert!(
        v["stdout"].as_str().unwrap().starts_with("ffmpeg version"),
        "{v}"
    );
}

const SHARED_MEMORY: &str = r#"
#include <fcntl.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
    /* A /dev/shm object shared by fork: a counter under a process-shared
       semaphore (the buggy twin leaves the semaphore out). */
    int fd = shm_open("/rf-counter", O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) { perror("shm_open"); return 1; }
    ftruncate(fd, 4096);
    struct { sem_t lock; long count; } *s = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    sem_init(&s->lock, 1, 1);
    for (int i = 0; i < 3; i++) if (fork() == 0) {
        for (int j = 0; j < 20; j++) {
#ifdef FIXED
            sem_wait(&s->lock);
#endif
            long c = s->count; usleep(1); s->count = c + 1;
#ifdef FIXED
            sem_post(&s->lock);
#endif
        }
        _exit(0);
    }
    while (wait(0) > 0) {}
    printf("count %ld\n", s->count);
    fflush(stdout);
    if (s->count != 60) abort();
    shm_unlink("/rf-counter");
    /* A named semaphore opened again by name in a child (a mapping of its
       own): it waits for its parent's post. */
    sem_t *ready = sem_open("/rf-ready", O_CREAT | O_EXCL, 0600, 0);
    pid_t p = fork();
    if (p == 0) {
        sem_t *again = sem_open("/rf-ready", 0);
        sem_wait(again);
        printf("child woken by its parent's post\n");
        fflush(stdout);
        _exit(0);
    }
    usleep(1000);
    sem_post(ready);
    waitpid(p, 0, 0);
    sem_unlink("/rf-ready");
    /* A file: what the mapping writes, read() reads, and the other way. */
    int f = open("data.bin", O_RDWR | O_CREAT | O_TRUNC, 0644);
    write(f, "hello world", 11);
    char *m = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    memcpy(m, "HELLO", 5);
    char buf[12] = {0};
    pread(f, buf, 11, 0);
    printf("read sees %s\n", buf);
    pwrite(f, "WORLD", 5, 6);
    printf("the mapping sees %.11s\n", m);
    fflush(stdout);
    if (fork() == 0) { char *c = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0); c[0] = 'J'; _exit(0); }
    wait(0);
    printf("a child's own mapping wrote %.11s\n", m);
    munmap(m, 4096);
    close(f);
    f = open("data.bin", O_RDONLY);
    memset(buf, 0, sizeof buf);
    read(f, buf, 11);
    printf("the file holds %s\n", buf);
    return 0;
}
"#;

#[test]
fn shared_file_mappings_and_posix_semaphores_work_between_processes_as_natively() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_c(dir.path(), "shared_memory", SHARED_MEMORY, &["-DFIXED"]);
    let (_, first) = run_json(dir.path(), &exe, &[]);
    let v = same_as_natively_with(dir.path(), &exe, &[], &[]);
    assert!(
        v["stdout"]
            .as_str()
            .unwrap()
            .ends_with("the file holds JELLO WORLD\n"),
        "{v}"
    );
    assert_eq!(v["trace_hash"], first["trace_hash"]);
    // Each process's view is a function of the schedule: a schedule run
    // again gives the same run.
    for seed in ["1", "2"] {
        let run = || {
            let out = cli()
                .current_dir(dir.path())
                .args([
                    "run",
                    "--json",
                    "--strategy",
                    "random",
                    "--seed",
                    seed,
                    "--target",
                ])
                .arg(&exe)
                .output()
                .unwrap();
            serde_json::from_slice::<Value>(&out.stdout).unwrap()
        };
        let (a, b) = (run(), run());
        assert_eq!(exit_code(&a), Some(0), "{a}");
        assert_eq!(a["trace_hash"], b["trace_hash"], "seed {seed}");
        assert_eq!(a["stdout"], v["stdout"], "seed {seed}");
    }
}

#[test]
fn check_finds_a_lost_update_in_shared_memory_and_passes_the_fixed_twin() {
    let dir = tempfile::tempdir().unwrap();
    let buggy = build_c(dir.path(), "shared_race", SHARED_MEMORY, &[]);
    let fixed = build_c(dir.path(), "shared_race_fixed", SHARED_MEMORY, &["-DFIXED"]);
    let (code, v) = check(dir.path(), &buggy, 50);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["first_failure"]["outcome"]["signal"], "SIGABRT", "{v}");
    let (code, v) = check(dir.path(), &fixed, 50);
    assert_eq!(code, 0, "{v}");
}

#[test]
fn python_process_pools_run_as_natively_and_the_same_every_time() {
    // multiprocessing's locks and queues are POSIX semaphores in shared
    // file mappings (sem_open), waited on across processes.
    let python = require_tool("/usr/bin/python3", "apt-get install -y python3");
    let dir = tempfile::tempdir().unwrap();
    for script in [
        "import multiprocessing as m\nwith m.Pool(2) as p: print(sum(p.map(abs, range(-50, 50))))",
        "import concurrent.futures as f\nwith f.ProcessPoolExecutor(2) as e: print(sorted(e.map(pow, range(8), range(8))))",
    ] {
        let (_, first) = run_json(dir.path(), &python, &["-c", script]);
        let v = same_as_natively_with(dir.path(), &python, &["-c", script], &[]);
        assert_eq!(v["trace_hash"], first["trace_hash"], "{script}");
    }
}

#[test]
fn the_jvm_maps_its_performance_data_file_shared_and_starts_as_natively() {
    let java = require_tool("java", "apt-get install -y default-jre-headless");
    let dir = tempfile::tempdir().unwrap();
    let v = same_as_natively_with(dir.path(), &java, &["-version"], &[]);
    // java -version prints to stderr.
    assert_eq!(v["stderr"], v["native_stderr"], "{v}");
    assert!(v["stderr"].as_str().unwrap().contains("version"), "{v}");
}

#[test]
fn cargo_builds_a_small_project_offline_from_a_shell_as_natively() {
    let sysroot = rust_sysroot();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(
        dir.path().join("Cargo.toml"),
        "[package]\nname = \"small\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("src/main.rs"),
        "fn main() { println!(\"built and ran: {}\", 6 * 7); }\n",
    )
    .unwrap();
    let path = format!("{}:/usr/bin:/bin", sysroot.join("bin").display());
    let v = same_as_natively_with(
        dir.path(),
        Path::new("/bin/sh"),
        &["-c", "cargo build --offline -q && ./target/debug/small"],
        &[("PATH", &path)],
    );
    assert_eq!(v["stdout"], "built and ran: 42\n", "{v}");
}

const WAITS_FOR_EVER: &str = r#"
#include <unistd.h>
int main(void) {
    int p[2];
    char c;
    pipe(p);
    read(p[0], &c, 1);   /* nobody writes */
    return 0;
}
"#;

#[test]
fn reports_name_the_code_of_the_program_a_shell_execs() {
    // The process starts as the shell and execs the program: a wait in a
    // library is named by the program's calling frame, as for a program
    // run directly.
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    build_c_with_debug_info(dir.path(), "waits_for_ever", WAITS_FOR_EVER);
    let out = cli()
        .current_dir(dir.path())
        .args([
            "run",
            "--target",
            "/bin/sh",
            "--",
            "-c",
            "exec ./waits_for_ever",
        ])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("deadlocked"), "{said}");
    assert!(
        said.contains("at read, called from main (waits_for_ever.c:7)"),
        "{said}"
    );
}

/// Compiles `source` with debug information into `dir/name`.
fn build_c_with_debug_info(dir: &Path, name: &str, source: &str) -> PathBuf {
    build_c(dir, name, source, &["-g"])
}
