/* bench_optim.c - `kvs-bench optim`: what a server-side optimizer costs a
 * server per round, next to the sum it does anyway.  For each size and
 * thread count: the time of adding one push into the round buffer
 * (red_add: what every push costs with or without an optimizer) and of one
 * update of each optimizer (what the round's completion adds), through the
 * same reduction pool the server uses.  Both are reported as elements/s and
 * as the update/add time ratio.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvs.h"
#include "optim/optim.h"
#include "reduce/reduce.h"
#include "tools/bench.h"

static const char usage[] =
    "usage: kvs-bench optim [--sizes LIST] [--threads LIST] [--dtype float32|float64]\n"
    "  --sizes    bytes per key part (default 256K,4M,64M)\n"
    "  --threads  reduction threads (default 1,2)\n"
    "Prints, per optimizer: median time of one update, of one push's add, and\n"
    "their ratio (an update reads and writes 2-5 arrays; an add reads 2, writes 1).\n";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct job {
    optim_step step;
    kvs_dtype dt;
    const void *w;
    void *g;
    void *const *st;
    double *norms, ratio; /* lamb */
};

static void run(const void *arg, uint64_t lo, uint64_t hi)
{
    const struct job *j = arg;
    optim_update(&j->step, j->dt, j->w, j->g, j->st, lo, hi);
}

static void lamb1(const void *arg, uint64_t lo, uint64_t hi)
{
    const struct job *j = arg;
    optim_lamb_phase1(&j->step, j->dt, j->w, j->g, j->st, lo, hi, j->norms);
}

static void lamb2(const void *arg, uint64_t lo, uint64_t hi)
{
    const struct job *j = arg;
    optim_lamb_phase2(&j->step, j->ratio, j->dt, j->w, j->g, j->st, lo, hi);
}

/* One update of n elements as the server runs it (lamb: both phases and
 * the trust ratio between, of a key on one server). */
