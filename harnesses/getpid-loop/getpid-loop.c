/*
 * Calls getpid() forever.  Every call is a system call, hence a scheduling
 * point, so the run ends when the step budget runs out.
 */
#include <stdio.h>
#include <unistd.h>

int main(void)
{
    printf("calling getpid forever\n");
    fflush(stdout);
    for (;;)
        getpid();
}
