/* ctl.c - see ctl.h. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/datapath.h"
#include "common/log.h"
#include "server/ckpt.h"
#include "server/ctl.h"
#include "server/store.h"
#include "server/update.h"

#define CTL_DIR_MAX DP_CKPT_DIR_MAX /* common/datapath.h: both sides agree */
#define AUTO_ID_BIT (1ull << 63) /* save ids of automatic checkpoints: bit | hash(job, round) */

/* Fault injection for the crash tests (tests/integ/module.mk builds a
 * kvs-server with KVS_CKPT_FAULTS): KVS_TEST_CKPT_CRASH=<point>:<n> kills
 * the server with SIGKILL the n-th time it reaches that point of a save
 * (written, commit, committed, cleaned; an automatic checkpoint's file
 * written, not committed: auto-written).  Not in kvs-server. */
#ifdef KVS_CKPT_FAULTS
static void fault(const char *point)
{
    static int seen; /* one point per process: the one named */
    const char *f = getenv("KVS_TEST_CKPT_CRASH");
    size_t n = strlen(point);
    if (f && strncmp(f, point, n) == 0 && f[n] == ':' && ++seen == atoi(f + n + 1)) {
        LOG(LOG_WARN, "server", "ckpt", "KVS_TEST_CKPT_CRASH=%s: SIGKILL now", f);
        raise(SIGKILL);
    }
}
#define FAULT(p) fault(p)
#else
#define FAULT(p) ((void)0)
#endif

/* One worker's request of a collective. */
typedef struct coll_req {
    bool here;
    size_t ident_len;
    uint8_t ident[64];
    proto_hdr h;
    char *text; /* NUL-terminated copy of the body */
} coll_req;

typedef struct coll {
    uint64_t seq;
    int arrived, nreqs;
    coll_req *reqs; /* per worker rank */
} coll;

/* A data request that arrived while a save or load ran. */
typedef struct held {
    struct held *next;
    size_t ident_len;
    uint8_t ident[64];
    int wrank;
    proto_hdr h;
    zmq_msg_t body;
    bool has_body;
} held;

/* What the checkpoint thread does (the phases of kvs_save and kvs_load, and
 * the automatic checkpoints; see ckpt.h for generations and manifests). */
enum job_kind {
    JOB_NONE = 0,
    JOB_LIST,   /* CKPT_LIST: read the manifest, find the highest generation */
    JOB_SAVE,   /* SAVE: write generation gen's file durably */
    JOB_COMMIT, /* SAVE_END 1: add gen to the manifest */
    JOB_CLEAN,  /* SAVE_CLEAN: the manifest keeps gen only; older files go */
    JOB_LOAD,   /* LOAD: read and verify generation gen's file (0: dir's own) */
    JOB_AUTO    /* an automatic checkpoint of round gen */
};

struct srv_ctl {
    srv_store *st;
    uv_loop_t *loop;
    const cfg *c;
    int rank;
    char who[32];
    srv_optim optim;
    hmap colls;          /* seq -> coll */
    uint64_t next_seq;   /* the next collective to run */
    coll *running;       /* the collective the thread works for (NULL: auto) */
    bool busy;           /* a save/load thread runs: data requests are held */
    bool stopped;
    held *held_head, **held_tail;
    uint64_t last_auto;
    uint64_t job_id;     /* the scheduler's id of this job */

    /* the thread's job: set before it starts, read back in on_done */
    pthread_t thread;
    bool thread_on;
    uv_async_t done;
    enum job_kind job;
    char dir[4200];
    uint64_t gen;        /* the generation the job works on */
    srv_ckpt_man man;    /* JOB_LIST's result, */
    uint64_t maxgen;     /* the highest generation in dir, */
    bool direct;         /* and whether dir holds this server's file itself */
    srv_ckpt_meta meta;
    srv_entry_view *views;
    size_t nviews;
    int rc;
    char why[PROTO_ERRTEXT_MAX];
    srv_ckpt loaded;     /* JOB_LOAD's result */
    uint64_t load_parts, load_bytes; /* JOB_LOAD: the job's key parts here and their
                                      * value bytes (what a file may declare) */

    bool save_pending;   /* a SAVE's generation waits for SAVE_END */
    char save_dir[4200];
    uint64_t save_gen, save_id;
    bool staged_ok;      /* a verified load waits for LOAD_END */
    srv_ckpt staged;
};

static void try_run(srv_ctl *c);

bool srv_ctl_type(int type)
{
    return type == PROTO_OPT_SET || type == PROTO_OPT_KEY || type == PROTO_SAVE ||
           type == PROTO_SAVE_END || type == PROTO_LOAD || type == PROTO_LOAD_END ||
           type == PROTO_CKPT_LIST || type == PROTO_SAVE_CLEAN;
}

static const char *api_name(int type)
{
    switch (type) {
    case PROTO_OPT_SET: return "kvs_set_optimizer";
    case PROTO_OPT_KEY: return "kvs_set_optimizer_key";
    case PROTO_SAVE:
    case PROTO_SAVE_END:
    case PROTO_SAVE_CLEAN: return "kvs_save";
    case PROTO_LOAD:
    case PROTO_LOAD_END: return "kvs_load";
    case PROTO_CKPT_LIST: return "kvs_save or kvs_load";
    }
    return "?";
}

