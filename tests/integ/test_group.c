/* test_group.c - local groups: the workers of one host sum locally before
 * the network (KVS_LOCAL_AGG), exact sums on every output, layouts given
 * and checked, members that die or stop, and the bytes a host sends.
 *
 * Every worker here registers from 127.0.0.1 (or, for a second "host",
 * DMLC_NODE_HOST=127.0.0.2) in the runner's pid namespace: the workers
 * with one address form one local group.  tests/netns/ runs the same with
 * hosts in their own network and pid namespaces. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests.h"

#define HB_TIMEOUT_S 2

/* floor: KVS_LOCAL_AGG_MIN, or NULL for its default */
static void group_env_floor(it_ctx *t, const char *floor)
{
    it_setenv(t, "MXNET_KVSTORE_BIGARRAY_BOUND", "1000");
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_setenv(t, "PS_VERBOSE", "1");
    if (floor)
        it_setenv(t, "KVS_LOCAL_AGG_MIN", "%s", floor);
}

/* Every key through the group, however small: what these tests check. */
static void group_env(it_ctx *t)
{
    group_env_floor(t, "0");
}

/* Failures: detected within HB_TIMEOUT_S. */
static void failure_env(it_ctx *t)
{
    group_env(t);
    it_setenv(t, "PS_HEARTBEAT_INTERVAL", "0.2");
    it_setenv(t, "PS_HEARTBEAT_TIMEOUT", "%d", HB_TIMEOUT_S);
}

/* Worker process i said "local rank r of n". */
static void expect_local(it_ctx *t, int i, int r, int n)
{
    char want[64];
    snprintf(want, sizeof want, "local rank %d of %d", r, n);
    IT_CHECK(t, it_log_has(t, t->worker[i], want, 0), "worker%d did not report \"%s\"", i, want);
}

/* Whether worker process i summed in its group. */
static int summed_locally(it_ctx *t, int i)
{
    return it_log_has(t, t->worker[i], "summing locally before the network", 0);
}

/* A job of S servers and W workers (all on 127.0.0.1 unless extra[i] says
 * otherwise) running argv; every worker exits 0 (exact sums). */
static void run_job(it_ctx *t, int S, int W, const char *const *argv,
                    const char *const *const *extra)
{
    it_start_scheduler(t, S, W, NULL);
    for (int i = 0; i < S; i++)
        it_start_server(t, i, NULL);
    for (int i = 0; i < W; i++)
        it_start_worker(t, i, argv, extra ? extra[i] : NULL);
    it_expect_job_ok(t, 120);
}

/* 1 host x 3 workers, 1 server: push+pull and pushpull, every dtype, keys
 * repeated in one call; the group sums and every output is exact. */
IT_TEST(group_sum_1x3)
{
    static const char *const argv[] = {"sum", "--dtype", "all", "--rounds", "4", "--dup",
                                       NULL};
    group_env(t);
    run_job(t, 1, 3, argv, NULL);
    for (int i = 0; i < 3; i++) {
        expect_local(t, i, i, 3);
        IT_CHECK(t, summed_locally(t, i), "worker%d did not sum in its group", i);
    }
}

IT_TEST(group_pushpull_2x3)
{
    static const char *const argv[] = {"sum", "--dtype", "all", "--rounds", "4", "--pushpull",
                                       "--dup", NULL};
    group_env(t);
    run_job(t, 2, 3, argv, NULL);
    for (int i = 0; i < 3; i++)
        IT_CHECK(t, summed_locally(t, i), "worker%d did not sum in its group", i);
}

/* Split keys cut into many small chunks: the chunks of one key are owned by
 * different members, each pushing its own; pipelined rounds. */
IT_TEST(group_chunks_2x3)
{
    static const char *const argv[] = {"sum", "--split", "--rounds", "3", "--pipeline",
                                       "--pushpull", NULL};
    group_env(t);
    it_setenv(t, "KVS_CHUNK_BYTES", "4096");
    run_job(t, 2, 3, argv, NULL);
}

/* The same with several threads pushing at once. */
IT_TEST(group_threads_2x3)
{
    static const char *const argv[] = {"sum", "--split", "--rounds", "3", "--threads", "2",
                                       NULL};
    group_env(t);
    it_setenv(t, "KVS_CHUNK_BYTES", "8192");
    run_job(t, 2, 3, argv, NULL);
}

/* KVS_LOCAL_AGG=0: every worker pushes for itself, sums still exact. */
IT_TEST(group_agg_off_2x3)
{
    static const char *const argv[] = {"sum", "--dtype", "all", "--rounds", "3", "--pushpull",
                                       NULL};
    group_env(t);
    it_setenv(t, "KVS_LOCAL_AGG", "0");
    run_job(t, 2, 3, argv, NULL);
    for (int i = 0; i < 3; i++) {
        expect_local(t, i, i, 3); /* the group exists, it just does not sum */
        IT_CHECK(t, !summed_locally(t, i), "worker%d summed with KVS_LOCAL_AGG=0", i);
    }
}

/* dist_async keeps one push per worker unless KVS_LOCAL_AGG=1. */
IT_TEST(group_async_2x3)
{
    static const char *const argv[] = {"async", "--rounds", "4", NULL};
    group_env(t);
    run_job(t, 2, 3, argv, NULL);
    for (int i = 0; i < 3; i++)
        IT_CHECK(t, !summed_locally(t, i), "worker%d summed in dist_async by default", i);
}

