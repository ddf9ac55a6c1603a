/* test_codec.c - reduce/codec: gradient compression against references
 * written from the codecs' definitions, not from codec.c.
 *
 * 2bit: MXNet's documented semantics (residual += gradient; >= T sends +T
 * and subtracts T; <= -T sends -T and adds T; else 0) and its layout (16
 * values a 32-bit word, element j in byte j/4, bits from the top, 11 = +T,
 * 10 = -T); codes, residuals and the server's sum of the decoded pushes are
 * compared bit for bit over many rounds and sizes.  1bit and topk: error
 * feedback conserves the sum of the gradients (sent + residual), topk sends
 * exactly the k largest magnitudes.  fp16: round to nearest even.  Every
 * malformed spec and body is refused.  The SIMD loops (where the CPU has
 * them) and the portable ones are both run. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kvs.h"
#include "reduce/codec.h"
#include "reduce/reduce.h"

static uint64_t rng = 88172645463325252ull;
static float frand(void) /* in [-1, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* ---- the scalar 2-bit reference ---- */

static void ref2_encode(const float *g, float *r, size_t n, float t, uint8_t *words)
{
    static const uint8_t posbits[] = {0xc0, 0x30, 0x0c, 0x03};
    static const uint8_t negbits[] = {0x80, 0x20, 0x08, 0x02};
    memset(words, 0, 4 * ((n + 15) / 16));
    for (size_t i = 0; i < n; i++) {
        uint8_t *byte = words + 4 * (i / 16) + (i % 16) / 4;
        r[i] += g[i];
        if (r[i] >= t) {
            *byte |= posbits[i % 4];
            r[i] -= t;
        } else if (r[i] <= -t) {
            *byte |= negbits[i % 4];
            r[i] -= -t;
        }
    }
}

static float ref2_value(const uint8_t *words, size_t i, float t)
{
    static const uint8_t posbits[] = {0xc0, 0x30, 0x0c, 0x03};
    static const uint8_t negbits[] = {0x80, 0x20, 0x08, 0x02};
    uint8_t b = words[4 * (i / 16) + (i % 16) / 4] & posbits[i % 4];
    return b == posbits[i % 4] ? t : b == negbits[i % 4] ? -t : 0.0f;
}

static const size_t sizes[] = {1, 2, 15, 16, 17, 31, 32, 33, 100, 1000, 4097, 65539};
#define NSIZES (sizeof sizes / sizeof sizes[0])

START_TEST(test_2bit_bit_exact)
{
    const int W = 3, rounds = 25;
    size_t n = sizes[(size_t)_i % NSIZES];
    if (_i >= (int)NSIZES)
        ck_assert_int_eq(red_codec_portable(1), 1); /* the portable loops too */
    float t = _i % 2 ? 0.5f : 0.3f;
    red_codec c = {RED_CODEC_2BIT, t, 1};
    uint64_t len = red_codec_bytes(&c, n);
    ck_assert_uint_eq(len, 4 + 4 * ((n + 15) / 16));
    float *g = malloc(n * sizeof *g), *dec = malloc(n * sizeof *dec);
    float *res = calloc((size_t)W * n, sizeof *res), *rref = calloc((size_t)W * n, sizeof *rref);
    float *sum = malloc(n * sizeof *sum), *sref = malloc(n * sizeof *sref);
    uint8_t *body = malloc(len), *wref = malloc(len);
    for (int round = 0; round < rounds; round++) {
        for (int w = 0; w < W; w++) {
            for (size_t i = 0; i < n; i++)
                g[i] = frand() * 0.4f * (float)(w + 1);
            ck_assert_int_eq(red_codec_encode(&c, g, res + (size_t)w * n, n, body, NULL), 0);
            ref2_encode(g, rref + (size_t)w * n, n, t, wref);
            float tb;
            memcpy(&tb, body, 4);
            ck_assert(tb == t);
            ck_assert_int_eq(memcmp(body + 4, wref, len - 4), 0);
            ck_assert_int_eq(memcmp(res + (size_t)w * n, rref + (size_t)w * n, n * 4), 0);
            float p = 0;
            char why[200];
            ck_assert_int_eq(red_codec_decode(RED_CODEC_2BIT, body, len, dec, n, &p, why,
                                              sizeof why), 0);
            ck_assert(p == t);
            for (size_t i = 0; i < n; i++) { /* the server's sum, in arrival order */
                float v = ref2_value(wref, i, t);
                ck_assert_msg(memcmp(&dec[i], &v, 4) == 0, "n %zu i %zu: %g vs %g", n, i,
                              (double)dec[i], (double)v);
                sref[i] = w == 0 ? v : sref[i] + v;
            }
            if (w == 0)
                memcpy(sum, dec, n * 4);
            else
                red_add(NULL, KVS_FLOAT32, sum, dec, n);
        }
        ck_assert_int_eq(memcmp(sum, sref, n * 4), 0);
    }
    free(g);
    free(dec);
    free(res);
    free(rref);
    free(sum);
    free(sref);
    free(body);
    free(wref);
}
END_TEST

