/* main.c - kvs-scheduler: command line and configuration. */
#include <stdio.h>
#include <string.h>

#include "common/config.h"
#include "common/log.h"
#include "scheduler/sched.h"

static const char usage[] =
    "usage: kvs-scheduler [--help] [--version]\n"
    "\n"
    "The scheduler of a kvsd job: registers S servers and W workers, assigns ranks,\n"
    "runs barriers and heartbeats, tells everyone when a node dies, and ends the job\n"
    "when every worker has closed its store.  Configured by the environment:\n"
    "  DMLC_PS_ROOT_PORT   port to listen on (0: ephemeral, see KVS_PORT_FILE)\n"
    "  DMLC_PS_ROOT_URI    this host's address as the other nodes reach it\n"
    "  DMLC_NUM_SERVER, DMLC_NUM_WORKER   job size\n"
    "  PS_HEARTBEAT_INTERVAL, PS_HEARTBEAT_TIMEOUT   seconds (default 5, 60)\n"
    "  KVS_START_TIMEOUT   seconds to wait for every node to register (default 120)\n"
    "  KVS_PORT_FILE       write the bound port here once listening\n"
    "  PS_VERBOSE          0 warnings, 1 connections and config, 2 every message\n"
    "Exit status: 0 every worker left cleanly; 1 a node died or start-up failed;\n"
    "2 bad configuration.\n";

int main(int argc, char **argv)
{
    cfg c;
    int rc = cfg_daemon_start(argc, argv, CFG_ROLE_SCHEDULER, usage, &c);
    if (rc >= 0)
        return rc;
    return sched_run(&c);
}
