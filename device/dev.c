/* dev.c - the device layer: device selection, the current device kept,
 * argument checks, peer or staged copies, counters; the backends (sim.c,
 * cuda.c) do the work. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "device/dev.h"
#include "device/dev_int.h"

int dev_open(const dev_opts *o, dev_layer **out)
{
    dev_layer *L = calloc(1, sizeof *L);
    int rc;
    *out = NULL;
    if (L == NULL)
        return err_set(KVS_ENOMEM, "out of memory");
    L->p2p = o->p2p;
    rc = o->sim_devices > 0 ? dev_sim_open(o, L) : dev_cuda_open(o, L);
    if (rc != 0) {
        free(L);
        return rc;
    }
    hmap_init(&L->ipc);
    snprintf(L->st.backend, sizeof L->st.backend, "%s", L->ops->name);
    L->st.devices = L->n;
    *out = L;
    return 0;
}

void dev_enter(dev_layer *L)
{
    if (L->ops->save)
        L->ops->save(L->b);
}

void dev_leave(dev_layer *L)
{
    if (L->ops->restore)
        L->ops->restore(L->b);
}

void dev_close(dev_layer *L)
{
    if (L == NULL)
        return;
    dev_enter(L);
    L->ops->sync(L->b, -1);
    for (size_t i = 0; i < L->ipc.cap; i++)
        for (dev_ipc_map *e = L->ipc.used[i] == 1 ? L->ipc.vals[i] : NULL, *nx; e; e = nx) {
            nx = e->next;
            L->ops->ipc_close(L->b, e->p);
            free(e);
        }
    hmap_fini(&L->ipc);
    for (int i = 0; i < 2; i++)
        if (L->bounce[i])
            L->ops->free(L->b, DEV_HOST, L->bounce[i]);
    dev_leave(L);
    L->ops->close(L->b); /* (saves and restores on its own) */
    free(L);
}

const char *dev_backend(const dev_layer *L)
{
    return L->ops->name;
}

int dev_count(const dev_layer *L)
{
    return L->n;
}

bool dev_is_cuda(const dev_layer *L)
{
    return strcmp(L->ops->name, "cuda") == 0;
}

bool dev_peer(const dev_layer *L, int dst, int src)
{
    return L->p2p && L->access[dst][src];
}

int dev_ordinal(const dev_layer *L, int dev)
{
    return dev >= 0 && dev < L->n ? L->map[dev] : -1;
}

int dev_backend_count(const dev_layer *L)
{
    return L->nback;
}

bool dev_opened(const dev_layer *L, int dev)
{
    return dev >= 0 && dev < L->n && L->up[dev];
}

static int bad_dev(const dev_layer *L, int dev, bool host_ok)
{
    if ((dev == DEV_HOST && host_ok) || (dev >= 0 && dev < L->n))
        return 0;
    return err_set(KVS_EDEVICE, "device %d does not exist (%s backend has devices 0..%d)", dev,
                   L->ops->name, L->n - 1);
}

/* Open dev if it is a device not opened yet (inside enter/leave). */
static int use(dev_layer *L, int dev)
{
    int rc;
    if (dev == DEV_HOST || L->up[dev])
        return 0;
    if ((rc = L->ops->use(L->b, dev)) != 0)
        return rc;
    L->up[dev] = true;
    return 0;
}

int dev_use(dev_layer *L, int dev)
{
    int rc = bad_dev(L, dev, false);
    if (rc)
        return rc;
    dev_enter(L);
    rc = use(L, dev);
    dev_leave(L);
    return rc;
}

int dev_alloc(dev_layer *L, int dev, size_t bytes, void **out)
{
    int rc = bad_dev(L, dev, true);
    *out = NULL;
    if (rc)
        return rc;
    dev_enter(L);
    if ((rc = use(L, dev)) == 0)
        rc = L->ops->alloc(L->b, dev, bytes ? bytes : 1, out);
    dev_leave(L);
    return rc;
}

void dev_free(dev_layer *L, int dev, void *p)
{
    if (p == NULL)
        return;
    dev_enter(L);
    L->ops->free(L->b, dev, p);
    dev_leave(L);
}

/* src (device s) -> dst (device d) through the pinned bounce buffers, in
 * chunks: the copy to the host of chunk i+1 overlaps the copy to the device
 * of chunk i. */
