/* optim.h - server-side optimizers: the declarative spec and the update
 * kernels.  Used by the server (updates) and by libkvs (spec checks).
 *
 * A spec is a name followed by key=value words separated by blanks, with
 * MXNet's parameter names: "sgd learning_rate=0.1 momentum=0.9 wd=1e-4".
 * Nothing in a spec is code; every value is a number or a fixed word.
 * optim_parse() checks every word; optim_format() writes the canonical text
 * (every parameter, fixed order, %.17g), which is what travels to the
 * servers, is compared, and is stored in checkpoints.
 *
 * The update rules (cited per optimizer in optim_kern.c) follow MXNet 1.x.
 * Arithmetic: float64 keys update in float64; float32, float16 and bfloat16
 * keys update in float32 (half types convert to float32 and back, or keep a
 * float32 master copy with multi_precision=1).  int32/int64 keys cannot be
 * updated.  No fused multiply-add and no reassociation (optim_kern.c is
 * built with -ffp-contract=off), so results are bit-identical across runs,
 * thread counts and chunkings.
 *
 * Threads: every function is pure or works on the arrays it is given;
 * optim_update() may run concurrently on disjoint ranges.
 */
#ifndef KVS_OPTIM_H
#define KVS_OPTIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvs.h"

enum optim_kind { OPTIM_NONE = 0, OPTIM_SGD, OPTIM_NAG, OPTIM_ADAM, OPTIM_ADAGRAD,
                  OPTIM_RMSPROP, OPTIM_ADAMW, OPTIM_LAMB };
#define OPTIM_KIND_MAX OPTIM_LAMB

/* Learning-rate schedules (lr_scheduler=...). */
enum optim_sched { OPTIM_SCHED_NONE = 0, OPTIM_SCHED_FACTOR, OPTIM_SCHED_WARMUP_COSINE,
                   OPTIM_SCHED_WARMUP_LINEAR, OPTIM_SCHED_POLY };

#define OPTIM_TEXT_MAX 1024   /* canonical text, NUL included */
#define OPTIM_SPEC_MAX 4096   /* longest spec a caller may pass */
#define OPTIM_MAX_STATE 4     /* state arrays per key part (incl. the master copy) */

typedef struct optim_spec {
    int kind;               /* enum optim_kind */
    double learning_rate;   /* base rate before the schedule and lr_mult */
    double wd;              /* weight decay */
    double rescale_grad;
    double clip_gradient;   /* > 0: clip to [-c, c]; <= 0: off */
    double momentum;        /* sgd, nag */
    double beta1, beta2;    /* adam, adamw, lamb */
    double epsilon;         /* adam, adamw, lamb, rmsprop (added to the root), adagrad (under it) */
    double gamma1, gamma2;  /* rmsprop */
    bool centered;          /* rmsprop: Graves' centred variant */
    double clip_weights;    /* rmsprop: > 0 clips weights to [-c, c] */
    bool multi_precision;   /* float16/bfloat16: float32 master copy */
    double lower_bound;     /* lamb: > 0 clamps ||w|| from below; <= 0: off */
    double upper_bound;     /* lamb: > 0 clamps ||w|| from above; <= 0: off */
    bool bias_correction;   /* lamb: divide m, v by 1 - beta^t (default 1) */
    int sched;              /* enum optim_sched */
    uint64_t step;          /* FactorScheduler step (updates) */
    double factor;          /* FactorScheduler factor, (0, 1] */
    double stop_factor_lr;  /* FactorScheduler floor */
    uint64_t warmup_steps;  /* warmup_*, poly: linear warmup over t < warmup_steps */
    uint64_t total_steps;   /* warmup_*, poly: the decay ends at t = total_steps */
    double final_lr;        /* warmup_*, poly: lr from t = total_steps on */
    double warmup_begin_lr; /* warmup_*, poly: lr the warmup starts from (at t = 0) */
    double power;           /* poly: exponent of the decay (2) */
} optim_spec;

/* Per-key multipliers (kvs_set_optimizer_key). */
typedef struct optim_mult {
    double lr_mult, wd_mult;
} optim_mult;

/* Parse spec into *out.  Returns 0, or KVS_EINVAL with a message in why that
 * names the offending word ("momentum=1.5: expected 0 <= momentum < 1"). */
int optim_parse(const char *spec, optim_spec *out, char *why, size_t whylen);

