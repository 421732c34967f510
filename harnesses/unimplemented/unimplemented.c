/*
 * Makes a system call the monitor does not implement: io_uring_setup.  The
 * arguments are invalid (0 entries, NULL parameters), so natively the call
 * fails (EINVAL, or EPERM/ENOSYS where io_uring is disabled) without any
 * side effect and the program exits 0; in the VM the run ends as
 * `unsupported` naming the call.
 */
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void)
{
    printf("calling io_uring_setup\n");
    fflush(stdout);
    long rc = syscall(SYS_io_uring_setup, 0, NULL);
    printf("io_uring_setup %s\n", rc < 0 ? "failed" : "succeeded");
    return 0;
}
