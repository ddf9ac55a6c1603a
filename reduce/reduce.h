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

#ifdef __cplusplus
extern "C" {
#endif

typedef struct red_pool red_pool;

/* New pool with nthreads >= 1 threads in all (MXNET_KVSTORE_REDUCTION_NTHREADS)
 * that splits arrays of at least big_bound elements (MXNET_KVSTORE_BIGARRAY_BOUND).
 * Returns 0 and *out, or KVS_ENOMEM / KVS_EINVAL. */
int red_pool_new(int nthreads, uint64_t big_bound, red_pool **out);

/* As red_pool_new, with flags:
 *   RED_POOL_NOCAP  keep nthreads even above the number of CPUs this process
 *                   may run on (by default the pool is capped there: see
 *                   bench/RESULTS-reduce.md for the measurement). */
#define RED_POOL_NOCAP 1u
int red_pool_new_ex(int nthreads, uint64_t big_bound, unsigned flags, red_pool **out);

/* Threads the pool really uses (after the cap), 1 for NULL. */
int red_pool_threads(const red_pool *p);

/* Scheduling niceness (0..19, PRIO_IDLE = 20: SCHED_IDLE, or PRIO_AUTO = 21:
 * SCHED_IDLE under the starvation guard; Linux: per thread, common/prio.h) of the pool's helper threads, applied by each helper when it next wakes for a job (callers
 * run their share at their own niceness).  A server lowers the threads that
 * do its bulk work below its loop's (KVS_JOB_NICE).  Returns 0, KVS_EINVAL
 * (out of range). */
int red_pool_set_nice(red_pool *p, int nice);

/* CPU kernel sets.  A pool starts with the best one the CPU supports
 * (detected once per process); red_pool_set_isa() picks another (tests,
 * benchmarks).  Returns 0, KVS_EINVAL (unknown isa) or KVS_ENOTSUP (this CPU
 * or build lacks it).  Not to be called while the pool is in use. */
enum red_isa { RED_ISA_C = 0, RED_ISA_AVX2 = 1, RED_ISA_AVX512 = 2 };
#define RED_ISA_COUNT 3
int red_pool_set_isa(red_pool *p, int isa);
int red_pool_isa(const red_pool *p);
/* "c", "avx2", "avx512"; NULL for an unknown isa. */
const char *red_isa_name(int isa);
/* 1 if this CPU and build can run isa, else 0. */
int red_isa_supported(int isa);
/* The best supported isa (what pool NULL and new pools use). */
int red_isa_best(void);

/* Stops and joins the threads.  red_pool_free(NULL) is a no-op. */
void red_pool_free(red_pool *p);

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
 * every half-type sum uses.  Other dtypes: nothing happens. */
void red_to_f32(kvs_dtype dtype, float *dst, const uint16_t *src, uint64_t n);
void red_from_f32(kvs_dtype dtype, uint16_t *dst, const float *src, uint64_t n);

/* A parallel for: fn(arg, lo, hi) over ranges [lo, hi) of at most chunk
 * units that together cover [0, count), on the pool's threads and the
 * caller; returns when all are done.  p NULL (or one thread): the caller runs
 * fn(arg, 0, count).  The server uses it for large memory copies. */
void red_pool_for(red_pool *p, uint64_t count, uint64_t chunk,
                  void (*fn)(const void *arg, uint64_t lo, uint64_t hi), const void *arg);

#ifdef __cplusplus
}
#endif

#endif
