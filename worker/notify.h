/* notify.h - completion callbacks (kvs_on_complete) of libkvs (private to
 * worker/).
 *
 * A store's callbacks run on one thread of their own, started by the first
 * kvs_on_complete: it waits on store->cv (broadcast whenever an op
 * finishes), and for every registered key with no unfinished op reports
 * the key's failed ops exactly as kvs_wait does (wrk_reap_locked) and calls
 * the callback without mu held.  One thread per store, however many keys
 * are watched. */
#ifndef KVS_WORKER_NOTIFY_H
#define KVS_WORKER_NOTIFY_H

struct kvs_store;

/* Run every callback still registered (each once its key's ops have
 * finished), then stop and join the thread and free its state.  kvs_close,
 * before anything else; no-op when none was started.  Never from the
 * callback thread. */
void wrk_notify_stop(struct kvs_store *s);

#endif
