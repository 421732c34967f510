/*
 * Reads its own machine code: an FNV-1a hash of the bytes from
 * `__executable_start` (the ELF header, where the first segment begins) up
 * to `etext` (the end of .text), once before its threads run and once
 * after.  The code it hashes holds every kind of sync site: locked
 * read-modify-writes (`lock add`, `lock xadd`), an XCHG with memory, a
 * PAUSE spin loop, and RIP-relative loads and stores of globals.
 *
 * Whatever the machine does to stop at those instructions must be
 * invisible to a program that reads its code: both hashes must equal the
 * native run's.  The hash depends only on the binary: a PIE's text carries
 * no relocations, and the range is the file's first bytes as they are (the
 * gap after the first segment is zeros in the file too), so natively every
 * run prints the same line, but every build prints a different one: a test
 * compares the machine's output with a native run's, not with a string.
 */
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

extern const unsigned char __executable_start[], etext[];

static unsigned long counter;
static int started;
static int last_round;

static uint32_t text_hash(void)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = __executable_start; p < etext; p++)
        h = (h ^ *p) * 16777619u;
    return h;
}

static void *worker(void *arg)
{
    (void)arg;
    __atomic_exchange_n(&started, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < 100; i++) {
        __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
        last_round = i;
    }
    return NULL;
}

int main(void)
{
    uint32_t before = text_hash();
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    /* The wait yields too, so the program ends even where only system
     * calls are scheduling points. */
    while (!__atomic_load_n(&started, __ATOMIC_ACQUIRE)) {
        __builtin_ia32_pause();
        sched_yield();
    }
    /* Tickets drawn from a shared counter only grow. */
    unsigned long previous = 0;
    for (int i = 0; i < 100; i++) {
        unsigned long ticket = __atomic_fetch_add(&counter, 2, __ATOMIC_SEQ_CST);
        if (ticket < previous)
            return 1;
        previous = ticket;
    }
    pthread_join(t, NULL);
    uint32_t after = text_hash();
    printf("text %zu bytes: fnv1a %08x before threads, %08x after; counter %lu, last round %d\n",
           (size_t)(etext - __executable_start), (unsigned)before, (unsigned)after, counter,
           last_round);
    return 0;
}
