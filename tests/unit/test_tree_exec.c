/* test_tree_exec.c - schedules and the CPU executor: results equal a direct
 * sum, for every root, split and unsplit. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/tree_backend_cpu.h"
#include "tree/tree.h"

static uint64_t rng(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static const char *const mats[] = {
    /* dgx1 */
    "0,2,2,3,3,0,0,0;2,0,3,2,0,3,0,0;2,3,0,3,0,0,2,0;3,2,3,0,0,0,0,2;"
    "3,0,0,0,0,2,2,3;0,3,0,0,2,0,3,2;0,0,2,0,2,3,0,3;0,0,0,2,3,2,3,0",
    "0,2,2,2;2,0,2,2;2,2,0,2;2,2,2,0",                             /* full4 */
    "0,1,0,0,0,1;1,0,1,0,0,0;0,1,0,1,0,0;0,0,1,0,1,0;0,0,0,1,0,1;1,0,0,0,1,0", /* ring6 */
    "0,1,1,1,1;1,0,0,0,0;1,0,0,0,0;1,0,0,0,0;1,0,0,0,0",           /* star5 */
    "0,3;3,0",
    "0",
};

static void plan(const char *m, tree_topo *t, tree_set *s)
{
    char err[256];
    tree_opts o;
    tree_opts_default(&o);
    o.effort = 20;
    ck_assert_int_eq(tree_topo_parse(m, "test", t, err, sizeof err), 0);
    ck_assert_msg(tree_plan(t, &o, s, err, sizeof err) == 0, "%s", err);
}

/* Every stage: per slice, a GPU is src at most once, dst at most once, and
 * never both (steps of a stage may run concurrently). */
static void check_stages(const tree_sched *sc)
{
    for (int g = 0; g < sc->nstages; g++) {
        int src[TREE_MAX_N][TREE_MAX_N] = {{0}}, dst[TREE_MAX_N][TREE_MAX_N] = {{0}};
        ck_assert_int_lt(sc->stage_start[g], sc->stage_start[g + 1]);
        for (int i = sc->stage_start[g]; i < sc->stage_start[g + 1]; i++) {
            const tree_step *st = &sc->steps[i];
            ck_assert_int_ne(st->src, st->dst);
            ck_assert_int_eq(src[st->slice][st->src]++, 0);
            ck_assert_int_eq(dst[st->slice][st->dst]++, 0);
        }
        for (int k = 0; k < sc->nslices; k++)
            for (int v = 0; v < sc->n; v++)
                ck_assert(!(src[k][v] && dst[k][v]));
    }
}

static void allreduce_check(const tree_topo *t, const tree_set *s, uint64_t count, int root,
                            uint64_t bound, kvs_dtype dtype, uint64_t *seed)
{
    int n = t->n;
    size_t es = kvs_dtype_size(dtype);
    void *bufs[TREE_MAX_N];
    char *want = calloc(count ? count : 1, es);
    tree_backend be;
    tree_opts o;
    tree_opts_default(&o);
    o.array_bound = bound;
    tree_backend_cpu(NULL, &be);
    for (int g = 0; g < n; g++) {
        bufs[g] = malloc(count * es + 1);
        for (uint64_t i = 0; i < count; i++) {
            if (dtype == KVS_INT64) {
                int64_t x = (int64_t)rng(seed);
                ((int64_t *)bufs[g])[i] = x;
                ((int64_t *)want)[i] = (int64_t)((uint64_t)((int64_t *)want)[i] + (uint64_t)x);
            } else { /* float32 with small integers: exact */
                float x = (float)(int)(rng(seed) % 2001) - 1000.0f;
                ((float *)bufs[g])[i] = x;
                ((float *)want)[i] += x;
            }
        }
    }
    ck_assert_int_eq(tree_allreduce(s, &o, &be, bufs, dtype, count, root), 0);
    for (int g = 0; g < n; g++) {
        ck_assert_msg(memcmp(bufs[g], want, count * es) == 0,
                      "n=%d root=%d count=%llu bound=%llu: GPU %d differs", n, root,
                      (unsigned long long)count, (unsigned long long)bound, g);
        free(bufs[g]);
    }
    free(want);
}

START_TEST(allreduce_every_root)
{
    uint64_t seed = 12345;
    for (size_t m = 0; m < sizeof mats / sizeof mats[0]; m++) {
        tree_topo t;
        tree_set s;
        plan(mats[m], &t, &s);
        for (int root = 0; root < t.n; root++) {
            allreduce_check(&t, &s, 1000, root, 1u << 30, KVS_INT64, &seed); /* unsplit */
            allreduce_check(&t, &s, 1000, root, 100, KVS_INT64, &seed);      /* split */
            allreduce_check(&t, &s, 257, root, 100, KVS_FLOAT32, &seed);
            allreduce_check(&t, &s, 3, root, 1, KVS_INT64, &seed); /* empty slices */
            allreduce_check(&t, &s, 0, root, 1, KVS_FLOAT32, &seed);
        }
        tree_set_fini(&s);
        tree_topo_fini(&t);
    }
}
END_TEST

