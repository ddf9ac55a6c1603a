/* test_tree_pack.c - weighted plans: the fractional packing bound on graphs
 * checked by hand, the packing's quality on them and on the fixed family set
 * (tests/tree/families.json), plan rules, slicing by parts. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tree/tree.h"

#define FAMILIES "tests/tree/families.json"

static void sym_link(tree_topo *t, int i, int j, double w)
{
    t->w[i * t->n + j] = t->w[j * t->n + i] = w;
}

static void k4(tree_topo *t)
{
    ck_assert_int_eq(tree_topo_init(t, 4), 0);
    for (int i = 0; i < 4; i++)
        for (int j = i + 1; j < 4; j++)
            sym_link(t, i, j, 1);
}

/* ring of n with weight 1, the link (n-1, 0) weighs weak */
static void ring(tree_topo *t, int n, double weak)
{
    ck_assert_int_eq(tree_topo_init(t, n), 0);
    for (int i = 0; i + 1 < n; i++)
        sym_link(t, i, i + 1, 1);
    sym_link(t, n - 1, 0, weak);
}

/* two triangles {0,1,2} and {3,4,5} joined by the link 0-3 */
static void two_cliques(tree_topo *t)
{
    ck_assert_int_eq(tree_topo_init(t, 6), 0);
    for (int q = 0; q < 6; q += 3)
        for (int i = 0; i < 3; i++)
            for (int j = i + 1; j < 3; j++)
                sym_link(t, q + i, q + j, 1);
    sym_link(t, 0, 3, 1);
}

static double bound_of(const tree_topo *t, bool *cut)
{
    double lb = -1;
    char err[256];
    ck_assert_int_eq(tree_frac_bound(t, &lb, cut, err, sizeof err), 0);
    return lb;
}

/* Bounds by hand: max over S of (n - |S|) / (n * c(S -> rest)). */
START_TEST(bound_by_hand)
{
    tree_topo t;
    bool cut[TREE_MAX_N];
    char err[256];
    double lb;
    /* K4: a single GPU, 3 / (4 * 3) */
    k4(&t);
    ck_assert_double_eq_tol(bound_of(&t, cut), 0.25, 1e-12);
    tree_topo_fini(&t);
    /* ring of 6: a single GPU, 5 / (6 * 2) */
    ring(&t, 6, 1);
    ck_assert_double_eq_tol(bound_of(&t, NULL), 5.0 / 12, 1e-12);
    tree_topo_fini(&t);
    /* weak-link ring: GPU 0 (or 5) alone, 5 / (6 * 1.1) */
    ring(&t, 6, 0.1);
    ck_assert_double_eq_tol(bound_of(&t, cut), 5.0 / 6.6, 1e-12);
    {
        int k = 0;
        for (int v = 0; v < 6; v++)
            k += cut[v];
        ck_assert_int_eq(k, 1);
        ck_assert(cut[0] || cut[5]);
    }
    tree_topo_fini(&t);
    /* two cliques: one triangle against the single link, 3 / (6 * 1) */
    two_cliques(&t);
    ck_assert_double_eq_tol(bound_of(&t, cut), 0.5, 1e-12);
    {
        int k = 0;
        for (int v = 0; v < 6; v++)
            k += cut[v];
        ck_assert_int_eq(k, 3);
        ck_assert(cut[0] == cut[1] && cut[1] == cut[2] && cut[3] == cut[4] && cut[0] != cut[3]);
    }
    tree_topo_fini(&t);
    /* two GPUs: 1 / (2 * 3) */
    ck_assert_int_eq(tree_topo_init(&t, 2), 0);
    sym_link(&t, 0, 1, 3);
    ck_assert_double_eq_tol(bound_of(&t, NULL), 1.0 / 6, 1e-12);
    tree_topo_fini(&t);
    /* one GPU: nothing moves */
    ck_assert_int_eq(tree_topo_init(&t, 1), 0);
    ck_assert_double_eq(bound_of(&t, NULL), 0);
    tree_topo_fini(&t);
    /* disconnected: an error naming the GPUs */
    ck_assert_int_eq(tree_topo_init(&t, 4), 0);
    sym_link(&t, 0, 1, 1);
    sym_link(&t, 2, 3, 1);
    ck_assert_int_eq(tree_frac_bound(&t, &lb, NULL, err, sizeof err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "GPUs 2, 3"));
    tree_topo_fini(&t);
}
END_TEST

