/* test_config.c - common/config.c: cfg_load and the typed readers.
 *
 * Each test runs in its own child (fork mode), so setenv() is isolated; every
 * test starts from an environment without any variable cfg_load reads.
 */
#include <arpa/inet.h>
#include <check.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/log.h"
#include "common/prio.h"
#include "tree/tree.h"
#include "kvs.h"

/* Every variable of the table (common/cfgvars.h). */
static void clear_env(void)
{
    for (size_t i = 0; i < cfg_nvars; i++)
        unsetenv(cfg_vars[i].name);
}

static void set_job(void)
{
    setenv("DMLC_PS_ROOT_URI", "10.1.2.3", 1);
    setenv("DMLC_PS_ROOT_PORT", "9091", 1);
    setenv("DMLC_NUM_SERVER", "2", 1);
    setenv("DMLC_NUM_WORKER", "3", 1);
}

static char err[512];

/* cfg_load must succeed. */
static void load_ok(cfg *c, bool needs_job)
{
    err[0] = 'X';
    err[1] = '\0';
    int rc = cfg_load(c, needs_job, err, sizeof err);
    ck_assert_msg(rc == 0, "cfg_load failed: %d %s", rc, err);
}

/* cfg_load must fail with KVS_ECONFIG and a message holding every needle. */
static void load_bad(bool needs_job, const char *n1, const char *n2)
{
    cfg c;
    err[0] = '\0';
    int rc = cfg_load(&c, needs_job, err, sizeof err);
    ck_assert_int_eq(rc, KVS_ECONFIG);
    ck_assert_msg(n1 == NULL || strstr(err, n1) != NULL, "'%s' not in message '%s'", n1, err);
    ck_assert_msg(n2 == NULL || strstr(err, n2) != NULL, "'%s' not in message '%s'", n2, err);
}

/* Setting name=val alone (plus the job when needs_job) must fail, and the
 * message must name the variable and quote the value. */
static void expect_bad(const char *name, const char *val)
{
    char quoted[300];
    clear_env();
    setenv(name, val, 1);
    snprintf(quoted, sizeof quoted, "'%s'", val);
    load_bad(false, name, quoted);
}

START_TEST(test_defaults)
{
    cfg c;
    clear_env();
    load_ok(&c, false);
    ck_assert_str_eq(err, "");
    ck_assert_int_eq(c.role, CFG_ROLE_NONE);
    ck_assert_str_eq(c.root_uri, "");
    ck_assert_int_eq(c.root_port, -1);
    ck_assert_int_eq(c.num_server, 0);
    ck_assert_int_eq(c.num_worker, 0);
    ck_assert_str_eq(c.node_host, "");
    ck_assert_str_eq(c.interface, "");
    ck_assert_int_eq(c.worker_id, -1);
    ck_assert_int_eq(c.server_id, -1);
    ck_assert(!c.local);
    ck_assert_int_eq(c.van, CFG_VAN_ZMQ);
    ck_assert_int_eq(c.water_mark, 1000);
    /* the metrics endpoint serves this host only unless asked */
    ck_assert_str_eq(c.metrics_addr, "127.0.0.1");
    ck_assert_int_eq(c.verbose, 0);
    ck_assert(c.hb_interval_s == 5.0);
    ck_assert(c.hb_timeout_s == 60.0);
    ck_assert(!c.resend);
    ck_assert_int_eq(c.resend_timeout_ms, 1000);
    ck_assert_uint_eq(c.bigarray_bound, 1000000);
    ck_assert_int_eq(c.reduction_nthreads, 4);
    ck_assert_uint_eq(c.slice_threshold, 40000);
    ck_assert(!c.use_tree);
    ck_assert(c.update_on_kvstore);
    ck_assert(c.start_timeout_s == 120.0);
    ck_assert_uint_eq(c.max_message, 4ull << 30);
    ck_assert_uint_eq(c.chunk_bytes, 4u << 20);
    ck_assert_int_eq(c.port, 0);
    ck_assert_str_eq(c.port_file, "");
}
END_TEST

/* An empty value counts as unset: the default. */
START_TEST(test_empty_is_default)
{
    cfg c;
    clear_env();
    setenv("PS_VERBOSE", "", 1);
    setenv("MXNET_KVSTORE_BIGARRAY_BOUND", "", 1);
    setenv("DMLC_ROLE", "", 1);
    setenv("DMLC_LOCAL", "", 1);
    load_ok(&c, false);
    ck_assert_int_eq(c.verbose, 0);
    ck_assert_uint_eq(c.bigarray_bound, 1000000);
    ck_assert_int_eq(c.role, CFG_ROLE_NONE);
    ck_assert(!c.local);
}
END_TEST

START_TEST(test_all_set)
{
    cfg c;
    clear_env();
    setenv("DMLC_ROLE", "worker", 1);
    setenv("DMLC_PS_ROOT_URI", "10.0.0.1", 1);
    setenv("DMLC_PS_ROOT_PORT", "9000", 1);
    setenv("DMLC_NUM_SERVER", "3", 1);
    setenv("DMLC_NUM_WORKER", "5", 1);
    setenv("DMLC_NODE_HOST", "10.0.0.7", 1);
    setenv("DMLC_INTERFACE", "eth1", 1);
    setenv("DMLC_WORKER_ID", "4", 1);
    setenv("DMLC_SERVER_ID", "2", 1);
    setenv("DMLC_LOCAL", "1", 1);
    setenv("DMLC_PS_VAN_TYPE", "p3", 1);
    setenv("DMLC_PS_WATER_MARK", "77", 1);
    setenv("PS_VERBOSE", "2", 1);
    setenv("PS_HEARTBEAT_INTERVAL", "0.25", 1);
    setenv("PS_HEARTBEAT_TIMEOUT", "1.5", 1);
    setenv("PS_RESEND", "yes", 1);
    setenv("PS_RESEND_TIMEOUT", "250", 1);
    setenv("MXNET_KVSTORE_BIGARRAY_BOUND", "18446744073709551615", 1);
    setenv("MXNET_KVSTORE_REDUCTION_NTHREADS", "16", 1);
    setenv("MXNET_KVSTORE_SLICE_THRESHOLD", "123", 1);
    setenv("MXNET_KVSTORE_USETREE", "on", 1);
    setenv("MXNET_UPDATE_ON_KVSTORE", "false", 1);
    setenv("KVS_START_TIMEOUT", "0.5", 1);
    setenv("KVS_MAX_MESSAGE", "1048576", 1);
    setenv("KVS_PORT", "65535", 1);
    setenv("KVS_PORT_FILE", "/tmp/port", 1);
    load_ok(&c, true);
    ck_assert_int_eq(c.role, CFG_ROLE_WORKER);
    ck_assert_str_eq(c.root_uri, "10.0.0.1");
    ck_assert_int_eq(c.root_port, 9000);
    ck_assert_int_eq(c.num_server, 3);
    ck_assert_int_eq(c.num_worker, 5);
    ck_assert_str_eq(c.node_host, "10.0.0.7");
    ck_assert_str_eq(c.interface, "eth1");
    ck_assert_int_eq(c.worker_id, 4);
    ck_assert_int_eq(c.server_id, 2);
    ck_assert(c.local);
    ck_assert_int_eq(c.van, CFG_VAN_P3);
    ck_assert_int_eq(c.water_mark, 77);
    ck_assert_int_eq(c.verbose, 2);
    ck_assert(c.hb_interval_s == 0.25);
    ck_assert(c.hb_timeout_s == 1.5);
    ck_assert(c.resend);
    ck_assert_int_eq(c.resend_timeout_ms, 250);
    ck_assert(c.bigarray_bound == UINT64_MAX);
    ck_assert_int_eq(c.reduction_nthreads, 16);
    ck_assert_uint_eq(c.slice_threshold, 123);
    ck_assert(c.use_tree);
    ck_assert(!c.update_on_kvstore);
    ck_assert(c.start_timeout_s == 0.5);
    ck_assert_uint_eq(c.max_message, 1048576);
    ck_assert_int_eq(c.port, 65535);
    ck_assert_str_eq(c.port_file, "/tmp/port");
}
END_TEST

