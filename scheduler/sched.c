/* sched.c - the scheduler's state machine; see sched.h. */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <uv.h>
#include <zmq.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/memtune.h"
#include "common/metrics.h"
#include "net/http.h"
#include "net/auth.h"
#include "net/guard.h"
#include "net/live.h"
#include "net/net.h"
#include "scheduler/promote.h"
#include "scheduler/sched.h"

#define WHO "scheduler"
#define IDENT_MAX 256

typedef struct sched_node {
    char ident[IDENT_MAX];
    size_t ident_len;
    int role;
    int pref_rank;
    int rank;
    int id;
    char endpoint[128];
    char host[CFG_HOST_MAX];
    uint64_t last_seen;
    int fd; /* the TCP connection its messages arrive on (-1: unknown) */
    uint64_t ino; /* the socket on fd (net_sock_ino): a descriptor number is reused */
    bool suspect; /* a DISCONNECTED for fd came while fd still held its socket */
    bool alive;
    bool exited;
    bool in_barrier;
    uint64_t barrier_req;
    /* workers: what it said about its host (proto_local); have_local false:
     * it said nothing (it stays alone) */
    bool have_local;
    proto_local local;
    int group, lrank, lsize; /* its local group (start_job) */
    /* servers: what it said about its host (proto_register_host); have_host
     * false: it said nothing */
    bool have_host;
    uint64_t pidns;
    int cma;
    /* KVS_ELASTIC (docs/design.md "Elastic workers"): a worker that
     * registered while the job ran and waits for the epoch that admits it;
     * the epoch whose announcement named it (0: none yet) */
    bool joining;
    uint64_t in_epoch;
    uint64_t since; /* the epoch that admitted it (1: the job started with it) */
} sched_node;

/* KVS_ELASTIC: a worker that registered while every slot was taken.  A
 * restarted worker often registers before the scheduler has seen its old
 * connection close; it waits for a slot to free, at most the heartbeat
 * timeout (by then a dead worker has been declared dead). */
typedef struct sched_wait {
    char ident[IDENT_MAX];
    size_t ident_len;
    int fd;
    uint64_t ino;
    uint64_t since, until; /* ms (clock_ms) */
    char endpoint[128];
    char host[CFG_HOST_MAX];
} sched_wait;

typedef struct sched {
    const cfg *c;
    uv_loop_t loop;
    void *zctx;
    net_sock *sock;
    net_auth *auth;
    net_mon *mon;
    net_guard *guard; /* closes connections that never register */
    uv_timer_t timer;
    uv_signal_t sigint, sigterm;
    sched_node *nodes;
    int nnodes, cap;
    int nserver_reg, nworker_reg;
    bool started; /* every node registered, ranks sent */
    bool done;
    int exit_code;
    int dead_count;
    uint64_t start_ms;
    met_reg *met;     /* metrics (KVS_METRICS_PORT serves them) */
    net_http *http;
    met_series *m_barriers;
    int end_status;       /* the error SHUTDOWN carries when the job fails (0: peer dead) */
    int fail_status;      /* != 0: the job failed before it started; refuse everyone */
    uint64_t linger_until; /* then exit (fail_status set) */
    char dead_text[700];  /* the first failure: what every node is told */
    /* KVS_ELASTIC: the membership epoch the workers know, the one being
     * announced to the servers (acks still missing), and whether another
     * change came meanwhile */
    uint64_t epoch, ann_epoch;
    uint64_t job_id;
    int acks_left;
    bool again;
    sched_owners owners;  /* KVS_REPLICAS=1: who owns each key range (promote.h) */
    sched_wait *waiting;  /* joiners waiting for a free slot, oldest first */
    int nwaiting;
    /* KVS_SCHEDULER_GRACE: this scheduler learns a running job back from
     * its nodes' rejoins (recovering, since recover_ms) and has (recovered);
     * the barriers the job has passed; the workers the servers said had
     * left (num_worker bytes, NULL until a server says so) */
    bool recovering, recovered;
    uint64_t recover_ms;
    uint64_t barriers_done;
    uint8_t *left;
} sched;

static sched_node *find_node(sched *s, const void *ident, size_t len)
{
    for (int i = 0; i < s->nnodes; i++)
        if (s->nodes[i].ident_len == len && !memcmp(s->nodes[i].ident, ident, len))
            return &s->nodes[i];
    return NULL;
}

static bool is_waiting(const sched *s, const void *ident, size_t len)
{
    for (int i = 0; i < s->nwaiting; i++)
        if (s->waiting[i].ident_len == len && !memcmp(s->waiting[i].ident, ident, len))
            return true;
    return false;
}

/* ---- metrics ---- */

static sched_node *find_node(sched *s, const void *ident, size_t len);

/* The socket's traffic, by node (net_sock_count). */
static void count_msg(void *arg, const void *ident, size_t len, uint64_t bytes, int dir)
{
    sched *s = arg;
    char peer[32];
    met_peer p;
    const sched_node *n = ident ? find_node(s, ident, len) : NULL;
    if (n && n->id)
        proto_node_name(n->id, peer, sizeof peer);
    else
        snprintf(peer, sizeof peer, "unregistered");
    met_peer_init(&p, s->met, peer);
    if (dir)
        met_peer_out(&p, MET_PATH_SOCKET, bytes);
    else
        met_peer_in(&p, MET_PATH_SOCKET, bytes);
}

/* Before each scrape: the job view (loop thread). */
static void collect(void *arg)
{
    sched *s = arg;
    static const char *const states[] = {"starting", "running", "done", "failed"};
    static const char *const nstates[] = {"alive", "dead", "exited"};
    met_reg *r = s->met;
    met_fam *hb = met_family(r, MET_GAUGE, "kvs_heartbeat_age_seconds",
                             "Seconds since the node was last heard from", "node", "host");
    met_fam *nodes = met_family(r, MET_GAUGE, "kvs_nodes",
                                "Nodes of the job by role and state", "role", "state");
    met_fam *job = met_family(r, MET_GAUGE, "kvs_job_state",
                              "1 for the job's current state, 0 for the others", "state", NULL);
    int cur = s->done ? (s->exit_code ? 3 : 2) : s->started ? 1 : 0;
    for (int i = 0; i < 4; i++)
        met_set(met_get(job, states[i], NULL), i == cur);
    int count[2][3] = {{0}};
    uint64_t now = clock_ms();
    for (int i = 0; i < s->nnodes; i++) {
        sched_node *n = &s->nodes[i];
        int ri = n->role == CFG_ROLE_SERVER ? 0 : 1;
        int st = !n->alive ? 1 : n->exited ? 2 : 0;
        count[ri][st]++;
        if (n->id) {
            char name[32];
            proto_node_name(n->id, name, sizeof name);
            met_set(met_get(hb, name, n->host), (double)(now - n->last_seen) / 1000.0);
        }
    }
    for (int ri = 0; ri < 2; ri++)
        for (int st = 0; st < 3; st++)
            met_set(met_get(nodes, ri ? "worker" : "server", nstates[st]), count[ri][st]);
    met_set(met_get(met_family(r, MET_GAUGE, "kvs_job_size", "Nodes the job was configured "
                               "with (DMLC_NUM_SERVER, DMLC_NUM_WORKER)", "role", NULL),
                    "server", NULL), s->c->num_server);
    met_set(met_get(met_family(r, MET_GAUGE, "kvs_job_size", NULL, "role", NULL), "worker",
                    NULL), s->c->num_worker);
    met_set(met_get(met_family(r, MET_GAUGE, "kvs_queue_depth", "Messages or requests "
                               "waiting, by queue", "queue", NULL), "send", NULL),
            (double)net_sock_queued(s->sock));
}

static void metrics_init(sched *s)
{
    s->met = met_reg_new();
    met_process_info(s->met, "scheduler");
    s->m_barriers = met_one(s->met, MET_COUNTER, "kvs_barriers_total",
                            "Barriers completed (every live worker entered)");
    met_reg_on_collect(s->met, collect, s);
    net_sock_count(s->sock, count_msg, s);
}

static void send_to(sched *s, sched_node *n, proto_hdr *h, const char *text)
{
    h->sender = PROTO_SCHEDULER_ID;
    if (net_send_text(s->sock, n->ident, n->ident_len, h, text) != 0)
        LOG(LOG_INFO, WHO, "net", "could not send %s to node %d", proto_type_name(h->type),
            n->id);
}

/* End the job: tell every node (status: the job's error, 0 if it ended
 * normally; the text names the first failure) and stop the loop. */
static void finish(sched *s, int code)
{
    if (s->done)
        return;
    s->done = true;
    s->exit_code = code;
    int status = code == 0 ? 0 : s->end_status ? s->end_status : KVS_EPEERDEAD;
    const char *text = code == 0 ? NULL : s->dead_text[0] ? s->dead_text : "job failed";
    for (int i = 0; i < s->nnodes; i++) {
        sched_node *n = &s->nodes[i];
        if (n->alive && (n->role == CFG_ROLE_SERVER || !n->exited)) {
            proto_hdr h = {.type = PROTO_SHUTDOWN, .status = status};
            send_to(s, n, &h, text);
        }
    }
    for (int i = 0; i < s->nwaiting; i++) {
        proto_hdr e = {.type = PROTO_REFUSED, .status = code == 0 ? KVS_ECONFIG : status,
                       .sender = PROTO_SCHEDULER_ID};
        net_send_text(s->sock, s->waiting[i].ident, s->waiting[i].ident_len, &e,
                      code == 0 ? "the job has ended" : text);
    }
    s->nwaiting = 0;
    uv_stop(&s->loop);
}

