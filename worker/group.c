/* group.c - local groups and per-host aggregation: see group.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/datapath.h"
#include "common/hmap.h"
#include "common/err.h"
#include "common/log.h"
#include "net/auth.h"
#include "net/net.h"
#include "worker/group.h"
#include "worker/op.h"
#include "worker/wrk_int.h"

/* ---- configuration ---- */

/* KVS_LOCAL_RANK/KVS_LOCAL_SIZE, else LOCAL_RANK/LOCAL_WORLD_SIZE: both of a
 * pair or neither; rank < size. */
static int layout_pair(const char *rname, const char *sname, int *rank, int *size, char *err,
                       size_t errlen)
{
    long long r, z;
    if (cfg_get_int(rname, -1, 0, 65535, &r, err, errlen) != 0 ||
        cfg_get_int(sname, -1, 1, 65536, &z, err, errlen) != 0)
        return KVS_ECONFIG;
    if ((r < 0) != (z < 0)) {
        snprintf(err, errlen, "%s='%s' and %s='%s': give both or neither", rname,
                 cfg_get_str(rname), sname, cfg_get_str(sname));
        return KVS_ECONFIG;
    }
    if (r >= 0 && r >= z) {
        snprintf(err, errlen, "%s=%lld: expected a local rank below %s=%lld", rname, r, sname, z);
        return KVS_ECONFIG;
    }
    *rank = (int)r;
    *size = (int)z;
    return 0;
}

/* KVS_LOCAL_AGG_MIN's default, bytes, when the job has workers or servers
 * on other hosts.  Meeting in the group costs a key about 9 us per round (a
 * post, a match, a cross-process read and write, a request of its own: 100k
 * keys of 64 bytes took 1.1 s through the group of a 2x2 job, 0.17 s
 * without it, bench/RESULTS.md); one more copy of a key smaller than this
 * takes less than that on a 1 Gbit link. */
#define GRP_AGG_MIN 1024u
/* Its default when the group is the whole job, servers included (one
 * host): there the group saves no network bytes, only the servers' sums
 * and the local copies, and on the direct-copy path a key under 64 KiB
 * costs more through the group than without it (2 and 4 workers,
 * bench/RESULTS.md "Local groups"). */
#define GRP_AGG_MIN_HOST (64u << 10)
/* And when the group has 2 members and every server reads them directly
 * (the node table's servers field), host arrays skip the group altogether
 * (grp_host_direct): it saves no copy there, each server reading and
 * writing both members' memory as the owner would, and it adds its meeting
 * and a pass over the sum (200 keys of 4 KiB-1 MiB in a 2x2 job: 16-17.5
 * against 20.5-22 ms; docs/guide/local-groups.md). */

int wrk_grp_config(kvs_store *s, char *err, size_t errlen)
{
    int rank = -1, size = -1;
    bool agg;
    s->local_rank = 0;
    s->local_size = 1;
    s->local_group = -1;
    if (layout_pair("KVS_LOCAL_RANK", "KVS_LOCAL_SIZE", &rank, &size, err, errlen) != 0)
        return KVS_ECONFIG;
    if (rank < 0 &&
        layout_pair("LOCAL_RANK", "LOCAL_WORLD_SIZE", &rank, &size, err, errlen) != 0)
        return KVS_ECONFIG;
    if (cfg_get_bool("KVS_LOCAL_AGG", !s->async, &agg, err, errlen) != 0)
        return KVS_ECONFIG;
    if (cfg_get_u64("KVS_LOCAL_AGG_MIN", UINT64_MAX, 0, 1u << 30, &s->local_agg_min, err,
                    errlen) != 0)
        return KVS_ECONFIG;
    /* not given: the default, chosen once the layout is known (wrk_grp_table) */
    s->local_agg_min_auto = s->local_agg_min == UINT64_MAX;
    if (s->local_agg_min_auto)
        s->local_agg_min = GRP_AGG_MIN;
    char aggmin[24] = "auto";
    if (!s->local_agg_min_auto)
        snprintf(aggmin, sizeof aggmin, "%llu", (unsigned long long)s->local_agg_min);
    s->local_rank_env = rank;
    s->local_size_env = size;
    s->local_agg = agg;
    net_random(s->local_nonce, sizeof s->local_nonce);
    char nh[2 * PROTO_NONCE_LEN + 1];
    for (int i = 0; i < PROTO_NONCE_LEN; i++)
        snprintf(nh + 2 * i, 3, "%02x", s->local_nonce[i]);
    uint64_t pidns = net_pidns();
    snprintf(s->grp_reg, sizeof s->grp_reg,
             "pidns=%llx pid=%d lrank=%d lsize=%d agg=%d aggmin=%s nonce_addr=%llx "
             "nonce=%s cma=%d", (unsigned long long)pidns, (int)getpid(), rank, size,
             s->local_agg ? 1 : 0, aggmin, (unsigned long long)(uintptr_t)s->local_nonce, nh,
             s->c.cma && s->c.replicas == 0);
    return 0;
}

int wrk_grp_table(kvs_store *s, const proto_node *nodes, int n, uint64_t job_id, char *why,
                  size_t whylen)
{
    const proto_node *me = NULL;
    s->job_id = job_id;
    for (int i = 0; i < n; i++)
        if (nodes[i].id == s->node_id)
            me = &nodes[i];
    if (me == NULL || me->group < 0)
        return 0; /* alone */
    proto_node *peers = calloc((size_t)me->lsize, sizeof *peers);
    if (peers == NULL) {
        snprintf(why, whylen, "out of memory");
        return KVS_ENOMEM;
    }
    int found = 0, workers = 0;
    for (int i = 0; i < n; i++) {
        const proto_node *p = &nodes[i];
        workers += p->role == CFG_ROLE_WORKER;
        if (p->role != CFG_ROLE_WORKER || p->group != me->group)
            continue;
        if (p->lsize != me->lsize || p->lrank >= me->lsize || peers[p->lrank].id != 0) {
            free(peers);
            snprintf(why, whylen, "the node table's local group %d is inconsistent", me->group);
            return KVS_EPROTO;
        }
        peers[p->lrank] = *p;
        found++;
    }
    if (found != me->lsize) {
        free(peers);
        snprintf(why, whylen, "the node table's local group %d has %d of its %d members",
                 me->group, found, me->lsize);
        return KVS_EPROTO;
    }
    free(s->peers);
    s->peers = peers;
    s->local_rank = me->lrank;
    s->local_size = me->lsize;
    s->local_group = me->group;
    /* every member reads the same table: the same floor, and the same
     * choice below (dist_sync only: a dist_async store that asked for the
     * group wants one update per host; in dist_sync the sum of 2 is the same
     * either way) */
    if (s->local_agg_min_auto)
        s->local_agg_min = found == workers && me->servers != PROTO_SERVERS_AWAY
                               ? GRP_AGG_MIN_HOST : GRP_AGG_MIN;
    s->grp_host_direct = s->local_agg_min_auto && me->servers == PROTO_SERVERS_DIRECT &&
                         me->lsize == 2 && !s->async;
    return 0;
}

/* ---- the shared segment ---- */

#define GRP_SLOT_BITS 11
#define GRP_SLOTS (1u << GRP_SLOT_BITS)
#define GRP_MAGIC 0x4b56534cu
#define GRP_TEXT 200
#define GRP_WAIT_MS 20 /* longest sleep between looks at the job's state */
/* Sum buffers a member keeps for its next chunks: a fresh aligned 4 MiB
 * buffer per chunk leaves holes in the thread's heap that the next one
 * does not fit (the alignment's slack), and the heap grows round after
 * round; reused, the group's buffers stay at DP_GROUP_INFLIGHT. */
#define GRP_SPARE 4
/* A chunk is summed in pieces of this many bytes: each member's piece is
 * read into a staging buffer that stays in cache and added from there,
 * rather than whole chunks copied to memory and read back. */
#define GRP_SUM_PIECE (256u << 10)
/* Buffers a member holds for the chunks it pulls for the others (bytes: in
 * flight, and kept for members that have not pulled them yet).  Past it the
 * oldest kept ones go (a late pull fetches again); if that is not enough,
 * the member whose pull needs a buffer pulls the chunk itself.  A fetch for
 * the owner's own pull lands in its output and needs none.  Two default
 * chunks: with four, the kept buffers and the answers ZeroMQ's thread
 * receives ahead of ours took a socket worker of a 2x2 job past 1.5x its
 * array (bench/RESULTS.md "Worker memory"). */
#define GRP_PULL_KEEP (8u << 20)

typedef struct grp_ent {
    _Atomic uint64_t seq; /* 0: free; else the member's post number */
    uint64_t key, round, count, src, dst; /* dst 0: a push */
    uint64_t done; /* a pull: the member's per-chunk flags (an owner sets 1 before it
                      counts the chunk done in left) */
    uint32_t type, dtype; /* type: WRK_OP_PUSH, _PUSHPULL or _PULL */
    int32_t priority;
    _Atomic uint32_t hold; /* 1: the member's pulls of the key issued before this
                              entry are not all answered yet: no owner starts it */
    _Atomic int64_t left; /* chunks whose owners have not finished this entry */
    _Atomic int32_t err;  /* the first error an owner hit */
    uint32_t dev;         /* GRP_DEV: the data is in device memory (h), not at src;
                             GRP_DEV_WANT: the round's value goes back there */
    dev_ipc h;
    int32_t tord;   /* GRP_DEV: h's device, as the host's backend ordinal (trees) */
    uint64_t thash; /* GRP_DEV: the host topology's hash for trees; 0: none */
    /* trees: chunks below this hold the sum over the member's subtree in the
     * chunk's tree, in its buffer (GRP_TPART_FAILED: it gave up, err) */
    _Atomic uint64_t tpart;
    char errtext[GRP_TEXT];
} grp_ent;

#define GRP_DEV 1u
#define GRP_DEV_WANT 2u
#define GRP_TPART_FAILED UINT64_MAX

typedef struct grp_member {
    _Atomic int32_t pid;     /* set when it attached */
    _Atomic int32_t left;    /* it left the group: nobody waits for it any more */
    _Atomic uint64_t posted; /* entries it posted so far */
    _Atomic uint32_t gone;   /* after left: its group thread ended, it writes nothing more */
    _Atomic uint64_t pposted; /* pulls it posted so far (plog) */
    _Atomic uint32_t handed; /* chunks of its pulls an owner handed back to it (flag 3) */
    _Atomic uint32_t wake;   /* futex word of its threads: bumped when something they
                                wait for may have changed (wake_member) */
    _Atomic uint32_t sleepers; /* its threads waiting on wake */
    uint32_t pad32;
    uint64_t pad[2];
    char why[GRP_TEXT];      /* written before left: the job's failure it left on ("" none) */
    grp_ent ent[GRP_SLOTS];
    /* its pull number i is entry (plog[i % GRP_SLOTS] & (GRP_SLOTS - 1)), posted as
     * (plog >> GRP_SLOT_BITS); a member posts pull i only once every member that is
     * not gone has read pull i - GRP_SLOTS (pread) */
    uint64_t plog[GRP_SLOTS];
} grp_member;

