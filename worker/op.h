/* op.h - the per-key operation engine of libkvs's dist stores (private to
 * worker/).
 *
 * An operation (wrk_op, wrk_int.h) is one API call: its keys, and one
 * request (wrk_req) per message it sends: every key part or chunk
 * (route.c).  Its life:
 *
 *   wrk_submit          plan outside store->mu: dedupe the keys, sum repeated
 *                       keys locally, route and chunk, build the requests;
 *                       then under mu: check shapes, number the rounds, count
 *                       the op against each of its keys, queue it for the
 *                       I/O thread (io.c)
 *   wrk_op_release      one reply, or one released zero-copy frame (any
 *                       thread); the last one completes the op
 *   wrk_wait_keys       kvs_wait / kvs_wait_all: wait on per-key counters
 *   wrk_wait_op         a synchronous op (init, barrier, exit, collectives)
 *
 * Completion is tracked per key: an unfinished async op counts once on each
 * of its keys (in the key's wrk_key, or in store->busy for a key this
 * worker has not initialised), so waiting for one key never scans the ops.
 * An op's "pending" counts its replies plus the zero-copy frames it lent
 * ZeroMQ (requests with wrk_req.zc); whoever drops a request without
 * sending it releases both (wrk_req_drop).
 *
 * Threads: user threads call wrk_submit / the waits; the I/O thread, the
 * comm thread and ZeroMQ's thread call wrk_op_release.  Functions named
 * _locked are called with store->mu held. */
#ifndef KVS_WORKER_OP_H
#define KVS_WORKER_OP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvs.h"

struct kvs_store;
struct wrk_op;
struct wrk_req;
struct wrk_post;

/* Build and queue an op of type (WRK_OP_INIT/PUSH/PULL/PUSHPULL).  vals:
 * data sent (init/push/pushpull); outs: where replies go (pull/pushpull);
 * arguments already checked (api.c).  sync_op: the caller waits with
 * wrk_wait_op (the op is its own); NULL: async, counted on its keys.  post
 * (may be NULL) is owned by the op on success, still the caller's on error.
 * gated (async only; may be NULL): the op's requests wait until the caller
 * opens them (wrk_op_open), in order, as it writes their data; *gated gets
 * the op (NULL when there was nothing to queue), which stays valid until the
 * caller's wrk_op_open_done.  0 or an error (with its message set). */
int wrk_submit(struct kvs_store *s, int type, size_t n, const uint64_t *keys,
               const kvs_array *vals, const kvs_array *outs, int priority,
               struct wrk_op **sync_op, struct wrk_post *post, struct wrk_op **gated);
/* A gated op: its requests op->reqs[0..n) may be sent now (n only grows).
 * The caller's thread; takes mu. */
void wrk_op_open(struct kvs_store *s, struct wrk_op *op, size_t n);
/* A gated op's data is all written (err 0), or writing it failed: the
 * requests not yet opened are then dropped with err (the parts already sent
 * stay sent).  Ends the caller's hold: op may be freed after this. */
void wrk_op_open_done(struct kvs_store *s, struct wrk_op *op, int err, const char *text);

/* Queue a prepared synchronous op (op->sync, pending set), wait for it and
 * free it; returns its error.  Called without mu. */
int wrk_op_run(struct kvs_store *s, struct wrk_op *op);
/* A barrier or exit (WRK_OP_BARRIER / WRK_OP_EXIT) through the scheduler. */
int wrk_op_control(struct kvs_store *s, int type);

/* Wait for a synchronous op, remove and free it; returns its error. */
int wrk_wait_op(struct kvs_store *s, struct wrk_op *op);
/* Wait until no unfinished async op has key (all: no unfinished async op at
 * all); report (first error) and drop the finished failed ones that match,
 * and report a failed job.  Called without mu. */
int wrk_wait_keys(struct kvs_store *s, bool all, uint64_t key);

/* Account one finished reply or released frame of op (any thread; takes mu).
 * err != 0 fails the op (the first error and its text are kept). */
void wrk_op_release(struct kvs_store *s, struct wrk_op *op, int err, const char *text);
/* A request that will never be sent or answered: release its reply and its
 * zero-copy frame (if it counts one), with err.  Takes mu. */
void wrk_req_drop(struct kvs_store *s, struct wrk_req *q, int err, const char *text);
/* Mark the job broken and fail everything in the submission queue (call with
 * mu held): every op there completes with err. */
void wrk_fail_all_locked(struct kvs_store *s, int err, const char *text);

void wrk_op_free(struct wrk_op *op);
/* Free every op still listed (kvs_close, after the I/O thread stopped). */
void wrk_ops_free_all(struct kvs_store *s);

/* Sum the arrays vals[idx[0..k)] of one key into dst (k >= 1). */
int wrk_sum_local(struct kvs_store *s, void *dst, const kvs_array *vals, const size_t *idx,
                  size_t k);

#endif