IT_TEST(group_async_agg_2x3)
{
    static const char *const argv[] = {"async", "--rounds", "4", NULL};
    group_env(t);
    it_setenv(t, "KVS_LOCAL_AGG", "1");
    run_job(t, 2, 3, argv, NULL);
    for (int i = 0; i < 3; i++)
        IT_CHECK(t, summed_locally(t, i), "worker%d did not sum with KVS_LOCAL_AGG=1", i);
}

/* Mixed groups: a "host" (address 127.0.0.2) with one worker beside a host
 * with three; both push every key, sums exact.  With workers on another
 * host the default floor is the network's (1 KiB). */
IT_TEST(group_mixed_2x4)
{
    static const char *const argv[] = {"sum", "--dtype", "f32,f64,i64", "--rounds", "4",
                                       "--split", NULL};
    static const char *const other[] = {"DMLC_NODE_HOST=127.0.0.2", NULL};
    const char *const *extra[4] = {NULL, other, NULL, NULL};
    group_env_floor(t, NULL);
    run_job(t, 2, 4, argv, extra);
    for (int i = 0; i < 4; i++)
        IT_CHECK(t, i == 1 || it_log_has(t, t->worker[i], "(keys of 1024 bytes and more, "
                                         "KVS_LOCAL_AGG_MIN's default here)", 0),
                 "worker%d does not say that its group takes keys of 1024 bytes and more", i);
    expect_local(t, 1, 0, 1);
    IT_CHECK(t, !summed_locally(t, 1), "worker1 (alone on its host) summed in a group");
    expect_local(t, 0, 0, 3);
    expect_local(t, 2, 1, 3);
    expect_local(t, 3, 2, 3);
    for (int i = 0; i < 4; i++)
        IT_CHECK(t, i == 1 || summed_locally(t, i), "worker%d did not sum in its group", i);
}

/* Plain pulls through the group, beside a host with one worker: members
 * pull different keys, in different orders and at different times (the
 * group-pulls scenario); every output exact; keys in chunks of 4 KiB owned
 * by different members. */
IT_TEST(group_pulls_2x4)
{
    static const char *const argv[] = {"group-pulls", "--rounds", "4", NULL};
    static const char *const other[] = {"DMLC_NODE_HOST=127.0.0.2", NULL};
    const char *const *extra[4] = {NULL, other, NULL, NULL};
    group_env(t);
    it_setenv(t, "KVS_CHUNK_BYTES", "4096");
    run_job(t, 2, 4, argv, extra);
    IT_CHECK(t, !summed_locally(t, 1), "worker1 (alone on its host) summed in a group");
    for (int i = 0; i < 4; i++)
        IT_CHECK(t, i == 1 || summed_locally(t, i), "worker%d did not sum in its group", i);
}

/* A member leaves (kvs_close) after the rounds; the others' pulls of the
 * chunks it owned go to the servers directly, values exact. */
IT_TEST(group_pulls_left_1x3)
{
    static const char *const argv[] = {"group-pulls", "--rounds", "2", "--left", NULL};
    group_env(t);
    it_setenv(t, "KVS_CHUNK_BYTES", "4096");
    run_job(t, 2, 3, argv, NULL);
    for (int i = 0; i < 2; i++)
        IT_CHECK(t, it_log_has(t, t->worker[i], "pulling the chunks it owned directly", 0),
                 "worker%d did not pull the chunks of the member that left itself", i);
}

/* A layout given explicitly (torchrun's variables) is taken as given. */
IT_TEST(group_layout_given_1x3)
{
    static const char *const argv[] = {"sum", "--rounds", "3", "--pushpull", NULL};
    static const char *const e0[] = {"LOCAL_RANK=2", "LOCAL_WORLD_SIZE=3", NULL};
    static const char *const e1[] = {"LOCAL_RANK=0", "LOCAL_WORLD_SIZE=3", NULL};
    static const char *const e2[] = {"KVS_LOCAL_RANK=1", "KVS_LOCAL_SIZE=3", NULL};
    const char *const *extra[3] = {e0, e1, e2};
    group_env(t);
    run_job(t, 1, 3, argv, extra);
    expect_local(t, 0, 2, 3);
    expect_local(t, 1, 0, 3);
    expect_local(t, 2, 1, 3);
}

/* An inconsistent layout: every process of the job stops at start-up with
 * the reason (workers: kvs_create fails with KVS_ECONFIG and says it). */
static void bad_layout(it_ctx *t, const char *const *const *extra, const char *why)
{
    const char *const argv[] = {"create-error", "KVS_ECONFIG", why, NULL};
    group_env_floor(t, NULL);
    it_start_scheduler(t, 1, 3, NULL);
    int v = it_start_server(t, 0, NULL);
    for (int i = 0; i < 3; i++)
        it_start_worker(t, i, argv, extra[i]);
    for (int i = 0; i < 3; i++)
        it_expect_exit(t, t->worker[i], 0, 20);
    IT_ASSERT(t, it_wait(t, v, 20), "server0 still running after the job failed to start");
    IT_CHECK(t, !it_exited_with(t, v, 0), "server0 exited 0 from a job that never started");
    IT_CHECK(t, it_log_has(t, v, why, 0), "server0 does not say \"%s\"", why);
    IT_ASSERT(t, it_wait(t, t->sched, 20), "the scheduler still runs");
    IT_CHECK(t, it_exited_with(t, t->sched, 1), "the scheduler did not exit 1");
    IT_CHECK(t, it_log_has(t, t->sched, why, 0), "the scheduler does not say \"%s\"", why);
}

