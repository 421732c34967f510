/*
 * Dining philosophers: five threads, five forks (mutexes); each philosopher
 * eats three times, taking the fork on its left and then the one on its
 * right.
 *
 * Between meals a philosopher thinks, politely: it yields the CPU
 * (sched_yield), so the philosophers take turns at the table.
 *
 * Bug: deadlock, when every philosopher holds its left fork and waits for
 * its right one, which its neighbour holds as its left: a wait-for cycle
 * through all five.  One preemption starts it: philosopher i is preempted
 * holding fork i.  As the others come round (they take turns), philosopher
 * i-1 takes its left fork and blocks on fork i, then i-2 blocks on fork
 * i-1, and so on, until philosopher i, back at last, blocks on fork i+1.
 * The window (between the two locks) holds no system call, only the next
 * pthread_mutex_lock, so the shim is needed to reach it.
 *
 * Fix (-DFIXED): every philosopher takes the lower-numbered of its two forks
 * first.  Philosopher 4 then takes fork 0 before fork 4, which breaks the
 * cycle: a total order on locks admits no wait-for cycle.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>

#define N 5
#define MEALS 3

static pthread_mutex_t forks[N];
static int meals[N];

static void *philosopher(void *arg)
{
    int id = (int)(long)arg;
    int left = id, right = (id + 1) % N;
#ifdef FIXED
    int first = left < right ? left : right;
    int second = left < right ? right : left;
#else
    int first = left, second = right;
#endif
    for (int m = 0; m < MEALS; m++) {
        pthread_mutex_lock(&forks[first]);
        pthread_mutex_lock(&forks[second]);
        meals[id]++;
        pthread_mutex_unlock(&forks[second]);
        pthread_mutex_unlock(&forks[first]);
        sched_yield(); /* think */
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
    pthread_t threads[N];
    for (int i = 0; i < N; i++)
        pthread_mutex_init(&forks[i], NULL);
    for (long i = 0; i < N; i++) {
        if (i > 0)
            stagger();
        pthread_create(&threads[i], NULL, philosopher, (void *)i);
    }
    int total = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(threads[i], NULL);
        total += meals[i];
    }
    printf("%d philosophers ate %d meals\n", N, total);
    return total == N * MEALS ? 0 : 1;
}
