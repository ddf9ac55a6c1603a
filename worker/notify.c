/* notify.c - completion callbacks (kvs_on_complete): see notify.h. */
#include <stdlib.h>

#include "common/err.h"
#include "worker/notify.h"
#include "worker/op.h"
#include "worker/wrk_int.h"

typedef struct wrk_watch {
    uint64_t key;
    kvs_complete_fn fn;
    void *arg;
    struct wrk_watch *next;
} wrk_watch;

typedef struct wrk_notify {
    pthread_t thread;
    bool stop;               /* (mu) kvs_close: run what is left, then end */
    wrk_watch *head, *tail;  /* (mu) registered, in order */
} wrk_notify;

/* (mu) Move the watches whose key has no unfinished op to *ready, in order. */
static wrk_watch *take_ready_locked(kvs_store *s, wrk_notify *n)
{
    wrk_watch *ready = NULL, **rt = &ready, **pp = &n->head, *last = NULL;
    while (*pp) {
        wrk_watch *w = *pp;
        if (wrk_key_busy_locked(s, w->key)) {
            last = w;
            pp = &w->next;
            continue;
        }
        *pp = w->next;
        w->next = NULL;
        *rt = w;
        rt = &w->next;
    }
    n->tail = last;
    return ready;
}

static void *notify_main(void *arg)
{
    kvs_store *s = arg;
    wrk_notify *n = s->notify;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        wrk_watch *ready = take_ready_locked(s, n);
        if (ready == NULL) {
            if (n->stop && n->head == NULL)
                break;
            pthread_cond_wait(&s->cv, &s->mu);
            continue;
        }
        while (ready) {
            wrk_watch *w = ready;
            ready = w->next;
            err_clear();
            /* sets this thread's message, which fn may read */
            int rc = wrk_reap_locked(s, false, w->key);
            pthread_mutex_unlock(&s->mu);
            w->fn(w->key, rc, w->arg);
            free(w);
            pthread_mutex_lock(&s->mu);
        }
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int kvs_on_complete(kvs_store *s, uint64_t key, kvs_complete_fn fn, void *arg)
{
    wrk_watch *w;
    int rc = 0;
    err_clear();
    if (s == NULL || fn == NULL)
        return err_set(KVS_EINVAL, "store or callback is NULL");
    w = calloc(1, sizeof *w);
    if (w == NULL)
        return err_set(KVS_ENOMEM, "out of memory");
    w->key = key;
    w->fn = fn;
    w->arg = arg;
    pthread_mutex_lock(&s->mu);
    if (s->notify && s->notify->stop) {
        rc = err_set(KVS_ECLOSED, "store is closing");
        goto out;
    }
    if (s->notify == NULL) {
        wrk_notify *n = calloc(1, sizeof *n);
        if (n == NULL) {
            rc = err_set(KVS_ENOMEM, "out of memory");
            goto out;
        }
        s->notify = n;
        if (pthread_create(&n->thread, NULL, notify_main, s) != 0) {
            s->notify = NULL;
            free(n);
            rc = err_set(KVS_ENOMEM, "cannot start the completion thread");
            goto out;
        }
    }
    if (s->notify->tail)
        s->notify->tail->next = w;
    else
        s->notify->head = w;
    s->notify->tail = w;
    w = NULL;
    pthread_cond_broadcast(&s->cv);
out:
    pthread_mutex_unlock(&s->mu);
    free(w);
    return rc;
}

void wrk_notify_stop(kvs_store *s)
{
    pthread_mutex_lock(&s->mu);
    wrk_notify *n = s->notify;
    if (n == NULL) {
        pthread_mutex_unlock(&s->mu);
        return;
    }
    n->stop = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(n->thread, NULL);
    pthread_mutex_lock(&s->mu);
    s->notify = NULL;
    pthread_mutex_unlock(&s->mu);
    free(n);
}
