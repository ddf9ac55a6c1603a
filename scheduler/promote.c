/* promote.c - owners of key ranges with replicated servers (promote.h). */
#include <stdio.h>
#include <stdlib.h>

#include "kvs.h"
#include "scheduler/promote.h"

int sched_owners_init(sched_owners *o, int n)
{
    o->n = n;
    o->owner = calloc((size_t)n, sizeof *o->owner);
    o->safe = calloc((size_t)n, sizeof *o->safe);
    o->dead = calloc((size_t)n, sizeof *o->dead);
    if (o->owner == NULL || o->safe == NULL || o->dead == NULL) {
        sched_owners_fini(o);
        return KVS_ENOMEM;
    }
    for (int i = 0; i < n; i++) {
        o->owner[i] = i;
        o->safe[i] = n > 1;
    }
    return 0;
}

void sched_owners_fini(sched_owners *o)
{
    free(o->owner);
    free(o->safe);
    free(o->dead);
    o->owner = NULL;
    o->safe = o->dead = NULL;
}

int sched_owners_backup(const sched_owners *o, int p)
{
    for (int i = 1; i < o->n; i++) {
        int t = (p + i) % o->n;
        if (!o->dead[t])
            return t;
    }
    return -1;
}

int sched_owners_promote(sched_owners *o, int d, char *why, size_t whylen)
{
    if (d < 0 || d >= o->n || o->dead[d]) {
        snprintf(why, whylen, "server %d is not a live server of this job", d);
        return -1;
    }
    int before[o->n];
    for (int p = 0; p < o->n; p++)
        before[p] = o->dead[p] ? -1 : sched_owners_backup(o, p);
    int heir = before[d];
    o->dead[d] = true;
    for (int r = 0; r < o->n; r++) {
        if (o->owner[r] != d || (o->safe[r] && heir >= 0))
            continue;
        if (heir < 0)
            snprintf(why, whylen, "the key range of server %d (held by server %d) is lost: no "
                     "other server lives", r, d);
        else
            snprintf(why, whylen, "the key range of server %d (held by server %d) is lost: its "
                     "backup, server %d, did not hold all of it yet", r, d, heir);
        return -1;
    }
    for (int r = 0; r < o->n; r++) {
        if (o->owner[r] == d) {
            o->owner[r] = heir;
            o->safe[r] = false; /* the heir's backup copies it now */
        }
    }
    for (int p = 0; p < o->n; p++) {
        if (o->dead[p] || sched_owners_backup(o, p) == before[p])
            continue;
        for (int r = 0; r < o->n; r++)
            if (o->owner[r] == p)
                o->safe[r] = false;
    }
    return heir;
}

void sched_owners_synced(sched_owners *o, int p, int t)
{
    if (p < 0 || p >= o->n || o->dead[p] || t < 0 || sched_owners_backup(o, p) != t)
        return;
    for (int r = 0; r < o->n; r++)
        if (o->owner[r] == p)
            o->safe[r] = true;
}

void sched_owners_fmt(const sched_owners *o, char *buf, size_t len)
{
    size_t at = (size_t)snprintf(buf, len, "owners=");
    for (int r = 0; r < o->n && at < len; r++)
        at += (size_t)snprintf(buf + at, len - at, r ? ",%d" : "%d", o->owner[r]);
}
