/*
 * Lost wakeup: a waiter tests the `ready` flag without holding the lock,
 * and then waits on the condition variable without re-testing it.
 *
 * Bug: if the waiter sees ready == 0, is preempted before it locks and
 * waits (its next scheduling point is pthread_mutex_lock), and the setter
 * then sets the flag and signals, the signal finds nobody waiting and is
 * lost; the waiter then waits forever and main blocks joining it:
 * deadlocked, with no lock cycle.  One preemption; the window holds only
 * pthread calls, so the shim is needed.  (Without a predicate loop the
 * waiter would also mistake a spurious wakeup for the signal.)
 *
 * Fix (-DFIXED): test the flag under the lock in a `while` loop around
 * pthread_cond_wait.  The setter changes the flag under the same lock, so
 * it either happens before the test (no wait) or after the waiter is
 * queued on the condvar (the signal wakes it).
 */
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int ready;
static int message;
static int received;

static void *waiter(void *arg)
{
    (void)arg;
#ifdef FIXED
    pthread_mutex_lock(&lock);
    while (!ready)
        pthread_cond_wait(&changed, &lock);
    received = message;
    pthread_mutex_unlock(&lock);
#else
    /* Fast path: skip the lock when the message is already there. */
    if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&lock);
        pthread_cond_wait(&changed, &lock);
        pthread_mutex_unlock(&lock);
    }
    pthread_mutex_lock(&lock);
    received = message;
    pthread_mutex_unlock(&lock);
#endif
    return NULL;
}

static void *setter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    message = 42;
    __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
    pthread_cond_signal(&changed);
    pthread_mutex_unlock(&lock);
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
    pthread_t w, s;
    pthread_create(&w, NULL, waiter, NULL);
    stagger();
    pthread_create(&s, NULL, setter, NULL);
    pthread_join(w, NULL);
    pthread_join(s, NULL);
    printf("received %d\n", received);
    return received == 42 ? 0 : 1;
}
