/* Opens N pipes, then passes a byte through one of them S times (default
 * 2000) and closes them all: the cost of a pipe's read, write and close
 * must not grow with the pipes open beside it. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    struct rlimit r = {2 * n + 64, 2 * n + 64};
    if (setrlimit(RLIMIT_NOFILE, &r) != 0) { perror("rlimit"); return 1; }
    int (*ends)[2] = calloc(n, sizeof *ends);
    for (int i = 0; i < n; i++)
        if (pipe(ends[i]) != 0) { perror("pipe"); return 1; }
    int steps = argc > 2 ? atoi(argv[2]) : 2000;
    char c = 'x';
    for (int i = 0; i < steps; i++)
        if (write(ends[0][1], &c, 1) != 1 || read(ends[0][0], &c, 1) != 1) { perror("io"); return 1; }
    for (int i = 0; i < n; i++) { close(ends[i][0]); close(ends[i][1]); }
    printf("%d pipes\n", n);
    return 0;
}
