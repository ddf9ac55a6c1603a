/* proto.h - the wire format: encode, decode and validate messages.
 *
 * Pure: no sockets, no threads, no allocation except where stated.
 *
 * A message is a ZeroMQ multipart message of one or two frames:
 *   frame 1: the header, exactly PROTO_HDR_SIZE bytes, little-endian;
 *   frame 2: optional body of hdr.body_len bytes: array data (count elements
 *            of dtype) for data messages, UTF-8 text for control messages and
 *            error replies.
 *
 * Header layout (offsets in bytes):
 *    0 u32 magic 'KVS1'     4 u16 version        6 u16 type
 *    8 u16 flags           10 u16 contrib        12 i32 sender node id
 *   16 i32 status          20 i32 priority      24 u64 req_id
 *   32 u64 key             40 u64 offset        48 u64 count
 *   56 u64 total           64 u64 round         72 u32 dtype
 *   76 u32 part            80 u64 body_len      (88 bytes)
 *
 * contrib: how many workers a PUSH or PUSHPULL stands for (1 for one worker's
 * own push; a local group's sum stands for its whole group, see
 * server/store.h).  0 in a push is refused by proto_decode; other types send 0.
 *
 * Node ids (ps-lite): scheduler 1, server rank r = 8 + 2r, worker rank r = 9 + 2r.
 */
#ifndef KVS_PROTO_H
#define KVS_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvs.h"

#define PROTO_MAGIC 0x3153564Bu /* "KVS1" as little-endian bytes */
#define PROTO_VERSION 1
#define PROTO_HDR_SIZE 88
#define PROTO_TEXT_MAX (16u << 20) /* largest text body (node tables) */
#define PROTO_ERRTEXT_MAX 4096u    /* largest error text in a reply */
#define PROTO_NORM_TEXT_MAX 128u   /* largest NORM_PART body */
#define PROTO_EPOCH_TEXT_MAX (8u << 16) /* largest EPOCH body (65536 slots of 7 bytes) */

/* The round of a data request of an elastic job (KVS_ELASTIC) carries the
 * sender's membership epoch in its top bits; the rest is the round counted
 * in that epoch (docs/design.md "Elastic workers").  Jobs that are not
 * elastic send epoch 0, so their rounds are unchanged. */
#define PROTO_EPOCH_SHIFT 40
#define PROTO_ROUND_MASK ((UINT64_C(1) << PROTO_EPOCH_SHIFT) - 1)
#define PROTO_ROUND_EPOCH(round) ((round) >> PROTO_EPOCH_SHIFT)

#define PROTO_SCHEDULER_ID 1

