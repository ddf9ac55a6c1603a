/* reduce.h - the reduction engine: sums of arrays of any kvs_dtype.
 *
 * Used by the server (summing pushes into a round buffer) and the worker
 * (summing local buffers of one key).  Half types (float16, bfloat16) are
 * summed in float32 and rounded to nearest-even once at the end; integer sums
 * wrap as two's complement.
 *
 * The pool of threads that large sums are split over, and the choice of CPU
 * kernels: red_pool.h (included here).
 *
 * Threads: red_sum/red_add may be called from any thread; calls on one pool
 * are serialised internally (a second caller waits).  Arrays with count <
 * big_bound run on the calling thread only.  pool may be NULL: then
 * everything runs on the calling thread.
 */
#ifndef KVS_REDUCE_H
#define KVS_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "kvs.h"
#include "reduce/red_pool.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dst = srcs[0] + ... + srcs[k-1] over count elements of dtype (k >= 1;
 * k == 1 is a copy).  dst may alias srcs[0] exactly; no other overlap.
 * Any alignment.  Returns 0 or KVS_EINVAL (bad dtype, k < 1, NULL; dst and
 * srcs[j] may be NULL when count is 0, srcs itself may not). */
int red_sum(red_pool *p, kvs_dtype dtype, void *dst, const void *const *srcs, int k,
            uint64_t count);

/* dst += src over count elements.  Returns 0 or KVS_EINVAL. */
int red_add(red_pool *p, kvs_dtype dtype, void *dst, const void *src, uint64_t count);

/* Convert n half values (dtype KVS_FLOAT16 or KVS_BFLOAT16) to float32
 * exactly, or float32 to half rounding to nearest-even: the conversions
 * every half-type sum uses.  The half side may have any alignment (a wire
 * body).  Other dtypes: nothing happens. */
void red_to_f32(kvs_dtype dtype, float *dst, const void *src, uint64_t n);
void red_from_f32(kvs_dtype dtype, void *dst, const float *src, uint64_t n);

#ifdef __cplusplus
}
#endif

#endif
