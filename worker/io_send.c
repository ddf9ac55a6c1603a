/* io_send.c - libkvs's I/O thread: sending requests (io_int.h): one by
 * one, fused per server, by reference to a same-host server, in p3 priority
 * order under credits, and as gated ops open them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/datapath.h"
#include "common/log.h"
#include "common/sizes.h"
#include "worker/metrics.h"
#include "worker/trace.h"
#include "worker/io_int.h"
#include "worker/op.h"
#include "worker/wrk_int.h"

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
void wrk_io_trace_req(kvs_store *s, const wrk_req *q, int kind, uint64_t a, uint64_t b,
                      uint64_t c, int status)
{
    wrk_tev ev = {.ts_ns = clock_ns(), .kind = (uint16_t)kind, .op = q->op->trace_id,
                  .key = q->h.key, .round = q->h.round, .a = a, .b = b, .c = c,
                  .server = q->server, .status = status, .part = q->h.part,
                  .optype = q->h.type};
    wrk_trace_add(s->trace, &ev);
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
    return req_bytes(q) >= DP_CMA_MIN && (q->send || q->nouts > 0) &&
           !(q->h.flags & PROTO_F_RSP);
}

/* q's data goes by reference: its server is on this host and proved that it
 * can copy our memory (HELLO answered), and big_for_ref(q). */
