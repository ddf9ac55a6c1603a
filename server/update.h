/* update.h - the server's optimizer: the spec it applies, per-key
 * multipliers, and the state of each key part (momenta, Adam's m and v,
 * the float32 master copy, the update count t).
 *
 * Threads: the server's loop thread only; srv_upd_apply() splits big parts
 * over the reduction pool (elements are independent).
 */
#ifndef KVS_SERVER_UPDATE_H
#define KVS_SERVER_UPDATE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/hmap.h"
#include "optim/optim.h"
#include "reduce/reduce.h"

/* State of one key part.  Arrays hold optim_state_dtype() elements. */
typedef struct srv_upd {
    uint64_t t;       /* updates applied */
    uint64_t gen;     /* srv_optim.gen it belongs to */
    int nstate;
    kvs_dtype dtype;  /* of the key */
    uint64_t count;
    bool master_ok;   /* the master copy (if any) holds the weights */
    void *state[OPTIM_MAX_STATE];
    double *norms;    /* two-phase optimizers (lamb): per-block sums of squares */
    bool pending;     /* lamb on a part of a split key: phase 1 of update t ran, phase 2
                       * waits for the other parts' sums (srv_upd_finish) */
    double psum[2];   /* then: this part's sum(w^2), sum(r^2) */
    optim_step pstep; /* and the step phase 1 ran with (phase 2 runs with it) */
} srv_upd;

typedef struct srv_optim {
    bool set;            /* a spec is stored (text valid) */
    bool active;         /* set, and MXNET_UPDATE_ON_KVSTORE=1 on rank 0 and here */
    bool server_on;      /* this server's MXNET_UPDATE_ON_KVSTORE */
    optim_spec spec;
    char text[OPTIM_TEXT_MAX]; /* canonical */
    uint64_t gen;        /* bumped whenever the spec changes: old state is dropped */
    hmap mults;          /* key -> optim_mult* */
    uint64_t par_min;    /* parts of at least this many elements use the pool */
} srv_optim;

void srv_optim_init(srv_optim *o, bool server_on, uint64_t par_min);
void srv_optim_fini(srv_optim *o);

/* The multipliers of key (NULL when none were set). */
const optim_mult *srv_optim_mult(const srv_optim *o, uint64_t key);
/* Set key's multipliers.  0 or KVS_ENOMEM. */
int srv_optim_set_mult(srv_optim *o, uint64_t key, const optim_mult *m);

/* Can a key part (count of the key's total elements, dtype, dist_async or
 * not) be updated by spec o?  0; KVS_ESHAPE (int dtype) or KVS_ENOTSUP
 * (lamb on a dist_async key split over servers or slices) with why naming
 * the key. */
int srv_optim_part_ok(const optim_spec *o, uint64_t key, kvs_dtype dtype, uint64_t count,
                      uint64_t total, bool async, char *why, size_t whylen);

/* Update a part in place: g (count elements of dtype) holds the gradient sum
 * and gets the new weight; w is the stored weight.  *u is created on the
 * first update (or after a spec change).  Returns 0, or KVS_ENOMEM /
 * KVS_ESHAPE (int dtype) with why. */
int srv_upd_apply(srv_optim *o, red_pool *pool, uint64_t key, kvs_dtype dtype,
                  uint64_t count, uint64_t total, srv_upd **u, const void *w, void *g,
                  char *why, size_t whylen);

/* srv_upd_apply in two halves, so the arithmetic can run off the loop:
 * srv_upd_prepare (loop thread) checks the dtype, makes or renews *u,
 * counts the update and fixes its step (learning rate, multipliers) into
 * *run; srv_upd_run (any thread, once) then updates g in place from w. */
typedef struct srv_upd_step {
    optim_step step;
    kvs_dtype dtype;
    uint64_t count;
    void *const *state;
    void *master;    /* the float32 master copy to fill from w first, or NULL */
    double *norms;   /* two-phase (lamb): the part's block sums (srv_upd.norms) */
    srv_upd *upd;    /* lamb on a part of a split key: phase 1 only, sums to upd->psum */
    bool split;      /* big enough for the pool */
} srv_upd_step;
int srv_upd_prepare(srv_optim *o, uint64_t key, kvs_dtype dtype, uint64_t count,
                    uint64_t total, srv_upd **u, srv_upd_step *run, char *why, size_t whylen);
void srv_upd_run(red_pool *pool, const srv_upd_step *run, const void *w, void *g);

/* Phase 2 of a pending lamb update (u->pending) once the whole key's sums
 * of squares wsq, rsq are known, with phase 1's step (u->pstep): g (the
 * gradient sum) gets the new weight from w.  Loop thread (pool: NULL or
 * the loop's). */
void srv_upd_finish(const srv_optim *o, red_pool *pool, srv_upd *u, double wsq, double rsq,
                    const void *w, void *g);

/* New state for a part (all zero), as the first update would make it. */
srv_upd *srv_upd_new(const srv_optim *o, kvs_dtype dtype, uint64_t count);
/* Bytes of one state array of u. */
uint64_t srv_upd_state_bytes(const srv_upd *u);
/* The part's value was replaced (re-init or load): the master copy must be
 * read from it again. */
void srv_upd_forget_master(srv_upd *u);
void srv_upd_free(srv_upd *u);

#endif
