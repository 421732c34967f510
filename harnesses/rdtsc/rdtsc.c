/*
 * Reads the time-stamp counter directly (rdtsc, rdtscp), as some hashing
 * and timing code does.  In the machine the counter is virtual time, so two
 * runs print the same values; natively they differ every time.
 */
#include <stdio.h>
#include <unistd.h>
#include <x86intrin.h>

int main(void)
{
    unsigned aux;
    unsigned long long a = __rdtsc();
    getpid();
    unsigned long long b = __rdtscp(&aux);
    printf("tsc %llu then %llu (aux %u)\n", a, b, aux);
    return b > a ? 0 : 1;
}