static bool goes_by_ref(const kvs_store *s, const wrk_req *q)
{
    return s->cma && q->server >= 0 && q->server < s->num_servers && s->cma[q->server] &&
           big_for_ref(q) && !(q->h.flags & PROTO_F_CODEC); /* compressed: in the message */
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

void wrk_io_send(kvs_store *s, wrk_req *q)
{
    char text[256];
    if (q->op && q->op->type == WRK_OP_CTL && wrk_fo_route(s, q->server) != q->server) {
        /* replicated, server dead: its heir must not get a second request of
         * the same collective */
        snprintf(text, sizeof text, "server %d died (its keys moved to server %d): a "
                 "collective (optimizer, save, load) needs every server of the job",
                 q->server, wrk_fo_route(s, q->server));
        wrk_req_drop(s, q, KVS_EPEERDEAD, text);
        return;
    }
    q->server = wrk_fo_route(s, q->server); /* replicated: the range's owner now */
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
        if (q->h.type == PROTO_BARRIER)
            q->h.round = ++s->barriers_sent; /* its number: a rejoin may send it again */
        net_link_send(s->link, &q->h, NULL);
        return;
    }
    if (q->server >= s->num_servers || s->servers[q->server] == NULL) {
        snprintf(text, sizeof text, "no connection to server %d", q->server);
        wrk_req_drop(s, q, KVS_ENET, text);
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
        wrk_req_drop(s, q, KVS_ENOMEM, "out of memory");
        return;
    }
    zmq_msg_t body, *bp = NULL;
    bool traced = s->trace && q->op && q->op->trace_id;
    if (traced)
        q->h.flags |= PROTO_F_TRACE; /* the server reports its timing */
    if (goes_by_ref(s, q)) {
        /* same host: the server copies from and into our memory itself */
        proto_hdr h;
        if (zmq_msg_init_size(&body, PROTO_CMA_LEN) != 0) {
            wrk_reqmap_del(&s->reqs, q->req_id);
            wrk_req_drop(s, q, KVS_ENOMEM, "out of memory");
            return;
        }
        ref_desc(q, &h, zmq_msg_data(&body));
        bool counted_zc = q->zc;
        q->t_sent = clock_ns();
        wrk_met_sent(s, q, true, bytes);
        if (traced)
            wrk_io_trace_req(s, q, TEV_SENT, q->send ? bytes : 0, 1, 0, 0);
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
            if (zmq_msg_init_data(&body, (void *)q->send, q->h.body_len, zc_free, q) != 0) {
                /* no frame lent: its release is dropped with the reply */
                wrk_reqmap_del(&s->reqs, q->req_id);
                wrk_req_drop(s, q, KVS_ENOMEM, "out of memory");
                return;
            }
            q->credited = s->inflight != NULL;
            if (q->credited)
                atomic_fetch_add(&s->inflight[q->server], q->h.body_len);
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
        wrk_io_trace_req(s, q, TEV_SENT, bp ? q->h.body_len : 0, 0, 0, 0);
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
 * server reads and writes their data in our memory itself.  Parts from
 * DP_FUSE_MAX to below DP_FUSE_FRAMES_MAX that travel inline join them too,
 * up to DP_FUSE_FRAMES_MAX of them a message: their records are headers
 * (PROTO_F_FRAME) and their data leave as record frames of the message,
 * lent to ZeroMQ as a lone part's body is (no copy), and the server answers
 * their values the same way. */

static bool fusable(const kvs_store *s, const wrk_req *q)
{
    /* a part whose path the HELLO answer decides waits for it in wrk_io_send
     * (parts from DP_CMA_MIN up; those under DP_FUSE_MAX would else leave
     * fused inline before the proof) */
    return s->c.fuse_bytes > 0 && q->op != NULL && q->op->type != WRK_OP_CTL &&
           q->server >= 0 && q->server < s->num_servers &&
           !(s->hello_wait && s->hello_wait[q->server] && big_for_ref(q)) &&
           (req_bytes(q) < DP_FUSE_FRAMES_MAX || goes_by_ref(s, q));
}

static uint64_t fused_len(const wrk_req *q)
{
    if (q->fframe)
        return PROTO_HDR_SIZE;
    return proto_fused_rec_len(q->fref ? PROTO_CMA_LEN : q->send ? q->h.body_len : 0);
}

/* The bytes of q that count against DP_FUSE_FRAMES_MAX. */
static uint64_t big_len(const wrk_req *q)
{
    return !q->fref && req_bytes(q) >= DP_FUSE_MAX ? req_bytes(q) : 0;
}

/* q's body as a record frame: lent (zero-copy: its release comes with the
 * frame's, as for a lone part) or copied.  false: out of memory. */
static bool frame_of(kvs_store *s, wrk_req *q, zmq_msg_t *m)
{
    if (!q->zc) {
        if (body_new(s, q->server, m, q->h.body_len) != 0)
            return false;
        memcpy(zmq_msg_data(m), q->send, q->h.body_len);
        return true;
    }
    if (zmq_msg_init_data(m, (void *)q->send, q->h.body_len, zc_free, q) != 0)
        return false;
    q->credited = s->inflight != NULL;
    if (q->credited)
        atomic_fetch_add(&s->inflight[q->server], q->h.body_len);
    return true;
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
    size_t n = f->n, k, nframe = f->nframe, nf = 0;
    uint64_t bytes = f->bytes, off = 0, cid;
    bool ref = f->nref > 0;
    char text[128];
    zmq_msg_t body, *frames = NULL;
    f->n = 0;
    f->bytes = 0;
    f->nref = 0;
    f->nframe = 0;
    f->fbytes = 0;
    f->big = 0;
    if (n == 0)
        return;
    if (n == 1) {
        f->reqs[0]->fref = false;
        f->reqs[0]->fframe = false;
        wrk_io_send(s, f->reqs[0]);
        return;
    }
    if (s->servers == NULL || s->servers[r] == NULL) {
        snprintf(text, sizeof text, "no connection to server %d", r);
        fuse_fail(s, f->reqs, n, KVS_ENET, text);
        return;
    }
    cid = ++s->next_req;
    if (nframe > 0 && (frames = malloc(nframe * sizeof *frames)) == NULL) {
        fuse_fail(s, f->reqs, n, KVS_ENOMEM, "out of memory");
        return;
    }
    if (body_new(s, r, &body, bytes) != 0) {
        free(frames);
        fuse_fail(s, f->reqs, n, KVS_ENOMEM, "out of memory");
        return;
    }
    if (hmap_put(&s->batches, cid, (void *)(uintptr_t)(((uint64_t)n << 32) | n)) != 0) {
        zmq_msg_close(&body);
        free(frames);
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
        } else if (q->fframe) { /* its body: a record frame */
            proto_hdr rh = q->h;
            rh.flags |= PROTO_F_FRAME;
            off += proto_fused_put(p + off, &rh, NULL);
        } else {
            off += proto_fused_put(p + off, &q->h, q->send);
        }
        if (q->h.priority > prio)
            prio = q->h.priority;
        /* metrics and timeline */
        q->t_sent = now;
        wrk_met_sent(s, q, q->fref, q->fref ? req_bytes(q) : 0);
        if (s->trace && q->op->trace_id)
            wrk_io_trace_req(s, q, TEV_SENT, q->fref ? (q->send ? req_bytes(q) : 0)
                                               : q->send ? q->h.body_len : 0,
                      q->fref ? 3 : 2, 0, 0);
    }
    proto_hdr h = {.type = ref ? PROTO_FUSED_REF : PROTO_FUSED, .sender = s->node_id,
                   .req_id = cid, .priority = prio, .count = n, .body_len = off};
    bool made = k == n && off == bytes;
    for (size_t j = 0; made && j < n; j++)
        if (f->reqs[j]->fframe && (made = frame_of(s, f->reqs[j], &frames[nf])))
            nf++;
    made = made && nf == nframe;
    if (!made || net_sendv(s->servers[r], NULL, 0, &h, &body, frames, (int)nf) != 0) {
        for (size_t j = 0; j < k; j++)
            wrk_reqmap_del(&s->reqs, f->reqs[j]->req_id);
        hmap_del(&s->batches, cid);
        if (!made) /* (net_sendv closed them when it failed) */
            for (size_t i = 0; i < nf; i++)
                zmq_msg_close(&frames[i]);
        /* a lent frame released its request's zero-copy count as it closed
         * (zc_free): those requests are dropped with their replies only */
        for (size_t j = 0, i = 0; j < n && i < nf; j++)
            if (f->reqs[j]->fframe) {
                f->reqs[j]->zc = false;
                i++;
            }
        snprintf(text, sizeof text, !made ? "out of memory" : "send to server %d failed", r);
        fuse_fail(s, f->reqs, n, !made ? KVS_ENOMEM : KVS_ENET, text);
        zmq_msg_close(&body);
        free(frames);
        return;
    }
    zmq_msg_close(&body);
    free(frames);
    /* a fused record lends ZeroMQ no frame (by reference, or copied into
     * the message): the release its zero-copy body was counted for happens
     * now (as in wrk_io_send); a record frame's comes with the frame's */
    for (k = 0; k < n; k++)
        if (f->reqs[k]->zc && !f->reqs[k]->fframe)
            wrk_op_release(s, f->reqs[k]->op, 0, NULL);
}

void wrk_io_fuse_flush_all(kvs_store *s)
{
    for (int r = 0; s->fuse && r < s->num_servers; r++)
        fuse_flush(s, r);
}

/* Send q now, or keep it for this server's next FUSED message. */
void wrk_io_dispatch(kvs_store *s, wrk_req *q)
{
    if (q->op && q->op->type == WRK_OP_CTL && wrk_fo_route(s, q->server) != q->server) {
        wrk_io_send(s, q); /* refused there */
        return;
    }
    q->server = wrk_fo_route(s, q->server);
    if (!fusable(s, q)) {
        /* p3: a part never overtakes a fused one queued before it; nor does a
         * collective (ctl.c: a save must come after every earlier push) */
        if ((s->routing.p3 || (q->op && q->op->type == WRK_OP_CTL)) && s->fuse &&
            q->server >= 0 && q->server < s->num_servers)
            fuse_flush(s, q->server);
        wrk_io_send(s, q);
        return;
    }
    if (s->fuse == NULL && (s->fuse = calloc((size_t)s->num_servers, sizeof *s->fuse)) == NULL) {
        wrk_io_send(s, q);
        return;
    }
    wrk_fuse *f = &s->fuse[q->server];
    q->fref = goes_by_ref(s, q);
    q->fframe = !q->fref && q->send && q->h.body_len >= DP_FUSE_MAX;
    uint64_t len = fused_len(q), big = big_len(q);
    /* the records stay within one frame (a bigger body would be split into
     * pieces, which the server would take for record frames) */
    uint64_t most = s->c.fuse_bytes < DP_FRAME_MAX ? s->c.fuse_bytes : DP_FRAME_MAX;
    if (f->n > 0 && (f->bytes + len > most || f->big + big > DP_FUSE_FRAMES_MAX))
        fuse_flush(s, q->server);
    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 64;
        wrk_req **nr = realloc(f->reqs, cap * sizeof *nr);
        if (nr == NULL) {
            q->fref = false;
            q->fframe = false;
            wrk_io_send(s, q);
            return;
        }
        f->reqs = nr;
        f->cap = cap;
    }
    f->reqs[f->n++] = q;
    f->bytes += len;
    f->nref += q->fref;
    f->nframe += q->fframe;
    f->fbytes += q->fframe ? q->h.body_len : 0;
    f->big += big;
}

