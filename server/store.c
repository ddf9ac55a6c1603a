/* store.c - see store.h. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/datapath.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/sizes.h"
#include "server/cma.h"
#include "server/jobs.h"
#include "server/decomp.h"
#include "server/push.h"
#include "server/sparse.h"
#include "server/store.h"
#include "server/store_int.h"
#include "server/update.h"



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

/* The value old was replaced: keep it as the next round's buffer when
 * that round will want one (this round's buffer was not a received frame:
 * direct copies, small keys) and nobody else holds it; else let it go, so a
 * key's memory is its value plus the round in progress. */
static void keep_spare(srv_entry *e, srv_buf *old)
{
    if (atomic_load(&old->refs) == 1 && e->spare == NULL && !old->is_msg && !e->value->is_msg)
        e->spare = old;
    else
        srv_buf_unref(old);
}

/* ---- requests ---- */

static atomic_uint_fast64_t req_seq = 1; /* srv_req.seq: unique in the process */

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
    r->seq = atomic_fetch_add(&req_seq, 1);
    zmq_msg_init(&r->body);
    return r;
}

/* Let go of r's body (it was summed). */
static void req_drop_body(srv_req *r)
{
    zmq_msg_close(&r->body);
    zmq_msg_init(&r->body);
    for (int i = 0; r->more && i < r->nframes; i++)
        zmq_msg_close(&r->more[i]);
    free(r->more);
    r->more = NULL;
    r->nframes = 0;
}

static void req_free(srv_req *r)
{
    if (r->held) {
        r->held[0] -= r->held_bytes;
        r->held[1]--;
    }
    req_drop_body(r);
    zmq_msg_close(&r->body);
    free(r->rsp_ids);
    free(r);
}

/* Make r own the body of in (len bytes): move its frames, or copy borrowed
 * data.  Nothing to do when r owns it already or there is none.  0 or
 * KVS_ENOMEM. */
static int req_keep(srv_req *r, const srv_in *in, uint64_t len)
{
    if (in == NULL || r->nframes > 0)
        return 0;
    if (in->frames && in->nframes > 1) {
        r->more = malloc((size_t)in->nframes * sizeof *r->more);
        if (r->more == NULL)
            return KVS_ENOMEM;
        for (int i = 0; i < in->nframes; i++) {
            zmq_msg_init(&r->more[i]);
            zmq_msg_move(&r->more[i], &in->frames[i]);
        }
        r->nframes = in->nframes;
    } else if (in->frames && in->nframes == 1) {
        zmq_msg_move(&r->body, &in->frames[0]);
        r->nframes = 1;
    } else if (in->data) {
        zmq_msg_close(&r->body);
        if (zmq_msg_init_size(&r->body, len) != 0) {
            zmq_msg_init(&r->body);
            return KVS_ENOMEM;
        }
        memcpy(zmq_msg_data(&r->body), in->data, len);
        r->nframes = 1;
    }
    return 0;
}

static void reply_err(srv_store *st, const uint8_t *ident, size_t ident_len,
                      const proto_hdr *h, int status, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* r is to wait in the store: count it against its worker's bound (once).
 * 0, or KVS_EFULL after answering it (the caller frees r) */
static int hold(srv_store *st, srv_req *r)
{
    uint64_t bytes = r->h.body_len + sizeof *r, *w; /* the request itself counts too */
    if (r->held || (st->max_held_bytes == 0 && st->max_held_reqs == 0))
        return 0;
    if (st->held == NULL &&
        (st->held = calloc(2 * (size_t)st->num_workers, sizeof *st->held)) == NULL)
        return 0; /* no counters: no bound (the allocation of r itself succeeded) */
    w = &st->held[2 * (size_t)r->wrank];
    if ((st->max_held_bytes && w[0] + bytes > st->max_held_bytes) ||
        (st->max_held_reqs && w[1] + 1 > st->max_held_reqs)) {
        reply_err(st, r->ident, r->ident_len, &r->h, KVS_EFULL,
                  "worker %d already has %llu requests (%llu bytes) waiting at this server "
                  "(KVS_MAX_QUEUED_REQUESTS=%llu, KVS_MAX_QUEUED_BYTES=%llu): wait for "
                  "earlier rounds before pushing or pulling further ahead", r->wrank,
                  (unsigned long long)w[1], (unsigned long long)w[0],
                  (unsigned long long)st->max_held_reqs, (unsigned long long)st->max_held_bytes);
        return KVS_EFULL;
    }
    w[0] += bytes;
    w[1]++;
    r->held = w;
    r->held_bytes = bytes;
    return 0;
}

static bool in_has_data(const proto_hdr *h, const srv_in *in)
{
    return (in && (in->data || in->nframes > 0)) || ((h->flags & PROTO_F_CMA) && h->cma_src);
}

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
    proto_hdr zh;
    srv_buf *z = data ? srv_decomp_reply(e, h, &zh) : NULL;
    if (z) /* the round's sum, compressed (decomp.h) */
        st->reply(st->reply_arg, ident, ident_len, &zh, 0, NULL, z, e->round);
    else
        st->reply(st->reply_arg, ident, ident_len, h, 0, NULL, data ? e->value : NULL,
                  e->round);
}

static void reply_ok(srv_store *st, srv_req *r, srv_entry *e)
{
    if (r->h.flags & PROTO_F_RSP) { /* the rows it named */
        proto_hdr h;
        srv_buf *rows;
        if (srv_rsp_answer(r, e, &h, &rows) != 0) {
            reply_err(st, r->ident, r->ident_len, &r->h, KVS_ENOMEM, "server out of memory");
            return;
        }
        st->reply(st->reply_arg, r->ident, r->ident_len, &h, 0, NULL, rows, e->round);
        srv_buf_unref(rows);
        return;
    }
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
    srv_rsp_acc_free(e->rsp);
    srv_decomp_forget(e);
    free(e->pushed);
    free(e->failed);
    srv_upd_free(e->upd);
    free(e);
}

static void view_of(const srv_entry *e, srv_entry_view *v);

/* e's value or round changed: tell the replica (before any answer shows it). */
static void changed(srv_store *st, const srv_entry *e)
{
    if (st->changed) {
        srv_entry_view v;
        view_of(e, &v);
        st->changed(st->changed_arg, &v);
    }
}

/* What an entry of a value of bytes bytes counts against KVS_MAX_KEY_BYTES. */
static uint64_t entry_cost(const srv_store *st, uint64_t bytes)
{
    return bytes + sizeof(srv_entry) + 2 * (uint64_t)st->num_workers;
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
    srv_norms_init(&st->norms);
    st->num_workers = num_workers;
    st->need = num_workers;
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

uint64_t srv_store_offload_min(const srv_store *st)
{
    return st->offload_min ? st->offload_min : DP_OFFLOAD_MIN;
}

int srv_store_set_groups(srv_store *st, const int *group, const int *lsize)
{
    size_t n = (size_t)st->num_workers;
    int *g = malloc(2 * n * sizeof *g);
    if (g == NULL)
        return KVS_ENOMEM;
    memcpy(g, group, n * sizeof *g);
    memcpy(g + n, lsize, n * sizeof *g);
    free(st->group);
    st->group = g;
    st->lsize = g + n;
    return 0;
}

void srv_store_fini(srv_store *st)
{
    free(st->group);
    free(st->member);
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
            free_list(e->backlog);
            entry_free(e);
            e = n;
        }
    }
    for (size_t i = 0; i < st->pending_inits.cap; i++)
        if (st->pending_inits.used[i] == 1)
            free_list(st->pending_inits.vals[i]);
    hmap_fini(&st->entries);
    hmap_fini(&st->pending_inits);
    srv_norms_fini(&st->norms);
    free(st->held); /* after the requests that count against it */
    st->held = NULL;
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