/* ---- answers ---- */

static void answer(srv_ctl *c, coll_req *q, int rc, const char *text, srv_buf *value,
                   uint64_t round)
{
    if (c->stopped)
        return;
    proto_hdr h = q->h;
    if (value && rc == 0) { /* LOAD: (key, round) pairs as int64 data */
        h.count = h.total = value->cap / 8;
        h.offset = 0;
        h.dtype = KVS_INT64;
    } else {
        h.count = h.total = h.offset = 0;
        h.dtype = 0;
        value = NULL;
    }
    h.flags = 0;
    c->st->reply(c->st->reply_arg, q->ident, q->ident_len, &h, rc, text, value, round);
}

static void coll_free(coll *k)
{
    if (k == NULL)
        return;
    for (int w = 0; w < k->nreqs; w++)
        free(k->reqs[w].text);
    free(k->reqs);
    free(k);
}

/* Answer every worker of k alike, drop k and go on with the next one. */
static void finish(srv_ctl *c, coll *k, int rc, const char *text, srv_buf *value,
                   uint64_t round)
{
    for (int w = 0; w < k->nreqs; w++)
        if (k->reqs[w].here)
            answer(c, &k->reqs[w], rc, text, value, round);
    hmap_del(&c->colls, k->seq);
    if (c->running == k)
        c->running = NULL;
    coll_free(k);
    c->next_seq++;
}

/* ---- the optimizer ---- */

static int do_opt_set(srv_ctl *c, const char *text, bool update_on, char *why, size_t whylen)
{
    optim_spec o;
    char canon[OPTIM_TEXT_MAX], diff[512];
    srv_optim *opt = &c->optim;
    int rc = optim_parse(text, &o, why, whylen);
    if (rc)
        return rc;
    optim_format(&o, canon, sizeof canon);
    bool began = srv_store_pushes_began(c->st);
    if (began && !opt->set) {
        snprintf(why, whylen, "'%s': the servers have stored plain sums since the first push; "
                 "set the optimizer before pushing (or after kvs_load of a checkpoint that has "
                 "it)", optim_name(o.kind));
        return KVS_EINVAL;
    }
    if (began && optim_diff(opt->text, canon, diff, sizeof diff)) {
        snprintf(why, whylen, "%s: pushes began with \"%s\"; the optimizer cannot change now",
                 diff, opt->text);
        return KVS_EINVAL;
    }
    bool active = update_on && opt->server_on;
    if (active) {
        size_t n = srv_store_views(c->st, NULL, 0);
        srv_entry_view *v = calloc(n ? n : 1, sizeof *v);
        if (v == NULL)
            return KVS_ENOMEM;
        srv_store_views(c->st, v, n);
        for (size_t i = 0; i < n; i++)
            if ((rc = srv_optim_part_ok(&o, v[i].key, v[i].dtype, v[i].count, v[i].total,
                                        v[i].async, why, whylen)) != 0) {
                free(v);
                return rc;
            }
        free(v);
    }
    if (!began) { /* a new spec starts from fresh state */
        opt->spec = o;
        snprintf(opt->text, sizeof opt->text, "%s", canon);
        opt->gen++;
    }
    opt->set = true;
    opt->active = active;
    LOG(LOG_INFO, c->who, "optim", "%s: %s", active ? "updating with" : "plain sums "
        "(MXNET_UPDATE_ON_KVSTORE=0); spec kept", opt->text);
    return 0;
}

static int do_opt_key(srv_ctl *c, uint64_t key, const char *text, char *why, size_t whylen)
{
    optim_mult m;
    int rc = optim_parse_mult(text, &m, why, whylen);
    if (rc)
        return rc;
    if (srv_optim_set_mult(&c->optim, key, &m) != 0) {
        snprintf(why, whylen, "server out of memory");
        return KVS_ENOMEM;
    }
    return 0;
}

/* ---- checkpoints ---- */

/* SAVE_END 1: generation gen (every server's file of it is durable) is
 * committed here: first in this server's manifest, older ones kept. */
static int commit_gen(srv_ctl *c)
{
    srv_ckpt_man old, m = {0};
    uint32_t rank = (uint32_t)c->rank;
    int rc = srv_ckpt_man_read(c->dir, rank, &old, c->why, sizeof c->why);
    if (rc)
        return rc;
    m.gen[0] = c->gen;
    m.id[0] = c->meta.save_id;
    m.n = 1;
    for (int i = 0; i < old.n && m.n < CKPT_MAN_MAX; i++)
        if (old.gen[i] < c->gen) {
            m.gen[m.n] = old.gen[i];
            m.id[m.n++] = old.id[i];
        }
    FAULT("commit");
    rc = srv_ckpt_man_write(c->dir, rank, &m, c->why, sizeof c->why);
    if (rc == 0)
        FAULT("committed");
    return rc;
}

