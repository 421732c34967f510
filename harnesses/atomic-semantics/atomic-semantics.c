/*
 * Every kind of instruction a sync site can be, on values that exercise
 * carries, overflows, signs, zero and parity, at every operand width, with
 * the flags each leaves: locked read-modify-writes (add, sub, and, or, xor,
 * adc, sbb, inc, dec, neg, not, xadd, xchg, cmpxchg that succeeds and that
 * fails, cmpxchg16b, bts/btr/btc with immediate and register bit offsets
 * reaching past the word) and plain loads, stores, compares and tests of
 * global variables. It prints a digest of all results.
 *
 * In the machine the monitor executes these instructions itself when they
 * are sync sites (`--sync-points atomics` and `globals`); the digest must
 * be the one a native run prints. A test compares the two.
 */
#include <stdint.h>
#include <stdio.h>

static uint64_t digest = 14695981039346656037ull;

static void mix(uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        digest ^= (v >> (8 * i)) & 0xff;
        digest *= 1099511628211ull;
    }
}

/* The arithmetic flags: CF PF AF ZF SF OF; the logical operations leave AF
 * undefined. */
#define FLAGS 0x8d5ull
#define LOGIC_FLAGS 0x8c5ull

static const uint64_t values[] = {
    0, 1, 2, 0x7f, 0x80, 0xff, 0x7fff, 0x8000, 0xffff, 0x7fffffff, 0x80000000,
    0xffffffff, 0x7fffffffffffffffull, 0x8000000000000000ull, 0xffffffffffffffffull,
    0x0f0f0f0f0f0f0f0full, 0x123456789abcdef0ull,
};
#define N (sizeof values / sizeof values[0])

/* One locked binary operation at one width: memory op= source. */
#define LOCKED_BINARY(name, op, type, suffix, flags)                                   \
    static void name(uint64_t a, uint64_t b, uint64_t carry_in)                        \
    {                                                                                  \
        type m = (type)a;                                                              \
        uint64_t f = carry_in ? 1 : 0;                                                 \
        __asm__ volatile("push %1\n\tpopf\n\tlock " op suffix " %2, %0\n\tpushf\n\tpop %1" \
                         : "+m"(m), "+r"(f)                                            \
                         : "r"((type)b)                                                \
                         : "cc");                                                      \
        mix(m);                                                                        \
        mix(f & (flags));                                                              \
    }

