/* bench_rsp.c - `kvs-bench rowsparse`: an embedding table as a row-sparse key.
 *
 * Every worker initialises a float32 table of --rows x --cols as one
 * row-sparse key (rank 0's zeros), then runs --steps steps: it draws --touch
 * distinct random rows (its own seed per worker and step), pushes their
 * gradients (kvs_push_rsp) and pulls the same rows back (kvs_row_sparse_pull)
 * and waits: the step of a training loop with an embedding.  It prints the
 * step time (p50, mean, max), and with --dense N the time of N dense rounds
 * (kvs_pushpull of the whole table as a dense key) for comparison.  Run the
 * two in separate jobs to see the server's memory of each alone
 * (bench/row-sparse.sh does).
 *
 *   deploy/kvs-launch -n 2 -s 1 -- build/kvs-bench rowsparse --rows 10M --cols 64 \
 *       --touch 10000 --steps 50
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvs.h"
#include "tools/bench.h"

static const char usage[] =
    "usage: kvs-bench rowsparse [--rows N] [--cols D] [--touch K] [--steps N] [--dense N]\n"
    "                           [--optimizer SPEC]\n"
    "  --rows       rows of the table (default 10M; K/M/G suffixes)\n"
    "  --cols       float32 elements per row (default 64)\n"
    "  --touch      distinct rows each worker touches per step (default 10000)\n"
    "  --steps      row-sparse steps: push the touched rows, pull them back (default 50)\n"
    "  --dense      dense rounds of the whole table to compare with (default 0: none)\n"
    "  --optimizer  a server optimizer spec (kvs_set_optimizer): lazy updates\n";

#define KEY_RSP 1
#define KEY_DENSE 2

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

static int parse_count(const char *v, uint64_t *out)
{
    char *end;
    unsigned long long n = strtoull(v, &end, 10);
    if (end == v)
        return -1;
    if (*end == 'K' || *end == 'k')
        n <<= 10, end++;
    else if (*end == 'M' || *end == 'm')
        n *= 1000000ull, end++;
    else if (*end == 'G' || *end == 'g')
        n *= 1000000000ull, end++;
    if (*end != '\0' || n == 0)
        return -1;
    *out = n;
    return 0;
}

static uint64_t rng(uint64_t *s)
{
    uint64_t x = (*s += 0x9E3779B97F4A7C15ull);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* k distinct random rows of n into ids (set: room for a power of two >= 2k). */
static void draw(uint64_t *seed, uint64_t n, uint64_t k, int64_t *ids, uint64_t *set,
                 uint64_t hcap)
{
    memset(set, 0, hcap * sizeof *set);
    for (uint64_t i = 0; i < k;) {
        uint64_t r = rng(seed) % n, h = (r * 0x9E3779B97F4A7C15ull) & (hcap - 1);
        while (set[h] && set[h] != r + 1)
            h = (h + 1) & (hcap - 1);
        if (set[h])
            continue;
        set[h] = r + 1;
        ids[i++] = (int64_t)r;
    }
}

/* p50: the lower median (of 2 samples, the smaller) */
static void stats(const char *what, uint64_t *t, int n, double bytes)
{
    if (n == 0)
        return;
    qsort(t, (size_t)n, sizeof *t, cmpu);
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += (double)t[i];
    printf("%s: %d, p50 %.3f ms, mean %.3f ms, max %.3f ms, %.1f MB moved by this worker "
           "each\n", what, n, (double)t[(n - 1) / 2] / 1e6, sum / n / 1e6, (double)t[n - 1] / 1e6,
           bytes / 1e6);
}

