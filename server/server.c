/* server.c - kvs-server's loop: sockets, registration, dispatch. */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/uio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>
#include <zmq.h>

#include "common/clock.h"
#include "common/datapath.h"
#include "common/log.h"
#include "common/memtune.h"
#include "common/prio.h"
#include "common/sizes.h"
#include "net/auth.h"
#include "net/guard.h"
#include "net/link.h"
#include "net/live.h"
#include "net/net.h"
#include "net/pace.h"
#include "server/cma.h"
#include "server/metrics.h"
#include "server/ctl.h"
#include "server/server.h"
#include "server/fuse.h"
#include "server/jobs.h"
#include "server/replica.h"
#include "server/store.h"

/* The connection (ZeroMQ routing id) a worker rank is bound to: the first
 * one that spoke for it (and, with a secret, proved it). */
#define SRV_IDENT_MAX 64
typedef struct srv_bind {
    uint8_t ident[SRV_IDENT_MAX];
    size_t len;
} srv_bind;

typedef struct srv {
    const cfg *c;
    char who[32];
    uv_loop_t loop;
    void *zctx;
    net_sock *data;
    net_auth *auth;
    net_mon *mon; /* connections of the data socket, for the guard */
    net_guard *guard; /* closes connections that never identify themselves */
    net_pacer *pacer; /* KVS_LINK_GBPS: paces the connections to workers on other
                       * hosts (NULL: not paced) */
    net_link *link;
    srv_bind *bind; /* per worker rank */
    uv_signal_t sigint, sigterm;
    red_pool *pool;
    srv_jobs *jobs; /* sums, direct copies and updates off the loop */
    srv_store store;
    srv_ctl *ctl; /* collectives: optimizer, checkpoints */
    int node_id;
    int rank;
    bool registered;
    int exit_code;
    uint64_t dropped;
    char endpoint[640];
    srv_cma *cma; /* per worker rank: direct memory access, once proven */
    struct srv_outq *outq; /* per worker rank: reply bytes ZeroMQ still holds */
    srv_met met;  /* metrics (served at KVS_METRICS_PORT) */
    srv_fuser fuser; /* answers to FUSED requests */
    srv_repl *repl;  /* KVS_REPLICAS=1: forwards, copies, held answers (NULL: off) */
} srv;

static void stop(srv *s, int code)
{
    s->exit_code = code;
    uv_stop(&s->loop);
}

/* A traced request (PROTO_F_TRACE): its timing on this server, just before
 * its reply.  It takes the highest priority so that the priority-ordered send
 * never puts it after its reply (a fused record's reply travels in a
 * FUSED_REPLY whose priority may be higher than the record's own); the worker
 * drops a TIMING whose request is already done.  Only traced jobs send it. */
static void send_timing(srv *s, const uint8_t *ident, size_t ident_len, const proto_hdr *req)
{
    uint64_t now = clock_ns();
    proto_hdr t = {.type = PROTO_TIMING, .sender = s->node_id, .req_id = req->req_id,
                   .key = req->key, .part = req->part, .body_len = PROTO_TIMING_LEN,
                   .priority = INT32_MAX};
    zmq_msg_t body;
    if (req->t_arrive_ns == 0 || zmq_msg_init_size(&body, PROTO_TIMING_LEN) != 0)
        return;
    uint8_t *b = zmq_msg_data(&body);
    le_put64(b, now - req->t_arrive_ns);
    le_put64(b + 8, req->sum_ns);
    le_put64(b + 16, req->t_round_ns > req->t_arrive_ns ? req->t_round_ns - req->t_arrive_ns : 0);
    net_send(s->data, ident, ident_len, &t, &body);
    zmq_msg_close(&body);
}

/* A value written into a worker's memory (reply h, flags PROTO_F_CMA; a
 * record of a FUSED_REF is answered by a record of a FUSED_REPLY). */
static void cma_written(srv *s, const uint8_t *ident, size_t ident_len, proto_hdr *h,
                        int wrank)
{
    srv_met_out(&s->met, wrank, MET_PATH_CMA, h->body_len);
    h->flags = PROTO_F_CMA;
    h->body_len = 0;
    if (h->fuse)
        srv_fuse_answer(&s->fuser, h, NULL, NULL);
    else
        net_send(s->data, ident, ident_len, h, NULL);
}

/* The write failed (errno says why): the reply h says so. */
static void cma_write_failed(srv *s, const uint8_t *ident, size_t ident_len, proto_hdr *h,
                             int wrank)
{
    char text[200];
    snprintf(text, sizeof text, "cannot write the value into worker %d's memory: %s", wrank,
             strerror(errno));
    h->status = KVS_EINVAL;
    met_error(s->met.reg, KVS_EINVAL);
    if (h->fuse)
        srv_fuse_answer(&s->fuser, h, text, NULL);
    else
        net_send_text(s->data, ident, ident_len, h, text);
}

/* Writing a big value into a worker's memory, off the loop. */
typedef struct write_job {
    srv_job j; /* first */
    srv *s;
    srv_cma cma;    /* as proven when the job started */
    srv_buf *value; /* a reference */
    uint64_t dst;
    proto_hdr h;    /* the reply */
    int wrank;
    uint8_t ident[SRV_IDENT_MAX];
    size_t ident_len;
    int err;
} write_job;

static void write_run(srv_job *jb)
{
    write_job *j = (write_job *)jb;
    if (srv_cma_copy(j->s->pool, &j->cma, 1, j->value->data, j->dst, j->h.body_len) != 0)
        j->err = errno ? errno : EIO;
}

static void write_done(srv_job *jb, bool cancelled)
{
    write_job *j = (write_job *)jb;
    srv_buf_unref(j->value);
    if (j->h.fuse)
        srv_fuse_hold(&j->s->fuser, j->h.fuse, -1);
    if (!cancelled) {
        errno = j->err;
        if (j->err)
            cma_write_failed(j->s, j->ident, j->ident_len, &j->h, j->wrank);
        else
            cma_written(j->s, j->ident, j->ident_len, &j->h, j->wrank);
    }
    free(j);
}

