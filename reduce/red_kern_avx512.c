/* red_kern_avx512.c - the kernels for x86-64 with AVX-512 (F, VL, BW), 512-bit
 * vectors.  float16 conversions use the AVX-512F forms of vcvtph2ps/vcvtps2ph. */
#include "reduce/red_kern.h"

#ifdef RED_HAVE_X86
#include <immintrin.h>

#define KSFX avx512
#define KATTR                                                                        \
    __attribute__((target("avx512f,avx512vl,avx512bw,avx2,fma,f16c,prefer-vector-width=512")))
#define F16_W 16
#define F16_LDH(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p)))
#define F16_STH(p, v)                                                                \
    _mm256_storeu_si256((__m256i *)(void *)(p), _mm512_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT))
#define F16_LDF(p) _mm512_loadu_ps(p)
#define F16_STF(p, v) _mm512_storeu_ps((p), (v))
#define F16_ADD(a, b) _mm512_add_ps((a), (b))
#define F16_S2F(h) _cvtsh_ss(h)
#define F16_F2S(f) ((uint16_t)_cvtss_sh((f), _MM_FROUND_TO_NEAREST_INT))
/* Streaming copy for the engine's big outputs (see reduce_int.h). */
static KATTR void red_ntcpy_avx512(void *d_, const void *s_, size_t n)
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
    for (; n >= 64; n -= 64, d += 64, s += 64)
        _mm512_stream_si512((void *)d, _mm512_loadu_si512((const void *)s));
    memcpy(d, s, n);
}

static void red_ntfence_avx512(void)
{
    _mm_sfence();
}
#define RK_VB 64
#define RK_STREAM(p, v) _mm512_stream_si512((void *)(p), (__m512i)(v))
#define F16_STH_NT2(p, v0, v1)                                                       \
    _mm512_stream_si512(                                                             \
        (void *)(p),                                                                 \
        _mm512_inserti64x4(                                                          \
            _mm512_castsi256_si512(_mm512_cvtps_ph((v0), _MM_FROUND_TO_NEAREST_INT)),  \
            _mm512_cvtps_ph((v1), _MM_FROUND_TO_NEAREST_INT), 1))
/* bfloat16 <-> float for the streaming kernels: the same bit operations as
 * red_bf2f / red_f2bf (round to nearest-even, NaN kept quiet). */
static inline KATTR __m512 red_bf16_ld_avx512(const uint16_t *p)
{
    __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
}
static inline KATTR __m256i red_bf16_cvt_avx512(__m512 v)
{
    __m512i x = _mm512_castps_si512(v), hi = _mm512_srli_epi32(x, 16);
    __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)),
                         _mm512_and_si512(hi, _mm512_set1_epi32(1))),
        16);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)),
                                            _mm512_set1_epi32(0x7f800000));
    r = _mm512_mask_or_epi32(r, nan, hi, _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(r);
}
#define BF16_LDH(p) red_bf16_ld_avx512(p)
#define BF16_STH_NT2(p, v0, v1)                                                      \
    _mm512_stream_si512((void *)(p), _mm512_inserti64x4(_mm512_castsi256_si512(        \
                                                            red_bf16_cvt_avx512(v0)), \
                                                        red_bf16_cvt_avx512(v1), 1))
#define RK_NTCPY red_ntcpy_avx512
#define RK_NTFENCE red_ntfence_avx512
#include "reduce/red_kern_body.h"
#endif
