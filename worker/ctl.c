/* ctl.c - libkvs's collective calls to the servers: the optimizer, per-key
 * multipliers, checkpoint save and load (kvs.h).
 *
 * Each call sends one request to every server carrying this worker's
 * collective sequence number (proto.h types 48-55) and waits for every
 * answer; a server answers once all workers' requests of that number have
 * arrived, acting on worker rank 0's.  A save is two collectives: SAVE
 * writes and syncs every server's temporary file, SAVE_END renames them
 * into place only when all were written.  A load is two too: LOAD
 * reads, checks and stages the files on every server, LOAD_END applies
 * (only when every server staged the same save) or drops them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/err.h"
#include "optim/optim.h"
#include "worker/wrk_int.h"

#define CTL_TEXT_MAX 4096 /* longest text a collective carries (inline, copied) */
#define CTL_DIR_MAX 3000  /* as the servers accept */

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

void wrk_ctl_reply(kvs_store *s, wrk_req *q, const proto_hdr *h, const void *body)
{
    wrk_ctl_res *r = q->op->ctl;
    int err = 0;
    if (r && q->server >= 0 && q->server < r->n) {
        r->ids[q->server] = h->round;
        if (body && h->body_len > 0) {
            if (h->dtype != KVS_INT64 || h->body_len % 16 != 0 || r->pairs[q->server]) {
                err = KVS_EPROTO;
            } else if ((r->pairs[q->server] = malloc(h->body_len)) == NULL) {
                err = KVS_ENOMEM;
            } else {
                memcpy(r->pairs[q->server], body, h->body_len);
                r->npairs[q->server] = h->body_len / 16;
            }
        }
    }
    wrk_op_release(s, q->op, err, err == KVS_EPROTO ? "a server's answer to a load is "
                   "malformed" : err ? "out of memory" : NULL);
}

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
    op->ctl = res;
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
    uint64_t id = 0;
    int rc;
    err_clear();
    if ((rc = check_store(s, "kvs_save")) != 0 || (rc = check_dir(dir)) != 0)
        return rc;
    /* the save id marks every server's file of this save (rank 0's is used) */
    if (getrandom(&id, sizeof id, 0) != (ssize_t)sizeof id)
        id = (uint64_t)(uintptr_t)&id ^ (uint64_t)s->ctl_seq;
    id &= ~(1ull << 63); /* the top bit marks automatic checkpoints */
    rc = collective(s, PROTO_SAVE, id, dir, NULL);
    if (rc == KVS_EPEERDEAD || rc == KVS_ECLOSED)
        return rc;
    /* every server wrote its temporary file: all rename; else none does */
    char keep[1024];
    snprintf(keep, sizeof keep, "%s", kvs_last_error());
    int rc2 = collective(s, PROTO_SAVE_END, rc == 0 ? 1 : 0, "", NULL);
    if (rc)
        return err_set(rc, "%s", keep);
    return rc2;
}

int kvs_load(kvs_store *s, const char *dir)
{
    wrk_ctl_res res = {0};
    char keep[1024] = "";
    int rc, rc2;
    err_clear();
    if ((rc = check_store(s, "kvs_load")) != 0 || (rc = check_dir(dir)) != 0)
        return rc;
    if ((rc = res_init(&res, s->num_servers)) != 0)
        return rc;
    rc = collective(s, PROTO_LOAD, 0, dir, &res);
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
