/* Looks at a file's metadata in every way but reading it. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
    struct stat st;
    if (stat(argv[1], &st) != 0 || lstat(argv[1], &st) != 0)
        return 1;
    struct statx sx;
    if (statx(AT_FDCWD, argv[1], 0, STATX_SIZE, &sx) != 0 || access(argv[1], R_OK) != 0)
        return 1;
    printf("size %lld statx %llu\n", (long long)st.st_size, (unsigned long long)sx.stx_size);
    return 0;
}
