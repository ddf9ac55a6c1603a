/* buf.c - the server's refcounted value buffers: see buf.h. */
#include <stdlib.h>
#include <sys/mman.h>

#include "common/datapath.h"
#include "server/buf.h"

static srv_buf *buf_new(uint64_t bytes, bool map)
{
    srv_buf *b = malloc(sizeof *b);
    uint64_t cap = (bytes + 63) & ~63ull;
    if (b == NULL)
        return NULL;
    b->is_msg = false;
    b->mapped = map && cap >= DP_MAP_MIN;
    if (b->mapped) {
        void *p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        b->data = p == MAP_FAILED ? NULL : p;
        /* huge pages (where THP is "madvise" or "always"): a row-sparse
         * step reads and writes random rows, a TLB miss each on 4 KiB
         * pages (buf.h); advice only, so failure changes nothing */
        if (b->data)
            (void)madvise(p, cap, MADV_HUGEPAGE);
    } else {
        b->data = aligned_alloc(64, cap ? cap : 64);
    }
    if (b->data == NULL) {
        free(b);
        return NULL;
    }
    atomic_init(&b->refs, 1);
    b->cap = cap;
    return b;
}

srv_buf *srv_buf_new(uint64_t bytes)
{
    return buf_new(bytes, false);
}

srv_buf *srv_buf_new_value(uint64_t bytes)
{
    return buf_new(bytes, true);
}

srv_buf *srv_buf_adopt(zmq_msg_t *m)
{
    srv_buf *b = malloc(sizeof *b);
    if (b == NULL)
        return NULL;
    zmq_msg_init(&b->msg);
    zmq_msg_move(&b->msg, m);
    atomic_init(&b->refs, 1);
    b->is_msg = true;
    b->mapped = false;
    b->data = zmq_msg_data(&b->msg);
    b->cap = zmq_msg_size(&b->msg);
    return b;
}

void srv_buf_unref(srv_buf *b)
{
    if (b && atomic_fetch_sub(&b->refs, 1) == 1) {
        if (b->is_msg)
            zmq_msg_close(&b->msg);
        else if (b->mapped)
            munmap(b->data, b->cap);
        else
            free(b->data);
        free(b);
    }
}
