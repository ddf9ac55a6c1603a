/* fuzz_server.c - fuzz target for the server's dispatch, in-process.
 *
 * The server's own source is included, so the target calls exactly what the
 * loop calls: srv_open() sets up a real server (store, controller, fused
 * answers, its ROUTER socket bound to an ephemeral TCP port that nobody
 * connects to, so every reply is dropped by ZeroMQ: ROUTER_MANDATORY,
 * unknown peer), registered as server rank 0 of a job of 1 server and 2
 * workers; every message made from the input goes to on_data() (and
 * scheduler messages to on_sched_msg()) as net.c and link.c hand them over;
 * after each one the loop turns once (fused answers, a checkpoint thread's
 * completion); srv_close() releases everything.  One server per input, on
 * one ZeroMQ context and one reduction pool (1 thread) made once.
 *
 * Input: a sequence of messages (at most FZ_SRV_MSGS), each led by an op
 * byte: op % 16 the kind, op >> 4 the peer.
 *   0 raw frames                       8 FUSED or FUSED_REF: records made like 1-5
 *   1 INIT  2 PUSH  3 PULL  4 PUSHPULL 9 OPT_SET   10 OPT_KEY
 *   5 a data request by reference      11 SAVE / SAVE_END  12 LOAD / LOAD_END
 *   6 HELLO                            13 a message from the scheduler
 *   7 PROOF (the right answer, or not) 14 any type
 *   15 every worker sends the same kind of request (a round, a collective)
 * peer: bit 0 the worker rank, bit 1 the other rank's connection, bit 2 a
 * second connection for the rank, bit 3 the sender field from the input.
 *
 * Safety of the harness itself: SAVE and LOAD name a directory, which a
 * worker may choose; every SAVE/LOAD that reaches the server (whatever op
 * made it) is pointed into a private temporary directory first.  Direct
 * copies can only name this process (the only pid whose proof can succeed),
 * and then only a scratch buffer or unmapped addresses.
 */
#include "server/server.c"

#include <dirent.h>
#include <ftw.h>
#include <stdint.h>

#include "tests/fuzz/fuzz_msg.h"
#include "tests/fuzz/fuzz_target.h"

#define FZ_SRV_MSGS 48
#define FZ_WORKERS 2
#define FZ_SCRATCH ((1u << 20) + 8192)

static cfg fz_cfg;
static void *fz_zctx;
static red_pool *fz_pool;
static char fz_dir[64];      /* checkpoints go here */
static bool fz_dir_used;
static uint8_t *fz_scratch;  /* the memory direct copies may name */

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    if (ftw->level > 0)
        remove(path);
    return 0;
}

