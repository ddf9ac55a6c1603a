/* norms.c - see norms.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvs.h"
#include "server/norms.h"

void srv_norms_init(srv_norms *n) { hmap_init(&n->keys); }

void srv_norms_fini(srv_norms *n)
{
    for (size_t i = 0; i < n->keys.cap; i++)
        if (n->keys.used[i] == 1) {
            srv_norm_key *k = n->keys.vals[i];
            free(k->recs);
            free(k->waiters);
            free(k);
        }
    hmap_fini(&n->keys);
}

srv_norm_key *srv_norms_get(srv_norms *n, uint64_t key) { return hmap_get(&n->keys, key); }

int srv_norms_watch(srv_norms *n, uint64_t key)
{
    if (hmap_get(&n->keys, key))
        return 0;
    srv_norm_key *k = calloc(1, sizeof *k);
    if (k == NULL)
        return KVS_ENOMEM;
    if (hmap_put(&n->keys, key, k) != 0) {
        free(k);
        return KVS_ENOMEM;
    }
    return 0;
}

int srv_norms_add(srv_norms *n, uint64_t key, uint64_t round, uint64_t offset, uint64_t count,
                  double ws, double rs, char *why, size_t whylen)
{
    srv_norm_key *k = hmap_get(&n->keys, key);
    if (k == NULL) {
        snprintf(why, whylen, "key %llu has no split part here", (unsigned long long)key);
        return KVS_EINVAL;
    }
    if (!isfinite(ws) || !isfinite(rs) || ws < 0 || rs < 0) {
        snprintf(why, whylen, "key %llu round %llu part at %llu: sums of squares %g, %g (expected "
                 "finite numbers >= 0)", (unsigned long long)key, (unsigned long long)round,
                 (unsigned long long)offset, ws, rs);
        return KVS_EINVAL;
    }
    for (size_t i = 0; i < k->n; i++)
        if (k->recs[i].round == round && k->recs[i].offset == offset) {
            if (k->recs[i].count == count && memcmp(&k->recs[i].ws, &ws, sizeof ws) == 0 &&
                memcmp(&k->recs[i].rs, &rs, sizeof rs) == 0)
                return 1; /* sent again (a restarted scheduler): nothing changes */
            snprintf(why, whylen, "key %llu round %llu: the part at %llu came twice",
                     (unsigned long long)key, (unsigned long long)round,
                     (unsigned long long)offset);
            return KVS_EINVAL;
        }
    if (k->n == SRV_NORMS_MAX_RECS) {
        snprintf(why, whylen, "key %llu: %d norm records kept already", (unsigned long long)key,
                 SRV_NORMS_MAX_RECS);
        return KVS_EINVAL;
    }
    if (k->n == k->cap) {
        size_t cap = k->cap ? 2 * k->cap : 8;
        srv_norm_rec *r = realloc(k->recs, cap * sizeof *r);
        if (r == NULL)
            return KVS_ENOMEM;
        k->recs = r;
        k->cap = cap;
    }
    k->recs[k->n++] = (srv_norm_rec){round, offset, count, ws, rs};
    return 0;
}

int srv_norms_total(srv_norms *n, uint64_t key, uint64_t round, uint64_t total, double out[2],
                    char *why, size_t whylen)
{
    srv_norm_key *k = hmap_get(&n->keys, key);
    uint64_t covered = 0, sum = 0;
    out[0] = out[1] = 0.0;
    if (k == NULL)
        return 0;
    for (size_t i = 0; i < k->n; i++) /* (parts missing: no need to walk) */
        if (k->recs[i].round == round && (sum += k->recs[i].count) >= total)
            break;
    if (sum < total)
        return 0;
    /* walk the parts in offset order: the next one starts where the last ended */
    for (;;) {
        const srv_norm_rec *next = NULL;
        for (size_t i = 0; i < k->n; i++) {
            const srv_norm_rec *r = &k->recs[i];
            if (r->round != round || r->offset + r->count <= covered)
                continue;
            if (r->offset < covered || r->offset + r->count > total) {
                snprintf(why, whylen, "key %llu round %llu: the parts' norms overlap or pass "
                         "the key's %llu elements (a part at %llu of %llu elements)",
                         (unsigned long long)key, (unsigned long long)round,
                         (unsigned long long)total, (unsigned long long)r->offset,
                         (unsigned long long)r->count);
                return KVS_EPROTO;
            }
            if (r->offset == covered)
                next = r;
        }
        if (next == NULL)
            return covered == total ? 1 : 0;
        out[0] += next->ws;
        out[1] += next->rs;
        covered = next->offset + next->count;
    }
}

void srv_norms_drop_before(srv_norms *n, uint64_t key, uint64_t round)
{
    srv_norm_key *k = hmap_get(&n->keys, key);
    size_t j = 0;
    if (k == NULL)
        return;
    for (size_t i = 0; i < k->n; i++)
        if (k->recs[i].round >= round)
            k->recs[j++] = k->recs[i];
    k->n = j;
}

int srv_norms_wait(srv_norms *n, uint64_t key, void *e)
{
    srv_norm_key *k = hmap_get(&n->keys, key);
    if (k == NULL)
        return KVS_EINVAL;
    if (k->nwait == k->capwait) {
        size_t cap = k->capwait ? 2 * k->capwait : 4;
        void **w = realloc(k->waiters, cap * sizeof *w);
        if (w == NULL)
            return KVS_ENOMEM;
        k->waiters = w;
        k->capwait = cap;
    }
    k->waiters[k->nwait++] = e;
    return 0;
}

void srv_norms_unwait(srv_norms *n, uint64_t key, void *e)
{
    srv_norm_key *k = hmap_get(&n->keys, key);
    for (size_t i = 0; k && i < k->nwait; i++)
        if (k->waiters[i] == e) {
            k->waiters[i] = k->waiters[--k->nwait];
            return;
        }
}
