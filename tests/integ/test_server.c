/*
 * test_server.c - the server's data path: answers leave in priority order.
 */
#include "tests.h"

#include "kvs.h"

#include <dirent.h>
#include <sched.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <zmq.h>

#define HDR 88
enum { T_INIT = 11, T_PULL = 13, T_PUSHPULL = 14, T_REPLY = 15, T_FUSED = 64 };

static void le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* A kvsd header (proto/proto.h layout): one float32 part of count elements. */
static void header(uint8_t out[HDR], int type, int sender, int prio, uint64_t req,
                   uint64_t key, uint64_t count, uint64_t round, uint64_t body_len)
{
    memset(out, 0, HDR);
    le(out, 0x3153564Bu, 4);
    le(out + 4, 1, 2);
    le(out + 6, (uint64_t)type, 2);
    le(out + 10, type == 12 || type == 14, 2); /* a push stands for one worker */
    le(out + 12, (uint64_t)(uint32_t)sender, 4);
    le(out + 20, (uint64_t)(uint32_t)prio, 4);
    le(out + 24, req, 8);
    le(out + 32, key, 8);
    le(out + 48, count, 8);
    le(out + 56, count, 8); /* total */
    le(out + 64, round, 8);
    le(out + 72, 0, 4);     /* KVS_FLOAT32 */
    le(out + 80, body_len, 8);
}

static void *client(it_ctx *t, void *ctx, int port, const char *ident)
{
    char ep[64];
    int linger = 0;
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    IT_ASSERT(t, s != NULL, "zmq_socket: %s", zmq_strerror(zmq_errno()));
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(s, ZMQ_ROUTING_ID, ident, strlen(ident));
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    IT_ASSERT(t, zmq_connect(s, ep) == 0, "zmq_connect %s: %s", ep, zmq_strerror(zmq_errno()));
    return s;
}

static void send_msg(it_ctx *t, void *s, const uint8_t *hdr, const void *body, size_t len)
{
    IT_ASSERT(t, zmq_send(s, hdr, HDR, len ? ZMQ_SNDMORE : 0) == HDR, "send: %s",
              zmq_strerror(zmq_errno()));
    if (len)
        IT_ASSERT(t, zmq_send(s, body, len, 0) == (int)len, "send: %s",
                  zmq_strerror(zmq_errno()));
}

/* One message within secs: header into hdr, body (up to cap) into body.
 * Returns the body length (0: none). */
static int recv_msg(it_ctx *t, void *s, uint8_t hdr[HDR], uint8_t *body, size_t cap,
                    double secs)
{
    zmq_pollitem_t it = {s, 0, ZMQ_POLLIN, 0};
    IT_ASSERT(t, zmq_poll(&it, 1, (long)(secs * 1000 * it_slow)) > 0,
              "no answer from the server within %.0f s", secs * it_slow);
    IT_ASSERT(t, zmq_recv(s, hdr, HDR, 0) == HDR, "short header");
    int more = 0;
    size_t ml = sizeof more;
    zmq_getsockopt(s, ZMQ_RCVMORE, &more, &ml);
    return more ? zmq_recv(s, body, cap, 0) : 0;
}

static int start_server_port(it_ctx *t)
{
    char pf[PATH_MAX + 32];
    snprintf(pf, sizeof pf, "KVS_PORT_FILE=%s/server0.port", t->dir);
    int s = it_start_server(t, 0, (const char *const[]){pf, NULL});
    IT_ASSERT(t, it_wait_file(t, "server0.port", 10, s), "the server wrote no KVS_PORT_FILE");
    int port = it_read_port_file(t, "server0.port");
    IT_ASSERT(t, port > 0, "the server's port file holds no port");
    return port;
}

#define NKEYS 24

/* Answers that become ready together leave highest priority first.  Worker
 * 0 (a raw client) pushes NKEYS keys with shuffled priorities: each waits
 * for worker 1.  Worker 1 then pushes all of them in one FUSED message, so
 * every round completes in one turn of the server's loop; worker 0 must get
 * its NKEYS answers in priority order, each with the exact sum. */
IT_TEST(server_priority_order_2x1)
{
    uint8_t h[HDR], body[4096];
    float one = 1.0f;
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_start_scheduler(t, 1, 2, NULL);
    int port = start_server_port(t);
    void *ctx = zmq_ctx_new();
    void *w0 = client(t, ctx, port, "w9-0000000000000001");
    void *w1 = client(t, ctx, port, "w11-0000000000000002");
    /* keys 1..NKEYS and 100: worker 0's values, then worker 1's init */
    for (int k = 0; k <= NKEYS; k++) {
        uint64_t key = k == NKEYS ? 100 : (uint64_t)k + 1;
        float zero = 0;
        header(h, T_INIT, 9, 0, 1000 + (uint64_t)k, key, 1, 0, 4);
        send_msg(t, w0, h, &zero, 4);
        header(h, T_INIT, 11, 0, 2000 + (uint64_t)k, key, 1, 0, 0);
        send_msg(t, w1, h, NULL, 0);
    }
    for (int k = 0; k <= NKEYS; k++) {
        recv_msg(t, w0, h, body, sizeof body, 10);
        IT_ASSERT(t, get_le(h + 6, 2) == T_REPLY && get_le(h + 16, 4) == 0,
                  "worker 0's init: type %d status %d", (int)get_le(h + 6, 2),
                  (int)(int32_t)get_le(h + 16, 4));
        recv_msg(t, w1, h, body, sizeof body, 10);
        IT_ASSERT(t, get_le(h + 6, 2) == T_REPLY && get_le(h + 16, 4) == 0,
                  "worker 1's init: type %d status %d", (int)get_le(h + 6, 2),
                  (int)(int32_t)get_le(h + 16, 4));
    }
    /* worker 0's pushes: priority of key k is a permutation of 0..NKEYS-1 */
    int prio[NKEYS];
    for (int k = 0; k < NKEYS; k++) {
        prio[k] = (k * 7 + 5) % NKEYS - NKEYS / 2;
        header(h, T_PUSHPULL, 9, prio[k], 1 + (uint64_t)k, 1 + (uint64_t)k, 1, 0, 4);
        send_msg(t, w0, h, &one, 4);
    }
    /* a pull of key 100 answered at once: the server handled every push */
    header(h, T_PULL, 9, 0, 500, 100, 1, 0, 0);
    send_msg(t, w0, h, NULL, 0);
    recv_msg(t, w0, h, body, sizeof body, 10);
    IT_ASSERT(t, get_le(h + 24, 8) == 500, "worker 0 got request %llu's answer before its pull's",
              (unsigned long long)get_le(h + 24, 8));
    /* worker 1: all NKEYS pushes in one FUSED message (records: header,
     * body padded to 8 bytes) */
    uint8_t fused[NKEYS * (HDR + 8)];
    for (int k = 0; k < NKEYS; k++) {
        float two = 2.0f;
        uint8_t *rec = fused + k * (HDR + 8);
        header(rec, T_PUSHPULL, 11, 0, 3001 + (uint64_t)k, 1 + (uint64_t)k, 1, 0, 4);
        memset(rec + HDR, 0, 8);
        memcpy(rec + HDR, &two, 4);
    }
    header(h, T_FUSED, 11, 0, 3000, 0, NKEYS, 0, sizeof fused);
    send_msg(t, w1, h, fused, sizeof fused);
    int last = INT32_MAX;
    for (int i = 0; i < NKEYS; i++) {
        int n = recv_msg(t, w0, h, body, sizeof body, 10);
        uint64_t req = get_le(h + 24, 8);
        IT_ASSERT(t, get_le(h + 6, 2) == T_REPLY && get_le(h + 16, 4) == 0 && req >= 1 &&
                     req <= NKEYS && n == 4,
                  "answer %d: type %d status %d request %llu body %d", i, (int)get_le(h + 6, 2),
                  (int)(int32_t)get_le(h + 16, 4), (unsigned long long)req, n);
        float v;
        memcpy(&v, body, 4);
        IT_ASSERT(t, v == 3.0f, "key %llu: sum %g, expected 3", (unsigned long long)req,
                  (double)v);
        int p = (int)(int32_t)get_le(h + 20, 4);
        IT_ASSERT(t, p == prio[req - 1], "answer %d: priority %d, its request had %d", i, p,
                  prio[req - 1]);
        IT_ASSERT(t, p <= last, "answer %d (key %llu, priority %d) came after one of priority "
                  "%d: not in priority order", i, (unsigned long long)req, p, last);
        last = p;
    }
    zmq_close(w0);
    zmq_close(w1);
    zmq_ctx_term(ctx);
}

/* Bodies bigger than a frame (DP_FRAME_MAX, 4 MiB) travel as several frames
 * of one message: with KVS_CHUNK_BYTES at 1 GiB every part of a 64 MiB key
 * (odd element counts, float32 and float16) is one message of many frames,
 * summed piece by piece at the pieces' offsets; every element is checked. */
static void big_frames(it_ctx *t, const char *cma)
{
    static const char *const argv[] = {"sum", "--dtype", "f32,f16", "--counts",
                                       "16777219,33554435,3", "--rounds", "2", "--pushpull",
                                       NULL};
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_setenv(t, "KVS_CHUNK_BYTES", "1073741824");
    it_setenv(t, "KVS_CMA", cma);
    it_setenv(t, "MXNET_KVSTORE_REDUCTION_NTHREADS", "2");
    it_start_job(t, 2, 2, argv);
    it_expect_job_ok(t, 240);
}

IT_TEST(big_frames_socket_2x2)
{
    big_frames(t, "0");
}

IT_TEST(big_frames_direct_2x2)
{
    big_frames(t, "1");
}

/* Peak resident memory of pid (VmHWM) in bytes, or 0. */
static unsigned long long vm_hwm(pid_t pid)
{
    char path[64], line[256];
    unsigned long long kb = 0;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0)
            kb = strtoull(line + 6, NULL, 10);
    fclose(f);
    return kb * 1024;
}

/* Speak ZMTP 3.0 to 127.0.0.1:port on a raw TCP socket as a PLAIN client:
 * the greeting, then a HELLO command frame that declares 1 GiB, and stream
 * up to 256 MiB of it (until the peer closes).  Returns the bytes taken. */
static size_t huge_hello(it_ctx *t, int port)
{
    static const uint8_t greet[64] = {0xFF, 0, 0, 0, 0, 0, 0, 0, 1, 0x7F, 3, 0,
                                      'P', 'L', 'A', 'I', 'N'};
    /* a long command frame of 2^30 bytes: "HELLO", then its username... */
    static const uint8_t cmd[9 + 6] = {0x06, 0, 0, 0, 0, 0x40, 0, 0, 0, 5, 'H', 'E', 'L', 'L', 'O'};
    const void *parts[] = {greet, cmd};
    const size_t lens[] = {sizeof greet, sizeof cmd};
    return it_raw_flood(t, port, parts, lens, 2, 'u');
}

/* With a job secret and the default KVS_MAX_MESSAGE (4 GiB), a peer that
 * opens a PLAIN handshake and streams a huge HELLO command makes the server
 * hold at most one frame (DP_FRAME_MAX): its peak memory grows less than
 * 16 MiB, and the job then works. */