enum proto_type {
    PROTO_REGISTER = 1,  /* node -> scheduler; text body "role=... endpoint=... rank=..." */
    PROTO_REGISTER_ACK,  /* scheduler -> node; key = assigned node id; round = a random id
                          * of the job (the same for every node); text body = node table */
    PROTO_HEARTBEAT,     /* node -> scheduler */
    PROTO_HEARTBEAT_ACK, /* scheduler -> node */
    PROTO_BARRIER,       /* worker -> scheduler */
    PROTO_BARRIER_DONE,  /* scheduler -> worker; req_id echoes the BARRIER */
    PROTO_NODE_DEAD,     /* scheduler -> all; key = dead node id; text body = why */
    PROTO_EXIT,          /* worker -> scheduler: leaving the job */
    PROTO_EXIT_ACK,      /* scheduler -> worker */
    PROTO_SHUTDOWN,      /* scheduler -> node: the job is over (status != 0: failed) */
    PROTO_INIT,          /* worker -> server; data body from rank 0, none from others */
    PROTO_PUSH,          /* worker -> server; data body; round = this worker's push number */
    PROTO_PULL,          /* worker -> server; round = pushes this worker issued before */
    PROTO_PUSHPULL,      /* worker -> server; data body; round as PUSH */
    PROTO_REPLY,         /* server -> worker; status; data body (pull) or error text */
    PROTO_ERROR,         /* anyone -> sender of a bad message; status; text body */
    PROTO_HELLO,         /* worker -> server: offer direct memory access; body: proto_hello */
    PROTO_BASE_END,      /* end of the first contiguous types (not a type) */
    /* liveness (40-47) */
    PROTO_NODE_LEFT = 40, /* scheduler -> servers: key = id of a worker that left the job
                           * normally (kvs_close); text body = who.  Rounds that still
                           * need its push can never complete. */
    PROTO_PEER_LOST = 41, /* node -> scheduler: key = id of a peer whose data connection
                           * this node lost (closed, or silent past the heartbeat
                           * timeout, or never connected); text body = why */
    /* operations (56-63) */
    PROTO_TIMING = 56,   /* server -> worker, just before the REPLY to a request that had
                          * PROTO_F_TRACE: req_id, key, part echo it; body: proto_timing */
    /* Ranges reserved per feature so that parallel work never reuses a value:
     *   32-39 security (authentication, challenges)
     *   40-47 liveness (departures, data-path pings)
     *   48-55 server updates (optimizers, checkpoints)
     *   56-63 operations (metrics, traces)
     *   64-71 workloads (fused batches, credits)
     *   72-79 membership (elastic workers)
     *   80-87 servers to servers through the scheduler (lamb's norms)
     *   88-95 replicated servers (KVS_REPLICAS; docs/design.md "Replicated servers")
     * A type is known when proto_type_name() has a name for it. */
    /* 32-39: security */
    PROTO_REFUSED = 32,   /* scheduler -> node: registration refused; status = the error
                           * (KVS_ECONFIG job full / id taken / size mismatch, KVS_EAUTH);
                           * text body = the reason.  The node exits at once. */
    PROTO_CHALLENGE = 33, /* server -> worker: answer to a HELLO; body = PROTO_NONCE_LEN
                           * fresh random bytes the worker must write into its memory */
    PROTO_PROOF = 34,     /* worker -> server: the challenge is at nonce_addr now; body =
                           * proto_hello (pid, nonce_addr, the challenge) */
    PROTO_ANNOUNCE = 35,  /* worker -> server, first on every data connection: this
                           * connection is worker <sender>.  No body, no answer (an error
                           * only when it is refused).  The server binds the worker to
                           * it, so its connection guard never closes it (net/guard.h). */
    /* 48-55 server updates.  Collective: every worker sends one to every
     * server; round = the worker's count of such calls (its sequence); a
     * server acts once all workers' requests of a sequence arrived, with
     * worker rank 0's content, and answers each with the same REPLY. */
    PROTO_OPT_SET = 48,  /* text body: optimizer spec; key: 1 = MXNET_UPDATE_ON_KVSTORE=1 */
    PROTO_OPT_KEY = 49,  /* key; text body: "lr_mult=X wd_mult=Y" */
    PROTO_SAVE = 50,     /* text body: "G DIR" (generation, directory); key: save id.
                          * Writes generation G's file durably; not committed */
    PROTO_LOAD = 51,     /* text body: "G DIR" (G 0: DIR holds the files itself).  REPLY:
                          * round = the save id, body = count int64 (key, round) pairs:
                          * read, checked and staged, not applied */
    PROTO_LOAD_END = 52, /* key 1: apply the staged load; 0: drop it */
    PROTO_SAVE_END = 53, /* key 1: commit the SAVE's generation in the server's manifest;
                          * 0: remove its file */
    PROTO_CKPT_LIST = 54,  /* text body: directory.  REPLY body: int64 pairs (flags, highest
                            * generation found), then (generation, save id) of each one
                            * the server's manifest names, newest first (server/ckpt.h) */
    PROTO_SAVE_CLEAN = 55, /* key: generation G, committed on every server: the manifest
                            * keeps only G, older generations' files are removed */
    /* 64-71: workloads */
    PROTO_FUSED = 64,       /* worker -> server: several small data requests (INIT, PUSH,
                             * PULL, PUSHPULL) in one message; count = records; body =
                             * records (proto_fused_next).  Each record is handled as if
                             * it had come alone; its answer is a record of a FUSED_REPLY. */
    PROTO_FUSED_REPLY = 65, /* server -> worker: REPLY records answering records of FUSED
                             * or FUSED_REF requests (req_id = the FUSED's; records of one
                             * FUSED may come in several FUSED_REPLYs, as their rounds
                             * complete).  The answer to a record by reference whose value
                             * the server wrote into the worker's memory has PROTO_F_CMA
                             * and no body. */
    PROTO_FUSED_REF = 66,   /* worker -> server: as FUSED, but a record may also be by
                             * reference (PROTO_F_CMA; its body is a PROTO_CMA_LEN
                             * descriptor, the data stays in the worker's memory): many big
                             * same-host key parts in one message.  Refused whole
                             * (PROTO_ERROR, KVS_EPROTO) unless the sender proved its memory
                             * (HELLO/PROOF) on this connection. */
    /* 72-79: membership (KVS_ELASTIC; docs/design.md "Elastic workers") */
    PROTO_EPOCH = 72,     /* scheduler -> every live server, then (once every server
                           * answered) every member worker: a new membership epoch.
                           * round = the epoch; text body = its member slots in rank
                           * order ("1 3 0": the workers the job started with first, then
                           * by admission; at most PROTO_EPOCH_TEXT_MAX bytes) */
    PROTO_EPOCH_ACK = 73, /* server -> scheduler: round = the epoch it switched to */
    /* 80-87: servers to servers, relayed by the scheduler (small scalars,
     * never array data) */
    PROTO_NORM_PART = 80, /* server -> scheduler -> every other server: lamb's sums of
                           * squares of one part of a split key for a round.  key,
                           * round (the round being completed), offset, count, total:
                           * the part; text body "WSQ RSQ" (sum(w^2) and sum(r^2) as C99
                           * hex floats, "%a"; at most PROTO_NORM_TEXT_MAX bytes).  No
                           * answer (server/norms.h) */
    /* 88-95: replicated servers (KVS_REPLICAS=1) */
    PROTO_REPL_VALUE = 88, /* owner server -> its backup, on a direct connection: an entry's
                            * value changed.  key, part, offset, count, total, dtype: the
                            * entry; round: its completed rounds; req_id: the owner's
                            * forward sequence; flags PROTO_F_ASYNC: a dist_async key.
                            * Body: the value (count elements of dtype), then the optimizer
                            * state (server/update.h) when body_len is larger.  Answer:
                            * REPL_ACK */
    PROTO_REPL_ACK = 89,   /* backup -> owner: req_id, key, part echo the REPL_VALUE;
                            * status: 0, or why the copy was not kept */
    PROTO_PROMOTE = 90,    /* scheduler -> every live node: server key (node id) died and
                            * server round (node id) owns its key ranges now; text body
                            * "owners=O0,O1,..." (the owner rank of every range) */
    PROTO_REPL_SYNCED = 91, /* server -> scheduler: every entry it owns is acknowledged by
                             * its backup, server key (node id) */
    PROTO_TYPE_MAX = 96 /* every type is below this */
};