typedef struct grp_shm {
    uint32_t magic, lsize;
    _Atomic uint32_t ready;    /* local rank 0 initialised it */
    _Atomic uint32_t attached; /* members that mapped it (the last one unlinks it) */
    _Atomic uint32_t gen;      /* futex word of start-up: bumped on every change */
    _Atomic uint32_t ngone;    /* members gone */
    _Atomic uint32_t gsleepers; /* threads waiting on gen */
    uint32_t pad[9];
    grp_member m[]; /* then pread: lsize x lsize u64 (pread_of) */
} grp_shm;

/* ---- the group's process-local state ---- */

typedef struct grp_item grp_item;

typedef struct grp_chunk { /* one owned chunk in flight */
    struct wrk_grp *g;
    grp_item *it;
    wrk_part part;
    uint8_t *buf; /* the group's sum; a pushpull's reply lands here too */
    size_t cap;   /* buf's size */
    bool wants;   /* some member wants the round's value */
    struct grp_fetch *f; /* a chunk we pull for the group (pulls below), or NULL */
    bool fallback;       /* a direct pull of one chunk of our own pull item */
    bool dev;            /* summed on a device (a member's data is in device memory) */
    bool solo;           /* one chunk of a solo item (below) */
    uint64_t c;          /* fallback: the chunk */
    wrk_op *op;
    struct grp_chunk *next;
} grp_chunk;

struct grp_item { /* one key of one of our ops */
    wrk_op *op;
    wrk_held k;
    int type, priority;
    uint32_t slot;       /* ours */
    uint64_t nchunks, cnext; /* chunks; the next one to look at */
    wrk_part *parts;
    int *mslot;          /* per member: its slot for (key, round), -1: not found yet */
    uint64_t *mseen;     /* per member: its posted count when we last looked in vain */
    bool started;        /* every owned chunk submitted */
    bool released;       /* op released (the item waits only for its chunks) */
    bool pull;           /* a plain pull: owners fetch its chunks (no push to match) */
    uint8_t *cdone;      /* a pull: per chunk 0, or done (owners write it; 2: we pull
                            it ourselves) */
    int inflight;        /* owned chunks not finished */
    wrk_grp_dev dv;      /* our data in device memory (dv.on), else at k.src */
    bool tdecided;       /* whether the round goes along trees is known */
    int *tpar;           /* it does: per root r, per member v, v's parent (n * n) */
    /* a solo item: a key under KVS_LOCAL_AGG_MIN bytes, which every member
     * sends for itself (contrib 1) from the user's thread, in call order;
     * no entry in the segment, nobody matches it */
    bool solo;
    _Atomic int solo_left; /* its chunks not finished */
    int solo_err;          /* the first error (under g->mu) */
    char solo_text[GRP_TEXT];
    grp_item *next;
};

struct wrk_grp {
    kvs_store *s;
    grp_shm *shm;
    size_t shm_len;
    char name[64];
    int me, size;
    pthread_t thread;
    bool thread_on;
    pthread_mutex_t mu;       /* queue, done, stop, seq */
    grp_item *q_head, *q_tail; /* posted, not yet seen by the thread */
    grp_chunk *done;          /* chunk ops that completed */
    bool stop;
    uint64_t seq;
    uint32_t hint;            /* where to look for a free slot */
    grp_item *active, *active_tail; /* (thread) */
    size_t stage_cap;
    uint8_t **stage;          /* (thread) per other member: room for one piece */
    size_t inflight_bytes;    /* (thread) bytes of our owned chunks in flight (their sums) */
    uint8_t *spare[GRP_SPARE]; /* (thread) sum buffers of finished chunks, kept for reuse */
    size_t spare_cap[GRP_SPARE];
    int nspare;
    uint32_t *hints;          /* (thread) per member: where to start looking (find_slot) */
    int *tmem;                /* (thread) per member: room for the members one sum adds */
    int *tord;                /* (thread) per member: room for the devices of a round */
    bool twarned;             /* (thread) said that the members' topologies differ */
    const void **srcs;        /* (thread) per member: what one sum adds */
    /* pulls for the group (thread) */
    uint64_t *pseen;          /* per member: its pulls we read (plog) */
    struct grp_fetch *fetch_head, *fetch_tail; /* our chunk pulls, oldest first */
    hmap fetch_keys;          /* key -> its chunk pulls (grp_fetch.knext) */
    uint64_t swept;           /* the epoch whose older kept values are all gone */
    int nfetching;            /* those not answered yet */
    size_t kept;              /* bytes of the buffers of our chunk pulls (GRP_PULL_KEEP) */
    uint32_t handed_seen;     /* our member's handed count when we last looked */
    bool fell_back;           /* we pulled a chunk of a member that left ourselves */
    bool parked;              /* left the group with chunk pulls in flight (wrk_grp_stop) */
    _Atomic uint64_t epoch;   /* inits and loads of this store so far (wrk_grp_forget) */
    wrk_part *pparts;         /* room for one key's chunks */
    size_t npparts;
};

/* One chunk that we pull for the group: the members' pulls of it (waiters)
 * get its value when it comes, and later pulls of the same round take it
 * from buf while it is kept. */
typedef struct grp_waiter {
    int m;
    uint32_t slot;
} grp_waiter;

typedef struct grp_fetch {
    uint64_t key, round, count, chunk;
    uint64_t epoch;    /* g->epoch when it was pulled: a later one is not kept */
    kvs_dtype dtype;
    wrk_part part;
    uint8_t *buf;      /* NULL while direct */
    size_t cap;
    uint8_t *direct;   /* the reply lands in our own pull's output here (our pull
                          came first: no buffer); buf: a copy kept for late ones */
    uint32_t dslot;    /* direct: our entry */
    bool ready;        /* buf holds the value */
    int served;        /* member pulls given the value */
    grp_waiter *w;     /* not ready: the pulls waiting for it */
    int nw, wcap;
    struct grp_fetch *prev, *next;
    struct grp_fetch *knext; /* the next of the same key (fetch_keys) */
} grp_fetch;

/* Wake the threads of member m (its group thread, its submitter waiting for
 * a slot) if they sleep: each pass of a group thread starts from the wake
 * count it read (wake_seen), so a bump between that read and its sleep
 * makes the sleep return at once.  No system call when nobody sleeps (the
 * sleeper counts itself before the kernel compares the word). */