static void update(red_pool *pool, struct job *j, uint64_t n)
{
    if (!optim_two_phase(j->step.o)) {
        red_pool_for(pool, n, 1u << 15, run, j);
        return;
    }
    double sums[2];
    red_pool_for(pool, n, OPTIM_NORM_BLOCK, lamb1, j);
    optim_lamb_sums(j->norms, n, sums);
    j->ratio = optim_lamb_ratio(&j->step, sums[0], sums[1]);
    red_pool_for(pool, n, 1u << 15, lamb2, j);
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int parse_list(const char *v, uint64_t *out, int max, int sizes)
{
    char *dup = strdup(v), *save = NULL, *t;
    int n = 0;
    for (t = strtok_r(dup, ",", &save); t && n < max; t = strtok_r(NULL, ",", &save)) {
        char *end;
        double d = strtod(t, &end);
        uint64_t mul = 1;
        if (sizes && (*end == 'K' || *end == 'k'))
            mul = 1024, end++;
        else if (sizes && (*end == 'M' || *end == 'm'))
            mul = 1 << 20, end++;
        if (end == t || *end || d <= 0) {
            free(dup);
            return -1;
        }
        out[n++] = (uint64_t)(d * (double)mul);
    }
    free(dup);
    return n;
}

int bench_optim_main(int argc, char **argv)
{
    uint64_t sizes[8] = {256 << 10, 4 << 20, 64 << 20}, threads[8] = {1, 2};
    int nsizes = 3, nthreads = 2;
    kvs_dtype dt = KVS_FLOAT32;
    static const char *const specs[] = {
        "sgd learning_rate=0.01", "sgd learning_rate=0.01 momentum=0.9 wd=0.0001",
        "nag learning_rate=0.01 momentum=0.9", "adam learning_rate=0.001 wd=0.0001",
        "adagrad learning_rate=0.01", "rmsprop learning_rate=0.001",
        "rmsprop learning_rate=0.001 centered=1", "adamw learning_rate=0.001 wd=0.01",
        "lamb learning_rate=0.001 wd=0.01"};
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--help")) {
            fputs(usage, stdout);
            return 0;
        } else if (v && !strcmp(argv[i], "--sizes")) {
            nsizes = parse_list(v, sizes, 8, 1);
            i++;
        } else if (v && !strcmp(argv[i], "--threads")) {
            nthreads = parse_list(v, threads, 8, 0);
            i++;
        } else if (v && !strcmp(argv[i], "--dtype") &&
                   (!strcmp(v, "float32") || !strcmp(v, "float64"))) {
            dt = !strcmp(v, "float64") ? KVS_FLOAT64 : KVS_FLOAT32;
            i++;
        } else {
            fprintf(stderr, "kvs-bench optim: bad argument '%s'\n%s", argv[i], usage);
            return 2;
        }
        if (nsizes <= 0 || nthreads <= 0) {
            fprintf(stderr, "kvs-bench optim: bad list '%s'\n", v);
            return 2;
        }
    }
    printf("kvs-bench optim: %s, one key part, median of >= 0.3 s per cell\n"
           "%-9s %-7s %-45s %10s %10s %7s %9s\n", kvs_dtype_name(dt), "size", "threads",
           "optimizer", "update_ms", "add_ms", "ratio", "Gelem/s");
    size_t es = kvs_dtype_size(dt);
    for (int si = 0; si < nsizes; si++) {
        uint64_t n = sizes[si] / es, bytes = n * es;
        uint8_t *w = aligned_alloc(64, bytes), *g = aligned_alloc(64, bytes);
        uint8_t *g0 = aligned_alloc(64, bytes); /* every update gets the same gradient */
        void *st[OPTIM_MAX_STATE];
        for (int j = 0; j < OPTIM_MAX_STATE; j++)
            st[j] = aligned_alloc(64, bytes);
        for (uint64_t i = 0; i < n; i++) {
            if (dt == KVS_FLOAT32)
                ((float *)w)[i] = 1.0f, ((float *)g)[i] = 0.001f * (float)(i % 7);
            else
                ((double *)w)[i] = 1.0, ((double *)g)[i] = 0.001 * (double)(i % 7);
        }
        memcpy(g0, g, bytes);
        for (int ti = 0; ti < nthreads; ti++) {
            red_pool *pool = NULL;
            if (red_pool_new((int)threads[ti], 1, &pool) != 0)
                return 1;
            double t_add[4096], t_upd[4096];
            int k = 0;
            for (double t0 = now_s(); (now_s() - t0 < 0.3 || k < 5) && k < 4096; k++) {
                double a = now_s();
                red_add(pool, dt, g, w, n);
                t_add[k] = now_s() - a;
            }
            qsort(t_add, (size_t)k, sizeof(double), cmpd);
            double add = t_add[k / 2];
            for (size_t oi = 0; oi < sizeof specs / sizeof specs[0]; oi++) {
                optim_spec o;
                char why[256];
                if (optim_parse(specs[oi], &o, why, sizeof why) != 0)
                    return 1;
                double *norms = calloc(2 * (n / OPTIM_NORM_BLOCK + 1), sizeof *norms);
                struct job j = {.dt = dt, .w = w, .g = g, .st = st, .norms = norms};
                int m = 0;
                for (int x = 0; x < OPTIM_MAX_STATE; x++)
                    memset(st[x], 0, bytes);
                for (double t0 = now_s(); (now_s() - t0 < 0.3 || m < 5) && m < 4096; m++) {
                    optim_step_init(&j.step, &o, (uint64_t)m + 1, NULL);
                    memcpy(g, g0, bytes);
                    if (m % 16 == 0) /* long runs of one gradient decay into denormals */
                        for (int x = 0; x < OPTIM_MAX_STATE; x++)
                            memset(st[x], 0, bytes);
                    double a = now_s();
                    update(pool, &j, n);
                    t_upd[m] = now_s() - a;
                }
                free(norms);
                qsort(t_upd, (size_t)m, sizeof(double), cmpd);
                double upd = t_upd[m / 2];
                char sz[32];
                snprintf(sz, sizeof sz, bytes >= (1 << 20) ? "%lluM" : "%lluK",
                         (unsigned long long)(bytes >= (1 << 20) ? bytes >> 20 : bytes >> 10));
                printf("%-9s %-7llu %-45s %10.3f %10.3f %7.2f %9.3f\n", sz,
                       (unsigned long long)threads[ti], specs[oi], upd * 1e3, add * 1e3,
                       upd / add, (double)n / upd / 1e9);
                fflush(stdout);
            }
            red_pool_free(pool);
        }
        free(w);
        free(g);
        free(g0);
        for (int j = 0; j < OPTIM_MAX_STATE; j++)
            free(st[j]);
    }
    return 0;
}
