/* test_auth.c - net/auth.c: HMAC-SHA256 against RFC 4231, and the ZAP
 * handler with real ZeroMQ sockets on a loop: a proof gets in once, a
 * replayed proof, a proof for another target and a made-up one never do;
 * CURVE keys derived from the secret; the job secret's configuration. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <uv.h>
#include <zmq.h>

#include "common/clock.h"
#include "common/config.h"
#include "kvs.h"
#include "net/auth.h"

static void unhex(const char *s, uint8_t *out, size_t *n)
{
    size_t len = strlen(s) / 2;
    for (size_t i = 0; i < len; i++) {
        unsigned v;
        sscanf(s + 2 * i, "%2x", &v);
        out[i] = (uint8_t)v;
    }
    *n = len;
}

/* RFC 4231 test cases 1, 2, 3, 4, 6 and 7 (HMAC-SHA-256). */
START_TEST(test_hmac_rfc4231)
{
    static const struct {
        const char *key, *data, *mac;
    } v[] = {
        {"0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "4869205468657265",
         "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
        {"4a656665", "7768617420646f2079612077616e7420666f72206e6f7468696e673f",
         "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
        {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
         "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"
         "dddddddddddddddd",
         "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
        {"0102030405060708090a0b0c0d0e0f10111213141516171819",
         "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd"
         "cdcdcdcdcdcdcdcd",
         "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
        {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "aaaaaaaaaaaaaaaaaaaaaa",
         "54657374205573696e67204c6172676572205468616e20426c6f636b2d53697a65204b6579202d2048"
         "617368204b6579204669727374",
         "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
        {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "aaaaaaaaaaaaaaaaaaaaaa",
         "5468697320697320612074657374207573696e672061206c6172676572207468616e20626c6f636b"
         "2d73697a65206b657920616e642061206c6172676572207468616e20626c6f636b2d73697a652064"
         "6174612e20546865206b6579206e6565647320746f20626520686173686564206265666f72652062"
         "65696e6720757365642062792074686520484d414320616c676f726974686d2e",
         "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        uint8_t key[256], data[256], want[32], got[32];
        size_t kn, dn, mn;
        unhex(v[i].key, key, &kn);
        unhex(v[i].data, data, &dn);
        unhex(v[i].mac, want, &mn);
        ck_assert_uint_eq(mn, 32);
        net_hmac(key, kn, data, dn, got);
        ck_assert_msg(memcmp(got, want, 32) == 0, "RFC 4231 vector %zu", i);
    }
}
END_TEST

/* ---- a ZAP handler on a loop, a ROUTER that requires proofs ---- */

typedef struct rig {
    cfg c;
    uv_loop_t loop;
    void *zctx, *router;
    net_auth *auth;
    int port;
} rig;

static void rig_init(rig *r, enum cfg_security sec)
{
    char ep[128];
    size_t len = sizeof ep;
    memset(r, 0, sizeof *r);
    r->c.security = sec;
    memcpy(r->c.secret, "unit test secret, thirty-two b!!", 32);
    r->c.secret_len = 32;
    r->c.handshake_timeout_s = 10;
    uv_loop_init(&r->loop);
    r->zctx = zmq_ctx_new();
    ck_assert_int_eq(net_auth_new(&r->loop, r->zctx, &r->c, "test", &r->auth), 0);
    r->router = zmq_socket(r->zctx, ZMQ_ROUTER);
    ck_assert_int_eq(net_auth_listen(r->auth, r->router, "the target"), 0);
    ck_assert_int_eq(zmq_bind(r->router, "tcp://127.0.0.1:*"), 0);
    ck_assert_int_eq(zmq_getsockopt(r->router, ZMQ_LAST_ENDPOINT, ep, &len), 0);
    r->port = atoi(strrchr(ep, ':') + 1);
}

static void rig_fini(rig *r)
{
    zmq_close(r->router);
    net_auth_free(r->auth);
    uv_run(&r->loop, UV_RUN_DEFAULT);
    uv_loop_close(&r->loop);
    zmq_ctx_term(r->zctx);
}

static void *client(rig *r)
{
    char ep[64];
    int zero = 0;
    void *s = zmq_socket(r->zctx, ZMQ_DEALER);
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    (void)ep;
    return s;
}

static void client_go(rig *r, void *s)
{
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", r->port);
    ck_assert_int_eq(zmq_connect(s, ep), 0);
    ck_assert_int_eq(zmq_send(s, "hi", 2, ZMQ_DONTWAIT), 2);
}

/* Run the loop (the ZAP handler) until the router has a message or wait_ms
 * passed.  Returns 1 with the proven peer in user, 0 if none arrived. */
static int router_got(rig *r, int wait_ms, char *user, size_t userlen)
{
    uint64_t end = clock_ms() + (uint64_t)wait_ms;
    while (clock_ms() < end) {
        uv_run(&r->loop, UV_RUN_NOWAIT);
        zmq_pollitem_t it = {r->router, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 10) > 0) {
            zmq_msg_t id, m;
            zmq_msg_init(&id);
            zmq_msg_init(&m);
            ck_assert_int_ge(zmq_msg_recv(&id, r->router, 0), 0);
            ck_assert_int_ge(zmq_msg_recv(&m, r->router, 0), 0);
            const char *p = net_auth_peer(&m);
            snprintf(user, userlen, "%s", p ? p : "(none)");
            zmq_msg_close(&id);
            zmq_msg_close(&m);
            return 1;
        }
    }
    return 0;
}

START_TEST(test_auth_replay)
{
    rig r;
    char user[64], why[128], uname[300], pass[100];
    size_t ul = sizeof uname, pl = sizeof pass;
    rig_init(&r, CFG_SEC_AUTH);

    void *a = client(&r);
    ck_assert_int_eq(net_auth_connect(&r.c, a, "worker", 9, "the target", why, sizeof why), 0);
    client_go(&r, a);
    ck_assert_int_eq(router_got(&r, 5000, user, sizeof user), 1);
    ck_assert_str_eq(user, "worker 9");
    ck_assert(net_auth_peer_is(user, "worker", 9));
    ck_assert(!net_auth_peer_is(user, "worker", 11));
    ck_assert(!net_auth_peer_is(user, "server", 9));
    ck_assert_uint_eq(net_auth_accepted(r.auth), 1);

    /* the same proof again (a recording of a's handshake) */
    ck_assert_int_eq(zmq_getsockopt(a, ZMQ_PLAIN_USERNAME, uname, &ul), 0);
    ck_assert_int_eq(zmq_getsockopt(a, ZMQ_PLAIN_PASSWORD, pass, &pl), 0);
    void *b = client(&r);
    zmq_setsockopt(b, ZMQ_PLAIN_USERNAME, uname, strlen(uname));
    zmq_setsockopt(b, ZMQ_PLAIN_PASSWORD, pass, strlen(pass));
    client_go(&r, b);
    ck_assert_int_eq(router_got(&r, 700, user, sizeof user), 0);
    ck_assert_uint_ge(net_auth_refused(r.auth), 1);

    /* a proof made for another target (another server of the job) */
    void *c = client(&r);
    ck_assert_int_eq(net_auth_connect(&r.c, c, "worker", 9, "another target", why, sizeof why), 0);
    client_go(&r, c);
    ck_assert_int_eq(router_got(&r, 700, user, sizeof user), 0);

    /* a proof under another secret */
    cfg other = r.c;
    other.secret[0] ^= 1;
    void *d = client(&r);
    ck_assert_int_eq(net_auth_connect(&other, d, "worker", 9, "the target", why, sizeof why), 0);
    client_go(&r, d);
    ck_assert_int_eq(router_got(&r, 700, user, sizeof user), 0);

    /* no mechanism at all */
    void *e = client(&r);
    client_go(&r, e);
    ck_assert_int_eq(router_got(&r, 500, user, sizeof user), 0);

    /* a fresh proof of the right secret still gets in */
    void *f = client(&r);
    ck_assert_int_eq(net_auth_connect(&r.c, f, "server", -1, "the target", why, sizeof why), 0);
    client_go(&r, f);
    ck_assert_int_eq(router_got(&r, 5000, user, sizeof user), 1);
    ck_assert_str_eq(user, "server -1");
    ck_assert_uint_eq(net_auth_accepted(r.auth), 2);

    void *all[] = {a, b, c, d, e, f};
    for (size_t i = 0; i < 6; i++)
        zmq_close(all[i]);
    rig_fini(&r);
}
END_TEST

START_TEST(test_auth_curve)
{
    rig r;
    char user[64], why[128];
    rig_init(&r, CFG_SEC_CURVE);
    void *a = client(&r);
    ck_assert_int_eq(net_auth_connect(&r.c, a, "worker", 9, "the target", why, sizeof why), 0);
    client_go(&r, a);
    ck_assert_int_eq(router_got(&r, 5000, user, sizeof user), 1);
    ck_assert_str_eq(user, "worker -1");
    ck_assert(net_auth_peer_is(user, "worker", 9)); /* a role key speaks for any worker id */
    cfg other = r.c;
    other.secret[5] ^= 1;
    void *b = client(&r);
    ck_assert_int_eq(net_auth_connect(&other, b, "worker", 9, "the target", why, sizeof why), 0);
    client_go(&r, b);
    ck_assert_int_eq(router_got(&r, 700, user, sizeof user), 0);
    zmq_close(a);
    zmq_close(b);
    rig_fini(&r);
}
END_TEST

START_TEST(test_open_job)
{
    rig r;
    char user[64];
    rig_init(&r, CFG_SEC_NONE);
    void *a = client(&r);
    client_go(&r, a);
    ck_assert_int_eq(router_got(&r, 5000, user, sizeof user), 1);
    ck_assert_str_eq(user, "(none)"); /* no proof, no identity */
    zmq_close(a);
    rig_fini(&r);
}
END_TEST

/* ---- KVS_SECRET_FILE / KVS_SECRET / KVS_SECURITY ---- */

static void clear_env(void)
{
    unsetenv("KVS_SECRET_FILE");
    unsetenv("KVS_SECRET");
    cfg_forget_env_secret();
    unsetenv("KVS_SECURITY");
}

START_TEST(test_secret_config)
{
    cfg c;
    char err[512], path[] = "/tmp/kvs-test-secret-XXXXXX";
    clear_env();
    ck_assert_int_eq(cfg_load_secret(&c, err, sizeof err), 0);
    ck_assert_int_eq(c.security, CFG_SEC_NONE);
    ck_assert_uint_eq(c.secret_len, 0);

    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "0123456789abcdefXYZ\n\n", 21), 21);
    close(fd);
    setenv("KVS_SECRET_FILE", path, 1);
    ck_assert_int_eq(cfg_load_secret(&c, err, sizeof err), 0);
    ck_assert_int_eq(c.security, CFG_SEC_AUTH); /* the default with a secret */
    ck_assert_uint_eq(c.secret_len, 19);          /* trailing newlines dropped */
    ck_assert(memcmp(c.secret, "0123456789abcdefXYZ", 19) == 0);
    setenv("KVS_SECURITY", "curve", 1);
    ck_assert_int_eq(cfg_load_secret(&c, err, sizeof err), 0);
    ck_assert_int_eq(c.security, CFG_SEC_CURVE);
    setenv("KVS_SECURITY", "none", 1);
    ck_assert_int_eq(cfg_load_secret(&c, err, sizeof err), KVS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "KVS_SECURITY"));
    setenv("KVS_SECURITY", "tls", 1);
    ck_assert_int_eq(cfg_load_secret(&c, err, sizeof err), KVS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "'tls'"));
    unsetenv("KVS_SECURITY");

    chmod(path, 0640);
    ck_assert_int_eq(cfg_load_secret(&c, err, sizeof err), KVS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "KVS_SECRET_FILE"));
    ck_assert_ptr_nonnull(strstr(err, "0640"));
    chmod(path, 0604);
    ck_assert_int_eq(cfg_load_secret(&c, err, sizeof err), KVS_ECONFIG);
    chmod(path, 0400);
    ck_assert_int_eq(cfg_load_secret(&c, err, sizeof err), 0);

    setenv("KVS_SECRET", "also set", 1);
    ck_assert_int_eq(cfg_load_secret(&c, err, sizeof err), KVS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "both"));
    unsetenv("KVS_SECRET_FILE");
    ck_assert_int_eq(cfg_load_secret(&c, err, sizeof err), KVS_ECONFIG); /* 8 bytes: short */
    ck_assert_ptr_nonnull(strstr(err, "at least 16"));
    setenv("KVS_SECRET", "a value of sixteen+", 1);
    ck_assert_int_eq(cfg_load_secret(&c, err, sizeof err), 0);
    ck_assert_str_eq(c.secret_from, "KVS_SECRET");
    /* read once: out of the environment (children do not inherit it), kept
     * for the process's next stores */
    ck_assert_ptr_null(getenv("KVS_SECRET"));
    memset(&c, 0, sizeof c);
    ck_assert_int_eq(cfg_load_secret(&c, err, sizeof err), 0);
    ck_assert_uint_eq(c.secret_len, 19);
    ck_assert(memcmp(c.secret, "a value of sixteen+", 19) == 0);
    ck_assert_str_eq(c.secret_from, "KVS_SECRET");
    /* a daemon with a secret cannot dump core (forked test: this child only) */
    ck_assert_int_eq(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0), 1);
    cfg_protect_secrets(&c);
    ck_assert_int_eq(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0), 0);

    clear_env();
    setenv("KVS_SECRET_FILE", "/nonexistent/kvs-secret", 1);
    ck_assert_int_eq(cfg_load_secret(&c, err, sizeof err), KVS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "cannot open"));
    setenv("KVS_SECRET_FILE", "/tmp", 1);
    ck_assert_int_eq(cfg_load_secret(&c, err, sizeof err), KVS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "regular file"));
    clear_env();
    setenv("KVS_SECURITY", "auth", 1);
    ck_assert_int_eq(cfg_load_secret(&c, err, sizeof err), KVS_ECONFIG);
    clear_env();
    unlink(path);
}
END_TEST

Suite *auth_suite(void)
{
    Suite *s = suite_create("auth");
    TCase *t = tcase_create("auth");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, test_hmac_rfc4231);
    tcase_add_test(t, test_auth_replay);
    tcase_add_test(t, test_auth_curve);
    tcase_add_test(t, test_open_job);
    tcase_add_test(t, test_secret_config);
    suite_add_tcase(s, t);
    return s;
}
