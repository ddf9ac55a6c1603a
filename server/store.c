/* store.c - see store.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/datapath.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/sizes.h"
#include "server/ctl.h"
#include "server/store.h"
#include "server/update.h"


struct srv_entry {
    srv_entry *next; /* same hash */
    uint64_t key;
    uint32_t part;
    kvs_dtype dtype;
    uint64_t count, offset, total, bytes;
    bool async;
    srv_buf *value, *acc, *spare;
    uint64_t round; /* completed rounds */
    int npushed;
    uint8_t *pushed; /* per worker rank: pushed in the current round */
    srv_req *waiting, **waiting_tail; /* answered when the round completes */
    srv_req *pulls;                   /* waiting for a later round */
    srv_req *deferred, **deferred_tail; /* pushes for later rounds */
    uint64_t round_start_ns; /* first push of the current round arrived (metrics) */
    struct srv_upd *upd;                /* optimizer state (server/update.h) */
};

/* ---- buffers ---- */

srv_buf *srv_buf_new(uint64_t bytes)
{
    srv_buf *b = malloc(sizeof *b);
    uint64_t cap = (bytes + 63) & ~63ull;
    if (b == NULL)
        return NULL;
    b->data = aligned_alloc(64, cap ? cap : 64);
    if (b->data == NULL) {
        free(b);
        return NULL;
    }
    atomic_init(&b->refs, 1);
    b->cap = cap;
    b->is_msg = false;
    return b;
}

srv_buf *srv_buf_adopt(zmq_msg_t *m)
{
    srv_buf *b = malloc(sizeof *b);
    if (b == NULL)
        return NULL;
    zmq_msg_init(&b->msg);
    zmq_msg_move(&b->msg, m);
    atomic_init(&b->refs, 1);
    b->is_msg = true;
    b->data = zmq_msg_data(&b->msg);
    b->cap = zmq_msg_size(&b->msg);
    return b;
}

void srv_buf_unref(srv_buf *b)
{
    if (b && atomic_fetch_sub(&b->refs, 1) == 1) {
        if (b->is_msg)
            zmq_msg_close(&b->msg);
        else
            free(b->data);
        free(b);
    }
}

void srv_buf_zmq_free(void *data, void *hint)
{
    (void)data;
    srv_buf_unref(hint);
}

/* A buffer for the next round: the spare if nobody else holds it. */
static srv_buf *take_acc(srv_entry *e)
{
    srv_buf *b = e->spare;
    e->spare = NULL;
    if (b && atomic_load(&b->refs) == 1)
        return b;
    srv_buf_unref(b);
    return srv_buf_new(e->bytes);
}

/* ---- requests ---- */

static srv_req *req_new(const uint8_t *ident, size_t ident_len, int wrank, const proto_hdr *h)
{
    srv_req *r = calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    if (ident_len > sizeof r->ident)
        ident_len = sizeof r->ident;
    memcpy(r->ident, ident, ident_len);
    r->ident_len = ident_len;
    r->h = *h;
    r->wrank = wrank;
    zmq_msg_init(&r->body);
    return r;
}

static void req_free(srv_req *r)
{
    zmq_msg_close(&r->body);
    free(r);
}

