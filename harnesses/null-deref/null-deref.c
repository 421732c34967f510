/*
 * A second thread writes through a NULL pointer while main waits in
 * pthread_join: the process dies of SIGSEGV, raised in a thread other than
 * the main one, at a known address (0).
 */
#include <pthread.h>
#include <stdio.h>

static int *volatile target; /* volatile: the compiler may not assume NULL */

static void *writer(void *arg)
{
    (void)arg;
    *target = 42;
    return NULL;
}

int main(void)
{
    printf("writing through NULL in a second thread\n");
    fflush(stdout);
    pthread_t thread;
    pthread_create(&thread, NULL, writer, NULL);
    pthread_join(thread, NULL);
    printf("not reached\n");
    return 0;
}