static void wake_member(grp_shm *shm, int m)
{
    grp_member *mb = &shm->m[m];
    atomic_fetch_add(&mb->wake, 1);
    if (atomic_load(&mb->sleepers))
        syscall(SYS_futex, &mb->wake, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Something every member may wait for changed (a post, an entry finished or
 * failed, a member leaving): wake them all, and start-up's waiters. */
static void gen_bump(grp_shm *shm)
{
    atomic_fetch_add(&shm->gen, 1);
    if (atomic_load(&shm->gsleepers))
        syscall(SYS_futex, &shm->gen, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    for (uint32_t m = 0; m < shm->lsize; m++)
        wake_member(shm, (int)m);
}

static void sleep_on(_Atomic uint32_t *word, _Atomic uint32_t *sleepers, uint32_t seen, int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    atomic_fetch_add(sleepers, 1);
    syscall(SYS_futex, word, FUTEX_WAIT, seen, &ts, NULL, 0);
    atomic_fetch_sub(sleepers, 1);
}

static void gen_wait(grp_shm *shm, uint32_t seen, int ms)
{
    sleep_on(&shm->gen, &shm->gsleepers, seen, ms);
}

/* This member's wake count, read before a pass looks at anything. */
static uint32_t wake_seen(const wrk_grp *g)
{
    return atomic_load(&g->shm->m[g->me].wake);
}

/* Sleep until this member is woken after seen (or ms pass). */
static void wake_wait(wrk_grp *g, uint32_t seen, int ms)
{
    grp_member *mb = &g->shm->m[g->me];
    sleep_on(&mb->wake, &mb->sleepers, seen, ms);
}

static int job_failed(kvs_store *s, char *text, size_t len)
{
    pthread_mutex_lock(&s->mu);
    int f = s->fatal;
    if (f && text && len > 0) { /* cut to len (a group text is shorter) */
        size_t n = strnlen(s->fatal_text, len - 1);
        memcpy(text, s->fatal_text, n);
        text[n] = '\0';
    }
    pthread_mutex_unlock(&s->mu);
    return f;
}

/* ---- meeting the group ---- */

/* Read n bytes at addr of pid into buf (all of them). */
static int peer_read(int pid, void *buf, uint64_t addr, size_t n)
{
    size_t got = 0;
    while (got < n) {
        struct iovec l = {(uint8_t *)buf + got, n - got};
        struct iovec r = {(void *)(uintptr_t)(addr + got), n - got};
        ssize_t k = process_vm_readv(pid, &l, 1, &r, 1, 0);
        if (k <= 0)
            return k == 0 ? EFAULT : errno;
        got += (size_t)k;
    }
    return 0;
}

static int peer_write(int pid, uint64_t addr, const void *buf, size_t n)
{
    size_t put = 0;
    while (put < n) {
        struct iovec l = {(uint8_t *)buf + put, n - put};
        struct iovec r = {(void *)(uintptr_t)(addr + put), n - put};
        ssize_t k = process_vm_writev(pid, &l, 1, &r, 1, 0);
        if (k <= 0)
            return k == 0 ? EFAULT : errno;
        put += (size_t)k;
    }
    return 0;
}

/* Every member is the process that registered (its nonce is where it said)
 * and its memory is reachable from here. */
static int check_proofs(kvs_store *s)
{
    for (int m = 0; m < s->local_size; m++) {
        const proto_node *p = &s->peers[m];
        uint8_t got[PROTO_NONCE_LEN];
        if (m == s->local_rank)
            continue;
        int e = peer_read(p->pid, got, p->nonce_addr, sizeof got);
        if (e == 0 && memcmp(got, p->nonce, sizeof got) == 0)
            continue;
        return err_set(KVS_ECONFIG, "local group on %s: worker %d (local rank %d, pid %d) "
                       "registered from this host but its memory %s; the group cannot sum "
                       "locally (separate machines behind one address? set KVS_LOCAL_AGG=0)",
                       s->host, (p->id - 9) / 2, m, p->pid,
                       e ? strerror(e) : "does not hold its proof");
    }
    return 0;
}

static int shm_meet(kvs_store *s, wrk_grp *g)
{
    size_t len = sizeof(grp_shm) + (size_t)g->size * sizeof(grp_member) +
                 (size_t)g->size * (size_t)g->size * sizeof(uint64_t);
    int fd = -1;
    uint64_t deadline = clock_ms() + (uint64_t)(s->c.start_timeout_s * 1000);
    snprintf(g->name, sizeof g->name, "/kvsd-%016llx-g%d", (unsigned long long)s->job_id,
             s->local_group);
    if (g->me == 0) {
        fd = shm_open(g->name, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd < 0 || ftruncate(fd, (off_t)len) != 0) {
            int e = errno;
            if (fd >= 0)
                close(fd);
            return err_set(KVS_ENOMEM, "local group: cannot create shared memory %s: %s",
                           g->name, strerror(e));
        }
    } else {
        for (;;) {
            struct stat st;
            fd = shm_open(g->name, O_RDWR, 0600);
            if (fd >= 0 && fstat(fd, &st) == 0 && (size_t)st.st_size == len)
                break;
            if (fd >= 0)
                close(fd);
            if (job_failed(s, NULL, 0) || clock_ms() > deadline)
                return err_set(KVS_ETIMEDOUT, "local group: local rank 0 (pid %d) did not "
                               "create %s within KVS_START_TIMEOUT", s->peers[0].pid, g->name);
            usleep(2000); /* polling a name: no condition to wait on */
        }
    }
    g->shm = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (g->shm == MAP_FAILED) {
        g->shm = NULL;
        return err_set(KVS_ENOMEM, "local group: cannot map %s: %s", g->name, strerror(errno));
    }
    g->shm_len = len;
    if (g->me == 0) {
        g->shm->magic = GRP_MAGIC;
        g->shm->lsize = (uint32_t)g->size;
        atomic_store(&g->shm->ready, 1);
    } else {
        while (atomic_load(&g->shm->ready) == 0) {
            if (job_failed(s, NULL, 0) || clock_ms() > deadline)
                return err_set(KVS_ETIMEDOUT, "local group: %s was never initialised", g->name);
            usleep(1000);
        }
        if (g->shm->magic != GRP_MAGIC || g->shm->lsize != (uint32_t)g->size)
            return err_set(KVS_EPROTO, "local group: %s is not this group's", g->name);
    }
    atomic_store(&g->shm->m[g->me].pid, (int32_t)getpid());
    if (atomic_fetch_add(&g->shm->attached, 1) + 1 == (uint32_t)g->size)
        shm_unlink(g->name); /* everyone has it: nothing is left behind */
    gen_bump(g->shm);
    /* local rank 0 returns once every member has the segment: a member
     * that closes its store at once must not take the name away from
     * those still looking for it */
    for (;;) {
        uint32_t seen = atomic_load(&g->shm->gen);
        if (g->me != 0 || atomic_load(&g->shm->attached) == (uint32_t)g->size)
            return 0;
        if (job_failed(s, NULL, 0) || clock_ms() > deadline)
            return err_set(KVS_ETIMEDOUT, "local group: %u of %d members attached to %s within "
                           "KVS_START_TIMEOUT", atomic_load(&g->shm->attached), g->size, g->name);
        gen_wait(g->shm, seen, GRP_WAIT_MS);
    }
}

static void *grp_main(void *arg);

/* An async pull finished (s->mu held): a hold may end (grp_main looks). */
static void pull_done(kvs_store *s)
{
    if (s->grp)
        wake_member(s->grp->shm, s->grp->me);
}

int wrk_grp_start(kvs_store *s)
{
    if (!s->local_agg || s->local_size <= 1)
        return 0;
    int rc = check_proofs(s);
    if (rc)
        return rc;
    wrk_grp *g = calloc(1, sizeof *g);
    if (g == NULL)
        return err_set(KVS_ENOMEM, "out of memory");
    g->s = s;
    g->me = s->local_rank;
    g->size = s->local_size;
    pthread_mutex_init(&g->mu, NULL);
    hmap_init(&g->fetch_keys);
    g->stage = calloc((size_t)g->size, sizeof *g->stage);
    g->srcs = calloc((size_t)g->size, sizeof *g->srcs);
    g->hints = calloc((size_t)g->size, sizeof *g->hints);
    g->pseen = calloc((size_t)g->size, sizeof *g->pseen);
    g->tmem = calloc((size_t)g->size, sizeof *g->tmem);
    g->tord = calloc((size_t)g->size, sizeof *g->tord);
    if (g->stage == NULL || g->srcs == NULL || g->hints == NULL || g->pseen == NULL ||
        g->tmem == NULL || g->tord == NULL) {
        rc = err_set(KVS_ENOMEM, "out of memory");
        goto fail;
    }
    if ((rc = shm_meet(s, g)) != 0)
        goto fail;
    if (pthread_create(&g->thread, NULL, grp_main, g) != 0) {
        rc = err_set(KVS_ENOMEM, "cannot start the local group thread");
        goto fail;
    }
    g->thread_on = true;
    pthread_mutex_lock(&s->mu);
    s->grp_pull_done = pull_done;
    pthread_mutex_unlock(&s->mu);
    s->grp = g;
    if (s->grp_host_direct)
        LOG(LOG_INFO, s->who, "group", "local rank %d of %d: host arrays go to the servers "
            "without the group (2 workers, and every server reads them directly: "
            "KVS_LOCAL_AGG_MIN's default here); device memory of %llu bytes and more through "
            "it", g->me, g->size, (unsigned long long)s->local_agg_min);
    else
        LOG(LOG_INFO, s->who, "group", "local rank %d of %d: summing locally before the "
            "network (keys of %llu bytes and more%s)", g->me, g->size,
            (unsigned long long)s->local_agg_min,
            s->local_agg_min_auto ? ", KVS_LOCAL_AGG_MIN's default here" : "");
    return 0;
fail:
    s->grp = g;
    wrk_grp_stop(s);
    return rc;
}

bool wrk_grp_on(const kvs_store *s)
{
    return s->grp != NULL;
}

void wrk_grp_forget(kvs_store *s)
{
    if (s->grp) {
        atomic_fetch_add(&s->grp->epoch, 1);
        wake_member(s->grp->shm, s->grp->me);
    }
}

/* ---- the thread ---- */

static int owner(const wrk_grp *g, uint64_t key, uint64_t chunk)
{
    return (int)((key + chunk) % (uint64_t)g->size);
}

static grp_ent *ent_of(wrk_grp *g, int m, uint32_t slot)
{
    return &g->shm->m[m].ent[slot];
}

/* How many of producer p's pulls consumer c has read. */
static _Atomic uint64_t *pread_of(wrk_grp *g, int c, int p)
{
    _Atomic uint64_t *base = (_Atomic uint64_t *)(void *)&g->shm->m[g->size];
    return &base[(size_t)c * (size_t)g->size + (size_t)p];
}

/* An owner gives up on one chunk of e: the first error is kept. */
static void ent_fail(grp_ent *e, int err, const char *text)
{
    int32_t zero = 0;
    if (atomic_compare_exchange_strong(&e->err, &zero, err))
        snprintf(e->errtext, sizeof e->errtext, "%s", text);
    atomic_fetch_sub(&e->left, 1);
}

/* Member m's slot for (key, round), or -1.  A slot may be recycled while
 * we look: a match counts only if its post number did not change around
 * the reads of key and round (post numbers are never reused). */
static int find_slot(wrk_grp *g, int m, uint64_t key, uint64_t round)
{
    grp_member *mb = &g->shm->m[m];
    uint32_t start = g->hints[m];
    for (uint32_t k = 0; k < GRP_SLOTS; k++) {
        uint32_t i = (start + k) % GRP_SLOTS;
        grp_ent *e = &mb->ent[i];
        uint64_t s1 = atomic_load_explicit(&e->seq, memory_order_acquire);
        if (s1 == 0 || e->key != key || e->round != round || e->type == WRK_OP_PULL)
            continue;
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&e->seq, memory_order_acquire) != s1)
            continue;
        g->hints[m] = (i + 1) % GRP_SLOTS; /* members post in much the same order */
        return (int)i;
    }
    return -1;
}

static void chunk_done_cb(kvs_store *s, wrk_op *op)
{
    grp_chunk *c = op->owner;
    wrk_grp *g = c->g;
    (void)s;
    pthread_mutex_lock(&g->mu);
    bool first = g->done == NULL; /* else the thread has yet to take the list */
    c->next = g->done;
    g->done = c;
    pthread_mutex_unlock(&g->mu);
    if (first)
        wake_member(g->shm, g->me);
}

static const wrk_op_ops chunk_ops = {.done = chunk_done_cb};

/* Give up the chunks of it we own from it->cnext on, for every member. */
static void item_fail_owned(wrk_grp *g, grp_item *it, int err, const char *text)
{
    for (uint64_t c = it->cnext; c < it->nchunks; c++) {
        if (owner(g, it->k.key, c) != g->me)
            continue;
        for (int m = 0; m < g->size; m++)
            if (it->mslot[m] >= 0)
                ent_fail(ent_of(g, m, (uint32_t)it->mslot[m]), err, text);
    }
    it->cnext = it->nchunks;
    it->started = true;
}

/* A buffer for a sum of bytes: a spare one that fits, or a new one. */
static uint8_t *sumbuf_get(wrk_grp *g, size_t bytes, size_t *cap)
{
    size_t want = bytes ? (bytes + 63) & ~(size_t)63 : 64;
    for (int i = 0; i < g->nspare; i++)
        if (g->spare_cap[i] >= want) {
            uint8_t *b = g->spare[i];
            *cap = g->spare_cap[i];
            g->nspare--;
            g->spare[i] = g->spare[g->nspare];
            g->spare_cap[i] = g->spare_cap[g->nspare];
            return b;
        }
    if (g->nspare > 0) /* none fits: give one back before taking more */
        free(g->spare[--g->nspare]);
    *cap = want;
    return aligned_alloc(64, want);
}

/* buf (of cap bytes, or NULL) is free again. */
static void sumbuf_put(wrk_grp *g, uint8_t *buf, size_t cap)
{
    if (buf == NULL)
        return;
    if (g->nspare < GRP_SPARE) {
        g->spare[g->nspare] = buf;
        g->spare_cap[g->nspare++] = cap;
    } else {
        free(buf);
    }
}

static int stage_room(wrk_grp *g, size_t bytes)
{
    if (bytes <= g->stage_cap)
        return 0;
    for (int m = 0; m < g->size; m++) {
        if (m == g->me)
            continue; /* our own data is summed where it is */
        free(g->stage[m]);
        g->stage[m] = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
        if (g->stage[m] == NULL) {
            g->stage_cap = 0;
            return KVS_ENOMEM;
        }
    }
    g->stage_cap = bytes;
    return 0;
}

/* Member m's part of chunk at off (bytes) of it, for the comm layer: its
 * device memory, or its host memory read into our stage (dev: an entry
 * whose data is on a device).  0 or KVS_EPEERDEAD with text. */
static int dev_part(wrk_grp *g, grp_item *it, int m, size_t off, size_t bytes,
                    wrk_dev_part *out, char *text, size_t tlen)
{
    kvs_store *s = g->s;
    grp_ent *e = ent_of(g, m, (uint32_t)it->mslot[m]);
    int rc;
    if (m == g->me) {
        *out = it->dv.on ? (wrk_dev_part){WRK_DEVP_OWN, 0, NULL, it->dv.p}
                         : (wrk_dev_part){WRK_DEVP_HOST, 0, NULL, (void *)(it->k.src + off)};
        return 0;
    }
    if (e->dev & GRP_DEV) {
        *out = (wrk_dev_part){WRK_DEVP_PEER, s->peers[m].pid, &e->h, NULL};
        return 0;
    }
    if ((rc = peer_read(s->peers[m].pid, g->stage[m], e->src + off, bytes)) != 0) {
        snprintf(text, tlen, "local group: cannot read %zu bytes of key %llu from worker %d "
                 "(local rank %d, pid %d): %s", bytes, (unsigned long long)it->k.key,
                 (s->peers[m].id - 9) / 2, m, s->peers[m].pid, strerror(rc));
        return KVS_EPEERDEAD;
    }
    *out = (wrk_dev_part){WRK_DEVP_HOST, 0, NULL, g->stage[m]};
    return 0;
}

/* start_chunk where a member's data is in device memory: the sum is made
 * on our device (ours, else device 0) from the chunk of members mem[0..nm)
 * (mem NULL: every member, in order), and only the sum comes to host
 * memory (buf) to be pushed; buf NULL: it replaces our own chunk (mem[0]
 * is us; trees). */
static int sum_on_device(wrk_grp *g, grp_item *it, const int *mem, int nm, size_t off,
                         size_t bytes, uint8_t *buf, char *text, size_t tlen)
{
    kvs_store *s = g->s;
    wrk_dev_part in[DEV_SUM_MAX];
    int rc;
    if (mem == NULL) {
        for (int m = 0; m < g->size; m++)
            g->tmem[m] = m;
        mem = g->tmem;
        nm = g->size;
    }
    if (s->comm == NULL || s->grp_devops == NULL) {
        snprintf(text, tlen, "local group: key %llu: another member hands its sum in device "
                 "memory, but this worker's store has no devices (every member must use the "
                 "same store type)", (unsigned long long)it->k.key);
        return KVS_ECONFIG;
    }
    if (stage_room(g, bytes) != 0) {
        snprintf(text, tlen, "out of memory");
        return KVS_ENOMEM;
    }
    for (int i = 0; i < nm; i++)
        if ((rc = dev_part(g, it, mem[i], off, bytes, &in[i], text, tlen)) != 0)
            return rc;
    if ((rc = s->grp_devops->sum(s->comm, it->dv.on ? it->dv.dev : -1, it->k.dtype, in, nm,
                                 off, bytes, buf)) == 0)
        return 0;
    snprintf(text, tlen, "local group: summing key %llu on the device: %s",
             (unsigned long long)it->k.key, kvs_last_error());
    for (int i = 0; i < nm; i++) /* a member that exited: as a failed read */
        if (in[i].kind == WRK_DEVP_PEER && kill(in[i].pid, 0) != 0 && errno == ESRCH) {
            int m = mem[i];
            snprintf(text, tlen, "local group: cannot read key %llu from worker %d (local "
                     "rank %d, pid %d): it exited", (unsigned long long)it->k.key,
                     (s->peers[m].id - 9) / 2, m, in[i].pid);
            return KVS_EPEERDEAD;
        }
    return rc;
}

/* Sum chunk c of it over the group into a new buffer and send it: over
 * members mem[0..nm) (trees: us and our children there), mem NULL: all. */
static int start_chunk(wrk_grp *g, grp_item *it, uint64_t c, const int *mem, int nm,
                       char *text, size_t tlen)
{
    kvs_store *s = g->s;
    const wrk_part *p = &it->parts[c];
    size_t esz = kvs_dtype_size(it->k.dtype), bytes = (size_t)p->count * esz;
    size_t off = (size_t)p->offset * esz;
    const void **srcs = g->srcs;
    int rc;
    bool wants = false;
    if (stage_room(g, bytes < GRP_SUM_PIECE ? bytes : GRP_SUM_PIECE) != 0) {
        snprintf(text, tlen, "out of memory");
        return KVS_ENOMEM;
    }
    size_t cap = 0;
    grp_chunk *ch = calloc(1, sizeof *ch);
    uint8_t *buf = sumbuf_get(g, bytes, &cap);
    if (ch == NULL || buf == NULL) {
        free(ch);
        sumbuf_put(g, buf, cap);
        snprintf(text, tlen, "out of memory");
        return KVS_ENOMEM;
    }
    bool dev = false;
    for (int m = 0; m < g->size; m++) {
        grp_ent *e = ent_of(g, m, (uint32_t)it->mslot[m]);
        wants = wants || e->dst != 0 || (e->dev & GRP_DEV_WANT);
        dev = dev || (e->dev & GRP_DEV);
    }
    if (dev && (rc = sum_on_device(g, it, mem, nm, off, bytes, buf, text, tlen)) != 0) {
        free(ch);
        sumbuf_put(g, buf, cap);
        return rc;
    }
    for (size_t at = 0; at < bytes && !dev; at += GRP_SUM_PIECE) {
        size_t pb = bytes - at < GRP_SUM_PIECE ? bytes - at : GRP_SUM_PIECE;
        for (int m = 0; m < g->size; m++) {
            grp_ent *e = ent_of(g, m, (uint32_t)it->mslot[m]);
            if (m == g->me) {
                srcs[m] = it->k.src + off + at;
                continue;
            }
            if ((rc = peer_read(s->peers[m].pid, g->stage[m], e->src + off + at, pb)) != 0) {
                snprintf(text, tlen, "local group: cannot read %zu bytes of key %llu from "
                         "worker %d (local rank %d, pid %d): %s", pb,
                         (unsigned long long)it->k.key, (s->peers[m].id - 9) / 2, m,
                         s->peers[m].pid, strerror(rc));
                free(ch);
                sumbuf_put(g, buf, cap);
                return KVS_EPEERDEAD;
            }
            srcs[m] = g->stage[m];
        }
        if ((rc = red_sum(s->pool, it->k.dtype, buf + at, srcs, g->size, pb / esz)) != 0) {
            snprintf(text, tlen, "local group: summing key %llu failed",
                     (unsigned long long)it->k.key);
            free(ch);
            sumbuf_put(g, buf, cap);
            return rc;
        }
    }
    *ch = (grp_chunk){.g = g, .it = it, .part = *p, .buf = buf, .cap = cap, .wants = wants,
                      .dev = dev};
    it->inflight++;
    g->inflight_bytes += bytes;
    rc = wrk_submit_chunk(s, wants ? WRK_OP_PUSHPULL : WRK_OP_PUSH, &it->k, p,
                          (uint16_t)g->size, buf, buf, it->priority, &chunk_ops, ch, &ch->op);
    if (rc) {
        it->inflight--;
        g->inflight_bytes -= bytes;
        snprintf(text, tlen, "%s", kvs_last_error());
        free(ch);
        sumbuf_put(g, buf, cap);
    }
    return rc;
}

/* Whether our chunk c of it waits for our sums in flight: when the group
 * is the whole job, at most DP_GROUP_INFLIGHT bytes of them (always one
 * chunk); each holds a buffer, and a pushpull's reply on the sockets a
 * message of its size.  Each push stands for every worker, so each chunk's
 * round completes on it alone and the rest start as they finish.  With
 * workers on other hosts a chunk's answer waits for theirs: holding later
 * chunks back could deadlock with a host that pushes the same keys in
 * another order, so there every owned chunk starts. */
static bool held_back(const wrk_grp *g, const grp_item *it, uint64_t c)
{
    uint64_t cb = it->parts[c].count * kvs_dtype_size(it->k.dtype);
    return g->size == g->s->num_workers && g->inflight_bytes > 0 &&
           g->inflight_bytes + cb > DP_GROUP_INFLIGHT;
}

/* ---- trees across the members' devices (MXNET_KVSTORE_USETREE=1) ----
 * A round whose every part is in device memory, under the same host
 * topology at every member, is summed along the planned trees (the comm
 * layer's devops plan, one tree per root over the members' devices): chunk
 * c's tree is the one rooted at its owner.  Each member takes the chunks in
 * order; for each it waits until its children there have the sums of their
 * subtrees (their tpart passed c), then, if it owns the chunk, sums its own
 * part and the children's and pushes as a flat owner does; else it adds
 * the children's into its own part (in place: that buffer is the round's
 * scratch until the value comes back) and passes c in its tpart, which its
 * parent waits for.  The value goes back to every member from the owner,
 * as without trees.  Every member decides from the same entries, so all
 * of them take the trees or none does. */

/* We give up on it: our entry says so to those who wait for our sums, and
 * our owned chunks from it->cnext on fail for every member. */
static void tree_fail(wrk_grp *g, grp_item *it, int err, const char *text)
{
    grp_ent *mine = ent_of(g, g->me, it->slot);
    int32_t zero = 0;
    if (atomic_compare_exchange_strong(&mine->err, &zero, err))
        snprintf(mine->errtext, sizeof mine->errtext, "%s", text);
    atomic_store_explicit(&mine->tpart, GRP_TPART_FAILED, memory_order_release);
    item_fail_owned(g, it, err, text);
    gen_bump(g->shm);
}

/* Whether it's round goes along trees (it->tpar set) or not; everyone has
 * posted it.  0, or an error with text (no plan: every member fails alike). */
static int tree_decide(wrk_grp *g, grp_item *it, char *text, size_t tlen)
{
    kvs_store *s = g->s;
    int n = g->size;
    uint64_t h = 0;
    it->tdecided = true;
    if (n < 3 || s->comm == NULL || s->grp_devops == NULL)
        return 0; /* (two members: the tree is the flat sum) */
    for (int m = 0; m < n; m++) {
        grp_ent *e = ent_of(g, m, (uint32_t)it->mslot[m]);
        if (!(e->dev & GRP_DEV) || e->thash == 0)
            return 0;
        if (m > 0 && e->thash != h) {
            if (!g->twarned)
                LOG(LOG_WARN, s->who, "group", "MXNET_KVSTORE_USETREE=1: local ranks 0 and %d "
                    "see the host's devices differently (KVS_TOPOLOGY, CUDA_VISIBLE_DEVICES): "
                    "sums across the group go to each chunk's owner at once", m);
            g->twarned = true;
            return 0;
        }
        h = e->thash;
        g->tord[m] = e->tord;
    }
    it->tpar = malloc(sizeof(int) * (size_t)n * (size_t)n);
    if (it->tpar == NULL) {
        snprintf(text, tlen, "out of memory");
        return KVS_ENOMEM;
    }
    int rc = s->grp_devops->plan(s->comm, n, g->tord, it->tpar);
    if (rc) {
        free(it->tpar);
        it->tpar = NULL;
        snprintf(text, tlen, "%s", kvs_last_error());
    }
    return rc;
}

/* item_try along the trees.  True if something happened. */
static bool tree_walk(wrk_grp *g, grp_item *it)
{
    kvs_store *s = g->s;
    int n = g->size;
    grp_ent *mine = ent_of(g, g->me, it->slot);
    size_t esz = kvs_dtype_size(it->k.dtype);
    char text[GRP_TEXT];
    bool any = false;
    for (; it->cnext < it->nchunks; it->cnext++) {
        uint64_t c = it->cnext;
        int root = owner(g, it->k.key, c), nm = 0, rc = 0;
        const int *par = it->tpar + (size_t)root * (size_t)n;
        g->tmem[nm++] = g->me;
        for (int v = 0; v < n; v++) {
            if (v == g->me || par[v] != g->me)
                continue;
            grp_ent *e = ent_of(g, v, (uint32_t)it->mslot[v]);
            uint64_t tp = atomic_load_explicit(&e->tpart, memory_order_acquire);
            if (tp == GRP_TPART_FAILED) {
                snprintf(text, sizeof text, "%.*s", (int)strnlen(e->errtext, GRP_TEXT - 1),
                         e->errtext);
                int err = atomic_load(&e->err);
                tree_fail(g, it, err ? err : KVS_EDEVICE, text);
                return true;
            }
            if (tp <= c && atomic_load(&g->shm->m[v].left)) {
                snprintf(text, sizeof text, "local group: worker %d (local rank %d, pid %d) "
                         "left the job (kvs_close) before summing its part of key %llu",
                         (s->peers[v].id - 9) / 2, v, s->peers[v].pid,
                         (unsigned long long)it->k.key);
                tree_fail(g, it, KVS_EPEERDEAD, text);
                return true;
            }
            if (tp <= c)
                return any; /* not yet */
            g->tmem[nm++] = v;
        }
        size_t bytes = (size_t)it->parts[c].count * esz, off = (size_t)it->parts[c].offset * esz;
        if (root == g->me) {
            if (held_back(g, it, c))
                return any;
            rc = start_chunk(g, it, c, g->tmem, nm, text, sizeof text);
        } else if (nm > 1) {
            rc = sum_on_device(g, it, g->tmem, nm, off, bytes, NULL, text, sizeof text);
        }
        if (rc) {
            tree_fail(g, it, rc, text);
            return true;
        }
        atomic_store_explicit(&mine->tpart, c + 1, memory_order_release);
        any = true;
    }
    it->started = true;
    return any;
}

static bool tree_try(wrk_grp *g, grp_item *it)
{
    bool any = tree_walk(g, it);
    if (any)
        gen_bump(g->shm); /* our tpart moved: our parents may go on */
    return any;
}

/* Start what we can of it's owned chunks.  True if something happened. */
static bool item_try(wrk_grp *g, grp_item *it)
{
    char text[GRP_TEXT];
    bool any = false;
    for (int m = 0; m < g->size; m++) {
        if (it->mslot[m] >= 0)
            continue;
        if (m == g->me) {
            it->mslot[m] = (int)it->slot;
            continue;
        }
        uint64_t posted = atomic_load(&g->shm->m[m].posted);
        if (posted == it->mseen[m])
            return false; /* nothing new from m since we last looked */
        it->mslot[m] = find_slot(g, m, it->k.key, it->k.round);
        if (it->mslot[m] < 0) {
            it->mseen[m] = posted;
            return false; /* not posted yet */
        }
    }
    /* everyone posted; a member's earlier pulls of the key must be answered
     * first, or this round could complete before they reach the servers
     * and they would get its value instead of the one they ask for */
    for (int m = 0; m < g->size; m++)
        if (atomic_load(&ent_of(g, m, (uint32_t)it->mslot[m])->hold))
            return false;
    /* same shape? */
    for (int m = 0; m < g->size && it->cnext == 0; m++) {
        grp_ent *e = ent_of(g, m, (uint32_t)it->mslot[m]);
        if (e->count != it->k.count || e->dtype != (uint32_t)it->k.dtype) {
            snprintf(text, sizeof text, "local group: key %llu round %llu has %llu %s elements "
                     "at local rank %d but %llu %s at local rank %d",
                     (unsigned long long)it->k.key, (unsigned long long)it->k.round,
                     (unsigned long long)e->count, kvs_dtype_name((kvs_dtype)e->dtype), m,
                     (unsigned long long)it->k.count, kvs_dtype_name(it->k.dtype), g->me);
            item_fail_owned(g, it, KVS_ESHAPE, text);
            gen_bump(g->shm);
            return true;
        }
    }
    if (!it->tdecided) {
        int rc = tree_decide(g, it, text, sizeof text);
        if (rc) {
            tree_fail(g, it, rc, text);
            return true;
        }
    }
    if (it->tpar)
        return tree_try(g, it);
    for (; it->cnext < it->nchunks; it->cnext++) {
        uint64_t c = it->cnext;
        if (owner(g, it->k.key, c) != g->me)
            continue;
        if (held_back(g, it, c))
            return any;
        int rc = start_chunk(g, it, c, NULL, 0, text, sizeof text);
        any = true;
        if (rc) {
            item_fail_owned(g, it, rc, text);
            gen_bump(g->shm); /* the members' entries failed */
            break;
        }
    }
    it->started = true;
    return any;
}

/* ---- plain pulls through the group ----
 * A member posts its pull of a key like a push, with no data, and logs it
 * in its pull log.  Every member reads every pull log; for each chunk of
 * the key that it owns it pulls the chunk once for the group (a fetch) and
 * writes the value into the output of every member whose pull of the same
 * key and round it has read: those waiting when the answer comes, and
 * later ones while the fetch is kept (GRP_PULL_KEEP).  Nobody waits for
 * another member's pull, so members may pull different keys, or at
 * different times: a pull that finds no fetch kept starts a new one.  A
 * member that pulls a round-r value has not pushed round r yet, and its
 * group holds that push until its pulls of the key are answered: so round r
 * cannot complete while any member's pull of round r is open, and a kept
 * round-r value is the server's current one whenever it is given. */

/* (thread) Mark chunk c of member m's pull entry e accounted (the member's
 * flag first), with an error or not. */
static void pull_account(wrk_grp *g, int m, grp_ent *e, uint64_t c, int err, const char *text)
{
    static const uint8_t one = 1;
    int werr = 0;
    if (m == g->me)
        __atomic_store_n((uint8_t *)(uintptr_t)e->done + c, one, __ATOMIC_RELEASE);
    else
        werr = peer_write(g->s->peers[m].pid, e->done + c, &one, 1);
    if (err == 0 && werr != 0) {
        err = KVS_EPEERDEAD;
        text = "local group: a member's memory cannot be written (it died)";
    }
    if (err)
        ent_fail(e, err, text);
    else
        atomic_fetch_sub(&e->left, 1);
}

/* (thread) Give member m's pull (entry slot) the value of f (ready). */
static void pull_give(wrk_grp *g, grp_fetch *f, int m, uint32_t slot)
{
    kvs_store *s = g->s;
    grp_ent *e = ent_of(g, m, slot);
    size_t esz = kvs_dtype_size(f->dtype), bytes = (size_t)f->part.count * esz;
    size_t off = (size_t)f->part.offset * esz;
    const uint8_t *src = f->buf ? f->buf : f->direct;
    uint8_t *dst = (uint8_t *)(uintptr_t)e->dst + off;
    int werr = 0;
    if (bytes && m == g->me && dst != src)
        memcpy(dst, src, bytes);
    else if (bytes && m != g->me)
        werr = peer_write(s->peers[m].pid, e->dst + off, src, bytes);
    if (werr) {
        char t[GRP_TEXT];
        snprintf(t, sizeof t, "local group: cannot write key %llu into worker %d (local rank "
                 "%d, pid %d): %s", (unsigned long long)f->key, (s->peers[m].id - 9) / 2, m,
                 s->peers[m].pid, strerror(werr));
        pull_account(g, m, e, f->chunk, KVS_EPEERDEAD, t);
    } else {
        pull_account(g, m, e, f->chunk, 0, NULL);
    }
    f->served++;
}

/* f, the first of its key's chain, leaves it.  (Out of memory, the rest of
 * the chain is not found any more: later pulls of the key fetch anew.) */
static void fetch_unhead(wrk_grp *g, grp_fetch *f)
{
    hmap_del(&g->fetch_keys, f->key);
    if (f->knext)
        (void)hmap_put(&g->fetch_keys, f->key, f->knext);
}

static void fetch_free(wrk_grp *g, grp_fetch *f)
{
    grp_fetch *h = hmap_get(&g->fetch_keys, f->key);
    if (h == f)
        fetch_unhead(g, f);
    else
        for (; h; h = h->knext)
            if (h->knext == f) {
                h->knext = f->knext;
                break;
            }
    if (f->prev)
        f->prev->next = f->next;
    else
        g->fetch_head = f->next;
    if (f->next)
        f->next->prev = f->prev;
    else
        g->fetch_tail = f->prev;
    if (f->buf)
        g->kept -= f->cap;
    sumbuf_put(g, f->buf, f->cap);
    free(f->w);
    free(f);
}

/* (thread) Drop what no pull will take any more: a fetch every member took,
 * then the oldest kept ones until want more bytes fit in GRP_PULL_KEEP.
 * True if they fit. */
static bool fetch_trim(wrk_grp *g, grp_fetch *f, size_t want)
{
    if (f && f->ready && f->served >= g->size)
        fetch_free(g, f);
    for (grp_fetch *x = g->fetch_head; x && g->kept + want > GRP_PULL_KEEP;) {
        grp_fetch *n = x->next;
        if (x->ready)
            fetch_free(g, x);
        x = n;
    }
    return g->kept == 0 || g->kept + want <= GRP_PULL_KEEP; /* (one always fits) */
}

/* (thread) No buffer for chunk c of member m's pull (entry e): it pulls the
 * chunk itself (pull_fallback). */
static void pull_hand_back(wrk_grp *g, int m, grp_ent *e, uint64_t c)
{
    static const uint8_t three = 3;
    if (m == g->me)
        __atomic_store_n((uint8_t *)(uintptr_t)e->done + c, three, __ATOMIC_RELEASE);
    else if (peer_write(g->s->peers[m].pid, e->done + c, &three, 1) != 0)
        return; /* it died: the job fails */
    atomic_fetch_add(&g->shm->m[m].handed, 1);
    wake_member(g->shm, m);
}

static int fetch_wait(grp_fetch *f, int m, uint32_t slot)
{
    if (f->nw == f->wcap) {
        int cap = f->wcap ? 2 * f->wcap : 4;
        grp_waiter *w = realloc(f->w, (size_t)cap * sizeof *w);
        if (w == NULL)
            return KVS_ENOMEM;
        f->w = w;
        f->wcap = cap;
    }
    f->w[f->nw++] = (grp_waiter){m, slot};
    return 0;
}

/* (thread) Chunk c (part p) of member m's pull entry e, which we own. */
static void pull_chunk(wrk_grp *g, int m, uint32_t slot, const grp_ent *e, uint64_t c,
                       const wrk_part *p)
{
    kvs_store *s = g->s;
    grp_ent *pe = ent_of(g, m, slot);
    grp_fetch *f = NULL;
    char text[GRP_TEXT];
    int rc;
    uint64_t epoch = atomic_load(&g->epoch);
    if (epoch != g->swept) { /* an init or a load: no value kept before it is given */
        for (grp_fetch *x = g->fetch_head; x;) {
            grp_fetch *n = x->next;
            if (x->ready && x->epoch != epoch)
                fetch_free(g, x);
            x = n;
        }
        g->swept = epoch;
    }
    for (grp_fetch *x = hmap_get(&g->fetch_keys, e->key); x; x = x->knext) {
        if (x->chunk != c || (x->ready && x->epoch != epoch))
            continue;
        if (x->round == e->round && x->count == e->count && x->dtype == (kvs_dtype)e->dtype) {
            f = x;
            break;
        }
    }
    if (f && f->ready) {
        pull_give(g, f, m, slot);
        fetch_trim(g, f, 0);
        return;
    }
    if (f) {
        if (fetch_wait(f, m, slot) != 0)
            pull_account(g, m, pe, c, KVS_ENOMEM, "out of memory");
        return;
    }
    /* a kept value of an older round of the chunk is nobody's any more */
    for (grp_fetch *x = hmap_get(&g->fetch_keys, e->key); x;) {
        grp_fetch *n = x->knext;
        if (x->ready && x->chunk == c && x->round <= e->round)
            fetch_free(g, x);
        x = n;
    }
    size_t esz = kvs_dtype_size((kvs_dtype)e->dtype);
    size_t want = ((size_t)p->count * esz + 63) & ~(size_t)63;
    if (m != g->me && !fetch_trim(g, NULL, want)) {
        pull_hand_back(g, m, pe, c);
        return;
    }
    f = calloc(1, sizeof *f);
    grp_chunk *ch = calloc(1, sizeof *ch);
    if (f && m == g->me) { /* our own pull: straight into its output */
        f->direct = (uint8_t *)(uintptr_t)pe->dst + (size_t)p->offset * esz;
        f->dslot = slot;
    } else if (f) {
        f->buf = sumbuf_get(g, (size_t)p->count * esz, &f->cap);
        if (f->buf)
            g->kept += f->cap;
    }
    if (f)
        f->knext = hmap_get(&g->fetch_keys, e->key);
    if (f == NULL || ch == NULL || (f->buf == NULL && f->direct == NULL) ||
        fetch_wait(f, m, slot) != 0 ||
        hmap_put(&g->fetch_keys, e->key, f) != 0) {
        if (f && f->buf)
            g->kept -= f->cap;
        if (f)
            sumbuf_put(g, f->buf, f->cap);
        if (f)
            free(f->w);
        free(f);
        free(ch);
        pull_account(g, m, pe, c, KVS_ENOMEM, "out of memory");
        return;
    }
    f->key = e->key;
    f->round = e->round;
    f->count = e->count;
    f->dtype = (kvs_dtype)e->dtype;
    f->chunk = c;
    f->epoch = epoch;
    f->part = *p;
    *ch = (grp_chunk){.g = g, .f = f, .part = *p, .buf = f->buf, .cap = f->cap};
    wrk_held k = {.key = e->key, .round = e->round, .count = e->count,
                  .dtype = (kvs_dtype)e->dtype};
    rc = wrk_submit_chunk(s, WRK_OP_PULL, &k, p, 0, NULL, f->buf ? f->buf : f->direct,
                          e->priority, &chunk_ops, ch, &ch->op);
    if (rc) {
        snprintf(text, sizeof text, "%s", kvs_last_error());
        fetch_unhead(g, f);
        if (f->buf)
            g->kept -= f->cap;
        sumbuf_put(g, f->buf, f->cap);
        free(f->w);
        free(f);
        free(ch);
        pull_account(g, m, pe, c, rc, text);
        return;
    }
    f->prev = g->fetch_tail;
    if (g->fetch_tail)
        g->fetch_tail->next = f;
    else
        g->fetch_head = f;
    g->fetch_tail = f;
    g->nfetching++;
}

/* (thread) Member m's pull posted as seq in slot: serve the chunks we own. */
static void pull_take(wrk_grp *g, int m, uint32_t slot, uint64_t seq)
{
    grp_ent *src = ent_of(g, m, slot), e;
    if (atomic_load_explicit(&src->seq, memory_order_acquire) != seq)
        return; /* done already: it had no chunk of ours */
    e.key = src->key;
    e.round = src->round;
    e.count = src->count;
    e.dtype = src->dtype;
    e.type = src->type;
    e.priority = src->priority;
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&src->seq, memory_order_acquire) != seq || e.type != WRK_OP_PULL)
        return;
    size_t esz = kvs_dtype_size((kvs_dtype)e.dtype);
    uint64_t nch = wrk_route_chunks(&g->s->routing, e.key, e.count, esz, NULL);
    if (nch > g->npparts) {
        wrk_part *np = realloc(g->pparts, nch * sizeof *np);
        if (np == NULL) {
            for (uint64_t c = 0; c < nch; c++)
                if (owner(g, e.key, c) == g->me)
                    pull_account(g, m, src, c, KVS_ENOMEM, "out of memory");
            return;
        }
        g->pparts = np;
        g->npparts = nch;
    }
    wrk_route_chunks(&g->s->routing, e.key, e.count, esz, g->pparts);
    for (uint64_t c = 0; c < nch; c++)
        if (owner(g, e.key, c) == g->me)
            pull_chunk(g, m, slot, &e, c, &g->pparts[c]);
}

