/* test_reduce.c - reduce/: sums of every dtype against independent
 * references, on every ISA level the CPU has, with and without threads.
 *
 * References: integers exact (unsigned wrap-around); float32 / float64
 * bit-exact against a scalar left-to-right sum, and within a stated error
 * bound of a wider (float64 / long double) sum; half types bit-exact against
 * float32 accumulation plus a reference rounding (binary search over the
 * ordered bit patterns, ties to even) that shares no code with reduce/.
 */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvs.h"
#include "reduce/reduce.h"
#include "reduce/reduce_int.h" /* RED_STREAM_MIN, red_pool.stream_min / .streamed */

#define MAXK 8

/* ---- reference conversions ---- */

static double f16_val(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v;
    if (e == 31)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp(m, -24);
    else
        v = ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

static double bf16_val(uint16_t h)
{
    int e = (h >> 7) & 0xff, m = h & 0x7f;
    double v;
    if (e == 255)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp(m, -133);
    else
        v = ldexp(128 + m, e - 134);
    return (h & 0x8000) ? -v : v;
}

static double half_val(kvs_dtype t, uint16_t h)
{
    return t == KVS_FLOAT16 ? f16_val(h) : bf16_val(h);
}

/* sign | magnitude as a pattern: the magnitude is below 0x8000 (at most
 * the Inf pattern) by construction; checked. */
static uint16_t half_pattern(uint16_t sign, unsigned mag)
{
    ck_assert_uint_lt(mag, 0x8000u);
    return (uint16_t)(sign | mag);
}

/* Round x to the half type, nearest, ties to the even pattern.  Positive
 * finite patterns are ordered like their values; Inf counts as the next
 * value after the largest finite (2^16 resp. 2^128), as IEEE says. */
static uint16_t half_round(kvs_dtype t, double x)
{
    uint16_t inf = t == KVS_FLOAT16 ? 0x7c00 : 0x7f80, sign = signbit(x) ? 0x8000 : 0;
    double ax = fabs(x), lov, hiv;
    unsigned lo = 0, hi = inf;
    if (isnan(x))
        return 0x7fff;
    if (isinf(x))
        return sign | inf;
    /* largest lo with val(lo) <= ax */
    double top = t == KVS_FLOAT16 ? 65536.0 : ldexp(1.0, 128);
    if (ax >= top)
        return sign | inf;
    while (hi - lo > 1) {
        unsigned mid = (lo + hi) / 2;
        if (half_val(t, (uint16_t)mid) <= ax)
            lo = mid;
        else
            hi = mid;
    }
    lov = half_val(t, (uint16_t)lo);
    if (lov == ax)
        return half_pattern(sign, lo);
    hiv = lo + 1 == inf ? top : half_val(t, (uint16_t)(lo + 1));
    if (ax - lov < hiv - ax)
        return half_pattern(sign, lo);
    if (ax - lov > hiv - ax)
        return half_pattern(sign, lo + 1);
    return half_pattern(sign, (lo & 1) ? lo + 1 : lo);
}

static int half_isnan(kvs_dtype t, uint16_t h)
{
    return t == KVS_FLOAT16 ? (h & 0x7c00) == 0x7c00 && (h & 0x3ff)
                            : (h & 0x7f80) == 0x7f80 && (h & 0x7f);
}

/* ---- random data ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static void fill(kvs_dtype t, void *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rnd();
        double v = ((double)(r >> 11) / 9007199254740992.0 - 0.5) * 8.0;
        switch (t) {
        case KVS_FLOAT32:
            ((float *)p)[i] = (float)v;
            break;
        case KVS_FLOAT64:
            ((double *)p)[i] = v;
            break;
        case KVS_FLOAT16:
        case KVS_BFLOAT16:
            ((uint16_t *)p)[i] = half_round(t, v);
            break;
        case KVS_INT32:
            ((uint32_t *)p)[i] = (uint32_t)r; /* full range: sums wrap */
            break;
        case KVS_INT64:
            ((uint64_t *)p)[i] = r;
            break;
        }
    }
}

