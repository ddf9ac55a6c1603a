/* fuzz_msg.c - see fuzz_msg.h. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zmq.h>

#include "common/log.h"
#include "common/sizes.h"
#include "tests/fuzz/fuzz_msg.h"
#include "tests/fuzz/fuzz_target.h"

extern char **environ;

uint8_t fz_u8(fz_in *in)
{
    return in->at < in->n ? in->p[in->at++] : 0;
}

uint16_t fz_u16(fz_in *in)
{
    uint16_t v = fz_u8(in);
    return (uint16_t)(v | fz_u8(in) << 8);
}

uint32_t fz_u32(fz_in *in)
{
    uint32_t v = fz_u16(in);
    return v | (uint32_t)fz_u16(in) << 16;
}

uint64_t fz_u64(fz_in *in)
{
    uint64_t v = fz_u32(in);
    return v | (uint64_t)fz_u32(in) << 32;
}

void fz_bytes(fz_in *in, void *out, size_t len)
{
    size_t have = in->at < in->n ? in->n - in->at : 0;
    size_t n = have < len ? have : len;
    if (n)
        memcpy(out, in->p + in->at, n);
    memset((uint8_t *)out + n, 0, len - n);
    in->at += n;
}

void fz_msg_add(net_msg *m, const void *data, size_t len)
{
    m->total++;
    if (!net_msg_room(m))
        return;
    zmq_msg_t *f = &m->frames[m->nframes++];
    zmq_msg_init_size(f, len);
    if (len)
        memcpy(zmq_msg_data(f), data, len);
}

void fz_raw_msg(fz_in *in, net_msg *m, const void *ident, size_t ident_len)
{
    uint8_t ctl = fz_u8(in), buf[FZ_BODY_MAX];
    int frames = 1 + (ctl & 3); /* after the routing id: 1..4 */
    net_msg_init(m);
    if (ctl & 4) { /* the input's own routing id (ROUTER gives 1..255 bytes) */
        size_t n = 1 + fz_u8(in) % 64;
        fz_bytes(in, buf, n);
        fz_msg_add(m, buf, n);
    } else {
        fz_msg_add(m, ident, ident_len);
    }
    for (int i = 0; i < frames; i++) {
        size_t n;
        if (i == 0 && !(ctl & 8))
            n = PROTO_HDR_SIZE;
        else
            n = fz_u16(in) % FZ_BODY_MAX;
        fz_bytes(in, buf, n);
        fz_msg_add(m, buf, n);
    }
}

void fz_hdr_fields(fz_in *in, proto_hdr *h)
{
    uint8_t b;
    b = fz_u8(in);
    h->key = b < 0xF8 ? b & 7 : fz_u64(in);
    b = fz_u8(in);
    h->dtype = b < 0xF0 ? b % KVS_NUM_DTYPES : fz_u32(in);
    b = fz_u8(in);
    h->count = b < 0xF0 ? b % 65 : fz_u64(in);
    b = fz_u8(in); /* shape */
    h->part = 0;
    switch (b & 3) {
    case 0: /* the whole key */
        h->offset = 0;
        h->total = h->count;
        break;
    case 1: /* one of two equal parts */
        h->part = (b >> 2) & 1;
        h->offset = h->part ? h->count : 0;
        h->total = 2 * h->count;
        break;
    case 2: /* a part somewhere, maybe not fitting */
        h->offset = b >> 4;
        h->total = h->count + (b >> 2);
        h->part = b >> 6;
        break;
    default:
        h->offset = fz_u64(in);
        h->total = fz_u64(in);
        h->part = fz_u32(in);
    }
    b = fz_u8(in);
    h->round = b < 0xF0 ? b & 15 : fz_u64(in);
    b = fz_u8(in); /* the rest */
    h->req_id = (b & 1) ? fz_u64(in) : in->at; /* distinct, and the same every run */
    h->priority = (b & 2) ? (int8_t)fz_u8(in) : 0;
    h->status = (b & 4) ? -(int32_t)fz_u16(in) : 0;
    h->flags = 0;
    /* a push's contribution count: mostly 1, sometimes 0..3 (no input byte
     * of its own, so the corpus keeps its meaning) */
    h->contrib = (b & 0xC0) == 0xC0 ? (uint16_t)(h->count % 4) : 1;
    if (b & 8)
        h->flags |= PROTO_F_ASYNC;
    if (b & 16)
        h->flags |= PROTO_F_TRACE;
    if (b & 32)
        h->flags = fz_u16(in);
}

