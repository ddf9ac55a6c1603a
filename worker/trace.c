/* trace.c - see trace.h. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "kvs.h"
#include "proto/proto.h"
#include "worker/trace.h"

struct wrk_trace {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    wrk_tev *ring; /* (mu) */
    size_t cap, head, len;
    uint64_t dropped, written;
    bool stop;
    pthread_t thread;
    FILE *f;       /* (writer) */
    int rank;
    int64_t real_minus_mono_ns; /* add to a monotonic time: real time */
    bool first;    /* (writer) no event written yet */
};

static void op_name(int type, char *buf, size_t len)
{
    snprintf(buf, len, "%s", proto_type_name(type));
    for (char *p = buf; *p; p++)
        *p = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
}

static double us(const wrk_trace *t, uint64_t mono_ns)
{
    return (double)((int64_t)mono_ns + t->real_minus_mono_ns) / 1000.0;
}

static void sep(wrk_trace *t)
{
    fputs(t->first ? "\n" : ",\n", t->f);
    t->first = false;
}

/* One event as one line of JSON (writer thread). */
static void write_event(wrk_trace *t, const wrk_tev *e)
{
    char op[24], id[64];
    op_name(e->optype, op, sizeof op);
    snprintf(id, sizeof id, "o%llu.k%llu", (unsigned long long)e->op,
             (unsigned long long)e->key);
    const char *fmt_head = "{\"name\":\"%s\",\"cat\":\"key\",\"ph\":\"%s\",\"id\":\"%s\","
                           "\"pid\":%d,\"tid\":1,\"ts\":%.3f,\"args\":{\"key\":%llu";
    char name[64];
    switch (e->kind) {
    case TEV_QUEUED:
        snprintf(name, sizeof name, "%s key %llu", op, (unsigned long long)e->key);
        sep(t);
        fprintf(t->f, fmt_head, name, "b", id, t->rank, us(t, e->ts_ns),
                (unsigned long long)e->key);
        fprintf(t->f, ",\"op\":\"%s\",\"round\":%llu,\"event\":\"queued\"}}", op,
                (unsigned long long)e->round);
        break;
    case TEV_SENT:
        sep(t);
        fprintf(t->f, fmt_head, "sent", "n", id, t->rank, us(t, e->ts_ns),
                (unsigned long long)e->key);
        fprintf(t->f, ",\"part\":%u,\"server\":%d,\"bytes\":%llu,\"path\":\"%s\","
                      "\"event\":\"sent\"}}",
                e->part, e->server, (unsigned long long)e->a,
                e->b == 1 ? "cma" : e->b == 2 ? "fused" : e->b == 3 ? "fused_cma" : "socket");
        break;
    case TEV_SERVER: {
        /* the server reports durations; place them on our clock, taking
         * the report's arrival as the moment the server answered */
        uint64_t arrive = e->ts_ns > e->a ? e->ts_ns - e->a : e->ts_ns;
        bool sums = e->optype == PROTO_PUSH || e->optype == PROTO_PUSHPULL;
        sep(t);
        fprintf(t->f, fmt_head, sums ? "summed on server" : "on server", "n", id, t->rank,
                us(t, arrive + e->b), (unsigned long long)e->key);
        fprintf(t->f, ",\"part\":%u,\"server\":%d,\"server_us\":%.3f,\"sum_us\":%.3f,"
                      "\"round_wait_us\":%.3f,\"event\":\"%s\"}}",
                e->part, e->server, (double)e->a / 1000.0, (double)e->b / 1000.0, (double)e->c / 1000.0,
                sums ? "summed" : "server");
        if (e->c) {
            sep(t);
            fprintf(t->f, fmt_head, "round complete", "n", id, t->rank, us(t, arrive + e->c),
                    (unsigned long long)e->key);
            fprintf(t->f, ",\"part\":%u,\"server\":%d,\"event\":\"round\"}}", e->part,
                    e->server);
        }
        break;
    }
    case TEV_REPLIED:
        sep(t);
        fprintf(t->f, fmt_head, "replied", "n", id, t->rank, us(t, e->ts_ns),
                (unsigned long long)e->key);
        fprintf(t->f, ",\"part\":%u,\"server\":%d,\"status\":\"%s\",\"event\":\"replied\"}}",
                e->part, e->server, kvs_errname(e->status));
        break;
    case TEV_DONE:
        snprintf(name, sizeof name, "%s key %llu", op, (unsigned long long)e->key);
        sep(t);
        fprintf(t->f, fmt_head, name, "e", id, t->rank, us(t, e->ts_ns),
                (unsigned long long)e->key);
        fprintf(t->f, ",\"event\":\"done\"}}");
        break;
    case TEV_BARRIER:
        sep(t);
        fprintf(t->f, "{\"name\":\"barrier\",\"cat\":\"barrier\",\"ph\":\"X\",\"pid\":%d,"
                      "\"tid\":2,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"event\":\"barrier\"}}",
                t->rank, us(t, e->ts_ns), (double)e->a / 1000.0);
        break;
    default:
        break;
    }
}

