/*
 * A two-thread barrier built from an atomic arrival count and a generation
 * number: each thread notes the generation, counts itself in (`lock xadd`),
 * and either, arriving last, resets the count and opens the next generation
 * (`lock add`), or polls the generation with sched_yield between polls.
 * Two threads use it ten times: each round each writes its own slot, passes
 * the barrier and reads the other's slot, which must be written by then.
 *
 * The waiting loop makes a system call every poll, so it is no spin loop:
 * every schedule must still get the other thread to the barrier and the
 * program exit 0.  The count is reset before the generation opens, so a
 * thread that races ahead into the next round counts from zero.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>

#define ROUNDS 10

static unsigned arrived;    /* __atomic */
static unsigned generation; /* __atomic */
static long slots[2][ROUNDS];

static void barrier_wait(void)
{
    unsigned gen = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
    if (__atomic_add_fetch(&arrived, 1, __ATOMIC_ACQ_REL) == 2) {
        __atomic_store_n(&arrived, 0, __ATOMIC_RELAXED);
        __atomic_fetch_add(&generation, 1, __ATOMIC_RELEASE);
    } else {
        while (__atomic_load_n(&generation, __ATOMIC_ACQUIRE) == gen)
            sched_yield();
    }
}

static void *worker(void *arg)
{
    long id = (long)arg, sum = 0;
    for (int round = 0; round < ROUNDS; round++) {
        slots[id][round] = (id + 1) * 100 + round * round;
        barrier_wait();
        sum += slots[1 - id][round];
    }
    return (void *)sum;
}

int main(void)
{
    pthread_t t[2];
    void *sum[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], &sum[i]);
    long a = (long)sum[0], b = (long)sum[1];
    printf("%d rounds: thread 0 read %ld, thread 1 read %ld\n", ROUNDS, a, b);
    return a == 2285 && b == 1285 ? 0 : 1;
}
