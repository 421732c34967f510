/* A lost update: each worker reads the sum, makes a system call, and
 * writes it back; a switch between the read and the write loses an add.
 * The program exits 0 either way: only its output shows the bug.
 * Fixed: the read and the write happen under one lock. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/syscall.h>

static long sum;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *work(void *arg) {
    for (int i = 0; i < 5; i++) {
#ifdef FIXED
        pthread_mutex_lock(&lock);
#endif
        long s = sum;
        syscall(SYS_gettid);
        sum = s + 1;
#ifdef FIXED
        pthread_mutex_unlock(&lock);
#endif
    }
    return arg;
}

int main(void) {
    pthread_t a, b;
    pthread_create(&a, 0, work, 0);
    pthread_create(&b, 0, work, 0);
    pthread_join(a, 0);
    pthread_join(b, 0);
    printf("sum = %ld\n", sum);
    return 0;
}
