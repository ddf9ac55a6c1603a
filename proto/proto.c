/* proto.c - wire format; see proto.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/config.h"
#include "common/sizes.h"
#include "proto/proto.h"

void proto_encode(const proto_hdr *h, uint8_t out[PROTO_HDR_SIZE])
{
    le_put32(out + 0, PROTO_MAGIC);
    le_put16(out + 4, PROTO_VERSION);
    le_put16(out + 6, h->type);
    le_put16(out + 8, h->flags);
    le_put16(out + 10, h->contrib);
    le_put32(out + 12, (uint32_t)h->sender);
    le_put32(out + 16, (uint32_t)h->status);
    le_put32(out + 20, (uint32_t)h->priority);
    le_put64(out + 24, h->req_id);
    le_put64(out + 32, h->key);
    le_put64(out + 40, h->offset);
    le_put64(out + 48, h->count);
    le_put64(out + 56, h->total);
    le_put64(out + 64, h->round);
    le_put32(out + 72, h->dtype);
    le_put32(out + 76, h->part);
    le_put64(out + 80, h->body_len);
}

bool proto_has_data(const proto_hdr *h)
{
    if (h->flags & PROTO_F_CMA)
        return false;
    switch (h->type) {
    case PROTO_PUSH:
    case PROTO_PUSHPULL:
        return true;
    case PROTO_INIT:
    case PROTO_REPLY:
        return h->status == 0 && h->body_len > 0;
    default:
        return false;
    }
}


static bool is_data_request(int type)
{
    return type == PROTO_INIT || type == PROTO_PUSH || type == PROTO_PULL ||
           type == PROTO_PUSHPULL;
}

/* proto_decode; in_fused: a record of a fused body, which alone may have
 * PROTO_F_FRAME. */
