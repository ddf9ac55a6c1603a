/* decomp.h - compression on the server: check that every worker
 * compresses a key part the same way, decode a compressed push into plain
 * float32 before the store sums it, and encode a round's sum for the
 * replies (private to server/; used by store.c and push.c).
 *
 * The first push of an entry fixes its codec (reduce/codec.h id and
 * parameter, "none" for a plain push); a later push that names another is
 * refused with KVS_EINVAL naming both, so that workers that disagree get an
 * error at their first push instead of a sum of unlike values.
 *
 * Threads: the loop thread, except srv_decomp_round (see there). */
#ifndef KVS_SERVER_DECOMP_H
#define KVS_SERVER_DECOMP_H

#include <stdbool.h>
#include <stddef.h>
#include <zmq.h>

#include "proto/proto.h"
#include "server/req.h"
#include "server/store_int.h"

/* ---- compressed replies ----
 * A dist_sync entry whose pushes named a codec with pull=1 (PROTO_F_ZPULL),
 * on a server without an optimizer (the pulled value is the round's sum):
 * when its round's sum S is final, the server encodes S + R (R: its own
 * residual of the part, zero at first) once with the pushes' codec; R keeps
 * what that body does not say, and the value becomes the body's decoding.
 * Every reply of the value by the socket carries the body (the same bytes
 * for every worker), one by direct copy (KVS_CMA) gets the decoded value:
 * both give the same floats.  Anything else that replaces the value (init,
 * a checkpoint's load, a failed round keeps the last one) leaves the replies
 * plain until the next round. */

/* Does the round that r's push completes on e get compressed replies? */
bool srv_decomp_wants(const srv_entry *e, bool updating);

/* e's round sum is final in acc (e->count float32): encode acc + e->zres
 * into e->znext (the residual keeps what was not sent) and write the body's
 * decoding into acc.  Any thread that owns e's round (its job while e is
 * busy, else the loop).  0, or KVS_ENOMEM: acc stays the sum and replies of
 * the round go plain. */
int srv_decomp_round(srv_entry *e, uint8_t *acc);

/* The round completed (err 0) or failed: znext becomes the replies' body,
 * or is dropped (the value stayed). */
void srv_decomp_completed(srv_entry *e, int err);

/* e's value was replaced by an init or a load: replies plain, residual
 * dropped (it belonged to the rounds before). */
void srv_decomp_forget(srv_entry *e);

/* The body to answer h (a request for e's value) with: NULL for the plain
 * value; else e's encoded value, and *zh is h with the codec's flags and
 * body_len (only requests whose value goes by the socket). */
srv_buf *srv_decomp_reply(const srv_entry *e, const proto_hdr *h, proto_hdr *zh);

/* A push h (body in, may be NULL) from worker wrank for e.  A plain push
 * whose codec agrees: 0 and nothing changes.  A compressed one: its body is
 * checked and decoded into *msg (initialised here; the caller closes it once
 * the push is handled, after the store moved what it keeps), *in points at
 * it, *h says PROTO_F_CODEC clear and body_len count * 4.  Errors:
 * KVS_EINVAL (the codec differs from the entry's), KVS_EPROTO (a malformed
 * body), KVS_ENOMEM; why says which. */
int srv_decomp_push(srv_entry *e, int wrank, proto_hdr *h, srv_in *in, zmq_msg_t *msg,
                    char *why, size_t whylen);

#endif
