/*
 * Starts /bin/true fifty times, one after another: fork, execve in the
 * child, waitpid in the parent.  The engine bench divides a run's steps,
 * exits and time by fifty to give the cost of one child.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
    int ok = 0;
    for (int i = 0; i < 50; i++) {
        pid_t p = fork();
        if (p == 0) {
            execl("/bin/true", "true", (char *)0);
            _exit(127);
        }
        int st;
        if (waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0)
            ok++;
    }
    printf("%d children exited 0\n", ok);
    return ok == 50 ? 0 : 1;
}
