/* cuda.c - the CUDA backend: the runtime API through dlopen, the sum
 * kernels through the plugin libkvs_cuda.so (reduce/reduce_cuda.cu, built
 * where nvcc exists).
 *
 * The plugin is loaded first and the runtime functions are looked up
 * through it, so the kernels and this file share one libcudart (one
 * context per device).  Without the plugin the runtime is loaded by name
 * (libcudart.so, .so.13, .so.12, .so.11.0) and sums report that the plugin
 * is missing.  Plugin search: $KVS_CUDA_PLUGIN, then libkvs_cuda.so in the
 * directory of the object that holds libkvs (the .so, or the program it is
 * linked into) and its parent, then the dynamic linker's path.
 *
 * Devices: kvsd device i is CUDA ordinal map[i] (select.c: KVS_DEVICES).  A
 * device is opened on first use (cu_use): cudaSetDevice makes its primary
 * context current, its event is created, and with p2p peer access is
 * enabled between it and each device opened before it, in both directions.
 * Every CUDA call is preceded by cudaSetDevice of the device it is for.
 *
 * Current device: cu_save/cu_restore (dev.c brackets every call) keep the
 * caller's.  With the driver's cuCtxGetCurrent/cuCtxSetCurrent (looked up
 * through the plugin, then libcuda.so.1) the exact context is restored,
 * also "none" on a thread that never used CUDA.  Such a thread's runtime
 * device (what cudaGetDevice says while no context is current) is put
 * back only where that device's primary context exists
 * (cuDevicePrimaryCtxGetState): restoring it elsewhere would create a
 * context on a GPU the application never used; there it stays the last
 * device the library used.  Without the driver functions the runtime's
 * device is restored (cudaGetDevice / cudaSetDevice).
 *
 * Shared memory: every cudaMalloc buffer can be exported
 * (cudaIpcGetMemHandle); another process maps it with cudaIpcOpenMemHandle
 * (lazy peer access) on the device that will copy from or to it, and copies
 * with cudaMemcpyAsync (unified addressing: the driver goes peer to peer
 * where it can).  Optional: a runtime without the IPC functions cannot
 * share (local groups then meet in host memory).
 *
 * Streams: everything runs on the legacy default stream (NULL) of a device;
 * one event per device orders a peer copy after the source's earlier work;
 * two events guard the staging buffers. */
#include <dlfcn.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "device/dev_int.h"

enum { H2D = 1, D2H = 2, D2D = 3, DEFAULT = 4 }; /* cudaMemcpyKind */
enum { IPC_LAZY_PEER = 1 };                       /* cudaIpcMemLazyEnablePeerAccess */

typedef struct cu_ipc { /* cudaIpcMemHandle_t, passed by value */
    char reserved[DEV_IPC_BYTES];
} cu_ipc;
enum { EVENT_DISABLE_TIMING = 2 };          /* cudaEventDisableTiming */

typedef int (*sum_fn)(kvs_dtype, void *, const void *const *, int, uint64_t, void *);
typedef const char *(*plugin_err_fn)(void);

typedef struct cu {
    void *lib, *plugin, *drv;
    dev_layer *L;
    int n;
    int depth;          /* cu_save nesting */
    void *saved_ctx;    /* the caller's context (driver functions present) */
    int saved_dev;      /* the caller's device (cudaGetDevice), -1 unknown */
    void *ev[DEV_MAX];  /* "source ready" event per device */
    void *bev[DEV_MAX][2]; /* staging slots: an event per receiving device and slot */
    int bev_dev[2];        /* the device that last recorded slot */
    sum_fn sum;
    plugin_err_fn sum_err;
    char plugin_msg[512];
    int (*GetDeviceCount)(int *);
    int (*GetDevice)(int *);
    int (*SetDevice)(int);
    int (*CtxGetCurrent)(void **);                       /* driver (optional) */
    int (*CtxSetCurrent)(void *);
    int (*DevicePrimaryCtxGetState)(int, unsigned *, int *);
    int (*Malloc)(void **, size_t);
    int (*Free)(void *);
    int (*MallocHost)(void **, size_t);
    int (*FreeHost)(void *);
    int (*MemcpyAsync)(void *, const void *, size_t, int, void *);
    int (*MemcpyPeerAsync)(void *, int, const void *, int, size_t, void *);
    int (*MemsetAsync)(void *, int, size_t, void *);
    int (*StreamSynchronize)(void *);
    int (*DeviceCanAccessPeer)(int *, int, int);
    int (*DeviceEnablePeerAccess)(int, unsigned);
    int (*EventCreateWithFlags)(void **, unsigned);
    int (*EventRecord)(void *, void *);
    int (*EventSynchronize)(void *);
    int (*EventDestroy)(void *);
    int (*StreamWaitEvent)(void *, void *, unsigned);
    int (*GetLastError)(void);
    const char *(*GetErrorString)(int);
    int (*IpcGetMemHandle)(cu_ipc *, void *); /* optional (all three or none) */
    int (*IpcOpenMemHandle)(void **, cu_ipc, unsigned);
    int (*IpcCloseMemHandle)(void *);
} cu;

