/* test_worker.c - libkvs through its public API (kvs.h): the "local" store
 * (no network), argument checks, errors, and the configuration errors of a
 * dist store that a user can trigger before any server is involved.
 *
 * Values are small integers so every sum is exact in every dtype; half
 * types are built bit by bit by helpers here, sharing no code with reduce/.
 */
#include <arpa/inet.h>
#include <check.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "kvs.h"
#include "worker/pq.h"

#include "tests/unit/exact.h"

static kvs_array arr(void *data, uint64_t count, kvs_dtype t)
{
    kvs_array a = {data, count, t, KVS_CPU};
    return a;
}

static kvs_store *new_local(void)
{
    kvs_store *s = NULL;
    int rc = kvs_create("local", &s);
    ck_assert_msg(rc == 0, "kvs_create(local): %d %s", rc, kvs_last_error());
    ck_assert_ptr_nonnull(s);
    return s;
}

static void contains(const char *hay, const char *needle)
{
    ck_assert_msg(strstr(hay, needle) != NULL, "'%s' not in '%s'", needle, hay);
}

/* ---- creation ---- */

START_TEST(test_create_close)
{
    kvs_store *s = NULL;
    ck_assert_int_eq(kvs_create("local", &s), 0);
    ck_assert_ptr_nonnull(s);
    ck_assert_str_eq(kvs_last_error(), "");
    ck_assert_int_eq(kvs_rank(s), 0);
    ck_assert_int_eq(kvs_num_workers(s), 1);
    ck_assert_int_eq(kvs_close(s), 0);
    ck_assert_int_eq(kvs_close(NULL), 0);
}
END_TEST

START_TEST(test_create_errors)
{
    kvs_store *s = (kvs_store *)(uintptr_t)1;
    ck_assert_int_eq(kvs_create("bogus", &s), KVS_EINVAL);
    ck_assert_ptr_null(s);
    contains(kvs_last_error(), "'bogus'");

    s = (kvs_store *)(uintptr_t)1;
    ck_assert_int_eq(kvs_create("", &s), KVS_EINVAL);
    ck_assert_ptr_null(s);

    /* NCCL on simulated devices (the device suite covers the rest) */
    setenv("KVS_SIM_DEVICES", "2", 1);
    s = (kvs_store *)(uintptr_t)1;
    ck_assert_int_eq(kvs_create("nccl", &s), KVS_EDEVICE);
    ck_assert_ptr_null(s);
    contains(kvs_last_error(), "NCCL needs CUDA devices");
    unsetenv("KVS_SIM_DEVICES");

    s = (kvs_store *)(uintptr_t)1;
    ck_assert_int_eq(kvs_create(NULL, &s), KVS_EINVAL);
    ck_assert_ptr_null(s);
    ck_assert_str_ne(kvs_last_error(), "");
    ck_assert_int_eq(kvs_create("local", NULL), KVS_EINVAL);
    ck_assert_str_ne(kvs_last_error(), "");
}
END_TEST

/* A local store reads its configuration too; a bad value is an error. */
START_TEST(test_create_local_bad_env)
{
    kvs_store *s = NULL;
    setenv("MXNET_KVSTORE_BIGARRAY_BOUND", "big", 1);
    ck_assert_int_eq(kvs_create("local", &s), KVS_ECONFIG);
    ck_assert_ptr_null(s);
    contains(kvs_last_error(), "MXNET_KVSTORE_BIGARRAY_BOUND");
    contains(kvs_last_error(), "'big'");
    unsetenv("MXNET_KVSTORE_BIGARRAY_BOUND");
    setenv("MXNET_KVSTORE_REDUCTION_NTHREADS", "0", 1);
    ck_assert_int_eq(kvs_create("local", &s), KVS_ECONFIG);
    contains(kvs_last_error(), "MXNET_KVSTORE_REDUCTION_NTHREADS");
    unsetenv("MXNET_KVSTORE_REDUCTION_NTHREADS");
    /* the job variables are not needed for local */
    unsetenv("DMLC_PS_ROOT_URI");
    unsetenv("DMLC_NUM_WORKER");
    ck_assert_int_eq(kvs_create("local", &s), 0);
    kvs_close(s);
}
END_TEST

/* ---- values ---- */

enum { N = 6 };
static const int va[N] = {1, 2, 3, -4, 0, 7};
static const int vb[N] = {10, 20, -30, 40, 0, 50};
static const int vc[N] = {100, -50, 25, -6, 0, 128};

START_TEST(test_init_pull_every_dtype)
{
    kvs_store *s = new_local();
    for (int t = 0; t < KVS_NUM_DTYPES; t++) {
        uint8_t in[N * 8], out[N * 8 + 1];
        uint64_t key = 1000 + (uint64_t)t;
        fill((kvs_dtype)t, in, va, N);
        memset(out, 0xCC, sizeof out);
        kvs_array a = arr(in, N, (kvs_dtype)t), o = arr(out, N, (kvs_dtype)t);
        ck_assert_int_eq(kvs_init(s, 1, &key, &a), 0);
        ck_assert_int_eq(kvs_pull(s, 1, &key, &o, 0), 0);
        ck_assert_int_eq(kvs_wait(s, key), 0);
        ck_assert_msg(memcmp(in, out, N * dsize((kvs_dtype)t)) == 0, "dtype %d", t);
        ck_assert_int_eq(out[N * dsize((kvs_dtype)t)], 0xCC); /* nothing past the end */
    }
    /* the library copied the init values: changing the input later does
     * not change the store */
    uint64_t key = 1000;
    float in[N], out[N];
    fill(KVS_FLOAT32, in, va, N);
    in[0] = 12345.0f;
    kvs_array o = arr(out, N, KVS_FLOAT32);
    ck_assert_int_eq(kvs_pull(s, 1, &key, &o, 0), 0);
    ck_assert(out[0] == 1.0f);
    /* keys 0 and UINT64_MAX */
    uint64_t ks[2] = {0, UINT64_MAX};
    int32_t i0[1] = {-7}, i1[1] = {9}, r[2] = {0, 0};
    kvs_array ia[2] = {arr(i0, 1, KVS_INT32), arr(i1, 1, KVS_INT32)};
    kvs_array ra[2] = {arr(&r[0], 1, KVS_INT32), arr(&r[1], 1, KVS_INT32)};
    ck_assert_int_eq(kvs_init(s, 2, ks, ia), 0);
    ck_assert_int_eq(kvs_pull(s, 2, ks, ra, 0), 0);
    ck_assert_int_eq(r[0], -7);
    ck_assert_int_eq(r[1], 9);
    ck_assert_int_eq(kvs_wait_all(s), 0);
    ck_assert_int_eq(kvs_close(s), 0);
}
END_TEST