/* SAVE_CLEAN: gen is committed on every server: keep it alone. */
static int clean_gen(srv_ctl *c)
{
    srv_ckpt_man old, m = {0};
    uint32_t rank = (uint32_t)c->rank;
    int rc = srv_ckpt_man_read(c->dir, rank, &old, c->why, sizeof c->why);
    if (rc)
        return rc;
    if (old.n == 0 || old.gen[0] != c->gen) {
        snprintf(c->why, sizeof c->why, "kvs_save: generation %llu is not the newest one "
                 "committed in %.3000s", (unsigned long long)c->gen, c->dir);
        return KVS_EINVAL;
    }
    m.gen[0] = old.gen[0];
    m.id[0] = old.id[0];
    m.n = 1;
    if ((rc = srv_ckpt_man_write(c->dir, rank, &m, c->why, sizeof c->why)) != 0)
        return rc;
    FAULT("cleaned");
    srv_ckpt_prune(c->dir, rank, &c->gen, 1, UINT64_MAX);
    return 0;
}

/* An automatic checkpoint of round gen, on this server alone (no worker
 * coordinates it): generations of this round or later (a run that was
 * restarted from an older one) leave the manifest first; then the file,
 * then the manifest names gen and the newest older one; the rest goes. */
static int auto_save(srv_ctl *c)
{
    srv_ckpt_man m;
    char gdir[4300];
    uint32_t rank = (uint32_t)c->rank;
    int rc = srv_ckpt_man_read(c->dir, rank, &m, c->why, sizeof c->why);
    if (rc)
        return rc;
    int drop = 0;
    while (drop < m.n && m.gen[drop] >= c->gen)
        drop++;
    if (drop > 0) {
        memmove(m.gen, m.gen + drop, (size_t)(m.n - drop) * sizeof m.gen[0]);
        memmove(m.id, m.id + drop, (size_t)(m.n - drop) * sizeof m.id[0]);
        m.n -= drop;
        if ((rc = srv_ckpt_man_write(c->dir, rank, &m, c->why, sizeof c->why)) != 0)
            return rc;
    }
    srv_ckpt_gen_dir(c->dir, c->gen, gdir, sizeof gdir);
    rc = srv_ckpt_write(gdir, &c->meta, c->views, c->nviews, &c->optim, true, c->why,
                        sizeof c->why);
    if (rc)
        return rc;
    FAULT("auto-written");
    srv_ckpt_man k = {.exists = true, .n = m.n > 0 ? 2 : 1};
    k.gen[0] = c->gen;
    k.id[0] = c->meta.save_id;
    if (m.n > 0) {
        k.gen[1] = m.gen[0];
        k.id[1] = m.id[0];
    }
    if ((rc = srv_ckpt_man_write(c->dir, rank, &k, c->why, sizeof c->why)) != 0)
        return rc;
    srv_ckpt_prune(c->dir, rank, k.gen, k.n, UINT64_MAX);
    return 0;
}

static void *job_main(void *arg)
{
    srv_ctl *c = arg;
    char gdir[4300];
    uint32_t rank = (uint32_t)c->rank;
    switch (c->job) {
    case JOB_LIST:
        c->rc = srv_ckpt_man_read(c->dir, rank, &c->man, c->why, sizeof c->why);
        c->maxgen = srv_ckpt_gen_max(c->dir);
        srv_ckpt_path(c->dir, rank, gdir, sizeof gdir);
        c->direct = access(gdir, F_OK) == 0;
        break;
    case JOB_LOAD:
        if (c->gen)
            srv_ckpt_gen_dir(c->dir, c->gen, gdir, sizeof gdir);
        else
            snprintf(gdir, sizeof gdir, "%s", c->dir);
        c->rc = srv_ckpt_read(gdir, rank, c->load_parts, c->load_bytes, &c->loaded, c->why,
                              sizeof c->why);
        break;
    case JOB_SAVE:
        srv_ckpt_gen_dir(c->dir, c->gen, gdir, sizeof gdir);
        c->rc = srv_ckpt_write(gdir, &c->meta, c->views, c->nviews, &c->optim, true, c->why,
                               sizeof c->why);
        if (c->rc == 0)
            FAULT("written");
        break;
    case JOB_COMMIT:
        c->rc = commit_gen(c);
        break;
    case JOB_CLEAN:
        c->rc = clean_gen(c);
        break;
    case JOB_AUTO:
        c->rc = auto_save(c);
        break;
    case JOB_NONE:
        break;
    }
    uv_async_send(&c->done);
    return NULL;
}

static int start_job(srv_ctl *c, enum job_kind kind, const char *dir, uint64_t gen, uint64_t id,
                     char *why, size_t whylen)
{
    c->job = kind;
    snprintf(c->dir, sizeof c->dir, "%s", dir);
    c->gen = gen;
    c->meta = (srv_ckpt_meta){id, (uint32_t)c->rank, (uint32_t)c->c->num_server,
                              (uint32_t)c->c->num_worker};
    c->views = NULL;
    c->nviews = 0;
    c->load_parts = c->st->nkeys;
    c->load_bytes = c->st->value_bytes;
    if (kind == JOB_SAVE || kind == JOB_AUTO) {
        size_t n = srv_store_views(c->st, NULL, 0);
        c->views = calloc(n ? n : 1, sizeof *c->views);
        if (c->views == NULL) {
            snprintf(why, whylen, "server out of memory");
            return KVS_ENOMEM;
        }
        c->nviews = srv_store_views(c->st, c->views, n);
    }
    c->rc = 0;
    c->why[0] = '\0';
    c->busy = true;
    if (pthread_create(&c->thread, NULL, job_main, c) != 0) {
        c->busy = false;
        free(c->views);
        c->views = NULL;
        snprintf(why, whylen, "cannot start the checkpoint thread");
        return KVS_ENOMEM;
    }
    c->thread_on = true;
    return 0;
}

