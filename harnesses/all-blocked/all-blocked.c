/*
 * Every thread blocks for good under every schedule: two threads each wait
 * on a condition variable nobody signals (the predicate never becomes true),
 * and main joins the first of them.  There is no lock cycle; the monitor
 * must see that no thread is runnable and no timer is pending.  Natively it
 * never ends.
 */
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
static int signalled; /* nobody ever sets it */

static void *waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    while (!signalled)
        pthread_cond_wait(&never, &lock);
    pthread_mutex_unlock(&lock);
    return NULL;
}

int main(void)
{
    printf("two threads wait for a signal nobody sends\n");
    fflush(stdout);
    pthread_t a, b;
    pthread_create(&a, NULL, waiter, NULL);
    pthread_create(&b, NULL, waiter, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("not reached\n");
    return 0;
}
