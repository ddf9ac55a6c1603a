/* pack.c - weighted plans: several trees per root packed towards the
 * fractional packing bound, the bound itself, and slicing by parts.
 *
 * The packing is a pairwise Frank-Wolfe search on a soft maximum of the
 * link loads: for one root at a time, the cheapest in-tree under the
 * current link prices (minimum-cost arborescence, Chu-Liu/Edmonds) takes
 * weight from that root's most expensive tree, by an exact line search on
 * the soft maximum.  Prices sharpen from sweep to sweep.  Then the lightest
 * trees are dropped down to the tree budget, the rest re-balanced, and the
 * weights rounded to integer parts.  Deterministic: no randomness, a fixed
 * amount of work per topology. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tree/tree_int.h"

#define ARB_INF 1e300
#define POOL 12         /* trees kept per root while searching */
#define MIN_SHARE 16    /* a tree carries at least 1/MIN_SHARE of its root's share */
#define PLAN_GOOD 1.01  /* a start within 1% of the bound ends the search */
#define SWEEP_GOOD 1e-3 /* sweeps stop when the max load is within 0.1% of it */
#define FRESH_LARGE 5   /* sweeps with new trees above 32 GPUs (16: 24, 32: 12) */

/* ------------------------------------------------------------- plan storage */

int tree_wplan_init(tree_wplan *p, int n, int ntrees, uint32_t denominator)
{
    size_t cells;
    memset(p, 0, sizeof *p);
    if (n < 1 || n > TREE_MAX_N || ntrees < 1 || ntrees > 64 * TREE_MAX_N || denominator == 0)
        return KVS_EINVAL;
    cells = (size_t)ntrees * (size_t)n;
    p->root = malloc(sizeof(int) * (size_t)ntrees);
    p->parts = calloc((size_t)ntrees, sizeof(uint32_t));
    p->parent = malloc(sizeof(int) * cells);
    p->round = calloc(cells, sizeof(int));
    if (p->root == NULL || p->parts == NULL || p->parent == NULL || p->round == NULL) {
        tree_wplan_fini(p);
        return KVS_ENOMEM;
    }
    p->n = n;
    p->ntrees = ntrees;
    p->denominator = denominator;
    for (int k = 0; k < ntrees; k++)
        p->root[k] = -1;
    for (size_t i = 0; i < cells; i++)
        p->parent[i] = -2;
    return 0;
}

void tree_wplan_fini(tree_wplan *p)
{
    if (p == NULL)
        return;
    free(p->root);
    free(p->parts);
    free(p->parent);
    free(p->round);
    memset(p, 0, sizeof *p);
}

int tree_wplan_from_set(const tree_set *s, tree_wplan *out)
{
    int n = s->n, rc = tree_wplan_init(out, n, n, (uint32_t)n);
    if (rc != 0)
        return rc;
    memcpy(out->parent, s->parent, sizeof(int) * (size_t)n * (size_t)n);
    memcpy(out->round, s->round, sizeof(int) * (size_t)n * (size_t)n);
    for (int r = 0; r < n; r++) {
        out->root[r] = r;
        out->parts[r] = 1;
    }
    out->rounds = s->rounds;
    return 0;
}

/* ----------------------------------------------------------------- slicing */

void tree_wplan_slices(const tree_wplan *p, uint64_t count, size_t es, uint64_t min_bytes,
                       uint64_t *off, uint64_t *len)
{
    int K = p->ntrees;
    uint32_t eff[64 * TREE_MAX_N];
    uint64_t align = es > 0 && es <= 64 && 64 % es == 0 ? 64 / es : 1, cum = 0, prev = 0;
    memcpy(eff, p->parts, sizeof(uint32_t) * (size_t)K);
    /* a tree whose slice would be too small gives its parts to the heaviest
     * tree of its root (the first: trees are sorted by parts within a root) */
    for (int k = 0; k < K; k++) {
        unsigned __int128 bytes =
            (unsigned __int128)count * es * p->parts[k] / (p->denominator ? p->denominator : 1);
        int h = k;
        while (h > 0 && p->root[h - 1] == p->root[k])
            h--;
        if (h != k && bytes < min_bytes) {
            eff[h] += eff[k];
            eff[k] = 0;
        }
    }
    int last = K - 1; /* the last slice that is not merged away ends at count */
    while (last > 0 && eff[last] == 0)
        last--;
    for (int k = 0; k < K; k++) {
        uint64_t end;
        cum += eff[k];
        if (k >= last || p->denominator == 0) {
            end = count;
        } else {
            end = (uint64_t)((unsigned __int128)count * cum / p->denominator);
            end -= end % align;
        }
        if (end < prev)
            end = prev;
        off[k] = prev;
        len[k] = eff[k] ? end - prev : 0;
        if (eff[k] == 0)
            end = prev;
        prev = end;
    }
}

/* ---------------------------------------------------- minimum arborescence */

#define AN (2 * TREE_MAX_N) /* original nodes plus contracted cycles */

/* The workspace of the arborescence search.  The caller keeps the costs of
 * the n original nodes in c[v*AN+u] (cost of u as v's parent, >= ARB_INF:
 * no edge); arb_contract writes only rows and columns >= n (the contracted
 * cycles), so the block stays valid between calls and is updated link by
 * link. */
