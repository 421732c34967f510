/*
 * Writes N pages (argv[1], default 64) in a second thread, then exits.
 * Benchmarks use it to measure how a snapshot restore's cost grows with the
 * number of pages a run dirtied.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long pages = 64;

static void *writer(void *arg)
{
    (void)arg;
    /* volatile: the stores must happen although nothing reads them */
    volatile char *p = malloc(pages * 4096);
    if (!p)
        return NULL;
    for (long i = 0; i < pages; i++)
        p[i * 4096] = (char)(i + 1);
    free((void *)p);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        pages = atol(argv[1]);
    pthread_t t;
    pthread_create(&t, NULL, writer, NULL);
    pthread_join(t, NULL);
    printf("wrote %ld pages\n", pages);
    return 0;
}
