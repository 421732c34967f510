/*
 * Exercises the file system calls a test program makes: for a file under
 * /tmp and one in the current directory (paths from argv, defaults below)
 * it creates, writes, appends, reads back, stats, renames and unlinks, and
 * checks that the old names are gone.  It prints what it read.  In the VM
 * writes go to a private in-memory file system, so the host must be
 * untouched afterwards; natively the program removes what it made.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void fail(const char *what, const char *path)
{
    printf("%s %s: %s\n", what, path, strerror(errno));
    exit(1);
}

static void write_all(int fd, const char *text, const char *path)
{
    size_t len = strlen(text);
    if (write(fd, text, len) != (ssize_t)len)
        fail("write", path);
}

/* Round trip one file; `label` keeps the output independent of the path. */
static void round_trip(const char *path, const char *label)
{
    char renamed[4096];
    snprintf(renamed, sizeof renamed, "%s.renamed", path);

    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        fail("create", path);
    write_all(fd, "first line\n", path);
    close(fd);

    fd = open(path, O_WRONLY | O_APPEND);
    if (fd < 0)
        fail("open for append", path);
    write_all(fd, "second line\n", path);
    close(fd);

    if (rename(path, renamed) != 0)
        fail("rename", path);
    if (access(path, F_OK) == 0 || errno != ENOENT)
        fail("old name still exists:", path);

    struct stat st;
    if (stat(renamed, &st) != 0)
        fail("stat", renamed);

    char buf[128];
    fd = open(renamed, O_RDONLY);
    if (fd < 0)
        fail("open", renamed);
    ssize_t n = read(fd, buf, sizeof buf - 1);
    if (n < 0)
        fail("read", renamed);
    buf[n] = '\0';
    /* Read the second line again at its offset. */
    char again[32] = {0};
    if (lseek(fd, 11, SEEK_SET) != 11 || read(fd, again, 11) != 11)
        fail("seek and read", renamed);
    close(fd);

    if (unlink(renamed) != 0)
        fail("unlink", renamed);
    if (stat(renamed, &st) == 0 || errno != ENOENT)
        fail("still exists after unlink:", renamed);

    printf("%s: %lld bytes, read back:\n%s", label, (long long)st.st_size, buf);
    printf("%s: at offset 11: %s\n", label, again);
}

int main(int argc, char **argv)
{
    const char *tmp_path = argc > 1 ? argv[1] : "/tmp/rewind-file-writer.txt";
    const char *cwd_path = argc > 2 ? argv[2] : "rewind-file-writer.txt";
    round_trip(tmp_path, "tmp file");
    round_trip(cwd_path, "cwd file");
    printf("files removed\n");
    return 0;
}
