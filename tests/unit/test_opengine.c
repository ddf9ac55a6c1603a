/* test_opengine.c - worker/op.c (the per-key op engine) and worker/reqmap.c
 * (requests in flight by id), without a job: a store is put together by
 * hand, its I/O thread never runs, so ops stay queued until the test fails
 * them as a broken job would. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/datapath.h"
#include "tests/unit/fakestore.h"
#include "worker/io_int.h"
#include "worker/op.h"
#include "worker/wrk_int.h"

/* ---- reqmap against a plain array ---- */

START_TEST(test_reqmap_random)
{
    enum { N = 20000 };
    static wrk_req reqs[N + 1];
    static bool in[N + 1];
    wrk_reqmap m;
    size_t live = 0;
    uint64_t next = 1, lo = 1;
    wrk_reqmap_init(&m);
    srand(7);
    for (int step = 0; step < 200000; step++) {
        int what = rand() % 10;
        if (what < 4 && next <= N) { /* send: ids in order */
            ck_assert_int_eq(wrk_reqmap_put(&m, next, &reqs[next]), 0);
            in[next++] = true;
            live++;
        } else if (what < 8 && live > 0) { /* answer: mostly the oldest */
            uint64_t id = lo + (uint64_t)(rand() % 8);
            if (id >= next)
                id = lo;
            if (in[id]) {
                ck_assert_ptr_eq(wrk_reqmap_del(&m, id), &reqs[id]);
                in[id] = false;
                live--;
            } else {
                ck_assert_ptr_null(wrk_reqmap_del(&m, id));
            }
            while (lo < next && !in[lo] && lo % 97 != 0)
                lo++; /* every 97th id is left behind as a straggler for a while */
            if (lo < next && !in[lo])
                lo++;
        } else { /* look up anything */
            uint64_t id = 1 + (uint64_t)(rand() % N);
            ck_assert_ptr_eq(wrk_reqmap_get(&m, id), in[id] ? &reqs[id] : NULL);
        }
        ck_assert_uint_eq(m.len, live);
    }
    size_t it = 0, seen = 0;
    wrk_req *q;
    while ((q = wrk_reqmap_next(&m, &it)) != NULL) {
        ck_assert(in[q - reqs]);
        seen++;
    }
    ck_assert_uint_eq(seen, live);
    for (uint64_t id = 1; id < next; id++)
        ck_assert_ptr_eq(wrk_reqmap_get(&m, id), in[id] ? &reqs[id] : NULL);
    wrk_reqmap_fini(&m);
}
END_TEST

START_TEST(test_reqmap_stragglers)
{
    /* one request never answered while 100k others come and go: memory stays
     * proportional to what is in flight, and the straggler stays findable */
    static wrk_req a, b[64];
    wrk_reqmap m;
    wrk_reqmap_init(&m);
    ck_assert_int_eq(wrk_reqmap_put(&m, 1, &a), 0);
    for (uint64_t id = 2; id < 100000; id++) {
        ck_assert_int_eq(wrk_reqmap_put(&m, id, &b[id % 64]), 0);
        if (id >= 40)
            ck_assert_ptr_eq(wrk_reqmap_del(&m, id - 38), &b[(id - 38) % 64]);
    }
    ck_assert_ptr_eq(wrk_reqmap_get(&m, 1), &a);
    ck_assert_uint_le(m.cap, 256);
    ck_assert_uint_eq(m.len, 1 + 38);
    ck_assert_ptr_eq(wrk_reqmap_del(&m, 1), &a);
    ck_assert_ptr_null(wrk_reqmap_get(&m, 1));
    ck_assert_ptr_null(wrk_reqmap_del(&m, 1));
    wrk_reqmap_fini(&m);
}
END_TEST

/* ---- the op engine on a store whose I/O thread never runs ---- */

static kvs_store *fake_store(int servers)
{
    kvs_store *s = fake_store_new(servers);
    ck_assert_ptr_nonnull(s);
    return s;
}

