/* reduce_int.h - private to reduce/: the pool's job interface (the kernel
 * tables and half-type conversions: red_kern.h).  Nothing outside reduce/ (and its own tests)
 * includes this file.
 */
#ifndef KVS_REDUCE_INT_H
#define KVS_REDUCE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "reduce/red_kern.h"
#include "reduce/red_pool.h"

struct red_pool {
    pthread_mutex_t call_mu; /* serialises callers of red_pool_run */
    pthread_mutex_t mu;      /* guards the fields below */
    pthread_cond_t wake;     /* helpers: a new generation or stop */
    pthread_cond_t done;     /* caller: busy reached 0 */
    uint64_t gen;            /* bumped per job */
    int busy;                /* helpers still in the current job */
    int stop;
    const struct red_job *job;
    _Atomic uint64_t next; /* next chunk index of the current job */
    int nthreads;          /* in all, caller included */
    int nhelpers;          /* threads started */
    pthread_t *tid;
    uint64_t big_bound;
    const struct red_kern *kern;
    uint64_t stream_min;       /* RED_STREAM_MIN; tests lower it */
    _Atomic uint64_t streamed; /* calls that streamed dst (for tests) */
    _Atomic int nice;          /* red_pool_set_nice: helpers apply it on waking */
};

/* A job for the pool: run(arg, lo, hi) over element ranges [lo, hi) that
 * together cover [0, count).  Chunk c >= 1 starts at first + (c-1) * chunk
 * (first < chunk lets chunk borders fall on cache-line borders of dst). */
struct red_job {
    void (*run)(const void *arg, uint64_t lo, uint64_t hi);
    const void *arg;
    uint64_t count;
    uint64_t chunk; /* elements per chunk, >= 1 */
    uint64_t first; /* elements of chunk 0, 1..chunk */
};

/* Runs job on the pool's threads and the caller; returns when all is done.
 * Serialised per pool. */
void red_pool_run(red_pool *p, const struct red_job *job);

#endif
