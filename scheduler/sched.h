/* sched.h - kvs-scheduler: rendezvous, ranks, barriers, heartbeats, shutdown.
 * One thread: everything runs on the uv loop. */
#ifndef KVS_SCHED_H
#define KVS_SCHED_H

#include "common/config.h"

/* Run the scheduler of job c until it ends.  Returns the process exit code:
 * 0 when every worker left cleanly, 1 on failure (a node died, start-up
 * timeout, bind error, signal). */
int sched_run(const cfg *c);

#endif
