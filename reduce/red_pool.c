/* red_pool.c - the reduction thread pool and the choice of CPU kernels.
 *
 * A pool has nthreads-1 helper threads that sleep on a condition variable.
 * red_pool_run() publishes one job, wakes them, works on it itself, and
 * waits until every helper has left the job.  Threads take chunks from an
 * atomic counter (dynamic scheduling: a thread that the OS delays does not
 * hold the others up).  One job at a time per pool (call_mu).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/prio.h"
#include "kvs.h"
#include "reduce/reduce_int.h"

/* ---- CPU features: detected once, never written afterwards ---- */

static pthread_once_t isa_once = PTHREAD_ONCE_INIT;
static int isa_ok[RED_ISA_COUNT];

static void isa_detect(void)
{
    isa_ok[RED_ISA_C] = 1;
#ifdef RED_HAVE_X86
    __builtin_cpu_init();
    isa_ok[RED_ISA_AVX2] = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                           __builtin_cpu_supports("f16c");
    isa_ok[RED_ISA_AVX512] = isa_ok[RED_ISA_AVX2] && __builtin_cpu_supports("avx512f") &&
                             __builtin_cpu_supports("avx512vl") &&
                             __builtin_cpu_supports("avx512bw");
#endif
}

int red_isa_supported(int isa)
{
    if (isa < 0 || isa >= RED_ISA_COUNT)
        return 0;
    pthread_once(&isa_once, isa_detect);
    return isa_ok[isa];
}

int red_isa_best(void)
{
    for (int isa = RED_ISA_COUNT - 1; isa > 0; isa--)
        if (red_isa_supported(isa))
            return isa;
    return RED_ISA_C;
}

const char *red_isa_name(int isa)
{
    static const char *const names[RED_ISA_COUNT] = {"c", "avx2", "avx512"};
    return isa >= 0 && isa < RED_ISA_COUNT ? names[isa] : NULL;
}

const struct red_kern *red_kern_get(int isa)
{
    if (!red_isa_supported(isa))
        return NULL;
    switch (isa) {
#ifdef RED_HAVE_X86
    case RED_ISA_AVX2:
        return &red_kern_avx2;
    case RED_ISA_AVX512:
        return &red_kern_avx512;
#endif
    default:
        return &red_kern_c;
    }
}

/* ---- the pool ---- */

int red_cpus_online(void)
{
    cpu_set_t set;
    long n;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Take chunks until none are left. */
static void run_chunks(red_pool *p, const struct red_job *job)
{
    for (;;) {
        uint64_t c = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        uint64_t lo, hi;
        if (c == 0) {
            lo = 0;
            hi = job->first;
        } else {
            uint64_t rest = job->count > job->first ? job->count - job->first : 0;
            if (c - 1 >= (rest + job->chunk - 1) / job->chunk)
                return;
            lo = job->first + (c - 1) * job->chunk;
            hi = lo + job->chunk;
        }
        if (hi > job->count)
            hi = job->count;
        if (lo >= job->count)
            return;
        job->run(job->arg, lo, hi);
    }
}

static void *helper_main(void *arg)
{
    red_pool *p = arg;
    uint64_t seen = 0;
    int nice = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        const struct red_job *job;
        while (!p->stop && p->gen == seen)
            pthread_cond_wait(&p->wake, &p->mu);
        if (p->stop)
            break;
        seen = p->gen;
        job = p->job;
        pthread_mutex_unlock(&p->mu);
        if (atomic_load_explicit(&p->nice, memory_order_relaxed) != nice) {
            nice = atomic_load_explicit(&p->nice, memory_order_relaxed);
            prio_lower_self(nice); /* common/prio.h */
        }
        run_chunks(p, job);
        pthread_mutex_lock(&p->mu);
        if (--p->busy == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    prio_forget_self();
    return NULL;
}

void red_pool_run(red_pool *p, const struct red_job *job)
{
    pthread_mutex_lock(&p->call_mu);
    pthread_mutex_lock(&p->mu);
    p->job = job;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    p->busy = p->nhelpers;
    p->gen++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    run_chunks(p, job);
    pthread_mutex_lock(&p->mu);
    while (p->busy > 0)
        pthread_cond_wait(&p->done, &p->mu);
    p->job = NULL;
    pthread_mutex_unlock(&p->mu);
    pthread_mutex_unlock(&p->call_mu);
}

void red_pool_for(red_pool *p, uint64_t count, uint64_t chunk,
                  void (*fn)(const void *arg, uint64_t lo, uint64_t hi), const void *arg)
{
    if (count == 0)
        return;
    if (chunk == 0)
        chunk = 1;
    if (p == NULL || p->nhelpers == 0 || count <= chunk) {
        fn(arg, 0, count);
        return;
    }
    struct red_job job = {fn, arg, count, chunk, chunk};
    red_pool_run(p, &job);
}

int red_pool_new_ex(int nthreads, uint64_t big_bound, unsigned flags, red_pool **out)
{
    red_pool *p;
    int err = 0;
    if (out == NULL || nthreads < 1 || (flags & ~RED_POOL_NOCAP) != 0)
        return KVS_EINVAL;
    *out = NULL;
    if (!(flags & RED_POOL_NOCAP) && nthreads > red_cpus_online())
        nthreads = red_cpus_online();
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return KVS_ENOMEM;
    pthread_mutex_init(&p->call_mu, NULL);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    atomic_init(&p->next, 0);
    p->nthreads = nthreads;
    p->big_bound = big_bound;
    p->stream_min = RED_STREAM_MIN;
    atomic_init(&p->streamed, 0);
    atomic_init(&p->nice, 0);
    p->kern = red_kern_get(red_isa_best());
    if (nthreads > 1) {
        p->tid = calloc((size_t)nthreads - 1, sizeof(*p->tid));
        if (p->tid == NULL) {
            err = KVS_ENOMEM;
            goto out;
        }
    }
    for (int i = 0; i < nthreads - 1; i++) {
        if (pthread_create(&p->tid[i], NULL, helper_main, p) != 0) {
            err = KVS_ENOMEM;
            goto out;
        }
        p->nhelpers++;
    }
out:
    if (err) {
        red_pool_free(p);
        return err;
    }
    *out = p;
    return 0;
}

int red_pool_new(int nthreads, uint64_t big_bound, red_pool **out)
{
    return red_pool_new_ex(nthreads, big_bound, 0, out);
}

void red_pool_free(red_pool *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->nhelpers; i++)
        pthread_join(p->tid[i], NULL);
    free(p->tid);
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->call_mu);
    free(p);
}

int red_pool_set_nice(red_pool *p, int nice)
{
    if (p == NULL || nice < 0 || nice > PRIO_AUTO)
        return KVS_EINVAL;
    atomic_store(&p->nice, nice);
    return 0;
}

int red_pool_threads(const red_pool *p)
{
    return p ? p->nthreads : 1;
}

int red_pool_set_isa(red_pool *p, int isa)
{
    if (p == NULL || isa < 0 || isa >= RED_ISA_COUNT)
        return KVS_EINVAL;
    if (!red_isa_supported(isa))
        return KVS_ENOTSUP;
    p->kern = red_kern_get(isa);
    return 0;
}

int red_pool_isa(const red_pool *p)
{
    const struct red_kern *k = p ? p->kern : red_kern_get(red_isa_best());
    for (int isa = 0; isa < RED_ISA_COUNT; isa++)
        if (red_isa_supported(isa) && red_kern_get(isa) == k)
            return isa;
    return RED_ISA_C;
}
