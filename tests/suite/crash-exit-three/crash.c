/* A worker clears a shared pointer for a moment; main reads through it.
 * Natively and under most schedules main reads before or after, and the
 * program exits 3, its normal code; a switch inside the window crashes it.
 * Fixed: the worker never clears the pointer. */
#include <pthread.h>
#include <unistd.h>
#include <sys/syscall.h>

static int value = 7;
static int *volatile shared = &value;

static void *worker(void *arg) {
#ifndef FIXED
    shared = 0;
#endif
    syscall(SYS_gettid);
    shared = &value;
    return arg;
}

int main(void) {
    pthread_t t;
    pthread_create(&t, 0, worker, 0);
    syscall(SYS_getpid);
    int v = *shared;
    pthread_join(t, 0);
    return v == 7 ? 3 : 1;
}