typedef struct arb_ws {
    double c[AN * AN];  /* c[v*AN+u]: cost of u as v's parent (reduced) */
    int o[AN * AN];     /* the original edge (parent * n + child) behind it */
    int in[AN], up[AN], state[AN], enter[AN];
    int mem[AN], mstart[AN], mcount[AN]; /* members of cycle c: mem[mstart[c]..] */
    int M;              /* nodes after the contraction (M - 1: the top) */
    int rmin[TREE_MAX_N];       /* cheapest entry of each original row (lowest u on ties) */
    double rminw[TREE_MAX_N];   /* and its cost (ARB_INF: none) */
    bool dirty[TREE_MAX_N];     /* the row minimum needs a rescan */
    double inw[AN];
    bool alive[AN];
} arb_ws;

/* The edges behind the original block (never overwritten). */
static void arb_init(arb_ws *w, int n)
{
    for (int v = 0; v < n; v++)
        for (int u = 0; u < n; u++)
            w->o[v * AN + u] = u * n + v;
}

/* The cheapest entry of original row v (ties: the lowest u). */
static void arb_row_min(arb_ws *w, int n, int v)
{
    double best = ARB_INF;
    int bu = -1;
    const double *cv = w->c + (size_t)v * AN;
    for (int u = 0; u < n; u++)
        if (u != v && cv[u] < best) {
            best = cv[u];
            bu = u;
        }
    w->rmin[v] = bu;
    w->rminw[v] = best;
    w->dirty[v] = false;
}

/* Set the cost of u as v's parent (original nodes), keeping the row
 * minimum: when the cheapest entry got dearer the row is rescanned, once,
 * by the next arb_contract. */
static void arb_set(arb_ws *w, int v, int u, double x)
{
    double old = w->c[v * AN + u];
    w->c[v * AN + u] = x;
    if (w->dirty[v])
        return;
    if (x < w->rminw[v] || (x == w->rminw[v] && u < w->rmin[v]))
        w->rmin[v] = u, w->rminw[v] = x;
    else if (u == w->rmin[v] && x > old)
        w->dirty[v] = true;
}

/* Chu-Liu/Edmonds without a root: every node takes its cheapest in-edge,
 * each cycle is contracted (one at a time, O(live nodes) row and column
 * updates per member: O(n^2) in all) until one node is left.  The
 * contraction does not depend on the root (the root never takes an in-edge
 * only because it is the last node left), so arb_expand reads the minimum
 * arborescence of every root out of it in O(n).  Needs a connected link
 * graph (usable links go both ways); 0, or -1 when it is not. */
static int arb_contract(arb_ws *w, int n)
{
    int M = n, stack[AN], top = 0, live[AN], nlive = n, oi[AN], oo[AN], nmem = 0, x = 0;
    double bi[AN], bo[AN];
    for (int v = 0; v < n; v++) {
        w->alive[v] = true;
        w->up[v] = -1;
        w->state[v] = 0;
        live[v] = v;
    }
    w->M = n;
    if (n < 2)
        return n == 1 ? 0 : -1;
    for (int v = 0; v < n; v++) {
        if (w->dirty[v])
            arb_row_min(w, n, v);
        w->in[v] = w->rmin[v];
        w->inw[v] = w->rminw[v];
        if (w->in[v] < 0)
            return -1;
    }
    /* one walk along in-edges contracts everything: while a node is left
     * outside the newest cycle, the cycle has an in-edge */
    for (;;) {
        if (w->state[x] != 1) {
            w->state[x] = 1;
            stack[top++] = x;
            x = w->in[x];
            continue;
        }
        /* a cycle: x ... stack top */
        int c = M++, k = top;
        while (stack[--k] != x)
            ;
        w->alive[c] = true;
        w->up[c] = -1;
        w->mstart[c] = nmem;
        w->mcount[c] = top - k;
        for (int i = k; i < top; i++) {
            w->alive[stack[i]] = false;
            w->up[stack[i]] = c;
            w->mem[nmem++] = stack[i];
        }
        /* in-edges of c (cheapest over the members, reduced by the member's
         * chosen in-edge) and out-edges of c, over the live nodes; members
         * in cycle order, strict minimum: the first one wins ties; the
         * member index is kept, its edge looked up once at the end.  An
         * entry without an edge stays >= ARB_INF.  The first member's pass
         * also drops the members from the live list. */
        {
            int m = stack[k];
            const double *row = w->c + (size_t)m * AN;
            double im = w->inw[m];
            for (int j = 0; j < nlive;) {
                int u = live[j];
                if (!w->alive[u]) {
                    live[j] = live[--nlive];
                    continue;
                }
                bi[j] = row[u] - im;
                bo[j] = w->c[u * AN + m];
                oi[j] = oo[j] = m;
                j++;
            }
        }
        for (int i = k + 1; i < top; i++) {
            int m = stack[i];
            const double *row = w->c + (size_t)m * AN;
            double im = w->inw[m];
            for (int j = 0; j < nlive; j++) {
                int u = live[j];
                double x1 = row[u] - im, x2 = w->c[u * AN + m];
                bool t1 = x1 < bi[j], t2 = x2 < bo[j];
                bi[j] = t1 ? x1 : bi[j];
                oi[j] = t1 ? m : oi[j];
                bo[j] = t2 ? x2 : bo[j];
                oo[j] = t2 ? m : oo[j];
            }
        }
        /* write row and column c; live nodes whose chosen parent went into
         * c now point at c; c's own cheapest in-edge (ties: the lowest id) */
        double best = ARB_INF;
        int bu = -1;
        for (int j = 0; j < nlive; j++) {
            int u = live[j];
            w->c[c * AN + u] = bi[j];
            w->o[c * AN + u] = w->o[oi[j] * AN + u];
            w->c[u * AN + c] = bo[j];
            w->o[u * AN + c] = w->o[u * AN + oo[j]];
            if (w->in[u] >= 0 && !w->alive[w->in[u]] && w->up[w->in[u]] == c)
                w->in[u] = c;
            if (bi[j] < best || (bi[j] == best && bu >= 0 && u < bu)) {
                best = bi[j];
                bu = u;
            }
        }
        live[nlive++] = c;
        w->c[c * AN + c] = ARB_INF;
        w->in[c] = bu;
        w->inw[c] = best;
        top = k;
        if (bu < 0) {
            w->M = M;
            return nlive == 1 ? 0 : -1; /* the top: everything is inside */
        }
        w->state[c] = 1;
        stack[top++] = c;
        x = w->in[c];
    }
}

