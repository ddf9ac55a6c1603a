/* bench_reduce.c - `kvs-bench reduce`: bandwidth of the reduction engine
 * next to memcpy and next to a straightforward per-element loop split in
 * equal chunks over threads (what `#pragma omp parallel for` would do), all
 * measured in the same run with the same threads.
 *
 * Effective bandwidth = (inputs + 1) * bytes / time for the sums,
 * 2 * bytes / time for memcpy; bytes is the size of one array.
 */
#include <errno.h>
#include <pthread.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvs.h"
#include "reduce/reduce.h"
#include "tools/bench.h"

#define MAX_LIST 16
#define MAX_INPUTS 16

struct opts {
    uint64_t sizes[MAX_LIST];
    int nsizes;
    int threads[MAX_LIST];
    int nthreads;
    kvs_dtype dtypes[KVS_NUM_DTYPES];
    int ndtypes;
    int inputs;
    int isa;
    int json;
    int cap;
    double min_time; /* seconds per measurement */
};

/* ---- a team of threads for memcpy and the naive loop (OpenMP-style) ---- */

struct team;
typedef void team_fn(struct team *t, int id);

struct team {
    int n;
    pthread_barrier_t start, end;
    pthread_t tid[MAX_LIST * 4];
    team_fn *fn;
    int stop;
    /* the work */
    kvs_dtype dtype;
    void *dst;
    const void *const *srcs;
    int k;
    uint64_t count;
};

struct member {
    struct team *t;
    int id;
};

static void *member_main(void *arg)
{
    struct member *m = arg;
    for (;;) {
        pthread_barrier_wait(&m->t->start);
        if (m->t->stop)
            break;
        m->t->fn(m->t, m->id);
        pthread_barrier_wait(&m->t->end);
    }
    return NULL;
}

static void team_run(struct team *t, team_fn *fn)
{
    t->fn = fn;
    pthread_barrier_wait(&t->start);
    fn(t, 0);
    pthread_barrier_wait(&t->end);
}

static void slice(const struct team *t, int id, uint64_t *lo, uint64_t *hi)
{
    *lo = t->count * (uint64_t)id / (uint64_t)t->n;
    *hi = t->count * (uint64_t)(id + 1) / (uint64_t)t->n;
}

static void do_memcpy(struct team *t, int id)
{
    uint64_t lo, hi;
    size_t es = kvs_dtype_size(t->dtype);
    slice(t, id, &lo, &hi);
    memcpy((char *)t->dst + lo * es, (const char *)t->srcs[0] + lo * es, (hi - lo) * es);
}

/* The straightforward per-element loop, with textbook half conversions. */
static float naive_h2f(uint16_t h)
{
    uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, b;
    float f;
    if (e == 0)
        return (s ? -1.0f : 1.0f) * (float)m * 0x1p-24f;
    b = e == 31 ? (s | 0x7f800000u | (m << 13)) : (s | ((e + 112) << 23) | (m << 13));
    memcpy(&f, &b, 4);
    return f;
}

static uint16_t naive_f2h(float f)
{
    uint32_t x, s;
    memcpy(&x, &f, 4);
    s = (x >> 16) & 0x8000;
    x &= 0x7fffffff;
    if (x > 0x7f800000)
        return (uint16_t)(s | 0x7e00);
    if (x >= 0x477ff000)
        return (uint16_t)(s | 0x7c00);
    if (x >= 0x38800000)
        return (uint16_t)(s | ((x - 0x38000000 + 0xfff + ((x >> 13) & 1)) >> 13));
    float a = f < 0 ? -f : f;
    return (uint16_t)(s | (uint16_t)(a * 0x1p24f + 0.5f));
}

