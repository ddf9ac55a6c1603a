/* plan.c - tree sets and the planner entry points. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tree/tree_int.h"

#define MIN_W 1e-290 /* penalised weights never reach 0 */

int tree_set_init(tree_set *s, int n)
{
    memset(s, 0, sizeof *s);
    if (n < 1 || n > TREE_MAX_N)
        return KVS_EINVAL;
    s->parent = malloc(sizeof(int) * (size_t)n * (size_t)n);
    s->round = calloc((size_t)n * (size_t)n, sizeof(int));
    if (s->parent == NULL || s->round == NULL) {
        tree_set_fini(s);
        return KVS_ENOMEM;
    }
    s->n = n;
    for (int t = 0; t < n; t++)
        for (int v = 0; v < n; v++)
            s->parent[t * n + v] = v == t ? -1 : -2; /* -2: not reached */
    return 0;
}

void tree_set_fini(tree_set *s)
{
    if (s == NULL)
        return;
    free(s->parent);
    free(s->round);
    s->parent = s->round = NULL;
    s->n = 0;
}

int tree_set_copy(tree_set *dst, const tree_set *src)
{
    size_t sz = sizeof(int) * (size_t)src->n * (size_t)src->n;
    if (dst->n != src->n)
        return KVS_EINVAL;
    memcpy(dst->parent, src->parent, sz);
    memcpy(dst->round, src->round, sz);
    dst->rounds = src->rounds;
    return 0;
}

static int ceil_log2(int m)
{
    int d = 0;
    while ((1 << d) < m)
        d++;
    return d;
}

/* Breadth-first tree over usable links (a seed needs no depth search). */
static void plain_bfs(const tree_topo *t, int root, int *par)
{
    int q[TREE_MAX_N], h = 0, tl = 0, n = t->n;
    for (int v = 0; v < n; v++)
        par[v] = -2;
    par[root] = -1;
    q[tl++] = root;
    while (h < tl) {
        int u = q[h++];
        for (int v = 0; v < n; v++)
            if (par[v] == -2 && tree_link(t, u, v)) {
                par[v] = u;
                q[tl++] = v;
            }
    }
}

/* Per-root construction with the link-usage penalty.  directed: penalise
 * only the reduce direction child -> parent of each edge (full duplex);
 * otherwise both directions (MXNet).  Returns the max depth. */
int tree_construct(const tree_topo *t, tree_mode mode, double penalty, bool directed,
                   bool quick, tree_set *s)
{
    int n = t->n, maxd = 0;
    double *w = malloc(sizeof(double) * (size_t)n * (size_t)n);
    if (w == NULL)
        return -1;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            w[i * n + j] = tree_w(t, i, j);
    for (int r = 0; r < n; r++) {
        int *par = s->parent + r * n, ok = -1, d;
        if (n == 1) {
            par[0] = -1;
            break;
        }
        if (mode == TREE_MODE_KL) {
            long budget = (quick ? 2L : 16L) * n;
            ok = tree_build_kl(n, w, r, par, &budget, quick ? 2 : 0);
        } else {
            for (int depth = ceil_log2(n); ok != 0 && depth <= ceil_log2(n) + 2; depth++) {
                long budget = n <= 8 ? 200000L : (quick ? 20000L : 80000L) / n;
                ok = tree_build_backtrack(n, w, r, depth, par, &budget);
            }
        }
        if (ok != 0 && quick)
            plain_bfs(t, r, par);
        else if (ok != 0)
            tree_build_bfs(n, w, r, par);
        d = tree_assign_rounds(n, r, par, s->round + r * n);
        if (d > maxd)
            maxd = d;
        for (int v = 0; v < n; v++) {
            double *x;
            if (v == r)
                continue;
            x = &w[v * n + par[v]];
            *x = *x * penalty > MIN_W ? *x * penalty : MIN_W;
            if (!directed) {
                x = &w[par[v] * n + v];
                *x = *x * penalty > MIN_W ? *x * penalty : MIN_W;
            }
        }
    }
    free(w);
    s->rounds = maxd;
    return maxd;
}

static void log_plan(const tree_topo *t, const tree_set *s, const char *what)
{
    fprintf(stderr, "tree: %s\n", what);
    tree_topo_print(t, stderr);
    tree_set_print(t, s, stderr);
}

