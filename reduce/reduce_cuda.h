/* reduce_cuda.h - the reduction engine on NVIDIA GPUs (built only where nvcc
 * is found: build/libkvs_cuda.a, compiled with -DKVS_HAVE_CUDA).
 *
 * Same contract as red_sum/red_add in reduce.h, on device memory: half types
 * sum in float32 and round to nearest-even once; integers wrap; additions run
 * left to right per element, so results are bit-identical to the CPU engine.
 *
 * Threads and streams: every function may be called from any thread.  Work is
 * enqueued on `stream` (a cudaStream_t; NULL = the legacy default stream) of
 * the current device, and the call returns after the launch, before the sum
 * is done: synchronise the stream before reading dst on the host.  All
 * pointers must be device memory usable from the current device (its own, or
 * a peer's with peer access enabled, or managed memory).
 */
#ifndef KVS_REDUCE_CUDA_H
#define KVS_REDUCE_CUDA_H

#include <stdint.h>

#include "kvs.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most inputs of one red_cuda_sum call. */
#define RED_CUDA_MAX_INPUTS 64

/* dst = srcs[0] + ... + srcs[k-1] over count elements (1 <= k <=
 * RED_CUDA_MAX_INPUTS; k == 1 is a device copy).  srcs is a host array of
 * device pointers, read during the call only.  dst may alias srcs[0].
 * Returns 0, KVS_EINVAL (dtype, k, NULL) or KVS_EDEVICE (the launch failed;
 * red_cuda_last_error() says why). */
int red_cuda_sum(kvs_dtype dtype, void *dst, const void *const *srcs, int k, uint64_t count,
                 void *stream);

/* dst += src on the device.  Same returns. */
int red_cuda_add(kvs_dtype dtype, void *dst, const void *src, uint64_t count, void *stream);

/* Number of usable GPUs; 0 when there is no GPU or no driver. */
int red_cuda_device_count(void);

/* The CUDA error text of this thread's last KVS_EDEVICE ("" if none). */
const char *red_cuda_last_error(void);

#ifdef __cplusplus
}
#endif

#endif
