/* test_tree.c - the tree planner: parsing, rules, quality, env handling. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/config.h"
#include "tree/json.h"
#include "tree/tree.h"

static const double dgx1_raw[64] = {
    0, 2, 2, 3, 3, 1, 1, 1, 2, 0, 3, 2, 1, 3, 1, 1, 2, 3, 0, 3, 1, 1, 2, 1, 3, 2, 3, 0, 1, 1, 1, 2,
    3, 1, 1, 1, 0, 2, 2, 3, 1, 3, 1, 1, 2, 0, 3, 2, 1, 1, 2, 1, 2, 3, 0, 3, 1, 1, 1, 2, 3, 2, 3, 0};

static void topo_of(tree_topo *t, int n, const double *w)
{
    ck_assert_int_eq(tree_topo_init(t, n), 0);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            t->w[i * n + j] = i == j ? 0 : w[i * n + j];
}

/* DGX-1 as the planner sees it: PCIe (1) links removed. */
static void dgx1(tree_topo *t)
{
    double w[64];
    for (int i = 0; i < 64; i++)
        w[i] = dgx1_raw[i] > 1 ? dgx1_raw[i] : 0;
    topo_of(t, 8, w);
}

static uint64_t rng(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* Random connected topology: a random spanning tree plus links with
 * probability density; weights 1..3, asymmetric when asym. */
static void random_topo(tree_topo *t, int n, double density, bool asym, uint64_t *s)
{
    int perm[TREE_MAX_N];
    ck_assert_int_eq(tree_topo_init(t, n), 0);
    for (int i = 0; i < n; i++)
        perm[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(rng(s) % (uint64_t)(i + 1)), x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    for (int i = 1; i < n; i++) {
        int a = perm[i], b = perm[rng(s) % (uint64_t)i];
        t->w[a * n + b] = 1 + (double)(rng(s) % 3);
        t->w[b * n + a] = asym ? 1 + (double)(rng(s) % 3) : t->w[a * n + b];
    }
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (t->w[i * n + j] == 0 && (double)(rng(s) % 10000) / 10000.0 < density) {
                t->w[i * n + j] = 1 + (double)(rng(s) % 3);
                t->w[j * n + i] = asym ? 1 + (double)(rng(s) % 3) : t->w[i * n + j];
            }
}

static void plan_ok(const tree_topo *t, const tree_opts *o, tree_set *s, tree_score *sc)
{
    char err[256] = "";
    int rc = tree_plan(t, o, s, err, sizeof err);
    ck_assert_msg(rc == 0, "plan failed (n=%d): %s", t->n, err);
    ck_assert_msg(tree_validate(t, s, err, sizeof err) == 0, "invalid plan (n=%d): %s", t->n, err);
    tree_score_compute(t, s, sc);
    ck_assert(sc->valid);
    ck_assert_int_eq(sc->nonlink_edges, 0);
}

/* ------------------------------------------------------------------ DGX-1 */

static void check_dgx1(tree_mode mode)
{
    tree_topo t;
    tree_set s;
    tree_score sc, ref;
    tree_opts o;
    char err[256];
    tree_opts_default(&o);
    o.mode = mode;
    dgx1(&t);
    plan_ok(&t, &o, &s, &sc);
    ck_assert_int_eq(sc.rounds, 3);
    ck_assert_double_eq_tol(sc.reduce_load_time, 0.125, 1e-12);
    ck_assert_double_eq_tol(sc.bottleneck_sum, 16, 1e-12);
    ck_assert_int_le(sc.congestion, 2);
    for (int r = 0; r < 8; r++)
        ck_assert_double_eq_tol(sc.bottleneck[r], 2, 1e-12);
    tree_set_fini(&s);
    /* the reference (MXNet-like) planner is not better */
    ck_assert_int_eq(tree_plan_mxnet_like(&t, &o, &s, err, sizeof err), 0);
    tree_score_compute(&t, &s, &ref);
    ck_assert(ref.valid);
    ck_assert_int_le(tree_score_cmp(&sc, &ref), 0);
    tree_set_fini(&s);
    tree_topo_fini(&t);
}

START_TEST(dgx1_kl) { check_dgx1(TREE_MODE_KL); }
END_TEST

START_TEST(dgx1_backtrack) { check_dgx1(TREE_MODE_BACKTRACK); }
END_TEST

START_TEST(full4_and_small)
{
    double full4[16] = {0, 2, 2, 2, 2, 0, 2, 2, 2, 2, 0, 2, 2, 2, 2, 0};
    tree_topo t;
    tree_set s;
    tree_score sc;
    tree_opts o;
    tree_opts_default(&o);
    topo_of(&t, 4, full4);
    plan_ok(&t, &o, &s, &sc);
    ck_assert_int_eq(sc.rounds, 2);
    ck_assert_double_eq_tol(sc.reduce_load_time, 0.125, 1e-12);
    ck_assert_int_eq(sc.congestion, 1);
    tree_set_fini(&s);
    tree_topo_fini(&t);
    /* one GPU: no edges; two GPUs: one edge each way */
    double one[1] = {0}, two[4] = {0, 5, 5, 0};
    topo_of(&t, 1, one);
    plan_ok(&t, &o, &s, &sc);
    ck_assert_int_eq(sc.rounds, 0);
    tree_set_fini(&s);
    tree_topo_fini(&t);
    topo_of(&t, 2, two);
    plan_ok(&t, &o, &s, &sc);
    ck_assert_int_eq(sc.rounds, 1);
    ck_assert_double_eq_tol(sc.reduce_load_time, 0.1, 1e-12);
    ck_assert_int_eq(s.parent[1], 0);
    ck_assert_int_eq(s.parent[2], 1);
    tree_set_fini(&s);
    tree_topo_fini(&t);
}
END_TEST

/* A ring of 6: depth must exceed nothing but the diameter allows 3. */
START_TEST(ring_and_line_deeper)
{
    double w[36] = {0};
    tree_topo t;
    tree_set s;
    tree_score sc;
    tree_opts o;
    tree_opts_default(&o);
    for (int i = 0; i < 6; i++)
        w[i * 6 + (i + 1) % 6] = w[((i + 1) % 6) * 6 + i] = 1;
    topo_of(&t, 6, w);
    plan_ok(&t, &o, &s, &sc);
    ck_assert_int_eq(sc.rounds, 3);
    ck_assert_double_eq_tol(sc.reduce_load_time, 0.5, 1e-12);
    tree_set_fini(&s);
    tree_topo_fini(&t);
    /* a line of 5 needs 4 rounds from an end: deeper than log2 */
    double l[25] = {0};
    for (int i = 0; i + 1 < 5; i++)
        l[i * 5 + i + 1] = l[(i + 1) * 5 + i] = 2;
    for (int m = 0; m < 2; m++) {
        o.mode = m ? TREE_MODE_BACKTRACK : TREE_MODE_KL;
        topo_of(&t, 5, l);
        plan_ok(&t, &o, &s, &sc);
        ck_assert_int_eq(sc.rounds, 4);
        tree_set_fini(&s);
        tree_topo_fini(&t);
    }
}
END_TEST

/* N = 5, 9, 10, 11 complete graphs: KL must succeed at ceil(log2 N). */
START_TEST(kl_odd_sizes)
{
    static const int ns[] = {3, 5, 6, 7, 9, 10, 11, 12, 13};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        int n = ns[k], d = 0;
        double w[TREE_MAX_N * TREE_MAX_N];
        tree_topo t;
        tree_set s;
        tree_score sc;
        tree_opts o;
        clock_t c0 = clock();
        tree_opts_default(&o);
        while ((1 << d) < n)
            d++;
        for (int i = 0; i < n * n; i++)
            w[i] = 2;
        topo_of(&t, n, w);
        o.optimize = false; /* the construction alone reaches ceil(log2 n) */
        plan_ok(&t, &o, &s, &sc);
        ck_assert_int_eq(sc.rounds, d);
        tree_set_fini(&s);
        o.optimize = true; /* the search may go one deeper when the load drops */
        plan_ok(&t, &o, &s, &sc);
        ck_assert_int_le(sc.rounds, d + 1);
        ck_assert_msg((double)(clock() - c0) / CLOCKS_PER_SEC < 0.2, "n=%d too slow", n);
        tree_set_fini(&s);
        tree_topo_fini(&t);
    }
}
END_TEST

START_TEST(disconnected_error)
{
    double w[36] = {0};
    tree_topo t;
    tree_set s;
    tree_opts o;
    char err[256];
    tree_opts_default(&o);
    w[0 * 6 + 1] = w[1 * 6 + 0] = 3;
    w[2 * 6 + 3] = w[3 * 6 + 2] = 3;
    w[1 * 6 + 4] = 2; /* one direction only: not a usable link */
    topo_of(&t, 6, w);
    for (int m = 0; m < 2; m++) {
        o.mode = m ? TREE_MODE_BACKTRACK : TREE_MODE_KL;
        ck_assert_int_eq(tree_plan(&t, &o, &s, err, sizeof err), KVS_EINVAL);
        ck_assert_str_eq(err, "link graph is disconnected: GPUs 2, 3, 4, 5 cannot be reached "
                              "from GPU 0");
        ck_assert_int_eq(tree_plan_mxnet_like(&t, &o, &s, err, sizeof err), KVS_EINVAL);
    }
    tree_topo_fini(&t);
}
END_TEST

/* ------------------------------------------------------- random topologies */

/* Hundreds of random connected topologies, N = 2..32, several densities,
 * both modes, symmetric and not: every plan obeys the rules. */
START_TEST(random_valid)
{
    static const double dens[] = {0.0, 0.1, 0.3, 1.0};
    uint64_t seed = 0xC0FFEE + (uint64_t)_i;
    int plans = 0;
    tree_opts o;
    tree_opts_default(&o);
    o.effort = 10; /* the rules, not the quality, are under test here */
    for (int n = 2; n <= 32; n += (n < 12 ? 1 : 5)) {
        for (size_t d = 0; d < sizeof dens / sizeof dens[0]; d++) {
            tree_topo t;
            tree_set s;
            tree_score sc;
            random_topo(&t, n, dens[d], (n + (int)d) % 3 == 0, &seed);
            o.mode = (n + (int)d + _i) % 2 ? TREE_MODE_BACKTRACK : TREE_MODE_KL;
            plan_ok(&t, &o, &s, &sc);
            for (int r = 0; r < n; r++)
                ck_assert_int_eq(s.parent[r * n + r], -1);
            tree_set_fini(&s);
            tree_topo_fini(&t);
            plans++;
        }
    }
    ck_assert_int_ge(plans, 60);
}
END_TEST

/* Never worse than the MXNet-like reference; usually better. */
START_TEST(random_not_worse_than_reference)
{
    uint64_t seed = 0xBEEF;
    int better = 0, total = 0;
    tree_opts o;
    tree_opts_default(&o);
    for (int n = 3; n <= 16; n++) {
        for (int k = 0; k < 3; k++) {
            tree_topo t;
            tree_set s, r;
            tree_score a, b;
            char err[256];
            random_topo(&t, n, 0.15 + 0.3 * k, false, &seed);
            o.mode = (n + k) % 2 ? TREE_MODE_BACKTRACK : TREE_MODE_KL;
            plan_ok(&t, &o, &s, &a);
            ck_assert_int_eq(tree_plan_mxnet_like(&t, &o, &r, err, sizeof err), 0);
            tree_score_compute(&t, &r, &b);
            ck_assert(b.valid);
            ck_assert_msg(tree_score_cmp(&a, &b) <= 0, "n=%d: ours %g worse than reference %g",
                          n, a.reduce_load_time, b.reduce_load_time);
            better += a.reduce_load_time < b.reduce_load_time * (1 - 1e-9);
            total++;
            tree_set_fini(&s);
            tree_set_fini(&r);
            tree_topo_fini(&t);
        }
    }
    ck_assert_msg(better * 2 > total, "better on only %d of %d", better, total);
}
END_TEST

START_TEST(deterministic_and_timing)
{
    uint64_t seed = 77;
    tree_topo t;
    tree_set a, b;
    tree_score sc;
    tree_opts o;
    struct timespec t0, t1;
    tree_opts_default(&o);
    random_topo(&t, 16, 0.3, false, &seed);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    plan_ok(&t, &o, &a, &sc);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    /* the goal is 20 ms; allow for a loaded test machine */
    ck_assert_double_lt((double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9, 0.2);
    plan_ok(&t, &o, &b, &sc);
    ck_assert_int_eq(memcmp(a.parent, b.parent, sizeof(int) * 256), 0);
    ck_assert_int_eq(memcmp(a.round, b.round, sizeof(int) * 256), 0);
    tree_set_fini(&a);
    tree_set_fini(&b);
    tree_topo_fini(&t);
}
END_TEST

/* -------------------------------------------------------------- the rules */

START_TEST(validate_rules)
{
    double full4[16] = {0, 2, 2, 0, 2, 0, 2, 2, 2, 2, 0, 2, 0, 2, 2, 0}; /* 0-3 missing */
    tree_topo t;
    tree_set s;
    tree_score sc;
    char err[256];
    tree_edge e[3];
    topo_of(&t, 4, full4);
    ck_assert_int_eq(tree_set_init(&s, 4), 0);
    for (int r = 0; r < 4; r++) { /* star-like chains r -> r+1 -> r+2 -> r+3 */
        for (int k = 0; k < 3; k++)
            e[k] = (tree_edge){(r + k) % 4, (r + k + 1) % 4, k + 1};
        ck_assert_int_eq(tree_set_from_edges(&s, r, e, 3, err, sizeof err), 0);
    }
    tree_score_compute(&t, &s, &sc);
    ck_assert(!sc.valid);
    ck_assert_int_eq(sc.nonlink_edges, 3); /* 3->0 in trees 1, 2, 3 */
    ck_assert_int_eq(sc.rounds, 3);
    ck_assert(isinf(sc.reduce_load_time));
    ck_assert_ptr_nonnull(strstr(sc.error, "has no link"));
    /* a send before the data arrived */
    s.round[0 * 4 + 2] = 1; /* tree 0: 1 -> 2 in round 1, but 1 receives in round 1 */
    ck_assert_int_eq(tree_validate(&t, &s, err, sizeof err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "before it has the data"));
    tree_set_fini(&s);
    /* two sends in one round; unreached GPU; duplicate child */
    ck_assert_int_eq(tree_set_init(&s, 4), 0);
    e[0] = (tree_edge){0, 1, 1};
    e[1] = (tree_edge){0, 2, 1};
    e[2] = (tree_edge){1, 3, 2};
    ck_assert_int_eq(tree_set_from_edges(&s, 0, e, 1, err, sizeof err), 0);
    ck_assert_int_eq(tree_validate(&t, &s, err, sizeof err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "GPU 2 is not reached"));
    ck_assert_int_eq(tree_set_from_edges(&s, 0, e + 1, 2, err, sizeof err), 0);
    ck_assert_int_eq(tree_validate(&t, &s, err, sizeof err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "sends twice in round 1"));
    ck_assert_int_eq(tree_set_from_edges(&s, 0, e, 1, err, sizeof err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "more than once"));
    tree_set_fini(&s);
    tree_topo_fini(&t);
}
END_TEST

/* --------------------------------------------------------------- parsing */

START_TEST(matrix_string)
{
    tree_topo t;
    char err[256];
    ck_assert_int_eq(tree_topo_parse("0,2,2;2,0,3;2,3,0", "X", &t, err, sizeof err), 0);
    ck_assert_int_eq(t.n, 3);
    ck_assert_double_eq(tree_w(&t, 1, 2), 3);
    ck_assert_double_eq(tree_w(&t, 2, 0), 2);
    tree_topo_fini(&t);
    ck_assert_int_eq(tree_topo_parse(" 0 , 1.5 ; 1.5 , 0 ;", "X", &t, err, sizeof err), 0);
    ck_assert_double_eq(tree_w(&t, 0, 1), 1.5);
    tree_topo_fini(&t);
    ck_assert_int_eq(tree_topo_parse("0,2;2", "X", &t, err, sizeof err), KVS_EINVAL);
    ck_assert_int_eq(tree_topo_parse("0,2,1;2,0,1", "X", &t, err, sizeof err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "square"));
    ck_assert_int_eq(tree_topo_parse("0,-1;1,0", "X", &t, err, sizeof err), KVS_EINVAL);
    ck_assert_int_eq(tree_topo_parse("0,x;1,0", "X", &t, err, sizeof err), KVS_EINVAL);
    ck_assert_int_eq(tree_topo_parse("0,nan;1,0", "X", &t, err, sizeof err), KVS_EINVAL);
    ck_assert_int_eq(tree_topo_parse("", "X", &t, err, sizeof err), KVS_EINVAL);
    ck_assert_int_eq(tree_topo_parse("0 2;2 0", "X", &t, err, sizeof err), KVS_EINVAL);
}
END_TEST

START_TEST(json_topologies)
{
    const char *ok = "{\"topologies\": [{\"name\": \"a\\u00e9\", \"n\": 2, \"weights\": "
                     "[[0, 1e0], [1, 0]]}, {\"name\": \"b\", \"weights\": [[0]]}]}";
    static const char *const bad[] = {
        "{\"topologies\": [{\"n\": 2, \"weights\": [[0, 1], [1, 0]],}]}",  /* trailing comma */
        "{\"topologies\": [{\"n\": 3, \"weights\": [[0, 1], [1, 0]]}]}",   /* n mismatch */
        "{\"topologies\": [{\"n\": 2, \"weights\": [[0, 1], [1]]}]}",      /* ragged */
        "{\"topologies\": [{\"n\": 2, \"weights\": [[0, -1], [1, 0]]}]}",  /* negative */
        "{\"topologies\": [{\"n\": 2, \"weights\": [[0, \"1\"], [1, 0]]}]}",
        "{\"topologies\": [{\"n\": 2, \"weights\": [[0, 01], [1, 0]]}]}",  /* leading zero */
        "{\"topologies\": [] // comment\n}",
        "{\"topologies\": [{\"n\": 1.5, \"weights\": [[0]]}]}",
        "{\"topologies\": [{\"n\": 1, \"weights\": [[0]]}]} x",
        "{\"topologies\": \"no\"}",
        "{\"topologies\": [{\"n\": 1, \"weights\": [[1e999]]}]}",
        "{\"topologies\": [{\"name\": \"\\ud800\", \"weights\": [[0]]}]}",
        "{\"topologies\": [{\"name\": \"a", "",
    };
    tree_topo *l;
    int c;
    char err[256], deep[300];
    ck_assert_int_eq(tree_topo_parse_json(ok, strlen(ok), "ok.json", &l, &c, err, sizeof err), 0);
    ck_assert_int_eq(c, 2);
    ck_assert_str_eq(l[0].name, "a\xc3\xa9");
    ck_assert_double_eq(tree_w(&l[0], 0, 1), 1);
    ck_assert_int_eq(l[1].n, 1);
    tree_topo_list_free(l, c);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = tree_topo_parse_json(bad[i], strlen(bad[i]), "bad.json", &l, &c, err, sizeof err);
        ck_assert_msg(rc == KVS_EINVAL, "bad[%zu] accepted: %s", i, bad[i]);
        ck_assert_ptr_nonnull(strstr(err, "bad.json"));
    }
    /* nesting limit */
    memset(deep, '[', sizeof deep);
    tj_val *v;
    ck_assert_int_eq(tj_parse(deep, sizeof deep, "deep", &v, err, sizeof err), KVS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "nesting"));
    /* file errors name the file */
    ck_assert_int_ne(tree_topo_load_json("/nonexistent/x.json", &l, &c, err, sizeof err), 0);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/x.json"));
}
END_TEST

