/* ctl.c - libkvs's collective calls to the servers: the optimizer, per-key
 * multipliers, checkpoint save and load (kvs.h).
 *
 * Each call sends one request to every server carrying this worker's
 * collective sequence number (proto.h types 48-55) and waits for every
 * answer; a server answers once all workers' requests of that number have
 * arrived, acting on worker rank 0's.  Checkpoints are generations
 * committed in per-server manifests (server/ckpt.h).  A save is four
 * collectives: CKPT_LIST (each server's committed generations and the
 * highest one it has; the new generation G is one more than any), SAVE
 * (every server writes G's file durably), SAVE_END (only when all wrote:
 * each commits G in its manifest; else each removes its file), SAVE_CLEAN
 * (only when all committed: older generations go).  A load is three:
 * CKPT_LIST (the newest generation committed on every server with the same
 * save id is chosen), LOAD (every server reads, checks and stages it),
 * LOAD_END (applies, only when every server staged the same save, or drops).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/datapath.h"
#include "common/err.h"
#include "optim/optim.h"
#include "worker/group.h"
#include "worker/op.h"
#include "worker/wrk_int.h"

#define CTL_TEXT_MAX 4096 /* longest text a collective carries (inline, copied) */
#define CTL_DIR_MAX DP_CKPT_DIR_MAX /* common/datapath.h: both sides agree */

/* What the servers answered (one slot per server). */
typedef struct wrk_ctl_res {
    int n;
    uint64_t *ids;     /* REPLY.round: a LOAD's save id */
    uint8_t **pairs;   /* LOAD: (key, round) int64 pairs */
    uint64_t *npairs;
} wrk_ctl_res;

static void res_free(wrk_ctl_res *r)
{
    for (int i = 0; r->pairs && i < r->n; i++)
        free(r->pairs[i]);
    free(r->pairs);
    free(r->ids);
    free(r->npairs);
}

static int res_init(wrk_ctl_res *r, int n)
{
    r->n = n;
    r->ids = calloc((size_t)n, sizeof *r->ids);
    r->pairs = calloc((size_t)n, sizeof *r->pairs);
    r->npairs = calloc((size_t)n, sizeof *r->npairs);
    if (r->ids == NULL || r->pairs == NULL || r->npairs == NULL) {
        res_free(r);
        return err_set(KVS_ENOMEM, "out of memory");
    }
    return 0;
}

/* A collective's answer from server q->server (I/O thread; op.h's reply):
 * keep the save id and the LOAD pairs it carries. */
static int ctl_reply(kvs_store *s, wrk_req *q, const proto_hdr *h, const void *body,
                     const char **why)
{
    wrk_ctl_res *r = q->op->owner;
    (void)s;
    if (r == NULL || q->server < 0 || q->server >= r->n)
        return 0;
    r->ids[q->server] = h->round;
    if (body == NULL || h->body_len == 0)
        return 0;
    if (h->dtype != KVS_INT64 || h->body_len % 16 != 0 || r->pairs[q->server]) {
        *why = "a server's answer to a load is malformed";
        return KVS_EPROTO;
    }
    if ((r->pairs[q->server] = malloc(h->body_len)) == NULL) {
        *why = "out of memory";
        return KVS_ENOMEM;
    }
    memcpy(r->pairs[q->server], body, h->body_len);
    r->npairs[q->server] = h->body_len / 16;
    return 0;
}

/* A collective's answers go to the caller's wrk_ctl_res (which it owns). */
static const wrk_op_ops ctl_ops = {.reply = ctl_reply};

/* Send (type, key, text) to every server as the next collective; answers
 * into res (may be NULL). */
