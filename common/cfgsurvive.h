/* cfgsurvive.h - the settings of jobs that survive deaths, checked
 * together: KVS_REPLICAS, KVS_ELASTIC, KVS_MIN_WORKERS, KVS_MAX_WORKERS,
 * KVS_SCHEDULER_GRACE.
 *
 * Pure (no environment, no globals): cfg_load (config.c) parses each
 * variable's own range from the table, then calls cfg_check_survive with
 * the values.  Any thread.
 */
#ifndef KVS_COMMON_CFGSURVIVE_H
#define KVS_COMMON_CFGSURVIVE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct cfg_survive {
    int replicas;       /* KVS_REPLICAS (0, 1) */
    bool elastic;       /* KVS_ELASTIC */
    int min_workers;    /* KVS_MIN_WORKERS (0: num_worker) */
    int max_workers;    /* KVS_MAX_WORKERS (0: num_worker) */
    int num_server;     /* DMLC_NUM_SERVER, DMLC_NUM_WORKER: used only */
    int num_worker;     /* with needs_job */
    bool p3;            /* DMLC_PS_VAN_TYPE=p3 */
    double sched_grace; /* KVS_SCHEDULER_GRACE (s, 0: off) */
} cfg_survive;

/* 0 when the settings can work and this build honours them; otherwise
 * KVS_ECONFIG with one line in err naming the variables, their values and
 * what is allowed.  Impossible combinations are reported before settings
 * this build does not honour.  needs_job: also check against the job's
 * sizes. */
int cfg_check_survive(const cfg_survive *s, bool needs_job, char *err, size_t errlen);

#endif
