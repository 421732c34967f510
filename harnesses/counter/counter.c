/*
 * Eight threads each add 1 to a shared counter 1000 times under a pthread
 * mutex.  Correct under every schedule: the total is always 8000.  With the
 * preload shim every lock and unlock is a scheduling point (16000 of them),
 * so this is also the engine's stress test for cheap hints.
 */
#include <pthread.h>
#include <stdio.h>

#define THREADS 8
#define ADDS 1000

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long counter;

static void *adder(void *arg)
{
    (void)arg;
    for (int i = 0; i < ADDS; i++) {
        pthread_mutex_lock(&lock);
        counter++;
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

int main(void)
{
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&threads[i], NULL, adder, NULL) != 0)
            return 1;
    for (int i = 0; i < THREADS; i++)
        pthread_join(threads[i], NULL);
    printf("counter = %ld\n", counter);
    return counter == THREADS * ADDS ? 0 : 1;
}
