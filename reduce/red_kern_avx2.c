/* red_kern_avx2.c - the kernels for x86-64 with AVX2, FMA and F16C.
 * float16 conversions use F16C (the compiler does not vectorise _Float16
 * conversions); everything else is compiler-vectorised C. */
#include "reduce/reduce_int.h"

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
#include "reduce/red_kern_body.h"
#endif
