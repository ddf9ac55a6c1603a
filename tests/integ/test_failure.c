/*
 * test_failure.c - a worker or a server SIGKILLed in the middle of a job
 * (everyone else gets KVS_EPEERDEAD naming it, nothing hangs), and garbage
 * sent to a server's and the scheduler's ports (dropped, logged, the job's
 * sums stay exact).
 */
#include "tests.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#define HB_TIMEOUT_S 2.0

static void failure_env(it_ctx *t)
{
    it_setenv(t, "MXNET_KVSTORE_BIGARRAY_BOUND", "1000");
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_setenv(t, "PS_HEARTBEAT_INTERVAL", "0.2");
    it_setenv(t, "PS_HEARTBEAT_TIMEOUT", "2");
    it_setenv(t, "PS_VERBOSE", "1");
}

static void wait_ready(it_ctx *t)
{
    for (int i = 0; i < t->nworker; i++) {
        char name[32];
        snprintf(name, sizeof name, "ready-w%d", i);
        IT_ASSERT(t, it_wait_file(t, name, 30, t->worker[i]), "worker%d was not ready within 30 s", i);
    }
}

/* Kill proc idx, tell the workers whom to expect dead (written first). */
static double kill_node(it_ctx *t, int idx, const char *role, int rank)
{
    char text[64];
    snprintf(text, sizeof text, "%s %d\n", role, rank);
    it_write_file(t, "expect-dead", text);
    double t0 = it_now();
    it_kill(t, idx, SIGKILL);
    IT_ASSERT(t, it_wait(t, idx, 5), "%s did not die of SIGKILL", t->proc[idx].name);
    it_write_file(t, "killed", "1\n");
    it_info(t, "killed %s (%s %d)", t->proc[idx].name, role, rank);
    return t0;
}

/* Every survivor exits 0 within the heartbeat timeout + slack; then the
 * scheduler and the remaining servers end by themselves, not by a signal. */
static void expect_survivors(it_ctx *t, const int *alive, int n, double t_kill)
{
    char buf[128];
    double limit = HB_TIMEOUT_S + 8;
    for (int i = 0; i < n; i++) {
        double left = t_kill + limit * it_slow - it_now();
        it_expect_exit(t, alive[i], 0, (left > 0 ? left : 0) / it_slow);
        it_info(t, "%s exited 0, %.2f s after the kill", t->proc[alive[i]].name,
                t->proc[alive[i]].t_end - t_kill);
    }
    int others[IT_MAX_PROCS], no = 0;
    if (t->sched >= 0)
        others[no++] = t->sched;
    for (int i = 0; i < t->nserver; i++)
        others[no++] = t->server[i];
    for (int i = 0; i < no; i++) {
        it_proc *p = &t->proc[others[i]];
        if (p->reaped && WIFSIGNALED(p->status) && WTERMSIG(p->status) == SIGKILL)
            continue; /* the victim */
        IT_ASSERT(t, it_wait(t, others[i], 15), "%s still running 15 s after the survivors left", p->name);
        IT_ASSERT(t, WIFEXITED(p->status), "%s: %s", p->name, it_status_str(p, buf, sizeof buf));
        it_info(t, "%s: %s", p->name, it_status_str(p, buf, sizeof buf));
    }
}

IT_TEST(kill_worker_2x3)
{
    static const char *const pull[] = {"peer-dead", "--block", "pull", NULL};
    static const char *const victim[] = {"victim", NULL};
    static const char *const barrier[] = {"peer-dead", "--block", "barrier", NULL};
    failure_env(t);
    it_start_scheduler(t, 2, 3, NULL);
    it_start_server(t, 0, NULL);
    it_start_server(t, 1, NULL);
    int w0 = it_start_worker(t, 0, pull, NULL);
    int w1 = it_start_worker(t, 1, victim, NULL);
    int w2 = it_start_worker(t, 2, barrier, NULL);
    wait_ready(t);
    /* ready-w1 holds the victim's rank. */
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/ready-w1", t->dir);
    char *s = it_slurp(path, NULL);
    IT_ASSERT(t, s != NULL, "cannot read %s", path);
    int rank = atoi(s);
    free(s);
    double t_kill = kill_node(t, w1, "worker", rank);
    int alive[2] = {w0, w2};
    expect_survivors(t, alive, 2, t_kill);
}