IT_TEST(group_layout_dup_1x3)
{
    static const char *const e0[] = {"KVS_LOCAL_RANK=0", "KVS_LOCAL_SIZE=3", NULL};
    static const char *const e1[] = {"KVS_LOCAL_RANK=1", "KVS_LOCAL_SIZE=3", NULL};
    static const char *const e2[] = {"KVS_LOCAL_RANK=1", "KVS_LOCAL_SIZE=3", NULL};
    const char *const *extra[3] = {e0, e1, e2};
    bad_layout(t, extra, "two workers claim local rank 1");
}

IT_TEST(group_layout_size_1x3)
{
    static const char *const e0[] = {"LOCAL_RANK=0", "LOCAL_WORLD_SIZE=4", NULL};
    static const char *const e1[] = {"LOCAL_RANK=1", "LOCAL_WORLD_SIZE=4", NULL};
    static const char *const e2[] = {"LOCAL_RANK=2", "LOCAL_WORLD_SIZE=4", NULL};
    const char *const *extra[3] = {e0, e1, e2};
    bad_layout(t, extra, "says its local size is 4, but 3 workers registered");
}

IT_TEST(group_layout_partial_1x3)
{
    static const char *const e0[] = {"LOCAL_RANK=0", "LOCAL_WORLD_SIZE=3", NULL};
    const char *const *extra[3] = {e0, NULL, NULL};
    bad_layout(t, extra, "gave no local rank and size");
}

IT_TEST(group_agg_mismatch_1x3)
{
    static const char *const off[] = {"KVS_LOCAL_AGG=0", NULL};
    const char *const *extra[3] = {NULL, off, NULL};
    bad_layout(t, extra, "inconsistent KVS_LOCAL_AGG");
}

IT_TEST(group_agg_min_mismatch_1x3)
{
    static const char *const one[] = {"KVS_LOCAL_AGG_MIN=1024", NULL};
    static const char *const big[] = {"KVS_LOCAL_AGG_MIN=4096", NULL};
    const char *const *extra[3] = {one, one, big};
    bad_layout(t, extra, "inconsistent KVS_LOCAL_AGG_MIN: worker 0 (127.0.0.1) has 1024, "
               "worker 2 (127.0.0.1) has 4096");
}

/* A value given beside the default (even one equal to it) is a mismatch:
 * the default depends on the layout. */
IT_TEST(group_agg_min_default_mismatch_1x3)
{
    static const char *const one[] = {"KVS_LOCAL_AGG_MIN=1024", NULL};
    const char *const *extra[3] = {NULL, one, NULL};
    bad_layout(t, extra, "inconsistent KVS_LOCAL_AGG_MIN: worker 0 (127.0.0.1) has the "
               "default, worker 1 (127.0.0.1) has 1024");
}

/* P3 in a group: a high-priority key posted after many big low-priority
 * ones is summed and sent before them (the group thread starts its items
 * by priority); 2 workers on one host, 4 rounds, exact sums (the worker
 * checks both). */
IT_TEST(group_p3_order_1x2)
{
    static const char *const argv[] = {"group-p3", "--rounds", "4", NULL};
    group_env(t);
    it_setenv(t, "KVS_LOCAL_AGG", "1");
    run_job(t, 1, 2, argv, NULL);
    for (int i = 0; i < 2; i++)
        IT_CHECK(t, summed_locally(t, i), "worker%d did not sum in its group", i);
}

/* ---- device arrays ---- */

/* Job number j of test t, in a directory of its own (dir, len bytes:
 * t->dir/job<j>) with its own context sub. */
static void sub_job(it_ctx *t, int j, it_ctx *sub, char *dir, size_t len)
{
    snprintf(dir, len, "%s/job%d", t->dir, j);
    IT_ASSERT(t, mkdir(dir, 0700) == 0, "mkdir %s: %s", dir, strerror(errno));
    it_ctx_init(sub, t->test, dir);
}

/* A job of store type (dist_sync, dist_sync_device) of 3 kvs-devworker
 * processes on one host, each with 2 simulated devices
 * (tests/device/devworker.c: every push mixes one array per device, a
 * second one on device 0 and one host array per key; every output, on each
 * device and in host memory, is checked element by element in every dtype),
 * 2 servers; own (not NULL): worker i has one device, KVS_DEVICES=i of 3.
 * Returns the bytes the workers sent in their rounds, summed (*recv:
 * received); *ipc: the fewest copies a worker made to or from another's
 * device memory (each[i], not NULL: worker i's). */
