/* test_prio.c - common/prio.c: a lowered thread gets the niceness asked
 * for and a short slice (where the kernel reports one), KVS_JOB_NICE=idle
 * gets SCHED_IDLE, and 0 leaves the thread as it was; KVS_JOB_NICE=auto
 * gets SCHED_IDLE under the guard, which raises a starved thread to
 * niceness 10 and lowers it back, and leaves a sleeping one alone.  Each
 * case runs in a thread of its own (lowering cannot be undone without
 * privileges). */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/prio.h"

typedef struct seen {
    int ask;
    int nice0, nice, policy;
    uint64_t runtime;  /* sched_getattr's sched_runtime (0: not reported) */
    int have_attr;     /* sched_getattr worked */
    int guarded, guarded_after; /* prio_guarded() after lowering, after forgetting */
} seen;

typedef struct attr {
    uint32_t size, policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime, deadline, period;
} attr;

static void *lower(void *arg)
{
    seen *s = arg;
    pid_t tid = (pid_t)syscall(SYS_gettid);
    s->nice0 = getpriority(PRIO_PROCESS, (id_t)tid);
    prio_lower_self(s->ask);
    s->nice = getpriority(PRIO_PROCESS, (id_t)tid);
    s->policy = sched_getscheduler(0);
#ifdef SYS_sched_getattr
    attr a = {0};
    if (syscall(SYS_sched_getattr, 0, &a, sizeof a, 0) == 0) {
        s->have_attr = 1;
        s->runtime = a.runtime;
    }
#endif
    s->guarded = prio_guarded();
    prio_forget_self();
    s->guarded_after = prio_guarded();
    return NULL;
}

static seen run(int ask)
{
    seen s = {.ask = ask};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, lower, &s), 0);
    pthread_join(t, NULL);
    return s;
}

START_TEST(test_prio_nice)
{
    seen s = run(7);
    /* setpriority sets, not adds (a process already below 7 may not be
     * allowed back up: then it stays where it was) */
    if (s.nice0 <= 7)
        ck_assert_int_eq(s.nice, 7);
    else
        ck_assert(s.nice == 7 || s.nice == s.nice0);
    ck_assert_int_eq(s.policy, SCHED_OTHER);
    /* a kernel with per-task slices (6.12+) reports the one asked for; an
     * older one reports 0 (and kept the niceness) */
    if (s.have_attr && s.runtime != 0)
        ck_assert_uint_eq(s.runtime, PRIO_SLICE_NS);
}
END_TEST

START_TEST(test_prio_idle)
{
    seen s = run(PRIO_IDLE);
    ck_assert_int_eq(s.policy, SCHED_IDLE);
}
END_TEST

START_TEST(test_prio_zero)
{
    seen s = run(0);
    ck_assert_int_eq(s.nice, s.nice0);
    ck_assert_int_eq(s.policy, SCHED_OTHER);
    if (s.have_attr && s.runtime != 0)
        ck_assert_uint_ne(s.runtime, PRIO_SLICE_NS);
}
END_TEST

/* 0 after 10 (a pool thread whose job niceness changed back): the
 * process's own niceness again, whatever the caller's (run under nice) */
static void *lower_then_back(void *arg)
{
    int *out = arg;
    pid_t tid = (pid_t)syscall(SYS_gettid);
    prio_lower_self(10);
    out[0] = getpriority(PRIO_PROCESS, (id_t)tid);
    prio_lower_self(0);
    out[1] = getpriority(PRIO_PROCESS, (id_t)tid);
    out[2] = sched_getscheduler(0);
    return NULL;
}

START_TEST(test_prio_back_to_process)
{
    int got[3];
    int base = getpriority(PRIO_PROCESS, (id_t)getpid());
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, lower_then_back, got), 0);
    pthread_join(t, NULL);
    ck_assert_int_eq(got[0], base > 10 ? base : 10);
    /* going back up needs root, CAP_SYS_NICE or an RLIMIT_NICE of 20 - base */
    struct rlimit rl;
    bool may_raise = geteuid() == 0 ||
                     (getrlimit(RLIMIT_NICE, &rl) == 0 && 20 - (long)rl.rlim_cur <= base);
    ck_assert_int_eq(got[1], may_raise ? base : 10);
    ck_assert_int_eq(got[2], SCHED_OTHER);
}
END_TEST

/* auto: SCHED_IDLE under the guard where this process may leave SCHED_IDLE
 * again (root, CAP_SYS_NICE, RLIMIT_NICE >= 10), else niceness 10; either
 * way at niceness 10 (SCHED_IDLE keeps the niceness, and leaving it takes
 * an RLIMIT_NICE of 20 minus that) */
START_TEST(test_prio_auto)
{
    seen s = run(PRIO_AUTO);
    if (s.nice0 <= PRIO_AUTO_NICE)
        ck_assert_int_eq(s.nice, PRIO_AUTO_NICE);
    if (prio_auto_usable()) {
        ck_assert_int_eq(s.policy, SCHED_IDLE);
        ck_assert_int_eq(s.guarded, 1);
    } else {
        ck_assert_int_eq(s.policy, SCHED_OTHER);
        ck_assert_int_eq(s.guarded, 0);
    }
    ck_assert_int_eq(s.guarded_after, 0);
}
END_TEST

