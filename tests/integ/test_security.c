/*
 * test_security.c - nobody on the wire is trusted: refused registrations
 * reach the refused node (which exits at once naming the reason), outsiders
 * without the job secret get nothing and change no sum, huge declared frames
 * do not grow memory, direct copies need proof of ownership, a server out of
 * memory answers KVS_ENOMEM.
 */
#include "tests.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

static void sec_env(it_ctx *t)
{
    it_setenv(t, "MXNET_KVSTORE_BIGARRAY_BOUND", "1000");
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_setenv(t, "PS_VERBOSE", "1");
}

/* A worker whose id is taken and a worker past the job's size are refused
 * at once (not after KVS_START_TIMEOUT) with the reason; the job goes on. */
IT_TEST(refused_registration_1x1)
{
    static const char *const sum[] = {"sum", "--dtype", "f32", "--rounds", "2", NULL};
    static const char *const taken[] = {"create-error", "KVS_ECONFIG", "id taken", NULL};
    static const char *const full[] = {"create-error", "KVS_ECONFIG", "job full", NULL};
    sec_env(t);
    it_start_scheduler(t, 1, 1, NULL);
    it_start_worker(t, 0, sum, NULL);
    IT_ASSERT(t, it_wait_log(t, t->sched, "registered worker", 10), "worker 0 did not register");
    /* worker 0 registers (the job waits for its server); a second worker 0 */
    double t0 = it_now();
    int dup = it_spawn(t, "worker0-again", t->worker_bin, taken,
                       (const char *const[]){"DMLC_ROLE=worker", "DMLC_WORKER_ID=0", NULL});
    it_expect_exit(t, dup, 0, 10);
    int extra = it_spawn(t, "worker-extra", t->worker_bin, full,
                         (const char *const[]){"DMLC_ROLE=worker", "DMLC_WORKER_ID", NULL});
    it_expect_exit(t, extra, 0, 10);
    double took = it_now() - t0;
    IT_ASSERT(t, took < 10 * it_slow, "the refusals took %.1f s", took);
    IT_ASSERT(t, it_log_has(t, t->sched, "refused a worker", 0), "the scheduler logged no refusal");
    it_start_server(t, 0, NULL);
    it_expect_job_ok(t, 30);
}

/* Virtual memory size of pid in bytes (VmSize), or 0. */
static unsigned long long vm_size(pid_t pid, const char *field)
{
    char path[64], line[256];
    unsigned long long kb = 0;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, strlen(field)) == 0)
            kb = strtoull(line + strlen(field), NULL, 10);
    fclose(f);
    return kb * 1024;
}

/* Start server i with a port file; returns its port. */
static int start_server_port(it_ctx *t, int i, const char *const *more)
{
    char pf[PATH_MAX + 32], name[32];
    const char *env[8] = {pf};
    int k = 1;
    snprintf(pf, sizeof pf, "KVS_PORT_FILE=%s/server%d.port", t->dir, i);
    for (int j = 0; more && more[j] && k < 7; j++)
        env[k++] = more[j];
    env[k] = NULL;
    int s = it_start_server(t, i, env);
    snprintf(name, sizeof name, "server%d.port", i);
    IT_ASSERT(t, it_wait_file(t, name, 10, s), "server%d did not write KVS_PORT_FILE", i);
    int port = it_read_port_file(t, name);
    IT_ASSERT(t, port > 0, "server%d's port file does not hold a port", i);
    return port;
}

/* A server that cannot allocate a key's buffer answers KVS_ENOMEM (the
 * worker's call returns it at once) and keeps serving the job. */
IT_TEST(server_enomem_1x1)
{
    static const char *const argv[] = {"enomem", "--counts", "268435456", "--pause-file", "go",
                                       NULL};
    sec_env(t);
    it_start_scheduler(t, 1, 1, NULL);
    start_server_port(t, 0, NULL);
    pid_t pid = t->proc[t->server[0]].pid;
    unsigned long long vm = vm_size(pid, "VmSize:");
    IT_ASSERT(t, vm > 0, "cannot read the server's VmSize");
    /* 256 MiB more address space than it has (malloc pads the heap by
     * 64 MiB): a 1 GiB key cannot fit, the rest of the job can */
    struct rlimit rl = {vm + (256ull << 20), vm + (256ull << 20)};
    IT_ASSERT(t, prlimit(pid, RLIMIT_AS, &rl, NULL) == 0, "prlimit: %s", strerror(errno));
    it_info(t, "server VmSize %llu MiB, RLIMIT_AS %llu MiB", vm >> 20,
            (unsigned long long)rl.rlim_cur >> 20);
    /* one message for the whole key: the server's one allocation fails and
     * it keeps all of its headroom for the rest of the job */
    it_start_worker(t, 0, argv, (const char *const[]){"KVS_CHUNK_BYTES=1073741824", NULL});
    /* the key goes by reference once the direct-copy proof is done: the
     * server's own allocation fails (through the socket, ZeroMQ's would,
     * and the connection would drop: KVS_EPEERDEAD, not KVS_ENOMEM) */
    IT_ASSERT(t, it_wait_file(t, "paused-w0", 30, t->worker[0]), "worker0 did not pause");
    IT_ASSERT(t, it_wait_log(t, t->worker[0], "copies our memory directly", 10),
              "the direct-copy proof did not complete");
    it_write_file(t, "go", "go\n");
    it_expect_job_ok(t, 60);
    IT_ASSERT(t, it_log_has(t, t->worker[0], "returned KVS_ENOMEM", 0), "no KVS_ENOMEM");
}

/* A server with room for a key's value but not for its round buffer
 * answers every push of it KVS_ENOMEM, also by reference (same host, direct
 * copies), and the pull of that round too (it waited forever for a push
 * that could not come), within a deadline; the job goes on exact. */
