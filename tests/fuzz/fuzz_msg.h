/* fuzz_msg.h - turning fuzzer bytes into received messages, for the
 * in-process harnesses of the scheduler's and the server's dispatch
 * (fuzz_sched.c, fuzz_server.c).
 *
 * A harness reads its input with an fz_in cursor (reads past the end give
 * zeros, so every input is usable) and builds net_msg values exactly as
 * net.c's drain hands them to a receive callback: frames[0] the routing id,
 * then the header and the body; total counts every frame that "arrived"
 * (more than NET_MAX_FRAMES: the extra ones were dropped).
 *
 * Two ways to make a message:
 *  - raw (fz_raw_msg): every frame's length and bytes from the input;
 *  - structure-aware: the harness fills a proto_hdr (fz_hdr_fields helps
 *    with the common fields), a body, and fz_finish encodes them and then
 *    damages the result as the input says (fz_damage: a header byte, the
 *    declared body length, a truncated or missing body, an extra frame, a
 *    header of the wrong size), so that the fuzzer spends its time near
 *    valid messages.
 *
 * Threads: the harness's only.
 */
#ifndef KVS_TESTS_FUZZ_MSG_H
#define KVS_TESTS_FUZZ_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "net/net.h"
#include "proto/proto.h"

/* Largest body a structure-aware message carries (data bodies and texts
 * are cut here; a header may still declare more). */
#define FZ_BODY_MAX 4096

typedef struct fz_in {
    const uint8_t *p;
    size_t n, at;
} fz_in;

static inline int fz_more(const fz_in *in)
{
    return in->at < in->n;
}
uint8_t fz_u8(fz_in *in);
uint16_t fz_u16(fz_in *in);
uint32_t fz_u32(fz_in *in);
uint64_t fz_u64(fz_in *in);
/* Copy up to len input bytes to out; zeros where the input ends. */
void fz_bytes(fz_in *in, void *out, size_t len);

/* Append a frame of len bytes (copied) to m (started with net_msg_init,
 * closed with net_msg_close as net.c does after the callback); past the
 * frame limit only counted, as net.c's receive path does. */
void fz_msg_add(net_msg *m, const void *data, size_t len);

/* A raw message: a control byte (frame count, header size), then each
 * frame's length and bytes.  ident/ident_len: the routing id to use unless
 * the input brings its own. */
void fz_raw_msg(fz_in *in, net_msg *m, const void *ident, size_t ident_len);

/* The fields every header has, from the input: key (mostly 0..7), dtype,
 * count / offset / total / part (mostly a whole small key or one of two
 * parts), round (mostly 0..15), req_id, priority, status, flags (ASYNC,
 * TRACE; CMA is the caller's).  Type and sender are the caller's. */
void fz_hdr_fields(fz_in *in, proto_hdr *h);

/* A data body for h (count elements of dtype, at most FZ_BODY_MAX bytes):
 * small integers in the dtype (sums stay exact), input bytes, or zeros.
 * Returns the bytes written to body; sets h->body_len to the bytes the
 * header claims (count * size, which may be more). */
size_t fz_data_body(fz_in *in, proto_hdr *h, uint8_t *body);

/* A text body: one of the n choices, or input bytes.  Returns its length. */
size_t fz_text_body(fz_in *in, const char *const *choices, size_t n, uint8_t *body);

/* Encode h with body (blen bytes; h->body_len is written as it is) into m:
 * ident, header, body when blen > 0 or h->body_len > 0, then damage it as
 * the next input byte says (below 0xA0: leave it valid; 0xA0-0xBF: valid,
 * the body split into several frames; 0xC0 and up: damaged). */
void fz_finish(fz_in *in, net_msg *m, const void *ident, size_t ident_len, const proto_hdr *h,
               const uint8_t *body, size_t blen);

#endif
