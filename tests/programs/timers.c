#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/signalfd.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t alarms, ticks, posix;
static void on_alarm(int s) { (void)s; alarms++; }
static void on_tick(int s) { (void)s; ticks++; }
static void on_posix(int s) { (void)s; posix++; }

int main(void) {
    signal(SIGALRM, on_alarm);
    alarm(1);
    pause();
    printf("alarm fired %d, alarm(0) left %u\n", alarms, alarm(0));

    signal(SIGALRM, on_tick);
    struct itimerval it = {{0, 20000}, {0, 20000}};
    setitimer(ITIMER_REAL, &it, 0);
    while (ticks < 3) pause();
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, 0);
    printf("interval timer ticked %d times\n", ticks);

    signal(SIGUSR2, on_posix);
    timer_t t;
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_SIGNAL;
    ev.sigev_signo = SIGUSR2;
    timer_create(CLOCK_MONOTONIC, &ev, &t);
    struct itimerspec ts = {{0, 0}, {0, 5000000}};
    timer_settime(t, 0, &ts, 0);
    while (!posix) pause();
    timer_delete(t);
    printf("posix timer fired %d\n", posix);

    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    struct itimerspec p = {{0, 10000000}, {0, 10000000}};
    timerfd_settime(tfd, 0, &p, 0);
    int ep = epoll_create1(0);
    struct epoll_event e = {.events = EPOLLIN, .data.fd = tfd};
    epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &e);
    struct epoll_event out;
    int n = epoll_wait(ep, &out, 1, 1000);
    uint64_t exp = 0;
    read(tfd, &exp, 8);
    printf("timerfd: epoll %d, expirations >= 1: %d\n", n, exp >= 1);
    read(tfd, &exp, 8); /* blocks until the next period */
    printf("timerfd blocking read: %d\n", exp >= 1);

    sigset_t m;
    sigemptyset(&m);
    sigaddset(&m, SIGUSR1);
    sigprocmask(SIG_BLOCK, &m, 0);
    int sfd = signalfd(-1, &m, 0);
    kill(getpid(), SIGUSR1);
    struct signalfd_siginfo si;
    ssize_t r = read(sfd, &si, sizeof si);
    printf("signalfd read %zd bytes: signal %u from pid %u\n", r, si.ssi_signo, si.ssi_pid == (uint32_t)getpid());

    int fds[2];
    pipe(fds);
    fd_set rs;
    FD_ZERO(&rs);
    FD_SET(fds[0], &rs);
    struct timeval tv = {0, 1000};
    int s1 = select(fds[0] + 1, &rs, 0, 0, &tv);
    write(fds[1], "x", 1);
    FD_ZERO(&rs);
    FD_SET(fds[0], &rs);
    int s2 = select(fds[0] + 1, &rs, 0, 0, 0);
    printf("select: empty %d, then %d (set %d)\n", s1, s2, FD_ISSET(fds[0], &rs) != 0);
    return 0;
}
