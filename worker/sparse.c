/* sparse.c - row-sparse keys in libkvs (kvs.h "Row-sparse arrays").
 *
 * A row-sparse key is placed by rows: parts are row ranges (route.c's
 * rules applied to rows, then scaled by row_len), cut into chunks of whole
 * rows by KVS_RSP_CHUNK_BYTES, never sliced by P3.  A call checks every row
 * id against the key (range, duplicates) before it builds anything, sorts
 * the ids, and sends one request per chunk (proto/rsp.h): a push reaches
 * every chunk, with the rows that fall in it (none: an empty body still
 * counts in the chunk's round);
 * a pull asks only the chunks that hold wanted rows.  Replies are scattered
 * back into the caller's order by the op's owner (rsp_reply).
 *
 * Threads: the calling thread builds the op outside store->mu (reading the
 * key's shape under mu first); the I/O thread runs rsp_reply.
 */
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/datapath.h"
#include "common/sizes.h"
#include "proto/rsp.h"
#include "worker/op.h"
#include "worker/wrk_int.h"

/* One row of a call: its id and its place in the caller's arrays. */
typedef struct rsp_row {
    uint64_t id;
    uint64_t at;
} rsp_row;

/* What the replies of an op need: per request, where its rows go. */
typedef struct rsp_owner {
    size_t nreqs;
    uint64_t *first;    /* per request: its first row in rows[] */
    uint64_t *nrows;    /* per request: rows it asked for (0: no reply data) */
    uint8_t **out;      /* per request: the caller's output array */
    uint64_t *row_bytes;
    rsp_row *rows;      /* all rows of the op, sorted per key */
} rsp_owner;

static void owner_free(void *p)
{
    rsp_owner *o = p;
    if (o == NULL)
        return;
    free(o->first);
    free(o->rows);
    free(o);
}

static int rsp_reply(kvs_store *s, wrk_req *q, const proto_hdr *h, const void *body,
                     const char **why)
{
    rsp_owner *o = q->op->owner;
    size_t i = (size_t)(q - q->op->reqs);
    (void)s;
    if (i >= o->nreqs || o->out[i] == NULL)
        return 0;
    uint64_t n = o->nrows[i], rb = o->row_bytes[i];
    if (h->dtype != q->h.dtype || h->body_len != n * rb || (n > 0 && body == NULL)) {
        *why = "a server's row-sparse reply does not match its request";
        return KVS_EPROTO;
    }
    const uint8_t *src = body;
    const rsp_row *rw = o->rows + o->first[i];
    for (uint64_t j = 0; j < n; j++)
        memcpy(o->out[i] + rw[j].at * rb, src + j * rb, rb);
    return 0;
}

static const wrk_op_ops rsp_ops = {rsp_reply, NULL, owner_free, NULL};

/* One message of a row-sparse key: rows [a, b) on server. */
typedef struct rsp_range {
    uint64_t a, b;
    int server;
} rsp_range;

/* The messages of a key of count elements in rows of row_bytes: route.c's
 * placement applied to rows (parts of whole rows), each part cut into
 * chunks of at most KVS_RSP_CHUNK_BYTES (at least one row).  Fills out (if not
 * NULL) and returns how many; empty parts are skipped.  KVS_RSP_CHUNK_BYTES
 * (256 MiB), not KVS_CHUNK_BYTES: every push reaches every chunk, so a step
 * costs a message per chunk; chunks only keep single messages and entries
 * of huge tables bounded. */
static uint64_t rsp_ranges(const kvs_store *s, uint64_t key, uint64_t count, uint64_t rows,
                           uint64_t row_bytes, rsp_range *out)
{
    const wrk_routing *r = &s->routing;
    uint64_t np = count == 0 ? 0
                  : count < r->bigarray_bound || r->num_servers == 1 ? 1
                                                                     : (uint64_t)r->num_servers;
    uint64_t per = s->c.rsp_chunk_bytes / row_bytes;
    uint64_t n = 0;
    if (per == 0)
        per = 1;
    for (uint64_t p = 0; p < np; p++) {
        uint64_t a = np == 1 ? 0 : wrk_route_split(rows, p, np);
        uint64_t b = np == 1 ? rows : wrk_route_split(rows, p + 1, np);
        int server = np == 1 ? wrk_route_home(key, r->num_servers) : (int)p;
        for (uint64_t c = a; c < b; c += per, n++)
            if (out)
                out[n] = (rsp_range){c, b - c > per ? c + per : b, server};
    }
    return n;
}