/* Remove this server's file of an uncommitted generation (a save that did
 * not complete on every server). */
static void abort_save(srv_ctl *c)
{
    char gdir[4300], path[4400];
    if (!c->save_pending)
        return;
    srv_ckpt_gen_dir(c->save_dir, c->save_gen, gdir, sizeof gdir);
    srv_ckpt_path(gdir, (uint32_t)c->rank, path, sizeof path);
    unlink(path);
    rmdir(gdir); /* fails while other servers' files are in it: fine */
    c->save_pending = false;
}

/* Is the checkpoint just read the state of this job's keys?  KVS_ESHAPE
 * naming the first difference. */
static int check_shape(srv_ctl *c, const srv_ckpt *k, char *why, size_t whylen)
{
    if (k->meta.num_servers != (uint32_t)c->c->num_server) {
        snprintf(why, whylen, "%.3000s was written by a job of %u servers; this job has %d",
                 k->path, k->meta.num_servers, c->c->num_server);
        return KVS_ESHAPE;
    }
    for (size_t i = 0; i < k->n; i++) {
        const srv_ckpt_part *p = &k->parts[i];
        srv_entry_view v;
        if (!srv_store_view(c->st, p->key, p->part, &v)) {
            snprintf(why, whylen, "%.3000s: key %llu (part %u, %llu %s elements) is not initialised "
                     "in this job", k->path, (unsigned long long)p->key, p->part,
                     (unsigned long long)p->count, kvs_dtype_name(p->dtype));
            return KVS_ESHAPE;
        }
        if (v.dtype != p->dtype || v.count != p->count || v.offset != p->offset ||
            v.total != p->total) {
            snprintf(why, whylen, "%.3000s: key %llu part %u has %llu %s elements (at %llu of %llu) "
                     "in the checkpoint, %llu %s elements (at %llu of %llu) in this job",
                     k->path, (unsigned long long)p->key, p->part, (unsigned long long)p->count,
                     kvs_dtype_name(p->dtype), (unsigned long long)p->offset,
                     (unsigned long long)p->total, (unsigned long long)v.count,
                     kvs_dtype_name(v.dtype), (unsigned long long)v.offset,
                     (unsigned long long)v.total);
            return KVS_ESHAPE;
        }
        if (v.async != p->async) {
            snprintf(why, whylen, "%.3000s: key %llu is %s in the checkpoint, %s in this job",
                     k->path, (unsigned long long)p->key, p->async ? "dist_async" : "dist_sync",
                     v.async ? "dist_async" : "dist_sync");
            return KVS_ESHAPE;
        }
    }
    size_t n = srv_store_views(c->st, NULL, 0);
    if (n != k->n) { /* more keys here: name one the file lacks */
        srv_entry_view *v = calloc(n, sizeof *v);
        if (v == NULL)
            return KVS_ENOMEM;
        srv_store_views(c->st, v, n);
        for (size_t i = 0; i < n; i++) {
            bool found = false;
            for (size_t j = 0; j < k->n && !found; j++)
                found = k->parts[j].key == v[i].key && k->parts[j].part == v[i].part;
            if (!found) {
                snprintf(why, whylen, "%.3000s: key %llu (part %u) of this job is not in the "
                         "checkpoint", k->path, (unsigned long long)v[i].key, v[i].part);
                break;
            }
        }
        free(v);
        return KVS_ESHAPE;
    }
    /* the optimizer state must fit the spec it was written with */
    if (k->spec_set) {
        optim_spec o;
        char perr[256];
        if (optim_parse(k->spec, &o, perr, sizeof perr) != 0) {
            snprintf(why, whylen, "%.3000s: corrupted optimizer spec: %s", k->path, perr);
            return KVS_EPROTO;
        }
        for (size_t i = 0; i < k->n; i++) {
            const srv_upd *u = k->parts[i].upd;
            if (u && u->nstate != optim_nstate(&o, u->dtype)) {
                snprintf(why, whylen, "%.3000s: key %llu has %d state arrays; %s needs %d",
                         k->path, (unsigned long long)k->parts[i].key, u->nstate,
                         optim_name(o.kind), optim_nstate(&o, u->dtype));
                return KVS_EPROTO;
            }
        }
    }
    return 0;
}

/* The staged checkpoint replaces the state: optimizer, multipliers, then
 * every entry's value, round and optimizer state. */
