/* link.h - a node's connection to the scheduler: registration, heartbeats,
 * and detection of a dead scheduler; with KVS_SCHEDULER_GRACE, the time
 * without one and the rejoin to a restarted one (docs/guide/
 * fault-tolerance.md).  Used by kvs-server and libkvs.
 *
 * Threads: everything on the loop's thread.
 */
#ifndef KVS_NET_LINK_H
#define KVS_NET_LINK_H

#include <stdbool.h>
#include <uv.h>

#include "common/config.h"
#include "net/net.h"

typedef struct net_link net_link;

typedef struct net_link_cbs {
    /* A valid message from the scheduler (all but HEARTBEAT_ACK).  body is
     * the text body (not NUL-terminated), len bytes. */
    void (*on_msg)(void *arg, const proto_hdr *h, const char *body, size_t len);
    /* Registration did not complete in time, or the scheduler went silent
     * past the heartbeat timeout.  why names what happened. */
    void (*on_fail)(void *arg, int err, const char *why);
    /* KVS_SCHEDULER_GRACE (both may be NULL): rejoin_extra appends the
     * node's own fields to its rejoin (" k=v ...", at most cap bytes with
     * the NUL: proto_rejoin); on_rejoin runs once a restarted scheduler took
     * the node back, to send again what the old one may never have answered
     * (barriers, exits, lamb's norms). */
    void (*rejoin_extra)(void *arg, char *buf, size_t cap);
    void (*on_rejoin)(void *arg);
} net_link_cbs;

/* Connect to the scheduler of c and register as role with the given
 * endpoint (servers: their data address; workers: "-") and preferred rank
 * (-1: none); extra (NULL: none) is appended to the REGISTER body ("k=v"
 * fields, e.g. a worker's proto_local).  who is the log prefix, kept by
 * pointer (must outlive link). */
int net_link_new(uv_loop_t *loop, void *zctx, const cfg *c, int role, const char *host,
                 const char *endpoint, int pref_rank, const char *extra, const char *who,
                 const net_link_cbs *cbs, void *arg, net_link **out);

/* Call after REGISTER_ACK: sets the node id and starts heartbeats. */
void net_link_registered(net_link *l, int node_id);

/* The connection to the scheduler has closed; the link fails (on_fail) within
 * a moment.  Other connections closing now are a consequence, not a cause.
 * Never true with KVS_SCHEDULER_GRACE: the job goes on, and nobody exits
 * because the scheduler did. */
bool net_link_gone(const net_link *l);

/* KVS_SCHEDULER_GRACE: seconds since this node found the scheduler gone
 * and went on without it, waiting for a restarted one (messages sent now
 * may be lost: on_rejoin sends again what matters); -1 when it is not
 * (NULL included). */
double net_link_orphan_s(const net_link *l);

/* Send h (sender is set here) with an optional text body. */
int net_link_send(net_link *l, proto_hdr *h, const char *text);

/* Seconds since the scheduler was last heard from (heartbeat acks and every
 * other message), or -1 before registration (metrics). */
double net_link_silence_s(const net_link *l);

/* Stop the timers and close the socket.  NULL is a no-op. */
void net_link_free(net_link *l);

#endif
