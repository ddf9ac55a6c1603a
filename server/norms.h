/* norms.h - the norm exchange of lamb on keys split over servers (or P3
 * slices): per key and round, the sums of squares (sum(w^2), sum(r^2)) of
 * every part, this server's own and those the other servers sent
 * (PROTO_NORM_PART, relayed by the scheduler).  A part's update waits until
 * the records of its round cover the whole key; the whole key's sums are
 * the parts' sums added in offset order, so every server holding a part
 * computes the same bits.  See docs/design.md (server updates).
 *
 * Only keys watched (a split part of them lives here) keep records; the
 * records of rounds before the one a part completes are dropped then (every
 * part of a key completes round R before any completes R + 1, so at most
 * two rounds are kept).
 *
 * Threads: the server's loop thread only.
 */
#ifndef KVS_SERVER_NORMS_H
#define KVS_SERVER_NORMS_H

#include <stddef.h>
#include <stdint.h>

#include "common/hmap.h"

#define SRV_NORMS_MAX_RECS 65536 /* records kept per key (two rounds of every part) */

typedef struct srv_norm_rec {
    uint64_t round, offset, count;
    double ws, rs;
} srv_norm_rec;

typedef struct srv_norm_key {
    srv_norm_rec *recs;
    size_t n, cap;
    void **waiters; /* the store's entries waiting for this key's sums */
    size_t nwait, capwait;
} srv_norm_key;

typedef struct srv_norms {
    hmap keys; /* key -> srv_norm_key* */
} srv_norms;

void srv_norms_init(srv_norms *n);
void srv_norms_fini(srv_norms *n);

/* Keep records of key from now on.  0 or KVS_ENOMEM. */
int srv_norms_watch(srv_norms *n, uint64_t key);
/* The key's records and waiters, NULL if not watched. */
srv_norm_key *srv_norms_get(srv_norms *n, uint64_t key);

/* Record part [offset, +count) of key's round.  0; 1 when that part is
 * recorded already with the same sums (a part sent again: nothing changes);
 * KVS_EINVAL with why (key not watched, the part recorded for the round with
 * other sums, too many records, sums negative or not finite); KVS_ENOMEM. */
int srv_norms_add(srv_norms *n, uint64_t key, uint64_t round, uint64_t offset, uint64_t count,
                  double ws, double rs, char *why, size_t whylen);

/* The whole key's sums of round (total elements): 1 with out set, when the
 * records cover [0, total) exactly; 0 while parts are missing; KVS_EPROTO
 * with why when records overlap or pass total. */
int srv_norms_total(srv_norms *n, uint64_t key, uint64_t round, uint64_t total, double out[2],
                    char *why, size_t whylen);

/* Drop key's records of rounds before round. */
void srv_norms_drop_before(srv_norms *n, uint64_t key, uint64_t round);

/* An entry e waits for key's sums (0 or KVS_ENOMEM); it no longer does. */
int srv_norms_wait(srv_norms *n, uint64_t key, void *e);
void srv_norms_unwait(srv_norms *n, uint64_t key, void *e);

#endif
