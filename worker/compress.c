/* compress.c - gradient compression on the worker: see compress.h. */
#include <stdlib.h>
#include <string.h>

#include "common/datapath.h"
#include "common/err.h"
#include "worker/compress.h"
#include "worker/wrk_int.h"

/* One key's residual: the error not sent yet, per element. */
typedef struct wrk_residual {
    uint64_t count;
    /* elastic jobs (wrk_codec_undo): ops that encoded it so far, the last
     * one's number (wrk_codec.nops), and the epoch of the last encode */
    uint64_t seq;
    uint64_t last_op;
    uint64_t epoch;
    float v[];
} wrk_residual;

/* What an op's encodes changed (wrk_op.zundo): n ranges, each the residual
 * of key at [offset, offset + count) before the op (seq: the key's encode
 * count before it), the values one after another in vals. */
typedef struct undo_range {
    uint64_t key, total, offset, count, seq, epoch;
} undo_range;
typedef struct wrk_undo {
    size_t n;
    undo_range *r;
    float *vals;
} wrk_undo;

void wrk_codec_free(wrk_codec *z)
{
    if (z == NULL)
        return;
    for (size_t i = 0; i < z->res.cap; i++)
        if (z->res.used && z->res.used[i] == 1)
            free(z->res.vals[i]);
    hmap_fini(&z->res);
    pthread_mutex_destroy(&z->mu);
    free(z);
}

int wrk_codec_set(kvs_store *s, const char *spec)
{
    char why[256];
    red_codec c;
    wrk_codec *z = NULL;
    int rc;
    if (red_codec_parse(spec, &c, why, sizeof why) != 0)
        return err_set(KVS_EINVAL, "%s", why);
    if (c.id != RED_CODEC_NONE) {
        if ((z = calloc(1, sizeof *z)) == NULL)
            return err_set(KVS_ENOMEM, "out of memory");
        z->c = c;
        red_codec_spec(&c, z->spec, sizeof z->spec);
        pthread_mutex_init(&z->mu, NULL);
        hmap_init(&z->res);
    }
    pthread_mutex_lock(&s->mu);
    if (s->pushed) {
        rc = err_set(KVS_EINVAL, "gradient compression '%s': set it before the first push "
                     "(this worker has pushed already)", spec ? spec : "");
    } else {
        wrk_codec_free(s->codec);
        s->codec = z;
        z = NULL;
        rc = 0;
    }
    pthread_mutex_unlock(&s->mu);
    wrk_codec_free(z);
    return rc;
}

/* The residual of q's key (created zero on its first push), or NULL. */
static wrk_residual *residual_of(wrk_codec *z, const proto_hdr *h)
{
    wrk_residual *r = hmap_get(&z->res, h->key);
    if (r && r->count == h->total)
        return r;
    if (r) { /* the key was re-initialised with another length: start over */
        hmap_del(&z->res, h->key);
        free(r);
    }
    if (h->total > (SIZE_MAX - sizeof *r) / sizeof(float) ||
        (r = calloc(1, sizeof *r + h->total * sizeof(float))) == NULL)
        return NULL;
    r->count = h->total;
    if (hmap_put(&z->res, h->key, r) != 0) {
        free(r);
        return NULL;
    }
    return r;
}

int wrk_codec_exempt(kvs_store *s, size_t n, const uint64_t *keys)
{
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < n; i++) {
        wrk_key *k = hmap_get(&s->keys, keys[i]);
        if (k && k->pushes > 0) {
            pthread_mutex_unlock(&s->mu);
            return err_set(KVS_EINVAL, "kvs_compression_exempt: key %llu was pushed already "
                           "(its server keeps the codec of its first push): exempt it before "
                           "its first push", (unsigned long long)keys[i]);
        }
    }
    pthread_mutex_unlock(&s->mu);
    int rc = 0;
    pthread_mutex_lock(&s->zx_mu);
    for (size_t i = 0; i < n && rc == 0; i++)
        if (hmap_put(&s->zexempt, keys[i], (void *)(uintptr_t)1) != 0)
            rc = err_set(KVS_ENOMEM, "out of memory");
    if (s->zexempt.len > 0)
        atomic_store(&s->any_exempt, true);
    pthread_mutex_unlock(&s->zx_mu);
    return rc;
}

