/*
 * devworker.c - kvs-devworker: a worker with device arrays, for the
 * multi-process device tests (tests/device/test-dist-device.sh).
 *
 *   kvs-devworker --type T [--rounds R] [--async] [--big N] [--overlap] [--own-device]
 *
 * Devices: simulated (KVS_SIM_DEVICES=N) or, without it, every CUDA device
 * (memory from cudaMalloc through tools/devmem.h).  Per dtype two keys: 37
 * elements and 2003 (or --big N; above the MXNET_KVSTORE_TREE_ARRAY_BOUND and
 * MXNET_KVSTORE_BIGARRAY_BOUND the script sets).  Each push has one array per
 * device, a second one on device 0 and one in host memory; each pull has one
 * output per device and one in host memory.  Values are small integers:
 * every sum of W workers is exact in every dtype and is checked on every
 * output, element by element.
 *   sync types: init (rank 0's value from device N-1), pull, then R rounds
 *     (push + pull; the last one a pushpull) against the round's sum.
 *     --overlap: rounds go in pairs, each pair's second push issued before
 *     the first is waited for on odd ranks (after it on even ones), so the
 *     same round meets a key's second push beside other members' first
 *     kind of push (a local group's device buffer is still held).
 *   --async: init zeros, R pushes, barrier, pull: the sum of all rounds.
 *   --own-device: one device, LOCAL_RANK (kvs-launch sets it) modulo the
 *     devices there are (KVS_DEVICES set so), as one process per GPU.
 * Prints "devworker W: ok ..." and exits 0, or prints the mismatch and
 * exits 1.  The line ends with the bytes this worker sent to and received
 * from the servers in its rounds (kvs_metrics' kvs_sent_bytes_total and
 * kvs_received_bytes_total, after init and its check): a local group moves
 * each key part once (tests/integ/test_group.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvs.h"
#include "tests/unit/exact.h"
#include "tools/devmem.h"

#define MAXSRC 70

static int W, rank, N;
static devmem M;

static int val(int w, int r, int src, uint64_t key, uint64_t i)
{
    uint64_t h = (uint64_t)(w + 1) * UINT64_C(0x94D049BB133111EB) ^ (uint64_t)r * UINT64_C(0x9E3779B97F4A7C15) ^
                 (uint64_t)(src + 7) * UINT64_C(0xC2B2AE3D27D4EB4F) ^ key * UINT64_C(0x165667B19E3779F9) ^
                 (i + 1) * UINT64_C(0xD6E8FEB86659FD93);
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return (int)(h % 13) - 6;
}

typedef struct key {
    uint64_t key, count;
    kvs_dtype t;
} key;

static key keys[2 * KVS_NUM_DTYPES];
static int nkeys;

/* The values of source src (zeros for src < 0) on device dev (or host). */
static void *buf_of(const key *k, int w, int r, int src, int dev)
{
    int *v = malloc(k->count * sizeof *v);
    void *b = malloc(k->count * dsize(k->t) + 1), *d;
    for (uint64_t i = 0; i < k->count; i++)
        v[i] = src < 0 ? 0 : val(w, r, src, k->key, i);
    fill(k->t, b, v, k->count);
    free(v);
    if (dev == KVS_CPU)
        return b;
    d = devmem_alloc(&M, dev, k->count * dsize(k->t));
    devmem_put(&M, dev, d, b, k->count * dsize(k->t));
    free(b);
    return d;
}

static void *out_buf(const key *k, int dev)
{
    size_t bytes = k->count * dsize(k->t);
    void *b = malloc(bytes);
    memset(b, 0xEE, bytes);
    if (dev == KVS_CPU)
        return b;
    void *d = devmem_alloc(&M, dev, bytes);
    devmem_put(&M, dev, d, b, bytes);
    free(b);
    return d;
}

static void release(kvs_array *a)
{
    if (a->device == KVS_CPU)
        free(a->data);
    else
        devmem_free(&M, a->device, a->data);
}

/* expected: sum over workers (and rounds 1..r when all) of every source */
static int check(const char *what, const key *k, const kvs_array *o, int r, int all, int init)
{
    int *v = calloc(k->count, sizeof *v);
    unsigned char *want = malloc(k->count * dsize(k->t));
    for (uint64_t i = 0; i < k->count; i++) {
        if (init) {
            v[i] = val(0, 0, N - 1, k->key, i);
            continue;
        }
        for (int rr = all ? 1 : r; rr <= r; rr++)
            for (int w = 0; w < W; w++)
                for (int j = 0; j < N + 2; j++)
                    v[i] += val(w, rr, j, k->key, i);
    }
    fill(k->t, want, v, k->count);
    int bad = 0;
    unsigned char *got = o->data;
    if (o->device != KVS_CPU) {
        got = malloc(k->count * dsize(k->t));
        devmem_get(&M, o->device, got, o->data, k->count * dsize(k->t));
    }
    for (uint64_t i = 0; i < k->count && !bad; i++)
        if (memcmp(got + i * dsize(k->t), want + i * dsize(k->t), dsize(k->t))) {
            printf("devworker %d: MISMATCH %s key=%llu %s output on device %d index=%llu\n",
                   rank, what, (unsigned long long)k->key, kvs_dtype_name(k->t), o->device,
                   (unsigned long long)i);
            bad = 1;
        }
    if (got != o->data)
        free(got);
    free(v);
    free(want);
    return bad;
}

