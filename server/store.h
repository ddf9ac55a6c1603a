/* store.h - the server's key store and dist_sync rounds.
 *
 * One entry per (key, part).  In dist_sync, round r of an entry completes
 * when each of the W workers has pushed its r-th push; pushes are summed into
 * the round buffer as they arrive (reduce/), then the sum becomes the stored
 * value and the waiting requests are answered.  Pushes for later rounds wait
 * in arrival order; pulls wait for the round the worker needs.
 *
 * Entries of at least DP_OFFLOAD_MIN bytes are summed (and updated, and
 * read from a worker's memory) by jobs off the loop (server/jobs.h), one job
 * per entry at a time: requests that would change an entry while its job
 * runs wait in its backlog, in arrival order, so contributions are summed
 * in the order they arrived, as when everything ran on the loop (pushes of
 * a round in arrival order: bit-identical across runs for two workers, and
 * whenever the arrival order repeats).  Smaller entries are handled on the
 * loop at once.
 *
 * Threads: the server's loop thread only, except inside jobs.  Stored values
 * are refcounted buffers, so a reply can send them without a copy while
 * ZeroMQ's I/O thread still reads them (srv_buf_unref is the only function
 * called there).
 */
#ifndef KVS_SERVER_STORE_H
#define KVS_SERVER_STORE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <zmq.h>

#include "common/hmap.h"
#include "proto/proto.h"
#include "reduce/reduce.h"

typedef struct srv_buf {
    atomic_int refs;
    uint64_t cap;
    uint8_t *data;
    bool is_msg;   /* data belongs to msg (an adopted received frame) */
    bool mapped;   /* data is a mapping of its own (srv_buf_new_value) */
    zmq_msg_t msg;
} srv_buf;

/* A request's body as it reaches the store, borrowed for the call: one
 * piece at data (a single frame, or a fused record: frames NULL), or nframes
 * frames in order (data NULL).  A request that must wait moves the frames
 * out (zmq_msg_move), or copies borrowed data.  A request by reference
 * (PROTO_F_CMA, h.cma_src) has no body here. */
typedef struct srv_in {
    const void *data;
    zmq_msg_t *frames;
    int nframes;
} srv_in;

/* A request that waits: its routing id, header and (pushes) data. */
typedef struct srv_req {
    struct srv_req *next;
    size_t ident_len;
    uint8_t ident[64];
    proto_hdr h;
    int nframes;     /* frames of the kept body (0: none) */
    zmq_msg_t body;  /* the body when nframes == 1 */
    zmq_msg_t *more; /* the frames when nframes > 1 */
    int wrank;
    uint64_t seq;        /* unique in the store (a job names requests by it) */
    uint64_t *held;      /* the worker's [bytes, requests] it counts against (NULL: none) */
    uint64_t held_bytes; /* its share of held[0] */
} srv_req;

typedef struct srv_entry srv_entry;

/* How the store answers: send a reply for request (ident, h).  status 0 and
 * value != NULL: the reply carries bytes of value (zero copy; the callee
 * takes a reference).  status < 0: text explains. */
typedef void (*srv_reply_fn)(void *arg, const uint8_t *ident, size_t ident_len,
                             const proto_hdr *req, int status, const char *text,
                             srv_buf *value, uint64_t round);

/* A job starts (delta +1) or ends (-1, before its answers) whose end answers
 * a request that came as a record of a fused message (proto_hdr.fuse, its
 * batch): the batch keeps the answers it collected until none is left
 * (server/fuse.h), so the many records of one message are answered in a few
 * FUSED_REPLY messages, not one per job.  arg is the store's reply_arg. */
typedef void (*srv_hold_fn)(void *arg, uintptr_t fuse, int delta);

struct srv_optim;
struct srv_ctl;
struct srv_jobs;
struct srv_cma;

