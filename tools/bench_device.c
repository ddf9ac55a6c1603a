/* bench_device.c - `kvs-bench --store device --devices N`: local reduce +
 * broadcast over N devices (one array per device summed, the sum written
 * back to an output on every device: one kvs_pushpull and its wait), flat vs
 * tree vs NCCL, per size.  With a dist store type (dist_sync_device) the
 * time includes the servers (run it under kvs-launch).
 *
 * Devices: simulated when KVS_SIM_DEVICES is set (then N must not exceed
 * it), else CUDA devices 0..N-1 (memory from cudaMalloc through a dlopened
 * libcudart).  Every output is checked exactly after the timed rounds.
 * Columns: median and p99 ms of one round; GB/s per device = array bytes /
 * median (the algorithm bandwidth of nccl-tests: what each device gets). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "kvs.h"
#include "tools/bench.h"
#include "tools/devmem.h"

static const char usage[] =
    "usage: kvs-bench --store TYPE --devices N [--modes LIST] [--sizes LIST]\n"
    "                 [--iters N] [--warmup N]\n"
    "  --store    device (default), local (CPU sums of device arrays), or\n"
    "             dist_sync_device (run under kvs-launch; one mode per run)\n"
    "  --devices  devices to use, 1..64 (simulated: KVS_SIM_DEVICES must be >= N)\n"
    "  --modes    flat,tree,nccl (default flat,tree, plus nccl on CUDA devices)\n"
    "  --sizes    bytes per array, K/M/G suffixes (default 256K,4M,64M)\n"
    "  --iters    timed rounds per size (default: 50 down to 5 by size)\n"
    "Environment: MXNET_KVSTORE_USETREE is set per mode; KVS_TOPOLOGY,\n"
    "MXNET_ENABLE_GPU_P2P, MXNET_KVSTORE_TREE_ARRAY_BOUND, KVS_SIM_LINK_GBPS apply.\n";

static devmem M;

static void copy(int dev, void *dst, const void *src, size_t bytes, int kind)
{
    if (kind == 1)
        devmem_put(&M, dev, dst, src, bytes);
    else
        devmem_get(&M, dev, dst, src, bytes);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    double v = strtod(s, &end);
    uint64_t mul = 1;
    if (end == s || v <= 0)
        return -1;
    if (*end == 'K' || *end == 'k')
        mul = 1 << 10, end++;
    else if (*end == 'M' || *end == 'm')
        mul = 1 << 20, end++;
    else if (*end == 'G' || *end == 'g')
        mul = 1 << 30, end++;
    *out = (uint64_t)(v * (double)mul);
    return *end ? -1 : 0;
}

int bench_device_main(int argc, char **argv)
{
    const char *store = "device", *modes = NULL;
    char *modes_dup = NULL;
    int ndev = 0, iters_opt = 0, warmup = 2, failures = 0;
    uint64_t sizes[16];
    int nsizes = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return 0;
        } else if (v && !strcmp(a, "--store")) {
            store = v, i++;
        } else if (v && !strcmp(a, "--devices")) {
            ndev = atoi(v), i++;
        } else if (v && !strcmp(a, "--modes")) {
            modes = v, i++;
        } else if (v && !strcmp(a, "--iters")) {
            iters_opt = atoi(v), i++;
        } else if (v && !strcmp(a, "--warmup")) {
            warmup = atoi(v), i++;
        } else if (v && !strcmp(a, "--sizes")) {
            char *d = strdup(v), *save, *t;
            for (t = strtok_r(d, ",", &save); t; t = strtok_r(NULL, ",", &save))
                if (nsizes == 16 || parse_size(t, &sizes[nsizes++]) != 0) {
                    fprintf(stderr, "kvs-bench: bad size '%s'\n", t);
                    return 2;
                }
            free(d);
            i++;
        } else {
            fprintf(stderr, "kvs-bench: unknown or incomplete argument '%s'\n%s", a, usage);
            return 2;
        }
    }
    if (ndev < 1 || ndev > 64 || iters_opt < 0 || warmup < 0) {
        fprintf(stderr, "kvs-bench: --devices N (1..64) is required\n%s", usage);
        return 2;
    }
    if (nsizes == 0) {
        sizes[0] = 256 << 10;
        sizes[1] = 4 << 20;
        sizes[2] = 64 << 20;
        nsizes = 3;
    }
    if (devmem_open(&M) != 0) {
        fprintf(stderr, "kvs-bench: no CUDA device: set KVS_SIM_DEVICES=N for simulated "
                        "devices\n");
        return 1;
    }
    int sim = M.sim;
    if (M.n < ndev) {
        fprintf(stderr, "kvs-bench: --devices %d but only %d %s devices\n", ndev, M.n,
                sim ? "simulated (KVS_SIM_DEVICES)" : "CUDA");
        return 2;
    }
    bool dist = strncmp(store, "dist", 4) == 0;
    if (modes == NULL)
        modes = dist ? "flat" : sim ? "flat,tree" : "flat,tree,nccl";
    if (dist && strchr(modes, ',')) {
        fprintf(stderr, "kvs-bench: a dist store joins the job once: one mode per run\n");
        return 2;
    }
    modes_dup = strdup(modes);
    int first = 1;
    char *save, *mode;
    for (mode = strtok_r(modes_dup, ",", &save); mode; mode = strtok_r(NULL, ",", &save)) {
        const char *type = store;
        if (!strcmp(mode, "nccl")) {
            if (dist || strcmp(store, "device")) {
                fprintf(stderr, "kvs-bench: mode nccl needs --store device\n");
                return 2;
            }
            type = "nccl";
        } else if (strcmp(mode, "flat") && strcmp(mode, "tree")) {
            fprintf(stderr, "kvs-bench: unknown mode '%s' (flat, tree, nccl)\n", mode);
            return 2;
        }
        setenv("MXNET_KVSTORE_USETREE", strcmp(mode, "tree") ? "0" : "1", 1);
        kvs_store *s;
        int rc = kvs_create(type, &s);
        if (rc) {
            fprintf(stderr, "kvs-bench: kvs_create(%s): %s: %s\n", type, kvs_errname(rc),
                    kvs_last_error());
            return 1;
        }
        int rank = kvs_rank(s), W = kvs_num_workers(s);
        if (rank == 0 && first) {
            printf("kvs-bench: store %s, %d %s devices, %d worker(s), P2P %s, topology %s%s\n",
                   store, ndev, sim ? "simulated" : "CUDA", W,
                   devmem_cfg()->gpu_p2p ? "1" : "0",
                   devmem_cfg()->topology[0] ? "KVS_TOPOLOGY" : sim ? "uniform" : "detected",
                   sim && devmem_cfg()->sim_link_gbps > 0 ? " (paced)" : "");
            printf("%-6s %-9s %6s %10s %10s %12s  %s\n", "mode", "size", "iters", "median_ms",
                   "p99_ms", "GB/s/device", "check");
        }
        first = 0;
        for (int si = 0; si < nsizes; si++) {
            uint64_t count = sizes[si] / 4, bytes = count * 4, key = 7000 + (uint64_t)si;
            int iters = iters_opt ? iters_opt
                                  : (int)(1024ull * 1024 * 1024 / (bytes * (uint64_t)ndev));
            if (!iters_opt)
                iters = iters < 5 ? 5 : iters > 50 ? 50 : iters;
            float *host = malloc(bytes);
            void **in = calloc((size_t)ndev, sizeof *in), **out = calloc((size_t)ndev, sizeof *out);
            kvs_array *va = calloc((size_t)ndev, sizeof *va), *vo = calloc((size_t)ndev, sizeof *vo);
            uint64_t *keys = calloc((size_t)ndev, sizeof *keys);
            double *lat = malloc(sizeof *lat * (size_t)iters);
            for (int d = 0; d < ndev; d++) {
                in[d] = devmem_alloc(&M, d, bytes);
                out[d] = devmem_alloc(&M, d, bytes);
                if (!in[d] || !out[d]) {
                    fprintf(stderr, "kvs-bench: no memory for %llu bytes on device %d\n",
                            (unsigned long long)bytes, d);
                    return 1;
                }
                for (uint64_t i = 0; i < count; i++)
                    host[i] = (float)((d + 1) * (int)(i % 3 + 1) + rank);
                copy(d, in[d], host, bytes, 1);
                va[d] = (kvs_array){in[d], count, KVS_FLOAT32, d};
                vo[d] = (kvs_array){out[d], count, KVS_FLOAT32, d};
                keys[d] = key;
            }
            rc = kvs_init(s, 1, &key, &va[0]);
            for (int it = -warmup; it < iters && rc == 0; it++) {
                if (dist)
                    kvs_barrier(s);
                uint64_t t0 = clock_ns();
                rc = kvs_pushpull(s, (size_t)ndev, keys, va, vo, 0);
                if (rc == 0)
                    rc = kvs_wait_all(s);
                if (it >= 0)
                    lat[it] = (double)(clock_ns() - t0) / 1e6;
            }
            if (rc) {
                fprintf(stderr, "kvs-bench: %s %s: %s: %s\n", mode, type, kvs_errname(rc),
                        kvs_last_error());
                return 1;
            }
            /* every output holds the sum over devices and workers */
            int ok = 1;
            for (int d = 0; d < ndev && ok; d++) {
                copy(d, host, out[d], bytes, 2);
                for (uint64_t i = 0; i < count && ok; i++) {
                    float want = 0;
                    for (int w = 0; w < W; w++)
                        for (int e = 0; e < ndev; e++)
                            want += (float)((e + 1) * (int)(i % 3 + 1) + w);
                    ok = host[i] == want;
                }
            }
            failures += !ok;
            qsort(lat, (size_t)iters, sizeof *lat, cmp_double);
            double med = lat[iters / 2], p99 = lat[(int)((iters - 1) * 0.99)];
            if (rank == 0) {
                char sz[32];
                if (bytes >= (1u << 20))
                    snprintf(sz, sizeof sz, "%lluM", (unsigned long long)(bytes >> 20));
                else
                    snprintf(sz, sizeof sz, "%lluK", (unsigned long long)(bytes >> 10));
                printf("%-6s %-9s %6d %10.3f %10.3f %12.3f  %s\n", mode, sz, iters, med, p99,
                       (double)bytes / (med / 1e3) / 1e9, ok ? "ok" : "WRONG");
                fflush(stdout);
            }
            for (int d = 0; d < ndev; d++) {
                devmem_free(&M, d, in[d]);
                devmem_free(&M, d, out[d]);
            }
            free(host);
            free(in);
            free(out);
            free(va);
            free(vo);
            free(keys);
            free(lat);
        }
        if ((rc = kvs_close(s)) != 0) {
            fprintf(stderr, "kvs-bench: close: %s: %s\n", kvs_errname(rc), kvs_last_error());
            return 1;
        }
    }
    free(modes_dup);
    return failures ? 1 : 0;
}
