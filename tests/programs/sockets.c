#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static int port;

static void serve(int l) {
    int c = accept(l, 0, 0);
    char buf[32] = {0};
    ssize_t n = read(c, buf, sizeof buf - 1);
    char reply[64];
    snprintf(reply, sizeof reply, "pong to %.*s", (int)n, buf);
    write(c, reply, strlen(reply));
    shutdown(c, SHUT_WR);
    n = read(c, buf, sizeof buf); /* the client's end */
    printf("server saw end: %zd\n", n);
    close(c);
}

static void *tcp_server(void *arg) {
    serve(*(int *)arg);
    return 0;
}

int main(void) {
    /* A unix socket served by a child process. */
    unlink("/tmp/sk-test.sock");
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un ua = {.sun_family = AF_UNIX};
    strcpy(ua.sun_path, "/tmp/sk-test.sock");
    if (bind(l, (struct sockaddr *)&ua, sizeof ua) || listen(l, 4)) { perror("unix"); return 1; }
    pid_t p = fork();
    if (p == 0) { serve(l); _exit(0); }
    int c = socket(AF_UNIX, SOCK_STREAM, 0);
    if (connect(c, (struct sockaddr *)&ua, sizeof ua)) { perror("connect"); return 1; }
    write(c, "unix", 4);
    char buf[64] = {0};
    ssize_t n, got = 0;
    while ((n = read(c, buf + got, sizeof buf - 1 - got)) > 0) got += n;
    printf("client got: %s\n", buf);
    close(c);
    waitpid(p, 0, 0);

    /* Loopback TCP, a port the kernel picks, served by a thread. */
    int t = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in ia = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(t, (struct sockaddr *)&ia, sizeof ia) || listen(t, 4)) { perror("tcp"); return 1; }
    socklen_t len = sizeof ia;
    getsockname(t, (struct sockaddr *)&ia, &len);
    port = ntohs(ia.sin_port);
    pthread_t th;
    pthread_create(&th, 0, tcp_server, &t);
    int d = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(d, (struct sockaddr *)&ia, sizeof ia)) { perror("connect tcp"); return 1; }
    write(d, "tcp", 3);
    memset(buf, 0, sizeof buf);
    got = 0;
    while ((n = read(d, buf + got, sizeof buf - 1 - got)) > 0) got += n;
    printf("tcp client got: %s (port picked: %d)\n", buf, port > 0);
    close(d);
    pthread_join(th, 0);
    /* A second bind to the same name is refused. */
    int again = socket(AF_UNIX, SOCK_STREAM, 0);
    printf("bind again: %d\n", bind(again, (struct sockaddr *)&ua, sizeof ua));
    /* The name is a socket in the file tree until it is unlinked. */
    close(l);
    struct stat st;
    printf("a socket node: %d\n", stat("/tmp/sk-test.sock", &st) == 0 && S_ISSOCK(st.st_mode));
    int late = socket(AF_UNIX, SOCK_STREAM, 0);
    printf("connect after close refused: %d\n", connect(late, (struct sockaddr *)&ua, sizeof ua) == -1);
    unlink("/tmp/sk-test.sock");
    printf("bind after unlink: %d\n", bind(again, (struct sockaddr *)&ua, sizeof ua));
    unlink("/tmp/sk-test.sock");
    return 0;
}
