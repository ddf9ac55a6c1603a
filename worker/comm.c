/* comm.c - local multi-device reduce and broadcast (see comm.h).
 *
 * Per key (device modes) a ckey holds: the merge device m (chosen when the
 * key is first seen: the device with the fewest merge bytes so far), buf[m]
 * (the merge buffer; in the "device" and "nccl" stores, the key's value),
 * and as needed copies of sources on m (flat), one buffer per device and a
 * landing buffer per device (tree, nccl).
 *
 * Summation order.  Flat: the sources in the order of the call, left to
 * right, one rounding for half types: bit-identical to the CPU path
 * (red_sum over the same arrays).  CPU mode: the host paths, same order.
 * Tree: per device first (call order), then along the tree, rounding at
 * every step: equal to the CPU result only where partial sums are exact.
 * NCCL: its own order. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/log.h"
#include "device/dev.h"
#include "tree/tree.h"
#include "worker/comm.h"
#include "worker/group.h"
#include "worker/op.h"
#include "worker/pinned.h"
#include "worker/wrk_int.h"

/* Sets of trees across a local group kept (a member per device: one) */
#define COMM_TCACHE 8

typedef struct ckey {
    uint64_t count;
    kvs_dtype dtype;
    size_t bytes;
    int m;
    void *buf[DEV_MAX];
    void *scr[DEV_MAX];
    void **cp;
    int ncp;
    void *rbuf;  /* dist_*_device, chunked pull: pulled parts land here (on m); the
                  * post step swaps it with buf[m] */
    atomic_bool rbusy; /* rbuf belongs to an op in flight */
    /* dist_*_device in a local group: the key's sum in shared device memory
     * (on m), which the members read and where the round's value lands */
    void *gbuf;
    dev_ipc gh;        /* gbuf's handle */
    atomic_bool gbusy; /* gbuf belongs to an op in flight */
    bool whole;  /* buf[m] holds the value */
    bool sliced; /* tree, split: buf[root of tree t] holds slice t of the value */
} ckey;

struct wrk_comm {
    kvs_store *s;
    int mode;
    pthread_mutex_t mu; /* everything below but the queue */
    dev_layer *L;
    wrk_pinned *_Atomic pool; /* host staging (set once with L; read by metrics lock-free) */
    int open_rc;
    char open_err[512];
    bool opened;
    bool tree;
    tree_opts topts;
    tree_topo topo;
    bool have_topo;
    tree_wplan plan;   /* weighted trees (one per root with KVS_TREE_WEIGHTED=0) */
    /* the host's topology over the backend's devices, for trees across a
     * local group's processes (host_topo) */
    tree_topo htopo;
    bool have_htopo, htopo_tried;
    uint64_t thash;    /* its hash (0: no trees across the group) */
    struct {           /* trees planned over the group's devices (grp_plan) */
        int n;
        int *ord, *parent;
    } tcache[COMM_TCACHE];
    int ntcache;
    uint64_t tplanned; /* sets planned so far */
    dev_nccl *nccl;
    hmap keys; /* key -> ckey */
    uint64_t load[DEV_MAX];

    pthread_mutex_t qmu; /* the post queue */
    pthread_cond_t qcv;
    struct post_item *qhead, *qtail;
    bool qstop;
    pthread_t thr;
    bool thr_started;

    /* local groups' device sums (wrk_comm_grp_*): per device, n + 1 chunks */
    void *gscr[DEV_MAX];
    size_t gscr_cap[DEV_MAX];
};

typedef struct post_copy {
    int dst_dev;
    void *dst;
    const void *src;
    size_t bytes;
} post_copy;

typedef struct post_key {
    uint64_t key;
    void *staging;       /* host: the pulled value */
    size_t nouts;
    kvs_array *outs;     /* into post->arrays */
    /* chunked pull (the key's value whole on its merge device): each reply's
     * part is copied from staging to the key's rbuf (on its merge device) as it arrives */
    ckey *ck;            /* its rbuf (ck->rbusy held by this op), or NULL */
    bool gdev;           /* the value is in the key's gbuf (a local group's device sum) */
    bool rmissed;        /* a part could not be queued: copy all of staging at the end */
} post_key;

/* One job of the post thread: a pulled part to copy to its device (kidx
 * valid), or the op's post step (the broadcast). */
typedef struct post_item {
    struct post_item *next;
    wrk_post *p;
    wrk_op *op;
    size_t kidx;         /* SIZE_MAX: the post step */
    uint64_t off, len;   /* bytes of the key */
} post_item;

struct wrk_post {
    wrk_comm *c;
    post_item final;     /* the post step's queue entry */
    wrk_op *op;
    bool ran;
    size_t nhost;
    void **host;         /* pinned staging to release */
    size_t ncopies;      /* CPU mode: host temp -> device output */
    post_copy *copies;
    size_t nkeys;        /* device mode: broadcasts */
    post_key *keys;
    kvs_array *arrays;
    size_t ngk;          /* keys whose gbuf this op holds (gbusy) */
    ckey **gk;
};

static void *post_thread(void *arg);
static const wrk_grp_devops grp_devops;

/* ------------------------------------------------------------ opening */

/* out (n devices) = rows and columns ord[0..n) of h; two that are one GPU
 * (equal ordinals) get twice h's fastest link. */
static int topo_pick(const tree_topo *h, int n, const int *ord, tree_topo *out)
{
    double top = 0.5;
    int rc = tree_topo_init(out, n);
    if (rc)
        return rc;
    for (int i = 0; i < h->n * h->n; i++)
        top = h->w[i] > top ? h->w[i] : top;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            out->w[i * n + j] = i == j ? 0 : ord[i] == ord[j] ? 2 * top : tree_w(h, ord[i], ord[j]);
    snprintf(out->name, sizeof out->name, "%s", h->name);
    return 0;
}

/* KVS_TOPOLOGY (c->topo, just parsed) is also the host's (c->htopo) when
 * it describes the backend's devices: always without KVS_DEVICES; with
 * KVS_DEVICES when its row count is not the entries' (a matrix over the
 * entries is the layer's only, and the host's stays unknown).  The layer
 * then takes its entries' rows and columns.  The backend's count is
 * checked once the layer is open. */
static int host_topo_given(wrk_comm *c)
{
    int nd = c->s->c.ndevices;
    const int *dv = c->s->c.devices;
    int rc;
    if (nd > 0 && c->topo.n == nd)
        return 0;
    if (nd <= 0) { /* the same matrix: copy it */
        if ((rc = tree_topo_init(&c->htopo, c->topo.n)) != 0)
            return rc;
        memcpy(c->htopo.w, c->topo.w, sizeof(double) * (size_t)c->topo.n * (size_t)c->topo.n);
        memcpy(c->htopo.name, c->topo.name, sizeof c->htopo.name);
        c->have_htopo = true;
        return 0;
    }
    for (int i = 0; i < nd; i++)
        if (dv[i] < 0 || dv[i] >= c->topo.n)
            return err_set(KVS_ECONFIG, "KVS_TOPOLOGY has %d devices: neither the %d of "
                           "KVS_DEVICES nor the host's, which has device %d", c->topo.n, nd,
                           dv[i]);
    c->htopo = c->topo;
    c->have_htopo = true;
    c->topo = (tree_topo){0};
    return topo_pick(&c->htopo, nd, dv, &c->topo);
}