static void enomem_push(it_ctx *t, int cma)
{
    static const char *const argv[] = {"enomem-push", "--counts", "67108864", "--pause-file",
                                       "go", NULL};
    sec_env(t);
    it_setenv(t, "KVS_CMA", "%d", cma);
    it_start_scheduler(t, 1, 2, NULL);
    start_server_port(t, 0, NULL);
    pid_t pid = t->proc[t->server[0]].pid;
    for (int i = 0; i < 2; i++)
        it_start_worker(t, i, argv, NULL);
    for (int i = 0; i < 2; i++)
        IT_ASSERT(t, it_wait_file(t, i ? "paused-w1" : "paused-w0", 60, t->worker[i]),
                  "worker%d did not pause", i);
    unsigned long long vm = vm_size(pid, "VmSize:");
    IT_ASSERT(t, vm > 0, "cannot read the server's VmSize");
    /* 160 MiB more address space: a 256 MiB round buffer cannot fit */
    struct rlimit rl = {vm + (160ull << 20), vm + (160ull << 20)};
    IT_ASSERT(t, prlimit(pid, RLIMIT_AS, &rl, NULL) == 0, "prlimit: %s", strerror(errno));
    it_info(t, "server VmSize %llu MiB, RLIMIT_AS %llu MiB", vm >> 20,
            (unsigned long long)rl.rlim_cur >> 20);
    it_write_file(t, "go", "go\n");
    it_expect_job_ok(t, 60);
    for (int i = 0; i < 2; i++)
        IT_ASSERT(t, it_log_has(t, t->worker[i], "returned KVS_ENOMEM", 0),
                  "worker%d got no KVS_ENOMEM", i);
    if (cma)
        IT_ASSERT(t, it_log_has(t, t->worker[0], "copies our memory directly", 0),
                  "the pushes did not go by reference");
}

IT_TEST(server_enomem_push_1x2)
{
    enomem_push(t, 1);
}

/* ---- the job secret ---- */

/* Write a 0600 secret file into the test directory; KVS_SECRET_FILE for
 * every process started afterwards.  mode: the file's mode. */
static void set_secret(it_ctx *t, const char *name, const char *secret, mode_t mode)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", t->dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    IT_ASSERT(t, fd >= 0, "create %s: %s", path, strerror(errno));
    IT_ASSERT(t, write(fd, secret, strlen(secret)) == (ssize_t)strlen(secret), "write %s", path);
    IT_ASSERT(t, fchmod(fd, mode) == 0 && close(fd) == 0, "chmod/close %s", path);
    it_setenv(t, "KVS_SECRET_FILE", "%s", path);
}

static const char *const sum_rounds[] = {"sum", "--split", "--rounds", "3", NULL};

IT_TEST(secret_auth_sum_2x2)
{
    sec_env(t);
    set_secret(t, "secret", "correct horse battery staple 42\n", 0600);
    it_start_job(t, 2, 2, sum_rounds);
    it_expect_job_ok(t, 60);
    IT_ASSERT(t, it_log_has(t, t->sched, "security=auth", 0), "the scheduler did not run auth");
    IT_ASSERT(t, !it_log_has(t, t->sched, "job is open", 0), "the open-job warning with a secret");
}

IT_TEST(secret_curve_sum_2x2)
{
    sec_env(t);
    set_secret(t, "secret", "correct horse battery staple 42", 0600);
    it_setenv(t, "KVS_SECURITY", "curve");
    it_start_job(t, 2, 2, sum_rounds);
    it_expect_job_ok(t, 60);
    IT_ASSERT(t, it_log_has(t, t->server[0], "security=curve", 0), "server0 did not run curve");
}

/* CURVE wraps each frame in a MESSAGE command (33 bytes more on the wire):
 * parts of exactly the 4 MiB frame limit (KVS_CHUNK_BYTES' default) and
 * bodies of several frames still pass a server's ZMQ_MAXMSGSIZE, on the
 * socket path, and sum exactly. */
IT_TEST(secret_curve_big_frames_1x1)
{
    static const char *const argv[] = {"sum", "--dtype", "f32", "--counts", "1048576,2500003",
                                       "--rounds", "2", "--pushpull", NULL};
    sec_env(t);
    set_secret(t, "secret", "correct horse battery staple 42", 0600);
    it_setenv(t, "KVS_SECURITY", "curve");
    it_setenv(t, "KVS_CMA", "0");
    it_start_job(t, 1, 1, argv);
    it_expect_job_ok(t, 120);
}

/* Bad secrets: a world-readable file, a short secret, security without a
 * secret: exit 2 / KVS_ECONFIG naming the variable.  A node with another
 * secret than the job's stops at once with KVS_EAUTH (not after the start
 * timeout), and the job still completes with the right nodes. */
