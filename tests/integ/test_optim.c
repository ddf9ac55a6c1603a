/*
 * test_optim.c - server-side optimizers and checkpoints, run by
 * kvs-optworker (optworker.c): every optimizer (and the learning-rate
 * schedules) against a float64 reference of kvs.h's formulas (float32 and float64, split and unsplit keys, 2
 * workers x 2 servers); plain sums with MXNET_UPDATE_ON_KVSTORE=0; bad
 * specs and load errors; and the restart proof: a job that saves after
 * round 5 and is killed, restarted from the checkpoint, ends round 10
 * bit-identical to a job that ran 10 rounds straight.  The crash tests: a
 * server dies (SIGKILL, by fault injection) at each phase of a save, and a
 * fresh job loads exactly the previous checkpoint, or the new one where it
 * was committed on every server, never a mix.
 */
#include "tests.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void opt_env(it_ctx *t)
{
    if (strstr(t->worker_bin, "kvs-testworker") == NULL)
        return; /* done already */
    snprintf(t->worker_bin + strlen(t->worker_bin) - strlen("kvs-testworker"),
             sizeof t->worker_bin - (strlen(t->worker_bin) - strlen("kvs-testworker")),
             "kvs-optworker");
    it_setenv(t, "MXNET_KVSTORE_BIGARRAY_BOUND", "1000");
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_setenv(t, "PS_VERBOSE", "1");
}

/* Start a 2x2 job running argv; the previous job (if any) is gone. */
static void start_job(it_ctx *t, const char *const *argv)
{
    char port[PATH_MAX + 32];
    snprintf(port, sizeof port, "%s/scheduler.port", t->dir);
    unlink(port);
    t->nserver = t->nworker = 0;
    it_start_job(t, 2, 2, argv);
}

static void train_ok(it_ctx *t, const char *spec, const char *extra1, const char *extra2)
{
    const char *argv[] = {"train", "--spec", spec, "--rounds", "6", extra1, extra2, NULL};
    opt_env(t);
    start_job(t, argv);
    it_expect_job_ok(t, 60);
}

IT_TEST(optim_sgd_2x2)
{
    train_ok(t, "sgd learning_rate=0.02 wd=0.001 rescale_grad=0.5 clip_gradient=1.5", "--mult",
             NULL);
}

IT_TEST(optim_sgd_momentum_2x2)
{
    train_ok(t, "sgd learning_rate=0.002 momentum=0.9 wd=0.0001 lr_scheduler=factor step=2 "
                "factor=0.5 stop_factor_lr=0.003", "--mult", NULL);
}

IT_TEST(optim_nag_2x2)
{
    train_ok(t, "nag learning_rate=0.01 momentum=0.8 wd=0.001 clip_gradient=2", NULL, NULL);
}

IT_TEST(optim_adam_2x2)
{
    /* with a float16 key and its float32 master copy */
    train_ok(t, "adam learning_rate=0.01 wd=0.001 rescale_grad=0.5 multi_precision=1",
             "--half", "--mult");
}

IT_TEST(optim_adagrad_2x2)
{
    train_ok(t, "adagrad learning_rate=0.05 eps=1e-6 wd=0.001", NULL, NULL);
}

IT_TEST(optim_rmsprop_2x2)
{
    train_ok(t, "rmsprop learning_rate=0.01 gamma1=0.95 wd=0.001 clip_weights=1.9", NULL, NULL);
}

IT_TEST(optim_rmsprop_centered_2x2)
{
    train_ok(t, "rmsprop learning_rate=0.01 centered=1 gamma2=0.8 clip_gradient=3", "--half",
             NULL);
}

IT_TEST(optim_off_2x2)
{
    opt_env(t);
    it_setenv(t, "MXNET_UPDATE_ON_KVSTORE", "0");
    train_ok(t, "sgd learning_rate=0.1 momentum=0.9", "--sums", NULL);
}

IT_TEST(optim_async_2x2)
{
    static const char *const argv[] = {"async", NULL};
    opt_env(t);
    start_job(t, argv);
    it_expect_job_ok(t, 60);
}

IT_TEST(optim_errors_2x2)
{
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/ckpt", t->dir);
    const char *argv[] = {"errors", "--dir", dir, NULL};
    opt_env(t);
    /* its "save during a round" needs a round the servers see half done:
     * each worker pushes for itself (a local group would hold worker 0's
     * push until worker 1's came) */
    it_setenv(t, "KVS_LOCAL_AGG", "0");
    start_job(t, argv);
    it_expect_job_ok(t, 90);
}