static int open_locked(wrk_comm *c)
{
    char err[512];
    int rc;
    if (c->opened)
        return c->open_rc ? err_set(c->open_rc, "%s", c->open_err) : 0;
    c->opened = true;
    dev_opts o = {c->s->c.sim_devices, c->topts.gpu_p2p, NULL, c->s->c.sim_link_gbps,
                  c->s->c.cuda_plugin, c->s->c.ndevices, c->s->c.devices};
    bool found = false;
    if ((rc = tree_topo_from_spec(c->s->c.topology, &c->topo, &found, err, sizeof err)) != 0) {
        rc = err_set(rc, "%s", err);
        goto out;
    }
    if (found && (rc = host_topo_given(c)) != 0)
        goto out;
    c->have_topo = found;
    if (found && o.sim_devices > 0)
        o.topo = &c->topo;
    if ((rc = dev_open(&o, &c->L)) != 0)
        goto out;
    wrk_pinned *pool = wrk_pinned_new(c->L);
    if (pool == NULL) {
        rc = err_set(KVS_ENOMEM, "out of memory");
        goto out;
    }
    atomic_store(&c->pool, pool);
    int n = dev_count(c->L);
    if (c->have_htopo && c->htopo.n != dev_backend_count(c->L)) {
        rc = err_set(KVS_ECONFIG, "KVS_TOPOLOGY has %d devices but the %s backend has %d",
                     c->htopo.n, dev_backend(c->L), dev_backend_count(c->L));
        goto out;
    }
    if (found && c->topo.n != n) {
        rc = err_set(KVS_ECONFIG, "KVS_TOPOLOGY has %d devices but the %s backend has %d",
                     c->topo.n, dev_backend(c->L), n);
        goto out;
    }
    if (c->mode == WRK_COMM_NCCL && (rc = dev_nccl_open(c->L, &c->nccl)) != 0)
        goto out;
    if (c->mode == WRK_COMM_DEVICE && c->s->c.use_tree && n > 1) {
        if (!found) {
            if (dev_is_cuda(c->L)) {
                int sel[DEV_MAX];
                for (int i = 0; i < n; i++)
                    sel[i] = dev_ordinal(c->L, i);
                if ((rc = tree_topo_detect_sel(&c->topo, false, c->s->c.cuda_plugin, n, sel, err,
                                                sizeof err)) != 0) {
                    rc = err_set(KVS_EDEVICE, "MXNET_KVSTORE_USETREE=1: %s", err);
                    goto out;
                }
            } else {
                /* simulated devices without KVS_TOPOLOGY: all linked alike */
                if ((rc = tree_topo_init(&c->topo, n)) != 0)
                    goto out;
                for (int i = 0; i < n * n; i++)
                    c->topo.w[i] = 1;
                snprintf(c->topo.name, sizeof c->topo.name, "uniform");
            }
            c->have_topo = true;
        }
        if ((rc = tree_plan_weighted(&c->topo, &c->topts, &c->plan, err, sizeof err)) != 0) {
            rc = err_set(rc == KVS_EINVAL ? KVS_ECONFIG : rc, "MXNET_KVSTORE_USETREE=1: "
                         "cannot plan trees over %d devices: %s", n, err);
            goto out;
        }
        c->tree = true;
    }
    LOG(LOG_INFO, c->s->who, "comm", "%d %s devices, %s, P2P %s", n, dev_backend(c->L),
        c->mode == WRK_COMM_NCCL ? "NCCL" : c->mode == WRK_COMM_CPU ? "CPU sums"
        : c->tree ? "tree" : "flat", c->topts.gpu_p2p ? "on" : "off");
out:
    if (rc) {
        c->open_rc = rc;
        snprintf(c->open_err, sizeof c->open_err, "%s", kvs_last_error());
    }
    return rc;
}

int wrk_comm_new(kvs_store *s, int mode, wrk_comm **out)
{
    int rc;
    wrk_comm *c = calloc(1, sizeof *c);
    *out = NULL;
    if (c == NULL)
        return err_set(KVS_ENOMEM, "out of memory");
    c->s = s;
    c->mode = mode;
    s->grp_devops = &grp_devops;
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->qmu, NULL);
    pthread_cond_init(&c->qcv, NULL);
    hmap_init(&c->keys);
    tree_opts_from_cfg(&c->topts, &s->c);
    if (mode != WRK_COMM_CPU && (rc = open_locked(c)) != 0)
        goto fail;
    if (s->kind == WRK_DIST) {
        if (pthread_create(&c->thr, NULL, post_thread, c) != 0) {
            rc = err_set(KVS_ENOMEM, "cannot start the device thread");
            goto fail;
        }
        c->thr_started = true;
    }
    *out = c;
    return 0;
fail:
    wrk_comm_free(c);
    return rc;
}

static void ckey_free(wrk_comm *c, ckey *k)
{
    for (int i = 0; i < DEV_MAX; i++) {
        dev_free(c->L, i, k->buf[i]);
        dev_free(c->L, i, k->scr[i]);
    }
    for (int i = 0; i < k->ncp; i++)
        dev_free(c->L, k->m, k->cp[i]);
    dev_free(c->L, k->m, k->rbuf);
    dev_free(c->L, k->m, k->gbuf);
    free(k->cp);
    free(k);
}

void wrk_comm_free(wrk_comm *c)
{
    if (c == NULL)
        return;
    if (c->thr_started) {
        pthread_mutex_lock(&c->qmu);
        c->qstop = true;
        pthread_cond_signal(&c->qcv);
        pthread_mutex_unlock(&c->qmu);
        pthread_join(c->thr, NULL);
    }
    for (size_t i = 0; i < c->keys.cap; i++)
        if (c->keys.used[i] == 1)
            ckey_free(c, c->keys.vals[i]);
    for (int d = 0; d < DEV_MAX; d++)
        dev_free(c->L, d, c->gscr[d]);
    hmap_fini(&c->keys);
    wrk_pinned_free(c->pool);
    dev_nccl_close(c->nccl);
    if (c->tree)
        tree_wplan_fini(&c->plan);
    tree_topo_fini(&c->topo);
    tree_topo_fini(&c->htopo);
    for (int i = 0; i < c->ntcache; i++) {
        free(c->tcache[i].ord);
        free(c->tcache[i].parent);
    }
    dev_close(c->L);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->qmu);
    pthread_cond_destroy(&c->qcv);
    free(c);
}

int wrk_comm_check_device(wrk_comm *c, int device, uint64_t key, const char *what)
{
    int rc, n;
    pthread_mutex_lock(&c->mu);
    rc = open_locked(c);
    n = rc ? 0 : dev_count(c->L);
    pthread_mutex_unlock(&c->mu);
    if (rc)
        return err_set(KVS_EDEVICE, "key %llu: %s is on device %d: %s", (unsigned long long)key,
                       what, device, kvs_last_error());
    if (device < 0 || device >= n)
        return err_set(KVS_EDEVICE, "key %llu: %s is on device %d, which does not exist (%d %s "
                       "devices: 0..%d)", (unsigned long long)key, what, device, n,
                       dev_backend(c->L), n - 1);
    return 0;
}

bool wrk_comm_takes(const wrk_comm *c, size_t n, const kvs_array *a, const kvs_array *b)
{
    if (c == NULL)
        return false;
    if (c->mode != WRK_COMM_CPU)
        return true;
    for (size_t i = 0; i < n; i++)
        if ((a && a[i].device != KVS_CPU) || (b && b[i].device != KVS_CPU))
            return true;
    return false;
}

void wrk_comm_stats(wrk_comm *c, kvs_device_stats *out)
{
    memset(out, 0, sizeof *out);
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    if (c->L)
        dev_stats(c->L, out);
    pthread_mutex_unlock(&c->mu);
    wrk_pinned_size(c->pool, &out->pinned_bytes, &out->pinned_buffers);
}

uint64_t wrk_comm_pinned_bytes(wrk_comm *c)
{
    uint64_t bytes = 0, bufs;
    if (c)
        wrk_pinned_size(c->pool, &bytes, &bufs);
    return bytes;
}

/* ------------------------------------------------------- per-key state */

static bool flat(const wrk_comm *c);

/* The devices that arrays ix[0..cnt) of a and b name (bit per device). */
static uint64_t named(const kvs_array *a, const kvs_array *b, const size_t *ix, size_t cnt)
{
    uint64_t m = 0;
    for (size_t j = 0; j < cnt; j++) {
        if (a && a[ix[j]].device >= 0 && a[ix[j]].device < DEV_MAX)
            m |= 1ull << a[ix[j]].device;
        if (b && b[ix[j]].device >= 0 && b[ix[j]].device < DEV_MAX)
            m |= 1ull << b[ix[j]].device;
    }
    return m;
}

/* The merge device of a new key: the one with the fewest merge bytes so
 * far among the candidates.  Flat, the candidates are the devices the
 * key's arrays name (else the devices opened so far, else device 0), so no
 * device the application does not use is ever opened; trees and NCCL span
 * every device anyway. */
static int merge_device(wrk_comm *c, uint64_t names)
{
    int n = dev_count(c->L), m = -1;
    uint64_t cand = names;
    if (!flat(c))
        cand = ~0ull;
    for (int i = 0; i < n && cand == 0; i++)
        if (dev_opened(c->L, i))
            cand |= 1ull << i;
    if (cand == 0)
        cand = 1;
    for (int i = 0; i < n; i++)
        if ((cand >> i & 1) && (m < 0 || c->load[i] < c->load[m]))
            m = i;
    return m < 0 ? 0 : m;
}

static int key_get(wrk_comm *c, uint64_t key, const kvs_array *shape, uint64_t names, ckey **out)
{
    ckey *k = hmap_get(&c->keys, key);
    if (k) {
        if (k->count != shape->count || k->dtype != shape->dtype)
            return err_set(KVS_ESHAPE, "key %llu: %llu %s elements, but the key was used with "
                           "%llu %s elements", (unsigned long long)key,
                           (unsigned long long)shape->count, kvs_dtype_name(shape->dtype),
                           (unsigned long long)k->count, kvs_dtype_name(k->dtype));
        *out = k;
        return 0;
    }
    if ((k = calloc(1, sizeof *k)) == NULL)
        return err_set(KVS_ENOMEM, "out of memory");
    k->count = shape->count;
    k->dtype = shape->dtype;
    k->bytes = shape->count * kvs_dtype_size(shape->dtype);
    k->m = merge_device(c, names);
    int rc = dev_alloc(c->L, k->m, k->bytes, &k->buf[k->m]);
    if (rc == 0 && hmap_put(&c->keys, key, k) != 0)
        rc = err_set(KVS_ENOMEM, "out of memory");
    if (rc) {
        ckey_free(c, k);
        return rc;
    }
    c->load[k->m] += k->bytes;
    *out = k;
    return 0;
}

