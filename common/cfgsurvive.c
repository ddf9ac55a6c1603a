/* cfgsurvive.c - the settings of jobs that survive deaths: replicated
 * servers (KVS_REPLICAS), elastic workers (KVS_ELASTIC, KVS_MIN_WORKERS,
 * KVS_MAX_WORKERS) and a scheduler that may restart (KVS_SCHEDULER_GRACE),
 * checked together; see cfgsurvive.h.
 *
 * Order: each variable's own range (cfg_load, from the table), then the
 * combinations that can never work (a bound without KVS_ELASTIC, MIN above
 * MAX, a backup with no other server to live on, a job that starts outside
 * its own bounds), then what this build does not do yet.  So a user whose
 * settings are impossible learns that first, whatever the build.
 */
#include <stdio.h>

#include "cfgsurvive.h"
#include "kvs.h"

/* MIN and MAX as they apply: 0 stands for DMLC_NUM_WORKER. */
static int effective(int bound, int num_worker)
{
    return bound > 0 ? bound : num_worker;
}

static int check_bounds(const cfg_survive *c, char *err, size_t errlen)
{
    if (!c->elastic && (c->min_workers > 0 || c->max_workers > 0)) {
        const char *name = c->min_workers > 0 ? "KVS_MIN_WORKERS" : "KVS_MAX_WORKERS";
        int val = c->min_workers > 0 ? c->min_workers : c->max_workers;
        snprintf(err, errlen, "%s='%d' needs KVS_ELASTIC=1 (without it the job has exactly "
                 "DMLC_NUM_WORKER workers); expected it unset or 0", name, val);
        return KVS_ECONFIG;
    }
    if (c->min_workers > 0 && c->max_workers > 0 && c->min_workers > c->max_workers) {
        snprintf(err, errlen, "KVS_MIN_WORKERS='%d' is greater than KVS_MAX_WORKERS='%d': "
                 "expected MIN <= MAX", c->min_workers, c->max_workers);
        return KVS_ECONFIG;
    }
    return 0;
}

static int check_job_sizes(const cfg_survive *c, char *err, size_t errlen)
{
    if (c->replicas >= c->num_server) {
        snprintf(err, errlen, "KVS_REPLICAS='%d' with DMLC_NUM_SERVER=%d: a key range's "
                 "backup lives on another server; expected KVS_REPLICAS in [0, %d]",
                 c->replicas, c->num_server, c->num_server - 1);
        return KVS_ECONFIG;
    }
    if (!c->elastic)
        return 0;
    if (effective(c->min_workers, c->num_worker) > c->num_worker) {
        snprintf(err, errlen, "KVS_MIN_WORKERS='%d' with DMLC_NUM_WORKER=%d (the workers the "
                 "job starts with): expected an integer in [1, %d]", c->min_workers,
                 c->num_worker, c->num_worker);
        return KVS_ECONFIG;
    }
    if (effective(c->max_workers, c->num_worker) < c->num_worker) {
        snprintf(err, errlen, "KVS_MAX_WORKERS='%d' with DMLC_NUM_WORKER=%d (the workers the "
                 "job starts with): expected an integer in [%d, 65536]", c->max_workers,
                 c->num_worker, c->num_worker);
        return KVS_ECONFIG;
    }
    return 0;
}

/* Possible settings that this build cannot honour: refused, never ignored
 * (docs/guide/fault-tolerance.md says what a job does without them). */
static int check_built(const cfg_survive *c, char *err, size_t errlen)
{
    if (c->replicas > 0 && c->p3) {
        snprintf(err, errlen, "KVS_REPLICAS='%d' with DMLC_PS_VAN_TYPE=p3: replicated servers "
                 "are not built for p3 in this version of kvsd; expected KVS_REPLICAS=0 or "
                 "DMLC_PS_VAN_TYPE=zmq", c->replicas);
        return KVS_ECONFIG;
    }
    if (c->replicas > 0 && c->elastic) {
        snprintf(err, errlen, "KVS_REPLICAS='%d' with KVS_ELASTIC=1: replicated servers and "
                 "elastic workers together are not built in this version of kvsd; expected "
                 "one of them", c->replicas);
        return KVS_ECONFIG;
    }
    if (c->sched_grace > 0 && (c->replicas > 0 || c->elastic)) {
        snprintf(err, errlen, "KVS_SCHEDULER_GRACE='%g' with %s: a restarted scheduler cannot "
                 "learn back the owners of replicated key ranges or an elastic membership in "
                 "this version of kvsd; expected KVS_SCHEDULER_GRACE=0 or %s",
                 c->sched_grace, c->replicas > 0 ? "KVS_REPLICAS=1" : "KVS_ELASTIC=1",
                 c->replicas > 0 ? "KVS_REPLICAS=0" : "KVS_ELASTIC=0");
        return KVS_ECONFIG;
    }
    return 0;
}

int cfg_check_survive(const cfg_survive *c, bool needs_job, char *err, size_t errlen)
{
    int rc = check_bounds(c, err, errlen);
    if (rc == 0 && needs_job)
        rc = check_job_sizes(c, err, errlen);
    if (rc == 0)
        rc = check_built(c, err, errlen);
    return rc;
}
