/* gpucheck.c - the device layer's checks for tests/gpu/run.sh, on the CUDA
 * devices, or on simulated ones where KVS_SIM_DEVICES is set (run.sh --sim:
 * the same logic, host memory and CPU sums, small sizes).  Links libkvs's
 * objects (no nvcc needed): every copy and sum goes through device/ as the
 * library's own do.
 *
 *   kvs-gpucheck count     the devices the backend sees (the CUDA runtime's
 *                          count, after CUDA_VISIBLE_DEVICES), one number
 *   kvs-gpucheck kernels   sum kernels per dtype and K against device-to-device
 *                          copy bandwidth; every sum checked bit for bit
 *                          against the CPU engine
 *   kvs-gpucheck copies    pinned and pageable host<->device bandwidth, and
 *                          staging through the store's pinned pool
 *   kvs-gpucheck big       a float16 sum of 2^31 + 3 elements, checked whole
 *   kvs-gpucheck edge      misaligned pointers, tails, NaN and Inf
 *   kvs-gpucheck paths     peer and staged copies (with the staging events)
 *                          between two kvsd devices; on one GPU both are
 *                          GPU 0 (KVS_DEVICES=0,0)
 *
 * Each prints a table to stdout and ends with one summary line; exit 0
 * pass, 1 fail, 77 skip (no device). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device/dev.h"
#include "kvs.h"
#include "reduce/reduce.h"
#include "worker/pinned.h"

static bool sim;
static size_t MiB = 1u << 20;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

#define OK(call)                                                                         \
    do {                                                                                 \
        int rc_ = (call);                                                                \
        if (rc_ != 0) {                                                                  \
            printf("FAIL %s: %s (%s)\n", #call, kvs_last_error(), kvs_errname(rc_));    \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

/* The layer over the selected devices (ndev 0: every device); NULL and exit
 * 77 when there is none. */
static dev_layer *open_layer(bool p2p, int ndev, const int *sel)
{
    const char *s = getenv("KVS_SIM_DEVICES");
    dev_opts o = {.sim_devices = s ? atoi(s) : 0, .p2p = p2p, .ndevices = ndev, .devices = sel};
    dev_layer *L = NULL;
    sim = o.sim_devices > 0;
    if (dev_open(&o, &L) != 0) {
        printf("SKIP %s\n", kvs_last_error());
        exit(77);
    }
    return L;
}

/* small integers, exact in every dtype and in every partial sum */
static void fill(kvs_dtype t, void *p, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++) {
        int v = (int)((i * 2654435761u + (unsigned)seed * 40503u) >> 7) % 17 - 8;
        switch (t) {
        case KVS_FLOAT32: ((float *)p)[i] = (float)v; break;
        case KVS_FLOAT64: ((double *)p)[i] = v; break;
        case KVS_INT32: ((int32_t *)p)[i] = v; break;
        case KVS_INT64: ((int64_t *)p)[i] = v; break;
        case KVS_FLOAT16: { /* small integers: exact halves */
            float f = (float)v;
            uint32_t b;
            memcpy(&b, &f, 4);
            uint16_t h = (uint16_t)(((b >> 16) & 0x8000) |
                                    (v ? (((b >> 23) & 0xff) - 112) << 10 | ((b >> 13) & 0x3ff)
                                       : 0));
            ((uint16_t *)p)[i] = h;
            break;
        }
        case KVS_BFLOAT16: {
            float f = (float)v;
            uint32_t b;
            memcpy(&b, &f, 4);
            ((uint16_t *)p)[i] = (uint16_t)(b >> 16);
            break;
        }
        }
    }
}

static const char *const dtname[] = {"float32", "float64", "float16", "bfloat16", "int32",
                                     "int64"};

/* ---------------------------------------------------------------- kernels */

