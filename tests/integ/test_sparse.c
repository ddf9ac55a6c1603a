/*
 * test_sparse.c - row-sparse keys, run by kvs-sparseworker (sparseworker.c):
 * sums of row-sparse pushes element by element against a dense reference
 * (one and several servers: keys split by rows, parts cut into chunks),
 * pushpull answers, the lazy
 * update of sgd with momentum and adam (rows without a gradient keep weight
 * and state), dist_async, and every user error before anything is sent.
 */
#include "tests.h"

#include <stdio.h>
#include <string.h>

static void sparse_env(it_ctx *t)
{
    it_use_worker(t, "kvs-sparseworker");
    it_setenv(t, "MXNET_KVSTORE_BIGARRAY_BOUND", "1000");
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_setenv(t, "PS_VERBOSE", "1");
}

static void run(it_ctx *t, int nserver, int nworker, const char *const *argv)
{
    sparse_env(t);
    it_start_job(t, nserver, nworker, argv);
    it_expect_job_ok(t, 60);
}

IT_TEST(sparse_sum_1x2)
{
    static const char *const argv[] = {"sum", "--rounds", "5", NULL};
    run(t, 1, 2, argv);
}

IT_TEST(sparse_sum_3x3)
{
    static const char *const argv[] = {"sum", "--rounds", "5", NULL};
    run(t, 3, 3, argv);
}

/* parts cut into chunks of whole rows (4096 bytes: 128 rows of 8 float32) */
IT_TEST(sparse_chunks_2x2)
{
    static const char *const argv[] = {"sum", "--rounds", "4", "--pushpull", NULL};
    it_setenv(t, "KVS_RSP_CHUNK_BYTES", "4096");
    run(t, 2, 2, argv);
}

IT_TEST(sparse_pushpull_2x3)
{
    static const char *const argv[] = {"sum", "--rounds", "5", "--pushpull", NULL};
    run(t, 2, 3, argv);
}

IT_TEST(sparse_lazy_sgd_2x2)
{
    static const char *const argv[] = {"sum", "--rounds", "6", "--pushpull", "--optim",
                                       "sgd learning_rate=0.1 momentum=0.9 wd=0.01", NULL};
    run(t, 2, 2, argv);
}

IT_TEST(sparse_lazy_adam_2x2)
{
    static const char *const argv[] = {"sum", "--rounds", "6", "--optim",
                                       "adam learning_rate=0.01 wd=0.001", NULL};
    run(t, 2, 2, argv);
}

IT_TEST(sparse_async_2x2)
{
    static const char *const argv[] = {"sum", "--rounds", "4", "--async", NULL};
    run(t, 2, 2, argv);
}

IT_TEST(sparse_errors_2x2)
{
    static const char *const argv[] = {"errors", NULL};
    run(t, 2, 2, argv);
}
