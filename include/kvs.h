/*
 * kvs.h - the public C API of kvsd's worker library (libkvs).
 *
 * A job is one scheduler (kvs-scheduler), S servers (kvs-server) and W
 * workers.  A worker is the user's training process: it links libkvs, creates
 * a store with kvs_create() and pushes gradients / pulls parameters by 64-bit
 * key.  Configuration comes from the environment (DMLC_ROLE, DMLC_PS_ROOT_URI,
 * DMLC_PS_ROOT_PORT, DMLC_NUM_SERVER, DMLC_NUM_WORKER, PS_*, MXNET_KVSTORE_*),
 * exactly as for MXNet's kvstore / ps-lite; see README.md.
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
 * for host memory).  The library reads or writes it; it never frees it. */
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
    X(KVS_EAUTH, -20, "authentication failed (job secret) or refused by a peer")

typedef enum kvs_err {
#define KVS_ERR_ENUM_(name, val, msg) name = (val),
    KVS_ERRNO_MAP(KVS_ERR_ENUM_)
#undef KVS_ERR_ENUM_
} kvs_err;

/* Create a store.  type: "local" (no servers: push stores the locally summed
 * value, pull returns it), "dist_sync", "dist_async" (connect to the job
 * described by the environment; returns after this worker is registered and
 * connected, or KVS_ETIMEDOUT after KVS_START_TIMEOUT seconds).
 * On success *out owns a store, released with kvs_close().
 * Errors: KVS_EINVAL (unknown type, NULL), KVS_ECONFIG (a variable does not
 * parse: kvs_last_error() names it), KVS_ETIMEDOUT, KVS_ENET, KVS_ENOMEM. */
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

/* Block until every worker of the job has entered the barrier. */
int kvs_barrier(kvs_store *s);

/* This worker's rank (0..W-1), the number of workers and of servers. */
int kvs_rank(const kvs_store *s);
int kvs_num_workers(const kvs_store *s);
int kvs_num_servers(const kvs_store *s);

/* Set a server-side optimizer, e.g. "sgd lr=0.1".  Returns KVS_ENOTSUP in
 * this version. */
int kvs_set_optimizer(kvs_store *s, const char *spec);

/* Wait for outstanding operations, leave the job and free the store.  Always
 * releases the store (even on error); returns the first unreported error.
 * kvs_close(NULL) returns 0. */
int kvs_close(kvs_store *s);

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