/* Checks element i of a k-input sum; returns 0 if right. */
static int check_elem(kvs_dtype t, const void *out, const void *const *in, int k, size_t i)
{
    switch (t) {
    case KVS_FLOAT32: {
        float s = ((const float *)in[0])[i], r = ((const float *)out)[i];
        double w = s, mag = fabs(s);
        for (int j = 1; j < k; j++) {
            float x = ((const float *)in[j])[i];
            s += x;
            w += x;
            mag += fabs(x);
        }
        /* bit-exact left-to-right, and |r - w| <= k * 2^-24 * sum|x| */
        return memcmp(&s, &r, 4) != 0 || fabs(r - w) > k * ldexp(mag, -24);
    }
    case KVS_FLOAT64: {
        double s = ((const double *)in[0])[i], r = ((const double *)out)[i];
        long double w = s, mag = fabsl(w);
        for (int j = 1; j < k; j++) {
            double x = ((const double *)in[j])[i];
            s += x;
            w += x;
            mag += fabs(x);
        }
        return memcmp(&s, &r, 8) != 0 || fabsl(r - w) > k * ldexpl(mag, -53);
    }
    case KVS_INT32: {
        uint32_t s = 0;
        for (int j = 0; j < k; j++)
            s += ((const uint32_t *)in[j])[i];
        return s != ((const uint32_t *)out)[i];
    }
    case KVS_INT64: {
        uint64_t s = 0;
        for (int j = 0; j < k; j++)
            s += ((const uint64_t *)in[j])[i];
        return s != ((const uint64_t *)out)[i];
    }
    case KVS_FLOAT16:
    case KVS_BFLOAT16: {
        float s = (float)half_val(t, ((const uint16_t *)in[0])[i]);
        uint16_t r = ((const uint16_t *)out)[i], want;
        for (int j = 1; j < k; j++)
            s += (float)half_val(t, ((const uint16_t *)in[j])[i]);
        want = half_round(t, s);
        if (isnan(s))
            return !half_isnan(t, r);
        return r != want;
    }
    }
    return 1;
}

/* One case: k inputs of n elements, at off bytes past a 64-byte border, the
 * output at doff bytes past one, on pool p; alias: dst is input 0 (at off).
 * Data is made and checked in aligned copies (typed access to a misaligned
 * pointer is not C).  Fails on the first wrong element. */
static void run_case2(red_pool *p, kvs_dtype t, int k, size_t n, size_t off, size_t doff,
                      int alias)
{
    size_t es = kvs_dtype_size(t), nb = (n * es + (off > doff ? off : doff) + 64 + 63) / 64 * 64;
    unsigned char *buf[MAXK + 1];
    void *ref[MAXK], *res = malloc(n * es + 8);
    const void *in[MAXK];
    void *out;
    ck_assert_ptr_nonnull(res);
    for (int j = 0; j <= k; j++) {
        buf[j] = aligned_alloc(64, nb);
        ck_assert_ptr_nonnull(buf[j]);
    }
    for (int j = 0; j < k; j++) {
        ref[j] = malloc(n * es + 8);
        ck_assert_ptr_nonnull(ref[j]);
        fill(t, ref[j], n);
        memcpy(buf[j] + off, ref[j], n * es);
        in[j] = buf[j] + off;
    }
    out = alias ? (void *)(buf[0] + off) : buf[k] + doff;
    memset(buf[k], 0xa5, nb);
    ck_assert_int_eq(red_sum(p, t, out, in, k, n), 0);
    memcpy(res, out, n * es);
    for (size_t i = 0; i < n; i++)
        if (check_elem(t, res, (const void *const *)ref, k, i))
            ck_abort_msg("dtype %d k %d n %zu off %zu doff %zu alias %d threads %d isa %s: "
                         "element %zu wrong",
                         t, k, n, off, doff, alias, red_pool_threads(p),
                         red_isa_name(red_pool_isa(p)), i);
    if (!alias) /* nothing written before the start or past the end */
        for (size_t b = 0; b < nb; b++)
            if (b < doff || b >= doff + n * es)
                ck_assert_uint_eq(buf[k][b], 0xa5);
    free(res);
    for (int j = 0; j < k; j++)
        free(ref[j]);
    for (int j = 0; j <= k; j++)
        free(buf[j]);
}