IT_TEST(secret_refusals_1x1)
{
    char bad[PATH_MAX + 32], weak[PATH_MAX + 32];
    sec_env(t);
    set_secret(t, "world", "0123456789abcdef0123", 0644);
    snprintf(bad, sizeof bad, "KVS_SECRET_FILE=%s/world", t->dir);
    set_secret(t, "weak", "short", 0600);
    snprintf(weak, sizeof weak, "KVS_SECRET_FILE=%s/weak", t->dir);
    set_secret(t, "secret", "the job's own secret, 32 bytes!!", 0600);
    int s1 = it_spawn(t, "sched-world", t->sched_bin, NULL,
                      (const char *const[]){"DMLC_ROLE=scheduler", "DMLC_PS_ROOT_URI=127.0.0.1",
                                            "DMLC_PS_ROOT_PORT=0", "DMLC_NUM_SERVER=1",
                                            "DMLC_NUM_WORKER=1", bad, NULL});
    it_expect_exit(t, s1, 2, 10);
    IT_ASSERT(t, it_log_has(t, s1, "chmod 600", 0), "no hint about the mode");
    int s2 = it_spawn(t, "sched-weak", t->sched_bin, NULL,
                      (const char *const[]){"DMLC_ROLE=scheduler", "DMLC_PS_ROOT_URI=127.0.0.1",
                                            "DMLC_PS_ROOT_PORT=0", "DMLC_NUM_SERVER=1",
                                            "DMLC_NUM_WORKER=1", weak, NULL});
    it_expect_exit(t, s2, 2, 10);
    IT_ASSERT(t, it_log_has(t, s2, "at least 16", 0), "no minimum length named");
    int s3 = it_spawn(t, "sched-nosecret", t->sched_bin, NULL,
                      (const char *const[]){"DMLC_ROLE=scheduler", "DMLC_PS_ROOT_URI=127.0.0.1",
                                            "DMLC_PS_ROOT_PORT=0", "DMLC_NUM_SERVER=1",
                                            "DMLC_NUM_WORKER=1", "KVS_SECRET_FILE",
                                            "KVS_SECURITY=curve", NULL});
    it_expect_exit(t, s3, 2, 10);
    IT_ASSERT(t, it_log_has(t, s3, "KVS_SECURITY", 0), "KVS_SECURITY not named");

    it_start_scheduler(t, 1, 1, NULL);
    static const char *const eauth[] = {"create-error", "KVS_EAUTH", "secret", NULL};
    double t0 = it_now();
    int w = it_spawn(t, "worker-wrong", t->worker_bin, eauth,
                     (const char *const[]){"DMLC_ROLE=worker", "KVS_SECRET_FILE",
                                           "KVS_SECRET=not the job's secret at all", NULL});
    it_expect_exit(t, w, 0, 10);
    int srv = it_spawn(t, "server-wrong", t->server_bin, NULL,
                       (const char *const[]){"DMLC_ROLE=server", "KVS_SECRET_FILE",
                                             "KVS_SECRET=not the job's secret at all", NULL});
    it_expect_exit(t, srv, 2, 10);
    IT_ASSERT(t, it_log_has(t, srv, "bad secret", 0), "the server did not name the secret");
    IT_ASSERT(t, it_now() - t0 < 10 * it_slow, "refusals took too long");
    IT_ASSERT(t, it_log_has(t, t->sched, "refused a connection", 0),
              "the scheduler did not log the refused proofs");
    it_start_server(t, 0, NULL);
    it_start_worker(t, 0, sum_rounds, NULL);
    it_expect_job_ok(t, 60);
}

/* ---- outsiders ---- */

#define HDR_SIZE 88

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* A kvsd header (proto/proto.h layout). */
static void fake_header(uint8_t out[HDR_SIZE], int type, int sender, uint64_t key,
                        uint64_t count, uint64_t round, uint64_t body_len)
{
    memset(out, 0, HDR_SIZE);
    put_le(out, 0x3153564Bu, 4);
    put_le(out + 4, 1, 2);
    put_le(out + 6, (uint64_t)type, 2);
    put_le(out + 10, type == 12 || type == 14, 2); /* a push stands for one worker */
    put_le(out + 12, (uint64_t)(uint32_t)sender, 4);
    put_le(out + 24, 777, 8);
    put_le(out + 32, key, 8);
    put_le(out + 48, count, 8);
    put_le(out + 56, count, 8);
    put_le(out + 64, round, 8);
    put_le(out + 80, body_len, 8);
}

enum { T_REGISTER = 1, T_PUSH = 12, T_HELLO = 17 };

/* An outside DEALER to 127.0.0.1:port: mechanism NULL (plain == NULL) or
 * PLAIN with these credentials; routing id ident (or none). */
static void *outsider(it_ctx *t, void *ctx, int port, const char *user, const char *pass,
                      const char *ident)
{
    char ep[64];
    int linger = 0;
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    IT_ASSERT(t, s != NULL, "zmq_socket: %s", zmq_strerror(zmq_errno()));
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    if (ident)
        zmq_setsockopt(s, ZMQ_ROUTING_ID, ident, strlen(ident));
    if (user) {
        zmq_setsockopt(s, ZMQ_PLAIN_USERNAME, user, strlen(user));
        zmq_setsockopt(s, ZMQ_PLAIN_PASSWORD, pass, strlen(pass));
    }
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    IT_ASSERT(t, zmq_connect(s, ep) == 0, "zmq_connect %s: %s", ep, zmq_strerror(zmq_errno()));
    return s;
}

static void send2(void *s, const uint8_t *hdr, const void *body, size_t len)
{
    /* queued until the handshake succeeds, which it never does */
    zmq_send(s, hdr, HDR_SIZE, len ? ZMQ_SNDMORE | ZMQ_DONTWAIT : ZMQ_DONTWAIT);
    if (len)
        zmq_send(s, body, len, ZMQ_DONTWAIT);
}

static void outsider_register(void *s, const char *text)
{
    uint8_t h[HDR_SIZE];
    fake_header(h, T_REGISTER, 0, 0, 0, 0, strlen(text));
    send2(s, h, text, strlen(text));
}

static void outsider_push(void *s, int round)
{
    uint8_t h[HDR_SIZE];
    float v[7] = {1e6f, 1e6f, 1e6f, 1e6f, 1e6f, 1e6f, 1e6f};
    fake_header(h, T_PUSH, 9, 17, 1, (uint64_t)round, 4);
    send2(s, h, v, 4);
    fake_header(h, T_PUSH, 9, 18, 7, (uint64_t)round, 28);
    send2(s, h, v, 28);
}

/* An outside process without the secret registers as a worker and as a
 * server, takes worker 0's connection id at every server before worker 0
 * connects, and pushes as worker 0 in the middle of the job: the sums stay
 * exact, nobody blocks, and the outsider receives nothing. */
