/* elastic.h - a worker's membership epochs (KVS_ELASTIC; docs/design.md
 * "Elastic workers"), private to worker/.
 *
 * The I/O thread learns each new epoch from the scheduler (known); the
 * program works in the epoch it has seen (seen), which it takes up when a
 * call returns KVS_EMEMBERSHIP: kvs_rank and kvs_num_workers change there,
 * and every key's push count starts again from 0.  Calls nothing else of
 * worker/.  The fields are kvs_store's (wrk_int.h), under store->mu. */
#ifndef KVS_WORKER_ELASTIC_H
#define KVS_WORKER_ELASTIC_H

#include <stddef.h>
#include <stdint.h>

#include "proto/proto.h"
#include "worker/wrk_int.h"

/* An EPOCH from the scheduler (I/O thread; takes mu).  0, or an error with
 * why: a body that does not parse (KVS_EPROTO), or this worker is not a
 * member (KVS_EPEERDEAD): the caller fails the store. */
int wrk_elastic_on_epoch(kvs_store *s, const proto_hdr *h, const char *body, size_t len,
                         char *why, size_t whylen);

/* A call is about to return rc to the program (mu held), the failure of
 * an operation of epoch ep (0: none): KVS_EMEMBERSHIP takes up the epoch
 * the worker knows, after waiting (at most PS_HEARTBEAT_TIMEOUT) for the
 * scheduler's word of it when ep is the program's epoch. */
void wrk_elastic_seen_locked(kvs_store *s, int rc, uint64_t ep);

/* The epoch an operation was numbered in (0: none). */
uint64_t wrk_elastic_op_epoch(const wrk_op *op);

/* Before an operation is numbered (mu held): KVS_EMEMBERSHIP (message set,
 * the epoch taken up) when the worker knows of an epoch the program has not
 * seen, else 0. */
int wrk_elastic_check_locked(kvs_store *s);

/* The round a request of this worker carries: count in the program's epoch
 * (count alone when the job is not elastic).  mu held. */
uint64_t wrk_elastic_round(const kvs_store *s, uint64_t count);

#endif
