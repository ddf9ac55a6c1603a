/* kvs-bench - throughput and latency of push, pull and pushpull in a kvsd
 * job, with every result verified element by element; `kvs-bench reduce`
 * measures the reduction engine (tools/bench_reduce.c).
 *
 * Run it as the worker command of a job, e.g.
 *   deploy/kvs-launch -n 2 -s 2 -- build/kvs-bench --sizes 4K,4M
 * Rank 0 prints the table (or JSON with --json). */
#include <math.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "kvs.h"
#include "tools/bench.h"

static const char usage[] =
    "usage: kvs-bench [--sizes LIST] [--dtypes LIST] [--ops LIST] [--iters N]\n"
    "                 [--warmup N] [--type dist_sync|dist_async|local] [--json]\n"
    "                 [--interleave]\n"
    "       kvs-bench reduce [--help]   (reduction engine vs memcpy)\n"
    "       kvs-bench zmq [--help]      (raw ZeroMQ echo: the transport floor)\n"
    "       kvs-bench --store device --devices N [--help]\n"
    "                                   (local reduce + broadcast over N devices)\n"
    "       kvs-bench --keys N | --model resnet50|bert-base [--help]  (many keys)\n"
    "       kvs-bench optim [--help]    (server-side optimizer updates vs sums)\n"
    "       kvs-bench mixed [--help]    (small-key latency while big rounds run)\n"
    "       kvs-bench codec [--help]    (gradient compression: encode/decode GB/s)\n"
    "\n"
    "Runs as a worker of a job (start it with deploy/kvs-launch, or set DMLC_*).\n"
    "  --sizes   bytes per key, K/M/G suffixes (default 4K,256K,4M,64M)\n"
    "  --dtypes  float32,float64,float16,bfloat16,int32,int64 (default float32)\n"
    "  --ops     push,pull,pushpull (default all three)\n"
    "  --iters   timed rounds per size (default: 200 for small keys down to 10)\n"
    "  --warmup  untimed rounds first (default 3)\n"
    "  --interleave  one round of each op in turn (push, pull, pushpull, push, ...)\n"
    "            instead of all rounds of one op, then the next: every op is timed\n"
    "            in the same seconds and cache state (compare pushpull with push +\n"
    "            pull on a busy or noisy machine)\n"
    "  --optimizer SPEC  servers apply this optimizer (kvs_set_optimizer); the\n"
    "            pulled weights are then not checked (check column '-')\n"
    "  --compression SPEC  compress the pushes (kvs_set_gradient_compression,\n"
    "            e.g. '2bit threshold=0.5'); the pulled sums are then not checked\n"
    "Every pulled value is checked against the exact sum of all workers' pushes.\n"
    "Columns: median and p99 time of one round (a push/pull/pushpull and its wait,\n"
    "across all workers), and GB/s = bytes moved by this worker / median time\n"
    "(a pushpull moves 2 x size).  Exit status 0 only if every check passed.\n";

enum { OP_PUSH, OP_PULL, OP_PUSHPULL };
static const char *const op_names[] = {"push", "pull", "pushpull"};

struct opts {
    uint64_t sizes[32];
    int nsizes;
    kvs_dtype dtypes[KVS_NUM_DTYPES];
    int ndtypes;
    int ops[3];
    int nops;
    int iters;
    int warmup;
    const char *type;
    const char *optimizer; /* --optimizer SPEC: servers update (values not checked) */
    const char *compression; /* --compression SPEC: pushes compressed (not checked) */
    int json;
    int interleave; /* --interleave: the ops' rounds alternate */
};

static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    double v = strtod(s, &end);
    uint64_t mul = 1;
    if (end == s || v <= 0)
        return -1;
    if (*end == 'K' || *end == 'k')
        mul = 1024, end++;
    else if (*end == 'M' || *end == 'm')
        mul = 1024 * 1024, end++;
    else if (*end == 'G' || *end == 'g')
        mul = 1024ull * 1024 * 1024, end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end)
        return -1;
    *out = (uint64_t)(v * (double)mul);
    return 0;
}

/* Split a comma list; fn(item, o) returns 0 or -1 (it printed why). */
static int each_item(const char *list, struct opts *o, int (*fn)(const char *, struct opts *))
{
    char *dup = strdup(list), *save, *t;
    int rc = 0;
    if (dup == NULL)
        return -1;
    for (t = strtok_r(dup, ",", &save); t && rc == 0; t = strtok_r(NULL, ",", &save))
        rc = fn(t, o);
    free(dup);
    return rc;
}

