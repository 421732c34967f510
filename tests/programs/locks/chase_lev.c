// A correct Chase-Lev work-stealing deque (the C11 version of Le et al.,
// PPoPP 2013) with a fixed buffer: the owner pushes and takes at the
// bottom, two thieves steal from the top with compare-and-swap, which takes
// `top` from 0 on the first steal and never sets it back. Every item is
// taken exactly once; no finding of any kind is right.
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#define N 1024
#define ROUNDS 4
#define ITEMS 20

static atomic_long top, bottom;
static atomic_long buffer[N];
static atomic_long stolen, taken;
static atomic_int done;

static void push(long x) {
    long b = atomic_load_explicit(&bottom, memory_order_relaxed);
    atomic_store_explicit(&buffer[b % N], x, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&bottom, b + 1, memory_order_relaxed);
}

// The owner's end: -1 when empty.
static long take(void) {
    long b = atomic_load_explicit(&bottom, memory_order_relaxed) - 1;
    atomic_store_explicit(&bottom, b, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst);
    long t = atomic_load_explicit(&top, memory_order_relaxed);
    long x = -1;
    if (t <= b) {
        x = atomic_load_explicit(&buffer[b % N], memory_order_relaxed);
        if (t == b) {
            if (!atomic_compare_exchange_strong_explicit(&top, &t, t + 1, memory_order_seq_cst,
                                                         memory_order_relaxed))
                x = -1;
            atomic_store_explicit(&bottom, b + 1, memory_order_relaxed);
        }
    } else {
        atomic_store_explicit(&bottom, b + 1, memory_order_relaxed);
    }
    return x;
}

// A thief's end: -1 when empty, -2 when another thief won the race.
static long steal(void) {
    long t = atomic_load_explicit(&top, memory_order_acquire);
    atomic_thread_fence(memory_order_seq_cst);
    long b = atomic_load_explicit(&bottom, memory_order_acquire);
    if (t >= b)
        return -1;
    long x = atomic_load_explicit(&buffer[t % N], memory_order_relaxed);
    if (!atomic_compare_exchange_strong_explicit(&top, &t, t + 1, memory_order_seq_cst,
                                                 memory_order_relaxed))
        return -2;
    return x;
}

static void *thief(void *arg) {
    while (!atomic_load(&done)) {
        if (steal() >= 0)
            atomic_fetch_add(&stolen, 1);
        else
            __builtin_ia32_pause();
    }
    return 0;
}

int main(void) {
    pthread_t a, b;
    pthread_create(&a, 0, thief, 0);
    pthread_create(&b, 0, thief, 0);
    for (int r = 0; r < ROUNDS; r++) {
        for (long i = 0; i < ITEMS; i++)
            push(i);
        while (take() >= 0)
            atomic_fetch_add(&taken, 1);
        // Wait for the thieves to finish the items they are taking.
        while (atomic_load(&taken) + atomic_load(&stolen) < (r + 1) * ITEMS)
            __builtin_ia32_pause();
    }
    atomic_store(&done, 1);
    pthread_join(a, 0);
    pthread_join(b, 0);
    long all = atomic_load(&stolen) + atomic_load(&taken);
    printf("%ld\n", all);
    return all == ROUNDS * ITEMS ? 0 : 1;
}
