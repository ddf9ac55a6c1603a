/* prio.c - see prio.h. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
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

static pid_t my_tid(void)
{
#ifdef SYS_gettid
    return (pid_t)syscall(SYS_gettid);
#else
    return 0;
#endif
}

/* The niceness of the process's main thread (what it was started with), 0
 * when it cannot be read. */
static int process_nice(void)
{
    errno = 0;
    int n = getpriority(PRIO_PROCESS, (id_t)getpid());
    return errno != 0 ? 0 : n;
}

/* Thread tid (0: the caller) under policy at niceness nice with slice
 * runtime (0: the kernel's); a kernel without per-task slices gets the
 * rest.  0 or -1. */
static int set_attr(pid_t tid, int policy, int nice, uint64_t runtime)
{
#ifdef SYS_sched_setattr
    prio_attr a = {.size = sizeof a, .policy = (uint32_t)policy, .nice = nice,
                   .runtime = runtime};
    if (syscall(SYS_sched_setattr, tid, &a, 0) == 0)
        return 0;
    if (runtime == 0)
        return -1;
    a.runtime = 0; /* a kernel without per-task slices (before 6.6) */
    return syscall(SYS_sched_setattr, tid, &a, 0) == 0 ? 0 : -1;
#else
    (void)tid, (void)policy, (void)nice, (void)runtime;
    return -1;
#endif
}

/* ---- can this process leave SCHED_IDLE (probed once) ---- */

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static bool probe_ok;

/* The caller at niceness PRIO_AUTO_NICE, then SCHED_IDLE (which keeps the
 * niceness: leaving SCHED_IDLE again takes an RLIMIT_NICE of 20 minus it,
 * so 10 rather than the 20 of niceness 0). */
static int to_idle(void)
{
#ifdef SYS_gettid
    setpriority(PRIO_PROCESS, (id_t)my_tid(), PRIO_AUTO_NICE);
#endif
    return set_attr(0, SCHED_IDLE, PRIO_AUTO_NICE, 0);
}

static void *probe_main(void *arg)
{
    (void)arg;
    if (to_idle() == 0 &&
        set_attr(0, SCHED_OTHER, PRIO_AUTO_NICE, PRIO_SLICE_NS) == 0)
        probe_ok = true;
    return NULL;
}

static void probe(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, probe_main, NULL) == 0)
        pthread_join(t, NULL);
}

bool prio_auto_usable(void)
{
    pthread_once(&probe_once, probe);
    return probe_ok;
}

/* ---- the guard ---- */

#define GUARD_MAX 64
#define MS 1000000ull

typedef struct guarded {
    pid_t tid; /* 0: free slot */
    clockid_t clk;
    bool raised;       /* under SCHED_OTHER now */
    uint64_t cpu_last; /* its CPU time at the last poll */
} guarded;

/* All under guard_mu.  The threads are raised and lowered together: what
 * starves them is the CPU time they get together, not how it is shared out
 * among them (one of three may wait behind its siblings for a while). */
static pthread_mutex_t guard_mu = PTHREAD_MUTEX_INITIALIZER;
static guarded guard[GUARD_MAX];
static int nguarded;
static bool g_raised;               /* the guarded threads belong under SCHED_OTHER */
static int g_slow;                  /* polls in a row starved */
static uint64_t g_last, g_since, g_hold = PRIO_GUARD_HOLD_MS * MS, raises;

static bool cpu_ns(clockid_t clk, uint64_t *out)
{
    struct timespec ts;
    if (clock_gettime(clk, &ts) != 0)
        return false;
    *out = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    return true;
}

/* Thread tid of this process is runnable (state R in its stat). */
static bool runnable(pid_t tid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the name may hold spaces and ')' */
    return p && p[1] == ' ' && p[2] == 'R';
}

/* g under the policy the guard wants now. */
static void apply(guarded *g)
{
    if (g->raised == g_raised)
        return;
    if (g_raised ? set_attr(g->tid, SCHED_OTHER, PRIO_AUTO_NICE, PRIO_SLICE_NS) == 0
                 : set_attr(g->tid, SCHED_IDLE, PRIO_AUTO_NICE, 0) == 0)
        g->raised = g_raised;
}

/* Register the caller; false if the table is full or its clock unknown. */
static bool guard_add(void)
{
    clockid_t clk;
    uint64_t cpu;
    if (pthread_getcpuclockid(pthread_self(), &clk) != 0 || !cpu_ns(clk, &cpu))
        return false;
    pid_t tid = my_tid();
    bool ok = false;
    pthread_mutex_lock(&guard_mu);
    for (int i = 0; i < GUARD_MAX && tid > 0; i++)
        if (guard[i].tid == 0) {
            guard[i] = (guarded){.tid = tid, .clk = clk, .cpu_last = cpu};
            nguarded++;
            apply(&guard[i]);
            ok = true;
            break;
        }
    pthread_mutex_unlock(&guard_mu);
    return ok;
}

