/* config.h - the job configuration, read once from the environment.
 *
 * Every variable is validated; a malformed value is an error that names the
 * variable, the value and what is allowed (daemons exit 2 on it).  The
 * parse helpers are exported so that components with their own variables
 * (reduce/, tree/) validate them the same way.  Thread-safety: cfg_load()
 * only reads the environment; call it before starting threads that setenv().
 */
#ifndef KVS_COMMON_CONFIG_H
#define KVS_COMMON_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cfg_role { CFG_ROLE_NONE = 0, CFG_ROLE_SCHEDULER, CFG_ROLE_SERVER, CFG_ROLE_WORKER };
enum cfg_van { CFG_VAN_ZMQ = 0, CFG_VAN_P3 };
/* KVS_SECURITY: none (open job, no secret), auth (every connection proves
 * the job secret; data in clear), curve (ZeroMQ CURVE: authenticated and
 * encrypted). */
enum cfg_security { CFG_SEC_NONE = 0, CFG_SEC_AUTH, CFG_SEC_CURVE };

#define CFG_CURVE_AUTH_MAX 1024 /* keys in KVS_CURVE_AUTHORIZED */
#define CFG_SECRET_MIN 16   /* bytes: shorter secrets are refused */
#define CFG_SECRET_MAX 4096

#define CFG_HOST_MAX 256
#define CFG_PATH_MAX 4096
#define CFG_TOPOLOGY_MAX 65536 /* KVS_TOPOLOGY text: up to 64 x 64 weights */

#define CFG_DEVICES_MAX 64 /* entries of KVS_DEVICES (= DEV_MAX) */

