/*
 * kvs.h - the public C API of kvsd's worker library (libkvs).
 *
 * A job is one scheduler (kvs-scheduler), S servers (kvs-server) and W
 * workers.  A worker is the user's training process: it links libkvs, creates
 * a store with kvs_create() and pushes gradients / pulls parameters by 64-bit
 * key.  Configuration comes from the environment (DMLC_ROLE, DMLC_PS_ROOT_URI,
 * DMLC_PS_ROOT_PORT, DMLC_NUM_SERVER, DMLC_NUM_WORKER, PS_*, MXNET_KVSTORE_*),
 * exactly as for MXNet's kvstore / ps-lite; every variable: docs/ref/env.md.
 *
 * Conventions
 *  - Every int-returning function returns 0 (KVS_OK) on success or a negative
 *    KVS_E* code.  kvs_last_error() then describes the failure of the calling
 *    thread in words (which key, which node, which variable).
 *  - Threads: every function may be called from any thread, concurrently,
 *    on the same store, except kvs_close(), which must be the last call on a
 *    store and must not race with other calls on it.  Two stores in one
 *    process are independent.
 *  - Arrays: the library never takes ownership of user memory.  push, pull and
 *    pushpull are asynchronous: they return once the operation is queued, and
 *    the arrays they were given must stay valid and unmodified (outputs: not
 *    read) until kvs_wait() on each key, or kvs_wait_all(), has returned.  An
 *    error found after queueing is returned by that wait.
 *  - Operations on one key take effect in the order they were issued.
 */
#ifndef KVS_H
#define KVS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KVS_VERSION_MAJOR 0
#define KVS_VERSION_MINOR 1
#define KVS_VERSION_PATCH 0
/* "0.1.0": the one place the version is written (binaries' --version, the
 * pkg-config file, the man pages and kvs_version() all take it from here). */
#define KVS_VERSION_STR_(a, b, c) #a "." #b "." #c
#define KVS_VERSION_STR2_(a, b, c) KVS_VERSION_STR_(a, b, c)
#define KVS_VERSION_STRING \
    KVS_VERSION_STR2_(KVS_VERSION_MAJOR, KVS_VERSION_MINOR, KVS_VERSION_PATCH)

/* Device id of host memory in kvs_array.device. */
#define KVS_CPU (-1)

typedef enum kvs_dtype {
    KVS_FLOAT32 = 0,
    KVS_FLOAT64 = 1,
    KVS_FLOAT16 = 2,  /* IEEE binary16, summed in float32 */
    KVS_BFLOAT16 = 3, /* bfloat16, summed in float32 */
    KVS_INT32 = 4,    /* sums wrap as two's complement */
    KVS_INT64 = 5     /* sums wrap as two's complement */
} kvs_dtype;

#define KVS_NUM_DTYPES 6

/* A view of user memory: count elements of dtype at data, on device (KVS_CPU
 * for host memory, else a device id 0..N-1: a CUDA device of this process,
 * or a simulated one with KVS_SIM_DEVICES=N).  The library reads or writes
 * it; it never frees it.
 *
 * Device arrays.  Several arrays for one key in one push are this worker's
 * contribution: they are summed locally first (store type decides where:
 * "local"/"dist_*" on the CPU through pinned host copies, "device"/
 * "dist_*_device" on the devices, "nccl" through NCCL).  Several outputs for
 * one key in one pull all receive the value (a broadcast).
 *
 * Streams.  The library reads and writes device arrays on the legacy
 * default stream of their device, so its work runs after everything the
 * application already issued to that stream and to blocking streams.  Work
 * on a stream created with cudaStreamNonBlocking (or the per-thread default
 * stream, nvcc --default-stream per-thread) is not ordered: synchronise that
 * stream (or make the legacy stream wait for an event on it) before the
 * push.  Device arrays are read during kvs_push/kvs_pushpull or before the
 * wait returns; outputs are complete, and every device stream the library
 * used is synchronised, when kvs_wait()/kvs_wait_all() on the key returns
 * (for the local store types, when the call returns).  There is no stream
 * parameter: the legacy default stream orders the library after the
 * application's work without one, and since the library synchronises before
 * completing, nothing of it is left running on a stream the application
 * would have to wait for. */
typedef struct kvs_array {
    void *data;
    uint64_t count;
    kvs_dtype dtype;
    int device;
} kvs_array;

typedef struct kvs_store kvs_store;

/* The error list: X(NAME, value, message).  One list makes the enum, the
 * strings of kvs_strerror() and kvs_errname(); they cannot drift apart. */
