/* test_guard.c - net/guard.c: pending connections are shut down after the
 * timeout and beyond the cap (oldest first), trusted ones never; a
 * descriptor reused by another socket is not mistaken for the old one.
 * Socket pairs stand in for accepted connections: the guard shuts down its
 * end, the test sees the end of the stream on the other. */
#include <check.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>
#include <zmq.h>

#include "common/config.h"
#include "net/guard.h"

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

/* 1 when the guard shut down the other end (end of stream), 0 when open. */
static int was_shut(int peer)
{
    char c;
    ssize_t n = recv(peer, &c, 1, MSG_DONTWAIT);
    if (n == 0)
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
    tcase_add_test(t, test_guard_reserve);
    suite_add_tcase(s, t);
    return s;
}
