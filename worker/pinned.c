/* pinned.c - the pinned staging pool (see pinned.h): a list of buffers
 * with a busy flag, searched linearly (a store stages a few dozen key
 * parts at a time). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "common/err.h"
#include "worker/pinned.h"

#define PINNED_ALIGN 4096 /* capacities are whole pages */

typedef struct slot {
    void *buf;
    size_t cap;
    bool busy;
} slot;

struct wrk_pinned {
    dev_layer *L;
    pthread_mutex_t mu; /* the slots */
    slot *s;
    size_t n, cap;
    atomic_uint_fast64_t bytes, buffers;
};

wrk_pinned *wrk_pinned_new(dev_layer *L)
{
    wrk_pinned *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->L = L;
    pthread_mutex_init(&p->mu, NULL);
    return p;
}

void wrk_pinned_free(wrk_pinned *p)
{
    if (p == NULL)
        return;
    for (size_t i = 0; i < p->n; i++)
        dev_free(p->L, DEV_HOST, p->s[i].buf);
    free(p->s);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* The smallest free slot of capacity in [bytes, 2 * bytes], or -1. */
static long best_fit(const wrk_pinned *p, size_t bytes)
{
    long best = -1;
    for (size_t i = 0; i < p->n; i++) {
        const slot *s = &p->s[i];
        if (s->busy || s->cap < bytes || s->cap / 2 > bytes)
            continue;
        if (best < 0 || s->cap < p->s[best].cap)
            best = (long)i;
    }
    return best;
}

int wrk_pinned_get(wrk_pinned *p, size_t bytes, void **out)
{
    size_t cap;
    void *buf;
    int rc;
    *out = NULL;
    pthread_mutex_lock(&p->mu);
    long i = best_fit(p, bytes);
    if (i >= 0) {
        p->s[i].busy = true;
        *out = p->s[i].buf;
        pthread_mutex_unlock(&p->mu);
        return 0;
    }
    pthread_mutex_unlock(&p->mu);
    if (bytes > SIZE_MAX - PINNED_ALIGN)
        return err_set(KVS_ENOMEM, "staging buffer of %zu bytes", bytes);
    cap = (bytes + PINNED_ALIGN - 1) / PINNED_ALIGN * PINNED_ALIGN;
    if (cap == 0)
        cap = PINNED_ALIGN;
    /* pinned outside the pool's lock: puts from other threads go on */
    if ((rc = dev_alloc(p->L, DEV_HOST, cap, &buf)) != 0)
        return rc;
    pthread_mutex_lock(&p->mu);
    if (p->n == p->cap) {
        size_t ncap = p->cap ? 2 * p->cap : 16;
        slot *ns = realloc(p->s, ncap * sizeof *ns);
        if (ns == NULL) {
            pthread_mutex_unlock(&p->mu);
            dev_free(p->L, DEV_HOST, buf);
            return err_set(KVS_ENOMEM, "out of memory");
        }
        p->s = ns;
        p->cap = ncap;
    }
    p->s[p->n++] = (slot){buf, cap, true};
    pthread_mutex_unlock(&p->mu);
    atomic_fetch_add(&p->bytes, cap);
    atomic_fetch_add(&p->buffers, 1);
    *out = buf;
    return 0;
}

void wrk_pinned_put(wrk_pinned *p, void *buf)
{
    if (buf == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < p->n; i++)
        if (p->s[i].buf == buf) {
            p->s[i].busy = false;
            break;
        }
    pthread_mutex_unlock(&p->mu);
}

void wrk_pinned_size(const wrk_pinned *p, uint64_t *bytes, uint64_t *buffers)
{
    *bytes = p ? atomic_load(&p->bytes) : 0;
    *buffers = p ? atomic_load(&p->buffers) : 0;
}
