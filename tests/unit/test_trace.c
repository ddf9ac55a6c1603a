/* test_trace.c - worker/trace.c: the ring is bounded, nothing is lost
 * silently (written + dropped = added), the file is one JSON array. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/proto.h"
#include "worker/trace.h"

#define PER_THREAD 50000

static void *adder(void *arg)
{
    wrk_trace *t = arg;
    for (int i = 0; i < PER_THREAD; i++) {
        wrk_tev e = {.ts_ns = (uint64_t)i * 1000, .kind = TEV_SENT, .op = (uint64_t)i,
                     .key = 7, .optype = PROTO_PUSH, .a = 4096};
        wrk_trace_add(t, &e);
    }
    return NULL;
}

START_TEST(ring_bounded_and_counted)
{
    char path[] = "/tmp/kvs-trace-unit.XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    wrk_trace *t;
    char err[256];
    ck_assert_int_eq(wrk_trace_open(path, 3, 64, &t, err, sizeof err), 0);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, adder, t);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    uint64_t dropped = wrk_trace_dropped(t);
    wrk_trace_close(t);
    FILE *f = fopen(path, "r");
    char line[1024];
    long events = 0, meta_dropped = -1, meta_written = -1;
    int first = fgetc(f);
    ck_assert_int_eq(first, '[');
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, "\"event\":\"sent\""))
            events++;
        char *p = strstr(line, "\"dropped\":");
        if (p) {
            meta_dropped = atol(p + 10);
            meta_written = atol(strstr(line, "\"written\":") + 10);
        }
        if (line[0] == ']')
            ck_assert_str_eq(line, "]\n");
    }
    fclose(f);
    unlink(path);
    ck_assert_int_eq(meta_dropped, (long)dropped);
    ck_assert_int_eq(events, meta_written);
    ck_assert_int_eq(events + meta_dropped, 2 * PER_THREAD);
    ck_assert_int_gt(events, 0);
}
END_TEST

START_TEST(open_errors)
{
    wrk_trace *t = (wrk_trace *)1;
    char err[256];
    ck_assert_int_eq(wrk_trace_open("/nonexistent-dir/x.json", 0, 64, &t, err, sizeof err),
                     KVS_EINVAL);
    ck_assert_ptr_null(t);
    ck_assert_ptr_nonnull(strstr(err, "KVS_TRACE='/nonexistent-dir/x.json': cannot create"));
    wrk_trace_close(NULL);
    wrk_trace_add(NULL, NULL);
}
END_TEST

Suite *trace_suite(void)
{
    Suite *s = suite_create("trace");
    TCase *tc = tcase_create("trace");
    tcase_add_test(tc, ring_bounded_and_counted);
    tcase_add_test(tc, open_errors);
    suite_add_tcase(s, tc);
    return s;
}
