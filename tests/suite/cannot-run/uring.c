/* Asks for an io_uring, which the machine does not have. */
#include <unistd.h>
#include <sys/syscall.h>

int main(void) {
    char params[120] = {0};
    return syscall(SYS_io_uring_setup, 8, params) < 0 ? 0 : 1;
}