/* Start such a job (w1: one more variable for worker 1, or NULL). */
static void devworker_start(it_ctx *t, const char *type, const char *agg, const char *extra,
                            bool own, const char *w1)
{
    char bin[sizeof t->worker_bin + 16];
    snprintf(bin, sizeof bin, "%s", t->worker_bin);
    char *slash = strrchr(bin, '/');
    IT_ASSERT(t, slash != NULL, "worker binary path %s", bin);
    snprintf(slash + 1, sizeof bin - (size_t)(slash + 1 - bin), "kvs-devworker");
    const char *const argv[] = {"--type", type, "--rounds", extra ? "5" : "3", extra, NULL};
    group_env(t);
    it_setenv(t, "KVS_SIM_DEVICES", own ? "3" : "2");
    it_setenv(t, "KVS_LOCAL_AGG", "%s", agg);
    it_setenv(t, "KVS_CMA", "0"); /* everything through the sockets, as between hosts */
    it_start_scheduler(t, 2, 3, NULL);
    for (int i = 0; i < 2; i++)
        it_start_server(t, i, NULL);
    for (int i = 0; i < 3; i++) {
        char name[32], id[32], devs[32];
        snprintf(name, sizeof name, "worker%d", i);
        snprintf(id, sizeof id, "DMLC_WORKER_ID=%d", i);
        snprintf(devs, sizeof devs, "KVS_DEVICES=%d", i);
        const char *env[] = {"DMLC_ROLE=worker", id, own ? devs : "KVS_DEVICES",
                             i == 1 ? w1 : NULL, NULL};
        t->worker[t->nworker++] = it_spawn(t, name, bin, argv, env);
    }
}

static double devworker_job_of(it_ctx *t, const char *type, const char *agg, const char *extra,
                               bool own, const char *w1, double *ipc, double *recv,
                               double *each)
{
    devworker_start(t, type, agg, extra, own, w1);
    it_expect_job_ok(t, 120);
    double sent = 0;
    *ipc = -1;
    *recv = 0;
    for (int i = 0; i < 3; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/worker%d.log", t->dir, i);
        char *s = it_slurp(path, NULL), *at = s ? strstr(s, ": ok (") : NULL;
        double b = -1, n = -1;
        IT_ASSERT(t, at != NULL, "worker%d did not report ok", i);
        char *ic = strstr(at, ", ipc ");
        IT_ASSERT(t, ic && sscanf(ic, ", ipc %lf", &n) == 1, "worker%d did not report its "
                  "ipc copies", i);
        if (*ipc < 0 || n < *ipc)
            *ipc = n;
        if (each)
            each[i] = n;
        at = strstr(at, "), sent ");
        double rb = -1;
        IT_ASSERT(t, at && sscanf(at, "), sent %lf bytes, received %lf bytes", &b, &rb) == 2 &&
                         b > 0 && rb > 0,
                  "worker%d did not report its bytes", i);
        free(s);
        sent += b;
        *recv += rb;
    }
    return sent;
}

static double devworker_job(it_ctx *t, const char *type, const char *agg, const char *extra,
                            double *ipc, double *recv)
{
    return devworker_job_of(t, type, agg, extra, false, NULL, ipc, recv, NULL);
}

/* Simulated-device arrays go through the group (dist_sync: each array's
 * pinned host copy, beside the host arrays; dist_sync_device: each key's
 * sum over the process's arrays, flat or over the planned trees, in shared
 * device memory that the chunks' owners copy from and back into; plain
 * pulls: one member pulls each chunk for the group): exact sums on every
 * output, and the host sends and receives about a third of what 3 workers
 * pushing and pulling for themselves do. */
static void devices_in_group(it_ctx *t, const char *type, const char *tree)
{
    double b[2], ipc[2], r[2];
    const char *agg[2] = {"1", "0"};
    for (int j = 0; j < 2; j++) {
        it_ctx sub;
        char dir[sizeof t->dir + 16];
        sub_job(t, j, &sub, dir, sizeof dir);
        it_setenv(&sub, "MXNET_KVSTORE_USETREE", "%s", tree);
        b[j] = devworker_job(&sub, type, agg[j], NULL, &ipc[j], &r[j]);
        if (j == 0)
            for (int i = 0; i < 3; i++)
                IT_CHECK(t, summed_locally(&sub, i), "worker%d did not sum in its group", i);
        it_ctx_fini(&sub);
        it_info(t, "%s, 3 workers x 2 devices, KVS_LOCAL_AGG=%s: sent %.0f bytes, received "
                "%.0f in 3 rounds", type, agg[j], b[j], r[j]);
    }
    IT_CHECK(t, b[0] <= 0.4 * b[1], "the group sent %.0f bytes, 3 workers alone %.0f (> 0.4x)",
             b[0], b[1]);
    IT_CHECK(t, r[0] <= 0.4 * r[1], "the group received %.0f bytes, 3 workers alone %.0f "
             "(> 0.4x)", r[0], r[1]);
    /* device stores meet on the devices; dist_sync's arrays in host memory */
    bool devstore = strstr(type, "device") != NULL;
    IT_CHECK(t, devstore ? ipc[0] > 0 : ipc[0] == 0, "%s in a group: a worker made %.0f copies "
             "to or from another's device memory", type, ipc[0]);
    IT_CHECK(t, ipc[1] == 0, "%s without a group: %.0f copies to or from another's device "
             "memory", type, ipc[1]);
}