/* Bytes of value replies handed to ZeroMQ for each worker and not yet
 * written to its connection (a worker that stops reading keeps them queued).
 * Shared with the free callbacks, which run on ZeroMQ's I/O thread and may
 * outlive the server's loop: reference counted. */
typedef struct srv_outq {
    atomic_int refs;
    int n;
    _Atomic uint64_t bytes[];
} srv_outq;

typedef struct out_hint {
    srv_buf *value;
    srv_outq *q;
    int wrank;
    uint64_t bytes;
} out_hint;

static void outq_unref(srv_outq *q)
{
    if (q && atomic_fetch_sub(&q->refs, 1) == 1)
        free(q);
}

static void out_free(void *data, void *hint)
{
    out_hint *o = hint;
    (void)data;
    atomic_fetch_sub(&o->q->bytes[o->wrank], o->bytes);
    srv_buf_unref(o->value);
    outq_unref(o->q);
    free(o);
}

/* The value reply of h (body_len bytes of value) as a zero-copy frame whose
 * bytes count against the worker's queue.  0, or KVS_EFULL / KVS_ENOMEM with
 * the reply's text in why. */
static int value_body(srv *s, int wrank, srv_buf *value, const proto_hdr *h, zmq_msg_t *body,
                      char *why, size_t whylen)
{
    srv_outq *q = s->outq;
    uint64_t limit = s->c->max_queued_bytes;
    uint64_t queued = atomic_load(&q->bytes[wrank]);
    /* one reply always goes (a value above the bound can still be pulled) */
    if (limit && queued > 0 && queued + h->body_len > limit) {
        snprintf(why, whylen,
                 "worker %d does not read its replies: %llu bytes of them already wait at this "
                 "server (KVS_MAX_QUEUED_BYTES=%llu)",
                 wrank, (unsigned long long)queued, (unsigned long long)limit);
        return KVS_EFULL;
    }
    out_hint *o = malloc(sizeof *o);
    if (o == NULL) {
        snprintf(why, whylen, "server out of memory sending the value");
        return KVS_ENOMEM;
    }
    *o = (out_hint){.value = value, .q = q, .wrank = wrank, .bytes = h->body_len};
    atomic_fetch_add(&value->refs, 1);
    atomic_fetch_add(&q->refs, 1);
    atomic_fetch_add(&q->bytes[wrank], h->body_len);
    if (zmq_msg_init_data(body, value->data, h->body_len, out_free, o) != 0) {
        out_free(NULL, o);
        snprintf(why, whylen, "server out of memory sending the value");
        return KVS_ENOMEM;
    }
    return 0;
}

static void send_reply(void *arg, const uint8_t *ident, size_t ident_len, const proto_hdr *req,
                       int status, const char *text, srv_buf *value, uint64_t round)
{
    srv *s = arg;
    if (req->flags & PROTO_F_TRACE)
        send_timing(s, ident, ident_len, req);
    int wrank = (req->sender - 9) / 2;
    proto_hdr h = *req;
    h.type = PROTO_REPLY;
    h.sender = s->node_id;
    h.status = status;
    h.round = round;
    h.body_len = 0;
    bool write = status == 0 && value != NULL && req->count > 0 &&
                 (req->flags & PROTO_F_CMA) && req->cma_dst;
    /* value is the round's sum compressed (the store set req's codec bits and
     * body_len, server/decomp.h) */
    unsigned zc = status == 0 && value != NULL && !write ? PROTO_CODEC(req->flags) : 0;
    h.flags = (uint16_t)(zc << PROTO_CODEC_SHIFT);
    if (req->fuse && !write) { /* a record of a FUSED request: its answer is a record too */
        h.body_len = zc ? req->body_len : 0;
        uint64_t bytes = req->count * kvs_dtype_size((kvs_dtype)req->dtype);
        if (status == 0 && value && !zc && bytes >= DP_FUSE_MAX && wrank >= 0 &&
            wrank < s->outq->n) {
            /* a big value: lent to ZeroMQ as a record frame, not copied */
            char why[PROTO_ERRTEXT_MAX];
            zmq_msg_t body;
            h.body_len = bytes;
            int err = value_body(s, wrank, value, &h, &body, why, sizeof why);
            if (err == 0) {
                srv_fuse_answer_frame(&s->fuser, &h, &body);
                return;
            }
            h.status = err;
            met_error(s->met.reg, err);
            srv_fuse_answer(&s->fuser, &h, why, NULL);
            return;
        }
        srv_fuse_answer(&s->fuser, &h, text, value && req->count ? value->data : NULL);
        return;
    }
    if (status != 0) {
        char buf[PROTO_ERRTEXT_MAX];
        snprintf(buf, sizeof buf, "%s", text ? text : "");
        LOG(LOG_DEBUG, s->who, "store", "reply %s to %s key %llu: %s", kvs_errname(status),
            proto_type_name(req->type), (unsigned long long)req->key, buf);
        met_error(s->met.reg, status);
        net_send_text(s->data, ident, ident_len, &h, buf);
        return;
    }
    if (value == NULL || req->count == 0) {
        net_send(s->data, ident, ident_len, &h, NULL);
        return;
    }
    zmq_msg_t body;
    h.body_len = zc ? req->body_len : req->count * kvs_dtype_size((kvs_dtype)req->dtype);
    if (write) {
        /* write the value straight into the worker's output (a record of a
         * FUSED_REF too: its answer, a record without a body, follows) */
        srv_cma *c = &s->cma[wrank];
        if (req->cma_done) { /* the job that summed the round wrote it (store.c) */
            errno = req->cma_done < 0 ? -req->cma_done : 0;
            if (req->cma_done < 0)
                cma_write_failed(s, ident, ident_len, &h, wrank);
            else
                cma_written(s, ident, ident_len, &h, wrank);
            return;
        }
        if (!srv_cma_alive(c)) {
            errno = EPERM;
            cma_write_failed(s, ident, ident_len, &h, wrank);
            return;
        }
        if (h.body_len < srv_store_offload_min(&s->store) || s->jobs == NULL) {
            if (srv_cma_copy(s->pool, c, 1, value->data, req->cma_dst, h.body_len) != 0)
                cma_write_failed(s, ident, ident_len, &h, wrank);
            else
                cma_written(s, ident, ident_len, &h, wrank);
            return;
        }
        write_job *j = calloc(1, sizeof *j);
        if (j == NULL) {
            h.status = KVS_ENOMEM;
            if (h.fuse)
                srv_fuse_answer(&s->fuser, &h, "server out of memory", NULL);
            else
                net_send_text(s->data, ident, ident_len, &h, "server out of memory");
            return;
        }
        *j = (write_job){.j = {write_run, write_done, req->priority, 0, NULL}, .s = s,
                         .cma = *c, .value = value, .dst = req->cma_dst, .h = h,
                         .wrank = wrank};
        atomic_fetch_add(&value->refs, 1);
        memcpy(j->ident, ident, ident_len < sizeof j->ident ? ident_len : sizeof j->ident);
        j->ident_len = ident_len < sizeof j->ident ? ident_len : sizeof j->ident;
        if (h.fuse) /* its record's answer comes with the job's end */
            srv_fuse_hold(&s->fuser, h.fuse, 1);
        srv_jobs_submit(s->jobs, &j->j);
        return;
    }
    char why[PROTO_ERRTEXT_MAX];
    int err = wrank >= 0 && wrank < s->outq->n
                  ? value_body(s, wrank, value, &h, &body, why, sizeof why)
                  : KVS_EPROTO;
    if (err) {
        if (err == KVS_EPROTO)
            snprintf(why, sizeof why, "no worker rank %d", wrank);
        h.status = err;
        h.body_len = 0;
        LOG(LOG_DEBUG, s->who, "store", "reply %s to %s key %llu: %s", kvs_errname(err),
            proto_type_name(req->type), (unsigned long long)req->key, why);
        met_error(s->met.reg, err);
        net_send_text(s->data, ident, ident_len, &h, why);
        return;
    }
    net_send(s->data, ident, ident_len, &h, &body);
    zmq_msg_close(&body);
}