void prio_forget_self(void)
{
    pid_t tid = my_tid();
    pthread_mutex_lock(&guard_mu);
    for (int i = 0; i < GUARD_MAX && tid > 0; i++)
        if (guard[i].tid == tid) {
            guard[i].tid = 0;
            nguarded--;
        }
    pthread_mutex_unlock(&guard_mu);
}

int prio_guarded(void)
{
    pthread_mutex_lock(&guard_mu);
    int n = nguarded;
    pthread_mutex_unlock(&guard_mu);
    return n;
}

uint64_t prio_guard_raises(void)
{
    pthread_mutex_lock(&guard_mu);
    uint64_t n = raises;
    pthread_mutex_unlock(&guard_mu);
    return n;
}

/* The guarded threads were starved since the last poll, dt ns ago: they got
 * less than PRIO_GUARD_SHARE % of one CPU together while one of them was
 * runnable at the end. */
static bool starved(uint64_t dt)
{
    uint64_t sum = 0;
    for (int i = 0; i < GUARD_MAX; i++) {
        uint64_t cpu;
        if (guard[i].tid == 0 || !cpu_ns(guard[i].clk, &cpu))
            continue;
        sum += cpu - guard[i].cpu_last;
        guard[i].cpu_last = cpu;
    }
    if (sum * 100 >= dt * PRIO_GUARD_SHARE)
        return false;
    for (int i = 0; i < GUARD_MAX; i++)
        if (guard[i].tid != 0 && runnable(guard[i].tid))
            return true;
    return false;
}

int prio_guard_poll(uint64_t now_ns)
{
    pthread_mutex_lock(&guard_mu);
    uint64_t dt = now_ns - g_last;
    if (dt >= PRIO_GUARD_TICK_MS * MS / 2) {
        g_last = now_ns;
        bool low = starved(dt);
        if (g_raised) {
            if (now_ns - g_since >= g_hold) {
                g_raised = false;
                g_since = now_ns;
                g_slow = 0;
            }
        } else if (dt > 10 * PRIO_GUARD_TICK_MS * MS || !low) { /* a gap, or not starved */
            g_slow = 0;
        } else if (++g_slow >= PRIO_GUARD_TICKS) {
            /* starved again soon after the last return: hold twice as long */
            uint64_t max = PRIO_GUARD_HOLD_MAX_MS * MS;
            if (g_since != 0 && now_ns - g_since < 2 * g_hold)
                g_hold = g_hold * 2 > max ? max : g_hold * 2;
            else
                g_hold = PRIO_GUARD_HOLD_MS * MS;
            g_raised = true;
            g_since = now_ns;
            g_slow = 0;
            raises++;
        }
    }
    int n = 0;
    for (int i = 0; i < GUARD_MAX; i++)
        if (guard[i].tid != 0) {
            apply(&guard[i]);
            n += guard[i].raised;
        }
    pthread_mutex_unlock(&guard_mu);
    return n;
}

/* ---- lowering ---- */

void prio_lower_self(int nice)
{
    prio_forget_self();
    if (nice < 0)
        nice = 0;
    if (nice >= PRIO_AUTO) {
        if (prio_auto_usable() && to_idle() == 0) {
            if (guard_add())
                return;
            /* no room under the guard: not SCHED_IDLE without it */
            if (set_attr(0, SCHED_OTHER, PRIO_AUTO_NICE, 0) != 0)
                return;
        }
        nice = PRIO_AUTO_NICE;
    }
    /* never above the process's own priority (its main thread's niceness:
     * the loop's), whatever niceness it was started with */
    int base = process_nice(), at = nice < base ? base : nice;
#ifdef SYS_gettid
    if (nice < PRIO_IDLE) /* the niceness first: it stays if the calls below fail */
        setpriority(PRIO_PROCESS, (id_t)my_tid(), at);
#endif
    if (set_attr(0, nice >= PRIO_IDLE ? SCHED_IDLE : SCHED_OTHER, nice >= PRIO_IDLE ? 19 : at,
                 nice > 0 && nice < PRIO_IDLE ? PRIO_SLICE_NS : 0) == 0)
        return;
    struct sched_param sp = {0};
    pthread_setschedparam(pthread_self(), nice >= PRIO_IDLE ? SCHED_IDLE : SCHED_OTHER, &sp);
}
