// Correct code shaped like flume's select: a signal queue under a
// spinlock (released by a plain store) and a channel under a futex mutex
// (released by an exchange). The selecting thread takes the spinlock,
// pops, lets it go, and only then takes the channel's mutex; the sending
// thread signals under the channel's mutex. No schedule deadlocks, and no
// lock is ever taken inside the spinlock: no finding.
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

static atomic_int signal_lock, channel_lock;
static int signals, messages, received;

static void spin_lock(atomic_int *l) {
    int expected = 0;
    while (!atomic_compare_exchange_weak_explicit(l, &expected, 1, memory_order_acquire,
                                                  memory_order_relaxed)) {
        expected = 0;
        __builtin_ia32_pause();
    }
}

static void spin_unlock(atomic_int *l) { atomic_store_explicit(l, 0, memory_order_release); }

static void mutex_lock(atomic_int *m) {
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

static void mutex_unlock(atomic_int *m) {
    if (atomic_exchange(m, 0) == 2)
        syscall(SYS_futex, m, FUTEX_WAKE_PRIVATE, 1, 0, 0, 0);
}

static void *send(void *arg) {
    for (int i = 0; i < 20; i++) {
        mutex_lock(&channel_lock);
        messages++;
        spin_lock(&signal_lock);
        signals++;
        spin_unlock(&signal_lock);
        mutex_unlock(&channel_lock);
    }
    return 0;
}

static void *select_loop(void *arg) {
    while (received < 20) {
        spin_lock(&signal_lock);
        int ready = signals > 0;
        if (ready)
            signals--;
        spin_unlock(&signal_lock);
        if (!ready) {
            sched_yield();
            continue;
        }
        mutex_lock(&channel_lock);
        messages--;
        received++;
        mutex_unlock(&channel_lock);
    }
    return 0;
}

int main(void) {
    pthread_t a, b;
    pthread_create(&a, 0, select_loop, 0);
    pthread_create(&b, 0, send, 0);
    pthread_join(a, 0);
    pthread_join(b, 0);
    printf("%d %d\n", received, messages);
    return 0;
}