static int commit_load(srv_ctl *c, char *why, size_t whylen)
{
    srv_ckpt *k = &c->staged;
    srv_optim *o = &c->optim;
    o->gen++;
    o->set = k->spec_set;
    o->active = k->spec_set && k->active && o->server_on;
    if (k->spec_set) {
        optim_parse(k->spec, &o->spec, why, whylen); /* checked when staged */
        snprintf(o->text, sizeof o->text, "%s", k->spec);
    } else {
        memset(&o->spec, 0, sizeof o->spec);
        o->text[0] = '\0';
    }
    for (size_t i = 0; i < o->mults.cap; i++)
        if (o->mults.used[i] == 1)
            free(o->mults.vals[i]);
    hmap_fini(&o->mults);
    hmap_init(&o->mults);
    for (size_t i = 0; i < k->nmults; i++)
        if (srv_optim_set_mult(o, k->mult_keys[i], &k->mults[i]) != 0) {
            snprintf(why, whylen, "server out of memory");
            return KVS_ENOMEM;
        }
    for (size_t i = 0; i < k->n; i++) {
        srv_ckpt_part *p = &k->parts[i];
        if (p->upd)
            p->upd->gen = o->gen;
        if (srv_store_restore(c->st, p->key, p->part, p->value, p->round, p->upd) == 0) {
            p->value = NULL; /* the store owns them now */
            p->upd = NULL;
        }
    }
    LOG(LOG_INFO, c->who, "ckpt", "loaded %s (save %016llx): %zu key parts%s%s", k->path,
        (unsigned long long)k->meta.save_id, k->n, o->set ? ", optimizer " : "",
        o->set ? o->text : "");
    srv_ckpt_free(k);
    c->staged_ok = false;
    return 0;
}

static void drop_staged(srv_ctl *c)
{
    if (c->staged_ok)
        srv_ckpt_free(&c->staged);
    c->staged_ok = false;
}

/* (key, round) of every staged part, as int64 pairs. */
static srv_buf *staged_rounds(const srv_ckpt *k)
{
    if (k->n == 0)
        return NULL;
    srv_buf *b = srv_buf_new(k->n * 16);
    if (b == NULL)
        return NULL;
    b->cap = k->n * 16; /* exact: answer() reads the count from it */
    for (size_t i = 0; i < k->n; i++) {
        memcpy(b->data + 16 * i, &k->parts[i].key, 8);
        memcpy(b->data + 16 * i + 8, &k->parts[i].round, 8);
    }
    return b;
}

/* Replay the data requests held while the thread ran (arrival order). */
static void release_held(srv_ctl *c)
{
    held *h = c->held_head;
    c->held_head = NULL;
    c->held_tail = &c->held_head;
    while (h) {
        held *n = h->next;
        srv_in in = {zmq_msg_data(&h->body), &h->body, 1};
        srv_store_handle(c->st, h->ident, h->ident_len, h->wrank, &h->h,
                         h->has_body ? &in : NULL);
        zmq_msg_close(&h->body);
        free(h);
        h = n;
    }
}

static void on_done(uv_async_t *a)
{
    srv_ctl *c = a->data;
    char why[PROTO_ERRTEXT_MAX];
    if (!c->thread_on)
        return;
    pthread_join(c->thread, NULL);
    c->thread_on = false;
    c->busy = false;
    free(c->views);
    c->views = NULL;
    enum job_kind job = c->job;
    c->job = JOB_NONE;
    coll *k = c->running;
    int rc = c->rc;
    snprintf(why, sizeof why, "%s", c->why);
    if (job == JOB_AUTO) {
        if (rc)
            LOG(LOG_ERROR, c->who, "ckpt", "automatic checkpoint failed: %s", why);
        else
            LOG(LOG_INFO, c->who, "ckpt", "automatic checkpoint of round %llu committed in %s",
                (unsigned long long)c->gen, c->dir);
    } else if (job == JOB_LIST && k) {
        srv_buf *b = NULL;
        if (rc == 0 && (b = srv_buf_new(16 * (1 + (size_t)c->man.n))) == NULL) {
            rc = KVS_ENOMEM;
            snprintf(why, sizeof why, "server out of memory");
        }
        if (b) { /* (flags, highest generation), then (generation, save id) each */
            uint64_t w[2 + 2 * CKPT_MAN_MAX];
            w[0] = (c->man.exists ? 1u : 0u) | (c->direct ? 2u : 0u);
            w[1] = c->maxgen;
            for (int i = 0; i < c->man.n; i++) {
                w[2 + 2 * i] = c->man.gen[i];
                w[3 + 2 * i] = c->man.id[i];
            }
            b->cap = 16 * (1 + (size_t)c->man.n); /* exact: answer() reads the count */
            memcpy(b->data, w, b->cap);
        }
        finish(c, k, c->st->broken ? KVS_EPEERDEAD : rc,
               c->st->broken ? c->st->broken_text : why, b, 0);
        srv_buf_unref(b);
    } else if (job == JOB_SAVE && k) {
        if (rc == 0) {
            LOG(LOG_INFO, c->who, "ckpt", "wrote %zu key parts for %s generation %llu",
                c->nviews, c->dir, (unsigned long long)c->gen);
            c->save_pending = true;
            snprintf(c->save_dir, sizeof c->save_dir, "%s", c->dir);
            c->save_gen = c->gen;
            c->save_id = c->meta.save_id;
        }
        finish(c, k, c->st->broken ? KVS_EPEERDEAD : rc,
               c->st->broken ? c->st->broken_text : why, NULL, 0);
    } else if ((job == JOB_COMMIT || job == JOB_CLEAN) && k) {
        if (rc == 0)
            LOG(LOG_INFO, c->who, "ckpt", "generation %llu of %s %s", (unsigned long long)c->gen,
                c->dir, job == JOB_COMMIT ? "committed" : "is the only one left");
        else
            LOG(LOG_ERROR, c->who, "ckpt", "%s", why);
        finish(c, k, rc, why, NULL, 0);
    } else if (job == JOB_LOAD && k) {
        srv_buf *pairs = NULL;
        if (rc == 0)
            rc = check_shape(c, &c->loaded, why, sizeof why);
        if (rc == 0 && c->loaded.n > 0 && (pairs = staged_rounds(&c->loaded)) == NULL) {
            rc = KVS_ENOMEM;
            snprintf(why, sizeof why, "server out of memory");
        }
        if (rc == 0 && c->st->broken) {
            rc = KVS_EPEERDEAD;
            snprintf(why, sizeof why, "%s", c->st->broken_text);
        }
        uint64_t id = c->loaded.meta.save_id;
        if (rc == 0) {
            c->staged = c->loaded;
            c->staged_ok = true;
            memset(&c->loaded, 0, sizeof c->loaded);
        } else {
            srv_ckpt_free(&c->loaded);
            LOG(LOG_WARN, c->who, "ckpt", "load refused: %s", why);
        }
        finish(c, k, rc, why, pairs, id);
        srv_buf_unref(pairs);
    }
    release_held(c);
    try_run(c);
}

