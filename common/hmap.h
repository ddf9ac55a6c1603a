/* hmap.h - open-addressing hash map from uint64_t keys to pointers.
 * Not thread-safe: one owner thread.  Values are not owned by the map. */
#ifndef KVS_COMMON_HMAP_H
#define KVS_COMMON_HMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct hmap {
    uint64_t *keys;
    void **vals;
    uint8_t *used; /* 0 empty, 1 used, 2 deleted */
    size_t cap;    /* power of two, or 0 */
    size_t len;
    size_t tombs;
} hmap;

void hmap_init(hmap *m);
void hmap_fini(hmap *m);
/* NULL if absent. */
void *hmap_get(const hmap *m, uint64_t key);
/* Insert or replace.  Returns 0 or KVS_ENOMEM. */
int hmap_put(hmap *m, uint64_t key, void *val);
/* Remove; returns the value or NULL. */
void *hmap_del(hmap *m, uint64_t key);
/* Iterate: for (size_t i = 0; i < m->cap; i++) if (m->used && m->used[i] == 1) ... */

static inline uint64_t hmap_mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

#endif