/* Bytes sent to the servers so far (every data path). */
/* The sum of the series of a counter (name: "kvs_sent_bytes_total{", ...). */
static double metric_sum(kvs_store *s, const char *name)
{
    int need = kvs_metrics(s, NULL, 0);
    double sent = 0;
    char *text = need > 0 ? malloc((size_t)need + 1) : NULL;
    if (text == NULL || kvs_metrics(s, text, (size_t)need + 1) != need) {
        free(text);
        return -1;
    }
    for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n")) {
        char *sp = strrchr(l, ' ');
        if (sp && strncmp(l, name, strlen(name)) == 0)
            sent += atof(sp + 1);
    }
    free(text);
    return sent;
}

static int fail(const char *call, int rc)
{
    printf("devworker %d: %s: %s: %s\n", rank, call, kvs_errname(rc), kvs_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    const char *type = NULL;
    int rounds = 3, async = 0, overlap = 0, own = 0;
    uint64_t big = 2003;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--type") && i + 1 < argc)
            type = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--async"))
            async = 1;
        else if (!strcmp(argv[i], "--big") && i + 1 < argc)
            big = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--overlap"))
            overlap = 1;
        else if (!strcmp(argv[i], "--own-device"))
            own = 1;
        else {
            fprintf(stderr, "usage: kvs-devworker --type T [--rounds R] [--async] [--big N] "
                    "[--overlap] [--own-device]\n");
            return 2;
        }
    }
    if (type == NULL || rounds < 1 || big < 1 || big > (1u << 24) || (overlap && async)) {
        fprintf(stderr, "usage: kvs-devworker --type T [--rounds R] [--async] [--big N] "
                "[--overlap] [--own-device]\n");
        return 2;
    }
    if (devmem_open(&M) != 0 || M.n > 16) {
        fprintf(stderr, "kvs-devworker: needs 1..16 devices: KVS_SIM_DEVICES=N or CUDA\n");
        return 2;
    }
    if (own) { /* device LOCAL_RANK % n of those there are, alone */
        const char *lr = getenv("LOCAL_RANK");
        int d = (lr ? atoi(lr) : 0) % M.n;
        char sel[16];
        snprintf(sel, sizeof sel, "%d", M.sim ? d : M.map[d]);
        setenv("KVS_DEVICES", sel, 1);
        M.map[0] = M.map[d];
        M.n = 1;
    }
    N = M.n;
    kvs_store *s;
    int rc = kvs_create(type, &s);
    if (rc)
        return fail("kvs_create", rc);
    W = kvs_num_workers(s);
    rank = kvs_rank(s);
    for (int t = 0; t < KVS_NUM_DTYPES; t++) {
        keys[nkeys++] = (key){10 + (uint64_t)t, 37, (kvs_dtype)t};
        keys[nkeys++] = (key){20 + (uint64_t)t, big, (kvs_dtype)t};
    }
    int nsrc = N + 2, nout = N + 1, bad = 0;
    uint64_t *ks = malloc(sizeof *ks * (size_t)nkeys * (size_t)nsrc);
    kvs_array *in = malloc(sizeof *in * (size_t)nkeys * (size_t)nsrc);
    kvs_array *out = malloc(sizeof *out * (size_t)nkeys * (size_t)nsrc);
    /* init: rank 0's value from device N-1 (async: zeros) */
    for (int k = 0; k < nkeys; k++) {
        ks[k] = keys[k].key;
        in[k] = (kvs_array){buf_of(&keys[k], 0, 0, async ? -1 : N - 1, N - 1), keys[k].count,
                            keys[k].t, N - 1};
    }
    if ((rc = kvs_init(s, (size_t)nkeys, ks, in)) != 0)
        return fail("kvs_init", rc);
    for (int k = 0; k < nkeys; k++)
        release(&in[k]);
    /* output arrays: one per device and one in host memory */
    int n = 0;
    for (int k = 0; k < nkeys; k++)
        for (int j = 0; j <= N; j++) {
            ks[n] = keys[k].key;
            out[n++] = (kvs_array){out_buf(&keys[k], j < N ? j : KVS_CPU), keys[k].count,
                                   keys[k].t, j < N ? j : KVS_CPU};
        }
    if (!async) {
        if ((rc = kvs_pull(s, (size_t)n, ks, out, 0)) != 0 || (rc = kvs_wait_all(s)) != 0)
            return fail("kvs_pull after init", rc);
        for (int o = 0; o < n && !bad; o++)
            bad |= check("pull after init", &keys[o / nout], &out[o], 0, 0, 1);
    }
    double sent0 = metric_sum(s, "kvs_sent_bytes_total{");
    double recv0 = metric_sum(s, "kvs_received_bytes_total{");
    for (int r = 1; r <= rounds && !bad; r++) {
        int m = 0;
        for (int k = 0; k < nkeys; k++)
            for (int j = 0; j < nsrc; j++) {
                ks[m] = keys[k].key;
                int dev = j < N ? j : j == N ? 0 : KVS_CPU;
                in[m++] = (kvs_array){buf_of(&keys[k], rank, r, j, dev), keys[k].count,
                                      keys[k].t, dev};
            }
        if (overlap && r + 1 < rounds) {
            /* this round and the next, pushed back to back */
            kvs_array *in2 = malloc(sizeof *in2 * (size_t)m);
            if (in2 == NULL)
                return fail("malloc", KVS_ENOMEM);
            for (int o = 0; o < m; o++) {
                int j = o % nsrc, dev = j < N ? j : j == N ? 0 : KVS_CPU;
                in2[o] = (kvs_array){buf_of(&keys[o / nsrc], rank, r + 1, j, dev),
                                     keys[o / nsrc].count, keys[o / nsrc].t, dev};
            }
            if ((rc = kvs_push(s, (size_t)m, ks, in, 0)) != 0 ||
                (rank % 2 == 0 && (rc = kvs_wait_all(s)) != 0) ||
                (rc = kvs_push(s, (size_t)m, ks, in2, 0)) != 0 || (rc = kvs_wait_all(s)) != 0)
                return fail("kvs_push (two rounds)", rc);
            for (int o = 0; o < m; o++)
                release(&in2[o]);
            free(in2);
            r++;
            for (int o = 0; o < nkeys * nout; o++)
                ks[o] = keys[o / nout].key;
            if ((rc = kvs_pull(s, (size_t)n, ks, out, 0)) != 0 || (rc = kvs_wait_all(s)) != 0)
                return fail("kvs_pull", rc);
            for (int o = 0; o < n && !bad; o++)
                bad |= check("two pushes+pull", &keys[o / nout], &out[o], r, 0, 0);
        } else if (async || r < rounds) {
            if ((rc = kvs_push(s, (size_t)m, ks, in, 0)) != 0 || (rc = kvs_wait_all(s)) != 0)
                return fail("kvs_push", rc);
            if (!async) {
                for (int o = 0; o < nkeys * nout; o++)
                    ks[o] = keys[o / nout].key;
                if ((rc = kvs_pull(s, (size_t)n, ks, out, 0)) != 0 ||
                    (rc = kvs_wait_all(s)) != 0)
                    return fail("kvs_pull", rc);
                for (int o = 0; o < n && !bad; o++)
                    bad |= check("push+pull", &keys[o / nout], &out[o], r, 0, 0);
            }
        } else {
            /* pushpull: outputs alias the inputs */
            if ((rc = kvs_pushpull(s, (size_t)m, ks, in, in, 0)) != 0 ||
                (rc = kvs_wait_all(s)) != 0)
                return fail("kvs_pushpull", rc);
            for (int o = 0; o < m && !bad; o++)
                bad |= check("pushpull", &keys[o / nsrc], &in[o], r, 0, 0);
        }
        for (int o = 0; o < m; o++)
            release(&in[o]);
    }
    if (async && !bad) {
        if ((rc = kvs_barrier(s)) != 0)
            return fail("kvs_barrier", rc);
        for (int o = 0; o < n; o++)
            ks[o] = keys[o / nout].key;
        if ((rc = kvs_pull(s, (size_t)n, ks, out, 0)) != 0 || (rc = kvs_wait_all(s)) != 0)
            return fail("kvs_pull", rc);
        for (int o = 0; o < n && !bad; o++)
            bad |= check("async total", &keys[o / nout], &out[o], rounds, 1, 0);
    }
    kvs_device_stats st;
    kvs_get_device_stats(s, &st);
    double sent = metric_sum(s, "kvs_sent_bytes_total{") - sent0;
    double recv = metric_sum(s, "kvs_received_bytes_total{") - recv0;
    if (!bad && (rc = kvs_barrier(s)) != 0)
        return fail("final kvs_barrier", rc);
    rc = kvs_close(s);
    if (rc)
        return fail("kvs_close", rc);
    printf("devworker %d: %s %d devices: %s (peer %llu, staged %llu, sums %llu, h2d %llu, "
           "d2h %llu, ipc %llu), sent %.0f bytes, received %.0f bytes\n", rank, type, N,
           bad ? "FAILED" : "ok", (unsigned long long)st.peer_copies,
           (unsigned long long)st.staged_copies, (unsigned long long)st.sums,
           (unsigned long long)st.h2d_copies, (unsigned long long)st.d2h_copies,
           (unsigned long long)st.ipc_copies, sent, recv);
    for (int o = 0; o < n; o++)
        release(&out[o]);
    free(ks);
    free(in);
    free(out);
    return bad;
}
