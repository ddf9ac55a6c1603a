/*
 * test_elastic.c - elastic workers (KVS_ELASTIC=1), run by kvs-elasticworker
 * (elasticworker.c): a worker SIGKILLed at a random step and another started
 * later, a worker killed in the middle of a fused multi-key push, an
 * announced close, the same under p3, and a death below KVS_MIN_WORKERS.
 * Every completed round's sum is checked element by element against the
 * members of its epoch (in the worker); a worker over the job's size waits
 * for a slot or is refused; survivors get KVS_EMEMBERSHIP, agree
 * on the step and redo it; a joiner pulls the current values; the job ends
 * with exit 0 everywhere, or with KVS_EPEERDEAD below the minimum.
 */
#include "tests.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

static void elastic_env(it_ctx *t, int min, int max)
{
    it_use_worker(t, "kvs-elasticworker");
    it_setenv(t, "KVS_ELASTIC", "1");
    it_setenv(t, "KVS_MIN_WORKERS", "%d", min);
    it_setenv(t, "KVS_MAX_WORKERS", "%d", max);
    it_setenv(t, "MXNET_KVSTORE_BIGARRAY_BOUND", "1000");
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_setenv(t, "PS_HEARTBEAT_INTERVAL", "0.2");
    it_setenv(t, "PS_HEARTBEAT_TIMEOUT", "3");
    it_setenv(t, "PS_VERBOSE", "1");
}

/* A random step in [lo, hi), logged so that a failure can be replayed. */
static int random_step(it_ctx *t, int lo, int hi)
{
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    const char *e = getenv("KVS_INTEG_SEED");
    if (e)
        seed = (unsigned)strtoul(e, NULL, 10);
    srand(seed);
    int s = lo + rand() % (hi - lo);
    it_info(t, "seed %u (KVS_INTEG_SEED): step %d", seed, s);
    return s;
}

/* The steps worker NAME has done so far (-1: none written yet). */
static long steps_of(it_ctx *t, const char *name)
{
    char path[PATH_MAX + 80];
    snprintf(path, sizeof path, "%s/ready-%s", t->dir, name);
    char *text = it_slurp(path, NULL);
    long got = -1;
    if (text && sscanf(text, "steps %ld", &got) != 1)
        got = -1;
    free(text);
    return got;
}

/* Wait until worker NAME has done at least steps steps. */
static void wait_steps(it_ctx *t, const char *name, int steps, int watch)
{
    char file[64], path[PATH_MAX + 80];
    snprintf(file, sizeof file, "ready-%s", name);
    snprintf(path, sizeof path, "%s/%s", t->dir, file);
    double deadline = it_now() + 20 * it_slow;
    for (;;) {
        char *text = it_slurp(path, NULL);
        long got = -1;
        if (text && sscanf(text, "steps %ld", &got) != 1)
            got = -1;
        free(text);
        if (got >= steps)
            return;
        it_poll(t);
        IT_ASSERT(t, !t->proc[watch].reaped, "%s exited before step %d", t->proc[watch].name,
                  steps);
        IT_ASSERT(t, it_now() < deadline, "%s did not reach step %d within 20 s", name, steps);
        it_nap_ms(5);
    }
}

/* The scheduler, 2 servers and workers 0 .. n-1 running args[i] (a job of
 * n workers); their process indexes in w. */
static void start_job(it_ctx *t, int n, const char *const *const *args, int *w)
{
    it_start_scheduler(t, 2, n, NULL);
    it_start_server(t, 0, NULL);
    it_start_server(t, 1, NULL);
    for (int i = 0; i < n; i++)
        w[i] = it_start_worker(t, i, args[i], NULL);
}

/* The workers in ok exit 0, then the scheduler and the servers exit 0. */
static void expect_end(it_ctx *t, const int *ok, int n, double timeout_s)
{
    char buf[128];
    for (int i = 0; i < n; i++)
        it_expect_exit(t, ok[i], 0, timeout_s);
    int others[IT_MAX_PROCS], no = 0;
    others[no++] = t->sched;
    for (int i = 0; i < t->nserver; i++)
        others[no++] = t->server[i];
    for (int i = 0; i < no; i++) {
        it_proc *p = &t->proc[others[i]];
        IT_ASSERT(t, it_wait(t, others[i], 15), "%s still running 15 s after the workers left",
                  p->name);
        IT_ASSERT(t, it_exited_with(t, others[i], 0), "%s: %s", p->name,
                  it_status_str(p, buf, sizeof buf));
    }
}

