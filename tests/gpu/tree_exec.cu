/* tree_exec.cu - the tree executor on GPUs (CUDA backend).
 * Exit 0 pass, 1 fail, 77 skip (no GPU).
 * With >= 2 GPUs: the detected topology, one buffer per GPU, peer copies and
 * (MXNET_ENABLE_GPU_P2P=0 pass) staged copies.  With 1 GPU: 4 buffers on the
 * same device over a full4 topology.  Every root, split and unsplit, int64
 * and float32 (small integers, exact) compared with the direct sum. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gpu/backend/tree_cuda.h"

static int failures = 0;

#define CHECK(c, ...)                                                                              \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static uint64_t rng(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static void run(const tree_set *s, const int *dev, bool p2p, kvs_dtype dtype, uint64_t count,
                uint64_t bound, uint64_t *seed)
{
    int n = s->n;
    size_t es = kvs_dtype_size(dtype);
    tree_backend be;
    tree_opts o;
    char err[256];
    void *d[TREE_MAX_N];
    char *h = (char *)malloc(count * es + 1), *want = (char *)calloc(count + 1, es);
    tree_opts_default(&o);
    o.array_bound = bound;
    if (tree_backend_cuda_new(n, dev, count * es, p2p, &be, err, sizeof err) != 0) {
        CHECK(false, "backend: %s", err);
        return;
    }
    for (int root = 0; root < n; root++) {
        memset(want, 0, count * es);
        for (int g = 0; g < n; g++) {
            for (uint64_t i = 0; i < count; i++) {
                if (dtype == KVS_INT64) {
                    int64_t x = (int64_t)rng(seed);
                    ((int64_t *)h)[i] = x;
                    ((uint64_t *)want)[i] += (uint64_t)x;
                } else {
                    float x = (float)(int)(rng(seed) % 2001) - 1000.0f;
                    ((float *)h)[i] = x;
                    ((float *)want)[i] += x;
                }
            }
            cudaSetDevice(dev[g]);
            CHECK(cudaMalloc(&d[g], count * es + 1) == cudaSuccess, "cudaMalloc");
            cudaMemcpy(d[g], h, count * es, cudaMemcpyHostToDevice);
        }
        CHECK(tree_allreduce(s, &o, &be, d, dtype, count, root) == 0, "allreduce root %d", root);
        for (int g = 0; g < n; g++) {
            cudaSetDevice(dev[g]);
            cudaMemcpy(h, d[g], count * es, cudaMemcpyDeviceToHost);
            CHECK(memcmp(h, want, count * es) == 0,
                  "root %d count %llu bound %llu p2p %d: GPU buffer %d differs", root,
                  (unsigned long long)count, (unsigned long long)bound, p2p, g);
            cudaFree(d[g]);
        }
    }
    tree_backend_cuda_free(&be);
    free(h);
    free(want);
}

int main(void)
{
    int ndev = 0, dev[TREE_MAX_N];
    tree_topo t;
    tree_set s;
    tree_opts o;
    char err[256];
    uint64_t seed = 42;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        printf("tree_exec: no GPU, skipped\n");
        return 77;
    }
    tree_opts_default(&o);
    if (ndev >= 2 && tree_topo_detect(&t, false, NULL, err, sizeof err) == 0 &&
        tree_topo_check_connected(&t, err, sizeof err) == 0) {
        for (int i = 0; i < t.n; i++)
            dev[i] = i;
    } else {
        if (tree_topo_parse("0,2,2,2;2,0,2,2;2,2,0,2;2,2,2,0", "full4", &t, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        for (int i = 0; i < 4; i++)
            dev[i] = 0;
    }
    if (tree_plan(&t, &o, &s, err, sizeof err) != 0) {
        fprintf(stderr, "plan: %s\n", err);
        return 1;
    }
    printf("tree_exec: %d buffers on %d GPUs, %d rounds\n", t.n, ndev, s.rounds);
    for (int p2p = 1; p2p >= 0; p2p--) {
        run(&s, dev, p2p, KVS_INT64, 100003, 1u << 30, &seed); /* one tree */
        run(&s, dev, p2p, KVS_INT64, 100003, 1000, &seed);     /* split over all trees */
        run(&s, dev, p2p, KVS_FLOAT32, 1 << 20, 1000, &seed);
        run(&s, dev, p2p, KVS_FLOAT32, 5, 1, &seed);           /* empty slices */
    }
    tree_set_fini(&s);
    tree_topo_fini(&t);
    printf("tree_exec: %s\n", failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
