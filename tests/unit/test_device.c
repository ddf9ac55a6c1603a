/* test_device.c - device arrays on simulated devices (KVS_SIM_DEVICES):
 * the device layer (device/dev.h) and every local store type through the
 * public API: 1, 2, 3, 4 and 8 devices; every dtype; flat and tree; P2P on
 * and off (the copy counters prove which path ran); arrays below and above
 * MXNET_KVSTORE_TREE_ARRAY_BOUND and MXNET_KVSTORE_BIGARRAY_BOUND; the DGX-1
 * and ring topologies; exact sums on every output; CPU and device results
 * compared bit for bit; the errors a user can trigger.
 *
 * With KVS_TEST_CUDA=1 (tests/gpu/run.sh) the store tests run on the CUDA
 * devices instead (cases needing more devices than exist are skipped); with
 * KVS_TEST_ONE_GPU=1 too, every case's devices are GPU 0 (KVS_DEVICES=0,0,..).
 * The *_fake tests run them on the stand-in CUDA runtime (fakecuda.h) with
 * 8 devices: device/cuda.c's code on every store path, every CUDA call
 * checked to run with its pointers' device current.
 *
 * Values are small integers (exact in every dtype, also as partial sums),
 * so every path must give the exact result; the bit-identity test with
 * inexact floats covers the paths whose summation order is fixed (flat and
 * the CPU path). */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "device/dev.h"
#include "tree/tree.h"
#include "kvs.h"
#include "tests/unit/exact.h"
#include "tests/unit/fakecuda.h"
#include "tools/devmem.h"

/* DGX-1 link ranks as MXNet's adjustment leaves them (NVLink 2/3, no PCIe). */
static const char dgx1[] =
    "0,2,2,3,3,0,0,0;2,0,3,2,0,3,0,0;2,3,0,3,0,0,2,0;3,2,3,0,0,0,0,2;"
    "3,0,0,0,0,2,2,3;0,3,0,0,2,0,3,2;0,0,2,0,2,3,0,3;0,0,0,2,3,2,3,0";

static void ring(int n, char *out, size_t len)
{
    size_t o = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            int w = (j == (i + 1) % n || i == (j + 1) % n) && i != j;
            o += (size_t)snprintf(out + o, len - o, "%d%s", w,
                                  j == n - 1 ? (i == n - 1 ? "" : ";") : ",");
        }
}

static void contains(const char *hay, const char *needle)
{
    ck_assert_msg(strstr(hay, needle) != NULL, "'%s' not in '%s'", needle, hay);
}

/* A small integer in [-6, 6] for (round, source, key, element). */
static int val(int r, int src, uint64_t key, uint64_t i)
{
    uint64_t h = (uint64_t)r * UINT64_C(0x9E3779B97F4A7C15) ^ (uint64_t)(src + 7) * UINT64_C(0xC2B2AE3D27D4EB4F) ^
                 key * UINT64_C(0x165667B19E3779F9) ^ (i + 1) * UINT64_C(0xD6E8FEB86659FD93);
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return (int)(h % 13) - 6;
}

static void fill_src(kvs_dtype t, void *buf, int r, int src, uint64_t key, uint64_t n)
{
    int *v = malloc(n * sizeof *v);
    for (uint64_t i = 0; i < n; i++)
        v[i] = val(r, src, key, i);
    fill(t, buf, v, n);
    free(v);
}

/* ------------------------------------------------------------ the layer */

static dev_layer *open_sim(int n, bool p2p, const tree_topo *topo)
{
    dev_opts o = {.sim_devices = n, .p2p = p2p, .topo = topo};
    dev_layer *L = NULL;
    int rc = dev_open(&o, &L);
    ck_assert_msg(rc == 0, "dev_open: %s", kvs_last_error());
    ck_assert_str_eq(dev_backend(L), "sim");
    ck_assert_int_eq(dev_count(L), n);
    return L;
}

START_TEST(layer_copy_paths)
{
    /* staged copies in several chunks, and peer copies, move the same bytes */
    size_t bytes = 2 * DEV_STAGE_CHUNK + 12345;
    for (int p2p = 0; p2p < 2; p2p++) {
        dev_layer *L = open_sim(3, p2p, NULL);
        unsigned char *a, *b, *h;
        ck_assert_int_eq(dev_alloc(L, 0, bytes, (void **)&a), 0);
        ck_assert_int_eq(dev_alloc(L, 2, bytes, (void **)&b), 0);
        ck_assert_int_eq(dev_alloc(L, DEV_HOST, bytes, (void **)&h), 0);
        for (size_t i = 0; i < bytes; i++)
            a[i] = (unsigned char)(i * 7 + 3);
        ck_assert_int_eq(dev_copy(L, 2, b, 0, a, bytes), 0);
        ck_assert_int_eq(dev_copy(L, DEV_HOST, h, 2, b, bytes), 0);
        ck_assert_int_eq(dev_sync(L, -1), 0);
        ck_assert(memcmp(a, h, bytes) == 0);
        kvs_device_stats st;
        dev_stats(L, &st);
        ck_assert_uint_eq(st.peer_copies, p2p ? 1 : 0);
        ck_assert_uint_eq(st.staged_copies, p2p ? 0 : 1);
        ck_assert_uint_eq(st.d2h_copies, 1);
        ck_assert_uint_eq(p2p ? st.peer_bytes : st.staged_bytes, bytes);
        ck_assert(dev_peer(L, 2, 0) == (bool)p2p);
        dev_free(L, 0, a);
        dev_free(L, 2, b);
        dev_free(L, DEV_HOST, h);
        dev_close(L);
    }
}
END_TEST

