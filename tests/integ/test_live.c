/*
 * test_live.c - liveness and mistakes (issue "never hang, never lie"): a
 * worker that leaves while others wait for its push, a mismatched job size,
 * start-up that cannot complete, an unresolvable scheduler name, counts too
 * big for a message.  Each ends in the right error on every process, fast.
 * (Dead peers and sticky failure: test_failure.c; cut links between hosts:
 * tests/netns/.)
 */
#include "tests.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static void live_env(it_ctx *t)
{
    it_setenv(t, "MXNET_KVSTORE_BIGARRAY_BOUND", "1000");
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_setenv(t, "PS_HEARTBEAT_INTERVAL", "1");
    it_setenv(t, "PS_HEARTBEAT_TIMEOUT", "5");
    it_setenv(t, "PS_VERBOSE", "1");
}

/* proc idx exits with code (-1: any non-zero) within secs of t0; returns how
 * long it took. */
static double exit_within(it_ctx *t, int idx, int code, double t0, double secs)
{
    char buf[128];
    double left = t0 + secs * it_slow - it_now();
    IT_ASSERT(t, it_wait(t, idx, (left > 0 ? left : 0) / it_slow),
              "%s still running %.1f s after the event", t->proc[idx].name, secs);
    it_proc *p = &t->proc[idx];
    IT_ASSERT(t, WIFEXITED(p->status) && (code < 0 ? WEXITSTATUS(p->status) != 0
                                                   : WEXITSTATUS(p->status) == code),
              "%s: expected exit %d, got %s", p->name, code, it_status_str(p, buf, sizeof buf));
    it_info(t, "%s: %s, %.2f s after the event", p->name, it_status_str(p, buf, sizeof buf),
            p->t_end - t0);
    return p->t_end - t0;
}

/* Worker 0 calls kvs_close before kvs_init: the other workers' kvs_init
 * fails at once (KVS_EPEERDEAD naming worker 0) instead of waiting forever
 * for worker 0's values; the daemons end normally. */
IT_TEST(leave_before_init_2x3)
{
    static const char *const argv[] = {"early-leave", NULL};
    live_env(t);
    it_start_job(t, 2, 3, argv);
    it_expect_job_ok(t, 30);
}

/* Worker 1 calls kvs_close while worker 0 waits for its push: worker 0's
 * wait fails at once naming worker 1; the job then ends normally. */
IT_TEST(leave_while_waiting_2x2)
{
    static const char *const waiter[] = {"peer-dead", "--block", "pull", "--left", NULL};
    static const char *const leaver[] = {"leave", NULL};
    live_env(t);
    it_start_scheduler(t, 2, 2, NULL);
    it_start_server(t, 0, NULL);
    it_start_server(t, 1, NULL);
    int w0 = it_start_worker(t, 0, waiter, NULL);
    int w1 = it_start_worker(t, 1, leaver, NULL);
    IT_ASSERT(t, it_wait_file(t, "ready-w0", 30, w0), "worker0 not ready within 30 s");
    IT_ASSERT(t, it_wait_file(t, "ready-w1", 30, w1), "worker1 not ready within 30 s");
    char path[1100];
    snprintf(path, sizeof path, "%s/ready-w1", t->dir);
    char *s = it_slurp(path, NULL);
    IT_ASSERT(t, s != NULL, "cannot read %s", path);
    char text[32];
    snprintf(text, sizeof text, "worker %d\n", atoi(s));
    free(s);
    it_write_file(t, "expect-dead", text);
    double t0 = it_now();
    it_write_file(t, "go", "1\n");
    exit_within(t, w1, 0, t0, 5);
    /* well under the 5 s heartbeat timeout: the departure is announced */
    double dt = exit_within(t, w0, 0, t0, 3);
    IT_CHECK(t, dt < 3, "worker0 took %.2f s", dt);
    exit_within(t, t->sched, 0, t0, 10);
    exit_within(t, t->server[0], 0, t0, 10);
    exit_within(t, t->server[1], 0, t0, 10);
}

/* One worker says DMLC_NUM_WORKER=3 in a job of 2: it is refused with both
 * sizes, and every other node hears the same cause within a second or two. */