/* (thread) Read the pulls every member posted since we last looked.  True if
 * there were any. */
static bool pulls_read(wrk_grp *g)
{
    bool any = false;
    for (int i = 0; i < g->size; i++) {
        int m = (g->me + i) % g->size; /* ours first: a fetch for our own pull needs no buffer */
        grp_member *mb = &g->shm->m[m];
        uint64_t n = atomic_load_explicit(&mb->pposted, memory_order_acquire);
        while (g->pseen[m] < n) {
            uint64_t v = mb->plog[g->pseen[m] % GRP_SLOTS];
            g->pseen[m]++;
            atomic_store_explicit(pread_of(g, g->me, m), g->pseen[m], memory_order_release);
            pull_take(g, m, (uint32_t)(v & (GRP_SLOTS - 1)), v >> GRP_SLOT_BITS);
            any = true;
        }
    }
    return any;
}

/* (thread) A fetch was answered: give it to its waiters; keep it for later
 * pulls of its round. */
static void fetch_finish(wrk_grp *g, grp_chunk *ch)
{
    grp_fetch *f = ch->f;
    int err = wrk_wait_op(g->s, ch->op);
    char text[GRP_TEXT];
    int mine = -1;
    if (err)
        snprintf(text, sizeof text, "%s", kvs_last_error());
    for (int i = 0; i < f->nw; i++) {
        if (f->direct && f->w[i].m == g->me && f->w[i].slot == f->dslot)
            mine = i; /* last: its output is the others' source until then */
        else if (err)
            pull_account(g, f->w[i].m, ent_of(g, f->w[i].m, f->w[i].slot), f->chunk, err,
                         text);
        else
            pull_give(g, f, f->w[i].m, f->w[i].slot);
    }
    size_t bytes = (size_t)f->part.count * kvs_dtype_size(f->dtype);
    if (!err && f->direct && f->served + 1 < g->size &&
        fetch_trim(g, NULL, (bytes + 63) & ~(size_t)63)) { /* a copy for late members */
        f->buf = sumbuf_get(g, bytes, &f->cap);
        if (f->buf && bytes)
            memcpy(f->buf, f->direct, bytes);
        if (f->buf)
            g->kept += f->cap;
    }
    if (mine >= 0 && err)
        pull_account(g, g->me, ent_of(g, g->me, f->dslot), f->chunk, err, text);
    else if (mine >= 0)
        pull_give(g, f, g->me, f->dslot);
    f->direct = NULL; /* (its output is the user's again) */
    f->nw = 0;
    g->nfetching--;
    free(ch);
    if (err || f->buf == NULL) {
        fetch_free(g, f);
        return;
    }
    f->ready = true;
    if (f->epoch != atomic_load(&g->epoch)) {
        fetch_free(g, f); /* a value from before an init or a load of ours */
        return;
    }
    fetch_trim(g, f, 0);
}