enum proto_flags {
    PROTO_F_ASYNC = 1u << 0, /* INIT: the key runs dist_async */
    PROTO_F_CMA = 1u << 1,   /* data by reference: the body is a proto_cma descriptor (a
                              * request) or empty (a reply: the value was written there) */
    PROTO_F_ZPULL = 1u << 2, /* PUSH/PUSHPULL with a codec: the worker asks for the
                              * key part's round sums compressed in the replies too
                              * (its spec's pull=1; every push must say the same) */
    PROTO_F_FRAME = 1u << 3, /* a record of a fused body (never a lone message) whose
                              * body_len bytes are not in the records' frame but in a
                              * frame of their own after it: the message's record frames
                              * follow the records' frame in record order
                              * (proto_fused_next).  Never with PROTO_F_CMA, nor on an
                              * error answer */
    PROTO_F_RSP = 1u << 4,   /* PUSH, PUSHPULL, PULL of a row-sparse key: the body is
                              * row-sparse (proto/rsp.h); never with PROTO_F_CMA or a
                              * codec.  (Bits 5-7 are free.) */
    PROTO_F_CODEC = 0xFu << 8, /* PUSH/PUSHPULL of dense float32, or the REPLY to a
                                * PULL/PUSHPULL of one: bits 8-11 name the gradient codec
                                * of the body (reduce/codec.h ids; 0: plain data).  The
                                * body is then the encoded part (its length is the
                                * codec's, checked by its receiver), never by reference */
    PROTO_F_TRACE = 1u << 15, /* data request: the worker traces it (KVS_TRACE); the server
                               * sends a PROTO_TIMING before the reply */
};

/* The codec id in flags (0: none). */
#define PROTO_CODEC_SHIFT 8
#define PROTO_CODEC(flags) (((unsigned)(flags) >> PROTO_CODEC_SHIFT) & 0xFu)

