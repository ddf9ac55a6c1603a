/* store_int.h - a store entry (one key part), private to the store
 * (store.c) and its push jobs (push.c).  The loop thread owns an entry,
 * except the fields a running job works on (busy: acc, value, upd). */
#ifndef KVS_SERVER_STORE_INT_H
#define KVS_SERVER_STORE_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "kvs.h"
#include "server/buf.h"
#include "server/req.h"

typedef struct srv_entry srv_entry;

struct srv_entry {
    srv_entry *next; /* same hash */
    uint64_t key;
    uint32_t part;
    kvs_dtype dtype;
    uint64_t count, offset, total, bytes;
    bool async;
    srv_buf *value, *acc, *spare;
    uint64_t round; /* completed rounds */
    /* KVS_ELASTIC: the membership epoch this entry's state belongs to, the
     * rounds it had completed when that epoch began (a request's round is
     * base + the round it carries) and the contributions a round needs */
    uint64_t epoch, base;
    int need;
    int npushed;     /* contributions summed into the current round (proto.h contrib) */
    uint8_t *pushed; /* per worker rank: pushed in the current round */
    int8_t *failed;  /* per worker rank: its push of the current round failed (the
                      * status) and it has not pushed again: its pulls of the round fail */
    srv_req *waiting, **waiting_tail; /* answered when the round completes */
    srv_req *pulls;                   /* waiting for a later round */
    srv_req *deferred, **deferred_tail; /* pushes for later rounds */
    uint64_t round_start_ns; /* first push of the current round arrived (metrics) */
    struct srv_upd *upd;                /* optimizer state (server/update.h) */
    bool busy;                          /* a job works on it (acc, value, upd), or it
                                         * waits for the other parts' norms (norm_wait) */
    bool norm_wait;                     /* lamb, split key: the round's sum is in acc and
                                         * phase 1 ran; phase 2 waits for st->norms */
    /* lamb, split key: the last two rounds whose sums this part sent ([1]
     * the last; 0: none), and those sums */
    uint64_t norm_round[2];
    double norm_sums[2][2];
    srv_req *backlog, **backlog_tail;   /* inits and pushes that came while busy */
    struct srv_rsp_acc *rsp;            /* row-sparse rows of the current round (sparse.h) */
    /* gradient compression of the pushes (server/decomp.h): set by the first
     * push, every later one must name the same */
    bool codec_set;
    uint8_t codec;      /* reduce/codec.h id (0: plain) */
    float codec_param;  /* its threshold or ratio, as the first push's body says */
    int codec_wrank;    /* the worker whose push set it */
    bool codec_pull;    /* its pushes ask for compressed replies (PROTO_F_ZPULL) */
    /* compressed replies (decomp.h srv_decomp_round): the encoded value of the
     * last round, its bytes, the next round's (a job makes it while busy), and
     * the server's residual of this part (count floats; NULL until needed) */
    srv_buf *zbody, *znext;
    uint64_t zlen, znext_len;
    float *zres;
};

#endif