static void restart_proof(it_ctx *t, const char *spec, int auto_ckpt)
{
    char save[PATH_MAX + 16], autodir[PATH_MAX + 16], from_auto[PATH_MAX + 64];
    snprintf(save, sizeof save, "%s/saved", t->dir);
    snprintf(autodir, sizeof autodir, "%s/auto", t->dir);
    opt_env(t);
    /* 1: ten rounds straight (with automatic checkpoints every 3 rounds) */
    if (auto_ckpt) {
        it_setenv(t, "KVS_CHECKPOINT_DIR", "%s", autodir);
        it_setenv(t, "KVS_CHECKPOINT_EVERY", "3");
    }
    const char *straight[] = {"train", "--spec", spec, "--rounds", "10", "--dump",
                              "straight.bin", NULL};
    start_job(t, straight);
    it_expect_job_ok(t, 60);
    if (auto_ckpt) {
        it_setenv(t, "KVS_CHECKPOINT_DIR", "%s", "");
        it_setenv(t, "KVS_CHECKPOINT_EVERY", "0");
    }
    /* 2: five rounds, save, then everything is killed */
    const char *killed[] = {"train", "--spec", spec, "--rounds", "10", "--save-at", "5",
                            "--save-dir", save, "--hang-after-save", NULL};
    start_job(t, killed);
    IT_ASSERT(t, it_wait_file(t, "saved-w0", 60, t->worker[0]), "worker 0 did not save");
    IT_ASSERT(t, it_wait_file(t, "saved-w1", 60, t->worker[1]), "worker 1 did not save");
    for (int i = 0; i < t->nproc; i++)
        it_kill(t, i, SIGKILL);
    for (int i = 0; i < t->nproc; i++)
        it_wait(t, i, 10);
    /* 3: a fresh job loads the checkpoint and runs rounds 5..9 */
    const char *restarted[] = {"train", "--spec", spec, "--from", "5", "--rounds", "10",
                               "--load", save, "--dump", "restarted.bin", NULL};
    start_job(t, restarted);
    it_expect_job_ok(t, 60);
    it_same_files(t, "straight.bin", "restarted.bin");
    if (!auto_ckpt)
        return;
    /* 4: from the first job's automatic checkpoint of round 6 (its generation's
     * directory itself); 3 was pruned, the manifests name 9 and 6 */
    snprintf(from_auto, sizeof from_auto, "%s/gen-000000000006", autodir);
    char p3[PATH_MAX + 64], p9[PATH_MAX + 64], man[PATH_MAX + 64];
    snprintf(p3, sizeof p3, "%s/gen-000000000003/server-0.kvsckpt", autodir);
    snprintf(p9, sizeof p9, "%s/gen-000000000009/server-1.kvsckpt", autodir);
    IT_ASSERT(t, access(p3, F_OK) != 0, "%s is still there: only the last two are kept", p3);
    IT_ASSERT(t, access(p9, F_OK) == 0, "%s is missing", p9);
    for (int i = 0; i < 2; i++) {
        snprintf(man, sizeof man, "%s/server-%d.manifest", autodir, i);
        char *m = it_slurp(man, NULL);
        IT_ASSERT(t, m && strstr(m, "\ngen 9 ") && strstr(m, "\ngen 6 ") &&
                     strstr(m, "\ngen 9 ") < strstr(m, "\ngen 6 ") && !strstr(m, "\ngen 3 "),
                  "%s does not name generations 9 then 6 only: %s", man, m ? m : "(missing)");
        free(m);
    }
    const char *from6[] = {"train", "--spec", spec, "--from", "6", "--rounds", "10", "--load",
                           from_auto, "--dump", "auto.bin", NULL};
    start_job(t, from6);
    it_expect_job_ok(t, 60);
    it_same_files(t, "straight.bin", "auto.bin");
    /* 5: the directory itself: the newest generation committed everywhere, 9 */
    const char *from9[] = {"train", "--spec", spec, "--from", "9", "--rounds", "10", "--load",
                           autodir, "--dump", "auto9.bin", NULL};
    start_job(t, from9);
    it_expect_job_ok(t, 60);
    it_same_files(t, "straight.bin", "auto9.bin");
}

IT_TEST(restart_sgd_momentum_2x2)
{
    restart_proof(t, "sgd learning_rate=0.002 momentum=0.9 wd=0.0001 lr_scheduler=factor step=3 "
                     "factor=0.5", 0);
}

