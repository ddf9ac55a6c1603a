/* bench_mixed.c - `kvs-bench mixed`: how long a small key's pushpull takes
 * while big keys' rounds keep the servers busy summing.
 *
 * dist_sync (default): every worker runs the big key's pushpull rounds on a
 * thread of its own and, at the same time, the small key's pushpulls one
 * after another; dist_async: worker 0 runs only the big rounds and worker 1
 * only the small pushpulls (so the small key never waits for another
 * worker).  The small worker times every pushpull that began and ended while
 * the big rounds were running and prints p50, p99 and the maximum, next to
 * the same pushpulls with no big rounds (the baseline, measured first).
 * Every small result is checked (dist_sync: the sum of the workers' pushes).
 *
 *   deploy/kvs-launch -n 2 -s 1 -- build/kvs-bench mixed --big 64M --small 4K
 */
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvs.h"
#include "tools/bench.h"

static const char usage[] =
    "usage: kvs-bench mixed [--big BYTES] [--small BYTES] [--big-rounds N] [--small-ops N]\n"
    "                       [--type dist_sync|dist_async]\n"
    "  --big         bytes of the big key (default 64M)\n"
    "  --small       bytes of the small key (default 4K)\n"
    "  --big-rounds  big pushpull rounds (default 40)\n"
    "  --small-ops   small pushpulls, baseline and under load each (default 2000)\n"
    "  --type        dist_sync (every worker both keys) or dist_async (worker 0 big,\n"
    "                worker 1 small; needs 2 workers)\n";

#define KEY_BIG 1
#define KEY_SMALL 2