START_TEST(test_push_replaces)
{
    kvs_store *s = new_local();
    for (int t = 0; t < KVS_NUM_DTYPES; t++) {
        uint8_t a0[N * 8], a1[N * 8], a2[N * 8], out[N * 8];
        uint64_t key = 7 + (uint64_t)t;
        fill((kvs_dtype)t, a0, va, N);
        fill((kvs_dtype)t, a1, vb, N);
        fill((kvs_dtype)t, a2, vc, N);
        kvs_array x0 = arr(a0, N, (kvs_dtype)t), x1 = arr(a1, N, (kvs_dtype)t),
                  x2 = arr(a2, N, (kvs_dtype)t), o = arr(out, N, (kvs_dtype)t);
        ck_assert_int_eq(kvs_init(s, 1, &key, &x0), 0);
        ck_assert_int_eq(kvs_push(s, 1, &key, &x1, 0), 0);
        ck_assert_int_eq(kvs_wait(s, key), 0);
        ck_assert_int_eq(kvs_pull(s, 1, &key, &o, 0), 0);
        ck_assert_int_eq(kvs_wait(s, key), 0);
        ck_assert_msg(memcmp(out, a1, N * dsize((kvs_dtype)t)) == 0, "dtype %d", t);
        /* a second push replaces again (no accumulation across pushes) */
        ck_assert_int_eq(kvs_push(s, 1, &key, &x2, 0), 0);
        ck_assert_int_eq(kvs_pull(s, 1, &key, &o, 0), 0);
        ck_assert_int_eq(kvs_wait_all(s), 0);
        ck_assert_msg(memcmp(out, a2, N * dsize((kvs_dtype)t)) == 0, "dtype %d", t);
        /* re-init of an existing key with the same shape sets the value */
        ck_assert_int_eq(kvs_init(s, 1, &key, &x0), 0);
        ck_assert_int_eq(kvs_pull(s, 1, &key, &o, 0), 0);
        ck_assert_msg(memcmp(out, a0, N * dsize((kvs_dtype)t)) == 0, "dtype %d", t);
    }
    kvs_close(s);
}
END_TEST

/* A key repeated in one push is summed, exactly, in every dtype. */
START_TEST(test_push_repeated_sums)
{
    kvs_store *s = new_local();
    int sum[N], sum2[N];
    for (int i = 0; i < N; i++) {
        sum[i] = va[i] + vb[i] + vc[i];
        sum2[i] = va[i] + vb[i];
    }
    for (int t = 0; t < KVS_NUM_DTYPES; t++) {
        uint8_t a[N * 8], b[N * 8], c[N * 8], want[N * 8], out[N * 8], z[N * 8];
        uint64_t key = 50 + (uint64_t)t, other = 60 + (uint64_t)t;
        kvs_dtype dt = (kvs_dtype)t;
        fill(dt, a, va, N);
        fill(dt, b, vb, N);
        fill(dt, c, vc, N);
        memset(z, 0, sizeof z);
        kvs_array za = arr(z, N, dt);
        ck_assert_int_eq(kvs_init(s, 1, &key, &za), 0);
        ck_assert_int_eq(kvs_init(s, 1, &other, &za), 0);
        /* three copies of key around another key */
        uint64_t keys[4] = {key, other, key, key};
        kvs_array vals[4] = {arr(a, N, dt), arr(b, N, dt), arr(b, N, dt), arr(c, N, dt)};
        ck_assert_int_eq(kvs_push(s, 4, keys, vals, 0), 0);
        kvs_array o = arr(out, N, dt);
        ck_assert_int_eq(kvs_pull(s, 1, &key, &o, 0), 0);
        ck_assert_int_eq(kvs_wait_all(s), 0);
        fill(dt, want, sum, N);
        ck_assert_msg(memcmp(out, want, N * dsize(dt)) == 0, "dtype %s", kvs_dtype_name(dt));
        ck_assert_int_eq(kvs_pull(s, 1, &other, &o, 0), 0);
        ck_assert_msg(memcmp(out, b, N * dsize(dt)) == 0, "dtype %s", kvs_dtype_name(dt));
        /* two copies */
        uint64_t k2[2] = {other, other};
        kvs_array v2[2] = {arr(a, N, dt), arr(b, N, dt)};
        ck_assert_int_eq(kvs_push(s, 2, k2, v2, 0), 0);
        ck_assert_int_eq(kvs_pull(s, 1, &other, &o, 0), 0);
        fill(dt, want, sum2, N);
        ck_assert_msg(memcmp(out, want, N * dsize(dt)) == 0, "dtype %s", kvs_dtype_name(dt));
    }
    kvs_close(s);
}
END_TEST

/* Many copies of one key (more than any small fixed buffer). */
START_TEST(test_push_many_copies)
{
    enum { K = 100 };
    kvs_store *s = new_local();
    uint64_t keys[K];
    int64_t v[K], out = 0, zero = 0;
    kvs_array vals[K];
    uint64_t key = 3;
    kvs_array z = arr(&zero, 1, KVS_INT64);
    ck_assert_int_eq(kvs_init(s, 1, &key, &z), 0);
    int64_t want = 0;
    for (int i = 0; i < K; i++) {
        keys[i] = key;
        v[i] = (int64_t)i * 1000000007;
        want += v[i];
        vals[i] = arr(&v[i], 1, KVS_INT64);
    }
    ck_assert_int_eq(kvs_push(s, K, keys, vals, 0), 0);
    kvs_array o = arr(&out, 1, KVS_INT64);
    ck_assert_int_eq(kvs_pull(s, 1, &key, &o, 0), 0);
    ck_assert_int_eq(kvs_wait_all(s), 0);
    ck_assert(out == want);
    kvs_close(s);
}
END_TEST