IT_TEST(restart_adam_2x2)
{
    restart_proof(t, "adam learning_rate=0.01 wd=0.001 multi_precision=1", 1);
}

/* adamw, lamb and the warmup/decay schedules: element by element against
 * the float64 reference (lamb: per key), and the restart proof. */
IT_TEST(optim_adamw_2x2)
{
    train_ok(t, "adamw learning_rate=0.01 wd=0.05 rescale_grad=0.5 clip_gradient=1.5 "
                "multi_precision=1 lr_scheduler=warmup_cosine warmup_steps=2 total_steps=5 "
                "final_lr=0.001", "--half", "--mult");
}

IT_TEST(optim_schedules_2x2)
{
    train_ok(t, "sgd learning_rate=0.004 momentum=0.9 wd=0.001 lr_scheduler=poly warmup_steps=1 "
                "total_steps=5 power=1.5 final_lr=0.002 warmup_begin_lr=0.001", "--mult", NULL);
    train_ok(t, "adam learning_rate=0.01 lr_scheduler=warmup_linear warmup_steps=3 "
                "total_steps=5", NULL, NULL);
}

/* lamb on keys that live on one server: nothing split here */
IT_TEST(optim_lamb_2x2)
{
    opt_env(t);
    it_setenv(t, "MXNET_KVSTORE_BIGARRAY_BOUND", "1000000");
    train_ok(t, "lamb learning_rate=0.01 wd=0.01 multi_precision=1 upper_bound=30 "
                "lr_scheduler=warmup_linear warmup_steps=2 total_steps=6", "--half", "--mult");
}

/* keys 11 (2501 elements) and 20 (1999) split over the servers
 * (MXNET_KVSTORE_BIGARRAY_BOUND=1000): every part's update uses the whole
 * key's norms, exchanged between the servers; the reference computes them
 * over the whole key in float64 */
IT_TEST(optim_lamb_split_2x2)
{
    train_ok(t, "lamb learning_rate=0.01 wd=0.01 multi_precision=1 lower_bound=1 "
                "lr_scheduler=warmup_cosine warmup_steps=1 total_steps=6", "--half", "--mult");
}

IT_TEST(optim_lamb_split_3x2)
{
    const char *argv[] = {"train", "--spec", "lamb learning_rate=0.02 wd=0.001 clip_gradient=3",
                          "--rounds", "8", NULL};
    char port[PATH_MAX + 32];
    opt_env(t);
    snprintf(port, sizeof port, "%s/scheduler.port", t->dir);
    unlink(port);
    it_start_job(t, 3, 2, argv);
    it_expect_job_ok(t, 60);
}

/* P3 slices of 16 elements spread over the servers: key 11 (2501
 * elements) is 157 slices, about 79 on each server, all waiting for each
 * other's norms every round */
IT_TEST(optim_lamb_p3_2x2)
{
    opt_env(t);
    it_setenv(t, "DMLC_PS_VAN_TYPE", "p3");
    it_setenv(t, "MXNET_KVSTORE_SLICE_THRESHOLD", "16");
    train_ok(t, "lamb learning_rate=0.01 wd=0.01", "--half", NULL);
}

/* dist_async parts are updated as pushes come: lamb refuses split keys */
IT_TEST(optim_lamb_split_async_2x2)
{
    train_ok(t, "lamb learning_rate=0.01", "--split-refused", NULL);
}

IT_TEST(restart_adamw_cosine_2x2)
{
    restart_proof(t, "adamw learning_rate=0.01 wd=0.01 multi_precision=1 "
                     "lr_scheduler=warmup_cosine warmup_steps=3 total_steps=8 final_lr=0.001", 0);
}

IT_TEST(restart_lamb_poly_2x2)
{
    opt_env(t);
    it_setenv(t, "MXNET_KVSTORE_BIGARRAY_BOUND", "1000000");
    restart_proof(t, "lamb learning_rate=0.01 wd=0.01 lr_scheduler=poly warmup_steps=2 "
                     "total_steps=9 power=2", 0);
}

/* the same with keys 11 and 20 split over the servers */
IT_TEST(restart_lamb_split_2x2)
{
    restart_proof(t, "lamb learning_rate=0.01 wd=0.01 multi_precision=1 lr_scheduler=poly "
                     "warmup_steps=2 total_steps=9", 0);
}

