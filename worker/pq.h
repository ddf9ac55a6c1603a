/* pq.h - a binary heap of requests: highest priority first, then the order
 * they were added (FIFO among equals).  Not thread-safe: one owner. */
#ifndef KVS_WORKER_PQ_H
#define KVS_WORKER_PQ_H

#include <stddef.h>
#include <stdint.h>

struct wrk_req;

typedef struct wrk_pq_item {
    int prio;
    uint64_t seq;
    struct wrk_req *req;
} wrk_pq_item;

typedef struct wrk_pq {
    wrk_pq_item *a;
    size_t n, cap;
    uint64_t seq;
} wrk_pq;

/* Add q with priority prio.  0, or KVS_ENOMEM (nothing added). */
int wrk_pq_push(wrk_pq *pq, struct wrk_req *q, int prio);
/* The first request (NULL when empty), removed. */
struct wrk_req *wrk_pq_pop(wrk_pq *pq);
void wrk_pq_fini(wrk_pq *pq);

#endif
