/* server.h - kvs-server: one loop thread owning the sockets and the store,
 * plus the reduction pool. */
#ifndef KVS_SERVER_H
#define KVS_SERVER_H

#include "common/config.h"

/* Run a server of job c until the scheduler ends the job.  Returns the exit
 * code: 0 job finished (or SIGTERM), 1 failure. */
int srv_run(const cfg *c);

#endif
