/* wrk_int.h - libkvs internals (private to worker/).
 *
 * Threads: user threads build operations (wrk_op) and queue them under
 * store->mu; the store's I/O thread owns the loop, the sockets and the
 * request map, sends, and completes requests as replies arrive.  ZeroMQ's
 * own thread may release zero-copy frames (wrk_op_release).  Everything in
 * kvs_store marked (mu) is protected by store->mu; (io) is the I/O thread's.
 */
#ifndef KVS_WORKER_INT_H
#define KVS_WORKER_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "common/config.h"
#include "common/hmap.h"
#include "kvs.h"
#include "net/link.h"
#include "net/live.h"
#include "net/net.h"
#include "net/pace.h"
#include "reduce/reduce.h"
#include "worker/pq.h"
#include "worker/reqmap.h"
#include <stdatomic.h>

enum wrk_kind { WRK_LOCAL = 1, WRK_DIST };
enum wrk_optype { WRK_OP_INIT = 1, WRK_OP_PUSH, WRK_OP_PULL, WRK_OP_PUSHPULL, WRK_OP_BARRIER,
                  WRK_OP_EXIT, WRK_OP_CTL /* a collective to every server (ctl.c) */ };

/* ---- routing (route.c) ---- */

typedef struct wrk_part {
    uint32_t part;   /* index within the key */
    int server;      /* server rank */
    uint64_t offset; /* first element */
    uint64_t count;  /* elements */
} wrk_part;

typedef struct wrk_routing {
    int num_servers;
    uint64_t bigarray_bound;
    bool p3;
    uint64_t slice;
    uint64_t chunk_bytes; /* KVS_CHUNK_BYTES: parts are cut into messages of at most this */
} wrk_routing;

/* Number of parts of a key of count elements (0 when count == 0). */
uint64_t wrk_route_nparts(const wrk_routing *r, uint64_t count);
/* Part i of key (0 <= i < wrk_route_nparts). */
void wrk_route_part(const wrk_routing *r, uint64_t key, uint64_t count, uint64_t i,
                    wrk_part *out);
/* The messages of a key: every placement part cut into chunks of at most
 * chunk_bytes (at least one element), numbered 0, 1, ... in order; a key of
 * 0 elements is one empty message to its home server.  Fills out (if not
 * NULL) and returns the number of messages. */
uint64_t wrk_route_chunks(const wrk_routing *r, uint64_t key, uint64_t count, size_t esz,
                          wrk_part *out);
/* MXNet's split point of n things into s parts at part i, and a key's home
 * server (the placement rules above, for sparse.c's row ranges). */
uint64_t wrk_route_split(uint64_t n, uint64_t i, uint64_t s);
int wrk_route_home(uint64_t key, int num_servers);

/* ---- operations ---- */

typedef struct wrk_op wrk_op;

typedef struct wrk_req {
    wrk_op *op;
    uint64_t req_id;
    int server;          /* -1: the scheduler */
    proto_hdr h;         /* prepared header */
    const uint8_t *send; /* body to send, h.body_len bytes (or NULL) */
    int nouts;
    uint8_t **outs;      /* where reply data goes (each h.count elements) */
    bool cma_out;        /* (io) sent by reference: the server writes outs[0] itself */
    bool fref;           /* (io) waits to leave by reference in a FUSED_REF message */
    bool fframe;         /* (io) waits to leave fused with its body in a record frame */
    uint64_t t_sent;     /* (io) clock_ns() when sent (metrics, trace) */
    uint32_t kidx;       /* index of its key in op->keys (trace) */
    struct wrk_req *hnext; /* (io) in held[server]: waits for that server's HELLO answer */
    uint64_t batch;      /* (io) req_id of the FUSED message that carried it, or 0 */
    bool credited;       /* (io) its zero-copy body counts against the p3 credit */
    bool zc;             /* its body is lent to ZeroMQ (>= DP_ZERO_COPY_MIN): the op's
                          * pending counts one more release for it (op.h) */
} wrk_req;

/* (io) Small parts (and big ones by reference) for one server waiting to
 * leave as one FUSED (or FUSED_REF) message. */
typedef struct wrk_fuse {
    wrk_req **reqs;
    size_t n, cap;
    uint64_t bytes; /* body of the FUSED message so far */
    size_t nref;    /* records by reference among them: the message is a FUSED_REF */
    size_t nframe;  /* records whose body is a record frame (fframe) */
    uint64_t fbytes; /* their bodies' bytes */
    uint64_t big;   /* bytes of its parts of DP_FUSE_MAX and more, sent or answered
                     * (at most DP_FUSE_FRAMES_MAX) */
} wrk_fuse;

