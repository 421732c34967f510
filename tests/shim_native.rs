//! Runs real programs natively (not in the machine) with the guest's pthread
//! shim preloaded, and checks that the shim changes nothing a program can see:
//! the same output and exit status as without it, errno included. Natively
//! every hint fails with `ENOSYS`; one test watches them under strace.
//!
//! These need gcc and g++ on PATH (rustc and strace for two tests, which
//! fail saying what to install when they are missing), but no KVM.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// The shim exactly as the library embeds it (`rewind_fuzz::arch::shim::SHIM_SO`).
const SHIM_SO: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/librewind-shim.so"));

/// The hint's system-call number and the operations the tests look for
/// (`rewind_fuzz::arch::abi`).
const HINT_SYSCALL: u64 = 0x7277;
const OP_MUTEX_LOCK: u64 = 1;
const OP_MUTEX_TRYLOCK: u64 = 2;
const OP_MUTEX_UNLOCK: u64 = 4;
const OP_COND_WAIT: u64 = 12;
const OP_THREAD_CREATE: u64 = 24;
const OP_THREAD_JOIN: u64 = 25;
const OP_TRY_RESULT: u64 = 27;

/// How long one program may run before the test fails.
const TIMEOUT: Duration = Duration::from_secs(120);

const EBUSY: u64 = 16;

/// A temporary directory holding the shim and the programs built for a test.
struct Sandbox {
    dir: TempDir,
    shim: PathBuf,
}

#[derive(Clone, Copy)]
enum Lang {
    C,
    Cpp,
}

/// What a native run printed and how it ended.
#[derive(Debug)]
struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Sandbox {
    fn new() -> Sandbox {
        let dir = tempfile::Builder::new()
            .prefix("rewind-shim-native-")
            .tempdir()
            .expect("a temporary directory");
        let shim = dir.path().join("librewind-shim.so");
        fs::write(&shim, SHIM_SO).expect("writing the shim");
        Sandbox { dir, shim }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Compiles `source` into an executable named `name`.
    fn build(&self, name: &str, lang: Lang, source: &str, extra: &[&str]) -> PathBuf {
        let (compiler, file, std) = match lang {
            Lang::C => ("gcc", format!("{name}.c"), "-std=gnu11"),
            Lang::Cpp => ("g++", format!("{name}.cpp"), "-std=c++17"),
        };
        let src = self.path(&file);
        fs::write(&src, source).expect("writing the source");
        let exe = self.path(name);
        let mut cmd = Command::new(compiler);
        cmd.args([std, "-O2", "-pthread", "-Wall", "-o"])
            .arg(&exe)
            .arg(&src)
            .args(extra);
        compile(cmd, compiler);
        exe
    }

    /// Runs `exe` with `preload` as `LD_PRELOAD` (nothing preloaded if empty).
    fn run(&self, exe: &Path, preload: &[&Path], envs: &[(&str, &str)]) -> Run {
        let mut cmd = Command::new(exe);
        cmd.current_dir(self.dir.path()).env_remove("LD_PRELOAD");
        if !preload.is_empty() {
            let list: Vec<String> = preload.iter().map(|p| p.display().to_string()).collect();
            cmd.env("LD_PRELOAD", list.join(":"));
        }
        for (key, value) in envs {
            cmd.env(key, value);
        }
        run_with_timeout(cmd, &self.path("run"))
    }

    /// Runs `exe` without and with the shim, checks that both runs succeed
    /// with the same output, and returns that output.
    fn same_with_and_without_shim(&self, exe: &Path) -> String {
        let native = self.run(exe, &[], &[]);
        let shimmed = self.run(exe, &[&self.shim], &[]);
        assert!(
            native.status.success(),
            "{} failed natively: {native:?}",
            exe.display()
        );
        assert_shim_loaded(&shimmed);
        assert_eq!(
            shimmed.status, native.status,
            "exit status differs with the shim"
        );
        assert_eq!(
            shimmed.stdout, native.stdout,
            "output differs with the shim"
        );
        assert_eq!(
            shimmed.stderr, native.stderr,
            "error output differs with the shim"
        );
        native.stdout
    }
}

fn compile(mut cmd: Command, what: &str) {
    let out = match cmd.output() {
        Ok(out) => out,
        Err(e) => panic!("cannot run {what} (is it installed?): {e}"),
    };
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `cmd` with stdout and stderr in files next to `stem`, killing it
/// after [`TIMEOUT`].
fn run_with_timeout(mut cmd: Command, stem: &Path) -> Run {
    let out_path = stem.with_extension("stdout");
    let err_path = stem.with_extension("stderr");
    let stdout = fs::File::create(&out_path).expect("creating the stdout file");
    let stderr = fs::File::create(&err_path).expect("creating the stderr file");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for the program") {
            break status;
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} did not finish within {TIMEOUT:?}");
        }
        thread::sleep(Duration::from_millis(5));
    };
    Run {
        status,
        stdout: fs::read_to_string(&out_path).expect("reading stdout"),
        stderr: fs::read_to_string(&err_path).expect("reading stderr"),
    }
}

/// The dynamic loader says so on stderr when it cannot preload a library.
fn assert_shim_loaded(run: &Run) {
    assert!(
        !run.stderr.contains("cannot be preloaded") && !run.stderr.contains("rewind-shim:"),
        "the shim did not load or failed: {}",
        run.stderr
    );
}

#[test]
fn a_mutex_counter_with_eight_threads_counts_the_same_with_the_shim() {
    let sb = Sandbox::new();
    let exe = sb.build(
        "counter",
        Lang::C,
        r#"
#include <pthread.h>
#include <stdio.h>
#define THREADS 8
#define ROUNDS 20000
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long counter;
static void *work(void *arg) {
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        pthread_mutex_lock(&lock);
        counter++;
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}
int main(void) {
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, work, NULL) != 0) return 2;
    for (int i = 0; i < THREADS; i++)
        if (pthread_join(t[i], NULL) != 0) return 3;
    printf("counter %ld\n", counter);
    return counter == (long)THREADS * ROUNDS ? 0 : 1;
}
"#,
        &[],
    );
    assert_eq!(sb.same_with_and_without_shim(&exe), "counter 160000\n");
}

