/*
 * test_security.c - nobody on the wire is trusted: refused registrations
 * reach the refused node (which exits at once naming the reason), outsiders
 * without the job secret get nothing and change no sum, huge declared frames
 * do not grow memory, direct copies need proof of ownership, a server out of
 * memory answers KVS_ENOMEM.
 */
#include "tests.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* Wait up to secs for proc idx's log to contain needle. */
static int wait_log(it_ctx *t, int idx, const char *needle, double secs)
{
    double end = it_now() + secs * it_slow;
    while (!it_log_has(t, idx, needle, 0)) {
        if (it_now() > end)
            return 0;
        it_nap_ms(20);
    }
    return 1;
}

static void sec_env(it_ctx *t)
{
    it_setenv(t, "MXNET_KVSTORE_BIGARRAY_BOUND", "1000");
    it_setenv(t, "KVS_START_TIMEOUT", "30");
    it_setenv(t, "PS_VERBOSE", "1");
}

/* A worker whose id is taken and a worker past the job's size are refused
 * at once (not after KVS_START_TIMEOUT) with the reason; the job goes on. */
IT_TEST(refused_registration_1x1)
{
    static const char *const sum[] = {"sum", "--dtype", "f32", "--rounds", "2", NULL};
    static const char *const taken[] = {"create-error", "KVS_ECONFIG", "id taken", NULL};
    static const char *const full[] = {"create-error", "KVS_ECONFIG", "job full", NULL};
    sec_env(t);
    it_start_scheduler(t, 1, 1, NULL);
    it_start_worker(t, 0, sum, NULL);
    IT_ASSERT(t, wait_log(t, t->sched, "registered worker", 10), "worker 0 did not register");
    /* worker 0 registers (the job waits for its server); a second worker 0 */
    double t0 = it_now();
    int dup = it_spawn(t, "worker0-again", t->worker_bin, taken,
                       (const char *const[]){"DMLC_ROLE=worker", "DMLC_WORKER_ID=0", NULL});
    it_expect_exit(t, dup, 0, 10);
    int extra = it_spawn(t, "worker-extra", t->worker_bin, full,
                         (const char *const[]){"DMLC_ROLE=worker", "DMLC_WORKER_ID", NULL});
    it_expect_exit(t, extra, 0, 10);
    double took = it_now() - t0;
    IT_ASSERT(t, took < 10 * it_slow, "the refusals took %.1f s", took);
    IT_ASSERT(t, it_log_has(t, t->sched, "refused a worker", 0), "the scheduler logged no refusal");
    it_start_server(t, 0, NULL);
    it_expect_job_ok(t, 30);
}

/* Virtual memory size of pid in bytes (VmSize), or 0. */
static unsigned long long vm_size(pid_t pid, const char *field)
{
    char path[64], line[256];
    unsigned long long kb = 0;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, strlen(field)) == 0)
            kb = strtoull(line + strlen(field), NULL, 10);
    fclose(f);
    return kb * 1024;
}

/* Start server i with a port file; returns its port. */
static int start_server_port(it_ctx *t, int i, const char *const *more)
{
    char pf[PATH_MAX + 32], name[32];
    const char *env[8] = {pf};
    int k = 1;
    snprintf(pf, sizeof pf, "KVS_PORT_FILE=%s/server%d.port", t->dir, i);
    for (int j = 0; more && more[j] && k < 7; j++)
        env[k++] = more[j];
    env[k] = NULL;
    int s = it_start_server(t, i, env);
    snprintf(name, sizeof name, "server%d.port", i);
    IT_ASSERT(t, it_wait_file(t, name, 10, s), "server%d did not write KVS_PORT_FILE", i);
    int port = it_read_port_file(t, name);
    IT_ASSERT(t, port > 0, "server%d's port file does not hold a port", i);
    return port;
}

/* A server that cannot allocate a key's buffer answers KVS_ENOMEM (the
 * worker's call returns it at once) and keeps serving the job. */
IT_TEST(server_enomem_1x1)
{
    static const char *const argv[] = {"enomem", "--counts", "268435456", NULL};
    sec_env(t);
    it_start_scheduler(t, 1, 1, NULL);
    start_server_port(t, 0, NULL);
    pid_t pid = t->proc[t->server[0]].pid;
    unsigned long long vm = vm_size(pid, "VmSize:");
    IT_ASSERT(t, vm > 0, "cannot read the server's VmSize");
    /* 256 MiB more address space than it has (malloc pads the heap by
     * 64 MiB): a 1 GiB key cannot fit, the rest of the job can */
    struct rlimit rl = {vm + (256ull << 20), vm + (256ull << 20)};
    IT_ASSERT(t, prlimit(pid, RLIMIT_AS, &rl, NULL) == 0, "prlimit: %s", strerror(errno));
    it_info(t, "server VmSize %llu MiB, RLIMIT_AS %llu MiB", vm >> 20,
            (unsigned long long)rl.rlim_cur >> 20);
    /* one message for the whole key: the server's one allocation fails and
     * it keeps all of its headroom for the rest of the job */
    it_start_worker(t, 0, argv, (const char *const[]){"KVS_CHUNK_BYTES=1073741824", NULL});
    it_expect_job_ok(t, 60);
    IT_ASSERT(t, it_log_has(t, t->worker[0], "returned KVS_ENOMEM", 0), "no KVS_ENOMEM");
}
