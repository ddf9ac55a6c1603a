/* config.c - environment parsing; see config.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <ifaddrs.h>
#include <math.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include "config.h"
#include "datapath.h"
#include "keyfile.h"
#include "kvs.h"
#include "log.h"
#include "prio.h"

static const char *env_value(const char *name)
{
    const char *v = getenv(name);
    if (v == NULL || v[0] == '\0')
        return NULL;
    return v;
}

static int bad(char *err, size_t errlen, const char *name, const char *val, const char *want)
{
    snprintf(err, errlen, "%s='%s': expected %s", name, val, want);
    return KVS_ECONFIG;
}

int cfg_get_int(const char *name, long long def, long long min, long long max, long long *out,
                char *err, size_t errlen)
{
    const char *v = env_value(name);
    char want[128];
    char *end;
    long long x;
    if (v == NULL) {
        *out = def;
        return 0;
    }
    snprintf(want, sizeof want, "an integer in [%lld, %lld]", min, max);
    errno = 0;
    x = strtoll(v, &end, 10);
    while (*end == ' ' || *end == '\t')
        end++;
    if (errno != 0 || end == v || *end != '\0' || x < min || x > max)
        return bad(err, errlen, name, v, want);
    *out = x;
    return 0;
}

int cfg_get_u64(const char *name, uint64_t def, uint64_t min, uint64_t max, uint64_t *out,
                char *err, size_t errlen)
{
    const char *v = env_value(name);
    char want[128];
    char *end;
    unsigned long long x;
    if (v == NULL) {
        *out = def;
        return 0;
    }
    snprintf(want, sizeof want, "an integer in [%llu, %llu]", (unsigned long long)min,
             (unsigned long long)max);
    const char *p = v;
    while (*p == ' ')
        p++;
    if (*p == '-' || *p == '+')
        return bad(err, errlen, name, v, want);
    errno = 0;
    x = strtoull(p, &end, 10);
    while (*end == ' ' || *end == '\t')
        end++;
    if (errno != 0 || end == p || *end != '\0' || x < min || x > max)
        return bad(err, errlen, name, v, want);
    *out = x;
    return 0;
}

int cfg_get_double(const char *name, double def, double min, double max, double *out,
                   char *err, size_t errlen)
{
    const char *v = env_value(name);
    char want[128];
    char *end;
    double x;
    if (v == NULL) {
        *out = def;
        return 0;
    }
    snprintf(want, sizeof want, "a number in [%g, %g]", min, max);
    errno = 0;
    x = strtod(v, &end);
    while (*end == ' ' || *end == '\t')
        end++;
    if (errno != 0 || end == v || *end != '\0' || !isfinite(x) || x < min || x > max)
        return bad(err, errlen, name, v, want);
    *out = x;
    return 0;
}

int cfg_get_bool(const char *name, bool def, bool *out, char *err, size_t errlen)
{
    const char *v = env_value(name);
    if (v == NULL) {
        *out = def;
        return 0;
    }
    if (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") ||
        !strcasecmp(v, "on")) {
        *out = true;
        return 0;
    }
    if (!strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") ||
        !strcasecmp(v, "off")) {
        *out = false;
        return 0;
    }
    return bad(err, errlen, name, v, "0 or 1 (or true/false, yes/no, on/off)");
}

int cfg_get_enum(const char *name, int def, const char *const *words, int *out, char *err,
                 size_t errlen)
{
    const char *v = env_value(name);
    char want[256] = "one of";
    if (v == NULL) {
        *out = def;
        return 0;
    }
    for (int i = 0; words[i] != NULL; i++) {
        if (!strcasecmp(v, words[i])) {
            *out = i;
            return 0;
        }
        size_t len = strlen(want);
        snprintf(want + len, sizeof want - len, "%s '%s'", i ? "," : "", words[i]);
    }
    return bad(err, errlen, name, v, want);
}

static int get_str(const char *name, char *dst, size_t dstlen, char *err, size_t errlen)
{
    const char *v = env_value(name);
    if (v == NULL)
        return 0;
    if (strlen(v) >= dstlen) {
        snprintf(err, errlen, "%s: value is %zu characters long, at most %zu allowed", name,
                 strlen(v), dstlen - 1);
        return KVS_ECONFIG;
    }
    strcpy(dst, v);
    return 0;
}

const char *cfg_role_name(enum cfg_role role)
{
    switch (role) {
    case CFG_ROLE_SCHEDULER: return "scheduler";
    case CFG_ROLE_SERVER: return "server";
    case CFG_ROLE_WORKER: return "worker";
    default: return "none";
    }
}

#define TRY(expr)                \
    do {                         \
        int rc_ = (expr);        \
        if (rc_ != 0)            \
            return rc_;          \
    } while (0)

int cfg_load(cfg *c, bool needs_job, char *err, size_t errlen)
{
    static const char *const roles[] = {"none", "scheduler", "server", "worker", NULL};
    static const char *const vans[] = {"zmq", "p3", NULL};
    long long v;
    int e;

    memset(c, 0, sizeof *c);
    err[0] = '\0';

    TRY(cfg_get_enum("DMLC_ROLE", CFG_ROLE_NONE, roles, &e, err, errlen));
    c->role = (enum cfg_role)e;
    TRY(get_str("DMLC_PS_ROOT_URI", c->root_uri, sizeof c->root_uri, err, errlen));
    TRY(cfg_get_int("DMLC_PS_ROOT_PORT", -1, 0, 65535, &v, err, errlen));
    c->root_port = (int)v;
    TRY(cfg_get_int("DMLC_NUM_SERVER", 0, 1, 1 << 16, &v, err, errlen));
    c->num_server = (int)v;
    TRY(cfg_get_int("DMLC_NUM_WORKER", 0, 1, 1 << 16, &v, err, errlen));
    c->num_worker = (int)v;
    TRY(get_str("DMLC_NODE_HOST", c->node_host, sizeof c->node_host, err, errlen));
    TRY(get_str("DMLC_INTERFACE", c->interface, sizeof c->interface, err, errlen));
    TRY(cfg_get_int("DMLC_WORKER_ID", -1, 0, (1 << 16) - 1, &v, err, errlen));
    c->worker_id = (int)v;
    TRY(cfg_get_int("DMLC_SERVER_ID", -1, 0, (1 << 16) - 1, &v, err, errlen));
    c->server_id = (int)v;
    TRY(cfg_get_bool("DMLC_LOCAL", false, &c->local, err, errlen));
    TRY(cfg_get_enum("DMLC_PS_VAN_TYPE", CFG_VAN_ZMQ, vans, &e, err, errlen));
    c->van = (enum cfg_van)e;
    TRY(cfg_get_int("DMLC_PS_WATER_MARK", 1000, 1, 1 << 30, &v, err, errlen));
    c->water_mark = (int)v;
    TRY(cfg_get_int("PS_VERBOSE", 0, 0, 2, &v, err, errlen));
    c->verbose = (int)v;
    TRY(cfg_get_double("PS_HEARTBEAT_INTERVAL", 5, 0.01, 3600, &c->hb_interval_s, err, errlen));
    TRY(cfg_get_double("PS_HEARTBEAT_TIMEOUT", 60, 0.05, 86400, &c->hb_timeout_s, err, errlen));
    if (c->hb_timeout_s <= c->hb_interval_s) {
        snprintf(err, errlen,
                 "PS_HEARTBEAT_TIMEOUT=%g must be greater than PS_HEARTBEAT_INTERVAL=%g",
                 c->hb_timeout_s, c->hb_interval_s);
        return KVS_ECONFIG;
    }
    TRY(cfg_get_bool("PS_RESEND", false, &c->resend, err, errlen));
    TRY(cfg_get_int("PS_RESEND_TIMEOUT", 1000, 1, 3600 * 1000, &v, err, errlen));
    c->resend_timeout_ms = (int)v;
    TRY(cfg_get_u64("MXNET_KVSTORE_BIGARRAY_BOUND", 1000000, 1, UINT64_MAX, &c->bigarray_bound,
                    err, errlen));
    TRY(cfg_get_int("MXNET_KVSTORE_REDUCTION_NTHREADS", 4, 1, 1024, &v, err, errlen));
    c->reduction_nthreads = (int)v;
    TRY(cfg_get_u64("MXNET_KVSTORE_SLICE_THRESHOLD", 40000, 1, UINT64_MAX, &c->slice_threshold,
                    err, errlen));
    TRY(cfg_get_bool("MXNET_KVSTORE_USETREE", false, &c->use_tree, err, errlen));
    TRY(cfg_get_bool("MXNET_UPDATE_ON_KVSTORE", true, &c->update_on_kvstore, err, errlen));
    TRY(cfg_get_double("KVS_START_TIMEOUT", 120, 0.1, 86400, &c->start_timeout_s, err, errlen));
    TRY(cfg_get_u64("KVS_MAX_MESSAGE", 4ull << 30, 64, UINT64_MAX, &c->max_message, err,
                    errlen));
    TRY(cfg_get_u64("KVS_CHUNK_BYTES", DP_CHUNK_BYTES_DEFAULT, 4096, 1ull << 40, &c->chunk_bytes, err,
                    errlen));
    TRY(cfg_get_bool("KVS_CMA", true, &c->cma, err, errlen));
    TRY(cfg_get_u64("KVS_FUSE_BYTES", DP_FUSE_BYTES_DEFAULT, 0, 1u << 30, &c->fuse_bytes, err,
                    errlen));
    const char *jn = getenv("KVS_JOB_NICE"); /* common/prio.h */
    if (jn && !strcmp(jn, "idle")) { /* SCHED_IDLE */
        c->job_nice = PRIO_IDLE;
    } else if (jn && !strcmp(jn, "auto")) { /* SCHED_IDLE under the starvation guard */
        c->job_nice = PRIO_AUTO;
    } else {
        if (cfg_get_int("KVS_JOB_NICE", DP_JOB_NICE_DEFAULT, 0, 19, &v, err, errlen) != 0) {
            snprintf(err, errlen, "KVS_JOB_NICE='%s': expected an integer in [0, 19], idle or "
                     "auto", jn);
            return KVS_ECONFIG;
        }
        c->job_nice = (int)v;
    }
    TRY(cfg_get_u64("KVS_P3_CREDIT", DP_P3_CREDIT_DEFAULT, 0, 1ull << 40, &c->p3_credit, err,
                    errlen));
    if (c->fuse_bytes > 0 && c->fuse_bytes < 4096) {
        snprintf(err, errlen, "KVS_FUSE_BYTES='%llu': expected 0 (no fusion) or 4096 to "
                 "1073741824", (unsigned long long)c->fuse_bytes);
        return KVS_ECONFIG;
    }
    TRY(cfg_get_bool("KVS_MALLOC_TUNE", true, &c->malloc_tune, err, errlen));
    TRY(cfg_get_int("KVS_PORT", 0, 0, 65535, &v, err, errlen));
    c->port = (int)v;
    TRY(get_str("KVS_PORT_FILE", c->port_file, sizeof c->port_file, err, errlen));
    TRY(cfg_get_int("KVS_METRICS_PORT", 0, 0, 65535, &v, err, errlen));
    c->metrics_port = (int)v;
    snprintf(c->metrics_addr, sizeof c->metrics_addr, "0.0.0.0");
    TRY(get_str("KVS_METRICS_ADDR", c->metrics_addr, sizeof c->metrics_addr, err, errlen));
    {
        struct in_addr a;
        if (inet_pton(AF_INET, c->metrics_addr, &a) != 1)
            return bad(err, errlen, "KVS_METRICS_ADDR", c->metrics_addr,
                       "an IPv4 address (0.0.0.0: every interface)");
    }
    TRY(get_str("KVS_TRACE", c->trace_path, sizeof c->trace_path, err, errlen));
    TRY(cfg_get_int("KVS_SIM_DEVICES", 0, 0, 64, &v, err, errlen));
    c->sim_devices = (int)v;
    TRY(cfg_get_double("KVS_SIM_LINK_GBPS", 0, 0, 1e6, &c->sim_link_gbps, err, errlen));
    TRY(cfg_get_double("KVS_HANDSHAKE_TIMEOUT", 10, 0.1, 3600, &c->handshake_timeout_s, err,
                       errlen));
    TRY(cfg_get_u64("KVS_MAX_QUEUED_BYTES", 4ull << 30, 0, UINT64_MAX, &c->max_queued_bytes, err,
                    errlen));
    TRY(cfg_get_u64("KVS_MAX_QUEUED_REQUESTS", 0, 0, UINT64_MAX, &c->max_queued_reqs,
                    err, errlen));
    TRY(cfg_get_int("KVS_MAX_PENDING_CONN", 64, 1, 1 << 20, &v, err, errlen));
    c->max_pending_conn = (int)v;
    TRY(cfg_load_secret(c, err, errlen));
    TRY(get_str("KVS_CHECKPOINT_DIR", c->checkpoint_dir, sizeof c->checkpoint_dir, err, errlen));
    TRY(cfg_get_u64("KVS_CHECKPOINT_EVERY", 0, 0, UINT64_MAX, &c->checkpoint_every, err,
                    errlen));
    if (c->checkpoint_every > 0 && c->checkpoint_dir[0] == '\0') {
        snprintf(err, errlen, "KVS_CHECKPOINT_EVERY=%llu needs KVS_CHECKPOINT_DIR (where "
                 "servers write their automatic checkpoints)",
                 (unsigned long long)c->checkpoint_every);
        return KVS_ECONFIG;
    }
    if (c->checkpoint_every == 0 && c->checkpoint_dir[0] != '\0') {
        snprintf(err, errlen, "KVS_CHECKPOINT_DIR='%s' needs KVS_CHECKPOINT_EVERY=N (N >= 1 "
                 "rounds between automatic checkpoints)", c->checkpoint_dir);
        return KVS_ECONFIG;
    }

    if (needs_job) {
        if (c->root_uri[0] == '\0') {
            snprintf(err, errlen, "DMLC_PS_ROOT_URI is not set: expected the scheduler's "
                                  "address (e.g. 10.0.0.1 or 127.0.0.1)");
            return KVS_ECONFIG;
        }
        if (c->root_port < 0) {
            snprintf(err, errlen, "DMLC_PS_ROOT_PORT is not set: expected the scheduler's "
                                  "port (0..65535; 0 only for the scheduler itself)");
            return KVS_ECONFIG;
        }
        if (c->root_port == 0 && c->role != CFG_ROLE_SCHEDULER) {
            snprintf(err, errlen, "DMLC_PS_ROOT_PORT='0': only the scheduler may use port 0 "
                                  "(ephemeral); other nodes need its real port");
            return KVS_ECONFIG;
        }
        if (c->num_server == 0) {
            snprintf(err, errlen, "DMLC_NUM_SERVER is not set: expected a positive integer");
            return KVS_ECONFIG;
        }
        if (c->num_worker == 0) {
            snprintf(err, errlen, "DMLC_NUM_WORKER is not set: expected a positive integer");
            return KVS_ECONFIG;
        }
        if (c->worker_id >= c->num_worker) {
            snprintf(err, errlen, "DMLC_WORKER_ID='%d': expected an integer in [0, %d] "
                                  "(DMLC_NUM_WORKER=%d)",
                     c->worker_id, c->num_worker - 1, c->num_worker);
            return KVS_ECONFIG;
        }
        if (c->server_id >= c->num_server) {
            snprintf(err, errlen, "DMLC_SERVER_ID='%d': expected an integer in [0, %d] "
                                  "(DMLC_NUM_SERVER=%d)",
                     c->server_id, c->num_server - 1, c->num_server);
            return KVS_ECONFIG;
        }
    }
    return 0;
}

