/* guard.c - see guard.h. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvs.h"
#include "common/clock.h"
#include "common/log.h"
#include "net/guard.h"
#include "net/tcpinfo.h"

enum { ENT_NONE = 0, ENT_PENDING, ENT_TRUSTED, ENT_CLOSING };

typedef struct guard_ent {
    uint64_t ino;   /* the socket's inode: which connection holds fd */
    uint64_t since; /* ms: accepted (pending) */
    int state;
    int prev, next; /* pending list, oldest first (fd numbers, -1: none) */
} guard_ent;

struct net_guard {
    const cfg *c;
    const char *who;
    uv_timer_t timer;
    guard_ent *ent; /* indexed by fd */
    int cap;
    int head, tail; /* pending list */
    uint64_t npending, ntrusted, nclosing;
    uint64_t closed, closed_timeout, closed_cap, closed_fds, closed_refused;
    uint64_t episode_closed;
    uint64_t *ring; /* routing ids (hashed) of connections shut for a refusal */
    size_t ring_at;
    bool episode;
    bool logged_full; /* the limit is reached by the job's own connections */
    uint64_t last_verify;
    DIR *fd_dir; /* /proc/self/fd */
    uint64_t grace;        /* ms a pending connection is safe from the cap and the limit */
    uv_timer_t retry;      /* enforce again once the oldest's grace is over */
    int open_handles;
    void (*flush)(void *); /* net_guard_set_flush */
    void *flush_arg;
    bool in_flush;
};

uint64_t net_guard_reserve(uint64_t nofile)
{
    uint64_t r = 16 + nofile / 32;
    return r > 1024 ? 1024 : r;
}

static uint64_t nofile_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return UINT64_MAX;
    return (uint64_t)rl.rlim_cur;
}

/* Descriptors open in this process now.  The directory stays open: when
 * the descriptors run out, opening it would fail exactly when it matters.
 * UINT64_MAX when it cannot be read (then every pending connection goes). */
static uint64_t fds_in_use(net_guard *g)
{
    uint64_t n = 0;
    struct dirent *e;
    if (g->fd_dir == NULL)
        return UINT64_MAX;
    rewinddir(g->fd_dir);
    while ((e = readdir(g->fd_dir)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    return n;
}

uint64_t net_sock_ino(int fd)
{
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode))
        return 0;
    return (uint64_t)st.st_ino;
}

static guard_ent *ent_at(net_guard *g, int fd, bool grow)
{
    if (fd < 0)
        return NULL;
    if (fd >= g->cap) {
        if (!grow)
            return NULL;
        int cap = g->cap ? g->cap : 64;
        while (cap <= fd)
            cap *= 2;
        guard_ent *e = realloc(g->ent, (size_t)cap * sizeof *e);
        if (e == NULL)
            return NULL;
        memset(e + g->cap, 0, (size_t)(cap - g->cap) * sizeof *e);
        g->ent = e;
        g->cap = cap;
    }
    return &g->ent[fd];
}

static void list_del(net_guard *g, int fd)
{
    guard_ent *e = &g->ent[fd];
    if (e->prev >= 0)
        g->ent[e->prev].next = e->next;
    else
        g->head = e->next;
    if (e->next >= 0)
        g->ent[e->next].prev = e->prev;
    else
        g->tail = e->prev;
    e->prev = e->next = -1;
}

static void list_add(net_guard *g, int fd)
{
    guard_ent *e = &g->ent[fd];
    e->next = -1;
    e->prev = g->tail;
    if (g->tail >= 0)
        g->ent[g->tail].next = fd;
    else
        g->head = fd;
    g->tail = fd;
}

/* Forget what fd held. */
static void ent_clear(net_guard *g, int fd)
{
    guard_ent *e = &g->ent[fd];
    switch (e->state) {
    case ENT_PENDING:
        list_del(g, fd);
        g->npending--;
        break;
    case ENT_TRUSTED:
        g->ntrusted--;
        break;
    case ENT_CLOSING:
        g->nclosing--;
        break;
    default:
        break;
    }
    e->state = ENT_NONE;
    e->ino = 0;
}

