/*
 * A bug behind one precise preemption among about two thousand scheduling
 * points.
 *
 * Two workers each process 300 jobs: tag the job with the thread id (gettid,
 * a system call) and count it under a mutex.  Job 150 is a checkpoint: the
 * worker notes the checkpoint epoch, drops the lock to write the checkpoint
 * (the gettid call stands for the write), takes the lock again and bumps the
 * epoch, asserting that nobody else did in between.
 *
 * Bug: the checkpoint is split across two critical sections.  It fails only
 * if one worker is preempted exactly inside its own checkpoint window and
 * the other worker then runs its whole checkpoint (job 150) before the
 * first resumes: a single preemption, but at one place among ~600 system
 * calls (~1800 steps with the shim), and the other worker must be exactly
 * at job 150 when it happens.  A scheduler that preempts at a random step
 * and then runs the other thread to the end (PCT) hits it with probability
 * about 1/steps; one that flips a coin at every step rarely lines the two
 * workers up.  Natively the workers start tens of microseconds apart, so
 * their checkpoints are far apart.  The window holds a system call, so no
 * shim is needed (with it the window also holds the lock and unlock).
 *
 * Fix (-DFIXED): do the whole checkpoint in one critical section.
 */
#define _GNU_SOURCE
#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#define JOBS 300
#define CHECKPOINT 150

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

static void *worker(void *arg)
{
    long *tags = arg;
    for (int job = 0; job < JOBS; job++) {
        *tags += syscall_point() > 0;
        pthread_mutex_lock(&lock);
        done++;
        if (job == CHECKPOINT)
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
    static volatile unsigned sink;
    for (unsigned i = 0; i < 100000; i++)
        sink += i;
}

int main(void)
{
    pthread_t a, b;
    long tags_a = 0, tags_b = 0;
    pthread_create(&a, NULL, worker, &tags_a);
    stagger();
    pthread_create(&b, NULL, worker, &tags_b);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("%ld jobs done (%ld tagged), %d checkpoints\n", done, tags_a + tags_b, epoch);
    return done == 2 * JOBS && epoch == 2 ? 0 : 1;
}
