/*
 * Broken double-checked locking: a lazily created registry is published
 * (stored into `instance`) before it is initialized.
 *
 * get_registry() returns `instance` when it is already set, without taking
 * the lock; otherwise it sets up the registry under the lock.  The creator
 * stores the pointer first and then fills in the fields; one of them, the
 * owner pid, comes from getpid(), a system call.
 *
 * Bug: if the creating thread is preempted at that getpid, after the
 * pointer is visible but before `magic` is set, another thread's
 * get_registry() takes the fast path and returns the half-built registry;
 * its assert(magic == REGISTRY_MAGIC) aborts.  One preemption at a system
 * call, so no shim is needed.
 *
 * Fix (-DFIXED): create the registry with pthread_once, which returns only
 * after the initializer has finished, to every caller.  (Initializing
 * before the release store would also do.)
 */
#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#define REGISTRY_MAGIC 0x5eed
#define USERS 3

struct registry {
    int magic;
    pid_t owner;
    pthread_mutex_t lock;
    int entries[USERS];
};

static struct registry *instance; /* accessed with __atomic builtins */

static struct registry *new_registry(void)
{
    static struct registry storage;
    pthread_mutex_init(&storage.lock, NULL);
    return &storage;
}

#ifdef FIXED
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init_registry(void)
{
    struct registry *r = new_registry();
    r->owner = getpid();
    r->magic = REGISTRY_MAGIC;
    __atomic_store_n(&instance, r, __ATOMIC_RELEASE);
}

static struct registry *get_registry(void)
{
    pthread_once(&once, init_registry);
    return __atomic_load_n(&instance, __ATOMIC_ACQUIRE);
}
#else
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

static struct registry *get_registry(void)
{
    struct registry *r = __atomic_load_n(&instance, __ATOMIC_ACQUIRE);
    if (r != NULL)
        return r;
    pthread_mutex_lock(&init_lock);
    r = __atomic_load_n(&instance, __ATOMIC_ACQUIRE);
    if (r == NULL) {
        r = new_registry();
        __atomic_store_n(&instance, r, __ATOMIC_RELEASE); /* published too early */
        r->owner = getpid();
        r->magic = REGISTRY_MAGIC;
    }
    pthread_mutex_unlock(&init_lock);
    return r;
}
#endif

static void *user(void *arg)
{
    int id = (int)(long)arg;
    struct registry *r = get_registry();
    assert(r->magic == REGISTRY_MAGIC);
    pthread_mutex_lock(&r->lock);
    r->entries[id] = id + 1;
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

/*
 * Busy work between thread starts.  Natively, threads started back to back
 * begin within microseconds of each other on different CPUs; this spaces
 * them out so the race stays as rare natively as races are in real
 * programs.  It makes no system call, so in the VM it is no scheduling
 * point and changes nothing.
 */
static void stagger(void)
{
    volatile unsigned sink = 0;
    for (unsigned i = 0; i < 100000; i++)
        sink += i;
}

int main(void)
{
    pthread_t threads[USERS];
    for (long i = 0; i < USERS; i++) {
        if (i > 0)
            stagger();
        pthread_create(&threads[i], NULL, user, (void *)i);
    }
    for (int i = 0; i < USERS; i++)
        pthread_join(threads[i], NULL);
    struct registry *r = get_registry();
    int sum = 0;
    for (int i = 0; i < USERS; i++)
        sum += r->entries[i];
    printf("registry has %d entries, checksum %d, owner is this process: %s\n",
           USERS, sum, r->owner == getpid() ? "yes" : "no");
    return 0;
}
