/* red_kern_avx512.c - the kernels for x86-64 with AVX-512 (F, VL, BW), 512-bit
 * vectors.  float16 conversions use the AVX-512F forms of vcvtph2ps/vcvtps2ph. */
#include "reduce/reduce_int.h"

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
#define F16_STH_NT(p, v) _mm256_stream_si256((__m256i *)(void *)(p), _mm512_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT))
#define RK_NTCPY red_ntcpy_avx512
#define RK_NTFENCE red_ntfence_avx512
#include "reduce/red_kern_body.h"
#endif