#[test]
fn a_condvar_producer_and_consumer_hand_over_every_item() {
    let sb = Sandbox::new();
    let exe = sb.build(
        "prodcons",
        Lang::C,
        r#"
#include <pthread.h>
#include <stdio.h>
#define CAP 4
#define ITEMS 3000
#define PRODUCERS 2
#define CONSUMERS 3
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER;
static int buf[CAP], head, count, done;
static long sums[CONSUMERS], taken[CONSUMERS];
static void *producer(void *arg) {
    (void)arg;
    for (int i = 1; i <= ITEMS; i++) {
        pthread_mutex_lock(&m);
        while (count == CAP) pthread_cond_wait(&not_full, &m);
        buf[(head + count) % CAP] = i;
        count++;
        pthread_cond_signal(&not_empty);
        pthread_mutex_unlock(&m);
    }
    return NULL;
}
static void *consumer(void *arg) {
    long id = (long)arg;
    for (;;) {
        pthread_mutex_lock(&m);
        while (count == 0 && !done) pthread_cond_wait(&not_empty, &m);
        if (count == 0) { pthread_mutex_unlock(&m); break; }
        int v = buf[head];
        head = (head + 1) % CAP;
        count--;
        pthread_cond_signal(&not_full);
        pthread_mutex_unlock(&m);
        sums[id] += v;
        taken[id]++;
    }
    return NULL;
}
int main(void) {
    pthread_t p[PRODUCERS], c[CONSUMERS];
    for (long i = 0; i < CONSUMERS; i++) pthread_create(&c[i], NULL, consumer, (void *)i);
    for (long i = 0; i < PRODUCERS; i++) pthread_create(&p[i], NULL, producer, NULL);
    for (int i = 0; i < PRODUCERS; i++) pthread_join(p[i], NULL);
    pthread_mutex_lock(&m);
    done = 1;
    pthread_cond_broadcast(&not_empty);
    pthread_mutex_unlock(&m);
    long sum = 0, n = 0;
    for (int i = 0; i < CONSUMERS; i++) { pthread_join(c[i], NULL); sum += sums[i]; n += taken[i]; }
    printf("items %ld sum %ld\n", n, sum);
    return n == (long)PRODUCERS * ITEMS && sum == (long)PRODUCERS * ITEMS * (ITEMS + 1) / 2 ? 0 : 1;
}
"#,
        &[],
    );
    assert_eq!(
        sb.same_with_and_without_shim(&exe),
        "items 6000 sum 9003000\n"
    );
}