/* Are files a and b of the test directory the same bytes? */
static int files_same(it_ctx *t, const char *a, const char *b)
{
    char pa[PATH_MAX + 64], pb[PATH_MAX + 64];
    size_t la = 0, lb = 0;
    snprintf(pa, sizeof pa, "%s/%s", t->dir, a);
    snprintf(pb, sizeof pb, "%s/%s", t->dir, b);
    char *x = it_slurp(pa, &la), *y = it_slurp(pb, &lb);
    IT_ASSERT(t, x && y && la > 0, "%s or %s is missing or empty", a, b);
    int same = la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

/* Server 1 runs kvs-server-faults and dies by SIGKILL at point (the second
 * time it gets there: in the second of two saves into one directory).  A
 * fresh job then loads the directory: expect 1, the first save's weights
 * bit for bit; 2, the second's; 0, either (then it says which).  It saves
 * again: the leftovers of the interrupted save go, one generation remains. */
static void crash_proof(it_ctx *t, const char *point, int expect)
{
    static const char *spec = "adam learning_rate=0.01 wd=0.001";
    char dir[PATH_MAX + 16], env[96], keep_bin[PATH_MAX], buf[128];
    snprintf(dir, sizeof dir, "%s/ckpt", t->dir);
    snprintf(env, sizeof env, "KVS_TEST_CKPT_CRASH=%s:2", point);
    opt_env(t);
    const char *crash[] = {"train", "--spec", spec, "--rounds", "6", "--save-at", "2",
                           "--save2-at", "4", "--crash-save", "--save-dir", dir, NULL};
    const char *extra[] = {env, NULL};
    char port[PATH_MAX + 32];
    snprintf(port, sizeof port, "%s/scheduler.port", t->dir);
    unlink(port);
    t->nserver = t->nworker = 0;
    it_start_scheduler(t, 2, 2, NULL);
    it_start_server(t, 0, NULL);
    snprintf(keep_bin, sizeof keep_bin, "%s", t->server_bin);
    size_t cut = strlen(t->server_bin) - strlen("kvs-server");
    snprintf(t->server_bin + cut, sizeof t->server_bin - cut, "tests/kvs-server-faults");
    IT_ASSERT(t, access(t->server_bin, X_OK) == 0, "%s is not built", t->server_bin);
    int s1 = it_start_server(t, 1, extra);
    snprintf(t->server_bin, sizeof t->server_bin, "%s", keep_bin);
    for (int i = 0; i < 2; i++)
        it_start_worker(t, i, crash, NULL);
    IT_ASSERT(t, it_wait(t, s1, 60), "server 1 did not die at '%s'", point);
    IT_ASSERT(t, WIFSIGNALED(t->proc[s1].status) && WTERMSIG(t->proc[s1].status) == SIGKILL,
              "server 1 ended otherwise (%s), not at '%s'",
              it_status_str(&t->proc[s1], buf, sizeof buf), point);
    IT_ASSERT(t, it_log_has(t, s1, env + strlen("KVS_TEST_CKPT_CRASH="), 0),
              "server 1's log does not say it died at '%s'", point);
    for (int i = 0; i < t->nproc; i++)
        it_kill(t, i, SIGKILL);
    for (int i = 0; i < t->nproc; i++)
        it_wait(t, i, 10);
    for (int i = 0; i < 2; i++) {
        char man[PATH_MAX + 64];
        snprintf(man, sizeof man, "%s/server-%d.manifest", dir, i);
        char *m = it_slurp(man, NULL);
        it_info(t, "after the crash, %s:\n%s", man, m ? m : "(none)");
        free(m);
    }
    /* a fresh job loads it, pulls, dumps, and saves again */
    const char *load[] = {"train", "--spec", spec, "--from", "6", "--rounds", "6", "--load", dir,
                          "--pull-dump", "loaded.bin", "--save-end", "--save-dir", dir, NULL};
    start_job(t, load);
    it_expect_job_ok(t, 60);
    int old = files_same(t, "loaded.bin", "save1.bin"), new = files_same(t, "loaded.bin",
                                                                         "save2.bin");
    it_info(t, "killed at '%s': the load restored the %s checkpoint", point,
            old ? "previous" : new ? "new" : "(neither!)");
    IT_ASSERT(t, old || new, "killed at '%s': the loaded weights are neither save's", point);
    IT_ASSERT(t, expect != 1 || old, "killed at '%s': expected the previous checkpoint", point);
    IT_ASSERT(t, expect != 2 || new, "killed at '%s': expected the new checkpoint", point);
    /* the save after the load: one generation left, above every earlier one */
    DIR *d = opendir(dir);
    struct dirent *de;
    int gens = 0, others = 0;
    IT_ASSERT(t, d != NULL, "%s is gone", dir);
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (!strcmp(de->d_name, "gen-000000000003"))
            gens++;
        else if (strcmp(de->d_name, "server-0.manifest") && strcmp(de->d_name, "server-1.manifest"))
            others++, it_info(t, "left in %s: %s", dir, de->d_name);
    }
    closedir(d);
    IT_ASSERT(t, gens == 1 && others == 0, "after the next save %s should hold gen-000000000003 "
              "and the manifests only", dir);
}

