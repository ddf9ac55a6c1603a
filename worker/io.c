/* io.c - libkvs's I/O thread: registration, sends, replies, failures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/datapath.h"
#include "common/err.h"
#include "common/log.h"
#include "common/sizes.h"
#include "worker/metrics.h"
#include "worker/trace.h"
#include "net/auth.h"
#include "worker/wrk_int.h"


static void io_fail(kvs_store *s, int err, const char *text, int dead_server, bool force);
static void close_idle_servers(kvs_store *s);
static void fail_held(kvs_store *s, int err, const char *text);
static void req_fail(kvs_store *s, wrk_req *q, int err, const char *text);
static void gate_fail(kvs_store *s, int err, const char *text);

static void on_grace(uv_timer_t *t)
{
    kvs_store *s = t->data;
    char text[512];
    pthread_mutex_lock(&s->mu);
    int err = s->fatal ? s->fatal : KVS_EPEERDEAD;
    snprintf(text, sizeof text, "%s", s->fatal_text);
    pthread_mutex_unlock(&s->mu);
    io_fail(s, err, text, -1, true);
}

/* Fail every request in flight and everything queued (I/O thread).
 *
 * A request sent by reference names memory of the user that a same-host
 * server writes into when it answers; failing it early would let the user
 * free that memory while the server may still write.  So unless force, such
 * requests to a server that is not known dead stay until that server answers
 * (it fails its own waiting requests when it hears of the death), or until
 * PS_HEARTBEAT_TIMEOUT + 2 s have passed, by when a server that lost the
 * scheduler has exited. */
static void io_fail(kvs_store *s, int err, const char *text, int dead_server, bool force)
{
    wrk_reqmap keep;
    bool kept = false;
    wrk_reqmap_init(&keep);
    pthread_mutex_lock(&s->mu);
    if (s->fatal == 0 && err != KVS_ECLOSED)
        LOG(LOG_WARN, s->who, "job", "%s", text);
    wrk_fail_all_locked(s, err, text);
    wrk_reqmap reqs = s->reqs;
    wrk_reqmap_init(&s->reqs);
    hmap_fini(&s->batches); /* every record is failed below */
    hmap_init(&s->batches);
    pthread_mutex_unlock(&s->mu);
    gate_fail(s, err, text);
    size_t it = 0;
    wrk_req *q;
    while ((q = wrk_reqmap_next(&reqs, &it)) != NULL) {
        if (q->op == NULL) /* HELLOs have none */
            continue;
        if (!force && q->cma_out && q->server != dead_server &&
            wrk_reqmap_put(&keep, q->req_id, q) == 0) {
            kept = true;
            continue;
        }
        wrk_op_release(q->op->store, q->op, err, text);
    }
    wrk_reqmap_fini(&reqs);
    for (int r = 0; s->pq && r < s->num_servers; r++) {
        wrk_req *q;
        while ((q = wrk_pq_pop(&s->pq[r])) != NULL)
            req_fail(s, q, err, text);
    }
    s->reqs = keep;
    wrk_met_depth(s);
    fail_held(s, err, text);
    if (err != KVS_ECLOSED) {
        s->io_failed = true;
        close_idle_servers(s);
    }
    if (kept && !s->grace_on) {
        s->grace_on = true;
        uv_timer_start(&s->grace, on_grace, (uint64_t)(s->c.hb_timeout_s * 1000) + 2000, 0);
    }
}

/* Once the job has failed, close the connection to every server that has
 * no request left in the map: ZeroMQ then drops what it still queues for an
 * unreachable server and releases the zero-copy frames that point at user
 * memory, so the operations holding them complete (with the error). */
static void close_idle_servers(kvs_store *s)
{
    for (int r = 0; s->servers && r < s->c.num_server; r++) {
        if (s->servers[r] == NULL)
            continue;
        bool busy = false;
        size_t it = 0;
        wrk_req *q;
        while (!busy && (q = wrk_reqmap_next(&s->reqs, &it)) != NULL)
            busy = q->server == r;
        if (busy)
            continue;
        if (s->mons)
            net_mon_free(s->mons[r]), s->mons[r] = NULL;
        net_sock_free(s->servers[r]);
        s->servers[r] = NULL;
    }
}

static void io_fail_all(kvs_store *s, int err, const char *text)
{
    io_fail(s, err, text, -1, false);
}

/* Fail a request that was never handed to ZeroMQ: its zero-copy frame (if
 * it counts one) will never be released, so release it too. */
static void req_fail(kvs_store *s, wrk_req *q, int err, const char *text)
{
    wrk_req_drop(s, q, err, text);
}

/* Fail every request held for a HELLO answer. */
static void fail_held(kvs_store *s, int err, const char *text)
{
    for (int r = 0; s->held_head && r < s->c.num_server; r++) {
        wrk_req *q = s->held_head[r];
        s->held_head[r] = s->held_tail[r] = NULL;
        while (q) {
            wrk_req *n = q->hnext;
            req_fail(s, q, err, text);
            q = n;
        }
    }
}

/* ---- p3 credits ----
 * With DMLC_PS_VAN_TYPE=p3 and KVS_P3_CREDIT > 0, a worker hands ZeroMQ at
 * most KVS_P3_CREDIT bytes for one server that ZeroMQ has not yet written to
 * the socket; everything else waits in the server's priority queue (pq.h),
 * so a later high-priority request overtakes all that is queued.  ZeroMQ's
 * thread returns credit as it releases each body, and wakes the loop. */

typedef struct wrk_credit {
    kvs_store *s;
    int server;
    uint64_t bytes;
} wrk_credit;

static void credit_return(kvs_store *s, int r, uint64_t bytes)
{
    atomic_fetch_sub(&s->inflight[r], bytes);
    pthread_mutex_lock(&s->mu);
    if (s->credit_live)
        uv_async_send(&s->wake);
    pthread_mutex_unlock(&s->mu);
}

static void credit_free(void *data, void *hint)
{
    wrk_credit *c = hint;
    (void)data;
    credit_return(c->s, c->server, c->bytes);
    free(c);
}

/* A message body of len bytes for server r; with credits, one whose release
 * by ZeroMQ returns them.  0 or KVS_ENOMEM. */
static int body_new(kvs_store *s, int r, zmq_msg_t *m, uint64_t len)
{
    if (s->inflight == NULL)
        return zmq_msg_init_size(m, len) == 0 ? 0 : KVS_ENOMEM;
    wrk_credit *c = malloc(sizeof *c + len);
    if (c == NULL)
        return KVS_ENOMEM;
    *c = (wrk_credit){s, r, len};
    if (zmq_msg_init_data(m, c + 1, len, credit_free, c) != 0) {
        free(c);
        return KVS_ENOMEM;
    }
    atomic_fetch_add(&s->inflight[r], len);
    return 0;
}

