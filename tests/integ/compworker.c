/*
 * compworker.c - kvs-compworker: the worker program of the gradient
 * compression integration tests (test_compress.c).
 *
 *   kvs-compworker sum --spec SPEC [--rounds N] [--async] [--optim SPEC]
 *                      [--ratio X] [--pull-ratio X] [--group [--group-min B]]
 *   kvs-compworker errors
 *   kvs-compworker disagree --spec SPEC
 *
 * sum: sets SPEC (every worker), initialises the keys below to 0, then
 * runs N rounds.  dist_sync: each round is a pushpull of this worker's
 * gradients, and the pulled value is compared bit for bit with the sum of
 * every worker's encoded gradients, which this program computes itself for
 * all workers: 2bit with a scalar reference of MXNet's semantics written
 * here, the other codecs with reduce/codec.h on each key part as libkvs
 * cuts it (BIGARRAY_BOUND parts, p3 slices, KVS_CHUNK_BYTES chunks: 1bit's
 * scale and topk's choice are per part).  With the spec's pull=1 (the
 * default) the servers compress the round's sum too: the reference applies
 * the codec once more to each part's sum with a server residual of its own
 * (what every worker decodes, so all get the same bits); each round then
 * also pulls every key (by direct copy where KVS_CMA allows) and compares
 * it bit for bit with the pushpull's value.  --optim: the servers run SGD and
 * the pulled weights are compared with w - lr * sum (relative 1e-5).
 * --async: pushes only, then one pull after a barrier: init + every
 * worker's every encoded push (exact for 2bit threshold=0.5, whose values
 * sum exactly in any order).  Then the bytes this worker sent (its
 * kvs_sent_bytes_total) against the float32 bytes its pushes stand for:
 * the ratio must be at least --ratio; --pull-ratio: the same for the bytes
 * it received (the pulled values; socket only).  --group: the workers are one local
 * group (one host, KVS_LOCAL_AGG on): the member that pushes a part for the
 * group compresses the group's sum with its residual, so the reference is
 * the codec applied to the sum of the gradients (2bit and fp16 only).
 * --group-min B: the group's KVS_LOCAL_AGG_MIN; keys under B bytes skip the
 * group, so each worker compresses its own gradient with its own residual
 * as without a group, and the reference does so for those keys.
 *
 * errors: bad specs, a set after the first push, float64 keys, exempt keys
 * (any dtype, exact sums; refused once pushed), a local store.  disagree: worker 0 pushes with SPEC, worker 1 without
 * compression after a barrier; worker 1's push must fail with KVS_EINVAL
 * naming both.  Exits 0 when every check passed, 1 otherwise.
 */
#include "kvs.h"
#include "reduce/codec.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NKEYS 4
#define W_MAX 4

/* tiny keys (fused), one split by MXNET_KVSTORE_BIGARRAY_BOUND=1000 into
 * parts that are not multiples of 16, one big key (sharded, sliced with p3) */
static const struct { uint64_t key; uint64_t n; } keys[NKEYS] = {
    {1, 5}, {2, 33}, {3, 2501}, {4, 100003}};

static int failures, rank, nw, nservers;
static char who[32] = "worker";

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("[%s] ", who);
    vprintf(fmt, ap);
    putchar('\n');
    fflush(stdout);
    va_end(ap);
}

#define CHECK(cond, ...)        \
    do {                        \
        if (!(cond)) {          \
            say(__VA_ARGS__);   \
            failures++;         \
        }                       \
    } while (0)

/* Worker w's gradient of round r, key index k, element i: in [-1, 1). */
static float grad(int w, int r, int k, uint64_t i)
{
    uint64_t x = ((uint64_t)w << 56) ^ ((uint64_t)r << 40) ^ ((uint64_t)k << 32) ^ i;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* MXNet's 2-bit semantics, one element: the value sent. */
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

/* A variable of the job's environment as a number (def when unset). */
static uint64_t env_u64(const char *name, uint64_t def)
{
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 10) : def;
}

/* The parts (offset, count) of a key of n elements as libkvs cuts it
 * (worker/route.c, written again here): p3 slices, or one part below
 * MXNET_KVSTORE_BIGARRAY_BOUND, else one per server at MXNet's split points;
 * then chunks of KVS_CHUNK_BYTES.  How many (at most max). */
