/*
 * The classic ABBA deadlock: thread 1 takes lock A then lock B, thread 2
 * takes B then A, twice each.
 *
 * Bug: if thread 1 is preempted between its two locks (holding A) and
 * thread 2 then takes B, each waits for the lock the other holds.  One
 * preemption; the window holds only the pthread_mutex_lock of B, so it is
 * reachable through the shim's scheduling points only.
 *
 * Fix (-DFIXED): both threads take A before B.  With one global lock order
 * a thread holding A never waits for a thread that holds B and wants A.
 */
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t b = PTHREAD_MUTEX_INITIALIZER;
static int shared;

static void *thread_ab(void *arg)
{
    (void)arg;
    for (int i = 0; i < 2; i++) {
        pthread_mutex_lock(&a);
        pthread_mutex_lock(&b);
        shared++;
        pthread_mutex_unlock(&b);
        pthread_mutex_unlock(&a);
    }
    return NULL;
}

static void *thread_ba(void *arg)
{
    (void)arg;
    for (int i = 0; i < 2; i++) {
#ifdef FIXED
        pthread_mutex_lock(&a);
        pthread_mutex_lock(&b);
#else
        pthread_mutex_lock(&b);
        pthread_mutex_lock(&a);
#endif
        shared += 10;
        pthread_mutex_unlock(&a);
        pthread_mutex_unlock(&b);
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
    pthread_t t1, t2;
    pthread_create(&t1, NULL, thread_ab, NULL);
    stagger();
    pthread_create(&t2, NULL, thread_ba, NULL);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    printf("shared = %d\n", shared);
    return shared == 22 ? 0 : 1;
}
