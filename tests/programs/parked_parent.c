/* Parks N threads on a condition variable (every signal blocked), then
 * ROUNDS times: sends itself a signal that every thread blocks and takes
 * it with sigtimedwait, and spawns a child that runs this program again,
 * signals itself, and exits, which the parent waits for. What a signal to
 * a process, a child's exec and end and its parent's wait cost must not
 * grow with the threads parked beside them. (posix_spawn shares the
 * parent's memory until the exec: a fork's child would write to every
 * thread's descriptor, glibc's own work, in pages it must copy.)
 *
 *   parked_parent N ROUNDS      (parked_parent child: the child's part) */
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int go, parked;
static volatile sig_atomic_t got;

static void *park(void *a) {
    pthread_mutex_lock(&m);
    parked++;
    while (!go) pthread_cond_wait(&c, &m);
    pthread_mutex_unlock(&m);
    return a;
}

static void on_usr1(int s) { got = s; }

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "child")) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, 0);
        signal(SIGUSR1, on_usr1);
        kill(getpid(), SIGUSR1);
        return got == SIGUSR1 ? 0 : 1;
    }
    if (argc < 3) return 2;
    int n = atoi(argv[1]), rounds = atoi(argv[2]);
    sigset_t all, usr2;
    sigfillset(&all);
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &all, 0);
    pthread_t *t = calloc(n, sizeof *t);
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 65536);
    for (int i = 0; i < n; i++) pthread_create(&t[i], &at, park, 0);
    for (;;) {
        pthread_mutex_lock(&m);
        int p = parked;
        pthread_mutex_unlock(&m);
        if (p == n) break;
        sched_yield();
    }
    for (int r = 0; r < rounds; r++) {
        kill(getpid(), SIGUSR2);
        struct timespec zero = {0, 0};
        if (sigtimedwait(&usr2, 0, &zero) != SIGUSR2) return 3;
        pid_t child;
        char *args[] = {argv[0], "child", 0};
        if (posix_spawn(&child, argv[0], 0, 0, args, environ) != 0) return 4;
        int status;
        if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status)) return 5;
    }
    pthread_mutex_lock(&m);
    go = 1;
    pthread_cond_broadcast(&c);
    pthread_mutex_unlock(&m);
    for (int i = 0; i < n; i++) pthread_join(t[i], 0);
    printf("%d threads, %d rounds\n", n, rounds);
    return 0;
}
