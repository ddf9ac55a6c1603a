/* io_fail.c - libkvs's I/O thread: failing what is in flight when the job
 * fails or the store closes (io_int.h). */
#include <stdio.h>

#include "common/log.h"
#include "worker/metrics.h"
#include "worker/io_int.h"
#include "worker/op.h"
#include "worker/wrk_int.h"

static void fail_held(kvs_store *s, int err, const char *text);
static void gate_fail(kvs_store *s, int err, const char *text);

static void on_grace(uv_timer_t *t)
{
    kvs_store *s = t->data;
    char text[512];
    pthread_mutex_lock(&s->mu);
    int err = s->fatal ? s->fatal : KVS_EPEERDEAD;
    snprintf(text, sizeof text, "%s", s->fatal_text);
    pthread_mutex_unlock(&s->mu);
    wrk_io_fail(s, err, text, -1, true);
}

/* Fail every request in flight and everything queued (I/O thread).
 *
 * A request sent by reference names memory of the user that a same-host
 * server writes into when it answers; failing it early would let the user
 * free that memory while the server may still write.  So unless force, such
 * requests to a server that is not known dead stay until that server answers
 * (it fails its own waiting requests when it hears of the death), its
 * connection closes (wrk_io_server_gone: it exited; none is kept for a
 * server whose connection closed before this), or PS_HEARTBEAT_TIMEOUT + 2 s
 * have passed, by when a server that lost the scheduler has exited. */
void wrk_io_fail(kvs_store *s, int err, const char *text, int dead_server, bool force)
{
    wrk_reqmap keep;
    bool kept = false;
    wrk_reqmap_init(&keep);
    pthread_mutex_lock(&s->mu);
    if (s->fatal == 0 && err != KVS_ECLOSED)
        LOG(LOG_WARN, s->who, "job", "%s", text);
    wrk_fail_all_locked(s, err, text);
    wrk_reqmap reqs = s->reqs;
    wrk_reqmap_init(&s->reqs);
    hmap_fini(&s->batches); /* every record is failed below */
    hmap_init(&s->batches);
    pthread_mutex_unlock(&s->mu);
    gate_fail(s, err, text);
    size_t it = 0;
    wrk_req *q;
    while ((q = wrk_reqmap_next(&reqs, &it)) != NULL) {
        if (q->op == NULL) /* HELLOs have none */
            continue;
        bool gone = s->srv_gone && q->server >= 0 && q->server < s->c.num_server &&
                    s->srv_gone[q->server];
        if (!force && q->cma_out && q->server != dead_server && !gone &&
            wrk_reqmap_put(&keep, q->req_id, q) == 0) {
            kept = true;
            continue;
        }
        wrk_op_release(q->op->store, q->op, err, text);
    }
    wrk_reqmap_fini(&reqs);
    for (int r = 0; s->pq && r < s->num_servers; r++) {
        wrk_req *queued;
        while ((queued = wrk_pq_pop(&s->pq[r])) != NULL)
            wrk_req_drop(s, queued, err, text);
    }
    s->reqs = keep;
    wrk_met_depth(s);
    fail_held(s, err, text);
    if (err != KVS_ECLOSED) {
        s->io_failed = true;
        wrk_io_close_idle(s);
    }
    if (kept && !s->grace_on) {
        s->grace_on = true;
        uv_timer_start(&s->grace, on_grace, (uint64_t)(s->c.hb_timeout_s * 1000) + 2000, 0);
    }
}

/* After the job failed (or while it begins to: the scheduler's link is
 * gone, the failure not yet handled): server r's connection closed.  A
 * server closes it when it exits (a server that loses the scheduler exits
 * at once, without answering), after its jobs ended, so it writes nothing
 * more: the requests by reference kept for it are failed now instead of at
 * the grace timer, and wrk_io_fail keeps none for it later. */
void wrk_io_server_gone(kvs_store *s, int r)
{
    char text[512];
    wrk_reqmap keep;
    size_t it = 0;
    wrk_req *q;
    if (s->srv_gone && r >= 0 && r < s->c.num_server)
        s->srv_gone[r] = true;
    if (!s->io_failed)
        return;
    pthread_mutex_lock(&s->mu);
    int err = s->fatal ? s->fatal : KVS_EPEERDEAD;
    snprintf(text, sizeof text, "%s", s->fatal_text);
    pthread_mutex_unlock(&s->mu);
    wrk_reqmap_init(&keep);
    wrk_reqmap reqs = s->reqs;
    wrk_reqmap_init(&s->reqs);
    while ((q = wrk_reqmap_next(&reqs, &it)) != NULL) {
        if (q->server == r && q->op != NULL)
            wrk_op_release(q->op->store, q->op, err, text);
        else if (wrk_reqmap_put(&keep, q->req_id, q) != 0 && q->op != NULL)
            wrk_op_release(q->op->store, q->op, err, text); /* out of memory: fail it now */
    }
    wrk_reqmap_fini(&reqs);
    s->reqs = keep;
    wrk_met_depth(s);
    wrk_io_close_idle(s);
}

/* Once the job has failed, close the connection to every server that has
 * no request left in the map: ZeroMQ then drops what it still queues for an
 * unreachable server and releases the zero-copy frames that point at user
 * memory, so the operations holding them complete (with the error). */
void wrk_io_close_idle(kvs_store *s)
{
    for (int r = 0; s->servers && r < s->c.num_server; r++) {
        if (s->servers[r] == NULL)
            continue;
        bool busy = false;
        size_t it = 0;
        wrk_req *q;
        while (!busy && (q = wrk_reqmap_next(&s->reqs, &it)) != NULL)
            busy = q->server == r;
        if (busy)
            continue;
        if (s->mons)
            net_mon_free(s->mons[r]), s->mons[r] = NULL;
        net_sock_free(s->servers[r]);
        s->servers[r] = NULL;
    }
}

void wrk_io_fail_all(kvs_store *s, int err, const char *text)
{
    wrk_io_fail(s, err, text, -1, false);
}

/* Fail every request held for a HELLO answer. */
static void fail_held(kvs_store *s, int err, const char *text)
{
    for (int r = 0; s->held_head && r < s->c.num_server; r++) {
        wrk_req *q = s->held_head[r];
        s->held_head[r] = s->held_tail[r] = NULL;
        while (q) {
            wrk_req *n = q->hnext;
            wrk_req_drop(s, q, err, text);
            q = n;
        }
    }
}

/* The job failed: drop every request of a gated op not handed on yet (the
 * op itself lives on until its stager lets go of it). */
static void gate_fail(kvs_store *s, int err, const char *text)
{
    wrk_op *op = s->gated;
    s->gated = NULL;
    while (op) {
        wrk_op *next = op->gnext;
        size_t i = op->sent, n = op->nreqs;
        op->sent = n;
        for (; i < n; i++)
            wrk_req_drop(s, &op->reqs[i], err, text);
        op = next;
    }
}
