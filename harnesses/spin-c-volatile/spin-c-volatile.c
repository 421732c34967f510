/*
 * Spin-wait on a volatile global: main starts a worker that computes a
 * table checksum (arithmetic only), stores it and sets `flag`, while main
 * waits with `while (!flag);`.  The loop is two instructions, a load of
 * `flag` through a RIP-relative address and a branch back, with no system
 * call, no store and no call: its scheduling points are the loop's backward
 * branch (a spin-loop sync site) and, at the level `globals`, the load.
 *
 * On one vCPU, main spinning first would spin forever unless the machine
 * switches threads at the loop: every schedule must let the worker run and
 * the program exit 0.  (volatile is no synchronization in C11; on x86-64
 * with GCC it gives one plain load or store per access in program order,
 * which is the pattern of the old code this stands for.)
 */
#include <pthread.h>
#include <stdio.h>

static volatile int flag;
static volatile unsigned checksum;

static void *worker(void *arg)
{
    (void)arg;
    unsigned sum = 0;
    for (unsigned i = 0; i < 5000; i++)
        sum = sum * 31 + i % 97;
    checksum = sum;
    flag = 1;
    return NULL;
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    while (!flag)
        ;
    unsigned seen = checksum;
    pthread_join(t, NULL);
    printf("checksum %08x\n", seen);
    return 0;
}