IT_TEST(size_mismatch_1x2)
{
    static const char *const good[] = {"create-error", "KVS_ECONFIG", "job size mismatch", NULL};
    static const char *const odd[] = {
        "create-error", "KVS_ECONFIG",
        "job size mismatch: you say 3 workers/1 servers, the job has 2 workers/1 servers", NULL};
    static const char *const env3[] = {"DMLC_NUM_WORKER=3", NULL};
    live_env(t);
    it_start_scheduler(t, 1, 2, NULL);
    int v = it_start_server(t, 0, NULL);
    int w0 = it_start_worker(t, 0, good, NULL);
    double t0 = it_now();
    int w1 = it_start_worker(t, 1, odd, env3);
    exit_within(t, w1, 0, t0, 3);
    exit_within(t, w0, 0, t0, 3);
    exit_within(t, v, -1, t0, 3); /* 1: the job ended; 2: refused (registered after) */
    IT_CHECK(t, it_log_has(t, v, "job size mismatch", 0), "server0 does not name the cause");
    exit_within(t, t->sched, 1, t0, 10);
}

/* One worker of two never comes: the one that registered gets KVS_ETIMEDOUT
 * (not KVS_EPEERDEAD) with what was missing. */
IT_TEST(start_timeout_registered_1x2)
{
    static const char *const argv[] = {"create-error", "KVS_ETIMEDOUT", "KVS_START_TIMEOUT",
                                       NULL};
    live_env(t);
    it_setenv(t, "KVS_START_TIMEOUT", "2");
    it_start_scheduler(t, 1, 2, NULL);
    int v = it_start_server(t, 0, NULL);
    double t0 = it_now();
    int w0 = it_start_worker(t, 0, argv, NULL);
    exit_within(t, w0, 0, t0, 8);
    exit_within(t, v, 1, t0, 8);
    exit_within(t, t->sched, 1, t0, 8);
}

/* A scheduler name that does not resolve fails at once, on a worker and a
 * server alike, saying so. */
IT_TEST(unresolvable_root)
{
    static const char *const argv[] = {"create-error", "KVS_ENET", "cannot resolve", NULL};
    static const char *const wenv[] = {"DMLC_ROLE=worker", NULL};
    static const char *const senv[] = {"DMLC_ROLE=server", NULL};
    it_setenv(t, "DMLC_PS_ROOT_URI", "no-such-host.invalid");
    it_setenv(t, "DMLC_NODE_HOST", "127.0.0.1");
    it_setenv(t, "DMLC_PS_ROOT_PORT", "9");
    it_setenv(t, "DMLC_NUM_SERVER", "1");
    it_setenv(t, "DMLC_NUM_WORKER", "1");
    it_setenv(t, "KVS_START_TIMEOUT", "60");
    double t0 = it_now();
    int w = it_spawn(t, "worker0", t->worker_bin, argv, wenv);
    int v = it_spawn(t, "server0", t->server_bin, NULL, senv);
    exit_within(t, w, 0, t0, 5);
    exit_within(t, v, 1, t0, 5);
    IT_CHECK(t, it_log_has(t, v, "cannot resolve DMLC_PS_ROOT_URI='no-such-host.invalid'", 0),
             "server0 does not say it cannot resolve the name");
}

/* While the scheduler does not answer, a line every 10 s at the default
 * verbosity; then KVS_ETIMEDOUT. */
IT_TEST(start_waiting_lines)
{
    static const char *const argv[] = {"create-error", "KVS_ETIMEDOUT", NULL};
    static const char *const env[] = {"DMLC_ROLE=worker", NULL};
    it_setenv(t, "DMLC_PS_ROOT_URI", "127.0.0.1");
    it_setenv(t, "DMLC_NODE_HOST", "127.0.0.1");
    it_setenv(t, "DMLC_PS_ROOT_PORT", "%d", it_dead_port(t));
    it_setenv(t, "DMLC_NUM_SERVER", "1");
    it_setenv(t, "DMLC_NUM_WORKER", "1");
    it_setenv(t, "KVS_START_TIMEOUT", "11");
    double t0 = it_now();
    int w = it_spawn(t, "worker0", t->worker_bin, argv, env);
    exit_within(t, w, 0, t0, 11 + 6);
    IT_CHECK(t, it_log_has(t, w, "still waiting for the scheduler at tcp://127.0.0.1:", 0),
             "no 'still waiting' line within 11 s at PS_VERBOSE=0");
}

/* Counts whose byte size overflows or exceeds KVS_MAX_MESSAGE: KVS_ETOOBIG at
 * the call, on a dist store and the local one. */
IT_TEST(too_big_1x1)
{
    static const char *const argv[] = {"too-big", NULL};
    live_env(t);
    it_start_job(t, 1, 1, argv);
    it_expect_job_ok(t, 30);
}