static const char *reason_text(int why)
{
    switch (why) {
    case 0: return "older than KVS_HANDSHAKE_TIMEOUT";
    case 1: return "more than KVS_MAX_PENDING_CONN pending";
    case 2: return "descriptors close to RLIMIT_NOFILE";
    default: return "sent a message this node refused before identifying itself";
    }
}

/* End the connection on fd in place: a TCP socket is disconnected
 * (connect to AF_UNSPEC: the kernel drops what it has received and not yet
 * handed to libzmq, up to the whole autotuned receive buffer, and resets the
 * peer); libzmq's next read fails and it closes the descriptor itself.  Any
 * other socket is shut down (SHUT_RDWR): libzmq sees the end of the stream. */
static void end_conn(int fd)
{
    struct sockaddr unspec;
    memset(&unspec, 0, sizeof unspec);
    unspec.sa_family = AF_UNSPEC;
    if (connect(fd, &unspec, sizeof unspec) != 0)
        shutdown(fd, SHUT_RDWR);
}

/* Shut down the pending connection on fd (why: 0 timeout, 1 cap, 2 fds,
 * 3 refused). */
static void shut(net_guard *g, int fd, int why, uint64_t in_use, uint64_t limit)
{
    guard_ent *e = &g->ent[fd];
    uint64_t ino = net_sock_ino(fd);
    list_del(g, fd);
    g->npending--;
    if (ino != e->ino || ino == 0) { /* libzmq closed it already (and may have reused fd) */
        e->state = ENT_NONE;
        e->ino = 0;
        return;
    }
    e->state = ENT_CLOSING;
    g->nclosing++;
    end_conn(fd);
    g->closed++;
    g->episode_closed++;
    if (why == 0)
        g->closed_timeout++;
    else if (why == 1)
        g->closed_cap++;
    else if (why == 2)
        g->closed_fds++;
    else
        g->closed_refused++;
    if (!g->episode) {
        g->episode = true;
        LOG(LOG_WARN, g->who, "net", "closing connections that did not identify themselves: "
            "%s (%llu pending, KVS_MAX_PENDING_CONN=%d, KVS_HANDSHAKE_TIMEOUT=%g s, %llu of "
            "%llu descriptors in use); the job's own connections are kept; one line until "
            "none is pending", reason_text(why), (unsigned long long)(g->npending + 1),
            g->c->max_pending_conn, g->c->handshake_timeout_s, (unsigned long long)in_use,
            (unsigned long long)limit);
    }
}

static void on_retry(uv_timer_t *t);

/* The oldest pending connection may be closed now (its grace is over);
 * else the retry timer is set for when it may. */
static bool oldest_ripe(net_guard *g, uint64_t now)
{
    uint64_t since = g->ent[g->head].since;
    if (now - since >= g->grace)
        return true;
    if (!uv_is_active((uv_handle_t *)&g->retry))
        uv_timer_start(&g->retry, on_retry, since + g->grace - now + 1, 0);
    return false;
}

/* Over the cap or close to the descriptor limit?  (in_use: set when the
 * limit is known.) */
static bool over(net_guard *g, uint64_t limit, uint64_t reserve, uint64_t *in_use, int *why)
{
    if (g->npending > (uint64_t)g->c->max_pending_conn) {
        *why = 1;
        return true;
    }
    if (limit == UINT64_MAX)
        return false;
    if (*in_use == 0)
        *in_use = fds_in_use(g); /* once per enforce: closing ones are counted apart */
    /* closing descriptors are about to be freed by libzmq */
    *why = 2;
    return *in_use == UINT64_MAX ||
           (*in_use >= g->nclosing && *in_use - g->nclosing + reserve >= limit);
}

/* Keep the pending count under the cap and the descriptors under the
 * limit minus the reserve, closing the oldest pending connections whose
 * grace is over. */
