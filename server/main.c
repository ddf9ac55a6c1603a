/* main.c - kvs-server: command line and configuration. */
#include <stdio.h>
#include <string.h>

#include "common/config.h"
#include "common/log.h"
#include "common/memtune.h"
#include "server/server.h"

static const char usage[] =
    "usage: kvs-server [--help]\n"
    "\n"
    "A kvsd server: holds a shard of the parameters, sums the workers' pushes\n"
    "(dist_sync: one round per push of every worker), answers pulls.  Configured by\n"
    "the environment (see README.md for the full list):\n"
    "  DMLC_PS_ROOT_URI, DMLC_PS_ROOT_PORT   the scheduler\n"
    "  DMLC_NUM_SERVER, DMLC_NUM_WORKER      job size\n"
    "  DMLC_SERVER_ID      preferred rank;  DMLC_NODE_HOST / DMLC_INTERFACE  address\n"
    "  DMLC_LOCAL=1        ipc:// sockets (all nodes on one host)\n"
    "  KVS_PORT            port to bind (default 0: ephemeral); KVS_PORT_FILE: write it\n"
    "  MXNET_KVSTORE_REDUCTION_NTHREADS, MXNET_KVSTORE_BIGARRAY_BOUND   summing threads\n"
    "  PS_HEARTBEAT_INTERVAL, PS_HEARTBEAT_TIMEOUT, KVS_START_TIMEOUT, PS_VERBOSE\n"
    "Exit status: 0 the job ended; 1 failure (scheduler lost, job failed); 2 bad\n"
    "configuration.\n";

int main(int argc, char **argv)
{
    cfg c;
    char err[512];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            return 0;
        }
        fprintf(stderr, "kvs-server: unknown argument '%s'\n%s", argv[i], usage);
        return 2;
    }
    if (cfg_load(&c, true, err, sizeof err) != 0) {
        fprintf(stderr, "[server] ERROR cfg: %s\n", err);
        return 2;
    }
    if (c.role != CFG_ROLE_SERVER && c.role != CFG_ROLE_NONE) {
        fprintf(stderr, "[server] ERROR cfg: DMLC_ROLE='%s': kvs-server runs a server; "
                        "expected 'server' or unset\n", cfg_role_name(c.role));
        return 2;
    }
    c.role = CFG_ROLE_SERVER;
    mem_tune();
    log_level = c.verbose;
    cfg_log(&c, "server");
    return srv_run(&c);
}
