/* prio.c - see prio.h. */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/prio.h"

#ifndef SCHED_IDLE
#define SCHED_IDLE 5
#endif

/* struct sched_attr of sched_setattr(2) (glibc 2.36 has no wrapper) */
typedef struct prio_attr {
    uint32_t size, policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime, deadline, period;
} prio_attr;

void prio_lower_self(int nice)
{
    if (nice < 0)
        nice = 0;
#ifdef SYS_gettid
    if (nice < PRIO_IDLE) /* the niceness first: it stays if the calls below fail */
        setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice);
#endif
#ifdef SYS_sched_setattr
    prio_attr a = {.size = sizeof a, .policy = nice >= PRIO_IDLE ? SCHED_IDLE : SCHED_OTHER,
                   .nice = nice >= PRIO_IDLE ? 19 : nice,
                   .runtime = nice > 0 && nice < PRIO_IDLE ? PRIO_SLICE_NS : 0};
    if (syscall(SYS_sched_setattr, 0, &a, 0) == 0)
        return;
    a.runtime = 0; /* a kernel without per-task slices (before 6.6) */
    if (syscall(SYS_sched_setattr, 0, &a, 0) == 0)
        return;
#endif
    struct sched_param sp = {0};
    pthread_setschedparam(pthread_self(), nice >= PRIO_IDLE ? SCHED_IDLE : SCHED_OTHER, &sp);
}