static int need(wrk_comm *c, int dev, void **p, size_t bytes)
{
    return *p ? 0 : dev_alloc(c->L, dev, bytes, p);
}

/* Copy buffer i on the merge device (flat sources). */
static int cp_get(wrk_comm *c, ckey *k, int i, void **out)
{
    if (i >= k->ncp) {
        void **n = realloc(k->cp, (size_t)(i + 1) * sizeof *n);
        if (n == NULL)
            return err_set(KVS_ENOMEM, "out of memory");
        for (int j = k->ncp; j <= i; j++)
            n[j] = NULL;
        k->cp = n;
        k->ncp = i + 1;
    }
    int rc = need(c, k->m, &k->cp[i], k->bytes);
    *out = k->cp[i];
    return rc;
}

/* dst = srcs[0] + ... + srcs[k-1] on dev, in chunks of DEV_SUM_MAX inputs. */
static int sum_many(wrk_comm *c, int dev, kvs_dtype dt, void *dst, const void **srcs, int k,
                    uint64_t count)
{
    int take = k < DEV_SUM_MAX ? k : DEV_SUM_MAX, rc;
    if ((rc = dev_sum(c->L, dev, dt, dst, srcs, take, count)) != 0)
        return rc;
    for (int done = take; done < k; done += take) {
        const void *part[DEV_SUM_MAX];
        take = k - done < DEV_SUM_MAX - 1 ? k - done : DEV_SUM_MAX - 1;
        part[0] = dst;
        memcpy(&part[1], &srcs[done], (size_t)take * sizeof *part);
        if ((rc = dev_sum(c->L, dev, dt, dst, part, take + 1, count)) != 0)
            return rc;
    }
    return 0;
}

/* ---------------------------------------------------------------- tree */

typedef struct tctx {
    wrk_comm *c;
    ckey *k;
} tctx;

static int t_copy(void *ctx, int dst, void *dstp, int src, const void *srcp, uint64_t bytes)
{
    return dev_copy(((tctx *)ctx)->c->L, dst, dstp, src, srcp, bytes);
}

static int t_reduce(void *ctx, int dst, void *dstp, int src, const void *srcp, kvs_dtype dt,
                    uint64_t count)
{
    tctx *t = ctx;
    size_t off = (size_t)((char *)dstp - (char *)t->k->buf[dst]);
    char *tmp = (char *)t->k->scr[dst] + off;
    const void *two[2] = {dstp, tmp};
    int rc = dev_copy(t->c->L, dst, tmp, src, srcp, count * kvs_dtype_size(dt));
    return rc ? rc : dev_sum(t->c->L, dst, dt, dstp, two, 2, count);
}

static int t_stage_end(void *ctx)
{
    return dev_sync(((tctx *)ctx)->c->L, -1);
}

static bool split(const wrk_comm *c, const ckey *k)
{
    return c->tree && k->count > c->topts.array_bound && dev_count(c->L) > 1;
}

/* Run the reduce and/or broadcast phases of the key's trees: the first
 * tree rooted at the merge device (one_tree or not split), or slice k along
 * tree k (slices by cumulative parts). */
static int tree_run(wrk_comm *c, ckey *k, unsigned phases, bool one_tree)
{
    tree_sched sc;
    tctx t = {c, k};
    tree_backend be = {&t, t_copy, t_reduce, t_stage_end};
    int rc = tree_sched_build_plan(&c->plan,
                                   split(c, k) && !one_tree ? -1 : tree_wplan_first(&c->plan, k->m),
                                   phases, c->topts.min_slice, &sc);
    if (rc)
        return err_set(rc, "tree schedule: %s", kvs_strerror(rc));
    rc = tree_exec(&sc, &be, k->buf, k->dtype, k->count);
    tree_sched_fini(&sc);
    if (rc && kvs_last_error()[0] == 0)
        err_set(rc, "tree: %s", kvs_strerror(rc));
    return rc;
}

/* The slices of a split key: slice t (off[t], len[t] elements) belongs to
 * tree t and lives at the tree's root.  *off and *len are malloc'ed. */
static int key_slices(wrk_comm *c, const ckey *k, uint64_t **off, uint64_t **len)
{
    size_t nt = (size_t)c->plan.ntrees;
    *off = malloc(nt * sizeof **off);
    *len = malloc(nt * sizeof **len);
    if (*off == NULL || *len == NULL) {
        free(*off);
        free(*len);
        return err_set(KVS_ENOMEM, "out of memory");
    }
    tree_wplan_slices(&c->plan, k->count, kvs_dtype_size(k->dtype), c->topts.min_slice, *off,
                      *len);
    return 0;
}

/* Slices between the roots of the trees and one place (a merge buffer or
 * host memory) at where on device wdev: to_roots moves slice t from there to
 * buf[root of tree t], else from there to where. */
static int slices(wrk_comm *c, ckey *k, int wdev, char *where, bool to_roots)
{
    int rc;
    size_t es = kvs_dtype_size(k->dtype);
    uint64_t *off, *len;
    if ((rc = key_slices(c, k, &off, &len)) != 0)
        return rc;
    for (int t = 0; t < c->plan.ntrees && rc == 0; t++) {
        int i = c->plan.root[t];
        char *root = k->buf[i];
        if (len[t] == 0 || (wdev == i && where == root))
            continue;
        rc = to_roots ? dev_copy(c->L, i, root + off[t] * es, wdev, where + off[t] * es,
                                 len[t] * es)
                      : dev_copy(c->L, wdev, where + off[t] * es, i, root + off[t] * es,
                                 len[t] * es);
    }
    free(off);
    free(len);
    return rc ? rc : dev_sync(c->L, -1);
}

/* ------------------------------------------------- reduce and broadcast */

static bool flat(const wrk_comm *c)
{
    return c->mode == WRK_COMM_DEVICE && !c->tree;
}

/* srcs[j], on[j]: where source j is read.  Host sources (and, flat, every
 * source off the merge device) are first copied to the merge device. */
static int place_sources(wrk_comm *c, ckey *k, const kvs_array *vals, const size_t *idx,
                         size_t cnt, const void **srcs, int *on)
{
    int rc = 0, ncp = 0;
    for (size_t j = 0; j < cnt && rc == 0; j++) {
        const kvs_array *a = &vals[idx[j]];
        on[j] = a->device;
        srcs[j] = a->data;
        if (a->device == KVS_CPU || (flat(c) && a->device != k->m)) {
            void *cp = NULL;
            if ((rc = cp_get(c, k, ncp++, &cp)) == 0)
                rc = dev_copy(c->L, k->m, cp, a->device, a->data, k->bytes);
            on[j] = k->m;
            srcs[j] = cp;
        }
    }
    return rc;
}

/* buf[d] = the sum of the sources on d (call order), or zeros; every device. */
static int local_sums(wrk_comm *c, ckey *k, const void **srcs, const int *on, size_t cnt)
{
    int rc = 0, n = dev_count(c->L);
    const void **mine = calloc(cnt ? cnt : 1, sizeof *mine);
    if (mine == NULL)
        return err_set(KVS_ENOMEM, "out of memory");
    for (int d = 0; d < n && rc == 0; d++) {
        int nm = 0;
        for (size_t j = 0; j < cnt; j++)
            if (on[j] == d)
                mine[nm++] = srcs[j];
        if ((rc = need(c, d, &k->buf[d], k->bytes)) == 0 && c->tree)
            rc = need(c, d, &k->scr[d], k->bytes);
        if (rc == 0)
            rc = nm ? sum_many(c, d, k->dtype, k->buf[d], mine, nm, k->count)
                    : dev_zero(c->L, d, k->buf[d], k->bytes);
    }
    free(mine);
    return rc ? rc : dev_sync(c->L, -1);
}

/* The sum of vals[idx[0..cnt)] into k->buf[k->m]; with bcast also into every
 * device's buffer (all-reduce). */
