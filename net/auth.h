/* auth.h - who may talk to a node: the job secret, proof of it on every
 * connection, and what a node will hold for a peer before it is proven.
 *
 * With a job secret (cfg.security auth or curve) no ZeroMQ connection to a
 * bound socket (the scheduler's, a server's) delivers a single message
 * before the peer proved that it knows the secret.  The proof runs inside
 * ZeroMQ's handshake through a ZAP handler (ZeroMQ RFC 27) that this module
 * runs on the node's loop:
 *
 *  auth   PLAIN mechanism.  username = "kvs1 <role> <node id> <nonce>",
 *         password = hex HMAC-SHA256(K_auth, target "\n" username), where
 *         K_auth is derived from the secret, target names the socket
 *         ("scheduler", or the server's endpoint as in the node table) and
 *         nonce is 16 fresh random bytes.  The handler checks the HMAC in
 *         constant time and refuses a nonce it has accepted before, so a
 *         recorded proof cannot be replayed (to this node: the nonce; to
 *         another: the target).  Data then flows in clear.
 *  curve  CURVE mechanism (Curve25519 + XSalsa20-Poly1305): the server key
 *         pair and one client key pair per role are derived from the secret;
 *         the handler accepts only the derived client keys.  Everything is
 *         encrypted and the client also knows that it talks to a key holder.
 *
 * The handler names every accepted connection in the messages' "User-Id"
 * property ("worker 3", "server -1" before registration), which
 * net_auth_peer reads: a node id is bound to the connection that proved it.
 * Without a secret (security none) everything here is a no-op except the
 * handshake timeout, and net_auth_peer returns NULL.
 *
 * Threads: everything on the loop's thread of the zctx's owner.
 */
#ifndef KVS_NET_AUTH_H
#define KVS_NET_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>
#include <zmq.h>

#include "common/config.h"

#define NET_AUTH_NONCE 16
#define NET_AUTH_KEY 32

typedef struct net_auth net_auth;

/* HMAC-SHA256 of msg under key (any lengths); out gets 32 bytes. */
void net_hmac(const void *key, size_t keylen, const void *msg, size_t msglen,
              uint8_t out[32]);

/* Fill buf with len cryptographically random bytes.  0 or KVS_EINTERNAL. */
int net_random(void *buf, size_t len);

/* The ZAP handler of a node that binds sockets (scheduler, server): binds
 * inproc://zeromq.zap.01 on zctx and answers on loop.  Call before any
 * socket is bound.  who: the log prefix (kept by pointer).  0, KVS_ENET or
 * KVS_ENOMEM.  With security none it only keeps the counters. */
int net_auth_new(uv_loop_t *loop, void *zctx, const cfg *c, const char *who, net_auth **out);

/* Set up zsock (not yet bound) as a listening socket: peers must finish the
 * handshake within KVS_HANDSHAKE_TIMEOUT and, with a secret, prove it for
 * target ("scheduler" or the server's advertised endpoint).  0 or
 * KVS_ENET. */
int net_auth_listen(net_auth *a, void *zsock, const char *target);

/* The target a server's socket proves against, once the endpoint is known
 * (after bind).  The handler refuses every proof until it is set. */
void net_auth_set_target(net_auth *a, const char *target);

/* Stop the handler; NULL is a no-op.  Call before the
 * sockets it guards are closed. */
void net_auth_free(net_auth *a);

/* Proofs accepted and refused so far. */
uint64_t net_auth_accepted(const net_auth *a);
uint64_t net_auth_refused(const net_auth *a);

/* Client side: give zsock (before connect) the credentials for target as
 * role ("worker", "server") with node id (-1 before registration).  A fresh
 * nonce each call.  0, or KVS_ENET / KVS_EINTERNAL with why. */
int net_auth_connect(const cfg *c, void *zsock, const char *role, int node_id,
                     const char *target, char *why, size_t whylen);

/* Connection events to monitor (net/live.h's net_mon) on a connecting
 * socket: ZMQ_EVENT_HANDSHAKE_FAILED_AUTH means the peer refused our proof
 * (another secret than the job's): stop at once instead of retrying. */
#define NET_AUTH_CLIENT_EVENTS ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
/* A listening socket's connections are watched by net/guard.h (not by
 * ZMQ_EVENT_ACCEPT_FAILED: libzmq retries a failed accept() in a loop and
 * would send one event per try, flooding the loop that must free
 * descriptors). */

/* The proven identity of the peer that sent frame f ("worker 3"), or NULL
 * when the connection was not authenticated (open job).  Valid while f is. */
const char *net_auth_peer(zmq_msg_t *f);

/* 1 when peer (from net_auth_peer) proved role with node id, or with id -1
 * (a role key: curve); 0 otherwise. */
bool net_auth_peer_is(const char *peer, const char *role, int node_id);

/* Raise the soft descriptor limit to the hard one (a daemon serving many
 * connections); logs the result at INFO. */
void net_raise_nofile(const char *who);

#endif