static int collective(kvs_store *s, int type, uint64_t key, const char *text, wrk_ctl_res *res)
{
    size_t len = strlen(text);
    wrk_op *op = calloc(1, sizeof *op);
    if (op == NULL || len >= CTL_TEXT_MAX ||
        (op->reqs = calloc((size_t)s->num_servers, sizeof *op->reqs)) == NULL) {
        free(op);
        return err_set(len >= CTL_TEXT_MAX ? KVS_ETOOBIG : KVS_ENOMEM,
                       len >= CTL_TEXT_MAX ? "text of %zu bytes (at most %d)" : "out of memory",
                       len, CTL_TEXT_MAX - 1);
    }
    op->store = s;
    op->type = WRK_OP_CTL;
    op->sync = true;
    op->ops = &ctl_ops;
    op->owner = res;
    op->nreqs = (size_t)s->num_servers;
    op->pending = s->num_servers;
    pthread_mutex_lock(&s->mu);
    uint64_t seq = s->ctl_seq++;
    pthread_mutex_unlock(&s->mu);
    for (int r = 0; r < s->num_servers; r++) {
        wrk_req *q = &op->reqs[r];
        q->op = op;
        q->server = r;
        q->h.type = (uint16_t)type;
        q->h.key = key;
        q->h.round = seq;
        q->send = (const uint8_t *)text;
        q->h.body_len = len;
    }
    return wrk_op_run(s, op);
}

static int check_store(kvs_store *s, const char *what)
{
    if (s == NULL)
        return err_set(KVS_EINVAL, "store is NULL");
    if (s->kind != WRK_DIST)
        return err_set(KVS_ENOTSUP, "%s: the local store has no servers", what);
    return 0;
}

int kvs_set_optimizer(kvs_store *s, const char *spec)
{
    optim_spec o;
    char why[512];
    err_clear();
    if (s == NULL || spec == NULL)
        return err_set(KVS_EINVAL, "store or spec is NULL");
    if (strlen(spec) >= OPTIM_SPEC_MAX)
        return err_set(KVS_EINVAL, "optimizer spec of %zu bytes (at most %d)", strlen(spec),
                       OPTIM_SPEC_MAX - 1);
    if (s->kind != WRK_DIST) {
        if (optim_parse(spec, &o, why, sizeof why) != 0)
            return err_set(KVS_EINVAL, "%s", why);
        return err_set(KVS_ENOTSUP, "the local store keeps plain sums: apply '%s' in the "
                       "worker", optim_name(o.kind));
    }
    /* rank 0's spec decides on the servers; the others' is not read (MXNet) */
    return collective(s, PROTO_OPT_SET, s->c.update_on_kvstore ? 1 : 0, spec, NULL);
}

int kvs_set_optimizer_key(kvs_store *s, uint64_t key, const char *settings)
{
    optim_mult m;
    char why[512];
    int rc;
    err_clear();
    if ((rc = check_store(s, "kvs_set_optimizer_key")) != 0)
        return rc;
    if (settings == NULL)
        return err_set(KVS_EINVAL, "settings are NULL");
    if (optim_parse_mult(settings, &m, why, sizeof why) != 0)
        return err_set(KVS_EINVAL, "%s", why);
    return collective(s, PROTO_OPT_KEY, key, settings, NULL);
}

/* What CKPT_LIST found on each server. */
typedef struct ckpt_view {
    bool manifest, direct;
    uint64_t maxgen;
    int n;
    const uint8_t *pairs; /* n (generation, save id) int64 pairs, newest first */
} ckpt_view;

static uint64_t get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Decode server r's CKPT_LIST answer. */
static int ckpt_view_of(const wrk_ctl_res *res, int r, ckpt_view *v)
{
    if (res->npairs[r] < 1 || res->pairs[r] == NULL)
        return err_set(KVS_EPROTO, "server %d's answer to a checkpoint listing is malformed", r);
    uint64_t flags = get64(res->pairs[r]);
    v->manifest = flags & 1u;
    v->direct = (flags & 2u) != 0;
    v->maxgen = get64(res->pairs[r] + 8);
    v->n = (int)(res->npairs[r] - 1);
    v->pairs = res->pairs[r] + 16;
    for (int i = 0; i < v->n; i++)
        if (get64(v->pairs + 16 * i) == 0 || (i > 0 && get64(v->pairs + 16 * i) >=
                                                         get64(v->pairs + 16 * (i - 1))))
            return err_set(KVS_EPROTO, "server %d's answer to a checkpoint listing is "
                           "malformed", r);
    return 0;
}

