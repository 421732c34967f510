// A lock's memory reused for something else: main takes and frees two
// spinlocks, then allocates two claim flags that land where the locks
// were. Each worker claims both flags, in opposite orders, with a
// compare-and-swap that gives up when the flag is taken (nobody waits for
// a flag), and clears them after. The flags are no locks and the locks
// were never held together: no finding of any kind is right.
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

struct box { atomic_int word; long payload[7]; };

static void spin_lock(atomic_int *l) {
    while (atomic_exchange_explicit(l, 1, memory_order_acquire))
        while (atomic_load_explicit(l, memory_order_relaxed))
            __builtin_ia32_pause();
}

static void spin_unlock(atomic_int *l) { atomic_store_explicit(l, 0, memory_order_release); }

static __attribute__((noinline)) int claim(struct box *b) {
    int free = 0;
    return atomic_compare_exchange_strong(&b->word, &free, 1);
}

static __attribute__((noinline)) void unclaim(struct box *b) { atomic_exchange(&b->word, 0); }

static struct box *flags[2];
static long claimed;

static void *worker(void *arg) {
    int first = arg != 0, second = !first;
    for (int i = 0; i < 20; i++) {
        int a = claim(flags[first]);
        int b = claim(flags[second]);
        if (a && b) atomic_fetch_add(&claimed, 1);
        if (b) unclaim(flags[second]);
        if (a) unclaim(flags[first]);
    }
    return 0;
}

int main(void) {
    struct box *locks[2] = {malloc(sizeof(struct box)), malloc(sizeof(struct box))};
    for (int i = 0; i < 2; i++) {
        atomic_init(&locks[i]->word, 0);
        spin_lock(&locks[i]->word);
        locks[i]->payload[0] = i;
        spin_unlock(&locks[i]->word);
    }
    free(locks[1]);
    free(locks[0]);
    for (int i = 0; i < 2; i++) {
        flags[i] = malloc(sizeof(struct box));
        atomic_init(&flags[i]->word, 0);
    }
    int reused = flags[0] == locks[0] && flags[1] == locks[1];
    pthread_t t[2];
    for (long i = 0; i < 2; i++) pthread_create(&t[i], 0, worker, (void *)i);
    for (int i = 0; i < 2; i++) pthread_join(t[i], 0);
    printf("flags %s the locks' memory, both claimed %ld times\n",
           reused ? "reuse" : "do not reuse", claimed);
    return !reused;
}