static int cerr(cu *c, int dev, const char *call, int e)
{
    const char *s = c->GetErrorString ? c->GetErrorString(e) : "?";
    if (c->GetLastError)
        c->GetLastError(); /* clear a non-sticky error */
    if (dev == DEV_HOST)
        return err_set(KVS_EDEVICE, "host: %s: %s (CUDA error %d)", call, s, e);
    return err_set(KVS_EDEVICE, "device %d: %s: %s (CUDA error %d)", dev, call, s, e);
}

#define CU(c, dev, call, args)                      \
    do {                                            \
        int e_ = (c)->call args;                    \
        if (e_ != 0)                                \
            return cerr((c), (dev), "cuda" #call, e_); \
    } while (0)

static int set_dev(cu *c, int dev)
{
    CU(c, dev, SetDevice, (c->L->map[dev]));
    return 0;
}

/* Any opened device (for host allocations), else device 0. */
static int host_dev(cu *c)
{
    for (int i = 0; i < c->n; i++)
        if (c->L->up[i])
            return i;
    return 0;
}

static bool no_device_opened(cu *c)
{
    for (int i = 0; i < c->n; i++)
        if (c->L->up[i])
            return false;
    return true;
}

static void cu_save(void *b)
{
    cu *c = b;
    if (c->depth++ > 0)
        return;
    c->saved_ctx = NULL;
    c->saved_dev = -1;
    if (c->CtxGetCurrent && c->CtxGetCurrent(&c->saved_ctx) != 0)
        c->saved_ctx = NULL;
    if (c->GetDevice(&c->saved_dev) != 0) {
        c->saved_dev = -1;
        c->GetLastError();
    }
}

static void cu_restore(void *b)
{
    cu *c = b;
    int now = -1;
    if (c->depth == 0 || --c->depth > 0)
        return;
    if (c->CtxGetCurrent && c->CtxSetCurrent) {
        void *cur = NULL;
        unsigned flags = 0;
        int active = 0;
        /* no context was current: the runtime's device goes back where
         * that creates nothing (its primary context exists), then "none" */
        if (c->saved_ctx == NULL && c->saved_dev >= 0 && c->DevicePrimaryCtxGetState &&
            c->DevicePrimaryCtxGetState(c->saved_dev, &flags, &active) == 0 && active)
            c->SetDevice(c->saved_dev);
        if (c->CtxGetCurrent(&cur) != 0 || cur != c->saved_ctx)
            c->CtxSetCurrent(c->saved_ctx);
        c->GetLastError();
        return;
    }
    if (c->saved_dev >= 0 && (c->GetDevice(&now) != 0 || now != c->saved_dev))
        c->SetDevice(c->saved_dev);
    c->GetLastError();
}

static void *try_plugin(const char *path, char *msg, size_t len)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        size_t used = strlen(msg);
        snprintf(msg + used, len - used, "%s%s", used ? "; " : "", dlerror());
    }
    return h;
}

/* The plugin, searched as the file comment says; msg collects the failures. */
static void *load_plugin(const char *env, char *msg, size_t len)
{
    Dl_info info;
    char path[4096], dir[4096];
    void *h;
    msg[0] = 0;
    if (env && *env)
        return try_plugin(env, msg, len);
    if (dladdr((void *)dev_cuda_open, &info) && info.dli_fname && strchr(info.dli_fname, '/')) {
        snprintf(dir, sizeof dir, "%s", info.dli_fname);
        char *d = dirname(dir);
        snprintf(path, sizeof path, "%s/libkvs_cuda.so", d);
        if ((h = try_plugin(path, msg, len)) != NULL)
            return h;
        snprintf(path, sizeof path, "%s/../libkvs_cuda.so", d);
        if ((h = try_plugin(path, msg, len)) != NULL)
            return h;
    }
    return try_plugin("libkvs_cuda.so", msg, len);
}

static void *sym(cu *c, const char *name)
{
    void *p = c->plugin ? dlsym(c->plugin, name) : NULL;
    return p ? p : (c->lib ? dlsym(c->lib, name) : NULL);
}