/* The store's srv_hold_fn: the batch of a fused record holds its answers
 * while jobs that answer its records run (server/fuse.h). */
static void hold_answers(void *arg, uintptr_t fuse, int delta)
{
    srv *s = arg;
    srv_fuse_hold(&s->fuser, fuse, delta);
}

/* A worker offers direct memory access (HELLO): challenge it.  Its answer
 * (PROOF) is checked against the process it named (server/cma.h). */
static void on_hello(srv *s, const uint8_t *ident, size_t ident_len, int wrank,
                     const proto_hdr *h, const uint8_t *body)
{
    proto_hdr r = *h;
    char why[200];
    uint8_t challenge[PROTO_NONCE_LEN];
    zmq_msg_t m;
    r.sender = s->node_id;
    r.flags = 0;
    r.body_len = 0;
    r.type = PROTO_REPLY;
    if (!s->c->cma) {
        r.status = KVS_ENOTSUP;
        net_send_text(s->data, ident, ident_len, &r, "KVS_CMA=0 on this server");
        return;
    }
    int rc = srv_cma_hello(&s->cma[wrank], h->req_id, body, challenge, why, sizeof why);
    if (rc != 0) {
        r.status = rc;
        net_send_text(s->data, ident, ident_len, &r, why);
        return;
    }
    r.type = PROTO_CHALLENGE;
    r.body_len = PROTO_NONCE_LEN;
    if (zmq_msg_init_size(&m, PROTO_NONCE_LEN) != 0)
        return;
    memcpy(zmq_msg_data(&m), challenge, PROTO_NONCE_LEN);
    net_send(s->data, ident, ident_len, &r, &m);
    zmq_msg_close(&m);
}

static void on_proof(srv *s, const uint8_t *ident, size_t ident_len, int wrank,
                     const proto_hdr *h, const uint8_t *body)
{
    proto_hdr r = *h;
    char why[200];
    r.type = PROTO_REPLY;
    r.sender = s->node_id;
    r.flags = 0;
    r.body_len = 0;
    int rc = srv_cma_proof(&s->cma[wrank], h->req_id, body, why, sizeof why);
    if (rc != 0) {
        LOG(rc == KVS_EAUTH ? LOG_WARN : LOG_INFO, s->who, "net",
            "worker %d: no direct copies: %s", wrank, why);
        r.status = rc;
        net_send_text(s->data, ident, ident_len, &r, why);
        return;
    }
    LOG(LOG_INFO, s->who, "net", "worker %d (pid %d) proved it is on this host: direct memory "
        "copies", wrank, (int)s->cma[wrank].pid);
    net_send(s->data, ident, ident_len, &r, NULL);
}

/* A request whose data (if any) lies in the worker's memory: the store
 * reads it when it sums it (server/store.h), from the memory the worker
 * proved. */
static void on_cma_request(srv *s, const uint8_t *ident, size_t ident_len, int wrank,
                           proto_hdr *h, const uint8_t *desc)
{
    srv_cma *c = &s->cma[wrank];
    proto_hdr e = *h;
    e.type = PROTO_REPLY;
    e.sender = s->node_id;
    e.flags = 0;
    if (!srv_cma_alive(c)) {
        e.status = KVS_EPROTO;
        net_send_text(s->data, ident, ident_len, &e,
                      "data by reference from a worker that did not prove it is on this host");
        return;
    }
    char why[200];
    if (srv_cma_desc(h, desc, why, sizeof why) != 0) {
        e.status = KVS_EPROTO;
        net_send_text(s->data, ident, ident_len, &e, why);
        return;
    }
    if (h->cma_src)
        srv_met_in(&s->met, wrank, MET_PATH_CMA, h->body_len);
    if (srv_ctl_hold(s->ctl, ident, ident_len, wrank, h, NULL))
        return; /* a save or load is running: handled when it is done */
    srv_store_handle(&s->store, ident, ident_len, wrank, h, NULL);
}