START_TEST(test_role_words)
{
    static const struct {
        const char *word;
        enum cfg_role role;
    } ok[] = {{"none", CFG_ROLE_NONE},           {"scheduler", CFG_ROLE_SCHEDULER},
              {"server", CFG_ROLE_SERVER},       {"worker", CFG_ROLE_WORKER},
              {"WORKER", CFG_ROLE_WORKER},       {"Server", CFG_ROLE_SERVER}};
    cfg c;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        clear_env();
        setenv("DMLC_ROLE", ok[i].word, 1);
        load_ok(&c, false);
        ck_assert_msg(c.role == ok[i].role, "%s -> %d", ok[i].word, c.role);
    }
    ck_assert_str_eq(cfg_role_name(CFG_ROLE_SCHEDULER), "scheduler");
    ck_assert_str_eq(cfg_role_name(CFG_ROLE_SERVER), "server");
    ck_assert_str_eq(cfg_role_name(CFG_ROLE_WORKER), "worker");
    ck_assert_str_eq(cfg_role_name(CFG_ROLE_NONE), "none");
    ck_assert_str_eq(cfg_role_name((enum cfg_role)42), "none");

    expect_bad("DMLC_ROLE", "boss");
    /* the message lists what is allowed */
    ck_assert_ptr_nonnull(strstr(err, "'scheduler'"));
    ck_assert_ptr_nonnull(strstr(err, "'server'"));
    ck_assert_ptr_nonnull(strstr(err, "'worker'"));
    expect_bad("DMLC_ROLE", "workers");
    expect_bad("DMLC_ROLE", " worker");
}
END_TEST

/* Reads the int field of a freshly loaded cfg for name=val. */
static long long load_int_field(const char *name, const char *val, size_t off)
{
    cfg c;
    clear_env();
    setenv(name, val, 1);
    load_ok(&c, false);
    return *(int *)((char *)&c + off);
}

START_TEST(test_ports)
{
    static const struct {
        const char *name;
        size_t off;
    } ports[] = {{"DMLC_PS_ROOT_PORT", offsetof(cfg, root_port)}, {"KVS_PORT", offsetof(cfg, port)}};
    for (size_t i = 0; i < 2; i++) {
        ck_assert_int_eq(load_int_field(ports[i].name, "0", ports[i].off), 0);
        ck_assert_int_eq(load_int_field(ports[i].name, "1", ports[i].off), 1);
        ck_assert_int_eq(load_int_field(ports[i].name, "8080", ports[i].off), 8080);
        ck_assert_int_eq(load_int_field(ports[i].name, "65535", ports[i].off), 65535);
        ck_assert_int_eq(load_int_field(ports[i].name, "65535 ", ports[i].off), 65535);
        expect_bad(ports[i].name, "65536");
        ck_assert_ptr_nonnull(strstr(err, "65535"));
        expect_bad(ports[i].name, "-1");
        expect_bad(ports[i].name, "http");
        expect_bad(ports[i].name, "80x");
        expect_bad(ports[i].name, "8.5");
        expect_bad(ports[i].name, "99999999999999999999999");
    }
}
END_TEST

START_TEST(test_job_sizes)
{
    static const char *const names[] = {"DMLC_NUM_SERVER", "DMLC_NUM_WORKER"};
    static const size_t offs[] = {offsetof(cfg, num_server), offsetof(cfg, num_worker)};
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(load_int_field(names[i], "1", offs[i]), 1);
        ck_assert_int_eq(load_int_field(names[i], "64", offs[i]), 64);
        ck_assert_int_eq(load_int_field(names[i], "65536", offs[i]), 65536);
        expect_bad(names[i], "0");
        expect_bad(names[i], "-2");
        expect_bad(names[i], "two");
        expect_bad(names[i], "65537");
        expect_bad(names[i], "2 workers");
    }
}
END_TEST

START_TEST(test_rank_ids)
{
    cfg c;
    /* without a job, any id in [0, 65535] parses */
    ck_assert_int_eq(load_int_field("DMLC_WORKER_ID", "0", offsetof(cfg, worker_id)), 0);
    ck_assert_int_eq(load_int_field("DMLC_WORKER_ID", "65535", offsetof(cfg, worker_id)),
                     65535);
    ck_assert_int_eq(load_int_field("DMLC_SERVER_ID", "7", offsetof(cfg, server_id)), 7);
    expect_bad("DMLC_WORKER_ID", "-1");
    expect_bad("DMLC_WORKER_ID", "65536");
    expect_bad("DMLC_WORKER_ID", "first");
    expect_bad("DMLC_SERVER_ID", "-5");
    expect_bad("DMLC_SERVER_ID", "x");

    /* with a job of 3 workers, 2 servers: ids must be below the size */
    clear_env();
    set_job();
    setenv("DMLC_WORKER_ID", "2", 1);
    setenv("DMLC_SERVER_ID", "1", 1);
    load_ok(&c, true);
    ck_assert_int_eq(c.worker_id, 2);
    ck_assert_int_eq(c.server_id, 1);

    clear_env();
    set_job();
    setenv("DMLC_WORKER_ID", "3", 1);
    load_bad(true, "DMLC_WORKER_ID", "'3'");
    ck_assert_ptr_nonnull(strstr(err, "DMLC_NUM_WORKER=3"));

    clear_env();
    set_job();
    setenv("DMLC_SERVER_ID", "2", 1);
    load_bad(true, "DMLC_SERVER_ID", "'2'");
    ck_assert_ptr_nonnull(strstr(err, "DMLC_NUM_SERVER=2"));

    /* the same ids are fine when no job is needed */
    clear_env();
    set_job();
    setenv("DMLC_SERVER_ID", "2", 1);
    load_ok(&c, false);
    ck_assert_int_eq(c.server_id, 2);
}
END_TEST

