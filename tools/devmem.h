/* devmem.h - device memory for the test and benchmark programs, which link
 * no CUDA: simulated devices (KVS_SIM_DEVICES=N: plain host memory, as
 * libkvs's sim backend expects) or CUDA devices through a dlopened
 * libcudart (the same library libkvs loads).  Header-only; not part of
 * libkvs. */
#ifndef KVS_TOOLS_DEVMEM_H
#define KVS_TOOLS_DEVMEM_H

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

typedef struct devmem {
    int sim;   /* 1: simulated devices */
    int n;     /* devices */
    int (*SetDevice)(int);
    int (*Malloc)(void **, size_t);
    int (*Free)(void *);
    int (*Memcpy)(void *, const void *, size_t, int);
    int (*GetDeviceCount)(int *);
} devmem;

/* Simulated when KVS_SIM_DEVICES > 0, else CUDA.  0, or -1 with no devices. */
static inline int devmem_open(devmem *m)
{
    static const char *const libs[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                                       "libcudart.so.11.0", NULL};
    const char *sim = getenv("KVS_SIM_DEVICES");
    void *h = NULL;
    memset(m, 0, sizeof *m);
    if (sim && atoi(sim) > 0) {
        m->sim = 1;
        m->n = atoi(sim);
        return 0;
    }
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
    return 0;
}

/* bytes on device dev (bytes rounded up for the simulated case); NULL on failure */
static inline void *devmem_alloc(const devmem *m, int dev, size_t bytes)
{
    void *p = NULL;
    if (m->sim)
        return aligned_alloc(64, (bytes + 64) & ~(size_t)63);
    if (m->SetDevice(dev) != 0 || m->Malloc(&p, bytes ? bytes : 1) != 0)
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
    m->SetDevice(dev);
    m->Free(p);
}

/* host -> device (dst on dev) / device -> host; synchronous */
static inline void devmem_put(const devmem *m, int dev, void *dst, const void *src, size_t bytes)
{
    if (m->sim) {
        memcpy(dst, src, bytes);
        return;
    }
    m->SetDevice(dev);
    m->Memcpy(dst, src, bytes, 1 /* cudaMemcpyHostToDevice */);
}

static inline void devmem_get(const devmem *m, int dev, void *dst, const void *src, size_t bytes)
{
    if (m->sim) {
        memcpy(dst, src, bytes);
        return;
    }
    m->SetDevice(dev);
    m->Memcpy(dst, src, bytes, 2 /* cudaMemcpyDeviceToHost */);
}

#endif
