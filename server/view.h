/* view.h - what the store shows of one entry (key part) to the controller
 * and the checkpoint writer: a type only, so that server/ckpt.c needs
 * nothing of server/store.c.  The pointers are the store's, valid on the
 * loop thread until the store next runs. */
#ifndef KVS_SERVER_VIEW_H
#define KVS_SERVER_VIEW_H

#include <stdbool.h>
#include <stdint.h>

#include "kvs.h"
#include "server/buf.h"

struct srv_upd;

/* What a checkpoint needs of an entry. */
typedef struct srv_entry_view {
    uint64_t key;
    uint32_t part;
    kvs_dtype dtype;
    uint64_t count, offset, total, bytes;
    uint64_t round;          /* completed rounds */
    bool async;
    const srv_buf *value;
    const struct srv_upd *upd; /* NULL: no update ran yet */
} srv_entry_view;

#endif