/* The job cannot start (status, text): tell every registered node now and
 * refuse, with the same words, whoever still registers until the loop
 * stops (a few seconds, so that late nodes hear the cause too). */
static void fail_start(sched *s, int status, const char *text)
{
    if (s->fail_status)
        return;
    s->fail_status = status;
    snprintf(s->dead_text, sizeof s->dead_text, "%s", text);
    LOG(LOG_ERROR, WHO, "job", "%s; telling every node", text);
    for (int i = 0; i < s->nnodes; i++) {
        proto_hdr h = {.type = PROTO_SHUTDOWN, .status = status};
        send_to(s, &s->nodes[i], &h, text);
        s->nodes[i].alive = false;
    }
    uint64_t left = (uint64_t)(s->c->start_timeout_s * 1000), now = clock_ms();
    left = now - s->start_ms < left ? left - (now - s->start_ms) : 0;
    s->linger_until = now + (left < 5000 ? left : 5000);
    s->exit_code = 1;
}

static int cmp_nodes(const void *a, const void *b)
{
    const sched_node *x = *(sched_node *const *)a, *y = *(sched_node *const *)b;
    int r = strcmp(x->host, y->host);
    if (r)
        return r;
    r = strcmp(x->endpoint, y->endpoint);
    if (r)
        return r;
    return strcmp(x->ident, y->ident);
}

/* Ranks: preferred ranks first (first come keeps a contested rank), then
 * the rest in (host, endpoint, routing id) order. */
static void assign_ranks(sched *s, int role, int count)
{
    bool *taken = calloc((size_t)count, 1);
    sched_node **rest = calloc((size_t)s->nnodes, sizeof *rest);
    int nrest = 0;
    for (int i = 0; i < s->nnodes; i++) {
        sched_node *n = &s->nodes[i];
        if (n->role != role)
            continue;
        if (n->pref_rank >= 0 && n->pref_rank < count && !taken[n->pref_rank]) {
            taken[n->pref_rank] = true;
            n->rank = n->pref_rank;
        } else {
            if (n->pref_rank >= 0)
                LOG_LIMITED(LOG_WARN, WHO, "rank", "%s %s asked for rank %d, which is taken or out "
                    "of range; assigning another", cfg_role_name(role), n->host, n->pref_rank);
            rest[nrest++] = n;
        }
    }
    qsort(rest, (size_t)nrest, sizeof *rest, cmp_nodes);
    for (int i = 0, r = 0; i < nrest; i++) {
        while (taken[r])
            r++;
        taken[r] = true;
        rest[i]->rank = r;
    }
    for (int i = 0; i < s->nnodes; i++) {
        sched_node *n = &s->nodes[i];
        if (n->role == role)
            n->id = role == CFG_ROLE_SERVER ? proto_server_id(n->rank)
                                            : proto_worker_id(n->rank);
    }
    free(taken);
    free(rest);
}

/* ---- local groups ----
 * Workers that registered with the same host address and the same pid
 * namespace form a local group (DESIGN "Host identity"); local ranks follow
 * the global ranks unless every member gave its own (KVS_LOCAL_RANK /
 * LOCAL_RANK), and a size given (KVS_LOCAL_SIZE / LOCAL_WORLD_SIZE) must be
 * the group's.  A layout that contradicts itself fails the whole job. */

static bool same_host(const sched_node *a, const sched_node *b)
{
    return a->have_local && b->have_local && !strcmp(a->host, b->host) &&
           a->local.pidns == b->local.pidns;
}

/* Assign n->group/lrank/lsize for every worker.  0, or KVS_ECONFIG with the
 * reason in why. */
static int form_groups(sched *s, char *why, size_t whylen)
{
    int ngroups = 0, nw = 0;
    sched_node **w = calloc((size_t)s->nnodes + 1, sizeof *w);
    if (w == NULL) {
        snprintf(why, whylen, "out of memory forming local groups");
        return KVS_ENOMEM;
    }
    for (int i = 0; i < s->nnodes; i++)
        if (s->nodes[i].role == CFG_ROLE_WORKER) {
            s->nodes[i].group = -1;
            w[nw++] = &s->nodes[i];
        }
    /* by global rank, so that default local ranks follow it */
    for (int i = 1; i < nw; i++)
        for (int j = i; j > 0 && w[j - 1]->rank > w[j]->rank; j--) {
            sched_node *t = w[j];
            w[j] = w[j - 1];
            w[j - 1] = t;
        }
    int rc = 0;
    for (int i = 0; i < nw && rc == 0; i++) {
        sched_node *a = w[i];
        if (a->have_local && w[0]->have_local && a->local.agg != w[0]->local.agg) {
            snprintf(why, whylen, "inconsistent KVS_LOCAL_AGG: worker %d (%.64s) has %d, worker "
                     "%d (%.64s) has %d; every worker must use the same", w[0]->rank, w[0]->host,
                     w[0]->local.agg, a->rank, a->host, a->local.agg);
            rc = KVS_ECONFIG;
            break;
        }
        if (a->have_local && w[0]->have_local && a->local.agg_min != -1 &&
            w[0]->local.agg_min != -1 && a->local.agg_min != w[0]->local.agg_min) {
            char m0[24] = "the default", ma[24] = "the default";
            if (w[0]->local.agg_min >= 0)
                snprintf(m0, sizeof m0, "%lld", (long long)w[0]->local.agg_min);
            if (a->local.agg_min >= 0)
                snprintf(ma, sizeof ma, "%lld", (long long)a->local.agg_min);
            snprintf(why, whylen, "inconsistent KVS_LOCAL_AGG_MIN: worker %d (%.64s) has %s, "
                     "worker %d (%.64s) has %s; every worker must use the same", w[0]->rank,
                     w[0]->host, m0, a->rank, a->host, ma);
            rc = KVS_ECONFIG;
            break;
        }
        if (a->group >= 0)
            continue;
        int g = ngroups++, size = 0, given = 0;
        for (int j = i; j < nw; j++)
            if (w[j] == a || (w[j]->group < 0 && same_host(a, w[j]))) {
                w[j]->group = g;
                w[j]->lrank = size++;
                given += w[j]->have_local && (w[j]->local.lrank >= 0 || w[j]->local.lsize >= 0);
            }
        for (int j = i; j < nw; j++)
            w[j]->lsize = w[j]->group == g ? size : w[j]->lsize;
        if (given == 0)
            continue;
        /* the layout was given: check it, take its local ranks */
        uint8_t *seen = calloc((size_t)size, 1);
        for (int j = i; j < nw && rc == 0; j++) {
            sched_node *b = w[j];
            if (b->group != g)
                continue;
            if (b->local.lrank < 0 || b->local.lsize < 0) {
                snprintf(why, whylen, "inconsistent local layout on %.64s: worker %d gave no "
                         "local rank and size (KVS_LOCAL_RANK/KVS_LOCAL_SIZE or LOCAL_RANK/"
                         "LOCAL_WORLD_SIZE) while others on that host did", b->host, b->rank);
                rc = KVS_ECONFIG;
            } else if (b->local.lsize != size) {
                snprintf(why, whylen, "inconsistent local layout on %.64s: worker %d says its "
                         "local size is %d, but %d workers registered from that host", b->host,
                         b->rank, b->local.lsize, size);
                rc = KVS_ECONFIG;
            } else if (b->local.lrank >= size) {
                snprintf(why, whylen, "inconsistent local layout on %.64s: worker %d says local "
                         "rank %d, but the local size is %d", b->host, b->rank, b->local.lrank,
                         size);
                rc = KVS_ECONFIG;
            } else if (seen == NULL || seen[b->local.lrank]++) {
                snprintf(why, whylen, "inconsistent local layout on %.64s: two workers claim "
                         "local rank %d (worker %d is one)", b->host, b->local.lrank, b->rank);
                rc = KVS_ECONFIG;
            } else {
                b->lrank = b->local.lrank;
            }
        }
        free(seen);
    }
    free(w);
    return rc;
}

/* Per local group (start_job's form_groups), where the job's servers are
 * (PROTO_SERVERS_*): every server registered from the group's address, and
 * also from its pid namespace with direct copies in effect in every member
 * and every server.  Its members take that into KVS_LOCAL_AGG_MIN's default
 * (worker/group.c): a group saves network bytes only when some server is
 * away, and no copy at all when the servers read its memory directly.
 * Returns a malloc'd array of *ngroups, or NULL (no group, every server
 * away from every group, or out of memory: PROTO_SERVERS_AWAY for all). */
