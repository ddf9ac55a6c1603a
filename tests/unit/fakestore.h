/* fakestore.h - a store without a job, for tests of the op engine and of a
 * worker's handling of answers (tests/unit/test_opengine.c,
 * tests/fuzz/fuzz_worker.c): put together by hand, its I/O thread never
 * runs and its servers have no connections (sends to them fail), so ops
 * stay where the test puts them until it answers or fails them. */
#ifndef KVS_TESTS_UNIT_FAKESTORE_H
#define KVS_TESTS_UNIT_FAKESTORE_H

#include <stdlib.h>

#include "common/datapath.h"
#include "worker/op.h"
#include "worker/wrk_int.h"

/* A store of `servers` servers and as many workers; NULL: out of memory or
 * no event loop. */
static inline kvs_store *fake_store_new(int servers)
{
    kvs_store *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->kind = WRK_DIST;
    s->num_servers = s->num_workers = servers;
    s->routing = (wrk_routing){servers, 1000000, false, 40000, DP_CHUNK_BYTES_DEFAULT};
    s->c.max_message = 1ull << 30;
    s->servers = calloc((size_t)servers, sizeof *s->servers);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    hmap_init(&s->keys);
    hmap_init(&s->busy);
    hmap_init(&s->batches);
    wrk_reqmap_init(&s->reqs);
    if (s->servers == NULL || uv_loop_init(&s->loop) != 0) {
        free(s->servers);
        free(s);
        return NULL;
    }
    uv_async_init(&s->loop, &s->wake, NULL);
    return s;
}

/* Free s, its ops and its keys (what the test added to s->keys). */
static inline void fake_store_free(kvs_store *s)
{
    wrk_ops_free_all(s);
    for (size_t i = 0; i < s->keys.cap; i++)
        if (s->keys.used[i] == 1)
            free(s->keys.vals[i]);
    hmap_fini(&s->keys);
    hmap_fini(&s->busy);
    hmap_fini(&s->batches);
    wrk_reqmap_fini(&s->reqs);
    uv_close((uv_handle_t *)&s->wake, NULL);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    uv_loop_close(&s->loop);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->servers);
    free(s->owner);
    free(s);
}

#endif
