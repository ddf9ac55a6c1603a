/* metrics.c - see metrics.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/metrics.h"
#include "net/http.h"
#include "worker/comm.h"
#include "worker/metrics.h"

struct wrk_met {
    met_reg *reg;
    met_peer *peers; /* per server rank */
    int npeers;
    met_series *req[PROTO_TYPE_MAX];
    met_series *lat[PROTO_TYPE_MAX];
    met_series *inflight, *ops, *queued, *hb, *pinned;
    net_http *http;
};

static const int data_types[] = {PROTO_INIT, PROTO_PUSH, PROTO_PULL, PROTO_PUSHPULL};

/* Before a render (any thread): what waits for the I/O thread. */
static void collect(void *arg)
{
    kvs_store *s = arg;
    size_t ops = 0, queued = 0;
    pthread_mutex_lock(&s->mu);
    for (wrk_op *op = s->ops_head; op; op = op->next)
        ops += !op->done;
    for (wrk_op *op = s->q_head; op; op = op->qnext)
        queued++;
    pthread_mutex_unlock(&s->mu);
    met_set(s->met->ops, (double)ops);
    met_set(s->met->queued, (double)queued);
    met_set(s->met->pinned, (double)wrk_comm_pinned_bytes(s->comm));
}

int wrk_met_init(kvs_store *s)
{
    struct wrk_met *m = calloc(1, sizeof *m);
    if (m == NULL || (m->reg = met_reg_new()) == NULL) {
        free(m);
        return KVS_ENOMEM;
    }
    s->met = m;
    met_reg *r = m->reg;
    met_process_info(r, "worker");
    if (s->kind == WRK_DIST) {
        m->peers = calloc((size_t)s->c.num_server, sizeof *m->peers);
        if (m->peers) {
            m->npeers = s->c.num_server;
            for (int i = 0; i < m->npeers; i++) {
                char peer[32];
                snprintf(peer, sizeof peer, "server %d", i);
                met_peer_init(&m->peers[i], r, peer);
            }
        }
    }
    met_fam *req = met_family(r, MET_COUNTER, "kvs_requests_total",
                              "Requests sent to servers (one per key part or chunk), by type",
                              "type", NULL);
    met_fam *lat = met_family(r, MET_HISTOGRAM, "kvs_request_seconds",
                              "From sending a request to its reply (push: the round of every "
                              "worker completed), by type", "type", NULL);
    for (size_t i = 0; i < sizeof data_types / sizeof data_types[0]; i++) {
        int t = data_types[i];
        char name[32];
        snprintf(name, sizeof name, "%s", proto_type_name(t));
        for (char *p = name; *p; p++)
            *p = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
        m->req[t] = met_get(req, name, NULL);
        m->lat[t] = met_get(lat, name, NULL);
    }
    met_fam *q = met_family(r, MET_GAUGE, "kvs_queue_depth",
                            "Work waiting, by queue: requests sent and not answered "
                            "(in_flight), operations not complete (ops), operations not yet "
                            "taken by the I/O thread (submitted)", "queue", NULL);
    m->inflight = met_get(q, "in_flight", NULL);
    m->ops = met_get(q, "ops", NULL);
    m->queued = met_get(q, "submitted", NULL);
    m->hb = met_get(met_family(r, MET_GAUGE, "kvs_heartbeat_age_seconds",
                               "Seconds since the node was last heard from (-1: not yet "
                               "registered)", "node", "host"),
                    "scheduler", s->c.root_uri[0] ? s->c.root_uri : "-");
    met_set(m->hb, -1);
    m->pinned = met_get(met_family(r, MET_GAUGE, "kvs_pinned_staging_bytes",
                                   "Pinned host memory held by the store's staging pool "
                                   "(device arrays staged through the host)", NULL, NULL),
                        NULL, NULL);
    met_reg_on_collect(r, collect, s);
    return 0;
}

int wrk_met_serve(kvs_store *s)
{
    char why[256];
    if (s->met == NULL)
        return 0;
    if (net_http_metrics(&s->loop, &s->c, s->met->reg, s->who, &s->met->http, why,
                         sizeof why) != 0)
        return err_set(KVS_ENET, "%s", why);
    return 0;
}

void wrk_met_stop(kvs_store *s)
{
    if (s->met) {
        net_http_free(s->met->http);
        s->met->http = NULL;
    }
}

void wrk_met_free(kvs_store *s)
{
    if (s->met == NULL)
        return;
    met_reg_free(s->met->reg);
    free(s->met->peers);
    free(s->met);
    s->met = NULL;
}

static const met_peer *peer(kvs_store *s, int server)
{
    return s->met && server >= 0 && server < s->met->npeers ? &s->met->peers[server] : NULL;
}

void wrk_met_sent(kvs_store *s, const wrk_req *q, bool cma, uint64_t data_bytes)
{
    if (s->met == NULL)
        return;
    if (cma && q->send && data_bytes)
        met_peer_out(peer(s, q->server), MET_PATH_CMA, data_bytes);
    if (q->h.type < PROTO_TYPE_MAX)
        met_add(s->met->req[q->h.type], 1);
    met_set(s->met->inflight, (double)s->reqs.len);
}

void wrk_met_reply(kvs_store *s, const wrk_req *q, const proto_hdr *h, int status)
{
    if (s->met == NULL)
        return;
    bool cma = (h->flags & PROTO_F_CMA) != 0;
    if (cma && q->nouts > 0 && status == 0)
        met_peer_in(peer(s, q->server), MET_PATH_CMA,
                    h->count * kvs_dtype_size((kvs_dtype)h->dtype));
    if (status != 0)
        met_error(s->met->reg, status);
    else if (q->t_sent && q->h.type < PROTO_TYPE_MAX)
        met_observe(s->met->lat[q->h.type], (double)(clock_ns() - q->t_sent) / 1e9);
    met_set(s->met->inflight, (double)s->reqs.len);
}

static void count(void *arg, const void *ident, size_t len, uint64_t bytes, int out)
{
    (void)ident;
    (void)len;
    if (out)
        met_peer_out(arg, MET_PATH_SOCKET, bytes);
    else
        met_peer_in(arg, MET_PATH_SOCKET, bytes);
}

void wrk_met_watch(kvs_store *s, net_sock *sock, int server)
{
    const met_peer *p = peer(s, server);
    if (p)
        net_sock_count(sock, count, (void *)p);
}

void wrk_met_depth(kvs_store *s)
{
    if (s->met)
        met_set(s->met->inflight, (double)s->reqs.len);
}

void wrk_met_tick(kvs_store *s)
{
    if (s->met)
        met_set(s->met->hb, net_link_silence_s(s->link));
}

/* ---- the public face ---- */

int kvs_metrics(kvs_store *s, char *buf, size_t len)
{
    err_clear();
    if (s == NULL)
        return err_set(KVS_EINVAL, "store is NULL");
    if (buf == NULL && len > 0)
        return err_set(KVS_EINVAL, "buf is NULL but len is %zu", len);
    if (s->met == NULL)
        return err_set(KVS_ENOMEM, "metrics unavailable (out of memory at kvs_create)");
    size_t n = met_render(s->met->reg, buf, len);
    if (n > (size_t)INT32_MAX)
        return err_set(KVS_ETOOBIG, "metrics text of %zu bytes", n);
    return (int)n;
}
