/* sim.c - simulated devices (KVS_SIM_DEVICES=N): device memory is host
 * memory, copies are memcpy, sums are reduce/'s CPU kernels (the same order
 * and rounding as the CUDA kernels).  A pair of devices can access each
 * other when the topology (KVS_TOPOLOGY) links them in both directions, or
 * always when there is no topology, or when KVS_DEVICES names one simulated
 * device twice.
 *
 * Pacing (KVS_SIM_LINK_GBPS > 0): every device has a virtual stream clock.
 * A copy into device d starts when d's stream and the source are free and
 * lasts bytes / (weight of the link x GBPS) (host copies and staged copies:
 * weight 1); dev_sync sleeps until the clock of the device.  Copies into
 * different devices overlap as on real streams; two copies sharing one link
 * do not slow each other down, and sums cost only their real CPU time. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "device/dev_int.h"
#include "reduce/reduce.h"

typedef struct sim {
    int n;
    double gbps;
    double w[DEV_MAX][DEV_MAX]; /* [src][dst] link weights (pacing) */
    double vt[DEV_MAX];         /* virtual clock per device stream, seconds */
} sim;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_until(double t)
{
    double d = t - now_s();
    if (d <= 0)
        return;
    struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void pace(sim *m, int d, int s, size_t bytes)
{
    if (m->gbps <= 0)
        return;
    double w = (d >= 0 && s >= 0) ? m->w[s][d] : 1.0;
    int run = d >= 0 ? d : s;
    double start = now_s();
    if (m->vt[run] > start)
        start = m->vt[run];
    if (s >= 0 && m->vt[s] > start)
        start = m->vt[s];
    m->vt[run] = start + (double)bytes / ((w > 0 ? w : 1.0) * m->gbps * 1e9);
}

static void sim_close(void *b)
{
    free(b);
}

static int sim_alloc(void *b, int dev, size_t bytes, void **out)
{
    (void)b;
    *out = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (*out == NULL)
        return err_set(KVS_ENOMEM, "device %d: out of memory for %zu bytes (simulated)", dev,
                       bytes);
    return 0;
}

static void sim_free(void *b, int dev, void *p)
{
    (void)b;
    (void)dev;
    free(p);
}

static int sim_copy(void *b, int kind, int dst_dev, void *dst, int src_dev, const void *src,
                    size_t bytes)
{
    (void)kind;
    pace(b, dst_dev, src_dev, bytes);
    memmove(dst, src, bytes);
    return 0;
}

static int sim_zero(void *b, int dev, void *p, size_t bytes)
{
    (void)b;
    (void)dev;
    memset(p, 0, bytes);
    return 0;
}

static int sim_sum(void *b, int dev, kvs_dtype dtype, void *dst, const void *const *srcs, int k,
                   uint64_t count)
{
    (void)b;
    int rc = red_sum(NULL, dtype, dst, srcs, k, count);
    return rc ? err_set(rc, "device %d: simulated sum failed", dev) : 0;
}

static int sim_sync(void *b, int dev)
{
    sim *m = b;
    double t = 0;
    for (int i = 0; i < m->n; i++)
        if ((dev < 0 || dev == i) && m->vt[i] > t)
            t = m->vt[i];
    if (m->gbps > 0)
        sleep_until(t);
    return 0;
}

static int sim_event_record(void *b, int dev, int slot)
{
    (void)b;
    (void)dev;
    (void)slot;
    return 0;
}

static int sim_event_wait(void *b, int slot)
{
    (void)b;
    (void)slot;
    return 0;
}

static int sim_use(void *b, int dev)
{
    (void)b;
    (void)dev;
    return 0; /* access was set for every pair at open */
}

static const dev_ops sim_ops = {"sim",     sim_close, sim_alloc, sim_free,         sim_copy,
                                sim_zero,  sim_sum,   sim_sync,  sim_event_record, sim_event_wait,
                                sim_use,   NULL,      NULL};

int dev_sim_open(const dev_opts *o, dev_layer *L)
{
    sim *m;
    if (o->sim_devices > DEV_MAX)
        return err_set(KVS_ECONFIG, "KVS_SIM_DEVICES=%d: at most %d devices", o->sim_devices,
                       DEV_MAX);
    int rc = dev_select(o, o->sim_devices, "KVS_SIM_DEVICES makes", L);
    if (rc)
        return rc;
    if (o->topo && o->topo->n != L->n)
        return err_set(KVS_ECONFIG, "KVS_TOPOLOGY has %d devices but KVS_SIM_DEVICES=%d%s",
                       o->topo->n, o->sim_devices, o->ndevices ? " with KVS_DEVICES" : "");
    m = calloc(1, sizeof *m);
    if (m == NULL)
        return err_set(KVS_ENOMEM, "out of memory");
    m->n = L->n;
    m->gbps = o->sim_gbps;
    for (int s = 0; s < m->n; s++)
        for (int d = 0; d < m->n; d++) {
            m->w[s][d] = o->topo ? tree_w(o->topo, s, d) : 1.0;
            L->access[d][s] = s != d && (o->topo == NULL || tree_link(o->topo, s, d) ||
                                         L->map[s] == L->map[d]);
        }
    L->ops = &sim_ops;
    L->b = m;
    L->n = m->n;
    return 0;
}