static bool load_bool(const char *name, const char *val)
{
    cfg c;
    clear_env();
    setenv(name, val, 1);
    load_ok(&c, false);
    if (!strcmp(name, "DMLC_LOCAL"))
        return c.local;
    if (!strcmp(name, "PS_RESEND"))
        return c.resend;
    if (!strcmp(name, "MXNET_KVSTORE_USETREE"))
        return c.use_tree;
    return c.update_on_kvstore;
}

START_TEST(test_bools)
{
    static const char *const names[] = {"DMLC_LOCAL", "PS_RESEND", "MXNET_KVSTORE_USETREE",
                                        "MXNET_UPDATE_ON_KVSTORE"};
    static const char *const yes[] = {"1", "true", "TRUE", "yes", "Yes", "on", "ON"};
    static const char *const no[] = {"0", "false", "False", "no", "NO", "off", "Off"};
    for (int n = 0; n < 4; n++) {
        for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
            ck_assert_msg(load_bool(names[n], yes[i]), "%s=%s", names[n], yes[i]);
        for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
            ck_assert_msg(!load_bool(names[n], no[i]), "%s=%s", names[n], no[i]);
        expect_bad(names[n], "2");
        expect_bad(names[n], "maybe");
        expect_bad(names[n], "truee");
        expect_bad(names[n], "-1");
    }
}
END_TEST

START_TEST(test_van)
{
    cfg c;
    clear_env();
    setenv("DMLC_PS_VAN_TYPE", "zmq", 1);
    load_ok(&c, false);
    ck_assert_int_eq(c.van, CFG_VAN_ZMQ);
    setenv("DMLC_PS_VAN_TYPE", "p3", 1);
    load_ok(&c, false);
    ck_assert_int_eq(c.van, CFG_VAN_P3);
    setenv("DMLC_PS_VAN_TYPE", "P3", 1);
    load_ok(&c, false);
    ck_assert_int_eq(c.van, CFG_VAN_P3);
    expect_bad("DMLC_PS_VAN_TYPE", "ibverbs");
    ck_assert_ptr_nonnull(strstr(err, "'zmq'"));
    ck_assert_ptr_nonnull(strstr(err, "'p3'"));
    expect_bad("DMLC_PS_VAN_TYPE", "p4");
}
END_TEST

START_TEST(test_verbose_watermark_resend)
{
    ck_assert_int_eq(load_int_field("PS_VERBOSE", "0", offsetof(cfg, verbose)), 0);
    ck_assert_int_eq(load_int_field("PS_VERBOSE", "1", offsetof(cfg, verbose)), 1);
    ck_assert_int_eq(load_int_field("PS_VERBOSE", "2", offsetof(cfg, verbose)), 2);
    expect_bad("PS_VERBOSE", "3");
    expect_bad("PS_VERBOSE", "-1");
    expect_bad("PS_VERBOSE", "debug");
    expect_bad("PS_VERBOSE", "1.5");

    ck_assert_int_eq(load_int_field("DMLC_PS_WATER_MARK", "1", offsetof(cfg, water_mark)), 1);
    ck_assert_int_eq(load_int_field("DMLC_PS_WATER_MARK", "1073741824",
                                    offsetof(cfg, water_mark)), 1 << 30);
    expect_bad("DMLC_PS_WATER_MARK", "0");
    expect_bad("DMLC_PS_WATER_MARK", "1073741825");
    expect_bad("DMLC_PS_WATER_MARK", "lots");

    ck_assert_int_eq(load_int_field("PS_RESEND_TIMEOUT", "1", offsetof(cfg, resend_timeout_ms)),
                     1);
    ck_assert_int_eq(load_int_field("PS_RESEND_TIMEOUT", "3600000",
                                    offsetof(cfg, resend_timeout_ms)), 3600000);
    expect_bad("PS_RESEND_TIMEOUT", "0");
    expect_bad("PS_RESEND_TIMEOUT", "3600001");
    expect_bad("PS_RESEND_TIMEOUT", "1s");
}
END_TEST

START_TEST(test_checkpoint_vars)
{
    cfg c;
    clear_env();
    load_ok(&c, false);
    ck_assert(c.checkpoint_every == 0 && c.checkpoint_dir[0] == '\0');
    setenv("KVS_CHECKPOINT_DIR", "/var/ckpt", 1);
    setenv("KVS_CHECKPOINT_EVERY", "100", 1);
    load_ok(&c, false);
    ck_assert(c.checkpoint_every == 100);
    ck_assert_str_eq(c.checkpoint_dir, "/var/ckpt");
    setenv("KVS_CHECKPOINT_EVERY", "ten", 1);
    load_bad(false, "KVS_CHECKPOINT_EVERY", "ten");
    unsetenv("KVS_CHECKPOINT_EVERY");
    load_bad(false, "KVS_CHECKPOINT_DIR", "KVS_CHECKPOINT_EVERY");
    clear_env();
    setenv("KVS_CHECKPOINT_EVERY", "5", 1);
    load_bad(false, "KVS_CHECKPOINT_EVERY=5", "KVS_CHECKPOINT_DIR");
}
END_TEST

