/* red_kern_avx2.c - the kernels for x86-64 with AVX2, FMA and F16C.
 * float16 conversions use F16C (the compiler does not vectorise _Float16
 * conversions); everything else is compiler-vectorised C. */
#include "reduce/red_kern.h"

#ifdef RED_HAVE_X86
#include <immintrin.h>

#define KSFX avx2
#define KATTR __attribute__((target("avx2,fma,f16c")))
#define F16_W 8
#define F16_LDH(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p)))
#define F16_STH(p, v)                                                                \
    _mm_storeu_si128((__m128i *)(void *)(p), _mm256_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT))
#define F16_LDF(p) _mm256_loadu_ps(p)
#define F16_STF(p, v) _mm256_storeu_ps((p), (v))
#define F16_ADD(a, b) _mm256_add_ps((a), (b))
#define F16_S2F(h) _cvtsh_ss(h)
#define F16_F2S(f) ((uint16_t)_cvtss_sh((f), _MM_FROUND_TO_NEAREST_INT))
/* Streaming copy for the engine's big outputs (see reduce_int.h). */
static KATTR void red_ntcpy_avx2(void *d_, const void *s_, size_t n)
{
    char *d = d_;
    const char *s = s_;
    size_t head = (64 - (uintptr_t)d % 64) % 64;
    if (head > n)
        head = n;
    memcpy(d, s, head);
    d += head;
    s += head;
    n -= head;
    for (; n >= 64; n -= 64, d += 64, s += 64) {
        _mm256_stream_si256((__m256i *)(void *)d,
                            _mm256_loadu_si256((const __m256i *)(const void *)s));
        _mm256_stream_si256((__m256i *)(void *)(d + 32),
                            _mm256_loadu_si256((const __m256i *)(const void *)(s + 32)));
    }
    memcpy(d, s, n);
}

static void red_ntfence_avx2(void)
{
    _mm_sfence();
}
#define RK_VB 32
#define RK_STREAM(p, v) _mm256_stream_si256((__m256i *)(void *)(p), (__m256i)(v))
#define F16_STH_NT2(p, v0, v1)                                                       \
    _mm256_stream_si256((__m256i *)(void *)(p),                                      \
                        _mm256_set_m128i(_mm256_cvtps_ph((v1), _MM_FROUND_TO_NEAREST_INT), \
                                         _mm256_cvtps_ph((v0), _MM_FROUND_TO_NEAREST_INT)))
/* bfloat16 <-> float for the streaming kernels: the same bit operations as
 * red_bf2f / red_f2bf (round to nearest-even, NaN kept quiet). */
static inline KATTR __m256 red_bf16_ld_avx2(const uint16_t *p)
{
    __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
}
/* 8 floats -> 8 bfloat16 in the low 128 bits, as 32-bit lanes before packing */
static inline KATTR __m256i red_bf16_cvt32_avx2(__m256 v)
{
    __m256i x = _mm256_castps_si256(v), hi = _mm256_srli_epi32(x, 16);
    __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)),
                         _mm256_and_si256(hi, _mm256_set1_epi32(1))),
        16);
    /* NaN: |x| > 0x7f800000 as signed (|x| < 2^31) */
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)),
                                     _mm256_set1_epi32(0x7f800000));
    return _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
}
static inline KATTR __m256i red_bf16_cvt2_avx2(__m256 v0, __m256 v1)
{
    /* packus works per 128-bit lane: a0 b0 a1 b1 -> a0 a1 b0 b1 */
    __m256i p = _mm256_packus_epi32(red_bf16_cvt32_avx2(v0), red_bf16_cvt32_avx2(v1));
    return _mm256_permute4x64_epi64(p, 0xd8);
}
#define BF16_LDH(p) red_bf16_ld_avx2(p)
#define BF16_STH_NT2(p, v0, v1)                                                      \
    _mm256_stream_si256((__m256i *)(void *)(p), red_bf16_cvt2_avx2((v0), (v1)))
#define RK_NTCPY red_ntcpy_avx2
#define RK_NTFENCE red_ntfence_avx2
#include "reduce/red_kern_body.h"
#endif