#define KVS_ERRNO_MAP(X)                                                       \
    X(KVS_OK, 0, "success")                                                    \
    X(KVS_EINVAL, -1, "invalid argument")                                      \
    X(KVS_ENOMEM, -2, "out of memory")                                         \
    X(KVS_ECONFIG, -3, "bad configuration (environment variable)")             \
    X(KVS_ENOTSUP, -4, "operation not supported")                              \
    X(KVS_ENOKEY, -5, "key was never initialised")                             \
    X(KVS_ESHAPE, -6, "count or dtype differs from the key's init")            \
    X(KVS_EPEERDEAD, -7, "a node of the job died")                             \
    X(KVS_ETIMEDOUT, -8, "timed out")                                          \
    X(KVS_ECLOSED, -9, "store is closed or shutting down")                     \
    X(KVS_EPROTO, -10, "malformed or unexpected message")                      \
    X(KVS_ENET, -11, "network error")                                          \
    X(KVS_EDUP, -12, "duplicate push from the same worker in one round")       \
    X(KVS_ETOOBIG, -13, "size exceeds a configured or arithmetic limit")       \
    X(KVS_EDEVICE, -14, "device (GPU) error or device memory not supported")  \
    X(KVS_EINTERNAL, -15, "internal error")                                    \
    X(KVS_EAUTH, -20, "authentication failed (job secret) or refused by a peer")   \
    X(KVS_EFULL, -21, "a server holds too much for this worker (KVS_MAX_QUEUED_*)") \
    X(KVS_EMEMBERSHIP, -22, "the job's workers changed (KVS_ELASTIC): redo the step")

typedef enum kvs_err {
#define KVS_ERR_ENUM_(name, val, msg) name = (val),
    KVS_ERRNO_MAP(KVS_ERR_ENUM_)
#undef KVS_ERR_ENUM_
} kvs_err;

/* Create a store.  type: "local" (no servers: push stores the locally summed
 * value, pull returns it), "dist_sync", "dist_async" (connect to the job
 * described by the environment; returns after this worker is registered and
 * connected, or KVS_ETIMEDOUT after KVS_START_TIMEOUT seconds).
 * Device stores (see "Device arrays" above): "device" (a local store whose
 * values live on the devices; sums on the devices, flat or along planned
 * trees with MXNET_KVSTORE_USETREE=1), "nccl" (the same through NCCL; needs
 * CUDA devices and libnccl), "dist_sync_device" (alias "dist_device_sync")
 * and "dist_async_device" (device sums, then the dist protocol for the one
 * summed array, then a broadcast to the devices).  A device store fails with
 * KVS_EDEVICE when no device exists (no GPU and KVS_SIM_DEVICES unset) or,
 * for "nccl", when NCCL cannot run ("NCCL needs CUDA devices" on simulated
 * ones).
 * On success *out owns a store, released with kvs_close().
 * Errors: KVS_EINVAL (unknown type, NULL), KVS_ECONFIG (a variable does not
 * parse: kvs_last_error() names it), KVS_ETIMEDOUT, KVS_ENET, KVS_ENOMEM,
 * KVS_EDEVICE. */
int kvs_create(const char *type, kvs_store **out);

/* Initialise n keys.  Every worker calls it with the same keys; worker rank
 * 0's values become the initial values (other workers' data is not read, but
 * count and dtype must match).  Synchronous: returns once the keys exist on
 * the servers.  A key repeated in one call takes its first value. */
int kvs_init(kvs_store *s, size_t n, const uint64_t *keys, const kvs_array *vals);

/* Push n gradients.  A key repeated within one call is summed locally first.
 * In dist_sync the servers sum the pushes of all workers for the round and
 * store the sum (or apply the optimizer with the sum as gradient).
 * Asynchronous; priority is a hint (higher first) for the p3 van. */
int kvs_push(kvs_store *s, size_t n, const uint64_t *keys, const kvs_array *vals,
             int priority);

/* Pull n values into outs.  Returns (at the wait) the value after the round of
 * this worker's last push to the key has completed.  A key repeated in one
 * call is delivered to every output.  Asynchronous. */
int kvs_pull(kvs_store *s, size_t n, const uint64_t *keys, const kvs_array *outs,
             int priority);

/* Push vals and pull the result of that round into outs, as one message and
 * one reply per key part.  outs may alias vals.  Asynchronous. */
int kvs_pushpull(kvs_store *s, size_t n, const uint64_t *keys, const kvs_array *vals,
                 const kvs_array *outs, int priority);

/* Block until every operation issued so far on key has completed.  Returns
 * the first error of those operations not yet reported by a wait. */
int kvs_wait(kvs_store *s, uint64_t key);