static int cmp_row(const void *x, const void *y)
{
    const rsp_row *a = x, *b = y;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Check ids (nrows of them) against a key of rows rows and fill out sorted
 * by id.  what: "push" or "pull" for the message. */
static int sort_ids(uint64_t key, const int64_t *ids, uint64_t nrows, uint64_t rows,
                    rsp_row *out, const char *what)
{
    if (nrows > 0 && ids == NULL)
        return err_set(KVS_EINVAL, "key %llu: %s row_ids is NULL", (unsigned long long)key,
                       what);
    for (uint64_t i = 0; i < nrows; i++) {
        if (ids[i] < 0 || (uint64_t)ids[i] >= rows)
            return err_set(KVS_EINVAL, "key %llu: %s row id %lld (at %llu) is out of range: the "
                           "key has %llu rows", (unsigned long long)key, what,
                           (long long)ids[i], (unsigned long long)i, (unsigned long long)rows);
        out[i] = (rsp_row){(uint64_t)ids[i], i};
    }
    qsort(out, nrows, sizeof *out, cmp_row);
    for (uint64_t i = 1; i < nrows; i++)
        if (out[i].id == out[i - 1].id)
            return err_set(KVS_EINVAL, "key %llu: %s row id %llu appears twice (at %llu and "
                           "%llu)", (unsigned long long)key, what,
                           (unsigned long long)out[i].id,
                           (unsigned long long)(out[i].at < out[i - 1].at ? out[i].at
                                                                          : out[i - 1].at),
                           (unsigned long long)(out[i].at < out[i - 1].at ? out[i - 1].at
                                                                          : out[i].at));
    return 0;
}

/* What a call knows of one key (read under mu). */
typedef struct rsp_key {
    uint64_t count, row_len, rows;
    kvs_dtype dtype;
} rsp_key;

static int store_ok(kvs_store *s, const char *what)
{
    if (s == NULL)
        return err_set(KVS_EINVAL, "store is NULL");
    if (s->kind != WRK_DIST)
        return err_set(KVS_ENOTSUP, "%s: row-sparse keys need a \"dist_*\" store", what);
    return 0;
}

/* Look up n keys (distinct) as row-sparse keys of this store. */
static int lookup_keys(kvs_store *s, size_t n, const uint64_t *keys, rsp_key *out)
{
    int rc = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (keys[i] == keys[j])
                return err_set(KVS_EINVAL, "key %llu appears twice in one row-sparse call",
                               (unsigned long long)keys[i]);
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < n && rc == 0; i++) {
        wrk_key *k = hmap_get(&s->keys, keys[i]);
        if (k == NULL)
            rc = err_set(KVS_ENOKEY, "key %llu was never initialised (kvs_init_row_sparse)",
                         (unsigned long long)keys[i]);
        else if (k->row_len == 0)
            rc = err_set(KVS_EINVAL, "key %llu is dense: use kvs_push, kvs_pull and "
                         "kvs_pushpull", (unsigned long long)keys[i]);
        else
            out[i] = (rsp_key){k->count, k->row_len, k->count / k->row_len, k->dtype};
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static int check_rows_array(uint64_t key, const kvs_array *a, uint64_t nrows,
                            const rsp_key *k, const char *what)
{
    if (a == NULL)
        return err_set(KVS_EINVAL, "key %llu: %s array is NULL", (unsigned long long)key, what);
    if (a->device != KVS_CPU)
        return err_set(KVS_EINVAL, "key %llu: row-sparse %s arrays must be host memory "
                       "(device %d)", (unsigned long long)key, what, a->device);
    if (a->dtype != k->dtype || a->count != nrows * k->row_len)
        return err_set(KVS_ESHAPE, "key %llu: %s has %llu %s elements, expected %llu rows of "
                       "%llu %s elements", (unsigned long long)key, what,
                       (unsigned long long)a->count, kvs_dtype_name(a->dtype),
                       (unsigned long long)nrows, (unsigned long long)k->row_len,
                       kvs_dtype_name(k->dtype));
    if (a->count > 0 && a->data == NULL)
        return err_set(KVS_EINVAL, "key %llu: %s data is NULL", (unsigned long long)key, what);
    return 0;
}

/* One row-sparse call on n keys: ids[i]/nids[i] the rows of key i, src[i]
 * (push data, or NULL) and dst[i] (output, or NULL). */
typedef struct rsp_call {
    int type; /* WRK_OP_PUSH, WRK_OP_PULL, WRK_OP_PUSHPULL */
    size_t n;
    const uint64_t *keys;
    const int64_t *const *ids;
    const uint64_t *nids;
    const uint8_t *const *src;
    uint8_t *const *dst;
    int priority;
} rsp_call;

static uint16_t wire(int type)
{
    return (uint16_t)(type == WRK_OP_PUSH ? PROTO_PUSH
                      : type == WRK_OP_PULL ? PROTO_PULL : PROTO_PUSHPULL);
}

static int rsp_submit(kvs_store *s, const rsp_call *c, const rsp_key *ks)
{
    wrk_op *op = calloc(1, sizeof *op);
    rsp_owner *o = calloc(1, sizeof *o);
    rsp_range **rg = NULL;
    uint64_t *nrg = NULL;
    uint64_t total_rows = 0, nreqs = 0, body = 0;
    int rc = 0;
    if (op == NULL || o == NULL) {
        rc = err_set(KVS_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < c->n; i++)
        total_rows += c->nids[i];
    o->rows = malloc((total_rows ? total_rows : 1) * sizeof *o->rows);
    if (o->rows == NULL) {
        rc = err_set(KVS_ENOMEM, "out of memory for %llu row ids",
                     (unsigned long long)total_rows);
        goto out;
    }
    /* check and sort every key's ids before anything is built */
    for (size_t i = 0, at = 0; i < c->n; at += c->nids[i], i++)
        if ((rc = sort_ids(c->keys[i], c->ids[i], c->nids[i], ks[i].rows, o->rows + at,
                           c->type == WRK_OP_PULL ? "pull" : "push")) != 0)
            goto out;
    /* the key's ranges; count requests and body bytes */
    if ((rg = calloc(c->n, sizeof *rg)) == NULL || (nrg = calloc(c->n, sizeof *nrg)) == NULL) {
        rc = err_set(KVS_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0, at = 0; i < c->n; at += c->nids[i], i++) {
        uint64_t rb = ks[i].row_len * kvs_dtype_size(ks[i].dtype);
        nrg[i] = rsp_ranges(s, c->keys[i], ks[i].count, ks[i].rows, rb, NULL);
        if ((rg[i] = malloc((nrg[i] ? nrg[i] : 1) * sizeof *rg[i])) == NULL) {
            rc = err_set(KVS_ENOMEM, "out of memory");
            goto out;
        }
        rsp_ranges(s, c->keys[i], ks[i].count, ks[i].rows, rb, rg[i]);
        const rsp_row *rw = o->rows + at;
        uint64_t j = 0;
        for (uint64_t p = 0; p < nrg[i]; p++) {
            uint64_t m = 0;
            while (j + m < c->nids[i] && rw[j + m].id < rg[i][p].b)
                m++;
            j += m;
            if (c->type == WRK_OP_PULL && m == 0)
                continue;
            uint64_t len = proto_rsp_len(m, rb, c->type != WRK_OP_PULL);
            nreqs++;
            body += (len + 63) & ~(uint64_t)63;
        }
    }
    op->store = s;
    op->type = c->type;
    op->rsp = true;
    op->nkeys = c->n;
    op->keys = malloc((c->n ? c->n : 1) * sizeof *op->keys);
    op->kbusy = malloc((c->n ? c->n : 1) * sizeof *op->kbusy);
    op->reqs = calloc(nreqs ? nreqs : 1, sizeof *op->reqs);
    op->tmp = body ? aligned_alloc(64, body) : NULL;
    o->nreqs = nreqs;
    o->first = calloc(nreqs ? nreqs : 1, 4 * sizeof *o->first);
    if (op->keys == NULL || op->kbusy == NULL || op->reqs == NULL || (body && !op->tmp) ||
        o->first == NULL) {
        rc = err_set(KVS_ENOMEM, "out of memory for %llu row-sparse requests",
                     (unsigned long long)nreqs);
        goto out;
    }
    o->nrows = o->first + nreqs;
    o->out = (uint8_t **)(o->nrows + nreqs);
    o->row_bytes = o->nrows + 2 * nreqs;
    memcpy(op->keys, c->keys, c->n * sizeof *op->keys);
    uint8_t *bp = op->tmp;
    size_t r = 0;
    for (size_t i = 0, at = 0; i < c->n; at += c->nids[i], i++) {
        const rsp_key *k = &ks[i];
        size_t esz = kvs_dtype_size(k->dtype);
        uint64_t rb = k->row_len * esz, j = 0;
        const rsp_row *rw = o->rows + at;
        for (uint64_t p = 0; p < nrg[i]; p++) {
            uint64_t a = rg[i][p].a, b = rg[i][p].b, m = 0;
            int srv = rg[i][p].server;
            uint32_t pnum = (uint32_t)p;
            while (j + m < c->nids[i] && rw[j + m].id < b)
                m++;
            uint64_t j0 = j;
            j += m;
            if (c->type == WRK_OP_PULL && m == 0)
                continue;
            wrk_req *q = &op->reqs[r];
            q->op = op;
            q->kidx = (uint32_t)i;
            q->server = srv;
            q->h.type = wire(c->type);
            q->h.flags = PROTO_F_RSP;
            q->h.priority = c->priority;
            q->h.contrib = c->type != WRK_OP_PULL;
            q->h.key = c->keys[i];
            q->h.part = pnum;
            q->h.offset = a * k->row_len;
            q->h.count = (b - a) * k->row_len;
            q->h.total = k->count;
            q->h.dtype = (uint32_t)k->dtype;
            uint64_t len = proto_rsp_len(m, rb, c->type != WRK_OP_PULL);
            le_put64(bp, m);
            le_put64(bp + 8, k->row_len);
            for (uint64_t t = 0; t < m; t++)
                le_put64(bp + PROTO_RSP_HDR + 8 * t, rw[j0 + t].id - a);
            if (c->type != WRK_OP_PULL) {
                uint8_t *rows = bp + PROTO_RSP_HDR + 8 * m;
                for (uint64_t t = 0; t < m; t++)
                    memcpy(rows + t * rb, c->src[i] + rw[j0 + t].at * rb, rb);
            }
            q->send = bp;
            q->h.body_len = len;
            q->zc = len >= DP_ZERO_COPY_MIN;
            bp += (len + 63) & ~(uint64_t)63;
            o->first[r] = at + j0;
            o->nrows[r] = m;
            o->row_bytes[r] = rb;
            o->out[r] = c->type != WRK_OP_PUSH ? c->dst[i] : NULL;
            op->pending += 1 + q->zc;
            r++;
        }
    }
    op->nreqs = r;
    op->ops = &rsp_ops;
    op->owner = o;
    o = NULL;
    rc = wrk_submit_built(s, op);
    if (rc == 0)
        op = NULL; /* the engine's now (or freed: nothing to send) */
out:
    for (size_t i = 0; rg && i < c->n; i++)
        free(rg[i]);
    free(rg);
    free(nrg);
    owner_free(o);
    wrk_op_free(op);
    return rc;
}

/* The shared front of push, pushpull and pull. */
static int rsp_call_run(kvs_store *s, int type, size_t n, const uint64_t *keys,
                        const kvs_rsp *vals, const int64_t *pull_ids, uint64_t pull_n,
                        const kvs_array *outs, int priority)
{
    const char *what = type == WRK_OP_PULL ? "row_sparse_pull" : type == WRK_OP_PUSH
                                                                       ? "push_rsp"
                                                                       : "pushpull_rsp";
    int rc;
    if ((rc = store_ok(s, what)) != 0)
        return rc;
    if (n == 0)
        return 0;
    if (keys == NULL || (type != WRK_OP_PULL && vals == NULL) ||
        (type != WRK_OP_PUSH && outs == NULL))
        return err_set(KVS_EINVAL, "%s: keys or arrays are NULL", what);
    rsp_key *ks = calloc(n, sizeof *ks);
    const int64_t **ids = calloc(n, sizeof *ids);
    uint64_t *nids = calloc(n, sizeof *nids);
    const uint8_t **src = calloc(n, sizeof *src);
    uint8_t **dst = calloc(n, sizeof *dst);
    if (!ks || !ids || !nids || !src || !dst) {
        rc = err_set(KVS_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = lookup_keys(s, n, keys, ks)) != 0)
        goto out;
    for (size_t i = 0; i < n; i++) {
        nids[i] = vals ? vals[i].nrows : pull_n;
        ids[i] = vals ? vals[i].row_ids : pull_ids;
        if (vals && (rc = check_rows_array(keys[i], &vals[i].rows, nids[i], &ks[i], "push "
                                           "rows")) != 0)
            goto out;
        if (outs && (rc = check_rows_array(keys[i], &outs[i], nids[i], &ks[i], "output")) != 0)
            goto out;
        src[i] = vals ? vals[i].rows.data : NULL;
        dst[i] = outs ? outs[i].data : NULL;
    }
    rsp_call c = {type, n, keys, ids, nids, src, dst, priority};
    rc = rsp_submit(s, &c, ks);
out:
    free(ks);
    free(ids);
    free(nids);
    free(src);
    free(dst);
    return rc;
}

int kvs_push_rsp(kvs_store *s, size_t n, const uint64_t *keys, const kvs_rsp *vals,
                 int priority)
{
    err_clear();
    return rsp_call_run(s, WRK_OP_PUSH, n, keys, vals, NULL, 0, NULL, priority);
}

int kvs_pushpull_rsp(kvs_store *s, size_t n, const uint64_t *keys, const kvs_rsp *vals,
                     const kvs_array *outs, int priority)
{
    err_clear();
    return rsp_call_run(s, WRK_OP_PUSHPULL, n, keys, vals, NULL, 0, outs, priority);
}

int kvs_row_sparse_pull(kvs_store *s, uint64_t key, const int64_t *row_ids, uint64_t nrows,
                        const kvs_array *out)
{
    err_clear();
    return rsp_call_run(s, WRK_OP_PULL, 1, &key, NULL, row_ids, nrows, out, 0);
}

int kvs_init_row_sparse(kvs_store *s, size_t n, const uint64_t *keys, const kvs_array *vals,
                        const uint64_t *row_len)
{
    wrk_op *op = NULL;
    int rc;
    err_clear();
    if ((rc = store_ok(s, "init_row_sparse")) != 0)
        return rc;
    if (n == 0)
        return 0;
    if (keys == NULL || vals == NULL || row_len == NULL)
        return err_set(KVS_EINVAL, "init_row_sparse: keys, arrays or row lengths are NULL");
    uint64_t nreqs = 0;
    for (size_t i = 0; i < n; i++) {
        const kvs_array *a = &vals[i];
        for (size_t j = 0; j < i; j++)
            if (keys[j] == keys[i])
                return err_set(KVS_EINVAL, "key %llu appears twice in one row-sparse call",
                               (unsigned long long)keys[i]);
        if (kvs_dtype_size(a->dtype) == 0)
            return err_set(KVS_EINVAL, "key %llu: unknown dtype %d", (unsigned long long)keys[i],
                           (int)a->dtype);
        if (a->device != KVS_CPU)
            return err_set(KVS_EINVAL, "key %llu: row-sparse arrays must be host memory "
                           "(device %d)", (unsigned long long)keys[i], a->device);
        if (row_len[i] == 0 || a->count == 0 || a->count % row_len[i])
            return err_set(KVS_EINVAL, "key %llu: %llu elements are not whole rows of %llu",
                           (unsigned long long)keys[i], (unsigned long long)a->count,
                           (unsigned long long)row_len[i]);
        if (a->data == NULL && s->rank == 0)
            return err_set(KVS_EINVAL, "key %llu: data is NULL", (unsigned long long)keys[i]);
        nreqs += rsp_ranges(s, keys[i], a->count, a->count / row_len[i],
                            row_len[i] * kvs_dtype_size(a->dtype), NULL);
    }
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < n && rc == 0; i++) {
        wrk_key *k = hmap_get(&s->keys, keys[i]);
        if (k && k->row_len != row_len[i])
            rc = err_set(KVS_EINVAL, "key %llu was initialised %s", (unsigned long long)keys[i],
                         k->row_len ? "with another row length" : "dense");
    }
    pthread_mutex_unlock(&s->mu);
    if (rc)
        return rc;
    if ((op = calloc(1, sizeof *op)) == NULL)
        return err_set(KVS_ENOMEM, "out of memory");
    op->store = s;
    op->type = WRK_OP_INIT;
    op->sync = true;
    op->rsp = true;
    op->nkeys = n;
    op->keys = malloc(n * sizeof *op->keys);
    op->kbusy = malloc(n * sizeof *op->kbusy);
    op->reqs = calloc(nreqs ? nreqs : 1, sizeof *op->reqs);
    if (!op->keys || !op->kbusy || !op->reqs) {
        wrk_op_free(op);
        return err_set(KVS_ENOMEM, "out of memory");
    }
    memcpy(op->keys, keys, n * sizeof *keys);
    size_t r = 0;
    for (size_t i = 0; i < n; i++) {
        const kvs_array *a = &vals[i];
        size_t esz = kvs_dtype_size(a->dtype);
        uint64_t rows = a->count / row_len[i], nr;
        nr = rsp_ranges(s, keys[i], a->count, rows, row_len[i] * esz, NULL);
        rsp_range *rg = malloc((nr ? nr : 1) * sizeof *rg);
        if (rg == NULL) {
            wrk_op_free(op);
            return err_set(KVS_ENOMEM, "out of memory");
        }
        rsp_ranges(s, keys[i], a->count, rows, row_len[i] * esz, rg);
        for (uint64_t p = 0; p < nr; p++) {
            uint64_t lo = rg[p].a, hi = rg[p].b;
            int srv = rg[p].server;
            wrk_req *q = &op->reqs[r++];
            q->op = op;
            q->kidx = (uint32_t)i;
            q->server = srv;
            q->h.type = PROTO_INIT;
            q->h.flags = s->async ? PROTO_F_ASYNC : 0;
            q->h.key = keys[i];
            q->h.part = (uint32_t)p;
            q->h.offset = lo * row_len[i];
            q->h.count = (hi - lo) * row_len[i];
            q->h.total = a->count;
            q->h.dtype = (uint32_t)a->dtype;
            if (s->rank == 0) {
                q->send = (const uint8_t *)a->data + q->h.offset * esz;
                q->h.body_len = q->h.count * esz;
                q->zc = q->h.body_len >= DP_ZERO_COPY_MIN;
            }
            op->pending += 1 + q->zc;
        }
        free(rg);
    }
    op->nreqs = r;
    if ((rc = wrk_submit_built(s, op)) != 0) {
        wrk_op_free(op);
        return rc;
    }
    /* the keys exist now (created by the init): they are row-sparse */
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < n; i++) {
        wrk_key *k = hmap_get(&s->keys, keys[i]);
        if (k && k->row_len == 0) {
            k->row_len = row_len[i];
            s->nrsp++;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return wrk_wait_op(s, op);
}

int wrk_rsp_dense_check(kvs_store *s, size_t n, const uint64_t *keys)
{
    int rc = 0;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; s->nrsp > 0 && i < n && rc == 0; i++) {
        wrk_key *k = hmap_get(&s->keys, keys[i]);
        if (k && k->row_len)
            rc = err_set(KVS_EINVAL, "key %llu is row-sparse: use kvs_push_rsp, "
                         "kvs_pushpull_rsp and kvs_row_sparse_pull", (unsigned long long)keys[i]);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}
