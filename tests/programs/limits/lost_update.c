// Two threads add to a global counter without a lock: `counter =
// counter + 1` is a load, an add and a store, and an update is lost when
// the other thread stores between them. Built with `-O0` the load and the
// store are two instructions; with `-DONE_INSTRUCTION` (and any -O) the
// addition is one `add` to memory, which one vCPU never interrupts.
#include <pthread.h>
#include <stdio.h>

#define ROUNDS 50

static int counter;

static void *add(void *arg) {
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
#ifdef ONE_INSTRUCTION
        __asm__ volatile("addl $1, %0" : "+m"(counter));
#else
        counter = counter + 1;
#endif
    }
    return NULL;
}

int main(void) {
    pthread_t a, b;
    pthread_create(&a, NULL, add, NULL);
    pthread_create(&b, NULL, add, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("%d\n", counter);
    return counter == 2 * ROUNDS ? 0 : 1;
}