/* Plan t in mode; check the rules and return the load. */
static double plan_check(const tree_topo *t, tree_mode mode, tree_wplan *p)
{
    tree_opts o;
    char err[256];
    uint64_t sum[TREE_MAX_N] = {0};
    tree_opts_default(&o);
    o.mode = mode;
    ck_assert_int_eq(tree_plan_weighted(t, &o, p, err, sizeof err), 0);
    ck_assert_msg(tree_wplan_validate(t, p, err, sizeof err) == 0, "%s", err);
    ck_assert_int_le(p->ntrees, 4 * t->n);
    ck_assert_int_eq(p->denominator % (uint32_t)t->n, 0);
    for (int k = 0; k < p->ntrees; k++) {
        ck_assert_uint_ge(p->parts[k], 1);
        if (k > 0)
            ck_assert(p->root[k - 1] < p->root[k] ||
                      (p->root[k - 1] == p->root[k] && p->parts[k - 1] >= p->parts[k]));
        sum[p->root[k]] += p->parts[k];
    }
    for (int r = 0; r < t->n; r++)
        ck_assert_uint_eq(sum[r], p->denominator / (uint32_t)t->n);
    return tree_wplan_load(t, p);
}

START_TEST(packing_by_hand)
{
    tree_topo t;
    tree_wplan p;
    for (int m = 0; m < 2; m++) {
        tree_mode mode = m ? TREE_MODE_BACKTRACK : TREE_MODE_KL;
        /* K4: in-stars reach the bound exactly */
        k4(&t);
        ck_assert_double_eq_tol(plan_check(&t, mode, &p), 0.25, 1e-12);
        tree_wplan_fini(&p);
        tree_topo_fini(&t);
        /* ring: no single tree per root does better than 0.5 (each root's
         * in-path loads one link with 1/6 and the busiest link carries 3
         * paths); weighted paths come within 1% of 5/12 */
        ring(&t, 6, 1);
        double l = plan_check(&t, mode, &p);
        ck_assert_double_ge(l, 5.0 / 12 * (1 - 1e-9));
        ck_assert_double_le(l, 5.0 / 12 * 1.01);
        tree_wplan_fini(&p);
        tree_topo_fini(&t);
        /* weak-link ring of 16 (the pathology: 94x for one tree per root) */
        ring(&t, 16, 0.01);
        double lb = bound_of(&t, NULL);
        l = plan_check(&t, mode, &p);
        ck_assert_double_ge(l, lb * (1 - 1e-9));
        ck_assert_double_le(l, lb * 1.01);
        tree_wplan_fini(&p);
        tree_topo_fini(&t);
        /* two cliques: the joining link carries 3 roots' halves: 0.5 */
        two_cliques(&t);
        l = plan_check(&t, mode, &p);
        ck_assert_double_ge(l, 0.5 * (1 - 1e-9));
        ck_assert_double_le(l, 0.5 * 1.01);
        tree_wplan_fini(&p);
        tree_topo_fini(&t);
    }
}
END_TEST

