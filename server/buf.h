/* buf.h - the server's value buffers: refcounted, so a reply sends a stored
 * value without a copy while ZeroMQ's I/O thread still reads it.
 *
 * Threads: any; srv_buf_unref is the only function called on ZeroMQ's
 * thread.  A buffer is written only by whoever holds the only reference. */
#ifndef KVS_SERVER_BUF_H
#define KVS_SERVER_BUF_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <zmq.h>

typedef struct srv_buf {
    atomic_int refs;
    uint64_t cap;
    uint8_t *data;
    bool is_msg;   /* data belongs to msg (an adopted received frame) */
    bool mapped;   /* data is a mapping of its own (srv_buf_new_value) */
    zmq_msg_t msg;
} srv_buf;

/* A buffer of at least bytes bytes (cap rounded up to 64), one reference;
 * NULL when out of memory. */
srv_buf *srv_buf_new(uint64_t bytes);
/* The same for a value from an init or a load: rounds that adopt received
 * frames replace it and free it, so one of DP_MAP_MIN bytes or more is a
 * mapping of its own, returned to the kernel then (the heap would keep it
 * resident beside the frames that replaced it), advised to use huge pages:
 * row-sparse keys touch random rows of such values, and with 4 KiB pages
 * each row costs a TLB miss (on a virtual machine, a page-table walk of the
 * host too: 6 us a row for a 2.5 GB table, 0.1 us with 2 MiB pages).  Round buffers stay in the
 * heap, where a freed one is reused without page faults. */
srv_buf *srv_buf_new_value(uint64_t bytes);
/* A buffer made of a received frame (moved out of m): no copy. */
srv_buf *srv_buf_adopt(zmq_msg_t *m);
void srv_buf_unref(srv_buf *b);

#endif
