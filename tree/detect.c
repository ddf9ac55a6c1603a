/* detect.c - the link matrix of this machine's GPUs from the CUDA runtime.
 *
 * libcudart is loaded with dlopen() so that the CPU build (and kvs-topo,
 * which is linked without CUDA) can still read the matrix on a GPU machine.
 * Weight of i -> j: cudaDevP2PAttrPerformanceRank + 1 where
 * cudaDevP2PAttrAccessSupported, then MXNet's adjustment
 * (tree_topo_from_ranks). */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "tree/tree.h"

enum { P2P_PERF_RANK = 1, P2P_ACCESS_SUPPORTED = 2 }; /* cudaDeviceP2PAttr */

typedef int (*count_fn)(int *);
typedef int (*attr_fn)(int *, int, int, int);

int tree_topo_detect(tree_topo *t, bool raw, char *err, size_t errlen)
{
    static const char *const libs[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                                       "libcudart.so.11.0", NULL};
    int rank[TREE_MAX_N * TREE_MAX_N] = {0};
    void *h = NULL;
    count_fn count;
    attr_fn attr;
    int n = 0, rc = KVS_EDEVICE, e;
    memset(t, 0, sizeof *t);
    for (int i = 0; libs[i] != NULL && h == NULL; i++)
        h = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        snprintf(err, errlen, "no CUDA runtime found (libcudart.so could not be loaded): "
                              "detect needs a machine with NVIDIA GPUs and CUDA");
        return KVS_EDEVICE;
    }
    count = (count_fn)(uintptr_t)dlsym(h, "cudaGetDeviceCount");
    attr = (attr_fn)(uintptr_t)dlsym(h, "cudaDeviceGetP2PAttribute");
    if (count == NULL || attr == NULL) {
        snprintf(err, errlen, "CUDA runtime lacks cudaGetDeviceCount/cudaDeviceGetP2PAttribute");
        goto out;
    }
    if ((e = count(&n)) != 0 || n < 1) {
        snprintf(err, errlen, "no GPU found (cudaGetDeviceCount: error %d, %d devices)", e, n);
        goto out;
    }
    if (n > TREE_MAX_N) {
        snprintf(err, errlen, "%d GPUs found, the planner supports at most %d", n, TREE_MAX_N);
        goto out;
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            int ok = 0, perf = 0;
            if (i == j)
                continue;
            if (attr(&ok, P2P_ACCESS_SUPPORTED, i, j) != 0 || !ok)
                continue;
            if (attr(&perf, P2P_PERF_RANK, i, j) != 0)
                continue;
            rank[i * n + j] = perf + 1;
        }
    if (raw) {
        rc = tree_topo_init(t, n);
        if (rc == 0)
            for (int i = 0; i < n * n; i++)
                t->w[i] = rank[i];
    } else {
        rc = tree_topo_from_ranks(n, rank, t);
    }
    if (rc != 0)
        snprintf(err, errlen, "out of memory");
    else
        snprintf(t->name, sizeof t->name, "detected");
out:
    dlclose(h);
    return rc;
}