static void enforce(net_guard *g)
{
    uint64_t limit = nofile_limit(), reserve = net_guard_reserve(limit), in_use = 0;
    uint64_t now = clock_ms();
    int why = 0;
    if (g->head < 0 || !over(g, limit, reserve, &in_use, &why))
        goto full;
    if (g->flush && !g->in_flush) {
        /* messages already received may identify some of them */
        g->in_flush = true;
        g->flush(g->flush_arg);
        g->in_flush = false;
    }
    while (g->head >= 0 && over(g, limit, reserve, &in_use, &why) && oldest_ripe(g, now))
        shut(g, g->head, why, in_use, limit);
full:
    if (limit == UINT64_MAX)
        return;
    if (in_use == 0)
        in_use = fds_in_use(g);
    if (in_use != UINT64_MAX && in_use + reserve / 2 >= limit && g->head < 0 && g->nclosing == 0 &&
        !g->logged_full) {
        g->logged_full = true;
        LOG(LOG_ERROR, g->who, "net", "%llu of %llu descriptors in use and every connection "
            "belongs to the job: new connections may be refused; raise the limit (ulimit -n)",
            (unsigned long long)in_use, (unsigned long long)limit);
    }
}

static void on_accepted(net_guard *g, int fd)
{
    uint64_t ino = net_sock_ino(fd);
    guard_ent *e;
    if (ino == 0 || (e = ent_at(g, fd, true)) == NULL)
        return;
    if (e->state != ENT_NONE && e->ino == ino)
        return; /* known already (trusted before this event arrived) */
    ent_clear(g, fd);
    e->state = ENT_PENDING;
    e->ino = ino;
    e->since = clock_ms();
    list_add(g, fd);
    g->npending++;
    enforce(g);
}

/* fd's connection ended (or will in a moment). */
static void on_gone(net_guard *g, int fd)
{
    guard_ent *e = ent_at(g, fd, false);
    if (e == NULL || e->state == ENT_NONE)
        return;
    if (net_sock_ino(fd) != e->ino)
        ent_clear(g, fd);
    /* else: the event came before libzmq closed fd, or it was about an
     * earlier socket on fd; the sweep checks again */
}

void net_guard_trust(net_guard *g, int fd)
{
    guard_ent *e;
    uint64_t ino;
    if (g == NULL || fd < 0)
        return;
    e = ent_at(g, fd, false);
    if (e && e->state == ENT_TRUSTED)
        return; /* the common case: no system call per message */
    ino = net_sock_ino(fd);
    if (ino == 0 || (e = ent_at(g, fd, true)) == NULL)
        return;
    if (e->state == ENT_CLOSING && e->ino == ino)
        return; /* too late: shut down already */
    ent_clear(g, fd);
    e->state = ENT_TRUSTED;
    e->ino = ino;
    g->ntrusted++;
}

bool net_guard_trusted(net_guard *g, int fd)
{
    guard_ent *e;
    if (g == NULL)
        return true;
    e = fd < 0 ? NULL : ent_at(g, fd, false);
    return e != NULL && e->state == ENT_TRUSTED;
}

static uint64_t ident_hash(const void *ident, size_t len)
{
    const uint8_t *p = ident;
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h | 1; /* 0 marks a free slot */
}

bool net_guard_refused(net_guard *g, int fd, const void *ident, size_t ident_len)
{
    guard_ent *e;
    uint64_t h, ino;
    if (g == NULL)
        return true;
    e = fd < 0 ? NULL : ent_at(g, fd, false);
    if (e && e->state == ENT_TRUSTED)
        return true;
    if (fd < 0 || (e && e->state == ENT_CLOSING && net_sock_ino(fd) == e->ino))
        return false; /* shut already: the rest of its queue */
    h = ident_hash(ident, ident_len);
    for (size_t i = 0; g->ring && i < NET_GUARD_RING; i++)
        if (g->ring[i] == h)
            return false; /* a connection shut before (fd may be another's now) */
    ino = net_sock_ino(fd);
    if (ino == 0 || net_tcp_received(fd) < NET_GUARD_REFUSE_MIN)
        return false; /* gone, or too new to be the one that sent it: not yet */
    if (g->ring == NULL && (g->ring = calloc(NET_GUARD_RING, sizeof *g->ring)) == NULL)
        return false;
    g->ring[g->ring_at] = h;
    g->ring_at = (g->ring_at + 1) % NET_GUARD_RING;
    e = ent_at(g, fd, true);
    if (e == NULL)
        return false;
    if (e->state != ENT_PENDING || e->ino != ino) {
        /* its ACCEPTED has not reached the loop yet: pending from now on */
        ent_clear(g, fd);
        e->state = ENT_PENDING;
        e->ino = ino;
        e->since = clock_ms();
        list_add(g, fd);
        g->npending++;
    }
    shut(g, fd, 3, g->episode ? 0 : fds_in_use(g), nofile_limit());
    return false;
}

