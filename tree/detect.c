/* detect.c - the link matrix of this machine's GPUs.
 *
 * Both libraries are loaded with dlopen() so that the CPU build (and
 * kvs-topo, linked without CUDA) can still read the matrix on a GPU machine.
 *
 * 1. NVML (libnvidia-ml.so.1): per GPU pair the number of active NVLinks
 *    (weight 1 + links, the NV# convention); links into an NVSwitch count
 *    for every pair of GPUs on the switch fabric (the smaller of the two
 *    GPUs' switch link counts); pairs without NVLink but with P2P status OK
 *    get PCIe weight 1.  Not raw: PCIe pairs drop to 0 when the NVLink graph
 *    alone connects all GPUs (MXNet's rule).  GPUs are put in CUDA's order
 *    by PCI bus id when the CUDA runtime is there (CUDA_VISIBLE_DEVICES and
 *    CUDA_DEVICE_ORDER apply), else in NVML's order.
 * 2. Without NVML: CUDA's cudaDevP2PAttrPerformanceRank + 1 where
 *    cudaDevP2PAttrAccessSupported, then MXNet's adjustment
 *    (tree_topo_from_ranks). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tree/tree.h"

enum { P2P_PERF_RANK = 1, P2P_ACCESS_SUPPORTED = 2 }; /* cudaDeviceP2PAttr */

typedef int (*count_fn)(int *);
typedef int (*attr_fn)(int *, int, int, int);
typedef int (*busid_fn)(char *, int, int);

/* ------------------------------------------------------------------ NVML */

#define NVML_LINKS 18 /* NVML_NVLINK_MAX_LINKS (Hopper, Blackwell) */

typedef struct nv_pci { /* nvmlPciInfo_t */
    char bus_id_legacy[16];
    unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
    char bus_id[32];
} nv_pci;

typedef void *nv_dev;

typedef struct nvml {
    void *h;
    int (*init)(void);
    int (*shutdown)(void);
    int (*count)(unsigned *);
    int (*handle)(unsigned, nv_dev *);
    int (*pci)(nv_dev, nv_pci *);
    int (*link_state)(nv_dev, unsigned, int *);
    int (*remote_pci)(nv_dev, unsigned, nv_pci *);
    int (*remote_type)(nv_dev, unsigned, int *); /* optional */
    int (*p2p)(nv_dev, nv_dev, int, int *);
} nvml;

static void *sym(void *h, const char *a, const char *b)
{
    void *p = dlsym(h, a);
    return p != NULL || b == NULL ? p : dlsym(h, b);
}