/* The n workers in ok, joiner j among them, end with n workers (exit 0
 * everywhere); j pulled the current values and took the dead worker's
 * slot 2. */
static void expect_joined(it_ctx *t, const int *ok, int n, int j)
{
    char want[32];
    snprintf(want, sizeof want, "workers %d steps", n);
    expect_end(t, ok, n, 25);
    for (int i = 0; i < n; i++)
        IT_ASSERT(t, it_log_has(t, ok[i], want, 0), "%s did not end with %d workers",
                  t->proc[ok[i]].name, n);
    IT_ASSERT(t, it_log_has(t, j, "joiner pulled the current values", 0),
              "the joiner did not check the current values");
    IT_ASSERT(t, it_log_has(t, t->sched, "joins the running job in slot 2", 0),
              "the joiner did not take the free slot 2");
}

/* A job of 4 workers running args (w: their process indexes); worker 2 is
 * SIGKILLed at a random step and worker 0 sees the membership change.
 * Returns when the kill was sent. */
static double kill_w2(it_ctx *t, const char *const *const *args, int *w)
{
    int step = random_step(t, 5, 120);
    start_job(t, 4, args, w);
    wait_steps(t, "w2", step, w[2]);
    it_kill(t, w[2], SIGKILL);
    double t_kill = it_now();
    IT_ASSERT(t, it_wait(t, w[2], 5), "worker2 did not die of SIGKILL");
    it_info(t, "killed worker2 after step %d", step);
    IT_ASSERT(t, it_wait_file(t, "changed-w0", 15, w[0]), "w0 never saw the membership change");
    return t_kill;
}

/* 4 workers x 2 servers: worker 2 SIGKILLed at a random step, a new worker
 * started once the survivors saw the change; everyone ends with 4. */
static void kill_and_join(it_ctx *t)
{
    const char *a0[] = {"w0", "300", "4", NULL}, *a1[] = {"w1", "300", "4", NULL};
    const char *a2[] = {"w2", "300", "4", NULL}, *a3[] = {"w3", "300", "4", NULL};
    const char *aj[] = {"j4", "300", "4", "--joiner", NULL};
    const char *nid[] = {"DMLC_WORKER_ID", NULL};
    const char *const *args[] = {a0, a1, a2, a3};
    int w[4];
    kill_w2(t, args, w);
    int j = it_start_worker(t, 4, aj, nid);
    int ok[] = {w[0], w[1], w[3], j};
    expect_joined(t, ok, 4, j);
}

IT_TEST(elastic_kill_join_4x2)
{
    elastic_env(t, 2, 4);
    kill_and_join(t);
}

/* make test-long (KVS_INTEG_LONG=1): the same with the new worker started
 * 10 s after the kill; the three survivors train the whole time in
 * between, once they saw the change (each second from then on, every one
 * of them has done more steps). */
IT_TEST(elastic_long_kill_join_4x2)
{
    const char *e = getenv("KVS_INTEG_LONG");
    if (e == NULL || strcmp(e, "1") != 0)
        it_skip(t, "a long test: make test-long (KVS_INTEG_LONG=1) runs it");
    elastic_env(t, 2, 4);
    /* 20 ms of compute a step: the joiner comes long before step 1000 */
#define LONG_ARGS "1000", "4", "--compute-ms", "20"
    const char *a0[] = {"w0", LONG_ARGS, NULL}, *a1[] = {"w1", LONG_ARGS, NULL};
    const char *a2[] = {"w2", LONG_ARGS, NULL}, *a3[] = {"w3", LONG_ARGS, NULL};
    const char *aj[] = {"j4", LONG_ARGS, "--joiner", NULL};
#undef LONG_ARGS
    const char *nid[] = {"DMLC_WORKER_ID", NULL};
    static const char *const names[] = {"w0", "w1", "w3"};
    const char *const *args[] = {a0, a1, a2, a3};
    int w[4];
    double t_kill = kill_w2(t, args, w);
    long last[3];
    double base = it_now();
    for (int i = 0; i < 3; i++)
        last[i] = steps_of(t, names[i]);
    for (int s = 1; it_now() < t_kill + 10; s++) { /* a look each second until 10 s passed */
        while (it_now() < base + s) {
            it_poll(t);
            it_nap_ms(20);
        }
        for (int i = 0; i < 3; i++) {
            long now = steps_of(t, names[i]);
            IT_ASSERT(t, now > last[i], "%s did no step in second %d after the change (%.1f s "
                      "after the kill; at step %ld)", names[i], s, it_now() - t_kill, now);
            last[i] = now;
        }
    }
    it_info(t, "10 s after the kill the survivors stand at steps %ld, %ld, %ld", last[0],
            last[1], last[2]);
    IT_ASSERT(t, last[0] < 900, "the survivors are at step %ld: the joiner comes too late",
              last[0]);
    int j = it_start_worker(t, 4, aj, nid);
    int ok[] = {w[0], w[1], w[3], j};
    expect_joined(t, ok, 4, j);
}

