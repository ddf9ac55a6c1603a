/* op.c - the per-key operation engine of the dist stores: see op.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/datapath.h"
#include "common/err.h"
#include "worker/compress.h"
#include "worker/elastic.h"
#include "worker/trace.h"
#include "worker/op.h"
#include "worker/wrk_int.h"

/* ---- lifetime and the store's list of ops ---- */

void wrk_op_free(wrk_op *op)
{
    if (op == NULL)
        return;
    free(op->keys);
    free(op->kbusy);
    free(op->reqs);
    free(op->outptrs);
    free(op->tmp);
    free(op->ztmp);
    free(op->zundo);
    free(op->tleft);
    if (op->ops && op->ops->free)
        op->ops->free(op->owner);
    free(op);
}

static void list_remove(kvs_store *s, wrk_op *op)
{
    if (op->prev)
        op->prev->next = op->next;
    else
        s->ops_head = op->next;
    if (op->next)
        op->next->prev = op->prev;
    else
        s->ops_tail = op->prev;
    op->next = op->prev = NULL;
}

static void list_append(kvs_store *s, wrk_op *op)
{
    op->prev = s->ops_tail;
    op->next = NULL;
    if (s->ops_tail)
        s->ops_tail->next = op;
    else
        s->ops_head = op;
    s->ops_tail = op;
}

/* The calling thread's deferred wake-up (wrk_io_defer): the store whose I/O
 * thread it owes one, or NULL. */
static __thread kvs_store *io_owed;
static __thread bool io_deferring;

/* Queue op for the I/O thread (io.c drains store->queue on each wake-up).
 * Call with mu held. */
static void io_queue_locked(kvs_store *s, wrk_op *op)
{
    op->qnext = NULL;
    if (s->q_tail)
        s->q_tail->qnext = op;
    else
        s->q_head = op;
    s->q_tail = op;
    if (io_deferring && (io_owed == NULL || io_owed == s))
        io_owed = s;
    else
        uv_async_send(&s->wake);
}

void wrk_io_defer(bool on)
{
    io_deferring = on;
    if (!on && io_owed) {
        uv_async_send(&io_owed->wake);
        io_owed = NULL;
    }
}

void wrk_ops_free_all(kvs_store *s)
{
    wrk_op *op = s->ops_head;
    while (op) {
        wrk_op *n = op->next;
        wrk_op_free(op);
        op = n;
    }
    s->ops_head = s->ops_tail = NULL;
}

/* ---- per-key completion ----
 * An unfinished async op counts once on each of its keys: in the key's
 * wrk_key (op->kbusy[i] points there, so completion needs no lookup), or,
 * for a key this worker never initialised, in s->busy (op->kbusy[i] NULL). */

static void busy_undo_locked(kvs_store *s, wrk_op *op, size_t upto)
{
    for (size_t i = 0; i < upto; i++) {
        if (op->kbusy[i]) {
            (*op->kbusy[i])--;
            if (op->type == WRK_OP_PULL) {
                wrk_key *k = (wrk_key *)(void *)((char *)op->kbusy[i] - offsetof(wrk_key, busy));
                k->pulls_done++;
            }
            continue;
        }
        uintptr_t c = (uintptr_t)hmap_get(&s->busy, op->keys[i]);
        if (c > 1)
            hmap_put(&s->busy, op->keys[i], (void *)(c - 1)); /* exists: no alloc */
        else
            hmap_del(&s->busy, op->keys[i]);
    }
}

/* ks[i]: op->keys[i]'s wrk_key or NULL.  0 or KVS_ENOMEM (nothing counted). */
static int busy_add_locked(kvs_store *s, wrk_op *op, wrk_key *const *ks)
{
    for (size_t i = 0; i < op->nkeys; i++) {
        if (ks[i]) {
            op->kbusy[i] = &ks[i]->busy;
            ks[i]->busy++;
            if (op->type == WRK_OP_PULL)
                ks[i]->pulls_issued++;
            continue;
        }
        op->kbusy[i] = NULL;
        uintptr_t c = (uintptr_t)hmap_get(&s->busy, op->keys[i]);
        if (hmap_put(&s->busy, op->keys[i], (void *)(c + 1)) != 0) {
            busy_undo_locked(s, op, i);
            return err_set(KVS_ENOMEM, "out of memory");
        }
    }
    s->nbusy++;
    return 0;
}

bool wrk_key_pulls_done(kvs_store *s, uint64_t key, uint64_t mark)
{
    pthread_mutex_lock(&s->mu);
    wrk_key *k = hmap_get(&s->keys, key);
    bool done = k == NULL || k->pulls_done >= mark;
    pthread_mutex_unlock(&s->mu);
    return done;
}

bool wrk_key_busy_locked(kvs_store *s, uint64_t key)
{
    wrk_key *k = hmap_get(&s->keys, key);
    return (k && k->busy > 0) || hmap_get(&s->busy, key) != NULL;
}

/* ---- completion ---- */

