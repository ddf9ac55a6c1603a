/* reduce.c - red_sum / red_add: argument checks, the cache-blocked driver
 * that strings kernels together for any number of inputs, and the split of
 * big arrays over the pool.
 *
 * Order of additions: always s0 + s1 + ... + s(k-1), left to right, per
 * element, so a result does not depend on the ISA, the thread count or the
 * chunking.  Half types accumulate in float32 and round once.
 */
#include <stdlib.h>
#include <string.h>

#include "reduce/reduce.h"
#include "reduce/reduce_int.h"

/* Elements per pool chunk: 32 blocks (256 KiB of float32 output). */
#define RED_CHUNK_BLOCKS 32

struct red_op {
    const struct red_kern *kern;
    kvs_dtype dtype;
    size_t es;
    char *dst;
    const void *const *srcs;
    int k;
    int alias;      /* dst == srcs[0] */
    int misaligned; /* some pointer is not a multiple of es */
    int stream;     /* write dst with streaming stores (RED_STREAM_MIN, run_range) */
};

static int plain_index(kvs_dtype t)
{
    switch (t) {
    case KVS_FLOAT32:
        return 0;
    case KVS_FLOAT64:
        return 1;
    case KVS_INT32:
        return 2;
    case KVS_INT64:
        return 3;
    default:
        return -1;
    }
}

static inline const void *at(const void *base, uint64_t i, size_t es)
{
    return (const char *)base + i * es;
}

/* Plain type, one block of n elements at offset o, written to d (dst + o,
 * or a buffer when streaming; d is dst + o whenever op->alias). */
static void block_plain(const struct red_op *op, const struct red_kplain *kp, void *d,
                        uint64_t o, size_t n)
{
    const void *g[4];
    int j = 0, m;
    if (!op->alias) {
        m = op->k < 4 ? op->k : 4;
        for (int i = 0; i < m; i++)
            g[i] = at(op->srcs[i], o, op->es);
        kp->sum[m](d, g, n);
        j = m;
    } else {
        j = 1;
    }
    while (j < op->k) {
        m = op->k - j < 3 ? op->k - j : 3;
        for (int i = 0; i < m; i++)
            g[i] = at(op->srcs[j + i], o, op->es);
        kp->add[m](d, g, n);
        j += m;
    }
}

/* Half type, one block of n <= RED_BLOCK elements at offset o, written to d
 * (as for block_plain); k >= 2. */
static void block_half(const struct red_op *op, const struct red_khalf *kh, void *d,
                       uint64_t o, size_t n)
{
    float acc[RED_BLOCK];
    const void *g[4];
    int k = op->k;
    if (k == 2 && op->alias) {
        g[0] = at(op->srcs[1], o, 2);
        kh->add1(d, g, n);
        return;
    }
    if (k <= 4 && !op->alias) { /* one pass, the sum in registers */
        for (int j = 0; j < k; j++)
            g[j] = at(op->srcs[j], o, 2);
        kh->sum[k](d, g, n);
        return;
    }
    g[0] = at(op->srcs[0], o, 2);
    g[1] = at(op->srcs[1], o, 2);
    kh->acc2(acc, g, n);
    for (int j = 2; j < k - 1; j++) {
        g[0] = at(op->srcs[j], o, 2);
        kh->accadd(acc, g, n);
    }
    g[0] = acc;
    g[1] = at(op->srcs[k - 1], o, 2);
    kh->out(d, g, n);
}

/* A pointer not aligned to its element size: C does not allow typed access
 * through it, so such ops copy each block through aligned buffers (same
 * kernels, same order of additions; slower, and rare). k >= 2. */
static void block_staged(const struct red_op *op, uint64_t o, size_t n)
{
    _Alignas(64) unsigned char t0[RED_BLOCK * 8], t1[RED_BLOCK * 8];
    _Alignas(64) float acc[RED_BLOCK];
    size_t nb = n * op->es;
    const void *g[2];
    int k = op->k;
    memcpy(t0, at(op->srcs[0], o, op->es), nb);
    if (op->dtype == KVS_FLOAT16 || op->dtype == KVS_BFLOAT16) {
        const struct red_khalf *kh = &op->kern->half[op->dtype == KVS_BFLOAT16];
        memcpy(t1, at(op->srcs[1], o, 2), nb);
        g[0] = t0;
        g[1] = t1;
        kh->acc2(acc, g, n);
        for (int j = 2; j < k; j++) {
            memcpy(t1, at(op->srcs[j], o, 2), nb);
            g[0] = t1;
            kh->accadd(acc, g, n);
        }
        /* acc + (-0.0) == acc for every acc, so this is the single rounding */
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)(void *)t1)[i] = 0x8000u;
        g[0] = acc;
        g[1] = t1;
        kh->out(t0, g, n);
    } else {
        const struct red_kplain *kp = &op->kern->plain[plain_index(op->dtype)];
        for (int j = 1; j < k; j++) {
            memcpy(t1, at(op->srcs[j], o, op->es), nb);
            g[0] = t1;
            kp->add[1](t0, g, n);
        }
    }
    memcpy(op->dst + o * op->es, t0, nb);
}

/* The range [lo, hi) of the op, block by block.  Streaming (op->stream):
 * up to 4 inputs go through one sumnt[k] kernel that writes dst with
 * non-temporal stores itself; otherwise (more inputs, or no such kernel for
 * the ISA/dtype) each block is summed into buf (in L1) by the usual kernels
 * and then streamed to dst by ntcpy.  Either way an sfence ends the range,
 * before the pool reports the job done. */