/* The minimum-cost arborescence out of root from the last arb_contract:
 * the top is entered at the root; every cycle keeps the chosen in-edges of
 * its members except the one of the member its entering edge reaches.  par
 * gets parent pointers (par[root] = -1).  0, or -1 on a broken contraction. */
static int arb_expand(arb_ws *w, int n, int root, int *par)
{
    int M = w->M;
    if (M < 1)
        return -1;
    w->enter[M - 1] = -1;
    for (int c = M - 1; c >= n; c--) { /* expand, newest first */
        int e = w->enter[c], x = e < 0 ? root : e % n;
        while (x >= 0 && w->up[x] != c)
            x = w->up[x];
        if (x < 0)
            return -1;
        for (int i = 0; i < w->mcount[c]; i++) {
            int m = w->mem[w->mstart[c] + i];
            w->enter[m] = m == x ? e : w->o[m * AN + w->in[m]];
        }
    }
    for (int v = 0; v < n; v++) {
        if (v == root) {
            if (w->enter[v] != -1 && M > 1)
                return -1;
            par[v] = -1;
            continue;
        }
        if (w->enter[v] < 0 || w->enter[v] % n != v)
            return -1;
        par[v] = w->enter[v] / n;
    }
    return 0;
}

int tree_min_intrees(int n, const double *cost, int *par)
{
    arb_ws *w;
    int rc = 0;
    if (n < 1 || n > TREE_MAX_N)
        return KVS_EINVAL;
    if ((w = calloc(1, sizeof *w)) == NULL)
        return KVS_ENOMEM;
    arb_init(w, n);
    for (int v = 0; v < n; v++) {
        for (int u = 0; u < n; u++) {
            double x = cost[v * n + u];
            w->c[v * AN + u] = u != v && isfinite(x) && x < ARB_INF ? x : ARB_INF;
        }
        arb_row_min(w, n, v);
    }
    if (arb_contract(w, n) != 0)
        rc = KVS_EINVAL;
    for (int r = 0; r < n && rc == 0; r++)
        if (arb_expand(w, n, r, par + (size_t)r * (size_t)n) != 0)
            rc = KVS_EINVAL;
    free(w);
    return rc;
}

/* ----------------------------------------------------------------- packing */

typedef struct pk_tree {
    double x;                   /* weight (fraction of the whole array) */
    double price;               /* scratch */
    int par[TREE_MAX_N];
} pk_tree;

typedef struct packer {
    const tree_topo *t;
    int n;
    double inv[TREE_MAX_N * TREE_MAX_N];   /* 1/w[c][p] on usable links, 0 else */
    double load[TREE_MAX_N * TREE_MAX_N];  /* directed reduce load c -> p */
    double price[TREE_MAX_N * TREE_MAX_N]; /* exp(beta * (load / lref - 1)) */
    double beta, lref;
    int cnt[TREE_MAX_N];
    bool arb_ok;            /* the contraction in ws is usable */
    bool costs;             /* keep ws's cost block with the prices (new trees wanted) */
    int cap;                /* trees per root */
    pk_tree pool[TREE_MAX_N][POOL];
    arb_ws ws;              /* its cost block: price * inv, kept with the prices */
} packer;

static double pk_max(const packer *P)
{
    double mx = 0;
    for (int i = 0; i < P->n * P->n; i++)
        if (P->load[i] > mx)
            mx = P->load[i];
    return mx;
}

/* The arborescence cost of link c -> p (as arb_contract reads it). */
static void pk_cost(packer *P, int c, int p)
{
    double iv = P->inv[c * P->n + p];
    arb_set(&P->ws, c, p, iv > 0 ? P->price[c * P->n + p] * iv : ARB_INF);
}

