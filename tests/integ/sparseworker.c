/*
 * sparseworker.c - kvs-sparseworker: the worker program of the row-sparse
 * integration tests (test_sparse.c).
 *
 *   kvs-sparseworker sum [--rounds N] [--pushpull] [--optim SPEC] [--async]
 *   kvs-sparseworker errors
 *
 * sum: initialises the row-sparse keys below (an unsplit one and keys split
 * over the servers by rows with MXNET_KVSTORE_BIGARRAY_BOUND=1000, and one
 * whose parts KVS_RSP_CHUNK_BYTES cuts into chunks of whole rows), then
 * each round every worker pushes the rows that rows_of(worker, round, key)
 * picks (ids in a scrambled order; some rows no worker ever touches, some
 * rounds a worker sends no row at all to a part), and checks the whole
 * table element by element against a dense reference computed here from
 * every worker's pushes: plain sums (exact: the values are multiples of
 * 1/4), or with --optim the lazy update of kvs.h's formulas (sgd with
 * momentum, adam; relative error <= 1e-5; rows without a gradient exactly
 * unchanged).  --pushpull: kvs_pushpull_rsp, whose answer is checked too.
 * --async (store dist_async): pushes are added on arrival; after a barrier
 * the table must be the initial one plus every push.
 *
 * errors: every user error of the row-sparse calls, each before anything
 * is sent (a correct round afterwards still completes and sums right).
 * Exits 0 when every check passed, 1 otherwise.
 */
#include "kvs.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NK 4
#define MAXROWS 3000
static const struct { uint64_t key, rows, row_len; kvs_dtype dt; } K[NK] = {
    {5, 37, 3, KVS_FLOAT32},     /* one part, home server */
    {12, 500, 4, KVS_FLOAT32},   /* 2000 elements: split by rows */
    {20, 333, 5, KVS_FLOAT64},   /* 1665 elements: split by rows */
    {33, 3000, 8, KVS_FLOAT32}}; /* 96 KB: chunks of 128 rows with KVS_RSP_CHUNK_BYTES=4096 */

static int failures, rank, nw;
static char who[32] = "worker";

static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", who);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            failures++;                                                                    \
            say(__VA_ARGS__);                                                              \
        }                                                                                  \
    } while (0)

static uint64_t mix(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x9E3779B97F4A7C15ull;
    x ^= x >> 29;
    return x;
}

/* Does worker w push row i of key k in round r?  Rows i % 7 == 6 never;
 * worker w skips every row of round r when (w + r) % 5 == 4. */
static int touches(int w, int r, int k, uint64_t i)
{
    if (i % 7 == 6 || (w + r) % 5 == 4)
        return 0;
    return mix((uint64_t)w * 1000003u + (uint64_t)r * 7919u + (uint64_t)k * 104729u + i) % 3 == 0;
}

static double init_val(uint64_t i, uint64_t j)
{
    return (double)((i * 3 + j) % 11) * 0.5 - 2.0;
}

static double grad(int w, int r, uint64_t i, uint64_t j)
{
    return (double)((int)(((uint64_t)(w + 1) * (i + 1) + j + (uint64_t)r) % 17) - 8) / 4.0;
}

/* The ids worker w pushes for key k in round r, in a scrambled order. */
static uint64_t ids_of(int w, int r, int k, int64_t *ids)
{
    uint64_t n = 0;
    for (uint64_t i = 0; i < K[k].rows; i++)
        if (touches(w, r, k, i))
            ids[n++] = (int64_t)i;
    for (uint64_t a = 0; n > 1 && a < n; a++) { /* a fixed shuffle */
        uint64_t b = mix(a + (uint64_t)r) % n;
        int64_t t = ids[a];
        ids[a] = ids[b];
        ids[b] = t;
    }
    return n;
}

static void put(kvs_dtype dt, void *p, uint64_t i, double v)
{
    if (dt == KVS_FLOAT32)
        ((float *)p)[i] = (float)v;
    else
        ((double *)p)[i] = v;
}

static double get(kvs_dtype dt, const void *p, uint64_t i)
{
    return dt == KVS_FLOAT32 ? ((const float *)p)[i] : ((const double *)p)[i];
}