static int plan_common(const tree_topo *t, const tree_opts *o, tree_set *out, char *err,
                       size_t errlen, bool reference)
{
    int rc, n = t->n;
    tree_set cand;
    tree_score sa, sb;
    memset(out, 0, sizeof *out);
    if (n < 1 || n > TREE_MAX_N || t->w == NULL) {
        snprintf(err, errlen, "topology has %d GPUs, allowed 1..%d", n, TREE_MAX_N);
        return KVS_EINVAL;
    }
    if (!(o->penalty > 0 && o->penalty <= 1)) {
        snprintf(err, errlen, "link usage penalty %g: expected a number in (0, 1]", o->penalty);
        return KVS_EINVAL;
    }
    rc = tree_topo_check_connected(t, err, errlen);
    if (rc != 0)
        return rc;
    if ((rc = tree_set_init(out, n)) != 0) {
        snprintf(err, errlen, "out of memory");
        return rc;
    }
    if (reference) {
        if (tree_construct(t, o->mode, o->penalty, false, false, out) < 0)
            goto oom;
        goto done;
    }
    if (tree_construct(t, o->mode, o->penalty, true, false, out) < 0)
        goto oom;
    if (!o->optimize || n < 3)
        goto done;
    /* work: move evaluations; ~20 ms at n = 16, ~0.5 s at n = 64 (2 cores) */
    uint64_t work = (uint64_t)n * (uint64_t)n * (uint64_t)n * 10u;
    if (work < 60000)
        work = 60000;
    if (work > 700000)
        work = 700000;
    work = work * o->effort / 100;
    int rcap = out->rounds > ceil_log2(n) ? out->rounds : ceil_log2(n);
    tree_optimize(t, out, rcap, work / 2, 0x5EED0001ULL + (uint64_t)o->mode);
    /* second start: the reference construction, optimised too */
    if ((rc = tree_set_init(&cand, n)) != 0)
        goto oom;
    if (tree_construct(t, o->mode, o->penalty, false, false, &cand) < 0) {
        tree_set_fini(&cand);
        goto oom;
    }
    tree_score_compute(t, &cand, &sb);
    tree_score_compute(t, out, &sa);
    if (tree_score_cmp(&sb, &sa) < 0)
        tree_set_copy(out, &cand);
    tree_optimize(t, &cand, cand.rounds > ceil_log2(n) ? cand.rounds : ceil_log2(n), work / 4,
                  0x5EED0002ULL + (uint64_t)o->mode);
    tree_score_compute(t, &cand, &sb);
    tree_score_compute(t, out, &sa);
    if (tree_score_cmp(&sb, &sa) < 0) {
        tree_set_copy(out, &cand);
        sa = sb;
    }
    /* third: one round deeper, kept only when the load drops */
    if (o->depth_slack == 0) {
        tree_set_fini(&cand);
        goto done;
    }
    tree_set_copy(&cand, out);
    tree_optimize(t, &cand, sa.rounds + 1, work / 4, 0x5EED0003ULL + (uint64_t)o->mode);
    tree_score_compute(t, &cand, &sb);
    if (sb.valid && sb.reduce_load_time < sa.reduce_load_time * (1 - 1e-9))
        tree_set_copy(out, &cand);
    tree_set_fini(&cand);
done:
    out->rounds = 0;
    for (int i = 0; i < n * n; i++)
        if (out->round[i] > out->rounds)
            out->rounds = out->round[i];
    if (o->log)
        log_plan(t, out, reference ? "reference (MXNet-like) trees" : "planned trees");
    return 0;
oom:
    tree_set_fini(out);
    snprintf(err, errlen, "out of memory");
    return KVS_ENOMEM;
}

int tree_plan(const tree_topo *t, const tree_opts *o, tree_set *out, char *err, size_t errlen)
{
    return plan_common(t, o, out, err, errlen, false);
}

int tree_plan_mxnet_like(const tree_topo *t, const tree_opts *o, tree_set *out, char *err,
                         size_t errlen)
{
    return plan_common(t, o, out, err, errlen, true);
}

/* ------------------------------------------------------------- edge lists */