static void pk_prices(packer *P)
{
    int n = P->n;
    for (int i = 0; i < n * n; i++)
        P->price[i] = P->inv[i] > 0 ? exp(P->beta * (P->load[i] / P->lref - 1)) : 0;
    if (!P->costs)
        return;
    for (int c = 0; c < n; c++) {
        for (int p = 0; p < n; p++) {
            double iv = P->inv[c * n + p];
            P->ws.c[c * AN + p] = iv > 0 ? P->price[c * n + p] * iv : ARB_INF;
        }
        arb_row_min(&P->ws, n, c);
    }
}

static void pk_add(packer *P, int r, const int *par, double x)
{
    int n = P->n;
    for (int v = 0; v < n; v++)
        if (v != r) {
            int e = v * n + par[v];
            P->load[e] += x * P->inv[e];
            if (P->load[e] < 0)
                P->load[e] = 0;
            P->price[e] = exp(P->beta * (P->load[e] / P->lref - 1));
            if (P->costs)
                pk_cost(P, v, par[v]);
        }
}

static double tree_price(const packer *P, int r, const int *par)
{
    double s = 0;
    int n = P->n;
    for (int v = 0; v < n; v++)
        if (v != r)
            s += P->price[v * n + par[v]] * P->inv[v * n + par[v]];
    return s;
}

/* Soft-max derivative along moving g from tree A to tree B of root r. */
typedef struct pk_dir {
    int m;                      /* links whose load changes */
    int e[2 * TREE_MAX_N];
    double d[2 * TREE_MAX_N];   /* load change per unit moved */
    int ng;                     /* groups of links with the same d */
    double gd[2 * TREE_MAX_N];  /* their d */
    double gs[2 * TREE_MAX_N];  /* sum of d * price over the group */
} pk_dir;

static void pk_direction(const packer *P, int r, const int *from, const int *to, pk_dir *D)
{
    int n = P->n;
    D->m = 0;
    for (int v = 0; v < n; v++) {
        if (v == r || from[v] == to[v])
            continue;
        D->e[D->m] = v * n + to[v];
        D->d[D->m++] = P->inv[v * n + to[v]];
        D->e[D->m] = v * n + from[v];
        D->d[D->m++] = -P->inv[v * n + from[v]];
    }
    /* price(l + g d) = price(l) exp(beta g d / lref): one exp per distinct
     * d (links of one speed) instead of one per link */
    D->ng = 0;
    for (int i = 0; i < D->m; i++) {
        int j = 0;
        while (j < D->ng && D->gd[j] != D->d[i])
            j++;
        if (j == D->ng) {
            D->gd[j] = D->d[i];
            D->gs[j] = 0;
            D->ng++;
        }
        D->gs[j] += D->d[i] * P->price[D->e[i]];
    }
}

/* First and second derivative of the soft maximum at g. */
static double pk_deriv(const packer *P, const pk_dir *D, double g, double *second)
{
    double s = 0, s2 = 0, k = P->beta / P->lref;
    for (int j = 0; j < D->ng; j++) {
        double x = D->gs[j] * exp(k * g * D->gd[j]);
        s += x;
        s2 += k * D->gd[j] * x;
    }
    if (second != NULL)
        *second = s2;
    return s;
}

/* Exact line search on [0, gmax] for the convex soft maximum: Newton's
 * method on the derivative from 0, kept inside the bracket where the
 * derivative changes sign (bisection when a step would leave it); stops
 * when a step moves less than gmax / 10^4 or the bracket is below gmax /
 * 1000.  A handful of evaluations where bisection needed twelve. */
static double pk_step(const packer *P, const pk_dir *D, double gmax)
{
    double lo = 0, hi = gmax, g = 0, d, d2;
    bool hi_ok = false; /* the derivative at hi is known to be > 0 */
    if (D->m == 0 || (d = pk_deriv(P, D, 0, &d2)) >= 0)
        return 0;
    for (int it = 0; it < 32; it++) {
        double ng = d2 > 0 ? g - d / d2 : hi;
        bool close;
        if (ng >= hi) {
            if (!hi_ok) {
                if (pk_deriv(P, D, gmax, NULL) <= 0)
                    return gmax;
                hi_ok = true;
            }
            ng = 0.5 * (lo + hi);
        } else if (ng <= lo) {
            ng = 0.5 * (lo + hi);
        }
        close = fabs(ng - g) <= gmax * 1e-4;
        g = ng;
        d = pk_deriv(P, D, g, &d2);
        if (d < 0) {
            lo = g;
        } else {
            hi = g;
            hi_ok = true;
        }
        if (close)
            return g;
        if (hi_ok && hi - lo <= gmax * 1e-3)
            break;
    }
    return lo;
}

static int same_tree(int n, const int *a, const int *b)
{
    return memcmp(a, b, sizeof(int) * (size_t)n) == 0;
}

/* One pairwise step for root r: the cheapest tree (new or from the pool when
 * fresh is false) takes weight from the dearest one in the pool. */