/* Error feedback: after R rounds, what was sent plus the residual is the
 * sum of the gradients (up to float rounding). */
static void check_conserves(red_codec c, size_t n)
{
    const int rounds = 30;
    uint64_t len = red_codec_bytes(&c, n);
    float *g = malloc(n * 4), *res = calloc(n, 4), *dec = malloc(n * 4);
    double *sent = calloc(n, sizeof *sent), *want = calloc(n, sizeof *want);
    uint8_t *body = malloc(len);
    for (int r = 0; r < rounds; r++) {
        for (size_t i = 0; i < n; i++) {
            g[i] = frand() * (i % 7 == 0 ? 3.0f : 0.1f);
            want[i] += g[i];
        }
        ck_assert_int_eq(red_codec_encode(&c, g, res, n, body, NULL), 0);
        float p;
        char why[200];
        ck_assert_msg(red_codec_decode(c.id, body, len, dec, n, &p, why, sizeof why) == 0,
                      "%s", why);
        if (c.id == RED_CODEC_TOPK) {
            uint64_t k = red_codec_topk_k(c.param, n), nz = 0;
            float smallest_sent = INFINITY, largest_kept = 0;
            for (size_t i = 0; i < n; i++) {
                if (dec[i] != 0.0f) {
                    nz++;
                    smallest_sent = fminf(smallest_sent, fabsf(dec[i]));
                    ck_assert(res[i] == 0.0f);
                } else {
                    largest_kept = fmaxf(largest_kept, fabsf(res[i]));
                }
            }
            ck_assert_uint_eq(nz, k);
            ck_assert(smallest_sent >= largest_kept);
        }
        if (c.id == RED_CODEC_1BIT) { /* one magnitude, the mean of |residual + g| */
            float s;
            memcpy(&s, body, 4);
            for (size_t i = 0; i < n; i++)
                ck_assert(fabsf(dec[i]) == s);
        }
        for (size_t i = 0; i < n; i++)
            sent[i] += dec[i];
    }
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabs(sent[i] + res[i] - want[i]) <= 1e-4 * (1 + fabs(want[i])),
                      "%s n %zu i %zu: sent %g + residual %g != %g", red_codec_name(c.id), n,
                      i, sent[i], (double)res[i], want[i]);
    free(g);
    free(res);
    free(dec);
    free(sent);
    free(want);
    free(body);
}

START_TEST(test_1bit_conserves)
{
    if (_i >= (int)NSIZES)
        ck_assert_int_eq(red_codec_portable(1), 1);
    check_conserves((red_codec){RED_CODEC_1BIT, 0, 1}, sizes[(size_t)_i % NSIZES]);
}
END_TEST

START_TEST(test_topk_conserves)
{
    check_conserves((red_codec){RED_CODEC_TOPK, 0.01f, 1}, sizes[_i]);
    check_conserves((red_codec){RED_CODEC_TOPK, 0.3f, 1}, sizes[_i]);
}
END_TEST

