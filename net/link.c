/* link.c - see link.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "net/auth.h"
#include "net/link.h"
#include "net/live.h"

#define LINK_NOTE_MS 10000 /* a line this often while waiting to register */
#define LINK_GONE_MS 300   /* after the connection closed: let a SHUTDOWN in flight arrive */

struct net_link {
    net_sock *sock;
    net_mon *mon;      /* the connection's events: a refused proof, a closed connection
                        * (a dead scheduler) */
    uint64_t gone_ms;  /* when the connection closed (0: it has not) */
    uv_timer_t timer;
    const char *who;
    net_link_cbs cbs;
    void *arg;
    int node_id;
    bool registered;
    bool failed;
    uint64_t start_ms;
    uint64_t last_ack_ms;
    uint64_t interval_ms;
    uint64_t timeout_ms;
    uint64_t start_timeout_ms;
    uint64_t max_message;
    uint64_t next_note_ms; /* next "still waiting for the scheduler" line */
    char root[CFG_HOST_MAX + 32];
    char *reg_body;    /* our REGISTER body: a rejoin sends it again */
    uint64_t job_id;   /* from REGISTER_ACK */
    /* KVS_SCHEDULER_GRACE: the scheduler is gone and we go on without it
     * (orphan), since orphan_ms, at most grace_ms, waiting for a restarted
     * one to take our rejoin */
    uint64_t grace_ms;
    bool orphan;
    uint64_t orphan_ms, next_rejoin_ms;
    char orphan_why[400];
};

static void link_fail(net_link *l, int err, const char *why)
{
    if (l->failed)
        return;
    l->failed = true;
    uv_timer_stop(&l->timer);
    l->cbs.on_fail(l->arg, err, why);
}

static void on_mon(void *arg, int event, int value, const char *addr);
static void on_timer(uv_timer_t *t);

/* Our rejoin: the REGISTER body again, with who we were and what the
 * node adds (link.h rejoin_extra). */
static void send_rejoin(net_link *l)
{
    size_t cap = (l->reg_body ? strlen(l->reg_body) : 0) + (1u << 20); /* (a server's left=) */
    char *body = malloc(cap);
    if (body == NULL)
        return; /* the next tick tries again */
    int n = snprintf(body, cap, "%s rejoin=%d job=%llx", l->reg_body ? l->reg_body : "", l->node_id,
                     (unsigned long long)l->job_id);
    if (l->cbs.rejoin_extra && n > 0 && (size_t)n < cap)
        l->cbs.rejoin_extra(l->arg, body + n, cap - (size_t)n);
    proto_hdr h = {.type = PROTO_REGISTER};
    net_link_send(l, &h, body);
    free(body);
}

/* The scheduler is gone (why): with KVS_SCHEDULER_GRACE go on without it
 * and wait for a restarted one; without, fail. */
static void scheduler_lost(net_link *l, const char *why)
{
    if (l->grace_ms == 0) {
        link_fail(l, KVS_EPEERDEAD, why);
        return;
    }
    uint64_t now = clock_ms();
    l->orphan = true;
    l->orphan_ms = now;
    l->next_rejoin_ms = now + l->interval_ms;
    snprintf(l->orphan_why, sizeof l->orphan_why, "%s", why);
    LOG(LOG_WARN, l->who, "net", "%s; going on without it for up to %.1f s "
        "(KVS_SCHEDULER_GRACE), waiting for a scheduler restarted at %s", why,
        (double)l->grace_ms / 1000.0, l->root);
    /* ZeroMQ connects again by itself; what it queued meanwhile goes to the
     * next scheduler, which drops all but a rejoin until every node is back */
    send_rejoin(l);
}