static void pk_root_step(packer *P, int r, bool fresh)
{
    int n = P->n, away = -1, tgt = -1, newpar[TREE_MAX_N];
    double pa = -1, pt = ARB_INF;
    pk_tree *pool = P->pool[r];
    for (int k = 0; k < P->cnt[r]; k++) {
        pool[k].price = tree_price(P, r, pool[k].par);
        if (pool[k].x > 0 && pool[k].price > pa) {
            pa = pool[k].price;
            away = k;
        }
        if (pool[k].price < pt) {
            pt = pool[k].price;
            tgt = k;
        }
    }
    if (fresh) {
        if (P->arb_ok && arb_expand(&P->ws, n, r, newpar) == 0) {
            double pn = tree_price(P, r, newpar);
            int dup = -1;
            for (int k = 0; k < P->cnt[r]; k++)
                if (same_tree(n, pool[k].par, newpar))
                    dup = k;
            if (dup >= 0) {
                tgt = dup;
                pt = pool[dup].price;
            } else if (pn < pt * (1 - 1e-12)) {
                if (P->cnt[r] < P->cap) {
                    tgt = P->cnt[r]++;
                    memcpy(pool[tgt].par, newpar, sizeof(int) * (size_t)n);
                    pool[tgt].x = 0;
                } else {
                    /* the new tree replaces the lightest one other than the
                     * away tree and takes over its weight (cheaper: descent) */
                    int lk = -1;
                    for (int k = 0; k < P->cnt[r]; k++)
                        if (k != away && (lk < 0 || pool[k].x < pool[lk].x))
                            lk = k;
                    if (lk < 0)
                        return;
                    pk_add(P, r, pool[lk].par, -pool[lk].x);
                    pk_add(P, r, newpar, pool[lk].x);
                    memcpy(pool[lk].par, newpar, sizeof(int) * (size_t)n);
                    tgt = lk;
                }
                pt = pn;
            }
        }
    }
    if (away < 0 || tgt < 0 || tgt == away || !(pt < pa * (1 - 1e-12)))
        goto compact;
    {
        pk_dir D;
        double g;
        pk_direction(P, r, pool[away].par, pool[tgt].par, &D);
        g = pk_step(P, &D, pool[away].x);
        if (g > 0) {
            pk_add(P, r, pool[away].par, -g);
            pk_add(P, r, pool[tgt].par, g);
            pool[away].x -= g;
            pool[tgt].x += g;
            if (pool[away].x < 1e-15)
                pool[away].x = 0;
        }
    }
compact:
    /* drop trees without weight (keep at least one) */
    for (int k = 0; k < P->cnt[r];) {
        if (pool[k].x <= 0 && P->cnt[r] > 1) {
            pool[k] = pool[--P->cnt[r]];
            continue;
        }
        k++;
    }
}

static void pk_sweeps(packer *P, int sweeps, double beta0, double beta1, bool fresh, double stop)
{
    int n = P->n;
    for (int s = 0; s < sweeps; s++) {
        P->beta = sweeps > 1 ? beta0 * pow(beta1 / beta0, (double)s / (sweeps - 1)) : beta1;
        P->lref = pk_max(P);
        if (!(P->lref > 0) || P->lref <= stop)
            return;
        P->costs = fresh;
        pk_prices(P);
        for (int r = 0; r < n; r++) {
            if (fresh) /* the prices changed with the last root's step */
                P->arb_ok = arb_contract(&P->ws, n) == 0;
            pk_root_step(P, r, fresh);
        }
    }
}

/* Loads from the pools. */
static void pk_reload(packer *P)
{
    int n = P->n;
    memset(P->load, 0, sizeof P->load);
    for (int r = 0; r < n; r++)
        for (int k = 0; k < P->cnt[r]; k++)
            for (int v = 0; v < n; v++)
                if (v != r) {
                    int e = v * n + P->pool[r][k].par[v];
                    P->load[e] += P->pool[r][k].x * P->inv[e];
                }
}

/* The other start: per root in order, the cheapest in-tree under prices of
 * the loads of the roots before it (multiplicative weights).  On uniform
 * all-to-all matrices this is the in-star of every root, at the bound. */
/* The bound of the single-GPU cuts (a lower bound of the packing bound). */
static double pk_single_bound(const packer *P)
{
    int n = P->n;
    double lb = 0;
    for (int v = 0; v < n; v++) {
        double c = 0;
        for (int j = 0; j < n; j++)
            c += P->inv[v * n + j] > 0 ? 1 / P->inv[v * n + j] : 0;
        if ((n - 1) / (n * c) > lb)
            lb = (n - 1) / (n * c);
    }
    return lb;
}

static void pk_greedy_seed(packer *P)
{
    int n = P->n;
    memset(P->load, 0, sizeof P->load);
    P->lref = pk_single_bound(P);
    P->beta = 8;
    P->costs = true;
    pk_prices(P);
    for (int r = 0; r < n; r++) {
        int par[TREE_MAX_N];
        P->arb_ok = arb_contract(&P->ws, n) == 0;
        if (P->arb_ok && arb_expand(&P->ws, n, r, par) == 0)
            memcpy(P->pool[r][0].par, par, sizeof par);
        P->cnt[r] = 1;
        P->pool[r][0].x = 1.0 / n;
        pk_add(P, r, P->pool[r][0].par, 1.0 / n);
    }
}

/* Drop the lightest trees until at most max remain (at least one per root),
 * and every tree below 1/MIN_SHARE of its root's share; re-normalise. */