START_TEST(random_topologies_exec)
{
    uint64_t seed = 999;
    for (int k = 0; k < 12; k++) {
        int n = 3 + (int)(rng(&seed) % 14);
        char m[TREE_MAX_N * TREE_MAX_N * 3];
        size_t off = 0;
        double w[TREE_MAX_N][TREE_MAX_N] = {{0}};
        for (int i = 1; i < n; i++) { /* random tree + extra links */
            int j = (int)(rng(&seed) % (uint64_t)i);
            w[i][j] = w[j][i] = 1 + (double)(rng(&seed) % 3);
        }
        for (int i = 0; i < n; i++)
            for (int j = i + 1; j < n; j++)
                if (rng(&seed) % 4 == 0)
                    w[i][j] = w[j][i] = 1 + (double)(rng(&seed) % 3);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                off += (size_t)snprintf(m + off, sizeof m - off, "%g%s", w[i][j],
                                        j + 1 < n ? "," : (i + 1 < n ? ";" : ""));
        tree_topo t;
        tree_set s;
        plan(m, &t, &s);
        for (int root = 0; root < n; root++)
            allreduce_check(&t, &s, 100 + (uint64_t)root, root, root % 2 ? 10 : 1000, KVS_INT64,
                            &seed);
        tree_set_fini(&s);
        tree_topo_fini(&t);
    }
}
END_TEST

START_TEST(schedules)
{
    tree_topo t;
    tree_set s;
    tree_sched sc;
    plan(mats[0], &t, &s);
    for (int root = -1; root < t.n; root++) {
        ck_assert_int_eq(tree_sched_build(&s, root, TREE_PHASE_REDUCE | TREE_PHASE_BCAST, &sc), 0);
        ck_assert_int_eq(sc.nslices, root < 0 ? 8 : 1);
        ck_assert_int_eq(sc.nsteps, 2 * 7 * (root < 0 ? 8 : 1));
        ck_assert_int_eq(sc.nstages, 2 * s.rounds);
        check_stages(&sc);
        for (int i = 0; i < sc.nsteps; i++)
            ck_assert_int_eq(sc.steps[i].op, i < sc.nsteps / 2 ? TREE_OP_REDUCE : TREE_OP_COPY);
        tree_sched_fini(&sc);
    }
    /* reduce only: the root of the tree holds the sum */
    {
        int64_t data[8][5], want[5] = {0};
        void *bufs[8];
        tree_backend be;
        for (int g = 0; g < 8; g++) {
            for (int i = 0; i < 5; i++) {
                data[g][i] = g * 100 + i;
                want[i] += data[g][i];
            }
            bufs[g] = data[g];
        }
        tree_backend_cpu(NULL, &be);
        ck_assert_int_eq(tree_sched_build(&s, 5, TREE_PHASE_REDUCE, &sc), 0);
        ck_assert_int_eq(tree_exec(&sc, &be, bufs, KVS_INT64, 5), 0);
        ck_assert_int_eq(memcmp(data[5], want, sizeof want), 0);
        tree_sched_fini(&sc);
    }
    ck_assert_int_eq(tree_sched_build(&s, 8, TREE_PHASE_REDUCE, &sc), KVS_EINVAL);
    ck_assert_int_eq(tree_sched_build(&s, -2, TREE_PHASE_REDUCE, &sc), KVS_EINVAL);
    tree_set_fini(&s);
    tree_topo_fini(&t);
    /* slices cover the array exactly */
    for (uint64_t c = 0; c < 40; c++) {
        uint64_t next = 0, off, len;
        for (int i = 0; i < 7; i++) {
            tree_slice(c, 7, i, &off, &len);
            ck_assert_uint_eq(off, next);
            next = off + len;
        }
        ck_assert_uint_eq(next, c);
    }
    uint64_t off, len;
    tree_slice(UINT64_MAX, 64, 63, &off, &len);
    ck_assert_uint_eq(off + len, UINT64_MAX);
}
END_TEST

Suite *tree_exec_suite(void)
{
    Suite *s = suite_create("tree_exec");
    TCase *c = tcase_create("exec");
    tcase_set_timeout(c, 60);
    tcase_add_test(c, allreduce_every_root);
    tcase_add_test(c, random_topologies_exec);
    tcase_add_test(c, schedules);
    suite_add_tcase(s, c);
    return s;
}
