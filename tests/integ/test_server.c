/*
 * test_server.c - the server's data path: answers leave in priority order.
 */
#include "tests.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