static int reduce(wrk_comm *c, ckey *k, const kvs_array *vals, const size_t *idx, size_t cnt,
                  bool bcast)
{
    int rc;
    const void **srcs = calloc(cnt ? cnt : 1, sizeof *srcs);
    int *on = calloc(cnt ? cnt : 1, sizeof *on);
    if (srcs == NULL || on == NULL)
        rc = err_set(KVS_ENOMEM, "out of memory");
    else if (k->count == 0)
        rc = 0;
    else if ((rc = place_sources(c, k, vals, idx, cnt, srcs, on)) != 0)
        ;
    else if (flat(c))
        rc = sum_many(c, k->m, k->dtype, k->buf[k->m], srcs, (int)cnt, k->count);
    else if ((rc = local_sums(c, k, srcs, on, cnt)) != 0)
        ;
    else if (c->tree && (rc = tree_run(c, k, TREE_PHASE_REDUCE |
                                                (bcast ? TREE_PHASE_BCAST : 0), false)) != 0)
        ;
    else if (c->tree)
        ;
    else if (bcast)
        rc = dev_nccl_allreduce(c->nccl, k->dtype, k->buf, k->count);
    else
        rc = dev_nccl_reduce(c->nccl, k->m, k->dtype, k->buf, k->count);
    free(srcs);
    free(on);
    if (rc == 0) {
        /* a split tree reduce leaves slice i at the root of tree i */
        k->sliced = split(c, k);
        k->whole = bcast || !k->sliced;
    }
    return rc;
}

/* From the buffers to outs[idx[0..cnt)]: from the output's own device where
 * every device holds the value (everywhere), else from the merge device. */
static int to_outputs(wrk_comm *c, ckey *k, const kvs_array *outs, const size_t *idx, size_t cnt,
                      bool everywhere)
{
    int rc = 0;
    for (size_t j = 0; j < cnt && rc == 0 && k->count; j++) {
        const kvs_array *o = &outs[idx[j]];
        int from = everywhere && o->device != KVS_CPU ? o->device : k->m;
        rc = dev_copy(c->L, o->device, o->data, from, k->buf[from], k->bytes);
    }
    return rc ? rc : dev_sync(c->L, -1);
}

/* The value in k->buf[k->m] to outs[idx[0..cnt)]. */
static int spread(wrk_comm *c, ckey *k, const kvs_array *outs, const size_t *idx, size_t cnt)
{
    int rc = 0, n = dev_count(c->L);
    if (k->count == 0 || flat(c))
        return to_outputs(c, k, outs, idx, cnt, false);
    for (int d = 0; d < n && rc == 0; d++)
        if ((rc = need(c, d, &k->buf[d], k->bytes)) == 0 && c->tree)
            rc = need(c, d, &k->scr[d], k->bytes);
    if (rc == 0)
        rc = dev_sync(c->L, -1);
    /* a whole value in the merge buffer goes down the merge device's tree
     * (links only); slices go down their own trees */
    if (rc == 0)
        rc = c->tree ? tree_run(c, k, TREE_PHASE_BCAST, !k->sliced)
                     : dev_nccl_bcast(c->nccl, k->m, k->dtype, k->buf, k->count);
    if (rc == 0)
        k->whole = k->sliced = true;
    return rc ? rc : to_outputs(c, k, outs, idx, cnt, true);
}

/* The value from host memory h into the merge buffer (or, split, into the
 * roots of the trees). */
static int from_host(wrk_comm *c, ckey *k, const void *h)
{
    int rc = 0;
    if (k->count == 0)
        return 0;
    if (split(c, k)) {
        for (int d = 0; d < dev_count(c->L) && rc == 0; d++)
            rc = need(c, d, &k->buf[d], k->bytes);
        if (rc == 0 && (rc = slices(c, k, DEV_HOST, (char *)h, true)) == 0) {
            k->sliced = true;
            k->whole = false;
        }
        return rc;
    }
    if ((rc = dev_copy(c->L, k->m, k->buf[k->m], DEV_HOST, h, k->bytes)) == 0) {
        k->whole = true;
        k->sliced = false;
    }
    return rc;
}

/* Bytes [off, off + len) of the value to h + off on ddev (DEV_HOST: host
 * memory), from where it is: whole in the merge buffer, or sliced over the
 * roots of the trees (each slice's share of the range from its root).
 * Enqueued only. */
static int value_range(wrk_comm *c, ckey *k, int ddev, char *h, uint64_t off, uint64_t len)
{
    int rc = 0;
    if (len == 0)
        return 0;
    if (k->whole)
        return dev_copy(c->L, ddev, h + off, k->m, (char *)k->buf[k->m] + off, len);
    size_t es = kvs_dtype_size(k->dtype);
    uint64_t *so, *sl;
    if ((rc = key_slices(c, k, &so, &sl)) != 0)
        return rc;
    for (int t = 0; t < c->plan.ntrees && rc == 0; t++) {
        int i = c->plan.root[t];
        uint64_t a = so[t] * es, b = (so[t] + sl[t]) * es;
        if (a < off)
            a = off;
        if (b > off + len)
            b = off + len;
        if (a < b)
            rc = dev_copy(c->L, ddev, h + a, i, (char *)k->buf[i] + a, b - a);
    }
    free(so);
    free(sl);
    return rc;
}

/* value_range to host memory, complete. */
static int to_host_range(wrk_comm *c, ckey *k, char *h, uint64_t off, uint64_t len)
{
    int rc = value_range(c, k, DEV_HOST, h, off, len);
    return rc || len == 0 ? rc : dev_sync(c->L, -1);
}

/* Sum of vals into k->buf[m] and every output. */
static int reduce_spread(wrk_comm *c, ckey *k, const kvs_array *vals, const size_t *vi,
                         size_t vn, const kvs_array *outs, const size_t *oi, size_t on)
{
    int rc = reduce(c, k, vals, vi, vn, !flat(c));
    if (rc)
        return rc;
    return flat(c) ? to_outputs(c, k, outs, oi, on, false) : to_outputs(c, k, outs, oi, on, true);
}

/* ---------------------------------------------------------- key groups */

/* The arrays of one call grouped by key: group u has the indices
 * idx[head[u] .. head[u+1]) in call order. */
typedef struct groups {
    size_t nu;
    size_t *head;
    size_t *idx;
} groups;

static void groups_fini(groups *g)
{
    free(g->head);
    free(g->idx);
}

static int group(size_t n, const uint64_t *keys, groups *g)
{
    hmap seen;
    size_t *of = malloc((n ? n : 1) * sizeof *of), *fill = NULL;
    int rc = 0;
    memset(g, 0, sizeof *g);
    g->head = calloc(n + 1, sizeof *g->head);
    g->idx = malloc((n ? n : 1) * sizeof *g->idx);
    hmap_init(&seen);
    if (of == NULL || g->head == NULL || g->idx == NULL) {
        rc = err_set(KVS_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        void *v = hmap_get(&seen, keys[i]);
        if (v == NULL) {
            v = (void *)(uintptr_t)(++g->nu);
            if (hmap_put(&seen, keys[i], v) != 0) {
                rc = err_set(KVS_ENOMEM, "out of memory");
                goto out;
            }
        }
        of[i] = (size_t)(uintptr_t)v - 1;
        g->head[of[i] + 1]++;
    }
    for (size_t u = 0; u < g->nu; u++)
        g->head[u + 1] += g->head[u];
    if ((fill = malloc((g->nu ? g->nu : 1) * sizeof *fill)) == NULL) {
        rc = err_set(KVS_ENOMEM, "out of memory");
        goto out;
    }
    memcpy(fill, g->head, g->nu * sizeof *fill);
    for (size_t i = 0; i < n; i++)
        g->idx[fill[of[i]]++] = i;
out:
    hmap_fini(&seen);
    free(of);
    free(fill);
    if (rc)
        groups_fini(g);
    return rc;
}

/* Every array of a key in one call has the key's first shape. */
static int same_shapes(const groups *g, const uint64_t *keys, const kvs_array *a,
                       const kvs_array *b)
{
    for (size_t u = 0; u < g->nu; u++) {
        const kvs_array *f = a ? &a[g->idx[g->head[u]]] : &b[g->idx[g->head[u]]];
        for (size_t j = g->head[u]; j < g->head[u + 1]; j++) {
            size_t i = g->idx[j];
            if ((a && (a[i].count != f->count || a[i].dtype != f->dtype)) ||
                (b && (b[i].count != f->count || b[i].dtype != f->dtype)))
                return err_set(KVS_ESHAPE, "key %llu appears with different counts or dtypes "
                               "in one call", (unsigned long long)keys[i]);
        }
    }
    return 0;
}

/* ------------------------------------------------------ host staging */

/* Pinned host copies of the device arrays of a[0..n) (copy: their data too)
 * from the pool; h gets the host views.  Buffers are appended to *host
 * (count *nhost).  The pinning (when the pool grows) happens in the
 * context of the array's own device. */
static int stage(wrk_comm *c, size_t n, const kvs_array *a, bool copy, kvs_array *h,
                 void **host, size_t *nhost)
{
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        h[i] = a[i];
        if (a[i].device == KVS_CPU)
            continue;
        size_t bytes = a[i].count * kvs_dtype_size(a[i].dtype);
        void *p;
        if ((rc = dev_use(c->L, a[i].device)) != 0 ||
            (rc = wrk_pinned_get(c->pool, bytes, &p)) != 0)
            break;
        host[(*nhost)++] = p;
        h[i].data = p;
        h[i].device = KVS_CPU;
        if (copy)
            rc = dev_copy(c->L, DEV_HOST, p, a[i].device, a[i].data, bytes);
    }
    return rc ? rc : dev_sync(c->L, -1);
}

