/* test_metrics.c - common/metrics.c: the Prometheus text, exactly. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/metrics.h"
#include "kvs.h"

START_TEST(counters_gauges_text)
{
    met_reg *r = met_reg_new();
    met_fam *f = met_family(r, MET_COUNTER, "kvs_x_total", "Things\nand \\ more", "peer", "path");
    met_add(met_get(f, "worker 0", "socket"), 5);
    met_add(met_get(f, "worker 0", "socket"), 2); /* same series */
    met_add(met_get(f, "we\"ird\\\n", "cma"), 1);
    ck_assert_ptr_eq(met_family(r, MET_COUNTER, "kvs_x_total", NULL, NULL, NULL), f);
    met_set(met_one(r, MET_GAUGE, "kvs_g", "A gauge"), 2.5);
    met_gauge_add(met_one(r, MET_GAUGE, "kvs_g", NULL), -1);
    met_family(r, MET_GAUGE, "kvs_empty", "no series: not rendered", NULL, NULL);
    char buf[1024];
    size_t n = met_render(r, buf, sizeof buf);
    const char *want =
        "# HELP kvs_x_total Things\\nand \\\\ more\n"
        "# TYPE kvs_x_total counter\n"
        "kvs_x_total{peer=\"worker 0\",path=\"socket\"} 7\n"
        "kvs_x_total{peer=\"we\\\"ird\\\\\\n\",path=\"cma\"} 1\n"
        "# HELP kvs_g A gauge\n"
        "# TYPE kvs_g gauge\n"
        "kvs_g 1.5\n";
    ck_assert_str_eq(buf, want);
    ck_assert_uint_eq(n, strlen(want));
    /* a small buffer: cut and NUL-terminated, the length still the whole */
    char small[16];
    ck_assert_uint_eq(met_render(r, small, sizeof small), strlen(want));
    ck_assert_uint_eq(strlen(small), 15);
    ck_assert(strncmp(small, want, 15) == 0);
    ck_assert_uint_eq(met_render(r, NULL, 0), strlen(want));
    size_t len;
    char *all = met_render_alloc(r, &len);
    ck_assert_str_eq(all, want);
    ck_assert_uint_eq(len, strlen(want));
    free(all);
    met_reg_free(r);
    /* NULL-safe updates */
    met_add(NULL, 1);
    met_set(NULL, 1);
    met_observe(NULL, 1);
    met_reg_free(NULL);
}
END_TEST

START_TEST(histogram_text)
{
    met_reg *r = met_reg_new();
    met_series *h = met_get(met_family(r, MET_HISTOGRAM, "kvs_h_seconds", "H", "type", NULL),
                            "push", NULL);
    met_observe(h, 0.00001);  /* == the first bound: counted there */
    met_observe(h, 0.003);    /* in le=0.005 */
    met_observe(h, 100);      /* past every bound: +Inf only */
    met_observe(h, -1);       /* ignored */
    char buf[4096];
    met_render(r, buf, sizeof buf);
    ck_assert_ptr_nonnull(strstr(buf, "# TYPE kvs_h_seconds histogram\n"));
    ck_assert_ptr_nonnull(strstr(buf, "kvs_h_seconds_bucket{type=\"push\",le=\"1e-05\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(buf, "kvs_h_seconds_bucket{type=\"push\",le=\"0.0025\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(buf, "kvs_h_seconds_bucket{type=\"push\",le=\"0.005\"} 2\n"));
    ck_assert_ptr_nonnull(strstr(buf, "kvs_h_seconds_bucket{type=\"push\",le=\"10\"} 2\n"));
    ck_assert_ptr_nonnull(strstr(buf, "kvs_h_seconds_bucket{type=\"push\",le=\"+Inf\"} 3\n"));
    ck_assert_ptr_nonnull(strstr(buf, "kvs_h_seconds_sum{type=\"push\"} 100.00301\n"));
    ck_assert_ptr_nonnull(strstr(buf, "kvs_h_seconds_count{type=\"push\"} 3\n"));
    met_reg_free(r);
}
END_TEST

static int collected;
static void collect(void *arg)
{
    collected++;
    met_set(arg, 42);
}

START_TEST(collect_runs_before_render)
{
    met_reg *r = met_reg_new();
    met_series *g = met_one(r, MET_GAUGE, "kvs_depth", "D");
    met_reg_on_collect(r, collect, g);
    char buf[256];
    met_render(r, buf, sizeof buf);
    ck_assert_int_eq(collected, 1);
    ck_assert_ptr_nonnull(strstr(buf, "kvs_depth 42\n"));
    met_error(r, KVS_EPROTO);
    met_error(r, KVS_EPROTO);
    met_render(r, buf, sizeof buf);
    ck_assert_ptr_nonnull(strstr(buf, "kvs_errors_total{code=\"KVS_EPROTO\"} 2\n"));
    met_reg_free(r);
}
END_TEST

/* kvs_metrics on a local store: the same format, argument errors. */
START_TEST(kvs_metrics_local)
{
    kvs_store *kv;
    ck_assert_int_eq(kvs_create("local", &kv), 0);
    int need = kvs_metrics(kv, NULL, 0);
    ck_assert_int_gt(need, 0);
    char *buf = malloc((size_t)need + 1);
    ck_assert_int_eq(kvs_metrics(kv, buf, (size_t)need + 1), need);
    ck_assert_uint_eq(strlen(buf), (size_t)need);
    ck_assert_ptr_nonnull(strstr(buf, "kvs_build_info{version=\"" KVS_VERSION_STRING
                                      "\",role=\"worker\"} 1\n"));
    free(buf);
    char tiny[4];
    ck_assert_int_eq(kvs_metrics(kv, tiny, sizeof tiny), need);
    ck_assert_uint_eq(strlen(tiny), 3);
    ck_assert_int_eq(kvs_metrics(kv, NULL, 5), KVS_EINVAL);
    ck_assert_int_eq(kvs_metrics(NULL, tiny, sizeof tiny), KVS_EINVAL);
    kvs_close(kv);
}
END_TEST

Suite *metrics_suite(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("metrics");
    tcase_add_test(tc, counters_gauges_text);
    tcase_add_test(tc, histogram_text);
    tcase_add_test(tc, collect_runs_before_render);
    tcase_add_test(tc, kvs_metrics_local);
    suite_add_tcase(s, tc);
    return s;
}
