/*
 * memworker.c - kvs-memworker: the worker program of the worker memory
 * tests (test_memory.c).
 *
 *   kvs-memworker MIB [ROUNDS]
 *
 * Opens a dist_sync store, allocates one float32 array of MIB MiB and
 * touches it, and reads its own peak resident memory (VmHWM) as the
 * baseline.  Then: init the key with it and push it ROUNDS (default 3)
 * times (each push waited for), and read VmHWM (the pushes' peak); then
 * pull into the same array, and run ROUNDS rounds of pushpull in place,
 * checking every element of every pulled value (the exact sum of all
 * workers' pushes of that round); then read VmHWM again.  Prints
 *   memworker: array N KiB, VmHWM baseline B KiB, push peak P KiB, peak Q KiB,
 *   push growth G KiB, growth H KiB, pull growth L KiB
 * (growth = peak - baseline: what the library took beyond the array; pull
 * growth: through the pushes and the pull, before the pushpulls).
 * Exits 0 when every value was right, 1 otherwise.
 */
#include "kvs.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/memtune.h"


/* Worker w's push of element i in round r: small integers, exact in float32. */
static float val(int w, uint64_t i, int r)
{
    return (float)((int)(i % 97) + 3 * w + r);
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "memworker: %s: %s: %s\n", what, kvs_errname(rc), kvs_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: kvs-memworker MIB [ROUNDS]\n");
        return 2;
    }
    long mib = atol(argv[1]), rounds = argc > 2 ? atol(argv[2]) : 3;
    if (mib < 1 || mib > 4096 || rounds < 1 || rounds > 100) {
        fprintf(stderr, "kvs-memworker: MIB 1 to 4096, ROUNDS 1 to 100\n");
        return 2;
    }
    kvs_store *s;
    int rc = kvs_create("dist_sync", &s);
    if (rc)
        return fail("kvs_create", rc);
    int W = kvs_num_workers(s), me = kvs_rank(s);
    uint64_t n = (uint64_t)mib << 18, key = 7, bad = 0;
    float *a = malloc(n * sizeof *a);
    if (a == NULL)
        return fail("malloc", KVS_ENOMEM);
    for (uint64_t i = 0; i < n; i++)
        a[i] = val(me, i, 0);
    unsigned long long base = mem_peak_kib();
    kvs_array v = {a, n, KVS_FLOAT32, KVS_CPU};
    if ((rc = kvs_init(s, 1, &key, &v)) != 0)
        return fail("kvs_init", rc);
    int round = 0;
    for (int r = 0; r < rounds; r++) {
        round++;
        for (uint64_t i = 0; i < n; i++)
            a[i] = val(me, i, round);
        if ((rc = kvs_push(s, 1, &key, &v, 0)) != 0 || (rc = kvs_wait_all(s)) != 0)
            return fail("push", rc);
    }
    unsigned long long push_peak = mem_peak_kib(), pull_peak = 0;
    /* the last push's sum, then pushpulls in place: every element checked */
    for (int r = 0; r <= rounds && bad == 0; r++) {
        if (r == 0) {
            memset(a, 0, n * sizeof *a);
            rc = kvs_pull(s, 1, &key, &v, 0);
        } else {
            round++;
            for (uint64_t i = 0; i < n; i++)
                a[i] = val(me, i, round);
            rc = kvs_pushpull(s, 1, &key, &v, &v, 0);
        }
        if (!rc)
            rc = kvs_wait_all(s);
        if (rc)
            return fail(r ? "pushpull" : "pull", rc);
        if (r == 0)
            pull_peak = mem_peak_kib();
        for (uint64_t i = 0; i < n; i++) {
            float want = 0;
            for (int w = 0; w < W; w++)
                want += val(w, i, round);
            if (a[i] != want) {
                fprintf(stderr, "memworker: round %d element %llu: %g, expected %g\n", round,
                        (unsigned long long)i, (double)a[i], (double)want);
                bad++;
                break;
            }
        }
    }
    unsigned long long peak = mem_peak_kib();
    printf("memworker: array %llu KiB, VmHWM baseline %llu KiB, push peak %llu KiB, peak %llu "
           "KiB, push growth %llu KiB, growth %llu KiB, pull growth %llu KiB\n",
           (unsigned long long)(n * sizeof *a) >> 10, base, push_peak, peak, push_peak - base,
           peak - base, pull_peak - base);
    fflush(stdout);
    rc = kvs_close(s);
    free(a);
    if (rc)
        return fail("kvs_close", rc);
    return bad ? 1 : 0;
}
