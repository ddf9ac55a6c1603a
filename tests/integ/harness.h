/*
 * harness.h - process harness of the multi-process integration tests.
 *
 * The runner (runner.c) forks one child per test; the child creates an
 * it_ctx for the test's private directory and calls the test function.
 * Inside a test, the helpers below spawn real processes (kvs-scheduler,
 * kvs-server, kvs-testworker) with a constructed environment, each with its
 * stdout+stderr captured to "<dir>/<name>.log", wait for conditions with
 * deadlines, and check exit statuses and logs.  The first failed IT_ASSERT
 * ends the test: every child still running gets SIGTERM, then SIGKILL after a
 * grace period, and the test child exits 1.  The runner prints the logs of a
 * failed test, never those of a passed one.
 *
 * Threads: none.  An it_ctx belongs to the test child that made it; nothing
 * here is safe to call from another process or thread.
 */
#ifndef KVS_TESTS_INTEG_HARNESS_H
#define KVS_TESTS_INTEG_HARNESS_H

#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/types.h>

#define IT_MAX_PROCS 32
#define IT_MAX_ENV 64
#define IT_NAME_MAX 48

/* Exit code a test child uses to say "skipped". */
#define IT_EXIT_SKIP 77

typedef struct it_proc {
    char name[IT_NAME_MAX]; /* "scheduler", "server0", "worker2", ... */
    char log[PATH_MAX];     /* captured stdout+stderr */
    pid_t pid;
    int reaped;             /* 1 once waitpid() returned it */
    int status;             /* raw wait status, valid when reaped */
    double t_start, t_end;  /* it_now() at spawn and at reaping */
} it_proc;

typedef struct it_ctx {
    const char *test;             /* test name */
    char dir[1024];               /* private directory of the test */
    char sched_bin[PATH_MAX];     /* $BUILD/kvs-scheduler */
    char server_bin[PATH_MAX];    /* $BUILD/kvs-server */
    char worker_bin[PATH_MAX];    /* $BUILD/tests/kvs-testworker */
    it_proc proc[IT_MAX_PROCS];
    int nproc;
    char *env[IT_MAX_ENV];        /* job-wide "NAME=value", owned, given to every process */
    int nenv;
    int port;                     /* scheduler port once it_start_scheduler() returned */
    int sched;                    /* proc index of the scheduler, -1 before */
    int server[IT_MAX_PROCS];     /* proc index of server i */
    int nserver;
    int worker[IT_MAX_PROCS];     /* proc index of worker process i */
    int nworker;
    int failures;                 /* IT_CHECK failures so far */
} it_ctx;

/* Multiplier for every deadline (env KVS_INTEG_SLOW, default 1; 3 on a
 * sanitized build, it_sanitized()). */
extern double it_slow;

/* True when the binaries under test are a sanitized build: the build
 * directory ($BUILD) names "asan".  Its allocator keeps freed memory and its
 * loops run several times slower, so memory and speed say less there. */
bool it_sanitized(void);

/* Monotonic seconds. */
double it_now(void);

/* Sleep ms milliseconds: only ever used between polls of a condition. */
void it_nap_ms(int ms);

/* Set up t for test name in directory dir (which exists).  Reads $BUILD. */
void it_ctx_init(it_ctx *t, const char *name, const char *dir);

/* SIGTERM every unreaped child, SIGKILL what is left after a grace period,
 * reap all, free t's memory. */
void it_ctx_fini(it_ctx *t);

/* Fail the test: print "file:line: message" and the state of every child,
 * clean up and exit the test child with status 1.  Never returns. */
void it_fail(it_ctx *t, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5), noreturn));

