/*
 * A statically linked program (no loader, no shared libraries) that makes a
 * few ordinary libc calls: small and large allocations (brk, then mmap and
 * munmap), getpid, a monotonic clock read, formatting and sorting.  Nothing
 * it prints depends on the pid, the time or the addresses it gets.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int compare(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int main(void)
{
    int values[] = {42, 7, 19, 3, 88, 21};
    size_t n = sizeof values / sizeof values[0];
    qsort(values, n, sizeof values[0], compare);

    /* Small blocks come from brk, a large one from mmap. */
    char *small = malloc(64);
    char *large = malloc(1 << 20);
    if (small == NULL || large == NULL)
        return 1;
    memset(large, 'x', 1 << 20);
    snprintf(small, 64, "%d..%d", values[0], values[n - 1]);

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = getpid();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    int clock_ok = t1.tv_sec > t0.tv_sec ||
                   (t1.tv_sec == t0.tv_sec && t1.tv_nsec >= t0.tv_nsec);

    printf("hello from a static binary\n");
    printf("sorted: %d %d %d %d %d %d\n", values[0], values[1], values[2],
           values[3], values[4], values[5]);
    printf("range %s, large[12345] = %c, pid positive: %s, clock monotonic: %s\n",
           small, large[12345], pid > 0 ? "yes" : "no", clock_ok ? "yes" : "no");
    free(large);
    free(small);
    return 0;
}