#define WIDTHS(op, base, flags)                                                        \
    LOCKED_BINARY(base##8, op, uint8_t, "b", flags)                                    \
    LOCKED_BINARY(base##16, op, uint16_t, "w", flags)                                  \
    LOCKED_BINARY(base##32, op, uint32_t, "l", flags)                                  \
    LOCKED_BINARY(base##64, op, uint64_t, "q", flags)

WIDTHS("add", add, FLAGS)
WIDTHS("sub", sub, FLAGS)
WIDTHS("and", and, LOGIC_FLAGS)
WIDTHS("or", or, LOGIC_FLAGS)
WIDTHS("xor", xor, LOGIC_FLAGS)
WIDTHS("adc", adc, FLAGS)
WIDTHS("sbb", sbb, FLAGS)

/* One locked unary operation at one width. */
#define LOCKED_UNARY(name, op, type, suffix)                                           \
    static void name(uint64_t a)                                                       \
    {                                                                                  \
        type m = (type)a;                                                              \
        uint64_t f = 0x1; /* CF set: inc and dec must keep it */                       \
        __asm__ volatile("push %1\n\tpopf\n\tlock " op suffix " %0\n\tpushf\n\tpop %1"    \
                         : "+m"(m), "+r"(f)                                            \
                         :                                                             \
                         : "cc");                                                      \
        mix(m);                                                                        \
        mix(f & FLAGS);                                                                \
    }

#define UNARY_WIDTHS(op, base)                                                         \
    LOCKED_UNARY(base##8, op, uint8_t, "b")                                            \
    LOCKED_UNARY(base##16, op, uint16_t, "w")                                          \
    LOCKED_UNARY(base##32, op, uint32_t, "l")                                          \
    LOCKED_UNARY(base##64, op, uint64_t, "q")

UNARY_WIDTHS("inc", inc)
UNARY_WIDTHS("dec", dec)
UNARY_WIDTHS("neg", neg)
UNARY_WIDTHS("not", not)

static void exchanges(uint64_t a, uint64_t b)
{
    uint64_t m = a, r = b, f;
    __asm__ volatile("lock xaddq %1, %0\n\tpushf\n\tpop %2" : "+m"(m), "+r"(r), "=r"(f) : : "cc");
    mix(m);
    mix(r);
    mix(f & FLAGS);
    uint32_t m32 = (uint32_t)a, r32 = (uint32_t)b;
    __asm__ volatile("xchgl %1, %0" : "+m"(m32), "+r"(r32));
    mix(m32);
    mix(r32);
    uint16_t m16 = (uint16_t)a, r16 = (uint16_t)b;
    __asm__ volatile("lock xaddw %1, %0\n\tpushf\n\tpop %2" : "+m"(m16), "+r"(r16), "=r"(f) : : "cc");
    mix(m16);
    mix(r16);
    mix(f & FLAGS);
}

static void compare_exchanges(uint64_t a, uint64_t b)
{
    for (int hit = 0; hit < 2; hit++) {
        uint64_t m = a, expected = hit ? a : a ^ 1, f;
        __asm__ volatile("lock cmpxchgq %3, %0\n\tpushf\n\tpop %2"
                         : "+m"(m), "+a"(expected), "=r"(f)
                         : "r"(b)
                         : "cc");
        mix(m);
        mix(expected);
        mix(f & FLAGS);
        uint8_t m8 = (uint8_t)a, e8 = hit ? (uint8_t)a : (uint8_t)(a ^ 1);
        __asm__ volatile("lock cmpxchgb %3, %0\n\tpushf\n\tpop %2"
                         : "+m"(m8), "+a"(e8), "=r"(f)
                         : "q"((uint8_t)b)
                         : "cc");
        mix(m8);
        mix(e8);
        mix(f & FLAGS);
    }
    __attribute__((aligned(16))) uint64_t pair[2] = {a, b};
    uint64_t lo = a, hi = b, f;
    __asm__ volatile("lock cmpxchg16b %0\n\tpushf\n\tpop %2"
                     : "+m"(pair), "+a"(lo), "=r"(f), "+d"(hi)
                     : "b"(b), "c"(a)
                     : "cc");
    mix(pair[0]);
    mix(pair[1]);
    mix(f & 0x40);
}

static void bit_operations(uint64_t a, uint64_t b)
{
    uint64_t words[4] = {a, b, a ^ b, ~a};
    int64_t offset = (int64_t)(b % 200) - 40; /* may point before or past */
    uint64_t f;
    __asm__ volatile("lock btsq %2, %0\n\tpushf\n\tpop %1"
                     : "+m"(words[1]), "=r"(f)
                     : "r"(offset % 64 + 64)
                     : "cc", "memory");
    mix(f & 1);
    __asm__ volatile("lock btrq %2, %0\n\tpushf\n\tpop %1"
                     : "+m"(words[1]), "=r"(f)
                     : "r"(offset)
                     : "cc", "memory");
    mix(f & 1);
    __asm__ volatile("lock btcl $5, %0\n\tpushf\n\tpop %1" : "+m"(words[2]), "=r"(f) : : "cc");
    mix(f & 1);
    for (int i = 0; i < 4; i++)
        mix(words[i]);
}

/* Globals: plain moves, compares and tests, and a read-modify-write. */
static volatile uint64_t g64;
static volatile uint32_t g32;
static volatile uint8_t g8;

static void globals(uint64_t a, uint64_t b)
{
    g64 = a;
    g32 = (uint32_t)b;
    g8 = (uint8_t)(a ^ b);
    uint64_t f;
    __asm__ volatile("cmpq %1, g64(%%rip)\n\tpushf\n\tpop %0" : "=r"(f) : "r"(b) : "cc");
    mix(f & FLAGS);
    __asm__ volatile("testl %1, g32(%%rip)\n\tpushf\n\tpop %0" : "=r"(f) : "r"((uint32_t)a) : "cc");
    mix(f & LOGIC_FLAGS);
    __asm__ volatile("addb %1, g8(%%rip)\n\tpushf\n\tpop %0" : "=r"(f) : "q"((uint8_t)b) : "cc");
    mix(f & FLAGS);
    int64_t s;
    __asm__ volatile("movsbq g8(%%rip), %0" : "=r"(s));
    mix((uint64_t)s);
    mix(g64);
    mix(g32);
    mix(g8);
}

int main(void)
{
    for (unsigned i = 0; i < N; i++) {
        for (unsigned j = 0; j < N; j++) {
            uint64_t a = values[i], b = values[j];
            for (int c = 0; c < 2; c++) {
                add8(a, b, c), add16(a, b, c), add32(a, b, c), add64(a, b, c);
                sub8(a, b, c), sub16(a, b, c), sub32(a, b, c), sub64(a, b, c);
                and8(a, b, c), and16(a, b, c), and32(a, b, c), and64(a, b, c);
                or8(a, b, c), or16(a, b, c), or32(a, b, c), or64(a, b, c);
                xor8(a, b, c), xor16(a, b, c), xor32(a, b, c), xor64(a, b, c);
                adc8(a, b, c), adc16(a, b, c), adc32(a, b, c), adc64(a, b, c);
                sbb8(a, b, c), sbb16(a, b, c), sbb32(a, b, c), sbb64(a, b, c);
            }
            exchanges(a, b);
            compare_exchanges(a, b);
            bit_operations(a, b);
            globals(a, b);
        }
        inc8(values[i]), inc16(values[i]), inc32(values[i]), inc64(values[i]);
        dec8(values[i]), dec16(values[i]), dec32(values[i]), dec64(values[i]);
        neg8(values[i]), neg16(values[i]), neg32(values[i]), neg64(values[i]);
        not8(values[i]), not16(values[i]), not32(values[i]), not64(values[i]);
    }
    printf("digest %016llx\n", (unsigned long long)digest);
    return 0;
}
