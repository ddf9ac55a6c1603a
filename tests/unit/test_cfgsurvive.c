/* test_cfgsurvive.c - common/cfgsurvive.c: KVS_REPLICAS, KVS_ELASTIC,
 * KVS_MIN_WORKERS, KVS_MAX_WORKERS and KVS_SCHEDULER_GRACE through cfg_load, alone and against
 * the job's sizes.  Fork mode isolates each test's environment.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cfgsurvive.h"
#include "common/config.h"
#include "kvs.h"

static char err[512];

static void clear_env(void)
{
    for (size_t i = 0; i < cfg_nvars; i++)
        unsetenv(cfg_vars[i].name);
}

/* 3 workers, 2 servers. */
static void set_job(void)
{
    setenv("DMLC_PS_ROOT_URI", "10.1.2.3", 1);
    setenv("DMLC_PS_ROOT_PORT", "9091", 1);
    setenv("DMLC_NUM_SERVER", "2", 1);
    setenv("DMLC_NUM_WORKER", "3", 1);
}

static int load(cfg *c, bool needs_job)
{
    err[0] = '\0';
    return cfg_load(c, needs_job, err, sizeof err);
}

/* cfg_load must fail with KVS_ECONFIG and a message holding every needle. */
static void load_bad(bool needs_job, const char *n1, const char *n2, const char *n3)
{
    cfg c;
    ck_assert_int_eq(load(&c, needs_job), KVS_ECONFIG);
    const char *needles[] = {n1, n2, n3};
    for (int i = 0; i < 3; i++)
        ck_assert_msg(needles[i] == NULL || strstr(err, needles[i]) != NULL,
                      "'%s' not in message '%s'", needles[i], err);
}

START_TEST(test_defaults)
{
    cfg c;
    clear_env();
    set_job();
    ck_assert_int_eq(load(&c, true), 0);
    ck_assert_int_eq(c.replicas, 0);
    ck_assert(!c.elastic);
    ck_assert_int_eq(c.min_workers, 0);
    ck_assert_int_eq(c.max_workers, 0);
    setenv("KVS_REPLICAS", "0", 1);
    setenv("KVS_ELASTIC", "no", 1);
    setenv("KVS_MIN_WORKERS", "0", 1);
    setenv("KVS_MAX_WORKERS", "0", 1);
    ck_assert_msg(load(&c, true) == 0, "%s", err);
    ck_assert_int_eq(c.replicas, 0);
    ck_assert(!c.elastic);
}
END_TEST

