// An index published with atomic_exchange next to a real spinlock: one
// thread publishes the index, then takes the lock; the other takes the
// lock, then publishes. Each thread sets the index back to 0 after it.
// Nobody ever waits for the index, so the lock is taken in one order only:
// no finding of any kind is right.
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

static atomic_int spin;
static atomic_long index_published;
static long data[64];

static void lock(void) {
    while (atomic_exchange_explicit(&spin, 1, memory_order_acquire))
        while (atomic_load_explicit(&spin, memory_order_relaxed))
            __builtin_ia32_pause();
}

static void unlock(void) { atomic_exchange_explicit(&spin, 0, memory_order_release); }

static void *publisher(void *arg) {
    for (long i = 1; i < 20; i++) {
        atomic_exchange(&index_published, i);
        lock();
        data[i] = i;
        unlock();
        atomic_exchange(&index_published, 0);
    }
    return 0;
}

static void *worker(void *arg) {
    for (long i = 1; i < 20; i++) {
        lock();
        data[0] += atomic_exchange(&index_published, 100 + i);
        atomic_exchange(&index_published, 0);
        unlock();
    }
    return 0;
}

int main(void) {
    pthread_t a, b;
    pthread_create(&a, 0, publisher, 0);
    pthread_create(&b, 0, worker, 0);
    pthread_join(a, 0);
    pthread_join(b, 0);
    printf("done\n");
    return 0;
}
