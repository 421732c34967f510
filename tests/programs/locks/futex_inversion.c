// Two hand-written futex mutexes (Drepper's "mutex 2": 0 free, 1 taken, 2
// taken with sleepers) taken in opposite orders: a potential deadlock, and
// a deadlock when a thread is preempted between its two acquisitions.
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

static atomic_int accounts_lock, ledger_lock;
static int counter;

static void lock(atomic_int *m) {
    int c = 0;
    if (atomic_compare_exchange_strong(m, &c, 1))
        return;
    if (c != 2)
        c = atomic_exchange(m, 2);
    while (c != 0) {
        syscall(SYS_futex, m, FUTEX_WAIT_PRIVATE, 2, 0, 0, 0);
        c = atomic_exchange(m, 2);
    }
}

static void unlock(atomic_int *m) {
    if (atomic_fetch_sub(m, 1) != 1) {
        atomic_store(m, 0);
        syscall(SYS_futex, m, FUTEX_WAKE_PRIVATE, 1, 0, 0, 0);
    }
}

static void *post(void *arg) {
    lock(&accounts_lock);
    lock(&ledger_lock);
    counter++;
    unlock(&ledger_lock);
    unlock(&accounts_lock);
    return 0;
}

static void *audit(void *arg) {
    lock(&ledger_lock);
    lock(&accounts_lock);
    counter++;
    unlock(&accounts_lock);
    unlock(&ledger_lock);
    return 0;
}

int main(void) {
    pthread_t a, b;
    pthread_create(&a, 0, post, 0);
    pthread_create(&b, 0, audit, 0);
    pthread_join(a, 0);
    pthread_join(b, 0);
    printf("%d\n", counter);
    return 0;
}
