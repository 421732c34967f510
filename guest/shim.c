/*
 * The pthread preload shim (librewind-shim.so).
 *
 * The monitor preloads this library (LD_PRELOAD) into every dynamically
 * linked target. It wraps the synchronisation operations that never enter the
 * kernel on their fast path (an uncontended mutex is a single atomic
 * instruction), so that each becomes a scheduling point the monitor sees.
 *
 * Each wrapper first makes the private system call HINT_SYSCALL:
 *
 *   rax = HINT_SYSCALL
 *   rdi = the operation (a HINT_OP_* number)
 *   rsi = the object (mutex, rwlock, condvar, semaphore, barrier, spinlock,
 *         thread, start routine)
 *   rdx = the call site: the return address into the wrapper's caller
 *   r10 = a second value (the mutex of a condvar wait, the result of a
 *         try/timed operation, where a created thread's id will be stored)
 *
 * then performs the real operation (the next definition in the lookup order,
 * found with dlsym(RTLD_NEXT, ...)), and returns exactly what it returned.
 * Try and timed operations make a second hint afterwards, HINT_OP_TRY_RESULT,
 * with rsi = the object, rdx = the same call site and r10 = the result: the
 * return value for pthread and C11 functions (0 = acquired), and 0 or the
 * errno value for the semaphore functions (which return -1 and set errno).
 *
 * Natively (no monitor) the kernel answers the hint with -ENOSYS, which is
 * ignored. The hint is made with an inline `syscall` instruction, never with
 * libc's syscall(), so that errno is never touched: a wrapped call leaves
 * errno exactly as the real call leaves it.
 *
 * Rules this file keeps:
 *  - no allocation, no locks and no thread-local state of its own in the
 *    wrappers;
 *  - every wrapper works before the constructor ran (other libraries'
 *    constructors may lock mutexes) and in any thread: the real functions are
 *    resolved in the constructor and, failing that, on first use with atomic
 *    loads and stores (two threads resolving at once store the same value);
 *  - dlsym(RTLD_NEXT, name) returns the default (newest) version of a symbol,
 *    which is the version every program built against a current glibc uses
 *    (for the condvar functions GLIBC_2.3.2, not the GLIBC_2.2.5 compat
 *    ones). The wrappers are exported unversioned, and an unversioned
 *    definition satisfies a versioned reference such as
 *    pthread_cond_wait@GLIBC_2.3.2. (A binary linked against the pre-2003
 *    pthread_cond_*@GLIBC_2.2.5 would reach the new implementation too.)
 *  - only the wrappers are exported (-fvisibility=hidden, EXPORT below);
 *  - the only dependency is libc (glibc 2.34 or later, where dlsym is).
 *
 * pthread_spin_lock is the one wrapper that does not call its real
 * counterpart: in the monitor's single-vCPU machine a thread spinning in user
 * space on a lock held by a thread that is not running would spin forever,
 * since only scheduling points switch threads. The wrapper instead repeats the
 * real pthread_spin_trylock and makes a sched_yield system call between
 * attempts; the result (the lock is held, 0 is returned) is the same.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

/*
 * The contract with the monitor. These numbers MUST match src/arch/abi.rs
 * (HINT_SYSCALL and the HintOp enum); a unit test in src/arch/shim.rs compares
 * them.
 */
#define HINT_SYSCALL 0x7277

#define HINT_OP_MUTEX_LOCK 1
#define HINT_OP_MUTEX_TRYLOCK 2
#define HINT_OP_MUTEX_TIMEDLOCK 3
#define HINT_OP_MUTEX_UNLOCK 4
#define HINT_OP_RWLOCK_RDLOCK 5
#define HINT_OP_RWLOCK_WRLOCK 6
#define HINT_OP_RWLOCK_TRYRDLOCK 7
#define HINT_OP_RWLOCK_TRYWRLOCK 8
#define HINT_OP_RWLOCK_TIMEDRDLOCK 9
#define HINT_OP_RWLOCK_TIMEDWRLOCK 10
#define HINT_OP_RWLOCK_UNLOCK 11
#define HINT_OP_COND_WAIT 12
#define HINT_OP_COND_TIMEDWAIT 13
#define HINT_OP_COND_SIGNAL 14
#define HINT_OP_COND_BROADCAST 15
#define HINT_OP_SEM_WAIT 16
#define HINT_OP_SEM_TRYWAIT 17
#define HINT_OP_SEM_TIMEDWAIT 18
#define HINT_OP_SEM_POST 19
#define HINT_OP_BARRIER_WAIT 20
#define HINT_OP_SPIN_LOCK 21
#define HINT_OP_SPIN_TRYLOCK 22
#define HINT_OP_SPIN_UNLOCK 23
#define HINT_OP_THREAD_CREATE 24
#define HINT_OP_THREAD_JOIN 25
#define HINT_OP_THREAD_EXIT 26
#define HINT_OP_TRY_RESULT 27
#define HINT_OP_MARKER 28

