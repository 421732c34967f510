// The same lost update on a counter the threads reach through a pointer
// (on the heap): its loads and stores are not global variables'.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define ROUNDS 50

static void *add(void *arg) {
    int *counter = arg;
    for (int i = 0; i < ROUNDS; i++)
        *counter = *counter + 1;
    return NULL;
}

int main(void) {
    int *counter = calloc(1, sizeof *counter);
    pthread_t a, b;
    pthread_create(&a, NULL, add, counter);
    pthread_create(&b, NULL, add, counter);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("%d\n", *counter);
    return *counter == 2 * ROUNDS ? 0 : 1;
}
