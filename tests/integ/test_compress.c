/*
 * test_compress.c - gradient compression, run by kvs-compworker
 * (compworker.c): 2 workers x 2 servers push compressed gradients of tiny
 * keys (fused), a key split over both servers (MXNET_KVSTORE_BIGARRAY_BOUND)
 * and a big key (sharded; sliced with p3), and every pulled sum is compared
 * bit for bit with the sum of both workers' encoded gradients, computed in
 * the worker; dist_sync and dist_async, both data paths (same-host direct
 * copies on and off), p3, a server optimizer, a local group (its sum is
 * compressed once); the bytes each worker sent
 * against the float32 bytes they stand for; every error a user can cause;
 * workers that disagree.
 */
#include "tests.h"

#include <stdio.h>
#include <string.h>

static void comp_env(it_ctx *t)
{
    it_use_worker(t, "kvs-compworker");
    it_setenv(t, "MXNET_KVSTORE_BIGARRAY_BOUND", "1000");
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_setenv(t, "KVS_LOCAL_AGG", "0"); /* each worker pushes (and compresses) its own */
}

static void run(it_ctx *t, const char *const *argv)
{
    if (strstr(t->worker_bin, "kvs-compworker") == NULL)
        comp_env(t);
    it_start_job(t, 2, 2, argv);
    it_expect_job_ok(t, 60);
}

IT_TEST(compress_2bit_2x2)
{
    const char *argv[] = {"sum", "--spec", "2bit threshold=0.5", "--ratio", "10", NULL};
    run(t, argv);
}

IT_TEST(compress_2bit_socket_2x2)
{
    /* the replies (the servers' sums, compressed) are counted too */
    const char *argv[] = {"sum", "--spec", "2bit threshold=0.25", "--ratio", "10",
                          "--pull-ratio", "10", NULL};
    it_setenv(t, "KVS_CMA", "0");
    run(t, argv);
}

IT_TEST(compress_2bit_p3_2x2)
{
    const char *argv[] = {"sum", "--spec", "2bit threshold=0.5", "--ratio", "8", NULL};
    it_setenv(t, "DMLC_PS_VAN_TYPE", "p3");
    it_setenv(t, "MXNET_KVSTORE_SLICE_THRESHOLD", "3000");
    run(t, argv);
}

/* pull=0: replies stay float32 (the sums of the decoded pushes) */
IT_TEST(compress_2bit_nopull_2x2)
{
    const char *argv[] = {"sum", "--spec", "2bit threshold=0.5 pull=0", "--ratio", "10",
                          NULL};
    it_setenv(t, "KVS_CMA", "0");
    run(t, argv);
}

IT_TEST(compress_1bit_socket_2x2)
{
    const char *argv[] = {"sum", "--spec", "1bit", "--ratio", "16", "--pull-ratio", "16",
                          NULL};
    it_setenv(t, "KVS_CMA", "0");
    run(t, argv);
}

IT_TEST(compress_1bit_p3_2x2)
{
    /* 1-bit scales are per slice: the reference cuts the keys as p3 does */
    const char *argv[] = {"sum", "--spec", "1bit", "--ratio", "12", NULL};
    it_setenv(t, "DMLC_PS_VAN_TYPE", "p3");
    it_setenv(t, "MXNET_KVSTORE_SLICE_THRESHOLD", "3000");
    run(t, argv);
}

IT_TEST(compress_1bit_2x2)
{
    const char *argv[] = {"sum", "--spec", "1bit", "--ratio", "16", NULL};
    run(t, argv);
}

IT_TEST(compress_topk_2x2)
{
    const char *argv[] = {"sum", "--spec", "topk ratio=0.01", "--ratio", "20", NULL};
    run(t, argv);
}

IT_TEST(compress_fp16_2x2)
{
    const char *argv[] = {"sum", "--spec", "fp16", "--ratio", "1.8", NULL};
    run(t, argv);
}

IT_TEST(compress_none_2x2)
{
    /* sockets only, so that every pushed byte is counted */
    const char *argv[] = {"sum", "--spec", "none", "--ratio", "0.9", NULL};
    it_setenv(t, "KVS_CMA", "0");
    run(t, argv);
}

IT_TEST(compress_async_2x2)
{
    const char *argv[] = {"sum", "--spec", "2bit threshold=0.5", "--async", "--ratio", "10",
                          NULL};
    run(t, argv);
}

IT_TEST(compress_optim_2x2)
{
    const char *argv[] = {"sum", "--spec", "2bit threshold=0.5", "--optim",
                          "sgd learning_rate=0.1", "--ratio", "10", NULL};
    run(t, argv);
}

