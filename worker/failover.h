/* failover.h - libkvs with replicated servers (KVS_REPLICAS=1): which
 * server owns each key range now, and re-sending what a dead server never
 * answered to the server that took its ranges (docs/design.md "Replicated
 * servers").
 *
 * Threads: the store's I/O thread only.
 */
#ifndef KVS_WORKER_FAILOVER_H
#define KVS_WORKER_FAILOVER_H

#include <stdbool.h>
#include <stddef.h>

#include "proto/proto.h"
#include "worker/wrk_int.h"

/* At registration: every range owned by its own server.  0 or KVS_ENOMEM
 * (no-op without replicas). */
int wrk_fo_init(struct kvs_store *s);
void wrk_fo_free(struct kvs_store *s);

/* True when the data connection to server r may be lost without failing
 * the job: replicated, so the scheduler decides (PROMOTE or NODE_DEAD). */
bool wrk_fo_survives(const struct kvs_store *s, int r);

/* PROMOTE from the scheduler: take the new owners, and re-send every
 * request in flight to the dead server to its heir. */
void wrk_fo_promote(struct kvs_store *s, const proto_hdr *h, const char *body, size_t len);

#endif
