/*
 * optworker.c - kvs-optworker: the worker program of the optimizer and
 * checkpoint integration tests (test_optim.c).
 *
 *   kvs-optworker train --spec SPEC [--rounds N] [--from R] [--mult] [--half]
 *                       [--sums] [--save-at R --save-dir D] [--load D] [--split-refused]
 *                       [--dump FILE] [--hang-after-save]
 *                       [--save2-at R2 --crash-save] [--pull-dump FILE] [--save-end]
 *                       [--dump-rounds]
 *   kvs-optworker errors --dir D
 *   kvs-optworker async
 *
 * train: initialises the keys below, sets the optimizer (every worker, the
 * same spec), then runs rounds [from, rounds) of pushpull with this
 * worker's gradients, and after every round compares every pulled weight
 * with a float64 reference computed here from the update formulas of kvs.h
 * (relative error <= 1e-6; float16 keys: the reference rounded to float16,
 * 2e-3).  --load D restores a checkpoint first (and the reference is not
 * checked: it is compared bit for bit against another run's --dump by the
 * test instead).  --sums: MXNET_UPDATE_ON_KVSTORE=0 is set: the servers
 * must return plain sums.  --save-at R: kvs_save(D) after R rounds;
 * --hang-after-save: then write file "saved-w<ID>" and wait to be killed.
 * --dump FILE (rank 0): write every key's final bytes to $KVS_TEST_DIR/FILE.
 * The crash tests: --save-at R --save2-at R2 --crash-save saves into D after
 * R and after R2 rounds, rank 0 dumping the weights each save holds to
 * save1.bin and save2.bin; the second save is expected to fail (a server is
 * made to die in it): any result is taken, then "crashed-w<ID>" is written
 * and the worker waits to be killed.  --pull-dump FILE: after the rounds,
 * pull every key and dump it (rank 0); --save-end: then kvs_save(D).
 * --dump-rounds: rank 0 dumps the weights after each round r (1, 2, ...) to
 * round<r>.bin (what an automatic checkpoint of round r holds).
 * --split-refused: the keys are dist_async, and the spec (lamb) must be
 * refused, KVS_ENOTSUP naming a key split over the servers; then the worker
 * leaves.
 * lamb's reference is per key (the trust ratio ||w|| / ||r|| of the whole
 * key, float64); the others' per element.
 *
 * errors: bad specs, per-key and int-key errors, saves during a round, and
 * load failures (corrupted, truncated, mixed, shape) that must change
 * nothing.  Exits 0 when every check passed, 1 otherwise.
 */
#include "kvs.h"
#include "tests/integ/half.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#define NKEYS 5
#define MAXR 16

/* key, elements, dtype: unsplit and split (MXNET_KVSTORE_BIGARRAY_BOUND=1000
 * in the tests) keys of both float dtypes, and one float16 key (--half) */
static const struct { uint64_t key; uint64_t n; kvs_dtype dt; } keys[NKEYS] = {
    {3, 37, KVS_FLOAT32}, {8, 29, KVS_FLOAT64}, {11, 2501, KVS_FLOAT32},
    {20, 1999, KVS_FLOAT64}, {31, 41, KVS_FLOAT16}};

static int failures;
static int rank;
static char who[32] = "worker";

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("[%s] ", who);
    vprintf(fmt, ap);
    putchar('\n');
    fflush(stdout);
    va_end(ap);
}

#define CHECK(cond, ...)                \
    do {                                \
        if (!(cond)) {                  \
            say(__VA_ARGS__);           \
            failures++;                 \
        }                               \
    } while (0)

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Worker w's gradient for element i of key k in round r: a multiple of 0.25
 * in [-4, 4] (sums of two are exact in every float type). */
static double grad(int w, uint64_t k, uint64_t i, int r)
{
    uint64_t h = mix64(mix64(k * 131 + i) ^ ((uint64_t)(w + 1) << 40) ^ (uint64_t)r);
    return ((double)(h % 33) - 16.0) * 0.25;
}

static double init_w(uint64_t k, uint64_t i)
{
    return 1.0 + (double)(mix64(k * 7919 + i) % 17) / 16.0;
}

static double get(kvs_dtype dt, const void *p, uint64_t i)
{
    switch (dt) {
    case KVS_FLOAT32: return ((const float *)p)[i];
    case KVS_FLOAT64: return ((const double *)p)[i];
    case KVS_FLOAT16: return f16_to_f32(((const uint16_t *)p)[i]);
    default: return NAN;
    }
}

static void put(kvs_dtype dt, void *p, uint64_t i, double v)
{
    switch (dt) {
    case KVS_FLOAT32: ((float *)p)[i] = (float)v; break;
    case KVS_FLOAT64: ((double *)p)[i] = v; break;
    case KVS_FLOAT16: ((uint16_t *)p)[i] = f32_to_f16((float)v); break;
    default: break;
    }
}

/* ---- the reference: kvs.h's formulas in float64 ---- */

typedef struct spec {
    char name[16];
    double lr, wd, rg, clip, mom, b1, b2, eps, g1, g2, cw;
    int centered, sched, mp, bc;
    double step, factor, stop;
    double lower, upper, warmup, total, final_lr, begin_lr, power;
} spec;

