/* A thread polls an empty pipe with a 20 ms timeout while two other
 * threads pass a byte back and forth through pipes of their own as fast as
 * they can (at most 200,000 times), until the poll is over. The poll must
 * time out about 20 ms later whatever the others do: their pipes are not
 * the one it waits on. Prints what it saw. */
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static int quiet[2], ab[2], ba[2];
static volatile int done;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void *poller(void *arg) {
    struct pollfd p = {quiet[0], POLLIN, 0};
    double start = now_ms();
    int r = poll(&p, 1, 20);
    double took = now_ms() - start;
    done = 1;
    printf("poll returned %d %s\n", r, took < 50 ? "within 50 ms" : "late");
    return arg;
}

static void *ping(void *arg) {
    char c = 'x';
    for (int i = 0; i < 200000 && !done; i++)
        if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1) break;
    close(ab[1]);
    return arg;
}

static void *pong(void *arg) {
    char c;
    while (read(ab[0], &c, 1) == 1)
        if (write(ba[1], &c, 1) != 1) break;
    return arg;
}

int main(void) {
    if (pipe(quiet) || pipe(ab) || pipe(ba)) return 1;
    pthread_t t[3];
    pthread_create(&t[0], 0, pong, 0);
    pthread_create(&t[1], 0, ping, 0);
    pthread_create(&t[2], 0, poller, 0);
    for (int i = 0; i < 3; i++) pthread_join(t[i], 0);
    return 0;
}