static void cu_close(void *b)
{
    cu *c = b;
    cu_save(c);
    for (int i = 0; i < c->n; i++)
        if (c->ev[i]) {
            c->SetDevice(c->L->map[i]);
            c->EventDestroy(c->ev[i]);
        }
    for (int d = 0; d < c->n; d++)
        for (int i = 0; i < 2; i++)
            if (c->bev[d][i]) {
                c->SetDevice(c->L->map[d]);
                c->EventDestroy(c->bev[d][i]);
            }
    cu_restore(c);
    /* the runtime stays loaded: unloading it under live contexts is unsafe */
    free(c);
}

/* Open device d: context, event, peer access with the opened devices. */
static int cu_use(void *b, int d)
{
    cu *c = b;
    dev_layer *L = c->L;
    int rc = set_dev(c, d), e;
    if (rc)
        return rc;
    if (c->ev[d] == NULL)
        CU(c, d, EventCreateWithFlags, (&c->ev[d], EVENT_DISABLE_TIMING));
    /* peer access: with MXNET_ENABLE_GPU_P2P=1, enabled where the hardware
     * allows (x reads y's memory); with 0 it is never enabled nor used */
    for (int s = 0; s < c->n && L->p2p; s++) {
        if (s == d || !L->up[s])
            continue;
        if (L->map[s] == L->map[d]) { /* one GPU named twice */
            L->access[d][s] = L->access[s][d] = true;
            continue;
        }
        for (int dir = 0; dir < 2; dir++) {
            int x = dir ? s : d, y = dir ? d : s, can = 0;
            if (c->DeviceCanAccessPeer(&can, L->map[x], L->map[y]) != 0 || !can) {
                c->GetLastError();
                continue;
            }
            if ((rc = set_dev(c, x)) != 0)
                return rc;
            e = c->DeviceEnablePeerAccess(L->map[y], 0);
            if (e == 0 || e == 704 /* cudaErrorPeerAccessAlreadyEnabled */)
                L->access[x][y] = true;
            c->GetLastError();
        }
    }
    return 0;
}

static int cu_alloc(void *b, int dev, size_t bytes, void **out)
{
    cu *c = b;
    int rc;
    if (dev == DEV_HOST) {
        /* pinned memory is portable (unified addressing): any context
         * will do: an opened device's, else the caller's, else device 0's */
        if (!no_device_opened(c) || c->saved_ctx == NULL)
            if ((rc = set_dev(c, host_dev(c))) != 0)
                return rc;
        CU(c, DEV_HOST, MallocHost, (out, bytes));
        return 0;
    }
    if ((rc = set_dev(c, dev)) != 0)
        return rc;
    CU(c, dev, Malloc, (out, bytes));
    return 0;
}

static void cu_free(void *b, int dev, void *p)
{
    cu *c = b;
    if (dev != DEV_HOST || !no_device_opened(c) || c->saved_ctx == NULL)
        c->SetDevice(c->L->map[dev == DEV_HOST ? host_dev(c) : dev]);
    if (dev == DEV_HOST)
        c->FreeHost(p);
    else
        c->Free(p);
}

static int cu_copy(void *b, int kind, int d, void *dst, int s, const void *src, size_t bytes)
{
    cu *c = b;
    int rc;
    switch (kind) {
    case DEV_H2D:
        if ((rc = set_dev(c, d)) != 0)
            return rc;
        CU(c, d, MemcpyAsync, (dst, src, bytes, H2D, NULL));
        return 0;
    case DEV_D2H:
        if ((rc = set_dev(c, s)) != 0)
            return rc;
        CU(c, s, MemcpyAsync, (dst, src, bytes, D2H, NULL));
        return 0;
    case DEV_D2D:
        if ((rc = set_dev(c, d)) != 0)
            return rc;
        CU(c, d, MemcpyAsync, (dst, src, bytes, D2D, NULL));
        return 0;
    default: /* DEV_PEER: after the source's earlier work */
        if ((rc = set_dev(c, s)) != 0)
            return rc;
        CU(c, s, EventRecord, (c->ev[s], NULL));
        if ((rc = set_dev(c, d)) != 0)
            return rc;
        CU(c, d, StreamWaitEvent, (NULL, c->ev[s], 0));
        CU(c, d, MemcpyPeerAsync, (dst, c->L->map[d], src, c->L->map[s], bytes, NULL));
        return 0;
    }
}