static int staged(dev_layer *L, int d, char *dst, int s, const char *src, size_t bytes)
{
    int rc;
    for (int i = 0; i < 2; i++)
        if (L->bounce[i] == NULL &&
            (rc = L->ops->alloc(L->b, DEV_HOST, DEV_STAGE_CHUNK, &L->bounce[i])) != 0)
            return rc;
    for (size_t off = 0, i = 0; off < bytes; off += DEV_STAGE_CHUNK, i++) {
        size_t len = bytes - off < DEV_STAGE_CHUNK ? bytes - off : DEV_STAGE_CHUNK;
        int slot = (int)(i & 1);
        if (L->bounce_busy[slot] && (rc = L->ops->event_wait(L->b, slot)) != 0)
            return rc;
        if ((rc = L->ops->copy(L->b, DEV_D2H, DEV_HOST, L->bounce[slot], s, src + off, len)) != 0 ||
            (rc = L->ops->sync(L->b, s)) != 0 ||
            (rc = L->ops->copy(L->b, DEV_H2D, d, dst + off, DEV_HOST, L->bounce[slot], len)) != 0 ||
            (rc = L->ops->event_record(L->b, d, slot)) != 0)
            return rc;
        L->bounce_busy[slot] = true;
    }
    return 0;
}

static int copy(dev_layer *L, int dst_dev, void *dst, int src_dev, const void *src, size_t bytes)
{
    int rc;
    if ((rc = use(L, dst_dev)) != 0 || (rc = use(L, src_dev)) != 0)
        return rc;
    if (dst_dev == DEV_HOST) {
        L->st.d2h_copies++;
        return L->ops->copy(L->b, DEV_D2H, dst_dev, dst, src_dev, src, bytes);
    }
    if (src_dev == DEV_HOST) {
        L->st.h2d_copies++;
        return L->ops->copy(L->b, DEV_H2D, dst_dev, dst, src_dev, src, bytes);
    }
    if (dst_dev == src_dev) {
        L->st.local_copies++;
        return L->ops->copy(L->b, DEV_D2D, dst_dev, dst, src_dev, src, bytes);
    }
    if (dev_peer(L, dst_dev, src_dev)) {
        L->st.peer_copies++;
        L->st.peer_bytes += bytes;
        return L->ops->copy(L->b, DEV_PEER, dst_dev, dst, src_dev, src, bytes);
    }
    L->st.staged_copies++;
    L->st.staged_bytes += bytes;
    return staged(L, dst_dev, dst, src_dev, src, bytes);
}

int dev_copy(dev_layer *L, int dst_dev, void *dst, int src_dev, const void *src, size_t bytes)
{
    int rc;
    if ((rc = bad_dev(L, dst_dev, true)) != 0 || (rc = bad_dev(L, src_dev, true)) != 0)
        return rc;
    if (bytes == 0 || (dst == src && dst_dev == src_dev))
        return 0;
    if (dst_dev == DEV_HOST && src_dev == DEV_HOST) {
        memcpy(dst, src, bytes);
        return 0;
    }
    dev_enter(L);
    rc = copy(L, dst_dev, dst, src_dev, src, bytes);
    dev_leave(L);
    return rc;
}

int dev_zero(dev_layer *L, int dev, void *p, size_t bytes)
{
    int rc = bad_dev(L, dev, false);
    if (rc || bytes == 0)
        return rc;
    dev_enter(L);
    if ((rc = use(L, dev)) == 0)
        rc = L->ops->zero(L->b, dev, p, bytes);
    dev_leave(L);
    return rc;
}

int dev_sum(dev_layer *L, int dev, kvs_dtype dtype, void *dst, const void *const *srcs, int k,
            uint64_t count)
{
    int rc = bad_dev(L, dev, false);
    if (rc)
        return rc;
    if (k < 1 || k > DEV_SUM_MAX || (unsigned)dtype >= KVS_NUM_DTYPES)
        return err_set(KVS_EINVAL, "device %d: sum of %d inputs of dtype %d", dev, k, (int)dtype);
    if (count == 0 || (k == 1 && dst == srcs[0]))
        return 0;
    dev_enter(L);
    if ((rc = use(L, dev)) != 0) {
    } else if (k == 1) {
        L->st.local_copies++;
        rc = L->ops->copy(L->b, DEV_D2D, dev, dst, dev, srcs[0], count * kvs_dtype_size(dtype));
    } else {
        L->st.sums++;
        rc = L->ops->sum(L->b, dev, dtype, dst, srcs, k, count);
    }
    dev_leave(L);
    return rc;
}

