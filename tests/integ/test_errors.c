/*
 * test_errors.c - errors a user can cause: unknown store type, uninitialised
 * keys, shape mismatches (and the job goes on), malformed configuration
 * (exit 2 naming the variable), and nodes that cannot register in time.
 */
#include "tests.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

IT_TEST(create_bogus)
{
    static const char *const argv[] = {"create-error", "KVS_EINVAL", "--type", "bogus", NULL};
    int w = it_spawn(t, "worker0", t->worker_bin, argv, NULL);
    it_expect_exit(t, w, 0, 10);
}

IT_TEST(errors_2x2)
{
    static const char *const argv[] = {"errors", NULL};
    it_setenv(t, "MXNET_KVSTORE_BIGARRAY_BOUND", "1000");
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_setenv(t, "PS_VERBOSE", "1");
    it_start_job(t, 2, 2, argv);
    it_expect_job_ok(t, 40);
}

/* ---- bad configuration ---- */

typedef struct bad_env {
    const char *var, *value;
} bad_env;

enum role { SCHED, SERVER, WORKER };

/* Start one process per case, each with a complete valid configuration but
 * one bad variable; every one must exit 2 quickly and name the variable.
 * A bad value that is accepted shows as a process still waiting for its job
 * (KVS_START_TIMEOUT is 30 s, the deadline here 10 s). */
static void run_bad_env(it_ctx *t, enum role role, const bad_env *cases, int n)
{
    int idx[IT_MAX_PROCS];
    char entries[IT_MAX_PROCS][160], portfile[PATH_MAX + 32], port[64];
    snprintf(portfile, sizeof portfile, "KVS_PORT_FILE=%s/scheduler.port", t->dir);
    snprintf(port, sizeof port, "DMLC_PS_ROOT_PORT=%d", role == SCHED ? 0 : it_dead_port(t));
    it_setenv(t, "DMLC_PS_ROOT_URI", "127.0.0.1");
    it_setenv(t, "DMLC_NODE_HOST", "127.0.0.1");
    it_setenv(t, "DMLC_NUM_SERVER", "1");
    it_setenv(t, "DMLC_NUM_WORKER", "1");
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    for (int i = 0; i < n; i++) {
        char name[IT_NAME_MAX];
        const char *env[8];
        int k = 0;
        snprintf(entries[i], sizeof entries[i], "%s=%s", cases[i].var, cases[i].value);
        env[k++] = role == SCHED ? "DMLC_ROLE=scheduler" : role == SERVER ? "DMLC_ROLE=server" : "DMLC_ROLE=worker";
        env[k++] = port;
        if (role == SCHED)
            env[k++] = portfile;
        env[k++] = entries[i]; /* last: it may override DMLC_ROLE or the port */
        env[k] = NULL;
        snprintf(name, sizeof name, "case%d-%s", i, cases[i].var);
        if (role == WORKER) {
            const char *argv[] = {"create-error", "KVS_ECONFIG", cases[i].var, NULL};
            idx[i] = it_spawn(t, name, t->worker_bin, argv, env);
        } else {
            idx[i] = it_spawn(t, name, role == SCHED ? t->sched_bin : t->server_bin, NULL, env);
        }
    }
    for (int i = 0; i < n; i++) {
        char buf[128];
        const it_proc *p = &t->proc[idx[i]];
        int done = it_wait(t, idx[i], 10);
        /* The worker program exits 0 when kvs_create returned KVS_ECONFIG
         * and kvs_last_error() named the variable. */
        int want = role == WORKER ? 0 : 2;
        IT_CHECK(t, done, "%s=%s: still running after 10 s (the bad value was accepted?)", cases[i].var,
                 cases[i].value);
        if (!done)
            continue;
        IT_CHECK(t, it_exited_with(t, idx[i], want), "%s=%s: expected exit %d, got %s", cases[i].var,
                 cases[i].value, want, it_status_str(p, buf, sizeof buf));
        IT_CHECK(t, it_log_has(t, idx[i], cases[i].var, 0), "%s=%s: the output does not name %s",
                 cases[i].var, cases[i].value, cases[i].var);
    }
    IT_ASSERT(t, t->failures == 0, "%d check(s) failed", t->failures);
}

IT_TEST(bad_env_scheduler)
{
    static const bad_env cases[] = {
        {"DMLC_NUM_WORKER", "two"},      {"DMLC_NUM_SERVER", "-1"},     {"PS_VERBOSE", "9"},
        {"DMLC_ROLE", "boss"},           {"PS_HEARTBEAT_TIMEOUT", "fast"}, {"PS_HEARTBEAT_INTERVAL", "-1"},
        {"DMLC_PS_ROOT_PORT", "99999"},  {"KVS_START_TIMEOUT", "soon"},
    };
    run_bad_env(t, SCHED, cases, (int)(sizeof cases / sizeof cases[0]));
}

