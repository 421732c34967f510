/* Three threads each keep their own values in vector and mask registers
 * across sched_yield, where the machine switches threads: a switch must
 * save and restore every piece of extended state the CPU has enabled.
 * Uses AVX-512 registers (zmm17, k3) when the CPU offers them, else AVX
 * (ymm15). Dynamically linked, so the dynamic linker's lazy binding saves
 * that state too. */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>

static int avx512;
static int bad;

__attribute__((target("avx512f")))
static int round_avx512(uint64_t v) {
    uint64_t in[8], out[8], k;
    for (int i = 0; i < 8; i++)
        in[i] = v * 100 + i;
    __asm__ volatile("vmovdqu64 %0, %%zmm17\n\tkmovw %k1, %%k3" ::"m"(in), "r"((uint32_t)v) : "xmm17", "k3");
    sched_yield();
    __asm__ volatile("vmovdqu64 %%zmm17, %0\n\tkmovw %%k3, %k1" : "=m"(out), "=r"(k)::"memory");
    int wrong = (k & 0xffff) != (v & 0xffff);
    for (int i = 0; i < 8; i++)
        wrong |= out[i] != in[i];
    return wrong;
}

__attribute__((target("avx")))
static int round_avx(uint64_t v) {
    uint64_t in[4], out[4];
    for (int i = 0; i < 4; i++)
        in[i] = v * 100 + i;
    __asm__ volatile("vmovdqu %0, %%ymm15" ::"m"(in) : "xmm15");
    sched_yield();
    __asm__ volatile("vmovdqu %%ymm15, %0" : "=m"(out)::"memory");
    int wrong = 0;
    for (int i = 0; i < 4; i++)
        wrong |= out[i] != in[i];
    return wrong;
}

static void *worker(void *arg) {
    uint64_t id = (uint64_t)arg;
    for (uint64_t r = 0; r < 20; r++) {
        uint64_t v = id * 1000 + r;
        if (avx512 ? round_avx512(v) : round_avx(v))
            __atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

int main(void) {
    avx512 = __builtin_cpu_supports("avx512f");
    pthread_t t[3];
    for (long i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, worker, (void *)(i + 1));
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    printf("extended state kept: %s\n", bad ? "no" : "yes");
    return bad != 0;
}
