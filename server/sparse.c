/* sparse.c - row-sparse requests in the server's store; see sparse.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/sizes.h"
#include "optim/optim.h"
#include "proto/rsp.h"
#include "server/sparse.h"
#include "server/store_int.h"
#include "server/update.h"

/* The rows of a round: slot s holds row ids[s] (an index within the part)
 * and its sum at rows + s * row_bytes; slot_of is an open-addressing table
 * from row index to slot + 1. */
struct srv_rsp_acc {
    uint64_t row_len, row_bytes;
    uint64_t n, cap;
    uint64_t *ids;
    uint8_t *rows;
    uint64_t *slot_of;
    uint64_t hcap; /* a power of two, at least twice cap */
};

void srv_rsp_acc_free(srv_rsp_acc *a)
{
    if (a == NULL)
        return;
    free(a->ids);
    free(a->rows);
    free(a->slot_of);
    free(a);
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

/* Room for want rows (rehashing when the table grows).  0 or -1. */
static int acc_reserve(srv_rsp_acc *a, uint64_t want)
{
    if (want <= a->cap)
        return 0;
    uint64_t cap = a->cap ? a->cap : 64;
    while (cap < want)
        cap *= 2;
    uint64_t hcap = 1;
    while (hcap < 2 * cap)
        hcap *= 2;
    uint64_t *ids = realloc(a->ids, cap * sizeof *ids);
    if (ids == NULL)
        return -1;
    a->ids = ids;
    uint8_t *rows = realloc(a->rows, cap * a->row_bytes);
    if (rows == NULL)
        return -1;
    a->rows = rows;
    uint64_t *tab = calloc(hcap, sizeof *tab);
    if (tab == NULL)
        return -1;
    for (uint64_t s = 0; s < a->n; s++) {
        uint64_t h = mix(a->ids[s]) & (hcap - 1);
        while (tab[h])
            h = (h + 1) & (hcap - 1);
        tab[h] = s + 1;
    }
    free(a->slot_of);
    a->slot_of = tab;
    a->hcap = hcap;
    a->cap = cap;
    return 0;
}

/* The body of a request as one piece (copied into *tmp when it came in
 * several frames). */
static const void *in_body(const srv_in *in, uint64_t len, void **tmp)
{
    *tmp = NULL;
    if (in == NULL || len == 0)
        return NULL;
    if (in->data)
        return in->data;
    if (in->nframes == 1)
        return zmq_msg_data(&in->frames[0]);
    uint8_t *b = malloc(len), *p = b;
    if (b == NULL)
        return NULL;
    for (int i = 0; i < in->nframes; i++) {
        size_t l = zmq_msg_size(&in->frames[i]);
        if ((uint64_t)(p - b) + l > len) {
            free(b);
            return NULL;
        }
        memcpy(p, zmq_msg_data(&in->frames[i]), l);
        p += l;
    }
    *tmp = b;
    return b;
}

/* Parse r's body and keep its ids in r (for its answer).  *body: the parse. */
static int parse_keep(srv_req *r, const srv_in *in, proto_rsp *p, void **tmp, char *why,
                      size_t whylen)
{
    const void *body = in_body(in, r->h.body_len, tmp);
    int rc = proto_rsp_parse(&r->h, body, p, why, whylen);
    if (rc)
        return rc;
    free(r->rsp_ids);
    r->rsp_ids = malloc((p->nrows ? p->nrows : 1) * sizeof *r->rsp_ids);
    if (r->rsp_ids == NULL) {
        snprintf(why, whylen, "server out of memory for %llu row ids",
                 (unsigned long long)p->nrows);
        return KVS_ENOMEM;
    }
    for (uint64_t i = 0; i < p->nrows; i++)
        r->rsp_ids[i] = proto_rsp_id(p, i);
    r->rsp_n = p->nrows;
    r->rsp_row_len = p->row_len;
    return 0;
}

int srv_rsp_keep_ids(srv_req *r, const srv_in *in, char *why, size_t whylen)
{
    proto_rsp p;
    void *tmp;
    int rc = parse_keep(r, in, &p, &tmp, why, whylen);
    free(tmp);
    return rc;
}

int srv_rsp_add(srv_entry *e, srv_req *r, const srv_in *in, char *why, size_t whylen)
{
    proto_rsp p;
    void *tmp;
    int rc = parse_keep(r, in, &p, &tmp, why, whylen);
    if (rc)
        goto out;
    srv_rsp_acc *a = e->rsp;
    if (a && a->row_len != p.row_len) {
        rc = KVS_EPROTO;
        snprintf(why, whylen, "key %llu: rows of %llu elements in a round of rows of %llu",
                 (unsigned long long)e->key, (unsigned long long)p.row_len,
                 (unsigned long long)a->row_len);
        goto out;
    }
    if (a == NULL && (a = calloc(1, sizeof *a)) != NULL) {
        a->row_len = p.row_len;
        a->row_bytes = p.row_bytes;
    }
    if (a == NULL || acc_reserve(a, a->n + p.nrows) != 0) {
        if (a != e->rsp)
            srv_rsp_acc_free(a);
        rc = KVS_ENOMEM;
        snprintf(why, whylen, "server out of memory for %llu rows",
                 (unsigned long long)p.nrows);
        goto out;
    }
    e->rsp = a;
    for (uint64_t i = 0; i < p.nrows; i++) {
        uint64_t id = r->rsp_ids[i], h = mix(id) & (a->hcap - 1);
        const uint8_t *src = p.rows + i * a->row_bytes;
        while (a->slot_of[h] && a->ids[a->slot_of[h] - 1] != id)
            h = (h + 1) & (a->hcap - 1);
        if (a->slot_of[h]) { /* summed in arrival order */
            red_add(NULL, e->dtype, a->rows + (a->slot_of[h] - 1) * a->row_bytes, src,
                    a->row_len);
        } else {
            a->slot_of[h] = a->n + 1;
            a->ids[a->n] = id;
            memcpy(a->rows + a->n * a->row_bytes, src, a->row_bytes);
            a->n++;
        }
    }
out:
    free(tmp);
    return rc;
}

/* e's value may be written in place: nobody else holds it (a reply in
 * flight keeps a reference: copy it then).  0 or KVS_ENOMEM. */
static int own_value(srv_entry *e)
{
    if (atomic_load(&e->value->refs) == 1)
        return 0;
    srv_buf *nb = srv_buf_new_value(e->bytes);
    if (nb == NULL)
        return KVS_ENOMEM;
    memcpy(nb->data, e->value->data, e->bytes);
    srv_buf_unref(e->value);
    e->value = nb;
    return 0;
}

/* Advise huge pages for the whole 2 MiB pages inside [p, p + bytes): a lazy
 * update reads and writes the state of random rows, a TLB miss each on
 * 4 KiB pages (server/buf.h says what that costs).  Advice only: pages
 * already touched stay as they are, and failure changes nothing. */
static void advise_huge(void *p, uint64_t bytes)
{
    const uintptr_t huge = 2u << 20;
    uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1);
    uintptr_t b = ((uintptr_t)p + bytes) & ~(huge - 1);
    if (b > a)
        (void)madvise((void *)a, b - a, MADV_HUGEPAGE);
}

