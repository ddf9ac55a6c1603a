/* tree_cuda.cu - the CUDA backend of the tree executor (tests/gpu).
 *
 * Buffer i lives on CUDA device devices[i].  A copy or reduce step runs on
 * the stream of the receiving GPU: peer copies (cudaMemcpyPeerAsync) where
 * MXNET_ENABLE_GPU_P2P allows and cudaDeviceCanAccessPeer says yes, else
 * staged through pinned host memory.  A reduce first lands the sender's
 * slice in a scratch buffer on the receiver, then a sum kernel adds it.
 * stage_end synchronises every stream, so steps of one stage overlap and
 * stages are ordered.  Threads: one backend is used by one thread at a time. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reduce/reduce_cuda.h"
#include "tests/gpu/backend/tree_cuda.h"

namespace {

const uint64_t ALIGN = 256;

struct cuda_be {
    int n;
    int dev[TREE_MAX_N];
    bool peer[TREE_MAX_N][TREE_MAX_N];
    cudaStream_t stream[TREE_MAX_N];
    char *scratch[TREE_MAX_N]; /* device memory on dev[i], cap bytes */
    char *host[TREE_MAX_N];    /* pinned staging for sender i, cap bytes */
    uint64_t cap, used_scratch[TREE_MAX_N], used_host[TREE_MAX_N];
};

/* The sum kernel is reduce/'s (same rounding and order as the CPU engine). */
int launch_add(cudaStream_t s, kvs_dtype dtype, void *dst, const void *src, uint64_t count)
{
    return red_cuda_add(dtype, dst, src, count, (void *)s);
}

char *bump(char *base, uint64_t *used, uint64_t cap, uint64_t bytes)
{
    uint64_t off = (*used + ALIGN - 1) / ALIGN * ALIGN;
    if (off + bytes > cap)
        return NULL;
    *used = off + bytes;
    return base + off;
}

/* Move bytes from src (on GPU s) to dst (on GPU d), ordered on d's stream. */
int move(cuda_be *b, int d, void *dst, int s, const void *src, uint64_t bytes)
{
    cudaError_t e;
    if (b->dev[d] == b->dev[s]) {
        cudaSetDevice(b->dev[d]);
        e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, b->stream[d]);
    } else if (b->peer[s][d]) {
        cudaSetDevice(b->dev[d]);
        e = cudaMemcpyPeerAsync(dst, b->dev[d], src, b->dev[s], bytes, b->stream[d]);
    } else {
        char *h = bump(b->host[s], &b->used_host[s], b->cap, bytes);
        if (h == NULL)
            return KVS_ETOOBIG;
        cudaSetDevice(b->dev[s]);
        e = cudaMemcpyAsync(h, src, bytes, cudaMemcpyDeviceToHost, b->stream[s]);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(b->stream[s]);
        if (e == cudaSuccess) {
            cudaSetDevice(b->dev[d]);
            e = cudaMemcpyAsync(dst, h, bytes, cudaMemcpyHostToDevice, b->stream[d]);
        }
    }
    return e == cudaSuccess ? 0 : KVS_EDEVICE;
}

int be_copy(void *ctx, int dst, void *dstp, int src, const void *srcp, uint64_t bytes)
{
    return move((cuda_be *)ctx, dst, dstp, src, srcp, bytes);
}

int be_reduce(void *ctx, int dst, void *dstp, int src, const void *srcp, kvs_dtype dtype,
              uint64_t count)
{
    cuda_be *b = (cuda_be *)ctx;
    uint64_t bytes = count * kvs_dtype_size(dtype);
    char *tmp = bump(b->scratch[dst], &b->used_scratch[dst], b->cap, bytes);
    int rc;
    if (tmp == NULL)
        return KVS_ETOOBIG;
    if ((rc = move(b, dst, tmp, src, srcp, bytes)) != 0)
        return rc;
    cudaSetDevice(b->dev[dst]);
    return launch_add(b->stream[dst], dtype, dstp, tmp, count);
}

