/* Edge-triggered epoll interests report a descriptor again only after it
 * changed, whatever happens to other descriptors; level-triggered ones
 * report it while it is ready. Prints what each wait returned (sorted:
 * the order of one wait's events is not the point). */
#include <stdio.h>
#include <sys/epoll.h>
#include <unistd.h>

static int ep;

static void wait_and_say(const char *what) {
    struct epoll_event e[4];
    int n = epoll_wait(ep, e, 4, 0);
    printf("%s:", what);
    for (char c = 'a'; c <= 'c'; c++)
        for (int i = 0; i < n; i++)
            if ((char)e[i].data.u64 == c) printf(" %c", c);
    printf("\n");
}

int main(void) {
    int a[2], b[2], c[2];
    if (pipe(a) || pipe(b) || pipe(c)) return 1;
    ep = epoll_create1(0);
    struct epoll_event ea = {.events = EPOLLIN | EPOLLET, .data.u64 = 'a'};
    struct epoll_event ec = {.events = EPOLLIN, .data.u64 = 'c'};
    epoll_ctl(ep, EPOLL_CTL_ADD, a[0], &ea);
    epoll_ctl(ep, EPOLL_CTL_ADD, c[0], &ec);
    wait_and_say("nothing written");
    if (write(a[1], "x", 1) != 1 || write(c[1], "x", 1) != 1) return 1;
    wait_and_say("a and c written");
    wait_and_say("again");
    if (write(b[1], "x", 1) != 1) return 1;
    wait_and_say("an unwatched pipe written");
    if (write(a[1], "y", 1) != 1) return 1;
    wait_and_say("a written again");
    char buf[4];
    if (read(c[0], buf, 1) != 1) return 1;
    wait_and_say("c read empty");
    return 0;
}