START_TEST(plan_options_and_rules)
{
    tree_topo t;
    tree_wplan p, q;
    tree_opts o;
    tree_set s;
    char err[256];
    ring(&t, 8, 1);
    tree_opts_default(&o);
    /* one tree per root when the budget allows no more, or unweighted */
    o.max_trees = 8;
    ck_assert_int_eq(tree_plan_weighted(&t, &o, &p, err, sizeof err), 0);
    ck_assert_int_eq(p.ntrees, 8);
    ck_assert_int_eq(tree_wplan_validate(&t, &p, err, sizeof err), 0);
    tree_wplan_fini(&p);
    o.max_trees = 0;
    o.weighted = false;
    ck_assert_int_eq(tree_plan_weighted(&t, &o, &p, err, sizeof err), 0);
    ck_assert_int_eq(p.ntrees, 8);
    ck_assert_uint_eq(p.denominator, 8);
    tree_wplan_fini(&p);
    /* deterministic */
    o.weighted = true;
    ck_assert_int_eq(tree_plan_weighted(&t, &o, &p, err, sizeof err), 0);
    ck_assert_int_eq(tree_plan_weighted(&t, &o, &q, err, sizeof err), 0);
    ck_assert_int_eq(p.ntrees, q.ntrees);
    ck_assert_mem_eq(p.parts, q.parts, sizeof(uint32_t) * (size_t)p.ntrees);
    ck_assert_mem_eq(p.parent, q.parent, sizeof(int) * (size_t)p.ntrees * 8);
    ck_assert_mem_eq(p.round, q.round, sizeof(int) * (size_t)p.ntrees * 8);
    tree_wplan_fini(&q);
    /* broken plans are named */
    p.parts[0]++;
    ck_assert_int_eq(tree_wplan_validate(&t, &p, err, sizeof err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "root 0: its trees carry"));
    p.parts[0]--;
    p.root[0] = 9;
    ck_assert_int_eq(tree_wplan_validate(&t, &p, err, sizeof err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "root 9 out of range"));
    p.root[0] = 0;
    {
        int save = p.parent[1];
        p.parent[1] = 5; /* 1 -> 5: no link on a ring */
        p.round[1] = 7;
        ck_assert_int_eq(tree_wplan_validate(&t, &p, err, sizeof err), KVS_EINVAL);
        p.parent[1] = save;
    }
    tree_wplan_fini(&p);
    /* v1 as a plan: the load is the v1 reduce_load_time */
    ck_assert_int_eq(tree_plan(&t, &o, &s, err, sizeof err), 0);
    ck_assert_int_eq(tree_wplan_from_set(&s, &p), 0);
    {
        tree_score sc;
        tree_score_compute(&t, &s, &sc);
        ck_assert_double_eq_tol(tree_wplan_load(&t, &p), sc.reduce_load_time, 1e-12);
    }
    ck_assert_int_eq(tree_wplan_validate(&t, &p, err, sizeof err), 0);
    tree_wplan_fini(&p);
    tree_set_fini(&s);
    /* penalty out of range */
    o.penalty = 0;
    ck_assert_int_eq(tree_plan_weighted(&t, &o, &p, err, sizeof err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "penalty"));
    tree_topo_fini(&t);
}
END_TEST

START_TEST(slices_by_parts)
{
    tree_wplan p;
    uint64_t off[8], len[8];
    /* root 0: parts 3, 1; root 1: parts 2, 2 (denominator 8) */
    ck_assert_int_eq(tree_wplan_init(&p, 2, 4, 8), 0);
    int roots[4] = {0, 0, 1, 1};
    uint32_t parts[4] = {3, 1, 2, 2};
    for (int k = 0; k < 4; k++) {
        p.root[k] = roots[k];
        p.parts[k] = parts[k];
    }
    /* 8000 floats: cut at 3000, 4000, 6000 (multiples of 16 floats) */
    tree_wplan_slices(&p, 8000, 4, 0, off, len);
    ck_assert_uint_eq(off[0], 0);
    ck_assert_uint_eq(len[0], 3000 - 3000 % 16);
    ck_assert_uint_eq(off[1], len[0]);
    ck_assert_uint_eq(off[1] + len[1], 4000);
    ck_assert_uint_eq(off[2], 4000);
    ck_assert_uint_eq(len[2], 2000);
    ck_assert_uint_eq(off[3], 6000);
    ck_assert_uint_eq(len[3], 2000);
    for (int k = 0; k < 3; k++)
        ck_assert_uint_eq((off[k] + len[k]) * 4 % 64, 0);
    /* a minimum slice of 1 MiB: every root keeps only its first tree */
    tree_wplan_slices(&p, 8000, 4, 1 << 20, off, len);
    ck_assert_uint_eq(off[0], 0);
    ck_assert_uint_eq(len[0], 4000);
    ck_assert_uint_eq(len[1], 0);
    ck_assert_uint_eq(off[2], 4000);
    ck_assert_uint_eq(len[2], 4000);
    ck_assert_uint_eq(len[3], 0);
    /* an odd count, the last tree merged away: the tail still belongs to
     * root 1's first tree */
    tree_wplan_slices(&p, 1001, 4, 1 << 20, off, len);
    ck_assert_uint_eq(off[2] + len[2], 1001);
    ck_assert_uint_eq(len[3], 0);
    /* tiny arrays: everything covered, nothing overlaps */
    for (uint64_t count = 0; count < 40 * 8; count++) {
        uint64_t end = 0;
        tree_wplan_slices(&p, count / 8, 8, (count % 8) * 8, off, len);
        for (int k = 0; k < 4; k++) {
            if (len[k] == 0)
                continue;
            ck_assert_uint_eq(off[k], end);
            end = off[k] + len[k];
        }
        ck_assert_uint_eq(end, count / 8);
    }
    tree_wplan_fini(&p);
}
END_TEST