#[test]
fn try_and_timed_operations_fail_with_the_same_errors_with_the_shim() {
    let sb = Sandbox::new();
    let exe = sb.build(
        "tries",
        Lang::C,
        r#"
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <threads.h>
#include <time.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER, m2 = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_spinlock_t sp;
static sem_t sem;
static mtx_t cm;
static cnd_t cc;
static struct timespec soon(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    t.tv_nsec += 20 * 1000 * 1000;
    if (t.tv_nsec >= 1000000000) { t.tv_sec++; t.tv_nsec -= 1000000000; }
    return t;
}
static const char *name(int r) {
    switch (r) {
    case 0: return "ok";
    case EBUSY: return "EBUSY";
    case ETIMEDOUT: return "ETIMEDOUT";
    case EAGAIN: return "EAGAIN";
    case EDEADLK: return "EDEADLK";
    default: return "other";
    }
}
static const char *c11(int r) {
    switch (r) {
    case thrd_success: return "thrd_success";
    case thrd_busy: return "thrd_busy";
    case thrd_timedout: return "thrd_timedout";
    default: return "other";
    }
}
#define SHOW(call) printf("%-22s %s\n", #call, name(call))
#define SHOW_SEM(call) do { errno = 0; int r_ = (call); printf("%-22s %d %s\n", #call, r_, name(errno)); } while (0)
static void *contender(void *arg) {
    (void)arg;
    struct timespec rt, mono;
    SHOW(pthread_mutex_trylock(&m));
    rt = soon(CLOCK_REALTIME);
    SHOW(pthread_mutex_timedlock(&m, &rt));
    mono = soon(CLOCK_MONOTONIC);
    SHOW(pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &mono));
    SHOW(pthread_rwlock_tryrdlock(&rw));
    SHOW(pthread_rwlock_trywrlock(&rw));
    rt = soon(CLOCK_REALTIME);
    SHOW(pthread_rwlock_timedrdlock(&rw, &rt));
    rt = soon(CLOCK_REALTIME);
    SHOW(pthread_rwlock_timedwrlock(&rw, &rt));
    mono = soon(CLOCK_MONOTONIC);
    SHOW(pthread_rwlock_clockrdlock(&rw, CLOCK_MONOTONIC, &mono));
    mono = soon(CLOCK_MONOTONIC);
    SHOW(pthread_rwlock_clockwrlock(&rw, CLOCK_MONOTONIC, &mono));
    SHOW(pthread_spin_trylock(&sp));
    SHOW_SEM(sem_trywait(&sem));
    rt = soon(CLOCK_REALTIME);
    SHOW_SEM(sem_timedwait(&sem, &rt));
    mono = soon(CLOCK_MONOTONIC);
    SHOW_SEM(sem_clockwait(&sem, CLOCK_MONOTONIC, &mono));
    printf("%-22s %s\n", "mtx_trylock", c11(mtx_trylock(&cm)));
    rt = soon(CLOCK_REALTIME);
    printf("%-22s %s\n", "mtx_timedlock", c11(mtx_timedlock(&cm, &rt)));
    return NULL;
}
int main(void) {
    pthread_spin_init(&sp, PTHREAD_PROCESS_PRIVATE);
    sem_init(&sem, 0, 0);
    mtx_init(&cm, mtx_timed);
    cnd_init(&cc);
    pthread_mutex_lock(&m);
    pthread_rwlock_wrlock(&rw);
    pthread_spin_lock(&sp);
    mtx_lock(&cm);
    pthread_t t;
    pthread_create(&t, NULL, contender, NULL);
    pthread_join(t, NULL);
    pthread_mutex_unlock(&m);
    pthread_rwlock_unlock(&rw);
    pthread_spin_unlock(&sp);
    mtx_unlock(&cm);

    struct timespec rt, mono;
    pthread_mutex_lock(&m2);
    rt = soon(CLOCK_REALTIME);
    SHOW(pthread_cond_timedwait(&cv, &m2, &rt));
    mono = soon(CLOCK_MONOTONIC);
    SHOW(pthread_cond_clockwait(&cv, &m2, CLOCK_MONOTONIC, &mono));
    pthread_mutex_unlock(&m2);
    mtx_lock(&cm);
    rt = soon(CLOCK_REALTIME);
    printf("%-22s %s\n", "cnd_timedwait", c11(cnd_timedwait(&cc, &cm, &rt)));
    mtx_unlock(&cm);

    /* And the same operations succeeding. */
    SHOW(pthread_mutex_trylock(&m));
    SHOW(pthread_mutex_unlock(&m));
    rt = soon(CLOCK_REALTIME);
    SHOW(pthread_mutex_timedlock(&m, &rt));
    SHOW(pthread_mutex_unlock(&m));
    SHOW(pthread_rwlock_tryrdlock(&rw));
    SHOW(pthread_rwlock_unlock(&rw));
    SHOW(pthread_rwlock_trywrlock(&rw));
    SHOW(pthread_rwlock_unlock(&rw));
    SHOW(pthread_spin_trylock(&sp));
    SHOW(pthread_spin_unlock(&sp));
    sem_post(&sem);
    SHOW_SEM(sem_trywait(&sem));
    printf("%-22s %s\n", "mtx_trylock", c11(mtx_trylock(&cm)));
    printf("%-22s %s\n", "mtx_unlock", c11(mtx_unlock(&cm)));
    return 0;
}
"#,
        &[],
    );
    let out = sb.same_with_and_without_shim(&exe);
    let expected = [
        ("pthread_mutex_trylock(&m)", "EBUSY"),
        ("pthread_mutex_timedlock(&m, &rt)", "ETIMEDOUT"),
        (
            "pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &mono)",
            "ETIMEDOUT",
        ),
        ("pthread_rwlock_tryrdlock(&rw)", "EBUSY"),
        ("pthread_rwlock_timedwrlock(&rw, &rt)", "ETIMEDOUT"),
        ("pthread_spin_trylock(&sp)", "EBUSY"),
        ("sem_trywait(&sem)", "-1 EAGAIN"),
        ("sem_timedwait(&sem, &rt)", "-1 ETIMEDOUT"),
        ("mtx_trylock", "thrd_busy"),
        ("mtx_timedlock", "thrd_timedout"),
        ("pthread_cond_timedwait(&cv, &m2, &rt)", "ETIMEDOUT"),
        (
            "pthread_cond_clockwait(&cv, &m2, CLOCK_MONOTONIC, &mono)",
            "ETIMEDOUT",
        ),
        ("cnd_timedwait", "thrd_timedout"),
        ("sem_trywait(&sem)", "0 ok"),
        ("mtx_trylock", "thrd_success"),
    ];
    for (call, result) in expected {
        assert!(
            out.lines()
                .any(|line| line.starts_with(call) && line.ends_with(result)),
            "no line `{call} ... {result}` in:\n{out}"
        );
    }
}

#[test]
fn condvar_waits_reach_the_current_glibc_version_not_the_old_compat_one() {
    // glibc exports pthread_cond_timedwait@@GLIBC_2.3.2 and the old
    // pthread_cond_timedwait@GLIBC_2.2.5, which ignores the condvar's clock
    // attribute: given a CLOCK_MONOTONIC deadline it would take it for a
    // CLOCK_REALTIME one long past and return at once.
    let sb = Sandbox::new();
    let exe = sb.build(
        "cond_clock",
        Lang::C,
        r#"
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
int main(void) {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_t c;
    pthread_cond_init(&c, &attr);
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    struct timespec start, end, deadline;
    clock_gettime(CLOCK_MONOTONIC, &start);
    deadline = start;
    deadline.tv_nsec += 100 * 1000 * 1000;
    if (deadline.tv_nsec >= 1000000000) { deadline.tv_sec++; deadline.tv_nsec -= 1000000000; }
    pthread_mutex_lock(&m);
    int r = pthread_cond_timedwait(&c, &m, &deadline);
    pthread_mutex_unlock(&m);
    clock_gettime(CLOCK_MONOTONIC, &end);
    long ms = (end.tv_sec - start.tv_sec) * 1000 + (end.tv_nsec - start.tv_nsec) / 1000000;
    printf("%s, waited until the monotonic deadline: %s\n",
           r == ETIMEDOUT ? "ETIMEDOUT" : "other", ms >= 95 ? "yes" : "no");
    return 0;
}
"#,
        &[],
    );
    assert_eq!(
        sb.same_with_and_without_shim(&exe),
        "ETIMEDOUT, waited until the monotonic deadline: yes\n"
    );
}

