/* replica.c - replicated servers: forwards, held answers, copies and
 * promotions on a server (replica.h; docs/design.md "Replicated servers"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/datapath.h"
#include "common/log.h"
#include "common/sizes.h"
#include "net/auth.h"
#include "net/live.h"
#include "server/replica.h"
#include "server/update.h"

#define REPL_IDENT_MAX 64
/* After a REPL_VALUE's value, when the entry has optimizer state: u64 t,
 * u32 number of state arrays, u32 flags (1: the master copy holds the
 * weights), then the arrays (srv_upd_state_bytes each). */
#define REPL_UPD_HDR 16

/* What the replica knows of an entry of the store. */
typedef struct repl_ent {
    struct repl_ent *next; /* same hash */
    uint64_t key;
    uint32_t part;
    int from;      /* -1: we own it; else the rank of the server whose copy it is */
    uint64_t sent; /* our last forward of it (0: none) */
} repl_ent;

/* An answer waiting for the backup's acknowledgement of forward `tag`. */
typedef struct repl_held {
    struct repl_held *next;
    uint8_t ident[REPL_IDENT_MAX];
    size_t ident_len;
    proto_hdr req;
    srv_buf *value; /* a reference, or NULL */
    uint64_t round;
} repl_held;

struct srv_repl {
    const cfg *c;
    uv_loop_t *loop;
    void *zctx;
    srv_store *st;
    net_sock *data;
    net_link **link;
    srv_reply_fn reply; /* the store's own answer path */
    void *reply_arg;
    srv_hold_fn hold;
    char who[32];
    int rank, node_id, nserver;
    char (*ep)[128]; /* per server rank: its data endpoint */
    int *owner;      /* per key range: the rank of the server that owns it */
    int target;      /* our backup's rank (-1: none) */
    net_sock *out;   /* DEALER to the backup */
    uint64_t seq;    /* forwards sent */
    uint64_t acked;  /* every forward up to this one is acknowledged */
    uint64_t sync_seq; /* the range copy's last forward */
    bool sync_pending;
    hmap ents;       /* hash(key, part) -> repl_ent chain */
    hmap held;       /* forward seq -> repl_held chain */
    uint64_t nheld;
    /* as a backup: the acknowledgement owed to the server we back up (one
     * per turn of the loop, for every forward received in it) */
    uv_idle_t *ack_idle; /* its own allocation: freed by its close callback */
    bool ack_owed;
    uint8_t ack_ident[REPL_IDENT_MAX];
    size_t ack_ident_len;
    proto_hdr ack;
};

static uint64_t ent_hash(uint64_t key, uint32_t part)
{
    return hmap_mix(key) ^ ((uint64_t)part * 0x9E3779B97F4A7C15ull);
}

static repl_ent *ent_find(srv_repl *r, uint64_t key, uint32_t part)
{
    for (repl_ent *e = hmap_get(&r->ents, ent_hash(key, part)); e; e = e->next)
        if (e->key == key && e->part == part)
            return e;
    return NULL;
}

static repl_ent *ent_get(srv_repl *r, uint64_t key, uint32_t part, int from)
{
    repl_ent *e = ent_find(r, key, part);
    if (e)
        return e;
    uint64_t hk = ent_hash(key, part);
    e = calloc(1, sizeof *e);
    if (e == NULL)
        return NULL;
    *e = (repl_ent){.next = hmap_get(&r->ents, hk), .key = key, .part = part, .from = from};
    if (hmap_put(&r->ents, hk, e) != 0) {
        free(e);
        return NULL;
    }
    return e;
}

/* ---- held answers ---- */

static void held_send(srv_repl *r, repl_held *h)
{
    r->reply(r->reply_arg, h->ident, h->ident_len, &h->req, 0, NULL, h->value, h->round);
    srv_buf_unref(h->value);
    free(h);
}