START_TEST(test_heartbeat)
{
    cfg c;
    clear_env();
    setenv("PS_HEARTBEAT_INTERVAL", "0.1", 1);
    setenv("PS_HEARTBEAT_TIMEOUT", "0.35", 1);
    load_ok(&c, false);
    ck_assert(c.hb_interval_s == 0.1);
    ck_assert(c.hb_timeout_s == 0.35);

    clear_env();
    setenv("PS_HEARTBEAT_INTERVAL", "2", 1);
    load_ok(&c, false);
    ck_assert(c.hb_interval_s == 2.0);
    ck_assert(c.hb_timeout_s == 60.0);

    clear_env();
    setenv("PS_HEARTBEAT_TIMEOUT", "1e1", 1);
    load_ok(&c, false);
    ck_assert(c.hb_timeout_s == 10.0);

    /* timeout <= interval */
    clear_env();
    setenv("PS_HEARTBEAT_INTERVAL", "3", 1);
    setenv("PS_HEARTBEAT_TIMEOUT", "3", 1);
    load_bad(false, "PS_HEARTBEAT_TIMEOUT", "PS_HEARTBEAT_INTERVAL");
    clear_env();
    setenv("PS_HEARTBEAT_INTERVAL", "2.5", 1);
    setenv("PS_HEARTBEAT_TIMEOUT", "1.25", 1);
    load_bad(false, "PS_HEARTBEAT_TIMEOUT=1.25", "PS_HEARTBEAT_INTERVAL=2.5");
    /* an interval above the default timeout needs a timeout too */
    clear_env();
    setenv("PS_HEARTBEAT_INTERVAL", "61", 1);
    load_bad(false, "PS_HEARTBEAT_TIMEOUT", "PS_HEARTBEAT_INTERVAL=61");

    expect_bad("PS_HEARTBEAT_INTERVAL", "0");
    expect_bad("PS_HEARTBEAT_INTERVAL", "-1");
    expect_bad("PS_HEARTBEAT_INTERVAL", "fast");
    expect_bad("PS_HEARTBEAT_INTERVAL", "1s");
    expect_bad("PS_HEARTBEAT_INTERVAL", "nan");
    expect_bad("PS_HEARTBEAT_INTERVAL", "inf");
    expect_bad("PS_HEARTBEAT_INTERVAL", "3601");
    expect_bad("PS_HEARTBEAT_TIMEOUT", "0.01");
    expect_bad("PS_HEARTBEAT_TIMEOUT", "86401");
    expect_bad("PS_HEARTBEAT_TIMEOUT", "1e400");
}
END_TEST

START_TEST(test_u64_vars)
{
    cfg c;
    clear_env();
    setenv("MXNET_KVSTORE_BIGARRAY_BOUND", "1", 1);
    load_ok(&c, false);
    ck_assert_uint_eq(c.bigarray_bound, 1);
    setenv("MXNET_KVSTORE_BIGARRAY_BOUND", "4294967296", 1);
    load_ok(&c, false);
    ck_assert(c.bigarray_bound == 4294967296ull);
    setenv("MXNET_KVSTORE_BIGARRAY_BOUND", "18446744073709551615", 1);
    load_ok(&c, false);
    ck_assert(c.bigarray_bound == UINT64_MAX);

    expect_bad("MXNET_KVSTORE_BIGARRAY_BOUND", "0");
    expect_bad("MXNET_KVSTORE_BIGARRAY_BOUND", "-1");
    expect_bad("MXNET_KVSTORE_BIGARRAY_BOUND", " -1");
    expect_bad("MXNET_KVSTORE_BIGARRAY_BOUND", "-18446744073709551615");
    expect_bad("MXNET_KVSTORE_BIGARRAY_BOUND", "+5");
    expect_bad("MXNET_KVSTORE_BIGARRAY_BOUND", "18446744073709551616");
    expect_bad("MXNET_KVSTORE_BIGARRAY_BOUND", "99999999999999999999999999");
    expect_bad("MXNET_KVSTORE_BIGARRAY_BOUND", "1e6");
    expect_bad("MXNET_KVSTORE_BIGARRAY_BOUND", "1000000x");
    expect_bad("MXNET_KVSTORE_BIGARRAY_BOUND", "lots");
    expect_bad("MXNET_KVSTORE_BIGARRAY_BOUND", "0x10");

    clear_env();
    setenv("MXNET_KVSTORE_SLICE_THRESHOLD", "7", 1);
    load_ok(&c, false);
    ck_assert_uint_eq(c.slice_threshold, 7);
    expect_bad("MXNET_KVSTORE_SLICE_THRESHOLD", "0");
    expect_bad("MXNET_KVSTORE_SLICE_THRESHOLD", "-40000");

    clear_env();
    setenv("KVS_MAX_MESSAGE", "64", 1);
    load_ok(&c, false);
    ck_assert_uint_eq(c.max_message, 64);
    setenv("KVS_MAX_MESSAGE", "17179869184", 1);
    load_ok(&c, false);
    ck_assert(c.max_message == 17179869184ull);
    expect_bad("KVS_MAX_MESSAGE", "63");

    clear_env();
    setenv("KVS_CHUNK_BYTES", "4096", 1);
    load_ok(&c, false);
    ck_assert_uint_eq(c.chunk_bytes, 4096);
    setenv("KVS_CHUNK_BYTES", "1099511627776", 1);
    load_ok(&c, false);
    ck_assert(c.chunk_bytes == 1ull << 40);
    expect_bad("KVS_CHUNK_BYTES", "4095");
    expect_bad("KVS_CHUNK_BYTES", "1099511627777");
    expect_bad("KVS_CHUNK_BYTES", "4M");

    clear_env();
    load_ok(&c, false);
    ck_assert_uint_eq(c.fuse_bytes, 256u << 10);
    setenv("KVS_FUSE_BYTES", "0", 1);
    load_ok(&c, false);
    ck_assert_uint_eq(c.fuse_bytes, 0);
    setenv("KVS_FUSE_BYTES", "4096", 1);
    load_ok(&c, false);
    ck_assert_uint_eq(c.fuse_bytes, 4096);
    expect_bad("KVS_FUSE_BYTES", "4095");
    expect_bad("KVS_FUSE_BYTES", "1");
    expect_bad("KVS_FUSE_BYTES", "1073741825");
    expect_bad("KVS_FUSE_BYTES", "256K");
    unsetenv("KVS_FUSE_BYTES");

    clear_env();
    load_ok(&c, false);
    ck_assert_uint_eq(c.p3_credit, 2u << 20);
    setenv("KVS_P3_CREDIT", "0", 1);
    load_ok(&c, false);
    ck_assert_uint_eq(c.p3_credit, 0);
    expect_bad("KVS_P3_CREDIT", "-1");
    expect_bad("KVS_P3_CREDIT", "1099511627777");
    expect_bad("KVS_P3_CREDIT", "2M");
    unsetenv("KVS_P3_CREDIT");
    expect_bad("KVS_MAX_MESSAGE", "1GiB");
    expect_bad("KVS_MAX_MESSAGE", "-64");
}
END_TEST

