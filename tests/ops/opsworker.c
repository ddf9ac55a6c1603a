/* opsworker.c - kvs-opsworker: the worker of tests/ops/test-ops.sh.
 *
 *   kvs-opsworker DIR ROUNDS [fused]
 *
 * Inits two keys (1: 1000 float32, sent inline; 2: 32768 float32 = 128 KiB,
 * sent by direct copy to a same-host server), runs ROUNDS pushpulls of both
 * with a barrier after each round, and checks every element of every sum
 * exactly (worker w pushes w + 1 + r in round r).  Then it writes its
 * kvs_metrics() text to DIR/worker-<rank>.prom, creates DIR/ready-<rank>,
 * and waits (deadline 120 s) for DIR/go before it closes: the test scrapes
 * the daemons while the job is still running.  Exit 0 iff all was right.
 *
 * With "fused": keys 11..18 instead, NF float32 each (1 KiB, under
 * DP_FUSE_MAX), pushed and pulled in one call, so each server gets its
 * share of them fused into one FUSED message per round.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kvs.h"

#define N1 1000
#define N2 32768
#define NF 256
#define NKF 8

static int fail(const char *what, int rc)
{
    fprintf(stderr, "opsworker: %s: %s: %s\n", what, kvs_errname(rc), kvs_last_error());
    return 1;
}

static int finish(kvs_store *kv, const char *dir, int rank);

/* NKF small keys in one call per round, every element checked. */
static int run_fused(kvs_store *kv, int rank, int nw, int rounds)
{
    static float v[NKF][NF], o[NKF][NF];
    uint64_t keys[NKF];
    kvs_array vals[NKF], outs[NKF];
    int rc;
    for (int k = 0; k < NKF; k++) {
        keys[k] = 11 + (uint64_t)k;
        vals[k] = (kvs_array){v[k], NF, KVS_FLOAT32, KVS_CPU};
        outs[k] = (kvs_array){o[k], NF, KVS_FLOAT32, KVS_CPU};
    }
    if ((rc = kvs_init(kv, NKF, keys, vals)) != 0)
        return fail("kvs_init (fused keys)", rc);
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < NKF; k++)
            for (int i = 0; i < NF; i++)
                v[k][i] = (float)(rank + 1 + r + k + i % 3);
        memset(o, 0xff, sizeof o);
        if ((rc = kvs_pushpull(kv, NKF, keys, vals, outs, 0)) != 0 ||
            (rc = kvs_wait_all(kv)) != 0)
            return fail("pushpull (fused keys)", rc);
        for (int k = 0; k < NKF; k++)
            for (int i = 0; i < NF; i++) {
                float want = (float)(nw * (nw + 1) / 2 + nw * (r + k + i % 3));
                if (o[k][i] != want) {
                    fprintf(stderr, "opsworker: MISMATCH key=%d round=%d index=%d got=%g "
                            "expected=%g\n", 11 + k, r, i, o[k][i], want);
                    return 1;
                }
            }
        if ((rc = kvs_barrier(kv)) != 0)
            return fail("barrier", rc);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3 && !(argc == 4 && !strcmp(argv[3], "fused"))) {
        fprintf(stderr, "usage: kvs-opsworker DIR ROUNDS [fused]\n");
        return 2;
    }
    const char *dir = argv[1];
    int rounds = atoi(argv[2]);
    kvs_store *kv;
    int rc = kvs_create("dist_sync", &kv);
    if (rc)
        return fail("kvs_create", rc);
    int rank = kvs_rank(kv), nw = kvs_num_workers(kv);
    if (argc == 4 && (rc = run_fused(kv, rank, nw, rounds)) != 0)
        return rc;
    if (argc == 4)
        return finish(kv, dir, rank);
    static float a[N1], b[N2], oa[N1], ob[N2];
    uint64_t keys[2] = {1, 2};
    kvs_array vals[2] = {{a, N1, KVS_FLOAT32, KVS_CPU}, {b, N2, KVS_FLOAT32, KVS_CPU}};
    kvs_array outs[2] = {{oa, N1, KVS_FLOAT32, KVS_CPU}, {ob, N2, KVS_FLOAT32, KVS_CPU}};
    if ((rc = kvs_init(kv, 2, keys, vals)) != 0)
        return fail("kvs_init", rc);
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < N1; i++)
            a[i] = (float)(rank + 1 + r + i % 7);
        for (int i = 0; i < N2; i++)
            b[i] = (float)(rank + 1 + r + i % 5);
        memset(oa, 0xff, sizeof oa);
        memset(ob, 0xff, sizeof ob);
        if ((rc = kvs_pushpull(kv, 2, keys, vals, outs, 0)) != 0 ||
            (rc = kvs_wait_all(kv)) != 0)
            return fail("pushpull", rc);
        /* sum over w of (w + 1 + r + i%m) = nw(nw+1)/2 + nw(r + i%m) */
        for (int i = 0; i < N1; i++) {
            float want = (float)(nw * (nw + 1) / 2 + nw * (r + i % 7));
            if (oa[i] != want) {
                fprintf(stderr, "opsworker: MISMATCH key=1 round=%d index=%d got=%g "
                        "expected=%g\n", r, i, oa[i], want);
                return 1;
            }
        }
        for (int i = 0; i < N2; i++) {
            float want = (float)(nw * (nw + 1) / 2 + nw * (r + i % 5));
            if (ob[i] != want) {
                fprintf(stderr, "opsworker: MISMATCH key=2 round=%d index=%d got=%g "
                        "expected=%g\n", r, i, ob[i], want);
                return 1;
            }
        }
        if ((rc = kvs_barrier(kv)) != 0)
            return fail("barrier", rc);
    }
    return finish(kv, dir, rank);
}

/* Write the metrics text, say ready, wait for DIR/go, close. */
static int finish(kvs_store *kv, const char *dir, int rank)
{
    int rc;
    /* the metrics text: ask the size first, then render */
    int need = kvs_metrics(kv, NULL, 0);
    if (need <= 0)
        return fail("kvs_metrics size", need);
    char *text = malloc((size_t)need + 1);
    if (kvs_metrics(kv, text, (size_t)need + 1) != need)
        return fail("kvs_metrics", KVS_EINTERNAL);
    char path[4096];
    snprintf(path, sizeof path, "%s/worker-%d.prom", dir, rank);
    FILE *f = fopen(path, "w");
    if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0) {
        perror(path);
        return 1;
    }
    free(text);
    snprintf(path, sizeof path, "%s/ready-%d", dir, rank);
    fclose(fopen(path, "w"));
    snprintf(path, sizeof path, "%s/go", dir);
    for (int i = 0; i < 12000 && access(path, F_OK) != 0; i++) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    if (access(path, F_OK) != 0) {
        fprintf(stderr, "opsworker: no %s within 120 s\n", path);
        return 1;
    }
    rc = kvs_close(kv);
    return rc ? fail("kvs_close", rc) : 0;
}