static int add_size(const char *t, struct opts *o)
{
    if (o->nsizes == 32 || parse_size(t, &o->sizes[o->nsizes]) != 0) {
        fprintf(stderr, "kvs-bench: bad size '%s' (e.g. 4K, 256K, 4M, 64M)\n", t);
        return -1;
    }
    o->nsizes++;
    return 0;
}

static int add_dtype(const char *t, struct opts *o)
{
    int d;
    for (d = 0; d < KVS_NUM_DTYPES; d++)
        if (!strcmp(t, kvs_dtype_name((kvs_dtype)d)))
            break;
    if (d == KVS_NUM_DTYPES || o->ndtypes == KVS_NUM_DTYPES) {
        fprintf(stderr, "kvs-bench: unknown dtype '%s'\n", t);
        return -1;
    }
    o->dtypes[o->ndtypes++] = (kvs_dtype)d;
    return 0;
}

static int add_op(const char *t, struct opts *o)
{
    int k;
    for (k = 0; k < 3; k++)
        if (!strcmp(t, op_names[k]))
            break;
    if (k == 3 || o->nops == 3) {
        fprintf(stderr, "kvs-bench: unknown op '%s' (push, pull, pushpull)\n", t);
        return -1;
    }
    o->ops[o->nops++] = k;
    return 0;
}

static int parse_int(const char *opt, const char *v, int min, int *out)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (end == v || *end || x < min || x > 100000000) {
        fprintf(stderr, "kvs-bench: %s '%s': expected an integer >= %d\n", opt, v, min);
        return -1;
    }
    *out = (int)x;
    return 0;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},    {"version", no_argument, NULL, 'V'},
        {"json", no_argument, NULL, 'j'},    {"sizes", required_argument, NULL, 's'},
        {"dtypes", required_argument, NULL, 'd'}, {"ops", required_argument, NULL, 'o'},
        {"iters", required_argument, NULL, 'i'},  {"warmup", required_argument, NULL, 'w'},
        {"type", required_argument, NULL, 't'},   {"optimizer", required_argument, NULL, 'O'},
        {"interleave", no_argument, NULL, 'I'},   {"compression", required_argument, NULL, 'C'},
        {NULL, 0, NULL, 0}};
    int ch, rc = 0;
    memset(o, 0, sizeof *o);
    o->iters = 0;
    o->warmup = 3;
    o->type = "dist_sync";
    opterr = 0;
    optind = 1;
    while (rc == 0 && (ch = getopt_long(argc, argv, "hV", longopts, NULL)) != -1) {
        switch (ch) {
        case 'h':
            fputs(usage, stdout);
            exit(0);
        case 'V':
            printf("kvs-bench (kvsd) %s\n", KVS_VERSION_STRING);
            exit(0);
        case 'j': o->json = 1; break;
        case 's': rc = each_item(optarg, o, add_size); break;
        case 'd': rc = each_item(optarg, o, add_dtype); break;
        case 'o': rc = each_item(optarg, o, add_op); break;
        case 'i': rc = parse_int("--iters", optarg, 1, &o->iters); break;
        case 'w': rc = parse_int("--warmup", optarg, 0, &o->warmup); break;
        case 't': o->type = optarg; break;
        case 'O': o->optimizer = optarg; break;
        case 'C': o->compression = optarg; break;
        case 'I': o->interleave = 1; break;
        default:
            fprintf(stderr, "kvs-bench: unknown or incomplete argument '%s'\n%s",
                    argv[optind - 1], usage);
            return -1;
        }
    }
    if (rc)
        return -1;
    if (optind < argc) {
        fprintf(stderr, "kvs-bench: unexpected argument '%s'\n%s", argv[optind], usage);
        return -1;
    }
    if (o->nsizes == 0) {
        o->sizes[0] = 4 << 10;
        o->sizes[1] = 256 << 10;
        o->sizes[2] = 4 << 20;
        o->sizes[3] = 64 << 20;
        o->nsizes = 4;
    }
    if (o->ndtypes == 0)
        o->dtypes[o->ndtypes++] = KVS_FLOAT32;
    if (o->nops == 0) {
        o->ops[0] = OP_PUSH;
        o->ops[1] = OP_PULL;
        o->ops[2] = OP_PUSHPULL;
        o->nops = 3;
    }
    return 0;
}