static bool exempt(kvs_store *s, uint64_t key)
{
    if (!atomic_load(&s->any_exempt)) /* (no lock on the pushes of most jobs) */
        return false;
    pthread_mutex_lock(&s->zx_mu);
    bool x = hmap_get(&s->zexempt, key) != NULL;
    pthread_mutex_unlock(&s->zx_mu);
    return x;
}

static bool pushes_data(kvs_store *s, const wrk_req *q)
{
    return q->send && (q->h.type == PROTO_PUSH || q->h.type == PROTO_PUSHPULL) &&
           !(q->h.flags & PROTO_F_RSP) && /* row-sparse pushes go as they are */
           !exempt(s, q->h.key);
}

int wrk_codec_op(kvs_store *s, wrk_op *op)
{
    wrk_codec *z = s->codec;
    uint64_t total = 0, most = 0, saved = 0;
    size_t nsave = 0;
    float *scratch = NULL;
    int rc = 0;
    if (z == NULL || (op->type != WRK_OP_PUSH && op->type != WRK_OP_PUSHPULL))
        return 0;
    for (size_t i = 0; i < op->nreqs; i++) {
        const wrk_req *q = &op->reqs[i];
        if (!pushes_data(s, q))
            continue;
        if (q->h.dtype != KVS_FLOAT32)
            return err_set(KVS_EINVAL, "gradient compression '%s' takes float32 gradients: "
                           "key %llu is %s", z->spec, (unsigned long long)q->h.key,
                           kvs_dtype_name((kvs_dtype)q->h.dtype));
        if (q->h.count > UINT32_MAX)
            return err_set(KVS_EINVAL, "gradient compression: key %llu has a part of %llu "
                           "elements (at most %u; lower MXNET_KVSTORE_BIGARRAY_BOUND)",
                           (unsigned long long)q->h.key, (unsigned long long)q->h.count,
                           UINT32_MAX);
        total += (red_codec_bytes(&z->c, q->h.count) + 63) & ~(uint64_t)63;
        if (q->h.count > most)
            most = q->h.count;
        nsave++;
        saved += q->h.count;
    }
    if (total == 0)
        return 0;
    wrk_undo *u = NULL;
    if (s->c.elastic && red_codec_has_residual(&z->c)) { /* what to put back (wrk_codec_undo) */
        free(op->zundo);
        op->zundo = u = malloc(sizeof *u + nsave * sizeof(undo_range) + saved * sizeof(float));
        if (u == NULL)
            return err_set(KVS_ENOMEM, "out of memory for the residuals of a push");
        *u = (wrk_undo){0, (undo_range *)(void *)(u + 1), NULL};
        u->vals = (float *)(void *)(u->r + nsave);
        saved = 0;
    }
    free(op->ztmp);
    op->ztmp = aligned_alloc(64, total);
    if (z->c.id == RED_CODEC_TOPK)
        scratch = malloc(most * sizeof *scratch);
    if (op->ztmp == NULL || (z->c.id == RED_CODEC_TOPK && scratch == NULL)) {
        free(scratch);
        return err_set(KVS_ENOMEM, "out of memory for compressed pushes (%llu bytes)",
                       (unsigned long long)total);
    }
    uint8_t *out = op->ztmp;
    pthread_mutex_lock(&z->mu);
    uint64_t opno = ++z->nops;
    for (size_t i = 0; i < op->nreqs && rc == 0; i++) {
        wrk_req *q = &op->reqs[i];
        if (!pushes_data(s, q))
            continue;
        wrk_residual *r = red_codec_has_residual(&z->c) ? residual_of(z, &q->h) : NULL;
        uint64_t len = red_codec_bytes(&z->c, q->h.count);
        if (red_codec_has_residual(&z->c) && r == NULL) {
            rc = err_set(KVS_ENOMEM, "out of memory for the residual of key %llu",
                         (unsigned long long)q->h.key);
            break;
        }
        if (u && r) {
            if (r->last_op != opno) { /* the op's first encode of the key */
                r->seq++;
                r->last_op = opno;
            }
            r->epoch = PROTO_ROUND_EPOCH(q->h.round);
            u->r[u->n++] = (undo_range){q->h.key, q->h.total, q->h.offset, q->h.count,
                                        r->seq - 1, r->epoch};
            memcpy(u->vals + saved, r->v + q->h.offset, q->h.count * sizeof(float));
            saved += q->h.count;
        }
        if (red_codec_encode(&z->c, (const float *)(const void *)q->send,
                             r ? r->v + q->h.offset : NULL, q->h.count, out, scratch) != 0) {
            rc = err_set(KVS_ENOMEM, "out of memory compressing key %llu",
                         (unsigned long long)q->h.key);
            break;
        }
        q->send = out;
        q->h.body_len = len;
        q->h.flags = (uint16_t)(q->h.flags | (unsigned)z->c.id << PROTO_CODEC_SHIFT |
                                (z->c.pull ? PROTO_F_ZPULL : 0u));
        op->pending -= q->zc;
        q->zc = len >= DP_ZERO_COPY_MIN;
        op->pending += q->zc;
        out += (len + 63) & ~(uint64_t)63;
    }
    pthread_mutex_unlock(&z->mu);
    free(scratch);
    return rc;
}