static void add_key(kvs_store *s, uint64_t key, uint64_t count)
{
    wrk_key *k = calloc(1, sizeof *k);
    ck_assert_ptr_nonnull(k);
    k->count = count;
    k->dtype = KVS_FLOAT32;
    ck_assert_int_eq(hmap_put(&s->keys, key, k), 0);
}

START_TEST(test_fail_queued_zero_copy)
{
    /* queued async ops with bodies lent to ZeroMQ (>= DP_ZERO_COPY_MIN) and
     * small ones, on initialised keys and on a key never initialised: when
     * the job fails before the I/O thread takes them, every op completes
     * with the error and every per-key count returns to zero */
    kvs_store *s = fake_store(2);
    enum { BIG = DP_CHUNK_BYTES_DEFAULT / 4 + 5, SMALL = 100 };
    float *big = calloc(BIG, sizeof *big), *small = calloc(SMALL, sizeof *small);
    ck_assert(big && small);
    add_key(s, 1, BIG);
    add_key(s, 2, SMALL);
    uint64_t keys[3] = {1, 2, 3};
    kvs_array vals[3] = {{big, BIG, KVS_FLOAT32, KVS_CPU},
                         {small, SMALL, KVS_FLOAT32, KVS_CPU},
                         {small, SMALL, KVS_FLOAT32, KVS_CPU}};
    ck_assert_int_eq(wrk_submit(s, WRK_OP_PUSH, 3, keys, vals, NULL, 0, NULL, NULL, NULL, NULL), 0);
    ck_assert_int_eq(wrk_submit(s, WRK_OP_PUSHPULL, 1, keys, vals, vals, 0, NULL, NULL, NULL, NULL), 0);
    ck_assert_int_eq(wrk_submit(s, WRK_OP_PUSH, 1, keys, vals, NULL, 0, NULL, NULL, NULL, NULL), 0);

    pthread_mutex_lock(&s->mu);
    ck_assert_uint_eq(s->nbusy, 3);
    wrk_key *k1 = hmap_get(&s->keys, 1), *k2 = hmap_get(&s->keys, 2);
    ck_assert_uint_eq(k1->busy, 3);
    ck_assert_uint_eq(k2->busy, 1);
    ck_assert_uint_eq(k1->pushes, 3); /* three rounds numbered */
    ck_assert_uint_eq((uintptr_t)hmap_get(&s->busy, 3), 1); /* never initialised */
    /* the big key (above the bound) is split over the 2 servers: 2 parts
     * of 2 MiB, both lent to ZeroMQ */
    ck_assert_uint_eq(s->q_head->nreqs, 2 + 1 + 1);
    ck_assert(s->q_head->reqs[0].zc && s->q_head->reqs[1].zc && !s->q_head->reqs[2].zc);
    ck_assert_int_eq(s->q_head->pending, 4 + 2);
    wrk_fail_all_locked(s, KVS_EPEERDEAD, "server 1 died");
    ck_assert_uint_eq(s->nbusy, 0);
    ck_assert_uint_eq(k1->busy, 0);
    ck_assert_uint_eq(k2->busy, 0);
    ck_assert_ptr_null(hmap_get(&s->busy, 3));
    ck_assert_ptr_null(s->q_head);
    pthread_mutex_unlock(&s->mu);

    /* the waits report it and return at once */
    ck_assert_int_eq(wrk_wait_keys(s, false, 3), KVS_EPEERDEAD);
    ck_assert_int_eq(wrk_wait_keys(s, true, 0), KVS_EPEERDEAD);
    pthread_mutex_lock(&s->mu);
    ck_assert_uint_eq(s->nfailed, 0);
    ck_assert_ptr_null(s->ops_head);
    pthread_mutex_unlock(&s->mu);
    /* and a later call is refused with it */
    ck_assert_int_eq(wrk_submit(s, WRK_OP_PUSH, 1, keys, vals, NULL, 0, NULL, NULL, NULL, NULL),
                     KVS_EPEERDEAD);
    fake_store_free(s);
    free(big);
    free(small);
}
END_TEST

