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
 * do not slow each other down, and sums cost only their real CPU time.
 *
 * Shared memory (dev_alloc_shared): buffers are cut from arenas, shared
 * memory files (memfd) of at least SIM_ARENA bytes mapped into this
 * process; an arena goes when its last buffer is freed.  A handle names
 * the process, the arena's descriptor there, the arena's number (so a
 * descriptor number used again is not mistaken for the old arena), its
 * size and the buffer's offset; another process maps the whole arena once
 * through /proc/PID/fd/FD and adds the offset. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "device/dev_int.h"
#include "reduce/reduce.h"

#define SIM_ARENA (64u << 20)
#define SIM_IPC_MAGIC 0x4b53494du

typedef struct sim_arena {
    uint8_t *base;
    size_t len, used;
    int fd, live; /* live: its buffers not freed */
    uint64_t id;
    struct sim_arena *next;
} sim_arena;

typedef struct sim_handle { /* a dev_ipc of the sim backend */
    uint32_t magic;
    int32_t pid, fd;
    uint32_t pad;
    uint64_t id, len, off, size; /* the arena's id and length; the buffer's place, size */
} sim_handle;

typedef struct sim_peer { /* another process's arena, mapped here */
    int pid, fd;
    uint64_t id;
    uint8_t *base;
    size_t len;
    struct sim_peer *next;
} sim_peer;

typedef struct sim {
    int n;
    sim_arena *arenas; /* ours (alloc_shared) */
    uint64_t next_id;
    sim_peer *peers;   /* others' (ipc_open) */
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
    sim *m = b;
    for (sim_arena *a = m->arenas, *nx; a; a = nx) {
        nx = a->next;
        munmap(a->base, a->len);
        close(a->fd);
        free(a);
    }
    for (sim_peer *p = m->peers, *nx; p; p = nx) {
        nx = p->next;
        munmap(p->base, p->len);
        free(p);
    }
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
    sim *m = b;
    (void)dev;
    for (sim_arena **pa = &m->arenas, *a; (a = *pa) != NULL; pa = &a->next)
        if ((uint8_t *)p >= a->base && (uint8_t *)p < a->base + a->len) {
            if (--a->live == 0) {
                *pa = a->next;
                munmap(a->base, a->len);
                close(a->fd);
                free(a);
            }
            return;
        }
    free(p);
}

static int sim_alloc_shared(void *b, int dev, size_t bytes, void **out)
{
    sim *m = b;
    size_t want = (bytes + 63) & ~(size_t)63;
    sim_arena *a = m->arenas;
    for (; a; a = a->next)
        if (a->len - a->used >= want)
            break;
    if (a == NULL) {
        size_t len = want > SIM_ARENA ? want : SIM_ARENA;
        char name[64];
        if ((a = calloc(1, sizeof *a)) == NULL)
            return err_set(KVS_ENOMEM, "out of memory");
        snprintf(name, sizeof name, "kvs-sim-device-%d", dev);
        a->fd = memfd_create(name, MFD_CLOEXEC);
        if (a->fd < 0 || ftruncate(a->fd, (off_t)len) != 0 ||
            (a->base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd, 0)) ==
                MAP_FAILED) {
            int e = errno;
            if (a->fd >= 0)
                close(a->fd);
            free(a);
            return err_set(KVS_ENOMEM, "device %d: cannot make %zu bytes of shared memory "
                           "(simulated): %s", dev, len, strerror(e));
        }
        a->len = len;
        a->id = ++m->next_id;
        a->next = m->arenas;
        m->arenas = a;
    }
    *out = a->base + a->used;
    a->used += want;
    a->live++;
    return 0;
}

static int sim_ipc_export(void *b, int dev, void *p, dev_ipc *out)
{
    sim *m = b;
    for (sim_arena *a = m->arenas; a; a = a->next)
        if ((uint8_t *)p >= a->base && (uint8_t *)p < a->base + a->len) {
            /* (buffers are not recorded one by one: p may use the rest of
             * the arena's used part) */
            uint64_t off = (uint64_t)((uint8_t *)p - a->base);
            sim_handle h = {SIM_IPC_MAGIC, (int32_t)getpid(), a->fd, 0, a->id, a->len, off,
                            a->used - off};
            memcpy(out->b, &h, sizeof h);
            return 0;
        }
    return err_set(KVS_EINVAL, "device %d: %p is not shared memory (dev_alloc_shared)", dev, p);
}

static int sim_ipc_open(void *b, int dev, int pid, const dev_ipc *hb, void **out, size_t *size)
{
    sim *m = b;
    sim_handle h;
    memcpy(&h, hb->b, sizeof h);
    if (h.magic != SIM_IPC_MAGIC || h.pid != pid || h.off >= h.len || h.size > h.len - h.off)
        return err_set(KVS_EDEVICE, "device %d: process %d: not a simulated device memory "
                       "handle", dev, pid);
    sim_peer *p = m->peers;
    for (; p; p = p->next)
        if (p->pid == pid && p->fd == h.fd && p->id == h.id)
            break;
    if (p == NULL) {
        char path[64];
        struct stat st;
        snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, h.fd);
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0)
            return err_set(KVS_EDEVICE, "device %d: cannot open the shared memory of process "
                           "%d (%s): %s", dev, pid, path, strerror(errno));
        if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != h.len) {
            close(fd);
            return err_set(KVS_EDEVICE, "device %d: the shared memory of process %d (%s) is "
                           "not the one it named", dev, pid, path);
        }
        if ((p = calloc(1, sizeof *p)) == NULL) {
            close(fd);
            return err_set(KVS_ENOMEM, "out of memory");
        }
        p->base = mmap(NULL, h.len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (p->base == MAP_FAILED) {
            free(p);
            return err_set(KVS_EDEVICE, "device %d: cannot map the shared memory of process "
                           "%d: %s", dev, pid, strerror(errno));
        }
        p->pid = pid;
        p->fd = h.fd;
        p->id = h.id;
        p->len = h.len;
        p->next = m->peers;
        m->peers = p;
    }
    *out = p->base + h.off;
    *size = h.size;
    return 0;
}

static void sim_ipc_close(void *b, void *p)
{
    (void)b; /* the arenas are unmapped at sim_close */
    (void)p;
}

static int sim_ipc_copy(void *b, int dev, void *dst, const void *src, size_t bytes)
{
    pace(b, dev, dev, bytes);
    memmove(dst, src, bytes);
    return 0;
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

static const dev_ops sim_ops = {
    "sim",          sim_close,      sim_alloc,    sim_free,       sim_copy,
    sim_zero,       sim_sum,        sim_sync,     sim_event_record, sim_event_wait,
    sim_use,        NULL,           NULL,         sim_alloc_shared, sim_ipc_export,
    sim_ipc_open,   sim_ipc_close,  sim_ipc_copy};

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