IT_TEST(outsider_2x2)
{
    static const char *const argv[] = {"sum", "--dtype", "f32", "--counts", "1,7", "--rounds",
                                       "3", "--pause-file", "go", NULL};
    void *o[16];
    int no = 0, sport[2];
    const char *bogus = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    sec_env(t);
    set_secret(t, "secret", "the job's own secret, 32 bytes!!", 0600);
    it_start_scheduler(t, 2, 2, NULL);
    for (int i = 0; i < 2; i++)
        sport[i] = start_server_port(t, i, NULL);
    void *ctx = zmq_ctx_new();
    /* registrations: no mechanism; PLAIN with a made-up proof */
    o[no] = outsider(t, ctx, t->port, NULL, NULL, NULL);
    outsider_register(o[no++], "role=worker endpoint=- rank=0 host=127.0.0.1");
    o[no] = outsider(t, ctx, t->port, "kvs1 server -1 00112233445566778899aabbccddeeff", bogus,
                     NULL);
    outsider_register(o[no++], "role=server endpoint=tcp://127.0.0.1:9 rank=0 host=127.0.0.1");
    o[no] = outsider(t, ctx, t->port, "kvs1 worker -1 00112233445566778899aabbccddeeff", bogus,
                     NULL);
    outsider_register(o[no++], "role=worker endpoint=- rank=1 host=127.0.0.1");
    /* worker 0's connection id at the servers, before worker 0 exists */
    for (int i = 0; i < 2; i++) {
        o[no] = outsider(t, ctx, sport[i], NULL, NULL, "w9");
        outsider_push(o[no++], 0);
        o[no] = outsider(t, ctx, sport[i], NULL, NULL, "w9-0000000000000000");
        outsider_push(o[no++], 0);
        o[no] = outsider(t, ctx, sport[i], "kvs1 worker 9 00112233445566778899aabbccddeeff",
                         bogus, "w9-0000000000000001");
        outsider_push(o[no++], 0);
    }
    for (int i = 0; i < 2; i++)
        it_start_worker(t, i, argv, NULL);
    for (int i = 0; i < 2; i++) {
        char name[32];
        snprintf(name, sizeof name, "paused-w%d", i);
        IT_ASSERT(t, it_wait_file(t, name, 30, t->worker[i]), "worker%d did not finish round 0", i);
    }
    for (int i = 0; i < 2; i++) { /* in the middle of the job: round 1 as worker 0 */
        o[no] = outsider(t, ctx, sport[i], NULL, NULL, "w9-0000000000000002");
        outsider_push(o[no++], 1);
    }
    it_write_file(t, "go", "go\n");
    it_expect_job_ok(t, 40);
    for (int i = 0; i < no; i++) {
        char buf[256];
        int n = zmq_recv(o[i], buf, sizeof buf, ZMQ_DONTWAIT);
        IT_CHECK(t, n < 0, "outsider socket %d received %d bytes", i, n);
        zmq_close(o[i]);
    }
    zmq_ctx_term(ctx);
    IT_ASSERT(t, it_log_has(t, t->sched, "refused a connection", 0),
              "the scheduler did not log the made-up proofs");
    IT_ASSERT(t, it_log_has(t, t->server[0], "refused a connection", 0),
              "server0 did not log the made-up proof");
    IT_ASSERT(t, t->failures == 0, "%d check(s) failed", t->failures);
}

/* ---- direct copies need proof of ownership ---- */

enum { T_REPLY = 15, T_CHALLENGE = 33, T_PROOF = 34 };
#define KVS_EAUTH_ (-20)
#define KVS_EPROTO_ (-10)
#define KVS_ENOTSUP_ (-4)

static uint8_t my_slot[16]; /* where this process writes a challenge it answers */
static char proof_text[256]; /* the last PROOF's REPLY text ("" when none) */

/* Receive one message on s within secs: the header into hdr, the body (if
 * any) into body (up to cap bytes).  Returns the body length, or -1. */
static int recv_msg(it_ctx *t, void *s, uint8_t hdr[HDR_SIZE], uint8_t *body, size_t cap,
                    double secs)
{
    zmq_pollitem_t it = {s, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, (long)(secs * 1000 * it_slow)) <= 0)
        return -1;
    IT_ASSERT(t, zmq_recv(s, hdr, HDR_SIZE, 0) == HDR_SIZE, "short header");
    int more = 0;
    size_t ml = sizeof more;
    zmq_getsockopt(s, ZMQ_RCVMORE, &more, &ml);
    if (!more)
        return 0;
    return zmq_recv(s, body, cap, 0);
}

static int hdr_type(const uint8_t *h)
{
    return h[6] | h[7] << 8;
}

static int hdr_status(const uint8_t *h)
{
    return (int32_t)((uint32_t)h[16] | (uint32_t)h[17] << 8 | (uint32_t)h[18] << 16 |
                     (uint32_t)h[19] << 24);
}

/* HELLO naming (pid, addr) as worker node 11, then the PROOF; write_slot:
 * write the challenge into my_slot first (we are pid).  Returns the final
 * REPLY's status. */
static int prove(it_ctx *t, void *s, pid_t pid, uint64_t addr, int write_slot, uint64_t req)
{
    uint8_t h[HDR_SIZE], b[32] = {0}, body[256];
    put_le(b, (uint64_t)pid, 8);
    put_le(b + 8, addr, 8);
    fake_header(h, T_HELLO, 11, 0, 0, 0, 32);
    put_le(h + 24, req, 8);
    send2(s, h, b, 32);
    int n = recv_msg(t, s, h, body, sizeof body, 10);
    IT_ASSERT(t, n == 16 && hdr_type(h) == T_CHALLENGE,
              "HELLO: expected a 16-byte CHALLENGE, got type %d, %d bytes", hdr_type(h), n);
    if (write_slot)
        memcpy(my_slot, body, 16);
    memcpy(b + 16, body, 16);
    fake_header(h, T_PROOF, 11, 0, 0, 0, 32);
    put_le(h + 24, req, 8);
    send2(s, h, b, 32);
    n = recv_msg(t, s, h, body, sizeof body, 10);
    IT_ASSERT(t, n >= 0 && hdr_type(h) == T_REPLY, "PROOF: no REPLY (type %d)", hdr_type(h));
    n = n > (int)sizeof body ? (int)sizeof body : n; /* zmq_recv returns the whole length */
    snprintf(proof_text, sizeof proof_text, "%.*s", n, (const char *)body);
    if (n > 0)
        it_info(t, "PROOF for pid %d: status %d: %.*s", (int)pid, hdr_status(h), n, body);
    return hdr_status(h);
}

