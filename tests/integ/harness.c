/*
 * harness.c - spawning, waiting and checking for the integration tests.
 * See harness.h.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

double it_slow = 1.0;

/* Grace period between SIGTERM and SIGKILL at clean-up. */
#define IT_GRACE_S 3.0
/* Deadline for the scheduler to report its port. */
#define IT_PORT_TIMEOUT_S 10.0

double it_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void it_nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

void it_info(it_ctx *t, const char *fmt, ...)
{
    (void)t;
    va_list ap;
    va_start(ap, fmt);
    fputs("# ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
}

static void xstrcpy(char *dst, size_t len, const char *src)
{
    snprintf(dst, len, "%s", src);
}

bool it_sanitized(void)
{
    const char *build = getenv("BUILD");
    return build != NULL && strstr(build, "asan") != NULL;
}

void it_ctx_init(it_ctx *t, const char *name, const char *dir)
{
    const char *build = getenv("BUILD");
    if (build == NULL || build[0] == '\0')
        build = "build";
    memset(t, 0, sizeof *t);
    t->test = name;
    t->sched = -1;
    xstrcpy(t->dir, sizeof t->dir, dir);
    if (strlen(dir) >= sizeof t->dir)
        it_fail(t, __FILE__, __LINE__, "test directory name too long: %s", dir);
    snprintf(t->sched_bin, sizeof t->sched_bin, "%s/kvs-scheduler", build);
    snprintf(t->server_bin, sizeof t->server_bin, "%s/kvs-server", build);
    snprintf(t->worker_bin, sizeof t->worker_bin, "%s/tests/kvs-testworker", build);
}

const char *it_status_str(const it_proc *p, char *buf, size_t len)
{
    if (!p->reaped)
        snprintf(buf, len, "running (pid %d)", (int)p->pid);
    else if (WIFEXITED(p->status))
        snprintf(buf, len, "exit %d after %.2f s", WEXITSTATUS(p->status), p->t_end - p->t_start);
    else if (WIFSIGNALED(p->status))
        snprintf(buf, len, "signal %d (%s) after %.2f s", WTERMSIG(p->status),
                 strsignal(WTERMSIG(p->status)), p->t_end - p->t_start);
    else
        snprintf(buf, len, "status 0x%x", p->status);
    return buf;
}

static void reap(it_proc *p, int status)
{
    p->reaped = 1;
    p->status = status;
    p->t_end = it_now();
}

void it_poll(it_ctx *t)
{
    for (int i = 0; i < t->nproc; i++) {
        it_proc *p = &t->proc[i];
        int status;
        if (p->reaped)
            continue;
        pid_t r = waitpid(p->pid, &status, WNOHANG);
        if (r == p->pid)
            reap(p, status);
        else if (r < 0 && errno == ECHILD)
            reap(p, 0x7f00); /* lost: should not happen */
    }
}

int it_wait(it_ctx *t, int idx, double timeout_s)
{
    it_proc *p = &t->proc[idx];
    double deadline = it_now() + timeout_s * it_slow;
    for (;;) {
        it_poll(t);
        if (p->reaped)
            return 1;
        if (it_now() >= deadline)
            return 0;
        it_nap_ms(5);
    }
}

static void terminate_all(it_ctx *t)
{
    int left = 0;
    it_poll(t);
    for (int i = 0; i < t->nproc; i++)
        if (!t->proc[i].reaped) {
            kill(t->proc[i].pid, SIGTERM);
            left++;
        }
    if (left == 0)
        return;
    double deadline = it_now() + IT_GRACE_S * it_slow;
    while (it_now() < deadline) {
        it_poll(t);
        left = 0;
        for (int i = 0; i < t->nproc; i++)
            left += !t->proc[i].reaped;
        if (left == 0)
            return;
        it_nap_ms(5);
    }
    for (int i = 0; i < t->nproc; i++)
        if (!t->proc[i].reaped) {
            int status;
            fprintf(stderr, "# %s (pid %d) ignored SIGTERM for %.0f s: SIGKILL\n",
                    t->proc[i].name, (int)t->proc[i].pid, IT_GRACE_S * it_slow);
            kill(t->proc[i].pid, SIGKILL);
            if (waitpid(t->proc[i].pid, &status, 0) == t->proc[i].pid)
                reap(&t->proc[i], status);
        }
}

void it_ctx_fini(it_ctx *t)
{
    terminate_all(t);
    for (int i = 0; i < t->nenv; i++)
        free(t->env[i]);
    t->nenv = 0;
}

static void print_procs(it_ctx *t)
{
    char buf[128];
    it_poll(t);
    for (int i = 0; i < t->nproc; i++)
        fprintf(stderr, "#   %-12s %s\n", t->proc[i].name, it_status_str(&t->proc[i], buf, sizeof buf));
}

void it_fail(it_ctx *t, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "# %s:%d: FAILED: ", file, line);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fprintf(stderr, "# processes at the failure:\n");
    print_procs(t);
    fflush(stderr);
    it_ctx_fini(t);
    _exit(1);
}

