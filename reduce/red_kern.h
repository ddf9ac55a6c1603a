/* red_kern.h - private to reduce/: the kernel tables that each ISA's file
 * (red_kern_*.c) fills, and the half-type conversions every kernel follows.
 * Below everything else in the folder: it includes nothing of reduce/. */
#ifndef KVS_REDUCE_KERN_H
#define KVS_REDUCE_KERN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* One kernel: works on n elements; d is the output, s[] the inputs (how many
 * and of what type depends on the slot, see below).  Kernels may assume that
 * d does not overlap any s[j] unless the slot says otherwise. */
typedef void red_fn(void *d, const void *const *s, size_t n);

/* Kernels of a plain type (float32, float64, int32, int64; integers are summed
 * as unsigned, so they wrap).  Every slot sums left to right, so results are
 * bit-identical across ISAs and thread counts.
 *   sum[m], m = 2..4:  d = s0 + ... + s(m-1)
 *   add[m], m = 1..3:  d = d + s0 + ... + s(m-1)   (d may not overlap s) */
struct red_kplain {
    red_fn *sum[5];
    red_fn *add[4];
    red_fn *sumnt[5]; /* as sum[m], dst written with streaming stores; may be NULL */
};

/* Kernels of a half type (float16, bfloat16): h = half array, a = float32
 * accumulator; r() rounds to nearest-even.
 *   sum[m], m = 2..4:  h d = r(h s0 + ... + h s(m-1))  (summed in float32
 *           left to right in registers, one rounding; d may not overlap s)
 *   add1:   h d = r(h d + h s0)
 *   acc2:   a d = h s0 + h s1       (s0 may be the final output array)
 *   accadd: a d += h s0
 *   out:    h d = r(a s0 + h s1)    (the last input folded into the rounding) */
struct red_khalf {
    red_fn *sum[5];
    red_fn *add1, *acc2, *accadd, *out;
    red_fn *sumnt[5]; /* as sum[m], dst written with streaming stores; may be NULL */
};

/* The kernels of one ISA level.  plain[] is indexed by red_plain_index(). */
struct red_kern {
    const char *name;
    struct red_kplain plain[4];
    struct red_khalf half[2]; /* [0] float16, [1] bfloat16 */
    /* Streaming (non-temporal) copy of n bytes from s (a small buffer in L1)
     * to d, any alignment: plain stores up to the first 64-byte border of d
     * and after the last one, non-temporal stores of whole 64-byte lines in
     * between, so the lines of d are never read for ownership.  NULL where
     * the ISA has none (then the engine never streams).  The stores are
     * weakly ordered: ntfence() (sfence) must run before the thread tells
     * anyone that the data is there. */
    void (*ntcpy)(void *d, const void *s, size_t n);
    void (*ntfence)(void);
};

extern const struct red_kern red_kern_c;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define RED_HAVE_X86 1
extern const struct red_kern red_kern_avx2;
extern const struct red_kern red_kern_avx512;
#endif

/* The kernel table of an ISA level, NULL if the CPU lacks it. */
const struct red_kern *red_kern_get(int isa);

/* Elements per cache block: the inner loops of one call touch at most this
 * many elements of each array so the output / accumulator stays in L1. */
#define RED_BLOCK 2048

/* Output arrays of at least this many bytes are written with streaming
 * (non-temporal) stores when the ISA has them (kern->ntcpy != NULL), k >= 2
 * and dst is not also an input: such an operation does not fit in the
 * caches anyway, and the streaming store saves reading every line of dst
 * before overwriting it.  Measured (docs/design/reduce.md): no change at
 * 8 MiB, +3-10 % at 16 MiB, +20-40 % at 32-64 MiB; below the bound dst stays
 * cached for whoever reads the sum next. */
#define RED_STREAM_MIN (16u << 20)

/* Scalar conversions (reference semantics of every kernel):
 * half -> float is exact (a signalling NaN comes out quiet, payload kept);
 * float -> half rounds to nearest-even, overflows to Inf, keeps NaN quiet
 * with the top payload bits.  These match x86 F16C (vcvtph2ps/vcvtps2ph). */
static inline float red_h2f(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, b;
    float f;
    if (e == 0) {
        f = (float)m * 0x1p-24f; /* zero or subnormal: exact */
        memcpy(&b, &f, 4);
        b |= sign;
    } else if (e == 31) {
        b = sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0);
    } else {
        b = sign | ((e + 112) << 23) | (m << 13);
    }
    memcpy(&f, &b, 4);
    return f;
}

static inline uint16_t red_f2h(float f)
{
    uint32_t x, sign, ab;
    float a;
    memcpy(&x, &f, 4);
    sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    if (x > 0x7f800000u) /* NaN */
        return (uint16_t)(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
    if (x >= 0x477ff000u) /* >= 65520: rounds to Inf */
        return (uint16_t)(sign | 0x7c00u);
    if (x >= 0x38800000u) /* normal half: rebias, round half to even */
        return (uint16_t)(sign | ((x + 0xc8000fffu + ((x >> 13) & 1u)) >> 13));
    /* subnormal half: adding 0.5 puts the 2^-24 unit at the float's last bit,
     * so the FPU's own round-to-nearest-even does the rounding. */
    memcpy(&a, &x, 4);
    a += 0.5f;
    memcpy(&ab, &a, 4);
    return (uint16_t)(sign | (ab - 0x3f000000u));
}

static inline float red_bf2f(uint16_t h)
{
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static inline uint16_t red_f2bf(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet */
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

#endif