/* Same-host data path ("cross-memory attach").  A worker on the server's
 * host may send, instead of the data, the addresses of its buffers; the server
 * copies with process_vm_readv/writev (one copy instead of two kernel socket
 * copies each way).  The server accepts it only after a HELLO proved that it
 * can read the worker's memory: it reads PROTO_NONCE_LEN random bytes at
 * nonce_addr of pid and compares them with the nonce in the HELLO. */
#define PROTO_NONCE_LEN 16
#define PROTO_HELLO_LEN (16 + PROTO_NONCE_LEN) /* u64 pid, u64 nonce_addr, nonce */
#define PROTO_CMA_LEN 16                         /* u64 src_addr, u64 dst_addr */
/* PROTO_TIMING body: u64 ns the request spent on the server (arrival to
 * reply), u64 ns summing its data, u64 ns from its arrival to the round's
 * completion (0 when it waited for no round). */
#define PROTO_TIMING_LEN 24
/* A row-sparse body (PROTO_F_RSP) starts with u64 nrows, u64 row_len
 * (proto/rsp.h). */
#define PROTO_RSP_HDR 16

typedef struct proto_hdr {
    uint16_t type;
    uint16_t flags;
    uint16_t contrib; /* PUSH/PUSHPULL: workers this push stands for (>= 1) */
    int32_t sender;
    int32_t status;
    int32_t priority;
    uint64_t req_id;
    uint64_t key;
    uint64_t offset; /* element offset of this part within the key */
    uint64_t count;  /* elements in this part */
    uint64_t total;  /* elements of the whole key */
    uint64_t round;
    uint32_t dtype;
    uint32_t part;
    uint64_t body_len;
    /* not on the wire: filled by the receiver of a PROTO_F_CMA request */
    uint64_t cma_src, cma_dst;
    /* not on the wire: a server's timing of a request (PROTO_F_TRACE) */
    uint64_t t_arrive_ns, sum_ns, t_round_ns;
    /* not on the wire: the server's batch of a record of a FUSED request (0: none) */
    uintptr_t fuse;
    /* not on the wire: a server already wrote this request's reply value into
     * the worker's memory (PROTO_F_CMA, cma_dst): 1, or -errno of the failed
     * write; 0: not yet */
    int32_t cma_done;
} proto_hdr;

typedef struct proto_limits {
    uint64_t max_message; /* largest data body accepted (KVS_MAX_MESSAGE) */
} proto_limits;

/* Write h into out (PROTO_HDR_SIZE bytes). */
void proto_encode(const proto_hdr *h, uint8_t out[PROTO_HDR_SIZE]);

/* Decode and validate one received message: hdr/hdr_len is frame 1,
 * nframes the number of frames received, body_len the size of frame 2 (0 if
 * none).  Checks magic, version, type, dtype, that the declared sizes match
 * the frames received, count * dtype size == body for data, offset + count
 * <= total, and the limits.  Returns 0 and fills *out, or KVS_EPROTO /
 * KVS_ETOOBIG with a reason in why. */
int proto_decode(const void *hdr, size_t hdr_len, int nframes, size_t body_len,
                 const proto_limits *lim, proto_hdr *out, char *why, size_t whylen);

/* The req_id of a header frame that proto_decode may have refused: read
 * where a header keeps it when hdr_len is PROTO_HDR_SIZE, else 0 (no
 * request).  An ERROR that echoes it lets the sender fail that request
 * rather than wait for it. */
uint64_t proto_peek_req_id(const void *hdr, size_t hdr_len);

/* ---- fused bodies (PROTO_FUSED, PROTO_FUSED_REF, PROTO_FUSED_REPLY) ----
 * A body is `count` records back to back; a record is a PROTO_HDR_SIZE
 * header (the same layout as a message header; its body_len says how many
 * bytes follow) and its body, padded with zeros to a multiple of 8 bytes.
 * A record with PROTO_F_FRAME is its header alone: its body is the next
 * record frame of the message (frames after the body's, one per such
 * record, in record order), so big parts travel without a copy. */

/* Bytes a record whose body has body_len bytes takes (body_len below
 * KVS_MAX_MESSAGE, so no overflow). */
static inline uint64_t proto_fused_rec_len(uint64_t body_len)
{
    return PROTO_HDR_SIZE + ((body_len + 7) & ~(uint64_t)7);
}