START_TEST(test_topk_k)
{
    ck_assert_uint_eq(red_codec_topk_k(0.1f, 20), 2); /* 0.1f * 20 = 2.0000000298 */
    ck_assert_uint_eq(red_codec_topk_k(0.01f, 100000), 1000);
    ck_assert_uint_eq(red_codec_topk_k(0.01f, 100001), 1001);
    ck_assert_uint_eq(red_codec_topk_k(0.3f, 10), 3);
    ck_assert_uint_eq(red_codec_topk_k(0.001f, 5), 1); /* at least one */
    ck_assert_uint_eq(red_codec_topk_k(1.0f, 7), 7);
    ck_assert_uint_eq(red_codec_topk_k(0.5f, 0), 0);
}
END_TEST

START_TEST(test_topk_ties)
{
    /* equal magnitudes: exactly k are sent, the lowest indices first */
    red_codec c = {RED_CODEC_TOPK, 0.25f, 1};
    float g[16], res[16] = {0}, dec[16], p;
    uint8_t body[8 + 8 * 4];
    char why[200];
    for (int i = 0; i < 16; i++)
        g[i] = i % 2 ? -1.0f : 1.0f;
    ck_assert_uint_eq(red_codec_bytes(&c, 16), sizeof body);
    ck_assert_int_eq(red_codec_encode(&c, g, res, 16, body, NULL), 0);
    ck_assert_int_eq(red_codec_decode(RED_CODEC_TOPK, body, sizeof body, dec, 16, &p, why,
                                      sizeof why), 0);
    for (int i = 0; i < 16; i++) {
        ck_assert(dec[i] == (i < 4 ? g[i] : 0.0f));
        ck_assert(res[i] == (i < 4 ? 0.0f : g[i]));
    }
}
END_TEST

START_TEST(test_fp16)
{
    red_codec_portable(_i);
    red_codec c = {RED_CODEC_FP16, 0, 1};
    const float x[] = {0.0f, 1.0f, -2.5f, 65504.0f, 1.0f + 1.0f / 4096, 2.9e-8f, 1e6f};
    /* 1 + 2^-12 is a tie between 1 and 1 + 2^-10: even is 1; 2.9e-8 is below
     * half the smallest subnormal (2^-25, 2.98e-8): 0; 1e6 overflows: inf */
    const float want[] = {0.0f, 1.0f, -2.5f, 65504.0f, 1.0f, 0.0f, INFINITY};
    size_t n = sizeof x / sizeof x[0];
    uint8_t body[2 * sizeof x / sizeof x[0]];
    float dec[sizeof x / sizeof x[0]], p;
    char why[200];
    ck_assert_uint_eq(red_codec_bytes(&c, n), 2 * n);
    ck_assert_int_eq(red_codec_encode(&c, x, NULL, n, body, NULL), 0);
    ck_assert_int_eq(red_codec_decode(RED_CODEC_FP16, body, 2 * n, dec, n, &p, why, sizeof why),
                     0);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(dec[i] == want[i], "%zu: %g != %g", i, (double)dec[i], (double)want[i]);
}
END_TEST

