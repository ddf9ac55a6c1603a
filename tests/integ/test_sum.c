/*
 * test_sum.c - exact sums: dist_sync over a matrix of job sizes, every
 * dtype, small and split keys, pushpull, repeated keys, pipelining, threads,
 * two stores in one process, big keys; the local store; barrier; dist_async.
 * The checking is done by kvs-testworker (testworker.c); these tests start
 * the jobs and require every process to exit 0.  Every worker pushes for
 * itself (KVS_LOCAL_AGG=0), so the servers sum every worker's push: the
 * workers here share one host, and by default would sum in their local
 * group first (test_group.c tests that).
 */
#include "tests.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Split keys stay small and fast: counts >= 1000 are split over all servers. */
static void job_env(it_ctx *t)
{
    it_setenv(t, "MXNET_KVSTORE_BIGARRAY_BOUND", "1000");
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_setenv(t, "KVS_LOCAL_AGG", "0");
    it_setenv(t, "PS_VERBOSE", "1");
}

static void run_job(it_ctx *t, int nserver, int nworker, const char *const *argv, double secs)
{
    job_env(t);
    it_start_job(t, nserver, nworker, argv);
    it_expect_job_ok(t, secs);
}

static const char *const sum_all[] = {"sum", "--dtype", "all", "--split", "--rounds", "3", NULL};

IT_TEST(worker_selftest)
{
    static const char *const argv[] = {"selftest", NULL};
    int w = it_spawn(t, "selftest", t->worker_bin, argv, NULL);
    it_expect_exit(t, w, 0, 20);
}

IT_TEST(local_store)
{
    /* No scheduler, no DMLC_* at all: the local store sums on its own. */
    static const char *const argv[] = {"sum", "--type", "local", "--dtype", "all", "--split", "--dup",
                                       "--rounds", "2", NULL};
    static const char *const env[] = {"MXNET_KVSTORE_BIGARRAY_BOUND=1000", NULL};
    int w = it_spawn(t, "worker0", t->worker_bin, argv, env);
    it_expect_exit(t, w, 0, 20);
}

IT_TEST(sum_1x1) { run_job(t, 1, 1, sum_all, 40); }
IT_TEST(sum_1x4) { run_job(t, 1, 4, sum_all, 40); }
IT_TEST(sum_2x2) { run_job(t, 2, 2, sum_all, 40); }
IT_TEST(sum_3x3) { run_job(t, 3, 3, sum_all, 40); }
IT_TEST(sum_3x4) { run_job(t, 3, 4, sum_all, 40); }

IT_TEST(pushpull_2x3)
{
    static const char *const argv[] = {"sum", "--pushpull", "--split", "--rounds", "3", NULL};
    run_job(t, 2, 3, argv, 40);
}

/* Per-key completions through kvs_on_complete instead of kvs_wait. */
IT_TEST(callbacks_2x3)
{
    static const char *const argv[] = {"sum", "--split", "--dtype", "f32,i64", "--rounds", "4",
                                       "--threads", "2", "--callbacks", NULL};
    run_job(t, 2, 3, argv, 40);
}

IT_TEST(dup_keys_2x2)
{
    static const char *const argv[] = {"sum", "--dup", "--split", "--rounds", "3", NULL};
    run_job(t, 2, 2, argv, 40);
}

IT_TEST(dup_pushpull_3x2)
{
    static const char *const argv[] = {"sum", "--dup", "--pushpull", "--split", "--rounds", "2", NULL};
    run_job(t, 3, 2, argv, 40);
}

IT_TEST(pipeline_2x2)
{
    /* Every round's push and pull issued without waiting; one wait at the
     * end; each round's pull must hold that round's sum. */
    static const char *const argv[] = {"sum", "--pipeline", "--split", "--rounds", "4", NULL};
    run_job(t, 2, 2, argv, 40);
}

IT_TEST(pipeline_pushpull_3x3)
{
    static const char *const argv[] = {"sum", "--pipeline", "--pushpull", "--dup", "--split",
                                       "--rounds", "4", NULL};
    run_job(t, 3, 3, argv, 40);
}

IT_TEST(slow_worker_2x3)
{
    /* Rank 1 pushes 100 ms after the others every round: servers must hold
     * the others' pulls until the round is complete. */
    static const char *const argv[] = {"sum", "--split", "--rounds", "3", "--slow-rank", "1", NULL};
    run_job(t, 2, 3, argv, 40);
}