static void run_case(red_pool *p, kvs_dtype t, int k, size_t n, size_t off, int alias)
{
    run_case2(p, t, k, n, off, off, alias);
}

static const kvs_dtype all_types[KVS_NUM_DTYPES] = {KVS_FLOAT32, KVS_FLOAT64, KVS_FLOAT16,
                                                    KVS_BFLOAT16, KVS_INT32, KVS_INT64};

/* ---- tests ---- */

/* Every ISA, every dtype, k 1..8, the awkward lengths, no threads. */
START_TEST(test_lengths_inputs)
{
    static const size_t lens[] = {0, 1, 7, 31, 4095, 4097};
    int isa = _i;
    red_pool *p;
    if (!red_isa_supported(isa))
        return; /* nothing to test on this CPU */
    ck_assert_int_eq(red_pool_new(1, 1000000, &p), 0);
    ck_assert_int_eq(red_pool_set_isa(p, isa), 0);
    for (int ti = 0; ti < KVS_NUM_DTYPES; ti++)
        for (int k = 1; k <= MAXK; k++)
            for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++)
                for (int alias = 0; alias < 2; alias++)
                    run_case(p, all_types[ti], k, lens[li], 0, alias);
    red_pool_free(p);
}
END_TEST

/* Pointers off by 1..7 bytes (also not a multiple of the element size). */
START_TEST(test_unaligned)
{
    int isa = _i;
    red_pool *p;
    if (!red_isa_supported(isa))
        return;
    ck_assert_int_eq(red_pool_new(1, 1000000, &p), 0);
    ck_assert_int_eq(red_pool_set_isa(p, isa), 0);
    for (int ti = 0; ti < KVS_NUM_DTYPES; ti++)
        for (size_t off = 1; off < 8; off++)
            for (int k = 1; k <= 5; k += 2) {
                run_case(p, all_types[ti], k, 4097, off, 0);
                run_case(p, all_types[ti], k, 4097, off, 1);
            }
    red_pool_free(p);
}
END_TEST

/* Threads 1..8 (uncapped), around a small bound so that the split runs. */
START_TEST(test_threads)
{
    int nt = _i;
    red_pool *p;
    ck_assert_int_eq(red_pool_new_ex(nt, 5000, RED_POOL_NOCAP, &p), 0);
    ck_assert_int_eq(red_pool_threads(p), nt);
    for (int ti = 0; ti < KVS_NUM_DTYPES; ti++) {
        run_case(p, all_types[ti], 4, 4999, 0, 0);
        run_case(p, all_types[ti], 4, 5000, 0, 0);
        run_case(p, all_types[ti], 3, 5001, 4, 1);
        run_case(p, all_types[ti], 8, 300001, 0, 0);
        run_case(p, all_types[ti], 2, 300001, 2, 1);
        run_case(p, all_types[ti], 1, 300001, 0, 0);
    }
    red_pool_free(p);
}
END_TEST

/* The default bound, 1000000 +- 1, 2 threads. */
START_TEST(test_bigarray_bound)
{
    red_pool *p;
    ck_assert_int_eq(red_pool_new_ex(2, 1000000, RED_POOL_NOCAP, &p), 0);
    for (size_t n = 999999; n <= 1000001; n++) {
        run_case(p, KVS_FLOAT32, 4, n, 0, 0);
        run_case(p, KVS_FLOAT16, 3, n, 0, 1);
    }
    run_case(p, KVS_INT64, 2, 1000001, 0, 0);
    run_case(p, KVS_BFLOAT16, 5, 1000001, 0, 0);
    red_pool_free(p);
}
END_TEST

static uint64_t streamed(red_pool *p)
{
    return atomic_load(&p->streamed);
}

/* The streaming-store path (kern->ntcpy), made to run on short arrays by
 * lowering the pool's threshold: every dtype, 2..8 inputs, outputs 64-byte
 * aligned or off by an element / half a line / a line less an element,
 * inputs aligned differently from the output, lengths below a line to
 * several blocks, 1 and 2 threads; alias (never streams) next to it. */