/* Every forward up to seq is acknowledged (or needs none): send what waited. */
static void ack_up_to(srv_repl *r, uint64_t seq)
{
    if (seq > r->seq)
        seq = r->seq;
    while (r->acked < seq) {
        repl_held *h = hmap_del(&r->held, ++r->acked);
        while (h) {
            repl_held *n = h->next;
            r->nheld--;
            held_send(r, h);
            h = n;
        }
    }
    if (r->sync_pending && r->acked >= r->sync_seq && r->link && *r->link) {
        proto_hdr s = {.type = PROTO_REPL_SYNCED, .key = (uint64_t)proto_server_id(r->target)};
        r->sync_pending = false;
        if (net_link_send(*r->link, &s, NULL) != 0)
            LOG(LOG_WARN, r->who, "repl", "could not tell the scheduler that server %d holds "
                "our keys", r->target);
        else
            LOG(LOG_INFO, r->who, "repl", "server %d holds every key we own", r->target);
    }
}

/* The store's answers: a success of a data request waits for the backup's
 * acknowledgement of the entry's last forward. */
static void repl_reply(void *arg, const uint8_t *ident, size_t ident_len, const proto_hdr *req,
                       int status, const char *text, srv_buf *value, uint64_t round)
{
    srv_repl *r = arg;
    repl_ent *e = NULL;
    bool data = req->type == PROTO_INIT || req->type == PROTO_PUSH ||
                req->type == PROTO_PULL || req->type == PROTO_PUSHPULL;
    if (status == 0 && data)
        e = ent_find(r, req->key, req->part);
    repl_held *h = NULL;
    if (e == NULL || e->sent <= r->acked || ident_len > REPL_IDENT_MAX ||
        (h = calloc(1, sizeof *h)) == NULL) {
        r->reply(r->reply_arg, ident, ident_len, req, status, text, value, round);
        return;
    }
    memcpy(h->ident, ident, ident_len);
    h->ident_len = ident_len;
    h->req = *req;
    h->value = value;
    if (value)
        atomic_fetch_add(&value->refs, 1);
    h->round = round;
    h->next = hmap_get(&r->held, e->sent);
    if (hmap_put(&r->held, e->sent, h) != 0) { /* out of memory: answer now */
        r->reply(r->reply_arg, ident, ident_len, req, status, text, value, round);
        srv_buf_unref(h->value);
        free(h);
        return;
    }
    r->nheld++;
}

static void repl_hold(void *arg, uintptr_t fuse, int delta)
{
    srv_repl *r = arg;
    if (r->hold)
        r->hold(r->reply_arg, fuse, delta);
}

/* ---- forwards ---- */

static void buf_free(void *data, void *hint)
{
    (void)data;
    srv_buf_unref(hint);
}

/* Send entry v to the backup; e is its replica record. */
static void forward(srv_repl *r, repl_ent *e, const srv_entry_view *v)
{
    e->sent = ++r->seq;
    if (r->out == NULL) { /* no backup: nothing to wait for */
        ack_up_to(r, r->seq);
        return;
    }
    proto_hdr h = {.type = PROTO_REPL_VALUE, .sender = r->node_id, .req_id = e->sent,
                   .key = v->key, .part = v->part, .offset = v->offset, .count = v->count,
                   .total = v->total, .round = v->round, .dtype = (uint32_t)v->dtype,
                   .flags = v->async ? PROTO_F_ASYNC : 0, .body_len = v->bytes};
    zmq_msg_t body, *bp = NULL;
    srv_buf *val = (srv_buf *)v->value;
    const srv_upd *u = v->upd;
    if (u != NULL) { /* value and optimizer state: one body, copied */
        uint64_t sb = srv_upd_state_bytes(u);
        h.body_len = v->bytes + REPL_UPD_HDR + (uint64_t)u->nstate * sb;
        if (zmq_msg_init_size(&body, h.body_len) != 0) {
            LOG_LIMITED(LOG_ERROR, r->who, "repl", "out of memory forwarding key %llu: its "
                        "answers wait", (unsigned long long)v->key);
            return;
        }
        uint8_t *b = zmq_msg_data(&body);
        memcpy(b, val->data, v->bytes);
        b += v->bytes;
        le_put64(b, u->t);
        le_put32(b + 8, (uint32_t)u->nstate);
        le_put32(b + 12, u->master_ok ? 1u : 0u);
        b += REPL_UPD_HDR;
        for (int j = 0; j < u->nstate; j++, b += sb)
            memcpy(b, u->state[j], sb);
        bp = &body;
    } else if (v->bytes > 0) {
        atomic_fetch_add(&val->refs, 1);
        if (zmq_msg_init_data(&body, val->data, v->bytes, buf_free, val) != 0) {
            srv_buf_unref(val);
            LOG_LIMITED(LOG_ERROR, r->who, "repl", "out of memory forwarding key %llu: its "
                        "answers wait", (unsigned long long)v->key);
            return;
        }
        bp = &body;
    }
    if (net_send(r->out, NULL, 0, &h, bp) != 0)
        LOG_LIMITED(LOG_ERROR, r->who, "repl", "could not forward key %llu to server %d",
                    (unsigned long long)v->key, r->target);
    if (bp)
        zmq_msg_close(bp);
}

