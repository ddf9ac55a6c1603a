/* metrics.c - see metrics.h. */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include "kvs.h"
#include "metrics.h"

const double met_buckets[MET_NBUCKETS] = {0.00001, 0.000025, 0.00005, 0.0001, 0.00025,
                                          0.0005,  0.001,    0.0025,  0.005,  0.01,
                                          0.025,   0.05,     0.1,     0.25,   0.5,
                                          1,       2.5,      5,       10};

struct met_series {
    met_series *next;
    char *v[2];
    _Atomic uint64_t u;    /* counter value; histogram count */
    _Atomic uint64_t bits; /* gauge value; histogram sum (double bits) */
    _Atomic uint64_t *b; /* histogram: observations <= bucket (not cumulative) */
};

struct met_fam {
    met_fam *next;
    met_reg *reg;
    enum met_type type;
    char *name, *help, *l[2];
    met_series *head, *tail;
};

struct met_reg {
    pthread_mutex_t mu;
    met_fam *head, *tail;
    void (*collect)(void *);
    void *collect_arg;
};

static char *dup_or_null(const char *s, bool *fail)
{
    if (s == NULL)
        return NULL;
    char *d = strdup(s);
    if (d == NULL)
        *fail = true;
    return d;
}

met_reg *met_reg_new(void)
{
    met_reg *r = calloc(1, sizeof *r);
    if (r)
        pthread_mutex_init(&r->mu, NULL);
    return r;
}

static void series_free(met_series *s)
{
    free((void *)s->b);
    free(s->v[0]);
    free(s->v[1]);
    free(s);
}

static void fam_free(met_fam *f)
{
    met_series *s = f->head;
    while (s) {
        met_series *n = s->next;
        series_free(s);
        s = n;
    }
    free(f->name);
    free(f->help);
    free(f->l[0]);
    free(f->l[1]);
    free(f);
}

void met_reg_free(met_reg *r)
{
    if (r == NULL)
        return;
    met_fam *f = r->head;
    while (f) {
        met_fam *n = f->next;
        fam_free(f);
        f = n;
    }
    pthread_mutex_destroy(&r->mu);
    free(r);
}

void met_reg_on_collect(met_reg *r, void (*fn)(void *arg), void *arg)
{
    if (r == NULL)
        return;
    pthread_mutex_lock(&r->mu);
    r->collect = fn;
    r->collect_arg = arg;
    pthread_mutex_unlock(&r->mu);
}

met_fam *met_family(met_reg *r, enum met_type type, const char *name, const char *help,
                    const char *label1, const char *label2)
{
    met_fam *f;
    bool fail = false;
    if (r == NULL)
        return NULL;
    pthread_mutex_lock(&r->mu);
    for (f = r->head; f; f = f->next)
        if (!strcmp(f->name, name))
            goto out;
    f = calloc(1, sizeof *f);
    if (f == NULL)
        goto out;
    f->type = type;
    f->reg = r;
    f->name = dup_or_null(name, &fail);
    f->help = dup_or_null(help, &fail);
    f->l[0] = dup_or_null(label1, &fail);
    f->l[1] = label1 ? dup_or_null(label2, &fail) : NULL;
    if (fail) {
        fam_free(f);
        f = NULL;
        goto out;
    }
    if (r->tail)
        r->tail->next = f;
    else
        r->head = f;
    r->tail = f;
out:
    pthread_mutex_unlock(&r->mu);
    return f;
}

static bool same(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a && b && !strcmp(a, b));
}

met_series *met_get(met_fam *f, const char *v1, const char *v2)
{
    met_series *s;
    bool fail = false;
    if (f == NULL)
        return NULL;
    if (f->l[0] == NULL)
        v1 = NULL;
    if (f->l[1] == NULL)
        v2 = NULL;
    pthread_mutex_lock(&f->reg->mu);
    for (s = f->head; s; s = s->next)
        if (same(s->v[0], v1) && same(s->v[1], v2))
            goto out;
    s = calloc(1, sizeof *s);
    if (s == NULL)
        goto out;
    if (f->type == MET_HISTOGRAM && (s->b = calloc(MET_NBUCKETS, sizeof *s->b)) == NULL)
        fail = true;
    s->v[0] = dup_or_null(f->l[0] ? (v1 ? v1 : "") : NULL, &fail);
    s->v[1] = dup_or_null(f->l[1] ? (v2 ? v2 : "") : NULL, &fail);
    if (fail) {
        series_free(s);
        s = NULL;
        goto out;
    }
    if (f->tail)
        f->tail->next = s;
    else
        f->head = s;
    f->tail = s;
out:
    pthread_mutex_unlock(&f->reg->mu);
    return s;
}

