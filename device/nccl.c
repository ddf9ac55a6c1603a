/* nccl.c - NCCL collectives over all devices of a cuda layer (its kvsd
 * devices: KVS_DEVICES narrows them; a GPU named twice is an NCCL error):
 * libnccl is loaded with dlopen (libnccl.so.2, then libnccl.so), one
 * communicator per device from ncclCommInitAll, collectives grouped (ncclGroupStart/End) on
 * the legacy default stream of each device. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "device/dev.h"
#include "device/dev_int.h"

enum { NCCL_SUM = 0 };

struct dev_nccl {
    dev_layer *L;
    void *lib;
    int n;
    void *comm[DEV_MAX];
    int (*CommInitAll)(void **, int, const int *);
    int (*CommDestroy)(void *);
    int (*GroupStart)(void);
    int (*GroupEnd)(void);
    int (*AllReduce)(const void *, void *, size_t, int, int, void *, void *);
    int (*Reduce)(const void *, void *, size_t, int, int, int, void *, void *);
    int (*Broadcast)(const void *, void *, size_t, int, int, void *, void *);
    const char *(*GetErrorString)(int);
};

/* ncclDataType_t of a kvs_dtype */
static int nccl_type(kvs_dtype d)
{
    switch (d) {
    case KVS_FLOAT32: return 7;  /* ncclFloat32 */
    case KVS_FLOAT64: return 8;  /* ncclFloat64 */
    case KVS_FLOAT16: return 6;  /* ncclFloat16 */
    case KVS_BFLOAT16: return 9; /* ncclBfloat16 (NCCL >= 2.10) */
    case KVS_INT32: return 2;    /* ncclInt32 */
    case KVS_INT64: return 4;    /* ncclInt64 */
    }
    return -1;
}

static int nerr(dev_nccl *c, const char *call, int e)
{
    return err_set(KVS_EDEVICE, "NCCL over devices 0..%d: %s: %s (NCCL error %d)", c->n - 1,
                   call, c->GetErrorString ? c->GetErrorString(e) : "?", e);
}

void dev_nccl_close(dev_nccl *c)
{
    if (c == NULL)
        return;
    dev_enter(c->L);
    for (int i = 0; i < c->n; i++)
        if (c->comm[i])
            c->CommDestroy(c->comm[i]);
    dev_leave(c->L);
    free(c);
}

int dev_nccl_open(dev_layer *L, dev_nccl **out)
{
    static const char *const libs[] = {"libnccl.so.2", "libnccl.so", NULL};
    dev_nccl *c;
    int devs[DEV_MAX], e, rc;
    *out = NULL;
    if (!dev_is_cuda(L))
        return err_set(KVS_EDEVICE, "NCCL needs CUDA devices: this store's devices are %s "
                       "(KVS_SIM_DEVICES=%d); use the 'device' store type", dev_backend(L),
                       dev_count(L));
    if ((c = calloc(1, sizeof *c)) == NULL)
        return err_set(KVS_ENOMEM, "out of memory");
    c->L = L;
    c->n = dev_count(L);
    for (int i = 0; libs[i] != NULL && c->lib == NULL; i++)
        c->lib = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
    if (c->lib == NULL) {
        rc = err_set(KVS_EDEVICE, "NCCL is not installed: libnccl.so.2 could not be loaded "
                     "(%s)", dlerror());
        goto fail;
    }
#define LOAD(f)                                                              \
    if ((*(void **)&c->f = dlsym(c->lib, "nccl" #f)) == NULL) {              \
        rc = err_set(KVS_EDEVICE, "libnccl lacks nccl" #f);                  \
        goto fail;                                                           \
    }
    LOAD(CommInitAll) LOAD(CommDestroy) LOAD(GroupStart) LOAD(GroupEnd) LOAD(AllReduce)
    LOAD(Reduce) LOAD(Broadcast) LOAD(GetErrorString)
#undef LOAD
    for (int i = 0; i < c->n; i++) {
        devs[i] = dev_ordinal(L, i);
        if ((rc = dev_use(L, i)) != 0)
            goto fail;
    }
    dev_enter(L);
    e = c->CommInitAll(c->comm, c->n, devs);
    dev_leave(L);
    if (e != 0) {
        memset(c->comm, 0, sizeof c->comm);
        rc = nerr(c, "ncclCommInitAll", e);
        goto fail;
    }
    *out = c;
    return 0;
fail:
    dev_nccl_close(c);
    return rc;
}

enum { ALLREDUCE, REDUCE, BCAST };

static int run(dev_nccl *c, int what, int root, kvs_dtype dtype, void *const *bufs,
               uint64_t count)
{
    int t = nccl_type(dtype), e, e2;
    if (t < 0)
        return err_set(KVS_EINVAL, "NCCL: dtype %d", (int)dtype);
    if (count == 0)
        return 0;
    dev_enter(c->L);
    if ((e = c->GroupStart()) != 0) {
        dev_leave(c->L);
        return nerr(c, "ncclGroupStart", e);
    }
    for (int i = 0; i < c->n && e == 0; i++) {
        if (what == ALLREDUCE)
            e = c->AllReduce(bufs[i], bufs[i], count, t, NCCL_SUM, c->comm[i], NULL);
        else if (what == REDUCE)
            e = c->Reduce(bufs[i], bufs[i], count, t, NCCL_SUM, root, c->comm[i], NULL);
        else
            e = c->Broadcast(bufs[i], bufs[i], count, t, root, c->comm[i], NULL);
    }
    e2 = c->GroupEnd();
    dev_leave(c->L);
    dev_count_nccl(c->L);
    if (e != 0)
        return nerr(c, what == ALLREDUCE ? "ncclAllReduce" : what == REDUCE ? "ncclReduce"
                                                                             : "ncclBroadcast", e);
    return e2 ? nerr(c, "ncclGroupEnd", e2) : 0;
}

int dev_nccl_allreduce(dev_nccl *c, kvs_dtype dtype, void *const *bufs, uint64_t count)
{
    return run(c, ALLREDUCE, 0, dtype, bufs, count);
}

int dev_nccl_reduce(dev_nccl *c, int root, kvs_dtype dtype, void *const *bufs, uint64_t count)
{
    return run(c, REDUCE, root, dtype, bufs, count);
}

int dev_nccl_bcast(dev_nccl *c, int root, kvs_dtype dtype, void *const *bufs, uint64_t count)
{
    return run(c, BCAST, root, dtype, bufs, count);
}
