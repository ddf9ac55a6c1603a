/*
 * elasticworker.c - kvs-elasticworker: the worker program of the elastic
 * membership tests (test_elastic.c; KVS_ELASTIC=1).
 *
 *   kvs-elasticworker NAME STEPS WANT [--joiner] [--die-at S] [--leave-at S]
 *                     [--compute-ms MS] [--expect-dead] [--compress T]
 *
 * Each step is one pushpull of three keys (two tiny ones, fused into one
 * message per server, and one split over the servers by
 * MXNET_KVSTORE_BIGARRAY_BOUND=1000).  Element 0 of every array is 1 and
 * element i is (step+1)*(i%97+1), so a completed round's sum is exactly
 * n and n*(step+1)*(i%97+1), n = kvs_num_workers when the step began: the
 * sum over that round's members, checked element by element.
 *
 * A step that fails with KVS_EMEMBERSHIP (the workers changed) is followed
 * by an agreement: a pushpull of key AGREE holding (steps done, 1), or
 * (0, 0) from a joiner, whose sum says at which step the members go on
 * (every survivor must hold the same count: docs/design.md "Elastic
 * workers").  A joiner (--joiner) then pulls the current values and checks
 * them against that step.  The job ends after step STEPS-1 once it has
 * WANT members (so that a joiner is in before the end; every member decides
 * alike).  --die-at S: SIGKILL itself right after issuing step S's fused
 * pushpull.  --leave-at S: kvs_close after step S.  --expect-dead: the job
 * must end with KVS_EPEERDEAD (fewer than KVS_MIN_WORKERS).
 *
 * --compress T: the gradients go through 2-bit compression (threshold T,
 * float32 replies: "2bit threshold=T pull=0"; the agreement key exempt).
 * Element i of step s is 1 + (s + i) % 3, and T an integer above 3, so
 * every value, residual and sum is exact: each worker keeps a model of its
 * residual, updated by completed steps only, and expects n times the
 * model's quantized gradient (every member started at step 0 and pushes the
 * same gradients, so all residuals are alike; no joiner).  A step redone
 * after KVS_EMEMBERSHIP must send what its first try did.
 * Files in $KVS_TEST_DIR: ready-NAME (created, every step done so far in it
 * as "steps N"), changed-NAME (after its first KVS_EMEMBERSHIP).  Prints
 * "memberships K workers N" at the end.  Exit 0 when every check passed.
 */
#include "kvs.h"

#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NK 3
#define AGREE 99
#define MAX_STEPS 100000

static const struct { uint64_t key; uint64_t n; } keys[NK] = {{1, 5}, {2, 33}, {3, 2501}};
static const char *name = "worker";
static int failures;
static float zthr;     /* --compress: the threshold (0: no compression) */
static float *zres[NK]; /* --compress: the model of this worker's residual */

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("[%s] ", name);
    vprintf(fmt, ap);
    putchar('\n');
    fflush(stdout);
    va_end(ap);
}