IT_TEST(huge_hello_rss_secret_1x1)
{
    static const char *const argv[] = {"sum", "--dtype", "f32", "--rounds", "2", NULL};
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_setenv(t, "KVS_SECRET", "the job's own secret, 32 bytes!!");
    it_start_scheduler(t, 1, 1, NULL);
    int port = start_server_port(t);
    pid_t pid = t->proc[t->server[0]].pid;
    unsigned long long before = vm_hwm(pid);
    size_t took = huge_hello(t, port);
    unsigned long long after = vm_hwm(pid);
    it_info(t, "server: took %zu bytes of a 1 GiB HELLO; VmHWM %llu -> %llu KiB", took,
            before >> 10, after >> 10);
    IT_ASSERT(t, before > 0 && after < before + (16ull << 20),
              "the server grew by %llu MiB before any proof", (after - before) >> 20);
    it_start_worker(t, 0, argv, NULL);
    it_expect_job_ok(t, 60);
}

#define QB_COUNT (512u * 1024) /* float32 elements: 2 MiB replies */
#define QB_PULLS 64

/* A worker that stops reading its replies: a server keeps at most
 * KVS_MAX_QUEUED_BYTES of value replies queued for it (one reply always
 * goes) and answers the pulls beyond that KVS_EFULL naming the variable; the
 * replies that did go hold the exact value, and once the worker reads again
 * its pulls are answered as before.  The raw worker's socket keeps one
 * message (ZMQ_RCVHWM 1) and a small kernel buffer, so what it does not read
 * stays at the server. */
IT_TEST(reply_queue_bound_1x1)
{
    uint8_t h[HDR];
    float *vals = malloc(QB_COUNT * sizeof *vals), *got = malloc(QB_COUNT * sizeof *got);
    IT_ASSERT(t, vals && got, "out of memory");
    for (uint32_t i = 0; i < QB_COUNT; i++)
        vals[i] = (float)i - 1000.5f;
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_setenv(t, "KVS_MAX_QUEUED_BYTES", "16777216");
    it_start_scheduler(t, 1, 1, NULL);
    int port = start_server_port(t);
    void *ctx = zmq_ctx_new();
    char ep[64];
    int linger = 0, hwm = 1, buf = 65536;
    void *w0 = zmq_socket(ctx, ZMQ_DEALER);
    IT_ASSERT(t, w0 != NULL, "zmq_socket: %s", zmq_strerror(zmq_errno()));
    zmq_setsockopt(w0, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(w0, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(w0, ZMQ_RCVBUF, &buf, sizeof buf);
    zmq_setsockopt(w0, ZMQ_ROUTING_ID, "w9-0000000000000009", 19);
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    IT_ASSERT(t, zmq_connect(w0, ep) == 0, "zmq_connect %s: %s", ep, zmq_strerror(zmq_errno()));
    header(h, T_INIT, 9, 0, 1, 1, QB_COUNT, 0, QB_COUNT * 4);
    send_msg(t, w0, h, vals, QB_COUNT * 4);
    recv_msg(t, w0, h, (uint8_t *)got, QB_COUNT * 4, 10);
    IT_ASSERT(t, get_le(h + 6, 2) == T_REPLY && get_le(h + 16, 4) == 0,
              "init: type %d status %d", (int)get_le(h + 6, 2), (int)(int32_t)get_le(h + 16, 4));
    /* QB_PULLS x 2 MiB asked for, nothing read meanwhile */
    for (int i = 0; i < QB_PULLS; i++) {
        header(h, T_PULL, 9, 0, 100 + (uint64_t)i, 1, QB_COUNT, 0, 0);
        send_msg(t, w0, h, NULL, 0);
    }
    int full = 0, ok = 0;
    for (int i = 0; i < QB_PULLS; i++) {
        int n = recv_msg(t, w0, h, (uint8_t *)got, QB_COUNT * 4, 30);
        int st = (int)(int32_t)get_le(h + 16, 4);
        uint64_t req = get_le(h + 24, 8);
        IT_ASSERT(t, get_le(h + 6, 2) == T_REPLY && req >= 100 && req < 100 + QB_PULLS,
                  "answer %d: type %d request %llu", i, (int)get_le(h + 6, 2),
                  (unsigned long long)req);
        if (st == KVS_EFULL) {
            ((char *)got)[n < 1 ? 0 : (n < 4096 ? n : 4095)] = '\0';
            IT_ASSERT(t, n > 0 && strstr((char *)got, "KVS_MAX_QUEUED_BYTES=16777216") != NULL,
                      "pull %llu: KVS_EFULL without naming the bound: '%s'",
                      (unsigned long long)req, n > 0 ? (char *)got : "");
            full++;
            continue;
        }
        IT_ASSERT(t, st == 0 && n == (int)(QB_COUNT * 4), "pull %llu: status %d, %d bytes",
                  (unsigned long long)req, st, n);
        for (uint32_t j = 0; j < QB_COUNT; j++)
            IT_ASSERT(t, got[j] == vals[j], "pull %llu: element %u is %g, expected %g",
                      (unsigned long long)req, j, (double)got[j], (double)vals[j]);
        ok++;
    }
    it_info(t, "%d pulls answered with the value, %d with KVS_EFULL", ok, full);
    IT_ASSERT(t, ok >= 1 && full >= 1,
              "%d values and %d KVS_EFULL: the bound (16 MiB of 2 MiB replies) did not hold",
              ok, full);
    /* reading again: answered as before */
    header(h, T_PULL, 9, 0, 999, 1, QB_COUNT, 0, 0);
    send_msg(t, w0, h, NULL, 0);
    int n = recv_msg(t, w0, h, (uint8_t *)got, QB_COUNT * 4, 10);
    IT_ASSERT(t, get_le(h + 16, 4) == 0 && n == (int)(QB_COUNT * 4) && get_le(h + 24, 8) == 999,
              "the pull after reading: status %d, %d bytes", (int)(int32_t)get_le(h + 16, 4), n);
    IT_ASSERT(t, memcmp(got, vals, QB_COUNT * 4) == 0, "the pull after reading: wrong value");
    zmq_close(w0);
    zmq_ctx_term(ctx);
    free(vals);
    free(got);
}

/* ---- FUSED_REF: many big keys by reference in one message ---- */

enum { T_PUSH = 12, T_ERROR = 16, T_HELLO = 17, T_CHALLENGE = 33, T_PROOF = 34,
       T_FUSED_REPLY = 65, T_FUSED_REF = 66, F_CMA = 2 };
#define FR_BIG 70001 /* elements of a key by reference: 280 KB, summed off the loop */

/* A record of a fused body at out: header and body (padded to 8 bytes).
 * Returns its length. */
static size_t record(uint8_t *out, int type, int flags, uint64_t req, uint64_t key,
                     uint64_t count, uint64_t round, const void *body, size_t len)
{
    size_t padded = (len + 7) & ~(size_t)7;
    header(out, type, 9, 0, req, key, count, round, len);
    le(out + 8, (uint64_t)flags, 2);
    memset(out + HDR, 0, padded);
    if (len)
        memcpy(out + HDR, body, len);
    return HDR + padded;
}

/* A record by reference: the descriptor names src and dst in this process. */
static size_t ref_record(uint8_t *out, int type, uint64_t req, uint64_t key, uint64_t count,
                         uint64_t round, const void *src, const void *dst)
{
    uint8_t desc[16];
    le(desc, (uint64_t)(uintptr_t)src, 8);
    le(desc + 8, (uint64_t)(uintptr_t)dst, 8);
    return record(out, type, F_CMA, req, key, count, round, desc, sizeof desc);
}

/* Send a FUSED-like message (type) of n records; expect a whole-message
 * ERROR with status want naming its req_id, whose text holds what. */
static void expect_refused(it_ctx *t, void *w, int type, uint64_t req, const uint8_t *body,
                           size_t len, int n, const char *what)
{
    uint8_t h[HDR], text[4096];
    header(h, type, 9, 0, req, 0, (uint64_t)n, 0, len);
    send_msg(t, w, h, body, len);
    int tl = recv_msg(t, w, h, text, sizeof text - 1, 10);
    text[tl > 0 ? tl : 0] = '\0';
    IT_ASSERT(t, get_le(h + 6, 2) == T_ERROR && (int32_t)get_le(h + 16, 4) == KVS_EPROTO &&
                 get_le(h + 24, 8) == req,
              "a %s message (%s): type %d status %d request %llu, expected an ERROR "
              "KVS_EPROTO for request %llu (text: %s)", type == T_FUSED ? "FUSED" : "FUSED_REF",
              what, (int)get_le(h + 6, 2), (int)(int32_t)get_le(h + 16, 4),
              (unsigned long long)get_le(h + 24, 8), (unsigned long long)req, text);
    IT_ASSERT(t, strstr((char *)text, what) != NULL, "refusal text '%s' does not say '%s'",
              text, what);
}

/* One lone answer to request req: its status. */
static int lone_answer(it_ctx *t, void *w, uint64_t req, uint8_t *body, size_t cap)
{
    uint8_t h[HDR];
    recv_msg(t, w, h, body, cap, 10);
    IT_ASSERT(t, get_le(h + 6, 2) == T_REPLY && get_le(h + 24, 8) == req,
              "expected the REPLY to request %llu, got type %d for request %llu",
              (unsigned long long)req, (int)get_le(h + 6, 2),
              (unsigned long long)get_le(h + 24, 8));
    return (int)(int32_t)get_le(h + 16, 4);
}

/* The server takes big key parts by reference in one FUSED_REF message,
 * beside inline records, only from a worker that proved its memory:
 *  - before the proof a FUSED_REF with a record by reference is refused
 *    whole (its inline record is not handled either);
 *  - after it, the server reads the pushes from our memory and writes the
 *    sums into it (answers: FUSED_REPLY records by reference, no body), every
 *    element checked, with an inline record's answer beside them;
 *  - a record by reference at address 0 or wrapping around the address
 *    space, or inside a plain FUSED, refuses the whole message; one naming
 *    memory that is not mapped gets an error answer of its own. */
IT_TEST(server_fused_ref_1x1)
{
    static float vals[2][FR_BIG], outs[2][FR_BIG];
    static uint8_t body[1 << 20];
    static uint8_t nonce[16];
    uint8_t h[HDR], buf[4096];
    float small[8], zero8[8] = {0};
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_start_scheduler(t, 1, 1, NULL);
    int port = start_server_port(t);
    void *ctx = zmq_ctx_new();
    void *w = client(t, ctx, port, "w9-00000000000000f1");
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < FR_BIG; i++)
            vals[k][i] = (float)(i % 1000) * 0.25f + (float)k;
    for (int i = 0; i < 8; i++)
        small[i] = (float)i + 0.5f;
    /* keys 1 and 2 (big), 3 (small): INIT with zeros */
    static float zeros[FR_BIG];
    header(h, T_INIT, 9, 0, 1, 1, FR_BIG, 0, sizeof zeros);
    send_msg(t, w, h, zeros, sizeof zeros);
    IT_ASSERT(t, lone_answer(t, w, 1, buf, sizeof buf) == 0, "INIT key 1 failed");
    header(h, T_INIT, 9, 0, 2, 2, FR_BIG, 0, sizeof zeros);
    send_msg(t, w, h, zeros, sizeof zeros);
    IT_ASSERT(t, lone_answer(t, w, 2, buf, sizeof buf) == 0, "INIT key 2 failed");
    header(h, T_INIT, 9, 0, 3, 3, 8, 0, sizeof zero8);
    send_msg(t, w, h, zero8, sizeof zero8);
    IT_ASSERT(t, lone_answer(t, w, 3, buf, sizeof buf) == 0, "INIT key 3 failed");

    /* not proven yet: refused whole, the inline INIT of key 9 in it too */
    size_t len = ref_record(body, T_PUSHPULL, 11, 1, FR_BIG, 0, vals[0], outs[0]);
    len += record(body + len, T_INIT, 0, 12, 9, 8, 0, small, sizeof small);
    expect_refused(t, w, T_FUSED_REF, 10, body, len, 2, "did not prove");
    header(h, T_PULL, 9, 0, 13, 9, 8, 0, 0);
    send_msg(t, w, h, NULL, 0);
    IT_ASSERT(t, lone_answer(t, w, 13, buf, sizeof buf) != 0,
              "key 9 exists: a record of a refused FUSED_REF was handled");

    /* the proof: HELLO (our pid, where the challenge goes), CHALLENGE, PROOF */
    uint8_t hello[32] = {0};
    le(hello, (uint64_t)getpid(), 8);
    le(hello + 8, (uint64_t)(uintptr_t)nonce, 8);
    header(h, T_HELLO, 9, 0, 20, 0, 0, 0, sizeof hello);
    send_msg(t, w, h, hello, sizeof hello);
    int n = recv_msg(t, w, h, buf, sizeof buf, 10);
    IT_ASSERT(t, get_le(h + 6, 2) == T_CHALLENGE && n == 16,
              "HELLO answered with type %d (%d bytes), expected a CHALLENGE",
              (int)get_le(h + 6, 2), n);
    memcpy(nonce, buf, 16);
    memcpy(hello + 16, buf, 16);
    header(h, T_PROOF, 9, 0, 20, 0, 0, 0, sizeof hello);
    send_msg(t, w, h, hello, sizeof hello);
    IT_ASSERT(t, lone_answer(t, w, 20, buf, sizeof buf) == 0, "our PROOF was refused: %s",
              (char *)buf);

    /* proven: two big pushpulls by reference and a small one inline, round 0 */
    for (int k = 0; k < 2; k++)
        memset(outs[k], 0xFF, sizeof outs[k]);
    len = ref_record(body, T_PUSHPULL, 31, 1, FR_BIG, 0, vals[0], outs[0]);
    len += record(body + len, T_PUSHPULL, 0, 32, 3, 8, 0, small, sizeof small);
    len += ref_record(body + len, T_PUSHPULL, 33, 2, FR_BIG, 0, vals[1], outs[1]);
    header(h, T_FUSED_REF, 9, 0, 30, 0, 3, 0, len);
    send_msg(t, w, h, body, len);
    bool got[3] = {false, false, false};
    for (int left = 3; left > 0;) {
        static uint8_t rb[1 << 16];
        int rl = recv_msg(t, w, h, rb, sizeof rb, 20);
        IT_ASSERT(t, get_le(h + 6, 2) == T_FUSED_REPLY && get_le(h + 24, 8) == 30,
                  "expected a FUSED_REPLY to request 30, got type %d for %llu",
                  (int)get_le(h + 6, 2), (unsigned long long)get_le(h + 24, 8));
        uint64_t nrec = get_le(h + 48, 8), off = 0;
        for (uint64_t r = 0; r < nrec; r++) {
            IT_ASSERT(t, off + HDR <= (uint64_t)rl, "FUSED_REPLY cut short");
            const uint8_t *rh = rb + off;
            uint64_t req = get_le(rh + 24, 8), blen = get_le(rh + 80, 8);
            int st = (int)(int32_t)get_le(rh + 16, 4), fl = (int)get_le(rh + 8, 2);
            IT_ASSERT(t, req >= 31 && req <= 33 && !got[req - 31] && st == 0,
                      "answer record for request %llu, status %d", (unsigned long long)req, st);
            got[req - 31] = true;
            left--;
            if (req == 32) {
                IT_ASSERT(t, !(fl & F_CMA) && blen == sizeof small,
                          "the inline record's answer: flags %d, %llu bytes", fl,
                          (unsigned long long)blen);
                for (int i = 0; i < 8; i++) {
                    float v;
                    memcpy(&v, rh + HDR + 4 * i, 4);
                    IT_ASSERT(t, v == small[i], "key 3 element %d: %g, expected %g", i,
                              (double)v, (double)small[i]);
                }
            } else {
                IT_ASSERT(t, (fl & F_CMA) && blen == 0,
                          "request %llu by reference answered with flags %d and %llu bytes",
                          (unsigned long long)req, fl, (unsigned long long)blen);
            }
            off += HDR + ((blen + 7) & ~(uint64_t)7);
        }
    }
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < FR_BIG; i++)
            IT_ASSERT(t, outs[k][i] == vals[k][i],
                      "key %d element %d written into our memory: %g, expected %g", k + 1, i,
                      (double)outs[k][i], (double)vals[k][i]);

    /* refused whole: address 0, an address range that wraps, a record by
     * reference in a plain FUSED; the inline record beside them untouched */
    len = ref_record(body, T_PUSH, 41, 1, FR_BIG, 1, NULL, NULL);
    len += record(body + len, T_PUSHPULL, 0, 42, 3, 8, 1, small, sizeof small);
    expect_refused(t, w, T_FUSED_REF, 40, body, len, 2, "address 0");
    len = ref_record(body, T_PUSH, 51, 1, FR_BIG, 1, (void *)(uintptr_t)(UINT64_MAX - 64),
                     NULL);
    len += record(body + len, T_PUSHPULL, 0, 52, 3, 8, 1, small, sizeof small);
    expect_refused(t, w, T_FUSED_REF, 50, body, len, 2, "wrap");
    len = ref_record(body, T_PUSH, 61, 1, FR_BIG, 1, vals[0], NULL);
    len += record(body + len, T_PUSHPULL, 0, 62, 3, 8, 1, small, sizeof small);
    expect_refused(t, w, T_FUSED, 60, body, len, 2, "by reference");
    /* memory that is not mapped: that record's own error answer */
    len = ref_record(body, T_PUSH, 71, 2, FR_BIG, 1, (void *)(uintptr_t)0x1000, NULL);
    header(h, T_FUSED_REF, 9, 0, 70, 0, 1, 0, len);
    send_msg(t, w, h, body, len);
    static uint8_t rb2[4096];
    recv_msg(t, w, h, rb2, sizeof rb2, 10);
    IT_ASSERT(t, get_le(h + 6, 2) == T_FUSED_REPLY && get_le(rb2 + 24, 8) == 71 &&
                 (int32_t)get_le(rb2 + 16, 4) != 0,
              "a push by reference from unmapped memory: type %d, record request %llu "
              "status %d (expected an error answer)", (int)get_le(h + 6, 2),
              (unsigned long long)get_le(rb2 + 24, 8), (int)(int32_t)get_le(rb2 + 16, 4));
    /* the challenge no longer where the worker proved it (its memory
     * changed, as after an exec): once the server's re-check interval
     * (SRV_CMA_RECHECK_NS, 1 ms) has passed, records by reference are
     * refused; with the challenge back they are taken again */
    nonce[0] ^= 0xFF;
    usleep(20000);
    len = ref_record(body, T_PUSH, 91, 2, FR_BIG, 1, vals[1], NULL);
    len += record(body + len, T_PUSHPULL, 0, 92, 3, 8, 1, small, sizeof small);
    expect_refused(t, w, T_FUSED_REF, 90, body, len, 2, "did not prove");
    nonce[0] ^= 0xFF;
    len = ref_record(body, T_PUSH, 96, 2, FR_BIG, 1, vals[1], NULL);
    header(h, T_FUSED_REF, 9, 0, 95, 0, 1, 0, len);
    send_msg(t, w, h, body, len);
    recv_msg(t, w, h, rb2, sizeof rb2, 10);
    IT_ASSERT(t, get_le(h + 6, 2) == T_FUSED_REPLY && get_le(rb2 + 24, 8) == 96 &&
                 (int32_t)get_le(rb2 + 16, 4) == 0,
              "a push by reference with the challenge back in place: type %d, record "
              "request %llu status %d", (int)get_le(h + 6, 2),
              (unsigned long long)get_le(rb2 + 24, 8), (int)(int32_t)get_le(rb2 + 16, 4));
    /* key 3 is still at round 0's value: the inline records were not handled */
    header(h, T_PULL, 9, 0, 80, 3, 8, 1, 0);
    send_msg(t, w, h, NULL, 0);
    float got3[8];
    IT_ASSERT(t, lone_answer(t, w, 80, (uint8_t *)got3, sizeof got3) == 0, "pull of key 3");
    for (int i = 0; i < 8; i++)
        IT_ASSERT(t, got3[i] == small[i], "key 3 element %d: %g after refused messages, "
                  "expected %g", i, (double)got3[i], (double)small[i]);
    zmq_close(w);
    zmq_ctx_term(ctx);
}

