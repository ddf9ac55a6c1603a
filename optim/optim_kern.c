/* optim_kern.c - the update kernels of the server-side optimizers.
 *
 * Every rule below is MXNet 1.x's (src/operator/optimizer_op-inl.h and
 * python/mxnet/optimizer/optimizer.py), with clip(x) = min(max(x, -c), c)
 * applied only when clip_gradient c > 0, and lr, wd already multiplied by
 * the key's lr_mult / wd_mult and lr by the schedule:
 *
 *  sgd, momentum 0 (SGDKernel):   w = (1 - lr*wd)*w - lr*clip(rescale_grad*g)
 *  sgd with momentum (SGDMomKernel):
 *                                 m = momentum*m - lr*wd*w - lr*clip(rescale_grad*g)
 *                                 w = w + m
 *  nag (NAGMomKernel):            g' = clip(rescale_grad*g) + wd*w
 *                                 m  = momentum*m + g'
 *                                 w  = w - lr*(g' + momentum*m)
 *  adam (AdamUpdateKernel; Adam.update for lr_t):
 *                                 g' = clip(rescale_grad*g) + wd*w
 *                                 m  = beta1*m + (1-beta1)*g'
 *                                 v  = beta2*v + (1-beta2)*g'^2
 *                                 lr_t = lr*sqrt(1-beta2^t)/(1-beta1^t), t = the key's update count
 *                                 w  = w - lr_t*m/(sqrt(v) + epsilon)
 *  adagrad (AdaGrad.update):      g' = clip(rescale_grad*g)
 *                                 h  = h + g'^2
 *                                 w  = w - lr*(g'/sqrt(h + eps) + wd*w)
 *  rmsprop (RMSPropUpdateKernel): g' = clip(rescale_grad*g + wd*w)
 *                                 n  = (1-gamma1)*g'^2 + gamma1*n
 *                                 w  = w - lr*g'/sqrt(n + epsilon)
 *  rmsprop centered=1 (RMSPropAlexUpdateKernel, Graves 2013):
 *                                 g' = clip(rescale_grad*g + wd*w)
 *                                 n  = (1-gamma1)*g'^2 + gamma1*n
 *                                 s  = (1-gamma1)*g' + gamma1*s
 *                                 d  = gamma2*d - lr*g'/sqrt(n - s^2 + epsilon)
 *                                 w  = w + d
 *  rmsprop clip_weights c > 0:    w = clip(w) to [-c, c] after the step.
 *  adamw (torch.optim.AdamW, Loshchilov & Hutter's decoupled weight decay):
 *                                 g' = clip(rescale_grad*g)
 *                                 m  = beta1*m + (1-beta1)*g'
 *                                 v  = beta2*v + (1-beta2)*g'^2
 *                                 step = lr/(1-beta1^t), d = sqrt(v)/sqrt(1-beta2^t) + epsilon
 *                                 w  = w*(1 - lr*wd) - step*(m/d)
 *  lamb: two phases over the whole key, optim/lamb.c.
 *
 * (MXNet 1.x's fused adam kernel clips rescale_grad*g + wd*w as a whole;
 * its Python Adam and the formula kvsd documents clip before adding wd*w.
 * With clip_gradient off, the two are the same.)
 *
 * Built with -O3 -fno-math-errno -ffp-contract=off (optim/module.mk): the
 * loops vectorise (sqrt and division are correctly rounded in SIMD too),
 * and no multiply-add is fused, so every element gets the same bits whatever
 * the vector width, the chunking or the thread that ran it.
 */
#include <math.h>
#include <stdint.h>

#include "optim/optim.h"
#include "reduce/reduce.h"

