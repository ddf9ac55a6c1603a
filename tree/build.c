/* build.c - per-root tree constructors and the round assignment.
 *
 * All constructors work on a directed weight matrix w (the penalised copy of
 * the topology); an edge parent-child is usable when w[p][c] > 0 and
 * w[c][p] > 0.  The weight that counts for an edge is the reduce direction,
 * w[child][parent]. */
#include <stdlib.h>
#include <string.h>

#include "tree/tree_int.h"

#define W(i, j) w[(i) * n + (j)]
#define LINK(i, j) ((i) != (j) && W(i, j) > 0 && W(j, i) > 0)

static int ceil_log2(int m)
{
    int d = 0;
    while ((1 << d) < m)
        d++;
    return d;
}

/* ------------------------------------------------------------------ rounds */

int tree_assign_rounds(int n, int root, const int *par, int *round)
{
    int kids[TREE_MAX_N][TREE_MAX_N], nk[TREE_MAX_N] = {0};
    int order[TREE_MAX_N], need[TREE_MAX_N], head = 0, tail = 0;
    if (par[root] != -1)
        return -1;
    for (int v = 0; v < n; v++) {
        if (v == root)
            continue;
        if (par[v] < 0 || par[v] >= n || par[v] == v)
            return -1;
        kids[par[v]][nk[par[v]]++] = v;
    }
    order[tail++] = root;
    while (head < tail) {
        int u = order[head++];
        for (int i = 0; i < nk[u]; i++)
            order[tail++] = kids[u][i];
    }
    if (tail != n)
        return -1; /* a cycle hides some nodes from the root */
    for (int k = n - 1; k >= 0; k--) {
        int u = order[k], *c = kids[u], m = nk[u], t = 0;
        /* children by need, longest first (ties: lower id first) */
        for (int i = 1; i < m; i++) {
            int x = c[i], j = i - 1;
            while (j >= 0 && (need[c[j]] < need[x] || (need[c[j]] == need[x] && c[j] > x))) {
                c[j + 1] = c[j];
                j--;
            }
            c[j + 1] = x;
        }
        for (int i = 0; i < m; i++)
            if (i + 1 + need[c[i]] > t)
                t = i + 1 + need[c[i]];
        need[u] = t;
    }
    if (round != NULL) {
        round[root] = 0;
        for (int k = 0; k < n; k++) {
            int u = order[k];
            for (int i = 0; i < nk[u]; i++)
                round[kids[u][i]] = round[u] + i + 1;
        }
    }
    return need[root];
}

/* --------------------------------------------- Kernighan-Lin bisection tree */

typedef struct kl_ctx {
    int n;
    const double *w;
    int *par;
    long *budget;
    int max_swaps;  /* per KL pass, 0: until no swap gains */
    double sw[TREE_MAX_N * TREE_MAX_N]; /* w[a][b] + w[b][a] on usable links, 0 else */
} kl_ctx;

static inline double sym(const kl_ctx *c, int a, int b)
{
    return c->sw[a * c->n + b];
}

/* Is the set S (flags in in[]) connected over usable links? */
static bool connected_set(const kl_ctx *c, const int *S, int m, const bool *in)
{
    int stack[TREE_MAX_N], top = 0, seen = 1;
    bool vis[TREE_MAX_N] = {false};
    const double *w = c->w;
    int n = c->n;
    if (m <= 1)
        return true;
    vis[S[0]] = true;
    stack[top++] = S[0];
    while (top > 0) {
        int u = stack[--top];
        for (int i = 0; i < m; i++) {
            int v = S[i];
            if (!vis[v] && in[v] && LINK(u, v)) {
                vis[v] = true;
                seen++;
                stack[top++] = v;
            }
        }
    }
    return seen == m;
}

static int kl_rec(kl_ctx *c, const int *S, int m, int s);

/* Split S (root s) into A (with s) and B (with b, |B| = bsize), refine with
 * Kernighan-Lin swaps that lower the cut, recurse.  0 on success. */