static uint8_t *groups_servers(const sched *s, int *ngroups)
{
    const sched_node *srv = NULL; /* a server; all at its address while here */
    bool here = true, direct = true;
    int ng = 0;
    for (int i = 0; i < s->nnodes; i++) {
        const sched_node *n = &s->nodes[i];
        if (n->role == CFG_ROLE_WORKER && n->group >= ng)
            ng = n->group + 1;
        if (n->role != CFG_ROLE_SERVER)
            continue;
        if (srv && strcmp(n->host, srv->host) != 0)
            here = false;
        if (!n->have_host || n->cma != 1 || (srv && n->pidns != srv->pidns))
            direct = false;
        srv = n;
    }
    *ngroups = ng;
    uint8_t *where = ng > 0 && here && srv ? malloc((size_t)ng) : NULL;
    if (where == NULL)
        return NULL;
    memset(where, direct ? PROTO_SERVERS_DIRECT : PROTO_SERVERS_HERE, (size_t)ng);
    for (int i = 0; i < s->nnodes; i++) {
        const sched_node *n = &s->nodes[i];
        if (n->role != CFG_ROLE_WORKER || n->group < 0)
            continue;
        if (strcmp(n->host, srv->host) != 0)
            where[n->group] = PROTO_SERVERS_AWAY;
        else if (!n->have_local || n->local.cma != 1 || n->local.pidns != srv->pidns)
            where[n->group] = where[n->group] < PROTO_SERVERS_HERE ? where[n->group]
                                                                    : PROTO_SERVERS_HERE;
    }
    return where;
}

static void start_job(sched *s)
{
    size_t cap = (size_t)s->nnodes * 320 + 1, len = 0;
    char *table = malloc(cap);
    if (table == NULL) {
        LOG(LOG_ERROR, WHO, "rank", "out of memory building the node table");
        finish(s, 1);
        return;
    }
    assign_ranks(s, CFG_ROLE_SERVER, s->c->num_server);
    assign_ranks(s, CFG_ROLE_WORKER, s->c->num_worker);
    for (int i = 0; s->c->elastic && i < s->nnodes; i++) {
        s->nodes[i].have_local = false; /* elastic jobs form no local groups */
        s->nodes[i].in_epoch = s->nodes[i].since = 1;
    }
    s->epoch = 1;
    char why[600];
    if (form_groups(s, why, sizeof why) != 0) {
        free(table);
        fail_start(s, KVS_ECONFIG, why);
        return;
    }
    table[0] = '\0';
    int ngroups = 0;
    uint8_t *where = groups_servers(s, &ngroups);
    for (int i = 0; i < s->nnodes; i++) {
        sched_node *n = &s->nodes[i];
        len += (size_t)snprintf(table + len, cap - len, "%d %s %s", n->id,
                                cfg_role_name(n->role), n->endpoint);
        if (n->role == CFG_ROLE_WORKER && n->have_local)
            len += (size_t)proto_node_local_fmt(
                table + len, cap - len, n->group, n->lrank, n->lsize, &n->local,
                where && n->group >= 0 && n->group < ngroups ? where[n->group]
                                                              : PROTO_SERVERS_AWAY);
        len += (size_t)snprintf(table + len, cap - len, "\n");
    }
    free(where);
    uint64_t now = clock_ms(), job_id;
    /* a random id of this job (servers tag their automatic checkpoints with it) */
    if (getrandom(&job_id, sizeof job_id, 0) != (ssize_t)sizeof job_id)
        job_id = clock_ns() ^ ((uint64_t)getpid() << 32);
    s->job_id = job_id;
    for (int i = 0; i < s->nnodes; i++) {
        sched_node *n = &s->nodes[i];
        proto_hdr h = {.type = PROTO_REGISTER_ACK, .key = (uint64_t)n->id, .round = job_id};
        n->last_seen = now;
        send_to(s, n, &h, table);
        LOG(LOG_INFO, WHO, "rank", "%s rank %d (node %d) is %s at %s", cfg_role_name(n->role),
            n->rank, n->id, n->host, n->endpoint);
    }
    free(table);
    s->started = true;
    LOG(LOG_INFO, WHO, "job", "all %d servers and %d workers registered in %.2f s",
        s->c->num_server, s->c->num_worker, (double)(clock_ms() - s->start_ms) / 1000.0);
}

/* Tell a node that it cannot join, with the reason; it exits at once. */
static void refuse(sched *s, const void *ident, size_t ident_len, int status, const char *role,
                   const char *host, const char *why)
{
    proto_hdr e = {.type = PROTO_REFUSED, .status = status, .sender = PROTO_SCHEDULER_ID};
    LOG_LIMITED(LOG_WARN, WHO, "job", "refused a %s at %s: %s", role, host, why);
    net_send_text(s->sock, ident, ident_len, &e, why);
}

static void admit_joiner(sched *s, const void *ident, size_t ident_len, const proto_hdr *h,
                         const char *body, int fd, const char *endpoint, const char *host);

/* A node table entry for a live registration of role on connection fd
 * (ident_len checked by the caller); rank and id are the caller's. */
static void node_init(sched_node *n, const void *ident, size_t ident_len, int role, int fd,
                      const char *endpoint, const char *host)
{
    memset(n, 0, sizeof *n);
    memcpy(n->ident, ident, ident_len);
    n->ident_len = ident_len;
    n->role = role;
    n->alive = true;
    n->fd = fd;
    n->ino = net_sock_ino(fd);
    n->last_seen = clock_ms();
    snprintf(n->endpoint, sizeof n->endpoint, "%s", endpoint);
    snprintf(n->host, sizeof n->host, "%s", host);
}

/* ---- a restarted scheduler (KVS_SCHEDULER_GRACE; docs/guide/fault-tolerance.md) ----
 * The first REGISTER that says "rejoin=" makes this scheduler learn a
 * running job back: each node comes back with the id and the job id it was
 * given; the servers name the workers that had left, the workers the
 * barriers they passed.  Once every server and every worker that had not
 * left is back, each gets a REGISTER_ACK (its id, the job id) and the job
 * goes on as if this scheduler had started it.  A node not back within
 * PS_HEARTBEAT_TIMEOUT of the first is dead, and the job fails. */

/* Workers back or known to have left (each rank once). */
static int rejoin_count(const sched *s)
{
    int n = s->nworker_reg;
    for (int w = 0; s->left && w < s->c->num_worker; w++) {
        bool here = false;
        for (int i = 0; i < s->nnodes && !here; i++)
            here = s->nodes[i].role == CFG_ROLE_WORKER && s->nodes[i].rank == w;
        n += s->left[w] && !here;
    }
    return n;
}

/* Who is not back (for the failure's text). */
static void missing_nodes(const sched *s, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int k = 0; k < s->c->num_server + s->c->num_worker; k++) {
        bool server = k < s->c->num_server, here = false;
        int rank = server ? k : k - s->c->num_server;
        int id = server ? proto_server_id(rank) : proto_worker_id(rank);
        for (int i = 0; i < s->nnodes && !here; i++)
            here = s->nodes[i].id == id;
        if (here || (!server && s->left && s->left[rank]))
            continue;
        int w = snprintf(buf + len, cap - len, "%s%s %d", len ? ", " : "",
                         server ? "server" : "worker", rank);
        if (w < 0 || (size_t)w >= cap - len) {
            snprintf(buf + cap - 5, 5, "...");
            return;
        }
        len += (size_t)w;
    }
}

static void check_done(sched *s);

/* Every node is back: answer each, and go on. */
static void recover_done(sched *s)
{
    uint64_t now = clock_ms();
    int nleft = 0;
    for (int w = 0; s->left && w < s->c->num_worker; w++) {
        bool here = false;
        for (int i = 0; i < s->nnodes; i++)
            here |= s->nodes[i].role == CFG_ROLE_WORKER && s->nodes[i].rank == w;
        if (here || !s->left[w])
            continue;
        sched_node *n = &s->nodes[s->nnodes++]; /* (room: num_worker + num_server) */
        memset(n, 0, sizeof *n);
        /* a routing id no peer can have (ZeroMQ refuses ids that start
         * with a zero byte), so no message ever matches it */
        n->ident_len = 1 + (size_t)snprintf(n->ident + 1, sizeof n->ident - 1, "left-%d", w);
        n->role = CFG_ROLE_WORKER;
        n->rank = n->pref_rank = w;
        n->id = proto_worker_id(w);
        n->exited = true; /* it left before: it has nothing to say */
        n->fd = -1;
        snprintf(n->host, sizeof n->host, "(left)");
        snprintf(n->endpoint, sizeof n->endpoint, "-");
        s->nworker_reg++;
        nleft++;
    }
    for (int i = 0; i < s->nnodes; i++) {
        sched_node *n = &s->nodes[i];
        if (n->exited)
            continue;
        proto_hdr h = {.type = PROTO_REGISTER_ACK, .key = (uint64_t)n->id, .round = s->job_id};
        n->last_seen = now;
        send_to(s, n, &h, NULL);
    }
    s->started = true;
    s->recovering = false;
    s->recovered = true;
    LOG(LOG_WARN, WHO, "job", "job %llx is back: %d servers and %d workers rejoined in %.2f s "
        "(%d had left), %llu barriers passed", (unsigned long long)s->job_id, s->nserver_reg,
        s->nworker_reg - nleft, (double)(now - s->recover_ms) / 1000.0, nleft,
        (unsigned long long)s->barriers_done);
    check_done(s);
}

/* A node rejoins (rj: what it says, left: the workers a server says had
 * left), already checked against the job's size and the secret. */