static void op_release_locked(kvs_store *s, wrk_op *op, int err, const char *text)
{
    if (err != 0 && op->err == 0) {
        op->err = err;
        snprintf(op->errtext, sizeof op->errtext, "%s", text ? text : kvs_strerror(err));
    }
    if (--op->pending > 0 || op->done)
        return;
    if (op->err == 0 && op->ops && op->ops->post && op->ops->post(s, op))
        return; /* its owner has more to do first (comm.c: the device outputs) */
    if (op->err == KVS_EMEMBERSHIP && op->zundo)
        wrk_codec_undo(s, op); /* the step is redone: as if never pushed */
    op->done = true;
    if (op->ops && op->ops->done)
        op->ops->done(s, op); /* its owner learns it now (group.c's chunk ops) */
    if (!op->sync) {
        busy_undo_locked(s, op, op->nkeys);
        s->nbusy--;
        if (op->type == WRK_OP_PULL && s->grp_pull_done)
            s->grp_pull_done(s);
        if (op->err == 0) {
            list_remove(s, op);
            wrk_op_free(op);
        } else {
            s->nfailed++;
        }
    }
    pthread_cond_broadcast(&s->cv);
}

void wrk_op_release(kvs_store *s, wrk_op *op, int err, const char *text)
{
    pthread_mutex_lock(&s->mu);
    op_release_locked(s, op, err, text);
    pthread_mutex_unlock(&s->mu);
}

/* (mu) q's reply, and its zero-copy frame if it counts one. */
static void req_drop_locked(kvs_store *s, wrk_req *q, int err, const char *text)
{
    wrk_op *op = q->op;
    bool zc = q->zc;
    if (zc)
        op_release_locked(s, op, err, text); /* op stays: its reply is still counted */
    op_release_locked(s, op, err, text);
}

void wrk_req_drop(kvs_store *s, wrk_req *q, int err, const char *text)
{
    pthread_mutex_lock(&s->mu);
    req_drop_locked(s, q, err, text);
    pthread_mutex_unlock(&s->mu);
}

void wrk_fail_all_locked(kvs_store *s, int err, const char *text)
{
    if (s->fatal == 0) {
        s->fatal = err;
        snprintf(s->fatal_text, sizeof s->fatal_text, "%s", text);
    }
    /* ops still in the submission queue never reach the I/O thread: every
     * request of theirs is dropped, its zero-copy frame with it */
    wrk_op *op = s->q_head;
    s->q_head = s->q_tail = NULL;
    while (op) {
        wrk_op *n = op->qnext;
        size_t left = op->nreqs;
        wrk_req *reqs = op->reqs;
        for (size_t i = 0; i < left; i++)
            req_drop_locked(s, &reqs[i], err, text); /* the last one may free op */
        op = n;
    }
    pthread_cond_broadcast(&s->cv);
}

/* ---- planning an op (no lock) ---- */

/* The occurrences of each key in keys[0..n): first[i] = index of the first
 * occurrence of keys[i]; for a first occurrence i, cnt[i] = how many there
 * are and next[] chains them in order (NO_NEXT ends a chain).  O(n); keys
 * in strictly increasing or decreasing order (the usual case) need no hash
 * map.  Returns the number of unique keys or -1 (no memory). */
#define NO_NEXT SIZE_MAX
static long uniq_keys(size_t n, const uint64_t *keys, size_t *first, size_t *cnt,
                      size_t *next, size_t *last)
{
    bool up = true, down = true;
    for (size_t i = 1; i < n && (up || down); i++) {
        up = up && keys[i] > keys[i - 1];
        down = down && keys[i] < keys[i - 1];
    }
    if (up || down) {
        for (size_t i = 0; i < n; i++) {
            first[i] = last[i] = i;
            cnt[i] = 1;
            next[i] = NO_NEXT;
        }
        return (long)n;
    }
    hmap seen;
    long nu = 0;
    hmap_init(&seen);
    for (size_t i = 0; i < n; i++) {
        void *v = hmap_get(&seen, keys[i]);
        next[i] = NO_NEXT;
        if (v) {
            size_t f = (size_t)(uintptr_t)v - 1;
            first[i] = f;
            next[last[f]] = i;
            last[f] = i;
            cnt[f]++;
        } else {
            first[i] = last[i] = i;
            cnt[i] = 1;
            if (hmap_put(&seen, keys[i], (void *)(uintptr_t)(i + 1)) != 0) {
                hmap_fini(&seen);
                return -1;
            }
            nu++;
        }
    }
    hmap_fini(&seen);
    return nu;
}

int wrk_sum_local(kvs_store *s, void *dst, const kvs_array *vals, const size_t *idx, size_t k)
{
    const void *stack[8] = {0};
    const void **srcs = k <= 8 ? stack : malloc(k * sizeof *srcs);
    int rc;
    if (srcs == NULL)
        return KVS_ENOMEM;
    for (size_t j = 0; j < k; j++)
        srcs[j] = vals[idx[j]].data;
    rc = red_sum(s->pool, vals[idx[0]].dtype, dst, srcs, (int)k, vals[idx[0]].count);
    if (srcs != stack)
        free(srcs);
    return rc;
}

