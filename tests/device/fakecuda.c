/* fakecuda.c - a stand-in for libcudart (and the three driver context
 * functions device/cuda.c uses), loaded through KVS_CUDA_PLUGIN so that
 * device/cuda.c's own code runs where no GPU exists.
 *
 * It models what the tests check: devices 0..N-1 (FAKECUDA_DEVICES, default
 * 4), a primary context per device created by cudaSetDevice or by the first
 * runtime call that needs one (on the thread's runtime device, as the real
 * runtime does), the current context per thread, peer access per ordered
 * pair, pinned allocations.  Device memory is host memory tagged with its
 * device; every copy, memset, event and sum checks that its pointers belong
 * to the current device (or a peer with access enabled, or pinned memory)
 * and counts a "misplaced" call otherwise.  Copies are synchronous, so the
 * values are right whatever the ordering; ordering is not modelled.
 * Memory handles (cudaIpc*) stand for another process's buffer within this
 * one: a handle names a device allocation (its start), opening it gives
 * the same pointer back (counted until closed), and a cudaMemcpyDefault
 * copy may touch an opened buffer from any device.
 *
 * The fakecuda_* functions let a test read the record. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvs.h"
#include "reduce/reduce.h"

#define API __attribute__((visibility("default")))
#define FAKE_MAX 16
#define FAKE_ALLOCS 4096

enum { OK = 0, ERR_INVALID_VALUE = 1, ERR_MEMORY = 2, ERR_INVALID_DEVICE = 101,
       ERR_PEER_ENABLED = 704 };
enum { H2D = 1, D2H = 2, D2D = 3, DEFAULT = 4 };
#define FAKE_IPC_MAGIC 0x46495043u

typedef struct fctx {
    int dev;
} fctx;

typedef struct falloc {
    char *p;
    size_t bytes;
    int dev; /* -1: pinned host */
} falloc;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int ndev = -1;
static fctx ctxs[FAKE_MAX];
static int made[FAKE_MAX];
static int peer[FAKE_MAX][FAKE_MAX]; /* [current][peer] enabled */
static falloc allocs[FAKE_ALLOCS];
static long misplaced, pinned_allocs, pinned_frees, set_calls;
static long ipc_open; /* handles opened and not closed */
static char *ipc_ptr[FAKE_ALLOCS];
static char last_misplaced[256];
static __thread fctx *cur;
static __thread int rt_dev;
static __thread int last_err;

static int count(void)
{
    if (ndev < 0) {
        const char *e = getenv("FAKECUDA_DEVICES");
        ndev = e ? atoi(e) : 4;
        if (ndev < 0 || ndev > FAKE_MAX)
            ndev = FAKE_MAX;
    }
    return ndev;
}

static int fail(int e)
{
    last_err = e;
    return e;
}

/* the current context, created on the runtime's device if none */
static int current(void)
{
    if (cur == NULL) {
        if (rt_dev >= count())
            return -1;
        made[rt_dev] = 1;
        cur = &ctxs[rt_dev];
        cur->dev = rt_dev;
    }
    return cur->dev;
}

static falloc *find(const void *p)
{
    for (int i = 0; i < FAKE_ALLOCS; i++)
        if (allocs[i].p && (const char *)p >= allocs[i].p &&
            (const char *)p < allocs[i].p + allocs[i].bytes + (allocs[i].bytes == 0))
            return &allocs[i];
    return NULL;
}

/* p (bytes from it) is usable from the current device: its own memory, a
 * peer's with access enabled, pinned memory (host_ok), or memory the fake
 * did not allocate (a test's host buffer: host_ok). */
static void check(const void *p, bool host_ok, const char *what)
{
    int d = current();
    pthread_mutex_lock(&mu);
    falloc *a = find(p);
    bool ok = a == NULL || a->dev < 0 ? host_ok
                                       : (a->dev == d || (d >= 0 && peer[d][a->dev]));
    if (!ok) {
        misplaced++;
        snprintf(last_misplaced, sizeof last_misplaced, "%s: pointer on %d, current device %d",
                 what, a ? a->dev : -1, d);
    }
    pthread_mutex_unlock(&mu);
}