static void take_back(sched *s, const void *ident, size_t ident_len, const proto_hdr *h,
                      const char *body, int fd, int role, const char *endpoint,
                      const char *host, const proto_rejoin *rj, const uint8_t *left)
{
    const char *rname = cfg_role_name(role);
    char why[512];
    int rank = role == CFG_ROLE_SERVER ? (rj->id - 8) / 2 : (rj->id - 9) / 2;
    int count = role == CFG_ROLE_SERVER ? s->c->num_server : s->c->num_worker;
    if (s->c->elastic || s->c->replicas > 0) {
        refuse(s, ident, ident_len, KVS_ECONFIG, rname, host, "this scheduler runs with "
               "KVS_ELASTIC or KVS_REPLICAS: a running job cannot come back to it");
        return;
    }
    if (s->started || (s->nnodes > 0 && !s->recovering)) {
        refuse(s, ident, ident_len, KVS_ECONFIG, rname, host, s->started ?
               "rejoin refused: this scheduler's job is running, and it did not lose you" :
               "rejoin refused: this scheduler is starting a new job (its nodes registered "
               "afresh)");
        return;
    }
    if (s->recovering && rj->job_id != s->job_id) {
        snprintf(why, sizeof why, "rejoin refused: you were in job %llx, this scheduler "
                 "takes back job %llx", (unsigned long long)rj->job_id,
                 (unsigned long long)s->job_id);
        refuse(s, ident, ident_len, KVS_ECONFIG, rname, host, why);
        return;
    }
    if ((rj->id % 2 == 0) != (role == CFG_ROLE_SERVER) || rank >= count ||
        ident_len > IDENT_MAX - 1) {
        snprintf(why, sizeof why, "bad rejoin: node id %d is no %s of this job (%d servers, "
                 "%d workers)", rj->id, rname, s->c->num_server, s->c->num_worker);
        refuse(s, ident, ident_len, KVS_EPROTO, rname, host, why);
        return;
    }
    for (int i = 0; i < s->nnodes; i++) {
        if (s->nodes[i].id == rj->id) {
            snprintf(why, sizeof why, "rejoin refused: node %d is already back, from %s",
                     rj->id, s->nodes[i].host);
            refuse(s, ident, ident_len, KVS_ECONFIG, rname, host, why);
            return;
        }
    }
    if (role == CFG_ROLE_SERVER && s->left == NULL &&
        (s->left = calloc((size_t)s->c->num_worker, 1)) == NULL) {
        refuse(s, ident, ident_len, KVS_ENOMEM, rname, host, "the scheduler is out of memory");
        return;
    }
    if (!s->recovering) {
        s->recovering = true;
        s->recover_ms = clock_ms();
        s->job_id = rj->job_id;
        LOG(LOG_WARN, WHO, "job", "a %s of job %llx rejoins: learning the running job back "
            "from its nodes", rname, (unsigned long long)rj->job_id);
    }
    sched_node *n = &s->nodes[s->nnodes++];
    node_init(n, ident, ident_len, role, fd, endpoint, host);
    n->pref_rank = n->rank = rank;
    n->id = rj->id;
    n->have_local = role == CFG_ROLE_WORKER &&
                    proto_register_local(body ? body : "", h->body_len, &n->local) == 0;
    n->have_host = role == CFG_ROLE_SERVER &&
                   proto_register_host(body ? body : "", h->body_len, &n->pidns, &n->cma) == 0;
    if (role == CFG_ROLE_SERVER) {
        s->nserver_reg++;
        for (int w = 0; w < s->c->num_worker; w++)
            s->left[w] |= left[w];
    } else {
        s->nworker_reg++;
        if (rj->barriers > s->barriers_done)
            s->barriers_done = rj->barriers;
    }
    LOG(LOG_INFO, WHO, "job", "%s %d (node %d) at %s is back (%d/%d servers, %d/%d workers "
        "with those that left)", rname, rank, rj->id, host, s->nserver_reg, s->c->num_server,
        rejoin_count(s), s->c->num_worker);
    if (s->nserver_reg == s->c->num_server && rejoin_count(s) >= s->c->num_worker)
        recover_done(s);
}

/* A node that lost the job's scheduler comes back while the job is known to
 * have failed (this scheduler never went away): tell it. */
static bool answer_failed_rejoin(sched *s, sched_node *n)
{
    if (n == NULL || !s->started || (s->dead_count == 0 && !s->done))
        return false;
    proto_hdr h = {.type = PROTO_SHUTDOWN, .status = s->end_status ? s->end_status
                                                                     : KVS_EPEERDEAD};
    send_to(s, n, &h, s->dead_text[0] ? s->dead_text : "job failed");
    return true;
}

static void on_register(sched *s, const void *ident, size_t ident_len, const proto_hdr *h,
                        const char *body, int fd, const char *peer)
{
    int role, rank, js, jw;
    char endpoint[128], host[CFG_HOST_MAX], why[512];
    sched_node *known = find_node(s, ident, ident_len);
    if (known != NULL || is_waiting(s, ident, ident_len)) {
        answer_failed_rejoin(s, known);
        return; /* a repeat: the ack is on its way, or it waits for a slot */
    }
    if (proto_parse_register(body ? body : "", h->body_len, &role, endpoint, sizeof endpoint,
                             &rank, host, sizeof host, why, sizeof why) != 0) {
        char text[600];
        snprintf(text, sizeof text, "bad registration: %s", why);
        refuse(s, ident, ident_len, KVS_EPROTO, "node", "?", text);
        return;
    }
    const char *rname = cfg_role_name(role);
    if (s->c->security != CFG_SEC_NONE && !net_auth_peer_is(peer, rname, -1)) {
        snprintf(why, sizeof why, "bad secret: registration as a %s from a connection that "
                 "proved '%s'", rname, peer ? peer : "nothing");
        refuse(s, ident, ident_len, KVS_EAUTH, rname, host, why);
        return;
    }
    if (s->fail_status) {
        refuse(s, ident, ident_len, s->fail_status, rname, host, s->dead_text);
        return;
    }
    if (proto_register_job_size(body ? body : "", h->body_len, &js, &jw) == 0 &&
        (js != s->c->num_server || jw != s->c->num_worker)) {
        char text[600];
        snprintf(why, sizeof why, "job size mismatch: you say %d workers/%d servers, the job "
                 "has %d workers/%d servers (DMLC_NUM_WORKER/DMLC_NUM_SERVER)", jw, js,
                 s->c->num_worker, s->c->num_server);
        refuse(s, ident, ident_len, KVS_ECONFIG, rname, host, why);
        snprintf(text, sizeof text, "job size mismatch: a %s at %s says %d workers/%d servers, "
                 "the job has %d workers/%d servers (DMLC_NUM_WORKER/DMLC_NUM_SERVER)",
                 rname, host, jw, js, s->c->num_worker, s->c->num_server);
        if (!s->started)
            fail_start(s, KVS_ECONFIG, text);
        return;
    }
    {
        proto_rejoin rj;
        uint8_t *left = calloc((size_t)s->c->num_worker, 1);
        int rc = left ? proto_parse_rejoin(body ? body : "", h->body_len, &rj, left,
                                           s->c->num_worker, why, sizeof why)
                      : -1;
        if (left == NULL)
            snprintf(why, sizeof why, "the scheduler is out of memory");
        if (rc != 0) {
            if (rc < 0)
                refuse(s, ident, ident_len, left ? KVS_EPROTO : KVS_ENOMEM, rname, host, why);
            else
                take_back(s, ident, ident_len, h, body, fd, role, endpoint, host, &rj, left);
            free(left);
            return;
        }
        free(left);
    }
    if (s->recovering) {
        refuse(s, ident, ident_len, KVS_ECONFIG, rname, host, "job full: this scheduler "
               "takes back a running job (its nodes rejoin); a new node cannot join it");
        return;
    }
    if (s->started && s->c->elastic && role == CFG_ROLE_WORKER && !s->done &&
        s->dead_count == 0) { /* (a failed job admits nobody) */
        admit_joiner(s, ident, ident_len, h, body, fd, endpoint, host);
        return;
    }
    if (s->started) {
        refuse(s, ident, ident_len, KVS_ECONFIG, rname, host,
               "job full: the job has already started (all nodes registered)");
        return;
    }
    for (int i = 0; i < s->nnodes && rank >= 0; i++) {
        const sched_node *o = &s->nodes[i];
        if (o->role == role && o->pref_rank == rank) {
            snprintf(why, sizeof why, "id taken: %s rank %d (DMLC_%s_ID=%d) is already "
                     "registered from %s", rname, rank,
                     role == CFG_ROLE_SERVER ? "SERVER" : "WORKER", rank, o->host);
            refuse(s, ident, ident_len, KVS_ECONFIG, rname, host, why);
            return;
        }
    }
    int *count = role == CFG_ROLE_SERVER ? &s->nserver_reg : &s->nworker_reg;
    int want = role == CFG_ROLE_SERVER ? s->c->num_server : s->c->num_worker;
    if (*count >= want || ident_len > IDENT_MAX - 1) {
        snprintf(why, sizeof why, "job full: the job already has its %d %ss (DMLC_NUM_%s=%d)",
                 want, rname, role == CFG_ROLE_SERVER ? "SERVER" : "WORKER", want);
        refuse(s, ident, ident_len, KVS_ECONFIG, rname, host, why);
        return;
    }
    sched_node *n = &s->nodes[s->nnodes++];
    node_init(n, ident, ident_len, role, fd, endpoint, host);
    n->pref_rank = rank;
    n->have_local = role == CFG_ROLE_WORKER &&
                    proto_register_local(body ? body : "", h->body_len, &n->local) == 0;
    n->have_host = role == CFG_ROLE_SERVER &&
                   proto_register_host(body ? body : "", h->body_len, &n->pidns, &n->cma) == 0;
    (*count)++;
    LOG(LOG_INFO, WHO, "job", "registered %s at %s (%d/%d servers, %d/%d workers)",
        cfg_role_name(role), host, s->nserver_reg, s->c->num_server, s->nworker_reg,
        s->c->num_worker);
    if (s->nserver_reg == s->c->num_server && s->nworker_reg == s->c->num_worker)
        start_job(s);
}