/* A header cannot speak for another connection's worker.  A worker's data
 * connection carries the routing id "w<node id>-<random>" (set by libkvs;
 * ZeroMQ refuses a second connection with the same id); with a secret the
 * connection also proved "worker <node id>" in its handshake.  The first
 * connection that speaks for a worker is bound to it: a second one is
 * refused and the real worker keeps working. */
static int check_sender(srv *s, net_msg *m, const uint8_t *ident, size_t ident_len, int sender,
                        char *why, size_t whylen)
{
    char want[24];
    int n = snprintf(want, sizeof want, "w%d-", sender);
    int wrank = (sender - 9) / 2;
    if (ident_len <= (size_t)n || ident_len > SRV_IDENT_MAX || memcmp(want, ident, (size_t)n)) {
        snprintf(why, whylen, "sender %d does not match its connection", sender);
        return KVS_EPROTO;
    }
    if (s->c->security != CFG_SEC_NONE &&
        !net_auth_peer_is(net_auth_peer(&m->frames[1]), "worker", sender)) {
        snprintf(why, whylen, "sender %d did not prove that it is worker %d", sender, wrank);
        return KVS_EAUTH;
    }
    srv_bind *b = &s->bind[wrank];
    if (b->len == 0) {
        memcpy(b->ident, ident, ident_len);
        b->len = ident_len;
    } else if (b->len != ident_len || memcmp(b->ident, ident, ident_len) != 0) {
        snprintf(why, whylen, "worker %d is already bound to another connection", wrank);
        return KVS_EAUTH;
    }
    return 0;
}

/* A validated request from worker rank wrank; its body: nbody frames at
 * bodymsg (several only for data that is summed or copied). */
static void dispatch(srv *s, const uint8_t *ident, size_t ident_len, int wrank, proto_hdr *hp,
                     zmq_msg_t *bodymsg, int nbody)
{
    proto_hdr h = *hp;
    char why[256];
    int rc;
    proto_limits lim = {s->c->max_message};
    srv_met_request(&s->met, h.type);
    if (h.flags & PROTO_F_TRACE)
        h.t_arrive_ns = clock_ns();
    LOG(LOG_DEBUG, s->who, "net", "%s key %llu part %u round %llu from worker %d",
        proto_type_name(h.type), (unsigned long long)h.key, h.part,
        (unsigned long long)h.round, wrank);
    if (srv_ctl_type(h.type)) {
        srv_ctl_handle(s->ctl, ident, ident_len, wrank, &h,
                       bodymsg ? zmq_msg_data(bodymsg) : NULL);
        return;
    }
    if (h.type == PROTO_HELLO) {
        on_hello(s, ident, ident_len, wrank, &h, zmq_msg_data(bodymsg));
        return;
    }
    if (h.type == PROTO_PROOF) {
        on_proof(s, ident, ident_len, wrank, &h, zmq_msg_data(bodymsg));
        return;
    }
    if (h.flags & PROTO_F_CMA) {
        on_cma_request(s, ident, ident_len, wrank, &h, zmq_msg_data(bodymsg));
        return;
    }
    if (h.type == PROTO_FUSED || h.type == PROTO_FUSED_REF) {
        rc = srv_fuse_request(&s->fuser, &s->store, s->ctl, ident, ident_len, wrank, &h,
                              zmq_msg_data(bodymsg), bodymsg + 1, nbody - 1, &lim,
                              &s->cma[wrank], why, sizeof why);
        if (rc != 0) {
            s->dropped++;
            LOG_LIMITED(LOG_WARN, s->who, "net", "refused a %s message from worker %d (%llu bad "
                "messages so far): %s", proto_type_name(h.type), wrank,
                (unsigned long long)s->dropped, why);
            proto_hdr e = {.type = PROTO_ERROR, .status = rc, .sender = s->node_id,
                           .req_id = h.req_id};
            net_send_text(s->data, ident, ident_len, &e, why);
        }
        return;
    }
    srv_in in = {nbody == 1 ? zmq_msg_data(bodymsg) : NULL, bodymsg, nbody};
    if (srv_ctl_hold(s->ctl, ident, ident_len, wrank, &h, bodymsg ? &in : NULL))
        return; /* a save or load is running: handled when it is done */
    srv_store_handle(&s->store, ident, ident_len, wrank, &h, bodymsg ? &in : NULL);
}