/* ---- running collectives ---- */

/* "G DIR" (SAVE, LOAD): the generation, a space, the directory. */
static int parse_gen_dir(const char *text, uint64_t *gen, const char **dir, char *why,
                         size_t whylen)
{
    char *end;
    errno = 0;
    unsigned long long g = strtoull(text, &end, 10);
    if (errno || end == text || text[0] < '0' || text[0] > '9' || *end != ' ') {
        snprintf(why, whylen, "kvs_save/kvs_load: malformed request '%.64s' (expected a "
                 "generation and a directory)", text);
        return KVS_EPROTO;
    }
    *gen = g;
    *dir = end + 1;
    return 0;
}

static void run_coll(srv_ctl *c, coll *k)
{
    char why[PROTO_ERRTEXT_MAX] = "";
    coll_req *r0 = &k->reqs[0];
    int rc = 0;
    for (int w = 1; w < k->nreqs; w++)
        if (k->reqs[w].h.type != r0->h.type) {
            snprintf(why, sizeof why, "collective call %llu: worker 0 called %s but worker %d "
                     "called %s; every worker must make the same collective calls in the same "
                     "order", (unsigned long long)k->seq, api_name(r0->h.type), w,
                     api_name(k->reqs[w].h.type));
            finish(c, k, KVS_EINVAL, why, NULL, 0);
            return;
        }
    switch (r0->h.type) {
    case PROTO_OPT_SET:
        rc = do_opt_set(c, r0->text, r0->h.key != 0, why, sizeof why);
        break;
    case PROTO_OPT_KEY:
        rc = do_opt_key(c, r0->h.key, r0->text, why, sizeof why);
        break;
    case PROTO_CKPT_LIST:
    case PROTO_SAVE:
    case PROTO_LOAD:
    case PROTO_SAVE_CLEAN: {
        uint64_t gen = r0->h.type == PROTO_SAVE_CLEAN ? r0->h.key : 0;
        const char *dir = r0->text;
        enum job_kind kind = r0->h.type == PROTO_CKPT_LIST ? JOB_LIST
                             : r0->h.type == PROTO_SAVE   ? JOB_SAVE
                             : r0->h.type == PROTO_LOAD   ? JOB_LOAD
                                                          : JOB_CLEAN;
        if ((kind == JOB_SAVE || kind == JOB_LOAD) && (rc = parse_gen_dir(r0->text, &gen, &dir,
                                                                      why, sizeof why)) != 0)
            break;
        if (dir[0] == '\0' || strlen(dir) > CTL_DIR_MAX || (kind != JOB_LOAD && gen == 0 &&
                                                            kind != JOB_LIST)) {
            rc = KVS_EINVAL;
            snprintf(why, sizeof why, "%s: the directory name is empty or longer than %d "
                     "bytes, or no generation", api_name(r0->h.type), CTL_DIR_MAX);
            break;
        }
        if (kind != JOB_CLEAN) { /* a new save or load: what an earlier one left goes */
            drop_staged(c);
            abort_save(c);
        }
        if ((kind == JOB_SAVE || kind == JOB_LOAD) &&
            (rc = srv_store_quiet(c->st, why, sizeof why)) != 0)
            break;
        rc = start_job(c, kind, dir, gen, r0->h.key, why, sizeof why);
        if (rc == 0) {
            c->running = k;
            return; /* on_done finishes it */
        }
        break;
    }
    case PROTO_SAVE_END:
        if (r0->h.key != 1) {
            abort_save(c);
        } else if (!c->save_pending) {
            rc = KVS_EINVAL;
            snprintf(why, sizeof why, "kvs_save: no written checkpoint waits to be committed");
        } else {
            c->save_pending = false;
            rc = start_job(c, JOB_COMMIT, c->save_dir, c->save_gen, c->save_id, why,
                           sizeof why);
            if (rc == 0) {
                c->running = k;
                return;
            }
        }
        c->save_pending = false;
        break;
    case PROTO_LOAD_END:
        if (r0->h.key == 1 && !c->staged_ok) {
            rc = KVS_EINVAL;
            snprintf(why, sizeof why, "kvs_load: nothing staged to apply");
        } else if (r0->h.key == 1) {
            rc = commit_load(c, why, sizeof why);
        }
        drop_staged(c);
        break;
    }
    finish(c, k, rc, why, NULL, 0);
}