static int parts_of(uint64_t n, uint64_t *off, uint64_t *cnt, int max)
{
    const char *van = getenv("DMLC_PS_VAN_TYPE");
    uint64_t slice = env_u64("MXNET_KVSTORE_SLICE_THRESHOLD", 40000);
    uint64_t bound = env_u64("MXNET_KVSTORE_BIGARRAY_BOUND", 1000000);
    uint64_t per = env_u64("KVS_CHUNK_BYTES", 4u << 20) / 4;
    uint64_t po[4096], pc[4096];
    int np = 0, m = 0;
    if (van && !strcmp(van, "p3")) {
        for (uint64_t a = 0; a < n && np < 4096; a += slice, np++) {
            po[np] = a;
            pc[np] = n - a < slice ? n - a : slice;
        }
    } else if (n < bound || nservers == 1) {
        po[0] = 0, pc[0] = n, np = 1;
    } else {
        for (int i = 0; i < nservers; i++) {
            uint64_t a = i == 0 ? 0 : (uint64_t)round((double)n / nservers * i);
            uint64_t b = i + 1 == nservers ? n : (uint64_t)round((double)n / nservers * (i + 1));
            if (b > a)
                po[np] = a, pc[np++] = b - a;
        }
    }
    for (int i = 0; i < np; i++)
        for (uint64_t c = 0; c < pc[i] && m < max; c += per, m++) {
            off[m] = po[i] + c;
            cnt[m] = pc[i] - c < per ? pc[i] - c : per;
        }
    return m;
}

/* x (n values) becomes what codec c sends of x + res, part by part, and res
 * keeps the rest (error feedback): 2bit by MXNet's semantics (ref2), the
 * others with reduce/codec.h. */
static void code_parts(const red_codec *c, float *x, float *res, uint64_t n, uint8_t *body)
{
    uint64_t off[4096], cnt[4096];
    char why[256];
    int np = parts_of(n, off, cnt, 4096);
    for (int j = 0; j < np; j++) {
        float *xp = x + off[j], *rp = res ? res + off[j] : NULL, p;
        if (c->id == RED_CODEC_2BIT) {
            for (uint64_t i = 0; i < cnt[j]; i++)
                xp[i] = ref2(&rp[i], xp[i], c->param);
        } else if (c->id != RED_CODEC_NONE) {
            red_codec_encode(c, xp, red_codec_has_residual(c) ? rp : NULL, cnt[j], body, NULL);
            red_codec_decode(c->id, body, red_codec_bytes(c, cnt[j]), xp, cnt[j], &p, why,
                             sizeof why);
        }
    }
}

static double traffic(kvs_store *s, const char *family)
{
    static char buf[1 << 16];
    char pat[64];
    double total = 0;
    if (kvs_metrics(s, buf, sizeof buf) < 0)
        return -1;
    snprintf(pat, sizeof pat, "\n%s{", family);
    for (char *p = strstr(buf, pat); p; p = strstr(p + 1, pat)) {
        char *sp = strchr(p + 1, '}');
        if (sp)
            total += strtod(sp + 1, NULL);
    }
    return total;
}

static double sent_bytes(kvs_store *s)
{
    return traffic(s, "kvs_sent_bytes_total");
}