static void on_data(net_sock *sock, net_msg *m, void *arg)
{
    srv *s = arg;
    proto_hdr h;
    char why[256];
    proto_limits lim = {s->c->max_message};
    (void)sock;
    const uint8_t *ident = zmq_msg_data(&m->frames[0]);
    size_t ident_len = zmq_msg_size(&m->frames[0]);
    zmq_msg_t *bodymsg;
    int nbody;
    int rc = net_msg_decode_frames(m, true, &lim, &h, &bodymsg, &nbody, why, sizeof why);
    if (rc == 0 && s->repl && srv_repl_type(h.type)) { /* from another server */
        rc = srv_repl_on_data(s->repl, m, ident, ident_len, &h, bodymsg, nbody, why,
                              sizeof why);
        if (rc == 0) {
            net_guard_trust(s->guard, net_msg_fd(m));
            return;
        }
    }
    if (rc == 0 && (h.sender < 9 || h.sender % 2 == 0 ||
                    (h.sender - 9) / 2 >= cfg_worker_slots(s->c))) {
        snprintf(why, sizeof why, "sender %d is not a worker of this job", h.sender);
        rc = KVS_EPROTO;
    }
    if (rc == 0 && !srv_store_is_member(&s->store, (h.sender - 9) / 2)) {
        snprintf(why, sizeof why, "worker slot %d is not a member of membership epoch %llu",
                 (h.sender - 9) / 2, (unsigned long long)s->store.epoch);
        rc = KVS_EMEMBERSHIP;
    }
    if (rc == 0)
        rc = check_sender(s, m, ident, ident_len, h.sender, why, sizeof why);
    if (rc == 0) {
        int fd = net_msg_fd(m);
        net_guard_trust(s->guard, fd); /* bound to a worker: never closed */
        net_pacer_see(s->pacer, (h.sender - 9) / 2, fd);
    }
    if (rc == 0 && h.type == PROTO_ANNOUNCE)
        return;
    if (rc == 0 && h.type != PROTO_INIT && h.type != PROTO_PUSH && h.type != PROTO_PULL &&
        h.type != PROTO_PUSHPULL && h.type != PROTO_HELLO && h.type != PROTO_PROOF &&
        h.type != PROTO_FUSED && h.type != PROTO_FUSED_REF && !srv_ctl_type(h.type)) {
        snprintf(why, sizeof why, "%s is not a data request", proto_type_name(h.type));
        rc = KVS_EPROTO;
    }
    if (rc != 0) {
        s->dropped++;
        met_error(s->met.reg, rc);
        LOG_LIMITED(LOG_WARN, s->who, "net", "dropped a malformed message (%llu so far): %s",
                    (unsigned long long)s->dropped, why);
        if (!net_guard_refused(s->guard, net_msg_fd(m), ident, ident_len))
            return; /* not (yet) a node of the job: no answer, the connection shut */
        proto_hdr e = {.type = PROTO_ERROR, .status = rc, .sender = s->node_id};
        if (m->nframes > 1) /* its request fails, rather than waits */
            e.req_id = proto_peek_req_id(zmq_msg_data(&m->frames[1]), zmq_msg_size(&m->frames[1]));
        net_send_text(s->data, ident, ident_len, &e, why);
        return;
    }
    int wrank = (h.sender - 9) / 2;
    /* (a fused message's frames after its records' are its records' own) */
    bool data_req = (!(h.flags & PROTO_F_CMA) &&
                     (h.type == PROTO_INIT || h.type == PROTO_PUSH ||
                      h.type == PROTO_PUSHPULL)) ||
                    h.type == PROTO_FUSED || h.type == PROTO_FUSED_REF;
    if (nbody <= 1 || data_req) {
        dispatch(s, ident, ident_len, wrank, &h, bodymsg, nbody);
        return;
    }
    /* a body that is parsed, not summed, in several frames: one copy */
    zmq_msg_t joined;
    if (zmq_msg_init_size(&joined, h.body_len) != 0) {
        proto_hdr e = {.type = PROTO_ERROR, .status = KVS_ENOMEM, .sender = s->node_id,
                       .req_id = h.req_id};
        net_send_text(s->data, ident, ident_len, &e, "server out of memory");
        return;
    }
    uint64_t off = 0;
    for (int i = 0; i < nbody; i++) {
        size_t n = zmq_msg_size(&bodymsg[i]);
        memcpy((uint8_t *)zmq_msg_data(&joined) + off, zmq_msg_data(&bodymsg[i]), n);
        off += n;
    }
    dispatch(s, ident, ident_len, wrank, &h, &joined, 1);
    zmq_msg_close(&joined);
}

/* The length of endpoint ep up to its port ("tcp://10.0.0.1" of
 * "tcp://10.0.0.1:9000"; all of it without a port). */
static size_t endpoint_host_len(const char *ep)
{
    const char *scheme = strstr(ep, "://"), *colon = strrchr(ep, ':');
    const char *host = scheme ? scheme + 3 : ep;
    return colon && colon >= host ? (size_t)(colon - ep) : strlen(ep);
}

/* Where the job's servers on this host (those of the node table serving at
 * this server's address) are at least its CPUs, no core is left for a job
 * to run beside the loops: parts up to 256 KiB stay on the loop
 * (DP_OFFLOAD_MIN_CROWDED). */
static void set_offload(srv *s, const proto_node *nodes, int n)
{
    size_t hl = endpoint_host_len(s->endpoint);
    int here = 0, cpus = red_cpus_online();
    for (int i = 0; i < n; i++)
        if (nodes[i].role == CFG_ROLE_SERVER && endpoint_host_len(nodes[i].endpoint) == hl &&
            strncmp(nodes[i].endpoint, s->endpoint, hl) == 0)
            here++;
    if (here < cpus)
        return;
    s->store.offload_min = DP_OFFLOAD_MIN_CROWDED;
    LOG(LOG_INFO, s->who, "job", "%d server%s on this host's %d CPU%s: key parts up to 256 KiB "
        "are summed on the loop", here, here == 1 ? "" : "s", cpus, cpus == 1 ? "" : "s");
}

/* The job's local groups from the node table (REGISTER_ACK): pushes that
 * stand for a whole group are checked against them (server/store.h).  A
 * table without groups leaves every worker alone.  Also where the sums run
 * (set_offload). */
static void set_groups(srv *s, const char *body, size_t len)
{
    int nn = s->c->num_server + s->c->num_worker, nw = s->c->num_worker;
    proto_node *nodes = calloc((size_t)nn, sizeof *nodes);
    int *g = calloc(2 * (size_t)nw, sizeof *g);
    char why[256];
    int n = nodes && g ? proto_parse_nodes(body ? body : "", len, nodes, nn, why, sizeof why)
                       : -1;
    bool any = false;
    for (int w = 0; w < nw && n >= 0; w++) {
        g[w] = -1 - w; /* alone */
        g[nw + w] = 1;
    }
    for (int i = 0; i < n; i++) {
        int w = (nodes[i].id - 9) / 2;
        if (nodes[i].role != CFG_ROLE_WORKER || nodes[i].id < 9 || nodes[i].id % 2 == 0 ||
            w >= nw || nodes[i].group < 0)
            continue;
        g[w] = nodes[i].group;
        g[nw + w] = nodes[i].lsize;
        any = any || nodes[i].lsize > 1;
    }
    if (n > 0)
        set_offload(s, nodes, n);
    if (n < 0)
        LOG(LOG_WARN, s->who, "job", "cannot read the node table's local groups: %s",
            nodes && g ? why : "out of memory");
    else if (any && srv_store_set_groups(&s->store, g, g + nw) != 0)
        LOG(LOG_WARN, s->who, "job", "out of memory keeping the local groups");
    free(g);
    free(nodes);
}