static void zc_free(void *data, void *hint)
{
    wrk_req *q = hint;
    kvs_store *s = q->op->store;
    int r = q->server;
    uint64_t n = q->h.body_len;
    bool credited = q->credited;
    (void)data;
    /* ZeroMQ's thread: the frame that pointed at user memory is released */
    wrk_op_release(s, q->op, 0, NULL);
    if (credited)
        credit_return(s, r, n);
}

/* A timeline event about request q (KVS_TRACE). */
static void trace_req(kvs_store *s, const wrk_req *q, int kind, uint64_t a, uint64_t b,
                      uint64_t c, int status)
{
    wrk_tev ev = {.ts_ns = clock_ns(), .kind = (uint16_t)kind, .op = q->op->trace_id,
                  .key = q->h.key, .round = q->h.round, .a = a, .b = b, .c = c,
                  .server = q->server, .status = status, .part = q->h.part,
                  .optype = q->h.type};
    wrk_trace_add(s->trace, &ev);
}

/* The reply to traced request q arrived: "replied", and "done" when it was
 * the last part of its key (I/O thread, before the op is released). */
static void trace_replied(kvs_store *s, const wrk_req *q, int status)
{
    if (!s->trace || q->op == NULL || !q->op->trace_id)
        return;
    trace_req(s, q, TEV_REPLIED, 0, 0, 0, status);
    if (q->op->tleft && --q->op->tleft[q->kidx] == 0)
        trace_req(s, q, TEV_DONE, 0, 0, 0, status);
}

/* Bytes of q's data. */
static uint64_t req_bytes(const wrk_req *q)
{
    return q->h.count * kvs_dtype_size((kvs_dtype)q->h.dtype);
}

/* q carries or receives data of at least DP_CMA_MIN bytes: it goes by
 * reference if its server is on this host. */
static bool big_for_ref(const wrk_req *q)
{
    return req_bytes(q) >= DP_CMA_MIN && (q->send || q->nouts > 0);
}

/* q's data goes by reference: its server is on this host and proved that it
 * can copy our memory (HELLO answered), and big_for_ref(q). */
static bool goes_by_ref(const kvs_store *s, const wrk_req *q)
{
    return s->cma && q->server >= 0 && q->server < s->num_servers && s->cma[q->server] &&
           big_for_ref(q);
}

/* q by reference: h becomes its header (PROTO_F_CMA, a descriptor body) and
 * desc the descriptor naming our buffers (its data, its output). */
static void ref_desc(wrk_req *q, proto_hdr *h, uint8_t *desc)
{
    *h = q->h;
    h->flags |= PROTO_F_CMA;
    h->body_len = PROTO_CMA_LEN;
    le_put64(desc, (uint64_t)(uintptr_t)q->send);
    le_put64(desc + 8, q->nouts > 0 ? (uint64_t)(uintptr_t)q->outs[0] : 0);
    q->cma_out = q->nouts > 0;
}

static void send_req(kvs_store *s, wrk_req *q)
{
    char text[256];
    q->req_id = ++s->next_req;
    q->h.req_id = q->req_id;
    q->h.sender = s->node_id;
    if (q->server < 0) {
        if (wrk_reqmap_put(&s->reqs, q->req_id, q) != 0) {
            wrk_op_release(s, q->op, KVS_ENOMEM, "out of memory");
            return;
        }
        if (q->h.type == PROTO_EXIT)
            s->leaving = true; /* servers may close their connections from now on */
        net_link_send(s->link, &q->h, NULL);
        return;
    }
    if (q->server >= s->num_servers || s->servers[q->server] == NULL) {
        snprintf(text, sizeof text, "no connection to server %d", q->server);
        req_fail(s, q, KVS_ENET, text);
        return;
    }
    uint64_t bytes = req_bytes(q);
    if (s->hello_wait && s->hello_wait[q->server] && big_for_ref(q)) {
        /* its path (direct copy or socket) depends on the HELLO answer: wait for
         * it (2 round trips), rather than race the proof with a big message */
        q->hnext = NULL;
        if (s->held_tail[q->server])
            s->held_tail[q->server]->hnext = q;
        else
            s->held_head[q->server] = q;
        s->held_tail[q->server] = q;
        return;
    }
    if (wrk_reqmap_put(&s->reqs, q->req_id, q) != 0) {
        req_fail(s, q, KVS_ENOMEM, "out of memory");
        return;
    }
    zmq_msg_t body, *bp = NULL;
    bool traced = s->trace && q->op && q->op->trace_id;
    if (traced)
        q->h.flags |= PROTO_F_TRACE; /* the server reports its timing */
    if (goes_by_ref(s, q)) {
        /* same host: the server copies from and into our memory itself */
        proto_hdr h;
        zmq_msg_init_size(&body, PROTO_CMA_LEN);
        ref_desc(q, &h, zmq_msg_data(&body));
        bool counted_zc = q->zc;
        q->t_sent = clock_ns();
        wrk_met_sent(s, q, true, bytes);
        if (traced)
            trace_req(s, q, TEV_SENT, q->send ? bytes : 0, 1, 0, 0);
        if (net_send(s->servers[q->server], NULL, 0, &h, &body) != 0) {
            wrk_reqmap_del(&s->reqs, q->req_id);
            snprintf(text, sizeof text, "send to server %d failed", q->server);
            wrk_op_release(s, q->op, KVS_ENET, text);
        }
        zmq_msg_close(&body);
        if (counted_zc) /* no frame will be released for this one */
            wrk_op_release(s, q->op, 0, NULL);
        return;
    }
    if (q->send && q->h.body_len > 0) {
        if (q->zc) {
            q->credited = s->inflight != NULL;
            if (q->credited)
                atomic_fetch_add(&s->inflight[q->server], q->h.body_len);
            zmq_msg_init_data(&body, (void *)q->send, q->h.body_len, zc_free, q);
        } else if (body_new(s, q->server, &body, q->h.body_len) != 0) {
            wrk_reqmap_del(&s->reqs, q->req_id);
            wrk_op_release(s, q->op, KVS_ENOMEM, "out of memory");
            return;
        } else {
            memcpy(zmq_msg_data(&body), q->send, q->h.body_len);
        }
        bp = &body;
    } else {
        q->h.body_len = 0;
    }
    LOG(LOG_DEBUG, s->who, "net", "%s key %llu part %u round %llu to server %d",
        proto_type_name(q->h.type), (unsigned long long)q->h.key, q->h.part,
        (unsigned long long)q->h.round, q->server);
    q->t_sent = clock_ns();
    wrk_met_sent(s, q, false, 0);
    if (traced)
        trace_req(s, q, TEV_SENT, bp ? q->h.body_len : 0, 0, 0, 0);
    if (net_send(s->servers[q->server], NULL, 0, &q->h, bp) != 0) {
        wrk_reqmap_del(&s->reqs, q->req_id);
        snprintf(text, sizeof text, "send to server %d failed", q->server);
        wrk_op_release(s, q->op, KVS_ENET, text);
    }
    if (bp)
        zmq_msg_close(bp);
}

