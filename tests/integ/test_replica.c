/*
 * test_replica.c - replicated servers (KVS_REPLICAS=1), run by
 * kvs-replworker (replworker.c): 2 workers x 3 servers train for many
 * rounds over 40 keys (fused, middle and split ones) while one server is
 * SIGKILLed at a random round (with the workers' local group, and without
 * it: KVS_LOCAL_AGG=0).  The job completes: every round's pulled
 * sums are exact, bit for bit (checked in the workers), no round stalls
 * longer than PS_HEARTBEAT_TIMEOUT + 2 s, every survivor exits 0, and the
 * final values equal those of a run without the kill, byte for byte.  The
 * same with a server optimizer (Adam), with the backup killed before its
 * owner (after the owner's keys were copied to a new backup), and two
 * servers killed together (an owner and its backup: the job ends with
 * KVS_EPEERDEAD naming the lost key range, nothing hangs), the heir killed
 * while it takes over (the job either goes on, exact, or ends so); and a
 * checkpoint of a replicated job loaded by a new one, which then loses a
 * server and still ends with the same bytes as the job that never stopped.
 */
#include "tests.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HB_TIMEOUT "2"
#define MAX_STALL "4" /* PS_HEARTBEAT_TIMEOUT + 2 s */
#define ROUNDS 150

/* The job run_job and kill_one make: ROUNDS rounds of 40 keys (0.7 MiB in
 * all), or the long one (long_job: 500 rounds of 64 MiB over the 40 keys,
 * make test-long); tmo: seconds a phase of it may take. */
static int rounds = ROUNDS;
static const char *scale = "1";
static double tmo = 60;

/* Make this a long test: skipped unless KVS_INTEG_LONG=1 (make test-long). */
static void long_job(it_ctx *t)
{
    const char *e = getenv("KVS_INTEG_LONG");
    if (e == NULL || strcmp(e, "1") != 0)
        it_skip(t, "a long test: make test-long (KVS_INTEG_LONG=1) runs it");
    rounds = 500;
    scale = "91";
    tmo = 900;
}

static void repl_env(it_ctx *t)
{
    it_use_worker(t, "kvs-replworker");
    it_setenv(t, "MXNET_KVSTORE_BIGARRAY_BOUND", "1000");
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_setenv(t, "PS_HEARTBEAT_INTERVAL", "0.2");
    it_setenv(t, "PS_HEARTBEAT_TIMEOUT", HB_TIMEOUT);
    it_setenv(t, "PS_VERBOSE", "1");
    it_setenv(t, "KVS_REPLICAS", "1");
}

/* A fresh job in t (after an earlier one ended): a new scheduler port. */
static void reset_job(it_ctx *t)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/scheduler.port", t->dir);
    unlink(path);
    t->sched = -1;
    t->nserver = t->nworker = 0;
}

/* A fresh 2x3 job whose workers run argv. */
static void start_2x3(it_ctx *t, const char *const *argv)
{
    reset_job(t);
    it_start_scheduler(t, 3, 2, NULL);
    for (int i = 0; i < 3; i++)
        it_start_server(t, i, NULL);
    for (int i = 0; i < 2; i++)
        it_start_worker(t, i, argv, NULL);
}

/* Run one 2x3 job of `rounds` rounds writing NAME-w<rank>.  victim >= 0:
 * kill that server with SIGKILL once worker 0 passed round mark. */
