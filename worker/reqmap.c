/* reqmap.c - see reqmap.h. */
#include <stdlib.h>
#include <string.h>

#include "kvs.h"
#include "worker/reqmap.h"

void wrk_reqmap_init(wrk_reqmap *m)
{
    memset(m, 0, sizeof *m);
}

void wrk_reqmap_fini(wrk_reqmap *m)
{
    free(m->e);
    hmap_fini(&m->old);
    memset(m, 0, sizeof *m);
}

/* Put (id, q) in its slot of e (mask); an older id already there goes to
 * the stragglers.  0 or KVS_ENOMEM (nothing changed). */
static int place(wrk_reqmap_ent *e, size_t mask, hmap *old, uint64_t id, struct wrk_req *q)
{
    wrk_reqmap_ent *x = &e[id & mask];
    if (x->id != 0) {
        uint64_t keep = x->id > id ? x->id : id;
        struct wrk_req *kq = x->id > id ? x->q : q;
        if (hmap_put(old, x->id > id ? id : x->id, x->id > id ? q : x->q) != 0)
            return KVS_ENOMEM;
        *x = (wrk_reqmap_ent){keep, kq};
        return 0;
    }
    *x = (wrk_reqmap_ent){id, q};
    return 0;
}

static int grow(wrk_reqmap *m)
{
    size_t ncap = m->cap ? 2 * m->cap : 256;
    wrk_reqmap_ent *ne = calloc(ncap, sizeof *ne);
    if (ne == NULL)
        return KVS_ENOMEM;
    for (size_t i = 0; i < m->cap; i++)
        if (m->e[i].id != 0 && place(ne, ncap - 1, &m->old, m->e[i].id, m->e[i].q) != 0) {
            /* undo: whatever reached the stragglers is still in m->e too */
            for (size_t j = 0; j < i; j++)
                if (m->e[j].id != 0)
                    hmap_del(&m->old, m->e[j].id);
            free(ne);
            return KVS_ENOMEM;
        }
    free(m->e);
    m->e = ne;
    m->cap = ncap;
    return 0;
}

int wrk_reqmap_put(wrk_reqmap *m, uint64_t id, struct wrk_req *q)
{
    /* grow while the slots are more than half full; a collision in a
     * sparser table is a straggler's (it moves aside) */
    if ((m->len + 1) * 2 > m->cap && grow(m) != 0)
        return KVS_ENOMEM;
    if (place(m->e, m->cap - 1, &m->old, id, q) != 0)
        return KVS_ENOMEM;
    m->len++;
    return 0;
}

struct wrk_req *wrk_reqmap_get(const wrk_reqmap *m, uint64_t id)
{
    if (m->cap == 0 || id == 0)
        return NULL;
    const wrk_reqmap_ent *x = &m->e[id & (m->cap - 1)];
    if (x->id == id)
        return x->q;
    return m->old.len ? hmap_get(&m->old, id) : NULL;
}

struct wrk_req *wrk_reqmap_del(wrk_reqmap *m, uint64_t id)
{
    if (m->cap == 0 || id == 0)
        return NULL;
    wrk_reqmap_ent *x = &m->e[id & (m->cap - 1)];
    struct wrk_req *q = NULL;
    if (x->id == id) {
        q = x->q;
        *x = (wrk_reqmap_ent){0, NULL};
    } else if (m->old.len) {
        q = hmap_del(&m->old, id);
    }
    if (q)
        m->len--;
    return q;
}

struct wrk_req *wrk_reqmap_next(const wrk_reqmap *m, size_t *it)
{
    for (; *it < m->cap; (*it)++)
        if (m->e[*it].id != 0)
            return m->e[(*it)++].q;
    for (; *it - m->cap < m->old.cap; (*it)++)
        if (m->old.used[*it - m->cap] == 1)
            return m->old.vals[(*it)++ - m->cap];
    return NULL;
}