/* What one call asks for, once its keys are deduplicated. */
typedef struct plan {
    int type;
    size_t n;
    const uint64_t *keys;
    const kvs_array *vals, *outs, *shape;
    int priority;
    size_t *first, *cnt, *next, *last; /* uniq_keys */
    long nu;
} plan;

static void plan_fini(plan *p)
{
    free(p->first);
}

/* Dedupe p's keys; every occurrence of a key must have the same shape. */
static int plan_keys(plan *p)
{
    size_t n = p->n, m = n ? n : 1;
    p->first = malloc(m * 4 * sizeof *p->first);
    if (p->first == NULL)
        return err_set(KVS_ENOMEM, "out of memory");
    p->cnt = p->first + m;
    p->next = p->cnt + m;
    p->last = p->next + m;
    p->nu = uniq_keys(n, p->keys, p->first, p->cnt, p->next, p->last);
    if (p->nu < 0)
        return err_set(KVS_ENOMEM, "out of memory");
    /* (a pushpull's output must also match its value) */
    for (size_t i = 0; i < n; i++) {
        const kvs_array *a = &p->shape[i], *b = &p->shape[p->first[i]];
        const kvs_array *o = p->outs ? &p->outs[i] : NULL;
        const kvs_array *ob = p->outs ? &p->outs[p->first[i]] : NULL;
        if (a->count != b->count || a->dtype != b->dtype ||
            (o && (o->count != b->count || o->dtype != b->dtype)) ||
            (ob && (ob->count != b->count || ob->dtype != b->dtype)))
            return err_set(KVS_ESHAPE, "key %llu appears with different counts or dtypes in "
                           "one call", (unsigned long long)p->keys[i]);
    }
    return 0;
}

static size_t key_bytes(const kvs_array *a)
{
    return (size_t)a->count * kvs_dtype_size(a->dtype);
}

/* Allocate op's arrays: its unique keys, one request per message, the
 * output pointers, room for local sums of repeated keys. */
static int op_alloc(kvs_store *s, const plan *p, wrk_op *op)
{
    size_t nreqs = 0, nouts = 0, tmp_bytes = 0, nu = (size_t)p->nu;
    op->nkeys = nu;
    op->keys = malloc((nu ? nu : 1) * sizeof *op->keys);
    op->kbusy = malloc((nu ? nu : 1) * sizeof *op->kbusy);
    if (op->keys == NULL || op->kbusy == NULL)
        return err_set(KVS_ENOMEM, "out of memory");
    for (size_t i = 0, u = 0; i < p->n; i++) {
        if (p->first[i] != i)
            continue;
        op->keys[u++] = p->keys[i];
        const kvs_array *a = &p->shape[i];
        uint64_t parts = wrk_route_chunks(&s->routing, p->keys[i], a->count,
                                          kvs_dtype_size(a->dtype), NULL);
        nreqs += parts;
        if (p->outs)
            nouts += parts * p->cnt[i];
        if (p->vals && p->cnt[i] > 1 && p->type != WRK_OP_INIT)
            tmp_bytes += (key_bytes(a) + 63) & ~(size_t)63;
    }
    op->nreqs = nreqs;
    op->reqs = calloc(nreqs ? nreqs : 1, sizeof *op->reqs);
    op->outptrs = calloc(nouts ? nouts : 1, sizeof *op->outptrs);
    if (tmp_bytes)
        op->tmp = aligned_alloc(64, tmp_bytes);
    if (op->reqs == NULL || op->outptrs == NULL || (tmp_bytes && op->tmp == NULL))
        return err_set(KVS_ENOMEM, "out of memory for %zu requests", nreqs);
    if (s->trace && (op->tleft = calloc(nu ? nu : 1, sizeof *op->tleft)))
        op->trace_id = __atomic_add_fetch(&s->trace_seq, 1, __ATOMIC_RELAXED);
    return 0;
}

/* The same key more than once in one push: sum its values into *tmp (which
 * advances) and return the sum; a key given once: its own data. */
static int key_source(kvs_store *s, const plan *p, size_t i, uint8_t **tmp, const uint8_t **src)
{
    *src = p->vals ? p->vals[i].data : NULL;
    if (p->vals == NULL || p->type == WRK_OP_INIT || p->cnt[i] == 1)
        return 0;
    size_t idx[64], *ix = idx, c = 0;
    if (p->cnt[i] > 64 && (ix = malloc(p->cnt[i] * sizeof *ix)) == NULL)
        return err_set(KVS_ENOMEM, "out of memory");
    for (size_t j = i; j != NO_NEXT; j = p->next[j])
        ix[c++] = j;
    int rc = wrk_sum_local(s, *tmp, p->vals, ix, p->cnt[i]);
    if (ix != idx)
        free(ix);
    if (rc)
        return err_set(rc, "key %llu: summing %zu local values failed",
                       (unsigned long long)p->keys[i], p->cnt[i]);
    *src = *tmp;
    *tmp += (key_bytes(&p->vals[i]) + 63) & ~(size_t)63;
    return 0;
}