/* Bytes record h takes in a fused body: its header alone with
 * PROTO_F_FRAME, else proto_fused_rec_len(h->body_len). */
static inline uint64_t proto_fused_rec_size(const proto_hdr *h)
{
    return (h->flags & PROTO_F_FRAME) ? PROTO_HDR_SIZE : proto_fused_rec_len(h->body_len);
}

/* Write one record at out (proto_fused_rec_size(h) bytes): the header h and
 * h->body_len bytes of data (data may be NULL when body_len is 0; not read
 * with PROTO_F_FRAME).  Returns the bytes written. */
uint64_t proto_fused_put(uint8_t *out, const proto_hdr *h, const void *data);

/* Decode the record at *off of a fused body of len bytes from a message of
 * type outer (PROTO_FUSED, PROTO_FUSED_REF or PROTO_FUSED_REPLY) and advance
 * *off past it.  The record is validated as proto_decode validates a
 * message, and must be a data request (FUSED, FUSED_REF) or a REPLY
 * (FUSED_REPLY), from the message's sender.  A record with PROTO_F_FRAME
 * has *data NULL: its body is the message's next record frame, which the
 * caller takes and checks to hold exactly rec->body_len bytes.  A record by reference
 * (PROTO_F_CMA) is refused in a FUSED; in a FUSED_REF its body is the
 * PROTO_CMA_LEN descriptor (checked further by the server, which alone knows
 * whether the sender proved its memory); in a FUSED_REPLY it has no body
 * unless it is an error.  *data points at the record's body inside body
 * (NULL when it has none).  Returns 0, or KVS_EPROTO / KVS_ETOOBIG with why
 * (a record that runs past len included). */
int proto_fused_next(int outer, int sender, const uint8_t *body, uint64_t len, uint64_t *off,
                     const proto_limits *lim, proto_hdr *rec, const uint8_t **data, char *why,
                     size_t whylen);

/* True if a message of this type and status carries array data in frame 2. */
bool proto_has_data(const proto_hdr *h);

/* "PUSH", ...; "?" for a type no one defined. */
const char *proto_type_name(int type);
/* True if type is a defined message type. */
bool proto_type_known(int type);

/* "server 2", "worker 0", "scheduler", or "node 3" for an id no role has. */
void proto_node_name(int id, char *buf, size_t len);

static inline int proto_server_id(int rank) { return 8 + 2 * rank; }
static inline int proto_worker_id(int rank) { return 9 + 2 * rank; }

/* ---- node table (text body of REGISTER_ACK) ----
 * One line per node: "<id> <role> <endpoint>\n", role = server|worker. */
typedef struct proto_node {
    int id;
    int role; /* enum cfg_role */
    char endpoint[128];
    /* workers: "<group> <lrank> <lsize> <pid> <nonce_addr> <nonce>" follow the
     * endpoint (all or none; none: group -1, a group of one): the worker's
     * local group (an id its members share), its rank in it and the group's
     * size, and what proves that a process is that worker (proto_local);
     * then optionally "<servers>" (absent: PROTO_SERVERS_AWAY): where the
     * job's servers are from the group's point of view */
    int group, lrank, lsize, pid;
    uint64_t nonce_addr;
    uint8_t nonce[PROTO_NONCE_LEN];
    int servers;
} proto_node;

/* proto_node.servers: some server registered from another address than the
 * group's; every server registered from the group's address; and from its
 * pid namespace too, with direct copies in effect in every member and every
 * server (the servers read and write the group's memory themselves). */
enum { PROTO_SERVERS_AWAY = 0, PROTO_SERVERS_HERE = 1, PROTO_SERVERS_DIRECT = 2 };

#define PROTO_AGG_MIN_AUTO (-2)

/* What a worker tells the scheduler about its host in its REGISTER body
 * ("pidns=N pid=P lrank=R lsize=L agg=A nonce_addr=X nonce=HEX", and
 * optionally "aggmin=B" or "aggmin=auto", and "cma=C"): the
 * scheduler forms local groups from it (server/..., DESIGN "Host identity"),
 * and the members of a group read each other's memory after checking that
 * reading nonce_addr in pid gives nonce (the ownership proof). */
