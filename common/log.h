/* log.h - leveled logging, one line per call:
 *
 *   2026-12-03T06:35:56.123Z [server 1] host7[4242] WARN net: text
 *
 * UTC time with milliseconds, the node ("[role rank]"), host name[pid], the
 * level, the subsystem, the text.  Lines go to stderr, or to the handler set
 * with log_set_handler() (libkvs: kvs_set_log_handler).  The level is
 * process-wide, set once at start-up (PS_VERBOSE); the level check happens
 * before any formatting.  Thread-safe: one line is formatted on the caller's
 * stack and written with one write (or one handler call, serialised). */
#ifndef KVS_COMMON_LOG_H
#define KVS_COMMON_LOG_H

#include <stddef.h>

enum { LOG_ERROR = -1, LOG_WARN = 0, LOG_INFO = 1, LOG_DEBUG = 2 };

#define LOG_LINE_MAX 1400 /* longer texts are cut */

extern int log_level; /* written once at start-up, before threads exist */

void log_line(int level, const char *who, const char *subsys, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* who: "server 2", "worker 0", "scheduler" (NULL: the process default set
 * with log_set_default_who, else "kvs"); subsys: "net", "cfg", ... */
#define LOG(level, who, subsys, ...)                       \
    do {                                                   \
        if ((level) <= log_level)                          \
            log_line((level), (who), (subsys), __VA_ARGS__); \
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
