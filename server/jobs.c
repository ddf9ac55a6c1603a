/* jobs.c - see jobs.h. */
#include <pthread.h>
#include <stdlib.h>

#include "common/clock.h"
#include "common/prio.h"
#include "common/wake.h"
#include "kvs.h"
#include "server/jobs.h"

struct srv_jobs {
    pthread_mutex_t mu;
    pthread_cond_t wake;
    srv_job **heap; /* ready jobs: a binary max-heap on (prio, -seq) */
    size_t n, cap;
    srv_job *done_head, **done_tail; /* finished, for the loop */
    bool stop;
    int nthreads;
    int nice;          /* the runners' niceness (srv_jobs_new) */
    int running;
    pthread_t *tid;
    wake_fd wake_loop; /* the runners wake the loop (not uv_async: common/wake.h) */
    bool wake_ok;       /* wake_loop is open */
    uv_timer_t guard;   /* prio_guard_poll while jobs are pending (KVS_JOB_NICE=auto) */
    bool guard_ok;      /* guard is initialised */
    uint64_t seq;      /* loop thread */
    uint64_t pending;  /* loop thread: submitted, done() not called yet */
    bool stopped;
};

/* a before b in the heap: higher priority, then earlier */
static bool before(const srv_job *a, const srv_job *b)
{
    return a->prio != b->prio ? a->prio > b->prio : a->seq < b->seq;
}

static void heap_up(srv_job **h, size_t i)
{
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!before(h[i], h[p]))
            break;
        srv_job *t = h[i];
        h[i] = h[p];
        h[p] = t;
        i = p;
    }
}

static srv_job *heap_pop(srv_jobs *q)
{
    srv_job **h = q->heap, *top = h[0];
    size_t i = 0;
    h[0] = h[--q->n];
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < q->n && before(h[l], h[m]))
            m = l;
        if (r < q->n && before(h[r], h[m]))
            m = r;
        if (m == i)
            break;
        srv_job *t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
    return top;
}

static void *runner_main(void *arg)
{
    srv_jobs *q = arg;
    prio_lower_self(q->nice); /* Linux: this thread alone; best effort */
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->stop && q->n == 0)
            pthread_cond_wait(&q->wake, &q->mu);
        if (q->stop)
            break;
        srv_job *j = heap_pop(q);
        q->running++;
        pthread_mutex_unlock(&q->mu);
        j->run(j);
        pthread_mutex_lock(&q->mu);
        q->running--;
        j->next = NULL;
        *q->done_tail = j;
        q->done_tail = &j->next;
        pthread_mutex_unlock(&q->mu);
        wake_fd_send(&q->wake_loop); /* outside the lock: the loop may preempt us */
        pthread_mutex_lock(&q->mu);
    }
    pthread_mutex_unlock(&q->mu);
    prio_forget_self();
    return NULL;
}

/* Hand finished jobs to their done() (loop thread). */
static void deliver(srv_jobs *q, bool cancelled)
{
    pthread_mutex_lock(&q->mu);
    srv_job *j = q->done_head;
    q->done_head = NULL;
    q->done_tail = &q->done_head;
    pthread_mutex_unlock(&q->mu);
    while (j) {
        srv_job *n = j->next;
        q->pending--;
        j->done(j, cancelled);
        j = n;
    }
    if (q->pending == 0 && q->guard_ok)
        uv_timer_stop(&q->guard);
}

static void on_guard(uv_timer_t *t)
{
    srv_jobs *q = t->data;
    if (!q->stopped)
        prio_guard_poll(clock_ns());
}

static void on_wake(wake_fd *w)
{
    srv_jobs *q = w->data;
    if (!q->stopped)
        deliver(q, false);
}

int srv_jobs_threads_for(int pool_threads)
{
    return pool_threads >= 2 ? 2 : 1;
}

