/* test_decomp.c - compressed replies: the server's encoding of a round's
 * sum (server/decomp.c) and the worker's check and decoding of the reply
 * (worker/compress.c).
 *
 * W simulated workers encode their gradients with their residuals, the
 * "server" sums the decoded pushes, and srv_decomp_round encodes the sum
 * with the entry's residual.  2bit: the body's codes, the value every
 * worker decodes and the server's residual are compared bit for bit with
 * a scalar reference of MXNet's semantics written here, over many rounds
 * and sizes (not multiples of 16 too).  All residual codecs: over rounds,
 * what the workers pulled plus the server's residual is the sum of the
 * round sums (nothing lost), and the decoded value is what the body says.
 * fp16 keeps no residual.  Which entries compress, which requests get the
 * body, and every malformed reply the worker refuses. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kvs.h"
#include "proto/proto.h"
#include "reduce/codec.h"
#include "server/decomp.h"
#include "worker/compress.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) /* in [-1, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* MXNet's 2-bit semantics for one element: the value sent, res updated. */
static float ref2(float *res, float g, float t)
{
    *res += g;
    if (*res >= t) {
        *res -= t;
        return t;
    }
    if (*res <= -t) {
        *res -= -t;
        return -t;
    }
    return 0.0f;
}

/* MXNet's layout: the 2-bit code of element i of a body's words. */
static unsigned code2(const uint8_t *words, size_t i)
{
    return (words[4 * (i / 16) + (i % 16) / 4] >> (6 - 2 * (i % 4))) & 3u;
}

static void entry_of(srv_entry *e, const red_codec *c, uint64_t n)
{
    memset(e, 0, sizeof *e);
    e->count = e->total = n;
    e->bytes = n * 4;
    e->dtype = KVS_FLOAT32;
    e->codec_set = true;
    e->codec = (uint8_t)c->id;
    e->codec_param = c->param;
    e->codec_pull = true;
}

static const size_t sizes[] = {1, 15, 16, 17, 33, 100, 1000, 4097, 65539};
#define NSIZES (sizeof sizes / sizeof sizes[0])
#define W 3

/* Rounds of W workers: the decoded pushes summed, then the server's round. */
START_TEST(test_2bit_server_round_exact)
{
    size_t n = sizes[(size_t)_i % NSIZES];
    if (_i >= (int)NSIZES)
        ck_assert_int_eq(red_codec_portable(1), 1);
    red_codec c = {RED_CODEC_2BIT, 0.25f, 1};
    srv_entry e;
    entry_of(&e, &c, n);
    float *g = malloc(n * 4), *wres = calloc(W * n, 4), *acc = malloc(n * 4);
    float *sres = calloc(n, 4), *want = malloc(n * 4);
    for (int r = 0; r < 25; r++) {
        memset(acc, 0, n * 4);
        for (int w = 0; w < W; w++)
            for (size_t i = 0; i < n; i++) {
                g[i] = frand() * 0.4f;
                acc[i] += ref2(&wres[(size_t)w * n + i], g[i], c.param);
            }
        for (size_t i = 0; i < n; i++)
            want[i] = ref2(&sres[i], acc[i], c.param);
        ck_assert_int_eq(srv_decomp_round(&e, (uint8_t *)acc), 0);
        ck_assert_ptr_nonnull(e.znext);
        ck_assert_uint_eq(e.znext_len, 4 + 4 * ((n + 15) / 16));
        float t;
        memcpy(&t, e.znext->data, 4);
        ck_assert(t == c.param);
        for (size_t i = 0; i < n; i++) {
            unsigned code = code2(e.znext->data + 4, i);
            unsigned wcode = want[i] > 0 ? 3u : want[i] < 0 ? 2u : 0u;
            ck_assert_msg(code == wcode, "round %d [%zu]: code %u, expected %u", r, i, code,
                          wcode);
            ck_assert_msg(memcmp(&acc[i], &want[i], 4) == 0, "round %d [%zu]: %g != %g", r,
                          i, (double)acc[i], (double)want[i]);
            ck_assert_msg(memcmp(&e.zres[i], &sres[i], 4) == 0, "round %d [%zu]: residual "
                          "%g != %g", r, i, (double)e.zres[i], (double)sres[i]);
        }
        srv_decomp_completed(&e, 0);
        ck_assert_ptr_nonnull(e.zbody);
        ck_assert_ptr_null(e.znext);
    }
    srv_decomp_forget(&e);
    ck_assert_ptr_null(e.zbody);
    ck_assert_ptr_null(e.zres);
    free(g);
    free(wres);
    free(acc);
    free(sres);
    free(want);
}
END_TEST

