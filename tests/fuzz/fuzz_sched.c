/* fuzz_sched.c - fuzz target for the scheduler's dispatch, in-process.
 *
 * The scheduler's own source is included, so the target calls exactly what
 * the loop calls: sched_open() sets up a real scheduler (its ROUTER socket
 * bound to an ephemeral TCP port that nobody connects to, so every reply it
 * sends is dropped by ZeroMQ: ROUTER_MANDATORY, unknown peer), then every
 * message made from the input goes to on_recv() as net.c's drain would hand
 * it over, and sched_close() releases everything.  One scheduler per input:
 * an input is a whole conversation, and replays the same way every time.
 * The configuration comes from a fixed environment (2 servers, 2 workers, no
 * secret, no metrics port), set once.
 *
 * Input: a sequence of messages (at most FZ_SCHED_MSGS), each led by an op
 * byte.  op % 8 picks the kind, op >> 3 the peer:
 *   0 raw frames (fz_raw_msg)             4 EXIT
 *   1 REGISTER with a made-up body         5 PEER_LOST about some node
 *   2 HEARTBEAT                            6 any type (input byte)
 *   3 BARRIER                              7 the peer's connection closes
 * peer: bits 0-1 a slot of the node table (its routing id and node id) or,
 * past the registered nodes, a new connection; bit 2: a new connection
 * anyway; bit 3: the sender field from the input (a lie, mostly).
 * Structure-aware messages then take their fields from the input (fz_hdr_
 * fields) and may be damaged (fz_finish).
 *
 * After every message the target checks what the scheduler must keep true:
 * counts match the table, ids are unique and within the job, a started job
 * has every node.  A violation aborts, so the fuzzer reports it as a crash.
 *
 * Built two ways (tests/fuzz/module.mk): clang -fsanitize=fuzzer,address,
 * undefined (make fuzz), and plain cc with replay.c (make test).
 */
#include "scheduler/sched.c"

#include <stdint.h>

#include "tests/fuzz/fuzz_msg.h"
#include "tests/fuzz/fuzz_target.h"

#define FZ_SCHED_MSGS 48
#define FZ_SERVERS 2
#define FZ_WORKERS 2

static cfg fz_cfg;
static void *fz_zctx;

static void fz_once(void)
{
    if (fz_zctx)
        return;
    fz_setup(&fz_cfg, CFG_ROLE_SCHEDULER, FZ_SERVERS, FZ_WORKERS, "fuzz_sched");
    fz_zctx = zmq_ctx_new();
}

static void violated(const char *what)
{
    fprintf(stderr, "fuzz_sched: invariant violated: %s\n", what);
    abort();
}

