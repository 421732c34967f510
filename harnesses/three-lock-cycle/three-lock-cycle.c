/*
 * Lock-order inversion across three locks and three threads: thread i takes
 * lock i, records itself as the lock's owner (a gettid system call, the
 * kind of debug bookkeeping real lock wrappers do), then takes lock i+1 mod 3.
 *
 * Bug: deadlock when each thread holds its first lock while the next one
 * takes its own: thread 0 holds L0 and wants L1, thread 1 holds L1 and
 * wants L2, thread 2 holds L2 and wants L0.  One preemption (thread 0 at its
 * gettid, holding L0), if thread 2 then runs (it blocks on L0) before
 * thread 1 (which blocks on L2); thread 0 then blocks on L1.  PCT must also
 * draw that order of priorities.  The gettid call puts a system call in
 * every window, so no shim is needed.
 *
 * Fix (-DFIXED): each thread takes its two locks in index order (thread 2
 * takes L0 before L2), so all threads agree on one lock order.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#define THREADS 3

static pthread_mutex_t locks[THREADS];
static pid_t owner[THREADS]; /* debugging aid: last thread to hold each lock */
static int work[THREADS];

static void take(int index)
{
    pthread_mutex_lock(&locks[index]);
    owner[index] = (pid_t)syscall(SYS_gettid);
}

static void *worker(void *arg)
{
    int id = (int)(long)arg;
    int first = id, second = (id + 1) % THREADS;
#ifdef FIXED
    if (first > second) {
        int t = first;
        first = second;
        second = t;
    }
#endif
    for (int round = 0; round < 2; round++) {
        take(first);
        take(second);
        work[id]++;
        pthread_mutex_unlock(&locks[second]);
        pthread_mutex_unlock(&locks[first]);
    }
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
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_mutex_init(&locks[i], NULL);
    for (long i = 0; i < THREADS; i++) {
        if (i > 0)
            stagger();
        pthread_create(&threads[i], NULL, worker, (void *)i);
    }
    int total = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        total += work[i];
    }
    printf("3 threads did %d rounds\n", total);
    return total == 6 ? 0 : 1;
}