static int unstage(wrk_comm *c, size_t n, const kvs_array *outs, const kvs_array *h)
{
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        if (outs[i].device != KVS_CPU)
            rc = dev_copy(c->L, outs[i].device, outs[i].data, DEV_HOST, h[i].data,
                          outs[i].count * kvs_dtype_size(outs[i].dtype));
    return rc ? rc : dev_sync(c->L, -1);
}

/* Back to the pool (no CUDA call: any thread, any lock). */
static void free_host(wrk_comm *c, void **host, size_t nhost)
{
    for (size_t i = 0; i < nhost; i++)
        wrk_pinned_put(c->pool, host[i]);
}

/* ------------------------------------------------------------ local kinds */

/* "local" with device arrays (CommCPU): the host store on staged copies. */
static int local_cpu(kvs_store *s, wrk_comm *c, int type, size_t n, const uint64_t *keys,
                     const kvs_array *vals, const kvs_array *outs)
{
    kvs_array *hv = calloc(n ? n : 1, sizeof *hv), *ho = calloc(n ? n : 1, sizeof *ho);
    void **host = calloc(2 * n + 1, sizeof *host);
    size_t nhost = 0;
    int rc = 0;
    if (hv == NULL || ho == NULL || host == NULL) {
        rc = err_set(KVS_ENOMEM, "out of memory");
        goto out;
    }
    if (vals && (rc = stage(c, n, vals, true, hv, host, &nhost)) != 0)
        goto out;
    if (outs && (rc = stage(c, n, outs, false, ho, host, &nhost)) != 0)
        goto out;
    switch (type) {
    case WRK_OP_INIT:
        rc = wrk_local_init(s, n, keys, hv);
        break;
    case WRK_OP_PUSH:
        rc = wrk_local_push(s, n, keys, hv);
        break;
    case WRK_OP_PULL:
        if ((rc = wrk_local_pull(s, n, keys, ho)) == 0)
            rc = unstage(c, n, outs, ho);
        break;
    default:
        if ((rc = wrk_local_check(s, n, keys, outs, "pushpull output")) == 0 &&
            (rc = wrk_local_push(s, n, keys, hv)) == 0 &&
            (rc = wrk_local_pull(s, n, keys, ho)) == 0)
            rc = unstage(c, n, outs, ho);
    }
out:
    free_host(c, host, nhost);
    free(host);
    free(hv);
    free(ho);
    return rc;
}

/* "device" / "nccl": the values live in the merge buffers. */
static int local_dev(kvs_store *s, wrk_comm *c, int type, size_t n, const uint64_t *keys,
                     const kvs_array *vals, const kvs_array *outs)
{
    groups g;
    int rc = group(n, keys, &g);
    if (rc)
        return rc;
    if ((rc = same_shapes(&g, keys, vals, outs)) != 0)
        goto out;
    if (type == WRK_OP_INIT) {
        pthread_mutex_lock(&s->mu);
        for (size_t u = 0; u < g.nu && rc == 0; u++) {
            const kvs_array *a = &vals[g.idx[g.head[u]]];
            uint64_t key = keys[g.idx[g.head[u]]];
            wrk_key *k = hmap_get(&s->keys, key);
            if (k && (k->count != a->count || k->dtype != a->dtype))
                rc = err_set(KVS_ESHAPE, "key %llu: init has %llu %s elements but the key was "
                             "initialised with %llu %s elements", (unsigned long long)key,
                             (unsigned long long)a->count, kvs_dtype_name(a->dtype),
                             (unsigned long long)k->count, kvs_dtype_name(k->dtype));
        }
        for (size_t u = 0; u < g.nu && rc == 0; u++) {
            const kvs_array *a = &vals[g.idx[g.head[u]]];
            uint64_t key = keys[g.idx[g.head[u]]];
            wrk_key *k = hmap_get(&s->keys, key);
            if (k)
                continue;
            if ((k = calloc(1, sizeof *k)) == NULL || hmap_put(&s->keys, key, k) != 0) {
                free(k);
                rc = err_set(KVS_ENOMEM, "out of memory");
                break;
            }
            k->count = a->count;
            k->dtype = a->dtype;
        }
        pthread_mutex_unlock(&s->mu);
    } else {
        if (vals)
            rc = wrk_local_check(s, n, keys, vals, "push value");
        if (rc == 0 && outs)
            rc = wrk_local_check(s, n, keys, outs, type == WRK_OP_PULL ? "pull output"
                                                                       : "pushpull output");
    }
    for (size_t u = 0; u < g.nu && rc == 0; u++) {
        const size_t *ix = &g.idx[g.head[u]];
        size_t cnt = g.head[u + 1] - g.head[u];
        const kvs_array *shape = vals ? &vals[ix[0]] : &outs[ix[0]];
        ckey *k;
        if ((rc = key_get(c, keys[ix[0]], shape, named(vals, outs, ix, cnt), &k)) != 0)
            break;
        if (type == WRK_OP_INIT) {
            if ((rc = dev_copy(c->L, k->m, k->buf[k->m], shape->device, shape->data,
                               k->bytes)) == 0)
                rc = dev_sync(c->L, -1);
            k->whole = true;
            k->sliced = false;
        } else if (type == WRK_OP_PUSH) {
            if ((rc = reduce(c, k, vals, ix, cnt, false)) == 0)
                rc = dev_sync(c->L, -1);
        } else if (type == WRK_OP_PULL) {
            rc = spread(c, k, outs, ix, cnt);
        } else {
            rc = reduce_spread(c, k, vals, ix, cnt, outs, ix, cnt);
        }
    }
out:
    groups_fini(&g);
    return rc;
}

/* ------------------------------------------------------------- dist kinds */

static void post_free(wrk_post *p);
static const wrk_op_ops post_ops;

static wrk_post *post_new(wrk_comm *c, size_t nhost, size_t ncopies, size_t nkeys, size_t narrays)
{
    wrk_post *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->c = c;
    p->host = calloc(nhost + 1, sizeof *p->host);
    p->copies = calloc(ncopies + 1, sizeof *p->copies);
    p->keys = calloc(nkeys + 1, sizeof *p->keys);
    p->arrays = calloc(narrays + 1, sizeof *p->arrays);
    p->gk = calloc(nhost + 1, sizeof *p->gk);
    if (p->host == NULL || p->copies == NULL || p->keys == NULL || p->arrays == NULL ||
        p->gk == NULL) {
        post_free(p);
        return NULL;
    }
    return p;
}

static void post_free(wrk_post *p)
{
    if (p == NULL)
        return;
    for (size_t i = 0; p->keys && i < p->nkeys; i++)
        if (p->keys[i].ck)
            atomic_store(&p->keys[i].ck->rbusy, false); /* (no lock: any thread) */
    for (size_t i = 0; p->gk && i < p->ngk; i++)
        atomic_store(&p->gk[i]->gbusy, false);
    free(p->gk);
    if (p->host)
        free_host(p->c, p->host, p->nhost);
    free(p->host);
    free(p->copies);
    free(p->keys);
    free(p->arrays);
    free(p);
}

static void post_free_owner(void *owner)
{
    post_free(owner);
}

/* dist_* with device arrays: host copies go through the host path; the
 * pulled values are copied to the device outputs afterwards.  In a local
 * group (group.h) a push or pushpull of them goes through the group like a
 * host array's: the members read each other's pinned copies, and the
 * round's value lands in every member's pinned copy before its post step
 * copies it to the devices; so does a plain pull of a sync store (one
 * member pulls each chunk for the group). */