IT_TEST(elastic_kill_join_p3_4x2)
{
    elastic_env(t, 2, 4);
    it_setenv(t, "DMLC_PS_VAN_TYPE", "p3");
    it_setenv(t, "MXNET_KVSTORE_SLICE_THRESHOLD", "600");
    kill_and_join(t);
}

/* 3 workers in 3 slots: a worker that registers now waits for a slot (a
 * restarted worker often registers before the scheduler has seen its old
 * connection close); worker 2 is SIGKILLed, the waiting one takes slot 2. */
IT_TEST(elastic_full_waits_3x2)
{
    elastic_env(t, 2, 3);
    const char *a0[] = {"w0", "300", "3", NULL}, *a1[] = {"w1", "300", "3", NULL};
    const char *a2[] = {"w2", "300", "3", NULL};
    const char *aj[] = {"j3", "300", "3", "--joiner", NULL};
    const char *nid[] = {"DMLC_WORKER_ID", NULL};
    int step = random_step(t, 5, 100);
    const char *const *args[] = {a0, a1, a2};
    int w[3];
    start_job(t, 3, args, w);
    int w0 = w[0], w1 = w[1], w2 = w[2];
    wait_steps(t, "w2", step, w2);
    int j = it_start_worker(t, 3, aj, nid);
    IT_ASSERT(t, it_wait_log(t, t->sched, "waits for a free slot", 10),
              "the scheduler did not hold the registration of a worker over the job's size");
    it_kill(t, w2, SIGKILL);
    IT_ASSERT(t, it_wait(t, w2, 5), "worker2 did not die of SIGKILL");
    int ok[] = {w0, w1, j};
    expect_joined(t, ok, 3, j);
}

/* 3 workers in 3 slots and none leaves: a fourth waits PS_HEARTBEAT_TIMEOUT
 * (3 s) for a slot, is refused with the reason, and the job goes on. */
IT_TEST(elastic_full_refused_3x1)
{
    elastic_env(t, 2, 3);
    const char *a0[] = {"w0", "1500", "3", NULL}, *a1[] = {"w1", "1500", "3", NULL};
    const char *a2[] = {"w2", "1500", "3", NULL};
    const char *aj[] = {"j3", "1500", "3", "--joiner", NULL};
    const char *nid[] = {"DMLC_WORKER_ID", NULL};
    it_start_scheduler(t, 1, 3, NULL);
    it_start_server(t, 0, NULL);
    int w0 = it_start_worker(t, 0, a0, NULL);
    int w1 = it_start_worker(t, 1, a1, NULL);
    int w2 = it_start_worker(t, 2, a2, NULL);
    wait_steps(t, "w0", 10, w0);
    int j = it_start_worker(t, 3, aj, nid);
    it_expect_exit(t, j, 1, 15);
    IT_ASSERT(t, it_log_has(t, j, "job full: the job already has its 3 workers "
                                  "(KVS_MAX_WORKERS=3); none left within", 0),
              "the refused worker was not told why");
    IT_ASSERT(t, !it_log_has(t, t->sched, "joins the running job", 0),
              "the scheduler seated a worker over the job's size");
    int ok[] = {w0, w1, w2};
    expect_end(t, ok, 3, 60);
    for (int i = 0; i < 3; i++) /* no KVS_EMEMBERSHIP: nobody joined or left meanwhile */
        IT_ASSERT(t, it_log_has(t, ok[i], "memberships 0 workers 3 steps", 0),
                  "%s saw the membership change or did not end with 3 workers",
                  t->proc[ok[i]].name);
}

