/*
 * Atomicity violation: an account whose getter and setter are each
 * thread-safe (each takes the lock), composed into a deposit that is not.
 * Two threads deposit 10 twice each; main asserts the balance is 40.
 *
 * Bug: deposit() reads the balance in one critical section and writes
 * balance + amount in another.  If a thread is preempted between the two
 * (at the second pthread_mutex_lock) and the other thread deposits in the
 * meantime, that deposit is overwritten: a lost update, and the final
 * assert aborts.  One preemption; the window holds only pthread calls, so
 * the shim is needed.
 *
 * Fix (-DFIXED): read and write in one critical section, so no other
 * deposit can come between them.
 */
#include <assert.h>
#include <pthread.h>
#include <stdio.h>

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

static void *depositor(void *arg)
{
    (void)arg;
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
    static volatile unsigned sink;
    for (unsigned i = 0; i < 100000; i++)
        sink += i;
}

int main(void)
{
    pthread_t t1, t2;
    pthread_create(&t1, NULL, depositor, NULL);
    stagger();
    pthread_create(&t2, NULL, depositor, NULL);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    assert(balance == 40);
    printf("balance = %d\n", balance);
    return 0;
}
