/* test_push.c - server/push.c: the write-backs of a round's last push, run
 * against this process's own memory (a proven srv_cma of ourselves).  A
 * round that one push made alone (a local group's sum standing for every
 * worker), answered where its data came from, is not written again; every
 * other output gets the round's value. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/push.h"

#define N 4096 /* floats */

/* A proven srv_cma of this process (the read-back nonce included). */
static uint8_t nonce[PROTO_NONCE_LEN] = "kvs-unit-nonce!";

static void self_cma(srv_cma *c)
{
    srv_cma_init(c);
    c->ok = true;
    c->pid = getpid();
    c->pidfd = -1; /* the nonce read-back is the check */
    c->nonce_addr = (uint64_t)(uintptr_t)nonce;
    memcpy(c->nonce, nonce, sizeof nonce);
}

static void req(srv_req *r, uint64_t seq, const float *src, float *dst)
{
    memset(r, 0, sizeof *r);
    r->h.type = PROTO_PUSHPULL;
    r->h.flags = PROTO_F_CMA;
    r->h.count = N;
    r->h.contrib = 2;
    r->h.cma_src = (uint64_t)(uintptr_t)src;
    r->h.cma_dst = (uint64_t)(uintptr_t)dst;
    r->wrank = 0;
    r->seq = seq;
}

/* Run r's push job (SUM_COPY when alone, else SUM_ADD onto acc) with its
 * write-backs, as store.c does for a round's last push: returns the job's
 * targets' `same` flags in same[] and how many targets it had. */
static int run_last(srv_cma *cma, srv_entry *e, srv_req *r, int mode, float *acc, bool *same)
{
    srv_push_job p = {.e = e, .r = r, .mode = mode, .dst = (uint8_t *)acc, .by_ref = true,
                      .cma = *cma};
    srv_push_write_backs(cma, 1, e, r, &p);
    int n = p.nwb;
    for (int i = 0; i < n; i++)
        same[i] = p.wb[i].same;
    srv_push_run(&p.j);
    ck_assert_int_eq(p.err, 0);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(atomic_load(&p.wb[i].err), 0);
    free(p.wb);
    return n;
}

/* One test's server side: ourselves proven, an entry of N floats whose
 * round needs 2 workers, its last push r. */
typedef struct fixture {
    srv_cma cma;
    srv_entry e;
    srv_req r;
    bool same[2];
} fixture;

static void setup(fixture *f)
{
    self_cma(&f->cma);
    memset(&f->e, 0, sizeof f->e);
    f->e.dtype = KVS_FLOAT32;
    f->e.count = N;
    f->e.bytes = N * sizeof(float);
    f->e.need = 2;
}

START_TEST(alone_in_place_not_written)
{
    fixture f;
    float *buf = malloc(N * sizeof *buf), *acc = malloc(N * sizeof *acc);
    setup(&f);
    for (int i = 0; i < N; i++)
        buf[i] = (float)(i % 97);
    req(&f.r, 1, buf, buf);
    ck_assert_int_eq(run_last(&f.cma, &f.e, &f.r, SUM_COPY, acc, f.same), 1);
    ck_assert(f.same[0]);
    for (int i = 0; i < N; i++) { /* the round's value is the push, and still in place */
        ck_assert_float_eq(acc[i], (float)(i % 97));
        ck_assert_float_eq(buf[i], (float)(i % 97));
    }
    free(buf);
    free(acc);
}
END_TEST

START_TEST(other_output_written)
{
    fixture f;
    float *src = malloc(N * sizeof *src), *dst = malloc(N * sizeof *dst);
    float *acc = malloc(N * sizeof *acc);
    setup(&f);
    for (int i = 0; i < N; i++) {
        src[i] = (float)(i % 89);
        dst[i] = -1;
    }
    req(&f.r, 1, src, dst); /* alone, but answered elsewhere */
    ck_assert_int_eq(run_last(&f.cma, &f.e, &f.r, SUM_COPY, acc, f.same), 1);
    ck_assert(!f.same[0]);
    for (int i = 0; i < N; i++)
        ck_assert_float_eq(dst[i], (float)(i % 89));
    free(src);
    free(dst);
    free(acc);
}
END_TEST

START_TEST(added_push_written_in_place)
{
    /* the round's second push, answered in place: its memory holds its own
     * part only, so the sum is written there */
    fixture f;
    float *buf = malloc(N * sizeof *buf), *acc = malloc(N * sizeof *acc);
    setup(&f);
    for (int i = 0; i < N; i++) {
        buf[i] = (float)(i % 13);
        acc[i] = 1000; /* the first push's part */
    }
    req(&f.r, 2, buf, buf);
    f.r.h.contrib = 1;
    ck_assert_int_eq(run_last(&f.cma, &f.e, &f.r, SUM_ADD, acc, f.same), 1);
    ck_assert(!f.same[0]);
    for (int i = 0; i < N; i++) {
        ck_assert_float_eq(acc[i], (float)(1000 + i % 13));
        ck_assert_float_eq(buf[i], (float)(1000 + i % 13));
    }
    free(buf);
    free(acc);
}
END_TEST

Suite *push_suite(void)
{
    Suite *s = suite_create("push");
    TCase *tc = tcase_create("write_backs");
    tcase_add_test(tc, alone_in_place_not_written);
    tcase_add_test(tc, other_output_written);
    tcase_add_test(tc, added_push_written_in_place);
    suite_add_tcase(s, tc);
    return s;
}
