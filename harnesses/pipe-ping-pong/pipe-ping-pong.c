/*
 * Passes a byte back and forth 200 times over two pipes: between a parent
 * and a forked child, or, given the argument "threads", between two
 * threads of one process.  The difference between the two is what
 * switching address spaces costs.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROUNDS 200

static int ping[2], pong[2];

static void *echo(void *arg)
{
    char c;
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        if (read(ping[0], &c, 1) != 1 || write(pong[1], &c, 1) != 1)
            break;
    }
    return 0;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 && strcmp(argv[1], "threads") == 0;
    if (pipe(ping) || pipe(pong))
        return 1;
    pthread_t t;
    pid_t child = -1;
    if (threads) {
        pthread_create(&t, 0, echo, 0);
    } else if ((child = fork()) == 0) {
        echo(0);
        _exit(0);
    }
    int done = 0;
    char c = 'x';
    for (int i = 0; i < ROUNDS; i++) {
        if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1)
            break;
        done++;
    }
    if (threads)
        pthread_join(t, 0);
    else
        waitpid(child, 0, 0);
    printf("%d round trips\n", done);
    return done == ROUNDS ? 0 : 1;
}