static int cu_zero(void *b, int dev, void *p, size_t bytes)
{
    cu *c = b;
    int rc = set_dev(c, dev);
    if (rc)
        return rc;
    CU(c, dev, MemsetAsync, (p, 0, bytes, NULL));
    return 0;
}

static int cu_sum(void *b, int dev, kvs_dtype dtype, void *dst, const void *const *srcs, int k,
                  uint64_t count)
{
    cu *c = b;
    int rc;
    if (c->sum == NULL)
        return err_set(KVS_EDEVICE, "device %d: no CUDA sum kernels: the plugin libkvs_cuda.so "
                       "(built by make where nvcc exists) could not be loaded: %s", dev,
                       c->plugin_msg);
    if ((rc = set_dev(c, dev)) != 0)
        return rc;
    rc = c->sum(dtype, dst, srcs, k, count, NULL);
    if (rc != 0)
        return err_set(KVS_EDEVICE, "device %d: sum kernel: %s", dev,
                       c->sum_err ? c->sum_err() : "launch failed");
    return 0;
}

static int cu_sync(void *b, int dev)
{
    cu *c = b;
    int rc;
    for (int i = 0; i < c->n; i++) {
        if ((dev >= 0 && i != dev) || !c->L->up[i])
            continue;
        if ((rc = set_dev(c, i)) != 0)
            return rc;
        CU(c, i, StreamSynchronize, (NULL));
    }
    return 0;
}

static int cu_event_record(void *b, int dev, int slot)
{
    cu *c = b;
    int rc = set_dev(c, dev);
    if (rc)
        return rc;
    /* an event is recorded on a stream of the device it was created on */
    if (c->bev[dev][slot] == NULL)
        CU(c, dev, EventCreateWithFlags, (&c->bev[dev][slot], EVENT_DISABLE_TIMING));
    CU(c, dev, EventRecord, (c->bev[dev][slot], NULL));
    c->bev_dev[slot] = dev;
    return 0;
}

static int cu_event_wait(void *b, int slot)
{
    cu *c = b;
    void *ev = c->bev[c->bev_dev[slot]][slot];
    if (ev)
        CU(c, c->bev_dev[slot], EventSynchronize, (ev));
    return 0;
}

static int cu_alloc_shared(void *b, int dev, size_t bytes, void **out)
{
    return cu_alloc(b, dev, bytes, out); /* every cudaMalloc buffer can be exported */
}

static int cu_ipc_export(void *b, int dev, void *p, dev_ipc *out)
{
    cu *c = b;
    cu_ipc h;
    int rc = set_dev(c, dev);
    if (rc)
        return rc;
    CU(c, dev, IpcGetMemHandle, (&h, p));
    memcpy(out->b, &h, sizeof h);
    return 0;
}

static int cu_ipc_open(void *b, int dev, int pid, const dev_ipc *hb, void **out, size_t *size)
{
    cu *c = b;
    cu_ipc h;
    int rc = set_dev(c, dev), e;
    if (rc)
        return rc;
    memcpy(&h, hb->b, sizeof h);
    if ((e = c->IpcOpenMemHandle(out, h, IPC_LAZY_PEER)) != 0) {
        const char *s = c->GetErrorString(e);
        c->GetLastError();
        return err_set(KVS_EDEVICE, "device %d: cudaIpcOpenMemHandle of a buffer of process "
                       "%d: %s (CUDA error %d)", dev, pid, s, e);
    }
    *size = SIZE_MAX; /* (the runtime does not say) */
    return 0;
}

static void cu_ipc_close(void *b, void *p)
{
    cu *c = b;
    c->IpcCloseMemHandle(p);
    c->GetLastError();
}

static int cu_ipc_copy(void *b, int dev, void *dst, const void *src, size_t bytes)
{
    cu *c = b;
    int rc = set_dev(c, dev);
    if (rc)
        return rc;
    CU(c, dev, MemcpyAsync, (dst, src, bytes, DEFAULT, NULL));
    return 0;
}

static const dev_ops cu_ops = {"cuda",  cu_close, cu_alloc, cu_free,         cu_copy,
                               cu_zero, cu_sum,   cu_sync,  cu_event_record, cu_event_wait,
                               cu_use,  cu_save,  cu_restore, cu_alloc_shared, cu_ipc_export,
                               cu_ipc_open, cu_ipc_close, cu_ipc_copy};
/* the same without IPC functions in the runtime */
static const dev_ops cu_ops_noipc = {"cuda",  cu_close, cu_alloc, cu_free,         cu_copy,
                                     cu_zero, cu_sum,   cu_sync,  cu_event_record, cu_event_wait,
                                     cu_use,  cu_save,  cu_restore, NULL, NULL, NULL, NULL, NULL};