static int kernels(void)
{
    dev_layer *L = open_layer(false, 0, NULL);
    size_t bytes = (sim ? 8 : 256) * MiB;
    int iters = sim ? 2 : 10, ks[] = {2, 4, 8}, bad = 0;
    double rmin = 1e9, rmax = 0;
    char wmin[64] = "", wmax[64] = "";
    void *in[8], *dst, *h = malloc(bytes), *want = malloc(bytes), *hin[8];
    for (int j = 0; j < 8; j++) {
        OK(dev_alloc(L, 0, bytes, &in[j]));
        hin[j] = malloc(bytes);
    }
    OK(dev_alloc(L, 0, bytes, &dst));
    /* copy bandwidth: read + write of bytes (after one untimed copy) */
    OK(dev_copy(L, 0, dst, 0, in[0], bytes));
    OK(dev_sync(L, 0));
    double t0 = now();
    for (int i = 0; i < iters; i++)
        OK(dev_copy(L, 0, dst, 0, in[0], bytes));
    OK(dev_sync(L, 0));
    double copy_gbs = 2.0 * (double)bytes * iters / (now() - t0) / 1e9;
    printf("%-9s %2s %10s %10s %7s  %s\n", "dtype", "K", "sum GB/s", "copy GB/s", "ratio",
           "check");
    for (int t = 0; t < KVS_NUM_DTYPES; t++) {
        size_t n = bytes / kvs_dtype_size((kvs_dtype)t);
        for (int j = 0; j < 8; j++) {
            fill((kvs_dtype)t, hin[j], n, j + 10 * t);
            OK(dev_copy(L, 0, in[j], DEV_HOST, hin[j], bytes));
        }
        OK(dev_sync(L, 0));
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            int k = ks[ki];
            OK(dev_sum(L, 0, (kvs_dtype)t, dst, (const void *const *)in, k, n));
            OK(dev_copy(L, DEV_HOST, h, 0, dst, bytes));
            OK(dev_sync(L, 0));
            OK(red_sum(NULL, (kvs_dtype)t, want, (const void *const *)hin, k, n));
            bool same = memcmp(h, want, bytes) == 0;
            bad += !same;
            t0 = now();
            for (int i = 0; i < iters; i++)
                OK(dev_sum(L, 0, (kvs_dtype)t, dst, (const void *const *)in, k, n));
            OK(dev_sync(L, 0));
            double gbs = (double)(k + 1) * (double)bytes * iters / (now() - t0) / 1e9;
            double r = gbs / copy_gbs;
            printf("%-9s %2d %10.1f %10.1f %7.2f  %s\n", dtname[t], k, gbs, copy_gbs, r,
                   same ? "exact" : "WRONG");
            if (r < rmin)
                snprintf(wmin, sizeof wmin, "%s K=%d", dtname[t], k), rmin = r;
            if (r > rmax)
                snprintf(wmax, sizeof wmax, "%s K=%d", dtname[t], k), rmax = r;
        }
    }
    printf("%s %d sums of %zu MiB %s; sum/copy bandwidth %.2f (%s) .. %.2f (%s), copy %.1f "
           "GB/s\n", bad ? "FAIL" : "PASS", KVS_NUM_DTYPES * 3, bytes / MiB,
           bad ? "NOT all exact" : "all exact", rmin, wmin, rmax, wmax, copy_gbs);
    for (int j = 0; j < 8; j++) {
        dev_free(L, 0, in[j]);
        free(hin[j]);
    }
    dev_free(L, 0, dst);
    free(h);
    free(want);
    dev_close(L);
    return bad ? 1 : 0;
}

/* ----------------------------------------------------------------- copies */

static double timed_copy(dev_layer *L, int dd, void *d, int sd, const void *s, size_t bytes,
                         int iters)
{
    double t0 = now();
    for (int i = 0; i < iters; i++)
        OK(dev_copy(L, dd, d, sd, s, bytes));
    OK(dev_sync(L, -1));
    return (double)bytes * iters / (now() - t0) / 1e9;
}