IT_TEST(split_tiny_3x2)
{
    /* Bound 1: every key is split over the 3 servers, and keys of 1 or 2
     * elements have parts of 0 elements (round(n/S*(i+1)) - round(n/S*i)). */
    static const char *const argv[] = {"sum", "--counts", "1,2,3,4,5", "--rounds", "2", "--dup", NULL};
    job_env(t);
    it_setenv(t, "MXNET_KVSTORE_BIGARRAY_BOUND", "1");
    it_start_job(t, 3, 2, argv);
    it_expect_job_ok(t, 40);
}

IT_TEST(edge_keys_3x2)
{
    /* Keys 0 and 2^64-1 (placement (k * 9973) % S in 64-bit arithmetic). */
    static const char *const argv[] = {"sum", "--edge-keys", "--dtype", "f32,i64", "--split",
                                       "--rounds", "2", NULL};
    run_job(t, 3, 2, argv, 40);
}

IT_TEST(threads_2x2)
{
    static const char *const argv[] = {"sum", "--threads", "4", "--split", "--rounds", "3", NULL};
    run_job(t, 2, 2, argv, 40);
}

IT_TEST(two_stores_2x3)
{
    /* Three workers in two processes: one process holds two stores. */
    static const char *const two[] = {"sum", "--stores", "2", "--split", "--rounds", "2", NULL};
    static const char *const one[] = {"sum", "--split", "--rounds", "2", NULL};
    static const char *const noid[] = {"DMLC_WORKER_ID", NULL};
    job_env(t);
    it_start_scheduler(t, 2, 3, NULL);
    it_start_server(t, 0, NULL);
    it_start_server(t, 1, NULL);
    it_start_worker(t, 0, two, noid);
    it_start_worker(t, 1, one, noid);
    it_expect_job_ok(t, 40);
}

IT_TEST(ranks_unique_2x4)
{
    /* No preferred ranks: the scheduler assigns 0..3, each exactly once
     * (a worker fails if it finds its rank file already there). */
    static const char *const argv[] = {"sum", "--dtype", "f32", "--rounds", "1", NULL};
    static const char *const noid[] = {"DMLC_WORKER_ID", NULL};
    job_env(t);
    it_start_scheduler(t, 2, 4, NULL);
    it_start_server(t, 0, NULL);
    it_start_server(t, 1, NULL);
    for (int i = 0; i < 4; i++)
        it_start_worker(t, i, argv, noid);
    it_expect_job_ok(t, 40);
    for (int r = 0; r < 4; r++) {
        char name[32];
        snprintf(name, sizeof name, "rank-%d", r);
        IT_ASSERT(t, it_wait_file(t, name, 0, -1), "no worker got rank %d", r);
    }
}

IT_TEST(big_key_2x2)
{
    /* 4 Mi float32 elements (and one more: odd) split over 2 servers at the
     * default bound (1000000), multi-threaded reduction on the servers. */
    static const char *const argv[] = {"sum", "--dtype", "f32", "--counts", "4194304,4194305",
                                       "--rounds", "2", NULL};
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_setenv(t, "KVS_LOCAL_AGG", "0");
    it_setenv(t, "MXNET_KVSTORE_REDUCTION_NTHREADS", "2");
    it_start_job(t, 2, 2, argv);
    it_expect_job_ok(t, 150);
}

IT_TEST(big_key_socket_2x2)
{
    /* the same through the sockets: KVS_CMA=0 turns the same-host direct
     * copies off, so every byte travels in ZeroMQ messages */
    static const char *const argv[] = {"sum", "--dtype", "f32", "--counts", "4194304,4194305",
                                       "--rounds", "2", "--pushpull", NULL};
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_setenv(t, "KVS_LOCAL_AGG", "0");
    it_setenv(t, "KVS_CMA", "0");
    it_start_job(t, 2, 2, argv);
    it_expect_job_ok(t, 150);
}

