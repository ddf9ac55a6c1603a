/* main.c - kvs-server: command line and configuration. */
#include <stdio.h>
#include <string.h>

#include "common/config.h"
#include "common/log.h"
#include "common/memtune.h"
#include "server/server.h"
#include "tree/tree.h"

static const char usage[] =
    "usage: kvs-server [--help] [--version]\n"
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
    int rc = cfg_daemon_start(argc, argv, CFG_ROLE_SERVER, usage, &c);
    if (rc >= 0)
        return rc;
    char err[512];
    if (tree_topo_check(c.topology, err, sizeof err) != 0) {
        fprintf(stderr, "[server] ERROR cfg: %s\n", err);
        return 2;
    }
    mem_tune();
    return srv_run(&c);
}