static void write_file(const char *what, const char *text)
{
    const char *dir = getenv("KVS_TEST_DIR");
    char path[4096], tmp[4200];
    if (dir == NULL)
        return;
    snprintf(path, sizeof path, "%s/%s-%s", dir, what, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return;
    fputs(text, f);
    fclose(f);
    rename(tmp, path);
}

static void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static float expect(uint64_t step, uint64_t i)
{
    return i == 0 ? 1.0f : (float)((step + 1) * (i % 97 + 1));
}

/* The arrays of one step: vals hold this worker's contribution. */
typedef struct bufs {
    float *val[NK], *out[NK];
    kvs_array v[NK], o[NK];
    uint64_t k[NK];
} bufs;

/* Worker's contribution to element i of step's round (--compress: the
 * gradient before compression). */
static float grad(uint64_t step, uint64_t i)
{
    return zthr > 0 ? (float)(1 + (step + i) % 3) : expect(step, i);
}

/* What 2-bit compression sends for gradient g on residual r (MXNet's
 * algorithm), and the residual after it (*after; NULL: not wanted). */
static float quantized(float g, float r, float *after)
{
    float v = g + r, q = v >= zthr ? zthr : v <= -zthr ? -zthr : 0.0f;
    if (after)
        *after = v - q;
    return q;
}

static void fill(bufs *b, uint64_t step)
{
    for (int j = 0; j < NK; j++)
        for (uint64_t i = 0; i < keys[j].n; i++) {
            b->val[j][i] = grad(step, i);
            b->out[j][i] = -1.0f;
        }
}

/* Step's round completed: with compression, the model's residual moves on. */
static void model_step(uint64_t step)
{
    for (int j = 0; zthr > 0 && j < NK; j++)
        for (uint64_t i = 0; i < keys[j].n; i++)
            quantized(grad(step, i), zres[j][i], &zres[j][i]);
}

static void check_sum(const bufs *b, uint64_t step, int n)
{
    for (int j = 0; j < NK; j++)
        for (uint64_t i = 0; i < keys[j].n; i++) {
            float want = (float)n * (zthr > 0 ? quantized(grad(step, i), zres[j][i], NULL)
                                              : expect(step, i));
            if (b->out[j][i] != want) {
                if (failures++ < 5)
                    say("FAIL step %llu key %llu [%llu]: got %g, want %g (%d workers)",
                        (unsigned long long)step, (unsigned long long)keys[j].key,
                        (unsigned long long)i, (double)b->out[j][i], (double)want, n);
                return;
            }
        }
}

/* The step the members go on from (after a change), or -1 on an error
 * other than another change. */
static int64_t agree(kvs_store *s, bool joiner, uint64_t done)
{
    for (int tries = 0; tries < 100; tries++) {
        float v[2] = {joiner ? 0.0f : (float)done, joiner ? 0.0f : 1.0f}, o[2] = {-1, -1};
        uint64_t k = AGREE;
        kvs_array a = {v, 2, KVS_FLOAT32, -1}, r = {o, 2, KVS_FLOAT32, -1};
        int rc = kvs_pushpull(s, 1, &k, &a, &r, 0);
        if (rc == 0)
            rc = kvs_wait_all(s);
        if (rc == KVS_EMEMBERSHIP)
            continue;
        if (rc != 0) {
            say("agreement: %s (%s)", kvs_errname(rc), kvs_last_error());
            return -1;
        }
        if (o[1] < 1.0f) {
            say("FAIL agreement: no survivor counted (%g)", (double)o[1]);
            failures++;
            return -1;
        }
        uint64_t at = (uint64_t)(o[0] / o[1]);
        if (!joiner && ((float)at * o[1] != o[0] || at != done)) {
            say("FAIL agreement: survivors stand at different steps (sum %g over %g; mine %llu)",
                (double)o[0], (double)o[1], (unsigned long long)done);
            failures++;
        }
        return (int64_t)at;
    }
    say("FAIL agreement: 100 changes in a row");
    failures++;
    return -1;
}

/* A joiner's first look: every part of every key holds the sum of the last
 * round that completed (step at-1, or step at for a part whose round of a
 * failed step completed), from any number of members.  A key's parts (P3
 * slices, a big key's parts on several servers) complete their rounds on
 * their own, so each element is checked against its own part's round: element
 * i is m * f * (i % 97 + 1) for a member count m and f in {at, at + 1}
 * (element 0 is m). */
static bool part_value(float v, uint64_t i, uint64_t at)
{
    for (uint64_t f = at; f <= at + 1; f++)
        for (int m = 1; m <= 16; m++)
            if (v == (float)m * (i == 0 ? 1.0f : (float)(f * (i % 97 + 1))))
                return true;
    return false;
}

static void check_current(kvs_store *s, bufs *b, uint64_t at)
{
    int rc = kvs_pull(s, NK, b->k, b->o, 0);
    if (rc == 0)
        rc = kvs_wait_all(s);
    if (rc != 0) {
        say("FAIL joiner's pull: %s (%s)", kvs_errname(rc), kvs_last_error());
        failures++;
        return;
    }
    for (int j = 0; j < NK; j++) {
        if (at == 0 && b->out[j][0] == 0.0f)
            continue; /* nothing pushed yet: the init's zeros */
        for (uint64_t i = 0; i < keys[j].n; i++)
            if (!part_value(b->out[j][i], i, at)) {
                say("FAIL joiner pulled key %llu: [%llu]=%g, not a sum of step %llu or %llu",
                    (unsigned long long)keys[j].key, (unsigned long long)i,
                    (double)b->out[j][i], (unsigned long long)at - 1, (unsigned long long)at);
                failures++;
                break;
            }
    }
    say("joiner pulled the current values (step %llu)", (unsigned long long)at);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: kvs-elasticworker NAME STEPS WANT [--joiner] [--die-at S] "
                        "[--leave-at S] [--compute-ms MS] [--expect-dead]\n");
        return 2;
    }
    name = argv[1];
    uint64_t steps = strtoull(argv[2], NULL, 10);
    int want = atoi(argv[3]), compute_ms = 2;
    int64_t die_at = -1, leave_at = -1;
    bool joiner = false, expect_dead = false;
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--joiner"))
            joiner = true;
        else if (!strcmp(argv[i], "--expect-dead"))
            expect_dead = true;
        else if (!strcmp(argv[i], "--die-at") && i + 1 < argc)
            die_at = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--leave-at") && i + 1 < argc)
            leave_at = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--compute-ms") && i + 1 < argc)
            compute_ms = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--compress") && i + 1 < argc && atoi(argv[i + 1]) > 3)
            zthr = (float)atoi(argv[++i]);
        else {
            fprintf(stderr, "kvs-elasticworker: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    kvs_store *s = NULL;
    int rc = kvs_create("dist_sync", &s);
    if (rc != 0) {
        say("kvs_create: %s (%s)", kvs_errname(rc), kvs_last_error());
        return 1;
    }
    say("rank %d of %d workers%s", kvs_rank(s), kvs_num_workers(s), joiner ? " (joiner)" : "");
    if (zthr > 0) {
        char spec[64];
        uint64_t ak = AGREE;
        snprintf(spec, sizeof spec, "2bit threshold=%g pull=0", (double)zthr);
        if ((rc = kvs_compression_exempt(s, 1, &ak)) != 0 ||
            (rc = kvs_set_gradient_compression(s, spec)) != 0) {
            say("compression: %s (%s)", kvs_errname(rc), kvs_last_error());
            return 1;
        }
        for (int j = 0; j < NK; j++)
            if ((zres[j] = calloc(keys[j].n, sizeof(float))) == NULL)
                return 1;
    }
    bufs b;
    for (int j = 0; j < NK; j++) {
        b.val[j] = calloc(keys[j].n, sizeof(float));
        b.out[j] = calloc(keys[j].n, sizeof(float));
        if (b.val[j] == NULL || b.out[j] == NULL)
            return 1;
        b.k[j] = keys[j].key;
        b.v[j] = (kvs_array){b.val[j], keys[j].n, KVS_FLOAT32, -1};
        b.o[j] = (kvs_array){b.out[j], keys[j].n, KVS_FLOAT32, -1};
    }
    float z[2] = {0, 0};
    uint64_t ak = AGREE;
    kvs_array za = {z, 2, KVS_FLOAT32, -1};
    if ((rc = kvs_init(s, NK, b.k, b.v)) != 0 || (rc = kvs_init(s, 1, &ak, &za)) != 0) {
        say("kvs_init: %s (%s)", kvs_errname(rc), kvs_last_error());
        return 1;
    }
    uint64_t step = 0;
    int changes = 0;
    if (joiner) {
        int64_t at = agree(s, true, 0);
        if (at < 0)
            return 1;
        step = (uint64_t)at;
        check_current(s, &b, step);
    }
    write_file("ready", "steps 0\n");
    while (step < MAX_STEPS && (step < steps || kvs_num_workers(s) < want)) {
        int n = kvs_num_workers(s);
        fill(&b, step);
        rc = kvs_pushpull(s, NK, b.k, b.v, b.o, 0);
        if (rc == 0 && die_at >= 0 && (int64_t)step == die_at) {
            say("dying in the middle of step %llu's fused push", (unsigned long long)step);
            raise(SIGKILL);
        }
        if (rc == 0)
            rc = kvs_wait_all(s);
        if (rc == KVS_EMEMBERSHIP) {
            changes++;
            say("step %llu: %s; now rank %d of %d workers", (unsigned long long)step,
                kvs_last_error(), kvs_rank(s), kvs_num_workers(s));
            write_file("changed", "1\n");
            int64_t at = agree(s, false, step);
            if (at < 0)
                break;
            step = (uint64_t)at;
            continue;
        }
        if (rc != 0) {
            if (expect_dead && rc == KVS_EPEERDEAD) {
                say("the job ended as expected: %s", kvs_last_error());
                kvs_close(s);
                return failures ? 1 : 0;
            }
            say("FAIL step %llu: %s (%s)", (unsigned long long)step, kvs_errname(rc),
                kvs_last_error());
            kvs_close(s);
            return 1;
        }
        check_sum(&b, step, n);
        model_step(step);
        step++;
        char text[64];
        snprintf(text, sizeof text, "steps %llu\n", (unsigned long long)step);
        write_file("ready", text);
        if (leave_at >= 0 && (int64_t)step > leave_at)
            break;
        if (compute_ms > 0)
            nap_ms(compute_ms); /* the training's own work between steps */
    }
    if (expect_dead) {
        say("FAIL the job did not end with KVS_EPEERDEAD");
        failures++;
    }
    say("memberships %d workers %d steps %llu", changes, kvs_num_workers(s),
        (unsigned long long)step);
    rc = kvs_close(s);
    if (rc != 0 && rc != KVS_ECLOSED)
        say("kvs_close: %s", kvs_errname(rc));
    return failures ? 1 : 0;
}