static void pk_prune(packer *P, int max)
{
    int n = P->n, total = 0;
    double share = 1.0 / n;
    for (int r = 0; r < n; r++)
        total += P->cnt[r];
    for (;;) {
        int br = -1, bk = -1;
        double bx = ARB_INF;
        for (int r = 0; r < n; r++)
            for (int k = 0; k < P->cnt[r]; k++)
                if (P->cnt[r] > 1 && P->pool[r][k].x < bx) {
                    bx = P->pool[r][k].x;
                    br = r;
                    bk = k;
                }
        if (br < 0 || (total <= max && bx >= share / MIN_SHARE))
            break;
        P->pool[br][bk] = P->pool[br][--P->cnt[br]];
        total--;
    }
    memset(P->load, 0, sizeof P->load);
    for (int r = 0; r < n; r++) {
        double sum = 0;
        for (int k = 0; k < P->cnt[r]; k++)
            sum += P->pool[r][k].x;
        for (int k = 0; k < P->cnt[r]; k++) {
            P->pool[r][k].x = sum > 0 ? P->pool[r][k].x * share / sum : share / P->cnt[r];
            for (int v = 0; v < n; v++)
                if (v != r)
                    P->load[v * n + P->pool[r][k].par[v]] +=
                        P->pool[r][k].x * P->inv[v * n + P->pool[r][k].par[v]];
        }
    }
}

/* pk_prune one tree at a time: the lightest tree goes (its root's others
 * take its weight in proportion), then a few re-balancing sweeps, until at
 * most max remain; then pk_prune's share rule. */
static void pk_prune_slowly(packer *P, int max, int sweeps, double stop)
{
    int n = P->n, total = 0;
    for (int r = 0; r < n; r++)
        total += P->cnt[r];
    while (total > max) {
        int br = -1, bk = -1;
        double bx = ARB_INF;
        for (int r = 0; r < n; r++)
            for (int k = 0; k < P->cnt[r]; k++)
                if (P->cnt[r] > 1 && P->pool[r][k].x < bx) {
                    bx = P->pool[r][k].x;
                    br = r;
                    bk = k;
                }
        if (br < 0)
            break;
        P->pool[br][bk] = P->pool[br][--P->cnt[br]];
        total--;
        double sum = 0;
        for (int k = 0; k < P->cnt[br]; k++)
            sum += P->pool[br][k].x;
        for (int k = 0; k < P->cnt[br]; k++)
            P->pool[br][k].x = sum > 0 ? P->pool[br][k].x / sum / n : 1.0 / n / P->cnt[br];
        pk_reload(P);
        pk_sweeps(P, sweeps, 400, 800, false, stop);
    }
    pk_prune(P, max);
}

/* Integer parts per root (largest remainder), trees with 0 parts dropped,
 * written to out sorted by root then parts descending. */
static int pk_emit(const packer *P, tree_wplan *out)
{
    int n = P->n, total = 0, k = 0, rc;
    uint32_t parts[TREE_MAX_N][POOL];
    int order[TREE_MAX_N][POOL];
    for (int r = 0; r < n; r++) {
        double rem[POOL];
        uint32_t used = 0;
        const pk_tree *pool = P->pool[r];
        for (int i = 0; i < P->cnt[r]; i++) {
            double q = pool[i].x * n * TREE_PLAN_QUANTUM;
            parts[r][i] = (uint32_t)floor(q);
            rem[i] = q - floor(q);
            used += parts[r][i];
        }
        while (used < TREE_PLAN_QUANTUM) {
            int b = 0;
            for (int i = 1; i < P->cnt[r]; i++)
                if (rem[i] > rem[b])
                    b = i;
            parts[r][b]++;
            rem[b] = -1;
            used++;
        }
        while (used > TREE_PLAN_QUANTUM) { /* rounding noise only */
            int b = 0;
            for (int i = 1; i < P->cnt[r]; i++)
                if (parts[r][i] > parts[r][b])
                    b = i;
            parts[r][b]--;
            used--;
        }
        for (int i = 0; i < P->cnt[r]; i++) {
            int j = i;
            order[r][i] = i;
            while (j > 0 && parts[r][order[r][j - 1]] < parts[r][i]) {
                order[r][j] = order[r][j - 1];
                j--;
            }
            order[r][j] = i;
            if (parts[r][i] > 0)
                total++;
        }
    }
    if ((rc = tree_wplan_init(out, n, total, (uint32_t)n * TREE_PLAN_QUANTUM)) != 0)
        return rc;
    for (int r = 0; r < n; r++)
        for (int i = 0; i < P->cnt[r]; i++) {
            int j = order[r][i], d;
            if (parts[r][j] == 0)
                continue;
            out->root[k] = r;
            out->parts[k] = parts[r][j];
            memcpy(out->parent + (size_t)k * (size_t)n, P->pool[r][j].par, sizeof(int) * (size_t)n);
            d = tree_assign_rounds(n, r, out->parent + (size_t)k * (size_t)n,
                                   out->round + (size_t)k * (size_t)n);
            if (d > out->rounds)
                out->rounds = d;
            k++;
        }
    return 0;
}