/* Integer sums wrap as two's complement (kvs.h). */
START_TEST(test_integer_wrap)
{
    kvs_store *s = new_local();
    uint64_t k32 = 1, k64 = 2;
    int32_t a32[2] = {INT32_MAX, INT32_MIN}, b32[2] = {1, -1}, o32[2];
    int64_t a64[2] = {INT64_MAX, INT64_MIN}, b64[2] = {2, -2}, o64[2];
    kvs_array x = arr(a32, 2, KVS_INT32), y = arr(a64, 2, KVS_INT64);
    ck_assert_int_eq(kvs_init(s, 1, &k32, &x), 0);
    ck_assert_int_eq(kvs_init(s, 1, &k64, &y), 0);
    uint64_t keys[4] = {k32, k64, k32, k64};
    kvs_array vals[4] = {arr(a32, 2, KVS_INT32), arr(a64, 2, KVS_INT64), arr(b32, 2, KVS_INT32),
                         arr(b64, 2, KVS_INT64)};
    ck_assert_int_eq(kvs_push(s, 4, keys, vals, 0), 0);
    kvs_array outs[2] = {arr(o32, 2, KVS_INT32), arr(o64, 2, KVS_INT64)};
    uint64_t pk[2] = {k32, k64};
    ck_assert_int_eq(kvs_pull(s, 2, pk, outs, 0), 0);
    ck_assert_int_eq(o32[0], INT32_MIN);
    ck_assert_int_eq(o32[1], INT32_MAX);
    ck_assert(o64[0] == INT64_MIN + 1);
    ck_assert(o64[1] == INT64_MAX - 1);
    kvs_close(s);
}
END_TEST

START_TEST(test_pull_repeated)
{
    kvs_store *s = new_local();
    uint64_t k = 11, j = 12;
    float a[N], b[N], o1[N], o2[N], o3[N];
    fill(KVS_FLOAT32, a, va, N);
    fill(KVS_FLOAT32, b, vb, N);
    kvs_array ia[2] = {arr(a, N, KVS_FLOAT32), arr(b, N, KVS_FLOAT32)};
    uint64_t ik[2] = {k, j};
    ck_assert_int_eq(kvs_init(s, 2, ik, ia), 0);
    memset(o1, 0, sizeof o1);
    memset(o2, 0, sizeof o2);
    memset(o3, 0, sizeof o3);
    uint64_t keys[3] = {k, j, k};
    kvs_array outs[3] = {arr(o1, N, KVS_FLOAT32), arr(o2, N, KVS_FLOAT32),
                         arr(o3, N, KVS_FLOAT32)};
    ck_assert_int_eq(kvs_pull(s, 3, keys, outs, 0), 0);
    ck_assert_int_eq(kvs_wait(s, k), 0);
    ck_assert_int_eq(kvs_wait(s, j), 0);
    ck_assert(memcmp(o1, a, sizeof a) == 0);
    ck_assert(memcmp(o2, b, sizeof b) == 0);
    ck_assert(memcmp(o3, a, sizeof a) == 0);
    kvs_close(s);
}
END_TEST

START_TEST(test_pushpull)
{
    kvs_store *s = new_local();
    uint64_t k = 5;
    double a[N], b[N], c[N], o[N];
    fill(KVS_FLOAT64, a, va, N);
    fill(KVS_FLOAT64, b, vb, N);
    fill(KVS_FLOAT64, c, vc, N);
    kvs_array x = arr(a, N, KVS_FLOAT64);
    ck_assert_int_eq(kvs_init(s, 1, &k, &x), 0);
    uint64_t keys[2] = {k, k};
    kvs_array vals[2] = {arr(b, N, KVS_FLOAT64), arr(c, N, KVS_FLOAT64)};
    kvs_array outs[2] = {arr(o, N, KVS_FLOAT64), arr(o, N, KVS_FLOAT64)};
    ck_assert_int_eq(kvs_pushpull(s, 2, keys, vals, outs, 0), 0);
    ck_assert_int_eq(kvs_wait(s, k), 0);
    for (int i = 0; i < N; i++)
        ck_assert(o[i] == (double)(vb[i] + vc[i]));
    /* outs may alias vals */
    kvs_array in = arr(b, N, KVS_FLOAT64);
    ck_assert_int_eq(kvs_pushpull(s, 1, &k, &in, &in, 0), 0);
    ck_assert_int_eq(kvs_wait_all(s), 0);
    for (int i = 0; i < N; i++)
        ck_assert(b[i] == (double)vb[i]);
    kvs_close(s);
}
END_TEST

/* Zero-element keys are legal and may have a NULL data pointer. */
START_TEST(test_zero_count)
{
    kvs_store *s = new_local();
    uint64_t k = 99;
    kvs_array z = arr(NULL, 0, KVS_FLOAT32);
    ck_assert_int_eq(kvs_init(s, 1, &k, &z), 0);
    ck_assert_int_eq(kvs_push(s, 1, &k, &z, 0), 0);
    ck_assert_int_eq(kvs_pull(s, 1, &k, &z, 0), 0);
    ck_assert_int_eq(kvs_wait_all(s), 0);
    /* n == 0 calls are no-ops */
    ck_assert_int_eq(kvs_init(s, 0, NULL, NULL), 0);
    ck_assert_int_eq(kvs_push(s, 0, NULL, NULL, 0), 0);
    ck_assert_int_eq(kvs_pull(s, 0, NULL, NULL, 0), 0);
    /* a 0-element key is still a key with a shape */
    float one = 1;
    kvs_array x = arr(&one, 1, KVS_FLOAT32);
    ck_assert_int_eq(kvs_push(s, 1, &k, &x, 0), KVS_ESHAPE);
    kvs_close(s);
}
END_TEST

/* ---- errors ---- */

START_TEST(test_enokey)
{
    kvs_store *s = new_local();
    uint64_t k = 123456789, good = 1;
    int32_t v[3] = {1, 2, 3}, o[3] = {-1, -1, -1};
    kvs_array a = arr(v, 3, KVS_INT32), out = arr(o, 3, KVS_INT32);
    ck_assert_int_eq(kvs_pull(s, 1, &k, &out, 0), KVS_ENOKEY);
    contains(kvs_last_error(), "123456789");
    ck_assert_int_eq(o[0], -1);
    ck_assert_int_eq(kvs_push(s, 1, &k, &a, 0), KVS_ENOKEY);
    contains(kvs_last_error(), "123456789");
    ck_assert_int_eq(kvs_pushpull(s, 1, &k, &a, &out, 0), KVS_ENOKEY);
    /* one unknown key among known ones: the call fails and changes nothing */
    ck_assert_int_eq(kvs_init(s, 1, &good, &a), 0);
    int32_t v2[3] = {7, 8, 9};
    uint64_t keys[2] = {good, k};
    kvs_array vals[2] = {arr(v2, 3, KVS_INT32), arr(v2, 3, KVS_INT32)};
    ck_assert_int_eq(kvs_push(s, 2, keys, vals, 0), KVS_ENOKEY);
    ck_assert_int_eq(kvs_pull(s, 1, &good, &out, 0), 0);
    ck_assert_int_eq(o[0], 1);
    ck_assert_int_eq(o[2], 3);
    /* the failure is not reported again by a wait */
    ck_assert_int_eq(kvs_wait_all(s), 0);
    ck_assert_int_eq(kvs_wait(s, k), 0);
    kvs_close(s);
}
END_TEST