static int track(void *p, size_t bytes, int dev)
{
    pthread_mutex_lock(&mu);
    for (int i = 0; i < FAKE_ALLOCS; i++)
        if (allocs[i].p == NULL) {
            allocs[i] = (falloc){p, bytes, dev};
            pthread_mutex_unlock(&mu);
            return 0;
        }
    pthread_mutex_unlock(&mu);
    return -1;
}

static int untrack(void *p, bool pinned)
{
    int rc = ERR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < FAKE_ALLOCS; i++)
        if (allocs[i].p == p && (allocs[i].dev < 0) == pinned) {
            allocs[i].p = NULL;
            rc = OK;
            break;
        }
    pthread_mutex_unlock(&mu);
    return rc;
}

/* ---- runtime ---- */

API int cudaGetDeviceCount(int *n)
{
    *n = count();
    return OK;
}

API int cudaGetDevice(int *d)
{
    *d = cur ? cur->dev : rt_dev;
    return OK;
}

API int cudaSetDevice(int d)
{
    if (d < 0 || d >= count())
        return fail(ERR_INVALID_DEVICE);
    set_calls++;
    made[d] = 1;
    ctxs[d].dev = d;
    cur = &ctxs[d];
    rt_dev = d;
    return OK;
}

API int cudaMalloc(void **p, size_t bytes)
{
    int d = current();
    if (d < 0)
        return fail(ERR_INVALID_DEVICE);
    if ((*p = malloc(bytes ? bytes : 1)) == NULL || track(*p, bytes, d) != 0)
        return fail(ERR_MEMORY);
    return OK;
}

API int cudaFree(void *p)
{
    current();
    if (p == NULL)
        return OK;
    if (untrack(p, false) != OK)
        return fail(ERR_INVALID_VALUE);
    free(p);
    return OK;
}

API int cudaMallocHost(void **p, size_t bytes)
{
    if (current() < 0)
        return fail(ERR_INVALID_DEVICE);
    if ((*p = malloc(bytes ? bytes : 1)) == NULL || track(*p, bytes, -1) != 0)
        return fail(ERR_MEMORY);
    __atomic_add_fetch(&pinned_allocs, 1, __ATOMIC_SEQ_CST);
    return OK;
}

API int cudaFreeHost(void *p)
{
    current();
    if (untrack(p, true) != OK)
        return fail(ERR_INVALID_VALUE);
    __atomic_add_fetch(&pinned_frees, 1, __ATOMIC_SEQ_CST);
    free(p);
    return OK;
}

static bool ipc_opened(const void *p)
{
    bool yes = false;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < FAKE_ALLOCS && !yes; i++) {
        falloc *a = ipc_ptr[i] ? find(ipc_ptr[i]) : NULL;
        yes = a && (const char *)p >= a->p && (const char *)p < a->p + a->bytes;
    }
    pthread_mutex_unlock(&mu);
    return yes;
}

API int cudaMemcpyAsync(void *dst, const void *src, size_t bytes, int kind, void *stream)
{
    (void)stream;
    if (kind == DEFAULT) { /* an opened handle from any device; else as D2D */
        if (!ipc_opened(dst))
            check(dst, false, "cudaMemcpyAsync (default) dst");
        if (!ipc_opened(src))
            check(src, false, "cudaMemcpyAsync (default) src");
        memmove(dst, src, bytes);
        return OK;
    }
    check(dst, kind == D2H, "cudaMemcpyAsync dst");
    check(src, kind == H2D, "cudaMemcpyAsync src");
    memmove(dst, src, bytes);
    return OK;
}

API int cudaMemcpy(void *dst, const void *src, size_t bytes, int kind)
{
    return cudaMemcpyAsync(dst, src, bytes, kind, NULL);
}