static float naive_bf2f(uint16_t h)
{
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static uint16_t naive_f2bf(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((x >> 16) | 0x40);
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

static void do_naive(struct team *t, int id)
{
    uint64_t lo, hi;
    int k = t->k;
    slice(t, id, &lo, &hi);
    switch (t->dtype) {
#define NAIVE(T, ACC, TOF, FROMF)                                                    \
    for (uint64_t i = lo; i < hi; i++) {                                             \
        ACC acc = TOF(((const T *)t->srcs[0])[i]);                                   \
        for (int j = 1; j < k; j++)                                                  \
            acc += TOF(((const T *)t->srcs[j])[i]);                                  \
        ((T *)t->dst)[i] = FROMF(acc);                                               \
    }                                                                                \
    break;
#define ID(x) (x)
    case KVS_FLOAT32:
        NAIVE(float, float, ID, ID)
    case KVS_FLOAT64:
        NAIVE(double, double, ID, ID)
    case KVS_INT32:
        NAIVE(uint32_t, uint32_t, ID, ID)
    case KVS_INT64:
        NAIVE(uint64_t, uint64_t, ID, ID)
    case KVS_FLOAT16:
        NAIVE(uint16_t, float, naive_h2f, naive_f2h)
    case KVS_BFLOAT16:
        NAIVE(uint16_t, float, naive_bf2f, naive_f2bf)
#undef NAIVE
#undef ID
    }
}

/* ---- timing ---- */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

enum method { M_REDUCE, M_MEMCPY, M_NAIVE };

/* Best time of one operation over repetitions lasting about min_time. */
static double measure(enum method m, red_pool *pool, struct team *team, double min_time)
{
    double best = 1e30, start = now();
    int reps = 0;
    do {
        double t0 = now(), dt;
        if (m == M_REDUCE)
            red_sum(pool, team->dtype, team->dst, team->srcs, team->k, team->count);
        else
            team_run(team, m == M_MEMCPY ? do_memcpy : do_naive);
        dt = now() - t0;
        if (dt < best)
            best = dt;
        reps++;
    } while (reps < 3 || (now() - start < min_time && reps < 100000));
    return best;
}

/* ---- options ---- */

static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -1;
    switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    default: break;
    }
    if ((*end == 'i' || *end == 'I') && end[1] == 'B')
        end += 2;
    else if (*end == 'B')
        end++;
    if (*end != '\0' || v == 0)
        return -1;
    *out = v;
    return 0;
}

static const char *const dtype_names[KVS_NUM_DTYPES] = {"float32", "float64", "float16",
                                                         "bfloat16", "int32", "int64"};

