/* tree_backend_cpu.c - a tree executor backend over host buffers, summed
 * with red_add() (tests of tree/'s executor; the product runs its trees on
 * device/). */
#include <string.h>

#include "reduce/reduce.h"
#include "tests/unit/tree_backend_cpu.h"

static int cpu_copy(void *ctx, int dst, void *dstp, int src, const void *srcp, uint64_t bytes)
{
    (void)ctx;
    (void)dst;
    (void)src;
    if (dstp != srcp && bytes > 0)
        memcpy(dstp, srcp, bytes);
    return 0;
}

static int cpu_reduce(void *ctx, int dst, void *dstp, int src, const void *srcp, kvs_dtype dtype,
                      uint64_t count)
{
    (void)dst;
    (void)src;
    if (count == 0)
        return 0;
    return red_add((red_pool *)ctx, dtype, dstp, srcp, count);
}

static int cpu_stage_end(void *ctx)
{
    (void)ctx;
    return 0;
}

void tree_backend_cpu(struct red_pool *pool, tree_backend *out)
{
    out->ctx = pool;
    out->copy = cpu_copy;
    out->reduce = cpu_reduce;
    out->stage_end = cpu_stage_end;
}