/* lamb's sums of a split key's part go to the other servers through the
 * scheduler (server/norms.h). */
static void send_norm(void *arg, proto_hdr *h, const char *text)
{
    srv *s = arg;
    if (s->link && net_link_send(s->link, h, text) != 0)
        LOG_LIMITED(LOG_WARN, s->who, "net", "could not send key %llu's norms to the scheduler",
                    (unsigned long long)h->key);
}

/* A new membership epoch (KVS_ELASTIC): the store switches, the slots that
 * left lose their connection binding and memory proof (a later worker may
 * take the slot), and the scheduler hears that this server switched. */
static void on_epoch(srv *s, const proto_hdr *h, const char *body, size_t len)
{
    char why[256];
    int slots = cfg_worker_slots(s->c);
    if (!s->c->elastic || h->round <= s->store.epoch) {
        LOG_LIMITED(LOG_WARN, s->who, "job", "ignored EPOCH %llu (now %llu%s)",
                    (unsigned long long)h->round, (unsigned long long)s->store.epoch,
                    s->c->elastic ? "" : ", not elastic");
        return;
    }
    if (srv_store_epoch(&s->store, h->round, body ? body : "", len, why, sizeof why) != 0) {
        LOG(LOG_ERROR, s->who, "job", "bad EPOCH from the scheduler: %s", why);
        stop(s, 1);
        return;
    }
    for (int w = 0; w < slots; w++) {
        if (srv_store_is_member(&s->store, w))
            continue;
        s->bind[w].len = 0;
        srv_cma_reset(&s->cma[w]);
        srv_cma_init(&s->cma[w]);
    }
    proto_hdr a = {.type = PROTO_EPOCH_ACK, .round = h->round};
    if (s->link && net_link_send(s->link, &a, NULL) != 0)
        LOG(LOG_WARN, s->who, "net", "could not acknowledge epoch %llu",
            (unsigned long long)h->round);
}

/* KVS_SCHEDULER_GRACE (net/link.h): the workers the scheduler said had
 * left go with our rejoin, and lamb's norms in flight are sent again. */
static void rejoin_extra(void *arg, char *buf, size_t cap)
{
    srv *s = arg;
    if (s->store.left && proto_rejoin_left_fmt(buf, cap, s->store.left, s->store.num_workers) < 0)
        buf[0] = '\0'; /* too many to say: the scheduler waits for them, then fails the job */
}

static void on_rejoin(void *arg)
{
    srv_store_norm_resend(&((srv *)arg)->store);
}

static void on_sched_msg(void *arg, const proto_hdr *h, const char *body, size_t len)
{
    srv *s = arg;
    char text[600];
    snprintf(text, sizeof text, "%.*s", (int)(len < 500 ? len : 500), body ? body : "");
    switch (h->type) {
    case PROTO_REGISTER_ACK:
        if (s->registered)
            return;
        if (h->key < 8 || h->key % 2 != 0 || (h->key - 8) / 2 >= (uint64_t)s->c->num_server) {
            LOG(LOG_ERROR, s->who, "job", "scheduler assigned an invalid id %llu",
                (unsigned long long)h->key);
            stop(s, 1);
            return;
        }
        s->node_id = (int)h->key;
        s->rank = (s->node_id - 8) / 2;
        s->registered = true;
        snprintf(s->who, sizeof s->who, "server %d", s->rank);
        net_link_registered(s->link, s->node_id);
        srv_ctl_set_rank(s->ctl, s->rank, h->round);
        set_groups(s, body, len);
        if (s->repl)
            srv_repl_registered(s->repl, s->rank, s->node_id, body, len);
        LOG(LOG_INFO, s->who, "job", "registered as rank %d, serving at %s", s->rank,
            s->endpoint);
        break;
    case PROTO_NODE_DEAD:
        LOG(LOG_WARN, s->who, "job", "%s; failing every waiting request", text);
        srv_store_fail_all(&s->store, text);
        break;
    case PROTO_EPOCH:
        on_epoch(s, h, body, len);
        break;
    case PROTO_PROMOTE:
        if (s->repl)
            srv_repl_promote(s->repl, h, body, len);
        break;
    case PROTO_NODE_LEFT:
        if (h->key >= 9 && h->key % 2 == 1) {
            LOG(LOG_INFO, s->who, "job", "%s", text);
            srv_store_worker_left(&s->store, (int)((h->key - 9) / 2));
        }
        break;
    case PROTO_NORM_PART:
        srv_store_norm_in(&s->store, h, body, len);
        break;
    case PROTO_SHUTDOWN:
        if (h->status)
            LOG(LOG_ERROR, s->who, "job", "the scheduler ended the job: it failed (%s: %s)",
                kvs_errname(h->status), text[0] ? text : "no reason given");
        else
            LOG(LOG_INFO, s->who, "job", "the scheduler ended the job (done)");
        stop(s, h->status ? 1 : 0);
        break;
    case PROTO_ERROR:
        LOG(LOG_ERROR, s->who, "job", "the scheduler refused this server: %s", text);
        stop(s, 1);
        break;
    case PROTO_REFUSED:
        LOG(LOG_ERROR, s->who, "job", "the scheduler refused this server (%s): %s",
            kvs_errname(h->status), text);
        stop(s, 2);
        break;
    default:
        LOG(LOG_WARN, s->who, "net", "ignored %s from the scheduler", proto_type_name(h->type));
    }
}