START_TEST(test_threads_and_timeout)
{
    cfg c;
    clear_env();
    load_ok(&c, false);
    ck_assert_int_eq(c.job_nice, PRIO_AUTO); /* the default: SCHED_IDLE under the guard */
    ck_assert_int_eq(load_int_field("KVS_JOB_NICE", "auto", offsetof(cfg, job_nice)), PRIO_AUTO);
    ck_assert_int_eq(load_int_field("KVS_JOB_NICE", "", offsetof(cfg, job_nice)), PRIO_AUTO);
    ck_assert_int_eq(load_int_field("KVS_JOB_NICE", "10", offsetof(cfg, job_nice)), 10);
    ck_assert_int_eq(load_int_field("KVS_JOB_NICE", "0", offsetof(cfg, job_nice)), 0);
    ck_assert_int_eq(load_int_field("KVS_JOB_NICE", "19", offsetof(cfg, job_nice)), 19);
    expect_bad("KVS_JOB_NICE", "-1");
    expect_bad("KVS_JOB_NICE", "20");
    expect_bad("KVS_JOB_NICE", "low");
    ck_assert_int_eq(load_int_field("KVS_JOB_NICE", "idle", offsetof(cfg, job_nice)), PRIO_IDLE);
    expect_bad("KVS_JOB_NICE", "IDLE");
    expect_bad("KVS_JOB_NICE", "idle ");
    expect_bad("KVS_JOB_NICE", "AUTO");
    expect_bad("KVS_JOB_NICE", "auto10");
    expect_bad("KVS_JOB_NICE", "21"); /* PRIO_AUTO's number is not a niceness */
    load_bad(false, "KVS_JOB_NICE", "idle or auto"); /* the message says what is accepted */
    unsetenv("KVS_JOB_NICE");

    ck_assert_int_eq(load_int_field("MXNET_KVSTORE_REDUCTION_NTHREADS", "1",
                                    offsetof(cfg, reduction_nthreads)), 1);
    ck_assert_int_eq(load_int_field("MXNET_KVSTORE_REDUCTION_NTHREADS", "1024",
                                    offsetof(cfg, reduction_nthreads)), 1024);
    expect_bad("MXNET_KVSTORE_REDUCTION_NTHREADS", "0");
    expect_bad("MXNET_KVSTORE_REDUCTION_NTHREADS", "1025");
    expect_bad("MXNET_KVSTORE_REDUCTION_NTHREADS", "-4");
    expect_bad("MXNET_KVSTORE_REDUCTION_NTHREADS", "four");

    clear_env();
    setenv("KVS_START_TIMEOUT", "0.5", 1);
    load_ok(&c, false);
    ck_assert(c.start_timeout_s == 0.5);
    setenv("KVS_START_TIMEOUT", "86400", 1);
    load_ok(&c, false);
    ck_assert(c.start_timeout_s == 86400.0);
    expect_bad("KVS_START_TIMEOUT", "0");
    expect_bad("KVS_START_TIMEOUT", "0.05");
    expect_bad("KVS_START_TIMEOUT", "-3");
    expect_bad("KVS_START_TIMEOUT", "soon");
    expect_bad("KVS_START_TIMEOUT", "86400.5");
}
END_TEST

START_TEST(test_strings_too_long)
{
    char big[CFG_HOST_MAX + 1];
    char ifname[65];
    cfg c;
    memset(big, 'h', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    clear_env();
    big[CFG_HOST_MAX - 1] = '\0'; /* 255 characters: fits */
    setenv("DMLC_PS_ROOT_URI", big, 1);
    load_ok(&c, false);
    ck_assert_uint_eq(strlen(c.root_uri), CFG_HOST_MAX - 1);
    big[CFG_HOST_MAX - 1] = 'h'; /* 256: too long */
    setenv("DMLC_PS_ROOT_URI", big, 1);
    load_bad(false, "DMLC_PS_ROOT_URI", "256");

    clear_env();
    setenv("DMLC_NODE_HOST", big, 1);
    load_bad(false, "DMLC_NODE_HOST", NULL);

    memset(ifname, 'e', sizeof ifname - 1);
    ifname[sizeof ifname - 1] = '\0';
    clear_env();
    setenv("DMLC_INTERFACE", ifname, 1);
    load_bad(false, "DMLC_INTERFACE", NULL);
}
END_TEST

START_TEST(test_needs_job)
{
    cfg c;
    clear_env();
    set_job();
    load_ok(&c, true);
    ck_assert_str_eq(c.root_uri, "10.1.2.3");
    ck_assert_int_eq(c.root_port, 9091);
    ck_assert_int_eq(c.num_server, 2);
    ck_assert_int_eq(c.num_worker, 3);

    /* nothing set: fine without a job, an error with one */
    clear_env();
    load_ok(&c, false);
    load_bad(true, "DMLC_PS_ROOT_URI", "not set");

    clear_env();
    set_job();
    unsetenv("DMLC_PS_ROOT_URI");
    load_bad(true, "DMLC_PS_ROOT_URI", "not set");

    clear_env();
    set_job();
    unsetenv("DMLC_PS_ROOT_PORT");
    load_bad(true, "DMLC_PS_ROOT_PORT", "not set");

    clear_env();
    set_job();
    unsetenv("DMLC_NUM_SERVER");
    load_bad(true, "DMLC_NUM_SERVER", "not set");

    clear_env();
    set_job();
    unsetenv("DMLC_NUM_WORKER");
    load_bad(true, "DMLC_NUM_WORKER", "not set");

    /* port 0 only for the scheduler */
    clear_env();
    set_job();
    setenv("DMLC_PS_ROOT_PORT", "0", 1);
    load_bad(true, "DMLC_PS_ROOT_PORT", "'0'");
    setenv("DMLC_ROLE", "worker", 1);
    load_bad(true, "DMLC_PS_ROOT_PORT", "'0'");
    setenv("DMLC_ROLE", "scheduler", 1);
    load_ok(&c, true);
    ck_assert_int_eq(c.root_port, 0);

    /* a bad value is reported even with a job */
    clear_env();
    set_job();
    setenv("DMLC_NUM_WORKER", "two", 1);
    load_bad(true, "DMLC_NUM_WORKER", "'two'");
}
END_TEST

START_TEST(test_typed_readers)
{
    static const char *const words[] = {"red", "green", "blue", NULL};
    long long i;
    uint64_t u;
    double d;
    bool b;
    int e;
    clear_env();
    unsetenv("KVS_TEST_VAR");

    /* unset: the default, whatever it is */
    ck_assert_int_eq(cfg_get_int("KVS_TEST_VAR", -7, 0, 10, &i, err, sizeof err), 0);
    ck_assert_int_eq(i, -7);
    ck_assert_int_eq(cfg_get_u64("KVS_TEST_VAR", 9, 1, 5, &u, err, sizeof err), 0);
    ck_assert_uint_eq(u, 9);
    ck_assert_int_eq(cfg_get_double("KVS_TEST_VAR", 2.5, 0, 1, &d, err, sizeof err), 0);
    ck_assert(d == 2.5);
    ck_assert_int_eq(cfg_get_bool("KVS_TEST_VAR", true, &b, err, sizeof err), 0);
    ck_assert(b);
    ck_assert_int_eq(cfg_get_enum("KVS_TEST_VAR", 2, words, &e, err, sizeof err), 0);
    ck_assert_int_eq(e, 2);

    setenv("KVS_TEST_VAR", "green", 1);
    ck_assert_int_eq(cfg_get_enum("KVS_TEST_VAR", 0, words, &e, err, sizeof err), 0);
    ck_assert_int_eq(e, 1);
    setenv("KVS_TEST_VAR", "BLUE", 1);
    ck_assert_int_eq(cfg_get_enum("KVS_TEST_VAR", 0, words, &e, err, sizeof err), 0);
    ck_assert_int_eq(e, 2);
    setenv("KVS_TEST_VAR", "purple", 1);
    e = 99;
    ck_assert_int_eq(cfg_get_enum("KVS_TEST_VAR", 0, words, &e, err, sizeof err), KVS_ECONFIG);
    ck_assert_int_eq(e, 99);
    ck_assert_str_eq(err, "KVS_TEST_VAR='purple': expected one of 'red', 'green', 'blue'");

    setenv("KVS_TEST_VAR", "-9223372036854775808", 1);
    ck_assert_int_eq(cfg_get_int("KVS_TEST_VAR", 0, INT64_MIN, INT64_MAX, &i, err, sizeof err),
                     0);
    ck_assert(i == INT64_MIN);
    setenv("KVS_TEST_VAR", "-9223372036854775809", 1);
    ck_assert_int_eq(cfg_get_int("KVS_TEST_VAR", 0, INT64_MIN, INT64_MAX, &i, err, sizeof err),
                     KVS_ECONFIG);
    setenv("KVS_TEST_VAR", "11", 1);
    i = 5;
    ck_assert_int_eq(cfg_get_int("KVS_TEST_VAR", 0, 0, 10, &i, err, sizeof err), KVS_ECONFIG);
    ck_assert_int_eq(i, 5);
    ck_assert_str_eq(err, "KVS_TEST_VAR='11': expected an integer in [0, 10]");

    setenv("KVS_TEST_VAR", "6", 1);
    ck_assert_int_eq(cfg_get_u64("KVS_TEST_VAR", 0, 1, 5, &u, err, sizeof err), KVS_ECONFIG);
    ck_assert_str_eq(err, "KVS_TEST_VAR='6': expected an integer in [1, 5]");

    setenv("KVS_TEST_VAR", "0.75", 1);
    ck_assert_int_eq(cfg_get_double("KVS_TEST_VAR", 0, 0, 1, &d, err, sizeof err), 0);
    ck_assert(d == 0.75);
    setenv("KVS_TEST_VAR", "1.5", 1);
    ck_assert_int_eq(cfg_get_double("KVS_TEST_VAR", 0, 0, 1, &d, err, sizeof err), KVS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "KVS_TEST_VAR='1.5'"));

    /* a short buffer is truncated, never overrun */
    char small[12];
    memset(small, 'Z', sizeof small);
    ck_assert_int_eq(cfg_get_double("KVS_TEST_VAR", 0, 0, 1, &d, small, 8), KVS_ECONFIG);
    ck_assert_uint_eq(strlen(small), 7);
    ck_assert_int_eq(small[8], 'Z');
}
END_TEST