/* Small integers are exact in every dtype; f16/bf16 bit patterns built here. */
static uint16_t f32_to_f16_int(float f)
{
    /* exact for integers |f| <= 2048 */
    if (f == 0)
        return 0;
    uint16_t sign = f < 0 ? 0x8000 : 0;
    float a = fabsf(f);
    int e = 0;
    while (a >= 2.0f) {
        a /= 2;
        e++;
    }
    uint16_t mant = (uint16_t)((a - 1.0f) * 1024.0f + 0.5f);
    return (uint16_t)(sign | ((e + 15) << 10) | mant);
}

static uint16_t f32_to_bf16_int(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16); /* exact for integers |f| <= 256 */
}

static void put(void *buf, kvs_dtype dt, uint64_t i, int v)
{
    switch (dt) {
    case KVS_FLOAT32: ((float *)buf)[i] = (float)v; break;
    case KVS_FLOAT64: ((double *)buf)[i] = v; break;
    case KVS_FLOAT16: ((uint16_t *)buf)[i] = f32_to_f16_int((float)v); break;
    case KVS_BFLOAT16: ((uint16_t *)buf)[i] = f32_to_bf16_int((float)v); break;
    case KVS_INT32: ((int32_t *)buf)[i] = v; break;
    case KVS_INT64: ((int64_t *)buf)[i] = v; break;
    }
}

/* value pushed by rank r at element i, and the expected sum over W workers */
static int pushed_value(int r, uint64_t i)
{
    return (r + 1) * (int)(i % 5 + 1);
}