static void on_changed(void *arg, const srv_entry_view *v)
{
    srv_repl *r = arg;
    repl_ent *e = ent_get(r, v->key, v->part, -1);
    if (e == NULL) {
        LOG_LIMITED(LOG_ERROR, r->who, "repl", "out of memory: key %llu part %u is not "
                    "replicated", (unsigned long long)v->key, v->part);
        return;
    }
    if (e->from >= 0)
        return; /* a copy: its owner forwards it */
    forward(r, e, v);
}

/* An acknowledgement from the backup. */
static void on_out(net_sock *sock, net_msg *m, void *arg)
{
    srv_repl *r = arg;
    proto_hdr h;
    zmq_msg_t *body;
    char why[256];
    proto_limits lim = {r->c->max_message};
    (void)sock;
    if (net_msg_decode(m, false, &lim, &h, &body, why, sizeof why) != 0 ||
        h.sender != proto_server_id(r->target)) {
        LOG_LIMITED(LOG_WARN, r->who, "repl", "dropped a bad message from our backup: %s",
                    why);
        return;
    }
    if (h.type == PROTO_ERROR || h.status != 0)
        LOG_LIMITED(LOG_ERROR, r->who, "repl", "server %d did not keep key %llu part %u: %.*s",
                    r->target, (unsigned long long)h.key, h.part,
                    body ? (int)zmq_msg_size(body) : 0,
                    body ? (const char *)zmq_msg_data(body) : "");
    if (h.type == PROTO_REPL_ACK)
        ack_up_to(r, h.req_id);
}

/* Connect to server t as our backup (t < 0: none). */
static void set_target(srv_repl *r, int t)
{
    char ident[40], why[256];
    net_sock_free(r->out);
    r->out = NULL;
    r->target = t;
    if (t < 0)
        return;
    uint8_t tag[8] = {0};
    net_random(tag, sizeof tag);
    snprintf(ident, sizeof ident, "s%d-%02x%02x%02x%02x%02x%02x%02x%02x", r->node_id, tag[0],
             tag[1], tag[2], tag[3], tag[4], tag[5], tag[6], tag[7]);
    if (net_sock_new(r->loop, r->zctx, ZMQ_DEALER, r->c->water_mark, on_out, r, &r->out) != 0)
        goto fail;
    net_sock_set_split(r->out, DP_FRAME_MAX);
    zmq_setsockopt(net_sock_zmq(r->out), ZMQ_ROUTING_ID, ident, strlen(ident));
    net_live_heartbeats(net_sock_zmq(r->out), r->c);
    if (net_auth_connect(r->c, net_sock_zmq(r->out), "server", r->node_id, r->ep[t], why,
                         sizeof why) != 0 ||
        zmq_connect(net_sock_zmq(r->out), r->ep[t]) != 0 || net_sock_start(r->out) != 0)
        goto fail;
    LOG(LOG_INFO, r->who, "repl", "backup of our keys: server %d at %s", t, r->ep[t]);
    return;
fail:
    LOG(LOG_ERROR, r->who, "repl", "cannot connect to our backup, server %d at %s: our keys "
        "have no copy", t, r->ep[t]);
    net_sock_free(r->out);
    r->out = NULL;
}

