/* main.c - kvs-scheduler: command line and configuration. */
#include <stdio.h>
#include <string.h>

#include "common/config.h"
#include "common/log.h"
#include "scheduler/sched.h"

static const char usage[] =
    "usage: kvs-scheduler [--help]\n"
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
    char err[512];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            return 0;
        }
        fprintf(stderr, "kvs-scheduler: unknown argument '%s'\n%s", argv[i], usage);
        return 2;
    }
    if (cfg_load(&c, true, err, sizeof err) != 0) {
        fprintf(stderr, "[scheduler] ERROR cfg: %s\n", err);
        return 2;
    }
    if (c.role != CFG_ROLE_SCHEDULER && c.role != CFG_ROLE_NONE) {
        fprintf(stderr, "[scheduler] ERROR cfg: DMLC_ROLE='%s': kvs-scheduler runs the "
                        "scheduler; expected 'scheduler' or unset\n", cfg_role_name(c.role));
        return 2;
    }
    c.role = CFG_ROLE_SCHEDULER;
    log_level = c.verbose;
    cfg_log(&c, "scheduler");
    return sched_run(&c);
}
