/* fuse.c - see fuse.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/datapath.h"
#include "common/log.h"
#include "server/cma.h"
#include "server/ctl.h"
#include "server/fuse.h"
#include "server/metrics.h"

struct srv_fuse {
    srv_fuse *next, *prev; /* fuser->all */
    srv_fuse *dnext;       /* fuser->dirty */
    bool dirty;
    bool handing;          /* records are still being handed to the store */
    uint8_t ident[64];
    size_t ident_len;
    uint64_t req_id;       /* the FUSED message's */
    uint64_t left;         /* records not answered yet */
    uint64_t nout;         /* answers collected, not sent */
    uint64_t hold;         /* jobs in flight whose end answers some of its records
                            * (srv_fuse_hold): its collected answers wait for them */
    bool mixed;            /* its records have different priorities: never held (a
                            * first layer's answer must not wait for later layers) */
    int sender;            /* our node id in those answers (all the same: the server may
                            * learn its id from the scheduler between two of them) */
    uint8_t *out;          /* the collected answer records */
    uint64_t len, cap;
    zmq_msg_t *frames;     /* their record frames (PROTO_F_FRAME answers), in order */
    int nframes, fcap;
    uint64_t fbytes;       /* bytes in frames */
};

static void frames_close(srv_fuse *b)
{
    for (int i = 0; i < b->nframes; i++)
        zmq_msg_close(&b->frames[i]);
    b->nframes = 0;
    b->fbytes = 0;
}

static void batch_free(srv_fuser *f, srv_fuse *b)
{
    if (b->prev)
        b->prev->next = b->next;
    else
        f->all = b->next;
    if (b->next)
        b->next->prev = b->prev;
    frames_close(b);
    free(b->frames);
    free(b->out);
    free(b);
}

static void free_body(void *data, void *hint)
{
    (void)hint;
    free(data);
}

/* Send what b collected as one FUSED_REPLY. */
static void batch_send(srv_fuser *f, srv_fuse *b)
{
    zmq_msg_t body;
    if (b->nout == 0)
        return;
    proto_hdr h = {.type = PROTO_FUSED_REPLY, .sender = b->sender, .req_id = b->req_id,
                   .count = b->nout, .body_len = b->len};
    if (zmq_msg_init_data(&body, b->out, b->len, free_body, NULL) != 0) {
        /* cannot happen for a non-NULL buffer; the records are lost: log it */
        LOG(LOG_ERROR, "server", "fuse", "cannot send %llu answers: out of memory",
            (unsigned long long)b->nout);
        free(b->out);
        frames_close(b);
    } else {
        net_sendv(f->sock, b->ident, b->ident_len, &h, &body, b->frames, b->nframes);
        zmq_msg_close(&body);
        frames_close(b); /* moved: closing them is harmless */
    }
    b->out = NULL;
    b->len = b->cap = b->nout = 0;
}

static void on_idle(uv_idle_t *h)
{
    srv_fuser *f = h->data;
    srv_fuse *b = f->dirty, *held = NULL;
    f->dirty = NULL;
    uv_idle_stop(&f->idle);
    while (b) {
        srv_fuse *n = b->dnext;
        if (b->hold > 0) { /* more answers come with its jobs: stays dirty */
            b->dnext = held;
            held = b;
            b = n;
            continue;
        }
        b->dirty = false;
        b->dnext = NULL;
        batch_send(f, b);
        if (b->left == 0 && !b->handing)
            batch_free(f, b);
        b = n;
    }
    f->dirty = held; /* srv_fuse_hold starts the idle handle again */
}

void srv_fuser_init(srv_fuser *f, uv_loop_t *loop, net_sock *sock, const int *node_id)
{
    memset(f, 0, sizeof *f);
    uv_idle_init(loop, &f->idle);
    f->idle.data = f;
    f->sock = sock;
    f->node_id = node_id;
}

void srv_fuser_fini(srv_fuser *f)
{
    while (f->all)
        batch_free(f, f->all);
    f->dirty = NULL;
}

