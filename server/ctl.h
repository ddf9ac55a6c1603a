/* ctl.h - the server's collective requests: optimizer spec and per-key
 * multipliers, checkpoint save and load, and automatic checkpoints
 * (KVS_CHECKPOINT_DIR, KVS_CHECKPOINT_EVERY).
 *
 * Every worker sends each collective to every server with its sequence
 * number (proto.h, types 48-55).  A server acts on sequence n once all W
 * workers' requests of n arrived and n-1 is done, with worker rank 0's
 * content, and gives every worker the same answer: a barrier per server.
 * Save and load run on a thread of their own; meanwhile data requests are
 * held (in arrival order) and handled when it is done, so the weights the
 * thread reads or replaces cannot change under it.
 *
 * Threads: the server's loop thread, except the save/load thread inside.
 */
#ifndef KVS_SERVER_CTL_H
#define KVS_SERVER_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>
#include <zmq.h>

#include "common/config.h"
#include "proto/proto.h"

struct srv_store;
typedef struct srv_ctl srv_ctl;

/* New controller of store st on loop; sets st->hooks and st->optim.
 * 0 or KVS_ENOMEM. */
int srv_ctl_new(struct srv_store *st, uv_loop_t *loop, const cfg *c, srv_ctl **out);
/* This server's rank (known once registered): names its files; job_id (the
 * scheduler's random id of the job) tags its automatic checkpoints. */
void srv_ctl_set_rank(srv_ctl *ctl, int rank, uint64_t job_id);
/* Wait for a running save/load thread and stop answering (before the
 * sockets close).  NULL: no-op. */
void srv_ctl_stop(srv_ctl *ctl);
/* A save or load thread is running (its answer comes on a later turn of the
 * loop).  For tests that wait for it (tests/fuzz/fuzz_server.c). */
bool srv_ctl_busy(const srv_ctl *ctl);

/* Free (after the loop closed its handles).  NULL: no-op. */
void srv_ctl_free(srv_ctl *ctl);

/* True for the message types handled here. */
bool srv_ctl_type(int type);
/* A validated collective request from worker rank wrank; body: its text
 * (h->body_len bytes) or NULL. */
void srv_ctl_handle(srv_ctl *ctl, const uint8_t *ident, size_t ident_len, int wrank,
                    const proto_hdr *h, const void *body);
/* Called before the store gets a data request (srv_store_handle): while a
 * save or load runs, keep it for later (moving its body's frame, or copying
 * the body) and return true; otherwise (also with ctl NULL, or the store
 * broken) false. */
struct srv_in;
bool srv_ctl_hold(srv_ctl *ctl, const uint8_t *ident, size_t ident_len, int wrank,
                  const proto_hdr *h, const struct srv_in *in);

#endif
