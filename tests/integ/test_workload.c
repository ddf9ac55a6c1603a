/*
 * test_workload.c - training-shaped workloads: many keys of mixed sizes and
 * dtypes in one call (exact sums, split and unsplit keys, repeated keys,
 * both data paths), huge key counts.  The checking is done by
 * kvs-testworker's `many` scenario; these tests start the jobs and require
 * every process to exit 0.
 */
#include "tests.h"

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void many_env(it_ctx *t, const char *cma)
{
    /* keys of 20000 elements and more are split over the servers */
    it_setenv(t, "MXNET_KVSTORE_BIGARRAY_BOUND", "20000");
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_setenv(t, "KVS_CMA", cma);
}

IT_TEST(many_keys_2x2)
{
    /* 3000 keys of 1 to 70001 elements, every dtype, every 97th key split,
     * every 10th key twice in the call; same-host direct copies on */
    static const char *const argv[] = {"many", "--keys", "3000", "--dtype", "all", "--split",
                                       "--dup", "--pushpull", "--rounds", "3", NULL};
    many_env(t, "1");
    it_start_job(t, 2, 2, argv);
    it_expect_job_ok(t, 150);
}

/* KVS_FUSE_BYTES far above a frame (1 GiB): 1000 keys of 3 to 15000
 * float32 elements in one call (about 21 MB of parts under 64 KiB for the one
 * server) leave in fused messages whose records stay within one 4 MiB frame
 * (a bigger body would leave in pieces); sums exact */
IT_TEST(many_keys_fuse_max_1x1)
{
    static const char *const argv[] = {"many", "--keys", "1000", "--counts", "3,1000,15000",
                                       "--dtype", "f32", "--dup",
                                       "--pushpull", "--rounds", "2", NULL};
    many_env(t, "0");
    it_setenv(t, "KVS_FUSE_BYTES", "1073741824");
    it_start_job(t, 1, 1, argv);
    it_expect_job_ok(t, 150);
}

IT_TEST(many_keys_socket_3x2)
{
    /* the same with push then pull, every byte through the sockets */
    static const char *const argv[] = {"many", "--keys", "3000", "--dtype", "all", "--split",
                                       "--dup", "--rounds", "3", NULL};
    many_env(t, "0");
    it_start_job(t, 3, 2, argv);
    it_expect_job_ok(t, 150);
}

IT_TEST(huge_keys_2x2)
{
    /* 100000 small keys in one call, twice */
    static const char *const argv[] = {"many", "--keys", "100000", "--dtype", "f32,i64",
                                       "--pushpull", "--rounds", "2", NULL};
    many_env(t, "1");
    it_start_job(t, 2, 2, argv);
    it_expect_job_ok(t, 240);
}

IT_TEST(many_keys_small_fuse_2x3)
{
    /* fused messages of at most 4 KiB: a call's small parts are spread over
     * many FUSED messages (and single parts that go alone) */
    static const char *const argv[] = {"many", "--keys", "800", "--dtype", "f16,i32,f64",
                                       "--split", "--dup", "--pushpull", "--rounds", "3", NULL};
    many_env(t, "1");
    it_setenv(t, "KVS_FUSE_BYTES", "4096");
    it_start_job(t, 2, 3, argv);
    it_expect_job_ok(t, 150);
}

IT_TEST(many_keys_p3_2x2)
{
    /* p3: every key cut into slices of 3000 elements, fused parts keep
     * their place in the priority order */
    static const char *const argv[] = {"many", "--keys", "800", "--dtype", "f32,bf16",
                                       "--split", "--dup", "--rounds", "3", NULL};
    many_env(t, "0");
    it_setenv(t, "DMLC_PS_VAN_TYPE", "p3");
    it_setenv(t, "MXNET_KVSTORE_SLICE_THRESHOLD", "3000");
    it_start_job(t, 2, 2, argv);
    it_expect_job_ok(t, 150);
}

/* The p3 credit tests' job: 400 keys, split and repeated, pushpull */
static const char *const p3_credit_argv[] = {"many", "--keys", "400", "--dtype", "f32,i64",
                                             "--split", "--dup", "--pushpull", "--rounds", "3",
                                             NULL};

/* p3, keys cut into slices of slice elements, credit bytes per server */
static void p3_credit_env(it_ctx *t, const char *slice, const char *credit)
{
    it_setenv(t, "DMLC_PS_VAN_TYPE", "p3");
    it_setenv(t, "MXNET_KVSTORE_SLICE_THRESHOLD", slice);
    it_setenv(t, "KVS_P3_CREDIT", credit);
}

IT_TEST(p3_credit_2x2)
{
    /* p3 with 4 KiB of credit per server: nearly every part waits in the
     * priority queue for ZeroMQ to write the one before; sums stay exact */
    many_env(t, "0");
    p3_credit_env(t, "5000", "4096");
    it_start_job(t, 2, 2, p3_credit_argv);
    it_expect_job_ok(t, 150);
}

/* p3 with 1 byte of credit and slices big enough to leave fused as record
 * frames (160 and 320 KB): every flush overdraws the credit, and a lone
 * pull (no body: no credit taken) must not stop its server's queue, which
 * only returned credit would wake; sums stay exact */
IT_TEST(p3_credit_tiny_2x2)
{
    many_env(t, "0");
    p3_credit_env(t, "40000", "1");
    it_start_job(t, 2, 2, p3_credit_argv);
    it_expect_job_ok(t, 150);
}

