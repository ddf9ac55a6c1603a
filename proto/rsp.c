/* rsp.c - row-sparse request bodies; see rsp.h. */
#include <stdio.h>

#include "common/err.h"
#include "common/sizes.h"
#include "proto/rsp.h"

uint64_t proto_rsp_len(uint64_t nrows, uint64_t row_bytes, int with_rows)
{
    uint64_t ids, rows = 0, a, b;
    if (!size_mul(nrows, 8, &ids) || (with_rows && !size_mul(nrows, row_bytes, &rows)) ||
        !size_add(PROTO_RSP_HDR, ids, &a) || !size_add(a, rows, &b))
        return 0;
    return b;
}

void proto_rsp_put(uint8_t *out, uint64_t nrows, uint64_t row_len, const uint64_t *ids)
{
    le_put64(out, nrows);
    le_put64(out + 8, row_len);
    for (uint64_t i = 0; i < nrows; i++)
        le_put64(out + PROTO_RSP_HDR + 8 * i, ids[i]);
}

uint64_t proto_rsp_id(const proto_rsp *r, uint64_t i)
{
    return le_get64(r->ids + 8 * i);
}

int proto_rsp_parse(const proto_hdr *h, const void *body, proto_rsp *out, char *why,
                    size_t whylen)
{
    const uint8_t *b = body;
    size_t esz = kvs_dtype_size((kvs_dtype)h->dtype);
    int with_rows = h->type != PROTO_PULL;
    if (b == NULL || h->body_len < PROTO_RSP_HDR)
        return err_why(why, whylen, KVS_EPROTO, "row-sparse %s of %llu bytes (at least %d)",
                       proto_type_name(h->type), (unsigned long long)h->body_len,
                       PROTO_RSP_HDR);
    out->nrows = le_get64(b);
    out->row_len = le_get64(b + 8);
    if (out->row_len == 0 || h->count % out->row_len || h->offset % out->row_len)
        return err_why(why, whylen, KVS_EPROTO, "key %llu: row length %llu does not divide "
                       "the part [%llu, +%llu)", (unsigned long long)h->key,
                       (unsigned long long)out->row_len, (unsigned long long)h->offset,
                       (unsigned long long)h->count);
    uint64_t prow = h->count / out->row_len;
    if (out->nrows > prow)
        return err_why(why, whylen, KVS_EPROTO, "key %llu: %llu rows in a part of %llu",
                       (unsigned long long)h->key, (unsigned long long)out->nrows,
                       (unsigned long long)prow);
    out->row_bytes = out->row_len * esz; /* <= count * esz: no overflow past the check */
    uint64_t need = proto_rsp_len(out->nrows, out->row_bytes, with_rows);
    if (need == 0 || need != h->body_len)
        return err_why(why, whylen, KVS_EPROTO, "key %llu: row-sparse %s of %llu rows of %llu "
                       "%s elements needs %llu bytes, body has %llu",
                       (unsigned long long)h->key, proto_type_name(h->type),
                       (unsigned long long)out->nrows, (unsigned long long)out->row_len,
                       kvs_dtype_name((kvs_dtype)h->dtype), (unsigned long long)need,
                       (unsigned long long)h->body_len);
    out->ids = b + PROTO_RSP_HDR;
    out->rows = with_rows ? out->ids + 8 * out->nrows : NULL;
    for (uint64_t i = 0; i < out->nrows; i++) {
        uint64_t id = le_get64(out->ids + 8 * i);
        if (id >= prow || (i > 0 && id <= le_get64(out->ids + 8 * (i - 1))))
            return err_why(why, whylen, KVS_EPROTO, "key %llu: row index %llu at %llu is "
                           "out of the part's %llu rows or not above the one before",
                           (unsigned long long)h->key, (unsigned long long)id,
                           (unsigned long long)i, (unsigned long long)prow);
    }
    return 0;
}
