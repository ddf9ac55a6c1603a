/* elastic.c - a worker's membership epochs; see elastic.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "common/log.h"
#include "worker/elastic.h"

int wrk_elastic_on_epoch(kvs_store *s, const proto_hdr *h, const char *body, size_t len,
                         char *why, size_t whylen)
{
    int slots = cfg_worker_slots(&s->c), slot = s->rank, rank = -1;
    uint8_t *m = malloc((size_t)slots);
    if (m == NULL) {
        snprintf(why, whylen, "out of memory");
        return KVS_ENOMEM;
    }
    int n = proto_parse_epoch(body ? body : "", len, m, slots, slot, &rank, why, whylen);
    free(m);
    if (n < 0)
        return KVS_EPROTO;
    if (rank < 0) {
        snprintf(why, whylen, "this worker (slot %d) is not a member of membership epoch %llu: "
                 "the job went on without it", slot, (unsigned long long)h->round);
        return KVS_EPEERDEAD;
    }
    pthread_mutex_lock(&s->mu);
    if (h->round > s->epoch_known) {
        s->epoch_known = h->round;
        s->known_rank = rank;
        s->known_num = n;
        if (!s->admitted) { /* a joiner: kvs_create returns in this epoch */
            s->epoch_seen = h->round;
            s->e_rank = rank;
            s->e_num = n;
            s->admitted = true;
        }
        pthread_cond_broadcast(&s->cv); /* a call may wait for it (seen_locked) */
    }
    pthread_mutex_unlock(&s->mu);
    LOG(LOG_INFO, s->who, "job", "membership epoch %llu: rank %d of %d workers",
        (unsigned long long)h->round, rank, n);
    return 0;
}

uint64_t wrk_elastic_op_epoch(const wrk_op *op)
{
    return op->nreqs > 0 ? PROTO_ROUND_EPOCH(op->reqs[0].h.round) : 0;
}

void wrk_elastic_seen_locked(kvs_store *s, int rc, uint64_t ep)
{
    if (rc != KVS_EMEMBERSHIP || !s->c.elastic)
        return;
    /* A server's KVS_EMEMBERSHIP means that it is in a later epoch, which
     * the scheduler announces to the workers right after the servers: wait
     * for it (or the job's end), so that the program sees the new ranks. */
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += (time_t)s->c.hb_timeout_s + 1;
    while (ep == s->epoch_seen && s->epoch_seen == s->epoch_known && s->fatal == 0 &&
           !s->stop)
        if (pthread_cond_timedwait(&s->cv, &s->mu, &dl) != 0)
            break;
    if (s->epoch_seen == s->epoch_known)
        return;
    s->epoch_seen = s->epoch_known;
    s->e_rank = s->known_rank;
    s->e_num = s->known_num;
    s->joiner = false; /* a member through a change: its inits may give values now */
    for (size_t i = 0; i < s->keys.cap; i++)
        if (s->keys.used[i] == 1)
            ((wrk_key *)s->keys.vals[i])->pushes = 0;
    LOG(LOG_INFO, s->who, "job", "now in membership epoch %llu: rank %d of %d workers",
        (unsigned long long)s->epoch_seen, s->e_rank, s->e_num);
}

int wrk_elastic_check_locked(kvs_store *s)
{
    if (!s->c.elastic || s->epoch_seen == s->epoch_known)
        return 0;
    int rc = err_set(KVS_EMEMBERSHIP, "the job's workers changed (membership epoch %llu, %d "
                     "workers): nothing was sent; agree on a step and redo it",
                     (unsigned long long)s->epoch_known, s->known_num);
    wrk_elastic_seen_locked(s, rc, 0);
    return rc;
}

uint64_t wrk_elastic_round(const kvs_store *s, uint64_t count)
{
    if (!s->c.elastic)
        return count;
    return (s->epoch_seen << PROTO_EPOCH_SHIFT) | (count & PROTO_ROUND_MASK);
}