/* Each variable's own range, from the table. */
START_TEST(test_ranges)
{
    static const char *const cases[][2] = {
        {"KVS_REPLICAS", "2"},     {"KVS_REPLICAS", "-1"},     {"KVS_REPLICAS", "one"},
        {"KVS_ELASTIC", "2"},      {"KVS_ELASTIC", "maybe"},   {"KVS_MIN_WORKERS", "-1"},
        {"KVS_MIN_WORKERS", "65537"}, {"KVS_MAX_WORKERS", "x"}, {"KVS_MAX_WORKERS", "1e3"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char quoted[64];
        clear_env();
        setenv(cases[i][0], cases[i][1], 1);
        snprintf(quoted, sizeof quoted, "'%s'", cases[i][1]);
        load_bad(false, cases[i][0], quoted, NULL);
    }
}
END_TEST

/* A bound without KVS_ELASTIC would do nothing: refused. */
START_TEST(test_bound_without_elastic)
{
    clear_env();
    setenv("KVS_MIN_WORKERS", "2", 1);
    load_bad(false, "KVS_MIN_WORKERS='2'", "needs KVS_ELASTIC=1", NULL);
    clear_env();
    setenv("KVS_MAX_WORKERS", "8", 1);
    load_bad(false, "KVS_MAX_WORKERS='8'", "needs KVS_ELASTIC=1", NULL);
    clear_env();
    setenv("KVS_ELASTIC", "0", 1);
    setenv("KVS_MAX_WORKERS", "8", 1);
    load_bad(false, "KVS_MAX_WORKERS='8'", "needs KVS_ELASTIC=1", NULL);
}
END_TEST

START_TEST(test_min_above_max)
{
    clear_env();
    setenv("KVS_ELASTIC", "1", 1);
    setenv("KVS_MIN_WORKERS", "5", 1);
    setenv("KVS_MAX_WORKERS", "3", 1);
    load_bad(false, "KVS_MIN_WORKERS='5'", "KVS_MAX_WORKERS='3'", "MIN <= MAX");
    set_job();
    load_bad(true, "KVS_MIN_WORKERS='5'", "KVS_MAX_WORKERS='3'", "MIN <= MAX");
}
END_TEST

/* A backup lives on another server: KVS_REPLICAS=1 needs two. */
START_TEST(test_replicas_vs_servers)
{
    clear_env();
    set_job();
    setenv("DMLC_NUM_SERVER", "1", 1);
    setenv("KVS_REPLICAS", "1", 1);
    load_bad(true, "KVS_REPLICAS='1'", "DMLC_NUM_SERVER=1", "[0, 0]");
}
END_TEST

/* The job starts with DMLC_NUM_WORKER workers: inside its own bounds. */
START_TEST(test_bounds_vs_workers)
{
    clear_env();
    set_job(); /* 3 workers */
    setenv("KVS_ELASTIC", "1", 1);
    setenv("KVS_MIN_WORKERS", "4", 1);
    load_bad(true, "KVS_MIN_WORKERS='4'", "DMLC_NUM_WORKER=3", "[1, 3]");
    setenv("KVS_MIN_WORKERS", "2", 1);
    setenv("KVS_MAX_WORKERS", "2", 1);
    load_bad(true, "KVS_MAX_WORKERS='2'", "DMLC_NUM_WORKER=3", "[3, 65536]");
    /* MIN alone above the start, MAX unset (= 3) */
    unsetenv("KVS_MAX_WORKERS");
    setenv("KVS_MIN_WORKERS", "7", 1);
    load_bad(true, "KVS_MIN_WORKERS='7'", "DMLC_NUM_WORKER=3", NULL);
}
END_TEST

/* Possible settings this build does not honour are refused, never ignored,
 * and only after the impossible ones are ruled out. */
START_TEST(test_not_built)
{
    cfg c;
    clear_env();
    set_job();
    setenv("KVS_REPLICAS", "1", 1);
    ck_assert_int_eq(load(&c, true), 0); /* built: 2 servers, the zmq van */
    ck_assert_int_eq(c.replicas, 1);
    setenv("DMLC_PS_VAN_TYPE", "p3", 1);
    load_bad(true, "KVS_REPLICAS='1' with DMLC_PS_VAN_TYPE=p3", "not built", "zmq");
    load_bad(false, "KVS_REPLICAS='1' with DMLC_PS_VAN_TYPE=p3", "not built", NULL);
    unsetenv("DMLC_PS_VAN_TYPE");
    clear_env();
    set_job();
    setenv("KVS_ELASTIC", "yes", 1);
    setenv("KVS_MIN_WORKERS", "2", 1);
    setenv("KVS_MAX_WORKERS", "8", 1);
    /* elastic membership is built: the settings load as given */
    ck_assert_int_eq(cfg_load(&c, true, err, sizeof err), 0);
    ck_assert(c.elastic);
    ck_assert_int_eq(c.min_workers, 2);
    ck_assert_int_eq(c.max_workers, 8);
    cfg_survive sv = {c.replicas, c.elastic, c.min_workers, c.max_workers, c.num_server,
                      c.num_worker, false, 0};
    ck_assert_int_eq(cfg_check_survive(&sv, true, err, sizeof err), 0);
    sv.elastic = false;
    sv.min_workers = sv.max_workers = 0;
    ck_assert_int_eq(cfg_check_survive(&sv, true, err, sizeof err), 0);
    /* the same with needs_job false: the job's sizes are not looked at */
    sv.num_server = sv.num_worker = 0;
    ck_assert_int_eq(cfg_check_survive(&sv, false, err, sizeof err), 0);
    sv.replicas = 1;
    ck_assert_int_eq(cfg_check_survive(&sv, false, err, sizeof err), 0);
    sv.p3 = true;
    ck_assert_int_eq(cfg_check_survive(&sv, false, err, sizeof err), KVS_ECONFIG);
    ck_assert_msg(strstr(err, "not built") != NULL, "%s", err);
}
END_TEST

/* KVS_SCHEDULER_GRACE: its range, and refused with replicas or elastic
 * workers (a restarted scheduler cannot learn those back). */
START_TEST(test_scheduler_grace)
{
    cfg c;
    clear_env();
    set_job();
    ck_assert_int_eq(load(&c, true), 0);
    ck_assert(c.sched_grace_s == 0);
    setenv("KVS_SCHEDULER_GRACE", "42.5", 1);
    ck_assert_msg(load(&c, true) == 0, "%s", err);
    ck_assert(c.sched_grace_s == 42.5);
    const char *bad[] = {"-1", "86401", "soon", "nan", "1e9"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("KVS_SCHEDULER_GRACE", bad[i], 1);
        load_bad(true, "KVS_SCHEDULER_GRACE", NULL, NULL);
    }
    setenv("KVS_SCHEDULER_GRACE", "30", 1);
    setenv("KVS_REPLICAS", "1", 1);
    load_bad(true, "KVS_SCHEDULER_GRACE='30' with KVS_REPLICAS=1", "KVS_REPLICAS=0", NULL);
    load_bad(false, "KVS_SCHEDULER_GRACE='30' with KVS_REPLICAS=1", NULL, NULL);
    unsetenv("KVS_REPLICAS");
    setenv("KVS_ELASTIC", "1", 1);
    load_bad(true, "KVS_SCHEDULER_GRACE='30' with KVS_ELASTIC=1", "KVS_ELASTIC=0", NULL);
    setenv("KVS_SCHEDULER_GRACE", "0", 1);
    ck_assert_msg(load(&c, true) == 0, "%s", err);
}
END_TEST

Suite *cfgsurvive_suite(void)
{
    Suite *s = suite_create("cfgsurvive");
    TCase *t = tcase_create("cfgsurvive");
    tcase_add_test(t, test_defaults);
    tcase_add_test(t, test_ranges);
    tcase_add_test(t, test_bound_without_elastic);
    tcase_add_test(t, test_min_above_max);
    tcase_add_test(t, test_replicas_vs_servers);
    tcase_add_test(t, test_bounds_vs_workers);
    tcase_add_test(t, test_not_built);
    tcase_add_test(t, test_scheduler_grace);
    suite_add_tcase(s, t);
    return s;
}