IT_TEST(direct_copy_2x3)
{
    /* keys of 64 KiB and more go by direct memory copies on one host: every
     * dtype, split and not, repeated keys (outputs past the first are filled
     * by the worker), pushpull, small chunks so keys travel in many parts */
    static const char *const argv[] = {"sum", "--dtype", "all", "--counts", "40000,70001",
                                       "--dup", "--pushpull", "--rounds", "3", NULL};
    it_setenv(t, "MXNET_KVSTORE_BIGARRAY_BOUND", "50000");
    it_setenv(t, "KVS_CHUNK_BYTES", "65536");
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_setenv(t, "KVS_LOCAL_AGG", "0");
    it_setenv(t, "PS_VERBOSE", "1");
    it_start_job(t, 2, 3, argv);
    it_expect_job_ok(t, 60);
    for (int i = 0; i < 2; i++)
        IT_CHECK(t, it_log_has(t, t->server[i], "direct memory copies", 0),
                 "server%d did not take the direct-copy path", i);
}

/* The values that a server's job wrote into the workers' outputs as it summed
 * the rounds' last pushes (its last log line), summed over the servers. */
static unsigned long long written_as_summed(it_ctx *t)
{
    unsigned long long all = 0;
    for (int i = 0; i < t->nserver; i++) {
        char *log = it_read_log(t, t->server[i]);
        const char *at = log ? strstr(log, " values written as summed") : NULL;
        IT_ASSERT(t, at != NULL, "server%d's last line does not count the values written as "
                  "summed", i);
        while (at > log && at[-1] >= '0' && at[-1] <= '9')
            at--;
        all += strtoull(at, NULL, 10);
        free(log);
    }
    return all;
}

/* Every dtype, parts that are summed on the reduction pool (300001
 * elements) and ones that are not, every element checked by the workers;
 * the job of each round's last push must have written some outputs as it
 * summed (server/store.c). */
static void direct_write(it_ctx *t, const char *mode, const char *what)
{
    const char *const argv[] = {"sum", "--dtype", "all", "--counts", "70001,300001", mode,
                                "--split", "--rounds", "3", NULL};
    it_setenv(t, "MXNET_KVSTORE_BIGARRAY_BOUND", "50000");
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_setenv(t, "KVS_LOCAL_AGG", "0");
    it_setenv(t, "PS_VERBOSE", "1"); /* the servers' last line */
    it_start_job(t, 2, 2, argv);
    it_expect_job_ok(t, 90);
    unsigned long long n = written_as_summed(t);
    it_info(t, "%s: %llu values written as summed", what, n);
    IT_ASSERT(t, n > 0, "no %s was answered by the job that summed its round", what);
}

IT_TEST(direct_write_pipeline_2x2)
{
    /* pulls issued right after the pushes wait for their rounds */
    direct_write(t, "--pipeline", "pull");
}

IT_TEST(direct_write_pushpull_2x2)
{
    /* every other output is its input */
    direct_write(t, "--pushpull", "pushpull");
}

IT_TEST(direct_copy_refused_1x2)
{
    /* a server that refuses direct copies (KVS_CMA=0 there only): the
     * workers' HELLO is declined and big data goes through the sockets */
    static const char *const argv[] = {"sum", "--dtype", "f32", "--counts", "70001",
                                       "--pushpull", "--rounds", "2", NULL};
    static const char *const no_cma[] = {"KVS_CMA=0", NULL};
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_setenv(t, "KVS_LOCAL_AGG", "0");
    it_setenv(t, "PS_VERBOSE", "1");
    it_start_scheduler(t, 1, 2, NULL);
    it_start_server(t, 0, no_cma);
    for (int i = 0; i < 2; i++)
        it_start_worker(t, i, argv, NULL);
    it_expect_job_ok(t, 60);
    for (int i = 0; i < 2; i++)
        IT_CHECK(t, it_log_has(t, t->worker[i], "socket data path", 0),
                 "worker%d did not fall back to the sockets", i);
}

IT_TEST(barrier_1x3)
{
    static const char *const argv[] = {"barrier", "--rounds", "3", NULL};
    run_job(t, 1, 3, argv, 40);
}

IT_TEST(api_2x3)
{
    static const char *const argv[] = {"api", NULL};
    run_job(t, 2, 3, argv, 60);
}

IT_TEST(api_async_1x2)
{
    static const char *const argv[] = {"api", "--type", "dist_async", NULL};
    run_job(t, 1, 2, argv, 60);
}

IT_TEST(async_2x3)
{
    static const char *const argv[] = {"async", "--rounds", "4", NULL};
    run_job(t, 2, 3, argv, 40);
}