IT_TEST(group_devices_1x3) { devices_in_group(t, "dist_sync", "0"); }
IT_TEST(group_dist_device_1x3) { devices_in_group(t, "dist_sync_device", "0"); }
IT_TEST(group_dist_device_tree_1x3) { devices_in_group(t, "dist_device_sync", "1"); }

/* A member pushes a key's next round before it waited for the last (odd
 * ranks; even ones wait in between): its device buffer is still held, so
 * that push hands its sum in host memory while the others hand theirs on
 * the device, and the chunks' owners sum both kinds (an owner whose own
 * part is in host memory sums on its device 0).  Exact sums. */
/* MXNET_KVSTORE_USETREE=1 across the group's processes: one device per
 * worker (KVS_DEVICES=i of 3 simulated ones) and a host topology over all
 * three (KVS_TOPOLOGY) that links 0-1 and 1-2 only, so that every tree is
 * the chain: worker 1 adds the far end's part to its own before the owner
 * reads it (or, owning the chunk, reads both ends).  Exact sums on every
 * output, with trees and without; the trees show in who copies what. */
IT_TEST(group_dist_device_trees_across_1x3)
{
    double ipc, recv, cp[2][3];
    for (int j = 0; j < 2; j++) {
        it_ctx sub;
        char dir[sizeof t->dir + 16];
        sub_job(t, j, &sub, dir, sizeof dir);
        it_setenv(&sub, "KVS_TOPOLOGY", "0,1,0;1,0,1;0,1,0");
        it_setenv(&sub, "MXNET_KVSTORE_USETREE", "%d", j == 0);
        devworker_job_of(&sub, "dist_sync_device", "1", NULL, true, NULL, &ipc, &recv, cp[j]);
        for (int i = 0; i < 3; i++) {
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/worker%d.log", dir, i);
            char *s = it_slurp(path, NULL);
            bool chain = s && strstr(s, "trees over the members' devices (0,1,2): root 0: 1->0 "
                                        "2->1; root 1: 0->1 2->1; root 2: 0->1 1->2");
            IT_CHECK(t, j == 0 ? chain : !chain, "worker%d %s the chains", i,
                     j == 0 ? "did not plan" : "planned");
            free(s);
            IT_CHECK(t, summed_locally(&sub, i), "worker%d did not sum in its group", i);
        }
        it_ctx_fini(&sub);
        it_info(t, "trees %s: copies across processes %.0f %.0f %.0f", j ? "off" : "on",
                cp[j][0], cp[j][1], cp[j][2]);
    }
    /* one copy per tree edge and chunk either way (3 members: 2 edges, and
     * the value back to 2); along the chain the ends copy only to and from
     * the middle, which copies for both */
    IT_CHECK(t, cp[0][0] + cp[0][1] + cp[0][2] == cp[1][0] + cp[1][1] + cp[1][2],
             "copies across processes: %.0f with trees, %.0f without",
             cp[0][0] + cp[0][1] + cp[0][2], cp[1][0] + cp[1][1] + cp[1][2]);
    for (int i = 0; i < 3; i++)
        IT_CHECK(t, i == 1 ? cp[0][i] > cp[1][i] : cp[0][i] < cp[1][i], "worker%d made %.0f "
                 "copies across processes with trees, %.0f without", i, cp[0][i], cp[1][i]);
}

/* Trees across the group need the same host topology at every member:
 * worker 1 sees another one, so every member sums flat (all of them decide
 * from the same entries) and says why, with exact sums.  A topology over
 * which no tree can be planned fails every member's round with that
 * reason, and the job ends. */
IT_TEST(group_dist_device_trees_mismatch_1x3)
{
    double ipc, recv;
    it_ctx sub;
    char dir[sizeof t->dir + 16];
    for (int j = 0; j < 2; j++) {
        sub_job(t, j, &sub, dir, sizeof dir);
        it_setenv(&sub, "MXNET_KVSTORE_USETREE", "1");
        it_setenv(&sub, "KVS_TOPOLOGY", "%s", j == 0 ? "0,1,0;1,0,1;0,1,0" : "0,0,0;0,0,0;0,0,0");
        if (j == 0) {
            devworker_job_of(&sub, "dist_sync_device", "1", NULL, true,
                             "KVS_TOPOLOGY=0,1,1;1,0,1;1,1,0", &ipc, &recv, NULL);
            IT_CHECK(t, ipc > 0, "no copies across processes");
        } else {
            devworker_start(&sub, "dist_sync_device", "1", NULL, true, NULL);
            for (int i = 0; i < 3; i++)
                it_expect_exit(&sub, sub.worker[i], 1, 60);
            IT_CHECK(t, it_wait(&sub, sub.sched, 30), "the scheduler still runs after the "
                     "workers failed");
        }
        for (int i = 0; i < 3; i++) {
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/worker%d.log", dir, i);
            char *s = it_slurp(path, NULL);
            IT_ASSERT(t, s != NULL, "cannot read %s", path);
            IT_CHECK(t, strstr(s, "trees over the members' devices") == NULL, "worker%d planned "
                     "trees", i);
            if (j == 0)
                IT_CHECK(t, strstr(s, "see the host's devices differently") != NULL,
                         "worker%d did not say why it sums without trees", i);
            else
                IT_CHECK(t, strstr(s, "KVS_ECONFIG") && strstr(s, "cannot plan trees over the "
                                                                "local group's devices (0,1,2, by local rank"),
                         "worker%d did not fail on the topology", i);
            free(s);
        }
        it_ctx_fini(&sub);
    }
}