START_TEST(test_stream)
{
    static const size_t lens[] = {1, 7, 31, 33, 100, 4095, 4097, RED_BLOCK * 3 + 5};
    static const int ks[] = {2, 3, 4, 5, 8};
    int isa = _i;
    if (!red_isa_supported(isa))
        return;
    for (int nt = 1; nt <= 2; nt++) {
        red_pool *p;
        uint64_t before;
        ck_assert_int_eq(red_pool_new_ex(nt, 5000, RED_POOL_NOCAP, &p), 0);
        ck_assert_int_eq(red_pool_set_isa(p, isa), 0);
        p->stream_min = 64;
        for (int ti = 0; ti < KVS_NUM_DTYPES; ti++) {
            size_t es = kvs_dtype_size(all_types[ti]);
            size_t doffs[4] = {0, es, 32, 64 - es};
            for (size_t ki = 0; ki < sizeof(ks) / sizeof(ks[0]); ki++)
                for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++)
                    for (int di = 0; di < 4; di++)
                        run_case2(p, all_types[ti], ks[ki], lens[li], di == 1 ? 0 : 2 * es,
                                  doffs[di], 0);
            before = streamed(p);
            run_case(p, all_types[ti], 3, 4097, 0, 1); /* alias: no streaming */
            run_case(p, all_types[ti], 2, 4097, 0, 1);
            ck_assert_uint_eq(streamed(p), before);
            run_case(p, all_types[ti], 1, 4097, 0, 0); /* copy: no streaming */
            ck_assert_uint_eq(streamed(p), before);
        }
        /* the ISAs with streaming stores took that path; C never does */
        if (isa == RED_ISA_C)
            ck_assert_uint_eq(streamed(p), 0);
        else
            ck_assert_uint_gt(streamed(p), 0);
        red_pool_free(p);
    }
}
END_TEST

/* Streaming starts at exactly stream_min bytes: float32 and float16 outputs
 * just below, at and above it, aligned and not.  The pool's threshold is the
 * seam: its default is RED_STREAM_MIN (16 MiB), and the comparison is
 * tested at 64 KiB, with a big_bound low enough that the pool's threads
 * split the sum as they do for a 16 MiB one (4 inputs of 16 MiB, made and
 * checked element by element, took a minute). */
START_TEST(test_stream_threshold)
{
    red_pool *p;
    int can = red_kern_get(red_isa_best())->ntcpy != NULL;
    ck_assert_int_eq(red_pool_new_ex(2, 1000, RED_POOL_NOCAP, &p), 0);
    ck_assert_uint_eq(p->stream_min, RED_STREAM_MIN);
    p->stream_min = 64u << 10;
    for (int ti = 0; ti < 2; ti++) {
        kvs_dtype t = ti ? KVS_FLOAT16 : KVS_FLOAT32;
        size_t es = kvs_dtype_size(t), at = p->stream_min / es;
        size_t lens[3] = {at - 1, at, at + 17};
        for (int li = 0; li < 3; li++) {
            uint64_t before = streamed(p);
            run_case2(p, t, 4, lens[li], 0, li == 1 ? 0 : es, 0);
            ck_assert_uint_eq(streamed(p) - before, (uint64_t)(li > 0 && can));
        }
    }
    red_pool_free(p);
}
END_TEST

/* All 65,536 patterns of a half type, plus a set of addends that make
 * ties, overflow, underflow, signed zeros and NaN, on every ISA. */