const char *cfg_security_name(enum cfg_security sec)
{
    switch (sec) {
    case CFG_SEC_AUTH: return "auth";
    case CFG_SEC_CURVE: return "curve";
    default: return "none";
    }
}

static int read_secret_file(cfg *c, const char *path, char *err, size_t errlen)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    ssize_t n;
    if (fd < 0) {
        snprintf(err, errlen, "KVS_SECRET_FILE='%s': cannot open: %s", path, strerror(errno));
        return KVS_ECONFIG;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "KVS_SECRET_FILE='%s': expected a regular file", path);
        close(fd);
        return KVS_ECONFIG;
    }
    if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        snprintf(err, errlen, "KVS_SECRET_FILE='%s': mode %04o lets group or others read "
                 "it; expected a file only its owner can read (chmod 600)", path,
                 (unsigned)(st.st_mode & 07777));
        close(fd);
        return KVS_ECONFIG;
    }
    n = read(fd, c->secret, sizeof c->secret);
    if (n == (ssize_t)sizeof c->secret) {
        char more;
        if (read(fd, &more, 1) == 1) {
            snprintf(err, errlen, "KVS_SECRET_FILE='%s': longer than %d bytes", path,
                     CFG_SECRET_MAX);
            close(fd);
            return KVS_ECONFIG;
        }
    }
    close(fd);
    if (n < 0) {
        snprintf(err, errlen, "KVS_SECRET_FILE='%s': cannot read: %s", path, strerror(errno));
        return KVS_ECONFIG;
    }
    while (n > 0 && (c->secret[n - 1] == '\n' || c->secret[n - 1] == '\r'))
        n--;
    c->secret_len = (size_t)n;
    snprintf(c->secret_from, sizeof c->secret_from, "KVS_SECRET_FILE");
    return 0;
}