/* Apply n rows (ids, and their data at rows) to e's value: replace them
 * (add 0), add them (add 1), or update them with them as gradients (with an
 * optimizer; the rows are overwritten). */
static int apply_rows(srv_optim *optim, srv_entry *e, uint64_t n, const uint64_t *ids,
                      uint8_t *rows, uint64_t row_len, bool add, char *why, size_t whylen)
{
    uint64_t rb = row_len * kvs_dtype_size(e->dtype);
    if (own_value(e) != 0) {
        snprintf(why, whylen, "server out of memory copying key %llu",
                 (unsigned long long)e->key);
        return KVS_ENOMEM;
    }
    uint8_t *v = e->value->data;
    if (optim == NULL) {
        for (uint64_t s = 0; s < n; s++) {
            if (add)
                red_add(NULL, e->dtype, v + ids[s] * rb, rows + s * rb, row_len);
            else
                memcpy(v + ids[s] * rb, rows + s * rb, rb);
        }
        return 0;
    }
    srv_upd_step step;
    const srv_upd *had = e->upd;
    int rc = srv_upd_prepare(optim, e->key, e->dtype, e->count, e->total, &e->upd, &step, why,
                             whylen);
    if (rc)
        return rc;
    if (step.norms || step.upd) { /* two-phase (lamb): a norm of the whole key */
        snprintf(why, whylen, "key %llu is row-sparse: optimizer %s needs norms of the whole "
                 "key, which a lazy update of some rows cannot give", (unsigned long long)e->key,
                 optim_name(optim->spec.kind));
        return KVS_EINVAL;
    }
    if (e->upd != had) /* new state, not touched yet (calloc) */
        for (int j = 0; j < e->upd->nstate; j++)
            advise_huge(e->upd->state[j], srv_upd_state_bytes(e->upd));
    if (step.master) /* the first update of a multi_precision part: its master copy */
        red_to_f32(e->dtype, step.master, (const uint16_t *)v, e->count);
    int ns = e->upd->nstate;
    size_t ssz = kvs_dtype_size(optim_state_dtype(e->dtype));
    void *state[OPTIM_MAX_STATE];
    for (uint64_t s = 0; s < n; s++) {
        uint64_t first = ids[s] * row_len;
        for (int j = 0; j < ns; j++)
            state[j] = (uint8_t *)step.state[j] + first * ssz;
        optim_update(&step.step, e->dtype, v + ids[s] * rb, rows + s * rb, state, 0, row_len);
        memcpy(v + ids[s] * rb, rows + s * rb, rb);
    }
    return 0;
}

