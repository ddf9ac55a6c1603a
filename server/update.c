/* update.c - see update.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/update.h"

#define UPD_CHUNK (1u << 15) /* elements per pool task */

void srv_optim_init(srv_optim *o, bool server_on, uint64_t par_min)
{
    memset(o, 0, sizeof *o);
    o->server_on = server_on;
    o->par_min = par_min ? par_min : 1;
    hmap_init(&o->mults);
}

void srv_optim_fini(srv_optim *o)
{
    for (size_t i = 0; i < o->mults.cap; i++)
        if (o->mults.used[i] == 1)
            free(o->mults.vals[i]);
    hmap_fini(&o->mults);
}

const optim_mult *srv_optim_mult(const srv_optim *o, uint64_t key)
{
    return hmap_get((hmap *)&o->mults, key);
}

int srv_optim_set_mult(srv_optim *o, uint64_t key, const optim_mult *m)
{
    optim_mult *have = hmap_get(&o->mults, key);
    if (have) {
        *have = *m;
        return 0;
    }
    have = malloc(sizeof *have);
    if (have == NULL)
        return KVS_ENOMEM;
    *have = *m;
    if (hmap_put(&o->mults, key, have) != 0) {
        free(have);
        return KVS_ENOMEM;
    }
    return 0;
}

uint64_t srv_upd_state_bytes(const srv_upd *u)
{
    return u->count * kvs_dtype_size(optim_state_dtype(u->dtype));
}

void srv_upd_free(srv_upd *u)
{
    if (u == NULL)
        return;
    for (int j = 0; j < u->nstate; j++)
        free(u->state[j]);
    free(u->norms);
    free(u);
}

void srv_upd_forget_master(srv_upd *u)
{
    if (u)
        u->master_ok = false;
}

srv_upd *srv_upd_new(const srv_optim *o, kvs_dtype dtype, uint64_t count)
{
    srv_upd *u = calloc(1, sizeof *u);
    if (u == NULL)
        return NULL;
    u->gen = o->gen;
    u->dtype = dtype;
    u->count = count;
    u->nstate = optim_nstate(&o->spec, dtype);
    uint64_t bytes = srv_upd_state_bytes(u);
    for (int j = 0; j < u->nstate; j++) {
        /* calloc: every state starts at zero (MXNet's create_state) */
        u->state[j] = calloc(bytes ? bytes : 1, 1);
        if (u->state[j] == NULL) {
            srv_upd_free(u);
            return NULL;
        }
    }
    return u;
}

int srv_optim_part_ok(const optim_spec *o, uint64_t key, kvs_dtype dtype, uint64_t count,
                      uint64_t total, bool async, char *why, size_t whylen)
{
    if (!optim_dtype_ok(dtype)) {
        snprintf(why, whylen, "key %llu is %s: optimizer %s updates float32, float64, "
                 "float16 and bfloat16 keys only", (unsigned long long)key,
                 kvs_dtype_name(dtype), optim_name(o->kind));
        return KVS_ESHAPE;
    }
    if (optim_two_phase(o) && async && count != total) {
        snprintf(why, whylen, "key %llu is dist_async and split over servers or slices (%llu "
                 "of its %llu elements here): optimizer %s needs the norm of the whole key, "
                 "which dist_async parts (updated as each push arrives) never have together; "
                 "use dist_sync, or keep the key on one server (fewer than "
                 "MXNET_KVSTORE_BIGARRAY_BOUND elements, no P3 slicing)",
                 (unsigned long long)key, (unsigned long long)count, (unsigned long long)total,
                 optim_name(o->kind));
        return KVS_ENOTSUP;
    }
    return 0;
}

struct upd_job {
    optim_step step;
    kvs_dtype dtype;
    const void *w;
    void *g;
    void *const *state;
    double *norms;
    double ratio;
};

static void upd_run(const void *arg, uint64_t lo, uint64_t hi)
{
    const struct upd_job *j = arg;
    optim_update(&j->step, j->dtype, j->w, j->g, j->state, lo, hi);
}

static void lamb_run1(const void *arg, uint64_t lo, uint64_t hi)
{
    const struct upd_job *j = arg;
    optim_lamb_phase1(&j->step, j->dtype, j->w, j->g, j->state, lo, hi, j->norms);
}

