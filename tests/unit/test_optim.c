/* test_optim.c - optim/: spec parsing (every error names its word), the
 * canonical text, the schedule, and the update kernels against kvs.h's
 * formulas computed here in float64 (bit-identical whatever the chunking). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim.h"

static optim_spec parse_ok(const char *text)
{
    optim_spec o;
    char why[512] = "";
    int rc = optim_parse(text, &o, why, sizeof why);
    ck_assert_msg(rc == 0, "'%s': %s", text, why);
    return o;
}

START_TEST(defaults_and_text)
{
    char buf[OPTIM_TEXT_MAX];
    optim_spec o = parse_ok("adam");
    ck_assert(o.kind == OPTIM_ADAM);
    ck_assert(o.learning_rate == 0.001 && o.beta1 == 0.9 && o.beta2 == 0.999);
    ck_assert(o.epsilon == 1e-8 && o.rescale_grad == 1 && o.clip_gradient < 0);
    optim_format(&o, buf, sizeof buf);
    ck_assert_str_eq(buf, "adam learning_rate=0.001 wd=0 rescale_grad=1 clip_gradient=-1 "
                          "multi_precision=0 beta1=0.9 beta2=0.999 epsilon=1e-08");
    o = parse_ok("  sgd\tlearning_rate=0.1   momentum=0.9 wd=1e-4 lr_scheduler=factor step=3 ");
    ck_assert(o.kind == OPTIM_SGD && o.momentum == 0.9 && o.wd == 1e-4 && o.sched == OPTIM_SCHED_FACTOR);
    ck_assert(o.step == 3 && o.factor == 1 && o.stop_factor_lr == 1e-8);
    optim_format(&o, buf, sizeof buf);
    /* the canonical text parses to the same spec and prints the same */
    optim_spec p = parse_ok(buf);
    char again[OPTIM_TEXT_MAX];
    optim_format(&p, again, sizeof again);
    ck_assert_str_eq(buf, again);
    ck_assert(parse_ok("adagrad").epsilon == 1e-7);
    ck_assert(parse_ok("adagrad eps=1e-6").epsilon == 1e-6);
    ck_assert(parse_ok("rmsprop centered=1").centered);
    ck_assert(parse_ok("nag multi_precision=true").multi_precision);
}
END_TEST