int be_stage_end(void *ctx)
{
    cuda_be *b = (cuda_be *)ctx;
    int rc = 0;
    for (int i = 0; i < b->n; i++) {
        cudaSetDevice(b->dev[i]);
        if (cudaStreamSynchronize(b->stream[i]) != cudaSuccess)
            rc = KVS_EDEVICE;
        b->used_scratch[i] = b->used_host[i] = 0;
    }
    return rc;
}

void be_destroy(cuda_be *b)
{
    for (int i = 0; i < b->n; i++) {
        cudaSetDevice(b->dev[i]);
        if (b->stream[i])
            cudaStreamDestroy(b->stream[i]);
        if (b->scratch[i])
            cudaFree(b->scratch[i]);
        if (b->host[i])
            cudaFreeHost(b->host[i]);
    }
    free(b);
}

} // namespace

extern "C" int tree_backend_cuda_new(int n, const int *devices, uint64_t bytes, bool p2p,
                                     tree_backend *out, char *err, size_t errlen)
{
    int ndev = 0;
    cuda_be *b;
    cudaError_t e;
    memset(out, 0, sizeof *out);
    if (n < 1 || n > TREE_MAX_N) {
        snprintf(err, errlen, "%d buffers, allowed 1..%d", n, TREE_MAX_N);
        return KVS_EINVAL;
    }
    if ((e = cudaGetDeviceCount(&ndev)) != cudaSuccess || ndev < 1) {
        snprintf(err, errlen, "no GPU found (%s)", cudaGetErrorString(e));
        return KVS_EDEVICE;
    }
    b = (cuda_be *)calloc(1, sizeof *b);
    if (b == NULL) {
        snprintf(err, errlen, "out of memory");
        return KVS_ENOMEM;
    }
    b->n = n;
    /* room for a whole array plus alignment of up to n slices per stage */
    b->cap = bytes + (uint64_t)n * ALIGN + ALIGN;
    for (int i = 0; i < n; i++) {
        if (devices[i] < 0 || devices[i] >= ndev) {
            snprintf(err, errlen, "buffer %d on device %d, but %d GPUs are present", i,
                     devices[i], ndev);
            be_destroy(b);
            return KVS_EINVAL;
        }
        b->dev[i] = devices[i];
    }
    for (int i = 0; i < n; i++) {
        cudaSetDevice(b->dev[i]);
        if ((e = cudaStreamCreateWithFlags(&b->stream[i], cudaStreamNonBlocking)) != cudaSuccess ||
            (e = cudaMalloc((void **)&b->scratch[i], b->cap)) != cudaSuccess ||
            (e = cudaMallocHost((void **)&b->host[i], b->cap)) != cudaSuccess) {
            snprintf(err, errlen, "GPU %d: %s", b->dev[i], cudaGetErrorString(e));
            b->n = i + 1;
            be_destroy(b);
            return KVS_EDEVICE;
        }
        for (int j = 0; j < n; j++) {
            int can = 0;
            if (!p2p || b->dev[i] == b->dev[j])
                continue;
            if (cudaDeviceCanAccessPeer(&can, b->dev[j], b->dev[i]) != cudaSuccess || !can)
                continue;
            /* j reads from i: enable on j's context for peer i */
            cudaSetDevice(b->dev[j]);
            e = cudaDeviceEnablePeerAccess(b->dev[i], 0);
            if (e == cudaSuccess || e == cudaErrorPeerAccessAlreadyEnabled)
                b->peer[i][j] = true;
            cudaGetLastError(); /* clear "already enabled" */
            cudaSetDevice(b->dev[i]);
        }
    }
    out->ctx = b;
    out->copy = be_copy;
    out->reduce = be_reduce;
    out->stage_end = be_stage_end;
    return 0;
}

extern "C" void tree_backend_cuda_free(tree_backend *be)
{
    if (be == NULL || be->ctx == NULL)
        return;
    be_destroy((cuda_be *)be->ctx);
    be->ctx = NULL;
}
