/* comm.h - local multi-device reduce and broadcast (private to worker/).
 *
 * The comm layer takes every call that involves a device array, and every
 * call of a device store type:
 *   WRK_COMM_CPU     ("local", "dist_sync", "dist_async"): MXNet's CommCPU:
 *                    device arrays are copied to pinned host memory, summed
 *                    on the CPU (reduce/ pool) by the host paths, copied back.
 *   WRK_COMM_DEVICE  ("device", "dist_*_device"): sums on the devices, flat
 *                    (merge buffer per key on a device chosen by size) or
 *                    along tree/ plans (MXNET_KVSTORE_USETREE=1).
 *   WRK_COMM_NCCL    ("nccl"): reduce/broadcast/all-reduce through NCCL.
 * For local store kinds the call completes before it returns; for dist
 * kinds the summed array goes through wrk_submit() and the broadcast to the
 * outputs runs on the comm thread once the replies are in (wrk_post).
 *
 * Threads: one lock (the comm's) serialises all device work; it is taken
 * before store->mu, never while holding it.  wrk_comm_post_locked() is
 * called with store->mu held (any thread) and only queues.
 */
#ifndef KVS_WORKER_COMM_H
#define KVS_WORKER_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvs.h"

enum wrk_comm_mode { WRK_COMM_CPU = 0, WRK_COMM_DEVICE, WRK_COMM_NCCL };

typedef struct wrk_comm wrk_comm;
typedef struct wrk_post wrk_post;
struct kvs_store;
struct wrk_op;

/* New comm for s (s->kind, s->async and s->c are set).  Device modes open
 * the devices now (KVS_EDEVICE / KVS_ECONFIG with a message). */
int wrk_comm_new(struct kvs_store *s, int mode, wrk_comm **out);
/* After the I/O thread stopped and every op is freed.  NULL: no-op. */
void wrk_comm_free(wrk_comm *c);

/* A device array on device: it exists (opens the devices on first use). */
int wrk_comm_check_device(wrk_comm *c, int device, uint64_t key, const char *what);

/* The comm layer handles this call (a device array, or a device mode). */
bool wrk_comm_takes(const wrk_comm *c, size_t n, const kvs_array *a, const kvs_array *b);

/* init / push / pull / pushpull (type: WRK_OP_*) through the comm layer.
 * Arguments are already checked by api.c (check_args). */
int wrk_comm_call(struct kvs_store *s, int type, size_t n, const uint64_t *keys,
                  const kvs_array *vals, const kvs_array *outs, int priority);

/* The device counters and the pinned staging pool's size.  Any thread. */
void wrk_comm_stats(wrk_comm *c, kvs_device_stats *out);
/* The pinned staging pool's bytes; lock-free (the I/O thread's metrics).
 * NULL: 0. */
uint64_t wrk_comm_pinned_bytes(wrk_comm *c);

#endif
