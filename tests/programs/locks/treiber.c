// A correct Treiber stack: three threads push and pop with compare-and-swap
// on the head, which goes from empty (NULL) to a node and back. No node is
// ever freed, so there is no ABA problem: no finding of any kind is right.
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

struct node {
    struct node *next;
    long value;
};

static _Atomic(struct node *) head;

static void push(long value) {
    struct node *n = malloc(sizeof *n);
    n->value = value;
    struct node *h = atomic_load(&head);
    do {
        n->next = h;
    } while (!atomic_compare_exchange_weak(&head, &h, n));
}

static long pop(void) {
    struct node *h = atomic_load(&head);
    while (h && !atomic_compare_exchange_weak(&head, &h, h->next))
        ;
    return h ? h->value : -1;
}

static void *worker(void *arg) {
    long sum = 0;
    for (long i = 0; i < 40; i++) {
        push(i);
        long v = pop();
        if (v >= 0)
            sum += v;
    }
    return (void *)sum;
}

int main(void) {
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], 0, worker, 0);
    long sum = 0;
    for (int i = 0; i < 3; i++) {
        void *r;
        pthread_join(t[i], &r);
        sum += (long)r;
    }
    long v;
    while ((v = pop()) >= 0)
        sum += v;
    printf("%ld\n", sum);
    return sum == 3 * (39 * 40 / 2) ? 0 : 1;
}