static void try_run(srv_ctl *c)
{
    while (!c->busy && !c->stopped) {
        coll *k = hmap_get(&c->colls, c->next_seq);
        if (k == NULL || k->arrived < k->nreqs)
            return;
        run_coll(c, k);
    }
}

void srv_ctl_handle(srv_ctl *c, const uint8_t *ident, size_t ident_len, int wrank,
                    const proto_hdr *h, const void *body)
{
    srv_store *st = c->st;
    proto_hdr e = *h;
    char why[256];
    e.count = e.total = e.offset = 0;
    if (st->broken) {
        st->reply(st->reply_arg, ident, ident_len, &e, KVS_EPEERDEAD, st->broken_text, NULL, 0);
        return;
    }
    if (h->round < c->next_seq) {
        snprintf(why, sizeof why, "collective call %llu from worker %d: that call is already "
                 "done", (unsigned long long)h->round, wrank);
        st->reply(st->reply_arg, ident, ident_len, &e, KVS_EPROTO, why, NULL, 0);
        return;
    }
    coll *k = hmap_get(&c->colls, h->round);
    if (k == NULL) {
        k = calloc(1, sizeof *k);
        if (k)
            k->reqs = calloc((size_t)st->num_workers, sizeof *k->reqs);
        if (k == NULL || k->reqs == NULL || hmap_put(&c->colls, h->round, k) != 0) {
            coll_free(k);
            st->reply(st->reply_arg, ident, ident_len, &e, KVS_ENOMEM, "server out of memory",
                      NULL, 0);
            return;
        }
        k->seq = h->round;
        k->nreqs = st->need; /* the members (all the workers unless elastic) */
    }
    coll_req *q = &k->reqs[wrank];
    if (q->here) {
        snprintf(why, sizeof why, "worker %d sent collective call %llu twice", wrank,
                 (unsigned long long)h->round);
        st->reply(st->reply_arg, ident, ident_len, &e, KVS_EPROTO, why, NULL, 0);
        return;
    }
    q->text = malloc(h->body_len + 1);
    if (q->text == NULL) {
        st->reply(st->reply_arg, ident, ident_len, &e, KVS_ENOMEM, "server out of memory", NULL,
                  0);
        return;
    }
    if (h->body_len)
        memcpy(q->text, body, h->body_len);
    q->text[h->body_len] = '\0';
    if (strlen(q->text) != h->body_len) {
        free(q->text);
        q->text = NULL;
        st->reply(st->reply_arg, ident, ident_len, &e, KVS_EPROTO, "NUL byte in the text",
                  NULL, 0);
        return;
    }
    q->here = true;
    q->ident_len = ident_len < sizeof q->ident ? ident_len : sizeof q->ident;
    memcpy(q->ident, ident, q->ident_len);
    q->h = *h;
    k->arrived++;
    try_run(c);
}

bool srv_ctl_hold(srv_ctl *c, const uint8_t *ident, size_t ident_len, int wrank,
                  const proto_hdr *h, const srv_in *in)
{
    if (c == NULL || !c->busy || c->st->broken)
        return false; /* (a broken store fails the request at once) */
    held *x = calloc(1, sizeof *x);
    if (x == NULL)
        return false; /* handled now: better than lost */
    x->ident_len = ident_len < sizeof x->ident ? ident_len : sizeof x->ident;
    memcpy(x->ident, ident, x->ident_len);
    x->wrank = wrank;
    x->h = *h;
    zmq_msg_init(&x->body);
    if (in && in->frames && in->nframes == 1) {
        zmq_msg_move(&x->body, &in->frames[0]);
        x->has_body = true;
    } else if (in && (in->data || in->nframes > 1)) {
        /* borrowed, or several frames (rare while a save runs): one copy */
        zmq_msg_close(&x->body);
        if (zmq_msg_init_size(&x->body, h->body_len) != 0) {
            free(x);
            return false;
        }
        uint8_t *d = zmq_msg_data(&x->body);
        if (in->nframes > 1) {
            uint64_t off = 0;
            for (int i = 0; i < in->nframes; i++) {
                size_t n = zmq_msg_size(&in->frames[i]);
                if (n > h->body_len - off)
                    n = h->body_len - off;
                memcpy(d + off, zmq_msg_data(&in->frames[i]), n);
                off += n;
            }
        } else {
            memcpy(d, in->data, h->body_len);
        }
        x->has_body = true;
    }
    *c->held_tail = x;
    c->held_tail = &x->next;
    return true;
}

