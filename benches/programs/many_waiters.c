/* Parks N waiters of one KIND, each on an object of its own, then passes a
 * byte through a pipe of main's S times (default 2000), then wakes them
 * all and waits for them: the cost of a step must not grow with the
 * waiters parked beside it, whatever they wait in.
 *
 *   many_waiters KIND N [S]
 *
 * KIND: pipe, eventfd, socket (a read of a socket pair's end), poll,
 * select, epoll, timerfd, signalfd (threads), or procs (child processes,
 * each reading a pipe). */
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *kind;
static int (*fds)[2];
static pid_t *children;
static volatile int parked;

static void fail(const char *what) {
    perror(what);
    exit(1);
}

/* Waits on waiter i's object until it is ready, then takes what it got. */
static void wait_on(int i) {
    int fd = fds[i][0];
    char c;
    uint64_t v;
    if (!strcmp(kind, "pipe") || !strcmp(kind, "socket") || !strcmp(kind, "procs")) {
        if (read(fd, &c, 1) != 1) fail("read");
    } else if (!strcmp(kind, "eventfd")) {
        if (read(fd, &v, 8) != 8) fail("eventfd read");
    } else if (!strcmp(kind, "poll")) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, -1) != 1) fail("poll");
    } else if (!strcmp(kind, "select")) {
        /* A set as large as the descriptor needs (fd_set holds 1024). */
        unsigned long *r = calloc(fd / 64 + 1, sizeof *r);
        r[fd / 64] |= 1UL << (fd % 64);
        if (select(fd + 1, (fd_set *)r, 0, 0, 0) != 1) fail("select");
        free(r);
    } else if (!strcmp(kind, "epoll")) {
        int ep = epoll_create1(0);
        struct epoll_event e = {.events = EPOLLIN, .data.u64 = i};
        if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) != 0) fail("epoll_ctl");
        if (epoll_wait(ep, &e, 1, -1) != 1) fail("epoll_wait");
        close(ep);
    } else if (!strcmp(kind, "timerfd")) {
        if (read(fd, &v, 8) != 8) fail("timerfd read");
    } else if (!strcmp(kind, "signalfd")) {
        struct signalfd_siginfo s;
        if (read(fd, &s, sizeof s) != sizeof s) fail("signalfd read");
    }
}

static void *waiter(void *a) {
    int i = (int)(intptr_t)a;
    __atomic_add_fetch(&parked, 1, __ATOMIC_SEQ_CST);
    wait_on(i);
    return 0;
}

/* Makes waiter i's object (fds[i][0] is waited on, fds[i][1] wakes it). */
static void make(int i) {
    if (!strcmp(kind, "eventfd")) {
        fds[i][0] = fds[i][1] = eventfd(0, 0);
        if (fds[i][0] < 0) fail("eventfd");
    } else if (!strcmp(kind, "socket")) {
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds[i]) != 0) fail("socketpair");
    } else if (!strcmp(kind, "timerfd")) {
        fds[i][0] = fds[i][1] = timerfd_create(CLOCK_MONOTONIC, 0);
        if (fds[i][0] < 0) fail("timerfd_create");
    } else if (!strcmp(kind, "signalfd")) {
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, SIGRTMIN);
        fds[i][0] = fds[i][1] = signalfd(-1, &s, 0);
        if (fds[i][0] < 0) fail("signalfd");
    } else if (pipe(fds[i]) != 0) {
        fail("pipe");
    }
}

/* Makes waiter i's object ready. */
static void wake(int i) {
    if (!strcmp(kind, "eventfd")) {
        uint64_t one = 1;
        if (write(fds[i][1], &one, 8) != 8) fail("eventfd write");
    } else if (!strcmp(kind, "timerfd")) {
        struct itimerspec t = {{0, 0}, {0, 1000}};
        if (timerfd_settime(fds[i][1], 0, &t, 0) != 0) fail("timerfd_settime");
    } else if (!strcmp(kind, "signalfd")) {
        /* A real-time signal queues: one for each reader. */
        if (kill(getpid(), SIGRTMIN) != 0) fail("kill");
    } else if (write(fds[i][1], "x", 1) != 1) {
        fail("write");
    }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: many_waiters KIND N [STEPS]\n");
        return 2;
    }
    kind = argv[1];
    int n = atoi(argv[2]);
    int steps = argc > 3 ? atoi(argv[3]) : 2000;
    int procs = !strcmp(kind, "procs");
    struct rlimit r = {3 * n + 64, 3 * n + 64};
    if (setrlimit(RLIMIT_NOFILE, &r) != 0) fail("rlimit");
    /* Every thread blocks SIGRTMIN, so a signal descriptor can read it. */
    sigset_t rt;
    sigemptyset(&rt);
    sigaddset(&rt, SIGRTMIN);
    pthread_sigmask(SIG_BLOCK, &rt, 0);
    fds = calloc(n, sizeof *fds);
    children = calloc(n, sizeof *children);
    pthread_t *t = calloc(n, sizeof *t);
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 65536);
    for (int i = 0; i < n; i++) {
        make(i);
        if (procs) {
            pid_t p = fork();
            if (p < 0) fail("fork");
            if (p == 0) {
                wait_on(i);
                _exit(0);
            }
            children[i] = p;
        } else if (pthread_create(&t[i], &at, waiter, (void *)(intptr_t)i) != 0) {
            fail("pthread_create");
        }
    }
    while (!procs && __atomic_load_n(&parked, __ATOMIC_SEQ_CST) < n) sched_yield();
    /* Let every waiter reach its wait. */
    for (int i = 0; i < 2 * n; i++) sched_yield();
    int mine[2];
    if (pipe(mine) != 0) fail("pipe");
    char c = 'x';
    for (int i = 0; i < steps; i++)
        if (write(mine[1], &c, 1) != 1 || read(mine[0], &c, 1) != 1) fail("io");
    for (int i = 0; i < n; i++) wake(i);
    for (int i = 0; i < n; i++) {
        if (procs) {
            int status;
            if (waitpid(children[i], &status, 0) != children[i] || status != 0) fail("waitpid");
        } else {
            pthread_join(t[i], 0);
        }
    }
    printf("%d %s waiters\n", n, argv[1]);
    return 0;
}