void it_skip(it_ctx *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "# SKIP: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    it_ctx_fini(t);
    _exit(IT_EXIT_SKIP);
}

/* ---- environment ---- */

static int env_name_len(const char *entry)
{
    const char *eq = strchr(entry, '=');
    return eq ? (int)(eq - entry) : (int)strlen(entry);
}

static int same_name(const char *a, const char *b)
{
    int la = env_name_len(a), lb = env_name_len(b);
    return la == lb && strncmp(a, b, (size_t)la) == 0;
}

void it_setenv(it_ctx *t, const char *name, const char *fmt, ...)
{
    char val[1024], *entry;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(val, sizeof val, fmt, ap);
    va_end(ap);
    if (asprintf(&entry, "%s=%s", name, val) < 0)
        it_fail(t, __FILE__, __LINE__, "out of memory");
    for (int i = 0; i < t->nenv; i++)
        if (same_name(t->env[i], entry)) {
            free(t->env[i]);
            t->env[i] = entry;
            return;
        }
    IT_ASSERT(t, t->nenv < IT_MAX_ENV, "too many job variables");
    t->env[t->nenv++] = entry;
}

static int is_job_var(const char *entry)
{
    static const char *const prefixes[] = {"DMLC_", "PS_", "MXNET_", "KVS_", NULL};
    for (int i = 0; prefixes[i]; i++)
        if (strncmp(entry, prefixes[i], strlen(prefixes[i])) == 0)
            return 1;
    return 0;
}

/* KVS_INTEG_ENV: NAME=VALUE words given to every process of every test
 * before the test's own settings (which win), e.g. KVS_LOCAL_AGG=0 to run
 * the suites without local groups.  Split once; kept for the process. */
static char **integ_env(int *count)
{
    static char **words;
    static int nwords = -1;
    if (nwords < 0) {
        const char *e = getenv("KVS_INTEG_ENV");
        char *copy = e ? strdup(e) : NULL, *save = NULL;
        nwords = 0;
        words = calloc(copy ? strlen(copy) / 2 + 2 : 1, sizeof *words);
        for (char *w = copy && words ? strtok_r(copy, " \t", &save) : NULL; w;
             w = strtok_r(NULL, " \t", &save))
            if (strchr(w, '=') != NULL && w[0] != '=')
                words[nwords++] = w;
    }
    *count = nwords;
    return words;
}

/* Build the environment of a child: returns a malloc'd NULL-terminated array
 * whose strings belong to environ, KVS_INTEG_ENV, t->env or extra (not
 * copied). */
static char **build_env(it_ctx *t, const char *const *extra)
{
    int nint;
    char **inte = integ_env(&nint);
    size_t n = 0, cap = 16 + (size_t)t->nenv + (size_t)nint;
    for (char **e = environ; *e; e++)
        cap++;
    if (extra)
        for (const char *const *e = extra; *e; e++)
            cap++;
    char **env = calloc(cap + 1, sizeof *env);
    IT_ASSERT(t, env != NULL, "out of memory");
    for (char **e = environ; *e; e++)
        if (!is_job_var(*e))
            env[n++] = *e;
    const char *const *lists[3] = {(const char *const *)inte, (const char *const *)t->env,
                                   extra};
    int counts[3] = {nint, t->nenv, -1};
    for (int l = 0; l < 3; l++) {
        if (lists[l] == NULL)
            continue;
        for (int i = 0; counts[l] < 0 ? lists[l][i] != NULL : i < counts[l]; i++) {
            const char *entry = lists[l][i];
            size_t j;
            for (j = 0; j < n; j++)
                if (same_name(env[j], entry))
                    break;
            if (strchr(entry, '=') == NULL) { /* "NAME": remove */
                if (j < n) {
                    env[j] = env[n - 1];
                    n--;
                }
                continue;
            }
            env[j] = (char *)entry;
            if (j == n)
                n++;
        }
    }
    env[n] = NULL;
    return env;
}

