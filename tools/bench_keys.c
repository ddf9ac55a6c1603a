/* bench_keys.c - `kvs-bench --keys N` and `kvs-bench --model NAME`: rounds of
 * many keys, as a training step issues them.
 *
 *   --keys N --sizes LO-HI   N float32 keys, sizes spaced geometrically from
 *                            LO to HI bytes (one size: all equal)
 *   --model resnet50|bert-base  the parameter tensors of the model, issued in
 *                            backward order (last layer first), tensor i with
 *                            priority -i (MXNet's convention)
 *
 * Order of a round: `call` (one push/pull/pushpull with every key, then
 * kvs_wait_all) or `backward` (one call per key, last key first, optional
 * simulated compute before each; the first layer's wait is timed apart).
 * Each row is compared with one key of the same total bytes (same op, same
 * run) unless --no-ref; rows are printed as they finish.  Every value is
 * checked element by element against the exact sum of all workers. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "kvs.h"
#include "tools/bench.h"

static const char usage[] =
    "usage: kvs-bench --keys N [--sizes SIZE|LO-HI] [options]\n"
    "       kvs-bench --model resnet50|bert-base [options]\n"
    "Rounds of many float32 keys (run as the workers of a job, like kvs-bench).\n"
    "  --keys N         number of keys (with --sizes; default sizes 4K-1M)\n"
    "  --sizes S|LO-HI  bytes per key, or a geometric spread from LO to HI\n"
    "  --model NAME     parameter tensors of resnet50 (161 tensors, 25.6M params)\n"
    "                   or bert-base (199 tensors, 109.5M params)\n"
    "  --order O        call: one call with every key (default with --keys);\n"
    "                   backward: one call per key, last first, priority -index\n"
    "                   (default with --model)\n"
    "  --compute-ms X   backward: X ms of simulated compute before each key's call\n"
    "  --ops LIST       push,pull,pushpull (default pushpull)\n"
    "  --iters N        timed rounds (default: by total size, 5 to 100)\n"
    "  --warmup N       untimed rounds first (default 2)\n"
    "  --type T         dist_sync (default), dist_async\n"
    "  --no-ref         skip the one-key reference row\n"
    "  --interleave     alternate each round with one of the reference key (one\n"
    "                   key of the same bytes), so both medians come from the\n"
    "                   same minutes of a busy machine\n"
    "  --json           one JSON object per row\n"
    "Columns: median and p99 of a round (issue every key, wait for all), first_ms\n"
    "(backward: until the first layer's value is back), GB/s as kvs-bench, and\n"
    "x1key = median / median of one key of the same total bytes.\n";

enum { OP_PUSH, OP_PULL, OP_PUSHPULL };
static const char *const op_names[] = {"push", "pull", "pushpull"};

struct kopts {
    size_t nkeys;
    uint64_t lo, hi;
    const char *model;
    int backward;
    double compute_ms;
    int ops[3], nops;
    int iters, warmup;
    const char *type;
    int ref, json;
    int interleave; /* --interleave: alternate rounds with the reference key */
};

struct round {
    size_t n;
    uint64_t *keys;
    kvs_array *vals, *outs;
    uint64_t *counts;
    float *val, *out; /* one allocation each, keys back to back */
    uint64_t total;   /* elements */
};

/* ---- model profiles ---- */

static size_t add(uint64_t *c, size_t n, size_t max, uint64_t v)
{
    if (c && n < max)
        c[n] = v;
    return n + 1;
}

/* ResNet-50 v1 (torchvision order): conv weights, batch-norm gamma and beta,
 * fc weight and bias; 161 tensors, 25,557,032 elements. */