void net_guard_event(net_guard *g, int event, int value)
{
    if (g == NULL)
        return;
    switch (event) {
    case ZMQ_EVENT_ACCEPTED:
        on_accepted(g, value);
        break;
    case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
        if (g->c->security != CFG_SEC_NONE)
            net_guard_trust(g, value); /* the peer proved the job secret */
        break;
    case ZMQ_EVENT_DISCONNECTED:
    case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
        on_gone(g, value);
        break;
    default:
        break;
    }
}

static void on_retry(uv_timer_t *t)
{
    enforce(t->data);
}

static void on_timer(uv_timer_t *t)
{
    net_guard *g = t->data;
    uint64_t now = clock_ms(), max_age = (uint64_t)(g->c->handshake_timeout_s * 1000);
    uint64_t limit = nofile_limit(), in_use = 0;
    if (g->head >= 0 && now - g->ent[g->head].since >= max_age)
        in_use = fds_in_use(g); /* for the log line */
    while (g->head >= 0 && now - g->ent[g->head].since >= max_age)
        shut(g, g->head, 0, in_use, limit);
    if (now - g->last_verify >= 1000 || g->nclosing > 0) {
        /* drop entries whose socket is gone: events may have been missed or
         * have come before libzmq closed the descriptor */
        g->last_verify = now;
        for (int fd = 0; fd < g->cap; fd++)
            if (g->ent[fd].state != ENT_NONE && net_sock_ino(fd) != g->ent[fd].ino)
                ent_clear(g, fd);
    }
    if (g->head >= 0)
        enforce(g); /* the limit may have been lowered (prlimit) */
    if (g->episode && g->npending == 0 && g->nclosing == 0) {
        LOG(LOG_INFO, g->who, "net", "closed %llu connections that did not identify "
            "themselves; none pending now", (unsigned long long)g->episode_closed);
        g->episode = false;
        g->episode_closed = 0;
    }
}

int net_guard_new(uv_loop_t *loop, const cfg *c, const char *who, net_guard **out)
{
    net_guard *g = calloc(1, sizeof *g);
    struct sigaction sa;
    *out = NULL;
    if (g == NULL)
        return KVS_ENOMEM;
    g->c = c;
    g->who = who;
    g->head = g->tail = -1;
    g->fd_dir = opendir("/proc/self/fd");
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
    uint64_t tick = (uint64_t)(c->handshake_timeout_s * 250);
    tick = tick < 50 ? 50 : tick > 1000 ? 1000 : tick;
    g->grace = (uint64_t)(c->handshake_timeout_s * 100); /* a tenth */
    if (g->grace > NET_GUARD_GRACE_MS)
        g->grace = NET_GUARD_GRACE_MS;
    uv_timer_init(loop, &g->timer);
    uv_timer_init(loop, &g->retry);
    g->timer.data = g->retry.data = g;
    g->open_handles = 2;
    uv_timer_start(&g->timer, on_timer, tick, tick);
    *out = g;
    return 0;
}

static void on_closed(uv_handle_t *h)
{
    net_guard *g = h->data;
    if (--g->open_handles > 0)
        return;
    if (g->fd_dir)
        closedir(g->fd_dir);
    free(g->ent);
    free(g->ring);
    free(g);
}

void net_guard_free(net_guard *g)
{
    if (g == NULL)
        return;
    uv_close((uv_handle_t *)&g->timer, on_closed);
    uv_close((uv_handle_t *)&g->retry, on_closed);
}

void net_guard_set_flush(net_guard *g, void (*flush)(void *arg), void *arg)
{
    if (g == NULL)
        return;
    g->flush = flush;
    g->flush_arg = arg;
}

void net_guard_get_stats(const net_guard *g, net_guard_stats *st)
{
    memset(st, 0, sizeof *st);
    if (g == NULL)
        return;
    st->pending = g->npending;
    st->trusted = g->ntrusted;
    st->closed = g->closed;
    st->closed_timeout = g->closed_timeout;
    st->closed_cap = g->closed_cap;
    st->closed_fds = g->closed_fds;
    st->closed_refused = g->closed_refused;
}