static void run_job(it_ctx *t, const char *name, const char *spec, int victim, int mark)
{
    char marks[16], nrounds[16];
    snprintf(marks, sizeof marks, "%d", victim >= 0 ? mark : -1);
    snprintf(nrounds, sizeof nrounds, "%d", rounds);
    const char *argv[] = {"train", "--rounds", nrounds, "--mark", marks, "--max-stall",
                          MAX_STALL, "--scale", scale, "--out", name,
                          spec ? "--spec" : NULL, spec, NULL};
    start_2x3(t, argv);
    if (victim < 0) {
        it_expect_job_ok(t, tmo);
        return;
    }
    IT_ASSERT(t, it_wait_file(t, "mark-w0", tmo, t->worker[0]),
              "worker 0 did not reach round %d within %.0f s", mark, tmo);
    it_kill(t, t->server[victim], SIGKILL);
    double t_kill = it_now();
    IT_ASSERT(t, it_wait(t, t->server[victim], 5), "server %d did not die of SIGKILL", victim);
    it_info(t, "killed server %d after round %d", victim, mark);
    for (int i = 0; i < 2; i++) {
        it_expect_exit(t, t->worker[i], 0, tmo);
        it_info(t, "worker %d finished %.2f s after the kill", i,
                t->proc[t->worker[i]].t_end - t_kill);
    }
    it_expect_exit(t, t->sched, 0, 15);
    for (int i = 0; i < 3; i++)
        if (i != victim)
            it_expect_exit(t, t->server[i], 0, 15);
    int heir = (victim + 1) % 3;
    IT_CHECK(t, it_log_has(t, t->server[heir], "we own its", 0),
             "server %d (the heir) did not log taking server %d's keys", heir, victim);
    for (int i = 0; i < 2; i++)
        IT_CHECK(t, it_log_has(t, t->worker[i], "re-sent", 0),
                 "worker %d did not log its re-sends", i);
}

static int pick(int lo, int hi)
{
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    return lo + rand() % (hi - lo + 1);
}

/* The victim and its round at random: every server is once an owner, a
 * backup and a heir. */
static void kill_one(it_ctx *t, const char *spec)
{
    int victim = pick(0, 2), mark = pick(10, rounds / 2);
    repl_env(t);
    it_info(t, "victim: server %d after round %d", victim, mark);
    run_job(t, "straight", spec, -1, 0);
    run_job(t, "killed", spec, victim, mark);
    it_same_values(t, 2, "straight", "killed");
}

IT_TEST(replica_kill_server_2x3)
{
    kill_one(t, NULL);
}

/* The same without local groups (KVS_LOCAL_AGG=0): each worker's push
 * reaches the servers, so the heir sums two pushes per round itself. */
IT_TEST(replica_kill_server_apart_2x3)
{
    it_setenv(t, "KVS_LOCAL_AGG", "0");
    kill_one(t, NULL);
}

/* With a server optimizer (Adam: two state arrays and a step count, all
 * forwarded with each round's weights): the final weights are the same
 * bytes as without the kill. */
IT_TEST(replica_kill_server_optim_2x3)
{
    kill_one(t, "adam learning_rate=0.01 wd=0.001");
}

/* The same at full size (make test-long): 64 MiB over the 40 keys, 500
 * rounds, a server killed at a random round among the first 250; plain
 * sums, and with a server optimizer. */
IT_TEST(replica_long_kill_server_2x3)
{
    long_job(t);
    kill_one(t, NULL);
}

IT_TEST(replica_long_kill_server_optim_2x3)
{
    long_job(t);
    kill_one(t, "adam learning_rate=0.01 wd=0.001");
}

/* Server b, the backup of server o, dies first; once o's keys are copied
 * to its new backup, o dies too: its keys go to the last server. */
IT_TEST(replica_kill_backup_then_owner_2x3)
{
    int o = pick(0, 2), b = (o + 1) % 3, last = (o + 2) % 3;
    int mark = pick(10, 60), mark2 = mark + 80;
    char marks[16], marks2[16], want[96];
    snprintf(marks, sizeof marks, "%d", mark);
    snprintf(marks2, sizeof marks2, "%d", mark2);
    const char *argv[] = {"train", "--rounds", "400", "--mark", marks, "--mark2", marks2,
                          "--max-stall", MAX_STALL, "--out", "killed", NULL};
    const char *straight[] = {"train", "--rounds", "400", "--out", "straight", NULL};
    repl_env(t);
    it_info(t, "server %d dies after round %d, then server %d after round %d", b, mark, o,
            mark2);
    reset_job(t);
    it_start_job(t, 3, 2, straight);
    it_expect_job_ok(t, 60);
    start_2x3(t, argv);
    IT_ASSERT(t, it_wait_file(t, "mark-w0", 60, t->worker[0]), "worker 0 did not reach round %d",
              mark);
    it_kill(t, t->server[b], SIGKILL);
    IT_ASSERT(t, it_wait(t, t->server[b], 5), "server %d did not die of SIGKILL", b);
    snprintf(want, sizeof want, "server %d holds every key we own", last);
    IT_ASSERT(t, it_wait_log(t, t->server[o], want, 20),
              "server %d did not log \"%s\" within 20 s", o, want);
    IT_ASSERT(t, it_wait_file(t, "mark2-w0", 60, t->worker[0]),
              "worker 0 did not reach round %d", mark2);
    IT_ASSERT(t, !it_wait(t, t->worker[0], 0), "worker 0 ended before the second kill");
    it_kill(t, t->server[o], SIGKILL);
    IT_ASSERT(t, it_wait(t, t->server[o], 5), "server %d did not die of SIGKILL", o);
    it_info(t, "killed server %d, then server %d", b, o);
    for (int i = 0; i < 2; i++)
        it_expect_exit(t, t->worker[i], 0, 60);
    it_expect_exit(t, t->sched, 0, 15);
    it_expect_exit(t, t->server[last], 0, 15);
    snprintf(want, sizeof want, "server %d died: we own its", o);
    IT_CHECK(t, it_log_has(t, t->server[last], want, 0), "server %d did not take server %d's "
             "keys", last, o);
    snprintf(want, sizeof want, "server %d died; server %d owns its keys now", o, last);
    for (int i = 0; i < 2; i++)
        IT_CHECK(t, it_log_has(t, t->worker[i], want, 0), "worker %d did not log \"%s\"", i,
                 want);
    it_same_values(t, 2, "straight", "killed");
}

