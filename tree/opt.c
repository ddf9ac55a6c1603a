/* opt.c - joint local search over all N trees.
 *
 * State: parent pointers of every tree; rounds are derived (optimal child
 * order, tree_assign_rounds) and a tree may not need more than rcap rounds.
 * A move re-parents one GPU v in one tree t to another neighbour p (not in
 * v's subtree).  cnt[c][p] = trees whose reduce sends c -> p.
 *
 * Search order (lexicographic, smaller is better):
 *   L   = max cnt/w over directed links          (reduce_load_time * n)
 *   nL  = links at L
 *   -B  = -(sum of per-tree bottlenecks)
 *   C   = max cnt, nC = links at C               (directed congestion)
 *   S2  = sum of (cnt/w)^2                       (spreads load)
 *   D   = sum of tree depths
 * First-improvement hill climbing in a seeded random order, then iterated
 * local search: perturb the best solution with a few moves that keep L, climb
 * again.  Budget: move evaluations, so results never depend on the clock. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tree/tree_int.h"

#define EPS 1e-9

typedef struct metrics {
    double L, B, S2;
    int nL, C, nC, D, Dmax;
} metrics;

typedef struct opt {
    int n, rcap;
    const tree_topo *t;
    double inv[TREE_MAX_N * TREE_MAX_N];   /* 1 / w[c][p] for usable links */
    double ew[TREE_MAX_N * TREE_MAX_N];    /* edge weight: min(w[c][p], w[p][c]) */
    int nb[TREE_MAX_N][TREE_MAX_N], nnb[TREE_MAX_N];
    int *par;                              /* n*n, the tree set's */
    int cnt[TREE_MAX_N * TREE_MAX_N];
    double bott[TREE_MAX_N];
    int depth[TREE_MAX_N];
    metrics m;
    uint64_t rng;
} opt;

static bool feq(double a, double b)
{
    return fabs(a - b) <= EPS * (fabs(a) + fabs(b) + 1e-30);
}

/* <0 when a is better: search order */
static int cmp_search(const metrics *a, const metrics *b)
{
    if (!feq(a->L, b->L))
        return a->L < b->L ? -1 : 1;
    if (a->nL != b->nL)
        return a->nL < b->nL ? -1 : 1;
    if (!feq(a->B, b->B))
        return a->B > b->B ? -1 : 1;
    if (a->C != b->C)
        return a->C < b->C ? -1 : 1;
    if (a->nC != b->nC)
        return a->nC < b->nC ? -1 : 1;
    if (!feq(a->S2, b->S2))
        return a->S2 < b->S2 ? -1 : 1;
    if (a->D != b->D)
        return a->D < b->D ? -1 : 1;
    return 0;
}

/* <0 when a is better: the order of tree_score_cmp, then the search order */
static int cmp_final(const metrics *a, const metrics *b)
{
    if (!feq(a->L, b->L))
        return a->L < b->L ? -1 : 1;
    if (!feq(a->B, b->B))
        return a->B > b->B ? -1 : 1;
    if (a->C != b->C)
        return a->C < b->C ? -1 : 1;
    if (a->Dmax != b->Dmax)
        return a->Dmax < b->Dmax ? -1 : 1;
    return cmp_search(a, b);
}

static double tree_bott(const opt *o, int t)
{
    int n = o->n;
    const int *par = o->par + t * n;
    double b = INFINITY;
    for (int v = 0; v < n; v++)
        if (v != t && o->ew[v * n + par[v]] < b)
            b = o->ew[v * n + par[v]];
    return n > 1 ? b : 0;
}

/* Fold one used directed link (load l, trees cnt) into the maxima of m:
 * the largest load and how many links reach it, the largest congestion. */
static void note_link(metrics *m, double l, int cnt)
{
    if (l > m->L + EPS * (l + m->L)) {
        m->L = l;
        m->nL = 1;
    } else if (feq(l, m->L)) {
        m->nL++;
    }
    if (cnt > m->C) {
        m->C = cnt;
        m->nC = 1;
    } else if (cnt == m->C) {
        m->nC++;
    }
}

