/* red_pool.h - the reduction engine's thread pool and CPU kernel choice
 * (reduce/red_pool.c); the sums themselves: reduce.h.
 *
 * Threads: a red_pool owns nthreads-1 helper threads (the calling thread is
 * the last worker).  pool may be NULL everywhere: then everything runs on the
 * calling thread.
 */
#ifndef KVS_REDUCE_POOL_H
#define KVS_REDUCE_POOL_H

#include <stddef.h>
#include <stdint.h>

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
 *                   docs/design/reduce.md for the measurement). */
#define RED_POOL_NOCAP 1u
int red_pool_new_ex(int nthreads, uint64_t big_bound, unsigned flags, red_pool **out);

/* Threads the pool really uses (after the cap), 1 for NULL. */
int red_pool_threads(const red_pool *p);

/* The CPUs this process may run on (its affinity mask; else the CPUs
 * online; at least 1). */
int red_cpus_online(void);

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
