/* sched.c - schedules of copy/reduce steps and the executor. */
#include <stdlib.h>
#include <string.h>

#include "common/sizes.h"
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

/* Steps of trees first..last (tree t: parent + t*n, round + t*n, rooted at
 * roots[t] or t); sliced: step slice = t - first, else 0. */
static int build(int n, int first, int last, const int *parent, const int *rounds,
                 const int *roots, bool sliced, unsigned phases, tree_sched *out)
{
    int R = 0, ntr = last - first + 1;
    size_t maxsteps = 2 * (size_t)ntr * (size_t)n + 1;
    if ((phases & ~(TREE_PHASE_REDUCE | TREE_PHASE_BCAST)) != 0)
        return KVS_EINVAL;
    for (int t = first; t <= last; t++) {
        int root = roots ? roots[t] : t;
        if (root < 0 || root >= n)
            return KVS_EINVAL;
        for (int v = 0; v < n; v++) {
            int r = rounds[(size_t)t * (size_t)n + (size_t)v], p = parent[(size_t)t * (size_t)n + (size_t)v];
            if (v == root)
                continue;
            if (r < 1 || r > 63 || p < 0 || p >= n)
                return KVS_EINVAL;
            if (r > R)
                R = r;
        }
    }
    out->n = n;
    out->nslices = sliced ? ntr : 1;
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
            for (int t = first; t <= last; t++) {
                int root = roots ? roots[t] : t;
                for (int v = 0; v < n; v++) {
                    int p = parent[(size_t)t * (size_t)n + (size_t)v];
                    if (v == root || rounds[(size_t)t * (size_t)n + (size_t)v] != r)
                        continue;
                    tree_step *st = &out->steps[out->nsteps++];
                    st->op = phase == 0 ? TREE_OP_REDUCE : TREE_OP_COPY;
                    st->slice = sliced ? t - first : 0;
                    st->src = phase == 0 ? v : p;
                    st->dst = phase == 0 ? p : v;
                }
            }
            if (out->nsteps > begin)
                out->stage_start[out->nstages++] = begin;
        }
    }
    out->stage_start[out->nstages] = out->nsteps;
    return 0;
}

int tree_sched_build(const tree_set *s, int root, unsigned phases, tree_sched *out)
{
    int n = s->n;
    memset(out, 0, sizeof *out);
    if (root >= n || root < -1)
        return KVS_EINVAL;
    return build(n, root < 0 ? 0 : root, root < 0 ? n - 1 : root, s->parent, s->round, NULL,
                 root < 0, phases, out);
}

int tree_wplan_first(const tree_wplan *p, int root)
{
    for (int k = 0; k < p->ntrees; k++)
        if (p->root[k] == root)
            return k;
    return -1;
}

int tree_sched_build_plan(const tree_wplan *p, int tree, unsigned phases, uint64_t min_bytes,
                          tree_sched *out)
{
    int rc;
    memset(out, 0, sizeof *out);
    if (tree >= p->ntrees || tree < -1 || p->ntrees < 1)
        return KVS_EINVAL;
    rc = build(p->n, tree < 0 ? 0 : tree, tree < 0 ? p->ntrees - 1 : tree, p->parent, p->round,
               p->root, tree < 0, phases, out);
    if (rc == 0 && tree < 0) {
        out->plan = p;
        out->min_bytes = min_bytes;
    }
    return rc;
}

/* ---------------------------------------------------------------- executor */

int tree_exec(const tree_sched *sc, const tree_backend *be, void *const *bufs, kvs_dtype dtype,
              uint64_t count)
{
    size_t es = kvs_dtype_size(dtype);
    uint64_t *offs = NULL, *lens = NULL;
    int rc = 0;
    if (es == 0 || bufs == NULL || be == NULL)
        return KVS_EINVAL;
    if (sc->plan != NULL) { /* weighted: slices by cumulative parts */
        offs = malloc(sizeof(uint64_t) * (size_t)sc->nslices);
        lens = malloc(sizeof(uint64_t) * (size_t)sc->nslices);
        if (offs == NULL || lens == NULL) {
            rc = KVS_ENOMEM;
            goto out;
        }
        tree_wplan_slices(sc->plan, count, es, sc->min_bytes, offs, lens);
    }
    for (int g = 0; g < sc->nstages; g++) {
        for (int i = sc->stage_start[g]; i < sc->stage_start[g + 1]; i++) {
            const tree_step *st = &sc->steps[i];
            uint64_t off, len;
            if (offs != NULL) {
                off = offs[st->slice];
                len = lens[st->slice];
            } else {
                tree_slice(count, sc->nslices, st->slice, &off, &len);
            }
            if (len == 0)
                continue;
            char *d = (char *)bufs[st->dst] + off * es;
            const char *s = (const char *)bufs[st->src] + off * es;
            rc = st->op == TREE_OP_REDUCE ? be->reduce(be->ctx, st->dst, d, st->src, s, dtype, len)
                                          : be->copy(be->ctx, st->dst, d, st->src, s, len * es);
            if (rc != 0)
                goto out;
        }
        if ((rc = be->stage_end(be->ctx)) != 0)
            goto out;
    }
out:
    free(offs);
    free(lens);
    return rc;
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

int tree_allreduce_plan(const tree_wplan *p, const tree_opts *o, const tree_backend *be,
                        void *const *bufs, kvs_dtype dtype, uint64_t count, int root)
{
    tree_sched sc;
    bool split = count > o->array_bound && p->n > 1;
    int rc, first;
    uint64_t bytes;
    if (root < 0 || root >= p->n || (first = tree_wplan_first(p, root)) < 0)
        return KVS_EINVAL;
    if (!size_mul(count, kvs_dtype_size(dtype), &bytes))
        return KVS_ETOOBIG;
    rc = tree_sched_build_plan(p, split ? -1 : first, TREE_PHASE_REDUCE | TREE_PHASE_BCAST,
                               o->min_slice, &sc);
    if (rc != 0)
        return rc;
    rc = tree_exec(&sc, be, bufs, dtype, count);
    tree_sched_fini(&sc);
    return rc;
}
