/* fuse.h - the server's side of fused requests (PROTO_FUSED).
 *
 * A FUSED message carries several small data requests of one worker.  Every
 * record is validated before any is handled; then each goes to the store as
 * if it had come alone, marked with its batch (proto_hdr.fuse).  The store's
 * answers to marked records are collected per batch and leave as
 * FUSED_REPLY messages once per turn of the loop (an idle handle: the
 * answers may be produced in any phase of the loop, and an idle handle
 * keeps the next poll from blocking), so the
 * records whose rounds complete together are answered in one message and a
 * record never waits for another one's round.  Except while jobs that will
 * answer some of a batch's records are in flight (srv_fuse_hold, counted by
 * the store): its answers then wait for the last of them, so the records of
 * one message that jobs sum (by reference, DP_OFFLOAD_MIN and up) come back
 * in a few messages, not one per loop turn (a 200-key round on 2x2 sent
 * about 28 FUSED_REPLYs per worker and server; each costs its sender, both
 * ZeroMQ threads and the worker a wake-up).  Only a batch whose records all
 * have one priority is held: with p3, a message's records may span layers,
 * and the first layer's answer must not wait for the later layers' sums.
 * A collected reply is sent at
 * once when it reaches DP_FUSE_REPLY_FLUSH bytes, record frames included.
 * Values of DP_FUSE_MAX bytes and more travel as record frames
 * (PROTO_F_FRAME): the reply lends ZeroMQ the stored value, as a lone
 * REPLY does, and the records of a worker's message that carried big parts
 * in record frames come back the same way.  A record the worker traces
 * (PROTO_F_TRACE) is stamped with the message's arrival time, so the store
 * sends its PROTO_TIMING (a lone message, ahead of the FUSED_REPLY that
 * carries the record's answer) as for a request that came alone.
 *
 * Threads: the server's loop thread only (ZeroMQ's thread frees sent reply
 * bodies with free()).
 */
#ifndef KVS_SERVER_FUSE_H
#define KVS_SERVER_FUSE_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "net/net.h"
#include "proto/proto.h"
#include "server/store.h"

typedef struct srv_fuse srv_fuse;
struct srv_met;
struct srv_cma;
struct srv_ctl;

typedef struct srv_fuser {
    uv_idle_t idle;        /* sends the collected answers on the next turn */
    net_sock *sock;        /* the data socket (ROUTER) */
    const int *node_id;    /* this server's node id (set at registration) */
    srv_fuse *all;         /* every batch still open */
    srv_fuse *dirty;       /* batches with answers to send */
    uint64_t batches, records;
    struct srv_met *met;   /* counts each record by its type (NULL: not counted) */
} srv_fuser;

/* Start on loop; answers leave through sock.  The idle handle is closed by
 * the loop's owner (uv_walk) like every other handle. */
void srv_fuser_init(srv_fuser *f, uv_loop_t *loop, net_sock *sock, const int *node_id);
/* Free every batch still open (after the loop stopped; the store's waiting
 * requests that point at them must be gone or never be answered). */
void srv_fuser_fini(srv_fuser *f);

/* A validated FUSED or FUSED_REF message h with its body from worker wrank
 * (connection ident) and its nframes record frames (PROTO_F_FRAME records'
 * bodies, in order; the store may move them out): check every record
 * (proto_fused_next; a descriptor of a record by reference with
 * srv_cma_desc; one record frame of exactly its body_len bytes for each
 * record with PROTO_F_FRAME, and no frame left over), then hand each to the
 * store (a record by reference without a body: the store reads the worker's
 * memory; a record with a frame as a request that came alone with it)
 * unless the controller ctl (may be NULL) holds it (srv_ctl_hold).
 * Records by reference are accepted only when cma (the worker's proof, may
 * be NULL) is alive.  Returns 0, or KVS_EPROTO / KVS_ETOOBIG / KVS_ENOMEM
 * with why and nothing handled: the caller answers the whole message with
 * an ERROR. */
int srv_fuse_request(srv_fuser *f, srv_store *st, struct srv_ctl *ctl, const uint8_t *ident,
                     size_t ident_len, int wrank, const proto_hdr *h, const uint8_t *body,
                     zmq_msg_t *frames, int nframes, const proto_limits *lim,
                     struct srv_cma *cma, char *why, size_t whylen);

/* The store's answer to a record of batch reply->fuse: reply is the REPLY
 * header (req_id, key, part, status, round, count, dtype set; body_len is
 * set here); the body is text (status != 0) or count elements at data, or,
 * when reply's flags name a codec, reply->body_len encoded bytes at data. */
void srv_fuse_answer(srv_fuser *f, proto_hdr *reply, const char *text, const void *data);

/* The same for a value answer whose body (reply->body_len bytes, the
 * caller's zero-copy frame, moved out of *value) travels as a record frame
 * of the FUSED_REPLY (PROTO_F_FRAME), not copied into it. */
void srv_fuse_answer_frame(srv_fuser *f, proto_hdr *reply, zmq_msg_t *value);

/* A job that will answer a record of batch fuse (proto_hdr.fuse) starts
 * (delta +1) or ended (-1, before it answers): while any is in flight the
 * batch keeps its collected answers (the store's srv_hold_fn), unless its
 * records have different priorities. */
void srv_fuse_hold(srv_fuser *f, uintptr_t fuse, int delta);

#endif