/* Shared device memory between two processes (sim: a memfd arena): a
 * child allocates and exports a buffer after the fork (so the parent has
 * no mapping of it), the parent maps it by handle, reads it and writes
 * into it with dev_ipc_copy, and the child sees the parent's bytes. */
START_TEST(layer_shared_memory)
{
    enum { N = 3 * 1000 + 7 };
    int up[2], down[2];
    ck_assert_int_eq(pipe(up), 0);
    ck_assert_int_eq(pipe(down), 0);
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        dev_layer *L = open_sim(2, false, NULL);
        int32_t *p, *h, bad = 0;
        dev_ipc id;
        char go;
        if (dev_alloc_shared(L, 1, N * sizeof *p, (void **)&p) != 0 ||
            dev_alloc(L, DEV_HOST, N * sizeof *h, (void **)&h) != 0)
            _exit(2);
        for (int i = 0; i < N; i++)
            h[i] = i * 3 - 7;
        if (dev_copy(L, 1, p, DEV_HOST, h, N * sizeof *h) != 0 || dev_sync(L, -1) != 0 ||
            dev_ipc_export(L, 1, p, &id) != 0 || write(up[1], &id, sizeof id) != sizeof id ||
            read(down[0], &go, 1) != 1 ||
            dev_copy(L, DEV_HOST, h, 1, p, N * sizeof *h) != 0 || dev_sync(L, -1) != 0)
            _exit(3);
        for (int i = 0; i < N; i++)
            bad += h[i] != (i < 100 ? -i : i * 3 - 7);
        dev_close(L);
        _exit(bad ? 4 : 0);
    }
    dev_layer *L = open_sim(1, false, NULL);
    dev_ipc id, junk;
    int32_t *mine, *h, *peer, *again;
    ck_assert_int_eq(read(up[0], &id, sizeof id), (int)sizeof id);
    ck_assert_int_eq(dev_alloc(L, 0, N * sizeof *mine, (void **)&mine), 0);
    ck_assert_int_eq(dev_alloc(L, DEV_HOST, N * sizeof *h, (void **)&h), 0);
    ck_assert_int_eq(dev_ipc_open(L, 0, child, &id, N * sizeof *peer, (void **)&peer), 0);
    ck_assert_int_eq(dev_ipc_open(L, 0, child, &id, N * sizeof *peer, (void **)&again), 0);
    ck_assert_ptr_eq(peer, again); /* mapped once */
    /* more than the buffer holds: refused */
    ck_assert_int_eq(dev_ipc_open(L, 0, child, &id, N * sizeof *peer + 64, (void **)&again),
                     KVS_EDEVICE);
    contains(kvs_last_error(), "are needed");
    ck_assert_int_eq(dev_ipc_copy(L, 0, mine, peer, N * sizeof *mine), 0);
    ck_assert_int_eq(dev_copy(L, DEV_HOST, h, 0, mine, N * sizeof *h), 0);
    ck_assert_int_eq(dev_sync(L, -1), 0);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(h[i], i * 3 - 7);
    for (int i = 0; i < 100; i++)
        h[i] = -i;
    ck_assert_int_eq(dev_copy(L, 0, mine, DEV_HOST, h, 100 * sizeof *h), 0);
    ck_assert_int_eq(dev_ipc_copy(L, 0, peer, mine, 100 * sizeof *h), 0);
    ck_assert_int_eq(dev_sync(L, -1), 0);
    kvs_device_stats st;
    dev_stats(L, &st);
    ck_assert_uint_eq(st.ipc_copies, 2);
    ck_assert_uint_eq(st.ipc_bytes, (N + 100) * sizeof *h);
    ck_assert_int_eq(write(down[1], "g", 1), 1);
    int status = 0;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: status %d", status);

    /* errors: not a handle; a process that is gone; memory that is not shared */
    memset(&junk, 0x5a, sizeof junk);
    ck_assert_int_eq(dev_ipc_open(L, 0, child, &junk, 4, (void **)&again), KVS_EDEVICE);
    contains(kvs_last_error(), "not a simulated device memory handle");
    dev_ipc moved = id;
    ck_assert_int_eq(dev_ipc_export(L, 0, mine, &moved), KVS_EINVAL);
    contains(kvs_last_error(), "not shared memory");
    int32_t *sh;
    ck_assert_int_eq(dev_alloc_shared(L, 0, 64, (void **)&sh), 0);
    ck_assert_int_eq(dev_ipc_export(L, 0, sh, &moved), 0);
    ck_assert_int_eq(dev_ipc_open(L, 0, child, &moved, 4, (void **)&again), KVS_EDEVICE);
    contains(kvs_last_error(), "not a simulated device memory handle"); /* another pid's */
    pid_t gone = fork();
    if (gone == 0)
        _exit(0);
    ck_assert_int_eq(waitpid(gone, &status, 0), gone);
    memcpy(&junk, &id, sizeof id);
    int32_t gpid = (int32_t)gone;
    memcpy(junk.b + 4, &gpid, sizeof gpid); /* (sim handle: magic, pid, fd, ...) */
    ck_assert_int_eq(dev_ipc_open(L, 0, gone, &junk, 4, (void **)&again), KVS_EDEVICE);
    contains(kvs_last_error(), "cannot open the shared memory of process");
    dev_free(L, 0, sh);
    dev_free(L, 0, mine);
    dev_free(L, DEV_HOST, h);
    dev_close(L);
    close(up[0]);
    close(up[1]);
    close(down[0]);
    close(down[1]);
}
END_TEST