static void recompute(opt *o)
{
    int n = o->n;
    metrics *m = &o->m;
    memset(o->cnt, 0, sizeof o->cnt);
    memset(m, 0, sizeof *m);
    for (int t = 0; t < n; t++) {
        for (int v = 0; v < n; v++)
            if (v != t)
                o->cnt[v * n + o->par[t * n + v]]++;
        o->bott[t] = tree_bott(o, t);
        m->B += o->bott[t];
        o->depth[t] = tree_assign_rounds(n, t, o->par + t * n, NULL);
        m->D += o->depth[t];
        if (o->depth[t] > m->Dmax)
            m->Dmax = o->depth[t];
    }
    for (int i = 0; i < n * n; i++) {
        double l = o->cnt[i] * o->inv[i];
        if (o->cnt[i] == 0)
            continue;
        m->S2 += l * l;
        note_link(m, l, o->cnt[i]);
    }
}

static void refresh_max(opt *o)
{
    int n = o->n;
    metrics *m = &o->m;
    m->L = 0;
    m->nL = 0;
    m->C = 0;
    m->nC = 0;
    for (int i = 0; i < n * n; i++) {
        double l = o->cnt[i] * o->inv[i];
        if (o->cnt[i] == 0)
            continue;
        note_link(m, l, o->cnt[i]);
    }
}

/* A move: in tree t, GPU vs[i] gets parent ps[i] (i < k). */
typedef struct move {
    int t, k;
    int vs[2 * TREE_MAX_N], ps[2 * TREE_MAX_N];
} move;

/* Evaluate mv.  Returns <0 (better), 0 (equal), >0 (worse), 2 (not
 * allowed); fills *nm, *nbott, *ndepth when it returns <= 0.  loose: any
 * allowed move that does not raise L counts as better (perturbation). */
static int eval_move(opt *o, const move *mv, metrics *nm, double *nbott, int *ndepth, bool loose)
{
    int n = o->n, t = mv->t, *par = o->par + t * n;
    int links[4 * TREE_MAX_N], nl = 0, old[2 * TREE_MAX_N], r = 0;
    const metrics *m = &o->m;
    bool scan = false;
    *nm = *m;
    for (int i = 0; i < mv->k; i++)
        if (o->inv[mv->vs[i] * n + mv->ps[i]] == 0)
            return 2; /* no link */
    /* apply the count changes, remember the touched links */
    for (int i = 0; i < mv->k; i++) {
        int a = mv->vs[i] * n + par[mv->vs[i]], b = mv->vs[i] * n + mv->ps[i];
        o->cnt[a]--;
        o->cnt[b]++;
        links[nl++] = a;
        links[nl++] = b;
    }
    for (int i = 0; i < nl; i++) { /* dedupe */
        for (int j = 0; j < i; j++)
            if (links[j] == links[i]) {
                links[i--] = links[--nl];
                break;
            }
    }
    for (int i = 0; i < nl; i++) {
        int x = links[i], c1 = o->cnt[x];
        int c0 = c1;
        for (int j = 0; j < mv->k; j++) {
            if (mv->vs[j] * n + par[mv->vs[j]] == x)
                c0++;
            if (mv->vs[j] * n + mv->ps[j] == x)
                c0--;
        }
        double l0 = c0 * o->inv[x], l1 = c1 * o->inv[x];
        if (c0 > 0 && feq(l0, m->L))
            nm->nL--;
        if (c1 > 0 && l1 > m->L && !feq(l1, m->L)) {
            r = 1; /* L rises */
            break;
        }
        if (c1 > 0 && feq(l1, m->L))
            nm->nL++;
        if (c0 == m->C && c0 > 0)
            nm->nC--;
        if (c1 > m->C) {
            nm->C = c1; /* exact: only one move ahead, recount below */
            scan = true;
        } else if (c1 == m->C && c1 > 0) {
            nm->nC++;
        }
        nm->S2 += l1 * l1 - l0 * l0;
    }
    if (r == 0 && (nm->nL <= 0 || nm->nC <= 0 || scan)) {
        metrics save = o->m;
        refresh_max(o);
        nm->L = o->m.L;
        nm->nL = o->m.nL;
        nm->C = o->m.C;
        nm->nC = o->m.nC;
        o->m = save;
    }
    for (int i = 0; i < mv->k; i++) { /* undo the counts */
        o->cnt[mv->vs[i] * n + par[mv->vs[i]]]++;
        o->cnt[mv->vs[i] * n + mv->ps[i]]--;
    }
    if (r != 0)
        return 1;
    if (!loose) { /* cheap early exit on (L, nL) */
        if (!feq(nm->L, m->L) && nm->L > m->L)
            return 1;
        if (feq(nm->L, m->L) && nm->nL > m->nL)
            return 1;
    } else if (!feq(nm->L, m->L) && nm->L > m->L) {
        return 1;
    }
    /* structure: bottleneck, depth (-1 when not a tree any more) */
    for (int i = 0; i < mv->k; i++) {
        old[i] = par[mv->vs[i]];
        par[mv->vs[i]] = mv->ps[i];
    }
    *ndepth = tree_assign_rounds(n, t, par, NULL);
    *nbott = tree_bott(o, t);
    for (int i = mv->k - 1; i >= 0; i--)
        par[mv->vs[i]] = old[i];
    if (*ndepth < 0 || *ndepth > o->rcap)
        return 2;
    nm->B = m->B - o->bott[t] + *nbott;
    nm->D = m->D - o->depth[t] + *ndepth;
    nm->Dmax = 0;
    for (int k = 0; k < n; k++) {
        int d = k == t ? *ndepth : o->depth[k];
        if (d > nm->Dmax)
            nm->Dmax = d;
    }
    return loose ? -1 : cmp_search(nm, m);
}

