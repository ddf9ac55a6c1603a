/* store.c - see store.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/clock.h"
#include "common/datapath.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/sizes.h"
#include "server/cma.h"
#include "server/ctl.h"
#include "server/jobs.h"
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
    bool busy;                          /* a job works on it (acc, value, upd) */
    srv_req *backlog, **backlog_tail;   /* inits and pushes that came while busy */
};

/* ---- buffers ---- */

static srv_buf *buf_new(uint64_t bytes, bool map)
{
    srv_buf *b = malloc(sizeof *b);
    uint64_t cap = (bytes + 63) & ~63ull;
    if (b == NULL)
        return NULL;
    b->is_msg = false;
    b->mapped = map && cap >= DP_MAP_MIN;
    if (b->mapped) {
        void *p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        b->data = p == MAP_FAILED ? NULL : p;
    } else {
        b->data = aligned_alloc(64, cap ? cap : 64);
    }
    if (b->data == NULL) {
        free(b);
        return NULL;
    }
    atomic_init(&b->refs, 1);
    b->cap = cap;
    return b;
}

srv_buf *srv_buf_new(uint64_t bytes)
{
    return buf_new(bytes, false);
}

srv_buf *srv_buf_new_value(uint64_t bytes)
{
    return buf_new(bytes, true);
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
    b->mapped = false;
    b->data = zmq_msg_data(&b->msg);
    b->cap = zmq_msg_size(&b->msg);
    return b;
}

