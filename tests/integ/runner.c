/*
 * runner.c - test-integ: run the multi-process integration tests.
 *
 *   test-integ [--list] [PATTERN...]
 *
 * PATTERN is a test name or a shell glob ("sum_*").  Each test runs in a
 * forked child, in its own process group and its own directory under
 * $TMPDIR/kvs-integ-XXXXXX, with a deadline; a test that hangs is killed
 * (the whole group: SIGTERM, then SIGKILL) and counts as failed.  The logs
 * of a failed test (its own output and every process's log) are printed;
 * those of a passed test are removed.  The last line is
 *   "integ: N passed, N failed[, N skipped, N flaky]".
 * A test of IT_FLAKY_LIST (tests.h) that fails is run once more, after its
 * logs are printed; passing then, it counts as passed and is named on a
 * "# flaky" line and in the flaky count, so that flakes stay visible.
 * Environment: BUILD (default "build"), KVS_INTEG_SLOW (deadline factor),
 * KVS_INTEG_KEEP=1 (keep the directories of passed tests too),
 * KVS_INTEG_ENV (NAME=VALUE words for every process, under each test's own
 * settings: KVS_INTEG_ENV=KVS_LOCAL_AGG=0 runs the suites without local
 * groups).
 */
#include "tests.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct it_test {
    const char *name;
    void (*fn)(it_ctx *t);
    int deadline_s;
} it_test;

static const it_test tests[] = {
#define IT_ENTRY_(name, secs) {#name, it_test_##name, secs},
    IT_TEST_LIST(IT_ENTRY_)
#undef IT_ENTRY_
};
#define NTESTS ((int)(sizeof tests / sizeof tests[0]))

/* Print at most this much of the end of each log of a failed test. */
#define LOG_TAIL_BYTES (48 * 1024)

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void rm_rf(const char *dir)
{
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void dump_file(const char *title, const char *path)
{
    size_t len = 0;
    char *s = it_slurp(path, &len);
    printf("---- %s (%s) ----\n", title, path);
    if (s == NULL) {
        printf("(cannot read: %s)\n", strerror(errno));
        return;
    }
    const char *start = s;
    if (len > LOG_TAIL_BYTES) {
        start = s + len - LOG_TAIL_BYTES;
        printf("(... %zu bytes left out ...)\n", len - LOG_TAIL_BYTES);
    }
    fputs(start, stdout);
    if (len > 0 && s[len - 1] != '\n')
        putchar('\n');
    free(s);
}

/* The test's own output first, then every process log in name order. */
static void dump_logs(const char *dir)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/test.out", dir);
    dump_file("test output", path);
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    char *names[256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < 256) {
        size_t l = strlen(e->d_name);
        if (l > 4 && strcmp(e->d_name + l - 4, ".log") == 0)
            names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], cmp_str);
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        dump_file(names[i], path);
        free(names[i]);
    }
    printf("---- end of logs (kept in %s) ----\n", dir);
}

static void run_child(const it_test *test, const char *dir)
{
    char path[PATH_MAX];
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    snprintf(path, sizeof path, "%s/test.out", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    it_ctx t;
    it_ctx_init(&t, test->name, dir);
    test->fn(&t);
    int failed = t.failures;
    it_ctx_fini(&t);
    fflush(NULL);
    _exit(failed ? 1 : 0);
}

/* Wait for the test child until the deadline; kill its group on timeout.
 * Returns the wait status, or -1 on timeout. */
static int wait_child(pid_t pid, double deadline_s)
{
    int status;
    double deadline = it_now() + deadline_s;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR)
            return -2;
        if (it_now() >= deadline) {
            kill(-pid, SIGTERM);
            double grace = it_now() + 3.0;
            while (it_now() < grace && waitpid(pid, &status, WNOHANG) == 0)
                it_nap_ms(10);
            kill(-pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        it_nap_ms(10);
    }
    /* Whatever is left in the group (a child the test did not reap). */
    kill(-pid, SIGKILL);
    return status;
}

static void skip_reason(const char *dir, char *buf, size_t len)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/test.out", dir);
    char *s = it_slurp(path, NULL);
    buf[0] = '\0';
    if (s == NULL)
        return;
    char *p = strstr(s, "# SKIP: ");
    if (p) {
        p += 8;
        size_t n = strcspn(p, "\n");
        snprintf(buf, len, "%.*s", (int)n, p);
    }
    free(s);
}