/* Error feedback on the server: pulled + residual == the sum of the round
 * sums, and the value is the body's decoding (what a worker gets). */
static void check_conserves(red_codec c, size_t n)
{
    srv_entry e;
    entry_of(&e, &c, n);
    float *acc = malloc(n * 4), *dec = malloc(n * 4), p;
    double *sums = calloc(n, 8), *pulled = calloc(n, 8);
    char why[200];
    for (int r = 0; r < 30; r++) {
        for (size_t i = 0; i < n; i++) {
            acc[i] = frand() * (r % 3 ? 1.0f : 0.01f);
            sums[i] += acc[i];
        }
        ck_assert_int_eq(srv_decomp_round(&e, (uint8_t *)acc), 0);
        ck_assert_int_eq(red_codec_decode(c.id, e.znext->data, e.znext_len, dec, n, &p, why,
                                          sizeof why), 0);
        ck_assert(memcmp(dec, acc, n * 4) == 0);
        for (size_t i = 0; i < n; i++)
            pulled[i] += acc[i];
        srv_decomp_completed(&e, 0);
    }
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabs(pulled[i] + e.zres[i] - sums[i]) <= 1e-4 * (1 + fabs(sums[i])),
                      "%s n %zu [%zu]: pulled %g + residual %g != %g", red_codec_name(c.id),
                      n, i, pulled[i], (double)e.zres[i], sums[i]);
    srv_decomp_forget(&e);
    free(acc);
    free(dec);
    free(sums);
    free(pulled);
}

START_TEST(test_server_residual_conserves)
{
    check_conserves((red_codec){RED_CODEC_2BIT, 0.5f, 1}, sizes[_i]);
    check_conserves((red_codec){RED_CODEC_1BIT, 0, 1}, sizes[_i]);
    check_conserves((red_codec){RED_CODEC_TOPK, 0.05f, 1}, sizes[_i]);
}
END_TEST

START_TEST(test_fp16_no_residual)
{
    red_codec c = {RED_CODEC_FP16, 0, 1};
    srv_entry e;
    float acc[5] = {1.0f, -2.5f, 1.0f + 1.0f / 4096, 1e6f, 0.1f};
    entry_of(&e, &c, 5);
    ck_assert_int_eq(srv_decomp_round(&e, (uint8_t *)acc), 0);
    ck_assert_ptr_null(e.zres);
    ck_assert_uint_eq(e.znext_len, 10);
    ck_assert(acc[0] == 1.0f && acc[1] == -2.5f && acc[2] == 1.0f && isinf(acc[3]) &&
              acc[4] == 0.0999755859375f);
    srv_decomp_forget(&e);
}
END_TEST