/* ---- fusion: small parts for one server leave together ----
 * Parts below DP_FUSE_MAX bytes queued in one wake-up are collected per
 * server and sent as FUSED messages of at most KVS_FUSE_BYTES.  Each part
 * keeps its own req_id (the FUSED's req_id + 1, + 2, ...) and its answer
 * comes back as a record of a FUSED_REPLY, handled like a lone REPLY.
 * Parts that go by reference (goes_by_ref) join them as records of a
 * descriptor only (PROTO_F_CMA): the message is then a FUSED_REF, and the
 * server reads and writes their data in our memory itself. */

static bool fusable(const kvs_store *s, const wrk_req *q)
{
    /* a part whose path the HELLO answer decides waits for it in send_req
     * (parts from DP_CMA_MIN up; those under DP_FUSE_MAX would else leave
     * fused inline before the proof) */
    return s->c.fuse_bytes > 0 && q->op != NULL && q->op->type != WRK_OP_CTL &&
           q->server >= 0 && q->server < s->num_servers &&
           !(s->hello_wait && s->hello_wait[q->server] && big_for_ref(q)) &&
           (req_bytes(q) < DP_FUSE_MAX || goes_by_ref(s, q));
}

static uint64_t fused_len(const wrk_req *q)
{
    return proto_fused_rec_len(q->fref ? PROTO_CMA_LEN : q->send ? q->h.body_len : 0);
}

/* Fail requests that were to leave fused (none lent ZeroMQ a frame: a
 * zero-copy body by reference is released with its reply). */
static void fuse_fail(kvs_store *s, wrk_req **reqs, size_t n, int err, const char *text)
{
    for (size_t i = 0; i < n; i++)
        wrk_req_drop(s, reqs[i], err, text);
}

static void fuse_flush(kvs_store *s, int r)
{
    wrk_fuse *f = &s->fuse[r];
    size_t n = f->n, k;
    uint64_t bytes = f->bytes, off = 0, cid;
    bool ref = f->nref > 0;
    char text[128];
    zmq_msg_t body;
    f->n = 0;
    f->bytes = 0;
    f->nref = 0;
    if (n == 0)
        return;
    if (n == 1) {
        f->reqs[0]->fref = false;
        send_req(s, f->reqs[0]);
        return;
    }
    if (s->servers == NULL || s->servers[r] == NULL) {
        snprintf(text, sizeof text, "no connection to server %d", r);
        fuse_fail(s, f->reqs, n, KVS_ENET, text);
        return;
    }
    cid = ++s->next_req;
    if (body_new(s, r, &body, bytes) != 0) {
        fuse_fail(s, f->reqs, n, KVS_ENOMEM, "out of memory");
        return;
    }
    if (hmap_put(&s->batches, cid, (void *)(uintptr_t)(((uint64_t)n << 32) | n)) != 0) {
        zmq_msg_close(&body);
        fuse_fail(s, f->reqs, n, KVS_ENOMEM, "out of memory");
        return;
    }
    uint8_t *p = zmq_msg_data(&body);
    int prio = f->reqs[0]->h.priority;
    uint64_t now = clock_ns();
    for (k = 0; k < n; k++) {
        wrk_req *q = f->reqs[k];
        q->req_id = ++s->next_req;
        q->h.req_id = q->req_id;
        q->h.sender = s->node_id;
        q->batch = cid;
        if (q->send == NULL)
            q->h.body_len = 0;
        if (wrk_reqmap_put(&s->reqs, q->req_id, q) != 0)
            break;
        if (s->trace && q->op->trace_id)
            q->h.flags |= PROTO_F_TRACE; /* the server sends this record's TIMING */
        if (q->fref) { /* by reference: the record names our buffers */
            proto_hdr rh;
            uint8_t desc[PROTO_CMA_LEN];
            ref_desc(q, &rh, desc);
            off += proto_fused_put(p + off, &rh, desc);
        } else {
            off += proto_fused_put(p + off, &q->h, q->send);
        }
        if (q->h.priority > prio)
            prio = q->h.priority;
        /* metrics and timeline */
        q->t_sent = now;
        wrk_met_sent(s, q, q->fref, q->fref ? req_bytes(q) : 0);
        if (s->trace && q->op->trace_id)
            trace_req(s, q, TEV_SENT, q->fref ? (q->send ? req_bytes(q) : 0)
                                               : q->send ? q->h.body_len : 0,
                      q->fref ? 3 : 2, 0, 0);
    }
    proto_hdr h = {.type = ref ? PROTO_FUSED_REF : PROTO_FUSED, .sender = s->node_id,
                   .req_id = cid, .priority = prio, .count = n, .body_len = off};
    if (k < n || off != bytes || net_send(s->servers[r], NULL, 0, &h, &body) != 0) {
        for (size_t j = 0; j < k; j++)
            wrk_reqmap_del(&s->reqs, f->reqs[j]->req_id);
        hmap_del(&s->batches, cid);
        snprintf(text, sizeof text, k < n ? "out of memory" : "send to server %d failed", r);
        fuse_fail(s, f->reqs, n, k < n ? KVS_ENOMEM : KVS_ENET, text);
        zmq_msg_close(&body);
        return;
    }
    zmq_msg_close(&body);
    /* a fused record lends ZeroMQ no frame (by reference, or copied into
     * the message): the release its zero-copy body was counted for happens
     * now (as in send_req) */
    for (k = 0; k < n; k++)
        if (f->reqs[k]->zc)
            wrk_op_release(s, f->reqs[k]->op, 0, NULL);
}

static void fuse_flush_all(kvs_store *s)
{
    for (int r = 0; s->fuse && r < s->num_servers; r++)
        fuse_flush(s, r);
}