/* An owner and its backup die together: the owner's key range is lost, so
 * the job ends: every worker's round fails with KVS_EPEERDEAD saying so
 * (checked in the workers), the scheduler and the last server exit 1, and
 * nothing hangs. */
IT_TEST(replica_kill_two_servers_2x3)
{
    int o = pick(0, 2), b = (o + 1) % 3, last = (o + 2) % 3;
    int mark = pick(10, 60);
    char marks[16];
    snprintf(marks, sizeof marks, "%d", mark);
    const char *argv[] = {"train", "--rounds", "100000", "--mark", marks, "--expect-lost", "1",
                          NULL};
    repl_env(t);
    start_2x3(t, argv);
    IT_ASSERT(t, it_wait_file(t, "mark-w0", 60, t->worker[0]), "worker 0 did not reach round %d",
              mark);
    it_kill(t, t->server[o], SIGKILL);
    it_kill(t, t->server[b], SIGKILL);
    double t_kill = it_now();
    it_info(t, "killed servers %d and %d after round %d", o, b, mark);
    for (int i = 0; i < 2; i++) {
        it_expect_exit(t, t->worker[i], 0, 30);
        it_info(t, "worker %d ended %.2f s after the kills", i,
                t->proc[t->worker[i]].t_end - t_kill);
    }
    it_expect_exit(t, t->sched, 1, 15);
    it_expect_exit(t, t->server[last], 1, 15);
    IT_CHECK(t, it_log_has(t, t->sched, "is lost", 0), "the scheduler did not name the lost "
             "range");
}

/* Job 1 trains 200 rounds with Adam and saves after round 79.  Job 2
 * loads the save (owners and backups each restore the copies they hold),
 * trains rounds 80-199 and loses a server on the way: its final weights
 * are job 1's, byte for byte. */
IT_TEST(replica_checkpoint_2x3)
{
    static const char *spec = "adam learning_rate=0.01 wd=0.001";
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/ckpt", t->dir);
    int victim = pick(0, 2), mark = pick(100, 150);
    char marks[16];
    snprintf(marks, sizeof marks, "%d", mark);
    const char *saving[] = {"train", "--rounds", "200", "--spec", spec, "--ckpt", dir,
                            "--save-at", "79", "--out", "straight", NULL};
    const char *resumed[] = {"train", "--rounds", "200", "--spec", spec, "--ckpt", dir,
                             "--from", "80", "--mark", marks, "--max-stall", MAX_STALL,
                             "--out", "resumed", NULL};
    repl_env(t);
    reset_job(t);
    it_start_job(t, 3, 2, saving);
    it_expect_job_ok(t, 60);
    start_2x3(t, resumed);
    IT_ASSERT(t, it_wait_file(t, "mark-w0", 60, t->worker[0]), "worker 0 did not reach round %d",
              mark);
    it_kill(t, t->server[victim], SIGKILL);
    IT_ASSERT(t, it_wait(t, t->server[victim], 5), "server %d did not die of SIGKILL", victim);
    it_info(t, "killed server %d after round %d of the resumed job", victim, mark);
    for (int i = 0; i < 2; i++)
        it_expect_exit(t, t->worker[i], 0, 60);
    it_expect_exit(t, t->sched, 0, 15);
    it_same_values(t, 2, "straight", "resumed");
}