met_series *met_one(met_reg *r, enum met_type type, const char *name, const char *help)
{
    return met_get(met_family(r, type, name, help, NULL, NULL), NULL, NULL);
}

static double bits_to_d(uint64_t b)
{
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}

static uint64_t d_to_bits(double d)
{
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    return b;
}

static void add_double(_Atomic uint64_t *p, double d)
{
    uint64_t old = atomic_load_explicit(p, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(p, &old, d_to_bits(bits_to_d(old) + d),
                                                  memory_order_relaxed, memory_order_relaxed))
        ;
}

void met_add(met_series *s, uint64_t n)
{
    if (s)
        atomic_fetch_add_explicit(&s->u, n, memory_order_relaxed);
}

void met_counter_set(met_series *s, uint64_t v)
{
    if (s)
        atomic_store_explicit(&s->u, v, memory_order_relaxed);
}

void met_set(met_series *s, double v)
{
    if (s)
        atomic_store_explicit(&s->bits, d_to_bits(v), memory_order_relaxed);
}

void met_gauge_add(met_series *s, double d)
{
    if (s)
        add_double(&s->bits, d);
}

void met_observe(met_series *s, double v)
{
    if (s == NULL || !(v >= 0))
        return;
    int i = 0;
    while (i < MET_NBUCKETS && v > met_buckets[i])
        i++;
    if (i < MET_NBUCKETS)
        atomic_fetch_add_explicit(&s->b[i], 1, memory_order_relaxed);
    add_double(&s->bits, v);
    atomic_fetch_add_explicit(&s->u, 1, memory_order_relaxed);
}

uint64_t met_counter_value(const met_series *s)
{
    return s ? atomic_load_explicit(&((met_series *)s)->u, memory_order_relaxed) : 0;
}

double met_gauge_value(const met_series *s)
{
    return s ? bits_to_d(atomic_load_explicit(&((met_series *)s)->bits, memory_order_relaxed))
             : 0;
}

/* ---- rendering ---- */

typedef struct out {
    char *buf;
    size_t len, n; /* n: bytes the whole text needs */
} out;

static void put(out *o, const char *s, size_t k)
{
    if (o->n + 1 < o->len) {
        size_t room = o->len - 1 - o->n;
        memcpy(o->buf + o->n, s, k < room ? k : room);
    }
    o->n += k;
}