static void pull_expect_(kvs_store *s, uint64_t k, const int32_t *want, int n, int line)
{
    int32_t o[16];
    kvs_array out = arr(o, (uint64_t)n, KVS_INT32);
    ck_assert_int_eq(kvs_pull(s, 1, &k, &out, 0), 0);
    ck_assert_int_eq(kvs_wait(s, k), 0);
    for (int i = 0; i < n; i++)
        ck_assert_msg(o[i] == want[i], "line %d: key %llu elem %d is %d, want %d (unchanged)",
                      line, (unsigned long long)k, i, o[i], want[i]);
}
#define pull_expect(s, k, want, n) pull_expect_((s), (k), (want), (n), __LINE__)

START_TEST(test_eshape)
{
    kvs_store *s = new_local();
    uint64_t k = 77, k2 = 78;
    int32_t v[4] = {1, 2, 3, 4}, w[5] = {9, 9, 9, 9, 9}, o[5];
    kvs_array a = arr(v, 4, KVS_INT32);
    ck_assert_int_eq(kvs_init(s, 1, &k, &a), 0);
    ck_assert_int_eq(kvs_init(s, 1, &k2, &a), 0);

    /* push: wrong count, wrong dtype */
    kvs_array bad_n = arr(w, 5, KVS_INT32), bad_t = arr(w, 4, KVS_FLOAT32);
    kvs_array bad_t2 = arr(w, 2, KVS_INT64); /* same bytes, other shape */
    ck_assert_int_eq(kvs_push(s, 1, &k, &bad_n, 0), KVS_ESHAPE);
    contains(kvs_last_error(), "77");
    ck_assert_int_eq(kvs_push(s, 1, &k, &bad_t, 0), KVS_ESHAPE);
    ck_assert_int_eq(kvs_push(s, 1, &k, &bad_t2, 0), KVS_ESHAPE);
    pull_expect(s, k, v, 4);
    /* a good key and a bad one in one push: nothing changes */
    uint64_t keys[2] = {k2, k};
    kvs_array vals[2] = {arr(w, 4, KVS_INT32), bad_n};
    ck_assert_int_eq(kvs_push(s, 2, keys, vals, 0), KVS_ESHAPE);
    pull_expect(s, k2, v, 4);
    pull_expect(s, k, v, 4);
    /* a repeated key whose copies disagree */
    uint64_t rk[2] = {k, k};
    kvs_array rv[2] = {arr(w, 4, KVS_INT32), arr(w, 4, KVS_FLOAT32)};
    ck_assert_int_eq(kvs_push(s, 2, rk, rv, 0), KVS_ESHAPE);
    pull_expect(s, k, v, 4);

    /* pull: wrong count / dtype; the output is not written */
    for (int i = 0; i < 5; i++)
        o[i] = -1;
    kvs_array po = arr(o, 5, KVS_INT32);
    ck_assert_int_eq(kvs_pull(s, 1, &k, &po, 0), KVS_ESHAPE);
    ck_assert_int_eq(o[0], -1);
    po = arr(o, 4, KVS_FLOAT32);
    ck_assert_int_eq(kvs_pull(s, 1, &k, &po, 0), KVS_ESHAPE);
    ck_assert_int_eq(o[0], -1);
    po = arr(o, 3, KVS_INT32);
    ck_assert_int_eq(kvs_pull(s, 1, &k, &po, 0), KVS_ESHAPE);
    ck_assert_int_eq(o[0], -1);

    /* re-init with another shape */
    ck_assert_int_eq(kvs_init(s, 1, &k, &bad_n), KVS_ESHAPE);
    ck_assert_int_eq(kvs_init(s, 1, &k, &bad_t), KVS_ESHAPE);
    pull_expect(s, k, v, 4);
    ck_assert_int_eq(kvs_wait_all(s), 0);
    kvs_close(s);
}
END_TEST

/* pushpull whose output has the wrong shape: the call fails, and like every
 * failed call it must change nothing (the push part must not apply). */
START_TEST(test_eshape_pushpull)
{
    kvs_store *s = new_local();
    uint64_t k = 77;
    int32_t v[4] = {1, 2, 3, 4}, w[4] = {9, 9, 9, 9}, o[5] = {-1, -1, -1, -1, -1};
    kvs_array a = arr(v, 4, KVS_INT32);
    ck_assert_int_eq(kvs_init(s, 1, &k, &a), 0);
    kvs_array pv = arr(w, 4, KVS_INT32), pbad = arr(o, 3, KVS_INT32);
    ck_assert_int_eq(kvs_pushpull(s, 1, &k, &pv, &pbad, 0), KVS_ESHAPE);
    ck_assert_int_eq(o[0], -1);
    pbad = arr(o, 4, KVS_FLOAT32);
    ck_assert_int_eq(kvs_pushpull(s, 1, &k, &pv, &pbad, 0), KVS_ESHAPE);
    pull_expect(s, k, v, 4);
    kvs_close(s);
}
END_TEST

START_TEST(test_edevice)
{
    setenv("KVS_SIM_DEVICES", "2", 1); /* devices 0 and 1 exist */
    kvs_store *s = new_local();
    uint64_t k = 4;
    float v[2] = {1, 2}, o[2] = {0, 0};
    kvs_array a = arr(v, 2, KVS_FLOAT32);
    kvs_array g = a;
    g.device = 2;
    ck_assert_int_eq(kvs_init(s, 1, &k, &g), KVS_EDEVICE);
    contains(kvs_last_error(), "device 2");
    ck_assert_int_eq(kvs_init(s, 1, &k, &a), 0);
    ck_assert_int_eq(kvs_push(s, 1, &k, &g, 0), KVS_EDEVICE);
    g.device = 3;
    g.data = o;
    ck_assert_int_eq(kvs_pull(s, 1, &k, &g, 0), KVS_EDEVICE);
    contains(kvs_last_error(), "device 3");
    g.device = -2;
    ck_assert_int_eq(kvs_pull(s, 1, &k, &g, 0), KVS_EDEVICE);
    ck_assert_int_eq(kvs_pushpull(s, 1, &k, &a, &g, 0), KVS_EDEVICE);
    ck_assert(o[0] == 0.0f);
    kvs_array po = arr(o, 2, KVS_FLOAT32);
    ck_assert_int_eq(kvs_pull(s, 1, &k, &po, 0), 0);
    ck_assert(o[0] == 1.0f && o[1] == 2.0f);
    kvs_close(s);
}
END_TEST

