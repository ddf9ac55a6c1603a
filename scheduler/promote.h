/* promote.h - who owns each key range in a job with replicated servers
 * (KVS_REPLICAS=1), and whether its backup holds all of it: the
 * scheduler's side of docs/design.md "Replicated servers".
 *
 * Range r starts owned by server r.  The backup of a live server p is the
 * next live server after p in ring order.  A range is safe while its
 * owner's backup holds all of it: at the start, and again once the owner
 * reports REPL_SYNCED for its current backup.  When a server dies, its
 * ranges go to its backup, unless one of them is not safe: then it is
 * lost.
 *
 * Pure (no sockets, no clock): the scheduler's loop thread, or a test.
 */
#ifndef KVS_SCHED_PROMOTE_H
#define KVS_SCHED_PROMOTE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct sched_owners {
    int n;       /* servers (key ranges) */
    int *owner;  /* per range: the rank of the server that owns it */
    bool *safe;  /* per range: its owner's backup holds all of it */
    bool *dead;  /* per server rank */
} sched_owners;

/* n servers, each owning its own range, all safe.  0 or KVS_ENOMEM. */
int sched_owners_init(sched_owners *o, int n);
void sched_owners_fini(sched_owners *o);

/* The backup of server p: the next live server after it (-1: none). */
int sched_owners_backup(const sched_owners *o, int p);

/* Server d died.  Returns the rank that owns d's ranges now, or -1 when
 * one of them is lost (no other live server, or not safe), with why naming
 * it; either way d is dead from now on.  Ranges whose owner's backup
 * changed are not safe until that owner's REPL_SYNCED. */
int sched_owners_promote(sched_owners *o, int d, char *why, size_t whylen);

/* Server p reported that server t holds everything it owns: its ranges are
 * safe if t is still its backup. */
void sched_owners_synced(sched_owners *o, int p, int t);

/* "owners=O0,O1,...": the PROMOTE body. */
void sched_owners_fmt(const sched_owners *o, char *buf, size_t len);

#endif