START_TEST(cuda_adjustment)
{
    int rank[64];
    tree_topo t, d;
    for (int i = 0; i < 64; i++)
        rank[i] = (int)dgx1_raw[i];
    ck_assert_int_eq(tree_topo_from_ranks(8, rank, &t), 0);
    dgx1(&d);
    for (int i = 0; i < 64; i++)
        ck_assert_double_eq(t.w[i], d.w[i]);
    tree_topo_fini(&t);
    tree_topo_fini(&d);
    /* NVLink graph not connected: PCIe links get 1/n */
    int r2[9] = {0, 3, 1, 3, 0, 1, 1, 1, 0};
    ck_assert_int_eq(tree_topo_from_ranks(3, r2, &t), 0);
    ck_assert_double_eq(tree_w(&t, 0, 1), 3);
    ck_assert_double_eq_tol(tree_w(&t, 0, 2), 1.0 / 3, 1e-15);
    tree_topo_fini(&t);
}
END_TEST

/* ------------------------------------------------------------ environment */

/* The tree variables go through cfg_load (common/cfgvars.h) like every other. */
static cfg env_c;

static int opts_env(tree_opts *o, char *err, size_t errlen)
{
    int rc = cfg_load(&env_c, false, err, errlen);
    if (rc == 0)
        tree_opts_from_cfg(o, &env_c);
    return rc;
}