START_TEST(test_bad_args)
{
    kvs_store *s = new_local();
    uint64_t k = 1;
    float v[2] = {1, 2};
    kvs_array a = arr(v, 2, KVS_FLOAT32);

    ck_assert_int_eq(kvs_init(NULL, 1, &k, &a), KVS_EINVAL);
    ck_assert_int_eq(kvs_push(NULL, 1, &k, &a, 0), KVS_EINVAL);
    ck_assert_int_eq(kvs_pull(NULL, 1, &k, &a, 0), KVS_EINVAL);
    ck_assert_int_eq(kvs_pushpull(NULL, 1, &k, &a, &a, 0), KVS_EINVAL);
    ck_assert_int_eq(kvs_wait(NULL, 1), KVS_EINVAL);
    ck_assert_int_eq(kvs_wait_all(NULL), KVS_EINVAL);
    ck_assert_int_eq(kvs_barrier(NULL), KVS_EINVAL);
    ck_assert_int_eq(kvs_rank(NULL), KVS_EINVAL);
    ck_assert_int_eq(kvs_num_workers(NULL), KVS_EINVAL);
    ck_assert_int_eq(kvs_num_servers(NULL), KVS_EINVAL);
    ck_assert_int_eq(kvs_set_optimizer(NULL, "sgd"), KVS_EINVAL);
    ck_assert_int_eq(kvs_set_optimizer(s, NULL), KVS_EINVAL);
    ck_assert_int_eq(kvs_set_optimizer_key(NULL, 1, "lr_mult=1"), KVS_EINVAL);
    ck_assert_int_eq(kvs_save(NULL, "/tmp/x"), KVS_EINVAL);
    ck_assert_int_eq(kvs_load(NULL, "/tmp/x"), KVS_EINVAL);

    ck_assert_int_eq(kvs_init(s, 1, NULL, &a), KVS_EINVAL);
    ck_assert_int_eq(kvs_init(s, 1, &k, NULL), KVS_EINVAL);
    ck_assert_int_eq(kvs_init(s, 1, &k, &a), 0);
    ck_assert_int_eq(kvs_push(s, 1, NULL, &a, 0), KVS_EINVAL);
    ck_assert_int_eq(kvs_push(s, 1, &k, NULL, 0), KVS_EINVAL);
    ck_assert_int_eq(kvs_pull(s, 1, NULL, &a, 0), KVS_EINVAL);
    ck_assert_int_eq(kvs_pull(s, 1, &k, NULL, 0), KVS_EINVAL);
    ck_assert_int_eq(kvs_pushpull(s, 1, &k, &a, NULL, 0), KVS_EINVAL);
    ck_assert_int_eq(kvs_pushpull(s, 1, &k, NULL, &a, 0), KVS_EINVAL);

    /* NULL data with elements */
    kvs_array nd = arr(NULL, 2, KVS_FLOAT32);
    ck_assert_int_eq(kvs_push(s, 1, &k, &nd, 0), KVS_EINVAL);
    contains(kvs_last_error(), "NULL");
    ck_assert_int_eq(kvs_pull(s, 1, &k, &nd, 0), KVS_EINVAL);
    ck_assert_int_eq(kvs_init(s, 1, &k, &nd), KVS_EINVAL);

    /* a dtype that is not a kvs_dtype */
    kvs_array bt = arr(v, 2, (kvs_dtype)KVS_NUM_DTYPES);
    ck_assert_int_eq(kvs_push(s, 1, &k, &bt, 0), KVS_EINVAL);
    contains(kvs_last_error(), "dtype");
    bt.dtype = (kvs_dtype)-1;
    ck_assert_int_eq(kvs_pull(s, 1, &k, &bt, 0), KVS_EINVAL);
    ck_assert_int_eq(kvs_init(s, 1, &k, &bt), KVS_EINVAL);

    /* count * dtype size overflows */
    kvs_array huge = arr(v, UINT64_MAX, KVS_FLOAT32);
    ck_assert_int_eq(kvs_push(s, 1, &k, &huge, 0), KVS_ETOOBIG);
    huge.count = (1ull << 62) + 1;
    ck_assert_int_eq(kvs_init(s, 1, &k, &huge), KVS_ETOOBIG);
    ck_assert_int_eq(kvs_pull(s, 1, &k, &huge, 0), KVS_ETOOBIG);

    /* the value survived all of that */
    float o[2] = {0, 0};
    kvs_array po = arr(o, 2, KVS_FLOAT32);
    ck_assert_int_eq(kvs_pull(s, 1, &k, &po, 0), 0);
    ck_assert(o[0] == 1.0f && o[1] == 2.0f);
    kvs_close(s);
}
END_TEST

START_TEST(test_last_error_cleared)
{
    kvs_store *s = new_local();
    uint64_t k = 5;
    float v = 1;
    kvs_array a = arr(&v, 1, KVS_FLOAT32);
    ck_assert_int_eq(kvs_pull(s, 1, &k, &a, 0), KVS_ENOKEY);
    ck_assert_str_ne(kvs_last_error(), "");
    ck_assert_int_eq(kvs_init(s, 1, &k, &a), 0);
    ck_assert_str_eq(kvs_last_error(), "");
    kvs_close(s);
}
END_TEST

START_TEST(test_misc_calls)
{
    kvs_store *s = new_local();
    ck_assert_int_eq(kvs_wait(s, 42), 0);
    ck_assert_int_eq(kvs_wait_all(s), 0);
    ck_assert_int_eq(kvs_barrier(s), 0);
    ck_assert_int_eq(kvs_barrier(s), 0);
    ck_assert_int_eq(kvs_rank(s), 0);
    ck_assert_int_eq(kvs_num_workers(s), 1);
    ck_assert_int_ge(kvs_num_servers(s), 0);
    ck_assert_int_eq(kvs_set_optimizer(s, "sgd lr=0.1"), KVS_EINVAL);
    contains(kvs_last_error(), "lr=0.1");
    ck_assert_int_eq(kvs_set_optimizer(s, "sgd learning_rate=0.1"), KVS_ENOTSUP);
    contains(kvs_last_error(), "local store");
    ck_assert_int_eq(kvs_set_optimizer_key(s, 1, "lr_mult=2"), KVS_ENOTSUP);
    ck_assert_int_eq(kvs_save(s, "/tmp/x"), KVS_ENOTSUP);
    ck_assert_int_eq(kvs_load(s, "/tmp/x"), KVS_ENOTSUP);
    ck_assert_int_eq(kvs_close(s), 0);
}
END_TEST