/// Threads blocked in a wrapped pthread_cond_wait and sem_wait; cancelling
/// them unwinds through the wrapper's frame.
const CANCEL_PROGRAM: &str = r#"
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <unistd.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static sem_t s;
static int cleaned, waiting;
static void cleanup(void *arg) {
    __atomic_fetch_add(&cleaned, 1, __ATOMIC_SEQ_CST);
    if (arg) pthread_mutex_unlock((pthread_mutex_t *)arg);
}
static void *in_cond(void *arg) {
    (void)arg;
    pthread_mutex_lock(&m);
    pthread_cleanup_push(cleanup, &m);
    waiting = 1;
    for (;;) pthread_cond_wait(&c, &m);
    pthread_cleanup_pop(1);
    return NULL;
}
static void *in_sem(void *arg) {
    (void)arg;
    pthread_cleanup_push(cleanup, NULL);
    for (;;) sem_wait(&s);
    pthread_cleanup_pop(1);
    return NULL;
}
int main(void) {
    sem_init(&s, 0, 0);
    pthread_t a, b;
    pthread_create(&a, NULL, in_cond, NULL);
    pthread_create(&b, NULL, in_sem, NULL);
    for (;;) {
        pthread_mutex_lock(&m);
        int w = waiting;
        pthread_mutex_unlock(&m);
        if (w) break;
        usleep(1000);
    }
    usleep(20000);
    pthread_cancel(a);
    pthread_cancel(b);
    void *ra, *rb;
    pthread_join(a, &ra);
    pthread_join(b, &rb);
    printf("cancelled %d %d cleaned up %d\n", ra == PTHREAD_CANCELED, rb == PTHREAD_CANCELED, cleaned);
    pthread_mutex_lock(&m);
    pthread_mutex_unlock(&m);
    puts("mutex free");
    return 0;
}
"#;

#[test]
fn cancelling_a_thread_inside_a_wrapped_wait_unwinds_through_the_shim() {
    let sb = Sandbox::new();
    let c = sb.build("cancel", Lang::C, CANCEL_PROGRAM, &[]);
    // In C++ cancellation is a forced unwind running destructors and catch
    // handlers, frame by frame, through the wrapper.
    let cpp = sb.build("cancel_cpp", Lang::Cpp, CANCEL_PROGRAM, &[]);
    for exe in [c, cpp] {
        assert_eq!(
            sb.same_with_and_without_shim(&exe),
            "cancelled 1 1 cleaned up 2\nmutex free\n"
        );
    }
}

#[test]
fn errno_is_preserved_across_every_wrapped_call() {
    let sb = Sandbox::new();
    let exe = sb.build(
        "errno",
        Lang::C,
        r#"
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_spinlock_t sp;
static pthread_barrier_t bar;
static sem_t sem;
static int failures;
#define KEEP(call) do { errno = EDOM; (void)(call); \
    if (errno != EDOM) { printf("%s changed errno to %d\n", #call, errno); failures++; } } while (0)
static void *nothing(void *arg) { return arg; }
int main(void) {
    pthread_spin_init(&sp, PTHREAD_PROCESS_PRIVATE);
    pthread_barrier_init(&bar, NULL, 1);
    sem_init(&sem, 0, 0);
    KEEP(pthread_mutex_lock(&m));
    KEEP(pthread_mutex_trylock(&m));
    KEEP(pthread_mutex_unlock(&m));
    KEEP(pthread_rwlock_rdlock(&rw));
    KEEP(pthread_rwlock_unlock(&rw));
    KEEP(pthread_rwlock_wrlock(&rw));
    KEEP(pthread_rwlock_unlock(&rw));
    KEEP(pthread_cond_signal(&cv));
    KEEP(pthread_cond_broadcast(&cv));
    KEEP(pthread_spin_lock(&sp));
    KEEP(pthread_spin_unlock(&sp));
    KEEP(pthread_barrier_wait(&bar));
    KEEP(sem_post(&sem));
    KEEP(sem_wait(&sem));
    pthread_t t;
    KEEP(pthread_create(&t, NULL, nothing, NULL));
    KEEP(pthread_join(t, NULL));

    /* A failing semaphore operation sets errno, and the wrapper's second
     * hint must leave it set. */
    errno = 0;
    int r = sem_trywait(&sem);
    int e = errno;
    printf("sem_trywait %d errno %s\n", r, e == EAGAIN ? "EAGAIN" : "wrong");
    KEEP(pthread_mutex_lock(&m));
    KEEP(pthread_mutex_unlock(&m));
    errno = 0;
    pthread_mutex_lock(&m);
    r = sem_trywait(&sem);
    pthread_mutex_unlock(&m);
    printf("errno after trywait and unlock %s\n", errno == EAGAIN ? "EAGAIN" : "wrong");
    printf("failures %d\n", failures);
    return failures;
}
"#,
        &[],
    );
    assert_eq!(
        sb.same_with_and_without_shim(&exe),
        "sem_trywait -1 errno EAGAIN\nerrno after trywait and unlock EAGAIN\nfailures 0\n"
    );
}

#[test]
fn rwlock_readers_never_see_a_half_done_write_with_the_shim() {
    let sb = Sandbox::new();
    let exe = sb.build(
        "rwlock",
        Lang::C,
        r#"
#include <pthread.h>
#include <stdio.h>
#define WRITERS 3
#define READERS 5
#define ROUNDS 5000
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static volatile long a, b;
static long torn[READERS];
static void *writer(void *arg) {
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        pthread_rwlock_wrlock(&rw);
        a++;
        b++;
        pthread_rwlock_unlock(&rw);
    }
    return NULL;
}
static void *reader(void *arg) {
    long id = (long)arg;
    for (int i = 0; i < ROUNDS; i++) {
        pthread_rwlock_rdlock(&rw);
        if (a != b) torn[id]++;
        pthread_rwlock_unlock(&rw);
    }
    return NULL;
}
int main(void) {
    pthread_t w[WRITERS], r[READERS];
    for (long i = 0; i < READERS; i++) pthread_create(&r[i], NULL, reader, (void *)i);
    for (long i = 0; i < WRITERS; i++) pthread_create(&w[i], NULL, writer, NULL);
    long bad = 0;
    for (int i = 0; i < WRITERS; i++) pthread_join(w[i], NULL);
    for (int i = 0; i < READERS; i++) { pthread_join(r[i], NULL); bad += torn[i]; }
    printf("a %ld b %ld torn %ld\n", a, b, bad);
    return bad == 0 ? 0 : 1;
}
"#,
        &[],
    );
    assert_eq!(
        sb.same_with_and_without_shim(&exe),
        "a 15000 b 15000 torn 0\n"
    );
}

#[test]
fn semaphores_pass_tokens_between_threads_with_the_shim() {
    let sb = Sandbox::new();
    let exe = sb.build(
        "sems",
        Lang::C,
        r#"
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#define ROUNDS 2000
#define WORKERS 6
static sem_t ping, pong, slots;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int inside, most;
static long pings;
static void *ponger(void *arg) {
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        sem_wait(&ping);
        pings++;
        sem_post(&pong);
    }
    return NULL;
}
static void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < 200; i++) {
        sem_wait(&slots);
        pthread_mutex_lock(&m);
        if (++inside > most) most = inside;
        pthread_mutex_unlock(&m);
        pthread_mutex_lock(&m);
        inside--;
        pthread_mutex_unlock(&m);
        sem_post(&slots);
    }
    return NULL;
}
int main(void) {
    sem_init(&ping, 0, 0);
    sem_init(&pong, 0, 0);
    sem_init(&slots, 0, 2);
    pthread_t t, w[WORKERS];
    pthread_create(&t, NULL, ponger, NULL);
    for (int i = 0; i < ROUNDS; i++) {
        sem_post(&ping);
        sem_wait(&pong);
    }
    pthread_join(t, NULL);
    for (int i = 0; i < WORKERS; i++) pthread_create(&w[i], NULL, worker, NULL);
    for (int i = 0; i < WORKERS; i++) pthread_join(w[i], NULL);
    int v;
    sem_getvalue(&slots, &v);
    printf("pings %ld at most two inside %s slots %d\n", pings, most <= 2 ? "yes" : "no", v);
    return 0;
}
"#,
        &[],
    );
    assert_eq!(
        sb.same_with_and_without_shim(&exe),
        "pings 2000 at most two inside yes slots 2\n"
    );
}

