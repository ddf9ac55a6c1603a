/*
 * test_memory.c - a worker's peak memory against the array it pushes:
 * every worker of a job pushes one 64 MiB float32 array 3 times, then pulls
 * it and pushpulls it in place 3 times (kvs-memworker, which checks every
 * element of every pulled sum).  Its peak resident memory (VmHWM) may grow
 * by at most half the array beyond what it was with the array touched (a
 * peak within 1.5x the array): through the pushes on the sockets
 * (KVS_CMA=0) and with same-host direct copies, and through the whole run
 * with direct copies.  1x1 and 2x2 (two workers of one host: a local group
 * that is the whole job, whose members read and sum each other's chunks,
 * DP_GROUP_INFLIGHT of sums in flight each).  On the sockets the
 * pulls' answers are received by ZeroMQ's thread into messages of its own
 * before the worker's loop copies them out, as many as the server sends
 * ahead; that part is reported, not bounded (docs/design/data-path.md).
 */
#include "tests.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MEM_MIB 64

static void use_memworker(it_ctx *t)
{
    char *p = strstr(t->worker_bin, "kvs-testworker");
    IT_ASSERT(t, p != NULL, "worker binary %s", t->worker_bin);
    snprintf(p, sizeof t->worker_bin - (size_t)(p - t->worker_bin), "kvs-memworker");
}

static void worker_peak(it_ctx *t, int W, int S, const char *cma)
{
    static const char *const argv[] = {"64", "3", NULL};
    use_memworker(t);
    it_setenv(t, "KVS_START_TIMEOUT", "60");
    it_setenv(t, "KVS_CMA", "%s", cma);
    it_start_job(t, S, W, argv);
    it_expect_job_ok(t, 240);
    for (int i = 0; i < W; i++) {
        char *log = it_read_log(t, t->worker[i]);
        IT_ASSERT(t, log != NULL, "no log from worker %d", i);
        const char *line = strstr(log, "memworker: array ");
        unsigned long long arr = 0, base = 0, ppeak = 0, peak = 0, pgrow = 0, grow = 0;
        IT_ASSERT(t, line && sscanf(line, "memworker: array %llu KiB, VmHWM baseline %llu KiB, "
                                    "push peak %llu KiB, peak %llu KiB, push growth %llu KiB, "
                                    "growth %llu KiB", &arr, &base, &ppeak, &peak, &pgrow,
                                    &grow) == 6,
                  "worker %d printed no memory line", i);
        it_info(t, "worker %d (KVS_CMA=%s, %dx%d): array %llu KiB, VmHWM %llu -> %llu after the "
                "pushes (%.2fx the array), %llu after the pulls (%.2fx)", i, cma, W, S, arr, base,
                ppeak, (double)(arr + pgrow) / (double)arr, peak,
                (double)(arr + grow) / (double)arr);
        IT_ASSERT(t, arr == MEM_MIB * 1024ull && base > arr && ppeak >= base && peak >= ppeak &&
                     pgrow == ppeak - base && grow == peak - base,
                  "worker %d: array %llu KiB, baseline %llu, push peak %llu, peak %llu", i, arr,
                  base, ppeak, peak);
        IT_ASSERT(t, pgrow * 2 <= arr,
                  "worker %d (KVS_CMA=%s, %dx%d): peak memory grew by %llu KiB through the pushes "
                  "of its %llu KiB array: %.2fx the array (allowed: 1.5x)", i, cma, W, S, pgrow,
                  arr, (double)(arr + pgrow) / (double)arr);
        if (strcmp(cma, "1") == 0)
            IT_ASSERT(t, grow * 2 <= arr,
                      "worker %d (direct copies, %dx%d): peak memory grew by %llu KiB through "
                      "pushes, pulls and pushpulls of its %llu KiB array: %.2fx the array "
                      "(allowed: 1.5x)", i, W, S, grow, arr, (double)(arr + grow) / (double)arr);
        free(log);
    }
}

IT_TEST(worker_memory_socket_1x1)
{
    worker_peak(t, 1, 1, "0");
}

IT_TEST(worker_memory_direct_1x1)
{
    worker_peak(t, 1, 1, "1");
}

IT_TEST(worker_memory_direct_2x2)
{
    worker_peak(t, 2, 2, "1");
}

IT_TEST(worker_memory_socket_2x2)
{
    worker_peak(t, 2, 2, "0");
}