/* (thread) Pull item it's chunks owned by members that are gone (they left
 * the group before they served them) ourselves. */
static bool pull_fallback(wrk_grp *g, grp_item *it)
{
    kvs_store *s = g->s;
    grp_ent *mine = ent_of(g, g->me, it->slot);
    bool any = false;
    size_t esz = kvs_dtype_size(it->k.dtype);
    for (uint64_t c = 0; c < it->nchunks; c++) {
        int o = owner(g, it->k.key, c);
        uint8_t cd = __atomic_load_n(&it->cdone[c], __ATOMIC_ACQUIRE);
        if (cd != 3 && (cd != 0 || !atomic_load(&g->shm->m[o].gone)))
            continue; /* served, or its owner serves it */
        grp_chunk *ch = calloc(1, sizeof *ch);
        int rc = KVS_ENOMEM;
        it->cdone[c] = 2;
        any = true;
        if (!g->fell_back && cd == 0)
            LOG(LOG_INFO, s->who, "group", "worker %d (local rank %d) left the group: pulling "
                "the chunks it owned directly", (s->peers[o].id - 9) / 2, o);
        g->fell_back = g->fell_back || cd == 0;
        if (ch) {
            *ch = (grp_chunk){.g = g, .it = it, .part = it->parts[c], .fallback = true, .c = c};
            rc = wrk_submit_chunk(s, WRK_OP_PULL, &it->k, &it->parts[c], 0, NULL,
                                  it->k.dst + it->parts[c].offset * esz, it->priority,
                                  &chunk_ops, ch, &ch->op);
        }
        if (rc) {
            free(ch);
            ent_fail(mine, rc, rc == KVS_ENOMEM ? "out of memory" : kvs_last_error());
            continue;
        }
        it->inflight++;
    }
    return any;
}