static uint64_t check(const void *out, const void *expect, kvs_dtype dt, uint64_t count)
{
    size_t esz = kvs_dtype_size(dt);
    if (memcmp(out, expect, count * esz) == 0)
        return UINT64_MAX;
    for (uint64_t i = 0; i < count; i++)
        if (memcmp((const char *)out + i * esz, (const char *)expect + i * esz, esz))
            return i;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    struct opts o;
    kvs_store *s;
    int rc, failures = 0, first = 1;
    /* one row per line as it is measured, also into a pipe (make bench) */
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* a benchmark keeps message buffers in the heap as the daemons do
     * (common/memtune.h); KVS_MALLOC_TUNE=0 in the environment still wins */
    setenv("KVS_MALLOC_TUNE", "1", 0);
    if (argc > 1 && !strcmp(argv[1], "reduce"))
        return bench_reduce_main(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "codec"))
        return bench_codec_main(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "zmq"))
        return bench_zmq_main(argc - 1, argv + 1);
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--store") || !strcmp(argv[i], "--devices"))
            return bench_device_main(argc, argv);
    if (bench_keys_wanted(argc, argv))
        return bench_keys_main(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "mixed"))
        return bench_mixed_main(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "optim"))
        return bench_optim_main(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "rowsparse"))
        return bench_rsp_main(argc - 1, argv + 1);
    if (parse_opts(argc, argv, &o) != 0)
        return 2;
    rc = kvs_create(o.type, &s);
    if (rc) {
        fprintf(stderr, "kvs-bench: kvs_create(%s): %s: %s\n", o.type, kvs_errname(rc),
                kvs_last_error());
        return 1;
    }
    if (o.optimizer && (rc = kvs_set_optimizer(s, o.optimizer)) != 0) {
        fprintf(stderr, "kvs-bench: kvs_set_optimizer: %s: %s\n", kvs_errname(rc),
                kvs_last_error());
        return 1;
    }
    if (o.compression && (rc = kvs_set_gradient_compression(s, o.compression)) != 0) {
        fprintf(stderr, "kvs-bench: kvs_set_gradient_compression: %s: %s\n", kvs_errname(rc),
                kvs_last_error());
        return 1;
    }
    /* sums of compressed pushes or weights of an optimizer: not checked */
    bool unchecked = o.optimizer || o.compression;
    int rank = kvs_rank(s), W = kvs_num_workers(s), S = kvs_num_servers(s);
    int wsum = W * (W + 1) / 2;
    /* dist_sync: a key holds its last round's sum.  dist_async: every push is
     * added as it arrives, and what is guaranteed is the total once every
     * push has been answered (a barrier later): each worker pushes its value
     * and its negation in turn (an even count per op, padded after the timed
     * loop), so after each op the key holds again rank 0's initial value plus
     * the first push of every worker, checked exactly; values pulled while
     * other workers push are not checked. */
    bool async = !strcmp(o.type, "dist_async");
    if (rank == 0) {
        if (o.json)
            printf("{\"workers\": %d, \"servers\": %d, \"type\": \"%s\", \"results\": [", W, S,
                   o.type);
        else
            printf("kvs-bench: %d worker(s), %d server(s), store %s%s%s%s%s\n"
                   "%-9s %-8s %-9s %6s %10s %10s %9s %9s  %s\n",
                   W, S, o.type, o.optimizer ? ", optimizer " : "",
                   o.optimizer ? o.optimizer : "", o.compression ? ", compression " : "",
                   o.compression ? o.compression : "", "size", "dtype", "op", "iters", "median_ms", "p99_ms",
                   "GB/s", "agg_GB/s", "check");
    }
    uint64_t key = 1000;
    for (int di = 0; di < o.ndtypes; di++) {
        kvs_dtype dt = o.dtypes[di];
        size_t esz = kvs_dtype_size(dt);
        for (int si = 0; si < o.nsizes; si++) {
            uint64_t count = o.sizes[si] / esz;
            if (count == 0)
                count = 1;
            uint64_t bytes = count * esz;
            void *val = aligned_alloc(64, (bytes + 63) & ~63ull);
            void *out = aligned_alloc(64, (bytes + 63) & ~63ull);
            void *exp = aligned_alloc(64, (bytes + 63) & ~63ull);
            void *neg = aligned_alloc(64, (bytes + 63) & ~63ull);
            if (!val || !out || !exp || !neg) {
                fprintf(stderr, "kvs-bench: out of memory for %llu bytes\n",
                        (unsigned long long)bytes);
                return 1;
            }
            for (uint64_t i = 0; i < count; i++) {
                put(val, dt, i, pushed_value(rank, i));
                put(neg, dt, i, -pushed_value(rank, i));
                put(exp, dt, i, (async ? 1 + wsum : wsum) * (int)(i % 5 + 1));
            }
            memset(out, 0, bytes);
            int iters = o.iters;
            if (iters == 0) {
                iters = (int)(256ull * 1024 * 1024 / (bytes ? bytes : 1));
                iters = iters < 10 ? 10 : iters > 200 ? 200 : iters;
            }
            double *lat = malloc(sizeof(double) * (size_t)iters * (size_t)o.nops);
            if (lat == NULL) {
                fprintf(stderr, "kvs-bench: out of memory\n");
                return 1;
            }
            kvs_array v = {val, count, dt, KVS_CPU}, ov = {out, count, dt, KVS_CPU};
            kvs_array nv = {neg, count, dt, KVS_CPU};
            uint64_t npush = 0; /* async: pushes since the first (v, nv, v, ...) */
            key++;
            rc = kvs_init(s, 1, &key, &v);
            /* one push so pulls see the job's sum */
            if (!rc)
                rc = kvs_push(s, 1, &key, &v, 0);
            if (!rc)
                rc = kvs_wait(s, key);
            if (rc) {
                fprintf(stderr, "kvs-bench: worker %d: key %llu: %s: %s\n", rank,
                        (unsigned long long)key, kvs_errname(rc), kvs_last_error());
                return 1;
            }
            /* all rounds of one op, then the next; or (--interleave) one round
             * of each op in turn, each op into its own output */
            int groups = o.interleave ? 1 : o.nops, nout = o.interleave ? o.nops : 1;
            void *outs[3] = {out, NULL, NULL};
            for (int k = 1; k < nout; k++)
                if ((outs[k] = aligned_alloc(64, (bytes + 63) & ~63ull)) == NULL) {
                    fprintf(stderr, "kvs-bench: out of memory for %llu bytes\n",
                            (unsigned long long)bytes);
                    return 1;
                }
            for (int g = 0; g < groups; g++) {
                int o0 = o.interleave ? 0 : g, o1 = o.interleave ? o.nops : g + 1;
                kvs_barrier(s);
                for (int it = -o.warmup; it < iters; it++)
                    for (int oi = o0; oi < o1; oi++) {
                        int op = o.ops[oi];
                        kvs_array ovk = {outs[o.interleave ? oi : 0], count, dt, KVS_CPU};
                        const kvs_array *pv = async && npush % 2 ? &nv : &v;
                        uint64_t t0 = clock_ns();
                        if (op == OP_PUSH)
                            rc = kvs_push(s, 1, &key, pv, 0);
                        else if (op == OP_PULL)
                            rc = kvs_pull(s, 1, &key, &ovk, 0);
                        else
                            rc = kvs_pushpull(s, 1, &key, pv, &ovk, 0);
                        if (op != OP_PULL)
                            npush++;
                        if (!rc)
                            rc = kvs_wait(s, key);
                        uint64_t t1 = clock_ns();
                        if (rc) {
                            fprintf(stderr, "kvs-bench: worker %d: %s: %s: %s\n", rank,
                                    op_names[op], kvs_errname(rc), kvs_last_error());
                            return 1;
                        }
                        if (it >= 0)
                            lat[(size_t)oi * (size_t)iters + (size_t)it] = (double)(t1 - t0) / 1e6;
                    }
                if (async) {
                    /* back to the checked total: an even count of pushes,
                     * then every worker's answered (the barrier) */
                    if (npush % 2) {
                        rc = kvs_push(s, 1, &key, &nv, 0);
                        if (!rc)
                            rc = kvs_wait(s, key);
                        npush++;
                    }
                    if (!rc)
                        rc = kvs_barrier(s);
                    if (rc) {
                        fprintf(stderr, "kvs-bench: worker %d: async check: %s: %s\n", rank,
                                kvs_errname(rc), kvs_last_error());
                        return 1;
                    }
                }
                for (int oi = o0; oi < o1; oi++) {
                    int op = o.ops[oi];
                    void *ob = outs[o.interleave ? oi : 0];
                    uint64_t bad = UINT64_MAX;
                    if (async) {
                        kvs_array ovb = {ob, count, dt, KVS_CPU};
                        rc = kvs_pull(s, 1, &key, &ovb, 0);
                        if (!rc)
                            rc = kvs_wait(s, key);
                        bad = rc ? 0 : check(ob, exp, dt, count);
                    } else if (op != OP_PUSH) {
                        bad = check(ob, exp, dt, count);
                    } else {
                        rc = kvs_pull(s, 1, &key, &ov, 0);
                        if (!rc)
                            rc = kvs_wait(s, key);
                        bad = rc ? 0 : check(out, exp, dt, count);
                        memset(out, 0, bytes);
                    }
                    memset(ob, 0, bytes);
                    if (unchecked)
                        bad = UINT64_MAX - 1;
                    if (bad != UINT64_MAX && !unchecked) {
                        failures++;
                        fprintf(stderr, "kvs-bench: worker %d: %s %s %llu bytes: wrong value at "
                                "element %llu\n", rank, kvs_dtype_name(dt), op_names[op],
                                (unsigned long long)bytes, (unsigned long long)bad);
                    }
                    double *l = lat + (size_t)oi * (size_t)iters;
                    qsort(l, (size_t)iters, sizeof *l, cmp_double);
                    double med = l[iters / 2];
                    double p99 = l[(int)((iters - 1) * 0.99)];
                    double moved = (double)bytes * (op == OP_PUSHPULL ? 2 : 1);
                    double gbs = moved / (med / 1e3) / 1e9;
                    if (rank == 0) {
                        char sz[32];
                        if (bytes >= (1 << 20) && bytes % (1 << 20) == 0)
                            snprintf(sz, sizeof sz, "%lluM", (unsigned long long)(bytes >> 20));
                        else if (bytes >= 1024 && bytes % 1024 == 0)
                            snprintf(sz, sizeof sz, "%lluK", (unsigned long long)(bytes >> 10));
                        else
                            snprintf(sz, sizeof sz, "%llu", (unsigned long long)bytes);
                        if (o.json)
                            printf("%s\n  {\"bytes\": %llu, \"dtype\": \"%s\", \"op\": \"%s\", "
                                   "\"iters\": %d, \"median_ms\": %.4f, \"p99_ms\": %.4f, "
                                   "\"gbps\": %.3f, \"agg_gbps\": %.3f, \"ok\": %s}",
                                   first ? "" : ",", (unsigned long long)bytes,
                                   kvs_dtype_name(dt), op_names[op], iters, med, p99, gbs,
                                   gbs * W,
                                   bad == UINT64_MAX ? "true" : unchecked ? "null" : "false");
                        else
                            printf("%-9s %-8s %-9s %6d %10.3f %10.3f %9.3f %9.3f  %s\n", sz,
                                   kvs_dtype_name(dt), op_names[op], iters, med, p99, gbs,
                                   gbs * W,
                                   bad == UINT64_MAX ? "ok" : unchecked ? "-" : "WRONG");
                        fflush(stdout);
                        first = 0;
                    }
                }
            }
            for (int k = 1; k < nout; k++)
                free(outs[k]);
            free(lat);
            free(val);
            free(out);
            free(exp);
            free(neg);
        }
    }
    if (rank == 0 && o.json)
        printf("\n]}\n");
    rc = kvs_close(s);
    if (rc) {
        fprintf(stderr, "kvs-bench: close: %s: %s\n", kvs_errname(rc), kvs_last_error());
        return 1;
    }
    return failures ? 1 : 0;
}