/* The next live server after us (-1: none). */
static int next_live(const srv_repl *r)
{
    for (int i = 1; i < r->nserver; i++) {
        int t = (r->rank + i) % r->nserver;
        for (int k = 0; k < r->nserver; k++)
            if (r->owner[k] == t)
                return t;
    }
    return -1;
}

/* Our backup is new: copy it everything we own. */
static void range_copy(srv_repl *r)
{
    size_t n = srv_store_views(r->st, NULL, 0);
    srv_entry_view *v = n ? calloc(n, sizeof *v) : NULL;
    if (n && v == NULL) {
        LOG(LOG_ERROR, r->who, "repl", "out of memory copying our keys to server %d",
            r->target);
        return;
    }
    n = srv_store_views(r->st, v, n);
    uint64_t copied = 0;
    for (size_t i = 0; i < n; i++) {
        repl_ent *e = ent_get(r, v[i].key, v[i].part, -1);
        if (e == NULL || e->from >= 0)
            continue;
        forward(r, e, &v[i]);
        copied++;
    }
    free(v);
    r->sync_seq = r->seq;
    r->sync_pending = r->target >= 0;
    LOG(LOG_INFO, r->who, "repl", "copying %llu key parts to server %d",
        (unsigned long long)copied, r->target);
    if (r->out == NULL)
        ack_up_to(r, r->seq);
    else if (r->acked >= r->sync_seq)
        ack_up_to(r, r->acked);
}

/* ---- the backup's side ---- */

static void on_ack_idle(uv_idle_t *h)
{
    srv_repl *r = h->data;
    uv_idle_stop(r->ack_idle);
    if (r->ack_owed) {
        r->ack_owed = false;
        net_send(r->data, r->ack_ident, r->ack_ident_len, &r->ack, NULL);
    }
}

bool srv_repl_type(int type)
{
    return type == PROTO_REPL_VALUE || type == PROTO_REPL_ACK;
}

static bool live(const srv_repl *r, int rank)
{
    for (int k = 0; k < r->nserver; k++)
        if (r->owner[k] == rank)
            return true;
    return false;
}

/* Copy len bytes from offset off of the body's frames to dst. */
static void body_read(zmq_msg_t *body, int nbody, uint64_t off, void *dst, uint64_t len)
{
    uint8_t *d = dst;
    for (int i = 0; i < nbody && len > 0; i++) {
        uint64_t n = zmq_msg_size(&body[i]);
        if (off >= n) {
            off -= n;
            continue;
        }
        uint64_t take = n - off < len ? n - off : len;
        memcpy(d, (uint8_t *)zmq_msg_data(&body[i]) + off, take);
        d += take;
        len -= take;
        off = 0;
    }
}

/* The value of a REPL_VALUE: the received frame itself when it is the
 * whole body. */
static srv_buf *value_of(const proto_hdr *h, zmq_msg_t *body, int nbody)
{
    uint64_t bytes = h->count * kvs_dtype_size((kvs_dtype)h->dtype);
    if (nbody == 1 && zmq_msg_size(body) == bytes)
        return srv_buf_adopt(body);
    srv_buf *b = srv_buf_new_value(bytes);
    if (b)
        body_read(body, nbody, 0, b->data, bytes);
    return b;
}

/* The optimizer state after the value (*out NULL: none).  0, or KVS_EPROTO
 * (sizes that do not add up) / KVS_ENOMEM with why. */
