/* cma.h - same-host direct copies ("cross-memory attach") between a server
 * and a worker that proved it owns the memory it names.
 *
 * Proof of ownership, over the worker's authenticated connection:
 *   worker -> HELLO (pid P, address A)
 *   server -> CHALLENGE (16 fresh random bytes C)
 *   worker writes C at A in its own memory -> PROOF (P, A, C)
 *   server opens a pidfd for P, reads 16 bytes at A from P: equal to C?
 * Only the process P itself (or one that can already write P's memory)
 * can put a value that did not exist before the challenge at A, so a peer
 * naming another process fails.  The pidfd pins P: before every copy the
 * server checks that P has not exited (so the pid was not reused), and that
 * C is still at A (read back at most every SRV_CMA_RECHECK_NS; every time
 * without a pidfd).  A server never reads from or writes into a process
 * that did not prove itself.
 *
 * Threads: srv_cma_copy may run on the reduction pool's threads; the rest on
 * the server's loop.
 */
#ifndef KVS_SERVER_CMA_H
#define KVS_SERVER_CMA_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto/proto.h"
#include "reduce/reduce.h"

typedef struct srv_cma {
    bool ok;          /* proven: copies allowed */
    bool challenged;  /* a CHALLENGE is out, waiting for the PROOF */
    pid_t pid;
    int pidfd;        /* -1: none (kernel without pidfd_open) */
    uint64_t nonce_addr;
    uint64_t req_id;  /* of the HELLO being answered */
    uint8_t nonce[PROTO_NONCE_LEN]; /* the challenge */
    uint64_t seen_ns; /* (loop) when the challenge was last read back in place */
} srv_cma;

/* Set up c (nothing proven). */
void srv_cma_init(srv_cma *c);
/* Forget c (closes the pidfd). */
void srv_cma_reset(srv_cma *c);

/* A HELLO (body: proto_hello) with request id req_id: remember the claim
 * and write a fresh challenge into challenge.  0, or KVS_EINVAL /
 * KVS_EINTERNAL with why. */
int srv_cma_hello(srv_cma *c, uint64_t req_id, const uint8_t *body,
                  uint8_t challenge[PROTO_NONCE_LEN], char *why, size_t whylen);

/* A PROOF (body: proto_hello with the challenge): check it against the
 * claimed process.  0 (c->ok from now on), or KVS_ENOTSUP (cannot read that
 * process: another host, pid namespace, ptrace rules) / KVS_EAUTH (the
 * process does not hold the challenge, or the proof does not match the
 * HELLO) with why. */
int srv_cma_proof(srv_cma *c, uint64_t req_id, const uint8_t *body, char *why, size_t whylen);

/* True if c is proven and its process is still the one that proved it: its
 * pidfd says it has not exited (every call), and the challenge is still at
 * its address (read back at most every SRV_CMA_RECHECK_NS: the read costs a
 * remote page pin that contends with the copies in flight, and a job's copy
 * runs later than this check anyway; without a pidfd, every call). */
bool srv_cma_alive(srv_cma *c);
#define SRV_CMA_RECHECK_NS 1000000ull

/* The descriptor of request h by reference (PROTO_CMA_LEN bytes at desc:
 * u64 source, u64 destination address), checked: h->cma_src / cma_dst are
 * set and h->body_len becomes the bytes of data the server will read (0
 * with cma_src 0 when h carries none: a PULL, or an INIT without data).  A
 * request that carries data must name a source, and no named range may
 * wrap around the address space.  0, or KVS_EPROTO with why.  Pure: the
 * caller checks that the worker proved its memory (srv_cma_alive). */
int srv_cma_desc(proto_hdr *h, const uint8_t *desc, char *why, size_t whylen);

/* Copy between this process and the worker: read (dir 0) len bytes at addr
 * into buf, or write (dir 1) buf to addr; big copies are spread over pool
 * (may be NULL).  0, or -1 with errno. */
int srv_cma_copy(red_pool *pool, const srv_cma *c, int dir, void *buf, uint64_t addr,
                 uint64_t len);

/* acc += the worker's count elements of dtype at addr, without a buffer of
 * the whole size: pieces are read into a small per-thread buffer and added
 * at their offsets, spread over pool (may be NULL).  The result is the
 * same, bit for bit, as reading everything and calling red_add.  0, or -1
 * with errno. */
int srv_cma_add(red_pool *pool, const srv_cma *c, kvs_dtype dtype, void *acc, uint64_t addr,
                uint64_t count);

#endif