/* ---- FUSED with record frames: big parts inline without a copy ---- */

enum { F_FRAME = 8 };
#define FF_BIG 20011 /* elements of a big key: 80 KB, at least DP_FUSE_MAX */

/* Send header h, then body, then n record frames: one message. */
static void send_frames(it_ctx *t, void *s, const uint8_t *h, const void *body, size_t len,
                        const void *const *frames, const size_t *flens, int n)
{
    IT_ASSERT(t, zmq_send(s, h, HDR, ZMQ_SNDMORE) == HDR, "send: %s", zmq_strerror(zmq_errno()));
    IT_ASSERT(t, zmq_send(s, body, len, n ? ZMQ_SNDMORE : 0) == (int)len, "send: %s",
              zmq_strerror(zmq_errno()));
    for (int i = 0; i < n; i++)
        IT_ASSERT(t, zmq_send(s, frames[i], flens[i], i + 1 < n ? ZMQ_SNDMORE : 0) ==
                         (int)flens[i],
                  "send: %s", zmq_strerror(zmq_errno()));
}

/* A FUSED message whose records of big parts have PROTO_F_FRAME (their
 * bodies are the message's record frames): two big pushpulls in record
 * frames and a small one inline come back as one FUSED_REPLY whose big
 * values are record frames too, every element checked; a frame missing,
 * of another size or left over, or a record frame flag on a lone message,
 * is refused whole with a reason (none of its records handled: the keys
 * keep their values), and the server goes on serving. */