typedef struct mixed {
    kvs_store *s;
    kvs_array big;
    int rounds;
    atomic_int running; /* the big rounds are going on */
    int err;
} mixed;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmpu(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int parse_bytes(const char *v, uint64_t *out)
{
    char *end;
    double d = strtod(v, &end);
    uint64_t mul = 1;
    if (*end == 'K' || *end == 'k')
        mul = 1024, end++;
    else if (*end == 'M' || *end == 'm')
        mul = 1 << 20, end++;
    else if (*end == 'G' || *end == 'g')
        mul = 1 << 30, end++;
    if (end == v || *end || d < 4)
        return -1;
    *out = (uint64_t)(d * (double)mul) / 4 * 4;
    return 0;
}

static void *big_main(void *arg)
{
    mixed *m = arg;
    uint64_t key = KEY_BIG;
    for (int r = 0; r < m->rounds && m->err == 0; r++) {
        int rc = kvs_pushpull(m->s, 1, &key, &m->big, &m->big, 0);
        if (rc == 0)
            rc = kvs_wait(m->s, key);
        if (rc != 0)
            m->err = rc;
    }
    atomic_store(&m->running, 0);
    return NULL;
}

/* n small pushpulls; the latencies of those inside the big rounds (all of
 * them when under_load is false) go to lat.  Returns how many, or < 0. */
static long small_ops(kvs_store *s, int n, float *v, uint64_t count, float want, bool check,
                      const mixed *m, bool under_load, uint64_t *lat)
{
    uint64_t key = KEY_SMALL;
    kvs_array a = {v, count, KVS_FLOAT32, -1};
    long k = 0;
    for (int i = 0; i < n; i++) {
        for (uint64_t j = 0; j < count; j++)
            v[j] = 1.0f;
        bool in0 = under_load && atomic_load(&m->running);
        uint64_t t0 = now_ns();
        int rc = kvs_pushpull(s, 1, &key, &a, &a, 1);
        if (rc == 0)
            rc = kvs_wait(s, key);
        uint64_t t1 = now_ns();
        if (rc != 0) {
            fprintf(stderr, "kvs-bench mixed: small pushpull: %s: %s\n", kvs_errname(rc),
                    kvs_last_error());
            return -1;
        }
        for (uint64_t j = 0; check && j < count; j++)
            if (v[j] != want) {
                fprintf(stderr, "kvs-bench mixed: small key element %llu is %g, expected %g\n",
                        (unsigned long long)j, (double)v[j], (double)want);
                return -1;
            }
        if (!under_load || (in0 && atomic_load(&m->running)))
            lat[k++] = t1 - t0;
    }
    return k;
}

static void report(const char *what, uint64_t *lat, long n)
{
    if (n <= 0) {
        printf("%-26s %8s\n", what, "no samples");
        return;
    }
    qsort(lat, (size_t)n, sizeof *lat, cmpu);
    printf("%-26s %8ld %9.3f %9.3f %9.3f\n", what, n, (double)lat[n / 2] / 1e6,
           (double)lat[(n * 99) / 100] / 1e6, (double)lat[n - 1] / 1e6);
    fflush(stdout);
}

int bench_mixed_main(int argc, char **argv)
{
    uint64_t big = 64u << 20, small = 4096;
    int rounds = 40, ops = 2000, ch, rc;
    const char *type = "dist_sync";
    static const struct option longopts[] = {
        {"big", required_argument, NULL, 'b'},        {"small", required_argument, NULL, 's'},
        {"big-rounds", required_argument, NULL, 'r'}, {"small-ops", required_argument, NULL, 'o'},
        {"type", required_argument, NULL, 't'},       {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    optind = 1;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'b':
        case 's':
            if (parse_bytes(optarg, ch == 'b' ? &big : &small) != 0) {
                fprintf(stderr, "kvs-bench mixed: --%s '%s': expected bytes (K/M/G)\n",
                        ch == 'b' ? "big" : "small", optarg);
                return 2;
            }
            break;
        case 'r':
        case 'o': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || v < 1 || v > 10000000) {
                fprintf(stderr, "kvs-bench mixed: bad count '%s'\n", optarg);
                return 2;
            }
            *(ch == 'r' ? &rounds : &ops) = (int)v;
            break;
        }
        case 't':
            if (strcmp(optarg, "dist_sync") && strcmp(optarg, "dist_async")) {
                fprintf(stderr, "kvs-bench mixed: --type '%s': dist_sync or dist_async\n",
                        optarg);
                return 2;
            }
            type = optarg;
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            fputs(usage, stderr);
            return 2;
        }
    }
    bool async = !strcmp(type, "dist_async");
    mixed m = {.rounds = rounds};
    if ((rc = kvs_create(type, &m.s)) != 0) {
        fprintf(stderr, "kvs-bench mixed: kvs_create(%s): %s: %s\n", type, kvs_errname(rc),
                kvs_last_error());
        return 1;
    }
    int rank = kvs_rank(m.s), W = kvs_num_workers(m.s);
    if (async && W < 2) {
        fprintf(stderr, "kvs-bench mixed: --type dist_async needs 2 workers\n");
        kvs_close(m.s);
        return 2;
    }
    bool do_big = !async || rank == 0, do_small = !async || rank == 1;
    uint64_t nbig = big / 4, nsmall = small / 4;
    float *bv = aligned_alloc(64, nbig * 4), *sv = aligned_alloc(64, nsmall * 4);
    uint64_t *lat = malloc(sizeof *lat * (size_t)ops);
    if (bv == NULL || sv == NULL || lat == NULL) {
        fprintf(stderr, "kvs-bench mixed: out of memory\n");
        return 1;
    }
    for (uint64_t i = 0; i < nbig; i++)
        bv[i] = 1.0f;
    for (uint64_t i = 0; i < nsmall; i++)
        sv[i] = 1.0f;
    m.big = (kvs_array){bv, nbig, KVS_FLOAT32, -1};
    uint64_t keys[2] = {KEY_BIG, KEY_SMALL};
    kvs_array vals[2] = {m.big, {sv, nsmall, KVS_FLOAT32, -1}};
    if ((rc = kvs_init(m.s, 2, keys, vals)) != 0 || (rc = kvs_barrier(m.s)) != 0) {
        fprintf(stderr, "kvs-bench mixed: init: %s: %s\n", kvs_errname(rc), kvs_last_error());
        return 1;
    }
    if (rank == (async ? 1 : 0))
        printf("kvs-bench mixed: %s, %d workers, %d servers; small %llu B pushpulls while "
               "%s %llu B pushpull rounds run\n%-26s %8s %9s %9s %9s\n", type, W,
               kvs_num_servers(m.s), (unsigned long long)small,
               async ? "worker 0 runs" : "every worker runs", (unsigned long long)big,
               "", "samples", "p50_ms", "p99_ms", "max_ms");
    long n = 0;
    if (do_small) { /* the baseline: nothing else running */
        n = small_ops(m.s, ops, sv, nsmall, (float)W, !async, &m, false, lat);
        if (n < 0)
            return 1;
        if (rank == (async ? 1 : 0))
            report("alone", lat, n);
    }
    if ((rc = kvs_barrier(m.s)) != 0)
        return 1;
    pthread_t t;
    atomic_store(&m.running, 1);
    uint64_t t0 = now_ns();
    if (do_big && pthread_create(&t, NULL, big_main, &m) != 0)
        return 1;
    if (do_small) {
        n = small_ops(m.s, ops, sv, nsmall, (float)W, !async, &m, true, lat);
        if (n < 0)
            return 1;
    }
    if (do_big)
        pthread_join(t, NULL);
    double secs = (double)(now_ns() - t0) / 1e9;
    if (m.err) {
        fprintf(stderr, "kvs-bench mixed: big pushpull: %s: %s\n", kvs_errname(m.err),
                kvs_last_error());
        return 1;
    }
    if (do_small && rank == (async ? 1 : 0))
        report("during big rounds", lat, n);
    if (rank == 0)
        printf("big rounds: %d in %.2f s (%.1f ms each, small ops alongside)\n", rounds, secs,
               secs * 1e3 / rounds);
    rc = kvs_barrier(m.s);
    kvs_close(m.s);
    free(bv);
    free(sv);
    free(lat);
    return rc == 0 ? 0 : 1;
}