START_TEST(layer_ring_access)
{
    /* on a ring only neighbours can access each other: 0 -> 2 is staged
     * even with P2P on */
    char r[256], err[256];
    tree_topo t;
    ring(4, r, sizeof r);
    ck_assert_int_eq(tree_topo_parse(r, "ring", &t, err, sizeof err), 0);
    dev_layer *L = open_sim(4, true, &t);
    ck_assert(dev_peer(L, 1, 0) && dev_peer(L, 0, 3) && !dev_peer(L, 2, 0));
    int x[4] = {1, 2, 3, 4}, y[4] = {0};
    ck_assert_int_eq(dev_copy(L, 1, y, 0, x, sizeof x), 0);
    ck_assert_int_eq(dev_copy(L, 2, y, 0, x, sizeof x), 0);
    kvs_device_stats st;
    dev_stats(L, &st);
    ck_assert_uint_eq(st.peer_copies, 1);
    ck_assert_uint_eq(st.staged_copies, 1);
    ck_assert(memcmp(x, y, sizeof x) == 0);
    dev_close(L);
    tree_topo_fini(&t);
}
END_TEST

START_TEST(layer_sum_and_errors)
{
    dev_layer *L = open_sim(2, true, NULL);
    float a[5] = {1, 2, 3, 4, 5}, b[5] = {10, 20, 30, 40, 50}, d[5];
    const void *s2[2] = {a, b};
    ck_assert_int_eq(dev_sum(L, 1, KVS_FLOAT32, d, s2, 2, 5), 0);
    for (int i = 0; i < 5; i++)
        ck_assert(d[i] == a[i] + b[i]);
    ck_assert_int_eq(dev_zero(L, 0, d, sizeof d), 0);
    ck_assert(d[0] == 0 && d[4] == 0);
    /* nonexistent devices are named */
    ck_assert_int_eq(dev_copy(L, 2, d, 0, a, 4), KVS_EDEVICE);
    contains(kvs_last_error(), "device 2 does not exist");
    ck_assert_int_eq(dev_sum(L, -1, KVS_FLOAT32, d, s2, 2, 5), KVS_EDEVICE);
    contains(kvs_last_error(), "device -1");
    void *p;
    ck_assert_int_eq(dev_alloc(L, 7, 16, &p), KVS_EDEVICE);
    ck_assert_int_eq(dev_sum(L, 0, KVS_FLOAT32, d, s2, DEV_SUM_MAX + 1, 5), KVS_EINVAL);
    ck_assert_int_eq(dev_sum(L, 0, (kvs_dtype)9, d, s2, 2, 5), KVS_EINVAL);
    dev_close(L);
    dev_close(NULL);
}
END_TEST

START_TEST(layer_cuda_or_error)
{
    /* without KVS_SIM_DEVICES the CUDA backend: on a machine without GPU or
     * driver a clear KVS_EDEVICE, never a crash */
    dev_opts o = {.p2p = true};
    dev_layer *L = NULL;
    int rc = dev_open(&o, &L);
    if (rc == 0) {
        ck_assert_str_eq(dev_backend(L), "cuda");
        ck_assert_int_gt(dev_count(L), 0);
        dev_close(L);
        return;
    }
    ck_assert_int_eq(rc, KVS_EDEVICE);
    contains(kvs_last_error(), "no devices");
    ck_assert_ptr_null(L);
}
END_TEST

/* ------------------------------------------------------------ the stores */

typedef struct setup {
    const char *type;
    int ndev;
    int tree;
    int p2p;
    const char *topo; /* KVS_TOPOLOGY or NULL */
} setup;

static devmem M;
static bool cuda_mode;

/* Set the environment of u; false: this machine cannot run it (CUDA mode
 * with fewer devices). */
static bool apply(const setup *u)
{
    char n[16];
    cuda_mode = getenv("KVS_TEST_CUDA") != NULL;
    if (cuda_mode) {
        /* exactly the case's devices, on a machine with more; with
         * KVS_TEST_ONE_GPU=1 all of them on GPU 0 (KVS_DEVICES=0,0,...) */
        char sel[DEV_MAX * 3 + 1];
        size_t o = 0;
        bool one = getenv("KVS_TEST_ONE_GPU") != NULL;
        for (int i = 0; i < u->ndev; i++)
            o += (size_t)snprintf(sel + o, sizeof sel - o, "%s%d", i ? "," : "", one ? 0 : i);
        setenv("KVS_DEVICES", sel, 1);
        unsetenv("KVS_SIM_DEVICES");
        if (devmem_open(&M) != 0 || M.n < u->ndev)
            return false;
    } else {
        unsetenv("KVS_DEVICES");
        snprintf(n, sizeof n, "%d", u->ndev);
        setenv("KVS_SIM_DEVICES", n, 1);
        ck_assert_int_eq(devmem_open(&M), 0);
    }
    setenv("MXNET_KVSTORE_USETREE", u->tree ? "1" : "0", 1);
    setenv("MXNET_ENABLE_GPU_P2P", u->p2p ? "1" : "0", 1);
    /* small bounds so that the test arrays fall on both sides of them */
    setenv("MXNET_KVSTORE_TREE_ARRAY_BOUND", "600", 1);
    setenv("MXNET_KVSTORE_BIGARRAY_BOUND", "1500", 1);
    setenv("MXNET_KVSTORE_REDUCTION_NTHREADS", "2", 1);
    if (u->topo)
        setenv("KVS_TOPOLOGY", u->topo, 1);
    else
        unsetenv("KVS_TOPOLOGY");
    return true;
}