static int decode(const void *hdr, size_t hdr_len, int nframes, size_t body_len,
                  const proto_limits *lim, bool in_fused, proto_hdr *out, char *why,
                  size_t whylen)
{
    const uint8_t *p = hdr;
    proto_hdr h;
    uint64_t bytes, end;

    if (nframes < 1 || nframes > 2)
        return err_why(why, whylen, KVS_EPROTO, "%d frames (expected 1 or 2)", nframes);
    if (hdr_len != PROTO_HDR_SIZE)
        return err_why(why, whylen, KVS_EPROTO, "header frame of %zu bytes (expected %d)",
                    hdr_len, PROTO_HDR_SIZE);
    if (le_get32(p) != PROTO_MAGIC)
        return err_why(why, whylen, KVS_EPROTO, "bad magic 0x%08x", le_get32(p));
    if (le_get16(p + 4) != PROTO_VERSION)
        return err_why(why, whylen, KVS_EPROTO, "protocol version %u (this build speaks %d)",
                    le_get16(p + 4), PROTO_VERSION);
    h.type = le_get16(p + 6);
    h.flags = le_get16(p + 8);
    h.contrib = le_get16(p + 10);
    h.sender = (int32_t)le_get32(p + 12);
    h.status = (int32_t)le_get32(p + 16);
    h.priority = (int32_t)le_get32(p + 20);
    h.req_id = le_get64(p + 24);
    h.key = le_get64(p + 32);
    h.offset = le_get64(p + 40);
    h.count = le_get64(p + 48);
    h.total = le_get64(p + 56);
    h.round = le_get64(p + 64);
    h.dtype = le_get32(p + 72);
    h.part = le_get32(p + 76);
    h.body_len = le_get64(p + 80);

    if (!proto_type_known(h.type))
        return err_why(why, whylen, KVS_EPROTO, "unknown message type %u", h.type);
    if (h.body_len != (nframes == 2 ? body_len : 0) || (nframes == 2) != (h.body_len > 0))
        return err_why(why, whylen, KVS_EPROTO,
                    "%s declares a body of %llu bytes but %d frame(s) with %zu body bytes "
                    "arrived",
                    proto_type_name(h.type), (unsigned long long)h.body_len, nframes,
                    body_len);
    if (h.status > 0 || h.status < -1000)
        return err_why(why, whylen, KVS_EPROTO, "status %d out of range", h.status);
    if ((h.flags & PROTO_F_FRAME) && !in_fused)
        return err_why(why, whylen, KVS_EPROTO, "%s: a record frame flag outside a fused body",
                       proto_type_name(h.type));
    if ((h.type == PROTO_PUSH || h.type == PROTO_PUSHPULL) && h.contrib == 0)
        return err_why(why, whylen, KVS_EPROTO, "%s with a contribution count of 0",
                       proto_type_name(h.type));

    if (is_data_request(h.type) || h.type == PROTO_REPLY) {
        if (h.dtype >= KVS_NUM_DTYPES && (h.type != PROTO_REPLY || h.status == 0))
            return err_why(why, whylen, KVS_EPROTO, "unknown dtype %u", h.dtype);
        if (!size_add(h.offset, h.count, &end) || end > h.total)
            return err_why(why, whylen, KVS_EPROTO,
                        "part [%llu, +%llu) does not fit in the key's %llu elements",
                        (unsigned long long)h.offset, (unsigned long long)h.count,
                        (unsigned long long)h.total);
    }
    h.cma_src = h.cma_dst = 0;
    h.t_arrive_ns = h.sum_ns = h.t_round_ns = 0;
    h.fuse = 0;
    h.cma_done = 0;
    if ((h.flags & PROTO_F_CODEC) &&
        ((h.flags & (PROTO_F_CMA | PROTO_F_RSP)) ||
         !(is_data_request(h.type) || (h.type == PROTO_REPLY && h.status == 0))))
        return err_why(why, whylen, KVS_EPROTO, "%s: a compressed body %s",
                       proto_type_name(h.type),
                       (h.flags & PROTO_F_CMA)   ? "cannot go by reference"
                       : (h.flags & PROTO_F_RSP) ? "cannot be row-sparse"
                                                 : "is only for pushes and value replies");
    if ((h.flags & PROTO_F_ZPULL) &&
        (!(h.flags & PROTO_F_CODEC) || (h.type != PROTO_PUSH && h.type != PROTO_PUSHPULL)))
        return err_why(why, whylen, KVS_EPROTO, "%s: compressed replies asked for without a "
                       "compressed push", proto_type_name(h.type));
    if ((h.flags & PROTO_F_RSP) &&
        (h.type == PROTO_PUSH || h.type == PROTO_PUSHPULL || h.type == PROTO_PULL)) {
        /* a row-sparse body: its inside is checked by proto_rsp_parse */
        if (h.flags & PROTO_F_CMA)
            return err_why(why, whylen, KVS_EPROTO, "row-sparse %s by reference",
                           proto_type_name(h.type));
        if (h.body_len < PROTO_RSP_HDR)
            return err_why(why, whylen, KVS_EPROTO, "row-sparse %s of %llu bytes (at least %d)",
                           proto_type_name(h.type), (unsigned long long)h.body_len,
                           PROTO_RSP_HDR);
        if (h.body_len > lim->max_message)
            return err_why(why, whylen, KVS_ETOOBIG, "body of %llu bytes > KVS_MAX_MESSAGE (%llu)",
                           (unsigned long long)h.body_len, (unsigned long long)lim->max_message);
        *out = h;
        return 0;
    }
    if (h.flags & PROTO_F_RSP)
        return err_why(why, whylen, KVS_EPROTO, "%s cannot be row-sparse",
                       proto_type_name(h.type));
    if (h.flags & PROTO_F_CMA) {
        bool req = is_data_request(h.type);
        if (!req && h.type != PROTO_REPLY)
            return err_why(why, whylen, KVS_EPROTO, "%s cannot carry data by reference",
                        proto_type_name(h.type));
        if (req && h.body_len != PROTO_CMA_LEN)
            return err_why(why, whylen, KVS_EPROTO, "%s by reference with a %llu-byte descriptor",
                        proto_type_name(h.type), (unsigned long long)h.body_len);
        if (!req && h.status == 0 && h.body_len != 0)
            return err_why(why, whylen, KVS_EPROTO, "REPLY by reference with a body");
        if (!req && h.body_len > PROTO_ERRTEXT_MAX)
            return err_why(why, whylen, KVS_ETOOBIG, "error text of %llu bytes",
                        (unsigned long long)h.body_len);
        if (!size_mul(h.count, kvs_dtype_size((kvs_dtype)h.dtype), &bytes))
            return err_why(why, whylen, KVS_ETOOBIG, "count %llu overflows a byte size",
                        (unsigned long long)h.count);
        if (bytes > lim->max_message)
            return err_why(why, whylen, KVS_ETOOBIG, "%llu bytes > KVS_MAX_MESSAGE (%llu)",
                        (unsigned long long)bytes, (unsigned long long)lim->max_message);
    } else if (h.type == PROTO_NORM_PART) {
        if (h.body_len == 0 || h.body_len > PROTO_NORM_TEXT_MAX)
            return err_why(why, whylen, KVS_EPROTO, "NORM_PART of %llu bytes (1 to %u)",
                        (unsigned long long)h.body_len, PROTO_NORM_TEXT_MAX);
        if (h.count == 0 || !size_add(h.offset, h.count, &end) || end > h.total)
            return err_why(why, whylen, KVS_EPROTO,
                        "NORM_PART part [%llu, +%llu) is empty or outside the key's %llu "
                        "elements", (unsigned long long)h.offset, (unsigned long long)h.count,
                        (unsigned long long)h.total);
    } else if (h.type == PROTO_REPL_VALUE) {
        if (h.dtype >= KVS_NUM_DTYPES)
            return err_why(why, whylen, KVS_EPROTO, "REPL_VALUE of unknown dtype %u", h.dtype);
        if (!size_add(h.offset, h.count, &end) || end > h.total)
            return err_why(why, whylen, KVS_EPROTO,
                        "REPL_VALUE part [%llu, +%llu) does not fit in the key's %llu elements",
                        (unsigned long long)h.offset, (unsigned long long)h.count,
                        (unsigned long long)h.total);
        if (!size_mul(h.count, kvs_dtype_size((kvs_dtype)h.dtype), &bytes) ||
            bytes > h.body_len)
            return err_why(why, whylen, KVS_EPROTO, "REPL_VALUE of %llu %s elements in %llu "
                        "bytes", (unsigned long long)h.count,
                        kvs_dtype_name((kvs_dtype)h.dtype), (unsigned long long)h.body_len);
        if (h.body_len > lim->max_message)
            return err_why(why, whylen, KVS_ETOOBIG, "body of %llu bytes > KVS_MAX_MESSAGE (%llu)",
                        (unsigned long long)h.body_len, (unsigned long long)lim->max_message);
    } else if (h.type == PROTO_TIMING) {
        if (h.body_len != PROTO_TIMING_LEN)
            return err_why(why, whylen, KVS_EPROTO, "TIMING of %llu bytes",
                        (unsigned long long)h.body_len);
    } else if (h.type == PROTO_HELLO || h.type == PROTO_PROOF) {
        if (h.body_len != PROTO_HELLO_LEN)
            return err_why(why, whylen, KVS_EPROTO, "%s of %llu bytes", proto_type_name(h.type),
                        (unsigned long long)h.body_len);
    } else if (h.type == PROTO_CHALLENGE) {
        if (h.body_len != PROTO_NONCE_LEN)
            return err_why(why, whylen, KVS_EPROTO, "CHALLENGE of %llu bytes",
                        (unsigned long long)h.body_len);
    } else if (proto_has_data(&h) && PROTO_CODEC(h.flags)) {
        /* a compressed part: its receiver checks the exact size for its codec */
        if (h.type != PROTO_PUSH && h.type != PROTO_PUSHPULL && h.type != PROTO_REPLY)
            return err_why(why, whylen, KVS_EPROTO, "%s with a compressed body",
                        proto_type_name(h.type));
        if (h.dtype != KVS_FLOAT32)
            return err_why(why, whylen, KVS_EPROTO, "compressed %s of %s (float32 only)",
                        proto_type_name(h.type), kvs_dtype_name((kvs_dtype)h.dtype));
        if (!size_mul(h.count, 8, &bytes) || h.body_len > bytes + 8)
            return err_why(why, whylen, KVS_EPROTO, "compressed body of %llu bytes for %llu "
                        "elements", (unsigned long long)h.body_len,
                        (unsigned long long)h.count);
        if (h.body_len > lim->max_message)
            return err_why(why, whylen, KVS_ETOOBIG,
                        "body of %llu bytes > KVS_MAX_MESSAGE (%llu)",
                        (unsigned long long)h.body_len, (unsigned long long)lim->max_message);
    } else if (proto_has_data(&h)) {
        if (!size_mul(h.count, kvs_dtype_size((kvs_dtype)h.dtype), &bytes))
            return err_why(why, whylen, KVS_ETOOBIG, "count %llu overflows a byte size",
                        (unsigned long long)h.count);
        if (bytes != h.body_len)
            return err_why(why, whylen, KVS_EPROTO,
                        "%llu %s elements need %llu bytes, body has %llu",
                        (unsigned long long)h.count, kvs_dtype_name((kvs_dtype)h.dtype),
                        (unsigned long long)bytes, (unsigned long long)h.body_len);
        if (h.body_len > lim->max_message)
            return err_why(why, whylen, KVS_ETOOBIG,
                        "body of %llu bytes > KVS_MAX_MESSAGE (%llu)",
                        (unsigned long long)h.body_len, (unsigned long long)lim->max_message);
    } else if (h.type == PROTO_FUSED || h.type == PROTO_FUSED_REPLY ||
               h.type == PROTO_FUSED_REF) {
        uint64_t least;
        if (h.count == 0 || !size_mul(h.count, PROTO_HDR_SIZE, &least) || least > h.body_len)
            return err_why(why, whylen, KVS_EPROTO, "%s of %llu records in %llu bytes",
                        proto_type_name(h.type), (unsigned long long)h.count,
                        (unsigned long long)h.body_len);
        if (h.body_len > lim->max_message)
            return err_why(why, whylen, KVS_ETOOBIG, "body of %llu bytes > KVS_MAX_MESSAGE (%llu)",
                        (unsigned long long)h.body_len, (unsigned long long)lim->max_message);
    } else if ((h.type == PROTO_PULL || h.type == PROTO_ANNOUNCE) && h.body_len != 0) {
        return err_why(why, whylen, KVS_EPROTO, "%s with a body", proto_type_name(h.type));
    } else if (h.type == PROTO_REPLY || h.type == PROTO_ERROR || h.type == PROTO_REFUSED) {
        if (h.body_len > PROTO_ERRTEXT_MAX)
            return err_why(why, whylen, KVS_ETOOBIG, "error text of %llu bytes",
                        (unsigned long long)h.body_len);
    } else if (h.body_len > PROTO_TEXT_MAX) {
        return err_why(why, whylen, KVS_ETOOBIG, "%s body of %llu bytes > %u",
                    proto_type_name(h.type), (unsigned long long)h.body_len, PROTO_TEXT_MAX);
    }
    *out = h;
    return 0;
}

