/* auth.c - see auth.h.
 *
 * libsodium provides HMAC-SHA256, the random bytes and the Curve25519 base
 * point multiplication: libzmq already links it for CURVE, and its
 * constant-time code is better than a new implementation (the unit tests
 * check net_hmac against RFC 4231 anyway).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sodium.h>

#include "kvs.h"
#include "common/hmap.h"
#include "common/log.h"
#include "net/auth.h"

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define NONCE_MAX (1u << 22) /* accepted nonces remembered; more: refuse (log) */
#define USER_MAX 256          /* PLAIN username / password limit (ZeroMQ's) */

/* ------------------------------------------------------------ primitives */

void net_hmac(const void *key, size_t keylen, const void *msg, size_t msglen, uint8_t out[32])
{
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, key, keylen);
    crypto_auth_hmacsha256_update(&st, msg, msglen);
    crypto_auth_hmacsha256_final(&st, out);
    sodium_memzero(&st, sizeof st);
}

static int sodium_ready(void)
{
    return sodium_init() >= 0 ? 0 : KVS_EINTERNAL; /* idempotent, thread-safe */
}

int net_random(void *buf, size_t len)
{
    if (sodium_ready() != 0)
        return KVS_EINTERNAL;
    randombytes_buf(buf, len);
    return 0;
}

/* K = HMAC(secret, "kvsd v1 job key"); then one key per use: HMAC(K, label). */
static void derive(const cfg *c, const char *label, uint8_t out[NET_AUTH_KEY])
{
    uint8_t k[NET_AUTH_KEY];
    static const char job[] = "kvsd v1 job key";
    net_hmac(c->secret, c->secret_len, job, sizeof job - 1, k);
    net_hmac(k, sizeof k, label, strlen(label), out);
    sodium_memzero(k, sizeof k);
}

static void curve_keys(const cfg *c, const char *label, uint8_t pk[32], uint8_t sk[32])
{
    derive(c, label, sk);
    crypto_scalarmult_base(pk, sk);
}

static void hex(const uint8_t *p, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * n] = '\0';
}