static void fz_cleanup(void)
{
    if (fz_dir[0]) {
        nftw(fz_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        rmdir(fz_dir);
    }
}

static void fz_once(void)
{
    if (fz_zctx)
        return;
    fz_setup(&fz_cfg, CFG_ROLE_SERVER, 1, FZ_WORKERS, "fuzz_server");
    snprintf(fz_dir, sizeof fz_dir, "/tmp/kvs-fuzz-server-XXXXXX");
    fz_scratch = calloc(1, FZ_SCRATCH);
    if (mkdtemp(fz_dir) == NULL || fz_scratch == NULL ||
        red_pool_new(1, fz_cfg.bigarray_bound, &fz_pool) != 0) {
        fprintf(stderr, "fuzz_server: set-up failed: %s\n", strerror(errno));
        abort();
    }
    atexit(fz_cleanup);
    fz_zctx = zmq_ctx_new();
}

/* A SAVE or LOAD names a directory inside fz_dir, whatever it asked for. */
static void sanitize(net_msg *m)
{
    char dir[128];
    if (m->nframes < 3 || zmq_msg_size(&m->frames[1]) != PROTO_HDR_SIZE)
        return;
    uint8_t *h = zmq_msg_data(&m->frames[1]);
    int type = le_get16(h + 6);
    if (type != PROTO_SAVE && type != PROTO_LOAD)
        return;
    const uint8_t *b = zmq_msg_data(&m->frames[2]);
    size_t n = zmq_msg_size(&m->frames[2]);
    int len = snprintf(dir, sizeof dir, "%s/ck%d", fz_dir, n ? b[0] % 3 : 0);
    if (n == 0)
        return;
    zmq_msg_close(&m->frames[2]);
    zmq_msg_init_size(&m->frames[2], (size_t)len);
    memcpy(zmq_msg_data(&m->frames[2]), dir, (size_t)len);
    if (le_get64(h + 80) == n) /* keep a declared length that was right, right */
        le_put64(h + 80, (uint64_t)len);
    fz_dir_used = true;
}

static void pick_peer(fz_in *in, int sel, char *ident, size_t *ident_len, int *sender)
{
    int rank = sel & 1;
    int conn_rank = (sel & 2) ? rank ^ 1 : rank;
    *ident_len = (size_t)snprintf(ident, 64, "w%d-fz%d", proto_worker_id(conn_rank),
                                  (sel & 4) ? 1 : 0);
    *sender = (sel & 8) ? (int32_t)fz_u32(in) : proto_worker_id(rank);
}

/* Descriptors of this process that are pidfds (direct-copy proofs): none
 * may outlive the server that opened them. */
static int pidfds_open(void)
{
    char path[300], link[64];
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    if (d == NULL)
        return 0;
    while ((e = readdir(d)) != NULL) {
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(path, link, sizeof link - 1);
        if (len > 0) {
            link[len] = '\0';
            n += strstr(link, "pidfd") != NULL;
        }
    }
    closedir(d);
    return n;
}

static void deliver(srv *s, net_msg *m)
{
    sanitize(m);
    on_data(s->data, m, s);
    net_msg_close(m);
    uv_run(&s->loop, UV_RUN_NOWAIT);
    while (srv_ctl_busy(s->ctl)) /* a checkpoint thread: its answer, now (replays alike) */
        uv_run(&s->loop, UV_RUN_ONCE);
}

static const char *const opt_specs[] = {
    "sgd learning_rate=0.1", "sgd learning_rate=0.5 momentum=0.9 wd=0.01",
    "adam learning_rate=0.01", "nag momentum=0.5", "adagrad eps=1e-7", "rmsprop centered=1",
    "sgd lr_scheduler=factor step=2 factor=0.5 clip_gradient=1 rescale_grad=0.5",
    "sgd multi_precision=1", "adam beta1=1.5", "none", ""};
static const char *const mults[] = {"lr_mult=0.5 wd_mult=0", "lr_mult=2", "wd_mult=x", ""};
static const char *const texts[] = {"worker 1 (h) died", ""};

/* The header and body of a data request (type given) from the input. */
static size_t data_request(fz_in *in, proto_hdr *h, int type, uint8_t *body)
{
    fz_hdr_fields(in, h);
    h->type = (uint16_t)type;
    h->flags &= (uint16_t)~PROTO_F_CMA;
    if (type == PROTO_PULL || (type == PROTO_INIT && (fz_u8(in) & 1))) {
        h->body_len = 0;
        return 0;
    }
    return fz_data_body(in, h, body);
}

/* A by-reference descriptor or HELLO address: the scratch buffer (a small
 * offset into it) or an address nothing is mapped at. */
static uint64_t some_addr(fz_in *in)
{
    uint8_t b = fz_u8(in);
    if (b < 0xC0)
        return (uint64_t)(uintptr_t)fz_scratch + (b & 63) * 64;
    return b == 0xFF ? fz_u64(in) & 0xFFFull : 0xDEAD0000ull + b;
}

/* h (its type and fields set) becomes a request by reference: the body is a
 * descriptor (source, destination) of addresses that may exist here. */
static size_t ref_body(fz_in *in, proto_hdr *h, uint8_t *body)
{
    h->flags |= PROTO_F_CMA;
    le_put64(body, some_addr(in));
    le_put64(body + 8, some_addr(in));
    h->body_len = PROTO_CMA_LEN;
    if (h->count > 4096) /* the scratch buffer is what may be named */
        h->count = 4096;
    if (h->offset + h->count > h->total)
        h->total = h->offset + h->count;
    return PROTO_CMA_LEN;
}

/* Record frames of the FUSED message being built (fused_body). */
#define FZ_FRAMES 6
static uint8_t fz_frame[FZ_FRAMES][FZ_BODY_MAX];
static size_t fz_frame_len[FZ_FRAMES];
static int fz_nframes;

/* The records of a FUSED body; with bit 7 of its count byte a FUSED_REF,
 * whose records with bit 6 of their type byte are by reference (the
 * descriptor made as for kind 5; bit 5 too: also in a plain FUSED, where
 * it must be refused).  A record inline with bit 4 of its type byte has
 * PROTO_F_FRAME: its body goes to the next record frame (fz_frame). */
static size_t fused_body(fz_in *in, proto_hdr *h, int sender, uint8_t *body)
{
    static const int types[] = {PROTO_INIT, PROTO_PUSH, PROTO_PULL, PROTO_PUSHPULL};
    uint8_t rec[FZ_BODY_MAX];
    size_t len = 0;
    uint8_t nb = fz_u8(in);
    int n = 1 + (nb & 0x7F) % 6;
    h->type = (nb & 0x80) ? PROTO_FUSED_REF : PROTO_FUSED;
    for (int i = 0; i < n && fz_more(in); i++) {
        proto_hdr r;
        memset(&r, 0, sizeof r);
        uint8_t tb = fz_u8(in);
        size_t rlen;
        if ((tb & 0x40) && (h->type == PROTO_FUSED_REF || (tb & 0x20))) {
            fz_hdr_fields(in, &r);
            r.type = (uint16_t)types[tb & 3];
            rlen = ref_body(in, &r, rec);
        } else {
            rlen = data_request(in, &r, types[tb & 3], rec);
        }
        r.sender = (fz_u8(in) & 0x80) ? (int32_t)fz_u8(in) : sender;
        if (rlen < r.body_len) /* a record must hold what it declares */
            r.body_len = rlen;
        if ((tb & 0x10) && !(r.flags & PROTO_F_CMA) && fz_nframes < FZ_FRAMES) {
            r.flags |= PROTO_F_FRAME;
            memcpy(fz_frame[fz_nframes], rec, rlen);
            fz_frame_len[fz_nframes++] = rlen;
        }
        if (len + proto_fused_rec_size(&r) > FZ_BODY_MAX)
            break;
        len += proto_fused_put(body + len, &r, rec);
    }
    h->count = (uint64_t)n;
    h->body_len = len;
    return len;
}

/* One message of kind k from (ident, sender); false: nothing to deliver. */
static bool build(srv *s, fz_in *in, int k, const char *ident, size_t ident_len, int sender,
                  net_msg *m)
{
    static uint8_t body[FZ_BODY_MAX];
    proto_hdr h;
    size_t blen = 0;
    memset(&h, 0, sizeof h);
    switch (k) {
    case 1: case 2: case 3: case 4: {
        static const int types[] = {PROTO_INIT, PROTO_PUSH, PROTO_PULL, PROTO_PUSHPULL};
        blen = data_request(in, &h, types[k - 1], body);
        break;
    }
    case 5: {
        static const int types[] = {PROTO_INIT, PROTO_PUSH, PROTO_PULL, PROTO_PUSHPULL};
        fz_hdr_fields(in, &h);
        h.type = (uint16_t)types[fz_u8(in) & 3];
        blen = ref_body(in, &h, body);
        break;
    }
    case 6: { /* HELLO: this process, another one, or nonsense */
        uint8_t b = fz_u8(in);
        fz_hdr_fields(in, &h);
        h.type = PROTO_HELLO;
        h.flags = 0;
        uint64_t pid = (b & 3) == 0 ? 1 : (b & 3) == 3 ? fz_u64(in) : (uint64_t)getpid();
        le_put64(body, pid);
        le_put64(body + 8, some_addr(in));
        memset(body + 16, 0, PROTO_NONCE_LEN); /* a HELLO's nonce field is not read */
        h.body_len = blen = PROTO_HELLO_LEN;
        break;
    }
    case 7: { /* PROOF: the challenge written where the HELLO said, or not */
        uint8_t b = fz_u8(in);
        const srv_cma *c = &s->cma[(sender - 9) / 2 & 1];
        fz_hdr_fields(in, &h);
        h.type = PROTO_PROOF;
        h.flags = 0;
        le_put64(body, (b & 1) ? (uint64_t)c->pid : (uint64_t)getpid());
        le_put64(body + 8, (b & 2) ? c->nonce_addr : some_addr(in));
        memcpy(body + 16, c->nonce, PROTO_NONCE_LEN);
        if (b & 4)
            body[16] ^= 1;
        if ((b & 8) && c->nonce_addr >= (uintptr_t)fz_scratch &&
            c->nonce_addr + PROTO_NONCE_LEN <= (uintptr_t)fz_scratch + FZ_SCRATCH)
            memcpy((void *)(uintptr_t)c->nonce_addr, c->nonce, PROTO_NONCE_LEN);
        if (b & 16)
            h.req_id = c->req_id;
        h.body_len = blen = PROTO_HELLO_LEN;
        break;
    }
    case 8: {
        fz_hdr_fields(in, &h);
        h.flags = 0;
        fz_nframes = 0;
        blen = fused_body(in, &h, sender, body);
        uint8_t b = fz_u8(in); /* the record frames: all, one missing, one of another size */
        h.sender = sender;
        fz_finish(in, m, ident, ident_len, &h, body, blen);
        for (int i = 0; i < fz_nframes; i++) {
            if ((b & 3) == 1 && i == b % fz_nframes)
                continue;
            fz_msg_add(m, fz_frame[i],
                       (b & 3) == 2 && i == b % fz_nframes && fz_frame_len[i] > 0
                           ? fz_frame_len[i] - 1
                           : fz_frame_len[i]);
        }
        return true;
    }
    case 9: case 10: case 11: case 12: {
        uint8_t b = fz_u8(in);
        fz_hdr_fields(in, &h);
        h.flags = 0;
        if (k == 9) {
            h.type = PROTO_OPT_SET;
            blen = fz_text_body(in, opt_specs, sizeof opt_specs / sizeof *opt_specs, body);
        } else if (k == 10) {
            h.type = PROTO_OPT_KEY;
            blen = fz_text_body(in, mults, sizeof mults / sizeof *mults, body);
        } else if (b & 1) { /* the END of a save or load: key 1 apply, 0 drop */
            h.type = k == 11 ? PROTO_SAVE_END : PROTO_LOAD_END;
            h.key = (b >> 1) & 1;
        } else {
            h.type = k == 11 ? PROTO_SAVE : PROTO_LOAD;
            body[0] = (uint8_t)(b >> 1); /* which directory (sanitize) */
            blen = 1;
        }
        h.round = (b & 0x80) ? h.round : (b >> 4) & 3; /* mostly a small sequence */
        h.body_len = blen;
        break;
    }
    case 14:
        fz_hdr_fields(in, &h);
        h.type = fz_u8(in) % PROTO_TYPE_MAX;
        if (fz_u8(in) & 1)
            blen = fz_data_body(in, &h, body);
        else
            blen = h.body_len = fz_text_body(in, texts, 2, body);
        break;
    default:
        return false;
    }
    h.sender = sender;
    fz_finish(in, m, ident, ident_len, &h, body, blen);
    return true;
}

/* A message from the scheduler, as the link hands it over (valid header). */
static void sched_msg(srv *s, fz_in *in)
{
    static const int types[] = {PROTO_NODE_DEAD, PROTO_NODE_LEFT, PROTO_SHUTDOWN,
                                PROTO_ERROR, PROTO_REFUSED, PROTO_REGISTER_ACK,
                                PROTO_HEARTBEAT_ACK, PROTO_BARRIER_DONE};
    uint8_t b = fz_u8(in), body[FZ_BODY_MAX];
    proto_hdr h;
    memset(&h, 0, sizeof h);
    h.type = (uint16_t)types[b & 7];
    h.sender = PROTO_SCHEDULER_ID;
    h.key = (b & 0x80) ? fz_u64(in) : (uint64_t)proto_worker_id((b >> 3) & 3);
    h.status = (b & 0x40) ? KVS_EPEERDEAD : 0;
    size_t len = fz_text_body(in, texts, 2, body);
    on_sched_msg(s, &h, (const char *)body, len);
    uv_run(&s->loop, UV_RUN_NOWAIT);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_in in = {data, size, 0};
    char ident[64];
    fz_once();
    fz_ctx_turn(&fz_zctx);
    srv *s = calloc(1, sizeof *s);
    if (s == NULL)
        abort();
    snprintf(s->who, sizeof s->who, "server");
    if (srv_open(s, &fz_cfg, fz_zctx, fz_pool, "127.0.0.1") != 0) {
        fprintf(stderr, "fuzz_server: cannot open a server\n");
        abort();
    }
    /* its link to a scheduler that is not there (port 1), and the
     * scheduler's answer: rank 0, as srv_run and on_sched_msg do it */
    net_link_cbs cbs = {on_sched_msg, on_link_fail, NULL, NULL};
    if (net_link_new(&s->loop, fz_zctx, &fz_cfg, CFG_ROLE_SERVER, "127.0.0.1", s->endpoint,
                     fz_cfg.server_id, NULL, s->who, &cbs, s, &s->link) != 0) {
        fprintf(stderr, "fuzz_server: cannot make the link\n");
        abort();
    }
    proto_hdr ack = {.type = PROTO_REGISTER_ACK, .sender = PROTO_SCHEDULER_ID,
                     .key = (uint64_t)proto_server_id(0), .round = 0x5EED};
    on_sched_msg(s, &ack, NULL, 0);
    if (!s->registered)
        abort();
    fz_dir_used = false;
    memset(fz_scratch, 0, 4096 + PROTO_NONCE_LEN);

    for (int nmsg = 0; fz_more(&in) && nmsg < FZ_SRV_MSGS; nmsg++) {
        uint8_t op = fz_u8(&in);
        int k = op % 16, sel = op >> 4, sender;
        size_t ident_len;
        net_msg m;
        if (k == 13) {
            sched_msg(s, &in);
            continue;
        }
        pick_peer(&in, sel, ident, &ident_len, &sender);
        if (k == 0) {
            fz_raw_msg(&in, &m, ident, ident_len);
            deliver(s, &m);
            continue;
        }
        if (k == 15) { /* every worker, same fields: rounds and collectives complete */
            uint8_t what = fz_u8(&in);
            size_t at = in.at;
            for (int r = 0; r < FZ_WORKERS; r++) {
                in.at = at; /* the same bytes make the same request */
                ident_len = (size_t)snprintf(ident, sizeof ident, "w%d-fz0", proto_worker_id(r));
                if (build(s, &in, 1 + what % 12, ident, ident_len, proto_worker_id(r), &m))
                    deliver(s, &m);
            }
            continue;
        }
        if (build(s, &in, k, ident, ident_len, sender, &m))
            deliver(s, &m);
    }
    srv_close(s);
    free(s);
    if (pidfds_open() != 0) {
        fprintf(stderr, "fuzz_server: a pidfd outlived its server (descriptor leak)\n");
        abort();
    }
    if (fz_dir_used) { /* the next input starts without checkpoints */
        nftw(fz_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    }
    return 0;
}

/* Seeds: a normal job's conversation and its usual detours.  Per message:
 * op, then the kind's bytes (fz_hdr_fields takes 6 when they are small),
 * then the damage byte (0: none). */
void fz_seeds(fz_seed_fn add)
{
#define F6(key, dt, cnt) key, dt, cnt, 0, 0, 0
    /* both workers INIT key 1 (8 float32; rank 0 with values), push two
     * rounds, pull, pushpull */
    static const uint8_t job[] = {
        0x01, F6(1, 0, 8), 0, 0, 0,        /* INIT from rank 0: body small ints */
        0x11, F6(1, 0, 8), 1, 0,           /* INIT from rank 1: no body */
        0x0F, 1, F6(1, 0, 8), 0, 0,        /* every worker PUSHes round 0 */
        0x03, F6(1, 0, 8), 0,              /* PULL */
        0x0F, 2, F6(1, 0, 8), 0,           /* every worker PULLs */
        0x0F, 1, 1, 0, 8, 0, 1, 0, 0, 0,   /* round 1 */
        0x0F, 2, F6(1, 0, 8), 0,
        0x0F, 3, 1, 0, 8, 0, 2, 0, 0, 0};  /* PUSHPULL round 2 */
    add(job, sizeof job);
    /* an optimizer set by both, then a round on a float64 key */
    static const uint8_t opt[] = {
        0x0F, 8, 0, F6(0, 0, 0), 0, 0,     /* OPT_SET seq 0: "sgd learning_rate=0.1" */
        0x0F, 0, F6(2, 1, 16), 0, 0, 0,    /* INIT key 2 float64 */
        0x0F, 9, 0x10, F6(2, 0, 0), 0, 0,  /* OPT_KEY seq 1 */
        0x0F, 1, F6(2, 1, 16), 0, 0};      /* PUSH round 0 */
    add(opt, sizeof opt);
    /* save, commit, load, apply */
    static const uint8_t ck[] = {
        0x0F, 0, F6(3, 0, 4), 0, 0, 0,
        0x0F, 1, F6(3, 0, 4), 0, 0,
        0x0F, 10, 0x00, F6(7, 0, 0), 0,    /* SAVE seq 0 */
        0x0F, 10, 0x13, F6(1, 0, 0), 0,    /* SAVE_END seq 1, commit */
        0x0F, 11, 0x24, F6(0, 0, 0), 0,    /* LOAD seq 2 (the same directory) */
        0x0F, 11, 0x33, F6(1, 0, 0), 0};   /* LOAD_END seq 3 */
    add(ck, sizeof ck);
    /* FUSED: three records from rank 0 */
    static const uint8_t fused[] = {
        0x08, F6(0, 0, 3), 2,
        0, F6(4, 0, 2), 0, 0, 0,           /* INIT with data */
        1, F6(5, 0, 2), 0, 0,              /* PUSH */
        2, F6(4, 0, 2), 0,                 /* PULL */
        0};
    add(fused, sizeof fused);
    /* FUSED_REF: rank 0 proves its memory, then sends a PUSHPULL by reference
     * (8 floats read from and the sum written into the scratch buffer) beside
     * an inline PUSH; rank 1, unproven, sends one too (refused whole), then
     * its PUSH of key 8 completes the round (the sum is written back) */
    static const uint8_t fref[] = {
        0x06, 1, F6(0, 0, 0), 0x10, 0,
        0x07, 0x1B, F6(0, 0, 0), 0,
        0x01, F6(8, 0, 8), 0, 0, 0,        /* INIT key 8 from rank 0 */
        0x11, F6(8, 0, 8), 1, 0,           /* INIT key 8 from rank 1 */
        0x08, F6(0, 0, 2), 0x81,
        0x43, F6(8, 0, 8), 0x20, 0x30, 0,  /* PUSHPULL by reference */
        1, F6(5, 0, 2), 0, 0,              /* PUSH inline */
        0,
        0x18, F6(0, 0, 1), 0x80,
        0x43, F6(8, 0, 8), 0x20, 0x30, 0,
        0,
        0x12, F6(8, 0, 8), 0, 0};
    add(fref, sizeof fref);
    /* direct copies: HELLO naming this process, the right PROOF, a push by reference */
    static const uint8_t cma[] = {
        0x06, 1, F6(0, 0, 0), 0x10, 0,
        0x07, 0x1B, F6(0, 0, 0), 0,
        0x05, F6(6, 0, 8), 1, 0x20, 0x30, 0,
        0x05, F6(6, 0, 8), 2, 0x20, 0x40, 0};
    add(cma, sizeof cma);
    /* a proven worker, then a PROOF that does not answer a challenge */
    static const uint8_t cma2[] = {
        0x06, 1, F6(0, 0, 0), 0x10, 0,
        0x07, 0x1B, F6(0, 0, 0), 0,
        0x07, 0x1F, F6(0, 0, 0), 0};
    add(cma2, sizeof cma2);
    /* the scheduler: a worker left, a node died, a request after that */
    static const uint8_t sched[] = {
        0x01, F6(1, 0, 8), 0, 0, 0, 0x0D, 0x09, 0, 0x0D, 0x00, 0, 0x02, F6(1, 0, 8), 0, 0};
    add(sched, sizeof sched);
    /* lies: another rank's connection, a second connection, a wrong sender */
    static const uint8_t lies[] = {
        0x02, F6(1, 0, 2), 0, 0, 0x22, F6(1, 0, 2), 0, 0, 0x42, F6(1, 0, 2), 0, 0,
        0x82, 99, 0, 0, 0, F6(1, 0, 2), 0, 0, 0x02, F6(1, 0, 2), 0, 0xC2, 0x10, 0x7F};
    add(lies, sizeof lies);
#undef F6
}
