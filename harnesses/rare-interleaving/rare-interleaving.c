/*
 * A bug behind one precise preemption and a long run of the other thread.
 *
 * Two workers each process 40 jobs: tag the job with the thread id (gettid,
 * a system call) and count it under a mutex.  Each worker checkpoints once,
 * after its own quota of jobs (worker 0 after 10, worker 1 after 30): it
 * notes the checkpoint epoch, drops the lock to write the checkpoint (the
 * gettid call stands for the write), takes the lock again and bumps the
 * epoch, asserting that nobody else did in between.
 *
 * Bug: the checkpoint is split across two critical sections.  It fails only
 * if worker 0 is preempted exactly inside its checkpoint window (job 10)
 * and worker 1 then runs twenty jobs ahead, through its own checkpoint,
 * before worker 0 resumes (or the same the other way round).  One
 * preemption, but the other thread must then run about sixty scheduling
 * points in a row: a scheduler that flips a coin at every step almost never
 * does that (about one run in 10^5), natively the checkpoints are
 * milliseconds apart, while PCT (preempt once, then let the other thread
 * run) hits it about once per two hundred runs, and a search that branches
 * off at the new interleaving and lets the other thread run on hits it
 * sooner.  The window holds a system call, so no shim is needed.
 *
 * Fix (-DFIXED): do the whole checkpoint in one critical section.
 */
#define _GNU_SOURCE
#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#define JOBS 40

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long done;
static int epoch;

static pid_t syscall_point(void)
{
    return (pid_t)syscall(SYS_gettid);
}

static void checkpoint(void) /* called with the lock held */
{
#ifdef FIXED
    syscall_point();
    epoch++;
#else
    int seen = epoch;
    pthread_mutex_unlock(&lock);
    syscall_point(); /* write the checkpoint without holding the lock */
    pthread_mutex_lock(&lock);
    assert(epoch == seen); /* another checkpoint slipped in */
    epoch = seen + 1;
#endif
}

struct worker {
    int checkpoint_after; /* the worker's quota of jobs between checkpoints */
    long tags;
};

static void *worker(void *arg)
{
    struct worker *w = arg;
    for (int job = 0; job < JOBS; job++) {
        w->tags += syscall_point() > 0;
        pthread_mutex_lock(&lock);
        done++;
        if (job == w->checkpoint_after)
            checkpoint();
        pthread_mutex_unlock(&lock);
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
    pthread_t a, b;
    struct worker wa = {.checkpoint_after = 10}, wb = {.checkpoint_after = 30};
    pthread_create(&a, NULL, worker, &wa);
    stagger();
    pthread_create(&b, NULL, worker, &wb);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("%ld jobs done (%ld tagged), %d checkpoints\n", done, wa.tags + wb.tags, epoch);
    return done == 2 * JOBS && epoch == 2 ? 0 : 1;
}