int it_spawn(it_ctx *t, const char *name, const char *bin, const char *const *argv,
             const char *const *extra)
{
    IT_ASSERT(t, t->nproc < IT_MAX_PROCS, "too many processes");
    IT_ASSERT(t, access(bin, X_OK) == 0, "%s: not an executable (build it first)", bin);
    it_proc *p = &t->proc[t->nproc];
    memset(p, 0, sizeof *p);
    xstrcpy(p->name, sizeof p->name, name);
    snprintf(p->log, sizeof p->log, "%s/%s.log", t->dir, name);

    const char *args[64];
    int na = 0;
    args[na++] = bin;
    if (argv)
        for (int i = 0; argv[i] && na < 63; i++)
            args[na++] = argv[i];
    args[na] = NULL;
    char **env = build_env(t, extra);

    int fd = open(p->log, O_WRONLY | O_CREAT | O_APPEND | O_TRUNC | O_CLOEXEC, 0644);
    IT_ASSERT(t, fd >= 0, "open %s: %s", p->log, strerror(errno));
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    IT_ASSERT(t, pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        /* Die with the test child, whatever happens to it. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int null = open("/dev/null", O_RDONLY);
        if (null >= 0)
            dup2(null, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        signal(SIGPIPE, SIG_DFL);
        execve(bin, (char *const *)args, env);
        dprintf(2, "harness: exec %s: %s\n", bin, strerror(errno));
        _exit(127);
    }
    close(fd);
    free(env);
    p->pid = pid;
    p->t_start = it_now();
    return t->nproc++;
}

/* ---- files ---- */

void it_use_worker(it_ctx *t, const char *name)
{
    char *p = strstr(t->worker_bin, "kvs-testworker");
    if (p != NULL)
        snprintf(p, sizeof t->worker_bin - (size_t)(p - t->worker_bin), "%s", name);
}

char *it_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0)
            break;
        if (cap - n - 1 == 0) {
            char *nb = realloc(buf, cap * 2);
            if (nb == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        if (len)
            *len = n;
    }
    return buf;
}

void it_same_files(it_ctx *t, const char *a, const char *b)
{
    char pa[PATH_MAX + 64], pb[PATH_MAX + 64];
    size_t la = 0, lb = 0;
    snprintf(pa, sizeof pa, "%s/%s", t->dir, a);
    snprintf(pb, sizeof pb, "%s/%s", t->dir, b);
    char *x = it_slurp(pa, &la), *y = it_slurp(pb, &lb);
    IT_ASSERT(t, x && y, "%s or %s is missing", a, b);
    IT_ASSERT(t, la == lb && la > 0, "%s has %zu bytes, %s %zu", a, la, b, lb);
    size_t i = 0;
    while (i < la && x[i] == y[i])
        i++;
    IT_ASSERT(t, i == la, "%s and %s differ first at byte %zu of %zu", a, b, i, la);
    it_info(t, "%s and %s: %zu bytes, identical", a, b, la);
    free(x);
    free(y);
}

void it_same_values(it_ctx *t, int nworkers, const char *a, const char *b)
{
    for (int w = 0; w < nworkers; w++) {
        char fa[256], fb[256];
        snprintf(fa, sizeof fa, "%s-w%d", a, w);
        snprintf(fb, sizeof fb, "%s-w%d", b, w);
        it_same_files(t, fa, fb);
    }
}

char *it_read_log(const it_ctx *t, int idx)
{
    char *s = it_slurp(t->proc[idx].log, NULL);
    return s ? s : strdup("");
}

int it_log_has(const it_ctx *t, int idx, const char *needle, int nocase)
{
    char *log = it_read_log(t, idx);
    int found = (nocase ? strcasestr(log, needle) : strstr(log, needle)) != NULL;
    free(log);
    return found;
}

int it_wait_log(it_ctx *t, int idx, const char *needle, double timeout_s)
{
    double end = it_now() + timeout_s * it_slow;
    for (;;) {
        if (it_log_has(t, idx, needle, 0))
            return 1;
        if (it_now() > end)
            return 0;
        it_nap_ms(20);
    }
}

static void dir_path(const it_ctx *t, const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", t->dir, name);
}

int it_wait_file(it_ctx *t, const char *name, double timeout_s, int watch)
{
    char path[PATH_MAX];
    dir_path(t, name, path, sizeof path);
    double deadline = it_now() + timeout_s * it_slow;
    for (;;) {
        if (access(path, F_OK) == 0)
            return 1;
        if (watch >= 0) {
            it_poll(t);
            if (t->proc[watch].reaped) {
                char buf[128];
                if (access(path, F_OK) == 0)
                    return 1;
                it_fail(t, __FILE__, __LINE__, "%s ended (%s) before %s appeared",
                        t->proc[watch].name, it_status_str(&t->proc[watch], buf, sizeof buf), path);
            }
        }
        if (it_now() >= deadline)
            return 0;
        it_nap_ms(5);
    }
}

void it_write_file(it_ctx *t, const char *name, const char *text)
{
    char path[PATH_MAX], tmp[PATH_MAX + 8];
    dir_path(t, name, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    IT_ASSERT(t, f != NULL, "create %s: %s", tmp, strerror(errno));
    fputs(text, f);
    IT_ASSERT(t, fclose(f) == 0, "write %s: %s", tmp, strerror(errno));
    IT_ASSERT(t, rename(tmp, path) == 0, "rename %s: %s", tmp, strerror(errno));
}

int it_read_port_file(const it_ctx *t, const char *name)
{
    char path[PATH_MAX];
    dir_path(t, name, path, sizeof path);
    char *s = it_slurp(path, NULL);
    if (s == NULL)
        return -1;
    char *end;
    long v = strtol(s, &end, 10);
    int ok = end != s && (*end == '\n' || *end == '\0') && v > 0 && v < 65536;
    free(s);
    return ok ? (int)v : -1;
}

/* ---- processes of a job ---- */

void it_kill(it_ctx *t, int idx, int sig)
{
    it_poll(t);
    if (!t->proc[idx].reaped)
        kill(t->proc[idx].pid, sig);
}

int it_exited_with(const it_ctx *t, int idx, int code)
{
    const it_proc *p = &t->proc[idx];
    return p->reaped && WIFEXITED(p->status) && WEXITSTATUS(p->status) == code;
}

int it_start_scheduler(it_ctx *t, int nserver, int nworker, const char *const *extra)
{
    char portfile[PATH_MAX + 32];
    snprintf(portfile, sizeof portfile, "KVS_PORT_FILE=%s/scheduler.port", t->dir);
    it_setenv(t, "DMLC_PS_ROOT_URI", "127.0.0.1");
    it_setenv(t, "DMLC_NODE_HOST", "127.0.0.1");
    it_setenv(t, "DMLC_NUM_SERVER", "%d", nserver);
    it_setenv(t, "DMLC_NUM_WORKER", "%d", nworker);
    if (extra == NULL) {
        static const char *const none[] = {NULL};
        extra = none;
    }
    const char *env[IT_MAX_ENV + 4];
    int n = 0;
    env[n++] = "DMLC_ROLE=scheduler";
    env[n++] = "DMLC_PS_ROOT_PORT=0";
    env[n++] = portfile;
    for (int i = 0; extra[i] && n < IT_MAX_ENV; i++)
        env[n++] = extra[i];
    env[n] = NULL;
    int idx = it_spawn(t, "scheduler", t->sched_bin, NULL, env);
    t->sched = idx;
    IT_ASSERT(t, it_wait_file(t, "scheduler.port", IT_PORT_TIMEOUT_S, idx),
              "the scheduler did not write KVS_PORT_FILE within %.0f s", IT_PORT_TIMEOUT_S * it_slow);
    t->port = it_read_port_file(t, "scheduler.port");
    IT_ASSERT(t, t->port > 0, "the scheduler's port file does not hold a port number");
    it_setenv(t, "DMLC_PS_ROOT_PORT", "%d", t->port);
    return idx;
}

int it_start_server(it_ctx *t, int i, const char *const *extra)
{
    char name[IT_NAME_MAX], id[32];
    const char *env[IT_MAX_ENV + 4];
    int n = 0;
    snprintf(name, sizeof name, "server%d", i);
    snprintf(id, sizeof id, "DMLC_SERVER_ID=%d", i);
    env[n++] = "DMLC_ROLE=server";
    env[n++] = id;
    for (int k = 0; extra && extra[k] && n < IT_MAX_ENV; k++)
        env[n++] = extra[k];
    env[n] = NULL;
    int idx = it_spawn(t, name, t->server_bin, NULL, env);
    t->server[t->nserver++] = idx;
    return idx;
}

int it_start_worker(it_ctx *t, int i, const char *const *argv, const char *const *extra)
{
    char name[IT_NAME_MAX], id[32], dir[PATH_MAX + 16];
    const char *env[IT_MAX_ENV + 4];
    int n = 0;
    snprintf(name, sizeof name, "worker%d", i);
    snprintf(id, sizeof id, "DMLC_WORKER_ID=%d", i);
    snprintf(dir, sizeof dir, "KVS_TEST_DIR=%s", t->dir);
    env[n++] = "DMLC_ROLE=worker";
    env[n++] = id;
    env[n++] = dir;
    for (int k = 0; extra && extra[k] && n < IT_MAX_ENV; k++)
        env[n++] = extra[k];
    env[n] = NULL;
    int idx = it_spawn(t, name, t->worker_bin, argv, env);
    t->worker[t->nworker++] = idx;
    return idx;
}

void it_start_job(it_ctx *t, int nserver, int nworker, const char *const *argv)
{
    it_start_scheduler(t, nserver, nworker, NULL);
    for (int i = 0; i < nserver; i++)
        it_start_server(t, i, NULL);
    for (int i = 0; i < nworker; i++)
        it_start_worker(t, i, argv, NULL);
}

void it_expect_exit_at(it_ctx *t, int idx, int code, double timeout_s, const char *file, int line)
{
    char buf[128];
    it_proc *p = &t->proc[idx];
    if (!it_wait(t, idx, timeout_s))
        it_fail(t, file, line, "%s did not exit within %.1f s", p->name, timeout_s * it_slow);
    if (!it_exited_with(t, idx, code))
        it_fail(t, file, line, "%s: expected exit %d, got %s", p->name, code,
                it_status_str(p, buf, sizeof buf));
}

void it_expect_job_ok_at(it_ctx *t, double timeout_s, const char *file, int line)
{
    for (int i = 0; i < t->nworker; i++)
        it_expect_exit_at(t, t->worker[i], 0, timeout_s, file, line);
    if (t->sched >= 0)
        it_expect_exit_at(t, t->sched, 0, 15, file, line);
    for (int i = 0; i < t->nserver; i++)
        it_expect_exit_at(t, t->server[i], 0, 15, file, line);
}

int it_dead_port(it_ctx *t)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    IT_ASSERT(t, fd >= 0, "socket: %s", strerror(errno));
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    IT_ASSERT(t, bind(fd, (struct sockaddr *)&a, sizeof a) == 0, "bind: %s", strerror(errno));
    IT_ASSERT(t, getsockname(fd, (struct sockaddr *)&a, &len) == 0, "getsockname: %s",
              strerror(errno));
    close(fd);
    return ntohs(a.sin_port);
}

size_t it_raw_flood(it_ctx *t, int port, const void *const *parts, const size_t *lens,
                    int nparts, int fill)
{
    struct sockaddr_in a = {0};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    size_t sent = 0;
    IT_ASSERT(t, fd >= 0, "socket: %s", strerror(errno));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    IT_ASSERT(t, connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "connect: %s",
              strerror(errno));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval tv = {2, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int i = 0;
    while (i < nparts && send(fd, parts[i], lens[i], MSG_NOSIGNAL) == (ssize_t)lens[i])
        i++;
    if (i == nparts) {
        static uint8_t junk[1 << 20];
        memset(junk, fill, sizeof junk);
        while (sent < (256u << 20)) {
            ssize_t n = send(fd, junk, sizeof junk, MSG_NOSIGNAL);
            if (n <= 0)
                break; /* the peer closed (or stopped reading for 2 s) */
            sent += (size_t)n;
        }
    }
    close(fd);
    return sent;
}