static bool uniform(const tree_topo *t)
{
    double x = tree_w(t, 0, 1);
    for (int i = 0; i < t->n; i++)
        for (int j = 0; j < t->n; j++)
            if (i != j && (tree_w(t, i, j) != x || x <= 0))
                return false;
    return true;
}

static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The quality targets on the fixed family set, both modes.  The time bound
 * here is generous (the 50 ms target is measured by make bench). */
START_TEST(families_quality)
{
    tree_topo *l;
    int count;
    char err[512];
    ck_assert_msg(tree_topo_load_json(FAMILIES, &l, &count, err, sizeof err) == 0, "%s", err);
    ck_assert_int_ge(count, 20);
    for (int k = 0; k < count; k++)
        for (int m = 0; m < 2; m++) {
            tree_wplan p;
            double lb = bound_of(&l[k], NULL), t0 = cpu_ms(), load, cap;
            load = plan_check(&l[k], m ? TREE_MODE_BACKTRACK : TREE_MODE_KL, &p);
            double ms = cpu_ms() - t0;
            cap = uniform(&l[k]) ? 1.01 : 1.10;
            ck_assert_msg(load >= lb * (1 - 1e-9), "%s: load %g below the bound %g", l[k].name,
                          load, lb);
            ck_assert_msg(load <= lb * cap, "%s mode %d: load %g = %.4fx the bound %g",
                          l[k].name, m, load, load / lb, lb);
            ck_assert_msg(ms < 2000, "%s mode %d: %.0f ms", l[k].name, m, ms);
            tree_wplan_fini(&p);
        }
    tree_topo_list_free(l, count);
}
END_TEST

/* PCIe servers with NVLink bridge pairs, where the best packing wants more
 * trees for some roots than for others: within 1.10x the bound and 4N trees
 * in both modes (each was above 1.10x with four trees per root at most). */
START_TEST(bridge_pairs_quality)
{
    static const double w[2][8][8] = {
        {{0, 2, 1, 2, 1, 1, 5, 1}, {2, 0, 1, 5, 1, 1, 2, 1}, {1, 1, 0, 1, 5, 2, 1, 2},
         {2, 5, 1, 0, 1, 1, 2, 1}, {1, 1, 5, 1, 0, 2, 1, 2}, {1, 1, 2, 1, 2, 0, 1, 5},
         {5, 2, 1, 2, 1, 1, 0, 1}, {1, 1, 2, 1, 2, 5, 1, 0}},
        {{0, 1, 5, 1, 1, 1, 1, 1}, {1, 0, 1, 1, 1, 1, 1, 5}, {5, 1, 0, 1, 1, 1, 1, 1},
         {1, 1, 1, 0, 1, 1, 5, 1}, {1, 1, 1, 1, 0, 5, 1, 1}, {1, 1, 1, 1, 5, 0, 1, 1},
         {1, 1, 1, 5, 1, 1, 0, 1}, {1, 5, 1, 1, 1, 1, 1, 0}}};
    for (int g = 0; g < 2; g++) {
        tree_topo t;
        ck_assert_int_eq(tree_topo_init(&t, 8), 0);
        for (int i = 0; i < 8; i++)
            for (int j = i + 1; j < 8; j++)
                sym_link(&t, i, j, w[g][i][j]);
        double lb = bound_of(&t, NULL);
        for (int m = 0; m < 2; m++) {
            tree_wplan p;
            double load = plan_check(&t, m ? TREE_MODE_BACKTRACK : TREE_MODE_KL, &p);
            ck_assert_msg(load <= lb * 1.10, "bridge pairs %d mode %d: %.4fx the bound", g, m,
                          load / lb);
            tree_wplan_fini(&p);
        }
        tree_topo_fini(&t);
    }
}
END_TEST