/* The driver's context functions: through the plugin (or a runtime that
 * exports them), else libcuda.so.1.  Optional. */
static void load_driver(cu *c)
{
    *(void **)&c->CtxGetCurrent = sym(c, "cuCtxGetCurrent");
    if (c->CtxGetCurrent == NULL && (c->drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)))
        *(void **)&c->CtxGetCurrent = dlsym(c->drv, "cuCtxGetCurrent");
    void *h = c->CtxGetCurrent && c->drv ? c->drv : NULL;
    *(void **)&c->CtxSetCurrent = h ? dlsym(h, "cuCtxSetCurrent") : sym(c, "cuCtxSetCurrent");
    *(void **)&c->DevicePrimaryCtxGetState = h ? dlsym(h, "cuDevicePrimaryCtxGetState")
                                               : sym(c, "cuDevicePrimaryCtxGetState");
    if (c->CtxSetCurrent == NULL)
        c->CtxGetCurrent = NULL;
}

int dev_cuda_open(const dev_opts *o, dev_layer *L)
{
    static const char *const libs[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                                       "libcudart.so.11.0", NULL};
    cu *c = calloc(1, sizeof *c);
    int rc = KVS_EDEVICE, e, n = 0;
    if (c == NULL)
        return err_set(KVS_ENOMEM, "out of memory");
    c->plugin = load_plugin(o->cuda_plugin, c->plugin_msg, sizeof c->plugin_msg);
    if (c->plugin == NULL)
        for (int i = 0; libs[i] != NULL && c->lib == NULL; i++)
            c->lib = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
    if (c->plugin == NULL && c->lib == NULL) {
        rc = err_set(KVS_EDEVICE, "no devices: KVS_SIM_DEVICES is unset and no CUDA runtime "
                     "was found (libcudart.so could not be loaded; plugin: %s)", c->plugin_msg);
        goto fail;
    }
#define LOAD(f)                                                                          \
    if ((*(void **)&c->f = sym(c, "cuda" #f)) == NULL) {                                 \
        rc = err_set(KVS_EDEVICE, "the CUDA runtime lacks cuda" #f);                     \
        goto fail;                                                                       \
    }
    LOAD(GetDeviceCount) LOAD(GetDevice) LOAD(SetDevice) LOAD(Malloc) LOAD(Free) LOAD(MallocHost)
    LOAD(FreeHost) LOAD(MemcpyAsync) LOAD(MemcpyPeerAsync) LOAD(MemsetAsync)
    LOAD(StreamSynchronize) LOAD(DeviceCanAccessPeer) LOAD(DeviceEnablePeerAccess)
    LOAD(EventCreateWithFlags) LOAD(EventRecord) LOAD(EventSynchronize) LOAD(EventDestroy)
    LOAD(StreamWaitEvent) LOAD(GetLastError) LOAD(GetErrorString)
#undef LOAD
    if (c->plugin) {
        *(void **)&c->sum = dlsym(c->plugin, "red_cuda_sum");
        *(void **)&c->sum_err = dlsym(c->plugin, "red_cuda_last_error");
        if (c->sum == NULL)
            snprintf(c->plugin_msg, sizeof c->plugin_msg, "it lacks red_cuda_sum");
    }
    *(void **)&c->IpcGetMemHandle = sym(c, "cudaIpcGetMemHandle");
    *(void **)&c->IpcOpenMemHandle = sym(c, "cudaIpcOpenMemHandle");
    *(void **)&c->IpcCloseMemHandle = sym(c, "cudaIpcCloseMemHandle");
    load_driver(c);
    if ((e = c->GetDeviceCount(&n)) != 0 || n < 1) {
        rc = err_set(KVS_EDEVICE, "no devices: KVS_SIM_DEVICES is unset and the CUDA runtime "
                     "finds no GPU (cudaGetDeviceCount: %s, %d devices)",
                     e ? c->GetErrorString(e) : "no error", n);
        c->GetLastError();
        goto fail;
    }
    c->L = L;
    if ((rc = dev_select(o, n, "the CUDA runtime sees", L)) != 0)
        goto fail;
    c->n = L->n;
    L->ops = c->IpcGetMemHandle && c->IpcOpenMemHandle && c->IpcCloseMemHandle ? &cu_ops
                                                                                 : &cu_ops_noipc;
    L->b = c;
    return 0;
fail:
    free(c); /* nothing was created on any device */
    return rc;
}