struct wrk_op {
    kvs_store *store;
    wrk_op *next, *prev; /* (mu) store->ops */
    wrk_op *qnext;       /* (mu) store->queue */
    int type;
    size_t nkeys;
    uint64_t *keys;      /* unique keys of the op, for kvs_wait(key) */
    size_t **kbusy;      /* (mu) per key: its counter of unfinished async ops (in its
                          * wrk_key), or NULL: counted in store->busy (op.c) */
    int pending;         /* (mu) replies + zero-copy frames outstanding */
    int err;             /* (mu) first error */
    char errtext[512];
    bool done;           /* (mu) */
    bool sync;           /* a caller waits for this op itself */
    size_t nreqs;
    wrk_req *reqs;
    uint8_t **outptrs;   /* storage behind reqs[].outs */
    void *tmp;           /* locally summed push data */
    void *ztmp;          /* compressed push bodies (compress.h) */
    void *zundo;         /* KVS_ELASTIC: the residuals its encodes changed, as they were
                          * (compress.h: wrk_codec_undo) */
    uint64_t trace_id;   /* KVS_TRACE: the op's number (0: not traced) */
    uint32_t *tleft;     /* KVS_TRACE: per key, parts not yet replied (io) */
    const struct wrk_op_ops *ops; /* its owner's operations (op.h), or NULL */
    void *owner;         /* its owner's data (comm.c: host staging; ctl.c: where a
                          * collective's answers go) */
    /* gated ops (wrk_submit's gated): their requests leave only as the comm
     * layer stages their data (wrk_op_open) */
    bool gated;
    size_t ready;        /* (mu) requests that may be sent: reqs[0..ready) */
    size_t cut;          /* (mu) requests from here are dropped with cut_err (staging failed) */
    int cut_err;         /* (mu) */
    size_t sent;         /* (io) requests handed on (sent, queued or dropped) so far */
    wrk_op *gnext;       /* (io) store->gated */
    bool rsp;            /* a row-sparse op (sparse.c): the only kind a row-sparse key takes */
};

typedef struct wrk_key {
    uint64_t count;
    kvs_dtype dtype;
    uint64_t pushes; /* pushes issued by this worker: the next push's round */
    uint8_t *local;  /* local store: the value */
    size_t busy;     /* (mu) unfinished async ops with this key (op.c) */
    uint64_t pulls_issued, pulls_done; /* (mu) async plain pulls of this key issued and
                                          finished: a local group posts a push only after
                                          the pulls issued before it (group.c) */
    uint64_t row_len; /* (mu) a row-sparse key's row length (sparse.c); 0: dense */
} wrk_key;

struct kvs_store {
    int kind;
    bool async;
    int comm_mode; /* enum wrk_comm_mode */
    cfg c;
    char who[32];
    wrk_routing routing;
    red_pool *pool;
    struct wrk_comm *comm; /* comm.c: device arrays, device store types */
    const struct wrk_grp_devops *grp_devops; /* comm.c's device work for the group */

    pthread_mutex_t mu;
    pthread_cond_t cv;
    wrk_op *ops_head, *ops_tail; /* (mu) not done, or done with an unreported error */
    wrk_op *q_head, *q_tail;     /* (mu) waiting for the I/O thread */
    hmap keys;                   /* (mu) key -> wrk_key */
    size_t nrsp;                 /* (mu) row-sparse keys among them (sparse.c) */
    hmap busy;                   /* (mu) key without a wrk_key -> unfinished async ops
                                  * with it (uintptr_t); other keys count in wrk_key */
    size_t nbusy;                /* (mu) unfinished async ops */
    size_t nfailed;              /* (mu) listed async ops that failed, not yet reported */
    int fatal;                   /* (mu) job broken: every call fails with it */
    char fatal_text[512];        /* (mu) */
    bool registered;             /* (mu) */
    int dead_servers, dead_workers; /* (mu) nodes the scheduler declared dead */
    bool sched_gone;             /* (mu) the scheduler ended the job or went silent */
    bool stop;                   /* (mu) I/O thread must stop */
    int rank, node_id, num_workers, num_servers; /* rank: the slot (node id 9 + 2*rank) */
    /* KVS_ELASTIC (worker/elastic.h): (mu) the epoch the I/O thread knows,
     * with the rank and size it gives this worker; the epoch the program
     * works in, with its rank and size (kvs_rank, kvs_num_workers);
     * admitted: a member (a joiner waits in kvs_create until it is);
     * joiner: registered while the job ran (its inits send no values) */
    uint64_t epoch_known, epoch_seen;
    int known_rank, known_num, e_rank, e_num;
    bool admitted, joiner;
    uint64_t ctl_seq;            /* (mu) collectives issued (ctl.c) */
    struct wrk_notify *notify;   /* (mu) completion callbacks (notify.c), or NULL */
    struct wrk_codec *codec;     /* gradient compression (compress.h), or NULL; set under
                                  * mu before the first push, then read-only */
    bool pushed;                 /* (mu) a push or pushpull was queued */
    pthread_mutex_t zx_mu;       /* zexempt (a leaf lock) */
    hmap zexempt;                /* (zx_mu) keys kvs_compression_exempt named -> 1 */
    atomic_bool any_exempt;      /* zexempt has a key: pushes look it up */

