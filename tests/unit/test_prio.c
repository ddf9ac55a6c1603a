/* test_prio.c - common/prio.c: a lowered thread gets the niceness asked
 * for and a short slice (where the kernel reports one), KVS_JOB_NICE=idle
 * gets SCHED_IDLE, and 0 leaves the thread as it was.  Each case runs in a
 * thread of its own (lowering cannot be undone without privileges). */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/prio.h"

typedef struct seen {
    int ask;
    int nice0, nice, policy;
    uint64_t runtime;  /* sched_getattr's sched_runtime (0: not reported) */
    int have_attr;     /* sched_getattr worked */
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

Suite *prio_suite(void)
{
    Suite *s = suite_create("prio");
    TCase *t = tcase_create("prio");
    tcase_set_timeout(t, 20);
    tcase_add_test(t, test_prio_nice);
    tcase_add_test(t, test_prio_idle);
    tcase_add_test(t, test_prio_zero);
    suite_add_tcase(s, t);
    return s;
}
