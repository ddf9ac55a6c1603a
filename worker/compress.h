/* compress.h - gradient compression on the worker (private to worker/):
 * the store's codec (kvs_set_gradient_compression) and the residual of each
 * key, the encoding of a push's requests before they are queued, and the
 * decoding of compressed replies (the servers' round sums, pull=1).
 *
 * Each key keeps one float32 residual of its whole length; a request (a key
 * part or a chunk of one) encodes its range of it, so every part has its own
 * error feedback.  Encoded bodies live in the op (wrk_op.ztmp) until it is
 * freed; they travel in the message, never by reference.
 *
 * Threads: wrk_codec_set from a user thread before the first push (it takes
 * mu); wrk_codec_op from the user thread that builds the op (it takes the
 * codec's own lock while it touches residuals). */
#ifndef KVS_WORKER_COMPRESS_H
#define KVS_WORKER_COMPRESS_H

#include <pthread.h>

#include "common/hmap.h"
#include "proto/proto.h"
#include "reduce/codec.h"

struct kvs_store;
struct wrk_op;

typedef struct wrk_codec {
    red_codec c;
    char spec[64];       /* its canonical spec */
    pthread_mutex_t mu;  /* residuals */
    hmap res;            /* key -> wrk_residual */
} wrk_codec;

/* kvs_set_gradient_compression's work on a dist store of host arrays
 * (api.c checks that): parse, check that no push was issued, set (or, for
 * "none", clear) s->codec.  0 or KVS_EINVAL/ENOMEM with the message set. */
int wrk_codec_set(struct kvs_store *s, const char *spec);

/* Encode every push request of op (built, not queued) with s->codec:
 * body, length, PROTO_F_CODEC and its zero-copy count change.  Nothing to
 * do without a codec or for other op types.  0, or KVS_EINVAL (a dtype
 * other than float32) / KVS_ENOMEM with the message set. */
int wrk_codec_op(struct kvs_store *s, struct wrk_op *op);

/* A server's compressed reply h (body: h->body_len bytes, NULL when none)
 * to request req: check it against req and decode its count float32 values
 * into out.  Needs no codec of this store (the body names it).  0, or
 * KVS_EPROTO with why (not what was asked, wrong size, bad code).  Any
 * thread (the I/O thread). */
int wrk_codec_reply(const proto_hdr *h, const void *body, const proto_hdr *req, void *out,
                    char *why, size_t whylen);

/* Free a codec and its residuals (NULL: nothing). */
void wrk_codec_free(wrk_codec *z);

#endif