/* Key parts of 16 KiB and more to a same-host server leave by reference,
 * many in one FUSED_REF message beside the small parts' inline records
 * (server reads and writes our memory); every value is checked by the
 * workers, and each worker's timeline (KVS_TRACE) must show parts sent that
 * way.  secs: the job's deadline. */
static void fused_ref_job(it_ctx *t, int W, int S, const char *const *argv, double secs)
{
    char path[PATH_MAX + 32];
    many_env(t, "1");
    it_setenv(t, "KVS_TRACE", "%s/trace-%%r.json", t->dir);
    it_start_job(t, W, S, argv);
    it_expect_job_ok(t, secs);
    for (int w = 0; w < W; w++) {
        size_t len;
        snprintf(path, sizeof path, "%s/trace-%d.json", t->dir, w);
        char *tr = it_slurp(path, &len);
        IT_ASSERT(t, tr != NULL, "worker %d wrote no timeline at %s", w, path);
        bool ref = strstr(tr, "\"path\":\"fused_cma\"") != NULL;
        free(tr);
        IT_ASSERT(t, ref, "worker %d: no key part left by reference in a FUSED_REF (%s)", w,
                  path);
    }
}

IT_TEST(many_keys_fused_ref_1x1)
{
    /* 240 keys of every dtype (some twice in a call), pushpull */
    static const char *const argv[] = {"many", "--keys", "240", "--dtype", "all", "--dup",
                                       "--pushpull", "--rounds", "3", NULL};
    fused_ref_job(t, 1, 1, argv, 100);
}

IT_TEST(many_keys_fused_ref_2x2)
{
    /* push then pull, split keys too */
    static const char *const argv[] = {"many", "--keys", "240", "--dtype", "f32,f64,f16",
                                       "--split", "--dup", "--rounds", "3", NULL};
    fused_ref_job(t, 2, 2, argv, 100);
}

IT_TEST(p3_credit_fused_ref_2x2)
{
    /* p3 with credits and same-host direct copies: parts by reference are
     * queued by priority with the others and leave fused by reference */
    p3_credit_env(t, "40000", "65536");
    fused_ref_job(t, 2, 2, p3_credit_argv, 150);
}

/* Parts of 16 KiB (DP_CMA_MIN) and more go by reference to a same-host
 * server, smaller ones inline: keys of 4095 (16380 bytes), 4096 and 16383
 * float32 elements, init, pull, then pushpulls in one call each (so the
 * by-reference ones leave as records of a FUSED_REF), every element checked
 * by the worker; its timeline must show each part sent on the path its size
 * picks. */
IT_TEST(cma_min_16k_1x1)
{
    static const char *const argv[] = {"sum", "--dtype", "f32", "--counts", "4095,4096,16383",
                                       "--pushpull", "--rounds", "3", NULL};
    static const uint64_t count[3] = {4095, 4096, 16383};
    char path[PATH_MAX + 32];
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_setenv(t, "KVS_CMA", "1");
    it_setenv(t, "KVS_TRACE", "%s/trace-%%r.json", t->dir);
    it_start_job(t, 1, 1, argv);
    it_expect_job_ok(t, 60);
    snprintf(path, sizeof path, "%s/trace-0.json", t->dir);
    char *tr = it_slurp(path, NULL);
    IT_ASSERT(t, tr != NULL, "the worker wrote no timeline at %s", path);
    int seen[3][2] = {{0}}; /* per key: parts sent inline, by reference */
    for (const char *p = tr; (p = strstr(p, "\"name\":\"sent\"")) != NULL; p++) {
        const char *k = strstr(p, "\"key\":"), *pa = strstr(p, "\"path\":\"");
        IT_ASSERT(t, k && pa, "a sent event without key or path in %s", path);
        uint64_t key = strtoull(k + 6, NULL, 10);
        /* testworker's keys (f32): 17 + 5 j, odd j + 2^40 */
        int j = -1;
        for (int i = 0; i < 3; i++)
            if (key == 17 + 5 * (uint64_t)i + (i % 2 ? 1ull << 40 : 0))
                j = i;
        IT_ASSERT(t, j >= 0, "a sent event for key %llu, not one of the job's",
                  (unsigned long long)key);
        bool ref = strncmp(pa + 8, "cma\"", 4) == 0 || strncmp(pa + 8, "fused_cma\"", 10) == 0;
        seen[j][ref]++;
    }
    free(tr);
    for (int j = 0; j < 3; j++) {
        bool big = count[j] * 4 >= 16384;
        it_info(t, "key of %llu elements: %d parts inline, %d by reference",
                (unsigned long long)count[j], seen[j][0], seen[j][1]);
        /* the init too: a part whose path depends on the server's answer
         * to the worker's HELLO waits for it (worker/io.c, fusable) */
        if (big)
            IT_ASSERT(t, seen[j][1] >= 5 && seen[j][0] == 0,
                      "key of %llu elements (%llu bytes): %d parts sent inline, %d by "
                      "reference; expected every one by reference",
                      (unsigned long long)count[j], (unsigned long long)count[j] * 4,
                      seen[j][0], seen[j][1]);
        else
            IT_ASSERT(t, seen[j][0] >= 5 && seen[j][1] == 0,
                      "key of %llu elements (%llu bytes): %d parts sent inline, %d by "
                      "reference; expected every one inline", (unsigned long long)count[j],
                      (unsigned long long)count[j] * 4, seen[j][0], seen[j][1]);
    }
}
