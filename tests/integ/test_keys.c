/*
 * test_keys.c - CURVE with per-node key files (KVS_CURVE_SERVER_KEY,
 * KVS_CURVE_CLIENT_KEY, KVS_CURVE_AUTHORIZED) made by kvs-keygen: a 2x2 job
 * sums exactly; a worker whose key is not authorized is refused at once
 * with KVS_EAUTH and the job goes on; bad key files stop a daemon with
 * exit 2 naming the variable.
 */
#include "tests.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* kvs-keygen --role role NAME in the test directory; returns the line it
 * printed for KVS_CURVE_AUTHORIZED (malloc'd; "" for a listener key). */
static char *keygen(it_ctx *t, const char *role, const char *name)
{
    char bin[PATH_MAX + 16], path[PATH_MAX + 64], logname[64];
    snprintf(bin, sizeof bin, "%s", t->sched_bin);
    char *slash = strrchr(bin, '/');
    IT_ASSERT(t, slash != NULL, "no build directory in %s", bin);
    snprintf(slash + 1, sizeof bin - (size_t)(slash + 1 - bin), "kvs-keygen");
    snprintf(path, sizeof path, "%s/%s", t->dir, name);
    snprintf(logname, sizeof logname, "keygen-%s", name);
    int k = it_spawn(t, logname, bin, (const char *const[]){"--role", role, path, NULL}, NULL);
    it_expect_exit(t, k, 0, 10);
    char *log = it_read_log(t, k);
    IT_ASSERT(t, log != NULL, "no output from kvs-keygen");
    char *nl = strchr(log, '\n');
    if (nl)
        *nl = '\0';
    return log;
}

static void env_path(char *out, size_t len, it_ctx *t, const char *var, const char *file)
{
    snprintf(out, len, "%s=%s/%s", var, t->dir, file);
}

IT_TEST(curve_keyfiles_2x2)
{
    static const char *const sum[] = {"sum", "--split", "--rounds", "3", NULL};
    static const char *const eauth[] = {"create-error", "KVS_EAUTH", "KVS_CURVE_AUTHORIZED",
                                        NULL};
    char auth_text[4096] = "# the keys of this job\n";
    char srv_key[PATH_MAX], pub_key[PATH_MAX], authz[PATH_MAX], client[6][PATH_MAX];
    const char *names[6] = {"server0", "server1", "worker0", "worker1", "intruder", NULL};
    it_setenv(t, "MXNET_KVSTORE_BIGARRAY_BOUND", "1000");
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_setenv(t, "PS_VERBOSE", "1");
    free(keygen(t, "listener", "listener"));
    for (int i = 0; names[i]; i++) {
        char *line = keygen(t, i < 2 ? "server" : "worker", names[i]);
        IT_ASSERT(t, strncmp(line, i < 2 ? "server " : "worker ", 7) == 0 && strlen(line) > 47,
                  "kvs-keygen printed '%s'", line);
        if (i != 4) { /* the intruder's key is not authorized */
            strncat(auth_text, line, sizeof auth_text - strlen(auth_text) - 2);
            strcat(auth_text, "\n");
        }
        free(line);
        snprintf(client[i], sizeof client[i], "KVS_CURVE_CLIENT_KEY=%s/%s.key_secret", t->dir,
                 names[i]);
    }
    it_write_file(t, "authorized", auth_text);
    env_path(srv_key, sizeof srv_key, t, "KVS_CURVE_SERVER_KEY", "listener.key_secret");
    env_path(pub_key, sizeof pub_key, t, "KVS_CURVE_SERVER_KEY", "listener.key");
    env_path(authz, sizeof authz, t, "KVS_CURVE_AUTHORIZED", "authorized");

    /* bad key files: exit 2 naming the variable */
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/listener.key_secret", t->dir);
    IT_ASSERT(t, chmod(path, 0644) == 0, "chmod: %s", strerror(errno));
    int bad = it_spawn(t, "sched-open-key", t->sched_bin, NULL,
                       (const char *const[]){"DMLC_ROLE=scheduler", "DMLC_PS_ROOT_URI=127.0.0.1",
                                             "DMLC_PS_ROOT_PORT=0", "DMLC_NUM_SERVER=2",
                                             "DMLC_NUM_WORKER=2", srv_key, authz, NULL});
    it_expect_exit(t, bad, 2, 10);
    IT_ASSERT(t, it_log_has(t, bad, "KVS_CURVE_SERVER_KEY", 0) &&
                     it_log_has(t, bad, "chmod 600", 0), "the scheduler did not name the mode");
    IT_ASSERT(t, chmod(path, 0600) == 0, "chmod: %s", strerror(errno));
    int noauth = it_spawn(t, "sched-no-authorized", t->sched_bin, NULL,
                          (const char *const[]){"DMLC_ROLE=scheduler",
                                                "DMLC_PS_ROOT_URI=127.0.0.1",
                                                "DMLC_PS_ROOT_PORT=0", "DMLC_NUM_SERVER=2",
                                                "DMLC_NUM_WORKER=2", srv_key, NULL});
    it_expect_exit(t, noauth, 2, 10);
    IT_ASSERT(t, it_log_has(t, noauth, "KVS_CURVE_AUTHORIZED is not set", 0),
              "the scheduler did not ask for KVS_CURVE_AUTHORIZED");

    it_start_scheduler(t, 2, 2, (const char *const[]){srv_key, authz, NULL});
    for (int i = 0; i < 2; i++)
        it_start_server(t, i, (const char *const[]){srv_key, authz, client[i], NULL});
    /* a worker with a key the job does not know: refused at once */
    double t0 = it_now();
    int in = it_spawn(t, "intruder", t->worker_bin, eauth,
                      (const char *const[]){"DMLC_ROLE=worker", "DMLC_WORKER_ID", pub_key,
                                            client[4], NULL});
    it_expect_exit(t, in, 0, 10);
    IT_ASSERT(t, it_now() - t0 < 10 * it_slow, "the refusal took %.1f s", it_now() - t0);
    IT_ASSERT(t, it_log_has(t, t->sched, "client key not in KVS_CURVE_AUTHORIZED", 0),
              "the scheduler did not log the unknown key");
    for (int i = 0; i < 2; i++)
        it_start_worker(t, i, sum, (const char *const[]){pub_key, client[2 + i], NULL});
    it_expect_job_ok(t, 60);
    IT_ASSERT(t, it_log_has(t, t->sched, "security=curve (from KVS_CURVE_* key files)", 0),
              "the scheduler did not run curve with key files");
    IT_ASSERT(t, it_log_has(t, t->server[1], "security=curve", 0), "server1 did not run curve");
}
