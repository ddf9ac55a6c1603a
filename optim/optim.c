/* optim.c - optimizer specs: parse, canonical text, per-key multipliers,
 * the learning-rate schedule.  See optim.h. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim.h"

static int bad(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad(char *why, size_t whylen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
    return KVS_EINVAL;
}

const char *optim_name(int kind)
{
    static const char *const names[] = {"none",    "sgd",   "nag",  "adam",
                                        "adagrad", "rmsprop", "adamw", "lamb"};
    return kind >= 0 && kind <= OPTIM_KIND_MAX ? names[kind] : "?";
}

const char *optim_sched_name(int sched)
{
    static const char *const names[] = {"none", "factor", "warmup_cosine", "warmup_linear",
                                        "poly"};
    return sched >= 0 && sched <= OPTIM_SCHED_POLY ? names[sched] : "?";
}

#define KNOWN "sgd, nag, adam, adagrad, rmsprop, adamw, lamb"

/* MXNet 1.x defaults (python/mxnet/optimizer/optimizer.py); adamw takes
 * PyTorch's (torch.optim.AdamW: weight_decay 0.01), lamb MXNet's LAMB
 * (epsilon 1e-6, bias_correction on). */
static void defaults(optim_spec *o, int kind)
{
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->learning_rate = kind == OPTIM_ADAM || kind == OPTIM_RMSPROP || kind == OPTIM_ADAMW ||
                               kind == OPTIM_LAMB
                           ? 0.001
                           : 0.01;
    o->wd = kind == OPTIM_ADAMW ? 0.01 : 0.0;
    o->rescale_grad = 1.0;
    o->clip_gradient = -1.0;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->epsilon = kind == OPTIM_ADAGRAD ? 1e-7 : kind == OPTIM_LAMB ? 1e-6 : 1e-8;
    o->lower_bound = -1.0;
    o->upper_bound = -1.0;
    o->bias_correction = true;
    o->power = 2.0;
    o->gamma1 = 0.9;
    o->gamma2 = 0.9;
    o->clip_weights = -1.0;
    o->factor = 1.0;
    o->stop_factor_lr = 1e-8;
}

/* A parameter: name, which optimizers take it (bit per kind), where it goes,
 * its range [lo, hi] (lo_open/hi_open: excluded), kind of value. */
enum pkind { P_REAL, P_BOOL, P_COUNT, P_SCHED };
struct param {
    const char *name;
    unsigned kinds;
    size_t off;
    enum pkind pk;
    double lo, hi;
    bool lo_open, hi_open;
    const char *range; /* words for the message */
};

#define K(k) (1u << (k))
#define ALL                                                                                \
    (K(OPTIM_SGD) | K(OPTIM_NAG) | K(OPTIM_ADAM) | K(OPTIM_ADAGRAD) | K(OPTIM_RMSPROP) |   \
     K(OPTIM_ADAMW) | K(OPTIM_LAMB))
#define ADAMS (K(OPTIM_ADAM) | K(OPTIM_ADAMW) | K(OPTIM_LAMB))
#define OFF(f) offsetof(optim_spec, f)

