/* devmem.h - device memory for the test and benchmark programs, which link
 * no CUDA: simulated devices (KVS_SIM_DEVICES=N: plain host memory, as
 * libkvs's sim backend expects) or CUDA devices through a dlopened
 * libcudart (the same library libkvs loads).  Header-only; not part of
 * libkvs. */
#ifndef KVS_TOOLS_DEVMEM_H
#define KVS_TOOLS_DEVMEM_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"

typedef struct devmem {
    int sim;   /* 1: simulated devices */
    int n;     /* devices */
    int (*SetDevice)(int);
    int (*Malloc)(void **, size_t);
    int (*Free)(void *);
    int (*Memcpy)(void *, const void *, size_t, int);
    int (*GetDeviceCount)(int *);
    int map[64]; /* CUDA ordinal of device i (KVS_DEVICES, as libkvs reads it) */
} devmem;

/* The environment as libkvs reads it (static: cfg is large).  A value
 * that does not parse: one line on stderr and NULL. */
static inline const cfg *devmem_cfg(void)
{
    static cfg c;
    static int state; /* 0 unread, 1 read, -1 bad */
    char err[512];
    if (state == 0) {
        state = cfg_load(&c, false, err, sizeof err) == 0 ? 1 : -1;
        if (state < 0)
            fprintf(stderr, "%s\n", err);
    }
    return state > 0 ? &c : NULL;
}

/* Simulated when KVS_SIM_DEVICES > 0, else CUDA.  0, or -1 with no devices
 * (or a variable that does not parse). */
static inline int devmem_open(devmem *m)
{
    static const char *const libs[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                                       "libcudart.so.11.0", NULL};
    const cfg *c = devmem_cfg();
    void *h = NULL;
    memset(m, 0, sizeof *m);
    if (c == NULL)
        return -1;
    if (c->sim_devices > 0) { /* (KVS_DEVICES: as many devices as entries) */
        m->sim = 1;
        m->n = c->ndevices > 0 ? c->ndevices : c->sim_devices;
        return 0;
    }
    /* the library libkvs loads first (its plugin, or a stand-in runtime) */
    if (c->cuda_plugin[0])
        h = dlopen(c->cuda_plugin, RTLD_NOW | RTLD_LOCAL);
    for (int i = 0; libs[i] && h == NULL; i++)
        h = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        return -1;
    *(void **)&m->SetDevice = dlsym(h, "cudaSetDevice");
    *(void **)&m->Malloc = dlsym(h, "cudaMalloc");
    *(void **)&m->Free = dlsym(h, "cudaFree");
    *(void **)&m->Memcpy = dlsym(h, "cudaMemcpy");
    *(void **)&m->GetDeviceCount = dlsym(h, "cudaGetDeviceCount");
    if (!m->SetDevice || !m->Malloc || !m->Free || !m->Memcpy || !m->GetDeviceCount ||
        m->GetDeviceCount(&m->n) != 0 || m->n < 1)
        return -1;
    for (int i = 0; i < 64; i++)
        m->map[i] = i;
    /* KVS_DEVICES=a,b,...: device i is CUDA device entry i (entries may
     * repeat), as in libkvs */
    int sel[64], nsel = 0;
    char err[256];
    if (cfg_get_devices(sel, &nsel, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    if (nsel > 0) {
        for (int k = 0; k < nsel && k < 64; k++) {
            if (sel[k] >= m->n)
                return -1;
            m->map[k] = sel[k];
        }
        m->n = nsel < 64 ? nsel : 64;
    }
    return 0;
}

/* bytes on device dev (bytes rounded up for the simulated case); NULL on failure */
static inline void *devmem_alloc(const devmem *m, int dev, size_t bytes)
{
    void *p = NULL;
    if (m->sim)
        return aligned_alloc(64, (bytes + 64) & ~(size_t)63);
    if (m->SetDevice(m->map[dev]) != 0 || m->Malloc(&p, bytes ? bytes : 1) != 0)
        return NULL;
    return p;
}

static inline void devmem_free(const devmem *m, int dev, void *p)
{
    if (p == NULL)
        return;
    if (m->sim) {
        free(p);
        return;
    }
    m->SetDevice(m->map[dev]);
    m->Free(p);
}

/* host -> device (dst on dev) / device -> host; synchronous */
static inline void devmem_put(const devmem *m, int dev, void *dst, const void *src, size_t bytes)
{
    if (m->sim) {
        memcpy(dst, src, bytes);
        return;
    }
    m->SetDevice(m->map[dev]);
    m->Memcpy(dst, src, bytes, 1 /* cudaMemcpyHostToDevice */);
}

static inline void devmem_get(const devmem *m, int dev, void *dst, const void *src, size_t bytes)
{
    if (m->sim) {
        memcpy(dst, src, bytes);
        return;
    }
    m->SetDevice(m->map[dev]);
    m->Memcpy(dst, src, bytes, 2 /* cudaMemcpyDeviceToHost */);
}

#endif