static int copies(void)
{
    dev_layer *L = open_layer(false, 0, NULL);
    size_t bytes = (sim ? 16 : 256) * MiB;
    int iters = sim ? 3 : 10, bad = 0;
    void *d, *pin;
    char *page = malloc(bytes);
    OK(dev_use(L, 0));
    OK(dev_alloc(L, 0, bytes, &d));
    OK(dev_alloc(L, DEV_HOST, bytes, &pin));
    memset(page, 1, bytes);
    memset(pin, 2, bytes);
    double h2d_pin = timed_copy(L, 0, d, DEV_HOST, pin, bytes, iters);
    double d2h_pin = timed_copy(L, DEV_HOST, pin, 0, d, bytes, iters);
    double h2d_page = timed_copy(L, 0, d, DEV_HOST, page, bytes, iters);
    double d2h_page = timed_copy(L, DEV_HOST, page, 0, d, bytes, iters);
    double peak = h2d_pin > d2h_pin ? h2d_pin : d2h_pin;
    /* staging through the pool, as a store stages a key part each round */
    wrk_pinned *pool = wrk_pinned_new(L);
    uint64_t pb, nb;
    double t0 = now(), first = 0;
    for (int i = 0; i <= iters; i++) {
        void *h;
        OK(wrk_pinned_get(pool, bytes, &h));
        OK(dev_copy(L, DEV_HOST, h, 0, d, bytes));
        OK(dev_sync(L, 0));
        bad += ((unsigned char *)h)[bytes - 1] != 1; /* the pageable upload's bytes */
        wrk_pinned_put(pool, h);
        if (i == 0) {
            first = now() - t0;
            t0 = now();
        }
    }
    double pool_gbs = (double)bytes * iters / (now() - t0) / 1e9;
    wrk_pinned_size(pool, &pb, &nb);
    bad += nb != 1;
    printf("%-26s %8s %s\n", "copy (MiB)", "GB/s", "of the link's peak");
    printf("%-26s %8.1f %5.2f\n", "host->device pinned", h2d_pin, h2d_pin / peak);
    printf("%-26s %8.1f %5.2f\n", "device->host pinned", d2h_pin, d2h_pin / peak);
    printf("%-26s %8.1f %5.2f\n", "host->device pageable", h2d_page, h2d_page / peak);
    printf("%-26s %8.1f %5.2f\n", "device->host pageable", d2h_page, d2h_page / peak);
    printf("%-26s %8.1f %5.2f  (first round, pinning included: %.1f ms)\n",
           "device->host, pool staging", pool_gbs, pool_gbs / peak, first * 1e3);
    printf("%s link peak %.1f GB/s (pinned); pageable %.2f / %.2f of it; pool staging %.2f of "
           "it, %llu buffer%s reused over %d rounds\n", bad ? "FAIL" : "PASS", peak,
           h2d_page / peak, d2h_page / peak, pool_gbs / peak, (unsigned long long)nb,
           nb == 1 ? "" : "s", iters + 1);
    wrk_pinned_free(pool);
    dev_free(L, 0, d);
    dev_free(L, DEV_HOST, pin);
    free(page);
    dev_close(L);
    return bad ? 1 : 0;
}

/* -------------------------------------------------------------------- big */

static int big(void)
{
    dev_layer *L = open_layer(false, 0, NULL);
    uint64_t n = sim ? (1ull << 22) + 3 : (1ull << 31) + 3;
    size_t bytes = n * 2, chunk = 64 * MiB, bad = 0;
    void *a, *b, *c, *h;
    OK(dev_alloc(L, 0, bytes, &a));
    OK(dev_alloc(L, 0, bytes, &b));
    OK(dev_alloc(L, 0, bytes, &c));
    OK(dev_alloc(L, DEV_HOST, chunk, &h));
    uint16_t *p = h;
    for (int which = 0; which < 2; which++) { /* a = 1.0, b = 2.0 */
        for (size_t i = 0; i < chunk / 2; i++)
            p[i] = which ? 0x4000 : 0x3C00;
        for (size_t off = 0; off < bytes; off += chunk) {
            size_t len = bytes - off < chunk ? bytes - off : chunk;
            OK(dev_copy(L, 0, (char *)(which ? b : a) + off, DEV_HOST, h, len));
            OK(dev_sync(L, 0));
        }
    }
    const void *two[2] = {a, b};
    double t0 = now();
    OK(dev_sum(L, 0, KVS_FLOAT16, c, two, 2, n));
    OK(dev_sync(L, 0));
    double t = now() - t0;
    for (size_t off = 0; off < bytes; off += chunk) { /* every element is 3.0 */
        size_t len = bytes - off < chunk ? bytes - off : chunk;
        OK(dev_copy(L, DEV_HOST, h, 0, (char *)c + off, len));
        OK(dev_sync(L, 0));
        for (size_t i = 0; i < len / 2; i++)
            bad += p[i] != 0x4200;
    }
    printf("%s float16 sum of %llu elements (%s2^31) in %.1f ms, %.1f GB/s; %zu wrong\n",
           bad ? "FAIL" : "PASS", (unsigned long long)n, n > (1ull << 31) ? "> " : "< ",
           t * 1e3, 3.0 * (double)bytes / t / 1e9, bad);
    dev_free(L, 0, a);
    dev_free(L, 0, b);
    dev_free(L, 0, c);
    dev_free(L, DEV_HOST, h);
    dev_close(L);
    return bad ? 1 : 0;
}

/* ------------------------------------------------------------------- edge */