/* Send q now, or keep it for this server's next FUSED message. */
static void dispatch(kvs_store *s, wrk_req *q)
{
    if (!fusable(s, q)) {
        /* p3: a part never overtakes a fused one queued before it; nor does a
         * collective (ctl.c: a save must come after every earlier push) */
        if ((s->routing.p3 || (q->op && q->op->type == WRK_OP_CTL)) && s->fuse &&
            q->server >= 0 && q->server < s->num_servers)
            fuse_flush(s, q->server);
        send_req(s, q);
        return;
    }
    if (s->fuse == NULL && (s->fuse = calloc((size_t)s->num_servers, sizeof *s->fuse)) == NULL) {
        send_req(s, q);
        return;
    }
    wrk_fuse *f = &s->fuse[q->server];
    q->fref = goes_by_ref(s, q);
    uint64_t len = fused_len(q);
    if (f->n > 0 && f->bytes + len > s->c.fuse_bytes)
        fuse_flush(s, q->server);
    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 64;
        wrk_req **nr = realloc(f->reqs, cap * sizeof *nr);
        if (nr == NULL) {
            q->fref = false;
            send_req(s, q);
            return;
        }
        f->reqs = nr;
        f->cap = cap;
    }
    f->reqs[f->n++] = q;
    f->bytes += len;
    f->nref += q->fref;
}

/* A record of a FUSED message was answered (or failed). */
static void batch_done(kvs_store *s, uint64_t cid)
{
    uintptr_t v = (uintptr_t)hmap_get(&s->batches, cid);
    if (v == 0)
        return;
    if ((v & 0xffffffffu) <= 1)
        hmap_del(&s->batches, cid);
    else
        hmap_put(&s->batches, cid, (void *)(v - 1)); /* exists: no allocation */
}

/* A server refused a whole FUSED message: fail the records still waiting. */
static void batch_fail(kvs_store *s, uint64_t cid, int err, const char *text)
{
    uintptr_t v = (uintptr_t)hmap_del(&s->batches, cid);
    uint64_t n = (uint64_t)v >> 32;
    for (uint64_t id = cid + 1; id <= cid + n; id++) {
        wrk_req *q = wrk_reqmap_del(&s->reqs, id);
        if (q && q->op)
            wrk_op_release(s, q->op, err, text);
    }
}

static int cmp_prio(const void *a, const void *b)
{
    const wrk_req *x = *(wrk_req *const *)a, *y = *(wrk_req *const *)b;
    if (x->h.priority != y->h.priority)
        return x->h.priority > y->h.priority ? -1 : 1;
    return x->op == y->op ? (x < y ? -1 : 1) : 0;
}

/* p3 with credits: the queues and counters, made on first use. */
static bool p3_credits(kvs_store *s)
{
    if (!s->routing.p3 || s->c.p3_credit == 0 || s->num_servers <= 0)
        return false;
    if (s->pq)
        return true;
    s->pq = calloc((size_t)s->num_servers, sizeof *s->pq);
    s->inflight = calloc((size_t)s->num_servers, sizeof *s->inflight);
    if (s->pq == NULL || s->inflight == NULL) {
        free(s->pq);
        free((void *)s->inflight);
        s->pq = NULL;
        s->inflight = NULL;
        return false;
    }
    pthread_mutex_lock(&s->mu);
    s->credit_live = true;
    pthread_mutex_unlock(&s->mu);
    return true;
}

/* Send server r's queued requests, highest priority first, while it has
 * credit (parts waiting to be fused count as sent). */
static void p3_pump(kvs_store *s, int r)
{
    wrk_req *q;
    while (atomic_load(&s->inflight[r]) + (s->fuse ? s->fuse[r].bytes : 0) < s->c.p3_credit &&
           (q = wrk_pq_pop(&s->pq[r])) != NULL)
        dispatch(s, q);
    if (s->fuse)
        fuse_flush(s, r);
}

/* ---- gated ops (op.h): requests leave as the comm layer stages them ---- */

/* A ready request of a gated op: into its server's p3 queue, or on. */
static void gate_submit(kvs_store *s, wrk_req *q)
{
    if (p3_credits(s) && q->server >= 0 && q->server < s->num_servers &&
        wrk_pq_push(&s->pq[q->server], q, q->h.priority) == 0)
        return;
    dispatch(s, q);
}

/* Move the gated ops of the list ops to s->gated; returns the others. */
static wrk_op *gate_take(kvs_store *s, wrk_op *ops)
{
    wrk_op *keep = NULL, **kt = &keep, **gt = &s->gated;
    while (*gt)
        gt = &(*gt)->gnext;
    for (wrk_op *op = ops, *next; op; op = next) {
        next = op->qnext;
        op->qnext = NULL;
        if (op->gated) {
            op->gnext = NULL;
            *gt = op;
            gt = &op->gnext;
        } else {
            *kt = op;
            kt = &op->qnext;
        }
    }
    return keep;
}

/* Hand on what each gated op has made ready.  An op leaves the list when
 * its last request is handed on; after that it may complete and be freed
 * at any time, so it is not touched again. */
static void gate_pump(kvs_store *s)
{
    wrk_op **pp = &s->gated;
    while (*pp) {
        wrk_op *op = *pp;
        pthread_mutex_lock(&s->mu);
        size_t ready = op->ready, cut = op->cut;
        int cut_err = op->cut_err;
        pthread_mutex_unlock(&s->mu);
        wrk_req *reqs = op->reqs;
        size_t i = op->sent;
        op->sent = ready;
        if (ready == op->nreqs)
            *pp = op->gnext;
        else
            pp = &op->gnext;
        for (; i < ready; i++) {
            if (i >= cut)
                req_fail(s, &reqs[i], cut_err, "staging this request's data failed");
            else
                gate_submit(s, &reqs[i]);
        }
    }
}

/* The job failed: drop every request of a gated op not handed on yet (the
 * op itself lives on until its stager lets go of it). */
static void gate_fail(kvs_store *s, int err, const char *text)
{
    wrk_op *op = s->gated;
    s->gated = NULL;
    while (op) {
        wrk_op *next = op->gnext;
        size_t i = op->sent, n = op->nreqs;
        op->sent = n;
        for (; i < n; i++)
            req_fail(s, &op->reqs[i], err, text);
        op = next;
    }
}

