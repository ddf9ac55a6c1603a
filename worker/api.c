/* api.c - the public API of libkvs: argument checks, operations, waits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/datapath.h"
#include "common/err.h"
#include "common/log.h"
#include "common/memtune.h"
#include "common/sizes.h"
#include "worker/metrics.h"
#include "tree/tree.h"
#include "worker/trace.h"
#include "worker/wrk_int.h"


/* ---- operation bookkeeping ---- */

void wrk_op_free(wrk_op *op)
{
    if (op == NULL)
        return;
    free(op->keys);
    free(op->reqs);
    free(op->outptrs);
    free(op->tmp);
    free(op->tleft);
    wrk_comm_post_free(op->post);
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

/* (mu) An async op counts as unfinished for each of its keys until it
 * completes: kvs_wait(key) waits on the key's count, not on a scan of every
 * op.  Returns 0 or KVS_ENOMEM (nothing counted). */
static int busy_add_locked(kvs_store *s, wrk_op *op)
{
    for (size_t i = 0; i < op->nkeys; i++) {
        uintptr_t c = (uintptr_t)hmap_get(&s->busy, op->keys[i]);
        if (hmap_put(&s->busy, op->keys[i], (void *)(c + 1)) != 0) {
            while (i-- > 0) {
                c = (uintptr_t)hmap_get(&s->busy, op->keys[i]);
                if (c > 1)
                    hmap_put(&s->busy, op->keys[i], (void *)(c - 1)); /* exists: no alloc */
                else
                    hmap_del(&s->busy, op->keys[i]);
            }
            return err_set(KVS_ENOMEM, "out of memory");
        }
    }
    s->nbusy++;
    return 0;
}

static void busy_done_locked(kvs_store *s, wrk_op *op)
{
    for (size_t i = 0; i < op->nkeys; i++) {
        uintptr_t c = (uintptr_t)hmap_get(&s->busy, op->keys[i]);
        if (c > 1)
            hmap_put(&s->busy, op->keys[i], (void *)(c - 1)); /* exists: no alloc */
        else
            hmap_del(&s->busy, op->keys[i]);
    }
    s->nbusy--;
}

static void op_release_locked(kvs_store *s, wrk_op *op, int err, const char *text)
{
    if (err != 0 && op->err == 0) {
        op->err = err;
        snprintf(op->errtext, sizeof op->errtext, "%s", text ? text : kvs_strerror(err));
    }
    if (--op->pending > 0 || op->done)
        return;
    if (op->err == 0 && op->post && wrk_comm_post_locked(s, op))
        return; /* the comm thread broadcasts to the device outputs first */
    op->done = true;
    if (!op->sync) {
        busy_done_locked(s, op);
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

void wrk_fail_all_locked(kvs_store *s, int err, const char *text)
{
    if (s->fatal == 0) {
        s->fatal = err;
        snprintf(s->fatal_text, sizeof s->fatal_text, "%s", text);
    }
    /* ops still in the submission queue never reach the I/O thread */
    wrk_op *op = s->q_head;
    s->q_head = s->q_tail = NULL;
    while (op) {
        wrk_op *n = op->qnext;
        size_t left = op->nreqs;
        for (size_t i = 0; i < left; i++) {
            /* and the zero-copy frame a big body would have had released */
            bool zc = op->reqs[i].h.body_len >= DP_ZERO_COPY_MIN;
            op_release_locked(s, op, err, text);
            if (zc)
                op_release_locked(s, op, err, text);
        }
        op = n;
    }
    pthread_cond_broadcast(&s->cv);
}

/* ---- argument checks ---- */

static int check_array(kvs_store *s, const kvs_array *a, uint64_t key, const char *what)
{
    uint64_t bytes;
    if ((unsigned)a->dtype >= KVS_NUM_DTYPES)
        return err_set(KVS_EINVAL, "key %llu: %s dtype %d is not a kvs_dtype",
                       (unsigned long long)key, what, (int)a->dtype);
    if (a->device != KVS_CPU) {
        int rc = wrk_comm_check_device(s->comm, a->device, key, what);
        if (rc)
            return rc;
    }
    if (!size_mul(a->count, kvs_dtype_size(a->dtype), &bytes))
        return err_set(KVS_ETOOBIG, "key %llu: %s of %llu %s elements: the byte size "
                       "overflows 64 bits", (unsigned long long)key, what,
                       (unsigned long long)a->count, kvs_dtype_name(a->dtype));
    if (bytes > s->c.max_message)
        return err_set(KVS_ETOOBIG, "key %llu: %s of %llu %s elements is %llu bytes, more than "
                       "KVS_MAX_MESSAGE (%llu bytes) allows for one key",
                       (unsigned long long)key, what, (unsigned long long)a->count,
                       kvs_dtype_name(a->dtype), (unsigned long long)bytes,
                       (unsigned long long)s->c.max_message);
    if (a->data == NULL && a->count > 0)
        return err_set(KVS_EINVAL, "key %llu: %s data is NULL", (unsigned long long)key, what);
    return 0;
}

static int check_args(kvs_store *s, size_t n, const uint64_t *keys, const kvs_array *a,
                      const char *what)
{
    if (s == NULL)
        return err_set(KVS_EINVAL, "store is NULL");
    if (n > 0 && (keys == NULL || a == NULL))
        return err_set(KVS_EINVAL, "%s: keys or arrays are NULL", what);
    for (size_t i = 0; i < n; i++) {
        int rc = check_array(s, &a[i], keys[i], what);
        if (rc)
            return rc;
    }
    return 0;
}

/* The occurrences of each key in keys[0..n): first[i] = index of the first
 * occurrence of keys[i]; for a first occurrence i, cnt[i] = how many there
 * are and next[] chains them in order (NO_NEXT ends a chain).  O(n).
 * Returns the number of unique keys or -1 (no memory). */
#define NO_NEXT SIZE_MAX
static long uniq_keys(size_t n, const uint64_t *keys, size_t *first, size_t *cnt,
                      size_t *next, size_t *last)
{
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

/* ---- building and submitting operations (dist stores) ---- */

static int shape_err(uint64_t key, const wrk_key *k, const kvs_array *a, const char *what)
{
    return err_set(KVS_ESHAPE,
                   "key %llu: %s has %llu %s elements but the key was initialised with %llu "
                   "%s elements",
                   (unsigned long long)key, what, (unsigned long long)a->count,
                   kvs_dtype_name(a->dtype), (unsigned long long)k->count,
                   kvs_dtype_name(k->dtype));
}

/* Under mu: check the keys' shapes against their inits, create the keys of
 * an INIT, and give every request its round (the key's pushes so far; a
 * push or pushpull counts one more).  Requests of one key are adjacent. */
static int plan_rounds_locked(kvs_store *s, wrk_op *op, int type)
{
    int rc = 0;
    for (size_t r = 0; r < op->nreqs && rc == 0; r++) {
        const proto_hdr *h = &op->reqs[r].h;
        if (r > 0 && h->key == op->reqs[r - 1].h.key)
            continue;
        wrk_key *k = hmap_get(&s->keys, h->key);
        kvs_array a = {NULL, h->total, (kvs_dtype)h->dtype, KVS_CPU};
        if (k && (k->count != a.count || k->dtype != a.dtype))
            rc = shape_err(h->key, k, &a, type == WRK_OP_INIT   ? "init"
                                          : type == WRK_OP_PULL ? "pull output"
                                                                : "push value");
    }
    for (size_t r = 0; r < op->nreqs && rc == 0 && type == WRK_OP_INIT; r++) {
        const proto_hdr *h = &op->reqs[r].h;
        if ((r > 0 && h->key == op->reqs[r - 1].h.key) || hmap_get(&s->keys, h->key))
            continue;
        wrk_key *k = calloc(1, sizeof *k);
        if (k == NULL || hmap_put(&s->keys, h->key, k) != 0) {
            free(k);
            rc = err_set(KVS_ENOMEM, "out of memory");
        } else {
            k->count = h->total;
            k->dtype = (kvs_dtype)h->dtype;
        }
    }
    if (rc)
        return rc;
    uint64_t round = 0;
    for (size_t r = 0; r < op->nreqs; r++) {
        proto_hdr *h = &op->reqs[r].h;
        if (r == 0 || h->key != op->reqs[r - 1].h.key) {
            wrk_key *k = hmap_get(&s->keys, h->key);
            round = k ? k->pushes : 0;
            if ((type == WRK_OP_PUSH || type == WRK_OP_PUSHPULL) && k)
                k->pushes++;
        }
        h->round = round;
    }
    return 0;
}

/* KVS_TRACE: "queued" for each key of op (its first part carries the round),
 * at the time of the API call.  Called with mu held, before the I/O thread
 * can see op. */
static void trace_queued(kvs_store *s, const wrk_op *op, uint64_t t_call)
{
    for (size_t i = 0; i < op->nreqs; i++) {
        const wrk_req *q = &op->reqs[i];
        if (i > 0 && op->reqs[i - 1].kidx == q->kidx)
            continue;
        wrk_tev ev = {.ts_ns = t_call, .kind = TEV_QUEUED, .op = op->trace_id,
                      .key = q->h.key, .round = q->h.round, .optype = q->h.type};
        wrk_trace_add(s->trace, &ev);
    }
}

/* Build and queue an op.  vals: data sent (push/pushpull/init); outs: where
 * replies go (pull/pushpull).  Called without mu: the requests are planned
 * (routing, local sums) before the lock is taken, which then only checks
 * shapes, numbers the rounds and queues. */
int wrk_submit(kvs_store *s, int type, size_t n, const uint64_t *keys, const kvs_array *vals,
               const kvs_array *outs, int priority, wrk_op **sync_op, wrk_post *post)
{
    const kvs_array *shape = vals ? vals : outs;
    uint64_t t_call = clock_ns();
    size_t *first = NULL, *cnt, *next, *last;
    long nu;
    int rc = 0;
    wrk_op *op = NULL;

    first = malloc((n ? n : 1) * 4 * sizeof *first);
    if (first == NULL)
        return err_set(KVS_ENOMEM, "out of memory");
    cnt = first + (n ? n : 1);
    next = cnt + (n ? n : 1);
    last = next + (n ? n : 1);
    nu = uniq_keys(n, keys, first, cnt, next, last);
    if (nu < 0) {
        free(first);
        return err_set(KVS_ENOMEM, "out of memory");
    }
    /* every occurrence of a key must have the same shape */
    for (size_t i = 0; i < n; i++) {
        const kvs_array *a = &shape[i], *b = &shape[first[i]];
        const kvs_array *o = outs ? &outs[i] : NULL, *ob = outs ? &outs[first[i]] : NULL;
        if (a->count != b->count || a->dtype != b->dtype ||
            (o && (o->count != b->count || o->dtype != b->dtype)) ||
            (ob && (ob->count != b->count || ob->dtype != b->dtype))) {
            free(first);
            return err_set(KVS_ESHAPE, "key %llu appears with different counts or dtypes in "
                           "one call", (unsigned long long)keys[i]);
        }
    }

    op = calloc(1, sizeof *op);
    if (op == NULL) {
        free(first);
        return err_set(KVS_ENOMEM, "out of memory");
    }
    op->store = s;
    op->type = type;
    op->sync = sync_op != NULL;
    op->nkeys = (size_t)nu;
    op->post = post;
    op->keys = malloc((size_t)(nu ? nu : 1) * sizeof *op->keys);

    /* count the parts and output pointers */
    size_t nreqs = 0, nouts = 0, tmp_bytes = 0;
    for (size_t i = 0, u = 0; i < n; i++) {
        if (first[i] != i)
            continue;
        if (op->keys)
            op->keys[u++] = keys[i];
        uint64_t parts = wrk_route_chunks(&s->routing, keys[i], shape[i].count,
                                          kvs_dtype_size(shape[i].dtype), NULL);
        nreqs += parts;
        if (outs)
            nouts += parts * cnt[i];
        if (vals && cnt[i] > 1 && type != WRK_OP_INIT)
            tmp_bytes += ((shape[i].count * kvs_dtype_size(shape[i].dtype)) + 63) & ~(size_t)63;
    }
    op->nreqs = nreqs;
    op->reqs = calloc(nreqs ? nreqs : 1, sizeof *op->reqs);
    op->outptrs = calloc(nouts ? nouts : 1, sizeof *op->outptrs);
    if (tmp_bytes)
        op->tmp = aligned_alloc(64, tmp_bytes);
    if (op->keys == NULL || op->reqs == NULL || op->outptrs == NULL ||
        (tmp_bytes && op->tmp == NULL)) {
        rc = err_set(KVS_ENOMEM, "out of memory for %zu requests", nreqs);
        goto fail;
    }

    size_t r = 0, o = 0, ku = 0;
    uint8_t *tmp = op->tmp;
    if (s->trace && (op->tleft = calloc(op->nkeys ? op->nkeys : 1, sizeof *op->tleft)))
        op->trace_id = __atomic_add_fetch(&s->trace_seq, 1, __ATOMIC_RELAXED);
    wrk_part partbuf[64];
    for (size_t i = 0; i < n; i++) {
        if (first[i] != i)
            continue;
        const kvs_array *a = &shape[i];
        size_t esz = kvs_dtype_size(a->dtype);
        const uint8_t *src = vals ? vals[i].data : NULL;
        if (vals && type != WRK_OP_INIT && cnt[i] > 1) {
            /* the same key twice in one call: push the local sum */
            size_t idx[64], *ix = idx, c = 0;
            if (cnt[i] > 64 && (ix = malloc(cnt[i] * sizeof *ix)) == NULL) {
                rc = err_set(KVS_ENOMEM, "out of memory");
                goto fail;
            }
            for (size_t j = i; j != NO_NEXT; j = next[j])
                ix[c++] = j;
            rc = wrk_sum_local(s, tmp, vals, ix, cnt[i]);
            if (ix != idx)
                free(ix);
            if (rc) {
                rc = err_set(rc, "key %llu: summing %zu local values failed",
                             (unsigned long long)keys[i], cnt[i]);
                goto fail;
            }
            src = tmp;
            tmp += ((a->count * esz) + 63) & ~(size_t)63;
        }
        wrk_part *wps = partbuf;
        uint64_t parts = wrk_route_chunks(&s->routing, keys[i], a->count, esz, NULL);
        if (parts > sizeof partbuf / sizeof partbuf[0] &&
            (wps = malloc(parts * sizeof *wps)) == NULL) {
            rc = err_set(KVS_ENOMEM, "out of memory");
            goto fail;
        }
        wrk_route_chunks(&s->routing, keys[i], a->count, esz, wps);
        if (op->trace_id)
            op->tleft[ku] = (uint32_t)parts;
        for (uint64_t p = 0; p < parts; p++) {
            wrk_part wp = wps[p];
            wrk_req *q = &op->reqs[r++];
            q->op = op;
            q->kidx = (uint32_t)ku;
            q->server = wp.server;
            q->h.type = (uint16_t)(type == WRK_OP_INIT ? PROTO_INIT
                                   : type == WRK_OP_PUSH ? PROTO_PUSH
                                   : type == WRK_OP_PULL ? PROTO_PULL
                                                         : PROTO_PUSHPULL);
            q->h.flags = s->async && type == WRK_OP_INIT ? PROTO_F_ASYNC : 0;
            q->h.priority = priority;
            q->h.key = keys[i];
            q->h.part = wp.part;
            q->h.offset = wp.offset;
            q->h.count = wp.count;
            q->h.total = a->count;
            q->h.dtype = (uint32_t)a->dtype;
            if (src && (type != WRK_OP_INIT || s->rank == 0)) {
                q->send = src + wp.offset * esz;
                q->h.body_len = wp.count * esz;
            }
            if (outs) {
                q->outs = &op->outptrs[o];
                for (size_t j = i; j != NO_NEXT; j = next[j])
                    op->outptrs[o++] = (uint8_t *)outs[j].data + wp.offset * esz;
                q->nouts = (int)(&op->outptrs[o] - q->outs);
            }
        }
        if (wps != partbuf)
            free(wps);
        ku++;
    }
    op->pending = (int)op->nreqs;
    for (size_t i = 0; i < op->nreqs; i++)
        if (op->reqs[i].h.body_len >= DP_ZERO_COPY_MIN)
            op->pending++; /* released by ZeroMQ when the frame is sent */

    pthread_mutex_lock(&s->mu);
    if (s->fatal) {
        rc = err_set(s->fatal, "%s", s->fatal_text);
        pthread_mutex_unlock(&s->mu);
        goto fail;
    }
    if (s->stop) {
        rc = err_set(KVS_ECLOSED, "store is closing");
        pthread_mutex_unlock(&s->mu);
        goto fail;
    }
    rc = plan_rounds_locked(s, op, type);
    if (rc == 0 && !op->sync && op->nreqs > 0)
        rc = busy_add_locked(s, op);
    if (rc) {
        pthread_mutex_unlock(&s->mu);
        goto fail;
    }
    if (op->trace_id)
        trace_queued(s, op, t_call);
    if (op->nreqs == 0 && !op->sync) {
        /* nothing to do (no keys) */
        pthread_mutex_unlock(&s->mu);
        wrk_op_free(op);
        free(first);
        return 0;
    }
    if (op->nreqs == 0)
        op->done = true;
    list_append(s, op);
    if (op->nreqs > 0)
        wrk_io_submit(s, op);
    pthread_mutex_unlock(&s->mu);
    free(first);
    if (sync_op)
        *sync_op = op;
    return 0;
fail:
    free(first);
    if (op)
        op->post = NULL; /* on failure the caller still owns post */
    wrk_op_free(op);
    return rc;
}

/* Once the job has failed, every wait reports it, even when the operations it
 * waited for were refused at queue time (their error went to that call).  A
 * job that ended normally (KVS_ECLOSED) is not a failure.  Call with mu. */
static int sticky_locked(kvs_store *s, int rc)
{
    if (rc == 0 && s->fatal != 0 && s->fatal != KVS_ECLOSED)
        rc = err_set(s->fatal, "%s", s->fatal_text);
    return rc;
}

/* Wait for one op (sync ops: init, barrier, exit); removes it. */
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

/* Wait until no unfinished op matches; report and drop the matching failed
 * ops.  all: every op; else ops on key.  Waiting uses the per-key counts;
 * only when some op failed are the listed ops scanned. */
static int wait_ops(kvs_store *s, bool all, uint64_t key)
{
    int rc = 0;
    pthread_mutex_lock(&s->mu);
    while (all ? s->nbusy > 0 : hmap_get(&s->busy, key) != NULL)
        pthread_cond_wait(&s->cv, &s->mu);
    wrk_op *op = s->nfailed > 0 ? s->ops_head : NULL;
    while (op) {
        wrk_op *n = op->next;
        if (op->done && !op->sync && (all || op_has_key(op, key))) {
            if (rc == 0 && op->err) {
                rc = op->err;
                err_set(rc, "%s", op->errtext);
            }
            s->nfailed -= op->err != 0;
            list_remove(s, op);
            wrk_op_free(op);
        }
        op = n;
    }
    rc = sticky_locked(s, rc);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* ---- public API ---- */

static const struct store_type {
    const char *name;
    int kind;
    bool async;
    int comm;
} store_types[] = {
    {"local", WRK_LOCAL, false, WRK_COMM_CPU},
    {"device", WRK_LOCAL, false, WRK_COMM_DEVICE},
    {"nccl", WRK_LOCAL, false, WRK_COMM_NCCL},
    {"dist_sync", WRK_DIST, false, WRK_COMM_CPU},
    {"dist", WRK_DIST, false, WRK_COMM_CPU},
    {"dist_async", WRK_DIST, true, WRK_COMM_CPU},
    {"dist_sync_device", WRK_DIST, false, WRK_COMM_DEVICE},
    {"dist_device_sync", WRK_DIST, false, WRK_COMM_DEVICE},
    {"dist_async_device", WRK_DIST, true, WRK_COMM_DEVICE},
};

static int parse_type(const char *type, int *kind, bool *async, int *comm)
{
    if (type == NULL)
        return err_set(KVS_EINVAL, "store type is NULL");
    for (size_t i = 0; i < sizeof store_types / sizeof store_types[0]; i++)
        if (!strcmp(type, store_types[i].name)) {
            *kind = store_types[i].kind;
            *async = store_types[i].async;
            *comm = store_types[i].comm;
            return 0;
        }
    return err_set(KVS_EINVAL, "unknown store type '%s': expected 'local', 'device', 'nccl', "
                   "'dist_sync', 'dist_async', 'dist_sync_device' (or 'dist_device_sync') or "
                   "'dist_async_device'", type);
}

/* KVS_TRACE: "%r" in the path becomes the rank (one file per worker). */
static void trace_path(const char *tmpl, int rank, char *out, size_t len)
{
    size_t n = 0;
    for (const char *p = tmpl; *p && n + 12 < len; p++) {
        if (p[0] == '%' && p[1] == 'r') {
            n += (size_t)snprintf(out + n, len - n, "%d", rank);
            p++;
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
}

int kvs_create(const char *type, kvs_store **out)
{
    kvs_store *s;
    char err[512];
    int kind = 0, comm = 0, rc;
    bool async = false;
    err_clear();
    if (out == NULL)
        return err_set(KVS_EINVAL, "out is NULL");
    *out = NULL;
    rc = parse_type(type, &kind, &async, &comm);
    if (rc)
        return rc;
    s = calloc(1, sizeof *s);
    if (s == NULL)
        return err_set(KVS_ENOMEM, "out of memory");
    s->kind = kind;
    s->async = async;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    hmap_init(&s->keys);
    hmap_init(&s->busy);
    hmap_init(&s->reqs);
    hmap_init(&s->batches);
    snprintf(s->who, sizeof s->who, "worker");
    if (cfg_load(&s->c, kind == WRK_DIST, err, sizeof err) != 0 ||
        tree_env_check(err, sizeof err) != 0) {
        rc = err_set(KVS_ECONFIG, "%s", err);
        goto fail;
    }
    if (kind == WRK_DIST && s->c.role != CFG_ROLE_WORKER && s->c.role != CFG_ROLE_NONE) {
        rc = err_set(KVS_ECONFIG, "DMLC_ROLE='%s': libkvs is the worker side; run "
                     "kvs-%s for that role", cfg_role_name(s->c.role),
                     cfg_role_name(s->c.role));
        goto fail;
    }
    if (s->c.verbose > log_level)
        log_level = s->c.verbose;
    if (s->c.worker_id >= 0)
        snprintf(s->who, sizeof s->who, "worker %d", s->c.worker_id);
    if (kind == WRK_DIST && s->c.malloc_tune)
        mem_tune();
    if (wrk_met_init(s) != 0) {
        rc = err_set(KVS_ENOMEM, "out of memory");
        goto fail;
    }
    rc = red_pool_new(s->c.reduction_nthreads, s->c.bigarray_bound, &s->pool);
    if (rc) {
        rc = err_set(rc, "cannot start %d reduction threads", s->c.reduction_nthreads);
        goto fail;
    }
    if ((rc = wrk_comm_new(s, comm, &s->comm)) != 0)
        goto fail; /* it set the message */
    if (kind == WRK_LOCAL) {
        s->num_workers = 1;
        s->rank = 0;
        *out = s;
        return 0;
    }
    s->num_workers = s->c.num_worker;
    s->num_servers = s->c.num_server;
    s->routing = (wrk_routing){s->c.num_server, s->c.bigarray_bound, s->c.van == CFG_VAN_P3,
                               s->c.slice_threshold, s->c.chunk_bytes};
    if (cfg_resolve_host(&s->c, s->host, sizeof s->host, err, sizeof err) != 0) {
        rc = err_set(KVS_ECONFIG, "%s", err);
        goto fail;
    }
    cfg_log(&s->c, s->who);
    rc = net_check_host(s->c.root_uri, "DMLC_PS_ROOT_URI", err, sizeof err);
    if (rc) {
        rc = err_set(rc, "%s", err);
        goto fail;
    }
    rc = wrk_io_start(s);
    if (rc)
        goto fail; /* wrk_io_start set the message */
    if (s->c.trace_path[0]) {
        char path[sizeof s->c.trace_path + 16];
        trace_path(s->c.trace_path, s->rank, path, sizeof path);
        rc = wrk_trace_open(path, s->rank, WRK_TRACE_RING, &s->trace, err, sizeof err);
        if (rc) {
            rc = err_set(rc == KVS_EINVAL ? KVS_ECONFIG : rc, "%s", err);
            goto fail;
        }
        LOG(LOG_INFO, s->who, "trace", "writing the timeline to %s", path);
    }
    *out = s;
    return 0;
fail:
    {
        char keep[512];
        snprintf(keep, sizeof keep, "%s", kvs_last_error());
        kvs_close(s);
        err_set(rc, "%s", keep);
    }
    return rc;
}

int kvs_init(kvs_store *s, size_t n, const uint64_t *keys, const kvs_array *vals)
{
    wrk_op *op = NULL;
    int rc;
    err_clear();
    if ((rc = check_args(s, n, keys, vals, "init")) != 0)
        return rc;
    if (wrk_comm_takes(s->comm, n, vals, NULL))
        return wrk_comm_call(s, WRK_OP_INIT, n, keys, vals, NULL, 0);
    if (s->kind == WRK_LOCAL)
        return wrk_local_init(s, n, keys, vals);
    rc = wrk_submit(s, WRK_OP_INIT, n, keys, vals, NULL, 0, &op, NULL);
    if (rc)
        return rc;
    return wrk_wait_op(s, op);
}

int kvs_push(kvs_store *s, size_t n, const uint64_t *keys, const kvs_array *vals, int priority)
{
    int rc;
    err_clear();
    if ((rc = check_args(s, n, keys, vals, "push")) != 0)
        return rc;
    if (wrk_comm_takes(s->comm, n, vals, NULL))
        return wrk_comm_call(s, WRK_OP_PUSH, n, keys, vals, NULL, priority);
    if (s->kind == WRK_LOCAL)
        return wrk_local_push(s, n, keys, vals);
    return wrk_submit(s, WRK_OP_PUSH, n, keys, vals, NULL, priority, NULL, NULL);
}

int kvs_pull(kvs_store *s, size_t n, const uint64_t *keys, const kvs_array *outs, int priority)
{
    int rc;
    err_clear();
    if ((rc = check_args(s, n, keys, outs, "pull")) != 0)
        return rc;
    if (wrk_comm_takes(s->comm, n, NULL, outs))
        return wrk_comm_call(s, WRK_OP_PULL, n, keys, NULL, outs, priority);
    if (s->kind == WRK_LOCAL)
        return wrk_local_pull(s, n, keys, outs);
    return wrk_submit(s, WRK_OP_PULL, n, keys, NULL, outs, priority, NULL, NULL);
}

int kvs_pushpull(kvs_store *s, size_t n, const uint64_t *keys, const kvs_array *vals,
                 const kvs_array *outs, int priority)
{
    int rc;
    err_clear();
    if ((rc = check_args(s, n, keys, vals, "pushpull")) != 0 ||
        (rc = check_args(s, n, keys, outs, "pushpull")) != 0)
        return rc;
    if (wrk_comm_takes(s->comm, n, vals, outs))
        return wrk_comm_call(s, WRK_OP_PUSHPULL, n, keys, vals, outs, priority);
    if (s->kind == WRK_LOCAL) {
        /* check the outputs first: a failed call changes nothing */
        rc = wrk_local_check(s, n, keys, outs, "pushpull output");
        if (!rc)
            rc = wrk_local_push(s, n, keys, vals);
        return rc ? rc : wrk_local_pull(s, n, keys, outs);
    }
    return wrk_submit(s, WRK_OP_PUSHPULL, n, keys, vals, outs, priority, NULL, NULL);
}

int kvs_wait(kvs_store *s, uint64_t key)
{
    err_clear();
    if (s == NULL)
        return err_set(KVS_EINVAL, "store is NULL");
    return wait_ops(s, false, key);
}

int kvs_wait_all(kvs_store *s)
{
    err_clear();
    if (s == NULL)
        return err_set(KVS_EINVAL, "store is NULL");
    return wait_ops(s, true, 0);
}

static int control_op(kvs_store *s, int type)
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
    if (s->fatal && (type != WRK_OP_EXIT || s->sched_gone)) {
        int rc = err_set(s->fatal, "%s", s->fatal_text);
        pthread_mutex_unlock(&s->mu);
        wrk_op_free(op);
        return rc;
    }
    list_append(s, op);
    wrk_io_submit(s, op);
    pthread_mutex_unlock(&s->mu);
    uint64_t t0 = clock_ns();
    int rc = wrk_wait_op(s, op);
    if (s->trace && type == WRK_OP_BARRIER) {
        wrk_tev ev = {.ts_ns = t0, .kind = TEV_BARRIER, .a = clock_ns() - t0, .status = rc};
        wrk_trace_add(s->trace, &ev);
    }
    return rc;
}

int kvs_barrier(kvs_store *s)
{
    err_clear();
    if (s == NULL)
        return err_set(KVS_EINVAL, "store is NULL");
    if (s->kind == WRK_LOCAL)
        return 0;
    return control_op(s, WRK_OP_BARRIER);
}

int kvs_rank(const kvs_store *s)
{
    return s ? s->rank : KVS_EINVAL;
}

int kvs_num_workers(const kvs_store *s)
{
    return s ? s->num_workers : KVS_EINVAL;
}

int kvs_num_servers(const kvs_store *s)
{
    return s ? s->num_servers : KVS_EINVAL;
}

int kvs_get_device_stats(kvs_store *s, kvs_device_stats *out)
{
    err_clear();
    if (s == NULL || out == NULL)
        return err_set(KVS_EINVAL, "store or out is NULL");
    wrk_comm_stats(s->comm, out);
    return 0;
}

int kvs_close(kvs_store *s)
{
    int rc = 0;
    if (s == NULL)
        return 0;
    if (s->thread_started) {
        rc = wait_ops(s, true, 0);
        char keep[512];
        snprintf(keep, sizeof keep, "%s", kvs_last_error());
        pthread_mutex_lock(&s->mu);
        bool ok = s->registered && !s->sched_gone;
        pthread_mutex_unlock(&s->mu);
        if (ok) {
            int rc2 = control_op(s, WRK_OP_EXIT);
            if (rc == 0 && rc2 != 0 && rc2 != KVS_ECLOSED && rc2 != s->fatal)
                rc = rc2;
        }
        wrk_io_stop(s);
        if (rc)
            err_set(rc, "%s", keep);
    }
    if (s->trace) {
        if (wrk_trace_dropped(s->trace))
            LOG(LOG_WARN, s->who, "trace", "%llu timeline events dropped (the writer could "
                "not keep up)", (unsigned long long)wrk_trace_dropped(s->trace));
        wrk_trace_close(s->trace);
        s->trace = NULL;
    }
    /* free any op still listed (failed and never reported) */
    wrk_op *op = s->ops_head;
    while (op) {
        wrk_op *n = op->next;
        wrk_op_free(op);
        op = n;
    }
    if (s->kind == WRK_LOCAL)
        wrk_local_free(s);
    for (size_t i = 0; i < s->keys.cap; i++)
        if (s->keys.used[i] == 1)
            free(s->keys.vals[i]);
    hmap_fini(&s->keys);
    hmap_fini(&s->busy);
    hmap_fini(&s->reqs);
    wrk_comm_free(s->comm); /* after every op (their host staging) is freed */
    hmap_fini(&s->batches);
    for (int r = 0; s->fuse && r < s->num_servers; r++)
        free(s->fuse[r].reqs);
    free(s->fuse);
    for (int r = 0; s->pq && r < s->num_servers; r++)
        wrk_pq_fini(&s->pq[r]);
    free(s->pq);
    free((void *)s->inflight);
    free(s->cma);
    free(s->hellos);
    wrk_met_free(s);
    free(s->hello_wait);
    free(s->held_head);
    free(s->held_tail);
    free(s->nonces);
    free(s->connected);
    free(s->server_ep);
    free(s->mon_args);
    red_pool_free(s->pool);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
    return rc;
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
    wrk_io_submit(s, op);
    pthread_mutex_unlock(&s->mu);
    return wrk_wait_op(s, op);
}
