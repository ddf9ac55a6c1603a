/* clock.h - monotonic time helpers. */
#ifndef KVS_COMMON_CLOCK_H
#define KVS_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t clock_ms(void)
{
    return clock_ns() / 1000000ull;
}

/* A deadline `ms` milliseconds from now as an absolute CLOCK_MONOTONIC
 * timespec (for pthread_cond_timedwait with a monotonic condattr). */
static inline struct timespec clock_deadline_ms(uint64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

#endif