START_TEST(test_drop_sent_and_unsent)
{
    /* a request dropped before it was sent releases its zero-copy frame too;
     * the op completes exactly when its last request is accounted for */
    kvs_store *s = fake_store(1);
    enum { BIG = (DP_ZERO_COPY_MIN / 4) * 2 };
    float *big = calloc(BIG, sizeof *big);
    add_key(s, 9, BIG);
    uint64_t key = 9;
    kvs_array v = {big, BIG, KVS_FLOAT32, KVS_CPU};
    ck_assert_int_eq(wrk_submit(s, WRK_OP_PUSH, 1, &key, &v, NULL, 0, NULL, NULL, NULL, NULL), 0);
    pthread_mutex_lock(&s->mu);
    wrk_op *op = s->q_head;
    s->q_head = s->q_tail = NULL; /* as the I/O thread takes it */
    ck_assert_uint_eq(op->nreqs, 1);
    ck_assert(op->reqs[0].zc);
    ck_assert_int_eq(op->pending, 2);
    pthread_mutex_unlock(&s->mu);
    wrk_req_drop(s, &op->reqs[0], KVS_ENET, "no connection to server 0"); /* frees op */
    ck_assert_int_eq(wrk_wait_keys(s, false, 9), KVS_ENET);
    pthread_mutex_lock(&s->mu);
    ck_assert_uint_eq(s->nbusy, 0);
    ck_assert_uint_eq(((wrk_key *)hmap_get(&s->keys, 9))->busy, 0);
    pthread_mutex_unlock(&s->mu);
    fake_store_free(s);
    free(big);
}
END_TEST

START_TEST(test_dedupe_orders)
{
    /* increasing, decreasing and unordered keys with repeats: requests per
     * unique key, a repeated key's values summed locally */
    kvs_store *s = fake_store(1);
    ck_assert_int_eq(red_pool_new(1, 1000000, &s->pool), 0);
    float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40};
    uint64_t up[3] = {1, 5, 9}, down[3] = {9, 5, 1}, mixed[4] = {5, 1, 5, 9};
    kvs_array v3[3] = {{a, 4, KVS_FLOAT32, KVS_CPU}, {a, 4, KVS_FLOAT32, KVS_CPU},
                       {a, 4, KVS_FLOAT32, KVS_CPU}};
    kvs_array v4[4] = {{a, 4, KVS_FLOAT32, KVS_CPU}, {a, 4, KVS_FLOAT32, KVS_CPU},
                       {b, 4, KVS_FLOAT32, KVS_CPU}, {a, 4, KVS_FLOAT32, KVS_CPU}};
    ck_assert_int_eq(wrk_submit(s, WRK_OP_PUSH, 3, up, v3, NULL, 0, NULL, NULL, NULL, NULL), 0);
    ck_assert_int_eq(wrk_submit(s, WRK_OP_PUSH, 3, down, v3, NULL, 0, NULL, NULL, NULL, NULL), 0);
    ck_assert_int_eq(wrk_submit(s, WRK_OP_PUSH, 4, mixed, v4, NULL, 0, NULL, NULL, NULL, NULL), 0);
    pthread_mutex_lock(&s->mu);
    wrk_op *o1 = s->q_head, *o2 = o1->qnext, *o3 = o2->qnext;
    ck_assert_uint_eq(o1->nkeys, 3);
    ck_assert_uint_eq(o2->nkeys, 3);
    ck_assert_uint_eq(o3->nkeys, 3);
    ck_assert_uint_eq(o3->keys[0], 5);
    ck_assert_uint_eq(o3->keys[1], 1);
    ck_assert_uint_eq(o3->keys[2], 9);
    const float *sum = (const float *)o3->reqs[0].send;
    for (int i = 0; i < 4; i++)
        ck_assert(sum[i] == a[i] + b[i]);
    ck_assert_ptr_eq(o3->reqs[1].send, (const uint8_t *)a);
    /* key 5 is in all three: three rounds on a key this worker never initialised
     * are all round 0 (the server numbers them), counted in s->busy */
    ck_assert_uint_eq((uintptr_t)hmap_get(&s->busy, 5), 3);
    wrk_fail_all_locked(s, KVS_ECLOSED, "store closed");
    ck_assert_ptr_null(hmap_get(&s->busy, 5));
    pthread_mutex_unlock(&s->mu);
    ck_assert_int_eq(wrk_wait_keys(s, true, 0), KVS_ECLOSED);
    /* a repeated key with different shapes in one call is refused */
    kvs_array bad[4] = {{a, 4, KVS_FLOAT32, KVS_CPU}, {a, 4, KVS_FLOAT32, KVS_CPU},
                        {b, 3, KVS_FLOAT32, KVS_CPU}, {a, 4, KVS_FLOAT32, KVS_CPU}};
    s->fatal = 0;
    ck_assert_int_eq(wrk_submit(s, WRK_OP_PUSH, 4, mixed, bad, NULL, 0, NULL, NULL, NULL, NULL),
                     KVS_ESHAPE);
    red_pool_free(s->pool);
    fake_store_free(s);
}
END_TEST