int cfg_load_secret(cfg *c, char *err, size_t errlen)
{
    static const char *const modes[] = {"none", "auth", "curve", NULL};
    const char *file = env_value("KVS_SECRET_FILE"), *val = env_value("KVS_SECRET");
    int e;
    c->secret_len = 0;
    c->secret_from[0] = '\0';
    if (file && val) {
        snprintf(err, errlen, "KVS_SECRET_FILE and KVS_SECRET are both set: expected one "
                 "of them (the file is safer: the value of a variable shows in /proc)");
        return KVS_ECONFIG;
    }
    if (file) {
        TRY(read_secret_file(c, file, err, errlen));
    } else if (val) {
        size_t n = strlen(val);
        if (n > CFG_SECRET_MAX) {
            snprintf(err, errlen, "KVS_SECRET: %zu bytes, at most %d allowed", n,
                     CFG_SECRET_MAX);
            return KVS_ECONFIG;
        }
        memcpy(c->secret, val, n);
        c->secret_len = n;
        snprintf(c->secret_from, sizeof c->secret_from, "KVS_SECRET");
    }
    if ((file || val) && c->secret_len < CFG_SECRET_MIN) {
        snprintf(err, errlen, "%s: the secret has %zu bytes; expected at least %d (e.g. "
                 "head -c 32 /dev/urandom | base64)", c->secret_from, c->secret_len,
                 CFG_SECRET_MIN);
        memset(c->secret, 0, sizeof c->secret);
        c->secret_len = 0;
        return KVS_ECONFIG;
    }
    TRY(keyfile_load(c, err, errlen));
    if (c->curve_files && c->secret_len) {
        snprintf(err, errlen, "KVS_CURVE_SERVER_KEY and %s are both set: CURVE key files "
                 "replace the job secret; expected one of them", c->secret_from);
        return KVS_ECONFIG;
    }
    TRY(cfg_get_enum("KVS_SECURITY", c->curve_files ? CFG_SEC_CURVE
                                     : c->secret_len ? CFG_SEC_AUTH : CFG_SEC_NONE,
                     modes, &e, err, errlen));
    c->security = (enum cfg_security)e;
    if (c->curve_files) {
        if (c->security != CFG_SEC_CURVE) {
            snprintf(err, errlen, "KVS_SECURITY='%s' with KVS_CURVE_SERVER_KEY: key files are "
                     "for 'curve' (unset KVS_SECURITY or set it to curve)",
                     cfg_security_name(c->security));
            return KVS_ECONFIG;
        }
        snprintf(c->secret_from, sizeof c->secret_from, "KVS_CURVE_* key files");
        return 0;
    }
    if (c->security != CFG_SEC_NONE && c->secret_len == 0) {
        snprintf(err, errlen, "KVS_SECURITY='%s' needs the job secret: set KVS_SECRET_FILE "
                 "(or KVS_SECRET)", cfg_security_name(c->security));
        return KVS_ECONFIG;
    }
    if (c->security == CFG_SEC_NONE && c->secret_len) {
        snprintf(err, errlen, "KVS_SECURITY='none' with %s set: expected 'auth' or "
                 "'curve' (unset the secret to run an open job)", c->secret_from);
        return KVS_ECONFIG;
    }
    return 0;
}

