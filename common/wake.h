/* wake.h - wake a libuv loop from other threads without libuv's spin.
 *
 * uv_async_send (libuv 1.44) marks the handle busy, writes its eventfd, and
 * only then marks it done; the loop, on seeing the handle, spins (pause,
 * then sched_yield) until the sender has finished.  A sender preempted
 * between the write and the mark - typical when the write wakes the loop on
 * a busy machine, and certain when the sender runs at a lower priority
 * (KVS_JOB_NICE) - holds the loop for as long as it waits for a CPU: 1-3 ms
 * turns of the server's loop, measured with perf
 * (docs/design/threads-and-priorities.md).
 *
 * A wake_fd is an eventfd of its own watched by a uv_poll_t: a sender
 * writes it unless a wake-up is already pending (one atomic exchange, no
 * state the loop waits for); the loop clears the pending flag, drains the
 * eventfd and calls cb, which must take everything queued so far.  Wake-ups
 * may be spurious (cb finds nothing) but never lost.
 *
 * Threads: wake_fd_send from any thread while the handle is open (the
 * caller makes sure no send runs once wake_fd_close was called);
 * everything else on the loop thread.
 */
#ifndef KVS_COMMON_WAKE_H
#define KVS_COMMON_WAKE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <uv.h>

typedef struct wake_fd wake_fd;

struct wake_fd {
    uv_poll_t poll;      /* poll.data is the caller's (not used here) */
    int fd;              /* eventfd, or -1 */
    atomic_bool pending; /* written, the loop has not drained it yet */
    void (*cb)(wake_fd *w);
    void *data;          /* the caller's */
};

/* Open w on loop (an eventfd watched for reading); cb runs on the loop
 * thread after one or more wake_fd_send.  Returns 0 or a negative errno
 * (w is then unusable and need not be closed). */
int wake_fd_init(uv_loop_t *loop, wake_fd *w, void (*cb)(wake_fd *w));

/* Wake the loop (any thread; never blocks, never waits for the loop). */
void wake_fd_send(wake_fd *w);

/* The loop's handle, for uv_close (the owner closes it like any other
 * handle, e.g. from a uv_walk); once it is closed, wake_fd_fini. */
uv_handle_t *wake_fd_handle(wake_fd *w);

/* Close the eventfd (after the handle was closed, or when the loop is
 * gone).  Idempotent. */
void wake_fd_fini(wake_fd *w);

#endif
