/* metrics.h - libkvs's metrics (private to worker/): traffic per server and
 * data path, requests by type, errors by code, request latency histograms,
 * queue depths, the scheduler's heartbeat age.  kvs_metrics() renders them;
 * KVS_METRICS_PORT on a worker also serves them from the I/O thread.
 *
 * Threads: the hooks run on the I/O thread; the counters are atomic, so a
 * user thread may render at any time. */
#ifndef KVS_WORKER_METRICS_H
#define KVS_WORKER_METRICS_H

#include "worker/wrk_int.h"

/* Create s->met (kvs_create, before the I/O thread).  KVS_ENOMEM. */
int wrk_met_init(kvs_store *s);
/* Start serving on the I/O loop when KVS_METRICS_PORT is set (I/O thread
 * setup, before it runs).  0 or KVS_ENET with the reason in kvs_last_error. */
int wrk_met_serve(kvs_store *s);
/* Stop serving (I/O thread, before its handles are closed). */
void wrk_met_stop(kvs_store *s);
void wrk_met_free(kvs_store *s);

/* Hooks (I/O thread).  path: MET_PATH_SOCKET or MET_PATH_CMA. */
void wrk_met_sent(kvs_store *s, const wrk_req *q, bool cma, uint64_t data_bytes);
void wrk_met_reply(kvs_store *s, const wrk_req *q, const proto_hdr *h, int status);
void wrk_met_depth(kvs_store *s); /* after the request map changed */
/* Count the socket traffic of sock, the connection to server rank server. */
void wrk_met_watch(kvs_store *s, net_sock *sock, int server);
void wrk_met_tick(kvs_store *s);  /* heartbeat age, once a second */

#endif