static bool nvml_load(nvml *m)
{
    memset(m, 0, sizeof *m);
    m->h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (m->h == NULL)
        return false;
    *(void **)&m->init = sym(m->h, "nvmlInit_v2", "nvmlInit");
    *(void **)&m->shutdown = sym(m->h, "nvmlShutdown", NULL);
    *(void **)&m->count = sym(m->h, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
    *(void **)&m->handle =
        sym(m->h, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
    *(void **)&m->pci = sym(m->h, "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2");
    *(void **)&m->link_state = sym(m->h, "nvmlDeviceGetNvLinkState", NULL);
    *(void **)&m->remote_pci =
        sym(m->h, "nvmlDeviceGetNvLinkRemotePciInfo_v2", "nvmlDeviceGetNvLinkRemotePciInfo");
    *(void **)&m->remote_type = sym(m->h, "nvmlDeviceGetNvLinkRemoteDeviceType", NULL);
    *(void **)&m->p2p = sym(m->h, "nvmlDeviceGetP2PStatus", NULL);
    if (m->init == NULL || m->shutdown == NULL || m->count == NULL || m->handle == NULL ||
        m->pci == NULL || m->link_state == NULL || m->remote_pci == NULL || m->p2p == NULL ||
        m->init() != 0) {
        dlclose(m->h);
        m->h = NULL;
        return false;
    }
    return true;
}

/* "0000:3B:00.0" or "00000000:3b:00.0" -> domain, bus, device */
static bool parse_bdf(const char *s, unsigned *dom, unsigned *bus, unsigned *dev)
{
    unsigned f;
    return sscanf(s, "%x:%x:%x.%x", dom, bus, dev, &f) == 4;
}

static bool same_pci(const nv_pci *a, const nv_pci *b)
{
    return a->domain == b->domain && a->bus == b->bus && a->device == b->device;
}

/* The matrix from NVML; order[i] = NVML index of CUDA device i (or i).
 * 0, or -1 (info says why) to fall back to CUDA. */
static int detect_nvml(nvml *m, int n, const int *order, bool raw, tree_topo *t, char *info,
                       size_t infolen)
{
    nv_dev dev[TREE_MAX_N];
    nv_pci pci[TREE_MAX_N];
    int links[TREE_MAX_N][TREE_MAX_N] = {{0}}, sw[TREE_MAX_N] = {0}, p2p[TREE_MAX_N][TREE_MAX_N];
    int nvl = 0, nsw = 0;
    for (int i = 0; i < n; i++)
        if (m->handle((unsigned)order[i], &dev[i]) != 0 || m->pci(dev[i], &pci[i]) != 0) {
            snprintf(info, infolen, "NVML: no handle or PCI info for GPU %d", i);
            return -1;
        }
    for (int i = 0; i < n; i++) {
        for (unsigned l = 0; l < NVML_LINKS; l++) {
            int on = 0, type = -1, j;
            nv_pci rp;
            if (m->link_state(dev[i], l, &on) != 0 || on != 1)
                continue;
            if (m->remote_pci(dev[i], l, &rp) != 0)
                continue;
            for (j = 0; j < n && !same_pci(&rp, &pci[j]); j++)
                ;
            if (j < n && j != i) {
                links[i][j]++;
                nvl++;
                continue;
            }
            if (m->remote_type != NULL && m->remote_type(dev[i], l, &type) == 0 && type == 2)
                sw[i]++; /* NVML_NVLINK_DEVICE_TYPE_SWITCH */
            else if (m->remote_type == NULL && j == n)
                sw[i]++; /* a link to no GPU we know: the switch fabric */
        }
        nsw += sw[i] > 0;
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            int st = 1;
            p2p[i][j] = i != j && m->p2p(dev[i], dev[j], 0, &st) == 0 && st == 0;
            if (i != j && sw[i] > 0 && sw[j] > 0)
                links[i][j] += sw[i] < sw[j] ? sw[i] : sw[j];
        }
    if (tree_topo_init(t, n) != 0)
        return -1;
    /* is the NVLink graph alone connected? */
    bool reach[TREE_MAX_N] = {true};
    int stack[TREE_MAX_N], top = 0, seen = 1;
    stack[top++] = 0;
    while (top > 0) {
        int u = stack[--top];
        for (int v = 0; v < n; v++)
            if (!reach[v] && links[u][v] > 0 && links[v][u] > 0) {
                reach[v] = true;
                seen++;
                stack[top++] = v;
            }
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (i != j)
                t->w[i * n + j] = links[i][j] > 0 ? 1 + links[i][j]
                                  : p2p[i][j] && (raw || seen < n) ? 1
                                                                   : 0;
    snprintf(info, infolen, "nvml: %d GPUs, %d NVLinks between GPUs, %d on an NVSwitch%s", n,
             nvl, nsw, seen == n && n > 1 ? ", NVLink connects all" : "");
    return 0;
}

/* ------------------------------------------------------------------ CUDA */

int tree_topo_detect(tree_topo *t, bool raw, const char *plugin, char *err, size_t errlen)
{
    static const char *const libs[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                                       "libcudart.so.11.0", NULL};
    int rank[TREE_MAX_N * TREE_MAX_N] = {0}, order[TREE_MAX_N];
    void *h = NULL;
    count_fn count = NULL;
    attr_fn attr = NULL;
    busid_fn busid = NULL;
    int n = 0, rc = KVS_EDEVICE, e;
    nvml m;
    bool have_nvml;
    char info[TREE_NAME_MAX] = "";
    memset(t, 0, sizeof *t);
    if (plugin && *plugin)
        h = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
    for (int i = 0; libs[i] != NULL && h == NULL; i++)
        h = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
    if (h != NULL) {
        count = (count_fn)(uintptr_t)dlsym(h, "cudaGetDeviceCount");
        attr = (attr_fn)(uintptr_t)dlsym(h, "cudaDeviceGetP2PAttribute");
        busid = (busid_fn)(uintptr_t)dlsym(h, "cudaDeviceGetPCIBusId");
    }
    have_nvml = nvml_load(&m);
    if (have_nvml) {
        unsigned nn = 0;
        bool ok = m.count(&nn) == 0 && nn >= 1 && nn <= TREE_MAX_N;
        n = (int)nn;
        if (ok && count != NULL && busid != NULL) { /* CUDA's devices, CUDA's order */
            int cn = 0;
            ok = count(&cn) == 0 && cn >= 1 && cn <= n;
            for (int i = 0; ok && i < cn; i++) {
                char b[64];
                unsigned d, bu, dv;
                int k;
                ok = busid(b, sizeof b, i) == 0 && parse_bdf(b, &d, &bu, &dv);
                for (k = 0; ok && k < n; k++) {
                    nv_dev x;
                    nv_pci p;
                    if (m.handle((unsigned)k, &x) == 0 && m.pci(x, &p) == 0 && p.domain == d &&
                        p.bus == bu && p.device == dv)
                        break;
                }
                ok = ok && k < n;
                order[i] = k;
            }
            n = cn;
        } else {
            for (int i = 0; i < n; i++)
                order[i] = i;
        }
        if (ok && detect_nvml(&m, n, order, raw, t, info, sizeof info) == 0) {
            snprintf(t->name, sizeof t->name, "%s", info);
            m.shutdown();
            dlclose(m.h);
            rc = 0;
            goto out;
        }
        m.shutdown();
        dlclose(m.h);
    }
    if (h == NULL) {
        snprintf(err, errlen, "no CUDA runtime found (libcudart.so could not be loaded)%s: "
                              "detect needs a machine with NVIDIA GPUs",
                 have_nvml ? " and NVML gave no matrix" : " and no NVML (libnvidia-ml.so.1)");
        return KVS_EDEVICE;
    }
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
        snprintf(t->name, sizeof t->name, "cuda: %d GPUs, P2P performance ranks%s", n,
                 have_nvml ? " (NVML gave no matrix)" : "");
out:
    if (h != NULL)
        dlclose(h);
    return rc;
}

/* The raw matrix of the machine, cut to the selection (pairs on one GPU
 * rank above every link), then (not raw) MXNet's adjustment over it. */
int tree_topo_detect_sel(tree_topo *t, bool raw, const char *plugin, int nsel, const int *sel,
                         char *err, size_t errlen)
{
    int rank[TREE_MAX_N * TREE_MAX_N] = {0}, top = 1, rc;
    tree_topo all;
    if (nsel <= 0)
        return tree_topo_detect(t, raw, plugin, err, errlen);
    memset(t, 0, sizeof *t);
    if (nsel > TREE_MAX_N) {
        snprintf(err, errlen, "%d devices selected, the planner supports at most %d", nsel,
                 TREE_MAX_N);
        return KVS_EINVAL;
    }
    if ((rc = tree_topo_detect(&all, true, plugin, err, errlen)) != 0)
        return rc;
    for (int i = 0; i < nsel; i++)
        if (sel[i] < 0 || sel[i] >= all.n) {
            snprintf(err, errlen, "device %d does not exist (%d GPUs)", sel[i], all.n);
            tree_topo_fini(&all);
            return KVS_EDEVICE;
        }
    for (int i = 0; i < nsel; i++)
        for (int j = 0; j < nsel; j++) {
            double w = all.w[sel[i] * all.n + sel[j]];
            rank[i * nsel + j] = i == j ? 0 : (int)w;
            if (rank[i * nsel + j] > top)
                top = rank[i * nsel + j];
        }
    for (int i = 0; i < nsel; i++) /* one GPU named twice */
        for (int j = 0; j < nsel; j++)
            if (i != j && sel[i] == sel[j])
                rank[i * nsel + j] = top + 1;
    tree_topo_fini(&all);
    if (raw) {
        if ((rc = tree_topo_init(t, nsel)) == 0)
            for (int i = 0; i < nsel * nsel; i++)
                t->w[i] = rank[i];
    } else {
        rc = tree_topo_from_ranks(nsel, rank, t);
    }
    if (rc != 0) {
        snprintf(err, errlen, "out of memory");
        return rc;
    }
    snprintf(t->name, sizeof t->name, "detected, KVS_DEVICES selection of %d", nsel);
    return 0;
}