/* Without a scheduler: rejoin now and then, and fail when the grace ends. */
static void orphan_tick(net_link *l, uint64_t now)
{
    char why[1024];
    if (now - l->orphan_ms >= l->grace_ms) {
        snprintf(why, sizeof why, "%s, and no scheduler took us back within %.1f s "
                 "(KVS_SCHEDULER_GRACE)", l->orphan_why, (double)l->grace_ms / 1000.0);
        link_fail(l, KVS_EPEERDEAD, why);
    } else if (now >= l->next_rejoin_ms) {
        /* as often as heartbeats: a restarted scheduler gives up on a node
         * silent for PS_HEARTBEAT_TIMEOUT; it takes the first, ignores repeats */
        l->next_rejoin_ms = now + l->interval_ms;
        send_rejoin(l);
    }
}

/* The restarted scheduler's answer to our rejoin (h: REGISTER_ACK). */
static void rejoined(net_link *l, const proto_hdr *h)
{
    char why[600];
    if (h->key != (uint64_t)l->node_id || h->round != l->job_id) {
        snprintf(why, sizeof why, "the scheduler at %s took our rejoin as node %llu of job "
                 "%llx; we are node %d of job %llx", l->root, (unsigned long long)h->key,
                 (unsigned long long)h->round, l->node_id, (unsigned long long)l->job_id);
        link_fail(l, KVS_EPROTO, why);
        return;
    }
    uint64_t now = clock_ms();
    LOG(LOG_WARN, l->who, "net", "back with the scheduler restarted at %s after %.1f s "
        "without one", l->root, (double)(now - l->orphan_ms) / 1000.0);
    l->orphan = false;
    l->gone_ms = 0;
    l->last_ack_ms = now;
    uv_timer_stop(&l->timer);
    uv_timer_start(&l->timer, on_timer, l->interval_ms, l->interval_ms);
    if (l->cbs.on_rejoin)
        l->cbs.on_rejoin(l->arg);
}