static void lamb_run2(const void *arg, uint64_t lo, uint64_t hi)
{
    const struct upd_job *j = arg;
    optim_lamb_phase2(&j->step, j->ratio, j->dtype, j->w, j->g, j->state, lo, hi);
}

int srv_upd_prepare(srv_optim *o, uint64_t key, kvs_dtype dtype, uint64_t count,
                    uint64_t total, srv_upd **up, srv_upd_step *run, char *why, size_t whylen)
{
    srv_upd *u = *up;
    int rc = srv_optim_part_ok(&o->spec, key, dtype, count, count, false, why, whylen);
    if (rc)
        return rc;
    if (u && (u->gen != o->gen || u->dtype != dtype || u->count != count)) {
        srv_upd_free(u);
        *up = u = NULL;
    }
    if (u == NULL) {
        *up = u = srv_upd_new(o, dtype, count);
        if (u == NULL) {
            snprintf(why, whylen, "server out of memory for the optimizer state of key %llu",
                     (unsigned long long)key);
            return KVS_ENOMEM;
        }
    }
    if (optim_two_phase(&o->spec) && u->norms == NULL) {
        /* (here, not in srv_upd_new: a checkpoint's state comes without) */
        uint64_t nb = (count + OPTIM_NORM_BLOCK - 1) / OPTIM_NORM_BLOCK;
        u->norms = calloc(nb ? 2 * nb : 2, sizeof *u->norms);
        if (u->norms == NULL) {
            snprintf(why, whylen, "server out of memory for the optimizer state of key %llu",
                     (unsigned long long)key);
            return KVS_ENOMEM;
        }
    }
    memset(run, 0, sizeof *run);
    if (optim_has_master(&o->spec, dtype) && !u->master_ok) {
        run->master = u->state[u->nstate - 1];
        u->master_ok = true;
    }
    run->dtype = dtype;
    run->count = count;
    run->state = u->state;
    run->norms = u->norms;
    u->pending = false;
    if (optim_two_phase(&o->spec) && count != total)
        run->upd = u; /* phase 2 waits for the other parts (srv_upd_finish) */
    run->split = count >= o->par_min;
    u->t++;
    optim_step_init(&run->step, &o->spec, u->t, srv_optim_mult(o, key));
    return 0;
}

void srv_upd_run(red_pool *pool, const srv_upd_step *run, const void *w, void *g)
{
    if (run->master)
        red_to_f32(run->dtype, run->master, w, run->count);
    struct upd_job j = {run->step, run->dtype, w, g, run->state, run->norms, 1.0};
    if (!optim_two_phase(run->step.o)) {
        red_pool_for(run->split ? pool : NULL, run->count, UPD_CHUNK, upd_run, &j);
        return;
    }
    /* lamb: m, v and the block sums, then the trust ratio of the whole
     * part (srv_optim_part_ok: the part is the key), then the weights */
    double sums[2];
    red_pool_for(run->split ? pool : NULL, run->count, OPTIM_NORM_BLOCK, lamb_run1, &j);
    optim_lamb_sums(run->norms, run->count, sums);
    if (run->upd) {
        run->upd->psum[0] = sums[0];
        run->upd->psum[1] = sums[1];
        run->upd->pstep = run->step;
        run->upd->pending = true;
        return;
    }
    j.ratio = optim_lamb_ratio(&run->step, sums[0], sums[1]);
    red_pool_for(run->split ? pool : NULL, run->count, UPD_CHUNK, lamb_run2, &j);
}

void srv_upd_finish(const srv_optim *o, red_pool *pool, srv_upd *u, double wsq, double rsq,
                    const void *w, void *g)
{
    struct upd_job j = {.step = u->pstep, .dtype = u->dtype, .w = w, .g = g,
                        .state = u->state};
    j.ratio = optim_lamb_ratio(&j.step, wsq, rsq);
    u->pending = false;
    red_pool_for(u->count >= o->par_min ? pool : NULL, u->count, UPD_CHUNK, lamb_run2, &j);
}

int srv_upd_apply(srv_optim *o, red_pool *pool, uint64_t key, kvs_dtype dtype,
                  uint64_t count, uint64_t total, srv_upd **up, const void *w, void *g,
                  char *why, size_t whylen)
{
    srv_upd_step run;
    int rc = srv_upd_prepare(o, key, dtype, count, total, up, &run, why, whylen);
    if (rc == 0)
        srv_upd_run(pool, &run, w, g);
    return rc;
}
