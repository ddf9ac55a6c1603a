/* fuzz_worker.c - fuzz target for a worker's handling of what comes from the
 * network: the servers' answers (worker/io_reply.c: lone REPLY, ERROR,
 * TIMING and CHALLENGE messages, FUSED_REPLY records and their record
 * frames) and the scheduler's messages (worker/io_hello.c), in-process.
 *
 * A store is put together by hand as the op engine's unit tests do
 * (tests/unit/fakestore.h): a job of FZ_SERVERS servers whose I/O thread
 * never runs and whose servers have no connections.  The input first
 * submits up to FZ_OPS pushes, pulls and pushpulls (keys 0..3, float32 or
 * float16, 1 to 300 elements, so that keys above the bound of 64 elements
 * are cut into a part per server), then every request is numbered and put
 * in flight as the I/O thread would send it.  The rest of the input is
 * messages, handed over as net.c and link.c do: mostly near-valid answers
 * to the requests in flight (their key, part, count and dtype, then damaged
 * by fz_finish), some of them fused, and the scheduler's (sched_msg).  At
 * the end what was not answered fails as a broken job would, and every
 * wait returns.
 *
 * Input: a byte (bit 0: the servers are replicated, promotions apply); per
 * key a u16 count and a dtype byte (bit 0: float16); an op byte per op (bits
 * 0-1 push, pull, pushpull or none; bits 2-3 the key); then messages, each
 * led by a kind byte (6 mod 8: from the scheduler; else build()).
 */
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz_msg.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/unit/fakestore.h"
#include "worker/io_int.h"
#include "worker/op.h"
#include "worker/wrk_int.h"

#define FZ_SERVERS 2
#define FZ_OPS 4
#define FZ_MSGS 24
#define FZ_KEYS 4
#define FZ_MAX_COUNT 300

static cfg fz_cfg;

static kvs_store *store_new(void)
{
    kvs_store *s = fake_store_new(FZ_SERVERS);
    if (s == NULL)
        abort();
    s->c = fz_cfg;
    s->num_workers = 1;
    s->routing.bigarray_bound = 64;
    return s;
}

/* A request as it went out (its header, its server): answers are made from
 * these, whether or not the request is still in flight. */
typedef struct sent {
    proto_hdr h;
    int server;
} sent;

/* A message from the input's kind byte k: 0-3 an answer to request in flight
 * number r (REPLY of its value, ERROR, TIMING, CHALLENGE), 4 a FUSED_REPLY of
 * answers to several, 5 a header from the input alone. */
