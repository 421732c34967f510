/*
 * Spins forever without any system call: the VM never exits to the monitor,
 * so only the wall-clock watchdog can end the run.
 */
#include <stdio.h>

static volatile unsigned long spins;

int main(void)
{
    printf("spinning without system calls\n");
    fflush(stdout);
    for (;;)
        spins++;
}
