/* Calls abort(): glibc raises SIGABRT with tgkill, and the run ends crashed. */
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    printf("calling abort()\n");
    fflush(stdout);
    abort();
}
