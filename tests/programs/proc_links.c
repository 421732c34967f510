/* Looks through host symlinks into /proc and /dev in every way a program
 * can: open with and without O_NOFOLLOW, lstat, stat, readlink. Prints
 * what it got; the guest must see nothing of the monitor's own /proc. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void show_read(const char *p, int flags) {
    char buf[4096];
    int fd = open(p, O_RDONLY | flags);
    if (fd < 0) {
        printf("open %s %s: errno %d\n", p, flags ? "nofollow" : "follow", errno);
        return;
    }
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    for (ssize_t i = 0; i < n; i++)
        if (buf[i] == 0)
            buf[i] = ' ';
    printf("open %s: %zd bytes: %.*s\n", p, n, (int)(n < 0 ? 0 : n), buf);
}

static void show_link(const char *p) {
    char buf[4096];
    ssize_t n = readlink(p, buf, sizeof buf);
    printf("readlink %s: %zd %.*s (errno %d)\n", p, n, (int)(n < 0 ? 0 : n), buf,
           n < 0 ? errno : 0);
}

static void show_stat(const char *p) {
    struct stat st;
    int r = lstat(p, &st);
    printf("lstat %s: %d size %lld (errno %d)\n", p, r, r ? 0LL : (long long)st.st_size,
           r ? errno : 0);
    r = stat(p, &st);
    printf("stat %s: %d size %lld (errno %d)\n", p, r, r ? 0LL : (long long)st.st_size,
           r ? errno : 0);
}

int main(int argc, char **argv) {
    char p[4096];
    const char *tails[] = {"self/environ", "self/cmdline", "self/exe", "self/cwd",
                           "1/environ", "self/fd/0"};
    for (int i = 1; i < argc; i++) {
        show_link(argv[i]);
        for (unsigned t = 0; t < sizeof tails / sizeof *tails; t++) {
            snprintf(p, sizeof p, "%s/%s", argv[i], tails[t]);
            show_read(p, 0);
            show_read(p, O_NOFOLLOW);
            show_stat(p);
            show_link(p);
        }
        snprintf(p, sizeof p, "%s/environ", argv[i]);
        show_read(p, O_NOFOLLOW);
        show_stat(p);
        snprintf(p, sizeof p, "%s/exe", argv[i]);
        show_link(p);
    }
    /* The guest's own /proc still works. */
    show_link("/proc/self/exe");
    struct stat st;
    printf("/dev/null: %d, /dev/shm: %d, /dev/sda: %d\n", stat("/dev/null", &st),
           stat("/dev/shm", &st), stat("/dev/sda", &st));
    return 0;
}
