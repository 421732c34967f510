/*
 * ABA in a lock-free free list: three buffers on a Treiber stack whose head
 * is an atomic word naming the top buffer.  pop() loads the head and the
 * top's `next`, then swings the head to next with a compare-and-swap.  A
 * sender takes a buffer, fills it and returns it, three times; a packer
 * takes two, packs the first into the second, returns the first and hands
 * the second to main, which returns it.  Main then walks the stack.
 *
 * Bug: the compare-and-swap only checks that the head names the same
 * buffer.  If the sender is preempted in pop() after reading top = A and
 * next = B, right before its compare-and-swap (`lock cmpxchg`), and the
 * packer runs its whole job (pops A, pops B, pushes A back, exits holding
 * B), the sender's compare-and-swap still sees A and installs B, which is
 * off the stack, as the top; main's push of B then links a cycle and the
 * final walk's assert fails: SIGABRT.  One preemption, then the packer runs
 * about six atomic operations in a row (main waits in join, so the sender
 * runs next).  The window, from the loads to the compare-and-swap, holds no
 * system call: its only scheduling point is the sync site at the locked
 * instruction.  Natively the window is a few instructions wide and the
 * packer starts long after the sender is done.
 *
 * Fix (-DFIXED): the head word also counts modifications (high 32 bits,
 * bumped by every push and pop), so a head that went from A away and back
 * to A no longer compares equal: the stale compare-and-swap fails and pop()
 * retries with the current head.
 */
#include <assert.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <pthread.h>

#define NBUF 3
#define NIL UINT32_MAX

struct buffer {
    _Atomic uint32_t next;
    atomic_int on_stack;
    int data;
};

/* The stack starts as 0 -> 1 -> 2. */
static struct buffer buffers[NBUF] = {{1, 1, 0}, {2, 1, 0}, {NIL, 1, 0}};
static _Atomic uint64_t head = 0; /* low 32 bits: top index; fixed: high 32 bits count */

static uint32_t top_of(uint64_t word) { return (uint32_t)word; }

/* The head word that makes `index` the top, replacing `old`. */
static uint64_t successor(uint64_t old, uint32_t index)
{
#ifdef FIXED
    return ((old >> 32) + 1) << 32 | index;
#else
    (void)old;
    return index;
#endif
}

static uint32_t pop(void)
{
    uint64_t old = atomic_load_explicit(&head, memory_order_acquire);
    uint32_t top;
    for (;;) {
        top = top_of(old);
        assert(top != NIL); /* never empty: at most NBUF are taken */
        uint32_t next = atomic_load_explicit(&buffers[top].next, memory_order_relaxed);
        if (atomic_compare_exchange_strong(&head, &old, successor(old, next)))
            break;
    }
    int was_free = atomic_exchange(&buffers[top].on_stack, 0);
    assert(was_free);
    return top;
}

static void push(uint32_t index)
{
    int was_free = atomic_exchange(&buffers[index].on_stack, 1);
    assert(!was_free);
    uint64_t old = atomic_load_explicit(&head, memory_order_relaxed);
    do
        atomic_store_explicit(&buffers[index].next, top_of(old), memory_order_relaxed);
    while (!atomic_compare_exchange_strong(&head, &old, successor(old, index)));
}

static void *sender(void *arg)
{
    (void)arg;
    for (int round = 1; round <= 3; round++) {
        uint32_t b = pop();
        buffers[b].data = round;
        push(b);
    }
    return NULL;
}

/* Packs one buffer into another and returns the packed one's index. */
static void *packer(void *arg)
{
    (void)arg;
    uint32_t first = pop();
    uint32_t second = pop();
    buffers[second].data += buffers[first].data;
    push(first);
    return (void *)(uintptr_t)second;
}

/* Busy work between thread starts, so that natively the threads do not
 * start together.  No system call, no atomic, no global (the sink is on the
 * stack): nothing to the VM, even with global accesses as sync sites. */
static void stagger(void)
{
    volatile unsigned sink = 0;
    for (unsigned i = 0; i < 100000; i++)
        sink += i;
}

int main(void)
{
    pthread_t t1, t2;
    void *packed;
    pthread_create(&t1, NULL, sender, NULL);
    stagger();
    pthread_create(&t2, NULL, packer, NULL);
    pthread_join(t1, NULL);
    pthread_join(t2, &packed);
    push((uint32_t)(uintptr_t)packed);

    /* Every buffer is back on the stack exactly once. */
    int seen[NBUF] = {0}, count = 0;
    for (uint32_t i = top_of(atomic_load(&head)); i != NIL; i = atomic_load(&buffers[i].next)) {
        assert(count < NBUF && !seen[i] && atomic_load(&buffers[i].on_stack));
        seen[i] = 1;
        count++;
    }
    assert(count == NBUF);
    printf("%d buffers free\n", count);
    return 0;
}
