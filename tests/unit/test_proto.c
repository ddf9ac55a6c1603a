/* test_proto.c - proto/: header encode/decode and validation, node tables,
 * REGISTER bodies.  The byte layout is checked against offsets written out
 * here (proto.h), not against proto's own helpers. */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "kvs.h"
#include "proto/proto.h"
#include "proto/rsp.h"

static const proto_limits lim = {1u << 20};
static char why[256];

static uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static void put_le(uint8_t *p, int n, uint64_t v)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* A valid PUSH of 10 float32 elements (body 40 bytes). */
static proto_hdr push_hdr(void)
{
    proto_hdr h;
    memset(&h, 0, sizeof h);
    h.type = PROTO_PUSH;
    h.contrib = 1;
    h.sender = 9;
    h.req_id = 5;
    h.key = 3;
    h.offset = 0;
    h.count = 10;
    h.total = 10;
    h.dtype = KVS_FLOAT32;
    h.body_len = 40;
    return h;
}

static int decode_h(const proto_hdr *h, int nframes, size_t body, proto_hdr *out)
{
    uint8_t buf[PROTO_HDR_SIZE];
    proto_encode(h, buf);
    why[0] = '\0';
    return proto_decode(buf, sizeof buf, nframes, body, &lim, out, why, sizeof why);
}

/* h must decode as sent (frames from h->body_len). */
static void expect_ok(const proto_hdr *h)
{
    proto_hdr out;
    int rc = decode_h(h, h->body_len ? 2 : 1, h->body_len, &out);
    ck_assert_msg(rc == 0, "decode failed: %d %s", rc, why);
    ck_assert_int_eq(out.type, h->type);
    ck_assert_uint_eq(out.body_len, h->body_len);
}

/* h must be refused with err and a reason. */
static void expect_err(const proto_hdr *h, int nframes, size_t body, int err)
{
    proto_hdr out;
    memset(&out, 0xA5, sizeof out);
    proto_hdr before = out;
    int rc = decode_h(h, nframes, body, &out);
    ck_assert_msg(rc == err, "rc %d (%s), expected %d", rc, why, err);
    ck_assert_msg(why[0] != '\0', "no reason given");
    ck_assert_msg(memcmp(&out, &before, sizeof out) == 0, "out written on error");
}

/* REPL_VALUE (replicated servers): the value of count elements of a known
 * dtype inside the key, optionally followed by optimizer state; its
 * answer and the scheduler's PROMOTE are known types. */
/* A rejoin's fields (KVS_SCHEDULER_GRACE): parsed exactly, every
 * malformed one refused, and the left= lists written and read back. */
START_TEST(test_rejoin_fields)
{
    proto_rejoin rj;
    uint8_t left[40];
    char rwhy[200], buf[4096];
    const char *plain = "role=worker endpoint=- rank=-1 host=h servers=2 workers=3";
    ck_assert_int_eq(proto_parse_rejoin(plain, strlen(plain), &rj, left, 40, rwhy, sizeof rwhy), 0);
    const char *w = "role=worker endpoint=- rank=1 host=h rejoin=11 job=cba93ba69e92a7c7 "
                    "barriers=17";
    memset(left, 0, sizeof left);
    ck_assert_int_eq(proto_parse_rejoin(w, strlen(w), &rj, left, 40, rwhy, sizeof rwhy), 1);
    ck_assert_int_eq(rj.id, 11);
    ck_assert(rj.job_id == 0xcba93ba69e92a7c7ull);
    ck_assert(rj.barriers == 17);
    const char *s = "role=server endpoint=tcp://h:1 rank=0 rejoin=8 job=1 left=0-2,5 "
                    "left=39";
    ck_assert_int_eq(proto_parse_rejoin(s, strlen(s), &rj, left, 40, rwhy, sizeof rwhy), 1);
    for (int r = 0; r < 40; r++)
        ck_assert_int_eq(left[r], r <= 2 || r == 5 || r == 39);
    ck_assert(rj.barriers == 0);
    const char *bad[] = {"rejoin=11", "job=12", "rejoin=7 job=1", "rejoin=x job=1",
                         "rejoin=9 job=zz", "rejoin=9 job=1 barriers=-1",
                         "rejoin=9 job=1 barriers=1x", "rejoin=8 job=1 left=40",
                         "rejoin=8 job=1 left=3-1", "rejoin=8 job=1 left=1,",
                         "rejoin=8 job=1 left=-1", "rejoin=8 job=1 left=1-",
                         "rejoin=8 job=1 left=a", "rejoin=8 job=1 left=1;2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rwhy[0] = '\0';
        ck_assert_msg(proto_parse_rejoin(bad[i], strlen(bad[i]), &rj, left, 40, rwhy,
                                         sizeof rwhy) == -1, "'%s' accepted", bad[i]);
        ck_assert_msg(strstr(rwhy, "rejoin") != NULL, "'%s': no reason: '%s'", bad[i], rwhy);
    }
    /* lists written: ranges, several fields when long, and back again */
    uint8_t many[5000] = {0}, back[5000];
    for (int r = 0; r < 5000; r++)
        many[r] = r % 3 == 0 || (r >= 100 && r < 200);
    int n = proto_rejoin_left_fmt(buf, sizeof buf, many, 5000);
    ck_assert_int_eq(n, -1); /* 1600 ranks one by one do not fit in 4 KiB */
    static char big[65536];
    n = proto_rejoin_left_fmt(big, sizeof big, many, 5000);
    ck_assert_int_gt(n, 0);
    ck_assert(strstr(big, ",96,99-199,201,") != NULL || strstr(big, "=99-199,") != NULL);
    char body[70000];
    snprintf(body, sizeof body, "rejoin=8 job=1%s", big);
    memset(back, 0, sizeof back);
    ck_assert_int_eq(proto_parse_rejoin(body, strlen(body), &rj, back, 5000, rwhy, sizeof rwhy), 1);
    ck_assert_mem_eq(back, many, sizeof many);
    for (const char *f = strstr(big, "left="); f; f = strstr(f + 1, "left=")) {
        const char *e = strchr(f, ' ');
        ck_assert_int_le((int)(e ? (size_t)(e - f) : strlen(f)) - 5, PROTO_LEFT_FIELD);
    }
    uint8_t none[4] = {0};
    ck_assert_int_eq(proto_rejoin_left_fmt(buf, sizeof buf, none, 4), 0);
    ck_assert_str_eq(buf, "");
}
END_TEST

START_TEST(test_repl_value)
{
    proto_hdr h = push_hdr();
    h.type = PROTO_REPL_VALUE;
    h.contrib = 0;
    h.sender = 10;
    h.round = 7;
    expect_ok(&h);               /* the value alone */
    h.body_len = 40 + 16 + 80;   /* and two state arrays */
    expect_ok(&h);
    h.body_len = 36;             /* less than the value */
    expect_err(&h, 2, 36, KVS_EPROTO);
    h.body_len = 0;              /* count 10 without a body */
    expect_err(&h, 1, 0, KVS_EPROTO);
    h.count = 0;                 /* an empty part */
    expect_ok(&h);
    h = push_hdr();
    h.type = PROTO_REPL_VALUE;
    h.offset = 5;                /* past the key's end */
    expect_err(&h, 2, 40, KVS_EPROTO);
    h.offset = 0;
    h.dtype = 99;
    expect_err(&h, 2, 40, KVS_EPROTO);
    h.dtype = KVS_FLOAT32;
    h.body_len = (1u << 20) + 8; /* over the limit */
    expect_err(&h, 2, (1u << 20) + 8, KVS_ETOOBIG);
    ck_assert_str_eq(proto_type_name(PROTO_REPL_ACK), "REPL_ACK");
    ck_assert_str_eq(proto_type_name(PROTO_PROMOTE), "PROMOTE");
    ck_assert_str_eq(proto_type_name(PROTO_REPL_SYNCED), "REPL_SYNCED");
}
END_TEST

/* Compressed pushes (PROTO_F_CODEC): the body is the codec's size (the
 * server checks it exactly), only on PUSH/PUSHPULL of float32, never by
 * reference. */
START_TEST(test_codec_flag)
{
    proto_hdr h = push_hdr(), out;
    h.flags = 1u << PROTO_CODEC_SHIFT; /* 2bit: 4 + 4 bytes for 10 elements */
    h.body_len = 8;
    expect_ok(&h);
    ck_assert_uint_eq(PROTO_CODEC(h.flags), 1);
    ck_assert_int_eq(decode_h(&h, 2, 8, &out), 0);
    ck_assert_uint_eq(PROTO_CODEC(out.flags), 1);
    h.type = PROTO_PUSHPULL;
    expect_ok(&h);
    h.body_len = 8 * 10 + 8; /* topk ratio 1: 8 + 8n */
    expect_ok(&h);
    h.body_len = 8 * 10 + 9;
    expect_err(&h, 2, h.body_len, KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "compressed body"));
    h = push_hdr();
    h.flags = 4u << PROTO_CODEC_SHIFT;
    h.dtype = KVS_FLOAT64;
    h.body_len = 20;
    expect_err(&h, 2, 20, KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "float32 only"));
    h = push_hdr();
    h.type = PROTO_INIT;
    h.contrib = 0;
    h.flags = 1u << PROTO_CODEC_SHIFT;
    h.body_len = 8;
    expect_err(&h, 2, 8, KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "INIT with a compressed body"));
    h = push_hdr();
    h.flags = PROTO_F_CMA | 1u << PROTO_CODEC_SHIFT;
    h.body_len = PROTO_CMA_LEN;
    expect_err(&h, 2, PROTO_CMA_LEN, KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "by reference"));
    h = push_hdr(); /* a value reply may be compressed (the round's sum, pull=1) */
    h.type = PROTO_REPLY;
    h.contrib = 0;
    h.flags = 2u << PROTO_CODEC_SHIFT;
    h.body_len = 8;
    expect_ok(&h);
    ck_assert_int_eq(decode_h(&h, 2, 8, &out), 0);
    ck_assert_uint_eq(PROTO_CODEC(out.flags), 2);
    h.body_len = 8 * 10 + 9;
    expect_err(&h, 2, h.body_len, KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "compressed body"));
    h.body_len = 8;
    h.status = KVS_EINVAL; /* an error text is never compressed */
    expect_err(&h, 2, 8, KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "only for pushes and value replies"));
    h = push_hdr(); /* PROTO_F_ZPULL: only on a compressed push */
    h.flags = PROTO_F_ZPULL | 1u << PROTO_CODEC_SHIFT;
    h.body_len = 8;
    expect_ok(&h);
    h.flags = PROTO_F_ZPULL;
    h.body_len = 40;
    expect_err(&h, 2, 40, KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "without a compressed push"));
    h = push_hdr();
    h.type = PROTO_PULL;
    h.contrib = 0;
    h.flags = PROTO_F_ZPULL;
    h.body_len = 0;
    expect_err(&h, 1, 0, KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "without a compressed push"));
    h = push_hdr(); /* row-sparse bodies are never compressed */
    h.flags = PROTO_F_RSP | 1u << PROTO_CODEC_SHIFT;
    h.body_len = 64;
    expect_err(&h, 2, 64, KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "cannot be row-sparse"));
}
END_TEST

