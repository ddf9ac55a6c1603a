/* prio.h - lower the calling thread below the threads that answer small
 * requests (KVS_JOB_NICE: a server's job runners and reduction threads).
 *
 * Niceness alone (weight 110 against 1024 at nice 10) leaves a running
 * niced thread its whole scheduling slice before a woken thread of
 * niceness 0 (the server's loop, ZeroMQ's I/O threads, a worker) gets its
 * CPU on Linux's EEVDF scheduler (6.6+: the running task's slice is
 * protected).  So a lowered thread also asks for a short slice (100 us,
 * sched_setattr's sched_runtime); a woken thread with the default slice
 * then preempts it at once.  KVS_JOB_NICE=idle (PRIO_IDLE) goes further:
 * SCHED_IDLE, preempted by any wake-up and given CPU time only when nothing
 * else wants it (small keys fastest; big sums starve while other processes
 * keep the CPUs busy).  Measured: docs/notes/issue-10-lat.md.
 */
#ifndef KVS_COMMON_PRIO_H
#define KVS_COMMON_PRIO_H

/* KVS_JOB_NICE=idle (one past the highest niceness) */
#define PRIO_IDLE 20

/* The slice a lowered thread asks for, ns */
#define PRIO_SLICE_NS 100000

/* The calling thread (alone, Linux) at niceness nice (1..19, with a short
 * slice), SCHED_IDLE (PRIO_IDLE), or back to the defaults (0: niceness 0,
 * the default slice, SCHED_OTHER).  Best effort: a kernel without per-task
 * slices keeps the niceness; one without sched_setattr gets setpriority
 * and pthread_setschedparam. */
void prio_lower_self(int nice);

#endif