void srv_buf_unref(srv_buf *b)
{
    if (b && atomic_fetch_sub(&b->refs, 1) == 1) {
        if (b->is_msg)
            zmq_msg_close(&b->msg);
        else if (b->mapped)
            munmap(b->data, b->cap);
        else
            free(b->data);
        free(b);
    }
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

/* The body r owns, as an srv_in. */
static srv_in in_of(srv_req *r)
{
    srv_in in = {NULL, NULL, 0};
    if (r->nframes == 1)
        in = (srv_in){zmq_msg_data(&r->body), &r->body, 1};
    else if (r->nframes > 1)
        in = (srv_in){NULL, r->more, r->nframes};
    return in;
}

static bool in_has_data(const proto_hdr *h, const srv_in *in)
{
    return (in && (in->data || in->nframes > 0)) || ((h->flags & PROTO_F_CMA) && h->cma_src);
}

/* ---- summing a body ---- */

enum sum_mode {
    SUM_NONE, /* nothing to sum (the push became the round buffer) */
    SUM_COPY, /* dst = body */
    SUM_ADD,  /* dst += body */
    SUM_BASE, /* dst = base + body */
};

/* Sum the body of in (bytes bytes), or the worker's memory at addr when cma
 * is not NULL, into dst as mode says, piece by piece at the pieces'
 * offsets (each element goes through the same operation as with one
 * piece, so the result does not depend on how the body was cut).  Any
 * thread.  0, or an errno of a failed read. */
static int sum_into(red_pool *pool, kvs_dtype dt, uint8_t *dst, const uint8_t *base,
                    uint64_t bytes, const srv_in *in, const srv_cma *cma, uint64_t addr,
                    int mode)
{
    size_t esz = kvs_dtype_size(dt);
    if (mode == SUM_NONE || bytes == 0)
        return 0;
    if (cma) {
        if (mode == SUM_BASE) {
            const void *src[1] = {base};
            red_sum(pool, dt, dst, src, 1, bytes / esz);
            mode = SUM_ADD;
        }
        int rc = mode == SUM_COPY ? srv_cma_copy(pool, cma, 0, dst, addr, bytes)
                                  : srv_cma_add(pool, cma, dt, dst, addr, bytes / esz);
        return rc == 0 ? 0 : (errno ? errno : EIO);
    }
    int n = in->frames && in->nframes > 1 ? in->nframes : 1;
    uint64_t off = 0;
    for (int i = 0; i < n && off < bytes; i++) {
        const uint8_t *p = n > 1 ? zmq_msg_data(&in->frames[i]) : in->data;
        uint64_t len = n > 1 ? zmq_msg_size(&in->frames[i]) : bytes;
        if (len > bytes - off)
            len = bytes - off;
        if (mode == SUM_COPY) {
            const void *src[1] = {p};
            red_sum(pool, dt, dst + off, src, 1, len / esz);
        } else if (mode == SUM_ADD) {
            red_add(pool, dt, dst + off, p, len / esz);
        } else {
            const void *src[2] = {base + off, p};
            red_sum(pool, dt, dst + off, src, 2, len / esz);
        }
        off += len;
    }
    return 0;
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
    return sum_into(st->pool, (kvs_dtype)h->dtype, dst, NULL, bytes, in ? in : &none,
                    by_ref ? &st->cma[wrank] : NULL, h->cma_src, SUM_COPY);
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
        if (wrank == 0 && data && e->bytes > 0) {
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
    if (wrank != 0 || (!data && h->count > 0)) {
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
    e = calloc(1, sizeof *e);
    if (e == NULL || (e->pushed = calloc((size_t)st->num_workers, 1)) == NULL ||
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
    } else {
        srv_buf *old = e->value;
        e->value = e->acc;
        e->acc = NULL;
        keep_spare(e, old);
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

/* r's push is in the round's sum: it waits for the round.  uerr/why: the
 * update's failure when this was the last push.  True if the round
 * completed. */
static bool push_added(srv_store *st, srv_entry *e, srv_req *r, uint64_t ns, int uerr,
                       const char *why)
{
    met_observe(st->m_sum, (double)ns / 1e9);
    r->h.sum_ns = ns;
    st->bytes_summed += e->bytes;
    e->npushed++;
    req_drop_body(r);
    r->next = NULL;
    *e->waiting_tail = r;
    e->waiting_tail = &r->next;
    if (e->npushed < st->num_workers)
        return false;
    complete_round(st, e, uerr, why);
    return true;
}

/* r's push could not be summed: it fails, the round goes on without it. */
static void push_failed(srv_store *st, srv_entry *e, srv_req *r, int status, const char *text)
{
    e->pushed[r->wrank] = 0;
    if (e->npushed == 0) {
        srv_buf_unref(e->acc);
        e->acc = NULL;
    }
    reply_err(st, r->ident, r->ident_len, &r->h, status, "%s", text);
    req_free(r);
}

/* A worker's output that the job of a round's last push writes the round's
 * value into, piece by piece as each piece is summed (see start_push). */
typedef struct wb_target {
    srv_cma cma;    /* the worker's proven memory, as checked on the loop */
    uint64_t dst;   /* its request's output (h.cma_dst) */
    uint64_t seq;   /* its request (srv_req.seq): done() finds it again by this */
    atomic_int err; /* errno of a failed write, 0 if none */
} wb_target;

/* Work of a job on an entry (server/jobs.h): summing a push (sync: into the
 * round buffer; async: value + push into a new buffer), then an update. */
typedef struct push_job {
    srv_job j; /* first: the engine hands this back */
    srv_store *st;
    srv_entry *e;
    srv_req *r;     /* the push; owns its body */
    int mode;       /* enum sum_mode */
    uint8_t *dst;
    srv_buf *nb;    /* async: the new value (dst) */
    srv_buf *old;   /* the value (a reference): SUM_BASE's base, the update's weight */
    bool by_ref;
    srv_cma cma;    /* by_ref: the worker's proven memory, as checked on the loop */
    bool update;    /* then the optimizer (step prepared on the loop) */
    srv_upd_step step;
    int uerr;       /* the update could not be prepared: fail the round with why */
    int err;        /* errno of a failed read */
    uint64_t ns;
    char why[PROTO_ERRTEXT_MAX];
    wb_target *wb;  /* the round's last push: outputs to write as pieces are summed */
    int nwb;
    atomic_int perr; /* with wb: errno of the first failed read of a piece */
    uintptr_t *holds; /* batches of fused requests its end answers (st->hold) */
    int nholds;
} push_job;

/* One piece (elements lo..hi) of a push with write-backs: sum it, then
 * write the summed piece into each output while it is still in this core's
 * cache (the value is read from memory once instead of once per output, and
 * no job per output follows).  Same operation per element as sum_into on
 * the whole.  A reduction pool thread. */
static void fused_piece(const void *arg, uint64_t lo, uint64_t hi)
{
    push_job *p = (push_job *)arg;
    const srv_entry *e = p->e;
    size_t esz = kvs_dtype_size(e->dtype);
    uint64_t off = lo * esz, len = (hi - lo) * esz;
    srv_in body = in_of(p->r), piece = {NULL, NULL, 0};
    int zero = 0;
    if (body.data)
        piece.data = (const uint8_t *)body.data + off;
    int err = sum_into(NULL, e->dtype, p->dst + off, NULL, len, &piece,
                       p->by_ref ? &p->cma : NULL, p->r->h.cma_src + off, p->mode);
    if (err) {
        atomic_compare_exchange_strong(&p->perr, &zero, err);
        return;
    }
    for (int i = 0; i < p->nwb; i++) {
        wb_target *t = &p->wb[i];
        if (atomic_load(&t->err) == 0 && srv_cma_copy(NULL, &t->cma, 1, p->dst + off,
                                                      t->dst + off, len) != 0) {
            zero = 0;
            atomic_compare_exchange_strong(&t->err, &zero, errno ? errno : EIO);
        }
    }
}

static void push_run(srv_job *j)
{
    push_job *p = (push_job *)j;
    srv_entry *e = p->e;
    srv_in in = in_of(p->r);
    uint64_t t0 = clock_ns();
    if (p->nwb > 0) {
        size_t esz = kvs_dtype_size(e->dtype);
        red_pool_for(e->bytes >= DP_CMA_PAR_MIN ? p->st->pool : NULL, e->bytes / esz,
                     DP_CMA_PAR_CHUNK / esz, fused_piece, p);
        p->err = atomic_load(&p->perr);
    } else {
        p->err = sum_into(p->st->pool, e->dtype, p->dst, p->old ? p->old->data : NULL,
                          e->bytes, &in, p->by_ref ? &p->cma : NULL, p->r->h.cma_src, p->mode);
    }
    if (p->err == 0 && p->update)
        srv_upd_run(p->st->pool, &p->step, p->old->data, p->dst);
    p->ns = clock_ns() - t0;
}

/* A request among list (linked by next) by its seq, or NULL. */
static srv_req *find_seq(srv_req *list, uint64_t seq)
{
    while (list && list->seq != seq)
        list = list->next;
    return list;
}

/* The job of e's last push (r) summed the round and wrote it into the
 * outputs p->wb: mark their requests (still waiting, unless they failed
 * meanwhile) so that their replies say so instead of writing again. */
static void mark_written(srv_store *st, srv_entry *e, srv_req *r, const push_job *p)
{
    for (int i = 0; i < p->nwb; i++) {
        uint64_t seq = p->wb[i].seq;
        int err = atomic_load(&p->wb[i].err);
        srv_req *q = r->seq == seq ? r : find_seq(e->waiting, seq);
        if (q == NULL)
            q = find_seq(e->pulls, seq);
        if (q == NULL)
            continue; /* answered already (its worker left): nothing to say */
        q->h.cma_done = err ? -err : 1;
        if (!err)
            st->cma_fused++;
    }
}

/* The batches (srv_req.h.fuse) of the fused requests among those p's end
 * answers (see hold_answers), into out when not NULL; how many. */
static size_t fused_answered(const srv_entry *e, const srv_req *r, bool last, uintptr_t *out)
{
    size_t n = 0;
    if (r->h.fuse) {
        if (out)
            out[n] = r->h.fuse;
        n++;
    }
    for (const srv_req *q = last ? e->waiting : NULL; q; q = q->next)
        if (q->h.fuse) {
            if (out)
                out[n] = q->h.fuse;
            n++;
        }
    for (const srv_req *q = last ? e->pulls : NULL; q; q = q->next)
        if (q->h.fuse && q->h.round <= e->round + 1) {
            if (out)
                out[n] = q->h.fuse;
            n++;
        }
    return n;
}

/* p's end answers the fused requests among r, and when r completes the
 * round (last), the requests that completion answers (the round's pushes,
 * pulls of the next round): their batches hold their answers until then
 * (srv_hold_fn).  No memory for the list: nothing held. */
static void hold_answers(srv_store *st, srv_entry *e, srv_req *r, push_job *p, bool last)
{
    size_t n = st->hold ? fused_answered(e, r, last, NULL) : 0;
    if (n == 0 || (p->holds = malloc(n * sizeof *p->holds)) == NULL)
        return; /* none fused (no allocation), or no memory: nothing held */
    p->nholds = (int)fused_answered(e, r, last, p->holds);
    for (int i = 0; i < p->nholds; i++)
        st->hold(st->reply_arg, p->holds[i], 1);
}

/* p ended: its batches may send what they hold (before p's answers). */
static void release_answers(srv_store *st, push_job *p)
{
    for (int i = 0; i < p->nholds; i++)
        st->hold(st->reply_arg, p->holds[i], -1);
    free(p->holds);
    p->holds = NULL;
    p->nholds = 0;
}

static void entry_resume(srv_store *st, srv_entry *e, bool completed);
static void async_done(srv_store *st, srv_entry *e, srv_req *r, srv_buf *nb, int err,
                       int uerr, const char *why);

static void push_done(srv_job *j, bool cancelled)
{
    push_job *p = (push_job *)j;
    srv_store *st = p->st;
    srv_entry *e = p->e;
    srv_req *r = p->r;
    bool completed = false;
    char text[300];
    srv_buf_unref(p->old);
    e->busy = false;
    st->busy--;
    release_answers(st, p);
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
        if (p->nwb > 0 && e->npushed + 1 == st->num_workers)
            mark_written(st, e, r, p);
        completed = push_added(st, e, r, p->ns, p->uerr, p->why);
    }
    free(p->wb);
    free(p);
    entry_resume(st, e, completed);
}

/* The pool for sums and updates on the loop: none while job threads exist
 * (the loop then only works on entries under DP_OFFLOAD_MIN, quicker alone
 * than waiting for the pool that a job, at KVS_JOB_NICE, may be holding). */
static red_pool *loop_pool(const srv_store *st)
{
    return st->jobs ? NULL : st->pool;
}

/* Can e's work go to a job? */
static bool offload(const srv_store *st, const srv_entry *e)
{
    return st->jobs != NULL && e->bytes >= DP_OFFLOAD_MIN;
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

/* Will q's reply write e's value into its worker's memory (a pull or
 * pushpull by reference whose worker is still proven)? */
static bool wants_write(srv_store *st, const srv_entry *e, const srv_req *q)
{
    const proto_hdr *h = &q->h;
    return (h->type == PROTO_PULL || h->type == PROTO_PUSHPULL) && (h->flags & PROTO_F_CMA) &&
           h->cma_dst && h->count * kvs_dtype_size(e->dtype) == e->bytes &&
           st->cma && q->wrank >= 0 && q->wrank < st->num_workers &&
           srv_cma_alive(&st->cma[q->wrank]);
}

static void add_target(srv_store *st, const srv_entry *e, push_job *p, const srv_req *q)
{
    if (!wants_write(st, e, q))
        return;
    wb_target *t = &p->wb[p->nwb++];
    t->cma = st->cma[q->wrank];
    t->dst = q->h.cma_dst;
    t->seq = q->seq;
    atomic_init(&t->err, 0);
}

/* The job of r, the push that completes e's round, also writes the round's
 * value into the outputs of the requests that completion answers (r and the
 * round's other pushes, pulls waiting for this round) that take it by
 * reference: p->wb.  Only a plain sum (no optimizer: its update needs the
 * whole sum first) of a body in one piece or by reference.  No memory for
 * the list: none (their replies write as before). */
static void write_backs(srv_store *st, srv_entry *e, srv_req *r, push_job *p)
{
    int n = 1;
    if (r->nframes > 1 || !st->cma)
        return;
    for (srv_req *q = e->waiting; q; q = q->next)
        n++;
    for (srv_req *q = e->pulls; q; q = q->next)
        n++;
    if ((p->wb = calloc((size_t)n, sizeof *p->wb)) == NULL)
        return;
    for (srv_req *q = e->waiting; q; q = q->next)
        add_target(st, e, p, q);
    add_target(st, e, p, r);
    for (srv_req *q = e->pulls; q; q = q->next)
        if (q->h.round == e->round + 1)
            add_target(st, e, p, q);
    if (p->nwb == 0) {
        free(p->wb);
        p->wb = NULL;
    }
}

/* Start r's push (sync mode) into the current round of e (not busy): sum it
 * here, or in a job (then e is busy until it is done).  in: r's body (NULL:
 * none; r may own it already).  True if the round completed here. */
static bool start_push(srv_store *st, srv_entry *e, srv_req *r, const srv_in *in)
{
    uint64_t t0 = clock_ns();
    bool first = e->npushed == 0, last = e->npushed + 1 == st->num_workers;
    bool by_ref = (r->h.flags & PROTO_F_CMA) != 0;
    bool upd = last && updating(st);
    int mode = first ? SUM_COPY : SUM_ADD;
    char why[PROTO_ERRTEXT_MAX] = "";
    e->pushed[r->wrank] = 1;
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
    if (offload(st, e) && (mode != SUM_NONE || upd)) {
        push_job *p = calloc(1, sizeof *p);
        if (p == NULL || req_keep(r, in, e->bytes) != 0) {
            free(p);
            push_failed(st, e, r, KVS_ENOMEM, "server out of memory");
            return false;
        }
        *p = (push_job){.j = {push_run, push_done, r->h.priority, 0, NULL}, .st = st, .e = e,
                        .r = r, .mode = mode, .dst = e->acc->data, .by_ref = by_ref};
        if (by_ref)
            p->cma = st->cma[r->wrank];
        if (upd) {
            p->uerr = srv_upd_prepare(st->optim, e->key, e->dtype, e->count, &e->upd, &p->step,
                                      p->why, sizeof p->why);
            p->update = p->uerr == 0;
            p->old = e->value;
            atomic_fetch_add(&e->value->refs, 1);
        } else if (last) {
            write_backs(st, e, r, p);
        }
        if (last)
            hold_answers(st, e, r, p, true);
        e->busy = true;
        st->busy++;
        srv_jobs_submit(st->jobs, &p->j);
        return false;
    }
    srv_in none = {NULL, NULL, 0};
    int err = sum_into(loop_pool(st), e->dtype, e->acc->data, NULL, e->bytes, in ? in : &none,
                       by_ref ? &st->cma[r->wrank] : NULL, r->h.cma_src, mode);
    if (err) {
        snprintf(why, sizeof why, "cannot read %llu bytes of worker %d's memory: %s",
                 (unsigned long long)e->bytes, r->wrank, strerror(err));
        push_failed(st, e, r, KVS_EINVAL, why);
        return false;
    }
    int uerr = 0;
    if (upd) /* the sum is the gradient: acc becomes the new weight */
        uerr = srv_upd_apply(st->optim, loop_pool(st), e->key, e->dtype, e->count, &e->upd,
                             e->value->data, e->acc->data, why, sizeof why);
    return push_added(st, e, r, clock_ns() - t0, uerr, why);
}

static void check_stuck(srv_store *st, srv_entry *e);

/* After a round completed: pushes deferred for the new round join it (until
 * one of them starts a job). */
static void run_deferred(srv_store *st, srv_entry *e)
{
    for (;;) {
        srv_req **pp = &e->deferred, *r = NULL;
        while (*pp && ((*pp)->h.round != e->round || e->pushed[(*pp)->wrank]))
            pp = &(*pp)->next;
        if ((r = *pp) == NULL)
            break;
        *pp = r->next;
        e->deferred_tail = &e->deferred;
        while (*e->deferred_tail)
            e->deferred_tail = &(*e->deferred_tail)->next;
        srv_in in = in_of(r);
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
    bool by_ref = (r->h.flags & PROTO_F_CMA) != 0;
    srv_in none = {NULL, NULL, 0};
    e->pushed[r->wrank] = 1; /* (cleared by push_failed) */
    if (!by_ref_ok(st, e, r))
        return;
    e->pushed[r->wrank] = 0;
    if (!updating(st) && !offload(st, e) && atomic_load(&e->value->refs) == 1) {
        int err = sum_into(loop_pool(st), e->dtype, e->value->data, NULL, e->bytes, in ? in : &none,
                           by_ref ? &st->cma[r->wrank] : NULL, r->h.cma_src, SUM_ADD);
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
        uerr = srv_upd_prepare(st->optim, e->key, e->dtype, e->count, &e->upd, &step, why,
                               sizeof why);
    if (offload(st, e)) {
        push_job *p = calloc(1, sizeof *p);
        if (p == NULL || req_keep(r, in, e->bytes) != 0) {
            free(p);
            srv_buf_unref(nb);
            reply_err(st, r->ident, r->ident_len, &r->h, KVS_ENOMEM, "server out of memory");
            req_free(r);
            return;
        }
        *p = (push_job){.j = {push_run, push_done, r->h.priority, 0, NULL}, .st = st, .e = e,
                        .r = r, .mode = mode, .dst = nb->data, .nb = nb, .old = e->value,
                        .by_ref = by_ref, .update = updating(st) && uerr == 0, .step = step,
                        .uerr = uerr};
        snprintf(p->why, sizeof p->why, "%s", why);
        atomic_fetch_add(&e->value->refs, 1);
        if (by_ref)
            p->cma = st->cma[r->wrank];
        hold_answers(st, e, r, p, false);
        e->busy = true;
        st->busy++;
        srv_jobs_submit(st->jobs, &p->j);
        return;
    }
    int err = uerr ? 0 : sum_into(loop_pool(st), e->dtype, nb->data, e->value->data, e->bytes,
                                  in ? in : &none, by_ref ? &st->cma[r->wrank] : NULL,
                                  r->h.cma_src, mode);
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

/* A push r (with body in) for e, which is not busy. */
static void handle_push(srv_store *st, srv_entry *e, srv_req *r, const srv_in *in)
{
    const proto_hdr *h = &r->h;
    if (e->async) {
        start_async(st, e, r, in);
        return;
    }
    if (h->round < e->round || (h->round == e->round && e->pushed[r->wrank])) {
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
static void entry_resume(srv_store *st, srv_entry *e, bool completed)
{
    if (completed)
        run_deferred(st, e);
    check_stuck(st, e);
    while (!e->busy && e->backlog) {
        srv_req *r = e->backlog;
        e->backlog = r->next;
        if (e->backlog == NULL)
            e->backlog_tail = &e->backlog;
        r->next = NULL;
        srv_in in = in_of(r);
        if (st->broken) {
            reply_err(st, r->ident, r->ident_len, &r->h, KVS_EPEERDEAD, "%s", st->broken_text);
            req_free(r);
        } else if (r->h.type == PROTO_INIT) {
            handle_init(st, r->ident, r->ident_len, r->wrank, &r->h, &in);
            req_free(r);
        } else {
            handle_push(st, e, r, &in);
        }
    }
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

void srv_store_handle(srv_store *st, const uint8_t *ident, size_t ident_len, int wrank,
                      const proto_hdr *h, const srv_in *in)
{
    srv_entry *e;
    srv_req *r;
    if (st->broken) {
        reply_err(st, ident, ident_len, h, KVS_EPEERDEAD, "%s", st->broken_text);
        return;
    }
    if (st->ctl && srv_ctl_hold(st->ctl, ident, ident_len, wrank, h, in))
        return; /* a save or load is running: handled when it is done */
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
        if ((r = req_new(ident, ident_len, wrank, h)) == NULL) {
            reply_err(st, ident, ident_len, h, KVS_ENOMEM, "server out of memory");
            return;
        }
        if (e->busy)
            to_backlog(st, e, r, in);
        else
            handle_push(st, e, r, in);
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
            d->deferred += list_len(e->deferred) + list_len(e->backlog);
        }
    }
    for (size_t i = 0; i < st->pending_inits.cap; i++)
        if (st->pending_inits.used[i] == 1)
            d->inits += list_len(st->pending_inits.vals[i]);
}