/* Block until every operation issued so far has completed; returns the first
 * error not yet reported by a wait. */
int kvs_wait_all(kvs_store *s);

/* A completion callback: key, the error kvs_wait(key) would have returned
 * (0 or a KVS_E* code), and the arg given to kvs_on_complete. */
typedef void (*kvs_complete_fn)(uint64_t key, int err, void *arg);

/* Call fn(key, err, arg) once no operation on key is unfinished: the
 * non-blocking form of kvs_wait(key), with the same meaning (every
 * operation issued on key before the call has then completed; err is the
 * first error of those not yet reported, which counts as reported, or the
 * job's failure).  fn is called exactly once, also when the job fails
 * (with KVS_EPEERDEAD, ...) and at kvs_close (which runs every callback
 * still registered, each once its key is done, before it returns).  A key
 * with nothing unfinished gets its call promptly.  Several registrations
 * (of one key or many) each get their own call.
 * Threads: fn runs on the store's completion thread (one per store,
 * started by the first kvs_on_complete), never inside kvs_on_complete;
 * calls are serialised, so fn must return promptly: every other callback
 * of the store waits behind it.  During fn, kvs_last_error() on that
 * thread describes err.  fn may call kvs_push, kvs_pull, kvs_pushpull,
 * kvs_on_complete, kvs_wait on its own key (which then does not block),
 * kvs_rank and the other queries; it must not call kvs_close, kvs_barrier,
 * kvs_wait_all, the collectives, or kvs_wait on another key.  The arrays
 * of the completed operations may be read, reused or freed in fn.
 * Errors: KVS_EINVAL (s or fn NULL), KVS_ENOMEM (no memory or no thread),
 * KVS_ECLOSED (kvs_close has begun); fn is then never called. */
int kvs_on_complete(kvs_store *s, uint64_t key, kvs_complete_fn fn, void *arg);

/* Block until every worker of the job has entered the barrier. */
int kvs_barrier(kvs_store *s);

/* This worker's rank (0..W-1), the number of workers and of servers.
 * KVS_ELASTIC=1: the rank among the members of the membership epoch the
 * program has seen, and their number; both change when a call of this
 * store returns KVS_EMEMBERSHIP (the workers changed: that call takes up
 * the new epoch), and nowhere else.  Ranks stay dense: a worker's rank is
 * the position of its slot among the members' (docs/design.md "Elastic
 * workers"). */
int kvs_rank(const kvs_store *s);
int kvs_num_workers(const kvs_store *s);
int kvs_num_servers(const kvs_store *s);

/* Initialise n keys and pull them into outs in one call: MXNet's
 * kv.broadcast(key, value, out).  kvs_init(s, n, keys, vals) (synchronous,
 * rank 0's values win) followed by kvs_pull(s, n, keys, outs, priority)
 * (asynchronous: outs hold rank 0's values once kvs_wait(key) or
 * kvs_wait_all returns).  outs may alias vals.  Every worker calls it with
 * the same keys, like kvs_init.  vals are read during the call; outs must
 * stay valid until the wait.  Threads: as kvs_init and kvs_pull.
 * Errors: those of kvs_init (then nothing is pulled) and of kvs_pull. */
int kvs_broadcast(kvs_store *s, size_t n, const uint64_t *keys, const kvs_array *vals,
                  const kvs_array *outs, int priority);

/* What a store supports, for kvs_is_capable (MXNet's kv.is_capable). */
typedef enum kvs_capability {
    KVS_CAP_OPTIMIZER = 1,  /* kvs_set_optimizer: "dist_*" stores (servers apply it) */
    KVS_CAP_PUSHPULL = 2,   /* kvs_pushpull: every store */
    KVS_CAP_BROADCAST = 3,  /* kvs_broadcast: every store */
    KVS_CAP_DEVICE_STORE = 4, /* values summed on devices: "device", "nccl", "dist_*_device" */
    KVS_CAP_ASYNC = 5,      /* dist_async semantics (no rounds): "dist_async*" */
    KVS_CAP_COMPRESSION = 6, /* kvs_set_gradient_compression: "dist_sync", "dist_async" */
    KVS_CAP_ROW_SPARSE = 7, /* row-sparse arrays (kvs_rsp): "dist_*" stores */
} kvs_capability;

/* 1 when the store supports cap, 0 when it does not.
 * Errors: KVS_EINVAL (s NULL, or cap not a kvs_capability value). */
int kvs_is_capable(const kvs_store *s, int cap);

