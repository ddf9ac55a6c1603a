/* test_cudafake.c - device/cuda.c's own code on a stand-in CUDA runtime
 * (tests/device/fakecuda.c): the caller's current context and device are
 * the same after every call of the layer (a thread that set GPU 1, and a
 * thread that never used CUDA); only the devices that calls name get a
 * context, and peer access only between those; KVS_DEVICES selects,
 * renumbers and repeats devices and rejects ordinals that do not exist;
 * every CUDA call runs with the device of its pointers current; copies
 * (host, local, peer, staged) and sums move the right bytes; shared
 * buffers are exported, opened once per handle on the device that copies,
 * copied with cudaMemcpyDefault and closed at dev_close.  The store
 * matrix of test_device.c also runs on this runtime (store_*_fake). */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/dev.h"
#include "kvs.h"
#include "tests/unit/fakecuda.h"

static fake F;

/* The thread's context is still want (and its device wdev; -1: a thread
 * that had no context, whose runtime device is not restored) */
#define KEPT(want, wdev)                                                                 \
    do {                                                                                 \
        int d_ = -7;                                                                     \
        ck_assert_ptr_eq(fake_current(&F), (want));                                      \
        F.GetDevice(&d_);                                                                \
        if ((wdev) >= 0)                                                                 \
            ck_assert_int_eq(d_, (wdev));                                                \
    } while (0)

static dev_layer *open_fake(bool p2p, int nsel, const int *sel)
{
    dev_opts o = {.p2p = p2p, .cuda_plugin = F.path, .ndevices = nsel, .devices = sel};
    dev_layer *L = NULL;
    int rc = dev_open(&o, &L);
    ck_assert_msg(rc == 0, "dev_open: %s", kvs_last_error());
    ck_assert_str_eq(dev_backend(L), "cuda");
    return L;
}

static void fill(float *h, size_t n, float base)
{
    for (size_t i = 0; i < n; i++)
        h[i] = base + (float)i;
}

/* copies and a sum between devices a and b of L, checked; every call
 * leaves the thread on ctx / dev */
static void exercise(dev_layer *L, int a, int b, void *ctx, int dev)
{
    enum { N = 1000 };
    float *h, *h2, *x, *y, *z;
    ck_assert_int_eq(dev_alloc(L, a, N * 4, (void **)&x), 0);
    KEPT(ctx, dev);
    ck_assert_int_eq(dev_alloc(L, DEV_HOST, N * 4, (void **)&h), 0);
    KEPT(ctx, dev);
    ck_assert_int_eq(dev_alloc(L, DEV_HOST, N * 4, (void **)&h2), 0);
    ck_assert_int_eq(dev_alloc(L, b, N * 4, (void **)&y), 0);
    ck_assert_int_eq(dev_alloc(L, b, N * 4, (void **)&z), 0);
    ck_assert_int_eq(F.owner(x), dev_ordinal(L, a));
    ck_assert_int_eq(F.owner(y), dev_ordinal(L, b));
    ck_assert_int_eq(F.owner(h), -1);
    fill(h, N, 1);
    ck_assert_int_eq(dev_copy(L, a, x, DEV_HOST, h, N * 4), 0); /* H2D */
    KEPT(ctx, dev);
    ck_assert_int_eq(dev_copy(L, b, y, a, x, N * 4), 0); /* peer or staged */
    KEPT(ctx, dev);
    ck_assert_int_eq(dev_copy(L, b, z, b, y, N * 4), 0); /* local */
    const void *two[2] = {y, z};
    ck_assert_int_eq(dev_sum(L, b, KVS_FLOAT32, y, two, 2, N), 0);
    KEPT(ctx, dev);
    ck_assert_int_eq(dev_zero(L, a, x, N * 4), 0);
    KEPT(ctx, dev);
    ck_assert_int_eq(dev_copy(L, DEV_HOST, h2, b, y, N * 4), 0); /* D2H */
    ck_assert_int_eq(dev_copy(L, DEV_HOST, h, a, x, N * 4), 0);
    ck_assert_int_eq(dev_sync(L, -1), 0);
    KEPT(ctx, dev);
    ck_assert_int_eq(dev_sync(L, b), 0);
    KEPT(ctx, dev);
    size_t wrong = 0; /* (one assertion: check reports each one through a pipe) */
    for (size_t i = 0; i < N; i++)
        wrong += h2[i] != 2 * (1 + (float)i) || h[i] != 0;
    ck_assert_uint_eq(wrong, 0);
    dev_free(L, a, x);
    dev_free(L, b, y);
    dev_free(L, b, z);
    KEPT(ctx, dev);
    dev_free(L, DEV_HOST, h);
    dev_free(L, DEV_HOST, h2);
    KEPT(ctx, dev);
}

