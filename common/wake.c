/* wake.c - see wake.h. */
#include <errno.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/wake.h"

static void on_poll(uv_poll_t *h, int status, int events)
{
    wake_fd *w = (wake_fd *)h; /* poll is the first member */
    uint64_t n;
    (void)status;
    (void)events;
    /* drain, then clear: a send whose exchange saw the flag set before the
     * clear queued its work before it and cb sees it; a send after the clear
     * writes again.  (Clearing first would lose wake-ups: a write made
     * between the clear and the read is drained here while its sender's
     * flag stays set, and no later send would write.) */
    while (read(w->fd, &n, sizeof n) < 0 && errno == EINTR)
        ;
    atomic_store(&w->pending, false);
    w->cb(w);
}

int wake_fd_init(uv_loop_t *loop, wake_fd *w, void (*cb)(wake_fd *w))
{
    w->cb = cb;
    atomic_init(&w->pending, false);
    w->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->fd < 0)
        return -errno;
    int rc = uv_poll_init(loop, &w->poll, w->fd);
    if (rc == 0)
        rc = uv_poll_start(&w->poll, UV_READABLE, on_poll);
    if (rc != 0) {
        close(w->fd);
        w->fd = -1;
        return rc;
    }
    return 0;
}

void wake_fd_send(wake_fd *w)
{
    if (atomic_exchange(&w->pending, true))
        return; /* the loop has not drained the last one yet: it will see ours */
    uint64_t one = 1;
    while (write(w->fd, &one, sizeof one) < 0 && errno == EINTR)
        ;
    /* EAGAIN (counter at its maximum) cannot happen: at most one write per
     * drain */
}

uv_handle_t *wake_fd_handle(wake_fd *w)
{
    return (uv_handle_t *)&w->poll;
}

void wake_fd_fini(wake_fd *w)
{
    if (w->fd >= 0)
        close(w->fd);
    w->fd = -1;
}