START_TEST(test_error_strings)
{
    int n = 0;
#define CHECK_ERR_(name, val, msg)                          \
    ck_assert_int_eq(name, val);                            \
    ck_assert_str_eq(kvs_strerror(val), msg);               \
    ck_assert_str_eq(kvs_errname(val), #name);              \
    n++;
    KVS_ERRNO_MAP(CHECK_ERR_)
#undef CHECK_ERR_
    ck_assert_int_eq(n, 19);
    ck_assert_int_eq(KVS_OK, 0);
    ck_assert_str_eq(kvs_errname(KVS_ENOKEY), "KVS_ENOKEY");
    ck_assert_str_eq(kvs_strerror(KVS_ETIMEDOUT), "timed out");
    static const int unknown[] = {1, 2, -16, -19, -23, -100, 1000, INT_MIN, INT_MAX};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        ck_assert_str_eq(kvs_strerror(unknown[i]), "unknown error");
        ck_assert_str_eq(kvs_errname(unknown[i]), "KVS_E?");
    }
}
END_TEST

START_TEST(test_dtypes)
{
    static const char *const names[] = {"float32", "float64", "float16",
                                        "bfloat16", "int32",  "int64"};
    static const size_t sizes[] = {4, 8, 2, 2, 4, 8};
    ck_assert_int_eq(KVS_FLOAT32, 0);
    ck_assert_int_eq(KVS_INT64, 5);
    for (int t = 0; t < KVS_NUM_DTYPES; t++) {
        ck_assert_uint_eq(kvs_dtype_size((kvs_dtype)t), sizes[t]);
        ck_assert_str_eq(kvs_dtype_name((kvs_dtype)t), names[t]);
    }
    ck_assert_uint_eq(kvs_dtype_size((kvs_dtype)KVS_NUM_DTYPES), 0);
    ck_assert_uint_eq(kvs_dtype_size((kvs_dtype)-1), 0);
    ck_assert_uint_eq(kvs_dtype_size((kvs_dtype)1000), 0);
    ck_assert_ptr_null(kvs_dtype_name((kvs_dtype)KVS_NUM_DTYPES));
    ck_assert_ptr_null(kvs_dtype_name((kvs_dtype)-1));
    /* the half helpers of this test, against known patterns */
    ck_assert_uint_eq(f16_of_int(1), 0x3C00);
    ck_assert_uint_eq(f16_of_int(-2), 0xC000);
    ck_assert_uint_eq(f16_of_int(3), 0x4200);
    ck_assert_uint_eq(f16_of_int(2048), 0x6800);
    ck_assert_uint_eq(f16_of_int(0), 0x0000);
    ck_assert_uint_eq(bf16_of_int(1), 0x3F80);
    ck_assert_uint_eq(bf16_of_int(-2), 0xC000);
    ck_assert_uint_eq(bf16_of_int(3), 0x4040);
    ck_assert_uint_eq(bf16_of_int(185), 0x4339);
    ck_assert_uint_eq(bf16_of_int(256), 0x4380);
    ck_assert_uint_eq(f16_of_int(-1000), 0xE3D0);
}
END_TEST

START_TEST(test_two_stores)
{
    kvs_store *s1 = new_local(), *s2 = new_local();
    uint64_t k = 8;
    int64_t a = 1, b = 2, o = 0;
    kvs_array xa = arr(&a, 1, KVS_INT64), xb = arr(&b, 1, KVS_INT64), xo = arr(&o, 1, KVS_INT64);
    ck_assert_int_eq(kvs_init(s1, 1, &k, &xa), 0);
    /* the key does not exist in the other store */
    ck_assert_int_eq(kvs_pull(s2, 1, &k, &xo, 0), KVS_ENOKEY);
    ck_assert_int_eq(kvs_init(s2, 1, &k, &xb), 0);
    ck_assert_int_eq(kvs_pull(s1, 1, &k, &xo, 0), 0);
    ck_assert(o == 1);
    ck_assert_int_eq(kvs_pull(s2, 1, &k, &xo, 0), 0);
    ck_assert(o == 2);
    /* a different shape for the same key in the other store is fine */
    uint64_t k2 = 9;
    float f[3] = {1, 2, 3};
    kvs_array xf = arr(f, 3, KVS_FLOAT32);
    ck_assert_int_eq(kvs_init(s1, 1, &k2, &xa), 0);
    ck_assert_int_eq(kvs_init(s2, 1, &k2, &xf), 0);
    ck_assert_int_eq(kvs_push(s1, 1, &k, &xb, 0), 0);
    ck_assert_int_eq(kvs_close(s1), 0);
    ck_assert_int_eq(kvs_pull(s2, 1, &k, &xo, 0), 0);
    ck_assert(o == 2);
    ck_assert_int_eq(kvs_close(s2), 0);
}
END_TEST

/* ---- threads ---- */

enum { NTHREADS = 4, TKEYS = 8, TLEN = 257, TITERS = 300 };

struct targ {
    kvs_store *s;
    int id;
    int fails;
    char what[200];
};

static void *thread_main(void *p)
{
    struct targ *t = p;
    int32_t v[TLEN], w[TLEN], o[TLEN];
    uint64_t keys[TKEYS];
    for (int i = 0; i < TKEYS; i++)
        keys[i] = 1000u * (unsigned)t->id + (unsigned)i;
    for (int it = 0; it < TITERS && t->fails == 0; it++) {
        uint64_t k = keys[it % TKEYS];
        for (int j = 0; j < TLEN; j++) {
            v[j] = t->id * 1000000 + it * 1000 + j;
            w[j] = -j;
        }
        /* one push with the key twice: v + w */
        uint64_t pk[2] = {k, k};
        kvs_array pv[2] = {arr(v, TLEN, KVS_INT32), arr(w, TLEN, KVS_INT32)};
        int rc = kvs_push(t->s, 2, pk, pv, it);
        if (rc == 0)
            rc = kvs_wait(t->s, k);
        kvs_array po = arr(o, TLEN, KVS_INT32);
        if (rc == 0)
            rc = kvs_pull(t->s, 1, &k, &po, it);
        if (rc == 0)
            rc = kvs_wait(t->s, k);
        if (rc != 0) {
            snprintf(t->what, sizeof t->what, "iter %d: rc %d %s", it, rc, kvs_last_error());
            t->fails++;
            break;
        }
        for (int j = 0; j < TLEN; j++)
            if (o[j] != t->id * 1000000 + it * 1000) {
                snprintf(t->what, sizeof t->what, "iter %d elem %d: %d", it, j, o[j]);
                t->fails++;
                break;
            }
        /* everyone also reads the shared key */
        uint64_t shared = 424242;
        int32_t so[TLEN];
        kvs_array sa = arr(so, TLEN, KVS_INT32);
        if (kvs_pull(t->s, 1, &shared, &sa, 0) != 0 || so[TLEN - 1] != TLEN - 1) {
            snprintf(t->what, sizeof t->what, "shared key, iter %d", it);
            t->fails++;
        }
    }
    return NULL;
}