START_TEST(test_layout)
{
    proto_hdr h = {
        .type = PROTO_PUSHPULL,
        .flags = 0xBEEF,
        .contrib = 0x0A0B,
        .sender = -123456,
        .status = -7,
        .priority = -42,
        .req_id = 0x0102030405060708ull,
        .key = 0xF1F2F3F4F5F6F7F8ull,
        .offset = 0x1111111122222222ull,
        .count = 0x3333333344444444ull,
        .total = 0x5555555566666666ull,
        .round = 0x7777777788888888ull,
        .dtype = 0xCAFEBABEu,
        .part = 0xDEADBEEFu,
        .body_len = 0x99999999AAAAAAAAull,
    };
    uint8_t b[PROTO_HDR_SIZE];
    memset(b, 0xEE, sizeof b);
    proto_encode(&h, b);
    ck_assert_uint_eq(get_le(b + 0, 4), 0x3153564Bu);
    ck_assert(memcmp(b, "KVS1", 4) == 0);
    ck_assert_uint_eq(get_le(b + 4, 2), 1);
    ck_assert_uint_eq(get_le(b + 6, 2), PROTO_PUSHPULL);
    ck_assert_uint_eq(get_le(b + 8, 2), 0xBEEF);
    ck_assert_uint_eq(get_le(b + 10, 2), 0x0A0B);
    ck_assert_uint_eq(get_le(b + 12, 4), (uint32_t)-123456);
    ck_assert_uint_eq(get_le(b + 16, 4), (uint32_t)-7);
    ck_assert_uint_eq(get_le(b + 20, 4), (uint32_t)-42);
    ck_assert(get_le(b + 24, 8) == 0x0102030405060708ull);
    ck_assert(get_le(b + 32, 8) == 0xF1F2F3F4F5F6F7F8ull);
    ck_assert(get_le(b + 40, 8) == 0x1111111122222222ull);
    ck_assert(get_le(b + 48, 8) == 0x3333333344444444ull);
    ck_assert(get_le(b + 56, 8) == 0x5555555566666666ull);
    ck_assert(get_le(b + 64, 8) == 0x7777777788888888ull);
    ck_assert_uint_eq(get_le(b + 72, 4), 0xCAFEBABEu);
    ck_assert_uint_eq(get_le(b + 76, 4), 0xDEADBEEFu);
    ck_assert(get_le(b + 80, 8) == 0x99999999AAAAAAAAull);
    ck_assert_uint_eq(b[24], 0x08); /* little-endian */
}
END_TEST

/* Every field survives encode -> decode, for every type. */
START_TEST(test_round_trip)
{
    for (int type = PROTO_REGISTER; type < PROTO_BASE_END; type++) {
        for (int dt = 0; dt < KVS_NUM_DTYPES; dt++) {
            proto_hdr h, out;
            memset(&h, 0, sizeof h);
            h.type = (uint16_t)type;
            h.flags = 0x8001;
            h.sender = 8 + 2 * dt;
            h.status = 0;
            h.priority = -1000000 + type;
            h.req_id = UINT64_C(0xFFFFFFFFFFFFFFF0) + (uint64_t)dt;
            h.key = UINT64_MAX - (uint64_t)type;
            h.offset = 3;
            h.count = 7;
            h.total = 1ull << 40;
            h.round = 0x123456789ull;
            h.dtype = (uint32_t)dt;
            h.part = 0xFFFFFFFFu;
            h.contrib = type == PROTO_PUSH || type == PROTO_PUSHPULL ? 0xFFFF : 0;
            h.body_len = 0;
            if (type == PROTO_PUSH || type == PROTO_PUSHPULL || type == PROTO_INIT ||
                type == PROTO_REPLY)
                h.body_len = 7 * kvs_dtype_size((kvs_dtype)dt);
            else if (type == PROTO_HELLO)
                h.body_len = PROTO_HELLO_LEN;
            else if (type != PROTO_PULL)
                h.body_len = 100 + (uint64_t)type;
            memset(&out, 0, sizeof out);
            int rc = decode_h(&h, h.body_len ? 2 : 1, h.body_len, &out);
            ck_assert_msg(rc == 0, "type %d dtype %d: %s", type, dt, why);
            ck_assert_uint_eq(out.type, h.type);
            ck_assert_uint_eq(out.flags, h.flags);
            ck_assert_int_eq(out.sender, h.sender);
            ck_assert_int_eq(out.status, h.status);
            ck_assert_int_eq(out.priority, h.priority);
            ck_assert(out.req_id == h.req_id);
            ck_assert(out.key == h.key);
            ck_assert(out.offset == h.offset);
            ck_assert(out.count == h.count);
            ck_assert(out.total == h.total);
            ck_assert(out.round == h.round);
            ck_assert_uint_eq(out.dtype, h.dtype);
            ck_assert_uint_eq(out.part, h.part);
            ck_assert(out.body_len == h.body_len);
        }
    }
    /* an error reply: negative status, text body, dtype not checked */
    proto_hdr h = push_hdr(), out;
    h.type = PROTO_REPLY;
    h.status = KVS_ENOKEY;
    h.dtype = 999;
    h.body_len = 30;
    ck_assert_int_eq(decode_h(&h, 2, 30, &out), 0);
    ck_assert_int_eq(out.status, KVS_ENOKEY);
    ck_assert_uint_eq(out.dtype, 999);
    h.status = -1000;
    ck_assert_int_eq(decode_h(&h, 2, 30, &out), 0);
    ck_assert_int_eq(out.status, -1000);
    /* a reply without data (push ack) */
    h = push_hdr();
    h.type = PROTO_REPLY;
    h.body_len = 0;
    ck_assert_int_eq(decode_h(&h, 1, 0, &out), 0);
    /* a zero-element push */
    h = push_hdr();
    h.count = 0;
    h.total = 0;
    h.body_len = 0;
    ck_assert_int_eq(decode_h(&h, 1, 0, &out), 0);
    /* the last part of a key ending at UINT64_MAX elements */
    h = push_hdr();
    h.dtype = KVS_INT64;
    h.count = 2;
    h.offset = UINT64_MAX - 2;
    h.total = UINT64_MAX;
    h.body_len = 16;
    ck_assert_int_eq(decode_h(&h, 2, 16, &out), 0);
}
END_TEST

START_TEST(test_bad_header_length)
{
    uint8_t buf[PROTO_HDR_SIZE + 1];
    proto_hdr h = push_hdr(), out;
    memset(buf, 0, sizeof buf);
    proto_encode(&h, buf);
    for (size_t len = 0; len < PROTO_HDR_SIZE; len++) {
        why[0] = '\0';
        ck_assert_int_eq(proto_decode(buf, len, 2, 40, &lim, &out, why, sizeof why), KVS_EPROTO);
        ck_assert_msg(why[0] != '\0', "len %zu: no reason", len);
    }
    ck_assert_int_eq(proto_decode(buf, PROTO_HDR_SIZE + 1, 2, 40, &lim, &out, why, sizeof why),
                     KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "89"));
    ck_assert_int_eq(proto_decode(buf, PROTO_HDR_SIZE, 2, 40, &lim, &out, why, sizeof why), 0);
}
END_TEST

START_TEST(test_magic_version_type)
{
    uint8_t buf[PROTO_HDR_SIZE];
    proto_hdr h = push_hdr(), out;
    proto_encode(&h, buf);
    buf[0] ^= 1;
    ck_assert_int_eq(proto_decode(buf, sizeof buf, 2, 40, &lim, &out, why, sizeof why),
                     KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "magic"));
    proto_encode(&h, buf);
    put_le(buf, 4, 0x4B565331u); /* big-endian "KVS1" */
    ck_assert_int_eq(proto_decode(buf, sizeof buf, 2, 40, &lim, &out, why, sizeof why),
                     KVS_EPROTO);

    static const uint16_t versions[] = {0, 2, 0x100, 0xFFFF};
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) {
        proto_encode(&h, buf);
        put_le(buf + 4, 2, versions[i]);
        ck_assert_int_eq(proto_decode(buf, sizeof buf, 2, 40, &lim, &out, why, sizeof why),
                         KVS_EPROTO);
        ck_assert_ptr_nonnull(strstr(why, "version"));
    }

    static const uint16_t types[] = {0, PROTO_BASE_END, PROTO_BASE_END + 1, 0x8000, 0xFFFF};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        proto_hdr t = push_hdr();
        t.type = types[i];
        expect_err(&t, 2, 40, KVS_EPROTO);
        ck_assert_ptr_nonnull(strstr(why, "type"));
    }
}
END_TEST

