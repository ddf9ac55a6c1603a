/*
 * test_guard.c - connections that never identify themselves are bounded:
 * idle outside connections (raw TCP, and ZeroMQ peers that finish the NULL
 * handshake of an open job) are closed after KVS_HANDSHAKE_TIMEOUT, beyond
 * KVS_MAX_PENDING_CONN, and before the descriptors run out; the job's own
 * connections (even idle ones) are kept, its sums stay exact, and the
 * daemons do not spin (net/guard.h).
 */
#include "tests.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#define GUARD_LINE "closing connections that did not identify themselves"

/* Times needle occurs in proc idx's log. */
static int log_count(it_ctx *t, int idx, const char *needle)
{
    char *log = it_read_log(t, idx);
    int n = 0;
    for (const char *p = log; p && (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    free(log);
    return n;
}

/* utime + stime of pid in seconds (/proc/pid/stat), or -1. */
static double cpu_seconds(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* after the command name */
    unsigned long long ut, st;
    if (p == NULL || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                            &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void set_nofile(it_ctx *t, int idx, rlim_t n)
{
    struct rlimit rl = {n, n};
    IT_ASSERT(t, prlimit(t->proc[idx].pid, RLIMIT_NOFILE, &rl, NULL) == 0, "prlimit %s: %s",
              t->proc[idx].name, strerror(errno));
}

static int start_server_port(it_ctx *t, int i)
{
    char pf[PATH_MAX + 32], name[32];
    snprintf(pf, sizeof pf, "KVS_PORT_FILE=%s/server%d.port", t->dir, i);
    int s = it_start_server(t, i, (const char *const[]){pf, NULL});
    snprintf(name, sizeof name, "server%d.port", i);
    IT_ASSERT(t, it_wait_file(t, name, 10, s), "server%d did not write KVS_PORT_FILE", i);
    int port = it_read_port_file(t, name);
    IT_ASSERT(t, port > 0, "server%d's port file does not hold a port", i);
    return port;
}

/* The attackers: raw TCP connections that never send a byte, and ZeroMQ
 * DEALERs that finish the NULL handshake and then say nothing (no
 * reconnection once closed, so each is one connection). */
typedef struct attack {
    void *ctx;
    void *z[512];
    int nz;
    int fd[512];
    int nfd;
} attack;

static void raw_connect(it_ctx *t, attack *a, int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    IT_ASSERT(t, fd >= 0, "socket: %s", strerror(errno));
    int rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
    IT_ASSERT(t, rc == 0 || errno == EINPROGRESS, "connect: %s", strerror(errno));
    a->fd[a->nfd++] = fd;
}

static void zmq_idle(it_ctx *t, attack *a, int port)
{
    char ep[64];
    int zero = 0, never = -1;
    void *s = zmq_socket(a->ctx, ZMQ_DEALER);
    IT_ASSERT(t, s != NULL, "zmq_socket: %s", zmq_strerror(zmq_errno()));
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_RECONNECT_IVL, &never, sizeof never);
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    IT_ASSERT(t, zmq_connect(s, ep) == 0, "zmq_connect %s", ep);
    a->z[a->nz++] = s;
}

/* n idle connections to port: two thirds ZeroMQ, one third raw. */
static void flood(it_ctx *t, attack *a, int port, int n)
{
    for (int i = 0; i < n; i++) {
        if (i % 3 == 2)
            raw_connect(t, a, port);
        else
            zmq_idle(t, a, port);
    }
}

static void attack_end(attack *a)
{
    for (int i = 0; i < a->nz; i++)
        zmq_close(a->z[i]);
    for (int i = 0; i < a->nfd; i++)
        close(a->fd[i]);
    a->nz = a->nfd = 0;
}

static void guard_env(it_ctx *t)
{
    it_setenv(t, "MXNET_KVSTORE_BIGARRAY_BOUND", "1000");
    it_setenv(t, "KVS_START_TIMEOUT", "60");
    it_setenv(t, "PS_VERBOSE", "1");
    it_setenv(t, "KVS_HANDSHAKE_TIMEOUT", "2");
}

/* Server 0 and the scheduler limited to 64 descriptors; 120 idle outside
 * connections to each before the job and 120 more in the middle of it
 * (open job: the ZeroMQ ones finish the NULL handshake).  The job's sums
 * stay exact, it ends 0, the daemons' CPU time stays low, and each logs
 * the guard's line once per attack. */
IT_TEST(guard_nofile_2x2)
{
    static const char *const argv[] = {"sum", "--dtype", "f32", "--split", "--rounds", "4",
                                       "--pause-file", "go", NULL};
    attack a = {0};
    int sport[2];
    guard_env(t);
    it_start_scheduler(t, 2, 2, NULL);
    for (int i = 0; i < 2; i++)
        sport[i] = start_server_port(t, i);
    set_nofile(t, t->sched, 64);
    set_nofile(t, t->server[0], 64);
    pid_t spid = t->proc[t->server[0]].pid, cpid = t->proc[t->sched].pid;
    a.ctx = zmq_ctx_new();
    zmq_ctx_set(a.ctx, ZMQ_MAX_SOCKETS, 1024);
    double t0 = it_now(), c0 = cpu_seconds(spid), k0 = cpu_seconds(cpid);

    flood(t, &a, sport[0], 120);
    flood(t, &a, t->port, 120);
    IT_ASSERT(t, it_wait_log(t, t->server[0], GUARD_LINE, 10), "server0 closed no connection");
    IT_ASSERT(t, it_wait_log(t, t->sched, GUARD_LINE, 10), "the scheduler closed no connection");
    /* the job starts while the attackers still hold what they could */
    for (int i = 0; i < 2; i++)
        it_start_worker(t, i, argv, NULL);
    for (int i = 0; i < 2; i++) {
        char name[32];
        snprintf(name, sizeof name, "paused-w%d", i);
        IT_ASSERT(t, it_wait_file(t, name, 60, t->worker[i]), "worker%d did not finish round 0",
                  i);
    }
    /* in the middle of the job: more of them, and the workers idle for
     * longer than KVS_HANDSHAKE_TIMEOUT (their connections must stay) */
    flood(t, &a, sport[0], 120);
    flood(t, &a, t->port, 120);
    double until = it_now() + 5;
    while (it_now() < until)
        it_nap_ms(100);
    double wall = it_now() - t0, cs = cpu_seconds(spid) - c0, ck = cpu_seconds(cpid) - k0;
    it_info(t, "attack: %.1f s; cpu: server0 %.2f s, scheduler %.2f s", wall, cs, ck);
    it_write_file(t, "go", "go\n");
    it_expect_job_ok(t, 60);
    attack_end(&a);
    zmq_ctx_term(a.ctx);
    /* a spinning accept() loop burns a whole core (95% before the guard) */
    IT_ASSERT(t, cs >= 0 && cs < 0.25 * wall, "server0 used %.2f s of CPU in %.1f s", cs, wall);
    IT_ASSERT(t, ck >= 0 && ck < 0.25 * wall, "the scheduler used %.2f s of CPU in %.1f s", ck,
              wall);
    for (int i = 0; i < 2; i++) {
        int n = log_count(t, i == 0 ? t->server[0] : t->sched, GUARD_LINE);
        IT_ASSERT(t, n >= 1 && n <= 2, "%s logged the guard's line %d times (one per attack)",
                  i == 0 ? "server0" : "the scheduler", n);
    }
    IT_ASSERT(t, it_log_has(t, t->server[0], "none pending now", 0),
              "server0 never got rid of the idle connections");
}

/* Open job, two servers, one small key (so the worker never sends a request
 * to one of the servers, and no direct copies, so no HELLO either): an outside ZeroMQ peer that finished the NULL
 * handshake and stays idle is closed after KVS_HANDSHAKE_TIMEOUT; the
 * worker's own idle connections are not, and the job completes. */
IT_TEST(guard_open_idle_2x1)
{
    static const char *const argv[] = {"sum", "--dtype", "f32", "--counts", "3", "--rounds", "2",
                                       "--pause-file", "go", NULL};
    int sport[2];
    guard_env(t);
    it_setenv(t, "KVS_HANDSHAKE_TIMEOUT", "1");
    it_setenv(t, "KVS_CMA", "0"); /* no HELLO: only the ANNOUNCE identifies the worker */
    it_start_scheduler(t, 2, 1, NULL);
    for (int i = 0; i < 2; i++)
        sport[i] = start_server_port(t, i);
    void *ctx = zmq_ctx_new();
    void *idle[3], *mon[3];
    int ports[3] = {sport[0], sport[1], t->port};
    for (int i = 0; i < 3; i++) {
        char ep[64], mep[64];
        int zero = 0, never = -1;
        idle[i] = zmq_socket(ctx, ZMQ_DEALER);
        zmq_setsockopt(idle[i], ZMQ_LINGER, &zero, sizeof zero);
        zmq_setsockopt(idle[i], ZMQ_RECONNECT_IVL, &never, sizeof never);
        snprintf(mep, sizeof mep, "inproc://guard-mon-%d", i);
        IT_ASSERT(t, zmq_socket_monitor(idle[i], mep, ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
                                                         ZMQ_EVENT_DISCONNECTED) == 0,
                  "zmq_socket_monitor");
        mon[i] = zmq_socket(ctx, ZMQ_PAIR);
        zmq_setsockopt(mon[i], ZMQ_LINGER, &zero, sizeof zero);
        IT_ASSERT(t, zmq_connect(mon[i], mep) == 0, "connect monitor");
        snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", ports[i]);
        IT_ASSERT(t, zmq_connect(idle[i], ep) == 0, "zmq_connect %s", ep);
    }
    /* each idle peer: handshake done, then closed by the daemon within a few
     * timeouts */
    for (int i = 0; i < 3; i++) {
        int got = 0;
        double end = it_now() + 10 * it_slow, shook = -1, closed = -1;
        while (it_now() < end && closed < 0) {
            zmq_pollitem_t it = {mon[i], 0, ZMQ_POLLIN, 0};
            if (zmq_poll(&it, 1, 100) <= 0)
                continue;
            uint8_t ev[6];
            char addr[256];
            if (zmq_recv(mon[i], ev, sizeof ev, 0) < 6)
                continue;
            zmq_recv(mon[i], addr, sizeof addr, 0);
            uint16_t e = (uint16_t)(ev[0] | ev[1] << 8);
            if (e == ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
                shook = it_now(), got |= 1;
            if (e == ZMQ_EVENT_DISCONNECTED)
                closed = it_now(), got |= 2;
        }
        IT_ASSERT(t, got == 3, "idle peer %d: handshake %s, closed %s", i,
                  got & 1 ? "done" : "never done", got & 2 ? "yes" : "never");
        it_info(t, "idle peer %d closed %.2f s after its handshake", i, closed - shook);
    }
    it_start_worker(t, 0, argv, NULL);
    IT_ASSERT(t, it_wait_file(t, "paused-w0", 30, t->worker[0]), "worker0 did not pause");
    double until = it_now() + 3; /* three timeouts with every connection idle */
    while (it_now() < until)
        it_nap_ms(100);
    it_write_file(t, "go", "go\n");
    it_expect_job_ok(t, 30);
    for (int i = 0; i < 3; i++) {
        zmq_close(idle[i]);
        zmq_close(mon[i]);
    }
    zmq_ctx_term(ctx);
    IT_ASSERT(t, it_log_has(t, t->server[0], GUARD_LINE, 0) &&
                     it_log_has(t, t->server[1], GUARD_LINE, 0) &&
                     it_log_has(t, t->sched, GUARD_LINE, 0),
              "a daemon did not log the guard's line");
}

/* A worker pushing rounds far ahead meets the server's bound: bytes
 * (KVS_MAX_QUEUED_BYTES: two 4000-byte pushes and their requests fit in
 * 10000, three do not) and requests
 * (KVS_MAX_QUEUED_REQUESTS=2): its wait returns KVS_EFULL naming the bound,
 * the rounds within the bound complete with exact sums, the job ends 0. */
IT_TEST(queue_bound_1x2)
{
    static const char *const argv[] = {"ahead", "--rounds", "8", NULL};
    static const char *const bounds[][2] = {{"KVS_MAX_QUEUED_BYTES", "10000"},
                                            {"KVS_MAX_QUEUED_REQUESTS", "2"}};
    for (int k = 0; k < 2; k++) {
        it_ctx sub;
        char dir[sizeof t->dir + 16];
        snprintf(dir, sizeof dir, "%s/%s", t->dir, k ? "requests" : "bytes");
        IT_ASSERT(t, mkdir(dir, 0700) == 0, "mkdir %s: %s", dir, strerror(errno));
        it_ctx_init(&sub, t->test, dir);
        it_setenv(&sub, "PS_VERBOSE", "1");
        it_setenv(&sub, "KVS_START_TIMEOUT", "30");
        it_setenv(&sub, bounds[k][0], "%s", bounds[k][1]);
        /* the bound is per worker: each pushes for itself (in a local group
         * a worker cannot run ahead of the group's other members) */
        it_setenv(&sub, "KVS_LOCAL_AGG", "0");
        it_start_job(&sub, 1, 2, argv);
        it_expect_job_ok(&sub, 60);
        IT_ASSERT(&sub, it_log_has(&sub, sub.worker[0], "returned KVS_EFULL", 0),
                  "worker 0 did not get KVS_EFULL");
        it_info(t, "%s=%s: bound met", bounds[k][0], bounds[k][1]);
        it_ctx_fini(&sub);
    }
}

/* Worker 0 inits more keys than a server holds: by count (KVS_MAX_KEYS=40)
 * and by bytes (KVS_MAX_KEY_BYTES=20000: each key part of 8 float32 costs its
 * value plus the entry's own size, a few hundred bytes).  The init past the
 * bound returns KVS_EFULL naming it, the keys within it sum exactly for both
 * workers, the job ends 0. */
IT_TEST(keys_bound_1x2)
{
    static const char *const argv[] = {"keys-bound", "--keys", "200", NULL};
    static const char *const bounds[][2] = {{"KVS_MAX_KEYS", "40"},
                                            {"KVS_MAX_KEY_BYTES", "20000"}};
    for (int k = 0; k < 2; k++) {
        it_ctx sub;
        char dir[sizeof t->dir + 16];
        snprintf(dir, sizeof dir, "%s/%s", t->dir, k ? "bytes" : "keys");
        IT_ASSERT(t, mkdir(dir, 0700) == 0, "mkdir %s: %s", dir, strerror(errno));
        it_ctx_init(&sub, t->test, dir);
        it_setenv(&sub, "KVS_START_TIMEOUT", "30");
        it_setenv(&sub, bounds[k][0], "%s", bounds[k][1]);
        it_start_job(&sub, 1, 2, argv);
        it_expect_job_ok(&sub, 90);
        IT_ASSERT(&sub, it_log_has(&sub, sub.worker[0], "returned KVS_EFULL", 0),
                  "worker 0 did not get KVS_EFULL");
        if (k == 0)
            IT_ASSERT(&sub, it_log_has(&sub, sub.worker[0], "keys-bound: 40 keys exact", 0) &&
                                it_log_has(&sub, sub.worker[1], "keys-bound: 40 keys exact", 0),
                      "not exactly 40 keys created and summed under KVS_MAX_KEYS=40");
        else
            IT_ASSERT(&sub, it_log_has(&sub, sub.worker[1], "keys exact, the next one refused", 0),
                      "worker 1 did not sum the created keys");
        it_info(t, "%s=%s: bound met", bounds[k][0], bounds[k][1]);
        it_ctx_fini(&sub);
    }
}