void cfg_log(const cfg *c, const char *who)
{
    LOG(LOG_INFO, who, "cfg",
        "role=%s root=%s:%d servers=%d workers=%d host=%s iface=%s local=%d van=%s "
        "water_mark=%d heartbeat=%gs/%gs resend=%d/%dms bigarray_bound=%llu "
        "reduction_nthreads=%d slice_threshold=%llu start_timeout=%gs max_message=%llu",
        cfg_role_name(c->role), c->root_uri, c->root_port, c->num_server, c->num_worker,
        c->node_host[0] ? c->node_host : "(auto)", c->interface[0] ? c->interface : "(auto)",
        c->local, c->van == CFG_VAN_P3 ? "p3" : "zmq", c->water_mark, c->hb_interval_s,
        c->hb_timeout_s, c->resend, c->resend_timeout_ms,
        (unsigned long long)c->bigarray_bound, c->reduction_nthreads,
        (unsigned long long)c->slice_threshold, c->start_timeout_s,
        (unsigned long long)c->max_message);
    if (c->security == CFG_SEC_NONE)
        LOG(LOG_WARN, who, "cfg", "no job secret (KVS_SECRET_FILE): this job is open to "
            "anyone who can reach its ports");
    else
        LOG(LOG_INFO, who, "cfg", "security=%s (from %s)",
            cfg_security_name(c->security), c->secret_from);
    if (c->resend)
        LOG(LOG_WARN, who, "cfg", "PS_RESEND=1: kvsd does not resend (TCP is reliable and "
            "dead peers are found by heartbeats); the setting has no effect");
}