static void build(fz_in *in, const sent *live, size_t nlive, net_msg *m)
{
    static uint8_t body[FZ_BODY_MAX], recbody[FZ_BODY_MAX];
    static uint8_t frame[3][FZ_BODY_MAX];
    size_t flen[3] = {0}, blen = 0;
    int nframes = 0;
    proto_hdr h;
    uint8_t k = fz_u8(in);
    memset(&h, 0, sizeof h);
    const sent *q = nlive ? &live[fz_u8(in) % nlive] : NULL;
    if (q && k % 8 < 5) { /* near-valid: the request's own fields */
        h = q->h;
        h.body_len = 0;
        h.flags = 0;
        h.sender = proto_server_id(q->server);
    } else {
        fz_hdr_fields(in, &h);
        h.sender = (int32_t)(8 + 2 * (fz_u8(in) % 3));
    }
    switch (k % 8) {
    case 0: case 5: /* a value: the request's count, or the input's */
        h.type = PROTO_REPLY;
        if (k & 0x10)
            h.flags |= PROTO_F_CMA;
        else if (k & 0x20)
            h.flags |= (uint16_t)((1 + fz_u8(in) % 4) << PROTO_CODEC_SHIFT);
        blen = fz_data_body(in, &h, body);
        if (k & 0x40)
            h.status = -(int32_t)(fz_u8(in) % 20);
        break;
    case 1: { /* an error */
        static const char *const texts[] = {"bad key", "", "server out of memory"};
        h.type = PROTO_ERROR;
        h.status = -(int32_t)(fz_u8(in) % 20);
        blen = fz_text_body(in, texts, 3, body);
        h.body_len = blen;
        break;
    }
    case 2: /* a traced request's timing */
        h.type = PROTO_TIMING;
        fz_bytes(in, body, PROTO_TIMING_LEN);
        blen = h.body_len = PROTO_TIMING_LEN;
        break;
    case 3: /* a challenge to a HELLO we never sent */
        h.type = PROTO_CHALLENGE;
        fz_bytes(in, body, PROTO_NONCE_LEN);
        blen = h.body_len = PROTO_NONCE_LEN;
        break;
    case 4: { /* answers to up to 4 requests in one message */
        int n = 1 + fz_u8(in) % 4;
        proto_hdr outer = h;
        outer.type = PROTO_FUSED_REPLY;
        for (int i = 0; i < n && nlive; i++) {
            const sent *r = &live[fz_u8(in) % nlive];
            proto_hdr rec = r->h;
            uint8_t how = fz_u8(in);
            rec.type = (how & 1) ? PROTO_ERROR : PROTO_REPLY;
            rec.flags = 0;
            rec.sender = outer.sender;
            rec.status = (how & 1) ? -1 : 0;
            rec.body_len = 0;
            size_t rlen = (how & 1) ? 0 : fz_data_body(in, &rec, recbody);
            if (rlen < rec.body_len) /* a record holds what it declares */
                rec.body_len = rlen;
            if ((how & 2) && !(how & 1) && nframes < 3) {
                rec.flags |= PROTO_F_FRAME;
                memcpy(frame[nframes], recbody, rlen);
                flen[nframes++] = (how & 4) ? rlen / 2 : rlen; /* or a frame too short */
            }
            if (blen + proto_fused_rec_size(&rec) > FZ_BODY_MAX)
                break;
            blen += proto_fused_put(body + blen, &rec, recbody);
            outer.count = (uint64_t)i + 1;
        }
        outer.body_len = blen;
        h = outer;
        break;
    }
    default: /* any type, as the input says */
        h.type = fz_u8(in);
        blen = fz_data_body(in, &h, body);
        break;
    }
    /* a worker's DEALER receives no routing id: frames from the header on */
    fz_finish(in, m, "", 0, &h, body, blen);
    for (int i = 1; i < m->nframes; i++)
        zmq_msg_move(&m->frames[i - 1], &m->frames[i]);
    zmq_msg_close(&m->frames[m->nframes - 1]);
    m->nframes--;
    m->total--;
    for (int i = 0; i < nframes; i++)
        fz_msg_add(m, frame[i], flen[i]);
}

/* A message from the scheduler (kind byte 6): the answer to a barrier or an
 * exit (for a request in flight to a server, or none), a death, a promotion
 * (the store is replicated: bit 3), the job's end, a refusal. */