static int dist_cpu(kvs_store *s, wrk_comm *c, int type, size_t n, const uint64_t *keys,
                    const kvs_array *vals, const kvs_array *outs, int priority)
{
    kvs_array *hv = calloc(n ? n : 1, sizeof *hv), *ho = calloc(n ? n : 1, sizeof *ho);
    wrk_post *p = post_new(c, 2 * n, n, 0, 0);
    wrk_op *op = NULL;
    int rc = 0;
    if (hv == NULL || ho == NULL || p == NULL) {
        rc = err_set(KVS_ENOMEM, "out of memory");
        goto out;
    }
    pthread_mutex_lock(&c->mu);
    if (vals)
        rc = stage(c, n, vals, true, hv, p->host, &p->nhost);
    if (rc == 0 && outs)
        rc = stage(c, n, outs, false, ho, p->host, &p->nhost);
    pthread_mutex_unlock(&c->mu);
    if (rc)
        goto out;
    for (size_t i = 0; outs && i < n; i++)
        if (outs[i].device != KVS_CPU)
            p->copies[p->ncopies++] = (post_copy){outs[i].device, outs[i].data, ho[i].data,
                                                  outs[i].count * kvs_dtype_size(outs[i].dtype)};
    if (type == WRK_OP_INIT) {
        if ((rc = wrk_submit(s, type, n, keys, hv, NULL, 0, &op, NULL, NULL, NULL)) == 0)
            rc = wrk_wait_op(s, op);
        goto out;
    }
    if (wrk_grp_on(s) && (type != WRK_OP_PULL || !s->async))
        rc = wrk_grp_submit(s, type, n, keys, vals ? hv : NULL, outs ? ho : NULL, NULL, priority,
                            &post_ops, p);
    else
        rc = wrk_submit(s, type, n, keys, vals ? hv : NULL, outs ? ho : NULL, priority, NULL,
                        &post_ops, p, NULL);
    if (rc == 0)
        p = NULL; /* the op owns it */
out:
    post_free(p);
    free(hv);
    free(ho);
    return rc;
}

/* Stage the summed values of a gated op to the host request by request
 * (each request's part or chunk of its key), letting each request leave as
 * soon as its bytes are there: the copies to the host overlap the network.
 * ks[u], hv[u]: key u of the op (its kidx). */
static int stage_gated(kvs_store *s, wrk_comm *c, wrk_op *op, ckey **ks, const kvs_array *hv)
{
    for (size_t r = 0; r < op->nreqs; r++) {
        const wrk_req *q = &op->reqs[r];
        ckey *k = ks[q->kidx];
        size_t es = kvs_dtype_size(k->dtype);
        int rc = to_host_range(c, k, hv[q->kidx].data, q->h.offset * es, q->h.count * es);
        if (rc)
            return rc;
        wrk_op_open(s, op, r + 1);
    }
    return 0;
}

/* The hash of the host's topology for trees across the local group (c->mu
 * held, the layer open; once): KVS_TOPOLOGY over the host's devices, else
 * detected (CUDA), else every simulated device linked alike.  0: no trees
 * (MXNET_KVSTORE_USETREE unset, or no topology: said once). */
