/* red_kern_body.h - the kernels, written once and compiled once per ISA
 * level.  Not a header to use: red_kern_<isa>.c defines
 *   KSFX          name suffix (c, avx2, avx512)
 *   KATTR         function attributes (target ISA), may be empty
 *   F16_W ...     optional: SIMD float16 conversion macros (see avx2 file);
 *                 without them float16 uses the scalar conversions
 * and then includes this file, which defines red_kern_<KSFX>.
 *
 * The loops are plain restrict loops that the compiler vectorises (built at
 * -O3 by reduce/module.mk; see docs/design/reduce.md for the proof).
 */
#define RK_CAT2(a, b) a##_##b
#define RK_CAT(a, b) RK_CAT2(a, b)
#define KN(x) RK_CAT(red_##x, KSFX)
#define RK_STR2(x) #x
#define RK_STR(x) RK_STR2(x)

/* Plain types: T is the element type (unsigned for integers: wrapping). */
#define RK_PLAIN(T, tn)                                                              \
    static KATTR void KN(tn##_sum2)(void *d_, const void *const *s, size_t n)        \
    {                                                                                \
        T *restrict d = d_;                                                          \
        const T *restrict a = s[0], *restrict b = s[1];                              \
        for (size_t i = 0; i < n; i++)                                               \
            d[i] = a[i] + b[i];                                                      \
    }                                                                                \
    static KATTR void KN(tn##_sum3)(void *d_, const void *const *s, size_t n)        \
    {                                                                                \
        T *restrict d = d_;                                                          \
        const T *restrict a = s[0], *restrict b = s[1], *restrict c = s[2];          \
        for (size_t i = 0; i < n; i++)                                               \
            d[i] = a[i] + b[i] + c[i];                                               \
    }                                                                                \
    static KATTR void KN(tn##_sum4)(void *d_, const void *const *s, size_t n)        \
    {                                                                                \
        T *restrict d = d_;                                                          \
        const T *restrict a = s[0], *restrict b = s[1], *restrict c = s[2];          \
        const T *restrict e = s[3];                                                  \
        for (size_t i = 0; i < n; i++)                                               \
            d[i] = a[i] + b[i] + c[i] + e[i];                                        \
    }                                                                                \
    static KATTR void KN(tn##_add1)(void *d_, const void *const *s, size_t n)        \
    {                                                                                \
        T *restrict d = d_;                                                          \
        const T *restrict a = s[0];                                                  \
        for (size_t i = 0; i < n; i++)                                               \
            d[i] = d[i] + a[i];                                                      \
    }                                                                                \
    static KATTR void KN(tn##_add2)(void *d_, const void *const *s, size_t n)        \
    {                                                                                \
        T *restrict d = d_;                                                          \
        const T *restrict a = s[0], *restrict b = s[1];                              \
        for (size_t i = 0; i < n; i++)                                               \
            d[i] = d[i] + a[i] + b[i];                                               \
    }                                                                                \
    static KATTR void KN(tn##_add3)(void *d_, const void *const *s, size_t n)        \
    {                                                                                \
        T *restrict d = d_;                                                          \
        const T *restrict a = s[0], *restrict b = s[1], *restrict c = s[2];          \
        for (size_t i = 0; i < n; i++)                                               \
            d[i] = d[i] + a[i] + b[i] + c[i];                                        \
    }

/* Streaming forms of sum[m] (ISAs with RK_STREAM(p, vector), RK_VB bytes per
 * vector): plain stores up to the first 64-byte border of d and for the
 * tail (the plain kernel), non-temporal vector stores in between.  The
 * vectors are GCC vector types: lane-wise the same additions in the same
 * order as the plain kernels. */
#define RK_NT_LD(v, p) memcpy(&(v), (p), sizeof(v))
#define RK_NT_HEAD(T, tn, m)                                                         \
    T *d = d_;                                                                       \
    size_t i = (64 - (uintptr_t)d % 64) % 64 / sizeof(T);                            \
    if (i > n)                                                                       \
        i = n;                                                                       \
    KN(tn##_sum##m)(d, s, i)
#define RK_NT_TAIL(tn, m)                                                            \
    const void *t[4];                                                                \
    for (int j = 0; j < m; j++)                                                      \
        t[j] = (const char *)s[j] + i * sizeof(*d);                                  \
    KN(tn##_sum##m)(d + i, t, n - i)
#define RK_PLAIN_NT(T, tn)                                                           \
    typedef T KN(tn##_v) __attribute__((vector_size(RK_VB)));                        \
    static KATTR void KN(tn##_sumnt2)(void *d_, const void *const *s, size_t n)      \
    {                                                                                \
        RK_NT_HEAD(T, tn, 2);                                                        \
        const T *a = s[0], *b = s[1];                                                \
        for (; i + RK_VB / sizeof(T) <= n; i += RK_VB / sizeof(T)) {                 \
            KN(tn##_v) x, y;                                                         \
            RK_NT_LD(x, a + i);                                                      \
            RK_NT_LD(y, b + i);                                                      \
            RK_STREAM(d + i, x + y);                                                 \
        }                                                                            \
        RK_NT_TAIL(tn, 2);                                                           \
    }                                                                                \
    static KATTR void KN(tn##_sumnt3)(void *d_, const void *const *s, size_t n)      \
    {                                                                                \
        RK_NT_HEAD(T, tn, 3);                                                        \
        const T *a = s[0], *b = s[1], *c = s[2];                                     \
        for (; i + RK_VB / sizeof(T) <= n; i += RK_VB / sizeof(T)) {                 \
            KN(tn##_v) x, y, z;                                                      \
            RK_NT_LD(x, a + i);                                                      \
            RK_NT_LD(y, b + i);                                                      \
            RK_NT_LD(z, c + i);                                                      \
            RK_STREAM(d + i, x + y + z);                                             \
        }                                                                            \
        RK_NT_TAIL(tn, 3);                                                           \
    }                                                                                \
    static KATTR void KN(tn##_sumnt4)(void *d_, const void *const *s, size_t n)      \
    {                                                                                \
        RK_NT_HEAD(T, tn, 4);                                                        \
        const T *a = s[0], *b = s[1], *c = s[2], *e = s[3];                          \
        for (; i + RK_VB / sizeof(T) <= n; i += RK_VB / sizeof(T)) {                 \
            KN(tn##_v) x, y, z, w;                                                   \
            RK_NT_LD(x, a + i);                                                      \
            RK_NT_LD(y, b + i);                                                      \
            RK_NT_LD(z, c + i);                                                      \
            RK_NT_LD(w, e + i);                                                      \
            RK_STREAM(d + i, x + y + z + w);                                         \
        }                                                                            \
        RK_NT_TAIL(tn, 4);                                                           \
    }

#ifdef RK_STREAM
#define RK_PLAIN_NT_SLOTS(tn)                                                        \
    .sumnt = {NULL, NULL, KN(tn##_sumnt2), KN(tn##_sumnt3), KN(tn##_sumnt4)},
#else
#define RK_PLAIN_NT_SLOTS(tn)
#endif

#define RK_PLAIN_TABLE(tn)                                                           \
    {                                                                                \
        .sum = {NULL, NULL, KN(tn##_sum2), KN(tn##_sum3), KN(tn##_sum4)},            \
        .add = {NULL, KN(tn##_add1), KN(tn##_add2), KN(tn##_add3)},                  \
        RK_PLAIN_NT_SLOTS(tn)                                                        \
    }

/* Half types with scalar conversions TOF (half -> float) and FROMF. */
#define RK_HALF(tn, TOF, FROMF)                                                      \
    static KATTR void KN(tn##_sum2)(void *d_, const void *const *s, size_t n)        \
    {                                                                                \
        uint16_t *restrict d = d_;                                                   \
        const uint16_t *restrict a = s[0], *restrict b = s[1];                       \
        for (size_t i = 0; i < n; i++)                                               \
            d[i] = FROMF(TOF(a[i]) + TOF(b[i]));                                     \
    }                                                                                \
    static KATTR void KN(tn##_sum3)(void *d_, const void *const *s, size_t n)        \
    {                                                                                \
        uint16_t *restrict d = d_;                                                   \
        const uint16_t *restrict a = s[0], *restrict b = s[1], *restrict c = s[2];   \
        for (size_t i = 0; i < n; i++)                                               \
            d[i] = FROMF(TOF(a[i]) + TOF(b[i]) + TOF(c[i]));                         \
    }                                                                                \
    static KATTR void KN(tn##_sum4)(void *d_, const void *const *s, size_t n)        \
    {                                                                                \
        uint16_t *restrict d = d_;                                                   \
        const uint16_t *restrict a = s[0], *restrict b = s[1], *restrict c = s[2];   \
        const uint16_t *restrict e = s[3];                                           \
        for (size_t i = 0; i < n; i++)                                               \
            d[i] = FROMF(TOF(a[i]) + TOF(b[i]) + TOF(c[i]) + TOF(e[i]));             \
    }                                                                                \
    static KATTR void KN(tn##_add1)(void *d_, const void *const *s, size_t n)        \
    {                                                                                \
        uint16_t *restrict d = d_;                                                   \
        const uint16_t *restrict a = s[0];                                           \
        for (size_t i = 0; i < n; i++)                                               \
            d[i] = FROMF(TOF(d[i]) + TOF(a[i]));                                     \
    }                                                                                \
    static KATTR void KN(tn##_acc2)(void *d_, const void *const *s, size_t n)        \
    {                                                                                \
        float *restrict d = d_;                                                      \
        const uint16_t *restrict a = s[0], *restrict b = s[1];                       \
        for (size_t i = 0; i < n; i++)                                               \
            d[i] = TOF(a[i]) + TOF(b[i]);                                            \
    }                                                                                \
    static KATTR void KN(tn##_accadd)(void *d_, const void *const *s, size_t n)      \
    {                                                                                \
        float *restrict d = d_;                                                      \
        const uint16_t *restrict a = s[0];                                           \
        for (size_t i = 0; i < n; i++)                                               \
            d[i] = d[i] + TOF(a[i]);                                                 \
    }                                                                                \
    static KATTR void KN(tn##_out)(void *d_, const void *const *s, size_t n)         \
    {                                                                                \
        uint16_t *restrict d = d_;                                                   \
        const float *restrict a = s[0];                                              \
        const uint16_t *restrict b = s[1];                                           \
        for (size_t i = 0; i < n; i++)                                               \
            d[i] = FROMF(a[i] + TOF(b[i]));                                          \
    }

/* Half types with SIMD conversions: F16_W floats per vector F16_VF;
 * F16_LDH/F16_STH load/store F16_W halves as floats (round to nearest-even),
 * F16_LDF/F16_STF floats, F16_ADD adds; F16_S2F/F16_F2S the scalar forms
 * (same instructions) for the tail. */
#define RK_HALF_SIMD(tn)                                                             \
    static KATTR void KN(tn##_sum2)(void *d_, const void *const *s, size_t n)        \
    {                                                                                \
        uint16_t *d = d_;                                                            \
        const uint16_t *a = s[0], *b = s[1];                                         \
        size_t i = 0;                                                                \
        for (; i + F16_W <= n; i += F16_W)                                           \
            F16_STH(d + i, F16_ADD(F16_LDH(a + i), F16_LDH(b + i)));                 \
        for (; i < n; i++)                                                           \
            d[i] = F16_F2S(F16_S2F(a[i]) + F16_S2F(b[i]));                           \
    }                                                                                \
    static KATTR void KN(tn##_sum3)(void *d_, const void *const *s, size_t n)        \
    {                                                                                \
        uint16_t *d = d_;                                                            \
        const uint16_t *a = s[0], *b = s[1], *c = s[2];                              \
        size_t i = 0;                                                                \
        for (; i + F16_W <= n; i += F16_W)                                           \
            F16_STH(d + i,                                                           \
                    F16_ADD(F16_ADD(F16_LDH(a + i), F16_LDH(b + i)), F16_LDH(c + i)));   \
        for (; i < n; i++)                                                           \
            d[i] = F16_F2S(F16_S2F(a[i]) + F16_S2F(b[i]) + F16_S2F(c[i]));           \
    }                                                                                \
    static KATTR void KN(tn##_sum4)(void *d_, const void *const *s, size_t n)        \
    {                                                                                \
        uint16_t *d = d_;                                                            \
        const uint16_t *a = s[0], *b = s[1], *c = s[2], *e = s[3];                   \
        size_t i = 0;                                                                \
        for (; i + F16_W <= n; i += F16_W)                                           \
            F16_STH(d + i, F16_ADD(F16_ADD(F16_ADD(F16_LDH(a + i), F16_LDH(b + i)),  \
                                           F16_LDH(c + i)),                          \
                                   F16_LDH(e + i)));                                 \
        for (; i < n; i++)                                                           \
            d[i] = F16_F2S(F16_S2F(a[i]) + F16_S2F(b[i]) + F16_S2F(c[i]) +           \
                           F16_S2F(e[i]));                                           \
    }                                                                                \
    static KATTR void KN(tn##_add1)(void *d_, const void *const *s, size_t n)        \
    {                                                                                \
        const void *s2[2] = {d_, s[0]};                                              \
        KN(tn##_sum2)(d_, s2, n); /* element-wise in place: safe */                  \
    }                                                                                \
    static KATTR void KN(tn##_acc2)(void *d_, const void *const *s, size_t n)        \
    {                                                                                \
        float *d = d_;                                                               \
        const uint16_t *a = s[0], *b = s[1];                                         \
        size_t i = 0;                                                                \
        for (; i + F16_W <= n; i += F16_W)                                           \
            F16_STF(d + i, F16_ADD(F16_LDH(a + i), F16_LDH(b + i)));                 \
        for (; i < n; i++)                                                           \
            d[i] = F16_S2F(a[i]) + F16_S2F(b[i]);                                    \
    }                                                                                \
    static KATTR void KN(tn##_accadd)(void *d_, const void *const *s, size_t n)      \
    {                                                                                \
        float *d = d_;                                                               \
        const uint16_t *a = s[0];                                                    \
        size_t i = 0;                                                                \
        for (; i + F16_W <= n; i += F16_W)                                           \
            F16_STF(d + i, F16_ADD(F16_LDF(d + i), F16_LDH(a + i)));                 \
        for (; i < n; i++)                                                           \
            d[i] = d[i] + F16_S2F(a[i]);                                             \
    }                                                                                \
    static KATTR void KN(tn##_out)(void *d_, const void *const *s, size_t n)         \
    {                                                                                \
        uint16_t *d = d_;                                                            \
        const float *a = s[0];                                                       \
        const uint16_t *b = s[1];                                                    \
        size_t i = 0;                                                                \
        for (; i + F16_W <= n; i += F16_W)                                           \
            F16_STH(d + i, F16_ADD(F16_LDF(a + i), F16_LDH(b + i)));                 \
        for (; i < n; i++)                                                           \
            d[i] = F16_F2S(a[i] + F16_S2F(b[i]));                                    \
    }

/* Streaming forms of the SIMD half sums, as RK_PLAIN_NT, for a half type with
 * vector conversions: LDH(p) loads W halves as floats, STNT2(p, v0, v1)
 * rounds 2 * W floats to halves and stores them with non-temporal stores
 * (an aligned 64-byte line with AVX-512), ADD adds.  The conversions make
 * these loops long enough that the out-of-order window alone keeps too few
 * lines in flight, so each input is prefetched RK_HNT_PFD bytes ahead into
 * L2 (measured in docs/design/reduce.md; no gain for the plain types). */
#define RK_HNT_PFD 1024
#define RK_HNT_PF(p) _mm_prefetch((const char *)((p) + i) + RK_HNT_PFD, _MM_HINT_T1)
#define RK_HALF_NT(tn, W, LDH, ADD, STNT2)                                           \
    static KATTR void KN(tn##_sumnt2)(void *d_, const void *const *s, size_t n)      \
    {                                                                                \
        RK_NT_HEAD(uint16_t, tn, 2);                                                 \
        const uint16_t *a = s[0], *b = s[1];                                         \
        for (; i + 2 * (W) <= n; i += 2 * (W)) {                                     \
            RK_HNT_PF(a);                                                            \
            RK_HNT_PF(b);                                                            \
            STNT2(d + i, ADD(LDH(a + i), LDH(b + i)),                                \
                  ADD(LDH(a + i + (W)), LDH(b + i + (W))));                          \
        }                                                                            \
        RK_NT_TAIL(tn, 2);                                                           \
    }                                                                                \
    static KATTR void KN(tn##_sumnt3)(void *d_, const void *const *s, size_t n)      \
    {                                                                                \
        RK_NT_HEAD(uint16_t, tn, 3);                                                 \
        const uint16_t *a = s[0], *b = s[1], *c = s[2];                              \
        for (; i + 2 * (W) <= n; i += 2 * (W)) {                                     \
            RK_HNT_PF(a);                                                            \
            RK_HNT_PF(b);                                                            \
            RK_HNT_PF(c);                                                            \
            STNT2(d + i, ADD(ADD(LDH(a + i), LDH(b + i)), LDH(c + i)),               \
                  ADD(ADD(LDH(a + i + (W)), LDH(b + i + (W))), LDH(c + i + (W))));   \
        }                                                                            \
        RK_NT_TAIL(tn, 3);                                                           \
    }                                                                                \
    static KATTR void KN(tn##_sumnt4)(void *d_, const void *const *s, size_t n)      \
    {                                                                                \
        RK_NT_HEAD(uint16_t, tn, 4);                                                 \
        const uint16_t *a = s[0], *b = s[1], *c = s[2], *e = s[3];                   \
        for (; i + 2 * (W) <= n; i += 2 * (W)) {                                     \
            RK_HNT_PF(a);                                                            \
            RK_HNT_PF(b);                                                            \
            RK_HNT_PF(c);                                                            \
            RK_HNT_PF(e);                                                            \
            STNT2(d + i, ADD(ADD(ADD(LDH(a + i), LDH(b + i)), LDH(c + i)), LDH(e + i)), \
                  ADD(ADD(ADD(LDH(a + i + (W)), LDH(b + i + (W))), LDH(c + i + (W))),  \
                      LDH(e + i + (W))));                                            \
        }                                                                            \
        RK_NT_TAIL(tn, 4);                                                           \
    }

#define RK_HALF_TABLE(tn)                                                            \
    {                                                                                \
        .sum = {NULL, NULL, KN(tn##_sum2), KN(tn##_sum3), KN(tn##_sum4)},            \
        .add1 = KN(tn##_add1), .acc2 = KN(tn##_acc2),                                \
        .accadd = KN(tn##_accadd), .out = KN(tn##_out),                              \
    }

RK_PLAIN(float, f32)
RK_PLAIN(double, f64)
RK_PLAIN(uint32_t, i32)
RK_PLAIN(uint64_t, i64)
RK_HALF(bf16, red_bf2f, red_f2bf)
#ifdef F16_W
RK_HALF_SIMD(f16)
#else
RK_HALF(f16, red_h2f, red_f2h)
#endif
#ifdef RK_STREAM
RK_PLAIN_NT(float, f32)
RK_PLAIN_NT(double, f64)
RK_PLAIN_NT(uint32_t, i32)
RK_PLAIN_NT(uint64_t, i64)
RK_HALF_NT(f16, F16_W, F16_LDH, F16_ADD, F16_STH_NT2)
RK_HALF_NT(bf16, F16_W, BF16_LDH, F16_ADD, BF16_STH_NT2)
#endif

const struct red_kern KN(kern) = {
    .name = RK_STR(KSFX),
    .plain = {RK_PLAIN_TABLE(f32), RK_PLAIN_TABLE(f64), RK_PLAIN_TABLE(i32),
              RK_PLAIN_TABLE(i64)},
    .half = {RK_HALF_TABLE(f16), RK_HALF_TABLE(bf16)},
#ifdef RK_STREAM
    .half[0].sumnt = {NULL, NULL, KN(f16_sumnt2), KN(f16_sumnt3), KN(f16_sumnt4)},
    .half[1].sumnt = {NULL, NULL, KN(bf16_sumnt2), KN(bf16_sumnt3), KN(bf16_sumnt4)},
#endif
#ifdef RK_NTCPY
    .ntcpy = RK_NTCPY,
    .ntfence = RK_NTFENCE,
#endif
};