static void sched_msg(fz_in *in, kvs_store *s, const sent *live, size_t nlive)
{
    static const int types[] = {PROTO_BARRIER_DONE, PROTO_EXIT_ACK, PROTO_NODE_DEAD,
                                PROTO_PROMOTE,      PROTO_SHUTDOWN, PROTO_REFUSED,
                                PROTO_ERROR,        PROTO_EPOCH};
    static const char *const texts[] = {"server 1 (127.0.0.1) died: killed", "0 1", "1 1",
                                        "0 0", "bad secret"};
    uint8_t body[FZ_BODY_MAX + 1];
    proto_hdr h;
    uint8_t k = fz_u8(in);
    memset(&h, 0, sizeof h);
    fz_hdr_fields(in, &h);
    h.type = (uint16_t)types[(k >> 4) % 8];
    h.sender = PROTO_SCHEDULER_ID;
    if (nlive && (k & 8))
        h.req_id = live[fz_u8(in) % nlive].h.req_id;
    if (h.type == PROTO_NODE_DEAD || h.type == PROTO_PROMOTE) {
        h.key = 8 + fz_u8(in) % 6;   /* a server or worker id, or one out of range */
        h.round = 8 + fz_u8(in) % 6; /* PROMOTE: the heir */
    }
    h.status = -(int32_t)(fz_u8(in) % 20);
    size_t len = fz_text_body(in, texts, sizeof texts / sizeof texts[0], body);
    body[len] = '\0';
    wrk_io_on_sched_msg(s, &h, len ? (const char *)body : NULL, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool once;
    fz_in in = {data, size, 0};
    static float vals[FZ_OPS][FZ_MAX_COUNT], outs[FZ_OPS][FZ_MAX_COUNT];
    if (!once) {
        fz_setup(&fz_cfg, CFG_ROLE_WORKER, FZ_SERVERS, 1, "fuzz_worker");
        once = true;
    }
    kvs_store *s = store_new();
    if (fz_u8(&in) & 1) { /* replicated servers: promotions apply */
        s->owner = calloc(FZ_SERVERS, sizeof *s->owner);
        if (s->owner == NULL)
            abort();
        for (int r = 0; r < FZ_SERVERS; r++)
            s->owner[r] = r;
    }
    /* the keys' shapes: what the op engine checks a call against */
    uint64_t count[FZ_KEYS];
    for (int k = 0; k < FZ_KEYS; k++) {
        wrk_key *wk = calloc(1, sizeof *wk);
        if (wk == NULL)
            abort();
        count[k] = 1 + fz_u16(&in) % FZ_MAX_COUNT;
        wk->count = count[k];
        wk->dtype = (fz_u8(&in) & 1) ? KVS_FLOAT16 : KVS_FLOAT32;
        if (hmap_put(&s->keys, (uint64_t)k, wk) != 0)
            abort();
    }
    for (int i = 0; i < FZ_OPS; i++) {
        static const int kinds[] = {WRK_OP_PUSH, WRK_OP_PULL, WRK_OP_PUSHPULL};
        uint8_t o = fz_u8(&in);
        if (o % 4 == 3)
            continue;
        uint64_t key = (o >> 2) % FZ_KEYS;
        const wrk_key *wk = hmap_get(&s->keys, key);
        kvs_array v = {vals[i], count[key], wk->dtype, KVS_CPU};
        kvs_array out = {outs[i], count[key], wk->dtype, KVS_CPU};
        int kind = kinds[o % 4];
        wrk_submit(s, kind, 1, &key, kind == WRK_OP_PULL ? NULL : &v,
                   kind == WRK_OP_PUSH ? NULL : &out, 0, NULL, NULL, NULL, NULL);
    }
    /* every request goes out, as the I/O thread numbers and sends them */
    sent live[FZ_OPS * 2 * FZ_SERVERS];
    size_t nlive = 0;
    pthread_mutex_lock(&s->mu);
    wrk_op *ops = s->q_head;
    s->q_head = s->q_tail = NULL;
    pthread_mutex_unlock(&s->mu);
    for (wrk_op *op = ops; op; op = op->qnext)
        for (size_t i = 0; i < op->nreqs && nlive < sizeof live / sizeof live[0]; i++) {
            wrk_req *q = &op->reqs[i];
            q->req_id = q->h.req_id = ++s->next_req;
            q->h.sender = 9;
            if (wrk_reqmap_put(&s->reqs, q->req_id, q) != 0)
                abort();
            live[nlive++] = (sent){q->h, q->server};
        }
    for (int i = 0; i < FZ_MSGS && fz_more(&in); i++) {
        if (in.at < in.n && in.p[in.at] % 8 == 6) {
            sched_msg(&in, s, live, nlive);
            continue;
        }
        net_msg m;
        build(&in, live, nlive, &m);
        wrk_io_on_server(NULL, &m, s);
        net_msg_close(&m);
    }
    /* what no answer completed fails as a broken job would; every wait returns */
    size_t it = 0;
    wrk_req *q;
    wrk_req *left[FZ_OPS * 2 * FZ_SERVERS];
    size_t nleft = 0;
    while ((q = wrk_reqmap_next(&s->reqs, &it)) != NULL && nleft < nlive)
        left[nleft++] = q;
    for (size_t i = 0; i < nleft; i++) {
        wrk_reqmap_del(&s->reqs, left[i]->req_id);
        wrk_req_drop(s, left[i], KVS_EPEERDEAD, "the job broke");
    }
    wrk_wait_keys(s, true, 0);
    fake_store_free(s);
    return 0;
}

void fz_seeds(fz_seed_fn add)
{
    /* in the format above: keys of 11, 101 (2 parts), 300 (2 parts) and 1
     * elements (float32; key 1 float16 in the second, whose servers are
     * replicated); a pushpull of key 1, a pull of key 0, a push of key 2;
     * then answers to them, fused ones and the scheduler's */
    static const uint8_t seeds[][40] = {
        {0, 10, 0, 0, 100, 0, 0, 0x2B, 1, 0, 0, 0, 0, 0x06, 0x01, 0x08, 0x03,
         0x00, 0, 0, 0x00, 1, 0, 0x04, 2, 0, 0, 1, 2, 0x01, 2, 0, 0x16, 1},
        {1, 10, 0, 0, 100, 0, 1, 0x2B, 1, 0, 0, 0, 0, 0x06, 0x01, 0x08, 0x03,
         0x20, 0, 0, 0xC1, 0x21, 1, 0x04, 1, 0, 2, 0x36, 0x08, 0, 0x09, 0x0A},
    };
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
        add(seeds[i], sizeof seeds[i]);
}
