/*
 * test_blast.c - every port of a running job under a flood of garbage.
 *
 * A 2-server, 2-worker job runs many rounds of `sum` (every dtype, split
 * keys; each worker checks every element of every round).  After round 0
 * (the workers' connections are bound to them) a blaster process sends at
 * least BLAST_MIN messages to the scheduler's port, every server's data port
 * and every metrics port, from many connections, until the workers are done:
 *  - ZeroMQ DEALER sockets with random routing ids (some claiming the real
 *    workers' ids "w9-...", "w11-..."), sending random frames and
 *    structure-aware kvsd messages: every message type (data requests,
 *    FUSED with bad records, collectives 48-55, HELLO/PROOF, REGISTER lies,
 *    heartbeats, barriers, exits and PEER_LOST in the names of real nodes)
 *    with bad lengths, keys, ranks, rounds, truncated bodies, extra frames;
 *  - ZMQ_STREAM connections (raw TCP): random bytes, a valid ZMTP greeting
 *    followed by kvsd frames or by frames that lie about their size, HTTP
 *    garbage (metrics ports).
 * The job must end with exit 0 everywhere and every sum exact.  With a job
 * secret the blaster does not know (NULL, made-up PLAIN and CURVE
 * handshakes) its DEALER sockets must also receive nothing at all.
 *
 * The blaster runs in a forked child and talks to the test only through
 * files in the test's directory: "blast-progress" (messages sent so far),
 * "blast-stop" (written by the test), "blast.log" (its summary).
 */
#include "tests.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#define BLAST_MIN 12000 /* messages at least (the issue asks for 10,000) */
#define BLAST_BEFORE 2000 /* of them before the workers go on */
#define BLAST_MAX_S 40.0  /* the blaster gives up after this long */
#define BLAST_PORTS 8
#define BLAST_SOCKS 4     /* DEALER sockets per ZeroMQ port */
#define HDR 88

enum {
    T_REGISTER = 1, T_HEARTBEAT = 3, T_BARRIER = 5, T_EXIT = 8, T_INIT = 11, T_PUSH = 12,
    T_PULL = 13, T_PUSHPULL = 14, T_REPLY = 15, T_ERROR = 16, T_HELLO = 17, T_REFUSED = 32,
    T_CHALLENGE = 33, T_PROOF = 34, T_NODE_LEFT = 40, T_PEER_LOST = 41, T_TIMING = 56,
    T_OPT_SET = 48, T_SAVE = 50, T_FUSED = 64, T_FUSED_REPLY = 65
};

#define BLAST_RAW 16 /* raw TCP connections between their two parts */

typedef struct raw_conn {
    char rid[24];
    int open;
} raw_conn;

typedef struct blast {
    uint64_t rng;
    int secret; /* the job has a secret the blaster does not know */
    int zports[BLAST_PORTS], nz;   /* scheduler + servers */
    int mports[BLAST_PORTS], nm;   /* metrics */
    void *ctx;
    void *dealer[BLAST_PORTS][BLAST_SOCKS];
    void *stream;
    raw_conn rc[BLAST_RAW];
    long stream_conns;
    long sent, structured, random, raw, conns, received, again;
    FILE *log;
} blast;

static uint64_t rnd(blast *b)
{
    b->rng ^= b->rng >> 12;
    b->rng ^= b->rng << 25;
    b->rng ^= b->rng >> 27;
    return b->rng * 2685821657736338717ull;
}

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void fill(blast *b, uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)rnd(b);
}

/* A value the job uses, or nonsense. */
static uint64_t pick_u64(blast *b, const uint64_t *good, int ngood)
{
    static const uint64_t odd[] = {0, 1, 2, 7, 255, 4096, 1u << 20, 0x7fffffffu, 0xffffffffu,
                                   1ull << 61, 1ull << 63, UINT64_MAX - 1, UINT64_MAX};
    uint64_t r = rnd(b) % 8;
    if (r < 5 && ngood > 0)
        return good[rnd(b) % (uint64_t)ngood];
    if (r < 7)
        return odd[rnd(b) % (sizeof odd / sizeof odd[0])];
    return rnd(b);
}

/* The job's keys (tests/integ/testworker.c: 17 + dtype * 64 + j * 5, odd j
 * above 2^40) and the real node ids. */