static int upd_of(srv_repl *r, const proto_hdr *h, zmq_msg_t *body, int nbody, srv_upd **out,
                  char *why, size_t whylen)
{
    uint64_t bytes = h->count * kvs_dtype_size((kvs_dtype)h->dtype);
    uint8_t uh[REPL_UPD_HDR];
    *out = NULL;
    if (h->body_len == bytes)
        return 0;
    if (h->body_len - bytes < REPL_UPD_HDR) {
        snprintf(why, whylen, "%llu bytes after the value: not an optimizer state",
                 (unsigned long long)(h->body_len - bytes));
        return KVS_EPROTO;
    }
    body_read(body, nbody, bytes, uh, REPL_UPD_HDR);
    srv_upd *u = calloc(1, sizeof *u);
    if (u == NULL) {
        snprintf(why, whylen, "server out of memory");
        return KVS_ENOMEM;
    }
    u->t = le_get64(uh);
    u->dtype = (kvs_dtype)h->dtype;
    u->count = h->count;
    u->master_ok = (le_get32(uh + 12) & 1u) != 0;
    u->gen = r->st->optim ? r->st->optim->gen : 0;
    uint32_t ns = le_get32(uh + 8);
    uint64_t sb = srv_upd_state_bytes(u);
    if (ns > OPTIM_MAX_STATE || h->body_len - bytes - REPL_UPD_HDR != (uint64_t)ns * sb) {
        srv_upd_free(u);
        snprintf(why, whylen, "optimizer state of %u arrays in %llu bytes", ns,
                 (unsigned long long)(h->body_len - bytes - REPL_UPD_HDR));
        return KVS_EPROTO;
    }
    for (uint32_t j = 0; j < ns; j++) {
        if ((u->state[j] = malloc(sb ? sb : 1)) == NULL) {
            srv_upd_free(u);
            snprintf(why, whylen, "server out of memory");
            return KVS_ENOMEM;
        }
        u->nstate = (int)j + 1;
        body_read(body, nbody, bytes + REPL_UPD_HDR + (uint64_t)j * sb, u->state[j], sb);
    }
    *out = u;
    return 0;
}