#define DEFINE_KERNELS(T, S)                                                            \
    typedef struct kp_##S {                                                            \
        T lr, wd, rg, clip, mom, b1, b2, eps, lr_t, g1, g2, cw, bc2, decay;            \
        int do_clip, do_cw;                                                            \
    } kp_##S;                                                                          \
                                                                                       \
    static inline T clip_##S(T x, T c) { return x > c ? c : (x < -c ? -c : x); }       \
                                                                                       \
    static void sgd_##S(const kp_##S *p, T *restrict g, const T *restrict w, uint64_t n) \
    {                                                                                  \
        const T a = (T)1 - p->lr * p->wd;                                              \
        for (uint64_t i = 0; i < n; i++) {                                             \
            T gr = p->rg * g[i];                                                       \
            if (p->do_clip)                                                            \
                gr = clip_##S(gr, p->clip);                                            \
            g[i] = a * w[i] - p->lr * gr;                                              \
        }                                                                              \
    }                                                                                  \
                                                                                       \
    static void sgd_mom_##S(const kp_##S *p, T *restrict g, const T *restrict w,         \
                            T *restrict m, uint64_t n)                                  \
    {                                                                                  \
        const T lrwd = p->lr * p->wd;                                                  \
        for (uint64_t i = 0; i < n; i++) {                                             \
            T gr = p->rg * g[i];                                                       \
            if (p->do_clip)                                                            \
                gr = clip_##S(gr, p->clip);                                            \
            T mm = p->mom * m[i] - lrwd * w[i] - p->lr * gr;                           \
            m[i] = mm;                                                                 \
            g[i] = w[i] + mm;                                                          \
        }                                                                              \
    }                                                                                  \
                                                                                       \
    static void nag_##S(const kp_##S *p, T *restrict g, const T *restrict w,             \
                        T *restrict m, uint64_t n)                                      \
    {                                                                                  \
        for (uint64_t i = 0; i < n; i++) {                                             \
            T gr = p->rg * g[i];                                                       \
            if (p->do_clip)                                                            \
                gr = clip_##S(gr, p->clip);                                            \
            gr = gr + p->wd * w[i];                                                    \
            T mm = p->mom * m[i] + gr;                                                 \
            m[i] = mm;                                                                 \
            g[i] = w[i] - p->lr * (gr + p->mom * mm);                                  \
        }                                                                              \
    }                                                                                  \
                                                                                       \
    static void adam_##S(const kp_##S *p, T *restrict g, const T *restrict w,            \
                         T *restrict m, T *restrict v, uint64_t n)                      \
    {                                                                                  \
        const T c1 = (T)1 - p->b1, c2 = (T)1 - p->b2;                                  \
        for (uint64_t i = 0; i < n; i++) {                                             \
            T gr = p->rg * g[i];                                                       \
            if (p->do_clip)                                                            \
                gr = clip_##S(gr, p->clip);                                            \
            gr = gr + p->wd * w[i];                                                    \
            T mm = p->b1 * m[i] + c1 * gr;                                             \
            T vv = p->b2 * v[i] + c2 * (gr * gr);                                      \
            m[i] = mm;                                                                 \
            v[i] = vv;                                                                 \
            g[i] = w[i] - p->lr_t * mm / (sqrt_##S(vv) + p->eps);                      \
        }                                                                              \
    }                                                                                  \
                                                                                       \
    static void adamw_##S(const kp_##S *p, T *restrict g, const T *restrict w,           \
                          T *restrict m, T *restrict v, uint64_t n)                     \
    {                                                                                  \
        const T c1 = (T)1 - p->b1, c2 = (T)1 - p->b2;                                  \
        for (uint64_t i = 0; i < n; i++) {                                             \
            T gr = p->rg * g[i];                                                       \
            if (p->do_clip)                                                            \
                gr = clip_##S(gr, p->clip);                                            \
            T mm = p->b1 * m[i] + c1 * gr;                                             \
            T vv = p->b2 * v[i] + c2 * (gr * gr);                                      \
            m[i] = mm;                                                                 \
            v[i] = vv;                                                                 \
            T den = sqrt_##S(vv) / p->bc2 + p->eps;                                    \
            g[i] = w[i] * p->decay - p->lr_t * (mm / den);                             \
        }                                                                              \
    }                                                                                  \
                                                                                       \
    static void adagrad_##S(const kp_##S *p, T *restrict g, const T *restrict w,         \
                            T *restrict h, uint64_t n)                                  \
    {                                                                                  \
        for (uint64_t i = 0; i < n; i++) {                                             \
            T gr = p->rg * g[i];                                                       \
            if (p->do_clip)                                                            \
                gr = clip_##S(gr, p->clip);                                            \
            T hh = h[i] + gr * gr;                                                     \
            h[i] = hh;                                                                 \
            g[i] = w[i] - p->lr * (gr / sqrt_##S(hh + p->eps) + p->wd * w[i]);         \
        }                                                                              \
    }                                                                                  \
                                                                                       \
    static void rmsprop_##S(const kp_##S *p, T *restrict g, const T *restrict w,         \
                            T *restrict nn, uint64_t n)                                 \
    {                                                                                  \
        const T c1 = (T)1 - p->g1;                                                     \
        for (uint64_t i = 0; i < n; i++) {                                             \
            T gr = p->rg * g[i] + p->wd * w[i];                                        \
            if (p->do_clip)                                                            \
                gr = clip_##S(gr, p->clip);                                            \
            T st = c1 * (gr * gr) + p->g1 * nn[i];                                     \
            nn[i] = st;                                                                \
            T nw = w[i] - p->lr * gr / sqrt_##S(st + p->eps);                          \
            if (p->do_cw)                                                              \
                nw = clip_##S(nw, p->cw);                                              \
            g[i] = nw;                                                                 \
        }                                                                              \
    }                                                                                  \
                                                                                       \
    static void rmsprop_c_##S(const kp_##S *p, T *restrict g, const T *restrict w,       \
                              T *restrict nn, T *restrict sg, T *restrict d, uint64_t n) \
    {                                                                                  \
        const T c1 = (T)1 - p->g1;                                                     \
        for (uint64_t i = 0; i < n; i++) {                                             \
            T gr = p->rg * g[i] + p->wd * w[i];                                        \
            if (p->do_clip)                                                            \
                gr = clip_##S(gr, p->clip);                                            \
            T st = c1 * (gr * gr) + p->g1 * nn[i];                                     \
            T sgg = c1 * gr + p->g1 * sg[i];                                           \
            T dd = p->g2 * d[i] - p->lr * (gr / sqrt_##S(st - sgg * sgg + p->eps));    \
            nn[i] = st;                                                                \
            sg[i] = sgg;                                                               \
            d[i] = dd;                                                                 \
            T nw = w[i] + dd;                                                          \
            if (p->do_cw)                                                              \
                nw = clip_##S(nw, p->cw);                                              \
            g[i] = nw;                                                                 \
        }                                                                              \
    }                                                                                  \
                                                                                       \
    static void kp_init_##S(kp_##S *p, const optim_step *s)                            \
    {                                                                                  \
        const optim_spec *o = s->o;                                                    \
        p->lr = (T)s->lr;                                                              \
        p->wd = (T)s->wd;                                                              \
        p->rg = (T)o->rescale_grad;                                                    \
        p->clip = (T)o->clip_gradient;                                                 \
        p->do_clip = o->clip_gradient > 0;                                             \
        p->mom = (T)o->momentum;                                                       \
        p->b1 = (T)o->beta1;                                                           \
        p->b2 = (T)o->beta2;                                                           \
        p->eps = (T)o->epsilon;                                                        \
        p->lr_t = (T)s->lr_t;                                                          \
        p->bc2 = (T)s->bc2;                                                            \
        p->decay = (T)(1.0 - s->lr * s->wd);                                           \
        p->g1 = (T)o->gamma1;                                                          \
        p->g2 = (T)o->gamma2;                                                          \
        p->cw = (T)o->clip_weights;                                                    \
        p->do_cw = o->kind == OPTIM_RMSPROP && o->clip_weights > 0;                    \
    }                                                                                  \
                                                                                       \
    /* g[0..n) in place; st[j] already offset to the range */                          \
    static void run_##S(const optim_step *s, T *g, const T *w, T *const *st, uint64_t n) \
    {                                                                                  \
        kp_##S p;                                                                      \
        kp_init_##S(&p, s);                                                            \
        switch (s->o->kind) {                                                          \
        case OPTIM_SGD:                                                                \
            if (s->o->momentum != 0.0)                                                 \
                sgd_mom_##S(&p, g, w, st[0], n);                                       \
            else                                                                       \
                sgd_##S(&p, g, w, n);                                                  \
            break;                                                                     \
        case OPTIM_NAG: nag_##S(&p, g, w, st[0], n); break;                            \
        case OPTIM_ADAM: adam_##S(&p, g, w, st[0], st[1], n); break;                   \
        case OPTIM_ADAMW: adamw_##S(&p, g, w, st[0], st[1], n); break;                 \
        case OPTIM_LAMB: break; /* two phases: optim/lamb.c */                         \
        case OPTIM_ADAGRAD: adagrad_##S(&p, g, w, st[0], n); break;                    \
        case OPTIM_RMSPROP:                                                            \
            if (s->o->centered)                                                        \
                rmsprop_c_##S(&p, g, w, st[0], st[1], st[2], n);                       \
            else                                                                       \
                rmsprop_##S(&p, g, w, st[0], n);                                       \
            break;                                                                     \
        }                                                                              \
    }

static inline float sqrt_f(float x) { return __builtin_sqrtf(x); }
static inline double sqrt_d(double x) { return __builtin_sqrt(x); }

DEFINE_KERNELS(float, f)
DEFINE_KERNELS(double, d)

#define HALF_BLOCK 512 /* elements converted to float32 at a time */

void optim_update(const optim_step *s, kvs_dtype dtype, const void *w, void *g,
                  void *const *state, uint64_t lo, uint64_t hi)
{
    int ns = optim_nstate(s->o, dtype);
    uint64_t n = hi - lo;
    if (dtype == KVS_FLOAT64) {
        double *st[OPTIM_MAX_STATE];
        for (int j = 0; j < ns; j++)
            st[j] = (double *)state[j] + lo;
        run_d(s, (double *)g + lo, (const double *)w + lo, st, n);
        return;
    }
    if (dtype == KVS_FLOAT32) {
        float *st[OPTIM_MAX_STATE];
        for (int j = 0; j < ns; j++)
            st[j] = (float *)state[j] + lo;
        run_f(s, (float *)g + lo, (const float *)w + lo, st, n);
        return;
    }
    /* float16 / bfloat16: convert a block to float32, update, round back */
    bool master = optim_has_master(s->o, dtype);
    float wt[HALF_BLOCK], gt[HALF_BLOCK];
    for (uint64_t b = lo; b < hi; b += HALF_BLOCK) {
        uint64_t k = hi - b < HALF_BLOCK ? hi - b : HALF_BLOCK;
        float *st[OPTIM_MAX_STATE];
        for (int j = 0; j < ns; j++)
            st[j] = (float *)state[j] + b;
        red_to_f32(dtype, gt, (const uint16_t *)g + b, k);
        const float *wp = wt;
        if (master)
            wp = st[ns - 1];
        else
            red_to_f32(dtype, wt, (const uint16_t *)w + b, k);
        run_f(s, gt, wp, st, k);
        if (master)
            for (uint64_t i = 0; i < k; i++)
                st[ns - 1][i] = gt[i];
        red_from_f32(dtype, (uint16_t *)g + b, gt, k);
    }
}