static int live_workers(sched *s, int *in_barrier)
{
    int live = 0, in = 0;
    for (int i = 0; i < s->nnodes; i++) {
        sched_node *n = &s->nodes[i];
        if (n->role == CFG_ROLE_WORKER && n->alive && !n->exited) {
            live++;
            in += n->in_barrier;
        }
    }
    *in_barrier = in;
    return live;
}

static void check_barrier(sched *s)
{
    int in, live = live_workers(s, &in);
    if (in == 0 || in < live)
        return;
    met_add(s->m_barriers, 1);
    s->barriers_done++;
    for (int i = 0; i < s->nnodes; i++) {
        sched_node *n = &s->nodes[i];
        if (n->in_barrier) {
            proto_hdr h = {.type = PROTO_BARRIER_DONE, .req_id = n->barrier_req};
            n->in_barrier = false;
            send_to(s, n, &h, NULL);
        }
    }
}

static void check_done(sched *s)
{
    int in;
    if (s->started && live_workers(s, &in) == 0) {
        LOG(LOG_INFO, WHO, "job", "every worker has left; shutting down the servers");
        finish(s, s->dead_count ? 1 : 0);
    }
}

static bool worker_departs(sched *s, sched_node *d, const char *why);
static int admit_waiting(sched *s);

/* Replicated servers: server d died; its backup takes its key ranges and
 * every live node is told (PROMOTE).  False when a range is lost (lost
 * says which): the job fails as without replicas. */
static bool promote(sched *s, sched_node *d, const char *why, char *lost, size_t lostlen)
{
    char name[64], text[900], owners[400];
    if (s->c->replicas == 0 || d->role != CFG_ROLE_SERVER || s->dead_count > 0 ||
        s->owners.owner == NULL)
        return false;
    int heir = sched_owners_promote(&s->owners, d->rank, lost, lostlen);
    if (heir < 0)
        return false;
    d->alive = false;
    d->in_barrier = false;
    sched_owners_fmt(&s->owners, owners, sizeof owners);
    proto_node_name(d->id, name, sizeof name);
    snprintf(text, sizeof text, "%s", owners);
    LOG(LOG_WARN, WHO, "job", "%s (%s) %s; server %d owns its keys now (%s)", name, d->host,
        why, heir, owners);
    for (int i = 0; i < s->nnodes; i++) {
        sched_node *n = &s->nodes[i];
        if (!n->alive || (n->exited && n->role == CFG_ROLE_WORKER))
            continue;
        proto_hdr h = {.type = PROTO_PROMOTE, .key = (uint64_t)d->id,
                       .round = (uint64_t)proto_server_id(heir)};
        send_to(s, n, &h, text);
    }
    proto_hdr bye = {.type = PROTO_SHUTDOWN, .status = KVS_EPEERDEAD};
    send_to(s, d, &bye, "declared dead: its keys moved to its backup"); /* if it still runs */
    return true;
}

static void declare_dead(sched *s, sched_node *d, const char *why)
{
    char name[64], text[600], lost[300] = "";
    if (worker_departs(s, d, why))
        return; /* an elastic job goes on without it */
    if (promote(s, d, why, lost, sizeof lost))
        return;
    d->alive = false;
    d->in_barrier = false;
    s->dead_count++;
    proto_node_name(d->id, name, sizeof name);
    if (lost[0]) /* first: the text may be cut where it is kept */
        snprintf(text, sizeof text, "%s; %s (%s) %s", lost, name, d->host, why);
    else
        snprintf(text, sizeof text, "%s (%s) %s", name, d->host, why);
    if (s->c->elastic && d->role == CFG_ROLE_WORKER && s->dead_count == 1)
        snprintf(text + strlen(text), sizeof text - strlen(text), "; fewer than "
                 "KVS_MIN_WORKERS=%d workers would remain", cfg_min_workers(s->c));
    if (s->dead_text[0] == '\0')
        snprintf(s->dead_text, sizeof s->dead_text, "%s", text);
    LOG(LOG_ERROR, WHO, "job", "%s; telling every node", text);
    for (int i = 0; i < s->nnodes; i++) {
        sched_node *n = &s->nodes[i];
        if (!n->alive || (n->exited && n->role == CFG_ROLE_WORKER))
            continue;
        proto_hdr h = {.type = PROTO_NODE_DEAD, .key = (uint64_t)d->id};
        send_to(s, n, &h, text);
    }
    check_done(s);
}

/* Worker d called kvs_close: the servers fail the rounds that still need
 * its push (they can never complete). */
static void announce_left(sched *s, sched_node *d)
{
    char name[64], text[600];
    proto_node_name(d->id, name, sizeof name);
    snprintf(text, sizeof text, "%s (%s) left the job (kvs_close)", name, d->host);
    for (int i = 0; i < s->nnodes; i++) {
        sched_node *n = &s->nodes[i];
        if (n->alive && n->role == CFG_ROLE_SERVER) {
            proto_hdr h = {.type = PROTO_NODE_LEFT, .key = (uint64_t)d->id};
            send_to(s, n, &h, text);
        }
    }
}

/* ---- elastic membership (KVS_ELASTIC; docs/design.md "Elastic workers") ----
 * One change at a time: a new epoch goes to every live server first; once
 * each has answered EPOCH_ACK, to its member workers (and a joiner gets its
 * REGISTER_ACK then).  A change that comes meanwhile makes one more epoch. */

static bool is_member(const sched_node *n)
{
    return n->role == CFG_ROLE_WORKER && n->alive && !n->exited;
}

/* The node of live worker slot w, or NULL. */
static sched_node *slot_node(sched *s, int w)
{
    for (int i = 0; i < s->nnodes; i++)
        if (is_member(&s->nodes[i]) && s->nodes[i].rank == w)
            return &s->nodes[i];
    return NULL;
}

static int count_members(sched *s)
{
    int n = 0;
    for (int i = 0; i < s->nnodes; i++)
        n += is_member(&s->nodes[i]);
    return n;
}

/* Ranks: the workers the job started with first, then by admission; slot
 * order among equals (docs/design.md "Elastic workers"). */
static int cmp_members(const void *a, const void *b)
{
    const sched_node *x = *(sched_node *const *)a, *y = *(sched_node *const *)b;
    if (x->since != y->since)
        return x->since < y->since ? -1 : 1;
    return x->rank - y->rank;
}

/* The members named by epoch ep (in_epoch == ep), in rank order, as an
 * EPOCH body in text (cap bytes); fills m (room for every node).  Returns
 * their number. */
static int member_list(sched *s, uint64_t ep, sched_node **m, char *text, size_t cap)
{
    int n = 0;
    size_t len = 0;
    for (int i = 0; i < s->nnodes; i++)
        if (is_member(&s->nodes[i]) && s->nodes[i].in_epoch == ep)
            m[n++] = &s->nodes[i];
    qsort(m, (size_t)n, sizeof *m, cmp_members);
    text[0] = '\0';
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, cap - len, i ? " %d" : "%d", m[i]->rank);
    return n;
}

static void membership_change(sched *s)
{
    if (s->done || !s->c->elastic)
        return;
    if (s->acks_left > 0) {
        s->again = true;
        return;
    }
    size_t cap = (size_t)s->cap * 8 + 1;
    char *text = malloc(cap);
    sched_node **m = calloc((size_t)s->cap, sizeof *m);
    if (text == NULL || m == NULL) {
        free(text);
        free(m);
        LOG(LOG_ERROR, WHO, "job", "out of memory announcing a membership epoch");
        finish(s, 1);
        return;
    }
    s->ann_epoch = s->epoch + 1;
    for (int i = 0; i < s->nnodes; i++) {
        sched_node *v = &s->nodes[i];
        if (is_member(v)) {
            v->in_epoch = s->ann_epoch;
            if (v->since == 0)
                v->since = s->ann_epoch;
        }
    }
    int n = member_list(s, s->ann_epoch, m, text, cap);
    if (n > 0) {
        LOG(LOG_INFO, WHO, "job", "membership epoch %llu: %d workers (slots %s)",
            (unsigned long long)s->ann_epoch, n, text);
        for (int i = 0; i < s->nnodes; i++) {
            sched_node *v = &s->nodes[i];
            if (v->role == CFG_ROLE_SERVER && v->alive) {
                proto_hdr h = {.type = PROTO_EPOCH, .round = s->ann_epoch};
                send_to(s, v, &h, text);
                s->acks_left++;
            }
        }
    } /* else everyone left: check_done ends the job */
    free(text);
    free(m);
}