START_TEST(test_resolve_host)
{
    cfg c;
    char host[64];
    struct in_addr a;

    /* DMLC_NODE_HOST wins */
    clear_env();
    set_job();
    setenv("DMLC_NODE_HOST", "node7.example", 1);
    setenv("DMLC_INTERFACE", "nosuchif0", 1);
    load_ok(&c, true);
    ck_assert_int_eq(cfg_resolve_host(&c, host, sizeof host, err, sizeof err), 0);
    ck_assert_str_eq(host, "node7.example");

    /* root on loopback -> 127.0.0.1 */
    clear_env();
    set_job();
    setenv("DMLC_PS_ROOT_URI", "127.0.0.5", 1);
    load_ok(&c, true);
    ck_assert_int_eq(cfg_resolve_host(&c, host, sizeof host, err, sizeof err), 0);
    ck_assert_str_eq(host, "127.0.0.1");
    setenv("DMLC_PS_ROOT_URI", "localhost", 1);
    load_ok(&c, true);
    ck_assert_int_eq(cfg_resolve_host(&c, host, sizeof host, err, sizeof err), 0);
    ck_assert_str_eq(host, "127.0.0.1");

    /* an interface that does not exist is named in the error */
    clear_env();
    set_job();
    setenv("DMLC_INTERFACE", "nosuchif0", 1);
    load_ok(&c, true);
    ck_assert_int_eq(cfg_resolve_host(&c, host, sizeof host, err, sizeof err), KVS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "DMLC_INTERFACE"));
    ck_assert_ptr_nonnull(strstr(err, "'nosuchif0'"));
    /* even when the root is on loopback */
    setenv("DMLC_PS_ROOT_URI", "127.0.0.1", 1);
    load_ok(&c, true);
    ck_assert_int_eq(cfg_resolve_host(&c, host, sizeof host, err, sizeof err), KVS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "'nosuchif0'"));
    /* exact names only: a prefix of "lo" is not "lo" */
    setenv("DMLC_INTERFACE", "l", 1);
    load_ok(&c, true);
    ck_assert_int_eq(cfg_resolve_host(&c, host, sizeof host, err, sizeof err), KVS_ECONFIG);

    /* DMLC_INTERFACE=lo -> 127.0.0.1, whatever the root */
    clear_env();
    set_job();
    setenv("DMLC_INTERFACE", "lo", 1);
    load_ok(&c, true);
    ck_assert_int_eq(cfg_resolve_host(&c, host, sizeof host, err, sizeof err), 0);
    ck_assert_str_eq(host, "127.0.0.1");

    /* automatic, root elsewhere: a non-loopback IPv4 address, or an error
     * that says what to set when the machine has none */
    clear_env();
    set_job();
    load_ok(&c, true);
    int rc = cfg_resolve_host(&c, host, sizeof host, err, sizeof err);
    if (rc == 0) {
        ck_assert_int_eq(inet_pton(AF_INET, host, &a), 1);
        ck_assert_msg((ntohl(a.s_addr) >> 24) != 127, "loopback %s chosen", host);
    } else {
        ck_assert_int_eq(rc, KVS_ECONFIG);
        ck_assert_ptr_nonnull(strstr(err, "DMLC_NODE_HOST"));
    }
}
END_TEST

