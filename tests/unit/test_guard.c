/* test_guard.c - net/guard.c: pending connections are shut down after the
 * timeout, beyond the cap (oldest first) and at a refused message, trusted
 * ones never; a
 * descriptor reused by another socket is not mistaken for the old one.
 * Socket pairs stand in for accepted connections: the guard shuts down its
 * end, the test sees the end of the stream on the other. */
#include <check.h>
#include <errno.h>
#include <string.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>
#include <zmq.h>

#include "common/config.h"
#include "net/guard.h"
#include "net/tcpinfo.h"

typedef struct grig {
    cfg c;
    uv_loop_t loop;
    net_guard *g;
} grig;

static void grig_init(grig *r, double timeout_s, int cap)
{
    memset(r, 0, sizeof *r);
    r->c.handshake_timeout_s = timeout_s;
    r->c.max_pending_conn = cap;
    uv_loop_init(&r->loop);
    ck_assert_int_eq(net_guard_new(&r->loop, &r->c, "test", &r->g), 0);
}

static void grig_fini(grig *r)
{
    net_guard_free(r->g);
    uv_run(&r->loop, UV_RUN_DEFAULT);
    uv_loop_close(&r->loop);
}

static void on_stop(uv_timer_t *t)
{
    uv_stop(t->loop);
}

/* Run the loop for ms milliseconds. */
static void run_ms(grig *r, uint64_t ms)
{
    uv_timer_t t;
    uv_timer_init(&r->loop, &t);
    uv_timer_start(&t, on_stop, ms, 0);
    uv_run(&r->loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&r->loop, UV_RUN_NOWAIT);
}

/* A connection: sv[0] plays the accepted descriptor, sv[1] the peer. */
static void conn(int sv[2])
{
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
}

/* 1 when the guard shut down the other end (end of stream; a TCP
 * connection is reset), 0 when open. */
static int was_shut(int peer)
{
    char c;
    ssize_t n = recv(peer, &c, 1, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno == ECONNRESET))
        return 1;
    ck_assert_msg(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK), "recv: %zd %s", n,
                  strerror(errno));
    return 0;
}

START_TEST(test_guard_timeout_and_trust)
{
    grig r;
    int a[2], b[2];
    net_guard_stats st;
    grig_init(&r, 0.2, 64);
    conn(a);
    conn(b);
    net_guard_event(r.g, ZMQ_EVENT_ACCEPTED, a[0]);
    net_guard_event(r.g, ZMQ_EVENT_ACCEPTED, b[0]);
    net_guard_trust(r.g, b[0]); /* b spoke for a node */
    net_guard_get_stats(r.g, &st);
    ck_assert_uint_eq(st.pending, 1);
    ck_assert_uint_eq(st.trusted, 1);
    run_ms(&r, 50);
    ck_assert_int_eq(was_shut(a[1]), 0); /* not yet */
    run_ms(&r, 500);
    ck_assert_int_eq(was_shut(a[1]), 1);
    ck_assert_int_eq(was_shut(b[1]), 0);
    net_guard_get_stats(r.g, &st);
    ck_assert_uint_eq(st.closed_timeout, 1);
    ck_assert_uint_eq(st.closed, 1);
    /* libzmq closes a shut-down descriptor; the guard forgets it */
    close(a[0]);
    net_guard_event(r.g, ZMQ_EVENT_DISCONNECTED, a[0]);
    net_guard_get_stats(r.g, &st);
    ck_assert_uint_eq(st.pending, 0);
    ck_assert_uint_eq(st.trusted, 1);
    close(a[1]);
    close(b[0]);
    close(b[1]);
    grig_fini(&r);
}
END_TEST

START_TEST(test_guard_cap_oldest_first)
{
    grig r;
    int c[5][2];
    net_guard_stats st;
    grig_init(&r, 60, 3);
    for (int i = 0; i < 5; i++) {
        conn(c[i]);
        net_guard_event(r.g, ZMQ_EVENT_ACCEPTED, c[i][0]);
    }
    /* 5 pending, cap 3: the two oldest go once their grace is over */
    ck_assert_int_eq(was_shut(c[0][1]), 0);
    run_ms(&r, NET_GUARD_GRACE_MS + 200);
    ck_assert_int_eq(was_shut(c[0][1]), 1);
    ck_assert_int_eq(was_shut(c[1][1]), 1);
    for (int i = 2; i < 5; i++)
        ck_assert_int_eq(was_shut(c[i][1]), 0);
    net_guard_get_stats(r.g, &st);
    ck_assert_uint_eq(st.closed_cap, 2);
    ck_assert_uint_eq(st.pending, 3);
    /* trusted connections do not count against the cap */
    net_guard_trust(r.g, c[2][0]);
    int d[2];
    conn(d);
    net_guard_event(r.g, ZMQ_EVENT_ACCEPTED, d[0]);
    run_ms(&r, NET_GUARD_GRACE_MS + 200);
    ck_assert_int_eq(was_shut(c[3][1]), 0);
    ck_assert_int_eq(was_shut(d[1]), 0);
    for (int i = 0; i < 5; i++) {
        close(c[i][0]);
        close(c[i][1]);
    }
    close(d[0]);
    close(d[1]);
    grig_fini(&r);
}
END_TEST