int cfg_resolve_host(const cfg *c, char *host, size_t hostlen, char *err, size_t errlen)
{
    struct ifaddrs *ifs = NULL, *it;
    int rc = KVS_ECONFIG;
    bool root_loopback = strncmp(c->root_uri, "127.", 4) == 0 ||
                         strcmp(c->root_uri, "localhost") == 0;

    if (c->node_host[0]) {
        snprintf(host, hostlen, "%s", c->node_host);
        return 0;
    }
    if (c->interface[0] == '\0' && root_loopback) {
        snprintf(host, hostlen, "127.0.0.1");
        return 0;
    }
    if (getifaddrs(&ifs) != 0) {
        snprintf(err, errlen, "getifaddrs failed: %s; set DMLC_NODE_HOST", strerror(errno));
        return KVS_ECONFIG;
    }
    for (it = ifs; it != NULL; it = it->ifa_next) {
        if (it->ifa_addr == NULL || it->ifa_addr->sa_family != AF_INET)
            continue;
        if (c->interface[0]) {
            if (strcmp(it->ifa_name, c->interface) != 0)
                continue;
        } else if (it->ifa_flags & IFF_LOOPBACK) {
            continue;
        }
        struct sockaddr_in *sin = (struct sockaddr_in *)it->ifa_addr;
        if (inet_ntop(AF_INET, &sin->sin_addr, host, (socklen_t)hostlen) != NULL) {
            rc = 0;
            goto out;
        }
    }
    if (c->interface[0])
        snprintf(err, errlen, "DMLC_INTERFACE='%s': no interface of that name with an IPv4 "
                              "address", c->interface);
    else
        snprintf(err, errlen, "no non-loopback IPv4 interface found; set DMLC_NODE_HOST or "
                              "DMLC_INTERFACE");
out:
    freeifaddrs(ifs);
    return rc;
}

