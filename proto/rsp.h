/* rsp.h - the body of a row-sparse request (PROTO_F_RSP): pure, like proto.h.
 *
 * A row-sparse key part covers whole rows of row_len elements: its header's
 * offset and count are the part's, as for a dense request (count = rows of
 * the part * row_len).  The body, little-endian:
 *
 *    0 u64 nrows        8 u64 row_len
 *   16 u64 ids[nrows]   row indices within the part (0 = the part's first
 *                       row), strictly increasing, each < count / row_len
 *   16 + 8*nrows        PUSH and PUSHPULL only: nrows * row_len elements of
 *                       the header's dtype, row i of them for ids[i]
 *
 * A PULL names the rows it wants; a PUSHPULL gets back the rows it pushed.
 * The answer is a plain REPLY (no flag) whose count is nrows * row_len and
 * whose body holds those rows in the order of ids.
 */
#ifndef KVS_PROTO_RSP_H
#define KVS_PROTO_RSP_H

#include <stddef.h>
#include <stdint.h>

#include "proto/proto.h"

typedef struct proto_rsp {
    uint64_t nrows, row_len;
    const uint8_t *ids;  /* nrows u64, little-endian */
    const uint8_t *rows; /* nrows * row_len elements (NULL for a PULL) */
    uint64_t row_bytes;  /* row_len * element size */
} proto_rsp;

/* Bytes of the body of nrows rows of row_bytes each (with_rows: a push), or
 * 0 when it overflows. */
uint64_t proto_rsp_len(uint64_t nrows, uint64_t row_bytes, int with_rows);

/* Write the header and ids of a body at out (ids: nrows row indices within
 * the part, increasing); the rows (if any) go at out + PROTO_RSP_HDR + 8 * nrows. */
void proto_rsp_put(uint8_t *out, uint64_t nrows, uint64_t row_len, const uint64_t *ids);

/* Parse and check the body (h->body_len bytes at body) of a row-sparse
 * request h that proto_decode accepted: row_len > 0 divides the part's
 * count and offset, the size is exact, the ids increase strictly and lie
 * in the part.  0 and *out, or KVS_EPROTO / KVS_ETOOBIG with why. */
int proto_rsp_parse(const proto_hdr *h, const void *body, proto_rsp *out, char *why,
                    size_t whylen);

/* Row index i of a parsed body. */
uint64_t proto_rsp_id(const proto_rsp *r, uint64_t i);

#endif