typedef struct cfg {
    enum cfg_role role;             /* DMLC_ROLE */
    char root_uri[CFG_HOST_MAX];    /* DMLC_PS_ROOT_URI */
    int root_port;                  /* DMLC_PS_ROOT_PORT, 0..65535 */
    int num_server;                 /* DMLC_NUM_SERVER >= 1 */
    int num_worker;                 /* DMLC_NUM_WORKER >= 1 */
    char node_host[CFG_HOST_MAX];   /* DMLC_NODE_HOST, or from DMLC_INTERFACE, or auto */
    char interface[64];             /* DMLC_INTERFACE ("" = auto) */
    int worker_id;                  /* DMLC_WORKER_ID, -1 = unset */
    int server_id;                  /* DMLC_SERVER_ID, -1 = unset */
    bool local;                     /* DMLC_LOCAL: ipc:// between nodes on one host */
    char tmpdir[CFG_PATH_MAX];      /* TMPDIR: where the ipc:// sockets go ("/tmp") */
    enum cfg_van van;               /* DMLC_PS_VAN_TYPE */
    int water_mark;                 /* DMLC_PS_WATER_MARK */
    int verbose;                    /* PS_VERBOSE 0..2 */
    double hb_interval_s;           /* PS_HEARTBEAT_INTERVAL (s, > 0) */
    double hb_timeout_s;            /* PS_HEARTBEAT_TIMEOUT (s, > interval) */
    bool resend;                    /* PS_RESEND */
    int resend_timeout_ms;          /* PS_RESEND_TIMEOUT */
    uint64_t bigarray_bound;        /* MXNET_KVSTORE_BIGARRAY_BOUND (elements) */
    int reduction_nthreads;         /* MXNET_KVSTORE_REDUCTION_NTHREADS */
    uint64_t slice_threshold;       /* MXNET_KVSTORE_SLICE_THRESHOLD (elements) */
    bool use_tree;                  /* MXNET_KVSTORE_USETREE */
    bool tree_log;                  /* MXNET_KVSTORE_LOGTREE */
    uint64_t tree_array_bound;      /* MXNET_KVSTORE_TREE_ARRAY_BOUND (elements) */
    bool tree_backtrack;            /* MXNET_KVSTORE_TREE_BACKTRACK */
    double tree_penalty;            /* MXNET_KVSTORE_TREE_LINK_USAGE_PENALTY */
    bool gpu_p2p;                   /* MXNET_ENABLE_GPU_P2P */
    char topology[CFG_TOPOLOGY_MAX]; /* KVS_TOPOLOGY ("" = detect) */
    bool tree_optimize;             /* KVS_TREE_OPTIMIZE */
    uint64_t tree_effort;           /* KVS_TREE_EFFORT (percent) */
    int tree_depth_slack;           /* KVS_TREE_DEPTH_SLACK 0..1 */
    bool tree_weighted;             /* KVS_TREE_WEIGHTED */
    int tree_max_trees;             /* KVS_TREE_MAX_TREES (0: 4n) */
    uint64_t tree_min_slice;        /* KVS_TREE_MIN_SLICE (bytes) */
    char cuda_plugin[CFG_PATH_MAX]; /* KVS_CUDA_PLUGIN ("" = search) */
    bool update_on_kvstore;         /* MXNET_UPDATE_ON_KVSTORE */
    double start_timeout_s;         /* KVS_START_TIMEOUT: registration deadline */
    uint64_t max_message;           /* KVS_MAX_MESSAGE: largest accepted data frame (bytes) */
    uint64_t chunk_bytes;           /* KVS_CHUNK_BYTES: largest data message (pipelining) */
    uint64_t rsp_chunk_bytes;       /* KVS_RSP_CHUNK_BYTES: largest chunk of a row-sparse key */
    bool cma;                       /* KVS_CMA: same-host direct memory copies */
    double link_gbps;               /* KVS_LINK_GBPS: pace connections to other hosts
                                     * at their share of this rate (0: not paced) */
    uint64_t fuse_bytes;            /* KVS_FUSE_BYTES: largest fused message (0: no fusion) */
    int job_nice;                   /* KVS_JOB_NICE: niceness of a server's job and
                                     * reduction threads (0..19; PRIO_IDLE: "idle";
                                     * PRIO_AUTO: "auto", the default) */
    uint64_t p3_credit;             /* KVS_P3_CREDIT: p3 bytes in flight per server (0: no bound) */
    bool malloc_tune;               /* KVS_MALLOC_TUNE (libkvs): see common/memtune.h */
    int port;                       /* KVS_PORT: server bind port (0 = ephemeral) */
    char port_file[CFG_PATH_MAX];          /* KVS_PORT_FILE: scheduler writes its bound port here */
    int metrics_port;               /* KVS_METRICS_PORT: Prometheus /metrics (0 = off) */
    char metrics_addr[64];          /* KVS_METRICS_ADDR: IPv4 address it listens on */
    char trace_path[CFG_PATH_MAX];          /* KVS_TRACE (libkvs): Chrome trace file ("" = off) */
    int sim_devices;                /* KVS_SIM_DEVICES: simulated devices (0 = CUDA's) */
    double sim_link_gbps;           /* KVS_SIM_LINK_GBPS: sim copy pacing (0 = off) */
    int ndevices;                   /* KVS_DEVICES: entries (0 = every device) */
    int devices[CFG_DEVICES_MAX];   /* kvsd device i = device ordinal devices[i] */
    enum cfg_security security;     /* KVS_SECURITY (default: auth with a secret, else none) */
    unsigned char secret[CFG_SECRET_MAX]; /* KVS_SECRET_FILE's content or KVS_SECRET */
    size_t secret_len;              /* 0: no secret (open job) */
    char secret_from[64];           /* which variable gave it, for messages */
    double handshake_timeout_s;     /* KVS_HANDSHAKE_TIMEOUT: a peer must finish ZeroMQ's
                                     * handshake (and prove the secret) within this */
    char curve_server_key[CFG_PATH_MAX]; /* KVS_CURVE_SERVER_KEY, KVS_CURVE_CLIENT_KEY, */
    char curve_client_key[CFG_PATH_MAX]; /* KVS_CURVE_AUTHORIZED: key file paths */
    char curve_authorized[CFG_PATH_MAX]; /* ("" = unset; read by keyfile_load) */
    bool curve_files;               /* KVS_CURVE_SERVER_KEY given: CURVE keys from files
                                     * (common/keyfile.h) instead of from the secret */
    uint8_t curve_server_pk[32];    /* the listeners' (scheduler's, servers') key pair */
    uint8_t curve_server_sk[32];    /* (secret part: scheduler and servers only) */
    bool curve_server_sk_set;
    uint8_t curve_client_pk[32];    /* KVS_CURVE_CLIENT_KEY: this node's own key pair */
    uint8_t curve_client_sk[32];
    bool curve_client_set;
    int curve_nauth;                /* KVS_CURVE_AUTHORIZED: the client keys let in */
    uint8_t curve_auth_pk[CFG_CURVE_AUTH_MAX][32];
    uint8_t curve_auth_role[CFG_CURVE_AUTH_MAX]; /* enum cfg_role */
    uint64_t max_queued_bytes;      /* KVS_MAX_QUEUED_BYTES, KVS_MAX_QUEUED_REQUESTS: what a */
    uint64_t max_queued_reqs;       /* server keeps waiting for one worker (0: no bound) */
    uint64_t max_keys;              /* KVS_MAX_KEYS, KVS_MAX_KEY_BYTES: key parts and their */
    uint64_t max_key_bytes;         /* bytes one server holds for the job (0: no bound) */
    int max_pending_conn;           /* KVS_MAX_PENDING_CONN: connections to a daemon that
                                     * have not identified themselves (net/guard.h) */
    char checkpoint_dir[CFG_PATH_MAX];      /* KVS_CHECKPOINT_DIR: servers' automatic checkpoints */
    uint64_t checkpoint_every;      /* KVS_CHECKPOINT_EVERY: rounds between them (0 = off) */
    int replicas;                   /* KVS_REPLICAS: backups per key range (0, 1) */
    bool elastic;                   /* KVS_ELASTIC: membership may change while running */
    int min_workers;                /* KVS_MIN_WORKERS, KVS_MAX_WORKERS: with KVS_ELASTIC, */
    int max_workers;                /* the bounds on the workers (0 = DMLC_NUM_WORKER) */
    double sched_grace_s;           /* KVS_SCHEDULER_GRACE: how long a node goes on without
                                     * the scheduler (0: its death ends the job) */
} cfg;

