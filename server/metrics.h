/* metrics.h - kvs-server's metrics: traffic per worker and data path,
 * requests by type, errors by code, round and sum time histograms, queue
 * depths, the scheduler's heartbeat age; served at KVS_METRICS_PORT.
 *
 * Threads: the server's loop thread (the counters are atomic, so the
 * reduction pool's threads could count too). */
#ifndef KVS_SERVER_METRICS_H
#define KVS_SERVER_METRICS_H

#include <stdint.h>

#include "common/config.h"
#include "common/metrics.h"
#include "net/http.h"
#include "net/link.h"
#include "net/net.h"
#include "server/store.h"

typedef struct srv_met {
    met_reg *reg;          /* NULL when out of memory: every hook is then a no-op */
    met_peer *peers;       /* per worker rank */
    int npeers;
    met_peer unknown;      /* connections that are not a worker of this job */
    met_series *req[PROTO_TYPE_MAX]; /* kvs_requests_total by message type */
    met_series *m_rounds, *m_summed, *m_queue[6], *m_hb, *m_dropped;
    net_http *http;
    /* read at each scrape */
    srv_store *store;
    net_sock **data;
    net_link **link;
} srv_met;

/* Create the registry and start serving (KVS_METRICS_PORT != 0).  The store
 * gets its histograms.  Returns 0 or KVS_ENET with why (the port). */
int srv_met_init(srv_met *m, const cfg *c, uv_loop_t *loop, srv_store *st, net_sock **data,
                 net_link **link, const char *who, char *why, size_t whylen);
/* Stop serving (before the loop's handles are closed); free later. */
void srv_met_stop(srv_met *m);
void srv_met_fini(srv_met *m);

/* A valid request of this type from a worker (socket traffic is counted by
 * the data socket itself; direct copies with srv_met_in/out). */
void srv_met_request(srv_met *m, int type);
/* The series of worker wrank (created at its first message), or NULL. */
const met_peer *srv_met_peer(srv_met *m, int wrank);
static inline void srv_met_in(srv_met *m, int wrank, int path, uint64_t bytes)
{
    met_peer_in(srv_met_peer(m, wrank), path, bytes);
}
static inline void srv_met_out(srv_met *m, int wrank, int path, uint64_t bytes)
{
    met_peer_out(srv_met_peer(m, wrank), path, bytes);
}

#endif