/* The hint ring (src/arch/abi.rs describes it): its getauxval key, magic and
 * header word offsets. */
#define AT_REWIND_RING 0x7277
#define RING_MAGIC 0x31474e4952574552UL
#define RING_LIMIT_STEP 1
#define RING_BASE_STEP 2
#define RING_HEAD 3
#define RING_TAIL 4
#define RING_CAPACITY 5
#define RING_BUSY 6
#define RING_HEADER_WORDS 8

#if !defined(__x86_64__)
#error "the shim is for x86-64 Linux only"
#endif

#define EXPORT __attribute__((visibility("default")))
#define SITE() ((const void *)__builtin_return_address(0))

/*
 * The ring the monitor shares with the shim, or NULL (natively, or before it
 * was looked up). Only one guest thread runs at a time and the monitor reads
 * the ring only when the guest stopped, so plain stores ordered by compiler
 * barriers suffice; `tail` is stored last, so an entry is either whole or not
 * there.
 */
static volatile unsigned long *ring;
static int ring_looked_up;

static inline __attribute__((always_inline)) volatile unsigned long *
find_ring(void)
{
    if (__builtin_expect(!ring_looked_up, 0)) {
        int saved = errno; /* getauxval sets ENOENT when the key is absent */
        unsigned long at = getauxval(AT_REWIND_RING);
        errno = saved;
        volatile unsigned long *r = (volatile unsigned long *)at;
        ring = (r != NULL && r[0] == RING_MAGIC) ? r : NULL;
        ring_looked_up = 1;
    }
    return ring;
}

/* Appends a hint to the ring when the monitor allows it; 0 if the hint must
 * be made as a system call instead. */
static inline __attribute__((always_inline)) int
buffer_hint(unsigned long op, const void *object, const void *site, unsigned long value)
{
    volatile unsigned long *r = find_ring();
    if (r == NULL || r[RING_BUSY])
        return 0;
    r[RING_BUSY] = 1;
    __asm__ volatile("" ::: "memory");
    unsigned long head = r[RING_HEAD], tail = r[RING_TAIL];
    unsigned long pending = tail - head, cap = r[RING_CAPACITY];
    int ok = pending < cap && r[RING_BASE_STEP] + pending + 1 < r[RING_LIMIT_STEP];
    if (ok) {
        volatile unsigned long *e = r + RING_HEADER_WORDS + (tail % cap) * 4;
        e[0] = op;
        e[1] = (unsigned long)object;
        e[2] = (unsigned long)site;
        e[3] = value;
        __asm__ volatile("" ::: "memory");
        r[RING_TAIL] = tail + 1;
    }
    __asm__ volatile("" ::: "memory");
    r[RING_BUSY] = 0;
    return ok;
}

/* Make one hint: into the ring when the monitor allows it, else as the
 * system call. The kernel and the monitor change no register but rax, rcx
 * and r11, and no memory. */
static inline __attribute__((always_inline)) void
hint(unsigned long op, const void *object, const void *site, unsigned long value)
{
    if (buffer_hint(op, object, site, value))
        return;
    register unsigned long r10 __asm__("r10") = value;
    unsigned long ret = HINT_SYSCALL;
    /* The argument registers are declared as outputs too, so that the code
     * around the hint does not rely on the monitor preserving them. */
    __asm__ volatile("syscall"
                     : "+a"(ret), "+D"(op), "+S"(object), "+d"(site), "+r"(r10)
                     :
                     : "rcx", "r11", "memory");
    (void)ret;
}

/* sched_yield without going through libc, so that errno stays untouched. */
static inline __attribute__((always_inline)) void
yield_cpu(void)
{
    unsigned long ret = SYS_sched_yield;
    __asm__ volatile("syscall" : "+a"(ret) : : "rcx", "r11", "memory");
    (void)ret;
}

