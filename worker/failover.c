/* failover.c - libkvs with replicated servers: owners of key ranges and
 * re-sends after a server's death (failover.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "worker/failover.h"
#include "worker/io_int.h"
#include "worker/op.h"

int wrk_fo_init(kvs_store *s)
{
    if (s->c.replicas == 0 || s->owner)
        return 0;
    s->owner = calloc((size_t)s->num_servers, sizeof *s->owner);
    if (s->owner == NULL)
        return KVS_ENOMEM;
    for (int r = 0; r < s->num_servers; r++)
        s->owner[r] = r;
    return 0;
}

void wrk_fo_free(kvs_store *s)
{
    free(s->owner);
    s->owner = NULL;
}

/* Does server r own a range in owner (n entries)? */
static bool owns_any(const int *owner, int n, int r)
{
    for (int k = 0; k < n; k++)
        if (owner[k] == r)
            return true;
    return false;
}

bool wrk_fo_survives(const kvs_store *s, int r)
{
    (void)r;
    return s->owner != NULL;
}

/* "owners=O0,O1,..." into owner (num_servers entries); -1: malformed. */
static int parse_owners(const kvs_store *s, const char *body, size_t len, int *owner)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf - 1 ? len : sizeof buf - 1),
             body ? body : "");
    if (strncmp(buf, "owners=", 7) != 0)
        return -1;
    const char *p = buf + 7;
    for (int i = 0; i < s->num_servers; i++) {
        char *end;
        long v = strtol(p, &end, 10);
        bool last = i == s->num_servers - 1;
        if (end == p || v < 0 || v >= s->num_servers || (!last && *end != ',') ||
            (last && *end != '\0'))
            return -1;
        owner[i] = (int)v;
        p = end + 1;
    }
    return 0;
}

/* q leaves again, alone, for the server that owns its range now: out of
 * the request map, and (before the dead server's socket closes and gives
 * back the frame it lent) one more release counted for its new frame. */
static void resend_prepare(kvs_store *s, wrk_req *q)
{
    wrk_reqmap_del(&s->reqs, q->req_id);
    if (q->batch) { /* its FUSED message is gone with the dead server */
        hmap_del(&s->batches, q->batch);
        q->batch = 0;
    }
    q->fref = false;
    q->fframe = false;
    q->cma_out = false;
    if (q->zc) {
        pthread_mutex_lock(&s->mu);
        q->op->pending++;
        pthread_mutex_unlock(&s->mu);
    }
}

void wrk_fo_promote(kvs_store *s, const proto_hdr *h, const char *body, size_t len)
{
    int dead = (int)((h->key - 8) / 2), heir = (int)((h->round - 8) / 2);
    int *owner = s->owner ? calloc((size_t)s->num_servers, sizeof *owner) : NULL;
    if (owner == NULL || h->key < 8 || h->key % 2 || dead >= s->num_servers || h->round < 8 ||
        h->round % 2 || heir >= s->num_servers || parse_owners(s, body, len, owner) != 0 ||
        owns_any(owner, s->num_servers, dead)) {
        free(owner);
        wrk_io_fail_all(s, KVS_EPROTO, "the scheduler sent a malformed PROMOTE");
        return;
    }
    memcpy(s->owner, owner, (size_t)s->num_servers * sizeof *owner);
    free(owner);
    pthread_mutex_lock(&s->mu);
    s->dead_servers++; /* kvs_num_dead_node counts it */
    pthread_mutex_unlock(&s->mu);
    LOG(LOG_WARN, s->who, "job", "server %d died; server %d owns its keys now: re-sending "
        "what it did not answer", dead, heir);
    /* what waited to be fused for it leaves for its heir */
    if (s->fuse && s->fuse[dead].n > 0) {
        wrk_fuse f = s->fuse[dead];
        s->fuse[dead] = (wrk_fuse){0};
        for (size_t i = 0; i < f.n; i++)
            wrk_io_dispatch(s, f.reqs[i]);
        free(f.reqs);
    }
    /* what is in flight to it is sent again */
    size_t n = 0, cap = 64, it = 0;
    wrk_req **again = malloc(cap * sizeof *again), *q;
    while (again && (q = wrk_reqmap_next(&s->reqs, &it)) != NULL) {
        if (q->server != dead || q->op == NULL)
            continue;
        if (n == cap) {
            wrk_req **na = realloc(again, 2 * cap * sizeof *na);
            if (na == NULL)
                break;
            again = na;
            cap *= 2;
        }
        again[n++] = q;
    }
    if (again == NULL) {
        wrk_io_fail_all(s, KVS_ENOMEM, "out of memory re-sending to a promoted server");
        return;
    }
    for (size_t i = 0; i < n; i++)
        resend_prepare(s, again[i]);
    if (s->servers && s->servers[dead]) { /* drops what it queued; lent frames come back */
        if (s->mons)
            net_mon_free(s->mons[dead]), s->mons[dead] = NULL;
        net_sock_free(s->servers[dead]);
        s->servers[dead] = NULL;
    }
    for (size_t i = 0; i < n; i++)
        wrk_io_send(s, again[i]);
    free(again);
    LOG(LOG_INFO, s->who, "job", "re-sent %zu requests to server %d", n, heir);
}