IT_TEST(too_big_local)
{
    static const char *const argv[] = {"too-big", "--type", "local", NULL};
    int w = it_spawn(t, "worker0", t->worker_bin, argv, NULL);
    it_expect_exit(t, w, 0, 30);
}

/* The scheduler is SIGKILLed while worker 0 waits for 24 pulls of 64 KiB
 * keys (two parts of 32 KiB each, one per server) that worker 1 (blocked
 * in a barrier) never pushes for.  With KVS_CMA=1 the pushes and pulls go
 * by reference (same host: the server writes the pulled values into worker
 * 0's memory itself), with KVS_CMA=0 through the socket; either way every
 * call fails within 3 s, not at PS_HEARTBEAT_TIMEOUT + 2 s (the worker keeps
 * a by-reference pull until its server answers or is gone: the servers
 * answer every waiting request when they lose the scheduler). */
static void kill_scheduler_pulls(it_ctx *t, int cma)
{
    static const char *const pulls[] = {"peer-dead", "--block", "pulls", "--keys", "24", NULL};
    static const char *const barrier[] = {"peer-dead", "--block", "barrier", "--keys", "24",
                                          NULL};
    live_env(t);
    it_setenv(t, "KVS_CMA", "%d", cma);
    it_start_scheduler(t, 2, 2, NULL);
    it_start_server(t, 0, NULL);
    it_start_server(t, 1, NULL);
    it_start_worker(t, 0, pulls, NULL);
    it_start_worker(t, 1, barrier, NULL);
    for (int i = 0; i < 2; i++) {
        char name[32];
        snprintf(name, sizeof name, "ready-w%d", i);
        IT_ASSERT(t, it_wait_file(t, name, 30, t->worker[i]), "worker%d not ready in 30 s", i);
    }
    IT_ASSERT(t, !!it_log_has(t, t->worker[0], "copies our memory directly", 0) == !!cma,
              "worker0 %s directly with KVS_CMA=%d", cma ? "does not copy" : "copies", cma);
    it_write_file(t, "expect-dead", "scheduler\n");
    double t0 = it_now();
    it_kill(t, t->sched, SIGKILL);
    IT_ASSERT(t, it_wait(t, t->sched, 5), "the scheduler did not die of SIGKILL");
    it_write_file(t, "killed", "1\n");
    for (int i = 0; i < 2; i++)
        exit_within(t, t->worker[i], 0, t0, 3);
    IT_CHECK(t, it_log_has(t, t->worker[0], "the 24 waits returned within", 0),
             "worker0 did not wait for its 24 pulls");
}

IT_TEST(kill_scheduler_direct_2x2)
{
    kill_scheduler_pulls(t, 1);
}

IT_TEST(kill_scheduler_socket_2x2)
{
    kill_scheduler_pulls(t, 0);
}

/* The scheduler is SIGKILLed: its connections close, and every worker and
 * server knows within a second (not after PS_HEARTBEAT_TIMEOUT=5 s). */
IT_TEST(kill_scheduler_2x2)
{
    static const char *const barrier[] = {"peer-dead", "--block", "barrier", NULL};
    static const char *const late[] = {"peer-dead", "--block", "late", NULL};
    live_env(t);
    it_start_scheduler(t, 2, 2, NULL);
    it_start_server(t, 0, NULL);
    it_start_server(t, 1, NULL);
    it_start_worker(t, 0, barrier, NULL); /* blocked in a barrier worker1 never enters */
    it_start_worker(t, 1, late, NULL);    /* calls only after the kill */
    for (int i = 0; i < 2; i++) {
        char name[32];
        snprintf(name, sizeof name, "ready-w%d", i);
        IT_ASSERT(t, it_wait_file(t, name, 30, t->worker[i]), "worker%d not ready in 30 s", i);
    }
    it_write_file(t, "expect-dead", "scheduler\n");
    double t0 = it_now();
    it_kill(t, t->sched, SIGKILL);
    IT_ASSERT(t, it_wait(t, t->sched, 5), "the scheduler did not die of SIGKILL");
    it_write_file(t, "killed", "1\n");
    for (int i = 0; i < 2; i++)
        exit_within(t, t->worker[i], 0, t0, 3);
    for (int i = 0; i < 2; i++) {
        exit_within(t, t->server[i], 1, t0, 3);
        IT_CHECK(t, it_log_has(t, t->server[i], "closed the connection", 0),
                 "server%d does not say the scheduler's connection closed", i);
    }
}