typedef struct proto_local {
    uint64_t pidns;     /* inode of the worker's /proc/self/ns/pid */
    int pid;            /* its pid in that namespace */
    int lrank, lsize;   /* KVS_LOCAL_RANK / KVS_LOCAL_SIZE (or LOCAL_RANK /
                         * LOCAL_WORLD_SIZE) as given; -1: not given */
    int agg;            /* KVS_LOCAL_AGG in effect: 0 or 1 */
    int64_t agg_min;    /* KVS_LOCAL_AGG_MIN as given; PROTO_AGG_MIN_AUTO: not given
                         * (its default, by layout); -1: not sent */
    int cma;            /* direct copies in effect (KVS_CMA=1, no replicas): 0 or 1;
                         * -1: not sent */
    uint64_t nonce_addr;
    uint8_t nonce[PROTO_NONCE_LEN];
} proto_local;

/* Fill *out from a REGISTER body.  Returns 0, or -1 when the fields are
 * missing or malformed (a worker of an older build: it stays alone). */
int proto_register_local(const char *body, size_t len, proto_local *out);

/* What a server tells the scheduler about its host in its REGISTER body:
 * "pidns=N cma=C" (C: direct copies in effect, 0 or 1).  Returns 0 with
 * both set, or -1 when either is missing or malformed. */
int proto_register_host(const char *body, size_t len, uint64_t *pidns, int *cma);

/* Write a worker's node table fields (after its endpoint) into buf: " G R L P
 * X HEX S" (S: servers, PROTO_SERVERS_*).  Returns what snprintf returns. */
int proto_node_local_fmt(char *buf, size_t len, int group, int lrank, int lsize,
                         const proto_local *l, int servers);

/* Parse a node table body of len bytes into at most max entries.
 * Returns the number of entries (>= 0) or KVS_EPROTO with why. */
/* An EPOCH body (len bytes, not NUL-terminated): the member slots in rank
 * order, each below nslots and named once.  Sets member[0..nslots) to 0/1
 * and *pos (if pos) to the rank of slot find (-1: not a member); returns the
 * number of members (>= 1), or -1 with why. */
int proto_parse_epoch(const char *body, size_t len, uint8_t *member, int nslots, int find,
                      int *pos, char *why, size_t whylen);

int proto_parse_nodes(const char *body, size_t len, proto_node *nodes, int max, char *why,
                      size_t whylen);

/* The job size a node states in its REGISTER body ("servers=S workers=W",
 * optional fields).  Returns 0 with both set, or -1 when either is missing or
 * malformed (an older node). */
int proto_register_job_size(const char *body, size_t len, int *servers, int *workers);

/* A node going back to a restarted scheduler (KVS_SCHEDULER_GRACE) adds to
 * its REGISTER body "rejoin=ID job=HEX" (the node id and the job id it was
 * given), a worker "barriers=N" (the barriers it has passed), a server
 * "left=LIST" once or more (the ranks of the workers the scheduler said had
 * left: "a-b,c,...", at most PROTO_LEFT_FIELD bytes a field). */
#define PROTO_LEFT_FIELD 200
typedef struct proto_rejoin {
    int id;            /* node id: servers 8 + 2r, workers 9 + 2r */
    uint64_t job_id;
    uint64_t barriers; /* workers: barriers passed (0: none or not said) */
} proto_rejoin;

/* Parse the rejoin fields of a REGISTER body.  Returns 1 with *out set (and
 * left[r] = 1 for every worker rank r < nworkers in a left= field, if left
 * is not NULL), 0 when the body has no rejoin= field (a first
 * registration), or -1 with why when a rejoin field is malformed (a rank
 * outside [0, nworkers) included). */
int proto_parse_rejoin(const char *body, size_t len, proto_rejoin *out, uint8_t *left,
                       int nworkers, char *why, size_t whylen);

/* Write " left=LIST" fields naming every r < n with left[r] into buf (NUL
 * terminated; nothing when none).  Returns the length written, or -1 when
 * buf is too small. */
int proto_rejoin_left_fmt(char *buf, size_t cap, const uint8_t *left, int n);

/* Parse a REGISTER body "role=R endpoint=E rank=N host=H".  rank -1 = none. */
int proto_parse_register(const char *body, size_t len, int *role, char *endpoint,
                         size_t endpoint_len, int *rank, char *host, size_t host_len,
                         char *why, size_t whylen);

#endif