IT_TEST(group_dist_device_overlap_1x3)
{
    double ipc, recv;
    it_setenv(t, "MXNET_KVSTORE_USETREE", "0");
    devworker_job(t, "dist_sync_device", "1", "--overlap", &ipc, &recv);
    for (int i = 0; i < 3; i++)
        IT_CHECK(t, summed_locally(t, i), "worker%d did not sum in its group", i);
    IT_CHECK(t, ipc > 0, "no copies to or from another worker's device memory");
}

/* ---- failures ---- */

static void wait_ready(it_ctx *t)
{
    for (int i = 0; i < t->nworker; i++) {
        char name[32];
        snprintf(name, sizeof name, "ready-w%d", i);
        IT_ASSERT(t, it_wait_file(t, name, 30, t->worker[i]), "worker%d was not ready", i);
    }
}

/* A member of the group dies (or stops: sig SIGSTOP) while the others wait
 * in a round that needs its contribution: every survivor gets
 * KVS_EPEERDEAD naming it within the heartbeat timeout (the peer-dead
 * scenario checks the error and the time), and the job ends. */
static void member_lost(it_ctx *t, int sig, bool pulls, int devices)
{
    static const char *const pull1[] = {"peer-dead", "--block", "pull", NULL};
    static const char *const victim1[] = {"victim", NULL};
    static const char *const barrier1[] = {"peer-dead", "--block", "barrier", NULL};
    /* devices: a dist_sync_device store on a simulated device, whose sums
     * meet in device memory the members share; 2: the same with trees
     * across the group configured (worker i on device i of a host whose 3
     * are linked 0-1-2) */
    static const char *const pulld[] = {"peer-dead", "--block", "pull", "--type",
                                        "dist_sync_device", NULL};
    static const char *const victimd[] = {"victim", "--type", "dist_sync_device", NULL};
    static const char *const barrierd[] = {"peer-dead", "--block", "barrier", "--type",
                                           "dist_sync_device", NULL};
    /* pulls: worker 0 pushes and pulls three keys of 16 chunks each: every
     * member owns some of the chunks whose pulls are in flight */
    static const char *const pull3[] = {"peer-dead", "--block", "pulls", "--keys", "3", NULL};
    static const char *const victim3[] = {"victim", "--keys", "3", NULL};
    static const char *const barrier3[] = {"peer-dead", "--block", "barrier", "--keys", "3",
                                           NULL};
    const char *const *pull = pulls ? pull3 : devices ? pulld : pull1;
    const char *const *victim = pulls ? victim3 : devices ? victimd : victim1;
    const char *const *barrier = pulls ? barrier3 : devices ? barrierd : barrier1;
    failure_env(t);
    if (devices)
        it_setenv(t, "KVS_SIM_DEVICES", devices == 2 ? "3" : "1");
    if (devices == 2) {
        it_setenv(t, "KVS_TOPOLOGY", "0,1,0;1,0,1;0,1,0");
        it_setenv(t, "MXNET_KVSTORE_USETREE", "1");
    }
    if (pulls)
        it_setenv(t, "KVS_CHUNK_BYTES", "4096");
    it_start_scheduler(t, 1, 3, NULL);
    it_start_server(t, 0, NULL);
    static const char *const dev0[] = {"KVS_DEVICES=0", NULL}, *const dev1[] = {
        "KVS_DEVICES=1", NULL}, *const dev2[] = {"KVS_DEVICES=2", NULL};
    int w0 = it_start_worker(t, 0, pull, devices == 2 ? dev0 : NULL);
    int w1 = it_start_worker(t, 1, victim, devices == 2 ? dev1 : NULL);
    int w2 = it_start_worker(t, 2, barrier, devices == 2 ? dev2 : NULL);
    wait_ready(t);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/ready-w1", t->dir);
    char *s = it_slurp(path, NULL);
    IT_ASSERT(t, s != NULL, "cannot read %s", path);
    char text[64];
    snprintf(text, sizeof text, "worker %d\n", atoi(s));
    free(s);
    it_write_file(t, "expect-dead", text);
    double t0 = it_now();
    it_kill(t, w1, sig);
    it_write_file(t, "killed", "1\n");
    int alive[2] = {w0, w2};
    for (int i = 0; i < 2; i++) {
        double left = t0 + (HB_TIMEOUT_S + 8) * it_slow - it_now();
        it_expect_exit(t, alive[i], 0, (left > 0 ? left : 0) / it_slow);
        it_info(t, "%s exited 0, %.2f s after the signal", t->proc[alive[i]].name,
                t->proc[alive[i]].t_end - t0);
    }
    IT_CHECK(t, summed_locally(t, 0), "worker0 was not in an aggregating group");
    IT_ASSERT(t, it_wait(t, t->sched, 15), "the scheduler still runs after the survivors left");
    if (sig == SIGSTOP)
        it_kill(t, w1, SIGKILL);
}