int srv_rsp_finish(srv_optim *optim, srv_entry *e, char *why, size_t whylen)
{
    srv_rsp_acc *a = e->rsp;
    int rc = 0;
    e->rsp = NULL;
    /* (with an optimizer a round without rows still counts in the part's t) */
    if (a && (a->n > 0 || optim))
        rc = apply_rows(optim, e, a->n, a->ids, a->rows, a->row_len, false, why, whylen);
    srv_rsp_acc_free(a);
    return rc;
}

int srv_rsp_async(srv_optim *optim, srv_entry *e, srv_req *r, const srv_in *in, char *why,
                  size_t whylen)
{
    proto_rsp p;
    void *tmp;
    int rc = parse_keep(r, in, &p, &tmp, why, whylen);
    uint8_t *rows = NULL;
    if (rc == 0 && p.nrows > 0) {
        if ((rows = malloc(p.nrows * p.row_bytes)) == NULL) {
            rc = KVS_ENOMEM;
            snprintf(why, whylen, "server out of memory");
        } else {
            memcpy(rows, p.rows, p.nrows * p.row_bytes);
            rc = apply_rows(optim, e, p.nrows, r->rsp_ids, rows, p.row_len, true, why, whylen);
        }
    }
    free(rows);
    free(tmp);
    return rc;
}

int srv_rsp_answer(const srv_req *r, const srv_entry *e, proto_hdr *h, srv_buf **value)
{
    bool data = r->h.type == PROTO_PULL || r->h.type == PROTO_PUSHPULL;
    uint64_t rb = r->rsp_row_len * kvs_dtype_size(e->dtype), n = r->rsp_n;
    *h = r->h;
    h->count = data ? n * r->rsp_row_len : 0;
    *value = NULL;
    if (!data || n == 0)
        return 0;
    srv_buf *b = srv_buf_new(n * rb);
    if (b == NULL)
        return KVS_ENOMEM;
    const uint8_t *v = e->value->data;
    for (uint64_t i = 0; i < n; i++)
        memcpy(b->data + i * rb, v + r->rsp_ids[i] * rb, rb);
    *value = b;
    return 0;
}