static void on_link_fail(void *arg, int err, const char *why)
{
    srv *s = arg;
    LOG(LOG_ERROR, s->who, "job", "%s", why);
    stop(s, err == KVS_EAUTH ? 2 : 1); /* another secret than the job's: configuration */
}

static void on_signal(uv_signal_t *h, int signum)
{
    srv *s = h->data;
    LOG(LOG_WARN, s->who, "job", "stopping on signal %d", signum);
    stop(s, 0);
}

static void close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

static void on_data_event(void *arg, int event, int value, const char *addr)
{
    srv *s = arg;
    (void)addr;
    net_guard_event(s->guard, event, value);
}

static int bind_data(srv *s, const char *host)
{
    char addr[600];
    void *z = net_sock_zmq(s->data);
    if (s->c->local) {
        int n = snprintf(addr, sizeof addr, "ipc://%s/kvs-server-%d.sock", s->c->tmpdir,
                         (int)getpid());
        if (n < 0 || (size_t)n >= sizeof addr) {
            LOG(LOG_ERROR, s->who, "net", "TMPDIR='%s': too long for an ipc:// address",
                s->c->tmpdir);
            return -1;
        }
        if (zmq_bind(z, addr) != 0) {
            LOG(LOG_ERROR, s->who, "net", "cannot bind %s: %s", addr, zmq_strerror(zmq_errno()));
            return -1;
        }
        snprintf(s->endpoint, sizeof s->endpoint, "%s", addr);
        return 0;
    }
    snprintf(addr, sizeof addr, "tcp://%s:%d", host, s->c->port);
    if (zmq_bind(z, addr) != 0) {
        LOG(LOG_ERROR, s->who, "net", "cannot bind %s (DMLC_NODE_HOST / KVS_PORT): %s", addr,
            zmq_strerror(zmq_errno()));
        return -1;
    }
    int port = net_bound_port(z, NULL, 0);
    snprintf(s->endpoint, sizeof s->endpoint, "tcp://%s:%d", host, port);
    if (s->c->port_file[0]) {
        int rc = net_write_port_file(s->c->port_file, port);
        if (rc != 0) {
            LOG(LOG_ERROR, s->who, "job", "cannot write KVS_PORT_FILE=%s: %s",
                s->c->port_file, strerror(-rc));
            return -1;
        }
    }
    return 0;
}

/* Open server s (zero-filled, who set) of job c on zctx and pool (the
 * caller's): per-worker state, the store, its job threads and controller,
 * the data socket (secured, bound to host, guarded, polled), metrics and the
 * fused answers: all but the link to the scheduler.  Returns 0, or 1 with
 * the reason logged; either way srv_close(s) releases what was opened.  The
 * fuzz harness (tests/fuzz/fuzz_server.c) opens a server this way and feeds
 * on_data. */
static int srv_open(srv *s, const cfg *c, void *zctx, red_pool *pool, const char *host)
{
    char err[512];
    s->c = c;
    s->zctx = zctx;
    s->pool = pool;
    uv_loop_init(&s->loop);
    srv_store_init(&s->store, cfg_worker_slots(c), pool, send_reply, s);
    if (c->elastic && srv_store_elastic(&s->store, c->num_worker) != 0)
        return 1;
    s->store.hold = hold_answers;
    s->store.norm_send = send_norm;
    s->store.norm_arg = s;
    int slots = cfg_worker_slots(c);
    s->cma = calloc((size_t)slots, sizeof *s->cma);
    s->bind = calloc((size_t)slots, sizeof *s->bind);
    s->outq = calloc(1, sizeof *s->outq + (size_t)slots * sizeof s->outq->bytes[0]);
    for (int i = 0; s->cma && i < slots; i++)
        srv_cma_init(&s->cma[i]);
    if (s->cma == NULL || s->bind == NULL || s->outq == NULL)
        return 1;
    atomic_init(&s->outq->refs, 1);
    s->outq->n = slots;
    if (srv_jobs_new(&s->loop, srv_jobs_threads_for(red_pool_threads(pool)), c->job_nice,
                     &s->jobs) != 0) {
        LOG(LOG_ERROR, s->who, "job", "cannot start the server's job threads");
        return 1;
    }
    s->store.jobs = s->jobs;
    s->store.max_held_bytes = c->max_queued_bytes;
    s->store.max_held_reqs = c->max_queued_reqs;
    s->store.max_keys = c->max_keys;
    s->store.max_key_bytes = c->max_key_bytes;
    s->store.cma = s->cma;
    if (srv_ctl_new(&s->store, &s->loop, c, &s->ctl) != 0)
        return 1;
    if (net_auth_new(&s->loop, zctx, c, s->who, &s->auth) != 0)
        return 1;
    if (net_sock_new(&s->loop, zctx, ZMQ_ROUTER, c->water_mark, on_data, s, &s->data) != 0)
        return 1;
    net_sock_set_prio(s->data, true); /* answers leave highest priority first */
    /* one frame of at most DP_FRAME_MAX (bigger bodies come in several):
     * what a peer can make the server buffer before it proved anything */
    net_sock_set_max(s->data, c->max_message < DP_FRAME_MAX ? c->max_message : DP_FRAME_MAX);
    if (net_auth_listen(s->auth, net_sock_zmq(s->data), NULL) != 0) {
        LOG(LOG_ERROR, s->who, "auth", "cannot secure the data socket (KVS_SECURITY=%s)",
            cfg_security_name(c->security));
        return 1;
    }
    if (bind_data(s, host) != 0)
        return 1;
    net_auth_set_target(s->auth, s->endpoint); /* workers prove against the table's entry */
    if (net_guard_new(&s->loop, c, s->who, &s->guard) != 0)
        return 1;
    s->pacer = net_pacer_new(c->link_gbps, cfg_worker_slots(c), 1, s->who, "worker");
    net_guard_set_flush(s->guard, (void (*)(void *))net_sock_drain_now, s->data);
    if (net_mon_new(&s->loop, zctx, net_sock_zmq(s->data),
                    NET_GUARD_EVENTS, on_data_event, s, &s->mon) != 0)
        LOG(LOG_WARN, s->who, "net", "no socket monitor: connections that never identify "
            "themselves are closed only by the handshake timeout");
    net_sock_start(s->data);
    if (srv_met_init(&s->met, c, &s->loop, &s->store, &s->data, &s->link, s->who, err,
                     sizeof err) != 0) {
        LOG(LOG_ERROR, s->who, "metrics", "%s", err);
        return 1;
    }
    srv_fuser_init(&s->fuser, &s->loop, s->data, &s->node_id);
    s->fuser.met = &s->met;
    if (c->replicas > 0 &&
        srv_repl_new(c, &s->loop, zctx, &s->store, s->data, &s->link, &s->repl) != 0) {
        LOG(LOG_ERROR, s->who, "repl", "out of memory starting replication");
        return 1;
    }
    return 0;
}

