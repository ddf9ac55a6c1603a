/* log.h - leveled logging to stderr: "[server 2] WARN net: text".
 * The level is process-wide, set once at start-up (PS_VERBOSE); the level
 * check happens before any formatting.  Thread-safe (one fprintf per line). */
#ifndef KVS_COMMON_LOG_H
#define KVS_COMMON_LOG_H

enum { LOG_ERROR = -1, LOG_WARN = 0, LOG_INFO = 1, LOG_DEBUG = 2 };

extern int log_level; /* written once at start-up, before threads exist */

void log_line(int level, const char *who, const char *subsys, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* who: "server 2", "worker 0", "scheduler"; subsys: "net", "cfg", ... */
#define LOG(level, who, subsys, ...)                       \
    do {                                                   \
        if ((level) <= log_level)                          \
            log_line((level), (who), (subsys), __VA_ARGS__); \
    } while (0)

#endif
