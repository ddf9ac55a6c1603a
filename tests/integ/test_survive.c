/*
 * test_survive.c - the settings of jobs that survive deaths (KVS_REPLICAS,
 * KVS_ELASTIC, KVS_MIN_WORKERS, KVS_MAX_WORKERS, KVS_SCHEDULER_GRACE): each impossible
 * combination, and each possible one this build does not honour (replicas), stops the
 * scheduler and a server with exit 2 and fails a worker's kvs_create with
 * KVS_ECONFIG, naming the variable, the value and what is allowed.
 */
#include "tests.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

typedef struct survive_case {
    const char *role;       /* scheduler, server, worker */
    const char *env[4];     /* NAME=value, NULL-terminated */
    const char *want[2];    /* in the output: the variable and what is allowed */
} survive_case;

IT_TEST(bad_survive_settings)
{
    static const survive_case cases[] = {
        {"scheduler", {"KVS_REPLICAS=1", NULL}, {"KVS_REPLICAS='1' with DMLC_NUM_SERVER=1", "[0, 0]"}},
        {"server", {"KVS_REPLICAS=1", NULL}, {"KVS_REPLICAS='1' with DMLC_NUM_SERVER=1", "[0, 0]"}},
        {"worker", {"KVS_REPLICAS=1", NULL}, {"KVS_REPLICAS='1' with DMLC_NUM_SERVER=1", "[0, 0]"}},
        {"scheduler", {"KVS_ELASTIC=1", "KVS_MIN_WORKERS=3", "KVS_MAX_WORKERS=2", NULL},
         {"KVS_MIN_WORKERS='3' is greater than KVS_MAX_WORKERS='2'", "MIN <= MAX"}},
        {"server", {"KVS_MIN_WORKERS=2", NULL}, {"KVS_MIN_WORKERS='2' needs KVS_ELASTIC=1", NULL}},
        {"worker", {"KVS_MAX_WORKERS=4", NULL}, {"KVS_MAX_WORKERS='4' needs KVS_ELASTIC=1", NULL}},
        {"scheduler", {"KVS_ELASTIC=1", "KVS_MAX_WORKERS=1", NULL},
         {"KVS_MAX_WORKERS='1' with DMLC_NUM_WORKER=2", "[2, 65536]"}},
        {"worker", {"KVS_ELASTIC=1", "KVS_MIN_WORKERS=3", NULL},
         {"KVS_MIN_WORKERS='3' with DMLC_NUM_WORKER=2", "[1, 2]"}},
        /* possible, not built: refused, never ignored */
        {"scheduler", {"KVS_REPLICAS=1", "DMLC_NUM_SERVER=2", "DMLC_PS_VAN_TYPE=p3", NULL},
         {"KVS_REPLICAS='1' with DMLC_PS_VAN_TYPE=p3", "not built"}},
        {"server", {"KVS_ELASTIC=1", "KVS_MAX_WORKERS=1", NULL},
         {"KVS_MAX_WORKERS='1' with DMLC_NUM_WORKER=2", "[2, 65536]"}},
        {"worker", {"KVS_REPLICAS=1", "DMLC_NUM_SERVER=2", "DMLC_PS_VAN_TYPE=p3", NULL},
         {"KVS_REPLICAS='1' with DMLC_PS_VAN_TYPE=p3", "not built"}},
        {"server", {"KVS_SCHEDULER_GRACE=30", "KVS_REPLICAS=1", "DMLC_NUM_SERVER=2", NULL},
         {"KVS_SCHEDULER_GRACE='30' with KVS_REPLICAS=1", "KVS_SCHEDULER_GRACE=0"}},
        {"worker", {"KVS_SCHEDULER_GRACE=5", "KVS_ELASTIC=1", NULL},
         {"KVS_SCHEDULER_GRACE='5' with KVS_ELASTIC=1", NULL}},
        {"server", {"KVS_SCHEDULER_GRACE=-1", NULL}, {"KVS_SCHEDULER_GRACE", NULL}},
    };
    enum { N = (int)(sizeof cases / sizeof cases[0]) };
    int idx[N];
    char port[64], portfile[PATH_MAX + 32];
    snprintf(port, sizeof port, "DMLC_PS_ROOT_PORT=%d", it_dead_port(t));
    snprintf(portfile, sizeof portfile, "KVS_PORT_FILE=%s/scheduler.port", t->dir);
    it_setenv(t, "DMLC_PS_ROOT_URI", "127.0.0.1");
    it_setenv(t, "DMLC_NODE_HOST", "127.0.0.1");
    it_setenv(t, "DMLC_NUM_SERVER", "1");
    it_setenv(t, "DMLC_NUM_WORKER", "2");
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    for (int i = 0; i < N; i++) {
        const survive_case *c = &cases[i];
        const char *env[8];
        char role[32], name[IT_NAME_MAX];
        int k = 0;
        bool sched = strcmp(c->role, "scheduler") == 0;
        snprintf(role, sizeof role, "DMLC_ROLE=%s", c->role);
        env[k++] = role;
        env[k++] = sched ? "DMLC_PS_ROOT_PORT=0" : port;
        if (sched)
            env[k++] = portfile;
        for (int j = 0; c->env[j] != NULL; j++)
            env[k++] = c->env[j];
        env[k] = NULL;
        snprintf(name, sizeof name, "case%d-%s", i, c->role);
        if (strcmp(c->role, "worker") == 0) {
            const char *argv[] = {"create-error", "KVS_ECONFIG", c->want[0], NULL};
            idx[i] = it_spawn(t, name, t->worker_bin, argv, env);
        } else {
            idx[i] = it_spawn(t, name, sched ? t->sched_bin : t->server_bin, NULL, env);
        }
    }
    for (int i = 0; i < N; i++) {
        const survive_case *c = &cases[i];
        char buf[128];
        /* the worker program exits 0 when kvs_create returned KVS_ECONFIG
         * and kvs_last_error() held want[0] */
        int want = strcmp(c->role, "worker") == 0 ? 0 : 2;
        int done = it_wait(t, idx[i], 10);
        IT_CHECK(t, done, "case %d (%s, %s): still running after 10 s (accepted?)", i, c->role,
                 c->env[0]);
        if (!done)
            continue;
        IT_CHECK(t, it_exited_with(t, idx[i], want), "case %d (%s, %s): expected exit %d, got %s",
                 i, c->role, c->env[0], want, it_status_str(&t->proc[idx[i]], buf, sizeof buf));
        for (int j = 0; j < 2; j++)
            IT_CHECK(t, c->want[j] == NULL || it_log_has(t, idx[i], c->want[j], 0),
                     "case %d (%s, %s): the output does not say \"%s\"", i, c->role, c->env[0],
                     c->want[j]);
    }
    IT_ASSERT(t, t->failures == 0, "%d check(s) failed", t->failures);
}