/* Compress this worker's pushes to the servers (MXNet's
 * kv.set_gradient_compression).  spec: "2bit threshold=T" (T > 0, default
 * 0.5: each element of residual + gradient sends +T when it reaches T, -T
 * when it reaches -T, else 0, 2 bits each, and keeps the rest in its
 * residual), "1bit" (the sign of residual + gradient, scaled by its mean
 * absolute value; the error stays in the residual), "topk ratio=R" (the
 * ceil(R * n) largest magnitudes of each key part, 0 < R <= 1, the rest
 * stays in the residual), "fp16" (values cast to float16 on the wire), or
 * "none"/NULL.  The residuals are per key part, kept by this worker; the
 * servers decode and sum in float32.  Each codec takes "pull=1" (the
 * default) or "pull=0": with pull=1, in a dist_sync store whose servers run
 * no optimizer, a server encodes each round's sum once with the same codec
 * and a residual of its own, and every pull of that round's value returns
 * its decoding (the same bits on every worker; only the encoded bytes
 * cross the network); with pull=0, an optimizer, or dist_async, pulls
 * return the float32 value.  Only float32 gradients of host arrays: a push of
 * another dtype fails with KVS_EINVAL.  Call before the first push, with
 * the same spec on every worker: a server refuses (KVS_EINVAL, naming both
 * specs) a push whose codec differs from the first push of that key.
 * Threads: a user thread, with no push in flight.
 * Errors: KVS_EINVAL (s NULL, a bad spec, naming the word; called after a
 * push; a store that is not "dist_sync"/"dist_async"), KVS_ENOMEM. */
int kvs_set_gradient_compression(kvs_store *s, const char *spec);

/* Exempt keys from this store's gradient compression: their pushes travel
 * as they are (any dtype), summed exactly, as in a store without
 * compression.  For what a program sums besides its gradients: broadcasts
 * of weights (one worker's values plus zeros), counters, agreements
 * (kvsd.torch exempts its own).  Before or after
 * kvs_set_gradient_compression, but before the key's first push, with the
 * same keys on every worker.  In an elastic job (KVS_ELASTIC=1) a push that
 * fails with KVS_EMEMBERSHIP gives its residuals back, so that the step's
 * redo sends what the first try did.
 * Threads: a user thread.  Errors: KVS_EINVAL (s NULL, keys NULL with
 * n > 0, a key this worker pushed already, naming it), KVS_ENOMEM. */
int kvs_compression_exempt(kvs_store *s, size_t n, const uint64_t *keys);

/* Node groups for kvs_num_dead_node, MXNet's (ps-lite's) values; OR them. */
enum { KVS_GROUP_SERVER = 2, KVS_GROUP_WORKER = 4 };

/* How many nodes of the groups in mask (KVS_GROUP_SERVER, KVS_GROUP_WORKER
 * or both) the scheduler has declared dead so far, as this worker has been
 * told (MXNet's kv.num_dead_node).  Any death fails the job (see
 * KVS_EPEERDEAD), so a nonzero count means the job is over; the count lets
 * the application say which side failed.  A local store counts 0.
 * Threads: any thread.
 * Errors: KVS_EINVAL (s NULL, mask 0 or with other bits). */
int kvs_num_dead_node(const kvs_store *s, int mask);

/* This worker's place in its local group: the workers of the job on its
 * host (the same registered address and pid namespace; or as given by
 * KVS_LOCAL_RANK/KVS_LOCAL_SIZE or torchrun's LOCAL_RANK/LOCAL_WORLD_SIZE,
 * which the scheduler checks).  Rank 0..size-1; 0 and 1 for a "local" store
 * or a worker alone on its host.  Use it to pick this process's GPU.  With
 * KVS_LOCAL_AGG (default for the sync types) the group sums its pushes
 * before the network (device arrays through pinned host copies; the
 * dist_*_device stores' sums on the devices, the members' buffers shared
 * with CUDA IPC, along trees over the members' GPUs with
 * MXNET_KVSTORE_USETREE=1; keys under KVS_LOCAL_AGG_MIN bytes, by default
 * 1024 with workers on other hosts and 65536 on one host, each member
 * sends itself); results are the same.  Any thread.  Errors:
 * KVS_EINVAL (NULL). */
int kvs_local_rank(const kvs_store *s);
int kvs_local_size(const kvs_store *s);