#[test]
fn a_barrier_elects_one_serial_thread_per_round_with_the_shim() {
    let sb = Sandbox::new();
    let exe = sb.build(
        "barrier",
        Lang::C,
        r#"
#include <pthread.h>
#include <stdio.h>
#define THREADS 4
#define ROUNDS 50
static pthread_barrier_t bar;
static int serial[THREADS], arrived[ROUNDS];
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int mismatches;
static void *run(void *arg) {
    long id = (long)arg;
    for (int r = 0; r < ROUNDS; r++) {
        pthread_mutex_lock(&m);
        arrived[r]++;
        pthread_mutex_unlock(&m);
        int rc = pthread_barrier_wait(&bar);
        if (rc == PTHREAD_BARRIER_SERIAL_THREAD) serial[id]++;
        else if (rc != 0) return (void *)1;
        pthread_mutex_lock(&m);
        if (arrived[r] != THREADS) mismatches++;
        pthread_mutex_unlock(&m);
        pthread_barrier_wait(&bar);
    }
    return NULL;
}
int main(void) {
    pthread_barrier_init(&bar, NULL, THREADS);
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, run, (void *)i);
    int serials = 0;
    for (int i = 0; i < THREADS; i++) {
        void *ret;
        pthread_join(t[i], &ret);
        if (ret != NULL) return 2;
        serials += serial[i];
    }
    printf("serial threads %d early leavers %d\n", serials, mismatches);
    return 0;
}
"#,
        &[],
    );
    assert_eq!(
        sb.same_with_and_without_shim(&exe),
        "serial threads 50 early leavers 0\n"
    );
}

#[test]
fn spinlocks_protect_a_counter_with_the_shim() {
    let sb = Sandbox::new();
    let exe = sb.build(
        "spin",
        Lang::C,
        r#"
#include <pthread.h>
#include <stdio.h>
#define THREADS 4
#define ROUNDS 20000
static pthread_spinlock_t sp;
static long counter;
static void *work(void *arg) {
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        if (pthread_spin_lock(&sp) != 0) return (void *)1;
        counter++;
        if (pthread_spin_unlock(&sp) != 0) return (void *)1;
    }
    return NULL;
}
int main(void) {
    pthread_spin_init(&sp, PTHREAD_PROCESS_PRIVATE);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, work, NULL);
    for (int i = 0; i < THREADS; i++) {
        void *ret;
        pthread_join(t[i], &ret);
        if (ret != NULL) return 2;
    }
    printf("counter %ld\n", counter);
    return 0;
}
"#,
        &[],
    );
    assert_eq!(sb.same_with_and_without_shim(&exe), "counter 80000\n");
}

#[test]
fn pthread_exit_hands_its_value_to_pthread_join_with_the_shim() {
    let sb = Sandbox::new();
    let exe = sb.build(
        "exit",
        Lang::C,
        r#"
#include <pthread.h>
#include <stdio.h>
static void *leave(void *arg) {
    pthread_exit((void *)((long)arg * 7));
    return NULL;
}
int main(void) {
    pthread_t t[3];
    for (long i = 0; i < 3; i++) pthread_create(&t[i], NULL, leave, (void *)(i + 1));
    for (int i = 0; i < 3; i++) {
        void *ret;
        int rc = pthread_join(t[i], &ret);
        printf("thread %d joined %d with %ld\n", i, rc, (long)ret);
    }
    /* pthread_exit in the main thread ends the process with status 0 once
     * the last thread is gone. */
    pthread_exit(NULL);
}
"#,
        &[],
    );
    assert_eq!(
        sb.same_with_and_without_shim(&exe),
        "thread 0 joined 0 with 7\nthread 1 joined 0 with 14\nthread 2 joined 0 with 21\n"
    );
}