START_TEST(test_frames_vs_body)
{
    proto_hdr h = push_hdr();
    expect_ok(&h);
    /* declared body, one frame */
    expect_err(&h, 1, 0, KVS_EPROTO);
    expect_err(&h, 1, 40, KVS_EPROTO); /* body_len argument ignored with 1 frame */
    /* body frame of the wrong size */
    expect_err(&h, 2, 39, KVS_EPROTO);
    expect_err(&h, 2, 41, KVS_EPROTO);
    expect_err(&h, 2, 0, KVS_EPROTO);
    /* body frame but header says 0 */
    h = push_hdr();
    h.type = PROTO_HEARTBEAT;
    h.body_len = 0;
    expect_ok(&h);
    expect_err(&h, 2, 0, KVS_EPROTO); /* an empty second frame */
    expect_err(&h, 2, 5, KVS_EPROTO);
    /* frame counts */
    h = push_hdr();
    expect_err(&h, 0, 40, KVS_EPROTO);
    expect_err(&h, 3, 40, KVS_EPROTO);
    expect_err(&h, -1, 40, KVS_EPROTO);
    expect_err(&h, 1000, 40, KVS_EPROTO);
    /* a body length above SIZE_MAX on 32-bit / any mismatch with huge values */
    h.body_len = UINT64_MAX;
    expect_err(&h, 2, 40, KVS_EPROTO);
}
END_TEST

START_TEST(test_data_checks)
{
    static const int data_types[] = {PROTO_INIT, PROTO_PUSH, PROTO_PUSHPULL, PROTO_REPLY};
    for (size_t t = 0; t < 4; t++) {
        proto_hdr h = push_hdr();
        h.type = (uint16_t)data_types[t];
        expect_ok(&h);
        /* dtype out of range */
        h.dtype = KVS_NUM_DTYPES;
        expect_err(&h, 2, 40, KVS_EPROTO);
        ck_assert_ptr_nonnull(strstr(why, "dtype"));
        h.dtype = 0xFFFFFFFFu;
        expect_err(&h, 2, 40, KVS_EPROTO);
        /* count * dtype size != body */
        h = push_hdr();
        h.type = (uint16_t)data_types[t];
        h.dtype = KVS_FLOAT64; /* 10 * 8 = 80 != 40 */
        expect_err(&h, 2, 40, KVS_EPROTO);
        h.dtype = KVS_FLOAT16; /* 20 */
        expect_err(&h, 2, 40, KVS_EPROTO);
        h.dtype = KVS_FLOAT32;
        h.count = 11;
        h.total = 11;
        expect_err(&h, 2, 40, KVS_EPROTO);
        /* offset + count > total */
        h = push_hdr();
        h.type = (uint16_t)data_types[t];
        h.offset = 1;
        expect_err(&h, 2, 40, KVS_EPROTO);
        h.offset = 0;
        h.total = 9;
        expect_err(&h, 2, 40, KVS_EPROTO);
        /* offset + count wraps around */
        h = push_hdr();
        h.type = (uint16_t)data_types[t];
        h.offset = UINT64_MAX - 5;
        h.total = UINT64_MAX;
        expect_err(&h, 2, 40, KVS_EPROTO);
        h.offset = UINT64_MAX;
        expect_err(&h, 2, 40, KVS_EPROTO);
        /* count * size overflows 64 bits */
        static const uint64_t big[] = {1ull << 62, (1ull << 62) + 1, UINT64_MAX / 4 + 1,
                                       UINT64_MAX};
        for (size_t i = 0; i < 4; i++) {
            h = push_hdr();
            h.type = (uint16_t)data_types[t];
            h.count = big[i];
            h.total = UINT64_MAX;
            expect_err(&h, 2, 40, KVS_ETOOBIG);
        }
        /* count * 8 wraps to exactly body_len: still too big */
        h = push_hdr();
        h.type = (uint16_t)data_types[t];
        h.dtype = KVS_INT64;
        h.count = (1ull << 61) + 5; /* * 8 = 2^64 + 40 */
        h.total = UINT64_MAX;
        expect_err(&h, 2, 40, KVS_ETOOBIG);
        /* body above KVS_MAX_MESSAGE */
        h = push_hdr();
        h.type = (uint16_t)data_types[t];
        h.count = h.total = (1u << 20) / 4;
        h.body_len = 1u << 20;
        expect_ok(&h); /* exactly the limit */
        h.count = h.total = (1u << 20) / 4 + 1;
        h.body_len = (1u << 20) + 4;
        expect_err(&h, 2, (1u << 20) + 4, KVS_ETOOBIG);
        ck_assert_ptr_nonnull(strstr(why, "KVS_MAX_MESSAGE"));
    }
    /* INIT from a non-zero rank: no data, dtype still checked */
    proto_hdr h = push_hdr();
    h.type = PROTO_INIT;
    h.body_len = 0;
    expect_ok(&h);
    h.dtype = 6;
    expect_err(&h, 1, 0, KVS_EPROTO);
    /* a push with no body but count > 0 */
    h = push_hdr();
    h.body_len = 0;
    expect_err(&h, 1, 0, KVS_EPROTO);
}
END_TEST

START_TEST(test_pull)
{
    proto_hdr h = push_hdr();
    h.type = PROTO_PULL;
    h.body_len = 0;
    expect_ok(&h);
    h.body_len = 40;
    expect_err(&h, 2, 40, KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "PULL"));
    h.body_len = 1;
    expect_err(&h, 2, 1, KVS_EPROTO);
    h.body_len = 0;
    h.dtype = 17;
    expect_err(&h, 1, 0, KVS_EPROTO);
    h.dtype = 0;
    h.offset = 5;
    h.count = 6;
    expect_err(&h, 1, 0, KVS_EPROTO);
}
END_TEST

START_TEST(test_text_limits)
{
    proto_hdr h;
    memset(&h, 0, sizeof h);
    /* error text in REPLY and ERROR */
    static const int types[] = {PROTO_REPLY, PROTO_ERROR};
    for (int i = 0; i < 2; i++) {
        memset(&h, 0, sizeof h);
        h.type = (uint16_t)types[i];
        h.status = KVS_EINVAL;
        h.body_len = PROTO_ERRTEXT_MAX;
        expect_ok(&h);
        h.body_len = PROTO_ERRTEXT_MAX + 1;
        expect_err(&h, 2, PROTO_ERRTEXT_MAX + 1, KVS_ETOOBIG);
        h.body_len = 1ull << 40;
        expect_err(&h, 2, (size_t)1 << 40, KVS_ETOOBIG);
    }
    /* control text up to PROTO_TEXT_MAX */
    memset(&h, 0, sizeof h);
    h.type = PROTO_REGISTER_ACK;
    h.body_len = PROTO_TEXT_MAX;
    expect_ok(&h);
    h.body_len = PROTO_TEXT_MAX + 1;
    expect_err(&h, 2, PROTO_TEXT_MAX + 1, KVS_ETOOBIG);
}
END_TEST

START_TEST(test_status)
{
    proto_hdr h;
    memset(&h, 0, sizeof h);
    h.type = PROTO_SHUTDOWN;
    h.status = 1;
    expect_err(&h, 1, 0, KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "status"));
    h.status = INT32_MAX;
    expect_err(&h, 1, 0, KVS_EPROTO);
    h.status = -1001;
    expect_err(&h, 1, 0, KVS_EPROTO);
    h.status = INT32_MIN;
    expect_err(&h, 1, 0, KVS_EPROTO);
    h.status = KVS_EPEERDEAD;
    expect_ok(&h);
    h.status = 0;
    expect_ok(&h);
    h = push_hdr();
    h.type = PROTO_REPLY;
    h.status = 5;
    expect_err(&h, 2, 40, KVS_EPROTO);
}
END_TEST

/* xorshift64*: a fixed seed, so a failure reproduces. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

/* A field value: mostly small or near a boundary, sometimes anything. */
static uint64_t rnd_field(void)
{
    switch (rnd() % 6) {
    case 0: return 0;
    case 1: return rnd() % 16;
    case 2: return rnd() % 5000;
    case 3: return UINT64_MAX - rnd() % 4;
    case 4: return 1ull << (rnd() % 64);
    default: return rnd();
    }
}