uint64_t proto_peek_req_id(const void *hdr, size_t hdr_len)
{
    return hdr_len == PROTO_HDR_SIZE ? le_get64((const uint8_t *)hdr + 24) : 0;
}

int proto_decode(const void *hdr, size_t hdr_len, int nframes, size_t body_len,
                 const proto_limits *lim, proto_hdr *out, char *why, size_t whylen)
{
    return decode(hdr, hdr_len, nframes, body_len, lim, false, out, why, whylen);
}

uint64_t proto_fused_put(uint8_t *out, const proto_hdr *h, const void *data)
{
    uint64_t n = proto_fused_rec_size(h);
    proto_encode(h, out);
    if (h->flags & PROTO_F_FRAME)
        return n;
    if (h->body_len > 0)
        memcpy(out + PROTO_HDR_SIZE, data, h->body_len);
    memset(out + PROTO_HDR_SIZE + h->body_len, 0, n - PROTO_HDR_SIZE - h->body_len);
    return n;
}

int proto_fused_next(int outer, int sender, const uint8_t *body, uint64_t len, uint64_t *off,
                     const proto_limits *lim, proto_hdr *rec, const uint8_t **data, char *why,
                     size_t whylen)
{
    char inner[200];
    uint64_t at = *off, blen, need;
    if (at > len || len - at < PROTO_HDR_SIZE)
        return err_why(why, whylen, KVS_EPROTO, "%s: record at byte %llu runs past the body "
                    "(%llu bytes)", proto_type_name(outer), (unsigned long long)at,
                    (unsigned long long)len);
    blen = le_get64(body + at + 80);
    bool framed = (le_get16(body + at + 8) & PROTO_F_FRAME) != 0;
    if (framed)
        need = PROTO_HDR_SIZE; /* its body is a record frame of its own */
    else if (blen > len - at - PROTO_HDR_SIZE ||
             (need = proto_fused_rec_len(blen)) > len - at)
        return err_why(why, whylen, KVS_EPROTO, "%s: record at byte %llu declares %llu body "
                    "bytes, past the body (%llu bytes)", proto_type_name(outer),
                    (unsigned long long)at, (unsigned long long)blen, (unsigned long long)len);
    int rc = decode(body + at, PROTO_HDR_SIZE, blen ? 2 : 1, blen, lim, true, rec, inner,
                    sizeof inner);
    if (rc)
        return err_why(why, whylen, rc, "%s: record at byte %llu: %s", proto_type_name(outer),
                    (unsigned long long)at, inner);
    if (outer != PROTO_FUSED_REPLY ? !is_data_request(rec->type) : rec->type != PROTO_REPLY)
        return err_why(why, whylen, KVS_EPROTO, "%s: record at byte %llu is a %s",
                    proto_type_name(outer), (unsigned long long)at,
                    proto_type_name(rec->type));
    /* by reference: a request only in a FUSED_REF, an answer only one that
     * says its value was written (proto_decode checked the descriptor's size
     * and that such an answer has no body) */
    if ((rec->flags & PROTO_F_CMA) && outer == PROTO_FUSED)
        return err_why(why, whylen, KVS_EPROTO, "%s: record at byte %llu is by reference",
                    proto_type_name(outer), (unsigned long long)at);
    if (rec->sender != sender)
        return err_why(why, whylen, KVS_EPROTO, "%s from %d: record at byte %llu says sender %d",
                    proto_type_name(outer), sender, (unsigned long long)at, rec->sender);
    /* a record frame holds data: not a descriptor, an error text or nothing */
    if (framed && ((rec->flags & PROTO_F_CMA) || rec->status != 0 || blen == 0))
        return err_why(why, whylen, KVS_EPROTO, "%s: record at byte %llu has a frame of its "
                    "own for %s", proto_type_name(outer), (unsigned long long)at,
                    blen == 0 ? "no body" : (rec->flags & PROTO_F_CMA) ? "a descriptor"
                                                                       : "an error text");
    *data = blen && !framed ? body + at + PROTO_HDR_SIZE : NULL;
    *off = at + need;
    return 0;
}