#[test]
fn c11_threads_mutexes_and_condition_variables_behave_the_same_with_the_shim() {
    let sb = Sandbox::new();
    let exe = sb.build(
        "c11",
        Lang::C,
        r#"
#include <stdio.h>
#include <threads.h>
#define THREADS 4
#define ROUNDS 10000
static mtx_t m;
static cnd_t c;
static long counter;
static int finished;
static int work(void *arg) {
    for (int i = 0; i < ROUNDS; i++) {
        mtx_lock(&m);
        counter++;
        mtx_unlock(&m);
    }
    mtx_lock(&m);
    finished++;
    cnd_broadcast(&c);
    mtx_unlock(&m);
    if ((long)arg == 0) thrd_exit(42);
    return 7;
}
int main(void) {
    mtx_init(&m, mtx_plain);
    cnd_init(&c);
    thrd_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        if (thrd_create(&t[i], work, (void *)i) != thrd_success) return 2;
    mtx_lock(&m);
    while (finished < THREADS) cnd_wait(&c, &m);
    mtx_unlock(&m);
    cnd_signal(&c);
    int sum = 0;
    for (int i = 0; i < THREADS; i++) {
        int ret;
        thrd_join(t[i], &ret);
        sum += ret;
    }
    printf("counter %ld results %d\n", counter, sum);
    return 0;
}
"#,
        &[],
    );
    assert_eq!(
        sb.same_with_and_without_shim(&exe),
        "counter 40000 results 63\n"
    );
}

#[test]
fn cpp_threads_mutexes_and_condition_variables_behave_the_same_with_the_shim() {
    let sb = Sandbox::new();
    let exe = sb.build(
        "cpp",
        Lang::Cpp,
        r#"
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <queue>
#include <shared_mutex>
#include <thread>
#include <vector>
using namespace std::chrono_literals;
int main() {
    std::mutex m;
    std::condition_variable cv;
    std::queue<int> q;
    bool done = false;
    long sum = 0;
    std::thread consumer([&] {
        std::unique_lock<std::mutex> l(m);
        for (;;) {
            cv.wait(l, [&] { return !q.empty() || done; });
            while (!q.empty()) { sum += q.front(); q.pop(); }
            if (done) break;
        }
    });
    std::vector<std::thread> producers;
    for (int p = 0; p < 4; p++)
        producers.emplace_back([&] {
            for (int i = 1; i <= 1000; i++) {
                { std::lock_guard<std::mutex> g(m); q.push(i); }
                cv.notify_one();
            }
        });
    for (auto &t : producers) t.join();
    { std::lock_guard<std::mutex> g(m); done = true; }
    cv.notify_all();
    consumer.join();
    std::printf("sum %ld\n", sum);

    std::shared_mutex sm;
    long a = 0, b = 0, torn = 0;
    std::vector<std::thread> rw;
    for (int i = 0; i < 3; i++) {
        rw.emplace_back([&] { for (int k = 0; k < 2000; k++) { std::unique_lock<std::shared_mutex> g(sm); a++; b++; } });
        rw.emplace_back([&] { for (int k = 0; k < 2000; k++) { std::shared_lock<std::shared_mutex> g(sm); if (a != b) { std::lock_guard<std::mutex> t(m); torn++; } } });
    }
    for (auto &t : rw) t.join();
    std::printf("a %ld b %ld torn %ld\n", a, b, torn);

    std::timed_mutex tm;
    tm.lock();
    std::thread other([&] {
        std::printf("try_lock_for %d\n", (int)tm.try_lock_for(20ms));
        std::printf("try_lock %d\n", (int)tm.try_lock());
    });
    other.join();
    tm.unlock();
    std::unique_lock<std::mutex> l(m);
    std::printf("wait_for %d\n", (int)cv.wait_for(l, 20ms, [] { return false; }));
    return 0;
}
"#,
        &[],
    );
    assert_eq!(
        sb.same_with_and_without_shim(&exe),
        "sum 2002000\na 6000 b 6000 torn 0\ntry_lock_for 0\ntry_lock 0\nwait_for 0\n"
    );
}

