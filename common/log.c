/* log.c - see log.h. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kvs.h"
#include "log.h"

_Atomic int log_level = LOG_WARN;

void log_set_level(int level)
{
    atomic_store_explicit(&log_level, level, memory_order_relaxed);
}

void log_raise_level(int level)
{
    int cur = atomic_load_explicit(&log_level, memory_order_relaxed);
    while (cur < level &&
           !atomic_compare_exchange_weak_explicit(&log_level, &cur, level, memory_order_relaxed,
                                                  memory_order_relaxed))
        ;
}

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

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void emit(int level, const char *who, const char *subsys, char *text)
{
    char line[LOG_LINE_MAX + 2];
    /* one line per call: a newline in the text would forge a second one */
    for (char *p = text; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    long long now = now_ms();
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

void log_line(int level, const char *who, const char *subsys, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    emit(level, who, subsys, text);
}

static pthread_mutex_t limit_mu = PTHREAD_MUTEX_INITIALIZER;

long long log_limit_take(log_limit *l, long long now)
{
    long long r = -1;
    pthread_mutex_lock(&limit_mu);
    if (l->window_start == 0 || now - l->window_start >= LOG_WINDOW_MS || now < l->window_start) {
        l->window_start = now;
        l->in_window = 0;
    }
    if (l->in_window < LOG_BURST) {
        l->in_window++;
        r = (long long)l->suppressed;
        l->suppressed = 0;
    } else {
        l->suppressed++;
    }
    pthread_mutex_unlock(&limit_mu);
    return r;
}

void log_line_limited(log_limit *l, int level, const char *who, const char *subsys,
                      const char *fmt, ...)
{
    char text[1024];
    long long suppressed = log_limit_take(l, now_ms());
    if (suppressed < 0)
        return; /* counted; no formatting */
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (suppressed > 0 && n >= 0 && (size_t)n < sizeof text)
        snprintf(text + n, sizeof text - (size_t)n, " (%lld similar lines suppressed)",
                 suppressed);
    emit(level, who, subsys, text);
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
