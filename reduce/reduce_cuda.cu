// reduce_cuda.cu - device sum kernels for the six dtypes and their host
// wrappers (see reduce_cuda.h).
//
// Two kernels per dtype, both grid-stride loops that sum all k inputs left
// to right per element (accumulating in elem<D>::A) and store once:
//   sum_vec     where dst and every source are 16-byte aligned: each thread
//               loads 16 bytes (uint4: 4 floats, 8 halves, 2 doubles) of
//               every input and stores 16 bytes;
//   sum_kernel  one element per thread: misaligned pointers, and the tail
//               (count mod 16 / element size) after sum_vec.
// The k input pointers travel in the kernel's parameter block
// (RED_CUDA_MAX_INPUTS * 8 bytes), so a launch needs no device memory.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>

#include "reduce/reduce_cuda.h"

namespace {

struct srcs_param {
    const void *p[RED_CUDA_MAX_INPUTS];
};

// Element traits: storage type, accumulator type, conversions.
template <kvs_dtype D> struct elem;
template <> struct elem<KVS_FLOAT32> {
    typedef float T;
    typedef float A;
    static __device__ A load(T x) { return x; }
    static __device__ T store(A x) { return x; }
};
template <> struct elem<KVS_FLOAT64> {
    typedef double T;
    typedef double A;
    static __device__ A load(T x) { return x; }
    static __device__ T store(A x) { return x; }
};
template <> struct elem<KVS_INT32> { // unsigned: sums wrap, no UB
    typedef uint32_t T;
    typedef uint32_t A;
    static __device__ A load(T x) { return x; }
    static __device__ T store(A x) { return x; }
};
template <> struct elem<KVS_INT64> {
    typedef uint64_t T;
    typedef uint64_t A;
    static __device__ A load(T x) { return x; }
    static __device__ T store(A x) { return x; }
};
template <> struct elem<KVS_FLOAT16> {
    typedef __half T;
    typedef float A;
    static __device__ A load(T x) { return __half2float(x); }
    static __device__ T store(A x) { return __float2half_rn(x); }
};
template <> struct elem<KVS_BFLOAT16> {
    typedef __nv_bfloat16 T;
    typedef float A;
    static __device__ A load(T x) { return __bfloat162float(x); }
    static __device__ T store(A x) { return __float2bfloat16_rn(x); }
};

const int THREADS = 256;

template <kvs_dtype D>
__global__ void sum_kernel(typename elem<D>::T *dst, srcs_param s, int k, uint64_t count)
{
    typedef elem<D> E;
    typedef typename E::T T;
    typedef typename E::A A;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
        A acc = E::load(static_cast<const T *>(s.p[0])[i]);
        for (int j = 1; j < k; j++)
            acc += E::load(static_cast<const T *>(s.p[j])[i]);
        dst[i] = E::store(acc);
    }
}

// 16 bytes of T at a time
template <kvs_dtype D>
__global__ void sum_vec(uint4 *dst, srcs_param s, int k, uint64_t nvec)
{
    typedef elem<D> E;
    typedef typename E::T T;
    typedef typename E::A A;
    const int V = sizeof(uint4) / sizeof(T);
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < nvec; i += stride) {
        A acc[V];
        uint4 v = static_cast<const uint4 *>(s.p[0])[i];
        const T *e = reinterpret_cast<const T *>(&v);
#pragma unroll
        for (int x = 0; x < V; x++)
            acc[x] = E::load(e[x]);
        for (int j = 1; j < k; j++) {
            v = static_cast<const uint4 *>(s.p[j])[i];
#pragma unroll
            for (int x = 0; x < V; x++)
                acc[x] += E::load(e[x]);
        }
        uint4 out;
        T *o = reinterpret_cast<T *>(&out);
#pragma unroll
        for (int x = 0; x < V; x++)
            o[x] = E::store(acc[x]);
        dst[i] = out;
    }
}

thread_local char last_err[256];

// bytes per element; the plugin (libkvs_cuda.so) does not link libkvs
size_t elem_size(kvs_dtype d)
{
    static const size_t sz[KVS_NUM_DTYPES] = {4, 8, 2, 2, 4, 8};
    return (unsigned)d < KVS_NUM_DTYPES ? sz[d] : 0;
}