/* ---- Row-sparse arrays (embedding tables) ----
 *
 * A row-sparse key is a dense table of rows x row_len elements (its dense
 * shape, declared by kvs_init_row_sparse) of which a step touches a few
 * rows.  Pushes carry only the touched rows (kvs_rsp: row ids and a dense
 * block of those rows), pulls ask for rows by id.  The servers store the
 * table by row ranges: a key of at least MXNET_KVSTORE_BIGARRAY_BOUND
 * elements is cut into S parts at row boundaries (part i: rows
 * [round(rows*i/S), round(rows*(i+1)/S)) on server i), a smaller one lives
 * whole on its home server; each part travels and is stored as chunks of
 * whole rows of at most KVS_RSP_CHUNK_BYTES (256 MiB; at least one row).  P3 slicing
 * does not apply to row-sparse keys.
 *
 * dist_sync: a round's sum is row-sparse: the union of the rows present in
 * any worker's push, each row the sum of the pushes that carry it (a row a
 * worker did not send counts as zero).  Without an optimizer those rows of
 * the stored table become their sums and every other row keeps its value;
 * with one (kvs_set_optimizer) only those rows are updated, with the sum as
 * their gradient: MXNet's lazy update.  Rows that received no gradient are
 * not touched at all: their weight, momentum, Adam m and v and weight decay
 * stay as they were (the update count t that Adam and the schedules use
 * counts the key part's rounds).  lamb, whose step needs norms of the whole
 * key, fails such rounds (KVS_EINVAL).  dist_async: each push is applied on
 * arrival: its rows are added to the stored rows (with an optimizer, one
 * lazy update of its rows).
 *
 * Row-sparse keys take only the calls of this section (and kvs_wait,
 * kvs_wait_all, the optimizer and checkpoint calls); kvs_push, kvs_pull and
 * kvs_pushpull of such a key are KVS_EINVAL.  "local" and the device-only
 * store types do not support them (KVS_ENOTSUP); arrays are host memory. */

/* Row ids and the rows they name: rows.count == nrows * the key's row_len
 * elements, row i of the block (elements [i*row_len, (i+1)*row_len)) is
 * table row row_ids[i].  Ids may come in any order; each must be distinct
 * and in [0, rows of the key). */
typedef struct kvs_rsp {
    const int64_t *row_ids;
    uint64_t nrows;
    kvs_array rows;
} kvs_rsp;

/* Initialise n row-sparse keys: vals[i] is key i's whole dense table
 * (count a multiple of row_len[i] > 0) and rank 0's values become the
 * initial values, as kvs_init.  Synchronous.  Every worker calls it with
 * the same keys and row lengths.  Errors: those of kvs_init; KVS_EINVAL
 * (row_len 0 or not dividing count, a key repeated in the call, a key
 * already initialised dense or with another row length); KVS_ENOTSUP (a
 * store that is not "dist_*"). */
int kvs_init_row_sparse(kvs_store *s, size_t n, const uint64_t *keys, const kvs_array *vals,
                        const uint64_t *row_len);

/* Push n row-sparse gradients (one per key; a key repeated in one call is
 * KVS_EINVAL).  Every row id is checked before anything is sent: a
 * duplicate id or one outside [0, rows) is KVS_EINVAL naming the key, the
 * id and its place; rows.count != nrows * row_len or another dtype than
 * the key's is KVS_ESHAPE.  nrows may be 0 (the worker touched no row: it
 * still takes part in the round).  Asynchronous, like kvs_push: ids and
 * rows must stay valid until the wait. */
int kvs_push_rsp(kvs_store *s, size_t n, const uint64_t *keys, const kvs_rsp *vals,
                 int priority);

/* Push vals and pull back the same rows (as the round left them) into
 * outs[i], an array of vals[i].nrows * row_len elements (outs[i].data may
 * be vals[i].rows.data).  Asynchronous. */
int kvs_pushpull_rsp(kvs_store *s, size_t n, const uint64_t *keys, const kvs_rsp *vals,
                     const kvs_array *outs, int priority);

/* Pull rows row_ids[0..nrows) of key into out (nrows * row_len elements of
 * the key's dtype; row i of out is table row row_ids[i]), after the round
 * of this worker's last push to key, like kvs_pull.  Ids: distinct, in
 * [0, rows), any order (checked before anything is sent: KVS_EINVAL).
 * Asynchronous: row_ids and out must stay valid until kvs_wait(key). */
int kvs_row_sparse_pull(kvs_store *s, uint64_t key, const int64_t *row_ids, uint64_t nrows,
                        const kvs_array *out);

