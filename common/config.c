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
#include <pthread.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <unistd.h>

#include "config.h"
#include "cfgsurvive.h"
#include "cfgvars.h"
#include "datapath.h"
#include "keyfile.h"
#include "kvs.h"
#include "log.h"
#include "prio.h"
#include "topo.h"

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

const char *cfg_get_str(const char *name)
{
    const char *v = env_value(name);
    return v ? v : "";
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

int cfg_get_devices(int *out, int *n, char *err, size_t errlen)
{
    static const char want[] = "a comma-separated list of 1 to 64 device ordinals (integers "
                               "0..63, repeats allowed), e.g. '0' or '2,3'";
    const char *v = env_value("KVS_DEVICES"), *p = v;
    *n = 0;
    if (v == NULL)
        return 0;
    for (;;) {
        char *end;
        while (*p == ' ')
            p++;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (errno != 0 || end == p || x < 0 || x >= CFG_DEVICES_MAX || *n == CFG_DEVICES_MAX)
            return bad(err, errlen, "KVS_DEVICES", v, want);
        out[(*n)++] = (int)x;
        while (*end == ' ')
            end++;
        if (*end == '\0')
            return 0;
        if (*end != ',')
            return bad(err, errlen, "KVS_DEVICES", v, want);
        p = end + 1;
    }
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

/* ------------------------------------------------------------ the table */

/* A line of cfgvars.h whose field has another type than its kind does not
 * compile; INT bounds and defaults fit an int. */
#define FIELD_(f) (((cfg *)0)->f)
#define CHECK_INT(f, d, lo, hi)                                                              \
    _Static_assert(_Generic(FIELD_(f), int: 1, default: 0), #f ": INT needs an int field"); \
    _Static_assert((d) >= INT_MIN && (lo) >= INT_MIN && (hi) < INT_MAX - 8, #f ": bounds");
#define CHECK_U64(f, d, lo, hi) \
    _Static_assert(_Generic(FIELD_(f), uint64_t: 1, default: 0), #f ": U64 needs a uint64_t field");
#define CHECK_DBL(f, d, lo, hi) \
    _Static_assert(_Generic(FIELD_(f), double: 1, default: 0), #f ": DBL needs a double field");
#define CHECK_BOOL(f, d, lo, hi) \
    _Static_assert(_Generic(FIELD_(f), bool: 1, default: 0), #f ": BOOL needs a bool field");
#define CHECK_STR(f, d, lo, hi)                                                                \
    _Static_assert(_Generic(FIELD_(f), char *: 1, default: 0) && sizeof FIELD_(f) > sizeof(d), \
                   #f ": STR needs a char array longer than its default");
#define CHECK_ENUM(f, d, lo, hi) \
    _Static_assert(sizeof FIELD_(f) == sizeof(int), #f ": ENUM needs an int-sized enum field");
#define CHECK_SPECIAL(f, d, lo, hi)
#define CHECK_OFF(f, d, lo, hi)
#define CHECK_EXT(f, d, lo, hi)
#define CHECK(name, kind, field, def, lo, hi, words, doc) CHECK_##kind(field, def, lo, hi)
CFG_VARS(CHECK)

/* KVS_JOB_NICE's words idle and auto are 20 and 21 (INT words: MAX+1, ...) */
_Static_assert(PRIO_IDLE == 20 && PRIO_AUTO == 21, "KVS_JOB_NICE words");

#define FIELD_INT(f) .off = offsetof(cfg, f), .size = sizeof FIELD_(f)
#define FIELD_U64 FIELD_INT
#define FIELD_DBL FIELD_INT
#define FIELD_BOOL FIELD_INT
#define FIELD_STR FIELD_INT
#define FIELD_ENUM FIELD_INT
#define FIELD_SPECIAL(f) .off = 0, .size = 0
#define FIELD_OFF FIELD_SPECIAL
#define FIELD_EXT FIELD_SPECIAL
#define VAL_INT(x_, lo_, hi_) .v.i = {(x_), (lo_), (hi_)}
#define VAL_U64(x_, lo_, hi_) .v.u = {(x_), (lo_), (hi_)}
#define VAL_DBL(x_, lo_, hi_) .v.d = {(x_), (lo_), (hi_)}
#define VAL_BOOL(x_, lo_, hi_) .v.b = (x_)
#define VAL_STR(x_, lo_, hi_) .v.s = (x_)
#define VAL_ENUM(x_, lo_, hi_) .v.i = {(x_), 0, 0}
#define VAL_SPECIAL(x_, lo_, hi_) .v.i = {0, 0, 0}
#define VAL_OFF VAL_SPECIAL
#define VAL_EXT VAL_SPECIAL
#define ENTRY(name_, k, f, d, lo, hi, w, doc_)                                                 \
    {.name = #name_, .kind = CFG_K_##k, FIELD_##k(f), VAL_##k(d, lo, hi), .words = (w), \
     .doc = (doc_)},

const cfg_var cfg_vars[] = {CFG_VARS(ENTRY)};
const size_t cfg_nvars = sizeof cfg_vars / sizeof cfg_vars[0];

const cfg_var *cfg_var_find(const char *name)
{
    for (size_t i = 0; i < cfg_nvars; i++)
        if (!strcmp(cfg_vars[i].name, name))
            return &cfg_vars[i];
    return NULL;
}

/* The index of v among words ("a|b|c"), or -1.  ENUM words are matched
 * without regard to case, INT words (KVS_JOB_NICE's) exactly. */
static int word_index(const char *words, const char *v, bool icase)
{
    size_t n = strlen(v);
    int i = 0;
    for (const char *w = words; *w; i++) {
        size_t len = strcspn(w, "|");
        if (len == n && (icase ? strncasecmp(w, v, n) : strncmp(w, v, n)) == 0)
            return i;
        w += len;
        if (*w == '|')
            w++;
    }
    return -1;
}

/* The idx-th word of "a|b|c" (up to its '|'; "" past the end). */
static const char *word_at(const char *words, long long idx)
{
    for (long long k = 0; k < idx && *words; k++) {
        words += strcspn(words, "|");
        if (*words == '|')
            words++;
    }
    return words;
}

/* "'a', 'b' or 'c'" (quote) or "a, b or c" */
static void words_text(const char *words, bool quote, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (const char *w = words; *w && used < len;) {
        size_t n = strcspn(w, "|");
        const char *sep = used == 0 ? "" : w[n] ? ", " : " or ";
        const char *q = quote ? "'" : "";
        int k = snprintf(out + used, len - used, "%s%s%.*s%s", sep, q, (int)n, w, q);
        if (k < 0)
            break;
        used += (size_t)k;
        w += n;
        if (*w == '|')
            w++;
    }
}

static int load_int(cfg *c, const cfg_var *v, char *err, size_t errlen)
{
    const char *val = env_value(v->name);
    long long x;
    int w;
    if (v->words && val && (w = word_index(v->words, val, false)) >= 0) {
        x = v->v.i.max + 1 + w;
    } else if (cfg_get_int(v->name, v->v.i.def, v->v.i.min, v->v.i.max, &x, err, errlen) != 0) {
        if (v->words) {
            char ws[128];
            words_text(v->words, false, ws, sizeof ws);
            snprintf(err, errlen, "%s='%s': expected an integer in [%lld, %lld], %s",
                     v->name, val, v->v.i.min, v->v.i.max, ws);
        }
        return KVS_ECONFIG;
    }
    int out = (int)x; /* in range: CHECK_INT */
    memcpy((char *)c + v->off, &out, sizeof out);
    return 0;
}

static int load_enum(cfg *c, const cfg_var *v, char *err, size_t errlen)
{
    const char *val = env_value(v->name);
    int out = (int)v->v.i.def;
    if (val != NULL && (out = word_index(v->words, val, true)) < 0) {
        char ws[160];
        words_text(v->words, true, ws, sizeof ws);
        snprintf(err, errlen, "%s='%s': expected one of %s", v->name, val, ws);
        return KVS_ECONFIG;
    }
    memcpy((char *)c + v->off, &out, sizeof out);
    return 0;
}

/* A ps-lite switch for a transport kvsd does not have: set, the job would
 * silently run on TCP, so it is refused. */
static int load_off(const cfg_var *v, char *err, size_t errlen)
{
    bool on;
    if (cfg_get_bool(v->name, false, &on, err, errlen) != 0)
        return KVS_ECONFIG;
    if (on) {
        snprintf(err, errlen, "%s='%s': kvsd has no such transport (it runs over TCP through "
                 "ZeroMQ); expected 0 or unset", v->name, env_value(v->name));
        return KVS_ECONFIG;
    }
    return 0;
}

static int load_var(cfg *c, const cfg_var *v, char *err, size_t errlen)
{
    void *f = (char *)c + v->off;
    switch (v->kind) {
    case CFG_K_INT:
        return load_int(c, v, err, errlen);
    case CFG_K_U64:
        return cfg_get_u64(v->name, v->v.u.def, v->v.u.min, v->v.u.max, f, err, errlen);
    case CFG_K_DBL:
        return cfg_get_double(v->name, v->v.d.def, v->v.d.min, v->v.d.max, f, err, errlen);
    case CFG_K_BOOL:
        return cfg_get_bool(v->name, v->v.b, f, err, errlen);
    case CFG_K_STR:
        snprintf(f, v->size, "%s", v->v.s);
        return get_str(v->name, f, v->size, err, errlen);
    case CFG_K_ENUM:
        return load_enum(c, v, err, errlen);
    case CFG_K_OFF:
        return load_off(v, err, errlen);
    case CFG_K_SPECIAL: /* cfg_load_secret */
    case CFG_K_EXT:
        return 0;
    }
    return 0;
}

/* ------------------------------------------------------------ cfg_load */

/* IPv6 is not supported end to end (ZeroMQ sockets without ZMQ_IPV6,
 * IPv4-only interface lookup and metrics): refuse it here, not with a bind
 * failure or a time-out later. */
static int refuse_ipv6(const char *name, const char *val, char *err, size_t errlen)
{
    const char *colon = strchr(val, ':');
    if (val[0] == '[' || (colon != NULL && strchr(colon + 1, ':') != NULL)) {
        snprintf(err, errlen, "%s='%s': IPv6 addresses are not supported; expected an IPv4 "
                 "address or a host name with an IPv4 address", name, val);
        return KVS_ECONFIG;
    }
    if (colon != NULL) {
        snprintf(err, errlen, "%s='%s': expected an IPv4 address or a host name, without a "
                 "port (the port is DMLC_PS_ROOT_PORT)", name, val);
        return KVS_ECONFIG;
    }
    return 0;
}

static int check_values(const cfg *c, char *err, size_t errlen)
{
    struct in_addr a;
    if (c->hb_timeout_s <= c->hb_interval_s) {
        snprintf(err, errlen,
                 "PS_HEARTBEAT_TIMEOUT=%g must be greater than PS_HEARTBEAT_INTERVAL=%g",
                 c->hb_timeout_s, c->hb_interval_s);
        return KVS_ECONFIG;
    }
    if (c->fuse_bytes > 0 && c->fuse_bytes < 4096) {
        snprintf(err, errlen, "KVS_FUSE_BYTES='%llu': expected 0 (no fusion) or 4096 to "
                 "1073741824", (unsigned long long)c->fuse_bytes);
        return KVS_ECONFIG;
    }
    if (inet_pton(AF_INET, c->metrics_addr, &a) != 1)
        return bad(err, errlen, "KVS_METRICS_ADDR", c->metrics_addr,
                   "an IPv4 address (0.0.0.0: every interface)");
    TRY(refuse_ipv6("DMLC_PS_ROOT_URI", c->root_uri, err, errlen));
    TRY(refuse_ipv6("DMLC_NODE_HOST", c->node_host, err, errlen));
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
    return 0;
}

static int check_job(const cfg *c, char *err, size_t errlen)
{
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
    return 0;
}

int cfg_load(cfg *c, bool needs_job, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    err[0] = '\0';
    for (size_t i = 0; i < cfg_nvars; i++)
        TRY(load_var(c, &cfg_vars[i], err, errlen));
    TRY(cfg_get_devices(c->devices, &c->ndevices, err, errlen)); /* KVS_DEVICES */
    TRY(check_values(c, err, errlen));
    TRY(cfg_load_secret(c, err, errlen));
    if (needs_job)
        TRY(check_job(c, err, errlen));
    cfg_survive sv = {c->replicas, c->elastic, c->min_workers, c->max_workers,
                      c->num_server, c->num_worker, c->van == CFG_VAN_P3, c->sched_grace_s};
    TRY(cfg_check_survive(&sv, needs_job, err, errlen));
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

/* KVS_SECRET leaves the environment once read (child processes of a worker
 * must not inherit it); the process keeps it here for later stores, in a
 * page left out of core dumps. */
static unsigned char env_secret[4096] __attribute__((aligned(4096)));
static size_t env_secret_len; /* (env_secret_mu) */
static bool env_secret_taken; /* (env_secret_mu) */
static pthread_mutex_t env_secret_mu = PTHREAD_MUTEX_INITIALIZER;

/* KVS_SECRET's value (copied into out, at most CFG_SECRET_MAX + 1 bytes,
 * NUL-terminated), taken out of the environment; false when never set. */
static bool take_env_secret(char *out)
{
    bool have;
    pthread_mutex_lock(&env_secret_mu);
    const char *val = env_value("KVS_SECRET");
    if (val) {
        size_t n = strlen(val);
        if (n > CFG_SECRET_MAX)
            n = CFG_SECRET_MAX + 1; /* refused by the caller */
        if (!env_secret_taken)
            madvise(env_secret, sizeof env_secret, MADV_DONTDUMP);
        memcpy(env_secret, val, n);
        env_secret_len = n;
        env_secret_taken = true;
        unsetenv("KVS_SECRET");
    }
    have = env_secret_taken;
    memcpy(out, env_secret, env_secret_len);
    out[env_secret_len] = '\0';
    pthread_mutex_unlock(&env_secret_mu);
    return have;
}

void cfg_forget_env_secret(void)
{
    pthread_mutex_lock(&env_secret_mu);
    memset(env_secret, 0, sizeof env_secret);
    env_secret_len = 0;
    env_secret_taken = false;
    pthread_mutex_unlock(&env_secret_mu);
}

void cfg_protect_secrets(const cfg *c)
{
    if (c->secret_len > 0 || c->curve_files)
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); /* no core dump holds the keys */
}

_Static_assert(CFG_CURVE_AUTH_MAX == KEYFILE_AUTH_MAX, "one bound for the authorized keys");

/* The CURVE key files (keyfile.h) into c's curve_* fields. */
static int load_keyfiles(cfg *c, char *err, size_t errlen)
{
    keyfile_keys *k = malloc(sizeof *k);
    if (k == NULL) {
        snprintf(err, errlen, "out of memory reading the CURVE key files");
        return KVS_ENOMEM;
    }
    keyfile_paths paths = {c->curve_server_key, c->curve_client_key, c->curve_authorized};
    int rc = keyfile_load(&paths, c->role == CFG_ROLE_SCHEDULER || c->role == CFG_ROLE_SERVER,
                          c->role == CFG_ROLE_SERVER || c->role == CFG_ROLE_WORKER,
                          cfg_role_name(c->role), k, err, errlen);
    c->curve_files = rc == 0 && k->files;
    memcpy(c->curve_server_pk, k->server_pk, 32);
    memcpy(c->curve_server_sk, k->server_sk, 32);
    c->curve_server_sk_set = k->server_sk_set;
    memcpy(c->curve_client_pk, k->client_pk, 32);
    memcpy(c->curve_client_sk, k->client_sk, 32);
    c->curve_client_set = k->client_set;
    c->curve_nauth = k->nauth;
    for (int i = 0; i < k->nauth; i++) {
        memcpy(c->curve_auth_pk[i], k->auth_pk[i], 32);
        c->curve_auth_role[i] = (uint8_t)(k->auth_worker[i] ? CFG_ROLE_WORKER : CFG_ROLE_SERVER);
    }
    explicit_bzero(k, sizeof *k); /* secret keys */
    free(k);
    return rc;
}

int cfg_load_secret(cfg *c, char *err, size_t errlen)
{
    static const char *const modes[] = {"none", "auth", "curve", NULL};
    char envval[CFG_SECRET_MAX + 2];
    const char *file = env_value("KVS_SECRET_FILE");
    const char *val = take_env_secret(envval) ? envval : NULL;
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
    memset(envval, 0, sizeof envval);
    if ((file || val) && c->secret_len < CFG_SECRET_MIN) {
        snprintf(err, errlen, "%s: the secret has %zu bytes; expected at least %d (e.g. "
                 "head -c 32 /dev/urandom | base64)", c->secret_from, c->secret_len,
                 CFG_SECRET_MIN);
        memset(c->secret, 0, sizeof c->secret);
        c->secret_len = 0;
        return KVS_ECONFIG;
    }
    TRY(load_keyfiles(c, err, errlen));
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

/* "NAME=value" of one parsed variable (long values cut with "..."). */
static int var_text(const cfg *c, const cfg_var *v, char *out, size_t len)
{
    const char *f = (const char *)c + v->off;
    int i;
    uint64_t u;
    double d;
    bool b;
    switch (v->kind) {
    case CFG_K_INT:
        memcpy(&i, f, sizeof i);
        if (v->words && i > v->v.i.max) {
            const char *w = word_at(v->words, i - v->v.i.max - 1);
            return snprintf(out, len, "%s=%.*s", v->name, (int)strcspn(w, "|"), w);
        }
        return snprintf(out, len, "%s=%d", v->name, i);
    case CFG_K_ENUM: {
        memcpy(&i, f, sizeof i);
        const char *w = word_at(v->words, i);
        return snprintf(out, len, "%s=%.*s", v->name, (int)strcspn(w, "|"), w);
    }
    case CFG_K_U64:
        memcpy(&u, f, sizeof u);
        return snprintf(out, len, "%s=%llu", v->name, (unsigned long long)u);
    case CFG_K_DBL:
        memcpy(&d, f, sizeof d);
        return snprintf(out, len, "%s=%g", v->name, d);
    case CFG_K_BOOL:
        memcpy(&b, f, sizeof b);
        return snprintf(out, len, "%s=%d", v->name, b ? 1 : 0);
    case CFG_K_STR:
        if (strlen(f) > 120)
            return snprintf(out, len, "%s='%.117s...'", v->name, f);
        return snprintf(out, len, "%s='%s'", v->name, f);
    default:
        return 0;
    }
}

void cfg_log(const cfg *c, const char *who)
{
    char line[900], item[200];
    size_t used = 0;
    /* every parsed variable, NAME=value, in lines under the log's limit */
    for (size_t k = 0; k < cfg_nvars; k++) {
        int n = var_text(c, &cfg_vars[k], item, sizeof item);
        if (n <= 0)
            continue;
        size_t il = strlen(item);
        if (used > 0 && used + 1 + il >= sizeof line) {
            LOG(LOG_INFO, who, "cfg", "%s", line);
            used = 0;
        }
        used += (size_t)snprintf(line + used, sizeof line - used, "%s%s", used ? " " : "", item);
    }
    if (used > 0)
        LOG(LOG_INFO, who, "cfg", "%s", line);
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
    log_set_level(c->verbose);
    cfg_protect_secrets(c);
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
