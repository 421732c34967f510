/*
 * A bug in a thread that a run-until-blocked schedule never runs.  main
 * starts a background flusher, queues four records (an atomic add each)
 * and then, if the flusher has not started yet, cancels it with a
 * compare-and-swap on its state and writes the records out itself; if it
 * has started, main joins it and writes out what is left.  main never
 * waits for a flusher that has not started: it returns from main, and the
 * process exits before the flusher ever runs.
 *
 * Bug: the flusher takes the count of pending records, writes them out
 * (traced with gettid before and after, a system call each) and then sets
 * the count to 0, dropping records queued meanwhile.  That needs two
 * preemptions: main preempted after the clone (at the signal-mask restore
 * in pthread_create, or at a queueing add) so that the flusher starts and
 * reads the count; then the flusher preempted at a trace so that main
 * queues another record and, finding the flusher running, joins it.  The
 * flusher resumes, zeroes the count, and main's `assert(flushed == 4)`
 * fails: SIGABRT.  With one preemption the flusher, once started, runs to
 * its end and nothing is lost; a scheduler that runs main until it blocks
 * never starts the flusher at all.  Natively main has cancelled the flusher
 * long before the new thread starts.
 *
 * Fix (-DFIXED): the flusher subtracts what it wrote out instead of
 * storing 0, so records queued meanwhile stay pending and main writes them.
 */
#define _GNU_SOURCE
#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { IDLE, RUNNING, CANCELLED };

static int state;    /* of the flusher; all three with __atomic builtins */
static long pending; /* records queued, not yet written out */
static long flushed; /* records written out */
static pid_t trace[2];

static void *flusher(void *arg)
{
    (void)arg;
    int idle = IDLE;
    if (!__atomic_compare_exchange_n(&state, &idle, RUNNING, 0, __ATOMIC_SEQ_CST,
                                     __ATOMIC_SEQ_CST))
        return NULL; /* cancelled: main writes the records out itself */
    long n = __atomic_load_n(&pending, __ATOMIC_ACQUIRE);
    trace[0] = (pid_t)syscall(SYS_gettid);
    __atomic_add_fetch(&flushed, n, __ATOMIC_RELAXED);
    trace[1] = (pid_t)syscall(SYS_gettid);
#ifdef FIXED
    __atomic_sub_fetch(&pending, n, __ATOMIC_RELEASE);
#else
    __atomic_store_n(&pending, 0, __ATOMIC_RELEASE); /* drops records queued meanwhile */
#endif
    return NULL;
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, NULL, flusher, NULL);
    for (int i = 0; i < 4; i++)
        __atomic_add_fetch(&pending, 1, __ATOMIC_RELEASE);
    int idle = IDLE;
    if (!__atomic_compare_exchange_n(&state, &idle, CANCELLED, 0, __ATOMIC_SEQ_CST,
                                     __ATOMIC_SEQ_CST))
        pthread_join(t, NULL); /* it has started: let it finish */
    __atomic_add_fetch(&flushed, __atomic_exchange_n(&pending, 0, __ATOMIC_ACQUIRE),
                       __ATOMIC_RELAXED);
    long total = __atomic_load_n(&flushed, __ATOMIC_RELAXED);
    assert(total == 4);
    printf("%ld records flushed\n", total);
    return 0; /* a cancelled flusher is never joined */
}