START_TEST(test_garbage)
{
    int ok = 0, bad = 0;
    for (int iter = 0; iter < 30000; iter++) {
        uint8_t buf[PROTO_HDR_SIZE];
        proto_hdr out;
        for (int i = 0; i < PROTO_HDR_SIZE; i++)
            buf[i] = (uint8_t)rnd();
        put_le(buf, 4, PROTO_MAGIC);
        put_le(buf + 4, 2, PROTO_VERSION);
        put_le(buf + 6, 2, rnd() % (PROTO_BASE_END + 2));
        bool cma = rnd() % 8 == 0; /* flags: by reference sometimes, else anything else */
        /* row-sparse sometimes (it is refused on most types), the record frame
         * flag too (refused outside a fused body); a codec (compressed push) in
         * one of four */
        uint64_t codec = rnd() % 4 ? ~(uint64_t)PROTO_F_CODEC : ~(uint64_t)0;
        put_le(buf + 8, 2, cma ? PROTO_F_CMA
                               : (rnd() & 0xffff &
                                  ~(uint64_t)(PROTO_F_CMA | PROTO_F_RSP | PROTO_F_ZPULL |
                                              PROTO_F_FRAME) & codec) |
                                     (rnd() % 8 == 0 ? PROTO_F_RSP : 0) |
                                     (rnd() % 8 == 0 ? PROTO_F_FRAME : 0));
        if (rnd() % 2)
            put_le(buf + 16, 4, (uint32_t)-(int32_t)(rnd() % 20));
        put_le(buf + 40, 8, rnd_field());
        put_le(buf + 48, 8, rnd_field());
        put_le(buf + 56, 8, rnd_field());
        put_le(buf + 72, 4, rnd() % 8);
        uint64_t count = get_le(buf + 48, 8), dt = get_le(buf + 72, 4);
        uint64_t bl;
        switch (cma && rnd() % 2 ? 4 : rnd() % 4) {
        case 0: bl = 0; break;
        case 4: bl = PROTO_CMA_LEN; break;
        case 1: bl = count * (dt < KVS_NUM_DTYPES ? kvs_dtype_size((kvs_dtype)dt) : 4); break;
        case 2: bl = rnd() % 5000; break;
        default: bl = rnd_field(); break;
        }
        put_le(buf + 80, 8, bl);
        int nframes = (int)(rnd() % 4);
        size_t body = rnd() % 3 ? (size_t)bl : (size_t)rnd_field();
        if (nframes < 2)
            body = 0;
        memset(&out, 0, sizeof out);
        why[0] = '\0';
        int rc = proto_decode(buf, sizeof buf, nframes, body, &lim, &out, why, sizeof why);
        if (rc != 0) {
            ck_assert_msg(rc == KVS_EPROTO || rc == KVS_ETOOBIG, "iter %d: rc %d", iter, rc);
            ck_assert_msg(why[0] != '\0', "iter %d: no reason", iter);
            bad++;
            continue;
        }
        ok++;
        /* self-consistent */
        ck_assert_msg(proto_type_known(out.type), "iter %d", iter);
        ck_assert_msg(!(out.flags & PROTO_F_FRAME), "iter %d", iter);
        ck_assert(nframes == 1 || nframes == 2);
        ck_assert(out.body_len == (nframes == 2 ? body : 0));
        ck_assert((nframes == 2) == (out.body_len > 0));
        ck_assert(out.status <= 0 && out.status >= -1000);
        if (out.type == PROTO_INIT || out.type == PROTO_PUSH || out.type == PROTO_PULL ||
            out.type == PROTO_PUSHPULL || (out.type == PROTO_REPLY && out.status == 0)) {
            ck_assert_msg(out.dtype < KVS_NUM_DTYPES, "iter %d", iter);
            ck_assert_msg(out.offset <= out.total && out.count <= out.total - out.offset,
                          "iter %d", iter);
        }
        if (out.flags & PROTO_F_RSP) { /* row-sparse: the inside is proto_rsp_parse's */
            ck_assert_msg(out.type == PROTO_PUSH || out.type == PROTO_PUSHPULL ||
                          out.type == PROTO_PULL, "iter %d", iter);
            ck_assert(!(out.flags & PROTO_F_CMA));
            ck_assert(out.body_len >= PROTO_RSP_HDR && out.body_len <= lim.max_message);
        } else if (proto_has_data(&out) && PROTO_CODEC(out.flags)) { /* a compressed push */
            ck_assert_msg(out.type == PROTO_PUSH || out.type == PROTO_PUSHPULL, "iter %d", iter);
            ck_assert_msg(out.dtype == KVS_FLOAT32, "iter %d", iter);
            ck_assert_msg((unsigned __int128)out.body_len <=
                              (unsigned __int128)out.count * 8 + 8, "iter %d", iter);
            ck_assert(out.body_len <= lim.max_message);
        } else if (proto_has_data(&out)) {
            unsigned __int128 need =
                (unsigned __int128)out.count * kvs_dtype_size((kvs_dtype)out.dtype);
            ck_assert_msg(need == out.body_len, "iter %d", iter);
            ck_assert(out.body_len <= lim.max_message);
        } else if (out.flags & PROTO_F_CMA) {
            ck_assert(out.type == PROTO_REPLY || out.body_len == PROTO_CMA_LEN);
            ck_assert(out.type != PROTO_REPLY || out.body_len <= PROTO_ERRTEXT_MAX);
            ck_assert(out.type != PROTO_REPLY || out.status != 0 || out.body_len == 0);
        } else if (out.type == PROTO_HELLO) {
            ck_assert(out.body_len == PROTO_HELLO_LEN);
        } else if (out.type == PROTO_PULL) {
            ck_assert(out.body_len == 0);
        } else if (out.type == PROTO_REPLY || out.type == PROTO_ERROR) {
            ck_assert(out.body_len <= PROTO_ERRTEXT_MAX);
        } else {
            ck_assert(out.body_len <= PROTO_TEXT_MAX);
        }
    }
    /* the generator must reach both outcomes, or the test proves little */
    ck_assert_msg(ok > 500 && bad > 500, "ok %d bad %d", ok, bad);
}
END_TEST

START_TEST(test_has_data)
{
    proto_hdr h = push_hdr();
    ck_assert(proto_has_data(&h));
    h.type = PROTO_PUSHPULL;
    ck_assert(proto_has_data(&h));
    h.type = PROTO_INIT;
    ck_assert(proto_has_data(&h));
    h.body_len = 0;
    ck_assert(!proto_has_data(&h));
    h.type = PROTO_REPLY;
    ck_assert(!proto_has_data(&h));
    h.body_len = 40;
    ck_assert(proto_has_data(&h));
    h.status = KVS_ENOKEY;
    ck_assert(!proto_has_data(&h));
    h.status = 0;
    static const int none[] = {PROTO_REGISTER, PROTO_REGISTER_ACK, PROTO_HEARTBEAT,
                               PROTO_HEARTBEAT_ACK, PROTO_BARRIER, PROTO_BARRIER_DONE,
                               PROTO_NODE_DEAD, PROTO_EXIT, PROTO_EXIT_ACK, PROTO_SHUTDOWN,
                               PROTO_PULL, PROTO_ERROR, 0, PROTO_BASE_END};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
        h.type = (uint16_t)none[i];
        ck_assert_msg(!proto_has_data(&h), "type %d", none[i]);
    }
}
END_TEST

/* Data by reference (same-host direct copies): a 16-byte descriptor on
 * requests, no body on a successful reply, never on control messages. */
/* A push says how many workers it stands for: at least one; the count
 * travels (the server checks it against W and the local groups). */
START_TEST(test_contrib)
{
    proto_hdr h = push_hdr(), out;
    h.contrib = 3;
    ck_assert_int_eq(decode_h(&h, 2, 40, &out), 0);
    ck_assert_uint_eq(out.contrib, 3);
    h.type = PROTO_PUSHPULL;
    h.contrib = 0xFFFF;
    ck_assert_int_eq(decode_h(&h, 2, 40, &out), 0);
    ck_assert_uint_eq(out.contrib, 0xFFFF);
    h.contrib = 0;
    expect_err(&h, 2, 40, KVS_EPROTO);
    ck_assert_msg(strstr(why, "contribution count of 0") != NULL, "%s", why);
    h.type = PROTO_PUSH;
    expect_err(&h, 2, 40, KVS_EPROTO);
    h.type = PROTO_PULL; /* no data: no count */
    h.body_len = 0;
    ck_assert_int_eq(decode_h(&h, 1, 0, &out), 0);
}
END_TEST

START_TEST(test_cma_flag)
{
    proto_hdr h, out;
    memset(&h, 0, sizeof h);
    h.type = PROTO_PUSH;
    h.contrib = 1;
    h.flags = PROTO_F_CMA;
    h.sender = 9;
    h.count = 1000;
    h.total = 1000;
    h.dtype = KVS_FLOAT32;
    h.body_len = PROTO_CMA_LEN;
    ck_assert_int_eq(decode_h(&h, 2, PROTO_CMA_LEN, &out), 0);
    ck_assert(!proto_has_data(&out));
    h.body_len = PROTO_CMA_LEN - 1;
    ck_assert_int_eq(decode_h(&h, 2, PROTO_CMA_LEN - 1, &out), KVS_EPROTO);
    h.body_len = 4000; /* the data itself is not allowed with the flag */
    ck_assert_int_eq(decode_h(&h, 2, 4000, &out), KVS_EPROTO);
    h.type = PROTO_PULL;
    h.body_len = PROTO_CMA_LEN;
    ck_assert_int_eq(decode_h(&h, 2, PROTO_CMA_LEN, &out), 0);
    h.type = PROTO_HEARTBEAT;
    ck_assert_int_eq(decode_h(&h, 2, PROTO_CMA_LEN, &out), KVS_EPROTO);
    h.type = PROTO_REPLY; /* the value was written: no body */
    h.body_len = 0;
    ck_assert_int_eq(decode_h(&h, 1, 0, &out), 0);
    h.body_len = 4000;
    ck_assert_int_eq(decode_h(&h, 2, 4000, &out), KVS_EPROTO);
    h.status = KVS_EINVAL; /* an error reply carries text */
    h.body_len = 20;
    ck_assert_int_eq(decode_h(&h, 2, 20, &out), 0);
    h.type = PROTO_PUSH; /* a size past the limit is refused even by reference */
    h.status = 0;
    h.count = h.total = UINT64_MAX / 2;
    h.body_len = PROTO_CMA_LEN;
    ck_assert_int_eq(decode_h(&h, 2, PROTO_CMA_LEN, &out), KVS_ETOOBIG);
    memset(&h, 0, sizeof h);
    h.type = PROTO_HELLO;
    h.sender = 9;
    h.body_len = PROTO_HELLO_LEN;
    ck_assert_int_eq(decode_h(&h, 2, PROTO_HELLO_LEN, &out), 0);
    h.body_len = PROTO_HELLO_LEN + 1;
    ck_assert_int_eq(decode_h(&h, 2, PROTO_HELLO_LEN + 1, &out), KVS_EPROTO);
}
END_TEST