static const struct param params[] = {
    {"learning_rate", ALL, OFF(learning_rate), P_REAL, 0, INFINITY, false, true, "a number >= 0"},
    {"wd", ALL, OFF(wd), P_REAL, -INFINITY, INFINITY, true, true, "a finite number"},
    {"rescale_grad", ALL, OFF(rescale_grad), P_REAL, -INFINITY, INFINITY, true, true,
     "a finite number"},
    {"clip_gradient", ALL, OFF(clip_gradient), P_REAL, -INFINITY, INFINITY, true, true,
     "a finite number (<= 0: no clipping)"},
    {"momentum", K(OPTIM_SGD) | K(OPTIM_NAG), OFF(momentum), P_REAL, 0, 1, false, true,
     "0 <= momentum < 1"},
    {"beta1", ADAMS, OFF(beta1), P_REAL, 0, 1, false, true, "0 <= beta1 < 1"},
    {"beta2", ADAMS, OFF(beta2), P_REAL, 0, 1, false, true, "0 <= beta2 < 1"},
    {"epsilon", ADAMS | K(OPTIM_RMSPROP) | K(OPTIM_ADAGRAD), OFF(epsilon), P_REAL, 0,
     INFINITY, true, true, "a number > 0"},
    {"eps", K(OPTIM_ADAGRAD), OFF(epsilon), P_REAL, 0, INFINITY, true, true, "a number > 0"},
    {"gamma1", K(OPTIM_RMSPROP), OFF(gamma1), P_REAL, 0, 1, false, true, "0 <= gamma1 < 1"},
    {"gamma2", K(OPTIM_RMSPROP), OFF(gamma2), P_REAL, 0, 1, false, true, "0 <= gamma2 < 1"},
    {"centered", K(OPTIM_RMSPROP), OFF(centered), P_BOOL, 0, 1, false, false, "0 or 1"},
    {"clip_weights", K(OPTIM_RMSPROP), OFF(clip_weights), P_REAL, -INFINITY, INFINITY, true,
     true, "a finite number (<= 0: no clipping)"},
    {"multi_precision", ALL, OFF(multi_precision), P_BOOL, 0, 1, false, false, "0 or 1"},
    {"lr_scheduler", ALL, OFF(sched), P_SCHED, 0, 0, false, false,
     "factor, warmup_cosine, warmup_linear or poly"},
    {"step", ALL, OFF(step), P_COUNT, 1, 1e18, false, false, "an integer >= 1"},
    {"factor", ALL, OFF(factor), P_REAL, 0, 1, true, false, "0 < factor <= 1"},
    {"stop_factor_lr", ALL, OFF(stop_factor_lr), P_REAL, 0, INFINITY, false, true,
     "a number >= 0"},
    /* (new parameters go below: parse refers to the ones above by index) */
    {"lower_bound", K(OPTIM_LAMB), OFF(lower_bound), P_REAL, -INFINITY, INFINITY, true, true,
     "a finite number (<= 0: off)"},
    {"upper_bound", K(OPTIM_LAMB), OFF(upper_bound), P_REAL, -INFINITY, INFINITY, true, true,
     "a finite number (<= 0: off)"},
    {"bias_correction", K(OPTIM_LAMB), OFF(bias_correction), P_BOOL, 0, 1, false, false,
     "0 or 1"},
    {"warmup_steps", ALL, OFF(warmup_steps), P_COUNT, 0, 1e18, false, false,
     "an integer >= 0"},
    {"total_steps", ALL, OFF(total_steps), P_COUNT, 1, 1e18, false, false, "an integer >= 1"},
    {"final_lr", ALL, OFF(final_lr), P_REAL, 0, INFINITY, false, true, "a number >= 0"},
    {"warmup_begin_lr", ALL, OFF(warmup_begin_lr), P_REAL, 0, INFINITY, false, true,
     "a number >= 0"},
    {"power", ALL, OFF(power), P_REAL, 0, INFINITY, true, true, "a number > 0"},
};
#define NPARAMS (sizeof params / sizeof params[0])

static int parse_real(const char *v, double *out)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (end == v || *end != '\0' || errno == ERANGE || !isfinite(d))
        return -1;
    *out = d;
    return 0;
}

static int set_param(optim_spec *o, const struct param *p, const char *word, const char *v,
                     char *why, size_t whylen)
{
    char *base = (char *)o + p->off;
    double d;
    switch (p->pk) {
    case P_SCHED:
        for (int k = OPTIM_SCHED_FACTOR; k <= OPTIM_SCHED_POLY; k++)
            if (!strcmp(v, optim_sched_name(k))) {
                *(int *)base = k;
                return 0;
            }
        return bad(why, whylen, "'%s': unknown lr_scheduler (known: %s)", word, p->range);
    case P_BOOL:
        if (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "True"))
            *(bool *)base = true;
        else if (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "False"))
            *(bool *)base = false;
        else
            return bad(why, whylen, "'%s': expected %s", word, p->range);
        return 0;
    case P_COUNT: {
        char *end;
        errno = 0;
        unsigned long long n = strtoull(v, &end, 10);
        if (end == v || *end || errno || v[0] == '-' || (double)n < p->lo ||
            n > (unsigned long long)1e18)
            return bad(why, whylen, "'%s': expected %s", word, p->range);
        *(uint64_t *)base = n;
        return 0;
    }
    case P_REAL:
        if (parse_real(v, &d) != 0 || (p->lo_open ? d <= p->lo : d < p->lo) ||
            (p->hi_open ? d >= p->hi : d > p->hi))
            return bad(why, whylen, "'%s': expected %s", word, p->range);
        *(double *)base = d;
        return 0;
    }
    return KVS_EINVAL;
}