IT_TEST(server_fused_frames_1x1)
{
    static float vals[2][FF_BIG], zeros[FF_BIG];
    static uint8_t rb[1 << 20], fb[3][FF_BIG * 4];
    uint8_t h[HDR], buf[4096], body[4096];
    float small[3] = {0.5f, -1.25f, 3.0f}, zero3[3] = {0};
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_start_scheduler(t, 1, 1, NULL);
    int port = start_server_port(t);
    void *ctx = zmq_ctx_new();
    void *w = client(t, ctx, port, "w9-00000000000000f2");
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < FF_BIG; i++)
            vals[k][i] = (float)(i % 977) * 0.5f - (float)k * 3.0f;
    for (uint64_t key = 1; key <= 3; key++) {
        uint64_t count = key == 2 ? 3 : FF_BIG;
        header(h, T_INIT, 9, 0, key, key, count, 0, count * 4);
        send_msg(t, w, h, key == 2 ? (const void *)zero3 : (const void *)zeros, count * 4);
        IT_ASSERT(t, lone_answer(t, w, key, buf, sizeof buf) == 0, "INIT key %llu failed",
                  (unsigned long long)key);
    }
    /* round 0: key 1 (frame 0), key 2 inline, key 3 (frame 1) */
    size_t len = record(body, T_PUSHPULL, F_FRAME, 11, 1, FF_BIG, 0, NULL, 0);
    le(body + 80, FF_BIG * 4, 8); /* its body_len: the frame's */
    len += record(body + len, T_PUSHPULL, 0, 12, 2, 3, 0, small, sizeof small);
    size_t at3 = len;
    len += record(body + len, T_PUSHPULL, F_FRAME, 13, 3, FF_BIG, 0, NULL, 0);
    le(body + at3 + 80, FF_BIG * 4, 8);
    const void *frames[3] = {vals[0], vals[1], vals[1]};
    size_t flens[3] = {FF_BIG * 4, FF_BIG * 4, FF_BIG * 4};
    header(h, T_FUSED, 9, 0, 10, 0, 3, 0, len);
    send_frames(t, w, h, body, len, frames, flens, 2);
    bool got[3] = {false, false, false};
    for (int left = 3; left > 0;) {
        zmq_pollitem_t it = {w, 0, ZMQ_POLLIN, 0};
        IT_ASSERT(t, zmq_poll(&it, 1, (long)(20000 * it_slow)) > 0, "no FUSED_REPLY");
        IT_ASSERT(t, zmq_recv(w, h, HDR, 0) == HDR, "short header");
        IT_ASSERT(t, get_le(h + 6, 2) == T_FUSED_REPLY && get_le(h + 24, 8) == 10,
                  "expected a FUSED_REPLY to request 10, got type %d for %llu",
                  (int)get_le(h + 6, 2), (unsigned long long)get_le(h + 24, 8));
        int rl = zmq_recv(w, rb, sizeof rb, 0), nf = 0, more = 0;
        size_t ml = sizeof more;
        zmq_getsockopt(w, ZMQ_RCVMORE, &more, &ml);
        while (more) {
            IT_ASSERT(t, nf < 3, "more record frames than records");
            int fl = zmq_recv(w, fb[nf], sizeof fb[nf], 0);
            IT_ASSERT(t, fl == FF_BIG * 4, "record frame %d of %d bytes", nf, fl);
            nf++;
            zmq_getsockopt(w, ZMQ_RCVMORE, &more, &ml);
        }
        uint64_t nrec = get_le(h + 48, 8), off = 0;
        int fi = 0;
        for (uint64_t r = 0; r < nrec; r++) {
            IT_ASSERT(t, off + HDR <= (uint64_t)rl, "FUSED_REPLY cut short");
            const uint8_t *rh = rb + off;
            uint64_t req = get_le(rh + 24, 8), blen = get_le(rh + 80, 8);
            int st = (int)(int32_t)get_le(rh + 16, 4), fl = (int)get_le(rh + 8, 2);
            IT_ASSERT(t, req >= 11 && req <= 13 && !got[req - 11] && st == 0,
                      "answer record for request %llu, status %d", (unsigned long long)req, st);
            got[req - 11] = true;
            left--;
            if (req == 12) {
                IT_ASSERT(t, !(fl & F_FRAME) && blen == sizeof small,
                          "the inline record's answer: flags %d, %llu bytes", fl,
                          (unsigned long long)blen);
                for (int i = 0; i < 3; i++) {
                    float v;
                    memcpy(&v, rh + HDR + 4 * i, 4);
                    IT_ASSERT(t, v == small[i], "key 2 element %d: %g, expected %g", i,
                              (double)v, (double)small[i]);
                }
                off += HDR + ((blen + 7) & ~(uint64_t)7);
                continue;
            }
            IT_ASSERT(t, (fl & F_FRAME) && blen == FF_BIG * 4 && fi < nf,
                      "request %llu's answer: flags %d, %llu bytes, record frame %d of %d",
                      (unsigned long long)req, fl, (unsigned long long)blen, fi, nf);
            const float *want = vals[req == 11 ? 0 : 1];
            for (int i = 0; i < FF_BIG; i++) {
                float v;
                memcpy(&v, fb[fi] + 4 * i, 4);
                IT_ASSERT(t, v == want[i], "request %llu element %d: %g, expected %g",
                          (unsigned long long)req, i, (double)v, (double)want[i]);
            }
            fi++;
            off += HDR;
        }
        IT_ASSERT(t, fi == nf && off == (uint64_t)rl,
                  "a FUSED_REPLY with %d record frames for %d framed records, %llu of %d bytes "
                  "read", nf, fi, (unsigned long long)off, rl);
    }

    /* refused whole: a frame missing, a frame of another size, one left over */
    static const char *const wants[3] = {"no record frame left", "another size",
                                         "record frames for"};
    for (int c = 0; c < 3; c++) {
        uint8_t text[4096];
        size_t l2 = record(body, T_PUSHPULL, F_FRAME, 21, 1, FF_BIG, 1, NULL, 0);
        le(body + 80, FF_BIG * 4, 8);
        l2 += record(body + l2, T_PUSHPULL, 0, 22, 2, 3, 1, small, sizeof small);
        size_t fl2[2] = {c == 1 ? FF_BIG * 4 - 4 : FF_BIG * 4, 8};
        header(h, T_FUSED, 9, 0, 20 + (uint64_t)c, 0, 2, 0, l2);
        send_frames(t, w, h, body, l2, frames, fl2, c == 0 ? 0 : c == 1 ? 1 : 2);
        int tl = recv_msg(t, w, h, text, sizeof text - 1, 10);
        text[tl > 0 ? tl : 0] = '\0';
        IT_ASSERT(t, get_le(h + 6, 2) == T_ERROR && (int32_t)get_le(h + 16, 4) == KVS_EPROTO &&
                     get_le(h + 24, 8) == 20 + (uint64_t)c,
                  "case %d: type %d status %d request %llu (text: %s), expected an ERROR "
                  "KVS_EPROTO", c, (int)get_le(h + 6, 2), (int)(int32_t)get_le(h + 16, 4),
                  (unsigned long long)get_le(h + 24, 8), text);
        IT_ASSERT(t, strstr((char *)text, wants[c]) != NULL,
                  "case %d: refusal text '%s' does not say '%s'", c, text, wants[c]);
    }
    /* a lone PUSHPULL that claims its body is a record frame */
    header(h, T_PUSHPULL, 9, 0, 30, 2, 3, 1, sizeof small);
    le(h + 8, F_FRAME, 2);
    send_msg(t, w, h, small, sizeof small);
    int tl = recv_msg(t, w, h, buf, sizeof buf - 1, 10);
    buf[tl > 0 ? tl : 0] = '\0';
    IT_ASSERT(t, get_le(h + 6, 2) == T_ERROR && (int32_t)get_le(h + 16, 4) == KVS_EPROTO &&
                 strstr((char *)buf, "record frame") != NULL,
              "a lone message with the record frame flag: type %d status %d text '%s'",
              (int)get_le(h + 6, 2), (int)(int32_t)get_le(h + 16, 4), buf);
    /* nothing of the refused messages was handled: round 0's values stand */
    for (uint64_t key = 1; key <= 2; key++) {
        static float gotv[FF_BIG];
        uint64_t count = key == 2 ? 3 : FF_BIG;
        header(h, T_PULL, 9, 0, 40 + key, key, count, 1, 0);
        send_msg(t, w, h, NULL, 0);
        IT_ASSERT(t, lone_answer(t, w, 40 + key, (uint8_t *)gotv, sizeof gotv) == 0,
                  "pull of key %llu", (unsigned long long)key);
        for (uint64_t i = 0; i < count; i++) {
            float want = key == 2 ? small[i] : vals[0][i];
            IT_ASSERT(t, gotv[i] == want, "key %llu element %llu: %g after refused messages, "
                      "expected %g", (unsigned long long)key, (unsigned long long)i,
                      (double)gotv[i], (double)want);
        }
    }
    zmq_close(w);
    zmq_ctx_term(ctx);
}

/* ---- a round's value written into the outputs as it is summed ---- */

#define WB_COUNT 600007u /* 2.4 MB: a job, summed over the reduction pool */

/* Where each raw worker writes the challenge it answers (the server reads it
 * back before every copy, so each stays put). */
static uint8_t wb_slot[2][16];

/* Offer direct copies on s as worker node sender (we are the process),
 * answer the challenge: the final REPLY must be success. */
static void wb_prove(it_ctx *t, void *s, int sender, uint8_t slot[16])
{
    uint8_t h[HDR], b[32] = {0}, body[256];
    le(b, (uint64_t)getpid(), 8);
    le(b + 8, (uint64_t)(uintptr_t)slot, 8);
    header(h, T_HELLO, sender, 0, 70 + (uint64_t)sender, 0, 0, 0, 32);
    send_msg(t, s, h, b, 32);
    int n = recv_msg(t, s, h, body, sizeof body, 10);
    IT_ASSERT(t, n == 16 && get_le(h + 6, 2) == T_CHALLENGE, "HELLO of node %d: type %d, %d "
              "bytes", sender, (int)get_le(h + 6, 2), n);
    memcpy(slot, body, 16);
    memcpy(b + 16, body, 16);
    header(h, T_PROOF, sender, 0, 70 + (uint64_t)sender, 0, 0, 0, 32);
    send_msg(t, s, h, b, 32);
    n = recv_msg(t, s, h, body, sizeof body, 10);
    IT_ASSERT(t, get_le(h + 6, 2) == T_REPLY && get_le(h + 16, 4) == 0,
              "PROOF of node %d: type %d status %d: %.*s", sender, (int)get_le(h + 6, 2),
              (int)(int32_t)get_le(h + 16, 4), n > 0 ? n : 0, (char *)body);
}

/* A request by reference (PROTO_F_CMA): src and dst in this process. */
static void wb_send(it_ctx *t, void *s, int type, int sender, uint64_t req, uint64_t round,
                    const void *src, void *dst)
{
    uint8_t h[HDR], d[16];
    header(h, type, sender, 0, req, 7, WB_COUNT, round, 16);
    h[8] = 2; /* PROTO_F_CMA */
    le(d, (uint64_t)(uintptr_t)src, 8);
    le(d + 8, (uint64_t)(uintptr_t)dst, 8);
    send_msg(t, s, h, d, 16);
}

/* The next answer on s: request req, status want (0: success without a body,
 * the value went by reference).  Returns its text for an error. */
static void wb_expect(it_ctx *t, void *s, const char *who, uint64_t req, int want,
                      const char *text)
{
    uint8_t h[HDR], body[512];
    int n = recv_msg(t, s, h, body, sizeof body - 1, 20);
    body[n > 0 ? n : 0] = '\0';
    int st = (int)(int32_t)get_le(h + 16, 4);
    IT_ASSERT(t, get_le(h + 6, 2) == T_REPLY && get_le(h + 24, 8) == req && st == want,
              "%s: answer to request %llu: type %d request %llu status %d (expected %d): %s",
              who, (unsigned long long)req, (int)get_le(h + 6, 2),
              (unsigned long long)get_le(h + 24, 8), st, want, (char *)body);
    IT_ASSERT(t, want == 0 ? n == 0 : strstr((char *)body, text) != NULL,
              "%s: answer to request %llu: %d body bytes '%s'", who, (unsigned long long)req,
              n, (char *)body);
}