/* A descriptor number that libzmq closed and reused for a new connection:
 * a late DISCONNECTED of the old one, or a trust that arrived before the
 * new one's ACCEPTED, must not make the guard shut the new one down. */
START_TEST(test_guard_fd_reuse)
{
    grig r;
    int a[2], b[2];
    net_guard_stats st;
    grig_init(&r, 0.2, 64);
    conn(a);
    net_guard_event(r.g, ZMQ_EVENT_ACCEPTED, a[0]);
    int fd = a[0];
    close(a[0]); /* gone before its DISCONNECTED reached the loop */
    conn(b);
    if (b[0] != fd) { /* the lowest free number: it should be the same */
        ck_assert_int_eq(dup2(b[0], fd), fd);
        close(b[0]);
        b[0] = fd;
    }
    net_guard_trust(r.g, b[0]); /* the new connection's message came first */
    net_guard_event(r.g, ZMQ_EVENT_DISCONNECTED, fd); /* the old one's event */
    net_guard_event(r.g, ZMQ_EVENT_ACCEPTED, fd);     /* the new one's event */
    net_guard_get_stats(r.g, &st);
    ck_assert_uint_eq(st.trusted, 1);
    ck_assert_uint_eq(st.pending, 0);
    run_ms(&r, 500);
    ck_assert_int_eq(was_shut(b[1]), 0);
    close(a[1]);
    close(b[0]);
    close(b[1]);
    grig_fini(&r);
}
END_TEST

/* Before closing for the cap, the guard lets the socket deliver what it
 * has (the flush): a connection whose first message is there is kept. */
static int flush_fd = -1;
static net_guard *flush_g;
static void flush_trusts(void *arg)
{
    (void)arg;
    net_guard_trust(flush_g, flush_fd);
}

START_TEST(test_guard_flush_first)
{
    grig r;
    int a[2], b[2];
    grig_init(&r, 60, 1);
    conn(a);
    conn(b);
    flush_g = r.g;
    flush_fd = a[0];
    net_guard_set_flush(r.g, flush_trusts, NULL);
    net_guard_event(r.g, ZMQ_EVENT_ACCEPTED, a[0]);
    net_guard_event(r.g, ZMQ_EVENT_ACCEPTED, b[0]); /* over the cap of 1 */
    run_ms(&r, NET_GUARD_GRACE_MS + 200);
    ck_assert_int_eq(was_shut(a[1]), 0); /* a spoke: trusted by the flush */
    ck_assert_int_eq(was_shut(b[1]), 0); /* alone in the cap now */
    close(a[0]);
    close(a[1]);
    close(b[0]);
    close(b[1]);
    grig_fini(&r);
}
END_TEST

/* A TCP connection over loopback: sv[0] the accepted end, sv[1] the peer
 * (the refusal rule reads what the kernel counts for TCP). */
static void tcp_conn(int sv[2])
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(l, 0);
    ck_assert_int_eq(bind(l, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(l, 1), 0);
    ck_assert_int_eq(getsockname(l, (struct sockaddr *)&a, &len), 0);
    sv[1] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(sv[1], 0);
    ck_assert_int_eq(connect(sv[1], (struct sockaddr *)&a, sizeof a), 0);
    sv[0] = accept(l, NULL, NULL);
    ck_assert_int_ge(sv[0], 0);
    close(l);
}

/* The peer sends n bytes; returns once the accepted end counted them. */
static void tcp_send(int sv[2], size_t n)
{
    static char junk[1 << 16];
    uint64_t before = net_tcp_received(sv[0]);
    ck_assert_uint_lt(n, sizeof junk + 1);
    ck_assert_int_eq(send(sv[1], junk, n, 0), (ssize_t)n);
    for (int i = 0; i < 1000 && net_tcp_received(sv[0]) < before + n; i++)
        usleep(1000);
    ck_assert_uint_ge(net_tcp_received(sv[0]), before + n);
}

/* A refused message shuts the pending connection it came on down at once,
 * unless that connection is trusted (answer it), has received too little
 * to be the one that sent it (a node's new connection on a reused
 * descriptor), or the message's routing id belongs to a connection shut
 * before (the rest of its queue). */