/* The table a joiner gets: the servers and itself. */
static char *joiner_table(sched *s, const sched_node *j)
{
    size_t cap = (size_t)(s->c->num_server + 1) * 320 + 1, len = 0;
    char *table = malloc(cap);
    if (table == NULL)
        return NULL;
    table[0] = '\0';
    for (int i = 0; i < s->nnodes; i++) {
        const sched_node *n = &s->nodes[i];
        if (n->role == CFG_ROLE_SERVER || n == j)
            len += (size_t)snprintf(table + len, cap - len, "%d %s %s\n", n->id,
                                    cfg_role_name(n->role), n->endpoint);
    }
    return table;
}

static void on_epoch_ack(sched *s, const proto_hdr *h)
{
    if (h->round != s->ann_epoch || s->acks_left <= 0)
        return;
    if (--s->acks_left > 0)
        return;
    s->epoch = s->ann_epoch;
    size_t cap = (size_t)s->cap * 8 + 1;
    char *text = malloc(cap);
    sched_node **m = calloc((size_t)s->cap, sizeof *m);
    if (text == NULL || m == NULL) {
        free(text);
        free(m);
        finish(s, 1);
        return;
    }
    int n = member_list(s, s->epoch, m, text, cap);
    for (int i = 0; i < n; i++) {
        if (m[i]->joining) {
            char *table = joiner_table(s, m[i]);
            proto_hdr a = {.type = PROTO_REGISTER_ACK, .key = (uint64_t)m[i]->id,
                           .round = s->job_id, .offset = 1};
            m[i]->joining = false;
            m[i]->last_seen = clock_ms();
            send_to(s, m[i], &a, table ? table : "");
            free(table);
        }
        proto_hdr e = {.type = PROTO_EPOCH, .round = s->epoch};
        send_to(s, m[i], &e, text);
    }
    free(text);
    free(m);
    if (s->again) {
        s->again = false;
        membership_change(s);
    } else if (s->nwaiting > 0 && admit_waiting(s) > 0) {
        membership_change(s); /* a slot this epoch freed: its waiting joiner's epoch */
    }
}

/* Worker d died (why) in an elastic job: true if the job goes on without
 * it (a new epoch), false if it must fail (fewer than KVS_MIN_WORKERS). */
static bool worker_departs(sched *s, sched_node *d, const char *why)
{
    char name[64];
    if (!s->c->elastic || d->role != CFG_ROLE_WORKER || !s->started || s->dead_count > 0)
        return false;
    int left = count_members(s) - is_member(d), min = cfg_min_workers(s->c);
    if (left < min) {
        LOG(LOG_ERROR, WHO, "job", "worker %d's death leaves %d workers, fewer than "
            "KVS_MIN_WORKERS=%d", d->rank, left, min);
        return false;
    }
    proto_node_name(d->id, name, sizeof name);
    LOG(LOG_WARN, WHO, "job", "%s (%s) %s; the job goes on with %d workers", name, d->host, why,
        left);
    proto_hdr h = {.type = PROTO_SHUTDOWN, .status = KVS_EPEERDEAD};
    send_to(s, d, &h, "this worker was removed from the job (declared dead)");
    d->alive = false;
    d->in_barrier = false;
    d->joining = false;
    membership_change(s); /* a worker waiting for its slot joins at a later epoch */
    check_barrier(s);
    check_done(s);
    return true;
}

/* The lowest free worker slot, or -1. */
static int free_slot(sched *s)
{
    int slots = cfg_worker_slots(s->c);
    for (int w = 0; w < slots; w++)
        if (slot_node(s, w) == NULL)
            return w;
    return -1;
}

/* Seat a joiner in free slot w; it is admitted at the next epoch
 * (REGISTER_ACK and EPOCH come when every server knows it).  False: no
 * room in the node table (refused). */
static bool seat_joiner(sched *s, int w, const void *ident, size_t ident_len, int fd,
                        const char *endpoint, const char *host)
{
    sched_node *n = NULL;
    for (int i = 0; i < s->nnodes && n == NULL; i++) /* the slot's old entry */
        if (s->nodes[i].role == CFG_ROLE_WORKER && s->nodes[i].rank == w)
            n = &s->nodes[i];
    if (n == NULL && s->nnodes < s->cap)
        n = &s->nodes[s->nnodes++];
    if (n == NULL) {
        refuse(s, ident, ident_len, KVS_ECONFIG, "worker", host, "job full: no room in the "
               "node table");
        return false;
    }
    node_init(n, ident, ident_len, CFG_ROLE_WORKER, fd, endpoint, host);
    n->pref_rank = -1;
    n->rank = w;
    n->id = proto_worker_id(w);
    n->joining = true;
    LOG(LOG_INFO, WHO, "job", "worker at %s joins the running job in slot %d", host, w);
    return true;
}

/* Refuse a joiner for whom no slot is free (waited_ms: how long it waited
 * for one; 0: it did not). */
static void refuse_full(sched *s, const void *ident, size_t ident_len, const char *host,
                        uint64_t waited_ms)
{
    int slots = cfg_worker_slots(s->c);
    char why[300];
    int n = snprintf(why, sizeof why, "job full: the job already has its %d workers "
                     "(KVS_MAX_WORKERS=%d)", slots, slots);
    if (waited_ms > 0 && n > 0 && (size_t)n < sizeof why)
        snprintf(why + n, sizeof why - (size_t)n, "; none left within %.1f s",
                 (double)waited_ms / 1000.0);
    refuse(s, ident, ident_len, KVS_ECONFIG, "worker", host, why);
}

/* A worker registers while an elastic job runs: it takes the lowest free
 * slot, or waits for one (sched_wait) when the waiting list has room. */
static void admit_joiner(sched *s, const void *ident, size_t ident_len, const proto_hdr *h,
                         const char *body, int fd, const char *endpoint, const char *host)
{
    int slots = cfg_worker_slots(s->c), w = free_slot(s);
    (void)h;
    (void)body;
    if (ident_len > IDENT_MAX - 1) {
        refuse(s, ident, ident_len, KVS_EPROTO, "worker", host, "bad registration: "
               "connection identity too long");
        return;
    }
    if (w >= 0) {
        if (seat_joiner(s, w, ident, ident_len, fd, endpoint, host))
            membership_change(s);
        return;
    }
    if (s->waiting == NULL || s->nwaiting >= slots) {
        refuse_full(s, ident, ident_len, host, 0);
        return;
    }
    sched_wait *q = &s->waiting[s->nwaiting++];
    memset(q, 0, sizeof *q);
    memcpy(q->ident, ident, ident_len);
    q->ident_len = ident_len;
    q->fd = fd;
    q->ino = net_sock_ino(fd);
    q->since = clock_ms();
    q->until = q->since + (uint64_t)(s->c->hb_timeout_s * 1000);
    snprintf(q->endpoint, sizeof q->endpoint, "%s", endpoint);
    snprintf(q->host, sizeof q->host, "%s", host);
    LOG(LOG_INFO, WHO, "job", "worker at %s waits for a free slot: all %d are taken; it is "
        "refused if none frees within %g s (PS_HEARTBEAT_TIMEOUT)", host, slots,
        s->c->hb_timeout_s);
}

/* Seat the waiting joiners that a free slot has come for, oldest first;
 * forget those whose connection closed; refuse those that waited too long.
 * Returns how many were seated (the caller announces the new epoch). */
static int admit_waiting(sched *s)
{
    int seated = 0, j = 0;
    uint64_t now = clock_ms();
    if (!s->started || s->done || s->fail_status || s->dead_count > 0)
        return 0;
    for (int i = 0; i < s->nwaiting; i++) {
        sched_wait *q = &s->waiting[i];
        int w;
        if (net_sock_ino(q->fd) != q->ino) {
            LOG(LOG_INFO, WHO, "job", "the worker at %s that waited for a slot left", q->host);
        } else if ((w = free_slot(s)) >= 0) {
            seated += seat_joiner(s, w, q->ident, q->ident_len, q->fd, q->endpoint, q->host);
        } else if (now >= q->until) {
            refuse_full(s, q->ident, q->ident_len, q->host, now - q->since);
        } else {
            if (j != i)
                s->waiting[j] = *q;
            j++;
        }
    }
    s->nwaiting = j;
    return seated;
}

/* Node n lost its data connection to peer h->key: the job fails, and every
 * node is told which two ends lost each other. */