static int topo_env(tree_topo *t, bool *found, char *err, size_t errlen)
{
    int rc = cfg_load(&env_c, false, err, errlen);
    return rc ? rc : tree_topo_from_spec(env_c.topology, t, found, err, errlen);
}

START_TEST(env_vars)
{
    tree_opts o;
    tree_topo t;
    bool found;
    char err[256];
    unsetenv("MXNET_KVSTORE_TREE_BACKTRACK");
    unsetenv("MXNET_KVSTORE_TREE_LINK_USAGE_PENALTY");
    unsetenv("KVS_TOPOLOGY");
    ck_assert_int_eq(opts_env(&o, err, sizeof err), 0);
    ck_assert_int_eq(o.mode, TREE_MODE_KL);
    ck_assert_double_eq(o.penalty, 0.7);
    ck_assert_uint_eq(o.array_bound, 10000000);
    ck_assert(o.gpu_p2p);
    setenv("MXNET_KVSTORE_TREE_BACKTRACK", "1", 1);
    setenv("MXNET_KVSTORE_TREE_LINK_USAGE_PENALTY", "0.5", 1);
    setenv("MXNET_KVSTORE_TREE_ARRAY_BOUND", "1000", 1);
    setenv("MXNET_KVSTORE_LOGTREE", "0", 1);
    ck_assert_int_eq(opts_env(&o, err, sizeof err), 0);
    ck_assert_int_eq(o.mode, TREE_MODE_BACKTRACK);
    ck_assert_double_eq(o.penalty, 0.5);
    ck_assert_uint_eq(o.array_bound, 1000);
    setenv("MXNET_KVSTORE_TREE_BACKTRACK", "2", 1);
    ck_assert_int_eq(opts_env(&o, err, sizeof err), KVS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "MXNET_KVSTORE_TREE_BACKTRACK"));
    setenv("MXNET_KVSTORE_TREE_BACKTRACK", "0", 1);
    static const char *const pen[] = {"abc", "0", "1.5", "-0.1", "nan"};
    for (size_t i = 0; i < 5; i++) {
        setenv("MXNET_KVSTORE_TREE_LINK_USAGE_PENALTY", pen[i], 1);
        ck_assert_int_eq(opts_env(&o, err, sizeof err), KVS_ECONFIG);
        ck_assert_ptr_nonnull(strstr(err, "MXNET_KVSTORE_TREE_LINK_USAGE_PENALTY"));
    }
    unsetenv("MXNET_KVSTORE_TREE_LINK_USAGE_PENALTY");
    setenv("MXNET_KVSTORE_TREE_ARRAY_BOUND", "-5", 1);
    ck_assert_int_eq(opts_env(&o, err, sizeof err), KVS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "MXNET_KVSTORE_TREE_ARRAY_BOUND"));
    unsetenv("MXNET_KVSTORE_TREE_ARRAY_BOUND");
    setenv("MXNET_KVSTORE_LOGTREE", "maybe", 1);
    ck_assert_int_eq(opts_env(&o, err, sizeof err), KVS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "MXNET_KVSTORE_LOGTREE"));
    unsetenv("MXNET_KVSTORE_LOGTREE");
    /* KVS_TOPOLOGY */
    ck_assert_int_eq(topo_env(&t, &found, err, sizeof err), 0);
    ck_assert(!found);
    setenv("KVS_TOPOLOGY", "0,2,2;2,0,3;2,3,0", 1);
    ck_assert_int_eq(topo_env(&t, &found, err, sizeof err), 0);
    ck_assert(found);
    ck_assert_int_eq(t.n, 3);
    ck_assert_double_eq(tree_w(&t, 2, 1), 3);
    tree_topo_fini(&t);
    setenv("KVS_TOPOLOGY", "0,2;2,zero", 1);
    ck_assert_int_eq(topo_env(&t, &found, err, sizeof err), KVS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "KVS_TOPOLOGY"));
    unsetenv("KVS_TOPOLOGY");
}
END_TEST