static int parse_list(const char *what, const char *arg, struct opts *o)
{
    char buf[512], *save = NULL, *tok;
    int n = 0;
    snprintf(buf, sizeof(buf), "%s", arg);
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n >= MAX_LIST)
            return -1;
        if (!strcmp(what, "sizes")) {
            if (parse_size(tok, &o->sizes[n]))
                return -1;
        } else if (!strcmp(what, "threads")) {
            char *end;
            long v = strtol(tok, &end, 10);
            if (*end || v < 1 || v > 64)
                return -1;
            o->threads[n] = (int)v;
        } else {
            int t;
            for (t = 0; t < KVS_NUM_DTYPES; t++)
                if (!strcmp(tok, dtype_names[t]))
                    break;
            if (t == KVS_NUM_DTYPES || n >= KVS_NUM_DTYPES)
                return -1;
            o->dtypes[n] = (kvs_dtype)t;
        }
        n++;
    }
    if (n == 0)
        return -1;
    if (!strcmp(what, "sizes"))
        o->nsizes = n;
    else if (!strcmp(what, "threads"))
        o->nthreads = n;
    else
        o->ndtypes = n;
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: kvs-bench reduce [options]\n"
            "  --sizes LIST    bytes per array, e.g. 256K,4M,64M (default)\n"
            "  --threads LIST  e.g. 1,2,3,4 (default)\n"
            "  --dtypes LIST   float32,float64,float16,bfloat16,int32,int64 (default all)\n"
            "  --inputs K      inputs per sum, 1..%d (default 4)\n"
            "  --isa NAME      c, avx2 or avx512 (default: best the CPU has)\n"
            "  --cap           cap the pool at the CPU count as the library does by\n"
            "                  default (without it, threads are exactly as asked)\n"
            "  --time S        seconds per measurement (default 0.15)\n"
            "  --json          one JSON object per line instead of the table\n"
            "Prints GB/s = (inputs+1)*bytes/time for the engine and the naive\n"
            "per-element loop (equal chunks over threads), 2*bytes/time for memcpy,\n"
            "and the ratios reduce/memcpy and reduce/naive.\n",
            MAX_INPUTS);
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
    static const uint64_t def_sizes[] = {256u << 10, 4u << 20, 64u << 20};
    memset(o, 0, sizeof(*o));
    memcpy(o->sizes, def_sizes, sizeof(def_sizes));
    o->nsizes = 3;
    for (int i = 0; i < 4; i++)
        o->threads[i] = i + 1;
    o->nthreads = 4;
    for (int t = 0; t < KVS_NUM_DTYPES; t++)
        o->dtypes[t] = (kvs_dtype)t;
    o->ndtypes = KVS_NUM_DTYPES;
    o->inputs = 4;
    o->isa = red_isa_best();
    o->min_time = 0.15;
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},         {"json", no_argument, NULL, 'j'},
        {"cap", no_argument, NULL, 'c'},          {"sizes", required_argument, NULL, 's'},
        {"threads", required_argument, NULL, 't'}, {"dtypes", required_argument, NULL, 'd'},
        {"inputs", required_argument, NULL, 'i'}, {"time", required_argument, NULL, 'T'},
        {"isa", required_argument, NULL, 'I'},    {NULL, 0, NULL, 0}};
    int ch, isa;
    char *end;
    opterr = 0;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'h':
            usage(stdout);
            return 1;
        case 'j': o->json = 1; break;
        case 'c': o->cap = 1; break;
        case 's':
        case 't':
        case 'd': {
            const char *what = ch == 's' ? "sizes" : ch == 't' ? "threads" : "dtypes";
            if (parse_list(what, optarg, o)) {
                fprintf(stderr, "kvs-bench reduce: --%s '%s': bad list\n", what, optarg);
                return -1;
            }
            break;
        }
        case 'i':
            o->inputs = (int)strtol(optarg, &end, 10);
            if (*end || o->inputs < 1 || o->inputs > MAX_INPUTS) {
                fprintf(stderr, "kvs-bench reduce: --inputs '%s': expected 1..%d\n", optarg,
                        MAX_INPUTS);
                return -1;
            }
            break;
        case 'T':
            o->min_time = strtod(optarg, &end);
            if (*end || !(o->min_time > 0 && o->min_time < 60)) {
                fprintf(stderr, "kvs-bench reduce: --time '%s': expected 0 < s < 60\n", optarg);
                return -1;
            }
            break;
        case 'I':
            for (isa = 0; isa < RED_ISA_COUNT; isa++)
                if (!strcmp(optarg, red_isa_name(isa)))
                    break;
            if (isa == RED_ISA_COUNT || !red_isa_supported(isa)) {
                fprintf(stderr, "kvs-bench reduce: --isa '%s': not known or not on this CPU\n",
                        optarg);
                return -1;
            }
            o->isa = isa;
            break;
        default:
            fprintf(stderr, "kvs-bench reduce: %s: unknown option or missing value (try "
                    "--help)\n", argv[optind - 1]);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "kvs-bench reduce: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    return 0;
}

/* ---- main ---- */

static int team_start(struct team *t, struct member *mem, int n)
{
    t->n = n;
    t->stop = 0;
    pthread_barrier_init(&t->start, NULL, (unsigned)n);
    pthread_barrier_init(&t->end, NULL, (unsigned)n);
    for (int i = 1; i < n; i++) {
        mem[i] = (struct member){t, i};
        if (pthread_create(&t->tid[i], NULL, member_main, &mem[i]))
            return -1;
    }
    return 0;
}

static void team_stop(struct team *t)
{
    t->stop = 1;
    pthread_barrier_wait(&t->start);
    for (int i = 1; i < t->n; i++)
        pthread_join(t->tid[i], NULL);
    pthread_barrier_destroy(&t->start);
    pthread_barrier_destroy(&t->end);
}