/* The parameters of the warmup/decay schedules fit the one chosen. */
static int check_decay(const optim_spec *o, const bool *seen, char *why, size_t whylen)
{
    bool decay = o->sched == OPTIM_SCHED_WARMUP_COSINE || o->sched == OPTIM_SCHED_WARMUP_LINEAR ||
                 o->sched == OPTIM_SCHED_POLY;
    for (size_t i = 0; i < NPARAMS; i++) {
        if (!seen[i])
            continue;
        size_t off = params[i].off;
        bool mine = off == OFF(warmup_steps) || off == OFF(total_steps) ||
                    off == OFF(final_lr) || off == OFF(warmup_begin_lr);
        if (mine && !decay)
            return bad(why, whylen, "'%s': needs lr_scheduler=warmup_cosine, warmup_linear or "
                       "poly", params[i].name);
        if (off == OFF(power) && o->sched != OPTIM_SCHED_POLY)
            return bad(why, whylen, "'power': needs lr_scheduler=poly");
    }
    if (!decay)
        return 0;
    if (o->total_steps == 0)
        return bad(why, whylen, "'lr_scheduler=%s': needs total_steps=N (the update at which "
                   "the rate reaches final_lr)", optim_sched_name(o->sched));
    if (o->warmup_steps >= o->total_steps)
        return bad(why, whylen, "'warmup_steps=%llu': expected warmup_steps < total_steps (%llu)",
                   (unsigned long long)o->warmup_steps, (unsigned long long)o->total_steps);
    return 0;
}

int optim_parse(const char *spec, optim_spec *out, char *why, size_t whylen)
{
    char buf[OPTIM_SPEC_MAX], *save = NULL, *w;
    bool seen[NPARAMS] = {false}, sched_arg = false;
    int kind = OPTIM_NONE;
    if (spec == NULL)
        return bad(why, whylen, "the optimizer spec is NULL");
    if (strlen(spec) >= sizeof buf)
        return bad(why, whylen, "the optimizer spec is longer than %d bytes", OPTIM_SPEC_MAX - 1);
    snprintf(buf, sizeof buf, "%s", spec);
    w = strtok_r(buf, " \t\n", &save);
    if (w == NULL)
        return bad(why, whylen, "the optimizer spec is empty: expected a name (" KNOWN
                   ") and key=value settings");
    for (int k = OPTIM_SGD; k <= OPTIM_KIND_MAX; k++)
        if (!strcmp(w, optim_name(k)))
            kind = k;
    if (kind == OPTIM_NONE)
        return bad(why, whylen, "'%s': unknown optimizer (known: " KNOWN ")", w);
    defaults(out, kind);
    while ((w = strtok_r(NULL, " \t\n", &save)) != NULL) {
        char *eq = strchr(w, '=');
        size_t i;
        if (eq == NULL || eq == w || eq[1] == '\0')
            return bad(why, whylen, "'%s': expected key=value", w);
        *eq = '\0';
        for (i = 0; i < NPARAMS; i++)
            if (!strcmp(params[i].name, w))
                break;
        if (i == NPARAMS || !(params[i].kinds & K(kind))) {
            *eq = '=';
            return bad(why, whylen, "'%s': %s takes no parameter '%.*s'", w, optim_name(kind),
                       (int)(eq - w), w);
        }
        *eq = '=';
        if (seen[i] || (params[i].off == OFF(epsilon) && (seen[7] || seen[8])))
            return bad(why, whylen, "'%s': %.*s given twice", w, (int)(eq - w), w);
        seen[i] = true;
        if (set_param(out, &params[i], w, eq + 1, why, whylen) != 0)
            return KVS_EINVAL;
        if (params[i].off == OFF(step) || params[i].off == OFF(factor) ||
            params[i].off == OFF(stop_factor_lr))
            sched_arg = true;
    }
    if (sched_arg && out->sched != OPTIM_SCHED_FACTOR)
        return bad(why, whylen, "'%s': step, factor and stop_factor_lr need lr_scheduler=factor",
                   seen[15] ? "step" : seen[16] ? "factor" : "stop_factor_lr");
    if (out->sched == OPTIM_SCHED_FACTOR && out->step == 0)
        return bad(why, whylen, "'lr_scheduler=factor': needs step=N (updates per factor)");
    return check_decay(out, seen, why, whylen);
}