static int kl_try(kl_ctx *c, const int *S, int m, int s, int b, int bsize)
{
    bool inB[TREE_MAX_N] = {false}, inA[TREE_MAX_N] = {false}, lock[TREE_MAX_N] = {false};
    int A[TREE_MAX_N], B[TREE_MAX_N], na = 0, nb = 0, saveB[TREE_MAX_N];
    bool okA, okB;
    double xw[TREE_MAX_N], tot[TREE_MAX_N]; /* weight of v to B, to all of S */
    inB[b] = true;
    for (int i = 0; i < m; i++) {
        int v = S[i];
        xw[v] = sym(c, v, b);
        tot[v] = 0;
        for (int j = 0; j < m; j++)
            tot[v] += sym(c, v, S[j]);
    }
    for (int k = 1; k < bsize; k++) { /* grow B greedily from b */
        int best = -1;
        double bw = -1;
        for (int i = 0; i < m; i++) {
            int v = S[i];
            double x = xw[v], y = tot[v] - xw[v];
            if (v == s || inB[v])
                continue;
            if (x <= 0)
                continue; /* keep B connected */
            if (best < 0 || x - y > bw) {
                bw = x - y;
                best = v;
            }
        }
        if (best < 0)
            return -1;
        inB[best] = true;
        for (int i = 0; i < m; i++)
            xw[S[i]] += sym(c, S[i], best);
    }
    /* KL passes: swap x in A\{s} with y in B\{b} while the cut drops.
     * D[v] = external - internal weight; gain(x, y) = D[x] + D[y] - 2 w(x, y). */
    for (int pass = 0; pass < 3; pass++) {
        bool improved = false;
        int swaps = 0;
        memset(lock, 0, sizeof lock);
        while (c->max_swaps == 0 || swaps++ < c->max_swaps) {
            double D[TREE_MAX_N], bestg = 1e-12;
            int bx = -1, by = -1;
            for (int i = 0; i < m; i++) { /* from the weights to B and to all */
                int x = S[i];
                D[x] = inB[x] ? tot[x] - 2 * xw[x] : 2 * xw[x] - tot[x];
            }
            for (int i = 0; i < m; i++) {
                int x = S[i];
                if (x == s || inB[x] || lock[x])
                    continue;
                for (int j = 0; j < m; j++) {
                    int y = S[j];
                    double g;
                    if (y == b || !inB[y] || lock[y])
                        continue;
                    g = D[x] + D[y] - 2 * sym(c, x, y);
                    if (g > bestg) {
                        bestg = g;
                        bx = x;
                        by = y;
                    }
                }
            }
            if (bx < 0)
                break;
            inB[bx] = true;
            inB[by] = false;
            lock[bx] = lock[by] = true;
            for (int i = 0; i < m; i++)
                xw[S[i]] += sym(c, S[i], bx) - sym(c, S[i], by);
            improved = true;
        }
        if (!improved)
            break;
    }
    for (int i = 0; i < m; i++) {
        int v = S[i];
        if (inB[v])
            B[nb++] = v;
        else
            A[na++] = v;
        inA[v] = !inB[v];
    }
    /* A must start with its root so connectivity checks are meaningful */
    okA = connected_set(c, A, na, inA);
    okB = connected_set(c, B, nb, inB);
    if (!okA || !okB)
        return -1;
    memcpy(saveB, B, sizeof(int) * (size_t)nb);
    if (kl_rec(c, A, na, s) != 0)
        return -1;
    if (kl_rec(c, saveB, nb, b) != 0)
        return -1;
    c->par[b] = s;
    return 0;
}