START_TEST(test_names)
{
    static const char *const names[] = {
        "?",        "REGISTER",     "REGISTER_ACK", "HEARTBEAT", "HEARTBEAT_ACK", "BARRIER",
        "BARRIER_DONE", "NODE_DEAD", "EXIT",        "EXIT_ACK",  "SHUTDOWN",      "INIT",
        "PUSH",     "PULL",         "PUSHPULL",     "REPLY",     "ERROR",         "HELLO"};
    ck_assert_int_eq(PROTO_BASE_END, 18);
    ck_assert_int_eq(PROTO_PUSH, 12);
    for (int t = 1; t < PROTO_BASE_END; t++)
        ck_assert_str_eq(proto_type_name(t), names[t]);
    ck_assert_str_eq(proto_type_name(0), "?");
    ck_assert_str_eq(proto_type_name(PROTO_BASE_END), "?");
    ck_assert_str_eq(proto_type_name(-1), "?");
    ck_assert_str_eq(proto_type_name(65535), "?");

    char buf[32];
    static const struct {
        int id;
        const char *name;
    } nodes[] = {{1, "scheduler"}, {8, "server 0"}, {9, "worker 0"}, {10, "server 1"},
                 {11, "worker 1"}, {77, "worker 34"}, {76, "server 34"}, {0, "node 0"},
                 {2, "node 2"},    {7, "node 7"},   {-3, "node -3"}, {-8, "node -8"}};
    for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
        proto_node_name(nodes[i].id, buf, sizeof buf);
        ck_assert_str_eq(buf, nodes[i].name);
    }
    ck_assert_int_eq(proto_server_id(0), 8);
    ck_assert_int_eq(proto_server_id(34), 76);
    ck_assert_int_eq(proto_worker_id(0), 9);
    ck_assert_int_eq(proto_worker_id(34), 77);
    /* a short buffer is truncated */
    memset(buf, 'Z', sizeof buf);
    proto_node_name(9, buf, 4);
    ck_assert_str_eq(buf, "wor");
    ck_assert_int_eq(buf[4], 'Z');
}
END_TEST

START_TEST(test_parse_nodes)
{
    proto_node n[4];
    const char *good = "8 server tcp://10.0.0.1:5000\n"
                       "9 worker tcp://10.0.0.2:5001\n"
                       "  10\tserver  ipc:///tmp/kvs-10  \n";
    int rc = proto_parse_nodes(good, strlen(good), n, 4, why, sizeof why);
    ck_assert_msg(rc == 3, "%d %s", rc, why);
    ck_assert_int_eq(n[0].id, 8);
    ck_assert_int_eq(n[0].role, CFG_ROLE_SERVER);
    ck_assert_str_eq(n[0].endpoint, "tcp://10.0.0.1:5000");
    ck_assert_int_eq(n[1].id, 9);
    ck_assert_int_eq(n[1].role, CFG_ROLE_WORKER);
    ck_assert_str_eq(n[1].endpoint, "tcp://10.0.0.2:5001");
    ck_assert_int_eq(n[2].id, 10);
    ck_assert_int_eq(n[2].role, CFG_ROLE_SERVER);
    ck_assert_str_eq(n[2].endpoint, "ipc:///tmp/kvs-10");

    ck_assert_int_eq(n[1].group, -1); /* no group fields: alone */
    ck_assert_int_eq(n[1].lsize, 1);

    /* a worker's local group, written by proto_node_local_fmt */
    {
        proto_local l = {.pidns = 0xabc, .pid = 4242, .lrank = -1, .lsize = -1, .agg = 1,
                         .nonce_addr = 0x7ffdeadbeef0ull};
        for (int i = 0; i < PROTO_NONCE_LEN; i++)
            l.nonce[i] = (uint8_t)(0xF0 + i);
        char line[300];
        int w = snprintf(line, sizeof line, "11 worker tcp://h:3");
        w += proto_node_local_fmt(line + w, sizeof line - (size_t)w, 7, 2, 3, &l,
                                  PROTO_SERVERS_DIRECT);
        snprintf(line + w, sizeof line - (size_t)w, "\n");
        ck_assert_int_eq(proto_parse_nodes(line, strlen(line), n, 4, why, sizeof why), 1);
        ck_assert_int_eq(n[0].group, 7);
        ck_assert_int_eq(n[0].lrank, 2);
        ck_assert_int_eq(n[0].lsize, 3);
        ck_assert_int_eq(n[0].pid, 4242);
        ck_assert(n[0].nonce_addr == 0x7ffdeadbeef0ull);
        ck_assert_mem_eq(n[0].nonce, l.nonce, PROTO_NONCE_LEN);
        ck_assert_int_eq(n[0].servers, PROTO_SERVERS_DIRECT);
        /* the servers field is optional (away without it) */
        const char *six = "11 worker tcp://h:3 7 2 3 4242 7ffdeadbeef0 "
                          "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff\n";
        ck_assert_int_eq(proto_parse_nodes(six, strlen(six), n, 4, why, sizeof why), 1);
        ck_assert_int_eq(n[0].servers, PROTO_SERVERS_AWAY);
        const char *here = "11 worker tcp://h:3 7 2 3 4242 7ffdeadbeef0 "
                           "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff 1\n";
        ck_assert_int_eq(proto_parse_nodes(here, strlen(here), n, 4, why, sizeof why), 1);
        ck_assert_int_eq(n[0].servers, PROTO_SERVERS_HERE);
        ck_assert_int_eq(n[0].lsize, 3);

        /* what a server registers with: its pid namespace, direct copies */
        uint64_t pns = 0;
        int cma = -1;
        const char *srv = "role=server endpoint=tcp://h:4 rank=-1 host=h pidns=abc cma=1";
        ck_assert_int_eq(proto_register_host(srv, strlen(srv), &pns, &cma), 0);
        ck_assert(pns == 0xabc);
        ck_assert_int_eq(cma, 1);
        const char *srv0 = "pidns=def cma=0";
        ck_assert_int_eq(proto_register_host(srv0, strlen(srv0), &pns, &cma), 0);
        ck_assert(pns == 0xdef);
        ck_assert_int_eq(cma, 0);
        const char *srvbad[] = {"role=server endpoint=tcp://h:4", "pidns=abc", "cma=1",
                                "pidns=abc cma=2", "pidns=xyz cma=1", "pidns=abc cma=-1"};
        for (size_t i = 0; i < sizeof srvbad / sizeof srvbad[0]; i++)
            ck_assert_msg(proto_register_host(srvbad[i], strlen(srvbad[i]), &pns, &cma) == -1,
                          "'%s' accepted", srvbad[i]);

        /* and what a worker registers with */
        const char *reg = "role=worker endpoint=- rank=-1 host=h pidns=abc pid=4242 lrank=1 "
                          "lsize=3 agg=1 nonce_addr=7ffdeadbeef0 "
                          "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";
        proto_local got;
        ck_assert_int_eq(proto_register_local(reg, strlen(reg), &got), -1); /* no "nonce=" */
        const char *reg2 = "role=worker endpoint=- pidns=abc pid=4242 lrank=1 lsize=3 agg=1 "
                           "nonce_addr=7ffdeadbeef0 nonce=f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";
        ck_assert_int_eq(proto_register_local(reg2, strlen(reg2), &got), 0);
        ck_assert(got.pidns == 0xabc);
        ck_assert_int_eq(got.pid, 4242);
        ck_assert_int_eq(got.lrank, 1);
        ck_assert_int_eq(got.lsize, 3);
        ck_assert_int_eq(got.agg, 1);
        ck_assert(got.nonce_addr == 0x7ffdeadbeef0ull);
        ck_assert_mem_eq(got.nonce, l.nonce, PROTO_NONCE_LEN);
        const char *bad3 = "pidns=abc pid=4242 lrank=1 lsize=0 agg=1 nonce_addr=1 "
                           "nonce=f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"; /* size 0 */
        ck_assert_int_eq(proto_register_local(bad3, strlen(bad3), &got), -1);
        const char *none = "pidns=abc pid=9 lrank=-1 lsize=-1 agg=0 nonce_addr=1 "
                           "nonce=f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"; /* layout not given */
        ck_assert_int_eq(proto_register_local(none, strlen(none), &got), 0);
        ck_assert_int_eq(got.lrank, -1);
        ck_assert_int_eq(got.lsize, -1);
        ck_assert_int_eq(got.agg, 0);
        ck_assert_int_eq(got.agg_min, -1); /* not sent */
        ck_assert_int_eq(got.cma, -1);     /* not sent */
        /* KVS_LOCAL_AGG_MIN given, not given (auto), and bad values (ignored);
         * direct copies on, off, and bad values (ignored: not sent) */
        const struct {
            const char *field;
            long long agg_min, cma;
        } opt[] = {{"aggmin=4096", 4096, -1},     {"aggmin=0", 0, -1},
                   {"aggmin=auto", -2, -1},       {"aggmin=-2", -1, -1},
                   {"aggmin=automatic", -1, -1},  {"aggmin=2147483648", -1, -1},
                   {"cma=1", -1, 1},              {"cma=0", -1, 0},
                   {"cma=2", -1, -1},             {"cma=", -1, -1},
                   {"cma=yes", -1, -1}};
        for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++) {
            char body[256];
            snprintf(body, sizeof body, "pidns=abc pid=9 lrank=-1 lsize=-1 agg=1 %s "
                     "nonce_addr=1 nonce=f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff", opt[i].field);
            ck_assert_int_eq(proto_register_local(body, strlen(body), &got), 0);
            ck_assert_int_eq(got.agg_min, opt[i].agg_min);
            ck_assert_int_eq(got.cma, opt[i].cma);
        }
        ck_assert_int_eq(PROTO_AGG_MIN_AUTO, -2);
    }
    n[0] = (proto_node){0};

    /* exactly max entries */
    ck_assert_int_eq(proto_parse_nodes(good, strlen(good), n, 3, why, sizeof why), 3);
    /* more than max */
    ck_assert_int_eq(proto_parse_nodes(good, strlen(good), n, 2, why, sizeof why), KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "more than 2"));
    ck_assert_int_eq(proto_parse_nodes(good, strlen(good), n, 0, why, sizeof why), KVS_EPROTO);
    /* empty */
    ck_assert_int_eq(proto_parse_nodes("", 0, n, 4, why, sizeof why), 0);
    ck_assert_int_eq(proto_parse_nodes(good, 0, n, 0, why, sizeof why), 0);
    /* len shorter than the string: only what len covers counts */
    size_t first = strlen("8 server tcp://10.0.0.1:5000\n");
    ck_assert_int_eq(proto_parse_nodes(good, first, n, 4, why, sizeof why), 1);
    ck_assert_int_eq(proto_parse_nodes(good, first - 1, n, 4, why, sizeof why), KVS_EPROTO);

    static const struct {
        const char *body;
        const char *reason;
    } bad[] = {
        {"8 server tcp://a:1", "not terminated"},
        {"8 server tcp://a:1\n9 worker tcp://b:2", "line 2 not terminated"},
        {"x server tcp://a:1\n", "bad id"},
        {"0 server tcp://a:1\n", "bad id"},
        {"-8 server tcp://a:1\n", "bad id"},
        {"8x server tcp://a:1\n", "bad id"},
        {"1048577 server tcp://a:1\n", "bad id"},
        {"99999999999999999999 server tcp://a:1\n", "bad id"},
        {"\n", "bad id"},
        {"8 boss tcp://a:1\n", "bad role"},
        {"8 scheduler tcp://a:1\n", "bad role"},
        {"8 Server tcp://a:1\n", "bad role"},
        {"8\n", "bad role"},
        {"8 server\n", "bad endpoint"},
        {"8 server tcp://a:1 extra\n", "bad local group fields"},
        {"8 server tcp://a:1 0 0 1 5 7fff 000102030405060708090a0b0c0d0e0f\n",
         "bad local group fields"}, /* servers have no group */
        {"8 server tcp://a:1\n9 worker tcp://b:2 x\n", "line 2: bad local group fields"},
        {"9 worker tcp://b:2 0 0 1 5 7fff 000102030405060708090a0b0c0d0e0f x\n",
         "bad servers field"},
        {"9 worker tcp://b:2 0 0 1 5 7fff 000102030405060708090a0b0c0d0e0f 3\n",
         "bad servers field"},
        {"9 worker tcp://b:2 0 0 1 5 7fff 000102030405060708090a0b0c0d0e0f -1\n",
         "bad servers field"},
        {"9 worker tcp://b:2 0 0 1 5 7fff 000102030405060708090a0b0c0d0e0f 1 x\n",
         "extra fields"},
        {"9 worker tcp://b:2 0 1 1 5 7fff 000102030405060708090a0b0c0d0e0f\n",
         "bad local group fields"}, /* local rank >= size */
        {"9 worker tcp://b:2 0 0 0 5 7fff 000102030405060708090a0b0c0d0e0f\n",
         "bad local group fields"}, /* size 0 */
        {"9 worker tcp://b:2 0 0 1 0 7fff 000102030405060708090a0b0c0d0e0f\n",
         "bad local group fields"}, /* pid 0 */
        {"9 worker tcp://b:2 0 0 1 5 -1 000102030405060708090a0b0c0d0e0f\n",
         "bad local group fields"},
        {"9 worker tcp://b:2 0 0 1 5 7fff 000102030405060708090a0b0c0d0e0\n",
         "bad local group fields"}, /* nonce one digit short */
        {"9 worker tcp://b:2 0 0 1 5 7fff 000102030405060708090a0b0c0d0eXY\n",
         "bad local group fields"},
        {"9 worker tcp://b:2 0 0 1\n", "bad local group fields"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = '\0';
        rc = proto_parse_nodes(bad[i].body, strlen(bad[i].body), n, 4, why, sizeof why);
        ck_assert_msg(rc == KVS_EPROTO, "'%s': rc %d", bad[i].body, rc);
        ck_assert_msg(strstr(why, bad[i].reason) != NULL, "'%s': why '%s'", bad[i].body, why);
    }

    /* an endpoint of 127 characters fits, 128 does not */
    char line[300];
    char ep[129];
    memset(ep, 'e', 128);
    ep[127] = '\0';
    snprintf(line, sizeof line, "8 server %s\n", ep);
    ck_assert_int_eq(proto_parse_nodes(line, strlen(line), n, 4, why, sizeof why), 1);
    ck_assert_uint_eq(strlen(n[0].endpoint), 127);
    ep[127] = 'e';
    ep[128] = '\0';
    snprintf(line, sizeof line, "8 server %s\n", ep);
    ck_assert_int_eq(proto_parse_nodes(line, strlen(line), n, 4, why, sizeof why), KVS_EPROTO);

    /* a NUL inside the body does not run past len */
    const char nul[] = "8 server tcp://a:1\n9 wor\0ker tcp://b:2\n";
    rc = proto_parse_nodes(nul, sizeof nul - 1, n, 4, why, sizeof why);
    ck_assert_int_eq(rc, KVS_EPROTO);
}
END_TEST

