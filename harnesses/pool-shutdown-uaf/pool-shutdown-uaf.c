/*
 * A thread pool whose shutdown frees the job queue too early.
 *
 * Two workers take jobs (slot numbers) from a queue under the pool lock and
 * read each job's payload from the queue outside the lock (the slot is
 * theirs once taken).  Shutdown sets `stop`, waits until the queue is
 * drained (no job left to take), then frees the queue and clears the
 * pointer, and only then joins the workers.
 *
 * Bug: "drained" means every job was taken, not finished.  The worker that
 * takes the last job signals `drained` and then reads the payload through
 * pool->q.  If it is preempted at that signal (a futex wake system call,
 * since shutdown is waiting) and shutdown runs to the free, the worker then
 * reads through NULL: SIGSEGV.  One preemption at a system call, so no shim
 * is needed.  Natively the worker reads the payload nanoseconds after the
 * signal while main needs microseconds to wake up.
 *
 * Fix (-DFIXED): shutdown joins the workers before it frees the queue; a
 * joined thread can no longer touch it.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define WORKERS 2
#define JOBS 8

struct queue {
    int head;
    int tail;
    int payload[JOBS];
};

struct pool {
    pthread_mutex_t lock;
    pthread_cond_t work;    /* a job was queued, or stop was set */
    pthread_cond_t drained; /* the last queued job was taken */
    struct queue *q;
    int pending; /* queued jobs no worker has taken yet */
    int stop;
    long total; /* sum of the workers' results */
    pthread_t workers[WORKERS];
};

static void *worker(void *arg)
{
    struct pool *p = arg;
    long sum = 0;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        while (p->pending == 0 && !p->stop)
            pthread_cond_wait(&p->work, &p->lock);
        if (p->pending == 0) { /* stopping, and nothing left to take */
            p->total += sum;
            pthread_mutex_unlock(&p->lock);
            return NULL;
        }
        int slot = p->q->head++;
        int last = --p->pending == 0;
        pthread_mutex_unlock(&p->lock);
        if (last)
            pthread_cond_signal(&p->drained);
        /* The slot is ours now, so its payload is read without the lock. */
        int job = p->q->payload[slot];
        sum += (long)job * job;
    }
}

static void submit(struct pool *p, int job)
{
    pthread_mutex_lock(&p->lock);
    p->q->payload[p->q->tail++] = job;
    p->pending++;
    pthread_mutex_unlock(&p->lock);
    pthread_cond_signal(&p->work);
}

static void shutdown_pool(struct pool *p)
{
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    while (p->pending > 0)
        pthread_cond_wait(&p->drained, &p->lock);
    pthread_mutex_unlock(&p->lock);
#ifdef FIXED
    for (int i = 0; i < WORKERS; i++)
        pthread_join(p->workers[i], NULL);
    free(p->q);
    p->q = NULL;
#else
    free(p->q);
    p->q = NULL; /* a worker may still be reading its last job's payload */
    for (int i = 0; i < WORKERS; i++)
        pthread_join(p->workers[i], NULL);
#endif
}

int main(void)
{
    static struct pool pool = {
        .lock = PTHREAD_MUTEX_INITIALIZER,
        .work = PTHREAD_COND_INITIALIZER,
        .drained = PTHREAD_COND_INITIALIZER,
    };
    pool.q = calloc(1, sizeof *pool.q);
    if (pool.q == NULL)
        return 1;
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&pool.workers[i], NULL, worker, &pool);
    for (int job = 1; job <= JOBS; job++)
        submit(&pool, job);
    shutdown_pool(&pool);
    printf("%d jobs done, sum of squares %ld\n", JOBS, pool.total);
    return pool.total == 204 ? 0 : 1;
}
