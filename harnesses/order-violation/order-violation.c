/*
 * Order violation: main starts a worker and only then builds the
 * configuration the worker reads (`config` is published after
 * pthread_create instead of before).
 *
 * Bug: the worker first builds a lookup table (pure computation: natively
 * it gives main time to publish the config; in the VM it is no scheduling
 * point at all) and then dereferences `config`.  If main is preempted right
 * after the clone system call, before it stores the pointer, and the worker
 * runs to its read, the worker dereferences NULL: SIGSEGV.  One preemption,
 * at a system call (clone, or the signal-mask restore that follows it), so
 * no shim is needed.  Natively it fails in a few percent of runs, when the
 * OS runs the new thread on main's CPU while main is still inside clone.
 *
 * Fix (-DFIXED): main builds and publishes the config before
 * pthread_create; thread creation orders everything before it ahead of
 * everything the new thread does.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

struct config {
    int buckets;
    int scale;
};

static struct config *config; /* accessed with __atomic builtins */

static struct config *make_config(void)
{
    struct config *c = malloc(sizeof *c);
    if (c == NULL)
        abort();
    c->buckets = 7;
    c->scale = 3;
    return c;
}

static void *worker(void *arg)
{
    long *result = arg;
    /* Build a table first: 100000 iterations of plain arithmetic. */
    static volatile int table[64];
    for (int i = 0; i < 100000; i++)
        table[i % 64] += i % 13;
    struct config *c = __atomic_load_n(&config, __ATOMIC_ACQUIRE);
    long sum = 0;
    for (int i = 0; i < 64; i++)
        sum += table[i] % c->buckets; /* NULL dereference if not yet published */
    *result = sum * c->scale;
    return NULL;
}

int main(void)
{
    pthread_t thread;
    long result = 0;
#ifdef FIXED
    __atomic_store_n(&config, make_config(), __ATOMIC_RELEASE);
    pthread_create(&thread, NULL, worker, &result);
#else
    pthread_create(&thread, NULL, worker, &result);
    __atomic_store_n(&config, make_config(), __ATOMIC_RELEASE);
#endif
    pthread_join(thread, NULL);
    printf("worker result = %ld\n", result);
    free(config);
    return 0;
}