/* A peer asks a server for direct copies naming another process (one it
 * cannot write into): refused, and its requests by reference are refused;
 * the same peer naming itself (writing the challenge into its own memory)
 * proves it. */
IT_TEST(cma_other_process_1x2)
{
    sec_env(t);
    it_start_scheduler(t, 1, 2, NULL);
    int sport = start_server_port(t, 0, NULL);
    int victim = it_spawn(t, "victim", "/bin/sleep", (const char *const[]){"60", NULL}, NULL);
    pid_t vpid = t->proc[victim].pid;
    /* it_spawn returns after fork: until the exec is done the victim is a
     * copy of this process, with my_slot readable in it */
    char exe[256] = "";
    for (double end = it_now() + 10;;) {
        char link[64];
        snprintf(link, sizeof link, "/proc/%d/exe", (int)vpid);
        ssize_t n = readlink(link, exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = '\0';
        if (n > 6 && strcmp(exe + n - 6, "/sleep") == 0)
            break;
        IT_ASSERT(t, it_now() < end, "the victim never ran /bin/sleep (exe %s)", exe);
        it_nap_ms(2);
    }
    void *ctx = zmq_ctx_new();
    void *s = outsider(t, ctx, sport, NULL, NULL, "w11-00000000deadbeef");
    /* another program: the address does not even exist there */
    int st = prove(t, s, vpid, (uint64_t)(uintptr_t)my_slot, 0, 1000);
    IT_ASSERT(t, st == KVS_ENOTSUP_, "naming another program: status %d, expected KVS_ENOTSUP",
              st);
    /* a copy of this process (fork): my_slot exists there, readable, but
     * the challenge is not in it */
    pid_t twin = fork();
    IT_ASSERT(t, twin >= 0, "fork: %s", strerror(errno));
    if (twin == 0) {
        for (;;)
            pause();
    }
    st = prove(t, s, twin, (uint64_t)(uintptr_t)my_slot, 0, 1001);
    kill(twin, SIGKILL);
    waitpid(twin, NULL, 0);
    IT_ASSERT(t, st == KVS_EAUTH_, "naming another process: status %d, expected KVS_EAUTH", st);
    /* a pid with no process (the twin, reaped): as a worker on another host
     * or in another pid namespace looks, and the reason says so */
    st = prove(t, s, twin, (uint64_t)(uintptr_t)my_slot, 0, 1003);
    IT_ASSERT(t, st == KVS_ENOTSUP_ && strstr(proof_text, "no such process here") != NULL,
              "naming a pid with no process: status %d (expected KVS_ENOTSUP), text '%s'", st,
              proof_text);
    /* a PUSH by reference after the refused proof */
    uint8_t h[HDR_SIZE], d[16], body[256];
    put_le(d, (uint64_t)(uintptr_t)my_slot, 8);
    put_le(d + 8, 0, 8);
    fake_header(h, T_PUSH, 11, 5, 4096 * 4, 0, 16);
    h[8] = 2; /* PROTO_F_CMA */
    send2(s, h, d, 16);
    int n = recv_msg(t, s, h, body, sizeof body, 10);
    IT_ASSERT(t, n >= 0 && hdr_type(h) == T_REPLY && hdr_status(h) == KVS_EPROTO_,
              "a push by reference without proof: type %d status %d", hdr_type(h),
              hdr_status(h));
    /* the server's own pid or one of its threads: its memory holds the
     * challenge, so it proves nothing (and would let a peer read the
     * server's memory back): refused, saying why */
    pid_t spid = t->proc[t->server[0]].pid;
    st = prove(t, s, spid, (uint64_t)(uintptr_t)my_slot, 0, 1004);
    IT_ASSERT(t, st == KVS_EAUTH_ && strstr(proof_text, "server's own process") != NULL,
              "naming the server's pid: status %d (expected KVS_EAUTH), text '%s'", st,
              proof_text);
    char task[64];
    snprintf(task, sizeof task, "/proc/%d/task", (int)spid);
    DIR *td = opendir(task);
    struct dirent *de;
    pid_t thread = 0;
    while (td && (de = readdir(td)) != NULL)
        if (atoi(de->d_name) > 0 && atoi(de->d_name) != spid)
            thread = atoi(de->d_name);
    if (td)
        closedir(td);
    IT_ASSERT(t, thread > 0, "the server has no second thread");
    st = prove(t, s, thread, (uint64_t)(uintptr_t)my_slot, 0, 1005);
    IT_ASSERT(t, st == KVS_EAUTH_ && strstr(proof_text, "server's own process") != NULL,
              "naming a thread of the server: status %d (expected KVS_EAUTH), text '%s'", st,
              proof_text);
    /* naming ourselves and writing the challenge where we said: proven */
    st = prove(t, s, getpid(), (uint64_t)(uintptr_t)my_slot, 1, 1002);
    IT_ASSERT(t, st == 0, "naming ourselves: status %d, expected 0", st);
    zmq_close(s);
    zmq_ctx_term(ctx);
    IT_ASSERT(t, it_log_has(t, t->server[0], "not the sender's process", 0),
              "the server did not log the refused proof");
}

/* ---- a huge declared frame ---- */

/* Speak ZMTP 3.0 with mechanism mech ("NULL") to 127.0.0.1:port on a raw TCP
 * socket, declare one message frame of 1 GiB and stream up to 256 MiB of it
 * (until the peer closes).  Returns the bytes the peer took. */
static size_t huge_frame(it_ctx *t, int port, const char *mech)
{
    uint8_t greet[64] = {0xFF, 0, 0, 0, 0, 0, 0, 0, 1, 0x7F, 3, 0};
    memcpy(greet + 12, mech, strlen(mech));
    static const uint8_t ready[] = {0x04, 28, 5, 'R', 'E', 'A', 'D', 'Y', 11, 'S', 'o', 'c', 'k',
                                    'e', 't', '-', 'T', 'y', 'p', 'e', 0, 0, 0, 6, 'D', 'E',
                                    'A', 'L', 'E', 'R'};
    static const uint8_t frame[9] = {0x02, 0, 0, 0, 0, 0x40, 0, 0, 0}; /* long frame of 2^30 bytes */
    const void *parts[] = {greet, ready, frame};
    const size_t lens[] = {sizeof greet, sizeof ready, sizeof frame};
    return it_raw_flood(t, port, parts, lens, 3, 0);
}

/* A peer declaring a 1 GiB frame to the scheduler, to a server of an open
 * job with KVS_MAX_MESSAGE=1 MiB, and to a server of a job with a secret
 * (default KVS_MAX_MESSAGE: the handshake refuses it first) leaves each
 * one's peak memory (VmHWM) less than 16 MiB higher, and the job works. */
IT_TEST(huge_frame_rss_1x1)
{
    static const char *const argv[] = {"sum", "--dtype", "f32", "--rounds", "2", NULL};
    sec_env(t);
    it_setenv(t, "KVS_MAX_MESSAGE", "1048576");
    it_start_scheduler(t, 1, 1, NULL);
    int sport = start_server_port(t, 0, NULL);
    pid_t pids[2] = {t->proc[t->sched].pid, t->proc[t->server[0]].pid};
    int ports[2] = {t->port, sport};
    const char *names[2] = {"scheduler", "server"};
    for (int i = 0; i < 2; i++) {
        unsigned long long before = vm_size(pids[i], "VmHWM:");
        size_t took = huge_frame(t, ports[i], "NULL");
        unsigned long long after = vm_size(pids[i], "VmHWM:");
        it_info(t, "%s: took %zu bytes of a 1 GiB frame; VmHWM %llu -> %llu KiB", names[i], took,
                before >> 10, after >> 10);
        IT_ASSERT(t, before > 0 && after < before + (16ull << 20),
                  "%s grew by %llu MiB", names[i], (after - before) >> 20);
    }
    it_start_worker(t, 0, argv, NULL);
    it_expect_job_ok(t, 60);
}

/* Connect to 127.0.0.1:port over raw TCP, send a ZMTP greeting of an old
 * protocol version and a routing id as that version frames it, and wait up
 * to secs for the peer to close.  Returns true when it closed. */
static bool legacy_greeting_closed(it_ctx *t, int port, const uint8_t *g, size_t glen,
                                   double secs)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    IT_ASSERT(t, fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "connect: %s",
              strerror(errno));
    IT_ASSERT(t, send(fd, g, glen, MSG_NOSIGNAL) == (ssize_t)glen, "send: %s", strerror(errno));
    bool closed = false;
    for (double end = it_now() + secs * it_slow; !closed && it_now() < end;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 50) > 0) {
            uint8_t buf[256];
            ssize_t n = recv(fd, buf, sizeof buf, 0);
            closed = n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR);
        }
    }
    close(fd);
    return closed;
}

