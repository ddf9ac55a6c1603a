/* bench_codec.c - `kvs-bench codec`: gradient compression's CPU cost
 * (reduce/codec.h) on one core: encode (with error feedback) and decode of a
 * float32 array per codec, in GB/s of float32 input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "reduce/codec.h"
#include "tools/bench.h"

static double now(void)
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

int bench_codec_main(int argc, char **argv)
{
    static const char *const specs[] = {"2bit threshold=0.5", "1bit", "topk ratio=0.01",
                                        "fp16"};
    uint64_t n = 16u << 20; /* 64 MiB of float32 */
    int iters = 7;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--elements") && i + 1 < argc) {
            n = strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--iters") && i + 1 < argc) {
            iters = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: kvs-bench codec [--elements N] [--iters N]\n"
                            "  encode (with its residual) and decode of N float32 values on "
                            "one core, per codec: median GB/s of float32 input\n");
            return strcmp(argv[i], "--help") ? 2 : 0;
        }
    }
    if (n == 0 || iters < 1 || iters > 1000)
        return 2;
    float *g = malloc(n * 4), *res = calloc(n, 4), *dec = malloc(n * 4), *scr = malloc(n * 4);
    uint8_t *body = malloc(8 * n + 16);
    double *te = malloc((size_t)iters * sizeof *te), *td = malloc((size_t)iters * sizeof *td);
    if (!g || !res || !dec || !scr || !body || !te || !td) {
        fprintf(stderr, "kvs-bench codec: out of memory\n");
        return 1;
    }
    uint64_t x = 1;
    for (uint64_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        g[i] = (float)((double)(x >> 40) / 16777216.0 - 0.5);
    }
    memset(dec, 0, n * 4);
    printf("%-20s %10s %12s %12s %12s %8s\n", "codec", "elements", "encode_GB/s", "decode_GB/s",
           "both_GB/s", "ratio");
    for (size_t c = 0; c < sizeof specs / sizeof specs[0]; c++) {
        red_codec cd;
        char why[256];
        float p;
        red_codec_parse(specs[c], &cd, why, sizeof why);
        uint64_t len = red_codec_bytes(&cd, n);
        for (int it = 0; it < iters; it++) {
            double t0 = now();
            red_codec_encode(&cd, g, res, n, body, scr);
            double t1 = now();
            if (red_codec_decode(cd.id, body, len, dec, n, &p, why, sizeof why) != 0) {
                fprintf(stderr, "kvs-bench codec: %s: %s\n", specs[c], why);
                return 1;
            }
            double t2 = now();
            te[it] = t1 - t0;
            td[it] = t2 - t1;
        }
        qsort(te, (size_t)iters, sizeof *te, cmp);
        qsort(td, (size_t)iters, sizeof *td, cmp);
        double e = te[iters / 2], d = td[iters / 2], gb = (double)n * 4 / 1e9;
        printf("%-20s %10llu %12.2f %12.2f %12.2f %7.1fx\n", specs[c], (unsigned long long)n,
               gb / e, gb / d, gb / (e + d), (double)n * 4 / (double)len);
    }
    free(g);
    free(res);
    free(dec);
    free(scr);
    free(body);
    free(te);
    free(td);
    return 0;
}