#[test]
fn a_rust_program_with_threads_and_locks_behaves_the_same_with_the_shim() {
    let sb = Sandbox::new();
    let src = sb.path("rusty.rs");
    fs::write(
        &src,
        r#"
use std::sync::{mpsc, Arc, Barrier, Condvar, Mutex, RwLock};
use std::thread;
fn main() {
    let counter = Arc::new(Mutex::new(0u64));
    let pair = Arc::new((Mutex::new(0u32), Condvar::new()));
    let table = Arc::new(RwLock::new(vec![0u64; 4]));
    let barrier = Arc::new(Barrier::new(4));
    let (tx, rx) = mpsc::channel();
    let handles: Vec<_> = (0..4u64)
        .map(|id| {
            let (counter, pair, table, barrier, tx) =
                (counter.clone(), pair.clone(), table.clone(), barrier.clone(), tx.clone());
            thread::spawn(move || {
                for _ in 0..10_000 {
                    *counter.lock().unwrap() += 1;
                }
                table.write().unwrap()[id as usize] = id * 10;
                barrier.wait();
                let seen: u64 = table.read().unwrap().iter().sum();
                tx.send(seen).unwrap();
                let (lock, cv) = &*pair;
                *lock.lock().unwrap() += 1;
                cv.notify_all();
                id
            })
        })
        .collect();
    drop(tx);
    let (lock, cv) = &*pair;
    let mut done = lock.lock().unwrap();
    while *done < 4 {
        done = cv.wait(done).unwrap();
    }
    drop(done);
    let ids: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let seen: Vec<u64> = rx.iter().collect();
    println!("counter {} ids {} seen {:?}", *counter.lock().unwrap(), ids, seen);
}
"#,
    )
    .expect("writing the Rust source");
    let exe = sb.path("rusty");
    let rustc = common::require_tool("rustc", "a Rust toolchain (rustup)");
    let out = Command::new(rustc)
        .args(["--edition", "2021", "-O", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "rustc failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        sb.same_with_and_without_shim(&exe),
        "counter 40000 ids 6 seen [60, 60, 60, 60]\n"
    );
}

/// `owner` names the object that defines the address a function name
/// resolves to in the program.
const OWNER_PROGRAM: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <string.h>
#include <threads.h>
static const char *owner(void *fn) {
    Dl_info info;
    if (!dladdr(fn, &info) || info.dli_fname == NULL) return "?";
    const char *slash = strrchr(info.dli_fname, '/');
    return slash ? slash + 1 : info.dli_fname;
}
#define SHOW(fn) printf("%s %s\n", #fn, owner((void *)fn))
int main(void) {
    SHOW(pthread_mutex_lock);
    SHOW(pthread_mutex_unlock);
    SHOW(pthread_cond_wait);
    SHOW(pthread_cond_timedwait);
    SHOW(pthread_cond_signal);
    SHOW(pthread_cond_broadcast);
    SHOW(pthread_rwlock_rdlock);
    SHOW(sem_wait);
    SHOW(pthread_barrier_wait);
    SHOW(pthread_spin_lock);
    SHOW(pthread_create);
    SHOW(pthread_join);
    SHOW(pthread_exit);
    SHOW(mtx_lock);
    SHOW(cnd_wait);
    return 0;
}
"#;

#[test]
fn the_shim_interposes_the_pthread_functions_including_the_versioned_condvar_ones() {
    let sb = Sandbox::new();
    let exe = sb.build("owner", Lang::C, OWNER_PROGRAM, &[]);
    let native = sb.run(&exe, &[], &[]);
    let shimmed = sb.run(&exe, &[&sb.shim], &[]);
    assert!(native.status.success() && shimmed.status.success());
    assert_shim_loaded(&shimmed);
    for line in native.stdout.lines() {
        assert!(line.ends_with(" libc.so.6"), "natively: {line}");
    }
    // The condvar functions are referenced as pthread_cond_wait@GLIBC_2.3.2
    // and so on; the unversioned wrappers must still win.
    assert_eq!(shimmed.stdout.lines().count(), 15);
    for line in shimmed.stdout.lines() {
        assert!(
            line.ends_with(" librewind-shim.so"),
            "with the shim: {line}"
        );
    }
}

#[test]
fn the_wrappers_work_in_a_constructor_that_runs_before_the_shims_own() {
    let sb = Sandbox::new();
    // A preloaded library listed after the shim is initialised before it, but
    // its calls still bind to the shim, which has not resolved anything yet.
    let early_src = sb.path("early.c");
    fs::write(
        &early_src,
        r#"
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static sem_t s;
static void *helper(void *arg) { return arg; }
__attribute__((constructor)) static void early(void) {
    int r = 0;
    r |= pthread_mutex_lock(&m);
    r |= pthread_cond_signal(&c);
    r |= pthread_mutex_unlock(&m);
    r |= pthread_rwlock_wrlock(&rw);
    r |= pthread_rwlock_unlock(&rw);
    sem_init(&s, 0, 1);
    r |= sem_wait(&s);
    r |= sem_post(&s);
    pthread_t t;
    void *ret = NULL;
    r |= pthread_create(&t, NULL, helper, (void *)5);
    r |= pthread_join(t, &ret);
    fprintf(stderr, "early constructor: %d %ld\n", r, (long)ret);
}
"#,
    )
    .expect("writing the library source");
    let early = sb.path("libearly.so");
    let mut cmd = Command::new("gcc");
    cmd.args(["-O2", "-fPIC", "-shared", "-pthread", "-o"])
        .arg(&early)
        .arg(&early_src);
    compile(cmd, "gcc");
    let exe = sb.build(
        "plain",
        Lang::C,
        "#include <stdio.h>\nint main(void) { puts(\"main\"); return 0; }\n",
        &[],
    );

    let native = sb.run(&exe, &[&early], &[]);
    assert!(native.status.success(), "{native:?}");
    assert_eq!(native.stderr, "early constructor: 0 5\n");
    let shimmed = sb.run(&exe, &[&sb.shim, &early], &[("LD_DEBUG", "bindings,files")]);
    assert!(shimmed.status.success(), "{shimmed:?}");
    assert_shim_loaded(&shimmed);
    assert_eq!(shimmed.stdout, native.stdout);
    assert!(
        shimmed.stderr.contains("early constructor: 0 5\n"),
        "{}",
        shimmed.stderr
    );
    // The loader's own account: libearly was initialised first, and its
    // pthread_mutex_lock was bound to the shim.
    let init = |name: &str| {
        shimmed
            .stderr
            .find(&format!("calling init: {}", sb.path(name).display()))
            .unwrap_or_else(|| panic!("no init of {name} in:\n{}", shimmed.stderr))
    };
    assert!(init("libearly.so") < init("librewind-shim.so"));
    assert!(
        shimmed
            .stderr
            .lines()
            .any(|line| line.contains("libearly.so")
                && line.contains("librewind-shim.so")
                && line.contains("`pthread_mutex_lock'")),
        "libearly's pthread_mutex_lock is not bound to the shim:\n{}",
        shimmed.stderr
    );
}

/// One hint as strace printed it: `syscall_0x7277(op, object, site, value, ...)`.
#[derive(Debug)]
struct Hint {
    op: u64,
    object: u64,
    site: u64,
    value: u64,
}

fn number(text: &str) -> u64 {
    let text = text.trim();
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    }
    .unwrap_or_else(|_| panic!("{text:?} is not a number"))
}

