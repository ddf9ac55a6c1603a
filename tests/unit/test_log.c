/* test_log.c - common/log.c: the line format, stderr by default, and
 * kvs_set_log_handler. */
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "kvs.h"

#define LINE_RE                                                                          \
    "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z \\[([a-z]+( [0-9]+)?)\\] " \
    "([^ []+)\\[([0-9]+)\\] (ERROR|WARN|INFO|DEBUG) ([a-z]+): (.*)$"

static void match_line(const char *line, const char *who, const char *level,
                       const char *subsys, const char *text)
{
    regex_t re;
    regmatch_t m[8];
    char host[256], buf[32];
    ck_assert_int_eq(regcomp(&re, LINE_RE, REG_EXTENDED), 0);
    ck_assert_msg(regexec(&re, line, 8, m, 0) == 0, "line does not match the format: '%s'",
                  line);
#define PART(i) (int)(m[i].rm_eo - m[i].rm_so), line + m[i].rm_so
    snprintf(buf, sizeof buf, "%.*s", PART(1));
    ck_assert_str_eq(buf, who);
    snprintf(buf, sizeof buf, "%.*s", PART(5));
    ck_assert_str_eq(buf, level);
    snprintf(buf, sizeof buf, "%.*s", PART(6));
    ck_assert_str_eq(buf, subsys);
    ck_assert_str_eq(line + m[7].rm_so, text);
    snprintf(buf, sizeof buf, "%.*s", PART(4));
    ck_assert_int_eq(atoi(buf), (int)getpid());
    gethostname(host, sizeof host);
    host[sizeof host - 1] = '\0';
    char *dot = strchr(host, '.');
    if (dot)
        *dot = '\0';
    snprintf(buf, sizeof buf, "%.*s", PART(3));
    ck_assert_str_eq(buf, host);
#undef PART
    regfree(&re);
}

START_TEST(format_fixed_time)
{
    char line[512];
    /* 2021-03-04 05:06:07.089 UTC */
    size_t n = log_format(line, sizeof line, 1614834367089LL, LOG_WARN, "server 3", "net",
                          "dropped a message");
    ck_assert_uint_eq(n, strlen(line));
    ck_assert_msg(strncmp(line, "2021-03-04T05:06:07.089Z [server 3] ", 36) == 0, "%s", line);
    match_line(line, "server 3", "WARN", "net", "dropped a message");
    /* a tiny buffer is cut, never overrun */
    char small[10];
    n = log_format(small, sizeof small, 0, LOG_ERROR, "scheduler", "job", "x");
    ck_assert_uint_eq(n, 9);
    ck_assert_str_eq(small, "1970-01-0");
}
END_TEST

struct got {
    int calls;
    int level;
    char line[LOG_LINE_MAX + 2];
};

static void take(int level, const char *line, void *ctx)
{
    struct got *g = ctx;
    g->calls++;
    g->level = level;
    snprintf(g->line, sizeof g->line, "%s", line);
}