static uint16_t wire_type(int type)
{
    return (uint16_t)(type == WRK_OP_INIT   ? PROTO_INIT
                      : type == WRK_OP_PUSH ? PROTO_PUSH
                      : type == WRK_OP_PULL ? PROTO_PULL
                                            : PROTO_PUSHPULL);
}

/* The requests of key i (its ku-th unique key): one per part or chunk,
 * from *r on; output pointers from *o on. */
static int key_reqs(kvs_store *s, const plan *p, wrk_op *op, size_t i, size_t ku,
                    const uint8_t *src, size_t *r, size_t *o)
{
    const kvs_array *a = &p->shape[i];
    size_t esz = kvs_dtype_size(a->dtype);
    wrk_part partbuf[64], *wps = partbuf;
    uint64_t parts = wrk_route_chunks(&s->routing, p->keys[i], a->count, esz, NULL);
    if (parts > sizeof partbuf / sizeof partbuf[0] &&
        (wps = malloc(parts * sizeof *wps)) == NULL)
        return err_set(KVS_ENOMEM, "out of memory");
    wrk_route_chunks(&s->routing, p->keys[i], a->count, esz, wps);
    if (op->trace_id)
        op->tleft[ku] = (uint32_t)parts;
    /* an init's values: rank 0's (in an elastic job the program's epoch's
     * rank 0, always a worker that was a member before: never a joiner) */
    bool rank0 = s->c.elastic ? s->e_rank == 0 && !s->joiner : s->rank == 0;
    bool sends = src && (p->type != WRK_OP_INIT || rank0);
    for (uint64_t k = 0; k < parts; k++) {
        wrk_part wp = wps[k];
        wrk_req *q = &op->reqs[(*r)++];
        q->op = op;
        q->kidx = (uint32_t)ku;
        q->server = wp.server;
        q->h.type = wire_type(p->type);
        q->h.flags = s->async && p->type == WRK_OP_INIT ? PROTO_F_ASYNC : 0;
        q->h.priority = p->priority;
        q->h.contrib = p->type == WRK_OP_PUSH || p->type == WRK_OP_PUSHPULL;
        q->h.key = p->keys[i];
        q->h.part = wp.part;
        q->h.offset = wp.offset;
        q->h.count = wp.count;
        q->h.total = a->count;
        q->h.dtype = (uint32_t)a->dtype;
        if (sends) {
            q->send = src + wp.offset * esz;
            q->h.body_len = wp.count * esz;
            /* a body this big is lent to ZeroMQ, which releases it later */
            q->zc = q->h.body_len >= DP_ZERO_COPY_MIN;
        }
        if (p->outs) {
            q->outs = &op->outptrs[*o];
            for (size_t j = i; j != NO_NEXT; j = p->next[j])
                op->outptrs[(*o)++] = (uint8_t *)p->outs[j].data + wp.offset * esz;
            q->nouts = (int)(&op->outptrs[*o] - q->outs);
        }
        op->pending += 1 + q->zc;
    }
    if (wps != partbuf)
        free(wps);
    return 0;
}