/* The tests known to flake (tests.h: IT_FLAKY_LIST): why, or NULL. */
static const char *flaky_reason(const char *name)
{
#define IT_FLAKY_(n, why)      \
    if (!strcmp(name, #n))     \
        return why;
    IT_FLAKY_LIST(IT_FLAKY_)
#undef IT_FLAKY_
    return NULL;
}

/* A name on IT_FLAKY_LIST that is no test is a mistake in tests.h. */
static int flaky_names_known(void)
{
    int ok = 1;
#define IT_FLAKY_(n, why)                                                        \
    {                                                                            \
        int found = 0;                                                           \
        for (int i = 0; i < NTESTS; i++)                                         \
            found |= !strcmp(tests[i].name, #n);                                 \
        if (!found) {                                                            \
            fprintf(stderr, "test-integ: IT_FLAKY_LIST names %s: no such test\n", #n); \
            ok = 0;                                                              \
        }                                                                        \
    }
    IT_FLAKY_LIST(IT_FLAKY_)
#undef IT_FLAKY_
    return ok;
}

enum { RUN_PASS, RUN_SKIP, RUN_FAIL, RUN_NOT_STARTED };

/* Run one test in a fresh directory dir, with its deadline.  why: the time
 * taken, the skip reason, or what went wrong. */
static int run_one(const it_test *test, const char *dir, char *why, size_t whylen)
{
    if (mkdir(dir, 0755) != 0) {
        snprintf(why, whylen, "mkdir %s: %s", dir, strerror(errno));
        return RUN_NOT_STARTED;
    }
    fflush(NULL);
    double t0 = it_now();
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, whylen, "fork: %s", strerror(errno));
        return RUN_NOT_STARTED;
    }
    if (pid == 0)
        run_child(test, dir);
    setpgid(pid, pid);
    double deadline = test->deadline_s * it_slow;
    int status = wait_child(pid, deadline);
    double secs = it_now() - t0;
    if (status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        snprintf(why, whylen, "%.1f s", secs);
        return RUN_PASS;
    }
    if (status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == IT_EXIT_SKIP) {
        skip_reason(dir, why, whylen);
        return RUN_SKIP;
    }
    if (status == -1)
        snprintf(why, whylen, "timed out after %.0f s", deadline);
    else if (status < 0)
        snprintf(why, whylen, "lost the test process");
    else if (WIFSIGNALED(status))
        snprintf(why, whylen, "test process killed by signal %d", WTERMSIG(status));
    else
        snprintf(why, whylen, "%.1f s", secs);
    return RUN_FAIL;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: test-integ [--list] [PATTERN...]\n"
               "  runs the integration tests whose names match a PATTERN (shell glob),\n"
               "  all of them without one.  Env: BUILD, KVS_INTEG_SLOW, KVS_INTEG_KEEP,\n"
               "  KVS_INTEG_ENV (NAME=VALUE words for every process, e.g. KVS_LOCAL_AGG=0).\n");
}

int main(int argc, char **argv)
{
    int list = 0, npat = 0;
    if (!flaky_names_known())
        return 2;
    char **pat = calloc((size_t)argc + 1, sizeof *pat);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--list") == 0 || strcmp(argv[i], "-l") == 0)
            list = 1;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] == '-') {
            usage(stderr);
            return 2;
        } else
            pat[npat++] = argv[i];
    }

    int selected[NTESTS], nsel = 0;
    for (int i = 0; i < NTESTS; i++) {
        int match = npat == 0;
        for (int j = 0; j < npat && !match; j++)
            match = fnmatch(pat[j], tests[i].name, 0) == 0;
        if (match)
            selected[nsel++] = i;
    }
    for (int j = 0; j < npat; j++) {
        int any = 0;
        for (int i = 0; i < NTESTS; i++)
            any |= fnmatch(pat[j], tests[i].name, 0) == 0;
        if (!any) {
            fprintf(stderr, "test-integ: no test matches '%s' (see --list)\n", pat[j]);
            return 2;
        }
    }
    free(pat);
    if (list) {
        for (int i = 0; i < nsel; i++)
            printf("%s\n", tests[selected[i]].name);
        return 0;
    }

    const char *slow = getenv("KVS_INTEG_SLOW");
    if (slow && atof(slow) > 0)
        it_slow = atof(slow);
    else if (it_sanitized())
        it_slow = 3.0;
    int keep = getenv("KVS_INTEG_KEEP") && strcmp(getenv("KVS_INTEG_KEEP"), "1") == 0;

    const char *tmp = getenv("TMPDIR");
    char root[512];
    if (tmp == NULL || tmp[0] == '\0' || strlen(tmp) > 400)
        tmp = "/tmp";
    snprintf(root, sizeof root, "%s/kvs-integ-XXXXXX", tmp);
    if (mkdtemp(root) == NULL) {
        fprintf(stderr, "test-integ: mkdtemp %s: %s\n", root, strerror(errno));
        return 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("1..%d\n", nsel);

    int passed = 0, failed = 0, skipped = 0, kept = 0, flaky = 0;
    char flaky_names[4096] = "";
    double t_all = it_now();
    for (int k = 0; k < nsel; k++) {
        const it_test *test = &tests[selected[k]];
        char dir[1040], why[256];
        snprintf(dir, sizeof dir, "%s/%s", root, test->name);
        const char *flaky_why = flaky_reason(test->name);
        double t0 = it_now();
        int r = run_one(test, dir, why, sizeof why);
        if (r == RUN_FAIL && flaky_why != NULL) {
            /* a test known to flake: its logs, then one more run */
            printf("# %s failed (%s); known to flake (%s): its logs, then a rerun\n",
                   test->name, why, flaky_why);
            dump_logs(dir);
            size_t dl = strlen(dir);
            snprintf(dir + dl, sizeof dir - dl, ".rerun");
            r = run_one(test, dir, why, sizeof why);
            if (r == RUN_PASS) {
                flaky++;
                size_t n = strlen(flaky_names);
                snprintf(flaky_names + n, sizeof flaky_names - n, " %s", test->name);
                snprintf(why, sizeof why, "%.1f s # FLAKY: failed, then passed on rerun",
                         it_now() - t0);
            }
        }
        if (r == RUN_PASS) {
            printf("ok %d - %s (%s)\n", k + 1, test->name, why);
            passed++;
        } else if (r == RUN_SKIP) {
            printf("ok %d - %s # SKIP %s\n", k + 1, test->name, why);
            skipped++;
        } else {
            printf("not ok %d - %s (%s)\n", k + 1, test->name, why);
            if (r == RUN_FAIL)
                dump_logs(dir);
            failed++;
            kept++;
            continue;
        }
        if (keep)
            kept++;
        else
            rm_rf(dir);
    }
    if (kept == 0)
        rmdir(root);
    printf("# %d tests in %.1f s\n", nsel, it_now() - t_all);
    if (flaky)
        printf("# flaky (failed, then passed on rerun):%s\n", flaky_names);
    if (skipped || flaky)
        printf("integ: %d passed, %d failed, %d skipped, %d flaky\n", passed, failed, skipped,
               flaky);
    else
        printf("integ: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
