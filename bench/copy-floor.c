/* copy-floor.c - the memory floor of a same-host pushpull with direct
 * copies: the copies and sums a W x S pushpull of one SIZE float32 key must
 * do, done in one process with plain loops, with the threads kvsd's servers
 * would use, timed.
 *
 *   copy-floor [-w W] [-s S] [-t T] [-i ITERS] [SIZE_MIB]
 *      (default 1 worker, 1 server, T = min(4, CPUs) as kvsd's
 *       MXNET_KVSTORE_REDUCTION_NTHREADS default, 20 rounds, 64 MiB)
 *
 * The arrays: W workers' inputs and W workers' outputs of SIZE bytes each,
 * and a store of SIZE bytes cut into S parts (one per server; the key is
 * split over the servers as a big array is).  A round is what a server must
 * do for its part, for every part at once (S x T threads, the servers run
 * side by side as processes do):
 *   - copy worker 0's part into the store            (read P, write P)
 *   - add workers 1..W-1's parts into it             (read 2P, write P each)
 *   - copy the store's part into every worker's out  (read P, write P each)
 * Nothing kvsd does less than this on this layout: the server must hold the
 * value it answers with, and every worker must receive it.  All arrays are
 * touched before the first round (no page faults), and each round starts
 * with every thread released at once from a barrier.
 *
 * Prints, e.g.
 *   copy-floor: 1x1 64 MiB, 2 threads per server: median 7.9 ms (p10 7.6, p90 8.4);
 *     memcpy 64 MiB with 2 threads 3.9 ms (34.5 GB/s)
 * The memcpy figure (one copy of SIZE, every thread on a share) is for
 * reference: the floor of any single copy on this machine. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct job {
    int W;
    float **in, **out, *store;
    size_t lo, hi; /* this thread's elements */
    int copy_only;  /* memcpy reference: in[0] -> store only */
} job;

static pthread_barrier_t start_bar, end_bar;
static int rounds_left;

static void round_work(const job *j)
{
    size_t n = j->hi - j->lo;
    float *st = j->store + j->lo;
    memcpy(st, j->in[0] + j->lo, n * sizeof *st);
    if (j->copy_only)
        return;
    for (int w = 1; w < j->W; w++) {
        const float *x = j->in[w] + j->lo;
        for (size_t i = 0; i < n; i++)
            st[i] += x[i];
    }
    for (int w = 0; w < j->W; w++)
        memcpy(j->out[w] + j->lo, st, n * sizeof *st);
}

static void *thread_main(void *arg)
{
    const job *j = arg;
    for (;;) {
        pthread_barrier_wait(&start_bar);
        if (rounds_left <= 0)
            return NULL;
        round_work(j);
        pthread_barrier_wait(&end_bar);
    }
}

/* Run iters rounds over nthreads jobs; median/p10/p90 in ms. */
static void timed(job *jobs, int nthreads, int iters, double *med, double *p10, double *p90)
{
    pthread_t *tid = calloc((size_t)nthreads, sizeof *tid);
    double *t = calloc((size_t)iters, sizeof *t);
    if (!tid || !t) {
        fprintf(stderr, "copy-floor: out of memory\n");
        exit(1);
    }
    pthread_barrier_init(&start_bar, NULL, (unsigned)nthreads + 1);
    pthread_barrier_init(&end_bar, NULL, (unsigned)nthreads + 1);
    rounds_left = iters + 2; /* two warm-up rounds */
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&tid[i], NULL, thread_main, &jobs[i]) != 0) {
            fprintf(stderr, "copy-floor: pthread_create failed\n");
            exit(1);
        }
    for (int r = -2; r < iters; r++) {
        double t0 = now_s();
        pthread_barrier_wait(&start_bar);
        pthread_barrier_wait(&end_bar);
        if (r >= 0)
            t[r] = (now_s() - t0) * 1e3;
        rounds_left--;
    }
    rounds_left = 0;
    pthread_barrier_wait(&start_bar);
    for (int i = 0; i < nthreads; i++)
        pthread_join(tid[i], NULL);
    pthread_barrier_destroy(&start_bar);
    pthread_barrier_destroy(&end_bar);
    qsort(t, (size_t)iters, sizeof *t, cmp);
    *med = t[iters / 2];
    *p10 = t[iters / 10];
    *p90 = t[(iters * 9) / 10];
    free(t);
    free(tid);
}