static void on_wake(uv_async_t *h)
{
    kvs_store *s = h->data;
    wrk_op *ops;
    bool stop;
    pthread_mutex_lock(&s->mu);
    ops = s->q_head;
    s->q_head = s->q_tail = NULL;
    stop = s->stop;
    pthread_mutex_unlock(&s->mu);

    ops = gate_take(s, ops);
    if (s->gated)
        gate_pump(s);

    if (ops && p3_credits(s)) {
        for (wrk_op *op = ops, *next; op; op = next) {
            next = op->qnext;
            for (size_t i = 0; i < op->nreqs; i++) {
                wrk_req *q = &op->reqs[i];
                if (q->server < 0 || q->server >= s->num_servers ||
                    wrk_pq_push(&s->pq[q->server], q, q->h.priority) != 0)
                    send_req(s, q);
            }
        }
        ops = NULL;
    }
    if (s->pq)
        for (int r = 0; r < s->num_servers; r++)
            p3_pump(s, r);
    if (s->routing.p3 && ops && ops->qnext) {
        /* p3: everything queued leaves in priority order (stable per op) */
        size_t n = 0, k = 0;
        for (wrk_op *op = ops; op; op = op->qnext)
            n += op->nreqs;
        wrk_req **all = malloc(n * sizeof *all);
        if (all) {
            for (wrk_op *op = ops; op; op = op->qnext)
                for (size_t i = 0; i < op->nreqs; i++)
                    all[k++] = &op->reqs[i];
            qsort(all, n, sizeof *all, cmp_prio);
            for (size_t i = 0; i < n; i++)
                dispatch(s, all[i]);
            free(all);
            ops = NULL;
        }
    }
    while (ops) {
        wrk_op *next = ops->qnext; /* read first: the op may complete and be freed */
        size_t nreqs = ops->nreqs;
        wrk_req *reqs = ops->reqs;
        for (size_t i = 0; i < nreqs; i++)
            dispatch(s, &reqs[i]);
        ops = next;
    }
    fuse_flush_all(s);
    if (stop)
        uv_stop(&s->loop);
}

void wrk_io_submit(kvs_store *s, wrk_op *op)
{
    op->qnext = NULL;
    if (s->q_tail)
        s->q_tail->qnext = op;
    else
        s->q_head = op;
    s->q_tail = op;
    uv_async_send(&s->wake);
}

/* Server q->server challenged our HELLO: write the challenge into our own
 * memory where the HELLO said, and tell it to look (PROOF). */
static void answer_challenge(kvs_store *s, wrk_req *q, const uint8_t *challenge)
{
    uint8_t *where = s->nonces + (size_t)q->server * PROTO_NONCE_LEN;
    zmq_msg_t body;
    memcpy(where, challenge, PROTO_NONCE_LEN);
    q->h.type = PROTO_PROOF;
    if (zmq_msg_init_size(&body, PROTO_HELLO_LEN) != 0)
        return;
    uint8_t *b = zmq_msg_data(&body);
    le_put64(b, (uint64_t)getpid());
    le_put64(b + 8, (uint64_t)(uintptr_t)where);
    memcpy(b + 16, challenge, PROTO_NONCE_LEN);
    net_send(s->servers[q->server], NULL, 0, &q->h, &body);
    zmq_msg_close(&body);
}

/* One answer (a lone REPLY or ERROR, or a record of a FUSED_REPLY). */
static void on_reply(kvs_store *s, const proto_hdr *hp, const char *body)
{
    proto_hdr h = *hp;
    char why[256];
    if (h.type == PROTO_ERROR) {
        LOG(LOG_WARN, s->who, "net", "server %d rejected a message: %.*s", (h.sender - 8) / 2,
            (int)h.body_len, body ? body : "");
    }
    wrk_req *q = wrk_reqmap_get(&s->reqs, h.req_id);
    if (q && q->op == NULL && h.type == PROTO_CHALLENGE) {
        answer_challenge(s, q, (const uint8_t *)body);
        return;
    }
    if (q == NULL && hmap_get(&s->batches, h.req_id) != NULL) {
        char text[PROTO_ERRTEXT_MAX + 64];
        int st = h.status ? h.status : KVS_EPROTO;
        snprintf(text, sizeof text, "server %d: %.*s", (h.sender - 8) / 2, (int)h.body_len,
                 body ? body : kvs_strerror(st));
        batch_fail(s, h.req_id, st, text);
        return;
    }
    if (q == NULL) {
        if (h.type != PROTO_ERROR)
            LOG(LOG_INFO, s->who, "net", "dropped a %s for unknown request %llu",
                proto_type_name(h.type), (unsigned long long)h.req_id);
        return;
    }
    if (h.type == PROTO_TIMING) { /* a traced request's timing on its server */
        if (s->trace && q->op && q->op->trace_id && h.sender == proto_server_id(q->server)) {
            const uint8_t *b = (const uint8_t *)body;
            trace_req(s, q, TEV_SERVER, le_get64(b), le_get64(b + 8), le_get64(b + 16), 0);
        }
        return;
    }
    wrk_reqmap_del(&s->reqs, h.req_id);
    wrk_met_reply(s, q, &h, h.type == PROTO_ERROR && h.status == 0 ? KVS_EPROTO : h.status);
    trace_replied(s, q, h.type == PROTO_ERROR && h.status == 0 ? KVS_EPROTO : h.status);
    if (s->io_failed)
        close_idle_servers(s);
    if (q->op == NULL) { /* our HELLO */
        if (h.type == PROTO_REPLY && h.status == 0) {
            s->cma[q->server] = true;
            LOG(LOG_INFO, s->who, "net", "server %d copies our memory directly (same host)",
                q->server);
        } else {
            LOG(LOG_INFO, s->who, "net", "server %d: socket data path (%.*s)", q->server,
                (int)h.body_len, body ? body : "");
        }
        /* the path is known: send what waited for it, in order */
        int r = q->server;
        s->hello_wait[r] = false;
        wrk_req *held = s->held_head[r];
        s->held_head[r] = s->held_tail[r] = NULL;
        while (held) {
            wrk_req *n = held->hnext;
            send_req(s, held);
            held = n;
        }
        return;
    }
    if (q->batch)
        batch_done(s, q->batch);
    if (h.type == PROTO_ERROR || h.status != 0) {
        char text[PROTO_ERRTEXT_MAX + 64];
        int st = h.status ? h.status : KVS_EPROTO;
        snprintf(text, sizeof text, "server %d: %.*s", q->server, (int)h.body_len,
                 body ? body : kvs_strerror(st));
        wrk_op_release(s, q->op, st, text);
        return;
    }
    if (q->op->type == WRK_OP_CTL && h.type == PROTO_REPLY) {
        wrk_ctl_reply(s, q, &h, body);
        return;
    }
    if (h.type != PROTO_REPLY || h.key != q->h.key || h.part != q->h.part) {
        wrk_op_release(s, q->op, KVS_EPROTO, "a server's reply does not match its request");
        return;
    }
    if (q->nouts > 0 && (h.flags & PROTO_F_CMA)) {
        /* the server wrote the value into outs[0] */
        if (!q->cma_out || h.count != q->h.count || h.offset != q->h.offset || h.dtype != q->h.dtype) {
            wrk_op_release(s, q->op, KVS_EPROTO, "a server's reply does not match its request");
            return;
        }
        uint64_t bytes = h.count * kvs_dtype_size((kvs_dtype)h.dtype);
        for (int i = 1; i < q->nouts; i++)
            memcpy(q->outs[i], q->outs[0], bytes);
    } else if (q->nouts > 0) {
        if ((body == NULL && q->h.count > 0) || h.count != q->h.count ||
            h.offset != q->h.offset || h.dtype != q->h.dtype) {
            snprintf(why, sizeof why, "server %d replied %llu elements for key %llu, expected "
                     "%llu", q->server, (unsigned long long)h.count,
                     (unsigned long long)h.key, (unsigned long long)q->h.count);
            wrk_op_release(s, q->op, KVS_EPROTO, why);
            return;
        }
        for (int i = 0; i < q->nouts && h.body_len > 0; i++)
            memcpy(q->outs[i], body, h.body_len);
    }
    if (q->op->post)
        wrk_comm_reply(s, q); /* dist_*_device: this part on to its device now */
    wrk_op_release(s, q->op, 0, NULL);
}