static int edges_of(int n, const int *par, const int *rnd, int root, tree_edge *edges)
{
    int k = 0;
    for (int v = 0; v < n; v++) {
        int p = par[v];
        if (v == root || p < 0)
            continue;
        tree_edge e = {p, v, rnd[v]};
        int j = k++;
        while (j > 0 && (edges[j - 1].round > e.round ||
                         (edges[j - 1].round == e.round && edges[j - 1].parent > e.parent))) {
            edges[j] = edges[j - 1];
            j--;
        }
        edges[j] = e;
    }
    return k;
}

int tree_set_edges(const tree_set *s, int root, tree_edge *edges)
{
    return edges_of(s->n, s->parent + root * s->n, s->round + root * s->n, root, edges);
}

int tree_wplan_edges(const tree_wplan *p, int k, tree_edge *edges)
{
    return edges_of(p->n, p->parent + (size_t)k * (size_t)p->n, p->round + (size_t)k * (size_t)p->n, p->root[k],
                    edges);
}

int tree_set_from_edges(tree_set *s, int root, const tree_edge *edges, int nedges, char *err,
                        size_t errlen)
{
    int n = s->n;
    if (root < 0 || root >= n) {
        snprintf(err, errlen, "root %d out of range 0..%d", root, n - 1);
        return KVS_EINVAL;
    }
    for (int i = 0; i < nedges; i++) {
        const tree_edge *e = &edges[i];
        if (e->parent < 0 || e->parent >= n || e->child < 0 || e->child >= n) {
            snprintf(err, errlen, "tree %d: edge [%d, %d, %d]: GPU out of range 0..%d", root,
                     e->parent, e->child, e->round, n - 1);
            return KVS_EINVAL;
        }
        if (e->child == root || e->child == e->parent) {
            snprintf(err, errlen, "tree %d: edge [%d, %d, %d]: the root or a self loop as child",
                     root, e->parent, e->child, e->round);
            return KVS_EINVAL;
        }
        if (s->parent[root * n + e->child] != -2) {
            snprintf(err, errlen, "tree %d: GPU %d is reached more than once", root, e->child);
            return KVS_EINVAL;
        }
        s->parent[root * n + e->child] = e->parent;
        s->round[root * n + e->child] = e->round;
        if (e->round > s->rounds)
            s->rounds = e->round;
    }
    return 0;
}

/* ----------------------------------------------------------------- drawing */

/* Tree rooted at root with parent/round rows par, rnd: the subtree of u. */
static void draw(FILE *f, const tree_topo *t, int n, const int *par, const int *rnd, int root,
                 int u, int indent)
{
    for (int r = 1; r <= n; r++)
        for (int v = 0; v < n; v++) {
            if (v == root || par[v] != u || rnd[v] != r)
                continue;
            fprintf(f, "%*s+- round %d -> GPU %d (link %g)\n", indent, "", r, v,
                    tree_w(t, u, v));
            draw(f, t, n, par, rnd, root, v, indent + 4);
        }
}

void tree_set_print(const tree_topo *t, const tree_set *s, void *file)
{
    FILE *f = file;
    tree_score sc;
    tree_score_compute(t, s, &sc);
    for (int r = 0; r < s->n; r++) {
        int d = 0;
        for (int v = 0; v < s->n; v++)
            if (s->round[r * s->n + v] > d)
                d = s->round[r * s->n + v];
        fprintf(f, "tree %d: root GPU %d, %d rounds, bottleneck %g\n", r, r, d, sc.bottleneck[r]);
        fprintf(f, "  GPU %d\n", r);
        draw(f, t, s->n, s->parent + r * s->n, s->round + r * s->n, r, r, 4);
    }
}

void tree_wplan_print(const tree_topo *t, const tree_wplan *p, void *file)
{
    FILE *f = file;
    for (int k = 0; k < p->ntrees; k++) {
        int d = 0, r = p->root[k];
        for (int v = 0; v < p->n; v++)
            if (p->round[(size_t)k * (size_t)p->n + (size_t)v] > d)
                d = p->round[(size_t)k * (size_t)p->n + (size_t)v];
        fprintf(f, "tree %d: root GPU %d, parts %u/%u, %d rounds\n", k, r, p->parts[k],
                p->denominator, d);
        fprintf(f, "  GPU %d\n", r);
        draw(f, t, p->n, p->parent + (size_t)k * (size_t)p->n, p->round + (size_t)k * (size_t)p->n, r, r, 4);
    }
}
