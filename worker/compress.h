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
 * In an elastic job (KVS_ELASTIC=1) a push that fails with KVS_EMEMBERSHIP
 * is redone by the program under the new epoch: its encodes are undone
 * first (wrk_codec_undo), so that the redo sends what the first try did
 * and the error it fed back is counted once.
 *
 * Threads: wrk_codec_set from a user thread before the first push (it takes
 * mu); wrk_codec_op from the user thread that builds the op (it takes the
 * codec's own lock while it touches residuals); wrk_codec_undo with the
 * store's mu held (then the codec's lock: that order only). */
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
    uint64_t nops;       /* (mu) ops encoded so far: their numbers */
} wrk_codec;

/* kvs_set_gradient_compression's work on a dist store of host arrays
 * (api.c checks that): parse, check that no push was issued, set (or, for
 * "none", clear) s->codec.  0 or KVS_EINVAL/ENOMEM with the message set. */
int wrk_codec_set(struct kvs_store *s, const char *spec);

/* kvs_compression_exempt's work: refuse a key this worker pushed already,
 * then remember every key (s->zexempt).  0 or KVS_EINVAL/ENOMEM with the
 * message set.  A user thread. */
int wrk_codec_exempt(struct kvs_store *s, size_t n, const uint64_t *keys);

/* Encode every push request of op (built, not queued) with s->codec, but
 * those of exempt keys: body, length, PROTO_F_CODEC and its zero-copy
 * count change.  Nothing to
 * do without a codec or for other op types.  0, or KVS_EINVAL (a dtype
 * other than float32) / KVS_ENOMEM with the message set. */
int wrk_codec_op(struct kvs_store *s, struct wrk_op *op);

/* op (encoded by wrk_codec_op in an elastic job) failed with
 * KVS_EMEMBERSHIP: put back the residual ranges it changed, as they were
 * before it, unless a push of a later epoch has encoded the key since, or
 * a failed op of the key encoded before it was undone already (ops of one
 * epoch undo to the oldest one's state, in any order).  Store's mu held. */
void wrk_codec_undo(struct kvs_store *s, struct wrk_op *op);

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