static uint64_t job_key(blast *b)
{
    uint64_t j = rnd(b) % 6, key = 17 + (rnd(b) % 6) * 64 + j * 5;
    return (j % 2) ? key + (1ull << 40) : key;
}

static const uint64_t ids[] = {1, 8, 9, 10, 11, 13, 12};

/* One kvsd header with lies in it: any type, the job's keys, ranks, rounds. */
static void make_hdr(blast *b, uint8_t *h, int type, uint64_t body_len)
{
    static const uint64_t counts[] = {0, 1, 7, 999, 1000, 1001, 2003};
    uint64_t key = rnd(b) % 2 ? job_key(b) : pick_u64(b, NULL, 0);
    uint64_t count = pick_u64(b, counts, 7), total = rnd(b) % 3 ? count : pick_u64(b, counts, 7);
    memset(h, 0, HDR);
    put32(h, 0x3153564Bu);
    put16(h + 4, rnd(b) % 50 ? 1 : (uint16_t)rnd(b));
    put16(h + 6, (uint16_t)type);
    put16(h + 8, rnd(b) % 4 ? 0 : (uint16_t)rnd(b)); /* flags: CMA, ASYNC, TRACE, junk */
    put16(h + 10, rnd(b) % 4 ? 1 : (uint16_t)(rnd(b) % 6)); /* contrib: 1, or 0..5 */
    put32(h + 12, (uint32_t)pick_u64(b, ids, 7));
    put32(h + 16, rnd(b) % 4 ? 0 : (uint32_t)-(int32_t)(rnd(b) % 1200));
    put64(h + 24, rnd(b));
    put64(h + 32, key);
    put64(h + 40, rnd(b) % 4 ? 0 : pick_u64(b, counts, 7));
    put64(h + 48, count);
    put64(h + 56, total);
    put64(h + 64, rnd(b) % 2 ? rnd(b) % 40 : pick_u64(b, NULL, 0)); /* round */
    put32(h + 72, rnd(b) % 8 ? (uint32_t)(rnd(b) % 6) : (uint32_t)rnd(b));
    put32(h + 76, rnd(b) % 4 ? (uint32_t)(rnd(b) % 2) : (uint32_t)rnd(b));
    put64(h + 80, body_len);
}

static const char *const texts[] = {
    "role=worker endpoint=- rank=0 host=127.0.0.1 servers=2 workers=2",
    "role=server endpoint=tcp://127.0.0.1:9 rank=1 host=127.0.0.1 servers=2 workers=2",
    "role=worker endpoint=- rank=-1 host=evil servers=3 workers=9",
    "role=scheduler endpoint=x", "role=worker", "rank=99999999999", "",
    "sgd learning_rate=1000", "adam beta1=2", "lr_mult=1e30 wd_mult=-1", "/tmp/kvs-blast-evil",
    "../../../../etc", "worker 0 (127.0.0.1) died", "\xff\xfe\x00\x01 binary"};

/* A FUSED body: records with every kind of mistake. */
static size_t fused_body(blast *b, uint8_t *out, size_t cap)
{
    static const int types[] = {T_INIT, T_PUSH, T_PULL, T_PUSHPULL, T_REPLY, T_REGISTER};
    size_t len = 0;
    int n = 1 + (int)(rnd(b) % 5);
    for (int i = 0; i < n && len + HDR + 64 <= cap; i++) {
        uint64_t blen = rnd(b) % 3 ? rnd(b) % 33 : pick_u64(b, NULL, 0);
        size_t have = blen < 40 ? (size_t)blen : rnd(b) % 40;
        make_hdr(b, out + len, types[rnd(b) % 6], blen);
        len += HDR;
        fill(b, out + len, have);
        len += have;
        if (rnd(b) % 2)
            while (len % 8)
                out[len++] = 0;
    }
    return len;
}