START_TEST(test_sched_answers_only_their_requests)
{
    /* the scheduler's BARRIER_DONE and EXIT_ACK complete a barrier or an
     * exit sent to it, never a data request in flight to a server that
     * happens to have that id (nor one of the other kind) */
    kvs_store *s = fake_store(1);
    float v[4] = {0};
    add_key(s, 9, 4);
    uint64_t key = 9;
    kvs_array a = {v, 4, KVS_FLOAT32, KVS_CPU};
    ck_assert_int_eq(wrk_submit(s, WRK_OP_PULL, 1, &key, NULL, &a, 0, NULL, NULL, NULL, NULL),
                     0);
    pthread_mutex_lock(&s->mu);
    wrk_op *op = s->q_head;
    s->q_head = s->q_tail = NULL; /* as the I/O thread takes it and sends it */
    pthread_mutex_unlock(&s->mu);
    wrk_req *pull = &op->reqs[0];
    pull->server = 0;
    pull->req_id = pull->h.req_id = 5;
    ck_assert_int_eq(wrk_reqmap_put(&s->reqs, 5, pull), 0);
    wrk_req barrier = {.server = -1, .req_id = 6, .h = {.type = PROTO_BARRIER, .req_id = 6}};
    ck_assert_int_eq(wrk_reqmap_put(&s->reqs, 6, &barrier), 0);
    proto_hdr done = {.type = PROTO_BARRIER_DONE, .sender = PROTO_SCHEDULER_ID, .req_id = 5};
    wrk_io_on_sched_msg(s, &done, NULL, 0);
    done.type = PROTO_EXIT_ACK;
    wrk_io_on_sched_msg(s, &done, NULL, 0);
    done.req_id = 6; /* an exit's answer to a barrier */
    wrk_io_on_sched_msg(s, &done, NULL, 0);
    ck_assert_ptr_eq(wrk_reqmap_get(&s->reqs, 5), pull);
    ck_assert_ptr_eq(wrk_reqmap_get(&s->reqs, 6), &barrier);
    pthread_mutex_lock(&s->mu);
    ck_assert_int_eq(op->pending, 1); /* the pull still waits for its server */
    ck_assert_uint_eq(((wrk_key *)hmap_get(&s->keys, 9))->busy, 1);
    pthread_mutex_unlock(&s->mu);
    ck_assert_ptr_eq(wrk_reqmap_del(&s->reqs, 6), &barrier);
    ck_assert_ptr_eq(wrk_reqmap_del(&s->reqs, 5), pull);
    wrk_req_drop(s, pull, KVS_ENET, "no connection to server 0"); /* frees op */
    ck_assert_int_eq(wrk_wait_keys(s, false, 9), KVS_ENET);
    fake_store_free(s);
}
END_TEST

Suite *opengine_suite(void)
{
    Suite *s = suite_create("opengine");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, test_reqmap_random);
    tcase_add_test(t, test_reqmap_stragglers);
    tcase_add_test(t, test_fail_queued_zero_copy);
    tcase_add_test(t, test_drop_sent_and_unsent);
    tcase_add_test(t, test_dedupe_orders);
    tcase_add_test(t, test_sched_answers_only_their_requests);
    suite_add_tcase(s, t);
    return s;
}