int srv_repl_on_data(srv_repl *r, net_msg *m, const uint8_t *ident, size_t ident_len,
                     const proto_hdr *h, zmq_msg_t *body, int nbody, char *why, size_t whylen)
{
    char want[24];
    int from = (h->sender - 8) / 2;
    int n = snprintf(want, sizeof want, "s%d-", h->sender);
    if (h->sender < 8 || h->sender % 2 != 0 || from >= r->nserver || from == r->rank) {
        snprintf(why, whylen, "%s from sender %d, not another server of this job",
                 proto_type_name(h->type), h->sender);
        return KVS_EPROTO;
    }
    if (ident_len <= (size_t)n || memcmp(want, ident, (size_t)n) != 0) {
        snprintf(why, whylen, "sender %d does not match its connection", h->sender);
        return KVS_EPROTO;
    }
    if (r->c->security != CFG_SEC_NONE &&
        !net_auth_peer_is(net_auth_peer(&m->frames[1]), "server", h->sender)) {
        snprintf(why, whylen, "sender %d did not prove that it is server %d", h->sender, from);
        return KVS_EAUTH;
    }
    if (h->type != PROTO_REPL_VALUE) {
        snprintf(why, whylen, "a server's data socket does not take %s from servers",
                 proto_type_name(h->type));
        return KVS_EPROTO;
    }
    proto_hdr a = {.type = PROTO_REPL_ACK, .sender = r->node_id, .req_id = h->req_id,
                   .key = h->key, .part = h->part, .round = h->round};
    char text[200] = "";
    if (!live(r, from)) /* declared dead: its late forwards are not ours to keep */
        return 0;
    repl_ent *e = ent_get(r, h->key, h->part, from);
    srv_buf *val = NULL;
    srv_upd *upd = NULL;
    int rc = 0;
    if (e == NULL) {
        rc = KVS_ENOMEM;
        snprintf(text, sizeof text, "server out of memory");
    } else if (e->from != from) {
        rc = KVS_EINVAL;
        snprintf(text, sizeof text, "key %llu part %u is %s", (unsigned long long)h->key,
                 h->part, e->from < 0 ? "ours" : "another server's copy");
    } else if ((rc = upd_of(r, h, body, nbody, &upd, text, sizeof text)) != 0) {
        /* text says why */
    } else if ((val = value_of(h, body, nbody)) == NULL) {
        srv_upd_free(upd);
        rc = KVS_ENOMEM;
        snprintf(text, sizeof text, "server out of memory");
    } else if ((rc = srv_store_copy_in(r->st, h, val, upd)) != 0) {
        srv_buf_unref(val);
        srv_upd_free(upd);
        snprintf(text, sizeof text, "key %llu part %u: %s", (unsigned long long)h->key, h->part,
                 kvs_strerror(rc));
    }
    a.status = rc;
    if (rc) {
        LOG_LIMITED(LOG_ERROR, r->who, "repl", "not kept: %s", text);
        net_send_text(r->data, ident, ident_len, &a, text);
        return 0;
    }
    if (ident_len > REPL_IDENT_MAX) { /* (the data socket's bound is smaller) */
        net_send(r->data, ident, ident_len, &a, NULL);
        return 0;
    }
    /* kept: acknowledged with everything else this turn of the loop brings
     * (acknowledgements are cumulative: forwards arrive in order) */
    if (r->ack_owed && (r->ack_ident_len != ident_len ||
                        memcmp(r->ack_ident, ident, ident_len) != 0))
        net_send(r->data, r->ack_ident, r->ack_ident_len, &r->ack, NULL);
    memcpy(r->ack_ident, ident, ident_len);
    r->ack_ident_len = ident_len;
    r->ack = a;
    if (!r->ack_owed) {
        r->ack_owed = true;
        uv_idle_start(r->ack_idle, on_ack_idle);
    }
    return 0;
}

/* ---- membership ---- */

static int parse_owners(srv_repl *r, const char *body, size_t len, int *owner)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf - 1 ? len : sizeof buf - 1),
             body ? body : "");
    if (strncmp(buf, "owners=", 7) != 0)
        return -1;
    char *p = buf + 7;
    for (int i = 0; i < r->nserver; i++) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v >= r->nserver || (*end != ',' && i < r->nserver - 1) ||
            (i == r->nserver - 1 && *end != '\0' && *end != '\n'))
            return -1;
        owner[i] = (int)v;
        p = end + 1;
    }
    return 0;
}

void srv_repl_promote(srv_repl *r, const proto_hdr *h, const char *body, size_t len)
{
    int *owner = calloc((size_t)r->nserver, sizeof *owner);
    int dead = (int)((h->key - 8) / 2), heir = (int)((h->round - 8) / 2);
    if (owner == NULL || h->key < 8 || h->key % 2 || dead >= r->nserver || h->round < 8 ||
        h->round % 2 || heir >= r->nserver || parse_owners(r, body, len, owner) != 0) {
        LOG(LOG_ERROR, r->who, "repl", "ignored a malformed PROMOTE from the scheduler");
        free(owner);
        return;
    }
    memcpy(r->owner, owner, (size_t)r->nserver * sizeof *owner);
    free(owner);
    if (heir == r->rank) {
        uint64_t took = 0;
        for (size_t i = 0; i < r->ents.cap; i++) {
            if (r->ents.used[i] != 1)
                continue;
            for (repl_ent *e = r->ents.vals[i]; e; e = e->next)
                if (e->from == dead) {
                    e->from = -1;
                    took++;
                }
        }
        LOG(LOG_WARN, r->who, "repl", "server %d died: we own its %llu key parts now", dead,
            (unsigned long long)took);
    } else {
        LOG(LOG_WARN, r->who, "repl", "server %d died: server %d owns its keys now", dead,
            heir);
    }
    int t = next_live(r);
    if (t != r->target || heir == r->rank) {
        if (t != r->target)
            set_target(r, t);
        range_copy(r);
    }
}