START_TEST(fake_keeps_current_device)
{
    /* the application works on GPU 1; the library uses GPUs 2 and 3 */
    fake_use(&F, 4);
    ck_assert_int_eq(F.SetDevice(1), 0);
    void *mine = F.ctx(1);
    dev_layer *L = open_fake(true, 0, NULL);
    KEPT(mine, 1);
    ck_assert_int_eq(dev_count(L), 4);
    ck_assert_uint_eq(F.contexts(), 1u << 1); /* opening creates nothing */
    exercise(L, 2, 3, mine, 1);
    kvs_device_stats st;
    dev_stats(L, &st);
    ck_assert_uint_eq(st.peer_copies, 1);
    ck_assert_uint_eq(st.staged_copies, 0);
    ck_assert_uint_eq(st.h2d_copies, 1);
    ck_assert_uint_eq(st.d2h_copies, 2);
    ck_assert_uint_eq(st.sums, 1);
    /* contexts on the named devices only; peer access between them only */
    ck_assert_uint_eq(F.contexts(), (1u << 1) | (1u << 2) | (1u << 3));
    ck_assert_uint_eq(F.peers(2), 1u << 3);
    ck_assert_uint_eq(F.peers(3), 1u << 2);
    ck_assert_uint_eq(F.peers(0) | F.peers(1), 0);
    ck_assert(dev_opened(L, 2) && dev_opened(L, 3) && !dev_opened(L, 0) && !dev_opened(L, 1));
    fake_none_misplaced(&F);
    dev_close(L);
    KEPT(mine, 1);
    ck_assert_uint_eq(F.contexts(), (1u << 1) | (1u << 2) | (1u << 3));
}
END_TEST

START_TEST(fake_fresh_thread_one_context)
{
    /* a thread that never used CUDA (the one-process-per-GPU layout):
     * one context, on the GPU named; the thread is left without one */
    fake_use(&F, 8);
    dev_layer *L = open_fake(true, 0, NULL);
    exercise(L, 5, 5, NULL, -1);
    ck_assert_uint_eq(F.contexts(), 1u << 5);
    ck_assert_uint_eq(F.peers(5), 0);
    fake_none_misplaced(&F);
    dev_close(L);
    KEPT(NULL, -1);
    ck_assert_uint_eq(F.contexts(), 1u << 5);
}
END_TEST