void wrk_codec_undo(kvs_store *s, wrk_op *op)
{
    wrk_codec *z = s->codec;
    wrk_undo *u = op->zundo;
    uint64_t at = 0;
    if (z == NULL || u == NULL)
        return;
    pthread_mutex_lock(&z->mu);
    /* first the ranges (every range of a key sees the key's count from
     * before this undo), then the counts */
    for (size_t i = 0; i < u->n; i++) {
        const undo_range *g = &u->r[i];
        wrk_residual *r = hmap_get(&z->res, g->key);
        if (r && r->count == g->total && r->epoch == g->epoch && g->seq < r->seq)
            memcpy(r->v + g->offset, u->vals + at, g->count * sizeof(float));
        at += g->count;
    }
    for (size_t i = 0; i < u->n; i++) {
        wrk_residual *r = hmap_get(&z->res, u->r[i].key);
        if (r && r->count == u->r[i].total && r->epoch == u->r[i].epoch && u->r[i].seq < r->seq) {
            r->seq = u->r[i].seq;
            r->last_op = 0;
        }
    }
    pthread_mutex_unlock(&z->mu);
    free(op->zundo);
    op->zundo = NULL;
}

int wrk_codec_reply(const proto_hdr *h, const void *body, const proto_hdr *req, void *out,
                    char *why, size_t whylen)
{
    float param;
    char inner[200];
    int id = (int)PROTO_CODEC(h->flags);
    if (req->dtype != KVS_FLOAT32 || h->dtype != KVS_FLOAT32 || h->count != req->count ||
        h->offset != req->offset)
        return err_why(why, whylen, KVS_EPROTO, "a compressed reply (%s, %llu elements at "
                       "%llu) for key %llu part %u does not match its request (%s, %llu "
                       "elements at %llu)", red_codec_name(id), (unsigned long long)h->count,
                       (unsigned long long)h->offset, (unsigned long long)req->key, req->part,
                       kvs_dtype_name((kvs_dtype)req->dtype), (unsigned long long)req->count,
                       (unsigned long long)req->offset);
    if (red_codec_decode(id, body, body ? h->body_len : 0, out, h->count, &param, inner,
                         sizeof inner) != 0)
        return err_why(why, whylen, KVS_EPROTO, "a compressed reply for key %llu part %u: %s",
                       (unsigned long long)req->key, req->part, inner);
    return 0;
}