static void on_peer_lost(sched *s, sched_node *n, const proto_hdr *h, const char *body)
{
    char a[64], b[64], text[700];
    sched_node *p = NULL;
    for (int i = 0; i < s->nnodes; i++)
        if ((uint64_t)s->nodes[i].id == h->key)
            p = &s->nodes[i];
    if (p == NULL || p == n) {
        LOG_LIMITED(LOG_WARN, WHO, "net", "dropped PEER_LOST about unknown node %llu",
            (unsigned long long)h->key);
        return;
    }
    if (!p->alive)
        return; /* already known dead: every node has been told */
    if (s->c->replicas > 0 && p->role == CFG_ROLE_SERVER && s->dead_count == 0) {
        /* its keys move to its backup (or the job fails, naming the lost range) */
        proto_node_name(n->id, a, sizeof a);
        snprintf(text, sizeof text, "was lost by %s (%s): %.*s", a, n->host,
                 (int)(h->body_len < 300 ? h->body_len : 300), body ? body : "");
        declare_dead(s, p, text);
        return;
    }
    proto_node_name(n->id, a, sizeof a);
    proto_node_name(p->id, b, sizeof b);
    snprintf(text, sizeof text, "%s (%s) lost its connection to %s (%s): %.*s", a, n->host, b,
             p->host, (int)(h->body_len < 300 ? h->body_len : 300), body ? body : "");
    bool first = s->dead_text[0] == '\0';
    if (first)
        snprintf(s->dead_text, sizeof s->dead_text, "%s", text);
    s->dead_count++;
    LOG(LOG_ERROR, WHO, "job", "%s; telling every node", text);
    if (!first)
        return;
    for (int i = 0; i < s->nnodes; i++) {
        sched_node *t = &s->nodes[i];
        if (!t->alive || (t->exited && t->role == CFG_ROLE_WORKER))
            continue;
        proto_hdr d = {.type = PROTO_NODE_DEAD, .key = h->key};
        send_to(s, t, &d, text);
    }
}

/* A connection to the scheduler closed.  A registered node whose own
 * connection it was has left: before the start its slot is free again; in
 * a running job it is dead unless it said goodbye (EXIT). */
static void node_gone(sched *s, int i);

/* A connection to the scheduler closed.  The event names a descriptor
 * number, which libzmq may already have given to a new connection (the
 * guard closes many at once): a node whose socket is still on fd was not
 * the one that left, unless fd changes hands later (the timer checks). */
static void on_monitor(void *arg, int event, int fd, const char *addr)
{
    sched *s = arg;
    (void)addr;
    net_guard_event(s->guard, event, fd);
    if (event != ZMQ_EVENT_DISCONNECTED || s->done || s->fail_status)
        return;
    for (int i = 0; i < s->nnodes; i++) {
        sched_node *n = &s->nodes[i];
        if (n->fd != fd || !n->alive)
            continue;
        if (n->ino != 0 && net_sock_ino(fd) == n->ino) {
            n->suspect = true; /* an earlier socket on fd, or libzmq closes it now */
            return;
        }
        node_gone(s, i);
        return;
    }
}

/* Node i's connection to the scheduler closed. */
static void node_gone(sched *s, int i)
{
    sched_node *n = &s->nodes[i];
    {
        if (!s->started) {
            LOG(LOG_WARN, WHO, "job", "%s at %s left before the job %s; its place is free",
                cfg_role_name(n->role), n->host, s->recovering ? "was back" : "started");
            if (n->role == CFG_ROLE_SERVER)
                s->nserver_reg--;
            else
                s->nworker_reg--;
            s->nodes[i] = s->nodes[--s->nnodes];
            return;
        }
        if (n->role == CFG_ROLE_WORKER && n->exited)
            return;
        if (s->dead_count > 0) {
            /* the job has failed and every node was told: a node leaving now is
             * no news */
            LOG(LOG_INFO, WHO, "job", "%s at %s left the failed job", cfg_role_name(n->role),
                n->host);
            n->alive = false;
            n->in_barrier = false;
            check_done(s);
            return;
        }
        uint64_t quiet = clock_ms() - n->last_seen;
        if (quiet + 500 >= (uint64_t)(s->c->hb_timeout_s * 1000)) {
            char why[160];
            snprintf(why, sizeof why, "was silent for %.1f s (PS_HEARTBEAT_TIMEOUT=%g): its "
                     "connection to the scheduler was closed", (double)quiet / 1000.0,
                     s->c->hb_timeout_s);
            declare_dead(s, n, why);
        } else {
            declare_dead(s, n, "closed its connection to the scheduler: the process exited "
                               "or its connection was reset");
        }
        return;
    }
}

/* lamb's sums of squares of one part of a split key (proto.h NORM_PART,
 * at most PROTO_NORM_TEXT_MAX bytes, checked by the decoder): to every other
 * live server.  Scalars only: no array data passes here. */
static void relay_norms(sched *s, const sched_node *from, const proto_hdr *h, const char *body)
{
    char text[PROTO_NORM_TEXT_MAX + 1];
    snprintf(text, sizeof text, "%.*s", (int)h->body_len, body ? body : "");
    for (int i = 0; i < s->nnodes; i++) {
        sched_node *n = &s->nodes[i];
        if (n->role != CFG_ROLE_SERVER || n == from || !n->alive)
            continue;
        proto_hdr f = {.type = PROTO_NORM_PART, .key = h->key, .round = h->round,
                       .offset = h->offset, .count = h->count, .total = h->total,
                       .dtype = h->dtype, .part = h->part};
        send_to(s, n, &f, text);
    }
}

static void membership_change(sched *s);
static void on_epoch_ack(sched *s, const proto_hdr *h);

static void on_recv(net_sock *sock, net_msg *m, void *arg)
{
    sched *s = arg;
    proto_hdr h;
    char why[256];
    proto_limits lim = {s->c->max_message};
    (void)sock;
    const void *ident = zmq_msg_data(&m->frames[0]);
    size_t ident_len = zmq_msg_size(&m->frames[0]);
    zmq_msg_t *bodymsg;
    int drc = net_msg_decode(m, true, &lim, &h, &bodymsg, why, sizeof why);
    if (drc != 0) {
        met_error(s->met, drc);
        LOG_LIMITED(LOG_WARN, WHO, "net", "dropped a malformed message: %s", why);
        if (!net_guard_refused(s->guard, net_msg_fd(m), ident, ident_len))
            return; /* not (yet) a node of the job: no answer, the connection shut */
        proto_hdr e = {.type = PROTO_ERROR, .status = KVS_EPROTO, .sender = PROTO_SCHEDULER_ID};
        if (m->total >= 1)
            net_send_text(s->sock, ident, ident_len, &e, why);
        return;
    }
    const char *body = bodymsg ? zmq_msg_data(bodymsg) : NULL;
    int fd = net_msg_fd(m);
    if (h.type == PROTO_REGISTER) {
        on_register(s, ident, ident_len, &h, body, fd, net_auth_peer(&m->frames[1]));
        if (find_node(s, ident, ident_len) != NULL || is_waiting(s, ident, ident_len))
            net_guard_trust(s->guard, fd); /* a node of the job: never closed */
        return;
    }
    sched_node *n = find_node(s, ident, ident_len);
    if (n == NULL || !s->started || h.sender != n->id) {
        /* (a restarted scheduler: the nodes' messages queued while it was
         * gone come before their rejoins, and until every node is back) */
        bool rejoining = s->recovering || (!s->started && s->nnodes == 0 && h.sender >= 8);
        LOG_LIMITED(rejoining ? LOG_INFO : LOG_WARN, WHO, "net", "dropped %s from an "
            "unregistered or mismatched sender %d%s", proto_type_name(h.type), h.sender,
            rejoining ? " (a node rejoins first)" : "");
        if (n == NULL)
            net_guard_refused(s->guard, fd, ident, ident_len); /* a stranger: shut */
        return;
    }
    if (!n->alive)
        return; /* declared dead: it stays dead */
    n->last_seen = clock_ms();
    if (fd >= 0 && (fd != n->fd || n->suspect)) {
        n->fd = fd;
        n->ino = net_sock_ino(fd);
        n->suspect = false; /* it speaks: its connection is there */
    }
    net_guard_trust(s->guard, fd);
    switch (h.type) {
    case PROTO_HEARTBEAT: {
        proto_hdr a = {.type = PROTO_HEARTBEAT_ACK};
        send_to(s, n, &a, NULL);
        break;
    }
    case PROTO_BARRIER:
        if (n->role != CFG_ROLE_WORKER)
            break;
        if (s->recovered && h.round != 0 && h.round <= s->barriers_done) {
            /* passed before this scheduler: the answer was lost with the old one */
            proto_hdr a = {.type = PROTO_BARRIER_DONE, .req_id = h.req_id};
            send_to(s, n, &a, NULL);
            break;
        }
        n->in_barrier = true;
        n->barrier_req = h.req_id;
        check_barrier(s);
        break;
    case PROTO_EXIT: {
        proto_hdr a = {.type = PROTO_EXIT_ACK, .req_id = h.req_id};
        send_to(s, n, &a, NULL);
        if (n->role == CFG_ROLE_WORKER && !n->exited) {
            n->exited = true;
            n->in_barrier = false;
            LOG(LOG_INFO, WHO, "job", "worker %d left", n->rank);
            if (s->c->elastic)
                membership_change(s);
            else
                announce_left(s, n);
            check_barrier(s);
            check_done(s);
        }
        break;
    }
    case PROTO_PEER_LOST:
        on_peer_lost(s, n, &h, body);
        break;
    case PROTO_EPOCH_ACK:
        if (n->role == CFG_ROLE_SERVER)
            on_epoch_ack(s, &h);
        break;
    case PROTO_REPL_SYNCED:
        if (n->role == CFG_ROLE_SERVER && s->owners.owner && h.key >= 8 && h.key % 2 == 0) {
            sched_owners_synced(&s->owners, n->rank, (int)((h.key - 8) / 2));
            LOG(LOG_INFO, WHO, "job", "server %d's keys are on server %d again", n->rank,
                (int)((h.key - 8) / 2));
        }
        break;
    case PROTO_NORM_PART:
        if (n->role == CFG_ROLE_SERVER)
            relay_norms(s, n, &h, body);
        else
            LOG_LIMITED(LOG_WARN, WHO, "net", "dropped NORM_PART from node %d: only servers "
                        "send it", n->id);
        break;
    default:
        LOG_LIMITED(LOG_WARN, WHO, "net", "dropped unexpected %s from node %d",
            proto_type_name(h.type), n->id);
    }
}