/* One structure-aware message: frames[0] header, frames[1..] bodies. */
static int make_kvsd(blast *b, uint8_t *buf, size_t cap, uint8_t **f, size_t *l)
{
    static const int types[] = {T_REGISTER, T_HEARTBEAT, T_BARRIER, T_EXIT, T_INIT, T_PUSH,
                                T_PULL, T_PUSHPULL, T_REPLY, T_ERROR, T_HELLO, T_REFUSED,
                                T_CHALLENGE, T_PROOF, T_NODE_LEFT, T_PEER_LOST, T_TIMING,
                                T_OPT_SET, T_OPT_SET + 1, T_SAVE, T_SAVE + 1, T_SAVE + 2,
                                T_SAVE + 3, 54, 55, T_FUSED, T_FUSED_REPLY, 0, 18, 99, 1000};
    int type = types[rnd(b) % (sizeof types / sizeof types[0])];
    uint8_t *h = buf, *body = buf + HDR;
    size_t blen = 0, bcap = cap - HDR - 16;
    int nf = 1;
    switch (type) {
    case T_INIT: case T_PUSH: case T_PUSHPULL: case T_REPLY:
        blen = rnd(b) % 3 ? 4 * (rnd(b) % 64) : rnd(b) % 600;
        fill(b, body, blen);
        break;
    case T_HELLO: case T_PROOF: case T_CHALLENGE: case T_TIMING: {
        blen = rnd(b) % 4 ? (type == T_CHALLENGE ? 16 : type == T_TIMING ? 24 : 32)
                          : rnd(b) % 64;
        fill(b, body, blen);
        uint64_t pid = rnd(b) % 3 == 0 ? 1 : rnd(b) % 3 == 1 ? (uint64_t)getpid() : rnd(b);
        if (blen >= 16) {
            put64(body, pid);
            put64(body + 8, rnd(b) % 2 ? 0x1000 : rnd(b));
        }
        break;
    }
    case T_FUSED: case T_FUSED_REPLY:
        blen = fused_body(b, body, bcap);
        break;
    default: {
        const char *s = texts[rnd(b) % (sizeof texts / sizeof texts[0])];
        blen = strlen(s);
        memcpy(body, s, blen);
        if (rnd(b) % 8 == 0) { /* a NUL inside the text */
            body[blen++] = 0;
            body[blen++] = 'x';
        }
    }
    }
    uint64_t declared = blen;
    switch (rnd(b) % 10) {
    case 0: declared = blen + 1 + rnd(b) % 100; break;  /* longer than sent */
    case 1: declared = pick_u64(b, NULL, 0); break;      /* anything */
    case 2: if (blen) blen = rnd(b) % blen; break;      /* a truncated body */
    default: break;
    }
    make_hdr(b, h, type, declared);
    f[0] = h;
    l[0] = rnd(b) % 20 ? HDR : rnd(b) % (HDR + 8); /* a short or long header sometimes */
    if (blen > 0 || rnd(b) % 10 == 0) {
        f[nf] = body;
        l[nf++] = blen;
    }
    if (rnd(b) % 15 == 0) { /* extra frames */
        f[nf] = body;
        l[nf++] = rnd(b) % 8;
        if (rnd(b) % 2) {
            f[nf] = h;
            l[nf++] = HDR;
        }
    }
    return nf;
}

/* ---- sockets ---- */

static void *new_dealer(blast *b, int port)
{
    char ep[64], rid[40];
    void *s = zmq_socket(b->ctx, ZMQ_DEALER);
    int linger = 1000, hwm = 2000;
    size_t rlen;
    if (s == NULL)
        return NULL;
    /* a socket closed for a new connection still delivers what it queued */
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
    switch (rnd(b) % 4) {
    case 0: /* a real worker's id, or almost */
        rlen = (size_t)snprintf(rid, sizeof rid, "w%d-%llx", rnd(b) % 2 ? 9 : 11,
                                (unsigned long long)rnd(b));
        break;
    case 1:
        rlen = (size_t)snprintf(rid, sizeof rid, "w%d", (int)(rnd(b) % 20));
        break;
    default: /* random bytes (ZeroMQ refuses a leading zero byte) */
        rlen = 1 + rnd(b) % 32;
        fill(b, (uint8_t *)rid, rlen);
        if (rid[0] == 0)
            rid[0] = 1;
    }
    zmq_setsockopt(s, ZMQ_ROUTING_ID, rid, rlen);
    if (b->secret) { /* it does not know the secret: no proof, or a made-up one */
        uint8_t pk[32], sk[32], spk[32];
        switch (rnd(b) % 3) {
        case 0:
            break;
        case 1:
            zmq_setsockopt(s, ZMQ_PLAIN_USERNAME, "kvs1 worker 9 00112233445566778899aabbccddeeff",
                           46);
            zmq_setsockopt(s, ZMQ_PLAIN_PASSWORD, "made-up", 7);
            break;
        default: /* random keys (CURVE: the server's real key is not known either) */
            fill(b, pk, 32);
            fill(b, sk, 32);
            fill(b, spk, 32);
            zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, pk, 32);
            zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, sk, 32);
            zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, spk, 32);
        }
    }
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    if (zmq_connect(s, ep) != 0) {
        zmq_close(s);
        return NULL;
    }
    b->conns++;
    return s;
}