/* CKPT_LIST of dir on every server, into res. */
static int ckpt_list(kvs_store *s, const char *dir, wrk_ctl_res *res)
{
    int rc = res_init(res, s->num_servers);
    if (rc)
        return rc;
    rc = collective(s, PROTO_CKPT_LIST, 0, dir, res);
    for (int r = 0; rc == 0 && r < res->n; r++) {
        ckpt_view v;
        rc = ckpt_view_of(res, r, &v);
    }
    return rc;
}

/* "G DIR" */
static void gen_dir_text(char *buf, size_t len, uint64_t gen, const char *dir)
{
    snprintf(buf, len, "%llu %s", (unsigned long long)gen, dir);
}

/* The generation kvs_load takes: the newest committed on every server with
 * the same save id everywhere; 0 when dir holds every server's file itself
 * (a generation's directory, or an older layout). */
static int choose_gen(const wrk_ctl_res *res, const char *dir, uint64_t *gen)
{
    ckpt_view v0, v;
    char list[700];
    size_t len = 0;
    ckpt_view_of(res, 0, &v0);
    bool any_man = false, all_direct = true;
    for (int r = 0; r < res->n; r++) {
        ckpt_view_of(res, r, &v);
        any_man |= v.manifest;
        all_direct &= v.direct;
    }
    if (!any_man && all_direct) {
        *gen = 0;
        return 0;
    }
    for (int r = 0; r < res->n; r++) {
        ckpt_view_of(res, r, &v);
        if (!v.manifest)
            return err_set(KVS_EPROTO, "%s: server %d has no committed checkpoint there (no "
                           "server-%d.manifest%s)", dir, r, r,
                           any_man ? "" : ", and not every server has its server-N.kvsckpt");
    }
    for (int i = 0; i < v0.n; i++) {
        uint64_t g = get64(v0.pairs + 16 * i), id = get64(v0.pairs + 16 * i + 8);
        bool everywhere = true;
        for (int r = 1; r < res->n && everywhere; r++) {
            bool found = false;
            ckpt_view_of(res, r, &v);
            for (int j = 0; j < v.n && !found; j++)
                found = get64(v.pairs + 16 * j) == g && get64(v.pairs + 16 * j + 8) == id;
            everywhere = found;
        }
        if (everywhere) {
            *gen = g;
            return 0;
        }
    }
    for (int r = 0; r < res->n && len < sizeof list - 64; r++) {
        ckpt_view_of(res, r, &v);
        len += (size_t)snprintf(list + len, sizeof list - len, "%sserver %d:", r ? "; " : "", r);
        for (int j = 0; j < v.n && len < sizeof list - 64; j++)
            len += (size_t)snprintf(list + len, sizeof list - len, " %llu/%016llx",
                                    (unsigned long long)get64(v.pairs + 16 * j),
                                    (unsigned long long)get64(v.pairs + 16 * j + 8));
    }
    return err_set(KVS_EPROTO, "%s: no checkpoint generation is committed on every server with "
                   "the same save (generation/save id: %s)", dir, list);
}

static int check_dir(const char *dir)
{
    if (dir == NULL || dir[0] == '\0')
        return err_set(KVS_EINVAL, "the checkpoint directory is NULL or empty");
    if (strlen(dir) > CTL_DIR_MAX)
        return err_set(KVS_EINVAL, "checkpoint directory name of %zu bytes (at most %d)",
                       strlen(dir), CTL_DIR_MAX);
    return 0;
}