/* The shortest %g text of d that reads back as d ("0.1", not 0.1000...01). */
static const char *real(double d, char *buf)
{
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(buf, 32, "%.*g", prec, d);
        if (strtod(buf, NULL) == d)
            break;
    }
    return buf;
}

void optim_format(const optim_spec *o, char *buf, size_t len)
{
    char r[8][32];
    int n = snprintf(buf, len,
                     "%s learning_rate=%s wd=%s rescale_grad=%s clip_gradient=%s "
                     "multi_precision=%d",
                     optim_name(o->kind), real(o->learning_rate, r[0]), real(o->wd, r[1]),
                     real(o->rescale_grad, r[2]), real(o->clip_gradient, r[3]),
                     o->multi_precision ? 1 : 0);
    size_t used = n > 0 ? (size_t)n : 0;
#define MORE(...)                                                                \
    do {                                                                         \
        if (used < len) {                                                        \
            int m_ = snprintf(buf + used, len - used, __VA_ARGS__);              \
            used += m_ > 0 ? (size_t)m_ : 0;                                     \
        }                                                                        \
    } while (0)
    switch (o->kind) {
    case OPTIM_SGD:
    case OPTIM_NAG: MORE(" momentum=%s", real(o->momentum, r[0])); break;
    case OPTIM_ADAM:
    case OPTIM_ADAMW:
        MORE(" beta1=%s beta2=%s epsilon=%s", real(o->beta1, r[0]), real(o->beta2, r[1]),
             real(o->epsilon, r[2]));
        break;
    case OPTIM_LAMB:
        MORE(" beta1=%s beta2=%s epsilon=%s lower_bound=%s upper_bound=%s bias_correction=%d",
             real(o->beta1, r[0]), real(o->beta2, r[1]), real(o->epsilon, r[2]),
             real(o->lower_bound, r[3]), real(o->upper_bound, r[4]), o->bias_correction ? 1 : 0);
        break;
    case OPTIM_ADAGRAD: MORE(" epsilon=%s", real(o->epsilon, r[0])); break;
    case OPTIM_RMSPROP:
        MORE(" gamma1=%s gamma2=%s epsilon=%s centered=%d clip_weights=%s",
             real(o->gamma1, r[0]), real(o->gamma2, r[1]), real(o->epsilon, r[2]),
             o->centered ? 1 : 0, real(o->clip_weights, r[3]));
        break;
    }
    if (o->sched == OPTIM_SCHED_FACTOR)
        MORE(" lr_scheduler=factor step=%llu factor=%s stop_factor_lr=%s",
             (unsigned long long)o->step, real(o->factor, r[0]), real(o->stop_factor_lr, r[1]));
    else if (o->sched != OPTIM_SCHED_NONE)
        MORE(" lr_scheduler=%s warmup_steps=%llu total_steps=%llu final_lr=%s "
             "warmup_begin_lr=%s",
             optim_sched_name(o->sched), (unsigned long long)o->warmup_steps,
             (unsigned long long)o->total_steps, real(o->final_lr, r[0]),
             real(o->warmup_begin_lr, r[1]));
    if (o->sched == OPTIM_SCHED_POLY)
        MORE(" power=%s", real(o->power, r[0]));
#undef MORE
}