START_TEST(errors_name_the_word)
{
    static const struct { const char *spec, *word; } bad[] = {
        {"", "empty"}, {"   ", "empty"}, {"sgdx", "'sgdx'"}, {"sgd lr=0.1", "'lr=0.1'"},
        {"sgd momentum=1", "'momentum=1'"}, {"sgd momentum=-0.1", "'momentum=-0.1'"},
        {"sgd learning_rate=-1", "'learning_rate=-1'"}, {"sgd learning_rate=nan", "nan"},
        {"sgd learning_rate=inf", "inf"}, {"sgd learning_rate=1e999", "1e999"},
        {"sgd wd=", "'wd='"}, {"sgd =3", "'=3'"}, {"sgd wd", "'wd'"},
        {"sgd wd=1 wd=1", "'wd=1'"}, {"adagrad eps=1 epsilon=2", "epsilon=2"},
        {"adam momentum=0.5", "'momentum=0.5'"}, {"sgd beta1=0.5", "'beta1=0.5'"},
        {"adam epsilon=0", "'epsilon=0'"}, {"adam beta2=1", "'beta2=1'"},
        {"rmsprop centered=2", "'centered=2'"}, {"sgd multi_precision=yes", "yes"},
        {"sgd factor=0.5", "factor"},
        {"sgd lr_scheduler=factor", "step=N"}, {"sgd lr_scheduler=factor step=0", "step=0"},
        {"sgd lr_scheduler=factor step=2 factor=1.5", "factor=1.5"},
        {"sgd lr_scheduler=factor step=2.5", "step=2.5"}, {"sgd wd=1x", "'wd=1x'"},
        {"adamw momentum=0.9", "'momentum=0.9'"}, {"adamw beta1=1", "'beta1=1'"},
        {"adamw epsilon=-1", "'epsilon=-1'"}, {"adamw lower_bound=1", "'lower_bound=1'"},
        {"lamb beta2=1.5", "'beta2=1.5'"}, {"lamb bias_correction=2", "'bias_correction=2'"},
        {"lamb upper_bound=x", "'upper_bound=x'"}, {"lamb lower_bound=1 lower_bound=2", "twice"},
        {"sgd centered=1", "'centered=1'"}, {"sgd lr_scheduler=cosine", "'lr_scheduler=cosine'"},
        {"sgd lr_scheduler=warmup_cosine", "total_steps=N"},
        {"adam lr_scheduler=poly warmup_steps=5", "total_steps=N"},
        {"adam lr_scheduler=warmup_linear total_steps=0", "'total_steps=0'"},
        {"adam lr_scheduler=warmup_linear total_steps=10 warmup_steps=10", "'warmup_steps=10'"},
        {"adam lr_scheduler=warmup_linear total_steps=10 warmup_steps=-1", "'warmup_steps=-1'"},
        {"adam lr_scheduler=warmup_cosine total_steps=10 power=2", "'power'"},
        {"adam lr_scheduler=poly total_steps=10 power=0", "'power=0'"},
        {"adam lr_scheduler=poly total_steps=10 final_lr=-1", "'final_lr=-1'"},
        {"adam total_steps=10", "'total_steps'"}, {"adam final_lr=0.1", "'final_lr'"},
        {"adam warmup_steps=3", "'warmup_steps'"}, {"adam power=3", "'power'"},
        {"sgd lr_scheduler=factor step=2 total_steps=4", "'total_steps'"},
        {"sgd lr_scheduler=poly total_steps=4 step=2", "'step'"},
        {"adam lr_scheduler=poly total_steps=4 lr_scheduler=poly", "twice"},
        {"lamb lr_scheduler=poly total_steps=1e3", "'total_steps=1e3'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        optim_spec o;
        char why[512] = "";
        ck_assert_int_eq(optim_parse(bad[i].spec, &o, why, sizeof why), KVS_EINVAL);
        ck_assert_msg(strstr(why, bad[i].word) != NULL, "'%s': '%s' does not name %s",
                      bad[i].spec, why, bad[i].word);
    }
    char why[512];
    optim_spec o;
    ck_assert_int_eq(optim_parse(NULL, &o, why, sizeof why), KVS_EINVAL);
}
END_TEST

START_TEST(diff_and_mult)
{
    char a[OPTIM_TEXT_MAX], b[OPTIM_TEXT_MAX], why[256];
    optim_spec x = parse_ok("sgd learning_rate=0.1 momentum=0.9");
    optim_spec y = parse_ok("sgd momentum=0.9 learning_rate=0.1");
    optim_format(&x, a, sizeof a);
    optim_format(&y, b, sizeof b);
    ck_assert_ptr_null(optim_diff(a, b, why, sizeof why));
    y = parse_ok("sgd momentum=0.8 learning_rate=0.1");
    optim_format(&y, b, sizeof b);
    ck_assert_ptr_nonnull(optim_diff(a, b, why, sizeof why));
    ck_assert_msg(strstr(why, "'momentum=0.8'") && strstr(why, "'momentum=0.9'"), "%s", why);
    optim_mult m;
    ck_assert_int_eq(optim_parse_mult("lr_mult=0.1 wd_mult=0", &m, why, sizeof why), 0);
    ck_assert(m.lr_mult == 0.1 && m.wd_mult == 0);
    ck_assert_int_eq(optim_parse_mult("wd_mult=2", &m, why, sizeof why), 0);
    ck_assert(m.lr_mult == 1 && m.wd_mult == 2);
    ck_assert_int_eq(optim_parse_mult("lr_mult=x", &m, why, sizeof why), KVS_EINVAL);
    ck_assert(strstr(why, "lr_mult=x"));
    ck_assert_int_eq(optim_parse_mult("lr_mult=1 lr_mult=2", &m, why, sizeof why), KVS_EINVAL);
    ck_assert_int_eq(optim_parse_mult("beta=1", &m, why, sizeof why), KVS_EINVAL);
    ck_assert(strstr(why, "beta=1"));
}
END_TEST

START_TEST(new_defaults_and_text)
{
    char buf[OPTIM_TEXT_MAX], again[OPTIM_TEXT_MAX];
    optim_spec o = parse_ok("adamw");
    ck_assert(o.kind == OPTIM_ADAMW && o.learning_rate == 0.001 && o.wd == 0.01);
    ck_assert(o.beta1 == 0.9 && o.beta2 == 0.999 && o.epsilon == 1e-8);
    optim_format(&o, buf, sizeof buf);
    ck_assert_str_eq(buf, "adamw learning_rate=0.001 wd=0.01 rescale_grad=1 clip_gradient=-1 "
                          "multi_precision=0 beta1=0.9 beta2=0.999 epsilon=1e-08");
    o = parse_ok("lamb");
    ck_assert(o.kind == OPTIM_LAMB && o.learning_rate == 0.001 && o.wd == 0);
    ck_assert(o.epsilon == 1e-6 && o.bias_correction && o.lower_bound < 0 && o.upper_bound < 0);
    optim_format(&o, buf, sizeof buf);
    ck_assert_str_eq(buf, "lamb learning_rate=0.001 wd=0 rescale_grad=1 clip_gradient=-1 "
                          "multi_precision=0 beta1=0.9 beta2=0.999 epsilon=1e-06 "
                          "lower_bound=-1 upper_bound=-1 bias_correction=1");
    o = parse_ok("sgd lr_scheduler=poly total_steps=100 warmup_steps=10 power=3 final_lr=0.001");
    ck_assert(o.sched == OPTIM_SCHED_POLY && o.total_steps == 100 && o.warmup_steps == 10);
    ck_assert(o.power == 3 && o.final_lr == 0.001 && o.warmup_begin_lr == 0);
    optim_format(&o, buf, sizeof buf);
    ck_assert_str_eq(buf, "sgd learning_rate=0.01 wd=0 rescale_grad=1 clip_gradient=-1 "
                          "multi_precision=0 momentum=0 lr_scheduler=poly warmup_steps=10 "
                          "total_steps=100 final_lr=0.001 warmup_begin_lr=0 power=3");
    static const char *const round_trip[] = {
        "lamb wd=0.01 lower_bound=0.5 upper_bound=10 bias_correction=0 lr_scheduler="
        "warmup_cosine warmup_steps=2 total_steps=9 warmup_begin_lr=0.0001",
        "adamw lr_scheduler=warmup_linear total_steps=5", "rmsprop lr_scheduler=poly total_steps=7",
    };
    for (size_t i = 0; i < sizeof round_trip / sizeof round_trip[0]; i++) {
        o = parse_ok(round_trip[i]);
        optim_format(&o, buf, sizeof buf);
        optim_spec p = parse_ok(buf);
        optim_format(&p, again, sizeof again);
        ck_assert_str_eq(buf, again);
        ck_assert(memcmp(&o, &p, sizeof o) == 0);
    }
    ck_assert_int_eq(optim_nstate(&o, KVS_FLOAT32), 1);
    ck_assert_int_eq(optim_nstate(&(optim_spec){.kind = OPTIM_ADAMW}, KVS_FLOAT32), 2);
    o = parse_ok("lamb multi_precision=1");
    ck_assert_int_eq(optim_nstate(&o, KVS_FLOAT16), 3);
    ck_assert(optim_two_phase(&o) && !optim_two_phase(&(optim_spec){.kind = OPTIM_ADAMW}));
}
END_TEST

/* MXNet's CosineScheduler / PolyScheduler with linear warmup, written out
 * here from lr_scheduler.py for every update t. */
static double sched_ref(const char *kind, double base, double begin, double fin, double pwr,
                        double W, double T, double t)
{
    if (t < W)
        return begin + (base - begin) * t / W;
    if (t >= T)
        return fin;
    if (!strcmp(kind, "cos"))
        return fin + (base - fin) * (1 + cos(M_PI * (t - W) / (T - W))) / 2;
    return fin + (base - fin) * pow(1 - (t - W) / (T - W), pwr);
}

START_TEST(decay_schedules)
{
    optim_spec o = parse_ok("adam learning_rate=0.1 lr_scheduler=warmup_cosine warmup_steps=4 "
                            "total_steps=12 final_lr=0.01 warmup_begin_lr=0.02");
    /* exact points: the warmup's start and end, the middle of the decay, the end */
    ck_assert(optim_sched_lr(&o, 4) == 0.1);
    ck_assert(fabs(optim_sched_lr(&o, 8) - 0.055) < 1e-15);
    ck_assert(optim_sched_lr(&o, 12) == 0.01 && optim_sched_lr(&o, 1000000) == 0.01);
    ck_assert(fabs(optim_sched_lr(&o, 2) - 0.06) < 1e-15);
    for (uint64_t t = 1; t <= 14; t++) {
        double want = sched_ref("cos", 0.1, 0.02, 0.01, 1, 4, 12, (double)t);
        ck_assert_msg(optim_sched_lr(&o, t) == want, "cosine t=%llu: %.17g vs %.17g",
                      (unsigned long long)t, optim_sched_lr(&o, t), want);
    }
    o = parse_ok("sgd learning_rate=1 lr_scheduler=warmup_linear warmup_steps=2 total_steps=6");
    double lin[] = {0, 0.5, 1, 0.75, 0.5, 0.25, 0, 0};
    for (uint64_t t = 1; t < 8; t++)
        ck_assert_msg(optim_sched_lr(&o, t) == lin[t], "linear t=%llu: %.17g",
                      (unsigned long long)t, optim_sched_lr(&o, t));
    o = parse_ok("nag learning_rate=0.5 lr_scheduler=poly total_steps=10 final_lr=0.1");
    ck_assert(o.power == 2 && o.warmup_steps == 0);
    for (uint64_t t = 1; t <= 12; t++) {
        double want = sched_ref("poly", 0.5, 0, 0.1, 2, 0, 10, (double)t);
        ck_assert_msg(optim_sched_lr(&o, t) == want, "poly t=%llu: %.17g vs %.17g",
                      (unsigned long long)t, optim_sched_lr(&o, t), want);
    }
    ck_assert(fabs(optim_sched_lr(&o, 5) - (0.1 + 0.4 * 0.25)) < 1e-15);
    /* the schedule then lr_mult; every optimizer takes every schedule */
    static const char *const names[] = {"sgd", "nag", "adam", "adagrad", "rmsprop", "adamw",
                                        "lamb"};
    static const char *const scheds[] = {
        "lr_scheduler=warmup_cosine warmup_steps=3 total_steps=9",
        "lr_scheduler=warmup_linear warmup_steps=3 total_steps=9",
        "lr_scheduler=poly warmup_steps=3 total_steps=9 power=1.5",
        "lr_scheduler=factor step=2 factor=0.5",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        for (size_t k = 0; k < sizeof scheds / sizeof scheds[0]; k++) {
            char spec[256];
            snprintf(spec, sizeof spec, "%s learning_rate=0.2 %s", names[i], scheds[k]);
            o = parse_ok(spec);
            optim_mult m = {0.5, 1};
            for (uint64_t t = 1; t <= 10; t++) {
                optim_step s;
                optim_step_init(&s, &o, t, &m);
                ck_assert(s.lr == optim_sched_lr(&o, t) * 0.5);
            }
        }
}
END_TEST

START_TEST(factor_schedule)
{
    optim_spec o = parse_ok("sgd learning_rate=1 lr_scheduler=factor step=2 factor=0.5 "
                            "stop_factor_lr=0.2");
    /* MXNet: num_update > count + step reduces; t = 1, 2: 1; 3, 4: 0.5; 5, 6: 0.25; then 0.2 */
    double want[] = {0, 1, 1, 0.5, 0.5, 0.25, 0.25, 0.2, 0.2, 0.2};
    for (uint64_t t = 1; t < 10; t++)
        ck_assert_msg(optim_sched_lr(&o, t) == want[t], "t=%llu: %g", (unsigned long long)t,
                      optim_sched_lr(&o, t));
    ck_assert(optim_sched_lr(&o, 1000000000000ull) == 0.2);
    optim_step s;
    optim_mult m = {0.5, 0};
    o = parse_ok("adam learning_rate=0.1 wd=0.3");
    optim_step_init(&s, &o, 2, &m);
    ck_assert(s.lr == 0.05 && s.wd == 0);
    ck_assert(fabs(s.lr_t - 0.05 * sqrt(1 - 0.999 * 0.999) / (1 - 0.81)) < 1e-15);
}
END_TEST

/* ---- kernels ---- */

static double clipv(double x, double c) { return c > 0 ? fmin(fmax(x, -c), c) : x; }

/* kvs.h's formulas in float64: one step of element (w, a, b, c). */
static void ref(const optim_spec *o, double lr, double wd, uint64_t t, double g, double *w,
                double *a, double *b, double *c)
{
    double x = *w, gp;
    switch (o->kind) {
    case OPTIM_SGD:
        if (o->momentum == 0) {
            *w = x - lr * (clipv(o->rescale_grad * g, o->clip_gradient) + wd * x);
        } else {
            *a = o->momentum * *a - lr * (clipv(o->rescale_grad * g, o->clip_gradient) + wd * x);
            *w = x + *a;
        }
        break;
    case OPTIM_NAG:
        gp = clipv(o->rescale_grad * g, o->clip_gradient) + wd * x;
        *a = o->momentum * *a + gp;
        *w = x - lr * (gp + o->momentum * *a);
        break;
    case OPTIM_ADAM:
        gp = clipv(o->rescale_grad * g, o->clip_gradient) + wd * x;
        *a = o->beta1 * *a + (1 - o->beta1) * gp;
        *b = o->beta2 * *b + (1 - o->beta2) * gp * gp;
        *w = x - lr * sqrt(1 - pow(o->beta2, (double)t)) / (1 - pow(o->beta1, (double)t)) * *a /
                     (sqrt(*b) + o->epsilon);
        break;
    case OPTIM_ADAMW: /* torch.optim.AdamW, step t */
        gp = clipv(o->rescale_grad * g, o->clip_gradient);
        *a = o->beta1 * *a + (1 - o->beta1) * gp;
        *b = o->beta2 * *b + (1 - o->beta2) * gp * gp;
        *w = x * (1 - lr * wd) - lr / (1 - pow(o->beta1, (double)t)) * *a /
                                     (sqrt(*b) / sqrt(1 - pow(o->beta2, (double)t)) + o->epsilon);
        break;
    case OPTIM_ADAGRAD:
        gp = clipv(o->rescale_grad * g, o->clip_gradient);
        *a += gp * gp;
        *w = x - lr * (gp / sqrt(*a + o->epsilon) + wd * x);
        break;
    case OPTIM_RMSPROP:
        gp = clipv(o->rescale_grad * g + wd * x, o->clip_gradient);
        *a = (1 - o->gamma1) * gp * gp + o->gamma1 * *a;
        if (o->centered) {
            *b = (1 - o->gamma1) * gp + o->gamma1 * *b;
            *c = o->gamma2 * *c - lr * gp / sqrt(*a - *b * *b + o->epsilon);
            *w = x + *c;
        } else {
            *w = x - lr * gp / sqrt(*a + o->epsilon);
        }
        if (o->clip_weights > 0)
            *w = clipv(*w, o->clip_weights);
        break;
    }
}

static const char *const specs[] = {
    "sgd learning_rate=0.05 wd=0.01 rescale_grad=0.5 clip_gradient=0.7",
    "sgd learning_rate=0.01 momentum=0.9 wd=0.001 clip_gradient=1",
    "nag learning_rate=0.02 momentum=0.7 wd=0.01 rescale_grad=2 clip_gradient=3",
    "adam learning_rate=0.01 wd=0.01 clip_gradient=2",
    "adagrad learning_rate=0.1 wd=0.01 rescale_grad=0.25",
    "rmsprop learning_rate=0.01 wd=0.01 clip_weights=1.5",
    "rmsprop learning_rate=0.01 centered=1 gamma1=0.95 gamma2=0.8 clip_gradient=2",
    "adamw learning_rate=0.01 wd=0.1 clip_gradient=2 rescale_grad=0.5",
    "adamw learning_rate=0.02 beta1=0.8 beta2=0.99 epsilon=1e-6 lr_scheduler=warmup_cosine "
    "warmup_steps=2 total_steps=5",
    "sgd learning_rate=0.05 momentum=0.9 lr_scheduler=poly warmup_steps=1 total_steps=4",
    "adam learning_rate=0.01 lr_scheduler=warmup_linear warmup_steps=3 total_steps=6",
};

#define N 1003

static double gval(int i, int t) { return sin(i * 0.7 + t * 1.3) * 3.0; }

START_TEST(kernels_vs_formulas)
{
    for (size_t si = 0; si < sizeof specs / sizeof specs[0]; si++) {
        optim_spec o = parse_ok(specs[si]);
        for (int dt = 0; dt < 2; dt++) {
            kvs_dtype d = dt ? KVS_FLOAT64 : KVS_FLOAT32;
            size_t es = kvs_dtype_size(d);
            int ns = optim_nstate(&o, d);
            void *w = calloc(N, es), *g = calloc(N, es), *st[OPTIM_MAX_STATE] = {0};
            double *rw = calloc(N, 8), *ra = calloc(N, 8), *rb = calloc(N, 8), *rc = calloc(N, 8);
            for (int j = 0; j < ns; j++)
                st[j] = calloc(N, es);
            for (int i = 0; i < N; i++) {
                rw[i] = 1.0 + (i % 7) * 0.1;
                if (dt)
                    ((double *)w)[i] = rw[i];
                else
                    ((float *)w)[i] = (float)rw[i], rw[i] = (float)rw[i];
            }
            for (uint64_t t = 1; t <= 6; t++) {
                optim_step s;
                optim_step_init(&s, &o, t, NULL);
                for (int i = 0; i < N; i++) {
                    double gv = gval(i, (int)t);
                    if (dt)
                        ((double *)g)[i] = gv;
                    else
                        ((float *)g)[i] = (float)gv, gv = (float)gv;
                    ref(&o, s.lr, s.wd, t, gv, &rw[i], &ra[i], &rb[i], &rc[i]);
                }
                optim_update(&s, d, w, g, st, 0, N);
                memcpy(w, g, N * es);
                for (int i = 0; i < N; i++) {
                    double got = dt ? ((double *)w)[i] : ((float *)w)[i];
                    double err = fabs(got - rw[i]) / fmax(fabs(rw[i]), 1e-300);
                    ck_assert_msg(err <= (dt ? 1e-12 : 1e-6), "%s %s t=%llu i=%d: %.17g vs %.17g",
                                  specs[si], kvs_dtype_name(d), (unsigned long long)t, i, got,
                                  rw[i]);
                }
            }
            for (int j = 0; j < ns; j++)
                free(st[j]);
            free(w), free(g), free(rw), free(ra), free(rb), free(rc);
        }
    }
}
END_TEST

/* Any split of the range gives the same bits (threads, vector tails). */
START_TEST(chunking_is_bit_identical)
{
    for (size_t si = 0; si < sizeof specs / sizeof specs[0]; si++) {
        optim_spec o = parse_ok(specs[si]);
        for (int dt = 0; dt < 3; dt++) {
            kvs_dtype d = dt == 0 ? KVS_FLOAT32 : dt == 1 ? KVS_FLOAT64 : KVS_FLOAT16;
            if (dt == 2)
                o.multi_precision = true;
            size_t es = kvs_dtype_size(d), ss = kvs_dtype_size(optim_state_dtype(d));
            int ns = optim_nstate(&o, d);
            uint8_t *w = calloc(N, es), *g1 = calloc(N, es), *g2 = calloc(N, es);
            void *s1[OPTIM_MAX_STATE] = {0}, *s2[OPTIM_MAX_STATE] = {0};
            for (int j = 0; j < ns; j++) {
                s1[j] = calloc(N, ss);
                s2[j] = calloc(N, ss);
            }
            for (int i = 0; i < N; i++) {
                if (d == KVS_FLOAT32) ((float *)w)[i] = 1.0f + (float)i * 1e-3f, ((float *)g1)[i] = (float)gval(i, 1);
                if (d == KVS_FLOAT64) ((double *)w)[i] = 1.0 + i * 1e-3, ((double *)g1)[i] = gval(i, 1);
                if (d == KVS_FLOAT16) ((uint16_t *)w)[i] = 0x3c00 + (uint16_t)(i % 64), ((uint16_t *)g1)[i] = (uint16_t)(0x3800 + i % 200);
            }
            if (dt == 2) { /* the master copy starts as the weights */
                for (int i = 0; i < N; i++) {
                    float f = 1.0f + (float)(i % 64) / 1024.0f;
                    ((float *)s1[ns - 1])[i] = ((float *)s2[ns - 1])[i] = f;
                }
            }
            memcpy(g2, g1, N * es);
            for (uint64_t t = 1; t <= 3; t++) {
                optim_step s;
                optim_step_init(&s, &o, t, NULL);
                optim_update(&s, d, w, g1, s1, 0, N);
                for (uint64_t lo = 0; lo < N; lo += 7)
                    optim_update(&s, d, w, g2, s2, lo, lo + 7 < N ? lo + 7 : N);
                ck_assert_msg(memcmp(g1, g2, N * es) == 0, "%s %s t=%llu", specs[si],
                              kvs_dtype_name(d), (unsigned long long)t);
                for (int j = 0; j < ns; j++)
                    ck_assert(memcmp(s1[j], s2[j], N * ss) == 0);
            }
            for (int j = 0; j < ns; j++)
                free(s1[j]), free(s2[j]);
            free(w), free(g1), free(g2);
        }
    }
}
END_TEST

/* ---- lamb ---- */

/* One whole-key LAMB update the way the server runs it (phase 1 over whole
 * blocks, the block sums in order, the ratio, phase 2 in pieces of 7). */
static void lamb_step(const optim_step *s, kvs_dtype d, const void *w, void *g, void **st,
                      uint64_t n, bool split)
{
    uint64_t nb = (n + OPTIM_NORM_BLOCK - 1) / OPTIM_NORM_BLOCK;
    double *blocks = calloc(2 * nb, sizeof *blocks), sums[2];
    if (split)
        for (uint64_t lo = 0; lo < n; lo += OPTIM_NORM_BLOCK)
            optim_lamb_phase1(s, d, w, g, st, lo, lo + OPTIM_NORM_BLOCK < n ? lo + OPTIM_NORM_BLOCK : n,
                              blocks);
    else
        optim_lamb_phase1(s, d, w, g, st, 0, n, blocks);
    optim_lamb_sums(blocks, n, sums);
    double ratio = optim_lamb_ratio(s, sums[0], sums[1]);
    if (split)
        for (uint64_t lo = 0; lo < n; lo += 7)
            optim_lamb_phase2(s, ratio, d, w, g, st, lo, lo + 7 < n ? lo + 7 : n);
    else
        optim_lamb_phase2(s, ratio, d, w, g, st, 0, n);
    free(blocks);
}

/* You et al.'s LAMB (MXNet's phases) in float64 over the whole key. */
static void lamb_ref64(const optim_spec *o, double lr, double wd, uint64_t t, int n,
                       const double *g, double *w, double *m, double *v)
{
    double bc1 = o->bias_correction ? 1 - pow(o->beta1, (double)t) : 1;
    double bc2 = o->bias_correction ? 1 - pow(o->beta2, (double)t) : 1;
    double *r = calloc((size_t)n, sizeof *r), ws = 0, rs = 0;
    for (int i = 0; i < n; i++) {
        double gp = clipv(o->rescale_grad * g[i], o->clip_gradient);
        m[i] = o->beta1 * m[i] + (1 - o->beta1) * gp;
        v[i] = o->beta2 * v[i] + (1 - o->beta2) * gp * gp;
        r[i] = (m[i] / bc1) / (sqrt(v[i] / bc2) + o->epsilon) + wd * w[i];
        ws += w[i] * w[i];
        rs += r[i] * r[i];
    }
    double r1 = sqrt(ws), r2 = sqrt(rs);
    if (o->lower_bound > 0)
        r1 = fmax(r1, o->lower_bound);
    if (o->upper_bound > 0)
        r1 = fmin(r1, o->upper_bound);
    double ratio = r1 == 0 || r2 == 0 ? 1 : r1 / r2;
    for (int i = 0; i < n; i++)
        w[i] -= lr * ratio * r[i];
    free(r);
}

/* The same in float32 with the kernel's order of operations: float64 sums
 * of squares in element order within each part [cuts[p], cuts[p+1]) (parts
 * under OPTIM_NORM_BLOCK elements), the parts' sums added in order; it must
 * match bit for bit. */
__attribute__((optimize("fp-contract=off")))
static void lamb_ref32_parts(const optim_step *s, int n, const float *g, float *w, float *m,
                             float *v, const int *cuts, int nparts)
{
    const optim_spec *o = s->o;
    float rg = (float)o->rescale_grad, c = (float)o->clip_gradient, b1 = (float)o->beta1,
          b2 = (float)o->beta2, c1 = 1.0f - b1, c2 = 1.0f - b2, eps = (float)o->epsilon,
          bc1 = (float)s->bc1, bc2 = (float)s->bc2, wd = (float)s->wd;
    float *r = calloc((size_t)n, sizeof *r);
    double ws = 0, rs = 0, pw = 0, pr = 0;
    for (int i = 0, p = 0; i < n; i++) {
        if (i == cuts[p + 1] && p + 1 < nparts) { /* the next part */
            ws += pw, rs += pr, pw = pr = 0;
            p++;
        }
        float gr = rg * g[i];
        if (o->clip_gradient > 0)
            gr = gr > c ? c : gr < -c ? -c : gr;
        m[i] = b1 * m[i] + c1 * gr;
        v[i] = b2 * v[i] + c2 * (gr * gr);
        r[i] = (m[i] / bc1) / (sqrtf(v[i] / bc2) + eps) + wd * w[i];
        pw += (double)w[i] * (double)w[i];
        pr += (double)r[i] * (double)r[i];
    }
    ws += pw, rs += pr;
    float lrr = (float)(s->lr * optim_lamb_ratio(s, ws, rs));
    for (int i = 0; i < n; i++)
        w[i] = w[i] - lrr * r[i];
    free(r);
}

static void lamb_ref32(const optim_step *s, int n, const float *g, float *w, float *m, float *v)
{
    int cuts[2] = {0, n};
    lamb_ref32_parts(s, n, g, w, m, v, cuts, 1);
}

static const char *const lamb_specs[] = {
    "lamb learning_rate=0.01 wd=0.01 clip_gradient=2",
    "lamb learning_rate=0.05 rescale_grad=0.5 bias_correction=0 lr_scheduler=warmup_linear "
    "warmup_steps=2 total_steps=6",
    "lamb learning_rate=0.02 wd=0.1 upper_bound=20 beta1=0.8",   /* ||w|| ~ 38: clamped */
    "lamb learning_rate=0.02 lower_bound=100 epsilon=1e-4",       /* clamped from below */
    "lamb learning_rate=0.02 wd=0.05 lr_scheduler=warmup_cosine warmup_steps=1 total_steps=5",
};

START_TEST(lamb_vs_formulas)
{
    for (size_t si = 0; si < sizeof lamb_specs / sizeof lamb_specs[0]; si++) {
        optim_spec o = parse_ok(lamb_specs[si]);
        for (int dt = 0; dt < 2; dt++) {
            kvs_dtype d = dt ? KVS_FLOAT64 : KVS_FLOAT32;
            size_t es = kvs_dtype_size(d);
            void *w = calloc(N, es), *g = calloc(N, es), *st[OPTIM_MAX_STATE] = {0};
            double *rw = calloc(N, 8), *rm = calloc(N, 8), *rv = calloc(N, 8), *rg = calloc(N, 8);
            float *fw = calloc(N, 4), *fm = calloc(N, 4), *fv = calloc(N, 4);
            for (int j = 0; j < 2; j++)
                st[j] = calloc(N, es);
            for (int i = 0; i < N; i++) {
                rw[i] = 1.0 + (i % 7) * 0.1;
                if (dt)
                    ((double *)w)[i] = rw[i];
                else
                    ((float *)w)[i] = fw[i] = (float)rw[i], rw[i] = (float)rw[i];
            }
            for (uint64_t t = 1; t <= 6; t++) {
                optim_step s;
                optim_step_init(&s, &o, t, NULL);
                for (int i = 0; i < N; i++) {
                    rg[i] = gval(i, (int)t);
                    if (dt)
                        ((double *)g)[i] = rg[i];
                    else
                        ((float *)g)[i] = (float)rg[i], rg[i] = (float)rg[i];
                }
                lamb_ref64(&o, s.lr, s.wd, t, N, rg, rw, rm, rv);
                if (!dt) {
                    float *fg = calloc(N, 4);
                    memcpy(fg, g, N * 4);
                    lamb_ref32(&s, N, fg, fw, fm, fv);
                    free(fg);
                }
                lamb_step(&s, d, w, g, st, N, t % 2 == 0);
                memcpy(w, g, N * es);
                for (int i = 0; i < N; i++) {
                    double got = dt ? ((double *)w)[i] : ((float *)w)[i];
                    double err = fabs(got - rw[i]) / fmax(fabs(rw[i]), 1e-300);
                    ck_assert_msg(err <= (dt ? 1e-12 : 2e-6), "%s %s t=%llu i=%d: %.17g vs %.17g",
                                  lamb_specs[si], kvs_dtype_name(d), (unsigned long long)t, i,
                                  got, rw[i]);
                }
                if (!dt) /* float32 in the kernel's order: the same bits */
                    ck_assert_msg(memcmp(w, fw, N * 4) == 0 && memcmp(st[0], fm, N * 4) == 0 &&
                                  memcmp(st[1], fv, N * 4) == 0, "%s t=%llu: not bit-identical",
                                  lamb_specs[si], (unsigned long long)t);
            }
            for (int j = 0; j < 2; j++)
                free(st[j]);
            free(w), free(g), free(rw), free(rm), free(rv), free(rg), free(fw), free(fm), free(fv);
        }
    }
}
END_TEST

/* Phase 1 over any split into whole blocks, phase 2 over any split, on
 * every dtype (float16 with its master copy): the same bits. */
START_TEST(lamb_chunking_is_bit_identical)
{
    const uint64_t n = 2 * OPTIM_NORM_BLOCK + 1001;
    optim_spec o = parse_ok(lamb_specs[0]);
    for (int dt = 0; dt < 3; dt++) {
        kvs_dtype d = dt == 0 ? KVS_FLOAT32 : dt == 1 ? KVS_FLOAT64 : KVS_FLOAT16;
        o.multi_precision = dt == 2;
        size_t es = kvs_dtype_size(d), ss = kvs_dtype_size(optim_state_dtype(d));
        int ns = optim_nstate(&o, d);
        uint8_t *w = calloc(n, es), *g1 = calloc(n, es), *g2 = calloc(n, es);
        void *s1[OPTIM_MAX_STATE] = {0}, *s2[OPTIM_MAX_STATE] = {0};
        for (int j = 0; j < ns; j++)
            s1[j] = calloc(n, ss), s2[j] = calloc(n, ss);
        for (uint64_t i = 0; i < n; i++) {
            if (d == KVS_FLOAT32) ((float *)w)[i] = 1.0f + (float)(i % 97) * 1e-3f, ((float *)g1)[i] = (float)gval((int)i, 1);
            if (d == KVS_FLOAT64) ((double *)w)[i] = 1.0 + (double)(i % 97) * 1e-3, ((double *)g1)[i] = gval((int)i, 1);
            if (d == KVS_FLOAT16) ((uint16_t *)w)[i] = (uint16_t)(0x3c00 + i % 64), ((uint16_t *)g1)[i] = (uint16_t)(0x3800 + i % 200);
        }
        if (dt == 2)
            for (uint64_t i = 0; i < n; i++)
                ((float *)s1[ns - 1])[i] = ((float *)s2[ns - 1])[i] = 1.0f + (float)(i % 64) / 1024.0f;
        for (uint64_t t = 1; t <= 3; t++) {
            optim_step s;
            optim_step_init(&s, &o, t, NULL);
            memcpy(g2, g1, n * es);
            lamb_step(&s, d, w, g1, s1, n, false);
            lamb_step(&s, d, w, g2, s2, n, true);
            ck_assert_msg(memcmp(g1, g2, n * es) == 0, "%s t=%llu", kvs_dtype_name(d),
                          (unsigned long long)t);
            for (int j = 0; j < ns; j++)
                ck_assert(memcmp(s1[j], s2[j], n * ss) == 0);
            /* the update moved the weights */
            ck_assert(memcmp(g1, w, n * es) != 0);
            memcpy(g1, g2, n * es); /* next gradient: anything, the same for both */
        }
        for (int j = 0; j < ns; j++)
            free(s1[j]), free(s2[j]);
        free(w), free(g1), free(g2);
    }
}
END_TEST

/* A key split in 3 parts (as over 3 servers): each part's phase 1 alone,
 * the parts' sums added in offset order (what the servers exchange),
 * phase 2 per part.  Bit for bit the reference with the same order; within
 * 2e-6 (relative, per element) of the unsplit key, whose sums run in one
 * piece; float64 within 1e-12. */
START_TEST(lamb_split_key)
{
    const int cuts[4] = {0, 334, 668, N};
    for (size_t si = 0; si < sizeof lamb_specs / sizeof lamb_specs[0]; si++) {
        optim_spec o = parse_ok(lamb_specs[si]);
        for (int dt = 0; dt < 2; dt++) {
            kvs_dtype d = dt ? KVS_FLOAT64 : KVS_FLOAT32;
            size_t es = kvs_dtype_size(d);
            uint8_t *w = calloc(N, es), *g = calloc(N, es), *gw = calloc(N, es),
                    *uw = calloc(N, es);
            uint8_t *st[2] = {calloc(N, es), calloc(N, es)}, *us[2] = {calloc(N, es),
                                                                        calloc(N, es)};
            float *fw = calloc(N, 4), *fm = calloc(N, 4), *fv = calloc(N, 4);
            for (int i = 0; i < N; i++) {
                double x = 1.0 + (i % 11) * 0.05;
                if (dt)
                    ((double *)w)[i] = x;
                else
                    ((float *)w)[i] = fw[i] = (float)x;
            }
            memcpy(uw, w, N * es);
            for (uint64_t t = 1; t <= 5; t++) {
                optim_step s;
                optim_step_init(&s, &o, t, NULL);
                for (int i = 0; i < N; i++) {
                    if (dt)
                        ((double *)g)[i] = gval(i, (int)t);
                    else
                        ((float *)g)[i] = (float)gval(i, (int)t);
                }
                /* split: phase 1 per part, the parts' sums in order, phase 2 per part */
                double tot[2] = {0, 0};
                memcpy(gw, g, N * es);
                for (int p = 0; p < 3; p++) {
                    uint64_t c = (uint64_t)(cuts[p + 1] - cuts[p]);
                    double blocks[2], ps[2];
                    void *pst[2] = {st[0] + (size_t)cuts[p] * es, st[1] + (size_t)cuts[p] * es};
                    optim_lamb_phase1(&s, d, w + (size_t)cuts[p] * es, gw + (size_t)cuts[p] * es,
                                      pst, 0, c, blocks);
                    optim_lamb_sums(blocks, c, ps);
                    tot[0] += ps[0];
                    tot[1] += ps[1];
                }
                double ratio = optim_lamb_ratio(&s, tot[0], tot[1]);
                for (int p = 0; p < 3; p++) {
                    void *pst[2] = {st[0] + (size_t)cuts[p] * es, st[1] + (size_t)cuts[p] * es};
                    optim_lamb_phase2(&s, ratio, d, w + (size_t)cuts[p] * es,
                                      gw + (size_t)cuts[p] * es, pst, 0,
                                      (uint64_t)(cuts[p + 1] - cuts[p]));
                }
                memcpy(w, gw, N * es);
                /* unsplit */
                memcpy(gw, g, N * es);
                lamb_step(&s, d, uw, gw, (void **)us, N, false);
                memcpy(uw, gw, N * es);
                if (!dt) {
                    lamb_ref32_parts(&s, N, (const float *)g, fw, fm, fv, cuts, 3);
                    ck_assert_msg(memcmp(w, fw, N * 4) == 0, "%s t=%llu: the split key is not "
                                  "bit for bit the same-order reference", lamb_specs[si],
                                  (unsigned long long)t);
                }
                for (int i = 0; i < N; i++) {
                    double a = dt ? ((double *)w)[i] : ((float *)w)[i];
                    double b = dt ? ((double *)uw)[i] : ((float *)uw)[i];
                    ck_assert_msg(fabs(a - b) <= (dt ? 1e-12 : 2e-6) * fabs(b),
                                  "%s %s t=%llu i=%d: split %.17g, unsplit %.17g",
                                  lamb_specs[si], kvs_dtype_name(d), (unsigned long long)t, i,
                                  a, b);
                }
            }
            free(w), free(g), free(gw), free(uw), free(st[0]), free(st[1]), free(us[0]);
            free(us[1]), free(fw), free(fm), free(fv);
        }
    }
}
END_TEST

START_TEST(lamb_ratio_edges)
{
    optim_spec o = parse_ok("lamb lower_bound=2 upper_bound=3");
    optim_step s;
    optim_step_init(&s, &o, 1, NULL);
    ck_assert(optim_lamb_ratio(&s, 0, 4) == 1.0);     /* max(0, 2) = 2 = ||r|| */
    o = parse_ok("lamb");
    optim_step_init(&s, &o, 1, NULL);
    ck_assert(optim_lamb_ratio(&s, 0, 4) == 1.0);     /* ||w|| = 0: ratio 1 */
    ck_assert(optim_lamb_ratio(&s, 4, 0) == 1.0);     /* ||r|| = 0: ratio 1 */
    ck_assert(optim_lamb_ratio(&s, 16, 4) == 2.0);
    o = parse_ok("lamb upper_bound=3");
    optim_step_init(&s, &o, 1, NULL);
    ck_assert(optim_lamb_ratio(&s, 16, 4) == 1.5);
    o = parse_ok("lamb lower_bound=10");
    optim_step_init(&s, &o, 1, NULL);
    ck_assert(optim_lamb_ratio(&s, 16, 4) == 5.0);
    /* optim_update leaves a lamb key alone (it runs in two phases) */
    float w[3] = {1, 2, 3}, g[3] = {4, 5, 6}, m[3] = {0}, v[3] = {0};
    void *st[2] = {m, v};
    optim_update(&s, KVS_FLOAT32, w, g, st, 0, 3);
    ck_assert(g[0] == 4 && g[2] == 6 && m[1] == 0);
}
END_TEST

START_TEST(state_counts)
{
    optim_spec o = parse_ok("sgd");
    ck_assert_int_eq(optim_nstate(&o, KVS_FLOAT32), 0);
    o = parse_ok("sgd momentum=0.5 multi_precision=1");
    ck_assert_int_eq(optim_nstate(&o, KVS_FLOAT32), 1);
    ck_assert_int_eq(optim_nstate(&o, KVS_BFLOAT16), 2);
    ck_assert(optim_has_master(&o, KVS_FLOAT16) && !optim_has_master(&o, KVS_FLOAT64));
    o = parse_ok("rmsprop centered=1 multi_precision=1");
    ck_assert_int_eq(optim_nstate(&o, KVS_FLOAT16), 4);
    ck_assert(!optim_dtype_ok(KVS_INT32) && !optim_dtype_ok(KVS_INT64));
    ck_assert(optim_state_dtype(KVS_FLOAT64) == KVS_FLOAT64);
    ck_assert(optim_state_dtype(KVS_BFLOAT16) == KVS_FLOAT32);
}
END_TEST

Suite *optim_suite(void)
{
    Suite *s = suite_create("optim");
    TCase *tc = tcase_create("optim");
    tcase_add_test(tc, defaults_and_text);
    tcase_add_test(tc, errors_name_the_word);
    tcase_add_test(tc, diff_and_mult);
    tcase_add_test(tc, factor_schedule);
    tcase_add_test(tc, new_defaults_and_text);
    tcase_add_test(tc, decay_schedules);
    tcase_add_test(tc, lamb_vs_formulas);
    tcase_add_test(tc, lamb_chunking_is_bit_identical);
    tcase_add_test(tc, lamb_ratio_edges);
    tcase_add_test(tc, lamb_split_key);
    tcase_add_test(tc, kernels_vs_formulas);
    tcase_add_test(tc, chunking_is_bit_identical);
    tcase_add_test(tc, state_counts);
    suite_add_tcase(s, tc);
    return s;
}