static bool same_value(kvs_dtype t, const void *x, const void *y, size_t i)
{
    size_t es = kvs_dtype_size(t);
    if (memcmp((const char *)x + i * es, (const char *)y + i * es, es) == 0)
        return true;
    /* NaN payloads may differ: both NaN is the same value */
    switch (t) {
    case KVS_FLOAT32: return isnan(((const float *)x)[i]) && isnan(((const float *)y)[i]);
    case KVS_FLOAT64: return isnan(((const double *)x)[i]) && isnan(((const double *)y)[i]);
    case KVS_FLOAT16: {
        uint16_t a = ((const uint16_t *)x)[i], b = ((const uint16_t *)y)[i];
        return (a & 0x7c00) == 0x7c00 && (a & 0x3ff) && (b & 0x7c00) == 0x7c00 && (b & 0x3ff);
    }
    case KVS_BFLOAT16: {
        uint16_t a = ((const uint16_t *)x)[i], b = ((const uint16_t *)y)[i];
        return (a & 0x7f80) == 0x7f80 && (a & 0x7f) && (b & 0x7f80) == 0x7f80 && (b & 0x7f);
    }
    default: return false;
    }
}

/* special values at some positions: NaN, +Inf, -Inf, the largest finite */
static void specials(kvs_dtype t, void *p, size_t n, int j)
{
    static const uint16_t h16[] = {0x7e00, 0x7c00, 0xfc00, 0x7bff};
    static const uint16_t b16[] = {0x7fc0, 0x7f80, 0xff80, 0x7f7f};
    for (size_t i = (size_t)j; i < n; i += 97) {
        int w = (int)((i / 97 + (size_t)j) % 4);
        switch (t) {
        case KVS_FLOAT32: ((float *)p)[i] = w == 0 ? NAN : w == 1 ? INFINITY
                                            : w == 2 ? -INFINITY : 3.4e38f; break;
        case KVS_FLOAT64: ((double *)p)[i] = w == 0 ? NAN : w == 1 ? INFINITY
                                             : w == 2 ? -INFINITY : 1.7e308; break;
        case KVS_FLOAT16: ((uint16_t *)p)[i] = h16[w]; break;
        case KVS_BFLOAT16: ((uint16_t *)p)[i] = b16[w]; break;
        default: break;
        }
    }
}

static int edge(void)
{
    dev_layer *L = open_layer(false, 0, NULL);
    /* (dst, src0, src1, src2) offsets in elements, and counts: aligned with
     * a tail, every pointer misaligned, one misaligned */
    static const int offs[][4] = {{0, 0, 0, 0}, {1, 3, 2, 1}, {0, 0, 1, 0}};
    static const uint64_t counts[] = {1000003, 4099, 5};
    int cases = 0, bad = 0;
    for (int t = 0; t < KVS_NUM_DTYPES; t++) {
        size_t es = kvs_dtype_size((kvs_dtype)t);
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
            for (size_t o = 0; o < sizeof offs / sizeof offs[0]; o++) {
                uint64_t n = counts[c];
                size_t bytes = (n + 8) * es;
                void *d[4], *h[4], *want = malloc(bytes), *got = malloc(bytes);
                const void *src[3], *hsrc[3];
                for (int j = 0; j < 4; j++) {
                    OK(dev_alloc(L, 0, bytes, &d[j]));
                    h[j] = calloc(1, bytes);
                    if (j > 0) {
                        fill((kvs_dtype)t, (char *)h[j] + (size_t)offs[o][j] * es, n, j);
                        specials((kvs_dtype)t, (char *)h[j] + (size_t)offs[o][j] * es, n, j);
                        OK(dev_copy(L, 0, d[j], DEV_HOST, h[j], bytes));
                        src[j - 1] = (char *)d[j] + (size_t)offs[o][j] * es;
                        hsrc[j - 1] = (char *)h[j] + (size_t)offs[o][j] * es;
                    }
                }
                void *dd = (char *)d[0] + (size_t)offs[o][0] * es;
                OK(dev_sum(L, 0, (kvs_dtype)t, dd, src, 3, n));
                OK(dev_copy(L, DEV_HOST, got, 0, dd, n * es));
                OK(dev_sync(L, 0));
                OK(red_sum(NULL, (kvs_dtype)t, want, hsrc, 3, n));
                size_t wrong = 0;
                for (uint64_t i = 0; i < n; i++)
                    wrong += !same_value((kvs_dtype)t, got, want, i);
                cases++;
                if (wrong) {
                    bad++;
                    printf("WRONG %s, %llu elements, offsets %d,%d,%d,%d: %zu elements differ\n",
                           dtname[t], (unsigned long long)n, offs[o][0], offs[o][1],
                           offs[o][2], offs[o][3], wrong);
                }
                for (int j = 0; j < 4; j++) {
                    dev_free(L, 0, d[j]);
                    free(h[j]);
                }
                free(want);
                free(got);
            }
    }
    printf("%s %d sums (6 dtypes; vector path with tails, misaligned pointers; NaN, +-Inf, "
           "overflow to Inf) equal to the CPU engine; %d differ\n", bad ? "FAIL" : "PASS",
           cases, bad);
    dev_close(L);
    return bad ? 1 : 0;
}

