/* test_wake.c - common/wake.c: wake-ups from other threads are never lost
 * (every queued item is delivered with no send after it), never spin, and
 * close cleanly. */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>

#include "common/wake.h"

#define SENDERS 4
#define PER_SENDER 20000

typedef struct box {
    wake_fd w;
    pthread_mutex_t mu;
    uint64_t queued;   /* under mu: items sent, not taken yet */
    uint64_t taken;    /* loop thread: items the callback took */
    uint64_t calls;    /* loop thread: callbacks */
    uint64_t want;
    uv_timer_t deadline;
    bool timed_out;
} box;

static void on_wake(wake_fd *w)
{
    box *b = w->data;
    pthread_mutex_lock(&b->mu);
    b->taken += b->queued;
    b->queued = 0;
    pthread_mutex_unlock(&b->mu);
    b->calls++;
    if (b->taken == b->want)
        uv_stop(w->poll.loop);
}

static void on_deadline(uv_timer_t *t)
{
    box *b = t->data;
    b->timed_out = true;
    uv_stop(t->loop);
}

static void *sender(void *arg)
{
    box *b = arg;
    for (int i = 0; i < PER_SENDER; i++) {
        pthread_mutex_lock(&b->mu);
        b->queued++;
        pthread_mutex_unlock(&b->mu);
        wake_fd_send(&b->w);
        if (i % 64 == 0)
            sched_yield(); /* let the loop drain between sends */
    }
    return NULL;
}

/* A loop with b's wake handle and a deadline of ms on it (on_deadline). */
static void open_all(uv_loop_t *loop, box *b, uint64_t ms)
{
    ck_assert_int_eq(uv_loop_init(loop), 0);
    pthread_mutex_init(&b->mu, NULL);
    ck_assert_int_eq(wake_fd_init(loop, &b->w, on_wake), 0);
    b->w.data = b;
    uv_timer_init(loop, &b->deadline);
    b->deadline.data = b;
    uv_timer_start(&b->deadline, on_deadline, ms, 0);
}

static void close_all(uv_loop_t *loop, box *b)
{
    uv_close(wake_fd_handle(&b->w), NULL);
    uv_close((uv_handle_t *)&b->deadline, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    wake_fd_fini(&b->w);
    wake_fd_fini(&b->w); /* idempotent */
    ck_assert_int_eq(b->w.fd, -1);
    ck_assert_int_eq(uv_loop_close(loop), 0);
}

START_TEST(test_wake_many_senders)
{
    for (int rep = 0; rep < 5; rep++) {
        uv_loop_t loop;
        box b = {.want = (uint64_t)SENDERS * PER_SENDER};
        pthread_t t[SENDERS];
        open_all(&loop, &b, 30000);
        for (int i = 0; i < SENDERS; i++)
            ck_assert_int_eq(pthread_create(&t[i], NULL, sender, &b), 0);
        /* every item sent must reach the callback without any later send:
         * a lost wake-up leaves items queued until the deadline */
        uv_run(&loop, UV_RUN_DEFAULT);
        for (int i = 0; i < SENDERS; i++)
            pthread_join(t[i], NULL);
        ck_assert_msg(!b.timed_out, "rep %d: %llu of %llu items delivered, %llu still queued "
                      "(a lost wake-up)", rep, (unsigned long long)b.taken,
                      (unsigned long long)b.want, (unsigned long long)b.queued);
        ck_assert_uint_eq(b.taken, b.want);
        ck_assert_uint_eq(b.queued, 0);
        ck_assert_uint_ge(b.calls, 1);
        ck_assert_uint_le(b.calls, b.want);
        close_all(&loop, &b);
        pthread_mutex_destroy(&b.mu);
    }
}
END_TEST

START_TEST(test_wake_coalesces)
{
    uv_loop_t loop;
    box b = {.want = 3};
    open_all(&loop, &b, 10000);
    /* three sends before the loop runs: one callback takes all three */
    for (int i = 0; i < 3; i++) {
        b.queued++;
        wake_fd_send(&b.w);
    }
    ck_assert(atomic_load(&b.w.pending));
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert(!b.timed_out);
    ck_assert_uint_eq(b.taken, 3);
    ck_assert_uint_eq(b.calls, 1);
    ck_assert(!atomic_load(&b.w.pending));
    /* and the next send wakes it again */
    b.want = 4;
    b.queued++;
    wake_fd_send(&b.w);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert(!b.timed_out);
    ck_assert_uint_eq(b.taken, 4);
    ck_assert_uint_eq(b.calls, 2);
    close_all(&loop, &b);
    pthread_mutex_destroy(&b.mu);
}
END_TEST

Suite *wake_suite(void)
{
    Suite *s = suite_create("wake");
    TCase *t = tcase_create("wake");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, test_wake_many_senders);
    tcase_add_test(t, test_wake_coalesces);
    suite_add_tcase(s, t);
    return s;
}