static void fallback_finish(wrk_grp *g, grp_chunk *ch)
{
    grp_item *it = ch->it;
    grp_ent *mine = ent_of(g, g->me, it->slot);
    int err = wrk_wait_op(g->s, ch->op);
    if (err)
        ent_fail(mine, err, kvs_last_error());
    else
        atomic_fetch_sub(&mine->left, 1);
    it->cdone[ch->c] = 1;
    it->inflight--;
    free(ch);
}

/* A chunk of solo item it failed: keep the first error.  Any thread
 * without mu. */
static void solo_fail(wrk_grp *g, grp_item *it, int err, const char *text)
{
    pthread_mutex_lock(&g->mu);
    if (it->solo_err == 0) {
        it->solo_err = err;
        snprintf(it->solo_text, sizeof it->solo_text, "%s", text);
    }
    pthread_mutex_unlock(&g->mu);
}

/* A chunk op finished: give its value to every member that wants it and
 * count the chunk done on every member's entry. */
static void chunk_finish(wrk_grp *g, grp_chunk *ch)
{
    kvs_store *s = g->s;
    grp_item *it = ch->it;
    if (ch->f) {
        fetch_finish(g, ch);
        gen_bump(g->shm);
        return;
    }
    if (ch->fallback) {
        fallback_finish(g, ch);
        gen_bump(g->shm);
        return;
    }
    if (ch->solo) {
        int serr = wrk_wait_op(s, ch->op);
        if (serr)
            solo_fail(g, it, serr, kvs_last_error());
        atomic_fetch_sub(&it->solo_left, 1);
        free(ch);
        return;
    }
    int err = wrk_wait_op(s, ch->op); /* done: collects and frees it */
    char text[GRP_TEXT];
    size_t esz = kvs_dtype_size(it->k.dtype), bytes = (size_t)ch->part.count * esz;
    size_t off = (size_t)ch->part.offset * esz;
    if (err)
        snprintf(text, sizeof text, "%s", kvs_last_error());
    int derr = 0; /* the copies into the members' device memory */
    if (err == 0 && ch->dev && ch->wants) {
        wrk_dev_part to[DEV_SUM_MAX];
        for (int m = 0; m < g->size; m++) {
            grp_ent *e = ent_of(g, m, (uint32_t)it->mslot[m]);
            to[m] = (wrk_dev_part){0};
            if (!(e->dev & GRP_DEV_WANT))
                continue;
            to[m] = m == g->me ? (wrk_dev_part){WRK_DEVP_OWN, 0, NULL, it->dv.p}
                               : (wrk_dev_part){WRK_DEVP_PEER, s->peers[m].pid, &e->h, NULL};
        }
        if ((derr = s->grp_devops->put(s->comm, it->dv.on ? it->dv.dev : -1, ch->buf, off,
                                       bytes, to, g->size)) != 0)
            snprintf(text, sizeof text, "local group: writing key %llu into the members' "
                     "device memory: %s", (unsigned long long)it->k.key, kvs_last_error());
    }
    for (int m = 0; m < g->size; m++) {
        grp_ent *e = ent_of(g, m, (uint32_t)it->mslot[m]);
        int werr = 0;
        if (err) {
            ent_fail(e, err, text);
            continue;
        }
        if (derr && (e->dev & GRP_DEV_WANT)) {
            ent_fail(e, derr, text);
            continue;
        }
        if (e->dst && bytes) {
            if (m == g->me)
                memcpy(it->k.dst + off, ch->buf, bytes);
            else
                werr = peer_write(s->peers[m].pid, e->dst + off, ch->buf, bytes);
        }
        if (werr) {
            char t[GRP_TEXT];
            snprintf(t, sizeof t, "local group: cannot write key %llu into worker %d (local "
                     "rank %d, pid %d): %s", (unsigned long long)it->k.key,
                     (s->peers[m].id - 9) / 2, m, s->peers[m].pid, strerror(werr));
            ent_fail(e, KVS_EPEERDEAD, t);
        } else {
            atomic_fetch_sub(&e->left, 1);
        }
    }
    it->inflight--;
    g->inflight_bytes -= bytes;
    sumbuf_put(g, ch->buf, ch->cap);
    free(ch);
    gen_bump(g->shm);
}

