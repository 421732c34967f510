/*
 * Bug: a lock-order inversion that never deadlocks in this program: thread 1
 * takes A then B and finishes (main joins it) before thread 2 starts and
 * takes B then A.  No schedule deadlocks, because the two never overlap,
 * but the lock-order graph has the cycle A -> B -> A, which would deadlock
 * as soon as the two ran concurrently.  A lockdep-style detector reports it
 * as a potential deadlock in every run.  The acquisitions are uncontended,
 * so only the shim's scheduling points make them visible.
 *
 * Fix (-DFIXED): thread 2 also takes A before B; the graph has no cycle.
 */
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t b = PTHREAD_MUTEX_INITIALIZER;
static int value;

static void *first(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&a);
    pthread_mutex_lock(&b);
    value += 1;
    pthread_mutex_unlock(&b);
    pthread_mutex_unlock(&a);
    return NULL;
}

static void *second(void *arg)
{
    (void)arg;
#ifdef FIXED
    pthread_mutex_lock(&a);
    pthread_mutex_lock(&b);
#else
    pthread_mutex_lock(&b);
    pthread_mutex_lock(&a);
#endif
    value *= 10;
    pthread_mutex_unlock(&a);
    pthread_mutex_unlock(&b);
    return NULL;
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, NULL, first, NULL);
    pthread_join(t, NULL);
    pthread_create(&t, NULL, second, NULL);
    pthread_join(t, NULL);
    printf("value = %d\n", value);
    return value == 10 ? 0 : 1;
}