START_TEST(test_guard_refused)
{
    grig r;
    int a[2], b[2], c[2], d[2];
    net_guard_stats st;
    grig_init(&r, 60, 64);
    tcp_conn(a);
    tcp_conn(b);
    net_guard_event(r.g, ZMQ_EVENT_ACCEPTED, a[0]);
    net_guard_event(r.g, ZMQ_EVENT_ACCEPTED, b[0]);
    net_guard_trust(r.g, b[0]);
    ck_assert(net_tcp_received(a[0]) < NET_GUARD_REFUSE_MIN);
    ck_assert(!net_guard_refused(r.g, a[0], "A", 1)); /* too new: kept */
    ck_assert_int_eq(was_shut(a[1]), 0);
    tcp_send(a, NET_GUARD_REFUSE_MIN);
    tcp_send(b, NET_GUARD_REFUSE_MIN);
    ck_assert(net_guard_refused(r.g, b[0], "B", 1)); /* trusted: answer it */
    ck_assert_int_eq(was_shut(b[1]), 0);
    ck_assert(!net_guard_refused(r.g, a[0], "A", 1));
    ck_assert_int_eq(was_shut(a[1]), 1);
    /* what a received and nobody read is dropped, not left for libzmq to
     * decode: its next read fails */
    int unread = -1;
    ck_assert_int_eq(ioctl(a[0], SIOCINQ, &unread), 0);
    ck_assert_int_eq(unread, 0);
    char byte;
    ck_assert_int_eq(recv(a[0], &byte, 1, MSG_DONTWAIT), -1);
    ck_assert_int_eq(errno, ECONNRESET);
    ck_assert(!net_guard_refused(r.g, a[0], "A", 1)); /* the rest of its queue */
    net_guard_get_stats(r.g, &st);
    ck_assert_uint_eq(st.closed_refused, 1);
    ck_assert_uint_eq(st.closed, 1);
    ck_assert_uint_eq(st.pending, 0);
    ck_assert_uint_eq(st.trusted, 1);
    /* libzmq closes a's descriptor; a new connection gets its number */
    int fd = a[0];
    close(a[0]);
    net_guard_event(r.g, ZMQ_EVENT_DISCONNECTED, fd);
    ck_assert_int_eq(dup2(0, fd), fd); /* holds the number while c's sockets are made */
    tcp_conn(c);
    ck_assert_int_eq(dup2(c[0], fd), fd);
    close(c[0]);
    c[0] = fd;
    net_guard_event(r.g, ZMQ_EVENT_ACCEPTED, c[0]);
    tcp_send(c, NET_GUARD_REFUSE_MIN);
    ck_assert(!net_guard_refused(r.g, c[0], "A", 1)); /* a's late message: not c's */
    ck_assert_int_eq(was_shut(c[1]), 0);
    ck_assert(!net_guard_refused(r.g, c[0], "C", 1)); /* c's own */
    ck_assert_int_eq(was_shut(c[1]), 1);
    /* a connection whose ACCEPTED has not reached the loop yet */
    tcp_conn(d);
    tcp_send(d, NET_GUARD_REFUSE_MIN);
    ck_assert(!net_guard_refused(r.g, d[0], "D", 1));
    ck_assert_int_eq(was_shut(d[1]), 1);
    net_guard_event(r.g, ZMQ_EVENT_ACCEPTED, d[0]); /* late: still the shut one */
    net_guard_get_stats(r.g, &st);
    ck_assert_uint_eq(st.closed_refused, 3);
    ck_assert_uint_eq(st.pending, 0);
    ck_assert(net_guard_refused(NULL, d[0], "D", 1)); /* no guard: answer */
    close(a[1]);
    close(b[0]);
    close(b[1]);
    close(c[0]);
    close(c[1]);
    close(d[0]);
    close(d[1]);
    grig_fini(&r);
}
END_TEST

START_TEST(test_guard_reserve)
{
    ck_assert_uint_eq(net_guard_reserve(64), 18);
    ck_assert_uint_eq(net_guard_reserve(1024), 48);
    ck_assert_uint_eq(net_guard_reserve(1u << 20), 1024);
}
END_TEST

Suite *guard_suite(void)
{
    Suite *s = suite_create("guard");
    TCase *t = tcase_create("guard");
    tcase_set_timeout(t, 20);
    tcase_add_test(t, test_guard_timeout_and_trust);
    tcase_add_test(t, test_guard_cap_oldest_first);
    tcase_add_test(t, test_guard_fd_reuse);
    tcase_add_test(t, test_guard_flush_first);
    tcase_add_test(t, test_guard_refused);
    tcase_add_test(t, test_guard_reserve);
    suite_add_tcase(s, t);
    return s;
}