/* NULL: skipped on this machine */
static kvs_store *create(const setup *u)
{
    kvs_store *s = NULL;
    if (!apply(u))
        return NULL;
    int rc = kvs_create(u->type, &s);
    ck_assert_msg(rc == 0, "kvs_create(%s, %d devices): %s", u->type, u->ndev, kvs_last_error());
    return s;
}

/* bytes (+1 guard byte) on dev holding host's bytes */
static void *place(int dev, const void *host, size_t bytes)
{
    if (dev == KVS_CPU) {
        void *b = malloc(bytes + 1);
        memcpy(b, host, bytes);
        return b;
    }
    void *d = devmem_alloc(&M, dev, bytes + 1);
    ck_assert_ptr_nonnull(d);
    devmem_put(&M, dev, d, host, bytes);
    return d;
}

/* bytes of a (any device) into host */
static void fetch(void *host, const kvs_array *a, size_t bytes)
{
    if (a->device == KVS_CPU)
        memcpy(host, a->data, bytes);
    else
        devmem_get(&M, a->device, host, a->data, bytes);
}

static void release(kvs_array *a)
{
    if (a->device == KVS_CPU)
        free(a->data);
    else
        devmem_free(&M, a->device, a->data);
}

#define MAXA 24

/* The arrays of one push: one per device, a second one on device 0, one in
 * host memory; nsrc is their number. */
typedef struct srcs {
    int nsrc;
    kvs_array a[MAXA];
    uint64_t keys[MAXA];
} srcs;

static void make_srcs(srcs *p, int ndev, uint64_t key, kvs_dtype t, uint64_t count, int r)
{
    p->nsrc = 0;
    for (int j = 0; j < ndev + 2; j++) {
        int dev = j < ndev ? j : j == ndev ? 0 : KVS_CPU;
        void *buf = malloc(count * dsize(t) + 1);
        fill_src(t, buf, r, j, key, count);
        p->a[p->nsrc] = (kvs_array){place(dev, buf, count * dsize(t)), count, t, dev};
        free(buf);
        p->keys[p->nsrc++] = key;
    }
}

static void free_srcs(srcs *p)
{
    for (int j = 0; j < p->nsrc; j++)
        release(&p->a[j]);
}

/* Outputs: one per device and one in host memory, filled with 0xEE. */
static void make_outs(srcs *p, int ndev, uint64_t key, kvs_dtype t, uint64_t count)
{
    p->nsrc = 0;
    void *buf = malloc(count * dsize(t) + 1);
    memset(buf, 0xEE, count * dsize(t) + 1);
    for (int j = 0; j <= ndev; j++) {
        int dev = j < ndev ? j : KVS_CPU;
        p->a[p->nsrc] = (kvs_array){place(dev, buf, count * dsize(t) + 1), count, t, dev};
        p->keys[p->nsrc++] = key;
    }
    free(buf);
}

static void expect_sum(const srcs *outs, int ndev, uint64_t key, kvs_dtype t, uint64_t count,
                       int r, const char *what)
{
    int *v = calloc(count, sizeof *v);
    unsigned char *want = malloc(count * dsize(t));
    for (int j = 0; j < ndev + 2; j++)
        for (uint64_t i = 0; i < count; i++)
            v[i] += val(r, j, key, i);
    fill(t, want, v, count);
    unsigned char *got = malloc(count * dsize(t) + 1);
    for (int o = 0; o < outs->nsrc; o++) {
        fetch(got, &outs->a[o], count * dsize(t) + 1);
        for (uint64_t i = 0; i < count; i++)
            if (memcmp(got + i * dsize(t), want + i * dsize(t), dsize(t)) != 0)
                ck_abort_msg("%s: key %llu %s output %d (device %d) element %llu wrong", what,
                             (unsigned long long)key, kvs_dtype_name(t), o, outs->a[o].device,
                             (unsigned long long)i);
        ck_assert_msg(got[count * dsize(t)] == 0xEE, "%s: written past the end", what);
    }
    free(got);
    free(v);
    free(want);
}

static void reset_outs(srcs *outs, kvs_dtype t, uint64_t count)
{
    void *buf = malloc(count * dsize(t));
    memset(buf, 0xEE, count * dsize(t));
    for (int o = 0; o < outs->nsrc; o++)
        if (outs->a[o].device == KVS_CPU)
            memcpy(outs->a[o].data, buf, count * dsize(t));
        else
            devmem_put(&M, outs->a[o].device, outs->a[o].data, buf, count * dsize(t));
    free(buf);
}