IT_TEST(group_member_killed_1x3) { member_lost(t, SIGKILL, false, 0); }
IT_TEST(group_member_stopped_1x3) { member_lost(t, SIGSTOP, false, 0); }
IT_TEST(group_member_killed_pulls_1x3) { member_lost(t, SIGKILL, true, 0); }
IT_TEST(group_member_killed_devices_1x3) { member_lost(t, SIGKILL, false, 1); }
IT_TEST(group_member_killed_trees_1x3) { member_lost(t, SIGKILL, false, 2); }

/* ---- bytes on the network ---- */

/* Bytes sent and received by workers [0, n) of the job in t (KVS_TEST_METRICS
 * files "what-<rank>"), summed. */
static double job_bytes(it_ctx *t, int n, const char *what)
{
    double total = 0;
    for (int r = 0; r < n; r++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s-%d", t->dir, what, r);
        char *s = it_slurp(path, NULL);
        IT_ASSERT(t, s != NULL, "no %s", path);
        double sent = 0, recv = 0;
        IT_ASSERT(t, sscanf(s, "%lf %lf", &sent, &recv) == 2, "bad %s", path);
        free(s);
        total += sent + recv;
    }
    return total;
}

/* The bytes a host of 3 workers exchanges with the servers in its rounds
 * (after kvs_init and the check of the initial values) are about what one
 * worker alone exchanges: the group pushes and pulls each chunk once; and
 * 3x that with KVS_LOCAL_AGG=0.  argv: pushpulls, or pushes and plain
 * pulls. */
/* Job number j of test t (in its own directory): W workers on one host and
 * 1 server, sockets only (as between hosts), var=value; every worker exits
 * 0 (exact sums).  Returns the bytes the workers moved to and from the
 * server after kvs_init and the check of the initial values.  local: each
 * worker must have summed in its group, and unless var is the floor, said
 * that its group takes keys of 64 KiB and more (the default on one host:
 * every key of these tests but the 5-element one goes through the group). */
static double bytes_job(it_ctx *t, int j, int W, const char *const *argv, const char *var,
                        const char *value, bool local)
{
    it_ctx sub;
    char dir[sizeof t->dir + 16];
    sub_job(t, j, &sub, dir, sizeof dir);
    group_env_floor(&sub, NULL);
    it_setenv(&sub, "KVS_TEST_METRICS", "1");
    it_setenv(&sub, "KVS_CMA", "0");
    it_setenv(&sub, var, "%s", value);
    run_job(&sub, 1, W, argv, NULL);
    double b = job_bytes(&sub, W, "bytes") - job_bytes(&sub, W, "init-bytes");
    for (int i = 0; local && i < W; i++) {
        IT_CHECK(t, summed_locally(&sub, i), "worker%d did not sum in its group", i);
        /* (one host: the group is the whole job) */
        IT_CHECK(t, strcmp(var, "KVS_LOCAL_AGG_MIN") == 0 ||
                        it_log_has(&sub, sub.worker[i], "(keys of 65536 bytes and more, "
                                   "KVS_LOCAL_AGG_MIN's default here)", 0),
                 "worker%d does not say that its group takes keys of 64 KiB and more", i);
    }
    it_ctx_fini(&sub);
    it_info(t, "%d worker(s), %s=%s: %.0f bytes to and from the server in 4 rounds", W, var,
            value, b);
    return b;
}

static void group_bytes(it_ctx *t, const char *const *argv)
{
    double b[3];
    int sizes[3] = {1, 3, 3};
    const char *agg[3] = {"1", "1", "0"};
    for (int j = 0; j < 3; j++)
        b[j] = bytes_job(t, j, sizes[j], argv, "KVS_LOCAL_AGG", agg[j], j == 1);
    IT_CHECK(t, b[1] <= 1.05 * b[0], "a group of 3 moved %.0f bytes, one worker %.0f (> 1.05x)",
             b[1], b[0]);
    IT_CHECK(t, b[2] >= 2.8 * b[0], "3 workers without aggregation moved %.0f bytes, one "
             "worker %.0f (expected ~3x)", b[2], b[0]);
}

IT_TEST(group_bytes_1x3)
{
    static const char *const argv[] = {"sum", "--counts", "300000,70000,5", "--rounds", "4",
                                       "--pushpull", NULL};
    group_bytes(t, argv);
}

/* The same with kvs_push then kvs_pull: each member's pull of a chunk is
 * served by the chunk's owner, which pulls it once for the group. */
IT_TEST(group_pull_bytes_1x3)
{
    static const char *const argv[] = {"sum", "--counts", "300000,70000,5", "--rounds", "4",
                                       NULL};
    group_bytes(t, argv);
}

/* KVS_LOCAL_AGG_MIN: keys under it skip the group, every member sends its
 * own.  With the floor between the two big keys of one call, the host moves
 * the 300000-float key once and the 70000-float and 5-float keys three
 * times (within 3% of that, from one worker's bytes per key); with the
 * floor above every key, each call goes to the servers as without a group
 * (3x).  Exact sums everywhere (the workers check them). */