int bench_reduce_main(int argc, char **argv)
{
    struct opts o;
    uint64_t maxb = 0;
    char *bufs[MAX_INPUTS + 1] = {0};
    const void *srcs[MAX_INPUTS];
    int rc = parse_opts(argc, argv, &o), ret = 1;
    if (rc)
        return rc > 0 ? 0 : 2;
    for (int i = 0; i < o.nsizes; i++)
        if (o.sizes[i] > maxb)
            maxb = o.sizes[i];
    for (int j = 0; j <= o.inputs; j++) {
        bufs[j] = aligned_alloc(64, (maxb + 63) / 64 * 64);
        if (bufs[j] == NULL) {
            fprintf(stderr, "kvs-bench reduce: out of memory\n");
            goto out;
        }
        /* small finite values in every dtype: the bytes 0x01 / 0x3c */
        memset(bufs[j], j == o.inputs ? 0 : 0x31, maxb);
        if (j < o.inputs)
            srcs[j] = bufs[j];
    }
    if (!o.json)
        printf("# kvs-bench reduce: %d inputs, isa %s, %s\n"
               "%-8s %8s %3s %10s %10s %6s %10s %7s\n",
               o.inputs, red_isa_name(o.isa), o.cap ? "pool capped at CPUs" : "threads uncapped",
               "dtype", "bytes", "thr", "reduce", "memcpy", "ratio", "naive", "speedup");
    for (int ti = 0; ti < o.nthreads; ti++) {
        red_pool *pool = NULL;
        struct team team;
        struct member mem[MAX_LIST * 4];
        int nt = o.threads[ti];
        if (red_pool_new_ex(nt, 1, o.cap ? 0 : RED_POOL_NOCAP, &pool) ||
            red_pool_set_isa(pool, o.isa)) {
            fprintf(stderr, "kvs-bench reduce: cannot make a pool of %d threads\n", nt);
            red_pool_free(pool);
            goto out;
        }
        memset(&team, 0, sizeof(team));
        if (team_start(&team, mem, red_pool_threads(pool))) {
            fprintf(stderr, "kvs-bench reduce: cannot start %d threads\n", nt);
            red_pool_free(pool);
            goto out;
        }
        for (int di = 0; di < o.ndtypes; di++)
            for (int si = 0; si < o.nsizes; si++) {
                kvs_dtype t = o.dtypes[di];
                uint64_t bytes = o.sizes[si] / kvs_dtype_size(t) * kvs_dtype_size(t);
                double tr, tm, tn, k1 = o.inputs + 1.0;
                team.dtype = t;
                team.dst = bufs[o.inputs];
                team.srcs = srcs;
                team.k = o.inputs;
                team.count = bytes / kvs_dtype_size(t);
                tm = measure(M_MEMCPY, pool, &team, o.min_time);
                tr = measure(M_REDUCE, pool, &team, o.min_time);
                tn = measure(M_NAIVE, pool, &team, o.min_time);
                double gr = k1 * (double)bytes / tr / 1e9, gm = 2.0 * (double)bytes / tm / 1e9;
                double gn = k1 * (double)bytes / tn / 1e9;
                if (o.json)
                    printf("{\"dtype\":\"%s\",\"bytes\":%llu,\"threads\":%d,\"inputs\":%d,"
                           "\"isa\":\"%s\",\"reduce_gbs\":%.3f,\"memcpy_gbs\":%.3f,"
                           "\"naive_gbs\":%.3f}\n",
                           dtype_names[t], (unsigned long long)bytes, red_pool_threads(pool),
                           o.inputs, red_isa_name(o.isa), gr, gm, gn);
                else
                    printf("%-8s %8llu %3d %10.2f %10.2f %6.2f %10.2f %7.2f\n", dtype_names[t],
                           (unsigned long long)bytes, red_pool_threads(pool), gr, gm, gr / gm,
                           gn, gr / gn);
                fflush(stdout);
            }
        team_stop(&team);
        red_pool_free(pool);
    }
    ret = 0;
out:
    for (int j = 0; j <= o.inputs; j++)
        free(bufs[j]);
    return ret;
}
