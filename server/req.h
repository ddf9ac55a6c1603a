/* req.h - a data request as the store takes it (srv_in) and keeps it while
 * it waits (srv_req): the types that the store (store.c), its push jobs
 * (push.c), the controller and the fused-message layer share.
 * Threads: the loop thread; a push job reads its own request's body. */
#ifndef KVS_SERVER_REQ_H
#define KVS_SERVER_REQ_H

#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "proto/proto.h"

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
    uint64_t *rsp_ids;   /* a row-sparse request's row indices (server/sparse.h), or NULL */
    uint64_t rsp_n, rsp_row_len;
} srv_req;

/* The body r owns, as an srv_in. */
static inline srv_in srv_req_in(srv_req *r)
{
    srv_in in = {NULL, NULL, 0};
    if (r->nframes == 1)
        in = (srv_in){zmq_msg_data(&r->body), &r->body, 1};
    else if (r->nframes > 1)
        in = (srv_in){NULL, r->more, r->nframes};
    return in;
}

/* A job starts (delta +1) or ends (-1, before its answers) whose end answers
 * a request that came as a record of a fused message (proto_hdr.fuse, its
 * batch): the batch keeps the answers it collected until none is left
 * (server/fuse.h), so the many records of one message are answered in a few
 * FUSED_REPLY messages, not one per job.  arg is the store's reply_arg. */
typedef void (*srv_hold_fn)(void *arg, uintptr_t fuse, int delta);

/* What the store reports to the one who controls it (server/ctl.c fills
 * these; each may be NULL).  Called on the loop thread with hooks.arg. */
typedef struct srv_store_hooks {
    /* An entry completed dist_sync round r (automatic checkpoints). */
    void (*round_done)(void *arg, uint64_t r);
    /* The job failed (srv_store_fail_all, after the store failed its own
     * waiting requests): answer what waits elsewhere. */
    void (*failed)(void *arg, const char *why);
    void *arg;
} srv_store_hooks;

#endif