/* ---- Server-side optimizers (update_on_kvstore) ----
 *
 * kvs_set_optimizer(s, spec) makes the servers apply an optimizer: a push's
 * round sum is the gradient g, the stored value is the weight w, and pulls
 * return w.  spec is a name and key=value words separated by blanks, with
 * MXNet's parameter names and defaults (never code):
 *
 *   "sgd learning_rate=0.1 momentum=0.9 wd=0.0001 rescale_grad=0.5 clip_gradient=5"
 *
 * Settings every optimizer takes:
 *   learning_rate  (0.01; adam, adamw, lamb and rmsprop 0.001), >= 0
 *   wd             weight decay (0; adamw 0.01)
 *   rescale_grad   multiplies g first (1)
 *   clip_gradient  > 0: clip(x) clips to [-clip_gradient, clip_gradient]; <= 0 off (off)
 *   multi_precision=0|1 (0): float16/bfloat16 keys keep a float32 master copy
 *                  of the weights on the server; pulls return it rounded
 *   lr_scheduler=factor step=S factor=F stop_factor_lr=L: MXNet's
 *                  FactorScheduler over the key part's update count t:
 *                  lr = learning_rate * F^floor((t-1)/S), never below L
 *                  (F in (0,1], default 1; L default 1e-8)
 *   lr_scheduler=warmup_cosine | warmup_linear | poly  total_steps=T (required)
 *                  warmup_steps=W (0, < T) warmup_begin_lr=B (0) final_lr=F (0)
 *                  power=P (poly only, 2): MXNet's CosineScheduler /
 *                  PolyScheduler with linear warmup, over the part's update count t:
 *                  t < W:  lr = B + (learning_rate - B)*t/W;   t >= T: lr = F;  else
 *                  x = (t-W)/(T-W) and lr = F + (learning_rate - F)*s with
 *                  s = (1 + cos(pi*x))/2 (warmup_cosine), 1 - x (warmup_linear),
 *                  (1 - x)^P (poly)
 * lr below is learning_rate after the schedule, times the key's lr_mult;
 * wd is times the key's wd_mult.  The rules (MXNet 1.x; optim/optim_kern.c
 * cites each kernel):
 *   sgd momentum=0:  w = (1 - lr*wd)*w - lr*clip(rescale_grad*g)
 *   sgd momentum=M (0 <= M < 1):
 *                    m = M*m - lr*wd*w - lr*clip(rescale_grad*g);  w = w + m
 *   nag momentum=M:  g' = clip(rescale_grad*g) + wd*w;  m = M*m + g';
 *                    w = w - lr*(g' + M*m)
 *   adam beta1=0.9 beta2=0.999 epsilon=1e-8:
 *                    g' = clip(rescale_grad*g) + wd*w;  m = beta1*m + (1-beta1)*g';
 *                    v = beta2*v + (1-beta2)*g'^2;
 *                    lr_t = lr*sqrt(1-beta2^t)/(1-beta1^t)  (t: the part's update count, from 1)
 *                    w = w - lr_t*m/(sqrt(v) + epsilon)
 *   adagrad eps=1e-7 (or epsilon=):
 *                    g' = clip(rescale_grad*g);  h = h + g'^2;
 *                    w = w - lr*(g'/sqrt(h + eps) + wd*w)
 *   rmsprop gamma1=0.9 gamma2=0.9 epsilon=1e-8 centered=0 clip_weights=-1:
 *                    g' = clip(rescale_grad*g + wd*w);  n = (1-gamma1)*g'^2 + gamma1*n;
 *                    w = w - lr*g'/sqrt(n + epsilon)
 *     centered=1:    also s = (1-gamma1)*g' + gamma1*s;
 *                    d = gamma2*d - lr*g'/sqrt(n - s^2 + epsilon);  w = w + d
 *     clip_weights > 0 clips w to [-clip_weights, clip_weights] after each step.
 *   adamw beta1=0.9 beta2=0.999 epsilon=1e-8 (wd 0.01): torch.optim.AdamW,
 *                    decoupled weight decay (Loshchilov & Hutter):
 *                    g' = clip(rescale_grad*g);  m = beta1*m + (1-beta1)*g';
 *                    v = beta2*v + (1-beta2)*g'^2;
 *                    w = w*(1 - lr*wd) - (lr/(1-beta1^t)) * m/(sqrt(v)/sqrt(1-beta2^t) + epsilon)
 *   lamb beta1=0.9 beta2=0.999 epsilon=1e-6 bias_correction=1 lower_bound=-1
 *        upper_bound=-1 (You et al.; MXNet's two phases):
 *                    g' = clip(rescale_grad*g);  m, v as adamw;
 *                    r = (m/c1)/(sqrt(v/c2) + epsilon) + wd*w  (c1 = 1-beta1^t,
 *                    c2 = 1-beta2^t; both 1 with bias_correction=0);
 *                    r1 = ||w||, r2 = ||r|| over the whole key (every part of a
 *                    key split over servers or P3 slices: the servers exchange
 *                    their parts' sums); r1 clamped to [lower_bound, upper_bound]
 *                    where those are > 0; ratio = r1/r2 (1 if r1 or r2 is 0);
 *                    w = w - lr*ratio*r.  Sums of squares in float64.  A
 *                    dist_async key split over servers cannot use lamb:
 *                    KVS_ENOTSUP naming the key.
 * State (m, v, h, n, s, d) starts at zero.
 *
 * Arithmetic: float64 keys update in float64; float32 keys in float32;
 * float16 and bfloat16 keys in float32 (converted per element, or from the
 * float32 master copy with multi_precision=1), rounded to nearest-even on
 * store.  No fused multiply-add: results are bit-identical across runs,
 * thread counts and CPUs.  int32/int64 keys cannot be updated: setting an
 * optimizer while one exists, or initialising one while an optimizer is
 * set, is KVS_ESHAPE naming the key.  Big parts (>=
 * MXNET_KVSTORE_BIGARRAY_BOUND elements) update on the reduction threads.
 * In dist_async every push is one update.
 *
 * Collective: every worker calls it; worker rank 0's spec decides (the
 * others' is not read, as in MXNet) and every call returns once all servers
 * have it.  Before the first push a new call replaces the spec (and the
 * state); after pushes began the same spec is accepted and a different one
 * is KVS_EINVAL naming the first differing word.  An unknown optimizer or
 * setting, a value out of range, or a setting given twice: KVS_EINVAL
 * naming the word.  MXNET_UPDATE_ON_KVSTORE=0 (on worker rank 0 or on a
 * server) keeps plain sums even with an optimizer set: the worker then
 * updates itself.  The local store: KVS_ENOTSUP (after checking spec).
 * Threads: collective calls (this, kvs_set_optimizer_key, kvs_save,
 * kvs_load) must be made in the same order on every worker, one at a time. */
