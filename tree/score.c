/* score.c - the rules of a tree set and its quality metrics. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tree/tree_int.h"

int tree_validate(const tree_topo *t, const tree_set *s, char *err, size_t errlen)
{
    int n = s->n;
    if (n != t->n) {
        snprintf(err, errlen, "%d trees for %d GPUs", n, t->n);
        return KVS_EINVAL;
    }
    for (int r = 0; r < n; r++) {
        const int *par = s->parent + r * n, *rnd = s->round + r * n;
        uint64_t used[TREE_MAX_N] = {0}; /* rounds in which each GPU sends */
        if (par[r] != -1) {
            snprintf(err, errlen, "tree %d: the root has a parent", r);
            return KVS_EINVAL;
        }
        for (int v = 0; v < n; v++) {
            int p = par[v], x = v, k = 0;
            if (v == r)
                continue;
            if (p == -2 || p < 0 || p >= n) {
                snprintf(err, errlen, "tree %d: GPU %d is not reached", r, v);
                return KVS_EINVAL;
            }
            while (x != r && x >= 0 && k++ <= n)
                x = par[x];
            if (x != r) {
                snprintf(err, errlen, "tree %d: GPU %d is on a cycle, not connected to the root",
                         r, v);
                return KVS_EINVAL;
            }
            if (rnd[v] < 1 || rnd[v] > 63) {
                snprintf(err, errlen, "tree %d: edge %d->%d has round %d (allowed 1..63)", r, p,
                         v, rnd[v]);
                return KVS_EINVAL;
            }
            if (rnd[v] <= (p == r ? 0 : rnd[p])) {
                snprintf(err, errlen,
                         "tree %d: GPU %d sends to %d in round %d before it has the data "
                         "(received in round %d)",
                         r, p, v, rnd[v], rnd[p]);
                return KVS_EINVAL;
            }
            if (used[p] & (1ULL << rnd[v])) {
                snprintf(err, errlen, "tree %d: GPU %d sends twice in round %d", r, p, rnd[v]);
                return KVS_EINVAL;
            }
            used[p] |= 1ULL << rnd[v];
        }
    }
    for (int r = 0; r < n; r++)
        for (int v = 0; v < n; v++) {
            int p = s->parent[r * n + v];
            if (v != r && !tree_link(t, p, v)) {
                snprintf(err, errlen, "tree %d: edge %d->%d has no link (weights %g, %g)", r, p,
                         v, tree_w(t, p, v), tree_w(t, v, p));
                return KVS_EINVAL;
            }
        }
    return 0;
}

void tree_score_compute(const tree_topo *t, const tree_set *s, tree_score *sc)
{
    int n = s->n, cnt[TREE_MAX_N * TREE_MAX_N] = {0};
    memset(sc, 0, sizeof *sc);
    sc->valid = tree_validate(t, s, sc->error, sizeof sc->error) == 0;
    if (n != t->n)
        return;
    for (int r = 0; r < n; r++) {
        double b = n > 1 ? INFINITY : 0;
        for (int v = 0; v < n; v++) {
            int p = s->parent[r * n + v];
            double e;
            if (v == r || p < 0 || p >= n)
                continue;
            if (s->round[r * n + v] > sc->rounds)
                sc->rounds = s->round[r * n + v];
            if (!tree_link(t, p, v))
                sc->nonlink_edges++;
            e = fmin(tree_w(t, p, v), tree_w(t, v, p));
            if (e < b)
                b = e;
            cnt[v * n + p]++;
        }
        sc->bottleneck[r] = isfinite(b) ? b : 0;
        sc->bottleneck_sum += sc->bottleneck[r];
    }
    for (int c = 0; c < n; c++)
        for (int p = 0; p < n; p++) {
            int k = cnt[c * n + p];
            double w = tree_w(t, c, p), l;
            if (k == 0)
                continue;
            if (k > sc->congestion)
                sc->congestion = k;
            l = w > 0 ? k / w / n : INFINITY;
            if (l > sc->reduce_load_time)
                sc->reduce_load_time = l;
        }
}

int tree_score_cmp(const tree_score *a, const tree_score *b)
{
    double ta = a->reduce_load_time, tb = b->reduce_load_time;
    if (a->valid != b->valid)
        return a->valid ? -1 : 1;
    if (fabs(ta - tb) > 1e-9 * (fabs(ta) + fabs(tb)) && !(isinf(ta) && isinf(tb)))
        return ta < tb ? -1 : 1;
    if (fabs(a->bottleneck_sum - b->bottleneck_sum) >
        1e-9 * (fabs(a->bottleneck_sum) + fabs(b->bottleneck_sum)))
        return a->bottleneck_sum > b->bottleneck_sum ? -1 : 1;
    if (a->congestion != b->congestion)
        return a->congestion < b->congestion ? -1 : 1;
    if (a->rounds != b->rounds)
        return a->rounds < b->rounds ? -1 : 1;
    return 0;
}
