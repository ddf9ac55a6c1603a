/* reduce.h - the reduction engine: sums of arrays of any kvs_dtype.
 *
 * Used by the server (summing pushes into a round buffer) and the worker
 * (summing local buffers of one key).  Half types (float16, bfloat16) are
 * summed in float32 and rounded to nearest-even once at the end; integer sums
 * wrap as two's complement.
 *
 * Threads: a red_pool owns nthreads-1 helper threads (the calling thread is
 * the last worker).  red_sum/red_add may be called from any thread; calls on
 * one pool are serialised internally (a second caller waits).  Arrays with
 * count < big_bound run on the calling thread only.  pool may be NULL: then
 * everything runs on the calling thread.
 */
#ifndef KVS_REDUCE_H
#define KVS_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "kvs.h"

typedef struct red_pool red_pool;

/* New pool with nthreads >= 1 threads in all (MXNET_KVSTORE_REDUCTION_NTHREADS)
 * that splits arrays of at least big_bound elements (MXNET_KVSTORE_BIGARRAY_BOUND).
 * Returns 0 and *out, or KVS_ENOMEM / KVS_EINVAL. */
int red_pool_new(int nthreads, uint64_t big_bound, red_pool **out);

/* Stops and joins the threads.  red_pool_free(NULL) is a no-op. */
void red_pool_free(red_pool *p);

/* dst = srcs[0] + ... + srcs[k-1] over count elements of dtype (k >= 1;
 * k == 1 is a copy).  dst may alias srcs[0] exactly; no other overlap.
 * Any alignment.  Returns 0 or KVS_EINVAL (bad dtype, k < 1, NULL). */
int red_sum(red_pool *p, kvs_dtype dtype, void *dst, const void *const *srcs, int k,
            uint64_t count);

/* dst += src over count elements.  Returns 0 or KVS_EINVAL. */
int red_add(red_pool *p, kvs_dtype dtype, void *dst, const void *src, uint64_t count);

#endif
