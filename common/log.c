/* log.c - see log.h. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kvs.h"
#include "log.h"

int log_level = LOG_WARN;

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static log_handler_fn log_fn;      /* (log_mu) */
static void *log_ctx;              /* (log_mu) */
static char default_who[64] = "kvs"; /* (log_mu) */
static pthread_once_t host_once = PTHREAD_ONCE_INIT;
static char host_name[128];

static void host_init(void)
{
    if (gethostname(host_name, sizeof host_name - 1) != 0 || host_name[0] == '\0')
        snprintf(host_name, sizeof host_name, "?");
    host_name[sizeof host_name - 1] = '\0';
    /* the short name: the domain adds nothing within one job */
    char *dot = strchr(host_name, '.');
    if (dot && dot != host_name)
        *dot = '\0';
}

const char *log_level_name(int level)
{
    static const char *const names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
    int idx = level + 1;
    if (idx < 0)
        idx = 0;
    if (idx > 3)
        idx = 3;
    return names[idx];
}

size_t log_format(char *buf, size_t len, long long now_ms, int level, const char *who,
                  const char *subsys, const char *text)
{
    struct tm tm;
    time_t sec = (time_t)(now_ms / 1000);
    int n;
    pthread_once(&host_once, host_init);
    gmtime_r(&sec, &tm);
    n = snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ [%s] %s[%d] %s %s: %s",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                 tm.tm_sec, (int)(now_ms % 1000), who, host_name, (int)getpid(),
                 log_level_name(level), subsys ? subsys : "-", text);
    if (n < 0)
        n = 0;
    if ((size_t)n >= len)
        n = len ? (int)len - 1 : 0;
    return (size_t)n;
}

void log_line(int level, const char *who, const char *subsys, const char *fmt, ...)
{
    char text[1024], line[LOG_LINE_MAX + 2];
    struct timespec ts;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    /* one line per call: a newline in the text would forge a second one */
    for (char *p = text; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    clock_gettime(CLOCK_REALTIME, &ts);
    long long now = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    pthread_mutex_lock(&log_mu);
    size_t n = log_format(line, LOG_LINE_MAX, now, level, who ? who : default_who, subsys,
                          text);
    if (log_fn) {
        log_fn(level, line, log_ctx);
    } else {
        line[n++] = '\n';
        /* one write: lines of different threads and processes never mix */
        ssize_t w = write(STDERR_FILENO, line, n);
        (void)w;
    }
    pthread_mutex_unlock(&log_mu);
}

void log_set_handler(log_handler_fn fn, void *ctx)
{
    pthread_mutex_lock(&log_mu);
    log_fn = fn;
    log_ctx = ctx;
    pthread_mutex_unlock(&log_mu);
}

void log_set_default_who(const char *who)
{
    pthread_mutex_lock(&log_mu);
    snprintf(default_who, sizeof default_who, "%s", who ? who : "kvs");
    pthread_mutex_unlock(&log_mu);
}

/* ---- the public face (kvs.h) ---- */

_Static_assert(KVS_LOG_ERROR == LOG_ERROR && KVS_LOG_WARN == LOG_WARN &&
                   KVS_LOG_INFO == LOG_INFO && KVS_LOG_DEBUG == LOG_DEBUG,
               "kvs.h log levels match log.h");

void kvs_set_log_handler(kvs_log_fn fn, void *ctx)
{
    log_set_handler(fn, ctx);
}
