/* local.c - the "local" store: no servers; push stores the locally summed
 * value, pull returns it.  Every call completes before it returns. */
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "worker/op.h"
#include "worker/wrk_int.h"

static int local_shape(uint64_t key, const wrk_key *k, const kvs_array *a, const char *what)
{
    return err_set(KVS_ESHAPE, "key %llu: %s has %llu %s elements but the key was initialised "
                   "with %llu %s elements", (unsigned long long)key, what,
                   (unsigned long long)a->count, kvs_dtype_name(a->dtype),
                   (unsigned long long)k->count, kvs_dtype_name(k->dtype));
}

int wrk_local_init(kvs_store *s, size_t n, const uint64_t *keys, const kvs_array *vals)
{
    int rc = 0;
    pthread_mutex_lock(&s->mu);
    /* check everything first: an error changes nothing */
    for (size_t i = 0; i < n && rc == 0; i++) {
        wrk_key *k = hmap_get(&s->keys, keys[i]);
        for (size_t j = 0; j < i && !k; j++)
            if (keys[j] == keys[i] &&
                (vals[j].count != vals[i].count || vals[j].dtype != vals[i].dtype))
                rc = err_set(KVS_ESHAPE, "key %llu appears with different counts or dtypes "
                             "in one call", (unsigned long long)keys[i]);
        if (k && (k->count != vals[i].count || k->dtype != vals[i].dtype))
            rc = local_shape(keys[i], k, &vals[i], "init");
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        wrk_key *k = hmap_get(&s->keys, keys[i]);
        size_t bytes = vals[i].count * kvs_dtype_size(vals[i].dtype);
        bool repeated = false;
        for (size_t j = 0; j < i; j++)
            repeated |= keys[j] == keys[i];
        if (repeated)
            continue; /* a key repeated in one init takes its first value */
        if (k == NULL) {
            k = calloc(1, sizeof *k);
            if (k == NULL || (k->local = malloc(bytes ? bytes : 1)) == NULL ||
                hmap_put(&s->keys, keys[i], k) != 0) {
                if (k)
                    free(k->local);
                free(k);
                rc = err_set(KVS_ENOMEM, "out of memory for key %llu",
                             (unsigned long long)keys[i]);
                break;
            }
            k->count = vals[i].count;
            k->dtype = vals[i].dtype;
        }
        if (bytes)
            memcpy(k->local, vals[i].data, bytes);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* Every keys[i] exists with the shape of arrays[i] (call with mu held). */
static int check_locked(kvs_store *s, size_t n, const uint64_t *keys, const kvs_array *arrays,
                        const char *what)
{
    for (size_t i = 0; i < n; i++) {
        wrk_key *k = hmap_get(&s->keys, keys[i]);
        if (k == NULL)
            return err_set(KVS_ENOKEY, "key %llu was never initialised",
                           (unsigned long long)keys[i]);
        if (k->count != arrays[i].count || k->dtype != arrays[i].dtype)
            return local_shape(keys[i], k, &arrays[i], what);
    }
    return 0;
}

int wrk_local_check(kvs_store *s, size_t n, const uint64_t *keys, const kvs_array *arrays,
                    const char *what)
{
    pthread_mutex_lock(&s->mu);
    int rc = check_locked(s, n, keys, arrays, what);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int wrk_local_push(kvs_store *s, size_t n, const uint64_t *keys, const kvs_array *vals)
{
    int rc = 0;
    size_t *idx = malloc((n ? n : 1) * sizeof *idx);
    bool *done = calloc(n ? n : 1, 1);
    if (idx == NULL || done == NULL) {
        free(idx);
        free(done);
        return err_set(KVS_ENOMEM, "out of memory");
    }
    pthread_mutex_lock(&s->mu);
    rc = check_locked(s, n, keys, vals, "push value"); /* an error changes nothing */
    for (size_t i = 0; i < n && rc == 0; i++) {
        size_t k = 0;
        if (done[i])
            continue;
        for (size_t j = i; j < n; j++)
            if (keys[j] == keys[i]) {
                idx[k++] = j;
                done[j] = true;
            }
        wrk_key *key = hmap_get(&s->keys, keys[i]);
        if (key->count)
            rc = wrk_sum_local(s, key->local, vals, idx, k);
    }
    pthread_mutex_unlock(&s->mu);
    free(idx);
    free(done);
    return rc;
}

int wrk_local_pull(kvs_store *s, size_t n, const uint64_t *keys, const kvs_array *outs)
{
    pthread_mutex_lock(&s->mu);
    int rc = check_locked(s, n, keys, outs, "pull output");
    for (size_t i = 0; i < n && rc == 0; i++) {
        wrk_key *k = hmap_get(&s->keys, keys[i]);
        if (k->count)
            memcpy(outs[i].data, k->local, k->count * kvs_dtype_size(k->dtype));
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void wrk_local_free(kvs_store *s)
{
    for (size_t i = 0; i < s->keys.cap; i++)
        if (s->keys.used[i] == 1)
            free(((wrk_key *)s->keys.vals[i])->local);
}