/* kvsd speaks only ZMTP 3: a peer greeting the scheduler or a server of an
 * open job (no secret) with ZMTP 1.0 (unversioned or versioned) or 2.0 is
 * disconnected at the greeting (libzmq 4.3.4 could abort on such a peer's
 * routing id: blast_2x2 saw it), and the job still works. */
IT_TEST(legacy_zmtp_refused_1x1)
{
    static const char *const argv[] = {"sum", "--dtype", "f32", "--rounds", "2", NULL};
    /* ZMTP 1.0 unversioned: a routing-id frame (length 6, flags 0, "legacy") */
    static const uint8_t v10u[] = {6, 0, 'l', 'e', 'g', 'a', 'c', 'y'};
    /* versioned: signature, revision (0x00: 1.0, 0x01: 2.0), socket type
     * (DEALER), then the routing id framed as that revision does */
    static const uint8_t v10[] = {0xFF, 0, 0, 0, 0, 0, 0, 0, 1, 0x7F, 0x00, 5,
                                  7, 0, 'l', 'e', 'g', 'a', 'c', 'y'};
    static const uint8_t v20[] = {0xFF, 0, 0, 0, 0, 0, 0, 0, 1, 0x7F, 0x01, 5,
                                  0, 6, 'l', 'e', 'g', 'a', 'c', 'y'};
    const uint8_t *g[3] = {v10u, v10, v20};
    const size_t glen[3] = {sizeof v10u, sizeof v10, sizeof v20};
    const char *what[3] = {"ZMTP 1.0 unversioned", "ZMTP 1.0", "ZMTP 2.0"};
    sec_env(t);
    it_start_scheduler(t, 1, 1, NULL);
    int sport = start_server_port(t, 0, NULL);
    int ports[2] = {t->port, sport};
    const char *names[2] = {"scheduler", "server"};
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 3; k++)
            IT_ASSERT(t, legacy_greeting_closed(t, ports[i], g[k], glen[k], 5),
                      "%s kept a %s connection open for 5 s", names[i], what[k]);
    it_start_worker(t, 0, argv, NULL);
    it_expect_job_ok(t, 60);
}