static void putf(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(out *o, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k > 0)
        put(o, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}

/* Label values: backslash, double quote and newline escaped.  Help text:
 * backslash and newline. */
static void put_escaped(out *o, const char *s, bool quote)
{
    for (; *s; s++) {
        if (*s == '\\')
            put(o, "\\\\", 2);
        else if (*s == '\n')
            put(o, "\\n", 2);
        else if (*s == '"' && quote)
            put(o, "\\\"", 2);
        else
            put(o, s, 1);
    }
}

static void put_num(out *o, double v)
{
    if (isnan(v))
        put(o, "NaN", 3);
    else if (isinf(v))
        put(o, v > 0 ? "+Inf" : "-Inf", 4);
    else
        putf(o, "%.15g", v);
}

/* name{l1="v1",l2="v2"[,le="x"]} */
static void put_series(out *o, const met_fam *f, const met_series *s, const char *suffix,
                       const char *le)
{
    bool any = false;
    put(o, f->name, strlen(f->name));
    put(o, suffix, strlen(suffix));
    for (int i = 0; i < 2; i++) {
        if (f->l[i] == NULL)
            continue;
        put(o, any ? "," : "{", 1);
        any = true;
        put(o, f->l[i], strlen(f->l[i]));
        put(o, "=\"", 2);
        put_escaped(o, s->v[i], true);
        put(o, "\"", 1);
    }
    if (le) {
        put(o, any ? "," : "{", 1);
        any = true;
        putf(o, "le=\"%s\"", le);
    }
    if (any)
        put(o, "}", 1);
    put(o, " ", 1);
}

static void render_fam(out *o, const met_fam *f)
{
    static const char *const types[] = {"counter", "gauge", "histogram"};
    if (f->head == NULL)
        return; /* a family without series says nothing */
    putf(o, "# HELP %s ", f->name);
    put_escaped(o, f->help ? f->help : "", false);
    putf(o, "\n# TYPE %s %s\n", f->name, types[f->type]);
    for (const met_series *s = f->head; s; s = s->next) {
        met_series *m = (met_series *)s;
        if (f->type == MET_COUNTER) {
            put_series(o, f, s, "", NULL);
            putf(o, "%llu\n", (unsigned long long)atomic_load(&m->u));
        } else if (f->type == MET_GAUGE) {
            put_series(o, f, s, "", NULL);
            put_num(o, bits_to_d(atomic_load(&m->bits)));
            put(o, "\n", 1);
        } else {
            uint64_t cum = 0;
            char le[32];
            for (int i = 0; i < MET_NBUCKETS; i++) {
                cum += atomic_load(&m->b[i]);
                snprintf(le, sizeof le, "%g", met_buckets[i]);
                put_series(o, f, s, "_bucket", le);
                putf(o, "%llu\n", (unsigned long long)cum);
            }
            /* count is read last: +Inf >= every bucket even while updating */
            uint64_t count = atomic_load(&m->u);
            if (count < cum)
                count = cum;
            put_series(o, f, s, "_bucket", "+Inf");
            putf(o, "%llu\n", (unsigned long long)count);
            put_series(o, f, s, "_sum", NULL);
            put_num(o, bits_to_d(atomic_load(&m->bits)));
            put(o, "\n", 1);
            put_series(o, f, s, "_count", NULL);
            putf(o, "%llu\n", (unsigned long long)count);
        }
    }
}

size_t met_render(met_reg *r, char *buf, size_t len)
{
    out o = {buf, len, 0};
    void (*collect)(void *) = NULL;
    void *arg = NULL;
    if (r == NULL) {
        if (len)
            buf[0] = '\0';
        return 0;
    }
    pthread_mutex_lock(&r->mu);
    collect = r->collect;
    arg = r->collect_arg;
    pthread_mutex_unlock(&r->mu);
    if (collect)
        collect(arg);
    pthread_mutex_lock(&r->mu);
    for (const met_fam *f = r->head; f; f = f->next)
        render_fam(&o, f);
    pthread_mutex_unlock(&r->mu);
    if (len)
        buf[o.n < len ? o.n : len - 1] = '\0';
    return o.n;
}

char *met_render_alloc(met_reg *r, size_t *len)
{
    size_t cap = 16384;
    for (int tries = 0; tries < 8; tries++) {
        char *buf = malloc(cap);
        if (buf == NULL)
            return NULL;
        size_t n = met_render(r, buf, cap);
        if (n < cap) {
            *len = n;
            return buf;
        }
        free(buf);
        cap = n + 4096; /* series may appear between two renders */
    }
    return NULL;
}

/* ---- shared families ---- */

void met_peer_init(met_peer *p, met_reg *r, const char *peer)
{
    static const char *const paths[MET_NPATHS] = {"socket", "cma"};
    met_fam *f[2][2] = {
        {met_family(r, MET_COUNTER, "kvs_received_bytes_total",
                    "Bytes received from a peer, by data path (socket: ZeroMQ messages; cma: "
                    "same-host direct copies)", "peer", "path"),
         met_family(r, MET_COUNTER, "kvs_received_messages_total",
                    "Messages (or direct copies) received from a peer, by data path", "peer",
                    "path")},
        {met_family(r, MET_COUNTER, "kvs_sent_bytes_total",
                    "Bytes sent to a peer, by data path", "peer", "path"),
         met_family(r, MET_COUNTER, "kvs_sent_messages_total",
                    "Messages (or direct copies) sent to a peer, by data path", "peer", "path")}};
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < MET_NPATHS; i++) {
            p->bytes[d][i] = met_get(f[d][0], peer, paths[i]);
            p->msgs[d][i] = met_get(f[d][1], peer, paths[i]);
        }
}

void met_peer_in(const met_peer *p, int path, uint64_t bytes)
{
    if (p == NULL || path < 0 || path >= MET_NPATHS)
        return;
    met_add(p->bytes[0][path], bytes);
    met_add(p->msgs[0][path], 1);
}

void met_peer_out(const met_peer *p, int path, uint64_t bytes)
{
    if (p == NULL || path < 0 || path >= MET_NPATHS)
        return;
    met_add(p->bytes[1][path], bytes);
    met_add(p->msgs[1][path], 1);
}

void met_error(met_reg *r, int code)
{
    met_add(met_get(met_family(r, MET_COUNTER, "kvs_errors_total",
                               "Errors answered or dropped, by kvsd error code", "code", NULL),
                    kvs_errname(code), NULL),
            1);
}

void met_process_info(met_reg *r, const char *role)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    met_set(met_get(met_family(r, MET_GAUGE, "kvs_build_info",
                               "Always 1: the kvsd version and this process's role", "version",
                               "role"),
                    KVS_VERSION_STRING, role),
            1);
    met_set(met_one(r, MET_GAUGE, "kvs_process_start_time_seconds",
                    "Start time of the process since the Unix epoch in seconds"),
            (double)ts.tv_sec + (double)ts.tv_nsec / 1e9);
}
