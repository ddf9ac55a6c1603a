/* io_hello.c - libkvs's I/O thread: the handshake (io_int.h): registration
 * with the scheduler, the connections to the servers and their HELLO, the
 * scheduler's messages, lost connections. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/datapath.h"
#include "common/err.h"
#include "common/log.h"
#include "common/sizes.h"
#include "net/auth.h"
#include "net/live.h"
#include "worker/elastic.h"
#include "worker/failover.h"
#include "worker/metrics.h"
#include "worker/io_int.h"
#include "worker/group.h"
#include "worker/op.h"
#include "worker/wrk_int.h"

/* The data connection to server r is gone (or never came up): fail the job
 * here at once, and tell the scheduler, which tells every node which two
 * ends lost each other. */
static void server_lost(kvs_store *s, int r, const char *why)
{
    char text[700];
    pthread_mutex_lock(&s->mu);
    bool quiet = s->fatal != 0 || s->stop;
    pthread_mutex_unlock(&s->mu);
    if (quiet || s->leaving || s->io_failed || net_link_gone(s->link)) {
        /* (a dead scheduler: servers exit, and the link says why) */
        wrk_io_server_gone(s, r);
        return;
    }
    snprintf(text, sizeof text, "%s lost its connection to server %d at %s: %s", s->who, r,
             s->server_ep[r], why);
    double orphan = net_link_orphan_s(s->link);
    if (orphan >= 0) /* every node's grace ends at about the same time */
        snprintf(text + strlen(text), sizeof text - strlen(text), "; the scheduler has been "
                 "gone for %.1f s: no scheduler took the job back within KVS_SCHEDULER_GRACE="
                 "%g s, or server %d died meanwhile", orphan, s->c.sched_grace_s, r);
    proto_hdr h = {.type = PROTO_PEER_LOST, .key = (uint64_t)proto_server_id(r)};
    net_link_send(s->link, &h, why);
    if (wrk_fo_survives(s, r)) { /* replicated: the scheduler moves its keys, or fails */
        LOG(LOG_WARN, s->who, "net", "%s; waiting for the scheduler", text);
        return;
    }
    wrk_io_fail(s, KVS_EPEERDEAD, text, r, false);
}

typedef struct mon_arg {
    kvs_store *s;
    int r;
} mon_arg;

static void on_server_event(void *arg, int event, int value, const char *addr)
{
    kvs_store *s = ((mon_arg *)arg)->s;
    int r = ((mon_arg *)arg)->r;
    (void)value;
    (void)addr;
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
        char why[320];
        snprintf(why, sizeof why, "server %d refused our proof of the job secret (status %d): "
                 "bad secret? every node needs the job's KVS_SECRET_FILE (with CURVE key "
                 "files: is our KVS_CURVE_CLIENT_KEY in its KVS_CURVE_AUTHORIZED?)", r, value);
        wrk_io_fail_all(s, KVS_EAUTH, why);
    } else if (event == ZMQ_EVENT_CONNECTED) {
        s->connected[r] = true;
    } else if (event == ZMQ_EVENT_DISCONNECTED) {
        char why[160];
        snprintf(why, sizeof why, "the connection closed (the server exited, the connection "
                 "was reset, or no traffic for PS_HEARTBEAT_TIMEOUT=%g s)", s->c.hb_timeout_s);
        server_lost(s, r, why);
    }
}

static void on_connect_deadline(uv_timer_t *t)
{
    kvs_store *s = t->data;
    char why[160];
    for (int r = 0; s->servers && r < s->c.num_server; r++) {
        if (s->servers[r] && !s->connected[r]) {
            snprintf(why, sizeof why, "no connection within PS_HEARTBEAT_TIMEOUT=%g s",
                     s->c.hb_timeout_s);
            server_lost(s, r, why);
            return;
        }
    }
}