int kvs_save(kvs_store *s, const char *dir)
{
    wrk_ctl_res res = {0};
    uint64_t id = 0, gen = 0;
    char text[CTL_DIR_MAX + 32];
    int rc;
    err_clear();
    if ((rc = check_store(s, "kvs_save")) != 0 || (rc = check_dir(dir)) != 0)
        return rc;
    /* 1: the new generation is above every one any server has */
    rc = ckpt_list(s, dir, &res);
    for (int r = 0; rc == 0 && r < res.n; r++) {
        ckpt_view v;
        ckpt_view_of(&res, r, &v);
        if (v.maxgen > gen)
            gen = v.maxgen;
        for (int i = 0; i < v.n; i++)
            if (get64(v.pairs + 16 * i) > gen)
                gen = get64(v.pairs + 16 * i);
    }
    res_free(&res);
    if (rc)
        return rc;
    if (gen >= (1ull << 62))
        return err_set(KVS_EINVAL, "%s: generation numbers are exhausted", dir);
    gen++;
    /* the save id marks every server's file of this save (rank 0's is used) */
    if (getrandom(&id, sizeof id, 0) != (ssize_t)sizeof id)
        id = (uint64_t)(uintptr_t)&id ^ (uint64_t)s->ctl_seq;
    id &= ~(1ull << 63); /* the top bit marks automatic checkpoints */
    /* 2: every server writes generation gen durably */
    gen_dir_text(text, sizeof text, gen, dir);
    rc = collective(s, PROTO_SAVE, id, text, NULL);
    if (rc == KVS_EPEERDEAD || rc == KVS_ECLOSED)
        return rc;
    /* 3: every server wrote: all commit it; else all remove their file */
    char keep[1024];
    snprintf(keep, sizeof keep, "%s", kvs_last_error());
    int rc2 = collective(s, PROTO_SAVE_END, rc == 0 ? 1 : 0, "", NULL);
    if (rc)
        return err_set(rc, "%s", keep);
    if (rc2)
        return rc2;
    /* 4: committed everywhere: older generations can go */
    return collective(s, PROTO_SAVE_CLEAN, gen, dir, NULL);
}

int kvs_load(kvs_store *s, const char *dir)
{
    wrk_ctl_res res = {0};
    char keep[1024] = "";
    int rc, rc2;
    err_clear();
    if ((rc = check_store(s, "kvs_load")) != 0 || (rc = check_dir(dir)) != 0)
        return rc;
    wrk_grp_forget(s); /* values the group keeps for late pulls */
    uint64_t gen = 0;
    char text[CTL_DIR_MAX + 32];
    rc = ckpt_list(s, dir, &res);
    if (rc == 0)
        rc = choose_gen(&res, dir, &gen);
    res_free(&res);
    memset(&res, 0, sizeof res);
    if (rc)
        return rc;
    if ((rc = res_init(&res, s->num_servers)) != 0)
        return rc;
    gen_dir_text(text, sizeof text, gen, dir);
    rc = collective(s, PROTO_LOAD, 0, text, &res);
    for (int r = 1; rc == 0 && r < res.n; r++)
        if (res.ids[r] != res.ids[0])
            rc = err_set(KVS_EPROTO, "%s holds parts of different saves: server 0's file is "
                         "from save %016llx, server %d's from save %016llx (a save was "
                         "interrupted, or files were mixed)", dir,
                         (unsigned long long)res.ids[0], r, (unsigned long long)res.ids[r]);
    if (rc)
        snprintf(keep, sizeof keep, "%s", kvs_last_error());
    if (rc == KVS_EPEERDEAD || rc == KVS_ECLOSED) { /* the job is over: no second round */
        res_free(&res);
        return err_set(rc, "%s", keep);
    }
    /* every worker saw the same answers, so all decide alike */
    rc2 = collective(s, PROTO_LOAD_END, rc == 0 ? 1 : 0, "", NULL);
    if (rc == 0 && rc2 == 0) {
        pthread_mutex_lock(&s->mu);
        for (int r = 0; r < res.n; r++)
            for (uint64_t i = 0; i < res.npairs[r]; i++) {
                uint64_t key, round;
                memcpy(&key, res.pairs[r] + 16 * i, 8);
                memcpy(&round, res.pairs[r] + 16 * i + 8, 8);
                wrk_key *k = hmap_get(&s->keys, key);
                if (k)
                    k->pushes = round; /* the next push is that round */
            }
        pthread_mutex_unlock(&s->mu);
    }
    res_free(&res);
    if (rc)
        return err_set(rc, "%s", keep);
    return rc2;
}