static void wb_check(it_ctx *t, const char *what, const float *got, const float *a,
                     const float *b)
{
    for (uint32_t i = 0; i < WB_COUNT; i++)
        IT_ASSERT(t, got[i] == a[i] + b[i], "%s: element %u is %g, expected %g", what, i,
                  (double)got[i], (double)(a[i] + b[i]));
}

/* Two raw workers on one host push by reference; the job of each round's
 * last push writes the sum into every output by reference that the round
 * answers (pushpulls of the round, a pull waiting for it) piece by piece as
 * it sums.  Every element is checked; an output the server cannot write
 * (read-only memory) fails that request alone; the server's last line counts
 * the values written that way. */
IT_TEST(direct_write_as_summed_2x1)
{
    size_t bytes = (size_t)WB_COUNT * 4;
    float *a = malloc(bytes), *b = malloc(bytes), *out0 = malloc(bytes), *out1 = malloc(bytes);
    float *ro = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    IT_ASSERT(t, a && b && out0 && out1 && ro != MAP_FAILED, "out of memory");
    for (uint32_t i = 0; i < WB_COUNT; i++) {
        a[i] = (float)(i % 1000) * 0.5f;
        b[i] = (float)(1 + i % 7);
        out0[i] = out1[i] = -1.0f;
    }
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_setenv(t, "PS_VERBOSE", "1"); /* the server's last line */
    it_start_scheduler(t, 1, 2, NULL);
    int port = start_server_port(t);
    void *ctx = zmq_ctx_new();
    void *w0 = client(t, ctx, port, "w9-0000000000000001");
    void *w1 = client(t, ctx, port, "w11-0000000000000002");
    wb_prove(t, w0, 9, wb_slot[0]);
    wb_prove(t, w1, 11, wb_slot[1]);
    uint8_t h[HDR], body[256];
    float *got = calloc(WB_COUNT, 4); /* worker 0's init: zeros */
    IT_ASSERT(t, got != NULL, "out of memory");
    header(h, T_INIT, 9, 0, 1, 7, WB_COUNT, 0, bytes);
    send_msg(t, w0, h, got, bytes);
    header(h, T_INIT, 11, 0, 2, 7, WB_COUNT, 0, 0);
    send_msg(t, w1, h, NULL, 0);
    for (int i = 0; i < 2; i++) {
        recv_msg(t, i ? w1 : w0, h, body, sizeof body, 10);
        IT_ASSERT(t, get_le(h + 6, 2) == T_REPLY && get_le(h + 16, 4) == 0,
                  "worker %d's init: status %d", i, (int)(int32_t)get_le(h + 16, 4));
    }
    /* round 0: both pushpulls by reference, written as the last one sums */
    wb_send(t, w0, T_PUSHPULL, 9, 10, 0, a, out0);
    wb_send(t, w1, T_PUSHPULL, 11, 11, 0, b, out1);
    wb_expect(t, w0, "worker 0", 10, 0, NULL);
    wb_expect(t, w1, "worker 1", 11, 0, NULL);
    wb_check(t, "round 0, worker 0's pushpull", out0, a, b);
    wb_check(t, "round 0, worker 1's pushpull", out1, a, b);
    /* round 1: worker 0 pushes and pulls the round (the pull waits for it);
     * worker 1's output is read-only: its pushpull fails, not worker 0's pull */
    for (uint32_t i = 0; i < WB_COUNT; i++)
        out0[i] = -1.0f;
    wb_send(t, w0, T_PUSH, 9, 20, 1, b, NULL);
    wb_send(t, w0, T_PULL, 9, 21, 2, NULL, out0);
    /* a pull through the socket, answered at once: the server has both */
    header(h, T_PULL, 9, 0, 22, 7, WB_COUNT, 1, 0);
    send_msg(t, w0, h, NULL, 0);
    int n = recv_msg(t, w0, h, (uint8_t *)got, bytes, 20);
    IT_ASSERT(t, get_le(h + 24, 8) == 22 && get_le(h + 16, 4) == 0 && n == (int)bytes,
              "the pull of round 0's value: request %llu status %d, %d bytes",
              (unsigned long long)get_le(h + 24, 8), (int)(int32_t)get_le(h + 16, 4), n);
    wb_check(t, "round 0's value through the socket", got, a, b);
    wb_send(t, w1, T_PUSHPULL, 11, 23, 1, a, ro);
    wb_expect(t, w1, "worker 1", 23, -1, "cannot write the value into worker 1's memory");
    wb_expect(t, w0, "worker 0", 20, 0, NULL);
    wb_expect(t, w0, "worker 0", 21, 0, NULL);
    wb_check(t, "round 1, worker 0's pull by reference", out0, b, a);
    zmq_close(w0);
    zmq_close(w1);
    zmq_ctx_term(ctx);
    /* 2 outputs of round 0 and the pull of round 1 were written by the sum's job */
    it_kill(t, t->server[0], SIGTERM);
    IT_ASSERT(t, it_wait(t, t->server[0], 20), "the server did not stop on SIGTERM");
    IT_ASSERT(t, it_log_has(t, t->server[0], " 3 values written as summed", 0),
              "the server's last line does not count 3 values written as summed");
    munmap(ro, bytes);
    free(a);
    free(b);
    free(out0);
    free(out1);
    free(got);
}

/* ---- answers of a FUSED_REF held while jobs that answer it run ---- */

#define HB_N 9     /* keys: 6 big by reference, 2 mid by reference, 1 small inline */
#define HB_MID 5000 /* elements: 20000 bytes, by reference but summed on the loop */

static uint8_t hb_slot[2][16];

static uint64_t hb_count(int k)
{
    return k < 6 ? FR_BIG : k < 8 ? HB_MID : 8;
}

/* Worker 1's outputs of keys 0..nk-1 (its by-reference records) hold the
 * round's sums a + b, element by element. */
static void hb_check_out(it_ctx *t, float (*out)[FR_BIG], float (*a)[FR_BIG], float (*b)[FR_BIG],
                         int nk, const char *what)
{
    for (int k = 0; k < nk; k++)
        for (uint64_t i = 0; i < hb_count(k); i++)
            IT_ASSERT(t, out[k][i] == a[k][i] + b[k][i], "%s: key %d element %llu in worker 1's "
                      "memory: %g, expected %g", what, 201 + k, (unsigned long long)i,
                      (double)out[k][i], (double)(a[k][i] + b[k][i]));
}

/* Worker 0 (node 9) pushpulls its values a of round `round` into every key
 * (but the mid ones, 6 and 7, when skip_mid), each alone and inline, as
 * requests req + k; then a pull of the small key's current value (request
 * req + 10), whose answer tells that all of them were handled. */
static void hb_w0_round(it_ctx *t, void *w0, float (*a)[FR_BIG], uint64_t round, uint64_t req,
                        bool skip_mid)
{
    uint8_t h[HDR], body[256];
    for (int k = 0; k < HB_N; k++) {
        if (skip_mid && (k == 6 || k == 7))
            continue;
        header(h, T_PUSHPULL, 9, 0, req + (uint64_t)k, 201 + (uint64_t)k, hb_count(k), round,
               hb_count(k) * 4);
        send_msg(t, w0, h, a[k], hb_count(k) * 4);
    }
    header(h, T_PULL, 9, 0, req + 10, 209, 8, 0, 0);
    send_msg(t, w0, h, NULL, 0);
    IT_ASSERT(t, lone_answer(t, w0, req + 10, body, sizeof body) == 0,
              "the pull after worker 0's round %llu failed", (unsigned long long)round);
}

/* Worker 1's outputs of the big keys (0..5) back to -1 before a round. */
static void hb_clear_out(float (*out)[FR_BIG])
{
    for (int k = 0; k < 6; k++)
        for (uint64_t i = 0; i < FR_BIG; i++)
            out[k][i] = -1.0f;
}

/* A record of worker 1 (node 11): by reference (src, dst) or inline. */
static size_t hb_record(uint8_t *out, int type, uint64_t req, int k, uint64_t round,
                        const float *src, float *dst)
{
    size_t n;
    if (k < 8)
        n = ref_record(out, type, req, 201 + (uint64_t)k, hb_count(k), round, src, dst);
    else
        n = record(out, type, 0, req, 201 + (uint64_t)k, 8, round, src,
                   src ? 8 * sizeof(float) : 0);
    le(out + 12, 11, 4);
    return n;
}

/* The answers to the n records (requests reqs, keys keys) of FUSED_REF req
 * on s, in FUSED_REPLY messages: each success, by reference (flag, no body)
 * for keys below 8, else the 8 values, which must be want8.  Any other
 * message, a missing or repeated record fails.  Returns how many messages
 * they came in; *first: the records of the first one. */
static int hb_answers(it_ctx *t, void *s, uint64_t req, const uint64_t *reqs, const int *keys,
                      int n, const float *want8, uint64_t *first)
{
    static uint8_t rb[1 << 16];
    uint8_t h[HDR];
    bool got[HB_N] = {false};
    int msgs = 0;
    for (int left = n; left > 0; msgs++) {
    int rl = recv_msg(t, s, h, rb, sizeof rb, 30);
    IT_ASSERT(t, get_le(h + 6, 2) == T_FUSED_REPLY && get_le(h + 24, 8) == req,
              "expected a FUSED_REPLY to request %llu, got type %d for request %llu",
              (unsigned long long)req, (int)get_le(h + 6, 2),
              (unsigned long long)get_le(h + 24, 8));
    uint64_t nrec = get_le(h + 48, 8), off = 0;
    IT_ASSERT(t, nrec >= 1 && nrec <= (uint64_t)left, "a FUSED_REPLY to request %llu with "
              "%llu records, %d answers left", (unsigned long long)req,
              (unsigned long long)nrec, left);
    if (msgs == 0)
        *first = nrec;
    left -= (int)nrec;
    for (uint64_t r = 0; r < nrec; r++) {
        IT_ASSERT(t, off + HDR <= (uint64_t)rl, "FUSED_REPLY cut short");
        const uint8_t *rh = rb + off;
        uint64_t rq = get_le(rh + 24, 8), blen = get_le(rh + 80, 8);
        int st = (int)(int32_t)get_le(rh + 16, 4), fl = (int)get_le(rh + 8, 2), i;
        for (i = 0; i < n && reqs[i] != rq; i++)
            ;
        IT_ASSERT(t, i < n && !got[i] && st == 0, "answer record for request %llu, status %d",
                  (unsigned long long)rq, st);
        got[i] = true;
        if (keys[i] < 8) {
            IT_ASSERT(t, (fl & F_CMA) && blen == 0, "request %llu by reference answered with "
                      "flags %d and %llu bytes", (unsigned long long)rq, fl,
                      (unsigned long long)blen);
        } else {
            IT_ASSERT(t, !(fl & F_CMA) && blen == 8 * sizeof(float),
                      "the inline record's answer: flags %d, %llu bytes", fl,
                      (unsigned long long)blen);
            for (int e = 0; e < 8; e++) {
                float v;
                memcpy(&v, rh + HDR + 4 * e, 4);
                IT_ASSERT(t, v == want8[e], "small key element %d: %g, expected %g", e,
                          (double)v, (double)want8[e]);
            }
        }
        off += HDR + ((blen + 7) & ~(uint64_t)7);
    }
    }
    return msgs;
}