    /* (io) */
    pthread_t thread;
    bool thread_started;
    uv_loop_t loop;
    uv_async_t wake;
    void *zctx;
    net_link *link;
    net_sock **servers;
    wrk_reqmap reqs; /* req_id -> wrk_req */
    hmap batches;    /* FUSED req_id -> records (high 32 bits) and unanswered (low 32) */
    wrk_fuse *fuse;  /* per server: parts to fuse at the end of this wake-up */
    wrk_op *gated;   /* gated ops with requests not yet handed on */
    /* p3 with KVS_P3_CREDIT: per server, requests waiting for credit, and the
     * bytes handed to ZeroMQ that it has not written to the socket yet
     * (decremented by ZeroMQ's thread) */
    wrk_pq *pq;
    _Atomic uint64_t *inflight;
    bool credit_live; /* (mu) credit releases may wake the loop */
    bool *cma;       /* per server: it copies our memory directly (HELLO accepted) */
    wrk_req *hellos; /* per server: the HELLO request (op NULL) */
    bool *hello_wait;  /* per server: HELLO not answered yet: data requests are held, so
                        * that the first ones already take the path the answer picks */
    wrk_req **held_head, **held_tail; /* per server: the held requests, in order */
    uint8_t *nonces; /* per server: PROTO_NONCE_LEN bytes where we write its challenge, so
                      * that it can prove we are the process we named (server/cma.h) */
    uv_timer_t grace;  /* fails direct-copy requests a live server never answered */
    bool grace_on;
    int *owner;        /* KVS_REPLICAS=1: per key range, the server that owns it now
                        * (failover.h); NULL: not replicated */
    net_mon **mons;    /* per server: connection events of its socket */
    net_pacer *pacer;  /* KVS_LINK_GBPS: paces the connections to servers on
                        * other hosts (NULL: not paced) */
    bool *connected;   /* per server: its connection came up */
    char (*server_ep)[128]; /* per server: its endpoint, for messages */
    uv_timer_t connect_timer; /* servers not connected by PS_HEARTBEAT_TIMEOUT are lost */
    struct mon_arg *mon_args; /* per server: what its monitor callback gets */
    bool leaving;      /* EXIT sent: closing connections are expected now */
    bool io_failed;    /* the job failed: server sockets close once idle */
    bool *srv_gone;    /* per server: its connection closed after the job began to fail
                        * (wrk_io_server_gone), so nothing by reference waits for it */
    uint64_t next_req;
    /* barriers sent to the scheduler and passed (I/O thread): a restarted
     * scheduler learns the count (KVS_SCHEDULER_GRACE) */
    uint64_t barriers_sent, barriers_passed;
    char host[CFG_HOST_MAX];
    struct wrk_met *met;  /* metrics (worker/metrics.c); counters atomic */
    struct wrk_trace *trace; /* KVS_TRACE timeline (worker/trace.c), or NULL */
    uint64_t trace_seq;   /* last op number given (atomic) */
    uv_timer_t met_timer; /* (io) heartbeat age, once a second */

    /* local group (group.h); set before kvs_create returns, then read-only */
    int local_rank, local_size, local_group; /* alone: 0, 1, -1 */
    bool local_agg;                /* KVS_LOCAL_AGG in effect */
    uint64_t local_agg_min;        /* KVS_LOCAL_AGG_MIN: smaller keys skip the group */
    bool local_agg_min_auto;       /* not given: its default, by layout (group.c) */
    bool grp_host_direct;          /* that default here: host arrays skip the group (a
                                    * group of 2 that every server reads directly) */
    int local_rank_env, local_size_env; /* as given (-1: not given) */
    uint8_t local_nonce[PROTO_NONCE_LEN]; /* the proof group members read */
    char grp_reg[400];             /* what this worker registers with */
    uint64_t job_id;
    proto_node *peers;             /* the group's members by local rank */
    struct wrk_grp *grp;           /* the running group (NULL: none) */
    void (*grp_pull_done)(struct kvs_store *s); /* (mu) group.c's: an async pull finished */
};

/* Replicated servers: the server that owns key range r now (r without
 * replicas; failover.c keeps s->owner).  I/O thread. */
static inline int wrk_fo_route(const struct kvs_store *s, int r)
{
    return s->owner && r >= 0 && r < s->num_servers ? s->owner[r] : r;
}

/* io.c */
int wrk_io_start(kvs_store *s);      /* start the thread; wait for registration */
void wrk_io_stop(kvs_store *s);      /* stop and join; frees the loop and sockets */

/* sparse.c: KVS_EINVAL (message set) if one of keys is row-sparse: dense
 * push, pull and pushpull paths that do not reach op.c's check call it.
 * User thread; takes mu. */
int wrk_rsp_dense_check(kvs_store *s, size_t n, const uint64_t *keys);

/* local.c */
int wrk_local_init(kvs_store *s, size_t n, const uint64_t *keys, const kvs_array *vals);
int wrk_local_push(kvs_store *s, size_t n, const uint64_t *keys, const kvs_array *vals);
int wrk_local_pull(kvs_store *s, size_t n, const uint64_t *keys, const kvs_array *outs);
int wrk_local_check(kvs_store *s, size_t n, const uint64_t *keys, const kvs_array *arrays,
                    const char *what);
void wrk_local_free(kvs_store *s);


#endif
