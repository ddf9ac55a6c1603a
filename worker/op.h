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
 * An op may belong to an owner above the engine (the comm layer's device
 * staging, a collective's answers): the owner sets an operations table
 * (wrk_op_ops) and its own pointer, and the engine and the I/O thread reach
 * it only through the table, never by name.
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
#include "proto/proto.h"

struct kvs_store;
struct wrk_op;
struct wrk_req;

/* What the owner of an op does at the op's turning points (each may be
 * NULL; op->owner is the owner's pointer). */
typedef struct wrk_op_ops {
    /* The I/O thread received a successful REPLY to q (checked against q's
     * key and part, its data already written to q's outputs); h and body are
     * the server's answer.  Keep what else it carries.  Returns 0, or an
     * error that fails the op (*why: its text, static).  The I/O thread
     * releases q's reply after it returns.  Called without mu. */
    int (*reply)(struct kvs_store *s, struct wrk_req *q, const proto_hdr *h, const void *body,
                 const char **why);
    /* Every reply of op is in and it has no error: return true to keep it
     * pending (the owner has more to do and releases it later, setting
     * op->pending), false to let it complete now.  Called with mu held. */
    bool (*post)(struct kvs_store *s, struct wrk_op *op);
    /* The op is freed: release owner.  Any thread. */
    void (*free)(void *owner);
    /* A synchronous op completed (op->err: 0 or its error): its owner learns
     * it here instead of blocking in wrk_wait_op, which then collects it at
     * once.  Called with mu held (by the I/O, comm or ZeroMQ thread): be
     * quick, take no lock that is held while taking mu. */
    void (*done)(struct kvs_store *s, struct wrk_op *op);
} wrk_op_ops;

/* Build and queue an op of type (WRK_OP_INIT/PUSH/PULL/PUSHPULL).  vals:
 * data sent (init/push/pushpull); outs: where replies go (pull/pushpull);
 * arguments already checked (api.c).  sync_op: the caller waits with
 * wrk_wait_op (the op is its own); NULL: async, counted on its keys.  ops
 * and owner (may be NULL): the op's owner (wrk_op_ops); owner is the op's
 * on success (ops->free releases it with the op), still the caller's on
 * error.
 * gated (async only; may be NULL): the op's requests wait until the caller
 * opens them (wrk_op_open), in order, as it writes their data; *gated gets
 * the op (NULL when there was nothing to queue), which stays valid until the
 * caller's wrk_op_open_done.  0 or an error (with its message set). */
int wrk_submit(struct kvs_store *s, int type, size_t n, const uint64_t *keys,
               const kvs_array *vals, const kvs_array *outs, int priority,
               struct wrk_op **sync_op, const wrk_op_ops *ops, void *owner,
               struct wrk_op **gated);
/* Queue an op built outside the engine (sparse.c): store, type, sync, rsp,
 * nkeys, keys, kbusy (room), nreqs and reqs (headers without rounds, kidx
 * grouping a key's adjacent requests), pending, ops and owner set.  Checks
 * the keys, numbers the rounds and queues it as wrk_submit does.  0 (a sync
 * op is then the caller's to wait for; an async one without requests is
 * freed) or an error (op still the caller's). */
int wrk_submit_built(struct kvs_store *s, struct wrk_op *op);
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
/* The non-blocking half of wrk_wait_keys, called with mu once nothing
 * matching is unfinished: report and drop the finished failed ops that match
 * (first error, message set), and a failed job. */
int wrk_reap_locked(struct kvs_store *s, bool all, uint64_t key);
/* (mu) Whether an async op with key is unfinished. */
bool wrk_key_busy_locked(struct kvs_store *s, uint64_t key);

/* True if every async plain pull of key issued before its pulls_issued was
 * mark has finished (or the key is unknown).  Takes mu. */
bool wrk_key_pulls_done(struct kvs_store *s, uint64_t key, uint64_t mark);

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

/* ---- ops of local groups (group.c) ---- */

#define WRK_HELD_OUTS 8 /* outputs of one key in one call beyond the first */

/* One key of a held op: what the group layer needs of it. */
typedef struct wrk_held {
    uint64_t key, round, count;
    uint64_t pull_mark;  /* the key's pulls_issued when it was submitted (wrk_key) */
    kvs_dtype dtype;
    const uint8_t *src;  /* the push's data (the local sum of a repeated key) */
    uint8_t *dst;        /* the first output (NULL: a push) */
    int nouts;           /* further outputs of the same key */
    uint8_t *extra[WRK_HELD_OUTS];
} wrk_held;

/* A push, pushpull or pull (vals NULL) whose network work a local group
 * does (group.c): the keys are checked and numbered as wrk_submit does (a
 * key repeated in a push is summed into the op's own memory; a pull takes
 * the round of the key's pushes so far), and the op counts on each key
 * (kvs_wait) until released once per unique key with wrk_op_release.
 * held: room for n entries; filled for the unique keys (as op->keys).  On
 * success *out is the op (the store's).  User thread; takes mu. */
int wrk_submit_held(struct kvs_store *s, int type, size_t n, const uint64_t *keys,
                    const kvs_array *vals, const kvs_array *outs, struct wrk_op **out,
                    wrk_held *held);

/* on: the ops this thread queues from now on wait for it to say
 * wrk_io_defer(false), which wakes the I/O thread once for all of them (so
 * that it finds them together and fuses what it can).  Any thread. */
void wrk_io_defer(bool on);

struct wrk_part;
/* One request for one chunk of key k (round k->round), standing for
 * contrib workers: data at src (none for WRK_OP_PULL, contrib 0), a
 * pushpull's or pull's reply into dst.  A synchronous
 * op owned by (ops, owner): ops->done tells the owner it completed; collect
 * it then with wrk_wait_op.  0 (*out: the op, stored before the op is
 * queued, so an owner that ops->done hands to another thread finds it) or
 * an error (owner still the caller's). */
int wrk_submit_chunk(struct kvs_store *s, int type, const wrk_held *k,
                     const struct wrk_part *part, uint16_t contrib, const uint8_t *src,
                     uint8_t *dst, int priority, const wrk_op_ops *ops, void *owner,
                     struct wrk_op **out);

#endif