/* Close what srv_open opened (and the link); zctx and pool stay the
 * caller's. */
static void srv_close(srv *s)
{
    srv_jobs_stop(s->jobs); /* running jobs end; the others are dropped */
    srv_met_stop(&s->met);
    srv_ctl_stop(s->ctl); /* a checkpoint being written finishes first */
    srv_repl_free(s->repl); /* held answers are dropped: the job ends */
    s->repl = NULL;
    net_link_free(s->link);
    net_mon_free(s->mon);
    net_guard_free(s->guard);
    net_pacer_free(s->pacer);
    net_sock_free(s->data);
    net_auth_free(s->auth);
    uv_walk(&s->loop, close_walk, NULL);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    uv_loop_close(&s->loop);
    srv_ctl_free(s->ctl);
    srv_jobs_free(s->jobs);
    srv_store_fini(&s->store);
    srv_met_fini(&s->met);
    srv_fuser_fini(&s->fuser);
    for (int i = 0; s->cma && i < cfg_worker_slots(s->c); i++)
        srv_cma_reset(&s->cma[i]);
    free(s->cma);
    free(s->bind);
    outq_unref(s->outq); /* replies still queued in ZeroMQ hold it until freed */
    s->outq = NULL;
}

int srv_run(const cfg *c)
{
    srv *s = calloc(1, sizeof *s);
    char host[CFG_HOST_MAX], err[512];
    red_pool *pool;
    int code = 1;
    if (s == NULL)
        return 1;
    cfg_node_who(c, s->who, sizeof s->who);
    if (cfg_resolve_host(c, host, sizeof host, err, sizeof err) != 0) {
        LOG(LOG_ERROR, s->who, "cfg", "%s", err);
        free(s);
        return 2;
    }
    if (red_pool_new(c->reduction_nthreads, c->bigarray_bound, &pool) != 0) {
        LOG(LOG_ERROR, s->who, "job", "cannot start %d reduction threads",
            c->reduction_nthreads);
        free(s);
        return 1;
    }
    red_pool_set_nice(pool, c->job_nice); /* (validated: 0..19, PRIO_IDLE or PRIO_AUTO) */
    if (c->job_nice == PRIO_AUTO && !prio_auto_usable())
        LOG(LOG_INFO, s->who, "job", "KVS_JOB_NICE=auto: this process may not move a thread "
            "back from SCHED_IDLE (that needs CAP_SYS_NICE or RLIMIT_NICE >= %d), so its job "
            "threads run at niceness %d instead", 20 - PRIO_AUTO_NICE, PRIO_AUTO_NICE);
    void *zctx = zmq_ctx_new();
    net_raise_nofile(s->who);
    if (srv_open(s, c, zctx, pool, host) != 0)
        goto out;
    if (net_check_host(c->root_uri, "DMLC_PS_ROOT_URI", err, sizeof err) != 0) {
        LOG(LOG_ERROR, s->who, "net", "%s", err);
        goto out;
    }
    net_link_cbs cbs = {on_sched_msg, on_link_fail, rejoin_extra, on_rejoin};
    /* our host, for the scheduler's view of which local groups this server
     * reads directly (proto_register_host) */
    char hostinfo[64];
    snprintf(hostinfo, sizeof hostinfo, "pidns=%llx cma=%d", (unsigned long long)net_pidns(),
             c->cma && c->replicas == 0);
    if (net_link_new(&s->loop, zctx, c, CFG_ROLE_SERVER, host, s->endpoint, c->server_id,
                     hostinfo, s->who, &cbs, s, &s->link) != 0)
        goto out;
    uv_signal_init(&s->loop, &s->sigint);
    uv_signal_init(&s->loop, &s->sigterm);
    s->sigint.data = s->sigterm.data = s;
    uv_signal_start(&s->sigint, on_signal, SIGINT);
    uv_signal_start(&s->sigterm, on_signal, SIGTERM);
    LOG(LOG_INFO, s->who, "net", "serving at %s; registering with %s:%d", s->endpoint,
        c->root_uri, c->root_port);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    code = s->exit_code;
    LOG(LOG_INFO, s->who, "job", "%llu rounds, %llu bytes summed, %llu values written as "
        "summed, %llu bad messages dropped, peak memory (VmHWM) %llu KiB, %llu raises of "
        "starved job threads, %llu jobs off the loop", (unsigned long long)s->store.rounds_done,
        (unsigned long long)s->store.bytes_summed, (unsigned long long)s->store.cma_fused,
        (unsigned long long)s->dropped, mem_peak_kib(), (unsigned long long)prio_guard_raises(),
        (unsigned long long)srv_jobs_submitted(s->jobs));
out:
    srv_close(s);
    zmq_ctx_term(zctx);
    red_pool_free(pool);
    free(s);
    return code;
}