/* init, two rounds of push + pull, one pushpull; every output checked. */
static bool exercise(const setup *u, kvs_dtype t, uint64_t count, kvs_device_stats *st)
{
    kvs_store *s = create(u);
    uint64_t key = 100 + count;
    if (s == NULL)
        return false;
    srcs in, outs;
    int rc;
    /* init from a device array */
    make_srcs(&in, u->ndev, key, t, count, 0);
    rc = kvs_init(s, 1, &key, &in.a[u->ndev - 1]);
    ck_assert_msg(rc == 0, "init: %s", kvs_last_error());
    make_outs(&outs, u->ndev, key, t, count);
    ck_assert_int_eq(kvs_pull(s, (size_t)outs.nsrc, outs.keys, outs.a, 0), 0);
    ck_assert_int_eq(kvs_wait_all(s), 0);
    {
        unsigned char *want = malloc(count * dsize(t)), *got = malloc(count * dsize(t));
        fetch(want, &in.a[u->ndev - 1], count * dsize(t));
        for (int o = 0; o < outs.nsrc; o++) {
            fetch(got, &outs.a[o], count * dsize(t));
            ck_assert_msg(memcmp(got, want, count * dsize(t)) == 0, "pull after init: output %d",
                          o);
        }
        free(want);
        free(got);
    }
    free_srcs(&in);
    for (int r = 1; r <= 3; r++) {
        make_srcs(&in, u->ndev, key, t, count, r);
        reset_outs(&outs, t, count);
        if (r < 3) {
            rc = kvs_push(s, (size_t)in.nsrc, in.keys, in.a, 0);
            ck_assert_msg(rc == 0, "push: %s", kvs_last_error());
            rc = kvs_pull(s, (size_t)outs.nsrc, outs.keys, outs.a, 0);
        } else {
            /* pushpull: as many outputs as inputs (the API's shape) */
            srcs o2;
            make_outs(&o2, u->ndev, key, t, count);
            int extra = in.nsrc - o2.nsrc;
            for (int e = 0; e < extra; e++) {
                void *buf = malloc(count * dsize(t) + 1);
                memset(buf, 0xEE, count * dsize(t) + 1);
                o2.a[o2.nsrc] = (kvs_array){place(e % u->ndev, buf, count * dsize(t) + 1), count,
                                            t, e % u->ndev};
                o2.keys[o2.nsrc++] = key;
                free(buf);
            }
            rc = kvs_pushpull(s, (size_t)in.nsrc, in.keys, in.a, o2.a, 0);
            ck_assert_msg(rc == 0, "pushpull: %s", kvs_last_error());
            ck_assert_int_eq(kvs_wait_all(s), 0);
            expect_sum(&o2, u->ndev, key, t, count, r, "pushpull");
            free_srcs(&o2);
            rc = kvs_pull(s, (size_t)outs.nsrc, outs.keys, outs.a, 0);
        }
        ck_assert_msg(rc == 0, "pull: %s", kvs_last_error());
        ck_assert_int_eq(kvs_wait_all(s), 0);
        expect_sum(&outs, u->ndev, key, t, count, r, r < 3 ? "push+pull" : "pull after pushpull");
        free_srcs(&in);
    }
    free_srcs(&outs);
    ck_assert_int_eq(kvs_get_device_stats(s, st), 0);
    ck_assert_int_eq(st->devices, u->ndev);
    ck_assert_str_eq(st->backend, cuda_mode ? "cuda" : "sim");
    ck_assert_int_eq(kvs_close(s), 0);
    return true;
}

/* below TREE_ARRAY_BOUND, between it and BIGARRAY_BOUND, above both */
static const uint64_t counts[] = {37, 1001, 2003};

static void matrix(const setup *u)
{
    for (int t = 0; t < KVS_NUM_DTYPES; t++)
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            kvs_device_stats st;
            if (!exercise(u, (kvs_dtype)t, counts[c], &st))
                return; /* not on this machine */
            if (strcmp(u->type, "device") == 0 && u->ndev > 1) {
                /* the copy counters show which path ran (on CUDA, P2P on
                 * depends on the hardware) */
                if (u->p2p && u->topo == NULL && !cuda_mode)
                    ck_assert_msg(st.peer_copies > 0 && st.staged_copies == 0,
                                  "P2P on: %llu peer, %llu staged",
                                  (unsigned long long)st.peer_copies,
                                  (unsigned long long)st.staged_copies);
                if (!u->p2p)
                    ck_assert_msg(st.peer_copies == 0 && st.staged_copies > 0,
                                  "P2P off: %llu peer, %llu staged",
                                  (unsigned long long)st.peer_copies,
                                  (unsigned long long)st.staged_copies);
                ck_assert_uint_gt(st.sums, 0);
            }
            if (strcmp(u->type, "local") == 0)
                ck_assert_uint_eq(st.peer_copies + st.staged_copies + st.sums, 0);
        }
}

static const int ndevs[] = {1, 2, 3, 4, 8};

/* _i: device count index x tree x p2p */
START_TEST(store_device)
{
    setup u = {"device", ndevs[_i / 4], (_i / 2) % 2, _i % 2, NULL};
    if (u.ndev == 1 && u.tree)
        return; /* one device has no tree */
    matrix(&u);
}
END_TEST

START_TEST(store_local)
{
    setup u = {"local", ndevs[_i / 2], 0, _i % 2, NULL};
    matrix(&u);
}
END_TEST

START_TEST(store_tree_topologies)
{
    char r[512];
    setup u = {"device", 8, 1, 1, dgx1};
    if (_i == 1) {
        ring(8, r, sizeof r);
        u.topo = r;
    } else if (_i == 2) {
        ring(4, r, sizeof r);
        u.ndev = 4;
        u.topo = r;
    } else if (_i == 3) {
        u.p2p = 0; /* DGX-1 with P2P off */
    } else if (_i == 4) {
        u.tree = 0; /* flat on the ring: non-neighbours staged */
        ring(4, r, sizeof r);
        u.ndev = 4;
        u.topo = r;
    } else if (_i == 5) {
        /* the backtracking planner and another link-usage penalty */
        setenv("MXNET_KVSTORE_TREE_BACKTRACK", "1", 1);
        setenv("MXNET_KVSTORE_TREE_LINK_USAGE_PENALTY", "0.5", 1);
    }
    kvs_device_stats st;
    for (int t = 0; t < KVS_NUM_DTYPES; t++)
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
            if (!exercise(&u, (kvs_dtype)t, counts[c], &st))
                return; /* not on this machine */
    if (cuda_mode)
        return; /* peer access depends on the hardware, not the matrix */
    if (u.p2p && u.tree)
        /* trees use links only: every copy of the rounds is a peer copy; the
         * one staged copy allowed is the init's (from device n-1 to the
         * merge device, which need not be linked) */
        ck_assert_msg(st.staged_copies <= 1 && st.peer_copies > 0, "%llu staged",
                      (unsigned long long)st.staged_copies);
    if (u.p2p && !u.tree)
        ck_assert(st.staged_copies > 0 && st.peer_copies > 0);
    if (!u.p2p)
        ck_assert(st.peer_copies == 0 && st.staged_copies > 0);
}
END_TEST