/* The store's failed hook: answer every waiting collective and held request. */
static void ctl_failed(void *arg, const char *why)
{
    srv_ctl *c = arg;
    for (size_t i = 0; i < c->colls.cap; i++) {
        if (c->colls.used[i] != 1)
            continue;
        coll *k = c->colls.vals[i];
        if (k == c->running)
            continue; /* answered when its thread is done */
        for (int w = 0; w < k->nreqs; w++)
            if (k->reqs[w].here)
                answer(c, &k->reqs[w], KVS_EPEERDEAD, why, NULL, 0);
        coll_free(k);
    }
    hmap colls = c->colls;
    hmap_init(&c->colls);
    if (c->running)
        hmap_put(&c->colls, c->running->seq, c->running);
    hmap_fini(&colls);
    /* held data requests: the store (now broken) fails each */
    if (!c->busy)
        release_held(c);
}

/* The store's round_done hook: an entry completed round r; time for an
 * automatic checkpoint? */
static void ctl_round_done(void *arg, uint64_t r)
{
    srv_ctl *c = arg;
    uint64_t every = c->c->checkpoint_every;
    char why[512];
    if (every == 0 || c->busy || c->stopped || c->rank < 0 || c->st->broken || r % every != 0 ||
        r <= c->last_auto || srv_store_quiet(c->st, why, sizeof why) != 0)
        return;
    size_t n = srv_store_views(c->st, NULL, 0);
    srv_entry_view *v = calloc(n ? n : 1, sizeof *v);
    if (v == NULL)
        return;
    srv_store_views(c->st, v, n);
    bool all = true;
    for (size_t i = 0; i < n && all; i++)
        all = v[i].round == r;
    free(v);
    if (!all)
        return; /* not every key has finished round r (or one went past it) */
    c->last_auto = r;
    /* the same id on every server of this job for round r, another in another job */
    uint64_t id = c->job_id ^ (r * 0x9E3779B97F4A7C15ull);
    id = (id ^ (id >> 30)) * 0xBF58476D1CE4E5B9ull;
    id = (id ^ (id >> 27)) * 0x94D049BB133111EBull;
    id = AUTO_ID_BIT | ((id ^ (id >> 31)) & ~AUTO_ID_BIT);
    if (start_job(c, JOB_AUTO, c->c->checkpoint_dir, r, id, why, sizeof why) != 0)
        LOG(LOG_ERROR, c->who, "ckpt", "automatic checkpoint of round %llu: %s",
            (unsigned long long)r, why);
}

/* ---- life cycle ---- */

int srv_ctl_new(srv_store *st, uv_loop_t *loop, const cfg *cf, srv_ctl **out)
{
    srv_ctl *c = calloc(1, sizeof *c);
    if (c == NULL)
        return KVS_ENOMEM;
    c->st = st;
    c->loop = loop;
    c->c = cf;
    c->rank = -1;
    snprintf(c->who, sizeof c->who, "server");
    srv_optim_init(&c->optim, cf->update_on_kvstore, cf->bigarray_bound);
    hmap_init(&c->colls);
    c->held_tail = &c->held_head;
    uv_async_init(loop, &c->done, on_done);
    c->done.data = c;
    st->hooks = (srv_store_hooks){ctl_round_done, ctl_failed, c};
    st->optim = &c->optim;
    *out = c;
    return 0;
}

void srv_ctl_set_rank(srv_ctl *c, int rank, uint64_t job_id)
{
    if (c == NULL)
        return;
    c->rank = rank;
    c->job_id = job_id;
    snprintf(c->who, sizeof c->who, "server %d", rank);
}

void srv_ctl_stop(srv_ctl *c)
{
    if (c == NULL)
        return;
    if (c->thread_on) { /* let a checkpoint finish: durability over a quick exit */
        pthread_join(c->thread, NULL);
        c->thread_on = false;
        c->busy = false;
        if (c->job == JOB_LOAD)
            srv_ckpt_free(&c->loaded);
    }
    c->stopped = true;
}

bool srv_ctl_busy(const srv_ctl *c)
{
    return c != NULL && c->busy;
}

void srv_ctl_free(srv_ctl *c)
{
    if (c == NULL)
        return;
    srv_ctl_stop(c);
    for (size_t i = 0; i < c->colls.cap; i++)
        if (c->colls.used[i] == 1)
            coll_free(c->colls.vals[i]);
    hmap_fini(&c->colls);
    held *h = c->held_head;
    while (h) {
        held *n = h->next;
        zmq_msg_close(&h->body);
        free(h);
        h = n;
    }
    free(c->views);
    drop_staged(c);
    c->st->hooks = (srv_store_hooks){0};
    c->st->optim = NULL;
    srv_optim_fini(&c->optim);
    free(c);
}
