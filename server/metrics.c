/* metrics.c - see metrics.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "server/metrics.h"

enum { Q_SEND, Q_ROUND, Q_PULLS, Q_DEFERRED, Q_INITS, Q_KEYS };

static void collect(void *arg)
{
    srv_met *m = arg;
    srv_store_depth d;
    srv_store_depths(m->store, &d);
    met_counter_set(m->m_rounds, m->store->rounds_done);
    met_counter_set(m->m_summed, m->store->bytes_summed);
    met_set(m->m_queue[Q_SEND], *m->data ? (double)net_sock_queued(*m->data) : 0);
    met_set(m->m_queue[Q_ROUND], (double)d.round_pushes);
    met_set(m->m_queue[Q_PULLS], (double)d.pulls);
    met_set(m->m_queue[Q_DEFERRED], (double)d.deferred);
    met_set(m->m_queue[Q_INITS], (double)d.inits);
    met_set(m->m_queue[Q_KEYS], (double)d.keys);
    met_set(m->m_hb, net_link_silence_s(*m->link));
}

const met_peer *srv_met_peer(srv_met *m, int wrank)
{
    if (m->peers == NULL || wrank < 0 || wrank >= m->npeers)
        return NULL;
    met_peer *p = &m->peers[wrank];
    if (p->bytes[0][0] == NULL) {
        char peer[32];
        snprintf(peer, sizeof peer, "worker %d", wrank);
        met_peer_init(p, m->reg, peer);
    }
    return p;
}

/* The data socket's traffic: routing id "w<node id>" names the worker. */
static void count(void *arg, const void *ident, size_t len, uint64_t bytes, int out)
{
    srv_met *m = arg;
    char id[16];
    int node = -1, wrank;
    const met_peer *p = &m->unknown;
    /* "w<node id>" or "w<node id>-<random>" */
    if (len > 1 && ((const char *)ident)[0] == 'w') {
        size_t n = len - 1 < sizeof id - 1 ? len - 1 : sizeof id - 1;
        memcpy(id, (const char *)ident + 1, n);
        id[n] = '\0';
        char *end;
        long v = strtol(id, &end, 10);
        if (end != id && (*end == '\0' || *end == '-') && v >= 9 && v % 2 == 1 && v < (1L << 20))
            node = (int)v;
    }
    wrank = node >= 0 ? (node - 9) / 2 : -1;
    if (wrank >= 0 && wrank < m->npeers)
        p = srv_met_peer(m, wrank);
    if (out)
        met_peer_out(p, MET_PATH_SOCKET, bytes);
    else
        met_peer_in(p, MET_PATH_SOCKET, bytes);
}

int srv_met_init(srv_met *m, const cfg *c, uv_loop_t *loop, srv_store *st, net_sock **data,
                 net_link **link, const char *who, char *why, size_t whylen)
{
    static const char *const queues[] = {"send", "round_pushes", "waiting_pulls",
                                         "deferred_pushes", "waiting_inits", "keys"};
    memset(m, 0, sizeof *m);
    m->store = st;
    m->data = data;
    m->link = link;
    m->reg = met_reg_new();
    if (m->reg == NULL)
        return 0; /* no metrics: the hooks do nothing */
    met_reg *r = m->reg;
    met_process_info(r, "server");
    m->peers = calloc((size_t)cfg_worker_slots(c), sizeof *m->peers);
    if (m->peers)
        m->npeers = cfg_worker_slots(c);
    met_peer_init(&m->unknown, r, "unknown");
    met_fam *req = met_family(r, MET_COUNTER, "kvs_requests_total",
                              "Requests received from workers, by type (fused, fused_ref: messages of several requests, each of which is also counted by its own type)", "type", NULL);
    /* a FUSED message counts once as "fused", and each request in it by its type
     * (server/fuse.c) */
    int types[] = {PROTO_INIT,  PROTO_PUSH,  PROTO_PULL,     PROTO_PUSHPULL,
                   PROTO_HELLO, PROTO_FUSED, PROTO_FUSED_REF};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "%s", proto_type_name(types[i]));
        for (char *p = name; *p; p++)
            *p = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
        m->req[types[i]] = met_get(req, name, NULL);
    }
    m->m_rounds = met_one(r, MET_COUNTER, "kvs_rounds_total",
                          "dist_sync rounds completed (every worker's push of a key part summed)");
    m->m_summed = met_one(r, MET_COUNTER, "kvs_summed_bytes_total", "Bytes of pushes summed");
    st->m_round = met_one(r, MET_HISTOGRAM, "kvs_round_seconds",
                          "From the first push of a round to the round's completion");
    st->m_sum = met_one(r, MET_HISTOGRAM, "kvs_sum_seconds",
                        "Time summing one push into its round");
    met_fam *q = met_family(r, MET_GAUGE, "kvs_queue_depth",
                            "Messages or requests waiting, by queue (keys: key parts stored)",
                            "queue", NULL);
    for (int i = 0; i < 6; i++)
        m->m_queue[i] = met_get(q, queues[i], NULL);
    m->m_hb = met_get(met_family(r, MET_GAUGE, "kvs_heartbeat_age_seconds",
                                 "Seconds since the node was last heard from (-1: not yet "
                                 "registered)", "node", "host"),
                      "scheduler", c->root_uri);
    met_reg_on_collect(r, collect, m);
    if (*data)
        net_sock_count(*data, count, m);
    return net_http_metrics(loop, c, r, who, &m->http, why, whylen);
}

void srv_met_request(srv_met *m, int type)
{
    if (type > 0 && type < PROTO_TYPE_MAX)
        met_add(m->req[type], 1);
}

void srv_met_stop(srv_met *m)
{
    net_http_free(m->http);
    m->http = NULL;
}

void srv_met_fini(srv_met *m)
{
    srv_met_stop(m);
    free(m->peers);
    met_reg_free(m->reg);
    m->reg = NULL;
    m->peers = NULL;
}