/* With a job secret: the owner's connection to its backup proves
 * "server <id>" like a worker's connection proves its worker (auth), and
 * is encrypted with curve. */
static void with_secret(it_ctx *t, const char *security)
{
    char path[PATH_MAX + 16];
    const char *secret = "replicas need a secret too 42";
    snprintf(path, sizeof path, "%s/secret", t->dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    IT_ASSERT(t, fd >= 0, "create %s: %s", path, strerror(errno));
    IT_ASSERT(t, write(fd, secret, strlen(secret)) == (ssize_t)strlen(secret) && close(fd) == 0,
              "write %s", path);
    it_setenv(t, "KVS_SECRET_FILE", "%s", path);
    it_setenv(t, "KVS_SECURITY", "%s", security);
    kill_one(t, NULL);
    IT_CHECK(t, it_log_has(t, t->server[0], security, 0), "server 0 did not run %s", security);
}

IT_TEST(replica_kill_server_auth_2x3)
{
    with_secret(t, "auth");
}

IT_TEST(replica_kill_server_curve_2x3)
{
    with_secret(t, "curve");
}

/* Server o dies; its heir dies as soon as it took o's keys, while it copies
 * them to its new backup.  Whether the copy was acknowledged first decides:
 * the job goes on with the last server (every round exact, the scheduler
 * exits 0) or ends with KVS_EPEERDEAD naming the lost range (exit 1).
 * Either way every worker's checks pass and nothing hangs. */
IT_TEST(replica_kill_during_promotion_2x3)
{
    int o = pick(0, 2), heir = (o + 1) % 3, last = (o + 2) % 3;
    int mark = pick(10, 60);
    char marks[16], want[64];
    snprintf(marks, sizeof marks, "%d", mark);
    const char *argv[] = {"train", "--rounds", "1000", "--mark", marks, "--expect-lost", "2",
                          NULL};
    repl_env(t);
    start_2x3(t, argv);
    IT_ASSERT(t, it_wait_file(t, "mark-w0", 60, t->worker[0]), "worker 0 did not reach round %d",
              mark);
    it_kill(t, t->server[o], SIGKILL);
    snprintf(want, sizeof want, "server %d died: we own its", o);
    IT_ASSERT(t, it_wait_log(t, t->server[heir], want, 10), "server %d did not take server %d's "
              "keys within 10 s", heir, o);
    it_kill(t, t->server[heir], SIGKILL);
    it_info(t, "killed server %d, then its heir, server %d", o, heir);
    for (int i = 0; i < 2; i++)
        it_expect_exit(t, t->worker[i], 0, 60);
    int lost = it_log_has(t, t->sched, "is lost", 0);
    it_expect_exit(t, t->sched, lost ? 1 : 0, 15);
    it_expect_exit(t, t->server[last], lost ? 1 : 0, 15);
    it_info(t, "the job %s", lost ? "ended: a key range was lost" : "went on with one server");
}

/* After a server's death a collective (here kvs_save) cannot reach every
 * server: it fails with KVS_EPEERDEAD saying so (checked in the workers),
 * and training goes on to the end, exact. */
IT_TEST(replica_collective_after_death_2x3)
{
    int victim = pick(0, 2), mark = pick(10, 60);
    char marks[16], dir[PATH_MAX + 16];
    snprintf(marks, sizeof marks, "%d", mark);
    snprintf(dir, sizeof dir, "%s/ckpt", t->dir);
    const char *argv[] = {"train", "--rounds", "150", "--mark", marks, "--save-dead", dir,
                          NULL};
    repl_env(t);
    start_2x3(t, argv);
    IT_ASSERT(t, it_wait_file(t, "mark-w0", 60, t->worker[0]), "worker 0 did not reach round %d",
              mark);
    it_kill(t, t->server[victim], SIGKILL);
    IT_ASSERT(t, it_wait(t, t->server[victim], 5), "server %d did not die of SIGKILL", victim);
    it_write_file(t, "killed", "1\n");
    for (int i = 0; i < 2; i++)
        it_expect_exit(t, t->worker[i], 0, 60);
    it_expect_exit(t, t->sched, 0, 15);
}
