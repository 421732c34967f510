/*
 * Integer division by zero: the #DE exception becomes SIGFPE.  The divisor
 * is read through a volatile so the compiler cannot fold or drop the
 * division.
 */
#include <stdio.h>

static volatile int divisor = 0;

int main(void)
{
    printf("dividing by zero\n");
    fflush(stdout);
    int quotient = 100 / divisor;
    printf("not reached: %d\n", quotient);
    return 0;
}