/* Which rounds compress, which replies carry the body. */
START_TEST(test_wants_and_replies)
{
    red_codec c = {RED_CODEC_2BIT, 0.5f, 1};
    srv_entry e;
    proto_hdr h, zh;
    float acc[20] = {1.0f};
    entry_of(&e, &c, 20);
    ck_assert(srv_decomp_wants(&e, false));
    ck_assert(!srv_decomp_wants(&e, true)); /* an optimizer: pulls return weights */
    e.async = true;
    ck_assert(!srv_decomp_wants(&e, false)); /* async: the value is a running state */
    e.async = false;
    e.codec_pull = false;
    ck_assert(!srv_decomp_wants(&e, false)); /* pull=0 */
    e.codec_pull = true;
    e.codec = 0;
    ck_assert(!srv_decomp_wants(&e, false)); /* plain pushes */
    e.codec = RED_CODEC_2BIT;

    memset(&h, 0, sizeof h);
    h.type = PROTO_PULL;
    h.count = h.total = 20;
    h.dtype = KVS_FLOAT32;
    ck_assert_ptr_null(srv_decomp_reply(&e, &h, &zh)); /* no round yet: plain */
    ck_assert_int_eq(srv_decomp_round(&e, (uint8_t *)acc), 0);
    ck_assert_ptr_null(srv_decomp_reply(&e, &h, &zh)); /* not completed yet */
    srv_decomp_completed(&e, 0);
    ck_assert_ptr_eq(srv_decomp_reply(&e, &h, &zh), e.zbody);
    ck_assert_uint_eq(PROTO_CODEC(zh.flags), RED_CODEC_2BIT);
    ck_assert_uint_eq(zh.body_len, 12);
    ck_assert(acc[0] == 0.5f && acc[1] == 0.0f && e.zres[0] == 0.5f);
    h.type = PROTO_PUSHPULL;
    ck_assert_ptr_eq(srv_decomp_reply(&e, &h, &zh), e.zbody);
    h.type = PROTO_PUSH; /* no value */
    ck_assert_ptr_null(srv_decomp_reply(&e, &h, &zh));
    h.type = PROTO_PULL;
    h.flags = PROTO_F_CMA; /* by direct copy: the decoded value */
    ck_assert_ptr_null(srv_decomp_reply(&e, &h, &zh));
    h.flags = 0;
    /* a failed round keeps the value and its body; an init forgets both */
    ck_assert_int_eq(srv_decomp_round(&e, (uint8_t *)acc), 0);
    srv_buf *kept = e.zbody;
    srv_decomp_completed(&e, KVS_EINVAL);
    ck_assert_ptr_eq(e.zbody, kept);
    ck_assert_ptr_null(e.znext);
    srv_decomp_forget(&e);
    ck_assert_ptr_null(srv_decomp_reply(&e, &h, &zh));
    ck_assert_ptr_null(e.zres);
}
END_TEST

/* The worker's side: a compressed reply is checked against its request
 * and decoded; anything else is KVS_EPROTO with a reason, never a crash. */
START_TEST(test_worker_refuses_bad_replies)
{
    proto_hdr req, h;
    float out[20], half = 0.5f;
    uint8_t body[64] = {0};
    char why[300];
    memset(&req, 0, sizeof req);
    req.type = PROTO_PULL;
    req.key = 9;
    req.count = req.total = 20;
    req.dtype = KVS_FLOAT32;
    h = req;
    h.type = PROTO_REPLY;
    h.flags = RED_CODEC_2BIT << PROTO_CODEC_SHIFT;
    h.body_len = 12;
    memcpy(body, &half, 4);
    body[4] = 0xC0; /* element 0: +T */
    body[8] = 0x80; /* element 16: -T */
    ck_assert_int_eq(wrk_codec_reply(&h, body, &req, out, why, sizeof why), 0);
    for (int i = 0; i < 20; i++)
        ck_assert(out[i] == (i == 0 ? 0.5f : i == 16 ? -0.5f : 0.0f));
    h.body_len = 16; /* wrong size */
    ck_assert_int_eq(wrk_codec_reply(&h, body, &req, out, why, sizeof why), KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "expected 12"));
    ck_assert_ptr_nonnull(strstr(why, "key 9"));
    h.body_len = 12;
    ck_assert_int_eq(wrk_codec_reply(&h, NULL, &req, out, why, sizeof why), KVS_EPROTO);
    body[5] = 0x40; /* element 4: code 01 */
    ck_assert_int_eq(wrk_codec_reply(&h, body, &req, out, why, sizeof why), KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "code 01"));
    body[5] = 0;
    body[9] = 0xC0; /* element 20: past the part's 20 elements */
    ck_assert_int_eq(wrk_codec_reply(&h, body, &req, out, why, sizeof why), KVS_EPROTO);
    body[9] = 0;
    h.count = 19; /* not what was asked */
    ck_assert_int_eq(wrk_codec_reply(&h, body, &req, out, why, sizeof why), KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "does not match"));
    h.count = 20;
    req.dtype = KVS_FLOAT64;
    ck_assert_int_eq(wrk_codec_reply(&h, body, &req, out, why, sizeof why), KVS_EPROTO);
    req.dtype = KVS_FLOAT32;
    h.flags = 9u << PROTO_CODEC_SHIFT; /* no such codec */
    ck_assert_int_eq(wrk_codec_reply(&h, body, &req, out, why, sizeof why), KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "unknown gradient compression 9"));
    h.flags = RED_CODEC_1BIT << PROTO_CODEC_SHIFT; /* 1bit of 20: 4 + 4 bytes */
    h.body_len = 8;
    memset(body + 4, 0, 8);
    body[7] = 0x80; /* bit 31: past element 19 */
    ck_assert_int_eq(wrk_codec_reply(&h, body, &req, out, why, sizeof why), KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "past"));
    body[7] = 0;
    float neg = -1.0f;
    memcpy(body, &neg, 4);
    ck_assert_int_eq(wrk_codec_reply(&h, body, &req, out, why, sizeof why), KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "scale"));
}
END_TEST