static void run_range(const void *arg, uint64_t lo, uint64_t hi)
{
    const struct red_op *op = arg;
    _Alignas(64) unsigned char buf[RED_BLOCK * 8];
    if (op->k == 1) {
        if (!op->alias)
            memcpy(op->dst + lo * op->es, at(op->srcs[0], lo, op->es), (hi - lo) * op->es);
        return;
    }
    if (op->misaligned) {
        for (uint64_t o = lo; o < hi; o += RED_BLOCK)
            block_staged(op, o, hi - o < RED_BLOCK ? hi - o : RED_BLOCK);
        return;
    }
    if (op->stream && op->k <= 4) { /* one streaming kernel over the range */
        red_fn *f = op->dtype == KVS_FLOAT16 || op->dtype == KVS_BFLOAT16
                        ? op->kern->half[op->dtype == KVS_BFLOAT16].sumnt[op->k]
                        : op->kern->plain[plain_index(op->dtype)].sumnt[op->k];
        if (f != NULL) {
            const void *g[4];
            for (int j = 0; j < op->k; j++)
                g[j] = at(op->srcs[j], lo, op->es);
            f(op->dst + lo * op->es, g, hi - lo);
            op->kern->ntfence();
            return;
        }
    }
    for (uint64_t o = lo; o < hi; o += RED_BLOCK) {
        size_t n = hi - o < RED_BLOCK ? hi - o : RED_BLOCK;
        void *d = op->stream ? (void *)buf : op->dst + o * op->es;
        if (op->dtype == KVS_FLOAT16 || op->dtype == KVS_BFLOAT16)
            block_half(op, &op->kern->half[op->dtype == KVS_BFLOAT16], d, o, n);
        else
            block_plain(op, &op->kern->plain[plain_index(op->dtype)], d, o, n);
        if (op->stream)
            op->kern->ntcpy(op->dst + o * op->es, buf, n * op->es);
    }
    if (op->stream)
        op->kern->ntfence();
}

int red_sum(red_pool *p, kvs_dtype dtype, void *dst, const void *const *srcs, int k,
            uint64_t count)
{
    struct red_op op;
    uint64_t bytes;
    if ((unsigned)dtype >= KVS_NUM_DTYPES || k < 1 || srcs == NULL)
        return KVS_EINVAL;
    for (int j = 0; j < k && count > 0; j++)
        if (srcs[j] == NULL)
            return KVS_EINVAL;
    if (dst == NULL && count > 0)
        return KVS_EINVAL;
    op.es = kvs_dtype_size(dtype);
    if (__builtin_mul_overflow(count, (uint64_t)op.es, &bytes) || bytes > SIZE_MAX)
        return KVS_EINVAL;
    if (count == 0)
        return 0;
    op.kern = p ? p->kern : red_kern_get(red_isa_best());
    op.dtype = dtype;
    op.dst = dst;
    op.srcs = srcs;
    op.k = k;
    op.alias = dst == srcs[0];
    op.misaligned = (uintptr_t)dst % op.es != 0;
    for (int j = 0; j < k; j++)
        op.misaligned |= (uintptr_t)srcs[j] % op.es != 0;
    op.stream = op.kern->ntcpy != NULL && bytes >= (p ? p->stream_min : RED_STREAM_MIN) &&
                k >= 2 && !op.alias && !op.misaligned;
    if (op.stream && p)
        atomic_fetch_add_explicit(&p->streamed, 1, memory_order_relaxed);
    if (p == NULL || p->nthreads < 2 || count < p->big_bound) {
        run_range(&op, 0, count);
    } else {
        /* Chunk borders on 64-byte borders of dst, so that two threads
         * never write one cache line. */
        uint64_t chunk = (uint64_t)RED_BLOCK * RED_CHUNK_BLOCKS;
        uintptr_t mis = (uintptr_t)dst % 64;
        uint64_t first = chunk;
        if (mis % op.es == 0)
            first = chunk - mis / op.es;
        struct red_job job = {run_range, &op, count, chunk, first};
        red_pool_run(p, &job);
    }
    return 0;
}

int red_add(red_pool *p, kvs_dtype dtype, void *dst, const void *src, uint64_t count)
{
    const void *s[2] = {dst, src};
    if (src == NULL)
        return KVS_EINVAL;
    return red_sum(p, dtype, dst, s, 2, count);
}

void red_to_f32(kvs_dtype dtype, float *dst, const void *src, uint64_t n)
{
    const uint8_t *s = src; /* (a message body: any alignment) */
    uint16_t h;
    if (dtype == KVS_FLOAT16)
        for (uint64_t i = 0; i < n; i++) {
            memcpy(&h, s + 2 * i, 2);
            dst[i] = red_h2f(h);
        }
    else if (dtype == KVS_BFLOAT16)
        for (uint64_t i = 0; i < n; i++) {
            memcpy(&h, s + 2 * i, 2);
            dst[i] = red_bf2f(h);
        }
}

void red_from_f32(kvs_dtype dtype, void *dst, const float *src, uint64_t n)
{
    uint8_t *d = dst;
    uint16_t h;
    if (dtype == KVS_FLOAT16)
        for (uint64_t i = 0; i < n; i++) {
            h = red_f2h(src[i]);
            memcpy(d + 2 * i, &h, 2);
        }
    else if (dtype == KVS_BFLOAT16)
        for (uint64_t i = 0; i < n; i++) {
            h = red_f2bf(src[i]);
            memcpy(d + 2 * i, &h, 2);
        }
}