/* A worker SIGKILLs itself right after issuing a step's fused multi-key
 * pushpull; another closes (an announced departure); the other two go on. */
IT_TEST(elastic_die_in_push_4x2)
{
    elastic_env(t, 2, 4);
    char die[16];
    snprintf(die, sizeof die, "%d", random_step(t, 3, 60));
    const char *a0[] = {"w0", "150", "2", NULL}, *a1[] = {"w1", "150", "2", NULL};
    const char *a2[] = {"w2", "150", "2", "--die-at", die, NULL};
    const char *a3[] = {"w3", "150", "2", "--leave-at", "90", NULL};
    const char *const *args[] = {a0, a1, a2, a3};
    int w[4];
    start_job(t, 4, args, w);
    int w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];
    IT_ASSERT(t, it_wait(t, w2, 20), "worker2 did not kill itself");
    IT_ASSERT(t, WIFSIGNALED(t->proc[w2].status), "worker2 was not killed");
    int ok[] = {w0, w1, w3};
    expect_end(t, ok, 3, 25);
    IT_ASSERT(t, it_log_has(t, w0, "workers 2 steps", 0), "w0 did not end with 2 workers");
    IT_ASSERT(t, it_log_has(t, w1, "workers 2 steps", 0), "w1 did not end with 2 workers");
}

/* With 2-bit gradient compression: 3 workers, one SIGKILLs itself in the
 * middle of a step's fused pushpull; the other two redo that step under the
 * new membership (agreeing through a key exempt from compression) and go
 * on.  Every completed round's sum is checked element by element against a
 * model of the residuals in which the failed try never happened: the redo
 * sends what the first try did. */
IT_TEST(elastic_die_compressed_3x2)
{
    elastic_env(t, 2, 3);
    char die[16];
    snprintf(die, sizeof die, "%d", random_step(t, 3, 60));
    const char *a0[] = {"w0", "150", "2", "--compress", "4", NULL};
    const char *a1[] = {"w1", "150", "2", "--compress", "4", NULL};
    const char *a2[] = {"w2", "150", "2", "--compress", "4", "--die-at", die, NULL};
    const char *const *args[] = {a0, a1, a2};
    int w[3];
    start_job(t, 3, args, w);
    int w0 = w[0], w1 = w[1], w2 = w[2];
    IT_ASSERT(t, it_wait(t, w2, 20), "worker2 did not kill itself");
    IT_ASSERT(t, WIFSIGNALED(t->proc[w2].status), "worker2 was not killed");
    int ok[] = {w0, w1};
    expect_end(t, ok, 2, 25);
    for (int i = 0; i < 2; i++)
        IT_ASSERT(t, it_log_has(t, ok[i], "memberships 1 workers 2 steps", 0),
                  "%s did not see one change and end with 2 workers", t->proc[ok[i]].name);
}

/* KVS_MIN_WORKERS=3 of 3: a death ends the job with KVS_EPEERDEAD. */
IT_TEST(elastic_below_min_3x1)
{
    elastic_env(t, 3, 3);
    const char *a[] = {"w", "100000", "3", "--expect-dead", NULL};
    it_start_scheduler(t, 1, 3, NULL);
    it_start_server(t, 0, NULL);
    int w0 = it_start_worker(t, 0, a, NULL);
    int w1 = it_start_worker(t, 1, a, NULL);
    int w2 = it_start_worker(t, 2, a, NULL);
    (void)w0;
    IT_ASSERT(t, it_wait_file(t, "ready-w", 20, w1), "the workers did not start");
    it_kill(t, w1, SIGKILL);
    it_expect_exit(t, w0, 0, 15);
    it_expect_exit(t, w2, 0, 15);
    IT_ASSERT(t, it_log_has(t, w0, "KVS_MIN_WORKERS", 0) ||
                 it_log_has(t, t->sched, "fewer than KVS_MIN_WORKERS=3", 0),
              "nobody says why the job ended");
    IT_ASSERT(t, it_wait(t, t->sched, 15), "the scheduler did not end");
    IT_ASSERT(t, it_exited_with(t, t->sched, 1), "the scheduler did not exit 1");
}