static void apply_move(opt *o, const move *mv, const metrics *nm, double nbott, int ndepth)
{
    int n = o->n, t = mv->t;
    for (int i = 0; i < mv->k; i++) {
        int v = mv->vs[i];
        o->cnt[v * n + o->par[t * n + v]]--;
        o->cnt[v * n + mv->ps[i]]++;
    }
    for (int i = 0; i < mv->k; i++)
        o->par[t * n + mv->vs[i]] = mv->ps[i];
    o->bott[t] = nbott;
    o->depth[t] = ndepth;
    o->m = *nm;
}

/* Exchange the places of x and y in tree t (neither is the root). */
static void make_swap(const opt *o, int t, int x, int y, move *mv)
{
    int n = o->n;
    const int *par = o->par + t * n;
    mv->t = t;
    mv->k = 0;
    for (int z = 0; z < n; z++) {
        int sz = z == x ? y : z == y ? x : z, np;
        if (z == t)
            continue;
        np = par[sz];
        np = np == x ? y : np == y ? x : np;
        if (np != par[z]) {
            mv->vs[mv->k] = z;
            mv->ps[mv->k++] = np;
        }
    }
}

/* Try everything for (t, v): re-parent to each neighbour, swap with each
 * other GPU.  Applies the first improving move.  Returns 1 if applied. */
static int try_node(opt *o, int t, int v, uint64_t *work, bool swaps)
{
    int n = o->n, nn = o->nnb[v], off;
    move mv;
    metrics nm;
    double nbt;
    int nd;
    if (nn >= 2) {
        off = (int)(tree_rng(&o->rng) % (uint64_t)nn);
        for (int j = 0; j < nn; j++) {
            int p = o->nb[v][(j + off) % nn];
            if (p == o->par[t * n + v])
                continue;
            if (*work == 0)
                return 0;
            --*work;
            mv.t = t;
            mv.k = 1;
            mv.vs[0] = v;
            mv.ps[0] = p;
            if (eval_move(o, &mv, &nm, &nbt, &nd, false) < 0) {
                apply_move(o, &mv, &nm, nbt, nd);
                return 1;
            }
        }
    }
    if (!swaps)
        return 0;
    off = (int)(tree_rng(&o->rng) % (uint64_t)n);
    for (int j = 0; j < n; j++) {
        int y = (j + off) % n;
        if (y == t || y == v)
            continue;
        if (*work == 0)
            return 0;
        --*work;
        make_swap(o, t, v, y, &mv);
        if (mv.k == 0 || eval_move(o, &mv, &nm, &nbt, &nd, false) >= 0)
            continue;
        apply_move(o, &mv, &nm, nbt, nd);
        return 1;
    }
    return 0;
}

