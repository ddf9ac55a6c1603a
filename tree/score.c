/* score.c - the rules of a tree set and its quality metrics. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tree/tree_int.h"

int tree_check_one(const tree_topo *t, int r, const int *par, const int *rnd,
                   const char *label, char *err, size_t errlen)
{
    int n = t->n;
    uint64_t used[TREE_MAX_N] = {0}; /* rounds in which each GPU sends */
    if (r < 0 || r >= n) {
        snprintf(err, errlen, "%s: root %d out of range 0..%d", label, r, n - 1);
        return KVS_EINVAL;
    }
    if (par[r] != -1) {
        snprintf(err, errlen, "%s: the root has a parent", label);
        return KVS_EINVAL;
    }
    for (int v = 0; v < n; v++) {
        int p = par[v], x = v, k = 0;
        if (v == r)
            continue;
        if (p == -2 || p < 0 || p >= n) {
            snprintf(err, errlen, "%s: GPU %d is not reached", label, v);
            return KVS_EINVAL;
        }
        while (x != r && x >= 0 && k++ <= n)
            x = par[x];
        if (x != r) {
            snprintf(err, errlen, "%s: GPU %d is on a cycle, not connected to the root", label,
                     v);
            return KVS_EINVAL;
        }
        if (rnd[v] < 1 || rnd[v] > 63) {
            snprintf(err, errlen, "%s: edge %d->%d has round %d (allowed 1..63)", label, p, v,
                     rnd[v]);
            return KVS_EINVAL;
        }
        if (rnd[v] <= (p == r ? 0 : rnd[p])) {
            snprintf(err, errlen,
                     "%s: GPU %d sends to %d in round %d before it has the data "
                     "(received in round %d)",
                     label, p, v, rnd[v], rnd[p]);
            return KVS_EINVAL;
        }
        if (used[p] & (1ULL << rnd[v])) {
            snprintf(err, errlen, "%s: GPU %d sends twice in round %d", label, p, rnd[v]);
            return KVS_EINVAL;
        }
        used[p] |= 1ULL << rnd[v];
    }
    return 0;
}

static int check_links(const tree_topo *t, int r, const int *par, const char *label, char *err,
                       size_t errlen)
{
    for (int v = 0; v < t->n; v++) {
        int p = par[v];
        if (v != r && !tree_link(t, p, v)) {
            snprintf(err, errlen, "%s: edge %d->%d has no link (weights %g, %g)", label, p, v,
                     tree_w(t, p, v), tree_w(t, v, p));
            return KVS_EINVAL;
        }
    }
    return 0;
}

int tree_validate(const tree_topo *t, const tree_set *s, char *err, size_t errlen)
{
    int n = s->n;
    char label[32];
    if (n != t->n) {
        snprintf(err, errlen, "%d trees for %d GPUs", n, t->n);
        return KVS_EINVAL;
    }
    for (int r = 0; r < n; r++) {
        snprintf(label, sizeof label, "tree %d", r);
        if (tree_check_one(t, r, s->parent + r * n, s->round + r * n, label, err, errlen) != 0)
            return KVS_EINVAL;
    }
    for (int r = 0; r < n; r++) {
        snprintf(label, sizeof label, "tree %d", r);
        if (check_links(t, r, s->parent + r * n, label, err, errlen) != 0)
            return KVS_EINVAL;
    }
    return 0;
}

int tree_wplan_validate(const tree_topo *t, const tree_wplan *p, char *err, size_t errlen)
{
    int n = p->n;
    uint64_t sum[TREE_MAX_N] = {0};
    char label[48];
    if (n != t->n) {
        snprintf(err, errlen, "plan for %d GPUs, topology has %d", n, t->n);
        return KVS_EINVAL;
    }
    if (p->ntrees < 1 || p->denominator == 0 || p->denominator % (uint32_t)n != 0) {
        snprintf(err, errlen, "%d trees, denominator %u: expected >= 1 tree and a multiple of %d",
                 p->ntrees, p->denominator, n);
        return KVS_EINVAL;
    }
    for (int k = 0; k < p->ntrees; k++) {
        int r = p->root[k];
        snprintf(label, sizeof label, "trees[%d] (root %d)", k, r);
        if (tree_check_one(t, r, p->parent + (size_t)k * (size_t)n, p->round + (size_t)k * (size_t)n, label, err,
                           errlen) != 0 ||
            check_links(t, r, p->parent + (size_t)k * (size_t)n, label, err, errlen) != 0)
            return KVS_EINVAL;
        if (p->parts[k] < 1) {
            snprintf(err, errlen, "%s: parts 0 (allowed >= 1)", label);
            return KVS_EINVAL;
        }
        sum[r] += p->parts[k];
    }
    for (int r = 0; r < n; r++)
        if (sum[r] != p->denominator / (uint32_t)n) {
            snprintf(err, errlen,
                     "root %d: its trees carry %llu parts of %u, expected %u (1/%d of the array)",
                     r, (unsigned long long)sum[r], p->denominator, p->denominator / (uint32_t)n,
                     n);
            return KVS_EINVAL;
        }
    return 0;
}

double tree_wplan_load(const tree_topo *t, const tree_wplan *p)
{
    int n = p->n;
    double load[TREE_MAX_N * TREE_MAX_N] = {0}, mx = 0;
    if (n != t->n || p->denominator == 0)
        return INFINITY;
    for (int k = 0; k < p->ntrees; k++) {
        const int *par = p->parent + (size_t)k * (size_t)n;
        double x = (double)p->parts[k] / p->denominator;
        for (int v = 0; v < n; v++) {
            int q = par[v];
            if (v == p->root[k])
                continue;
            if (q < 0 || q >= n || !tree_link(t, v, q))
                return INFINITY;
            load[v * n + q] += x / tree_w(t, v, q);
        }
    }
    for (int i = 0; i < n * n; i++)
        if (load[i] > mx)
            mx = load[i];
    return mx;
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