START_TEST(test_parse_register)
{
    int role = -5, rank = -5;
    char ep[64], host[32];
    const char *good = "role=worker endpoint=tcp://10.0.0.2:5001 rank=3 host=10.0.0.2";
    int rc = proto_parse_register(good, strlen(good), &role, ep, sizeof ep, &rank, host,
                                  sizeof host, why, sizeof why);
    ck_assert_msg(rc == 0, "%s", why);
    ck_assert_int_eq(role, CFG_ROLE_WORKER);
    ck_assert_str_eq(ep, "tcp://10.0.0.2:5001");
    ck_assert_int_eq(rank, 3);
    ck_assert_str_eq(host, "10.0.0.2");

    /* order free, rank and host optional, unknown keys ignored */
    const char *g2 = "  future=thing endpoint=- role=server x-y=z=w\n";
    memset(host, 'Q', sizeof host);
    rc = proto_parse_register(g2, strlen(g2), &role, ep, sizeof ep, &rank, host, sizeof host,
                              why, sizeof why);
    ck_assert_msg(rc == 0, "%s", why);
    ck_assert_int_eq(role, CFG_ROLE_SERVER);
    ck_assert_str_eq(ep, "-");
    ck_assert_int_eq(rank, -1);
    ck_assert_str_eq(host, "");

    const char *g3 = "role=server endpoint=e rank=-1";
    ck_assert_int_eq(proto_parse_register(g3, strlen(g3), &role, ep, sizeof ep, &rank, host,
                                          sizeof host, why, sizeof why), 0);
    ck_assert_int_eq(rank, -1);
    const char *g4 = "role=server endpoint=e rank=65536";
    ck_assert_int_eq(proto_parse_register(g4, strlen(g4), &role, ep, sizeof ep, &rank, host,
                                          sizeof host, why, sizeof why), 0);
    ck_assert_int_eq(rank, 65536);

    static const struct {
        const char *body;
        const char *reason;
    } bad[] = {
        {"", "required"},
        {"endpoint=tcp://a:1", "required"},
        {"role=worker", "required"},
        {"role=worker rank=1 host=h", "required"},
        {"role=boss endpoint=e", "bad role"},
        {"role=scheduler endpoint=e", "bad role"},
        {"role= endpoint=e", "bad role"},
        {"role=worker endpoint=e rank=x", "bad rank"},
        {"role=worker endpoint=e rank=", "bad rank"},
        {"role=worker endpoint=e rank=-2", "bad rank"},
        {"role=worker endpoint=e rank=65537", "bad rank"},
        {"role=worker endpoint=e rank=3x", "bad rank"},
        {"role=worker endpoint=e junk", "without '='"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = '\0';
        rc = proto_parse_register(bad[i].body, strlen(bad[i].body), &role, ep, sizeof ep, &rank,
                                  host, sizeof host, why, sizeof why);
        ck_assert_msg(rc == KVS_EPROTO, "'%s': rc %d", bad[i].body, rc);
        ck_assert_msg(strstr(why, bad[i].reason) != NULL, "'%s': why '%s'", bad[i].body, why);
    }

    /* endpoint and host too long for the caller's buffers */
    char small[8];
    const char *long_ep = "role=worker endpoint=tcp://1.2.3.4:5";
    rc = proto_parse_register(long_ep, strlen(long_ep), &role, small, sizeof small, &rank, host,
                              sizeof host, why, sizeof why);
    ck_assert_int_eq(rc, KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "endpoint too long"));
    const char *fits = "role=worker endpoint=1234567";
    ck_assert_int_eq(proto_parse_register(fits, strlen(fits), &role, small, sizeof small, &rank,
                                          host, sizeof host, why, sizeof why), 0);
    ck_assert_str_eq(small, "1234567");
    const char *long_host = "role=worker endpoint=e host=a.very.long.host.name";
    rc = proto_parse_register(long_host, strlen(long_host), &role, ep, sizeof ep, &rank, small,
                              sizeof small, why, sizeof why);
    ck_assert_int_eq(rc, KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "host too long"));

    /* a token longer than the parser's buffer */
    char huge[600];
    memset(huge, 'a', sizeof huge);
    memcpy(huge, "role=worker endpoint=", 21);
    rc = proto_parse_register(huge, sizeof huge, &role, ep, sizeof ep, &rank, host, sizeof host,
                              why, sizeof why);
    ck_assert_int_eq(rc, KVS_EPROTO);

    /* the body is not NUL-terminated: len is respected */
    const char unterminated[] = "role=worker endpoint=ab";
    char copy[sizeof unterminated - 1];
    memcpy(copy, unterminated, sizeof copy);
    ck_assert_int_eq(proto_parse_register(copy, sizeof copy - 1, &role, ep, sizeof ep, &rank,
                                          host, sizeof host, why, sizeof why), 0);
    ck_assert_str_eq(ep, "a");
}
END_TEST

/* Text bodies are length-delimited, not NUL-terminated: a NUL byte inside a
 * token must not cut it short and let it pass ("8\0junk" is not id 8, an
 * endpoint "\0tcp://..." is not a valid, empty endpoint).  Found by
 * tests/fuzz. */