int bench_rsp_main(int argc, char **argv)
{
    uint64_t rows = 10000000, cols = 64, touch = 10000, steps = 50, dense = 0;
    const char *spec = NULL;
    static const struct option opts[] = {
        {"rows", required_argument, NULL, 'r'},  {"cols", required_argument, NULL, 'c'},
        {"touch", required_argument, NULL, 't'}, {"steps", required_argument, NULL, 's'},
        {"dense", required_argument, NULL, 'd'}, {"optimizer", required_argument, NULL, 'O'},
        {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0}};
    int c, rc, ret = 1;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        uint64_t *dst = c == 'r' ? &rows : c == 'c' ? &cols : c == 't' ? &touch
                      : c == 's' ? &steps : c == 'd' ? &dense : NULL;
        if (c == 'O') {
            spec = optarg;
        } else if (c == 'h') {
            fputs(usage, stdout);
            return 0;
        } else if (dst == NULL) {
            fputs(usage, stderr);
            return 2;
        } else if ((c == 's' || c == 'd') && strcmp(optarg, "0") == 0) {
            *dst = 0; /* no steps, or no dense rounds */
        } else if (parse_count(optarg, dst) != 0) {
            fprintf(stderr, "kvs-bench rowsparse: --%s '%s': expected a positive count\n%s",
                    c == 'r' ? "rows" : c == 'c' ? "cols" : c == 't' ? "touch"
                    : c == 's' ? "steps" : "dense", optarg, usage);
            return 2;
        }
    }
    if (touch > rows) {
        fprintf(stderr, "kvs-bench rowsparse: --touch %llu > --rows %llu\n",
                (unsigned long long)touch, (unsigned long long)rows);
        return 2;
    }
    kvs_store *s = NULL;
    if ((rc = kvs_create("dist_sync", &s)) != 0) {
        fprintf(stderr, "kvs-bench rowsparse: kvs_create: %s: %s\n", kvs_errname(rc),
                kvs_last_error());
        return 1;
    }
    int rank = kvs_rank(s);
    uint64_t count = rows * cols, hcap = 1;
    while (hcap < 2 * touch)
        hcap *= 2;
    float *grad = malloc(touch * cols * sizeof *grad), *got = malloc(touch * cols * sizeof *got);
    int64_t *ids = malloc(touch * sizeof *ids);
    uint64_t *set = malloc(hcap * sizeof *set), *t = malloc((steps + dense + 1) * sizeof *t);
    float *table = NULL;
    if (!grad || !got || !ids || !set || !t) {
        fprintf(stderr, "kvs-bench rowsparse: out of memory\n");
        goto out;
    }
    for (uint64_t i = 0; i < touch * cols; i++)
        grad[i] = (float)(i % 7) * 0.125f;
    if (steps > 0) {
        /* zeros: rank 0's pages are mapped as the init reads them */
        if (rank == 0 && (table = calloc(count, sizeof *table)) == NULL) {
            fprintf(stderr, "kvs-bench rowsparse: no memory for the table\n");
            goto out;
        }
        uint64_t key = KEY_RSP;
        kvs_array init = {table, count, KVS_FLOAT32, KVS_CPU};
        uint64_t t0 = now_ns();
        if ((rc = kvs_init_row_sparse(s, 1, &key, &init, &cols)) != 0) {
            fprintf(stderr, "kvs-bench rowsparse: init: %s: %s\n", kvs_errname(rc),
                    kvs_last_error());
            goto out;
        }
        free(table);
        table = NULL;
        if (rank == 0)
            printf("table: %llu x %llu float32 (%.1f MB), init %.2f s\n",
                   (unsigned long long)rows, (unsigned long long)cols, (double)count * 4 / 1e6,
                   (double)(now_ns() - t0) / 1e9);
        if (spec && (rc = kvs_set_optimizer(s, spec)) != 0) {
            fprintf(stderr, "kvs-bench rowsparse: optimizer: %s: %s\n", kvs_errname(rc),
                    kvs_last_error());
            goto out;
        }
        kvs_barrier(s);
        uint64_t seed = 1234567 + (uint64_t)rank * 7919;
        for (uint64_t st = 0; st < steps; st++) {
            draw(&seed, rows, touch, ids, set, hcap);
            kvs_rsp p = {ids, touch, {grad, touch * cols, KVS_FLOAT32, KVS_CPU}};
            kvs_array o = {got, touch * cols, KVS_FLOAT32, KVS_CPU};
            uint64_t a = now_ns();
            if ((rc = kvs_push_rsp(s, 1, &key, &p, 0)) != 0 ||
                (rc = kvs_row_sparse_pull(s, key, ids, touch, &o)) != 0 ||
                (rc = kvs_wait(s, key)) != 0) {
                fprintf(stderr, "kvs-bench rowsparse: step %llu: %s: %s\n",
                        (unsigned long long)st, kvs_errname(rc), kvs_last_error());
                goto out;
            }
            t[st] = now_ns() - a;
        }
        char what[160];
        snprintf(what, sizeof what, "worker %d: row-sparse steps (push %llu rows + pull them)",
                 rank, (unsigned long long)touch);
        stats(what, t, (int)steps, 2.0 * (double)touch * (double)(cols * 4 + 8));
    }
    if (dense > 0) {
        if ((table = calloc(count, sizeof *table)) == NULL) {
            fprintf(stderr, "kvs-bench rowsparse: no memory for the dense table\n");
            goto out;
        }
        uint64_t key = KEY_DENSE;
        kvs_array a = {table, count, KVS_FLOAT32, KVS_CPU};
        if ((rc = kvs_init(s, 1, &key, &a)) != 0) {
            fprintf(stderr, "kvs-bench rowsparse: dense init: %s: %s\n", kvs_errname(rc),
                    kvs_last_error());
            goto out;
        }
        kvs_barrier(s);
        for (uint64_t r = 0; r < dense; r++) {
            uint64_t b = now_ns();
            if ((rc = kvs_pushpull(s, 1, &key, &a, &a, 0)) != 0 ||
                (rc = kvs_wait(s, key)) != 0) {
                fprintf(stderr, "kvs-bench rowsparse: dense round: %s: %s\n", kvs_errname(rc),
                        kvs_last_error());
                goto out;
            }
            t[r] = now_ns() - b;
        }
        char what[160];
        snprintf(what, sizeof what, "worker %d: dense rounds (pushpull of the whole table)",
                 rank);
        stats(what, t, (int)dense, 2.0 * (double)count * 4);
    }
    ret = 0;
out:
    rc = kvs_close(s);
    free(table);
    free(grad);
    free(got);
    free(ids);
    free(set);
    free(t);
    return ret ? ret : (rc != 0);
}