/* The table's shape: unique names, a doc line, a field where the kind has one. */
START_TEST(test_table_shape)
{
    ck_assert_uint_ge(cfg_nvars, 60);
    for (size_t i = 0; i < cfg_nvars; i++) {
        const cfg_var *v = &cfg_vars[i];
        ck_assert_msg(v->doc && v->doc[0], "%s: no doc line", v->name);
        ck_assert_ptr_eq(cfg_var_find(v->name), v); /* and so no second entry of the name */
        bool has_field = v->kind <= CFG_K_ENUM;
        ck_assert_msg(has_field == (v->size > 0), "%s: field size %zu", v->name, v->size);
        if (v->kind == CFG_K_ENUM)
            ck_assert_ptr_nonnull(v->words);
        if (has_field)
            ck_assert_uint_le(v->off + v->size, sizeof(cfg));
    }
    ck_assert_ptr_null(cfg_var_find("NOT_A_VARIABLE"));
    ck_assert_int_eq(cfg_var_find("KVS_TOPOLOGY")->kind, CFG_K_STR);
    ck_assert_int_eq(cfg_var_find("DMLC_ENABLE_RDMA")->kind, CFG_K_OFF);
}
END_TEST

/* With nothing set every field holds the table's default, and the tree
 * defaults are tree_opts_default's. */
START_TEST(test_table_defaults)
{
    static cfg c;
    clear_env();
    load_ok(&c, false);
    for (size_t i = 0; i < cfg_nvars; i++) {
        const cfg_var *v = &cfg_vars[i];
        const char *f = (const char *)&c + v->off;
        int iv;
        uint64_t uv;
        double dv;
        bool bv;
        switch (v->kind) {
        case CFG_K_INT:
        case CFG_K_ENUM:
            memcpy(&iv, f, sizeof iv);
            ck_assert_msg(iv == v->v.i.def, "%s: %d, default %lld", v->name, iv, v->v.i.def);
            break;
        case CFG_K_U64:
            memcpy(&uv, f, sizeof uv);
            ck_assert_msg(uv == v->v.u.def, "%s: %llu", v->name, (unsigned long long)uv);
            break;
        case CFG_K_DBL:
            memcpy(&dv, f, sizeof dv);
            ck_assert_msg(dv == v->v.d.def, "%s: %g, default %g", v->name, dv, v->v.d.def);
            break;
        case CFG_K_BOOL:
            memcpy(&bv, f, sizeof bv);
            ck_assert_msg(bv == v->v.b, "%s: %d", v->name, bv);
            break;
        case CFG_K_STR:
            ck_assert_msg(!strcmp(f, v->v.s), "%s: '%s', default '%s'", v->name, f, v->v.s);
            break;
        default:
            break;
        }
    }
    ck_assert_str_eq(c.tmpdir, "/tmp");
    ck_assert_str_eq(c.metrics_addr, "127.0.0.1"); /* loopback unless asked */
    ck_assert_int_eq(c.job_nice, PRIO_AUTO);
    tree_opts o, d;
    tree_opts_from_cfg(&o, &c);
    tree_opts_default(&d);
    ck_assert_int_eq(o.mode, d.mode);
    ck_assert(o.penalty == d.penalty && o.penalty == 0.7);
    ck_assert_int_eq(o.log, d.log);
    ck_assert_uint_eq(o.array_bound, d.array_bound);
    ck_assert_uint_eq(o.array_bound, 10000000);
    ck_assert_int_eq(o.gpu_p2p, d.gpu_p2p);
    ck_assert_int_eq(o.optimize, d.optimize);
    ck_assert_uint_eq(o.effort, d.effort);
    ck_assert_int_eq(o.depth_slack, d.depth_slack);
}
END_TEST

/* The tree, GPU and socket-directory variables are read with the others. */
START_TEST(test_tree_gpu_vars)
{
    static cfg c;
    clear_env();
    setenv("MXNET_KVSTORE_TREE_BACKTRACK", "1", 1);
    setenv("MXNET_KVSTORE_TREE_LINK_USAGE_PENALTY", "0.25", 1);
    setenv("MXNET_KVSTORE_TREE_ARRAY_BOUND", "4096", 1);
    setenv("MXNET_KVSTORE_LOGTREE", "yes", 1);
    setenv("MXNET_ENABLE_GPU_P2P", "0", 1);
    setenv("KVS_TREE_OPTIMIZE", "off", 1);
    setenv("KVS_TREE_EFFORT", "250", 1);
    setenv("KVS_TREE_DEPTH_SLACK", "0", 1);
    setenv("KVS_TOPOLOGY", "0,2;2,0", 1);
    setenv("KVS_CUDA_PLUGIN", "/opt/kvs/libkvs_cuda.so", 1);
    setenv("TMPDIR", "/var/tmp", 1);
    load_ok(&c, false);
    tree_opts o;
    tree_opts_from_cfg(&o, &c);
    ck_assert_int_eq(o.mode, TREE_MODE_BACKTRACK);
    ck_assert(o.penalty == 0.25);
    ck_assert_uint_eq(o.array_bound, 4096);
    ck_assert(o.log);
    ck_assert(!o.gpu_p2p);
    ck_assert(!o.optimize);
    ck_assert_uint_eq(o.effort, 250);
    ck_assert_int_eq(o.depth_slack, 0);
    ck_assert_str_eq(c.topology, "0,2;2,0");
    ck_assert_str_eq(c.cuda_plugin, "/opt/kvs/libkvs_cuda.so");
    ck_assert_str_eq(c.tmpdir, "/var/tmp");
    expect_bad("KVS_TREE_EFFORT", "10001");
    expect_bad("KVS_TREE_DEPTH_SLACK", "2");
    expect_bad("MXNET_ENABLE_GPU_P2P", "maybe");
    expect_bad("MXNET_KVSTORE_TREE_LINK_USAGE_PENALTY", "0");
    expect_bad("MXNET_KVSTORE_TREE_ARRAY_BOUND", "0");
    expect_bad("KVS_SIM_DEVICES", "65");
}
END_TEST

/* ps-lite's transport switches that kvsd does not implement are refused,
 * not ignored (the job would run on TCP without a word). */
