// Two C11 spinlocks taken in opposite orders: a test-and-test-and-set lock
// and a compare-and-swap lock, released with plain release stores. A
// deadlock when a thread is preempted between its two acquisitions (the
// threads then spin for each other). Released by stores no site sees,
// they order nothing: a run that does not deadlock gets no warning.
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

static atomic_int first_lock, second_lock;
static int counter;

static void lock_exchange(atomic_int *l) {
    while (atomic_exchange_explicit(l, 1, memory_order_acquire))
        while (atomic_load_explicit(l, memory_order_relaxed))
            __builtin_ia32_pause();
}

static void lock_compare(atomic_int *l) {
    int expected = 0;
    while (!atomic_compare_exchange_weak_explicit(l, &expected, 1, memory_order_acquire,
                                                  memory_order_relaxed))
        expected = 0;
}

static void unlock(atomic_int *l) { atomic_store_explicit(l, 0, memory_order_release); }

static void *forward(void *arg) {
    lock_exchange(&first_lock);
    lock_compare(&second_lock);
    counter++;
    unlock(&second_lock);
    unlock(&first_lock);
    return 0;
}

static void *backward(void *arg) {
    lock_compare(&second_lock);
    lock_exchange(&first_lock);
    counter++;
    unlock(&first_lock);
    unlock(&second_lock);
    return 0;
}

int main(void) {
    pthread_t a, b;
    pthread_create(&a, 0, forward, 0);
    pthread_create(&b, 0, backward, 0);
    pthread_join(a, 0);
    pthread_join(b, 0);
    printf("%d\n", counter);
    return 0;
}