/* A worker dies while the other's completions are registered with
 * kvs_on_complete: every callback runs, with KVS_EPEERDEAD naming it. */
IT_TEST(kill_worker_callback_1x2)
{
    static const char *const cb[] = {"peer-dead", "--block", "callback", NULL};
    static const char *const victim[] = {"victim", NULL};
    failure_env(t);
    it_start_scheduler(t, 1, 2, NULL);
    it_start_server(t, 0, NULL);
    int w0 = it_start_worker(t, 0, cb, NULL);
    int w1 = it_start_worker(t, 1, victim, NULL);
    wait_ready(t);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/ready-w1", t->dir);
    char *s = it_slurp(path, NULL);
    IT_ASSERT(t, s != NULL, "cannot read %s", path);
    int rank = atoi(s);
    free(s);
    double t_kill = kill_node(t, w1, "worker", rank);
    int alive[1] = {w0};
    expect_survivors(t, alive, 1, t_kill);
}

/* Kill server 1 of a 2x2 job: worker0 does not push until after the kill,
 * worker1 is blocked in its wait.  bound: MXNET_KVSTORE_BIGARRAY_BOUND (the
 * split key has 2 x bound + 1 elements). */
static void kill_server(it_ctx *t, const char *bound)
{
    static const char *const late[] = {"peer-dead", "--block", "late", NULL};
    static const char *const pull[] = {"peer-dead", "--block", "pull", NULL};
    failure_env(t);
    it_setenv(t, "MXNET_KVSTORE_BIGARRAY_BOUND", "%s", bound);
    it_start_scheduler(t, 2, 2, NULL);
    it_start_server(t, 0, NULL);
    int s1 = it_start_server(t, 1, NULL);
    int w0 = it_start_worker(t, 0, late, NULL);
    int w1 = it_start_worker(t, 1, pull, NULL);
    wait_ready(t);
    double t_kill = kill_node(t, s1, "server", 1);
    int alive[2] = {w0, w1};
    expect_survivors(t, alive, 2, t_kill);
}

IT_TEST(kill_server_2x2) { kill_server(t, "1000"); }

IT_TEST(kill_server_direct_2x2)
{
    /* a split key big enough (2 x 40001 float32 per server) for same-host
     * direct copies: the pull to the live server must still fail promptly
     * (that server answers once it hears of the death) */
    kill_server(t, "40000");
    IT_CHECK(t, it_log_has(t, t->server[0], "direct memory copies", 0),
             "server0 did not take the direct-copy path");
}

/* ---- garbage ---- */

/* Header layout of proto/proto.h (little-endian, 88 bytes). */
#define HDR_SIZE 88
#define HDR_MAGIC 0x3153564Bu
enum { T_REGISTER = 1, T_HEARTBEAT = 3, T_PUSH = 12 };

static void le16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

typedef struct fake_hdr {
    uint32_t magic;
    uint16_t version, type;
    int32_t sender;
    uint64_t key, offset, count, total;
    uint32_t dtype;
    uint64_t round;
    uint64_t body_len;
} fake_hdr;

static void encode(const fake_hdr *h, uint8_t out[HDR_SIZE])
{
    memset(out, 0, HDR_SIZE);
    le32(out + 0, h->magic);
    le16(out + 4, h->version);
    le16(out + 6, h->type);
    le16(out + 10, h->type == 12 || h->type == 14); /* a push stands for one worker */
    le32(out + 12, (uint32_t)h->sender);
    le64(out + 24, 4242);
    le64(out + 32, h->key);
    le64(out + 40, h->offset);
    le64(out + 48, h->count);
    le64(out + 56, h->total);
    le64(out + 64, h->round);
    le32(out + 72, h->dtype);
    le64(out + 80, h->body_len);
}

