/* push.c - summing a push, and the push jobs of big entries: see push.h. */
#include <errno.h>
#include <stdlib.h>

#include "common/clock.h"
#include "common/datapath.h"
#include "common/log.h"
#include "server/decomp.h"
#include "server/push.h"

/* Sum the body of in (bytes bytes), or the worker's memory at addr when cma
 * is not NULL, into dst as mode says, piece by piece at the pieces'
 * offsets (each element goes through the same operation as with one
 * piece, so the result does not depend on how the body was cut).  Any
 * thread.  0, or an errno of a failed read. */
int srv_sum_into(red_pool *pool, kvs_dtype dt, uint8_t *dst, const uint8_t *base,
                 uint64_t bytes, const srv_in *in, const srv_cma *cma, uint64_t addr, int mode)
{
    size_t esz = kvs_dtype_size(dt);
    if (mode == SUM_NONE || bytes == 0)
        return 0;
    if (cma) {
        if (mode == SUM_BASE) {
            const void *src[1] = {base};
            red_sum(pool, dt, dst, src, 1, bytes / esz);
            mode = SUM_ADD;
        }
        int rc = mode == SUM_COPY ? srv_cma_copy(pool, cma, 0, dst, addr, bytes)
                                  : srv_cma_add(pool, cma, dt, dst, addr, bytes / esz);
        return rc == 0 ? 0 : (errno ? errno : EIO);
    }
    int n = in->frames && in->nframes > 1 ? in->nframes : 1;
    uint64_t off = 0;
    for (int i = 0; i < n && off < bytes; i++) {
        const uint8_t *p = n > 1 ? zmq_msg_data(&in->frames[i]) : in->data;
        uint64_t len = n > 1 ? zmq_msg_size(&in->frames[i]) : bytes;
        if (len > bytes - off)
            len = bytes - off;
        if (mode == SUM_COPY) {
            const void *src[1] = {p};
            red_sum(pool, dt, dst + off, src, 1, len / esz);
        } else if (mode == SUM_ADD) {
            red_add(pool, dt, dst + off, p, len / esz);
        } else {
            const void *src[2] = {base + off, p};
            red_sum(pool, dt, dst + off, src, 2, len / esz);
        }
        off += len;
    }
    return 0;
}

/* One piece (elements lo..hi) of a push with write-backs: sum it, then
 * write the summed piece into each output while it is still in this core's
 * cache (the value is read from memory once instead of once per output, and
 * no job per output follows).  Same operation per element as sum_into on
 * the whole.  A reduction pool thread. */
static void fused_piece(const void *arg, uint64_t lo, uint64_t hi)
{
    srv_push_job *p = (srv_push_job *)arg;
    const srv_entry *e = p->e;
    size_t esz = kvs_dtype_size(e->dtype);
    uint64_t off = lo * esz, len = (hi - lo) * esz;
    srv_in body = srv_req_in(p->r), piece = {NULL, NULL, 0};
    int zero = 0;
    if (body.data)
        piece.data = (const uint8_t *)body.data + off;
    int err = srv_sum_into(NULL, e->dtype, p->dst + off, NULL, len, &piece,
                       p->by_ref ? &p->cma : NULL, p->r->h.cma_src + off, p->mode);
    if (err) {
        atomic_compare_exchange_strong(&p->perr, &zero, err);
        return;
    }
    for (int i = 0; i < p->nwb; i++) {
        srv_wb_target *t = &p->wb[i];
        if (!t->same && atomic_load(&t->err) == 0 &&
            srv_cma_copy(NULL, &t->cma, 1, p->dst + off, t->dst + off, len) != 0) {
            zero = 0;
            atomic_compare_exchange_strong(&t->err, &zero, errno ? errno : EIO);
        }
    }
}

void srv_push_run(srv_job *j)
{
    srv_push_job *p = (srv_push_job *)j;
    srv_entry *e = p->e;
    srv_in in = srv_req_in(p->r);
    uint64_t t0 = clock_ns();
    if (p->nwb > 0) {
        size_t esz = kvs_dtype_size(e->dtype);
        red_pool_for(e->bytes >= DP_CMA_PAR_MIN ? p->pool : NULL, e->bytes / esz,
                     DP_CMA_PAR_CHUNK / esz, fused_piece, p);
        p->err = atomic_load(&p->perr);
    } else {
        p->err = srv_sum_into(p->pool, e->dtype, p->dst, p->old ? p->old->data : NULL,
                          e->bytes, &in, p->by_ref ? &p->cma : NULL, p->r->h.cma_src, p->mode);
    }
    if (p->err == 0 && p->update)
        srv_upd_run(p->pool, &p->step, p->old->data, p->dst);
    if (p->err == 0 && p->zenc && srv_decomp_round(e, p->dst) != 0)
        LOG_LIMITED(LOG_WARN, NULL, "store", "out of memory compressing key %llu part %u: "
                    "this round's replies go plain", (unsigned long long)e->key, e->part);
    p->ns = clock_ns() - t0;
}

/* A request among list (linked by next) by its seq, or NULL. */
static srv_req *find_seq(srv_req *list, uint64_t seq)
{
    while (list && list->seq != seq)
        list = list->next;
    return list;
}

/* The job of e's last push (r) summed the round and wrote it into the
 * outputs p->wb: mark their requests (still waiting, unless they failed
 * meanwhile) so that their replies say so instead of writing again. */
