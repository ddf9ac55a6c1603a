/* pq.c - see pq.h. */
#include <stdlib.h>

#include "kvs.h"
#include "worker/pq.h"

static int before(const wrk_pq_item *x, const wrk_pq_item *y)
{
    return x->prio != y->prio ? x->prio > y->prio : x->seq < y->seq;
}

int wrk_pq_push(wrk_pq *pq, struct wrk_req *q, int prio)
{
    if (pq->n == pq->cap) {
        size_t cap = pq->cap ? 2 * pq->cap : 64;
        wrk_pq_item *a = realloc(pq->a, cap * sizeof *a);
        if (a == NULL)
            return KVS_ENOMEM;
        pq->a = a;
        pq->cap = cap;
    }
    size_t i = pq->n++;
    wrk_pq_item it = {prio, pq->seq++, q};
    while (i > 0 && before(&it, &pq->a[(i - 1) / 2])) {
        pq->a[i] = pq->a[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    pq->a[i] = it;
    return 0;
}

struct wrk_req *wrk_pq_pop(wrk_pq *pq)
{
    if (pq->n == 0)
        return NULL;
    struct wrk_req *top = pq->a[0].req;
    wrk_pq_item last = pq->a[--pq->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= pq->n)
            break;
        if (c + 1 < pq->n && before(&pq->a[c + 1], &pq->a[c]))
            c++;
        if (!before(&pq->a[c], &last))
            break;
        pq->a[i] = pq->a[c];
        i = c;
    }
    if (pq->n > 0)
        pq->a[i] = last;
    return top;
}

void wrk_pq_fini(wrk_pq *pq)
{
    free(pq->a);
    pq->a = NULL;
    pq->n = pq->cap = 0;
}