/* ------------------------------------------------------------------------ */
/* The real functions                                                        */
/* ------------------------------------------------------------------------ */

#define REAL_FUNCTIONS(X)                                                      \
    X(pthread_mutex_lock)                                                      \
    X(pthread_mutex_trylock)                                                   \
    X(pthread_mutex_timedlock)                                                 \
    X(pthread_mutex_clocklock)                                                 \
    X(pthread_mutex_unlock)                                                    \
    X(pthread_rwlock_rdlock)                                                   \
    X(pthread_rwlock_wrlock)                                                   \
    X(pthread_rwlock_tryrdlock)                                                \
    X(pthread_rwlock_trywrlock)                                                \
    X(pthread_rwlock_timedrdlock)                                              \
    X(pthread_rwlock_timedwrlock)                                              \
    X(pthread_rwlock_clockrdlock)                                              \
    X(pthread_rwlock_clockwrlock)                                              \
    X(pthread_rwlock_unlock)                                                   \
    X(pthread_cond_wait)                                                       \
    X(pthread_cond_timedwait)                                                  \
    X(pthread_cond_clockwait)                                                  \
    X(pthread_cond_signal)                                                     \
    X(pthread_cond_broadcast)                                                  \
    X(sem_wait)                                                                \
    X(sem_trywait)                                                             \
    X(sem_timedwait)                                                           \
    X(sem_clockwait)                                                           \
    X(sem_post)                                                                \
    X(pthread_barrier_wait)                                                    \
    X(pthread_spin_trylock)                                                    \
    X(pthread_spin_unlock)                                                     \
    X(pthread_create)                                                          \
    X(pthread_join)                                                            \
    X(pthread_exit)                                                            \
    X(mtx_lock)                                                                \
    X(mtx_trylock)                                                             \
    X(mtx_timedlock)                                                           \
    X(mtx_unlock)                                                              \
    X(cnd_wait)                                                                \
    X(cnd_timedwait)                                                           \
    X(cnd_signal)                                                              \
    X(cnd_broadcast)                                                           \
    X(thrd_create)                                                             \
    X(thrd_join)                                                               \
    X(thrd_exit)

enum real_index {
#define X(name) REAL_##name,
    REAL_FUNCTIONS(X)
#undef X
        REAL_COUNT
};

static const char *const real_names[REAL_COUNT] = {
#define X(name) [REAL_##name] = #name,
    REAL_FUNCTIONS(X)
#undef X
};

/* Written once each with the resolved address; read with acquire loads. */
static void *real_fns[REAL_COUNT];

static __attribute__((noreturn, cold, noinline)) void
die_missing(const char *name)
{
    static const char prefix[] = "rewind-shim: cannot find the real ";
    ssize_t w = write(2, prefix, sizeof prefix - 1);
    w = write(2, name, strlen(name));
    w = write(2, "\n", 1);
    (void)w;
    abort();
}

static void *
lookup(enum real_index i)
{
    int saved_errno = errno;
    void *fn = dlsym(RTLD_NEXT, real_names[i]);
    errno = saved_errno;
    return fn;
}

static __attribute__((cold, noinline)) void *
resolve_slow(enum real_index i)
{
    void *fn = lookup(i);
    if (fn == NULL)
        die_missing(real_names[i]);
    __atomic_store_n(&real_fns[i], fn, __ATOMIC_RELEASE);
    return fn;
}

static inline __attribute__((always_inline)) void *
resolve(enum real_index i)
{
    void *fn = __atomic_load_n(&real_fns[i], __ATOMIC_ACQUIRE);
    if (__builtin_expect(fn == NULL, 0))
        fn = resolve_slow(i);
    return fn;
}

/* The real `name`, with the type of the wrapper of the same name. */
#define REAL(name) ((__typeof__(&name))resolve(REAL_##name))

/* Resolve everything up front; a function this libc lacks stays unresolved
 * and only a call to its wrapper reports it. */
static __attribute__((constructor)) void
shim_init(void)
{
    for (int i = 0; i < REAL_COUNT; i++) {
        if (__atomic_load_n(&real_fns[i], __ATOMIC_ACQUIRE) != NULL)
            continue;
        void *fn = lookup((enum real_index)i);
        if (fn != NULL)
            __atomic_store_n(&real_fns[i], fn, __ATOMIC_RELEASE);
    }
}