/* All n answers to FUSED_REF req in one FUSED_REPLY (see hb_answers). */
static void hb_expect(it_ctx *t, void *s, uint64_t req, const uint64_t *reqs, const int *keys,
                      int n, const float *want8)
{
    uint64_t first = 0;
    int msgs = hb_answers(t, s, req, reqs, keys, n, want8, &first);
    IT_ASSERT(t, msgs == 1, "the answers to FUSED_REF %llu came in %d messages, the first "
              "with %llu of %d: they were not held for the jobs that answered the others",
              (unsigned long long)req, msgs, (unsigned long long)first, n);
}

/* The answers to the records of one FUSED_REF that jobs sum or write (big
 * parts by reference) are held until the last of those jobs ends, with the
 * answers of the records handled on the loop beside them: one FUSED_REPLY
 * for the whole message, not one per turn of the loop.  Worker 0 (node 9)
 * pushes round 0 of 9 keys inline, each alone (its big pushes become the
 * round buffers: no job); worker 1 (node 11) pushpulls all 9 in one
 * FUSED_REF (6 big by reference: a job each, with the round's write-back;
 * 2 of 20000 bytes by reference and one small inline: on the loop) and
 * must get one FUSED_REPLY with 9 answers, the sums written into its memory
 * element by element; worker 0's 9 lone replies carry the same sums.  Then
 * worker 1 pulls round 1 of the big keys by reference (a write job each)
 * and the small one inline in one FUSED_REF: one FUSED_REPLY with 7. */
IT_TEST(server_fused_ref_held_2x1)
{
    static float a[HB_N][FR_BIG], b[HB_N][FR_BIG], out[HB_N][FR_BIG], got[FR_BIG];
    static uint8_t body[1 << 16];
    uint8_t h[HDR];
    uint64_t reqs[HB_N];
    int keys[HB_N];
    float sum8[8];
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_start_scheduler(t, 1, 2, NULL);
    int port = start_server_port(t);
    void *ctx = zmq_ctx_new();
    void *w0 = client(t, ctx, port, "w9-00000000000000h0");
    void *w1 = client(t, ctx, port, "w11-0000000000000h1");
    wb_prove(t, w0, 9, hb_slot[0]);
    wb_prove(t, w1, 11, hb_slot[1]);
    for (int k = 0; k < HB_N; k++)
        for (uint64_t i = 0; i < hb_count(k); i++) {
            a[k][i] = (float)((i + (uint64_t)k) % 1000) * 0.5f;
            b[k][i] = (float)(1 + (i + 3 * (uint64_t)k) % 7);
            out[k][i] = -1.0f;
        }
    for (int e = 0; e < 8; e++)
        sum8[e] = a[8][e] + b[8][e];
    /* worker 0 inits every key (zeros) */
    for (int k = 0; k < HB_N; k++) {
        header(h, T_INIT, 9, 0, 100 + (uint64_t)k, 201 + (uint64_t)k, hb_count(k), 0,
               hb_count(k) * 4);
        send_msg(t, w0, h, got, hb_count(k) * 4);
        IT_ASSERT(t, lone_answer(t, w0, 100 + (uint64_t)k, body, sizeof body) == 0,
                  "INIT of key %d failed", 201 + k);
    }
    /* round 0: worker 0's pushpulls, each alone and inline; a pull of the
     * small key's current value after them tells that all were handled */
    hb_w0_round(t, w0, a, 0, 110, false);
    /* worker 1: all 9 in one FUSED_REF, the small and mid ones around the big */
    size_t len = 0;
    static const int order[HB_N] = {8, 6, 0, 1, 2, 3, 4, 5, 7};
    for (int i = 0; i < HB_N; i++) {
        int k = order[i];
        keys[i] = k;
        reqs[i] = 131 + (uint64_t)i;
        len += hb_record(body + len, T_PUSHPULL, reqs[i], k, 0, b[k], k < 8 ? out[k] : NULL);
    }
    header(h, T_FUSED_REF, 11, 0, 130, 0, HB_N, 0, len);
    send_msg(t, w1, h, body, len);
    hb_expect(t, w1, 130, reqs, keys, HB_N, sum8);
    hb_check_out(t, out, a, b, 8, "round 0, written as summed");
    /* worker 0: its 9 lone answers, with the sums */
    for (int n = 0; n < HB_N; n++) {
        int bytes = recv_msg(t, w0, h, (uint8_t *)got, sizeof got, 30);
        uint64_t rq = get_le(h + 24, 8);
        IT_ASSERT(t, get_le(h + 6, 2) == T_REPLY && rq >= 110 && rq < 110 + HB_N &&
                     get_le(h + 16, 4) == 0,
                  "worker 0: type %d for request %llu, status %d", (int)get_le(h + 6, 2),
                  (unsigned long long)rq, (int)(int32_t)get_le(h + 16, 4));
        int k = (int)(rq - 110);
        IT_ASSERT(t, bytes == (int)(hb_count(k) * 4), "worker 0, key %d: %d bytes", 201 + k,
                  bytes);
        for (uint64_t i = 0; i < hb_count(k); i++)
            IT_ASSERT(t, got[i] == a[k][i] + b[k][i], "worker 0, key %d element %llu: %g, "
                      "expected %g", 201 + k, (unsigned long long)i, (double)got[i],
                      (double)(a[k][i] + b[k][i]));
    }
    /* worker 1 pulls round 1 (complete): the big keys by reference, each a
     * write job, and the small key inline, in one FUSED_REF */
    hb_clear_out(out);
    len = 0;
    int n = 0;
    for (int k = 8; k >= 0; k--) {
        if (k == 6 || k == 7)
            continue;
        keys[n] = k;
        reqs[n] = 141 + (uint64_t)n;
        len += hb_record(body + len, T_PULL, reqs[n], k, 1, NULL, k < 8 ? out[k] : NULL);
        n++;
    }
    header(h, T_FUSED_REF, 11, 0, 140, 0, (uint64_t)n, 0, len);
    send_msg(t, w1, h, body, len);
    hb_expect(t, w1, 140, reqs, keys, n, sum8);
    hb_check_out(t, out, a, b, 6, "round 0, pulled");
    /* round 1 with priorities (p3: a message may span layers): worker 1's
     * small key at priority 5 beside the big ones at 0 is not held for
     * their jobs: its answer leaves alone, on the loop turn after the
     * message (before any job's end can reach the loop) */
    hb_w0_round(t, w0, a, 1, 150, true);
    hb_clear_out(out);
    len = 0;
    n = 0;
    for (int k = 8; k >= 0; k--) {
        if (k == 6 || k == 7)
            continue;
        keys[n] = k;
        reqs[n] = 171 + (uint64_t)n;
        size_t at = len;
        len += hb_record(body + len, T_PUSHPULL, reqs[n], k, 1, b[k], k < 8 ? out[k] : NULL);
        if (k == 8)
            le(body + at + 20, 5, 4); /* priority */
        n++;
    }
    header(h, T_FUSED_REF, 11, 5, 170, 0, (uint64_t)n, 0, len);
    send_msg(t, w1, h, body, len);
    uint64_t first = 0;
    int msgs = hb_answers(t, w1, 170, reqs, keys, n, sum8, &first);
    it_info(t, "mixed priorities: %d answers in %d messages, %llu in the first", n, msgs,
            (unsigned long long)first);
    IT_ASSERT(t, first == 1, "a FUSED_REF of mixed priorities: its first FUSED_REPLY held %llu "
              "answers, expected the small key's alone (not held for the big keys' jobs)",
              (unsigned long long)first);
    hb_check_out(t, out, a, b, 6, "round 1");
    for (int m = 0; m < 7; m++) { /* worker 0's lone answers */
        recv_msg(t, w0, h, (uint8_t *)got, sizeof got, 30);
        IT_ASSERT(t, get_le(h + 6, 2) == T_REPLY && get_le(h + 16, 4) == 0,
                  "worker 0, round 1: type %d status %d", (int)get_le(h + 6, 2),
                  (int)(int32_t)get_le(h + 16, 4));
    }
    zmq_close(w0);
    zmq_close(w1);
    zmq_ctx_term(ctx);
}

/* ---- the job threads run below the loop (KVS_JOB_NICE) ---- */

/* Field `want` (19: niceness, 41: policy) of thread tid of process pid's
 * stat, or -100. */
static int thread_stat(pid_t pid, const char *tid, int want)
{
    char path[128], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/task/%s/stat", (int)pid, tid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -100;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the name may hold spaces */
    int v = -100, field = 2;
    for (; p && *p && field < want; p++)
        if (*p == ' ' && ++field == want)
            v = atoi(p + 1);
    return v;
}

static int thread_nice(pid_t pid, const char *tid)
{
    return thread_stat(pid, tid, 19);
}

/* A 1-server, 2-worker job of big sums with KVS_JOB_NICE=nice (NULL: the
 * default), paused after round 0 (both workers wait for the file "go"): the
 * server's pid. */
static pid_t start_niced_job(it_ctx *t, const char *nice)
{
    static const char *const argv[] = {"sum", "--counts", "300001", "--rounds", "2",
                                       "--pause-file", "go", NULL};
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    if (nice)
        it_setenv(t, "KVS_JOB_NICE", "%s", nice);
    it_setenv(t, "MXNET_KVSTORE_BIGARRAY_BOUND", "50000");
    it_setenv(t, "MXNET_KVSTORE_REDUCTION_NTHREADS", "2");
    /* the server must sum pushes itself: each worker pushes for itself (a
     * local group would send one summed push, which the server only adopts) */
    it_setenv(t, "KVS_LOCAL_AGG", "0");
    it_start_job(t, 1, 2, argv);
    for (int i = 0; i < 2; i++) {
        char name[32];
        snprintf(name, sizeof name, "paused-w%d", i);
        IT_ASSERT(t, it_wait_file(t, name, 60, t->worker[i]), "worker%d did not finish round 0", i);
    }
    return t->proc[t->server[0]].pid;
}

/* With KVS_JOB_NICE=7 a server's job runners and reduction helpers (which
 * have run big sums by then) run at niceness 7, its loop (the main thread)
 * at the process's own; no thread runs above the process's own priority
 * (common/prio.c), so a suite started at niceness 7 or more finds every thread
 * at the process's niceness.  The sums stay exact. */
IT_TEST(job_nice_2x1)
{
    pid_t pid = start_niced_job(t, "7");
    char dir[64], self[32];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    snprintf(self, sizeof self, "%d", (int)pid);
    int base = thread_nice(pid, self), niced = 0, at_base = 0, threads = 0;
    IT_ASSERT(t, base > -100, "cannot read the server's %s", dir);
    DIR *d = opendir(dir);
    IT_ASSERT(t, d != NULL, "opendir %s: %s", dir, strerror(errno));
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        int n = thread_nice(pid, e->d_name);
        threads++;
        niced += base < 7 && n == 7;
        at_base += n == base;
        IT_ASSERT(t, n >= base, "thread %s of the server at niceness %d, above its loop's %d",
                  e->d_name, n, base);
    }
    closedir(d);
    it_info(t, "server: %d threads, %d at niceness 7, %d at the loop's niceness %d", threads,
            niced, at_base, base);
    if (base < 7) {
        IT_ASSERT(t, niced >= 1, "no thread of the server runs at KVS_JOB_NICE=7 above its "
                  "loop's niceness %d", base);
        IT_ASSERT(t, niced < threads, "every thread of the server is niced, the loop too");
    } else {
        IT_ASSERT(t, at_base == threads, "%d of %d threads of the server at its niceness %d "
                  "(KVS_JOB_NICE=7 is below it)", at_base, threads, base);
    }
    it_write_file(t, "go", "go\n");
    it_expect_job_ok(t, 60);
}