static void rand_fill(uint8_t *p, size_t n, unsigned *seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)rand_r(seed);
}

/* Send one multipart message of nf frames. */
static void send_frames(it_ctx *t, void *sock, uint8_t *const *frames, const size_t *lens, int nf)
{
    for (int i = 0; i < nf; i++) {
        int flags = i + 1 < nf ? ZMQ_SNDMORE : 0;
        IT_ASSERT(t, zmq_send(sock, frames[i], lens[i], flags) == (int)lens[i], "zmq_send: %s",
                  zmq_strerror(zmq_errno()));
    }
}

/* A non-ZeroMQ peer: plain bytes into the TCP port. */
static void send_raw_tcp(it_ctx *t, int port, unsigned *seed)
{
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    IT_ASSERT(t, fd >= 0, "socket: %s", strerror(errno));
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    IT_ASSERT(t, connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "connect 127.0.0.1:%d: %s", port,
              strerror(errno));
    uint8_t junk[2048];
    const char *http = "GET / HTTP/1.0\r\n\r\n";
    memcpy(junk, http, strlen(http));
    rand_fill(junk + strlen(http), sizeof junk - strlen(http), seed);
    (void)!write(fd, junk, sizeof junk);
    close(fd);
}

/* Garbage of every kind to tcp://127.0.0.1:port from a DEALER socket. */
static void send_garbage(it_ctx *t, int port, unsigned seed)
{
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    void *ctx = zmq_ctx_new();
    IT_ASSERT(t, ctx != NULL, "zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
    void *sock = zmq_socket(ctx, ZMQ_DEALER);
    int linger = 2000, tmo = 2000;
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(sock, ZMQ_SNDTIMEO, &tmo, sizeof tmo);
    IT_ASSERT(t, zmq_connect(sock, ep) == 0, "zmq_connect %s: %s", ep, zmq_strerror(zmq_errno()));

    size_t big = 1 << 20;
    uint8_t *buf = malloc(big), *f[12];
    size_t l[12];
    uint8_t hdr[HDR_SIZE], body[64];
    IT_ASSERT(t, buf != NULL, "out of memory");
    rand_fill(buf, big, &seed);
    rand_fill(body, sizeof body, &seed);

    /* Random bytes; one byte; an empty frame; ten frames; 1 MiB. */
    f[0] = buf, l[0] = 100;
    send_frames(t, sock, f, l, 1);
    f[0] = buf, l[0] = 1;
    send_frames(t, sock, f, l, 1);
    f[0] = buf, l[0] = 0;
    send_frames(t, sock, f, l, 1);
    for (int i = 0; i < 10; i++)
        f[i] = buf + 64 * i, l[i] = (size_t)(rand_r(&seed) % 64);
    send_frames(t, sock, f, l, 10);
    f[0] = buf, l[0] = big;
    send_frames(t, sock, f, l, 1);

    /* Well-formed magic and version, lying contents. */
    fake_hdr base = {HDR_MAGIC, 1, T_PUSH, 12345, 17, 0, 4, 4, 0 /* float32 */, 0, 16};
    fake_hdr h;
    h = base, h.body_len = 1ull << 62; /* huge declared size, no body frame */
    encode(&h, hdr);
    f[0] = hdr, l[0] = HDR_SIZE;
    send_frames(t, sock, f, l, 1);
    h = base, h.count = h.total = 1ull << 61, h.body_len = 8; /* count * 4 overflows */
    encode(&h, hdr);
    f[0] = hdr, l[0] = HDR_SIZE, f[1] = body, l[1] = 8;
    send_frames(t, sock, f, l, 2);
    h = base, h.body_len = 1ull << 40; /* body frame much shorter than declared */
    encode(&h, hdr);
    f[0] = hdr, l[0] = HDR_SIZE, f[1] = body, l[1] = 16;
    send_frames(t, sock, f, l, 2);
    h = base, h.type = 999;
    encode(&h, hdr);
    f[0] = hdr, l[0] = HDR_SIZE, f[1] = body, l[1] = 16;
    send_frames(t, sock, f, l, 2);
    h = base, h.version = 77;
    encode(&h, hdr);
    send_frames(t, sock, f, l, 2);
    h = base, h.dtype = 42;
    encode(&h, hdr);
    send_frames(t, sock, f, l, 2);
    h = base, h.offset = 8; /* offset + count > total */
    encode(&h, hdr);
    send_frames(t, sock, f, l, 2);
    h = base, h.key = 0xdeadbeefull; /* a valid push of a key nobody has, from nobody */
    encode(&h, hdr);
    send_frames(t, sock, f, l, 2);
    h = base;
    encode(&h, hdr);
    f[0] = hdr, l[0] = HDR_SIZE - 1; /* truncated header */
    send_frames(t, sock, f, l, 2);
    h = base, h.type = T_REGISTER, h.body_len = 20; /* unparsable registration */
    encode(&h, hdr);
    f[0] = hdr, l[0] = HDR_SIZE, f[1] = (uint8_t *)"role=boss endpoint=\x01", l[1] = 20;
    send_frames(t, sock, f, l, 2);
    h = base, h.type = T_HEARTBEAT, h.sender = 777, h.body_len = 0; /* from an unknown node */
    encode(&h, hdr);
    f[0] = hdr, l[0] = HDR_SIZE;
    send_frames(t, sock, f, l, 1);
    h = base, h.body_len = 16; /* header + 3 extra frames */
    encode(&h, hdr);
    f[0] = hdr, l[0] = HDR_SIZE, f[1] = body, l[1] = 16, f[2] = body, l[2] = 3, f[3] = body, l[3] = 0;
    send_frames(t, sock, f, l, 4);

    zmq_close(sock);
    zmq_ctx_term(ctx); /* waits (up to the linger) until everything is sent */
    free(buf);
    send_raw_tcp(t, port, &seed);
}

static void expect_running(it_ctx *t)
{
    char buf[128];
    it_poll(t);
    for (int i = 0; i < t->nproc; i++)
        IT_ASSERT(t, !t->proc[i].reaped, "%s ended after the garbage: %s", t->proc[i].name,
                  it_status_str(&t->proc[i], buf, sizeof buf));
}

IT_TEST(garbage_2x2)
{
    static const char *const argv[] = {"sum", "--split", "--rounds", "3", "--pause-file", "go", NULL};
    char pf[2][PATH_MAX + 32];
    int sport[2];
    it_setenv(t, "MXNET_KVSTORE_BIGARRAY_BOUND", "1000");
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_start_scheduler(t, 2, 2, NULL); /* PS_VERBOSE=0: drop lines are warnings */
    for (int i = 0; i < 2; i++) {
        char name[32];
        snprintf(pf[i], sizeof pf[i], "KVS_PORT_FILE=%s/server%d.port", t->dir, i);
        const char *env[] = {pf[i], NULL};
        int s = it_start_server(t, i, env);
        snprintf(name, sizeof name, "server%d.port", i);
        IT_ASSERT(t, it_wait_file(t, name, 10, s), "server%d did not write KVS_PORT_FILE", i);
        sport[i] = it_read_port_file(t, name);
        IT_ASSERT(t, sport[i] > 0, "server%d's port file does not hold a port", i);
    }
    /* Before the workers exist... */
    send_garbage(t, sport[0], 1);
    send_garbage(t, t->port, 2);
    for (int i = 0; i < 2; i++)
        it_start_worker(t, i, argv, NULL);
    /* ... and in the middle of the job, after round 0. */
    for (int i = 0; i < 2; i++) {
        char name[32];
        snprintf(name, sizeof name, "paused-w%d", i);
        IT_ASSERT(t, it_wait_file(t, name, 30, t->worker[i]), "worker%d did not finish round 0", i);
    }
    send_garbage(t, sport[0], 3);
    send_garbage(t, sport[1], 4);
    send_garbage(t, t->port, 5);
    expect_running(t);
    it_write_file(t, "go", "go\n");
    it_expect_job_ok(t, 40);
    IT_CHECK(t, it_log_has(t, t->server[0], "drop", 1), "server0 logged no line about dropped messages");
    IT_CHECK(t, it_log_has(t, t->server[1], "drop", 1), "server1 logged no line about dropped messages");
    IT_CHECK(t, it_log_has(t, t->sched, "drop", 1), "the scheduler logged no line about dropped messages");
}

/* A well-formed PUSH from a socket that never registered, claiming to be
 * worker rank 0 (node id 9): 1 float32 element for key 17, round 1. */
static void send_spoofed_push(it_ctx *t, int port)
{
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    void *ctx = zmq_ctx_new();
    void *sock = zmq_socket(ctx, ZMQ_DEALER);
    int linger = 2000;
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
    IT_ASSERT(t, zmq_connect(sock, ep) == 0, "zmq_connect %s: %s", ep, zmq_strerror(zmq_errno()));
    fake_hdr h = {HDR_MAGIC, 1, T_PUSH, 9, 17, 0, 1, 1, 0, 1, 4};
    uint8_t hdr[HDR_SIZE], *f[2];
    size_t l[2];
    float v = 1000.0f;
    encode(&h, hdr);
    f[0] = hdr, l[0] = HDR_SIZE, f[1] = (uint8_t *)&v, l[1] = sizeof v;
    send_frames(t, sock, f, l, 2);
    zmq_close(sock);
    zmq_ctx_term(ctx);
}

IT_TEST(garbage_spoofed_sender_2x2)
{
    /* Between round 0 and round 1, a stranger sends each server a valid
     * round-1 PUSH for key 17 (the workers' first key) with sender = worker
     * 0's node id.  It is not from worker 0's connection: it must be dropped
     * and the sums of round 1 must stay exact. */
    static const char *const argv[] = {"sum", "--dtype", "f32", "--counts", "1,7", "--rounds", "3",
                                       "--pause-file", "go", NULL};
    char pf[2][PATH_MAX + 32];
    int sport[2];
    it_setenv(t, "MXNET_KVSTORE_BIGARRAY_BOUND", "1000");
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_start_scheduler(t, 2, 2, NULL);
    for (int i = 0; i < 2; i++) {
        char name[32];
        snprintf(pf[i], sizeof pf[i], "KVS_PORT_FILE=%s/server%d.port", t->dir, i);
        const char *env[] = {pf[i], NULL};
        int s = it_start_server(t, i, env);
        snprintf(name, sizeof name, "server%d.port", i);
        IT_ASSERT(t, it_wait_file(t, name, 10, s), "server%d did not write KVS_PORT_FILE", i);
        sport[i] = it_read_port_file(t, name);
        IT_ASSERT(t, sport[i] > 0, "server%d's port file does not hold a port", i);
    }
    for (int i = 0; i < 2; i++)
        it_start_worker(t, i, argv, NULL);
    for (int i = 0; i < 2; i++) {
        char name[32];
        snprintf(name, sizeof name, "paused-w%d", i);
        IT_ASSERT(t, it_wait_file(t, name, 30, t->worker[i]), "worker%d did not finish round 0", i);
    }
    send_spoofed_push(t, sport[0]);
    send_spoofed_push(t, sport[1]);
    expect_running(t);
    it_write_file(t, "go", "go\n");
    it_expect_job_ok(t, 40);
}