START_TEST(penalty_changes_trees)
{
    tree_topo t;
    tree_set a, b;
    tree_score sa, sb;
    tree_opts o;
    dgx1(&t);
    tree_opts_default(&o);
    o.optimize = false;
    o.penalty = 1.0; /* no penalty: every tree takes the same strong links */
    plan_ok(&t, &o, &a, &sa);
    o.penalty = 0.7;
    plan_ok(&t, &o, &b, &sb);
    ck_assert_int_ne(memcmp(a.parent, b.parent, sizeof(int) * 64), 0);
    ck_assert_double_le(sb.reduce_load_time, sa.reduce_load_time);
    tree_set_fini(&a);
    tree_set_fini(&b);
    tree_topo_fini(&t);
}
END_TEST

Suite *tree_suite(void)
{
    Suite *s = suite_create("tree");
    TCase *c = tcase_create("planner");
    tcase_set_timeout(c, 60);
    tcase_add_test(c, dgx1_kl);
    tcase_add_test(c, dgx1_backtrack);
    tcase_add_test(c, full4_and_small);
    tcase_add_test(c, ring_and_line_deeper);
    tcase_add_test(c, kl_odd_sizes);
    tcase_add_test(c, disconnected_error);
    tcase_add_loop_test(c, random_valid, 0, 4);
    tcase_add_test(c, random_not_worse_than_reference);
    tcase_add_test(c, deterministic_and_timing);
    tcase_add_test(c, validate_rules);
    tcase_add_test(c, matrix_string);
    tcase_add_test(c, json_topologies);
    tcase_add_test(c, cuda_adjustment);
    tcase_add_test(c, env_vars);
    tcase_add_test(c, penalty_changes_trees);
    suite_add_tcase(s, c);
    return s;
}