/* Cost of the in-tree par of root r, or INFINITY when par is not one (a
 * cycle, a missing link). */
static double intree_cost(int n, const double *cost, int r, const int *par)
{
    double s = 0;
    if (par[r] != -1)
        return INFINITY;
    for (int v = 0; v < n; v++) {
        int x = v, k = 0;
        if (v == r)
            continue;
        if (par[v] < 0 || par[v] >= n || par[v] == v || !(cost[v * n + par[v]] < 1e300))
            return INFINITY;
        s += cost[v * n + par[v]];
        while (x != r && k++ <= n)
            x = par[x];
        if (x != r)
            return INFINITY;
    }
    return s;
}

/* The least in-tree cost of root r over every parent assignment. */
static double brute_intree(int n, const double *cost, int r)
{
    int par[8], idx[8] = {0}, total = 1;
    double best = INFINITY;
    for (int v = 0; v < n - 1; v++)
        total *= n;
    for (int code = 0; code < total; code++) {
        int c = code;
        for (int v = 0, k = 0; v < n; v++) {
            if (v == r) {
                par[v] = -1;
                continue;
            }
            idx[k] = c % n;
            par[v] = idx[k++];
            c /= n;
        }
        double x = intree_cost(n, cost, r, par);
        if (x < best)
            best = x;
    }
    return best;
}

/* The packing's oracle: one root-free contraction gives the minimum in-tree
 * of every root; checked against every parent assignment on random graphs
 * of 2..6 GPUs with ties (costs from a small set) and without. */
START_TEST(min_intrees_exact)
{
    uint64_t seed = 0x1234567ULL;
    for (int trial = 0; trial < 300; trial++) {
        int n = 2 + trial % 5, par[36];
        double cost[36];
        bool ties = trial % 2;
        /* a ring for connectivity, then random chords, both directions */
        for (int i = 0; i < n * n; i++)
            cost[i] = 1e300;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
                bool ring = j == (i + 1) % n || i == (j + 1) % n;
                if (i != j && (ring || (seed >> 60) < 6)) {
                    uint64_t a = seed >> 33, b = (seed >> 13) & 0xfffff;
                    cost[i * n + j] = ties ? (double)(1 + a % 3) : 0.5 + (double)a / 4e9;
                    cost[j * n + i] = ties ? (double)(1 + b % 3) : 0.25 + (double)b / 1e6;
                }
            }
        ck_assert_int_eq(tree_min_intrees(n, cost, par), 0);
        for (int r = 0; r < n; r++) {
            double got = intree_cost(n, cost, r, par + r * n), want = brute_intree(n, cost, r);
            ck_assert_msg(isfinite(got), "trial %d root %d: not an in-tree", trial, r);
            ck_assert_msg(fabs(got - want) <= 1e-9 * want, "trial %d n %d root %d: %.17g, best %.17g",
                          trial, n, r, got, want);
        }
    }
    /* two GPUs without a link between them, and n out of range */
    {
        double c2[4] = {1e300, 1e300, 1e300, 1e300};
        int p2[4];
        ck_assert_int_eq(tree_min_intrees(2, c2, p2), KVS_EINVAL);
        ck_assert_int_eq(tree_min_intrees(0, c2, p2), KVS_EINVAL);
        ck_assert_int_eq(tree_min_intrees(1, c2, p2), 0);
        ck_assert_int_eq(p2[0], -1);
    }
}
END_TEST

Suite *tree_pack_suite(void)
{
    Suite *s = suite_create("tree_pack");
    TCase *c = tcase_create("pack");
    tcase_set_timeout(c, 300);
    tcase_add_test(c, bound_by_hand);
    tcase_add_test(c, min_intrees_exact);
    tcase_add_test(c, packing_by_hand);
    tcase_add_test(c, plan_options_and_rules);
    tcase_add_test(c, slices_by_parts);
    tcase_add_test(c, families_quality);
    tcase_add_test(c, bridge_pairs_quality);
    suite_add_tcase(s, c);
    return s;
}