static int run_sum(const char *spec, int rounds, int async, const char *optim, double ratio,
                   double pull_ratio, int group, uint64_t group_min)
{
    kvs_store *s;
    red_codec c;
    char why[256];
    int rc = kvs_create(async ? "dist_async" : "dist_sync", &s);
    if (rc) {
        say("kvs_create: %s", kvs_last_error());
        return 1;
    }
    rank = kvs_rank(s);
    nw = kvs_num_workers(s);
    nservers = kvs_num_servers(s);
    snprintf(who, sizeof who, "worker %d", rank);
    if (red_codec_parse(spec, &c, why, sizeof why) != 0 || nw > W_MAX) {
        say("bad test spec '%s' or %d workers", spec, nw);
        return 1;
    }
    CHECK(kvs_is_capable(s, KVS_CAP_COMPRESSION) == 1, "is_capable(COMPRESSION) is not 1");
    rc = kvs_set_gradient_compression(s, spec);
    CHECK(rc == 0, "set_gradient_compression('%s'): %s", spec, kvs_last_error());
    if (optim) {
        rc = kvs_set_optimizer(s, optim);
        CHECK(rc == 0, "set_optimizer: %s", kvs_last_error());
    }
    float lr = optim ? (float)atof(strstr(optim, "learning_rate=") + 14) : 0;
    float *g[NKEYS], *out[NKEYS], *want[NKEYS], *res[NKEYS][W_MAX], *tmp = NULL;
    float *sres[NKEYS], *pulled[NKEYS];
    /* the servers compress the round's sum (pull=1): only a plain sum */
    int zpull = c.id != RED_CODEC_NONE && c.pull && !async && !optim;
    uint64_t idx[NKEYS];
    kvs_array va[NKEYS], oa[NKEYS], pa[NKEYS];
    uint64_t most = 0, payload = 0;
    for (int k = 0; k < NKEYS; k++) {
        uint64_t n = keys[k].n;
        idx[k] = keys[k].key;
        g[k] = calloc(n, 4);
        out[k] = calloc(n, 4);
        want[k] = calloc(n, 4);
        sres[k] = calloc(n, 4);
        pulled[k] = calloc(n, 4);
        pa[k] = (kvs_array){pulled[k], n, KVS_FLOAT32, KVS_CPU};
        for (int w = 0; w < nw; w++)
            res[k][w] = calloc(n, 4);
        va[k] = (kvs_array){g[k], n, KVS_FLOAT32, KVS_CPU};
        oa[k] = (kvs_array){out[k], n, KVS_FLOAT32, KVS_CPU};
        if (n > most)
            most = n;
    }
    uint8_t *body = malloc(red_codec_bytes(&c, most) + 16);
    tmp = malloc(most * 4);
    rc = kvs_init(s, NKEYS, idx, va); /* zeros */
    CHECK(rc == 0, "init: %s", kvs_last_error());
    double b0 = sent_bytes(s), r0 = traffic(s, "kvs_received_bytes_total");
    for (int r = 0; r < rounds && rc == 0; r++) {
        for (int k = 0; k < NKEYS; k++) {
            uint64_t n = keys[k].n;
            float *sum = calloc(n, 4);
            int grouped = group && n * 4 >= group_min;
            for (int w = 0; w < nw && grouped; w++) { /* the group's sum, encoded once */
                for (uint64_t i = 0; i < n; i++) {
                    float x = grad(w, r, k, i);
                    if (w == rank)
                        g[k][i] = x;
                    sum[i] = w == 0 ? x : sum[i] + x;
                }
            }
            if (grouped)
                code_parts(&c, sum, res[k][0], n, body);
            for (int w = 0; w < nw && !grouped; w++) {
                float *gw = w == rank ? g[k] : tmp;
                for (uint64_t i = 0; i < n; i++)
                    gw[i] = grad(w, r, k, i);
                if (gw != tmp)
                    memcpy(tmp, gw, n * 4);
                code_parts(&c, tmp, res[k][w], n, body);
                for (uint64_t i = 0; i < n; i++)
                    sum[i] = w == 0 ? tmp[i] : sum[i] + tmp[i];
            }
            if (zpull) /* the servers' encoding of the sum, with their residuals */
                code_parts(&c, sum, sres[k], n, body);
            for (uint64_t i = 0; i < n; i++)
                want[k][i] = optim ? want[k][i] - lr * sum[i]
                             : async ? want[k][i] + sum[i] : sum[i];
            free(sum);
            payload += n * 4;
        }
        if (async) {
            rc = kvs_push(s, NKEYS, idx, va, 0);
            if (rc == 0)
                rc = kvs_wait_all(s);
            CHECK(rc == 0, "round %d push: %s", r, kvs_last_error());
            continue;
        }
        rc = kvs_pushpull(s, NKEYS, idx, va, oa, 0);
        if (rc == 0)
            rc = kvs_wait_all(s);
        CHECK(rc == 0, "round %d pushpull: %s", r, kvs_last_error());
        for (int k = 0; k < NKEYS && rc == 0; k++) {
            uint64_t bad = 0, first = 0;
            for (uint64_t i = 0; i < keys[k].n; i++) {
                float a = out[k][i], b = want[k][i];
                int ok = optim ? fabsf(a - b) <= 1e-5f * (1 + fabsf(b))
                               : memcmp(&a, &b, 4) == 0;
                if (!ok && bad++ == 0)
                    first = i;
            }
            CHECK(bad == 0, "round %d key %llu: %llu of %llu elements differ, first [%llu] "
                  "%.9g, expected %.9g", r, (unsigned long long)idx[k],
                  (unsigned long long)bad, (unsigned long long)keys[k].n,
                  (unsigned long long)first, (double)out[k][first],
                  (double)want[k][first]);
        }
        if (!zpull || rc != 0)
            continue;
        /* a pull of the same round (big parts by direct copy where the
         * server is on this host) gets the same values as the replies */
        rc = kvs_pull(s, NKEYS, idx, pa, 0);
        if (rc == 0)
            rc = kvs_wait_all(s);
        CHECK(rc == 0, "round %d pull: %s", r, kvs_last_error());
        for (int k = 0; k < NKEYS && rc == 0; k++)
            CHECK(memcmp(pulled[k], out[k], keys[k].n * 4) == 0, "round %d key %llu: the "
                  "pull differs from the pushpull", r, (unsigned long long)idx[k]);
    }
    double b1 = sent_bytes(s), r1 = traffic(s, "kvs_received_bytes_total");
    if (async && rc == 0) {
        rc = kvs_barrier(s);
        if (rc == 0)
            rc = kvs_pull(s, NKEYS, idx, oa, 0);
        if (rc == 0)
            rc = kvs_wait_all(s);
        CHECK(rc == 0, "final pull: %s", kvs_last_error());
        for (int k = 0; k < NKEYS && rc == 0; k++) {
            uint64_t bad = 0;
            for (uint64_t i = 0; i < keys[k].n; i++)
                bad += memcmp(&out[k][i], &want[k][i], 4) != 0;
            CHECK(bad == 0, "async key %llu: %llu elements differ from the sum of every push",
                  (unsigned long long)idx[k], (unsigned long long)bad);
        }
    }
    double got = (b1 - b0) > 0 ? (double)payload / (b1 - b0) : 0;
    say("%s: %d rounds sent %.0f bytes for %llu bytes of float32 gradients: %.2fx", spec,
        rounds, b1 - b0, (unsigned long long)payload, got);
    CHECK(b0 >= 0 && got >= ratio, "compression ratio %.2f < %.2f", got, ratio);
    if (pull_ratio > 0) { /* each round's pushpull (and pull) replies */
        double in = (double)payload * (zpull ? 2 : 1);
        double rgot = (r1 - r0) > 0 ? in / (r1 - r0) : 0;
        say("%s: received %.0f bytes for %.0f bytes of float32 values: %.2fx", spec, r1 - r0,
            in, rgot);
        CHECK(r0 >= 0 && rgot >= pull_ratio, "reply compression ratio %.2f < %.2f", rgot,
              pull_ratio);
    }
    rc = kvs_close(s);
    CHECK(rc == 0, "close: %s", kvs_last_error());
    return failures ? 1 : 0;
}