/* The next blank-separated word of *p (length in *n), or NULL. */
static const char *next_word(const char **p, size_t *n)
{
    const char *s = *p;
    while (*s == ' ')
        s++;
    if (*s == '\0')
        return NULL;
    const char *e = s;
    while (*e && *e != ' ')
        e++;
    *n = (size_t)(e - s);
    *p = e;
    return s;
}

const char *optim_diff(const char *a, const char *b, char *why, size_t whylen)
{
    const char *pa = a, *pb = b, *wa, *wb;
    size_t na = 0, nb = 0;
    for (;;) {
        wa = next_word(&pa, &na);
        wb = next_word(&pb, &nb);
        if (wa == NULL && wb == NULL)
            return NULL;
        if (wa == NULL || wb == NULL || na != nb || memcmp(wa, wb, na) != 0)
            break;
    }
    if (wb == NULL)
        snprintf(why, whylen, "'%.*s' (set before) is missing", (int)na, wa);
    else if (wa == NULL)
        snprintf(why, whylen, "'%.*s' was not set before", (int)nb, wb);
    else
        snprintf(why, whylen, "'%.*s' differs from '%.*s'", (int)nb, wb, (int)na, wa);
    return why;
}

int optim_parse_mult(const char *text, optim_mult *out, char *why, size_t whylen)
{
    char buf[512], *save = NULL, *w, *from;
    bool seen_lr = false, seen_wd = false;
    out->lr_mult = out->wd_mult = 1.0;
    if (text == NULL)
        return bad(why, whylen, "the multipliers are NULL");
    if (strlen(text) >= sizeof buf)
        return bad(why, whylen, "the multipliers are longer than %zu bytes", sizeof buf - 1);
    snprintf(buf, sizeof buf, "%s", text);
    for (from = buf; (w = strtok_r(from, " \t\n", &save)) != NULL; from = NULL) {
        double d;
        char *eq = strchr(w, '=');
        if (eq == NULL || eq[1] == '\0')
            return bad(why, whylen, "'%s': expected lr_mult=X or wd_mult=X", w);
        bool lr = (size_t)(eq - w) == 7 && !strncmp(w, "lr_mult", 7);
        bool wd = (size_t)(eq - w) == 7 && !strncmp(w, "wd_mult", 7);
        if (!lr && !wd)
            return bad(why, whylen, "'%s': unknown setting (a key takes lr_mult and wd_mult)", w);
        if ((lr && seen_lr) || (wd && seen_wd))
            return bad(why, whylen, "'%s': given twice", w);
        if (parse_real(eq + 1, &d) != 0 || d < 0)
            return bad(why, whylen, "'%s': expected a finite number >= 0", w);
        if (lr) {
            out->lr_mult = d;
            seen_lr = true;
        } else {
            out->wd_mult = d;
            seen_wd = true;
        }
    }
    return 0;
}

bool optim_dtype_ok(kvs_dtype dtype)
{
    return dtype == KVS_FLOAT32 || dtype == KVS_FLOAT64 || dtype == KVS_FLOAT16 ||
           dtype == KVS_BFLOAT16;
}

kvs_dtype optim_state_dtype(kvs_dtype dtype)
{
    return dtype == KVS_FLOAT64 ? KVS_FLOAT64 : KVS_FLOAT32;
}

bool optim_has_master(const optim_spec *o, kvs_dtype dtype)
{
    return o->multi_precision && (dtype == KVS_FLOAT16 || dtype == KVS_BFLOAT16);
}

int optim_nstate(const optim_spec *o, kvs_dtype dtype)
{
    int n = 0;
    switch (o->kind) {
    case OPTIM_SGD: n = o->momentum != 0.0; break; /* MXNet: no state without momentum */
    case OPTIM_NAG: n = 1; break;
    case OPTIM_ADAM:
    case OPTIM_ADAMW:
    case OPTIM_LAMB: n = 2; break;
    case OPTIM_ADAGRAD: n = 1; break;
    case OPTIM_RMSPROP: n = o->centered ? 3 : 1; break;
    }
    return n + (optim_has_master(o, dtype) ? 1 : 0);
}

