/* log.h - leveled logging, one line per call:
 *
 *   2026-12-03T06:35:56.123Z [server 1] host7[4242] WARN net: text
 *
 * UTC time with milliseconds, the node ("[role rank]"), host name[pid], the
 * level, the subsystem, the text.  Lines go to stderr, or to the handler set
 * with log_set_handler() (libkvs: kvs_set_log_handler).  The level is
 * process-wide (PS_VERBOSE): a daemon sets it once at start-up; libkvs only
 * ever raises it (each kvs_create to its store's PS_VERBOSE), so two stores
 * in one process log at the higher of their levels.  The level check happens
 * before any formatting.  Thread-safe: one line is formatted on the caller's
 * stack and written with one write (or one handler call, serialised). */
#ifndef KVS_COMMON_LOG_H
#define KVS_COMMON_LOG_H

#include <stdatomic.h>
#include <stddef.h>

enum { LOG_ERROR = -1, LOG_WARN = 0, LOG_INFO = 1, LOG_DEBUG = 2 };

#define LOG_LINE_MAX 1400 /* longer texts are cut */

/* Read by every LOG on any thread; written only by log_set_level and
 * log_raise_level. */
extern _Atomic int log_level;

/* Set the level (a daemon at start-up, tests).  Any thread. */
void log_set_level(int level);
/* Raise the level to at least level; never lowers it (libkvs: a store's
 * PS_VERBOSE, while other stores' threads log).  Any thread. */
void log_raise_level(int level);

void log_line(int level, const char *who, const char *subsys, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* who: "server 2", "worker 0", "scheduler" (NULL: the process default set
 * with log_set_default_who, else "kvs"); subsys: "net", "cfg", ... */
#define LOG(level, who, subsys, ...)                                      \
    do {                                                                  \
        if ((level) <= atomic_load_explicit(&log_level, memory_order_relaxed)) \
            log_line((level), (who), (subsys), __VA_ARGS__);              \
    } while (0)

/* Rate limit of a line that peer input can repeat (a flood of malformed
 * messages must not become a flood of log lines): at most LOG_BURST lines
 * per call site every LOG_WINDOW_MS; the first line after a window that
 * suppressed some says how many ("N similar lines suppressed").  One static
 * log_limit per call site (LOG_LIMITED declares it); thread-safe. */
#define LOG_BURST 10
#define LOG_WINDOW_MS 10000

typedef struct log_limit {
    long long window_start; /* ms since the epoch; 0: none yet */
    unsigned long long in_window, suppressed;
} log_limit;

/* Returns how many lines were suppressed since the last one emitted (>= 0)
 * when this line may go out, -1 when it is suppressed (and counted). */
long long log_limit_take(log_limit *l, long long now_ms);

void log_line_limited(log_limit *l, int level, const char *who, const char *subsys,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#define LOG_LIMITED(level, who, subsys, ...)                                     \
    do {                                                                         \
        static log_limit log_limit_site_;                                        \
        if ((level) <= atomic_load_explicit(&log_level, memory_order_relaxed))  \
            log_line_limited(&log_limit_site_, (level), (who), (subsys), __VA_ARGS__); \
    } while (0)

/* Where lines go: fn(level, line, ctx) with the whole line (no newline), or
 * stderr when fn is NULL.  Calls to fn are serialised; once this returns, the
 * previous handler is never called again.  fn must not log itself. */
typedef void (*log_handler_fn)(int level, const char *line, void *ctx);
void log_set_handler(log_handler_fn fn, void *ctx);

/* The node name for lines logged with who == NULL (copied; any thread). */
void log_set_default_who(const char *who);

/* Format one line into buf (no newline): the exact text log_line emits.
 * now_ms: milliseconds since the epoch (UTC).  Returns the length. */
size_t log_format(char *buf, size_t len, long long now_ms, int level, const char *who,
                  const char *subsys, const char *text);

/* "ERROR", "WARN", "INFO", "DEBUG". */
const char *log_level_name(int level);

#endif
