/* store.h - the server's key store and dist_sync rounds.
 *
 * One entry per (key, part).  In dist_sync, round r of an entry completes
 * when each of the W workers has pushed its r-th push; pushes are summed into
 * the round buffer as they arrive (reduce/), then the sum becomes the stored
 * value and the waiting requests are answered.  Pushes for later rounds wait
 * in arrival order; pulls wait for the round the worker needs.
 *
 * Entries of at least offload_min bytes (DP_OFFLOAD_MIN, or
 * DP_OFFLOAD_MIN_CROWDED on a host with no CPU to spare) are summed (and
 * updated, and read from a worker's memory) by jobs off the loop (server/jobs.h), one job
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
#include "server/buf.h"
#include "server/norms.h"
#include "server/req.h"
#include "server/view.h"

typedef struct srv_entry srv_entry;

/* How the store answers: send a reply for request (ident, h).  status 0 and
 * value != NULL: the reply carries bytes of value (zero copy; the callee
 * takes a reference).  status < 0: text explains. */
typedef void (*srv_reply_fn)(void *arg, const uint8_t *ident, size_t ident_len,
                             const proto_hdr *req, int status, const char *text,
                             srv_buf *value, uint64_t round);

struct srv_optim;
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
    int *group, *lsize;  /* per worker rank: its local group (any id shared by the group's
                          * members) and the group's size; NULL: every worker alone */
    char broken_text[512];
    uint64_t rounds_done;
    uint64_t bytes_summed;
    struct met_series *m_round; /* histograms (may be NULL): first push to round done, */
    struct met_series *m_sum;   /* and the time summing one push */
    struct srv_optim *optim; /* server/update.h: with an active spec a round's sum
                              * is the gradient of an update (NULL: plain sums) */
    srv_store_hooks hooks;   /* what the store reports (server/ctl.c fills them) */
    struct srv_jobs *jobs;   /* server/jobs.h: where big entries' work runs (NULL:
                              * everything on the loop) */
    uint64_t offload_min;    /* entries of this many bytes and more go to jobs (0:
                              * DP_OFFLOAD_MIN) */
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
    /* What the keys themselves may take: key parts (KVS_MAX_KEYS) and bytes
     * (KVS_MAX_KEY_BYTES: values plus each entry's own size; 0: no bound).
     * Worker 0 creates every entry (its kvs_init), so these count what it
     * made this server hold; an init past either is answered KVS_EFULL. */
    uint64_t max_keys, max_key_bytes;
    uint64_t nkeys, key_bytes;
    uint64_t value_bytes;    /* the entries' values alone */
    /* lamb on split keys (server/norms.h): the parts' sums of squares per
     * round, and how this server's go to the other servers (NULL: they do
     * not; set by server.c: through the scheduler) */
    srv_norms norms;
    void (*norm_send)(void *arg, proto_hdr *h, const char *text);
    void *norm_arg;
    /* KVS_ELASTIC (docs/design.md "Elastic workers"): num_workers counts
     * slots; the membership epoch (0: not elastic), its member slots (NULL:
     * every slot) and how many contributions a round needs (num_workers
     * when not elastic) */
    uint64_t epoch;
    uint8_t *member;
    int need;
    /* replicated servers (server/replica.h; NULL: not replicated): called
     * whenever an entry's value or round changed (an init created or
     * replaced it, a round completed), before the answers that show it */
    void (*changed)(void *arg, const srv_entry_view *v);
    void *changed_arg;
} srv_store;

int srv_store_init(srv_store *st, int num_workers, red_pool *pool, srv_reply_fn reply,
                   void *arg);
void srv_store_fini(srv_store *st);

/* The job's local groups (from the node table): per worker rank, a group id
 * its group's members share and the group's size (num_workers entries each,
 * copied).  A push may then stand for its sender's whole group (proto.h
 * contrib).  0 or KVS_ENOMEM.  Loop thread. */
int srv_store_set_groups(srv_store *st, const int *group, const int *lsize);

/* Entries of this many bytes and more are summed by jobs (offload_min, 0:
 * DP_OFFLOAD_MIN). */
uint64_t srv_store_offload_min(const srv_store *st);

/* Handle one validated data request from worker rank wrank with its body
 * (in; NULL or empty when it has none).  The caller asked the controller
 * first whether it holds the request (srv_ctl_hold: a save or load runs).  A request by reference
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

/* A NORM_PART from another server (validated by proto_decode; body: its
 * text, len bytes): record it, and finish the updates it completes. */
void srv_store_norm_in(srv_store *st, const proto_hdr *h, const char *body, size_t len);

/* Send again this server's sums of every split part's last round (a
 * restarted scheduler may have lost them; a receiver that has them already
 * keeps them as they are). */
void srv_store_norm_resend(srv_store *st);

/* Make st elastic: epoch 1, whose members are slots [0, initial).  0 or
 * KVS_ENOMEM.  Loop thread, before any request. */
int srv_store_elastic(srv_store *st, int initial);
/* A new membership epoch (> st->epoch) with the member slots of an EPOCH
 * body (len bytes): every dist_sync entry drops its partial round (its
 * waiting pushes, later pushes and waiting pulls are answered
 * KVS_EMEMBERSHIP), now or, for an entry whose job runs, when the job
 * ends; later rounds need the new members.  0, or -1 with why (bad body:
 * nothing changed). */
int srv_store_epoch(srv_store *st, uint64_t epoch, const char *body, size_t len, char *why,
                    size_t whylen);
/* True if worker slot w is a member of the current epoch (always when not
 * elastic). */
bool srv_store_is_member(const srv_store *st, int w);

/* A node died: fail everything waiting, and every later request. */
void srv_store_fail_all(srv_store *st, const char *why);

/* ---- for server/ctl.c and server/ckpt.c (loop thread) ---- */

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
/* ---- for server/replica.c (loop thread) ---- */

/* Keep a copy of another server's entry (REPL_VALUE h: key, part, shape,
 * round; value takes ownership of one reference of a buffer of the entry's
 * bytes, upd (may be NULL) of the optimizer state): created, or replaced
 * unless the stored round is newer (then dropped: 0).  KVS_ESHAPE when an
 * entry of another shape exists, KVS_EINVAL when it has a round in progress
 * (a worker already pushed to it: it owns it), KVS_ENOMEM; on error nothing
 * is taken. */
int srv_store_copy_in(srv_store *st, const proto_hdr *h, srv_buf *value, struct srv_upd *upd);

/* The view of entry (key, part): true, or false when there is none. */
bool srv_store_view(srv_store *st, uint64_t key, uint32_t part, srv_entry_view *out);

#endif