/* Read and count whatever came back (the servers' ERROR answers). */
static void drain(blast *b, void *s)
{
    char buf[256];
    while (s && zmq_recv(s, buf, sizeof buf, ZMQ_DONTWAIT) >= 0)
        b->received++;
}

static int send_frames(void *s, uint8_t **f, const size_t *l, int nf)
{
    for (int i = 0; i < nf; i++)
        if (zmq_send(s, f[i], l[i], ZMQ_DONTWAIT | (i + 1 < nf ? ZMQ_SNDMORE : 0)) < 0)
            return -1;
    return 0;
}

/* One message on a DEALER: random frames, or a kvsd message. */
static void dealer_one(blast *b, uint8_t *buf, size_t cap)
{
    int p = (int)(rnd(b) % (uint64_t)b->nz), k = (int)(rnd(b) % BLAST_SOCKS);
    void **s = &b->dealer[p][k];
    uint8_t *f[6];
    size_t l[6];
    int nf, structured = rnd(b) % 4 != 0;
    if (*s == NULL || rnd(b) % 300 == 0) { /* new connections all the time */
        if (*s) {
            drain(b, *s);
            zmq_close(*s);
        }
        *s = new_dealer(b, b->zports[p]);
        if (*s == NULL)
            return;
    }
    if (structured) {
        nf = make_kvsd(b, buf, cap, f, l);
    } else {
        nf = 1 + (int)(rnd(b) % 4);
        for (int i = 0; i < nf; i++) {
            f[i] = buf + 512 * i;
            l[i] = rnd(b) % 8 ? rnd(b) % 300 : 0;
            fill(b, f[i], l[i]);
        }
    }
    if (send_frames(*s, f, l, nf) != 0) {
        b->again++; /* the water mark (no handshake yet): the next one */
        return;
    }
    b->sent++;
    structured ? b->structured++ : b->random++;
}

/* ZMTP 3.0 by hand, in two parts a few milliseconds apart (libzmq drops a
 * connection whose first segment runs past the greeting).  Part 1: the
 * greeting (mechanism NULL, sometimes PLAIN or a bad minor version). */
static size_t zmtp_greeting(blast *b, uint8_t *out)
{
    memset(out, 0, 64);
    out[0] = 0xFF;
    out[8] = 1;
    out[9] = 0x7F;
    out[10] = 3;
    out[11] = rnd(b) % 4 ? 1 : (uint8_t)rnd(b);
    if (rnd(b) % 6)
        memcpy(out + 12, "NULL", 4);
    else
        memcpy(out + 12, "PLAIN", 5);
    return 64;
}

/* Part 2: READY as a DEALER, then kvsd messages as frames, or frames that
 * lie about their size, or noise. */
static size_t zmtp_rest(blast *b, uint8_t *out, size_t cap)
{
    static const char ready[] = "\x05READY\x0bSocket-Type\x00\x00\x00\x06" "DEALER";
    size_t n = 0;
    if (rnd(b) % 6 == 0) { /* noise instead of READY */
        n = 1 + rnd(b) % 300;
        fill(b, out, n);
        return n;
    }
    out[n++] = 0x04;
    out[n++] = (uint8_t)(sizeof ready - 1);
    memcpy(out + n, ready, sizeof ready - 1);
    n += sizeof ready - 1;
    int msgs = 1 + (int)(rnd(b) % 4);
    for (int m = 0; m < msgs && n + 1200 < cap; m++) {
        uint8_t tmp[4096], *f[6];
        size_t l[6];
        int nf = make_kvsd(b, tmp, sizeof tmp, f, l);
        for (int i = 0; i < nf && n + 10 + l[i] < cap; i++) {
            int more = i + 1 < nf;
            if (rnd(b) % 12 == 0) { /* a long frame that lies about its size */
                out[n++] = (uint8_t)(0x02 | more);
                uint64_t sz = rnd(b) % 2 ? UINT64_MAX >> (rnd(b) % 40) : (1ull << 33);
                for (int j = 7; j >= 0; j--)
                    out[n++] = (uint8_t)(sz >> (8 * j));
                return n;
            }
            if (l[i] > 255) {
                out[n++] = (uint8_t)(0x02 | more);
                for (int j = 7; j >= 0; j--)
                    out[n++] = (uint8_t)((uint64_t)l[i] >> (8 * j));
            } else {
                out[n++] = (uint8_t)more;
                out[n++] = (uint8_t)l[i];
            }
            memcpy(out + n, f[i], l[i]);
            n += l[i];
        }
        b->structured++;
    }
    return n;
}

