// reduce_sum.cu - GPU test of reduce/reduce_cuda.cu: every dtype, 1..8
// inputs, awkward lengths, aliasing, on a stream; the result must be
// bit-identical to the CPU engine (same left-to-right order; half types
// round once).  Then prints the bandwidth of a 4-input float32 and float16
// sum of 64 MiB arrays.  Exit 0 pass, 1 fail, 77 skip (no GPU).
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reduce/reduce.h"
#include "reduce/reduce_cuda.h"

#define CK(x)                                                                        \
    do {                                                                             \
        cudaError_t e_ = (x);                                                        \
        if (e_ != cudaSuccess) {                                                     \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,              \
                    cudaGetErrorString(e_));                                         \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

// random finite values of the dtype (half types: exponent kept small)
static void fill(kvs_dtype t, void *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rnd();
        double v = ((double)(r >> 11) / 9007199254740992.0 - 0.5) * 100.0;
        switch (t) {
        case KVS_FLOAT32: ((float *)p)[i] = (float)v; break;
        case KVS_FLOAT64: ((double *)p)[i] = v; break;
        case KVS_FLOAT16: ((uint16_t *)p)[i] = (uint16_t)((r & 0x83ff) | (((r >> 16) % 24 + 3) << 10)); break;
        case KVS_BFLOAT16: ((uint16_t *)p)[i] = (uint16_t)((r & 0x807f) | (((r >> 16) % 60 + 100) << 7)); break;
        case KVS_INT32: ((uint32_t *)p)[i] = (uint32_t)r; break;
        case KVS_INT64: ((uint64_t *)p)[i] = r; break;
        }
    }
}

static const char *const names[] = {"float32", "float64", "float16", "bfloat16", "int32", "int64"};

static int one_case(kvs_dtype t, int k, size_t n, int alias, cudaStream_t st)
{
    size_t es = kvs_dtype_size(t), nb = n * es + 1;
    void *h[8], *dv[8], *dd, *want = malloc(nb), *got = malloc(nb);
    const void *hs[8], *ds[8];
    int bad = 0, rc;
    for (int j = 0; j < k; j++) {
        h[j] = malloc(nb);
        fill(t, h[j], n);
        CK(cudaMalloc(&dv[j], nb));
        CK(cudaMemcpy(dv[j], h[j], n * es, cudaMemcpyHostToDevice));
        hs[j] = h[j];
        ds[j] = dv[j];
    }
    CK(cudaMalloc(&dd, nb));
    if (red_sum(NULL, t, want, hs, k, n) != 0)
        return 1;
    void *out = alias ? dv[0] : dd;
    rc = red_cuda_sum(t, out, ds, k, n, st);
    if (rc != 0) {
        fprintf(stderr, "red_cuda_sum: %d %s\n", rc, red_cuda_last_error());
        return 1;
    }
    CK(cudaStreamSynchronize(st));
    CK(cudaMemcpy(got, out, n * es, cudaMemcpyDeviceToHost));
    if (memcmp(got, want, n * es) != 0) {
        fprintf(stderr, "FAIL %s k=%d n=%zu alias=%d\n", names[t], k, n, alias);
        bad = 1;
    }
    for (int j = 0; j < k; j++) {
        free(h[j]);
        CK(cudaFree(dv[j]));
    }
    CK(cudaFree(dd));
    free(want);
    free(got);
    return bad;
}

static void bandwidth(kvs_dtype t, cudaStream_t st)
{
    size_t bytes = 64u << 20, n = bytes / kvs_dtype_size(t);
    void *d[5];
    cudaEvent_t a, b;
    float ms = 0, best = 1e30f;
    for (int j = 0; j < 5; j++) {
        CK(cudaMalloc(&d[j], bytes));
        CK(cudaMemset(d[j], 0x31, bytes));
    }
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    const void *s[4] = {d[0], d[1], d[2], d[3]};
    for (int r = 0; r < 20; r++) {
        CK(cudaEventRecord(a, st));
        red_cuda_sum(t, d[4], s, 4, n, st);
        CK(cudaEventRecord(b, st));
        CK(cudaEventSynchronize(b));
        CK(cudaEventElapsedTime(&ms, a, b));
        if (ms < best)
            best = ms;
    }
    float cms = 1e30f;
    for (int r = 0; r < 20; r++) {
        CK(cudaEventRecord(a, st));
        CK(cudaMemcpyAsync(d[4], d[0], bytes, cudaMemcpyDeviceToDevice, st));
        CK(cudaEventRecord(b, st));
        CK(cudaEventSynchronize(b));
        CK(cudaEventElapsedTime(&ms, a, b));
        if (ms < cms)
            cms = ms;
    }
    printf("bandwidth %-8s 4 inputs 64 MiB: sum %.1f GB/s (5*bytes/t), memcpy %.1f GB/s (2*bytes/t)\n",
           names[t], 5.0 * bytes / (best * 1e-3) / 1e9, 2.0 * bytes / (cms * 1e-3) / 1e9);
    for (int j = 0; j < 5; j++)
        CK(cudaFree(d[j]));
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
}

int main(void)
{
    static const size_t lens[] = {0, 1, 7, 4095, 4097, (1u << 20) + 3};
    cudaStream_t st;
    int fails = 0, cases = 0;
    if (red_cuda_device_count() < 1) {
        printf("reduce_sum: no GPU, skipped\n");
        return 77;
    }
    CK(cudaStreamCreate(&st));
    for (int t = 0; t < KVS_NUM_DTYPES; t++)
        for (int k = 1; k <= 8; k++)
            for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++)
                for (int alias = 0; alias < 2; alias++) {
                    fails += one_case((kvs_dtype)t, k, lens[li], alias, st);
                    cases++;
                }
    // bad arguments
    const void *none[1] = {NULL};
    if (red_cuda_sum(KVS_FLOAT32, NULL, none, 1, 10, st) != KVS_EINVAL ||
        red_cuda_sum((kvs_dtype)9, NULL, none, 1, 10, st) != KVS_EINVAL ||
        red_cuda_sum(KVS_FLOAT32, NULL, none, RED_CUDA_MAX_INPUTS + 1, 10, st) != KVS_EINVAL) {
        fprintf(stderr, "FAIL argument checks\n");
        fails++;
    }
    printf("reduce_sum: %d cases, %d failed\n", cases, fails);
    bandwidth(KVS_FLOAT32, st);
    bandwidth(KVS_FLOAT16, st);
    CK(cudaStreamDestroy(st));
    return fails ? 1 : 0;
}