/* The optimizer of --optim, for the reference. */
static struct {
    int kind; /* 0 none, 1 sgd, 2 adam */
    double lr, mom, wd, b1, b2, eps;
} opt;

static int parse_optim(const char *spec)
{
    opt.lr = 0.01;
    opt.b1 = 0.9;
    opt.b2 = 0.999;
    opt.eps = 1e-8;
    if (strncmp(spec, "sgd", 3) == 0)
        opt.kind = 1;
    else if (strncmp(spec, "adam", 4) == 0)
        opt.kind = 2, opt.lr = 0.001;
    else
        return -1;
    const char *p;
    if ((p = strstr(spec, "learning_rate=")))
        opt.lr = atof(p + 14);
    if ((p = strstr(spec, "momentum=")))
        opt.mom = atof(p + 9);
    if ((p = strstr(spec, " wd=")))
        opt.wd = atof(p + 4);
    return 0;
}

typedef struct ref {
    double *w, *m, *v;
} ref;

static int run_sum(int rounds, int pushpull, const char *spec, int async)
{
    kvs_store *s;
    int rc = kvs_create(async ? "dist_async" : "dist_sync", &s);
    if (rc) {
        say("kvs_create: %s: %s", kvs_errname(rc), kvs_last_error());
        return 1;
    }
    rank = kvs_rank(s);
    nw = kvs_num_workers(s);
    snprintf(who, sizeof who, "worker %d", rank);
    CHECK(kvs_is_capable(s, KVS_CAP_ROW_SPARSE) == 1, "is_capable(ROW_SPARSE) != 1");
    uint64_t keys[NK], rl[NK];
    kvs_array init[NK];
    ref R[NK];
    void *vals[NK], *outs[NK], *table[NK];
    int64_t *ids[NK];
    for (int k = 0; k < NK; k++) {
        uint64_t n = K[k].rows * K[k].row_len;
        size_t esz = kvs_dtype_size(K[k].dt);
        keys[k] = K[k].key;
        rl[k] = K[k].row_len;
        init[k] = (kvs_array){malloc(n * esz), n, K[k].dt, KVS_CPU};
        R[k].w = calloc(n, sizeof(double));
        R[k].m = calloc(n, sizeof(double));
        R[k].v = calloc(n, sizeof(double));
        vals[k] = malloc(n * esz);
        outs[k] = malloc(n * esz);
        table[k] = malloc(n * esz);
        ids[k] = malloc(K[k].rows * sizeof(int64_t));
        for (uint64_t i = 0; i < K[k].rows; i++)
            for (uint64_t j = 0; j < K[k].row_len; j++) {
                put(K[k].dt, init[k].data, i * K[k].row_len + j, init_val(i, j));
                R[k].w[i * K[k].row_len + j] = (double)(K[k].dt == KVS_FLOAT32
                                                            ? (float)init_val(i, j)
                                                            : init_val(i, j));
            }
    }
    if ((rc = kvs_init_row_sparse(s, NK, keys, init, rl)) != 0) {
        say("init_row_sparse: %s: %s", kvs_errname(rc), kvs_last_error());
        return 1;
    }
    if (spec && (rc = kvs_set_optimizer(s, spec)) != 0) {
        say("set_optimizer: %s: %s", kvs_errname(rc), kvs_last_error());
        return 1;
    }
    int64_t *all = malloc(MAXROWS * sizeof *all);
    for (int r = 0; r < rounds; r++) {
        kvs_rsp push[NK];
        kvs_array pout[NK];
        for (int k = 0; k < NK; k++) {
            uint64_t n = ids_of(rank, r, k, ids[k]), L = K[k].row_len;
            for (uint64_t a = 0; a < n; a++)
                for (uint64_t j = 0; j < L; j++)
                    put(K[k].dt, vals[k], a * L + j, grad(rank, r, (uint64_t)ids[k][a], j));
            push[k] = (kvs_rsp){ids[k], n, {vals[k], n * L, K[k].dt, KVS_CPU}};
            pout[k] = (kvs_array){outs[k], n * L, K[k].dt, KVS_CPU};
        }
        rc = pushpull && !async ? kvs_pushpull_rsp(s, NK, keys, push, pout, 0)
                                : kvs_push_rsp(s, NK, keys, push, 0);
        if (rc == 0)
            rc = kvs_wait_all(s);
        if (rc) {
            say("round %d: push: %s: %s", r, kvs_errname(rc), kvs_last_error());
            return 1;
        }
        /* the reference: every worker's pushes of the round */
        for (int k = 0; k < NK; k++) {
            uint64_t L = K[k].row_len;
            int t = r + 1;
            for (uint64_t i = 0; i < K[k].rows; i++) {
                int any = 0;
                for (int w = 0; w < nw; w++)
                    any |= touches(w, r, k, i);
                if (!any)
                    continue; /* lazy: untouched rows keep weight and state */
                for (uint64_t j = 0; j < L; j++) {
                    double g = 0, *w = &R[k].w[i * L + j], *m = &R[k].m[i * L + j],
                           *v = &R[k].v[i * L + j];
                    for (int q = 0; q < nw; q++)
                        if (touches(q, r, k, i))
                            g += grad(q, r, i, j);
                    if (async)
                        *w += g;
                    else if (opt.kind == 0)
                        *w = g;
                    else if (opt.kind == 1) {
                        *m = opt.mom * *m - opt.lr * opt.wd * *w - opt.lr * g;
                        *w += *m;
                    } else {
                        double gp = g + opt.wd * *w;
                        *m = opt.b1 * *m + (1 - opt.b1) * gp;
                        *v = opt.b2 * *v + (1 - opt.b2) * gp * gp;
                        double lrt = opt.lr * sqrt(1 - pow(opt.b2, t)) / (1 - pow(opt.b1, t));
                        *w -= lrt * *m / (sqrt(*v) + opt.eps);
                    }
                }
            }
        }
        if (async) {
            if ((rc = kvs_barrier(s)) != 0) {
                say("barrier: %s", kvs_errname(rc));
                return 1;
            }
            if (r + 1 < rounds)
                continue;
        }
        double tol = opt.kind ? 1e-5 : 0;
        for (int k = 0; k < NK; k++) {
            uint64_t L = K[k].row_len, n = K[k].rows;
            /* the whole table, ids in reverse order */
            for (uint64_t i = 0; i < n; i++)
                all[i] = (int64_t)(n - 1 - i);
            kvs_array o = {table[k], n * L, K[k].dt, KVS_CPU};
            if ((rc = kvs_row_sparse_pull(s, keys[k], all, n, &o)) != 0 ||
                (rc = kvs_wait(s, keys[k])) != 0) {
                say("round %d: pull key %llu: %s: %s", r, (unsigned long long)keys[k],
                    kvs_errname(rc), kvs_last_error());
                return 1;
            }
            int bad = 0;
            for (uint64_t a = 0; a < n && bad < 5; a++) {
                uint64_t i = (uint64_t)all[a];
                for (uint64_t j = 0; j < L && bad < 5; j++) {
                    double got = get(K[k].dt, table[k], a * L + j), want = R[k].w[i * L + j];
                    if (fabs(got - want) > tol * (fabs(want) + 1e-1)) {
                        bad++;
                        say("round %d key %llu row %llu elem %llu: got %.9g want %.9g", r,
                            (unsigned long long)keys[k], (unsigned long long)i,
                            (unsigned long long)j, got, want);
                    }
                    if (i % 7 == 6 && !async && got != get(K[k].dt, init[k].data, i * L + j)) {
                        bad++;
                        say("round %d key %llu: untouched row %llu changed", r,
                            (unsigned long long)keys[k], (unsigned long long)i);
                    }
                }
            }
            failures += bad;
            if (pushpull && !async) /* the answer holds the pushed rows, as the round left them */
                for (uint64_t a = 0; a < push[k].nrows; a++)
                    for (uint64_t j = 0; j < L; j++) {
                        uint64_t i = (uint64_t)ids[k][a];
                        double got = get(K[k].dt, outs[k], a * L + j), want = R[k].w[i * L + j];
                        CHECK(fabs(got - want) <= tol * (fabs(want) + 1e-1),
                              "round %d key %llu: pushpull row %llu: got %.9g want %.9g", r,
                              (unsigned long long)keys[k], (unsigned long long)i, got, want);
                    }
        }
    }
    rc = kvs_close(s);
    CHECK(rc == 0, "close: %s", kvs_errname(rc));
    if (failures == 0)
        say("%d rounds checked", rounds);
    return failures ? 1 : 0;
}