static size_t http_junk(blast *b, uint8_t *out, size_t cap)
{
    static const char *const heads[] = {
        "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", "GET /metrics HTTP/1.1\r\nX: ",
        "POST /metrics HTTP/1.0\r\nContent-Length: 99999999999\r\n\r\n",
        "GET /../../etc/passwd HTTP/1.1\r\n\r\n", "\x16\x03\x01\x02\x00\x01", "GET "};
    const char *h = heads[rnd(b) % 6];
    size_t n = strlen(h), k = rnd(b) % 3000;
    memcpy(out, h, n);
    if (n + k > cap)
        k = cap - n;
    fill(b, out + n, k);
    return n + k;
}

static int stream_send(blast *b, const char *rid, const uint8_t *data, size_t n)
{
    if (zmq_send(b->stream, rid, strlen(rid), ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_send(b->stream, data, n, ZMQ_DONTWAIT) < 0)
        return -1;
    if (n) {
        b->sent++;
        b->raw++;
    }
    return 0;
}

/* Raw TCP (ZMQ_STREAM): a slot of the pool is either free (open a
 * connection and send its first bytes) or holds a connection that got its
 * greeting a moment ago (send the rest, then close it). */
static void stream_one(blast *b, uint8_t *buf, size_t cap)
{
    raw_conn *c = &b->rc[rnd(b) % BLAST_RAW];
    char junk[4096];
    if (b->stream == NULL || (!c->open && ++b->stream_conns % 200 == 0)) {
        /* a fresh socket now and then; closing one (with a linger) still
         * delivers what it queued.  No zmq_disconnect: it would drop it. */
        int linger = 1000, never = -1;
        if (b->stream)
            zmq_close(b->stream);
        memset(b->rc, 0, sizeof b->rc);
        b->stream = zmq_socket(b->ctx, ZMQ_STREAM);
        if (b->stream == NULL)
            return;
        zmq_setsockopt(b->stream, ZMQ_LINGER, &linger, sizeof linger);
        zmq_setsockopt(b->stream, ZMQ_RECONNECT_IVL, &never, sizeof never);
    }
    if (c->open) {
        size_t n = zmtp_rest(b, buf, cap);
        stream_send(b, c->rid, buf, n);
        stream_send(b, c->rid, buf, 0); /* an empty frame closes it after the bytes */
        c->open = 0;
    } else {
        char ep[64];
        int metrics = b->nm > 0 && rnd(b) % 3 == 0;
        int port = metrics ? b->mports[rnd(b) % (uint64_t)b->nm]
                           : b->zports[rnd(b) % (uint64_t)b->nz];
        snprintf(c->rid, sizeof c->rid, "c%ld", b->conns);
        snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
        zmq_setsockopt(b->stream, ZMQ_CONNECT_ROUTING_ID, c->rid, strlen(c->rid));
        if (zmq_connect(b->stream, ep) != 0)
            return;
        b->conns++;
        if (metrics || rnd(b) % 4 == 0) { /* HTTP junk, or noise: one part, closed */
            size_t n = metrics ? http_junk(b, buf, cap) : 1 + rnd(b) % 2000;
            if (!metrics)
                fill(b, buf, n);
            stream_send(b, c->rid, buf, n);
            stream_send(b, c->rid, buf, 0);
        } else {
            c->open = stream_send(b, c->rid, buf, zmtp_greeting(b, buf)) == 0;
        }
    }
    while (zmq_recv(b->stream, junk, sizeof junk, ZMQ_DONTWAIT) >= 0) /* greetings back */
        ;
}

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void progress(const char *dir, long sent)
{
    char path[1200], tmp[1300];
    snprintf(path, sizeof path, "%s/blast-progress", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f) {
        fprintf(f, "%ld\n", sent);
        fclose(f);
        rename(tmp, path);
    }
}

/* What counts as sent: every message ZeroMQ took (open job); with a secret
 * only what reaches the daemons: raw chunks and connection attempts (a
 * DEALER's messages wait behind a handshake that never succeeds). */
static long reached(const blast *b)
{
    return b->secret ? b->raw + b->conns : b->sent;
}

/* The blaster (a forked child): until at least BLAST_MIN messages are sent
 * and "blast-stop" exists.  Exit 0, or 1 when it could not send at all. */
static int blaster(blast *b, const char *dir)
{
    char stop[1200], logpath[1200];
    static uint8_t buf[16384];
    snprintf(stop, sizeof stop, "%s/blast-stop", dir);
    snprintf(logpath, sizeof logpath, "%s/blast.log", dir);
    b->log = fopen(logpath, "w");
    if (b->log == NULL)
        return 1;
    b->ctx = zmq_ctx_new();
    double t0 = mono();
    for (long it = 0;; it++) {
        if (rnd(b) % (b->secret ? 2 : 8) == 0)
            stream_one(b, buf, sizeof buf);
        else
            dealer_one(b, buf, sizeof buf);
        if (it % 32 == 31) { /* about 20,000 a second: a flood, not a CPU hog */
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
        }
        if (it % 256 == 0) {
            for (int p = 0; p < b->nz; p++)
                for (int k = 0; k < BLAST_SOCKS; k++)
                    drain(b, b->dealer[p][k]);
            progress(dir, reached(b));
            if (reached(b) >= BLAST_MIN && access(stop, F_OK) == 0)
                break;
            if (mono() - t0 > BLAST_MAX_S)
                break;
        }
    }
    for (int p = 0; p < b->nz; p++)
        for (int k = 0; k < BLAST_SOCKS; k++)
            if (b->dealer[p][k]) {
                drain(b, b->dealer[p][k]);
                zmq_close(b->dealer[p][k]);
            }
    if (b->stream)
        zmq_close(b->stream);
    zmq_ctx_term(b->ctx);
    progress(dir, reached(b));
    fprintf(b->log, "blaster: %ld messages in %.1f s (%ld structure-aware kvsd messages, %ld "
            "random, %ld raw TCP chunks) over %ld connections; %ld refused by the water mark; "
            "%ld frames received back\n", b->sent, mono() - t0, b->structured, b->random,
            b->raw, b->conns, b->again, b->received);
    fprintf(b->log, "received=%ld reached=%ld\n", b->received, reached(b));
    fclose(b->log);
    return b->sent > 0 ? 0 : 1;
}

static long read_long(it_ctx *t, const char *name)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", t->dir, name);
    char *s = it_slurp(path, NULL);
    long v = s ? atol(s) : -1;
    free(s);
    return v;
}

