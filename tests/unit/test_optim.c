/* test_optim.c - optim/: spec parsing (every error names its word), the
 * canonical text, the schedule, and the update kernels against kvs.h's
 * formulas computed here in float64 (bit-identical whatever the chunking). */
#include <check.h>
#include <math.h>
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
    ck_assert(o.kind == OPTIM_SGD && o.momentum == 0.9 && o.wd == 1e-4 && o.factor_sched);
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
        {"sgd lr_scheduler=poly", "'lr_scheduler=poly'"}, {"sgd factor=0.5", "factor"},
        {"sgd lr_scheduler=factor", "step=N"}, {"sgd lr_scheduler=factor step=0", "step=0"},
        {"sgd lr_scheduler=factor step=2 factor=1.5", "factor=1.5"},
        {"sgd lr_scheduler=factor step=2.5", "step=2.5"}, {"sgd wd=1x", "'wd=1x'"},
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
        *w = x - lr * sqrt(1 - pow(o->beta2, t)) / (1 - pow(o->beta1, t)) * *a /
                     (sqrt(*b) + o->epsilon);
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
                if (d == KVS_FLOAT32) ((float *)w)[i] = 1.0f + i * 1e-3f, ((float *)g1)[i] = (float)gval(i, 1);
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
    tcase_add_test(tc, kernels_vs_formulas);
    tcase_add_test(tc, chunking_is_bit_identical);
    tcase_add_test(tc, state_counts);
    suite_add_tcase(s, tc);
    return s;
}
