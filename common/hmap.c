/* hmap.c - see hmap.h (linear probing, tombstones, grow at 1/2 load; a deleted
 * slot with an empty successor becomes empty, with the tombstones before it). */
#include <stdlib.h>
#include <string.h>

#include "hmap.h"
#include "kvs.h"

void hmap_init(hmap *m)
{
    memset(m, 0, sizeof *m);
}

void hmap_fini(hmap *m)
{
    free(m->keys);
    free(m->vals);
    free(m->used);
    memset(m, 0, sizeof *m);
}

static size_t find(const hmap *m, uint64_t key, int *found)
{
    size_t mask = m->cap - 1, i = hmap_mix(key) & mask, tomb = (size_t)-1;
    for (;;) {
        if (m->used[i] == 0) {
            *found = 0;
            return tomb != (size_t)-1 ? tomb : i;
        }
        if (m->used[i] == 1 && m->keys[i] == key) {
            *found = 1;
            return i;
        }
        if (m->used[i] == 2 && tomb == (size_t)-1)
            tomb = i;
        i = (i + 1) & mask;
    }
}

void *hmap_get(const hmap *m, uint64_t key)
{
    int found;
    if (m->cap == 0)
        return NULL;
    size_t i = find(m, key, &found);
    return found ? m->vals[i] : NULL;
}

static int grow(hmap *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 16;
    if (m->len * 4 < m->cap) /* mostly tombstones: rehash at the same size */
        ncap = m->cap;
    hmap n = {calloc(ncap, 8), calloc(ncap, sizeof(void *)), calloc(ncap, 1), ncap, 0, 0};
    if (!n.keys || !n.vals || !n.used) {
        hmap_fini(&n);
        return KVS_ENOMEM;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (m->used[i] == 1) {
            int found;
            size_t j = find(&n, m->keys[i], &found);
            n.keys[j] = m->keys[i];
            n.vals[j] = m->vals[i];
            n.used[j] = 1;
            n.len++;
        }
    }
    hmap_fini(m);
    *m = n;
    return 0;
}

int hmap_put(hmap *m, uint64_t key, void *val)
{
    int found;
    if ((m->len + m->tombs + 1) * 2 > m->cap) {
        int rc = grow(m);
        if (rc)
            return rc;
    }
    size_t i = find(m, key, &found);
    if (!found) {
        if (m->used[i] == 2)
            m->tombs--;
        m->len++;
        m->used[i] = 1;
        m->keys[i] = key;
    }
    m->vals[i] = val;
    return 0;
}

void *hmap_del(hmap *m, uint64_t key)
{
    int found;
    if (m->cap == 0)
        return NULL;
    size_t i = find(m, key, &found);
    if (!found)
        return NULL;
    void *v = m->vals[i];
    size_t mask = m->cap - 1;
    m->len--;
    if (m->used[(i + 1) & mask] == 0) {
        /* no probe goes on past i: free it, and the tombstones right before
         * it, so that maps that churn (requests in flight) keep short probes */
        m->used[i] = 0;
        for (size_t j = (i - 1) & mask; m->used[j] == 2; j = (j - 1) & mask) {
            m->used[j] = 0;
            m->tombs--;
        }
    } else {
        m->used[i] = 2;
        m->tombs++;
    }
    return v;
}