const char *proto_type_name(int type)
{
    static const char *const names[PROTO_TYPE_MAX] = {
        [PROTO_REGISTER] = "REGISTER",
        [PROTO_REGISTER_ACK] = "REGISTER_ACK",
        [PROTO_HEARTBEAT] = "HEARTBEAT",
        [PROTO_HEARTBEAT_ACK] = "HEARTBEAT_ACK",
        [PROTO_BARRIER] = "BARRIER",
        [PROTO_BARRIER_DONE] = "BARRIER_DONE",
        [PROTO_NODE_DEAD] = "NODE_DEAD",
        [PROTO_EXIT] = "EXIT",
        [PROTO_EXIT_ACK] = "EXIT_ACK",
        [PROTO_SHUTDOWN] = "SHUTDOWN",
        [PROTO_INIT] = "INIT",
        [PROTO_PUSH] = "PUSH",
        [PROTO_PULL] = "PULL",
        [PROTO_PUSHPULL] = "PUSHPULL",
        [PROTO_REPLY] = "REPLY",
        [PROTO_ERROR] = "ERROR",
        [PROTO_HELLO] = "HELLO",
        [PROTO_NODE_LEFT] = "NODE_LEFT",
        [PROTO_PEER_LOST] = "PEER_LOST",
        [PROTO_EPOCH] = "EPOCH",
        [PROTO_EPOCH_ACK] = "EPOCH_ACK",
        [PROTO_REFUSED] = "REFUSED",
        [PROTO_CHALLENGE] = "CHALLENGE",
        [PROTO_PROOF] = "PROOF",
        [PROTO_ANNOUNCE] = "ANNOUNCE",
        [PROTO_TIMING] = "TIMING",
        [PROTO_OPT_SET] = "OPT_SET",
        [PROTO_OPT_KEY] = "OPT_KEY",
        [PROTO_SAVE] = "SAVE",
        [PROTO_LOAD] = "LOAD",
        [PROTO_LOAD_END] = "LOAD_END",
        [PROTO_SAVE_END] = "SAVE_END",
        [PROTO_CKPT_LIST] = "CKPT_LIST",
        [PROTO_SAVE_CLEAN] = "SAVE_CLEAN",
        [PROTO_FUSED] = "FUSED",
        [PROTO_FUSED_REPLY] = "FUSED_REPLY",
        [PROTO_FUSED_REF] = "FUSED_REF",
        [PROTO_NORM_PART] = "NORM_PART",
        [PROTO_REPL_VALUE] = "REPL_VALUE",
        [PROTO_REPL_ACK] = "REPL_ACK",
        [PROTO_PROMOTE] = "PROMOTE",
        [PROTO_REPL_SYNCED] = "REPL_SYNCED",
    };
    if (type < 0 || type >= PROTO_TYPE_MAX || !names[type])
        return "?";
    return names[type];
}