static void on_timer(uv_timer_t *t)
{
    sched *s = t->data;
    uint64_t now = clock_ms();
    for (int i = 0; i < s->nnodes && !s->done && !s->fail_status; i++) {
        sched_node *n = &s->nodes[i];
        if (n->suspect && n->alive && net_sock_ino(n->fd) != n->ino) {
            n->suspect = false; /* its socket is gone now: it was the one that left */
            node_gone(s, i);
            break; /* the table may have changed; the next tick looks again */
        }
    }
    if (s->fail_status) {
        if (now >= s->linger_until) {
            s->done = true;
            uv_stop(&s->loop);
        }
        return;
    }
    if (s->recovering) {
        if (now - s->recover_ms >= (uint64_t)(s->c->hb_timeout_s * 1000)) {
            char text[600], who[400];
            missing_nodes(s, who, sizeof who);
            snprintf(text, sizeof text, "%s did not come back to the restarted scheduler "
                     "within %.1f s (PS_HEARTBEAT_TIMEOUT): dead while the scheduler was "
                     "gone", who, s->c->hb_timeout_s);
            LOG(LOG_ERROR, WHO, "job", "%s; ending the job", text);
            snprintf(s->dead_text, sizeof s->dead_text, "%s", text);
            finish(s, 1);
        }
        return;
    }
    if (!s->started) {
        if (now - s->start_ms >= (uint64_t)(s->c->start_timeout_s * 1000)) {
            char text[300];
            snprintf(text, sizeof text, "start-up incomplete after %.1f s (KVS_START_TIMEOUT): "
                     "%d of %d servers and %d of %d workers registered",
                     s->c->start_timeout_s, s->nserver_reg, s->c->num_server, s->nworker_reg,
                     s->c->num_worker);
            LOG(LOG_ERROR, WHO, "job", "%s", text);
            s->end_status = KVS_ETIMEDOUT;
            snprintf(s->dead_text, sizeof s->dead_text, "%s", text);
            finish(s, 1);
        }
        return;
    }
    if (s->nwaiting > 0 && admit_waiting(s) > 0)
        membership_change(s);
    uint64_t limit = (uint64_t)(s->c->hb_timeout_s * 1000);
    for (int i = 0; i < s->nnodes && !s->done; i++) {
        sched_node *n = &s->nodes[i];
        if (!n->alive || n->exited)
            continue;
        /* (a joiner seated above was last seen after now) */
        if (now > n->last_seen && now - n->last_seen > limit) {
            char why[128];
            snprintf(why, sizeof why, "sent no heartbeat for %.1f s (PS_HEARTBEAT_TIMEOUT=%g)",
                     (double)(now - n->last_seen) / 1000.0, s->c->hb_timeout_s);
            declare_dead(s, n, why);
        }
    }
}

static void on_signal(uv_signal_t *h, int signum)
{
    sched *s = h->data;
    LOG(LOG_WARN, WHO, "job", "stopping on signal %d; telling every node", signum);
    finish(s, 1);
}

static void close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

/* Open the scheduler of job c on zctx (the caller's): the node table, the
 * socket (secured, bound, polled), the port file, metrics, the monitor and
 * the timer.  Returns 0, or 1 with the reason logged; either way
 * sched_close(s) releases what was opened.  The fuzz harness
 * (tests/fuzz/fuzz_sched.c) opens a scheduler this way and feeds on_recv. */
static int sched_open(sched *s, const cfg *c, void *zctx)
{
    char addr[CFG_HOST_MAX + 32], endpoint[512], why[256];
    int port;
    memset(s, 0, sizeof *s);
    s->c = c;
    s->zctx = zctx;
    s->start_ms = clock_ms();
    uv_loop_init(&s->loop);
    s->cap = c->num_server + cfg_worker_slots(c);
    s->nodes = calloc((size_t)s->cap, sizeof *s->nodes);
    if (c->elastic)
        s->waiting = calloc((size_t)cfg_worker_slots(c), sizeof *s->waiting);
    if (s->nodes == NULL || (c->elastic && s->waiting == NULL) ||
        (c->replicas > 0 && sched_owners_init(&s->owners, c->num_server) != 0)) {
        LOG(LOG_ERROR, WHO, "job", "out of memory");
        return 1;
    }
    if (net_auth_new(&s->loop, zctx, c, WHO, &s->auth) != 0)
        return 1;
    if (net_sock_new(&s->loop, zctx, ZMQ_ROUTER, c->water_mark > 100000 ? c->water_mark
                                                                          : 100000,
                     on_recv, s, &s->sock) != 0) {
        LOG(LOG_ERROR, WHO, "net", "cannot create a ZeroMQ socket");
        return 1;
    }
    if (net_auth_listen(s->auth, net_sock_zmq(s->sock), "scheduler") != 0) {
        LOG(LOG_ERROR, WHO, "auth", "cannot secure the scheduler's socket (KVS_SECURITY=%s)",
            cfg_security_name(c->security));
        return 1;
    }
    net_live_low_delay(net_sock_zmq(s->sock));
    snprintf(addr, sizeof addr, "tcp://*:%d", c->root_port);
    if (zmq_bind(net_sock_zmq(s->sock), addr) != 0) {
        LOG(LOG_ERROR, WHO, "net", "cannot bind %s (DMLC_PS_ROOT_PORT=%d): %s", addr,
            c->root_port, zmq_strerror(zmq_errno()));
        return 1;
    }
    port = net_bound_port(net_sock_zmq(s->sock), endpoint, sizeof endpoint);
    if (c->port_file[0]) {
        int rc = net_write_port_file(c->port_file, port);
        if (rc != 0) {
            LOG(LOG_ERROR, WHO, "job", "cannot write KVS_PORT_FILE=%s: %s", c->port_file,
                strerror(-rc));
            return 1;
        }
    }
    LOG(LOG_INFO, WHO, "net", "listening on port %d for %d servers and %d workers", port,
        c->num_server, c->num_worker);
    metrics_init(s);
    if (net_http_metrics(&s->loop, c, s->met, WHO, &s->http, why, sizeof why) != 0) {
        LOG(LOG_ERROR, WHO, "metrics", "%s", why);
        return 1;
    }
    net_sock_start(s->sock);
    net_guard_new(&s->loop, c, WHO, &s->guard); /* NULL (no guard) only out of memory */
    net_guard_set_flush(s->guard, (void (*)(void *))net_sock_drain_now, s->sock);
    if (net_mon_new(&s->loop, zctx, net_sock_zmq(s->sock),
                    ZMQ_EVENT_DISCONNECTED | NET_GUARD_EVENTS, on_monitor,
                    s, &s->mon) != 0)
        LOG(LOG_WARN, WHO, "net", "no socket monitor: departures are found by heartbeats only");
    uv_timer_init(&s->loop, &s->timer);
    s->timer.data = s;
    uint64_t tick = (uint64_t)(c->hb_interval_s * 500);
    if (tick < 10)
        tick = 10;
    if (tick > 1000)
        tick = 1000;
    uv_timer_start(&s->timer, on_timer, tick, tick);
    return 0;
}

/* Close what sched_open opened (the ZeroMQ context stays the caller's). */
static void sched_close(sched *s)
{
    net_mon_free(s->mon);
    net_guard_free(s->guard);
    net_sock_free(s->sock);
    net_http_free(s->http);
    net_auth_free(s->auth);
    uv_walk(&s->loop, close_walk, NULL);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    uv_loop_close(&s->loop);
    met_reg_free(s->met);
    free(s->nodes);
    free(s->waiting);
    free(s->left);
    sched_owners_fini(&s->owners);
}

int sched_run(const cfg *c)
{
    sched s;
    int linger = 2000;
    void *zctx = zmq_ctx_new();
    net_raise_nofile(WHO);
    if (sched_open(&s, c, zctx) != 0) {
        sched_close(&s);
        zmq_ctx_term(zctx);
        return 1;
    }
    uv_signal_init(&s.loop, &s.sigint);
    uv_signal_init(&s.loop, &s.sigterm);
    s.sigint.data = s.sigterm.data = &s;
    uv_signal_start(&s.sigint, on_signal, SIGINT);
    uv_signal_start(&s.sigterm, on_signal, SIGTERM);

    uv_run(&s.loop, UV_RUN_DEFAULT);

    /* Let the SHUTDOWN messages leave before the socket goes. */
    zmq_setsockopt(net_sock_zmq(s.sock), ZMQ_LINGER, &linger, sizeof linger);
    sched_close(&s);
    zmq_ctx_term(zctx);
    LOG(LOG_INFO, WHO, "job", "exiting with status %d, peak memory (VmHWM) %llu KiB",
        s.exit_code, mem_peak_kib());
    return s.exit_code;
}