/* MXNet's FactorScheduler (python/mxnet/lr_scheduler.py):
 *     while num_update > count + step:
 *         count += step; base_lr *= factor
 *         if base_lr < stop_factor_lr: base_lr = stop_factor_lr
 * i.e. floor((t - 1) / step) reductions at update t, each clamped. */
static double decay_lr(const optim_spec *o, uint64_t t);

double optim_sched_lr(const optim_spec *o, uint64_t t)
{
    double lr = o->learning_rate;
    if (o->sched == OPTIM_SCHED_NONE || t == 0)
        return lr;
    if (o->sched != OPTIM_SCHED_FACTOR)
        return decay_lr(o, t);
    uint64_t k = (t - 1) / o->step;
    for (uint64_t i = 0; i < k; i++) {
        lr *= o->factor;
        if (lr < o->stop_factor_lr) {
            lr = o->stop_factor_lr; /* factor <= 1: it stays there */
            break;
        }
        if (o->factor == 1.0)
            break;
    }
    return lr;
}

/* MXNet's CosineScheduler and PolyScheduler (python/mxnet/lr_scheduler.py)
 * with warmup_mode='linear', base = learning_rate, W = warmup_steps,
 * T = total_steps (MXNet's max_update), t the update count:
 *   t < W:   warmup_begin_lr + (base - warmup_begin_lr) * t / W
 *   t >= T:  final_lr
 *   else, x = (t - W) / (T - W):
 *     warmup_cosine: final_lr + (base - final_lr) * (1 + cos(pi * (t - W) / (T - W))) / 2
 *     warmup_linear: final_lr + (base - final_lr) * (1 - x)    (poly, power 1)
 *     poly:          final_lr + (base - final_lr) * pow(1 - x, power) */
static double decay_lr(const optim_spec *o, uint64_t t)
{
    double base = o->learning_rate, fin = o->final_lr;
    uint64_t w = o->warmup_steps, T = o->total_steps;
    if (t < w)
        return o->warmup_begin_lr + (base - o->warmup_begin_lr) * (double)t / (double)w;
    if (t >= T)
        return fin;
    double d = (double)(t - w), span = (double)(T - w);
    switch (o->sched) {
    case OPTIM_SCHED_WARMUP_COSINE: return fin + (base - fin) * (1.0 + cos(M_PI * d / span)) / 2.0;
    case OPTIM_SCHED_WARMUP_LINEAR: return fin + (base - fin) * (1.0 - d / span);
    default: return fin + (base - fin) * pow(1.0 - d / span, o->power);
    }
}

bool optim_two_phase(const optim_spec *o) { return o->kind == OPTIM_LAMB; }

void optim_step_init(optim_step *s, const optim_spec *o, uint64_t t, const optim_mult *m)
{
    s->o = o;
    s->lr = optim_sched_lr(o, t) * (m ? m->lr_mult : 1.0);
    s->wd = o->wd * (m ? m->wd_mult : 1.0);
    s->lr_t = s->lr;
    if (o->kind == OPTIM_ADAM) {
        /* MXNet Adam.update: lr *= sqrt(1 - beta2**t) / (1 - beta1**t) */
        double c1 = 1.0 - pow(o->beta1, (double)t), c2 = 1.0 - pow(o->beta2, (double)t);
        s->lr_t = s->lr * sqrt(c2) / c1;
    }
    s->bc1 = s->bc2 = 1.0;
    if (o->kind == OPTIM_ADAMW) {
        /* torch.optim.AdamW: step_size = lr / (1 - beta1^t);
         * denom = sqrt(v) / sqrt(1 - beta2^t) + eps */
        s->lr_t = s->lr / (1.0 - pow(o->beta1, (double)t));
        s->bc2 = sqrt(1.0 - pow(o->beta2, (double)t));
    }
    if (o->kind == OPTIM_LAMB && o->bias_correction) {
        s->bc1 = 1.0 - pow(o->beta1, (double)t);
        s->bc2 = 1.0 - pow(o->beta2, (double)t);
    }
}