/* The server's (pid's) threads under SCHED_IDLE (policy 5, stat field 41);
 * *threads: how many it has; *raised (NULL: not counted): how many run
 * under SCHED_OTHER at niceness PRIO_AUTO_NICE (10), where KVS_JOB_NICE=auto's
 * guard puts starved job threads for a while (common/prio.h).  Its loop (the
 * main thread) must be under SCHED_OTHER (0). */
static int idle_threads(it_ctx *t, pid_t pid, int *threads, int *raised)
{
    char dir[64], self[32];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    snprintf(self, sizeof self, "%d", (int)pid);
    int loop = thread_stat(pid, self, 41), idle = 0;
    IT_ASSERT(t, loop == 0, "the server's loop runs under policy %d, not SCHED_OTHER", loop);
    DIR *d = opendir(dir);
    IT_ASSERT(t, d != NULL, "opendir %s: %s", dir, strerror(errno));
    *threads = 0;
    if (raised)
        *raised = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        (*threads)++;
        int policy = thread_stat(pid, e->d_name, 41);
        idle += policy == 5;
        if (raised && policy == 0 && strcmp(e->d_name, self) != 0 &&
            thread_nice(pid, e->d_name) == 10)
            (*raised)++;
    }
    closedir(d);
    return idle;
}

/* KVS_JOB_NICE=idle: the job runners and reduction helpers (after big sums)
 * run under SCHED_IDLE (policy 5), the loop under SCHED_OTHER (0); the sums
 * stay exact. */
IT_TEST(job_nice_idle_2x1)
{
    int threads, idle = idle_threads(t, start_niced_job(t, "idle"), &threads, NULL);
    it_info(t, "server: %d threads, %d under SCHED_IDLE", threads, idle);
    IT_ASSERT(t, idle >= 2, "%d threads of the server under SCHED_IDLE with KVS_JOB_NICE=idle "
              "(want its 2 job runners at least)", idle);
    IT_ASSERT(t, idle < threads, "every thread of the server is under SCHED_IDLE");
    it_write_file(t, "go", "go\n");
    it_expect_job_ok(t, 120);
}

/* The default, KVS_JOB_NICE=auto: as idle where the server may move a
 * thread back from SCHED_IDLE (its log says when it may not: then its job
 * threads run at niceness 10); the sums stay exact, and the server's last
 * line counts the guard's raises. */
IT_TEST(job_nice_auto_2x1)
{
    it_setenv(t, "PS_VERBOSE", "1"); /* the server's last line */
    pid_t pid = start_niced_job(t, NULL);
    int s = t->server[0];
    if (it_log_has(t, s, "KVS_JOB_NICE=auto: this process may not move", 0)) {
        char self[32];
        snprintf(self, sizeof self, "%d", (int)pid);
        it_info(t, "the server may not leave SCHED_IDLE here: auto is niceness 10");
        IT_ASSERT(t, thread_nice(pid, self) < 10, "the server's loop is at niceness 10 too");
    } else {
        /* on a loaded machine the guard may have raised the job runners
         * (starved under SCHED_IDLE): they are then SCHED_OTHER at niceness 10
         * until the job's next work lowers them */
        int threads, raised, idle = idle_threads(t, pid, &threads, &raised);
        it_info(t, "server: %d threads, %d under SCHED_IDLE, %d raised by the guard", threads,
                idle, raised);
        IT_ASSERT(t, idle + raised >= 2, "%d threads of the server under SCHED_IDLE and %d "
                  "raised by the guard by default (want its 2 job runners at least)", idle,
                  raised);
        IT_ASSERT(t, idle < threads, "every thread of the server is under SCHED_IDLE");
    }
    it_write_file(t, "go", "go\n");
    it_expect_job_ok(t, 120);
    IT_ASSERT(t, it_log_has(t, s, "raises of starved job threads", 0),
              "the server's last line does not count the raises of starved job threads");
}

/* KVS_JOB_NICE=auto beside busy loops of niceness 0 on every CPU it may
 * use (a busy host: SCHED_IDLE alone would leave the sums about 0.3 % of a
 * CPU): the guard raises the job threads (the server's last line counts at
 * least one raise) and the job of big sums finishes, exact, in time.  The
 * job and the loops are confined to (at most) 2 of this runner's CPUs, so
 * that the loops fill them on any machine: the processes inherit the
 * runner's CPU mask, set around their start and restored right after. */
IT_TEST(job_nice_auto_busy_host_2x1)
{
    static const char *const argv[] = {"sum", "--counts", "4000000", "--rounds", "2", NULL};
    static const char *const hog[] = {"-c", "while :; do :; done", NULL};
    cpu_set_t all, few;
    int ncpu = 0;
    IT_ASSERT(t, sched_getaffinity(0, sizeof all, &all) == 0, "sched_getaffinity: %s",
              strerror(errno));
    CPU_ZERO(&few);
    for (size_t c = 0; c < CPU_SETSIZE && ncpu < 2; c++)
        if (CPU_ISSET(c, &all)) {
            CPU_SET(c, &few);
            ncpu++;
        }
    it_setenv(t, "KVS_START_TIMEOUT", "60");
    it_setenv(t, "KVS_JOB_NICE", "auto");
    it_setenv(t, "PS_VERBOSE", "1"); /* the server's last line */
    it_setenv(t, "MXNET_KVSTORE_REDUCTION_NTHREADS", "2");
    IT_ASSERT(t, sched_setaffinity(0, sizeof few, &few) == 0, "sched_setaffinity: %s",
              strerror(errno));
    it_start_job(t, 1, 2, argv);
    int hogs[2];
    for (int i = 0; i < ncpu; i++) {
        char name[32];
        snprintf(name, sizeof name, "hog%d", i);
        hogs[i] = it_spawn(t, name, "/bin/sh", hog, NULL);
    }
    IT_ASSERT(t, sched_setaffinity(0, sizeof all, &all) == 0, "sched_setaffinity: %s",
              strerror(errno));
    it_expect_job_ok(t, 240);
    for (int i = 0; i < ncpu; i++)
        it_kill(t, hogs[i], SIGKILL);
    int s = t->server[0];
    if (it_log_has(t, s, "KVS_JOB_NICE=auto: this process may not move", 0))
        it_skip(t, "the server may not leave SCHED_IDLE here: auto is niceness 10");
    IT_ASSERT(t, it_log_has(t, s, "raises of starved job threads", 0),
              "the server's last line does not count the raises of starved job threads");
    IT_ASSERT(t, !it_log_has(t, s, "KiB, 0 raises of starved job threads", 0),
              "the guard never raised the server's job threads beside %d busy loops", ncpu);
}

/* The number a server's last line gives before " jobs off the loop", or -1. */
static long long jobs_off_loop(const it_ctx *t, int idx)
{
    char *log = it_read_log(t, idx);
    const char *at = log ? strstr(log, " jobs off the loop") : NULL;
    long long n = -1;
    if (at) {
        const char *p = at;
        while (p > log && p[-1] >= '0' && p[-1] <= '9')
            p--;
        if (p < at)
            n = strtoll(p, NULL, 10);
    }
    free(log);
    return n;
}

/* Where the job's servers on a host are at least its CPUs, key parts up to
 * 256 KiB are summed on the server's loop, not by jobs (their hand-offs cost
 * more than a busy host's cores give back); else from 64 KiB by jobs.  One
 * server of 2 workers, keys of 240 KB, 12 KB and 20 bytes (direct copies:
 * read, summed and written back by the server), the processes confined to
 * ncpu of this runner's CPUs: exact sums either way (the workers check
 * them); with 1 CPU the server says so and runs no job, with 2 it runs
 * jobs and says nothing. */
static void offload_job(it_ctx *t, int ncpu)
{
    static const char *const argv[] = {"sum",    "--dtype",  "float32", "--counts",
                                       "60000,3000,5", "--rounds", "4", "--pushpull", NULL};
    cpu_set_t all, few;
    int got = 0;
    IT_ASSERT(t, sched_getaffinity(0, sizeof all, &all) == 0, "sched_getaffinity: %s",
              strerror(errno));
    CPU_ZERO(&few);
    for (size_t c = 0; c < CPU_SETSIZE && got < ncpu; c++)
        if (CPU_ISSET(c, &all)) {
            CPU_SET(c, &few);
            got++;
        }
    if (got < ncpu)
        it_skip(t, "this runner may use %d CPU(s), the test needs %d", got, ncpu);
    it_setenv(t, "PS_VERBOSE", "1"); /* the server's lines */
    IT_ASSERT(t, sched_setaffinity(0, sizeof few, &few) == 0, "sched_setaffinity: %s",
              strerror(errno));
    it_start_job(t, 1, 2, argv);
    IT_ASSERT(t, sched_setaffinity(0, sizeof all, &all) == 0, "sched_setaffinity: %s",
              strerror(errno));
    it_expect_job_ok(t, 120);
    int s = t->server[0];
    bool says = it_log_has(t, s, "1 server on this host's 1 CPU: key parts up to 256 KiB are "
                           "summed on the loop", 0);
    long long jobs = jobs_off_loop(t, s);
    IT_CHECK(t, says == (ncpu == 1), "with %d CPU(s) the server %s that it sums on its loop",
             ncpu, says ? "says" : "does not say");
    IT_CHECK(t, ncpu == 1 ? jobs == 0 : jobs >= 8, "with %d CPU(s) the server ran %lld jobs "
             "(%s)", ncpu, jobs, ncpu == 1 ? "none expected" : "at least 8 expected");
}

IT_TEST(offload_crowded_2x1)
{
    offload_job(t, 1);
}

IT_TEST(offload_spare_2x1)
{
    offload_job(t, 2);
}

#define MV_KEYS 16
#define MV_COUNT (1u << 20) /* float32 elements: 4 MiB per key, one chunk */

/* A server's memory after its values were replaced by received frames: a
 * raw worker inits MV_KEYS keys of 4 MiB (64 MiB: the server allocates
 * these values itself), then pushes every key 3 times, one message at a
 * time (at most one chunk in flight), checking each answer element by
 * element.  The pushes become the values (adopted frames) and the values
 * from the init are freed: the server's peak memory may grow by the 64 MiB
 * of values plus a few chunks, not keep the init's copy too (it did while
 * freed heap memory stayed resident: DP_MAP_MIN). */
