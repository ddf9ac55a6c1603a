/* dev.h - every device (GPU) behind one interface.
 *
 * A dev_layer is one open backend with devices 0..n-1:
 *   sim   KVS_SIM_DEVICES=N: devices in host memory.  A device buffer is
 *         ordinary host memory that the layer treats as belonging to that
 *         device; it is touched only through dev_copy/dev_zero/dev_sum, exactly
 *         where the CUDA backend would copy or launch a kernel.
 *   cuda  the CUDA runtime (libcudart), loaded with dlopen at run time, and
 *         the reduce/ sum kernels from the plugin libkvs_cuda.so (built where
 *         nvcc exists; found through KVS_CUDA_PLUGIN, next to libkvs, or the
 *         library path).  A libkvs built without nvcc runs on a GPU machine
 *         as long as the plugin is installed; without it, copies work and
 *         sums fail with KVS_EDEVICE naming the plugin.
 * NCCL (dev_nccl_*) is a third module on top of an open cuda layer.
 *
 * Device ids are 0..n-1; DEV_HOST (-1) names host memory in dev_copy.
 *
 * Ordering.  Every operation is enqueued on the legacy default stream of the
 * device that runs it (a copy: the receiving device; a device-to-host copy:
 * the sending device), so it runs after all work the application issued
 * there before (and after blocking streams).  A copy reads its source only
 * after the source device's earlier work (event).  Nothing is complete until
 * dev_sync(): call it before the host reads or reuses any buffer.
 *
 * Device selection.  The layer's devices are numbered 0..n-1 ("kvsd
 * devices").  Without KVS_DEVICES they are the backend's devices (CUDA: the
 * ordinals the runtime reports, after CUDA_VISIBLE_DEVICES); with
 * KVS_DEVICES=a,b,... kvsd device i is backend device entry i (entries may
 * repeat: several kvsd devices then share one GPU).  Opening the layer
 * creates nothing on any device: a device is opened (CUDA: its primary
 * context made current, its event created, peer access enabled with the
 * devices opened before it) the first time a call names it, so a process
 * that only names GPU 3 creates one context, on GPU 3.
 *
 * Current device.  Every call saves the calling thread's current CUDA
 * context (and device) on entry and restores it before it returns; the
 * layer's own work sets the device explicitly before each CUDA call.
 *
 * Copies between two devices go peer to peer when the layer was opened with
 * p2p (MXNET_ENABLE_GPU_P2P=1) and the backend can access the pair (CUDA:
 * cudaDeviceCanAccessPeer + cudaDeviceEnablePeerAccess; sim: both directions
 * of the pair have a link in the topology, or no topology was given);
 * otherwise they are staged through two pinned host buffers in chunks.  The
 * counters (dev_stats) record which path every copy took.
 *
 * Memory shared between the processes of one host (the workers of a local
 * group, worker/group.c): dev_alloc_shared gives device memory that another
 * process can map (CUDA: cudaMalloc, exported with cudaIpcGetMemHandle and
 * mapped with cudaIpcOpenMemHandle; sim: memory of a shared memory file,
 * memfd, that the other process maps through /proc/PID/fd, which needs the
 * same rights as process_vm_readv).  A mapped buffer is read and written
 * only by dev_ipc_copy, on the stream of a device of this layer.
 *
 * Errors: KVS_* codes; KVS_EDEVICE with err_set() text that names the device
 * and the backend's error ("device 2: cudaMalloc(64 MiB): out of memory").
 * Nothing aborts.
 *
 * Threads: a layer is not thread-safe; its user (worker/comm.c) serialises
 * every call with one lock.
 */
#ifndef KVS_DEVICE_DEV_H
#define KVS_DEVICE_DEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvs.h"
#include "device/dev_opts.h"

/* Open the sim backend (o->sim_devices > 0) or the CUDA backend.  On success
 * *out owns the layer (dev_close).  KVS_EDEVICE when there is no CUDA
 * runtime or no GPU (the message says which). */
int dev_open(const dev_opts *o, dev_layer **out);
/* Synchronise and release everything; dev_close(NULL) is a no-op. */
void dev_close(dev_layer *L);

