/* log.c - see log.h. */
#include <stdarg.h>
#include <stdio.h>

#include "log.h"

int log_level = LOG_WARN;

void log_line(int level, const char *who, const char *subsys, const char *fmt, ...)
{
    static const char *const names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
    char text[1024];
    va_list ap;
    int idx = level + 1;
    if (idx < 0)
        idx = 0;
    if (idx > 3)
        idx = 3;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[%s] %s %s: %s\n", who ? who : "kvs", names[idx], subsys, text);
}