START_TEST(test_half_all_patterns)
{
    static const double addends[] = {0.0, -0.0, 1.0, -1.0, 0x1p-24, 0x1p-25, 3 * 0x1p-25,
                                      0x1p-14, 65504.0, -65504.0, 0.5, 1.0009765625,
                                      0x1p-133, 0x1p127, INFINITY, -INFINITY, NAN};
    int isa = _i % RED_ISA_COUNT, stream = _i / RED_ISA_COUNT; /* stream: every size streams */
    red_pool *p;
    uint16_t *a = malloc(65536 * 2), *b = malloc(65536 * 2), *d = malloc(65536 * 2);
    if (!red_isa_supported(isa))
        goto out;
    ck_assert_int_eq(red_pool_new(1, 1000000, &p), 0);
    ck_assert_int_eq(red_pool_set_isa(p, isa), 0);
    if (stream)
        p->stream_min = 64;
    for (int ti = 0; ti < 2; ti++) {
        kvs_dtype t = ti ? KVS_BFLOAT16 : KVS_FLOAT16;
        for (unsigned h = 0; h < 65536; h++)
            a[h] = (uint16_t)h;
        /* k == 1 is an exact copy of every pattern, NaN payloads too */
        const void *in1[1] = {a};
        ck_assert_int_eq(red_sum(p, t, d, in1, 1, 65536), 0);
        ck_assert_int_eq(memcmp(a, d, 65536 * 2), 0);
        for (size_t ai = 0; ai < sizeof(addends) / sizeof(addends[0]); ai++) {
            uint16_t bv = half_round(t, addends[ai]);
            for (unsigned h = 0; h < 65536; h++)
                b[h] = bv;
            const void *in[2] = {a, b};
            ck_assert_int_eq(red_sum(p, t, d, in, 2, 65536), 0);
            for (unsigned h = 0; h < 65536; h++)
                if (check_elem(t, d, in, 2, h))
                    ck_abort_msg("%s isa %s: 0x%04x + 0x%04x = 0x%04x",
                                 ti ? "bf16" : "f16", red_isa_name(isa), h, bv, d[h]);
        }
    }
    red_pool_free(p);
out:
    free(a);
    free(b);
    free(d);
}
END_TEST

/* Rounding of float32 sums into the half types: every midpoint between two
 * neighbouring finite halves, and its float neighbours (ties and near-ties). */
START_TEST(test_half_midpoints)
{
    int isa = _i % RED_ISA_COUNT, stream = _i / RED_ISA_COUNT; /* stream: every size streams */
    red_pool *p;
    float *m = malloc(3 * 65536 * sizeof(float));
    uint16_t *hm = malloc(3 * 65536 * 2), *zero = calloc(3 * 65536, 2), *d = malloc(3 * 65536 * 2);
    if (!red_isa_supported(isa))
        goto out;
    ck_assert_int_eq(red_pool_new(1, 1000000, &p), 0);
    ck_assert_int_eq(red_pool_set_isa(p, isa), 0);
    if (stream)
        p->stream_min = 64;
    for (int ti = 0; ti < 2; ti++) {
        kvs_dtype t = ti ? KVS_BFLOAT16 : KVS_FLOAT16;
        unsigned inf = ti ? 0x7f80 : 0x7c00, n = 0;
        /* every float32 midpoint between neighbouring finite halves, and
         * the floats just below and above it */
        for (unsigned h = 1; h + 1 < inf; h++) {
            double lo = half_val(t, (uint16_t)h), up = half_val(t, (uint16_t)(h + 1));
            float fm = (float)((lo + up) / 2);
            m[n++] = fm;
            m[n++] = nextafterf(fm, 0);
            m[n++] = nextafterf(fm, INFINITY);
        }
        /* split each into two half inputs whose float32 sum is exactly it
         * (where the rest is representable; the others become 0 + 0) */
        for (unsigned i = 0; i < n; i++) {
            /* two halves whose float32 sum is exactly m[i] */
            uint16_t a = half_round(t, m[i]);
            double rest = (double)m[i] - half_val(t, a);
            uint16_t b = half_round(t, rest);
            if (half_val(t, b) != rest) {
                hm[i] = 0;
                zero[i] = 0;
                continue;
            }
            hm[i] = a;
            zero[i] = b;
        }
        const void *in[2] = {hm, zero};
        ck_assert_int_eq(red_sum(p, t, d, in, 2, n), 0);
        for (unsigned i = 0; i < n; i++)
            if (check_elem(t, d, in, 2, i))
                ck_abort_msg("%s isa %s: 0x%04x + 0x%04x -> 0x%04x", ti ? "bf16" : "f16",
                             red_isa_name(isa), hm[i], zero[i], d[i]);
    }
    red_pool_free(p);
out:
    free(m);
    free(hm);
    free(zero);
    free(d);
}
END_TEST

