/*
 * Atomicity violation: an account whose getter and setter are each
 * thread-safe (each takes the lock), composed into a deposit that is not.
 * Two threads deposit 10 twice each; main asserts the balance is 40.  The
 * second first audits the account's last eight records, stamping each
 * check with its thread id (gettid, a system call).
 *
 * Bug: deposit() reads the balance in one critical section and writes
 * balance + amount in another.  If a thread is preempted between the two
 * (at the second pthread_mutex_lock) and the other thread deposits in the
 * meantime, that deposit is overwritten: a lost update, and the final
 * assert aborts.  One preemption, but the second thread's deposit comes
 * after its audit: it must run about a dozen scheduling points in a row
 * while the first waits in its window, which PCT and a search that lets
 * the thread it switched to run on find quickly and a coin flip at every
 * step rarely does.  The window holds only pthread calls, so the shim is
 * needed.
 *
 * Fix (-DFIXED): read and write in one critical section, so no other
 * deposit can come between them.
 */
#define _GNU_SOURCE
#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int balance;

static int get_balance(void)
{
    pthread_mutex_lock(&lock);
    int value = balance;
    pthread_mutex_unlock(&lock);
    return value;
}

static void set_balance(int value)
{
    pthread_mutex_lock(&lock);
    balance = value;
    pthread_mutex_unlock(&lock);
}

static void deposit(int amount)
{
#ifdef FIXED
    pthread_mutex_lock(&lock);
    balance += amount;
    pthread_mutex_unlock(&lock);
#else
    set_balance(get_balance() + amount);
#endif
}

static void audit(void)
{
    static pid_t auditor[8];
    for (int record = 0; record < 8; record++)
        auditor[record] = (pid_t)syscall(SYS_gettid);
}

static void *depositor(void *arg)
{
    if (arg != NULL)
        audit();
    for (int i = 0; i < 2; i++)
        deposit(10);
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
    pthread_t t1, t2;
    pthread_create(&t1, NULL, depositor, NULL);
    stagger();
    pthread_create(&t2, NULL, depositor, &t1);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    assert(balance == 40);
    printf("balance = %d\n", balance);
    return 0;
}
