/* Opens N eventfds, then makes STEPS cheap system calls (default 2000). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    struct rlimit r = {n + 64, n + 64};
    if (setrlimit(RLIMIT_NOFILE, &r) != 0) { perror("rlimit"); return 1; }
    for (int i = 0; i < n; i++)
        if (eventfd(0, 0) < 0) { perror("eventfd"); return 1; }
    int steps = argc > 2 ? atoi(argv[2]) : 2000;
    for (int i = 0; i < steps; i++) getppid();
    printf("%d eventfds\n", n);
    return 0;
}