static void expect_err(int rc, int want, const char *needle, const char *what)
{
    CHECK(rc == want, "%s: %s, expected %s", what, kvs_errname(rc), kvs_errname(want));
    CHECK(rc == 0 || needle == NULL || strstr(kvs_last_error(), needle),
          "%s: message '%s' does not name '%s'", what, kvs_last_error(), needle);
}

static int run_errors(void)
{
    kvs_store *s, *loc;
    int rc = kvs_create("dist_sync", &s);
    if (rc) {
        say("kvs_create: %s", kvs_last_error());
        return 1;
    }
    rank = kvs_rank(s);
    snprintf(who, sizeof who, "worker %d", rank);
    expect_err(kvs_set_gradient_compression(s, "3bit"), KVS_EINVAL, "'3bit'", "3bit");
    expect_err(kvs_set_gradient_compression(s, "2bit threshold=-0.5"), KVS_EINVAL,
               "threshold='-0.5'", "negative threshold");
    expect_err(kvs_set_gradient_compression(s, "topk ratio=1.5"), KVS_EINVAL, "ratio='1.5'",
               "ratio > 1");
    expect_err(kvs_set_gradient_compression(s, "1bit scale=2"), KVS_EINVAL, "'scale=2'",
               "1bit with a setting");
    expect_err(kvs_set_gradient_compression(s, "2bit pull=2"), KVS_EINVAL, "'pull=2'",
               "pull=2");
    expect_err(kvs_set_gradient_compression(NULL, "2bit"), KVS_EINVAL, "NULL", "NULL store");
    expect_err(kvs_set_gradient_compression(s, "2bit threshold=0.5"), 0, NULL, "2bit");
    /* a float64 key: refused before anything is sent */
    double d[7] = {0};
    float f[9] = {0};
    uint64_t kd = 50, kf = 51;
    kvs_array ad = {d, 7, KVS_FLOAT64, KVS_CPU}, af = {f, 9, KVS_FLOAT32, KVS_CPU};
    expect_err(kvs_init(s, 1, &kd, &ad), 0, NULL, "init float64");
    expect_err(kvs_init(s, 1, &kf, &af), 0, NULL, "init float32");
    expect_err(kvs_push(s, 1, &kd, &ad, 0), KVS_EINVAL, "float64", "push float64");
    /* a set after the first push */
    for (int i = 0; i < 9; i++)
        f[i] = 1.0f;
    rc = kvs_pushpull(s, 1, &kf, &af, &af, 0);
    if (rc == 0)
        rc = kvs_wait_all(s);
    expect_err(rc, 0, NULL, "pushpull float32");
    /* both workers sent +0.5 for 1.0 (residual 0.5): the sum is 1.0, which
     * the servers send compressed (pull=1) as +0.5, keeping 0.5 */
    for (int i = 0; i < 9; i++)
        CHECK(f[i] == 0.5f, "f[%d] = %g", i, (double)f[i]);
    /* exempt keys: any dtype, summed exactly, as without compression */
    double xd[5];
    float xf[6];
    uint64_t kx[2] = {52, 53};
    kvs_array axd = {xd, 5, KVS_FLOAT64, KVS_CPU}, axf = {xf, 6, KVS_FLOAT32, KVS_CPU};
    expect_err(kvs_compression_exempt(NULL, 2, kx), KVS_EINVAL, "NULL", "exempt, NULL store");
    expect_err(kvs_compression_exempt(s, 2, NULL), KVS_EINVAL, "keys is NULL",
               "exempt, NULL keys");
    expect_err(kvs_compression_exempt(s, 1, &kf), KVS_EINVAL, "key 51 was pushed already",
               "exempt after a push");
    expect_err(kvs_compression_exempt(s, 2, kx), 0, NULL, "exempt 52, 53");
    for (int i = 0; i < 5; i++)
        xd[i] = 0;
    for (int i = 0; i < 6; i++)
        xf[i] = 0;
    expect_err(kvs_init(s, 1, &kx[0], &axd), 0, NULL, "init exempt float64");
    expect_err(kvs_init(s, 1, &kx[1], &axf), 0, NULL, "init exempt float32");
    for (int i = 0; i < 5; i++)
        xd[i] = 1.25 + i;
    for (int i = 0; i < 6; i++)
        xf[i] = 0.125f * (float)(i + 1);
    rc = kvs_pushpull(s, 1, &kx[0], &axd, &axd, 0);
    if (rc == 0)
        rc = kvs_pushpull(s, 1, &kx[1], &axf, &axf, 0);
    if (rc == 0)
        rc = kvs_wait_all(s);
    expect_err(rc, 0, NULL, "pushpull exempt keys");
    for (int i = 0; i < 5; i++) /* (2 workers) */
        CHECK(xd[i] == 2 * (1.25 + i), "exempt float64 [%d] = %g", i, xd[i]);
    for (int i = 0; i < 6; i++)
        CHECK(xf[i] == 0.25f * (float)(i + 1), "exempt float32 [%d] = %g", i, (double)xf[i]);
    expect_err(kvs_set_gradient_compression(s, "1bit"), KVS_EINVAL, "before the first push",
               "set after a push");
    expect_err(kvs_set_gradient_compression(s, "none"), KVS_EINVAL, "before the first push",
               "none after a push");
    /* a local store has nothing to compress */
    rc = kvs_create("local", &loc);
    if (rc == 0) {
        CHECK(kvs_is_capable(loc, KVS_CAP_COMPRESSION) == 0, "local store is capable");
        expect_err(kvs_set_gradient_compression(loc, "2bit"), KVS_EINVAL, "dist_sync",
                   "local store");
        kvs_close(loc);
    }
    rc = kvs_barrier(s);
    CHECK(rc == 0, "barrier: %s", kvs_last_error());
    rc = kvs_close(s);
    CHECK(rc == 0, "close: %s", kvs_last_error());
    return failures ? 1 : 0;
}