START_TEST(test_spec_pull)
{
    red_codec c;
    char why[256], spec[64];
    ck_assert_int_eq(red_codec_parse("2bit", &c, why, sizeof why), 0);
    ck_assert_int_eq(c.pull, 1);
    ck_assert_int_eq(red_codec_parse("fp16", &c, why, sizeof why), 0);
    ck_assert_int_eq(c.pull, 1);
    ck_assert_int_eq(red_codec_parse("none", &c, why, sizeof why), 0);
    ck_assert_int_eq(c.pull, 0);
    ck_assert_int_eq(red_codec_parse("2bit pull=0 threshold=0.25", &c, why, sizeof why), 0);
    ck_assert(c.id == RED_CODEC_2BIT && c.param == 0.25f && c.pull == 0);
    red_codec_spec(&c, spec, sizeof spec);
    ck_assert_str_eq(spec, "2bit threshold=0.25 pull=0");
    ck_assert_int_eq(red_codec_parse("1bit pull=1", &c, why, sizeof why), 0);
    red_codec_spec(&c, spec, sizeof spec);
    ck_assert_str_eq(spec, "1bit");
    ck_assert_int_eq(red_codec_parse("topk ratio=0.1 pull=0", &c, why, sizeof why), 0);
    red_codec_spec(&c, spec, sizeof spec);
    ck_assert_str_eq(spec, "topk ratio=0.100000001 pull=0");
    static const struct { const char *spec, *names; } bad[] = {
        {"2bit pull=2", "'pull=2'"},
        {"2bit pull=yes", "'pull=yes'"},
        {"1bit pull=01", "'pull=01'"},
        {"2bit pull=0 pull=1", "'pull=1'"},
        {"none pull=0", "'pull=0'"},
        {"fp16 pull=", "'pull='"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(red_codec_parse(bad[i].spec, &c, why, sizeof why), KVS_EINVAL);
        ck_assert_msg(strstr(why, bad[i].names) != NULL, "'%s': %s", bad[i].spec, why);
    }
}
END_TEST

Suite *decomp_suite(void)
{
    Suite *s = suite_create("decomp");
    TCase *tc = tcase_create("decomp");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_2bit_server_round_exact, 0, 2 * (int)NSIZES);
    tcase_add_loop_test(tc, test_server_residual_conserves, 0, (int)NSIZES);
    tcase_add_test(tc, test_fp16_no_residual);
    tcase_add_test(tc, test_wants_and_replies);
    tcase_add_test(tc, test_worker_refuses_bad_replies);
    tcase_add_test(tc, test_spec_pull);
    suite_add_tcase(s, tc);
    return s;
}
