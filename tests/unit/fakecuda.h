/* fakecuda.h - the unit tests' handle on the stand-in CUDA runtime
 * (tests/device/fakecuda.c, built as $(BUILD)/tests/libfakecuda.so next to
 * the test runner): fake_use() points libkvs at it (KVS_CUDA_PLUGIN, no
 * KVS_SIM_DEVICES) and returns its functions.  Header-only. */
#ifndef KVS_TESTS_UNIT_FAKECUDA_H
#define KVS_TESTS_UNIT_FAKECUDA_H

#include <check.h>
#include <dlfcn.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct fake {
    char path[4096];
    int (*SetDevice)(int);
    int (*GetDevice)(int *);
    int (*Malloc)(void **, size_t);
    int (*Free)(void *);
    int (*Memcpy)(void *, const void *, size_t, int);
    int (*CtxGetCurrent)(void **);
    uint64_t (*contexts)(void);
    uint64_t (*peers)(int);
    void *(*ctx)(int);
    long (*misplaced)(const char **);
    void (*pinned)(long *, long *);
    int (*owner)(const void *);
    long (*ipc_open)(void);
} fake;

/* Load the fake with ndev devices and make libkvs use it. */
static inline void fake_use(fake *f, int ndev)
{
    char exe[4096], n[16];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    ck_assert_int_gt(len, 0);
    exe[len] = 0;
    snprintf(f->path, sizeof f->path, "%s/tests/libfakecuda.so", dirname(exe));
    snprintf(n, sizeof n, "%d", ndev);
    setenv("FAKECUDA_DEVICES", n, 1);
    setenv("KVS_CUDA_PLUGIN", f->path, 1);
    unsetenv("KVS_SIM_DEVICES");
    unsetenv("KVS_DEVICES");
    void *h = dlopen(f->path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(h != NULL, "%s: %s (make builds it with test-unit)", f->path, dlerror());
#define FSYM(field, name)                                   \
    *(void **)&f->field = dlsym(h, name);                   \
    ck_assert_msg(f->field != NULL, "fake lacks %s", name);
    FSYM(SetDevice, "cudaSetDevice")
    FSYM(GetDevice, "cudaGetDevice")
    FSYM(Malloc, "cudaMalloc")
    FSYM(Free, "cudaFree")
    FSYM(Memcpy, "cudaMemcpy")
    FSYM(CtxGetCurrent, "cuCtxGetCurrent")
    FSYM(contexts, "fakecuda_contexts")
    FSYM(peers, "fakecuda_peers")
    FSYM(ctx, "fakecuda_ctx")
    FSYM(misplaced, "fakecuda_misplaced")
    FSYM(pinned, "fakecuda_pinned")
    FSYM(owner, "fakecuda_owner")
    FSYM(ipc_open, "fakecuda_ipc_open")
#undef FSYM
}

/* The calling thread's current context. */
static inline void *fake_current(const fake *f)
{
    void *c = (void *)1;
    f->CtxGetCurrent(&c);
    return c;
}

/* No call so far used a pointer from the wrong device. */
static inline void fake_none_misplaced(const fake *f)
{
    const char *what = "";
    long m = f->misplaced(&what);
    ck_assert_msg(m == 0, "%ld CUDA calls with the wrong current device; last: %s", m, what);
}

#endif
