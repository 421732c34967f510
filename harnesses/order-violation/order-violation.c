/*
 * Order violation: main starts a worker and only then builds the
 * configuration the worker reads (`config` is published after
 * pthread_create instead of before).
 *
 * Bug: the worker first builds a lookup table in eight chunks, recording
 * its thread id in a trace after each (gettid, a system call; natively this
 * gives main ample time to publish the config), and then dereferences
 * `config`.  If main is preempted right after the clone system call, before
 * it stores the pointer, and the worker runs its whole start-up to the read,
 * the worker dereferences NULL: SIGSEGV.  No preemption inside the worker,
 * only the order "new thread first, all the way": PCT gets it from its
 * priorities alone, while a scheduler that flips a coin at every step must
 * pick the worker about a dozen times in a row.  The window holds system
 * calls (clone, the signal-mask restore after it), so no shim is needed.
 * Natively it fails only when the OS leaves main off the CPU for the whole
 * start-up of the worker.
 *
 * Fix (-DFIXED): main builds and publishes the config before
 * pthread_create; thread creation orders everything before it ahead of
 * everything the new thread does.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

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
    /* Build a table first, in chunks of plain arithmetic, tracing each. */
    static volatile int table[64];
    static pid_t trace[8];
    for (int chunk = 0; chunk < 8; chunk++) {
        for (int i = chunk * 12500; i < (chunk + 1) * 12500; i++)
            table[i % 64] += i % 13;
        trace[chunk] = (pid_t)syscall(SYS_gettid);
    }
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