START_TEST(fake_staged_copies)
{
    /* P2P off: device to device through the pinned bounce buffers, in
     * several chunks; the event pair guards them */
    fake_use(&F, 2);
    ck_assert_int_eq(F.SetDevice(0), 0);
    dev_layer *L = open_fake(false, 0, NULL);
    size_t bytes = 2 * DEV_STAGE_CHUNK + 4 * 777;
    unsigned char *h, *a, *b;
    ck_assert_int_eq(dev_alloc(L, DEV_HOST, bytes, (void **)&h), 0);
    ck_assert_int_eq(dev_alloc(L, 0, bytes, (void **)&a), 0);
    ck_assert_int_eq(dev_alloc(L, 1, bytes, (void **)&b), 0);
    for (size_t i = 0; i < bytes; i++)
        h[i] = (unsigned char)(i * 13 + 5);
    ck_assert_int_eq(dev_copy(L, 0, a, DEV_HOST, h, bytes), 0);
    ck_assert_int_eq(dev_copy(L, 1, b, 0, a, bytes), 0);
    memset(h, 0, bytes);
    ck_assert_int_eq(dev_copy(L, DEV_HOST, h, 1, b, bytes), 0);
    ck_assert_int_eq(dev_sync(L, -1), 0);
    size_t wrong = 0;
    for (size_t i = 0; i < bytes; i++)
        wrong += h[i] != (unsigned char)(i * 13 + 5);
    ck_assert_uint_eq(wrong, 0);
    kvs_device_stats st;
    dev_stats(L, &st);
    ck_assert_uint_eq(st.staged_copies, 1);
    ck_assert_uint_eq(st.staged_bytes, bytes);
    ck_assert_uint_eq(st.peer_copies, 0);
    ck_assert_uint_eq(F.peers(0) | F.peers(1), 0);
    fake_none_misplaced(&F);
    KEPT(F.ctx(0), 0);
    dev_free(L, 0, a);
    dev_free(L, 1, b);
    dev_free(L, DEV_HOST, h);
    dev_close(L);
    KEPT(F.ctx(0), 0);
}
END_TEST

START_TEST(fake_shared_memory)
{
    enum { N = 777 };
    fake_use(&F, 3);
    dev_layer *L = open_fake(false, 0, NULL);
    float *a, *b, *h, *peer, *again;
    dev_ipc id;
    ck_assert(dev_ipc_ok(L));
    ck_assert_int_eq(dev_alloc_shared(L, 1, N * 4, (void **)&a), 0);
    ck_assert_int_eq(F.owner(a), 1);
    ck_assert_int_eq(dev_alloc(L, 2, N * 4, (void **)&b), 0);
    ck_assert_int_eq(dev_alloc(L, DEV_HOST, N * 4, (void **)&h), 0);
    fill(h, N, 5);
    ck_assert_int_eq(dev_copy(L, 1, a, DEV_HOST, h, N * 4), 0);
    ck_assert_int_eq(dev_ipc_export(L, 1, a, &id), 0);
    /* (the fake maps "another process's" buffer within this one) */
    ck_assert_int_eq(dev_ipc_open(L, 2, 4242, &id, N * 4, (void **)&peer), 0);
    ck_assert_int_eq(dev_ipc_open(L, 2, 4242, &id, N * 4, (void **)&again), 0);
    ck_assert_ptr_eq(peer, again);
    ck_assert_int_eq(F.ipc_open(), 1);
    ck_assert_int_eq(dev_ipc_copy(L, 2, b, peer, N * 4), 0);
    memset(h, 0, N * 4);
    ck_assert_int_eq(dev_copy(L, DEV_HOST, h, 2, b, N * 4), 0);
    ck_assert_int_eq(dev_sync(L, -1), 0);
    for (int i = 0; i < N; i++)
        ck_assert_float_eq(h[i], 5.0f + (float)i);
    ck_assert_int_eq(dev_ipc_export(L, 2, b + 1, &id), KVS_EDEVICE); /* not a start */
    ck_assert_ptr_nonnull(strstr(kvs_last_error(), "cudaIpcGetMemHandle"));
    kvs_device_stats st;
    dev_stats(L, &st);
    ck_assert_uint_eq(st.ipc_copies, 1);
    ck_assert_uint_eq(st.ipc_bytes, N * 4);
    fake_none_misplaced(&F);
    dev_free(L, 1, a);
    dev_free(L, 2, b);
    dev_free(L, DEV_HOST, h);
    dev_close(L);
    ck_assert_int_eq(F.ipc_open(), 0);
}
END_TEST

