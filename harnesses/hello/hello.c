/* The smallest dynamic program: the loader, libc start-up and one write. */
#include <stdio.h>

int main(void)
{
    printf("hello, world\n");
    return 0;
}
