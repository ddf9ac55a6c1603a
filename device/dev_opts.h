/* dev_opts.h - what opening a device layer takes (dev_opts) and the limits
 * that dev.c and every backend share (dev.h's users get it through dev.h;
 * the backends through dev_int.h, without dev.h: dev.c calls them). */
#ifndef KVS_DEVICE_OPTS_H
#define KVS_DEVICE_OPTS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/topo.h"

#define DEV_HOST (-1)
#define DEV_MAX TREE_MAX_N          /* devices per layer */
#define DEV_STAGE_CHUNK (4u << 20)  /* bytes per staged chunk */
#define DEV_SUM_MAX 64              /* inputs of one dev_sum (= RED_CUDA_MAX_INPUTS) */

typedef struct dev_layer dev_layer;

/* A handle of shared device memory for another process (dev_ipc_export). */
#define DEV_IPC_BYTES 64 /* = sizeof(cudaIpcMemHandle_t) */
typedef struct dev_ipc {
    uint8_t b[DEV_IPC_BYTES];
} dev_ipc;

typedef struct dev_opts {
    int sim_devices;        /* KVS_SIM_DEVICES: > 0 selects the simulated backend */
    bool p2p;               /* MXNET_ENABLE_GPU_P2P */
    const tree_topo *topo;  /* sim: which pairs can access each other (NULL: all) */
    double sim_gbps;        /* KVS_SIM_LINK_GBPS: sim pacing, GB/s per unit of link weight
                               (0: no pacing) */
    const char *cuda_plugin; /* KVS_CUDA_PLUGIN: path of libkvs_cuda.so (NULL or "":
                                search, device/cuda.c) */
    int ndevices;           /* KVS_DEVICES: entries (0: every backend device) */
    const int *devices;     /* backend device of kvsd device i (borrowed during dev_open) */
} dev_opts;

#endif
