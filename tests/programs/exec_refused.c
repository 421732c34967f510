/* Executes the program named by its first argument, whose interpreter is
 * missing, then /bin/true with a 200,000-byte argument: Linux refuses both
 * before it lets go of the caller (ENOENT, E2BIG), which goes on. Prints
 * what each execv said. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char big[200000];

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    char *missing[] = {argv[1], 0};
    execv(missing[0], missing);
    printf("a missing interpreter: %s\n", strerror(errno));
    memset(big, 'x', sizeof big - 1);
    char *long_one[] = {"/bin/true", big, 0};
    execv(long_one[0], long_one);
    printf("a 200,000-byte argument: %s\n", strerror(errno));
    return 0;
}