int dev_sync(dev_layer *L, int dev)
{
    int rc = dev == -1 ? 0 : bad_dev(L, dev, false);
    if (rc)
        return rc;
    if (dev >= 0 && !L->up[dev])
        return 0; /* nothing was ever queued there */
    dev_enter(L);
    rc = L->ops->sync(L->b, dev);
    dev_leave(L);
    return rc;
}

/* ---- memory shared with the processes of the host ---- */

bool dev_ipc_ok(const dev_layer *L)
{
    return L->ops->alloc_shared != NULL;
}

/* dev exists and the backend can share memory. */
static int ipc_dev(const dev_layer *L, int dev)
{
    int rc = bad_dev(L, dev, false);
    if (rc == 0 && !dev_ipc_ok(L))
        rc = err_set(KVS_EDEVICE, "the %s backend cannot share device memory with other "
                     "processes", L->ops->name);
    return rc;
}

int dev_alloc_shared(dev_layer *L, int dev, size_t bytes, void **out)
{
    int rc = ipc_dev(L, dev);
    *out = NULL;
    if (rc)
        return rc;
    dev_enter(L);
    if ((rc = use(L, dev)) == 0)
        rc = L->ops->alloc_shared(L->b, dev, bytes ? bytes : 1, out);
    dev_leave(L);
    return rc;
}

int dev_ipc_export(dev_layer *L, int dev, void *p, dev_ipc *out)
{
    int rc = ipc_dev(L, dev);
    memset(out, 0, sizeof *out);
    if (rc)
        return rc;
    dev_enter(L);
    if ((rc = use(L, dev)) == 0)
        rc = L->ops->ipc_export(L->b, dev, p, out);
    dev_leave(L);
    return rc;
}

static uint64_t ipc_hash(int pid, const dev_ipc *h)
{
    uint64_t x = hmap_mix((uint64_t)(uint32_t)pid + 1);
    for (size_t i = 0; i < sizeof h->b; i += 8) {
        uint64_t w;
        memcpy(&w, h->b + i, 8);
        x = hmap_mix(x ^ w);
    }
    return x;
}

static int too_small(int dev, int pid, size_t need, size_t size)
{
    return err_set(KVS_EDEVICE, "device %d: the buffer process %d shares has %zu bytes, "
                   "%zu are needed", dev, pid, size, need);
}

int dev_ipc_open(dev_layer *L, int dev, int pid, const dev_ipc *h, size_t need, void **out)
{
    int rc = ipc_dev(L, dev);
    *out = NULL;
    if (rc)
        return rc;
    uint64_t hk = ipc_hash(pid, h);
    dev_ipc_map *head = hmap_get(&L->ipc, hk);
    for (dev_ipc_map *e = head; e; e = e->next)
        if (e->pid == pid && memcmp(&e->h, h, sizeof *h) == 0) {
            if (need > e->size)
                return too_small(dev, pid, need, e->size);
            *out = e->p;
            return 0;
        }
    dev_ipc_map *e = calloc(1, sizeof *e);
    if (e == NULL)
        return err_set(KVS_ENOMEM, "out of memory");
    dev_enter(L);
    if ((rc = use(L, dev)) == 0)
        rc = L->ops->ipc_open(L->b, dev, pid, h, &e->p, &e->size);
    if (rc == 0 && need > e->size) {
        L->ops->ipc_close(L->b, e->p);
        rc = too_small(dev, pid, need, e->size);
    } else if (rc == 0) {
        e->pid = pid;
        e->h = *h;
        e->next = head;
        if (hmap_put(&L->ipc, hk, e) != 0) {
            L->ops->ipc_close(L->b, e->p);
            rc = err_set(KVS_ENOMEM, "out of memory");
        }
    }
    dev_leave(L);
    if (rc) {
        free(e);
        return rc;
    }
    *out = e->p;
    return 0;
}

int dev_ipc_copy(dev_layer *L, int dev, void *dst, const void *src, size_t bytes)
{
    int rc = ipc_dev(L, dev);
    if (rc || bytes == 0 || dst == src)
        return rc;
    dev_enter(L);
    if ((rc = use(L, dev)) == 0 && (rc = L->ops->ipc_copy(L->b, dev, dst, src, bytes)) == 0) {
        L->st.ipc_copies++;
        L->st.ipc_bytes += bytes;
    }
    dev_leave(L);
    return rc;
}

void dev_stats(const dev_layer *L, kvs_device_stats *out)
{
    *out = L->st;
}

void dev_count_nccl(dev_layer *L)
{
    L->st.nccl_calls++;
}