static int kl_rec(kl_ctx *c, const int *S, int m, int s)
{
    int d, half, lo, hi, cand[TREE_MAX_N], nc = 0;
    const double *w = c->w;
    int n = c->n;
    if (m == 1)
        return 0;
    if (--*c->budget < 0)
        return -1;
    d = ceil_log2(m);
    half = 1 << (d - 1);
    lo = m - half > 1 ? m - half : 1;
    hi = half;
    for (int i = 0; i < m; i++)
        if (S[i] != s && LINK(s, S[i]))
            cand[nc++] = S[i];
    if (nc == 0)
        return -1;
    for (int i = 1; i < nc; i++) { /* strongest reduce link b -> s first */
        int x = cand[i], j = i - 1;
        while (j >= 0 && (W(cand[j], s) < W(x, s) || (W(cand[j], s) == W(x, s) && cand[j] > x))) {
            cand[j + 1] = cand[j];
            j--;
        }
        cand[j + 1] = x;
    }
    /* sizes: balanced first, then outwards (quick: at most 4 tries) */
    int tries = 0;
    for (int off = 0; off <= hi - lo; off++) {
        for (int sgn = 0; sgn < 2; sgn++) {
            int bsize = m / 2 + (sgn ? off : -off);
            if ((sgn && off == 0) || bsize < lo || bsize > hi)
                continue;
            for (int k = 0; k < nc && k < 3; k++) {
                if (kl_try(c, S, m, s, cand[k], bsize) == 0)
                    return 0;
                if (*c->budget < 0 || (c->max_swaps > 0 && ++tries >= 4))
                    return -1;
            }
        }
    }
    return -1;
}

int tree_build_kl(int n, const double *w, int root, int *par, long *budget, int max_swaps)
{
    int S[TREE_MAX_N];
    int rc;
    kl_ctx *c = malloc(sizeof *c); /* sw: 32 KiB, off the stack */
    if (c == NULL)
        return -1;
    c->n = n;
    c->w = w;
    c->par = par;
    c->budget = budget;
    c->max_swaps = max_swaps;
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++)
            c->sw[a * n + b] = LINK(a, b) ? W(a, b) + W(b, a) : 0.0;
    for (int i = 0; i < n; i++) {
        S[i] = i;
        par[i] = -1;
    }
    S[0] = root;
    S[root] = 0;
    rc = kl_rec(c, S, n, root);
    free(c);
    return rc;
}

/* ------------------------------------------------------------ backtracking */

typedef struct bt_ctx {
    int n, depth;
    const double *w;
    int nb[TREE_MAX_N][TREE_MAX_N], nnb[TREE_MAX_N];
    int order[TREE_MAX_N], informed;
    bool have[TREE_MAX_N];
    int par[TREE_MAX_N], best_par[TREE_MAX_N];
    double best_min, best_sum, maxw;
    bool found;
    long *budget;
} bt_ctx;

static void bt_rec(bt_ctx *c, int k, int i, int senders, double mn, double sum)
{
    int n = c->n;
    const double *w = c->w;
    if (*c->budget < 0)
        return;
    --*c->budget;
    if (c->informed == n) {
        if (!c->found || mn > c->best_min || (mn == c->best_min && sum > c->best_sum)) {
            c->found = true;
            c->best_min = mn;
            c->best_sum = sum;
            memcpy(c->best_par, c->par, sizeof c->par);
        }
        return;
    }
    if (k > c->depth)
        return;
    if (c->found) { /* bound: min can only drop, sum grows by <= maxw an edge */
        if (mn < c->best_min)
            return;
        if (mn == c->best_min && sum + (n - c->informed) * c->maxw <= c->best_sum)
            return;
    }
    if (i == senders) {
        bt_rec(c, k + 1, 0, c->informed, mn, sum);
        return;
    }
    {
        /* can the rest still be reached?  this round gives at most
         * senders - i more, each later round doubles */
        long reach = c->informed + (senders - i);
        for (int r = k + 1; r <= c->depth && reach < n; r++)
            reach *= 2;
        if (reach < n)
            return;
    }
    int u = c->order[i];
    for (int a = 0; a < c->nnb[u]; a++) {
        int v = c->nb[u][a];
        double x = W(v, u);
        if (c->have[v])
            continue;
        c->have[v] = true;
        c->par[v] = u;
        c->order[c->informed++] = v;
        bt_rec(c, k, i + 1, senders, x < mn ? x : mn, sum + x);
        c->informed--;
        c->have[v] = false;
        c->par[v] = -1;
        if (*c->budget < 0)
            return;
    }
    bt_rec(c, k, i + 1, senders, mn, sum); /* u idles this round */
}