void cfg_print_version(const char *prog)
{
    printf("%s (kvsd) %s\n", prog, KVS_VERSION_STRING);
}

int cfg_daemon_start(int argc, char **argv, enum cfg_role role, const char *usage, cfg *c)
{
    static const struct option opts[] = {
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0}};
    const char *name = cfg_role_name(role);
    char err[512], prog[32];
    int ch;
    snprintf(prog, sizeof prog, "kvs-%s", name);
    opterr = 0;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "hV", opts, NULL)) != -1) {
        switch (ch) {
        case 'h':
            fputs(usage, stdout);
            return 0;
        case 'V':
            cfg_print_version(prog);
            return 0;
        default:
            fprintf(stderr, "%s: unknown option '%s'\n%s", prog, argv[optind - 1], usage);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n%s", prog, argv[optind], usage);
        return 2;
    }
    log_set_default_who(name);
    if (cfg_load(c, true, err, sizeof err) != 0) {
        log_line(LOG_ERROR, name, "cfg", "%s", err);
        return 2;
    }
    if (c->role != role && c->role != CFG_ROLE_NONE) {
        log_line(LOG_ERROR, name, "cfg", "DMLC_ROLE='%s': kvs-%s runs the %s; expected '%s' "
                 "or unset", cfg_role_name(c->role), name, name, name);
        return 2;
    }
    c->role = role;
    log_level = c->verbose;
    char who[32];
    cfg_node_who(c, who, sizeof who);
    log_set_default_who(who);
    cfg_log(c, who);
    return -1;
}

void cfg_node_who(const cfg *c, char *who, size_t len)
{
    int rank = c->role == CFG_ROLE_SERVER ? c->server_id
               : c->role == CFG_ROLE_WORKER ? c->worker_id : -1;
    if (rank >= 0)
        snprintf(who, len, "%s %d", cfg_role_name(c->role), rank);
    else
        snprintf(who, len, "%s", cfg_role_name(c->role));
}