bool proto_type_known(int type)
{
    return strcmp(proto_type_name(type), "?") != 0;
}

void proto_node_name(int id, char *buf, size_t len)
{
    if (id == PROTO_SCHEDULER_ID)
        snprintf(buf, len, "scheduler");
    else if (id >= 8 && id % 2 == 0)
        snprintf(buf, len, "server %d", (id - 8) / 2);
    else if (id >= 9 && id % 2 == 1)
        snprintf(buf, len, "worker %d", (id - 9) / 2);
    else
        snprintf(buf, len, "node %d", id);
}

/* Copy the next whitespace-delimited token of [*p, end) into tok.  False at
 * the end, and for a token that is too long or holds a NUL byte (which would
 * silently cut it short). */
static bool next_token(const char **p, const char *end, char *tok, size_t toklen)
{
    const char *s = *p;
    size_t n = 0;
    while (s < end && (*s == ' ' || *s == '\t'))
        s++;
    while (s + n < end && s[n] != ' ' && s[n] != '\t' && s[n] != '\n')
        n++;
    if (n == 0 || n >= toklen || memchr(s, '\0', n) != NULL)
        return false;
    memcpy(tok, s, n);
    tok[n] = '\0';
    *p = s + n;
    return true;
}

/* The next token of a text of "key=value" fields on one or more lines
 * (next_token, past any line ends).  False at the end, or at a token that is
 * too long or holds a NUL byte. */
static bool next_field(const char **p, const char *end, char *tok, size_t toklen)
{
    while (*p < end && **p == '\n')
        (*p)++;
    return next_token(p, end, tok, toklen);
}

static bool parse_int(const char *s, long min, long max, long *out)
{
    char *e;
    long v = strtol(s, &e, 10);
    if (e == s || *e != '\0' || v < min || v > max)
        return false;
    *out = v;
    return true;
}

static bool parse_hex64(const char *s, uint64_t *out)
{
    char *e;
    if (s[0] == '\0' || s[0] == '-' || s[0] == '+' || s[0] == ' ')
        return false;
    errno = 0;
    unsigned long long v = strtoull(s, &e, 16);
    if (*e != '\0' || errno)
        return false;
    *out = v;
    return true;
}