START_TEST(fake_selected_devices)
{
    fake_use(&F, 4);
    /* KVS_DEVICES=3,1: kvsd device 0 is GPU 3, 1 is GPU 1 */
    int sel[2] = {3, 1};
    dev_layer *L = open_fake(true, 2, sel);
    ck_assert_int_eq(dev_count(L), 2);
    ck_assert_int_eq(dev_ordinal(L, 0), 3);
    ck_assert_int_eq(dev_ordinal(L, 1), 1);
    exercise(L, 0, 1, NULL, -1);
    ck_assert_uint_eq(F.contexts(), (1u << 3) | (1u << 1));
    ck_assert_uint_eq(F.peers(3), 1u << 1);
    ck_assert_uint_eq(F.peers(1), 1u << 3);
    void *p;
    ck_assert_int_eq(dev_alloc(L, 2, 4, &p), KVS_EDEVICE);
    ck_assert_ptr_nonnull(strstr(kvs_last_error(), "device 2 does not exist"));
    fake_none_misplaced(&F);
    dev_close(L);
}
END_TEST

START_TEST(fake_repeated_device)
{
    /* KVS_DEVICES=2,2: two kvsd devices on one GPU; copies between them
     * take the peer path (cudaMemcpyPeerAsync within GPU 2) */
    fake_use(&F, 4);
    int sel[2] = {2, 2};
    dev_layer *L = open_fake(true, 2, sel);
    exercise(L, 0, 1, NULL, -1);
    kvs_device_stats st;
    dev_stats(L, &st);
    ck_assert_uint_eq(st.peer_copies, 1);
    ck_assert_uint_eq(F.contexts(), 1u << 2);
    ck_assert_uint_eq(F.peers(2), 0); /* nothing to enable within one GPU */
    fake_none_misplaced(&F);
    dev_close(L);
}
END_TEST

START_TEST(fake_bad_selection)
{
    fake_use(&F, 4);
    int sel[3] = {0, 5, 1};
    dev_opts o = {.p2p = true, .cuda_plugin = F.path, .ndevices = 3, .devices = sel};
    dev_layer *L = NULL;
    ck_assert_int_eq(dev_open(&o, &L), KVS_ECONFIG);
    ck_assert_ptr_null(L);
    ck_assert_str_eq(kvs_last_error(), "KVS_DEVICES='0,5,1': device 5 does not exist: the CUDA "
                                       "runtime sees 4 devices (0..3)");
    ck_assert_uint_eq(F.contexts(), 0);
}
END_TEST

START_TEST(fake_no_gpu)
{
    /* a runtime that sees no GPU: a clear error, no context */
    fake_use(&F, 0);
    dev_opts o = {.p2p = true, .cuda_plugin = F.path};
    dev_layer *L = NULL;
    ck_assert_int_eq(dev_open(&o, &L), KVS_EDEVICE);
    ck_assert_ptr_nonnull(strstr(kvs_last_error(), "finds no GPU"));
}
END_TEST

/* Push and pull through a store on GPUs 2 and 3 of 4, from a thread that
 * works on GPU 0 (store type in _i: device, local); with a pinned pool the
 * local store's host staging is allocated in the first round only. */