/* NaN and Inf behave as IEEE 754 says. */
START_TEST(test_nan_inf)
{
    float f[4] = {INFINITY, INFINITY, NAN, 1.0f}, g[4] = {1.0f, -INFINITY, 2.0f, NAN}, r[4];
    double dd[2] = {INFINITY, -0.0}, de[2] = {INFINITY, -0.0};
    uint16_t h[3] = {0x7bff, 0x7c00, 0x7e00}, hh[3] = {0x7bff, 0xfc00, 0x3c00}, hr[3];
    uint16_t b[2] = {0x7f7f, 0x7f80}, bb[2] = {0x7f7f, 0xff80}, br[2];
    const void *in[2];
    in[0] = f;
    in[1] = g;
    ck_assert_int_eq(red_sum(NULL, KVS_FLOAT32, r, in, 2, 4), 0);
    ck_assert(isinf(r[0]) && r[0] > 0);
    ck_assert(isnan(r[1]) && isnan(r[2]) && isnan(r[3]));
    ck_assert_int_eq(red_add(NULL, KVS_FLOAT64, dd, de, 2), 0);
    ck_assert(isinf(dd[0]) && dd[0] > 0);
    ck_assert(dd[1] == 0 && signbit(dd[1])); /* -0 + -0 = -0 */
    in[0] = h;
    in[1] = hh;
    ck_assert_int_eq(red_sum(NULL, KVS_FLOAT16, hr, in, 2, 3), 0);
    ck_assert_uint_eq(hr[0], 0x7c00); /* 65504 + 65504 overflows to +Inf */
    ck_assert(half_isnan(KVS_FLOAT16, hr[1]));
    ck_assert(half_isnan(KVS_FLOAT16, hr[2]));
    in[0] = b;
    in[1] = bb;
    ck_assert_int_eq(red_sum(NULL, KVS_BFLOAT16, br, in, 2, 2), 0);
    ck_assert_uint_eq(br[0], 0x7f80);
    ck_assert(half_isnan(KVS_BFLOAT16, br[1]));
}
END_TEST

START_TEST(test_errors)
{
    float a[2] = {1, 2}, d[2];
    const void *in[2] = {a, NULL};
    red_pool *p = NULL;
    ck_assert_int_eq(red_sum(NULL, (kvs_dtype)6, d, in, 1, 2), KVS_EINVAL);
    ck_assert_int_eq(red_sum(NULL, KVS_FLOAT32, d, in, 0, 2), KVS_EINVAL);
    ck_assert_int_eq(red_sum(NULL, KVS_FLOAT32, d, NULL, 1, 2), KVS_EINVAL);
    ck_assert_int_eq(red_sum(NULL, KVS_FLOAT32, NULL, in, 1, 2), KVS_EINVAL);
    ck_assert_int_eq(red_sum(NULL, KVS_FLOAT32, d, in, 2, 2), KVS_EINVAL);
    ck_assert_int_eq(red_add(NULL, KVS_FLOAT32, d, NULL, 2), KVS_EINVAL);
    ck_assert_int_eq(red_sum(NULL, KVS_FLOAT32, NULL, in, 2, 0), 0); /* empty */
    ck_assert_int_eq(red_pool_new(0, 10, &p), KVS_EINVAL);
    ck_assert_int_eq(red_pool_new(2, 10, NULL), KVS_EINVAL);
    ck_assert_int_eq(red_pool_new(1, 10, &p), 0);
    ck_assert_int_eq(red_pool_set_isa(p, RED_ISA_COUNT), KVS_EINVAL);
    ck_assert_int_eq(red_pool_set_isa(p, RED_ISA_C), 0);
    ck_assert_int_eq(red_pool_isa(p), RED_ISA_C);
    ck_assert_str_eq(red_isa_name(RED_ISA_C), "c");
    ck_assert_ptr_null(red_isa_name(-1));
    red_pool_free(p);
    red_pool_free(NULL);
}
END_TEST