const char *dev_backend(const dev_layer *L); /* "sim" or "cuda" */
int dev_count(const dev_layer *L);
bool dev_is_cuda(const dev_layer *L);
/* Copies src -> dst (two devices) go peer to peer (both must be opened). */
bool dev_peer(const dev_layer *L, int dst, int src);
/* The backend device (CUDA ordinal) of kvsd device dev. */
int dev_ordinal(const dev_layer *L, int dev);
/* The backend's devices: those KVS_DEVICES chooses from (sim: KVS_SIM_DEVICES;
 * CUDA: the devices the runtime sees). */
int dev_backend_count(const dev_layer *L);
/* Whether dev has been opened (named by a call) since dev_open. */
bool dev_opened(const dev_layer *L, int dev);
/* Open dev now (what any call naming it does first).  KVS_EDEVICE. */
int dev_use(dev_layer *L, int dev);

/* bytes on dev (DEV_HOST: pinned host memory, allocated in the context of
 * the first opened device, else the caller's current one, else device 0's:
 * open the device it is for first, dev_use).  0 bytes gives a valid
 * pointer.  KVS_EDEVICE / KVS_ENOMEM. */
int dev_alloc(dev_layer *L, int dev, size_t bytes, void **out);
void dev_free(dev_layer *L, int dev, void *p);

/* dst (on dst_dev) = src (on src_dev), bytes; either may be DEV_HOST. */
int dev_copy(dev_layer *L, int dst_dev, void *dst, int src_dev, const void *src, size_t bytes);
/* p[0..bytes) = 0 on dev. */
int dev_zero(dev_layer *L, int dev, void *p, size_t bytes);
/* dst = srcs[0] + ... + srcs[k-1] on dev (1 <= k <= DEV_SUM_MAX; all on dev;
 * dst may alias srcs[0]).  Left to right per element; half types summed in
 * float32 and rounded once, so it equals red_sum() bit for bit. */
int dev_sum(dev_layer *L, int dev, kvs_dtype dtype, void *dst, const void *const *srcs, int k,
            uint64_t count);
/* Wait for all work on dev (-1: every device). */
int dev_sync(dev_layer *L, int dev);

/* ---- memory shared with the processes of the host ---- */

/* (the handle type, dev_ipc: dev_opts.h) */
/* Whether the backend can share device memory with other processes. */
bool dev_ipc_ok(const dev_layer *L);
/* bytes on dev (not DEV_HOST) that other processes of the host can map;
 * free with dev_free.  KVS_EDEVICE (also when the backend cannot share) /
 * KVS_ENOMEM. */
int dev_alloc_shared(dev_layer *L, int dev, size_t bytes, void **out);
/* The handle of p, a buffer of dev_alloc_shared(dev), for another process. */
int dev_ipc_export(dev_layer *L, int dev, void *p, dev_ipc *out);
/* Map the buffer that process pid exported as h for work on dev, of which
 * the caller will touch the first need bytes; the same (pid, h) gives the
 * same pointer, valid until dev_close.  KVS_EDEVICE naming the process
 * when it cannot be mapped (it exited, no rights, the handle is not one or
 * its buffer is smaller than need, where the backend can tell). */
int dev_ipc_open(dev_layer *L, int dev, int pid, const dev_ipc *h, size_t need, void **out);
/* dst = src (bytes) on dev's stream, where either may be a pointer of
 * dev_ipc_open and the other memory of dev (or the same).  Complete at
 * dev_sync(dev). */
int dev_ipc_copy(dev_layer *L, int dev, void *dst, const void *src, size_t bytes);

/* The counters since dev_open (kvs_device_stats of kvs.h). */
void dev_stats(const dev_layer *L, kvs_device_stats *out);
/* Count one NCCL collective (dev_nccl_*). */
void dev_count_nccl(dev_layer *L);

/* ---- NCCL (device/nccl.c) ---- */

typedef struct dev_nccl dev_nccl;

/* One communicator over all devices of L (a cuda layer; opens them all): libnccl is loaded
 * with dlopen.  KVS_EDEVICE "NCCL needs CUDA devices" on a sim layer, or
 * naming the missing library / the NCCL error. */
int dev_nccl_open(dev_layer *L, dev_nccl **out);
void dev_nccl_close(dev_nccl *c);
/* bufs[i] on device i (every device), in place: */
int dev_nccl_allreduce(dev_nccl *c, kvs_dtype dtype, void *const *bufs, uint64_t count);
int dev_nccl_reduce(dev_nccl *c, int root, kvs_dtype dtype, void *const *bufs, uint64_t count);
int dev_nccl_bcast(dev_nccl *c, int root, kvs_dtype dtype, void *const *bufs, uint64_t count);

#endif