IT_TEST(huge_frame_rss_secret_1x1)
{
    static const char *const argv[] = {"sum", "--dtype", "f32", "--rounds", "2", NULL};
    sec_env(t);
    set_secret(t, "secret", "the job's own secret, 32 bytes!!", 0600);
    it_start_scheduler(t, 1, 1, NULL);
    int sport = start_server_port(t, 0, NULL);
    pid_t pid = t->proc[t->server[0]].pid;
    const char *mechs[2] = {"NULL", "PLAIN"};
    for (int i = 0; i < 2; i++) {
        unsigned long long before = vm_size(pid, "VmHWM:");
        size_t took = huge_frame(t, sport, mechs[i]);
        unsigned long long after = vm_size(pid, "VmHWM:");
        it_info(t, "server, %s: took %zu bytes; VmHWM %llu -> %llu KiB", mechs[i], took,
                before >> 10, after >> 10);
        IT_ASSERT(t, before > 0 && after < before + (16ull << 20),
                  "the server grew by %llu MiB before any proof (%s)", (after - before) >> 20,
                  mechs[i]);
    }
    it_start_worker(t, 0, argv, NULL);
    it_expect_job_ok(t, 60);
}

/* ---- empty frames on open jobs ---- */

/* Speak ZMTP 3.0 (NULL, DEALER) to 127.0.0.1:port and stream empty message
 * frames (flags 0, size 0) for secs seconds or until the peer closes.
 * Runs in a forked child: no IT_ASSERT (it would end the test there). */
static void empty_frames(int port, double secs)
{
    static const uint8_t greet[64] = {0xFF, 0, 0, 0, 0, 0, 0, 0, 1, 0x7F, 3, 0,
                                      'N',  'U', 'L', 'L'};
    static const uint8_t ready[] = {0x04, 28, 5, 'R', 'E', 'A', 'D', 'Y', 11, 'S', 'o', 'c', 'k',
                                    'e', 't', '-', 'T', 'y', 'p', 'e', 0, 0, 0, 6, 'D', 'E',
                                    'A', 'L', 'E', 'R'};
    /* blocks of 2048 empty frames (two zero bytes each) and a PING command
     * (TTL 0): libzmq answers a PING at once, also one it decodes from a
     * backlog after the application drained a full queue */
    static const uint8_t ping[] = {0x04, 7, 4, 'P', 'I', 'N', 'G', 0, 0};
    enum { BLOCK = 4096 + sizeof ping };
    static uint8_t frames[16 * BLOCK];
    for (size_t b = 0; b < 16; b++)
        memcpy(frames + b * BLOCK + 4096, ping, sizeof ping);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    double end = it_now() + secs;
    while (it_now() < end) { /* reconnect when the peer closes */
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
        struct timeval tv = {0, 200000};
        if (fd < 0)
            return;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
            send(fd, greet, sizeof greet, MSG_NOSIGNAL) == (ssize_t)sizeof greet &&
            send(fd, ready, sizeof ready, MSG_NOSIGNAL) == (ssize_t)sizeof ready) {
            size_t at = 0; /* a partial send goes on where it stopped */
            while (it_now() < end) {
                ssize_t n = send(fd, frames + at, sizeof frames - at, MSG_NOSIGNAL);
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                    continue;
                if (n <= 0)
                    break;
                at = (at + (size_t)n) % sizeof frames;
            }
        }
        close(fd);
        it_nap_ms(10);
    }
}

/* Streams of empty ZMTP frames on several concurrent connections to the
 * scheduler and a server of an open job (no secret) kill nobody (libzmq
 * 4.3.4 aborted on `!_io_error` in the servers within seconds), the job's
 * own worker registers and sums exact in the middle of the flood, and their
 * logs stay small: repeated warnings about peer input are rate-limited.
 * Memory stays bounded: the listening sockets read without a high-water
 * mark (a finite one is what made libzmq abort), so what bounds the queue
 * is the guard disconnecting a stranger's connection at its first refused
 * message (which also drops what the kernel holds unread) and the loop
 * reading small messages without a system call each.  On 2 cores, quiet
 * or with 2 busy loops beside: 5-23 MiB of peak growth; 34-139 MiB when the
 * guard only shut connections down and the loop asked ZMQ_EVENTS per
 * message (up to 627 MiB seen once); 670-770 MiB with no guard.  Every
 * queued frame is delivered before its connection's queue is freed, and a
 * sanitized daemon reads them several times slower while libzmq (not
 * instrumented) queues them as fast (45-101 MiB seen), so a sanitized
 * build gets twice the bound, still below what an unguarded flood queues. */