#define EXPECT(call, code, what)                                                           \
    do {                                                                                   \
        int rc_ = (call);                                                                  \
        CHECK(rc_ == (code), "%s: got %s (%s), expected %s", what, kvs_errname(rc_),       \
              kvs_last_error(), kvs_errname(code));                                        \
        if (rc_ == (code))                                                                 \
            say("%s: %s: %s", what, kvs_errname(rc_), kvs_last_error());                   \
    } while (0)

static int run_errors(void)
{
    kvs_store *s, *l;
    int rc = kvs_create("dist_sync", &s);
    if (rc) {
        say("kvs_create: %s: %s", kvs_errname(rc), kvs_last_error());
        return 1;
    }
    rank = kvs_rank(s);
    snprintf(who, sizeof who, "worker %d", rank);
    float table[40 * 2], rows[8], out[8], dense[6] = {0};
    for (int i = 0; i < 80; i++)
        table[i] = (float)i;
    uint64_t key = 7, dkey = 9, rl = 2, bad_rl = 3;
    kvs_array tv = {table, 80, KVS_FLOAT32, KVS_CPU}, dv = {dense, 6, KVS_FLOAT32, KVS_CPU};
    EXPECT(kvs_init_row_sparse(s, 1, &key, &tv, &bad_rl), KVS_EINVAL, "row_len not dividing");
    EXPECT(kvs_init_row_sparse(s, 1, &key, &tv, &rl), 0, "init_row_sparse");
    EXPECT(kvs_init(s, 1, &dkey, &dv), 0, "dense init");
    EXPECT(kvs_init_row_sparse(s, 1, &dkey, &dv, &rl), KVS_EINVAL, "row-sparse init of a dense key");
    EXPECT(kvs_init(s, 1, &key, &tv), KVS_EINVAL, "dense init of a row-sparse key");
    for (int i = 0; i < 8; i++)
        rows[i] = 1;
    int64_t dup[4] = {3, 9, 3, 1}, oor[4] = {0, 1, 40, 2}, neg[4] = {0, -1, 2, 3},
            ok[4] = {39, 0, 17, 4};
    kvs_rsp p = {dup, 4, {rows, 8, KVS_FLOAT32, KVS_CPU}};
    EXPECT(kvs_push_rsp(s, 1, &key, &p, 0), KVS_EINVAL, "duplicate row id");
    p.row_ids = oor;
    EXPECT(kvs_push_rsp(s, 1, &key, &p, 0), KVS_EINVAL, "row id past the rows");
    p.row_ids = neg;
    EXPECT(kvs_push_rsp(s, 1, &key, &p, 0), KVS_EINVAL, "negative row id");
    p.row_ids = NULL;
    EXPECT(kvs_push_rsp(s, 1, &key, &p, 0), KVS_EINVAL, "NULL row ids");
    p.row_ids = ok;
    p.rows.count = 6;
    EXPECT(kvs_push_rsp(s, 1, &key, &p, 0), KVS_ESHAPE, "rows.count != nrows * row_len");
    p.rows.count = 8;
    p.rows.dtype = KVS_FLOAT64;
    EXPECT(kvs_push_rsp(s, 1, &key, &p, 0), KVS_ESHAPE, "other dtype");
    p.rows.dtype = KVS_FLOAT32;
    p.rows.device = 0;
    EXPECT(kvs_push_rsp(s, 1, &key, &p, 0), KVS_EINVAL, "device rows");
    p.rows.device = KVS_CPU;
    kvs_rsp two[2] = {p, p};
    uint64_t kk[2] = {key, key};
    EXPECT(kvs_push_rsp(s, 2, kk, two, 0), KVS_EINVAL, "key twice in one call");
    uint64_t nokey = 1234;
    EXPECT(kvs_push_rsp(s, 1, &nokey, &p, 0), KVS_ENOKEY, "key never initialised");
    EXPECT(kvs_push_rsp(s, 1, &dkey, &p, 0), KVS_EINVAL, "row-sparse push to a dense key");
    EXPECT(kvs_push(s, 1, &key, &tv, 0), KVS_EINVAL, "dense push to a row-sparse key");
    EXPECT(kvs_pull(s, 1, &key, &tv, 0), KVS_EINVAL, "dense pull of a row-sparse key");
    kvs_array o = {out, 8, KVS_FLOAT32, KVS_CPU};
    EXPECT(kvs_row_sparse_pull(s, key, dup, 4, &o), KVS_EINVAL, "pull: duplicate row id");
    EXPECT(kvs_row_sparse_pull(s, key, oor, 4, &o), KVS_EINVAL, "pull: row id past the rows");
    o.count = 7;
    EXPECT(kvs_row_sparse_pull(s, key, ok, 4, &o), KVS_ESHAPE, "pull: output size");
    o.count = 8;
    EXPECT(kvs_pushpull_rsp(s, 1, &key, &p, NULL, 0), KVS_EINVAL, "pushpull: outputs NULL");
    EXPECT(kvs_push_rsp(NULL, 1, &key, &p, 0), KVS_EINVAL, "NULL store");
    /* nothing was sent: this round is the first and sums right */
    EXPECT(kvs_pushpull_rsp(s, 1, &key, &p, &o, 0), 0, "pushpull");
    EXPECT(kvs_wait_all(s), 0, "wait");
    int nw2 = kvs_num_workers(s);
    for (int a = 0; a < 4; a++)
        for (int j = 0; j < 2; j++)
            CHECK(out[a * 2 + j] == (float)nw2, "row %lld: got %g want %d", (long long)ok[a],
                  out[a * 2 + j], nw2);
    float t2[80];
    int64_t all[40];
    for (int i = 0; i < 40; i++)
        all[i] = i;
    kvs_array ao = {t2, 80, KVS_FLOAT32, KVS_CPU};
    EXPECT(kvs_row_sparse_pull(s, key, all, 40, &ao), 0, "pull all");
    EXPECT(kvs_wait(s, key), 0, "wait");
    for (int i = 0; i < 40; i++) {
        int pushed = i == 39 || i == 0 || i == 17 || i == 4;
        for (int j = 0; j < 2; j++)
            CHECK(t2[i * 2 + j] == (pushed ? (float)nw2 : table[i * 2 + j]),
                  "row %d elem %d: got %g", i, j, t2[i * 2 + j]);
    }
    /* the local store does not take row-sparse keys */
    if (kvs_create("local", &l) == 0) {
        CHECK(kvs_is_capable(l, KVS_CAP_ROW_SPARSE) == 0, "local store is row-sparse capable");
        EXPECT(kvs_init_row_sparse(l, 1, &key, &tv, &rl), KVS_ENOTSUP, "local store");
        kvs_close(l);
    }
    rc = kvs_close(s);
    CHECK(rc == 0, "close: %s", kvs_errname(rc));
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    int rounds = 4, pushpull = 0, async = 0;
    const char *spec = NULL;
    if (argc < 2) {
        fprintf(stderr, "usage: kvs-sparseworker sum|errors [options]\n");
        return 2;
    }
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--pushpull") == 0)
            pushpull = 1;
        else if (strcmp(argv[i], "--async") == 0)
            async = 1;
        else if (strcmp(argv[i], "--optim") == 0 && i + 1 < argc)
            spec = argv[++i];
        else {
            fprintf(stderr, "kvs-sparseworker: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (spec && parse_optim(spec) != 0) {
        fprintf(stderr, "kvs-sparseworker: --optim sgd|adam ...\n");
        return 2;
    }
    if (strcmp(argv[1], "sum") == 0)
        return run_sum(rounds, pushpull, spec, async);
    if (strcmp(argv[1], "errors") == 0)
        return run_errors();
    fprintf(stderr, "kvs-sparseworker: unknown mode %s\n", argv[1]);
    return 2;
}