START_TEST(test_parse_rejects_nul_and_empty)
{
    proto_node n[4];
    int role, rank;
    char ep[64], host[32];
    static const char t1[] = "8 server \0tcp://10.0.0.1:1\n";  /* endpoint "" */
    static const char t2[] = "8\0zz server tcp://10.0.0.1:1\n"; /* id "8\0zz" */
    static const char t3[] = "8 server tcp://a\0b:1\n";          /* endpoint cut */
    static const char *const tables[] = {t1, t2, t3};
    static const size_t tlen[] = {sizeof t1 - 1, sizeof t2 - 1, sizeof t3 - 1};
    for (int i = 0; i < 3; i++) {
        int rc = proto_parse_nodes(tables[i], tlen[i], n, 4, why, sizeof why);
        ck_assert_msg(rc == KVS_EPROTO, "table %d accepted (rc %d, id %d, endpoint '%s')", i + 1,
                      rc, n[0].id, n[0].endpoint);
    }
    static const char r1[] = "role=worker endpoint=\0tcp://a:1";
    static const char r2[] = "role=worker endpoint=e rank=3\0x";
    static const char r3[] = "role=server endpoint=";
    static const char *const regs[] = {r1, r2, r3};
    static const size_t rlen[] = {sizeof r1 - 1, sizeof r2 - 1, sizeof r3 - 1};
    for (int i = 0; i < 3; i++) {
        int rc = proto_parse_register(regs[i], rlen[i], &role, ep, sizeof ep, &rank, host,
                                      sizeof host, why, sizeof why);
        ck_assert_msg(rc == KVS_EPROTO, "register body %d accepted (endpoint '%s', rank %d)",
                      i + 1, ep, rank);
    }
}
END_TEST

/* The header of a container (FUSED, FUSED_REF) of n records in len bytes
 * from sender 9 is accepted; one declaring no records, more than could fit,
 * a count whose size overflows, or a body above the limit is refused. */
static void check_container(uint16_t type, uint64_t n, uint64_t len)
{
    proto_hdr h;
    memset(&h, 0, sizeof h);
    h.type = type;
    h.sender = 9;
    h.count = n;
    h.body_len = len;
    expect_ok(&h);
    h.count = 0;
    expect_err(&h, 2, len, KVS_EPROTO);
    h.count = len / PROTO_HDR_SIZE + 1; /* more records than could fit */
    expect_err(&h, 2, len, KVS_EPROTO);
    h.count = UINT64_MAX / 2; /* count * header size overflows */
    expect_err(&h, 2, len, KVS_EPROTO);
    h.count = 1;
    h.body_len = 2u << 20; /* above the limit (1 MiB here) */
    expect_err(&h, 2, 2u << 20, KVS_ETOOBIG);
}

/* A FUSED body of three records (PUSH of 3 floats, PULL, INIT of 1 int64)
 * round-trips through proto_fused_put / proto_fused_next; every way a body
 * can lie is refused with a reason. */
START_TEST(test_fused)
{
    uint8_t body[1024];
    float v[3] = {1, 2, 3};
    int64_t one = 7;
    proto_hdr r[3], out;
    const uint8_t *data;
    uint64_t off = 0, len = 0;
    r[0] = push_hdr();
    r[0].count = r[0].total = 3;
    r[0].body_len = 12;
    r[1] = push_hdr();
    r[1].type = PROTO_PULL;
    r[1].key = 4;
    r[1].body_len = 0;
    r[2] = push_hdr();
    r[2].type = PROTO_INIT;
    r[2].key = 5;
    r[2].count = r[2].total = 1;
    r[2].dtype = KVS_INT64;
    r[2].body_len = 8;
    ck_assert_uint_eq(proto_fused_rec_len(12), PROTO_HDR_SIZE + 16);
    ck_assert_uint_eq(proto_fused_rec_len(0), PROTO_HDR_SIZE);
    len += proto_fused_put(body + len, &r[0], v);
    len += proto_fused_put(body + len, &r[1], NULL);
    len += proto_fused_put(body + len, &r[2], &one);
    ck_assert_uint_eq(len, 3 * PROTO_HDR_SIZE + 16 + 8);
    ck_assert_uint_eq(body[PROTO_HDR_SIZE + 12], 0); /* padding is zero */

    check_container(PROTO_FUSED, 3, len);

    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(proto_fused_next(PROTO_FUSED, 9, body, len, &off, &lim, &out, &data,
                                          why, sizeof why), 0);
        ck_assert_int_eq(out.type, r[i].type);
        ck_assert_uint_eq(out.key, r[i].key);
        ck_assert_uint_eq(out.body_len, r[i].body_len);
        ck_assert_uint_eq(out.fuse, 0);
        ck_assert(i == 1 ? data == NULL : data != NULL);
    }
    ck_assert_uint_eq(off, len);
    off = 0;
    proto_fused_next(PROTO_FUSED, 9, body, len, &off, &lim, &out, &data, why, sizeof why);
    ck_assert(memcmp(data, v, sizeof v) == 0);

    /* past the end: no record left, a record cut short, a body_len too long */
    uint64_t at = len;
    ck_assert_int_eq(proto_fused_next(PROTO_FUSED, 9, body, len, &at, &lim, &out, &data, why,
                                      sizeof why), KVS_EPROTO);
    ck_assert_uint_eq(at, len);
    at = 0;
    ck_assert_int_eq(proto_fused_next(PROTO_FUSED, 9, body, PROTO_HDR_SIZE + 8, &at, &lim, &out,
                                      &data, why, sizeof why), KVS_EPROTO);
    ck_assert_uint_eq(at, 0);
    at = 0;
    ck_assert_int_eq(proto_fused_next(PROTO_FUSED, 9, body, 50, &at, &lim, &out, &data, why,
                                      sizeof why), KVS_EPROTO);
    /* another sender's record, a reply inside a request, a request inside a
     * reply, a record by reference, a bad dtype inside */
    at = 0;
    ck_assert_int_eq(proto_fused_next(PROTO_FUSED, 11, body, len, &at, &lim, &out, &data, why,
                                      sizeof why), KVS_EPROTO);
    ck_assert(strstr(why, "sender") != NULL);
    ck_assert_int_eq(proto_fused_next(PROTO_FUSED_REPLY, 9, body, len, &at, &lim, &out, &data,
                                      why, sizeof why), KVS_EPROTO);
    uint8_t bad[256];
    proto_hdr b = push_hdr();
    b.body_len = 0;
    b.type = PROTO_REPLY;
    proto_fused_put(bad, &b, NULL);
    at = 0;
    ck_assert_int_eq(proto_fused_next(PROTO_FUSED, 9, bad, PROTO_HDR_SIZE, &at, &lim, &out,
                                      &data, why, sizeof why), KVS_EPROTO);
    at = 0;
    ck_assert_int_eq(proto_fused_next(PROTO_FUSED_REPLY, 9, bad, PROTO_HDR_SIZE, &at, &lim,
                                      &out, &data, why, sizeof why), 0);
    b = push_hdr();
    b.type = PROTO_PUSH;
    b.flags = PROTO_F_CMA;
    b.body_len = PROTO_CMA_LEN;
    proto_fused_put(bad, &b, "0123456789abcdef");
    at = 0;
    ck_assert_int_eq(proto_fused_next(PROTO_FUSED, 9, bad, sizeof bad, &at, &lim, &out, &data,
                                      why, sizeof why), KVS_EPROTO);
    b = r[0];
    b.dtype = 99;
    proto_fused_put(bad, &b, v);
    at = 0;
    ck_assert_int_eq(proto_fused_next(PROTO_FUSED, 9, bad, sizeof bad, &at, &lim, &out, &data,
                                      why, sizeof why), KVS_EPROTO);
    ck_assert_str_eq(proto_type_name(PROTO_FUSED), "FUSED");
    ck_assert_str_eq(proto_type_name(PROTO_FUSED_REPLY), "FUSED_REPLY");
}
END_TEST

/* Records with PROTO_F_FRAME are their headers alone (their bodies travel
 * as record frames of the message), in requests and answers; such a record
 * by reference, with an error status or without a body is refused, its
 * body_len is checked as any record's, and a lone message with the flag is
 * refused. */
START_TEST(test_fused_frames)
{
    uint8_t body[1024];
    float v[3] = {1, 2, 3};
    proto_hdr r[3], out;
    const uint8_t *data;
    uint64_t off = 0, len = 0;
    r[0] = push_hdr();
    r[0].type = PROTO_PUSHPULL;
    r[0].flags = PROTO_F_FRAME;
    r[0].count = r[0].total = 1u << 15;
    r[0].body_len = 4u << 15;
    r[1] = push_hdr();
    r[1].count = r[1].total = 3;
    r[1].body_len = 12;
    r[2] = r[0];
    r[2].key = 9;
    ck_assert_uint_eq(proto_fused_rec_size(&r[0]), PROTO_HDR_SIZE);
    ck_assert_uint_eq(proto_fused_rec_size(&r[1]), PROTO_HDR_SIZE + 16);
    len += proto_fused_put(body + len, &r[0], v); /* data not read */
    len += proto_fused_put(body + len, &r[1], v);
    len += proto_fused_put(body + len, &r[2], NULL);
    ck_assert_uint_eq(len, 3 * PROTO_HDR_SIZE + 16);
    check_container(PROTO_FUSED, 3, len);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(proto_fused_next(PROTO_FUSED, 9, body, len, &off, &lim, &out, &data,
                                          why, sizeof why), 0);
        ck_assert_uint_eq(out.key, r[i].key);
        ck_assert_uint_eq(out.body_len, r[i].body_len);
        ck_assert_int_eq(!!(out.flags & PROTO_F_FRAME), i != 1);
        ck_assert(i == 1 ? data != NULL && memcmp(data, v, sizeof v) == 0 : data == NULL);
    }
    ck_assert_uint_eq(off, len);
    off = 0; /* the same records in a FUSED_REF */
    ck_assert_int_eq(proto_fused_next(PROTO_FUSED_REF, 9, body, len, &off, &lim, &out, &data,
                                      why, sizeof why), 0);
    /* an answer with its value in a record frame */
    proto_hdr a = r[0];
    a.type = PROTO_REPLY;
    len = proto_fused_put(body, &a, NULL);
    off = 0;
    ck_assert_int_eq(proto_fused_next(PROTO_FUSED_REPLY, 9, body, len, &off, &lim, &out, &data,
                                      why, sizeof why), 0);
    ck_assert(out.flags & PROTO_F_FRAME && data == NULL && off == PROTO_HDR_SIZE);
    /* refused: an error answer, a descriptor, no body, a body_len that does
     * not match the count, one past KVS_MAX_MESSAGE */
    static const struct {
        int outer, type, flags, status;
        uint64_t count, body_len;
        int rc;
        const char *what;
    } bad[] = {
        {PROTO_FUSED_REPLY, PROTO_REPLY, PROTO_F_FRAME, KVS_EINVAL, 4, 16, KVS_EPROTO,
         "error text"},
        {PROTO_FUSED_REF, PROTO_PUSH, PROTO_F_FRAME | PROTO_F_CMA, 0, 1u << 15, PROTO_CMA_LEN,
         KVS_EPROTO, "descriptor"},
        {PROTO_FUSED, PROTO_PULL, PROTO_F_FRAME, 0, 4, 0, KVS_EPROTO, "no body"},
        {PROTO_FUSED, PROTO_PUSH, PROTO_F_FRAME, 0, 4, 20, KVS_EPROTO, "need"},
        {PROTO_FUSED, PROTO_PUSH, PROTO_F_FRAME, 0, 1ull << 40, 4ull << 40, KVS_ETOOBIG,
         "KVS_MAX_MESSAGE"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        proto_hdr b = push_hdr();
        b.type = (uint16_t)bad[i].type;
        b.flags = (uint16_t)bad[i].flags;
        b.status = bad[i].status;
        b.count = b.total = bad[i].count;
        b.body_len = bad[i].body_len;
        len = proto_fused_put(body, &b, NULL);
        ck_assert_uint_eq(len, PROTO_HDR_SIZE);
        off = 0;
        why[0] = '\0';
        ck_assert_int_eq(proto_fused_next(bad[i].outer, 9, body, len, &off, &lim, &out, &data,
                                          why, sizeof why), bad[i].rc);
        ck_assert_msg(strstr(why, bad[i].what) != NULL, "case %zu: '%s'", i, why);
        ck_assert_uint_eq(off, 0);
    }
    /* a lone message with the flag */
    proto_hdr l = r[1];
    l.flags = PROTO_F_FRAME;
    expect_err(&l, 2, 12, KVS_EPROTO);
    ck_assert(strstr(why, "record frame") != NULL);
}
END_TEST