#define CHECK(cond)                  \
    do {                             \
        if (!(cond))                 \
            violated(#cond);         \
    } while (0)

static void check_state(const sched *s)
{
    int srv = 0, wrk = 0;
    CHECK(s->nnodes >= 0 && s->nnodes <= s->cap);
    for (int i = 0; i < s->nnodes; i++) {
        const sched_node *n = &s->nodes[i];
        CHECK(n->role == CFG_ROLE_SERVER || n->role == CFG_ROLE_WORKER);
        CHECK(n->ident_len > 0 && n->ident_len < IDENT_MAX);
        srv += n->role == CFG_ROLE_SERVER;
        wrk += n->role == CFG_ROLE_WORKER;
        if (s->started) {
            int want = n->role == CFG_ROLE_SERVER ? proto_server_id(n->rank)
                                                  : proto_worker_id(n->rank);
            CHECK(n->id == want);
            CHECK(n->rank >= 0 && n->rank < (n->role == CFG_ROLE_SERVER ? FZ_SERVERS
                                                                        : FZ_WORKERS));
            for (int j = 0; j < i; j++)
                CHECK(s->nodes[j].id != n->id);
        }
        for (int j = 0; j < i; j++)
            CHECK(s->nodes[j].ident_len != n->ident_len ||
                  memcmp(s->nodes[j].ident, n->ident, n->ident_len) != 0);
    }
    CHECK(srv == s->nserver_reg && wrk == s->nworker_reg);
    CHECK(srv <= FZ_SERVERS && wrk <= FZ_WORKERS);
    if (s->started)
        CHECK(s->nnodes == FZ_SERVERS + FZ_WORKERS);
}

/* The peer a message comes from: a node of the table, or a new connection. */
static void pick_peer(const sched *s, int sel, char *ident, size_t *ident_len, int *sender)
{
    int slot = sel & 3;
    if (!(sel & 4) && slot < s->nnodes) {
        const sched_node *n = &s->nodes[slot];
        memcpy(ident, n->ident, n->ident_len);
        *ident_len = n->ident_len;
        *sender = n->id;
    } else {
        *ident_len = (size_t)snprintf(ident, 32, "fz-conn-%d", sel & 7);
        *sender = 0;
    }
}

static const char *const roles[] = {"worker", "server", "scheduler", "", "worker\tx"};
static const char *const hosts[] = {"127.0.0.1", "10.0.0.2", "", "a-very-long-host-name-that-"
                                    "does-not-fit-in-the-buffer-at-all-xxxxxxxxxxxxxxxxxxxx"};

/* A REGISTER body: every field right, missing, or a lie, as the input says.
 * how: bits 0-1 rank (-1, 0, 1, from the input), bit 2 empty endpoint, bits
 * 3-4 host, bit 5 the right job size, bit 6 a job size (maybe a lie), bit 7
 * a leading newline and an unknown field; how 0xFF: the input's own body.
 * b: bits 0-2 role, bits 3-5 port, bit 6 a rejoin (node id, job id,
 * barriers, workers that left: from the input), bit 7 endpoint "-". */
static size_t register_body(fz_in *in, int sel, uint8_t *body)
{
    uint8_t how = fz_u8(in), b = fz_u8(in);
    char ep[160], extra[64] = "", rejoin[128] = "";
    if (how == 0xFF) {
        size_t n = fz_u16(in) % FZ_BODY_MAX;
        fz_bytes(in, body, n);
        return n;
    }
    if (b & 0x80)
        snprintf(ep, sizeof ep, "-");
    else
        snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", 5000 + (sel & 7) + (b >> 3 & 7));
    int rank = (how & 3) == 3 ? (int)(int16_t)fz_u16(in) : (how & 3) - 1;
    if (how & 0x20)
        snprintf(extra, sizeof extra, " servers=%d workers=%d", FZ_SERVERS, FZ_WORKERS);
    else if (how & 0x40)
        snprintf(extra, sizeof extra, " servers=%d workers=%d", 1 + (b & 3), 1 + (b >> 2 & 3));
    if (b & 0x40) {
        static const char *const left[] = {"", " left=0", " left=1", " left=0-1", " left=2",
                                           " left=1,0", " left=", " left=0 left=1"};
        uint8_t r = fz_u8(in);
        int id = r < 0xF0 ? 8 + (r & 3) : (int)fz_u32(in);
        unsigned long long job = (r & 4) ? 0x5eedull : (unsigned long long)fz_u64(in);
        const char *lw = left[fz_u8(in) & 7];
        snprintf(rejoin, sizeof rejoin, " rejoin=%d job=%llx barriers=%u%s", id, job,
                 (unsigned)(r >> 3 & 3), lw);
    }
    int len = snprintf((char *)body, FZ_BODY_MAX, "%srole=%s endpoint=%s rank=%d host=%s%s%s%s",
                       (how & 0x80) ? "\n" : "", roles[(b & 7) % 5], (how & 4) ? "" : ep,
                       rank, hosts[(how >> 3) & 3], extra, rejoin,
                       (how & 0x80) ? " future=1" : "");
    return (size_t)len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sched s;
    fz_in in = {data, size, 0};
    uint8_t body[FZ_BODY_MAX];
    char ident[64];
    fz_once();
    fz_ctx_turn(&fz_zctx);
    if (sched_open(&s, &fz_cfg, fz_zctx) != 0) {
        log_set_handler(NULL, NULL); /* say why */
        sched_close(&s);
        sched_open(&s, &fz_cfg, fz_zctx);
        fprintf(stderr, "fuzz_sched: cannot open a scheduler\n");
        abort();
    }
    for (int nmsg = 0; fz_more(&in) && nmsg < FZ_SCHED_MSGS; nmsg++) {
        uint8_t op = fz_u8(&in);
        int sel = op >> 3, sender;
        size_t ident_len, blen = 0;
        net_msg m;
        proto_hdr h;
        pick_peer(&s, sel, ident, &ident_len, &sender);
        if (op % 8 == 0) {
            fz_raw_msg(&in, &m, ident, ident_len);
            goto deliver;
        }
        if (op % 8 == 7) { /* its connection closes (each node gets its own fd) */
            for (int i = 0; i < s.nnodes; i++)
                s.nodes[i].fd = 1000 + i;
            on_monitor(&s, ZMQ_EVENT_DISCONNECTED, 1000 + (sel & 3), "tcp://127.0.0.1:1");
            check_state(&s);
            continue;
        }
        memset(&h, 0, sizeof h);
        fz_hdr_fields(&in, &h);
        h.sender = (sel & 8) ? (int32_t)fz_u32(&in) : sender;
        h.body_len = 0;
        switch (op % 8) {
        case 1:
            h.type = PROTO_REGISTER;
            h.sender = (sel & 8) ? h.sender : 0;
            blen = register_body(&in, sel, body);
            break;
        case 2:
            h.type = PROTO_HEARTBEAT;
            break;
        case 3:
            h.type = PROTO_BARRIER;
            break;
        case 4:
            h.type = PROTO_EXIT;
            break;
        case 5: {
            static const char *const why[] = {"connection closed", ""};
            h.type = PROTO_PEER_LOST;
            uint8_t k = fz_u8(&in);
            h.key = k < 0xF0 ? (k & 3) < s.nnodes ? (uint64_t)s.nodes[k & 3].id : k
                             : fz_u64(&in);
            blen = fz_text_body(&in, why, 2, body);
            break;
        }
        default:
            h.type = fz_u8(&in) % PROTO_TYPE_MAX;
            break;
        }
        if (op % 8 == 6 && (fz_u8(&in) & 1))
            blen = fz_data_body(&in, &h, body); /* sets body_len: maybe more than sent */
        else
            h.body_len = blen;
        fz_finish(&in, &m, ident, ident_len, &h, body, blen);
    deliver:
        on_recv(s.sock, &m, &s);
        net_msg_close(&m);
        check_state(&s);
    }
    uv_run(&s.loop, UV_RUN_NOWAIT);
    sched_close(&s);
    return 0;
}

/* Seeds: the conversations of a normal job and of its usual failures.
 * Layout per message: op, the six header-field bytes (fz_hdr_fields), the
 * kind's own bytes, the damage byte (0: none). */
void fz_seeds(fz_seed_fn add)
{
#define F6 0, 0, 0, 0, 0, 0
    /* two workers and two servers register from new connections 4..7 */
    static const uint8_t reg_all[] = {
        0x01 | (4 << 3), F6, 0x20, 0x80, 0, /* worker, rank -1, job size right */
        0x01 | (5 << 3), F6, 0x20, 0x01, 0, /* server */
        0x01 | (6 << 3), F6, 0x21, 0x80, 0, /* worker, rank 0 */
        0x01 | (7 << 3), F6, 0x21, 0x09, 0, /* server, rank 0 */
        /* heartbeats and barriers from slots 0-3, then every node exits */
        0x02, F6, 0, 0x0A, F6, 0, 0x03, F6, 0, 0x13, F6, 0, 0x1B, F6, 0,
        0x04, F6, 0, 0x0C, F6, 0, 0x14, F6, 0, 0x1C, F6, 0};
#define REG_LEN 40
    uint8_t buf[512];
    add(reg_all, sizeof reg_all);
    /* the same start, then a node's connection closes, another reports a
     * lost peer, a barrier, an exit */
    static const uint8_t tail1[] = {0x07, 0x05 | (1 << 3), F6, 2, 0, 0, 0x03, F6, 0,
                                    0x04, F6, 0};
    memcpy(buf, reg_all, REG_LEN);
    memcpy(buf + REG_LEN, tail1, sizeof tail1);
    add(buf, REG_LEN + sizeof tail1);
    /* the same start, then lies: a sender of another node, an unknown type,
     * a REGISTER of a started job, a damaged heartbeat */
    static const uint8_t tail2[] = {0x02 | (8 << 3), F6, 11, 0, 0, 0, 0,
                                    0x06, F6, 0x15, 0x01, 0x00, 0,
                                    0x01 | (4 << 3), F6, 0x20, 0x80, 0,
                                    0x02, F6, 0xC1, 16, 0x55};
    memcpy(buf, reg_all, REG_LEN);
    memcpy(buf + REG_LEN, tail2, sizeof tail2);
    add(buf, REG_LEN + sizeof tail2);
    /* a lie about the job size before the start, then a registration */
    static const uint8_t lie[] = {0x01 | (4 << 3), F6, 0x40, 0x1F, 0,
                                  0x01 | (5 << 3), F6, 0x20, 0x80, 0};
    add(lie, sizeof lie);
    /* the same rank asked twice, a bad role, a body from the input */
    static const uint8_t ranks[] = {0x01 | (4 << 3), F6, 0x21, 0x80, 0,
                                    0x01 | (5 << 3), F6, 0x21, 0x80, 0,
                                    0x01 | (6 << 3), F6, 0x20, 0x02, 0,
                                    0x01 | (7 << 3), F6, 0xFF, 0, 12, 0, 'r', 'o', 'l', 'e',
                                    '=', 's', 'e', 'r', 'v', 'e', 'r', ' ', 0};
    add(ranks, sizeof ranks);
    /* raw: a header frame of garbage after the magic */
    static const uint8_t raw[] = {0x00, 0x01, 'K', 'V', 'S', '1', 1, 0, 1, 0};
    add(raw, sizeof raw);
#undef F6
#undef REG_LEN
}