static void put_elem(uint8_t *p, kvs_dtype dt, int v)
{
    switch (dt) {
    case KVS_FLOAT32: {
        float f = (float)v;
        memcpy(p, &f, 4);
        break;
    }
    case KVS_FLOAT64: {
        double d = v;
        memcpy(p, &d, 8);
        break;
    }
    case KVS_INT32: {
        int32_t i = v;
        memcpy(p, &i, 4);
        break;
    }
    case KVS_INT64: {
        int64_t i = v;
        memcpy(p, &i, 8);
        break;
    }
    default: { /* float16 / bfloat16: small integers as their bit patterns */
        uint16_t x = dt == KVS_FLOAT16 ? (uint16_t)(0x3C00 + (v & 0x3FF))
                                       : (uint16_t)(0x3F80 + (v & 0x7F));
        memcpy(p, &x, 2);
    }
    }
}

size_t fz_data_body(fz_in *in, proto_hdr *h, uint8_t *body)
{
    uint64_t bytes;
    size_t dsize = h->dtype < KVS_NUM_DTYPES ? kvs_dtype_size((kvs_dtype)h->dtype) : 4;
    if (!size_mul(h->count, dsize, &bytes))
        bytes = UINT64_MAX;
    h->body_len = bytes;
    size_t n = bytes < FZ_BODY_MAX ? (size_t)bytes : FZ_BODY_MAX;
    uint8_t how = fz_u8(in);
    if (how % 3 == 0 && h->dtype < KVS_NUM_DTYPES) {
        for (size_t i = 0; i + dsize <= n; i += dsize)
            put_elem(body + i, (kvs_dtype)h->dtype, (int)(i / dsize) + (how >> 2));
        memset(body + n - n % dsize, 0, n % dsize);
    } else if (how % 3 == 1) {
        fz_bytes(in, body, n);
    } else {
        memset(body, 0, n);
    }
    return n;
}

size_t fz_text_body(fz_in *in, const char *const *choices, size_t n, uint8_t *body)
{
    uint8_t b = fz_u8(in);
    if (b < n) {
        size_t len = strlen(choices[b]);
        memcpy(body, choices[b], len);
        return len;
    }
    size_t len = fz_u16(in) % FZ_BODY_MAX;
    fz_bytes(in, body, len);
    return len;
}