API int cudaMemcpyPeerAsync(void *dst, int dd, const void *src, int sd, size_t bytes, void *st)
{
    (void)st;
    pthread_mutex_lock(&mu);
    falloc *a = find(dst), *b = find(src);
    if (a == NULL || b == NULL || a->dev != dd || b->dev != sd) {
        misplaced++;
        snprintf(last_misplaced, sizeof last_misplaced, "cudaMemcpyPeerAsync: devices %d <- %d",
                 dd, sd);
    }
    pthread_mutex_unlock(&mu);
    memmove(dst, src, bytes);
    return OK;
}

API int cudaMemsetAsync(void *p, int v, size_t bytes, void *stream)
{
    (void)stream;
    check(p, false, "cudaMemsetAsync");
    memset(p, v, bytes);
    return OK;
}

API int cudaStreamSynchronize(void *stream)
{
    (void)stream;
    return current() < 0 ? fail(ERR_INVALID_DEVICE) : OK;
}

API int cudaDeviceCanAccessPeer(int *can, int d, int p)
{
    if (d < 0 || p < 0 || d >= count() || p >= count())
        return fail(ERR_INVALID_DEVICE);
    *can = d != p;
    return OK;
}

API int cudaDeviceGetP2PAttribute(int *v, int attr, int d, int p)
{
    if (d < 0 || p < 0 || d >= count() || p >= count() || d == p)
        return fail(ERR_INVALID_DEVICE);
    *v = attr == 2 ? 1 : 0; /* access supported, performance rank 0 (PCIe-like) */
    return OK;
}

API int cudaDeviceEnablePeerAccess(int p, unsigned flags)
{
    int d = current();
    (void)flags;
    if (p < 0 || p >= count() || p == d)
        return fail(ERR_INVALID_DEVICE);
    if (peer[d][p])
        return fail(ERR_PEER_ENABLED);
    peer[d][p] = 1;
    return OK;
}

API int cudaEventCreateWithFlags(void **ev, unsigned flags)
{
    int *e = malloc(sizeof *e);
    (void)flags;
    if (e == NULL)
        return fail(ERR_MEMORY);
    *e = current();
    *ev = e;
    return OK;
}

API int cudaEventRecord(void *ev, void *stream)
{
    (void)stream;
    if (*(int *)ev != current()) {
        __atomic_add_fetch(&misplaced, 1, __ATOMIC_SEQ_CST);
        snprintf(last_misplaced, sizeof last_misplaced, "cudaEventRecord: event of device %d, "
                 "current device %d", *(int *)ev, current());
    }
    return OK;
}

API int cudaEventSynchronize(void *ev)
{
    (void)ev;
    return OK;
}

API int cudaEventDestroy(void *ev)
{
    free(ev);
    return OK;
}

API int cudaStreamWaitEvent(void *stream, void *ev, unsigned flags)
{
    (void)stream;
    (void)ev;
    (void)flags;
    current();
    return OK;
}

API int cudaGetLastError(void)
{
    int e = last_err;
    last_err = 0;
    return e;
}

API const char *cudaGetErrorString(int e)
{
    switch (e) {
    case OK: return "no error";
    case ERR_MEMORY: return "out of memory (fake)";
    case ERR_INVALID_DEVICE: return "invalid device ordinal (fake)";
    case ERR_PEER_ENABLED: return "peer access is already enabled (fake)";
    default: return "invalid argument (fake)";
    }
}

/* ---- driver context functions ---- */

API int cuCtxGetCurrent(void **ctx)
{
    *ctx = cur;
    return 0;
}

API int cuCtxSetCurrent(void *ctx)
{
    cur = ctx;
    if (cur)
        rt_dev = cur->dev;
    return 0;
}

API int cuDevicePrimaryCtxGetState(int dev, unsigned *flags, int *active)
{
    if (dev < 0 || dev >= count())
        return 101;
    *flags = 0;
    *active = made[dev];
    return 0;
}

/* ---- the plugin's sum entry points (the CPU kernels on "device" memory) ---- */

static char sum_err[128];