/* password for username at target */
static void plain_password(const cfg *c, const char *target, const char *user,
                           char out[2 * 32 + 1])
{
    uint8_t key[NET_AUTH_KEY], mac[32];
    char msg[USER_MAX + 700];
    int n = snprintf(msg, sizeof msg, "%s\n%s", target, user);
    derive(c, "kvsd v1 plain", key);
    net_hmac(key, sizeof key, msg, n < 0 ? 0 : (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1,
             mac);
    hex(mac, sizeof mac, out);
    sodium_memzero(key, sizeof key);
}

/* ------------------------------------------------- polling a ZeroMQ socket */

typedef struct zpoll {
    void *zsock;
    uv_poll_t poll;
    uv_check_t check;
    int open;
    void (*drain)(struct zpoll *);
    void (*closed)(struct zpoll *);
} zpoll;

static void zp_on_poll(uv_poll_t *h, int status, int events)
{
    (void)status;
    (void)events;
    zpoll *z = h->data;
    z->drain(z);
}

static void zp_on_check(uv_check_t *h)
{
    zpoll *z = h->data;
    z->drain(z);
}

static int zp_start(uv_loop_t *loop, zpoll *z)
{
    int fd;
    size_t len = sizeof fd;
    if (zmq_getsockopt(z->zsock, ZMQ_FD, &fd, &len) != 0)
        return KVS_ENET;
    if (uv_poll_init(loop, &z->poll, fd) != 0)
        return KVS_ENET;
    uv_check_init(loop, &z->check);
    z->poll.data = z->check.data = z;
    z->open = 2;
    uv_poll_start(&z->poll, UV_READABLE, zp_on_poll);
    uv_check_start(&z->check, zp_on_check);
    return 0;
}

static void zp_on_closed(uv_handle_t *h)
{
    zpoll *z = h->data;
    if (--z->open == 0)
        z->closed(z);
}

/* Close the socket now and the handles on the loop; z->closed runs after. */
static void zp_stop(zpoll *z)
{
    zmq_close(z->zsock);
    z->zsock = NULL;
    if (z->open == 0) {
        z->closed(z);
        return;
    }
    uv_close((uv_handle_t *)&z->poll, zp_on_closed);
    uv_close((uv_handle_t *)&z->check, zp_on_closed);
}

/* Receive one multipart message into up to max frames (closing extra ones).
 * Returns the number of frames, 0 when nothing is there. */
static int zp_recv(void *zsock, zmq_msg_t *f, int max)
{
    int n = 0, more = 1;
    size_t len = sizeof more;
    while (more) {
        zmq_msg_t tmp, *m = n < max ? &f[n] : &tmp;
        zmq_msg_init(m);
        if (zmq_msg_recv(m, zsock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(m);
            break;
        }
        if (m == &tmp)
            zmq_msg_close(&tmp);
        n++;
        if (zmq_getsockopt(zsock, ZMQ_RCVMORE, &more, &len) != 0)
            more = 0;
    }
    return n;
}

struct net_auth {
    const cfg *c;
    const char *who;
    uv_loop_t *loop;
    void *zctx;
    zpoll zap;
    hmap nonces;
    size_t nnonces;
    char target[700];
    bool have_target;
    uint8_t curve_pk_worker[32], curve_pk_server[32];
    uint64_t accepted, refused;
    bool logged_refusal, logged_full;
};

/* ----------------------------------------------------------- ZAP handler */

static bool take_nonce(net_auth *a, const uint8_t nonce[NET_AUTH_NONCE])
{
    uint64_t k, v;
    memcpy(&k, nonce, 8);
    memcpy(&v, nonce + 8, 8);
    v |= 1; /* never NULL */
    if (hmap_get(&a->nonces, k) != NULL)
        return false; /* seen (or a 2^-64 collision): refuse */
    if (a->nnonces >= NONCE_MAX) {
        if (!a->logged_full)
            LOG(LOG_ERROR, a->who, "auth", "%u proofs accepted: refusing more", NONCE_MAX);
        a->logged_full = true;
        return false;
    }
    if (hmap_put(&a->nonces, k, (void *)(uintptr_t)v) != 0)
        return false;
    a->nnonces++;
    return true;
}

static int unhex(const char *s, size_t n, uint8_t *out)
{
    for (size_t i = 0; i < n; i++) {
        int v = 0;
        for (int j = 0; j < 2; j++) {
            char ch = s[2 * i + (size_t)j];
            int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
            if (d < 0)
                return -1;
            v = v * 16 + d;
        }
        out[i] = (uint8_t)v;
    }
    return 0;
}

/* Check a PLAIN proof; on success write the identity into user. */
static const char *check_plain(net_auth *a, zmq_msg_t *uf, zmq_msg_t *pf, char *user,
                               size_t userlen)
{
    char name[USER_MAX + 1], role[16], nonce_hex[2 * NET_AUTH_NONCE + 2], want[65], end;
    uint8_t nonce[NET_AUTH_NONCE];
    int id;
    size_t un = zmq_msg_size(uf), pn = zmq_msg_size(pf);
    if (!a->have_target)
        return "not ready";
    if (un == 0 || un > USER_MAX || pn != 64)
        return "malformed credentials";
    memcpy(name, zmq_msg_data(uf), un);
    name[un] = '\0';
    if (strlen(name) != un ||
        sscanf(name, "kvs1 %15s %d %33s%c", role, &id, nonce_hex, &end) != 3 ||
        (strcmp(role, "worker") != 0 && strcmp(role, "server") != 0) || id < -1 ||
        strlen(nonce_hex) != 2 * NET_AUTH_NONCE || unhex(nonce_hex, NET_AUTH_NONCE, nonce))
        return "malformed credentials";
    plain_password(a->c, a->target, name, want);
    if (sodium_memcmp(want, zmq_msg_data(pf), 64) != 0)
        return "wrong proof of the job secret";
    if (!take_nonce(a, nonce))
        return "replayed proof";
    snprintf(user, userlen, "%s %d", role, id);
    return NULL;
}

static const char *check_curve(net_auth *a, zmq_msg_t *kf, char *user, size_t userlen)
{
    if (zmq_msg_size(kf) != 32)
        return "malformed credentials";
    if (a->c->curve_files) { /* KVS_CURVE_AUTHORIZED */
        for (int i = 0; i < a->c->curve_nauth; i++)
            if (sodium_memcmp(zmq_msg_data(kf), a->c->curve_auth_pk[i], 32) == 0) {
                snprintf(user, userlen, "%s -1", cfg_role_name(a->c->curve_auth_role[i]));
                return NULL;
            }
        return "client key not in KVS_CURVE_AUTHORIZED";
    }
    if (sodium_memcmp(zmq_msg_data(kf), a->curve_pk_worker, 32) == 0)
        snprintf(user, userlen, "worker -1");
    else if (sodium_memcmp(zmq_msg_data(kf), a->curve_pk_server, 32) == 0)
        snprintf(user, userlen, "server -1");
    else
        return "unknown client key";
    return NULL;
}

static void zap_reply(void *zsock, zmq_msg_t *reqid, const char *code, const char *text,
                      const char *user)
{
    zmq_send(zsock, "1.0", 3, ZMQ_SNDMORE);
    zmq_send(zsock, zmq_msg_data(reqid), zmq_msg_size(reqid), ZMQ_SNDMORE);
    zmq_send(zsock, code, 3, ZMQ_SNDMORE);
    zmq_send(zsock, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(zsock, user, strlen(user), ZMQ_SNDMORE);
    zmq_send(zsock, "", 0, 0);
}

static void zap_drain(zpoll *z)
{
    net_auth *a = (net_auth *)((char *)z - offsetof(net_auth, zap));
    zmq_msg_t f[8];
    int n;
    while (z->zsock && (n = zp_recv(z->zsock, f, 8)) > 0) {
        /* version, request id, domain, address, routing id, mechanism, credentials... */
        char user[64] = "", mech[16] = "", addr[64] = "";
        const char *why = NULL;
        if (n < 6) {
            why = "malformed ZAP request";
        } else {
            size_t ml = zmq_msg_size(&f[5]), al = zmq_msg_size(&f[3]);
            snprintf(mech, sizeof mech, "%.*s", (int)(ml < 15 ? ml : 15),
                     (const char *)zmq_msg_data(&f[5]));
            snprintf(addr, sizeof addr, "%.*s", (int)(al < 63 ? al : 63),
                     (const char *)zmq_msg_data(&f[3]));
            if (a->c->security == CFG_SEC_AUTH && !strcmp(mech, "PLAIN") && n == 8)
                why = check_plain(a, &f[6], &f[7], user, sizeof user);
            else if (a->c->security == CFG_SEC_CURVE && !strcmp(mech, "CURVE") && n == 7)
                why = check_curve(a, &f[6], user, sizeof user);
            else
                why = "wrong security mechanism";
        }
        if (n >= 2) {
            if (why == NULL) {
                a->accepted++;
                zap_reply(z->zsock, &f[1], "200", "OK", user);
                LOG(LOG_DEBUG, a->who, "auth", "%s proved the job secret as %s", addr, user);
            } else {
                a->refused++;
                zap_reply(z->zsock, &f[1], "400", why, "");
                /* one line at WARN, the rest at INFO: a flood stays a flood of nothing */
                LOG(a->logged_refusal ? LOG_INFO : LOG_WARN, a->who, "auth",
                    "refused a connection from %s (%s): %s (%llu refused so far)", addr, mech,
                    why, (unsigned long long)a->refused);
                a->logged_refusal = true;
            }
        }
        for (int i = 0; i < n && i < 8; i++)
            zmq_msg_close(&f[i]);
    }
}

static void zap_closed(zpoll *z)
{
    net_auth *a = (net_auth *)((char *)z - offsetof(net_auth, zap));
    hmap_fini(&a->nonces);
    free(a);
}

int net_auth_new(uv_loop_t *loop, void *zctx, const cfg *c, const char *who, net_auth **out)
{
    net_auth *a = calloc(1, sizeof *a);
    *out = NULL;
    if (a == NULL)
        return KVS_ENOMEM;
    a->c = c;
    a->who = who;
    a->loop = loop;
    a->zctx = zctx;
    hmap_init(&a->nonces);
    a->zap.drain = zap_drain;
    a->zap.closed = zap_closed;
    if (c->security != CFG_SEC_NONE) {
        uint8_t sk[32];
        if (sodium_ready() != 0) {
            free(a);
            return KVS_EINTERNAL;
        }
        curve_keys(c, "kvsd v1 curve client worker", a->curve_pk_worker, sk);
        curve_keys(c, "kvsd v1 curve client server", a->curve_pk_server, sk);
        sodium_memzero(sk, sizeof sk);
        a->zap.zsock = zmq_socket(zctx, ZMQ_REP);
        if (a->zap.zsock == NULL || zmq_bind(a->zap.zsock, ZAP_ENDPOINT) != 0 ||
            zp_start(loop, &a->zap) != 0) {
            LOG(LOG_ERROR, who, "auth", "cannot start the ZAP handler: %s",
                zmq_strerror(zmq_errno()));
            if (a->zap.zsock)
                zmq_close(a->zap.zsock);
            free(a);
            return KVS_ENET;
        }
    }
    *out = a;
    return 0;
}

int net_auth_listen(net_auth *a, void *zsock, const char *target)
{
    int ms = (int)(a->c->handshake_timeout_s * 1000), one = 1;
    if (zmq_setsockopt(zsock, ZMQ_HANDSHAKE_IVL, &ms, sizeof ms) != 0)
        return KVS_ENET;
    if (target)
        net_auth_set_target(a, target);
    if (a->c->security == CFG_SEC_AUTH) {
        if (zmq_setsockopt(zsock, ZMQ_PLAIN_SERVER, &one, sizeof one) != 0)
            return KVS_ENET;
    } else if (a->c->security == CFG_SEC_CURVE) {
        uint8_t pk[32], sk[32];
        if (a->c->curve_files)
            memcpy(sk, a->c->curve_server_sk, 32); /* checked at start-up (cfg_load) */
        else
            curve_keys(a->c, "kvsd v1 curve server", pk, sk);
        int rc = zmq_setsockopt(zsock, ZMQ_CURVE_SERVER, &one, sizeof one) |
                 zmq_setsockopt(zsock, ZMQ_CURVE_SECRETKEY, sk, 32);
        sodium_memzero(sk, sizeof sk);
        if (rc != 0) {
            LOG(LOG_ERROR, a->who, "auth", "cannot enable CURVE: %s (libzmq without CURVE?)",
                zmq_strerror(zmq_errno()));
            return KVS_ENET;
        }
    }
    /* A ZAP domain in every mode, also without security (where no ZAP
     * handler answers and the NULL mechanism goes on without one): libzmq
     * then refuses ZMTP 1.0/2.0 greetings.  kvsd never speaks them, and
     * libzmq 4.3.4 aborts (zmtp_engine.cpp:446, an unchecked push of a
     * legacy peer's routing id) when such a peer's connection meets a full
     * or closing pipe: seen under blast_2x2's flood of raw greetings. */
    if (zmq_setsockopt(zsock, ZMQ_ZAP_DOMAIN, "kvsd", 4) != 0)
        return KVS_ENET;
    /* Open jobs: no receive high-water mark on a listening socket.  When a
     * connection's queue is full libzmq stops reading it; if the peer then
     * resets the connection and its unread input holds a PING, libzmq
     * 4.3.4 answers that PING on a dead connection and aborts
     * (stream_engine_base.cpp:331, `!_io_error`): anyone who can reach an
     * open job's port could kill it with a stream of empty frames.  Without
     * a mark, input never stops and the loop drains what an outsider
     * sends as fast as it comes (no answer to an unidentified connection's
     * garbage, rate-limited warnings).  With a secret only peers that
     * proved it get a queue, and the mark stays. */
    if (a->c->security == CFG_SEC_NONE) {
        int zero = 0;
        if (zmq_setsockopt(zsock, ZMQ_RCVHWM, &zero, sizeof zero) != 0)
            return KVS_ENET;
    }
    return 0;
}

void net_auth_set_target(net_auth *a, const char *target)
{
    snprintf(a->target, sizeof a->target, "%s", target);
    a->have_target = true;
}

void net_auth_free(net_auth *a)
{
    if (a == NULL)
        return;
    if (a->zap.zsock) {
        zp_stop(&a->zap); /* frees a once the handles closed */
    } else {
        hmap_fini(&a->nonces);
        free(a);
    }
}

uint64_t net_auth_accepted(const net_auth *a)
{
    return a ? a->accepted : 0;
}

uint64_t net_auth_refused(const net_auth *a)
{
    return a ? a->refused : 0;
}

/* ------------------------------------------------------------ client side */

int net_auth_connect(const cfg *c, void *zsock, const char *role, int node_id,
                     const char *target, char *why, size_t whylen)
{
    if (c->security == CFG_SEC_NONE)
        return 0;
    if (sodium_ready() != 0) {
        snprintf(why, whylen, "libsodium failed to initialise");
        return KVS_EINTERNAL;
    }
    if (c->security == CFG_SEC_AUTH) {
        uint8_t nonce[NET_AUTH_NONCE];
        char nh[2 * NET_AUTH_NONCE + 1], user[USER_MAX], pass[65];
        randombytes_buf(nonce, sizeof nonce);
        hex(nonce, sizeof nonce, nh);
        snprintf(user, sizeof user, "kvs1 %s %d %s", role, node_id, nh);
        plain_password(c, target, user, pass);
        int rc = zmq_setsockopt(zsock, ZMQ_PLAIN_USERNAME, user, strlen(user)) |
                 zmq_setsockopt(zsock, ZMQ_PLAIN_PASSWORD, pass, 64);
        sodium_memzero(pass, sizeof pass);
        if (rc != 0) {
            snprintf(why, whylen, "cannot set PLAIN credentials: %s", zmq_strerror(zmq_errno()));
            return KVS_ENET;
        }
        return 0;
    }
    uint8_t spk[32], ssk[32], pk[32], sk[32];
    char label[64];
    if (c->curve_files) {
        if (!c->curve_client_set) {
            snprintf(why, whylen, "KVS_CURVE_CLIENT_KEY is not set: this node needs its own "
                     "key pair to connect");
            return KVS_ECONFIG;
        }
        memcpy(spk, c->curve_server_pk, 32);
        memcpy(pk, c->curve_client_pk, 32);
        memcpy(sk, c->curve_client_sk, 32);
    } else {
        curve_keys(c, "kvsd v1 curve server", spk, ssk);
        sodium_memzero(ssk, sizeof ssk);
        snprintf(label, sizeof label, "kvsd v1 curve client %s", role);
        curve_keys(c, label, pk, sk);
    }
    int rc = zmq_setsockopt(zsock, ZMQ_CURVE_SERVERKEY, spk, 32) |
             zmq_setsockopt(zsock, ZMQ_CURVE_PUBLICKEY, pk, 32) |
             zmq_setsockopt(zsock, ZMQ_CURVE_SECRETKEY, sk, 32);
    sodium_memzero(sk, sizeof sk);
    if (rc != 0) {
        snprintf(why, whylen, "cannot enable CURVE: %s (libzmq without CURVE?)",
                 zmq_strerror(zmq_errno()));
        return KVS_ENET;
    }
    return 0;
}

const char *net_auth_peer(zmq_msg_t *f)
{
    const char *u = zmq_msg_gets(f, "User-Id");
    return u && u[0] ? u : NULL;
}

bool net_auth_peer_is(const char *peer, const char *role, int node_id)
{
    char r[16], end;
    int id;
    if (peer == NULL || sscanf(peer, "%15s %d%c", r, &id, &end) != 2)
        return false;
    return strcmp(r, role) == 0 && (id == node_id || id == -1);
}

void net_raise_nofile(const char *who)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max)
        return;
    rlim_t old = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
        LOG(LOG_INFO, who, "net", "descriptor limit raised from %llu to %llu",
            (unsigned long long)old, (unsigned long long)rl.rlim_max);
}