int tree_plan_weighted(const tree_topo *t, const tree_opts *o, tree_wplan *out, char *err,
                       size_t errlen)
{
    int n = t->n, rc = 0, max, sweeps;
    double lb1, target, stop;
    tree_set seed;
    packer *P = NULL;
    memset(out, 0, sizeof *out);
    if (n < 1 || n > TREE_MAX_N || t->w == NULL) {
        snprintf(err, errlen, "topology has %d GPUs, allowed 1..%d", n, TREE_MAX_N);
        return KVS_EINVAL;
    }
    if (!(o->penalty > 0 && o->penalty <= 1)) {
        snprintf(err, errlen, "link usage penalty %g: expected a number in (0, 1]", o->penalty);
        return KVS_EINVAL;
    }
    if ((rc = tree_topo_check_connected(t, err, errlen)) != 0)
        return rc;
    if ((rc = tree_set_init(&seed, n)) != 0)
        goto oom;
    if (n < 3 || !o->weighted) { /* one tree per root: the v1 planner */
        tree_set_fini(&seed);
        if ((rc = tree_plan(t, o, &seed, err, errlen)) != 0)
            return rc;
        rc = tree_wplan_from_set(&seed, out);
        tree_set_fini(&seed);
        if (rc != 0)
            goto oom;
        return 0;
    }
    P = calloc(1, sizeof *P);
    if (P == NULL) {
        tree_set_fini(&seed);
        goto oom;
    }
    P->t = t;
    P->n = n;
    for (int c = 0; c < n; c++)
        for (int p = 0; p < n; p++)
            P->inv[c * n + p] = tree_link(t, c, p) ? 1.0 / tree_w(t, c, p) : 0;
    arb_init(&P->ws, n);
    max = o->max_trees > 0 ? o->max_trees : 4 * n;
    if (max < n)
        max = n;
    P->cap = max / n < POOL ? max / n : POOL;
    sweeps = (int)((n <= 16 ? 24 : n <= 32 ? 12 : FRESH_LARGE) * o->effort / 100);
    if (sweeps < 2)
        sweeps = 2;
    lb1 = pk_single_bound(P);
    /* the target: the exact bound (a few ms at n = 64) */
    if (tree_frac_bound(t, &target, NULL, err, errlen) != 0)
        target = lb1;
    stop = target * (1 + SWEEP_GOOD);
    /* starts: the greedy one, the construction of the configured MXNet mode,
     * and up to 32 GPUs (only while the plan is more than 4% above the
     * bound) the other mode's; the best plan wins (ties: the earlier); a
     * plan within PLAN_GOOD of the bound ends the search */
    for (int start = 0; start < (n <= 32 ? 3 : 2); start++) {
        tree_wplan cand;
        if (start > 0) {
            tree_mode m = start == 1 ? o->mode
                                     : (o->mode == TREE_MODE_KL ? TREE_MODE_BACKTRACK : TREE_MODE_KL);
            if (start == 2 && tree_wplan_load(t, out) <= target * 1.04)
                break;
            if (tree_construct(t, m, o->penalty, true, true, &seed) < 0) {
                rc = KVS_ENOMEM;
                tree_wplan_fini(out);
                break;
            }
            for (int r = 0; r < n; r++) {
                P->cnt[r] = 1;
                P->pool[r][0].x = 1.0 / n;
                memcpy(P->pool[r][0].par, seed.parent + r * n, sizeof(int) * (size_t)n);
            }
            pk_reload(P);
        } else {
            pk_greedy_seed(P);
        }
        if (pk_max(P) > lb1 * (1 + 1e-9)) { /* else: at the bound already */
            /* new trees while prices sharpen; then, within the kept trees,
             * two or three times as many (cheap) re-balancing sweeps */
            pk_sweeps(P, sweeps, 8, 400, true, stop);
            pk_prune(P, max);
            pk_sweeps(P, (n <= 32 ? 3 : 2) * sweeps, 400, 800, false, stop);
        }
        if ((rc = pk_emit(P, start == 0 ? out : &cand)) != 0) {
            if (start > 0)
                tree_wplan_fini(out);
            break;
        }
        if (start > 0) {
            if (tree_wplan_load(t, &cand) < tree_wplan_load(t, out) * (1 - 1e-9)) {
                tree_wplan_fini(out);
                *out = cand;
            } else {
                tree_wplan_fini(&cand);
            }
        }
        if (tree_wplan_load(t, out) <= target * PLAN_GOOD)
            break;
    }
    /* up to 16 GPUs (where a start costs a few ms), while the plan is more
     * than 5% above the bound: more greedy starts, searching with twice the
     * trees per root (pruned to the same total: it closes the gap where a
     * few roots need more trees than others) and with longer searches */
    static const struct { int cap2, mult; } extra[] = {{1, 1}, {1, 2}, {0, 3}};
    for (size_t x = 0; rc == 0 && n <= 16 && x < sizeof extra / sizeof extra[0] &&
                       tree_wplan_load(t, out) > target * 1.05;
         x++) {
        tree_wplan cand;
        int cap = extra[x].cap2 ? 2 * max / n : max / n;
        P->cap = cap < POOL ? cap : POOL;
        pk_greedy_seed(P);
        pk_sweeps(P, extra[x].mult * sweeps, 8, 400, true, stop);
        pk_prune_slowly(P, max, 2, stop);
        pk_sweeps(P, 3 * extra[x].mult * sweeps, 400, 800, false, stop);
        if ((rc = pk_emit(P, &cand)) != 0) {
            tree_wplan_fini(out);
        } else if (tree_wplan_load(t, &cand) < tree_wplan_load(t, out) * (1 - 1e-9)) {
            tree_wplan_fini(out);
            *out = cand;
        } else {
            tree_wplan_fini(&cand);
        }
    }
    tree_set_fini(&seed);
    free(P);
    if (rc != 0)
        goto oom;
    if (o->log) {
        fprintf(stderr, "tree: weighted plan, %d trees, predicted load %g\n", out->ntrees,
                tree_wplan_load(t, out));
        tree_topo_print(t, stderr);
        tree_wplan_print(t, out, stderr);
    }
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
    return KVS_ENOMEM;
}