static void *writer(void *arg)
{
    wrk_trace *t = arg;
    wrk_tev *batch = malloc(t->cap * sizeof *batch);
    pthread_mutex_lock(&t->mu);
    for (;;) {
        while (!t->stop && t->len < t->cap / 2) {
            struct timespec dl;
            clock_gettime(CLOCK_REALTIME, &dl);
            dl.tv_nsec += 100000000L;
            if (dl.tv_nsec >= 1000000000L) {
                dl.tv_sec++;
                dl.tv_nsec -= 1000000000L;
            }
            if (pthread_cond_timedwait(&t->cv, &t->mu, &dl) == ETIMEDOUT)
                break;
        }
        size_t n = t->len;
        if (batch == NULL) { /* no memory for a batch: write under the lock */
            for (size_t i = 0; i < n; i++)
                write_event(t, &t->ring[(t->head + i) % t->cap]);
        } else {
            for (size_t i = 0; i < n; i++)
                batch[i] = t->ring[(t->head + i) % t->cap];
        }
        t->head = (t->head + n) % t->cap;
        t->len = 0;
        bool stop = t->stop;
        pthread_mutex_unlock(&t->mu);
        if (batch)
            for (size_t i = 0; i < n; i++)
                write_event(t, &batch[i]);
        fflush(t->f);
        pthread_mutex_lock(&t->mu);
        t->written += n;
        if (stop && t->len == 0)
            break;
    }
    pthread_mutex_unlock(&t->mu);
    free(batch);
    return NULL;
}

int wrk_trace_open(const char *path, int rank, size_t cap, wrk_trace **out, char *err,
                   size_t errlen)
{
    struct timespec rt, mt;
    wrk_trace *t = calloc(1, sizeof *t);
    *out = NULL;
    if (t == NULL || cap < 2 || (t->ring = malloc(cap * sizeof *t->ring)) == NULL) {
        free(t);
        snprintf(err, errlen, "out of memory for the trace ring");
        return KVS_ENOMEM;
    }
    t->f = fopen(path, "w");
    if (t->f == NULL) {
        snprintf(err, errlen, "KVS_TRACE='%s': cannot create the file: %s", path,
                 strerror(errno));
        free(t->ring);
        free(t);
        return KVS_EINVAL;
    }
    setvbuf(t->f, NULL, _IOFBF, 1 << 16);
    t->cap = cap;
    t->rank = rank;
    t->first = true;
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC, &mt);
    t->real_minus_mono_ns = ((int64_t)rt.tv_sec - mt.tv_sec) * 1000000000LL +
                            (rt.tv_nsec - mt.tv_nsec);
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    fputs("[", t->f);
    sep(t);
    fprintf(t->f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                  "\"args\":{\"name\":\"worker %d\"}}", rank, rank);
    sep(t);
    fprintf(t->f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":1,"
                  "\"args\":{\"name\":\"keys\"}}", rank);
    sep(t);
    fprintf(t->f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":2,"
                  "\"args\":{\"name\":\"barriers\"}}", rank);
    if (pthread_create(&t->thread, NULL, writer, t) != 0) {
        fclose(t->f);
        free(t->ring);
        free(t);
        snprintf(err, errlen, "cannot start the trace writer thread");
        return KVS_ENOMEM;
    }
    *out = t;
    return 0;
}

void wrk_trace_add(wrk_trace *t, const wrk_tev *e)
{
    if (t == NULL)
        return;
    pthread_mutex_lock(&t->mu);
    if (t->len == t->cap) {
        t->dropped++;
    } else {
        t->ring[(t->head + t->len) % t->cap] = *e;
        if (++t->len == t->cap / 2)
            pthread_cond_signal(&t->cv);
    }
    pthread_mutex_unlock(&t->mu);
}

uint64_t wrk_trace_dropped(const wrk_trace *t)
{
    if (t == NULL)
        return 0;
    pthread_mutex_lock((pthread_mutex_t *)&t->mu);
    uint64_t d = t->dropped;
    pthread_mutex_unlock((pthread_mutex_t *)&t->mu);
    return d;
}

void wrk_trace_close(wrk_trace *t)
{
    if (t == NULL)
        return;
    pthread_mutex_lock(&t->mu);
    t->stop = true;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->thread, NULL);
    sep(t);
    fprintf(t->f, "{\"name\":\"kvs_trace_dropped\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                  "\"args\":{\"dropped\":%llu,\"written\":%llu}}",
            t->rank, (unsigned long long)t->dropped, (unsigned long long)t->written);
    fputs("\n]\n", t->f);
    fclose(t->f);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t->ring);
    free(t);
}