static bool parse_hexbytes(const char *s, uint8_t *out, size_t n)
{
    if (strlen(s) != 2 * n)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned v = 0;
        for (int k = 0; k < 2; k++) {
            char c = s[2 * i + (size_t)k];
            int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            if (d < 0)
                return false;
            v = v * 16 + (unsigned)d;
        }
        out[i] = (uint8_t)v;
    }
    return true;
}

static void fmt_hexbytes(char *out, const uint8_t *b, size_t n)
{
    static const char hx[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hx[b[i] >> 4];
        out[2 * i + 1] = hx[b[i] & 15];
    }
    out[2 * n] = '\0';
}

int proto_node_local_fmt(char *buf, size_t len, int group, int lrank, int lsize,
                         const proto_local *l, int servers)
{
    char nh[2 * PROTO_NONCE_LEN + 1];
    fmt_hexbytes(nh, l->nonce, PROTO_NONCE_LEN);
    return snprintf(buf, len, " %d %d %d %d %llx %s %d", group, lrank, lsize, l->pid,
                    (unsigned long long)l->nonce_addr, nh, servers);
}

int proto_register_local(const char *body, size_t len, proto_local *out)
{
    const char *p = body, *end = body + len;
    char tok[300];
    long v;
    int got = 0;
    memset(out, 0, sizeof *out);
    out->lrank = out->lsize = -1;
    out->agg_min = -1;
    out->cma = -1;
    while (next_field(&p, end, tok, sizeof tok)) {
        if (!strncmp(tok, "pidns=", 6) && parse_hex64(tok + 6, &out->pidns)) {
            got |= 1;
        } else if (!strncmp(tok, "pid=", 4) && parse_int(tok + 4, 1, 1L << 31, &v)) {
            out->pid = (int)v;
            got |= 2;
        } else if (!strncmp(tok, "lrank=", 6) && parse_int(tok + 6, -1, 1 << 16, &v)) {
            out->lrank = (int)v;
            got |= 4;
        } else if (!strncmp(tok, "lsize=", 6) && parse_int(tok + 6, -1, 1 << 16, &v) && v != 0) {
            out->lsize = (int)v;
            got |= 8;
        } else if (!strncmp(tok, "agg=", 4) && parse_int(tok + 4, 0, 1, &v)) {
            out->agg = (int)v;
            got |= 16;
        } else if (!strncmp(tok, "aggmin=", 7) && parse_int(tok + 7, 0, 1L << 30, &v)) {
            out->agg_min = v;
        } else if (!strcmp(tok, "aggmin=auto")) {
            out->agg_min = PROTO_AGG_MIN_AUTO;
        } else if (!strncmp(tok, "cma=", 4) && parse_int(tok + 4, 0, 1, &v)) {
            out->cma = (int)v;
        } else if (!strncmp(tok, "nonce_addr=", 11) && parse_hex64(tok + 11, &out->nonce_addr)) {
            got |= 32;
        } else if (!strncmp(tok, "nonce=", 6) &&
                   parse_hexbytes(tok + 6, out->nonce, PROTO_NONCE_LEN)) {
            got |= 64;
        }
    }
    return got == 127 ? 0 : -1;
}

int proto_register_host(const char *body, size_t len, uint64_t *pidns, int *cma)
{
    const char *p = body, *end = body + len;
    char tok[300];
    long v;
    int got = 0;
    while (next_field(&p, end, tok, sizeof tok)) {
        if (!strncmp(tok, "pidns=", 6) && parse_hex64(tok + 6, pidns)) {
            got |= 1;
        } else if (!strncmp(tok, "cma=", 4) && parse_int(tok + 4, 0, 1, &v)) {
            *cma = (int)v;
            got |= 2;
        }
    }
    return got == 3 ? 0 : -1;
}

static int parse_role(const char *s)
{
    if (!strcmp(s, "server"))
        return CFG_ROLE_SERVER;
    if (!strcmp(s, "worker"))
        return CFG_ROLE_WORKER;
    return -1;
}

