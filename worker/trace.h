/* trace.h - the worker's timeline (KVS_TRACE=path): Chrome trace-event JSON
 * (the "JSON array" form: opens in Perfetto and chrome://tracing).
 *
 * Per key of every operation, on one async track (id "o<op>k<key>"):
 *   b "push key 7"        queued (the API call), args key, op, round
 *   n "sent"              each part or chunk handed to the socket
 *   n "summed on server"  estimated on this worker's clock from the server's
 *                         report (PROTO_TIMING): arrival + summing time
 *                         ("on server" for init and pull: nothing is summed)
 *   n "round complete"    arrival + the wait for every worker's push
 *   n "replied"           each part's reply arrived (args status)
 *   e                     done: the key's last part replied
 * and barriers as complete ("X") events on their own thread.  Timestamps
 * are microseconds of the real-time clock, so files of several workers on
 * one host line up.
 *
 * Memory is bounded: events go into a ring of a fixed size; a writer thread
 * formats and writes them as they come (every 100 ms, or sooner when the ring
 * is half full).  When the writer cannot keep up, new events are dropped and
 * counted; the count is written at the end ("kvs_trace_dropped").
 *
 * Threads: wrk_trace_add from any thread; open/close on one.
 */
#ifndef KVS_WORKER_TRACE_H
#define KVS_WORKER_TRACE_H

#include <stddef.h>
#include <stdint.h>

enum wrk_tev_kind {
    TEV_QUEUED = 1, /* op, key, optype, round */
    TEV_SENT,       /* op, key, part, server, a = bytes, b = 1 by direct copy, 2 fused */
    TEV_SERVER,     /* op, key, part, server, a = ns on the server, b = ns summing,
                     * c = ns from arrival to round complete */
    TEV_REPLIED,    /* op, key, part, server, status */
    TEV_DONE,       /* op, key */
    TEV_BARRIER,    /* a = ns waited (ts_ns = start) */
};

typedef struct wrk_tev {
    uint64_t ts_ns; /* CLOCK_MONOTONIC */
    uint64_t op, key, round;
    uint64_t a, b, c;
    int32_t server;
    int32_t status;
    uint32_t part;
    uint16_t kind, optype; /* optype: a PROTO_* data request type */
} wrk_tev;

typedef struct wrk_trace wrk_trace;

#define WRK_TRACE_RING 65536 /* events held in memory at most (about 5 MiB) */

/* Create path (truncating it) for worker rank, with a ring of cap events.
 * Returns 0 or KVS_EINVAL (cannot create: err says why) / KVS_ENOMEM. */
int wrk_trace_open(const char *path, int rank, size_t cap, wrk_trace **out, char *err,
                   size_t errlen);

/* Record one event (copied).  Never blocks on the file. */
void wrk_trace_add(wrk_trace *t, const wrk_tev *e);

/* Events recorded and dropped so far. */
uint64_t wrk_trace_dropped(const wrk_trace *t);

/* Write what is left, end the JSON array and close the file.  NULL: no-op. */
void wrk_trace_close(wrk_trace *t);

#endif