START_TEST(fake_store_named_devices)
{
    static const char *const types[] = {"device", "local"};
    enum { N = 3000, ROUNDS = 4 };
    fake_use(&F, 4);
    setenv("MXNET_ENABLE_GPU_P2P", "1", 1);
    unsetenv("MXNET_KVSTORE_USETREE");
    kvs_store *s = NULL;
    ck_assert_int_eq(F.SetDevice(0), 0);
    void *mine = F.ctx(0);
    ck_assert_msg(kvs_create(types[_i], &s) == 0, "%s", kvs_last_error());
    float *h = malloc(N * 4), *d[2], *o[2];
    for (int j = 0; j < 2; j++) {
        ck_assert_int_eq(F.SetDevice(2 + j), 0);
        ck_assert_int_eq(F.Malloc((void **)&d[j], N * 4), 0);
        ck_assert_int_eq(F.Malloc((void **)&o[j], N * 4), 0);
    }
    ck_assert_int_eq(F.SetDevice(0), 0);
    uint64_t keys[2] = {7, 7};
    long pinned_after_first = 0, frees = 0;
    for (int r = 0; r < ROUNDS; r++) {
        for (int j = 0; j < 2; j++) {
            fill(h, N, (float)(r * 10 + j));
            memcpy(d[j], h, N * 4); /* fake device memory is host memory */
        }
        kvs_array v[2] = {{d[0], N, KVS_FLOAT32, 2}, {d[1], N, KVS_FLOAT32, 3}};
        kvs_array out[2] = {{o[0], N, KVS_FLOAT32, 2}, {o[1], N, KVS_FLOAT32, 3}};
        if (r == 0) {
            ck_assert_msg(kvs_init(s, 1, keys, v) == 0, "%s", kvs_last_error());
            KEPT(mine, 0);
        }
        ck_assert_msg(kvs_pushpull(s, 2, keys, v, out, 0) == 0, "%s", kvs_last_error());
        ck_assert_int_eq(kvs_wait_all(s), 0);
        KEPT(mine, 0);
        size_t wrong = 0;
        for (int j = 0; j < 2; j++)
            for (size_t i = 0; i < N; i++)
                wrong += o[j][i] != (float)(r * 10) + (float)(r * 10 + 1) + 2 * (float)i;
        ck_assert_uint_eq(wrong, 0);
        if (r == 0)
            F.pinned(&pinned_after_first, &frees);
    }
    long pinned, freed;
    F.pinned(&pinned, &freed);
    ck_assert_msg(pinned == pinned_after_first, "%ld pinned allocations after round 1, %ld after "
                  "round %d", pinned_after_first, pinned, ROUNDS);
    ck_assert_int_eq(freed, 0);
    /* the pool's size in the counters and the metrics */
    kvs_device_stats st;
    ck_assert_int_eq(kvs_get_device_stats(s, &st), 0);
    ck_assert_uint_eq(st.pinned_buffers, _i == 0 ? 0 : 4); /* device: no staging */
    ck_assert_int_eq(pinned, _i == 0 ? 0 : 4);
    if (_i == 1) /* local: two pushed and two pulled arrays staged at once */
        ck_assert_uint_eq(st.pinned_bytes, 4 * ((N * 4 + 4095) / 4096 * 4096));
    char text[16384], want[64];
    ck_assert_int_gt(kvs_metrics(s, text, sizeof text), 0);
    snprintf(want, sizeof want, "kvs_pinned_staging_bytes %llu\n",
             (unsigned long long)st.pinned_bytes);
    ck_assert_msg(strstr(text, want) != NULL, "'%s' not in the metrics", want);
    /* GPU 0 is the application's; GPU 1 was never named: no context */
    ck_assert_uint_eq(F.contexts(), (1u << 0) | (1u << 2) | (1u << 3));
    ck_assert_uint_eq(F.peers(1), 0);
    fake_none_misplaced(&F);
    ck_assert_int_eq(kvs_close(s), 0);
    KEPT(mine, 0);
    F.pinned(&pinned, &freed);
    ck_assert_int_eq(freed, pinned); /* the pool is released at close */
    free(h);
}
END_TEST

Suite *cudafake_suite(void)
{
    Suite *s = suite_create("cudafake");
    TCase *t = tcase_create("layer");
    tcase_add_test(t, fake_keeps_current_device);
    tcase_add_test(t, fake_fresh_thread_one_context);
    tcase_add_test(t, fake_staged_copies);
    tcase_add_test(t, fake_shared_memory);
    tcase_add_test(t, fake_selected_devices);
    tcase_add_test(t, fake_repeated_device);
    tcase_add_test(t, fake_bad_selection);
    tcase_add_test(t, fake_no_gpu);
    tcase_add_loop_test(t, fake_store_named_devices, 0, 2);
    tcase_set_timeout(t, 120);
    suite_add_tcase(s, t);
    return s;
}
