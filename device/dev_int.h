/* dev_int.h - the backend interface of device/ (private to the folder).
 *
 * A backend implements the primitives; dev.c adds what is common: argument
 * checks, the choice between peer and staged copies, the staged path itself
 * (two pinned bounce buffers, chunked), and the counters. */
#ifndef KVS_DEVICE_INT_H
#define KVS_DEVICE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/hmap.h"
#include "device/dev_opts.h"
#include "kvs.h"

enum dev_kind { DEV_H2D = 1, DEV_D2H = 2, DEV_D2D = 3, DEV_PEER = 4 };

typedef struct dev_ops {
    const char *name;
    void (*close)(void *b);
    int (*alloc)(void *b, int dev, size_t bytes, void **out); /* dev DEV_HOST: pinned */
    void (*free)(void *b, int dev, void *p);
    /* Enqueue a copy (kind); H2D runs on dst_dev, D2H on src_dev, D2D on
     * dst_dev (== src_dev), PEER on dst_dev after src_dev's earlier work. */
    int (*copy)(void *b, int kind, int dst_dev, void *dst, int src_dev, const void *src,
                size_t bytes);
    int (*zero)(void *b, int dev, void *p, size_t bytes);
    int (*sum)(void *b, int dev, kvs_dtype dtype, void *dst, const void *const *srcs, int k,
               uint64_t count);
    int (*sync)(void *b, int dev);
    /* Bounce-buffer slot events: record after work enqueued on dev; the host
     * waits for the last record of slot. */
    int (*event_record)(void *b, int dev, int slot);
    int (*event_wait)(void *b, int slot);
    /* Open dev (its context, event, peer access with the opened devices:
     * the backend sets L->access for those pairs). */
    int (*use)(void *b, int dev);
    /* Save the calling thread's current device (outermost call of a
     * nesting) / restore it. */
    void (*save)(void *b);
    void (*restore)(void *b);
    /* Memory shared with other processes of the host (dev.h); NULL where
     * the backend cannot share.  ipc_open maps a handle once (dev.c keeps
     * what it mapped); ipc_close unmaps it at dev_close. */
    int (*alloc_shared)(void *b, int dev, size_t bytes, void **out);
    int (*ipc_export)(void *b, int dev, void *p, dev_ipc *out);
    /* *size: the bytes that may be touched from *out (SIZE_MAX: the
     * backend cannot tell) */
    int (*ipc_open)(void *b, int dev, int pid, const dev_ipc *h, void **out, size_t *size);
    void (*ipc_close)(void *b, void *p);
    int (*ipc_copy)(void *b, int dev, void *dst, const void *src, size_t bytes);
} dev_ops;

/* One mapping of another process's buffer (dev_ipc_open). */
typedef struct dev_ipc_map {
    int pid;
    dev_ipc h;
    void *p;
    size_t size; /* bytes from p (SIZE_MAX: unknown) */
    struct dev_ipc_map *next; /* same hash */
} dev_ipc_map;

struct dev_layer {
    const dev_ops *ops;
    void *b;
    int n;
    int nback; /* the backend's devices (the host's, as the backend sees them) */
    bool p2p;
    int map[DEV_MAX];              /* backend device of kvsd device i */
    bool up[DEV_MAX];              /* opened (dev_use) */
    bool access[DEV_MAX][DEV_MAX]; /* [dst][src]: the backend can copy src -> dst directly */
    void *bounce[2];               /* pinned, DEV_STAGE_CHUNK each; allocated on first use */
    bool bounce_busy[2];
    kvs_device_stats st;
    hmap ipc; /* hash of (pid, handle) -> dev_ipc_map chain: what ipc_open mapped */
};

/* Backends fill ops, b, n, map and access (and return KVS_* after
 * err_set); what names the backend's devices in messages ("the CUDA
 * runtime sees"). */
int dev_sim_open(const dev_opts *o, dev_layer *L);
int dev_cuda_open(const dev_opts *o, dev_layer *L);
/* L->map, L->n and L->nback from o's KVS_DEVICES over the backend's nback devices.
 * KVS_ECONFIG naming the entry that does not exist. */
int dev_select(const dev_opts *o, int nback, const char *what, dev_layer *L);

/* Bracket a public call: save the thread's current device on the
 * outermost entry, restore it on the matching leave. */
void dev_enter(dev_layer *L);
void dev_leave(dev_layer *L);

#endif
