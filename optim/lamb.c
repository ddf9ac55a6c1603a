/* lamb.c - LAMB (You et al., "Large Batch Optimization for Deep Learning",
 * 2019), the two phases of MXNet 1.x's lamb_update_phase1/phase2
 * (src/operator/optimizer_op-inl.h), with clip(x) as in optim_kern.c:
 *
 *   phase 1, per element:   g' = clip(rescale_grad*g)
 *                           m  = beta1*m + (1-beta1)*g'
 *                           v  = beta2*v + (1-beta2)*g'^2
 *                           r  = (m/bc1) / (sqrt(v/bc2) + epsilon) + wd*w
 *                           (bc1 = 1-beta1^t, bc2 = 1-beta2^t; 1 and 1 with
 *                           bias_correction=0)
 *   between, per key:       r1 = ||w||, r2 = ||r|| over the whole key;
 *                           lower_bound > 0: r1 = max(r1, lower_bound);
 *                           upper_bound > 0: r1 = min(r1, upper_bound);
 *                           ratio = r1/r2, or 1 when r1 or r2 is 0
 *   phase 2, per element:   w  = w - (lr*ratio)*r   (r recomputed: same bits)
 *
 * Element arithmetic is in the key's update type (float32 or float64, as
 * optim_kern.c, no fused multiply-add: module.mk); the sums of squares are
 * float64 in a fixed order (optim.h), so a key's norms do not depend on the
 * threads or on how a part was split into whole blocks.
 */
#include <math.h>
#include <stdint.h>

#include "optim/optim.h"
#include "reduce/reduce.h"

#define HALF_BLOCK 512 /* elements converted to float32 at a time */
#define LAMB_PIECE 256 /* phase 1: m, v and r of so many elements, then their squares */

#define DEFINE_LAMB(T, S, SQRT)                                                          \
    typedef struct lp_##S {                                                             \
        T rg, clip, b1, b2, c1, c2, eps, bc1, bc2, wd, lrr;                             \
        int do_clip;                                                                    \
    } lp_##S;                                                                           \
                                                                                        \
    static void lp_init_##S(lp_##S *p, const optim_step *s, double ratio)               \
    {                                                                                   \
        const optim_spec *o = s->o;                                                     \
        p->rg = (T)o->rescale_grad;                                                     \
        p->clip = (T)o->clip_gradient;                                                  \
        p->do_clip = o->clip_gradient > 0;                                              \
        p->b1 = (T)o->beta1;                                                            \
        p->b2 = (T)o->beta2;                                                            \
        p->c1 = (T)1 - p->b1;                                                           \
        p->c2 = (T)1 - p->b2;                                                           \
        p->eps = (T)o->epsilon;                                                         \
        p->bc1 = (T)s->bc1;                                                             \
        p->bc2 = (T)s->bc2;                                                             \
        p->wd = (T)s->wd;                                                               \
        p->lrr = (T)(s->lr * ratio);                                                    \
    }                                                                                   \
                                                                                        \
    /* r of one element from the updated m, v */                                        \
    static inline T dir_##S(const lp_##S *p, T mm, T vv, T w)                           \
    {                                                                                   \
        return (mm / p->bc1) / (SQRT(vv / p->bc2) + p->eps) + p->wd * w;                \
    }                                                                                   \
                                                                                        \
    /* n <= LAMB_PIECE elements: m, v and r (vectorised) */                             \
    static void ph1v_##S(const lp_##S *p, const T *restrict g, const T *restrict w,     \
                         T *restrict m, T *restrict v, T *restrict r, uint64_t n)       \
    {                                                                                   \
        for (uint64_t i = 0; i < n; i++) {                                              \
            T gr = p->rg * g[i];                                                        \
            if (p->do_clip)                                                             \
                gr = gr > p->clip ? p->clip : (gr < -p->clip ? -p->clip : gr);          \
            T mm = p->b1 * m[i] + p->c1 * gr;                                           \
            T vv = p->b2 * v[i] + p->c2 * (gr * gr);                                    \
            m[i] = mm;                                                                  \
            v[i] = vv;                                                                  \
            r[i] = dir_##S(p, mm, vv, w[i]);                                            \
        }                                                                               \
    }                                                                                   \
                                                                                        \
    /* n elements; adds to sums[0], sums[1] in element order */                         \
    static void ph1_##S(const lp_##S *p, const T *restrict g, const T *restrict w,      \
                        T *restrict m, T *restrict v, uint64_t n, double *sums)         \
    {                                                                                   \
        double ws = sums[0], rs = sums[1];                                              \
        T r[LAMB_PIECE];                                                                \
        for (uint64_t b = 0; b < n; b += LAMB_PIECE) {                                  \
            uint64_t k = n - b < LAMB_PIECE ? n - b : LAMB_PIECE;                       \
            ph1v_##S(p, g + b, w + b, m + b, v + b, r, k);                              \
            for (uint64_t i = 0; i < k; i++) {                                          \
                ws += (double)w[b + i] * (double)w[b + i];                              \
                rs += (double)r[i] * (double)r[i];                                      \
            }                                                                           \
        }                                                                               \
        sums[0] = ws;                                                                   \
        sums[1] = rs;                                                                   \
    }                                                                                   \
                                                                                        \
    static void ph2_##S(const lp_##S *p, T *restrict g, const T *restrict w,            \
                        const T *restrict m, const T *restrict v, uint64_t n)           \
    {                                                                                   \
        for (uint64_t i = 0; i < n; i++)                                                \
            g[i] = w[i] - p->lrr * dir_##S(p, m[i], v[i], w[i]);                        \
    }