int proto_parse_nodes(const char *body, size_t len, proto_node *nodes, int max, char *why,
                      size_t whylen)
{
    const char *p = body, *end = body + len;
    int n = 0;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        char tok[128];
        long id;
        if (eol == NULL)
            return err_why(why, whylen, KVS_EPROTO, "node table line %d not terminated", n + 1);
        if (n >= max)
            return err_why(why, whylen, KVS_EPROTO, "node table has more than %d entries", max);
        if (!next_token(&p, eol, tok, sizeof tok) || !parse_int(tok, 1, 1 << 20, &id))
            return err_why(why, whylen, KVS_EPROTO, "node table line %d: bad id", n + 1);
        nodes[n].id = (int)id;
        if (!next_token(&p, eol, tok, sizeof tok) || (nodes[n].role = parse_role(tok)) < 0)
            return err_why(why, whylen, KVS_EPROTO, "node table line %d: bad role", n + 1);
        if (!next_token(&p, eol, nodes[n].endpoint, sizeof nodes[n].endpoint))
            return err_why(why, whylen, KVS_EPROTO, "node table line %d: bad endpoint", n + 1);
        nodes[n].group = -1;
        nodes[n].lrank = 0;
        nodes[n].lsize = 1;
        nodes[n].pid = 0;
        nodes[n].nonce_addr = 0;
        memset(nodes[n].nonce, 0, sizeof nodes[n].nonce);
        nodes[n].servers = PROTO_SERVERS_AWAY;
        if (next_token(&p, eol, tok, sizeof tok)) {
            long g, r, l, pid;
            char a[32], nh[64];
            if (nodes[n].role != CFG_ROLE_WORKER || !parse_int(tok, 0, 1 << 20, &g) ||
                !next_token(&p, eol, tok, sizeof tok) || !parse_int(tok, 0, 1 << 16, &r) ||
                !next_token(&p, eol, tok, sizeof tok) || !parse_int(tok, 1, 1 << 16, &l) ||
                r >= l || !next_token(&p, eol, tok, sizeof tok) ||
                !parse_int(tok, 1, 1L << 31, &pid) || !next_token(&p, eol, a, sizeof a) ||
                !parse_hex64(a, &nodes[n].nonce_addr) || !next_token(&p, eol, nh, sizeof nh) ||
                !parse_hexbytes(nh, nodes[n].nonce, PROTO_NONCE_LEN))
                return err_why(why, whylen, KVS_EPROTO, "node table line %d: bad local group "
                               "fields", n + 1);
            nodes[n].group = (int)g;
            nodes[n].lrank = (int)r;
            nodes[n].lsize = (int)l;
            nodes[n].pid = (int)pid;
            if (next_token(&p, eol, tok, sizeof tok)) {
                long v;
                if (!parse_int(tok, PROTO_SERVERS_AWAY, PROTO_SERVERS_DIRECT, &v))
                    return err_why(why, whylen, KVS_EPROTO, "node table line %d: bad servers "
                                   "field", n + 1);
                nodes[n].servers = (int)v;
            }
        }
        if (next_token(&p, eol, tok, sizeof tok))
            return err_why(why, whylen, KVS_EPROTO, "node table line %d: extra fields", n + 1);
        p = eol + 1;
        n++;
    }
    return n;
}

int proto_parse_register(const char *body, size_t len, int *role, char *endpoint,
                         size_t endpoint_len, int *rank, char *host, size_t host_len,
                         char *why, size_t whylen)
{
    const char *p = body, *end = body + len;
    char tok[300];
    bool have_role = false, have_ep = false;
    *rank = -1;
    host[0] = '\0';
    endpoint[0] = '\0';
    while (next_field(&p, end, tok, sizeof tok)) {
        char *eq = strchr(tok, '=');
        long v;
        if (eq == NULL)
            return err_why(why, whylen, KVS_EPROTO, "register: token without '='");
        *eq = '\0';
        const char *val = eq + 1;
        if (!strcmp(tok, "role")) {
            if ((*role = parse_role(val)) < 0)
                return err_why(why, whylen, KVS_EPROTO, "register: bad role");
            have_role = true;
        } else if (!strcmp(tok, "endpoint")) {
            if (val[0] == '\0')
                return err_why(why, whylen, KVS_EPROTO, "register: empty endpoint");
            if (strlen(val) >= endpoint_len)
                return err_why(why, whylen, KVS_EPROTO, "register: endpoint too long");
            strcpy(endpoint, val);
            have_ep = true;
        } else if (!strcmp(tok, "rank")) {
            if (!parse_int(val, -1, 1 << 16, &v))
                return err_why(why, whylen, KVS_EPROTO, "register: bad rank");
            *rank = (int)v;
        } else if (!strcmp(tok, "host")) {
            if (strlen(val) >= host_len)
                return err_why(why, whylen, KVS_EPROTO, "register: host too long");
            strcpy(host, val);
        } /* unknown keys are ignored: newer peers may add fields */
    }
    if (p < end) {
        while (p < end && (*p == ' ' || *p == '\n' || *p == '\t'))
            p++;
        if (p < end)
            return err_why(why, whylen, KVS_EPROTO,
                        "register: a token is too long or holds a NUL byte");
    }
    if (!have_role || !have_ep)
        return err_why(why, whylen, KVS_EPROTO, "register: role and endpoint are required");
    return 0;
}

int proto_register_job_size(const char *body, size_t len, int *servers, int *workers)
{
    const char *p = body, *end = body + len;
    char tok[300];
    long v;
    int got = 0;
    while (next_field(&p, end, tok, sizeof tok)) {
        if (!strncmp(tok, "servers=", 8) && parse_int(tok + 8, 1, 1 << 16, &v)) {
            *servers = (int)v;
            got |= 1;
        } else if (!strncmp(tok, "workers=", 8) && parse_int(tok + 8, 1, 1 << 16, &v)) {
            *workers = (int)v;
            got |= 2;
        }
    }
    return got == 3 ? 0 : -1;
}