static size_t resnet50(uint64_t *c, size_t max)
{
    static const int blocks[4] = {3, 4, 6, 3}, width[4] = {64, 128, 256, 512};
    size_t n = 0;
    uint64_t in = 64;
    n = add(c, n, max, 3 * 64 * 7 * 7);
    n = add(c, n, max, 64);
    n = add(c, n, max, 64);
    for (int st = 0; st < 4; st++) {
        uint64_t w = (uint64_t)width[st];
        for (int b = 0; b < blocks[st]; b++) {
            n = add(c, n, max, in * w);
            n = add(c, n, max, w);
            n = add(c, n, max, w);
            n = add(c, n, max, w * w * 9);
            n = add(c, n, max, w);
            n = add(c, n, max, w);
            n = add(c, n, max, w * 4 * w);
            n = add(c, n, max, 4 * w);
            n = add(c, n, max, 4 * w);
            if (b == 0) {
                n = add(c, n, max, in * 4 * w);
                n = add(c, n, max, 4 * w);
                n = add(c, n, max, 4 * w);
            }
            in = 4 * w;
        }
    }
    n = add(c, n, max, 2048 * 1000);
    n = add(c, n, max, 1000);
    return n;
}

/* BERT-base (uncased, no pre-training heads): embeddings, 12 encoder layers
 * of 16 tensors, pooler; 199 tensors, 109,482,240 elements. */
static size_t bert_base(uint64_t *c, size_t max)
{
    const uint64_t h = 768, ff = 3072;
    size_t n = 0;
    n = add(c, n, max, 30522 * h);
    n = add(c, n, max, 512 * h);
    n = add(c, n, max, 2 * h);
    n = add(c, n, max, h);
    n = add(c, n, max, h);
    for (int l = 0; l < 12; l++) {
        for (int q = 0; q < 4; q++) { /* query, key, value, attention output */
            n = add(c, n, max, h * h);
            n = add(c, n, max, h);
        }
        n = add(c, n, max, h);
        n = add(c, n, max, h);
        n = add(c, n, max, h * ff);
        n = add(c, n, max, ff);
        n = add(c, n, max, ff * h);
        n = add(c, n, max, h);
        n = add(c, n, max, h);
        n = add(c, n, max, h);
    }
    n = add(c, n, max, h * h);
    n = add(c, n, max, h);
    return n;
}

static const struct {
    const char *name;
    size_t (*profile)(uint64_t *counts, size_t max);
} models[] = {{"resnet50", resnet50}, {"bert-base", bert_base}};

/* ---- options ---- */

static int parse_bytes(const char *s, uint64_t *out)
{
    char *end;
    double v = strtod(s, &end);
    double mul = 1;
    if (end == s || !(v > 0))
        return -1;
    if (*end == 'K' || *end == 'k')
        mul = 1024, end++;
    else if (*end == 'M' || *end == 'm')
        mul = 1024.0 * 1024, end++;
    else if (*end == 'G' || *end == 'g')
        mul = 1024.0 * 1024 * 1024, end++;
    if (*end)
        return -1;
    *out = (uint64_t)(v * mul);
    return *out >= 4 ? 0 : -1;
}