IT_TEST(compress_group_2x2)
{
    const char *argv[] = {"sum", "--spec", "2bit threshold=0.5", "--group", "--ratio", "10",
                          NULL};
    comp_env(t);
    it_setenv(t, "KVS_LOCAL_AGG", "1");
    it_setenv(t, "KVS_LOCAL_AGG_MIN", "0"); /* its tiny keys too: the group compresses */
    run(t, argv);
}

IT_TEST(compress_group_fp16_2x2)
{
    const char *argv[] = {"sum", "--spec", "fp16", "--group", "--ratio", "1.8", NULL};
    comp_env(t);
    it_setenv(t, "KVS_LOCAL_AGG", "1");
    it_setenv(t, "KVS_LOCAL_AGG_MIN", "0"); /* its tiny keys too: the group compresses */
    run(t, argv);
}

/* keys under KVS_LOCAL_AGG_MIN skip the group: each worker compresses its
 * own gradient with its own residual (the three small keys, one of them in
 * several parts), the group its sum of the big one */
IT_TEST(compress_group_floor_2x2)
{
    const char *argv[] = {"sum", "--spec", "2bit threshold=0.5", "--group", "--group-min",
                          "20000", "--ratio", "10", NULL};
    comp_env(t);
    it_setenv(t, "KVS_LOCAL_AGG", "1");
    it_setenv(t, "KVS_LOCAL_AGG_MIN", "20000");
    run(t, argv);
}

IT_TEST(compress_errors_2x2)
{
    const char *argv[] = {"errors", NULL};
    run(t, argv);
}

IT_TEST(compress_disagree_1x2)
{
    const char *argv[] = {"disagree", "--spec", "2bit threshold=0.5", NULL};
    comp_env(t);
    it_start_job(t, 1, 2, argv);
    it_expect_exit(t, t->worker[1], 0, 60);
    IT_ASSERT(t, it_log_has(t, t->worker[1], "is 'none' but worker 0 pushed with '2bit "
                            "threshold=0.5'", 0), "worker 1's error does not name both specs");
}

/* ---- malformed compressed pushes from a raw client ---- */

#include <zmq.h>

#define HDR 88
enum { T_INIT = 11, T_PUSHPULL = 14, T_REPLY = 15, T_ERROR = 16 };

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

/* A header of one float32 part of count elements; codec in flags bits 8-11. */
static void hdr(uint8_t out[HDR], int type, int codec, int sender, uint64_t req, uint64_t key,
                uint64_t count, uint64_t body_len)
{
    memset(out, 0, HDR);
    le(out, 0x3153564Bu, 4);
    le(out + 4, 1, 2);
    le(out + 6, (uint64_t)type, 2);
    le(out + 8, (uint64_t)codec << 8, 2); /* flags bits 8-11 (protocol.md) */
    le(out + 10, type == T_PUSHPULL, 2);
    le(out + 12, (uint64_t)(uint32_t)sender, 4);
    le(out + 24, req, 8);
    le(out + 32, key, 8);
    le(out + 48, count, 8);
    le(out + 56, count, 8);
    le(out + 80, body_len, 8);
}

static void *raw_client(it_ctx *t, void *ctx, int port, const char *ident)
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

static void send_raw(it_ctx *t, void *s, const uint8_t *h, const void *body, size_t len)
{
    IT_ASSERT(t, zmq_send(s, h, HDR, len ? ZMQ_SNDMORE : 0) == HDR, "send: %s",
              zmq_strerror(zmq_errno()));
    if (len)
        IT_ASSERT(t, zmq_send(s, body, len, 0) == (int)len, "send: %s",
                  zmq_strerror(zmq_errno()));
}

/* The answer to request req within 10 s: its type and status, body in body.
 * req 0: an ERROR about a message the decoder refused (it names none). */
static int answer(it_ctx *t, void *s, uint64_t req, int *status, char *body, size_t cap)
{
    uint8_t h[HDR];
    zmq_pollitem_t it = {s, 0, ZMQ_POLLIN, 0};
    IT_ASSERT(t, zmq_poll(&it, 1, (long)(10000 * it_slow)) > 0, "no answer to request %llu",
              (unsigned long long)req);
    IT_ASSERT(t, zmq_recv(s, h, HDR, 0) == HDR, "short header");
    int more = 0, n = 0;
    size_t ml = sizeof more;
    zmq_getsockopt(s, ZMQ_RCVMORE, &more, &ml);
    if (more)
        n = zmq_recv(s, body, cap - 1, 0);
    body[n > 0 ? (n < (int)cap ? n : (int)cap - 1) : 0] = '\0';
    IT_ASSERT(t, get_le(h + 24, 8) == req || (req == 0 && get_le(h + 6, 2) == T_ERROR),
              "answer to request %llu, expected %llu",
              (unsigned long long)get_le(h + 24, 8), (unsigned long long)req);
    *status = (int)(int32_t)get_le(h + 16, 4);
    return (int)get_le(h + 6, 2);
}