/* The variable list (cfgvars.h) as data: what cfg_load parses and cfg_log
 * prints, and what tests compare with the documentation. */
enum cfg_kind {
    CFG_K_INT, CFG_K_U64, CFG_K_DBL, CFG_K_BOOL, CFG_K_STR, CFG_K_ENUM,
    CFG_K_SPECIAL, CFG_K_OFF, CFG_K_EXT
};

typedef struct cfg_var {
    const char *name;
    enum cfg_kind kind;
    size_t off, size;               /* the field in cfg (0, 0: none) */
    union {
        struct { long long def, min, max; } i; /* INT, ENUM (def only) */
        struct { uint64_t def, min, max; } u;  /* U64 */
        struct { double def, min, max; } d;    /* DBL */
        bool b;                                /* BOOL */
        const char *s;                         /* STR */
    } v;
    const char *words;              /* "a|b|c" or NULL */
    const char *doc;                /* one line */
} cfg_var;

extern const cfg_var cfg_vars[];
extern const size_t cfg_nvars;

/* The entry named name, or NULL. */
const cfg_var *cfg_var_find(const char *name);

/* Fill c with defaults, then with the environment.  needs_job: the DMLC_*
 * job variables (root, sizes) are required.  On error returns KVS_ECONFIG
 * and writes one line naming the variable into err. */
int cfg_load(cfg *c, bool needs_job, char *err, size_t errlen);

/* Typed readers.  Each returns 0 and stores the default when the variable is
 * unset or empty, 0 and the value when it parses within [min, max], and
 * KVS_ECONFIG with a message in err otherwise. */