void fz_finish(fz_in *in, net_msg *m, const void *ident, size_t ident_len, const proto_hdr *h,
               const uint8_t *body, size_t blen)
{
    uint8_t hdr[PROTO_HDR_SIZE + 1];
    uint8_t d = fz_u8(in);
    size_t hlen = PROTO_HDR_SIZE;
    int with_body = blen > 0 || h->body_len > 0, extra = 0;
    size_t split = 0;
    proto_encode(h, hdr);
    hdr[PROTO_HDR_SIZE] = 0;
    if (d >= 0xA0 && d < 0xC0) /* valid, the body in frames of 8..256 bytes (or odd) */
        split = (d & 16) ? 1 + (d & 15) : 8 * (1 + (d & 15) * 2);
    switch (d < 0xC0 ? 0 : d & 7) {
    case 1: /* one header byte changed */
        hdr[fz_u8(in) % PROTO_HDR_SIZE] ^= (uint8_t)(fz_u8(in) | 1);
        break;
    case 2: { /* the declared body length off by a little or a lot */
        uint64_t bl = h->body_len + (uint64_t)(int8_t)fz_u8(in);
        if (d & 8)
            bl = fz_u64(in);
        for (int i = 0; i < 8; i++)
            hdr[80 + i] = (uint8_t)(bl >> (8 * i));
        break;
    }
    case 3: /* the body cut short */
        blen = blen ? blen - 1 - fz_u8(in) % blen : 0;
        break;
    case 4: /* no body frame */
        with_body = 0;
        break;
    case 5: /* an extra frame */
        extra = 1 + (d >> 3 & 1);
        break;
    case 6: /* a header one byte short or long */
        hlen = (d & 8) ? PROTO_HDR_SIZE - 1 : PROTO_HDR_SIZE + 1;
        break;
    case 7: /* an empty body frame that the header does not declare */
        with_body = 1;
        blen = 0;
        break;
    default:
        break;
    }
    net_msg_init(m);
    fz_msg_add(m, ident, ident_len);
    fz_msg_add(m, hdr, hlen);
    if (with_body && split == 0) {
        fz_msg_add(m, body, blen);
    } else if (with_body) { /* the body in several frames of split bytes (the
                             * last one shorter), as a socket with a frame
                             * size sends a big body */
        size_t at = 0;
        do {
            size_t n = blen - at < split ? blen - at : split;
            fz_msg_add(m, body + at, n);
            at += n;
        } while (at < blen);
    }
    for (int i = 0; i < extra; i++)
        fz_msg_add(m, "x", 1);
}

void fz_env(enum cfg_role role, int servers, int workers)
{
    static const char *const prefixes[] = {"DMLC_", "PS_", "KVS_", "MXNET_"};
    char num[16];
    for (;;) { /* unsetenv changes environ: start over after each */
        bool again = false;
        for (char **e = environ; *e && !again; e++)
            for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
                if (strncmp(*e, prefixes[i], strlen(prefixes[i])) != 0)
                    continue;
                char name[256];
                size_t n = strcspn(*e, "=");
                snprintf(name, sizeof name, "%.*s", (int)n, *e);
                unsetenv(name);
                again = true;
                break;
            }
        if (!again)
            break;
    }
    setenv("DMLC_ROLE", cfg_role_name(role), 1);
    setenv("DMLC_PS_ROOT_URI", "127.0.0.1", 1);
    /* the scheduler binds an ephemeral port; a server's link (not made
     * here) would look for it at port 1 */
    setenv("DMLC_PS_ROOT_PORT", role == CFG_ROLE_SCHEDULER ? "0" : "1", 1);
    snprintf(num, sizeof num, "%d", servers);
    setenv("DMLC_NUM_SERVER", num, 1);
    snprintf(num, sizeof num, "%d", workers);
    setenv("DMLC_NUM_WORKER", num, 1);
    setenv("DMLC_NODE_HOST", "127.0.0.1", 1);
    setenv("KVS_MAX_MESSAGE", "1048576", 1);
    setenv("MXNET_KVSTORE_REDUCTION_NTHREADS", "1", 1);
    setenv("MXNET_KVSTORE_BIGARRAY_BOUND", "64", 1);
}

static void discard_log(int level, const char *line, void *ctx)
{
    (void)level;
    (void)line;
    (void)ctx;
}

void fz_setup(cfg *c, enum cfg_role role, int servers, int workers, const char *who)
{
    char err[512];
    fz_env(role, servers, workers);
    if (cfg_load(c, true, err, sizeof err) != 0) {
        fprintf(stderr, "%s: configuration: %s\n", who, err);
        abort();
    }
    c->role = role;
    log_set_level(LOG_DEBUG);
    if (!getenv("FUZZ_LOG"))
        log_set_handler(discard_log, NULL);
}

void fz_ctx_turn(void **zctx)
{
    static unsigned n;
    if (++n % 256 == 0) {
        zmq_ctx_term(*zctx);
        *zctx = zmq_ctx_new();
    }
}
