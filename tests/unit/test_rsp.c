/* test_rsp.c - proto/rsp.h: row-sparse bodies as a server receives them from
 * the network: what proto_decode lets through, and every way
 * proto_rsp_parse refuses a body (sizes, row length, ids). */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "common/sizes.h"
#include "kvs.h"
#include "proto/proto.h"
#include "proto/rsp.h"

static const proto_limits lim = {1u << 20};
static char why[256];

/* A row-sparse PUSH of part [8, +12) of a 24-element float32 key with rows
 * of 4 (3 rows in the part). */
static proto_hdr rsp_hdr(int type, uint64_t body_len)
{
    proto_hdr h;
    memset(&h, 0, sizeof h);
    h.type = (uint16_t)type;
    h.flags = PROTO_F_RSP;
    h.contrib = type == PROTO_PULL ? 0 : 1;
    h.sender = 9;
    h.key = 4;
    h.offset = 8;
    h.count = 12;
    h.total = 24;
    h.dtype = KVS_FLOAT32;
    h.body_len = body_len;
    return h;
}

static int decode(const proto_hdr *h, size_t body_len)
{
    uint8_t buf[PROTO_HDR_SIZE];
    proto_hdr out;
    proto_encode(h, buf);
    return proto_decode(buf, sizeof buf, body_len ? 2 : 1, body_len, &lim, &out, why,
                        sizeof why);
}

START_TEST(test_decode)
{
    proto_hdr h = rsp_hdr(PROTO_PUSH, 16 + 8 + 16);
    ck_assert_int_eq(decode(&h, 40), 0); /* the size inside is proto_rsp_parse's */
    h = rsp_hdr(PROTO_PULL, 24);
    ck_assert_int_eq(decode(&h, 24), 0);
    h = rsp_hdr(PROTO_PUSHPULL, 16);
    ck_assert_int_eq(decode(&h, 16), 0);
    h = rsp_hdr(PROTO_PUSH, 15);
    ck_assert_int_eq(decode(&h, 15), KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "at least 16"));
    h = rsp_hdr(PROTO_PUSH, (1u << 20) + 8);
    ck_assert_int_eq(decode(&h, (1u << 20) + 8), KVS_ETOOBIG);
    h = rsp_hdr(PROTO_INIT, 48);
    ck_assert_int_eq(decode(&h, 48), KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "cannot be row-sparse"));
    h = rsp_hdr(PROTO_REPLY, 0);
    ck_assert_int_eq(decode(&h, 0), KVS_EPROTO);
    h = rsp_hdr(PROTO_PUSH, PROTO_CMA_LEN);
    h.flags |= PROTO_F_CMA;
    ck_assert_int_eq(decode(&h, PROTO_CMA_LEN), KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "by reference"));
}
END_TEST

/* A body of n ids (part-relative) and rows (push) of row_len 4. */
static uint64_t body_of(uint8_t *b, uint64_t n, const uint64_t *ids, int rows)
{
    proto_rsp_put(b, n, 4, ids);
    float *r = (float *)(b + PROTO_RSP_HDR + 8 * n);
    for (uint64_t i = 0; rows && i < n * 4; i++)
        r[i] = (float)i;
    return proto_rsp_len(n, 16, rows);
}

START_TEST(test_parse_ok)
{
    uint8_t b[256];
    uint64_t ids[3] = {0, 1, 2};
    proto_rsp p;
    uint64_t len = body_of(b, 2, ids + 1, 1);
    ck_assert_uint_eq(len, 16 + 16 + 32);
    proto_hdr h = rsp_hdr(PROTO_PUSH, len);
    ck_assert_int_eq(proto_rsp_parse(&h, b, &p, why, sizeof why), 0);
    ck_assert_uint_eq(p.nrows, 2);
    ck_assert_uint_eq(p.row_len, 4);
    ck_assert_uint_eq(p.row_bytes, 16);
    ck_assert_uint_eq(proto_rsp_id(&p, 0), 1);
    ck_assert_uint_eq(proto_rsp_id(&p, 1), 2);
    ck_assert(p.rows == b + 32);
    ck_assert(((const float *)p.rows)[7] == 7.0f);
    /* no rows at all: a worker that touched none of the part */
    len = body_of(b, 0, NULL, 1);
    h = rsp_hdr(PROTO_PUSH, len);
    ck_assert_int_eq(proto_rsp_parse(&h, b, &p, why, sizeof why), 0);
    ck_assert_uint_eq(p.nrows, 0);
    /* a pull: ids only */
    len = body_of(b, 3, ids, 0);
    h = rsp_hdr(PROTO_PULL, len);
    ck_assert_int_eq(proto_rsp_parse(&h, b, &p, why, sizeof why), 0);
    ck_assert_ptr_null(p.rows);
    ck_assert_uint_eq(proto_rsp_id(&p, 2), 2);
}
END_TEST