int srv_fuse_request(srv_fuser *f, srv_store *st, struct srv_ctl *ctl, const uint8_t *ident,
                     size_t ident_len, int wrank, const proto_hdr *h, const uint8_t *body,
                     zmq_msg_t *frames, int nframes, const proto_limits *lim, srv_cma *cma,
                     char *why, size_t whylen)
{
    proto_hdr rec;
    const uint8_t *data;
    uint64_t off = 0, nref = 0;
    int rc, prio = 0, fi = 0;
    bool mixed = false;
    for (uint64_t i = 0; i < h->count; i++) {
        if ((rc = proto_fused_next(h->type, h->sender, body, h->body_len, &off, lim, &rec,
                                   &data, why, whylen)) != 0)
            return rc;
        if (i == 0)
            prio = rec.priority;
        mixed |= rec.priority != prio;
        if (rec.flags & PROTO_F_FRAME) {
            if (fi >= nframes || zmq_msg_size(&frames[fi]) != rec.body_len) {
                snprintf(why, whylen, "%s: record %llu's body of %llu bytes: %s",
                         proto_type_name(h->type), (unsigned long long)i,
                         (unsigned long long)rec.body_len,
                         fi >= nframes ? "no record frame left for it"
                                       : "its record frame has another size");
                return KVS_EPROTO;
            }
            fi++;
        }
        if (rec.flags & PROTO_F_CMA) {
            char inner[200];
            if (srv_cma_desc(&rec, data, inner, sizeof inner) != 0) {
                snprintf(why, whylen, "%s: record %llu: %s", proto_type_name(h->type),
                         (unsigned long long)i, inner);
                return KVS_EPROTO;
            }
            nref++;
        }
    }
    if (off != h->body_len) {
        snprintf(why, whylen, "%s: %llu bytes after its %llu records", proto_type_name(h->type),
                 (unsigned long long)(h->body_len - off), (unsigned long long)h->count);
        return KVS_EPROTO;
    }
    if (fi != nframes) {
        snprintf(why, whylen, "%s: %d record frames for %d records that have one",
                 proto_type_name(h->type), nframes, fi);
        return KVS_EPROTO;
    }
    /* one check for the whole message: every record by reference names the
     * memory of the process that proved itself on this connection */
    if (nref > 0 && (cma == NULL || !srv_cma_alive(cma))) {
        snprintf(why, whylen, "%s: %llu records by reference from a worker that did not prove "
                 "it is on this host", proto_type_name(h->type), (unsigned long long)nref);
        return KVS_EPROTO;
    }
    srv_fuse *b = calloc(1, sizeof *b);
    if (b == NULL || ident_len > sizeof b->ident) {
        free(b);
        snprintf(why, whylen, b ? "routing id of %zu bytes" : "server out of memory",
                 ident_len);
        return b ? KVS_EPROTO : KVS_ENOMEM;
    }
    memcpy(b->ident, ident, ident_len);
    b->ident_len = ident_len;
    b->req_id = h->req_id;
    b->left = h->count;
    b->mixed = mixed;
    b->handing = true;
    b->next = f->all;
    if (f->all)
        f->all->prev = b;
    f->all = b;
    f->batches++;
    f->records += h->count;
    uint64_t arrived = clock_ns();
    off = 0;
    fi = 0;
    for (uint64_t i = 0; i < h->count; i++) {
        proto_fused_next(h->type, h->sender, body, h->body_len, &off, lim, &rec, &data, why,
                         whylen);
        rec.fuse = (uintptr_t)b;
        zmq_msg_t *frame = NULL;
        if (rec.flags & PROTO_F_FRAME) { /* as if it had come alone with its frame */
            frame = &frames[fi++];
            data = zmq_msg_data(frame);
            rec.flags &= (uint16_t)~PROTO_F_FRAME;
        }
        if (rec.flags & PROTO_F_CMA) { /* the store reads the worker's memory itself */
            srv_cma_desc(&rec, data, why, whylen);
            data = NULL;
            if (rec.cma_src && f->met)
                srv_met_in(f->met, wrank, MET_PATH_CMA, rec.body_len);
        }
        if (rec.flags & PROTO_F_TRACE) /* a traced record: TIMING before its answer */
            rec.t_arrive_ns = arrived;
        if (f->met)
            srv_met_request(f->met, rec.type);
        srv_in in = {data, frame, frame ? 1 : 0};
        if (!srv_ctl_hold(ctl, ident, ident_len, wrank, &rec, data ? &in : NULL))
            srv_store_handle(st, ident, ident_len, wrank, &rec, data ? &in : NULL);
    }
    b->handing = false;
    if (b->left == 0 && !b->dirty && b->hold == 0)
        batch_free(f, b); /* everything answered and already sent */
    return 0;
}

