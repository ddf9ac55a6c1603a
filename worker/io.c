/* io.c - libkvs's I/O thread: the thread and its loop (io_int.h).  Each
 * wake-up takes the ops queued by the op engine and hands their requests to
 * the sending side (io_send.c); the servers' answers arrive in io_reply.c,
 * the scheduler's messages and the connections in io_hello.c, failures in
 * io_fail.c. */
#include <stdlib.h>

#include "common/err.h"
#include "worker/metrics.h"
#include "worker/io_int.h"
#include "worker/op.h"
#include "worker/wrk_int.h"

static int cmp_prio(const void *a, const void *b)
{
    const wrk_req *x = *(wrk_req *const *)a, *y = *(wrk_req *const *)b;
    if (x->h.priority != y->h.priority)
        return x->h.priority > y->h.priority ? -1 : 1;
    return x->op == y->op ? (x < y ? -1 : 1) : 0;
}

static void on_wake(uv_async_t *h)
{
    kvs_store *s = h->data;
    wrk_op *ops;
    bool stop;
    pthread_mutex_lock(&s->mu);
    ops = s->q_head;
    s->q_head = s->q_tail = NULL;
    stop = s->stop;
    pthread_mutex_unlock(&s->mu);

    ops = wrk_io_gate_take(s, ops);
    if (s->gated)
        wrk_io_gate_pump(s);

    if (ops && wrk_io_p3_credits(s)) {
        for (wrk_op *op = ops, *next; op; op = next) {
            next = op->qnext;
            for (size_t i = 0; i < op->nreqs; i++) {
                wrk_req *q = &op->reqs[i];
                if (q->server < 0 || q->server >= s->num_servers ||
                    wrk_pq_push(&s->pq[q->server], q, q->h.priority) != 0)
                    wrk_io_send(s, q);
            }
        }
        ops = NULL;
    }
    if (s->pq)
        for (int r = 0; r < s->num_servers; r++)
            wrk_io_p3_pump(s, r);
    if (s->routing.p3 && ops && ops->qnext) {
        /* p3: everything queued leaves in priority order (stable per op) */
        size_t n = 0, k = 0;
        for (wrk_op *op = ops; op; op = op->qnext)
            n += op->nreqs;
        wrk_req **all = malloc(n * sizeof *all);
        if (all) {
            for (wrk_op *op = ops; op; op = op->qnext)
                for (size_t i = 0; i < op->nreqs; i++)
                    all[k++] = &op->reqs[i];
            qsort(all, n, sizeof *all, cmp_prio);
            for (size_t i = 0; i < n; i++)
                wrk_io_dispatch(s, all[i]);
            free(all);
            ops = NULL;
        }
    }
    while (ops) {
        wrk_op *next = ops->qnext; /* read first: the op may complete and be freed */
        size_t nreqs = ops->nreqs;
        wrk_req *reqs = ops->reqs;
        for (size_t i = 0; i < nreqs; i++)
            wrk_io_dispatch(s, &reqs[i]);
        ops = next;
    }
    wrk_io_fuse_flush_all(s);
    if (stop)
        uv_stop(&s->loop);
}

static void on_met_timer(uv_timer_t *t)
{
    wrk_met_tick(t->data);
}

static void close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

static void *io_main(void *arg)
{
    kvs_store *s = arg;
    uv_run(&s->loop, UV_RUN_DEFAULT);
    /* stopping: close sockets and handles, let the closes run */
    wrk_met_stop(s);
    net_link_free(s->link);
    s->link = NULL;
    for (int r = 0; s->servers && r < s->c.num_server; r++) {
        net_mon_free(s->mons[r]);
        net_sock_free(s->servers[r]);
    }
    free(s->servers);
    s->servers = NULL;
    free(s->mons);
    s->mons = NULL;
    net_pacer_free(s->pacer);
    s->pacer = NULL;
    /* hellos/cma stay until the store is freed: the map may still point at them */
    pthread_mutex_lock(&s->mu);
    s->credit_live = false; /* the wake handle closes now */
    pthread_mutex_unlock(&s->mu);
    uv_walk(&s->loop, close_walk, NULL);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    /* requests still in flight can never complete now */
    wrk_io_fail(s, KVS_ECLOSED, "store closed", -1, true);
    return NULL;
}

int wrk_io_start(kvs_store *s)
{
    int rc;
    uv_loop_init(&s->loop);
    uv_async_init(&s->loop, &s->wake, on_wake);
    s->wake.data = s;
    uv_timer_init(&s->loop, &s->grace);
    s->grace.data = s;
    uv_timer_init(&s->loop, &s->met_timer);
    s->met_timer.data = s;
    uv_timer_start(&s->met_timer, on_met_timer, 1000, 1000);
    uv_unref((uv_handle_t *)&s->met_timer);
    uv_timer_init(&s->loop, &s->connect_timer);
    s->connect_timer.data = s;
    s->zctx = zmq_ctx_new();
    net_link_cbs cbs = {wrk_io_on_sched_msg, wrk_io_on_link_fail, wrk_io_rejoin_extra,
                        wrk_io_on_rejoin};
    rc = s->zctx == NULL ? KVS_ENET
                         : net_link_new(&s->loop, s->zctx, &s->c, CFG_ROLE_WORKER, s->host, "-",
                                        s->c.worker_id, s->grp_reg, s->who, &cbs, s, &s->link);
    if (rc == 0 && wrk_met_serve(s) != 0) {
        char keep[512];
        snprintf(keep, sizeof keep, "%s", kvs_last_error());
        net_link_free(s->link);
        s->link = NULL;
        uv_walk(&s->loop, close_walk, NULL);
        uv_run(&s->loop, UV_RUN_DEFAULT);
        uv_loop_close(&s->loop);
        zmq_ctx_term(s->zctx);
        s->zctx = NULL;
        return err_set(KVS_ENET, "%s", keep);
    }
    if (rc) {
        uv_walk(&s->loop, close_walk, NULL);
        uv_run(&s->loop, UV_RUN_DEFAULT);
        uv_loop_close(&s->loop);
        if (s->zctx)
            zmq_ctx_term(s->zctx);
        s->zctx = NULL;
        return err_set(rc, "cannot connect to the scheduler at %s:%d", s->c.root_uri,
                       s->c.root_port);
    }
    if (pthread_create(&s->thread, NULL, io_main, s) != 0) {
        net_link_free(s->link);
        uv_walk(&s->loop, close_walk, NULL);
        uv_run(&s->loop, UV_RUN_DEFAULT);
        uv_loop_close(&s->loop);
        zmq_ctx_term(s->zctx);
        s->zctx = NULL;
        return err_set(KVS_ENOMEM, "cannot start the I/O thread");
    }
    s->thread_started = true;
    pthread_mutex_lock(&s->mu);
    while (!(s->registered && s->admitted) && s->fatal == 0)
        pthread_cond_wait(&s->cv, &s->mu);
    rc = s->registered && s->admitted ? 0 : s->fatal;
    if (rc)
        err_set(rc, "%s", s->fatal_text);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void wrk_io_stop(kvs_store *s)
{
    if (!s->thread_started)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    uv_async_send(&s->wake);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    s->thread_started = false;
    uv_loop_close(&s->loop);
    zmq_ctx_term(s->zctx);
    s->zctx = NULL;
}