/* FUSED_REF: records by reference (a PROTO_CMA_LEN descriptor) beside
 * inline ones; refused inside a plain FUSED; the descriptor's size is
 * checked; FUSED_REPLY takes an answer by reference only without a body
 * (or with an error text). */
START_TEST(test_fused_ref)
{
    uint8_t body[1024], desc[PROTO_CMA_LEN] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    float v[3] = {1, 2, 3};
    proto_hdr r[2], out;
    const uint8_t *data;
    uint64_t off = 0, len = 0;
    r[0] = push_hdr();
    r[0].type = PROTO_PUSHPULL;
    r[0].flags = PROTO_F_CMA;
    r[0].count = r[0].total = 1u << 16; /* a big part: only its descriptor travels */
    r[0].body_len = PROTO_CMA_LEN;
    r[1] = push_hdr();
    r[1].count = r[1].total = 3;
    r[1].body_len = 12;
    len += proto_fused_put(body + len, &r[0], desc);
    len += proto_fused_put(body + len, &r[1], v);
    ck_assert_uint_eq(len, 2 * PROTO_HDR_SIZE + 16 + 16);

    check_container(PROTO_FUSED_REF, 2, len);

    ck_assert_int_eq(proto_fused_next(PROTO_FUSED_REF, 9, body, len, &off, &lim, &out, &data,
                                      why, sizeof why), 0);
    ck_assert_int_eq(out.type, PROTO_PUSHPULL);
    ck_assert(out.flags & PROTO_F_CMA);
    ck_assert_uint_eq(out.count, 1u << 16);
    ck_assert_uint_eq(out.body_len, PROTO_CMA_LEN);
    ck_assert(data != NULL && memcmp(data, desc, PROTO_CMA_LEN) == 0);
    ck_assert_int_eq(proto_fused_next(PROTO_FUSED_REF, 9, body, len, &off, &lim, &out, &data,
                                      why, sizeof why), 0);
    ck_assert(!(out.flags & PROTO_F_CMA));
    ck_assert(memcmp(data, v, sizeof v) == 0);
    ck_assert_uint_eq(off, len);
    /* the same records in a plain FUSED: the one by reference is refused */
    off = 0;
    ck_assert_int_eq(proto_fused_next(PROTO_FUSED, 9, body, len, &off, &lim, &out, &data, why,
                                      sizeof why), KVS_EPROTO);
    ck_assert(strstr(why, "by reference") != NULL);
    /* another sender's record; a descriptor of the wrong size; a reply */
    off = 0;
    ck_assert_int_eq(proto_fused_next(PROTO_FUSED_REF, 11, body, len, &off, &lim, &out, &data,
                                      why, sizeof why), KVS_EPROTO);
    uint8_t bad[512];
    proto_hdr b = r[0];
    b.body_len = 8;
    uint64_t blen = proto_fused_put(bad, &b, desc);
    off = 0;
    ck_assert_int_eq(proto_fused_next(PROTO_FUSED_REF, 9, bad, blen, &off, &lim, &out, &data,
                                      why, sizeof why), KVS_EPROTO);
    b = r[0];
    b.count = b.total = 1ull << 40; /* a descriptor naming more than KVS_MAX_MESSAGE */
    blen = proto_fused_put(bad, &b, desc);
    off = 0;
    ck_assert_int_eq(proto_fused_next(PROTO_FUSED_REF, 9, bad, blen, &off, &lim, &out, &data,
                                      why, sizeof why), KVS_ETOOBIG);
    b = push_hdr();
    b.type = PROTO_REPLY;
    b.flags = PROTO_F_CMA;
    b.body_len = 0;
    blen = proto_fused_put(bad, &b, NULL);
    off = 0;
    ck_assert_int_eq(proto_fused_next(PROTO_FUSED_REF, 9, bad, blen, &off, &lim, &out, &data,
                                      why, sizeof why), KVS_EPROTO);
    /* FUSED_REPLY: "written" without a body is an answer; with data it lies */
    off = 0;
    ck_assert_int_eq(proto_fused_next(PROTO_FUSED_REPLY, 9, bad, blen, &off, &lim, &out, &data,
                                      why, sizeof why), 0);
    ck_assert(out.flags & PROTO_F_CMA);
    ck_assert(data == NULL);
    b.body_len = 12;
    b.count = b.total = 3;
    blen = proto_fused_put(bad, &b, v);
    off = 0;
    ck_assert_int_eq(proto_fused_next(PROTO_FUSED_REPLY, 9, bad, blen, &off, &lim, &out, &data,
                                      why, sizeof why), KVS_EPROTO);
    b.status = KVS_EINVAL; /* an error answer by reference carries its text */
    blen = proto_fused_put(bad, &b, "cannot write");
    off = 0;
    ck_assert_int_eq(proto_fused_next(PROTO_FUSED_REPLY, 9, bad, blen, &off, &lim, &out, &data,
                                      why, sizeof why), 0);
    ck_assert_str_eq(proto_type_name(PROTO_FUSED_REF), "FUSED_REF");
    ck_assert(proto_type_known(66));
}
END_TEST

/* lamb's NORM_PART: a text body of 1..PROTO_NORM_TEXT_MAX bytes and a
 * non-empty part inside the key. */
START_TEST(test_norm_part)
{
    proto_hdr h;
    memset(&h, 0, sizeof h);
    h.type = PROTO_NORM_PART;
    h.key = 11;
    h.round = 3;
    h.offset = 1250;
    h.count = 1251;
    h.total = 2501;
    h.body_len = 40;
    expect_ok(&h);
    ck_assert_str_eq(proto_type_name(PROTO_NORM_PART), "NORM_PART");
    h.body_len = PROTO_NORM_TEXT_MAX;
    expect_ok(&h);
    h.body_len = PROTO_NORM_TEXT_MAX + 1;
    expect_err(&h, 2, PROTO_NORM_TEXT_MAX + 1, KVS_EPROTO);
    ck_assert_ptr_nonnull(strstr(why, "NORM_PART"));
    h.body_len = 0;
    expect_err(&h, 1, 0, KVS_EPROTO);
    h.body_len = 40;
    h.count = 1252; /* past total */
    expect_err(&h, 2, 40, KVS_EPROTO);
    h.count = 0;
    expect_err(&h, 2, 40, KVS_EPROTO);
    h.offset = UINT64_MAX;
    h.count = 2;
    expect_err(&h, 2, 40, KVS_EPROTO);
}
END_TEST

Suite *proto_suite(void)
{
    Suite *s = suite_create("proto");
    TCase *t = tcase_create("proto");
    tcase_add_test(t, test_norm_part);
    tcase_add_test(t, test_layout);
    tcase_add_test(t, test_round_trip);
    tcase_add_test(t, test_bad_header_length);
    tcase_add_test(t, test_magic_version_type);
    tcase_add_test(t, test_frames_vs_body);
    tcase_add_test(t, test_data_checks);
    tcase_add_test(t, test_pull);
    tcase_add_test(t, test_text_limits);
    tcase_add_test(t, test_status);
    tcase_add_test(t, test_garbage);
    tcase_add_test(t, test_has_data);
    tcase_add_test(t, test_names);
    tcase_add_test(t, test_parse_nodes);
    tcase_add_test(t, test_parse_register);
    tcase_add_test(t, test_parse_rejects_nul_and_empty);
    tcase_add_test(t, test_cma_flag);
    tcase_add_test(t, test_contrib);
    tcase_add_test(t, test_fused);
    tcase_add_test(t, test_fused_ref);
    tcase_add_test(t, test_fused_frames);
    tcase_add_test(t, test_codec_flag);
    tcase_add_test(t, test_repl_value);
    tcase_add_test(t, test_rejoin_fields);
    suite_add_tcase(s, t);
    return s;
}
