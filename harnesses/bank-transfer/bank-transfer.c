/*
 * Bank transfers with one mutex per account.  transfer(from, to) locks
 * `from`, records the teller's thread id on it for the audit trail (gettid,
 * a system call), then locks `to` and moves the money.  One teller moves 10
 * from A to B twice, the other moves 5 from B to A once.
 *
 * Bug: the two tellers lock the same two accounts in opposite orders.  If
 * teller 1 is preempted at its audit call while holding A and teller 2 then
 * locks B, each waits for the other's account: deadlocked.  One preemption
 * at a system call, so no shim is needed.
 *
 * Fix (-DFIXED): lock the account at the lower address first, whatever the
 * direction of the transfer; one global order admits no cycle.
 */
#define _GNU_SOURCE
#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

struct account {
    pthread_mutex_t lock;
    long balance;
    pid_t last_teller;
};

static struct account accounts[2] = {
    {PTHREAD_MUTEX_INITIALIZER, 100, 0},
    {PTHREAD_MUTEX_INITIALIZER, 100, 0},
};

static void transfer(struct account *from, struct account *to, long amount)
{
#ifdef FIXED
    struct account *first = from < to ? from : to;
    struct account *second = from < to ? to : from;
#else
    struct account *first = from, *second = to;
#endif
    pthread_mutex_lock(&first->lock);
    first->last_teller = (pid_t)syscall(SYS_gettid); /* audit trail */
    pthread_mutex_lock(&second->lock);
    second->last_teller = first->last_teller;
    from->balance -= amount;
    to->balance += amount;
    pthread_mutex_unlock(&second->lock);
    pthread_mutex_unlock(&first->lock);
}

static void *teller_a_to_b(void *arg)
{
    (void)arg;
    for (int i = 0; i < 2; i++)
        transfer(&accounts[0], &accounts[1], 10);
    return NULL;
}

static void *teller_b_to_a(void *arg)
{
    (void)arg;
    transfer(&accounts[1], &accounts[0], 5);
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
    pthread_create(&t1, NULL, teller_a_to_b, NULL);
    stagger();
    pthread_create(&t2, NULL, teller_b_to_a, NULL);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    assert(accounts[0].balance + accounts[1].balance == 200);
    printf("A = %ld, B = %ld\n", accounts[0].balance, accounts[1].balance);
    return 0;
}