int kvs_set_optimizer(kvs_store *s, const char *spec);

/* Per-key multipliers: settings "lr_mult=X wd_mult=Y" (either; missing ones
 * are 1; each a finite number >= 0).  Applies from the key's next update.
 * Collective like kvs_set_optimizer (rank 0's settings decide).  Errors:
 * KVS_EINVAL naming the word; KVS_ENOTSUP for the local store. */
int kvs_set_optimizer_key(kvs_store *s, uint64_t key, const char *settings);

/* ---- Checkpoints ----
 *
 * kvs_save(s, dir): every server saves its state in dir (dir as seen by
 * that server, on its own host; created if missing): the weights, the
 * optimizer spec, per-key multipliers, optimizer state (momenta, Adam's m
 * and v, master copies, the update count t that the schedule and Adam use)
 * and every key part's completed rounds.  Each save is a new generation G
 * (one above any generation a server has in dir): every server writes
 * dir/gen-<G>/server-<rank>.kvsckpt durably (temporary file, fsync, rename,
 * fsync of the directory); once every server's file is durable, each
 * commits G in its manifest dir/server-<rank>.manifest (written the same
 * way); once G is committed on every server, older generations are removed.
 * Returns after that.  A crash at any point (of a server, a worker or a
 * machine) leaves a generation committed on every server: the previous
 * checkpoint, or the new one once every server committed it.  (An error
 * of that last removal step is returned, but the new generation is then
 * committed on every server already.)
 *
 * kvs_load(s, dir), after kvs_init of the same keys: the newest generation
 * that every server's manifest names with the same save id is taken (dir
 * may also be one generation's directory, whose files are then read); every
 * server reads and verifies its file (format version, sizes, CRC-32C),
 * checks the job shape (number of servers, keys, counts, dtypes,
 * placement), and only when every server succeeded and all files carry the
 * same save id do they all apply it; otherwise nothing changes anywhere.
 * The worker's round counters follow the checkpoint, so training continues
 * with the next round.
 * Errors: KVS_ESHAPE naming the first difference; KVS_EPROTO naming the file
 * for a missing, truncated, corrupted or foreign file or manifest, for files
 * of different saves, and when no generation is committed on every server
 * (listing each server's); KVS_EINVAL for a dir that is NULL, empty or over
 * 3000 bytes.
 *
 * Both are collective (every worker calls them, like a barrier) and act
 * between rounds: call them after kvs_wait_all() on every worker; a round in
 * progress on a server is KVS_EINVAL naming the key.  The local store:
 * KVS_ENOTSUP.  The file and manifest formats are documented in
 * server/ckpt.h and docs/design/checkpoints.md.
 *
 * Automatic checkpoints: with KVS_CHECKPOINT_DIR and KVS_CHECKPOINT_EVERY=N
 * set for the servers, a server writes generation r of KVS_CHECKPOINT_DIR
 * when all of its keys have completed round r (r a multiple of N) and none
 * has begun round r+1, commits it in its own manifest and keeps the newest
 * two; kvs_load(s, KVS_CHECKPOINT_DIR) takes the newest round every server
 * has committed. */