/* Skip the test (exit IT_EXIT_SKIP) with a reason.  Never returns. */
void it_skip(it_ctx *t, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

/* Print an informational line into the test's output (shown on failure). */
void it_info(it_ctx *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define IT_ASSERT(t, cond, ...)                                  \
    do {                                                         \
        if (!(cond))                                             \
            it_fail((t), __FILE__, __LINE__, __VA_ARGS__);       \
    } while (0)

/* A failed check that lets the test go on (the test still fails at the end). */
#define IT_CHECK(t, cond, ...)                                   \
    do {                                                         \
        if (!(cond)) {                                           \
            it_info((t), "%s:%d: CHECK FAILED: ", __FILE__, __LINE__); \
            it_info((t), __VA_ARGS__);                           \
            (t)->failures++;                                     \
        }                                                        \
    } while (0)

/* Job-wide environment: every process spawned afterwards gets NAME=value. */
void it_setenv(it_ctx *t, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Spawn bin with argv (argv[0] is set to bin; argv may be NULL) and an
 * environment made of: the runner's own environment minus every DMLC_*, PS_*,
 * MXNET_*, KVS_* variable; then t's job environment; then extra (a
 * NULL-terminated list of "NAME=value", or "NAME" alone to remove NAME; may
 * be NULL).  stdin is /dev/null; stdout and stderr go to <dir>/<name>.log.
 * Returns the proc index. */
int it_spawn(it_ctx *t, const char *name, const char *bin, const char *const *argv,
             const char *const *extra);

/* Start the scheduler of a job of nserver servers and nworker workers on
 * 127.0.0.1, port 0, and wait (with a deadline) until it reported its port.
 * Sets t->port and DMLC_PS_ROOT_PORT in the job environment. */
int it_start_scheduler(it_ctx *t, int nserver, int nworker, const char *const *extra);

/* Start server i with DMLC_SERVER_ID=i. */
int it_start_server(it_ctx *t, int i, const char *const *extra);

/* Start a kvs-testworker process i with argv (NULL-terminated, without
 * argv[0]); DMLC_WORKER_ID=i unless extra removes it.  KVS_TEST_DIR=t->dir. */
int it_start_worker(it_ctx *t, int i, const char *const *argv, const char *const *extra);

/* Scheduler, nserver servers and nworker workers all running argv. */
void it_start_job(it_ctx *t, int nserver, int nworker, const char *const *argv);

/* Wait up to timeout_s (times it_slow) for proc idx to exit.  Returns 1 if
 * it has exited (t->proc[idx].status is set), 0 on timeout. */
int it_wait(it_ctx *t, int idx, double timeout_s);

/* Reap whatever has exited, without blocking. */
void it_poll(it_ctx *t);

/* Assert that proc idx exits with code within timeout_s. */
void it_expect_exit_at(it_ctx *t, int idx, int code, double timeout_s, const char *file, int line);
#define it_expect_exit(t, idx, code, timeout_s) \
    it_expect_exit_at((t), (idx), (code), (timeout_s), __FILE__, __LINE__)

/* Every worker exits 0 within timeout_s, then the scheduler and every server
 * exit 0 within 15 s more. */
void it_expect_job_ok_at(it_ctx *t, double timeout_s, const char *file, int line);
#define it_expect_job_ok(t, timeout_s) it_expect_job_ok_at((t), (timeout_s), __FILE__, __LINE__)

/* Describe a wait status: "exit 0", "signal 9 (Killed)", "running". */
const char *it_status_str(const it_proc *p, char *buf, size_t len);

/* 1 if proc idx exited normally with code. */
int it_exited_with(const it_ctx *t, int idx, int code);

/* Contents of proc idx's log (malloc'd, NUL-terminated; free it). */
char *it_read_log(const it_ctx *t, int idx);

/* 1 if proc idx's log contains needle (case-insensitive when nocase). */
int it_log_has(const it_ctx *t, int idx, const char *needle, int nocase);

/* Wait until proc idx's log contains needle, up to timeout_s (times
 * it_slow).  Returns 1 if it does. */
int it_wait_log(it_ctx *t, int idx, const char *needle, double timeout_s);

/* Wait until file <dir>/name exists, up to timeout_s; fail the test early if
 * proc watch (>= 0) exits meanwhile.  Returns 1 if it exists. */
int it_wait_file(it_ctx *t, const char *name, double timeout_s, int watch);

/* Write text to <dir>/name atomically (temp file + rename). */
void it_write_file(it_ctx *t, const char *name, const char *text);

/* Run name (a program beside kvs-testworker, e.g. "kvs-replworker") as the
 * worker of the processes started from now on. */
void it_use_worker(it_ctx *t, const char *name);

/* Read a whole file (malloc'd) or NULL. */
char *it_slurp(const char *path, size_t *len);

/* Files a and b of t's directory hold the same bytes (and some); else the
 * test fails naming the first byte that differs. */
void it_same_files(it_ctx *t, const char *a, const char *b);

/* it_same_files for a-w<r> and b-w<r> (the final values worker r wrote in
 * two runs), every r < nworkers. */
void it_same_values(it_ctx *t, int nworkers, const char *a, const char *b);

/* Send sig to proc idx (if still running). */
void it_kill(it_ctx *t, int idx, int sig);

/* A TCP port on 127.0.0.1 where nothing listens (bound, then closed). */
int it_dead_port(it_ctx *t);

/* Connect to 127.0.0.1:port over raw TCP, send the nparts parts (a
 * handshake that declares something huge), then stream up to 256 MiB of
 * fill bytes until the peer closes or stops reading for 2 s.  Returns the
 * fill bytes the peer took (0 if a part did not go out). */
size_t it_raw_flood(it_ctx *t, int port, const void *const *parts, const size_t *lens,
                    int nparts, int fill);

/* Read "<dir>/name" as a decimal port number, or -1. */
int it_read_port_file(const it_ctx *t, const char *name);

#endif