DEFINE_LAMB(float, f, __builtin_sqrtf)
DEFINE_LAMB(double, d, __builtin_sqrt)

/* Phase 1 of [lo, hi) inside one norm block (sums: that block's pair). */
static void ph1_range(const optim_step *s, kvs_dtype dtype, const void *w, const void *g,
                      void *const *state, uint64_t lo, uint64_t hi, double *sums)
{
    if (dtype == KVS_FLOAT64) {
        lp_d p;
        lp_init_d(&p, s, 1.0);
        ph1_d(&p, (const double *)g + lo, (const double *)w + lo, (double *)state[0] + lo,
              (double *)state[1] + lo, hi - lo, sums);
        return;
    }
    lp_f p;
    lp_init_f(&p, s, 1.0);
    if (dtype == KVS_FLOAT32) {
        ph1_f(&p, (const float *)g + lo, (const float *)w + lo, (float *)state[0] + lo,
              (float *)state[1] + lo, hi - lo, sums);
        return;
    }
    bool master = optim_has_master(s->o, dtype);
    int ns = optim_nstate(s->o, dtype);
    float wt[HALF_BLOCK], gt[HALF_BLOCK];
    for (uint64_t b = lo; b < hi; b += HALF_BLOCK) {
        uint64_t k = hi - b < HALF_BLOCK ? hi - b : HALF_BLOCK;
        const float *wp = wt;
        red_to_f32(dtype, gt, (const uint16_t *)g + b, k);
        if (master)
            wp = (const float *)state[ns - 1] + b;
        else
            red_to_f32(dtype, wt, (const uint16_t *)w + b, k);
        ph1_f(&p, gt, wp, (float *)state[0] + b, (float *)state[1] + b, k, sums);
    }
}

void optim_lamb_phase1(const optim_step *s, kvs_dtype dtype, const void *w, const void *g,
                       void *const *state, uint64_t lo, uint64_t hi, double *sums)
{
    for (uint64_t b = lo; b < hi;) {
        uint64_t blk = b / OPTIM_NORM_BLOCK, end = (blk + 1) * (uint64_t)OPTIM_NORM_BLOCK;
        if (end > hi)
            end = hi;
        if (b == blk * (uint64_t)OPTIM_NORM_BLOCK)
            sums[2 * blk] = sums[2 * blk + 1] = 0.0;
        ph1_range(s, dtype, w, g, state, b, end, &sums[2 * blk]);
        b = end;
    }
}

void optim_lamb_sums(const double *blocks, uint64_t count, double out[2])
{
    uint64_t nb = (count + OPTIM_NORM_BLOCK - 1) / OPTIM_NORM_BLOCK;
    out[0] = out[1] = 0.0;
    for (uint64_t b = 0; b < nb; b++) {
        out[0] += blocks[2 * b];
        out[1] += blocks[2 * b + 1];
    }
}

double optim_lamb_ratio(const optim_step *s, double wsq, double rsq)
{
    double r1 = sqrt(wsq), r2 = sqrt(rsq);
    if (s->o->lower_bound > 0)
        r1 = fmax(r1, s->o->lower_bound);
    if (s->o->upper_bound > 0)
        r1 = fmin(r1, s->o->upper_bound);
    return r1 == 0.0 || r2 == 0.0 ? 1.0 : r1 / r2;
}

void optim_lamb_phase2(const optim_step *s, double ratio, kvs_dtype dtype, const void *w,
                       void *g, void *const *state, uint64_t lo, uint64_t hi)
{
    if (dtype == KVS_FLOAT64) {
        lp_d p;
        lp_init_d(&p, s, ratio);
        ph2_d(&p, (double *)g + lo, (const double *)w + lo, (const double *)state[0] + lo,
              (const double *)state[1] + lo, hi - lo);
        return;
    }
    lp_f p;
    lp_init_f(&p, s, ratio);
    if (dtype == KVS_FLOAT32) {
        ph2_f(&p, (float *)g + lo, (const float *)w + lo, (const float *)state[0] + lo,
              (const float *)state[1] + lo, hi - lo);
        return;
    }
    bool master = optim_has_master(s->o, dtype);
    int ns = optim_nstate(s->o, dtype);
    float wt[HALF_BLOCK], gt[HALF_BLOCK];
    for (uint64_t b = lo; b < hi; b += HALF_BLOCK) {
        uint64_t k = hi - b < HALF_BLOCK ? hi - b : HALF_BLOCK;
        float *ms = master ? (float *)state[ns - 1] + b : NULL;
        const float *wp = ms ? ms : wt;
        if (!master)
            red_to_f32(dtype, wt, (const uint16_t *)w + b, k);
        ph2_f(&p, gt, wp, (const float *)state[0] + b, (const float *)state[1] + b, k);
        if (master)
            for (uint64_t i = 0; i < k; i++)
                ms[i] = gt[i];
        red_from_f32(dtype, (uint16_t *)g + b, gt, k);
    }
}
