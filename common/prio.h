/* prio.h - lower the calling thread below the threads that answer small
 * requests (KVS_JOB_NICE: a server's job runners and reduction threads).
 *
 * Niceness alone (weight 110 against 1024 at nice 10) leaves a running
 * niced thread its whole scheduling slice before a woken thread of
 * niceness 0 (the server's loop, ZeroMQ's I/O threads, a worker) gets its
 * CPU on Linux's EEVDF scheduler (6.6+: the running task's slice is
 * protected, and a woken task that ran more than its share lately waits
 * until it is eligible again).  So a lowered thread also asks for a short
 * slice (100 us, sched_setattr's sched_runtime).  KVS_JOB_NICE=idle
 * (PRIO_IDLE): SCHED_IDLE, preempted by every wake-up of a normal thread
 * and given CPU time only when nothing else wants it (small keys fastest;
 * big sums starve while other processes keep the CPUs busy).  Why, and
 * what it measured: docs/design/threads-and-priorities.md.
 *
 * KVS_JOB_NICE=auto (PRIO_AUTO, the default): SCHED_IDLE with a starvation
 * guard.  The thread registers itself; prio_guard_poll, called every
 * PRIO_GUARD_TICK_MS while work is queued (the server's job engine does),
 * raises the registered threads to SCHED_OTHER at niceness PRIO_AUTO_NICE
 * when together they got less than PRIO_GUARD_SHARE percent of one CPU
 * while one of them was runnable, PRIO_GUARD_TICKS polls in a row (other
 * processes keep every CPU busy), and lowers them back to SCHED_IDLE after
 * a hold (PRIO_GUARD_HOLD_MS, doubled up to PRIO_GUARD_HOLD_MAX_MS while
 * they are starved again right after each return).  Together, not one by
 * one: one of three threads may wait behind its siblings for tens of ms
 * (measured beside a benchmark's small requests), which is not starvation;
 * 100 ms of less than 5 % of a CPU is (SCHED_IDLE's weight is 3 against
 * 1024 of a busy nice-0 thread: about 0.3 % per CPU).  The threads sit at
 * niceness PRIO_AUTO_NICE under SCHED_IDLE too (it keeps the niceness, and
 * leaving it is checked against that).  Leaving SCHED_IDLE needs
 * CAP_SYS_NICE or an RLIMIT_NICE of at least 20 - PRIO_AUTO_NICE; where the
 * process may not (prio_auto_usable, probed once on a thread of its own),
 * auto is niceness PRIO_AUTO_NICE with the short slice instead.
 */
#ifndef KVS_COMMON_PRIO_H
#define KVS_COMMON_PRIO_H

#include <stdbool.h>
#include <stdint.h>

/* KVS_JOB_NICE=idle (one past the highest niceness) */
#define PRIO_IDLE 20

/* KVS_JOB_NICE=auto: SCHED_IDLE, raised to PRIO_AUTO_NICE while starved */
#define PRIO_AUTO 21
#define PRIO_AUTO_NICE 10

/* The slice a lowered thread asks for, ns */
#define PRIO_SLICE_NS 100000

/* The guard: how often prio_guard_poll is to be called; the threads are
 * starved after PRIO_GUARD_TICKS polls in a row with less than
 * PRIO_GUARD_SHARE % of one CPU together while one of them was runnable */
#define PRIO_GUARD_TICK_MS 10
#define PRIO_GUARD_TICKS 10
#define PRIO_GUARD_SHARE 5
#define PRIO_GUARD_HOLD_MS 200
#define PRIO_GUARD_HOLD_MAX_MS 3200

/* The calling thread (alone, Linux) at niceness nice (1..19, with a short
 * slice), SCHED_IDLE (PRIO_IDLE), SCHED_IDLE under the guard (PRIO_AUTO),
 * or back to the defaults (0: the default slice, SCHED_OTHER).  Never at a
 * niceness below the process's own (its main thread's, as started: `nice -n
 * 5 kvs-server` keeps every thread at 5 or above, and 0 means 5 there).
 * Best effort: a kernel without per-task slices keeps the niceness; one
 * without sched_setattr gets setpriority and pthread_setschedparam.  A
 * thread lowered with PRIO_AUTO calls prio_forget_self before it exits
 * (a second call of prio_lower_self forgets it too). */
void prio_lower_self(int nice);

/* The calling thread leaves the guard (no-op if it is not under it). */
void prio_forget_self(void);

/* This process may move a thread from SCHED_IDLE back to SCHED_OTHER at
 * PRIO_AUTO_NICE (probed once, on a thread of its own). */
bool prio_auto_usable(void);

/* Threads under the guard now. */
int prio_guarded(void);

/* Look at every thread under the guard (any thread; calls closer together
 * than half a tick are ignored): raise the starved ones, lower those whose
 * hold has passed.  now_ns: CLOCK_MONOTONIC.  Returns how many are raised. */
int prio_guard_poll(uint64_t now_ns);

/* Raises since the process started (a count for logs and tests). */
uint64_t prio_guard_raises(void);

#endif