static void on_link_event(void *arg, int event, int value, const char *addr)
{
    char why[400];
    if (event == ZMQ_EVENT_DISCONNECTED) {
        on_mon(arg, event, value, addr);
        return;
    }
    if (event != ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
        return;
    snprintf(why, sizeof why, "the scheduler refused our proof of the job secret (status %d): "
             "bad secret? every node needs the job's KVS_SECRET_FILE (with CURVE key files: "
             "is our KVS_CURVE_CLIENT_KEY in its KVS_CURVE_AUTHORIZED?)", value);
    link_fail(arg, KVS_EAUTH, why);
}

static void on_timer(uv_timer_t *t)
{
    net_link *l = t->data;
    uint64_t now = clock_ms();
    char why[1024];
    if (!l->registered) {
        if (now - l->start_ms >= l->start_timeout_ms) {
            snprintf(why, sizeof why,
                     "could not register with the scheduler at %s within %.1f s "
                     "(KVS_START_TIMEOUT): is it running, and are DMLC_PS_ROOT_URI/"
                     "DMLC_PS_ROOT_PORT right?",
                     l->root, (double)l->start_timeout_ms / 1000.0);
            link_fail(l, KVS_ETIMEDOUT, why);
        } else if (now >= l->next_note_ms) {
            /* at the default verbosity: a silent wait looks like a hang */
            LOG(LOG_WARN, l->who, "net", "still waiting for the scheduler at %s: %.0f s of "
                "KVS_START_TIMEOUT=%.0f s", l->root, (double)(now - l->start_ms) / 1000.0,
                (double)l->start_timeout_ms / 1000.0);
            l->next_note_ms += LINK_NOTE_MS;
        }
        return;
    }
    if (l->orphan) {
        orphan_tick(l, now);
        return;
    }
    if (l->gone_ms && now - l->gone_ms >= LINK_GONE_MS) {
        uint64_t quiet = now - l->last_ack_ms;
        if (quiet + 500 >= l->timeout_ms)
            snprintf(why, sizeof why, "scheduler at %s silent for %.1f s (PS_HEARTBEAT_TIMEOUT)",
                     l->root, (double)quiet / 1000.0);
        else
            snprintf(why, sizeof why, "the scheduler at %s closed the connection: it exited or "
                     "crashed, or the connection was reset", l->root);
        scheduler_lost(l, why);
        return;
    }
    if (now - l->last_ack_ms > l->timeout_ms) {
        snprintf(why, sizeof why, "scheduler at %s silent for %.1f s (PS_HEARTBEAT_TIMEOUT)",
                 l->root, (double)(now - l->last_ack_ms) / 1000.0);
        scheduler_lost(l, why);
        return;
    }
    proto_hdr h = {.type = PROTO_HEARTBEAT};
    net_link_send(l, &h, NULL);
}

/* The connection to the scheduler closed: fail soon (see LINK_GONE_MS). */
static void on_mon(void *arg, int event, int value, const char *addr)
{
    net_link *l = arg;
    (void)value;
    (void)addr;
    if (event != ZMQ_EVENT_DISCONNECTED || !l->registered || l->failed || l->gone_ms ||
        l->orphan)
        return;
    l->gone_ms = clock_ms();
    uv_timer_start(&l->timer, on_timer, LINK_GONE_MS, l->interval_ms);
}

static void on_recv(net_sock *s, net_msg *m, void *arg)
{
    net_link *l = arg;
    proto_hdr h;
    char why[256];
    proto_limits lim = {l->max_message};
    (void)s;
    zmq_msg_t *body;
    if (net_msg_decode(m, false, &lim, &h, &body, why, sizeof why) != 0) {
        LOG(LOG_WARN, l->who, "net", "dropped message from the scheduler: %s", why);
        return;
    }
    if (h.sender != PROTO_SCHEDULER_ID) {
        LOG(LOG_WARN, l->who, "net", "dropped %s claiming sender %d on the scheduler link",
            proto_type_name(h.type), h.sender);
        return;
    }
    if (h.type == PROTO_REGISTER_ACK && l->orphan) {
        rejoined(l, &h);
        return;
    }
    if (h.type == PROTO_REGISTER_ACK && !l->registered)
        l->job_id = h.round;
    l->last_ack_ms = clock_ms();
    if (h.type == PROTO_HEARTBEAT_ACK)
        return;
    if (h.type == PROTO_SHUTDOWN) {
        /* the job is over: the connection closing next is no failure */
        l->failed = true;
        uv_timer_stop(&l->timer);
    }
    l->cbs.on_msg(l->arg, &h, body ? zmq_msg_data(body) : NULL, h.body_len);
}

int net_link_new(uv_loop_t *loop, void *zctx, const cfg *c, int role, const char *host,
                 const char *endpoint, int pref_rank, const char *extra, const char *who,
                 const net_link_cbs *cbs, void *arg, net_link **out)
{
    net_link *l = calloc(1, sizeof *l);
    char ident[128], addr[CFG_HOST_MAX + 32], body[1000];
    int rc;
    if (l == NULL)
        return KVS_ENOMEM;
    l->who = who;
    l->cbs = *cbs;
    l->arg = arg;
    l->interval_ms = (uint64_t)(c->hb_interval_s * 1000);
    if (l->interval_ms == 0)
        l->interval_ms = 1;
    l->timeout_ms = (uint64_t)(c->hb_timeout_s * 1000);
    l->start_timeout_ms = (uint64_t)(c->start_timeout_s * 1000);
    l->max_message = c->max_message;
    l->grace_ms = (uint64_t)(c->sched_grace_s * 1000);
    rc = net_sock_new(loop, zctx, ZMQ_DEALER, c->water_mark, on_recv, l, &l->sock);
    if (rc) {
        free(l);
        return rc;
    }
    net_sock_set_max(l->sock, PROTO_TEXT_MAX); /* the node table */
    /* A routing id unique in the job and unguessable: role, pid, random tag. */
    uint8_t tag[8] = {0};
    char why[256] = "cannot watch the connection (ZeroMQ monitor)";
    net_random(tag, sizeof tag);
    snprintf(ident, sizeof ident, "%s-%d-%02x%02x%02x%02x%02x%02x%02x%02x", cfg_role_name(role),
             (int)getpid(), tag[0], tag[1], tag[2], tag[3], tag[4], tag[5], tag[6], tag[7]);
    zmq_setsockopt(net_sock_zmq(l->sock), ZMQ_ROUTING_ID, ident, strlen(ident));
    net_live_low_delay(net_sock_zmq(l->sock)); /* heartbeats pass bulk data in the qdisc */
    net_live_heartbeats(net_sock_zmq(l->sock), c);
    snprintf(addr, sizeof addr, "tcp://%s:%d", c->root_uri, c->root_port);
    snprintf(l->root, sizeof l->root, "%s", addr);
    rc = net_auth_connect(c, net_sock_zmq(l->sock), cfg_role_name(role), -1, "scheduler", why,
                          sizeof why);
    /* one monitor per socket (ZeroMQ keeps only the last): a refused proof,
     * and a closed connection, which is a dead scheduler once registered */
    if (rc == 0 &&
        net_mon_new(loop, zctx, net_sock_zmq(l->sock),
                    ZMQ_EVENT_DISCONNECTED |
                        (c->security != CFG_SEC_NONE ? NET_AUTH_CLIENT_EVENTS : 0),
                    on_link_event, l, &l->mon) != 0) {
        l->mon = NULL; /* without: a dead scheduler is found by the heartbeat timeout */
        if (c->security != CFG_SEC_NONE)
            rc = KVS_ENET;
    }
    if (rc != 0) {
        LOG(LOG_ERROR, who, "auth", "cannot prepare the connection to the scheduler: %s", why);
        net_sock_free(l->sock);
        free(l);
        return rc;
    }
    if (zmq_connect(net_sock_zmq(l->sock), addr) != 0) {
        LOG(LOG_ERROR, who, "net", "cannot connect to the scheduler at %s: %s", addr,
            zmq_strerror(zmq_errno()));
        net_mon_free(l->mon);
        net_sock_free(l->sock);
        free(l);
        return KVS_ENET;
    }
    net_sock_start(l->sock);
    uv_timer_init(loop, &l->timer);
    l->timer.data = l;
    l->start_ms = clock_ms();
    l->next_note_ms = l->start_ms + LINK_NOTE_MS;
    uint64_t tick = l->interval_ms < 200 ? l->interval_ms : 200;
    uv_timer_start(&l->timer, on_timer, tick, tick);
    snprintf(body, sizeof body, "role=%s endpoint=%s rank=%d host=%s servers=%d workers=%d%s%s",
             cfg_role_name(role), endpoint, pref_rank, host, c->num_server, c->num_worker,
             extra ? " " : "", extra ? extra : "");
    l->reg_body = strdup(body); /* NULL: a rejoin sends the fields it must have */
    proto_hdr h = {.type = PROTO_REGISTER};
    net_link_send(l, &h, body);
    *out = l;
    return 0;
}

void net_link_registered(net_link *l, int node_id)
{
    l->node_id = node_id;
    l->registered = true;
    l->last_ack_ms = clock_ms();
    uv_timer_stop(&l->timer);
    uv_timer_start(&l->timer, on_timer, l->interval_ms, l->interval_ms);
}

bool net_link_gone(const net_link *l)
{
    return l->gone_ms != 0 && l->grace_ms == 0;
}

double net_link_orphan_s(const net_link *l)
{
    if (l == NULL || !l->orphan)
        return -1;
    return (double)(clock_ms() - l->orphan_ms) / 1000.0;
}

int net_link_send(net_link *l, proto_hdr *h, const char *text)
{
    h->sender = l->node_id;
    return net_send_text(l->sock, NULL, 0, h, text);
}

static void on_timer_closed(uv_handle_t *h)
{
    free(h->data);
}

void net_link_free(net_link *l)
{
    if (l == NULL)
        return;
    net_mon_free(l->mon);
    net_sock_free(l->sock);
    free(l->reg_body);
    uv_timer_stop(&l->timer);
    uv_close((uv_handle_t *)&l->timer, on_timer_closed);
}

double net_link_silence_s(const net_link *l)
{
    if (l == NULL || !l->registered)
        return -1;
    return (double)(clock_ms() - l->last_ack_ms) / 1000.0;
}
