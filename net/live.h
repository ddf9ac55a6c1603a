/* live.h - liveness of connections: ZeroMQ socket monitors in the loop, ZMTP
 * heartbeats on data connections, and which connection a message came from.
 *
 * A node learns that a peer is gone from three sources, fastest first:
 *  - the peer's TCP connection closes (process exit, crash, kvs_close): a
 *    socket monitor reports ZMQ_EVENT_DISCONNECTED at once;
 *  - the connection goes silent (host cut, link down): ZMTP heartbeats
 *    (ZMQ_HEARTBEAT_IVL/TIMEOUT/TTL = PS_HEARTBEAT_INTERVAL/TIMEOUT) close
 *    it after PS_HEARTBEAT_TIMEOUT, which again is a DISCONNECTED event;
 *  - a connection that never comes up within PS_HEARTBEAT_TIMEOUT (the
 *    caller's deadline, see net_mon_connected).
 * ZMTP heartbeats are answered by ZeroMQ's own I/O thread, so a busy loop
 * never makes a live peer look dead.
 *
 * Threads: everything on the loop's thread.
 */
#ifndef KVS_NET_LIVE_H
#define KVS_NET_LIVE_H

#include <stdbool.h>
#include <uv.h>

#include "common/config.h"
#include "net/net.h"

typedef struct net_mon net_mon;

/* event: ZMQ_EVENT_*; value: the event's value (the connection's fd for
 * CONNECTED, ACCEPTED, DISCONNECTED); addr: the endpoint text. */
typedef void (*net_mon_fn)(void *arg, int event, int value, const char *addr);

/* Watch the connection events (mask of ZMQ_EVENT_*) of zsock, which must
 * outlive the monitor's use; fn runs on the loop.  0 or KVS_ENET. */
int net_mon_new(uv_loop_t *loop, void *zctx, void *zsock, int events, net_mon_fn fn, void *arg,
                net_mon **out);

/* Stop watching (call before closing the watched socket).  NULL: no-op. */
void net_mon_free(net_mon *m);

/* ZMTP heartbeats on zsock from c: a PING every PS_HEARTBEAT_INTERVAL, the
 * connection closed after PS_HEARTBEAT_TIMEOUT without any traffic from the
 * peer; each PING asks the peer to close after the same time without one
 * (its TTL), so the listening side drops a silent peer too.  Set before
 * connect, on connecting sockets only: libzmq 4.3.4 aborts when its
 * heartbeat timer fires on a connection whose input stopped and then failed
 * (stream_engine_base.cpp:331, `!_io_error`), which a peer of a listening
 * socket can bring about. */
void net_live_heartbeats(void *zsock, const cfg *c);

/* Mark zsock's traffic as interactive (IP TOS low delay): under a priority
 * queueing discipline, control messages then pass bulk data. */
void net_live_low_delay(void *zsock);

/* The fd of the TCP connection m arrived on (ZMQ_SRCFD), or -1. */
int net_msg_fd(net_msg *m);

#endif