/* Copy the body of in (or the worker's memory, for a request by reference)
 * into dst: bytes bytes.  0, or an errno of a failed read. */
static int copy_in(srv_store *st, int wrank, const proto_hdr *h, const srv_in *in, void *dst,
                   uint64_t bytes)
{
    bool by_ref = (h->flags & PROTO_F_CMA) != 0;
    srv_in none = {NULL, NULL, 0};
    return srv_sum_into(st->pool, (kvs_dtype)h->dtype, dst, NULL, bytes, in ? in : &none,
                        by_ref ? &st->cma[wrank] : NULL, h->cma_src, SUM_COPY);
}

/* Does an init from worker wrank (data: with values) give the key its
 * values?  Rank 0's; in an elastic job the epoch's rank 0, the only member
 * that sends values (worker/op.c), so: one with values. */
static bool first_init(const srv_store *st, int wrank, bool data)
{
    return st->epoch ? data : wrank == 0;
}

static void handle_init(srv_store *st, const uint8_t *ident, size_t ident_len, int wrank,
                        const proto_hdr *h, const srv_in *in)
{
    srv_entry *e = find_entry(st, h->key, h->part);
    bool data = in_has_data(h, in);
    int err;
    if (e != NULL) {
        if (!same_shape(e, h)) {
            shape_error(st, ident, ident_len, h, e);
            return;
        }
        if (first_init(st, wrank, data) && data && e->bytes > 0) {
            if (e->npushed > 0 || e->deferred != NULL) {
                reply_err(st, ident, ident_len, h, KVS_EINVAL,
                          "key %llu: init while a push round is in progress",
                          (unsigned long long)h->key);
                return;
            }
            /* a re-init replaces the value: into a new buffer (a reply may be
             * sending the old one, and a failed read must leave it) */
            srv_buf *nb = srv_buf_new_value(e->bytes);
            if (nb == NULL) {
                reply_err(st, ident, ident_len, h, KVS_ENOMEM, "server out of memory");
                return;
            }
            if ((err = copy_in(st, wrank, h, in, nb->data, e->bytes)) != 0) {
                srv_buf_unref(nb);
                reply_err(st, ident, ident_len, h, KVS_EINVAL, "cannot read %llu bytes of "
                          "worker %d's memory: %s", (unsigned long long)e->bytes, wrank,
                          strerror(err));
                return;
            }
            srv_buf_unref(e->value);
            e->value = nb;
            srv_upd_forget_master(e->upd);
            srv_decomp_forget(e);
            changed(st, e);
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
    char uwhy[PROTO_ERRTEXT_MAX];
    int urc;
    if (updating(st) && (urc = srv_optim_part_ok(&st->optim->spec, h->key,
                                                 (kvs_dtype)h->dtype, h->count, h->total,
                                                 (h->flags & PROTO_F_ASYNC) != 0, uwhy,
                                                 sizeof uwhy)) != 0) {
        reply_err(st, ident, ident_len, h, urc, "%s", uwhy);
        return;
    }
    if (wrank != 0 && st->left && st->left[0]) {
        reply_err(st, ident, ident_len, h, KVS_EPEERDEAD, "key %llu can never be initialised: "
                  "worker 0, whose values it starts from, left the job (kvs_close) without "
                  "initialising it", (unsigned long long)h->key);
        return;
    }
    if (!first_init(st, wrank, data || h->count == 0) || (!data && h->count > 0)) {
        /* wait for rank 0's values */
        srv_req *r = req_new(ident, ident_len, wrank, h);
        uint64_t hk = entry_hash(h->key, h->part);
        if (r == NULL) {
            reply_err(st, ident, ident_len, h, KVS_ENOMEM, "server out of memory");
            return;
        }
        if (hold(st, r) != 0) {
            req_free(r);
            return;
        }
        r->next = hmap_get(&st->pending_inits, hk);
        if (hmap_put(&st->pending_inits, hk, r) != 0) {
            req_free(r);
            reply_err(st, ident, ident_len, h, KVS_ENOMEM, "server out of memory");
        }
        return;
    }
    uint64_t cost = entry_cost(st, h->body_len);
    if ((st->max_keys && st->nkeys + 1 > st->max_keys) ||
        (st->max_key_bytes && (cost > st->max_key_bytes ||
                               st->key_bytes > st->max_key_bytes - cost))) {
        reply_err(st, ident, ident_len, h, KVS_EFULL,
                  "key %llu (%llu bytes) not created: worker %d already initialised %llu key "
                  "parts holding %llu bytes at this server (KVS_MAX_KEYS=%llu, "
                  "KVS_MAX_KEY_BYTES=%llu)", (unsigned long long)h->key,
                  (unsigned long long)h->body_len, wrank, (unsigned long long)st->nkeys,
                  (unsigned long long)st->key_bytes, (unsigned long long)st->max_keys,
                  (unsigned long long)st->max_key_bytes);
        return;
    }
    e = calloc(1, sizeof *e);
    if (e == NULL || (e->pushed = calloc((size_t)st->num_workers, 1)) == NULL ||
        (e->failed = calloc((size_t)st->num_workers, 1)) == NULL ||
        (e->value = srv_buf_new_value(h->body_len)) == NULL) {
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
    e->epoch = st->epoch;
    e->need = st->need;
    e->waiting_tail = &e->waiting;
    e->deferred_tail = &e->deferred;
    e->backlog_tail = &e->backlog;
    if (e->bytes && (err = copy_in(st, wrank, h, in, e->value->data, e->bytes)) != 0) {
        entry_free(e);
        reply_err(st, ident, ident_len, h, KVS_EINVAL, "cannot read %llu bytes of worker %d's "
                  "memory: %s", (unsigned long long)h->body_len, wrank, strerror(err));
        return;
    }
    uint64_t hk = entry_hash(e->key, e->part);
    e->next = hmap_get(&st->entries, hk);
    if (hmap_put(&st->entries, hk, e) != 0) {
        entry_free(e);
        reply_err(st, ident, ident_len, h, KVS_ENOMEM, "server out of memory");
        return;
    }
    if (e->count != e->total && !e->async && srv_norms_watch(&st->norms, e->key) != 0)
        LOG(LOG_WARN, NULL, "store", "out of memory: key %llu cannot take lamb's norms",
            (unsigned long long)e->key); /* its lamb rounds would wait: the job times out */
    st->nkeys++;
    st->key_bytes += cost;
    st->value_bytes += e->bytes;
    changed(st, e);
    reply_ok_to(st, ident, ident_len, h, e);
    release_inits(st, e);
}

/* The round is complete: the sum (or, with an optimizer, the updated weight:
 * err is the update's failure) becomes the value; answer everyone. */
static void complete_round(srv_store *st, srv_entry *e, int err, const char *why)
{
    if (err) { /* the weight stays; this round's requests fail */
        srv_buf_unref(e->acc);
        e->acc = NULL;
    } else if (e->acc) { /* (a row-sparse round changed its rows in place) */
        srv_buf *old = e->value;
        e->value = e->acc;
        e->acc = NULL;
        keep_spare(e, old);
    }
    srv_decomp_completed(e, err);
    e->round++;
    e->npushed = 0;
    memset(e->pushed, 0, (size_t)st->num_workers);
    memset(e->failed, 0, (size_t)st->num_workers);
    st->rounds_done++;
    met_observe(st->m_round, (double)(clock_ns() - e->round_start_ns) / 1e9);
    changed(st, e);

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
    if (st->hooks.round_done)
        st->hooks.round_done(st->hooks.arg, e->round); /* automatic checkpoints */
}

/* ---- lamb on split keys: the norm exchange (server/norms.h) ----
 * The round's last push ran phase 1 (e->upd->psum: this part's sums); the
 * entry records and sends them, and waits (busy: later pushes and inits go
 * to the backlog; pulls wait for the round) until the records of the round
 * cover the key; then phase 2 and the round completes. */

static red_pool *loop_pool(const srv_store *st);

/* Phase 2 with the key's sums, or the round fails (err); the round completes. */
static void norm_finish(srv_store *st, srv_entry *e, const double tot[2], int err,
                        const char *why)
{
    uint64_t round = e->round + 1;
    srv_norms_unwait(&st->norms, e->key, e);
    e->norm_wait = false;
    e->busy = false;
    if (err == 0)
        srv_upd_finish(st->optim, loop_pool(st), e->upd, tot[0], tot[1], e->value->data,
                       e->acc->data);
    e->upd->pending = false;
    complete_round(st, e, err, why);
    srv_norms_drop_before(&st->norms, e->key, round);
}

/* Finish e if its round's records are complete (or contradict); true if so. */
static bool norm_try(srv_store *st, srv_entry *e)
{
    double tot[2];
    char why[PROTO_ERRTEXT_MAX];
    int rc = srv_norms_total(&st->norms, e->key, e->round + 1, e->total, tot, why, sizeof why);
    if (rc == 0)
        return false;
    if (rc < 0)
        LOG(LOG_ERROR, NULL, "store", "%s; the round fails", why);
    norm_finish(st, e, tot, rc < 0 ? rc : 0, why);
    return true;
}

static void entry_resume(srv_store *st, srv_entry *e, bool completed);

/* Finish every entry of key (but self) waiting for round's records.  A
 * finished entry leaves the waiters (and its resumed work may add waiters
 * for the next round), so the scan starts again after each. */
static void norm_poke(srv_store *st, uint64_t key, uint64_t round, const srv_entry *self)
{
    srv_norm_key *k;
    double tot[2];
    char why[PROTO_ERRTEXT_MAX];
    int rc = 0;
    bool known = false, again = true;
    while (again && (k = srv_norms_get(&st->norms, key)) != NULL) {
        again = false;
        for (size_t i = 0; i < k->nwait; i++) {
            srv_entry *e = k->waiters[i];
            if (e == self || !e->norm_wait || e->round + 1 != round)
                continue;
            if (!known) { /* the same sums for every part of the round */
                rc = srv_norms_total(&st->norms, key, round, e->total, tot, why, sizeof why);
                known = true;
                if (rc < 0)
                    LOG(LOG_ERROR, NULL, "store", "%s; the round fails", why);
            }
            if (rc == 0)
                return;
            norm_finish(st, e, tot, rc < 0 ? rc : 0, why);
            entry_resume(st, e, true);
            again = true;
            break;
        }
    }
}

/* This part's sums of a round it sent (e->norm_round[i]), to the other
 * servers. */
static void norm_send_part(srv_store *st, const srv_entry *e, int i)
{
    char text[PROTO_NORM_TEXT_MAX];
    if (st->norm_send == NULL || e->norm_round[i] == 0)
        return;
    proto_hdr h = {.type = PROTO_NORM_PART, .key = e->key, .round = e->norm_round[i],
                   .offset = e->offset, .count = e->count, .total = e->total,
                   .dtype = (uint32_t)e->dtype, .part = e->part};
    snprintf(text, sizeof text, "%a %a", e->norm_sums[i][0], e->norm_sums[i][1]);
    st->norm_send(st->norm_arg, &h, text);
}

/* Each part's sums of the last two rounds it sent, whether or not they
 * completed here: this server may have had every other part while another
 * still waits for this one (lost with the old scheduler), and it may have
 * gone one round further meanwhile (pushes of the next round), never two
 * (that round needs the other parts' sums, sent once theirs completed). */
void srv_store_norm_resend(srv_store *st)
{
    for (size_t i = 0; i < st->entries.cap; i++) {
        if (st->entries.used[i] != 1)
            continue;
        for (srv_entry *e = st->entries.vals[i]; e; e = e->next) {
            norm_send_part(st, e, 0);
            norm_send_part(st, e, 1);
        }
    }
}

/* The round's sums are in: record and send this part's, then wait (false)
 * or, when the other parts' came already, complete the round (true). */
static bool norm_start(srv_store *st, srv_entry *e)
{
    uint64_t round = e->round + 1;
    char why[PROTO_ERRTEXT_MAX];
    const double *ps = e->upd->psum;
    int rc = srv_norms_add(&st->norms, e->key, round, e->offset, e->count, ps[0], ps[1], why,
                           sizeof why);
    if (rc == 0)
        rc = srv_norms_wait(&st->norms, e->key, e);
    if (rc != 0) {
        if (rc == KVS_ENOMEM)
            snprintf(why, sizeof why, "server out of memory");
        e->upd->pending = false;
        complete_round(st, e, rc, why);
        return true;
    }
    e->norm_round[0] = e->norm_round[1];
    memcpy(e->norm_sums[0], e->norm_sums[1], sizeof e->norm_sums[0]);
    e->norm_round[1] = round;
    e->norm_sums[1][0] = ps[0];
    e->norm_sums[1][1] = ps[1];
    norm_send_part(st, e, 1);
    e->norm_wait = true;
    e->busy = true;
    norm_poke(st, e->key, round, e); /* other slices of the key here */
    return norm_try(st, e);
}

void srv_store_norm_in(srv_store *st, const proto_hdr *h, const char *body, size_t len)
{
    char text[PROTO_NORM_TEXT_MAX + 1], why[300], *end;
    double ws, rs;
    if (st->broken || srv_norms_get(&st->norms, h->key) == NULL)
        return; /* no part of the key here (P3 slices elsewhere) */
    snprintf(text, sizeof text, "%.*s", (int)(body && len < PROTO_NORM_TEXT_MAX ? len : 0),
             body ? body : "");
    ws = strtod(text, &end);
    rs = end != text ? strtod(end, &end) : NAN;
    if (end == text || *end != '\0') {
        LOG_LIMITED(LOG_WARN, NULL, "store", "dropped a NORM_PART of key %llu: body '%s' is "
                    "not two numbers", (unsigned long long)h->key, text);
        return;
    }
    int rc = srv_norms_add(&st->norms, h->key, h->round, h->offset, h->count, ws, rs, why,
                           sizeof why);
    if (rc == 1)
        return; /* a part sent again: known */
    if (rc != 0) {
        LOG_LIMITED(LOG_WARN, NULL, "store", "dropped a NORM_PART: %s",
                    rc == KVS_ENOMEM ? "server out of memory" : why);
        return;
    }
    norm_poke(st, h->key, h->round, NULL);
}

/* ---- contributions ----
 * A push stands for h.contrib workers: 1 (its sender alone) or its sender's
 * whole local group (a group's sum, pushed by one member).  A round
 * completes when the contributions total W; the workers a push stands for
 * are marked in e->pushed, so that a second push for any of them in the same
 * round is a duplicate. */

/* True if worker w is one of those r stands for. */
static bool stands_for(const srv_store *st, const srv_req *r, int w)
{
    if (r->h.contrib <= 1 || st->group == NULL)
        return w == r->wrank;
    return st->group[w] == st->group[r->wrank];
}

static void mark_pushed(srv_store *st, srv_entry *e, const srv_req *r, uint8_t v)
{
    if (r->h.contrib <= 1 || st->group == NULL) {
        e->pushed[r->wrank] = v;
        return;
    }
    for (int w = 0; w < st->num_workers; w++)
        if (stands_for(st, r, w))
            e->pushed[w] = v;
}

/* True if a worker r stands for already pushed the current round. */
static bool any_pushed(const srv_store *st, const srv_entry *e, const srv_req *r)
{
    if (r->h.contrib <= 1 || st->group == NULL)
        return e->pushed[r->wrank] != 0;
    for (int w = 0; w < st->num_workers; w++)
        if (stands_for(st, r, w) && e->pushed[w])
            return true;
    return false;
}

/* A push whose contribution count no worker can send: more than W, or more
 * than one but not its sender's local group size.  Answers it (KVS_EPROTO)
 * and frees it; true if so. */
static bool contrib_bad(srv_store *st, srv_entry *e, srv_req *r)
{
    int c = r->h.contrib;
    int lsize = st->lsize ? st->lsize[r->wrank] : 1;
    (void)e;
    if (c >= 1 && c <= st->num_workers && (c == 1 || c == lsize))
        return false;
    reply_err(st, r->ident, r->ident_len, &r->h, KVS_EPROTO,
              "key %llu: worker %d's push stands for %d workers, but the job has %d and its "
              "local group %d (a push stands for 1 worker or its whole local group)",
              (unsigned long long)r->h.key, r->wrank, c, st->num_workers, lsize);
    req_free(r);
    return true;
}

/* r's push is in the round's sum: it waits for the round.  uerr/why: the
 * update's failure when this was the last push.  True if the round
 * completed. */
static bool push_added(srv_store *st, srv_entry *e, srv_req *r, uint64_t ns, int uerr,
                       const char *why)
{
    met_observe(st->m_sum, (double)ns / 1e9);
    r->h.sum_ns = ns;
    st->bytes_summed += e->bytes;
    e->npushed += r->h.contrib;
    req_drop_body(r);
    r->next = NULL;
    *e->waiting_tail = r;
    e->waiting_tail = &r->next;
    if (e->npushed < e->need)
        return false;
    if (uerr == 0 && e->upd && e->upd->pending)
        return norm_start(st, e);
    complete_round(st, e, uerr, why);
    return true;
}

/* r's push could not be summed: it fails, the round goes on without it. */
static void push_failed(srv_store *st, srv_entry *e, srv_req *r, int status, const char *text)
{
    mark_pushed(st, e, r, 0);
    if (!e->async)
        for (int w = 0; w < st->num_workers; w++)
            if (stands_for(st, r, w))
                e->failed[w] = (int8_t)status;
    if (e->npushed == 0) {
        srv_buf_unref(e->acc);
        e->acc = NULL;
    }
    /* the pulls of this round (or later) of every worker the push stands
     * for wait on it, and it is not in the sum: they fail with it instead of
     * waiting forever */
    for (srv_req **pp = &e->pulls; *pp;) {
        srv_req *q = *pp;
        if (!stands_for(st, r, q->wrank) || q->h.round <= e->round) {
            pp = &q->next;
            continue;
        }
        *pp = q->next;
        reply_err(st, q->ident, q->ident_len, &q->h, status, "key %llu: this worker's push of "
                  "round %llu failed: %s", (unsigned long long)e->key,
                  (unsigned long long)e->round + 1, text);
        req_free(q);
    }
    reply_err(st, r->ident, r->ident_len, &r->h, status, "%s", text);
    req_free(r);
}

static void entry_resume(srv_store *st, srv_entry *e, bool completed);
static void async_done(srv_store *st, srv_entry *e, srv_req *r, srv_buf *nb, int err,
                       int uerr, const char *why);

static void push_done(srv_job *j, bool cancelled)
{
    srv_push_job *p = (srv_push_job *)j;
    srv_store *st = p->st;
    srv_entry *e = p->e;
    srv_req *r = p->r;
    bool completed = false;
    char text[300];
    srv_buf_unref(p->old);
    e->busy = false;
    st->busy--;
    srv_push_release_answers(p);
    if (cancelled) { /* the server stops: the entry goes with the store */
        srv_buf_unref(p->nb);
        req_free(r);
        free(p->wb);
        free(p);
        return;
    }
    if (p->err)
        snprintf(text, sizeof text, "cannot read %llu bytes of worker %d's memory: %s",
                 (unsigned long long)e->bytes, r->wrank, strerror(p->err));
    if (st->broken) {
        srv_buf_unref(p->nb);
        reply_err(st, r->ident, r->ident_len, &r->h, KVS_EPEERDEAD, "%s", st->broken_text);
        req_free(r);
    } else if (e->async) {
        async_done(st, e, r, p->nb, p->err, p->uerr, p->why);
    } else if (p->err) {
        push_failed(st, e, r, KVS_EINVAL, text);
    } else {
        if (p->nwb > 0 && e->npushed + r->h.contrib == e->need)
            st->cma_fused += srv_push_mark_written(e, r, p);
        completed = push_added(st, e, r, p->ns, p->uerr, p->why);
    }
    free(p->wb);
    free(p);
    entry_resume(st, e, completed);
}

/* The pool for sums and updates on the loop: none while job threads exist
 * (the loop then only works on entries under offload_min, quicker alone
 * than waiting for the pool that a job, at KVS_JOB_NICE, may be holding). */
static red_pool *loop_pool(const srv_store *st)
{
    return st->jobs ? NULL : st->pool;
}

/* Can e's work go to a job? */
static bool offload(const srv_store *st, const srv_entry *e)
{
    return st->jobs != NULL && e->bytes >= srv_store_offload_min(st);
}

/* The worker's memory behind a request by reference, still proven?  Else
 * fail r. */
static bool by_ref_ok(srv_store *st, srv_entry *e, srv_req *r)
{
    if (!(r->h.flags & PROTO_F_CMA))
        return true;
    if (st->cma && srv_cma_alive(&st->cma[r->wrank]))
        return true;
    push_failed(st, e, r, KVS_EPROTO, "data by reference from a worker that did not prove "
                "it is on this host (or is gone)");
    return false;
}

/* A row-sparse push (server/sparse.h) into the current round of e: its
 * rows join the round's row sums; the last one writes them.  True if the
 * round completed here. */
static bool rsp_push(srv_store *st, srv_entry *e, srv_req *r, const srv_in *in)
{
    char why[PROTO_ERRTEXT_MAX] = "";
    uint64_t t0 = clock_ns();
    int err = 0, uerr = 0;
    if (e->acc) {
        err = KVS_EINVAL;
        snprintf(why, sizeof why, "key %llu: round %llu mixes dense and row-sparse pushes",
                 (unsigned long long)e->key, (unsigned long long)e->round + 1);
    }
    if (err == 0)
        err = srv_rsp_add(e, r, in, why, sizeof why);
    if (err) {
        push_failed(st, e, r, err, why);
        return false;
    }
    mark_pushed(st, e, r, 1);
    for (int w = 0; w < st->num_workers; w++)
        if (stands_for(st, r, w))
            e->failed[w] = 0;
    if (e->npushed == 0)
        e->round_start_ns = t0;
    if (e->npushed + r->h.contrib == e->need)
        uerr = srv_rsp_finish(updating(st) ? st->optim : NULL, e, why, sizeof why);
    return push_added(st, e, r, clock_ns() - t0, uerr, why);
}

/* Start r's push (sync mode) into the current round of e (not busy): sum it
 * here, or in a job (then e is busy until it is done).  in: r's body (NULL:
 * none; r may own it already).  True if the round completed here. */
static bool start_push(srv_store *st, srv_entry *e, srv_req *r, const srv_in *in)
{
    if (r->h.flags & PROTO_F_RSP)
        return rsp_push(st, e, r, in);
    if (e->rsp) {
        push_failed(st, e, r, KVS_EINVAL, "a dense push in a round of row-sparse pushes");
        return false;
    }
    uint64_t t0 = clock_ns();
    bool first = e->npushed == 0, last = e->npushed + r->h.contrib == e->need;
    bool by_ref = (r->h.flags & PROTO_F_CMA) != 0;
    bool upd = last && updating(st);
    bool zenc = last && srv_decomp_wants(e, updating(st)); /* compressed replies */
    int mode = first ? SUM_COPY : SUM_ADD;
    char why[PROTO_ERRTEXT_MAX] = "";
    mark_pushed(st, e, r, 1);
    for (int w = 0; w < st->num_workers; w++)
        if (stands_for(st, r, w))
            e->failed[w] = 0;
    if (!by_ref_ok(st, e, r))
        return false;
    if (first)
        e->round_start_ns = t0;
    if (first && !by_ref && in && in->frames && in->nframes == 1 && e->bytes >= DP_ADOPT_MIN &&
        zmq_msg_size(&in->frames[0]) == e->bytes) {
        /* the first push of a round becomes the round buffer: no copy */
        e->acc = srv_buf_adopt(&in->frames[0]);
        req_drop_body(r);
        mode = SUM_NONE;
        srv_buf_unref(e->spare); /* rounds of received frames need no spare */
        e->spare = NULL;
    } else if (first) {
        e->acc = take_acc(e);
    }
    if (e->acc == NULL) {
        push_failed(st, e, r, KVS_ENOMEM, "server out of memory");
        return false;
    }
    if (offload(st, e) && (mode != SUM_NONE || upd || zenc)) {
        srv_push_job *p = calloc(1, sizeof *p);
        if (p == NULL || req_keep(r, in, e->bytes) != 0) {
            free(p);
            push_failed(st, e, r, KVS_ENOMEM, "server out of memory");
            return false;
        }
        *p = (srv_push_job){.j = {srv_push_run, push_done, r->h.priority, 0, NULL}, .st = st,
                            .pool = st->pool, .hold = st->hold, .hold_arg = st->reply_arg,
                            .e = e, .r = r, .mode = mode, .dst = e->acc->data,
                            .by_ref = by_ref, .zenc = zenc};
        if (by_ref)
            p->cma = st->cma[r->wrank];
        if (upd) {
            p->uerr = srv_upd_prepare(st->optim, e->key, e->dtype, e->count, e->total, &e->upd,
                                      &p->step, p->why, sizeof p->why);
            p->update = p->uerr == 0;
            p->old = e->value;
            atomic_fetch_add(&e->value->refs, 1);
        } else if (last && !zenc) { /* (compressed: the replies write the decoded sum) */
            srv_push_write_backs(st->cma, st->num_workers, e, r, p);
        }
        if (last)
            srv_push_hold_answers(e, r, p, true);
        e->busy = true;
        st->busy++;
        srv_jobs_submit(st->jobs, &p->j);
        return false;
    }
    srv_in none = {NULL, NULL, 0};
    int err = srv_sum_into(loop_pool(st), e->dtype, e->acc->data, NULL, e->bytes,
                           in ? in : &none, by_ref ? &st->cma[r->wrank] : NULL, r->h.cma_src,
                           mode);
    if (err) {
        snprintf(why, sizeof why, "cannot read %llu bytes of worker %d's memory: %s",
                 (unsigned long long)e->bytes, r->wrank, strerror(err));
        push_failed(st, e, r, KVS_EINVAL, why);
        return false;
    }
    int uerr = 0;
    if (zenc && srv_decomp_round(e, e->acc->data) != 0)
        LOG_LIMITED(LOG_WARN, NULL, "store", "out of memory compressing key %llu part %u: "
                    "this round's replies go plain", (unsigned long long)e->key, e->part);
    if (upd) /* the sum is the gradient: acc becomes the new weight */
        uerr = srv_upd_apply(st->optim, loop_pool(st), e->key, e->dtype, e->count, e->total,
                             &e->upd, e->value->data, e->acc->data, why, sizeof why);
    return push_added(st, e, r, clock_ns() - t0, uerr, why);
}

static void check_stuck(srv_store *st, srv_entry *e);

/* After a round completed: pushes deferred for the new round join it (until
 * one of them starts a job). */
static void run_deferred(srv_store *st, srv_entry *e)
{
    for (;;) {
        srv_req **pp = &e->deferred, *r = NULL;
        while (*pp && ((*pp)->h.round != e->round || any_pushed(st, e, *pp)))
            pp = &(*pp)->next;
        if ((r = *pp) == NULL)
            break;
        *pp = r->next;
        e->deferred_tail = &e->deferred;
        while (*e->deferred_tail)
            e->deferred_tail = &(*e->deferred_tail)->next;
        srv_in in = srv_req_in(r);
        start_push(st, e, r, &in);
        if (e->busy)
            return; /* its job's end goes on from here */
    }
}

/* An async entry: the push is applied at once (value + push, or with an
 * optimizer the push is the gradient of one update), into a new buffer
 * unless the value can be summed into in place. */
static void start_async(srv_store *st, srv_entry *e, srv_req *r, const srv_in *in)
{
    char why[PROTO_ERRTEXT_MAX] = "";
    if (r->h.flags & PROTO_F_RSP) {
        int uerr = srv_rsp_async(updating(st) ? st->optim : NULL, e, r, in, why, sizeof why);
        async_done(st, e, r, NULL, 0, uerr, why);
        return;
    }
    bool by_ref = (r->h.flags & PROTO_F_CMA) != 0;
    srv_in none = {NULL, NULL, 0};
    mark_pushed(st, e, r, 1); /* (cleared by push_failed) */
    if (!by_ref_ok(st, e, r))
        return;
    mark_pushed(st, e, r, 0);
    if (!updating(st) && !offload(st, e) && atomic_load(&e->value->refs) == 1) {
        int err = srv_sum_into(loop_pool(st), e->dtype, e->value->data, NULL, e->bytes,
                               in ? in : &none, by_ref ? &st->cma[r->wrank] : NULL,
                               r->h.cma_src, SUM_ADD);
        async_done(st, e, r, NULL, err, 0, "");
        return;
    }
    srv_buf *nb = take_acc(e);
    if (nb == NULL) {
        reply_err(st, r->ident, r->ident_len, &r->h, KVS_ENOMEM, "server out of memory");
        req_free(r);
        return;
    }
    int mode = updating(st) ? SUM_COPY : SUM_BASE;
    int uerr = 0;
    srv_upd_step step;
    if (updating(st))
        uerr = srv_upd_prepare(st->optim, e->key, e->dtype, e->count, e->total, &e->upd, &step,
                               why, sizeof why);
    if (offload(st, e)) {
        srv_push_job *p = calloc(1, sizeof *p);
        if (p == NULL || req_keep(r, in, e->bytes) != 0) {
            free(p);
            srv_buf_unref(nb);
            reply_err(st, r->ident, r->ident_len, &r->h, KVS_ENOMEM, "server out of memory");
            req_free(r);
            return;
        }
        *p = (srv_push_job){.j = {srv_push_run, push_done, r->h.priority, 0, NULL}, .st = st,
                            .pool = st->pool, .hold = st->hold, .hold_arg = st->reply_arg,
                            .e = e, .r = r, .mode = mode, .dst = nb->data, .nb = nb,
                            .old = e->value, .by_ref = by_ref,
                            .update = updating(st) && uerr == 0, .step = step, .uerr = uerr};
        snprintf(p->why, sizeof p->why, "%s", why);
        atomic_fetch_add(&e->value->refs, 1);
        if (by_ref)
            p->cma = st->cma[r->wrank];
        srv_push_hold_answers(e, r, p, false);
        e->busy = true;
        st->busy++;
        srv_jobs_submit(st->jobs, &p->j);
        return;
    }
    int err = uerr ? 0 : srv_sum_into(loop_pool(st), e->dtype, nb->data, e->value->data,
                                      e->bytes, in ? in : &none,
                                      by_ref ? &st->cma[r->wrank] : NULL, r->h.cma_src, mode);
    if (err == 0 && uerr == 0 && updating(st))
        srv_upd_run(loop_pool(st), &step, e->value->data, nb->data);
    async_done(st, e, r, nb, err, uerr, why);
}

/* An async push was applied (nb: its new value; NULL: summed in place), or
 * failed (err: a read; uerr: the update). */
static void async_done(srv_store *st, srv_entry *e, srv_req *r, srv_buf *nb, int err,
                       int uerr, const char *why)
{
    if (err || uerr) {
        srv_buf_unref(nb);
        if (uerr)
            reply_err(st, r->ident, r->ident_len, &r->h, uerr, "%s", why);
        else
            reply_err(st, r->ident, r->ident_len, &r->h, KVS_EINVAL, "cannot read %llu bytes "
                      "of worker %d's memory: %s", (unsigned long long)e->bytes, r->wrank,
                      strerror(err));
        req_free(r);
        return;
    }
    if (nb) {
        srv_buf *old = e->value;
        e->value = nb;
        keep_spare(e, old);
    }
    st->bytes_summed += e->bytes;
    e->round++;
    reply_ok(st, r, e);
    req_free(r);
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

static bool entry_sync(srv_store *st, srv_entry *e);
static bool epoch_stale(srv_store *st, const uint8_t *ident, size_t ident_len, proto_hdr *h,
                        const srv_entry *e);

/* A push r (with body in) for e, which is not busy. */
static void handle_push(srv_store *st, srv_entry *e, srv_req *r, const srv_in *in)
{
    const proto_hdr *h = &r->h;
    entry_sync(st, e);
    if (epoch_stale(st, r->ident, r->ident_len, &r->h, e)) {
        req_free(r);
        return;
    }
    if (contrib_bad(st, e, r))
        return;
    if (e->async) {
        start_async(st, e, r, in);
        return;
    }
    if (h->round < e->round && st->changed) {
        /* replicated: a re-send after a promotion of a round this copy
         * completed (docs/design.md "Replicated servers"): done, not summed */
        reply_ok(st, r, e);
        req_free(r);
        return;
    }
    if (h->round < e->round || (h->round == e->round && any_pushed(st, e, r))) {
        reply_err(st, r->ident, r->ident_len, h, KVS_EDUP,
                  "key %llu: worker %d already pushed round %llu (current round %llu)",
                  (unsigned long long)h->key, r->wrank, (unsigned long long)h->round,
                  (unsigned long long)e->round);
        req_free(r);
        return;
    }
    if (h->round > e->round) {
        /* a later round: keep the data until this round completes */
        if (hold(st, r) != 0) {
            req_free(r);
            return;
        }
        if (req_keep(r, in, h->body_len) != 0) {
            reply_err(st, r->ident, r->ident_len, h, KVS_ENOMEM,
                      "server out of memory keeping a push for a later round");
            req_free(r);
            return;
        }
        r->next = NULL;
        *e->deferred_tail = r;
        e->deferred_tail = &r->next;
        check_stuck(st, e);
        return;
    }
    if (start_push(st, e, r, in))
        run_deferred(st, e);
    check_stuck(st, e);
}

/* e's job ended (completed: its round too): go on with what waited. */
static void handle_pull(srv_store *st, const uint8_t *ident, size_t ident_len, int wrank,
                        const proto_hdr *h, const srv_in *in);
static void to_backlog(srv_store *st, srv_entry *e, srv_req *r, const srv_in *in);

static void entry_resume(srv_store *st, srv_entry *e, bool completed)
{
    if (entry_sync(st, e))
        completed = false; /* what waited for later rounds went with the old epoch */
    if (completed)
        run_deferred(st, e);
    check_stuck(st, e);
    while (!e->busy && e->backlog) {
        srv_req *r = e->backlog;
        e->backlog = r->next;
        if (e->backlog == NULL)
            e->backlog_tail = &e->backlog;
        r->next = NULL;
        srv_in in = srv_req_in(r);
        if (st->broken) {
            reply_err(st, r->ident, r->ident_len, &r->h, KVS_EPEERDEAD, "%s", st->broken_text);
            req_free(r);
        } else if (r->h.type == PROTO_INIT) {
            handle_init(st, r->ident, r->ident_len, r->wrank, &r->h, &in);
            req_free(r);
        } else if (r->h.type == PROTO_PULL) { /* a pull that waited for the epoch */
            handle_pull(st, r->ident, r->ident_len, r->wrank, &r->h, &in);
            req_free(r);
        } else {
            handle_push(st, e, r, &in);
        }
    }
}

static void handle_pull(srv_store *st, const uint8_t *ident, size_t ident_len, int wrank,
                        const proto_hdr *hin, const srv_in *in)
{
    char why[PROTO_ERRTEXT_MAX];
    int err;
    proto_hdr hh = *hin, *h = &hh;
    srv_entry *e = find_checked(st, ident, ident_len, h);
    if (e == NULL)
        return;
    if (st->epoch && e->epoch != st->epoch && e->busy) {
        /* its base is known when the job ends: the pull waits in the backlog */
        srv_req *b = req_new(ident, ident_len, wrank, h);
        if (b == NULL)
            reply_err(st, ident, ident_len, h, KVS_ENOMEM, "server out of memory");
        else
            to_backlog(st, e, b, in);
        return;
    }
    entry_sync(st, e);
    if (epoch_stale(st, ident, ident_len, h, e))
        return;
    srv_req *r = req_new(ident, ident_len, wrank, h);
    if (r == NULL) {
        reply_err(st, ident, ident_len, h, KVS_ENOMEM, "server out of memory");
        return;
    }
    if ((h->flags & PROTO_F_RSP) && (err = srv_rsp_keep_ids(r, in, why, sizeof why))) {
        reply_err(st, ident, ident_len, h, err, "%s", why);
        req_free(r);
        return;
    }
    if (e->async || h->round <= e->round) {
        reply_ok(st, r, e);
        req_free(r);
        return;
    }
    if (h->round == e->round + 1 && e->failed[wrank] && !e->pushed[wrank]) {
        /* the round needs this worker's push, which failed: it cannot come */
        reply_err(st, ident, ident_len, h, e->failed[wrank], "key %llu: this worker's push of "
                  "round %llu failed (%s)", (unsigned long long)e->key,
                  (unsigned long long)e->round + 1, kvs_strerror(e->failed[wrank]));
        req_free(r);
        return;
    }
    if (hold(st, r) != 0) {
        req_free(r);
        return;
    }
    r->next = e->pulls;
    e->pulls = r;
    check_stuck(st, e);
}

/* A request for e while its job runs: it waits in the backlog. */
static void to_backlog(srv_store *st, srv_entry *e, srv_req *r, const srv_in *in)
{
    if (hold(st, r) != 0) {
        req_free(r);
        return;
    }
    if (req_keep(r, in, r->h.body_len) != 0) {
        reply_err(st, r->ident, r->ident_len, &r->h, KVS_ENOMEM, "server out of memory");
        req_free(r);
        return;
    }
    r->next = NULL;
    *e->backlog_tail = r;
    e->backlog_tail = &r->next;
}

/* A push (or an init of a busy entry) for e: now, or after its job. */
static void push_or_backlog(srv_store *st, srv_entry *e, const uint8_t *ident,
                            size_t ident_len, int wrank, const proto_hdr *h, const srv_in *in)
{
    srv_req *r = req_new(ident, ident_len, wrank, h);
    if (r == NULL) {
        reply_err(st, ident, ident_len, h, KVS_ENOMEM, "server out of memory");
        return;
    }
    if (e->busy)
        to_backlog(st, e, r, in);
    else
        handle_push(st, e, r, in);
}

void srv_store_handle(srv_store *st, const uint8_t *ident, size_t ident_len, int wrank,
                      const proto_hdr *h, const srv_in *in)
{
    srv_entry *e;
    if (st->broken) {
        reply_err(st, ident, ident_len, h, KVS_EPEERDEAD, "%s", st->broken_text);
        return;
    }
    if (h->type == PROTO_INIT && st->epoch) {
        proto_hdr ih = *h;
        if (epoch_stale(st, ident, ident_len, &ih, NULL))
            return;
    }
    if (st->changed && h->type == PROTO_INIT && (h->flags & PROTO_F_ASYNC)) {
        reply_err(st, ident, ident_len, h, KVS_EINVAL, "key %llu: dist_async keys are not "
                  "replicated (KVS_REPLICAS=1 keeps dist_sync keys only)",
                  (unsigned long long)h->key);
        return;
    }
    switch (h->type) {
    case PROTO_INIT:
    case PROTO_PUSH:
    case PROTO_PUSHPULL:
        e = h->type == PROTO_INIT ? find_entry(st, h->key, h->part)
                                  : find_checked(st, ident, ident_len, h);
        if (e == NULL && h->type == PROTO_INIT) {
            handle_init(st, ident, ident_len, wrank, h, in);
            return;
        }
        if (e == NULL)
            return;
        if (h->type == PROTO_INIT && !e->busy) {
            handle_init(st, ident, ident_len, wrank, h, in);
            return;
        }
        if (h->type != PROTO_INIT) { /* a compressed push: decoded first (decomp.h) */
            char why[PROTO_ERRTEXT_MAX];
            proto_hdr dh = *h;
            srv_in din = in ? *in : (srv_in){NULL, NULL, 0};
            zmq_msg_t dmsg;
            int rc = srv_decomp_push(e, wrank, &dh, in ? &din : NULL, &dmsg, why, sizeof why);
            if (rc) {
                if (!e->async && wrank >= 0 && wrank < st->num_workers)
                    e->failed[wrank] = (int8_t)rc; /* its pulls of the round fail too */
                reply_err(st, ident, ident_len, h, rc, "%s", why);
                return;
            }
            if (PROTO_CODEC(h->flags)) {
                push_or_backlog(st, e, ident, ident_len, wrank, &dh, &din);
                zmq_msg_close(&dmsg);
                return;
            }
        }
        push_or_backlog(st, e, ident, ident_len, wrank, h, in);
        break;
    case PROTO_PULL:
        handle_pull(st, ident, ident_len, wrank, h, in);
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
    fail_list(st, e->backlog, why);
    e->waiting = e->pulls = e->deferred = e->backlog = NULL;
    e->waiting_tail = &e->waiting;
    e->deferred_tail = &e->deferred;
    e->backlog_tail = &e->backlog;
}

static void check_stuck(srv_store *st, srv_entry *e)
{
    char why[300];
    if (st->left == NULL || e->async ||
        (!e->waiting && !e->pulls && !e->deferred && !e->backlog))
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
    for (size_t i = 0; wrank == 0 && i < st->pending_inits.cap; i++) {
        if (st->pending_inits.used[i] != 1)
            continue;
        /* inits waiting for worker 0's values: they can never come */
        srv_req *r = st->pending_inits.vals[i];
        char why[300];
        snprintf(why, sizeof why, "key %llu can never be initialised: worker 0, whose values it "
                 "starts from, left the job (kvs_close) without initialising it",
                 (unsigned long long)r->h.key);
        LOG(LOG_WARN, NULL, "store", "%s; failing the inits waiting for it", why);
        hmap_del(&st->pending_inits, st->pending_inits.keys[i]);
        fail_list(st, r, why);
    }
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
    if (st->hooks.failed)
        st->hooks.failed(st->hooks.arg, why);
}

/* ---- for server/ctl.c and server/ckpt.c ---- */

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
            if (e->npushed > 0 || e->deferred != NULL || e->busy) {
                snprintf(why, whylen, "key %llu: round %llu is in progress (%d of %d workers "
                         "pushed%s); save and load act between rounds: call them after "
                         "kvs_wait_all() on every worker", (unsigned long long)e->key,
                         (unsigned long long)e->round, e->npushed, st->num_workers,
                         e->deferred || e->busy ? ", later rounds queued" : "");
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
            if (e->round > 0 || e->npushed > 0 || e->deferred != NULL || e->busy)
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
    srv_decomp_forget(e);
    srv_upd_free(e->upd);
    e->upd = upd;
    return 0;
}

int srv_store_copy_in(srv_store *st, const proto_hdr *h, srv_buf *value, struct srv_upd *upd)
{
    srv_entry *e = find_entry(st, h->key, h->part);
    if (e != NULL) {
        if (!same_shape(e, h) || e->async != ((h->flags & PROTO_F_ASYNC) != 0))
            return KVS_ESHAPE;
        if (e->busy || e->npushed > 0 || e->deferred != NULL)
            return KVS_EINVAL;
        if (h->round < e->round) { /* an older copy than ours */
            srv_buf_unref(value);
            srv_upd_free(upd);
            return 0;
        }
        srv_buf_unref(e->value);
        e->value = value;
        e->round = h->round;
        srv_decomp_forget(e); /* replies plain until this server completes a round */
        if (upd) {
            srv_upd_free(e->upd);
            e->upd = upd;
        }
        return 0;
    }
    uint64_t bytes = h->count * kvs_dtype_size((kvs_dtype)h->dtype);
    e = calloc(1, sizeof *e);
    if (e == NULL || (e->pushed = calloc((size_t)st->num_workers, 1)) == NULL ||
        (e->failed = calloc((size_t)st->num_workers, 1)) == NULL) {
        if (e)
            entry_free(e);
        return KVS_ENOMEM;
    }
    e->key = h->key;
    e->part = h->part;
    e->dtype = (kvs_dtype)h->dtype;
    e->count = h->count;
    e->offset = h->offset;
    e->total = h->total;
    e->bytes = bytes;
    e->async = (h->flags & PROTO_F_ASYNC) != 0;
    e->round = h->round;
    e->epoch = st->epoch;
    e->need = st->need; /* (0 would end a round at its first push) */
    e->waiting_tail = &e->waiting;
    e->deferred_tail = &e->deferred;
    e->backlog_tail = &e->backlog;
    uint64_t hk = entry_hash(e->key, e->part);
    e->next = hmap_get(&st->entries, hk);
    if (hmap_put(&st->entries, hk, e) != 0) {
        entry_free(e);
        return KVS_ENOMEM;
    }
    e->value = value;
    e->upd = upd;
    if (e->count != e->total && !e->async && srv_norms_watch(&st->norms, e->key) != 0)
        LOG(LOG_WARN, NULL, "store", "out of memory: key %llu cannot take lamb's norms",
            (unsigned long long)e->key);
    st->nkeys++;
    st->key_bytes += entry_cost(st, bytes);
    st->value_bytes += bytes;
    release_inits(st, e);
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
            d->deferred += list_len(e->deferred) + list_len(e->backlog);
        }
    }
    for (size_t i = 0; i < st->pending_inits.cap; i++)
        if (st->pending_inits.used[i] == 1)
            d->inits += list_len(st->pending_inits.vals[i]);
}

/* ---- elastic membership (docs/design.md "Elastic workers") ---- */

int srv_store_elastic(srv_store *st, int initial)
{
    if ((st->member = calloc((size_t)st->num_workers, 1)) == NULL)
        return KVS_ENOMEM;
    for (int w = 0; w < initial && w < st->num_workers; w++)
        st->member[w] = 1;
    st->need = initial < st->num_workers ? initial : st->num_workers;
    st->epoch = 1;
    return 0;
}

bool srv_store_is_member(const srv_store *st, int w)
{
    return st->member == NULL || (w >= 0 && w < st->num_workers && st->member[w]);
}

static void fail_list_with(srv_store *st, srv_req *r, int status, const char *why)
{
    while (r) {
        srv_req *n = r->next;
        st->reply(st->reply_arg, r->ident, r->ident_len, &r->h, status, why, NULL, 0);
        req_free(r);
        r = n;
    }
}

/* Bring e to the store's epoch unless its job runs (then entry_resume does
 * it when the job ends): the partial round and the pushes kept for later
 * rounds go, and so do the pulls that wait for them.  True if e changed. */
static bool entry_sync(srv_store *st, srv_entry *e)
{
    char why[300];
    if (e->epoch == st->epoch || e->busy)
        return false;
    if (!e->async) {
        snprintf(why, sizeof why, "key %llu: the job's workers changed (membership epoch %llu) "
                 "before round %llu completed: redo the step", (unsigned long long)e->key,
                 (unsigned long long)st->epoch, (unsigned long long)(e->round - e->base + 1));
        if (e->waiting || e->deferred || e->pulls)
            LOG(LOG_DEBUG, NULL, "store", "%s", why);
        fail_list_with(st, e->waiting, KVS_EMEMBERSHIP, why);
        fail_list_with(st, e->deferred, KVS_EMEMBERSHIP, why);
        fail_list_with(st, e->pulls, KVS_EMEMBERSHIP, why);
        e->waiting = e->deferred = e->pulls = NULL;
        e->waiting_tail = &e->waiting;
        e->deferred_tail = &e->deferred;
        srv_buf_unref(e->acc);
        e->acc = NULL;
        if (e->rsp) {
            srv_rsp_acc_free(e->rsp);
            e->rsp = NULL;
        }
        e->npushed = 0;
        memset(e->pushed, 0, (size_t)st->num_workers);
        memset(e->failed, 0, (size_t)st->num_workers);
        e->base = e->round;
    }
    e->epoch = st->epoch;
    e->need = st->need;
    return true;
}

/* A data request of another epoch than the store's: answered
 * KVS_EMEMBERSHIP, true.  Otherwise false, and for an entry e its round
 * becomes the entry's own (base + the round it carries). */
static bool epoch_stale(srv_store *st, const uint8_t *ident, size_t ident_len, proto_hdr *h,
                        const srv_entry *e)
{
    if (st->epoch == 0)
        return false;
    uint64_t ep = PROTO_ROUND_EPOCH(h->round);
    if (ep != st->epoch) {
        reply_err(st, ident, ident_len, h, KVS_EMEMBERSHIP, "%s of key %llu from membership "
                  "epoch %llu, but the job is in epoch %llu: the job's workers changed; redo "
                  "the step", proto_type_name(h->type), (unsigned long long)h->key,
                  (unsigned long long)ep, (unsigned long long)st->epoch);
        return true;
    }
    if (e)
        h->round = e->base + (h->round & PROTO_ROUND_MASK);
    return false;
}

int srv_store_epoch(srv_store *st, uint64_t epoch, const char *body, size_t len, char *why,
                    size_t whylen)
{
    uint8_t *m = malloc((size_t)st->num_workers);
    int n = m ? proto_parse_epoch(body, len, m, st->num_workers, -1, NULL, why,
                                             whylen) : -1;
    if (m == NULL)
        snprintf(why, whylen, "out of memory");
    if (n < 0 || st->member == NULL) {
        if (n >= 0)
            snprintf(why, whylen, "the store is not elastic");
        free(m);
        return -1;
    }
    free(st->member);
    st->member = m;
    st->need = n;
    st->epoch = epoch;
    LOG(LOG_INFO, NULL, "store", "membership epoch %llu: %d workers (%.*s)",
        (unsigned long long)epoch, n, (int)(len < 200 ? len : 200), body);
    /* inits waiting for the values of the old epoch's rank 0, who may be
     * gone: they fail, and are made again in the new epoch */
    for (size_t i = 0; i < st->pending_inits.cap; i++)
        if (st->pending_inits.used[i] == 1)
            fail_list_with(st, st->pending_inits.vals[i], KVS_EMEMBERSHIP, "the job's workers "
                           "changed while this key waited for rank 0's initial values: "
                           "initialise it again");
    hmap_fini(&st->pending_inits);
    hmap_init(&st->pending_inits);
    for (size_t i = 0; i < st->entries.cap; i++) {
        if (st->entries.used[i] != 1)
            continue;
        for (srv_entry *e = st->entries.vals[i]; e; e = e->next)
            entry_sync(st, e);
    }
    return 0;
}