IT_TEST(server_memory_values_1x1)
{
    uint8_t h[HDR];
    if (it_sanitized())
        it_skip(t, "a sanitizer's allocator keeps freed memory (quarantine): peak memory says "
                "nothing about the server's buffers there");
    float *vals = malloc(MV_COUNT * sizeof *vals), *got = malloc(MV_COUNT * sizeof *got);
    IT_ASSERT(t, vals && got, "out of memory");
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_start_scheduler(t, 1, 1, NULL);
    int port = start_server_port(t);
    pid_t pid = t->proc[t->server[0]].pid;
    void *ctx = zmq_ctx_new();
    void *w0 = client(t, ctx, port, "w9-0000000000000009");
    unsigned long long before = vm_hwm(pid);
    for (int k = 0; k < MV_KEYS; k++) {
        for (uint32_t i = 0; i < MV_COUNT; i++)
            vals[i] = (float)k - (float)(i % 1000);
        header(h, T_INIT, 9, 0, 1 + (uint64_t)k, 1 + (uint64_t)k, MV_COUNT, 0, MV_COUNT * 4);
        send_msg(t, w0, h, vals, MV_COUNT * 4);
        recv_msg(t, w0, h, (uint8_t *)got, MV_COUNT * 4, 30);
        IT_ASSERT(t, get_le(h + 6, 2) == T_REPLY && get_le(h + 16, 4) == 0,
                  "init of key %d: type %d status %d", k + 1, (int)get_le(h + 6, 2),
                  (int)(int32_t)get_le(h + 16, 4));
    }
    unsigned long long inited = vm_hwm(pid);
    for (uint64_t r = 0; r < 3; r++) {
        for (int k = 0; k < MV_KEYS; k++) {
            for (uint32_t i = 0; i < MV_COUNT; i++)
                vals[i] = (float)(r * 100 + (uint64_t)k) + (float)(i % 977);
            uint64_t req = 1000 + r * MV_KEYS + (uint64_t)k;
            header(h, T_PUSHPULL, 9, 0, req, 1 + (uint64_t)k, MV_COUNT, r, MV_COUNT * 4);
            send_msg(t, w0, h, vals, MV_COUNT * 4);
            int n = recv_msg(t, w0, h, (uint8_t *)got, MV_COUNT * 4, 30);
            IT_ASSERT(t, get_le(h + 6, 2) == T_REPLY && get_le(h + 16, 4) == 0 &&
                             get_le(h + 24, 8) == req && n == (int)(MV_COUNT * 4),
                      "round %llu key %d: type %d status %d request %llu, %d bytes",
                      (unsigned long long)r, k + 1, (int)get_le(h + 6, 2),
                      (int)(int32_t)get_le(h + 16, 4), (unsigned long long)get_le(h + 24, 8),
                      n);
            for (uint32_t i = 0; i < MV_COUNT; i++)
                IT_ASSERT(t, got[i] == vals[i], "round %llu key %d: element %u is %g, expected %g",
                          (unsigned long long)r, k + 1, i, (double)got[i], (double)vals[i]);
        }
    }
    unsigned long long after = vm_hwm(pid);
    uint64_t values = (uint64_t)MV_KEYS * MV_COUNT * 4, slack = 5ull * MV_COUNT * 4;
    it_info(t, "server VmHWM: %llu KiB at start, %llu after the inits, %llu after 3 rounds "
            "(values: %llu KiB)", before >> 10, inited >> 10, after >> 10,
            (unsigned long long)values >> 10);
    IT_ASSERT(t, before > 0 && after <= before + values + slack,
              "the server's peak memory grew by %llu MiB for %llu MiB of values (allowed: the "
              "values plus 5 chunks of 4 MiB)", (after - before) >> 20,
              (unsigned long long)values >> 20);
    zmq_close(w0);
    zmq_ctx_term(ctx);
    free(vals);
    free(got);
}

/* A refused message is answered with an ERROR that names its request when
 * its header frame has a header's size (bad magic, bad type: the worker
 * fails that request rather than waits for it), and req_id 0 when it does
 * not; the worker's connection keeps serving its good requests. */
IT_TEST(server_refusal_names_request_1x1)
{
    uint8_t h[HDR], body[4096];
    float v = 2.5f, got = 0;
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_start_scheduler(t, 1, 1, NULL);
    int port = start_server_port(t);
    void *ctx = zmq_ctx_new();
    void *w0 = client(t, ctx, port, "w9-0000000000000009");
    header(h, T_INIT, 9, 0, 1, 7, 1, 0, 4);
    send_msg(t, w0, h, &v, 4);
    recv_msg(t, w0, h, body, sizeof body, 10);
    IT_ASSERT(t, get_le(h + 6, 2) == T_REPLY && get_le(h + 16, 4) == 0,
              "init: type %d status %d", (int)get_le(h + 6, 2), (int)(int32_t)get_le(h + 16, 4));
    struct {
        const char *what;
        int magic, type, hdr_len;
        uint64_t req, want_req;
    } bad[] = {
        {"bad magic", 0x12345678, T_PULL, HDR, 4242, 4242},
        {"unknown type", 0x3153564B, 999, HDR, 4243, 4243},
        {"a header frame of 10 bytes", 0x3153564B, T_PULL, 10, 4244, 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        header(h, T_PULL, 9, 0, bad[i].req, 7, 1, 0, 0);
        le(h, (uint64_t)(uint32_t)bad[i].magic, 4);
        le(h + 6, (uint64_t)bad[i].type, 2);
        IT_ASSERT(t, zmq_send(w0, h, (size_t)bad[i].hdr_len, 0) == bad[i].hdr_len, "send: %s",
                  zmq_strerror(zmq_errno()));
        int n = recv_msg(t, w0, h, body, sizeof body - 1, 10);
        body[n < 0 ? 0 : n] = '\0';
        IT_ASSERT(t, get_le(h + 6, 2) == T_ERROR && (int32_t)get_le(h + 16, 4) == KVS_EPROTO &&
                         get_le(h + 24, 8) == bad[i].want_req,
                  "%s: type %d status %d request %llu (expected ERROR, KVS_EPROTO, request %llu)",
                  bad[i].what, (int)get_le(h + 6, 2), (int)(int32_t)get_le(h + 16, 4),
                  (unsigned long long)get_le(h + 24, 8), (unsigned long long)bad[i].want_req);
        IT_ASSERT(t, n > 0, "%s: an ERROR without a reason", bad[i].what);
        /* the connection still serves: a good pull of key 7 */
        header(h, T_PULL, 9, 0, 5000 + i, 7, 1, 0, 0);
        send_msg(t, w0, h, NULL, 0);
        n = recv_msg(t, w0, h, (uint8_t *)&got, sizeof got, 10);
        IT_ASSERT(t, get_le(h + 6, 2) == T_REPLY && get_le(h + 16, 4) == 0 &&
                         get_le(h + 24, 8) == 5000 + i && n == 4 && got == v,
                  "after %s: pull answered type %d status %d request %llu, %d bytes, %g",
                  bad[i].what, (int)get_le(h + 6, 2), (int)(int32_t)get_le(h + 16, 4),
                  (unsigned long long)get_le(h + 24, 8), n, (double)got);
    }
    zmq_close(w0);
    zmq_ctx_term(ctx);
}

/* A worker whose request a server refuses without naming it (an ERROR with
 * req_id 0 and KVS_EPROTO: what a server answers a message whose header
 * frame is not a header) fails its call at once with that error, rather
 * than wait forever.  This process stands in for the server: it registers
 * with the real scheduler and answers the worker's first data request so. */
IT_TEST(worker_unmatched_refusal_1x1)
{
    enum { T_REGISTER = 1, T_ANNOUNCE = 35 };
    char ep[128], body[256];
    uint8_t h[HDR];
    size_t len = sizeof ep;
    int linger = 0;
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_setenv(t, "PS_HEARTBEAT_TIMEOUT", "120");
    it_setenv(t, "KVS_CMA", "0");
    it_start_scheduler(t, 1, 1, NULL);
    void *ctx = zmq_ctx_new();
    void *data = zmq_socket(ctx, ZMQ_ROUTER), *link = zmq_socket(ctx, ZMQ_DEALER);
    IT_ASSERT(t, data && link, "zmq_socket: %s", zmq_strerror(zmq_errno()));
    zmq_setsockopt(data, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(link, ZMQ_LINGER, &linger, sizeof linger);
    IT_ASSERT(t, zmq_bind(data, "tcp://127.0.0.1:*") == 0, "bind: %s", zmq_strerror(zmq_errno()));
    zmq_getsockopt(data, ZMQ_LAST_ENDPOINT, ep, &len);
    snprintf(body, sizeof body, "server-%d-00112233aabbccdd", (int)getpid());
    zmq_setsockopt(link, ZMQ_ROUTING_ID, body, strlen(body));
    snprintf(body, sizeof body, "tcp://127.0.0.1:%d", t->port);
    IT_ASSERT(t, zmq_connect(link, body) == 0, "connect: %s", zmq_strerror(zmq_errno()));
    snprintf(body, sizeof body, "role=server endpoint=%s rank=0 host=127.0.0.1 servers=1 workers=1",
             ep);
    header(h, T_REGISTER, 0, 0, 0, 0, 0, 0, strlen(body));
    send_msg(t, link, h, body, strlen(body));
    int w = it_start_worker(t, 0, (const char *const[]){"sum", "--counts", "100", "--rounds", "1",
                                                         NULL},
                            NULL);
    int refused = 0;
    double end = it_now() + 30 * it_slow;
    while (!it_wait(t, w, 0) && it_now() < end) {
        zmq_pollitem_t it[2] = {{data, 0, ZMQ_POLLIN, 0}, {link, 0, ZMQ_POLLIN, 0}};
        if (zmq_poll(it, 2, 50) <= 0)
            continue;
        if (it[1].revents & ZMQ_POLLIN) { /* the scheduler's: read and let go */
            zmq_msg_t m;
            zmq_msg_init(&m);
            while (zmq_msg_recv(&m, link, ZMQ_DONTWAIT) >= 0)
                ;
            zmq_msg_close(&m);
        }
        if (!(it[0].revents & ZMQ_POLLIN))
            continue;
        uint8_t ident[256], req[HDR];
        int il = zmq_recv(data, ident, sizeof ident, 0), more = 0, type = -1;
        size_t ml = sizeof more;
        zmq_getsockopt(data, ZMQ_RCVMORE, &more, &ml);
        while (more) { /* the header, then whatever follows */
            zmq_msg_t m;
            zmq_msg_init(&m);
            zmq_msg_recv(&m, data, 0);
            if (type < 0 && zmq_msg_size(&m) == HDR) {
                memcpy(req, zmq_msg_data(&m), HDR);
                type = (int)get_le(req + 6, 2);
            }
            more = zmq_msg_more(&m);
            zmq_msg_close(&m);
        }
        if (il <= 0 || type < 0 || type == T_ANNOUNCE)
            continue;
        const char *text = "a header frame of 10 bytes (expected 88)";
        header(h, T_ERROR, 8, 0, 0, 0, 0, 0, strlen(text));
        le(h + 16, (uint64_t)(uint32_t)KVS_EPROTO, 4);
        zmq_send(data, ident, (size_t)il, ZMQ_SNDMORE);
        send_msg(t, data, h, text, strlen(text));
        refused++;
    }
    zmq_close(data);
    zmq_close(link);
    zmq_ctx_term(ctx);
    IT_ASSERT(t, it_wait(t, w, 0), "the worker still waits %.0f s after a refusal it cannot "
              "match (%d refused)", 30 * it_slow, refused);
    IT_ASSERT(t, refused >= 1, "the worker sent no data request");
    IT_ASSERT(t, !it_exited_with(t, w, 0), "the worker exited 0 after its request was refused");
    IT_ASSERT(t, it_log_has(t, w, "KVS_EPROTO", 0) &&
                     it_log_has(t, w, "server 0 refused a message it could not match to a "
                                "request: a header frame of 10 bytes", 0),
              "the worker's log does not name the refusal");
}