IT_TEST(empty_frames_open_1x1)
{
    static const char *const argv[] = {"sum", "--dtype", "f32", "--rounds", "4",
                                       "--pause-file", "go", NULL};
    enum { CONNS = 4 };
    const double secs = 8;
    const unsigned long long bound = (it_sanitized() ? 256ull : 128ull) << 20;
    sec_env(t);
    it_start_scheduler(t, 1, 1, NULL);
    int sport = start_server_port(t, 0, NULL);
    int ports[2] = {t->port, sport};
    int idx[2] = {t->sched, t->server[0]};
    const char *names[2] = {"scheduler", "server"};
    unsigned long long hwm[2];
    for (int i = 0; i < 2; i++)
        hwm[i] = vm_size(t->proc[idx[i]].pid, "VmHWM:");
    pid_t kids[2 * CONNS];
    double end = it_now() + secs;
    for (int i = 0; i < 2 * CONNS; i++) {
        kids[i] = fork();
        IT_ASSERT(t, kids[i] >= 0, "fork: %s", strerror(errno));
        if (kids[i] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed assertion ends the test */
            empty_frames(ports[i % 2], 60); /* until killed */
            _exit(0);
        }
    }
    /* the job's worker joins once both daemons have shut a stranger down,
     * and sums its first round in the middle of the flood */
    while (it_now() < end && !(it_log_has(t, idx[0], "refused before identifying", 0) &&
                               it_log_has(t, idx[1], "refused before identifying", 0)))
        it_nap_ms(50);
    for (int i = 0; i < 2; i++)
        IT_ASSERT(t, it_log_has(t, idx[i], "refused before identifying", 0),
                  "the %s shut no flooding connection down in %.0f s", names[i], secs);
    it_start_worker(t, 0, argv, NULL);
    IT_ASSERT(t, it_wait_file(t, "paused-w0", 30, t->worker[0]),
              "the worker did not sum round 0 under the flood");
    /* the flood lasts secs, and at least until round 0 is summed */
    while (it_now() < end)
        it_nap_ms(50);
    for (int i = 0; i < 2 * CONNS; i++) {
        kill(kids[i], SIGKILL);
        while (waitpid(kids[i], NULL, 0) < 0 && errno == EINTR)
            ;
    }
    for (int i = 0; i < 2; i++) {
        unsigned long long after = vm_size(t->proc[idx[i]].pid, "VmHWM:");
        it_info(t, "%s: VmHWM %llu -> %llu KiB", names[i], hwm[i] >> 10, after >> 10);
        IT_ASSERT(t, hwm[i] > 0 && after < hwm[i] + bound,
                  "the %s grew by %llu MiB under the flood (bound %llu MiB)", names[i],
                  (after - hwm[i]) >> 20, bound >> 20);
        IT_ASSERT(t, kill(t->proc[idx[i]].pid, 0) == 0 && !t->proc[idx[i]].reaped &&
                     waitpid(t->proc[idx[i]].pid, NULL, WNOHANG) == 0,
                  "the %s died under the empty-frame flood", names[i]);
        struct stat st;
        IT_ASSERT(t, stat(t->proc[idx[i]].log, &st) == 0, "no %s log", names[i]);
        it_info(t, "%s log after %.0f s of empty frames: %lld bytes", names[i], secs,
                (long long)st.st_size);
        IT_ASSERT(t, st.st_size < (1 << 20), "the %s wrote %lld bytes of log in %.0f s",
                  names[i], (long long)st.st_size, secs);
    }
    it_write_file(t, "go", "go\n");
    it_expect_job_ok(t, 60);
}

/* ---- checkpoint directories ---- */

/* Start a 1x1 job summing 6 rounds with automatic checkpoints every 2
 * rounds into dir, wait for it, and return the server's proc index. */
static int ckpt_job(it_ctx *t, const char *dir)
{
    static const char *const argv[] = {"sum", "--dtype", "f32", "--rounds", "6", NULL};
    it_setenv(t, "KVS_CHECKPOINT_DIR", "%s", dir);
    it_setenv(t, "KVS_CHECKPOINT_EVERY", "2");
    it_start_job(t, 1, 1, argv);
    it_expect_job_ok(t, 60);
    return t->server[0];
}

/* Links planted in a checkpoint directory are never followed: the
 * manifest's temporary file and a round's directory named by links to a
 * victim file and a victim directory leave both untouched (the round is
 * refused, saying why; the next one is written). */
IT_TEST(ckpt_links_1x1)
{
    char dir[PATH_MAX], victim[PATH_MAX], vdir[PATH_MAX], link[PATH_MAX + 64];
    sec_env(t);
    snprintf(dir, sizeof dir, "%s/ckpt", t->dir);
    snprintf(victim, sizeof victim, "%s/victim", t->dir);
    snprintf(vdir, sizeof vdir, "%s/victim-dir", t->dir);
    IT_ASSERT(t, mkdir(dir, 0755) == 0 && mkdir(vdir, 0755) == 0, "mkdir: %s", strerror(errno));
    it_write_file(t, "victim", "precious\n");
    snprintf(link, sizeof link, "%s/.server-0.manifest.tmp", dir);
    IT_ASSERT(t, symlink(victim, link) == 0, "symlink: %s", strerror(errno));
    snprintf(link, sizeof link, "%s/gen-000000000002", dir);
    IT_ASSERT(t, symlink(vdir, link) == 0, "symlink: %s", strerror(errno));
    int s = ckpt_job(t, dir);
    char *v = it_slurp(victim, NULL);
    IT_ASSERT(t, v && strcmp(v, "precious\n") == 0, "the victim file now holds '%s'",
              v ? v : "(gone)");
    free(v);
    DIR *d = opendir(vdir);
    IT_ASSERT(t, d != NULL, "the victim directory is gone");
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            n++, it_info(t, "victim-dir holds %s", de->d_name);
    closedir(d);
    IT_ASSERT(t, n == 0, "the server wrote %d files through a planted link", n);
    IT_ASSERT(t, it_log_has(t, s, "symbolic link there is refused", 0),
              "the server did not say why it refused round 2's directory");
    IT_ASSERT(t, it_log_has(t, s, "automatic checkpoint of round 4 committed", 0),
              "round 4 was not checkpointed");
}

/* A checkpoint directory other users can write is refused, saying why, and
 * nothing is written in it; the job goes on. */
IT_TEST(ckpt_dir_open_1x1)
{
    char open_dir[PATH_MAX];
    DIR *d;
    struct dirent *de;
    int n, s;
    sec_env(t);
    snprintf(open_dir, sizeof open_dir, "%s/ckpt-open", t->dir);
    IT_ASSERT(t, mkdir(open_dir, 0755) == 0 && chmod(open_dir, 0777) == 0, "mkdir: %s",
              strerror(errno));
    s = ckpt_job(t, open_dir);
    IT_ASSERT(t, it_log_has(t, s, "is writable by other users (mode 777)", 0),
              "the server did not refuse a world-writable checkpoint directory");
    d = opendir(open_dir);
    IT_ASSERT(t, d != NULL, "%s is gone", open_dir);
    n = 0;
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            n++, it_info(t, "%s holds %s", open_dir, de->d_name);
    closedir(d);
    IT_ASSERT(t, n <= 1, "the server wrote %d entries into a world-writable directory", n);
}