/* One left= list "a-b,c,..." into left[0..n).  False when malformed. */
static bool parse_left(const char *s, uint8_t *left, int n)
{
    while (*s) {
        char *e;
        long a, b;
        if (*s < '0' || *s > '9')
            return false;
        a = strtol(s, &e, 10);
        b = a;
        if (*e == '-') {
            s = e + 1;
            if (*s < '0' || *s > '9')
                return false;
            b = strtol(s, &e, 10);
        }
        if (a < 0 || b < a || b >= n)
            return false;
        for (long r = a; left && r <= b; r++)
            left[r] = 1;
        if (*e == ',' && e[1] != '\0')
            e++;
        else if (*e != '\0')
            return false;
        s = e;
    }
    return true;
}

int proto_parse_rejoin(const char *body, size_t len, proto_rejoin *out, uint8_t *left,
                       int nworkers, char *why, size_t whylen)
{
    const char *p = body, *end = body + len;
    char tok[300];
    long v;
    uint64_t u;
    int got = 0;
    memset(out, 0, sizeof *out);
    while (next_field(&p, end, tok, sizeof tok)) {
        if (!strncmp(tok, "rejoin=", 7)) {
            if (!parse_int(tok + 7, 8, INT32_MAX, &v)) {
                snprintf(why, whylen, "bad rejoin: '%s' is not a node id", tok);
                return -1;
            }
            out->id = (int)v;
            got |= 1;
        } else if (!strncmp(tok, "job=", 4)) {
            if (!parse_hex64(tok + 4, &out->job_id)) {
                snprintf(why, whylen, "bad rejoin: '%s' is not a job id", tok);
                return -1;
            }
            got |= 2;
        } else if (!strncmp(tok, "barriers=", 9)) {
            char *e;
            errno = 0;
            u = strtoull(tok + 9, &e, 10);
            if (tok[9] < '0' || tok[9] > '9' || *e != '\0' || errno) {
                snprintf(why, whylen, "bad rejoin: '%s' is not a count", tok);
                return -1;
            }
            out->barriers = u;
        } else if (!strncmp(tok, "left=", 5)) {
            if (!parse_left(tok + 5, left, nworkers)) {
                snprintf(why, whylen, "bad rejoin: '%s' is not a list of worker ranks "
                         "below %d", tok, nworkers);
                return -1;
            }
        }
    }
    if (got == 0)
        return 0;
    if (got != 3) {
        snprintf(why, whylen, "bad rejoin: %s missing", got & 1 ? "job=" : "rejoin=");
        return -1;
    }
    return 1;
}

int proto_rejoin_left_fmt(char *buf, size_t cap, const uint8_t *left, int n)
{
    size_t len = 0, field = 0; /* field: where the open field's list starts */
    if (cap == 0)
        return -1;
    buf[0] = '\0';
    for (int r = 0; r < n; r++) {
        if (!left[r])
            continue;
        int b = r;
        while (b + 1 < n && left[b + 1])
            b++;
        char item[32];
        int il = b > r ? snprintf(item, sizeof item, "%d-%d", r, b)
                       : snprintf(item, sizeof item, "%d", r);
        bool open = field > 0 && len - field + 1 + (size_t)il <= PROTO_LEFT_FIELD;
        int w = open ? snprintf(buf + len, cap - len, ",%s", item)
                     : snprintf(buf + len, cap - len, " left=%s", item);
        if (w < 0 || (size_t)w >= cap - len)
            return -1;
        if (!open)
            field = len + 6;
        len += (size_t)w;
        r = b;
    }
    return (int)len;
}

int proto_parse_epoch(const char *body, size_t len, uint8_t *member, int nslots, int find,
                      int *pos, char *why, size_t whylen)
{
    int n = 0;
    size_t i = 0;
    memset(member, 0, (size_t)nslots);
    if (pos)
        *pos = -1;
    if (len > PROTO_EPOCH_TEXT_MAX) {
        snprintf(why, whylen, "EPOCH body of %zu bytes (at most %u)", len, PROTO_EPOCH_TEXT_MAX);
        return -1;
    }
    while (i < len) {
        if (body[i] == ' ') {
            i++;
            continue;
        }
        long v = 0;
        size_t start = i;
        while (i < len && body[i] >= '0' && body[i] <= '9' && i - start < 7)
            v = v * 10 + (body[i++] - '0');
        if (i == start || (i < len && body[i] != ' ')) {
            snprintf(why, whylen, "EPOCH body: '%.*s' is not a slot number",
                     (int)(len - start < 20 ? len - start : 20), body + start);
            return -1;
        }
        if (v >= nslots || member[v]) {
            snprintf(why, whylen, "EPOCH body: slot %ld named twice or not below %d", v, nslots);
            return -1;
        }
        member[v] = 1;
        if (pos && v == find)
            *pos = n;
        n++;
    }
    if (n == 0) {
        snprintf(why, whylen, "EPOCH body names no member");
        return -1;
    }
    return n;
}
