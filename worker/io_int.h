/* io_int.h - the I/O thread's files (private to worker/).
 *
 *   io.c        the thread and its loop: start, stop, each wake-up drains
 *               the submission queue into the sending side
 *   io_hello.c  the handshake: registration with the scheduler, connecting
 *               the servers and their HELLO (direct copies), the scheduler's
 *               messages, lost connections
 *   io_reply.c  the servers' answers: match them to requests, write the data,
 *               call the op's owner (op.h's wrk_op_ops.reply), release
 *   io_send.c   sending: one by one, fused, by reference, p3 priority queues
 *               under credits, gated ops; the FUSED messages in flight
 *   io_fail.c   failing what is in flight (job failed, store closed)
 * failover.c (failover.h, replicated servers) calls io_send.c and io_fail.c;
 * io_hello.c calls it.
 *
 * Each file calls only the files listed below it (docs/design/layout.md).
 * Every function here runs on the store's I/O thread. */
#ifndef KVS_WORKER_IO_INT_H
#define KVS_WORKER_IO_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/net.h"
#include "proto/proto.h"
#include "worker/wrk_int.h"

/* io_hello.c: the scheduler link's callbacks (net_link_cbs). */
void wrk_io_on_sched_msg(void *arg, const proto_hdr *h, const char *body, size_t len);
void wrk_io_on_link_fail(void *arg, int err, const char *why);
/* KVS_SCHEDULER_GRACE (net_link_cbs): our rejoin's fields, and what a
 * restarted scheduler must hear again once it took us back. */
void wrk_io_rejoin_extra(void *arg, char *buf, size_t cap);
void wrk_io_on_rejoin(void *arg);

/* io_reply.c: a message from a server (a server socket's callback). */
void wrk_io_on_server(net_sock *sock, net_msg *m, void *arg);

/* io_send.c */
/* Send q now (or hold it for its server's HELLO answer). */
void wrk_io_send(kvs_store *s, wrk_req *q);
/* Send q now, or keep it for its server's next FUSED message. */
void wrk_io_dispatch(kvs_store *s, wrk_req *q);
/* Send every server's FUSED message collected so far (end of a wake-up). */
void wrk_io_fuse_flush_all(kvs_store *s);
/* p3 with KVS_P3_CREDIT: true when the per-server queues are in use (made
 * on first use). */
bool wrk_io_p3_credits(kvs_store *s);
/* Send server r's queued requests while it has credit. */
void wrk_io_p3_pump(kvs_store *s, int r);
/* Move the gated ops of the list ops to s->gated; returns the others. */
wrk_op *wrk_io_gate_take(kvs_store *s, wrk_op *ops);
/* Hand on what each gated op has made ready. */
void wrk_io_gate_pump(kvs_store *s);
/* A record of FUSED message cid was answered; the whole message failed. */
void wrk_io_batch_done(kvs_store *s, uint64_t cid);
void wrk_io_batch_fail(kvs_store *s, uint64_t cid, int err, const char *text);
/* A KVS_TRACE timeline event about request q. */
void wrk_io_trace_req(kvs_store *s, const wrk_req *q, int kind, uint64_t a, uint64_t b,
                      uint64_t c, int status);

/* io_fail.c */
/* Fail every request in flight and everything queued; requests by reference
 * to a server not known dead wait for it unless force (see io_fail.c). */
void wrk_io_fail(kvs_store *s, int err, const char *text, int dead_server, bool force);
void wrk_io_fail_all(kvs_store *s, int err, const char *text);
/* After a failure: server r's connection closed (it exited); fail the
 * requests by reference kept for it. */
void wrk_io_server_gone(kvs_store *s, int r);
/* After a failure: close the connections to servers with nothing in flight. */
void wrk_io_close_idle(kvs_store *s);

#endif