/* ---- life ---- */

int srv_repl_new(const cfg *c, uv_loop_t *loop, void *zctx, srv_store *st, net_sock *data,
                 net_link **link, srv_repl **out)
{
    srv_repl *r = calloc(1, sizeof *r);
    *out = NULL;
    if (r == NULL)
        return KVS_ENOMEM;
    *r = (srv_repl){.c = c, .loop = loop, .zctx = zctx, .st = st, .data = data, .link = link,
                    .reply = st->reply, .reply_arg = st->reply_arg, .hold = st->hold,
                    .rank = -1, .nserver = c->num_server, .target = -1};
    snprintf(r->who, sizeof r->who, "server");
    r->ep = calloc((size_t)c->num_server, sizeof *r->ep);
    r->owner = calloc((size_t)c->num_server, sizeof *r->owner);
    if (r->ep == NULL || r->owner == NULL) {
        srv_repl_free(r);
        return KVS_ENOMEM;
    }
    for (int i = 0; i < c->num_server; i++)
        r->owner[i] = i;
    hmap_init(&r->ents);
    hmap_init(&r->held);
    if ((r->ack_idle = malloc(sizeof *r->ack_idle)) == NULL) {
        srv_repl_free(r);
        return KVS_ENOMEM;
    }
    uv_idle_init(loop, r->ack_idle);
    r->ack_idle->data = r;
    st->reply = repl_reply;
    st->reply_arg = r;
    st->hold = r->hold ? repl_hold : NULL;
    st->changed = on_changed;
    st->changed_arg = r;
    *out = r;
    return 0;
}

void srv_repl_registered(srv_repl *r, int rank, int node_id, const char *table, size_t len)
{
    int nn = r->c->num_server + r->c->num_worker;
    proto_node *nodes = calloc((size_t)nn, sizeof *nodes);
    char why[256];
    r->rank = rank;
    r->node_id = node_id;
    snprintf(r->who, sizeof r->who, "server %d", rank);
    int n = nodes ? proto_parse_nodes(table ? table : "", len, nodes, nn, why, sizeof why) : -1;
    for (int i = 0; i < n; i++) {
        int s = (nodes[i].id - 8) / 2;
        if (nodes[i].role == CFG_ROLE_SERVER && nodes[i].id >= 8 && nodes[i].id % 2 == 0 &&
            s < r->nserver)
            snprintf(r->ep[s], sizeof r->ep[s], "%s", nodes[i].endpoint);
    }
    free(nodes);
    int t = next_live(r);
    if (t >= 0 && r->ep[t][0] == '\0') {
        LOG(LOG_ERROR, r->who, "repl", "the node table has no server %d: our keys have no "
            "copy", t);
        t = -1;
    }
    set_target(r, t);
}

void srv_repl_free(srv_repl *r)
{
    if (r == NULL)
        return;
    if (r->ack_idle) /* freed once the loop runs its close callbacks */
        uv_close((uv_handle_t *)r->ack_idle, (uv_close_cb)free);
    net_sock_free(r->out);
    for (size_t i = 0; i < r->ents.cap; i++) {
        if (r->ents.used[i] != 1)
            continue;
        repl_ent *e = r->ents.vals[i];
        while (e) {
            repl_ent *n = e->next;
            free(e);
            e = n;
        }
    }
    for (size_t i = 0; i < r->held.cap; i++) {
        if (r->held.used[i] != 1)
            continue;
        repl_held *h = r->held.vals[i];
        while (h) {
            repl_held *n = h->next;
            srv_buf_unref(h->value);
            free(h);
            h = n;
        }
    }
    hmap_fini(&r->ents);
    hmap_fini(&r->held);
    free(r->ep);
    free(r->owner);
    free(r);
}