/* Weighted plans (several trees per root), every tree's slice used
 * (KVS_TREE_MIN_SLICE=0): exact sums on every output on a DGX-1, an
 * NVSwitch box, a ring closed by a weak link and a 2-socket PCIe server. */
START_TEST(store_weighted_plans)
{
    char r[512];
    size_t o = 0;
    setup u = {"device", 8, 1, 1, r};
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++) {
            const char *w = "0";
            if (_i == 0) {
                snprintf(r, sizeof r, "%s", dgx1);
                break;
            }
            if (i != j && _i == 1)
                w = "13"; /* NVSwitch: NV12 everywhere */
            if (_i == 2 && (j == (i + 1) % 8 || i == (j + 1) % 8) && i != j)
                w = (i == 7 && j == 0) || (i == 0 && j == 7) ? "0.01" : "3";
            if (_i == 3 && i != j)
                w = i / 4 == j / 4 ? "2" : "1"; /* 2 sockets of 4 */
            o += (size_t)snprintf(r + o, sizeof r - o, "%s%s", w,
                                  j == 7 ? (i == 7 ? "" : ";") : ",");
        }
    setenv("KVS_TREE_MIN_SLICE", "0", 1);
    kvs_device_stats st;
    for (int t = 0; t < KVS_NUM_DTYPES; t++)
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
            if (!exercise(&u, (kvs_dtype)t, counts[c], &st))
                return; /* not on this machine */
}
END_TEST

/* Flat device sums and the CPU path add in the same order (the call's), with
 * one rounding: bit-identical even for inexact values; the tree adds in
 * another order and is compared only on exact values (the matrix above). */
START_TEST(store_bit_identical)
{
    const uint64_t n = 3001;
    kvs_dtype t = (kvs_dtype)_i;
    unsigned char *res[2];
    for (int pass = 0; pass < 2; pass++) {
        setup u = {pass ? "device" : "local", 4, 0, 1, NULL};
        kvs_store *s = create(&u);
        if (s == NULL)
            return;
        uint64_t key = 5, keys[6] = {5, 5, 5, 5, 5, 5};
        kvs_array a[6], o;
        uint64_t seed = 42;
        for (int j = 0; j < 6; j++) {
            unsigned char *b = malloc(n * dsize(t));
            for (uint64_t i = 0; i < n * dsize(t); i++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                b[i] = (unsigned char)(seed >> 56);
            }
            /* keep floats finite: clear the top exponent bit of each element */
            for (uint64_t i = 0; i < n && t <= KVS_BFLOAT16; i++)
                b[i * dsize(t) + dsize(t) - 1] &= 0x3f;
            /* local: host arrays; device: on devices 0,1,2,3,0,1 */
            a[j] = (kvs_array){place(pass ? j % 4 : KVS_CPU, b, n * dsize(t)), n, t,
                               pass ? j % 4 : KVS_CPU};
            free(b);
        }
        res[pass] = malloc(n * dsize(t));
        o = (kvs_array){place(pass ? 2 : KVS_CPU, res[pass], n * dsize(t)), n, t,
                        pass ? 2 : KVS_CPU};
        ck_assert_int_eq(kvs_init(s, 1, &key, &a[0]), 0);
        ck_assert_int_eq(kvs_pushpull(s, 6, keys, a, a, 0), 0);
        ck_assert_int_eq(kvs_pull(s, 1, &key, &o, 0), 0);
        ck_assert_int_eq(kvs_wait_all(s), 0);
        fetch(res[pass], &o, n * dsize(t));
        unsigned char *got = malloc(n * dsize(t));
        for (int j = 0; j < 6; j++) {
            fetch(got, &a[j], n * dsize(t));
            ck_assert(memcmp(got, res[pass], n * dsize(t)) == 0);
        }
        free(got);
        for (int j = 0; j < 6; j++)
            release(&a[j]);
        release(&o);
        ck_assert_int_eq(kvs_close(s), 0);
    }
    ck_assert_msg(memcmp(res[0], res[1], n * dsize(t)) == 0, "%s: CPU and device sums differ",
                  kvs_dtype_name(t));
    free(res[0]);
    free(res[1]);
}
END_TEST

START_TEST(store_many_sources)
{
    /* more arrays for one key than one sum kernel takes (DEV_SUM_MAX) */
    setup u = {"device", 2, _i, 1, NULL};
    kvs_store *s = create(&u);
    enum { K = 70, N = 33 };
    uint64_t keys[K];
    kvs_array a[K], o[2];
    int32_t buf[K][N], out[2][N];
    if (s == NULL)
        return;
    for (int j = 0; j < K; j++) {
        keys[j] = 9;
        for (int i = 0; i < N; i++)
            buf[j][i] = j * 1000 + i;
        a[j] = (kvs_array){place(j % 2, buf[j], sizeof buf[j]), N, KVS_INT32, j % 2};
    }
    for (int d = 0; d < 2; d++)
        o[d] = (kvs_array){place(d, out[d], sizeof out[d]), N, KVS_INT32, d};
    ck_assert_int_eq(kvs_init(s, 1, keys, a), 0);
    ck_assert_int_eq(kvs_push(s, K, keys, a, 0), 0);
    ck_assert_int_eq(kvs_pull(s, 2, keys, o, 0), 0);
    for (int d = 0; d < 2; d++) {
        fetch(out[d], &o[d], sizeof out[d]);
        for (int i = 0; i < N; i++)
            ck_assert_int_eq(out[d][i], (K * (K - 1) / 2) * 1000 + K * i);
        release(&o[d]);
    }
    for (int j = 0; j < K; j++)
        release(&a[j]);
    ck_assert_int_eq(kvs_close(s), 0);
}
END_TEST

