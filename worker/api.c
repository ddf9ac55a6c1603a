/* api.c - the public API of libkvs: argument checks, store types, create and
 * close; the dist stores' operations run in the op engine (op.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/log.h"
#include "common/memtune.h"
#include "common/sizes.h"
#include "worker/metrics.h"
#include "worker/notify.h"
#include "tree/tree.h"
#include "worker/trace.h"
#include "worker/comm.h"
#include "reduce/codec.h"
#include "worker/compress.h"
#include "worker/group.h"
#include "worker/op.h"
#include "worker/failover.h"
#include "worker/wrk_int.h"


/* ---- argument checks ---- */

static int check_array(kvs_store *s, const kvs_array *a, uint64_t key, const char *what)
{
    uint64_t bytes;
    if ((unsigned)a->dtype >= KVS_NUM_DTYPES)
        return err_set(KVS_EINVAL, "key %llu: %s dtype %d is not a kvs_dtype",
                       (unsigned long long)key, what, (int)a->dtype);
    if (a->device != KVS_CPU) {
        int rc = wrk_comm_check_device(s->comm, a->device, key, what);
        if (rc)
            return rc;
    }
    if (!size_mul(a->count, kvs_dtype_size(a->dtype), &bytes))
        return err_set(KVS_ETOOBIG, "key %llu: %s of %llu %s elements: the byte size "
                       "overflows 64 bits", (unsigned long long)key, what,
                       (unsigned long long)a->count, kvs_dtype_name(a->dtype));
    if (bytes > s->c.max_message)
        return err_set(KVS_ETOOBIG, "key %llu: %s of %llu %s elements is %llu bytes, more than "
                       "KVS_MAX_MESSAGE (%llu bytes) allows for one key",
                       (unsigned long long)key, what, (unsigned long long)a->count,
                       kvs_dtype_name(a->dtype), (unsigned long long)bytes,
                       (unsigned long long)s->c.max_message);
    if (a->data == NULL && a->count > 0)
        return err_set(KVS_EINVAL, "key %llu: %s data is NULL", (unsigned long long)key, what);
    return 0;
}