static void item_free(grp_item *it)
{
    free(it->tpar);
    free(it->cdone);
    free(it->parts);
    free(it->mslot);
    free(it->mseen);
    free(it);
}

/* Our entry for it is finished (or the job failed: err): release its op. */
static void item_release(wrk_grp *g, grp_item *it, int err, const char *text)
{
    kvs_store *s = g->s;
    if (it->released)
        return;
    it->released = true;
    if (err == 0 && it->solo) {
        err = it->solo_err;
        text = it->solo_text;
    } else if (err == 0) {
        grp_ent *e = ent_of(g, g->me, it->slot);
        err = atomic_load(&e->err);
        text = e->errtext;
    }
    if (err == 0 && it->k.dst) {
        size_t bytes = (size_t)it->k.count * kvs_dtype_size(it->k.dtype);
        for (int i = 0; i < it->k.nouts; i++)
            memcpy(it->k.extra[i], it->k.dst, bytes);
    }
    wrk_op_release(s, it->op, err, err ? text : NULL);
}

/* Put it among the active items, which the thread starts in their order:
 * by priority, highest first (P3: the layer the next forward pass needs
 * first overtakes those posted before it), in posting order among equals
 * and always after the earlier items of the same key (its rounds go in
 * order). */
static void active_add(wrk_grp *g, grp_item *it)
{
    it->next = NULL;
    if (g->active_tail == NULL || g->active_tail->priority >= it->priority) {
        if (g->active_tail)
            g->active_tail->next = it;
        else
            g->active = it;
        g->active_tail = it;
        return;
    }
    grp_item **at = NULL; /* insert before *at: the first lower one after any of the key */
    for (grp_item **pp = &g->active; *pp; pp = &(*pp)->next) {
        if ((*pp)->k.key == it->k.key)
            at = NULL;
        else if (at == NULL && (*pp)->priority < it->priority)
            at = pp;
    }
    if (at == NULL) { /* (the tail is lower: an item of the key comes last) */
        g->active_tail->next = it;
        g->active_tail = it;
        return;
    }
    it->next = *at;
    *at = it;
}

static void *grp_main(void *arg)
{
    wrk_grp *g = arg;
    kvs_store *s = g->s;
    char ftext[512];
    for (;;) {
        uint32_t seen = wake_seen(g);
        /* before the queue: a chunk handed back was posted before, so its
         * item is active once the queue is taken */
        uint32_t handed = atomic_load(&g->shm->m[g->me].handed);
        bool progress = false, stop, freed = false;
        pthread_mutex_lock(&g->mu);
        grp_item *queued = g->q_head;
        g->q_head = g->q_tail = NULL;
        grp_chunk *done = g->done;
        g->done = NULL;
        stop = g->stop;
        pthread_mutex_unlock(&g->mu);
        while (queued) {
            grp_item *n = queued->next;
            active_add(g, queued);
            queued = n;
            progress = true;
        }
        while (done) {
            grp_chunk *n = done->next;
            chunk_finish(g, done);
            done = n;
            progress = true;
        }
        int fatal = job_failed(s, ftext, sizeof ftext);
        /* the chunks this pass starts reach the I/O thread together */
        wrk_io_defer(true);
        if (!stop && !fatal)
            progress |= pulls_read(g);
        bool gone = atomic_load(&g->shm->ngone) > 0 || handed != g->handed_seen;
        g->handed_seen = handed;
        grp_item **pp = &g->active;
        grp_item *prev = NULL;
        while (*pp) {
            grp_item *it = *pp;
            if (it->solo) { /* its chunks end on their own, with the job's failure too */
                if (atomic_load(&it->solo_left) > 0) {
                    prev = it;
                    pp = &it->next;
                    continue;
                }
                pthread_mutex_lock(&g->mu); /* (solo_err: the user thread may have set it) */
                int serr = it->solo_err;
                pthread_mutex_unlock(&g->mu);
                item_release(g, it, serr, it->solo_text);
                *pp = it->next;
                if (g->active_tail == it)
                    g->active_tail = prev;
                item_free(it);
                progress = true;
                continue;
            }
            grp_ent *mine = ent_of(g, g->me, it->slot);
            if (atomic_load(&mine->hold) && wrk_key_pulls_done(s, it->k.key, it->k.pull_mark)) {
                atomic_store(&mine->hold, 0);
                gen_bump(g->shm);
                progress = true;
            }
            if (!it->started && !fatal)
                progress |= item_try(g, it);
            if (it->pull && gone && !it->released && !fatal)
                progress |= pull_fallback(g, it);
            if (!it->released && atomic_load(&mine->left) == 0) {
                item_release(g, it, 0, NULL);
                progress = true;
            }
            if (!it->released && fatal) {
                item_release(g, it, fatal, ftext);
                progress = true;
            }
            if (!it->released && !it->started) {
                for (int m = 0; m < g->size; m++)
                    if (it->mslot[m] < 0 && atomic_load(&g->shm->m[m].left)) {
                        char t[GRP_TEXT];
                        const char *why = g->shm->m[m].why;
                        if (why[0]) /* it left on the job's failure: report that failure */
                            snprintf(t, sizeof t, "%.*s", (int)strnlen(why, GRP_TEXT - 1), why);
                        else
                            snprintf(t, sizeof t, "local group: worker %d (local rank %d, pid "
                                     "%d) left the job (kvs_close) without pushing key %llu "
                                     "round %llu", (s->peers[m].id - 9) / 2, m,
                                     s->peers[m].pid, (unsigned long long)it->k.key,
                                     (unsigned long long)it->k.round);
                        item_release(g, it, KVS_EPEERDEAD, t);
                        progress = true;
                        break;
                    }
            }
            if (it->released && it->inflight == 0 &&
                (atomic_load(&mine->left) == 0 || fatal || !it->started)) {
                if (atomic_load(&mine->left) == 0) {
                    atomic_store_explicit(&mine->seq, 0, memory_order_release);
                    freed = true;
                } else if (it->pull)
                    it->cdone = NULL; /* owners may still write it: the job failed */
                *pp = it->next;
                if (g->active_tail == it)
                    g->active_tail = prev;
                item_free(it);
                progress = true;
                continue;
            }
            prev = it;
            pp = &it->next;
        }
        wrk_io_defer(false);
        if (freed)
            wake_member(g->shm, g->me); /* our submitter may wait for a slot */
        if (stop && g->active == NULL)
            break; /* (chunk pulls for the others may be in flight: wrk_grp_stop) */
        if (stop && fatal) {
            /* chunk ops still in flight end with the job; wait for them */
            bool inflight = false;
            for (grp_item *it = g->active; it; it = it->next)
                inflight |= it->inflight > 0 || (it->solo && atomic_load(&it->solo_left) > 0);
            if (!inflight)
                break;
        }
        if (!progress)
            wake_wait(g, seen, GRP_WAIT_MS);
    }
    return NULL;
}

/* ---- posting ---- */