static uint64_t host_thash(wrk_comm *c)
{
    char err[512];
    int rc = 0;
    if (c->htopo_tried)
        return c->thash;
    c->htopo_tried = true;
    if (!c->s->c.use_tree)
        return 0;
    if (!c->have_htopo && dev_is_cuda(c->L)) {
        rc = tree_topo_detect(&c->htopo, false, c->s->c.cuda_plugin, err, sizeof err);
    } else if (!c->have_htopo) { /* simulated devices: all linked alike */
        if ((rc = tree_topo_init(&c->htopo, dev_backend_count(c->L))) != 0)
            snprintf(err, sizeof err, "%s", kvs_strerror(rc));
        for (int i = 0; rc == 0 && i < c->htopo.n * c->htopo.n; i++)
            c->htopo.w[i] = 1;
        snprintf(c->htopo.name, sizeof c->htopo.name, "uniform");
    }
    if (rc) {
        LOG(LOG_WARN, c->s->who, "comm", "MXNET_KVSTORE_USETREE=1: no topology of the host's "
            "devices (%s): the local group sums each chunk at its owner from every member", err);
        return 0;
    }
    c->have_htopo = true;
    uint64_t h = 1469598103934665603ull; /* FNV-1a over n and the weights */
    const unsigned char *b = (const unsigned char *)&c->htopo.n;
    for (size_t i = 0; i < sizeof c->htopo.n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    b = (const unsigned char *)c->htopo.w;
    for (size_t i = 0; i < sizeof(double) * (size_t)c->htopo.n * (size_t)c->htopo.n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    c->thash = h ? h : 1;
    return c->thash;
}

/* Whether key k's sum goes to the local group in device memory (*on): the
 * backend can share it and the key is not under the group's floor; then
 * k->gbuf (made and exported on first use) is this op's until it is freed
 * (post_free).  A gbuf still held by an earlier op of the key (the
 * caller did not wait for it) leaves this one on the host copy. */
static int gbuf_take(kvs_store *s, wrk_comm *c, ckey *k, bool *on)
{
    bool no = false;
    int rc;
    *on = false;
    if (!dev_ipc_ok(c->L) || k->count == 0 || wrk_grp_solo(s, k->bytes))
        return 0;
    if (k->gbuf == NULL) {
        if ((rc = dev_alloc_shared(c->L, k->m, k->bytes, &k->gbuf)) != 0)
            return rc;
        if ((rc = dev_ipc_export(c->L, k->m, k->gbuf, &k->gh)) != 0) {
            dev_free(c->L, k->m, k->gbuf);
            k->gbuf = NULL;
            return rc;
        }
    }
    *on = atomic_compare_exchange_strong(&k->gbusy, &no, true);
    return 0;
}

/* dist_*_device: one summed array per key through the servers.  A push's
 * sum reaches the host part by part as its requests leave (stage_gated); a
 * pull's reply parts go to the merge device as they arrive (chunked pull,
 * wrk_comm_reply), the broadcast to the outputs runs once all are in.  In a
 * local group (group.h) a plain pull of a sync store goes through the
 * group into the pinned copies (each chunk pulled once for the host), and a
 * push or pushpull hands each key's sum whole to the group, which sums the
 * members' sums, pushes once for the host and writes the round's value
 * back where each member's sum was; the post step takes it to the outputs.
 * Where the backend can share device memory the sum stays on the device
 * (the key's gbuf, which the other members map: gbuf_take); else, and for
 * keys under the group's floor (sent solo), it is staged to a pinned host
 * copy. */
static int dist_dev(kvs_store *s, wrk_comm *c, int type, size_t n, const uint64_t *keys,
                    const kvs_array *vals, const kvs_array *outs, int priority)
{
    groups g;
    wrk_post *p = NULL;
    wrk_op *op = NULL;
    uint64_t *uk = NULL;
    kvs_array *hv = NULL, *ho = NULL;
    ckey **ks = NULL;
    wrk_grp_dev *dv = NULL;
    bool grp = wrk_grp_on(s) && (type == WRK_OP_PUSH || type == WRK_OP_PUSHPULL);
    /* a plain pull of a sync store: through the group into the pinned copies */
    bool gpull = wrk_grp_on(s) && type == WRK_OP_PULL && !s->async;
    int rc = group(n, keys, &g);
    if (rc)
        return rc;
    if ((rc = same_shapes(&g, keys, vals, outs)) != 0)
        goto out;
    uk = calloc(g.nu + 1, sizeof *uk);
    hv = calloc(g.nu + 1, sizeof *hv);
    ho = calloc(g.nu + 1, sizeof *ho);
    ks = calloc(g.nu + 1, sizeof *ks);
    dv = grp ? calloc(g.nu + 1, sizeof *dv) : NULL;
    p = post_new(c, g.nu, 0, outs ? g.nu : 0, outs ? n : 0);
    if (uk == NULL || hv == NULL || ho == NULL || ks == NULL || p == NULL || (grp && dv == NULL)) {
        rc = err_set(KVS_ENOMEM, "out of memory");
        goto out;
    }
    /* the device lock is held until every part is staged: no other call
     * changes these keys' device buffers meanwhile */
    pthread_mutex_lock(&c->mu);
    for (size_t u = 0; u < g.nu && rc == 0; u++) {
        const size_t *ix = &g.idx[g.head[u]];
        size_t cnt = g.head[u + 1] - g.head[u];
        const kvs_array *shape = vals ? &vals[ix[0]] : &outs[ix[0]];
        ckey *k;
        void *h;
        uk[u] = keys[ix[0]];
        if (type == WRK_OP_INIT) {
            /* rank 0's first value, as it is */
            if ((rc = stage(c, 1, shape, true, &hv[u], p->host, &p->nhost)) != 0)
                break;
            continue;
        }
        if ((rc = key_get(c, uk[u], shape, named(vals, outs, ix, cnt), &k)) != 0)
            break;
        bool gd = false;
        if (grp && (rc = gbuf_take(s, c, k, &gd)) != 0)
            break;
        if (gd) {
            h = NULL; /* the group reads and writes k->gbuf */
            p->gk[p->ngk++] = k;
            dv[u] = (wrk_grp_dev){true, k->m, k->gbuf, k->gh, dev_ordinal(c->L, k->m),
                                  host_thash(c)};
        } else if ((rc = wrk_pinned_get(c->pool, k->bytes, &h)) != 0) {
            break;
        } else {
            p->host[p->nhost++] = h;
        }
        ks[u] = k;
        hv[u] = ho[u] = (kvs_array){h, k->count, k->dtype, KVS_CPU};
        if (vals && (rc = reduce(c, k, vals, ix, cnt, false)) != 0)
            break;
        if (outs) {
            post_key *pk = &p->keys[p->nkeys++];
            pk->key = uk[u];
            pk->staging = h;
            pk->gdev = gd;
            pk->outs = &p->arrays[g.head[u]];
            for (size_t j = 0; j < cnt; j++)
                pk->outs[pk->nouts++] = outs[ix[j]];
            /* chunked pull where the value comes back whole to one device
             * and no other op of this key is using the key's rbuf */
            bool no = false;
            if (!grp && !gpull && !split(c, k) && k->count > 0 &&
                (k->rbuf || dev_alloc(c->L, k->m, k->bytes, &k->rbuf) == 0) &&
                atomic_compare_exchange_strong(&k->rbusy, &no, true))
                pk->ck = k;
        }
    }
    if (rc == 0 && type == WRK_OP_INIT) {
        pthread_mutex_unlock(&c->mu);
        if ((rc = wrk_submit(s, type, g.nu, uk, hv, NULL, 0, &op, NULL, NULL, NULL)) == 0)
            rc = wrk_wait_op(s, op);
        goto out;
    }
    if (rc == 0 && grp) {
        /* each key's sum whole in its gbuf or pinned copy, which the members
         * read and where the round's value lands (each chunk is read before
         * it is written, by its one owner) */
        for (size_t u = 0; u < g.nu && rc == 0; u++)
            rc = dv[u].on ? value_range(c, ks[u], ks[u]->m, ks[u]->gbuf, 0, ks[u]->bytes)
                          : value_range(c, ks[u], DEV_HOST, hv[u].data, 0, ks[u]->bytes);
        if (rc == 0)
            rc = dev_sync(c->L, -1);
        pthread_mutex_unlock(&c->mu);
        if (rc == 0 && (rc = wrk_grp_submit(s, type, g.nu, uk, hv, outs ? ho : NULL, dv, priority,
                                            &post_ops, p)) == 0)
            p = NULL; /* the op owns it */
        goto out;
    }
    if (rc == 0 && gpull) {
        pthread_mutex_unlock(&c->mu);
        if ((rc = wrk_grp_submit(s, type, g.nu, uk, NULL, ho, NULL, priority, &post_ops, p)) == 0)
            p = NULL; /* the op owns it */
        goto out;
    }
    if (rc == 0)
        rc = wrk_submit(s, type, g.nu, uk, vals ? hv : NULL, outs ? ho : NULL, priority, NULL,
                        &post_ops, p, vals ? &op : NULL);
    if (rc == 0) {
        p = NULL; /* the op owns it */
        if (op) {
            /* a failure here fails the op (its waits report it), not the call:
             * the parts already staged have left */
            char text[512];
            err_clear();
            int src = stage_gated(s, c, op, ks, hv);
            snprintf(text, sizeof text, "%s", src ? kvs_last_error() : "");
            wrk_op_open_done(s, op, src, src ? text : NULL);
        }
    }
    pthread_mutex_unlock(&c->mu);
out:
    post_free(p);
    free(uk);
    free(hv);
    free(ho);
    free(ks);
    free(dv);
    groups_fini(&g);
    return rc;
}

int wrk_comm_call(kvs_store *s, int type, size_t n, const uint64_t *keys, const kvs_array *vals,
                  const kvs_array *outs, int priority)
{
    wrk_comm *c = s->comm;
    int rc;
    if (s->kind == WRK_DIST)
        return c->mode == WRK_COMM_CPU ? dist_cpu(s, c, type, n, keys, vals, outs, priority)
                                       : dist_dev(s, c, type, n, keys, vals, outs, priority);
    pthread_mutex_lock(&c->mu);
    rc = c->mode == WRK_COMM_CPU ? local_cpu(s, c, type, n, keys, vals, outs)
                                 : local_dev(s, c, type, n, keys, vals, outs);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* ------------------------------------------------------ the post thread */

static int run_post(wrk_comm *c, wrk_post *p)
{
    int rc = 0;
    for (size_t i = 0; i < p->ncopies && rc == 0; i++)
        rc = dev_copy(c->L, p->copies[i].dst_dev, p->copies[i].dst, DEV_HOST, p->copies[i].src,
                      p->copies[i].bytes);
    for (size_t i = 0; i < p->nkeys && rc == 0; i++) {
        post_key *pk = &p->keys[i];
        ckey *k = hmap_get(&c->keys, pk->key);
        size_t idx[64], *ix = idx;
        if (k == NULL)
            return err_set(KVS_EINTERNAL, "key %llu: no device state", (unsigned long long)pk->key);
        if (pk->nouts > 64 && (ix = malloc(pk->nouts * sizeof *ix)) == NULL)
            return err_set(KVS_ENOMEM, "out of memory");
        for (size_t j = 0; j < pk->nouts; j++)
            ix[j] = j;
        if (pk->gdev) {
            /* the group wrote the round's value into the key's gbuf */
            rc = dev_copy(c->L, k->m, k->buf[k->m], k->m, k->gbuf, k->bytes);
            k->whole = true;
            k->sliced = false;
        } else if (pk->ck && !pk->rmissed) {
            /* the parts are on the merge device already: they become the value */
            void *v = k->buf[k->m];
            k->buf[k->m] = k->rbuf;
            k->rbuf = v;
            k->whole = true;
            k->sliced = false;
        } else {
            rc = from_host(c, k, pk->staging);
        }
        if (rc == 0)
            rc = spread(c, k, pk->outs, ix, pk->nouts);
        if (ix != idx)
            free(ix);
    }
    return rc ? rc : dev_sync(c->L, -1);
}

static void queue_item(wrk_comm *c, post_item *it)
{
    pthread_mutex_lock(&c->qmu);
    it->next = NULL;
    if (c->qtail)
        c->qtail->next = it;
    else
        c->qhead = it;
    c->qtail = it;
    pthread_cond_signal(&c->qcv);
    pthread_mutex_unlock(&c->qmu);
}

/* op's replies are all in and it has no error (op.h's post; mu held): if
 * its post step (broadcast to the device outputs) has not run, queue it for
 * the comm thread and keep the op pending. */
static bool post_locked(kvs_store *s, wrk_op *op)
{
    wrk_post *p = op->owner;
    wrk_comm *c = s->comm;
    if (p == NULL || p->ran || (p->ncopies == 0 && p->nkeys == 0))
        return false;
    p->ran = true;
    p->op = op;
    op->pending = 1;
    p->final = (post_item){NULL, p, op, SIZE_MAX, 0, 0};
    queue_item(c, &p->final);
    return true;
}

/* The I/O thread wrote a successful reply of q (op.h's reply; without mu):
 * queue the copy of its part to the key's merge device for the comm thread
 * (the op stays pending until it is done). */
static int post_reply(kvs_store *s, wrk_req *q, const proto_hdr *h, const void *body,
                      const char **why)
{
    wrk_post *p = q->op->owner;
    wrk_comm *c = s->comm;
    (void)h;
    (void)body;
    (void)why;
    if (p == NULL || q->nouts == 0 || q->kidx >= p->nkeys || p->keys[q->kidx].ck == NULL ||
        q->h.count == 0)
        return 0;
    post_key *pk = &p->keys[q->kidx];
    size_t es = kvs_dtype_size((kvs_dtype)q->h.dtype);
    post_item *it = malloc(sizeof *it);
    if (it == NULL) {
        pk->rmissed = true; /* (I/O thread only) the post step copies it all */
        return 0;
    }
    *it = (post_item){NULL, p, q->op, q->kidx, q->h.offset * es, q->h.count * es};
    pthread_mutex_lock(&s->mu);
    q->op->pending++; /* the op lives until the part is on its device */
    pthread_mutex_unlock(&s->mu);
    queue_item(c, it);
    return 0;
}

static const wrk_op_ops post_ops = {.reply = post_reply, .post = post_locked,
                                    .free = post_free_owner};

static void *post_thread(void *arg)
{
    wrk_comm *c = arg;
    char text[512];
    for (;;) {
        pthread_mutex_lock(&c->qmu);
        while (c->qhead == NULL && !c->qstop)
            pthread_cond_wait(&c->qcv, &c->qmu);
        post_item *it = c->qhead;
        if (it == NULL) {
            pthread_mutex_unlock(&c->qmu);
            break;
        }
        c->qhead = it->next;
        if (c->qhead == NULL)
            c->qtail = NULL;
        pthread_mutex_unlock(&c->qmu);
        err_clear();
        wrk_post *p = it->p;
        wrk_op *op = it->op;
        int rc;
        pthread_mutex_lock(&c->mu);
        if (it->kidx == SIZE_MAX) {
            rc = run_post(c, p);
        } else {
            /* a pulled part, from host staging to the merge device */
            post_key *pk = &p->keys[it->kidx];
            ckey *k = pk->ck;
            rc = dev_copy(c->L, k->m, (char *)k->rbuf + it->off, DEV_HOST,
                          (const char *)pk->staging + it->off, it->len);
            if (rc == 0)
                rc = dev_sync(c->L, k->m);
            free(it);
        }
        pthread_mutex_unlock(&c->mu);
        snprintf(text, sizeof text, "%s", rc ? kvs_last_error() : "");
        wrk_op_release(c->s, op, rc, rc ? text : NULL); /* may free p */
    }
    return NULL;
}

/* ----------------- local groups' sums in device memory (wrk_grp_devops) */

/* Room for slots chunks of bytes on dev (c->mu held). */
static int gscr_room(wrk_comm *c, int dev, int slots, uint64_t bytes)
{
    size_t want = (size_t)slots * (((size_t)bytes + 255) & ~(size_t)255);
    if (want <= c->gscr_cap[dev])
        return 0;
    dev_free(c->L, dev, c->gscr[dev]);
    c->gscr[dev] = NULL;
    c->gscr_cap[dev] = 0;
    int rc = dev_alloc(c->L, dev, want, &c->gscr[dev]);
    if (rc == 0)
        c->gscr_cap[dev] = want;
    return rc;
}

/* The group's device (c->mu held): dev, or device 0. */
static int grp_dev(wrk_comm *c, int dev, int *out)
{
    int rc = open_locked(c);
    if (rc)
        return rc;
    if (!dev_ipc_ok(c->L))
        return err_set(KVS_EDEVICE, "local group: a member hands its sum in device memory, "
                       "but this worker's %s devices cannot share memory", dev_backend(c->L));
    *out = dev < 0 ? 0 : dev;
    return 0;
}

/* (wrk_grp_devops.sum, group.h) */
static int grp_sum(wrk_comm *c, int dev, kvs_dtype dt, const wrk_dev_part *in, int n,
                   uint64_t off, uint64_t bytes, void *out)
{
    size_t es = kvs_dtype_size(dt), slot = ((size_t)bytes + 255) & ~(size_t)255;
    const void *srcs[DEV_SUM_MAX];
    int rc;
    if (n < 1 || n > DEV_SUM_MAX)
        return err_set(KVS_EINVAL, "local group: %d members to sum (at most %d)", n,
                       DEV_SUM_MAX);
    if (bytes == 0)
        return 0;
    pthread_mutex_lock(&c->mu);
    if ((rc = grp_dev(c, dev, &dev)) != 0 || (rc = gscr_room(c, dev, n + 1, bytes)) != 0)
        goto out;
    char *scr = c->gscr[dev];
    for (int m = 0; m < n && rc == 0; m++) {
        char *at = scr + (size_t)m * slot;
        void *peer;
        switch (in[m].kind) {
        case WRK_DEVP_OWN:
            srcs[m] = (char *)in[m].p + off;
            break;
        case WRK_DEVP_PEER:
            if ((rc = dev_ipc_open(c->L, dev, in[m].pid, in[m].h, off + bytes, &peer)) == 0)
                rc = dev_ipc_copy(c->L, dev, at, (char *)peer + off, bytes);
            srcs[m] = at;
            break;
        default:
            rc = dev_copy(c->L, dev, at, DEV_HOST, in[m].p, bytes);
            srcs[m] = at;
        }
    }
    /* out NULL: in place, into our own part (dev_sum's dst may be srcs[0]) */
    char *sum = out ? scr + (size_t)n * slot : (char *)srcs[0];
    if (rc == 0 && out == NULL && in[0].kind != WRK_DEVP_OWN)
        rc = err_set(KVS_EINTERNAL, "local group: an in-place sum needs our own part first");
    if (rc == 0)
        rc = dev_sum(c->L, dev, dt, sum, srcs, n, bytes / es);
    if (rc == 0 && out)
        rc = dev_copy(c->L, DEV_HOST, out, dev, sum, bytes);
    if (rc == 0)
        rc = dev_sync(c->L, dev);
out:
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* (wrk_grp_devops.put, group.h) */
static int grp_put(wrk_comm *c, int dev, const void *val, uint64_t off, uint64_t bytes,
                   const wrk_dev_part *to, int n)
{
    int rc;
    if (bytes == 0)
        return 0;
    pthread_mutex_lock(&c->mu);
    if ((rc = grp_dev(c, dev, &dev)) != 0 || (rc = gscr_room(c, dev, 1, bytes)) != 0)
        goto out;
    char *v = c->gscr[dev];
    rc = dev_copy(c->L, dev, v, DEV_HOST, val, bytes);
    for (int m = 0; m < n && rc == 0; m++) {
        void *peer;
        if (to[m].kind == WRK_DEVP_OWN)
            rc = dev_copy(c->L, dev, (char *)to[m].p + off, dev, v, bytes);
        else if (to[m].kind == WRK_DEVP_PEER &&
                 (rc = dev_ipc_open(c->L, dev, to[m].pid, to[m].h, off + bytes, &peer)) == 0)
            rc = dev_ipc_copy(c->L, dev, (char *)peer + off, v, bytes);
    }
    if (rc == 0)
        rc = dev_sync(c->L, dev);
out:
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* (wrk_grp_devops.plan, group.h) */
static int grp_plan(wrk_comm *c, int n, const int *ord, int *parent)
{
    char list[TREE_MAX_N * 4 + 1] = "", err[512];
    size_t used = 0;
    tree_topo t = {0};
    tree_set set;
    int rc = 0;
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->ntcache; i++)
        if (c->tcache[i].n == n && memcmp(c->tcache[i].ord, ord, sizeof(int) * (size_t)n) == 0) {
            memcpy(parent, c->tcache[i].parent, sizeof(int) * (size_t)n * (size_t)n);
            goto out;
        }
    for (int i = 0; i < n; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%d", i ? "," : "", ord[i]);
    if (n < 1 || n > TREE_MAX_N || !c->have_htopo) {
        rc = err_set(KVS_EINTERNAL, "local group: no trees over %d members", n);
        goto out;
    }
    for (int i = 0; i < n; i++)
        if (ord[i] < 0 || ord[i] >= c->htopo.n) {
            rc = err_set(KVS_EPROTO, "local group: local rank %d's device %d is not one of "
                         "the host's %d", i, ord[i], c->htopo.n);
            goto out;
        }
    if ((rc = topo_pick(&c->htopo, n, ord, &t)) != 0)
        goto out;
    if ((rc = tree_plan(&t, &c->topts, &set, err, sizeof err)) != 0) {
        rc = err_set(rc == KVS_EINVAL ? KVS_ECONFIG : rc, "MXNET_KVSTORE_USETREE=1: cannot "
                     "plan trees over the local group's devices (%s, by local rank; GPU i "
                     "below is local rank i's): %s", list, err);
        goto out;
    }
    memcpy(parent, set.parent, sizeof(int) * (size_t)n * (size_t)n);
    tree_set_fini(&set);
    int *co = malloc(sizeof(int) * (size_t)n), *cp = malloc(sizeof(int) * (size_t)n * (size_t)n);
    bool first = c->tplanned++ < COMM_TCACHE;
    if (co && cp) { /* kept (the oldest goes); else planned again next time */
        int at = c->ntcache < COMM_TCACHE ? c->ntcache++ : (int)(c->tplanned % COMM_TCACHE);
        free(c->tcache[at].ord);
        free(c->tcache[at].parent);
        memcpy(co, ord, sizeof(int) * (size_t)n);
        memcpy(cp, parent, sizeof(int) * (size_t)n * (size_t)n);
        c->tcache[at].n = n;
        c->tcache[at].ord = co;
        c->tcache[at].parent = cp;
    } else {
        free(co);
        free(cp);
    }
    char text[1024];
    size_t tl = 0;
    for (int r = 0; r < n && tl < sizeof text; r++) {
        tl += (size_t)snprintf(text + tl, sizeof text - tl, "%sroot %d:", r ? "; " : "", r);
        for (int v = 0; v < n && tl < sizeof text; v++)
            if (parent[r * n + v] >= 0)
                tl += (size_t)snprintf(text + tl, sizeof text - tl, " %d->%d", v,
                                       parent[r * n + v]);
    }
    LOG(first ? LOG_INFO : LOG_DEBUG, c->s->who, "comm", "local group: trees over the "
        "members' devices (%s): %s", list, text);
out:
    tree_topo_fini(&t);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static const wrk_grp_devops grp_devops = {grp_sum, grp_put, grp_plan};