/// The hints in strace's output. With `-f`, a call that another thread's
/// call interrupts is printed in two lines: `syscall_0x7277(args <unfinished
/// ...>` and `<... syscall_0x7277 resumed>) = result`.
fn hints_in(trace: &str) -> Vec<Hint> {
    let name = format!("syscall_{HINT_SYSCALL:#x}");
    let marker = format!("{name}(");
    for line in trace.lines().filter(|line| line.contains(&name)) {
        if let Some((_, result)) = line.rsplit_once(") = ") {
            assert!(
                result.starts_with("-1 ENOSYS"),
                "a hint did not fail with ENOSYS natively: {line}"
            );
        }
    }
    trace
        .lines()
        .filter_map(|line| {
            let start = line.find(&marker)? + marker.len();
            let rest = &line[start..];
            let end = rest.find(" <unfinished").or_else(|| rest.find(')'))?;
            let args: Vec<u64> = rest[..end].split(',').map(number).collect();
            Some(Hint {
                op: args[0],
                object: args[1],
                site: args[2],
                value: args[3],
            })
        })
        .collect()
}

#[test]
fn the_hints_reach_the_kernel_with_the_operation_object_and_call_site() {
    let sb = Sandbox::new();
    let exe = sb.build(
        "hints",
        Lang::C,
        r#"
#include <pthread.h>
#include <stdio.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static volatile int sink;
/* Each call is followed by a store, so that it is not a tail call and the
 * call site is inside the function. */
__attribute__((noinline)) static void lock_it(void) { sink = pthread_mutex_lock(&m); }
__attribute__((noinline)) static void trylock_it(void) { sink = pthread_mutex_trylock(&m); }
__attribute__((noinline)) static void unlock_it(void) { sink = pthread_mutex_unlock(&m); }
static int ready;
static void *start(void *arg) {
    pthread_mutex_lock(&m);
    ready = 1;
    pthread_cond_signal(&c);
    pthread_mutex_unlock(&m);
    return arg;
}
int main(void) {
    lock_it();
    trylock_it();
    unlock_it();
    pthread_t t;
    pthread_mutex_lock(&m);
    pthread_create(&t, NULL, start, NULL);
    while (!ready) pthread_cond_wait(&c, &m);
    pthread_mutex_unlock(&m);
    pthread_join(t, NULL);
    printf("%p %p %p %p %p %p\n", (void *)&m, (void *)&c, (void *)lock_it,
           (void *)trylock_it, (void *)unlock_it, (void *)start);
    return 0;
}
"#,
        &[],
    );
    let trace_path = sb.path("trace.txt");
    let strace = common::require_tool("strace", "apt-get install -y strace");
    let mut cmd = Command::new(strace);
    cmd.args(["-f", "-qq", "-e", "trace=all", "-o"])
        .arg(&trace_path)
        .arg("-E")
        .arg(format!("LD_PRELOAD={}", sb.shim.display()))
        .arg(&exe)
        .current_dir(sb.dir.path())
        .env_remove("LD_PRELOAD");
    let run = run_with_timeout(cmd, &sb.path("strace"));
    assert!(
        run.status.success(),
        "strace failed (where ptrace is not allowed, run the tests as root or with \
         kernel.yama.ptrace_scope=0): {run:?}"
    );
    let trace = fs::read_to_string(&trace_path).expect("reading the strace output");

    let addrs: Vec<u64> = run.stdout.split_whitespace().map(number).collect();
    let [mutex, cond, lock_it, trylock_it, unlock_it, start] = addrs[..] else {
        panic!("unexpected output: {}", run.stdout)
    };
    let inside = |site: u64, function: u64| (function..function + 0x100).contains(&site);
    let hints = hints_in(&trace);
    let find = |what: &str, pred: &dyn Fn(&Hint) -> bool| -> usize {
        hints
            .iter()
            .position(pred)
            .unwrap_or_else(|| panic!("no hint for {what} in:\n{hints:#x?}"))
    };

    find("lock_it", &|h| {
        h.op == OP_MUTEX_LOCK && h.object == mutex && inside(h.site, lock_it)
    });
    let tried = find("trylock_it", &|h| {
        h.op == OP_MUTEX_TRYLOCK && h.object == mutex && inside(h.site, trylock_it)
    });
    let result = &hints[tried + 1];
    assert_eq!(
        (result.op, result.object, result.site, result.value),
        (OP_TRY_RESULT, mutex, hints[tried].site, EBUSY),
        "the trylock's result hint"
    );
    find("unlock_it", &|h| {
        h.op == OP_MUTEX_UNLOCK && h.object == mutex && inside(h.site, unlock_it)
    });
    find("pthread_create", &|h| {
        h.op == OP_THREAD_CREATE && h.object == start
    });
    find("pthread_cond_wait", &|h| {
        h.op == OP_COND_WAIT && h.object == cond && h.value == mutex
    });
    find("pthread_join", &|h| h.op == OP_THREAD_JOIN);
    // The thread's own lock, in the new thread.
    assert!(
        hints
            .iter()
            .filter(|h| h.op == OP_MUTEX_LOCK && h.object == mutex)
            .count()
            >= 3,
        "{hints:#x?}"
    );

    // And under strace the program still prints what it prints without it.
    let plain = sb.run(&exe, &[], &[]);
    assert!(plain.status.success());
    assert_eq!(plain.stdout.split_whitespace().count(), 6);
}