/* Every request of op, key by key (a key's requests are adjacent). */
static int op_build(kvs_store *s, const plan *p, wrk_op *op)
{
    size_t r = 0, o = 0, ku = 0;
    uint8_t *tmp = op->tmp;
    for (size_t i = 0; i < p->n; i++) {
        if (p->first[i] != i)
            continue;
        const uint8_t *src;
        int rc = key_source(s, p, i, &tmp, &src);
        if (rc == 0)
            rc = key_reqs(s, p, op, i, ku++, src, &r, &o);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- queueing an op (under mu) ---- */

static int shape_err(uint64_t key, const wrk_key *k, const proto_hdr *h, int type)
{
    const char *what = type == WRK_OP_INIT ? "init" : type == WRK_OP_PULL ? "pull output"
                                                                          : "push value";
    return err_set(KVS_ESHAPE,
                   "key %llu: %s has %llu %s elements but the key was initialised with %llu "
                   "%s elements",
                   (unsigned long long)key, what, (unsigned long long)h->total,
                   kvs_dtype_name((kvs_dtype)h->dtype), (unsigned long long)k->count,
                   kvs_dtype_name(k->dtype));
}

/* The first request of each key: reqs[first[u]] for unique key u. */
#define FIRST_REQ(op, r) ((r) == 0 || (op)->reqs[(r)-1].kidx != (op)->reqs[(r)].kidx)

/* Look up op's keys once (ks[u]), check their shapes against their inits,
 * create the keys of an INIT. */
static int keys_locked(kvs_store *s, wrk_op *op, wrk_key **ks)
{
    for (size_t r = 0; r < op->nreqs; r++) {
        if (!FIRST_REQ(op, r))
            continue;
        const proto_hdr *h = &op->reqs[r].h;
        wrk_key *k = hmap_get(&s->keys, h->key);
        if (k && (k->count != h->total || k->dtype != (kvs_dtype)h->dtype))
            return shape_err(h->key, k, h, op->type);
        if (k && (k->row_len != 0) != op->rsp)
            return err_set(KVS_EINVAL, "key %llu is %s: use %s", (unsigned long long)h->key,
                           k->row_len ? "row-sparse" : "dense",
                           k->row_len ? "kvs_push_rsp, kvs_pushpull_rsp and kvs_row_sparse_pull"
                                      : "kvs_push, kvs_pull and kvs_pushpull");
        ks[op->reqs[r].kidx] = k;
    }
    for (size_t r = 0; r < op->nreqs && op->type == WRK_OP_INIT; r++) {
        uint32_t u = op->reqs[r].kidx;
        if (!FIRST_REQ(op, r) || ks[u])
            continue;
        wrk_key *k = calloc(1, sizeof *k);
        if (k == NULL || hmap_put(&s->keys, op->reqs[r].h.key, k) != 0) {
            free(k);
            return err_set(KVS_ENOMEM, "out of memory");
        }
        k->count = op->reqs[r].h.total;
        k->dtype = (kvs_dtype)op->reqs[r].h.dtype;
        ks[u] = k;
    }
    return 0;
}

/* Give every request its round (the key's pushes so far; a push or
 * pushpull counts one more).  Cannot fail. */
static void rounds_locked(wrk_op *op, wrk_key *const *ks)
{
    bool pushes = op->type == WRK_OP_PUSH || op->type == WRK_OP_PUSHPULL;
    uint64_t round = 0;
    for (size_t r = 0; r < op->nreqs; r++) {
        if (FIRST_REQ(op, r)) {
            wrk_key *k = ks[op->reqs[r].kidx];
            round = wrk_elastic_round(op->store, k ? k->pushes : 0);
            if (pushes && k)
                k->pushes++;
        }
        op->reqs[r].h.round = round;
    }
}

/* KVS_TRACE: "queued" for each key of op (its first part carries the round),
 * at the time of the API call, before the I/O thread can see op. */
static void trace_queued(kvs_store *s, const wrk_op *op, uint64_t t_call)
{
    for (size_t i = 0; i < op->nreqs; i++) {
        const wrk_req *q = &op->reqs[i];
        if (!FIRST_REQ(op, i))
            continue;
        wrk_tev ev = {.ts_ns = t_call, .kind = TEV_QUEUED, .op = op->trace_id,
                      .key = q->h.key, .round = q->h.round, .optype = q->h.type};
        wrk_trace_add(s->trace, &ev);
    }
}

/* Check, number, count and queue a built op.  ks: room for op->nkeys. */
static int queue_locked(kvs_store *s, wrk_op *op, wrk_key **ks, uint64_t t_call)
{
    int rc;
    if (s->fatal)
        return err_set(s->fatal, "%s", s->fatal_text);
    if (s->stop)
        return err_set(KVS_ECLOSED, "store is closing");
    if (op->nreqs == 0 && !op->sync)
        return 0; /* no keys: nothing to do (the caller frees op) */
    if ((rc = wrk_elastic_check_locked(s)) != 0)
        return rc;
    if ((rc = keys_locked(s, op, ks)) != 0)
        return rc;
    if (!op->sync && op->nreqs > 0 && (rc = busy_add_locked(s, op, ks)) != 0)
        return rc;
    rounds_locked(op, ks);
    s->pushed = s->pushed || op->type == WRK_OP_PUSH || op->type == WRK_OP_PUSHPULL;
    if (op->trace_id)
        trace_queued(s, op, t_call);
    if (op->nreqs == 0)
        op->done = true;
    list_append(s, op);
    if (op->nreqs > 0)
        io_queue_locked(s, op);
    return 0;
}

int wrk_submit(kvs_store *s, int type, size_t n, const uint64_t *keys, const kvs_array *vals,
               const kvs_array *outs, int priority, wrk_op **sync_op, const wrk_op_ops *ops,
               void *owner, wrk_op **gated)
{
    uint64_t t_call = clock_ns();
    plan p = {.type = type, .n = n, .keys = keys, .vals = vals, .outs = outs,
              .shape = vals ? vals : outs, .priority = priority};
    wrk_op *op = NULL;
    wrk_key **ks = NULL;
    int rc;

    if ((rc = plan_keys(&p)) != 0)
        goto out;
    if ((op = calloc(1, sizeof *op)) == NULL) {
        rc = err_set(KVS_ENOMEM, "out of memory");
        goto out;
    }
    op->store = s;
    op->type = type;
    op->sync = sync_op != NULL;
    op->ops = ops;
    op->owner = owner;
    if ((rc = op_alloc(s, &p, op)) != 0 || (rc = op_build(s, &p, op)) != 0)
        goto out;
    if (s->codec && gated && (type == WRK_OP_PUSH || type == WRK_OP_PUSHPULL)) {
        rc = err_set(KVS_EINVAL, "gradient compression takes host arrays: this push's "
                     "arrays are staged from a device");
        goto out;
    }
    if ((rc = wrk_codec_op(s, op)) != 0)
        goto out;
    if (gated && !op->sync) {
        *gated = NULL;
        op->gated = true;
        op->ready = 0;
        op->cut = SIZE_MAX;
        op->pending++; /* the caller's hold, until wrk_op_open_done */
    }
    if ((ks = calloc(op->nkeys ? op->nkeys : 1, sizeof *ks)) == NULL) {
        rc = err_set(KVS_ENOMEM, "out of memory");
        goto out;
    }
    pthread_mutex_lock(&s->mu);
    rc = queue_locked(s, op, ks, t_call);
    pthread_mutex_unlock(&s->mu);
    if (rc == 0 && sync_op)
        *sync_op = op;
    else if (rc == 0 && op->nreqs == 0)
        wrk_op_free(op); /* never queued */
    else if (rc == 0 && op->gated)
        *gated = op;
out:
    if (rc && op) {
        op->ops = NULL; /* on failure the caller still owns owner */
        op->owner = NULL;
        wrk_op_free(op);
    }
    free(ks);
    plan_fini(&p);
    return rc;
}

int wrk_submit_built(kvs_store *s, wrk_op *op)
{
    uint64_t t_call = clock_ns();
    wrk_key **ks = calloc(op->nkeys ? op->nkeys : 1, sizeof *ks);
    if (ks == NULL)
        return err_set(KVS_ENOMEM, "out of memory");
    pthread_mutex_lock(&s->mu);
    int rc = queue_locked(s, op, ks, t_call);
    pthread_mutex_unlock(&s->mu);
    free(ks);
    if (rc == 0 && !op->sync && op->nreqs == 0)
        wrk_op_free(op); /* never queued */
    return rc;
}

/* ---- gated ops: requests leave as their data is written ---- */

void wrk_op_open(kvs_store *s, wrk_op *op, size_t n)
{
    pthread_mutex_lock(&s->mu);
    if (n > op->nreqs)
        n = op->nreqs;
    if (n > op->ready) {
        op->ready = n;
        if (!s->stop)
            uv_async_send(&s->wake);
    }
    pthread_mutex_unlock(&s->mu);
}

void wrk_op_open_done(kvs_store *s, wrk_op *op, int err, const char *text)
{
    pthread_mutex_lock(&s->mu);
    if (err && op->cut == SIZE_MAX) {
        op->cut = op->ready;
        op->cut_err = err;
    }
    op->ready = op->nreqs;
    if (!s->stop)
        uv_async_send(&s->wake);
    op_release_locked(s, op, err, text);
    pthread_mutex_unlock(&s->mu);
}

/* ---- waiting ---- */

/* Once the job has failed, every wait reports it, even when the operations it
 * waited for were refused at queue time (their error went to that call).  A
 * job that ended normally (KVS_ECLOSED) is not a failure.  Call with mu. */
static int sticky_locked(kvs_store *s, int rc)
{
    if (rc == 0 && s->fatal != 0 && s->fatal != KVS_ECLOSED)
        rc = err_set(s->fatal, "%s", s->fatal_text);
    return rc;
}

int wrk_wait_op(kvs_store *s, wrk_op *op)
{
    int rc;
    pthread_mutex_lock(&s->mu);
    while (!op->done)
        pthread_cond_wait(&s->cv, &s->mu);
    list_remove(s, op);
    rc = op->err;
    if (rc)
        err_set(rc, "%s", op->errtext);
    wrk_elastic_seen_locked(s, rc, wrk_elastic_op_epoch(op));
    pthread_mutex_unlock(&s->mu);
    wrk_op_free(op);
    return rc;
}

static bool op_has_key(const wrk_op *op, uint64_t key)
{
    for (size_t i = 0; i < op->nkeys; i++)
        if (op->keys[i] == key)
            return true;
    return false;
}

int wrk_wait_keys(kvs_store *s, bool all, uint64_t key)
{
    int rc;
    pthread_mutex_lock(&s->mu);
    while (all ? s->nbusy > 0 : wrk_key_busy_locked(s, key))
        pthread_cond_wait(&s->cv, &s->mu);
    rc = wrk_reap_locked(s, all, key);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int wrk_reap_locked(kvs_store *s, bool all, uint64_t key)
{
    int rc = 0;
    uint64_t ep = 0;
    /* only failed ops stay listed once done: scan only when there are some */
    wrk_op *op = s->nfailed > 0 ? s->ops_head : NULL;
    while (op) {
        wrk_op *n = op->next;
        if (op->done && !op->sync && (all || op_has_key(op, key))) {
            if (rc == 0 && op->err) {
                rc = op->err;
                ep = wrk_elastic_op_epoch(op);
                err_set(rc, "%s", op->errtext);
            }
            s->nfailed -= op->err != 0;
            list_remove(s, op);
            wrk_op_free(op);
        }
        op = n;
    }
    wrk_elastic_seen_locked(s, rc, ep);
    return sticky_locked(s, rc);
}

int wrk_op_run(kvs_store *s, wrk_op *op)
{
    pthread_mutex_lock(&s->mu);
    if (s->fatal || s->stop) {
        int rc = s->fatal ? err_set(s->fatal, "%s", s->fatal_text)
                          : err_set(KVS_ECLOSED, "store is closing");
        pthread_mutex_unlock(&s->mu);
        wrk_op_free(op);
        return rc;
    }
    list_append(s, op);
    io_queue_locked(s, op);
    pthread_mutex_unlock(&s->mu);
    return wrk_wait_op(s, op);
}

int wrk_op_control(kvs_store *s, int type)
{
    wrk_op *op = calloc(1, sizeof *op);
    if (op == NULL)
        return err_set(KVS_ENOMEM, "out of memory");
    op->store = s;
    op->type = type;
    op->sync = true;
    op->nreqs = 1;
    op->reqs = calloc(1, sizeof *op->reqs);
    if (op->reqs == NULL) {
        wrk_op_free(op);
        return err_set(KVS_ENOMEM, "out of memory");
    }
    op->reqs[0].op = op;
    op->reqs[0].server = -1;
    op->reqs[0].h.type = type == WRK_OP_BARRIER ? PROTO_BARRIER : PROTO_EXIT;
    op->pending = 1;
    pthread_mutex_lock(&s->mu);
    /* an exit still goes out after a failure, unless the scheduler is gone */
    if (s->fatal && (type != WRK_OP_EXIT || s->sched_gone)) {
        int rc = err_set(s->fatal, "%s", s->fatal_text);
        pthread_mutex_unlock(&s->mu);
        wrk_op_free(op);
        return rc;
    }
    list_append(s, op);
    io_queue_locked(s, op);
    pthread_mutex_unlock(&s->mu);
    uint64_t t0 = clock_ns();
    int rc = wrk_wait_op(s, op);
    if (s->trace && type == WRK_OP_BARRIER) {
        wrk_tev ev = {.ts_ns = t0, .kind = TEV_BARRIER, .a = clock_ns() - t0, .status = rc};
        wrk_trace_add(s->trace, &ev);
    }
    return rc;
}

/* ---- ops of local groups (group.c) ---- */

int wrk_submit_held(kvs_store *s, int type, size_t n, const uint64_t *keys,
                    const kvs_array *vals, const kvs_array *outs, wrk_op **out,
                    wrk_held *held)
{
    plan p = {.type = type, .n = n, .keys = keys, .vals = vals, .outs = outs,
              .shape = vals ? vals : outs};
    wrk_op *op = NULL;
    wrk_key **ks = NULL;
    int rc;
    size_t tmp_bytes = 0;

    *out = NULL;
    if ((rc = plan_keys(&p)) != 0)
        goto out;
    if ((op = calloc(1, sizeof *op)) == NULL) {
        rc = err_set(KVS_ENOMEM, "out of memory");
        goto out;
    }
    op->store = s;
    op->type = type;
    size_t nu = (size_t)p.nu;
    op->nkeys = nu;
    op->keys = malloc((nu ? nu : 1) * sizeof *op->keys);
    op->kbusy = malloc((nu ? nu : 1) * sizeof *op->kbusy);
    ks = calloc(nu ? nu : 1, sizeof *ks);
    if (op->keys == NULL || op->kbusy == NULL || ks == NULL) {
        rc = err_set(KVS_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n && vals; i++)
        if (p.first[i] == i && p.cnt[i] > 1)
            tmp_bytes += (key_bytes(&vals[i]) + 63) & ~(size_t)63;
    if (tmp_bytes && (op->tmp = aligned_alloc(64, tmp_bytes)) == NULL) {
        rc = err_set(KVS_ENOMEM, "out of memory");
        goto out;
    }
    uint8_t *tmp = op->tmp;
    for (size_t i = 0, u = 0; i < n; i++) {
        if (p.first[i] != i)
            continue;
        const uint8_t *src = vals ? vals[i].data : NULL;
        if (vals && p.cnt[i] > 1) { /* a repeated key: its local sum is what the group adds */
            size_t *ix = malloc(p.cnt[i] * sizeof *ix), c = 0;
            if (ix == NULL) {
                rc = err_set(KVS_ENOMEM, "out of memory");
                goto out;
            }
            for (size_t j = i; j != NO_NEXT; j = p.next[j])
                ix[c++] = j;
            rc = wrk_sum_local(s, tmp, vals, ix, c);
            free(ix);
            if (rc) {
                rc = err_set(rc, "key %llu: summing %zu local values failed",
                             (unsigned long long)keys[i], c);
                goto out;
            }
            src = tmp;
            tmp += (key_bytes(&vals[i]) + 63) & ~(size_t)63;
        }
        wrk_held *h = &held[u];
        op->keys[u++] = keys[i];
        *h = (wrk_held){.key = keys[i], .count = p.shape[i].count, .dtype = p.shape[i].dtype,
                        .src = src, .dst = outs ? outs[i].data : NULL, .nouts = 0};
        for (size_t j = i; outs && j != NO_NEXT; j = p.next[j]) {
            if (outs[j].data == h->dst)
                continue;
            if (h->nouts == WRK_HELD_OUTS) {
                rc = err_set(KVS_EINVAL, "key %llu: more than %d outputs in one call",
                             (unsigned long long)keys[i], WRK_HELD_OUTS + 1);
                goto out;
            }
            h->extra[h->nouts++] = outs[j].data;
        }
    }
    pthread_mutex_lock(&s->mu);
    if (s->fatal)
        rc = err_set(s->fatal, "%s", s->fatal_text);
    else if (s->stop)
        rc = err_set(KVS_ECLOSED, "store is closing");
    for (size_t u = 0; u < nu && rc == 0; u++) {
        wrk_key *k = hmap_get(&s->keys, op->keys[u]);
        if (k && (k->count != held[u].count || k->dtype != held[u].dtype)) {
            proto_hdr h = {.key = op->keys[u], .total = held[u].count,
                           .dtype = (uint32_t)held[u].dtype};
            rc = shape_err(op->keys[u], k, &h, type);
        }
        ks[u] = k;
    }
    if (rc == 0)
        rc = busy_add_locked(s, op, ks);
    if (rc == 0) {
        s->pushed = s->pushed || type == WRK_OP_PUSH || type == WRK_OP_PUSHPULL;
        for (size_t u = 0; u < nu; u++) { /* the rounds: as rounds_locked numbers them */
            held[u].round = wrk_elastic_round(s, ks[u] == NULL ? 0
                                              : type == WRK_OP_PULL ? ks[u]->pushes
                                                                    : ks[u]->pushes++);
            held[u].pull_mark = ks[u] ? ks[u]->pulls_issued : 0;
        }
        op->pending = (int)nu;
        list_append(s, op);
    }
    pthread_mutex_unlock(&s->mu);
    if (rc == 0)
        *out = op;
out:
    if (rc && op)
        wrk_op_free(op);
    free(ks);
    plan_fini(&p);
    return rc;
}

int wrk_submit_chunk(kvs_store *s, int type, const wrk_held *k, const wrk_part *part,
                     uint16_t contrib, const uint8_t *src, uint8_t *dst, int priority,
                     const wrk_op_ops *ops, void *owner, wrk_op **out)
{
    size_t esz = kvs_dtype_size(k->dtype);
    wrk_op *op = calloc(1, sizeof *op);
    int rc = 0;
    *out = NULL;
    if (op == NULL)
        return err_set(KVS_ENOMEM, "out of memory");
    op->store = s;
    op->type = type;
    op->sync = true;
    op->nreqs = 1;
    op->nkeys = 1;
    op->keys = malloc(sizeof *op->keys);
    op->reqs = calloc(1, sizeof *op->reqs);
    op->outptrs = calloc(1, sizeof *op->outptrs);
    if (op->keys == NULL || op->reqs == NULL || op->outptrs == NULL) {
        wrk_op_free(op);
        return err_set(KVS_ENOMEM, "out of memory");
    }
    op->keys[0] = k->key;
    if (s->trace && (op->tleft = calloc(1, sizeof *op->tleft)) != NULL) {
        op->trace_id = __atomic_add_fetch(&s->trace_seq, 1, __ATOMIC_RELAXED);
        op->tleft[0] = 1;
    }
    op->ops = ops;
    op->owner = owner;
    wrk_req *q = &op->reqs[0];
    q->op = op;
    q->server = part->server;
    q->h = (proto_hdr){.type = wire_type(type), .priority = priority, .contrib = contrib,
                       .key = k->key, .part = part->part, .offset = part->offset,
                       .count = part->count, .total = k->count, .dtype = (uint32_t)k->dtype,
                       .round = k->round};
    if (type != WRK_OP_PULL) {
        q->send = src;
        q->h.body_len = part->count * esz;
        q->zc = q->h.body_len >= DP_ZERO_COPY_MIN;
    }
    if (type == WRK_OP_PUSHPULL || type == WRK_OP_PULL) {
        op->outptrs[0] = dst;
        q->outs = op->outptrs;
        q->nouts = 1;
    }
    op->pending = 1 + q->zc;
    if ((rc = wrk_codec_op(s, op)) != 0) {
        op->ops = NULL; /* on failure the caller still owns owner */
        wrk_op_free(op);
        return rc;
    }
    pthread_mutex_lock(&s->mu);
    if (s->fatal)
        rc = err_set(s->fatal, "%s", s->fatal_text);
    else if (s->stop)
        rc = err_set(KVS_ECLOSED, "store is closing");
    if (rc == 0) {
        *out = op; /* before the op can complete: its done callback may read it */
        list_append(s, op);
        io_queue_locked(s, op);
    }
    pthread_mutex_unlock(&s->mu);
    if (rc) {
        op->ops = NULL; /* on failure the caller still owns owner */
        wrk_op_free(op);
        return rc;
    }
    return 0;
}
