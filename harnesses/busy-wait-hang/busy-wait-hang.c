/*
 * Hang: a job runner hands each job to a new worker and waits for the
 * worker's `done` flag by polling, yielding between polls (the
 * spin-then-yield wait of many hand-written completion flags).
 *
 * Bug: the runner starts the worker first and only then clears `done`,
 * left set by the previous job.  If the runner is preempted right after
 * the clone and the worker finishes its job (four chunks of arithmetic,
 * each traced with gettid, a system call) before the runner resumes, the
 * runner clears the flag the worker has just set and polls forever.  Every
 * thread is either gone or making system calls, so this is no deadlock:
 * the run ends on the step budget (`hung`).  Natively the runner clears the
 * flag long before the new thread has even started, so the loop almost
 * never sees it.
 *
 * Fix (-DFIXED): clear the flag before starting the worker; thread
 * creation orders everything before it ahead of everything the worker
 * does.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static int done; /* accessed with __atomic builtins */

static void *job(void *arg)
{
    long *result = arg;
    long sum = 0;
    static pid_t trace[4];
    for (int chunk = 0; chunk < 4; chunk++) {
        for (long i = chunk * 250000; i < (chunk + 1) * 250000; i++)
            sum += i % 7;
        trace[chunk] = (pid_t)syscall(SYS_gettid);
    }
    *result = sum;
    __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static long run_job(void)
{
    long result = 0;
    pthread_t t;
#ifdef FIXED
    __atomic_store_n(&done, 0, __ATOMIC_RELEASE);
#endif
    if (pthread_create(&t, NULL, job, &result) != 0)
        abort();
#ifndef FIXED
    /* Too late: the worker may have finished already. */
    __atomic_store_n(&done, 0, __ATOMIC_RELEASE);
#endif
    while (!__atomic_load_n(&done, __ATOMIC_ACQUIRE))
        sched_yield();
    pthread_join(t, NULL);
    return result;
}

int main(void)
{
    long first = run_job();
    long second = run_job();
    printf("jobs %ld %ld\n", first, second);
    return 0;
}