static void expect_refused(it_ctx *t, void *s, uint64_t req, int codec, uint64_t count,
                           const void *body, size_t len, const char *needle)
{
    uint8_t h[HDR];
    char text[4200];
    int status;
    hdr(h, T_PUSHPULL, codec, 9, req, 5, count, len);
    send_raw(t, s, h, body, len);
    int type = answer(t, s, req, &status, text, sizeof text);
    IT_ASSERT(t, (type == T_REPLY || type == T_ERROR) && status == -10 /* KVS_EPROTO */,
              "request %llu: type %d status %d, expected KVS_EPROTO", (unsigned long long)req,
              type, status);
    IT_ASSERT(t, strstr(text, needle) != NULL, "request %llu: '%s' does not say '%s'",
              (unsigned long long)req, text, needle);
}

/* Malformed compressed pushes are refused with KVS_EPROTO and a reason; the
 * server keeps serving: two valid 2-bit pushes then sum exactly.  Then two
 * pushes that ask for compressed replies (PROTO_F_ZPULL): both workers get
 * the same 2-bit body of the sum, byte for byte, as MXNet's semantics say
 * with the server's residual; the next round sends what that residual kept. */
IT_TEST(compress_bad_bodies_1x2)
{
    uint8_t h[HDR], body[512];
    char text[4200];
    int status;
    char pf[PATH_MAX + 32];
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_start_scheduler(t, 1, 2, NULL);
    snprintf(pf, sizeof pf, "KVS_PORT_FILE=%s/server0.port", t->dir);
    int sv = it_start_server(t, 0, (const char *const[]){pf, NULL});
    IT_ASSERT(t, it_wait_file(t, "server0.port", 10, sv), "the server wrote no KVS_PORT_FILE");
    int port = it_read_port_file(t, "server0.port");
    void *ctx = zmq_ctx_new();
    void *w0 = raw_client(t, ctx, port, "w9-0000000000000001");
    void *w1 = raw_client(t, ctx, port, "w11-0000000000000002");
    float zero[20] = {0};
    hdr(h, T_INIT, 0, 9, 1, 5, 20, sizeof zero);
    send_raw(t, w0, h, zero, sizeof zero);
    hdr(h, T_INIT, 0, 11, 2, 5, 20, 0);
    send_raw(t, w1, h, NULL, 0);
    IT_ASSERT(t, answer(t, w0, 1, &status, text, sizeof text) == T_REPLY && status == 0,
              "init: %d %s", status, text);
    IT_ASSERT(t, answer(t, w1, 2, &status, text, sizeof text) == T_REPLY && status == 0,
              "init: %d %s", status, text);
    /* 2bit of 20 elements: threshold + 2 words = 12 bytes */
    float half = 0.5f, nan = 0.0f / 0.0f;
    memset(body, 0, sizeof body);
    memcpy(body, &half, 4);
    expect_refused(t, w0, 10, 1, 20, body, 8, "expected 12");
    memcpy(body, &nan, 4);
    expect_refused(t, w0, 11, 1, 20, body, 12, "threshold");
    /* topk of 20 at ratio 0.1: k = 2, index 20 is out of range */
    float ratio = 0.1f;
    uint32_t k = 2, idx[2] = {3, 20};
    memcpy(body, &ratio, 4);
    memcpy(body + 4, &k, 4);
    memcpy(body + 8, idx, 8);
    expect_refused(t, w0, 12, 3, 20, body, 24, "out of range");
    expect_refused(t, w0, 13, 9, 20, body, 24, "unknown gradient compression 9");
    /* a compressed INIT is refused by the decoder */
    hdr(h, T_INIT, 1, 9, 14, 6, 20, 12);
    send_raw(t, w0, h, body, 12);
    IT_ASSERT(t, answer(t, w0, 0, &status, text, sizeof text) == T_ERROR && status == -10 &&
                 strstr(text, "compressed") != NULL,
              "compressed INIT: status %d '%s'", status, text);
    /* still serving: +T for elements 0-3, -T for 4-7, 0 after, from both */
    memcpy(body, &half, 4);
    uint32_t w = 0;
    for (int j = 0; j < 8; j++)
        w |= (j < 4 ? 3u : 2u) << (8 * (j / 4) + 6 - 2 * (j % 4));
    memcpy(body + 4, &w, 4);
    memset(body + 8, 0, 4);
    hdr(h, T_PUSHPULL, 1, 9, 20, 5, 20, 12);
    send_raw(t, w0, h, body, 12);
    hdr(h, T_PUSHPULL, 1, 11, 21, 5, 20, 12);
    send_raw(t, w1, h, body, 12);
    for (int c = 0; c < 2; c++) {
        float sum[20];
        char raw[sizeof sum + 1]; /* (answer ends the body with a '\0') */
        int type = answer(t, c ? w1 : w0, c ? 21 : 20, &status, raw, sizeof raw);
        memcpy(sum, raw, sizeof sum);
        IT_ASSERT(t, type == T_REPLY && status == 0, "valid push: type %d status %d", type,
                  status);
        for (int j = 0; j < 20; j++)
            IT_ASSERT(t, sum[j] == (j < 4 ? 1.0f : j < 8 ? -1.0f : 0.0f),
                      "element %d: %g", j, (double)sum[j]);
    }
    /* key 6 (16 elements): pushes with PROTO_F_ZPULL (flags bit 2) */
    hdr(h, T_INIT, 0, 9, 30, 6, 16, 64);
    send_raw(t, w0, h, zero, 64);
    hdr(h, T_INIT, 0, 11, 31, 6, 16, 0);
    send_raw(t, w1, h, NULL, 0);
    IT_ASSERT(t, answer(t, w0, 30, &status, text, sizeof text) == T_REPLY && status == 0,
              "init: %d %s", status, text);
    IT_ASSERT(t, answer(t, w1, 31, &status, text, sizeof text) == T_REPLY && status == 0,
              "init: %d %s", status, text);
    for (int round = 0; round < 2; round++) {
        uint8_t got[2][64];
        uint64_t req0 = 40 + 2 * (uint64_t)round;
        /* round 0: elements 0-3 +T, 4-7 -T from both (sums 1, -1); round 1: 0 */
        memcpy(body, &half, 4);
        memcpy(body + 4, round == 0 ? &w : &(uint32_t){0}, 4);
        for (int c = 0; c < 2; c++) {
            hdr(h, T_PUSHPULL, 1, c ? 11 : 9, req0 + (uint64_t)c, 6, 16, 8);
            le(h + 8, 1u << 8 | 4u, 2); /* 2bit, PROTO_F_ZPULL */
            le(h + 64, (uint64_t)round, 8);   /* the round it joins */
            send_raw(t, c ? w1 : w0, h, body, 8);
        }
        for (int c = 0; c < 2; c++) {
            uint8_t rh[HDR];
            zmq_pollitem_t it = {c ? w1 : w0, 0, ZMQ_POLLIN, 0};
            IT_ASSERT(t, zmq_poll(&it, 1, (long)(10000 * it_slow)) > 0, "no reply (round %d)",
                      round);
            IT_ASSERT(t, zmq_recv(c ? w1 : w0, rh, HDR, 0) == HDR, "short header");
            int n = zmq_recv(c ? w1 : w0, got[c], sizeof got[c], 0);
            IT_ASSERT(t, get_le(rh + 6, 2) == T_REPLY && get_le(rh + 16, 4) == 0 &&
                         get_le(rh + 24, 8) == req0 + (uint64_t)c,
                      "round %d worker %d: type %d status %d", round, c,
                      (int)get_le(rh + 6, 2), (int)(int32_t)get_le(rh + 16, 4));
            IT_ASSERT(t, (get_le(rh + 8, 2) >> 8 & 0xF) == 1 && get_le(rh + 80, 8) == 8 &&
                         n == 8,
                      "round %d worker %d: flags 0x%x, %d body bytes: not a 2-bit body of "
                      "16 elements", round, c, (unsigned)get_le(rh + 8, 2), n);
        }
        IT_ASSERT(t, memcmp(got[0], got[1], 8) == 0, "round %d: the workers got different "
                  "bytes", round);
        float tt;
        memcpy(&tt, got[0], 4);
        /* the sums are +-1 = +-2T: the server sends +-T and keeps +-T; the
         * next round (sum 0) sends what it kept */
        IT_ASSERT(t, tt == 0.5f && get_le(got[0] + 4, 4) == w, "round %d: threshold %g, "
                  "codes 0x%08x, expected 0x%08x", round, (double)tt,
                  (unsigned)get_le(got[0] + 4, 4), w);
    }
    zmq_close(w0);
    zmq_close(w1);
    zmq_ctx_term(ctx);
}