static int check_args(kvs_store *s, size_t n, const uint64_t *keys, const kvs_array *a,
                      const char *what)
{
    if (s == NULL)
        return err_set(KVS_EINVAL, "store is NULL");
    if (n > 0 && (keys == NULL || a == NULL))
        return err_set(KVS_EINVAL, "%s: keys or arrays are NULL", what);
    for (size_t i = 0; i < n; i++) {
        int rc = check_array(s, &a[i], keys[i], what);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- public API ---- */

static const struct store_type {
    const char *name;
    int kind;
    bool async;
    int comm;
} store_types[] = {
    {"local", WRK_LOCAL, false, WRK_COMM_CPU},
    {"device", WRK_LOCAL, false, WRK_COMM_DEVICE},
    {"nccl", WRK_LOCAL, false, WRK_COMM_NCCL},
    {"dist_sync", WRK_DIST, false, WRK_COMM_CPU},
    {"dist", WRK_DIST, false, WRK_COMM_CPU},
    {"dist_async", WRK_DIST, true, WRK_COMM_CPU},
    {"dist_sync_device", WRK_DIST, false, WRK_COMM_DEVICE},
    {"dist_device_sync", WRK_DIST, false, WRK_COMM_DEVICE},
    {"dist_async_device", WRK_DIST, true, WRK_COMM_DEVICE},
};

static int parse_type(const char *type, int *kind, bool *async, int *comm)
{
    if (type == NULL)
        return err_set(KVS_EINVAL, "store type is NULL");
    for (size_t i = 0; i < sizeof store_types / sizeof store_types[0]; i++)
        if (!strcmp(type, store_types[i].name)) {
            *kind = store_types[i].kind;
            *async = store_types[i].async;
            *comm = store_types[i].comm;
            return 0;
        }
    return err_set(KVS_EINVAL, "unknown store type '%s': expected 'local', 'device', 'nccl', "
                   "'dist_sync', 'dist_async', 'dist_sync_device' (or 'dist_device_sync') or "
                   "'dist_async_device'", type);
}

/* KVS_TRACE: "%r" in the path becomes the rank (one file per worker). */
static void trace_path(const char *tmpl, int rank, char *out, size_t len)
{
    size_t n = 0;
    for (const char *p = tmpl; *p && n + 12 < len; p++) {
        if (p[0] == '%' && p[1] == 'r') {
            n += (size_t)snprintf(out + n, len - n, "%d", rank);
            p++;
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
}

int kvs_create(const char *type, kvs_store **out)
{
    kvs_store *s;
    char err[512];
    int kind = 0, comm = 0, rc;
    bool async = false;
    err_clear();
    if (out == NULL)
        return err_set(KVS_EINVAL, "out is NULL");
    *out = NULL;
    rc = parse_type(type, &kind, &async, &comm);
    if (rc)
        return rc;
    s = calloc(1, sizeof *s);
    if (s == NULL)
        return err_set(KVS_ENOMEM, "out of memory");
    s->kind = kind;
    s->async = async;
    s->comm_mode = comm;
    s->local_size = 1; /* alone until the node table says otherwise */
    s->local_group = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    hmap_init(&s->keys);
    hmap_init(&s->busy);
    pthread_mutex_init(&s->zx_mu, NULL);
    hmap_init(&s->zexempt);
    wrk_reqmap_init(&s->reqs);
    hmap_init(&s->batches);
    snprintf(s->who, sizeof s->who, "worker");
    if (cfg_load(&s->c, kind == WRK_DIST, err, sizeof err) != 0 ||
        tree_topo_check(s->c.topology, err, sizeof err) != 0) {
        rc = err_set(KVS_ECONFIG, "%s", err);
        goto fail;
    }
    if (kind == WRK_DIST && s->c.role != CFG_ROLE_WORKER && s->c.role != CFG_ROLE_NONE) {
        rc = err_set(KVS_ECONFIG, "DMLC_ROLE='%s': libkvs is the worker side; run "
                     "kvs-%s for that role", cfg_role_name(s->c.role),
                     cfg_role_name(s->c.role));
        goto fail;
    }
    log_raise_level(s->c.verbose); /* never lowers another store's level */
    if (s->c.worker_id >= 0)
        snprintf(s->who, sizeof s->who, "worker %d", s->c.worker_id);
    if (kind == WRK_DIST && s->c.malloc_tune)
        mem_tune();
    if (wrk_met_init(s) != 0) {
        rc = err_set(KVS_ENOMEM, "out of memory");
        goto fail;
    }
    rc = red_pool_new(s->c.reduction_nthreads, s->c.bigarray_bound, &s->pool);
    if (rc) {
        rc = err_set(rc, "cannot start %d reduction threads", s->c.reduction_nthreads);
        goto fail;
    }
    if ((rc = wrk_comm_new(s, comm, &s->comm)) != 0)
        goto fail; /* it set the message */
    if (kind == WRK_LOCAL) {
        s->num_workers = 1;
        s->rank = 0;
        *out = s;
        return 0;
    }
    s->num_workers = s->c.num_worker;
    s->num_servers = s->c.num_server;
    s->routing = (wrk_routing){s->c.num_server, s->c.bigarray_bound, s->c.van == CFG_VAN_P3,
                               s->c.slice_threshold, s->c.chunk_bytes};
    if (wrk_grp_config(s, err, sizeof err) != 0) {
        rc = err_set(KVS_ECONFIG, "%s", err);
        goto fail;
    }
    if (cfg_resolve_host(&s->c, s->host, sizeof s->host, err, sizeof err) != 0) {
        rc = err_set(KVS_ECONFIG, "%s", err);
        goto fail;
    }
    cfg_log(&s->c, s->who);
    rc = net_check_host(s->c.root_uri, "DMLC_PS_ROOT_URI", err, sizeof err);
    if (rc) {
        rc = err_set(rc, "%s", err);
        goto fail;
    }
    rc = wrk_io_start(s);
    if (rc)
        goto fail; /* wrk_io_start set the message */
    if ((rc = wrk_grp_start(s)) != 0)
        goto fail; /* it set the message */
    if (s->c.trace_path[0]) {
        char path[sizeof s->c.trace_path + 16];
        trace_path(s->c.trace_path, s->rank, path, sizeof path);
        rc = wrk_trace_open(path, s->rank, WRK_TRACE_RING, &s->trace, err, sizeof err);
        if (rc) {
            rc = err_set(rc == KVS_EINVAL ? KVS_ECONFIG : rc, "%s", err);
            goto fail;
        }
        LOG(LOG_INFO, s->who, "trace", "writing the timeline to %s", path);
    }
    *out = s;
    return 0;
fail:
    {
        char keep[512];
        snprintf(keep, sizeof keep, "%s", kvs_last_error());
        kvs_close(s);
        err_set(rc, "%s", keep);
    }
    return rc;
}

int kvs_init(kvs_store *s, size_t n, const uint64_t *keys, const kvs_array *vals)
{
    wrk_op *op = NULL;
    int rc;
    err_clear();
    if ((rc = check_args(s, n, keys, vals, "init")) != 0)
        return rc;
    wrk_grp_forget(s); /* a re-init replaces values the group keeps for late pulls */
    if (wrk_comm_takes(s->comm, n, vals, NULL))
        return wrk_comm_call(s, WRK_OP_INIT, n, keys, vals, NULL, 0);
    if (s->kind == WRK_LOCAL)
        return wrk_local_init(s, n, keys, vals);
    rc = wrk_submit(s, WRK_OP_INIT, n, keys, vals, NULL, 0, &op, NULL, NULL, NULL);
    if (rc)
        return rc;
    return wrk_wait_op(s, op);
}

int kvs_push(kvs_store *s, size_t n, const uint64_t *keys, const kvs_array *vals, int priority)
{
    int rc;
    err_clear();
    if ((rc = check_args(s, n, keys, vals, "push")) != 0)
        return rc;
    if (wrk_comm_takes(s->comm, n, vals, NULL))
        return wrk_comm_call(s, WRK_OP_PUSH, n, keys, vals, NULL, priority);
    if (s->kind == WRK_LOCAL)
        return wrk_local_push(s, n, keys, vals);
    if ((rc = wrk_rsp_dense_check(s, n, keys)) != 0)
        return rc;
    if (wrk_grp_on(s))
        return wrk_grp_submit(s, WRK_OP_PUSH, n, keys, vals, NULL, NULL, priority, NULL, NULL);
    return wrk_submit(s, WRK_OP_PUSH, n, keys, vals, NULL, priority, NULL, NULL, NULL, NULL);
}

int kvs_pull(kvs_store *s, size_t n, const uint64_t *keys, const kvs_array *outs, int priority)
{
    int rc;
    err_clear();
    if ((rc = check_args(s, n, keys, outs, "pull")) != 0)
        return rc;
    if (wrk_comm_takes(s->comm, n, NULL, outs))
        return wrk_comm_call(s, WRK_OP_PULL, n, keys, NULL, outs, priority);
    if (s->kind == WRK_LOCAL)
        return wrk_local_pull(s, n, keys, outs);
    if (wrk_grp_on(s) && !s->async) { /* group.c: one pull per host */
        if ((rc = wrk_rsp_dense_check(s, n, keys)) != 0)
            return rc;
        return wrk_grp_submit(s, WRK_OP_PULL, n, keys, NULL, outs, NULL, priority, NULL, NULL);
    }
    return wrk_submit(s, WRK_OP_PULL, n, keys, NULL, outs, priority, NULL, NULL, NULL, NULL);
}

int kvs_pushpull(kvs_store *s, size_t n, const uint64_t *keys, const kvs_array *vals,
                 const kvs_array *outs, int priority)
{
    int rc;
    err_clear();
    if ((rc = check_args(s, n, keys, vals, "pushpull")) != 0 ||
        (rc = check_args(s, n, keys, outs, "pushpull")) != 0)
        return rc;
    if (wrk_comm_takes(s->comm, n, vals, outs))
        return wrk_comm_call(s, WRK_OP_PUSHPULL, n, keys, vals, outs, priority);
    if (s->kind == WRK_LOCAL) {
        /* check the outputs first: a failed call changes nothing */
        rc = wrk_local_check(s, n, keys, outs, "pushpull output");
        if (!rc)
            rc = wrk_local_push(s, n, keys, vals);
        return rc ? rc : wrk_local_pull(s, n, keys, outs);
    }
    if ((rc = wrk_rsp_dense_check(s, n, keys)) != 0)
        return rc;
    if (wrk_grp_on(s))
        return wrk_grp_submit(s, WRK_OP_PUSHPULL, n, keys, vals, outs, NULL, priority, NULL,
                              NULL);
    return wrk_submit(s, WRK_OP_PUSHPULL, n, keys, vals, outs, priority, NULL, NULL, NULL, NULL);
}

int kvs_wait(kvs_store *s, uint64_t key)
{
    err_clear();
    if (s == NULL)
        return err_set(KVS_EINVAL, "store is NULL");
    return wrk_wait_keys(s, false, key);
}

int kvs_wait_all(kvs_store *s)
{
    err_clear();
    if (s == NULL)
        return err_set(KVS_EINVAL, "store is NULL");
    return wrk_wait_keys(s, true, 0);
}

int kvs_barrier(kvs_store *s)
{
    err_clear();
    if (s == NULL)
        return err_set(KVS_EINVAL, "store is NULL");
    if (s->kind == WRK_LOCAL)
        return 0;
    return wrk_op_control(s, WRK_OP_BARRIER);
}

/* In an elastic job: the rank and size of the epoch the program has seen
 * (worker/elastic.h), which another thread's call may change. */
static int elastic_view(const kvs_store *s, bool rank)
{
    pthread_mutex_t *mu = (pthread_mutex_t *)&s->mu; /* the store's lock: not its state */
    pthread_mutex_lock(mu);
    int v = rank ? s->e_rank : s->e_num;
    pthread_mutex_unlock(mu);
    return v;
}

int kvs_rank(const kvs_store *s)
{
    if (s && s->kind == WRK_DIST && s->c.elastic)
        return elastic_view(s, true);
    return s ? s->rank : KVS_EINVAL;
}

int kvs_num_workers(const kvs_store *s)
{
    if (s && s->kind == WRK_DIST && s->c.elastic)
        return elastic_view(s, false);
    return s ? s->num_workers : KVS_EINVAL;
}

int kvs_num_servers(const kvs_store *s)
{
    return s ? s->num_servers : KVS_EINVAL;
}

int kvs_broadcast(kvs_store *s, size_t n, const uint64_t *keys, const kvs_array *vals,
                  const kvs_array *outs, int priority)
{
    int rc = kvs_init(s, n, keys, vals);
    if (rc)
        return rc;
    return kvs_pull(s, n, keys, outs, priority);
}

int kvs_is_capable(const kvs_store *s, int cap)
{
    err_clear();
    if (s == NULL)
        return err_set(KVS_EINVAL, "store is NULL");
    switch (cap) {
    case KVS_CAP_OPTIMIZER:
        return s->kind == WRK_DIST;
    case KVS_CAP_PUSHPULL:
    case KVS_CAP_BROADCAST:
        return 1;
    case KVS_CAP_DEVICE_STORE:
        return s->comm_mode != WRK_COMM_CPU;
    case KVS_CAP_ASYNC:
        return s->async;
    case KVS_CAP_COMPRESSION:
        return s->kind == WRK_DIST && s->comm_mode == WRK_COMM_CPU;
    case KVS_CAP_ROW_SPARSE:
        return s->kind == WRK_DIST;
    default:
        return err_set(KVS_EINVAL, "unknown capability %d (expected %d..%d, see kvs_capability)",
                       cap, KVS_CAP_OPTIMIZER, KVS_CAP_ROW_SPARSE);
    }
}

int kvs_set_gradient_compression(kvs_store *s, const char *spec)
{
    err_clear();
    if (s == NULL)
        return err_set(KVS_EINVAL, "store is NULL");
    if (!kvs_is_capable(s, KVS_CAP_COMPRESSION)) {
        char why[256];
        red_codec c;
        if (red_codec_parse(spec, &c, why, sizeof why) != 0) /* a bad spec first */
            return err_set(KVS_EINVAL, "%s", why);
        return err_set(KVS_EINVAL, "gradient compression: only the pushes of dist_sync and "
                       "dist_async stores (host arrays, to servers) are compressed; this "
                       "is %s", s->kind == WRK_LOCAL ? "a local store"
                                                     : "a device store (dist_*_device)");
    }
    return wrk_codec_set(s, spec);
}

int kvs_compression_exempt(kvs_store *s, size_t n, const uint64_t *keys)
{
    err_clear();
    if (s == NULL)
        return err_set(KVS_EINVAL, "store is NULL");
    if (n > 0 && keys == NULL)
        return err_set(KVS_EINVAL, "keys is NULL");
    return wrk_codec_exempt(s, n, keys);
}

int kvs_num_dead_node(const kvs_store *s, int mask)
{
    int n = 0;
    err_clear();
    if (s == NULL)
        return err_set(KVS_EINVAL, "store is NULL");
    if (mask == 0 || (mask & ~(KVS_GROUP_SERVER | KVS_GROUP_WORKER)) != 0)
        return err_set(KVS_EINVAL, "node group mask %d: expected KVS_GROUP_SERVER (2), "
                       "KVS_GROUP_WORKER (4) or both (6)", mask);
    pthread_mutex_lock((pthread_mutex_t *)&s->mu);
    if (mask & KVS_GROUP_SERVER)
        n += s->dead_servers;
    if (mask & KVS_GROUP_WORKER)
        n += s->dead_workers;
    pthread_mutex_unlock((pthread_mutex_t *)&s->mu);
    return n;
}

int kvs_local_rank(const kvs_store *s)
{
    return s ? s->local_rank : KVS_EINVAL;
}

int kvs_local_size(const kvs_store *s)
{
    return s ? s->local_size : KVS_EINVAL;
}

int kvs_get_device_stats(kvs_store *s, kvs_device_stats *out)
{
    err_clear();
    if (s == NULL || out == NULL)
        return err_set(KVS_EINVAL, "store or out is NULL");
    wrk_comm_stats(s->comm, out);
    return 0;
}

int kvs_close(kvs_store *s)
{
    int rc = 0;
    if (s == NULL)
        return 0;
    wrk_notify_stop(s); /* every callback runs, each once its key is done */
    if (s->thread_started) {
        rc = wrk_wait_keys(s, true, 0);
        char keep[512];
        snprintf(keep, sizeof keep, "%s", kvs_last_error());
        wrk_grp_stop(s); /* every op of ours is done: leave the group */
        pthread_mutex_lock(&s->mu);
        bool ok = s->registered && !s->sched_gone;
        pthread_mutex_unlock(&s->mu);
        if (ok) {
            int rc2 = wrk_op_control(s, WRK_OP_EXIT);
            if (rc == 0 && rc2 != 0 && rc2 != KVS_ECLOSED && rc2 != s->fatal)
                rc = rc2;
        }
        wrk_io_stop(s);
        if (rc)
            err_set(rc, "%s", keep);
    }
    if (s->trace) {
        if (wrk_trace_dropped(s->trace))
            LOG(LOG_WARN, s->who, "trace", "%llu timeline events dropped (the writer could "
                "not keep up)", (unsigned long long)wrk_trace_dropped(s->trace));
        wrk_trace_close(s->trace);
        s->trace = NULL;
    }
    wrk_ops_free_all(s); /* failed and never reported */
    if (s->kind == WRK_LOCAL)
        wrk_local_free(s);
    for (size_t i = 0; i < s->keys.cap; i++)
        if (s->keys.used[i] == 1)
            free(s->keys.vals[i]);
    hmap_fini(&s->keys);
    hmap_fini(&s->busy);
    wrk_reqmap_fini(&s->reqs);
    wrk_comm_free(s->comm); /* after every op (their host staging) is freed */
    hmap_fini(&s->batches);
    for (int r = 0; s->fuse && r < s->num_servers; r++)
        free(s->fuse[r].reqs);
    free(s->fuse);
    for (int r = 0; s->pq && r < s->num_servers; r++)
        wrk_pq_fini(&s->pq[r]);
    free(s->pq);
    free((void *)s->inflight);
    free(s->cma);
    free(s->srv_gone);
    free(s->hellos);
    wrk_met_free(s);
    free(s->hello_wait);
    free(s->held_head);
    free(s->held_tail);
    free(s->nonces);
    wrk_grp_stop(s); /* (a group that never started, or one left with pulls in flight) */
    free(s->peers);
    free(s->connected);
    wrk_fo_free(s);
    free(s->server_ep);
    free(s->mon_args);
    red_pool_free(s->pool);
    wrk_codec_free(s->codec);
    hmap_fini(&s->zexempt);
    pthread_mutex_destroy(&s->zx_mu);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
    return rc;
}
