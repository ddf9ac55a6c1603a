/* pinned.h - a store's pool of pinned host staging buffers (private to
 * worker/).
 *
 * Staging a device array through host memory needs page-locked buffers,
 * and pinning is expensive (cudaMallocHost of 64 MiB takes milliseconds
 * and synchronises the device).  The pool keeps every buffer it allocated:
 * a buffer given back is handed out again to the next request it fits
 * (capacity from the size up to twice the size, the smallest such), so a
 * training loop that stages the same key parts round after round pins them
 * in its first round only.  The pool grows on demand and is released only
 * by wrk_pinned_free.
 *
 * Threads: wrk_pinned_get allocates (CUDA) and is called by the comm layer
 * on an application or comm thread, holding the comm lock and never the
 * store lock; wrk_pinned_put makes no CUDA call and may run on any thread
 * (the I/O thread, under the store lock); wrk_pinned_size any thread. */
#ifndef KVS_WORKER_PINNED_H
#define KVS_WORKER_PINNED_H

#include <stddef.h>
#include <stdint.h>

#include "device/dev.h"

typedef struct wrk_pinned wrk_pinned;

/* A pool over L's pinned memory (L outlives it).  NULL on out of memory. */
wrk_pinned *wrk_pinned_new(dev_layer *L);
/* Release every buffer (all must have been put back).  NULL: no-op. */
void wrk_pinned_free(wrk_pinned *p);
/* *out: a buffer of at least bytes (reused, or pinned now).  KVS_ENOMEM /
 * KVS_EDEVICE (the pinning failed). */
int wrk_pinned_get(wrk_pinned *p, size_t bytes, void **out);
/* Give buf (from wrk_pinned_get) back.  NULL: no-op. */
void wrk_pinned_put(wrk_pinned *p, void *buf);
/* Bytes pinned and buffers held (in use or free). */
void wrk_pinned_size(const wrk_pinned *p, uint64_t *bytes, uint64_t *buffers);

#endif
