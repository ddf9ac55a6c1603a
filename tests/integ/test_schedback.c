/*
 * test_schedback.c - a job that outlives its scheduler
 * (KVS_SCHEDULER_GRACE), run by kvs-replworker (replworker.c): 2 workers x
 * 2 servers train over 40 keys (fused, middle and split ones) with a
 * barrier every 100 rounds, and the scheduler is SIGKILLed.
 *
 * - Restarted after the workers did 60 more rounds without it: the nodes
 *   rejoin, the workers waiting in a barrier pass it, the job completes,
 *   every round's sum is exact (checked in the workers) and the final
 *   values equal a run without the kill, byte for byte.
 * - The same with lamb on the servers, whose split keys' norms pass the
 *   scheduler: those rounds wait for the restarted one.
 * - Never restarted: every node fails once the grace has passed, saying so.
 * - Restarted after a worker died meanwhile: the restarted scheduler waits
 *   PS_HEARTBEAT_TIMEOUT for it, then ends the job naming it; nothing hangs.
 */
#include "tests.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HB_TIMEOUT_S 2
#define ROUNDS "300"

static void back_env(it_ctx *t, const char *grace)
{
    it_use_worker(t, "kvs-replworker");
    it_setenv(t, "MXNET_KVSTORE_BIGARRAY_BOUND", "1000");
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_setenv(t, "PS_HEARTBEAT_INTERVAL", "0.2");
    it_setenv(t, "PS_HEARTBEAT_TIMEOUT", "%d", HB_TIMEOUT_S);
    it_setenv(t, "PS_VERBOSE", "1");
    it_setenv(t, "KVS_SCHEDULER_GRACE", "%s", grace);
}

/* A fresh 2x2 job (after an earlier one ended: a new scheduler port) whose
 * workers run argv. */
static void start_2x2(it_ctx *t, const char *const *argv)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/scheduler.port", t->dir);
    unlink(path);
    t->sched = -1;
    t->nserver = t->nworker = 0;
    it_start_scheduler(t, 2, 2, NULL);
    for (int i = 0; i < 2; i++)
        it_start_server(t, i, NULL);
    for (int i = 0; i < 2; i++)
        it_start_worker(t, i, argv, NULL);
}

/* SIGKILL the scheduler once worker 0 passed round 20. */
static double kill_scheduler(it_ctx *t)
{
    IT_ASSERT(t, it_wait_file(t, "mark-w0", 60, t->worker[0]),
              "worker 0 did not reach round 20 within 60 s");
    it_kill(t, t->sched, SIGKILL);
    double t0 = it_now();
    IT_ASSERT(t, it_wait(t, t->sched, 5), "the scheduler did not die of SIGKILL");
    return t0;
}

/* A scheduler on the job's port again (DMLC_PS_ROOT_PORT is in the job's
 * environment since the first one started). */
static void restart_scheduler(it_ctx *t)
{
    static const char *const env[] = {"DMLC_ROLE=scheduler", NULL};
    t->sched = it_spawn(t, "scheduler2", t->sched_bin, NULL, env);
}

/* Once every node goes on without the scheduler: start it again, the job
 * ends well, and the final values ("back") equal the run without the kill
 * ("plain"). */
static void restart_and_finish(it_ctx *t)
{
    for (int w = 0; w < 2; w++)
        IT_CHECK(t, it_wait_log(t, t->worker[w], "going on without it", 10),
                 "worker %d does not say it goes on without the scheduler", w);
    for (int i = 0; i < 2; i++)
        IT_CHECK(t, it_wait_log(t, t->server[i], "going on without it", 10),
                 "server %d does not say it goes on without the scheduler", i);
    restart_scheduler(t);
    for (int w = 0; w < 2; w++)
        it_expect_exit(t, t->worker[w], 0, 60);
    it_expect_exit(t, t->sched, 0, 15);
    for (int i = 0; i < 2; i++)
        it_expect_exit(t, t->server[i], 0, 15);
    IT_CHECK(t, it_log_has(t, t->sched, "2 servers and 2 workers rejoined", 0),
             "the restarted scheduler does not say every node rejoined");
    for (int w = 0; w < 2; w++)
        IT_CHECK(t, it_log_has(t, t->worker[w], "back with the scheduler restarted", 0),
                 "worker %d does not say it is back", w);
    it_same_values(t, 2, "plain", "back");
}