typedef struct spin {
    int cpu;             /* pinned there, or -1 */
    int lower;           /* prio_lower_self(PRIO_AUTO) first */
    atomic_int stop, ready;
    atomic_int tid;
    pthread_mutex_t mu;  /* sleep: wait on cv until stop */
    pthread_cond_t cv;
    int sleep;
} spin;

static void *spin_main(void *arg)
{
    spin *s = arg;
    if (s->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET((size_t)s->cpu, &set); /* s->cpu >= 0 */
        sched_setaffinity(0, sizeof set, &set);
    }
    if (s->lower)
        prio_lower_self(PRIO_AUTO);
    atomic_store(&s->tid, (int)syscall(SYS_gettid));
    atomic_store(&s->ready, 1);
    if (s->sleep) {
        pthread_mutex_lock(&s->mu);
        while (!atomic_load(&s->stop))
            pthread_cond_wait(&s->cv, &s->mu);
        pthread_mutex_unlock(&s->mu);
    } else {
        while (!atomic_load(&s->stop))
            ;
    }
    if (s->lower)
        prio_forget_self();
    return NULL;
}

static void spin_start(spin *s, pthread_t *t, int cpu, int lower, int sleep)
{
    *s = (spin){.cpu = cpu, .lower = lower, .sleep = sleep};
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    ck_assert_int_eq(pthread_create(t, NULL, spin_main, s), 0);
    while (!atomic_load(&s->ready))
        usleep(1000);
}

static void spin_stop(spin *s, pthread_t t)
{
    pthread_mutex_lock(&s->mu);
    atomic_store(&s->stop, 1);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(t, NULL);
}

static int policy_of(int tid)
{
    return sched_getscheduler(tid);
}

/* Poll the guard every tick until it reports want raised threads (or the
 * deadline passes); the number it reported last. */
static int poll_until(int want, double secs)
{
    uint64_t end = clock_ns() + (uint64_t)(secs * 1e9);
    int n;
    do {
        usleep(PRIO_GUARD_TICK_MS * 1000);
        n = prio_guard_poll(clock_ns());
    } while (n != want && clock_ns() < end);
    return n;
}

/* A guarded thread that spins on one CPU beside a thread of niceness 0
 * spinning there too gets almost nothing (SCHED_IDLE): the guard raises it
 * to SCHED_OTHER at niceness 10 within a few polls, and once the other
 * thread stops it lowers it back to SCHED_IDLE after the hold. */
START_TEST(test_prio_guard_raises_starved)
{
    if (!prio_auto_usable())
        return; /* this process may not leave SCHED_IDLE: auto is niceness 10 */
    cpu_set_t mine;
    int cpu = 0;
    if (sched_getaffinity(0, sizeof mine, &mine) == 0)
        for (cpu = 0; cpu < CPU_SETSIZE && !CPU_ISSET((size_t)cpu, &mine); cpu++)
            ;
    spin hog, job;
    pthread_t th, tj;
    spin_start(&hog, &th, cpu, 0, 0);
    spin_start(&job, &tj, cpu, 1, 0);
    ck_assert_int_eq(policy_of(atomic_load(&job.tid)), SCHED_IDLE);
    uint64_t before = prio_guard_raises();
    ck_assert_int_eq(poll_until(1, 20), 1);
    ck_assert_int_eq(policy_of(atomic_load(&job.tid)), SCHED_OTHER);
    ck_assert_int_eq(getpriority(PRIO_PROCESS, (id_t)atomic_load(&job.tid)), PRIO_AUTO_NICE);
    ck_assert_uint_eq(prio_guard_raises(), before + 1);
    spin_stop(&hog, th);
    ck_assert_int_eq(poll_until(0, 20), 0);
    ck_assert_int_eq(policy_of(atomic_load(&job.tid)), SCHED_IDLE);
    spin_stop(&job, tj);
    ck_assert_int_eq(prio_guarded(), 0);
}
END_TEST

/* A guarded thread that sleeps gets no CPU time either, but is not
 * starved: the guard leaves it under SCHED_IDLE. */
START_TEST(test_prio_guard_leaves_sleeper)
{
    if (!prio_auto_usable())
        return;
    spin job;
    pthread_t tj;
    spin_start(&job, &tj, -1, 1, 1);
    uint64_t before = prio_guard_raises();
    for (int i = 0; i < 3 * PRIO_GUARD_TICKS; i++) {
        usleep(PRIO_GUARD_TICK_MS * 1000);
        ck_assert_int_eq(prio_guard_poll(clock_ns()), 0);
    }
    ck_assert_uint_eq(prio_guard_raises(), before);
    ck_assert_int_eq(policy_of(atomic_load(&job.tid)), SCHED_IDLE);
    spin_stop(&job, tj);
}
END_TEST

Suite *prio_suite(void)
{
    Suite *s = suite_create("prio");
    TCase *t = tcase_create("prio");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, test_prio_nice);
    tcase_add_test(t, test_prio_idle);
    tcase_add_test(t, test_prio_zero);
    tcase_add_test(t, test_prio_back_to_process);
    tcase_add_test(t, test_prio_auto);
    tcase_add_test(t, test_prio_guard_raises_starved);
    tcase_add_test(t, test_prio_guard_leaves_sleeper);
    suite_add_tcase(s, t);
    return s;
}