/* The store tests on the stand-in CUDA runtime; afterwards no call ran
 * with the wrong device current. */
static fake F;

static void on_fake(void)
{
    fake_use(&F, 8);
    setenv("KVS_TEST_CUDA", "1", 1);
}

START_TEST(store_device_fake)
{
    on_fake();
    setup u = {"device", ndevs[_i / 2], 0, _i % 2, NULL};
    matrix(&u);
    fake_none_misplaced(&F);
}
END_TEST

START_TEST(store_local_fake)
{
    on_fake();
    setup u = {"local", ndevs[_i / 2], 0, _i % 2, NULL};
    matrix(&u);
    fake_none_misplaced(&F);
}
END_TEST

/* trees over given topologies (detection reads the real runtime) */
START_TEST(store_tree_fake)
{
    char r[512];
    on_fake();
    setup u = {"device", 8, 1, _i, dgx1};
    if (_i == 2) {
        ring(4, r, sizeof r);
        u = (setup){"device", 4, 1, 1, r};
    }
    matrix(&u);
    fake_none_misplaced(&F);
}
END_TEST

/* one GPU as 4 kvsd devices (KVS_DEVICES=0,0,0,0: what tests/gpu/run.sh
 * runs on a one-GPU machine): flat and tree, P2P on and off; one context */
START_TEST(store_one_gpu_fake)
{
    fake_use(&F, 1);
    setenv("KVS_TEST_CUDA", "1", 1);
    setenv("KVS_TEST_ONE_GPU", "1", 1);
    setup u = {"device", 4, _i / 2, _i % 2, NULL};
    matrix(&u);
    fake_none_misplaced(&F);
    ck_assert_uint_eq(F.contexts(), 1);
}
END_TEST

START_TEST(store_many_sources_fake)
{
    on_fake();
    store_many_sources_fn(_i);
    fake_none_misplaced(&F);
}
END_TEST

/* nccl: on CUDA devices the matrix (with NCCL present), on simulated ones the
 * error */
START_TEST(store_nccl)
{
    setup u = {"nccl", ndevs[_i], 0, 1, NULL};
    kvs_store *s = NULL;
    if (getenv("KVS_TEST_ONE_GPU") && u.ndev > 1)
        return; /* NCCL refuses one GPU named twice */
    if (!apply(&u))
        return; /* fewer CUDA devices */
    int rc = kvs_create("nccl", &s);
    if (!cuda_mode) {
        ck_assert_int_eq(rc, KVS_EDEVICE);
        contains(kvs_last_error(), "NCCL needs CUDA devices");
        return;
    }
    if (rc == KVS_EDEVICE && strstr(kvs_last_error(), "NCCL is not installed")) {
        fprintf(stderr, "store_nccl: %s (NCCL cases skipped)\n", kvs_last_error());
        return;
    }
    ck_assert_msg(rc == 0, "nccl: %s", kvs_last_error());
    kvs_close(s);
    matrix(&u);
}
END_TEST