IT_TEST(sched_restart_2x2)
{
    const char *plain[] = {"train", "--rounds", ROUNDS, "--barrier-every", "100",
                           "--max-stall", "5", "--out", "plain", NULL};
    const char *back[] = {"train", "--rounds", ROUNDS, "--barrier-every", "100",
                          "--max-stall", "5", "--mark", "20", "--mark2", "80",
                          "--out", "back", NULL};
    back_env(t, "60");
    start_2x2(t, plain);
    it_expect_job_ok(t, 120);
    start_2x2(t, back);
    double t0 = kill_scheduler(t);
    /* rounds 21..80 need no scheduler: both workers do them without one */
    for (int w = 0; w < 2; w++) {
        char name[32];
        snprintf(name, sizeof name, "mark2-w%d", w);
        IT_ASSERT(t, it_wait_file(t, name, 60, t->worker[w]),
                  "worker %d did not reach round 80 without a scheduler", w);
    }
    it_info(t, "both workers passed round 80 %.2f s after the kill", it_now() - t0);
    restart_and_finish(t);
}

/* Servers that update with lamb exchange the norms of split keys through
 * the scheduler: its rounds wait while it is gone, and each server sends
 * its part's norms again to the restarted one.  The final weights equal a
 * run without the kill, byte for byte. */
IT_TEST(sched_restart_lamb_2x2)
{
    const char *spec = "lamb learning_rate=0.01 wd=0.01";
    const char *plain[] = {"train", "--rounds", "120", "--barrier-every", "50", "--spec", spec,
                           "--out", "plain", NULL};
    const char *back[] = {"train", "--rounds", "120", "--barrier-every", "50", "--spec", spec,
                          "--mark", "20", "--out", "back", NULL};
    back_env(t, "60");
    start_2x2(t, plain);
    it_expect_job_ok(t, 120);
    start_2x2(t, back);
    kill_scheduler(t);
    restart_and_finish(t);
}

IT_TEST(sched_gone_for_good_2x2)
{
    const char *argv[] = {"train", "--rounds", "1000000", "--mark", "20", NULL};
    back_env(t, "3");
    start_2x2(t, argv);
    double t0 = kill_scheduler(t);
    for (int w = 0; w < 2; w++)
        it_expect_exit(t, t->worker[w], 1, 3 + 5);
    for (int i = 0; i < 2; i++)
        it_expect_exit(t, t->server[i], 1, 5);
    for (int w = 0; w < 2; w++) {
        double dt = t->proc[t->worker[w]].t_end - t0;
        IT_CHECK(t, dt >= 3 && dt < 3 + 4 * it_slow, "worker %d ended %.2f s after the kill, "
                 "expected the grace (3 s) and at most %.0f s more", w, dt, 4 * it_slow);
        /* its own grace, or a server's a moment before */
        IT_CHECK(t, it_log_has(t, t->worker[w], "no scheduler took us back within 3.0 s", 0) ||
                        it_log_has(t, t->worker[w], "no scheduler took the job back within "
                                   "KVS_SCHEDULER_GRACE=3 s", 0),
                 "worker %d does not say the grace ran out", w);
    }
    IT_CHECK(t, it_log_has(t, t->server[0], "no scheduler took us back", 0),
             "server 0 does not say the grace ran out");
}

IT_TEST(sched_restart_worker_died_2x2)
{
    const char *argv[] = {"train", "--rounds", "1000000", "--mark", "20", NULL};
    back_env(t, "60");
    start_2x2(t, argv);
    kill_scheduler(t);
    it_kill(t, t->worker[1], SIGKILL);
    IT_ASSERT(t, it_wait(t, t->worker[1], 5), "worker 1 did not die of SIGKILL");
    restart_scheduler(t);
    double t0 = it_now();
    it_expect_exit(t, t->sched, 1, HB_TIMEOUT_S + 10);
    it_expect_exit(t, t->worker[0], 1, 10);
    for (int i = 0; i < 2; i++)
        it_expect_exit(t, t->server[i], 1, 10);
    it_info(t, "the job ended %.2f s after the restart",
            t->proc[t->worker[0]].t_end - t0);
    IT_CHECK(t, it_log_has(t, t->sched, "worker 1 did not come back", 0),
             "the restarted scheduler does not name worker 1");
    IT_CHECK(t, it_log_has(t, t->worker[0], "worker 1 did not come back", 0),
             "worker 0 does not say why the job ended");
}
