/*
 * A counting semaphore used as a mutex but initialized to 2.
 *
 * Two threads each use a single-port "device" twice.  The device section
 * counts the threads inside it, asserts it is alone, and records its owner
 * thread id (gettid, a system call) before releasing the device.  The
 * second thread first runs a self-test of eight probes, each stamped with
 * its thread id (gettid).
 *
 * Bug: sem_init(&port, 0, 2) admits two threads at once.  If the first
 * thread is preempted inside the section (at gettid) and the second runs
 * its self-test and enters, the second one's assert(inside == 1) aborts.
 * One preemption at a system call (no shim needed), but then the second
 * thread must run about a dozen scheduling points in a row: PCT and a
 * search that lets the thread it switched to run on find that quickly, a
 * coin flip at every step rarely does.
 *
 * Fix (-DFIXED): initialize the semaphore to 1, the number of ports, so a
 * second thread blocks in sem_wait until the first posts.
 */
#define _GNU_SOURCE
#include <assert.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#define THREADS 2
#define USES 2

#ifdef FIXED
#define PORTS 1
#else
#define PORTS 2 /* copied from the two-port model; this device has one */
#endif

static sem_t port;
static int inside;
static pid_t owner;
static int uses;

static void use_device(void)
{
    sem_wait(&port);
    inside++;
    assert(inside == 1);
    owner = (pid_t)syscall(SYS_gettid);
    uses++;
    inside--;
    sem_post(&port);
}

static void self_test(void)
{
    static pid_t probe[8];
    for (int i = 0; i < 8; i++)
        probe[i] = (pid_t)syscall(SYS_gettid);
}

static void *user(void *arg)
{
    if (arg != NULL)
        self_test();
    for (int i = 0; i < USES; i++)
        use_device();
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
    sem_init(&port, 0, PORTS);
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++) {
        if (i > 0)
            stagger();
        pthread_create(&threads[i], NULL, user, i > 0 ? &threads[0] : NULL);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(threads[i], NULL);
    printf("device used %d times, last owner set: %s\n", uses, owner > 0 ? "yes" : "no");
    return uses == THREADS * USES ? 0 : 1;
}