static int parse_kopts(int argc, char **argv, struct kopts *o)
{
    static const struct option lo[] = {
        {"keys", required_argument, 0, 'k'},   {"sizes", required_argument, 0, 's'},
        {"model", required_argument, 0, 'm'},  {"order", required_argument, 0, 'O'},
        {"compute-ms", required_argument, 0, 'c'}, {"ops", required_argument, 0, 'o'},
        {"iters", required_argument, 0, 'i'},  {"warmup", required_argument, 0, 'w'},
        {"type", required_argument, 0, 't'},   {"no-ref", no_argument, 0, 'R'},
        {"json", no_argument, 0, 'j'},         {"help", no_argument, 0, 'h'},
        {"interleave", no_argument, 0, 'I'},
        {0, 0, 0, 0}};
    int c, order = -1;
    char *end;
    memset(o, 0, sizeof *o);
    o->lo = 4 << 10;
    o->hi = 1 << 20;
    o->warmup = 2;
    o->type = "dist_sync";
    o->ref = 1;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case 'k': {
            unsigned long long v = strtoull(optarg, &end, 10);
            if (*end || v == 0 || v > 100000000ull) {
                fprintf(stderr, "kvs-bench: --keys '%s': expected 1 to 100000000\n", optarg);
                return -1;
            }
            o->nkeys = (size_t)v;
            break;
        }
        case 's': {
            char *dash = strchr(optarg, '-');
            if (dash)
                *dash = 0;
            if (parse_bytes(optarg, &o->lo) != 0 ||
                parse_bytes(dash ? dash + 1 : optarg, &o->hi) != 0 || o->hi < o->lo) {
                fprintf(stderr, "kvs-bench: --sizes: expected SIZE or LO-HI with 4 <= LO <= "
                        "HI (e.g. 4K-1M)\n");
                return -1;
            }
            break;
        }
        case 'm':
            o->model = optarg;
            break;
        case 'O':
            if (!strcmp(optarg, "call"))
                order = 0;
            else if (!strcmp(optarg, "backward"))
                order = 1;
            else {
                fprintf(stderr, "kvs-bench: --order '%s': expected call or backward\n", optarg);
                return -1;
            }
            break;
        case 'c':
            o->compute_ms = strtod(optarg, &end);
            if (*end || !(o->compute_ms >= 0) || o->compute_ms > 60000) {
                fprintf(stderr, "kvs-bench: --compute-ms '%s': expected 0 to 60000\n", optarg);
                return -1;
            }
            break;
        case 'o': {
            char *save, *t;
            for (t = strtok_r(optarg, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                int k;
                for (k = 0; k < 3 && strcmp(t, op_names[k]); k++)
                    ;
                if (k == 3 || o->nops == 3) {
                    fprintf(stderr, "kvs-bench: unknown op '%s' (push, pull, pushpull)\n", t);
                    return -1;
                }
                o->ops[o->nops++] = k;
            }
            break;
        }
        case 'i':
        case 'w': {
            long v = strtol(optarg, &end, 10);
            if (*end || v < (c == 'i') || v > 1000000) {
                fprintf(stderr, "kvs-bench: --%s '%s': expected an integer %s\n",
                        c == 'i' ? "iters" : "warmup", optarg, c == 'i' ? ">= 1" : ">= 0");
                return -1;
            }
            *(c == 'i' ? &o->iters : &o->warmup) = (int)v;
            break;
        }
        case 't':
            o->type = optarg;
            break;
        case 'I':
            o->interleave = 1;
            break;
        case 'R':
            o->ref = 0;
            break;
        case 'j':
            o->json = 1;
            break;
        case 'h':
            fputs(usage, stdout);
            exit(0);
        default:
            fputs(usage, stderr);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "kvs-bench: unexpected argument '%s'\n%s", argv[optind], usage);
        return -1;
    }
    if (o->model) {
        size_t m;
        for (m = 0; m < sizeof models / sizeof models[0] && strcmp(models[m].name, o->model);
             m++)
            ;
        if (m == sizeof models / sizeof models[0]) {
            fprintf(stderr, "kvs-bench: --model '%s': expected resnet50 or bert-base\n",
                    o->model);
            return -1;
        }
        if (o->nkeys) {
            fprintf(stderr, "kvs-bench: --keys and --model exclude each other\n");
            return -1;
        }
    } else if (o->nkeys == 0) {
        fprintf(stderr, "kvs-bench: --keys or --model is required here\n");
        return -1;
    }
    o->backward = order >= 0 ? order : o->model != NULL;
    if (o->compute_ms > 0 && !o->backward) {
        fprintf(stderr, "kvs-bench: --compute-ms needs --order backward\n");
        return -1;
    }
    if (o->nops == 0)
        o->ops[o->nops++] = OP_PUSHPULL;
    return 0;
}

bool bench_keys_wanted(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], "--keys", 6) || !strncmp(argv[i], "--model", 7))
            return true;
    return false;
}

/* ---- rounds ---- */

/* value rank r pushes at element j of key i; the job's sum is (W(W+1)/2) x */
static float pattern(size_t i, uint64_t j)
{
    return (float)((i + j) % 5 + 1);
}