static void blast_job(it_ctx *t, int secret)
{
    static const char *const argv[] = {"sum", "--dtype", "all", "--split", "--rounds", "1000",
                                       "--pause-file", "go", NULL};
    char pf[2][PATH_MAX + 32], mp[3][40];
    int sport[2], mport[3];
    blast b;
    memset(&b, 0, sizeof b);
    b.rng = UINT64_C(0x9E3779B97F4A7C15) ^ (uint64_t)getpid();
    b.secret = secret;
    it_setenv(t, "MXNET_KVSTORE_BIGARRAY_BOUND", "1000");
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_setenv(t, "KVS_METRICS_ADDR", "127.0.0.1");
    if (secret)
        it_setenv(t, "KVS_SECRET", "the job's secret that the blaster does not know");
    for (int i = 0; i < 3; i++) {
        mport[i] = it_dead_port(t);
        snprintf(mp[i], sizeof mp[i], "KVS_METRICS_PORT=%d", mport[i]);
    }
    const char *senv[] = {mp[0], NULL};
    it_start_scheduler(t, 2, 2, senv);
    for (int i = 0; i < 2; i++) {
        char name[32];
        snprintf(pf[i], sizeof pf[i], "KVS_PORT_FILE=%s/server%d.port", t->dir, i);
        const char *env[] = {pf[i], mp[1 + i], NULL};
        int s = it_start_server(t, i, env);
        snprintf(name, sizeof name, "server%d.port", i);
        IT_ASSERT(t, it_wait_file(t, name, 10, s), "server%d did not write KVS_PORT_FILE", i);
        sport[i] = it_read_port_file(t, name);
        IT_ASSERT(t, sport[i] > 0, "server%d's port file does not hold a port", i);
    }
    b.zports[b.nz++] = t->port;
    b.zports[b.nz++] = sport[0];
    b.zports[b.nz++] = sport[1];
    for (int i = 0; i < 3; i++)
        b.mports[b.nm++] = mport[i];
    for (int i = 0; i < 2; i++)
        it_start_worker(t, i, argv, NULL);
    for (int i = 0; i < 2; i++) { /* round 0 done: the workers' connections are bound */
        char name[32];
        snprintf(name, sizeof name, "paused-w%d", i);
        IT_ASSERT(t, it_wait_file(t, name, 30, t->worker[i]), "worker%d did not finish round 0", i);
    }
    fflush(NULL);
    pid_t pid = fork();
    IT_ASSERT(t, pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0)
        _exit(blaster(&b, t->dir));
    /* the flood is on before the workers go on, and goes on until they are done */
    double end = it_now() + 20 * it_slow;
    while (read_long(t, "blast-progress") < BLAST_BEFORE && it_now() < end)
        it_nap_ms(20);
    long before = read_long(t, "blast-progress");
    it_write_file(t, "go", "go\n");
    double t_go = it_now();
    /* the flood lasts up to BLAST_MAX_S and may slow the rounds that long
     * (with a secret each of its connections costs a refused handshake):
     * the rounds end soon after it at the latest */
    for (int i = 0; i < 2; i++)
        IT_CHECK(t, it_wait(t, t->worker[i], BLAST_MAX_S + 20), "worker%d did not finish", i);
    double t_rounds = it_now() - t_go;
    long during = read_long(t, "blast-progress");
    it_write_file(t, "blast-stop", "stop\n");
    int st = 0;
    end = it_now() + (BLAST_MAX_S + 10) * it_slow;
    while (waitpid(pid, &st, WNOHANG) == 0 && it_now() < end)
        it_nap_ms(20);
    if (waitpid(pid, &st, WNOHANG) == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        IT_ASSERT(t, 0, "the blaster did not stop");
    }
    char path[1200];
    snprintf(path, sizeof path, "%s/blast.log", t->dir);
    char *log = it_slurp(path, NULL);
    it_info(t, "%s", log ? log : "no blast.log");
    it_info(t, "%ld messages before the workers went on, %ld by the time they were done",
            before, during);
    FILE *sf = fopen(path, "a"); /* next to the blaster's own numbers (KVS_INTEG_KEEP=1) */
    if (sf) {
        fprintf(sf, "test: %ld messages before the workers went on, %ld by the time they "
                "were done (%.1f s of rounds)\n", before, during, t_rounds);
        fclose(sf);
    }
    it_expect_job_ok(t, 40); /* every worker checked every element of every round */
    IT_ASSERT(t, WIFEXITED(st) && WEXITSTATUS(st) == 0, "the blaster failed");
    long sent = read_long(t, "blast-progress");
    IT_ASSERT(t, sent >= BLAST_MIN, "only %ld garbage messages were sent", sent);
    IT_ASSERT(t, during - before >= BLAST_BEFORE, "only %ld messages while the workers ran "
              "their rounds", during - before);
    IT_ASSERT(t, before >= BLAST_BEFORE, "only %ld messages before the workers went on", before);
    const char *rx = log ? strstr(log, "received=") : NULL;
    long received = rx ? atol(rx + 9) : -1;
    if (secret) {
        IT_ASSERT(t, received == 0, "the blaster received %ld frames without the secret",
                  received);
        IT_CHECK(t, it_log_has(t, t->sched, "refused a connection", 0),
                 "the scheduler logged no refused proof");
        IT_CHECK(t, it_log_has(t, t->server[0], "refused a connection", 0),
                 "server0 logged no refused proof");
    } else {
        IT_CHECK(t, it_log_has(t, t->server[0], "drop", 1), "server0 logged no dropped message");
        IT_CHECK(t, it_log_has(t, t->sched, "drop", 1), "the scheduler logged no dropped message");
        IT_CHECK(t, received > 0, "no ERROR answer reached the blaster");
    }
    free(log);
    IT_ASSERT(t, t->failures == 0, "%d check(s) failed", t->failures);
}

IT_TEST(blast_2x2)
{
    blast_job(t, 0);
}

IT_TEST(blast_secret_2x2)
{
    blast_job(t, 1);
}