/* ------------------------------------------------------------------- bound */

#define FN (TREE_MAX_N + 2)

typedef struct flow {
    int V;
    double cap[FN * FN];
    double base[FN * FN];   /* the link capacities, filled once per cut search */
    int level[FN], it[FN];
} flow;

static bool fl_bfs(flow *F, int s, int t, double eps)
{
    int q[FN], h = 0, tl = 0;
    for (int i = 0; i < F->V; i++)
        F->level[i] = -1;
    F->level[s] = 0;
    q[tl++] = s;
    while (h < tl) {
        int u = q[h++];
        for (int v = 0; v < F->V; v++)
            if (F->level[v] < 0 && F->cap[u * FN + v] > eps) {
                F->level[v] = F->level[u] + 1;
                q[tl++] = v;
            }
    }
    return F->level[t] >= 0;
}

static double fl_dfs(flow *F, int u, int t, double f, double eps)
{
    if (u == t)
        return f;
    for (; F->it[u] < F->V; F->it[u]++) {
        int v = F->it[u];
        double c = F->cap[u * FN + v];
        if (c > eps && F->level[v] == F->level[u] + 1) {
            double d = fl_dfs(F, v, t, f < c ? f : c, eps);
            if (d > 0) {
                F->cap[u * FN + v] -= d;
                F->cap[v * FN + u] += d;
                return d;
            }
        }
    }
    return 0;
}

/* min over nonempty S of c(S) + mu |S|; S written to in (1 = in S). */
static double min_cut_set(const tree_topo *t, double mu, flow *F, bool *best_s)
{
    int n = t->n, s = n, tt = n + 1;
    double best = ARB_INF, big = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (tree_link(t, i, j))
                big += tree_w(t, i, j);
    big = 4 * (big + mu * n) + 1;
    memset(F->base, 0, sizeof F->base);
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++)
            if (tree_link(t, a, b))
                F->base[a * FN + b] = tree_w(t, a, b);
    for (int i = 0; i < n; i++) {
        double f = 0, eps = 1e-12 * big, d;
        F->V = n + 2;
        memcpy(F->cap, F->base, sizeof F->cap);
        for (int a = 0; a < n; a++)
            F->cap[a * FN + tt] = a < i ? big : mu;
        F->cap[s * FN + i] = big;
        while (fl_bfs(F, s, tt, eps)) {
            for (int v = 0; v < F->V; v++)
                F->it[v] = 0;
            while ((d = fl_dfs(F, s, tt, ARB_INF, eps)) > 0)
                f += d;
        }
        if (f < best - 1e-12 * big) {
            best = f;
            fl_bfs(F, s, tt, eps); /* reachable from s = the source side */
            for (int v = 0; v < n; v++)
                best_s[v] = F->level[v] >= 0;
        }
    }
    return best;
}

int tree_frac_bound(const tree_topo *t, double *lb, bool *cut, char *err, size_t errlen)
{
    int n = t->n, rc;
    double mu = ARB_INF;
    bool S[TREE_MAX_N], B[TREE_MAX_N] = {false};
    flow *F;
    *lb = 0;
    if ((rc = tree_topo_check_connected(t, err, errlen)) != 0)
        return rc;
    if (n < 2) {
        if (cut != NULL)
            cut[0] = false;
        return 0;
    }
    /* start: the best single GPU */
    for (int v = 0; v < n; v++) {
        double c = 0;
        for (int j = 0; j < n; j++)
            if (tree_link(t, v, j))
                c += tree_w(t, v, j);
        if (c / (n - 1) < mu) {
            mu = c / (n - 1);
            memset(B, 0, sizeof B);
            B[v] = true;
        }
    }
    F = malloc(sizeof *F);
    if (F == NULL) {
        snprintf(err, errlen, "out of memory");
        return KVS_ENOMEM;
    }
    for (int iter = 0; iter < 64; iter++) {
        double v = min_cut_set(t, mu, F, S), c = 0;
        int k = 0;
        if (!(v - mu * n < -1e-10 * mu * n))
            break;
        for (int a = 0; a < n; a++) {
            if (!S[a])
                continue;
            k++;
            for (int b = 0; b < n; b++)
                if (!S[b] && tree_link(t, a, b))
                    c += tree_w(t, a, b);
        }
        if (k >= n || !(c / (n - k) < mu))
            break;
        mu = c / (n - k);
        memcpy(B, S, sizeof B);
    }
    free(F);
    *lb = 1.0 / (n * mu);
    if (cut != NULL)
        memcpy(cut, B, sizeof(bool) * (size_t)n);
    return 0;
}