int srv_jobs_new(uv_loop_t *loop, int nthreads, int nice, srv_jobs **out)
{
    srv_jobs *q = calloc(1, sizeof *q);
    if (q == NULL || nthreads < 1)
        goto fail;
    q->nice = nice;
    q->tid = calloc((size_t)nthreads, sizeof *q->tid);
    q->cap = 64;
    q->heap = malloc(q->cap * sizeof *q->heap);
    if (q->tid == NULL || q->heap == NULL)
        goto fail;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->wake, NULL);
    q->done_tail = &q->done_head;
    if (wake_fd_init(loop, &q->wake_loop, on_wake) != 0) {
        pthread_cond_destroy(&q->wake);
        pthread_mutex_destroy(&q->mu);
        goto fail;
    }
    q->wake_ok = true;
    q->wake_loop.data = q;
    q->guard_ok = q->nice == PRIO_AUTO && uv_timer_init(loop, &q->guard) == 0;
    q->guard.data = q;
    for (int i = 0; i < nthreads; i++) {
        if (pthread_create(&q->tid[i], NULL, runner_main, q) != 0)
            break;
        q->nthreads++;
    }
    if (q->nthreads == 0) {
        uv_close(wake_fd_handle(&q->wake_loop), NULL);
        if (q->guard_ok)
            uv_close((uv_handle_t *)&q->guard, NULL);
        q->stopped = true;
        *out = q; /* freed by the caller's srv_jobs_free after the loop closes */
        return KVS_ENOMEM;
    }
    *out = q;
    return 0;
fail:
    if (q) {
        free(q->tid);
        free(q->heap);
        free(q);
    }
    *out = NULL;
    return KVS_ENOMEM;
}

void srv_jobs_submit(srv_jobs *q, srv_job *j)
{
    j->seq = q->seq++;
    j->next = NULL;
    q->pending++;
    /* (not only on the first of a busy spell: the runners may not have
     * registered with the guard yet then) */
    if (q->guard_ok && !uv_is_active((uv_handle_t *)&q->guard) && prio_guarded() > 0)
        uv_timer_start(&q->guard, on_guard, PRIO_GUARD_TICK_MS, PRIO_GUARD_TICK_MS);
    pthread_mutex_lock(&q->mu);
    if (q->n == q->cap) {
        srv_job **h = realloc(q->heap, 2 * q->cap * sizeof *h);
        if (h == NULL) { /* no room to queue it: run it here (correct, only slower) */
            pthread_mutex_unlock(&q->mu);
            j->run(j);
            q->pending--;
            j->done(j, false);
            return;
        }
        q->heap = h;
        q->cap *= 2;
    }
    q->heap[q->n] = j;
    heap_up(q->heap, q->n++);
    pthread_cond_signal(&q->wake);
    pthread_mutex_unlock(&q->mu);
}

uint64_t srv_jobs_pending(const srv_jobs *q)
{
    return q ? q->pending : 0;
}

uint64_t srv_jobs_submitted(const srv_jobs *q)
{
    return q ? q->seq : 0;
}

void srv_jobs_stop(srv_jobs *q)
{
    if (q == NULL || q->stopped)
        return;
    pthread_mutex_lock(&q->mu);
    q->stop = true;
    pthread_cond_broadcast(&q->wake);
    pthread_mutex_unlock(&q->mu);
    for (int i = 0; i < q->nthreads; i++)
        pthread_join(q->tid[i], NULL);
    q->stopped = true;
    deliver(q, true);
    while (q->n > 0) {
        srv_job *j = heap_pop(q);
        q->pending--;
        j->done(j, true);
    }
}

void srv_jobs_free(srv_jobs *q)
{
    if (q == NULL)
        return;
    srv_jobs_stop(q);
    pthread_cond_destroy(&q->wake);
    pthread_mutex_destroy(&q->mu);
    if (q->wake_ok)
        wake_fd_fini(&q->wake_loop);
    free(q->heap);
    free(q->tid);
    free(q);
}