START_TEST(test_unimplemented_transports)
{
    static cfg c;
    static const char *const vars[] = {"DMLC_ENABLE_RDMA", "DMLC_ENABLE_UCX"};
    for (int i = 0; i < 2; i++) {
        clear_env();
        setenv(vars[i], "0", 1);
        load_ok(&c, false);
        setenv(vars[i], "false", 1);
        load_ok(&c, false);
        setenv(vars[i], "1", 1);
        load_bad(false, vars[i], "no such transport");
        setenv(vars[i], "true", 1);
        load_bad(false, vars[i], "'true'");
        expect_bad(vars[i], "rdma");
    }
    expect_bad("DMLC_PS_VAN_TYPE", "ibverbs");
    expect_bad("DMLC_PS_VAN_TYPE", "ucx");
}
END_TEST

/* IPv6 is refused at start-up with a message that says so. */
START_TEST(test_ipv6_refused)
{
    static cfg c;
    static const char *const v6[] = {"::1", "[::1]", "fe80::1%eth0", "2001:db8::7", "[10.0.0.1]"};
    for (int i = 0; i < 5; i++) {
        clear_env();
        set_job();
        setenv("DMLC_PS_ROOT_URI", v6[i], 1);
        load_bad(true, "DMLC_PS_ROOT_URI", "IPv6");
        clear_env();
        setenv("DMLC_NODE_HOST", v6[i], 1);
        load_bad(false, "DMLC_NODE_HOST", "IPv6");
    }
    clear_env();
    set_job();
    setenv("DMLC_PS_ROOT_URI", "10.0.0.1:9000", 1);
    load_bad(true, "'10.0.0.1:9000'", "without a port");
    setenv("DMLC_PS_ROOT_URI", "sched-0.example.org", 1);
    load_ok(&c, true);
    ck_assert_str_eq(c.root_uri, "sched-0.example.org");
    setenv("DMLC_NODE_HOST", "10.0.0.2", 1);
    load_ok(&c, true);
}
END_TEST

static char logged[16384];

static void capture(int level, const char *line, void *ctx)
{
    (void)level;
    (void)ctx;
    size_t n = strlen(logged);
    snprintf(logged + n, sizeof logged - n, "%s\n", line);
}

/* The start-up log lines name every parsed variable with its value, and
 * never the secret. */
START_TEST(test_log_lines)
{
    static cfg c;
    char needle[160];
    clear_env();
    setenv("KVS_SECRET", "a-job-secret-of-32-bytes-or-so!!", 1);
    setenv("KVS_JOB_NICE", "idle", 1);
    setenv("DMLC_PS_VAN_TYPE", "p3", 1);
    setenv("KVS_TOPOLOGY", "0,3;3,0", 1);
    load_ok(&c, false);
    log_level = LOG_INFO;
    log_set_handler(capture, NULL);
    cfg_log(&c, "test");
    log_set_handler(NULL, NULL);
    for (size_t i = 0; i < cfg_nvars; i++) {
        const cfg_var *v = &cfg_vars[i];
        if (v->kind > CFG_K_ENUM)
            continue;
        snprintf(needle, sizeof needle, " %s=", v->name);
        ck_assert_msg(strstr(logged, needle) != NULL, "%s not logged", v->name);
    }
    ck_assert_ptr_nonnull(strstr(logged, " KVS_JOB_NICE=idle"));
    ck_assert_ptr_nonnull(strstr(logged, " DMLC_PS_VAN_TYPE=p3"));
    ck_assert_ptr_nonnull(strstr(logged, " KVS_TOPOLOGY='0,3;3,0'"));
    ck_assert_ptr_nonnull(strstr(logged, " KVS_MAX_MESSAGE=4294967296"));
    ck_assert_ptr_nonnull(strstr(logged, " MXNET_ENABLE_GPU_P2P=1"));
    ck_assert_ptr_nonnull(strstr(logged, "security=auth (from KVS_SECRET)"));
    ck_assert_ptr_null(strstr(logged, "a-job-secret"));
    /* log_line cuts a text at 1023 bytes: every line (text plus its prefix)
     * stays well under that */
    for (const char *p = logged, *e; (e = strchr(p, '\n')) != NULL; p = e + 1)
        ck_assert_uint_lt((size_t)(e - p), 1000);
}
END_TEST

/* KVS_DEVICES: a list of ordinals, repeats allowed; anything else rejected
 * with the variable, the value and what is allowed */
START_TEST(test_devices)
{
    cfg c;
    clear_env();
    load_ok(&c, false);
    ck_assert_int_eq(c.ndevices, 0);
    setenv("KVS_DEVICES", "3", 1);
    load_ok(&c, false);
    ck_assert_int_eq(c.ndevices, 1);
    ck_assert_int_eq(c.devices[0], 3);
    setenv("KVS_DEVICES", "2, 0,2 ,63", 1);
    load_ok(&c, false);
    ck_assert_int_eq(c.ndevices, 4);
    ck_assert_int_eq(c.devices[0], 2);
    ck_assert_int_eq(c.devices[1], 0);
    ck_assert_int_eq(c.devices[2], 2);
    ck_assert_int_eq(c.devices[3], 63);
    static const char *const bad[] = {"x", "1,", ",1", "1,,2", "-1", "64", "1.5", "0;1",
                                      "99999999999999999999", NULL};
    for (int i = 0; bad[i]; i++) {
        expect_bad("KVS_DEVICES", bad[i]);
        ck_assert_msg(strstr(err, "device ordinals") != NULL, "%s", err);
    }
    char many[400] = "0";
    for (int i = 1; i < 65; i++)
        strcat(many, ",1");
    expect_bad("KVS_DEVICES", many);
}
END_TEST

Suite *config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *t = tcase_create("config");
    tcase_add_test(t, test_defaults);
    tcase_add_test(t, test_empty_is_default);
    tcase_add_test(t, test_all_set);
    tcase_add_test(t, test_role_words);
    tcase_add_test(t, test_ports);
    tcase_add_test(t, test_job_sizes);
    tcase_add_test(t, test_rank_ids);
    tcase_add_test(t, test_bools);
    tcase_add_test(t, test_van);
    tcase_add_test(t, test_verbose_watermark_resend);
    tcase_add_test(t, test_heartbeat);
    tcase_add_test(t, test_checkpoint_vars);
    tcase_add_test(t, test_u64_vars);
    tcase_add_test(t, test_threads_and_timeout);
    tcase_add_test(t, test_strings_too_long);
    tcase_add_test(t, test_needs_job);
    tcase_add_test(t, test_typed_readers);
    tcase_add_test(t, test_resolve_host);
    tcase_add_test(t, test_table_shape);
    tcase_add_test(t, test_table_defaults);
    tcase_add_test(t, test_tree_gpu_vars);
    tcase_add_test(t, test_unimplemented_transports);
    tcase_add_test(t, test_ipv6_refused);
    tcase_add_test(t, test_log_lines);
    tcase_add_test(t, test_devices);
    suite_add_tcase(s, t);
    return s;
}