int cfg_get_int(const char *name, long long def, long long min, long long max, long long *out,
                char *err, size_t errlen);
int cfg_get_u64(const char *name, uint64_t def, uint64_t min, uint64_t max, uint64_t *out,
                char *err, size_t errlen);
int cfg_get_double(const char *name, double def, double min, double max, double *out,
                   char *err, size_t errlen);
int cfg_get_bool(const char *name, bool def, bool *out, char *err, size_t errlen);
/* KVS_DEVICES: out[0..*n) the listed device ordinals (*n = 0 when unset). */
int cfg_get_devices(int *out, int *n, char *err, size_t errlen);
/* The variable's text as set ("" when unset): for paths and for messages
 * that quote what the user wrote. */
const char *cfg_get_str(const char *name);
/* words: NULL-terminated list; *out = index of the matching word. */
int cfg_get_enum(const char *name, int def, const char *const *words, int *out, char *err,
                 size_t errlen);

/* Read the job secret from KVS_SECRET_FILE (a regular file that neither
 * group nor others may read; trailing newlines are dropped) or KVS_SECRET
 * into c, and KVS_SECURITY.  Called by cfg_load. */
int cfg_load_secret(cfg *c, char *err, size_t errlen);

/* KVS_SECRET is taken out of the environment when first read (so child
 * processes do not inherit it) and kept by the process, in memory left
 * out of core dumps, for the stores it creates later; a new KVS_SECRET
 * replaces it.  cfg_forget_env_secret drops the kept one (tests). */
void cfg_forget_env_secret(void);

/* A daemon with a secret (or CURVE key files): no core dump of it, so the
 * keys in its memory never land in one (prctl PR_SET_DUMPABLE 0; also keeps
 * other users' debuggers out).  Not for libkvs: a server copies a worker's
 * memory directly only while the worker stays dumpable. */
void cfg_protect_secrets(const cfg *c);

const char *cfg_security_name(enum cfg_security sec);

/* Log every value at INFO (PS_VERBOSE >= 1); without a job secret one
 * warning line says that the job is open. */
void cfg_log(const cfg *c, const char *who);

/* The address this node advertises: DMLC_NODE_HOST, else the IPv4 address of
 * DMLC_INTERFACE, else 127.0.0.1 when the root is on loopback, else the
 * first non-loopback IPv4 address.  Writes host (a NUL-terminated string). */
int cfg_resolve_host(const cfg *c, char *host, size_t hostlen, char *err, size_t errlen);

const char *cfg_role_name(enum cfg_role role);

/* The start of a daemon's main(): --help prints usage and returns 0; any
 * other argument, a variable that does not parse, or a DMLC_ROLE other than
 * role (or unset) prints one line and returns 2; --version prints the version
 * and returns 0.  Otherwise loads c (role
 * set), applies PS_VERBOSE, logs the configuration and returns -1: go on. */
int cfg_daemon_start(int argc, char **argv, enum cfg_role role, const char *usage, cfg *c);

/* "kvs-server (kvsd) 0.1.0" on stdout: every binary's --version. */
void cfg_print_version(const char *prog);

/* The log name of this node before the scheduler assigns its rank: "server 2"
 * when DMLC_SERVER_ID (DMLC_WORKER_ID) preferred one, else "server". */
void cfg_node_who(const cfg *c, char *who, size_t len);

/* Worker slots (node ids 9 + 2*slot) of the job: KVS_MAX_WORKERS with
 * KVS_ELASTIC (0: DMLC_NUM_WORKER), else DMLC_NUM_WORKER; and the fewest
 * members an elastic job goes on with (KVS_MIN_WORKERS, 0: DMLC_NUM_WORKER). */
static inline int cfg_worker_slots(const cfg *c)
{
    return c->elastic && c->max_workers > 0 ? c->max_workers : c->num_worker;
}
static inline int cfg_min_workers(const cfg *c)
{
    return c->min_workers > 0 ? c->min_workers : c->num_worker;
}

#endif
