/* net.c - see net.h. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "net/net.h"

#define DRAIN_BUDGET 256 /* messages per wake-up before yielding to timers */

struct net_out {
    struct net_out *next;
    int32_t prio;  /* the header's priority (priority order) */
    uint64_t seq;  /* order of net_send calls */
    int nframes;
    zmq_msg_t frames[]; /* [ident,] header[, body frames] */
};

/* A body sent in pieces: released when ZeroMQ released every piece. */
struct net_whole {
    zmq_msg_t msg;
    atomic_int refs;
};

static void whole_unref(struct net_whole *w)
{
    if (atomic_fetch_sub(&w->refs, 1) == 1) {
        zmq_msg_close(&w->msg);
        free(w);
    }
}

/* ZeroMQ's thread: one piece of a split body is released. */
static void piece_free(void *data, void *hint)
{
    (void)data;
    whole_unref(hint);
}

/* Messages a priority-ordered socket flushes after this many received
 * ones even inside one drain, so that a long drain does not hold back the
 * first answers. */
#define PRIO_FLUSH_EVERY 32

struct net_sock {
    void *zsock;
    int type;
    uv_poll_t poll;
    uv_check_t check;
    uv_idle_t idle;
    int handles_open;
    bool started;
    bool in_drain;
    bool closing;
    net_recv_fn fn;
    void *arg;
    struct net_out *q_head, *q_tail;
    size_t queued;
    bool prio;              /* sends wait in heap (priority, then seq) until a flush */
    struct net_out **heap;
    size_t hn, hcap;
    uint64_t seq;
    uint64_t split;         /* bodies above this leave in several frames (0: never) */
    net_count_fn count;
    void *count_arg;
};

void net_sock_count(net_sock *s, net_count_fn fn, void *arg)
{
    s->count = fn;
    s->count_arg = arg;
}

/* Count frames [first, n) of a message (first 1: frame 0 is a routing id). */
static void count_frames(net_sock *s, const zmq_msg_t *f, int n, int out)
{
    int first = s->type == ZMQ_ROUTER ? 1 : 0;
    uint64_t bytes = 0;
    if (s->count == NULL)
        return;
    for (int i = first; i < n; i++)
        bytes += zmq_msg_size((zmq_msg_t *)&f[i]);
    s->count(s->count_arg, first && n > 0 ? zmq_msg_data((zmq_msg_t *)&f[0]) : NULL,
             first && n > 0 ? zmq_msg_size((zmq_msg_t *)&f[0]) : 0, bytes, out);
}

static void drain(net_sock *s);

static void on_poll(uv_poll_t *h, int status, int events)
{
    (void)status;
    (void)events;
    drain(h->data);
}

static void on_check(uv_check_t *h)
{
    drain(h->data);
}

static void on_idle(uv_idle_t *h)
{
    drain(h->data);
}

