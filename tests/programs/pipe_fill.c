/* Makes pipes and fills each until no more can be made, then grows one
 * with F_SETPIPE_SZ, sends unix datagrams nobody reads, and frees it all:
 * pipe and socket buffers are bounded by the guest's memory, not the
 * host's. Prints what it sees. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_PIPES 40000

static int ends[MAX_PIPES][2];
static char chunk[1 << 16];

int main(void) {
    struct rlimit r = {2 * MAX_PIPES + 64, 2 * MAX_PIPES + 64};
    if (setrlimit(RLIMIT_NOFILE, &r) != 0) { perror("rlimit"); return 1; }
    memset(chunk, 'x', sizeof chunk);
    int made = 0, full = 0, small = 0;
    long held = 0;
    while (made < MAX_PIPES) {
        if (pipe2(ends[made], O_NONBLOCK) != 0) break;
        int size = fcntl(ends[made][1], F_GETPIPE_SZ);
        if (size == 65536) full++;
        else if (size == 8192) small++;
        else { printf("capacity %d\n", size); return 1; }
        ssize_t n = write(ends[made][1], chunk, size);
        if (n != size) { printf("write %zd of %d: errno %d\n", n, size, errno); return 1; }
        if (write(ends[made][1], "y", 1) != -1 || errno != EAGAIN) { printf("not full\n"); return 1; }
        held += n;
        made++;
    }
    int why = errno;
    printf("%d pipes of 64 KiB, %d of 8 KiB, %ld MiB held, then errno %d (%s)\n",
           full, small, held >> 20, why, why == ENFILE ? "ENFILE" : strerror(why));
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != -1 || errno != ENFILE) {
        printf("socketpair past the limit: errno %d\n", errno);
        return 1;
    }
    /* Room for one pipe again: it may not grow past the soft limit. */
    close(ends[0][0]);
    close(ends[0][1]);
    if (pipe(ends[0]) != 0) { printf("no pipe after a close: errno %d\n", errno); return 1; }
    if (fcntl(ends[0][1], F_SETPIPE_SZ, 1 << 20) != -1 || errno != EPERM) {
        printf("F_SETPIPE_SZ past the limit: errno %d\n", errno);
        return 1;
    }
    printf("F_SETPIPE_SZ past the limit: EPERM\n");
    for (int i = 0; i < made; i++) { close(ends[i][0]); close(ends[i][1]); }
    if (pipe(ends[0]) != 0 || fcntl(ends[0][1], F_GETPIPE_SZ) != 65536) {
        printf("no full pipe after freeing them all\n");
        return 1;
    }
    if (fcntl(ends[0][1], F_SETPIPE_SZ, 1 << 20) != 1 << 20) { printf("no 1 MiB pipe\n"); return 1; }
    printf("room again\n");

    /* Datagrams to a socket that never reads: the queue fills. */
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strcpy(a.sun_path, "/tmp/pipe-fill.sock");
    int rx = socket(AF_UNIX, SOCK_DGRAM, 0), tx = socket(AF_UNIX, SOCK_DGRAM, 0);
    if (rx < 0 || tx < 0 || bind(rx, (struct sockaddr *)&a, sizeof a) != 0) { perror("bind"); return 1; }
    int sent = 0;
    while (sent < 100000 &&
           sendto(tx, chunk, 1000, MSG_DONTWAIT, (struct sockaddr *)&a, sizeof a) == 1000)
        sent++;
    printf("%d datagrams queued, then errno %d (%s)\n", sent, errno,
           errno == EAGAIN ? "EAGAIN" : strerror(errno));
    char got[1000];
    if (recv(rx, got, sizeof got, 0) != 1000) { printf("no datagram\n"); return 1; }
    if (sendto(tx, chunk, 1000, MSG_DONTWAIT, (struct sockaddr *)&a, sizeof a) != 1000) {
        printf("no room after a read\n");
        return 1;
    }
    printf("a read makes room\n");
    return 0;
}