static int run_disagree(const char *spec)
{
    kvs_store *s;
    int rc = kvs_create("dist_sync", &s);
    if (rc) {
        say("kvs_create: %s", kvs_last_error());
        return 1;
    }
    rank = kvs_rank(s);
    snprintf(who, sizeof who, "worker %d", rank);
    float f[40];
    uint64_t k = 7;
    kvs_array a = {f, 40, KVS_FLOAT32, KVS_CPU};
    for (int i = 0; i < 40; i++)
        f[i] = 1.0f;
    if (rank == 0)
        CHECK(kvs_set_gradient_compression(s, spec) == 0, "set: %s", kvs_last_error());
    CHECK(kvs_init(s, 1, &k, &a) == 0, "init: %s", kvs_last_error());
    if (rank == 0)
        CHECK(kvs_push(s, 1, &k, &a, 0) == 0, "push: %s", kvs_last_error());
    CHECK(kvs_barrier(s) == 0, "barrier: %s", kvs_last_error());
    if (rank == 1) {
        rc = kvs_pushpull(s, 1, &k, &a, &a, 0);
        if (rc == 0)
            rc = kvs_wait_all(s);
        expect_err(rc, KVS_EINVAL, "worker 0 pushed with", "disagreeing push");
        CHECK(strstr(kvs_last_error(), "'none'") != NULL, "'%s' does not name 'none'",
              kvs_last_error());
        for (int i = 0; i < 40; i++)
            CHECK(f[i] == 1.0f, "the refused pushpull wrote f[%d] = %g", i, (double)f[i]);
        say("refused: %s", kvs_last_error());
        return failures ? 1 : 0;
    }
    /* worker 0's round can never complete: it waits to be ended */
    for (;;)
        kvs_barrier(s);
}