int net_sock_new(uv_loop_t *loop, void *zctx, int type, int water_mark, net_recv_fn fn,
                 void *arg, net_sock **out)
{
    net_sock *s = calloc(1, sizeof *s);
    int zero = 0, one = 1;
    if (s == NULL)
        return KVS_ENOMEM;
    s->zsock = zmq_socket(zctx, type);
    if (s->zsock == NULL) {
        free(s);
        return KVS_ENET;
    }
    s->type = type;
    s->fn = fn;
    s->arg = arg;
    zmq_setsockopt(s->zsock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s->zsock, ZMQ_SNDHWM, &water_mark, sizeof water_mark);
    zmq_setsockopt(s->zsock, ZMQ_RCVHWM, &water_mark, sizeof water_mark);
    if (type == ZMQ_ROUTER)
        zmq_setsockopt(s->zsock, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    net_sock_set_max(s, NET_CTRL_MAX);
    uv_check_init(loop, &s->check);
    uv_idle_init(loop, &s->idle);
    s->check.data = s;
    s->idle.data = s;
    s->poll.data = s;
    s->handles_open = 2;
    (void)loop;
    *out = s;
    return 0;
}

/* What a frame of n bytes costs on the wire beyond n: ZeroMQ checks
 * ZMQ_MAXMSGSIZE against the wire frame, and under CURVE that is a MESSAGE
 * command (name 8, nonce 8, MAC 16, flags 1: 33 bytes) around the data. */
#define NET_WIRE_SLACK 64

int net_sock_set_max(net_sock *s, uint64_t bytes)
{
    if (bytes < NET_CTRL_MAX)
        bytes = NET_CTRL_MAX;
    int64_t max = bytes > (uint64_t)INT64_MAX - NET_WIRE_SLACK ? INT64_MAX
                                                                : (int64_t)(bytes + NET_WIRE_SLACK);
    return zmq_setsockopt(s->zsock, ZMQ_MAXMSGSIZE, &max, sizeof max) == 0 ? 0 : KVS_ENET;
}

void *net_sock_zmq(net_sock *s)
{
    return s->zsock;
}

int net_sock_start(net_sock *s)
{
    int fd;
    size_t len = sizeof fd;
    if (zmq_getsockopt(s->zsock, ZMQ_FD, &fd, &len) != 0)
        return KVS_ENET;
    if (uv_poll_init(s->check.loop, &s->poll, fd) != 0)
        return KVS_ENET;
    s->handles_open++;
    uv_poll_start(&s->poll, UV_READABLE, on_poll);
    uv_check_start(&s->check, on_check);
    s->started = true;
    return 0;
}

static void out_free(struct net_out *o)
{
    for (int i = 0; i < o->nframes; i++)
        zmq_msg_close(&o->frames[i]);
    free(o);
}

static void on_closed(uv_handle_t *h)
{
    net_sock *s = h->data;
    if (--s->handles_open == 0)
        free(s);
}

static void really_free(net_sock *s)
{
    struct net_out *o = s->q_head;
    while (o) {
        struct net_out *n = o->next;
        out_free(o);
        o = n;
    }
    s->q_head = s->q_tail = NULL;
    for (size_t i = 0; i < s->hn; i++)
        out_free(s->heap[i]);
    free(s->heap);
    s->heap = NULL;
    s->hn = s->hcap = 0;
    zmq_close(s->zsock);
    s->zsock = NULL;
    if (s->started)
        uv_close((uv_handle_t *)&s->poll, on_closed);
    uv_close((uv_handle_t *)&s->check, on_closed);
    uv_close((uv_handle_t *)&s->idle, on_closed);
}

void net_sock_free(net_sock *s)
{
    if (s == NULL || s->closing)
        return;
    s->closing = true;
    if (!s->in_drain)
        really_free(s);
}

/* Try to send o now.  0: sent; EAGAIN: keep it; other errno: dropped. */
static int out_try(net_sock *s, struct net_out *o)
{
    for (int i = 0; i < o->nframes; i++) {
        int more = i + 1 < o->nframes ? ZMQ_SNDMORE : 0;
        if (zmq_msg_send(&o->frames[i], s->zsock, ZMQ_DONTWAIT | more) < 0) {
            int e = zmq_errno();
            if (i == 0 && e == EAGAIN)
                return EAGAIN;
            /* Frames after the first cannot meet the water mark; any error
             * here (or EHOSTUNREACH on the first) drops the message. */
            return e == EAGAIN ? EIO : e;
        }
        /* a sent frame is emptied by ZeroMQ; closing it later is harmless */
    }
    return 0;
}

static void flush_queue(net_sock *s)
{
    while (s->q_head) {
        struct net_out *o = s->q_head;
        int rc = out_try(s, o);
        if (rc == EAGAIN)
            return;
        if (rc != 0)
            LOG_LIMITED(LOG_WARN, NULL, "net", "queued message dropped: %s", zmq_strerror(rc));
        s->q_head = o->next;
        if (s->q_head == NULL)
            s->q_tail = NULL;
        s->queued--;
        out_free(o);
    }
}

/* ---- priority order ---- */

static bool out_before(const struct net_out *a, const struct net_out *b)
{
    return a->prio != b->prio ? a->prio > b->prio : a->seq < b->seq;
}

static int heap_push(net_sock *s, struct net_out *o)
{
    if (s->hn == s->hcap) {
        size_t cap = s->hcap ? 2 * s->hcap : 64;
        struct net_out **h = realloc(s->heap, cap * sizeof *h);
        if (h == NULL)
            return KVS_ENOMEM;
        s->heap = h;
        s->hcap = cap;
    }
    size_t i = s->hn++;
    s->heap[i] = o;
    while (i > 0 && out_before(s->heap[i], s->heap[(i - 1) / 2])) {
        struct net_out *t = s->heap[i];
        s->heap[i] = s->heap[(i - 1) / 2];
        s->heap[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
    return 0;
}

static void heap_pop(net_sock *s)
{
    struct net_out **h = s->heap;
    size_t i = 0;
    h[0] = h[--s->hn];
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < s->hn && out_before(h[l], h[m]))
            m = l;
        if (r < s->hn && out_before(h[r], h[m]))
            m = r;
        if (m == i)
            break;
        struct net_out *t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

/* Send what waits, highest priority first, until the water mark stops it. */
static void flush_heap(net_sock *s)
{
    while (s->hn > 0) {
        struct net_out *o = s->heap[0];
        int rc = out_try(s, o);
        if (rc == EAGAIN)
            return;
        if (rc != 0)
            LOG_LIMITED(LOG_WARN, NULL, "net", "queued message dropped: %s", zmq_strerror(rc));
        heap_pop(s);
        s->queued--;
        out_free(o);
    }
}

void net_sock_set_prio(net_sock *s, bool on)
{
    s->prio = on;
}

void net_sock_set_split(net_sock *s, uint64_t bytes)
{
    s->split = bytes && bytes < 8 ? 8 : bytes;
}

void net_msg_init(net_msg *m)
{
    m->frames = m->inl;
    m->cap = NET_MAX_FRAMES;
    m->nframes = 0;
    m->total = 0;
}

bool net_msg_room(net_msg *m)
{
    if (m->nframes < m->cap)
        return true;
    if (m->cap >= NET_MAX_FRAMES + NET_MAX_BODY_FRAMES)
        return false;
    int cap = m->cap * 4;
    if (cap > NET_MAX_FRAMES + NET_MAX_BODY_FRAMES)
        cap = NET_MAX_FRAMES + NET_MAX_BODY_FRAMES;
    zmq_msg_t *f = malloc((size_t)cap * sizeof *f);
    if (f == NULL)
        return false;
    for (int i = 0; i < m->nframes; i++) {
        zmq_msg_init(&f[i]);
        zmq_msg_move(&f[i], &m->frames[i]);
        zmq_msg_close(&m->frames[i]);
    }
    if (m->frames != m->inl)
        free(m->frames);
    m->frames = f;
    m->cap = cap;
    return true;
}

void net_msg_close(net_msg *m)
{
    for (int i = 0; i < m->nframes; i++)
        zmq_msg_close(&m->frames[i]);
    if (m->frames != m->inl)
        free(m->frames);
    net_msg_init(m);
}

static int recv_one(net_sock *s, net_msg *m)
{
    int more;
    size_t len = sizeof more;
    net_msg_init(m);
    for (;;) {
        zmq_msg_t tmp, *f = net_msg_room(m) ? &m->frames[m->nframes] : &tmp;
        zmq_msg_init(f);
        if (zmq_msg_recv(f, s->zsock, ZMQ_DONTWAIT) < 0) {
            int e = zmq_errno();
            zmq_msg_close(f);
            if (m->total == 0)
                return e; /* EAGAIN: nothing more */
            /* a multipart message is delivered whole; this should not happen */
            return EIO;
        }
        m->total++;
        if (f == &tmp)
            zmq_msg_close(&tmp);
        else
            m->nframes++;
        if (zmq_getsockopt(s->zsock, ZMQ_RCVMORE, &more, &len) != 0 || !more)
            return 0;
    }
}

/* Reads what the socket holds, up to DRAIN_BUDGET messages per turn.
 * ZMQ_EVENTS (which also runs libzmq's commands: two system calls) is asked
 * before the first message, every PRIO_FLUSH_EVERY messages (sends waiting
 * for POLLOUT go then) and, while sends wait for POLLOUT, after a read found
 * nothing; in between the messages are read directly, so a stream of small
 * messages costs no system call each. */
static void drain(net_sock *s)
{
    int budget = DRAIN_BUDGET, since_events = 0;
    if (s->in_drain || s->closing)
        return;
    s->in_drain = true;
    for (;;) {
        if (since_events == 0) {
            int events = 0;
            size_t len = sizeof events;
            if (zmq_getsockopt(s->zsock, ZMQ_EVENTS, &events, &len) != 0)
                break;
            if ((events & ZMQ_POLLOUT) && s->q_head)
                flush_queue(s);
            if ((events & ZMQ_POLLOUT) && s->hn > 0 && budget < DRAIN_BUDGET)
                flush_heap(s);
            if (!(events & ZMQ_POLLIN))
                break;
        }
        since_events = (since_events + 1) % PRIO_FLUSH_EVERY;
        if (budget-- == 0) {
            uv_idle_start(&s->idle, on_idle); /* more to read: come back at once */
            goto out;
        }
        net_msg m;
        int rc = recv_one(s, &m);
        if (rc == EAGAIN) {
            /* the read ran libzmq's commands as ZMQ_EVENTS would: ZMQ_FD
             * is re-armed; ask it once more only for sends held for POLLOUT */
            if (since_events == 1 || !s->q_head)
                break;
            budget++;
            since_events = 0;
            continue;
        }
        if (rc == 0) {
            count_frames(s, m.frames, m.nframes, 0);
            s->fn(s, &m, s->arg);
        }
        net_msg_close(&m);
        if (s->closing)
            break;
    }
    uv_idle_stop(&s->idle);
out:
    if (s->hn > 0 && !s->closing) {
        /* what the messages of this drain produced, highest priority first;
         * sending may take ZMQ_FD's edge: the next turn drains again (a
         * message the water mark holds back leaves on POLLOUT) */
        size_t before = s->hn;
        flush_heap(s);
        if (s->hn < before)
            uv_idle_start(&s->idle, on_idle);
    }
    s->in_drain = false;
    if (s->closing)
        really_free(s);
}

static void close_frames(zmq_msg_t *body, zmq_msg_t *extra, int nextra)
{
    if (body)
        zmq_msg_close(body);
    for (int i = 0; i < nextra; i++)
        zmq_msg_close(&extra[i]);
}

int net_send(net_sock *s, const void *ident, size_t ident_len, const proto_hdr *h,
             zmq_msg_t *body)
{
    return net_sendv(s, ident, ident_len, h, body, NULL, 0);
}

int net_sendv(net_sock *s, const void *ident, size_t ident_len, const proto_hdr *h,
              zmq_msg_t *body, zmq_msg_t *extra, int nextra)
{
    struct net_out *o;
    int n = 0, rc, pieces = 1;
    uint64_t piece = 0, blen = body ? zmq_msg_size(body) : 0;
    if (s->closing || nextra < 0 || (nextra > 0 && body == NULL)) {
        close_frames(body, extra, nextra > 0 ? nextra : 0);
        return s->closing ? KVS_ENET : KVS_EINVAL;
    }
    if (body && s->split && blen > s->split && nextra == 0) {
        piece = s->split & ~(uint64_t)7;
        pieces = (int)((blen + piece - 1) / piece);
    }
    o = malloc(sizeof *o + (size_t)(2 + pieces + nextra) * sizeof(zmq_msg_t));
    if (o == NULL) {
        close_frames(body, extra, nextra);
        return KVS_ENOMEM;
    }
    o->next = NULL;
    bool made = true;
    if (ident && (made = zmq_msg_init_size(&o->frames[n], ident_len) == 0)) {
        memcpy(zmq_msg_data(&o->frames[n]), ident, ident_len);
        n++;
    }
    if (made && (made = zmq_msg_init_size(&o->frames[n], PROTO_HDR_SIZE) == 0)) {
        proto_encode(h, zmq_msg_data(&o->frames[n]));
        n++;
    }
    if (!made) {
        o->nframes = n; /* the frames made before the one that failed */
        out_free(o);
        close_frames(body, extra, nextra);
        return KVS_ENOMEM;
    }
    if (body && pieces > 1) {
        /* frames of at most piece bytes that point into the body */
        struct net_whole *w = malloc(sizeof *w);
        if (w == NULL) {
            o->nframes = n;
            out_free(o);
            close_frames(body, extra, nextra);
            return KVS_ENOMEM;
        }
        zmq_msg_init(&w->msg);
        zmq_msg_move(&w->msg, body);
        atomic_init(&w->refs, pieces + 1);
        uint8_t *d = zmq_msg_data(&w->msg);
        for (int i = 0; i < pieces; i++) {
            uint64_t off = (uint64_t)i * piece, len = blen - off < piece ? blen - off : piece;
            if (zmq_msg_init_data(&o->frames[n], d + off, len, piece_free, w) != 0) {
                for (int j = i; j < pieces; j++)
                    whole_unref(w); /* the pieces never made */
                o->nframes = n;
                out_free(o);
                whole_unref(w);
                return KVS_ENOMEM;
            }
            n++;
        }
        whole_unref(w); /* ours: the pieces hold it now */
    } else if (body) {
        zmq_msg_init(&o->frames[n]);
        zmq_msg_move(&o->frames[n], body);
        n++;
    }
    for (int i = 0; i < nextra; i++, n++) {
        zmq_msg_init(&o->frames[n]);
        zmq_msg_move(&o->frames[n], &extra[i]);
    }
    o->nframes = n;
    o->prio = h->priority;
    o->seq = s->seq++;
    count_frames(s, o->frames, n, 1);
    if (s->prio) {
        /* sent at the end of this drain (or on the next turn), in priority order */
        if (heap_push(s, o) != 0) {
            out_free(o);
            return KVS_ENOMEM;
        }
        s->queued++;
        if (!s->in_drain)
            uv_idle_start(&s->idle, on_idle);
        return 0;
    }
    if (!s->in_drain)
        /* a send outside our drain may take the edge of ZMQ_FD that announced
         * input (edge-triggered): drain on the next turn instead of waiting */
        uv_idle_start(&s->idle, on_idle);
    if (s->q_head == NULL) {
        rc = out_try(s, o);
        if (rc == 0) {
            out_free(o);
            return 0;
        }
        if (rc != EAGAIN) {
            out_free(o);
            return KVS_ENET;
        }
    }
    if (s->q_tail)
        s->q_tail->next = o;
    else
        s->q_head = o;
    s->q_tail = o;
    s->queued++;
    return 0;
}

int net_send_text(net_sock *s, const void *ident, size_t ident_len, proto_hdr *h,
                  const char *text)
{
    zmq_msg_t body;
    size_t len = text ? strlen(text) : 0;
    h->body_len = len;
    if (len == 0)
        return net_send(s, ident, ident_len, h, NULL);
    if (zmq_msg_init_size(&body, len) != 0)
        return KVS_ENOMEM;
    memcpy(zmq_msg_data(&body), text, len);
    return net_send(s, ident, ident_len, h, &body);
}

void net_sock_drain_now(net_sock *s)
{
    if (s)
        drain(s);
}

size_t net_sock_queued(const net_sock *s)
{
    return s->queued;
}

int net_msg_decode_frames(net_msg *m, bool routed, const proto_limits *lim, proto_hdr *h,
                          zmq_msg_t **body, int *nbody, char *why, size_t whylen)
{
    int first = routed ? 1 : 0, n = m->total - first;
    uint64_t len = 0;
    *body = NULL;
    *nbody = 0;
    if (n < 1 || m->total != m->nframes) {
        snprintf(why, whylen, "%d frames (expected %s, and at most %d body frames)", m->total,
                 routed ? "2 or more" : "1 or more", NET_MAX_BODY_FRAMES);
        return KVS_EPROTO;
    }
    zmq_msg_t *hdr = &m->frames[first];
    if (n > 2 && zmq_msg_size(hdr) == PROTO_HDR_SIZE) {
        const uint8_t *p = zmq_msg_data(hdr);
        int type = p[6] | p[7] << 8;
        if (type == PROTO_FUSED || type == PROTO_FUSED_REF || type == PROTO_FUSED_REPLY) {
            /* the records' frame, then one frame per record with PROTO_F_FRAME */
            for (int i = first + 2; i < m->nframes; i++)
                if (lim && zmq_msg_size(&m->frames[i]) > lim->max_message) {
                    snprintf(why, whylen, "record frame %d of %llu bytes > KVS_MAX_MESSAGE "
                             "(%llu)", i - first - 2,
                             (unsigned long long)zmq_msg_size(&m->frames[i]),
                             (unsigned long long)lim->max_message);
                    return KVS_ETOOBIG;
                }
            int rc = proto_decode(p, PROTO_HDR_SIZE, 2, zmq_msg_size(&m->frames[first + 1]),
                                  lim, h, why, whylen);
            if (rc == 0) {
                *body = &m->frames[first + 1];
                *nbody = n - 1;
            }
            return rc;
        }
    }
    for (int i = first + 1; i < m->nframes; i++) {
        uint64_t fl = zmq_msg_size(&m->frames[i]);
        if (i + 1 < m->nframes && (fl % 8 != 0 || fl == 0)) {
            snprintf(why, whylen, "body frame %d of %d holds %llu bytes: every frame but the "
                     "last must hold a multiple of 8", i - first, n - 1, (unsigned long long)fl);
            return KVS_EPROTO;
        }
        len += fl; /* frames are buffered memory: no overflow */
    }
    if (n > 1 && lim && len > lim->max_message) {
        snprintf(why, whylen, "a body of %llu bytes in %d frames > KVS_MAX_MESSAGE (%llu)",
                 (unsigned long long)len, n - 1, (unsigned long long)lim->max_message);
        return KVS_ETOOBIG;
    }
    int rc = proto_decode(zmq_msg_data(hdr), zmq_msg_size(hdr), n > 1 ? 2 : 1, len, lim, h, why,
                          whylen);
    if (rc == 0 && n > 1) {
        *body = &m->frames[first + 1];
        *nbody = n - 1;
    }
    return rc;
}

int net_msg_decode(net_msg *m, bool routed, const proto_limits *lim, proto_hdr *h,
                   zmq_msg_t **body, char *why, size_t whylen)
{
    int first = routed ? 1 : 0, n = m->total - first, nbody;
    *body = NULL;
    if (n < 1 || n > 2 || m->total > NET_MAX_FRAMES) {
        snprintf(why, whylen, "%d frames (expected %s)", m->total, routed ? "2 or 3" : "1 or 2");
        return KVS_EPROTO;
    }
    return net_msg_decode_frames(m, routed, lim, h, body, &nbody, why, whylen);
}