static void round_free(struct round *r)
{
    free(r->keys);
    free(r->vals);
    free(r->outs);
    free(r->counts);
    free(r->val);
    free(r->out);
    memset(r, 0, sizeof *r);
}

/* Keys first_key.. with counts[0..n) elements each. */
static int round_new(struct round *r, size_t n, const uint64_t *counts, uint64_t first_key,
                     int rank)
{
    memset(r, 0, sizeof *r);
    r->n = n;
    r->keys = malloc(n * sizeof *r->keys);
    r->vals = malloc(n * sizeof *r->vals);
    r->outs = malloc(n * sizeof *r->outs);
    r->counts = malloc(n * sizeof *r->counts);
    for (size_t i = 0; i < n; i++)
        r->total += counts[i];
    r->val = malloc(r->total * sizeof(float) + 64);
    r->out = calloc(r->total + 16, sizeof(float));
    if (!r->keys || !r->vals || !r->outs || !r->counts || !r->val || !r->out) {
        round_free(r);
        return -1;
    }
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        r->keys[i] = first_key + i;
        r->counts[i] = counts[i];
        for (uint64_t j = 0; j < counts[i]; j++)
            r->val[off + j] = (float)(rank + 1) * pattern(i, j);
        r->vals[i] = (kvs_array){r->val + off, counts[i], KVS_FLOAT32, KVS_CPU};
        r->outs[i] = (kvs_array){r->out + off, counts[i], KVS_FLOAT32, KVS_CPU};
        off += counts[i];
    }
    return 0;
}

/* Index of the first wrong element over all keys, or UINT64_MAX. */
static uint64_t round_check(const struct round *r, int wsum)
{
    uint64_t off = 0;
    for (size_t i = 0; i < r->n; i++) {
        for (uint64_t j = 0; j < r->counts[i]; j++)
            if (r->out[off + j] != (float)wsum * pattern(i, j))
                return off + j;
        off += r->counts[i];
    }
    return UINT64_MAX;
}

static int issue(kvs_store *s, int op, size_t n, const uint64_t *keys, const kvs_array *v,
                 const kvs_array *o, int prio)
{
    if (op == OP_PUSH)
        return kvs_push(s, n, keys, v, prio);
    if (op == OP_PULL)
        return kvs_pull(s, n, keys, o, prio);
    return kvs_pushpull(s, n, keys, v, o, prio);
}

