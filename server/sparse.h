/* sparse.h - row-sparse requests in the server's store (proto/rsp.h).
 *
 * A row-sparse key's parts are ordinary entries (whole rows of the dense
 * table, one copy).  In dist_sync a round of row-sparse pushes is summed
 * row by row into a small accumulator (srv_rsp_acc: only the rows some
 * worker sent, summed in arrival order); when the round completes, only
 * those rows of the stored value change: they become their sums, or with
 * an optimizer they are updated with the sums as gradients (MXNet's lazy
 * update: rows without a gradient keep their weight and optimizer state
 * untouched).  In dist_async a push is applied on arrival the same way
 * (plain: added to the stored rows).  Pulls and pushpulls are answered with
 * the rows they named.  The store (store.c) calls these for requests with
 * PROTO_F_RSP; they never answer anyone themselves.
 *
 * Threads: the server's loop thread (the store's).  Row-sparse work runs
 * on the loop: it is proportional to the rows sent, not to the table.
 */
#ifndef KVS_SERVER_SPARSE_H
#define KVS_SERVER_SPARSE_H

#include <stddef.h>
#include <stdint.h>

#include "proto/proto.h"
#include "server/buf.h"
#include "server/req.h"

struct srv_entry;
struct srv_optim;
typedef struct srv_rsp_acc srv_rsp_acc;

/* Add r's row-sparse push (body in) to e's round accumulator (made on the
 * first push), and keep r's row ids for its answer.  Nothing changes on
 * error: 0, or KVS_EPROTO / KVS_ENOMEM with why. */
int srv_rsp_add(struct srv_entry *e, srv_req *r, const srv_in *in, char *why, size_t whylen);
/* e's round is complete: write its rows into the value (sums; with optim,
 * the active optimizer, the lazy update), free the accumulator.  0 or an
 * update error (KVS_ESHAPE for int keys, KVS_ENOMEM) with why (the value
 * unchanged). */
int srv_rsp_finish(struct srv_optim *optim, struct srv_entry *e, char *why, size_t whylen);
/* dist_async: apply r's push at once (added; with optim, one lazy update). */
int srv_rsp_async(struct srv_optim *optim, struct srv_entry *e, srv_req *r, const srv_in *in,
                  char *why, size_t whylen);
/* A row-sparse pull: keep its row ids in r for the answer.  0 or KVS_EPROTO
 * / KVS_ENOMEM with why. */
int srv_rsp_keep_ids(srv_req *r, const srv_in *in, char *why, size_t whylen);
/* The answer to row-sparse request r from e's value: *h its header (count:
 * the elements of the rows), *value the rows it named (pull, pushpull; one
 * reference, the caller's) or NULL (push, or no rows).  0 or KVS_ENOMEM. */
int srv_rsp_answer(const srv_req *r, const struct srv_entry *e, proto_hdr *h,
                   srv_buf **value);
void srv_rsp_acc_free(srv_rsp_acc *a);

#endif
