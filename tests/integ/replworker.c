/*
 * replworker.c - kvs-replworker: the worker program of the replicated
 * server tests (test_replica.c).
 *
 *   kvs-replworker train --rounds N [--mark R] [--mark2 R] [--out NAME]
 *                        [--spec SPEC] [--max-stall S] [--expect-lost 1]
 *                        [--ckpt DIR [--save-at R | --from R]] [--save-dead DIR]
 *                        [--scale N] [--barrier-every N]
 *
 * Initialises NKEYS keys (small ones that travel fused, middle ones, and
 * keys split over every server by MXNET_KVSTORE_BIGARRAY_BOUND=1000), then
 * runs N rounds: a pushpull of every key with this worker's gradients of
 * the round, then a wait.  Without --spec the servers keep plain sums, so
 * every pulled element must equal the sum of the two workers' gradients
 * bit for bit (2 workers: float addition of two terms commutes, so any
 * arrival order gives the same bits).  --spec SPEC: the servers run that
 * optimizer; the values are then checked only by comparing the files of
 * two runs (--out).  --mark R: after round R completes, write the file
 * mark-w<rank> in $KVS_TEST_DIR (the test then kills a server) and go on.
 * --mark2 R: the same with mark2-w<rank> (a second kill).
 * --ckpt DIR --save-at R: kvs_save into DIR after round R.  --ckpt DIR
 * --from R: kvs_load DIR after the init, then run rounds R .. N-1 (a job
 * that resumes where the saved one stood).
 * --save-dead DIR: after round --mark, wait for $KVS_TEST_DIR/killed (the
 * test killed a server), then kvs_save DIR must fail with KVS_EPEERDEAD
 * saying a collective needs every server; training goes on.
 * --max-stall S: a round that takes longer than S seconds is a failure.
 * --scale N: every key N times as long (1..1000; 91: 64 MiB in all).
 * --expect-lost 1: the job must end in a round that fails with
 * KVS_EPEERDEAD whose text says a key range "is lost" (two servers died).
 * --expect-lost 2: either that, or every round completes (exact).
 * --barrier-every N: a kvs_barrier after every N rounds (not timed).
 * --out NAME: at the end, write every key's final value to
 * $KVS_TEST_DIR/NAME-w<rank>.  Prints the slowest round.  Exits 0 when
 * every check passed, 1 otherwise.
 */
#include "kvs.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NKEYS 40

static int failures, rank;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("[replworker %d] ", rank);
    vprintf(fmt, ap);
    putchar('\n');
    fflush(stdout);
    va_end(ap);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Elements of key index k: tiny (fused), middle, and split keys. */
static uint64_t scale = 1; /* --scale */

static uint64_t key_len(int k)
{
    static const uint64_t lens[] = {3, 17, 256, 999, 1000, 4099, 30011};
    return lens[k % 7] * scale;
}

/* Worker w's gradient of round r, key k, element i: in [-1, 1). */
static float grad(int w, int r, int k, uint64_t i)
{
    uint64_t x = ((uint64_t)w << 56) ^ ((uint64_t)r << 40) ^ ((uint64_t)k << 32) ^ i;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void write_file(const char *name, const void *data, size_t len)
{
    const char *dir = getenv("KVS_TEST_DIR");
    char path[4096], tmp[4200];
    if (dir == NULL)
        return;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (f == NULL || (len && fwrite(data, 1, len, f) != len) || fclose(f) != 0 ||
        rename(tmp, path) != 0) {
        say("cannot write %s", path);
        failures++;
    }
}

/* Wait (30 s at most) for the test to say it killed a server, then a save
 * must fail naming the dead server.  Returns the failures. */
static int save_after_kill(kvs_store *kv, const char *dir)
{
    const char *tdir = getenv("KVS_TEST_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/killed", tdir ? tdir : ".");
    double end = now() + 30;
    FILE *f = NULL;
    while (now() < end && (f = fopen(path, "r")) == NULL) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL); /* polling a file the test writes, with a deadline */
    }
    if (f == NULL) {
        say("the test did not write %s within 30 s", path);
        return 1;
    }
    fclose(f);
    int rc = kvs_save(kv, dir);
    const char *text = kvs_last_error();
    if (rc != KVS_EPEERDEAD || strstr(text, "needs every server") == NULL) {
        say("kvs_save after a server's death: %s (%s), expected KVS_EPEERDEAD", kvs_errname(rc),
            text);
        return 1;
    }
    say("kvs_save after a server's death: %s: %s", kvs_errname(rc), text);
    return 0;
}

