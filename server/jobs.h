/* jobs.h - the server's work off its loop: sums, direct copies and optimizer
 * updates run on a few runner threads and complete back on the loop.
 *
 * A job is submitted on the loop thread; a runner takes the ready job of the
 * highest priority (proto_hdr.priority; equal priorities in submission
 * order), calls run() there, and hands the job back: done() runs on the loop
 * thread (through one wake_fd, common/wake.h, drained whole each time) in the order the
 * jobs finished.  Big arrays inside run() are split over the reduction pool
 * (red_sum, red_pool_for), which serialises its callers: a second runner
 * keeps small jobs moving while the first one holds the pool.
 *
 * What a job may touch is the caller's business: the store runs at most one
 * job per entry at a time (server/store.c), so two contributions to one key
 * never race.
 *
 * Threads: srv_jobs_submit/stop/free on the loop thread only.
 */
#ifndef KVS_SERVER_JOBS_H
#define KVS_SERVER_JOBS_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

typedef struct srv_jobs srv_jobs;
typedef struct srv_job srv_job;

struct srv_job {
    /* a runner thread: the work */
    void (*run)(srv_job *j);
    /* the loop thread, once after run (cancelled false), or instead of it
     * when the engine stops first (cancelled true: release, answer nobody).
     * done owns j from then on (frees it). */
    void (*done)(srv_job *j, bool cancelled);
    int32_t prio;   /* higher runs first */
    /* the engine's */
    uint64_t seq;
    srv_job *next;
};

/* Runner threads for a pool of pool_threads threads: 2, or 1 when the pool
 * has a single thread (the machine has one CPU). */
int srv_jobs_threads_for(int pool_threads);

/* Start nthreads (>= 1) runners whose jobs complete on loop, at scheduling
 * niceness nice (0..19 with a short slice, PRIO_IDLE: SCHED_IDLE, or
 * PRIO_AUTO: SCHED_IDLE under the starvation guard, which a timer on loop
 * polls every PRIO_GUARD_TICK_MS while jobs are pending; KVS_JOB_NICE;
 * common/prio.h; Linux: set per thread, best effort), so that the loop and
 * ZeroMQ's I/O threads, at the process's own niceness, run first when they
 * wake.  Returns 0 or KVS_ENOMEM. */
int srv_jobs_new(uv_loop_t *loop, int nthreads, int nice, srv_jobs **out);

/* Queue j (the caller keeps nothing: done() gets it back). */
void srv_jobs_submit(srv_jobs *q, srv_job *j);

/* Jobs submitted and not yet done (queued, running, or waiting for the
 * loop). */
uint64_t srv_jobs_pending(const srv_jobs *q);

/* Jobs submitted since the start (loop thread). */
uint64_t srv_jobs_submitted(const srv_jobs *q);

/* Stop: wait for the jobs that are running, then call done(j, true) for
 * every job whose done() has not run (queued or finished).  Idempotent;
 * NULL is a no-op.  The wake_fd's uv_poll handle and the guard's timer are
 * closed by the loop's owner (uv_walk) like every other handle. */
void srv_jobs_stop(srv_jobs *q);

/* Free (after srv_jobs_stop and after the loop closed its handles). */
void srv_jobs_free(srv_jobs *q);

#endif