START_TEST(store_errors)
{
    kvs_store *s = NULL;
    if (getenv("KVS_TEST_CUDA"))
        return; /* simulated devices only: the errors use their counts */
    setup u = {"device", 2, 0, 1, NULL};
    float v[4] = {1, 2, 3, 4}, w[6] = {0};
    uint64_t k = 1, kk[2] = {1, 1};
    /* NCCL needs CUDA devices */
    apply(&u);
    ck_assert_int_eq(kvs_create("nccl", &s), KVS_EDEVICE);
    contains(kvs_last_error(), "NCCL needs CUDA devices");
    ck_assert_ptr_null(s);
    /* a topology of another size */
    setenv("KVS_TOPOLOGY", "0,1,1;1,0,1;1,1,0", 1);
    ck_assert_int_eq(kvs_create("device", &s), KVS_ECONFIG);
    contains(kvs_last_error(), "KVS_TOPOLOGY");
    /* a disconnected one with trees */
    setenv("KVS_SIM_DEVICES", "3", 1);
    setenv("KVS_TOPOLOGY", "0,1,0;1,0,0;0,0,0", 1);
    setenv("MXNET_KVSTORE_USETREE", "1", 1);
    ck_assert_int_eq(kvs_create("device", &s), KVS_ECONFIG);
    contains(kvs_last_error(), "MXNET_KVSTORE_USETREE");
    /* a topology of the host's devices: the chosen ones take their rows
     * (devices 2 and 0 of the chain 0-1-2 are not linked: no trees; 0 and
     * 1 are) */
    setenv("KVS_TOPOLOGY", "0,1,0;1,0,1;0,1,0", 1);
    setenv("KVS_DEVICES", "2,0", 1);
    ck_assert_int_eq(kvs_create("device", &s), KVS_ECONFIG);
    contains(kvs_last_error(), "cannot plan trees over 2 devices");
    setenv("KVS_DEVICES", "0,1", 1);
    ck_assert_int_eq(kvs_create("device", &s), 0);
    kvs_close(s);
    s = NULL;
    /* neither the chosen devices' nor the host's */
    setenv("KVS_DEVICES", "2", 1);
    setenv("KVS_TOPOLOGY", "0,1;1,0", 1);
    ck_assert_int_eq(kvs_create("device", &s), KVS_ECONFIG);
    contains(kvs_last_error(), "KVS_TOPOLOGY has 2 devices: neither the 1 of KVS_DEVICES nor "
             "the host's");
    setenv("KVS_DEVICES", "0", 1);
    setenv("KVS_TOPOLOGY", "0,1,1,1;1,0,1,1;1,1,0,1;1,1,1,0", 1);
    ck_assert_int_eq(kvs_create("device", &s), KVS_ECONFIG);
    contains(kvs_last_error(), "KVS_TOPOLOGY has 4 devices but the sim backend has 3");
    ck_assert_ptr_null(s);
    unsetenv("KVS_DEVICES");
    /* out of range */
    unsetenv("KVS_TOPOLOGY");
    setenv("KVS_SIM_DEVICES", "65", 1);
    ck_assert_int_eq(kvs_create("device", &s), KVS_ECONFIG);
    contains(kvs_last_error(), "KVS_SIM_DEVICES");
    setenv("KVS_SIM_DEVICES", "two", 1);
    ck_assert_int_eq(kvs_create("local", &s), KVS_ECONFIG);

    s = create(&u);
    kvs_array a = {v, 4, KVS_FLOAT32, 1}, bad = a;
    /* nonexistent devices, named */
    bad.device = 2;
    ck_assert_int_eq(kvs_init(s, 1, &k, &bad), KVS_EDEVICE);
    contains(kvs_last_error(), "device 2");
    bad.device = -3;
    ck_assert_int_eq(kvs_push(s, 1, &k, &bad, 0), KVS_EDEVICE);
    contains(kvs_last_error(), "device -3");
    /* not initialised */
    ck_assert_int_eq(kvs_push(s, 1, &k, &a, 0), KVS_ENOKEY);
    ck_assert_int_eq(kvs_init(s, 1, &k, &a), 0);
    /* shapes */
    kvs_array two[2] = {a, {w, 6, KVS_FLOAT32, 0}};
    ck_assert_int_eq(kvs_push(s, 2, kk, two, 0), KVS_ESHAPE);
    ck_assert_int_eq(kvs_pull(s, 1, &k, &two[1], 0), KVS_ESHAPE);
    kvs_array i32 = {w, 4, KVS_INT32, 0};
    ck_assert_int_eq(kvs_init(s, 1, &k, &i32), KVS_ESHAPE);
    /* nothing changed */
    kvs_array o = {w, 4, KVS_FLOAT32, 0};
    ck_assert_int_eq(kvs_pull(s, 1, &k, &o, 0), 0);
    ck_assert(w[0] == 1 && w[3] == 4);
    ck_assert_int_eq(kvs_close(s), 0);

    /* no devices at all: a device store says so (a GPU machine has some) */
    unsetenv("KVS_SIM_DEVICES");
    int rc = kvs_create("device", &s);
    if (rc == 0) {
        kvs_close(s);
    } else {
        ck_assert_int_eq(rc, KVS_EDEVICE);
        contains(kvs_last_error(), "no devices");
    }
}
END_TEST

START_TEST(store_logtree)
{
    /* MXNET_KVSTORE_LOGTREE=1 prints the matrix and the trees */
    char path[] = "/tmp/kvs-logtree-XXXXXX";
    if (getenv("KVS_TEST_CUDA"))
        return;
    int fd = mkstemp(path), saved = dup(2);
    setup u = {"device", 8, 1, 1, dgx1};
    ck_assert_int_ge(fd, 0);
    setenv("MXNET_KVSTORE_LOGTREE", "1", 1);
    dup2(fd, 2);
    kvs_store *s = create(&u);
    fflush(stderr);
    dup2(saved, 2);
    kvs_close(s);
    char text[65536] = {0};
    ssize_t got = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    unlink(path);
    ck_assert_int_gt(got, 0);
    contains(text, "tree: weighted plan, ");
    contains(text, ": root GPU 7, parts ");
    contains(text, "/5760, ");
}
END_TEST

Suite *device_suite(void)
{
    Suite *s = suite_create("device");
    TCase *t = tcase_create("layer");
    tcase_add_test(t, layer_copy_paths);
    tcase_add_test(t, layer_ring_access);
    tcase_add_test(t, layer_shared_memory);
    tcase_add_test(t, layer_sum_and_errors);
    tcase_add_test(t, layer_cuda_or_error);
    suite_add_tcase(s, t);
    t = tcase_create("store");
    tcase_set_timeout(t, 120);
    tcase_add_loop_test(t, store_device, 0, 20);
    tcase_add_loop_test(t, store_local, 0, 10);
    tcase_add_loop_test(t, store_nccl, 0, 5);
    tcase_add_loop_test(t, store_tree_topologies, 0, 6);
    tcase_add_loop_test(t, store_weighted_plans, 0, 4);
    tcase_add_loop_test(t, store_bit_identical, 0, KVS_NUM_DTYPES);
    tcase_add_loop_test(t, store_many_sources, 0, 2);
    tcase_add_test(t, store_errors);
    tcase_add_test(t, store_logtree);
    suite_add_tcase(s, t);
    t = tcase_create("fake");
    tcase_set_timeout(t, 120);
    tcase_add_loop_test(t, store_device_fake, 0, 10);
    tcase_add_loop_test(t, store_local_fake, 0, 10);
    tcase_add_loop_test(t, store_tree_fake, 0, 3);
    tcase_add_loop_test(t, store_many_sources_fake, 0, 1);
    tcase_add_loop_test(t, store_one_gpu_fake, 0, 4);
    suite_add_tcase(s, t);
    return s;
}