/* ------------------------------------------------------------------ paths */

static int paths(void)
{
    /* two kvsd devices: GPU 0 twice where there is one GPU, else GPUs 0, 1 */
    int sel[2] = {0, 0}, ndev = 0, bad = 0;
    dev_layer *probe = open_layer(false, 0, NULL);
    bool two = dev_count(probe) >= 2;
    dev_close(probe);
    if (two)
        sel[1] = 1;
    size_t bytes = 2 * DEV_STAGE_CHUNK + 4 * 777;
    unsigned char *h = malloc(bytes), *back = malloc(bytes);
    for (size_t i = 0; i < bytes; i++)
        h[i] = (unsigned char)(i * 31 + 7);
    char line[2][160];
    for (int p2p = 1; p2p >= 0; p2p--) {
        dev_layer *L = open_layer(p2p, 2, sel);
        void *a, *b;
        kvs_device_stats st;
        OK(dev_alloc(L, 0, bytes, &a));
        OK(dev_alloc(L, 1, bytes, &b));
        OK(dev_copy(L, 0, a, DEV_HOST, h, bytes));
        for (int r = 0; r < 3; r++) { /* there and back, three times */
            OK(dev_copy(L, 1, b, 0, a, bytes));
            OK(dev_zero(L, 0, a, bytes));
            OK(dev_copy(L, 0, a, 1, b, bytes));
        }
        OK(dev_copy(L, DEV_HOST, back, 0, a, bytes));
        OK(dev_sync(L, -1));
        dev_stats(L, &st);
        bool same = memcmp(h, back, bytes) == 0;
        bool want = p2p ? st.peer_copies == 6 && st.staged_copies == 0
                        : st.staged_copies == 6 && st.peer_copies == 0;
        /* on two real GPUs without peer access the staged path is right */
        if (p2p && !sim && two && !dev_peer(L, 1, 0))
            want = st.staged_copies == 6;
        bad += !same || !want;
        snprintf(line[p2p], sizeof line[p2p], "P2P %s: %llu peer, %llu staged copies, bytes %s",
                 p2p ? "on" : "off", (unsigned long long)st.peer_copies,
                 (unsigned long long)st.staged_copies, same ? "equal" : "DIFFER");
        printf("%s\n", line[p2p]);
        dev_free(L, 0, a);
        dev_free(L, 1, b);
        dev_close(L);
        ndev = two ? 2 : 1;
    }
    printf("%s peer and staged paths (events guarding the staging buffers) between kvsd "
           "devices on %s: %s; %s\n", bad ? "FAIL" : "PASS",
           sim ? "2 simulated devices" : ndev == 2 ? "GPUs 0 and 1" : "GPU 0 twice (KVS_DEVICES=0,0)",
           line[1], line[0]);
    free(h);
    free(back);
    return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: kvs-gpucheck count|kernels|copies|big|edge|paths\n");
        return 2;
    }
    if (strcmp(argv[1], "count") == 0) {
        dev_layer *L = NULL;
        const char *s = getenv("KVS_SIM_DEVICES");
        dev_opts o = {.sim_devices = s ? atoi(s) : 0};
        printf("%d\n", dev_open(&o, &L) == 0 ? dev_count(L) : 0);
        dev_close(L);
        return 0;
    }
    if (strcmp(argv[1], "kernels") == 0)
        return kernels();
    if (strcmp(argv[1], "copies") == 0)
        return copies();
    if (strcmp(argv[1], "big") == 0)
        return big();
    if (strcmp(argv[1], "edge") == 0)
        return edge();
    if (strcmp(argv[1], "paths") == 0)
        return paths();
    fprintf(stderr, "kvs-gpucheck: unknown check '%s'\n", argv[1]);
    return 2;
}
