/* Datagrams between two threads: a unix datagram socket bound to a path,
 * loopback UDP on a port the kernel picks, and sendmsg/recvmsg with two
 * buffers.  Prints what it received. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int main(void) {
    unlink("/tmp/dg-test.sock");
    int r = socket(AF_UNIX, SOCK_DGRAM, 0);
    struct sockaddr_un ua = {.sun_family = AF_UNIX};
    strcpy(ua.sun_path, "/tmp/dg-test.sock");
    if (bind(r, (struct sockaddr *)&ua, sizeof ua)) { perror("bind"); return 1; }
    int s = socket(AF_UNIX, SOCK_DGRAM, 0);
    sendto(s, "first", 5, 0, (struct sockaddr *)&ua, sizeof ua);
    sendto(s, "second!", 7, 0, (struct sockaddr *)&ua, sizeof ua);
    char buf[32] = {0};
    ssize_t n1 = recv(r, buf, sizeof buf, 0);
    printf("unix datagram 1: %zd %.*s\n", n1, (int)n1, buf);
    ssize_t n2 = recv(r, buf, 3, 0); /* truncated: the rest is lost */
    printf("unix datagram 2 (truncated): %zd %.*s\n", n2, (int)n2, buf);

    int u = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in ia = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bind(u, (struct sockaddr *)&ia, sizeof ia);
    socklen_t len = sizeof ia;
    getsockname(u, (struct sockaddr *)&ia, &len);
    int c = socket(AF_INET, SOCK_DGRAM, 0);
    connect(c, (struct sockaddr *)&ia, sizeof ia);
    struct iovec out[2] = {{"hello ", 6}, {"udp", 3}};
    struct msghdr m = {.msg_iov = out, .msg_iovlen = 2};
    printf("sendmsg: %zd\n", sendmsg(c, &m, 0));
    char a[4] = {0}, b[16] = {0};
    struct iovec in[2] = {{a, 4}, {b, 16}};
    struct sockaddr_in from;
    struct msghdr h = {.msg_name = &from, .msg_namelen = sizeof from, .msg_iov = in, .msg_iovlen = 2};
    ssize_t got = recvmsg(u, &h, 0);
    printf("recvmsg: %zd [%.4s][%s] from loopback %d\n", got, a, b,
           from.sin_addr.s_addr == htonl(INADDR_LOOPBACK));
    /* The reply goes back to the sender's own port. */
    sendto(u, "pong", 4, 0, (struct sockaddr *)&from, h.msg_namelen);
    memset(buf, 0, sizeof buf);
    printf("reply: %zd %s\n", read(c, buf, sizeof buf), buf);
    unlink("/tmp/dg-test.sock");
    return 0;
}