/* Room for one more record of n bytes in b->out (sending what b holds when
 * it is full).  false: out of memory. */
static bool reserve(srv_fuser *f, srv_fuse *b, uint64_t n)
{
    if (b->nout > 0 && b->len + b->fbytes + n > DP_FUSE_REPLY_FLUSH)
        batch_send(f, b);
    if (b->len + n <= b->cap)
        return true;
    uint64_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n)
        cap *= 2;
    uint8_t *p = realloc(b->out, cap);
    if (p == NULL)
        return false;
    b->out = p;
    b->cap = cap;
    return true;
}

/* The answer record reply joins b's collection (room reserved). */
static void collect(srv_fuser *f, srv_fuse *b, proto_hdr *reply, const void *data)
{
    if (b->nout == 0)
        b->sender = *f->node_id;
    reply->sender = b->sender;
    b->len += proto_fused_put(b->out + b->len, reply, data);
    b->nout++;
}

/* No memory to collect reply: the record is answered alone, with the error. */
static void answer_alone_nomem(srv_fuser *f, srv_fuse *b, proto_hdr *reply)
{
    reply->status = KVS_ENOMEM;
    reply->flags &= (uint16_t)~PROTO_F_FRAME;
    net_send_text(f->sock, b->ident, b->ident_len, reply,
                  "server out of memory answering a fused request");
}

/* One more record of b answered: its answers leave on the next turn. */
static void answered(srv_fuser *f, srv_fuse *b)
{
    b->left--;
    if (!b->dirty) {
        b->dirty = true;
        b->dnext = f->dirty;
        f->dirty = b;
        uv_idle_start(&f->idle, on_idle);
    }
}

void srv_fuse_answer(srv_fuser *f, proto_hdr *reply, const char *text, const void *data)
{
    srv_fuse *b = (srv_fuse *)reply->fuse;
    char buf[PROTO_ERRTEXT_MAX];
    if (reply->status != 0) {
        snprintf(buf, sizeof buf, "%s", text ? text : "");
        reply->body_len = strlen(buf);
        data = buf;
    } else if (data == NULL) {
        reply->body_len = 0;
    } else if (!PROTO_CODEC(reply->flags)) { /* (compressed: body_len is the body's) */
        reply->body_len = reply->count * kvs_dtype_size((kvs_dtype)reply->dtype);
    }
    reply->fuse = 0;
    if (!reserve(f, b, proto_fused_rec_len(reply->body_len)))
        answer_alone_nomem(f, b, reply);
    else
        collect(f, b, reply, data);
    answered(f, b);
}

void srv_fuse_answer_frame(srv_fuser *f, proto_hdr *reply, zmq_msg_t *value)
{
    srv_fuse *b = (srv_fuse *)reply->fuse;
    uint64_t n = zmq_msg_size(value);
    reply->fuse = 0;
    if (b->nout > 0 && b->len + b->fbytes + PROTO_HDR_SIZE + n > DP_FUSE_REPLY_FLUSH)
        batch_send(f, b);
    if (b->nframes == b->fcap) {
        int cap = b->fcap ? 2 * b->fcap : 16;
        zmq_msg_t *nf = realloc(b->frames, (size_t)cap * sizeof *nf);
        if (nf != NULL) {
            b->frames = nf;
            b->fcap = cap;
        }
    }
    if (b->nframes == b->fcap || !reserve(f, b, PROTO_HDR_SIZE)) {
        zmq_msg_close(value);
        answer_alone_nomem(f, b, reply);
    } else {
        reply->flags |= PROTO_F_FRAME;
        reply->body_len = n;
        collect(f, b, reply, NULL);
        zmq_msg_init(&b->frames[b->nframes]);
        zmq_msg_move(&b->frames[b->nframes++], value);
        b->fbytes += n;
    }
    answered(f, b);
}

void srv_fuse_hold(srv_fuser *f, uintptr_t fuse, int delta)
{
    srv_fuse *b = (srv_fuse *)fuse;
    if (b->mixed)
        return;
    if (delta > 0) {
        b->hold++;
        return;
    }
    if (b->hold == 0 || --b->hold > 0)
        return;
    if (b->dirty)
        uv_idle_start(&f->idle, on_idle); /* send what it held */
    else if (b->left == 0 && !b->handing)
        batch_free(f, b); /* its records were answered while it was held */
}
