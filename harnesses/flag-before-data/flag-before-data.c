/*
 * Publication in the wrong order through plain globals: main starts a
 * worker that waits for `ready` (polling, with a sched_yield between polls)
 * and then reads `port`; main then publishes the port and the flag.  Both
 * are `volatile int` globals: each access is one mov with a RIP-relative
 * address, in program order (volatile is no synchronization in C11; this
 * stands for the hand-rolled flags of old code).
 *
 * Bug: main sets `ready = 1` before it stores `port = 8080`.  The worker
 * reads `port` only after it has seen `ready`, so it sees 0 exactly when it
 * runs between main's two stores: if main is preempted right before the
 * store to `port`, the worker's next poll sees the flag and its assert
 * fails: SIGABRT.  That preemption is necessary (on one vCPU nothing else
 * puts the worker's two loads between the stores) and sufficient (the
 * worker exists from pthread_create on and never blocks: it polls).  One
 * preemption, and the two adjacent stores hold no system call, no pthread
 * call and no atomic instruction: the only scheduling point between them
 * is the store to `port` itself, a sync site only at the level `globals`
 * (plain loads and stores of globals).  Natively the window is one
 * instruction wide.
 *
 * Fix (-DFIXED): store the port first, then the flag.  On x86-64 stores
 * become visible in program order and the compiler keeps volatile accesses
 * in order, so a worker that sees the flag sees the port.
 */
#include <assert.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>

static volatile int ready;
static volatile int port;

static void *worker(void *arg)
{
    int *used = arg;
    while (!ready)
        sched_yield();
    int p = port;
    assert(p == 8080);
    *used = p;
    return NULL;
}

int main(void)
{
    pthread_t t;
    int used = 0;
    pthread_create(&t, NULL, worker, &used);
#ifdef FIXED
    port = 8080;
    ready = 1;
#else
    ready = 1;
    port = 8080;
#endif
    pthread_join(t, NULL);
    printf("worker used port %d\n", used);
    return 0;
}