static int train(int argc, char **argv)
{
    int rounds = 10, mark = -1, mark2 = -1, expect_lost = 0, save_at = -1, from = 0;
    int barrier_every = 0;
    const char *ckpt = NULL, *save_dead = NULL;
    double max_stall = 0;
    const char *out = NULL, *spec = NULL;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--rounds"))
            rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--mark"))
            mark = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--mark2"))
            mark2 = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--ckpt"))
            ckpt = argv[i + 1];
        else if (!strcmp(argv[i], "--save-dead"))
            save_dead = argv[i + 1];
        else if (!strcmp(argv[i], "--save-at"))
            save_at = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--from"))
            from = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--expect-lost"))
            expect_lost = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--out"))
            out = argv[i + 1];
        else if (!strcmp(argv[i], "--spec"))
            spec = argv[i + 1];
        else if (!strcmp(argv[i], "--barrier-every"))
            barrier_every = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--max-stall"))
            max_stall = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--scale") && atoi(argv[i + 1]) >= 1 &&
                 atoi(argv[i + 1]) <= 1000)
            scale = (uint64_t)atoi(argv[i + 1]);
        else {
            say("unknown option %s", argv[i]);
            return 1;
        }
    }
    kvs_store *kv;
    int rc = kvs_create("dist_sync", &kv);
    if (rc) {
        say("kvs_create: %s: %s", kvs_errname(rc), kvs_last_error());
        return 1;
    }
    rank = kvs_rank(kv);
    int nw = kvs_num_workers(kv);
    if (nw != 2) {
        say("expected 2 workers, the job has %d", nw);
        kvs_close(kv);
        return 1;
    }
    uint64_t keys[NKEYS], total = 0;
    float *val[NKEYS], *out_v[NKEYS];
    kvs_array va[NKEYS], oa[NKEYS];
    for (int k = 0; k < NKEYS; k++) {
        uint64_t n = key_len(k);
        keys[k] = 100 + (uint64_t)k;
        val[k] = malloc(n * sizeof(float));
        out_v[k] = malloc(n * sizeof(float));
        if (!val[k] || !out_v[k]) {
            say("out of memory");
            return 1;
        }
        for (uint64_t i = 0; i < n; i++)
            val[k][i] = grad(7, 0, k, i);
        va[k] = (kvs_array){val[k], n, KVS_FLOAT32, -1};
        oa[k] = (kvs_array){out_v[k], n, KVS_FLOAT32, -1};
        total += n;
    }
    if ((rc = kvs_init(kv, NKEYS, keys, va)) != 0) {
        say("kvs_init: %s: %s", kvs_errname(rc), kvs_last_error());
        return 1;
    }
    if (spec && (rc = kvs_set_optimizer(kv, spec)) != 0) {
        say("kvs_set_optimizer: %s: %s", kvs_errname(rc), kvs_last_error());
        return 1;
    }
    if (from > 0 && (!ckpt || (rc = kvs_load(kv, ckpt)) != 0)) {
        say("kvs_load %s: %s: %s", ckpt ? ckpt : "(no --ckpt)", kvs_errname(rc),
            kvs_last_error());
        return 1;
    }
    double slowest = 0;
    int slowest_round = -1;
    for (int r = from; r < rounds && failures == 0; r++) {
        double t0 = now();
        for (int k = 0; k < NKEYS; k++)
            for (uint64_t i = 0; i < key_len(k); i++)
                val[k][i] = grad(rank, r, k, i);
        if ((rc = kvs_pushpull(kv, NKEYS, keys, va, oa, 0)) != 0 ||
            (rc = kvs_wait_all(kv)) != 0) {
            const char *text = kvs_last_error();
            say("round %d: %s: %s", r, kvs_errname(rc), text);
            if (expect_lost && rc == KVS_EPEERDEAD && strstr(text, "is lost") != NULL) {
                say("the job ended as expected: a key range is lost");
                kvs_close(kv);
                return 0;
            }
            failures++;
            break;
        }
        double dt = now() - t0;
        if (dt > slowest) {
            slowest = dt;
            slowest_round = r;
        }
        for (int k = 0; k < NKEYS && !spec; k++) {
            for (uint64_t i = 0; i < key_len(k); i++) {
                float want = grad(0, r, k, i) + grad(1, r, k, i);
                if (memcmp(&want, &out_v[k][i], sizeof want) != 0) {
                    say("round %d key %llu element %llu: %.9g, expected %.9g", r,
                        (unsigned long long)keys[k], (unsigned long long)i,
                        (double)out_v[k][i], (double)want);
                    failures++;
                    break;
                }
            }
        }
        if (r == save_at && ckpt && (rc = kvs_save(kv, ckpt)) != 0) {
            say("kvs_save %s after round %d: %s: %s", ckpt, r, kvs_errname(rc),
                kvs_last_error());
            failures++;
        }
        if (r == mark || r == mark2) {
            char name[32];
            snprintf(name, sizeof name, "%s-w%d", r == mark ? "mark" : "mark2", rank);
            write_file(name, "1\n", 2);
        }
        if (r == mark && save_dead)
            failures += save_after_kill(kv, save_dead);
        if (barrier_every > 0 && (r + 1) % barrier_every == 0 && (rc = kvs_barrier(kv)) != 0) {
            say("barrier after round %d: %s: %s", r, kvs_errname(rc), kvs_last_error());
            failures++;
        }
    }
    if (expect_lost == 1) {
        say("every round completed: no key range was lost");
        failures++;
    }
    say("%d rounds of %d keys (%llu elements): slowest round %d took %.3f s", rounds, NKEYS,
        (unsigned long long)total, slowest_round, slowest);
    if (max_stall > 0 && slowest > max_stall) {
        say("round %d took %.3f s > %.3f s", slowest_round, slowest, max_stall);
        failures++;
    }
    if (out && failures == 0) {
        float *all = malloc(total * sizeof(float));
        uint64_t at = 0;
        if (all == NULL) {
            say("out of memory");
            return 1;
        }
        for (int k = 0; k < NKEYS; k++) {
            memcpy(all + at, out_v[k], key_len(k) * sizeof(float));
            at += key_len(k);
        }
        char name[256];
        snprintf(name, sizeof name, "%s-w%d", out, rank);
        write_file(name, all, total * sizeof(float));
        free(all);
    }
    if ((rc = kvs_close(kv)) != 0) {
        say("kvs_close: %s: %s", kvs_errname(rc), kvs_last_error());
        failures++;
    }
    for (int k = 0; k < NKEYS; k++) {
        free(val[k]);
        free(out_v[k]);
    }
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "train"))
        return train(argc, argv);
    fprintf(stderr, "usage: kvs-replworker train --rounds N [--mark R] [--out NAME] "
            "[--spec SPEC] [--max-stall S]\n");
    return 2;
}
