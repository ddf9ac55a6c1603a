/* sched.c - schedules of copy/reduce steps and the executor. */
#include <stdlib.h>
#include <string.h>

#include "common/sizes.h"
#include "reduce/reduce.h"
#include "tree/tree_int.h"

void tree_slice(uint64_t count, int k, int i, uint64_t *off, uint64_t *len)
{
    unsigned __int128 a = (unsigned __int128)count * (unsigned)i / (unsigned)k;
    unsigned __int128 b = (unsigned __int128)count * (unsigned)(i + 1) / (unsigned)k;
    *off = (uint64_t)a;
    *len = (uint64_t)(b - a);
}

void tree_sched_fini(tree_sched *sc)
{
    if (sc == NULL)
        return;
    free(sc->stage_start);
    free(sc->steps);
    memset(sc, 0, sizeof *sc);
}

int tree_sched_build(const tree_set *s, int root, unsigned phases, tree_sched *out)
{
    int n = s->n, first = root < 0 ? 0 : root, last = root < 0 ? n - 1 : root, R = 0;
    size_t maxsteps = 2 * (size_t)n * (size_t)n + 1;
    memset(out, 0, sizeof *out);
    if (root >= n || root < -1 || (phases & ~(TREE_PHASE_REDUCE | TREE_PHASE_BCAST)) != 0)
        return KVS_EINVAL;
    for (int t = first; t <= last; t++)
        for (int v = 0; v < n; v++) {
            int r = s->round[t * n + v], p = s->parent[t * n + v];
            if (v == t)
                continue;
            if (r < 1 || r > 63 || p < 0 || p >= n)
                return KVS_EINVAL;
            if (r > R)
                R = r;
        }
    out->n = n;
    out->nslices = root < 0 ? n : 1;
    out->steps = malloc(maxsteps * sizeof *out->steps);
    out->stage_start = malloc((2 * (size_t)R + 2) * sizeof *out->stage_start);
    if (out->steps == NULL || out->stage_start == NULL) {
        tree_sched_fini(out);
        return KVS_ENOMEM;
    }
    /* reduce: rounds R..1 (children into parents); broadcast: 1..R */
    for (int phase = 0; phase < 2; phase++) {
        if (!(phases & (phase == 0 ? TREE_PHASE_REDUCE : TREE_PHASE_BCAST)))
            continue;
        for (int k = 0; k < R; k++) {
            int r = phase == 0 ? R - k : k + 1, begin = out->nsteps;
            for (int t = first; t <= last; t++)
                for (int v = 0; v < n; v++) {
                    int p = s->parent[t * n + v];
                    if (v == t || s->round[t * n + v] != r)
                        continue;
                    tree_step *st = &out->steps[out->nsteps++];
                    st->op = phase == 0 ? TREE_OP_REDUCE : TREE_OP_COPY;
                    st->slice = root < 0 ? t : 0;
                    st->src = phase == 0 ? v : p;
                    st->dst = phase == 0 ? p : v;
                }
            if (out->nsteps > begin)
                out->stage_start[out->nstages++] = begin;
        }
    }
    out->stage_start[out->nstages] = out->nsteps;
    return 0;
}

/* ------------------------------------------------------------- CPU backend */

static int cpu_copy(void *ctx, int dst, void *dstp, int src, const void *srcp, uint64_t bytes)
{
    (void)ctx;
    (void)dst;
    (void)src;
    if (dstp != srcp && bytes > 0)
        memcpy(dstp, srcp, bytes);
    return 0;
}

static int cpu_reduce(void *ctx, int dst, void *dstp, int src, const void *srcp, kvs_dtype dtype,
                      uint64_t count)
{
    (void)dst;
    (void)src;
    if (count == 0)
        return 0;
    return red_add((red_pool *)ctx, dtype, dstp, srcp, count);
}

static int cpu_stage_end(void *ctx)
{
    (void)ctx;
    return 0;
}

void tree_backend_cpu(struct red_pool *pool, tree_backend *out)
{
    out->ctx = pool;
    out->copy = cpu_copy;
    out->reduce = cpu_reduce;
    out->stage_end = cpu_stage_end;
}

/* ---------------------------------------------------------------- executor */

int tree_exec(const tree_sched *sc, const tree_backend *be, void *const *bufs, kvs_dtype dtype,
              uint64_t count)
{
    size_t es = kvs_dtype_size(dtype);
    if (es == 0 || bufs == NULL || be == NULL)
        return KVS_EINVAL;
    for (int g = 0; g < sc->nstages; g++) {
        int rc;
        for (int i = sc->stage_start[g]; i < sc->stage_start[g + 1]; i++) {
            const tree_step *st = &sc->steps[i];
            uint64_t off, len;
            tree_slice(count, sc->nslices, st->slice, &off, &len);
            if (len == 0)
                continue;
            char *d = (char *)bufs[st->dst] + off * es;
            const char *s = (const char *)bufs[st->src] + off * es;
            rc = st->op == TREE_OP_REDUCE ? be->reduce(be->ctx, st->dst, d, st->src, s, dtype, len)
                                          : be->copy(be->ctx, st->dst, d, st->src, s, len * es);
            if (rc != 0)
                return rc;
        }
        if ((rc = be->stage_end(be->ctx)) != 0)
            return rc;
    }
    return 0;
}

int tree_allreduce(const tree_set *s, const tree_opts *o, const tree_backend *be,
                   void *const *bufs, kvs_dtype dtype, uint64_t count, int root)
{
    tree_sched sc;
    bool split = count > o->array_bound && s->n > 1;
    int rc;
    if (root < 0 || root >= s->n)
        return KVS_EINVAL;
    uint64_t bytes;
    if (!size_mul(count, kvs_dtype_size(dtype), &bytes))
        return KVS_ETOOBIG;
    rc = tree_sched_build(s, split ? -1 : root, TREE_PHASE_REDUCE | TREE_PHASE_BCAST, &sc);
    if (rc != 0)
        return rc;
    rc = tree_exec(&sc, be, bufs, dtype, count);
    tree_sched_fini(&sc);
    return rc;
}