size_t srv_push_mark_written(srv_entry *e, srv_req *r, const srv_push_job *p)
{
    size_t written = 0;
    for (int i = 0; i < p->nwb; i++) {
        uint64_t seq = p->wb[i].seq;
        int err = atomic_load(&p->wb[i].err);
        srv_req *q = r->seq == seq ? r : find_seq(e->waiting, seq);
        if (q == NULL)
            q = find_seq(e->pulls, seq);
        if (q == NULL)
            continue; /* answered already (its worker left): nothing to say */
        q->h.cma_done = err ? -err : 1;
        if (!err)
            written++;
    }
    return written;
}

/* The batches (srv_req.h.fuse) of the fused requests among those p's end
 * answers (see hold_answers), into out when not NULL; how many. */
static size_t fused_answered(const srv_entry *e, const srv_req *r, bool last, uintptr_t *out)
{
    size_t n = 0;
    if (r->h.fuse) {
        if (out)
            out[n] = r->h.fuse;
        n++;
    }
    for (const srv_req *q = last ? e->waiting : NULL; q; q = q->next)
        if (q->h.fuse) {
            if (out)
                out[n] = q->h.fuse;
            n++;
        }
    for (const srv_req *q = last ? e->pulls : NULL; q; q = q->next)
        if (q->h.fuse && q->h.round <= e->round + 1) {
            if (out)
                out[n] = q->h.fuse;
            n++;
        }
    return n;
}

/* p's end answers the fused requests among r, and when r completes the
 * round (last), the requests that completion answers (the round's pushes,
 * pulls of the next round): their batches hold their answers until then
 * (srv_hold_fn).  No memory for the list: nothing held. */
void srv_push_hold_answers(srv_entry *e, srv_req *r, srv_push_job *p, bool last)
{
    size_t n = p->hold ? fused_answered(e, r, last, NULL) : 0;
    if (n == 0 || (p->holds = malloc(n * sizeof *p->holds)) == NULL)
        return; /* none fused (no allocation), or no memory: nothing held */
    p->nholds = (int)fused_answered(e, r, last, p->holds);
    for (int i = 0; i < p->nholds; i++)
        p->hold(p->hold_arg, p->holds[i], 1);
}

/* p ended: its batches may send what they hold (before p's answers). */
void srv_push_release_answers(srv_push_job *p)
{
    for (int i = 0; i < p->nholds; i++)
        p->hold(p->hold_arg, p->holds[i], -1);
    free(p->holds);
    p->holds = NULL;
    p->nholds = 0;
}


/* Will q's reply write e's value into its worker's memory (a pull or
 * pushpull by reference whose worker is still proven)? */
static bool wants_write(srv_cma *cmas, int num_workers, const srv_entry *e,
                        const srv_req *q)
{
    const proto_hdr *h = &q->h;
    return (h->type == PROTO_PULL || h->type == PROTO_PUSHPULL) && (h->flags & PROTO_F_CMA) &&
           h->cma_dst && h->count * kvs_dtype_size(e->dtype) == e->bytes &&
           cmas && q->wrank >= 0 && q->wrank < num_workers && srv_cma_alive(&cmas[q->wrank]);
}

static void add_target(srv_cma *cmas, int num_workers, const srv_entry *e,
                       srv_push_job *p, const srv_req *q)
{
    if (!wants_write(cmas, num_workers, e, q))
        return;
    srv_wb_target *t = &p->wb[p->nwb++];
    t->cma = cmas[q->wrank];
    t->dst = q->h.cma_dst;
    t->seq = q->seq;
    atomic_init(&t->err, 0);
}

/* The job of r, the push that completes e's round, also writes the round's
 * value into the outputs of the requests that completion answers (r and the
 * round's other pushes, pulls waiting for this round) that take it by
 * reference: p->wb.  Only a plain sum (no optimizer: its update needs the
 * whole sum first) of a body in one piece or by reference.  No memory for
 * the list: none (their replies write as before). */
void srv_push_write_backs(srv_cma *cmas, int num_workers, srv_entry *e, srv_req *r,
                          srv_push_job *p)
{
    int n = 1;
    if (r->nframes > 1 || !cmas)
        return;
    for (srv_req *q = e->waiting; q; q = q->next)
        n++;
    for (srv_req *q = e->pulls; q; q = q->next)
        n++;
    if ((p->wb = calloc((size_t)n, sizeof *p->wb)) == NULL)
        return;
    for (srv_req *q = e->waiting; q; q = q->next)
        add_target(cmas, num_workers, e, p, q);
    add_target(cmas, num_workers, e, p, r);
    /* r alone made the round (the last push is also the first: copied, not
     * added) and its answer goes where its data came from: the bytes there
     * are the round's value already */
    if (p->nwb > 0 && p->wb[p->nwb - 1].seq == r->seq && p->mode == SUM_COPY && p->by_ref &&
        r->h.cma_dst == r->h.cma_src)
        p->wb[p->nwb - 1].same = true;
    for (srv_req *q = e->pulls; q; q = q->next)
        if (q->h.round == e->round + 1)
            add_target(cmas, num_workers, e, p, q);
    if (p->nwb == 0) {
        free(p->wb);
        p->wb = NULL;
    }
}