static void reply_err(srv_store *st, const uint8_t *ident, size_t ident_len,
                      const proto_hdr *h, int status, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static void reply_err(srv_store *st, const uint8_t *ident, size_t ident_len,
                      const proto_hdr *h, int status, const char *fmt, ...)
{
    char text[PROTO_ERRTEXT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    st->reply(st->reply_arg, ident, ident_len, h, status, text, NULL, 0);
}

/* Answer a request with success; pulls and pushpulls get the value. */
static void reply_ok_to(srv_store *st, const uint8_t *ident, size_t ident_len,
                        const proto_hdr *h, srv_entry *e)
{
    bool data = h->type == PROTO_PULL || h->type == PROTO_PUSHPULL;
    st->reply(st->reply_arg, ident, ident_len, h, 0, NULL, data ? e->value : NULL, e->round);
}

static void reply_ok(srv_store *st, srv_req *r, srv_entry *e)
{
    reply_ok_to(st, r->ident, r->ident_len, &r->h, e);
}

/* ---- entries ---- */

static uint64_t entry_hash(uint64_t key, uint32_t part)
{
    return hmap_mix(key) ^ ((uint64_t)part * 0x9E3779B97F4A7C15ull);
}

static srv_entry *find_entry(srv_store *st, uint64_t key, uint32_t part)
{
    for (srv_entry *e = hmap_get(&st->entries, entry_hash(key, part)); e; e = e->next)
        if (e->key == key && e->part == part)
            return e;
    return NULL;
}

static void entry_free(srv_entry *e)
{
    srv_buf_unref(e->value);
    srv_buf_unref(e->acc);
    srv_buf_unref(e->spare);
    free(e->pushed);
    srv_upd_free(e->upd);
    free(e);
}

/* An optimizer updates the weights: a round's sum is a gradient. */
static bool updating(const srv_store *st)
{
    return st->optim && st->optim->active;
}

int srv_store_init(srv_store *st, int num_workers, red_pool *pool, srv_reply_fn reply,
                   void *arg)
{
    memset(st, 0, sizeof *st);
    hmap_init(&st->entries);
    hmap_init(&st->pending_inits);
    st->num_workers = num_workers;
    st->pool = pool;
    st->reply = reply;
    st->reply_arg = arg;
    return 0;
}

static void free_list(srv_req *r)
{
    while (r) {
        srv_req *n = r->next;
        req_free(r);
        r = n;
    }
}

void srv_store_fini(srv_store *st)
{
    free(st->left);
    st->left = NULL;
    for (size_t i = 0; i < st->entries.cap; i++) {
        if (st->entries.used[i] != 1)
            continue;
        srv_entry *e = st->entries.vals[i];
        while (e) {
            srv_entry *n = e->next;
            free_list(e->waiting);
            free_list(e->pulls);
            free_list(e->deferred);
            entry_free(e);
            e = n;
        }
    }
    for (size_t i = 0; i < st->pending_inits.cap; i++)
        if (st->pending_inits.used[i] == 1)
            free_list(st->pending_inits.vals[i]);
    hmap_fini(&st->entries);
    hmap_fini(&st->pending_inits);
}

static bool same_shape(const srv_entry *e, const proto_hdr *h)
{
    return e->dtype == (kvs_dtype)h->dtype && e->count == h->count &&
           e->offset == h->offset && e->total == h->total;
}

static void shape_error(srv_store *st, const uint8_t *ident, size_t ident_len,
                        const proto_hdr *h, const srv_entry *e)
{
    reply_err(st, ident, ident_len, h, KVS_ESHAPE,
              "key %llu: %s of %llu %s elements (part at %llu of %llu) but the key was "
              "initialised with %llu %s elements (part at %llu of %llu)",
              (unsigned long long)h->key, proto_type_name(h->type),
              (unsigned long long)h->count, kvs_dtype_name((kvs_dtype)h->dtype),
              (unsigned long long)h->offset, (unsigned long long)h->total,
              (unsigned long long)e->count, kvs_dtype_name(e->dtype),
              (unsigned long long)e->offset, (unsigned long long)e->total);
}

/* Answer INITs of other workers that waited for rank 0. */
static void release_inits(srv_store *st, srv_entry *e)
{
    uint64_t hk = entry_hash(e->key, e->part);
    srv_req *r = hmap_get(&st->pending_inits, hk), *keep = NULL;
    if (r == NULL)
        return;
    hmap_del(&st->pending_inits, hk);
    while (r) {
        srv_req *n = r->next;
        if (r->h.key == e->key && r->h.part == e->part) {
            if (same_shape(e, &r->h))
                reply_ok(st, r, e);
            else
                shape_error(st, r->ident, r->ident_len, &r->h, e);
            req_free(r);
        } else {
            r->next = keep;
            keep = r;
        }
        r = n;
    }
    if (keep)
        hmap_put(&st->pending_inits, hk, keep);
}

static void handle_init(srv_store *st, const uint8_t *ident, size_t ident_len, int wrank,
                        const proto_hdr *h, const void *body)
{
    srv_entry *e = find_entry(st, h->key, h->part);
    if (e != NULL) {
        if (!same_shape(e, h)) {
            shape_error(st, ident, ident_len, h, e);
            return;
        }
        if (wrank == 0 && body != NULL && e->bytes > 0) {
            if (e->npushed > 0 || e->deferred != NULL) {
                reply_err(st, ident, ident_len, h, KVS_EINVAL,
                          "key %llu: init while a push round is in progress",
                          (unsigned long long)h->key);
                return;
            }
            if (atomic_load(&e->value->refs) > 1) { /* being sent: replace, don't overwrite */
                srv_buf *nb = srv_buf_new(e->bytes);
                if (nb == NULL) {
                    reply_err(st, ident, ident_len, h, KVS_ENOMEM, "server out of memory");
                    return;
                }
                srv_buf_unref(e->value);
                e->value = nb;
            }
            memcpy(e->value->data, body, e->bytes); /* a re-init replaces the value */
            srv_upd_forget_master(e->upd);
        }
        reply_ok_to(st, ident, ident_len, h, e);
        return;
    }
    if (updating(st) && !optim_dtype_ok((kvs_dtype)h->dtype)) {
        reply_err(st, ident, ident_len, h, KVS_ESHAPE,
                  "key %llu is %s: the optimizer (%s) updates float32, float64, float16 and "
                  "bfloat16 keys only", (unsigned long long)h->key,
                  kvs_dtype_name((kvs_dtype)h->dtype), optim_name(st->optim->spec.kind));
        return;
    }
    if (wrank != 0 || (body == NULL && h->count > 0)) {
        /* wait for rank 0's values */
        srv_req *r = req_new(ident, ident_len, wrank, h);
        uint64_t hk = entry_hash(h->key, h->part);
        if (r == NULL) {
            reply_err(st, ident, ident_len, h, KVS_ENOMEM, "server out of memory");
            return;
        }
        r->next = hmap_get(&st->pending_inits, hk);
        if (hmap_put(&st->pending_inits, hk, r) != 0) {
            req_free(r);
            reply_err(st, ident, ident_len, h, KVS_ENOMEM, "server out of memory");
        }
        return;
    }
    e = calloc(1, sizeof *e);
    if (e == NULL || (e->pushed = calloc((size_t)st->num_workers, 1)) == NULL ||
        (e->value = srv_buf_new(h->body_len)) == NULL) {
        if (e)
            entry_free(e);
        reply_err(st, ident, ident_len, h, KVS_ENOMEM,
                  "server out of memory for key %llu (%llu bytes)",
                  (unsigned long long)h->key, (unsigned long long)h->body_len);
        return;
    }
    e->key = h->key;
    e->part = h->part;
    e->dtype = (kvs_dtype)h->dtype;
    e->count = h->count;
    e->offset = h->offset;
    e->total = h->total;
    e->bytes = h->body_len;
    e->async = (h->flags & PROTO_F_ASYNC) != 0;
    e->waiting_tail = &e->waiting;
    e->deferred_tail = &e->deferred;
    if (e->bytes)
        memcpy(e->value->data, body, e->bytes);
    uint64_t hk = entry_hash(e->key, e->part);
    e->next = hmap_get(&st->entries, hk);
    if (hmap_put(&st->entries, hk, e) != 0) {
        entry_free(e);
        reply_err(st, ident, ident_len, h, KVS_ENOMEM, "server out of memory");
        return;
    }
    reply_ok_to(st, ident, ident_len, h, e);
    release_inits(st, e);
}

/* The round is complete: the sum becomes the value; answer everyone. */
static void complete_round(srv_store *st, srv_entry *e)
{
    char why[PROTO_ERRTEXT_MAX];
    int err = 0;
    if (updating(st)) /* the sum is the gradient: acc becomes the new weight */
        err = srv_upd_apply(st->optim, st->pool, e->key, e->dtype, e->count, &e->upd,
                            e->value->data, e->acc->data, why, sizeof why);
    if (err) { /* the weight stays; this round's requests fail */
        srv_buf_unref(e->acc);
        e->acc = NULL;
    } else {
        srv_buf *old = e->value;
        e->value = e->acc;
        e->acc = NULL;
        if (atomic_load(&old->refs) == 1 && e->spare == NULL && !old->is_msg)
            e->spare = old;
        else
            srv_buf_unref(old);
    }
    e->round++;
    e->npushed = 0;
    memset(e->pushed, 0, (size_t)st->num_workers);
    st->rounds_done++;
    met_observe(st->m_round, (double)(clock_ns() - e->round_start_ns) / 1e9);

    srv_req *r = e->waiting;
    e->waiting = NULL;
    e->waiting_tail = &e->waiting;
    uint64_t now = clock_ns();
    while (r) {
        srv_req *n = r->next;
        r->h.t_round_ns = now;
        if (err)
            reply_err(st, r->ident, r->ident_len, &r->h, err, "%s", why);
        else
            reply_ok(st, r, e);
        req_free(r);
        r = n;
    }
    srv_req **pp = &e->pulls;
    while (*pp) {
        r = *pp;
        if (r->h.round <= e->round) {
            *pp = r->next;
            r->h.t_round_ns = now;
            if (err)
                reply_err(st, r->ident, r->ident_len, &r->h, err, "%s", why);
            else
                reply_ok(st, r, e);
            req_free(r);
        } else {
            pp = &r->next;
        }
    }
    if (st->ctl)
        srv_ctl_round_done(st->ctl, e->round); /* automatic checkpoints */
}

/* Add one push (sync mode) to the current round.  Returns true if the round
 * completed. */
static bool add_push(srv_store *st, srv_entry *e, srv_req *r, const void *data,
                     zmq_msg_t *msg)
{
    uint64_t t0 = clock_ns();
    if (e->npushed == 0)
        e->round_start_ns = t0;
    if (e->npushed == 0 && msg && e->bytes >= DP_ADOPT_MIN && zmq_msg_size(msg) == e->bytes) {
        /* the first push of a round becomes the round buffer: no copy */
        e->acc = srv_buf_adopt(msg);
        if (e->acc == NULL) {
            reply_err(st, r->ident, r->ident_len, &r->h, KVS_ENOMEM, "server out of memory");
            req_free(r);
            return false;
        }
    } else if (e->npushed == 0) {
        e->acc = take_acc(e);
        if (e->acc == NULL) {
            reply_err(st, r->ident, r->ident_len, &r->h, KVS_ENOMEM, "server out of memory");
            req_free(r);
            return false;
        }
        const void *src[1] = {data};
        red_sum(st->pool, e->dtype, e->acc->data, src, 1, e->count);
    } else {
        red_add(st->pool, e->dtype, e->acc->data, data, e->count);
    }
    uint64_t t1 = clock_ns();
    met_observe(st->m_sum, (double)(t1 - t0) / 1e9);
    r->h.sum_ns = t1 - t0;
    st->bytes_summed += e->bytes;
    e->pushed[r->wrank] = 1;
    e->npushed++;
    zmq_msg_close(&r->body);
    zmq_msg_init(&r->body);
    r->next = NULL;
    *e->waiting_tail = r;
    e->waiting_tail = &r->next;
    if (e->npushed < st->num_workers)
        return false;
    complete_round(st, e);
    return true;
}

static void check_stuck(srv_store *st, srv_entry *e);

/* After a round completed: pushes deferred for the new round join it. */
static void run_deferred(srv_store *st, srv_entry *e)
{
    bool again = true;
    while (again) {
        again = false;
        srv_req **pp = &e->deferred;
        e->deferred_tail = &e->deferred;
        while (*pp) {
            srv_req *r = *pp;
            if (r->h.round == e->round && !e->pushed[r->wrank]) {
                *pp = r->next;
                if (add_push(st, e, r, zmq_msg_data(&r->body), &r->body)) {
                    again = true;
                    break;
                }
            } else {
                pp = &r->next;
            }
        }
        /* recompute the tail */
        e->deferred_tail = &e->deferred;
        while (*e->deferred_tail)
            e->deferred_tail = &(*e->deferred_tail)->next;
    }
}

/* The entry a push or pull names, or NULL after answering why not. */
static srv_entry *find_checked(srv_store *st, const uint8_t *ident, size_t ident_len,
                               const proto_hdr *h)
{
    srv_entry *e = find_entry(st, h->key, h->part);
    if (e == NULL) {
        reply_err(st, ident, ident_len, h, KVS_ENOKEY, "key %llu was never initialised",
                  (unsigned long long)h->key);
        return NULL;
    }
    if (!same_shape(e, h)) {
        shape_error(st, ident, ident_len, h, e);
        return NULL;
    }
    return e;
}

static void handle_push(srv_store *st, const uint8_t *ident, size_t ident_len, int wrank,
                        const proto_hdr *h, const void *body, zmq_msg_t *bodymsg)
{
    srv_entry *e = find_checked(st, ident, ident_len, h);
    if (e == NULL)
        return;
    if (e->async && updating(st)) {
        /* the push is the gradient of one update: into a fresh buffer */
        char why[PROTO_ERRTEXT_MAX];
        srv_buf *nb = take_acc(e), *old = e->value;
        if (nb == NULL) {
            reply_err(st, ident, ident_len, h, KVS_ENOMEM, "server out of memory");
            return;
        }
        memcpy(nb->data, body, e->bytes);
        int err = srv_upd_apply(st->optim, st->pool, e->key, e->dtype, e->count, &e->upd,
                                old->data, nb->data, why, sizeof why);
        if (err) {
            srv_buf_unref(nb);
            reply_err(st, ident, ident_len, h, err, "%s", why);
            return;
        }
        e->value = nb;
        if (atomic_load(&old->refs) == 1 && e->spare == NULL && !old->is_msg)
            e->spare = old;
        else
            srv_buf_unref(old);
        st->bytes_summed += e->bytes;
        e->round++;
        reply_ok_to(st, ident, ident_len, h, e);
        return;
    }
    if (e->async) {
        if (atomic_load(&e->value->refs) > 1) {
            /* a reply is still sending the value: sum into another buffer */
            srv_buf *nb = take_acc(e), *old = e->value;
            if (nb == NULL) {
                reply_err(st, ident, ident_len, h, KVS_ENOMEM, "server out of memory");
                return;
            }
            const void *src[2] = {old->data, body};
            red_sum(st->pool, e->dtype, nb->data, src, 2, e->count);
            e->value = nb;
            srv_buf_unref(old);
        } else {
            red_add(st->pool, e->dtype, e->value->data, body, e->count);
        }
        st->bytes_summed += e->bytes;
        e->round++;
        reply_ok_to(st, ident, ident_len, h, e);
        return;
    }
    if (h->round < e->round || (h->round == e->round && e->pushed[wrank])) {
        reply_err(st, ident, ident_len, h, KVS_EDUP,
                  "key %llu: worker %d already pushed round %llu (current round %llu)",
                  (unsigned long long)h->key, wrank, (unsigned long long)h->round,
                  (unsigned long long)e->round);
        return;
    }
    srv_req *r = req_new(ident, ident_len, wrank, h);
    if (r == NULL) {
        reply_err(st, ident, ident_len, h, KVS_ENOMEM, "server out of memory");
        return;
    }
    if (h->round > e->round) {
        /* a later round: keep the data until this round completes */
        if (bodymsg) {
            zmq_msg_move(&r->body, bodymsg);
        } else if (zmq_msg_init_size(&r->body, h->body_len) != 0) {
            zmq_msg_init(&r->body);
            req_free(r);
            reply_err(st, ident, ident_len, h, KVS_ENOMEM,
                      "server out of memory keeping a push for a later round");
            return;
        } else if (h->body_len) { /* a FUSED record of 0 elements has no body */
            memcpy(zmq_msg_data(&r->body), body, h->body_len);
        }
        *e->deferred_tail = r;
        e->deferred_tail = &r->next;
        check_stuck(st, e);
        return;
    }
    if (add_push(st, e, r, body, bodymsg))
        run_deferred(st, e);
    check_stuck(st, e);
}

static void handle_pull(srv_store *st, const uint8_t *ident, size_t ident_len, int wrank,
                        const proto_hdr *h)
{
    srv_entry *e = find_checked(st, ident, ident_len, h);
    if (e == NULL)
        return;
    srv_req *r = req_new(ident, ident_len, wrank, h);
    if (r == NULL) {
        reply_err(st, ident, ident_len, h, KVS_ENOMEM, "server out of memory");
        return;
    }
    if (e->async || h->round <= e->round) {
        reply_ok(st, r, e);
        req_free(r);
        return;
    }
    r->next = e->pulls;
    e->pulls = r;
    check_stuck(st, e);
}

void srv_store_handle(srv_store *st, const uint8_t *ident, size_t ident_len, int wrank,
                      const proto_hdr *h, const void *body, zmq_msg_t *bodymsg)
{
    if (st->broken) {
        reply_err(st, ident, ident_len, h, KVS_EPEERDEAD, "%s", st->broken_text);
        return;
    }
    if (st->ctl && srv_ctl_hold(st->ctl, ident, ident_len, wrank, h, body, bodymsg))
        return; /* a save or load is running: handled when it is done */
    switch (h->type) {
    case PROTO_INIT:
        handle_init(st, ident, ident_len, wrank, h, body);
        break;
    case PROTO_PUSH:
    case PROTO_PUSHPULL:
        handle_push(st, ident, ident_len, wrank, h, body, bodymsg);
        break;
    case PROTO_PULL:
        handle_pull(st, ident, ident_len, wrank, h);
        break;
    default:
        reply_err(st, ident, ident_len, h, KVS_EPROTO, "a server does not take %s",
                  proto_type_name(h->type));
    }
}

static void fail_list(srv_store *st, srv_req *r, const char *why)
{
    while (r) {
        srv_req *n = r->next;
        st->reply(st->reply_arg, r->ident, r->ident_len, &r->h, KVS_EPEERDEAD, why, NULL, 0);
        req_free(r);
        r = n;
    }
}

/* Fail every request waiting on e (its rounds can never complete). */
static void fail_entry(srv_store *st, srv_entry *e, const char *why)
{
    fail_list(st, e->waiting, why);
    fail_list(st, e->pulls, why);
    fail_list(st, e->deferred, why);
    e->waiting = e->pulls = e->deferred = NULL;
    e->waiting_tail = &e->waiting;
    e->deferred_tail = &e->deferred;
}

static void check_stuck(srv_store *st, srv_entry *e)
{
    char why[300];
    if (st->left == NULL || e->async || (!e->waiting && !e->pulls && !e->deferred))
        return;
    for (int w = 0; w < st->num_workers; w++) {
        if (!st->left[w] || e->pushed[w])
            continue;
        snprintf(why, sizeof why, "key %llu: round %llu can never complete: worker %d left the "
                 "job (kvs_close) without pushing it", (unsigned long long)e->key,
                 (unsigned long long)e->round, w);
        LOG(LOG_WARN, NULL, "store", "%s; failing its waiting requests", why);
        fail_entry(st, e, why);
        return;
    }
}

void srv_store_worker_left(srv_store *st, int wrank)
{
    if (wrank < 0 || wrank >= st->num_workers)
        return;
    if (st->left == NULL && (st->left = calloc((size_t)st->num_workers, 1)) == NULL)
        return;
    st->left[wrank] = 1;
    for (size_t i = 0; i < st->entries.cap; i++) {
        if (st->entries.used[i] != 1)
            continue;
        for (srv_entry *e = st->entries.vals[i]; e; e = e->next)
            check_stuck(st, e);
    }
}

void srv_store_fail_all(srv_store *st, const char *why)
{
    if (st->broken)
        return;
    st->broken = true;
    snprintf(st->broken_text, sizeof st->broken_text, "%s", why);
    for (size_t i = 0; i < st->entries.cap; i++) {
        if (st->entries.used[i] != 1)
            continue;
        for (srv_entry *e = st->entries.vals[i]; e; e = e->next) {
            fail_entry(st, e, st->broken_text);
            e->npushed = 0;
        }
    }
    for (size_t i = 0; i < st->pending_inits.cap; i++)
        if (st->pending_inits.used[i] == 1)
            fail_list(st, st->pending_inits.vals[i], st->broken_text);
    hmap_fini(&st->pending_inits);
    hmap_init(&st->pending_inits);
    if (st->ctl)
        srv_ctl_fail_all(st->ctl, why);
}

/* ---- for server/ctl.c and server/ckpt.c ---- */

static void view_of(const srv_entry *e, srv_entry_view *v);

size_t srv_store_views(srv_store *st, srv_entry_view *out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < st->entries.cap; i++) {
        if (st->entries.used[i] != 1)
            continue;
        for (srv_entry *e = st->entries.vals[i]; e; e = e->next, n++)
            if (n < max)
                view_of(e, &out[n]);
    }
    return n;
}

int srv_store_quiet(srv_store *st, char *why, size_t whylen)
{
    for (size_t i = 0; i < st->pending_inits.cap; i++)
        if (st->pending_inits.used[i] == 1) {
            srv_req *r = st->pending_inits.vals[i];
            snprintf(why, whylen, "key %llu: an init is waiting for worker 0's values",
                     (unsigned long long)r->h.key);
            return KVS_EINVAL;
        }
    for (size_t i = 0; i < st->entries.cap; i++) {
        if (st->entries.used[i] != 1)
            continue;
        for (srv_entry *e = st->entries.vals[i]; e; e = e->next)
            if (e->npushed > 0 || e->deferred != NULL) {
                snprintf(why, whylen, "key %llu: round %llu is in progress (%d of %d workers "
                         "pushed%s); save and load act between rounds: call them after "
                         "kvs_wait_all() on every worker", (unsigned long long)e->key,
                         (unsigned long long)e->round, e->npushed, st->num_workers,
                         e->deferred ? ", later rounds queued" : "");
                return KVS_EINVAL;
            }
    }
    return 0;
}

bool srv_store_pushes_began(srv_store *st)
{
    for (size_t i = 0; i < st->entries.cap; i++) {
        if (st->entries.used[i] != 1)
            continue;
        for (srv_entry *e = st->entries.vals[i]; e; e = e->next)
            if (e->round > 0 || e->npushed > 0 || e->deferred != NULL)
                return true;
    }
    return false;
}

static void view_of(const srv_entry *e, srv_entry_view *v)
{
    *v = (srv_entry_view){e->key,   e->part,  e->dtype, e->count, e->offset, e->total,
                          e->bytes, e->round, e->async, e->value, e->upd};
}

bool srv_store_view(srv_store *st, uint64_t key, uint32_t part, srv_entry_view *out)
{
    srv_entry *e = find_entry(st, key, part);
    if (e)
        view_of(e, out);
    return e != NULL;
}

int srv_store_restore(srv_store *st, uint64_t key, uint32_t part, srv_buf *value,
                      uint64_t round, struct srv_upd *upd)
{
    srv_entry *e = find_entry(st, key, part);
    if (e == NULL)
        return KVS_ENOKEY;
    srv_buf_unref(e->value);
    e->value = value;
    e->round = round;
    srv_upd_free(e->upd);
    e->upd = upd;
    return 0;
}

static size_t list_len(const srv_req *r)
{
    size_t n = 0;
    for (; r; r = r->next)
        n++;
    return n;
}

void srv_store_depths(const srv_store *st, srv_store_depth *d)
{
    memset(d, 0, sizeof *d);
    for (size_t i = 0; i < st->entries.cap; i++) {
        if (st->entries.used[i] != 1)
            continue;
        for (const srv_entry *e = st->entries.vals[i]; e; e = e->next) {
            d->keys++;
            d->round_pushes += list_len(e->waiting);
            d->pulls += list_len(e->pulls);
            d->deferred += list_len(e->deferred);
        }
    }
    for (size_t i = 0; i < st->pending_inits.cap; i++)
        if (st->pending_inits.used[i] == 1)
            d->inits += list_len(st->pending_inits.vals[i]);
}