static void on_registered(kvs_store *s, const proto_hdr *h, const char *body, size_t len)
{
    proto_node *nodes = NULL;
    char why[256], ident[32];
    int n, rc = 0;
    int slots = cfg_worker_slots(&s->c);
    if (h->key < 9 || h->key % 2 == 0 || (h->key - 9) / 2 >= (uint64_t)slots) {
        wrk_io_fail_all(s, KVS_EPROTO, "the scheduler assigned an invalid node id");
        return;
    }
    nodes = calloc((size_t)(s->c.num_server + slots), sizeof *nodes);
    s->servers = calloc((size_t)s->c.num_server, sizeof *s->servers);
    s->mons = calloc((size_t)s->c.num_server, sizeof *s->mons);
    s->connected = calloc((size_t)s->c.num_server, sizeof *s->connected);
    s->server_ep = calloc((size_t)s->c.num_server, sizeof *s->server_ep);
    s->mon_args = calloc((size_t)s->c.num_server, sizeof *s->mon_args);
    if (nodes == NULL || s->servers == NULL || s->mons == NULL || s->connected == NULL ||
        s->server_ep == NULL || s->mon_args == NULL) {
        free(nodes);
        wrk_io_fail_all(s, KVS_ENOMEM, "out of memory");
        return;
    }
    n = proto_parse_nodes(body ? body : "", len, nodes, s->c.num_server + slots, why,
                          sizeof why);
    if (n < 0) {
        free(nodes);
        wrk_io_fail_all(s, KVS_EPROTO, why);
        return;
    }
    s->node_id = (int)h->key;
    s->rank = (s->node_id - 9) / 2;
    snprintf(s->who, sizeof s->who, "worker %d", s->rank);
    if ((rc = wrk_grp_table(s, nodes, n, h->round, why, sizeof why)) != 0) {
        free(nodes);
        wrk_io_fail_all(s, rc, why);
        return;
    }
    /* "w<node id>-<random>": the server checks the prefix; nobody can take
     * the connection id before us */
    uint8_t tag[8] = {0};
    net_random(tag, sizeof tag);
    snprintf(ident, sizeof ident, "w%d-%02x%02x%02x%02x%02x%02x%02x%02x", s->node_id, tag[0],
             tag[1], tag[2], tag[3], tag[4], tag[5], tag[6], tag[7]);

    for (int i = 0; i < n && rc == 0; i++) {
        if (nodes[i].role != CFG_ROLE_SERVER)
            continue;
        int r = (nodes[i].id - 8) / 2;
        if (nodes[i].id < 8 || nodes[i].id % 2 || r >= s->c.num_server || s->servers[r]) {
            rc = KVS_EPROTO;
            break;
        }
        net_sock *sock;
        rc = net_sock_new(&s->loop, s->zctx, ZMQ_DEALER, s->c.water_mark, wrk_io_on_server, s,
                          &sock);
        if (rc)
            break;
        net_sock_set_max(sock, s->c.max_message);
        net_sock_set_split(sock, DP_FRAME_MAX); /* what a server's data socket accepts */
        zmq_setsockopt(net_sock_zmq(sock), ZMQ_ROUTING_ID, ident, strlen(ident));
        net_live_heartbeats(net_sock_zmq(sock), &s->c);
        s->servers[r] = sock;
        rc = net_auth_connect(&s->c, net_sock_zmq(sock), "worker", s->node_id,
                              nodes[i].endpoint, why, sizeof why);
        if (rc != 0) {
            free(nodes);
            wrk_io_fail_all(s, rc, why);
            return;
        }
        net_live_heartbeats(net_sock_zmq(sock), &s->c);
        s->mon_args[r] = (mon_arg){s, r};
        snprintf(s->server_ep[r], sizeof s->server_ep[r], "%s", nodes[i].endpoint);
        if (net_mon_new(&s->loop, s->zctx, net_sock_zmq(sock),
                        ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED |
                            ZMQ_EVENT_HANDSHAKE_FAILED_AUTH, on_server_event,
                        &s->mon_args[r], &s->mons[r]) != 0)
            s->connected[r] = true; /* no monitor: heartbeats to the scheduler only */
        if (zmq_connect(net_sock_zmq(sock), nodes[i].endpoint) != 0) {
            snprintf(why, sizeof why, "cannot connect to server %d at %s: %s", r,
                     nodes[i].endpoint, zmq_strerror(zmq_errno()));
            free(nodes);
            wrk_io_fail_all(s, KVS_ENET, why);
            return;
        }
        net_sock_start(sock);
        wrk_met_watch(s, sock, r); /* before the first message: every byte is counted */
        /* first message on the connection: the server binds it to us, and
         * its connection guard never closes it (even if we stay idle) */
        wrk_met_watch(s, sock, r); /* before the first send: metrics count it */
        proto_hdr ann = {.type = PROTO_ANNOUNCE, .sender = s->node_id};
        net_send(sock, NULL, 0, &ann, NULL);
        LOG(LOG_INFO, s->who, "net", "server %d is at %s", r, nodes[i].endpoint);
    }
    free(nodes);
    for (int r = 0; r < s->c.num_server && rc == 0; r++)
        if (s->servers[r] == NULL)
            rc = KVS_EPROTO;
    /* the members of a local group send at the same time: each its share */
    if (rc == 0)
        s->pacer = net_pacer_new(s->c.link_gbps, s->c.num_server, s->local_size, s->who,
                                 "server");
    if (rc) {
        wrk_io_fail_all(s, rc, "the scheduler's node table is inconsistent");
        return;
    }
    if (wrk_fo_init(s) != 0) {
        wrk_io_fail_all(s, KVS_ENOMEM, "out of memory");
        return;
    }
    size_t ns = (unsigned)s->c.num_server; /* >= 1 (cfg_load) */
    s->cma = calloc(ns, sizeof *s->cma);
    s->hellos = calloc(ns, sizeof *s->hellos);
    s->hello_wait = calloc(ns, sizeof *s->hello_wait);
    s->held_head = calloc(ns, sizeof *s->held_head);
    s->held_tail = calloc(ns, sizeof *s->held_tail);
    s->nonces = calloc(ns, PROTO_NONCE_LEN);
    s->srv_gone = calloc(ns, sizeof *s->srv_gone);
    /* replicated: data always goes by value, so any server can take a
     * re-sent request (docs/design.md "Replicated servers") */
    if (s->c.cma && s->c.replicas == 0 && s->cma && s->hellos && s->nonces && s->hello_wait && s->held_head &&
        s->held_tail) {
        for (int r = 0; r < s->c.num_server; r++) {
            wrk_req *q = &s->hellos[r];
            zmq_msg_t msg;
            q->server = r;
            q->req_id = ++s->next_req;
            q->h = (proto_hdr){.type = PROTO_HELLO, .sender = s->node_id, .req_id = q->req_id,
                               .body_len = PROTO_HELLO_LEN};
            if (wrk_reqmap_put(&s->reqs, q->req_id, q) != 0)
                continue; /* no HELLO: the socket data path */
            if (zmq_msg_init_size(&msg, PROTO_HELLO_LEN) != 0) {
                wrk_reqmap_del(&s->reqs, q->req_id);
                continue;
            }
            uint8_t *b = zmq_msg_data(&msg);
            le_put64(b, (uint64_t)getpid());
            le_put64(b + 8, (uint64_t)(uintptr_t)(s->nonces + (size_t)r * PROTO_NONCE_LEN));
            memset(b + 16, 0, PROTO_NONCE_LEN); /* the server sends the challenge */
            s->hello_wait[r] = net_send(s->servers[r], NULL, 0, &q->h, &msg) == 0;
            zmq_msg_close(&msg);
        }
    }
    uv_timer_start(&s->connect_timer, on_connect_deadline,
                   (uint64_t)(s->c.hb_timeout_s * 1000), 0);
    net_link_registered(s->link, s->node_id);
    pthread_mutex_lock(&s->mu);
    s->registered = true;
    if (!s->c.elastic || h->offset == 0) { /* a worker the job started with */
        s->admitted = true;
        s->epoch_known = s->epoch_seen = s->c.elastic ? 1 : 0;
        s->known_rank = s->e_rank = s->rank;
        s->known_num = s->e_num = s->c.num_worker;
    } else {
        s->joiner = true; /* admitted by the EPOCH that follows */
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    LOG(LOG_INFO, s->who, "job", "registered: rank %d of %d workers, %d servers", s->rank,
        s->c.num_worker, s->c.num_server);
}

/* status if it is one of our error codes, else def. */
static int known_err(int status, int def)
{
    return status < 0 && strcmp(kvs_errname(status), "KVS_E?") != 0 ? status : def;
}

void wrk_io_on_sched_msg(void *arg, const proto_hdr *h, const char *body, size_t len)
{
    kvs_store *s = arg;
    char text[700];
    snprintf(text, sizeof text, "%.*s", (int)(len < 600 ? len : 600), body ? body : "");
    switch (h->type) {
    case PROTO_REGISTER_ACK:
        if (!s->servers)
            on_registered(s, h, body, len);
        break;
    case PROTO_EPOCH: {
        char why[300];
        int rc = s->c.elastic ? wrk_elastic_on_epoch(s, h, body, len, why, sizeof why) : 0;
        if (rc)
            wrk_io_fail_all(s, rc, why);
        break;
    }
    case PROTO_BARRIER_DONE:
    case PROTO_EXIT_ACK: {
        /* only the request it answers: a barrier or an exit sent to the
         * scheduler (a data request's id must not complete it unanswered) */
        int asked = h->type == PROTO_BARRIER_DONE ? PROTO_BARRIER : PROTO_EXIT;
        wrk_req *q = wrk_reqmap_get(&s->reqs, h->req_id);
        if (q == NULL || q->server >= 0 || q->h.type != asked) {
            LOG_LIMITED(LOG_WARN, s->who, "net", "ignored the scheduler's %s for request %llu: "
                        "no %s of ours has that id", proto_type_name(h->type),
                        (unsigned long long)h->req_id, proto_type_name(asked));
            break;
        }
        wrk_reqmap_del(&s->reqs, h->req_id);
        if (asked == PROTO_BARRIER)
            s->barriers_passed++;
        wrk_op_release(s, q->op, 0, NULL);
        break;
    }
    case PROTO_NODE_DEAD: {
        char msg[800];
        int dead = h->key >= 8 && h->key % 2 == 0 ? (int)((h->key - 8) / 2) : -1;
        snprintf(msg, sizeof msg, "%s", text);
        pthread_mutex_lock(&s->mu); /* ids: servers 8 + 2r, workers 9 + 2r */
        if (h->key >= 8 && h->key % 2 == 0)
            s->dead_servers++;
        else if (h->key >= 9)
            s->dead_workers++;
        pthread_mutex_unlock(&s->mu);
        wrk_io_fail(s, KVS_EPEERDEAD, msg, dead, false);
        break;
    }
    case PROTO_PROMOTE:
        if (s->owner)
            wrk_fo_promote(s, h, body, len);
        break;
    case PROTO_SHUTDOWN:
        pthread_mutex_lock(&s->mu);
        s->sched_gone = true;
        pthread_mutex_unlock(&s->mu);
        if (h->status == 0) {
            wrk_io_fail_all(s, KVS_ECLOSED, "the scheduler ended the job");
        } else {
            char msg[800];
            snprintf(msg, sizeof msg, "the scheduler ended the job: %s",
                     text[0] ? text : "it failed");
            wrk_io_fail_all(s, known_err(h->status, KVS_EPEERDEAD), msg);
        }
        break;
    case PROTO_REFUSED: {
        char msg[800];
        int st = h->status == KVS_EAUTH || h->status == KVS_EPROTO ? h->status : KVS_ECONFIG;
        snprintf(msg, sizeof msg, "the scheduler refused this worker: %s", text);
        wrk_io_fail_all(s, st, msg);
        break;
    }
    case PROTO_ERROR: {
        char msg[800];
        snprintf(msg, sizeof msg, "the scheduler refused this worker: %s", text);
        wrk_io_fail_all(s, known_err(h->status, KVS_ECONFIG), msg);
        break;
    }
    default:
        LOG(LOG_WARN, s->who, "net", "ignored %s from the scheduler", proto_type_name(h->type));
    }
}

void wrk_io_rejoin_extra(void *arg, char *buf, size_t cap)
{
    kvs_store *s = arg;
    snprintf(buf, cap, " barriers=%llu", (unsigned long long)s->barriers_passed);
}

/* A restarted scheduler took us back: our barrier or exit in flight may
 * never have reached the old one, or its answer never reached us; the same
 * request again (its id, and a barrier its number) is answered once. */
void wrk_io_on_rejoin(void *arg)
{
    kvs_store *s = arg;
    size_t it = 0;
    wrk_req *q;
    while ((q = wrk_reqmap_next(&s->reqs, &it)) != NULL)
        if (q->server < 0 && (q->h.type == PROTO_BARRIER || q->h.type == PROTO_EXIT))
            net_link_send(s->link, &q->h, NULL);
}

void wrk_io_on_link_fail(void *arg, int err, const char *why)
{
    kvs_store *s = arg;
    pthread_mutex_lock(&s->mu);
    s->sched_gone = true;
    pthread_mutex_unlock(&s->mu);
    wrk_io_fail_all(s, err, why);
}