int kvs_save(kvs_store *s, const char *dir);
int kvs_load(kvs_store *s, const char *dir);

/* Wait for outstanding operations, leave the job and free the store.  Always
 * releases the store (even on error); returns the first unreported error.
 * kvs_close(NULL) returns 0. */
int kvs_close(kvs_store *s);

/* Counters of the store's device layer: which path every copy took. */
typedef struct kvs_device_stats {
    int devices;            /* devices of the backend; 0 while none was used */
    char backend[16];       /* "sim", "cuda", or "" */
    uint64_t peer_copies;   /* device -> device over peer access (P2P) */
    uint64_t staged_copies; /* device -> device through pinned host memory */
    uint64_t local_copies;  /* within one device */
    uint64_t h2d_copies;    /* host -> device */
    uint64_t d2h_copies;    /* device -> host */
    uint64_t peer_bytes, staged_bytes;
    uint64_t sums;          /* device sum kernels (simulated: CPU sums) */
    uint64_t nccl_calls;    /* NCCL collectives */
    uint64_t pinned_bytes;  /* the store's pinned host staging pool (reused, freed at close) */
    uint64_t pinned_buffers;
    uint64_t ipc_copies;    /* to or from another process's device memory (local groups:
                               CUDA IPC; simulated: shared memory) */
    uint64_t ipc_bytes;
} kvs_device_stats;

/* Fill *out with s's device counters (all zero while no device was used).
 * Any thread.  Errors: KVS_EINVAL (NULL). */
int kvs_get_device_stats(kvs_store *s, kvs_device_stats *out);

/* A static string for an error code ("unknown error" for others). */
const char *kvs_strerror(int err);

/* The name of an error code ("KVS_ENOKEY"), or "KVS_E?" for others. */
const char *kvs_errname(int err);

/* The calling thread's last failure, in words ("" if none).  Valid until the
 * thread's next call into the library. */
const char *kvs_last_error(void);

/* Bytes per element of dtype, or 0 if dtype is not a kvs_dtype. */
size_t kvs_dtype_size(kvs_dtype dtype);

/* "float32", ... or NULL. */
const char *kvs_dtype_name(kvs_dtype dtype);

/* The version of the library that is running ("0.1.0"; compare with
 * KVS_VERSION_STRING, the version of the header compiled against). */
const char *kvs_version(void);

/* This store's metrics in the Prometheus text format (version 0.0.4): bytes
 * and messages to and from each server by data path (socket, cma), requests
 * by type, errors by code, request latency histograms, queue depths, the
 * scheduler's heartbeat age.  Writes at most len bytes into buf, always
 * NUL-terminated when len > 0, and returns the length of the whole text
 * (like snprintf: a return >= len means buf was too small; call again with
 * a bigger one, or with buf NULL and len 0 to learn the size).  With
 * KVS_METRICS_PORT set, a worker also serves the same text over HTTP at
 * /metrics.  Thread-safe.  Errors: KVS_EINVAL (s NULL, or buf NULL with
 * len > 0), KVS_ETOOBIG. */
int kvs_metrics(kvs_store *s, char *buf, size_t len);

/* Log levels passed to a log handler. */
#define KVS_LOG_ERROR (-1)
#define KVS_LOG_WARN 0
#define KVS_LOG_INFO 1
#define KVS_LOG_DEBUG 2

/* A log handler: level (KVS_LOG_*), the whole line without a newline
 * ("2026-12-03T06:35:56.123Z [worker 0] host7[4242] WARN net: ..."; valid
 * only during the call), and the ctx given to kvs_set_log_handler. */
typedef void (*kvs_log_fn)(int level, const char *line, void *ctx);

/* Send the library's log lines to fn instead of stderr (fn NULL: back to
 * stderr, the default).  Process-wide: it covers every store.  Which lines
 * exist is set by PS_VERBOSE (0 warnings and errors, 1 also connections and
 * configuration, 2 every message).  Calls to fn are serialised and may come
 * from any thread, including the library's I/O threads; fn must return
 * promptly and must not call libkvs.  Once kvs_set_log_handler returns, the
 * previous handler is never called again, so its ctx may be freed.
 * Thread-safe; never fails. */
void kvs_set_log_handler(kvs_log_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif
#endif /* KVS_H */