static int parse_spec(const char *text, spec *s)
{
    char buf[1024], *save = NULL, *w;
    snprintf(buf, sizeof buf, "%s", text);
    memset(s, 0, sizeof *s);
    w = strtok_r(buf, " ", &save);
    if (w == NULL)
        return -1;
    snprintf(s->name, sizeof s->name, "%s", w);
    int adamlike = !strcmp(w, "adam") || !strcmp(w, "rmsprop") || !strcmp(w, "adamw") ||
                   !strcmp(w, "lamb");
    s->lr = adamlike ? 0.001 : 0.01;
    s->wd = !strcmp(w, "adamw") ? 0.01 : 0;
    s->lower = s->upper = -1;
    s->bc = 1;
    s->power = 2;
    s->rg = 1;
    s->clip = -1;
    s->b1 = 0.9;
    s->b2 = 0.999;
    s->eps = !strcmp(w, "adagrad") ? 1e-7 : !strcmp(w, "lamb") ? 1e-6 : 1e-8;
    s->g1 = s->g2 = 0.9;
    s->cw = -1;
    s->factor = 1;
    s->stop = 1e-8;
    while ((w = strtok_r(NULL, " ", &save)) != NULL) {
        char *eq = strchr(w, '=');
        if (!eq)
            return -1;
        *eq++ = '\0';
        double v = atof(eq);
        if (!strcmp(w, "learning_rate")) s->lr = v;
        else if (!strcmp(w, "wd")) s->wd = v;
        else if (!strcmp(w, "rescale_grad")) s->rg = v;
        else if (!strcmp(w, "clip_gradient")) s->clip = v;
        else if (!strcmp(w, "momentum")) s->mom = v;
        else if (!strcmp(w, "beta1")) s->b1 = v;
        else if (!strcmp(w, "beta2")) s->b2 = v;
        else if (!strcmp(w, "epsilon") || !strcmp(w, "eps")) s->eps = v;
        else if (!strcmp(w, "gamma1")) s->g1 = v;
        else if (!strcmp(w, "gamma2")) s->g2 = v;
        else if (!strcmp(w, "centered")) s->centered = (int)v;
        else if (!strcmp(w, "clip_weights")) s->cw = v;
        else if (!strcmp(w, "multi_precision")) s->mp = (int)v;
        else if (!strcmp(w, "lr_scheduler"))
            s->sched = !strcmp(eq, "factor") ? 1 : !strcmp(eq, "warmup_cosine") ? 2
                     : !strcmp(eq, "warmup_linear") ? 3 : !strcmp(eq, "poly") ? 4 : -1;
        else if (!strcmp(w, "lower_bound")) s->lower = v;
        else if (!strcmp(w, "upper_bound")) s->upper = v;
        else if (!strcmp(w, "bias_correction")) s->bc = (int)v;
        else if (!strcmp(w, "warmup_steps")) s->warmup = v;
        else if (!strcmp(w, "total_steps")) s->total = v;
        else if (!strcmp(w, "final_lr")) s->final_lr = v;
        else if (!strcmp(w, "warmup_begin_lr")) s->begin_lr = v;
        else if (!strcmp(w, "power")) s->power = v;
        else if (!strcmp(w, "step")) s->step = v;
        else if (!strcmp(w, "factor")) s->factor = v;
        else if (!strcmp(w, "stop_factor_lr")) s->stop = v;
        else return -1;
    }
    return 0;
}

static double clipv(double x, double c)
{
    return c > 0 ? fmin(fmax(x, -c), c) : x;
}

/* One element's state. */
typedef struct ref {
    double w, a, b, c; /* weight; m / h / n; v / s; d */
} ref;

/* The learning rate of update t (kvs.h's schedules). */
static double sched_lr(const spec *s, uint64_t t)
{
    double lr = s->lr, W = s->warmup, T = s->total, x = (double)t;
    if (s->sched == 1) /* FactorScheduler: floor((t-1)/step) reductions, clamped */
        for (uint64_t k = 0; k < (t - 1) / (uint64_t)s->step; k++)
            lr = fmax(lr * s->factor, s->stop);
    if (s->sched >= 2 && x < W)
        lr = s->begin_lr + (s->lr - s->begin_lr) * x / W;
    else if (s->sched >= 2 && x >= T)
        lr = s->final_lr;
    else if (s->sched == 2)
        lr = s->final_lr + (s->lr - s->final_lr) * (1 + cos(M_PI * (x - W) / (T - W))) / 2;
    else if (s->sched == 3)
        lr = s->final_lr + (s->lr - s->final_lr) * (1 - (x - W) / (T - W));
    else if (s->sched == 4)
        lr = s->final_lr + (s->lr - s->final_lr) * pow(1 - (x - W) / (T - W), s->power);
    return lr;
}

/* LAMB update t of a whole key of n elements with gradient sums g. */
static void ref_lamb(const spec *s, ref *e, const double *g, uint64_t n, uint64_t t,
                     double lr_mult, double wd_mult)
{
    double lr = sched_lr(s, t) * lr_mult, wd = s->wd * wd_mult, ws = 0, rs = 0;
    double bc1 = s->bc ? 1 - pow(s->b1, (double)t) : 1, bc2 = s->bc ? 1 - pow(s->b2, (double)t) : 1;
    for (uint64_t i = 0; i < n; i++) {
        double gp = clipv(s->rg * g[i], s->clip);
        e[i].a = s->b1 * e[i].a + (1 - s->b1) * gp;
        e[i].b = s->b2 * e[i].b + (1 - s->b2) * gp * gp;
        e[i].c = (e[i].a / bc1) / (sqrt(e[i].b / bc2) + s->eps) + wd * e[i].w;
        ws += e[i].w * e[i].w;
        rs += e[i].c * e[i].c;
    }
    double r1 = sqrt(ws), r2 = sqrt(rs);
    if (s->lower > 0)
        r1 = fmax(r1, s->lower);
    if (s->upper > 0)
        r1 = fmin(r1, s->upper);
    double ratio = r1 == 0 || r2 == 0 ? 1 : r1 / r2;
    for (uint64_t i = 0; i < n; i++)
        e[i].w -= lr * ratio * e[i].c;
}

