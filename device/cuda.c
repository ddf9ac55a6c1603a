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
 * Streams: everything runs on the legacy default stream (NULL) of a device;
 * one event per device orders a peer copy after the source's earlier work;
 * two events guard the staging buffers. */
#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "device/dev_int.h"

enum { H2D = 1, D2H = 2, D2D = 3 };         /* cudaMemcpyKind */
enum { EVENT_DISABLE_TIMING = 2 };          /* cudaEventDisableTiming */

typedef int (*sum_fn)(kvs_dtype, void *, const void *const *, int, uint64_t, void *);
typedef const char *(*plugin_err_fn)(void);

typedef struct cu {
    void *lib, *plugin;
    int n;
    void *ev[DEV_MAX];  /* "source ready" event per device */
    void *bev[DEV_MAX][2]; /* staging slots: an event per receiving device and slot */
    int bev_dev[2];        /* the device that last recorded slot */
    sum_fn sum;
    plugin_err_fn sum_err;
    char plugin_msg[512];
    int (*GetDeviceCount)(int *);
    int (*SetDevice)(int);
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
    CU(c, dev, SetDevice, (dev));
    return 0;
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
static void *load_plugin(char *msg, size_t len)
{
    const char *env = getenv("KVS_CUDA_PLUGIN");
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
    for (int i = 0; i < c->n; i++)
        if (c->ev[i]) {
            c->SetDevice(i);
            c->EventDestroy(c->ev[i]);
        }
    for (int d = 0; d < DEV_MAX; d++)
        for (int i = 0; i < 2; i++)
            if (c->bev[d][i]) {
                c->SetDevice(d);
                c->EventDestroy(c->bev[d][i]);
            }
    /* the runtime stays loaded: unloading it under live contexts is unsafe */
    free(c);
}

static int cu_alloc(void *b, int dev, size_t bytes, void **out)
{
    cu *c = b;
    int rc;
    if (dev == DEV_HOST) {
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
    if (dev == DEV_HOST) {
        c->FreeHost(p);
    } else {
        c->SetDevice(dev);
        c->Free(p);
    }
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
        CU(c, d, MemcpyPeerAsync, (dst, d, src, s, bytes, NULL));
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
        if (dev >= 0 && i != dev)
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

static const dev_ops cu_ops = {"cuda",  cu_close, cu_alloc, cu_free,         cu_copy,
                               cu_zero, cu_sum,   cu_sync,  cu_event_record, cu_event_wait};

int dev_cuda_open(const dev_opts *o, dev_layer *L)
{
    static const char *const libs[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                                       "libcudart.so.11.0", NULL};
    cu *c = calloc(1, sizeof *c);
    int rc = KVS_EDEVICE, e, n = 0;
    if (c == NULL)
        return err_set(KVS_ENOMEM, "out of memory");
    c->plugin = load_plugin(c->plugin_msg, sizeof c->plugin_msg);
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
    LOAD(GetDeviceCount) LOAD(SetDevice) LOAD(Malloc) LOAD(Free) LOAD(MallocHost)
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
    if ((e = c->GetDeviceCount(&n)) != 0 || n < 1) {
        rc = err_set(KVS_EDEVICE, "no devices: KVS_SIM_DEVICES is unset and the CUDA runtime "
                     "finds no GPU (cudaGetDeviceCount: %s, %d devices)",
                     e ? c->GetErrorString(e) : "no error", n);
        c->GetLastError();
        goto fail;
    }
    if (n > DEV_MAX)
        n = DEV_MAX;
    c->n = n;
    for (int i = 0; i < n; i++) {
        if ((rc = set_dev(c, i)) != 0)
            goto fail;
        if ((e = c->EventCreateWithFlags(&c->ev[i], EVENT_DISABLE_TIMING)) != 0) {
            rc = cerr(c, i, "cudaEventCreateWithFlags", e);
            goto fail;
        }
    }
    /* peer access: with MXNET_ENABLE_GPU_P2P=1, enable it where the hardware
     * allows (d reads s's memory); with 0 it is never enabled nor used */
    for (int d = 0; d < n && o->p2p; d++)
        for (int s = 0; s < n; s++) {
            int can = 0;
            if (s == d || c->DeviceCanAccessPeer(&can, d, s) != 0 || !can)
                continue;
            c->SetDevice(d);
            e = c->DeviceEnablePeerAccess(s, 0);
            if (e == 0 || e == 704 /* cudaErrorPeerAccessAlreadyEnabled */)
                L->access[d][s] = true;
            c->GetLastError();
        }
    L->ops = &cu_ops;
    L->b = c;
    L->n = n;
    return 0;
fail:
    c->n = c->GetDeviceCount && c->EventDestroy ? c->n : 0;
    if (c->EventDestroy)
        cu_close(c);
    else
        free(c);
    return rc;
}