int device_error(cudaError_t e, const char *what)
{
    snprintf(last_err, sizeof(last_err), "%s: %s", what, cudaGetErrorString(e));
    return KVS_EDEVICE;
}

uint64_t blocks_for(uint64_t n, int sms)
{
    // enough blocks to fill every SM several times over; the grid-stride
    // loop covers the rest
    uint64_t want = (n + THREADS - 1) / THREADS;
    return want < (uint64_t)sms * 16 ? want : (uint64_t)sms * 16;
}

bool aligned16(const void *p)
{
    return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

template <kvs_dtype D>
cudaError_t launch(void *dst, const srcs_param &s, int k, uint64_t count, cudaStream_t st,
                   int sms)
{
    typedef typename elem<D>::T T;
    const uint64_t V = sizeof(uint4) / sizeof(T);
    uint64_t nvec = 0;
    bool vec = aligned16(dst);
    for (int j = 0; j < k && vec; j++)
        vec = aligned16(s.p[j]);
    if (vec && (nvec = count / V) > 0) {
        sum_vec<D><<<(unsigned)blocks_for(nvec, sms), THREADS, 0, st>>>(
            static_cast<uint4 *>(dst), s, k, nvec);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess)
            return e;
    }
    uint64_t done = nvec * V, rest = count - done;
    if (rest == 0)
        return cudaSuccess;
    srcs_param t = s;
    for (int j = 0; j < k; j++)
        t.p[j] = static_cast<const T *>(s.p[j]) + done;
    sum_kernel<D><<<(unsigned)blocks_for(rest, sms), THREADS, 0, st>>>(
        static_cast<T *>(dst) + done, t, k, rest);
    return cudaGetLastError();
}

} // namespace

extern "C" int red_cuda_sum(kvs_dtype dtype, void *dst, const void *const *srcs, int k,
                            uint64_t count, void *stream)
{
    srcs_param s;
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    cudaError_t e;
    int dev = 0, sms = 0;
    if ((unsigned)dtype >= KVS_NUM_DTYPES || k < 1 || k > RED_CUDA_MAX_INPUTS || srcs == NULL)
        return KVS_EINVAL;
    if (count == 0)
        return 0;
    if (dst == NULL)
        return KVS_EINVAL;
    for (int j = 0; j < k; j++) {
        if (srcs[j] == NULL)
            return KVS_EINVAL;
        s.p[j] = srcs[j];
    }
    if (k == 1) {
        if (dst == srcs[0])
            return 0;
        e = cudaMemcpyAsync(dst, srcs[0], count * elem_size(dtype),
                            cudaMemcpyDeviceToDevice, st);
        return e == cudaSuccess ? 0 : device_error(e, "cudaMemcpyAsync");
    }
    if ((e = cudaGetDevice(&dev)) != cudaSuccess)
        return device_error(e, "cudaGetDevice");
    if ((e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess)
        return device_error(e, "cudaDeviceGetAttribute");
    switch (dtype) {
    case KVS_FLOAT32:
        e = launch<KVS_FLOAT32>(dst, s, k, count, st, sms);
        break;
    case KVS_FLOAT64:
        e = launch<KVS_FLOAT64>(dst, s, k, count, st, sms);
        break;
    case KVS_FLOAT16:
        e = launch<KVS_FLOAT16>(dst, s, k, count, st, sms);
        break;
    case KVS_BFLOAT16:
        e = launch<KVS_BFLOAT16>(dst, s, k, count, st, sms);
        break;
    case KVS_INT32:
        e = launch<KVS_INT32>(dst, s, k, count, st, sms);
        break;
    case KVS_INT64:
        e = launch<KVS_INT64>(dst, s, k, count, st, sms);
        break;
    }
    return e == cudaSuccess ? 0 : device_error(e, "sum kernel launch");
}

extern "C" int red_cuda_add(kvs_dtype dtype, void *dst, const void *src, uint64_t count,
                            void *stream)
{
    const void *s[2] = {dst, src};
    return red_cuda_sum(dtype, dst, s, 2, count, stream);
}

extern "C" int red_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); // clear the sticky "no device" error
        return 0;
    }
    return n;
}

extern "C" const char *red_cuda_last_error(void)
{
    return last_err;
}
