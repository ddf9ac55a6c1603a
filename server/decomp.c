/* decomp.c - compression on the server: see decomp.h. */
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "reduce/codec.h"
#include "server/decomp.h"

/* The body of in (len bytes) in one piece: its own, or joined into *tmp
 * (freed by the caller).  NULL when out of memory. */
static const uint8_t *one_piece(const srv_in *in, uint64_t len, uint8_t **tmp)
{
    *tmp = NULL;
    if (in->data || !in->frames || in->nframes <= 1)
        return in->data ? in->data : in->frames ? zmq_msg_data(&in->frames[0]) : NULL;
    if ((*tmp = malloc(len ? len : 1)) == NULL)
        return NULL;
    uint64_t off = 0;
    for (int i = 0; i < in->nframes && off < len; i++) {
        size_t n = zmq_msg_size(&in->frames[i]);
        if (n > len - off)
            n = len - off;
        memcpy(*tmp + off, zmq_msg_data(&in->frames[i]), n);
        off += n;
    }
    return *tmp;
}

static void spec_of(int id, float param, bool pull, char *buf, size_t len)
{
    red_codec c = {id, param, pull};
    red_codec_spec(&c, buf, len);
}

bool srv_decomp_wants(const srv_entry *e, bool updating)
{
    return !updating && !e->async && e->codec_set && e->codec != 0 && e->codec_pull;
}

int srv_decomp_round(srv_entry *e, uint8_t *acc)
{
    red_codec c = {e->codec, e->codec_param, 1};
    uint64_t len = red_codec_bytes(&c, e->count);
    float *scratch = NULL;
    srv_buf_unref(e->znext);
    e->znext = NULL;
    if (red_codec_has_residual(&c) && e->zres == NULL &&
        (e->count > SIZE_MAX / sizeof(float) ||
         (e->zres = calloc(e->count ? e->count : 1, sizeof(float))) == NULL))
        return KVS_ENOMEM;
    srv_buf *b = srv_buf_new(len);
    /* acc becomes what the workers will decode, written in the encoding pass */
    if (b == NULL || (c.id == RED_CODEC_TOPK && (scratch = malloc(e->count * 4 + 4)) == NULL) ||
        red_codec_encode_decoded(&c, (const float *)(const void *)acc, e->zres, e->count,
                                 b->data, scratch, (float *)(void *)acc) != 0) {
        free(scratch);
        srv_buf_unref(b);
        return KVS_ENOMEM;
    }
    free(scratch);
    e->znext = b;
    e->znext_len = len;
    return 0;
}

void srv_decomp_completed(srv_entry *e, int err)
{
    if (err == 0) {
        srv_buf_unref(e->zbody);
        e->zbody = e->znext;
        e->zlen = e->znext_len;
    } else {
        srv_buf_unref(e->znext);
    }
    e->znext = NULL;
}

void srv_decomp_forget(srv_entry *e)
{
    srv_buf_unref(e->zbody);
    srv_buf_unref(e->znext);
    e->zbody = e->znext = NULL;
    free(e->zres);
    e->zres = NULL;
}

srv_buf *srv_decomp_reply(const srv_entry *e, const proto_hdr *h, proto_hdr *zh)
{
    if (e->zbody == NULL || (h->type != PROTO_PULL && h->type != PROTO_PUSHPULL) ||
        (h->flags & (PROTO_F_CMA | PROTO_F_RSP)) || h->count != e->count)
        return NULL;
    *zh = *h;
    zh->flags = (uint16_t)((h->flags & ~(unsigned)PROTO_F_CODEC) | (unsigned)e->codec << PROTO_CODEC_SHIFT);
    zh->body_len = e->zlen;
    return e->zbody;
}

int srv_decomp_push(srv_entry *e, int wrank, proto_hdr *h, srv_in *in, zmq_msg_t *msg,
                    char *why, size_t whylen)
{
    int id = (int)PROTO_CODEC(h->flags);
    bool pull = (h->flags & PROTO_F_ZPULL) != 0;
    float param = 0;
    uint8_t *tmp = NULL;
    int rc = 0;
    bool have_msg = false;

    if (id != 0) {
        if (in == NULL) { /* nothing to decode, and nothing to give the sum */
            rc = err_why(why, whylen, KVS_EPROTO, "key %llu part %u: compressed push without "
                         "a body", (unsigned long long)h->key, h->part);
            goto out;
        }
        const uint8_t *body = one_piece(in, h->body_len, &tmp);
        if (body == NULL && h->body_len > 0) {
            rc = err_why(why, whylen, KVS_ENOMEM, "server out of memory");
            goto out;
        }
        if (zmq_msg_init_size(msg, h->count * sizeof(float)) != 0) {
            rc = err_why(why, whylen, KVS_ENOMEM, "server out of memory");
            goto out;
        }
        have_msg = true;
        char inner[200];
        rc = red_codec_decode(id, body, h->body_len, zmq_msg_data(msg), h->count, &param,
                              inner, sizeof inner);
        if (rc) {
            rc = err_why(why, whylen, rc, "key %llu part %u: %s", (unsigned long long)h->key,
                         h->part, inner);
            goto out;
        }
    }
    if (!e->codec_set) {
        e->codec_set = true;
        e->codec = (uint8_t)id;
        e->codec_param = param;
        e->codec_wrank = wrank;
        e->codec_pull = pull;
    } else if (e->codec != id || memcmp(&e->codec_param, &param, sizeof param) != 0 ||
               e->codec_pull != pull) {
        char mine[64], first[64];
        spec_of(id, param, pull, mine, sizeof mine);
        spec_of(e->codec, e->codec_param, e->codec_pull, first, sizeof first);
        rc = err_why(why, whylen, KVS_EINVAL, "key %llu: this worker's gradient compression "
                     "is '%s' but worker %d pushed with '%s': every worker must set the same "
                     "(kvs_set_gradient_compression) before its first push",
                     (unsigned long long)h->key, mine, e->codec_wrank, first);
        goto out;
    }
    if (id != 0) {
        h->flags = (uint16_t)(h->flags & ~(unsigned)(PROTO_F_CODEC | PROTO_F_ZPULL));
        h->body_len = h->count * sizeof(float);
        *in = (srv_in){zmq_msg_data(msg), msg, 1};
    }
out:
    if (rc && have_msg)
        zmq_msg_close(msg);
    free(tmp);
    return rc;
}