START_TEST(test_parse_bad)
{
    uint8_t b[256];
    uint64_t ids[4] = {0, 1, 2, 3}, dup[2] = {1, 1}, down[2] = {2, 0}, far[1] = {3};
    proto_rsp p;
    proto_hdr h;
    uint64_t len;

    h = rsp_hdr(PROTO_PUSH, 16);
    ck_assert_int_eq(proto_rsp_parse(&h, NULL, &p, why, sizeof why), KVS_EPROTO);
    /* row length 0, not dividing the part's count or offset */
    len = body_of(b, 1, ids, 1);
    le_put64(b + 8, 0);
    h = rsp_hdr(PROTO_PUSH, len);
    ck_assert_int_eq(proto_rsp_parse(&h, b, &p, why, sizeof why), KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "row length 0"));
    le_put64(b + 8, 5);
    ck_assert_int_eq(proto_rsp_parse(&h, b, &p, why, sizeof why), KVS_EPROTO);
    le_put64(b + 8, 4);
    h.offset = 6;
    ck_assert_int_eq(proto_rsp_parse(&h, b, &p, why, sizeof why), KVS_EPROTO);
    h.offset = 8;
    ck_assert_int_eq(proto_rsp_parse(&h, b, &p, why, sizeof why), 0);
    /* a byte short, a byte over */
    h.body_len = len - 1;
    ck_assert_int_eq(proto_rsp_parse(&h, b, &p, why, sizeof why), KVS_EPROTO);
    h.body_len = len + 1;
    ck_assert_int_eq(proto_rsp_parse(&h, b, &p, why, sizeof why), KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "needs"));
    /* more rows than the part has; a count that would overflow */
    len = body_of(b, 4, ids, 1);
    h = rsp_hdr(PROTO_PUSH, len);
    ck_assert_int_eq(proto_rsp_parse(&h, b, &p, why, sizeof why), KVS_EPROTO);
    le_put64(b, UINT64_C(1) << 61);
    ck_assert_int_eq(proto_rsp_parse(&h, b, &p, why, sizeof why), KVS_EPROTO);
    /* ids: repeated, decreasing, past the part */
    len = body_of(b, 2, dup, 1);
    h = rsp_hdr(PROTO_PUSH, len);
    ck_assert_int_eq(proto_rsp_parse(&h, b, &p, why, sizeof why), KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "not above"));
    len = body_of(b, 2, down, 1);
    ck_assert_int_eq(proto_rsp_parse(&h, b, &p, why, sizeof why), KVS_EPROTO);
    len = body_of(b, 1, far, 0);
    h = rsp_hdr(PROTO_PULL, len);
    ck_assert_int_eq(proto_rsp_parse(&h, b, &p, why, sizeof why), KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "out of the part"));
    /* a pull body with rows is the wrong size */
    len = body_of(b, 1, ids, 1);
    h = rsp_hdr(PROTO_PULL, len);
    ck_assert_int_eq(proto_rsp_parse(&h, b, &p, why, sizeof why), KVS_EPROTO);
    ck_assert_uint_eq(proto_rsp_len(UINT64_C(1) << 62, 16, 1), 0);
}
END_TEST

Suite *rsp_suite(void)
{
    Suite *s = suite_create("rsp");
    TCase *t = tcase_create("rsp");
    tcase_add_test(t, test_decode);
    tcase_add_test(t, test_parse_ok);
    tcase_add_test(t, test_parse_bad);
    suite_add_tcase(s, t);
    return s;
}