/* The cap: without NOCAP a pool never has more threads than CPUs. */
START_TEST(test_cap)
{
    red_pool *p;
    ck_assert_int_eq(red_pool_new(64, 10, &p), 0);
    ck_assert_int_ge(red_pool_threads(p), 1);
    ck_assert_int_le(red_pool_threads(p), 64);
    ck_assert_int_le(red_pool_threads(p), (int)sysconf(_SC_NPROCESSORS_ONLN));
    red_pool_free(p);
    ck_assert_int_eq(red_pool_threads(NULL), 1);
}
END_TEST

/* Several threads summing on one pool at once (serialised inside). */
struct conc_arg {
    red_pool *p;
    int seed;
    int bad;
};

static void *conc_main(void *arg)
{
    struct conc_arg *c = arg;
    size_t n = 200003;
    uint32_t *a = malloc(n * 4), *b = malloc(n * 4), *d = malloc(n * 4);
    for (int round = 0; round < 20; round++) {
        for (size_t i = 0; i < n; i++) {
            a[i] = (uint32_t)(i * 7 + (size_t)c->seed);
            b[i] = (uint32_t)(i ^ (size_t)round);
        }
        const void *in[2] = {a, b};
        if (red_sum(c->p, KVS_INT32, d, in, 2, n) != 0)
            c->bad = 1;
        for (size_t i = 0; i < n; i++)
            if (d[i] != a[i] + b[i])
                c->bad = 1;
    }
    free(a);
    free(b);
    free(d);
    return NULL;
}

START_TEST(test_concurrent_callers)
{
    red_pool *p;
    pthread_t t[4];
    struct conc_arg c[4];
    ck_assert_int_eq(red_pool_new_ex(3, 1000, RED_POOL_NOCAP, &p), 0);
    for (int i = 0; i < 4; i++) {
        c[i] = (struct conc_arg){p, i * 1000, 0};
        ck_assert_int_eq(pthread_create(&t[i], NULL, conc_main, &c[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        ck_assert_int_eq(c[i].bad, 0);
    }
    red_pool_free(p);
}
END_TEST

/* Results do not depend on ISA or thread count (same order of additions). */
START_TEST(test_isa_thread_invariance)
{
    size_t n = 100003;
    float *in[6], *ref = malloc(n * 4), *out = malloc(n * 4);
    for (int j = 0; j < 6; j++) {
        in[j] = malloc(n * 4);
        fill(KVS_FLOAT32, in[j], n);
    }
    ck_assert_int_eq(red_sum(NULL, KVS_FLOAT32, ref, (const void *const *)in, 6, n), 0);
    for (int isa = 0; isa < RED_ISA_COUNT; isa++) {
        if (!red_isa_supported(isa))
            continue;
        for (int nt = 1; nt <= 4; nt++) {
            red_pool *p;
            ck_assert_int_eq(red_pool_new_ex(nt, 1000, RED_POOL_NOCAP, &p), 0);
            ck_assert_int_eq(red_pool_set_isa(p, isa), 0);
            ck_assert_int_eq(red_sum(p, KVS_FLOAT32, out, (const void *const *)in, 6, n), 0);
            ck_assert_int_eq(memcmp(ref, out, n * 4), 0);
            red_pool_free(p);
        }
    }
    for (int j = 0; j < 6; j++)
        free(in[j]);
    free(ref);
    free(out);
}
END_TEST

Suite *reduce_suite(void)
{
    Suite *s = suite_create("reduce");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_lengths_inputs, 0, RED_ISA_COUNT);
    tcase_add_loop_test(tc, test_unaligned, 0, RED_ISA_COUNT);
    tcase_add_loop_test(tc, test_threads, 1, 9);
    tcase_add_test(tc, test_bigarray_bound);
    tcase_add_loop_test(tc, test_stream, 0, RED_ISA_COUNT);
    tcase_add_test(tc, test_stream_threshold);
    tcase_add_loop_test(tc, test_half_all_patterns, 0, 2 * RED_ISA_COUNT);
    tcase_add_loop_test(tc, test_half_midpoints, 0, 2 * RED_ISA_COUNT);
    tcase_add_test(tc, test_nan_inf);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_cap);
    tcase_add_test(tc, test_concurrent_callers);
    tcase_add_test(tc, test_isa_thread_invariance);
    suite_add_tcase(s, tc);
    return s;
}