/* A record of a FUSED message was answered (or failed). */
void wrk_io_batch_done(kvs_store *s, uint64_t cid)
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
void wrk_io_batch_fail(kvs_store *s, uint64_t cid, int err, const char *text)
{
    uintptr_t v = (uintptr_t)hmap_del(&s->batches, cid);
    uint64_t n = (uint64_t)v >> 32;
    for (uint64_t id = cid + 1; id <= cid + n; id++) {
        wrk_req *q = wrk_reqmap_del(&s->reqs, id);
        if (q && q->op)
            wrk_op_release(s, q->op, err, text);
    }
}

/* p3 with credits: the queues and counters, made on first use. */
bool wrk_io_p3_credits(kvs_store *s)
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
 * credit (parts waiting to be fused count as sent: their message's body and
 * record frames).  A flush that took no credit after all (one lone record
 * without a body leaves alone, with none) must not stop the queue: no
 * returned credit would wake it again. */
void wrk_io_p3_pump(kvs_store *s, int r)
{
    wrk_req *q;
    for (;;) {
        while (atomic_load(&s->inflight[r]) +
                       (s->fuse ? s->fuse[r].bytes + s->fuse[r].fbytes : 0) <
                   s->c.p3_credit &&
               (q = wrk_pq_pop(&s->pq[r])) != NULL)
            wrk_io_dispatch(s, q);
        if (s->fuse)
            fuse_flush(s, r);
        if (s->pq[r].n == 0 || atomic_load(&s->inflight[r]) >= s->c.p3_credit)
            return;
    }
}

/* ---- gated ops (op.h): requests leave as the comm layer stages them ---- */

/* A ready request of a gated op: into its server's p3 queue, or on. */
static void gate_submit(kvs_store *s, wrk_req *q)
{
    if (wrk_io_p3_credits(s) && q->server >= 0 && q->server < s->num_servers &&
        wrk_pq_push(&s->pq[q->server], q, q->h.priority) == 0)
        return;
    wrk_io_dispatch(s, q);
}

/* Move the gated ops of the list ops to s->gated; returns the others. */
wrk_op *wrk_io_gate_take(kvs_store *s, wrk_op *ops)
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
void wrk_io_gate_pump(kvs_store *s)
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
                wrk_req_drop(s, &reqs[i], cut_err, "staging this request's data failed");
            else
                gate_submit(s, &reqs[i]);
        }
    }
}