START_TEST(handler_gets_lines)
{
    struct got g = {0};
    log_set_level(LOG_INFO);
    kvs_set_log_handler(take, &g);
    LOG(LOG_INFO, "worker 2", "job", "registered: rank %d", 2);
    ck_assert_int_eq(g.calls, 1);
    ck_assert_int_eq(g.level, KVS_LOG_INFO);
    match_line(g.line, "worker 2", "INFO", "job", "registered: rank 2");
    /* below the level: not even formatted, the handler is not called */
    LOG(LOG_DEBUG, "worker 2", "net", "every message");
    ck_assert_int_eq(g.calls, 1);
    /* NULL who: the process default */
    log_set_default_who("server 1");
    LOG(LOG_ERROR, NULL, "net", "boom");
    ck_assert_int_eq(g.calls, 2);
    ck_assert_int_eq(g.level, KVS_LOG_ERROR);
    match_line(g.line, "server 1", "ERROR", "net", "boom");
    /* a newline in the text cannot forge a second line */
    LOG(LOG_WARN, "worker 0", "net", "a\nb\rc");
    match_line(g.line, "worker 0", "WARN", "net", "a b c");
    /* a long text is cut to one bounded line */
    char big[3000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    LOG(LOG_WARN, "worker 0", "net", "%s", big);
    ck_assert_uint_lt(strlen(g.line), LOG_LINE_MAX);
    ck_assert_int_eq(g.calls, 4);
    /* back to stderr: the handler is not called again */
    kvs_set_log_handler(NULL, NULL);
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    int saved = dup(STDERR_FILENO);
    dup2(fds[1], STDERR_FILENO);
    LOG(LOG_WARN, "scheduler", "job", "to stderr %d", 7);
    dup2(saved, STDERR_FILENO);
    close(fds[1]);
    ck_assert_int_eq(g.calls, 4);
    char buf[2048];
    ssize_t n = read(fds[0], buf, sizeof buf - 1);
    ck_assert_int_gt(n, 0);
    buf[n] = '\0';
    ck_assert_msg(buf[n - 1] == '\n' && strchr(buf, '\n') == buf + n - 1,
                  "expected exactly one line: '%s'", buf);
    buf[n - 1] = '\0';
    match_line(buf, "scheduler", "WARN", "job", "to stderr 7");
}
END_TEST

/* The library's own lines reach the handler: kvs_create with a bad variable
 * logs nothing (it returns the error), but a dist store that cannot reach
 * its scheduler logs a warning through the handler. */
START_TEST(library_lines_reach_handler)
{
    struct got g = {0};
    kvs_store *kv = NULL;
    kvs_set_log_handler(take, &g);
    setenv("DMLC_ROLE", "worker", 1);
    setenv("DMLC_PS_ROOT_URI", "127.0.0.1", 1);
    setenv("DMLC_PS_ROOT_PORT", "1", 1); /* nothing listens there */
    setenv("DMLC_NUM_SERVER", "1", 1);
    setenv("DMLC_NUM_WORKER", "1", 1);
    setenv("DMLC_WORKER_ID", "0", 1);
    setenv("KVS_START_TIMEOUT", "0.3", 1);
    setenv("PS_VERBOSE", "1", 1);
    int rc = kvs_create("dist_sync", &kv);
    ck_assert_int_eq(rc, KVS_ETIMEDOUT);
    ck_assert_int_gt(g.calls, 0);
    ck_assert_msg(strstr(g.line, " [worker 0] ") != NULL, "%s", g.line);
    kvs_set_log_handler(NULL, NULL);
}
END_TEST

/* A line peer input repeats: LOG_BURST lines per window, then silence
 * (counted, not formatted); the first line of the next window carries the
 * count. */
START_TEST(limited_lines)
{
    log_limit l = {0};
    long long t0 = 1000000;
    for (int i = 0; i < LOG_BURST; i++)
        ck_assert_int_eq(log_limit_take(&l, t0 + i), 0);
    for (int i = 0; i < 25; i++)
        ck_assert_int_eq(log_limit_take(&l, t0 + 100 + i), -1);
    ck_assert_int_eq(log_limit_take(&l, t0 + LOG_WINDOW_MS - 1), -1);
    ck_assert_int_eq(log_limit_take(&l, t0 + LOG_WINDOW_MS), 26);
    ck_assert_int_eq(log_limit_take(&l, t0 + LOG_WINDOW_MS + 1), 0);
    /* through the handler: 3 * LOG_BURST calls in a moment give LOG_BURST lines */
    struct got g = {0};
    log_level = LOG_WARN;
    kvs_set_log_handler(take, &g);
    for (int i = 0; i < 3 * LOG_BURST; i++)
        LOG_LIMITED(LOG_WARN, "server 0", "net", "dropped a malformed message %d", i);
    ck_assert_int_eq(g.calls, LOG_BURST);
    match_line(g.line, "server 0", "WARN", "net", "dropped a malformed message 9");
    /* below the level: nothing counted either */
    for (int i = 0; i < 3 * LOG_BURST; i++)
        LOG_LIMITED(LOG_DEBUG, "server 0", "net", "every message");
    ck_assert_int_eq(g.calls, LOG_BURST);
    kvs_set_log_handler(NULL, NULL);
}
END_TEST

START_TEST(version_string)
{
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", KVS_VERSION_MAJOR, KVS_VERSION_MINOR,
             KVS_VERSION_PATCH);
    ck_assert_str_eq(kvs_version(), want);
    ck_assert_str_eq(KVS_VERSION_STRING, want);
}
END_TEST

/* The level is only ever raised by libkvs: a second store with a lower
 * PS_VERBOSE leaves it where the first put it, and threads raising it at
 * once end at the highest. */
static void *raise_to(void *arg)
{
    for (int i = 0; i < 1000; i++)
        log_raise_level((int)(intptr_t)arg);
    return NULL;
}

START_TEST(level_only_raised)
{
    log_set_level(LOG_WARN);
    log_raise_level(LOG_INFO);
    ck_assert_int_eq(atomic_load(&log_level), LOG_INFO);
    log_raise_level(LOG_WARN);
    ck_assert_int_eq(atomic_load(&log_level), LOG_INFO);
    log_raise_level(LOG_ERROR);
    ck_assert_int_eq(atomic_load(&log_level), LOG_INFO);

    log_set_level(LOG_WARN);
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, raise_to, (void *)(intptr_t)i), 0);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    ck_assert_int_eq(atomic_load(&log_level), LOG_DEBUG);

    /* two stores: PS_VERBOSE=1, then PS_VERBOSE=0 */
    kvs_store *a = NULL, *b = NULL;
    log_set_level(LOG_WARN);
    setenv("PS_VERBOSE", "1", 1);
    ck_assert_int_eq(kvs_create("local", &a), 0);
    ck_assert_int_eq(atomic_load(&log_level), LOG_INFO);
    setenv("PS_VERBOSE", "0", 1);
    ck_assert_int_eq(kvs_create("local", &b), 0);
    ck_assert_int_eq(atomic_load(&log_level), LOG_INFO);
    unsetenv("PS_VERBOSE");
    kvs_close(b);
    kvs_close(a);
    log_set_level(LOG_WARN);
}
END_TEST

Suite *log_suite(void)
{
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("log");
    tcase_add_test(tc, format_fixed_time);
    tcase_add_test(tc, handler_gets_lines);
    tcase_add_test(tc, library_lines_reach_handler);
    tcase_add_test(tc, version_string);
    tcase_add_test(tc, level_only_raised);
    tcase_add_test(tc, limited_lines);
    suite_add_tcase(s, tc);
    return s;
}