int tree_build_backtrack(int n, const double *w, int root, int depth, int *par, long *budget)
{
    bt_ctx *c = calloc(1, sizeof *c);
    int rc = -1;
    if (c == NULL)
        return -1;
    c->n = n;
    c->depth = depth;
    c->w = w;
    c->budget = budget;
    for (int u = 0; u < n; u++) {
        c->par[u] = -1;
        for (int v = 0; v < n; v++) {
            if (!LINK(u, v))
                continue;
            int j = c->nnb[u]++;
            while (j > 0 && W(c->nb[u][j - 1], u) < W(v, u)) {
                c->nb[u][j] = c->nb[u][j - 1];
                j--;
            }
            c->nb[u][j] = v;
            if (W(v, u) > c->maxw)
                c->maxw = W(v, u);
        }
    }
    c->order[0] = root;
    c->informed = 1;
    c->have[root] = true;
    bt_rec(c, 1, 0, 1, 1e300, 0);
    if (c->found) {
        memcpy(par, c->best_par, sizeof(int) * (size_t)n);
        par[root] = -1;
        rc = 0;
    }
    free(c);
    return rc;
}

/* -------------------------------------------------------------- BFS + depth */

static bool in_subtree(const int *par, int v, int x)
{
    for (int k = 0; x >= 0 && k <= TREE_MAX_N; k++, x = par[x])
        if (x == v)
            return true;
    return false;
}

/* Kuhn's augmenting path for the round matching: sender u for node v. */
static bool match_aug(int n, const double *w, int v, const bool *sender, int *mate_s, int *mate_v,
                      bool *seen)
{
    for (int u = 0; u < n; u++) {
        if (!sender[u] || seen[u] || !LINK(u, v))
            continue;
        seen[u] = true;
        if (mate_s[u] < 0 || match_aug(n, w, mate_s[u], sender, mate_s, mate_v, seen)) {
            mate_s[u] = v;
            mate_v[v] = u;
            return true;
        }
    }
    return false;
}

void tree_build_bfs(int n, const double *w, int root, int *par)
{
    bool have[TREE_MAX_N] = {false}, sender[TREE_MAX_N];
    int informed = 1, depth;
    for (int i = 0; i < n; i++)
        par[i] = -1;
    have[root] = true;
    /* greedy broadcast: each round a maximum matching of informed senders
     * to uninformed neighbours, nodes with more uninformed neighbours first */
    while (informed < n) {
        int cand[TREE_MAX_N], nc = 0, prio[TREE_MAX_N], mate_s[TREE_MAX_N], mate_v[TREE_MAX_N];
        for (int i = 0; i < n; i++) {
            sender[i] = have[i];
            mate_s[i] = mate_v[i] = -1;
        }
        for (int v = 0; v < n; v++) {
            bool adj = false;
            if (have[v])
                continue;
            prio[v] = 0;
            for (int u = 0; u < n; u++) {
                if (!LINK(u, v))
                    continue;
                if (have[u])
                    adj = true;
                else
                    prio[v]++;
            }
            if (!adj)
                continue;
            int j = nc++;
            while (j > 0 && prio[cand[j - 1]] < prio[v]) {
                cand[j] = cand[j - 1];
                j--;
            }
            cand[j] = v;
        }
        if (nc == 0)
            return; /* disconnected: callers check connectivity first */
        for (int i = 0; i < nc; i++) {
            bool seen[TREE_MAX_N] = {false};
            match_aug(n, w, cand[i], sender, mate_s, mate_v, seen);
        }
        for (int i = 0; i < nc; i++) {
            int v = cand[i];
            if (mate_v[v] >= 0) {
                par[v] = mate_v[v];
                have[v] = true;
                informed++;
            }
        }
    }
    /* lower the broadcast depth: re-parent while the depth drops */
    depth = tree_assign_rounds(n, root, par, NULL);
    for (int sweep = 0; sweep < n; sweep++) {
        bool improved = false;
        for (int v = 0; v < n; v++) {
            if (v == root)
                continue;
            for (int u = 0; u < n; u++) {
                int old = par[v], d;
                if (u == old || !LINK(u, v) || in_subtree(par, v, u))
                    continue;
                par[v] = u;
                d = tree_assign_rounds(n, root, par, NULL);
                if (d >= 0 && d < depth) {
                    depth = d;
                    improved = true;
                } else {
                    par[v] = old;
                }
            }
        }
        if (!improved)
            break;
    }
}