/* ------------------------------------------------------------------------ */
/* Wrapper patterns                                                          */
/* ------------------------------------------------------------------------ */

/* A hint, then the real call, whose result is returned unchanged. */
#define SIMPLE(op, object, value, call)                                        \
    do {                                                                       \
        hint((op), (object), SITE(), (unsigned long)(value));                  \
        return call;                                                           \
    } while (0)

/* A hint, the real call, then a TryResult hint carrying the result. */
#define TRIED(op, object, value, call)                                         \
    do {                                                                       \
        const void *site_ = SITE();                                            \
        hint((op), (object), site_, (unsigned long)(value));                   \
        int r_ = call;                                                         \
        hint(HINT_OP_TRY_RESULT, (object), site_, (unsigned long)(long)r_);    \
        return r_;                                                             \
    } while (0)

/* The same for functions returning -1 and setting errno: the TryResult hint
 * carries 0 or the errno value; errno itself is left as the call left it. */
#define TRIED_ERRNO(op, object, value, call)                                   \
    do {                                                                       \
        const void *site_ = SITE();                                            \
        hint((op), (object), site_, (unsigned long)(value));                   \
        int r_ = call;                                                         \
        int e_ = r_ == 0 ? 0 : errno;                                          \
        hint(HINT_OP_TRY_RESULT, (object), site_, (unsigned long)(long)e_);    \
        return r_;                                                             \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Mutexes                                                                   */
/* ------------------------------------------------------------------------ */

EXPORT int
pthread_mutex_lock(pthread_mutex_t *m)
{
    SIMPLE(HINT_OP_MUTEX_LOCK, m, 0, REAL(pthread_mutex_lock)(m));
}

EXPORT int
pthread_mutex_trylock(pthread_mutex_t *m)
{
    TRIED(HINT_OP_MUTEX_TRYLOCK, m, 0, REAL(pthread_mutex_trylock)(m));
}

EXPORT int
pthread_mutex_timedlock(pthread_mutex_t *restrict m, const struct timespec *restrict t)
{
    TRIED(HINT_OP_MUTEX_TIMEDLOCK, m, 0, REAL(pthread_mutex_timedlock)(m, t));
}

EXPORT int
pthread_mutex_clocklock(pthread_mutex_t *restrict m, clockid_t c,
                        const struct timespec *restrict t)
{
    TRIED(HINT_OP_MUTEX_TIMEDLOCK, m, 0, REAL(pthread_mutex_clocklock)(m, c, t));
}

EXPORT int
pthread_mutex_unlock(pthread_mutex_t *m)
{
    SIMPLE(HINT_OP_MUTEX_UNLOCK, m, 0, REAL(pthread_mutex_unlock)(m));
}

/* ------------------------------------------------------------------------ */
/* Read-write locks                                                          */
/* ------------------------------------------------------------------------ */

EXPORT int
pthread_rwlock_rdlock(pthread_rwlock_t *l)
{
    SIMPLE(HINT_OP_RWLOCK_RDLOCK, l, 0, REAL(pthread_rwlock_rdlock)(l));
}

EXPORT int
pthread_rwlock_wrlock(pthread_rwlock_t *l)
{
    SIMPLE(HINT_OP_RWLOCK_WRLOCK, l, 0, REAL(pthread_rwlock_wrlock)(l));
}

EXPORT int
pthread_rwlock_tryrdlock(pthread_rwlock_t *l)
{
    TRIED(HINT_OP_RWLOCK_TRYRDLOCK, l, 0, REAL(pthread_rwlock_tryrdlock)(l));
}

EXPORT int
pthread_rwlock_trywrlock(pthread_rwlock_t *l)
{
    TRIED(HINT_OP_RWLOCK_TRYWRLOCK, l, 0, REAL(pthread_rwlock_trywrlock)(l));
}

EXPORT int
pthread_rwlock_timedrdlock(pthread_rwlock_t *restrict l, const struct timespec *restrict t)
{
    TRIED(HINT_OP_RWLOCK_TIMEDRDLOCK, l, 0, REAL(pthread_rwlock_timedrdlock)(l, t));
}

EXPORT int
pthread_rwlock_timedwrlock(pthread_rwlock_t *restrict l, const struct timespec *restrict t)
{
    TRIED(HINT_OP_RWLOCK_TIMEDWRLOCK, l, 0, REAL(pthread_rwlock_timedwrlock)(l, t));
}

EXPORT int
pthread_rwlock_clockrdlock(pthread_rwlock_t *restrict l, clockid_t c,
                           const struct timespec *restrict t)
{
    TRIED(HINT_OP_RWLOCK_TIMEDRDLOCK, l, 0, REAL(pthread_rwlock_clockrdlock)(l, c, t));
}

EXPORT int
pthread_rwlock_clockwrlock(pthread_rwlock_t *restrict l, clockid_t c,
                           const struct timespec *restrict t)
{
    TRIED(HINT_OP_RWLOCK_TIMEDWRLOCK, l, 0, REAL(pthread_rwlock_clockwrlock)(l, c, t));
}

EXPORT int
pthread_rwlock_unlock(pthread_rwlock_t *l)
{
    SIMPLE(HINT_OP_RWLOCK_UNLOCK, l, 0, REAL(pthread_rwlock_unlock)(l));
}

/* ------------------------------------------------------------------------ */
/* Condition variables (r10 = the mutex released while waiting)              */
/* ------------------------------------------------------------------------ */

EXPORT int
pthread_cond_wait(pthread_cond_t *restrict c, pthread_mutex_t *restrict m)
{
    SIMPLE(HINT_OP_COND_WAIT, c, m, REAL(pthread_cond_wait)(c, m));
}

EXPORT int
pthread_cond_timedwait(pthread_cond_t *restrict c, pthread_mutex_t *restrict m,
                       const struct timespec *restrict t)
{
    TRIED(HINT_OP_COND_TIMEDWAIT, c, m, REAL(pthread_cond_timedwait)(c, m, t));
}

EXPORT int
pthread_cond_clockwait(pthread_cond_t *restrict c, pthread_mutex_t *restrict m,
                       clockid_t clock, const struct timespec *restrict t)
{
    TRIED(HINT_OP_COND_TIMEDWAIT, c, m, REAL(pthread_cond_clockwait)(c, m, clock, t));
}

EXPORT int
pthread_cond_signal(pthread_cond_t *c)
{
    SIMPLE(HINT_OP_COND_SIGNAL, c, 0, REAL(pthread_cond_signal)(c));
}

EXPORT int
pthread_cond_broadcast(pthread_cond_t *c)
{
    SIMPLE(HINT_OP_COND_BROADCAST, c, 0, REAL(pthread_cond_broadcast)(c));
}

/* ------------------------------------------------------------------------ */
/* Semaphores                                                                */
/* ------------------------------------------------------------------------ */

EXPORT int
sem_wait(sem_t *s)
{
    SIMPLE(HINT_OP_SEM_WAIT, s, 0, REAL(sem_wait)(s));
}

EXPORT int
sem_trywait(sem_t *s)
{
    TRIED_ERRNO(HINT_OP_SEM_TRYWAIT, s, 0, REAL(sem_trywait)(s));
}

EXPORT int
sem_timedwait(sem_t *restrict s, const struct timespec *restrict t)
{
    TRIED_ERRNO(HINT_OP_SEM_TIMEDWAIT, s, 0, REAL(sem_timedwait)(s, t));
}

EXPORT int
sem_clockwait(sem_t *restrict s, clockid_t c, const struct timespec *restrict t)
{
    TRIED_ERRNO(HINT_OP_SEM_TIMEDWAIT, s, 0, REAL(sem_clockwait)(s, c, t));
}

EXPORT int
sem_post(sem_t *s)
{
    SIMPLE(HINT_OP_SEM_POST, s, 0, REAL(sem_post)(s));
}

/* ------------------------------------------------------------------------ */
/* Barriers and spinlocks                                                    */
/* ------------------------------------------------------------------------ */

EXPORT int
pthread_barrier_wait(pthread_barrier_t *b)
{
    SIMPLE(HINT_OP_BARRIER_WAIT, b, 0, REAL(pthread_barrier_wait)(b));
}

EXPORT int
pthread_spin_lock(pthread_spinlock_t *l)
{
    hint(HINT_OP_SPIN_LOCK, (const void *)l, SITE(), 0);
    int (*trylock)(pthread_spinlock_t *) = REAL(pthread_spin_trylock);
    int r;
    /* See the top of the file: never spin without a scheduling point. */
    while ((r = trylock(l)) == EBUSY)
        yield_cpu();
    return r;
}

EXPORT int
pthread_spin_trylock(pthread_spinlock_t *l)
{
    TRIED(HINT_OP_SPIN_TRYLOCK, (const void *)l, 0, REAL(pthread_spin_trylock)(l));
}

EXPORT int
pthread_spin_unlock(pthread_spinlock_t *l)
{
    SIMPLE(HINT_OP_SPIN_UNLOCK, (const void *)l, 0, REAL(pthread_spin_unlock)(l));
}

/* ------------------------------------------------------------------------ */
/* Threads                                                                   */
/* ------------------------------------------------------------------------ */

/* Made before the thread exists: rsi = the start routine, r10 = where the new
 * thread's id will be stored. */
EXPORT int
pthread_create(pthread_t *restrict thread, const pthread_attr_t *restrict attr,
               void *(*start)(void *), void *restrict arg)
{
    SIMPLE(HINT_OP_THREAD_CREATE, (const void *)start, thread,
           REAL(pthread_create)(thread, attr, start, arg));
}

EXPORT int
pthread_join(pthread_t thread, void **ret)
{
    SIMPLE(HINT_OP_THREAD_JOIN, (const void *)thread, 0, REAL(pthread_join)(thread, ret));
}

/* rsi = the exiting thread, r10 = its return value. */
EXPORT void
pthread_exit(void *ret)
{
    hint(HINT_OP_THREAD_EXIT, (const void *)pthread_self(), SITE(), (unsigned long)ret);
    REAL(pthread_exit)(ret);
    __builtin_unreachable();
}

/* ------------------------------------------------------------------------ */
/* C11 threads (glibc implements them on its internal pthread functions,     */
/* which the wrappers above do not see)                                      */
/* ------------------------------------------------------------------------ */

EXPORT int
mtx_lock(mtx_t *m)
{
    SIMPLE(HINT_OP_MUTEX_LOCK, m, 0, REAL(mtx_lock)(m));
}

EXPORT int
mtx_trylock(mtx_t *m)
{
    TRIED(HINT_OP_MUTEX_TRYLOCK, m, 0, REAL(mtx_trylock)(m));
}

EXPORT int
mtx_timedlock(mtx_t *restrict m, const struct timespec *restrict t)
{
    TRIED(HINT_OP_MUTEX_TIMEDLOCK, m, 0, REAL(mtx_timedlock)(m, t));
}

EXPORT int
mtx_unlock(mtx_t *m)
{
    SIMPLE(HINT_OP_MUTEX_UNLOCK, m, 0, REAL(mtx_unlock)(m));
}

EXPORT int
cnd_wait(cnd_t *c, mtx_t *m)
{
    SIMPLE(HINT_OP_COND_WAIT, c, m, REAL(cnd_wait)(c, m));
}

EXPORT int
cnd_timedwait(cnd_t *restrict c, mtx_t *restrict m, const struct timespec *restrict t)
{
    TRIED(HINT_OP_COND_TIMEDWAIT, c, m, REAL(cnd_timedwait)(c, m, t));
}

EXPORT int
cnd_signal(cnd_t *c)
{
    SIMPLE(HINT_OP_COND_SIGNAL, c, 0, REAL(cnd_signal)(c));
}

EXPORT int
cnd_broadcast(cnd_t *c)
{
    SIMPLE(HINT_OP_COND_BROADCAST, c, 0, REAL(cnd_broadcast)(c));
}

EXPORT int
thrd_create(thrd_t *thread, thrd_start_t start, void *arg)
{
    SIMPLE(HINT_OP_THREAD_CREATE, (const void *)start, thread,
           REAL(thrd_create)(thread, start, arg));
}

EXPORT int
thrd_join(thrd_t thread, int *ret)
{
    SIMPLE(HINT_OP_THREAD_JOIN, (const void *)thread, 0, REAL(thrd_join)(thread, ret));
}

EXPORT void
thrd_exit(int ret)
{
    hint(HINT_OP_THREAD_EXIT, (const void *)pthread_self(), SITE(), (unsigned long)(long)ret);
    REAL(thrd_exit)(ret);
    __builtin_unreachable();
}