/* Update t (from 1) of one element with gradient sum g. */
static void ref_step(const spec *s, ref *e, double g, uint64_t t, double lr_mult, double wd_mult)
{
    double lr = sched_lr(s, t);
    lr *= lr_mult;
    double wd = s->wd * wd_mult, w = e->w;
    if (!strcmp(s->name, "sgd") && s->mom == 0) {
        e->w = w - lr * (clipv(s->rg * g, s->clip) + wd * w);
    } else if (!strcmp(s->name, "sgd")) {
        e->a = s->mom * e->a - lr * (clipv(s->rg * g, s->clip) + wd * w);
        e->w = w + e->a;
    } else if (!strcmp(s->name, "nag")) {
        double gp = clipv(s->rg * g, s->clip) + wd * w;
        e->a = s->mom * e->a + gp;
        e->w = w - lr * (gp + s->mom * e->a);
    } else if (!strcmp(s->name, "adam")) {
        double gp = clipv(s->rg * g, s->clip) + wd * w;
        e->a = s->b1 * e->a + (1 - s->b1) * gp;
        e->b = s->b2 * e->b + (1 - s->b2) * gp * gp;
        double lrt = lr * sqrt(1 - pow(s->b2, (double)t)) / (1 - pow(s->b1, (double)t));
        e->w = w - lrt * e->a / (sqrt(e->b) + s->eps);
    } else if (!strcmp(s->name, "adamw")) { /* torch.optim.AdamW */
        double gp = clipv(s->rg * g, s->clip);
        e->a = s->b1 * e->a + (1 - s->b1) * gp;
        e->b = s->b2 * e->b + (1 - s->b2) * gp * gp;
        double step = lr / (1 - pow(s->b1, (double)t));
        double den = sqrt(e->b) / sqrt(1 - pow(s->b2, (double)t)) + s->eps;
        e->w = w * (1 - lr * wd) - step * (e->a / den);
    } else if (!strcmp(s->name, "adagrad")) {
        double gp = clipv(s->rg * g, s->clip);
        e->a += gp * gp;
        e->w = w - lr * (gp / sqrt(e->a + s->eps) + wd * w);
    } else if (!strcmp(s->name, "rmsprop")) {
        double gp = clipv(s->rg * g + wd * w, s->clip);
        e->a = (1 - s->g1) * gp * gp + s->g1 * e->a;
        if (s->centered) {
            e->b = (1 - s->g1) * gp + s->g1 * e->b;
            e->c = s->g2 * e->c - lr * gp / sqrt(e->a - e->b * e->b + s->eps);
            e->w = w + e->c;
        } else {
            e->w = w - lr * gp / sqrt(e->a + s->eps);
        }
        if (s->cw > 0)
            e->w = clipv(e->w, s->cw);
    }
}

/* ---- the job ---- */

typedef struct job {
    kvs_store *s;
    int nkeys;
    uint64_t ks[NKEYS];
    kvs_array val[NKEYS], out[NKEYS];
    ref *refs[NKEYS];
} job;