/* Send every chunk of solo item it for ourselves (the caller's thread, so
 * that the key's requests leave in call order, as without a group).  0, or
 * the error of the chunk that could not be sent (kept in the item, the
 * chunks not sent counted finished). */
static int solo_start(wrk_grp *g, grp_item *it)
{
    const wrk_held *k = &it->k;
    size_t esz = kvs_dtype_size(k->dtype);
    bool pull = it->type == WRK_OP_PULL;
    atomic_store(&it->solo_left, (int)it->nchunks);
    for (uint64_t c = 0; c < it->nchunks; c++) {
        const wrk_part *p = &it->parts[c];
        size_t off = (size_t)p->offset * esz;
        grp_chunk *ch = calloc(1, sizeof *ch);
        int rc = KVS_ENOMEM;
        if (ch) {
            *ch = (grp_chunk){.g = g, .it = it, .part = *p, .solo = true};
            rc = wrk_submit_chunk(g->s, it->type, k, p, pull ? 0 : 1, pull ? NULL : k->src + off,
                                  k->dst ? k->dst + off : NULL, it->priority, &chunk_ops, ch,
                                  &ch->op);
        }
        if (rc) {
            solo_fail(g, it, rc, ch ? kvs_last_error() : "out of memory");
            free(ch);
            atomic_fetch_sub(&it->solo_left, (int)(it->nchunks - c));
            return rc;
        }
    }
    return 0;
}

/* Hand item it to the group thread (g->mu held). */
static void queue_locked(wrk_grp *g, grp_item *it)
{
    if (g->q_tail)
        g->q_tail->next = it;
    else
        g->q_head = it;
    g->q_tail = it;
}

bool wrk_grp_solo(const kvs_store *s, uint64_t bytes)
{
    return bytes < s->local_agg_min;
}

/* True if every array of the call (vals, else outs) is smaller than
 * KVS_LOCAL_AGG_MIN: the call goes to the servers as without a group. */
static bool all_solo(const kvs_store *s, size_t n, const kvs_array *arr)
{
    for (size_t i = 0; i < n; i++)
        if ((uint64_t)arr[i].count * kvs_dtype_size(arr[i].dtype) >= s->local_agg_min)
            return false;
    return true;
}

int wrk_grp_submit(kvs_store *s, int type, size_t n, const uint64_t *keys,
                   const kvs_array *vals, const kvs_array *outs, const wrk_grp_dev *dv,
                   int priority, const wrk_op_ops *ops, void *owner)
{
    wrk_grp *g = s->grp;
    wrk_op *op;
    if ((dv == NULL && s->grp_host_direct) || all_solo(s, n, vals ? vals : outs))
        return wrk_submit(s, type, n, keys, vals, outs, priority, NULL, ops, owner, NULL);
    wrk_held *held = calloc(n ? n : 1, sizeof *held);
    if (held == NULL)
        return err_set(KVS_ENOMEM, "out of memory");
    int rc = wrk_submit_held(s, type, n, keys, vals, outs, &op, held);
    if (rc) {
        free(held);
        return rc;
    }
    if (ops) { /* before any item can release the op */
        pthread_mutex_lock(&s->mu);
        op->ops = ops;
        op->owner = owner;
        pthread_mutex_unlock(&s->mu);
    }
    size_t nu = op->nkeys;
    for (size_t u = 0; u < nu; u++) {
        wrk_held *k = &held[u];
        size_t esz = kvs_dtype_size(k->dtype);
        grp_item *it = calloc(1, sizeof *it);
        uint64_t nch = wrk_route_chunks(&s->routing, k->key, k->count, esz, NULL);
        if (it)
            it->parts = malloc(nch * sizeof *it->parts);
        if (it) {
            it->mslot = malloc((size_t)g->size * sizeof *it->mslot);
            it->mseen = calloc((size_t)g->size, sizeof *it->mseen);
            it->pull = type == WRK_OP_PULL;
            if (it->pull)
                it->cdone = calloc(nch ? nch : 1, 1);
        }
        if (it == NULL || it->parts == NULL || it->mslot == NULL || it->mseen == NULL ||
            (it->pull && it->cdone == NULL)) {
            if (it)
                item_free(it);
            wrk_op_release(s, op, KVS_ENOMEM, "out of memory");
            continue;
        }
        wrk_route_chunks(&s->routing, k->key, k->count, esz, it->parts);
        for (int m = 0; m < g->size; m++) {
            it->mslot[m] = -1;
            it->mseen[m] = UINT64_MAX; /* not looked yet */
        }
        it->op = op;
        it->k = *k;
        if (dv) /* (distinct keys: held[u] is keys[u]) */
            it->dv = dv[u];
        it->type = type;
        it->priority = priority;
        it->nchunks = nch;
        it->started = it->pull; /* a pull matches nobody's: owners serve it as it comes */
        if ((uint64_t)k->count * esz < s->local_agg_min) {
            it->solo = it->started = true;
            it->pull = false; /* (no owner serves it: no cdone) */
            solo_start(g, it);
            pthread_mutex_lock(&g->mu);
            queue_locked(g, it);
            pthread_mutex_unlock(&g->mu);
            continue;
        }
        /* (s->mu is taken before g->mu elsewhere: ask before taking g->mu;
         * the group thread clears a hold once the pulls are answered) */
        uint32_t hold = k->pull_mark > 0 && !wrk_key_pulls_done(s, k->key, k->pull_mark);
        /* a free slot of ours: bounded wait while the ring is full */
        for (;;) {
            pthread_mutex_lock(&g->mu);
            uint32_t seen = wake_seen(g);
            grp_member *mb = &g->shm->m[g->me];
            uint32_t i = 0, at = 0;
            for (; i < GRP_SLOTS; i++) {
                at = (g->hint + i) % GRP_SLOTS;
                if (atomic_load(&mb->ent[at].seq) == 0)
                    break;
            }
            uint64_t pi = atomic_load(&mb->pposted);
            for (int c = 0; it->pull && i < GRP_SLOTS && c < g->size; c++)
                if (pi - atomic_load(pread_of(g, c, g->me)) >= GRP_SLOTS &&
                    !atomic_load(&g->shm->m[c].gone))
                    i = GRP_SLOTS; /* member c has not read our pull pi - GRP_SLOTS yet */
            if (i < GRP_SLOTS) {
                grp_ent *e = &mb->ent[at];
                e->key = k->key;
                e->round = k->round;
                e->count = k->count;
                e->src = (uint64_t)(uintptr_t)k->src;
                e->dst = (uint64_t)(uintptr_t)k->dst;
                e->done = (uint64_t)(uintptr_t)it->cdone;
                e->priority = priority;
                e->type = (uint32_t)type;
                e->dtype = (uint32_t)k->dtype;
                e->dev = it->dv.on ? GRP_DEV | (outs ? GRP_DEV_WANT : 0) : 0;
                if (it->dv.on)
                    e->h = it->dv.h;
                e->tord = it->dv.on ? it->dv.ord : -1;
                e->thash = it->dv.on ? it->dv.thash : 0;
                atomic_store(&e->tpart, 0);
                atomic_store(&e->left, (int64_t)nch);
                atomic_store(&e->hold, hold);
                atomic_store(&e->err, 0);
                e->errtext[0] = '\0';
                atomic_store_explicit(&e->seq, ++g->seq, memory_order_release);
                atomic_fetch_add(&mb->posted, 1);
                if (it->pull) {
                    mb->plog[pi % GRP_SLOTS] = (g->seq << GRP_SLOT_BITS) | at;
                    atomic_store_explicit(&mb->pposted, pi + 1, memory_order_release);
                }
                g->hint = (at + 1) % GRP_SLOTS;
                it->slot = at;
                queue_locked(g, it);
                pthread_mutex_unlock(&g->mu);
                break;
            }
            pthread_mutex_unlock(&g->mu);
            char t[512];
            int f = job_failed(s, t, sizeof t);
            if (f) {
                item_free(it);
                wrk_op_release(s, op, f, t);
                break;
            }
            wake_wait(g, seen, GRP_WAIT_MS);
        }
    }
    gen_bump(g->shm);
    free(held);
    return 0;
}

void wrk_grp_stop(kvs_store *s)
{
    wrk_grp *g = s->grp;
    if (g == NULL)
        return;
    if (g->parked)
        goto free_all;
    pthread_mutex_lock(&s->mu);
    s->grp_pull_done = NULL; /* called under mu only: no call from here on */
    pthread_mutex_unlock(&s->mu);
    if (g->shm) {
        char *why = g->shm->m[g->me].why;
        if (!job_failed(s, why, GRP_TEXT))
            why[0] = '\0';
        atomic_store(&g->shm->m[g->me].left, 1); /* after why: the others read it then */
    }
    if (g->thread_on) {
        pthread_mutex_lock(&g->mu);
        g->stop = true;
        pthread_mutex_unlock(&g->mu);
        gen_bump(g->shm);
        pthread_join(g->thread, NULL);
        g->thread_on = false;
    }
    for (grp_item *it = g->active; it;) {
        grp_item *n = it->next;
        item_free(it);
        it = n;
    }
    for (grp_item *it = g->q_head; it;) {
        grp_item *n = it->next;
        item_free(it);
        it = n;
    }
    g->active = g->q_head = NULL;
    if (g->shm) {
        /* the thread has ended: pulls of ours that it did not serve are the
         * others' to make themselves */
        atomic_store(&g->shm->m[g->me].gone, 1);
        atomic_fetch_add(&g->shm->ngone, 1);
        gen_bump(g->shm);
    }
    if (g->nfetching > 0) {
        /* chunks we pull for the others are still in flight (a round that
         * waits for this member's push, which never comes): their replies
         * may land in our buffers and their completions reach g until the
         * I/O thread stops.  kvs_close calls again after that. */
        g->parked = true;
        return;
    }
free_all:
    for (grp_fetch *f = g->fetch_head; f;) {
        grp_fetch *n = f->next;
        if (f->ready)
            fetch_free(g, f);
        /* else: never answered; a late direct write from a server may still
         * come, so its buffer is left to the process */
        f = n;
    }
    while (g->done) {
        grp_chunk *n = g->done->next;
        free(g->done); /* its op went with the store's (wrk_ops_free_all) */
        g->done = n;
    }
    hmap_fini(&g->fetch_keys);
    if (g->shm) {
        munmap(g->shm, g->shm_len);
        if (g->me == 0)
            shm_unlink(g->name); /* a member that never came: do not leave it behind */
    }
    while (g->nspare > 0)
        free(g->spare[--g->nspare]);
    for (int m = 0; g->stage && m < g->size; m++)
        free(g->stage[m]);
    free(g->stage);
    free(g->srcs);
    free(g->hints);
    free(g->pseen);
    free(g->tmem);
    free(g->tord);
    free(g->pparts);
    pthread_mutex_destroy(&g->mu);
    free(g);
    s->grp = NULL;
}