static float *new_array(size_t n, float v)
{
    float *a = aligned_alloc(64, (n * sizeof *a + 63) & ~(size_t)63);
    if (a == NULL) {
        fprintf(stderr, "copy-floor: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        a[i] = v + (float)(i % 7);
    return a;
}

int main(int argc, char **argv)
{
    int W = 1, S = 1, T = 0, iters = 20, opt;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    while ((opt = getopt(argc, argv, "w:s:t:i:")) != -1) {
        int v = atoi(optarg);
        if (v < 1 || v > 1024) {
            fprintf(stderr, "copy-floor: -%c %s: expected 1 to 1024\n", opt, optarg);
            return 2;
        }
        if (opt == 'w') W = v;
        else if (opt == 's') S = v;
        else if (opt == 't') T = v;
        else if (opt == 'i') iters = v;
        else {
            fprintf(stderr, "usage: copy-floor [-w W] [-s S] [-t T] [-i ITERS] [SIZE_MIB]\n");
            return 2;
        }
    }
    long mib = optind < argc ? atol(argv[optind]) : 64;
    if (mib < 1 || mib > 65536) {
        fprintf(stderr, "copy-floor: SIZE_MIB %s: expected 1 to 65536\n", argv[optind]);
        return 2;
    }
    if (T == 0) /* kvsd's default: MXNET_KVSTORE_REDUCTION_NTHREADS=4, capped at the CPUs */
        T = cpus > 0 && cpus < 4 ? (int)cpus : 4;
    size_t n = (size_t)mib << 18; /* float32 elements */
    float **in = calloc((size_t)W, sizeof *in), **out = calloc((size_t)W, sizeof *out);
    if (!in || !out)
        return 1;
    for (int w = 0; w < W; w++) {
        in[w] = new_array(n, (float)w);
        out[w] = new_array(n, 0);
    }
    float *store = new_array(n, 0);
    int nthreads = S * T;
    job *jobs = calloc((size_t)nthreads, sizeof *jobs);
    if (!jobs)
        return 1;
    /* server s's part: kvsd's split of a big array (round(n/S*(s+1)) ...),
     * then each server's part over its T threads */
    for (int s = 0; s < S; s++) {
        size_t plo = (size_t)((double)n / S * s + 0.5), phi = (size_t)((double)n / S * (s + 1) + 0.5);
        for (int k = 0; k < T; k++) {
            job *j = &jobs[s * T + k];
            *j = (job){W, in, out, store, plo + (phi - plo) * (size_t)k / (size_t)T,
                       plo + (phi - plo) * (size_t)(k + 1) / (size_t)T, 0};
        }
    }
    double med, p10, p90, cmed, c10, c90;
    timed(jobs, nthreads, iters, &med, &p10, &p90);
    /* check the sums: out[w][i] = sum over workers of (w + i % 7) */
    for (int w = 0; w < W; w++)
        for (size_t i = 0; i < n; i += 4099) {
            float want = (float)(W * (W - 1) / 2) + (float)W * (float)(i % 7);
            if (out[w][i] != want) {
                fprintf(stderr, "copy-floor: worker %d element %zu: %g, expected %g\n", w, i,
                        (double)out[w][i], (double)want);
                return 1;
            }
        }
    /* the reference: one memcpy of the whole array, T threads */
    for (int k = 0; k < T; k++)
        jobs[k] = (job){1, in, out, store, n * (size_t)k / (size_t)T,
                        n * (size_t)(k + 1) / (size_t)T, 1};
    timed(jobs, T, iters, &cmed, &c10, &c90);
    printf("copy-floor: %dx%d %ld MiB, %d threads per server: median %.2f ms (p10 %.2f, p90 %.2f); "
           "memcpy %ld MiB with %d threads %.2f ms (%.1f GB/s)\n",
           W, S, mib, T, med, p10, p90, mib, T, cmed, (double)n * 4 / (cmed / 1e3) / 1e9);
    return 0;
}