/* Canonical text of o (fits OPTIM_TEXT_MAX). */
void optim_format(const optim_spec *o, char *buf, size_t len);

/* Compare two canonical texts word by word: NULL if equal, else writes the
 * first differing word of b (and what a had there) into why and returns why. */
const char *optim_diff(const char *a, const char *b, char *why, size_t whylen);

/* Parse "lr_mult=0.1 wd_mult=0" (either or both; missing ones are 1). */
int optim_parse_mult(const char *text, optim_mult *out, char *why, size_t whylen);

/* "sgd", ... ("none" for OPTIM_NONE). */
const char *optim_sched_name(int sched);
const char *optim_name(int kind);

/* True if dtype can be updated (float types). */
bool optim_dtype_ok(kvs_dtype dtype);

/* Number of state arrays a key part of dtype needs (momenta, m, v, ...; the
 * float32 master copy of multi_precision comes last).  Their element type is
 * optim_state_dtype(). */
int optim_nstate(const optim_spec *o, kvs_dtype dtype);
kvs_dtype optim_state_dtype(kvs_dtype dtype);
/* True if the last state array is a float32 master copy of the weights. */
bool optim_has_master(const optim_spec *o, kvs_dtype dtype);

/* The scalars of one update of a key part: after t updates (t >= 1 is this
 * update's number), with multipliers m (NULL: 1, 1). */
typedef struct optim_step {
    const optim_spec *o;
    double lr, wd;   /* after schedule and multipliers */
    double lr_t;     /* adam: lr * sqrt(1 - beta2^t) / (1 - beta1^t); adamw: lr / (1 - beta1^t) */
    double bc1, bc2; /* adamw: 1, sqrt(1 - beta2^t); lamb: 1 - beta1^t, 1 - beta2^t (1, 1
                      * with bias_correction=0) */
} optim_step;
void optim_step_init(optim_step *s, const optim_spec *o, uint64_t t, const optim_mult *m);

/* The scheduled learning rate of update t (base = learning_rate): MXNet's
 * FactorScheduler, or its CosineScheduler / PolyScheduler with linear
 * warmup (optim.c has the formulas). */
double optim_sched_lr(const optim_spec *o, uint64_t t);

/* Update elements [lo, hi) of a key part of dtype, in place: g holds the
 * round's gradient sum on entry and the new weight on return; w is the
 * stored weight (not written; must not overlap g).  state: optim_nstate()
 * arrays of optim_state_dtype(), the whole part.  With a master copy (the
 * last state array) the master is the weight read and written, w is
 * ignored, and g gets the new master rounded to dtype. */
void optim_update(const optim_step *s, kvs_dtype dtype, const void *w, void *g,
                  void *const *state, uint64_t lo, uint64_t hi);

/* True if the optimizer needs norms over the whole key (lamb): it updates in
 * two phases instead of optim_update.  optim_update does nothing for it. */
bool optim_two_phase(const optim_spec *o);

/* LAMB (optim/lamb.c).  Phase 1 updates m and v of elements [lo, hi) from
 * the gradient g (not written) and accumulates sum(w^2) and sum(r^2), r the
 * element's update direction, in float64: element order within blocks of
 * OPTIM_NORM_BLOCK elements of the part, one block's sums in
 * sums[2*b], sums[2*b+1] (b = i / OPTIM_NORM_BLOCK).  lo must be a multiple
 * of OPTIM_NORM_BLOCK.  optim_lamb_sums() adds the block sums in block order.
 * optim_lamb_ratio() is the trust ratio from the whole key's sums.  Phase 2
 * writes the new weight into g from w, m and v (r computed again, the same
 * bits) and the ratio.  Ranges may run concurrently; any split into whole
 * blocks gives the same bits. */
#define OPTIM_NORM_BLOCK 32768u
void optim_lamb_phase1(const optim_step *s, kvs_dtype dtype, const void *w, const void *g,
                       void *const *state, uint64_t lo, uint64_t hi, double *sums);
void optim_lamb_sums(const double *blocks, uint64_t count, double out[2]);
double optim_lamb_ratio(const optim_step *s, double wsq, double rsq);
void optim_lamb_phase2(const optim_step *s, double ratio, kvs_dtype dtype, const void *w,
                       void *g, void *const *state, uint64_t lo, uint64_t hi);

#endif