static void *xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n ? n : 1, sz);
    if (p == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

static int expect_rc(int rc, int want, const char *call, const char *word)
{
    if (rc != want) {
        say("%s: expected %s, got %s: %s", call, kvs_errname(want), kvs_errname(rc),
            kvs_last_error());
        failures++;
        return 0;
    }
    if (want != 0 && word && !strstr(kvs_last_error(), word)) {
        say("%s: %s does not name '%s': %s", call, kvs_errname(rc), word, kvs_last_error());
        failures++;
        return 0;
    }
    if (want != 0)
        say("%s: %s as expected: %s", call, kvs_errname(rc), kvs_last_error());
    return 1;
}

static void job_open_type(job *j, int half, const char *type)
{
    int rc = kvs_create(type, &j->s);
    if (rc) {
        say("kvs_create: %s: %s", kvs_errname(rc), kvs_last_error());
        exit(1);
    }
    rank = kvs_rank(j->s);
    snprintf(who, sizeof who, "worker %d", rank);
    j->nkeys = half ? NKEYS : NKEYS - 1;
    for (int k = 0; k < j->nkeys; k++) {
        size_t es = kvs_dtype_size(keys[k].dt);
        j->ks[k] = keys[k].key;
        j->val[k] = (kvs_array){xcalloc(keys[k].n, es), keys[k].n, keys[k].dt, KVS_CPU};
        j->out[k] = (kvs_array){xcalloc(keys[k].n, es), keys[k].n, keys[k].dt, KVS_CPU};
        j->refs[k] = xcalloc(keys[k].n, sizeof(ref));
        for (uint64_t i = 0; i < keys[k].n; i++) {
            put(keys[k].dt, j->val[k].data, i, init_w(keys[k].key, i));
            /* the reference starts from the stored (rounded) initial value */
            j->refs[k][i].w = get(keys[k].dt, j->val[k].data, i);
        }
    }
    rc = kvs_init(j->s, (size_t)j->nkeys, j->ks, j->val);
    if (rc) {
        say("kvs_init: %s: %s", kvs_errname(rc), kvs_last_error());
        exit(1);
    }
}

static void job_open(job *j, int half)
{
    job_open_type(j, half, "dist_sync");
}

/* One round r: push this worker's gradients, pull, check against the
 * reference when check (1: updates, 2: plain sums). */
static int round_trip(job *j, const spec *sp, int r, int check, int mult)
{
    for (int k = 0; k < j->nkeys; k++) {
        for (uint64_t i = 0; i < keys[k].n; i++) {
            put(keys[k].dt, j->val[k].data, i, grad(rank, keys[k].key, i, r));
            put(keys[k].dt, j->out[k].data, i, NAN);
        }
    }
    int rc = kvs_pushpull(j->s, (size_t)j->nkeys, j->ks, j->val, j->out, 0);
    if (rc == 0)
        rc = kvs_wait_all(j->s);
    if (rc) {
        say("round %d: %s: %s", r, kvs_errname(rc), kvs_last_error());
        failures++;
        return rc;
    }
    for (int k = 0; k < j->nkeys && check; k++) {
        int bad = 0;
        double tol = keys[k].dt == KVS_FLOAT16 ? 2e-3 : 1e-6;
        int m = mult && keys[k].key == 8;
        if (check == 1 && !strcmp(sp->name, "lamb")) {
            double *gs = xcalloc(keys[k].n, sizeof *gs);
            for (uint64_t i = 0; i < keys[k].n; i++)
                gs[i] = grad(0, keys[k].key, i, r) + grad(1, keys[k].key, i, r);
            ref_lamb(sp, j->refs[k], gs, keys[k].n, (uint64_t)r + 1, m ? 0.5 : 1, m ? 0 : 1);
            free(gs);
        }
        for (uint64_t i = 0; i < keys[k].n; i++) {
            double g = grad(0, keys[k].key, i, r) + grad(1, keys[k].key, i, r), want;
            ref *e = &j->refs[k][i];
            if (check == 2) {
                want = g;
            } else {
                if (strcmp(sp->name, "lamb") != 0)
                    ref_step(sp, e, g, (uint64_t)r + 1, m ? 0.5 : 1, m ? 0 : 1);
                want = e->w;
                if (keys[k].dt == KVS_FLOAT16 && !sp->mp) /* the weight lives in float16 */
                    e->w = f16_to_f32(f32_to_f16((float)e->w));
            }
            double got = get(keys[k].dt, j->out[k].data, i);
            double err = fabs(got - want) / fmax(fabs(want), 1e-30);
            if (!(err <= tol) && bad++ < 3)
                say("MISMATCH %s round %d key %llu (%s) index %llu: got %.17g expected %.17g "
                    "(relative error %.3g > %g)", sp->name, r, (unsigned long long)keys[k].key,
                    kvs_dtype_name(keys[k].dt), (unsigned long long)i, got, want, err, tol);
        }
        failures += bad;
    }
    return 0;
}

static void dump(job *j, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", getenv("KVS_TEST_DIR") ? getenv("KVS_TEST_DIR") : ".",
             name);
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        say("cannot write %s: %s", path, strerror(errno));
        failures++;
        return;
    }
    for (int k = 0; k < j->nkeys; k++)
        fwrite(j->out[k].data, kvs_dtype_size(keys[k].dt), keys[k].n, f);
    fclose(f);
}

static void touch(const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", getenv("KVS_TEST_DIR") ? getenv("KVS_TEST_DIR") : ".",
             name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0)
        close(fd);
}

