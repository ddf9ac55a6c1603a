/* reqmap.h - the requests in flight, by request id (private to worker/).
 *
 * Request ids are handed out in sequence (1, 2, 3, ...) and most requests
 * are answered roughly in the order they were sent.  So the map keeps id i
 * at slot i mod capacity: the ids in flight sit in consecutive slots, a
 * lookup touches one slot and never probes, where a general hash map
 * spreads them over the table (a cache miss per lookup with 100k requests
 * in flight).  A new id whose slot still holds a live, much older id (a
 * straggler) moves that one to a small hash map on the side, so memory
 * stays proportional to the requests in flight.  Not thread-safe: the I/O
 * thread owns it. */
#ifndef KVS_WORKER_REQMAP_H
#define KVS_WORKER_REQMAP_H

#include <stddef.h>
#include <stdint.h>

#include "common/hmap.h"

struct wrk_req;

typedef struct wrk_reqmap_ent {
    uint64_t id; /* 0: empty */
    struct wrk_req *q;
} wrk_reqmap_ent;

typedef struct wrk_reqmap {
    wrk_reqmap_ent *e;
    size_t cap;  /* power of two, or 0 */
    size_t len;  /* requests in the map (slots and stragglers) */
    hmap old;    /* stragglers: id -> request */
} wrk_reqmap;

void wrk_reqmap_init(wrk_reqmap *m);
void wrk_reqmap_fini(wrk_reqmap *m);
/* Add id (> 0, not in the map) -> q.  0, or KVS_ENOMEM (nothing added). */
int wrk_reqmap_put(wrk_reqmap *m, uint64_t id, struct wrk_req *q);
/* The request of id, or NULL. */
struct wrk_req *wrk_reqmap_get(const wrk_reqmap *m, uint64_t id);
/* Remove id; returns its request or NULL. */
struct wrk_req *wrk_reqmap_del(wrk_reqmap *m, uint64_t id);
/* Iterate: size_t it = 0; wrk_req *q; while ((q = wrk_reqmap_next(m, &it))) ...
 * (the map must not change meanwhile). */
struct wrk_req *wrk_reqmap_next(const wrk_reqmap *m, size_t *it);

#endif