int main(int argc, char **argv)
{
    const char *spec = "2bit threshold=0.5", *optim = NULL;
    int rounds = 8, async = 0, group = 0;
    uint64_t group_min = 0;
    double ratio = 0, pull_ratio = 0;
    if (argc < 2) {
        fprintf(stderr, "usage: kvs-compworker sum|errors|disagree [options]\n");
        return 2;
    }
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--spec") && i + 1 < argc)
            spec = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--optim") && i + 1 < argc)
            optim = argv[++i];
        else if (!strcmp(argv[i], "--ratio") && i + 1 < argc)
            ratio = atof(argv[++i]);
        else if (!strcmp(argv[i], "--pull-ratio") && i + 1 < argc)
            pull_ratio = atof(argv[++i]);
        else if (!strcmp(argv[i], "--async"))
            async = 1;
        else if (!strcmp(argv[i], "--group"))
            group = 1;
        else if (!strcmp(argv[i], "--group-min") && i + 1 < argc)
            group_min = strtoull(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "kvs-compworker: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!strcmp(argv[1], "sum"))
        return run_sum(spec, rounds, async, optim, ratio, pull_ratio, group, group_min);
    if (!strcmp(argv[1], "errors"))
        return run_errors();
    if (!strcmp(argv[1], "disagree"))
        return run_disagree(spec);
    fprintf(stderr, "kvs-compworker: unknown mode '%s'\n", argv[1]);
    return 2;
}