START_TEST(test_specs)
{
    red_codec c;
    char why[256], spec[64];
    ck_assert_int_eq(red_codec_parse(NULL, &c, why, sizeof why), 0);
    ck_assert_int_eq(c.id, RED_CODEC_NONE);
    ck_assert_int_eq(red_codec_parse("none", &c, why, sizeof why), 0);
    ck_assert_int_eq(c.id, RED_CODEC_NONE);
    ck_assert_int_eq(red_codec_parse("2bit", &c, why, sizeof why), 0);
    ck_assert(c.id == RED_CODEC_2BIT && c.param == 0.5f);
    ck_assert_int_eq(red_codec_parse("  2bit   threshold=0.25 ", &c, why, sizeof why), 0);
    ck_assert(c.id == RED_CODEC_2BIT && c.param == 0.25f);
    red_codec_spec(&c, spec, sizeof spec);
    ck_assert_str_eq(spec, "2bit threshold=0.25");
    ck_assert_int_eq(red_codec_parse("1bit", &c, why, sizeof why), 0);
    ck_assert_int_eq(c.id, RED_CODEC_1BIT);
    ck_assert_int_eq(red_codec_parse("topk ratio=0.01", &c, why, sizeof why), 0);
    ck_assert(c.id == RED_CODEC_TOPK && c.param == 0.01f);
    ck_assert_int_eq(red_codec_parse("fp16", &c, why, sizeof why), 0);
    ck_assert_int_eq(c.id, RED_CODEC_FP16);
    static const struct { const char *spec, *names; } bad[] = {
        {"3bit", "'3bit'"},
        {"2bit threshold=0", "threshold='0'"},
        {"2bit threshold=-1", "threshold='-1'"},
        {"2bit threshold=abc", "threshold='abc'"},
        {"2bit threshold=inf", "threshold='inf'"},
        {"2bit threshold=", "'threshold='"},
        {"2bit ratio=0.5", "'ratio=0.5'"},
        {"2bit threshold=0.5 threshold=1", "'threshold=1'"},
        {"topk", "ratio=R"},
        {"topk ratio=2", "ratio='2'"},
        {"topk ratio=0", "ratio='0'"},
        {"1bit threshold=1", "'threshold=1'"},
        {"fp16 x", "'x'"},
        {"2BIT", "'2BIT'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(red_codec_parse(bad[i].spec, &c, why, sizeof why), KVS_EINVAL);
        ck_assert_msg(strstr(why, bad[i].names) != NULL, "'%s': %s", bad[i].spec, why);
    }
}
END_TEST

START_TEST(test_bad_bodies)
{
    float dst[64], p;
    char why[200];
    uint8_t body[600] = {0};
    float half = 0.5f, nan = NAN, neg = -1.0f;
    /* 2bit: size and threshold */
    memcpy(body, &half, 4);
    ck_assert_int_eq(red_codec_decode(RED_CODEC_2BIT, body, 4 + 16, dst, 64, &p, why,
                                      sizeof why), 0);
    ck_assert_int_eq(red_codec_decode(RED_CODEC_2BIT, body, 4 + 12, dst, 64, &p, why,
                                      sizeof why), KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "expected 20"));
    memcpy(body, &nan, 4);
    ck_assert_int_eq(red_codec_decode(RED_CODEC_2BIT, body, 20, dst, 64, &p, why, sizeof why),
                     KVS_EPROTO);
    memcpy(body, &neg, 4);
    ck_assert_int_eq(red_codec_decode(RED_CODEC_1BIT, body, 12, dst, 64, &p, why, sizeof why),
                     KVS_EPROTO);
    /* topk: ratio, count, indices */
    float ratio = 0.05f; /* k = ceil(3.2) = 4 of 64 */
    uint32_t k = 4, idx[4] = {1, 5, 9, 63};
    memcpy(body, &ratio, 4);
    memcpy(body + 4, &k, 4);
    memcpy(body + 8, idx, sizeof idx);
    ck_assert_int_eq(red_codec_decode(RED_CODEC_TOPK, body, 8 + 32, dst, 64, &p, why,
                                      sizeof why), 0);
    idx[3] = 64;
    memcpy(body + 8, idx, sizeof idx);
    ck_assert_int_eq(red_codec_decode(RED_CODEC_TOPK, body, 8 + 32, dst, 64, &p, why,
                                      sizeof why), KVS_EPROTO);
    idx[3] = 9; /* not increasing */
    memcpy(body + 8, idx, sizeof idx);
    ck_assert_int_eq(red_codec_decode(RED_CODEC_TOPK, body, 8 + 32, dst, 64, &p, why,
                                      sizeof why), KVS_EPROTO);
    k = 3;
    memcpy(body + 4, &k, 4);
    ck_assert_int_eq(red_codec_decode(RED_CODEC_TOPK, body, 8 + 32, dst, 64, &p, why,
                                      sizeof why), KVS_EPROTO);
    ck_assert_int_eq(red_codec_decode(RED_CODEC_TOPK, body, 4, dst, 64, &p, why, sizeof why),
                     KVS_EPROTO);
    ck_assert_int_eq(red_codec_decode(RED_CODEC_FP16, body, 127, dst, 64, &p, why, sizeof why),
                     KVS_EPROTO);
    ck_assert_int_eq(red_codec_decode(9, body, 128, dst, 64, &p, why, sizeof why), KVS_EPROTO);
}
END_TEST