static void agg_min_bytes(it_ctx *t, const char *const *argv)
{
    static const double n[3] = {300000, 70000, 5};
    const char *floor[3] = {"0", "1200000", "1073741824"};
    int sizes[3] = {1, 3, 3};
    double b[3];
    for (int j = 0; j < 3; j++)
        b[j] = bytes_job(t, j, sizes[j], argv, "KVS_LOCAL_AGG_MIN", floor[j], j == 1);
    double want = b[0] * (n[0] + 3 * n[1] + 3 * n[2]) / (n[0] + n[1] + n[2]);
    IT_CHECK(t, b[1] >= 0.97 * want && b[1] <= 1.03 * want,
             "a group of 3 with the floor between the keys moved %.0f bytes, expected %.0f",
             b[1], want);
    IT_CHECK(t, b[2] >= 2.8 * b[0] && b[2] <= 3.1 * b[0], "a group of 3 with every key under "
             "the floor moved %.0f bytes, one worker %.0f (expected ~3x)", b[2], b[0]);
}

IT_TEST(group_agg_min_1x3)
{
    static const char *const argv[] = {"sum", "--dtype", "float32", "--counts",
                                       "300000,70000,5", "--rounds", "4", "--pushpull", NULL};
    agg_min_bytes(t, argv);
}

IT_TEST(group_agg_min_pulls_1x3)
{
    static const char *const argv[] = {"sum", "--dtype", "float32", "--counts",
                                       "300000,70000,5", "--rounds", "4", NULL};
    agg_min_bytes(t, argv);
}

/* KVS_LOCAL_AGG_MIN's default when the group is the whole job (one host):
 * 64 KiB, where the group starts to pay on the direct-copy path.  The
 * 16000-float key (64000 bytes) then goes three times, the 100000-float key
 * once (within 3% of that, from one worker's bytes per key; 1.28x one
 * worker's bytes, where the network's floor of 1 KiB would give 1.00x). */
IT_TEST(group_agg_min_host_1x3)
{
    static const char *const argv[] = {"sum", "--dtype", "float32", "--counts",
                                       "100000,16000,5", "--rounds", "4", "--pushpull", NULL};
    static const double n[3] = {100000, 16000, 5};
    double b0 = bytes_job(t, 0, 1, argv, "KVS_LOCAL_AGG", "1", false);
    double b1 = bytes_job(t, 1, 3, argv, "KVS_LOCAL_AGG", "1", true);
    double want = b0 * (n[0] + 3 * n[1] + 3 * n[2]) / (n[0] + n[1] + n[2]);
    IT_CHECK(t, b1 >= 0.97 * want && b1 <= 1.03 * want,
             "a group of 3 with the default floor moved %.0f bytes, expected %.0f", b1, want);
}

/* KVS_LOCAL_AGG_MIN's default for a group of 2 that is the whole job
 * follows where the servers are.  Every server reading it directly (one
 * host, one pid namespace, direct copies on everywhere): the group saves no
 * copy, and its members send their host arrays to the servers themselves
 * (exact sums, nothing summed locally).  A server without direct copies, or
 * a floor given: the group, 64 KiB and up.  The servers at another address
 * (127.0.0.2): the group saves network bytes, 1 KiB and up. */
IT_TEST(group_servers_2x2)
{
    static const char *const argv[] = {"sum", "--counts", "300000,70000,5", "--rounds", "4",
                                       "--pushpull", NULL};
    static const char *const nocma[] = {"KVS_CMA=0", NULL};
    static const char *const away[] = {"DMLC_NODE_HOST=127.0.0.2", NULL};
    for (int j = 0; j < 4; j++) {
        it_ctx sub;
        char dir[sizeof t->dir + 16];
        sub_job(t, j, &sub, dir, sizeof dir);
        group_env_floor(&sub, j == 2 ? "65536" : NULL);
        it_start_scheduler(&sub, 2, 2, NULL);
        for (int i = 0; i < 2; i++)
            it_start_server(&sub, i, j == 1 && i == 1 ? nocma : j == 3 ? away : NULL);
        for (int i = 0; i < 2; i++)
            it_start_worker(&sub, i, argv, NULL);
        it_expect_job_ok(&sub, 120);
        for (int i = 0; i < 2; i++) {
            bool direct = it_log_has(&sub, sub.worker[i], "host arrays go to the servers "
                                     "without the group (2 workers, and every server reads "
                                     "them directly: KVS_LOCAL_AGG_MIN's default here)", 0);
            IT_CHECK(t, direct == (j == 0), "job %d: worker%d %s host arrays skip the group", j,
                     i, direct ? "says" : "does not say");
            IT_CHECK(t, (summed_locally(&sub, i) != 0) == (j != 0), "job %d: worker%d %s", j, i,
                     j ? "did not sum in its group" : "summed in its group");
        }
        for (int i = 0; (j == 1 || j == 3) && i < 2; i++)
            IT_CHECK(t, it_log_has(&sub, sub.worker[i], j == 1 ? "(keys of 65536 bytes and "
                                   "more, KVS_LOCAL_AGG_MIN's default here)" : "(keys of 1024 "
                                   "bytes and more, KVS_LOCAL_AGG_MIN's default here)", 0),
                     "job %d: worker%d does not say that its group takes keys of %s and more",
                     j, i, j == 1 ? "64 KiB" : "1 KiB");
        it_ctx_fini(&sub);
    }
}