/* One first-improvement sweep in random order.  Returns moves applied. */
static int sweep(opt *o, uint64_t *work, bool swaps)
{
    int n = o->n, applied = 0, total = n * n;
    int start = (int)(tree_rng(&o->rng) % (uint64_t)total);
    int step = 1;
    /* a stride coprime with total visits every (t, v) once */
    for (int tries = 0; tries < 64; tries++) {
        int k = 1 + (int)(tree_rng(&o->rng) % (uint64_t)(total - 1)), x = k, y = total;
        while (y != 0) {
            int r = x % y;
            x = y;
            y = r;
        }
        if (x == 1) {
            step = k;
            break;
        }
    }
    for (int i = 0, idx = start; i < total && *work > 0; i++, idx = (idx + step) % total) {
        int t = idx / n, v = idx % n;
        if (v != t)
            applied += try_node(o, t, v, work, swaps);
    }
    return applied;
}

/* Random moves (re-parent or swap) that do not raise L. */
static void kick(opt *o, int moves, uint64_t *work)
{
    int n = o->n;
    for (int k = 0, tries = 0; k < moves && tries < 50 * moves && *work > 0; tries++) {
        int t = (int)(tree_rng(&o->rng) % (uint64_t)n);
        int v = (int)(tree_rng(&o->rng) % (uint64_t)n), nd = 0;
        double nbt = 0;
        metrics nm;
        move mv;
        if (v == t)
            continue;
        if (tree_rng(&o->rng) & 1) {
            int y = (int)(tree_rng(&o->rng) % (uint64_t)n);
            if (y == t || y == v)
                continue;
            make_swap(o, t, v, y, &mv);
            if (mv.k == 0)
                continue;
        } else {
            if (o->nnb[v] < 2)
                continue;
            mv.t = t;
            mv.k = 1;
            mv.vs[0] = v;
            mv.ps[0] = o->nb[v][tree_rng(&o->rng) % (uint64_t)o->nnb[v]];
            if (mv.ps[0] == o->par[t * n + v])
                continue;
        }
        --*work;
        if (eval_move(o, &mv, &nm, &nbt, &nd, true) == -1) {
            apply_move(o, &mv, &nm, nbt, nd);
            k++;
        }
    }
}

void tree_optimize(const tree_topo *t, tree_set *s, int rcap, uint64_t work, uint64_t seed)
{
    int n = t->n;
    opt *o;
    int *best = NULL;
    metrics bm;
    int stale = 0;
    if (n < 3 || work == 0)
        return;
    o = calloc(1, sizeof *o);
    best = malloc(sizeof(int) * (size_t)n * (size_t)n);
    if (o == NULL || best == NULL)
        goto out; /* the plan stays valid, only unimproved */
    o->n = n;
    o->t = t;
    o->rcap = rcap;
    o->par = s->parent;
    o->rng = seed ? seed : 0x9E3779B97F4A7C15ULL;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            if (!tree_link(t, i, j))
                continue;
            double a = tree_w(t, i, j), b = tree_w(t, j, i);
            o->inv[i * n + j] = 1.0 / a;
            o->ew[i * n + j] = a < b ? a : b;
            o->nb[i][o->nnb[i]++] = j;
        }
    recompute(o);
    memcpy(best, o->par, sizeof(int) * (size_t)n * (size_t)n);
    bm = o->m;
    while (work > 0 && stale < 8 + 2 * n) {
        while (work > 0 && sweep(o, &work, true) > 0)
            ;
        if (cmp_final(&o->m, &bm) < 0) {
            memcpy(best, o->par, sizeof(int) * (size_t)n * (size_t)n);
            bm = o->m;
            stale = 0;
        } else {
            if (cmp_final(&o->m, &bm) == 0)
                memcpy(best, o->par, sizeof(int) * (size_t)n * (size_t)n); /* drift */
            stale++;
            memcpy(o->par, best, sizeof(int) * (size_t)n * (size_t)n);
            recompute(o);
        }
        kick(o, 2 + (int)(tree_rng(&o->rng) % (uint64_t)(n / 2 + 1)), &work);
    }
    memcpy(s->parent, best, sizeof(int) * (size_t)n * (size_t)n);
    for (int r = 0; r < n; r++)
        tree_assign_rounds(n, r, s->parent + r * n, s->round + r * n);
out:
    free(best);
    free(o);
}