static void sleep_until(uint64_t t_ns)
{
    struct timespec ts = {(time_t)(t_ns / 1000000000ull), (long)(t_ns % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
        ;
}

/* One round: every key issued, everything waited for.  first_ns: when key 0
 * (the first layer) was back (backward order only). */
static int one_round(kvs_store *s, const struct round *r, int op, int backward,
                     double compute_ms, uint64_t *round_ns, uint64_t *first_ns)
{
    uint64_t t0 = clock_ns();
    int rc = 0;
    *first_ns = 0;
    if (!backward) {
        rc = issue(s, op, r->n, r->keys, r->vals, r->outs, 0);
    } else {
        uint64_t t = t0;
        for (size_t i = r->n; i-- > 0 && rc == 0;) {
            if (compute_ms > 0) {
                t += (uint64_t)(compute_ms * 1e6);
                sleep_until(t);
            }
            rc = issue(s, op, 1, &r->keys[i], &r->vals[i], &r->outs[i], -(int)i);
        }
        if (rc == 0)
            rc = kvs_wait(s, r->keys[0]);
        *first_ns = clock_ns() - t0;
    }
    if (rc == 0)
        rc = kvs_wait_all(s);
    *round_ns = clock_ns() - t0;
    return rc;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

struct result {
    double med_ms, p99_ms, first_ms;
    bool ok;
};

static int measure(kvs_store *s, const struct round *r, int op, const struct kopts *o,
                   int iters, int wsum, int rank, struct result *res);

/* --interleave: one round of r, then one of ref (call order), iters times;
 * each median against the same minutes of a shared, noisy machine. */
static int measure_pair(kvs_store *s, const struct round *r, const struct round *ref, int op,
                        const struct kopts *o, int iters, int wsum, int rank,
                        struct result *a, struct result *b)
{
    uint64_t *la = calloc((size_t)iters, 8), *lb = calloc((size_t)iters, 8), f;
    int rc = 0;
    if (la == NULL || lb == NULL) {
        free(la);
        free(lb);
        fprintf(stderr, "kvs-bench: out of memory\n");
        return 1;
    }
    memset(r->out, 0, r->total * sizeof(float));
    memset(ref->out, 0, ref->total * sizeof(float));
    kvs_barrier(s);
    for (int it = -o->warmup; it < iters && rc == 0; it++) {
        uint64_t ta, tb;
        rc = one_round(s, r, op, o->backward, o->compute_ms, &ta, &f);
        if (rc == 0)
            rc = one_round(s, ref, op, 0, 0, &tb, &f);
        if (rc == 0 && it >= 0) {
            la[it] = ta;
            lb[it] = tb;
        }
    }
    for (int k = 0; k < 2 && rc == 0 && op == OP_PUSH; k++) {
        const struct round *x = k ? ref : r;
        rc = kvs_pull(s, x->n, x->keys, x->outs, 0);
        if (rc == 0)
            rc = kvs_wait_all(s);
    }
    if (rc) {
        fprintf(stderr, "kvs-bench: worker %d: %s: %s: %s\n", rank, op_names[op],
                kvs_errname(rc), kvs_last_error());
        free(la);
        free(lb);
        return 1;
    }
    for (int k = 0; k < 2; k++) {
        const struct round *x = k ? ref : r;
        uint64_t *l = k ? lb : la;
        struct result *res = k ? b : a;
        uint64_t bad = round_check(x, wsum);
        if (bad != UINT64_MAX)
            fprintf(stderr, "kvs-bench: worker %d: %s of %zu keys: wrong value at element "
                    "%llu (of %llu)\n", rank, op_names[op], x->n, (unsigned long long)bad,
                    (unsigned long long)x->total);
        qsort(l, (size_t)iters, sizeof *l, cmp_u64);
        res->med_ms = (double)l[iters / 2] / 1e6;
        res->p99_ms = (double)l[(int)((iters - 1) * 0.99)] / 1e6;
        res->first_ms = 0;
        res->ok = bad == UINT64_MAX;
    }
    free(la);
    free(lb);
    return 0;
}

static int measure(kvs_store *s, const struct round *r, int op, const struct kopts *o,
                   int iters, int wsum, int rank, struct result *res)
{
    uint64_t *lat = calloc((size_t)iters, sizeof *lat), *first = calloc((size_t)iters, 8);
    int rc = 0;
    if (lat == NULL || first == NULL) {
        free(lat);
        free(first);
        fprintf(stderr, "kvs-bench: out of memory\n");
        return 1;
    }
    memset(r->out, 0, r->total * sizeof(float));
    kvs_barrier(s);
    for (int it = -o->warmup; it < iters && rc == 0; it++) {
        uint64_t t, f;
        rc = one_round(s, r, op, o->backward, o->compute_ms, &t, &f);
        if (it >= 0) {
            lat[it] = t;
            first[it] = f;
        }
    }
    if (rc == 0 && op == OP_PUSH) {
        rc = kvs_pull(s, r->n, r->keys, r->outs, 0);
        if (rc == 0)
            rc = kvs_wait_all(s);
    }
    if (rc) {
        fprintf(stderr, "kvs-bench: worker %d: %s: %s: %s\n", rank, op_names[op],
                kvs_errname(rc), kvs_last_error());
        free(lat);
        free(first);
        return 1;
    }
    uint64_t bad = round_check(r, wsum);
    if (bad != UINT64_MAX)
        fprintf(stderr, "kvs-bench: worker %d: %s of %zu keys: wrong value at element %llu "
                "(of %llu)\n", rank, op_names[op], r->n, (unsigned long long)bad,
                (unsigned long long)r->total);
    qsort(lat, (size_t)iters, sizeof *lat, cmp_u64);
    qsort(first, (size_t)iters, sizeof *first, cmp_u64);
    res->med_ms = (double)lat[iters / 2] / 1e6;
    res->p99_ms = (double)lat[(int)((iters - 1) * 0.99)] / 1e6;
    res->first_ms = (double)first[iters / 2] / 1e6;
    res->ok = bad == UINT64_MAX;
    free(lat);
    free(first);
    return 0;
}

static void fmt_bytes(uint64_t b, char *buf, size_t len)
{
    if (b >= (10ull << 20))
        snprintf(buf, len, "%.1fM", (double)b / (1 << 20));
    else if (b >= (10u << 10))
        snprintf(buf, len, "%.1fK", (double)b / 1024);
    else
        snprintf(buf, len, "%llu", (unsigned long long)b);
}

int bench_keys_main(int argc, char **argv)
{
    struct kopts o;
    struct round r, ref;
    uint64_t *counts = NULL;
    size_t n;
    kvs_store *s = NULL;
    int rc, failures = 0;
    if (parse_kopts(argc, argv, &o) != 0)
        return 2;
    if (o.model) {
        size_t m = 0;
        while (strcmp(models[m].name, o.model))
            m++;
        n = models[m].profile(NULL, 0);
        counts = malloc(n * sizeof *counts);
        if (counts)
            models[m].profile(counts, n);
    } else {
        n = o.nkeys;
        counts = malloc(n * sizeof *counts);
        for (size_t i = 0; counts && i < n; i++) {
            double f = n > 1 ? (double)i / (double)(n - 1) : 0;
            double b = (double)o.lo * pow((double)o.hi / (double)o.lo, f);
            counts[i] = (uint64_t)(b / 4) ? (uint64_t)(b / 4) : 1;
        }
    }
    if (counts == NULL) {
        fprintf(stderr, "kvs-bench: out of memory\n");
        return 1;
    }
    rc = kvs_create(o.type, &s);
    if (rc) {
        fprintf(stderr, "kvs-bench: kvs_create(%s): %s: %s\n", o.type, kvs_errname(rc),
                kvs_last_error());
        free(counts);
        return 1;
    }
    int rank = kvs_rank(s), W = kvs_num_workers(s), S = kvs_num_servers(s);
    int wsum = W * (W + 1) / 2;
    if (round_new(&r, n, counts, 1, rank) != 0) {
        fprintf(stderr, "kvs-bench: out of memory for %zu keys\n", n);
        return 1;
    }
    uint64_t one = r.total;
    if (o.ref && round_new(&ref, 1, &one, 1 + (uint64_t)n, rank) != 0) {
        fprintf(stderr, "kvs-bench: out of memory for the reference key\n");
        return 1;
    }
    uint64_t bytes = r.total * sizeof(float);
    int iters = o.iters;
    if (iters == 0) {
        iters = (int)(1024ull * 1024 * 1024 / bytes);
        iters = iters < 5 ? 5 : iters > 100 ? 100 : iters;
    }
    /* init, then one push so that pulls see the job's sum */
    rc = kvs_init(s, r.n, r.keys, r.vals);
    if (rc == 0 && o.ref)
        rc = kvs_init(s, 1, ref.keys, ref.vals);
    if (rc == 0)
        rc = kvs_push(s, r.n, r.keys, r.vals, 0);
    if (rc == 0 && o.ref)
        rc = kvs_push(s, 1, ref.keys, ref.vals, 0);
    if (rc == 0)
        rc = kvs_wait_all(s);
    if (rc) {
        fprintf(stderr, "kvs-bench: worker %d: init: %s: %s\n", rank, kvs_errname(rc),
                kvs_last_error());
        return 1;
    }
    char what[64], sz[32];
    fmt_bytes(bytes, sz, sizeof sz);
    if (o.model)
        snprintf(what, sizeof what, "%s", o.model);
    else if (o.lo == o.hi)
        snprintf(what, sizeof what, "%zux%llu", n, (unsigned long long)o.lo);
    else
        snprintf(what, sizeof what, "%zu:%llu-%llu", n, (unsigned long long)o.lo,
                 (unsigned long long)o.hi);
    if (rank == 0 && !o.json) {
        printf("kvs-bench: %d worker(s), %d server(s), store %s, %zu keys, %s bytes per "
               "round, order %s", W, S, o.type, n, sz, o.backward ? "backward" : "call");
        if (o.compute_ms > 0)
            printf(", %.1f ms compute per key", o.compute_ms);
        printf("\n%-22s %-9s %5s %10s %10s %9s %8s %7s  %s\n", "keys", "op", "iters",
               "median_ms", "p99_ms", "first_ms", "GB/s", "x1key", "check");
        fflush(stdout);
    }
    for (int oi = 0; oi < o.nops; oi++) {
        int op = o.ops[oi];
        struct result a = {0}, b = {0};
        if (o.ref && o.interleave) {
            if (measure_pair(s, &r, &ref, op, &o, iters, wsum, rank, &a, &b) != 0)
                return 1;
        } else if (measure(s, &r, op, &o, iters, wsum, rank, &a) != 0) {
            return 1;
        }
        if (o.ref && !o.interleave) {
            struct kopts ro = o;
            ro.backward = 0;
            ro.compute_ms = 0;
            if (measure(s, &ref, op, &ro, iters, wsum, rank, &b) != 0)
                return 1;
        }
        failures += !a.ok + (o.ref && !b.ok);
        double gbs = (double)bytes * (op == OP_PUSHPULL ? 2 : 1) / (a.med_ms / 1e3) / 1e9;
        double ratio = o.ref && b.med_ms > 0 ? a.med_ms / b.med_ms : 0;
        if (rank != 0)
            continue;
        if (o.json) {
            printf("{\"workers\": %d, \"servers\": %d, \"keys\": %zu, \"what\": \"%s\", "
                   "\"bytes\": %llu, \"op\": \"%s\", \"order\": \"%s\", \"compute_ms\": %.3f, "
                   "\"iters\": %d, \"median_ms\": %.4f, \"p99_ms\": %.4f, \"first_ms\": %.4f, "
                   "\"gbps\": %.3f, \"ref_median_ms\": %.4f, \"ok\": %s}\n",
                   W, S, n, what, (unsigned long long)bytes, op_names[op],
                   o.backward ? "backward" : "call", o.compute_ms, iters, a.med_ms, a.p99_ms,
                   a.first_ms, gbs, b.med_ms, a.ok && (!o.ref || b.ok) ? "true" : "false");
        } else {
            char first[16] = "-", x[16] = "-";
            if (o.backward)
                snprintf(first, sizeof first, "%.3f", a.first_ms);
            if (o.ref)
                snprintf(x, sizeof x, "%.2f", ratio);
            printf("%-22s %-9s %5d %10.3f %10.3f %9s %8.3f %7s  %s\n", what, op_names[op],
                   iters, a.med_ms, a.p99_ms, first, gbs, x, a.ok ? "ok" : "WRONG");
            if (o.ref)
                printf("%-22s %-9s %5d %10.3f %10.3f %9s %8.3f %7s  %s\n", "(1 key, same bytes)",
                       op_names[op], iters, b.med_ms, b.p99_ms, "-",
                       (double)bytes * (op == OP_PUSHPULL ? 2 : 1) / (b.med_ms / 1e3) / 1e9,
                       "1.00", b.ok ? "ok" : "WRONG");
        }
        fflush(stdout);
    }
    round_free(&r);
    if (o.ref)
        round_free(&ref);
    free(counts);
    rc = kvs_close(s);
    if (rc) {
        fprintf(stderr, "kvs-bench: close: %s: %s\n", kvs_errname(rc), kvs_last_error());
        return 1;
    }
    return failures ? 1 : 0;
}