IT_TEST(ckpt_crash_written_2x2)
{
    crash_proof(t, "written", 1); /* every file written, nothing committed */
}

IT_TEST(ckpt_crash_commit_2x2)
{
    crash_proof(t, "commit", 1); /* server 0 may commit, server 1 does not */
}

IT_TEST(ckpt_crash_committed_2x2)
{
    crash_proof(t, "committed", 0); /* server 1 committed; server 0 may have */
}

IT_TEST(ckpt_crash_cleaned_2x2)
{
    crash_proof(t, "cleaned", 2); /* committed everywhere; server 1 died cleaning */
}

/* Automatic checkpoints every 2 rounds; server 1 dies (SIGKILL) after
 * writing round 4's file, before committing it.  Server 0 may have
 * committed round 4; the newest round both committed is 2: a fresh job
 * that loads the directory gets round 2's weights bit for bit. */
IT_TEST(ckpt_crash_auto_2x2)
{
    static const char *spec = "sgd learning_rate=0.002 momentum=0.9";
    char dir[PATH_MAX + 16], keep_bin[PATH_MAX], buf[128], port[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/auto", t->dir);
    opt_env(t);
    it_setenv(t, "KVS_CHECKPOINT_DIR", "%s", dir);
    it_setenv(t, "KVS_CHECKPOINT_EVERY", "2");
    const char *train[] = {"train", "--spec", spec, "--rounds", "6", "--dump-rounds", NULL};
    const char *extra[] = {"KVS_TEST_CKPT_CRASH=auto-written:2", NULL};
    snprintf(port, sizeof port, "%s/scheduler.port", t->dir);
    unlink(port);
    t->nserver = t->nworker = 0;
    it_start_scheduler(t, 2, 2, NULL);
    it_start_server(t, 0, NULL);
    snprintf(keep_bin, sizeof keep_bin, "%s", t->server_bin);
    size_t cut = strlen(t->server_bin) - strlen("kvs-server");
    snprintf(t->server_bin + cut, sizeof t->server_bin - cut, "tests/kvs-server-faults");
    int s1 = it_start_server(t, 1, extra);
    snprintf(t->server_bin, sizeof t->server_bin, "%s", keep_bin);
    for (int i = 0; i < 2; i++)
        it_start_worker(t, i, train, NULL);
    IT_ASSERT(t, it_wait(t, s1, 60), "server 1 did not die at round 4's checkpoint");
    IT_ASSERT(t, WIFSIGNALED(t->proc[s1].status) && WTERMSIG(t->proc[s1].status) == SIGKILL &&
                 it_log_has(t, s1, "auto-written:2", 0),
              "server 1 ended otherwise (%s)", it_status_str(&t->proc[s1], buf, sizeof buf));
    for (int i = 0; i < t->nproc; i++)
        it_kill(t, i, SIGKILL);
    for (int i = 0; i < t->nproc; i++)
        it_wait(t, i, 10);
    char p4[PATH_MAX + 64];
    snprintf(p4, sizeof p4, "%s/gen-000000000004/server-1.kvsckpt", dir);
    IT_ASSERT(t, access(p4, F_OK) == 0, "%s is missing: server 1 died before writing it", p4);
    it_setenv(t, "KVS_CHECKPOINT_DIR", "%s", "");
    it_setenv(t, "KVS_CHECKPOINT_EVERY", "0");
    const char *load[] = {"train", "--spec", spec, "--from", "6", "--rounds", "6", "--load", dir,
                          "--pull-dump", "loaded.bin", NULL};
    start_job(t, load);
    it_expect_job_ok(t, 60);
    IT_ASSERT(t, files_same(t, "loaded.bin", "round2.bin"),
              "the load did not restore round 2's weights bit for bit");
}