START_TEST(test_threads)
{
    kvs_store *s = new_local();
    int32_t z[TLEN];
    for (int j = 0; j < TLEN; j++)
        z[j] = j;
    uint64_t shared = 424242;
    kvs_array sa = arr(z, TLEN, KVS_INT32);
    ck_assert_int_eq(kvs_init(s, 1, &shared, &sa), 0);
    for (int t = 0; t < NTHREADS; t++)
        for (int i = 0; i < TKEYS; i++) {
            uint64_t k = 1000u * (unsigned)t + (unsigned)i;
            ck_assert_int_eq(kvs_init(s, 1, &k, &sa), 0);
        }
    pthread_t th[NTHREADS];
    struct targ args[NTHREADS];
    for (int t = 0; t < NTHREADS; t++) {
        args[t] = (struct targ){s, t, 0, ""};
        ck_assert_int_eq(pthread_create(&th[t], NULL, thread_main, &args[t]), 0);
    }
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < NTHREADS; t++)
        ck_assert_msg(args[t].fails == 0, "thread %d: %s", t, args[t].what);
    /* final values: the last push of each key */
    for (int t = 0; t < NTHREADS; t++)
        for (int i = 0; i < TKEYS; i++) {
            uint64_t k = 1000u * (unsigned)t + (unsigned)i;
            int last = ((TITERS - 1 - i) / TKEYS) * TKEYS + i;
            int32_t o[TLEN];
            kvs_array po = arr(o, TLEN, KVS_INT32);
            ck_assert_int_eq(kvs_pull(s, 1, &k, &po, 0), 0);
            ck_assert_int_eq(o[0], t * 1000000 + last * 1000);
            ck_assert_int_eq(o[TLEN - 1], t * 1000000 + last * 1000);
        }
    ck_assert_int_eq(kvs_close(s), 0);
}
END_TEST

/* A big key: above BIGARRAY_BOUND the sum of a repeated key runs on the
 * reduction pool's threads; the result must be the same, element by element. */
START_TEST(test_large_key)
{
    enum { L = 100000 };
    kvs_store *s = NULL;
    setenv("MXNET_KVSTORE_BIGARRAY_BOUND", "1000", 1);
    setenv("MXNET_KVSTORE_REDUCTION_NTHREADS", "4", 1);
    ck_assert_int_eq(kvs_create("local", &s), 0);
    float *a = malloc(L * sizeof *a), *b = malloc(L * sizeof *b), *c = malloc(L * sizeof *c);
    float *o1 = malloc(L * sizeof *o1), *o2 = malloc(L * sizeof *o2);
    int64_t *ia = malloc(L * sizeof *ia), *ib = malloc(L * sizeof *ib), *io = malloc(L * 8);
    uint16_t *ha = malloc(L * 2), *hb = malloc(L * 2), *ho = malloc(L * 2);
    ck_assert(a && b && c && o1 && o2 && ia && ib && io && ha && hb && ho);
    for (int j = 0; j < L; j++) {
        a[j] = (float)j;
        b[j] = (float)(2 * j);
        c[j] = (float)(-j % 1000);
        ia[j] = (int64_t)j << 33;
        ib[j] = -(int64_t)j;
        ha[j] = f16_of_int(j % 1000);
        hb[j] = f16_of_int(-(j % 777));
    }
    uint64_t kf = 1, ki = 2, kh = 3;
    kvs_array init[3] = {arr(c, L, KVS_FLOAT32), arr(ia, L, KVS_INT64), arr(ha, L, KVS_FLOAT16)};
    uint64_t ik[3] = {kf, ki, kh};
    ck_assert_int_eq(kvs_init(s, 3, ik, init), 0);

    uint64_t keys[7] = {kf, ki, kf, kh, kf, ki, kh};
    kvs_array vals[7] = {arr(a, L, KVS_FLOAT32), arr(ia, L, KVS_INT64), arr(b, L, KVS_FLOAT32),
                         arr(ha, L, KVS_FLOAT16), arr(c, L, KVS_FLOAT32), arr(ib, L, KVS_INT64),
                         arr(hb, L, KVS_FLOAT16)};
    ck_assert_int_eq(kvs_push(s, 7, keys, vals, 0), 0);
    uint64_t pk[4] = {kf, ki, kf, kh};
    kvs_array outs[4] = {arr(o1, L, KVS_FLOAT32), arr(io, L, KVS_INT64), arr(o2, L, KVS_FLOAT32),
                         arr(ho, L, KVS_FLOAT16)};
    ck_assert_int_eq(kvs_pull(s, 4, pk, outs, 0), 0);
    ck_assert_int_eq(kvs_wait_all(s), 0);
    for (int j = 0; j < L; j++) {
        float want = (float)(3 * j + (-j % 1000));
        if (o1[j] != want || o2[j] != want)
            ck_abort_msg("float32 elem %d: %g %g, want %g", j, o1[j], o2[j], want);
        if (io[j] != ((int64_t)j << 33) - j)
            ck_abort_msg("int64 elem %d: %lld", j, (long long)io[j]);
        uint16_t hw = f16_of_int(j % 1000 - j % 777);
        if (ho[j] != hw)
            ck_abort_msg("float16 elem %d: 0x%04x, want 0x%04x", j, ho[j], hw);
    }
    ck_assert_int_eq(kvs_close(s), 0);
    free(a), free(b), free(c), free(o1), free(o2), free(ia), free(ib), free(io);
    free(ha), free(hb), free(ho);
}
END_TEST

/* ---- dist stores: configuration errors before any server ---- */

static void set_dist_env(int port)
{
    char p[16];
    snprintf(p, sizeof p, "%d", port);
    setenv("DMLC_ROLE", "worker", 1);
    setenv("DMLC_PS_ROOT_URI", "127.0.0.1", 1);
    setenv("DMLC_PS_ROOT_PORT", p, 1);
    setenv("DMLC_NUM_SERVER", "1", 1);
    setenv("DMLC_NUM_WORKER", "1", 1);
    unsetenv("DMLC_NODE_HOST");
    unsetenv("DMLC_INTERFACE");
    unsetenv("DMLC_WORKER_ID");
    setenv("KVS_START_TIMEOUT", "0.5", 1);
}

