/* push.h - summing a push into an entry, and the push jobs of big entries
 * (private to server/; used by store.c).
 *
 * An entry of at least the store's offload_min bytes is summed (and updated, and
 * read from a worker's memory) by a job off the loop (server/jobs.h): the
 * store fills an srv_push_job on the loop, the job runs srv_push_run on a
 * job thread, and the store's end function (store.c's push_done) takes the
 * result back on the loop.  The round's last push may also write the sum
 * into the outputs of the requests it answers, piece by piece as they are
 * summed (write-backs), and its end holds the fused batches it answers
 * (srv_hold_fn) so that they are answered together.
 *
 * Threads: srv_sum_into any; srv_push_run a job thread; the rest the loop. */
#ifndef KVS_SERVER_PUSH_H
#define KVS_SERVER_PUSH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reduce/reduce.h"
#include "server/cma.h"
#include "server/jobs.h"
#include "server/req.h"
#include "server/store_int.h"
#include "server/update.h"

enum srv_sum_mode {
    SUM_NONE, /* nothing to sum (the push became the round buffer) */
    SUM_COPY, /* dst = body */
    SUM_ADD,  /* dst += body */
    SUM_BASE, /* dst = base + body */
};

/* Sum the body of in (bytes bytes), or the worker's memory at addr when cma
 * is not NULL, into dst as mode says, piece by piece at the pieces'
 * offsets (each element goes through the same operation as with one
 * piece, so the result does not depend on how the body was cut).  Any
 * thread.  0, or an errno of a failed read. */
int srv_sum_into(red_pool *pool, kvs_dtype dt, uint8_t *dst, const uint8_t *base,
                 uint64_t bytes, const srv_in *in, const srv_cma *cma, uint64_t addr, int mode);

struct srv_store;

/* A worker's output that the job of a round's last push writes the round's
 * value into, piece by piece as each piece is summed (see store.c's start_push). */
typedef struct srv_wb_target {
    srv_cma cma;    /* the worker's proven memory, as checked on the loop */
    uint64_t dst;   /* its request's output (h.cma_dst) */
    uint64_t seq;   /* its request (srv_req.seq): done() finds it again by this */
    atomic_int err; /* errno of a failed write, 0 if none */
    bool same;      /* the round is one push read from this very address (a local
                       group's sum, standing for every worker): the value is
                       already there, nothing to write */
} srv_wb_target;

/* Work of a job on an entry (server/jobs.h): summing a push (sync: into the
 * round buffer; async: value + push into a new buffer), then an update. */
typedef struct srv_push_job {
    srv_job j; /* first: the engine hands this back */
    struct srv_store *st; /* for the job's end (store.c) */
    red_pool *pool;       /* the store's reduction pool */
    srv_hold_fn hold;     /* the store's hold function and its argument (may be NULL) */
    void *hold_arg;
    srv_entry *e;
    srv_req *r;     /* the push; owns its body */
    int mode;       /* enum sum_mode */
    uint8_t *dst;
    srv_buf *nb;    /* async: the new value (dst) */
    srv_buf *old;   /* the value (a reference): SUM_BASE's base, the update's weight */
    bool by_ref;
    srv_cma cma;    /* by_ref: the worker's proven memory, as checked on the loop */
    bool update;    /* then the optimizer (step prepared on the loop) */
    bool zenc;      /* then the round's compressed replies (decomp.h srv_decomp_round) */
    srv_upd_step step;
    int uerr;       /* the update could not be prepared: fail the round with why */
    int err;        /* errno of a failed read */
    uint64_t ns;
    char why[PROTO_ERRTEXT_MAX];
    srv_wb_target *wb;  /* the round's last push: outputs to write as pieces are summed */
    int nwb;
    atomic_int perr; /* with wb: errno of the first failed read of a piece */
    uintptr_t *holds; /* batches of fused requests its end answers (hold) */
    int nholds;
} srv_push_job;

/* The job's work: sum (and write back), then the update or the compressed
 * replies' encoding (a job thread). */
void srv_push_run(srv_job *j);
/* The round's last push r: its job also writes the sum into the outputs
 * (by reference, of workers proven in cmas[0..num_workers)) of the requests
 * the round's completion answers (p->wb; none when out of memory). */
void srv_push_write_backs(srv_cma *cmas, int num_workers, srv_entry *e, srv_req *r,
                          srv_push_job *p);
/* After the job: mark the requests whose outputs it wrote; returns how many
 * were written. */
size_t srv_push_mark_written(srv_entry *e, srv_req *r, const srv_push_job *p);
/* Hold the fused batches that p's end answers (r; with last, the round's
 * completion too) until srv_push_release_answers. */
void srv_push_hold_answers(srv_entry *e, srv_req *r, srv_push_job *p, bool last);
void srv_push_release_answers(srv_push_job *p);

#endif