/* v as n little-endian bytes at p. */
static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static int train(int argc, char **argv)
{
    const char *spec_text = NULL, *save_dir = NULL, *load_dir = NULL, *dump_name = NULL;
    int rounds = 6, from = 0, mult = 0, half = 0, sums = 0, save_at = -1, hang = 0;
    int save2_at = -1, crash_save = 0, save_end = 0, dump_rounds = 0, split_refused = 0;
    const char *pull_dump = NULL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--spec") && v) spec_text = argv[++i];
        else if (!strcmp(a, "--rounds") && v) rounds = atoi(argv[++i]);
        else if (!strcmp(a, "--from") && v) from = atoi(argv[++i]);
        else if (!strcmp(a, "--save-at") && v) save_at = atoi(argv[++i]);
        else if (!strcmp(a, "--save-dir") && v) save_dir = argv[++i];
        else if (!strcmp(a, "--load") && v) load_dir = argv[++i];
        else if (!strcmp(a, "--dump") && v) dump_name = argv[++i];
        else if (!strcmp(a, "--mult")) mult = 1;
        else if (!strcmp(a, "--half")) half = 1;
        else if (!strcmp(a, "--sums")) sums = 1;
        else if (!strcmp(a, "--hang-after-save")) hang = 1;
        else if (!strcmp(a, "--save2-at") && v) save2_at = atoi(argv[++i]);
        else if (!strcmp(a, "--crash-save")) crash_save = 1;
        else if (!strcmp(a, "--pull-dump") && v) pull_dump = argv[++i];
        else if (!strcmp(a, "--save-end")) save_end = 1;
        else if (!strcmp(a, "--dump-rounds")) dump_rounds = 1;
        else if (!strcmp(a, "--split-refused")) split_refused = 1;
        else {
            fprintf(stderr, "kvs-optworker train: bad argument '%s'\n", a);
            return 2;
        }
    }
    spec sp;
    if (spec_text == NULL || parse_spec(spec_text, &sp) != 0 || rounds > MAXR) {
        fprintf(stderr, "kvs-optworker train: --spec missing or not understood\n");
        return 2;
    }
    job j = {0};
    if (split_refused)
        job_open_type(&j, half, "dist_async");
    else
        job_open(&j, half);
    if (split_refused) { /* keys 11 and 20 are split */
        expect_rc(kvs_set_optimizer(j.s, spec_text), KVS_ENOTSUP, "kvs_set_optimizer",
                  "split over servers");
        int rc = kvs_close(j.s);
        CHECK(rc == 0, "kvs_close: %s: %s", kvs_errname(rc), kvs_last_error());
        return failures ? 1 : 0;
    }
    expect_rc(kvs_set_optimizer(j.s, spec_text), 0, "kvs_set_optimizer", NULL);
    if (mult)
        expect_rc(kvs_set_optimizer_key(j.s, 8, "lr_mult=0.5 wd_mult=0"), 0,
                  "kvs_set_optimizer_key", NULL);
    if (load_dir) {
        expect_rc(kvs_load(j.s, load_dir), 0, "kvs_load", NULL);
        /* the same spec again is fine after pushes began; another is not */
        expect_rc(kvs_set_optimizer(j.s, spec_text), 0, "kvs_set_optimizer (same, after load)",
                  NULL);
        char other[1200];
        snprintf(other, sizeof other, "%s learning_rate=0.123", sp.name);
        expect_rc(kvs_set_optimizer(j.s, other), KVS_EINVAL, "kvs_set_optimizer (other)",
                  "learning_rate=0.123");
    }
    for (int r = from; r < rounds && failures == 0; r++) {
        round_trip(&j, &sp, r, load_dir ? 0 : sums ? 2 : 1, mult);
        if (dump_rounds && rank == 0) {
            char name[64];
            snprintf(name, sizeof name, "round%d.bin", r + 1);
            dump(&j, name);
        }
        if (crash_save && r + 1 == save_at) {
            if (rank == 0)
                dump(&j, "save1.bin");
            expect_rc(kvs_save(j.s, save_dir), 0, "kvs_save", NULL);
        }
        if (crash_save && r + 1 == save2_at) {
            if (rank == 0)
                dump(&j, "save2.bin");
            int rc = kvs_save(j.s, save_dir);
            say("the save a server dies in: %s: %s", kvs_errname(rc), kvs_last_error());
            char name[64];
            snprintf(name, sizeof name, "crashed-w%d", rank);
            touch(name);
            for (;;)
                pause(); /* the test kills the whole job now */
        }
        if (!crash_save && r + 1 == save_at) {
            struct timespec t0, t1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            expect_rc(kvs_save(j.s, save_dir), 0, "kvs_save", NULL);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            say("kvs_save took %.3f ms", (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
                                             (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
            if (hang) {
                char name[64];
                snprintf(name, sizeof name, "saved-w%d", rank);
                touch(name);
                for (;;)
                    pause(); /* the test kills the whole job now */
            }
        }
    }
    if (pull_dump) {
        int rc = kvs_pull(j.s, (size_t)j.nkeys, j.ks, j.out, 0);
        if (rc == 0)
            rc = kvs_wait_all(j.s);
        CHECK(rc == 0, "pull after the load: %s: %s", kvs_errname(rc), kvs_last_error());
        if (rank == 0)
            dump(&j, pull_dump);
    }
    if (save_end)
        expect_rc(kvs_save(j.s, save_dir), 0, "kvs_save at the end", NULL);
    if (dump_name && rank == 0)
        dump(&j, dump_name);
    int rc = kvs_close(j.s);
    CHECK(rc == 0, "kvs_close: %s: %s", kvs_errname(rc), kvs_last_error());
    say("%s: %d rounds %s, %d problems", spec_text, rounds - from,
        load_dir ? "after a load" : sums ? "of plain sums" : "checked", failures);
    return failures ? 1 : 0;
}

/* ---- errors ---- */

static void flip_byte(const char *path, long off)
{
    int fd = open(path, O_RDWR);
    unsigned char b;
    if (fd < 0 || pread(fd, &b, 1, off) != 1) {
        say("cannot open %s: %s", path, strerror(errno));
        failures++;
    } else {
        b ^= 0x5a;
        if (pwrite(fd, &b, 1, off) != 1)
            failures++;
    }
    if (fd >= 0)
        close(fd);
}

static void copy_file(const char *from, const char *to)
{
    char buf[1 << 16];
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    size_t n;
    if (a == NULL || b == NULL) {
        say("cannot copy %s to %s", from, to);
        failures++;
    }
    while (a && b && (n = fread(buf, 1, sizeof buf, a)) > 0)
        fwrite(buf, 1, n, b);
    if (a)
        fclose(a);
    if (b)
        fclose(b);
}

/* The pulled weights equal what they were after round r's pull. */
static void expect_unchanged(job *j, kvs_array *before, const char *what)
{
    kvs_array now[NKEYS];
    for (int k = 0; k < j->nkeys; k++) {
        now[k] = j->out[k];
        now[k].data = xcalloc(keys[k].n, kvs_dtype_size(keys[k].dt));
    }
    int rc = kvs_pull(j->s, (size_t)j->nkeys, j->ks, now, 0);
    if (rc == 0)
        rc = kvs_wait_all(j->s);
    CHECK(rc == 0, "pull after %s: %s: %s", what, kvs_errname(rc), kvs_last_error());
    for (int k = 0; k < j->nkeys; k++) {
        CHECK(memcmp(now[k].data, before[k].data, keys[k].n * kvs_dtype_size(keys[k].dt)) == 0,
              "key %llu changed after %s (half-loaded?)", (unsigned long long)keys[k].key, what);
        free(now[k].data);
    }
}

static int errors(int argc, char **argv)
{
    const char *dir = argc > 3 && !strcmp(argv[2], "--dir") ? argv[3] : NULL;
    char d1[4096], d2[4096], d3[4096], p[8300], q[8300];
    spec sp;
    job j = {0};
    if (dir == NULL) {
        fprintf(stderr, "kvs-optworker errors --dir D\n");
        return 2;
    }
    snprintf(d1, sizeof d1, "%s/one", dir);
    snprintf(d2, sizeof d2, "%s/two", dir);
    snprintf(d3, sizeof d3, "%s/three", dir);
    job_open(&j, 0);
    /* bad specs: KVS_EINVAL naming the word, on every worker */
    expect_rc(kvs_set_optimizer(j.s, "sgdx learning_rate=0.1"), KVS_EINVAL, "bad name", "sgdx");
    expect_rc(kvs_set_optimizer(j.s, "sgd momentum=1.5"), KVS_EINVAL, "bad value",
              "momentum=1.5");
    expect_rc(kvs_set_optimizer(j.s, "adam foo=1"), KVS_EINVAL, "unknown setting", "foo=1");
    expect_rc(kvs_set_optimizer(j.s, "sgd learning_rate=abc"), KVS_EINVAL, "not a number",
              "learning_rate=abc");
    expect_rc(kvs_set_optimizer(j.s, "sgd step=2"), KVS_EINVAL, "step alone", "step");
    expect_rc(kvs_set_optimizer(j.s, "sgd lr_scheduler=cosine step=2"), KVS_EINVAL,
              "unknown scheduler", "lr_scheduler=cosine");
    expect_rc(kvs_set_optimizer(j.s, "sgd wd=1 wd=2"), KVS_EINVAL, "twice", "wd=2");
    expect_rc(kvs_set_optimizer(j.s, "adam momentum=0.9"), KVS_EINVAL, "not adam's",
              "momentum=0.9");
    expect_rc(kvs_set_optimizer(j.s, ""), KVS_EINVAL, "empty", "empty");
    expect_rc(kvs_set_optimizer_key(j.s, 3, "lr_mult=-1"), KVS_EINVAL, "bad multiplier",
              "lr_mult=-1");
    expect_rc(kvs_set_optimizer_key(j.s, 3, "momentum=1"), KVS_EINVAL, "bad key setting",
              "momentum=1");
    const char *spec_text = "sgd learning_rate=0.002 momentum=0.9";
    parse_spec(spec_text, &sp);
    expect_rc(kvs_set_optimizer(j.s, spec_text), 0, "kvs_set_optimizer", NULL);
    /* an int key cannot be updated */
    {
        uint64_t ik = 77;
        int32_t iv[4] = {1, 2, 3, 4};
        kvs_array ia = {iv, 4, KVS_INT32, KVS_CPU};
        expect_rc(kvs_init(j.s, 1, &ik, &ia), KVS_ESHAPE, "init of an int32 key", "int32");
    }
    for (int r = 0; r < 2; r++)
        round_trip(&j, &sp, r, 1, 0);
    expect_rc(kvs_set_optimizer(j.s, "sgd learning_rate=0.003 momentum=0.9"), KVS_EINVAL,
              "another spec after pushes", "learning_rate=0.003");
    expect_rc(kvs_set_optimizer(j.s, spec_text), 0, "the same spec after pushes", NULL);
    expect_rc(kvs_save(j.s, d1), 0, "kvs_save one", NULL);
    round_trip(&j, &sp, 2, 1, 0);
    expect_rc(kvs_save(j.s, d2), 0, "kvs_save two", NULL);
    expect_rc(kvs_save(j.s, d3), 0, "kvs_save three", NULL);
    kvs_array before3[NKEYS]; /* the weights d2 and d3 hold */
    for (int k = 0; k < j.nkeys; k++) {
        before3[k] = j.out[k];
        before3[k].data = xcalloc(keys[k].n, kvs_dtype_size(keys[k].dt));
        memcpy(before3[k].data, j.out[k].data, keys[k].n * kvs_dtype_size(keys[k].dt));
    }
    round_trip(&j, &sp, 3, 1, 0);
    /* now the weights are those of round 3: every failed load leaves them */
    kvs_array before[NKEYS];
    for (int k = 0; k < j.nkeys; k++) {
        before[k] = j.out[k];
        before[k].data = xcalloc(keys[k].n, kvs_dtype_size(keys[k].dt));
        memcpy(before[k].data, j.out[k].data, keys[k].n * kvs_dtype_size(keys[k].dt));
    }
    /* a save while a round is in progress: worker 0 pushed, worker 1 not yet */
    if (rank == 0) {
        kvs_push(j.s, 1, &j.ks[0], &j.val[0], 0);
    }
    expect_rc(kvs_save(j.s, d1), KVS_EINVAL, "save during a round", "in progress");
    if (rank == 1)
        kvs_push(j.s, 1, &j.ks[0], &j.val[0], 0);
    expect_rc(kvs_wait_all(j.s), 0, "the round completes", NULL);
    {
        /* that round moved key 3; read it back as the new 'before' */
        int rc = kvs_pull(j.s, 1, &j.ks[0], &before[0], 0);
        if (rc == 0)
            rc = kvs_wait_all(j.s);
        CHECK(rc == 0, "pull: %s", kvs_last_error());
    }
    expect_rc(kvs_barrier(j.s), 0, "barrier", NULL);
    /* every save went into a fresh directory: generation 1 */
    {
        char g[4200];
        snprintf(g, sizeof g, "%s/gen-000000000001/server-0.kvsckpt", d1);
        CHECK(access(g, F_OK) == 0, "%s is missing", g);
        snprintf(g, sizeof g, "%s/gen-000000000002", d1);
        CHECK(access(g, F_OK) != 0, "%s is there: the save during a round wrote", g);
    }
    /* corrupted: one byte of server 1's file; server 0's is fine */
    snprintf(p, sizeof p, "%s/gen-000000000001/server-1.kvsckpt", d2);
    snprintf(q, sizeof q, "%s/gen-000000000001/server-1.kvsckpt.good", d2);
    if (rank == 0) {
        copy_file(p, q);
        flip_byte(p, 200);
    }
    expect_rc(kvs_barrier(j.s), 0, "barrier", NULL);
    expect_rc(kvs_load(j.s, d2), KVS_EPROTO, "load of a corrupted file", "server-1.kvsckpt");
    expect_unchanged(&j, before, "a corrupted load");
    /* truncated */
    expect_rc(kvs_barrier(j.s), 0, "barrier", NULL);
    if (rank == 0) {
        copy_file(q, p);
        snprintf(q, sizeof q, "%s/gen-000000000001/server-0.kvsckpt", d2);
        if (truncate(q, 150) != 0)
            failures++;
    }
    expect_rc(kvs_barrier(j.s), 0, "barrier", NULL);
    expect_rc(kvs_load(j.s, d2), KVS_EPROTO, "load of a truncated file", "server-0.kvsckpt");
    expect_unchanged(&j, before, "a truncated load");
    /* missing */
    expect_rc(kvs_load(j.s, "/nonexistent-kvs-dir"), KVS_EPROTO, "load of a missing dir",
              "server-");
    /* a FIFO (any non-regular file) where a manifest or a checkpoint file
     * is expected: refused at once, not waited on forever */
    {
        char d4[4200], g4[4300], f[4400];
        snprintf(d4, sizeof d4, "%s/fifo", dir);
        snprintf(g4, sizeof g4, "%s/gen-000000000001", d4);
        if (rank == 0) {
            if (mkdir(d4, 0755) != 0 || mkdir(g4, 0755) != 0)
                failures++;
            for (int i = 0; i < 2; i++) {
                snprintf(f, sizeof f, "%s/server-%d.manifest", d4, i);
                if (mkfifo(f, 0644) != 0)
                    failures++;
                snprintf(f, sizeof f, "%s/server-%d.kvsckpt", g4, i);
                if (mkfifo(f, 0644) != 0)
                    failures++;
            }
        }
        expect_rc(kvs_barrier(j.s), 0, "barrier", NULL);
        expect_rc(kvs_load(j.s, d4), KVS_EPROTO, "load with FIFO manifests", "not a regular file");
        expect_rc(kvs_load(j.s, g4), KVS_EPROTO, "load of FIFO checkpoint files",
                  "not a regular file");
        expect_unchanged(&j, before, "a load of FIFOs");
    }
    /* a sparse file declaring 3 GiB (a few KiB on disk): one entry of
     * nearly 3 GiB of float32 for this job's first key.  Refused as more
     * than the job's keys hold, before the server allocates it; server 1's
     * file is a good one. */
    {
        char d5[4200], f[4400];
        const uint64_t size = 3ull << 30, vbytes = (size - 64 - 80 - 16) & ~3ull;
        snprintf(d5, sizeof d5, "%s/sparse", dir);
        if (rank == 0) {
            uint8_t h[64 + 80] = {0};
            memcpy(h, "KVSCKPT1", 8);
            put_le(h + 8, 1, 4);                /* format version */
            put_le(h + 16, 2, 4);               /* servers */
            put_le(h + 20, 2, 4);               /* workers */
            put_le(h + 24, 0x5ba75e, 8);        /* save id */
            put_le(h + 32, 1, 8);               /* entries */
            put_le(h + 40, size, 8);            /* the file's size */
            uint8_t *e = h + 64;
            put_le(e, j.ks[0], 8);
            put_le(e + 12, KVS_FLOAT32, 4);
            put_le(e + 16, vbytes / 4, 8);      /* count */
            put_le(e + 32, vbytes / 4, 8);      /* total */
            put_le(e + 64, vbytes, 8);
            snprintf(f, sizeof f, "%s/server-0.kvsckpt", d5);
            int fd = -1;
            if (mkdir(d5, 0755) != 0 || (fd = open(f, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0 ||
                write(fd, h, sizeof h) != (ssize_t)sizeof h || ftruncate(fd, (off_t)size) != 0)
                failures++;
            if (fd >= 0)
                close(fd);
            snprintf(p, sizeof p, "%s/gen-000000000001/server-1.kvsckpt", d3);
            snprintf(q, sizeof q, "%s/server-1.kvsckpt", d5);
            copy_file(p, q);
        }
        expect_rc(kvs_barrier(j.s), 0, "barrier", NULL);
        expect_rc(kvs_load(j.s, d5), KVS_ESHAPE, "load of a sparse file declaring 3 GiB",
                  "more than this job's keys");
        expect_unchanged(&j, before, "a load of a sparse file");
    }
    /* files of two saves mixed */
    expect_rc(kvs_barrier(j.s), 0, "barrier", NULL);
    if (rank == 0) {
        snprintf(p, sizeof p, "%s/gen-000000000001/server-1.kvsckpt", d1);
        snprintf(q, sizeof q, "%s/gen-000000000001/server-1.kvsckpt", d2);
        copy_file(q, p);
    }
    expect_rc(kvs_barrier(j.s), 0, "barrier", NULL);
    expect_rc(kvs_load(j.s, d1), KVS_EPROTO, "load of mixed saves", "different saves");
    expect_unchanged(&j, before, "a mixed load");
    /* manifests of two saves mixed: no generation committed everywhere */
    expect_rc(kvs_barrier(j.s), 0, "barrier", NULL);
    if (rank == 0) {
        snprintf(p, sizeof p, "%s/server-1.manifest", d1);
        snprintf(q, sizeof q, "%s/server-1.manifest", d2);
        copy_file(q, p);
    }
    expect_rc(kvs_barrier(j.s), 0, "barrier", NULL);
    expect_rc(kvs_load(j.s, d1), KVS_EPROTO, "load of mixed manifests",
              "no checkpoint generation is committed on every server");
    expect_unchanged(&j, before, "a load of mixed manifests");
    /* a corrupted manifest: KVS_EPROTO naming it */
    expect_rc(kvs_barrier(j.s), 0, "barrier", NULL);
    if (rank == 0) {
        snprintf(p, sizeof p, "%s/server-0.manifest", d1);
        flip_byte(p, 30);
    }
    expect_rc(kvs_barrier(j.s), 0, "barrier", NULL);
    expect_rc(kvs_load(j.s, d1), KVS_EPROTO, "load with a corrupted manifest",
              "server-0.manifest");
    expect_unchanged(&j, before, "a load with a corrupted manifest");
    /* a generation's directory itself loads (its files are the whole save) */
    {
        char g[4200];
        snprintf(g, sizeof g, "%s/gen-000000000001", d3);
        expect_rc(kvs_load(j.s, g), 0, "load of a generation's directory", NULL);
        expect_unchanged(&j, before3, "a load of round 3's save");
        for (int k = 0; k < j.nkeys; k++)
            memcpy(before[k].data, before3[k].data, keys[k].n * kvs_dtype_size(keys[k].dt));
    }
    /* shape: a key this job has and the checkpoint lacks */
    {
        uint64_t nk = 99;
        float nv[5] = {1, 2, 3, 4, 5};
        kvs_array na = {nv, 5, KVS_FLOAT32, KVS_CPU};
        expect_rc(kvs_init(j.s, 1, &nk, &na), 0, "init of key 99", NULL);
    }
    expect_rc(kvs_load(j.s, d3), KVS_ESHAPE, "load into another shape", "key 99");
    expect_unchanged(&j, before, "a shape mismatch");
    int rc = kvs_close(j.s);
    CHECK(rc == 0, "kvs_close: %s: %s", kvs_errname(rc), kvs_last_error());
    say("errors: %d problems", failures);
    return failures ? 1 : 0;
}

/* dist_async: every push is one update.  With sgd (no momentum, no wd, no
 * clip) the order does not matter but for rounding: after every worker's
 * pushes, w = w0 - lr*rescale_grad*(sum of all pushes). */
static int async_sgd(void)
{
    const double lr = 0.01, rg = 0.5;
    const int rounds = 5;
    job j = {0};
    job_open_type(&j, 0, "dist_async");
    expect_rc(kvs_set_optimizer(j.s, "sgd learning_rate=0.01 rescale_grad=0.5"), 0,
              "kvs_set_optimizer", NULL);
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < j.nkeys; k++)
            for (uint64_t i = 0; i < keys[k].n; i++)
                put(keys[k].dt, j.val[k].data, i, grad(rank, keys[k].key, i, r));
        int rc = kvs_push(j.s, (size_t)j.nkeys, j.ks, j.val, 0);
        if (rc == 0)
            rc = kvs_wait_all(j.s);
        CHECK(rc == 0, "push %d: %s: %s", r, kvs_errname(rc), kvs_last_error());
    }
    expect_rc(kvs_barrier(j.s), 0, "barrier", NULL);
    int rc = kvs_pull(j.s, (size_t)j.nkeys, j.ks, j.out, 0);
    if (rc == 0)
        rc = kvs_wait_all(j.s);
    CHECK(rc == 0, "pull: %s: %s", kvs_errname(rc), kvs_last_error());
    for (int k = 0; k < j.nkeys; k++) {
        int bad = 0;
        for (uint64_t i = 0; i < keys[k].n; i++) {
            double want = j.refs[k][i].w;
            for (int w = 0; w < 2; w++)
                for (int r = 0; r < rounds; r++)
                    want -= lr * rg * grad(w, keys[k].key, i, r);
            double got = get(keys[k].dt, j.out[k].data, i);
            if (!(fabs(got - want) <= 1e-6 * fabs(want)) && bad++ < 3)
                say("MISMATCH async key %llu index %llu: got %.17g expected %.17g",
                    (unsigned long long)keys[k].key, (unsigned long long)i, got, want);
        }
        failures += bad;
    }
    rc = kvs_close(j.s);
    CHECK(rc == 0, "kvs_close: %s: %s", kvs_errname(rc), kvs_last_error());
    say("async sgd: %d problems", failures);
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "async"))
        return async_sgd();
    if (argc >= 2 && !strcmp(argv[1], "train"))
        return train(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "errors"))
        return errors(argc, argv);
    fprintf(stderr, "usage: kvs-optworker train --spec SPEC [--rounds N] [--from R] [--mult] "
            "[--half] [--sums] [--save-at R --save-dir D] [--load D] [--dump FILE] "
            "[--hang-after-save]\n       kvs-optworker errors --dir D\n"
            "       kvs-optworker async\n");
    return argc >= 2 && !strcmp(argv[1], "--help") ? 0 : 2;
}