API int red_cuda_sum(kvs_dtype dtype, void *dst, const void *const *srcs, int k, uint64_t count,
                     void *stream)
{
    (void)stream;
    check(dst, false, "red_cuda_sum dst");
    for (int j = 0; j < k; j++)
        check(srcs[j], false, "red_cuda_sum src");
    int rc = red_sum(NULL, dtype, dst, srcs, k, count);
    if (rc)
        snprintf(sum_err, sizeof sum_err, "fake sum: error %d", rc);
    return rc;
}

API const char *red_cuda_last_error(void)
{
    return sum_err;
}

/* ---- what the tests read ---- */

/* Bit d: device d has a primary context. */
API uint64_t fakecuda_contexts(void)
{
    uint64_t m = 0;
    for (int d = 0; d < FAKE_MAX; d++)
        if (made[d])
            m |= 1ull << d;
    return m;
}

/* Bit p: the context of d may access p's memory. */
API uint64_t fakecuda_peers(int d)
{
    uint64_t m = 0;
    for (int p = 0; p < FAKE_MAX && d >= 0 && d < FAKE_MAX; p++)
        if (peer[d][p])
            m |= 1ull << p;
    return m;
}

/* The context of device d (what cuCtxGetCurrent returns for it). */
API void *fakecuda_ctx(int d)
{
    return d >= 0 && d < FAKE_MAX ? &ctxs[d] : NULL;
}

/* Calls whose pointers were not usable from the current device; *what:
 * the last one. */
API long fakecuda_misplaced(const char **what)
{
    if (what)
        *what = last_misplaced;
    return misplaced;
}

API void fakecuda_pinned(long *allocs_out, long *frees_out)
{
    *allocs_out = pinned_allocs;
    *frees_out = pinned_frees;
}

/* The device a fake allocation belongs to (-1 pinned, -2 not the fake's). */
API int fakecuda_owner(const void *p)
{
    pthread_mutex_lock(&mu);
    falloc *a = find(p);
    int d = a ? a->dev : -2;
    pthread_mutex_unlock(&mu);
    return d;
}

typedef struct fake_ipc {
    uint32_t magic, pad;
    char *p;
    char rest[48];
} fake_ipc;

API int cudaIpcGetMemHandle(fake_ipc *h, void *p)
{
    pthread_mutex_lock(&mu);
    falloc *a = find(p);
    bool ok = a && a->dev >= 0 && a->p == p;
    pthread_mutex_unlock(&mu);
    if (!ok)
        return fail(ERR_INVALID_VALUE);
    memset(h, 0, sizeof *h);
    h->magic = FAKE_IPC_MAGIC;
    h->p = p;
    return OK;
}

API int cudaIpcOpenMemHandle(void **out, fake_ipc h, unsigned flags)
{
    if (h.magic != FAKE_IPC_MAGIC || flags != 1 || current() < 0)
        return fail(ERR_INVALID_VALUE);
    pthread_mutex_lock(&mu);
    int i = 0;
    while (i < FAKE_ALLOCS && ipc_ptr[i] != NULL)
        i++;
    falloc *a = find(h.p);
    if (i == FAKE_ALLOCS || a == NULL || a->p != h.p) {
        pthread_mutex_unlock(&mu);
        return fail(ERR_INVALID_VALUE);
    }
    ipc_ptr[i] = h.p;
    ipc_open++;
    pthread_mutex_unlock(&mu);
    *out = h.p;
    return OK;
}

API int cudaIpcCloseMemHandle(void *p)
{
    pthread_mutex_lock(&mu);
    for (int i = 0; i < FAKE_ALLOCS; i++)
        if (ipc_ptr[i] == p) {
            ipc_ptr[i] = NULL;
            ipc_open--;
            pthread_mutex_unlock(&mu);
            return OK;
        }
    pthread_mutex_unlock(&mu);
    return fail(ERR_INVALID_VALUE);
}

/* Handles opened and not closed. */
API long fakecuda_ipc_open(void)
{
    return __atomic_load_n(&ipc_open, __ATOMIC_SEQ_CST);
}