/* A message from a server: a lone answer or a FUSED_REPLY of several. */
static void on_server(net_sock *sock, net_msg *m, void *arg)
{
    kvs_store *s = arg;
    proto_hdr h, rec;
    char why[256];
    proto_limits lim = {s->c.max_message};
    (void)sock;
    zmq_msg_t *bodymsg;
    if (net_msg_decode(m, false, &lim, &h, &bodymsg, why, sizeof why) != 0) {
        LOG(LOG_WARN, s->who, "net", "dropped a malformed message from a server: %s", why);
        return;
    }
    const char *body = bodymsg ? zmq_msg_data(bodymsg) : NULL;
    if (h.type != PROTO_FUSED_REPLY) {
        on_reply(s, &h, body);
        return;
    }
    uint64_t off = 0;
    for (uint64_t i = 0; i < h.count; i++) {
        const uint8_t *data;
        if (proto_fused_next(PROTO_FUSED_REPLY, h.sender, (const uint8_t *)body, h.body_len,
                             &off, &lim, &rec, &data, why, sizeof why) != 0) {
            LOG(LOG_WARN, s->who, "net", "dropped the rest of a malformed message from a "
                "server: %s", why);
            /* the records not read yet belong to the FUSED message it answers:
             * fail that message's requests still waiting, or they would wait
             * for answers that never come */
            char text[320];
            snprintf(text, sizeof text, "server %d sent a malformed answer: %s",
                     (h.sender - 8) / 2, why);
            batch_fail(s, h.req_id, KVS_EPROTO, text);
            return;
        }
        on_reply(s, &rec, (const char *)data);
    }
    if (off != h.body_len)
        LOG(LOG_WARN, s->who, "net", "a FUSED_REPLY from a server has %llu bytes after its "
            "%llu records", (unsigned long long)(h.body_len - off), (unsigned long long)h.count);
}

/* The data connection to server r is gone (or never came up): fail the job
 * here at once, and tell the scheduler, which tells every node which two
 * ends lost each other. */
static void server_lost(kvs_store *s, int r, const char *why)
{
    char text[700];
    pthread_mutex_lock(&s->mu);
    bool quiet = s->fatal != 0 || s->stop;
    pthread_mutex_unlock(&s->mu);
    if (quiet || s->leaving || s->io_failed || net_link_gone(s->link))
        return; /* (a dead scheduler: servers exit, and the link says why) */
    snprintf(text, sizeof text, "%s lost its connection to server %d at %s: %s", s->who, r,
             s->server_ep[r], why);
    proto_hdr h = {.type = PROTO_PEER_LOST, .key = (uint64_t)proto_server_id(r)};
    net_link_send(s->link, &h, why);
    io_fail(s, KVS_EPEERDEAD, text, r, false);
}

typedef struct mon_arg {
    kvs_store *s;
    int r;
} mon_arg;

static void on_server_event(void *arg, int event, int value, const char *addr)
{
    kvs_store *s = ((mon_arg *)arg)->s;
    int r = ((mon_arg *)arg)->r;
    (void)value;
    (void)addr;
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
        char why[320];
        snprintf(why, sizeof why, "server %d refused our proof of the job secret (status %d): "
                 "bad secret? every node needs the job's KVS_SECRET_FILE (with CURVE key "
                 "files: is our KVS_CURVE_CLIENT_KEY in its KVS_CURVE_AUTHORIZED?)", r, value);
        io_fail_all(s, KVS_EAUTH, why);
    } else if (event == ZMQ_EVENT_CONNECTED) {
        s->connected[r] = true;
    } else if (event == ZMQ_EVENT_DISCONNECTED) {
        char why[160];
        snprintf(why, sizeof why, "the connection closed (the server exited, the connection "
                 "was reset, or no traffic for PS_HEARTBEAT_TIMEOUT=%g s)", s->c.hb_timeout_s);
        server_lost(s, r, why);
    }
}

static void on_connect_deadline(uv_timer_t *t)
{
    kvs_store *s = t->data;
    char why[160];
    for (int r = 0; s->servers && r < s->c.num_server; r++) {
        if (s->servers[r] && !s->connected[r]) {
            snprintf(why, sizeof why, "no connection within PS_HEARTBEAT_TIMEOUT=%g s",
                     s->c.hb_timeout_s);
            server_lost(s, r, why);
            return;
        }
    }
}

