/* Grows twenty files to a GiB each (holes), then fills one until the
 * overlay has no room: ENOSPC, not the host's memory. Prints errnos. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(void) {
    char name[64];
    int fds[20];
    for (int i = 0; i < 20; i++) {
        snprintf(name, sizeof name, "/tmp/overlay-fill-%d", i);
        fds[i] = open(name, O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (fds[i] < 0 || ftruncate(fds[i], 1L << 30) != 0) {
            printf("ftruncate %d: errno %d\n", i, errno);
            return 1;
        }
    }
    printf("twenty files of a GiB\n");
    char last;
    if (pread(fds[3], &last, 1, (1L << 30) - 1) != 1 || last != 0) {
        printf("the hole does not read as zeros\n");
        return 1;
    }
    static char chunk[1 << 20];
    memset(chunk, 'x', sizeof chunk);
    long written = 0;
    for (int i = 0; i < 20; i++) {
        for (long off = 0; off < (1L << 30); off += sizeof chunk) {
            ssize_t n = pwrite(fds[i], chunk, sizeof chunk, off);
            if (n < 0) {
                printf("full after %ld MiB: errno %d (%s)\n", written >> 20, errno,
                       errno == ENOSPC ? "ENOSPC" : "other");
                /* Freeing space makes room again. */
                if (ftruncate(fds[0], 0) != 0 || pwrite(fds[i], chunk, sizeof chunk, off) < 0) {
                    printf("no room after truncating: errno %d\n", errno);
                    return 1;
                }
                printf("room again\n");
                return 0;
            }
            written += n;
        }
    }
    printf("never full after %ld MiB\n", written >> 20);
    return 1;
}