IT_TEST(bad_env_server)
{
    static const bad_env cases[] = {
        {"MXNET_KVSTORE_BIGARRAY_BOUND", "-5"}, {"MXNET_KVSTORE_REDUCTION_NTHREADS", "many"},
        {"DMLC_NUM_WORKER", "3x"},              {"DMLC_ROLE", "boss"},
        {"PS_VERBOSE", "9"},                    {"DMLC_SERVER_ID", "abc"},
        {"KVS_TREE_EFFORT", "10001"},           {"KVS_TOPOLOGY", "garbage"},
        {"MXNET_ENABLE_GPU_P2P", "7"},          {"MXNET_KVSTORE_TREE_LINK_USAGE_PENALTY", "2"},
        {"KVS_TREE_WEIGHTED", "2"},             {"KVS_TOPOLOGY", "@/nonexistent/topo.txt"},
    };
    run_bad_env(t, SERVER, cases, (int)(sizeof cases / sizeof cases[0]));
}

IT_TEST(bad_env_worker)
{
    static const bad_env cases[] = {
        {"DMLC_NUM_SERVER", "two"},          {"PS_VERBOSE", "9"},
        {"MXNET_KVSTORE_BIGARRAY_BOUND", "-5"}, {"DMLC_WORKER_ID", "abc"},
        {"DMLC_ROLE", "boss"},               {"PS_HEARTBEAT_TIMEOUT", "fast"},
        {"KVS_TREE_EFFORT", "10001"},        {"KVS_TOPOLOGY", "garbage"},
        {"MXNET_ENABLE_GPU_P2P", "7"},       {"MXNET_KVSTORE_TREE_ARRAY_BOUND", "0"},
        {"KVS_TREE_MAX_TREES", "300"},       {"KVS_TREE_MIN_SLICE", "big"},
        {"KVS_TOPOLOGY", "@/nonexistent/topo.txt"},
        {"KVS_LOCAL_AGG", "maybe"},          {"KVS_LOCAL_RANK", "-1"},
        {"KVS_LOCAL_SIZE", "0"},             {"LOCAL_RANK", "one"},
        {"LOCAL_WORLD_SIZE", "70000"},      {"KVS_LOCAL_AGG_MIN", "-1"},
        {"KVS_LOCAL_AGG_MIN", "2G"},
    };
    run_bad_env(t, WORKER, cases, (int)(sizeof cases / sizeof cases[0]));
}

/* ---- start-up deadline ---- */

static void dead_root_env(it_ctx *t)
{
    it_setenv(t, "DMLC_PS_ROOT_URI", "127.0.0.1");
    it_setenv(t, "DMLC_NODE_HOST", "127.0.0.1");
    it_setenv(t, "DMLC_PS_ROOT_PORT", "%d", it_dead_port(t));
    it_setenv(t, "DMLC_NUM_SERVER", "1");
    it_setenv(t, "DMLC_NUM_WORKER", "1");
    it_setenv(t, "KVS_START_TIMEOUT", "2");
}

/* proc idx exits non-zero (not by a signal) within 2 s + slack. */
static void expect_timeout_exit(it_ctx *t, int idx)
{
    char buf[128];
    const it_proc *p = &t->proc[idx];
    IT_ASSERT(t, it_wait(t, idx, 2 + 6), "%s: still running 8 s after start with KVS_START_TIMEOUT=2",
              p->name);
    IT_ASSERT(t, WIFEXITED(p->status) && WEXITSTATUS(p->status) != 0,
              "%s: expected a non-zero exit, got %s", p->name, it_status_str(p, buf, sizeof buf));
    char *log = it_read_log(t, idx);
    it_info(t, "%s: %s; output: %s", p->name, it_status_str(p, buf, sizeof buf), log);
    int empty = log[0] == '\0';
    free(log);
    IT_ASSERT(t, !empty, "%s: exited without a word", p->name);
}

IT_TEST(start_timeout_server)
{
    static const char *const env[] = {"DMLC_ROLE=server", NULL};
    dead_root_env(t);
    expect_timeout_exit(t, it_spawn(t, "server0", t->server_bin, NULL, env));
}

IT_TEST(start_timeout_worker)
{
    static const char *const argv[] = {"create-error", "KVS_ETIMEDOUT", NULL};
    static const char *const env[] = {"DMLC_ROLE=worker", NULL};
    dead_root_env(t);
    int w = it_spawn(t, "worker0", t->worker_bin, argv, env);
    it_expect_exit(t, w, 0, 2 + 6);
}

IT_TEST(start_timeout_scheduler)
{
    /* One server registers, the worker never comes: the scheduler gives up
     * after KVS_START_TIMEOUT, and the server does not wait forever either. */
    it_setenv(t, "KVS_START_TIMEOUT", "2");
    it_setenv(t, "PS_HEARTBEAT_INTERVAL", "0.2");
    it_setenv(t, "PS_HEARTBEAT_TIMEOUT", "2");
    it_setenv(t, "PS_VERBOSE", "1");
    int s = it_start_scheduler(t, 1, 1, NULL);
    int v = it_start_server(t, 0, NULL);
    expect_timeout_exit(t, s);
    char buf[128];
    IT_ASSERT(t, it_wait(t, v, 12), "server0 still running 12 s after the scheduler gave up");
    IT_ASSERT(t, !WIFSIGNALED(t->proc[v].status), "server0: %s",
              it_status_str(&t->proc[v], buf, sizeof buf));
}