START_TEST(test_dist_bad_env)
{
    kvs_store *s = (kvs_store *)(uintptr_t)1;
    set_dist_env(9);
    setenv("DMLC_NUM_WORKER", "two", 1);
    ck_assert_int_eq(kvs_create("dist_sync", &s), KVS_ECONFIG);
    ck_assert_ptr_null(s);
    contains(kvs_last_error(), "DMLC_NUM_WORKER");
    contains(kvs_last_error(), "'two'");

    set_dist_env(9);
    unsetenv("DMLC_PS_ROOT_URI");
    ck_assert_int_eq(kvs_create("dist_sync", &s), KVS_ECONFIG);
    contains(kvs_last_error(), "DMLC_PS_ROOT_URI");

    set_dist_env(9);
    unsetenv("DMLC_PS_ROOT_PORT");
    ck_assert_int_eq(kvs_create("dist_async", &s), KVS_ECONFIG);
    contains(kvs_last_error(), "DMLC_PS_ROOT_PORT");

    set_dist_env(9);
    setenv("DMLC_ROLE", "server", 1);
    ck_assert_int_eq(kvs_create("dist_sync", &s), KVS_ECONFIG);
    ck_assert_ptr_null(s);
    contains(kvs_last_error(), "DMLC_ROLE");
    contains(kvs_last_error(), "server");

    set_dist_env(9);
    setenv("DMLC_ROLE", "scheduler", 1);
    ck_assert_int_eq(kvs_create("dist_sync", &s), KVS_ECONFIG);
    contains(kvs_last_error(), "DMLC_ROLE");

    set_dist_env(9);
    setenv("DMLC_WORKER_ID", "1", 1);
    ck_assert_int_eq(kvs_create("dist_sync", &s), KVS_ECONFIG);
    contains(kvs_last_error(), "DMLC_WORKER_ID");

    set_dist_env(9);
    setenv("DMLC_INTERFACE", "nosuchif0", 1);
    ck_assert_int_eq(kvs_create("dist_sync", &s), KVS_ECONFIG);
    contains(kvs_last_error(), "nosuchif0");
}
END_TEST

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

START_TEST(test_dist_timeout)
{
    /* a port that is bound but not listening: connections are refused, and
     * nobody else can take the port while the test runs */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    ck_assert_int_ge(fd, 0);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    set_dist_env(ntohs(sa.sin_port));

    kvs_store *s = (kvs_store *)(uintptr_t)1;
    double t0 = now_s();
    int rc = kvs_create("dist_sync", &s);
    double dt = now_s() - t0;
    ck_assert_msg(rc == KVS_ETIMEDOUT, "rc %d (%s)", rc, kvs_last_error());
    ck_assert_ptr_null(s);
    ck_assert_msg(dt >= 0.45 && dt < 2.0, "took %.2f s", dt);
    contains(kvs_last_error(), "KVS_START_TIMEOUT");
    close(fd);
}
END_TEST

/* The p3 queue: highest priority first, FIFO among equal priorities, over
 * 5000 random pushes interleaved with pops. */
START_TEST(test_priority_queue)
{
    wrk_pq pq = {0};
    enum { NPUSH = 5000 };
    static int prio[NPUSH];
    static char seen[NPUSH];
    uint64_t x = 88172645463325252ull;
    size_t pushed = 0, popped = 0;
    int last_prio = INT_MAX;
    long last_idx = -1;
    ck_assert_ptr_null(wrk_pq_pop(&pq));
    while (popped < NPUSH) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        if (pushed < NPUSH && (x % 3 != 0 || pushed == popped)) {
            prio[pushed] = (int)(x >> 40) % 7 - 3;
            ck_assert_int_eq(wrk_pq_push(&pq, (struct wrk_req *)(uintptr_t)(pushed + 1),
                                         prio[pushed]), 0);
            pushed++;
            last_prio = INT_MAX; /* a new push may outrank what came out before */
            last_idx = -1;
            continue;
        }
        size_t i = (size_t)(uintptr_t)wrk_pq_pop(&pq) - 1;
        ck_assert_uint_lt(i, pushed);
        ck_assert(!seen[i]);
        seen[i] = 1;
        popped++;
        /* nothing still queued outranks what came out, or came earlier at
         * the same priority */
        for (size_t j = 0; j < pushed; j++)   /* (one ck_assert per pair would be a
                                                 * pipe write each in fork mode) */
            if (!seen[j] && !(prio[j] < prio[i] || (prio[j] == prio[i] && j > i)))
                ck_abort_msg("queued request %zu (priority %d) outranks popped %zu "
                             "(priority %d)", j, prio[j], i, prio[i]);
        ck_assert(prio[i] <= last_prio);
        if (prio[i] == last_prio)
            ck_assert_int_gt((long)i, last_idx);
        last_prio = prio[i];
        last_idx = (long)i;
    }
    ck_assert_ptr_null(wrk_pq_pop(&pq));
    wrk_pq_fini(&pq);
}
END_TEST

Suite *worker_suite(void)
{
    Suite *s = suite_create("worker");
    TCase *t = tcase_create("worker");
    tcase_set_timeout(t, 20);
    tcase_add_test(t, test_create_close);
    tcase_add_test(t, test_priority_queue);
    tcase_add_test(t, test_create_errors);
    tcase_add_test(t, test_create_local_bad_env);
    tcase_add_test(t, test_init_pull_every_dtype);
    tcase_add_test(t, test_push_replaces);
    tcase_add_test(t, test_push_repeated_sums);
    tcase_add_test(t, test_push_many_copies);
    tcase_add_test(t, test_integer_wrap);
    tcase_add_test(t, test_pull_repeated);
    tcase_add_test(t, test_pushpull);
    tcase_add_test(t, test_zero_count);
    tcase_add_test(t, test_enokey);
    tcase_add_test(t, test_eshape);
    tcase_add_test(t, test_eshape_pushpull);
    tcase_add_test(t, test_edevice);
    tcase_add_test(t, test_bad_args);
    tcase_add_test(t, test_last_error_cleared);
    tcase_add_test(t, test_misc_calls);
    tcase_add_test(t, test_error_strings);
    tcase_add_test(t, test_dtypes);
    tcase_add_test(t, test_two_stores);
    tcase_add_test(t, test_threads);
    tcase_add_test(t, test_large_key);
    tcase_add_test(t, test_dist_bad_env);
    tcase_add_test(t, test_dist_timeout);
    suite_add_tcase(s, t);
    return s;
}