static void on_registered(kvs_store *s, const proto_hdr *h, const char *body, size_t len)
{
    proto_node *nodes = NULL;
    char why[256], ident[32];
    int n, rc = 0;
    if (h->key < 9 || h->key % 2 == 0 || (h->key - 9) / 2 >= (uint64_t)s->c.num_worker) {
        io_fail_all(s, KVS_EPROTO, "the scheduler assigned an invalid node id");
        return;
    }
    nodes = calloc((size_t)(s->c.num_server + s->c.num_worker), sizeof *nodes);
    s->servers = calloc((size_t)s->c.num_server, sizeof *s->servers);
    s->mons = calloc((size_t)s->c.num_server, sizeof *s->mons);
    s->connected = calloc((size_t)s->c.num_server, sizeof *s->connected);
    s->server_ep = calloc((size_t)s->c.num_server, sizeof *s->server_ep);
    s->mon_args = calloc((size_t)s->c.num_server, sizeof *s->mon_args);
    if (nodes == NULL || s->servers == NULL || s->mons == NULL || s->connected == NULL ||
        s->server_ep == NULL || s->mon_args == NULL) {
        free(nodes);
        io_fail_all(s, KVS_ENOMEM, "out of memory");
        return;
    }
    n = proto_parse_nodes(body ? body : "", len, nodes, s->c.num_server + s->c.num_worker, why,
                          sizeof why);
    if (n < 0) {
        free(nodes);
        io_fail_all(s, KVS_EPROTO, why);
        return;
    }
    s->node_id = (int)h->key;
    s->rank = (s->node_id - 9) / 2;
    snprintf(s->who, sizeof s->who, "worker %d", s->rank);
    /* "w<node id>-<random>": the server checks the prefix; nobody can take
     * the connection id before us */
    uint8_t tag[8] = {0};
    net_random(tag, sizeof tag);
    snprintf(ident, sizeof ident, "w%d-%02x%02x%02x%02x%02x%02x%02x%02x", s->node_id, tag[0],
             tag[1], tag[2], tag[3], tag[4], tag[5], tag[6], tag[7]);

    for (int i = 0; i < n && rc == 0; i++) {
        if (nodes[i].role != CFG_ROLE_SERVER)
            continue;
        int r = (nodes[i].id - 8) / 2;
        if (nodes[i].id < 8 || nodes[i].id % 2 || r >= s->c.num_server || s->servers[r]) {
            rc = KVS_EPROTO;
            break;
        }
        net_sock *sock;
        rc = net_sock_new(&s->loop, s->zctx, ZMQ_DEALER, s->c.water_mark, on_server, s, &sock);
        if (rc)
            break;
        net_sock_set_max(sock, s->c.max_message);
        net_sock_set_split(sock, DP_FRAME_MAX); /* what a server's data socket accepts */
        zmq_setsockopt(net_sock_zmq(sock), ZMQ_ROUTING_ID, ident, strlen(ident));
        s->servers[r] = sock;
        rc = net_auth_connect(&s->c, net_sock_zmq(sock), "worker", s->node_id,
                              nodes[i].endpoint, why, sizeof why);
        if (rc != 0) {
            free(nodes);
            io_fail_all(s, rc, why);
            return;
        }
        net_live_heartbeats(net_sock_zmq(sock), &s->c);
        s->mon_args[r] = (mon_arg){s, r};
        snprintf(s->server_ep[r], sizeof s->server_ep[r], "%s", nodes[i].endpoint);
        if (net_mon_new(&s->loop, s->zctx, net_sock_zmq(sock),
                        ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED |
                            ZMQ_EVENT_HANDSHAKE_FAILED_AUTH, on_server_event,
                        &s->mon_args[r], &s->mons[r]) != 0)
            s->connected[r] = true; /* no monitor: heartbeats to the scheduler only */
        if (zmq_connect(net_sock_zmq(sock), nodes[i].endpoint) != 0) {
            snprintf(why, sizeof why, "cannot connect to server %d at %s: %s", r,
                     nodes[i].endpoint, zmq_strerror(zmq_errno()));
            free(nodes);
            io_fail_all(s, KVS_ENET, why);
            return;
        }
        net_sock_start(sock);
        wrk_met_watch(s, sock, r); /* before the first message: every byte is counted */
        /* first message on the connection: the server binds it to us, and
         * its connection guard never closes it (even if we stay idle) */
        wrk_met_watch(s, sock, r); /* before the first send: metrics count it */
        proto_hdr ann = {.type = PROTO_ANNOUNCE, .sender = s->node_id};
        net_send(sock, NULL, 0, &ann, NULL);
        LOG(LOG_INFO, s->who, "net", "server %d is at %s", r, nodes[i].endpoint);
    }
    free(nodes);
    for (int r = 0; r < s->c.num_server && rc == 0; r++)
        if (s->servers[r] == NULL)
            rc = KVS_EPROTO;
    if (rc) {
        io_fail_all(s, rc, "the scheduler's node table is inconsistent");
        return;
    }
    size_t ns = (unsigned)s->c.num_server; /* >= 1 (cfg_load) */
    s->cma = calloc(ns, sizeof *s->cma);
    s->hellos = calloc(ns, sizeof *s->hellos);
    s->hello_wait = calloc(ns, sizeof *s->hello_wait);
    s->held_head = calloc(ns, sizeof *s->held_head);
    s->held_tail = calloc(ns, sizeof *s->held_tail);
    s->nonces = calloc(ns, PROTO_NONCE_LEN);
    if (s->c.cma && s->cma && s->hellos && s->nonces && s->hello_wait && s->held_head &&
        s->held_tail) {
        for (int r = 0; r < s->c.num_server; r++) {
            wrk_req *q = &s->hellos[r];
            zmq_msg_t body;
            q->server = r;
            q->req_id = ++s->next_req;
            q->h = (proto_hdr){.type = PROTO_HELLO, .sender = s->node_id, .req_id = q->req_id,
                               .body_len = PROTO_HELLO_LEN};
            if (wrk_reqmap_put(&s->reqs, q->req_id, q) != 0)
                continue;
            zmq_msg_init_size(&body, PROTO_HELLO_LEN);
            uint8_t *b = zmq_msg_data(&body);
            le_put64(b, (uint64_t)getpid());
            le_put64(b + 8, (uint64_t)(uintptr_t)(s->nonces + (size_t)r * PROTO_NONCE_LEN));
            memset(b + 16, 0, PROTO_NONCE_LEN); /* the server sends the challenge */
            s->hello_wait[r] = net_send(s->servers[r], NULL, 0, &q->h, &body) == 0;
            zmq_msg_close(&body);
        }
    }
    uv_timer_start(&s->connect_timer, on_connect_deadline,
                   (uint64_t)(s->c.hb_timeout_s * 1000), 0);
    net_link_registered(s->link, s->node_id);
    pthread_mutex_lock(&s->mu);
    s->registered = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    LOG(LOG_INFO, s->who, "job", "registered: rank %d of %d workers, %d servers", s->rank,
        s->c.num_worker, s->c.num_server);
}

/* status if it is one of our error codes, else def. */
static int known_err(int status, int def)
{
    return status < 0 && strcmp(kvs_errname(status), "KVS_E?") != 0 ? status : def;
}

