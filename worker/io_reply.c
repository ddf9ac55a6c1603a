/* io_reply.c - libkvs's I/O thread: the servers' answers (io_int.h). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/sizes.h"
#include "worker/compress.h"
#include "worker/metrics.h"
#include "worker/trace.h"
#include "worker/io_int.h"
#include "worker/op.h"
#include "worker/wrk_int.h"

/* The reply to traced request q arrived: "replied", and "done" when it was
 * the last part of its key (I/O thread, before the op is released). */
static void trace_replied(kvs_store *s, const wrk_req *q, int status)
{
    if (!s->trace || q->op == NULL || !q->op->trace_id)
        return;
    wrk_io_trace_req(s, q, TEV_REPLIED, 0, 0, 0, status);
    if (q->op->tleft && --q->op->tleft[q->kidx] == 0)
        wrk_io_trace_req(s, q, TEV_DONE, 0, 0, 0, status);
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
        wrk_io_batch_fail(s, h.req_id, st, text);
        return;
    }
    if (q == NULL && h.type == PROTO_ERROR && h.req_id == 0 &&
        (h.status == 0 || h.status == KVS_EPROTO || h.status == KVS_ETOOBIG)) {
        /* a malformed message of ours, refused before it could name its
         * request (its header frame was not a header): some request of ours
         * will never be answered, so nothing waits for it.  (A refused
         * ANNOUNCE, which has no request, names none either: a worker not
         * yet in the servers' membership epoch, or whose slot is bound to
         * another connection, keeps going.) */
        char text[PROTO_ERRTEXT_MAX + 96];
        snprintf(text, sizeof text, "server %d refused a message it could not match to a request: "
                 "%.*s", (h.sender - 8) / 2, (int)h.body_len, body ? body : "");
        wrk_io_fail_all(s, h.status ? h.status : KVS_EPROTO, text);
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
            wrk_io_trace_req(s, q, TEV_SERVER, le_get64(b), le_get64(b + 8), le_get64(b + 16), 0);
        }
        return;
    }
    wrk_reqmap_del(&s->reqs, h.req_id);
    wrk_met_reply(s, q, &h, h.type == PROTO_ERROR && h.status == 0 ? KVS_EPROTO : h.status);
    trace_replied(s, q, h.type == PROTO_ERROR && h.status == 0 ? KVS_EPROTO : h.status);
    if (s->io_failed)
        wrk_io_close_idle(s);
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
            wrk_io_send(s, held);
            held = n;
        }
        return;
    }
    if (q->batch)
        wrk_io_batch_done(s, q->batch);
    if (h.type == PROTO_ERROR || h.status != 0) {
        char text[PROTO_ERRTEXT_MAX + 64];
        int st = h.status ? h.status : KVS_EPROTO;
        snprintf(text, sizeof text, "server %d: %.*s", q->server, (int)h.body_len,
                 body ? body : kvs_strerror(st));
        wrk_op_release(s, q->op, st, text);
        return;
    }
    /* a collective's answer carries its own key (ctl.c) */
    if (h.type != PROTO_REPLY ||
        (q->op->type != WRK_OP_CTL && (h.key != q->h.key || h.part != q->h.part))) {
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
    } else if (q->nouts > 0 && PROTO_CODEC(h.flags)) { /* the round's sum, compressed */
        if (wrk_codec_reply(&h, body, &q->h, q->outs[0], why, sizeof why) != 0) {
            char text[sizeof why + 32];
            snprintf(text, sizeof text, "server %d: %s", q->server, why);
            wrk_op_release(s, q->op, KVS_EPROTO, text);
            return;
        }
        for (int i = 1; i < q->nouts; i++)
            memcpy(q->outs[i], q->outs[0], h.count * sizeof(float));
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
    const char *owner_why = NULL;
    int err = q->op->ops && q->op->ops->reply ? q->op->ops->reply(s, q, &h, body, &owner_why)
                                              : 0;
    wrk_op_release(s, q->op, err, err ? owner_why : NULL);
}

/* A message from a server: a lone answer or a FUSED_REPLY of several. */
void wrk_io_on_server(net_sock *sock, net_msg *m, void *arg)
{
    kvs_store *s = arg;
    proto_hdr h, rec;
    char why[256];
    proto_limits lim = {s->c.max_message};
    zmq_msg_t *bodymsg;
    int nbody, fi = 1;
    int rc = net_msg_decode_frames(m, false, &lim, &h, &bodymsg, &nbody, why, sizeof why);
    if (rc == 0 && nbody > 1 && h.type != PROTO_FUSED_REPLY) {
        snprintf(why, sizeof why, "a %s in %d body frames", proto_type_name(h.type), nbody);
        rc = KVS_EPROTO;
    }
    if (rc != 0) {
        LOG_LIMITED(LOG_WARN, s->who, "net", "dropped a malformed message from a server: %s", why);
        return;
    }
    int r = (h.sender - 8) / 2;
    if (s->pacer && h.sender >= 8 && h.sender % 2 == 0 && r < s->c.num_server &&
        s->servers[r] == sock)
        net_pacer_see(s->pacer, r, net_msg_fd(m));
    const char *body = bodymsg ? zmq_msg_data(bodymsg) : NULL;
    if (h.type != PROTO_FUSED_REPLY) {
        on_reply(s, &h, body);
        return;
    }
    uint64_t off = 0;
    for (uint64_t i = 0; i < h.count; i++) {
        const uint8_t *data;
        rc = proto_fused_next(PROTO_FUSED_REPLY, h.sender, (const uint8_t *)body, h.body_len,
                              &off, &lim, &rec, &data, why, sizeof why);
        if (rc == 0 && (rec.flags & PROTO_F_FRAME)) { /* its value is the next record frame */
            if (fi < nbody && zmq_msg_size(&bodymsg[fi]) == rec.body_len) {
                data = zmq_msg_data(&bodymsg[fi++]);
                rec.flags &= (uint16_t)~PROTO_F_FRAME; /* as if it had come alone */
            } else {
                snprintf(why, sizeof why, "record %llu of a FUSED_REPLY: %s",
                         (unsigned long long)i, fi < nbody ? "its record frame has another size"
                                                           : "no record frame left for it");
                rc = KVS_EPROTO;
            }
        }
        if (rc != 0) {
            LOG(LOG_WARN, s->who, "net", "dropped the rest of a malformed message from a "
                "server: %s", why);
            /* the records not read yet belong to the FUSED message it answers:
             * fail that message's requests still waiting, or they would wait
             * for answers that never come */
            char text[320];
            snprintf(text, sizeof text, "server %d sent a malformed answer: %s",
                     (h.sender - 8) / 2, why);
            wrk_io_batch_fail(s, h.req_id, KVS_EPROTO, text);
            return;
        }
        on_reply(s, &rec, (const char *)data);
    }
    if (off != h.body_len || fi != nbody)
        LOG(LOG_WARN, s->who, "net", "a FUSED_REPLY from a server has %llu bytes and %d record "
            "frames after its %llu records", (unsigned long long)(h.body_len - off), nbody - fi,
            (unsigned long long)h.count);
}