/* red_codec_encode_decoded: the same body and residual as red_codec_encode,
 * and dec (apart, or the gradient itself) the same floats, bit for bit, as
 * red_codec_decode of that body; every codec, both loops, every size. */
START_TEST(test_encode_decoded)
{
    static const red_codec codecs[] = {{RED_CODEC_2BIT, 0.3f, 1}, {RED_CODEC_1BIT, 0, 1},
                                       {RED_CODEC_TOPK, 0.05f, 1}, {RED_CODEC_FP16, 0, 1}};
    size_t n = sizes[(size_t)_i % NSIZES];
    if (_i >= (int)NSIZES)
        ck_assert_int_eq(red_codec_portable(1), 1);
    for (size_t ci = 0; ci < sizeof codecs / sizeof codecs[0]; ci++) {
        red_codec c = codecs[ci];
        uint64_t len = red_codec_bytes(&c, n);
        float *g = malloc(n * 4), *r1 = calloc(n, 4), *r2 = calloc(n, 4), *r3 = calloc(n, 4);
        float *want = malloc(n * 4), *dec = malloc(n * 4), *alias = malloc(n * 4);
        uint8_t *b1 = malloc(len), *b2 = malloc(len), *b3 = malloc(len);
        for (int round = 0; round < 4; round++) {
            for (size_t i = 0; i < n; i++)
                g[i] = frand() * (i % 5 == 0 ? 2.0f : 0.2f);
            memcpy(alias, g, n * 4);
            float p;
            char why[200];
            ck_assert_int_eq(red_codec_encode(&c, g, r1, n, b1, NULL), 0);
            ck_assert_int_eq(red_codec_decode(c.id, b1, len, want, n, &p, why, sizeof why), 0);
            ck_assert_int_eq(red_codec_encode_decoded(&c, g, r2, n, b2, NULL, dec), 0);
            ck_assert_int_eq(red_codec_encode_decoded(&c, alias, r3, n, b3, NULL, alias), 0);
            ck_assert(memcmp(b1, b2, len) == 0 && memcmp(b1, b3, len) == 0);
            if (c.id != RED_CODEC_FP16) /* (fp16 keeps no residual) */
                ck_assert(memcmp(r1, r2, n * 4) == 0 && memcmp(r1, r3, n * 4) == 0);
            for (size_t i = 0; i < n; i++)
                ck_assert_msg(memcmp(&want[i], &dec[i], 4) == 0 &&
                                  memcmp(&want[i], &alias[i], 4) == 0,
                              "%s n %zu i %zu: decoded %a, in the pass %a, aliased %a",
                              red_codec_name(c.id), n, i, (double)want[i], (double)dec[i],
                              (double)alias[i]);
        }
        free(g);
        free(r1);
        free(r2);
        free(r3);
        free(want);
        free(dec);
        free(alias);
        free(b1);
        free(b2);
        free(b3);
    }
}
END_TEST

Suite *codec_suite(void)
{
    Suite *s = suite_create("codec");
    TCase *tc = tcase_create("codec");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_2bit_bit_exact, 0, 2 * (int)NSIZES);
    tcase_add_loop_test(tc, test_1bit_conserves, 0, 2 * (int)NSIZES);
    tcase_add_loop_test(tc, test_topk_conserves, 0, (int)NSIZES);
    tcase_add_test(tc, test_topk_k);
    tcase_add_test(tc, test_topk_ties);
    tcase_add_loop_test(tc, test_fp16, 0, 2);
    tcase_add_test(tc, test_specs);
    tcase_add_test(tc, test_bad_bodies);
    tcase_add_loop_test(tc, test_encode_decoded, 0, 2 * (int)NSIZES);
    suite_add_tcase(s, tc);
    return s;
}