static void on_sched_msg(void *arg, const proto_hdr *h, const char *body, size_t len)
{
    kvs_store *s = arg;
    char text[700];
    snprintf(text, sizeof text, "%.*s", (int)(len < 600 ? len : 600), body ? body : "");
    switch (h->type) {
    case PROTO_REGISTER_ACK:
        if (!s->servers)
            on_registered(s, h, body, len);
        break;
    case PROTO_BARRIER_DONE:
    case PROTO_EXIT_ACK: {
        wrk_req *q = wrk_reqmap_del(&s->reqs, h->req_id);
        if (q)
            wrk_op_release(s, q->op, 0, NULL);
        break;
    }
    case PROTO_NODE_DEAD: {
        char msg[800];
        int dead = h->key >= 8 && h->key % 2 == 0 ? (int)((h->key - 8) / 2) : -1;
        snprintf(msg, sizeof msg, "%s", text);
        io_fail(s, KVS_EPEERDEAD, msg, dead, false);
        break;
    }
    case PROTO_SHUTDOWN:
        pthread_mutex_lock(&s->mu);
        s->sched_gone = true;
        pthread_mutex_unlock(&s->mu);
        if (h->status == 0) {
            io_fail_all(s, KVS_ECLOSED, "the scheduler ended the job");
        } else {
            char msg[800];
            snprintf(msg, sizeof msg, "the scheduler ended the job: %s",
                     text[0] ? text : "it failed");
            io_fail_all(s, known_err(h->status, KVS_EPEERDEAD), msg);
        }
        break;
    case PROTO_REFUSED: {
        char msg[800];
        int st = h->status == KVS_EAUTH || h->status == KVS_EPROTO ? h->status : KVS_ECONFIG;
        snprintf(msg, sizeof msg, "the scheduler refused this worker: %s", text);
        io_fail_all(s, st, msg);
        break;
    }
    case PROTO_ERROR: {
        char msg[800];
        snprintf(msg, sizeof msg, "the scheduler refused this worker: %s", text);
        io_fail_all(s, known_err(h->status, KVS_ECONFIG), msg);
        break;
    }
    default:
        LOG(LOG_WARN, s->who, "net", "ignored %s from the scheduler", proto_type_name(h->type));
    }
}

static void on_link_fail(void *arg, int err, const char *why)
{
    kvs_store *s = arg;
    pthread_mutex_lock(&s->mu);
    s->sched_gone = true;
    pthread_mutex_unlock(&s->mu);
    io_fail_all(s, err, why);
}

static void on_met_timer(uv_timer_t *t)
{
    wrk_met_tick(t->data);
}

static void close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

static void *io_main(void *arg)
{
    kvs_store *s = arg;
    uv_run(&s->loop, UV_RUN_DEFAULT);
    /* stopping: close sockets and handles, let the closes run */
    wrk_met_stop(s);
    net_link_free(s->link);
    s->link = NULL;
    for (int r = 0; s->servers && r < s->c.num_server; r++) {
        net_mon_free(s->mons[r]);
        net_sock_free(s->servers[r]);
    }
    free(s->servers);
    s->servers = NULL;
    free(s->mons);
    s->mons = NULL;
    /* hellos/cma stay until the store is freed: the map may still point at them */
    pthread_mutex_lock(&s->mu);
    s->credit_live = false; /* the wake handle closes now */
    pthread_mutex_unlock(&s->mu);
    uv_walk(&s->loop, close_walk, NULL);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    /* requests still in flight can never complete now */
    io_fail(s, KVS_ECLOSED, "store closed", -1, true);
    return NULL;
}

int wrk_io_start(kvs_store *s)
{
    int rc;
    uv_loop_init(&s->loop);
    uv_async_init(&s->loop, &s->wake, on_wake);
    s->wake.data = s;
    uv_timer_init(&s->loop, &s->grace);
    s->grace.data = s;
    uv_timer_init(&s->loop, &s->met_timer);
    s->met_timer.data = s;
    uv_timer_start(&s->met_timer, on_met_timer, 1000, 1000);
    uv_unref((uv_handle_t *)&s->met_timer);
    uv_timer_init(&s->loop, &s->connect_timer);
    s->connect_timer.data = s;
    s->zctx = zmq_ctx_new();
    net_link_cbs cbs = {on_sched_msg, on_link_fail};
    rc = s->zctx == NULL ? KVS_ENET
                         : net_link_new(&s->loop, s->zctx, &s->c, CFG_ROLE_WORKER, s->host, "-",
                                        s->c.worker_id, s->who, &cbs, s, &s->link);
    if (rc == 0 && wrk_met_serve(s) != 0) {
        char keep[512];
        snprintf(keep, sizeof keep, "%s", kvs_last_error());
        net_link_free(s->link);
        s->link = NULL;
        uv_walk(&s->loop, close_walk, NULL);
        uv_run(&s->loop, UV_RUN_DEFAULT);
        uv_loop_close(&s->loop);
        zmq_ctx_term(s->zctx);
        s->zctx = NULL;
        return err_set(KVS_ENET, "%s", keep);
    }
    if (rc) {
        uv_walk(&s->loop, close_walk, NULL);
        uv_run(&s->loop, UV_RUN_DEFAULT);
        uv_loop_close(&s->loop);
        if (s->zctx)
            zmq_ctx_term(s->zctx);
        s->zctx = NULL;
        return err_set(rc, "cannot connect to the scheduler at %s:%d", s->c.root_uri,
                       s->c.root_port);
    }
    if (pthread_create(&s->thread, NULL, io_main, s) != 0) {
        net_link_free(s->link);
        uv_walk(&s->loop, close_walk, NULL);
        uv_run(&s->loop, UV_RUN_DEFAULT);
        uv_loop_close(&s->loop);
        zmq_ctx_term(s->zctx);
        s->zctx = NULL;
        return err_set(KVS_ENOMEM, "cannot start the I/O thread");
    }
    s->thread_started = true;
    pthread_mutex_lock(&s->mu);
    while (!s->registered && s->fatal == 0)
        pthread_cond_wait(&s->cv, &s->mu);
    rc = s->registered ? 0 : s->fatal;
    if (rc)
        err_set(rc, "%s", s->fatal_text);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void wrk_io_stop(kvs_store *s)
{
    if (!s->thread_started)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    uv_async_send(&s->wake);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    s->thread_started = false;
    uv_loop_close(&s->loop);
    zmq_ctx_term(s->zctx);
    s->zctx = NULL;
}
