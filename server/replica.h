/* replica.h - replicated servers (KVS_REPLICAS=1): this server's side.
 *
 * As an owner: every change of an owned entry's value (srv_store.changed)
 * is forwarded to the backup (REPL_VALUE on a DEALER connection of its own
 * to the backup's data socket), and the store's successful answers to data
 * requests of that entry are held until the backup acknowledged (REPL_ACK)
 * every forward sent before them.  As a backup: REPL_VALUEs of the one
 * server we back up are kept as entries of our store (srv_store_copy_in)
 * and acknowledged.  On PROMOTE from the scheduler: the copies of the dead
 * server become ours, and when our backup changed we copy everything we own
 * to the new one and tell the scheduler REPL_SYNCED once it acknowledged
 * all of it.  The protocol: docs/design.md "Replicated servers".
 *
 * Threads: the server's loop thread only (ZeroMQ's thread releases the
 * zero-copy bodies of forwards with srv_buf_unref).
 */
#ifndef KVS_SERVER_REPLICA_H
#define KVS_SERVER_REPLICA_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "common/config.h"
#include "net/link.h"
#include "net/net.h"
#include "proto/proto.h"
#include "server/store.h"

typedef struct srv_repl srv_repl;

/* Put replication between store st and its answers: st's reply (and hold)
 * now go through the replica, and st->changed forwards.  data: the server's
 * data socket (acknowledgements leave there); link: where the server's link
 * to the scheduler will be (REPL_SYNCED).  c->replicas must be 1.  0 or
 * KVS_ENOMEM. */
int srv_repl_new(const cfg *c, uv_loop_t *loop, void *zctx, srv_store *st, net_sock *data,
                 net_link **link, srv_repl **out);
/* Close the connection to the backup and drop held answers (unanswered).
 * NULL: no-op. */
void srv_repl_free(srv_repl *r);

/* Registered as rank with node id, the node table (REGISTER_ACK body):
 * connect to our backup, server (rank + 1) mod S. */
void srv_repl_registered(srv_repl *r, int rank, int node_id, const char *table, size_t len);

/* True for the types a server's data socket takes from other servers. */
bool srv_repl_type(int type);

/* A message of srv_repl_type from the data socket (ident: the sender's
 * routing id; body: nbody frames).  Returns 0 when it came from a server
 * of the job over a connection that proved it (then it was handled), or
 * KVS_EPROTO / KVS_EAUTH with why (the caller drops it). */
int srv_repl_on_data(srv_repl *r, net_msg *m, const uint8_t *ident, size_t ident_len,
                     const proto_hdr *h, zmq_msg_t *body, int nbody, char *why, size_t whylen);

/* PROMOTE from the scheduler (h->key: the dead server's id, h->round: the
 * new owner's; body: "owners=..."). */
void srv_repl_promote(srv_repl *r, const proto_hdr *h, const char *body, size_t len);

#endif