typedef struct srv_store {
    hmap entries;        /* hash(key, part) -> srv_entry chain */
    hmap pending_inits;  /* hash(key, part) -> srv_req chain (waiting for rank 0) */
    int num_workers;
    red_pool *pool;
    srv_reply_fn reply;
    void *reply_arg;
    srv_hold_fn hold;    /* NULL: answers of fused records are not held */
    bool broken;         /* a node died: every request fails */
    uint8_t *left;       /* per worker rank: left the job (kvs_close); NULL: none did */
    char broken_text[512];
    uint64_t rounds_done;
    uint64_t bytes_summed;
    struct met_series *m_round; /* histograms (may be NULL): first push to round done, */
    struct met_series *m_sum;   /* and the time summing one push */
    struct srv_optim *optim; /* server/update.h: with an active spec a round's sum
                              * is the gradient of an update (NULL: plain sums) */
    struct srv_ctl *ctl;     /* server/ctl.h: collective requests; may hold data
                              * requests while it works (NULL: none) */
    struct srv_jobs *jobs;   /* server/jobs.h: where big entries' work runs (NULL:
                              * everything on the loop) */
    struct srv_cma *cma;     /* per worker rank: its proven memory (server/cma.h), for
                              * requests by reference (NULL: none) */
    uint64_t busy;           /* entries with a job running */
    uint64_t cma_fused;      /* values written into workers by the job of a round's
                              * last push (see start_push), not by a job of their own */
    /* What one worker may make the store keep for later (pushes for a later
     * round, pulls and inits that wait, requests waiting for a job): bytes
     * (bodies plus the requests' own size) and requests (KVS_MAX_QUEUED_BYTES
     * / KVS_MAX_QUEUED_REQUESTS; 0: no bound).  Past either, the request is
     * answered KVS_EFULL. */
    uint64_t max_held_bytes, max_held_reqs;
    uint64_t *held;          /* per worker rank: [bytes, requests] (NULL until needed) */
} srv_store;

int srv_store_init(srv_store *st, int num_workers, red_pool *pool, srv_reply_fn reply,
                   void *arg);
void srv_store_fini(srv_store *st);

/* Handle one validated data request from worker rank wrank with its body
 * (in; NULL or empty when it has none).  A request by reference
 * (PROTO_F_CMA) names the worker's memory in h->cma_src/cma_dst; the worker
 * proved that memory (st->cma[wrank]). */
void srv_store_handle(srv_store *st, const uint8_t *ident, size_t ident_len, int wrank,
                      const proto_hdr *h, const srv_in *in);

/* What waits in the store (for the metrics). */
typedef struct srv_store_depth {
    uint64_t keys;         /* entries (key parts) */
    uint64_t round_pushes; /* pushes summed into a round that is not complete */
    uint64_t pulls;        /* pulls waiting for a later round */
    uint64_t deferred;     /* pushes for a later round */
    uint64_t inits;        /* inits waiting for rank 0's values */
} srv_store_depth;
void srv_store_depths(const srv_store *st, srv_store_depth *d);
/* Worker wrank left the job normally: every round it did not push can never
 * complete, so the requests waiting for one (now or later) fail. */
void srv_store_worker_left(srv_store *st, int wrank);

/* A node died: fail everything waiting, and every later request. */
void srv_store_fail_all(srv_store *st, const char *why);

/* ---- for server/ctl.c and server/ckpt.c (loop thread) ---- */

/* What a checkpoint needs of an entry. */
typedef struct srv_entry_view {
    uint64_t key;
    uint32_t part;
    kvs_dtype dtype;
    uint64_t count, offset, total, bytes;
    uint64_t round;          /* completed rounds */
    bool async;
    const srv_buf *value;
    const struct srv_upd *upd; /* NULL: no update ran yet */
} srv_entry_view;

/* Number of entries; fill up to max views in hash-table order. */
size_t srv_store_views(srv_store *st, srv_entry_view *out, size_t max);
/* 0 if no round is in progress anywhere (no partial round, no deferred
 * push, no init waiting for rank 0, no job running), else KVS_EINVAL with
 * why. */
int srv_store_quiet(srv_store *st, char *why, size_t whylen);
/* True once any entry completed a round or holds a push. */
bool srv_store_pushes_began(srv_store *st);
/* Replace an entry's value, round and update state (taking ownership of
 * value's reference and of upd).  Returns KVS_ENOKEY when there is no such
 * entry (then nothing is taken). */
int srv_store_restore(srv_store *st, uint64_t key, uint32_t part, srv_buf *value,
                      uint64_t round, struct srv_upd *upd);
/* The view of entry (key, part): true, or false when there is none. */
bool srv_store_view(srv_store *st, uint64_t key, uint32_t part, srv_entry_view *out);

srv_buf *srv_buf_new(uint64_t bytes);
/* The same for a value from an init or a load: rounds that adopt received
 * frames replace it and free it, so one of DP_MAP_MIN bytes or more is a
 * mapping of its own, returned to the kernel then (the heap would keep it
 * resident beside the frames that replaced it).  Round buffers stay in the
 * heap, where a freed one is reused without page faults. */
srv_buf *srv_buf_new_value(uint64_t bytes);
/* A buffer made of a received frame (moved out of m): no copy. */
srv_buf *srv_buf_adopt(zmq_msg_t *m);
void srv_buf_unref(srv_buf *b);

#endif
