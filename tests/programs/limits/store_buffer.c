// Dekker's test: each thread sets its flag, then reads the other's. On one
// CPU, or any sequentially consistent machine, at least one sees the
// other's flag; on a multi-core x86 a store can wait in its core's store
// buffer while the load passes it, and both read 0.
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

static atomic_int x, y;
static int r1, r2;

static void *left(void *arg) {
    (void)arg;
    atomic_store_explicit(&x, 1, memory_order_relaxed);
    r1 = atomic_load_explicit(&y, memory_order_relaxed);
    return NULL;
}

static void *right(void *arg) {
    (void)arg;
    atomic_store_explicit(&y, 1, memory_order_relaxed);
    r2 = atomic_load_explicit(&x, memory_order_relaxed);
    return NULL;
}

int main(void) {
    pthread_t a, b;
    pthread_create(&a, NULL, left, NULL);
    pthread_create(&b, NULL, right, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("%d %d\n", r1, r2);
    return r1 == 0 && r2 == 0 ? 1 : 0;
}
